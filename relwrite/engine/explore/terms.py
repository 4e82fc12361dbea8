"""E-classes seen as graph terms: what the catalogue's relations run on.

A relation reads a graph.  To run one at an e-node, the e-node is
materialized as a small graph: its op applied to graphs of its operand
classes, expanded `depth` levels further (each class shown as its leaf, if
it holds an input or a constant, and as its first `width` e-nodes in turn),
with a placeholder input standing for each class below that depth.  A
multi-level pattern such as ``log(add(1, exp(x)))`` thus matches wherever
the e-graph holds that shape, whatever else its classes hold.  Answers are
graphs over the same placeholders; `placeholder_class` maps each back to the
class it stands for.

Built graphs are hash-consed across rounds, so one shape is one graph
object: a rule already run on it need not run again.  Which e-nodes of a
large class are shown turns with each round.  Nothing recurses deeper than
`depth`.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from relwrite.engine.explore.egraph import AC_OPS, EGraph
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.relations.operands import canonical_key


class TermView:
    """Materialized terms of e-nodes, with placeholders for the classes below `depth`."""

    def __init__(self, egraph: EGraph, depth: int = 3, width: int = 4):
        if depth < 0 or width < 1:
            raise ValueError(f"need depth >= 0 and width >= 1, got depth={depth}, width={width}")
        self.egraph = egraph
        self.depth = depth
        self.width = width
        self.round = 0
        self._built: dict[tuple, Variable | None] = {}
        self._placeholders: dict[int, Variable] = {}
        self._classes: dict[Variable, int] = {}
        self._variants: dict[tuple[int, int], list[Variable]] = {}  # (class, depth) and (-1 - node, depth)
        self._made: set[Variable] = set()

    def new_round(self) -> None:
        """Forget this round's variants (the e-graph changed); built shapes are kept."""
        self.round += 1
        self._variants = {}

    def materialized(self, v: Variable) -> bool:
        """Whether `v` is a term this view built from an e-node (interning keeps its shape)."""
        return v in self._made

    def placeholder_class(self, v: Variable) -> int | None:
        """The class a placeholder stands for (None for any other variable)."""
        if v.owner is not None or isinstance(v, Constant):
            return None
        return self._classes.get(v)

    def placeholder(self, cls: int) -> Variable:
        """The input variable standing for class `cls` (typed like the class)."""
        cls = self.egraph.find(cls)
        v = self._placeholders.get(cls)
        if v is None:
            v = Variable(self.egraph.classes[cls].type, name=f"%{cls}")
            self._placeholders[cls] = v
            self._classes[v] = cls
        return v

    def node_terms(self, node: int, depth: int | None = None) -> list[Variable]:
        """Up to `width` graphs of e-node `node`, expanded `depth` levels below it (at most the view's)."""
        return self._node_variants(node, self.depth if depth is None else min(depth, self.depth))

    def class_terms(self, cls: int, depth: int) -> list[Variable]:
        """Up to `width` graphs of class `cls`: its leaf, then its e-nodes expanded `depth` levels."""
        egraph = self.egraph
        cls = egraph.find(cls)
        key = (cls, depth)
        found = self._variants.get(key)
        if found is not None:
            return found
        data = egraph.classes[cls]
        terms: list[Variable] = [data.leaf] if data.leaf is not None else []
        if depth == 0:
            terms = terms or [self.placeholder(cls)]
        else:
            applications = [n for n in data.nodes if egraph.op(n) is not None]
            if len(applications) > self.width - len(terms):  # not all shown: show others next round
                turn = self.round % len(applications)
                applications = applications[turn:] + applications[:turn]
            for n in applications:
                if len(terms) >= self.width:
                    break
                terms.extend(self._node_variants(n, depth - 1)[: self.width - len(terms)])
            terms = terms or [self.placeholder(cls)]
        self._variants[key] = terms
        return terms

    def _node_variants(self, node: int, depth: int) -> list[Variable]:
        key = (-1 - node, depth)
        found = self._variants.get(key)
        if found is not None:
            return found
        op = self.egraph.op(node)
        choices = [self.class_terms(c, depth) for c in self.egraph.children(node)]
        built = []
        for combination in _cheapest_combinations(choices, self.width):
            term = self._build(op, combination)
            if term is not None:
                built.append(term)
        self._variants[key] = built
        return built

    def _build(self, op: Op, operands: Sequence[Variable]) -> Variable | None:
        if op in AC_OPS:
            operands = sorted(operands, key=canonical_key)
        key = (op, tuple(operands))
        if key in self._built:
            return self._built[key]
        try:
            term = op(*operands)
        except (TypeError, ValueError):
            term = None
        if not isinstance(term, Variable):
            term = None
        else:
            self._made.add(term)
        self._built[key] = term
        return term


def _cheapest_combinations(choices: Sequence[Sequence[Variable]], limit: int) -> list[tuple[Variable, ...]]:
    """Up to `limit` picks of one item per list, by increasing sum of positions (first items first)."""
    if any(not c for c in choices):
        return []
    start = (0,) * len(choices)
    heap = [(0, start)]
    seen = {start}
    picks = []
    while heap and len(picks) < limit:
        total, index = heapq.heappop(heap)
        picks.append(tuple(c[i] for c, i in zip(choices, index)))
        for k, i in enumerate(index):
            if i + 1 < len(choices[k]):
                successor = (*index[:k], i + 1, *index[k + 1 :])
                if successor not in seen:
                    seen.add(successor)
                    heapq.heappush(heap, (total + 1, successor))
    return picks

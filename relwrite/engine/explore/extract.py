"""Extraction: the cheapest term of a class, and its distinct terms cheapest first.

A *tree* is one term of the e-graph: an e-node's op over one tree of each
operand class.  Trees are hash-consed (`Trees`), with their cost, computed
bottom-up by a `CostFunction` as in egg's `Extractor`, and their *form*: an
id equal for trees that differ only by associativity and commutativity of
add and mul (nested sums spliced, operands as a multiset), which is what
"distinct" means when forms are listed.

`best_tree` finds a class's cheapest tree by fixpoint iteration over the
e-nodes (costs only decrease).  `enumerate_trees` lists distinct forms
cheapest first, lazily: it keeps the `k` best distinct trees of every
class (the k best trees of a class are made of the k best of its operand
classes, for costs that grow with every operand's cost), and recomputes
with a larger `k` when more are asked for.  Both walk with worklists, never
recursion, so classes nested thousands deep are fine.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

from relwrite.engine.explore.deadline import Deadline
from relwrite.engine.explore.egraph import AC_OPS, EGraph
from relwrite.graph.basic import Op, Variable
from relwrite.graph.types import TensorType
from relwrite.relations.operands import canonical_key


class CostFunction:
    """A cost computed bottom-up, from an e-node's op, its type, and its operands' types and costs.

    A cost must exceed every operand's cost (so cycles never pay); the
    built-in costs add at least a small amount per node.
    """

    name = "cost"

    def leaf(self, value: Variable) -> float:
        """The cost of a graph input or constant."""
        raise NotImplementedError

    def node(
        self, op: Op, type_: TensorType, operand_types: Sequence[TensorType], operand_costs: Sequence[float]
    ) -> float:
        """The cost of `op` applied to operands of these types and costs, giving a value of `type_`."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<cost {self.name}>"


class Trees:
    """Hash-consed trees (terms picked from an e-graph) with their costs and AC forms."""

    def __init__(self, cost: CostFunction):
        self.cost_function = cost
        self.op: list[Op | None] = []
        self.children: list[tuple[int, ...]] = []
        self.leaf: list[Variable | None] = []
        self.type: list[TensorType] = []
        self.cost: list[float] = []
        self.size: list[int] = []
        self.form: list[int] = []
        self._parts: dict[int, tuple[int, ...]] = {}
        self._exact: dict[tuple, int] = {}
        self._forms: dict[tuple, int] = {}
        self._graphs: dict[int, Variable] = {}

    def of_leaf(self, value: Variable) -> int:
        key = (None, value)
        found = self._exact.get(key)
        if found is not None:
            return found
        t = self._new(None, (), value, value.type, self.cost_function.leaf(value), 1)
        self.form.append(self._forms.setdefault(key, len(self._forms)))
        self._exact[key] = t
        return t

    def of_node(self, op: Op, children: tuple[int, ...], type_: TensorType) -> int:
        if op in AC_OPS:
            children = tuple(sorted(children))
        key = (op, children)
        found = self._exact.get(key)
        if found is not None:
            return found
        cost = self.cost_function.node(
            op, type_, [self.type[c] for c in children], [self.cost[c] for c in children]
        )
        t = self._new(op, children, None, type_, cost, 1 + sum(self.size[c] for c in children))
        if op in AC_OPS:
            parts: list[int] = []
            for c in children:
                spliced = self._parts.get(c)
                if spliced is not None and self.op[c] == op and self.type[c].dtype == type_.dtype:
                    parts.extend(spliced)
                else:
                    parts.append(self.form[c])
            if all(self.type[c].dtype == type_.dtype for c in children):
                self._parts[t] = tuple(parts)
            form_key: tuple = (op, tuple(sorted(parts)))
        else:
            form_key = (op, tuple(self.form[c] for c in children))
        self.form.append(self._forms.setdefault(form_key, len(self._forms)))
        self._exact[key] = t
        return t

    def _new(
        self, op: Op | None, children: tuple[int, ...], leaf: Variable | None, type_: TensorType, cost, size
    ) -> int:
        self.op.append(op)
        self.children.append(children)
        self.leaf.append(leaf)
        self.type.append(type_)
        self.cost.append(cost)
        self.size.append(size)
        return len(self.op) - 1

    def graph(self, tree: int) -> Variable:
        """The graph of a tree (add/mul operands in canonical order), built once."""
        graphs = self._graphs
        stack = [tree]
        while stack:
            t = stack[-1]
            if t in graphs:
                stack.pop()
                continue
            if self.leaf[t] is not None:
                graphs[t] = self.leaf[t]
                stack.pop()
                continue
            missing = [c for c in self.children[t] if c not in graphs]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            inputs = [graphs[c] for c in self.children[t]]
            if self.op[t] in AC_OPS:
                inputs.sort(key=canonical_key)
            graphs[t] = self.op[t](*inputs)
        return graphs[tree]


def _node_tree(egraph: EGraph, trees: Trees, node: int, operand_trees: Sequence[int]) -> int:
    leaf = egraph.leaf(node)
    if leaf is not None:
        return trees.of_leaf(leaf)
    return trees.of_node(egraph.op(node), tuple(operand_trees), egraph.type(node))


def best_tree(egraph: EGraph, root: int, trees: Trees, deadline: Deadline | None = None) -> int:
    """The cheapest tree of `root`'s class (egg's Extractor: iterate until no class improves).

    With a `deadline`, TimeLimitReached once it passes (checked at every class).
    """
    classes = egraph.reachable([root])
    best: dict[int, int] = {}
    changed = True
    while changed:
        changed = False
        for c in reversed(classes):
            if deadline is not None:
                deadline.check("extraction")
            for n in egraph.nodes(c):
                operands = egraph.children(n)
                if any(k not in best for k in operands):
                    continue
                t = _node_tree(egraph, trees, n, [best[k] for k in operands])
                if c not in best or _rank(trees, t) < _rank(trees, best[c]):
                    best[c] = t
                    changed = True
    return best[egraph.find(root)]


def _rank(trees: Trees, t: int) -> tuple[float, int, int]:
    return (trees.cost[t], trees.size[t], trees.form[t])


def enumerate_trees(
    egraph: EGraph, root: int, trees: Trees, k: int = 8, most: int = 4096, deadline: Deadline | None = None
) -> Iterator[int]:
    """Trees of `root`'s class of distinct forms, cheapest first; lazily, up to `most` of them.

    `k` is how many the first pass keeps per class (each further pass keeps four times as many).
    With a `deadline`, TimeLimitReached once it passes (checked at every class a pass visits).
    """
    yielded: set[int] = set()
    while True:
        ranked = _k_best(egraph, root, trees, k, deadline)
        for t in ranked:
            if trees.form[t] not in yielded:
                yielded.add(trees.form[t])
                yield t
                if len(yielded) >= most:
                    return
        if len(ranked) < k or k >= most:
            return
        k = min(4 * k, most)


def _k_best(egraph: EGraph, root: int, trees: Trees, k: int, deadline: Deadline | None) -> list[int]:
    """The `k` cheapest trees of distinct forms of every class reachable from `root`; those of `root`."""
    classes = egraph.reachable([root])
    parents: dict[int, set[int]] = {c: set() for c in classes}
    for c in classes:
        for n in egraph.nodes(c):
            for operand in egraph.children(n):
                parents[operand].add(c)
    lists: dict[int, list[int]] = {c: [] for c in classes}
    versions = dict.fromkeys(classes, 0)
    made: dict[int, tuple[tuple[int, ...], list[int]]] = {}  # e-node -> (operand versions, its trees)
    queue = list(reversed(classes))
    queued = set(queue)
    while queue:
        if deadline is not None:
            deadline.check("extraction")
        c = queue.pop()
        queued.discard(c)
        candidates = list(lists[c])
        for n in egraph.nodes(c):
            operands = egraph.children(n)
            key = tuple(versions[o] for o in operands)
            known = made.get(n)
            if known is None or known[0] != key:
                known = made[n] = (key, _combinations(egraph, trees, n, [lists[o] for o in operands], k))
            candidates.extend(known[1])
        improved = _distinct_best(trees, candidates, k)
        if improved != lists[c]:
            lists[c] = improved
            versions[c] += 1
            for p in parents[c]:
                if p not in queued:
                    queued.add(p)
                    queue.append(p)
    return lists[egraph.find(root)]


def _combinations(egraph: EGraph, trees: Trees, node: int, choices: list[list[int]], k: int) -> list[int]:
    """Up to `k` trees of e-node `node`, cheapest first, from its operand classes' ranked trees."""
    if egraph.leaf(node) is not None:
        return [trees.of_leaf(egraph.leaf(node))]
    if any(not c for c in choices):
        return []
    start = (0,) * len(choices)
    first = _node_tree(egraph, trees, node, [c[0] for c in choices])
    heap = [(_rank(trees, first), start, first)]
    seen = {start}
    found = []
    while heap and len(found) < k:
        _, index, t = heapq.heappop(heap)
        found.append(t)
        for position, i in enumerate(index):
            if i + 1 < len(choices[position]):
                successor = (*index[:position], i + 1, *index[position + 1 :])
                if successor not in seen:
                    seen.add(successor)
                    tree = _node_tree(egraph, trees, node, [c[j] for c, j in zip(choices, successor)])
                    heapq.heappush(heap, (_rank(trees, tree), successor, tree))
    return found


def _distinct_best(trees: Trees, candidates: list[int], k: int) -> list[int]:
    """The `k` cheapest candidates, one per form."""
    best: dict[int, int] = {}
    for t in candidates:
        form = trees.form[t]
        if form not in best or _rank(trees, t) < _rank(trees, best[form]):
            best[form] = t
    return sorted(best.values(), key=lambda t: _rank(trees, t))[:k]

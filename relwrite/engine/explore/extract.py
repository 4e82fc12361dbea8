"""Extraction: the cheapest term of a class, and its distinct terms cheapest first.

A *tree* is one term of the e-graph: an e-node's op over one tree of each
operand class.  Trees are hash-consed (`Trees`), with their cost, computed
bottom-up by a `CostFunction` as in egg's `Extractor`, and their *form*: an
id equal for trees that differ only by associativity and commutativity of
add and mul (nested sums spliced, operands as a multiset), which is what
"distinct" means when forms are listed.

A form is priced as a DAG (`Trees.dag_cost`: a subterm used twice is
counted once, and is one node of the form's graph) when its cost is
additive; `best_dag_tree` and `ranked_trees` choose and order forms so.
A class holding a constant (constant folding put it there) is extracted
as that constant alone, and the constant operands of an add or mul count
folded in a form's identity (``1.0 * x`` is a form of ``x``): listings
differ in structure, not in folded constants.

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
from functools import reduce

import numpy as np

from relwrite.engine.explore.deadline import Deadline
from relwrite.engine.explore.egraph import AC_OPS, EGraph
from relwrite.graph import ops
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.types import TensorType
from relwrite.relations.operands import canonical_key


class CostFunction:
    """A cost computed bottom-up, from an e-node's op, its type, and its operands' types and costs.

    A cost must exceed every operand's cost (so cycles never pay); the
    built-in costs add at least a small amount per node.  An `additive`
    cost is a node's own cost (`node` with operands costing 0) plus its
    operands' costs: then a form is priced as a DAG, each distinct subterm
    counted once (`Trees.dag_cost`).
    """

    name = "cost"
    additive = False

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
        self.own: list[float] = []
        self.form: list[int] = []
        self._parts: dict[int, tuple[int, ...]] = {}
        self._constants: dict[int, tuple[Constant, ...]] = {}
        self._exact: dict[tuple, int] = {}
        self._forms: dict[tuple, int] = {}
        self._graphs: dict[int, Variable] = {}

    def of_leaf(self, value: Variable) -> int:
        key = (None, value)
        found = self._exact.get(key)
        if found is not None:
            return found
        cost = self.cost_function.leaf(value)
        t = self._new(None, (), value, value.type, cost, cost, 1)
        form_key = _constant_key(value.data) if isinstance(value, Constant) else key
        self.form.append(self._forms.setdefault(form_key, len(self._forms)))
        self._exact[key] = t
        return t

    def of_node(self, op: Op, children: tuple[int, ...], type_: TensorType) -> int:
        if op in AC_OPS:
            children = tuple(sorted(children))
        key = (op, children)
        found = self._exact.get(key)
        if found is not None:
            return found
        function = self.cost_function
        operand_types = [self.type[c] for c in children]
        cost = function.node(op, type_, operand_types, [self.cost[c] for c in children])
        own = function.node(op, type_, operand_types, [0.0] * len(children)) if function.additive else cost
        t = self._new(op, children, None, type_, cost, own, 1 + sum(self.size[c] for c in children))
        if op in AC_OPS:
            parts: list[int] = []
            constants: list[Constant] = []
            for c in children:
                spliced = self._parts.get(c)
                if spliced is not None and self.op[c] == op and self.type[c].dtype == type_.dtype:
                    parts.extend(spliced)
                    constants.extend(self._constants[c])
                elif isinstance(self.leaf[c], Constant):
                    constants.append(self.leaf[c])
                else:
                    parts.append(self.form[c])
            if all(self.type[c].dtype == type_.dtype for c in children):
                self._parts[t] = tuple(parts)
                self._constants[t] = tuple(constants)
            parts.extend(self._folded_form(op, constants, bool(parts)))
            if len(parts) == 1:  # x * 1.0 is a form of x
                self.form.append(parts[0])
                self._exact[key] = t
                return t
            form_key: tuple = (op, tuple(sorted(parts)))
        else:
            form_key = (op, tuple(self.form[c] for c in children))
        self.form.append(self._forms.setdefault(form_key, len(self._forms)))
        self._exact[key] = t
        return t

    def _folded_form(self, op: Op, constants: list[Constant], others: bool) -> list[int]:
        """The form of the constant operands of an add or mul folded into one: none when they fold to
        the op's neutral element (0-d 0 or 1) among other operands, so ``1.0 * x`` is a form of ``x``."""
        if not constants:
            return []
        with np.errstate(all="ignore"):
            value = reduce(np.add if op == ops.add else np.multiply, [c.data for c in constants])
        value = np.asarray(value)
        if others and value.ndim == 0 and value == (0 if op == ops.add else 1):
            return []
        return [self._forms.setdefault(_constant_key(value), len(self._forms))]

    def dag_cost(self, tree: int) -> float:
        """The cost of `tree` as a DAG, each distinct subtree counted once (its tree cost unless the
        cost function is `additive`)."""
        if not self.cost_function.additive:
            return self.cost[tree]
        seen, stack, total = {tree}, [tree], 0.0
        while stack:
            t = stack.pop()
            total += self.own[t]
            for c in self.children[t]:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        return total

    def _new(
        self,
        op: Op | None,
        children: tuple[int, ...],
        leaf: Variable | None,
        type_: TensorType,
        cost: float,
        own: float,
        size: int,
    ) -> int:
        self.op.append(op)
        self.children.append(children)
        self.leaf.append(leaf)
        self.type.append(type_)
        self.cost.append(cost)
        self.own.append(own)
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


def _constant_key(value: np.ndarray) -> tuple:
    """The form of a constant: its value (a constant leaf and constant operands folding to it are one)."""
    value = np.asarray(value)
    return ("constant", value.dtype.str, value.shape, value.tobytes())


def _node_tree(egraph: EGraph, trees: Trees, node: int, operand_trees: Sequence[int]) -> int:
    leaf = egraph.leaf(node)
    if leaf is not None:
        return trees.of_leaf(leaf)
    return trees.of_node(egraph.op(node), tuple(operand_trees), egraph.type(node))


def _choices(egraph: EGraph, cls: int) -> list[int]:
    """The e-nodes a class is extracted as: its constant alone when it holds one (so ``sqr(1.0)`` and
    ``abs(-1.0)``, folded into the class of 1.0, are never listed beside it), else every e-node."""
    constant = egraph.constant(cls)
    return egraph.nodes(cls) if constant is None else [constant]


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
            for n in _choices(egraph, c):
                operands = egraph.children(n)
                if any(k not in best for k in operands):
                    continue
                t = _node_tree(egraph, trees, n, [best[k] for k in operands])
                if c not in best or _rank(trees, t) < _rank(trees, best[c]):
                    best[c] = t
                    changed = True
    return best[egraph.find(root)]


def best_dag_tree(
    egraph: EGraph, root: int, trees: Trees, candidates: int = 32, deadline: Deadline | None = None
) -> int:
    """The cheapest tree of `root`'s class priced as a DAG (`Trees.dag_cost`), among the `candidates`
    cheapest distinct forms by tree cost (finding the cheapest DAG outright is NP-hard); `best_tree`
    when the cost is not additive (a DAG then costs what its tree does)."""
    if not trees.cost_function.additive:
        return best_tree(egraph, root, trees, deadline)
    pool = enumerate_trees(egraph, root, trees, k=candidates, most=candidates, deadline=deadline)
    return min(pool, key=lambda t: _dag_rank(trees, t))


def ranked_trees(
    egraph: EGraph, root: int, trees: Trees, most: int = 4096, deadline: Deadline | None = None
) -> Iterator[int]:
    """Up to `most` trees of `root`'s class of distinct forms, cheapest first as DAGs (`Trees.dag_cost`).

    Lazily (`enumerate_trees`) when the cost is not additive; else the `most` cheapest by tree cost are
    found first, then ordered by their DAG cost (which a tree's cost does not bound from below).
    """
    found = enumerate_trees(egraph, root, trees, most=most, deadline=deadline)
    if not trees.cost_function.additive:
        yield from found
        return
    yield from sorted(found, key=lambda t: _dag_rank(trees, t))


def _dag_rank(trees: Trees, t: int) -> tuple[float, float, int, int]:
    return (trees.dag_cost(t), *_rank(trees, t))


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
        for n in _choices(egraph, c):
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
        for n in _choices(egraph, c):
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

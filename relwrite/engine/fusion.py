"""Elementwise fusion: connected elementwise subgraphs become one `Composite` node.

A backend then runs the whole subgraph in one loop over the data instead of
one pass (and one temporary array) per op.

How groups are formed.  Nodes are visited outputs first; each elementwise
node not yet fused starts a group (it is the group's root) that grows towards
the inputs.  Candidates are taken in reverse topological order, so when a
node is considered, every one of its clients that will ever join the group
already has.  A candidate joins when it is elementwise (any `Elemwise`,
`Composite`s included, whose inner graphs are inlined) and either

- all of its outputs are read only inside the group: it becomes inner code; or
- some output is also read outside the group (another op, or a graph
  output): that output stays an output of the Composite (a multi-output
  Composite), provided no outside reader leads back into the group (fusing
  would close a cycle).

Broadcasting.  A Composite's outputs all have the broadcast shape of all its
inputs.  The root depends on every input of its group, so its shape is right.
An extra output is kept only when static shapes prove that the inputs it does
not depend on never enlarge its shape (0-d inputs, or lengths 1 or equal to
its own); otherwise it and its ancestors in the group leave the group (they
can form a group of their own later), which keeps the group closed under the
paths between its nodes.

Constants.  0-d constants are written into the inner graph; larger ones are
inputs of the Composite (they may set its shape).  Groups of a single node,
or without a non-constant input, are left alone (constant folding's job), so
fusing a fused graph again changes nothing.  Everything is iterative: a chain
of 100,000 elementwise nodes becomes one Composite.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable

from relwrite.engine.graph_rewriters import GraphRewriter, commit
from relwrite.engine.profile import WalkProfile
from relwrite.graph.basic import Apply, Constant, Variable
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.ops import Composite, Elemwise
from relwrite.graph.types import TensorType
from relwrite.relations.predicates import broadcasts_into


def _inlined(var: Variable) -> bool:
    """Whether `var` is written into the inner graph rather than passed in (a 0-d constant)."""
    return isinstance(var, Constant) and var.ndim == 0


class _Group:
    """The nodes fused around one root, the members with outside readers, and what it reads."""

    def __init__(self, fgraph: FunctionGraph, root: Apply, position: dict[Apply, int]):
        self.fgraph = fgraph
        self.root = root
        self.position = position
        self.members: set[Apply] = {root}
        self.exported: set[Apply] = set()  # members other than the root read from outside
        self._cleared: set[Apply] = set()  # nodes known not to lead back into the group

    def outside_readers(self, node: Apply) -> list[Apply | str]:
        """The readers of `node`'s outputs that are not members (nodes, or "output")."""
        clients = self.fgraph.clients
        return [c for out in node.outputs for c, _ in clients.get(out, ()) if c not in self.members]

    def grow(self) -> None:
        """Take in the root's elementwise ancestors that may join (see the module docstring)."""
        heap: list[tuple[int, int, Apply]] = []
        queued: set[Apply] = set()

        def push_inputs(node: Apply) -> None:
            for var in node.inputs:
                owner = var.owner
                if owner is not None and owner not in queued and isinstance(owner.op, Elemwise):
                    queued.add(owner)
                    heapq.heappush(heap, (-self.position[owner], len(queued), owner))

        push_inputs(self.root)
        while heap:
            node = heapq.heappop(heap)[2]
            readers = self.outside_readers(node)
            if readers:
                if self._leads_back(r for r in readers if r != "output"):
                    continue
                self.exported.add(node)
            self.members.add(node)
            push_inputs(node)

    def _leads_back(self, starts: Iterable[Apply]) -> bool:
        """Whether a path from one of `starts` reaches a member.

        Only nodes placed before the root can, and a node found not to
        reach the group never will: later members come earlier still.
        """
        limit = self.position[self.root]
        clients = self.fgraph.clients
        seen: set[Apply] = set()
        stack = list(starts)
        while stack:
            node = stack.pop()
            if node in self.members:
                return True
            if node in seen or node in self._cleared or self.position[node] > limit:
                continue
            seen.add(node)
            stack.extend(c for out in node.outputs for c, _ in clients.get(out, ()) if c != "output")
        self._cleared |= seen
        return False

    def ordered(self) -> list[Apply]:
        return sorted(self.members, key=self.position.__getitem__)

    def inputs(self) -> list[Variable]:
        """The variables the group reads from outside, 0-d constants excepted, in a stable order."""
        found: dict[Variable, None] = {}
        for node in self.ordered():
            for var in node.inputs:
                if var.owner not in self.members and not _inlined(var):
                    found.setdefault(var, None)
        return list(found)

    def _depends_on(self, node: Apply) -> set[Variable]:
        """The group inputs `node` reads, directly or through other members."""
        found: set[Variable] = set()
        seen = {node}
        stack = [node]
        while stack:
            for var in stack.pop().inputs:
                owner = var.owner
                if owner in self.members:
                    if owner not in seen:
                        seen.add(owner)
                        stack.append(owner)
                elif not _inlined(var):
                    found.add(var)
        return found

    def _full_shape(self, node: Apply, inputs: list[Variable]) -> bool:
        """Whether static shapes prove `node`'s outputs have the shape of the whole group."""
        read = self._depends_on(node)
        out = node.outputs[0]  # a node's outputs share their shape
        return all(broadcasts_into(var, out) for var in inputs if var not in read)

    def _drop_with_ancestors(self, node: Apply) -> None:
        stack = [node]
        while stack:
            current = stack.pop()
            if current in self.members:
                self.members.discard(current)
                self.exported.discard(current)
                stack.extend(v.owner for v in current.inputs if v.owner in self.members)

    def settle_shapes(self) -> None:
        """Drop exported members whose shape may be smaller than the group's, with their ancestors."""
        while True:
            inputs = self.inputs()
            narrow = next(
                (
                    n
                    for n in sorted(self.exported, key=self.position.__getitem__)
                    if not self._full_shape(n, inputs)
                ),
                None,
            )
            if narrow is None:
                return
            self._drop_with_ancestors(narrow)

    def worth_fusing(self) -> bool:
        if len(self.members) < 2:
            return False
        return bool(self.inputs())

    def composite_replacements(self) -> list[tuple[Variable, Variable]] | None:
        """(old output, Composite output) pairs for every output read outside, or None if types refuse."""
        outer_inputs = self.inputs()
        inner: dict[Variable, Variable] = {v: TensorType(v.dtype, ())() for v in outer_inputs}
        outer_outputs: list[Variable] = []
        clients = self.fgraph.clients
        try:
            for node in self.ordered():
                args = [inner.get(v, v) for v in node.inputs]
                results = _inline(node, args)
                inner.update(zip(node.outputs, results))
                outer_outputs.extend(
                    out for out in node.outputs if any(c not in self.members for c, _ in clients.get(out, ()))
                )
            op = Composite([inner[v] for v in outer_inputs], [inner[v] for v in outer_outputs])
            new = op.make_node(*outer_inputs).outputs
        except TypeError:
            return None
        pairs = list(zip(outer_outputs, new))
        if not all(old.type.is_super(replacement.type) for old, replacement in pairs):
            return None
        return pairs


def _inline(node: Apply, args: list[Variable]) -> list[Variable]:
    """`node` applied to the 0-d inner variables `args`; a Composite's own inner graph is copied in.

    A plain node keeps its output dtypes (dtype rules do not depend on shapes), so its
    type inference, already done on the outer node, is not run again.
    """
    if not isinstance(node.op, Composite):
        return Apply(node.op, args, [TensorType(out.dtype, ())() for out in node.outputs]).outputs
    inner = dict(zip(node.op.inputs, args))
    for step in node.op.nodes:
        copy = step.op.make_node(*(inner.get(v, v) for v in step.inputs))
        inner.update(zip(step.outputs, copy.outputs))
    return [inner.get(v, v) for v in node.op.outputs]


class FusionRewriter(GraphRewriter):
    """Fuse connected elementwise subgraphs into `Composite` nodes (see the module docstring)."""

    def __init__(self, name: str | None = None):
        self.name = name

    def apply(self, fgraph: FunctionGraph) -> WalkProfile:
        t0 = time.perf_counter()
        order = fgraph.toposort()
        position = {node: k for k, node in enumerate(order)}
        toposort_time = time.perf_counter() - t0
        nodes_start = len(fgraph.apply_nodes)
        fused = 0
        reorder_time = 0.0
        t1 = time.perf_counter()
        for root in reversed(order):
            if root not in fgraph.apply_nodes or not isinstance(root.op, Elemwise):
                continue
            group = _Group(fgraph, root, position)
            group.grow()
            group.settle_shapes()
            if not group.worth_fusing():
                continue
            pairs = group.composite_replacements()
            if pairs is None or not commit(fgraph, pairs, str(self)):
                continue
            fused += 1
            composite = pairs[0][1].owner
            position[composite] = position[root]
            readers = (
                c for out in composite.outputs for c, _ in fgraph.clients.get(out, ()) if c != "output"
            )
            if any(position[c] <= position[root] for c in readers):  # the order no longer holds
                t2 = time.perf_counter()
                position = {node: k for k, node in enumerate(fgraph.toposort())}
                reorder_time += time.perf_counter() - t2
        loop_time = time.perf_counter() - t1 - reorder_time
        toposort_time += reorder_time
        return WalkProfile(self, fused, nodes_start, len(fgraph.apply_nodes), toposort_time, loop_time, 0.0)

    def __str__(self) -> str:
        return self.name or "elemwise_fusion"

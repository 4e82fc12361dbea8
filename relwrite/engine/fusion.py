"""Elementwise fusion: connected elementwise subgraphs become one `Composite` node.

A backend then runs the whole subgraph in one loop over the data instead of
one pass (and one temporary array) per op.

How groups are formed.  Nodes are visited outputs first; each elementwise
node not yet fused starts a group (it is the group's root) that grows towards
the inputs.  The first group also takes the graph's other sinks (elementwise
nodes no elementwise node reads) as candidates, and is then split where its
members do not read one another: an output whose ancestors another output's
group took would otherwise fuse that whole Composite again (copying it), once
per output (where a candidate stayed out only because it led back into
another part, the parts are grown again one by one: `_Group.fusing_parts`).
Candidates are taken in reverse topological order, so when a
node is considered, every one of its clients that will ever join the group
already has.  A candidate joins when it is elementwise (any `Elemwise`,
`Composite`s included, whose inner graphs are inlined) and either

- all of its outputs are read only inside the group: it becomes inner code; or
- some output is also read outside the group (another op, or a graph
  output): that output stays an output of the Composite (a multi-output
  Composite), provided no outside reader leads back into the group (fusing
  would close a cycle).

Broadcasting.  Each output of a Composite has the broadcast shape of the
inputs it depends on: the root's is the whole group's, an extra output's may
be narrower (a shared intermediate that some inputs of the group never
reach).  Static shapes with unknown lengths rarely prove such an output has
the group's full shape, so fusion does not require it: the backends check
it at run time and run the group op by op where it does not hold (see
`Composite`).  A node that static shapes prove narrower (a lower rank, or a
length 1 where the group's is not) stays out of the group, whether or not
it is read outside: inside, the loop over the full shape would compute it
once per element (`log(xs + 5)` for a vector `xs` in a matrix loop, once per
row); outside, it is computed once, in a loop of its own.  So a DAG of
vectors of unknown lengths with shared intermediates fuses into as few
kernels as its cycles allow.

Unused inputs.  A Composite reads only the inputs its outputs depend on;
`useless_composite` (a node rewriter of the canonicalize and specialize
phases) drops the outputs of any Composite that nothing reads and the
inputs the others do not read (where that cannot change their shape).

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
from relwrite.engine.node_rewriters import node_rewriter
from relwrite.engine.profile import WalkProfile
from relwrite.graph.basic import Apply, Constant, Variable
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.ops import Composite, Elemwise
from relwrite.graph.types import TensorType, broadcast_shapes


def fusable(op: object) -> bool:
    """Whether nodes of `op` may join a fused group: elementwise ops, and Composites whose outputs have
    the shapes of what they read (inlined, an output broadcast against an input it never reads would
    lose that input's shape)."""
    if isinstance(op, Composite):
        return op.output_inputs == op.inputs_read
    return isinstance(op, Elemwise)


def _inlined(var: Variable) -> bool:
    """Whether `var` is written into the inner graph rather than passed in (a 0-d constant)."""
    return isinstance(var, Constant) and var.ndim == 0


class _Group:
    """The nodes fused around one root, the members with outside readers, and what it reads."""

    def __init__(
        self,
        fgraph: FunctionGraph,
        root: Apply,
        position: dict[Apply, int],
        claimed: set[Apply] | None = None,
        limit: int | None = None,
    ):
        self.fgraph = fgraph
        self.root = root
        self.position = position
        self.members: set[Apply] = {root}
        self.exported: set[Apply] = set()  # members other than the root read from outside
        self.claimed = set() if claimed is None else claimed  # members of other groups fused beside this one
        self.limit = position[root] if limit is None else limit  # no member or claimed node comes later
        self.led_back = False  # whether a candidate stayed out because it would close a cycle
        self._cleared: set[Apply] = set()  # nodes known not to lead back into the group

    def outside_readers(self, node: Apply) -> list[Apply | str]:
        """The readers of `node`'s outputs that are not members (nodes, or "output")."""
        clients = self.fgraph.clients
        return [c for out in node.outputs for c, _ in clients.get(out, ()) if c not in self.members]

    def grow(self, sinks: Iterable[Apply] = ()) -> None:
        """Take in the root's elementwise ancestors that may join (see the module docstring), and the
        `sinks` (elementwise nodes no elementwise node reads) that may join with theirs."""
        heap: list[tuple[int, int, Apply]] = []
        queued: set[Apply] = {self.root}

        def push(owner: Apply) -> None:
            if owner not in queued and owner not in self.claimed and fusable(owner.op):
                queued.add(owner)
                heapq.heappush(heap, (-self.position[owner], len(queued), owner))

        def push_inputs(node: Apply) -> None:
            for var in node.inputs:
                if var.owner is not None:
                    push(var.owner)

        push_inputs(self.root)
        for sink in sinks:
            push(sink)
        while heap:
            node = heapq.heappop(heap)[2]
            if node is not self.root and not self._may_be_full(node):
                continue  # narrower: computed once outside rather than once per element inside
            readers = self.outside_readers(node)
            if readers:
                if self._leads_back(r for r in readers if r != "output"):
                    self.led_back = True
                    continue
                self.exported.add(node)
            self.members.add(node)
            push_inputs(node)

    def _may_be_full(self, node: Apply) -> bool:
        """Whether `node`'s outputs may have the group's full shape (the root's), as far as static shapes say.

        A lower rank, or a length 1 where the root's is not, proves them
        narrower: such a node stays out (fused, it would be computed once per
        element of the full shape, and an output of it would always take the
        op-by-op path).  Unknown lengths may be full: the backend checks.
        """
        full = self.root.outputs[0].type.shape
        for out in node.outputs:
            shape = out.type.shape
            if len(shape) != len(full) or any(m == 1 and r != 1 for m, r in zip(shape, full)):
                return False
        return True

    def _leads_back(self, starts: Iterable[Apply]) -> bool:
        """Whether a path from one of `starts` reaches a member, or a node `claimed` by another group.

        Only nodes placed before `limit` can, and a node found not to
        reach them never will: later members come earlier still.
        """
        clients = self.fgraph.clients
        seen: set[Apply] = set()
        stack = list(starts)
        while stack:
            node = stack.pop()
            if node in self.members or node in self.claimed:
                return True
            if node in seen or node in self._cleared or self.position[node] > self.limit:
                continue
            seen.add(node)
            stack.extend(c for out in node.outputs for c, _ in clients.get(out, ()) if c != "output")
        self._cleared |= seen
        return False

    def parts(self) -> list[_Group]:
        """The group split where its members do not read one another (sinks grown together may be
        unrelated computations, whose lengths may differ at run time): one group per part."""
        parent = {node: node for node in self.members}

        def find(node: Apply) -> Apply:
            while parent[node] is not node:
                parent[node] = parent[parent[node]]
                node = parent[node]
            return node

        for node in self.members:
            for var in node.inputs:
                if var.owner in parent:
                    parent[find(var.owner)] = find(node)
        by_part: dict[Apply, set[Apply]] = {}
        for node in self.members:
            by_part.setdefault(find(node), set()).add(node)
        if len(by_part) == 1:
            return [self]
        parts = []
        for members in by_part.values():
            part = _Group(self.fgraph, max(members, key=self.position.__getitem__), self.position)
            part.members = members
            parts.append(part)
        return parts

    def fusing_parts(self) -> list[_Group]:
        """The parts worth fusing; where the group split and a candidate stayed out because it led
        back into the group, each part is grown again, fenced only by the parts grown before it.

        A node that only another part (or a part left unfused, a single node)
        reads back may then join its own part, as a second run would have it
        join: fusion stays idempotent.  No two Composites read each other: a
        part grown again may lead into the parts grown after it, never into
        those grown before it.  Parts are grown again upstream first (by their
        roots' order), so a part that leads into another is grown first.
        """
        parts = self.parts()
        fusing = [part for part in parts if part.worth_fusing()]
        if len(parts) == 1 or not self.led_back:
            return fusing
        claimed: set[Apply] = set()
        regrown: list[_Group] = []
        for part in sorted(fusing, key=lambda part: self.position[part.root]):
            left = [node for node in part.members if node not in claimed]  # an earlier part may take some
            if not left:
                continue
            root = max(left, key=self.position.__getitem__)
            again = _Group(self.fgraph, root, self.position, claimed, self.limit)
            again.grow(node for node in left if node is not root)
            claimed |= again.members
            regrown += (p for p in again.parts() if p.worth_fusing())
        return regrown

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
            op = Composite(
                [inner[v] for v in outer_inputs], [inner[v] for v in outer_outputs], own_shapes=True
            )
            pruned = _pruned(op, outer_inputs, list(range(len(outer_outputs))))  # an inlined Composite's
            if pruned is not None:  # unread input, read by no output: not an input of the fused one
                op, outer_inputs = pruned
            new = op.make_node(*outer_inputs).outputs
        except TypeError:
            return None
        pairs = list(zip(outer_outputs, new))
        if not all(old.type.is_super(replacement.type) for old, replacement in pairs):
            return None
        return pairs


def _pruned(
    op: Composite, inputs: list[Variable], kept: list[int]
) -> tuple[Composite, list[Variable]] | None:
    """A Composite computing only the outputs `kept` of `op` (applied to `inputs`), reading only the
    inputs they depend on, with those inputs; None when nothing would go, or every input would.

    Where every output has the broadcast shape of every input (not
    `own_shapes`), an input no output reads still shapes the outputs: it
    goes only where static shapes prove it fits into the others' shape.
    """
    read = sorted(set().union(*(op.inputs_read[k] for k in kept)))
    if not op.own_shapes:
        shape = broadcast_shapes(*(inputs[i].type.shape for i in read))
        read = [i for i in range(len(inputs)) if i in read or not _fits(inputs[i].type.shape, shape)]
    if not read or (len(read) == len(inputs) and len(kept) == len(op.outputs)):
        return None  # (an elementwise op needs an input to take its shape from)
    pruned = Composite([op.inputs[i] for i in read], [op.outputs[k] for k in kept], own_shapes=op.own_shapes)
    return pruned, [inputs[i] for i in read]


def _fits(shape: tuple, into: tuple) -> bool:
    """Whether static shapes prove an array of `shape` broadcasts to exactly `into`."""
    return len(shape) <= len(into) and all(
        have == 1 or (have is not None and have == want)
        for have, want in zip(reversed(shape), reversed(into))
    )


@node_rewriter([Composite], name="useless_composite")
def useless_composite(fgraph: FunctionGraph, node: Apply) -> dict[Variable, Variable] | bool:
    """Drop the outputs of a Composite that nothing reads, and the inputs the others do not read."""
    kept = [k for k, out in enumerate(node.outputs) if fgraph.clients.get(out)]
    pruned = _pruned(node.op, list(node.inputs), kept) if kept else None
    if pruned is None:
        return False
    op, inputs = pruned
    return dict(zip((node.outputs[k] for k in kept), op.make_node(*inputs).outputs))


def _read_by_fusable(fgraph: FunctionGraph, node: Apply) -> bool:
    """Whether an elementwise node reads an output of `node` (else it is a sink of fusion)."""
    return any(
        c != "output" and fusable(c.op) for out in node.outputs for c, _ in fgraph.clients.get(out, ())
    )


def _inline(node: Apply, args: list[Variable]) -> list[Variable]:
    """`node` applied to the 0-d inner variables `args`; a Composite's own inner graph is copied in.

    Every copy keeps its output dtypes (dtype rules do not depend on shapes, and the
    copies read the dtypes the originals read), so type inference, already done, is not
    run again: a Composite fused into a later group is copied at the cost of its nodes.
    """
    if not isinstance(node.op, Composite):
        return _copy(node, args)
    inner = dict(zip(node.op.inputs, args))
    for step in node.op.nodes:
        inner.update(zip(step.outputs, _copy(step, [inner.get(v, v) for v in step.inputs])))
    return [inner.get(v, v) for v in node.op.outputs]


def _copy(node: Apply, args: list[Variable]) -> list[Variable]:
    """The outputs of `node`'s op applied to 0-d `args` of the dtypes its inputs have."""
    return Apply(node.op, args, [TensorType(out.dtype, ())() for out in node.outputs]).outputs


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
        sinks = [node for node in reversed(order) if fusable(node.op) and not _read_by_fusable(fgraph, node)]
        for root in reversed(order):
            if root not in fgraph.apply_nodes or not fusable(root.op):
                continue
            group = _Group(fgraph, root, position)
            group.grow(sinks)  # the first group takes every sink it may: each would fuse it again
            sinks = []
            reorder = False
            for part in group.fusing_parts():
                pairs = part.composite_replacements()
                if pairs is None or not commit(fgraph, pairs, str(self)):
                    continue
                fused += 1
                composite = pairs[0][1].owner
                position[composite] = position[part.root]
                readers = (
                    c for out in composite.outputs for c, _ in fgraph.clients.get(out, ()) if c != "output"
                )
                reorder = reorder or any(position[c] <= position[part.root] for c in readers)
            if reorder:  # the order no longer holds
                t2 = time.perf_counter()
                position = {node: k for k, node in enumerate(fgraph.toposort())}
                reorder_time += time.perf_counter() - t2
        loop_time = time.perf_counter() - t1 - reorder_time
        toposort_time += reorder_time
        return WalkProfile(self, fused, nodes_start, len(fgraph.apply_nodes), toposort_time, loop_time, 0.0)

    def __str__(self) -> str:
        return self.name or "elemwise_fusion"

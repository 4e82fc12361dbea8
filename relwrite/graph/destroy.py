"""In-place execution at the graph level: which nodes may overwrite which of their inputs.

A `DestroyHandler` attached to a FunctionGraph records, per node, the input
whose buffer the node may write its result into (`destroyed`), and refuses
a mark that could let anything read an overwritten buffer:

- the buffer must be one the function allocates: not a graph input, a
  constant or a graph output, nor a view of one (views: DimShuffle,
  Reshape, Subtensor, Identity, Assert share their input's memory);
- no other node may overwrite the same buffer (or a view of it);
- every other reader of the buffer (or of a view of it) must be an ancestor
  of the node, so it has run before the node writes: no ordering is added,
  so no cycle can come of it.

Marks are checked again whenever the graph changes (`on_validate`): a
rewrite that gives a marked buffer a new reader is rejected (rolled back).
The linker writes in place only where a mark allows it (and only when its
own run-time checks agree); a graph without a DestroyHandler (any mode
without the `inplace` tag) runs nothing in place.
"""

from __future__ import annotations

from typing import Any

from relwrite.graph import ops
from relwrite.graph.basic import Apply, Constant, Variable
from relwrite.graph.features import AlreadyThere, Feature
from relwrite.graph.fg import FunctionGraph, InconsistencyError
from relwrite.graph.subtensor import Subtensor

VIEW_OPS = (ops.DimShuffle, ops.Reshape, ops.Identity, ops.Assert, Subtensor)
"""Ops whose output may share memory with their first input."""


def _is_view(node: Any) -> bool:
    return isinstance(node, Apply) and isinstance(node.op, VIEW_OPS)


class DestroyHandler(Feature):
    """The in-place marks of a graph (`destroyed`: node -> input position), kept legal (see the module)."""

    def __init__(self) -> None:
        self.destroyed: dict[Apply, int] = {}
        self._holders: dict[Variable, Apply] = {}  # buffer (its owning variable) -> the node overwriting it
        self._changed = False

    def on_attach(self, fgraph: FunctionGraph) -> None:
        if any(isinstance(f, DestroyHandler) for f in fgraph.features):
            raise AlreadyThere("a DestroyHandler is attached already")
        self.destroyed, self._holders = {}, {}

    def on_detach(self, fgraph: FunctionGraph) -> None:
        self.destroyed, self._holders = {}, {}

    def clone(self) -> DestroyHandler:
        return DestroyHandler()

    # -- the buffers ---------------------------------------------------------------------------------
    @staticmethod
    def buffer(fgraph: FunctionGraph, var: Variable) -> tuple[Variable, list[Variable]]:
        """The variable that owns `var`'s memory (up through views) and every view of it (down)."""
        root = var
        while root.owner is not None and _is_view(root.owner):
            root = root.owner.inputs[0]
        members, stack = [], [root]
        while stack:
            v = stack.pop()
            members.append(v)
            for client, _ in fgraph.clients.get(v, ()):
                if _is_view(client) and client.inputs[0] is v:
                    stack.extend(client.outputs)
        return root, members

    def refusal(self, fgraph: FunctionGraph, node: Apply, position: int) -> str | None:
        """Why `node` may not overwrite its input `position` (None: it may)."""
        if node not in fgraph.apply_nodes or not 0 <= position < len(node.inputs):
            return f"{node} has no input {position} in the graph"
        var, out = node.inputs[position], node.outputs[0]
        if len(node.outputs) != 1 or var.dtype != out.dtype or var.ndim != out.ndim:
            return f"its result ({out.type}) cannot be written into input {position} ({var.type})"
        root, members = self.buffer(fgraph, var)
        if root.owner is None or isinstance(root, Constant):
            return f"input {position} is (a view of) a graph input or a constant"
        outputs = set(fgraph.outputs)
        if any(m in outputs for m in members):
            return f"input {position} is (a view of) a graph output"
        member_set = set(members)
        holder = self._holders.get(root)
        if holder is not None and holder is not node and holder in self.destroyed:
            return f"{holder} overwrites the same buffer"
        readers = {c for m in members for c, _ in fgraph.clients.get(m, ()) if c != "output"} - {node}
        readers = {r for r in readers if not (_is_view(r) and r.outputs[0] in member_set)}
        late = [r for r in readers if not _is_ancestor(fgraph, r, node)]
        if late:
            return f"{late[0]} reads the buffer and may run after {node}"
        return None

    def destroy(self, fgraph: FunctionGraph, node: Apply, position: int) -> None:
        """Let `node` overwrite its input `position`; InconsistencyError (saying why) when it may not."""
        reason = self.refusal(fgraph, node, position)
        if reason is not None:
            raise InconsistencyError(f"{node} may not overwrite input {position}: {reason}")
        self.destroyed[node] = position
        self._holders[self.buffer(fgraph, node.inputs[position])[0]] = node

    def orderings(self, fgraph: FunctionGraph) -> dict[Apply, list[Apply]]:
        """Every other reader of a destroyed buffer before its destroyer (they are its ancestors anyway)."""
        before: dict[Apply, list[Apply]] = {}
        for node, p in self.destroyed.items():
            _, members = self.buffer(fgraph, node.inputs[p])
            readers = {c for m in members for c, _ in fgraph.clients.get(m, ()) if c not in ("output", node)}
            if readers:
                before[node] = sorted(readers, key=id)
        return before

    # -- keeping the marks legal -------------------------------------------------------------------
    def on_prune(self, fgraph: FunctionGraph, node: Apply, reason: Any) -> None:
        self.destroyed.pop(node, None)

    def on_change_input(
        self, fgraph: FunctionGraph, node: Any, i: int, old: Any, new: Any, reason: Any
    ) -> None:
        self._changed = True

    def on_import(self, fgraph: FunctionGraph, node: Apply, reason: Any) -> None:
        self._changed = True

    def on_validate(self, fgraph: FunctionGraph) -> None:
        """Reject a change that made a mark illegal (a new reader of an overwritten buffer, say)."""
        if not self._changed or not self.destroyed:
            return
        self._changed = False
        self._holders = {}
        for node, p in self.destroyed.items():
            root = self.buffer(fgraph, node.inputs[p])[0]
            if root in self._holders:
                raise InconsistencyError(
                    f"the change would let {node} and {self._holders[root]} overwrite one buffer"
                )
            self._holders[root] = node
        for node, p in self.destroyed.items():
            reason = self.refusal(fgraph, node, p)
            if reason is not None:
                raise InconsistencyError(
                    f"the change would let {node} overwrite input {p} unsafely: {reason}"
                )


def _is_ancestor(fgraph: FunctionGraph, candidate: Apply, node: Apply) -> bool:
    """Whether `node` depends on `candidate` (a walk up from `node`, never below `candidate`'s level)."""
    levels = fgraph.levels()
    floor = levels.get(candidate, 0)
    stack, seen = [node], set()
    while stack:
        current = stack.pop()
        for v in current.inputs:
            owner = v.owner
            if owner is None or owner in seen:
                continue
            if owner is candidate:
                return True
            seen.add(owner)
            if levels.get(owner, 0) > floor:
                stack.append(owner)
    return False


def destroy_handler(fgraph: FunctionGraph) -> DestroyHandler | None:
    """The graph's DestroyHandler, if it has one."""
    return next((f for f in fgraph.features if isinstance(f, DestroyHandler)), None)

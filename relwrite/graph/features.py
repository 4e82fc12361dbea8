"""Features: plug-ins a FunctionGraph tells of every change it makes.

`History` records input changes so they can be undone to a checkpoint,
`ReplaceValidate` makes replacements transactional, `NodeFinder` keeps an
op -> nodes index current, and `ChangeTracker` remembers what changed.  Their
protocol, `Feature` and `AlreadyThere`, is defined with the FunctionGraph that
calls it, in `relwrite.graph.fg`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from relwrite.graph.basic import Apply, Op, Variable
from relwrite.graph.fg import AlreadyThere, Feature, FunctionGraph, InconsistencyError


def _install(fgraph: FunctionGraph, feature: Feature, **methods: Any) -> None:
    """Publish `methods` on the graph, refusing if another feature published them."""
    for name in methods:
        if hasattr(fgraph, name):
            raise AlreadyThere(f"{type(feature).__name__}: the graph already has {name}")
    for name, method in methods.items():
        setattr(fgraph, name, method)


def _uninstall(fgraph: FunctionGraph, *names: str) -> None:
    for name in names:
        delattr(fgraph, name)


class _Transaction:
    """`History.transaction`: a class rather than a generator-based context manager, as every
    validated replacement opens one."""

    __slots__ = ("fgraph", "history", "mark")

    def __init__(self, history: History, fgraph: FunctionGraph):
        self.history, self.fgraph, self.mark = history, fgraph, 0

    def __enter__(self) -> None:
        self.mark = len(self.history.changes)
        self.history._open_transactions += 1

    def __exit__(self, kind: type | None, exc: BaseException | None, traceback: Any) -> None:
        history = self.history
        try:
            if kind is not None:
                history.revert(self.fgraph, self.mark)
        finally:
            history._open_transactions -= 1
        if kind is None and not history._open_transactions and not history._checkpoints_given:
            history.changes.clear()


class History(Feature):
    """Record input changes; `fgraph.checkpoint()` marks a point, `fgraph.revert(mark)` returns to it.

    Checkpoints nest: reverting to an outer mark undoes everything after it.
    Once a checkpoint has been handed out the history is kept for good; while
    none has, changes made inside a `transaction` are forgotten when it
    commits, so long rewriting runs do not keep every pruned node alive.
    """

    def __init__(self) -> None:
        self.changes: list[tuple[Any, int, Variable]] = []
        self._reverting = False
        self._checkpoints_given = False
        self._open_transactions = 0

    def on_attach(self, fgraph: FunctionGraph) -> None:
        _install(fgraph, self, checkpoint=self.checkpoint, revert=lambda mark: self.revert(fgraph, mark))

    def on_detach(self, fgraph: FunctionGraph) -> None:
        _uninstall(fgraph, "checkpoint", "revert")

    def clone(self) -> History:
        return History()

    def on_change_input(self, fgraph, node, i, var, new_var, reason) -> None:
        if not self._reverting:
            self.changes.append((node, i, var))

    def checkpoint(self) -> int:
        self._checkpoints_given = True
        return len(self.changes)

    def transaction(self, fgraph: FunctionGraph) -> _Transaction:
        """Run the block's changes as one unit: all undone if it raises, kept if it returns."""
        return _Transaction(self, fgraph)

    def revert(self, fgraph: FunctionGraph, mark: int) -> None:
        """Undo, newest first, every input change recorded after `mark`."""
        if not 0 <= mark <= len(self.changes):
            raise ValueError(
                f"History.revert: no checkpoint {mark} (history has {len(self.changes)} changes)"
            )
        self._reverting = True
        try:
            while len(self.changes) > mark:
                node, i, var = self.changes.pop()
                fgraph.change_node_input(node, i, var, reason="revert", check=False)
        finally:
            self._reverting = False


class ReplaceValidate(Feature):
    """Transactional replacement: `fgraph.replace_validate` / `replace_all_validate`.

    The replacements are applied, then every feature's `on_validate(fgraph)` runs;
    if anything raises, the graph is reverted to exactly what it was and the
    error is re-raised.  Attaches a `History` when the graph has none.
    """

    validate_time = 0.0
    """Seconds spent validating replacements while attached (function profiles report it)."""

    def on_attach(self, fgraph: FunctionGraph) -> None:
        if not hasattr(fgraph, "checkpoint"):
            fgraph.attach_feature(History())
        self.history = next(f for f in fgraph.features if isinstance(f, History))
        _install(
            fgraph,
            self,
            replace_validate=lambda var, new_var, reason=None, **kw: self.replace_all_validate(
                fgraph, [(var, new_var)], reason, **kw
            ),
            replace_all_validate=lambda pairs, reason=None, **kw: self.replace_all_validate(
                fgraph, pairs, reason, **kw
            ),
            validate=lambda: self.validate(fgraph),
        )

    def on_detach(self, fgraph: FunctionGraph) -> None:
        _uninstall(fgraph, "replace_validate", "replace_all_validate", "validate")

    def clone(self) -> ReplaceValidate:
        return ReplaceValidate()

    def validate(self, fgraph: FunctionGraph) -> None:
        """Run every feature's `on_validate(fgraph)`; they raise InconsistencyError to reject."""
        start = time.perf_counter()
        try:
            fgraph.execute_callbacks("on_validate")
        finally:
            self.validate_time += time.perf_counter() - start

    def replace_all_validate(
        self,
        fgraph: FunctionGraph,
        pairs: Iterable[tuple[Variable, Variable]],
        reason: str | None = None,
        verbose: bool = False,
    ) -> None:
        with self.history.transaction(fgraph):
            fgraph.replace_all(pairs, reason=reason, verbose=verbose)
            self.validate(fgraph)


class NodeFinder(Feature):
    """An index from ops and op classes to the nodes applying them: `fgraph.get_nodes(op_or_class)`.

    A class finds the nodes of every op of that class or a subclass.
    """

    def __init__(self) -> None:
        self.by_key: dict[Any, dict[Apply, None]] = {}

    def on_attach(self, fgraph: FunctionGraph) -> None:
        _install(fgraph, self, get_nodes=self.get_nodes)
        for node in fgraph.toposort():
            self.on_import(fgraph, node, None)

    def on_detach(self, fgraph: FunctionGraph) -> None:
        _uninstall(fgraph, "get_nodes")
        self.by_key.clear()

    def clone(self) -> NodeFinder:
        return NodeFinder()

    @staticmethod
    def _keys(op: Op) -> list[Any]:
        return [op, *(cls for cls in type(op).__mro__ if issubclass(cls, Op))]

    def on_import(self, fgraph, node, reason) -> None:
        for key in self._keys(node.op):
            self.by_key.setdefault(key, {})[node] = None

    def on_prune(self, fgraph, node, reason) -> None:
        for key in self._keys(node.op):
            nodes = self.by_key[key]
            del nodes[node]
            if not nodes:
                del self.by_key[key]

    def get_nodes(self, op_or_class: Op | type) -> list[Apply]:
        """The nodes applying `op_or_class` (a snapshot, safe to edit the graph while iterating)."""
        return list(self.by_key.get(op_or_class, ()))


class ChangeTracker(Feature):
    """Remember whether, and where, the graph changed since the last `reset()`.

    `changed_nodes` holds the nodes imported or given a new input since then,
    in order; nodes pruned meanwhile are dropped from it.
    """

    def __init__(self) -> None:
        self.changed = False
        self.nb_imported = 0
        self.changed_nodes: dict[Apply, None] = {}

    def on_attach(self, fgraph: FunctionGraph) -> None:
        _install(fgraph, self, change_tracker=self)

    def on_detach(self, fgraph: FunctionGraph) -> None:
        _uninstall(fgraph, "change_tracker")

    def clone(self) -> ChangeTracker:
        return ChangeTracker()

    def on_import(self, fgraph, node, reason) -> None:
        self.changed = True
        self.nb_imported += 1
        self.changed_nodes[node] = None

    def on_prune(self, fgraph, node, reason) -> None:
        self.changed_nodes.pop(node, None)

    def on_change_input(self, fgraph, node, i, var, new_var, reason) -> None:
        self.changed = True
        if node != "output":
            self.changed_nodes[node] = None

    def reset(self) -> None:
        self.changed = False
        self.changed_nodes.clear()


__all__ = [
    "AlreadyThere",
    "ChangeTracker",
    "Feature",
    "History",
    "InconsistencyError",
    "NodeFinder",
    "ReplaceValidate",
]

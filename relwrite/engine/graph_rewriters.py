"""Graph rewriters: whole-graph passes (sequences, walks, merge), the shared commit step and undo log.

Every rewrite attempt of the engines here is a transaction (`UndoLog`): when
a rewriter, a feature or the user (KeyboardInterrupt) interrupts it at any
point, the graph is restored exactly as it was before the attempt, and only
then does the exception go on.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from relwrite.engine.node_rewriters import (
    BudgetExceeded,
    NodeRewriter,
    RewriteError,
    RewriteWarning,
    collect_rejections,
    replacement_pairs,
)
from relwrite.engine.profile import MergeProfile, SequenceProfile, WalkProfile
from relwrite.graph.basic import Apply, Constant, Op, Variable
from relwrite.graph.features import AlreadyThere, Feature, ReplaceValidate
from relwrite.graph.fg import FunctionGraph, InconsistencyError
from relwrite.graph.memory import collection_paused
from relwrite.graph.types import TensorType
from relwrite.progress import Progress
from relwrite.relations.budget import budget_clock, enclosing_spent

__all__ = [
    "UNDO_REASONS",
    "GraphRewriter",
    "MergeFeature",
    "MergeRewriter",
    "NodeBudgetExceeded",
    "RewriteWarning",
    "SequentialRewriter",
    "TracksIndex",
    "UndoLog",
    "WalkingGraphRewriter",
    "commit",
    "in2out",
    "out2in",
    "raise_interruption",
    "report_error",
    "undo_log",
]


class NodeBudgetExceeded(Exception):
    """A change was refused because the graph already holds more nodes than the run allows."""


class GraphRewriter:
    """Base class of whole-graph rewriters: `rewrite(fgraph)` adds requirements, then `apply`s."""

    name: str | None = None

    def add_requirements(self, fgraph: FunctionGraph) -> None:
        """Attach the features `apply` needs (ReplaceValidate by default, unless the graph has one)."""
        if not hasattr(fgraph, "replace_all_validate"):
            fgraph.attach_feature(ReplaceValidate())

    def apply(self, fgraph: FunctionGraph) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define apply")

    def rewrite(self, fgraph: FunctionGraph) -> Any:
        """Rewrite `fgraph` in place; returns the rewriter's profile."""
        if not isinstance(fgraph, FunctionGraph):
            raise TypeError(f"{self}: expected a FunctionGraph, got {type(fgraph).__name__}")
        with collection_paused():
            self.add_requirements(fgraph)
            return self.apply(fgraph)

    __call__ = rewrite

    def __str__(self) -> str:
        return self.name or type(self).__name__


# -- transactions -------------------------------------------------------------------------------------------


class UndoLog(Feature):
    """Rewrite attempts as transactions: `begin()`, then `end(mark)` keeps the changes, `rollback` undoes.

    While attached it wraps the graph's editing methods: every input change
    is recorded before it is made, and edits of the input or output lists
    keep a copy of the lists.  So an attempt interrupted at any point (a
    rewriter raising after editing the graph, a feature's callback raising
    halfway through a replacement, KeyboardInterrupt) is undone exactly: if
    the interruption left the graph's bookkeeping half-updated, it is first
    rebuilt from the graph's structure; then the recorded changes are undone
    newest first through `change_node_input`, so features hear of the undo
    as of any change, and nodes the attempt imported but never connected are
    removed.  Attempts nest.  The undo changes History and FunctionGraph
    make themselves (reasons "revert" and "rollback") are not recorded.

    With `max_nodes` set, a change is refused with NodeBudgetExceeded (and
    `over_budget` says why) while the graph holds more nodes than that.
    """

    _LIST_EDITS = ("add_output", "remove_output", "remove_node", "add_input", "remove_input")
    _GUARDED = ("import_node", "remove_client", *_LIST_EDITS)

    def __init__(self) -> None:
        self.journal: list[tuple[Any, ...]] = []
        self.imported: list[Apply] = []
        self.depth = 0
        self.dirty = False
        self.undoing = False
        self.max_nodes: int | None = None
        self.over_budget: str | None = None

    def on_attach(self, fgraph: FunctionGraph) -> None:
        if hasattr(fgraph, "undo_log"):
            raise AlreadyThere("UndoLog: the graph has one already")
        wrappers = {name: self._guard(fgraph, name) for name in self._GUARDED}
        wrappers["change_node_input"] = self._guard_change_node_input(fgraph)
        try:
            for name, wrapper in wrappers.items():
                setattr(fgraph, name, wrapper)
            fgraph.undo_log = self
        except BaseException:
            self.on_detach(fgraph)
            raise

    def on_detach(self, fgraph: FunctionGraph) -> None:
        for name in ("undo_log", "change_node_input", *self._GUARDED):
            vars(fgraph).pop(name, None)

    def clone(self) -> UndoLog:
        return UndoLog()

    def on_import(self, fgraph, node, reason) -> None:
        if self.depth:
            self.imported.append(node)

    # -- the wrappers ---------------------------------------------------------------------------------------
    def _run(self, fgraph: FunctionGraph, method: Any, *args: Any, **kwargs: Any) -> Any:
        """Call a graph method; an exception that leaves the graph changed marks it dirty (half-updated)."""
        if self.dirty and not self.undoing:
            self._rebuild(fgraph)
        version = fgraph.version
        try:
            return method(*args, **kwargs)
        except BaseException as exc:
            if fgraph.version != version or not isinstance(exc, Exception):
                self.dirty = True
            raise

    def _guard(self, fgraph: FunctionGraph, name: str) -> Any:
        method = getattr(fgraph, name)
        lists = name in self._LIST_EDITS

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if lists and self.depth and not self.undoing:
                self.journal.append(("lists", list(fgraph.inputs), list(fgraph.outputs)))
            return self._run(fgraph, method, *args, **kwargs)

        guarded.__doc__ = method.__doc__
        return guarded

    def _guard_change_node_input(self, fgraph: FunctionGraph) -> Any:
        method = fgraph.change_node_input

        def change_node_input(
            node: Any,
            i: int,
            new_var: Variable,
            reason: str | None = None,
            import_missing: bool = False,
            check: bool = True,
        ) -> None:
            if reason not in UNDO_REASONS and not self.undoing:
                if self.max_nodes is not None and len(fgraph.apply_nodes) > self.max_nodes:
                    self.over_budget = (
                        f"the graph holds {len(fgraph.apply_nodes)} nodes (limit {self.max_nodes})"
                    )
                    raise NodeBudgetExceeded(self.over_budget)
                if self.depth:
                    try:
                        old = fgraph.outputs[i] if node == "output" else node.inputs[i]
                    except (AttributeError, IndexError, TypeError):
                        old = new_var  # no such input: the graph refuses the change below
                    if old is not new_var:
                        self.journal.append((node, i, old))
            self._run(
                fgraph, method, node, i, new_var, reason=reason, import_missing=import_missing, check=check
            )

        change_node_input.__doc__ = method.__doc__
        return change_node_input

    # -- attempts -------------------------------------------------------------------------------------------
    def begin(self) -> tuple[int, int]:
        """Open an attempt; returns its mark for `end` or `rollback`."""
        self.depth += 1
        return len(self.journal), len(self.imported)

    def end(self, mark: tuple[int, int]) -> None:
        """Close the attempt `mark`, keeping its changes."""
        self.depth -= 1
        if not self.depth:
            self.journal.clear()
            self.imported.clear()

    def rollback(self, fgraph: FunctionGraph, mark: tuple[int, int]) -> None:
        """Close the attempt `mark`, restoring the graph exactly as it was when it began.

        Should the undo itself be interrupted, it is finished without telling
        features (the graph's bookkeeping is rebuilt); a KeyboardInterrupt
        from there goes on, once the graph is restored.
        """
        journal_mark, imported_mark = mark
        self.undoing = True
        try:
            try:
                if self.dirty:
                    self._rebuild(fgraph)
                while len(self.journal) > journal_mark:
                    self._undo(fgraph, self.journal.pop())
                self._drop_orphans(fgraph, self.imported[imported_mark:])
            except BaseException as exc:
                while len(self.journal) > journal_mark:
                    self._undo(fgraph, self.journal.pop(), raw=True)
                self._rebuild(fgraph)
                if not isinstance(exc, Exception):
                    raise
        finally:
            del self.imported[imported_mark:]
            self.undoing = False
            self.end(mark)

    def _undo(self, fgraph: FunctionGraph, entry: tuple[Any, ...], raw: bool = False) -> None:
        if entry[0] == "lists":
            _, inputs, outputs = entry
            fgraph.restore_lists(inputs, outputs)
            self._rebuild(fgraph)
            return
        node, i, old = entry
        if not raw and (node == "output" or node in fgraph.apply_nodes):
            fgraph.change_node_input(node, i, old, reason="rollback", check=False)
        elif node == "output":
            fgraph.outputs[i] = old
        else:
            node.inputs[i] = old

    def _drop_orphans(self, fgraph: FunctionGraph, imported: list[Apply]) -> None:
        """Remove the nodes an attempt imported that nothing reads (imported, then never connected)."""
        for node in reversed(imported):
            if node in fgraph.apply_nodes and not any(fgraph.clients.get(o) for o in node.outputs):
                fgraph.remove_node(node, reason="rollback")

    def _rebuild(self, fgraph: FunctionGraph) -> None:
        """Make the graph's bookkeeping agree with its structure again (`FunctionGraph.resync`), and tell
        features, as far as they can follow, of the nodes that left or joined."""
        self.dirty = False
        dropped, added = fgraph.resync()
        for node in dropped:
            _tell(fgraph, "on_prune", node)
        for node in added:
            _tell(fgraph, "on_import", node)


UNDO_REASONS = frozenset({"revert", "rollback"})
"""The reasons History and FunctionGraph give their own undo changes: not recorded, never refused."""


def raise_interruption(exc: BaseException) -> None:
    """Raise the KeyboardInterrupt (or other non-Exception) that `exc` is or was raised while handling,
    or the BudgetExceeded of a budget whose block encloses the caller (`enclosing_spent`: a call around
    the engine ran out, not the rule that was running).

    An error raised while a half-done change was being undone must not hide
    the interrupt that stopped it.
    """
    spent = enclosing_spent(exc)
    if spent is not None:
        raise spent
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if not isinstance(exc, Exception):
            raise exc
        seen.add(id(exc))
        exc = exc.__context__


def _tell(fgraph: FunctionGraph, callback: str, node: Apply) -> None:
    """Tell every feature that can follow (a feature that cannot is left as it is: the graph comes first)."""
    for feature in fgraph.features:
        method = getattr(feature, callback, None)
        if callable(method):
            with suppress(Exception):
                method(fgraph, node, "rollback")


@contextmanager
def undo_log(fgraph: FunctionGraph) -> Iterator[UndoLog]:
    """The graph's UndoLog, attached for the duration of the block when it has none."""
    log = getattr(fgraph, "undo_log", None)
    if isinstance(log, UndoLog):
        yield log
        return
    log = UndoLog()
    try:
        fgraph.attach_feature(log)
        yield log
    finally:
        if log in fgraph.features:
            fgraph.remove_feature(log)
        else:
            log.on_detach(fgraph)


def commit(fgraph: FunctionGraph, pairs: Sequence[tuple[Variable, Variable]], reason: str) -> bool:
    """Apply replacements as one transaction; False (graph unchanged) when they are rejected.

    Rejected means a feature's validation failed, or a replacement would close
    a cycle (it depends on a node reading the variable it replaces), which is
    the rewriter's bug and also warned about, naming it.  Reading the replaced
    variable itself is fine: `x -> exp(log(x))` wraps it.  A type that does
    not fit raises RewriteError naming the rewriter; the graph is unchanged
    then too.
    """
    log = getattr(fgraph, "undo_log", None)
    mark = log.begin() if log is not None else None
    try:
        fgraph.replace_all_validate(pairs, reason=reason)
    except BaseException as exc:
        if log is not None:
            log.rollback(fgraph, mark)
        raise_interruption(exc)
        if isinstance(exc, InconsistencyError):
            for old, new in pairs:
                if _closes_cycle(fgraph, old, new):
                    warnings.warn(
                        f"rewriter {reason} proposed replacing {old} by {new}, which depends on a reader "
                        f"of {old}: that would close a cycle; rejected",
                        RewriteWarning,
                        stacklevel=2,
                    )
                    break
            return False
        if isinstance(exc, (TypeError, ValueError)):
            raise RewriteError(f"rewriter {reason} proposed an invalid replacement: {exc}") from exc
        raise
    if log is not None:
        log.end(mark)
    return True


def _closes_cycle(fgraph: FunctionGraph, old: Variable, new: Variable) -> bool:
    """Whether `new` depends on a node reading `old`, so that replacing `old` by it closes a loop."""
    readers = {node for node, _ in fgraph.clients.get(old, ()) if node != "output"}
    stack, seen = [new], set()
    while readers and stack:
        owner = stack.pop().owner
        if owner is None or owner in seen:
            continue
        if owner in readers:
            return True
        seen.add(owner)
        stack.extend(v for v in owner.inputs if v is not old)
    return False


def report_error(rewriter: Any, node: Apply | None, exc: BaseException) -> None:
    where = f" on {node}" if node is not None else ""
    warnings.warn(f"rewriter {rewriter} raised {exc!r}{where}; skipped", RewriteWarning, stacklevel=3)


def warn_once(seen: set[tuple[str, str]], kind: str, rewriter: str, message: str) -> None:
    """A RewriteWarning about `rewriter`, unless one of this `kind` was given for it already in this run."""
    if (kind, rewriter) not in seen:
        seen.add((kind, rewriter))
        warnings.warn(message, RewriteWarning, stacklevel=4)


class SequentialRewriter(GraphRewriter):
    """Apply graph rewriters one after the other."""

    def __init__(self, *rewriters: GraphRewriter, name: str | None = None):
        if len(rewriters) == 1 and isinstance(rewriters[0], (list, tuple)):
            rewriters = tuple(rewriters[0])
        for r in rewriters:
            if not isinstance(r, GraphRewriter):
                raise TypeError(f"SequentialRewriter: {r!r} is not a graph rewriter")
        self.rewriters = list(rewriters)
        self.name = name

    def add_requirements(self, fgraph: FunctionGraph) -> None:
        for r in self.rewriters:
            r.add_requirements(fgraph)

    def apply(self, fgraph: FunctionGraph) -> SequenceProfile:
        profile = SequenceProfile(str(self), nodes_before=len(fgraph.apply_nodes))
        start = time.perf_counter()
        steps = Progress(len(self.rewriters), f"rewriting {profile.nodes_before} nodes", unit="step")
        # one log and one budget clock for every step (each would attach and install its own)
        with steps as bar, undo_log(fgraph), budget_clock():
            for index, r in enumerate(self.rewriters):
                bar.update(index, step=str(r), nodes=len(fgraph.apply_nodes))
                t0 = time.perf_counter()
                sub = r.apply(fgraph)
                profile.steps.append((str(r), type(r).__name__, index, time.perf_counter() - t0, sub))
        profile.time = time.perf_counter() - start
        profile.nodes_after = len(fgraph.apply_nodes)
        return profile


class TracksIndex:
    """Node rewriters indexed by the ops and op classes they track, for dispatch by node."""

    def __init__(self, rewriters: Iterable[NodeRewriter]):
        self.rewriters = list(rewriters)
        self._by_key: dict[Any, list[int]] = {}
        self._untracked: list[int] = []
        for k, r in enumerate(self.rewriters):
            if not isinstance(r, NodeRewriter):
                raise TypeError(f"{r!r} is not a node rewriter")
            tracks = r.tracks()
            if tracks is None:
                self._untracked.append(k)
            else:
                for t in tracks:
                    self._by_key.setdefault(t, []).append(k)
        self._cache: dict[Op, tuple[int, ...]] = {}
        self.screened_by_heads = frozenset(
            k for k, r in enumerate(self.rewriters) if r.screen is not None and r.screen_reads_heads
        )
        self._by_signature: dict[tuple, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    SIGNATURES = 4096
    """How many node signatures `for_node` remembers (then it starts over)."""

    def for_node(self, node: Apply) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(the rewriters that may apply to `node`, those `for_op` gives whose screen refuses it): of
        the rewriters in `screened_by_heads`, the first holds only those whose screen admits the node.

        A screen that reads only heads (`NodeRewriter.screen_reads_heads`) is decided once per
        signature: the node's op and output count, and per operand its value (a constant) or its
        owner's op and output count.  Other screens are left to the caller.
        """
        signature = (node.op, len(node.outputs), tuple(map(_head, node.inputs)))
        found = self._by_signature.get(signature)
        if found is None:
            candidates = self.for_op(node.op)
            refused = tuple(
                k for k in candidates if k in self.screened_by_heads and not self.rewriters[k].screen(node)
            )
            found = (tuple(k for k in candidates if k not in refused), refused)
            if len(self._by_signature) >= self.SIGNATURES:
                self._by_signature.clear()
            self._by_signature[signature] = found
        return found

    def for_op(self, op: Op) -> tuple[int, ...]:
        """Indices of the rewriters that may apply to a node of `op`, in registration order."""
        found = self._cache.get(op)
        if found is None:
            keys = [op, *type(op).__mro__]
            found = tuple(
                sorted({k for key in keys for k in self._by_key.get(key, ())} | set(self._untracked))
            )
            self._cache[op] = found
        return found


def _head(operand: Variable) -> Any:
    """What a head-reading screen may read of an operand: a constant's value, else its owner's op."""
    if isinstance(operand, Constant):
        return operand
    owner = operand.owner
    return None if owner is None else (owner.op, len(owner.outputs))


class _Changes(Feature):
    """Counts the graph's changes and collects the nodes imported while attached."""

    def __init__(self) -> None:
        self.nodes: list[Apply] = []
        self.events = 0

    def on_import(self, fgraph, node, reason) -> None:
        self.events += 1
        self.nodes.append(node)

    def on_change_input(self, fgraph, node, i, var, new_var, reason) -> None:
        self.events += 1

    def on_prune(self, fgraph, node, reason) -> None:
        self.events += 1


class WalkingGraphRewriter(GraphRewriter):
    """Walk the graph once in topological order (or reverse) applying node rewriters.

    Nodes created during the walk are visited too unless `ignore_newtrees`.
    Each attempt is a transaction (see UndoLog).  A rewriter that raises is
    reported and skipped, unless `raise_errors`; one that edits the graph
    inside `transform` counts as having changed it; a relation out of budget
    and answers of the wrong type are reported once per rewriter.
    """

    def __init__(
        self,
        rewriters: NodeRewriter | Sequence[NodeRewriter],
        order: str = "in_to_out",
        ignore_newtrees: bool = True,
        raise_errors: bool = False,
        name: str | None = None,
    ):
        if order not in ("in_to_out", "out_to_in"):
            raise ValueError(f"order must be 'in_to_out' or 'out_to_in', got {order!r}")
        if isinstance(rewriters, NodeRewriter):
            rewriters = [rewriters]
        self.index = TracksIndex(rewriters)
        self.order = order
        self.ignore_newtrees = ignore_newtrees
        self.raise_errors = raise_errors
        self.name = name

    def __str__(self) -> str:
        return self.name or f"{type(self).__name__}({', '.join(map(str, self.index.rewriters))})"

    def apply(self, fgraph: FunctionGraph) -> WalkProfile:
        t0 = time.perf_counter()
        nodes = fgraph.toposort()
        if self.order == "out_to_in":
            nodes.reverse()
        toposort_time = time.perf_counter() - t0
        nodes_start = len(fgraph.apply_nodes)
        changes = _Changes()
        fgraph.attach_feature(changes)
        changed = 0
        warned: set[tuple[str, str]] = set()
        t1 = time.perf_counter()
        try:
            with undo_log(fgraph) as log, collect_rejections() as rejected, budget_clock():
                queue = list(reversed(nodes))
                while queue:
                    node = queue.pop()
                    if node not in fgraph.apply_nodes:
                        continue
                    for rewriter in map(self.index.rewriters.__getitem__, self.index.for_op(node.op)):
                        if self._attempt(fgraph, log, changes, rewriter, node, warned):
                            changed += 1
                            break
                    for name, at, why in rejected:
                        warn_once(warned, "type", name, f"rule {name} at {at}: {why}; answer skipped")
                    rejected.clear()
                    if not self.ignore_newtrees:
                        queue.extend(reversed(changes.nodes))
                    changes.nodes.clear()
        finally:
            fgraph.remove_feature(changes)
        loop_time = time.perf_counter() - t1
        return WalkProfile(self, changed, nodes_start, len(fgraph.apply_nodes), toposort_time, loop_time, 0.0)

    def _attempt(self, fgraph, log: UndoLog, changes: _Changes, rewriter, node, warned) -> bool:
        """Try `rewriter` on `node` as one transaction; whether it changed the graph."""
        events = changes.events
        mark = log.begin()
        try:
            pairs = replacement_pairs(rewriter, node, rewriter.transform(fgraph, node))
            applied = (bool(pairs) and commit(fgraph, pairs, str(rewriter))) or changes.events != events
        except BaseException as exc:
            log.rollback(fgraph, mark)
            raise_interruption(exc)
            if isinstance(exc, BudgetExceeded):
                warn_once(warned, "budget", str(rewriter), f"{exc}; rule {rewriter} skipped on this node")
                return False
            if self.raise_errors or isinstance(exc, NodeBudgetExceeded):  # the enclosing run stops
                raise
            report_error(rewriter, node, exc)
            return False
        log.end(mark)
        return applied


def in2out(*rewriters: NodeRewriter, **kwargs: Any) -> WalkingGraphRewriter:
    """A walk from inputs to outputs applying `rewriters`."""
    return WalkingGraphRewriter(list(rewriters), order="in_to_out", **kwargs)


def out2in(*rewriters: NodeRewriter, **kwargs: Any) -> WalkingGraphRewriter:
    """A walk from outputs to inputs applying `rewriters`."""
    return WalkingGraphRewriter(list(rewriters), order="out_to_in", **kwargs)


def _signature(node: Apply) -> tuple:
    return (node.op, tuple(node.inputs))


class MergeFeature(Feature):
    """Groups nodes by signature (same op, same inputs) and merges each group of duplicates into one.

    Constants compare by value, so nodes reading equal constants are duplicates
    too.  The node kept is the first whose outputs' types are each at least as
    specific as every duplicate's, so a merge never loses a static length;
    when no duplicate is (each knows a length another lacks) a new node with
    the combined types replaces them all; duplicates whose static lengths
    conflict are left apart.

    A merge that validation rejects is remembered with the group it was
    tried on (the key holds the nodes' inputs): the rejection's own undo
    touches the group again, and retrying it as it was would loop.  It is
    tried again once a node joins or leaves the group.
    """

    def __init__(self) -> None:
        self.groups: dict[tuple, dict[Apply, None]] = {}
        self.keys: dict[Apply, tuple] = {}
        self.pending: dict[tuple, None] = {}
        self.refused: dict[tuple, frozenset[Apply]] = {}  # key -> the group whose merge was rejected

    def on_attach(self, fgraph: FunctionGraph) -> None:
        for node in fgraph.toposort():
            self._add(node)

    def _add(self, node: Apply) -> None:
        if node in self.keys:
            self._remove(node)
        key = _signature(node)
        self.keys[node] = key
        group = self.groups.setdefault(key, {})
        group[node] = None
        if len(group) > 1:
            self.pending[key] = None

    def _remove(self, node: Apply) -> None:
        key = self.keys.pop(node, None)
        group = self.groups.get(key) if key is not None else None
        if group is not None:
            group.pop(node, None)
            if not group:
                del self.groups[key]
                self.refused.pop(key, None)

    def on_import(self, fgraph, node, reason) -> None:
        self._add(node)

    def on_prune(self, fgraph, node, reason) -> None:
        self._remove(node)

    def on_change_input(self, fgraph, node, i, var, new_var, reason) -> None:
        if node != "output" and node in self.keys:
            self._add(node)

    def flush(self, fgraph: FunctionGraph) -> tuple[int, int]:
        """Merge every group of duplicates into one node; returns (nodes merged away, nodes left apart
        by a rejection or a conflict of types, each counted once until its group changes)."""
        merged = rejected = 0
        while self.pending:
            key, _ = self.pending.popitem()
            group = [n for n in self.groups.get(key, ()) if n in fgraph.apply_nodes]
            if len(group) < 2 or self.refused.get(key) == frozenset(group):
                continue
            keeper = _keeper(group)
            pairs = (
                []
                if keeper is None
                else [
                    (old, new)
                    for n in group
                    if n is not keeper
                    for old, new in zip(n.outputs, keeper.outputs)
                ]
            )
            if pairs and commit(fgraph, pairs, "merge"):
                merged += len(group) - (keeper in group)
            else:
                rejected += len(group) - 1
                self.refused[key] = frozenset(group)
        return merged, rejected


def _keeper(group: list[Apply]) -> Apply | None:
    """The duplicate to keep: the first whose output types are the most specific of the group's.

    When none is, a new node with the combined types; None when the group's
    static lengths conflict (or its nodes differ in outputs).
    """
    first = group[0]
    if any(len(n.outputs) != len(first.outputs) for n in group):
        return None
    combined = []
    for j, out in enumerate(first.outputs):
        t: TensorType | None = out.type
        for n in group[1:]:
            t = _meet(t, n.outputs[j].type)
            if t is None:
                return None
        combined.append(t)
    for n in group:
        if all(o.type == t for o, t in zip(n.outputs, combined)):
            return n
    return Apply(first.op, first.inputs, [Variable(t, name=o.name) for o, t in zip(first.outputs, combined)])


def _meet(a: TensorType, b: TensorType) -> TensorType | None:
    """The type of the values of both `a` and `b` (every static length either knows); None if none."""
    if a.is_super(b):
        return b
    if b.is_super(a):
        return a
    if not a.is_compatible(b):
        return None
    return TensorType(a.dtype, [m if n is None else n for n, m in zip(a.shape, b.shape)])


class MergeRewriter(GraphRewriter):
    """Merge identical apply nodes (same op, same inputs) and equal constants into one.

    Merged nodes keep the most specific output types (see MergeFeature); the
    whole merge is one transaction.
    """

    def apply(self, fgraph: FunctionGraph) -> MergeProfile:
        start = time.perf_counter()
        feature = MergeFeature()
        with undo_log(fgraph) as log:
            mark = log.begin()
            try:
                constants = _merge_constants(fgraph)
                fgraph.attach_feature(feature)
                merged, rejected = feature.flush(fgraph)
            except BaseException:
                log.rollback(fgraph, mark)
                raise
            else:
                log.end(mark)
            finally:
                if feature in fgraph.features:
                    fgraph.remove_feature(feature)
        return MergeProfile(rejected, time.perf_counter() - start, None, None, {}, merged, constants)


def _merge_constants(fgraph: FunctionGraph) -> int:
    """Make every node read one object per constant value; returns how many reads changed."""
    canonical: dict[Constant, Constant] = {}
    changed = 0
    for node in fgraph.toposort():
        for i, var in enumerate(node.inputs):
            if isinstance(var, Constant):
                kept = canonical.setdefault(var, var)
                if kept is not var:
                    fgraph.change_node_input(node, i, kept, reason="merge", check=False)
                    changed += 1
    return changed

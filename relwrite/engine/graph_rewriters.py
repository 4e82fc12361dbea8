"""Graph rewriters: whole-graph passes (sequences, walks, merge) and the shared commit step."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from relwrite.engine.node_rewriters import NodeRewriter, RewriteError, replacement_pairs
from relwrite.engine.profile import MergeProfile, SequenceProfile, WalkProfile
from relwrite.graph.basic import Apply, Constant, Op, Variable
from relwrite.graph.features import Feature, ReplaceValidate
from relwrite.graph.fg import FunctionGraph, InconsistencyError


class RewriteWarning(UserWarning):
    """A rewriter raised, or an equilibrium run stopped before its fixed point."""


class GraphRewriter:
    """Base class of whole-graph rewriters: `rewrite(fgraph)` adds requirements, then `apply`s."""

    name: str | None = None

    def add_requirements(self, fgraph: FunctionGraph) -> None:
        """Attach the features `apply` needs (ReplaceValidate by default)."""
        fgraph.attach_feature(ReplaceValidate())

    def apply(self, fgraph: FunctionGraph) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define apply")

    def rewrite(self, fgraph: FunctionGraph) -> Any:
        """Rewrite `fgraph` in place; returns the rewriter's profile."""
        if not isinstance(fgraph, FunctionGraph):
            raise TypeError(f"{self}: expected a FunctionGraph, got {type(fgraph).__name__}")
        self.add_requirements(fgraph)
        return self.apply(fgraph)

    __call__ = rewrite

    def __str__(self) -> str:
        return self.name or type(self).__name__


def commit(fgraph: FunctionGraph, pairs: Sequence[tuple[Variable, Variable]], reason: str) -> bool:
    """Apply replacements as one transaction; False (graph unchanged) when they are rejected.

    Rejected means a cycle or a feature's validation failed.  A type mismatch
    is the rewriter's bug and raises RewriteError naming it; the graph is
    unchanged then too.
    """
    try:
        fgraph.replace_all_validate(pairs, reason=reason)
    except InconsistencyError:
        return False
    except (TypeError, ValueError) as exc:
        raise RewriteError(f"rewriter {reason} proposed an invalid replacement: {exc}") from exc
    return True


def report_error(rewriter: Any, node: Apply | None, exc: BaseException) -> None:
    where = f" on {node}" if node is not None else ""
    warnings.warn(f"rewriter {rewriter} raised {exc!r}{where}; skipped", RewriteWarning, stacklevel=3)


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
        for index, r in enumerate(self.rewriters):
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


class _NewNodes(Feature):
    """Collects the nodes imported while attached."""

    def __init__(self) -> None:
        self.nodes: list[Apply] = []

    def on_import(self, fgraph, node, reason) -> None:
        self.nodes.append(node)


class WalkingGraphRewriter(GraphRewriter):
    """Walk the graph once in topological order (or reverse) applying node rewriters.

    Nodes created during the walk are visited too unless `ignore_newtrees`.
    A rewriter that raises is reported and skipped, unless `raise_errors`.
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
        new_nodes = _NewNodes()
        fgraph.attach_feature(new_nodes)
        changed = 0
        t1 = time.perf_counter()
        try:
            queue = list(reversed(nodes))
            while queue:
                node = queue.pop()
                if node not in fgraph.apply_nodes:
                    continue
                for k in self.index.for_op(node.op):
                    rewriter = self.index.rewriters[k]
                    try:
                        pairs = replacement_pairs(rewriter, node, rewriter.transform(fgraph, node))
                        if pairs and commit(fgraph, pairs, str(rewriter)):
                            changed += 1
                            break
                    except Exception as exc:
                        if self.raise_errors:
                            raise
                        report_error(rewriter, node, exc)
                if not self.ignore_newtrees:
                    queue.extend(reversed(new_nodes.nodes))
                new_nodes.nodes.clear()
        finally:
            fgraph.remove_feature(new_nodes)
        loop_time = time.perf_counter() - t1
        return WalkProfile(self, changed, nodes_start, len(fgraph.apply_nodes), toposort_time, loop_time, 0.0)


def in2out(*rewriters: NodeRewriter, **kwargs: Any) -> WalkingGraphRewriter:
    """A walk from inputs to outputs applying `rewriters`."""
    return WalkingGraphRewriter(list(rewriters), order="in_to_out", **kwargs)


def out2in(*rewriters: NodeRewriter, **kwargs: Any) -> WalkingGraphRewriter:
    """A walk from outputs to inputs applying `rewriters`."""
    return WalkingGraphRewriter(list(rewriters), order="out_to_in", **kwargs)


def _signature(node: Apply) -> tuple:
    return (node.op, tuple(node.inputs))


class MergeFeature(Feature):
    """Keeps a signature -> node index and queues nodes that duplicate another (same op, same inputs).

    Constants compare by value, so nodes reading equal constants are duplicates too.
    """

    def __init__(self) -> None:
        self.index: dict[tuple, Apply] = {}
        self.keys: dict[Apply, tuple] = {}
        self.pending: list[tuple[Apply, Apply]] = []

    def on_attach(self, fgraph: FunctionGraph) -> None:
        for node in fgraph.toposort():
            self._add(node)

    def _add(self, node: Apply) -> None:
        key = _signature(node)
        self.keys[node] = key
        kept = self.index.setdefault(key, node)
        if kept is not node:
            self.pending.append((node, kept))

    def _remove(self, node: Apply) -> None:
        key = self.keys.pop(node, None)
        if key is not None and self.index.get(key) is node:
            del self.index[key]

    def on_import(self, fgraph, node, reason) -> None:
        self._add(node)

    def on_prune(self, fgraph, node, reason) -> None:
        self._remove(node)

    def on_change_input(self, fgraph, node, i, var, new_var, reason) -> None:
        if node != "output" and node in self.keys:
            self._remove(node)
            self._add(node)

    def flush(self, fgraph: FunctionGraph) -> tuple[int, int]:
        """Merge every queued duplicate into the node it repeats; returns (merged, rejected)."""
        merged = rejected = 0
        while self.pending:
            node, kept = self.pending.pop()
            if node not in fgraph.apply_nodes or kept not in fgraph.apply_nodes:
                continue
            if _signature(node) != _signature(kept):
                continue
            if commit(fgraph, list(zip(node.outputs, kept.outputs)), "merge"):
                merged += 1
            else:
                rejected += 1
        return merged, rejected


class MergeRewriter(GraphRewriter):
    """Merge identical apply nodes (same op, same inputs) and equal constants into one."""

    def apply(self, fgraph: FunctionGraph) -> MergeProfile:
        start = time.perf_counter()
        constants = _merge_constants(fgraph)
        feature = MergeFeature()
        fgraph.attach_feature(feature)
        try:
            merged, rejected = feature.flush(fgraph)
        finally:
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

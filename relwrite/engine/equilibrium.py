"""The equilibrium engine: apply rewriters until none applies.

It works from a queue rather than repeated full passes: at first every node
is queued; afterwards only nodes that are new, whose inputs changed, or whose
earlier failed attempt looked at a node that has since changed.  A failed
(rewriter, node) attempt remembers its footprint, the nodes it read (the
node's input owners plus every node the term bridge expanded while matching),
and is retried only when one of them changes or loses a reader.  Rewriters
are dispatched through a tracks index, duplicates are merged incrementally
after each rewrite, and the run ends at the fixed point, without a
confirming pass.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter, deque
from collections.abc import Sequence

from relwrite.engine.graph_rewriters import (
    GraphRewriter,
    MergeFeature,
    RewriteWarning,
    TracksIndex,
    commit,
    report_error,
)
from relwrite.engine.node_rewriters import NodeRewriter, replacement_pairs
from relwrite.engine.profile import EquilibriumProfile, PassStats, RuleStats
from relwrite.graph.basic import Apply
from relwrite.graph.features import Feature
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.terms import record_expansions


class _Watch(Feature):
    """Feeds the engine: new nodes, nodes whose inputs changed, and invalidated failures."""

    def __init__(self, engine_state: _RunState):
        self.state = engine_state
        self.events = 0

    def on_import(self, fgraph, node, reason) -> None:
        self.events += 1
        self.state.imported += 1
        self.state.touch(node)

    def on_change_input(self, fgraph, node, i, var, new_var, reason) -> None:
        self.events += 1
        if node != "output":
            self.state.touch(node)
        if var.owner is not None:
            self.state.retry_watchers(var.owner)

    def on_prune(self, fgraph, node, reason) -> None:
        self.events += 1
        self.state.forget(node)
        for var in node.inputs:
            if var.owner is not None:
                self.state.retry_watchers(var.owner)


class _RunState:
    """The queue of the current and next generation, failures and their watchers."""

    def __init__(self) -> None:
        self.current: deque[Apply] = deque()
        self.next: deque[Apply] = deque()
        self.queued: set[Apply] = set()
        self.failed: dict[Apply, set[int]] = {}
        self.watchers: dict[Apply, set[tuple[int, Apply]]] = {}
        self.imported = 0

    def enqueue(self, node: Apply) -> None:
        if node not in self.queued:
            self.queued.add(node)
            self.next.append(node)

    def touch(self, node: Apply) -> None:
        """`node` is new or changed: retry everything on it and on whatever looked at it."""
        self.failed.pop(node, None)
        self.enqueue(node)
        self.retry_watchers(node)

    def retry_watchers(self, node: Apply) -> None:
        """Retry the failed attempts that looked at `node`: it changed, or lost a reader.

        Losing a reader counts because matches may depend on client counts
        (PatternSub refuses an intermediate node that is read elsewhere).
        """
        for rule, watcher in self.watchers.pop(node, ()):
            failed = self.failed.get(watcher)
            if failed is not None and rule in failed:
                failed.discard(rule)
                self.enqueue(watcher)

    def forget(self, node: Apply) -> None:
        self.failed.pop(node, None)
        self.watchers.pop(node, None)

    def fail(self, rule: int, node: Apply, footprint: set[Apply]) -> None:
        self.failed.setdefault(node, set()).add(rule)
        for seen in footprint:
            if seen is not node:
                self.watchers.setdefault(seen, set()).add((rule, node))


def _unique_names(rewriters: Sequence[NodeRewriter | GraphRewriter]) -> list[str]:
    """The rewriters' names, numbered where several share one, so each keeps its own statistics."""
    names = [str(r) for r in rewriters]
    counts = Counter(names)
    seen: Counter = Counter()
    unique = []
    for name in names:
        seen[name] += 1
        unique.append(f"{name} #{seen[name]}" if counts[name] > 1 else name)
    return unique


class EquilibriumRewriter(GraphRewriter):
    """Apply node and graph rewriters until no rewriter changes the graph.

    Nodes are visited outputs first (`order="out_to_in"`, as Aesara's
    equilibrium does) or inputs first (`"in_to_out"`); within later passes,
    the nodes queued last (outputs first) or first (inputs first) lead.
    `max_use_ratio` bounds the work: when one rewriter has applied more than
    `max_use_ratio` times the starting node count, the run stops with a
    RewriteWarning naming it.  A rewriter that raises is reported by name and
    skipped (re-raised with `raise_errors`); the graph stays valid.
    """

    def __init__(
        self,
        rewriters: Sequence[NodeRewriter | GraphRewriter],
        max_use_ratio: float = 10.0,
        name: str | None = None,
        merge: bool = True,
        raise_errors: bool = False,
        order: str = "out_to_in",
    ):
        if order not in ("in_to_out", "out_to_in"):
            raise ValueError(f"order must be 'in_to_out' or 'out_to_in', got {order!r}")
        self.order = order
        rewriters = list(rewriters)
        for r in rewriters:
            if not isinstance(r, (NodeRewriter, GraphRewriter)):
                raise TypeError(f"EquilibriumRewriter: {r!r} is neither a node nor a graph rewriter")
        if max_use_ratio <= 0:
            raise ValueError(f"max_use_ratio must be positive, got {max_use_ratio}")
        self.node_rewriters = [r for r in rewriters if isinstance(r, NodeRewriter)]
        self.graph_rewriters = [r for r in rewriters if isinstance(r, GraphRewriter)]
        self.index = TracksIndex(self.node_rewriters)
        self.max_use_ratio = max_use_ratio
        self.merge = merge
        self.raise_errors = raise_errors
        self.name = name

    def add_requirements(self, fgraph: FunctionGraph) -> None:
        super().add_requirements(fgraph)
        for r in self.graph_rewriters:
            r.add_requirements(fgraph)

    def apply(self, fgraph: FunctionGraph) -> EquilibriumProfile:
        start = time.perf_counter()
        profile = EquilibriumProfile(str(self))
        profile.nodes_start = profile.nodes_max = len(fgraph.apply_nodes)
        max_use = max(1, int(self.max_use_ratio * max(profile.nodes_start, 1)))
        all_names = _unique_names([*self.node_rewriters, *self.graph_rewriters])
        names, graph_names = all_names[: len(self.node_rewriters)], all_names[len(self.node_rewriters) :]
        stats = [profile.rules.setdefault(n, RuleStats()) for n in names]
        for n in graph_names:
            profile.graph_rewriters[n] = RuleStats()
        state = _RunState()
        watch = _Watch(state)
        merger = MergeFeature() if self.merge else None
        fgraph.attach_feature(watch)
        if merger is not None:
            fgraph.attach_feature(merger)
        try:
            for node in fgraph.toposort():
                state.enqueue(node)
            events_at_graph_run = -1
            while True:
                current_pass = PassStats(nodes_at_start=len(fgraph.apply_nodes))
                pass_start = time.perf_counter()
                if self.graph_rewriters and watch.events != events_at_graph_run:
                    events_at_graph_run = watch.events
                    self._run_graph_rewriters(fgraph, graph_names, profile, current_pass, watch, max_use)
                    if profile.stopped_early:
                        current_pass.time = time.perf_counter() - pass_start
                        profile.passes.append(current_pass)
                        break
                if merger is not None:
                    self._merge(fgraph, merger, profile, current_pass)
                state.current = deque(reversed(state.next) if self.order == "out_to_in" else state.next)
                state.next = deque()
                if not state.current:
                    if current_pass.applied:
                        current_pass.time = time.perf_counter() - pass_start
                        profile.passes.append(current_pass)
                    if self.graph_rewriters and watch.events != events_at_graph_run:
                        continue  # the graph changed since the graph rewriters last began: run them again
                    break
                stop = self._run_pass(fgraph, state, stats, names, merger, profile, current_pass, max_use)
                current_pass.time = time.perf_counter() - pass_start
                profile.passes.append(current_pass)
                profile.nodes_max = max(profile.nodes_max, len(fgraph.apply_nodes))
                if stop:
                    break
        finally:
            fgraph.remove_feature(watch)
            if merger is not None:
                fgraph.remove_feature(merger)
        profile.nodes_end = len(fgraph.apply_nodes)
        profile.time = time.perf_counter() - start
        return profile

    def _run_pass(self, fgraph, state, stats, names, merger, profile, current_pass, max_use) -> bool:
        """Visit the current generation; returns True when a rewriter hit its use limit."""
        apply_nodes = fgraph.apply_nodes
        while state.current:
            node = state.current.popleft()
            state.queued.discard(node)
            if node not in apply_nodes:
                continue
            current_pass.visited += 1
            failed = state.failed.get(node, ())
            for k in self.index.for_op(node.op):
                if k in failed:
                    continue
                rewriter, rule = self.node_rewriters[k], stats[k]
                rule.attempts += 1
                t0 = time.perf_counter()
                imported_before = state.imported
                try:
                    with record_expansions() as seen:
                        result = rewriter.transform(fgraph, node)
                    pairs = replacement_pairs(rewriter, node, result)
                    applied = bool(pairs) and commit(fgraph, pairs, names[k])
                except Exception as exc:
                    rule.time += time.perf_counter() - t0
                    rule.errors += 1
                    if self.raise_errors:
                        raise
                    report_error(rewriter, node, exc)
                    applied, seen = False, set()
                else:
                    rule.time += time.perf_counter() - t0
                if not applied:
                    seen.update(v.owner for v in node.inputs if v.owner is not None)
                    state.fail(k, node, seen)
                    failed = state.failed.get(node, ())
                    continue
                rule.applied += 1
                rule.nodes_created += state.imported - imported_before
                current_pass.applied[names[k]] += 1
                if merger is not None:
                    self._merge(fgraph, merger, profile, current_pass)
                profile.nodes_max = max(profile.nodes_max, len(apply_nodes))
                if rule.applied > max_use:
                    self._stop(profile, names[k], rule.applied)
                    return True
                if node in apply_nodes:
                    state.enqueue(node)
                break
        return False

    def _merge(
        self, fgraph, merger: MergeFeature, profile: EquilibriumProfile, current_pass: PassStats
    ) -> None:
        t0 = time.perf_counter()
        merged, _ = merger.flush(fgraph)
        profile.merge_time += time.perf_counter() - t0
        if merged:
            profile.merges += merged
            current_pass.applied["merge"] += merged

    def _run_graph_rewriters(
        self, fgraph, names: list[str], profile, current_pass, watch: _Watch, max_use: int
    ) -> None:
        """Run the graph rewriters once, in order (stopping early at the use limit)."""
        t0 = time.perf_counter()
        for r, name in zip(self.graph_rewriters, names):
            stat = profile.graph_rewriters[name]
            before = watch.events
            r0 = time.perf_counter()
            try:
                r.apply(fgraph)
            except Exception as exc:
                stat.errors += 1
                if self.raise_errors:
                    raise
                report_error(r, None, exc)
            stat.time += time.perf_counter() - r0
            stat.attempts += 1
            if watch.events != before:
                stat.applied += 1
                current_pass.applied[name] += 1
                if stat.applied > max_use:
                    self._stop(profile, name, stat.applied)
                    break
        current_pass.graph_rewriter_time += time.perf_counter() - t0

    def _stop(self, profile: EquilibriumProfile, name: str, applied: int) -> None:
        """Record and warn that rewriter `name` reached the use limit."""
        profile.stopped_early = f"{name} applied {applied} times (max_use_ratio {self.max_use_ratio})"
        where = f"EquilibriumRewriter {self.name}" if self.name else "EquilibriumRewriter"
        warnings.warn(
            f"{where}: rewriter {name} applied {applied} times, more than max_use_ratio="
            f"{self.max_use_ratio} x {profile.nodes_start} nodes; stopping before the fixed point "
            "(rules may be undoing each other)",
            RewriteWarning,
            stacklevel=5,
        )

    def __str__(self) -> str:
        return self.name or "EquilibriumRewriter"

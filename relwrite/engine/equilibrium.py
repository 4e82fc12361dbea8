"""The equilibrium engine: apply rewriters until none applies.

It works from a queue rather than repeated full passes: at first every node
is queued; afterwards only nodes that are new, whose inputs changed, or whose
earlier failed attempt looked at a node that has since changed.  A failed
(rewriter, node) attempt remembers its footprint, the nodes it read (the
node's input owners plus every node the term bridge expanded while matching),
and is retried only when one of them changes or loses a reader (visiting
outputs first, after a queued input's visit: `_RunState.postpone`).  Rewriters
are dispatched through a tracks index, duplicates are merged incrementally
after each rewrite, and the run ends at the fixed point, without a
confirming pass.

Every attempt (a node rewriter's transform and its replacement, a graph
rewriter's apply, a merge) is a transaction (UndoLog): whatever interrupts
it, KeyboardInterrupt included, finds the graph restored as it was before.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from typing import Any

from relwrite.engine.graph_rewriters import (
    UNDO_REASONS,
    GraphRewriter,
    MergeFeature,
    NodeBudgetExceeded,
    RewriteWarning,
    TracksIndex,
    UndoLog,
    commit,
    raise_interruption,
    report_error,
    undo_log,
    warn_once,
)
from relwrite.engine.node_rewriters import (
    BudgetExceeded,
    NodeRewriter,
    collect_rejections,
    replacement_pairs,
)
from relwrite.engine.profile import EquilibriumProfile, PassStats, RuleStats
from relwrite.graph.basic import Apply
from relwrite.graph.features import Feature
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.terms import record_expansions
from relwrite.relations.budget import budget_clock


class _Watch(Feature):
    """Feeds the engine: new nodes, nodes whose inputs changed, and invalidated failures.

    `events` counts the changes the graph kept: an undo (reasons "revert"
    and "rollback") takes back the change it undoes, so an attempt that was
    rejected leaves the count as it was, and a graph rewriter whose every
    change was rejected (a merge validation refuses) has not applied and is
    not run again for it.
    """

    def __init__(self, engine_state: _RunState):
        self.state = engine_state
        self.events = 0

    def _count(self, reason: str | None) -> None:
        self.events += -1 if reason in UNDO_REASONS else 1

    def on_import(self, fgraph, node, reason) -> None:
        self._count(reason)
        self.state.imported += 1
        self.state.touch(node)

    def on_change_input(self, fgraph, node, i, var, new_var, reason) -> None:
        self._count(reason)
        if node != "output":
            self.state.touch(node)
        if var.owner is not None:
            self.state.retry_watchers(var.owner)

    def on_prune(self, fgraph, node, reason) -> None:
        self._count(reason)
        self.state.forget(node)
        for var in node.inputs:
            if var.owner is not None:
                self.state.retry_watchers(var.owner)


class _RunState:
    """The queue of the current and next generation, failures and their watchers."""

    def __init__(self, outputs_first: bool = True) -> None:
        self.outputs_first = outputs_first
        self.current: deque[Apply] = deque()
        self.next: deque[Apply] = deque()
        self.queued: set[Apply] = set()
        self.failed: dict[Apply, set[int]] = {}
        self.banned: dict[Apply, set[int]] = {}  # rules out of budget on a node: never retried there
        self.watchers: dict[Apply, set[tuple[int, Apply]]] = {}
        self.retried: set[Apply] = set()  # queued only to retry attempts (see `postpone`)
        self.waiting: dict[Apply, list[Apply]] = {}  # queued node -> the readers waiting for its visit
        self.imported = 0
        self.warned: set[tuple[str, str]] = set()

    def enqueue(self, node: Apply) -> None:
        if node not in self.queued:
            self.queued.add(node)
            self.next.append(node)

    def generation(self, levels: dict[Apply, int] | None, outputs_first: bool) -> deque[Apply]:
        """The queued nodes, outputs first or inputs first: by their level in the graph, or (`levels`
        None: the queue is in topological order, as on the first pass) as queued.

        A pass visiting outputs first queues what it touched top-down and
        what its rewrites built bottom-up; ordering by level makes the next
        pass again start where the order says (a flatten at the top of a
        chain of adds then takes the whole chain at once, instead of one
        level per rewrite from the bottom).
        """
        # readers released between passes (a merge or graph rewriter pruned what they waited for)
        self.next.extend(self.current)
        self.current.clear()
        queued = reversed(self.next) if outputs_first else self.next  # ties: the last queued first
        if levels is None:
            return deque(queued)
        return deque(sorted(queued, key=lambda n: levels.get(n, 0), reverse=outputs_first))

    def settle(self, nodes: Iterable[Apply]) -> None:
        """Visit the nodes a rewrite just built next, before the rest of the generation.

        A replacement is brought to its canonical form at once (a sum just
        flattened has its constants folded before anything flattens it
        again), so terms built in a loop stay small and rewriting stays linear.
        """
        for node in nodes:
            self.queued.add(node)
            self.current.appendleft(node)

    def touch(self, node: Apply) -> None:
        """`node` is new or changed: retry everything on it and on whatever looked at it."""
        self.failed.pop(node, None)
        self.retried.discard(node)
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
                if watcher not in self.queued:
                    self.retried.add(watcher)
                    self.enqueue(watcher)

    def postpone(self, node: Apply) -> bool:
        """Whether `node`, queued only to retry attempts (its own inputs unchanged), waits for a queued
        input's visit: visiting outputs first, a reader retried before its inputs have been rewritten
        reads them as they are about to stop being (a sum retried once the product in it changed,
        before the product cancels).  It is visited right after that input's visit (`release`)."""
        if node not in self.retried:
            return False
        self.retried.discard(node)
        if self.outputs_first:
            for var in node.inputs:
                owner = var.owner
                if owner is not None and owner in self.queued:
                    self.waiting.setdefault(owner, []).append(node)
                    return True
        return False

    def release(self, node: Apply) -> None:
        """Visit next the nodes that waited for `node`'s visit (see `postpone`): it is over, or gone."""
        for reader in self.waiting.pop(node, ()):
            if reader not in self.queued:
                self.queued.add(reader)
                self.current.appendleft(reader)

    def forget(self, node: Apply) -> None:
        self.failed.pop(node, None)
        self.watchers.pop(node, None)
        self.retried.discard(node)
        self.release(node)

    def fail(self, rule: int, node: Apply, footprint: set[Apply]) -> None:
        self.failed.setdefault(node, set()).add(rule)
        watch, watchers = (rule, node), self.watchers  # a failure's footprint is often dozens of nodes
        for seen in footprint:
            if seen is not node:
                watching = watchers.get(seen)
                if watching is None:
                    watchers[seen] = {watch}
                else:
                    watching.add(watch)


class _RuleTable(dict):
    """Node rewriter index -> its RuleStats, made at the rule's first attempt and entered in the profile
    under its name (most rules never meet a node of their op: the profile lists the rules tried)."""

    __slots__ = ("names", "rules")

    def __init__(self, names: list[str], rules: dict[str, RuleStats]) -> None:
        super().__init__()
        self.names, self.rules = names, rules

    def __missing__(self, k: int) -> RuleStats:
        stats = self[k] = self.rules[self.names[k]] = RuleStats()
        return stats


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
    equilibrium does) or inputs first (`"in_to_out"`): the first pass in
    topological order, later passes by the nodes' levels in the graph.

    `max_use_ratio` bounds the work: when one rewriter has applied more than
    `max_use_ratio` times the starting node count, or the graph grows past
    `max_use_ratio` times its starting size (at least 100 nodes), the run
    stops with a RewriteWarning naming the rewriter.  A node rewriter that
    edits the graph inside `transform` has applied, whatever it returns.
    A rewriter that raises is reported by name and skipped (re-raised with
    `raise_errors`); the graph is left as it was before that attempt.  A
    relation out of budget (see `relation_budget`) is reported once per rule
    and not retried on that node; answers of the wrong type are reported
    once per rule and counted in the profile.
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
        all_names = _unique_names([*self.node_rewriters, *self.graph_rewriters])
        self._names = all_names[: len(self.node_rewriters)], all_names[len(self.node_rewriters) :]
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
        names, graph_names = self._names
        stats = _RuleTable(names, profile.rules)
        for n in graph_names:
            profile.graph_rewriters[n] = RuleStats()
        state = _RunState(outputs_first=self.order == "out_to_in")
        watch = _Watch(state)
        merger = MergeFeature() if self.merge else None
        with undo_log(fgraph) as log, collect_rejections() as rejected, budget_clock():
            outer_limit = log.max_nodes, log.over_budget
            log.max_nodes = int(self.max_use_ratio * max(profile.nodes_start, 100))
            log.over_budget = None
            run = _Run(fgraph, state, watch, merger, log, rejected, profile, max_use)
            try:
                fgraph.attach_feature(watch)
                if merger is not None:
                    fgraph.attach_feature(merger)
                self._run(run, stats, names, graph_names)
            finally:
                _count_refusals(run, stats)
                log.max_nodes, log.over_budget = outer_limit
                for feature in (watch, merger):
                    if feature in fgraph.features:
                        fgraph.remove_feature(feature)
        profile.nodes_end = len(fgraph.apply_nodes)
        profile.time = time.perf_counter() - start
        return profile

    def _run(self, run: _Run, stats: _RuleTable, names: list[str], graph_names: list[str]) -> None:
        fgraph, state, watch, profile = run.fgraph, run.state, run.watch, run.profile
        for node in fgraph.toposort():
            state.enqueue(node)
        first_generation = True  # queued in topological order (unless a graph rewriter changes that)
        events_at_graph_run = -1
        while True:
            current_pass = PassStats(nodes_at_start=len(fgraph.apply_nodes))
            pass_start = time.perf_counter()
            if self.graph_rewriters and watch.events != events_at_graph_run:
                events_at_graph_run = watch.events
                self._run_graph_rewriters(run, graph_names, current_pass)
                first_generation = first_generation and watch.events == events_at_graph_run
                if profile.stopped_early:
                    current_pass.time = time.perf_counter() - pass_start
                    profile.passes.append(current_pass)
                    break
            if run.merger is not None and self._merge(run, current_pass):
                current_pass.time = time.perf_counter() - pass_start
                profile.passes.append(current_pass)
                break
            levels = None if first_generation else fgraph.levels()
            state.current = state.generation(levels, outputs_first=self.order == "out_to_in")
            first_generation = False
            state.next = deque()
            if not state.current:
                if current_pass.applied:
                    current_pass.time = time.perf_counter() - pass_start
                    profile.passes.append(current_pass)
                if self.graph_rewriters and watch.events != events_at_graph_run:
                    continue  # the graph changed since the graph rewriters last began: run them again
                break
            stop = self._run_pass(run, stats, names, current_pass)
            current_pass.time = time.perf_counter() - pass_start
            profile.passes.append(current_pass)
            profile.nodes_max = max(profile.nodes_max, len(fgraph.apply_nodes))
            if stop:
                break

    def _run_pass(self, run: _Run, stats: _RuleTable, names: list[str], current_pass: PassStats) -> bool:
        """Visit the current generation; returns True when the run must stop (a limit was reached)."""
        fgraph, state, watch, log, profile = run.fgraph, run.state, run.watch, run.log, run.profile
        apply_nodes, by_heads = fgraph.apply_nodes, self.index.screened_by_heads
        clock = time.perf_counter
        while state.current:
            node = state.current.popleft()
            state.queued.discard(node)
            if node not in apply_nodes:
                state.release(node)
                continue
            if state.postpone(node):
                continue
            current_pass.visited += 1
            failed = state.failed.get(node, ())
            banned = state.banned.get(node, ())
            decided = by_heads
            try:
                candidates, refused = self.index.for_node(node)
            except Exception:  # a screen raised on the signature: each screens the node below, where
                candidates, refused, decided = self.index.for_op(node.op), (), frozenset()  # it is reported
            input_owners = None  # what every failed attempt here read besides `node` (made at the first)
            if refused:  # screened out by the node's signature: counted at the end, nothing to watch
                seen_before = run.refusals.get(id(refused))
                run.refusals[id(refused)] = (refused, 1 if seen_before is None else seen_before[1] + 1)
            for k in candidates:
                if k in failed or k in banned:
                    continue
                rewriter, rule = self.node_rewriters[k], stats[k]
                rule.attempts += 1
                screen, operand_screen = rewriter.screen, rewriter.operand_screen
                try:
                    refuses = screen is not None and k not in decided and not screen(node)
                    refuses_by_operands = (
                        not refuses and operand_screen is not None and not operand_screen(node)
                    )
                except Exception as exc:  # a screen is the rule's code too: it fails as its transform would
                    refuses = True
                    if self._failed(run, rewriter, names[k], rule, node, exc, k):
                        return True
                if refuses:
                    # it read only what cannot change without `node` changing: nothing to watch
                    state.failed.setdefault(node, set()).add(k)
                    failed = state.failed[node]
                    continue
                if refuses_by_operands:
                    # it read the operands' nodes: watched, as a failed attempt's reads are
                    if input_owners is None:
                        input_owners = [v.owner for v in node.inputs if v.owner is not None]
                    state.fail(k, node, set(input_owners))
                    failed = state.failed[node]
                    continue
                t0 = clock()
                imported_before, events_before = state.imported, watch.events
                seen: set[Apply] = set()
                mark = log.begin()
                try:
                    with record_expansions() as seen:
                        result = rewriter.transform(fgraph, node)
                    edited = watch.events != events_before
                    pairs = (
                        () if result is False or result is None else replacement_pairs(rewriter, node, result)
                    )
                    applied = (bool(pairs) and commit(fgraph, pairs, names[k])) or edited
                except BaseException as exc:
                    log.rollback(fgraph, mark)
                    rule.time += clock() - t0
                    raise_interruption(exc)
                    if self._failed(run, rewriter, names[k], rule, node, exc, k):
                        return True
                    applied, seen = False, set()
                else:
                    log.end(mark)
                    rule.time += clock() - t0
                if run.rejected:
                    self._report_rejections(run, rule, names[k])
                if log.over_budget:  # a change was refused, and the rewriter swallowed the error
                    self._stop_at_node_limit(profile, names[k], log.over_budget)
                    return True
                if not applied:
                    if input_owners is None:
                        input_owners = [v.owner for v in node.inputs if v.owner is not None]
                    seen.update(input_owners)
                    state.fail(k, node, seen)
                    failed = state.failed.get(node, ())
                    continue
                rule.applied += 1
                rule.edits += edited
                rule.nodes_created += state.imported - imported_before
                current_pass.applied[names[k]] += 1
                if run.merger is not None and self._merge(run, current_pass):
                    return True
                profile.nodes_max = max(profile.nodes_max, len(apply_nodes))
                if rule.applied > run.max_use:
                    self._stop_at_use_limit(profile, names[k], rule)
                    return True
                if node in apply_nodes:
                    state.enqueue(node)
                built = [new.owner for _, new in pairs if new.owner in apply_nodes]
                if rewriter.idempotent:  # what it built does not match it again: tried once its inputs change
                    for owner in built:
                        state.fail(k, owner, {v.owner for v in owner.inputs if v.owner is not None})
                state.settle(built)
                break
            state.release(node)
        return False

    def _failed(
        self, run: _Run, rewriter: Any, name: str, rule: RuleStats, node: Apply, exc: Exception, k: int
    ) -> bool:
        """Handle an attempt that raised (the graph already restored); True when the run must stop."""
        if isinstance(exc, NodeBudgetExceeded):
            self._stop_at_node_limit(run.profile, name, str(exc))
            return True
        if isinstance(exc, BudgetExceeded):
            rule.budget_exceeded += 1
            run.state.banned.setdefault(node, set()).add(k)
            warn_once(
                run.state.warned,
                "budget",
                name,
                f"{exc}; rule {name} will not be retried on that node (further hits are counted "
                "in the profile, not reported)",
            )
            return False
        rule.errors += 1
        if self.raise_errors:
            raise exc
        report_error(rewriter, node, exc)
        return False

    def _report_rejections(self, run: _Run, stat: RuleStats, rewriter: str | None = None) -> None:
        """Count the answers rejected for their type against `stat`, warning once per rule."""
        for name, node, why in run.rejected:
            stat.rejected_answers += 1
            name = rewriter or name
            warn_once(
                run.state.warned,
                "type",
                name,
                f"rule {name} at {node}: {why}; answer skipped (further ones are counted in the profile)",
            )
        run.rejected.clear()

    def _merge(self, run: _Run, current_pass: PassStats) -> bool:
        """Merge the pending duplicates (as transactions); True when the run must stop."""
        t0 = time.perf_counter()
        try:
            merged, rejected = run.merger.flush(run.fgraph)
        except NodeBudgetExceeded as exc:
            self._stop_at_node_limit(run.profile, "merge", str(exc))
            return True
        finally:
            run.profile.merge_time += time.perf_counter() - t0
        run.profile.merges_rejected += rejected
        if merged:
            run.profile.merges += merged
            current_pass.applied["merge"] += merged
        return False

    def _run_graph_rewriters(self, run: _Run, names: list[str], current_pass: PassStats) -> None:
        """Run the graph rewriters once, in order, each as a transaction (stopping early at a limit)."""
        fgraph, watch, log, profile = run.fgraph, run.watch, run.log, run.profile
        t0 = time.perf_counter()
        for r, name in zip(self.graph_rewriters, names):
            stat = profile.graph_rewriters[name]
            before = watch.events
            r0 = time.perf_counter()
            mark = log.begin()
            try:
                r.apply(fgraph)
            except BaseException as exc:
                log.rollback(fgraph, mark)
                stat.time += time.perf_counter() - r0
                raise_interruption(exc)
                if isinstance(exc, NodeBudgetExceeded):
                    self._stop_at_node_limit(profile, name, str(exc))
                    break
                stat.errors += 1
                if self.raise_errors:
                    raise
                report_error(r, None, exc)
            else:
                log.end(mark)
                stat.time += time.perf_counter() - r0
            stat.attempts += 1
            if run.rejected:
                self._report_rejections(run, stat)
            if log.over_budget:
                self._stop_at_node_limit(profile, name, log.over_budget)
                break
            if watch.events != before:
                stat.applied += 1
                current_pass.applied[name] += 1
                if stat.applied > run.max_use:
                    self._stop_at_use_limit(profile, name, stat)
                    break
        current_pass.graph_rewriter_time += time.perf_counter() - t0

    def _stop_at_use_limit(self, profile: EquilibriumProfile, name: str, stat: RuleStats) -> None:
        edits = f", {stat.edits} of them by editing the graph inside transform" if stat.edits else ""
        self._stop(
            profile,
            f"{name} applied {stat.applied} times (max_use_ratio {self.max_use_ratio})",
            f"rewriter {name} applied {stat.applied} times{edits}, more than max_use_ratio="
            f"{self.max_use_ratio} x {profile.nodes_start} nodes (rules may be undoing each other)",
        )

    def _stop_at_node_limit(self, profile: EquilibriumProfile, name: str, why: str) -> None:
        self._stop(
            profile,
            f"{name} grew the graph too large: {why}",
            f"rewriter {name} grew the graph too large: {why}, the limit being max_use_ratio="
            f"{self.max_use_ratio} x max({profile.nodes_start}, 100) nodes",
        )

    def _stop(self, profile: EquilibriumProfile, reason: str, message: str) -> None:
        """Record `reason` and warn `message`: the run stops before its fixed point."""
        profile.stopped_early = reason
        where = f"EquilibriumRewriter {self.name}" if self.name else "EquilibriumRewriter"
        warnings.warn(f"{where}: {message}; stopping before the fixed point", RewriteWarning, stacklevel=5)

    def __str__(self) -> str:
        return self.name or "EquilibriumRewriter"


def _count_refusals(run: _Run, stats: _RuleTable) -> None:
    """Add the attempts the signature screens refused (`_Run.refusals`) to the rules' statistics."""
    for refused, visits in run.refusals.values():
        for k in refused:
            stats[k].attempts += visits
    run.refusals.clear()


class _Run:
    """What one equilibrium run works with."""

    __slots__ = ("fgraph", "log", "max_use", "merger", "profile", "refusals", "rejected", "state", "watch")

    def __init__(self, fgraph, state, watch, merger, log, rejected, profile, max_use):
        self.refusals: dict[int, tuple[tuple[int, ...], int]] = {}
        """id -> (a tuple of rewriters the signature screen refused, the visits it refused them at): each
        an attempt, counted into the profile when the run ends (`_count_refusals`)."""
        self.fgraph: FunctionGraph = fgraph
        self.state: _RunState = state
        self.watch: _Watch = watch
        self.merger: MergeFeature | None = merger
        self.log: UndoLog = log
        self.rejected: list[tuple[str, Apply, str]] = rejected
        self.profile: EquilibriumProfile = profile
        self.max_use: int = max_use

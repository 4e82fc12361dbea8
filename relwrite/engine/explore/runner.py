"""The runner: equality saturation of an e-graph by rules, within limits, as egg's `Runner` does.

Each iteration searches, then applies, then rebuilds once (deferred
rebuilding).  Search e-matches every rule's compiled pattern on the classes
reachable from the roots (the pattern machine, `machine.EClasses`): forward
its left side, backward its right side, at the classes holding an e-node of
the pattern's head op (e-nodes are indexed by op once per iteration); each
match is completed by the rule's guards and computed bindings
(`runtime.completions`).  Rules that are not patterns (a user's kanren
goal) run forward on every e-node whose op they track, seen one level deep
(its op applied to its operands' proxies), through `rewrite.rule_answers`.
All matches are collected first; then each builds the other side into the
e-graph and merges it with the side matched, recording the rule, the
direction and the substitution's assumption bindings for explanations; a
match applied before (same rule, direction and classes) is not applied
again, nor one whose assumption fails at a constant it is said of
(``exp(log(x)) -> x`` at x = -1.0: the union would hold nowhere).  For a
rule whose side read is fixed ops other than add and mul over variables
(building it adds nothing new), a match whose other side is already in its
class changes nothing: the search looks that up and notes it applied, and so
does applying it (an earlier match of the iteration may have put it there),
as egg and egglog skip such a substitution.  Such a match of a compiled side
whose two sides have plans (`EClasses.placed_plan`) is applied directly:
from the tuple of its classes to the e-nodes of both sides
(`_apply_direct`), with no substitution or built tree in between, and adds
the same term nodes in the same order as building its sides would.
Saturated means an iteration in which no rule added anything: no e-node and
no union.

An answer that would hold the class it is merged into as a proper subterm
(``x -> -(-x)``), or, for add and mul, an e-node of the class as a
sub-multiset of its operands (``x + y -> 0 + x + y``), only wraps the class
in itself and would grow it without end: it is not added.

The search is semi-naive, as egglog's: every match it finds anew reads a
class that changed since the last search of its (rule, direction) (created,
merged, or newly reachable), within the pattern's depth below the match's
root, or binds one a level further down (a merge makes a new match key).  So
after its first, full, search a (rule, direction) visits only the classes
that many parent links above a changed class (`EGraph.changed`,
`EGraph.near`) and finds the same new matches as a full search.  A side
compiled to a matcher (`EClasses.new_matches`) does better, as egglog's
joins do: a match that reads no e-node changed since the last search
(`EGraph.touched`: created, moved by a merge, given new operand classes)
was found then, so it starts from each changed e-node at each place of the
pattern it fits, walks up the parents to the pattern's root, then matches
down with that e-node in its place; its matches are sorted into the order
a full search gives.  A (rule,
direction) the scheduler banned or held back keeps its place, and so do all
when a run stops mid-iteration; rules with computed values or `where` guards
(a computed graph is a new object each time, so its match is never applied
before, and code reads classes deeper than the pattern) and matches whose keys do not hash are
searched in full every time.  `Runner(..., seminaive=False)` searches in full
throughout: the reference it agrees with.

Where an iteration's matches are more than a limit lets it apply, `focus`
(class -> bits of error lost there: the input's local errors, see
`accurate.focus`) decides which come first: matches at classes losing more
bits before the others, in search order otherwise, so the budget is spent
where the input loses accuracy; this order depends on the input only.

Limits: iterations, e-nodes, classes and seconds (`StopReason` says which
stopped the run).  The e-node and class limits are checked before every
application (counted as added, before the iteration's rebuild merges
congruent e-nodes), so the e-node limit is overshot by at most the e-nodes
of one application; the time limit bounds every rule's search and is
checked before every application.  A rule that raises, or whose search in
one iteration outlasts `rule_seconds`, is reported by name in
`Report.failed` and a RewriteWarning, and not run again; the run goes on.  `BackoffScheduler`
keeps rules that match too often from flooding the graph; the matches of a
search it refused are kept, and when the next search of that (rule,
direction) finds the e-graph unchanged (no e-node and no union since: the
bans were lifted because nothing else changed it) they are what it finds
again, without searching.  With no time
limits (`seconds=rule_seconds=math.inf`) a run is deterministic: classes,
rules and matches are visited in an order that depends on the input only.
"""

from __future__ import annotations

import enum
import gc
import math
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from relwrite.engine.explore.egraph import AC_OPS, Applied, EGraph
from relwrite.engine.explore.machine import ClassRef, EClasses, Matches
from relwrite.engine.explore.rewrite import Budget, GraphAnswer, RuleTimeout, rule_answers
from relwrite.engine.node_rewriters import RewriteWarning
from relwrite.graph.basic import Op, Variable
from relwrite.relations.budget import budget_clock, relation_budget
from relwrite.relations.pattern import Pattern, Unbuildable, _Apply, _Exactly, _Guarded, _Named
from relwrite.relations.registry import Rule
from relwrite.relations.runtime import checked_direction, completions

COLLECT_EVERY = 50_000
"""Allocations between two passes of the garbage collector's youngest generation during a run (see
`_collector_relaxed`; Python's default is 700)."""


class StopReason(enum.StrEnum):
    """Why a run stopped (egg's stop reasons); each equals its text, e.g. ``"saturated"``."""

    SATURATED = "saturated"
    ITERATION_LIMIT = "iteration limit"
    NODE_LIMIT = "node limit"
    CLASS_LIMIT = "class limit"
    TIME_LIMIT = "time limit"
    WORK_LIMIT = "work limit"
    GOAL = "goal reached"


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Budgets of an exploration (egg's defaults for the first three).

    - `iterations`, `nodes` (e-nodes), `classes`: when the runner stops;
    - `seconds`: the whole call's time (`deadline.Deadline`): growing the
      e-graph, then extracting, explaining and checking forms (`math.inf`:
      no time limit, for runs whose outcome must not depend on the machine);
    - `rule_seconds`: one rule's search in one iteration;
    - `answers`: the answers read from one run of a rule that is not a
      pattern (a kanren goal may answer without end).
    """

    iterations: int = 30
    nodes: int = 10_000
    classes: int = 10_000
    seconds: float = 5.0
    rule_seconds: float = 1.0
    answers: int = 8

    def __post_init__(self) -> None:
        for name in ("iterations", "nodes", "classes", "answers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{name} must be a positive int, got {value!r}")
        for name in ("seconds", "rule_seconds"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")


@dataclass
class RuleWork:
    """What one rule did: runs (classes searched, or goal runs), matches found, unions made, seconds."""

    runs: int = 0
    answers: int = 0
    unions: int = 0
    seconds: float = 0.0


@dataclass
class Report:
    """How a run went: why it stopped, how far it got, and which rules failed (name -> why)."""

    stop_reason: StopReason | None = None
    iterations: int = 0
    nodes: int = 0
    classes: int = 0
    seconds: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)
    rules: dict[str, RuleWork] = field(default_factory=dict)
    largest_step: int = 0
    """The most e-nodes one rule application added (the node limit is overshot by less than this)."""
    phases: dict[str, StopReason] = field(default_factory=dict)
    """The phases after growing the e-graph that stopped early (cost, extraction, explanation,
    checking), with why (TIME_LIMIT): what they had done by then is what the call returned."""


class BackoffScheduler:
    """egg's BackoffScheduler, per rule and direction: what keeps matching is banned for a while.

    A (rule, direction) whose new matches in one iteration exceed its match
    limit is banned for `ban_length` iterations; one that had at least
    `idle_runs` matches in an iteration without merging anything (it keeps
    matching to no effect) for twice as long.  The limit and the bans double
    with each ban.  Bans only delay: when nothing else changes they are
    lifted (`lift_bans`), and the runner declares saturation only after an
    iteration with every rule searching and every match applied changed nothing.
    """

    def __init__(self, match_limit: int = 1_000, ban_length: int = 5, idle_runs: int = 4):
        self.match_limit = match_limit
        self.ban_length = ban_length
        self.idle_runs = idle_runs
        self._banned_until: dict[tuple[str, str], int] = {}
        self._times_banned: dict[tuple[str, str], int] = {}

    def can_search(self, rule: Rule, direction: str, iteration: int) -> bool:
        return self._banned_until.get((rule.name, direction), 0) <= iteration

    def admit(self, rule: Rule, direction: str, iteration: int, matches: int) -> bool:
        """Whether this iteration's `matches` of (rule, direction) are applied; False bans it."""
        if matches <= self.match_limit << self._times_banned.get((rule.name, direction), 0):
            return True
        self._ban((rule.name, direction), iteration)
        return False

    def record(self, rule: Rule, direction: str, iteration: int, runs: int, unions: int) -> None:
        """Note what (rule, direction) did this iteration; many matches that merged nothing ban it."""
        if unions == 0 and runs >= self.idle_runs:
            self._ban((rule.name, direction), iteration, longer=1)

    def _ban(self, arm: tuple[str, str], iteration: int, longer: int = 0) -> None:
        times = self._times_banned.get(arm, 0)
        self._times_banned[arm] = times + 1
        self._banned_until[arm] = iteration + 1 + (self.ban_length << (times + longer))

    def lift_bans(self, iteration: int) -> bool:
        """Lift every ban still running; whether there was one."""
        banned = [arm for arm, until in self._banned_until.items() if until > iteration]
        for arm in banned:
            self._banned_until[arm] = iteration
        return bool(banned)


@dataclass(frozen=True)
class _Match:
    """A match of a pattern rule's side (`direction` says which) at class `cls`, completed as `subst`;
    `key` names it up to the classes' current roots (None: its values cannot be hashed), and goes
    into `applied` when it is applied."""

    rule: Rule
    direction: str
    cls: int
    subst: Mapping
    key: Any
    applied: set


class _Compiled:
    """The matches of a compiled side found by one search (`EClasses.match`), in order: each its key
    ``(cls, *classes of its variables)``, which goes into `applied` when it is applied.  One object
    for them all: a search finds thousands, and each applied directly needs nothing but its key."""

    __slots__ = ("applied", "direction", "keys", "rule", "variables")

    def __init__(self, rule: Rule, direction: str, keys: list[tuple], variables: tuple, applied: set):
        self.rule, self.direction, self.keys = rule, direction, keys
        self.variables, self.applied = variables, applied

    def __len__(self) -> int:
        return len(self.keys)

    def match(self, key: tuple) -> _Match:
        """The match of `key` with its substitution (what `_apply_match` builds from)."""
        subst = {v: ClassRef(x) for v, x in zip(self.variables, key[1:])}
        return _Match(self.rule, self.direction, key[0], subst, key, self.applied)

    def each(self) -> list[_Compiled]:
        """Its matches one by one (to be put in another order)."""
        return [
            _Compiled(self.rule, self.direction, [key], self.variables, self.applied) for key in self.keys
        ]


@dataclass(frozen=True)
class _Answer:
    """An answer of a goal rule run forward on `term` (an e-node of class `cls` over proxies)."""

    rule: Rule
    cls: int
    term: Variable
    answer: GraphAnswer

    direction = "forward"


_Found = _Match | _Compiled | _Answer


class _OutOfTime(Exception):
    """A search cut by the run's deadline (not the rule's fault)."""


class Runner:
    """Apply `rules` to `egraph` in `direction` ("forward", "backward" or "both") within `limits`.

    `progress(report)` is called after every iteration; `seminaive=False` searches every reachable
    class every iteration (see the module docstring).
    """

    def __init__(
        self,
        egraph: EGraph,
        rules: Sequence[Rule],
        direction: str = "both",
        limits: Limits | None = None,
        scheduler: BackoffScheduler | None = None,
        progress: Callable[[Report], None] | None = None,
        seminaive: bool = True,
    ):
        self.direction = checked_direction(direction)
        self.egraph = egraph
        self.rules = list(rules)
        self.limits = limits or Limits()
        self.scheduler = scheduler or BackoffScheduler()
        self.progress = progress
        self.machine = EClasses(egraph)
        self.report = Report(rules={r.name: RuleWork() for r in self.rules})
        self._directions = {r.name: _directions(r, direction) for r in self.rules}
        self._by_name = {r.name: r for r in self.rules}
        self._disabled: set[str] = set()
        self._applied: set[Any] = set()  # keys of the matches applied, and (rule name, term) of goal runs
        self._compiled_applied: dict[tuple[str, str], set[tuple]] = {}  # the same, of compiled sides
        self._terms: dict[tuple, Variable | None] = {}
        self._runs: dict[tuple[str, str], int] = {}
        self._held_back = False  # whether the scheduler banned or refused a rule this iteration
        # (rule name, direction) -> parent levels above a changed class its search visits (None: all)
        self._levels = {
            (r.name, d): _levels(r, d) if seminaive else None
            for r in self.rules
            for d, _ in self._directions[r.name]
        }
        self._searched: dict[tuple[str, str], int] = {}  # how far into `egraph.changed` each has searched
        self._searching: dict[tuple[str, str], int] = {}  # the same for this iteration's searches
        self._reached: set[int] = set()  # the classes reachable at the last search
        self._reachable_at: tuple[tuple | None, list[int]] = (None, [])  # `_reachable`, and of what
        self._probes: dict[tuple, tuple | None] = {}  # (rule name, direction) -> its written side's probe
        self._matchers: dict[tuple, Any] = {}  # (rule name, direction) -> `_matcher`
        self._directs: dict[tuple, tuple | None] = {}  # (rule name, direction) -> `_direct`
        # (rule name, direction) -> the e-graph's version, the matches and the classes searched of its
        # last search, when the scheduler refused them (the same search of the same e-graph finds them)
        self._held: dict[tuple[str, str], tuple[tuple[int, int], list, int]] = {}
        self._noops = 0  # matches the search of one (rule, direction) found changing nothing
        self.focus: dict[int, float] = {}
        """Classes (any term node of them) -> bits of error lost there: their matches are applied first."""

    def run(
        self, roots: Iterable[int], goal: Callable[[], bool] | None = None, until: float | None = None
    ) -> Report:
        """Run until saturation, a limit, or `goal()` turns true (checked after each rebuild).

        `until` is when to stop (a `time.perf_counter()` time; default: `limits.seconds` from now).
        """
        with budget_clock(), _collector_relaxed():
            return self._run(list(roots), goal, until)

    def _run(self, roots: list[int], goal: Callable[[], bool] | None, until: float | None) -> Report:
        limits, report, egraph = self.limits, self.report, self.egraph
        started = time.perf_counter()
        deadline = started + limits.seconds if until is None else until
        egraph.rebuild()
        stop = StopReason.GOAL if goal is not None and goal() else None
        iteration = 0
        while stop is None:
            stop = self._limit_reached(deadline)
            if stop is not None:
                break
            if iteration >= limits.iterations:
                stop = StopReason.ITERATION_LIMIT
                break
            before = (egraph.unions, egraph.node_count)
            matches, stop = self._search(self._reachable(roots), iteration, deadline)
            stop = self._apply(self._focused(matches), iteration, deadline) or stop
            if stop is None:
                self._searched.update(self._searching)
            egraph.rebuild()
            iteration += 1
            self._note(report, iteration, started)
            if self.progress is not None:
                self.progress(report)
            if stop is None and goal is not None and goal():
                stop = StopReason.GOAL
            if stop is None and (egraph.unions, egraph.node_count) == before:
                if self._held_back:  # the graph is idle: run what the scheduler held back now
                    self.scheduler.lift_bans(iteration)
                else:  # every rule searched and every match applied changed nothing
                    stop = StopReason.SATURATED
        report.stop_reason = stop
        self._note(report, iteration, started)
        return report

    def _focused(self, matches: list[_Found]) -> list[_Found]:
        """The matches in the order they are applied: at classes losing more bits (`focus`) first."""
        if not self.focus:
            return matches
        find = self.egraph.find
        weight: dict[int, float] = {}
        for c, bits in self.focus.items():
            weight[find(c)] = max(weight.get(find(c), 0.0), bits)
        each = [one for m in matches for one in (m.each() if type(m) is _Compiled else [m])]
        return sorted(
            each, key=lambda m: -weight.get(find(m.keys[0][0] if type(m) is _Compiled else m.cls), 0.0)
        )

    def _reachable(self, roots: list[int]) -> list[int]:
        """`EGraph.reachable` from `roots`, read again only when an e-node or a union came since (or
        the roots are others)."""
        egraph = self.egraph
        version = (egraph.unions, egraph.node_count, tuple(roots))
        if self._reachable_at[0] != version:
            self._reachable_at = (version, egraph.reachable(roots))
        return self._reachable_at[1]

    def _note(self, report: Report, iteration: int, started: float) -> None:
        report.iterations = iteration
        report.nodes = self.egraph.node_count
        report.classes = self.egraph.class_count
        report.seconds = time.perf_counter() - started

    def _limit_reached(self, deadline: float) -> StopReason | None:
        """Which limit is reached, if any."""
        if self.egraph.node_count >= self.limits.nodes:
            return StopReason.NODE_LIMIT
        if self.egraph.class_count >= self.limits.classes:
            return StopReason.CLASS_LIMIT
        if deadline < math.inf and time.perf_counter() >= deadline:
            return StopReason.TIME_LIMIT
        return None

    # -- search ------------------------------------------------------------------------------

    def _search(
        self, classes: list[int], iteration: int, deadline: float
    ) -> tuple[list[_Found], StopReason | None]:
        """Every admitted match of every (rule, direction) on `classes`; TIME_LIMIT when the deadline
        cut the search (the matches found until then are kept)."""
        machine, egraph = self.machine, self.egraph
        machine.refresh()
        egraph.mark_changed(c for c in classes if c not in self._reached)
        self._reached = set(classes)
        end = (len(egraph.changed), len(egraph.touched))
        version = (egraph.unions, egraph.node_count)  # equal only when no e-node and no union came since
        near: dict[tuple[int, int], set[int]] = {}
        fresh: dict[int, list[int]] = {}
        self._searching = {}
        by_op: dict[Op, list[int]] | None = None  # the classes holding each op, made when first needed
        position = {c: k for k, c in enumerate(classes)}
        matches: list[_Found] = []
        self._runs = {}
        self._held_back = False
        for rule in self.rules:
            for direction, heads in self._directions[rule.name]:
                if rule.name in self._disabled:
                    continue
                if not self.scheduler.can_search(rule, direction, iteration):
                    self._held_back = True
                    continue
                arm = (rule.name, direction)
                since, levels = self._searched.get(arm), self._levels[arm]
                nodes = None
                if since is not None and levels is not None and self._matcher(rule, direction) is not None:
                    # only the matches through changed e-nodes
                    if since[1] not in fresh:
                        touched = egraph.touched[since[1] : end[1]]
                        fresh[since[1]] = [n for n in dict.fromkeys(touched) if egraph.is_enode(n)]
                    nodes = fresh[since[1]]
                    candidates = []
                else:
                    if heads is None:
                        candidates = classes
                    else:
                        if by_op is None:
                            by_op = _by_op(machine, classes)
                        candidates = _holding(heads, by_op, position)
                    if since is not None and levels is not None:
                        if (since[0], levels) not in near:
                            near[since[0], levels] = egraph.near(egraph.changed[since[0] : end[0]], levels)
                        changed = near[since[0], levels]
                        candidates = [c for c in candidates if c in changed]
                if not candidates and not nodes:
                    self._searching[arm] = end
                    continue
                stats = self.report.rules[rule.name]
                held = self._held.pop(arm, None)
                if held is not None and held[0] == version:
                    found, runs, searched, self._noops = held[1], [], held[2], 0
                    stats.runs += searched
                else:
                    searched = stats.runs
                    try:
                        found, runs = self._search_rule(
                            rule, direction, candidates, nodes, position, deadline
                        )
                    except _OutOfTime:
                        return matches, StopReason.TIME_LIMIT
                    if found is None:
                        continue
                    searched = stats.runs - searched
                count = sum(map(len, found)) if found and type(found[0]) is _Compiled else len(found)
                stats.answers += count
                if self.scheduler.admit(rule, direction, iteration, count):
                    matches.extend(found)
                    self._runs[rule.name, direction] = count + self._noops
                    self._applied.update(runs)
                    self._searching[arm] = end
                else:
                    self._held_back = True
                    if self._matcher(rule, direction) is not None:
                        self._held[arm] = (version, found, searched)
        return matches, None

    def _search_rule(
        self,
        rule: Rule,
        direction: str,
        candidates: list[int],
        nodes: list[int] | None,
        position: Mapping[int, int],
        deadline: float,
    ) -> tuple[list[_Found] | None, list]:
        """The new matches of (rule, direction) at `candidates` (or, for a compiled side, through the
        e-nodes `nodes`) and the goal runs made, within the rule's time (None: it failed, and is
        disabled); raises `_OutOfTime` past the run's deadline."""
        stats = self.report.rules[rule.name]
        started = time.perf_counter()
        left = deadline - started
        if left <= 0:
            raise _OutOfTime
        seconds = min(self.limits.rule_seconds, left)
        found: list[_Found] = []
        runs: list = []
        self._noops = 0
        try:
            with relation_budget(
                lambda: f"rule {rule.name} searching {direction}", None, seconds, RuleTimeout
            ) as meter:
                if rule.lhs is None:
                    self._run_goal(rule, candidates, found, runs)
                else:
                    matcher = self._matcher(rule, direction)
                    if matcher is not None:
                        self._match_compiled(rule, direction, matcher, candidates, nodes, position, found)
                    else:
                        self._match(rule, direction, candidates, found)
            if meter.error is not None:  # raised inside the search and swallowed there
                raise meter.fresh_error()
        except RuleTimeout as exc:
            if exc.budget == "max_seconds" and seconds < self.limits.rule_seconds:
                raise _OutOfTime from None
            self._fail(rule, f"{direction}: {type(exc).__name__}: {exc}")
            return None, runs
        except Exception as exc:
            self._fail(rule, f"{direction}: {type(exc).__name__}: {exc}".rstrip(": "))
            return None, runs
        finally:
            stats.seconds += time.perf_counter() - started
        return found, runs

    def _matcher(self, rule: Rule, direction: str) -> Any:
        """The compiled matcher of the side `direction` reads, when a match needs nothing else (no
        guards or computed values: a match binds classes only), else None; it passes over the
        matches whose written side is in their class already when that side can be looked up under
        them (`_probe`)."""
        sides = rule.sides
        if rule.lhs is None or sides is None or sides.where or sides.computed or rule.lhs.guards():
            return None
        arm = (rule.name, direction)
        if arm not in self._matchers:
            read = rule.lhs if direction == "forward" else rule.rhs
            matcher, probe = self.machine.matcher(read), self._probe(rule, direction)
            if matcher is not None and probe is not None:  # None: it reads a variable no match binds
                matcher = self.machine.matcher(read, probe) or matcher
            self._matchers[arm] = matcher
        return self._matchers[arm]

    def _probe(self, rule: Rule, direction: str) -> tuple | None:
        """The side `direction` writes compiled for look-ups (`EClasses.present`, `_matcher`), when a
        match whose written side is in its class changes nothing: that side can be looked up and the
        side read is `plain` (applying such a match would only add term nodes congruent to e-nodes
        there); else None."""
        arm = (rule.name, direction)
        if arm not in self._probes:
            read, write = (rule.lhs, rule.rhs) if direction == "forward" else (rule.rhs, rule.lhs)
            self._probes[arm] = self.machine.probe(write) if self.machine.plain(read) else None
        return self._probes[arm]

    def _match(self, rule: Rule, direction: str, candidates: list[int], found: list) -> None:
        """E-match the side of `rule` that `direction` reads at each candidate class; a match whose
        other side is already in its class changes nothing and is noted as applied."""
        machine, stats = self.machine, self.report.rules[rule.name]
        side = rule.lhs if direction == "forward" else rule.rhs
        seen: set[Any] = set()
        probe = self._probe(rule, direction)
        for c in candidates:
            stats.runs += 1
            for s in side.matches(ClassRef(c), target=machine):
                for done in completions(rule, s, direction, machine):
                    key = self._key(rule, direction, c, done)
                    if key is None:
                        self._levels[rule.name, direction] = None  # never known applied: search in full
                    elif key in self._applied or key in seen:
                        continue
                    seen.add(key)
                    if probe is not None and key is not None and _present(machine, probe, done) == c:
                        self._applied.add(key)  # its other side is in its class already
                        self._noops += 1
                        continue
                    found.append(_Match(rule, direction, c, done, key, self._applied))

    def _match_compiled(
        self,
        rule: Rule,
        direction: str,
        matcher: Any,
        candidates: list[int],
        nodes: list[int] | None,
        position: Mapping[int, int],
        found: list,
    ) -> None:
        """`_match` by a compiled matcher, at `candidates`, or (`nodes`, semi-naive) only the matches
        through those e-nodes: the same matches in the same order (`EClasses.match`)."""
        machine, stats = self.machine, self.report.rules[rule.name]
        variables = matcher.variables
        if direction == "backward" and not rule.sides.lhs_variables <= set(variables):
            return  # a match would leave the side it writes unbound
        applied = self._compiled_applied.setdefault((rule.name, direction), set())
        # ranked by their root's position (unreachable roots are passed over), then order; a match
        # whose other side is in its class already changes nothing, and goes into `applied`
        into = Matches(applied, position, machine.width ** len(matcher.atoms))
        if nodes is None:
            for c in candidates:
                machine.match(matcher, c, into)
            stats.runs += len(candidates)
        else:
            stats.runs += machine.new_matches(matcher, nodes, into)
        self._noops += into.noops
        if into.best:
            found.append(
                _Compiled(
                    rule,
                    direction,
                    [key for key, _ in sorted(into.best.items(), key=itemgetter(1))],
                    variables,
                    applied,
                )
            )

    def _key(self, rule: Rule, direction: str, cls: int, s: Mapping) -> Any:
        """A match's name up to the current roots of its classes (None when a value is unhashable)."""
        find = self.egraph.find

        def canonical(value: Any) -> Any:
            if type(value) is ClassRef:
                return ("class", find(value))
            if isinstance(value, tuple):
                return tuple(map(canonical, value))
            return value

        try:
            return (rule.name, direction, find(cls), frozenset((v, canonical(x)) for v, x in s.items()))
        except TypeError:
            return None

    def _run_goal(self, rule: Rule, candidates: list[int], found: list, runs: list) -> None:
        """Run a goal rule forward on each e-node of the candidates whose op it tracks (one level deep)."""
        machine, stats = self.machine, self.report.rules[rule.name]
        budget = Budget(self.limits.answers, None)
        for c in candidates:
            for op, children in machine.applications(ClassRef(c)):
                if rule.tracks is not None and not _tracked(op, rule.tracks):
                    continue
                term = self._term(op, children)
                if term is None or (rule.name, term) in self._applied:
                    continue
                stats.runs += 1
                runs.append((rule.name, term))
                found.extend(_Answer(rule, c, term, a) for a in rule_answers(rule, term, budget))

    def _term(self, op: Op, children: tuple[ClassRef, ...]) -> Variable | None:
        """The e-node op(children) as one graph over the children's proxies, the same object each time."""
        key = (op, tuple(self.machine.proxy(c) for c in children))
        if key not in self._terms:
            self._terms[key] = self.machine.term(op, children)
        return self._terms[key]

    def _fail(self, rule: Rule, why: str) -> None:
        """Stop running `rule`, naming it and why in `Report.failed` and in a RewriteWarning (as the
        rewrite engine reports a rule that raises): the run goes on without it."""
        self._disabled.add(rule.name)
        self.report.failed[rule.name] = why
        warnings.warn(
            f"exploring: rule {rule.name} failed ({why}); not run again", RewriteWarning, stacklevel=2
        )

    # -- apply -------------------------------------------------------------------------------

    def _apply(self, matches: list[_Found], iteration: int, deadline: float) -> StopReason | None:
        """Apply the matches up to a limit, without rebuilding (look-ups go through `find`)."""
        egraph, report, limits = self.egraph, self.report, self.limits
        unions: dict[tuple[str, str], int] = {}
        stop = None
        for m in matches:
            if (
                egraph.node_count >= limits.nodes
                or len(egraph.classes) >= limits.classes
                or (deadline < math.inf and time.perf_counter() >= deadline)
            ):
                stop = self._limit_reached(deadline)
                break
            if m.rule.name in self._disabled:
                continue
            if type(m) is _Compiled:
                stop = self._apply_compiled(m, deadline, unions)
                if stop is not None:
                    break
                continue
            before = egraph.node_count
            try:
                merged = self._apply_answer(m) if isinstance(m, _Answer) else self._apply_match(m)
            except Exception as exc:
                self._fail(m.rule, f"applying {m.direction}: {type(exc).__name__}: {exc}")
                continue
            report.largest_step = max(report.largest_step, egraph.node_count - before)
            if merged:
                report.rules[m.rule.name].unions += 1
                unions[m.rule.name, m.direction] = unions.get((m.rule.name, m.direction), 0) + 1
        for (name, direction), runs in self._runs.items():
            self.scheduler.record(
                self._by_name[name], direction, iteration, runs, unions.get((name, direction), 0)
            )
        return stop

    def _apply_compiled(
        self, matches: _Compiled, deadline: float, unions: dict[tuple[str, str], int]
    ) -> StopReason | None:
        """`_apply` of the matches of a compiled side, each directly when its sides have placed plans
        (`_direct`); the limit reached, if one stopped it."""
        egraph, limits, rule, direction = self.egraph, self.limits, matches.rule, matches.direction
        stats, largest, merges = self.report.rules[rule.name], self.report.largest_step, 0
        try:
            direct = self._direct(rule, direction)
            for key in matches.keys:
                if (
                    egraph.node_count >= limits.nodes
                    or len(egraph.classes) >= limits.classes
                    or (deadline < math.inf and time.perf_counter() >= deadline)
                ):
                    return self._limit_reached(deadline)
                before = egraph.node_count
                if (
                    self._apply_match(matches.match(key))
                    if direct is None
                    else self._apply_direct(rule, direction, key, matches.applied, *direct)
                ):
                    merges += 1
                if egraph.node_count - before > largest:
                    largest = egraph.node_count - before
        except Exception as exc:
            self._fail(rule, f"applying {direction}: {type(exc).__name__}: {exc}")
        finally:
            self.report.largest_step = largest
            stats.unions += merges
            unions[rule.name, direction] = unions.get((rule.name, direction), 0) + merges
        return None

    def _apply_match(self, m: _Match) -> bool:
        """Build the match's two sides and merge them; whether that merged two classes."""
        egraph, machine, rule = self.egraph, self.machine, m.rule
        if m.key is not None:
            m.applied.add(m.key)
        read, write = (rule.lhs, rule.rhs) if m.direction == "forward" else (rule.rhs, rule.lhs)
        target = egraph.find(m.cls)
        try:
            other = machine.instantiate(write, m.subst)
            matched = machine.instantiate(read, m.subst, splice=False)
            if not egraph.classes[target].type.is_compatible(machine.type_of(other, target)):
                return False
        except Unbuildable:
            return False
        cls, inside, operands = machine.classes_inside(other)
        if cls == target and self._probe(rule, m.direction) is not None:
            return False  # already in its class (an earlier match of this iteration put it there)
        if self._wraps(target, inside, getattr(other, "op", None), operands):
            return False
        bindings = []
        for a in rule.assumptions:
            value = m.subst.get(rule.lhs.names.get(a.name), None)
            if type(value) is ClassRef:
                bindings.append((a.name, egraph.find(value)))
            elif isinstance(value, Variable):
                bindings.append((a.name, egraph.intern(value, machine.placeholder_class)))
        if self._contradicted(rule, bindings):
            return False
        source = machine.add(matched, target)
        result = machine.add(other, target)
        return egraph.union(source, result, Applied(rule, m.direction, source, result, tuple(bindings)))

    def _direct(self, rule: Rule, direction: str) -> tuple | None:
        """How `_apply_direct` builds the compiled matches of (rule, direction): the placed plans of
        the side read and the side written, the positions of the assumption variables' values, a
        store of their types and whether a match's written side is settled (`EClasses.settled`);
        None when a side has no placed plan or applying a match whose written side is in its class
        could change something (`_probe`)."""
        arm = (rule.name, direction)
        if arm not in self._directs:
            self._directs[arm] = None
            variables = self._matcher(rule, direction).variables
            read, write = (rule.lhs, rule.rhs) if direction == "forward" else (rule.rhs, rule.lhs)
            read_steps = self.machine.placed_plan(read, variables)
            write_steps = self.machine.placed_plan(write, variables)
            probe = self._probe(rule, direction)
            settled = None if probe is None else self.machine.settled(probe, variables)
            if read_steps is not None and write_steps is not None and settled is not None:
                names = [rule.lhs.names.get(a.name) for a in rule.assumptions]
                bindings = tuple(
                    (a.name, variables.index(v)) for a, v in zip(rule.assumptions, names) if v in variables
                )
                self._directs[arm] = (read_steps, write_steps, bindings, {}, settled)
        return self._directs[arm]

    def _apply_direct(
        self,
        rule: Rule,
        direction: str,
        key: tuple,
        applied: set,
        read: tuple,
        write: tuple,
        bindings: tuple,
        typed: dict,
        settled: Callable,
    ) -> bool:
        """`_apply_match` of the compiled match `key` of (rule, direction) by the placed plans of its
        sides (`_direct`), from its classes to the e-nodes they add, with no substitution or built
        tree in between (each check that ends it changes nothing, so the cheapest comes first).
        `typed` keeps the types of both sides by what types them (the values' types, or constants)."""
        egraph, machine = self.egraph, self.machine
        applied.add(key)
        find, values = egraph.find, key[1:]
        target = find(key[0])
        if settled(target, *values):
            return False  # in its class already, or it would wrap the class in itself
        slots = machine.slots(values)
        key = tuple([slot[0] for slot in slots])
        types = typed.get(key)
        if types is None:
            proxies = [machine.proxy(c) for c in values]
            try:
                types = typed[key] = (machine.types_at(write, proxies), machine.types_at(read, proxies))
            except Unbuildable:
                types = typed[key] = ()
        if not types:
            return False
        write_types, read_types = types
        class_type = egraph.classes[target].type
        if class_type is not write_types[-1] and not class_type.is_compatible(write_types[-1]):
            return False
        terms = [find(ref) if placeholder else ref for _, ref, placeholder in slots]
        source = machine.add_at(read, read_types, terms)
        result = machine.add_at(write, write_types, terms)
        bound = tuple([(name, find(values[k])) for name, k in bindings])
        if bound and self._contradicted(rule, bound):
            return False
        return egraph.union(source, result, Applied(rule, direction, source, result, bound))

    def _apply_answer(self, m: _Answer) -> bool:
        """Merge a goal rule's answer with the e-node it answered for; whether that merged two classes."""
        egraph, machine = self.egraph, self.machine
        target = egraph.find(m.cls)
        answer = m.answer.term
        if not egraph.classes[target].type.is_compatible(answer.type):
            return False

        def exact(v: Variable) -> bool:
            return v is m.term

        found = egraph.lookup(answer, machine.placeholder_class, exact=exact)
        op = answer.owner.op if answer.owner is not None else None
        if found.cls != target and self._wraps(target, found.inside, op, found.operands):
            return False
        bindings = tuple(
            (name, egraph.intern(value, machine.placeholder_class, exact=exact))
            for name, value in m.answer.bindings.items()
        )
        if self._contradicted(m.rule, bindings):
            return False
        source = egraph.intern(m.term, machine.placeholder_class, flatten=False)
        result = egraph.intern(answer, machine.placeholder_class, exact=exact)
        return egraph.union(source, result, Applied(m.rule, "forward", source, result, bindings))

    def _contradicted(self, rule: Rule, bindings: Sequence[tuple[str, int]]) -> bool:
        """Whether an assumption of `rule` fails at a constant it is said of (``exp(log(x)) -> x`` at
        x = -1): such a union would hold nowhere, and would merge unequal classes (-1 with 1 through
        abs) for every later explanation to build on."""
        egraph, bound = self.egraph, dict(bindings)
        for a in rule.assumptions:
            node = egraph.constant(bound[a.name]) if a.name in bound else None
            if node is not None and not np.all(a.holds(egraph.leaf(node).data)):
                return True
        return False

    def _wraps(
        self, target: int, inside: Iterable[int], op: Op | None, operands: Sequence[int | None]
    ) -> bool:
        """Whether an answer only wraps class `target` in itself (see the module docstring): it holds
        the class as a proper subterm, or is an add (mul) whose operands hold an e-node of the class."""
        egraph = self.egraph
        if target in inside:
            return True
        if op not in AC_OPS or not operands:
            return False
        mine_all: Counter | None = None
        for n in egraph.nodes(target):
            if egraph.op(n) == op:
                children = egraph.children(n)
                if len(children) >= len(operands):  # not a proper sub-multiset of the operands
                    continue
                mine_all = Counter(operands) if mine_all is None else mine_all
                if not Counter(children) - mine_all:
                    return True
        return False


@contextmanager
def _collector_relaxed() -> Iterator[None]:
    """Python's cyclic garbage collector run less often (generation 0 at `COLLECT_EVERY` allocations):
    a run allocates many small tuples that live as long as the e-graph, and the collector's passes
    over them (each full pass over the whole heap) took a quarter of a saturation's time (comm +
    assoc of 8 leaves).  The cycles a run drops are still collected, in fewer passes.  Runs on
    several threads share the setting: the first to start makes it, the last to end restores it."""
    global _relaxed_runs, _thresholds
    with _relaxing:
        if _relaxed_runs == 0:
            _thresholds = gc.get_threshold()
            gc.set_threshold(max(_thresholds[0], COLLECT_EVERY), *_thresholds[1:])
        _relaxed_runs += 1
    try:
        yield
    finally:
        with _relaxing:
            _relaxed_runs -= 1
            if _relaxed_runs == 0:
                gc.set_threshold(*_thresholds)


_relaxing = threading.Lock()
_relaxed_runs = 0  # the runs under `_collector_relaxed` now
_thresholds = gc.get_threshold()  # the collector's thresholds before the first of them


def _directions(rule: Rule, direction: str) -> list[tuple[str, tuple | None]]:
    """The directions `rule` is searched in, each with the heads of the classes to search (None: all).

    A goal rule runs forward only, at its tracked ops.  A pattern rule runs
    backward when its declaration says it can, except when its right side
    is a bare variable (every answer would wrap a class in itself); a right
    side ``(add, ..., *rest)`` also reads a lone value, so it searches every class.
    """
    found = []
    if direction in ("forward", "both"):
        heads = rule.tracks if rule.lhs is None else _heads(rule.lhs)
        found.append(("forward", heads))
    if direction in ("backward", "both") and rule.lhs is not None and rule.backward:
        root = rule.rhs.root
        while isinstance(root, _Guarded):
            root = root.inner
        if not isinstance(root, _Named):
            lone = isinstance(root, _Apply) and root.multiset and root.sequence is not None
            found.append(("backward", None if lone else _heads(rule.rhs)))
    return found


def _levels(rule: Rule, direction: str) -> int | None:
    """How many parent levels above a changed class a search of (rule, direction) must visit to find
    every new match (None: every class, see the module docstring).

    A match reads e-nodes down to the pattern's depth and binds classes one level below; a goal rule
    reads one e-node and its operands' proxies."""
    if rule.lhs is None:
        return 1
    if rule.sides is not None and (rule.sides.computed or rule.sides.where):
        return None  # code reads `VIEW_DEPTH` levels below what it is given: any change may matter
    side = rule.lhs if direction == "forward" else rule.rhs
    if any(
        isinstance(item, _Exactly) and isinstance(item.value, Variable) and item.value.owner is not None
        for item in side.nodes()
    ):
        return None  # a graph given in the pattern is looked up as deep as it goes
    return side.depth() + 1


def _present(machine: EClasses, probe: tuple, s: Mapping) -> int | None:
    """`EClasses.present` for a substitution `s`, None unless it binds the probe's variables to classes."""
    values = {}
    for v in probe[1]:
        value = s.get(v)
        if type(value) is not ClassRef:
            return None
        values[v] = machine.egraph.find(value)
    return machine.present(probe, values)


def _heads(pattern: Pattern) -> tuple | None:
    return None if pattern.head is None else (pattern.head,)


def _by_op(machine: EClasses, classes: list[int]) -> dict[Op, list[int]]:
    """The classes among `classes` holding an e-node of each op, in the order of `classes`."""
    by_op: dict[Op, list[int]] = {}
    for c in classes:
        for op, _ in machine.applications(ClassRef(c)):
            holding = by_op.setdefault(op, [])
            if not holding or holding[-1] != c:
                holding.append(c)
    return by_op


def _holding(heads: Sequence[Op | type], by_op: dict[Op, list[int]], position: dict[int, int]) -> list[int]:
    """The classes holding an e-node headed by one of `heads` (an op, or an op class), in search order."""
    lists = [cs for op, cs in by_op.items() if _tracked(op, heads)]
    if len(lists) == 1:
        return lists[0]
    return sorted({c for cs in lists for c in cs}, key=position.__getitem__)


def _tracked(op: Op, heads: Sequence[Op | type]) -> bool:
    return any(op == h if isinstance(h, Op) else isinstance(op, h) for h in heads)

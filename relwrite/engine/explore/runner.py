"""The runner: apply rules to an e-graph by running their relations, within limits.

Each iteration searches, applies, then rebuilds, as egg's `Runner` does.
Search runs every rule forward at every e-node whose op it tracks, and
backward at every e-node its right side can be headed by, on the
materialized terms of `TermView`, through the one adapter
`rewrite.rule_answers`.  A (rule, direction, term) already run is not run
again: a relation's answers depend only on the term.  Apply interns each
answer and merges it with the class it was found for, recording the rule,
the direction and the two terms for explanations.

Limits: iterations, e-nodes, classes and seconds; the node limit is a hard
stop checked before every application, so it is overshot by at most the
nodes of one answer.  The time limit is checked before every rule run and
every application, and no rule run may outlast it.  A rule that raises or
outlasts its own time budget is reported by name in `Report.failed` and not
run again; the run goes on.
`BackoffScheduler` keeps rules that match too often from flooding the graph.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from relwrite.engine.explore.egraph import AC_OPS, Applied, EGraph, Lookup
from relwrite.engine.explore.rewrite import Answer, Budget, RuleTimeout, backward_heads, reach, rule_answers
from relwrite.engine.explore.terms import TermView
from relwrite.graph.basic import Op, Variable
from relwrite.relations.budget import budget_clock
from relwrite.relations.registry import Rule

SATURATED = "saturated"
ITERATION_LIMIT = "iteration limit"
NODE_LIMIT = "node limit"
CLASS_LIMIT = "class limit"
TIME_LIMIT = "time limit"
GOAL = "goal reached"


@dataclass(frozen=True)
class Limits:
    """Budgets of an exploration (egg's defaults for the first three).

    - `iterations`, `nodes` (e-nodes), `classes`: when the runner stops;
    - `seconds`: the whole call's time (`deadline.Deadline`): growing the
      e-graph, then extracting, explaining and checking forms (`math.inf`:
      no time limit, for runs whose outcome must not depend on the machine);
    - `rule_seconds`, `answers`: the budget of one rule run (`rewrite.Budget`);
    - `depth`, `width`: how far and how wide terms are materialized for
      relations (`TermView`): patterns up to depth + 1 levels of ops match.
    """

    iterations: int = 30
    nodes: int = 10_000
    classes: int = 10_000
    seconds: float = 5.0
    rule_seconds: float = 1.0
    answers: int = 8
    depth: int = 3
    width: int = 4

    def __post_init__(self) -> None:
        for name in ("iterations", "nodes", "classes", "answers", "width"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{name} must be a positive int, got {value!r}")
        if not isinstance(self.depth, int) or self.depth < 0:
            raise ValueError(f"Limits.depth must be a non-negative int, got {self.depth!r}")
        for name in ("seconds", "rule_seconds"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")


@dataclass
class RuleStats:
    """What one rule did: runs, answers found, unions made, seconds spent."""

    runs: int = 0
    answers: int = 0
    unions: int = 0
    seconds: float = 0.0


@dataclass
class Report:
    """How a run went: why it stopped, how far it got, and which rules failed (name -> why)."""

    stop_reason: str = ""
    iterations: int = 0
    nodes: int = 0
    classes: int = 0
    seconds: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)
    rules: dict[str, RuleStats] = field(default_factory=dict)
    largest_step: int = 0
    """The most e-nodes one rule application added (the node limit is overshot by less than this)."""
    phases: dict[str, str] = field(default_factory=dict)
    """The phases after growing the e-graph that stopped early (cost, extraction, explanation,
    checking), with why (TIME_LIMIT): what they had done by then is what the call returned."""


class BackoffScheduler:
    """egg's BackoffScheduler, per rule and direction: what keeps matching is banned for a while.

    A (rule, direction) whose answers in one iteration exceed its match
    limit is banned for `ban_length` iterations; one that ran at least
    `idle_runs` times in an iteration without merging anything (it keeps
    matching to no effect: a rule run backward whose every answer only wraps
    a term, say) for twice as long.  The limit and the bans double with each
    ban.  Bans only delay: when nothing else changes they are
    lifted (`lift_bans`), and the runner declares saturation only after an
    iteration with every rule searching changed nothing.
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
        """Note what (rule, direction) did this iteration; many runs that merged nothing ban it."""
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
    rule: Rule
    direction: str
    cls: int
    term: Variable
    answer: Answer


class Runner:
    """Apply `rules` to `egraph` in `direction` ("forward", "backward" or "both") within `limits`.

    `progress(report)` is called after every iteration.
    """

    def __init__(
        self,
        egraph: EGraph,
        rules: Sequence[Rule],
        direction: str = "both",
        limits: Limits | None = None,
        scheduler: BackoffScheduler | None = None,
        progress: Callable[[Report], None] | None = None,
    ):
        if direction not in ("forward", "backward", "both"):
            raise ValueError(f"direction must be 'forward', 'backward' or 'both', got {direction!r}")
        self.egraph = egraph
        self.rules = list(rules)
        self.direction = direction
        self.limits = limits or Limits()
        self.scheduler = scheduler or BackoffScheduler()
        self.progress = progress
        self.view = TermView(egraph, self.limits.depth, self.limits.width)
        self.report = Report(rules={r.name: RuleStats() for r in self.rules})
        self._tried: set[tuple[int, str, Variable]] = set()
        self._disabled: set[str] = set()
        self._backward_heads = {r.name: backward_heads(r) for r in self.rules}
        self._by_name = {r.name: r for r in self.rules}
        self._runs: dict[tuple[str, str], int] = {}

    def run(
        self, roots: Iterable[int], goal: Callable[[], bool] | None = None, until: float | None = None
    ) -> Report:
        """Run until saturation, a limit, or `goal()` turns true (checked after each rebuild).

        `until` is when to stop (a `time.perf_counter()` time; default: `limits.seconds` from now).
        """
        with budget_clock():
            return self._run(list(roots), goal, until)

    def _run(self, roots: list[int], goal: Callable[[], bool] | None, until: float | None) -> Report:
        limits, report, egraph = self.limits, self.report, self.egraph
        started = time.perf_counter()
        deadline = started + limits.seconds if until is None else until
        egraph.rebuild()
        stop = GOAL if goal is not None and goal() else ""
        iteration = 0
        lifted = False  # whether the bans were lifted for the iteration now running
        while not stop:
            stop = self._limit_reached(deadline)
            if stop:
                break
            if iteration >= limits.iterations:
                stop = ITERATION_LIMIT
                break
            before = (egraph.unions, egraph.node_count)
            self.view.new_round()
            matches, stop = self._search(egraph.reachable(roots), iteration, deadline)
            stop = self._apply(matches, iteration, deadline) or stop
            egraph.rebuild()
            iteration += 1
            self._note(report, iteration, started)
            if self.progress is not None:
                self.progress(report)
            if not stop and goal is not None and goal():
                stop = GOAL
            if not stop and (egraph.unions, egraph.node_count) == before:
                if lifted or not self.scheduler.lift_bans(iteration):
                    stop = SATURATED
                lifted = True
            else:
                lifted = False
        report.stop_reason = stop
        self._note(report, iteration, started)
        return report

    def _note(self, report: Report, iteration: int, started: float) -> None:
        report.iterations = iteration
        report.nodes = self.egraph.node_count
        report.classes = self.egraph.class_count
        report.seconds = time.perf_counter() - started

    def _limit_reached(self, deadline: float | None) -> str:
        """Which limit is reached, if any (the clock only when given a deadline)."""
        if self.egraph.node_count >= self.limits.nodes:
            return NODE_LIMIT
        if self.egraph.class_count >= self.limits.classes:
            return CLASS_LIMIT
        if deadline is not None and time.perf_counter() >= deadline:
            return TIME_LIMIT
        return ""

    # -- search ------------------------------------------------------------------------------

    def _search(self, classes: list[int], iteration: int, deadline: float) -> tuple[list[_Match], str]:
        egraph = self.egraph
        by_op: dict[Op, list[tuple[int, int]]] = {}
        for c in classes:
            for n in egraph.nodes(c):
                op = egraph.op(n)
                if op is not None:
                    by_op.setdefault(op, []).append((c, n))
        matches: list[_Match] = []
        self._runs = {}
        for rule in self.rules:
            for direction, heads in self._directions(rule):
                if rule.name in self._disabled or not self.scheduler.can_search(rule, direction, iteration):
                    continue
                found: list[_Match] = []
                runs: list[tuple[int, str, Variable]] = []
                for c, term in self._terms(rule, direction, heads, by_op):
                    key = (id(rule), direction, term)
                    if key in self._tried:
                        continue
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        self._admit(rule, direction, iteration, found, runs, matches)
                        return matches, TIME_LIMIT
                    answers = self._answers(rule, term, direction, left)
                    if answers is _OUT_OF_TIME:  # cut by the deadline, not the rule's fault: not tried
                        self._admit(rule, direction, iteration, found, runs, matches)
                        return matches, TIME_LIMIT
                    runs.append(key)
                    if answers is None:
                        break
                    found.extend(_Match(rule, direction, c, term, a) for a in answers)
                else:
                    self._admit(rule, direction, iteration, found, runs, matches)
        return matches, ""

    def _terms(
        self, rule: Rule, direction: str, heads: tuple | None, by_op: dict[Op, list[tuple[int, int]]]
    ) -> Iterator[tuple[int, Variable]]:
        """(class, term) for every materialized term the rule may answer for in `direction`."""
        depth = reach(rule, direction)
        for op, entries in by_op.items():
            if heads is not None and not _tracked(op, heads):
                continue
            for c, n in entries:
                for term in self.view.node_terms(n, depth):
                    yield c, term

    def _admit(
        self,
        rule: Rule,
        direction: str,
        iteration: int,
        found: list[_Match],
        runs: list[tuple[int, str, Variable]],
        matches: list[_Match],
    ) -> None:
        if self.scheduler.admit(rule, direction, iteration, len(found)):
            self._tried.update(runs)
            matches.extend(found)
            self._runs[rule.name, direction] = len(runs)

    def _directions(self, rule: Rule) -> list[tuple[str, tuple | None]]:
        directions = []
        if self.direction in ("forward", "both"):
            directions.append(("forward", rule.tracks))
        heads = self._backward_heads[rule.name]
        if self.direction in ("backward", "both") and heads != ():
            directions.append(("backward", heads))
        return directions

    def _answers(
        self, rule: Rule, term: Variable, direction: str, left: float
    ) -> list[Answer] | object | None:
        """The rule's answers, None when it failed (then it is reported and disabled), or `_OUT_OF_TIME`
        when the run outlasted the `left` seconds of the whole run, less than its own budget."""
        stats = self.report.rules[rule.name]
        started = time.perf_counter()
        seconds = min(self.limits.rule_seconds, left)
        try:
            answers = rule_answers(rule, term, direction, Budget(self.limits.answers, seconds))
        except RuleTimeout as exc:
            if exc.budget == "max_seconds" and seconds < self.limits.rule_seconds:
                return _OUT_OF_TIME
            self._fail(rule, f"{direction} on {term}: {type(exc).__name__}: {exc}")
            return None
        except Exception as exc:
            self._fail(rule, f"{direction} on {term}: {type(exc).__name__}: {exc}".rstrip(": "))
            return None
        finally:
            stats.runs += 1
            stats.seconds += time.perf_counter() - started
        stats.answers += len(answers)
        return answers

    def _fail(self, rule: Rule, why: str) -> None:
        self._disabled.add(rule.name)
        self.report.failed[rule.name] = why

    # -- apply -------------------------------------------------------------------------------

    def _apply(self, matches: list[_Match], iteration: int, deadline: float) -> str:
        """Apply the matches found up to the node limit or the deadline (those left are run again
        should the run go on)."""
        unions: dict[tuple[str, str], int] = {}
        stop = self._apply_all(matches, unions, deadline)
        for (name, direction), runs in self._runs.items():
            self.scheduler.record(
                self._by_name[name], direction, iteration, runs, unions.get((name, direction), 0)
            )
        return stop

    def _apply_all(self, matches: list[_Match], unions: dict[tuple[str, str], int], deadline: float) -> str:
        egraph, report = self.egraph, self.report
        for k, m in enumerate(matches):
            egraph.rebuild()  # lookups below need the hash-cons current, and the count must be right
            stop = self._limit_reached(deadline)
            if stop:
                if stop == TIME_LIMIT:
                    self._tried.difference_update((id(r.rule), r.direction, r.term) for r in matches[k:])
                return stop
            if m.rule.name in self._disabled:
                continue
            before = egraph.node_count
            self._apply_one(m, unions)
            egraph.rebuild()
            report.largest_step = max(report.largest_step, egraph.node_count - before)
        return ""

    def _apply_one(self, m: _Match, unions: dict[tuple[str, str], int]) -> None:
        egraph, view = self.egraph, self.view
        target = egraph.find(m.cls)
        answer = m.answer.term
        if not egraph.classes[target].type.is_compatible(answer.type):
            return
        found = egraph.lookup(answer, view.placeholder_class, exact=view.materialized)
        if found.cls != target and self._wraps(found, answer, target):
            return
        try:
            source = egraph.intern(m.term, view.placeholder_class, flatten=False)
            result = egraph.intern(answer, view.placeholder_class, exact=view.materialized)
            bindings = tuple(
                (name, egraph.intern(value, view.placeholder_class, exact=view.materialized))
                for name, value in m.answer.bindings.items()
            )
        except Exception as exc:
            self._fail(m.rule, f"its answer {answer} could not be added: {type(exc).__name__}: {exc}")
            return
        if egraph.union(source, result, Applied(m.rule, m.direction, source, result, bindings)):
            self.report.rules[m.rule.name].unions += 1
            unions[m.rule.name, m.direction] = unions.get((m.rule.name, m.direction), 0) + 1

    def _wraps(self, found: Lookup, answer: Variable, target: int) -> bool:
        """Whether adding `answer` (found where `found` says) to class `target` would only wrap the
        class in itself.

        An answer holding the class as a proper subterm (``x -> -(-x)``), or,
        for add and mul, holding an e-node of the class as a sub-multiset of
        its operands (``x + y -> 0 + x + y`` is ``0 + (x + y)``), would let
        the rule apply again to its own answer without end.
        """
        egraph = self.egraph
        if target in found.inside:
            return True
        op = answer.owner.op if answer.owner is not None else None
        if op not in AC_OPS or not found.operands:
            return False
        operands = Counter(found.operands)
        for n in egraph.nodes(target):
            if egraph.op(n) == op:
                mine = Counter(egraph.children(n))
                if mine != operands and not mine - operands:
                    return True
        return False


_OUT_OF_TIME = object()


def _tracked(op: Op, heads: Sequence[Op | type]) -> bool:
    return any(op == h if isinstance(h, Op) else isinstance(op, h) for h in heads)

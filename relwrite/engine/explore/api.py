"""Exploring equivalent forms: `explore`, `best_form`, `prove`, and the `Exploration` behind them.

An `Exploration` interns expressions into an e-graph and grows it by
running the rules both ways (`Runner`); its forms are extracted by a cost
and each comes with its derivation from the input and the assumptions the
derivation relies on.  Before a form is handed out it is re-checked
numerically against the input on inputs drawn from a fixed seed (`checking`); a
mismatch raises `UnsoundFormError` naming the step of the derivation that
breaks, never a silent wrong form.

A call finishes within its `Limits.seconds`: one `Deadline` runs through
building the cost, growing the e-graph (a share of the time), extracting,
explaining and checking forms; a phase the deadline stops returns what it
has (forms checked so far; `best_form` the input itself, cost NaN, when no
cheaper form was found, explained and checked in time), and the phase is
recorded in `Report.phases`.

    >>> from relwrite import parse
    >>> best_form(parse("log(1 + exp(x))"), cost="accuracy").expr
    softplus.0
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

from relwrite.backends.compare import NoUsableExample, SoundnessError
from relwrite.engine.explore.accurate import AccurateExtractor, focus, term_trees
from relwrite.engine.explore.checking import COMPARISONS, check_equal
from relwrite.engine.explore.costs import (
    COSTS,
    Accuracy,
    AccuracyError,
    Domain,
    Flops,
    NodeCount,
    pareto_front,
)
from relwrite.engine.explore.deadline import (
    ACCURACY_SEARCH_SHARE,
    EXTRACTION_SHARE,
    PROOF_SHARE,
    SEARCH_SHARE,
    SERIES_SHARE,
    Deadline,
    TimeLimitReached,
)
from relwrite.engine.explore.egraph import EGraph
from relwrite.engine.explore.explain import Explainer, Explanation, Step
from relwrite.engine.explore.extract import CostFunction, Trees, best_dag_tree, enumerate_trees, ranked_trees
from relwrite.engine.explore.foreign import Back, in_relwrite
from relwrite.engine.explore.regimes import Regimes, infer_regimes, switch_graph
from relwrite.engine.explore.runner import Limits, Report, Runner, StopReason
from relwrite.engine.explore.series import Approximation, approximations
from relwrite.graph import ops
from relwrite.graph.basic import Constant, Variable, clone_get_equiv, constant, graph_inputs, io_toposort
from relwrite.graph.printing import expression_text
from relwrite.relations import catalogue, get_rule
from relwrite.relations.budget import charging_calls, relation_budget
from relwrite.relations.registry import OPT_IN_TAGS, Rule
from relwrite.relations.runtime import checked_direction

CANDIDATES = 32
"""How many of the smallest forms a whole-form cost chooses among: all of them for a callable, and
for accuracy besides the most accurate forms of the whole e-graph (`accurate`)."""

CHECK_EXAMPLES = 10
"""How many generated inputs each form is re-checked on."""

MOST_FORMS = 100
"""How many forms `explore` lists at most (an e-graph with cycles holds endlessly many)."""

APPROXIMATE_ABOVE = 1.0
"""Bits of error of the best form above which the input's series approximations are computed (below,
none can pay)."""

SERIES_STEPS = 5_000_000
"""Python calls SymPy may make expanding one expression when the call has no time limit (a bound on
work, so that a run on work budgets ends, and ends alike on a loaded machine)."""

FRESH_SAMPLES = 128
"""Points of the fresh sample an approximate form must also be more accurate on than the best form."""

WIDE_SHARE = 0.2
"""The share of the time left that drawing the `REGIME_SAMPLES` points (their exact reference) may take."""

REGIME_SAMPLES = 1024
"""Points regimes are chosen on (a fresh sample, besides the search's): bits of error are heavy-tailed (a
point loses all or nothing), so a split chosen on a few hundred points fits the sample, not the range;
the candidates are evaluated in NumPy, and the exact reference of a thousand points takes a tenth of a
second for an expression of a dozen ops."""

Cost = str | CostFunction | Callable[[Variable], float]


@dataclass(frozen=True)
class Form:
    """An expression equivalent to the input: `expr` (a graph over the input's variables), its `cost`,
    its derivation `steps` from the input and the `assumptions` they rely on.

    `unsafe` says the derivation used a rule tagged unsafe (valid where the
    values are finite and the assumptions hold).  A form ranked by accuracy
    names its `worst_subterm`: the subterm that loses the most bits (Herbie's
    local error, `Accuracy.local_errors`) and how many, where some are lost.
    A form made of a truncated series (`approximation`, or a branch of its
    `regimes` that is one) is *approximate*: not equal to the input, but more
    accurate than every form found, on the sample and on a fresh one.
    """

    expr: Variable
    cost: float
    steps: tuple[Step, ...] = ()
    assumptions: frozenset[str] = frozenset()
    unsafe: bool = False
    regimes: Regimes | None = None
    worst_subterm: tuple[Variable, float] | None = None
    approximation: Approximation | None = None
    foreign: Any = None
    """The form in the input's own language when the input was not relwrite's (a PyTensor variable over
    the PyTensor graph's inputs: `explore.foreign`), else None; `expr` is always the relwrite graph."""

    @property
    def approximate(self) -> bool:
        """Whether the form is (or has a branch that is) a truncated series rather than an equal form."""
        if self.regimes is not None:
            return any(b.approximate for b in self.regimes.branches)
        return self.approximation is not None

    @property
    def derivation(self) -> str:
        """The derivation on one line: the rules used in order, ``~`` marking a backward run (for a piecewise
        form, its regimes: each range of the input and its branch's derivation; for an approximation,
        which series)."""
        if self.regimes is not None:
            return str(self.regimes)
        if self.approximation is not None:
            return f"{self.approximation} (an approximation)"
        return " ; ".join(s.rule + ("~" if s.direction == "backward" else "") for s in self.steps) or "input"

    def checked(self) -> Variable:
        """`expr` with its assumptions checked at run time: an `Assert` that raises, naming them and the
        derivation, where one fails (to use a form that holds only under assumptions, safely)."""
        conditions = [
            COMPARISONS[op](term, np.asarray(value, dtype=term.dtype))
            for step in self.steps
            for term, op, value in step.conditions
        ]
        if not conditions:
            return self.expr
        message = f"an assumption of {self.derivation} fails: {', '.join(sorted(self.assumptions))}"
        return ops.assert_op(self.expr, *conditions, message=message)

    def to_dict(self) -> dict:
        """The form as plain data (for JSON): expression text, cost, derivation, steps, assumptions."""
        return {
            "expr": expression_text(self.expr),
            "cost": self.cost,
            "derivation": self.derivation,
            "steps": [s.to_dict() for s in self.steps],
            "assumptions": sorted(self.assumptions),
            "unsafe": self.unsafe,
            "approximate": self.approximate,
            **({"regimes": self.regimes.to_dict()} if self.regimes is not None else {}),
            "worst_subterm": None
            if self.worst_subterm is None
            else {"expr": expression_text(self.worst_subterm[0]), "bits": self.worst_subterm[1]},
        }

    def __str__(self) -> str:
        text = f"{expression_text(self.expr)}  [cost {self.cost:.4g}] {self.derivation}"
        if self.assumptions:
            text += f"  assuming {', '.join(sorted(self.assumptions))}"
        return text + ("  (unsafe)" if self.unsafe else "")

    def _repr_html_(self) -> str:
        """A notebook shows the form as a picture with its cost, derivation and assumptions."""
        import html

        from relwrite.graph.printing import picture_html

        notes = f"cost {self.cost:.4g}; derivation: {self.derivation}"
        if self.assumptions:
            notes += f"; assuming {', '.join(sorted(self.assumptions))}"
        return picture_html(self.expr) + f"<p>{html.escape(notes)}</p>"


@dataclass(frozen=True)
class ParetoPoint:
    """A form on the Pareto front of accuracy (bits of error) against flops."""

    form: Form
    bits: float
    flops: float


class UncheckedFormError(ValueError):
    """A form whose numerical check found no input to compare it at (its assumptions held at none of
    the inputs drawn, or its values were nowhere finite): unverified, so never offered as a form."""


class UnsoundFormError(AssertionError):
    """A form found by exploration does not compute what the input computes.

    `step` is the (1-based) index of the first derivation step that fails on
    its own (None when each step passes alone), `form` the form, `error`
    the `SoundnessError` describing the counterexample.
    """

    def __init__(self, message: str, form: Variable, step: int | None, error: Exception):
        super().__init__(message)
        self.form, self.step, self.error = form, step, error


def _with_accuracy_rules(include: Iterable[str]) -> Iterable[str]:
    """`include` with the `accuracy` identities (relwrite.relations.identities), which a search for the
    most accurate form runs by default (a string is passed on for `select_rules` to refuse)."""
    return include if isinstance(include, str) else (*include, "accuracy")


def select_rules(
    rules: Iterable[Rule | str] | None = None, include: Iterable[str] = (), unsafe: bool = True
) -> list[Rule]:
    """The rules to explore with: those given (by object or name), else the catalogue's defaults.

    Defaults are the identities over the real numbers: the catalogue rules
    without opt-in tags, those tagged explore (kept out of the rewriting
    pipelines, they are what exploration is for) and, unless `unsafe` is
    False, those tagged unsafe (equal wherever the values are finite and
    their assumptions hold, as ``x * y / y = x`` for y != 0: a form reached
    through one says so and lists the assumptions); `include` adds the rules
    whose other opt-in tags it names (accuracy).  A rule that only takes in
    one step what rules chosen with it reach in turn (`Rule.composes`) is
    left out: it adds no form, and each step of an explanation stays small.
    """
    if isinstance(include, str):
        raise TypeError(f"include must be a sequence of tags, got the string {include!r}")
    if rules is None:
        allowed = {"explore", *include} | ({"unsafe"} if unsafe else set())
        unknown = sorted(set(include) - OPT_IN_TAGS - {t for r in catalogue() for t in r.tags})
        if unknown:
            raise ValueError(f"include names no tag of the catalogue: {', '.join(unknown)}")
        chosen = [r for r in catalogue() if r.tags & OPT_IN_TAGS <= allowed]
        names = {r.name for r in chosen}
        return [r for r in chosen if not (r.composes and set(r.composes) <= names)]
    chosen = []
    for r in rules:
        if isinstance(r, str):
            r = get_rule(r)
        if not isinstance(r, Rule):
            raise TypeError(f"rules must be Rule objects or rule names, got {r!r}")
        chosen.append(r)
    return chosen


BITS_TOLERANCE = 0.125
"""Forms whose bits of error differ by less than this are equally accurate: the sample cannot tell them
apart, so the smaller is listed first (`reciprocal(reciprocal(e))` is not preferred to `e` for a rounding)."""


def _simplest_among_equals(ranked: list[tuple[float, int, int, Any]]) -> list[tuple[float, int, int, Any]]:
    """(bits, size, form key, tree) rows in order: repeatedly, the smallest (the input, size -1, first) of
    those within `BITS_TOLERANCE` of the most accurate left."""
    left = sorted(ranked, key=lambda r: r[:3])
    ordered = []
    while left:
        near = [r for r in left if r[0] <= left[0][0] + BITS_TOLERANCE]
        pick = min(near, key=lambda r: (r[1], r[0], r[2]))
        ordered.append(pick)
        left.remove(pick)
    return ordered


class Exploration:
    """An e-graph holding `exprs`, grown by `rules` run in `direction` within `limits`.

    `run()` grows it; `forms(index, cost)` lists the distinct forms of one
    of the expressions, `best(index, cost)` gives the cheapest; `explain(a, b)`
    says why two term nodes are equal.  Everything it does is under one
    `deadline` (by default `limits.seconds` from construction): see the
    module docstring.
    """

    def __init__(
        self,
        exprs: Sequence[Variable],
        rules: Iterable[Rule | str] | None = None,
        *,
        direction: str = "both",
        limits: Limits | None = None,
        include: Iterable[str] = (),
        unsafe: bool = True,
        progress: Callable[[Report], None] | None = None,
        deadline: Deadline | None = None,
    ):
        checked_direction(direction)
        for expr in exprs:
            if not isinstance(expr, Variable):
                raise TypeError(f"expected a graph Variable, got {expr!r}")
        self.exprs = list(exprs)
        self.rules = select_rules(rules, include, unsafe)
        self.egraph = EGraph()
        self.roots = [self.egraph.intern(e) for e in self.exprs]
        self.runner = Runner(self.egraph, self.rules, direction, limits, progress=progress)
        self.deadline = deadline or Deadline(self.runner.limits.seconds)
        self.explainer = Explainer(self.egraph)
        self.report: Report | None = None
        self.measured: dict[int, tuple[Trees, list[int]]] = {}
        """Per expression, the trees the last search by accuracy measured (`_accurate_forms`)."""
        self.approximations: dict[int, list[Approximation]] = {}
        """Per expression, its series approximations (`approximate`), for `regime_form`."""

    def focus(self, accuracy: Accuracy, index: int = 0) -> None:
        """Have the search apply matches where expression `index` loses the most bits first (its local
        errors under `accuracy`, `accurate.focus`), within the deadline (past it, no focus)."""
        try:
            with self.deadline.interrupting("cost"):
                self.runner.focus = focus(self.egraph, accuracy, self.exprs[index])
        except TimeLimitReached:
            pass

    def approximate(self, accuracy: Accuracy, index: int = 0) -> list[Approximation]:
        """The series approximations of expression `index` (`series.approximations`) where `accuracy`
        samples it, kept for `regime_form`: within `SERIES_SHARE` of the time left (those found when it
        passes), or `SERIES_STEPS` calls without a time limit."""
        expr, found = self.exprs[index], []
        self.approximations[index] = found
        points = {v.name: p for v, p in zip(accuracy.inputs, accuracy.points) if v.name and v.type.ndim == 0}
        if math.isinf(self.deadline.seconds):
            limit = {"max_steps": SERIES_STEPS, "max_seconds": None}
            whole = relation_budget("series", **limit, error=TimeLimitReached)
            everywhere = True

            def bounded(pending: int) -> AbstractContextManager:
                return relation_budget("a series term", max_steps=SERIES_STEPS // 4, max_seconds=None)

        else:
            part, everywhere = self.deadline.part(SERIES_SHARE), False
            whole = part.interrupting("series")

            def bounded(pending: int) -> AbstractContextManager:
                left = part.left() / pending + 1e-3
                return relation_budget("a series term", max_steps=None, max_seconds=left)

        try:
            with whole, charging_calls(everywhere):
                for approximation in approximations(expr, points, bounded=bounded):
                    found.append(approximation)
        except TimeLimitReached:
            self.deadline.stops.setdefault(
                "series", StopReason.WORK_LIMIT if everywhere else StopReason.TIME_LIMIT
            )
        return found

    def run(self, goal: Callable[[], bool] | None = None, share: float = SEARCH_SHARE) -> Report:
        """Grow the e-graph until saturation, a limit, `goal()` (see `Runner.run`), or `share` of the
        time left (the rest is for extracting, explaining and checking forms)."""
        self.report = self.runner.run(self.roots, goal, self.deadline.until(share))
        self.report.phases = self.deadline.stops
        return self.report

    def resolve_cost(
        self, cost: Cost, index: int = 0, ranges: Domain | None = None
    ) -> CostFunction | Callable[[Variable], float] | None:
        """`resolve_cost` for expression `index`; the accuracy reference (long to compute for a large
        expression) within the deadline: None when it passed first."""
        if not (isinstance(cost, str) and cost == "accuracy"):
            return resolve_cost(cost, self.exprs[index], ranges)
        try:
            with self.deadline.interrupting("cost"):
                return resolve_cost(cost, self.exprs[index], ranges)
        except TimeLimitReached:
            return None

    def explain(self, a: int, b: int) -> Explanation:
        return self.explainer.explain(a, b)

    def forms(
        self,
        index: int = 0,
        cost: Cost = "nodes",
        check: bool = True,
        check_examples: int = CHECK_EXAMPLES,
        ranges: Domain | None = None,
        most: int = MOST_FORMS,
    ) -> Iterator[Form]:
        """Up to `most` distinct forms of expression `index`, cheapest first under `cost`, each checked.

        The forms end early when the deadline passes (`Report.phases` says where).
        """
        scored = self.resolve_cost(cost, index, ranges)
        if scored is None:
            return
        found = self._ranked_forms(index, scored, check, check_examples, most)
        listed_input, listed, cut = False, 0, False
        while True:
            try:
                form = next(found)
            except StopIteration:
                break
            except TimeLimitReached:
                cut = True
                break
            listed_input = listed_input or not form.steps
            listed += 1
            yield form
        if not listed_input and (cut or not listed):
            # cut short, or every form passed over: the input, which needs no check, is always at hand
            yield self._input_form(index, scored)

    def _ranked_forms(
        self,
        index: int,
        scored: CostFunction | Callable[[Variable], float],
        check: bool,
        examples: int,
        most: int,
    ) -> Iterator[Form]:
        """`forms`, raising TimeLimitReached where the deadline stops them."""
        root, deadline = self.roots[index], self.deadline
        if isinstance(scored, Accuracy):
            yield from self._accurate_forms(index, scored, check, examples, most)
            return
        if isinstance(scored, CostFunction):
            trees = Trees(scored)
            found = ranked_trees(self.egraph, root, trees, most=most, deadline=deadline)
            ranked: Iterable[tuple[int, float]] = ((t, trees.dag_cost(t)) for t in found)
        else:
            trees = Trees(NodeCount())
            pool = list(enumerate_trees(self.egraph, root, trees, CANDIDATES, CANDIDATES, deadline))
            scores = self._scores(scored, trees, pool)
            order = sorted(range(len(scores)), key=lambda k: (scores[k], trees.cost[pool[k]]))
            ranked = [(pool[k], scores[k]) for k in order[:most]]
        for t, value in ranked:
            try:
                yield self._form(index, trees, t, value, check, examples)
            except UncheckedFormError:
                continue

    def _accurate_forms(
        self, index: int, accuracy: Accuracy, check: bool, examples: int, most: int
    ) -> Iterator[Form]:
        """`_ranked_forms` by accuracy: the trees `accurate_pool` finds and the input itself, measured by
        `accuracy` (as many as the deadline allows), most accurate first, each naming its worst subterm."""
        trees, pool, scores = self.measure(index, accuracy)
        ranked: list[tuple[float, int, int, int | None]] = [
            (b, trees.size[t], trees.form[t], t) for b, t in zip(scores, pool)
        ]
        expr = self.exprs[index]
        (bits,) = self._scores(accuracy, None, [expr]) or (None,)
        if bits is not None:  # the input as written, in place of its tree (flattened: it may round apart)
            own = trees.form[
                term_trees(self.egraph, trees, self.roots[index])[self.egraph.find(self.roots[index])]
            ]
            ranked = [r for r in ranked if r[2] != own]
            ranked.append((bits, -1, -1, None))
        for bits, _, _, t in _simplest_among_equals(ranked)[:most]:
            try:
                form = Form(expr, bits) if t is None else self._form(index, trees, t, bits, check, examples)
            except UncheckedFormError:
                continue
            yield self._with_worst_subterm(form, accuracy)

    def measure(self, index: int, accuracy: Accuracy) -> tuple[Trees, list[int], list[float]]:
        """The trees of expression `index` worth measuring (`accurate_pool`), kept in `measured` for
        `regime_form`, and their bits of error under `accuracy` (as many as the deadline allows)."""
        trees = Trees(NodeCount())
        pool = self.accurate_pool(index, accuracy, trees)
        self.measured[index] = (trees, pool)
        return trees, pool, self._scores(accuracy, trees, pool)

    def accurate_pool(
        self, index: int, accuracy: Accuracy, trees: Trees, candidates: int = CANDIDATES
    ) -> list[int]:
        """Trees of expression `index` worth measuring by `accuracy`: the most accurate the beam search
        over every e-node finds (`accurate.AccurateExtractor`), then the `candidates` smallest by
        `trees`' cost, each form once; what `EXTRACTION_SHARE` of the time left allows (cut, the
        deadline's `stops` say "extraction")."""
        root, egraph = self.roots[index], self.egraph
        part = self.deadline.part(EXTRACTION_SHARE)
        pool = AccurateExtractor(egraph, accuracy, trees, part).best(root, term_trees(egraph, trees, root))
        forms = {trees.form[t] for t in pool}
        try:
            for t in enumerate_trees(egraph, root, trees, candidates, candidates, part):
                if trees.form[t] not in forms:
                    forms.add(trees.form[t])
                    pool.append(t)
        except TimeLimitReached:
            pass
        return pool

    def _with_worst_subterm(self, form: Form, accuracy: Accuracy) -> Form:
        """`form` naming the subterm that loses the most bits, when measured within the deadline."""
        try:
            with self.deadline.interrupting("cost"):
                errors = accuracy.local_errors(form.expr)
        except (TimeLimitReached, AccuracyError):
            return form
        worst = max(errors, key=lambda e: e[1], default=None)
        if worst is None or worst[1] <= 0:
            return form
        return dataclasses.replace(form, worst_subterm=worst)

    def _input_form(self, index: int, scored: CostFunction | Callable[[Variable], float]) -> Form:
        """Expression `index` itself as a form: priced bottom-up by a CostFunction (linear in its size;
        as a DAG, each node once, when the cost is additive), NaN under a whole-form cost (measuring it
        may take longer than the deadline leaves)."""
        expr = self.exprs[index]
        if not isinstance(scored, CostFunction):
            return Form(expr, math.nan)
        costs: dict[Variable, float] = {}
        shared = 0.0

        def cost_of(v: Variable) -> float:
            return costs[v] if v in costs else scored.leaf(v)

        for node in io_toposort([], [expr]):
            operands = [cost_of(i) for i in node.inputs]
            types = [i.type for i in node.inputs]
            for out in node.outputs:
                costs[out] = scored.node(node.op, out.type, types, operands)
            if scored.additive:
                shared += scored.node(node.op, node.outputs[0].type, types, [0.0] * len(types))
        if not scored.additive:
            return Form(expr, float(cost_of(expr)))
        leaves = {v for v in graph_inputs([expr])}
        return Form(expr, shared + sum(scored.leaf(v) for v in leaves))

    def best(
        self,
        index: int = 0,
        cost: Cost = "nodes",
        check: bool = True,
        check_examples: int = CHECK_EXAMPLES,
        ranges: Domain | None = None,
    ) -> Form:
        """The cheapest form of expression `index` under `cost` (checked as `forms` checks); the input
        itself (`_input_form`) when the deadline passed before a form was extracted, explained and
        checked."""
        scored = self.resolve_cost(cost, index, ranges)
        if scored is None:
            return Form(self.exprs[index], math.nan)
        if not isinstance(scored, CostFunction):
            return next(
                self.forms(index, scored, check, check_examples, ranges), Form(self.exprs[index], math.nan)
            )
        trees = Trees(scored)
        try:
            t = best_dag_tree(self.egraph, self.roots[index], trees, CANDIDATES, self.deadline)
            return self._form(index, trees, t, trees.dag_cost(t), check, check_examples)
        except (TimeLimitReached, UncheckedFormError):
            return self._input_form(index, scored)

    def proof(self, a: int = 0, b: int = 1, check: bool = True, check_examples: int = CHECK_EXAMPLES):
        """Run until expressions `a` and `b` are equal (or a limit): why they are, or None.

        A proof that uses rules is re-checked numerically (`UnsoundFormError`
        naming the failing step).  None too when the deadline passed before
        the proof was explained and checked (`Report.phases` says so), or
        when no input could be drawn to check it at (`UncheckedFormError`).
        """
        egraph, ra, rb = self.egraph, self.roots[a], self.roots[b]
        self.run(goal=lambda: egraph.find(ra) == egraph.find(rb), share=PROOF_SHARE)
        if egraph.find(ra) != egraph.find(rb):
            return None
        try:
            with self.deadline.interrupting("explanation"):
                explanation = self.explain(ra, rb)
            if check and explanation.steps:
                tags = frozenset(t for r in self.rules if r.name in explanation.rules for t in r.tags)
                form = Form(
                    self.exprs[b], 0.0, explanation.steps, explanation.assumptions, explanation.unsafe
                )
                with self.deadline.interrupting("checking"):
                    check_form(self.exprs[a], form, tags, check_examples)
        except (TimeLimitReached, UncheckedFormError):
            return None
        return explanation

    def _scores(
        self, scored: Callable[[Variable], float], trees: Trees | None, pool: Sequence[int | Variable]
    ) -> list[float]:
        """`scored` of the pool's trees (graphs, without `trees`) in order, as many as the deadline
        allows."""
        scores: list[float] = []
        try:
            with self.deadline.interrupting("cost"):
                for t in pool:
                    scores.append(float(scored(t if trees is None else trees.graph(t))))
        except TimeLimitReached:
            pass
        return scores

    def _form(self, index: int, trees: Trees, tree: int, cost: float, check: bool, examples: int) -> Form:
        """The form of `tree`, explained and (with `check`) checked; TimeLimitReached past the deadline."""
        graph = trees.graph(tree)
        node = self.egraph.intern(graph, flatten=False)
        with self.deadline.interrupting("explanation"):
            explanation = self.explainer.explain(self.roots[index], node)
        form = Form(graph, cost, explanation.steps, explanation.assumptions, explanation.unsafe)
        if check:
            with self.deadline.interrupting("checking"):
                check_form(self.exprs[index], form, self.tags(form), examples)
        return form

    def tags(self, form: Form) -> frozenset[str]:
        """The tags of the rules a form's derivation uses (what its numerical check must allow for)."""
        names = {s.rule for s in form.steps}
        return frozenset(t for r in self.rules if r.name in names for t in r.tags)


def explore(
    expr: Variable,
    cost: Cost = "nodes",
    *,
    rules: Iterable[Rule | str] | None = None,
    direction: str = "both",
    limits: Limits | None = None,
    include: Iterable[str] = (),
    unsafe: bool = True,
    check: bool = True,
    check_examples: int = CHECK_EXAMPLES,
    ranges: Domain | None = None,
    most: int = MOST_FORMS,
    progress: Callable[[Report], None] | None = None,
) -> Iterator[Form]:
    """Distinct forms of `expr` (distinct up to associativity and commutativity), cheapest first.

    `expr` may be a PyTensor variable (`foreign.in_relwrite`): it is explored
    as its relwrite conversion, and each form also comes back as PyTensor
    (`Form.foreign`).

    The rules (default: the identities over the reals, `select_rules`;
    `unsafe=False` leaves out those valid only where values are finite and
    assumptions hold, `include` adds opt-in tags) run forward,
    backward or both at every class of an e-graph until saturation or
    `limits`; then forms come out lazily under `cost`: "nodes", "flops",
    "depth", "accuracy" (bits of error, Herbie's measure, over `ranges`: a
    range per input, or a precondition such as "0 < x < y"), a
    `CostFunction`, or a callable scoring a form's graph.
    Each form is re-checked numerically against `expr` on `check_examples`
    generated inputs (`UnsoundFormError` on a mismatch).  At most `most`
    forms are listed.  A cost that cannot measure `expr` (accuracy of an
    integer expression, say) raises before anything is explored.
    """
    expr, back = in_relwrite(expr)
    exploration = Exploration(
        [expr], rules, direction=direction, limits=limits, include=include, unsafe=unsafe, progress=progress
    )
    scored = exploration.resolve_cost(cost, 0, ranges)
    if isinstance(scored, Accuracy):
        exploration.focus(scored)
    exploration.run(share=ACCURACY_SEARCH_SHARE if isinstance(scored, Accuracy) else SEARCH_SHARE)
    if scored is not None:
        for form in exploration.forms(0, scored, check, check_examples, ranges, most):
            yield in_language(form, back)


def best_form(
    expr: Variable,
    cost: Cost = "nodes",
    *,
    rules: Iterable[Rule | str] | None = None,
    direction: str = "both",
    limits: Limits | None = None,
    include: Iterable[str] = (),
    unsafe: bool = True,
    check: bool = True,
    check_examples: int = CHECK_EXAMPLES,
    ranges: Domain | None = None,
    regimes: bool | None = None,
    series: bool | None = None,
) -> Form:
    """The cheapest form of `expr` under `cost` found within `limits` (see `explore`); the input itself,
    cost NaN, when no form was measured, explained and checked within the time limit.  A PyTensor `expr`
    is converted on the way in and the form back on the way out (`Form.foreign`), as in `explore`.

    Under the accuracy cost, where no single form is accurate over the whole sample, the result may be
    piecewise (`regime_form`: forms joined by `switch` on ranges of one scalar input, `Form.regimes`
    saying where each applies).  `regimes` None (the default) infers regimes under the accuracy cost
    when the expression has a scalar input, True insists (a ValueError if the cost is not accuracy or no
    input is a scalar), False never does.  `series` likewise offers truncated series of `expr` in its
    scalar inputs (`relwrite.engine.explore.series`) as candidates: a form using one is
    `Form.approximate` (not equal to `expr`, but more accurate than every form found, on the sample and
    on a fresh one).
    """
    expr, back = in_relwrite(expr)
    wanted = _accuracy_option("regimes", regimes, cost, expr)
    approximate = _accuracy_option("series", series, cost, expr)
    if cost == "accuracy":
        include = _with_accuracy_rules(include)
    exploration = Exploration(
        [expr], rules, direction=direction, limits=limits, include=include, unsafe=unsafe
    )
    scored = exploration.resolve_cost(cost, 0, ranges)
    if scored is None:
        return in_language(Form(expr, math.nan), back)
    if isinstance(scored, Accuracy):
        exploration.focus(scored)
    exploration.run(share=ACCURACY_SEARCH_SHARE if isinstance(scored, Accuracy) else SEARCH_SHARE)
    if not ((wanted or approximate) and isinstance(scored, Accuracy)):
        form = exploration.best(0, scored, check=check, check_examples=check_examples, ranges=ranges)
    else:
        form = regime_form(
            exploration, 0, scored, None, check, check_examples, split=wanted, series=approximate
        )
    return in_language(form, back)


def in_language(form: Form, back: Back | None) -> Form:
    """`form` with `Form.foreign` set by `back` (the way back to the input's language), when there is one."""
    return form if back is None else dataclasses.replace(form, foreign=back(form.expr))


def _accuracy_option(name: str, value: bool | None, cost: Cost, expr: Variable) -> bool:
    """Whether `best_form` uses regimes or series (`name`; see its docstring); ValueError where `value`
    True cannot be honoured."""
    accuracy = isinstance(cost, Accuracy) or (isinstance(cost, str) and cost == "accuracy")
    scalar = any(v.type.ndim == 0 for v in graph_inputs([expr]) if not isinstance(v, Constant))
    if value is None:
        return accuracy and scalar
    what = {
        "regimes": "regimes join the forms most accurate on ranges of an input",
        "series": "series approximations are chosen for accuracy",
    }[name]
    if value and not accuracy:
        raise ValueError(f"{name}=True needs cost='accuracy' ({what}), got cost={cost!r}")
    if value and not scalar:
        raise ValueError(
            f"{name}=True works on a scalar input, and {expression_text(expr)} has none"
            " (element by element is out of scope)"
        )
    return bool(value)


def regime_form(
    exploration: Exploration,
    index: int,
    accuracy: Accuracy,
    best: Form | None = None,
    check: bool = True,
    check_examples: int = CHECK_EXAMPLES,
    split: bool = True,
    series: bool = True,
) -> Form:
    """The most accurate form of expression `index` over `accuracy`'s sample: one form, piecewise (with
    `split`), or using one of its series approximations (with `series`).

    The candidates are `best` (a form already extracted, if given), the
    input, the forms the search by accuracy measured (`Exploration.measure`:
    the beam over every e-node and the smallest forms; measured here when
    they are not yet) and, where every exact candidate loses more than
    `APPROXIMATE_ABOVE` bits, the input's series approximations
    (`Exploration.approximate`, `relwrite.engine.explore.series`).  With
    `split`, regimes join the most accurate on ranges of one scalar input
    (`relwrite.engine.explore.regimes`), chosen on `REGIME_SAMPLES` fresh
    points; else, or where no split pays, the single most accurate is taken
    (the smallest among equally accurate ones).  Only the form chosen is
    explained and checked (once, whole, when exact): its steps are its
    branches' derivations, then one `regimes` step joining them.  One using
    an approximation must also be more accurate than the baseline on a
    fresh sample, else the choice is made again among exact forms only.
    Where the deadline passes while the measured forms chosen are explained
    or checked, the choice among the baseline, the input and the
    approximations alone (which need neither) is taken, if it beats the
    baseline.  The baseline (`best`, else the input) when nothing beats it,
    when no input is a scalar, or when the deadline passes first.
    """
    expr = exploration.exprs[index]
    fallback = baseline = best or Form(expr, math.nan)
    try:
        if best is None:
            with exploration.deadline.interrupting("cost"):
                fallback = baseline = Form(expr, float(accuracy(expr)))
        elif not any(v.type.ndim == 0 for v in accuracy.inputs):
            return best
        if index not in exploration.measured:
            exploration.measure(index, accuracy)
        with exploration.deadline.interrupting("regimes"):
            to_beat = float(accuracy(baseline.expr)) if math.isnan(baseline.cost) else baseline.cost
            sources: list[Form | int] = [baseline]  # a form, or a tree to explain
            graphs = [baseline.expr]
            if baseline.expr is not expr:
                sources.append(Form(expr, math.nan))
                graphs.append(expr)
            seen = {expression_text(g) for g in graphs}
            trees, pool = exploration.measured.get(index, (None, []))
            for t in pool:
                graph = trees.graph(t)
                text = expression_text(graph)
                if text not in seen:
                    seen.add(text)
                    sources.append(t)
                    graphs.append(graph)
            least = min(float(accuracy(g)) for g in graphs)
        if series and least > APPROXIMATE_ABOVE and index not in exploration.approximations:
            exploration.approximate(accuracy, index)
        with exploration.deadline.interrupting("regimes"):
            for approximation in exploration.approximations.get(index, ()):
                step = Step("series", "forward", expr, approximation.expr, approximation.expr)
                sources.append(Form(approximation.expr, math.nan, (step,), approximation=approximation))
                graphs.append(approximation.expr)
            wide = _widened(accuracy, WIDE_SHARE * exploration.deadline.left())
            scalar = any(v.type.ndim == 0 for v in accuracy.inputs)
            choice = _chosen(wide, accuracy, graphs, sources, split and scalar, baseline.expr)
            if choice is None:
                return baseline
            if any(isinstance(sources[c], int) for c in choice[2]):  # what is left if explaining runs out
                formed = [k for k, source in enumerate(sources) if isinstance(source, Form)]
                within = _chosen(wide, accuracy, graphs, sources, split and scalar, baseline.expr, formed)
                if within is not None:  # its branches are checked forms, the input, or approximations
                    fallback = (
                        _piecewise(
                            exploration,
                            index,
                            accuracy,
                            to_beat,
                            within,
                            sources,
                            graphs,
                            trees,
                            False,
                            check_examples,
                        )
                        or baseline
                    )
        form = _piecewise(
            exploration, index, accuracy, to_beat, choice, sources, graphs, trees, check, check_examples
        )
        return baseline if form is None else form
    except (TimeLimitReached, UncheckedFormError):
        return fallback


def _chosen(
    wide: Accuracy,
    accuracy: Accuracy,
    graphs: Sequence[Variable],
    sources: Sequence[Form | int],
    split: bool,
    best: Variable,
    among: Sequence[int] | None = None,
) -> _Choice | None:
    """Regimes of `graphs` (those at indices `among`, else all; or the single most accurate) chosen on
    `wide`, more accurate there than `best`; a choice using an approximation only when `_confirmed` on a
    fresh sample, else the choice among the others.  None when nothing beats `best` (index 0)."""
    among = list(range(len(graphs))) if among is None else list(among)
    choice = _choose_among(wide, graphs, among, split)
    approximate = [isinstance(s, Form) and s.approximate for s in sources]
    if any(approximate[c] for c in choice[2]) and not _confirmed(accuracy, choice, graphs, best):
        choice = _choose_among(wide, graphs, [k for k in among if not approximate[k]], split)
    if choice[2] == (0,) or not choice[3] < float(wide(best)):
        return None
    return choice


def _choose_among(wide: Accuracy, graphs: Sequence[Variable], among: list[int], split: bool) -> _Choice:
    """`_choose` over the graphs at indices `among`, its choices given as indices into `graphs`."""
    choice = _choose(wide, [graphs[k] for k in among], split)
    return choice[0], choice[1], tuple(among[c] for c in choice[2]), choice[3]


def _piecewise(
    exploration: Exploration,
    index: int,
    accuracy: Accuracy,
    to_beat: float,
    choice: _Choice,
    sources: Sequence[Form | int],
    graphs: Sequence[Variable],
    trees: Trees | None,
    check: bool,
    check_examples: int,
) -> Form | None:
    """The form `choice` makes (its measured trees explained; checked whole, with `check`, when exact),
    or None when it is no more accurate than `to_beat` over `accuracy`'s sample."""
    variable, splits, choices, _ = choice
    bits = float(accuracy(_joined(choice, graphs)))
    if not bits < to_beat:
        return None
    expr = exploration.exprs[index]
    branches = []
    for c in choices:
        source, branch_bits = sources[c], float(accuracy(graphs[c]))
        if isinstance(source, Form):
            branches.append(dataclasses.replace(source, cost=branch_bits))
        else:
            assert trees is not None
            branches.append(exploration._form(index, trees, source, branch_bits, False, check_examples))
    if len(branches) == 1:
        form = exploration._with_worst_subterm(dataclasses.replace(branches[0], cost=bits), accuracy)
    else:
        joined = switch_graph(variable, splits, [b.expr for b in branches])
        steps = (*(s for b in branches for s in b.steps), Step("regimes", "forward", expr, joined, joined))
        form = Form(
            joined,
            bits,
            steps,
            frozenset().union(*(b.assumptions for b in branches)),
            any(b.unsafe for b in branches),
            Regimes(variable.name or str(variable), splits, tuple(branches)),
        )
    if check and not form.approximate and form.steps:
        with exploration.deadline.interrupting("checking"):
            check_form(expr, form, exploration.tags(form), check_examples)
    return form


_Choice = tuple[Variable | None, tuple[float, ...], tuple[int, ...], float]
"""What `_choose` picks: the input split on (None: no split), the split points, the candidates chosen (one
per range) and the mean bits of error of the whole."""


def _choose(accuracy: Accuracy, graphs: Sequence[Variable], split: bool) -> _Choice:
    """Regimes of `graphs` over `accuracy`'s sample (with `split`), or the single most accurate."""
    found = infer_regimes(accuracy, graphs) if split and len(graphs) > 1 else None
    if found is not None:
        return found.variable, found.splits, found.choices, found.bits
    bits = [float(accuracy(g)) for g in graphs]
    k = min(range(len(graphs)), key=lambda j: (math.isnan(bits[j]), bits[j], _size(graphs[j])))
    return None, (), (k,), bits[k]


def _size(graph: Variable) -> int:
    """Applications in `graph` (of equally accurate forms, the smallest is taken)."""
    return sum(1 for _ in io_toposort(graph_inputs([graph]), [graph]))


def _widened(accuracy: Accuracy, seconds: float) -> Accuracy:
    """The measure over `REGIME_SAMPLES` fresh points, or as many as its exact reference computes in
    `seconds` (at its last cost per point); `accuracy` itself where that is no more than it has, or where
    they cannot be drawn."""
    samples = REGIME_SAMPLES
    if accuracy.point_seconds > 0 and math.isfinite(seconds):
        samples = min(samples, int(seconds / accuracy.point_seconds))
    if samples <= len(accuracy.reference):
        return accuracy
    try:
        return accuracy.resampled(samples, seed=2 + accuracy.seed)
    except AccuracyError:
        return accuracy


def _joined(choice: _Choice, graphs: Sequence[Variable]) -> Variable:
    """The one graph `choice` makes of `graphs`: a candidate, or candidates joined by `switch`."""
    variable, splits, choices, _ = choice
    if variable is None:
        return graphs[choices[0]]
    return switch_graph(variable, splits, [graphs[c] for c in choices])


def _confirmed(accuracy: Accuracy, choice: _Choice, graphs: Sequence[Variable], best: Variable) -> bool:
    """Whether the form `choice` makes is more accurate than `best` on `FRESH_SAMPLES` points the search
    did not see (an approximation chosen on one sample is no better elsewhere, else)."""
    form = _joined(choice, graphs)
    try:
        fresh = accuracy.resampled(FRESH_SAMPLES, seed=1 + accuracy.seed)
    except AccuracyError:
        return False
    return bool(float(fresh(form)) < float(fresh(best)))


def prove(
    a: Variable | float,
    b: Variable | float,
    *,
    rules: Iterable[Rule | str] | None = None,
    direction: str = "both",
    limits: Limits | None = None,
    include: Iterable[str] = (),
    unsafe: bool = True,
    check: bool = True,
    check_examples: int = CHECK_EXAMPLES,
) -> Explanation | None:
    """Why `a` equals `b`: the steps from one to the other and their assumptions, or None.

    None means the two were not shown equal within `limits`, never that
    they differ.  Inputs of `b` named like inputs of `a` (and of the same
    type) are taken to be those inputs.  Either may be a PyTensor variable
    (`foreign.in_relwrite`), or one of them a number, a constant of the
    other's dtype: ``prove(x - x, 0)``.  A proof that uses rules is
    re-checked numerically (`UnsoundFormError` naming the failing step).
    """
    a, b = _comparable(a, b)
    exploration = Exploration(
        [a, share_inputs(a, b)], rules, direction=direction, limits=limits, include=include, unsafe=unsafe
    )
    return exploration.proof(check=check, check_examples=check_examples)


def pareto(
    expr: Variable,
    *,
    rules: Iterable[Rule | str] | None = None,
    direction: str = "both",
    limits: Limits | None = None,
    include: Iterable[str] = (),
    unsafe: bool = True,
    candidates: int = CANDIDATES,
    ranges: Domain | None = None,
    check: bool = True,
) -> list[ParetoPoint]:
    """The forms of `expr` no other beats in both accuracy (bits of error) and flops, by increasing flops.

    The forms weighed are the most accurate of the whole e-graph and the `candidates` cheapest by flops
    (`Exploration.accurate_pool`).  Within the time limit: the front of the forms measured, explained
    and checked by then.
    """
    exploration = Exploration(
        [expr],
        rules,
        direction=direction,
        limits=limits,
        include=_with_accuracy_rules(include),
        unsafe=unsafe,
    )
    accuracy = exploration.resolve_cost("accuracy", 0, ranges)
    if accuracy is None:
        return []
    exploration.focus(accuracy)
    exploration.run(share=ACCURACY_SEARCH_SHARE)
    trees = Trees(Flops())
    front: list[ParetoPoint] = []
    try:
        pool = exploration.accurate_pool(0, accuracy, trees, candidates)
        bits = exploration._scores(accuracy, trees, pool)
        points = [(b, trees.dag_cost(t)) for b, t in zip(bits, pool)]
        for k in pareto_front(points):
            try:
                form = exploration._form(0, trees, pool[k], points[k][0], check, CHECK_EXAMPLES)
            except UncheckedFormError:
                continue
            front.append(ParetoPoint(form, points[k][0], points[k][1]))
    except TimeLimitReached:
        pass
    return front


def resolve_cost(
    cost: Cost, expr: Variable, ranges: Domain | None = None
) -> CostFunction | Callable[[Variable], float]:
    """The cost `cost` names for forms of `expr`: a `CostFunction`, or a callable scoring whole forms.

    Raises ValueError for an unknown name and `AccuracyError` when accuracy cannot measure `expr`.
    """
    if isinstance(cost, str):
        if cost == "accuracy":
            return Accuracy(expr, ranges=ranges)
        if cost not in COSTS:
            raise ValueError(
                f"cost must be one of {', '.join([*COSTS, 'accuracy'])}, a CostFunction or a callable,"
                f" got {cost!r}"
            )
        return COSTS[cost]()
    if isinstance(cost, CostFunction) or callable(cost):
        return cost
    raise TypeError(f"cost must be a name, a CostFunction or a callable, got {cost!r}")


def _comparable(a: Any, b: Any) -> tuple[Variable, Variable]:
    """`prove`'s two sides as relwrite graphs: variables as `in_relwrite` takes them, a number as a
    constant of the other side's dtype (TypeError for anything else, or two numbers)."""
    if _is_number(a) and _is_number(b):
        raise TypeError(f"prove needs a graph on one side at least, got two numbers: {a!r} and {b!r}")
    if _is_number(a):
        other = in_relwrite(b)[0]
        return constant(a, dtype=other.dtype), other
    first = in_relwrite(a)[0]
    return first, constant(b, dtype=first.dtype) if _is_number(b) else in_relwrite(b)[0]


def _is_number(value: Any) -> bool:
    return isinstance(value, (numbers.Number, np.number, np.bool_)) and not isinstance(value, Variable)


def share_inputs(a: Variable, b: Variable) -> Variable:
    """`b` with its inputs replaced by the inputs of `a` of the same name (ValueError if types differ)."""
    mine = {v.name: v for v in graph_inputs([a]) if not isinstance(v, Constant) and v.name}
    memo: dict[Any, Any] = {}
    for v in graph_inputs([b]):
        if isinstance(v, Constant) or v.name not in mine or mine[v.name] is v:
            continue
        if mine[v.name].type != v.type:
            raise ValueError(
                f"input {v.name} is {mine[v.name].type} in the first expression, {v.type} in the second"
            )
        memo[v] = mine[v.name]
    if not memo:
        return b
    return clone_get_equiv([], [b], memo=memo)[b]


# -- numerical re-check ----------------------------------------------------------------------------


def check_form(expr: Variable, form: Form, tags: frozenset[str], examples: int = CHECK_EXAMPLES) -> None:
    """Check numerically that `form.expr` computes what `expr` does, within the form's assumptions.

    Compares the two on inputs drawn from a fixed seed (`checking.check_equal`).
    Where an assumption does not hold, or, for derivations through unsafe,
    stabilizing or explore rules (identities over the reals), where a value
    is not finite, the values are not compared.  Raises `UnsoundFormError` naming the first step that fails
    on its own, and `UncheckedFormError` when no input drawn could be compared.
    """
    if not form.steps:
        return
    try:
        _check_pair(expr, form.expr, form.steps, tags, examples, "form")
    except NoUsableExample as error:
        raise UncheckedFormError(
            f"the form {expression_text(form.expr)} of {expression_text(expr)} could not be checked: {error}"
        ) from None
    except SoundnessError as error:
        previous, culprit = expr, None
        for k, step in enumerate(form.steps, 1):
            try:
                _check_pair(previous, step.expression, (step,), tags, examples, f"step_{k}")
            except SoundnessError:
                culprit = k
                break
            except NoUsableExample:
                pass  # this step alone is compared nowhere: not the one that fails
            previous = step.expression
        where = (
            f"step {culprit}: {form.steps[culprit - 1]}"
            if culprit is not None
            else "no single step fails alone; the derivation " + form.derivation
        )
        raise UnsoundFormError(
            f"the form {expression_text(form.expr)} of {expression_text(expr)} is not equal to it at "
            f"{where}\n{error}",
            form.expr,
            culprit,
            error,
        ) from None


def _check_pair(
    expr: Variable, other: Variable, steps: Sequence[Step], tags: frozenset[str], examples: int, name: str
) -> None:
    conditions = [c for s in steps for c in s.conditions]
    check_equal(expr, other, conditions, tags, examples, name)

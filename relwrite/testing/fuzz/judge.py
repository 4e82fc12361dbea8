"""Judging a graph: the reference outcome on each input set, each mode's function compiled and called, and
every difference classified: an improvement, declared by a rule, or a bug (`BUG_CATEGORIES`).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import relwrite as rw
from relwrite.backends import exact
from relwrite.backends.numpy.function import function_graph
from relwrite.compile.function import Mode
from relwrite.engine.db import optdb
from relwrite.engine.profile import EquilibriumProfile, SequenceProfile
from relwrite.graph.basic import Variable
from relwrite.relations import Rule, catalogue
from relwrite.relations.budget import BudgetExceeded, relation_budget
from relwrite.testing.fuzz.arbiter import MP_BITS
from relwrite.testing.fuzz.recipe import (
    Recipe,
    RecipeStep,
    _Env,
    _Error,
    _evaluate,
)
from relwrite.testing.fuzz.semantics import (
    SUMMATION_ORDERS,
    _errstate,
    _summing,
)
from relwrite.testing.fuzz.walks import (
    _constants_moved,
    _narrowed,
    _non_finite_marks,
    _type_problem,
    _walk,
    _walk_all,
    _wide_spread,
    _wide_walk,
)

BUG_CATEGORIES = ("wrong", "crashed", "invalid", "warned", "types")
"""Outcomes that are bugs: the fuzzer's test fails on any of them."""


DOT_STEPS = frozenset({"dot", "op@", ".dot", "dot22", "gemm", "gemv"})
"""Recipe steps whose value sums products in an order BLAS leaves open."""


# -- comparing -----------------------------------------------------------------------------------------

_RTOL = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-2, "longdouble": 1e-12}
_RTOL_EXTENDED = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2}


def _close(expected: np.ndarray, got: np.ndarray, slack: np.ndarray | float, rtol: float) -> np.ndarray:
    """Elementwise agreement: equal NaN/inf positions (and signs), finite values within tolerance."""
    if expected.dtype.kind != "f":
        return np.asarray(expected == got)
    with _errstate():
        e = expected.astype(np.longdouble)
        g = got.astype(np.longdouble)
        same = (e == g) | (np.isnan(e) & np.isnan(g))
        finite = np.isfinite(e) & np.isfinite(g)
        atol = float(np.finfo(expected.dtype).smallest_normal)
        near = np.abs(g - e) <= atol + rtol * np.abs(e) + slack
    return same | (finite & near)


@dataclass
class _Reference:
    """The expected outcome of one call: the outputs (or NumPy's error) and what counts as close."""

    outputs: list[np.ndarray] | _Error
    alternatives: list[list[np.ndarray]]
    slack: list[np.ndarray]
    undefined: list[np.ndarray | None]
    env: _Env


def _slack(expected: np.ndarray, alternatives: list[np.ndarray]) -> np.ndarray | float:
    """Eight times the largest finite move the rounding noise caused, per element."""
    if expected.dtype.kind != "f" or not alternatives:
        return 0.0
    with _errstate():
        e = expected.astype(np.longdouble)
        spread = np.zeros(expected.shape, dtype=np.longdouble)
        for alt in alternatives:
            move = np.abs(alt.astype(np.longdouble) - e)
            spread = np.maximum(spread, np.where(np.isfinite(move), move, 0))
        return 8 * spread  # a spread near the largest float is an infinite slack


def _all_steps(recipe: Recipe) -> Iterator[RecipeStep]:
    """The steps of `recipe` and of the recipes of its fused nodes."""
    pending = [recipe]
    while pending:
        current = pending.pop()
        for step in current.steps:
            yield step
            if step.op == "composite":
                pending.append(step.params["inner"])


def _reference(recipe: Recipe, values: dict[int, np.ndarray], seed: int) -> _Reference:
    env = _evaluate(recipe, values)
    outputs = [env.values[o] for o in recipe.outputs]
    failed = next((o for o in outputs if isinstance(o, _Error)), None)
    if failed is not None:
        return _Reference(failed, [], [], [], env)
    rng = np.random.default_rng(seed)
    alternatives = []
    for _ in range(3):
        noisy = [_evaluate(recipe, values, rng).values[o] for o in recipe.outputs]
        if not any(isinstance(v, _Error) for v in noisy):
            alternatives.append(noisy)
    slack = [_slack(out, [alt[k] for alt in alternatives]) for k, out in enumerate(outputs)]
    if any(step.op in DOT_STEPS for step in _all_steps(recipe)):
        for order in SUMMATION_ORDERS[1:]:
            with _summing(order):
                ordered = [_evaluate(recipe, values).values[o] for o in recipe.outputs]
            if not any(isinstance(v, _Error) for v in ordered):
                alternatives.append(ordered)
    undefined = [env.undefined.get(o) for o in recipe.outputs]
    return _Reference(outputs, alternatives, slack, undefined, env)


def _mismatch(reference: _Reference, k: int, got: Any) -> tuple[str, np.ndarray | None]:
    """Why output `k` is wrong ('' when right), and the mask of wrong elements when the values differ."""
    expected = reference.outputs[k]
    if type(got) is not np.ndarray:
        return f"output {k} is a {type(got).__name__}, not an ndarray", None
    if got.dtype != expected.dtype:
        return f"output {k} has dtype {got.dtype.name}, NumPy gives {expected.dtype.name}", None
    if got.shape != expected.shape:
        return f"output {k} has shape {got.shape}, NumPy gives {expected.shape}", None
    rtol = _RTOL.get(expected.dtype.name, 0.0)
    ok = _close(expected, got, reference.slack[k], rtol)
    for alt in reference.alternatives:
        ok = ok | _close(alt[k], got, reference.slack[k], rtol)
    if reference.undefined[k] is not None:
        ok = ok | reference.undefined[k]
    if ok.all():
        return "", None
    bad = ~ok
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"output {k} differs at {int(bad.sum())} of {bad.size} elements, first at {where}: "
        f"got {got[where]!r}, NumPy gives {expected[where]!r}",
        bad,
    )


def _agreeing(value: np.ndarray, wide: np.ndarray, slack: np.ndarray | float) -> np.ndarray:
    """Where `value` matches a wide value rounded to its dtype (looser than the reference check)."""
    rounded = _narrowed(wide, value.dtype)
    if value.dtype.kind != "f":
        return np.asarray(value == rounded)
    return _close(rounded, value, slack, _RTOL_EXTENDED.get(value.dtype.name, 1e-9))


_WIDE_PRECISIONS: tuple[str | int, ...] = ("long", *MP_BITS)
"""Long double, then mpmath (no overflow or underflow at all) at growing precision."""


def _spread_walk(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    arguments: Sequence[Any],
    precision: str | int,
    seed: int,
) -> tuple[list[Any], list[np.ndarray]]:
    """A graph's outputs in a wide precision (`_wide_walk`), and their slack: the spread of two more
    walks with rounding noise at each op's own dtype (a float16 intermediate makes a float64 output
    only as exact as float16 allows, and sin of 3.5e12 moves by a twentieth per ulp of its argument)."""
    walk = functools.partial(_wide_walk, inputs, outputs, arguments, precision)
    clean = walk()
    rng = np.random.default_rng(seed)
    noisy = [walk(noise=rng) for _ in range(2)]
    return clean, [_wide_spread(c, [n[j] for n in noisy]) for j, c in enumerate(clean)]


def _wide_close(a: np.ndarray, b: np.ndarray, mask: np.ndarray, spread: np.ndarray | float = 0.0) -> bool:
    """Whether two wide values (long double or mpmath) agree to 12 digits, or within `spread` (a float64
    array or number: how far rounding may move `b`), where `mask` is set."""
    if a.dtype != object and b.dtype != object:
        return bool(np.all(_close(a, b, spread, 1e-12)[mask]))
    mp = exact.context
    spreads = np.broadcast_to(np.asarray(spread, dtype=np.float64), np.shape(a))

    def close(x: Any, y: Any, allowed: float) -> bool:
        x, y = mp.mpf(x), mp.mpf(y)
        if mp.isnan(x) or mp.isnan(y):
            return bool(mp.isnan(x) and mp.isnan(y))
        return bool(x == y or abs(x - y) <= abs(x) * mp.mpf("1e-12") or abs(x - y) <= allowed)

    return bool(np.all(np.asarray(np.frompyfunc(close, 3, 1)(a, b, spreads), dtype=bool)[mask]))


# -- the rules that fired, and the time allowed -------------------------------------------------------

_RULES: dict[str, Rule] = {}


def _rule(name: str) -> Rule | None:
    if not _RULES:
        _RULES.update((r.name, r) for r in catalogue())
    return _RULES.get(name)


def _declared_precision(rule: Rule) -> str | None:
    """What the rule declares it preserves (``"reassociates"``: exact over the reals, not in floats).

    The catalogue calls it `Rule.semantics` (docs/rule-safety.md); `precision` is read when absent.
    """
    return getattr(rule, "semantics", None) or getattr(rule, "precision", None)


def _rules_applied(profile: Any) -> set[str]:
    """The names of the rewriters that applied somewhere in a (nested) rewrite profile."""
    names: set[str] = set()
    stack = [profile]
    while stack:
        p = stack.pop()
        if isinstance(p, SequenceProfile):
            stack.extend(step[4] for step in p.steps)
        elif isinstance(p, EquilibriumProfile):
            names.update(n for n, s in {**p.rules, **p.graph_rewriters}.items() if s.applied)
    return names


class FuzzTimeout(BudgetExceeded):
    """A compilation or a call took longer than the fuzzer allows (a hang)."""


def _deadline(seconds: float, what: str) -> contextlib.AbstractContextManager:
    """Stop the block with FuzzTimeout naming `what` after `seconds` (`relation_budget`, the one budget the
    rule runs inside are under too, so they nest: the block's deadline is not taken for a rule's)."""
    if seconds <= 0:
        return contextlib.nullcontext()
    return relation_budget(what, max_steps=None, max_seconds=seconds, error=FuzzTimeout)


# -- one graph, every mode ------------------------------------------------------------------------------


@dataclass
class Finding:
    """One difference between a mode and the reference, on one input set."""

    category: str
    detail: str
    input_set: int
    expected: str = ""
    got: str = ""
    hint: str = ""


def _describe_outputs(values: Any) -> str:
    if isinstance(values, _Error):
        return f"raises {values.describe()}"
    with np.printoptions(floatmode="unique", threshold=50):
        return repr(values)


_IGNORED_WARNINGS = (RuntimeWarning,)


class _Case:
    """A recipe built into a graph, with its input sets and the reference outcome on each."""

    def __init__(self, recipe: Recipe, input_sets: list[dict[int, np.ndarray]], seed: int, timeout: float):
        self.recipe = recipe
        self.input_sets = input_sets
        self.timeout = timeout
        self.variables = recipe.build()
        self.inputs = [self.variables[i] for i in recipe.inputs]
        self.outputs = [self.variables[o] for o in recipe.outputs]
        self.references = [_reference(recipe, values, seed + k) for k, values in enumerate(input_sets)]
        self._wide: dict[tuple[int, str | int], list[Any] | _Error] = {}

    def arguments(self, k: int) -> list[np.ndarray]:
        return [self.input_sets[k][i] for i in self.recipe.inputs]

    def type_findings(self) -> list[tuple[int, Finding]]:
        """The first step whose static type (as the constructors inferred it) is not what it computes."""
        for k, reference in enumerate(self.references):
            for i, value in reference.env.values.items():
                if isinstance(value, _Error) or self.recipe.steps[i].kind == "input":
                    continue
                problem = _type_problem(self.variables[i], value)
                if problem is not None:
                    name = self.recipe.names()[i]
                    return [(i, Finding("types", f"{name} = {self.variables[i]}: {problem}", k))]
        return []

    def wide(self, k: int, precision: str | int) -> tuple[list[Any], list[np.ndarray]] | _Error:
        """The original graph's outputs on input set `k` in a wide precision, and their slack
        (`_spread_walk`), even where the reference overflowed."""
        if (k, precision) not in self._wide:
            try:
                self._wide[k, precision] = _spread_walk(
                    self.inputs, self.outputs, self.arguments(k), precision, k
                )
            except Exception as exc:
                self._wide[k, precision] = _Error(exc)
        return self._wide[k, precision]

    def compile(self, mode: Mode) -> tuple[Any, list[str]]:
        """`function` under `mode`, and the messages of the warnings it gave."""
        outputs = self.outputs[0] if self.recipe.single else list(self.outputs)
        with warnings.catch_warnings(record=True) as caught, _deadline(self.timeout, f"compiling in {mode}"):
            warnings.simplefilter("always")
            f = rw.function(list(self.inputs), outputs, mode=mode)
        messages = [str(w.message) for w in caught if not issubclass(w.category, _IGNORED_WARNINGS)]
        return f, messages

    def rules_applied(self, mode: Mode) -> list[Rule]:
        """The catalogue rules that fire when `mode` rewrites this graph (the rewrite is deterministic)."""
        outputs = self.outputs[0] if self.recipe.single else list(self.outputs)
        fgraph, _ = function_graph(list(self.inputs), outputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            profile = (mode.db or optdb).query(mode.query).rewrite(fgraph)
        return [r for r in map(_rule, sorted(_rules_applied(profile))) if r is not None]

    def check(self, mode: Mode, sets: Sequence[int] | None = None) -> list[Finding]:
        """Every difference between `mode` and the reference, classified."""
        try:
            f, messages = self.compile(mode)
        except Exception as exc:
            return [Finding("crashed", f"compiling raised {type(exc).__name__}: {_short(exc)}", 0)]
        findings = [
            Finding("warned", f"compiling warned: {_short(m)}", 0) for m in messages if _is_internal_error(m)
        ]
        try:
            f.fgraph.check_integrity()
        except Exception as exc:
            findings.append(
                Finding("invalid", f"the rewritten graph fails check_integrity: {_short(exc)}", 0)
            )
        kept: list[tuple[int, list[np.ndarray], list[np.ndarray]]] = []
        for k in range(len(self.input_sets)) if sets is None else sets:
            finding = self._call(f, mode, k, kept)
            if finding is not None:
                findings.append(finding)
        for k, got, copies in kept:  # a later call must not change an earlier call's results
            if not all(np.array_equal(a, b, equal_nan=a.dtype.kind == "f") for a, b in zip(got, copies)):
                findings.append(
                    Finding("wrong", "a later call changed the arrays an earlier call returned", k)
                )
                break
        return findings

    def _call(self, f: Any, mode: Mode, k: int, kept: list) -> Finding | None:
        reference = self.references[k]
        arguments = self.arguments(k)
        originals = [a.copy() for a in arguments]
        try:
            with _errstate(), _deadline(self.timeout, f"calling the {mode} function"):
                got = f(*arguments)
        except Exception as exc:
            if isinstance(reference.outputs, _Error):
                return None
            return Finding(
                "crashed",
                f"the call raised {type(exc).__name__}: {_short(exc)}",
                k,
                _describe_outputs(reference.outputs),
                f"raises {type(exc).__name__}: {_short(exc)}",
            )
        got = [got] if self.recipe.single else list(got)
        for a, b in zip(arguments, originals):
            if not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                return Finding("wrong", "the call modified an input array", k, "", _describe_outputs(got))
        shared = [
            (j, i)
            for j, out in enumerate(got)
            for i, a in enumerate(arguments)
            if isinstance(out, np.ndarray) and np.shares_memory(out, a)
        ]
        if shared:
            j, i = shared[0]
            return Finding("wrong", f"output {j} shares memory with input {i}", k, "", _describe_outputs(got))
        if isinstance(reference.outputs, _Error):
            if self._declared(mode, k, None, None):
                return Finding("declared", "a value where NumPy raises", k)
            if self._refines(f, k, got):
                return Finding("declared", "a rewrite removed the computation that raises", k)
            return Finding(
                "wrong",
                f"returned a value where NumPy raises {type(reference.outputs.error).__name__}",
                k,
                _describe_outputs(reference.outputs),
                _describe_outputs(got),
            )
        kept.append((k, got, [np.array(g, copy=True) for g in got]))
        found: list[Finding] = []
        for j in range(len(got)):  # every output: an improvement on one must not hide a bug on another
            problem, bad = _mismatch(reference, j, got[j])
            if not problem:
                continue
            category = "wrong"
            if bad is not None:
                try:
                    with _deadline(self.timeout, "classifying a difference"):
                        category = self._classify(f, mode, k, j, got[j], bad)
                except FuzzTimeout:
                    problem += " (the fuzzer's classification timed out)"
            hint = self._hint(f, k) if category == "wrong" else ""
            failed = [w for (i, _), w in self._wide.items() if i == k and isinstance(w, _Error)]
            if (
                category == "wrong" and failed
            ):  # the arbiter could not run: say so, it may be the fuzzer's fault
                hint += f"; an extended-precision walk failed: {_short(failed[0].describe(), 200)}"
            expected, shown = _describe_outputs(reference.outputs), _describe_outputs(got)
            found.append(Finding(category, problem, k, expected, shown, hint))
        return next((f for f in found if f.category in BUG_CATEGORIES), found[0] if found else None)

    def _classify(self, f: Any, mode: Mode, k: int, j: int, got: np.ndarray, bad: np.ndarray) -> str:
        """improvement, declared or wrong, for the elements `bad` of output `j` on input set `k`."""
        pending = bad
        widest = None
        for precision in _WIDE_PRECISIONS:
            wide = self.wide(k, precision)
            if isinstance(wide, _Error):
                continue
            slack = np.maximum(self.references[k].slack[j], wide[1][j])
            pending = pending & ~_agreeing(got, wide[0][j], slack)
            if not pending.any():
                return "improvement"
            widest = precision, wide[0][j], slack
        if widest is not None and self._beyond_range(f, mode, k, j, got, pending, *widest):
            return "improvement"
        if self._declared(mode, k, f, (j, bad, got)):
            return "declared"
        return "wrong"

    def _beyond_range(
        self,
        f: Any,
        mode: Mode,
        k: int,
        j: int,
        got: np.ndarray,
        pending: np.ndarray,
        precision: str | int,
        wide: Any,
        slack: np.ndarray,
    ) -> bool:
        """Whether the elements no wide walk settles are stabilizations no finite precision can confirm.

        That is: the widest walk of the original graph overflows there to an
        infinity of the sign of the mode's finite value, or, when a
        stabilizing rule fired, gives NaN where the mode gives a finite value (a
        cancellation such as 1 - sigmoid(x) at x = 1e19 needs more bits than
        any walk has, and log1p(-1) = -inf then makes sin of it NaN); and the
        same walk of the rewritten graph gives the mode's value, within its own
        rounding noise (so the backend is right, and the rewrite is the one that
        is checked everywhere else).
        Or, after a stabilization, a later op hid the infinity
        (`_decided_past_an_infinity`).
        """
        stabilized = any(_declared_precision(r) == "stabilizes" for r in self.rules_applied(mode))
        if got.dtype.kind == "f":
            rounded = _narrowed(wide, got.dtype)
            with _errstate():
                unsettled = np.isinf(rounded) & np.isfinite(got) & (np.sign(rounded) == np.sign(got))
                if stabilized:
                    unsettled |= np.isnan(rounded) & np.isfinite(got)
            if np.all(unsettled[pending]):
                try:
                    rewritten, spread = _spread_walk(
                        f.fgraph.inputs, f.fgraph.outputs, self.arguments(k), precision, k
                    )
                except Exception:
                    return False
                return bool(np.all(_agreeing(got, rewritten[j], np.maximum(slack, spread[j]))[pending]))
        return stabilized and self._decided_past_an_infinity(f, k, j, got, pending, precision, slack)

    def _decided_past_an_infinity(
        self,
        f: Any,
        k: int,
        j: int,
        got: np.ndarray,
        pending: np.ndarray,
        precision: str | int,
        slack: np.ndarray | float,
    ) -> bool:
        """After a stabilization: whether the elements `pending` of output `j` are computed, in the widest
        walk of the original from finite inputs, from an infinity or NaN that a later op hides (a
        comparison, or 1 / x: log1p(expm1(-1e253)) is -inf at any precision, x is not; log1p(-sigmoid(x))
        is -inf at x = 1e269, -softplus(x) is not), and in the same walk of the rewritten graph from no
        such value, that walk giving the mode's value there."""
        if not all(np.all(np.isfinite(np.asarray(v, dtype=np.float64))) for v in self.arguments(k)):
            return False
        values: dict[Variable, Any] = {}
        try:
            _wide_walk(self.inputs, [self.outputs[j]], self.arguments(k), precision, env=values)
            rewritten_values: dict[Variable, Any] = {}
            rewritten = _wide_walk(
                f.fgraph.inputs, [f.fgraph.outputs[j]], self.arguments(k), precision, env=rewritten_values
            )[0]
        except Exception:
            return False

        before = _non_finite_marks(self.inputs, self.outputs[j], values)
        after = _non_finite_marks(f.fgraph.inputs, f.fgraph.outputs[j], rewritten_values)
        if not np.all(before[pending]) or np.any(after[pending]):
            return False
        return bool(np.all(_agreeing(got, np.asarray(rewritten), slack)[pending]))

    def _declared(self, mode: Mode, k: int, f: Any, where: tuple[int, np.ndarray, np.ndarray] | None) -> bool:
        """Whether an unsafe rule fired, or one that changes rounding, exact in a wide walk here, and the
        mode's value is the rewritten graph's (docs/modes.md, "Reassociation").

        A reassociating or stabilizing rule is right over the reals and moves
        where rounding, overflow and underflow happen (``log(exp(x) * x)`` at
        x = -1e250 underflows to -0.0 and gives -inf where the exact value,
        and the original's 0 * -inf, are NaN).  The rewrite is exact here when
        a wide walk of the rewritten graph agrees with one of the original; or,
        where no walk of the original can settle (a cancellation no precision
        holds), with one of the graph the mode makes without those rules, when
        that graph is itself no bug here: blame splits rule class by rule class.
        Then only the order of the floating-point operations may explain the
        difference: the mode's value (`where`'s third item) must be what the
        rewritten graph gives walked in its own dtypes, or a backend computing
        garbage after a reordering would pass for one.
        """
        rules = self.rules_applied(mode)
        if any("unsafe" in r.tags for r in rules):
            return True
        moving = [r.name for r in rules if _declared_precision(r) in ("reassociates", "stabilizes")]
        if where is None or not moving:
            return False
        j, bad, got = where
        if not self._computes_rewritten(f, k, j, got, bad):
            return False
        if self._wide_agrees(f, k, j, bad, lambda precision: self.wide(k, precision)):
            return True
        reassociating = [r.name for r in rules if _declared_precision(r) == "reassociates"]
        if not reassociating:
            return False
        without = Mode(mode.linker, mode.query.excluding(*reassociating), mode.db)
        try:
            g, _ = self.compile(without)
        except Exception:
            return False
        if any(x.category in BUG_CATEGORIES for x in self.check(without, [k])):
            return False
        return self._wide_agrees(
            f,
            k,
            j,
            bad,
            lambda precision: [_wide_walk(g.fgraph.inputs, g.fgraph.outputs, self.arguments(k), precision)],
        )

    def _computes_rewritten(self, f: Any, k: int, j: int, got: np.ndarray, bad: np.ndarray) -> bool:
        """Whether output `j` of the mode is, at `bad`, what a walk of the rewritten graph in its own
        dtypes gives (within the spread rounding noise gives that walk, as for the reference)."""
        fgraph, arguments = f.fgraph, self.arguments(k)
        try:
            native = np.asarray(_walk(fgraph.inputs, fgraph.outputs, arguments, "native")[j])
            rng = np.random.default_rng(k)
            noisy = [
                np.asarray(_walk(fgraph.inputs, fgraph.outputs, arguments, "native", noise=rng)[j])
                for _ in range(3)
            ]
        except Exception:
            return False
        if native.shape != got.shape or native.dtype != got.dtype:
            return False
        close = _close(native, got, _slack(native, noisy), _RTOL.get(native.dtype.name, 0.0))
        return bool(np.all(close[bad]))

    def _wide_agrees(
        self, f: Any, k: int, j: int, bad: np.ndarray, other: Callable[[str | int], Any]
    ) -> bool:
        """Whether in some wide precision the rewritten graph's output `j` agrees with `other`'s at `bad`:
        to 12 digits, or within the spread that moving its float constants by a few ulps of their dtypes
        gives it (`_constants_moved`): a rule computes its constants in the graph's dtypes (float32
        x / 3 -> x * 0.33333334), right over the reals but for their rounding, which an ill-conditioned
        op after them (cos of 6e307) makes any size."""
        fgraph, arguments = f.fgraph, self.arguments(k)
        for precision in _WIDE_PRECISIONS:
            try:
                theirs = other(precision)
                rewritten = _wide_walk(fgraph.inputs, fgraph.outputs, arguments, precision)
            except Exception:
                continue
            if isinstance(theirs, _Error):
                continue
            if _wide_close(theirs[0][j], rewritten[j], bad):
                return True
            rng = np.random.default_rng(k)
            try:
                moved = [
                    _wide_walk(
                        fgraph.inputs,
                        fgraph.outputs,
                        arguments,
                        precision,
                        constants=_constants_moved(fgraph, precision, rng),
                    )[j]
                    for _ in range(3)
                ]
            except Exception:
                continue
            if _wide_close(theirs[0][j], rewritten[j], bad, _wide_spread(rewritten[j], moved)):
                return True
        return False

    def _refines(self, f: Any, k: int, got: Sequence[Any]) -> bool:
        """Whether the rewritten graph no longer holds the computation that makes the original raise.

        Rewriting may refine a graph (docs/rule-safety.md): a rule that drops
        a computation whose value is not needed drops its error too, so a
        value where NumPy raises is declared when a plain walk of the
        rewritten graph gives the mode's value; a backend that returns a value
        where its own graph raises is still a bug.  A rule's values are
        checked on every input set where the original does not raise.
        """
        try:
            values = _walk(f.fgraph.inputs, f.fgraph.outputs, self.arguments(k), "native")
        except Exception:
            return False
        pairs = [(np.asarray(v), np.asarray(g)) for v, g in zip(values, got)]
        return len(pairs) == len(got) and all(
            v.shape == g.shape and np.allclose(v, g, equal_nan=True) for v, g in pairs
        )

    def _hint(self, f: Any, k: int) -> str:
        """Where the wrong value comes from: the rewritten graph itself, or the backend running it."""
        fgraph = f.fgraph
        try:
            for var, value in _walk_all(fgraph.inputs, fgraph.outputs, self.arguments(k)):
                problem = _type_problem(var, value)
                if problem is not None:
                    return f"rewritten graph: {var.owner.op} has {problem}"
            values = _walk(fgraph.inputs, fgraph.outputs, self.arguments(k), "native")
        except Exception as exc:
            return f"the reference cannot evaluate the rewritten graph ({type(exc).__name__}: {_short(exc)})"
        reference = self.references[k]
        right = all(not _mismatch(reference, j, np.asarray(v))[0] for j, v in enumerate(values))
        if right:
            return "the rewritten graph is right under the reference: the linker or a kernel is wrong"
        return "the rewritten graph computes the wrong value: a rewrite is wrong"


def _short(item: Any, limit: int = 300) -> str:
    text = " ".join(str(item).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_internal_error(message: str) -> bool:
    """A warning that reports an exception relwrite swallowed (a rewriter raised, a C module failed)."""
    return " raised " in message or "failed" in message


def check(
    recipe: Recipe, input_sets: list[dict[int, np.ndarray]], mode: Mode, seed: int = 0, timeout: float = 120.0
) -> list[Finding]:
    """Every finding of `mode` on `recipe`; each input set maps the recipe's input steps to their values."""
    return _Case(recipe, input_sets, seed, timeout).check(mode)

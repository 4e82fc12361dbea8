"""The numerical check of an explored form: does it compute what the input computes?

Exploration offers a form only once its values agree with the input's on
inputs drawn here, a guard against an unsound rule or a wrong step.  The
inputs are drawn with NumPy's random generator from a fixed seed (the same
form gets the same verdict everywhere, and no hypothesis or pytest is
needed to explore): each unknown length 1, 2 or 3 in turn (longer where the
input did not evaluate at those: an index past them), sometimes one
input of length 1 where its lengths are unknown (so that broadcasting is
exercised), floats a mix of small special values, values uniform in
[-10, 10] and magnitudes spread from 1e-6 to 1e3, integers in [-5, 5].  The
two graphs are compiled once and compared as `relwrite.backends.compare`
judges rules' two sides.  Where a step's condition does not hold, or, for
identities over the reals (derivations through unsafe, stabilizing or
explore rules), where a value is not finite, values are not compared; an
input drawn where nothing is compared is drawn again, `ATTEMPTS` times per
example at most.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from relwrite.backends.compare import (
    Evaluator,
    NoUsableExample,
    SoundnessError,
    coarsest_float,
    difference,
    magnitude,
    unreliable_positions,
)
from relwrite.graph import ops
from relwrite.graph.basic import Constant, Variable, graph_inputs

COMPARISONS = {">": ops.gt, ">=": ops.ge, "<": ops.lt, "<=": ops.le, "!=": ops.neq}
"""The graph op of each comparison a step's condition states."""

FINITE_ONLY_TAGS = frozenset({"unsafe", "stabilize", "explore"})
"""Tags of rules equal over the reals only: a derivation through one is compared where values are finite."""

ATTEMPTS = 10
"""Inputs drawn per example wanted, at most (an input where nothing is compared is drawn again)."""

LENGTHS = (1, 2, 3)
"""The lengths unknown axes take, in turn: times GROWTH for each round of them where the input did not
evaluate (``x[2:][1]`` reads a fifth element), up to GROWTH ** MOST_GROWN."""

GROWTH, MOST_GROWN = 4, 4

UNEVALUATED = "the input did not evaluate on the values drawn"

SPECIAL = np.array([0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 10.0, -10.0, 1e-3, -1e-3, 100.0])
"""Float values drawn a quarter of the time: zeros, units and simple fractions, where identities break."""

NON_FINITE = 0.03
"""The share of float elements drawn infinite or NaN where non-finite values are compared too."""


def everywhere(condition: Variable, like: Variable) -> Variable:
    """`condition` if it broadcasts into `like`'s shape, else whether it holds at every element."""
    if len(condition.type.shape) <= like.ndim and all(
        c == 1 or (c is not None and c == d)
        for c, d in zip(reversed(condition.type.shape), reversed(like.type.shape))
    ):
        return condition
    failures = ops.sum(ops.cast(ops.eq(condition, False), "float64"))
    return ops.eq(failures, 0)


def check_equal(
    expr: Variable,
    other: Variable,
    conditions: Iterable[tuple[Variable, str, float]],
    tags: frozenset[str],
    examples: int,
    name: str,
    seed: int = 0,
) -> int:
    """Check that `other` computes what `expr` does where `conditions` (term, comparison, number) hold,
    on up to `examples` inputs compared; how many were.  `SoundnessError` at the first input where
    they differ, `NoUsableExample` when no input drawn could be compared."""
    if examples < 1:
        raise ValueError(f"examples must be at least 1, got {examples}")
    finite_only = bool(tags & FINITE_ONLY_TAGS)
    holds = [
        everywhere(COMPARISONS[op](term, np.asarray(value, dtype=term.dtype)), expr)
        for term, op, value in conditions
    ]
    checked, compared = other, expr
    if finite_only and expr.type.numpy_dtype.kind == "f":
        # compared only where the conditions hold and `other` is finite: elsewhere the left side is NaN,
        # which a finite-only comparison skips
        nan = np.asarray(np.nan, dtype=expr.dtype)
        for condition in (ops.lt(ops.abs(other), np.inf), *holds):
            compared = ops.switch(condition, compared, nan)
    else:
        for condition in holds:
            checked = ops.switch(condition, checked, expr)
    inputs = [v for v in graph_inputs([compared, checked]) if not isinstance(v, Constant)]
    left, right = Evaluator(compared, inputs), Evaluator(checked, inputs)
    rng = np.random.default_rng(seed)
    rejected: Counter[str] = Counter()
    done = 0
    for attempt in range(examples * ATTEMPTS):
        if done >= examples:
            break
        grown = min(rejected[UNEVALUATED] // len(LENGTHS), MOST_GROWN)
        length = LENGTHS[attempt % len(LENGTHS)] * GROWTH**grown
        ones = int(rng.integers(-1, len(inputs))) if inputs else -1  # an input of length-1 axes, or none
        values = [_drawn(rng, v, 1 if k == ones else length, not finite_only) for k, v in enumerate(inputs)]
        reason = _compare(compared, checked, left, right, inputs, values, finite_only, name)
        if reason is None:
            done += 1
        else:
            rejected[reason] += 1
    if not done:
        why = "; ".join(f"{reason} ({count} times)" for reason, count in rejected.most_common())
        raise NoUsableExample(f"{name}: no input drawn could be compared: {why or 'nothing was drawn'}")
    return done


def _compare(
    compared: Variable,
    checked: Variable,
    left: Evaluator,
    right: Evaluator,
    inputs: Sequence[Variable],
    values: list[np.ndarray],
    finite_only: bool,
    name: str,
) -> str | None:
    """None when the two sides agree on `values`, why not compared when they were not; SoundnessError
    when they differ."""
    try:
        lhs = left(values)
    except Exception:
        return UNEVALUATED
    if lhs.underflow:  # gradual underflow loses precision no tolerance can account for
        return "the input passed through subnormal numbers"
    if finite_only and lhs.value.dtype.kind == "f" and not np.isfinite(lhs.value).any():
        return "nothing finite to compare"
    named = {v.name or f"input{k}": value for k, (v, value) in enumerate(zip(inputs, values))}

    def mismatch(problem: str, right_value: np.ndarray | None = None) -> SoundnessError:
        return SoundnessError(
            f"{name}: {problem}", name, "forward", named, compared, checked, lhs.value, right_value
        )

    try:
        rhs = right(values)
    except Exception as exc:
        raise mismatch(f"the form did not evaluate where the input did, at {_shown(named)}: {exc}") from None
    if finite_only and lhs.overflow != rhs.overflow:
        return "a value overflowed on one side only"
    scale = max(1.0, lhs.magnitude, rhs.magnitude, *(magnitude(v) for v in values))
    problem = difference(
        lhs.value,
        rhs.value,
        finite_only,
        None,
        None,
        scale,
        lambda: unreliable_positions(compared, inputs, values, lhs.value, scale),
        coarsest_float(values),
    )
    if problem is None:
        return None
    raise mismatch(f"{problem} at {_shown(named)}", rhs.value)


def _drawn(rng: np.random.Generator, v: Variable, length: int, non_finite: bool) -> np.ndarray:
    """Values for input `v`: its static lengths, `length` where they are unknown."""
    shape = tuple(length if d is None else d for d in v.type.shape)
    dtype = v.type.numpy_dtype
    count = math.prod(shape)
    if dtype.kind == "b":
        return (rng.random(count) < 0.5).reshape(shape)
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -5
        return rng.integers(low, 6, size=count).astype(dtype).reshape(shape)
    kind = rng.random(count)
    spread = rng.choice([-1.0, 1.0], count) * 10.0 ** rng.uniform(-6, 3, count)
    floats = np.where(
        kind < 0.25, rng.choice(SPECIAL, count), np.where(kind < 0.75, rng.uniform(-10, 10, count), spread)
    )
    if non_finite:
        floats = np.where(
            rng.random(count) < NON_FINITE, rng.choice([np.inf, -np.inf, np.nan], count), floats
        )
    return floats.astype(dtype).reshape(shape)


def _shown(named: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{name}={np.asarray(value).tolist()!r}" for name, value in named.items())

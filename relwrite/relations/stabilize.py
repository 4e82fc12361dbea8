"""Stabilize: replace numerically fragile expressions by stable equivalents.

The rules match the canonical form canonicalize leaves: constants first in
add and mul, subtraction as addition of a negation (``1 - sigmoid(x)`` is
``add(1, neg(sigmoid(x)))``).  Each rule `stabilizes` (docs/rule-safety.md):
its right side computes the same function as its left side and differs from
it only where the left side loses accuracy (cancellation, as in
1 - sigmoid(37)) or overflows or underflows (to ±inf, or to 0 before a log):
there the right side gives the accurate, finite value, which is the point of
the phase.  Such rules run by default.  One is `unsafe`: softplus_minus_self
turns the NaN of inf - inf at x = +inf into 0, as sub_self does.

Rules that negate or shift their operand need a floating dtype (integer
negation wraps around), so they carry an `is_float` constraint.  When two
rules can match one node, the more specific one is defined first: the engine
tries a node's rules in definition order.  Each rule is one declaration
(`rule`): log_softmax and logsumexp capture the softmax's axis and the
sum's axes and build the stable op along them, in both directions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from relwrite.graph import ops as o
from relwrite.relations.predicates import (
    float_var,
    is_float_regroupable,
    operands_regroupable,
    same_dtype_at,
)
from relwrite.relations.registry import STABILIZE, negation_twins, rule
from relwrite.relations.runtime import Computed

EVERY_MODE = (*STABILIZE, "fast_compile")
"""Stabilizations without which a common expression overflows: they run in fast_compile too."""
VECTOR = {"x": "vector"}


# -- rules -----------------------------------------------------------------------------------------
# On a log node the specific forms come first, then log1p, which would otherwise take them.

log_one_minus_sigmoid, log_one_minus_sigmoid_times_minus_one = negation_twins(
    "log_one_minus_sigmoid",
    lambda negate: (o.log, (o.add, 1, negate((o.sigmoid, "x")))),
    (o.neg, (o.softplus, "x")),
    STABILIZE,
    ("log(add(1, {n}sigmoid(x))))",),
    "log(1 - sigmoid(x)) -> -softplus(x): finite where sigmoid(x) rounds to 1",
    types=VECTOR,
)

softplus = rule(
    "softplus",
    (o.log, (o.add, 1, (o.exp, "x"))),
    (o.softplus, "x"),
    STABILIZE,
    examples=("log(add(1, exp(x)))",),
    types={"x": "vector"},
    doc="log(1 + exp(x)) -> softplus(x): finite where exp(x) overflows",
)


log1p = rule(
    "log1p",
    (o.log, {"pattern": (o.add, 1, "*rest"), "constraint": is_float_regroupable}),
    (o.log1p, (o.add, "*rest")),
    STABILIZE,
    examples=("log(add(1, x))", "log(add(1, x, y))"),
    types={"x": "vector"},
    keeps_type=True,
    doc="""log(1 + x) -> log1p(x), and log(1 + a + b) -> log1p(a + b): accurate for small x
    (floats only).  With several terms (of one dtype: `predicates.regroupable`) their sum is
    rounded before log1p sees it, so the gain is for sums far from -1 (near -1 neither side
    is accurate).""",
)


log_sigmoid_neg, log_sigmoid_neg_times_minus_one = negation_twins(
    "log_sigmoid_neg",
    lambda negate: (o.log, (o.sigmoid, negate(float_var("x")))),
    (o.neg, (o.softplus, "x")),
    STABILIZE,
    ("log(sigmoid({n}x)))",),
    "log(sigmoid(-x)) -> -softplus(x): finite where sigmoid(-x) underflows (floats only)",
    types=VECTOR,
)

log_sigmoid = rule(
    "log_sigmoid",
    (o.log, (o.sigmoid, float_var("x"))),
    (o.neg, (o.softplus, (o.neg, "x"))),
    STABILIZE,
    examples=("log(sigmoid(x))",),
    types={"x": "vector"},
    doc="log(sigmoid(x)) -> -softplus(-x): finite where sigmoid(x) underflows (floats only)",
)


log_softmax = rule(
    "log_softmax",
    (o.log, (o.Softmax.pattern(axis="axis"), "x")),
    (o.LogSoftmax.pattern(axis="axis"), "x"),
    EVERY_MODE,
    examples=("log(softmax(x))", "log(softmax(x, axis=0))"),
    types={"x": "matrix"},
    doc="log(softmax(x)) -> log_softmax(x) along the same axis: finite where a probability underflows.",
)

logsumexp = rule(
    "logsumexp",
    (o.log, (o.Sum.pattern(axis="axis"), (o.exp, float_var("x")))),
    (o.LogSumExp.pattern(axis="axis"), "x"),
    EVERY_MODE,
    keeps_type=True,
    examples=("log(sum(exp(x), axis=1))", "log(sum(exp(x)))", "log(sum(exp(x), axis=(0, 1)))"),
    types={"x": "matrix"},
    doc="""log(sum(exp(x), axis)) -> logsumexp(x, axis) over the same axes: no exp overflows (floats).
    The op computes m + log(sum(exp(x - m))) with m the maximum of x where that is finite (else 0), so
    the largest term contributes exactly 1, slices of -inf or holding +inf or NaN give what the left
    side gives, and an empty axis gives -inf as the left side does.""",
)


log1p_neg_sigmoid, log1p_neg_sigmoid_times_minus_one = negation_twins(
    "log1p_neg_sigmoid",
    lambda negate: (o.log1p, negate((o.sigmoid, "x"))),
    (o.neg, (o.softplus, "x")),
    STABILIZE,
    ("log1p({n}sigmoid(x)))",),
    "log1p(-sigmoid(x)) -> -softplus(x): log_one_minus_sigmoid after log1p took the log",
    types=VECTOR,
)

softplus_log1p = rule(
    "softplus_log1p",
    (o.log1p, (o.exp, "x")),
    (o.softplus, "x"),
    STABILIZE,
    examples=("log1p(exp(x))",),
    types={"x": "vector"},
    doc="log1p(exp(x)) -> softplus(x): finite where exp(x) overflows",
)


expm1 = rule(
    "expm1",
    {"pattern": (o.add, -1, (o.exp, "x"), "*rest"), "constraint": operands_regroupable},
    (o.add, (o.expm1, "x"), "*rest"),
    STABILIZE,
    examples=("add(-1, exp(x))", "add(-1, y, exp(x))"),
    types={"x": "vector"},
    keeps_type=True,
    doc="""exp(x) - 1 -> expm1(x), also among other terms: -1 + y + exp(x) -> expm1(x) + y;
    accurate near 0.  Among other terms only when they may be regrouped
    (`predicates.regroupable`: one dtype); the other terms are then added in another order (see
    `reassociates`).""",
)


softplus_minus_self, softplus_minus_self_times_minus_one = negation_twins(
    "softplus_minus_self",
    lambda negate: (o.add, negate(float_var("x")), (o.softplus, "x")),
    (o.softplus, (o.neg, "x")),
    STABILIZE,
    ("add({n}x), softplus(x))",),
    "softplus(x) - x -> softplus(-x): no cancellation for large x (floats only). Unsafe: at"
    " x = +inf the left side is inf - inf = NaN and the right side 0, as sub_self turns x - x into 0",
    semantics="unsafe",
    types=VECTOR,
)

log_exp = rule(
    "log_exp",
    {"pattern": (o.log, (o.exp, "x")), "constraint": same_dtype_at(0, 0)},
    "x",
    STABILIZE,
    examples=("log(exp(x))",),
    doc="log(exp(x)) -> x: where exp(x) overflows to inf (float64: x > 709.8, float32: x > 88.7) or"
    " underflows to 0 or a subnormal (x < -708.4, float32 x < -87.3) the left side is inf, -inf or"
    " inaccurate, the right side exact; elsewhere they agree to rounding (at x = -0.0 the left side"
    " is +0.0)",
)


def is_integer(value: Any) -> bool:
    """Whether `value` has a signed or unsigned integer dtype (exp and expm1 compute it in a float)."""
    return getattr(value, "dtype", None) is not None and value.type.numpy_dtype.kind in "iu"


def _float_of(op: o.Elemwise) -> Computed:
    """The float dtype `op` computes an integer `i` in, and back: the `i` whose dtype `op` makes it."""

    def dtype(i: Any) -> str:
        return op.output_dtype([i.dtype])

    def integers(d: str, i: Any) -> Iterator[dict]:
        yield {"i": i}

    return Computed(dtype, inverse=integers)


def _integer_inverse(name: str, outer: o.Elemwise, inner: o.Elemwise) -> Any:
    text = f"{outer}({inner}(i))"
    return rule(
        name,
        (outer, (inner, {"pattern": "i", "constraint": is_integer})),
        (o.Cast.pattern(dtype="d"), "i"),
        STABILIZE,
        compute={"d": _float_of(inner)},
        examples=(text,),
        types={"i": "vector:int64"},
        doc=f"{text} -> i cast to the float dtype {inner} computes it in, for integer i (the float rule"
        f" keeps the dtype, and here {inner}(i) widens it): finite where {inner}(i) overflows (int64"
        " i > 709; int8 and uint8 compute in float16, which overflows past 11) or underflows",
    )


log_exp_integer = _integer_inverse("log_exp_integer", o.log, o.exp)
log1p_expm1_integer = _integer_inverse("log1p_expm1_integer", o.log1p, o.expm1)

exp_softplus = rule(
    "exp_softplus",
    (o.exp, (o.softplus, float_var("x"))),
    (o.add, 1, (o.exp, "x")),
    STABILIZE,
    examples=("exp(softplus(x))",),
    types={"x": "vector"},
    doc="exp(softplus(x)) -> 1 + exp(x) (floats): one exp instead of two and a log; accurate where the"
    " left side rounds softplus(x) before exp amplifies its error (by up to 709 times, for large x)",
)

sqrt_sqr = rule(
    "sqrt_sqr",
    {"pattern": (o.sqrt, (o.sqr, "x")), "constraint": same_dtype_at(0, 0)},
    (o.abs, "x"),
    STABILIZE,
    examples=("sqrt(sqr(x))",),
    doc="sqrt(sqr(x)) -> abs(x): where sqr(x) overflows to inf (float64: |x| > 1.3e154) or underflows"
    " (|x| < 1.5e-154) the left side is inf or inaccurate, the right side exact; elsewhere they are"
    " equal",
)


# -- sigmoid from exp, and back to exp -------------------------------------------------------------
SIGMOID_ONE_WAY = (
    "forward only: backward, every sigmoid(x) would become a ratio or product of exps, which the other"
    " sigmoid rules turn back and the algebra rules grow without end (exploration would never saturate)"
)

# On a true_div node the specific numerators come first: exp(x) / (1 + exp(x)) is also y / (1 + exp(x)).

exp_over_one_plus_exp = rule(
    "exp_over_one_plus_exp",
    (o.true_div, (o.exp, "x"), (o.add, 1, (o.exp, "x"))),
    (o.sigmoid, "x"),
    STABILIZE,
    one_way=SIGMOID_ONE_WAY,
    keeps_type=True,
    examples=("true_div(exp(x), add(1, exp(x)))",),
    types=VECTOR,
    doc="exp(x) / (1 + exp(x)) -> sigmoid(x) (PyTensor's local_exp_over_1_plus_exp): not NaN where exp(x)"
    " overflows (inf / inf)",
)
one_over_one_plus_exp_neg, one_over_one_plus_exp_neg_times_minus_one = negation_twins(
    "one_over_one_plus_exp_neg",
    lambda negate: (o.true_div, 1, (o.add, 1, (o.exp, negate(float_var("x"))))),
    (o.sigmoid, "x"),
    STABILIZE,
    ("true_div(1, add(1, exp({n}x))))",),
    "1 / (1 + exp(-x)) -> sigmoid(x): the definition of sigmoid, in one op that does not overflow",
    one_way=SIGMOID_ONE_WAY,
    keeps_type=True,
    types=VECTOR,
)
one_over_one_plus_exp = rule(
    "one_over_one_plus_exp",
    (o.true_div, 1, (o.add, 1, (o.exp, float_var("x")))),
    (o.sigmoid, (o.neg, "x")),
    STABILIZE,
    one_way=SIGMOID_ONE_WAY,
    keeps_type=True,
    examples=("true_div(1, add(1, exp(x)))",),
    types=VECTOR,
    doc="1 / (1 + exp(x)) -> sigmoid(-x) (floats: the rule negates x): accurate where exp(x) overflows or"
    " 1 + exp(x) rounds",
)
over_one_plus_exp = rule(
    "over_one_plus_exp",
    (o.true_div, "y", (o.add, 1, (o.exp, float_var("x")))),
    (o.mul, "y", (o.sigmoid, (o.neg, "x"))),
    STABILIZE,
    one_way=SIGMOID_ONE_WAY,
    keeps_type=True,
    examples=("true_div(y, add(1, exp(x)))",),
    types={"x": "vector", "y": "vector"},
    doc="y / (1 + exp(x)) -> y * sigmoid(-x) (floats): one_over_one_plus_exp with any numerator",
)
reciprocal_one_plus_exp_neg, reciprocal_one_plus_exp_neg_times_minus_one = negation_twins(
    "reciprocal_one_plus_exp_neg",
    lambda negate: (o.reciprocal, (o.add, 1, (o.exp, negate(float_var("x"))))),
    (o.sigmoid, "x"),
    STABILIZE,
    ("reciprocal(add(1, exp({n}x))))",),
    "reciprocal(1 + exp(-x)) -> sigmoid(x): one_over_one_plus_exp_neg written with reciprocal",
    one_way=SIGMOID_ONE_WAY,
    keeps_type=True,
    types=VECTOR,
)
reciprocal_one_plus_exp = rule(
    "reciprocal_one_plus_exp",
    (o.reciprocal, (o.add, 1, (o.exp, float_var("x")))),
    (o.sigmoid, (o.neg, "x")),
    STABILIZE,
    one_way=SIGMOID_ONE_WAY,
    keeps_type=True,
    examples=("reciprocal(add(1, exp(x)))",),
    types=VECTOR,
    doc="reciprocal(1 + exp(x)) -> sigmoid(-x) (PyTensor's local_reciprocal_1_plus_exp; floats)",
)

# exp(x) * sigmoid(-x) is exp(x) / (1 + exp(x)); exp(-x) * sigmoid(x) is exp(-x) / (1 + exp(-x)).  Of two
# factors only: with other factors (*rest) the rules run backward from any product holding a sigmoid and
# grow it without end in exploration (an e-graph holding exp and sigmoid would never saturate)
sigmoid_times_exp_neg, sigmoid_times_exp_neg_times_minus_one = negation_twins(
    "sigmoid_times_exp_neg",
    lambda negate: (o.mul, (o.sigmoid, float_var("x")), (o.exp, negate("x"))),
    (o.switch, (o.eq, "x", -math.inf), math.nan, (o.sigmoid, (o.neg, "x"))),
    STABILIZE,
    ("mul(sigmoid(x), exp({n}x)))",),
    "sigmoid(x) * exp(-x) -> switch(x == -inf, nan, sigmoid(-x)) (PyTensor's local_sigm_times_exp): not"
    " NaN where sigmoid(x) underflows to 0 and exp(-x) overflows; at x = -inf, where the left side is"
    " 0 * inf, NaN as it is (sigmoid(-x) alone would give the limit 1 there, which is unsafe's to give)",
    one_way=SIGMOID_ONE_WAY,
    keeps_type=True,
    types=VECTOR,
)
sigmoid_neg_times_exp, sigmoid_neg_times_exp_times_minus_one = negation_twins(
    "sigmoid_neg_times_exp",
    lambda negate: (o.mul, (o.sigmoid, negate(float_var("x"))), (o.exp, "x")),
    (o.switch, (o.eq, "x", math.inf), math.nan, (o.sigmoid, "x")),
    STABILIZE,
    ("mul(sigmoid({n}x)), exp(x))",),
    "sigmoid(-x) * exp(x) -> switch(x == inf, nan, sigmoid(x)) (PyTensor's local_sigm_times_exp): not"
    " NaN where sigmoid(-x) underflows to 0 and exp(x) overflows; at x = inf, where the left side is"
    " 0 * inf, NaN as it is",
    one_way=SIGMOID_ONE_WAY,
    keeps_type=True,
    types=VECTOR,
)

ODDS_ONE_WAY = (
    "forward only: backward, every exp(x) would become a ratio of sigmoids, whose negations and quotients"
    " the algebra rules grow without end (exploration of any graph holding exp would never saturate)"
)

# The odds of a sigmoid: 1 - sigmoid(x) as canonicalize leaves it, and as sigmoid(-x) once
# one_minus_sigmoid has run (PyTensor registers them in canonicalize too: fast_compile runs them).
odds_sigmoid, odds_sigmoid_times_minus_one = negation_twins(
    "odds_sigmoid",
    lambda negate: (o.true_div, (o.sigmoid, "x"), (o.add, 1, negate((o.sigmoid, "x")))),
    (o.exp, "x"),
    EVERY_MODE,
    ("true_div(sigmoid(x), add(1, {n}sigmoid(x))))",),
    "sigmoid(x) / (1 - sigmoid(x)) -> exp(x) (PyTensor's local_odds_sigmoid): 1 - sigmoid(x) is 0 for"
    " x > 37, where the left side is inf and exp(x) finite up to 709.  With log_exp, the logit of a"
    " sigmoid, log(sigmoid(x) / (1 - sigmoid(x))), is x",
    one_way=ODDS_ONE_WAY,
    keeps_type=True,
    types=VECTOR,
)
odds_sigmoid_neg, odds_sigmoid_neg_times_minus_one = negation_twins(
    "odds_sigmoid_neg",
    lambda negate: (o.true_div, (o.sigmoid, float_var("x")), (o.sigmoid, negate("x"))),
    (o.exp, "x"),
    EVERY_MODE,
    ("true_div(sigmoid(x), sigmoid({n}x)))",),
    "sigmoid(x) / sigmoid(-x) -> exp(x) (floats): odds_sigmoid after one_minus_sigmoid; finite where"
    " sigmoid(-x) underflows",
    one_way=ODDS_ONE_WAY,
    keeps_type=True,
    types=VECTOR,
)
inverse_odds_sigmoid, inverse_odds_sigmoid_times_minus_one = negation_twins(
    "inverse_odds_sigmoid",
    lambda negate: (o.true_div, (o.add, 1, negate((o.sigmoid, float_var("x")))), (o.sigmoid, "x")),
    (o.exp, (o.neg, "x")),
    EVERY_MODE,
    ("true_div(add(1, {n}sigmoid(x))), sigmoid(x))",),
    "(1 - sigmoid(x)) / sigmoid(x) -> exp(-x) (PyTensor's local_inv_odds_sigmoid; floats): not 0 where"
    " 1 - sigmoid(x) rounds to 0",
    one_way=ODDS_ONE_WAY,
    keeps_type=True,
    types=VECTOR,
)
inverse_odds_sigmoid_neg, inverse_odds_sigmoid_neg_times_minus_one = negation_twins(
    "inverse_odds_sigmoid_neg",
    lambda negate: (o.true_div, (o.sigmoid, negate(float_var("x"))), (o.sigmoid, "x")),
    (o.exp, (o.neg, "x")),
    EVERY_MODE,
    ("true_div(sigmoid({n}x)), sigmoid(x))",),
    "sigmoid(-x) / sigmoid(x) -> exp(-x) (floats): inverse_odds_sigmoid after one_minus_sigmoid; finite"
    " where sigmoid(x) underflows",
    one_way=ODDS_ONE_WAY,
    keeps_type=True,
    types=VECTOR,
)


# sigmoid inverts logit on [0, 1]; outside it the left side is the log of a negative number, NaN: the
# right side keeps that NaN (x equals its clip to [0, 1] exactly on [0, 1], and a NaN equals nothing)
sigmoid_logit, sigmoid_logit_times_minus_one = negation_twins(
    "sigmoid_logit",
    lambda negate: (o.sigmoid, (o.log, (o.true_div, float_var("x"), (o.add, 1, negate("x"))))),
    (o.switch, (o.eq, (o.minimum, (o.maximum, "x", 0), 1), "x"), "x", float("nan")),
    EVERY_MODE,
    ("sigmoid(log(true_div(x, add(1, {n}x)))))",),
    "sigmoid(log(x / (1 - x))) -> x on [0, 1], NaN elsewhere as the left side (PyTensor's"
    " local_sigmoid_logit, which gives x everywhere; floats): exact where the left side rounds x / (1 - x),"
    " log and sigmoid",
    keeps_type=True,
    types=VECTOR,
)


# -- softmax from exp and sum ----------------------------------------------------------------------


def expanded_at(axes: tuple[int, ...], ndim: int) -> tuple:
    """The DimShuffle order that puts back, as length-1 axes, the `axes` a reduction of an `ndim` array
    dropped (what keepdims=True builds)."""
    kept = iter(range(ndim - len(axes)))
    return tuple("x" if i in axes else next(kept) for i in range(ndim))


def reduced_axes(axes: tuple[int, ...] | None, ndim: int) -> tuple[int, ...] | None:
    """A reduction's axes, non-negative and sorted (None: every axis); None where one is out of range."""
    if axes is None:
        return tuple(range(ndim))
    if any(not -ndim <= a < ndim for a in axes):
        return None
    return tuple(sorted(a % ndim for a in axes))


def softmax_axis(x: Any, axes: tuple[int, ...] | None, nd: int, order: tuple) -> int | None:
    """The axis of the softmax exp(x) / sum(exp(x), axis, keepdims=True) computes: the one axis the sum
    reduces, which the DimShuffle (of an `nd`-dimensional sum) puts back in place; else None."""
    found = reduced_axes(axes, x.ndim)
    if found is None or len(found) != 1 or nd != x.ndim - 1 or order != expanded_at(found, x.ndim):
        return None
    return found[0]


def softmax_sum(axis: int, x: Any) -> Any:
    """The sum and DimShuffle of a softmax's `axis` (counted from the end when negative, as the op keeps
    it: softmax(x, axis=-1)); nothing for an axis x does not have."""
    if -x.ndim <= axis < x.ndim:
        axis %= x.ndim
        yield {"axes": (axis,), "nd": x.ndim - 1, "order": expanded_at((axis,), x.ndim)}


def vector_softmax_axis(x: Any, axes: tuple[int, ...] | None) -> int | None:
    """Axis 0, when exp(x) / sum(exp(x), axes) is the softmax of a vector x (the sum is over its one axis)."""
    return 0 if x.ndim == 1 and reduced_axes(axes, 1) == (0,) else None


def vector_sum(axis: int, x: Any) -> Any:
    yield {"axes": None}
    yield {"axes": (0,)}


softmax = rule(
    "softmax",
    (
        o.true_div,
        (o.exp, float_var("x")),
        (
            o.DimShuffle.pattern(input_ndim="nd", new_order="order"),
            (o.Sum.pattern(axis="axes"), (o.exp, "x")),
        ),
    ),
    (o.Softmax.pattern(axis="axis"), "x"),
    EVERY_MODE,
    compute={"axis": Computed(softmax_axis, inverse=softmax_sum)},
    examples=("exp(x) / sum(exp(x), axis=1, keepdims=True)", "exp(x) / sum(exp(x), axis=0, keepdims=True)"),
    types={"x": "matrix"},
    doc="""exp(x) / sum(exp(x), axis, keepdims=True) -> softmax(x, axis) (PyTensor's local_softmax_stabilize),
    for one axis and float x: the op subtracts the maximum first, so no exp overflows (the left side is
    inf / inf = NaN where one does).""",
)
vector_softmax = rule(
    "vector_softmax",
    (o.true_div, (o.exp, float_var("x")), (o.Sum.pattern(axis="axes"), (o.exp, "x"))),
    (o.Softmax.pattern(axis="axis"), "x"),
    EVERY_MODE,
    compute={"axis": Computed(vector_softmax_axis, inverse=vector_sum)},
    examples=("exp(v) / sum(exp(v))",),
    types={"v": "vector"},
    doc="exp(v) / sum(exp(v)) -> softmax(v) for a float vector v: the softmax rule where the sum is a"
    " scalar (no keepdims needed)",
)


logsumexp_keepdims = rule(
    "logsumexp_keepdims",
    (
        o.log,
        (
            o.DimShuffle.pattern(input_ndim="nd", new_order="order"),
            (o.Sum.pattern(axis="axis"), (o.exp, float_var("x"))),
        ),
    ),
    (o.DimShuffle.pattern(input_ndim="nd", new_order="order"), (o.LogSumExp.pattern(axis="axis"), "x")),
    EVERY_MODE,
    keeps_type=True,
    examples=("log(sum(exp(x), axis=1, keepdims=True))", "log(sum(exp(x), keepdims=True))"),
    types={"x": "matrix"},
    doc="log(sum(exp(x), axis, keepdims=True)) -> logsumexp(x, axis, keepdims=True): logsumexp where the sum"
    " keeps its axes (a DimShuffle between log and sum, which log commutes with)",
)
log_softmax_from_logsumexp, log_softmax_from_logsumexp_times_minus_one = negation_twins(
    "log_softmax_from_logsumexp",
    lambda negate: (
        o.add,
        float_var("x"),
        negate(
            (
                o.DimShuffle.pattern(input_ndim="nd", new_order="order"),
                (o.LogSumExp.pattern(axis="axes"), "x"),
            )
        ),
    ),
    (o.LogSoftmax.pattern(axis="axis"), "x"),
    STABILIZE,
    ("add(x, {n}logsumexp(x, axis=1, keepdims=True)))", "add(x, {n}logsumexp(x, axis=0, keepdims=True)))"),
    "x - logsumexp(x, axis, keepdims=True) -> log_softmax(x, axis) for one axis (PyTensor's"
    " local_log_softmax_from_logsumexp): one op",
    compute={"axis": Computed(softmax_axis, inverse=softmax_sum)},
    keeps_type=True,
    types={"x": "matrix"},
)
vector_log_softmax_from_logsumexp, vector_log_softmax_from_logsumexp_times_minus_one = negation_twins(
    "vector_log_softmax_from_logsumexp",
    lambda negate: (o.add, float_var("x"), negate((o.LogSumExp.pattern(axis="axes"), "x"))),
    (o.LogSoftmax.pattern(axis="axis"), "x"),
    STABILIZE,
    ("add(x, {n}logsumexp(x)))",),
    "x - logsumexp(x) -> log_softmax(x) for a vector x: log_softmax_from_logsumexp where the sum is a scalar",
    compute={"axis": Computed(vector_softmax_axis, inverse=vector_sum)},
    keeps_type=True,
    types=VECTOR,
)
exp_log_softmax = rule(
    "exp_log_softmax",
    (o.exp, (o.LogSoftmax.pattern(axis="axis"), "x")),
    (o.Softmax.pattern(axis="axis"), "x"),
    STABILIZE,
    examples=("exp(log_softmax(x))", "exp(log_softmax(x, axis=0))"),
    types={"x": "matrix"},
    doc="exp(log_softmax(x)) -> softmax(x) along the same axis (PyTensor's local_exp_log_softmax): one op,"
    " not rounded twice",
)

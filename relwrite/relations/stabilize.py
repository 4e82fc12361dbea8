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

from collections.abc import Iterator
from typing import Any

from relwrite.graph import ops as o
from relwrite.relations.predicates import (
    float_var,
    is_float_regroupable,
    operands_regroupable,
    same_dtype_at,
)
from relwrite.relations.registry import rule
from relwrite.relations.runtime import Computed

STABILIZE = ("stabilize", "fast_run")
EVERY_MODE = (*STABILIZE, "fast_compile")
"""Stabilizations without which a common expression overflows: they run in fast_compile too."""


# -- rules -----------------------------------------------------------------------------------------
# On a log node the specific forms come first, then log1p, which would otherwise take them.

log_one_minus_sigmoid = rule(
    "log_one_minus_sigmoid",
    (o.log, (o.add, 1, (o.neg, (o.sigmoid, "x")))),
    (o.neg, (o.softplus, "x")),
    STABILIZE,
    examples=("log(add(1, neg(sigmoid(x))))",),
    types={"x": "vector"},
    doc="log(1 - sigmoid(x)) -> -softplus(x): finite where sigmoid(x) rounds to 1",
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


log_sigmoid_neg = rule(
    "log_sigmoid_neg",
    (o.log, (o.sigmoid, (o.neg, float_var("x")))),
    (o.neg, (o.softplus, "x")),
    STABILIZE,
    examples=("log(sigmoid(neg(x)))",),
    types={"x": "vector"},
    doc="log(sigmoid(-x)) -> -softplus(x): finite where sigmoid(-x) underflows (floats only)",
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


log1p_neg_sigmoid = rule(
    "log1p_neg_sigmoid",
    (o.log1p, (o.neg, (o.sigmoid, "x"))),
    (o.neg, (o.softplus, "x")),
    STABILIZE,
    examples=("log1p(neg(sigmoid(x)))",),
    types={"x": "vector"},
    doc="log1p(-sigmoid(x)) -> -softplus(x): log_one_minus_sigmoid after log1p took the log",
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


softplus_minus_self = rule(
    "softplus_minus_self",
    (o.add, (o.neg, float_var("x")), (o.softplus, "x")),
    (o.softplus, (o.neg, "x")),
    STABILIZE,
    semantics="unsafe",
    examples=("add(neg(x), softplus(x))",),
    types={"x": "vector"},
    doc="softplus(x) - x -> softplus(-x): no cancellation for large x (floats only). Unsafe: at"
    " x = +inf the left side is inf - inf = NaN and the right side 0, as sub_self turns x - x into 0",
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

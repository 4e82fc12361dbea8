"""Specialize: replace general operations by cheaper special cases.

The rules match the canonical form canonicalize leaves (constants first in
add and mul).  Powers with a constant exponent become squares, square roots
and reciprocals; products and sums lose their neutral constants; division by
a constant becomes multiplication by its reciprocal, which constant folding
(part of this phase) then computes once.

Most rules are `exact` (docs/rule-safety.md): the right side computes its
left side's values bit for bit, infinities, NaN, the sign of zero and integer
wrap-around included.  The few that `reassociate` (x ** -2, x / c, dropping
a 0 term) say in their doc what may differ: the last place (two roundings
instead of one) or the sign of a zero.  Exponents other
than 0, 1 and 2 need a floating base: numpy refuses negative integer powers
of integers, and a fractional power of an integer is a float64 while sqrt of
it may be narrower.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable
from relwrite.relations.predicates import float_var, is_float, is_signed_regroupable, is_zero_dimensional
from relwrite.relations.registry import rule

SPECIALIZE = ("specialize", "fast_run")


def is_number(value: Any) -> bool:
    """Whether `value` is a graph variable of a number dtype (not bool: x ** 2 of a bool is an int)."""
    return isinstance(value, Variable) and value.type.numpy_dtype.kind in "iuf"


def number_var(name: str) -> dict:
    """The pattern variable `name`, accepted only for number-dtype values."""
    return {"pattern": name, "constraint": is_number}


def divides_by_invertible_constant(division: Variable) -> bool:
    """Whether `division` (x / c) divides by a constant c of its own floating dtype with a normal reciprocal.

    Then x * (1 / c) differs from x / c by at most a rounding; a subnormal or
    huge c would make 1 / c overflow or lose digits.
    """
    divisor = division.owner.inputs[1] if isinstance(division, Variable) and division.owner else None
    if not isinstance(divisor, Constant) or divisor.dtype != division.dtype or not is_float(divisor):
        return False
    with np.errstate(all="ignore"):
        inverse = np.reciprocal(divisor.data)
    return bool(np.all(np.isfinite(inverse) & (np.abs(inverse) >= np.finfo(inverse.dtype).tiny)))


# -- powers ---------------------------------------------------------------------------------------

pow_two = rule(
    "pow_two",
    (o.pow, number_var("x"), 2),
    (o.sqr, "x"),
    SPECIALIZE,
    examples=("x ** 2",),
    types={"x": "vector"},
    doc="x ** 2 -> sqr(x): one multiplication (integers wrap around the same way)",
)

pow_minus_two = rule(
    "pow_minus_two",
    (o.pow, float_var("x"), -2),
    (o.reciprocal, (o.sqr, "x")),
    SPECIALIZE,
    semantics="reassociates",
    examples=("x ** -2",),
    types={"x": "vector"},
    doc="x ** -2 -> 1 / sqr(x) (floats). Reassociates: two roundings where the power has one, so the"
    " last place may differ; infinities, zeros and NaN come out the same",
)


def _sqrt_is_numpys_half_power(x: Any) -> bool:
    """float32 and float64: NumPy computes their power of 0.5 as sqrt (-inf giving NaN, -0.0 giving -0.0);
    its float16 power does not (pow(-inf, 0.5) is +inf there, as in C99)."""
    return is_float(x) and x.dtype in ("float32", "float64")


pow_half = rule(
    "pow_half",
    (o.pow, {"pattern": "x", "constraint": _sqrt_is_numpys_half_power}, 0.5),
    (o.sqrt, "x"),
    SPECIALIZE,
    examples=("x ** 0.5",),
    types={"x": "vector"},
    doc="x ** 0.5 -> sqrt(x) (float32, float64: NumPy itself computes their power of 0.5 as sqrt, -inf"
    " giving NaN; a float16 power follows C99, +inf at -inf, and is left alone)",
)

pow_minus_half = rule(
    "pow_minus_half",
    (o.pow, float_var("x"), -0.5),
    (o.reciprocal, (o.sqrt, "x")),
    (*SPECIALIZE, "unsafe"),
    assumptions=("x > 0",),
    examples=("x ** -0.5",),
    types={"x": "vector"},
    doc="x ** -0.5 -> 1 / sqrt(x), for x > 0: at x = -0.0 the left side is +inf and the right side -inf,"
    " at x = -inf 0 and NaN",
)

pow_minus_one = rule(
    "pow_minus_one",
    (o.pow, float_var("x"), -1),
    (o.reciprocal, "x"),
    SPECIALIZE,
    examples=("x ** -1",),
    types={"x": "vector"},
    doc="x ** -1 -> reciprocal(x) (floats: numpy refuses negative integer powers of integers)",
)

pow_one = rule(
    "pow_one",
    (o.pow, number_var("x"), 1),
    "x",
    SPECIALIZE,
    examples=("x ** 1",),
    types={"x": "vector"},
    doc="x ** 1 -> x",
)


pow_zero = rule(
    "pow_zero",
    (o.pow, number_var("x"), {"pattern": 0, "constraint": is_zero_dimensional}),
    (o.fill, "x", 1),
    SPECIALIZE,
    examples=("x ** 0",),
    types={"x": "vector"},
    keeps_type=True,
    doc="""x ** 0 -> ones_like(x) (fill(x, 1)): numpy gives 1 for every base, 0, inf and NaN
    included (a 0-d zero only: an array of zeros could widen the result).""",
)


# -- products, sums and divisions --------------------------------------------------------------------

mul_self = rule(
    "mul_self",
    (o.mul, "x", "x"),
    (o.sqr, "x"),
    SPECIALIZE,
    examples=("mul(x, x)",),
    types={"x": "vector"},
    doc="x * x -> sqr(x)",
)

sqr_neg = rule(
    "sqr_neg",
    (o.sqr, (o.neg, "x")),
    (o.sqr, "x"),
    SPECIALIZE,
    examples=("sqr(neg(x))",),
    types={"x": "vector"},
    doc="sqr(-x) -> sqr(x): the negation is wasted (exact, integers included)",
)


mul_minus_one = rule(
    "mul_minus_one",
    {"pattern": (o.mul, -1, "*rest"), "constraint": is_signed_regroupable},
    (o.neg, (o.mul, "*rest")),
    SPECIALIZE,
    examples=("mul(-1, x)", "mul(-1, x, y)"),
    types={"x": "vector"},
    keeps_type=True,
    doc="""-1 * x -> -x, and -1 * a * b -> -(a * b) (signed integers and floats of one dtype:
    exact).  With mixed dtypes -1 * a can wrap around in a narrower dtype than a * b
    (`predicates.regroupable`).""",
)


one_over = rule(
    "one_over",
    (o.true_div, 1, float_var("x")),
    (o.reciprocal, "x"),
    SPECIALIZE,
    examples=("true_div(1, x)",),
    types={"x": "vector"},
    doc="1 / x -> reciprocal(x) (floats)",
)

div_by_constant = rule(
    "div_by_constant",
    {"pattern": (o.true_div, "x", "c"), "constraint": divides_by_invertible_constant},
    (o.mul, (o.reciprocal, "c"), "x"),
    SPECIALIZE,
    semantics="reassociates",
    examples=("x / 4.0", "x / 3.0"),
    types={"x": "vector"},
    doc="x / c -> (1 / c) * x for a floating constant c with a normal reciprocal; constant folding"
    " computes 1 / c once. Reassociates: exact for powers of two, else two roundings where the"
    " left side has one",
)


# -- inverse functions, with NaN kept outside their domain -----------------------------------------

NAN = float("nan")


def _nan_switch(name: str, lhs: tuple, domain: tuple, value: Any, why: str) -> Any:
    """`lhs` (a function of float x and its inverse) -> switch(domain, value, nan): NaN where `lhs` is."""
    text = _text(lhs)
    return rule(
        name,
        lhs,
        (o.switch, domain, value, NAN),
        SPECIALIZE,
        semantics="reassociates",
        examples=(text,),
        types={"x": "vector"},
        doc=f"{text} -> switch({_text(domain)}, {_text(value)}, nan) (the NaN switch of PyTensor's"
        f" local_exp_log_nan_switch): {why}.  Not unsafe: outside the domain (and at NaN) both sides are"
        " NaN.  Reassociates: the left side rounds twice, the right side at most once",
    )


def _text(pattern: Any) -> str:
    """A pattern of unary ops, add and names as the parser reads it."""
    if isinstance(pattern, str):
        return pattern
    if isinstance(pattern, dict):
        return _text(pattern["pattern"])
    if isinstance(pattern, (int, float)):
        return f"{pattern:g}"
    op, *operands = pattern
    return f"{op}({', '.join(_text(p) for p in operands)})"


ZERO_AND_UP, MINUS_ONE_AND_UP = (o.ge, "x", 0), (o.ge, "x", -1)
exp_log_nan_switch = _nan_switch(
    "exp_log_nan_switch",
    (o.exp, (o.log, float_var("x"))),
    ZERO_AND_UP,
    "x",
    "exp(log(x)) is x for x >= 0 (at x = -0.0 the left side is +0.0, the right side -0.0)",
)
expm1_log_nan_switch = _nan_switch(
    "expm1_log_nan_switch",
    (o.expm1, (o.log, float_var("x"))),
    ZERO_AND_UP,
    (o.add, -1, "x"),
    "exp(log(x)) - 1 is x - 1 for x >= 0, and x - 1 is exact near 1 (Sterbenz)",
)
exp_log1p_nan_switch = _nan_switch(
    "exp_log1p_nan_switch",
    (o.exp, (o.log1p, float_var("x"))),
    MINUS_ONE_AND_UP,
    (o.add, 1, "x"),
    "exp(log(1 + x)) is 1 + x for x >= -1",
)
expm1_log1p_nan_switch = _nan_switch(
    "expm1_log1p_nan_switch",
    (o.expm1, (o.log1p, float_var("x"))),
    MINUS_ONE_AND_UP,
    "x",
    "expm1(log1p(x)) is x for x >= -1 (simplify's expm1_log1p, opt-in, drops the switch for x >= -1)",
)
sqr_sqrt_nan_switch = _nan_switch(
    "sqr_sqrt_nan_switch",
    (o.sqr, (o.sqrt, float_var("x"))),
    ZERO_AND_UP,
    "x",
    "sqrt(x) ** 2 is x for x >= 0 (at x = -0.0 the left side is +0.0, the right side -0.0)",
)
log1mexp_log_nan_switch = _nan_switch(
    "log1mexp_log_nan_switch",
    (o.log1mexp, (o.log, float_var("x"))),
    ZERO_AND_UP,
    (o.log1p, (o.neg, "x")),
    "log(1 - exp(log(x))) is log1p(-x) for x >= 0 (above 1 both sides are NaN, at 1 both -inf)",
)

log_sqrt = rule(
    "log_sqrt",
    (o.log, (o.sqrt, float_var("x"))),
    (o.mul, 0.5, (o.log, "x")),
    SPECIALIZE,
    semantics="reassociates",
    examples=("log(sqrt(x))",),
    types={"x": "vector"},
    doc="log(sqrt(x)) -> 0.5 * log(x) (floats): no square root.  Both sides are NaN below 0, -inf at 0"
    " and -0.0, inf at inf.  Reassociates: the rounding of sqrt(x) goes, that of the product comes",
)

log_reciprocal = rule(
    "log_reciprocal",
    (o.log, (o.reciprocal, float_var("x"))),
    (o.neg, (o.log, "x")),
    (*SPECIALIZE, "unsafe"),
    assumptions=("x > 0",),
    examples=("log(reciprocal(x))",),
    types={"x": "vector"},
    doc="log(1 / x) -> -log(x) (floats): no division, and finite where 1 / x overflows (a subnormal"
    " x).  Unsafe, valid for x > 0 (and +0.0); at -0.0 1 / x is -inf and the left side NaN, the right"
    " side +inf (below 0 both are NaN)",
)

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
from relwrite.relations.predicates import (
    float_var,
    is_float,
    is_signed_regroupable,
    is_zero_dimensional,
    regroupable,
)
from relwrite.relations.registry import SPECIALIZE, rule
from relwrite.relations.runtime import Computed


def is_number(value: Any) -> bool:
    """Whether `value` is a graph variable of a number dtype (not bool: x ** 2 of a bool is an int)."""
    return isinstance(value, Variable) and value.type.numpy_dtype.kind in "iuf"


def number_var(name: str) -> dict:
    """The pattern variable `name`, accepted only for number-dtype values."""
    return {"pattern": name, "constraint": is_number}


def _constant_at(value: Any, position: int) -> bool:
    """A screen (it reads a head): operand `position` of the node computing `value` is a constant."""
    node = getattr(value, "owner", None)
    return node is None or (len(node.inputs) > position and isinstance(node.inputs[position], Constant))


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


POWER_BOUND = 512
"""The largest |n| an integer power x ** n is unrolled for (PyTensor's bound): at most 2 * 9 products."""


def integer_exponent(value: Any) -> int | None:
    """The integer a 0-d constant exponent holds (15 or 15.0), else None."""
    if not isinstance(value, Constant) or value.data.ndim or value.type.numpy_dtype.kind not in "iuf":
        return None
    number = value.data.item()
    return int(number) if np.isfinite(number) and number == int(number) else None


def _exponent_between(low: int, high: int, parity: int | None = None) -> Any:
    """A constraint: a 0-d constant exponent holding an integer in [low, high] (of that parity)."""

    def accepts(value: Any) -> bool:
        n = integer_exponent(value)
        return n is not None and low <= n <= high and (parity is None or n % 2 == parity)

    accepts.heads = (Constant,)
    return accepts


def _exponent(like: Constant, n: int) -> Constant:
    """The exponent `n` as a 0-d constant of `like`'s dtype."""
    return Constant(like.type, np.asarray(n, dtype=like.type.numpy_dtype))


def _stepped(exponent: Any, step: Any, low: int, high: int) -> Constant | None:
    """`step` of an integer `exponent` in [low, high], as a constant of its dtype; else None."""
    n = integer_exponent(exponent)
    stepped = step(n) if n is not None and low <= n <= high else None
    return None if stepped is None else _exponent(exponent, stepped)


def halved(n: Constant) -> Constant | None:
    """n // 2 for an even exponent n in [4, POWER_BOUND]."""
    return _stepped(n, lambda k: k // 2 if k % 2 == 0 else None, 4, POWER_BOUND)


def doubled(half: Constant) -> list[dict]:
    """The exponent pow_even halved into `half`."""
    n = _stepped(half, lambda k: 2 * k, 2, POWER_BOUND // 2)
    return [{"n": n}] if n is not None else []


def less_one(n: Constant) -> Constant | None:
    """n - 1 for an odd exponent n in [3, POWER_BOUND]."""
    return _stepped(n, lambda k: k - 1 if k % 2 == 1 else None, 3, POWER_BOUND)


def plus_one(less: Constant) -> list[dict]:
    """The exponent pow_odd lowered into `less`."""
    n = _stepped(less, lambda k: k + 1, 2, POWER_BOUND - 1)
    return [{"n": n}] if n is not None else []


def negated_exponent(n: Constant) -> Constant | None:
    """-n for an exponent n in [-POWER_BOUND, -3]."""
    return _stepped(n, lambda k: -k, -POWER_BOUND, -3)


def negated_back(minus: Constant) -> list[dict]:
    """The exponent pow_negative_integer negated into `minus`."""
    n = _stepped(minus, lambda k: -k, 3, POWER_BOUND)
    return [{"n": n}] if n is not None else []


pow_even = rule(
    "pow_even",
    (o.pow, number_var("x"), {"pattern": "n", "constraint": _exponent_between(4, POWER_BOUND, 0)}),
    (o.sqr, (o.pow, "x", "half")),
    SPECIALIZE,
    semantics="reassociates",
    examples=("x ** 4", "x ** 16"),
    types={"x": "vector"},
    keeps_type=True,
    compute={"half": Computed(halved, inverse=doubled)},
    doc="""x ** 2k -> sqr(x ** k) for an even integer exponent 4 <= 2k <= 512: with pow_odd and pow_two,
    repeated squaring (x ** 15 is x * sqr(x * sqr(x * sqr(x))), 6 products).  Integers wrap around
    alike (exact); floats reassociate: a product chain rounds at each step where the power rounds once.""",
)

pow_odd = rule(
    "pow_odd",
    (o.pow, number_var("x"), {"pattern": "n", "constraint": _exponent_between(3, POWER_BOUND, 1)}),
    (o.mul, "x", (o.pow, "x", "less")),
    SPECIALIZE,
    semantics="reassociates",
    examples=("x ** 3", "x ** 15"),
    types={"x": "vector"},
    keeps_type=True,
    compute={"less": Computed(less_one, inverse=plus_one)},
    doc="""x ** (2k + 1) -> x * x ** 2k for an odd integer exponent 3 <= 2k + 1 <= 512 (repeated squaring
    with pow_even).  Integers wrap around alike (exact); floats reassociate, as pow_even.""",
)

pow_negative_integer = rule(
    "pow_negative_integer",
    (o.pow, float_var("x"), {"pattern": "n", "constraint": _exponent_between(-POWER_BOUND, -3)}),
    (o.reciprocal, (o.pow, "x", "minus")),
    SPECIALIZE,
    semantics="reassociates",
    examples=("x ** -3", "x ** -15"),
    types={"x": "vector"},
    keeps_type=True,
    compute={"minus": Computed(negated_exponent, inverse=negated_back)},
    doc="""x ** -n -> 1 / x ** n for an integer 3 <= n <= 512 (floats; x ** n then unrolls by repeated
    squaring).  Reassociates: two roundings or more where the power has one, and x ** n may overflow
    (giving 0) or become subnormal where x ** -n is just finite.""",
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
    screen=lambda value: _constant_at(value, 1),
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


# -- subtraction -------------------------------------------------------------------------------------


def subtracts_exactly(x: Variable, y: Variable) -> bool:
    """Whether x - y equals x + neg(y): one dtype (a narrower integer y would wrap around in neg(y) before
    the sum widens it; `predicates.regroupable`)."""
    return regroupable((x, y))


add_neg_to_sub = rule(
    "add_neg_to_sub",
    (o.add, "x", (o.neg, "y")),
    (o.sub, "x", "y"),
    SPECIALIZE,
    examples=("add(x, neg(y))", "add(exp(x), neg(y))"),
    types={"x": "vector", "y": "vector"},
    where=subtracts_exactly,
    keeps_type=True,
    doc="""x + (-y) -> x - y for a sum of two terms: one subtraction where the canonical form has a
    negation and a sum (canonicalize makes x - y into x + (-y); specialize turns it back, as PyTensor's
    local_add_neg_to_sub does).  Exact: IEEE defines x - y as x + (-y), and integers wrap around alike.""",
)


def negated_constant(c: Constant) -> Constant | None:
    """-c for a negative 0-d float constant c (NaN and -0.0 are not negative)."""
    if not isinstance(c, Constant) or not is_float(c) or c.data.ndim or not c.data < 0:
        return None
    return Constant(c.type, np.negative(c.data))


def negated_constant_back(minus: Constant) -> list[dict]:
    """The constant add_negative_constant_to_sub negated into `minus` (a positive 0-d float constant;
    run backward over an e-graph, any other value)."""
    if not isinstance(minus, Constant) or not is_float(minus) or minus.data.ndim or not minus.data > 0:
        return []
    return [{"c": Constant(minus.type, np.negative(minus.data))}]


def constant_subtracts_exactly(c: Constant, x: Variable) -> bool:
    """Whether x - (-c) equals c + x: one dtype (`predicates.regroupable`)."""
    return regroupable((c, x))


add_negative_constant_to_sub = rule(
    "add_negative_constant_to_sub",
    (o.add, {"pattern": "c", "constraint": is_zero_dimensional}, "x"),
    (o.sub, "x", "minus"),
    SPECIALIZE,
    examples=("add(-1.0, x)", "add(-2.5, exp(x))"),
    types={"x": "vector"},
    where=constant_subtracts_exactly,
    keeps_type=True,
    compute={"minus": Computed(negated_constant, inverse=negated_constant_back)},
    doc="""(-c) + x -> x - c for a negative float constant and one other term, as PyTensor's
    local_add_neg_to_sub.  Exact (negating a float is exact).""",
    screen=lambda value: _constant_at(value, 0),
)

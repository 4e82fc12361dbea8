"""Canonicalize: simplify graphs and put them in one normal form, so later rules match structurally.

The canonical form these rules produce (stabilize and specialize rules match it):

- add and mul are variadic and flat: no operand of an add is an add, nor of a mul a mul;
- x - y is add(x, neg(y)); division stays true_div;
- the constants among an add's or mul's operands are folded into one, which
  comes first; the other operands follow in the stable order of
  `goals.canonical_key` (so 1 + x is add(1, x) and exp(x) - 1 is add(-1, exp(x)));
  constants whose folding would overflow or underflow stay apart, the first
  leading and the others last (``1e200 * x * 1e200`` is left as it is);
- x + 0, x * 1, x / 1, -(-x) are gone; like terms are collected (x + x is
  mul(2, x)), like factors too (x * x is pow(x, 2)); mul(-1, x) stays as it
  is (specialize turns it into neg(x)).

Associativity and commutativity never go through kanren's `eq_assoccomm`:
the operand-list goals of `relwrite.relations.goals` flatten, sort and
regroup operand tuples in polynomial time, so every rule matches the
canonical form structurally.  Those goals act on operands of one dtype only
(`predicates.regroupable`): regrouping integers of mixed widths would change where
they wrap around.

Each rule's `semantics` (docs/rule-safety.md) says what it preserves.
Flattening, sorting, folding constants and collecting like terms
`reassociate`: equal over the reals, they may round differently in floating
point, and an intermediate may overflow or underflow where the original
order's did not (``x * y * x`` -> ``y * x ** 2`` at x = 1e200, y = 1e-200).
Integers wrap around the same way in every order, so for them these rules are
exact.  Rules tagged `unsafe` are valid only under their assumptions and where
their inputs and left side are finite: they may turn a NaN or an infinity
into a number.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from kanren.core import eq
from unification import var

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.types import TensorType
from relwrite.relations.goals import (
    Goal,
    along,
    cancelledo,
    choiceo,
    conj,
    flatteno,
    foldedo,
    involutiono,
    like_factorso,
    like_termso,
    mappingo,
    node_mappingo,
    nodeo,
    operandso,
    replaceableo,
    rewrite_operandso,
    sortedo,
)
from relwrite.relations.operands import (
    constant_result,
    divided_out,
    holds_constants,
    holds_variables,
    is_neutral_of,
    neutral_drops,
    reads,
    rest_regroupable,
    shaped_within,
    variadic_applied,
)
from relwrite.relations.predicates import (
    broadcasts_into,
    equals_everywhere,
    filled_constant,
    float_var,
    is_float,
    is_zero_dimensional,
    node_inputs,
    same_dtype_at,
    signed_var,
)
from relwrite.relations.registry import relation, rule

CANON = ("canonicalize", "fast_run", "fast_compile")
UNSAFE = (*CANON, "unsafe")


# -- neutral elements (first: dropping an operand is cheaper than sorting it) ---------------------


NEUTRALS = (*CANON, "specialize")
"""Dropping neutral elements serves canonicalize and specialize (for the ones constant folding leaves)."""

add_zero = rule(
    "add_zero",
    (o.add, {"pattern": 0, "constraint": is_zero_dimensional}, "*rest"),
    (o.add, "*rest"),
    NEUTRALS,
    semantics="reassociates",
    examples=("x + 0", "add(0, x, y)"),
    types={"x": "vector"},
    where=rest_regroupable,
    keeps_type=True,
    doc="""x + 0 -> x: a 0-d zero among the terms goes (where it would widen the dtype, or the
    other terms have several dtypes, the rule does not apply).  Reassociates, for the sign of a
    zero only: where the other terms are all -0.0 the left side is +0.0 (the sign IEEE gives an
    exact zero sum) and the right side -0.0; every other value is kept exactly.""",
)

mul_one = rule(
    "mul_one",
    (o.mul, {"pattern": 1, "constraint": is_zero_dimensional}, "*rest"),
    (o.mul, "*rest"),
    NEUTRALS,
    examples=("x * 1", "mul(1, x, y)"),
    types={"x": "vector"},
    where=rest_regroupable,
    keeps_type=True,
    doc="""x * 1 -> x: a 0-d one among the factors goes (where it would widen the dtype, or the
    other factors have several dtypes, the rule does not apply).  Exact: x * 1 is x for every
    x, NaN, infinities and -0.0 included.""",
)

add_of_one_term = rule(
    "add_of_one_term",
    (o.add, "x"),
    "x",
    NEUTRALS,
    examples=("add(x)",),
    types={"x": "vector"},
    doc="add(x) -> x: a sum of one term is the term.",
)

mul_of_one_factor = rule(
    "mul_of_one_factor",
    (o.mul, "x"),
    "x",
    NEUTRALS,
    examples=("mul(x)",),
    types={"x": "vector"},
    doc="mul(x) -> x: a product of one factor is the factor.",
)


# -- flattening, constants and order --------------------------------------------------------------


@relation(
    CANON,
    semantics="reassociates",
    tracks=(o.add,),
    examples=("add(x, add(y, z))", "(x + y) + (z + w)"),
    screen=reads(o.add),
    idempotent=True,
)
def flatten_add(lhs: Any, rhs: Any) -> Goal:
    """add(a, add(b, c), d) -> add(a, b, c, d): nested sums spliced into one (backward: re-nested).

    Reassociates: a + (b + c) becomes (a + b) + c.
    """
    return rewrite_operandso(o.add, lhs, rhs, partial(flatteno, o.add))


@relation(
    CANON,
    semantics="reassociates",
    tracks=(o.mul,),
    examples=("mul(x, mul(y, z))", "(x * y) * (z * w)"),
    screen=reads(o.mul),
    idempotent=True,
)
def flatten_mul(lhs: Any, rhs: Any) -> Goal:
    """mul(a, mul(b, c), d) -> mul(a, b, c, d): nested products spliced into one (backward: re-nested).

    Reassociates: a * (b * c) becomes (a * b) * c.
    """
    return rewrite_operandso(o.mul, lhs, rhs, partial(flatteno, o.mul))


@relation(
    CANON,
    semantics="reassociates",
    tracks=(o.add,),
    backward="a folded constant does not say which constants it came from",
    examples=("add(2, x, 3)", "add(x, 1, 2, y)"),
    screen=holds_constants,
    idempotent=True,
)
def fold_add_constants(lhs: Any, rhs: Any) -> Goal:
    """add(2, x, 3) -> add(5, x): the constant terms of a sum folded into one, first.

    Reassociates: the constants are added before the other terms.  Integers
    fold in their dtype, wrapping around as the graph would; a float fold that
    overflows or is invalid (inf - inf) is refused (`goals.foldedo`).
    """
    return rewrite_operandso(o.add, lhs, rhs, partial(foldedo, o.add))


@relation(
    CANON,
    semantics="reassociates",
    tracks=(o.mul,),
    backward="a folded constant does not say which constants it came from",
    examples=("mul(2, x, 3)", "mul(x, 2, 0.5, y)"),
    screen=holds_constants,
    idempotent=True,
)
def fold_mul_constants(lhs: Any, rhs: Any) -> Goal:
    """mul(2, x, 3) -> mul(6, x): the constant factors of a product folded into one, first.

    Reassociates: the constants are multiplied before the other factors.
    Integers fold in their dtype, wrapping around as the graph would; a float
    fold that overflows, underflows or is invalid (inf * 0) is refused, so
    ``1e200 * x * 1e200`` never becomes ``inf * x`` (`goals.foldedo`).
    """
    return rewrite_operandso(o.mul, lhs, rhs, partial(foldedo, o.mul))


@relation(
    CANON,
    semantics="reassociates",
    tracks=(o.add,),
    examples=("y + x", "add(exp(x), 1)", "add(x, 2, y)"),
    idempotent=True,
)
def sort_add(lhs: Any, rhs: Any) -> Goal:
    """add(y, x, 1) -> add(1, x, y): constants first, then the stable order of `canonical_key`.

    Reassociates: with three or more terms the sum is taken in another order
    (of two, exactly: x + y is y + x).  Backward: the rotations of the
    operands that sort back to the same order.
    """
    return rewrite_operandso(o.add, lhs, rhs, sortedo)


@relation(
    CANON,
    semantics="reassociates",
    tracks=(o.mul,),
    examples=("y * x", "mul(exp(x), 2)", "mul(x, 2, y)"),
    idempotent=True,
)
def sort_mul(lhs: Any, rhs: Any) -> Goal:
    """mul(y, x, 2) -> mul(2, x, y): constants first, then the stable order of `canonical_key`.

    Reassociates: with three or more factors the product is taken in another
    order (of two, exactly).  Backward: the rotations of the operands that
    sort back to the same order.
    """
    return rewrite_operandso(o.mul, lhs, rhs, sortedo)


# -- neutral elements shaped by fills (after the order: rarely there, so tried last) -------------

add_zeros_like = rule(
    "add_zeros_like",
    (o.add, {"pattern": "neutral", "constraint": is_neutral_of(o.add)}, "*rest"),
    (o.add, "*rest"),
    NEUTRALS,
    semantics="reassociates",
    where=neutral_drops(o.add),
    examples=("add(fill(x, 0), x)", "add(fill(x, 0), x, y)"),
    types={"x": "vector", "y": "vector"},
    keeps_type=True,
    doc="""fill(x, 0) + x -> x: zeros shaped like the other terms (as cancelling rules leave
    them) go when their shape provably never widens the sum.  Reassociates, as add_zero.""",
)

mul_ones_like = rule(
    "mul_ones_like",
    (o.mul, {"pattern": "neutral", "constraint": is_neutral_of(o.mul)}, "*rest"),
    (o.mul, "*rest"),
    NEUTRALS,
    where=neutral_drops(o.mul),
    examples=("mul(fill(x, 1), x)", "mul(fill(x, 1), x, y)"),
    types={"x": "vector", "y": "vector"},
    keeps_type=True,
    doc="""fill(x, 1) * x -> x: ones shaped like the other factors go when their shape provably
    never widens the product.  Exact.""",
)


# -- negation and subtraction ----------------------------------------------------------------------

neg_neg = rule(
    "neg_neg",
    (o.neg, (o.neg, "x")),
    "x",
    CANON,
    examples=("-(-x)",),
    doc="-(-x) -> x (exact; two's complement negation is an involution too)",
)

neg_div_neg = rule(
    "neg_div_neg",
    (o.true_div, (o.neg, float_var("x")), (o.neg, float_var("y"))),
    (o.true_div, "x", "y"),
    CANON,
    examples=("(-x) / (-y)",),
    doc="(-x) / (-y) -> x / y (floats: negating an integer may wrap around)",
)


def negates_exactly(difference: Variable) -> bool:
    """Whether x - y (this node) equals x + neg(y): y is a float or already has the result's dtype.

    neg of a narrower integer wraps around before the subtraction would widen it.
    """
    y = difference.owner.inputs[1]
    return is_float(y) or y.dtype == difference.dtype


sub_to_add_neg = rule(
    "sub_to_add_neg",
    {"pattern": (o.sub, "x", "y"), "constraint": negates_exactly},
    (o.add, "x", (o.neg, "y")),
    CANON,
    examples=("x - y", "exp(x) - 1"),
    doc="x - y -> x + neg(y): subtraction becomes addition, so sums have one form (constant folding"
    " then turns neg(c) into -c)",
)

sub_self = rule(
    "sub_self",
    (o.sub, float_var("x"), "x"),
    (o.fill, "x", 0),
    UNSAFE,
    examples=("x - x",),
    doc="x - x -> zeros shaped like x (floats). Unsafe: inf - inf and NaN - NaN are NaN, so valid where"
    " x is finite (integers go through collect_terms, exactly)",
)


@relation(CANON, tracks=(o.neg,), examples=("-(2 * x)", "-(mul(3, x, y))"))
def neg_mul_constant(lhs: Any, rhs: Any) -> Goal:
    """-(c * x...) -> (-c) * x...: a negated product with a leading constant takes the sign into it."""
    product, factors, negated = var(prefix="product"), var(prefix="factors"), var(prefix="negated")
    return conj(
        along(
            lhs,
            operandso(lhs, o.neg, (product,)),
            operandso(product, o.mul, factors),
            involutiono(factors, negated, negated_leading_constant),
            operandso(rhs, o.mul, negated),
        ),
        replaceableo(lhs, rhs),
    )


def negated_leading_constant(factors: Any) -> tuple | None:
    """The factors with their leading constant negated, when it has the product's dtype (an integer's
    negation wraps around as the graph's would: `constant_result`)."""
    if not isinstance(factors, tuple) or len(factors) < 2 or not isinstance(factors[0], Constant):
        return None
    if not all(isinstance(f, Variable) for f in factors[1:]):
        return None
    dtype = o.mul.output_dtype([f.dtype for f in factors])
    if factors[0].dtype != dtype or factors[0].type.numpy_dtype.kind not in "iuf":
        return None
    value = constant_result(np.negative, [factors[0].data], dtype, wraps=True)
    return (Constant(factors[0].type, value), *factors[1:])


@relation(
    UNSAFE,
    tracks=(o.mul,),
    backward="the factors multiplied by zero are lost",
    examples=("x * 0", "mul(0, x, y)"),
)
def mul_zero(lhs: Any, rhs: Any) -> Goal:
    """x * 0 -> zeros of the product's shape and dtype (unsafe: 0 * inf is NaN, so valid where x is finite).

    A zero filled to some shape (as x - x leaves) counts as zero too.
    """
    return node_mappingo(lhs, rhs, o.mul, lambda found: zeros_of_product(found[1]))


def zeros_of_product(factors: Any) -> Variable | None:
    """Zeros shaped like the product of `factors` when one is zero (a constant, maybe filled), else None.

    The zeros take the product's dtype and are broadcast (`fill`) against
    each factor, or model of a filled zero, that could widen them.
    """
    if not isinstance(factors, tuple) or not all(isinstance(f, Variable) for f in factors):
        return None
    models, shapes, zero = [], [], False
    for factor in factors:
        layers = filled_constant(factor)
        if layers is None:
            models.append(factor)
            continue
        models += layers[0]
        shapes.append(layers[1].data.shape)
        zero = zero or equals_everywhere(layers[1], 0)
    if not zero:
        return None
    dtype = o.mul.output_dtype([f.dtype for f in factors])
    shape = np.broadcast_shapes(*shapes)
    zeros: Variable = Constant(TensorType(dtype, shape), np.zeros(shape, dtype=dtype))
    used: list[Variable] = []
    for model in models:
        if not broadcasts_into(model, zeros) and not any(model is u for u in used):
            zeros = o.fill(model, zeros)
            used.append(model)
    return zeros


div_one = rule(
    "div_one",
    {"pattern": (o.true_div, "x", 1), "constraint": same_dtype_at(0)},
    "x",
    CANON,
    examples=("x / 1",),
    doc="x / 1 -> x (when x already has the quotient's dtype; exact)",
)

div_self = rule(
    "div_self",
    (o.true_div, float_var("x"), "x"),
    (o.fill, "x", 1),
    UNSAFE,
    assumptions=("x != 0",),
    examples=("x / x",),
    doc="x / x -> ones shaped like x (floats; unsafe: 0 / 0 and inf / inf are NaN, so valid for finite"
    " x != 0)",
)


# -- cancelling factors ----------------------------------------------------------------------------


@relation(
    UNSAFE,
    tracks=(o.true_div,),
    assumptions=("y != 0",),
    backward="the divisor is not determined by the quotient",
    examples=("(x * y) / y", "(y * x) / y", "mul(x, y, z) / y"),
)
def mul_div_cancel(lhs: Any, rhs: Any) -> Goal:
    """(x * y) / y -> x and (y * x) / y -> x: the divisor cancels one equal factor, at any position.

    Floats; unsafe: at y = 0 or y = inf the left side is NaN, so valid for finite
    y != 0.  Ones shaped like y stay where y could widen the result.
    """
    return node_mappingo(lhs, rhs, o.true_div, _cancelled_quotient)


def _cancelled_quotient(found: tuple[Op, tuple]) -> Variable | None:
    """mul(*factors) / y with one factor y divided out (`divided_out`), or None."""
    numerator, divisor = found[1]
    factors = node_inputs(numerator, o.mul) if isinstance(numerator, Variable) else None
    kept = divided_out((divisor, factors)) if factors is not None else None
    return variadic_applied(o.mul, kept) if kept else None


@relation(
    UNSAFE,
    tracks=(o.mul,),
    assumptions=("x != 0",),
    backward="the cancelled factor is gone",
    examples=("x * (z / x)", "mul(x, reciprocal(x), z)", "mul(y, z / x, x)"),
)
def mul_cancel(lhs: Any, rhs: Any) -> Goal:
    """x * (z / x) -> z and x * reciprocal(x) * z -> z, anywhere in a flat product.

    Floats; unsafe: at x = 0 or x = inf the left side is NaN, so valid for
    finite x != 0.  Ones shaped like x stay where x could widen the result.
    """
    return rewrite_operandso(o.mul, lhs, rhs, cancelledo)


# -- like terms and like factors -------------------------------------------------------------------


@relation(
    CANON,
    semantics="reassociates",
    tracks=(o.add,),
    backward="a collected coefficient does not say how it was split",
    examples=("x + x", "add(mul(2, x), mul(3, x))", "add(x, y, mul(2, x))", "add(neg(x), neg(x))"),
    screen=holds_variables,
)
def collect_terms(lhs: Any, rhs: Any) -> Goal:
    """x + x -> 2 * x, 3*x + x -> 4 * x: like terms gathered.

    Within a wider sum a group is gathered unless that adds a node: y + x + x
    stays (y + 2*x would take a product more), y + 2*x + x becomes y + 3*x.
    Reassociates: c1*x + c2*x becomes (c1 + c2)*x, which may round
    differently, and the remaining terms are added in another order.  Floats
    only when the coefficients are finite and nonzero with one sign, so
    infinities and NaN come out the same; integers always (exactly).
    """
    return rewrite_operandso(o.add, lhs, rhs, like_termso)


@relation(
    UNSAFE,
    tracks=(o.add,),
    backward="a collected coefficient does not say how it was split",
    examples=("add(x, neg(x))", "add(mul(3, x), neg(x))", "add(y, x, mul(-1, x))"),
    screen=holds_variables,
)
def collect_terms_cancelling(lhs: Any, rhs: Any) -> Goal:
    """x + (-x) -> 0, 3*x - x -> 2 * x: like float terms whose coefficients differ in sign.

    Unsafe: inf - inf is NaN where 2 * inf is not, so valid where the terms
    are finite; a sum that cancels leaves zeros shaped like the terms.
    """
    return rewrite_operandso(o.add, lhs, rhs, partial(like_termso, cancelling=True))


@relation(
    CANON,
    semantics="reassociates",
    tracks=(o.mul,),
    backward="a collected exponent does not say how it was split",
    examples=("x * x", "mul(x ** 2, x)", "mul(x ** 2, y, x)"),
    screen=holds_variables,
)
def collect_factors(lhs: Any, rhs: Any) -> Goal:
    """x * x -> x ** 2, x ** 2 * x -> x ** 3: like factors with positive integer exponents.

    Within a wider product a group is gathered only where one of its factors
    is already a power: x * y * x stays (y * x ** 2 would take a node more).

    Reassociates: x * y * x becomes y * x ** 2, which at x = 1e200,
    y = 1e-200 overflows (inf) where the left side gives 1e200, and a power
    rounds once where repeated products round each time.  Exact for integers,
    where the collected exponent fits the dtype: an exponent counts, it does
    not wrap around (int8 x ** 127 * x stays; x ** -128 is another power).
    """
    return rewrite_operandso(o.mul, lhs, rhs, like_factorso)


@relation(
    UNSAFE,
    tracks=(o.mul,),
    assumptions=("x > 0",),
    backward="a collected exponent does not say how it was split",
    examples=("mul(x ** 0.5, x ** 0.5)", "mul(x ** y, x)", "mul(x ** -1, x ** 3)"),
    screen=holds_variables,
)
def collect_factors_general(lhs: Any, rhs: Any) -> Goal:
    """x ** a * x -> x ** (a + 1), x ** a * x ** b -> x ** (a + b) for other exponents (floats).

    Unsafe, valid for x > 0: at x = 0, 0 ** -1 * 0 is NaN while 0 ** 0 is 1;
    for x < 0 a fractional power is NaN.
    """
    return rewrite_operandso(o.mul, lhs, rhs, partial(like_factorso, general=True))


# -- inverse functions -----------------------------------------------------------------------------

exp_log = rule(
    "exp_log",
    {"pattern": (o.exp, (o.log, "x")), "constraint": same_dtype_at(0, 0)},
    "x",
    UNSAFE,
    assumptions=("x > 0",),
    examples=("exp(log(x))",),
    doc="exp(log(x)) -> x; unsafe, valid for x > 0 (elsewhere the left side is NaN)",
)

sqr_sqrt = rule(
    "sqr_sqrt",
    {"pattern": (o.sqr, (o.sqrt, "x")), "constraint": same_dtype_at(0, 0)},
    "x",
    UNSAFE,
    assumptions=("x >= 0",),
    examples=("sqr(sqrt(x))",),
    doc="sqr(sqrt(x)) -> x; unsafe, valid for x >= 0 (elsewhere the left side is NaN)",
)

abs_abs = rule(
    "abs_abs",
    (o.abs, (o.abs, "x")),
    (o.abs, "x"),
    CANON,
    examples=("abs(abs(x))",),
    doc="abs(abs(x)) -> abs(x)",
)

abs_neg = rule(
    "abs_neg",
    (o.abs, (o.neg, signed_var("x"))),
    (o.abs, "x"),
    CANON,
    examples=("abs(-x)",),
    doc="abs(-x) -> abs(x) (signed dtypes: an unsigned negation wraps around; exact, the most negative"
    " integer included)",
)


# -- useless ops -----------------------------------------------------------------------------------

useless_identity = rule("useless_identity", (o.identity, "x"), "x", CANON, examples=("identity(x)",))


def model_fits(filled: Variable) -> bool:
    """Whether fill(model, value) (this node) is `value` itself: the model cannot widen it."""
    model, value = filled.owner.inputs
    return shaped_within((model,), (value,))


useless_fill = rule(
    "useless_fill",
    {"pattern": (o.fill, "model", "value"), "constraint": model_fits},
    "value",
    CANON,
    examples=("fill(x, y)", "fill(m, y)"),
    types={"y": "matrix", "m": "(1,)"},
    doc="fill(model, value) -> value when static shapes prove the model does not widen the value",
)


def useless_op(lhs: Any, rhs: Any, kind: type, options: Any) -> Goal:
    """lhs applies an op of class `kind` to x, one of the `options(x)` that return x unchanged; rhs is x."""
    op, x = var(prefix="op"), var(prefix="x")
    return along(lhs, nodeo(lhs, kind, op, (x,)), choiceo(op, options, x), eq(x, rhs))


def identity_dimshuffles(x: Variable) -> list[o.DimShuffle]:
    return [o.DimShuffle(x.ndim, tuple(range(x.ndim)))]


def identity_casts(x: Variable) -> list[o.Cast]:
    return [o.Cast(x.dtype)]


def identity_allocs(x: Variable) -> list[o.Alloc]:
    shape = x.type.shape
    return [o.Alloc(shape)] if None not in shape else []


def identity_reshapes(x: Variable) -> list[o.Reshape]:
    """The reshapes static shapes prove to keep `x` as it is (one length may be -1)."""
    shape = x.type.shape
    unknown = [axis for axis, length in enumerate(shape) if length is None]
    if len(unknown) > 1:
        return []
    if unknown:
        return [o.Reshape(tuple(-1 if length is None else length for length in shape))]
    return [
        o.Reshape(shape),
        *(o.Reshape((*shape[:axis], -1, *shape[axis + 1 :])) for axis in range(len(shape))),
    ]


@relation(CANON, tracks=(o.DimShuffle,), examples=("transpose(x)",), types={"x": "vector"})
def useless_dimshuffle(lhs: Any, rhs: Any) -> Goal:
    """A DimShuffle keeping every axis in place (the transpose of a vector) -> its input."""
    return useless_op(lhs, rhs, o.DimShuffle, identity_dimshuffles)


@relation(CANON, tracks=(o.Cast,), examples=('x.astype("float64")',))
def useless_cast(lhs: Any, rhs: Any) -> Goal:
    """A cast to the dtype its input already has -> the input."""
    return useless_op(lhs, rhs, o.Cast, identity_casts)


@relation(CANON, tracks=(o.Alloc,), examples=("alloc(x, 2, 3)",), types={"x": "(2, 3)"})
def useless_alloc(lhs: Any, rhs: Any) -> Goal:
    """Alloc(shape)(x) -> x when x's static shape is exactly `shape`."""
    return useless_op(lhs, rhs, o.Alloc, identity_allocs)


@relation(
    CANON,
    tracks=(o.Reshape,),
    examples=("x.reshape(2, 3)", "v.reshape(-1)"),
    types={"x": "(2, 3)", "v": "vector"},
)
def useless_reshape(lhs: Any, rhs: Any) -> Goal:
    """Reshape(shape)(x) -> x when static shapes prove the shape unchanged."""
    return useless_op(lhs, rhs, o.Reshape, identity_reshapes)


# -- chains of shape ops ---------------------------------------------------------------------------


@relation(
    CANON,
    tracks=(o.DimShuffle,),
    backward="a DimShuffle has many factorisations",
    examples=("transpose(transpose(A))", "transpose(transpose(t))"),
    types={"A": "matrix", "t": "(2, None, 3)"},
)
def dimshuffle_chain(lhs: Any, rhs: Any) -> Goal:
    """DimShuffle(DimShuffle(x)) -> one DimShuffle of x, or x itself (the transpose of a transpose)."""
    outer, inner, middle, x = var(prefix="outer"), var(prefix="inner"), var(prefix="middle"), var(prefix="x")
    return conj(
        nodeo(lhs, o.DimShuffle, outer, (middle,)),
        nodeo(middle, o.DimShuffle, inner, (x,)),
        mappingo((inner, outer, x), rhs, composed_dimshuffle),
        replaceableo(lhs, rhs),
    )


def composed_dimshuffle(parts: tuple) -> Variable | None:
    """The DimShuffle doing `inner` then `outer` applied to x (x itself when it moves nothing)."""
    inner, outer, x = parts
    order = tuple("x" if axis == "x" else inner.new_order[axis] for axis in outer.new_order)
    if order == tuple(range(x.ndim)):
        return x
    try:
        return o.DimShuffle(x.ndim, order)(x)
    except (TypeError, ValueError):
        return None


@relation(
    CANON,
    tracks=(o.Reshape,),
    backward="the intermediate shape is lost",
    examples=("x.reshape(3, 2).reshape(6)",),
    types={"x": "(2, 3)"},
)
def reshape_chain(lhs: Any, rhs: Any) -> Goal:
    """Reshape(s2)(Reshape(s1)(x)) -> Reshape(s2)(x) (with -1 resolved when the static shape is known)."""
    outer, inner, middle, x = var(prefix="outer"), var(prefix="inner"), var(prefix="middle"), var(prefix="x")
    return conj(
        nodeo(lhs, o.Reshape, outer, (middle,)),
        nodeo(middle, o.Reshape, inner, (x,)),
        mappingo((lhs, outer, x), rhs, reshaped_once),
        replaceableo(lhs, rhs),
    )


def reshaped_once(parts: tuple) -> Variable | None:
    lhs, outer, x = parts
    shape = lhs.type.shape if None not in lhs.type.shape else outer.shape
    try:
        return o.Reshape(shape)(x)
    except (TypeError, ValueError):
        return None


# -- reductions ------------------------------------------------------------------------------------


def hoisted_scalars(constants_only: bool, lhs: Any) -> Variable | None:
    """sum(c * t) as c * sum(t), for the 0-d factors c of the product (finite constants when asked)."""
    if not isinstance(lhs, Variable) or lhs.owner is None or not isinstance(lhs.owner.op, o.Sum):
        return None
    product = lhs.owner.inputs[0]
    if product.owner is None or product.owner.op != o.mul or product.dtype != lhs.dtype:
        return None
    factors = product.owner.inputs
    if any(f.dtype != lhs.dtype for f in factors):
        return None

    def hoisted(f: Variable) -> bool:
        if f.ndim != 0:
            return False
        return not constants_only or (isinstance(f, Constant) and bool(np.all(np.isfinite(f.data))))

    scalars = [f for f in factors if hoisted(f)]
    tensors = [f for f in factors if not hoisted(f)]
    if not scalars or not tensors:
        return None
    inner = tensors[0] if len(tensors) == 1 else o.mul(*tensors)
    return o.mul(*scalars, lhs.owner.op(inner))


def sunk_scalars(rhs: Any) -> list[Variable]:
    """The left sides `hoisted_scalars` may have come from: the scalars moved back under the sum."""
    if not isinstance(rhs, Variable) or rhs.owner is None or rhs.owner.op != o.mul:
        return []
    factors = rhs.owner.inputs
    sums = [f for f in factors if f.owner is not None and isinstance(f.owner.op, o.Sum)]
    if len(sums) != 1 or any(f.ndim != 0 for f in factors if f is not sums[0]):
        return []
    reduction, (summed,) = sums[0].owner.op, sums[0].owner.inputs
    scalars = [f for f in factors if f is not sums[0]]
    candidates = [[*scalars, summed]]
    if summed.owner is not None and summed.owner.op == o.mul:
        candidates.insert(0, [*scalars, *summed.owner.inputs])
    return [reduction(o.mul(*c)) for c in candidates]


@relation(
    CANON,
    semantics="reassociates",
    tracks=(o.Sum,),
    examples=("sum(2 * v)", "sum(mul(2, v, w), axis=0)"),
    types={"v": "vector", "w": "vector"},
)
def sum_scalar_mul(lhs: Any, rhs: Any) -> Goal:
    """sum(c * t) -> c * sum(t) for finite 0-d constants c (any axes).

    Reassociates: the sum of the products rounds differently from the product
    of the sum, and sum(t) may overflow where sum(c * t) does not (c < 1);
    NaN and infinite elements of t propagate as before.
    """
    return conj(mappingo(lhs, rhs, partial(hoisted_scalars, True), sunk_scalars), replaceableo(lhs, rhs))


@relation(UNSAFE, tracks=(o.Sum,), examples=("sum(c * v)", "sum(mul(c, v), axis=0)"), types={"v": "matrix"})
def sum_scalar_mul_general(lhs: Any, rhs: Any) -> Goal:
    """sum(c * t) -> c * sum(t) for any 0-d factor c (unsafe: at c = inf, a zero in t makes NaN inf)."""
    return conj(mappingo(lhs, rhs, partial(hoisted_scalars, False), sunk_scalars), replaceableo(lhs, rhs))

"""Simplify: algebraic identities beyond the canonical form (comparisons, extrema, signs, fills, sums).

Each rule is one declaration: a pattern pair, with guards or computed values
where a pattern alone cannot say it; it runs in the directions its declaration
allows.  Most are `exact` (the same values, NaN, infinities and the sign of zero
included); those that only hold for some dtypes say so with a constraint
(``x <= x`` is True for integers, not for a float NaN).  Rules that drop a
broadcasting operand (a `fill`, a constant condition) declare `keeps_type`
or a `where` guard proving the shapes, so a result never changes its shape.
The `unsafe` rules hold under their assumptions only and are opt-in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache, reduce
from typing import Any

import numpy as np

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable, constant
from relwrite.graph.types import broadcast_shapes
from relwrite.relations.operands import same_graph, shaped_within
from relwrite.relations.predicates import (
    fits,
    float_var,
    literal_value,
    operands_regroupable,
    operands_reorderable,
)
from relwrite.relations.registry import CANON, UNSAFE, Rule, rule

VECTOR = {"x": "vector"}
PAIR = {"x": "vector", "y": "vector"}
TRUE, FALSE = constant(np.True_), constant(np.False_)


def is_exact_number(value: Any) -> bool:
    """Whether `value` is a graph variable of an integer or bool dtype (x == x holds: no NaN)."""
    return isinstance(value, Variable) and value.type.numpy_dtype.kind in "iub"


def exact_var(name: str) -> dict:
    """The pattern variable `name`, accepted only for integer or bool values."""
    return {"pattern": name, "constraint": is_exact_number}


# -- extrema and comparisons of a value with itself -------------------------------------------------

maximum_self = rule(
    "maximum_self", (o.maximum, "x", "x"), "x", CANON, types=VECTOR, doc="maximum(x, x) -> x (exact, NaN too)"
)
minimum_self = rule(
    "minimum_self", (o.minimum, "x", "x"), "x", CANON, types=VECTOR, doc="minimum(x, x) -> x (exact, NaN too)"
)
lt_self = rule(
    "lt_self",
    (o.lt, "x", "x"),
    (o.fill, "x", FALSE),
    CANON,
    examples=("x < x",),
    types=VECTOR,
    doc="x < x -> False, shaped like x (exact: NaN < NaN is False too)",
)
gt_self = rule(
    "gt_self",
    (o.gt, "x", "x"),
    (o.fill, "x", FALSE),
    CANON,
    examples=("x > x",),
    types=VECTOR,
    doc="x > x -> False, shaped like x (exact: NaN > NaN is False too)",
)
le_self = rule(
    "le_self",
    (o.le, exact_var("x"), "x"),
    (o.fill, "x", TRUE),
    CANON,
    examples=("x <= x",),
    types={"x": "vector:int32"},
    doc="x <= x -> True for integers and bools (a float NaN is not <= itself)",
)
ge_self = rule(
    "ge_self",
    (o.ge, exact_var("x"), "x"),
    (o.fill, "x", TRUE),
    CANON,
    examples=("x >= x",),
    types={"x": "vector:int32"},
    doc="x >= x -> True for integers and bools (a float NaN is not >= itself)",
)
eq_self = rule(
    "eq_self",
    (o.eq, exact_var("x"), "x"),
    (o.fill, "x", TRUE),
    CANON,
    examples=("x == x",),
    types={"x": "vector:int64"},
    doc="x == x -> True for integers and bools (a float NaN differs from itself)",
)
neq_self = rule(
    "neq_self",
    (o.neq, exact_var("x"), "x"),
    (o.fill, "x", FALSE),
    CANON,
    examples=("x != x",),
    types={"x": "vector:int64"},
    doc="x != x -> False for integers and bools (a float NaN differs from itself)",
)

# -- switch with a known condition or equal branches ------------------------------------------------

_SWITCH_TYPES = {"c": "(3,):bool", "a": "(3,)", "b": "(3,)"}


def b_fits_a(a: Variable, b: Variable) -> bool:
    """Whether the dropped branch `b` provably adds nothing to `a`'s shape."""
    return same_graph(a, b) or fits(b.type.shape, a.type.shape)


def a_fits_b(a: Variable, b: Variable) -> bool:
    """Whether the dropped branch `a` provably adds nothing to `b`'s shape."""
    return b_fits_a(b, a)


def condition_fits(c: Variable, a: Variable) -> bool:
    """Whether the dropped condition `c` provably adds nothing to `a`'s shape."""
    return same_graph(c, a) or fits(c.type.shape, a.type.shape)


switch_true = rule(
    "switch_true",
    (o.switch, TRUE, "a", "b"),
    "a",
    CANON,
    keeps_type=True,
    where=b_fits_a,
    examples=("switch(True, a, b)",),
    types=_SWITCH_TYPES,
    doc="switch(True, a, b) -> a, where a alone has the result's dtype and shape (exact)",
)
switch_false = rule(
    "switch_false",
    (o.switch, FALSE, "a", "b"),
    "b",
    CANON,
    keeps_type=True,
    where=a_fits_b,
    examples=("switch(False, a, b)",),
    types=_SWITCH_TYPES,
    doc="switch(False, a, b) -> b, where b alone has the result's dtype and shape (exact)",
)
switch_same = rule(
    "switch_same",
    (o.switch, "c", "a", "a"),
    "a",
    CANON,
    keeps_type=True,
    where=condition_fits,
    examples=("switch(c, a, a)",),
    types=_SWITCH_TYPES,
    doc="switch(c, a, a) -> a, where the condition does not widen the shape (exact)",
)


def inner_branch_absorbed(c: Variable, a: Variable, b: Variable, d: Variable) -> bool:
    """Whether the inner switch's dropped branch `b` adds nothing to the shape c, a and d give."""
    return shaped_within((b,), (c, a, d))


_MERGE_TYPES = {"c": "(3,):bool", "a": "(3,)", "b": "(3,)", "d": "(3,)"}

switch_merge_then = rule(
    "switch_merge_then",
    (o.switch, "c", (o.switch, "c", "a", "b"), "d"),
    (o.switch, "c", "a", "d"),
    CANON,
    keeps_type=True,
    where=inner_branch_absorbed,
    examples=("switch(c, switch(c, a, b), d)",),
    types=_MERGE_TYPES,
    doc="""switch(c, switch(c, a, b), d) -> switch(c, a, d): where c holds, the inner switch takes a
    (PyTensor's local_merge_switch_same_cond).  Where b adds nothing to the shape and the dtype stays
    (exact: a reaches the result's dtype by safe casts either way).""",
)
switch_merge_else = rule(
    "switch_merge_else",
    (o.switch, "c", "a", (o.switch, "c", "b", "d")),
    (o.switch, "c", "a", "d"),
    CANON,
    keeps_type=True,
    where=inner_branch_absorbed,
    examples=("switch(c, a, switch(c, b, d))",),
    types=_MERGE_TYPES,
    doc="""switch(c, a, switch(c, b, d)) -> switch(c, a, d): where c fails, the inner switch takes d,
    the twin of switch_merge_then.  Exact where b adds nothing to the shape and the dtype stays.""",
)

# -- signs: abs of what is never negative, odd and even functions -----------------------------------


def _abs_of(name: str, op: o.Elemwise, doc: str, semantics: str | None = None) -> Rule:
    return rule(name, (o.abs, (op, "x")), (op, "x"), CANON, types=VECTOR, doc=doc, semantics=semantics)


abs_sqr = rule(
    "abs_sqr",
    (o.abs, (o.sqr, float_var("x"))),
    (o.sqr, "x"),
    CANON,
    examples=("abs(sqr(x))",),
    types=VECTOR,
    doc="abs(sqr(x)) -> sqr(x) for floats (an integer square may wrap around to a negative)",
)
sqr_abs = rule(
    "sqr_abs",
    (o.sqr, (o.abs, "x")),
    (o.sqr, "x"),
    CANON,
    types=VECTOR,
    doc="sqr(abs(x)) -> sqr(x): the sign is squared away (exact, integers included)",
)
abs_exp = _abs_of("abs_exp", o.exp, "abs(exp(x)) -> exp(x): never negative (exact)")
abs_sigmoid = _abs_of("abs_sigmoid", o.sigmoid, "abs(sigmoid(x)) -> sigmoid(x): never negative (exact)")
abs_softplus = _abs_of("abs_softplus", o.softplus, "abs(softplus(x)) -> softplus(x): never negative (exact)")
abs_erfc = _abs_of("abs_erfc", o.erfc, "abs(erfc(x)) -> erfc(x): never negative (exact)")
abs_sqrt = _abs_of(
    "abs_sqrt",
    o.sqrt,
    "abs(sqrt(x)) -> sqrt(x): never negative; sqrt(-0.0) is -0.0, so only the sign of a zero changes",
    semantics="reassociates",
)


def _odd(name: str, op: o.Elemwise) -> Rule:
    return rule(
        name,
        (op, (o.neg, float_var("x"))),
        (o.neg, (op, "x")),
        CANON,
        examples=(f"{op}(neg(x))",),
        types=VECTOR,
        doc=f"{op}(-x) -> -{op}(x): an odd function (exact for floats, the sign of zero included)",
    )


sin_neg = _odd("sin_neg", o.sin)
tanh_neg = _odd("tanh_neg", o.tanh)
erf_neg = _odd("erf_neg", o.erf)
cos_neg = rule(
    "cos_neg",
    (o.cos, (o.neg, float_var("x"))),
    (o.cos, "x"),
    CANON,
    examples=("cos(neg(x))",),
    types=VECTOR,
    doc="cos(-x) -> cos(x): an even function (exact for floats)",
)
mul_two_negations = rule(
    "mul_two_negations",
    {"pattern": (o.mul, (o.neg, "a"), (o.neg, "b"), "*rest"), "constraint": operands_regroupable},
    (o.mul, "a", "b", "*rest"),
    CANON,
    semantics="reassociates",
    examples=("mul(neg(a), neg(b))", "mul(neg(a), c, neg(b))"),
    types={"a": "vector", "b": "vector", "c": "vector"},
    doc="(-a) * (-b) -> a * b among the factors of a product of one dtype (exact for two factors; "
    "with others, they are multiplied in another order)",
)


def unnegated_product(v: Variable, rest: tuple) -> Variable:
    """v * rest...: the product neg_mul_neg leaves."""
    return o.mul(v, *rest)


# forward only (a computed right side with no inverse): run backward, every product would become the
# negation of a product with a negated factor, which exploration's e-graphs then grow without end
neg_mul_neg = rule(
    "neg_mul_neg",
    (o.neg, {"pattern": (o.mul, (o.neg, "v"), "*rest"), "constraint": operands_regroupable}),
    "product",
    CANON,
    semantics="reassociates",
    examples=("neg(mul(x, neg(y)))", "neg(mul(neg(x), y, c))"),
    types={"x": "vector", "y": "vector", "c": "vector"},
    compute={"product": unnegated_product},
    keeps_type=True,
    doc="-(v * -m) -> v * m: a negated product holding a negated factor loses both signs (a negative"
    " constant factor takes the sign by neg_mul_constant).  Exact for two factors, integers wrapping"
    " around alike; with more, the factors are multiplied in another order",
)

# -- reciprocals ------------------------------------------------------------------------------------

mul_by_reciprocal = rule(
    "mul_by_reciprocal",
    (o.mul, "x", (o.reciprocal, "y")),
    (o.true_div, "x", "y"),
    CANON,
    keeps_type=True,
    semantics="reassociates",
    examples=("mul(x, reciprocal(y))",),
    types=PAIR,
    doc="x * reciprocal(y) -> x / y: one rounding instead of two, and no overflow of 1/y",
)
reciprocal_reciprocal = rule(
    "reciprocal_reciprocal",
    (o.reciprocal, (o.reciprocal, float_var("x"))),
    "x",
    CANON,
    keeps_type=True,
    semantics="reassociates",
    examples=("reciprocal(reciprocal(x))",),
    types=VECTOR,
    doc="1 / (1 / x) -> x for floats (a subnormal x whose reciprocal overflows comes back)",
)

# -- sums: a sum of a negation, a sum of a sum ---------------------------------------------------------


def sum_keeps_dtype(x: Variable) -> bool:
    """Whether a sum of `x` keeps its dtype (floats, 64-bit integers; an int8 sum is an int64)."""
    return isinstance(x, Variable) and _sum_dtype(x.dtype) == x.dtype


@cache
def _sum_dtype(dtype: str) -> str:
    return np.zeros(1, dtype=dtype).sum().dtype.name


sum_neg = rule(
    "sum_neg",
    (o.Sum.pattern(axis="axis"), (o.neg, {"pattern": "x", "constraint": sum_keeps_dtype})),
    (o.neg, (o.Sum.pattern(axis="axis"), "x")),
    CANON,
    keeps_type=True,
    semantics="reassociates",
    examples=("sum(neg(x))", "sum(neg(X), axis=1)", "sum(neg(n))"),
    types={"x": "vector", "X": "matrix", "n": "vector:int64"},
    doc="""sum(-x, axis) -> -sum(x, axis): one negation instead of one per element.
    Where the sum keeps x's dtype (floats, 64-bit integers): rounding is symmetric and wrap-around
    negation distributes over wrap-around sums, so the values are the same but for the sign of a zero
    sum (of an empty axis, or of zeros of both signs: 0.0 + -0.0 is 0.0 both ways round).  A narrower
    integer is widened by the sum, and -(-128) wraps in int8.""",
)

_EXTREMUM_OF_NEG = """Floats only (-min wraps around for the smallest integer); NaN propagates both
ways.  Among equal zeros of both signs the extremum NumPy returns is the first one met, so the sign
of a zero result may differ."""

# Max and Min swap, and a rule's left side has one head: one rule for each (min_of_neg the mirror)
extremum_of_neg = rule(
    "extremum_of_neg",
    (o.Max.pattern(axis="axis"), (o.neg, float_var("x"))),
    (o.neg, (o.Min.pattern(axis="axis"), "x")),
    CANON,
    keeps_type=True,
    semantics="reassociates",
    examples=("max(neg(x))", "max(neg(X), axis=1)"),
    types={"x": "vector", "X": "matrix"},
    doc=f"max(-x, axis) -> -min(x, axis): one negation of the result instead of one per element."
    f" {_EXTREMUM_OF_NEG}",
)
min_of_neg = rule(
    "min_of_neg",
    (o.Min.pattern(axis="axis"), (o.neg, float_var("x"))),
    (o.neg, (o.Max.pattern(axis="axis"), "x")),
    CANON,
    keeps_type=True,
    semantics="reassociates",
    examples=("min(neg(x))", "min(neg(X), axis=1)"),
    types={"x": "vector", "X": "matrix"},
    doc=f"min(-x, axis) -> -max(x, axis), the mirror of extremum_of_neg. {_EXTREMUM_OF_NEG}",
)


def summed_parts(axis: int, parts: tuple) -> Variable | None:
    """sum(part 1) + sum(part 2) + ... for the parts of a join along `axis`, of one dtype, whose lengths
    off the join's axis static shapes prove equal; None otherwise."""
    if not parts or len({p.dtype for p in parts}) != 1:
        return None
    ndim = parts[0].ndim
    along = axis % ndim
    for d in range(ndim):  # the join's own check: lengths off its axis must agree, or it raises
        if d != along and (len({p.type.shape[d] for p in parts}) != 1 or parts[0].type.shape[d] is None):
            return None
    sums = [o.Sum(None)(p) for p in parts]
    return sums[0] if len(sums) == 1 else o.add(*sums)


# the sums of the parts are one term each: a compute builds them (a pattern cannot map over "*parts")
sum_of_join = rule(
    "sum_of_join",
    (o.Sum.pattern(axis=None), (o.Join.pattern(axis="axis"), "*parts")),
    "total",
    CANON,
    compute={"total": summed_parts},
    keeps_type=True,
    semantics="reassociates",
    examples=("sum(join(x, y, axis=0))", "sum(join(X, Y, X, axis=1))"),
    types={"x": "vector", "y": "vector", "X": "(2,None)", "Y": "(2,None)"},
    doc="""sum(join(x, y, ...)) -> sum(x) + sum(y) + ...: the total of joined arrays without the join's
    copy.  Parts of one dtype only (a join converts mixed parts first), whose lengths off the join's
    axis static shapes prove equal (else the join raises, and the sums would not); the terms are
    added in another order.""",
)


def merged_axes(inner: tuple[int, ...] | None, outer: tuple[int, ...] | None, x: Variable) -> tuple | None:
    """The axes of x one reduction takes to do what R(R(x, inner), outer) does (None: every axis)."""
    ndim = x.ndim
    first = set(range(ndim)) if inner is None else {a % ndim for a in inner}
    kept = [a for a in range(ndim) if a not in first]  # the axes of the inner sum's result, in x's numbering
    second = range(len(kept)) if outer is None else [a % len(kept) for a in outer]
    axes = first | {kept[a] for a in second}
    return None if len(axes) == ndim else tuple(sorted(axes))


def merged_sum(inner: tuple[int, ...] | None, outer: tuple[int, ...] | None, x: Variable) -> o.Sum:
    """The one Sum doing what sum(sum(x, inner), outer) does (`inner`, `outer`: the two sums' axes)."""
    return o.Sum(merged_axes(inner, outer, x))


def merged_prod(inner: tuple[int, ...] | None, outer: tuple[int, ...] | None, x: Variable) -> o.Prod:
    """The one Prod doing what prod(prod(x, inner), outer) does."""
    return o.Prod(merged_axes(inner, outer, x))


# the merged op is computed: its axis may be None (every axis), which a computed prop cannot be
sum_sum = rule(
    "sum_sum",
    (o.Sum.pattern(axis="outer"), (o.Sum.pattern(axis="inner"), "x")),
    ("merged", "x"),
    CANON,
    compute={"merged": merged_sum},
    keeps_type=True,
    semantics="reassociates",
    examples=("sum(sum(X, axis=0))", "sum(sum(T, axis=1), axis=-1)", "sum(sum(T, axis=(0, 2)), axis=0)"),
    types={"X": "matrix", "T": "(2, 3, 4)"},
    doc="""sum(sum(x, a), b) -> sum(x, a and b): one reduction over the axes of both.  Exact for
    integers (an inner sum already widens to the outer sum's dtype); for floats the terms are added
    in another order.""",
)


# the merged op is computed, as sum_sum's
prod_prod = rule(
    "prod_prod",
    (o.Prod.pattern(axis="outer"), (o.Prod.pattern(axis="inner"), "x")),
    ("merged", "x"),
    CANON,
    compute={"merged": merged_prod},
    keeps_type=True,
    semantics="reassociates",
    examples=(
        "prod(prod(X, axis=0))",
        "prod(prod(T, axis=1), axis=-1)",
        "prod(prod(T, axis=(0, 2)), axis=0)",
    ),
    types={"X": "matrix", "T": "(2, 3, 4)"},
    doc="""prod(prod(x, a), b) -> prod(x, a and b): one reduction over the axes of both (PyTensor's
    local_prod_prod).  Exact for integers (the inner product already widens to the outer's dtype and
    wrap-around products commute); for floats the factors are multiplied in another order.""",
)


def reduced_axes(axis: tuple[int, ...] | None, x: Variable) -> tuple[int, ...]:
    """The axes of `x` a reduction over `axis` takes, counted from the start."""
    return tuple(range(x.ndim)) if axis is None else tuple(sorted({a % x.ndim for a in axis}))


def _length_one_dropped(kind: type[o.Reduce]):
    def dropped(axis: tuple[int, ...] | None, x: Variable) -> Variable | None:
        """x with the reduced axes dropped, where static shapes say each has length 1 and the reduction
        keeps x's dtype (a sum of int8 is an int64); x itself where no axis is reduced (x is 0-d)."""
        axes = reduced_axes(axis, x)
        if any(x.type.shape[a] != 1 for a in axes) or kind(axis)(x).dtype != x.dtype:
            return None
        if not axes:
            return x
        return o.DimShuffle(x.ndim, tuple(a for a in range(x.ndim) if a not in axes))(x)

    dropped.__name__ = f"{kind.__name__.lower()}_length_one_dropped"
    return dropped


_LENGTH_ONE = (
    "Exact, NaN and the sign of zero included.",
    "The same values but for the sign of a zero: a sum of one -0.0 is 0.0 (it starts from 0.0).",
)


def _reduce_length_one(kind: type[o.Reduce]) -> Rule:
    name = kind.__name__.lower()
    return rule(
        f"{name}_of_length_one_axes",
        (kind.pattern(axis="axis"), "x"),
        "dropped",
        CANON,
        compute={"dropped": _length_one_dropped(kind)},
        keeps_type=True,
        semantics="reassociates" if kind is o.Sum else "exact",
        examples=(f"{name}(C, axis=1)", f"{name}(R)", f"{name}(T, axis=(0, 2))", f"{name}(s)"),
        types={"C": "(3, 1)", "R": "(1, 1)", "T": "(1, None, 1)", "s": "scalar"},
        doc=f"""{name}(x, axes) -> x with those axes dropped (a DimShuffle), where every reduced axis has
        static length 1, and x itself where x is 0-d: the {name} of one element is that element
        (PyTensor's local_reduce_broadcastable; PyMC sums every 0-d log-density term).
        {_LENGTH_ONE[kind is o.Sum]} Not where the reduction widens the dtype.""",
    )


# a rule's left side has one head: one rule for each reduction, from one declaration
sum_of_length_one_axes = _reduce_length_one(o.Sum)
prod_of_length_one_axes = _reduce_length_one(o.Prod)
max_of_length_one_axes = _reduce_length_one(o.Max)
min_of_length_one_axes = _reduce_length_one(o.Min)


def _through_new_axes(kind: type[o.Reduce]):
    def reduced(axis: tuple[int, ...] | None, order: tuple, x: Variable) -> Variable | None:
        """The reduction of x over the input axes the reduced ones hold, then the new axes kept put
        back: where the DimShuffle only adds length-1 axes (x's own stay in order) and the reduction
        keeps x's dtype; None elsewhere."""
        kept_order = [a for a in order if a != "x"]
        if kept_order != sorted(kept_order) or len(kept_order) != x.ndim or kind(None)(x).dtype != x.dtype:
            return None
        taken = set(reduced_axes(axis, o.DimShuffle(x.ndim, order)(x)))
        inner = tuple(a for k, a in enumerate(order) if k in taken and a != "x")
        if not inner:
            return None  # only new axes reduced: the length-one rule's
        rest = [a for k, a in enumerate(order) if k not in taken]
        remaining = [a for a in range(x.ndim) if a not in inner]
        new_order = tuple("x" if a == "x" else remaining.index(a) for a in rest)
        total = kind(inner)(x)
        return total if new_order == tuple(range(total.ndim)) else o.DimShuffle(total.ndim, new_order)(total)

    reduced.__name__ = f"{kind.__name__.lower()}_through_new_axes"
    return reduced


def _reduce_through_new_axes(kind: type[o.Reduce]) -> Rule:
    name = kind.__name__.lower()
    return rule(
        f"{name}_of_new_axes",
        (kind.pattern(axis="axis"), (o.DimShuffle.pattern(new_order="order"), "x")),
        "reduced",
        CANON,
        compute={"reduced": _through_new_axes(kind)},
        keeps_type=True,
        semantics="reassociates" if kind in (o.Sum, o.Prod) else "exact",
        examples=(f"{name}(v.dimshuffle(0, 'x'), axis=0)", f"{name}(m.dimshuffle('x', 0, 1), axis=(0, 2))"),
        types={"v": "vector", "m": "matrix"},
        doc=f"""{name}(x[..., None, ...], axes) -> {name}(x, the input axes among them)[..., None, ...]: a
        reduction of a DimShuffle that only adds length-1 axes reduces x itself and puts the new axes it
        keeps back (PyTensor's local_reduce_broadcastable and its dimshuffle lift).  Not where the
        reduction widens the dtype.""",
    )


sum_of_new_axes = _reduce_through_new_axes(o.Sum)
prod_of_new_axes = _reduce_through_new_axes(o.Prod)
max_of_new_axes = _reduce_through_new_axes(o.Max)
min_of_new_axes = _reduce_through_new_axes(o.Min)


def _of_alloc(kind: type[o.Reduce]):
    def reduced(axis: tuple[int, ...] | None, shape: tuple[int, ...], x: Variable) -> Variable | None:
        """The reduction of alloc(x, shape) for a 0-d x, from x and the count n of elements reduced:
        n * x for a sum, x ** n for a product, x for an extremum, alloc'ed to the lengths kept; None
        where the reduction would widen x's dtype."""
        if x.ndim != 0 or kind(axis)(o.Alloc(shape)(x)).dtype != x.dtype:
            return None
        axes = reduced_axes(axis, o.Alloc(shape)(x))
        n = int(np.prod([shape[a] for a in axes]))
        if n == 0 and kind is not o.Prod:  # an empty sum is 0 (but 0 * inf is NaN); an empty max raises
            return None
        count = constant(np.array(n, dtype=x.dtype))
        if kind is o.Sum:
            value = o.mul(count, x)
        elif kind is o.Prod:
            value = o.pow(x, count)
        else:
            value = x
        kept = tuple(length for a, length in enumerate(shape) if a not in axes)
        return o.Alloc(kept)(value) if kept else value

    reduced.__name__ = f"{kind.__name__.lower()}_of_alloc_value"
    return reduced


_ALLOC_VALUES = {
    o.Sum: "Exact for 64-bit integers (wrap-around agrees); for floats one rounding instead of n.",
    o.Prod: "Exact for 64-bit integers (wrap-around agrees); for floats one rounding instead of n.",
    o.Max: "Exact: every element is x.",
    o.Min: "Exact: every element is x.",
}


def _reduce_of_alloc(kind: type[o.Reduce], formula: str) -> Rule:
    name = kind.__name__.lower()
    return rule(
        f"{name}_of_alloc",
        (kind.pattern(axis="axis"), (o.Alloc.pattern(shape="shape"), "x")),
        "reduced",
        CANON,
        compute={"reduced": _of_alloc(kind)},
        keeps_type=True,
        semantics="reassociates" if kind in (o.Sum, o.Prod) else "exact",
        examples=(
            f"{name}(alloc(s, 2, 3))",
            f"{name}(alloc(s, 2, 3), axis=0)",
            f"{name}(alloc(n, 4), axis=0)",
        ),
        types={"s": "scalar", "n": "scalar:int64"},
        doc=f"""{name}(alloc(x, shape), axes) -> {formula}, alloc'ed to the lengths kept, for a 0-d x and n
        the number of elements reduced (static, not 0): no array is filled only to be reduced
        (PyTensor's local_opt_alloc).  {_ALLOC_VALUES[kind]}""",
    )


sum_of_alloc = _reduce_of_alloc(o.Sum, "n * x")
prod_of_alloc = _reduce_of_alloc(o.Prod, "x ** n")
max_of_alloc = _reduce_of_alloc(o.Max, "x")
min_of_alloc = _reduce_of_alloc(o.Min, "x")


def _joined(kind: type[o.Reduce], combine: Callable[..., Variable]):
    def reduced(axis: int, axes: tuple[int, ...] | None, parts: tuple) -> Variable | None:
        """R(join(axis, *parts), axes) for explicit `axes`: along the joined axis, the parts' reductions
        combined; across it, the join of their reductions (on the joined axis as they number it).  None
        where the parts differ in dtype, static shapes do not prove their lengths off the joined axis
        equal, or (a max or min along the joined axis) do not prove every part nonempty."""
        if axes is None or not parts or len({p.dtype for p in parts}) != 1:
            return None
        ndim = parts[0].ndim
        along = axis % ndim
        for d in range(ndim):
            if d != along and (len({p.type.shape[d] for p in parts}) != 1 or parts[0].type.shape[d] is None):
                return None
        reduced = {a % ndim for a in axes}
        if along in reduced and kind in (o.Max, o.Min) and any(not p.type.shape[along] for p in parts):
            return None  # the extremum of an empty part raises where the join's may not
        results = [kind(axes)(p) for p in parts]
        if along in reduced:
            return results[0] if len(results) == 1 else combine(*results)
        return o.Join(along - sum(1 for a in reduced if a < along))(*results)

    reduced.__name__ = f"{kind.__name__.lower()}_of_joined_parts"
    return reduced


_JOIN_COMBINE = {o.Sum: ("+", o.add), o.Prod: ("*", o.mul)}
_JOIN_COMBINE |= {
    o.Max: ("maximum", lambda *r: reduce(o.maximum, r)),
    o.Min: ("minimum", lambda *r: reduce(o.minimum, r)),
}


def _reduce_of_join(kind: type[o.Reduce]) -> Rule:
    name = kind.__name__.lower()
    symbol, combine = _JOIN_COMBINE[kind]
    along = (
        f"{name}(a, axes) {symbol} {name}(b, axes)"
        if len(symbol) == 1
        else f"{symbol}({name}(a, axes), {name}(b, axes))"
    )
    return rule(
        f"{name}_of_join_axes",
        (kind.pattern(axis="axes"), (o.Join.pattern(axis="axis"), "*parts")),
        "total",
        CANON,
        compute={"total": _joined(kind, combine)},
        keeps_type=True,
        semantics="reassociates",
        examples=(
            f"{name}(join(X, Y, axis=0), axis=0)",
            f"{name}(join(X, Y, axis=0), axis=1)",
            f"{name}(join(X, Y, X, axis=1), axis=(0, 1))",
        ),
        types={"X": "(2, 3)", "Y": "(2, 3)"},
        doc=f"""{name}(join(a, b, axis=k), axes) -> {along} when k is among the axes, else
        join({name}(a, axes), {name}(b, axes)) along k as they number it (PyTensor's local_reduce_join):
        no copy of the parts is made to be reduced.  Parts of one dtype whose lengths off the joined
        axis static shapes prove equal; across the joined axis the results are the same, along it they
        are combined in another order (for max and min, a zero's sign may differ).""",
    )


# as sum_of_join's, the parts' reductions are built by a compute (a pattern cannot map over "*parts")
sum_of_join_axes = _reduce_of_join(o.Sum)
prod_of_join_axes = _reduce_of_join(o.Prod)
max_of_join_axes = _reduce_of_join(o.Max)
min_of_join_axes = _reduce_of_join(o.Min)


# -- fills cut: an operand that only shapes the result goes when the others have its shape ---


def model_absorbed(model: Variable, value: Variable, rest: tuple[Variable, ...]) -> bool:
    """Whether fill(model, value) among `rest` broadcasts to what value and `rest` do: model adds no shape."""
    return shaped_within((model,), (value, *rest))


def _fill_cut(name: str, op: o.Elemwise, position: int | None) -> Rule:
    """f(fill(model, value), c) -> f(value, c) for a variadic op (`position` None) or at one operand."""
    if position is None:  # the value moves to the front: only where the operands' order cannot matter
        lhs = {"pattern": (op, (o.fill, "model", "value"), "*rest"), "constraint": operands_regroupable}
        rhs = (op, "value", "*rest")
        example = f"{op}(fill(m, x), y)"
    else:
        args = ["*rest"]
        args.insert(position, (o.fill, "model", "value"))
        lhs = (op, *args)
        rhs = (op, *(a if a == "*rest" else "value" for a in args))
        example = f"{op}(fill(m, x), y)" if position == 0 else f"{op}(y, fill(m, x))"
    return rule(
        name,
        lhs,
        rhs,
        CANON,
        where=model_absorbed,
        keeps_type=True,
        examples=(example,),
        types={"m": "(3,)", "x": "(3,)", "y": "(3,)"},
        doc=f"{example} -> the same without the fill, when m's shape adds nothing to the others' (exact)",
    )


add_fill_cut = _fill_cut("add_fill_cut", o.add, None)
mul_fill_cut = _fill_cut("mul_fill_cut", o.mul, None)
true_div_fill_cut_left = _fill_cut("true_div_fill_cut_left", o.true_div, 0)
true_div_fill_cut_right = _fill_cut("true_div_fill_cut_right", o.true_div, 1)
pow_fill_cut_base = _fill_cut("pow_fill_cut_base", o.pow, 0)
pow_fill_cut_exponent = _fill_cut("pow_fill_cut_exponent", o.pow, 1)
maximum_fill_cut = _fill_cut("maximum_fill_cut", o.maximum, 0)
minimum_fill_cut = _fill_cut("minimum_fill_cut", o.minimum, 0)


# -- Aesara's fill sink: f(fill(a, b), c) -> fill(a, f(b, c)), the op running on b's elements only -----


def broadcasting_elementwise(op: Any) -> bool:
    """Whether `op` is an elementwise op of fixed arity, other than fill, whose output is shaped as its
    inputs broadcast (not a Composite, whose output may be narrower): what the fill sink moves under."""
    return (
        isinstance(op, o.Elemwise)
        and op.nin is not None
        and type(op).make_node is o.Elemwise.make_node
        and not isinstance(op, o.Fill)
    )


def sinks_fill_at(position: int) -> Callable[[Any], bool]:
    """A screen: the node is a fixed-arity elementwise op (not a fill) whose operand `position` is a fill."""

    def screen(value: Any) -> bool:
        node = value.owner if isinstance(value, Variable) else None
        if node is None:
            return True
        if not broadcasting_elementwise(node.op) or len(node.inputs) <= position:
            return False
        owner = node.inputs[position].owner
        return owner is not None and isinstance(owner.op, o.Fill)

    screen.__name__ = f"sinks_fill_at_{position}"
    return screen


def evaluates_anywhere(op: Any, operands: Sequence[Any]) -> bool:
    """Whether `op` computes a value from any elements of these operands, so that it may run on other
    ones than the graph ran it on: numpy's power of integers raises on a negative exponent, and the fill
    sink would run it on a fill's value where the graph ran it on no element (an empty model)."""
    floats = ("float", "complex")
    return not (op == o.pow and all(not str(getattr(v, "dtype", "")).startswith(floats) for v in operands))


def _fill_sink(position: int) -> Rule:
    """f(..., fill(model, value), ...) -> fill(model, f(..., value, ...)) for the fill at `position` of any
    fixed-arity elementwise op f."""
    before = [f"x{i}" for i in range(position)]
    args = (*before, (o.fill, "model", "value"), "*rest")
    example = ("exp(fill(m, x))", "y ** fill(m, x)", "switch(c, y, fill(m, x))")[position]

    def sinks(op: Any, operands: Sequence[Any]) -> bool:
        return broadcasting_elementwise(op) and op.nin > position and evaluates_anywhere(op, operands)

    # a where guard names the pattern variables it reads: one signature per position
    where = (
        lambda op, value, rest: sinks(op, [value, *rest]),
        lambda op, x0, value, rest: sinks(op, [x0, value, *rest]),
        lambda op, x0, x1, value, rest: sinks(op, [x0, x1, value, *rest]),
    )[position]
    return rule(
        f"fill_sink_{position}",
        ("op", *args),
        (o.fill, "model", ("op", *before, "value", "*rest")),
        CANON,
        where=where,
        keeps_type=True,
        examples=(example,),
        types={"m": "(2, 3)", "x": "(3,)", "y": "(3,)", "c": "(3,):bool"},
        doc=f"""f(..., fill(a, b), ...) -> fill(a, f(..., b, ...)), the fill at operand {position} of any
        fixed-arity elementwise op f (Aesara's local_fill_sink): f runs on b's elements, then the
        result is broadcast to a's shape, so f(fill(a, b), fill(c, d), e) becomes
        fill(a, fill(c, f(b, d, e))) and the rules on f's operands see b (log(x + fill(y, 1)) reaches
        log1p).  Exact: fill(a, b) has b's dtype, and the shapes broadcast to the same.  A power of integers
        stays: numpy raises on a negative exponent for each element it computes, none of an empty a.""",
        screen=sinks_fill_at(position),
        heads=(o.Elemwise,),
    )


def _variadic_fill_sink(op: o.Elemwise) -> Rule:
    """op(fill(model, value), *rest) -> fill(model, op(value, *rest)) for add or mul (fill anywhere)."""
    return rule(
        f"{op}_fill_sink",
        {"pattern": (op, (o.fill, "model", "value"), "*rest"), "constraint": operands_regroupable},
        (o.fill, "model", (op, "value", "*rest")),
        CANON,
        keeps_type=True,
        examples=(f"{op}(x, fill(m, y))", f"{op}(fill(m, x), y, fill(m, 1.0))"),
        types={"m": "(2, 3)", "x": "(3,)", "y": "(3,)"},
        doc=f"""{op}(fill(a, b), c) -> fill(a, {op}(b, c)), the fill anywhere among the operands (Aesara's
        local_fill_sink): the {op} runs on b's elements, then is broadcast to a's shape, and
        the rules on the {op} see b (log(x + fill(y, 1)) reaches log1p).  Operands of one dtype (the
        value moves first).  Exact.""",
    )


# a rule's left side fixes its fill's position: one declaration per operand position, any op of the arity
def _unary_elementwise(op: Any) -> bool:
    return broadcasting_elementwise(op) and op.nin == 1


fill_model_of_elementwise = rule(
    "fill_model_of_elementwise",
    (o.fill, ("op", "x"), "value"),
    (o.fill, "x", "value"),
    CANON,
    where=_unary_elementwise,
    keeps_type=True,
    examples=("fill(exp(x), 0.0)", "fill(neg(m), v)"),
    types={"x": "vector", "m": "(2, 3)", "v": "(3,)"},
    doc="""fill(f(x), v) -> fill(x, v) for a one-operand elementwise op f: a fill reads only its model's
    shape, which f keeps, so f need not run (0 / exp(x) cancelled to zeros shaped like exp(x) no longer
    computes exp).  Exact.""",
)


def lifts_over_alloc(value: Any) -> bool:
    """A screen: the node is a one-operand elementwise op of an alloc."""
    node = value.owner if isinstance(value, Variable) else None
    if node is None:
        return True
    owner = node.inputs[0].owner if _unary_elementwise(node.op) else None
    return owner is not None and isinstance(owner.op, o.Alloc)


elementwise_of_alloc = rule(
    "elementwise_of_alloc",
    ("op", (o.Alloc.pattern(shape="shape"), "x")),
    (o.Alloc.pattern(shape="shape"), ("op", "x")),
    CANON,
    where=_unary_elementwise,
    keeps_type=True,
    examples=("exp(alloc(s, 2, 3))", "neg(alloc(v, 2, 3))", 'alloc(s, 2, 3).astype("float32")'),
    types={"s": "scalar", "v": "(3,)"},
    doc="""f(alloc(x, shape)) -> alloc(f(x), shape) for every one-operand elementwise op f, casts
    included (PyTensor's local_elemwise_alloc): f runs once per element of x, not once per element of
    the broadcast array.  Exact: the same function of the same values.""",
    screen=lifts_over_alloc,
    heads=(o.Elemwise,),
)


def alloc_needless(op: Any, shape: tuple[int, ...], x: Variable, others: Sequence[Any]) -> bool:
    """Whether op's result has the same static shape, every length known, with x in place of
    alloc(x, shape): the `others` operands broadcast it there anyway."""
    if not all(isinstance(v, Variable) for v in others) or not others:
        return False
    try:
        with_alloc = broadcast_shapes(shape, *(v.type.shape for v in others))
        without = broadcast_shapes(x.type.shape, *(v.type.shape for v in others))
    except TypeError:
        return False
    return None not in with_alloc and with_alloc == without


def _operand_screen(accepts: Callable[[Variable], bool], position: int | None) -> Callable[[Any], bool]:
    """A screen: the node's operand at `position` (None: any operand) is one `accepts` takes."""

    def screen(value: Any) -> bool:
        node = value.owner if isinstance(value, Variable) else None
        if node is None:
            return True
        if position is None:
            return any(accepts(i) for i in node.inputs)
        return len(node.inputs) > position and accepts(node.inputs[position])

    return screen


def _an_alloc(v: Variable) -> bool:
    return v.owner is not None and isinstance(v.owner.op, o.Alloc)


def _an_array_constant(v: Variable) -> bool:
    return isinstance(v, Constant) and v.ndim > 0


def _alloc_dropped(position: int) -> Rule:
    """f(..., alloc(x, shape), ...) -> f(..., x, ...) for the alloc at `position` of a fixed-arity
    elementwise op f of two or more operands, where the others already give f's result its shape."""
    if position == 0:

        def needless(op: Any, shape: tuple[int, ...], x: Variable, rest: Sequence[Any]) -> bool:
            return broadcasting_elementwise(op) and alloc_needless(op, shape, x, rest)

    else:

        def needless(op: Any, shape: tuple[int, ...], x: Variable, x0: Any, rest: Sequence[Any]) -> bool:
            return broadcasting_elementwise(op) and alloc_needless(op, shape, x, [x0, *rest])

    before = [f"x{i}" for i in range(position)]
    args = (*before, (o.Alloc.pattern(shape="shape"), "x"), "*rest")
    example = ("sub(alloc(s, 2, 3), m)", "pow(m, alloc(v, 2, 3))")[position]
    return rule(
        f"alloc_operand_{position}",
        ("op", *args),
        ("op", *before, "x", "*rest"),
        CANON,
        where=needless,
        keeps_type=True,
        examples=(example,),
        types={"s": "scalar", "v": "(3,)", "m": "(2, 3)"},
        doc=f"""f(..., alloc(x, shape), ...) -> f(..., x, ...), the alloc at operand {position} of an
        elementwise op f of several operands, where the others broadcast x to f's result anyway (static
        shapes prove it: PyTensor's local_elemwise_alloc).  Exact: the same values, one array fewer.""",
        screen=_operand_screen(_an_alloc, position),
        heads=(o.Elemwise,),
    )


def _variadic_alloc_dropped(op: o.Elemwise) -> Rule:
    """add/mul(alloc(x, shape), *rest) -> add/mul(x, *rest) where the other operands give the shape."""

    def needless(shape: tuple[int, ...], x: Variable, rest: Sequence[Any]) -> bool:
        return alloc_needless(op, shape, x, rest)

    return rule(
        f"{op}_alloc_operand",
        {"pattern": (op, (o.Alloc.pattern(shape="shape"), "x"), "*rest"), "constraint": operands_reorderable},
        (op, "x", "*rest"),
        CANON,
        where=needless,
        keeps_type=True,
        examples=(f"{op}(alloc(s, 2, 3), m, v)",),
        types={"s": "scalar", "v": "(3,)", "m": "(2, 3)"},
        doc=f"""{op}(alloc(x, shape), ...) -> {op}(x, ...) where the other operands
        broadcast x to the result anyway (static shapes prove it: PyTensor's local_elemwise_alloc), of
        two operands or of one dtype (x moves first, and mixed dtypes fold left to right).  Exact: the same
        values, one array fewer.""",
        screen=_operand_screen(_an_alloc, None),
    )


def _uniform_scalar(c: Any) -> Constant | None:
    """The 0-d constant every element of the array constant `c` equals, or None."""
    if not isinstance(c, Constant) or c.ndim == 0 or c.data.size == 0:
        return None
    first = c.data.flat[0]
    same = c.data == first if not np.isnan(first) else np.isnan(c.data)
    return constant(np.asarray(first, dtype=c.dtype)) if bool(np.all(same)) else None


def _uniform_dropped(position: int) -> Rule:
    """f(..., c, ...) -> f(..., c0, ...) for a uniform array constant c at `position` of a fixed-arity
    elementwise op f of two or more operands, where the others give f's result its shape."""

    def scalar(op: Any, c: Any, rest: Sequence[Any], x0: Any = None) -> Constant | None:
        others = [*([x0] if position else []), *rest]
        low = _uniform_scalar(c)
        if low is None or not broadcasting_elementwise(op):
            return None
        return low if alloc_needless(op, c.type.shape, low, others) else None

    if position == 0:

        def compute(op: Any, c: Any, rest: Sequence[Any]) -> Constant | None:
            return scalar(op, c, rest)

    else:

        def compute(op: Any, c: Any, x0: Any, rest: Sequence[Any]) -> Constant | None:
            return scalar(op, c, rest, x0)

    before = [f"x{i}" for i in range(position)]
    return rule(
        f"uniform_constant_operand_{position}",
        ("op", *before, "c", "*rest"),
        ("op", *before, "scalar", "*rest"),
        CANON,
        compute={"scalar": compute},
        keeps_type=True,
        examples=(("sub([2.0, 2.0, 2.0], m)", "pow(m, [[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]])")[position],),
        types={"m": "(2, 3)"},
        doc=f"""f(..., c, ...) -> f(..., c0, ...) for an array constant c at operand {position} whose every
        element is c0, where the other operands give f's result its shape (PyTensor's uniform constants
        as scalars): rules that read numbers see a number, and no array is stored.  Exact.""",
        screen=_operand_screen(_an_array_constant, position),
        heads=(o.Elemwise,),
    )


def _variadic_uniform_dropped(op: o.Elemwise) -> Rule:
    """add/mul(c, *rest) -> add/mul(c0, *rest) for a uniform array constant c where the others give
    the result its shape."""

    def scalar(c: Any, rest: Sequence[Any]) -> Constant | None:
        low = _uniform_scalar(c)
        return low if low is not None and alloc_needless(op, c.type.shape, low, rest) else None

    return rule(
        f"{op}_uniform_constant_operand",
        {
            "pattern": (op, {"pattern": "c", "constraint": _an_array_constant}, "*rest"),
            "constraint": operands_reorderable,
        },
        (op, "scalar", "*rest"),
        CANON,
        compute={"scalar": scalar},
        keeps_type=True,
        examples=(f"{op}([2.0, 2.0, 2.0], m)",),
        types={"m": "(2, 3)"},
        doc=f"""{op}(c, ...) -> {op}(c0, ...) for an array constant c whose every element is c0, where
        the other operands give the result its shape, of two operands or of one dtype (c0 moves first,
        and mixed dtypes fold left to right: add(x, True, True) is x + 2).  Exact.""",
        screen=_operand_screen(_an_array_constant, None),
    )


alloc_operand_0 = _alloc_dropped(0)
alloc_operand_1 = _alloc_dropped(1)
add_alloc_operand = _variadic_alloc_dropped(o.add)
mul_alloc_operand = _variadic_alloc_dropped(o.mul)
uniform_constant_operand_0 = _uniform_dropped(0)
uniform_constant_operand_1 = _uniform_dropped(1)
add_uniform_constant_operand = _variadic_uniform_dropped(o.add)
mul_uniform_constant_operand = _variadic_uniform_dropped(o.mul)

fill_sink_0 = _fill_sink(0)
fill_sink_1 = _fill_sink(1)
fill_sink_2 = _fill_sink(2)
add_fill_sink = _variadic_fill_sink(o.add)
mul_fill_sink = _variadic_fill_sink(o.mul)

# -- unsafe: valid under assumptions ----------------------------------------------------------------

log_of_product = rule(
    "log_of_product",
    (o.log, (o.mul, float_var("a"), "b")),
    (o.add, (o.log, "a"), (o.log, "b")),
    UNSAFE,
    assumptions=("a > 0", "b > 0"),
    examples=("log(mul(a, b))",),
    types={"a": "vector", "b": "vector"},
    doc="log(a * b) -> log(a) + log(b) for positive a and b (no overflow of the product either)",
)
sqr_over_self = rule(
    "sqr_over_self",
    (o.true_div, (o.sqr, float_var("x")), "x"),
    "x",
    UNSAFE,
    assumptions=("x != 0",),
    examples=("true_div(sqr(x), x)",),
    types=VECTOR,
    doc="sqr(x) / x -> x for x != 0 (and where sqr(x) does not overflow)",
)


def is_integer_constant(value: Any) -> bool:
    """Whether `value` is a 0-d constant holding an integer (a float 2.0 included)."""
    data = literal_value(value)
    return data is not None and data.ndim == 0 and bool(np.isfinite(data)) and float(data) == int(data)


pow_of_pow = rule(
    "pow_of_pow",
    (
        o.pow,
        (o.pow, float_var("x"), {"pattern": "a", "constraint": is_integer_constant}),
        {"pattern": "b", "constraint": is_integer_constant},
    ),
    (o.pow, "x", (o.mul, "a", "b")),
    CANON,
    semantics="reassociates",
    keeps_type=True,
    examples=("pow(pow(x, 2), 3)", "pow(pow(x, -1), 2)"),
    types=VECTOR,
    doc="(x ** a) ** b -> x ** (a * b) for integer constants a and b (any sign of x: integer powers "
    "are single-valued); one rounding instead of two",
)


expm1_log1p = rule(
    "expm1_log1p",
    (o.expm1, (o.log1p, float_var("x"))),
    "x",
    UNSAFE,
    assumptions=("x >= -1",),
    examples=("expm1(log1p(x))",),
    types=VECTOR,
    doc="expm1(log1p(x)) -> x for x >= -1 (below, the left side is NaN)",
)
softplus_log = rule(
    "softplus_log",
    (o.softplus, (o.log, float_var("x"))),
    (o.log1p, "x"),
    UNSAFE,
    assumptions=("x >= 0",),
    examples=("softplus(log(x))",),
    types=VECTOR,
    doc="softplus(log(x)) -> log1p(x) for x >= 0: log(1 + exp(log x)) is log(1 + x), without the "
    "rounding of exp(log x) (below 0 the left side is NaN)",
)

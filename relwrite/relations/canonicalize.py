"""Canonicalize: simplify graphs and put them in one normal form, so later rules match structurally.

The canonical form these rules produce (stabilize and specialize rules match it):

- add and mul are variadic and flat: no operand of an add is an add, nor of a mul a mul;
- x - y is add(x, neg(y)); division stays true_div;
- the constants among an add's or mul's operands are folded into one, which
  comes first; the other operands follow in the stable order of
  `operands.canonical_key` (so 1 + x is add(1, x) and exp(x) - 1 is add(-1, exp(x)));
  constants whose folding would overflow or underflow stay apart, the first
  leading and the others last (``1e200 * x * 1e200`` is left as it is);
- x + 0, x * 1, x / 1, -(-x) are gone; like terms are collected (x + x is
  mul(2, x)), like factors too (x * x is pow(x, 2)); mul(-1, x) stays as it
  is (specialize turns it into neg(x)).

Associativity and commutativity never go through kanren's `eq_assoccomm`:
the operand-list functions of `relwrite.relations.operands` flatten, sort and
regroup operand tuples in polynomial time, so every rule matches the
canonical form structurally.  They act on operands of one dtype only
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

from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Op, Variable, constant
from relwrite.graph.types import TensorType
from relwrite.relations.operands import (
    cancelled,
    cancelled_factor,
    collected_base,
    constant_result,
    divided_out,
    folded_constants,
    holds_constants,
    holds_variables,
    is_neutral_of,
    like_factors,
    like_terms,
    may_cancel_a_factor,
    may_collect_terms,
    may_divide_out,
    may_gather_factors,
    nestings,
    neutral_drops,
    operand_candidates,
    reads,
    rebuilt,
    rest_regroupable,
    rotations,
    shaped_within,
    sorted_terms,
    spliced,
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
from relwrite.relations.registry import CANON, UNSAFE, rule
from relwrite.relations.runtime import Computed

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


_READS_FILL, _READS_QUOTIENT, _READS_RECIPROCAL = reads(o.fill), reads(o.true_div), reads(o.reciprocal)


def holds_fill_or_constant(value: Any) -> bool:
    """A screen: some operand of the node is a constant or a fill (what a zero factor can be)."""
    return _READS_FILL(value) or any(isinstance(i, Constant) for i in value.owner.inputs)


def reads_quotient(value: Any) -> bool:
    """A screen: some operand of the node is a quotient or a reciprocal (what a cancelled factor sits in)."""
    return _READS_QUOTIENT(value) or _READS_RECIPROCAL(value)


def renested(op: Op, flat: Variable) -> Iterator[dict]:
    """The operand lists that flatten to `flat`'s: one run of two or more consecutive operands re-nested
    (all but the whole list), the shortest runs first."""
    return operand_candidates(op, partial(nestings, op), flat)


def unsorted(op: Op, ordered: Variable) -> Iterator[dict]:
    """The rotations of `ordered`'s operands (the sort keeps only those that sort back to it)."""
    return operand_candidates(op, rotations, ordered)


# flattening splices nested operands at any depth: code walks the operand list (and re-nests it backward)
flatten_add = rule(
    "flatten_add",
    (o.add, "*terms"),
    "flat",
    CANON,
    semantics="reassociates",
    examples=("add(x, add(y, z))", "(x + y) + (z + w)"),
    compute={"flat": Computed(partial(rebuilt, o.add, partial(spliced, o.add)), partial(renested, o.add))},
    keeps_type=True,
    idempotent=True,
    doc="""add(a, add(b, c), d) -> add(a, b, c, d): nested sums of the sum's dtype spliced into one
    (backward: re-nested).  Reassociates: a + (b + c) becomes (a + b) + c.""",
    screen=reads(o.add),
)

# flattening splices nested operands at any depth: code walks the operand list (and re-nests it backward)
flatten_mul = rule(
    "flatten_mul",
    (o.mul, "*terms"),
    "flat",
    CANON,
    semantics="reassociates",
    examples=("mul(x, mul(y, z))", "(x * y) * (z * w)"),
    compute={"flat": Computed(partial(rebuilt, o.mul, partial(spliced, o.mul)), partial(renested, o.mul))},
    keeps_type=True,
    idempotent=True,
    doc="""mul(a, mul(b, c), d) -> mul(a, b, c, d): nested products of the product's dtype spliced into
    one (backward: re-nested).  Reassociates: a * (b * c) becomes (a * b) * c.""",
    screen=reads(o.mul),
)

# folding gathers every constant of the list, in order, into one value: code computes it
fold_add_constants = rule(
    "fold_add_constants",
    (o.add, "*terms"),
    "folded",
    CANON,
    semantics="reassociates",
    examples=("add(2, x, 3)", "add(x, 1, 2, y)"),
    compute={"folded": partial(rebuilt, o.add, partial(folded_constants, o.add))},
    keeps_type=True,
    idempotent=True,
    doc="""add(2, x, 3) -> add(5, x): the constant terms of a sum folded into one, first.  Reassociates:
    the constants are added before the other terms.  Integers fold in their dtype, wrapping around as
    the graph would; a float fold that overflows or is invalid (inf - inf) is refused.""",
    screen=holds_constants,
)

# folding gathers every constant of the list, in order, into one value: code computes it
fold_mul_constants = rule(
    "fold_mul_constants",
    (o.mul, "*terms"),
    "folded",
    CANON,
    semantics="reassociates",
    examples=("mul(2, x, 3)", "mul(x, 2, 0.5, y)"),
    compute={"folded": partial(rebuilt, o.mul, partial(folded_constants, o.mul))},
    keeps_type=True,
    idempotent=True,
    doc="""mul(2, x, 3) -> mul(6, x): the constant factors of a product folded into one, first.
    Reassociates: the constants are multiplied before the other factors.  Integers fold in their dtype,
    wrapping around as the graph would; a float fold that overflows, underflows or is invalid (inf * 0)
    is refused, so ``1e200 * x * 1e200`` never becomes ``inf * x``.""",
    screen=holds_constants,
)

# sorting orders the whole list by `canonical_key`, which reads each operand's node: code sorts it
sort_add = rule(
    "sort_add",
    (o.add, "*terms"),
    "ordered",
    CANON,
    semantics="reassociates",
    examples=("y + x", "add(exp(x), 1)", "add(x, 2, y)"),
    compute={"ordered": Computed(partial(rebuilt, o.add, sorted_terms), partial(unsorted, o.add))},
    keeps_type=True,
    idempotent=True,
    doc="""add(y, x, 1) -> add(1, x, y): constants first, then the stable order of `canonical_key`.
    Reassociates: with three or more terms the sum is taken in another order (of two, exactly: x + y is
    y + x).  Backward: the rotations of the operands that sort back to the same order.""",
)

# sorting orders the whole list by `canonical_key`, which reads each operand's node: code sorts it
sort_mul = rule(
    "sort_mul",
    (o.mul, "*terms"),
    "ordered",
    CANON,
    semantics="reassociates",
    examples=("y * x", "mul(exp(x), 2)", "mul(x, 2, y)"),
    compute={"ordered": Computed(partial(rebuilt, o.mul, sorted_terms), partial(unsorted, o.mul))},
    keeps_type=True,
    idempotent=True,
    doc="""mul(y, x, 2) -> mul(2, x, y): constants first, then the stable order of `canonical_key`.
    Reassociates: with three or more factors the product is taken in another order (of two, exactly).
    Backward: the rotations of the operands that sort back to the same order.""",
)


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


def negated_leading_constant(terms: Any) -> tuple | None:
    """The factors `terms` with their leading constant negated, when it has the product's dtype (an
    integer's negation wraps around as the graph's would: `constant_result`)."""
    if not isinstance(terms, tuple) or len(terms) < 2 or not isinstance(terms[0], Constant):
        return None
    if not all(isinstance(f, Variable) for f in terms[1:]):
        return None
    dtype = o.mul.output_dtype([f.dtype for f in terms])
    if terms[0].dtype != dtype or terms[0].type.numpy_dtype.kind not in "iuf":
        return None
    value = constant_result(np.negative, [terms[0].data], dtype, wraps=True)
    return (Constant(terms[0].type, value), *terms[1:])


def unnegated(negated: Variable) -> Iterator[dict]:
    """The factor list `neg_mul_constant` turns into `negated`'s: its leading constant negated back."""
    return operand_candidates(o.mul, lambda terms: filter(None, [negated_leading_constant(terms)]), negated)


# the constant must lead the factors (a position multiset matching does not bind): code reads the list
neg_mul_constant = rule(
    "neg_mul_constant",
    (o.neg, (o.mul, "*terms")),
    "negated",
    CANON,
    examples=("-(2 * x)", "-(mul(3, x, y))"),
    compute={"negated": Computed(partial(rebuilt, o.mul, negated_leading_constant), unnegated)},
    keeps_type=True,
    doc="-(c * x...) -> (-c) * x...: a negated product with a leading constant takes the sign into it.",
)


def zeros_of_product(terms: Any) -> Variable | None:
    """Zeros shaped like the product of the factors `terms` when one is zero (a constant, maybe filled),
    else None.

    The zeros take the product's dtype and are broadcast (`fill`) against
    each factor, or model of a filled zero, that could widen them.
    """
    if not isinstance(terms, tuple) or not all(isinstance(f, Variable) for f in terms):
        return None
    models, shapes, zero = [], [], False
    for factor in terms:
        layers = filled_constant(factor)
        if layers is None:
            models.append(factor)
            continue
        models += layers[0]
        shapes.append(layers[1].data.shape)
        zero = zero or equals_everywhere(layers[1], 0)
    if not zero:
        return None
    dtype = o.mul.output_dtype([f.dtype for f in terms])
    shape = np.broadcast_shapes(*shapes)
    zeros: Variable = Constant(TensorType(dtype, shape), np.zeros(shape, dtype=dtype))
    used: list[Variable] = []
    for model in models:
        if not broadcasts_into(model, zeros) and not any(model is u for u in used):
            zeros = o.fill(model, zeros)
            used.append(model)
    return zeros


# a zero may be filled (as x - x leaves it) and every factor may shape the zeros: code reads the list
mul_zero = rule(
    "mul_zero",
    (o.mul, "*terms"),
    "zeros",
    UNSAFE,
    examples=("x * 0", "mul(0, x, y)"),
    compute={"zeros": zeros_of_product},
    keeps_type=True,
    doc="""x * 0 -> zeros of the product's shape and dtype (unsafe: 0 * inf is NaN, so valid where x is
    finite).  A zero filled to some shape (as x - x leaves) counts as zero too.""",
    screen=holds_fill_or_constant,
)


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


def is_zeros(value: Any) -> bool:
    """Whether `value` is a constant that is zero everywhere (0-d, or an array of zeros)."""
    return isinstance(value, Constant) and equals_everywhere(value, 0)


def is_ones(value: Any) -> bool:
    """Whether `value` is a constant that is one everywhere (0-d, or an array of ones)."""
    return isinstance(value, Constant) and equals_everywhere(value, 1)


is_zeros.heads = is_ones.heads = (Constant,)

zero_div = rule(
    "zero_div",
    (o.true_div, {"pattern": "zeros", "constraint": is_zeros}, float_var("x")),
    (o.fill, "x", "zeros"),
    UNSAFE,
    assumptions=("x != 0",),
    examples=("0 / x", "true_div(0, exp(x))"),
    types={"x": "vector"},
    keeps_type=True,
    doc="""0 / x -> zeros shaped like the quotient (floats; zeros of the numerator's dtype, broadcast
    against x; an array of zeros keeps its shape).  Unsafe: 0 / 0 and 0 / NaN are NaN, so valid for
    x != 0 that is not NaN (0 / inf is 0 on both sides).""",
)

one_pow = rule(
    "one_pow",
    {"pattern": (o.pow, {"pattern": "ones", "constraint": is_ones}, "x"), "constraint": is_float},
    (o.fill, "x", "ones"),
    CANON,
    examples=("1 ** x", "pow(1, exp(x))"),
    types={"x": "vector"},
    keeps_type=True,
    doc="""1 ** x -> ones shaped like the power (floats; ones of the base's dtype, broadcast against x; an
    array of ones keeps its shape).  Exact: numpy's 1.0 ** x is 1 for every x, NaN and infinities
    included (integer powers are left alone: numpy refuses negative integer exponents there).""",
)


# -- cancelling factors ----------------------------------------------------------------------------


def cancelled_quotient(terms: tuple, y: Variable) -> Variable | None:
    """mul(*terms) / y with one factor y divided out (`divided_out`), or None."""
    kept = divided_out((y, terms))
    return variadic_applied(o.mul, kept) if kept else None


# y cancels the first equal factor, in place, ones staying where it shaped the product: code reads the list
mul_div_cancel = rule(
    "mul_div_cancel",
    (o.true_div, (o.mul, "*terms"), "y"),
    "kept",
    UNSAFE,
    assumptions=("y != 0",),
    examples=("(x * y) / y", "(y * x) / y", "mul(x, y, z) / y"),
    compute={"kept": cancelled_quotient},
    keeps_type=True,
    doc="""(x * y) / y -> x and (y * x) / y -> x: the divisor cancels one equal factor, at any position.
    Floats; unsafe: at y = 0 or y = inf the left side is NaN, so valid for finite y != 0.  Ones shaped
    like y stay where y could widen the result.""",
    operand_screen=may_divide_out,
)

# a factor cancels its divisor or reciprocal anywhere in the list, the rest kept in order: code walks it
mul_cancel = rule(
    "mul_cancel",
    (o.mul, "*terms"),
    "kept",
    UNSAFE,
    assumptions=("x != 0",),
    examples=("x * (z / x)", "mul(x, reciprocal(x), z)", "mul(y, z / x, x)"),
    compute={"x": cancelled_factor, "kept": partial(rebuilt, o.mul, cancelled)},
    keeps_type=True,
    doc="""x * (z / x) -> z and x * reciprocal(x) * z -> z, anywhere in a flat product.  Floats; unsafe:
    at x = 0 or x = inf the left side is NaN, so valid for finite x != 0.  Ones shaped like x stay where x
    could widen the result.""",
    screen=reads_quotient,
    operand_screen=may_cancel_a_factor,
)


# -- like terms and like factors -------------------------------------------------------------------


# like terms are found by structure among all the terms, each group gathered where it first stood: code
collect_terms = rule(
    "collect_terms",
    (o.add, "*terms"),
    "collected",
    CANON,
    semantics="reassociates",
    examples=("x + x", "add(mul(2, x), mul(3, x))", "add(x, y, mul(2, x))", "add(neg(x), neg(x))"),
    compute={"collected": partial(rebuilt, o.add, partial(like_terms, False))},
    keeps_type=True,
    doc="""x + x -> 2 * x, 3*x + x -> 4 * x: like terms gathered.  Within a wider sum a group is gathered
    unless that adds a node: y + x + x stays (y + 2*x would take a product more), y + 2*x + x becomes
    y + 3*x.  Reassociates: c1*x + c2*x becomes (c1 + c2)*x, which may round differently, and the
    remaining terms are added in another order.  Floats only when the coefficients are finite and
    nonzero with one sign, so infinities and NaN come out the same; integers always (exactly).""",
    screen=holds_variables,
    operand_screen=may_collect_terms,
)

# like terms are found by structure among all the terms, each group gathered where it first stood: code
collect_terms_cancelling = rule(
    "collect_terms_cancelling",
    (o.add, "*terms"),
    "collected",
    UNSAFE,
    examples=("add(x, neg(x))", "add(mul(3, x), neg(x))", "add(y, x, mul(-1, x))"),
    compute={"collected": partial(rebuilt, o.add, partial(like_terms, True))},
    keeps_type=True,
    doc="""x + (-x) -> 0, 3*x - x -> 2 * x: like float terms whose coefficients differ in sign.  Unsafe:
    inf - inf is NaN where 2 * inf is not, so valid where the terms are finite; a sum that cancels leaves
    zeros shaped like the terms.""",
    screen=holds_variables,
    operand_screen=lambda value: _may_cancel(value) and may_collect_terms(value),
)


def _may_cancel(value: Variable) -> bool:
    """An operand screen of collect_terms_cancelling: a float sum some term of which may have a negative,
    zero or non-finite coefficient (what a cancelling group needs: `like_terms` takes the others as
    exact), that is a negation or a product with a constant factor not finite and positive."""
    node = value.owner
    if node.outputs[0].type.numpy_dtype.kind != "f":
        return False
    for term in node.inputs:
        owner = term.owner
        if owner is None:
            continue
        if owner.op == o.neg:
            return True
        if owner.op == o.mul and any(
            isinstance(f, Constant) and not np.all(np.isfinite(f.data) & (f.data > 0)) for f in owner.inputs
        ):
            return True
    return False


# like factors are found by structure among all the factors, each group gathered where it first stood: code
collect_factors = rule(
    "collect_factors",
    (o.mul, "*terms"),
    "collected",
    CANON,
    semantics="reassociates",
    examples=("x * x", "mul(x ** 2, x)", "mul(x ** 2, y, x)"),
    compute={"collected": partial(rebuilt, o.mul, partial(like_factors, False))},
    keeps_type=True,
    doc="""x * x -> x ** 2, x ** 2 * x -> x ** 3: like factors with positive integer exponents.  Within a
    wider product a group is gathered only where one of its factors is already a power: x * y * x stays
    (y * x ** 2 would take a node more).  Reassociates: x * y * x becomes y * x ** 2, which at x = 1e200,
    y = 1e-200 overflows (inf) where the left side gives 1e200, and a power rounds once where repeated
    products round each time.  Exact for integers, where the collected exponent fits the dtype: an
    exponent counts, it does not wrap around (int8 x ** 127 * x stays; x ** -128 is another power).""",
    screen=holds_variables,
    operand_screen=may_gather_factors(False),
)

# like factors are found by structure among all the factors, each group gathered where it first stood: code
collect_factors_general = rule(
    "collect_factors_general",
    (o.mul, "*terms"),
    "collected",
    UNSAFE,
    assumptions=("x > 0",),
    examples=("mul(x ** 0.5, x ** 0.5)", "mul(x ** y, x)", "mul(x ** -1, x ** 3)"),
    compute={"x": collected_base, "collected": partial(rebuilt, o.mul, partial(like_factors, True))},
    keeps_type=True,
    doc="""x ** a * x -> x ** (a + 1), x ** a * x ** b -> x ** (a + b) for other exponents (floats).
    Unsafe, valid for x > 0: at x = 0, 0 ** -1 * 0 is NaN while 0 ** 0 is 1; for x < 0 a fractional power
    is NaN.""",
    screen=holds_variables,
    operand_screen=may_gather_factors(True),
)


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


def unshuffled(x: Variable, n: int, order: tuple) -> Variable | None:
    """x, when DimShuffle(n, order) keeps every axis of it in place but for length-1 axes, which it may
    swap, drop or put a new one in place of (the same elements in the same shape)."""
    if n != x.ndim or len(order) != x.ndim:
        return None
    shape = x.type.shape
    return (
        x
        if all(a == i or (shape[i] == 1 and (a == "x" or shape[a] == 1)) for i, a in enumerate(order))
        else None
    )


def identity_dimshuffles(kept: Variable) -> list[dict]:
    return [{"x": kept, "n": kept.ndim, "order": tuple(range(kept.ndim))}]


def uncast(x: Variable, dtype: str) -> Variable | None:
    """x, when it already has `dtype`."""
    return x if x.dtype == dtype else None


def identity_casts(kept: Variable) -> list[dict]:
    return [{"x": kept, "dtype": kept.dtype}]


def unallocated(x: Variable, shape: tuple) -> Variable | None:
    """x, when its static shape is exactly `shape`."""
    return x if None not in x.type.shape and x.type.shape == shape else None


def identity_allocs(kept: Variable) -> list[dict]:
    shape = kept.type.shape
    return [{"x": kept, "shape": shape}] if None not in shape else []


def reshapes_keeping(x: Variable) -> list[tuple]:
    """The shapes static shapes prove a reshape of `x` to keep it as it is (one length may be -1)."""
    shape = x.type.shape
    unknown = [axis for axis, length in enumerate(shape) if length is None]
    if len(unknown) > 1:
        return []
    if unknown:
        return [tuple(-1 if length is None else length for length in shape)]
    return [shape, *((*shape[:axis], -1, *shape[axis + 1 :]) for axis in range(len(shape)))]


def unreshaped(x: Variable, shape: tuple) -> Variable | None:
    """x, when static shapes prove Reshape(shape) keeps it as it is."""
    return x if shape in reshapes_keeping(x) else None


def identity_reshapes(kept: Variable) -> list[dict]:
    return [{"x": kept, "shape": shape} for shape in reshapes_keeping(kept)]


# whether the op keeps x is a test of its props against x's type, and backward the props are built from it
useless_dimshuffle = rule(
    "useless_dimshuffle",
    (o.DimShuffle.pattern(input_ndim="n", new_order="order"), "x"),
    "kept",
    CANON,
    examples=("transpose(x)", "transpose(R)"),
    types={"x": "vector", "R": "(1, 1)"},
    compute={"kept": Computed(unshuffled, identity_dimshuffles)},
    doc="""A DimShuffle keeping every axis in place (the transpose of a vector) but for length-1 axes,
    which it may swap or replace by new ones (the transpose of a 1 x 1 matrix) -> its input.""",
)

# whether the op keeps x is a test of its props against x's type, and backward the props are built from it
useless_cast = rule(
    "useless_cast",
    (o.Cast.pattern(dtype="dtype"), "x"),
    "kept",
    CANON,
    examples=('x.astype("float64")',),
    compute={"kept": Computed(uncast, identity_casts)},
    doc="A cast to the dtype its input already has -> the input.",
)

# whether the op keeps x is a test of its props against x's type, and backward the props are built from it
useless_alloc = rule(
    "useless_alloc",
    (o.Alloc.pattern(shape="shape"), "x"),
    "kept",
    CANON,
    examples=("alloc(x, 2, 3)",),
    types={"x": "(2, 3)"},
    compute={"kept": Computed(unallocated, identity_allocs)},
    doc="Alloc(shape)(x) -> x when x's static shape is exactly `shape`.",
)

# whether the op keeps x is a test of its props against x's type, and backward the props are built from it
useless_reshape = rule(
    "useless_reshape",
    (o.Reshape.pattern(shape="shape"), "x"),
    "kept",
    CANON,
    examples=("x.reshape(2, 3)", "v.reshape(-1)"),
    types={"x": "(2, 3)", "v": "vector"},
    compute={"kept": Computed(unreshaped, identity_reshapes)},
    doc="Reshape(shape)(x) -> x when static shapes prove the shape unchanged.",
)


def widening(x: Variable, inner: str) -> bool:
    """Whether casting `x` to `inner` keeps every value of x's dtype (a safe cast)."""
    return bool(np.can_cast(x.dtype, inner, "safe"))


cast_cast = rule(
    "cast_cast",
    (o.Cast.pattern(dtype="outer"), (o.Cast.pattern(dtype="inner"), "x")),
    (o.Cast.pattern(dtype="outer"), "x"),
    (*CANON, "specialize"),
    where=widening,
    examples=('x.astype("float32").astype("float64")', 'i.astype("int64").astype("float32")'),
    types={"x": "vector:float16", "i": "vector:int32"},
    doc="""cast(cast(x, d1), d2) -> cast(x, d2) where d1 holds every value of x's dtype (a widening
    first cast, PyTensor's local_cast_cast): the first cast changes no value, so the second rounds or
    wraps x itself.  Exact.""",
)

alloc_alloc = rule(
    "alloc_alloc",
    (o.Alloc.pattern(shape="outer"), (o.Alloc.pattern(shape="inner"), "x")),
    (o.Alloc.pattern(shape="outer"), "x"),
    CANON,
    examples=("alloc(alloc(x, 3), 2, 3)", "alloc(alloc(s, 1, 3), 2, 3)"),
    types={"x": "(1,)", "s": "scalar"},
    doc="""alloc(alloc(x, s1), s2) -> alloc(x, s2) (PyTensor's local_merge_alloc): x broadcasts to s1
    and s1 to s2, so x broadcasts to s2 and every element is the same element of x.  Exact.""",
)

join_of_one_part = rule(
    "join_of_one_part",
    (o.Join.pattern(axis="axis"), "x"),
    "x",
    CANON,
    examples=("join(x, axis=0)", "join(m, axis=1)"),
    types={"x": "vector", "m": "matrix"},
    doc="""join(x) -> x: a join of one part copies it (PyTensor's local_join_1); stack([a]) is a with a
    new axis.  Exact.""",
)


def nonempty_join(axis: int, parts: tuple) -> Variable | None:
    """The join of `parts` without those static shapes prove empty along `axis` (at least one kept)."""
    along = axis % parts[0].ndim
    kept = [p for p in parts if p.type.shape[along] != 0]
    if len(kept) == len(parts) or not kept:
        return None
    return kept[0] if len(kept) == 1 else o.Join(axis)(*kept)


# which parts are empty is read off each part's static shape, anywhere in the list: code filters it
join_of_empty_parts = rule(
    "join_of_empty_parts",
    (o.Join.pattern(axis="axis"), "*parts"),
    "joined",
    CANON,
    compute={"joined": nonempty_join},
    keeps_type=True,
    examples=("join(x, e, y, axis=0)", "join(e, x, axis=-1)"),
    types={"x": "vector", "y": "vector", "e": "(0,)"},
    doc="""join(a, e, b) -> join(a, b) where static shapes prove e empty along the joined axis
    (PyTensor's local_join_empty): it adds no element.  Not where dropping it would change the result's
    dtype.  Exact where the left side is defined.""",
)


def is_matrix(value: Any) -> bool:
    """Whether `value` is a 2-d graph variable."""
    return isinstance(value, Variable) and value.ndim == 2


TRANSPOSE = o.DimShuffle(2, (1, 0))

transpose_of_dot = rule(
    "transpose_of_dot",
    (
        TRANSPOSE,
        (o.dot, {"pattern": "A", "constraint": is_matrix}, {"pattern": "B", "constraint": is_matrix}),
    ),
    (o.dot, (TRANSPOSE, "B"), (TRANSPOSE, "A")),
    CANON,
    semantics="reassociates",
    examples=("transpose(A @ B)",),
    types={"A": "(2, 3)", "B": "(3, 4)"},
    doc="""(A @ B).T -> B.T @ A.T for matrices (PyTensor's local_lift_transpose_through_dot): the
    transposes move onto the operands, where they fold into others or into the product's BLAS call.
    The same products are summed, maybe in another order.""",
)


def is_zero_scalar(value: Any) -> bool:
    """Whether `value` is a 0-d constant zero."""
    return isinstance(value, Constant) and value.ndim == 0 and bool(value.data == 0)


def product_zeros(product: Variable) -> Variable | None:
    """Zeros of `product`'s type, where static shapes know every length of it."""
    if None in product.type.shape:
        return None
    return o.Alloc(product.type.shape)(Constant(TensorType(product.dtype, ()), 0))


def zeros_dot_y(zero: Constant, shape: tuple, y: Variable) -> Variable | None:
    """Zeros shaped like dot(alloc(zero, shape), y)."""
    return product_zeros(o.dot(o.Alloc(shape)(zero), y))


def y_dot_zeros(zero: Constant, shape: tuple, y: Variable) -> Variable | None:
    """Zeros shaped like dot(y, alloc(zero, shape))."""
    return product_zeros(o.dot(y, o.Alloc(shape)(zero)))


_ZERO = {"pattern": "zero", "constraint": is_zero_scalar}
_DOT_ZEROS_DOC = """{text} -> zeros of the product's static shape and dtype (PyTensor's local_0_dot_x):
    nothing to multiply.  Unsafe: 0 * inf is NaN, so valid where y is finite.  Needs the product's
    lengths known statically (an Alloc takes static lengths)."""

dot_of_zeros = rule(
    "dot_of_zeros",
    (o.dot, (o.Alloc.pattern(shape="shape"), _ZERO), "y"),
    "zeros",
    UNSAFE,
    compute={"zeros": zeros_dot_y},
    keeps_type=True,
    examples=("dot(alloc(0.0, 2, 3), M)", "dot(alloc(0.0, 3), M)"),
    types={"M": "(3, 4)"},
    doc=_DOT_ZEROS_DOC.format(text="dot(zeros, y)"),
)
dot_with_zeros = rule(
    "dot_with_zeros",
    (o.dot, "y", (o.Alloc.pattern(shape="shape"), _ZERO)),
    "zeros",
    UNSAFE,
    compute={"zeros": y_dot_zeros},
    keeps_type=True,
    examples=("dot(M, alloc(0.0, 4, 2))", "dot(M, alloc(0.0, 4))"),
    types={"M": "(3, 4)"},
    doc=_DOT_ZEROS_DOC.format(text="dot(y, zeros)"),
)


# -- chains of shape ops ---------------------------------------------------------------------------


def composed_dimshuffle(inner: tuple, outer: tuple, x: Variable) -> Variable | None:
    """The DimShuffle doing order `inner` then `outer` applied to x (x itself when it moves nothing)."""
    order = tuple("x" if axis == "x" else inner[axis] for axis in outer)
    if order == tuple(range(x.ndim)):
        return x
    return o.DimShuffle(x.ndim, order)(x)


# the composed order is computed from both, and when it moves nothing the result is x itself: code
dimshuffle_chain = rule(
    "dimshuffle_chain",
    (o.DimShuffle.pattern(new_order="outer"), (o.DimShuffle.pattern(new_order="inner"), "x")),
    "composed",
    CANON,
    examples=("transpose(transpose(A))", "transpose(transpose(t))"),
    types={"A": "matrix", "t": "(2, None, 3)"},
    compute={"composed": composed_dimshuffle},
    keeps_type=True,
    doc="DimShuffle(DimShuffle(x)) -> one DimShuffle of x, or x itself (the transpose of a transpose).",
)


def reshaped_once(inner: tuple, outer: tuple, x: Variable) -> Variable:
    """Reshape(outer)(x), with the static shape the chain ends with where it is known (-1 resolved)."""
    shape = o.Reshape(outer)(o.Reshape(inner)(x)).type.shape
    return o.Reshape(shape if None not in shape else outer)(x)


# the chain's static shape (-1 resolved through the middle) is computed from both shapes and x's type
reshape_chain = rule(
    "reshape_chain",
    (o.Reshape.pattern(shape="outer"), (o.Reshape.pattern(shape="inner"), "x")),
    "reshaped",
    CANON,
    examples=("x.reshape(3, 2).reshape(6)",),
    types={"x": "(2, 3)"},
    compute={"reshaped": reshaped_once},
    keeps_type=True,
    doc="Reshape(s2)(Reshape(s1)(x)) -> Reshape(s2)(x) (with -1 resolved when the static shape is known).",
)


def as_dimshuffle(shape: tuple[int, ...], x: Variable) -> Variable | None:
    """x reshaped to `shape` as a DimShuffle, where the reshape only adds or drops length-1 axes: x's
    other lengths, static, come in the same order (a -1 stands for the one length left); else None."""
    lengths = x.type.shape
    if None in lengths:
        return None
    if shape.count(-1) == 1:
        known = int(np.prod([d for d in shape if d != -1]))
        if known == 0 or int(np.prod(lengths)) % known:
            return None
        shape = tuple(int(np.prod(lengths)) // known if d == -1 else d for d in shape)
    kept = [axis for axis, d in enumerate(lengths) if d != 1]
    if [lengths[a] for a in kept] != [d for d in shape if d != 1]:
        return None
    axes = iter(kept)
    order = tuple("x" if d == 1 else next(axes) for d in shape)
    return o.DimShuffle(x.ndim, order)(x)


reshape_to_dimshuffle = rule(
    "reshape_to_dimshuffle",
    (o.Reshape.pattern(shape="shape"), "x"),
    "moved",
    CANON,
    compute={"moved": as_dimshuffle},
    keeps_type=True,
    examples=("v.reshape(3, 1)", "m.reshape(1, 2, 3)", "c.reshape(3)", "c.reshape(1, -1)"),
    types={"v": "(3,)", "m": "(2, 3)", "c": "(3, 1)"},
    doc="""Reshape(s)(x) -> a DimShuffle of x, where s only adds or drops length-1 axes (x's other
    static lengths in the same order; PyTensor's local_reshape_to_dimshuffle): a view, and the rules on
    DimShuffles (merges, reductions of new axes) see it.  Exact.""",
)

# -- reductions ------------------------------------------------------------------------------------


def finite_nonzero_divisor(x: Variable, s: Any) -> bool:
    """Whether `s` is a 0-d finite non-zero constant of float x's dtype (x / s divides by a number)."""
    if not is_float(x) or not isinstance(s, Constant) or s.ndim != 0 or s.dtype != x.dtype:
        return False
    return bool(np.isfinite(s.data)) and bool(s.data != 0)


def scalar_divisor(x: Variable, s: Any) -> bool:
    """Whether `s` is a 0-d variable of float x's dtype."""
    return is_float(x) and isinstance(s, Variable) and s.ndim == 0 and s.dtype == x.dtype


sum_div_scalar = rule(
    "sum_div_scalar",
    (o.Sum.pattern(axis="axis"), (o.true_div, "x", "s")),
    (o.true_div, (o.Sum.pattern(axis="axis"), "x"), "s"),
    CANON,
    where=finite_nonzero_divisor,
    keeps_type=True,
    semantics="reassociates",
    examples=("sum(x / 4)", "sum(X / 3, axis=0)"),
    types={"x": "vector", "X": "matrix"},
    doc="""sum(x / c) -> sum(x) / c for a finite non-zero 0-d constant c (PyTensor's
    local_sum_prod_of_mul_or_div): one division instead of one per element.  Reassociates: the
    quotients' sum rounds differently, and sum(x) may overflow where sum(x / c) does not.""",
)

sum_div_scalar_general = rule(
    "sum_div_scalar_general",
    (o.Sum.pattern(axis="axis"), (o.true_div, "x", "s")),
    (o.true_div, (o.Sum.pattern(axis="axis"), "x"), "s"),
    UNSAFE,
    assumptions=("s != 0",),
    where=scalar_divisor,
    keeps_type=True,
    examples=("sum(x / s)", "sum(X / s, axis=1)"),
    types={"x": "vector", "X": "matrix", "s": "scalar"},
    doc="""sum(x / s) -> sum(x) / s for any 0-d s of x's dtype (unsafe: at s = 0 the quotients are
    infinities of both signs, whose sum is NaN where sum(x) / 0 is one infinity).""",
)


def prod_hoisted_scalars(axis: tuple | None, terms: tuple) -> Variable | None:
    """prod(mul(*terms), axis) as s ** n * prod(t) for the 0-d factors s among float `terms` of one
    dtype, n the number of elements the product takes (known from static shapes)."""
    dtype = terms[0].dtype
    if any(f.dtype != dtype for f in terms) or not is_float(terms[0]):
        return None
    scalars = [f for f in terms if f.ndim == 0]
    tensors = [f for f in terms if f.ndim != 0]
    if not scalars or not tensors:
        return None
    body = tensors[0] if len(tensors) == 1 else o.mul(*tensors)
    if body.type != o.mul(*terms).type:  # n counts the elements of the product: no 0-d factor may widen it
        return None
    shape = body.type.shape
    axes = range(body.ndim) if axis is None else {a % body.ndim for a in axis}
    if any(shape[a] is None for a in axes):
        return None
    n = constant(np.array(int(np.prod([shape[a] for a in axes])), dtype=dtype))
    return o.mul(*(o.pow(s, n) for s in scalars), o.Prod(axis)(body))


# which factors are hoisted depends on their ranks, anywhere in the list: code splits it
prod_scalar_mul = rule(
    "prod_scalar_mul",
    (o.Prod.pattern(axis="axis"), (o.mul, "*terms")),
    "hoisted",
    CANON,
    semantics="reassociates",
    examples=("prod(s * v)", "prod(mul(2, M), axis=0)"),
    types={"v": "(3,)", "M": "(2, 3)", "s": "scalar"},
    compute={"hoisted": prod_hoisted_scalars},
    keeps_type=True,
    doc="""prod(s * t) -> s ** n * prod(t) for 0-d factors s, n the number of elements multiplied
    (static; PyTensor's local_sum_prod_of_mul_or_div): one power instead of n products by s.  Floats
    of one dtype; reassociates: s ** n may overflow or underflow where the interleaved product does
    not, and the factors are multiplied in another order.""",
)


def hoisted_scalars(constants_only: bool, axis: tuple | None, terms: tuple) -> Variable | None:
    """sum(mul(*terms)) as c * sum(t), for the 0-d factors c (finite constants when asked) among `terms`."""
    dtype = terms[0].dtype
    if any(f.dtype != dtype for f in terms):
        return None

    def hoisted(f: Variable) -> bool:
        if f.ndim != 0:
            return False
        return not constants_only or (isinstance(f, Constant) and bool(np.all(np.isfinite(f.data))))

    scalars = [f for f in terms if hoisted(f)]
    tensors = [f for f in terms if not hoisted(f)]
    if not scalars or not tensors:
        return None
    summed = o.Sum(axis)(tensors[0] if len(tensors) == 1 else o.mul(*tensors))
    return o.mul(*scalars, summed) if summed.dtype == dtype else None


def sunk_scalars(hoisted: Variable) -> list[dict]:
    """The left sides `hoisted_scalars` may have come from: the scalars moved back under the sum."""
    factors = node_inputs(hoisted, o.mul) if isinstance(hoisted, Variable) else None
    if factors is None:
        return []
    sums = [f for f in factors if node_inputs(f, kind=o.Sum) is not None]
    if len(sums) != 1 or any(f.ndim != 0 for f in factors if f is not sums[0]):
        return []
    axis, (summed,) = sums[0].owner.op.axis, sums[0].owner.inputs
    scalars = tuple(f for f in factors if f is not sums[0])
    candidates = [(*scalars, summed)]
    inner = node_inputs(summed, o.mul)
    if inner is not None:
        candidates.insert(0, (*scalars, *inner))
    return [{"axis": axis, "terms": terms} for terms in candidates]


# which factors are hoisted depends on their ranks and values, anywhere in the list: code splits it
sum_scalar_mul = rule(
    "sum_scalar_mul",
    (o.Sum.pattern(axis="axis"), (o.mul, "*terms")),
    "hoisted",
    CANON,
    semantics="reassociates",
    examples=("sum(2 * v)", "sum(mul(2, v, w), axis=0)"),
    types={"v": "vector", "w": "vector"},
    compute={"hoisted": Computed(partial(hoisted_scalars, True), sunk_scalars)},
    keeps_type=True,
    doc="""sum(c * t) -> c * sum(t) for finite 0-d constants c (any axes).  Reassociates: the sum of the
    products rounds differently from the product of the sum, and sum(t) may overflow where sum(c * t)
    does not (c < 1); NaN and infinite elements of t propagate as before.""",
)

# which factors are hoisted depends on their ranks, anywhere in the list: code splits it
sum_scalar_mul_general = rule(
    "sum_scalar_mul_general",
    (o.Sum.pattern(axis="axis"), (o.mul, "*terms")),
    "hoisted",
    UNSAFE,
    examples=("sum(c * v)", "sum(mul(c, v), axis=0)"),
    types={"v": "matrix"},
    compute={"hoisted": Computed(partial(hoisted_scalars, False), sunk_scalars)},
    keeps_type=True,
    doc="sum(c * t) -> c * sum(t) for any 0-d factor c (unsafe: at c = inf, a zero in t makes NaN inf).",
)

"""Quotients: Aesara's mul canonicalization (Theano's `local_mul_canonizer`), and its greedy distributor.

A product of quotients and reciprocals, at any depth, is read as one
numerator and one denominator, lists of factors (`quotient_parts`): x / y / z
is x over (y, z), (a / b) * (b / c) over (a, b) and (b, c).  The canonical
form is one division of two flat products, ``num / denum``, the 0-d
constants among the factors combined into one: it goes to the side whose
constants were larger, so ``(-1 * x) / y / (-2 * z)`` becomes
``x / (2 * y * z)``, ``(2 * x) / (4 * y)`` becomes ``x / (2 * y)`` and
``2 * x / 2`` becomes x.  `mul_div_canonical` rewrites a product or quotient
into that form where it takes fewer divisions or fewer constants (it never
adds either, so the rules reach a fixed point); its factors must all have the
result's floating dtype (`regroupable`): an integer product would wrap around
where the quotient does not.  It `reassociates`: x / y / z -> x / (y * z)
rounds differently and y * z may overflow where the quotients did not.

Cancelling a factor that is not a constant, x / y / x -> 1 / y, is valid only
where it is finite and nonzero (0 / 0 and inf / inf are NaN):
`mul_div_cancel_common` does it, tagged unsafe with the assumption x != 0,
as `mul_div_cancel` and `div_self` are.  A cancelled factor that could widen
the result leaves ones shaped like it (fill(x, 1)).

The greedy distributor (`greedy_distributor`, Theano's
`local_greedy_distributor`) multiplies a sum by the factors of a product it
sits in where every term's denominator then loses a factor: ``(a / z + b / x)
* x * z -> a * x + b * z``, fewer divisions than before or it does not fire.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable
from relwrite.relations.operands import (
    constant_result,
    neutral_like,
    same_graph,
    shaped_within,
    sorted_terms,
    typed_constant,
    uniform_graphs,
    variadic_applied,
)
from relwrite.relations.predicates import node_inputs
from relwrite.relations.registry import CANON, UNSAFE, rule

QUOTIENT_BUDGET = 256
"""How many nodes `quotient_parts` looks through before it gives up (keeps the rules linear)."""


class Parts:
    """A product read as numerator and denominator factor lists, with what reading it walked through."""

    __slots__ = ("den", "divisions", "dtype", "num")

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.num: list[Variable] = []
        self.den: list[Variable] = []
        self.divisions = 0  # the quotients and reciprocals read through


def quotient_parts(
    numerators: Sequence[Variable], denominators: Sequence[Variable], divisions: int | None = None
) -> Parts | None:
    """The factors of prod(numerators) / prod(denominators), read through products, quotients and
    reciprocals of one floating dtype at any depth (None past `QUOTIENT_BUDGET` nodes, or for operands
    of several dtypes or of no float dtype).  `divisions` counts the divisions the root makes (by
    default one where there are denominators: the division of the two)."""
    graphs = uniform_graphs((*numerators, *denominators))
    if graphs is None or graphs[0].type.numpy_dtype.kind != "f":
        return None
    parts = Parts(graphs[0].dtype)
    parts.divisions = (1 if denominators else 0) if divisions is None else divisions
    stack = [(g, False) for g in reversed(denominators)] + [(g, True) for g in reversed(numerators)]
    seen = 0
    while stack:
        g, up = stack.pop()
        seen += 1
        if seen > QUOTIENT_BUDGET:
            return None
        factors = node_inputs(g, o.mul)
        if factors is not None and _of_dtype(factors, parts.dtype):
            stack.extend((f, up) for f in reversed(factors))
            continue
        quotient = node_inputs(g, o.true_div)
        if quotient is not None and _of_dtype(quotient, parts.dtype):
            parts.divisions += 1
            stack.extend(((quotient[1], not up), (quotient[0], up)))
            continue
        inverse = node_inputs(g, o.reciprocal)
        if inverse is not None and _of_dtype(inverse, parts.dtype):
            parts.divisions += 1
            stack.append((inverse[0], not up))
            continue
        (parts.num if up else parts.den).append(g)
    return parts


def _of_dtype(graphs: Sequence[Variable], dtype: str) -> bool:
    return all(g.dtype == dtype for g in graphs)


def _is_scalar_constant(g: Variable) -> bool:
    return isinstance(g, Constant) and g.ndim == 0


def _at_most_one(c: Constant) -> bool:
    """Whether a 0-d constant's magnitude is not above 1 (NaN included), as a float: abs(complex(nan))
    raised OverflowError where an earlier C call had left errno at ERANGE (CPython's complex abs reads
    errno, which it sets for finite values only; seed 44, graph 1174), and NumPy's abs of int8 -128
    wraps around."""
    return not abs(float(c.data)) > 1


class Combined:
    """The 0-d constants of `Parts` combined: how many there were, and the one that replaces them
    (on the numerator's side or the denominator's, or None when it is one)."""

    __slots__ = ("count", "den", "num")

    def __init__(self, count: int, num: Constant | None, den: Constant | None):
        self.count, self.num, self.den = count, num, den

    @property
    def kept(self) -> int:
        return (self.num is not None) + (self.den is not None)


def combined_constants(parts: Parts) -> Combined | None:
    """The 0-d constants among the factors as one constant c = N / D (N, D the products of the
    numerator's and denominator's), put on the side whose product is larger in magnitude (D / N on the
    denominator's); None where a product or the quotient overflows, underflows, is zero or not finite
    (a zero constant is mul_zero's, a division by zero is left as it is)."""
    dtype = parts.dtype
    n = [g.data for g in parts.num if _is_scalar_constant(g)]
    d = [g.data for g in parts.den if _is_scalar_constant(g)]
    count = len(n) + len(d)
    if count == 0:
        return Combined(0, None, None)
    num, den = _product(n, dtype), _product(d, dtype)
    if num is None or den is None or not num.all() or not den.all():
        return None
    if not (np.isfinite(num) and np.isfinite(den)):
        return None
    on_top = abs(num) >= abs(den)
    try:
        with np.errstate(all="raise"):
            value = np.asarray(num / den if on_top else den / num, dtype=dtype)
    except FloatingPointError:
        return None
    if value == 1:
        return Combined(count, None, None)
    constant = typed_constant(value, dtype)
    return Combined(count, constant, None) if on_top else Combined(count, None, constant)


def _product(values: list[np.ndarray], dtype: str) -> np.ndarray | None:
    """The product of 0-d constants' values in `dtype` (1 of none; None where it overflows or underflows)."""
    if len(values) < 2:
        return np.asarray(values[0] if values else 1, dtype=dtype)
    return constant_result(np.multiply, values, dtype, wraps=False)


def _variables(graphs: list[Variable]) -> list[Variable]:
    return [g for g in graphs if not _is_scalar_constant(g)]


def built_quotient(num: list[Variable], den: list[Variable], dtype: str) -> Variable | None:
    """prod(num) / prod(den): the numerator alone without a denominator, 1 / prod(den) without a
    numerator (None without either)."""
    if not num and not den:
        return None
    top = _sorted_product(num) if num else typed_constant(1, dtype)
    return top if not den else o.true_div(top, _sorted_product(den))


def _sorted_product(factors: list[Variable]) -> Variable | None:
    """The product of `factors` in sort_mul's order, so the canonical quotient is not sorted again."""
    return variadic_applied(o.mul, sorted_terms(factors) or factors)


def canonical_quotient(parts: Parts, cancelled: list[Variable]) -> Variable | None:
    """The canonical quotient of `parts` (constants combined) whose `cancelled` factors, gone from both
    sides, leave ones shaped like them where they could widen what remains; None where it would take
    as many divisions and constants as the graph read, and cancels nothing."""
    constants = combined_constants(parts)
    if constants is None:
        return None
    num, den = _variables(parts.num), _variables(parts.den)
    divisions = 1 if den or constants.den is not None else 0
    fewer = (divisions, constants.kept) != (parts.divisions, constants.count)
    if not cancelled and not (divisions <= parts.divisions and constants.kept <= constants.count and fewer):
        return None
    remaining = num + den
    ones = [
        neutral_like(o.mul, g, parts.dtype)
        for g in cancelled
        if not (remaining and shaped_within((g,), remaining))
    ]
    top = ([constants.num] if constants.num is not None else []) + ones + num
    bottom = ([constants.den] if constants.den is not None else []) + den
    return built_quotient(top, bottom, parts.dtype)


def commonly_cancelled(parts: Parts) -> list[Variable]:
    """The non-constant factors found on both sides (each pair once), taken out of `parts`' lists."""
    gone = []
    for g in list(parts.num):
        if _is_scalar_constant(g):
            continue
        j = next((k for k, h in enumerate(parts.den) if same_graph(g, h)), None)
        if j is not None:
            del parts.den[j]
            parts.num.remove(g)
            gone.append(g)
    return gone


# reading the numerator and denominator flattens products and quotients at any depth: code walks them
def quotient_of(x: Variable, y: Variable) -> Variable | None:
    """x / y in the canonical form, where it takes fewer divisions or constants (`canonical_quotient`)."""
    parts = quotient_parts((x,), (y,))
    return None if parts is None else canonical_quotient(parts, [])


# reading the reciprocal's argument flattens products and quotients at any depth: code walks them
def reciprocal_of(x: Variable) -> Variable | None:
    """1 / x in the canonical form, where it takes fewer divisions or constants (reciprocal(a / b) is
    b / a)."""
    parts = quotient_parts((), (x,), divisions=1)
    return None if parts is None else canonical_quotient(parts, [])


# the factors' quotients are read at any depth, anywhere in the list: code walks them
def product_of(terms: tuple) -> Variable | None:
    """The product of `terms` in the canonical form, where it takes fewer divisions or constants."""
    parts = quotient_parts(terms, ())
    return None if parts is None else canonical_quotient(parts, [])


def _cancellation(parts: Parts | None) -> tuple[Variable, Variable] | None:
    """(the product of the factors common to both sides of `parts`, what remains in the canonical form),
    or None where no factor is common.  The product is what the unsafe rules' assumption is about: the
    left side is NaN where any cancelled factor is 0 or infinite."""
    if parts is None:
        return None
    gone = commonly_cancelled(parts)
    if not gone:
        return None
    cancelled = canonical_quotient(parts, gone)
    return None if cancelled is None else (_sorted_product(gone), cancelled)


def cancellation(n: Variable, d: Variable) -> tuple[Variable, Variable] | None:
    """`_cancellation` of n / d (read once: the rule binds both halves)."""
    return _cancellation(quotient_parts((n,), (d,)))


def product_cancellation(terms: tuple) -> tuple[Variable, Variable] | None:
    """`_cancellation` of the product of `terms`, quotients and reciprocals read at any depth."""
    return _cancellation(quotient_parts(terms, ()))


def _cancelling(cancellation_of: Callable[..., tuple | None]) -> dict[str, Callable[..., Any]]:
    """A cancelling rule's computed values: the cancellation read once, the product of the factors it
    cancels (`x`, what the assumption is about) and what remains (`cancelled`)."""
    return {
        "cancellation": cancellation_of,
        "x": lambda cancellation: cancellation[0],
        "cancelled": lambda cancellation: cancellation[1],
    }


# the factors' quotients are read at any depth, anywhere in the list: code walks them
mul_cancel_common = rule(
    "mul_cancel_common",
    (o.mul, "*terms"),
    "cancelled",
    UNSAFE,
    assumptions=("x != 0",),
    examples=("(x * y / y) * (z / x)", "(a / b) * (b / c)", "mul(x / y, z, y / x)"),
    compute=_cancelling(product_cancellation),
    keeps_type=True,
    screen=lambda value: _reads_quotient(value),
    composes=("mul_of_quotients", "mul_div_cancel_common", "mul_cancel"),
    doc="""(x * y / y) * (z / x) -> z, (a / b) * (b / c) -> a / c: a product read as one numerator and one
    denominator (as mul_of_quotients reads it), the factors common to both cancelled and the rest in the
    canonical form, in one step (mul_of_quotients, then mul_div_cancel_common, build and commit the
    canonical quotient first: exploration, which has those, leaves this rule out).  Floats;
    unsafe: where a cancelled factor is 0 or infinite the left side is NaN, so valid where x, their
    product, is finite and nonzero.  A cancelled factor that could widen the result leaves ones shaped
    like it.""",
)

mul_div_canonical = rule(
    "mul_div_canonical",
    (o.true_div, "x", "y"),
    "canonical",
    CANON,
    semantics="reassociates",
    examples=("(x / y) / z", "(2 * x) / (4 * y)", "(-1 * x) / y / (-2 * z)", "2 * x / 2", "x / (y / z)"),
    compute={"canonical": quotient_of},
    keeps_type=True,
    idempotent=True,
    screen=lambda value: _may_regroup_quotient(value),
    operand_screen=lambda value: _may_regroup_factors(value),
    doc="""x / y / z -> x / (y * z), (2 * x) / (4 * y) -> x / (2 * y), 2 * x / 2 -> x: a quotient read as
    one numerator and one denominator (products, quotients and reciprocals at any depth, floats of one
    dtype) and written as one division of two products, the 0-d constants combined into one on the side
    whose constants were larger (Aesara's local_mul_canonizer).  Only where that takes fewer divisions
    or constants.  Reassociates: the factors are multiplied in another order, and a product of divisors
    may overflow where the successive quotients did not.""",
)

mul_of_quotients = rule(
    "mul_of_quotients",
    (o.mul, "*terms"),
    "canonical",
    CANON,
    semantics="reassociates",
    examples=("(a / b) * (c / d)", "mul(2, x / 4)", "(a / b) * (b / c) * (c / d)"),
    compute={"canonical": product_of},
    keeps_type=True,
    idempotent=True,
    doc="""(a / b) * (c / d) -> (a * c) / (b * d), 2 * (x / 4) -> x / 2: a product of quotients and
    reciprocals written as one division of two products, the 0-d constants combined (as
    mul_div_canonical), where that takes fewer divisions or constants.  Reassociates.""",
    screen=lambda value: _may_regroup_product(value),
)


def _may_regroup_quotient(value: Any) -> bool:
    """A screen of mul_div_canonical: x / y of two other operands can only lose a 0-d constant divisor
    of magnitude at most 1 (x / 1 -> x, x / 0.5 -> 2 * x); a larger one, or a constant numerator
    other than 1, is in canonical form already.  Either operand a product, quotient or reciprocal
    passes."""
    node = value.owner if isinstance(value, Variable) else None
    if node is None or len(node.inputs) != 2 or _reads_quotient(value, o.mul):
        return True
    numerator, denominator = node.inputs
    if isinstance(numerator, Constant) and isinstance(denominator, Constant):
        return True
    if _is_scalar_constant(numerator):  # c / y: written again as it is, c = 1 included
        return bool(np.all(numerator.data == 1))
    if not _is_scalar_constant(denominator):
        return False
    return _at_most_one(denominator)


def _may_regroup_factors(value: Variable) -> bool:
    """An operand screen of mul_div_canonical, `_may_regroup_quotient` one level down: with the factors of
    both sides in view, a quotient holding no nested product, quotient or reciprocal (what `quotient_parts`
    reads deeper) takes one division already, so only its 0-d constants can go: two or more combined,
    a 1 dropped, or a divisor of magnitude at most 1 moved up (x / 0.5 -> 2 * x)."""
    constants: list[tuple[Constant, bool]] = []
    for side, divides in zip(value.owner.inputs, (False, True)):
        owner = side.owner
        factors = owner.inputs if owner is not None and owner.op == o.mul else (side,)
        for factor in factors:
            inner = factor.owner
            if inner is not None and any(inner.op == h for h in (o.mul, o.true_div, o.reciprocal)):
                return True
            if _is_scalar_constant(factor):
                constants.append((factor, divides))
    if len(constants) > 1:
        return True
    return any(bool(np.all(c.data == 1)) or (divides and _at_most_one(c)) for c, divides in constants)


def _may_regroup_product(value: Any) -> bool:
    """A screen of mul_of_quotients: a product with no quotient, reciprocal or product among its factors
    can only lose 0-d constants (two or more combined, or a 1 dropped: mul(x, -1, -1) -> x)."""
    if _reads_quotient(value, o.mul):
        return True
    constants = [g for g in value.owner.inputs if _is_scalar_constant(g)]
    return len(constants) > 1 or any(np.all(c.data == 1) for c in constants)


def _reads_quotient(value: Any, *also: Any) -> bool:
    """A screen: some operand of the node is a quotient or a reciprocal (or computed by an op of `also`)."""
    node = value.owner if isinstance(value, Variable) else None
    if node is None:
        return True
    heads = (o.true_div, o.reciprocal, *also)
    return any(i.owner is not None and any(i.owner.op == h for h in heads) for i in node.inputs)


reciprocal_of_quotient = rule(
    "reciprocal_of_quotient",
    (o.reciprocal, "x"),
    "canonical",
    CANON,
    semantics="reassociates",
    examples=("reciprocal(x / y)", "reciprocal(reciprocal(x) * y)", "reciprocal(x / (2 * y) / 4)"),
    compute={"canonical": reciprocal_of},
    keeps_type=True,
    idempotent=True,
    doc="""reciprocal(x / y) -> y / x, reciprocal(reciprocal(x) * y) -> x / y: the reciprocal of a product
    of quotients written as one division of two products, the 0-d constants combined (as
    mul_div_canonical), where that takes fewer divisions or constants.  Reassociates.""",
    screen=lambda value: _reads_quotient(value, o.mul),
)

mul_div_cancel_common = rule(
    "mul_div_cancel_common",
    (o.true_div, "n", "d"),
    "cancelled",
    UNSAFE,
    assumptions=("x != 0",),
    examples=("(x / y) / x", "(x * y * z) / (z * x)", "(a * x * c) / (x * c * d)"),
    compute=_cancelling(cancellation),
    keeps_type=True,
    doc="""x / y / x -> 1 / y, (a * b * c) / (b * c * d) -> a / d: the factors common to the numerator and
    the denominator (read as mul_div_canonical reads them) cancelled, the rest in the canonical form.
    Floats; unsafe: where a cancelled factor is 0 or infinite the left side is NaN, so valid where x,
    their product, is finite and nonzero.  A cancelled factor that could widen the result leaves ones
    shaped like it.""",
)


# -- the greedy distributor -----------------------------------------------------------------------------

DIVISION_COST = 1.5
"""What a division costs in multiplications when the distributor scores a factor (Theano's div_cost)."""


def _signed_parts(term: Variable) -> tuple[bool, Parts] | None:
    """(negated, parts) of a sum's term: neg(u) reads as u with its sign flipped."""
    inner = node_inputs(term, o.neg)
    negated = inner is not None and inner[0].dtype == term.dtype
    parts = quotient_parts((inner[0] if negated else term,), ())
    return None if parts is None else (negated, parts)


def _position(graphs: list[Variable], target: Variable) -> int | None:
    return next((k for k, g in enumerate(graphs) if same_graph(g, target)), None)


def _distribute(terms: list[tuple[bool, Parts]], factor: Variable) -> bool:
    """Multiply every term by `factor` where that saves operations (Theano's distribute_greedy score:
    the product loses a multiplication, each term whose denominator holds the factor a division, each
    other term gains a multiplication); True when it did (the terms changed in place)."""
    cancels = [_position(parts.den, factor) for _, parts in terms]
    hits = sum(j is not None for j in cancels)
    if 1 + DIVISION_COST * hits - (len(terms) - hits) <= 0:
        return False
    for (_, parts), j in zip(terms, cancels):
        if j is None:
            parts.num.append(factor)
        else:
            del parts.den[j]
    return True


def _divides(term: Variable) -> bool:
    """Whether a sum's term is (the negation of) a quotient or a reciprocal: what the distributor needs
    some term to be (the canonical form puts a product's divisions at its top)."""
    inner = node_inputs(term, o.neg)
    head = (inner[0] if inner is not None else term).owner
    return head is not None and (head.op == o.true_div or head.op == o.reciprocal)


def _rebuilt_term(negated: bool, parts: Parts) -> Variable:
    num = parts.num or [typed_constant(1, parts.dtype)]
    quotient = built_quotient(num, parts.den, parts.dtype)
    return o.neg(quotient) if negated else quotient


def distributed(terms: tuple) -> tuple[Variable | None, Variable | None]:
    """(the first factor distributed, the product with its factors distributed into its sums where
    that saves operations), or (None, None)."""
    graphs = uniform_graphs(terms)
    if graphs is None or graphs[0].type.numpy_dtype.kind != "f" or len(graphs) < 2:
        return None, None
    factors, moved, first = list(graphs), [], None
    for i, g in enumerate(graphs):
        summands = node_inputs(g, o.add)
        if summands is None or not _of_dtype(summands, g.dtype) or not any(map(_divides, summands)):
            continue
        read = [_signed_parts(t) for t in summands]
        if any(r is None for r in read):
            continue
        changed = False
        for k, f in enumerate(factors):
            if k != i and f is not None and not _is_scalar_constant(f) and _distribute(read, f):
                factors[k] = None
                moved.append(f)
                changed = True
        if changed:
            factors[i] = o.add(*(_rebuilt_term(negated, parts) for negated, parts in read))
            first = moved[0] if first is None else first
    if first is None:
        return None, None
    result = variadic_applied(o.mul, [f for f in factors if f is not None])
    for f in moved:
        if not shaped_within((f,), (result,)):
            result = o.fill(f, result)
    return first, result


# the sums' terms are read as quotients at any depth, anywhere in the list: code walks them
greedy_distributor = rule(
    "greedy_distributor",
    (o.mul, "*terms"),
    "distributed",
    UNSAFE,
    assumptions=("x != 0",),
    examples=("(a / z + b / x) * x * z", "mul(a / x + b, x)", "mul(x, add(a / x, neg(b / x)), y)"),
    compute={
        "x": lambda terms: distributed(terms)[0],
        "distributed": lambda terms: distributed(terms)[1],
    },
    keeps_type=True,
    doc="""(a / z + b / x) * x * z -> a * x + b * z, (a / x + b) * x -> a + b * x: a factor of a product
    multiplied into a sum among its factors where that saves operations (Theano's
    local_greedy_distributor: the product loses a multiplication, each term whose denominator holds the
    factor loses a division, counted as 1.5 multiplications, each other term gains a multiplication),
    so it fires only where some division goes; (a + b) * x stays.  Floats; unsafe: where a cancelled
    factor x is 0 or infinite the left side is NaN, so valid for finite x != 0.""",
    screen=lambda value: _reads_sum(value),
    operand_screen=lambda value: _sums_a_quotient(value),
)


def _sums_a_quotient(value: Variable) -> bool:
    """An operand screen of greedy_distributor: some factor is a sum with a term that is a quotient, a
    reciprocal or a negation (of one, `_divides` reads: deeper than this screen may look)."""
    heads = (o.true_div, o.reciprocal, o.neg)
    for factor in value.owner.inputs:
        owner = factor.owner
        if (
            owner is not None
            and owner.op == o.add
            and any(t.owner is not None and any(t.owner.op == h for h in heads) for t in owner.inputs)
        ):
            return True
    return False


def _reads_sum(value: Any) -> bool:
    node = value.owner if isinstance(value, Variable) else None
    return node is None or any(i.owner is not None and i.owner.op == o.add for i in node.inputs)

"""BLAS: matrix products and their scaled updates become the BLAS ops Dot22, Gemm, Gemv and Ger.

`dot_to_dot22` is exact.  The update rules reassociate: the right side
computes the same terms, but a sum's terms are added in another order and
the BLAS op scales and adds inside one call, so results may round
differently, and an intermediate may overflow where the left side's did not
(see docs/rule-safety.md); NaN and Inf propagate as before.  They regroup
a sum's terms only when they share one dtype, and a term's scalar factors
only when there is one or the factors share one dtype (`predicates.regroupable`:
a narrower integer product would wrap around elsewhere).  The BLAS ops need
one float dtype (float32 or float64) for all their inputs; a scalar factor
of another dtype is converted the way numpy promotes it (a constant is
re-typed, a variable cast), and a rule that would change the result's dtype
fails.

Shapes: `gemm(Z, a, X, Y, b)` is `b * Z + a * (X @ Y)` with numpy
broadcasting between the two terms, as the sum it replaces.  The ops infer
their static shape assuming the two terms have equal shapes, so every update
rule checks that the BLAS node's static type is exactly the type of the sum
of the terms it absorbs (a static length 1 that the other term does not
share is refused).

The update rules find their terms among the operands of a canonical sum (add
is variadic and flattened; subtraction is addition of a negation) and keep
the other operands: ``c + a * dot(X, Y) + b * Z -> c + gemm(Z, a, X, Y, b)``.
A term's scalar factors are its 0-d factors under at most one negation
(``neg(mul(a, dot(X, Y)))`` has factor ``-a``); missing factors are 1.
Run backward, a BLAS node becomes the plain sum of its terms, with factors of
1 and -1 written as nothing and a negation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from kanren.core import eq, lall
from unification import var
from unification.utils import transitive_get as walk

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.terms import note_read
from relwrite.graph.types import TensorType
from relwrite.relations.goals import along, bound_graph, operandso, picko, variadico, whereo
from relwrite.relations.operands import applied, constant_result
from relwrite.relations.pattern import as_graph
from relwrite.relations.predicates import is_literal, node_inputs, operands_regroupable, regroupable
from relwrite.relations.registry import relation, rule

BLAS = ("blas", "specialize", "fast_run")
BLAS_DTYPES = ("float32", "float64")

Goal = Callable[[Any], Iterator[Any]]
Split = Callable[[Variable], Iterator[tuple[Variable, Variable]]]
Join = Callable[[Variable, Variable], Variable]


def _float_matrices(product: Variable) -> bool:
    """Whether a dot's inputs are matrices of one BLAS dtype."""
    x, y = product.owner.inputs
    return x.ndim == 2 == y.ndim and x.dtype == y.dtype and x.dtype in BLAS_DTYPES


dot_to_dot22 = rule(
    "dot_to_dot22",
    {"pattern": (o.dot, "X", "Y"), "constraint": _float_matrices},
    (o.dot22, "X", "Y"),
    BLAS,
    examples=["dot(X, Y)", "X @ Y"],
    types={"X": "(3,4)", "Y": "(4,2)"},
    doc="dot(X, Y) -> dot22(X, Y) for matrices of one float dtype (a BLAS gemm call; exact: the same"
    " product)",
)


# -- graph helpers -----------------------------------------------------------------------------


def _in_dtype(scalar: Variable, dtype: str) -> Variable:
    """A 0-d `scalar` converted to `dtype` the way numpy promotes it next to an array of `dtype`."""
    if scalar.dtype == dtype:
        return scalar
    if isinstance(scalar, Constant):
        try:
            return Constant(TensorType(dtype, ()), scalar.data)
        except TypeError:  # not exactly representable: let the cast round it as numpy would
            pass
    return o.cast(scalar, dtype)


def _factors(term: Variable) -> tuple[bool, list[Variable], list[Variable]]:
    """`term` as (negated, its 0-d factors, its other factors), looking through one neg and one mul."""
    negated = False
    inner = node_inputs(term, o.neg)
    if inner is not None:
        negated, term = True, inner[0]
    factors = node_inputs(term, o.mul)
    if factors is None:
        return negated, [], [term]
    scalars = [f for f in factors if f.ndim == 0]
    if len(scalars) > 1 and not regroupable(factors):  # their product would wrap around elsewhere
        return negated, [], [term]
    return negated, scalars, [f for f in factors if f.ndim != 0]


def _has_scale(term: Any) -> bool:
    """Whether `term` is a graph term with a scalar factor or a negation to absorb."""
    if not isinstance(term, Variable):
        return False
    negated, scalars, others = _factors(term)
    return (negated or bool(scalars)) and len(others) == 1


def _scale(negated: bool, scalars: list[Variable], dtype: str) -> Variable:
    """The 0-d factor ±prod(scalars) in `dtype` (a constant when there are no scalars)."""
    if not scalars:
        return Constant(TensorType(dtype, ()), -1 if negated else 1)
    factor = _in_dtype(scalars[0] if len(scalars) == 1 else o.mul(*scalars), dtype)
    if not negated:
        return factor
    if isinstance(factor, Constant):  # a float: its negation always fits
        return Constant(factor.type, constant_result(np.negative, [factor.data], dtype, wraps=True))
    return o.neg(factor)


def _scaled(factor: Variable, term: Variable) -> Variable:
    """factor * term, written without the factor when it is 1 and as a negation when it is -1."""
    if is_literal(factor, 1):
        return term
    if is_literal(factor, -1):
        return o.neg(term)
    return o.mul(factor, term)


# -- primitive goals ---------------------------------------------------------------------------


def scaledo(term: Any, factor: Any, base: Any) -> Goal:
    """`term` is factor * base with a 0-d factor: ±scalars * base, or base itself with factor 1."""

    def goal(state):
        whole = bound_graph(term, state)
        if whole is not None:
            if whole.dtype not in BLAS_DTYPES:
                return
            negated, scalars, others = _factors(whole)
            if len(others) == 1 and others[0] is not whole and others[0].dtype == whole.dtype:
                (core,) = others
                yield from eq((factor, base), (_scale(negated, scalars, core.dtype), core))(state)
            yield from eq((factor, base), (_scale(False, [], whole.dtype), whole))(state)
            return
        parts = bound_graph(factor, state), bound_graph(base, state)
        if None not in parts:
            yield from eq(term, _scaled(*parts))(state)

    return goal


def producto(term: Any, factor: Any, left: Any, right: Any, split: Split, join: Join) -> Goal:
    """`term` is factor * product(left, right) with a 0-d factor.

    `split(core)` gives the (left, right) a product term stands for, `join`
    builds the product back (for running backward).
    """

    def goal(state):
        whole = bound_graph(term, state)
        if whole is not None:
            if whole.dtype not in BLAS_DTYPES:
                return
            negated, scalars, others = _factors(whole)
            if len(others) != 1 or others[0].dtype != whole.dtype:
                return
            (core,) = others
            for pair in split(core):
                yield from eq((factor, left, right), (_scale(negated, scalars, core.dtype), *pair))(state)
            return
        parts = [bound_graph(v, state) for v in (factor, left, right)]
        if None in parts:
            return
        product = join(parts[1], parts[2])
        if product is not None:
            yield from eq(term, _scaled(parts[0], product))(state)

    return goal


def same_typeo(update: Any, *terms: Any) -> Goal:
    """The BLAS node's static type is exactly that of the sum of the terms it replaces.

    The ops infer lengths as if their terms had equal shapes; this refuses a
    node that would claim a length the broadcast sum does not know.
    """

    def goal(state):
        node = bound_graph(update, state)
        parts = [bound_graph(t, state) for t in terms]
        if node is None or None in parts:
            return
        total = applied(o.add, parts)
        if total is not None and total.type == node.type:
            yield state

    return goal


def _may_hold_product(ndim: int) -> Callable[[Any], Goal]:
    """A cheap first goal: a ground left side must be a sum of rank `ndim` with a dot among its terms.

    Forward, most sums fail here in microseconds instead of in the full
    search; an unbound left side (running backward) passes through.
    """

    def check(lhs: Any) -> Goal:
        def goal(state):
            value = as_graph(walk(lhs, state))
            if not isinstance(value, Variable) or _sum_may_hold_product(value, ndim):
                yield state

        return goal

    return check


def _sum_may_hold_product(value: Variable, ndim: int) -> bool:
    node = value.owner
    if node is None or node.op != o.add or value.ndim != ndim:
        return False
    for term in node.inputs:
        for _ in range(3):  # a product may sit under a neg and a mul
            owner = term.owner
            if owner is None:
                break
            note_read(owner)  # what a guard reads, the engine must know, to retry it when that changes
            if owner.op in (o.dot, o.dot22):
                return True
            if owner.op not in (o.neg, o.mul):
                break
            term = next((v for v in owner.inputs if v.ndim > 0), owner.inputs[-1])
    return False


def _absorbed(
    lhs: Any,
    rhs: Any,
    product: Goal,
    base: Goal,
    update: Goal,
    product_term: Any,
    base_term: Any,
    node: Any,
    ndim: int,
) -> Goal:
    """lhs = sum(others + [base_term, product_term]) and rhs = sum(others + [node]), either way round."""
    terms, rest, others, new_terms = var(prefix="terms"), var(prefix="rest"), var(prefix="others"), var()
    return lall(
        _may_hold_product(ndim)(lhs),
        along(
            lhs,
            variadico(lhs, o.add, terms),
            picko(terms, product_term, rest),
            product,
            picko(rest, base_term, others, preferred=_has_scale),
            base,
            update,
            picko(new_terms, node, others),
            variadico(rhs, o.add, new_terms),
        ),
        same_typeo(node, product_term, base_term),
        whereo(lhs, operands_regroupable),
    )


# -- products -------------------------------------------------------------------------------


def _dotnode_inputs(core: Variable) -> list[Variable] | None:
    return node_inputs(core, o.dot) or node_inputs(core, o.dot22)


def _matrix_product(core: Variable) -> Iterator[tuple[Variable, Variable]]:
    """dot(X, Y) or dot22(X, Y) of two matrices: (X, Y)."""
    found = _dotnode_inputs(core)
    if found is not None and found[0].ndim == 2 == found[1].ndim:
        yield found[0], found[1]


def _matrix_vector_product(core: Variable) -> Iterator[tuple[Variable, Variable]]:
    """dot(A, x) of a matrix and a vector: (A, x); dot(x, A): (A.T, x)."""
    found = node_inputs(core, o.dot)
    if found is None:
        return
    first, second = found
    if first.ndim == 2 and second.ndim == 1:
        yield first, second
    elif first.ndim == 1 and second.ndim == 2:
        yield o.transpose(second), first


_COLUMN, _ROW = o.DimShuffle(1, (0, "x")), o.DimShuffle(1, ("x", 0))


def _vector_of(matrix: Variable, as_matrix: Op, kept_axis: int) -> Variable:
    """The vector a one-column (one-row) matrix holds: the input of x[:, None] (x[None, :]) or a drop."""
    found = node_inputs(matrix, as_matrix)
    return found[0] if found is not None else o.DimShuffle(2, (kept_axis,))(matrix)


def _outer_product(core: Variable) -> Iterator[tuple[Variable, Variable]]:
    """dot(u, v) of a column u (static shape (n, 1)) and a row v ((1, m)): the vectors (u[:, 0], v[0])."""
    found = _dotnode_inputs(core)
    if found is None:
        return
    column, row = found
    if column.ndim == 2 == row.ndim and column.type.shape[1] == 1 and row.type.shape[0] == 1:
        yield _vector_of(column, _COLUMN, 0), _vector_of(row, _ROW, 1)


def _dot(left: Variable, right: Variable) -> Variable | None:
    return applied(o.dot, (left, right))


def _outer(x: Variable, y: Variable) -> Variable | None:
    if x.ndim != 1 or y.ndim != 1:
        return None
    return applied(o.dot, (_COLUMN(x), _ROW(y)))


# -- updates --------------------------------------------------------------------------------

_GEMM_TYPES = {"X": "(3,4)", "Y": "(4,2)", "Z": "(3,2)", "W": "(3,2)"}
_GEMV_TYPES = {"A": "(3,4)", "x": "(4,)", "y": "(3,)", "z": "(3,)", "w": "(4,)"}
_GER_TYPES = {"A": "(3,2)", "u": "(3,1)", "v": "(1,2)", "C": "(3,2)"}


@relation(
    tags=BLAS,
    semantics="reassociates",
    tracks=(o.add,),
    guard=lambda v: _sum_may_hold_product(v, 2),
    examples=["A + dot(u, v)", "A + a * dot(u, v)", "C + A + neg(a * dot(u, v))"],
    types=_GER_TYPES,
)
def add_to_ger(lhs, rhs):
    """A + a * dot(x[:, None], y[None, :]) (an outer product), among the terms of a sum -> ger(A, a, x, y).

    Reassociates: the sum's other terms are added first, then the ger.
    """
    m, a, x, y = var(prefix="A"), var(prefix="a"), var(prefix="x"), var(prefix="y")
    product_term, base_term, node = var(prefix="product"), var(prefix="base"), var(prefix="ger")
    return _absorbed(
        lhs,
        rhs,
        producto(product_term, a, x, y, _outer_product, _outer),
        eq(base_term, m),
        operandso(node, o.ger, (m, a, x, y)),
        product_term,
        base_term,
        node,
        ndim=2,
    )


@relation(
    tags=BLAS,
    semantics="reassociates",
    tracks=(o.add,),
    guard=lambda v: _sum_may_hold_product(v, 2),
    examples=[
        "a * dot(X, Y) + b * Z",
        "dot(X, Y) + Z",
        "W + a * dot(X, Y) + b * Z",
        "a * X @ Y + b * Z",
        "Z + neg(dot(X, Y))",
        "c * a * dot(X, Y) + neg(b * Z)",
    ],
    types=_GEMM_TYPES,
)
def add_to_gemm(lhs, rhs):
    """b * Z + a * dot(X, Y), among the terms of a sum -> gemm(Z, a, X, Y, b); a, b default to 1.

    Reassociates: the sum's other terms are added first, then the gemm, which
    applies a and b inside the BLAS call.
    """
    z, a, x, y, b = var(prefix="Z"), var(prefix="a"), var(prefix="X"), var(prefix="Y"), var(prefix="b")
    product_term, base_term, node = var(prefix="product"), var(prefix="base"), var(prefix="gemm")
    return _absorbed(
        lhs,
        rhs,
        producto(product_term, a, x, y, _matrix_product, _dot),
        scaledo(base_term, b, z),
        operandso(node, o.gemm, (z, a, x, y, b)),
        product_term,
        base_term,
        node,
        ndim=2,
    )


@relation(
    tags=BLAS,
    semantics="reassociates",
    tracks=(o.add,),
    guard=lambda v: _sum_may_hold_product(v, 1),
    examples=["a * dot(A, x) + b * y", "dot(A, x) + y", "w + dot(z, A) + neg(x)"],
    types=_GEMV_TYPES,
)
def add_to_gemv(lhs, rhs):
    """b * y + a * dot(A, x) (or a * dot(x, A), with A.T), among the terms of a sum -> gemv(y, a, A, x, b).

    Reassociates: the sum's other terms are added first, then the gemv, which
    applies a and b inside the BLAS call.
    """
    y, a, m, x, b = var(prefix="y"), var(prefix="a"), var(prefix="A"), var(prefix="x"), var(prefix="b")
    product_term, base_term, node = var(prefix="product"), var(prefix="base"), var(prefix="gemv")
    return _absorbed(
        lhs,
        rhs,
        producto(product_term, a, m, x, _matrix_vector_product, _dot),
        scaledo(base_term, b, y),
        operandso(node, o.gemv, (y, a, m, x, b)),
        product_term,
        base_term,
        node,
        ndim=1,
    )

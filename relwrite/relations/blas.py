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

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.terms import note_read
from relwrite.graph.types import TensorType
from relwrite.relations.operands import applied, constant_result
from relwrite.relations.predicates import is_literal, node_inputs, regroupable
from relwrite.relations.registry import rule
from relwrite.relations.runtime import Computed

BLAS = ("blas", "specialize", "fast_run")
BLAS_DTYPES = ("float32", "float64")

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


# -- the three parts of an update, each a function one way and its inverse the other ---------------


def _scalings(term: Variable) -> Iterator[tuple[Variable, Variable]]:
    """(factor, base) with term = factor * base and a 0-d factor: ±scalars * base, then (1, term)."""
    if term.dtype not in BLAS_DTYPES:
        return
    negated, scalars, others = _factors(term)
    if len(others) == 1 and others[0] is not term and others[0].dtype == term.dtype:
        yield _scale(negated, scalars, others[0].dtype), others[0]
    yield _scale(False, [], term.dtype), term


def _products(term: Variable, split: Split) -> Iterator[tuple[Variable, Variable, Variable]]:
    """(factor, left, right) with term = factor * product(left, right) and a 0-d factor."""
    if term.dtype not in BLAS_DTYPES:
        return
    negated, scalars, others = _factors(term)
    if len(others) != 1 or others[0].dtype != term.dtype:
        return
    (core,) = others
    for left, right in split(core):
        yield _scale(negated, scalars, core.dtype), left, right


def _same_type(node: Variable, *terms: Variable) -> bool:
    """The BLAS node's static type is exactly that of the sum of the terms it replaces.

    The ops infer lengths as if their terms had equal shapes; this refuses a
    node that would claim a length the broadcast sum does not know.
    """
    total = applied(o.add, terms)
    return total is not None and total.type == node.type


class _Update:
    """One BLAS update (gemm, gemv, ger) absorbing a product term and a base term of a sum.

    `absorbed(terms)` is the sum with the two replaced by the node, the
    other terms first (the rule's forward function); `expansions(result)`
    the sums whose absorption gives `result` (its inverse).  The product is
    tried at each term in order, the base at the others, scaled ones first.
    """

    def __init__(self, op: Op, split: Split, join: Join, scaled_base: bool):
        self.op, self.split, self.join, self.scaled_base = op, split, join, scaled_base

    def node(self, base_factor: Variable, base: Variable, factor: Variable, left: Variable, right: Variable):
        operands = (
            (base, factor, left, right, base_factor) if self.scaled_base else (base, factor, left, right)
        )
        return applied(self.op, operands)

    def absorbed(self, terms: tuple[Variable, ...]) -> Variable | None:
        if not regroupable(terms) or not any(_holds_product(t) for t in terms):
            return None
        for i, product_term in enumerate(terms):
            rest = terms[:i] + terms[i + 1 :]
            for factor, left, right in _products(product_term, self.split):
                for k in sorted(range(len(rest)), key=lambda k: not _has_scale(rest[k])):
                    base_term, others = rest[k], rest[:k] + rest[k + 1 :]
                    for base_factor, base in (
                        _scalings(base_term) if self.scaled_base else [(None, base_term)]
                    ):
                        node = self.node(base_factor, base, factor, left, right)
                        if node is not None and _same_type(node, product_term, base_term):
                            return node if not others else applied(o.add, (*others, node))
        return None

    def expansions(self, result: Variable) -> list[dict]:
        terms = node_inputs(result, o.add) or (result,)
        found = []
        for k, node in enumerate(terms):
            parts = node_inputs(node, self.op)
            if parts is None:
                continue
            base, factor, left, right = parts[:4]
            base_term = _scaled(parts[4], base) if self.scaled_base else base
            product = self.join(left, right)
            if product is not None:
                others, product_term = (*terms[:k], *terms[k + 1 :]), _scaled(factor, product)
                found.append({"terms": (base_term, product_term, *others)})
                found.append({"terms": (product_term, base_term, *others)})  # a product in the base
        return found


def _may_hold_product(value: Variable) -> bool:
    """An operand screen of the updates: some term is a dot, or a neg or mul of a dot, neg or mul (what
    `_holds_product` reads, seen no deeper than the terms' operands' ops)."""
    for term in value.owner.inputs:
        owner = term.owner
        if owner is None:
            continue
        if owner.op in (o.dot, o.dot22):
            return True
        if owner.op in (o.neg, o.mul) and any(
            i.owner is not None and i.owner.op in (o.dot, o.dot22, o.neg, o.mul) for i in owner.inputs
        ):
            return True
    return False


def _holds_product(term: Variable) -> bool:
    """Whether a dot sits in `term` under at most a neg and a mul (what an update can absorb)."""
    for _ in range(3):
        owner = term.owner
        if owner is None:
            return False
        note_read(owner)  # what the rule reads, the engine must know, to retry it when that changes
        if owner.op in (o.dot, o.dot22):
            return True
        if owner.op not in (o.neg, o.mul):
            return False
        term = next((v for v in owner.inputs if v.ndim > 0), owner.inputs[-1])
    return False


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


_GER = _Update(o.ger, _outer_product, _outer, scaled_base=False)
_GEMM = _Update(o.gemm, _matrix_product, _dot, scaled_base=True)
_GEMV = _Update(o.gemv, _matrix_vector_product, _dot, scaled_base=True)

# The update rules read the scalar factors and the product inside a sum's terms at any position (under a
# neg and a mul), which a pattern cannot say once for every arrangement: their right side is computed.

add_to_ger = rule(
    "add_to_ger",
    (o.add, "*terms"),
    "result",
    BLAS,
    semantics="reassociates",
    compute={"result": Computed(_GER.absorbed, inverse=_GER.expansions)},
    operand_screen=_may_hold_product,
    keeps_type=True,
    examples=["A + dot(u, v)", "A + a * dot(u, v)", "C + A + neg(a * dot(u, v))"],
    types=_GER_TYPES,
    doc="""A + a * dot(x[:, None], y[None, :]) (an outer product), among the terms of a sum -> ger(A, a,
    x, y).  Reassociates: the sum's other terms are added first, then the ger.""",
)

add_to_gemm = rule(
    "add_to_gemm",
    (o.add, "*terms"),
    "result",
    BLAS,
    semantics="reassociates",
    compute={"result": Computed(_GEMM.absorbed, inverse=_GEMM.expansions)},
    operand_screen=_may_hold_product,
    keeps_type=True,
    examples=[
        "a * dot(X, Y) + b * Z",
        "dot(X, Y) + Z",
        "W + a * dot(X, Y) + b * Z",
        "a * X @ Y + b * Z",
        "Z + neg(dot(X, Y))",
        "c * a * dot(X, Y) + neg(b * Z)",
    ],
    types=_GEMM_TYPES,
    doc="""b * Z + a * dot(X, Y), among the terms of a sum -> gemm(Z, a, X, Y, b); a, b default to 1.
    Reassociates: the sum's other terms are added first, then the gemm, which applies a and b inside
    the BLAS call.""",
)

add_to_gemv = rule(
    "add_to_gemv",
    (o.add, "*terms"),
    "result",
    BLAS,
    semantics="reassociates",
    compute={"result": Computed(_GEMV.absorbed, inverse=_GEMV.expansions)},
    operand_screen=_may_hold_product,
    keeps_type=True,
    examples=["a * dot(A, x) + b * y", "dot(A, x) + y", "w + dot(z, A) + neg(x)"],
    types=_GEMV_TYPES,
    doc="""b * y + a * dot(A, x) (or a * dot(x, A), with A.T), among the terms of a sum -> gemv(y, a, A,
    x, b).  Reassociates: the sum's other terms are added first, then the gemv, which applies a and b
    inside the BLAS call.""",
)

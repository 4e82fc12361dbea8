"""Stabilize: replace numerically fragile expressions by stable equivalents.

The rules match the canonical form canonicalize leaves: constants first in
add and mul, subtraction as addition of a negation (``1 - sigmoid(x)`` is
``add(1, neg(sigmoid(x)))``).  Each right side computes the same function as
its left side and differs from it only where the left side loses accuracy
(cancellation, as in 1 - sigmoid(37)) or overflows or underflows (to ±inf,
or to 0 before a log): there the right side gives the accurate, finite value,
which is the point of the phase.

Rules that negate or shift their operand need a floating dtype (integer
negation wraps around), so they carry an `is_float` constraint.  When two
rules can match one node, the more specific one is defined first: the engine
tries a node's rules in definition order.  The relations are composed from
the goals of `relwrite.relations.goals`; the functions below are the
mappings (`mappingo`) particular to this phase.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from unification import var

from relwrite.graph import ops as o
from relwrite.graph.basic import Op, Variable
from relwrite.graph.terms import etuplize
from relwrite.relations.goals import (
    Goal,
    along,
    conj,
    float_var,
    is_float,
    leading_literalo,
    mappingo,
    nodeo,
    operandso,
    replaceableo,
    variadico,
    whereo,
)
from relwrite.relations.registry import relation, rule

STABILIZE = ("stabilize", "fast_run")


def _argument(value: Any, op: Op | type, index: int = 0) -> Variable | None:
    """Input `index` of the node computing `value` when its op is `op` (or exactly of class `op`)."""
    node = value.owner if isinstance(value, Variable) else None
    if node is None or len(node.outputs) != 1 or not (node.op == op or type(node.op) is op):
        return None
    return node.inputs[index] if index < len(node.inputs) else None


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


@relation(
    STABILIZE,
    tracks=(o.log,),
    examples=("log(add(1, x))", "log(add(1, x, y))"),
    types={"x": "vector"},
)
def log1p(lhs: Any, rhs: Any) -> Goal:
    """log(1 + x) -> log1p(x), and log(1 + a + b) -> log1p(a + b): accurate for small x (floats only).

    With several terms their sum is rounded before log1p sees it, so the
    gain is for sums far from -1 (near -1 neither side is accurate).
    """
    total, terms, rest, x = var(prefix="sum"), var(prefix="terms"), var(prefix="rest"), var(prefix="x")
    return conj(
        along(
            lhs,
            operandso(lhs, o.log, (total,)),
            operandso(total, o.add, terms),
            leading_literalo(1, terms, rest),
            variadico(x, o.add, rest),
            operandso(rhs, o.log1p, (x,)),
        ),
        whereo(total, is_float),
        replaceableo(lhs, rhs),
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


@relation(
    STABILIZE, tracks=(o.log,), examples=("log(softmax(x))", "log(softmax(x, axis=0))"), types={"x": "matrix"}
)
def log_softmax(lhs: Any, rhs: Any) -> Goal:
    """log(softmax(x)) -> log_softmax(x) along the same axis: finite where a probability underflows."""
    probabilities, x = var(prefix="softmax"), var(prefix="x")
    softmax_op, log_softmax_op = var(prefix="softmax_op"), var(prefix="log_softmax_op")
    return along(
        lhs,
        operandso(lhs, o.log, (probabilities,)),
        nodeo(probabilities, o.Softmax, softmax_op, (x,)),
        mappingo(softmax_op, log_softmax_op, _log_softmax_op, _softmax_ops),
        nodeo(rhs, o.LogSoftmax, log_softmax_op, (x,)),
    )


def _log_softmax_op(op: Any) -> o.LogSoftmax | None:
    return o.LogSoftmax(op.axis) if type(op) is o.Softmax else None


def _softmax_ops(op: Any) -> list[o.Softmax]:
    return [o.Softmax(op.axis)] if type(op) is o.LogSoftmax else []


@relation(
    STABILIZE,
    tracks=(o.log,),
    examples=("log(sum(exp(x), axis=1))", "log(sum(exp(x)))", "log(sum(exp(x), axis=(0, 1)))"),
    types={"x": "matrix"},
)
def logsumexp(lhs: Any, rhs: Any) -> Goal:
    """log(sum(exp(x), axis)) -> m + log(sum(exp(x - m), axis)), m the maximum of x over the axes.

    No exp overflows and the largest term contributes exactly 1.  Where the
    maximum is infinite m is 0 (m = switch(|max| < inf, max, 0)), so slices
    of -inf, or holding +inf, give -inf or +inf as on the left side rather
    than inf - inf = NaN.  For floats only; the reduced axes must not be
    empty at run time (the maximum of nothing raises).  An x already shifted
    by its maximum (the rule's own output) is left alone.
    """
    summed, exps, x, reduction = var(prefix="sum"), var(prefix="exp"), var(prefix="x"), var(prefix="op")
    return conj(
        along(
            lhs,
            operandso(lhs, o.log, (summed,)),
            nodeo(summed, o.Sum, reduction, (exps,)),
            operandso(exps, o.exp, (x,)),
            mappingo((x, reduction), rhs, _shifted_logsumexp, _logsumexp_arguments),
        ),
        replaceableo(lhs, rhs),
    )


def _max_shift(x: Variable, reduction: o.Sum) -> tuple[Variable, Variable]:
    """(m, m kept broadcastable against x): m = switch(|max(x)| < inf, max(x), 0) over the reduced axes."""
    maximum = o.Max(reduction.axis)(x)
    top = o.switch(o.lt(o.abs(maximum), np.inf), maximum, 0)
    reduced = set(range(x.ndim)) if reduction.axis is None else {a % x.ndim for a in reduction.axis}
    kept = x.ndim - len(reduced)
    if kept == 0:
        return top, top
    positions = iter(range(kept))
    order = ["x" if axis in reduced else next(positions) for axis in range(x.ndim)]
    return top, o.DimShuffle(kept, order)(top)


def _shifted_logsumexp(arguments: tuple) -> Variable | None:
    """m + log(sum(exp(x - m))) for (x, Sum op); None unless x is a float not already shifted so."""
    x, reduction = arguments
    if not is_float(x) or type(reduction) is not o.Sum:
        return None
    if _shifted_by_its_max(x, reduction):
        return None
    top, shift = _max_shift(x, reduction)
    return o.add(top, o.log(reduction(o.exp(o.add(x, o.neg(shift))))))


def _shifted_by_its_max(x: Variable, reduction: o.Sum) -> bool:
    """Whether x is y - m with m the `_max_shift` of y: the rule's own output, not to be shifted again."""
    y, negated = _argument(x, o.add, 0), _argument(x, o.add, 1)
    shift = _argument(negated, o.neg)
    if y is None or shift is None or len(x.owner.inputs) != 2:
        return False
    return etuplize(shift, return_bad_args=True) == _max_shift(y, reduction)[1]


def _logsumexp_arguments(result: Any) -> Iterator[tuple]:
    """The (x, Sum op) a `_shifted_logsumexp` result would come from (mappingo rebuilds it to check)."""
    summed = _argument(_argument(result, o.add, 1), o.log)
    shifted = _argument(_argument(summed, o.Sum), o.exp)
    x = _argument(shifted, o.add)
    if x is not None:
        yield x, summed.owner.op


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


@relation(
    STABILIZE,
    tracks=(o.add,),
    examples=("add(-1, exp(x))", "add(-1, y, exp(x))"),
    types={"x": "vector"},
)
def expm1(lhs: Any, rhs: Any) -> Goal:
    """exp(x) - 1 -> expm1(x), also among other terms: -1 + y + exp(x) -> y + expm1(x); accurate near 0."""
    terms, others, swapped = var(prefix="terms"), var(prefix="others"), var(prefix="swapped")
    return conj(
        along(
            lhs,
            operandso(lhs, o.add, terms),
            leading_literalo(-1, terms, others),
            mappingo(others, swapped, _first_exp_as_expm1, _expm1_as_exp),
            variadico(rhs, o.add, swapped),
        ),
        replaceableo(lhs, rhs),
    )


def _first_exp_as_expm1(terms: Any) -> tuple | None:
    """`terms` with its first exp(x) replaced by expm1(x), or None when none is an exp."""
    for k, term in enumerate(terms if isinstance(terms, tuple) else ()):
        x = _argument(term, o.exp)
        if x is not None:
            return (*terms[:k], o.expm1(x), *terms[k + 1 :])
    return None


def _expm1_as_exp(terms: Any) -> Iterator[tuple]:
    """Each `terms` with one expm1(x) replaced by exp(x) (mappingo keeps those mapping back)."""
    for k, term in enumerate(terms if isinstance(terms, tuple) else ()):
        x = _argument(term, o.expm1)
        if x is not None:
            yield (*terms[:k], o.exp(x), *terms[k + 1 :])


softplus_minus_self = rule(
    "softplus_minus_self",
    (o.add, (o.neg, float_var("x")), (o.softplus, "x")),
    (o.softplus, (o.neg, "x")),
    STABILIZE,
    examples=("add(neg(x), softplus(x))",),
    types={"x": "vector"},
    doc="softplus(x) - x -> softplus(-x): no cancellation for large x (floats only)",
)

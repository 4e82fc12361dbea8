"""The elementwise ops both languages have: one list of pairs, read in both directions.

PyTensor applies a scalar op elementwise (`Elemwise(scalar_op)`); relwrite's
elementwise ops are tensor ops.  A pair maps a PyTensor scalar op's class to
the relwrite op and a relwrite op's class to the PyTensor scalar op; casts
carry their dtype and are mapped on their own.
"""

from __future__ import annotations

import pytensor.scalar.basic as psb
import pytensor.scalar.math as psm

from relwrite.graph import ops

ELEMENTWISE_PAIRS = (
    (psb.add, ops.add),
    (psb.mul, ops.mul),
    (psb.sub, ops.sub),
    (psb.true_div, ops.true_div),
    (psb.pow, ops.pow),
    (psb.maximum, ops.maximum),
    (psb.minimum, ops.minimum),
    (psb.lt, ops.lt),
    (psb.le, ops.le),
    (psb.gt, ops.gt),
    (psb.ge, ops.ge),
    (psb.eq, ops.eq),
    (psb.neq, ops.neq),
    (psb.neg, ops.neg),
    (psb.exp, ops.exp),
    (psb.log, ops.log),
    (psb.log1p, ops.log1p),
    (psb.expm1, ops.expm1),
    (psb.sqrt, ops.sqrt),
    (psb.sqr, ops.sqr),
    (psb.reciprocal, ops.reciprocal),
    (psb.sin, ops.sin),
    (psb.cos, ops.cos),
    (psb.tan, ops.tan),
    (psb.tanh, ops.tanh),
    (psb.arcsin, ops.asin),
    (psb.arccos, ops.acos),
    (psb.arctan, ops.atan),
    (psb.arctan2, ops.atan2),
    (psb.sinh, ops.sinh),
    (psb.cosh, ops.cosh),
    (psb.abs, ops.abs),
    (psb.identity, ops.identity),
    (psb.switch, ops.switch),
    (psb.second, ops.fill),
    (psm.sigmoid, ops.sigmoid),
    (psm.softplus, ops.softplus),
    (psm.erf, ops.erf),
    (psm.erfc, ops.erfc),
    (psm.log1mexp, ops.log1mexp),
)

TO_RELWRITE = {type(scalar_op): op for scalar_op, op in ELEMENTWISE_PAIRS}
"""PyTensor scalar op class -> relwrite elementwise op."""

TO_PYTENSOR = {type(op): scalar_op for scalar_op, op in ELEMENTWISE_PAIRS}
"""relwrite elementwise op class -> PyTensor scalar op."""

REDUCTIONS = (
    (psb.Add, ops.Sum),
    (psb.Mul, ops.Prod),
    (psb.ScalarMaximum, ops.Max),
    (psb.ScalarMinimum, ops.Min),
)
"""The scalar op a PyTensor CAReduce folds with -> the relwrite reduction (and back)."""

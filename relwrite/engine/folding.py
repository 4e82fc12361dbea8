"""Constant folding: a node whose inputs are all constants becomes the constant it computes."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from relwrite.backends.numpy.impls import EvaluationError, evaluate
from relwrite.engine.node_rewriters import NodeRewriter
from relwrite.graph.basic import Apply, Constant
from relwrite.graph.ops import Alloc, Elemwise, Fill
from relwrite.graph.types import TensorType
from relwrite.relations.predicates import filled_by, filled_constant


class ConstantFolding(NodeRewriter):
    """Evaluate nodes of constants with the NumPy backend and replace them by the result.

    Allocation ops (Alloc, Fill) are left alone: folding them would only
    store a large array in the graph.  A node whose evaluation fails, warns
    (log of a negative constant) or raises a floating-point flag is left for
    run time, where the same error or warning belongs: so a fold never makes
    an infinity or NaN out of finite constants (overflow, inf - inf), nor a
    zero or an inexact subnormal out of non-zero ones (underflow).  Integers
    fold with the implementation and dtypes the graph runs with, so they wrap
    around exactly as it would.

    An elementwise node of constants some of which are broadcast by fills
    (the zeros and ones that cancelling rules leave, fill(x, 0)) folds too,
    the result filled by the same models: tanh(fill(x, 0)) -> fill(x, 0.0).
    """

    name = "constant_folding"
    skipped = (Alloc, Fill)
    screen_reads_heads = True

    def screen(self, node: Apply) -> bool:
        """Whether every operand is a constant, or, of an elementwise op, a constant or a fill: what a
        fold needs, read from the operands' heads (an engine decides it once per signature)."""
        if isinstance(node.op, self.skipped):
            return False
        elementwise = isinstance(node.op, Elemwise)
        return all(
            isinstance(v, Constant) or (elementwise and v.owner is not None and type(v.owner.op) is Fill)
            for v in node.inputs
        )

    def transform(self, fgraph: Any, node: Apply) -> bool | list:
        if not self.screen(node):
            return False
        if all(isinstance(v, Constant) for v in node.inputs):
            constants, models = node.inputs, []
        else:
            filled = [filled_constant(v) for v in node.inputs]
            if any(f is None for f in filled):
                return False
            constants = [f[1] for f in filled]
            models = list({id(m): m for f in filled for m in f[0]}.values())
        try:
            with warnings.catch_warnings(), np.errstate(all="raise"):
                warnings.simplefilter("error")
                values = evaluate(node, [v.data for v in constants])
        except (EvaluationError, FloatingPointError, ArithmeticError, RuntimeWarning):
            return False
        return [
            filled_by(models, Constant(TensorType(out.dtype, value.shape), value))
            for out, value in zip(node.outputs, values)
        ]


constant_folding = ConstantFolding()

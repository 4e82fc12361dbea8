"""Constant folding: a node whose inputs are all constants becomes the constant it computes."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from relwrite.backends.numpy.impls import EvaluationError, evaluate
from relwrite.engine.node_rewriters import NodeRewriter
from relwrite.graph.basic import Apply, Constant
from relwrite.graph.ops import Alloc, Fill
from relwrite.graph.types import TensorType


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
    """

    name = "constant_folding"
    skipped = (Alloc, Fill)

    def transform(self, fgraph: Any, node: Apply) -> bool | list:
        if isinstance(node.op, self.skipped) or not all(isinstance(v, Constant) for v in node.inputs):
            return False
        try:
            with warnings.catch_warnings(), np.errstate(all="raise"):
                warnings.simplefilter("error")
                values = evaluate(node, [v.data for v in node.inputs])
        except (EvaluationError, FloatingPointError, ArithmeticError, RuntimeWarning):
            return False
        return [
            Constant(TensorType(out.dtype, value.shape), value) for out, value in zip(node.outputs, values)
        ]


constant_folding = ConstantFolding()

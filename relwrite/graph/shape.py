"""Symbolic shapes: the `Shape` and `Shape_i` ops, and the lengths known before run time.

`shape(x)` (also `x.shape`) is an int64 vector computed at run time (the
static shape, known lengths and None where unknown, is `x.type.shape`);
`shape_i(x, i)` one length.  Shape inference through every op, and
`ShapeFeature`, are in `relwrite.graph.shape_inference`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from relwrite.graph.basic import Apply, Constant, Op, Variable, as_variable, constant
from relwrite.graph.subtensor import INT, Subtensor
from relwrite.graph.types import TensorType


class Shape(Op):
    """The shape of the input, as an int64 vector."""

    op_name = "shape"

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = [as_variable(v) for v in inputs]
        if len(inputs) != 1:
            raise self.type_error(inputs, f"takes 1 input, got {len(inputs)}")
        return Apply(self, inputs, [Variable(TensorType("int64", (inputs[0].ndim,)))])


class Shape_i(Op):  # Aesara's name
    """One length of the input, `x.shape[i]`, as an int64 scalar."""

    __props__ = ("i",)
    op_name = "shape_i"

    def __init__(self, i: int):
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or i < 0:
            raise TypeError(f"Shape_i: the axis must be a non-negative int, got {i!r}")
        super().__init__(i=int(i))

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = [as_variable(v) for v in inputs]
        if len(inputs) != 1:
            raise self.type_error(inputs, f"takes 1 input, got {len(inputs)}")
        if self.i >= inputs[0].ndim:
            raise self.type_error(inputs, f"axis {self.i} is out of range for {inputs[0].ndim} dimension(s)")
        return Apply(self, inputs, [Variable(TensorType("int64", ()))])

    def __str__(self) -> str:
        return f"Shape_i{{{self.i}}}"


def shape(x: Any) -> Variable:
    """The shape of `x` at run time (an int64 vector); a constant where static lengths settle it."""
    return Shape()(as_variable(x))


def shape_i(x: Any, i: int) -> Variable:
    """Length `i` of `x` at run time (an int64 scalar); negative `i` counts from the end."""
    x = as_variable(x)
    if isinstance(i, (int, np.integer)) and not isinstance(i, bool) and -x.ndim <= i < 0:
        i += x.ndim
    return Shape_i(i)(x)


def length_read(op: Any, inputs: Sequence[Any]) -> tuple[Variable, int] | None:
    """(x, axis) when a node of `op` on `inputs` reads one length of `x`: `shape_i(x, axis)`, or
    `shape(x)[i]` for a literal i in range (the axis counted from the start); else None."""
    if isinstance(op, Shape_i):
        return inputs[0], op.i
    if not isinstance(op, Subtensor) or op.idx_list != (INT,) or len(inputs) != 2:
        return None
    vector, index = inputs
    owner = vector.owner if isinstance(vector, Variable) else None
    if owner is None or not isinstance(owner.op, Shape) or not isinstance(index, Constant) or index.data.ndim:
        return None
    x, i = owner.inputs[0], int(index.data)
    return (x, i % x.ndim) if -x.ndim <= i < x.ndim else None


def static_length(value: Any) -> int | None:
    """The int a length stands for when it is known before run time, else None: an int, a 0-d integer
    constant, or a length of a variable whose static shape has it (`shape_i(x, 1)`, `x.shape[1]`)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, Constant):
        data = value.data
        return int(data) if data.ndim == 0 and data.dtype.kind in "iu" else None
    node = value.owner if isinstance(value, Variable) else None
    read = length_read(node.op, node.inputs) if node is not None else None
    return None if read is None else read[0].type.shape[read[1]]


def length(x: Variable, i: int) -> Variable:
    """Length `i` of `x`: a constant when static, else `shape_i(x, i)`."""
    known = x.type.shape[i]
    return constant(known, dtype="int64") if known is not None else Shape_i(i)(x)

"""Shape rules: never compute a tensor only to learn its shape.

`shape_promotion`: ``shape(log(x)) -> shape(x)`` and ``shape_i(x + y, 0)``
-> the length it broadcasts to, from `relwrite.graph.shape.infer_shape`
(the seed's shape promotion and local_track_shape_i); `shape_i_of_shape`:
``shape(x)[i] -> shape_i(x, i)`` (local_shape_to_shape_i); `known_shape`: a
shape or length that static types know is a constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relwrite.graph.basic import Variable, constant
from relwrite.graph.shape import Shape, Shape_i, length_read, promoted_length, promoted_shape
from relwrite.graph.subtensor import INT, Subtensor
from relwrite.relations.goals import Goal, node_mappingo
from relwrite.relations.registry import relation

CANON = ("canonicalize", "fast_run", "fast_compile")


def promoted(parts: tuple) -> Variable | None:
    """(Shape, (v,)) -> shape(y) where v's lengths are y's (else its lengths from its inputs' joined);
    (Shape_i, (v,)) -> v's length from its inputs'."""
    op, operands = parts
    if not isinstance(operands, tuple) or len(operands) != 1:
        return None
    (v,) = operands
    if isinstance(op, Shape):
        return promoted_shape(v)
    if isinstance(op, Shape_i):
        return promoted_length(v, op.i)
    return None


@relation(
    CANON,
    tracks=(Shape, Shape_i),
    backward="the tensor whose shape was asked is not recoverable from its shape",
    examples=("shape(log(x))", "shape(exp(m).T)", "shape_i(x + y, 0)", "shape_i(sum(m, axis=0), 0)"),
    types={"x": "vector", "y": "vector", "m": "matrix"},
)
def shape_promotion(lhs: Any, rhs: Any) -> Goal:
    """shape(f(x)) -> shape(x), shape_i(f(x, y), i) -> its length from x's and y's: no tensor computed
    only for its shape. Exact where the left side is defined (a shape asks nothing of the values)."""
    return node_mappingo(lhs, rhs, (Shape, Shape_i), promoted)


def length_of_shape(parts: tuple) -> Variable | None:
    """(Subtensor{int}, (shape(x), i)) -> shape_i(x, i) for a literal i."""
    op, operands = parts
    read = length_read(op, operands) if isinstance(op, Subtensor) and isinstance(operands, tuple) else None
    return None if read is None else Shape_i(read[1])(read[0])


def shape_indexed(result: Any) -> list[tuple]:
    """The preimage: shape_i(x, i) -> (Subtensor{int}, (shape(x), i))."""
    owner = result.owner if isinstance(result, Variable) else None
    if owner is None or not isinstance(owner.op, Shape_i):
        return []
    return [(Subtensor((INT,)), (Shape()(owner.inputs[0]), constant(owner.op.i, dtype="int64")))]


@relation(
    CANON,
    tracks=(Subtensor,),
    examples=("shape(m)[1]", "shape(x)[0]"),
    types={"x": "vector", "m": "matrix"},
)
def shape_i_of_shape(lhs: Any, rhs: Any) -> Goal:
    """shape(x)[i] -> shape_i(x, i): one length read directly. Exact."""
    return node_mappingo(lhs, rhs, Subtensor, length_of_shape, shape_indexed)


def static_shape(parts: tuple) -> Variable | None:
    """(Shape, (x,)) -> the constant shape, (Shape_i, (x,)) -> the constant length, where types know."""
    op, operands = parts
    if not isinstance(operands, tuple) or len(operands) != 1:
        return None
    (x,) = operands
    if isinstance(op, Shape) and None not in x.type.shape:
        return constant(np.array(x.type.shape, dtype=np.int64))
    if isinstance(op, Shape_i) and x.type.shape[op.i] is not None:
        return constant(x.type.shape[op.i], dtype="int64")
    return None


@relation(
    CANON,
    tracks=(Shape, Shape_i),
    backward="a constant does not say which tensor it was the shape of",
    examples=("shape(t)", "shape_i(t, 1)"),
    types={"t": "(2,3)"},
)
def known_shape(lhs: Any, rhs: Any) -> Goal:
    """shape(x) -> its constant value, shape_i(x, i) -> its constant length, where types know. Exact."""
    return node_mappingo(lhs, rhs, (Shape, Shape_i), static_shape)

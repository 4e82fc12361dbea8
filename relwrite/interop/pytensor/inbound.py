"""PyTensor ops as relwrite ops: a table from a PyTensor op class to the function that builds its relwrite
counterpart.

A converter takes the PyTensor op, its node and the node's inputs already
converted (relwrite variables; a PyTensor slice or `None` index is a Python
`slice` of variables or `None`) and returns the relwrite outputs, or None
when this instance has no counterpart (a symbolic reshape, a softmax over
every axis...): the caller then keeps the op whole as an `OpaqueOp`.  Dtypes
are settled by the caller (`convert.py`): where relwrite's NumPy rules give
another dtype than PyTensor's, the inputs are cast first, the output last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytensor.scalar.basic as psb
import pytensor.tensor.basic as ptb
import pytensor.tensor.blas as blas
import pytensor.tensor.math as ptm
import pytensor.tensor.special as special
import pytensor.tensor.subtensor as pst
from pytensor.graph.basic import Apply as PtApply
from pytensor.raise_op import CheckAndRaise
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.shape import Reshape, Shape, Shape_i

from relwrite.graph import ops
from relwrite.graph.basic import Constant, Variable
from relwrite.graph.shape import Shape as RwShape
from relwrite.graph.shape import Shape_i as RwShape_i
from relwrite.graph.subtensor import IncSubtensor, split_index, subtensor
from relwrite.graph.types import TensorType
from relwrite.interop.pytensor.table import REDUCTIONS, TO_RELWRITE
from relwrite.interop.pytensor.types import relwrite_constant

Converter = Callable[[Any, PtApply, list[Any]], Sequence[Variable] | None]

_REDUCE = dict(REDUCTIONS)


def scalar_apply(scalar_op: Any, args: Sequence[Variable], dtypes: Sequence[str]) -> list[Variable] | None:
    """A PyTensor scalar op (a `Composite` included) applied elementwise to relwrite variables, with
    PyTensor's output `dtypes`; None when an op inside has no counterpart."""
    if isinstance(scalar_op, psb.Composite):
        return _composite(scalar_op, args)
    if type(scalar_op) is psb.Cast:
        op = ops.Cast(scalar_op.o_type.dtype)
    else:
        op = TO_RELWRITE.get(type(scalar_op))
        if op is None:
            return None
        if op is ops.switch and args[0].dtype != "bool":  # PyTensor switches on any number, as C does
            args = [ops.neq(args[0], 0), *args[1:]]
    return [settle_elementwise(op, args, dtypes[0])]


def widened(args: Sequence[Variable]) -> list[Variable]:
    """Constants of a narrower dtype than the inputs' common one (PyTensor writes `1 + x` with an int8 1) as
    constants of that dtype, where the value is the same: the rules' literals are written that way."""
    dtypes = {a.dtype for a in args}
    if len(dtypes) < 2:
        return list(args)
    common = np.result_type(*dtypes)
    out = []
    for a in args:
        if (
            isinstance(a, Constant)
            and a.dtype != common.name
            and "b" not in (a.type.numpy_dtype.kind, common.kind)
        ):
            data = a.data.astype(common)
            if np.array_equal(data, a.data):
                a = Constant(TensorType(common.name, a.type.shape), data, name=a.name)
        out.append(a)
    return out


def settle_elementwise(op: Any, args: Sequence[Variable], dtype: str) -> Variable:
    """`op(*args)` with output `dtype`: where relwrite's dtype differs, float results compute from inputs
    cast to `dtype` (as PyTensor upcasts them), and the result is cast last if it still differs."""
    args = widened(args)
    out = op(*args)
    if out.dtype == dtype:
        return out
    if np.dtype(dtype).kind == "f":
        cast = [a if a.dtype in (dtype, "bool") else ops.cast(a, dtype) for a in args]
        out = op(*cast)
    return out if out.dtype == dtype else ops.cast(out, dtype)


def _composite(scalar_op: psb.Composite, args: Sequence[Variable]) -> list[Variable] | None:
    """A fused PyTensor loop unfused: its inner scalar graph applied to the tensors."""
    inner = scalar_op.fgraph
    env: dict[Any, Variable] = dict(zip(inner.inputs, args))
    for node in inner.toposort():
        inputs = [env[v] if v in env else relwrite_constant(v) for v in node.inputs]
        outs = scalar_apply(node.op, inputs, [o.type.dtype for o in node.outputs])
        if outs is None:
            return None
        env.update(zip(node.outputs, outs))
    return [env[v] if v in env else relwrite_constant(v) for v in inner.outputs]


def _elemwise(op: Elemwise, node: PtApply, args: list[Any]) -> list[Variable] | None:
    return scalar_apply(op.scalar_op, args, [o.type.dtype for o in node.outputs])


def _scalar(op: psb.ScalarOp, node: PtApply, args: list[Any]) -> list[Variable] | None:
    return scalar_apply(op, args, [o.type.dtype for o in node.outputs])


def _reduce(op: CAReduce, node: PtApply, args: list[Any]) -> list[Variable] | None:
    kind = _REDUCE.get(type(op.scalar_op))
    if kind is None:
        return None
    (x,) = args
    dtype = node.outputs[0].type.dtype
    if kind in (ops.Sum, ops.Prod) and x.dtype != dtype:  # PyTensor sums in the output dtype
        x = ops.cast(x, dtype)
    return [kind(op.axis)(x)]


def _argmax(op: ptm.Argmax, node: PtApply, args: list[Any]) -> list[Variable] | None:
    (x,) = args
    if op.axis is None or (x.ndim == 1 and len(op.axis) == 1):
        return [ops.Argmax(None)(x)]
    return [ops.Argmax(op.axis[0])(x)] if len(op.axis) == 1 else None


def _blockwise(op: Blockwise, node: PtApply, args: list[Any]) -> list[Variable] | None:
    if isinstance(op.core_op, ptm.Dot) and all(a.ndim == 2 for a in args):
        return [ops.dot(*args)]
    return None


def _dot22_scalar(op: Any, node: PtApply, args: list[Any]) -> list[Variable]:
    x, y, a = args
    return [ops.mul(ops.dot22(x, y), a)]


def _static(var: Any) -> tuple[int, ...] | None:
    """The ints of a constant (inputs computed from constants are folded to constants), else None."""
    return tuple(int(v) for v in np.ravel(var.data)) if isinstance(var, Constant) else None


def _reshape(op: Reshape, node: PtApply, args: list[Any]) -> list[Variable] | None:
    shape = _static(args[1])
    if shape is None and None not in node.outputs[0].type.shape:
        shape = node.outputs[0].type.shape
    return None if shape is None else [ops.Reshape(shape)(args[0])]


def _alloc(op: ptb.Alloc, node: PtApply, args: list[Any]) -> list[Variable] | None:
    lengths = [_static(v) for v in args[1:]]
    if None in lengths:
        static = node.outputs[0].type.shape
        return None if None in static else [ops.Alloc(static)(args[0])]
    return [ops.Alloc(tuple(n[0] for n in lengths))(args[0])]


def _join(op: ptb.Join, node: PtApply, args: list[Any]) -> list[Variable] | None:
    axis = _static(args[0])
    return None if axis is None else [ops.Join(axis[0])(*args[1:])]


def _softmax(op: special.Softmax, node: PtApply, args: list[Any]) -> list[Variable] | None:
    kind = ops.LogSoftmax if isinstance(op, special.LogSoftmax) else ops.Softmax
    if op.axis is None:  # over every axis at once: one axis only for a vector
        return [kind(-1)(*args)] if args[0].ndim == 1 else None
    return [kind(op.axis)(*args)]


def _assert(op: CheckAndRaise, node: PtApply, args: list[Any]) -> list[Variable] | None:
    if not issubclass(op.exc_type, AssertionError):
        return None
    return [ops.Assert(str(op.msg))(*args)]


def _basic_key(idx_list: Sequence[Any], index: Sequence[Variable]) -> tuple:
    """A Subtensor's index as a Python key over relwrite variables."""
    items = iter(index)
    key = []
    for entry in idx_list:
        if isinstance(entry, slice):
            key.append(
                slice(*(None if b is None else next(items) for b in (entry.start, entry.stop, entry.step)))
            )
        else:
            key.append(next(items))
    return tuple(key)


def _subtensor(op: pst.Subtensor, node: PtApply, args: list[Any]) -> list[Variable]:
    return [subtensor(args[0], _basic_key(op.idx_list, args[1:]))]


def _advanced_subtensor(op: Any, node: PtApply, args: list[Any]) -> list[Variable]:
    return [subtensor(args[0], tuple(args[1:]))]


def _update(x: Variable, y: Variable, key: tuple, set_instead_of_inc: bool) -> Variable:
    pattern, index = split_index(x, key)
    return IncSubtensor(pattern, set_instead_of_inc)(x, y, *index)


def _inc_subtensor(op: pst.IncSubtensor, node: PtApply, args: list[Any]) -> list[Variable]:
    x, y, *index = args
    return [_update(x, y, _basic_key(op.idx_list, index), op.set_instead_of_inc)]


def _advanced_inc_subtensor(op: Any, node: PtApply, args: list[Any]) -> list[Variable] | None:
    if getattr(op, "ignore_duplicates", False) and not op.set_instead_of_inc:
        return None  # x[i] += y without accumulating repeats: relwrite's increments accumulate
    x, y, *index = args
    return [_update(x, y, tuple(index), op.set_instead_of_inc)]


def _dimshuffle(op: DimShuffle, node: PtApply, args: list[Any]) -> list[Variable]:
    """A constant with its axes moved is a constant (PyTensor broadcasts the 1 of `1 + x` by a DimShuffle)."""
    (x,) = args
    relwrite_op = ops.DimShuffle(op.input_ndim, op.new_order)
    if not isinstance(x, Constant):
        return [relwrite_op(x)]
    kept = [a for a in op.new_order if a != "x"]
    shape = [1 if a == "x" else x.data.shape[a] for a in op.new_order]
    data = np.transpose(x.data, kept + list(relwrite_op.dropped)).reshape(shape)
    return [Constant(TensorType(x.dtype, shape), data, name=x.name)]


def _passthrough(op: Any, node: PtApply, args: list[Any]) -> list[Variable]:
    return [args[0]]


FROM_PYTENSOR: dict[type, Converter] = {
    Elemwise: _elemwise,
    psb.ScalarOp: _scalar,
    CAReduce: _reduce,
    ptm.Argmax: _argmax,
    ptm.Dot: lambda op, node, args: [ops.dot(*args)],
    Blockwise: _blockwise,
    blas.Dot22: lambda op, node, args: [ops.dot22(*args)],
    blas.Dot22Scalar: _dot22_scalar,
    blas.Gemm: lambda op, node, args: [ops.gemm(*args)],
    blas.Gemv: lambda op, node, args: [ops.gemv(*args)],
    blas.Ger: lambda op, node, args: [ops.ger(*args)],
    DimShuffle: _dimshuffle,
    Reshape: _reshape,
    Shape: lambda op, node, args: [RwShape()(*args)],
    Shape_i: lambda op, node, args: [RwShape_i(op.i)(*args)],
    ptb.Alloc: _alloc,
    ptb.Join: _join,
    CheckAndRaise: _assert,
    special.Softmax: _softmax,
    special.LogSoftmax: _softmax,
    pst.Subtensor: _subtensor,
    pst.AdvancedSubtensor1: _advanced_subtensor,
    pst.AdvancedSubtensor: _advanced_subtensor,
    pst.IncSubtensor: _inc_subtensor,
    pst.AdvancedIncSubtensor1: _advanced_inc_subtensor,
    pst.AdvancedIncSubtensor: _advanced_inc_subtensor,
    ptb.MakeVector: lambda op, node, args: [ops.stack(args)] if args else None,
    ptb.ScalarFromTensor: _passthrough,
    ptb.TensorFromScalar: _passthrough,
}
"""PyTensor op class -> converter; a subclass not listed uses its nearest listed base class."""


def converter_for(op: Any) -> Converter | None:
    for kind in type(op).__mro__:
        found = FROM_PYTENSOR.get(kind)
        if found is not None:
            return found
    return None

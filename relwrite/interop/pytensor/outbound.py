"""relwrite ops as PyTensor ops: a table from a relwrite op class to the function that builds the PyTensor
counterpart.

A builder takes the relwrite op, its node and the node's inputs already
converted (PyTensor variables) and returns the PyTensor outputs.  Ops
PyTensor has as expressions rather than ops (mean, logsumexp, argmin) are
built as those expressions; a fused `Composite` is unfused; an `OpaqueOp`
gets its own PyTensor op back; any other relwrite op becomes a `RelwriteOp`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytensor.tensor as pt
import pytensor.tensor.blas as blas
import pytensor.tensor.special as special
from pytensor.graph.basic import Constant as PtConstant
from pytensor.graph.basic import Variable as PtVariable
from pytensor.raise_op import Assert as PtAssert
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.shape import Shape, Shape_i

from relwrite.graph import ops
from relwrite.graph.basic import Apply
from relwrite.graph.shape import Shape as RwShape
from relwrite.graph.shape import Shape_i as RwShape_i
from relwrite.graph.subtensor import AdvancedSubtensor, IncSubtensor, Subtensor, index_of
from relwrite.interop.pytensor.opaque import OpaqueOp, RelwriteOp
from relwrite.interop.pytensor.table import TO_PYTENSOR
from relwrite.interop.pytensor.types import as_type, pytensor_constant

Builder = Callable[[Any, Apply, list[PtVariable]], Sequence[PtVariable]]

_REDUCE_FUNCTIONS = {ops.Sum: pt.sum, ops.Prod: pt.prod, ops.Max: pt.max, ops.Min: pt.min, ops.Mean: pt.mean}


def settle(var: PtVariable, dtype: str) -> PtVariable:
    """`var` with `dtype` (a cast where PyTensor's rules gave another)."""
    return var if var.type.dtype == dtype else pt.cast(var, dtype)


def elementwise(scalar_op: Any, args: Sequence[PtVariable], dtype: str) -> PtVariable:
    """`Elemwise(scalar_op)` on `args` with output `dtype`: float results compute from inputs cast to it
    where PyTensor's rules would give another dtype, as relwrite's NumPy rules do."""
    out = Elemwise(scalar_op)(*args)
    if out.type.dtype != dtype and np.dtype(dtype).kind == "f":
        out = Elemwise(scalar_op)(
            *(a if a.type.dtype in (dtype, "bool") else pt.cast(a, dtype) for a in args)
        )
    return settle(out, dtype)


def _elementwise(op: Any, node: Apply, args: list[PtVariable]) -> list[PtVariable]:
    return [elementwise(TO_PYTENSOR[type(op)], args, node.outputs[0].dtype)]


def _composite(op: ops.Composite, node: Apply, args: list[PtVariable]) -> list[PtVariable]:
    """A fused loop unfused: each inner node built on the tensors (PyTensor fuses again as it likes)."""
    env: dict[Any, PtVariable] = dict(zip(op.inputs, args))
    for inner in op.nodes:
        inputs = [env[v] if v in env else pytensor_constant(v) for v in inner.inputs]
        env.update(zip(inner.outputs, build(inner.op, inner, inputs)))
    return [env[v] if v in env else pytensor_constant(v) for v in op.outputs]


def _reduce(op: ops.Reduce, node: Apply, args: list[PtVariable]) -> list[PtVariable]:
    (x,) = args
    dtype = node.outputs[0].dtype
    if isinstance(op, (ops.Sum, ops.Prod)) and x.type.dtype != dtype:
        x = pt.cast(x, dtype)
    return [_REDUCE_FUNCTIONS[type(op)](x, axis=op.axis)]


def _constant_or(var: PtVariable) -> Any:
    """A scalar integer constant as a Python int (PyTensor's static shapes follow it), else the variable."""
    if isinstance(var, PtConstant) and np.ndim(var.data) == 0:
        return int(var.data)
    return var


def _key(pattern: Sequence[Any], index: Sequence[PtVariable]) -> tuple:
    """The Python index of an indexing op over PyTensor index variables (constants read as ints)."""
    return index_of(tuple(pattern), _constant_or)(index)


def _subtensor(op: Any, node: Apply, args: list[PtVariable]) -> list[PtVariable]:
    x, *index = args
    return [x[_key(op.idx_list, index)]]


def _inc_subtensor(op: IncSubtensor, node: Apply, args: list[PtVariable]) -> list[PtVariable]:
    x, y, *index = args
    update = pt.set_subtensor if op.set_instead_of_inc else pt.inc_subtensor
    return [update(x[_key(op.idx_list, index)], y)]


def _opaque(op: OpaqueOp, node: Apply, args: list[PtVariable]) -> list[PtVariable]:
    return op.op.make_node(*(as_type(a, t) for a, t in zip(args, op.input_types))).outputs


def _argmin(op: ops.Argmin, node: Apply, args: list[PtVariable]) -> list[PtVariable]:
    return [pt.argmin(args[0], axis=op.axis)]


def _argmax(op: ops.Argmax, node: Apply, args: list[PtVariable]) -> list[PtVariable]:
    return [pt.argmax(args[0], axis=op.axis)]


TO_PYTENSOR_BUILDERS: dict[type, Builder] = {
    **{kind: _elementwise for kind in TO_PYTENSOR},
    ops.Cast: lambda op, node, args: [pt.cast(args[0], op.dtype)],
    ops.Composite: _composite,
    **{kind: _reduce for kind in _REDUCE_FUNCTIONS},
    ops.LogSumExp: lambda op, node, args: [pt.logsumexp(args[0], axis=op.axis)],
    ops.Argmax: _argmax,
    ops.Argmin: _argmin,
    ops.Dot: lambda op, node, args: [pt.dot(*args)],
    ops.Dot22: lambda op, node, args: [blas._dot22(*args)],
    ops.Gemm: lambda op, node, args: [blas.gemm_no_inplace(*args)],
    ops.Gemv: lambda op, node, args: [blas.gemv_no_inplace(*args)],
    ops.Ger: lambda op, node, args: [blas.ger(*args)],
    ops.Softmax: lambda op, node, args: [special.Softmax(axis=op.axis)(*args)],
    ops.LogSoftmax: lambda op, node, args: [special.LogSoftmax(axis=op.axis)(*args)],
    ops.DimShuffle: lambda op, node, args: [
        DimShuffle(input_ndim=op.input_ndim, new_order=op.new_order)(*args)
    ],
    ops.Reshape: lambda op, node, args: [pt.reshape(args[0], op.shape, ndim=len(op.shape))],
    ops.Alloc: lambda op, node, args: [pt.alloc(args[0], *op.shape)],
    ops.Join: lambda op, node, args: [pt.join(op.axis, *args)],
    ops.Assert: lambda op, node, args: [PtAssert(op.message)(*args)],
    RwShape: lambda op, node, args: [Shape()(*args)],
    RwShape_i: lambda op, node, args: [Shape_i(op.i)(*args)],
    Subtensor: _subtensor,
    AdvancedSubtensor: _subtensor,
    IncSubtensor: _inc_subtensor,
    OpaqueOp: _opaque,
}
"""relwrite op class -> builder; any other op becomes a `RelwriteOp`."""


def build(op: Any, node: Apply, args: list[PtVariable]) -> list[PtVariable]:
    """The PyTensor outputs of a relwrite node on converted inputs, with the node's dtypes."""
    builder = TO_PYTENSOR_BUILDERS.get(type(op))
    outs = builder(op, node, args) if builder is not None else RelwriteOp(op)(*args, return_list=True)
    return [settle(o, v.dtype) for o, v in zip(outs, node.outputs)]

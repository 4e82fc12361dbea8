"""Ops one language holds for the other: `OpaqueOp` (a PyTensor op inside relwrite) and `RelwriteOp`
(a relwrite op inside PyTensor).

An `OpaqueOp` is not elementwise and no rule pattern names its class, so no
rule matches it or looks inside it (patterns match an op's exact class): the
rest of the graph still rewrites, explores and evaluates around it.  Its
NumPy implementation calls the PyTensor op's `perform`; `to_pytensor` puts
the PyTensor op itself back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pytensor.graph.basic import Apply as PtApply
from pytensor.graph.basic import Constant as PtConstant
from pytensor.graph.op import Op as PtOp
from pytensor.tensor import as_tensor_variable
from pytensor.tensor.type import TensorType as PtTensorType

from relwrite.backends.numpy.impls import Impl, numpy_impl
from relwrite.graph.basic import Apply, Constant, Op, Variable, as_variables
from relwrite.graph.printing import ATOM, FunctionPrinter, Layout, Operand, pprint
from relwrite.graph.types import TensorType
from relwrite.interop.pytensor.types import pytensor_type, relwrite_type


class OpaqueOp(Op):
    """A PyTensor op relwrite has no counterpart for, kept whole.

    `input_types` are the PyTensor types the op was applied to: a scalar
    (`ScalarType`) input is a 0-d tensor in relwrite and becomes a scalar
    again on the way to the op.  `static_shapes` are the outputs' static
    shapes in the PyTensor graph it came from, which may know more than the
    op infers from relwrite's types (lengths PyTensor read off constant
    inputs relwrite computes); rewrites keep values, so they stay true.
    """

    __props__ = ("op", "input_types", "static_shapes")

    def __init__(self, op: PtOp, input_types: Sequence[Any], static_shapes: Sequence[Any] | None = None):
        if not isinstance(op, PtOp):
            raise TypeError(f"OpaqueOp: {op!r} is not a PyTensor op")
        shapes = None if static_shapes is None else tuple(tuple(s) for s in static_shapes)
        super().__init__(op=op, input_types=tuple(input_types), static_shapes=shapes)

    def pytensor_node(self, inputs: Sequence[Variable]) -> PtApply:
        """The PyTensor node of this op on stand-ins for `inputs` (constants stay constants)."""
        stand_ins = []
        for var, wanted in zip(inputs, self.input_types):
            t = pytensor_type(var.type) if isinstance(wanted, PtTensorType) else wanted
            if isinstance(var, Constant):
                stand_ins.append(t.make_constant(t.filter(np.array(var.data))))
            else:
                stand_ins.append(t())
        return self.op.make_node(*stand_ins)

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != len(self.input_types):
            raise self.type_error(inputs, f"takes {len(self.input_types)} inputs, got {len(inputs)}")
        node = self.pytensor_node(inputs)
        types = [relwrite_type(out) for out in node.outputs]
        if self.static_shapes is not None:
            types = [_narrowed(t, shape) for t, shape in zip(types, self.static_shapes)]
        return Apply(self, inputs, [Variable(t) for t in types])

    @property
    def name(self) -> str:
        return f"pytensor.{self.op}"

    def __str__(self) -> str:
        return f"Opaque{{{self.op}}}"


def _narrowed(t: TensorType, known: Sequence[int | None]) -> TensorType:
    """`t` with the lengths `known` gives where `t` has none (both must agree where both know)."""
    if len(known) != t.ndim or any(
        a is not None and b is not None and a != b for a, b in zip(t.shape, known)
    ):
        return t
    return t.clone(shape=[a if a is not None else b for a, b in zip(t.shape, known)])


class _OpaquePrinter(FunctionPrinter):
    """`pytensor.CumOp{...}(x)`: the PyTensor op's own text, its props (the op, the input types) left out."""

    def layout(self, node: Apply, index: int) -> Layout:
        parts: list[str | Operand] = [f"{node.op.name}("]
        for i in range(len(node.inputs)):
            parts.extend([", "] * bool(i) + [Operand(i, float("-inf"))])
        parts.append(")" if len(node.outputs) == 1 else f")[{index}]")
        return Layout(tuple(parts), ATOM)


pprint.assign(OpaqueOp, _OpaquePrinter())


@numpy_impl.register
def _opaque(op: OpaqueOp, node: Apply) -> Impl:
    """Run the PyTensor op's `perform` on the arrays (0-d inputs as the scalars a scalar input takes).

    A result sharing memory with an input (PyTensor's views: SpecifyShape returns its input) is copied:
    relwrite's in-place steps know the views of its own ops only."""
    pt_node = op.pytensor_node(node.inputs)
    dtypes = [np.dtype(out.dtype) for out in node.outputs]
    scalar = [not isinstance(t, PtTensorType) for t in op.input_types]

    def run(*arrays: np.ndarray) -> Any:
        args = [a[()] if s else a for a, s in zip(arrays, scalar)]
        storage: list[list[Any]] = [[None] for _ in node.outputs]
        op.op.perform(pt_node, args, storage)
        results = [np.asarray(cell[0], dtype=d) for cell, d in zip(storage, dtypes)]
        results = [r.copy() if any(np.may_share_memory(r, a) for a in arrays) else r for r in results]
        return tuple(results) if len(results) > 1 else results[0]

    return Impl(run)


class RelwriteOp(PtOp):
    """A relwrite op PyTensor has no counterpart for (hypot, cbrt, fma...), run by the NumPy backend."""

    __props__ = ("op",)

    def __init__(self, op: Op):
        self.op = op

    def make_node(self, *inputs: Any) -> PtApply:
        inputs = [as_tensor_variable(v) for v in inputs]
        node = self.op.make_node(*(pt_input_of(v) for v in inputs))
        return PtApply(self, inputs, [pytensor_type(out.type)() for out in node.outputs])

    def perform(self, node: PtApply, inputs: Sequence[Any], output_storage: list[list[Any]]) -> None:
        rw_node = self.op.make_node(*(pt_input_of(v) for v in node.inputs))
        result = numpy_impl(self.op, rw_node).fn(*(np.asarray(a) for a in inputs))
        results = result if len(rw_node.outputs) > 1 else (result,)
        for cell, value in zip(output_storage, results):
            cell[0] = value

    def __str__(self) -> str:
        return f"Relwrite{{{self.op}}}"


def pt_input_of(var: Any) -> Variable:
    """A relwrite input of the type of a PyTensor variable (constants keep their value)."""
    if isinstance(var, PtConstant):
        return Constant(relwrite_type(var), np.asarray(var.data))
    return relwrite_type(var)()

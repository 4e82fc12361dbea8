"""Sums and means of fused elementwise loops, computed without storing the loop's values.

A `Sum` or `Mean` over every axis of the value of a one-output elementwise
node (a fused `Composite` or a single op, ``sum(x * y)``) that nothing else
reads runs as one kernel (`codegen.reduction_kernel`): the
elementwise values are computed a block (`codegen.FILLED_BLOCK`) at a time into
a stack buffer and summed there by NumPy's pairwise algorithm, step for step, so the
result equals the unfused sum of the same values, while the loop's n-element
array is never written or read back (half the memory traffic, no allocation).

The graph is not changed: the linker gives the elementwise node an
implementation that hands its inputs on (`_Deferred`) and the reduction node
one that runs the kernel on them.  Inputs the kernel cannot take as they are
(another dtype, not C-contiguous, shapes that broadcast, no elements) take the
unfused path: the elementwise node's implementation, then the reduction's.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from relwrite.backends.numpy.impls import Impl
from relwrite.graph import ops
from relwrite.graph.basic import Apply
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.types import TensorType

FUSED_REDUCTIONS = (ops.Sum, ops.Mean)


def reductions_of_loops(fgraph: FunctionGraph, nodes: Sequence[Apply]) -> dict[int, int]:
    """{reduction's position: loop's position} for each Sum or Mean over every axis of the value of a
    one-output elementwise node (a Composite or a single op) that nothing else reads (nor is it a
    graph output), in floats."""
    position = {node: k for k, node in enumerate(nodes)}
    found = {}
    for k, node in enumerate(nodes):
        if type(node.op) not in FUSED_REDUCTIONS:
            continue
        (x,) = node.inputs
        producer = x.owner
        if producer is None or not isinstance(producer.op, ops.Elemwise) or len(producer.outputs) != 1:
            continue
        axis = node.op.axis
        if x.ndim == 0 or (axis is not None and sorted(a % x.ndim for a in axis) != list(range(x.ndim))):
            continue
        if x.dtype not in ("float32", "float64") or node.outputs[0].dtype != x.dtype:
            continue
        readers = list(fgraph.clients.get(x, ()))
        if len(readers) == 1 and readers[0][0] is node and producer in position:
            found[k] = position[producer]
    return found


def loop_composite(node: Apply) -> ops.Composite:
    """The elementwise `node`'s op as a Composite (itself when it is one), for kernel generation."""
    if isinstance(node.op, ops.Composite):
        return node.op
    inner = [TensorType(v.dtype, ())() for v in node.inputs]
    return ops.Composite(inner, node.op.make_node(*inner).outputs)


def scalar_inputs(loop: Apply) -> tuple[bool, ...]:
    """Which inputs of an elementwise node are typed 0-d (one value for every element)."""
    return tuple(v.ndim == 0 for v in loop.inputs)


def kernel_function(module: ctypes.CDLL, name: str, n_inputs: int) -> Callable[..., int]:
    """The kernel `int name(void *out, const void *inputs..., ptrdiff_t n)`, called without the GIL."""
    signature = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.c_void_p, *[ctypes.c_void_p] * n_inputs, ctypes.c_ssize_t
    )
    return signature((name, module))


class _Deferred:
    """A Composite's value not computed yet: the arrays it would be computed from."""

    __slots__ = ("arrays",)

    def __init__(self, arrays: tuple[np.ndarray, ...]):
        self.arrays = arrays


def deferred_impl() -> Impl:
    """The elementwise node's implementation when its reduction is fused: it hands its inputs on."""
    return Impl(lambda *arrays: _Deferred(arrays))


def fused_reduction_impl(
    reduction: Apply, loop: Apply, kernel: Callable[..., int], loop_impl: Impl, reduction_impl: Impl
) -> Impl:
    """The reduction node's implementation: the kernel on the elementwise `loop`'s inputs, or the
    unfused path (`loop_impl`, then `reduction_impl`) where the kernel cannot take them."""
    scalars = scalar_inputs(loop)
    dtypes = tuple(np.dtype(v.dtype) for v in loop.inputs)
    out_dtype = np.dtype(reduction.outputs[0].dtype)
    mean = isinstance(reduction.op, ops.Mean)
    compute, reduce = loop_impl.fn, reduction_impl.fn

    def run(pending: Any) -> Any:
        if not isinstance(pending, _Deferred):  # computed elsewhere (a profile's node by node run)
            return reduce(pending)
        arrays = pending.arrays
        shape = None
        for array, scalar, dtype in zip(arrays, scalars, dtypes):
            if type(array) is not np.ndarray or array.dtype != dtype:
                return reduce(compute(*arrays))
            if scalar:
                if array.ndim:
                    return reduce(compute(*arrays))
                continue
            if (shape is not None and array.shape != shape) or not array.flags.c_contiguous:
                return reduce(compute(*arrays))
            if not array.flags.aligned:
                return reduce(compute(*arrays))
            shape = array.shape
        n = math.prod(shape) if shape is not None else 0
        if n == 0:
            return reduce(compute(*arrays))
        out = np.empty((), out_dtype)
        kernel(out.ctypes.data, *(array.ctypes.data for array in arrays), n)
        if mean:
            out /= n
        return out

    return Impl(run)

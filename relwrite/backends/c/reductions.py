"""C kernels for reductions, softmax and joins: Sum, Mean, Prod, Max and Min over a block of adjacent
axes, Argmax and Argmin along one axis, Softmax and LogSoftmax along the last axis, for float32 and
float64; Join of arrays of any one dtype.  Max, Min, Argmax and Argmin run in C where the reduced
axes have axes after them (column by column: 0.8x and 0.25x NumPy's time on a 1000x1000 matrix);
along the last axes NumPy's SIMD loops beat what gcc makes of a NaN-propagating loop, so they run
NumPy's.

One graph-independent module, built once per machine into the module cache.
An array is read as (A, R, B): the axes before the reduced block, the block,
the axes after it.  With B = 1 a row is reduced with eight running partial
results (the loop vectorizes; sums and products are taken in another order
than NumPy's, so they may differ in the last bits: relative 1e-12 for float64,
1e-5 for float32, over well-conditioned data); with B > 1 rows are combined
element by element, in NumPy's order.  A join copies each input's blocks into
place.  Softmax and LogSoftmax make two passes over a row (its maximum, then
exp and the sum) and one over the result; a row holding an infinity or a NaN,
an empty reduction, another dtype, reduced axes that are not adjacent or a
softmax along another axis run with NumPy, so every edge case gives NumPy's
result or error.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from relwrite.backends.numpy.impls import Impl
from relwrite.graph import ops
from relwrite.graph.basic import Apply

TYPES = {"float64": ("double", "f64"), "float32": ("float", "f32")}

_REDUCTION_TEMPLATE = r"""
int rw_sum_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t A, ptrdiff_t R, ptrdiff_t B) {{
    for (ptrdiff_t a = 0; a < A; a++) {{
        const {T} *x = in + a * R * B;
        {T} *y = out + a * B;
        if (B == 1) {{
            {T} acc[8] = {{0, 0, 0, 0, 0, 0, 0, 0}};
            ptrdiff_t r = 0;
            for (; r + 8 <= R; r += 8)
                for (int k = 0; k < 8; k++) acc[k] += x[r + k];
            for (; r < R; r++) acc[0] += x[r];
            y[0] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        }} else {{
            for (ptrdiff_t b = 0; b < B; b++) y[b] = x[b];
            for (ptrdiff_t r = 1; r < R; r++)
                for (ptrdiff_t b = 0; b < B; b++) y[b] += x[r * B + b];
        }}
    }}
    return 0;
}}

int rw_prod_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t A, ptrdiff_t R, ptrdiff_t B) {{
    for (ptrdiff_t a = 0; a < A; a++) {{
        const {T} *x = in + a * R * B;
        {T} *y = out + a * B;
        if (B == 1) {{
            {T} acc[8] = {{1, 1, 1, 1, 1, 1, 1, 1}};
            ptrdiff_t r = 0;
            for (; r + 8 <= R; r += 8)
                for (int k = 0; k < 8; k++) acc[k] *= x[r + k];
            for (; r < R; r++) acc[0] *= x[r];
            y[0] = ((acc[0] * acc[1]) * (acc[2] * acc[3])) * ((acc[4] * acc[5]) * (acc[6] * acc[7]));
        }} else {{
            for (ptrdiff_t b = 0; b < B; b++) y[b] = x[b];
            for (ptrdiff_t r = 1; r < R; r++)
                for (ptrdiff_t b = 0; b < B; b++) y[b] *= x[r * B + b];
        }}
    }}
    return 0;
}}


/* The row's maximum in eight lanes, and whether every element is finite (v * 0 is 0 for a finite v,
   NaN for an infinity or a NaN): the maximum is meaningful only then. */
static {T} rw_row_max_{S}(const {T} *restrict x, ptrdiff_t n, int *finite) {{
    {T} m[8], z[8] = {{0, 0, 0, 0, 0, 0, 0, 0}};
    for (int k = 0; k < 8; k++) m[k] = x[0];
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) {{
            {T} v = x[i + k];
            m[k] = v > m[k] ? v : m[k];
            z[k] += v * 0;
        }}
    for (; i < n; i++) {{
        m[0] = x[i] > m[0] ? x[i] : m[0];
        z[0] += x[i] * 0;
    }}
    {T} best = m[0], zero = z[0];
    for (int k = 1; k < 8; k++) {{
        best = m[k] > best ? m[k] : best;
        zero += z[k];
    }}
    *finite = zero == 0;
    return best;
}}

/* One row's exp(x - max) into y, and their sum; 0 when the row holds an infinity or a NaN. */
static int rw_row_exp_{S}(const {T} *restrict x, {T} *restrict y, ptrdiff_t n, {T} *max, {T} *sum) {{
    int finite;
    {T} m = rw_row_max_{S}(x, n, &finite), s = 0;
    if (!finite) return 0;
    for (ptrdiff_t i = 0; i < n; i++) y[i] = {EXP}(x[i] - m);
    for (ptrdiff_t i = 0; i < n; i++) s += y[i];
    *max = m;
    *sum = s;
    return 1;
}}

int rw_softmax_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t rows, ptrdiff_t n) {{
    for (ptrdiff_t row = 0; row < rows; row++) {{
        {T} *y = out + row * n, m, s;
        if (!rw_row_exp_{S}(in + row * n, y, n, &m, &s)) return 1;
        for (ptrdiff_t i = 0; i < n; i++) y[i] = y[i] / s;
    }}
    return 0;
}}

int rw_log_softmax_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t rows, ptrdiff_t n) {{
    for (ptrdiff_t row = 0; row < rows; row++) {{
        const {T} *x = in + row * n;
        {T} *y = out + row * n, m, s;
        if (!rw_row_exp_{S}(x, y, n, &m, &s)) return 1;
        {T} shift = {LOG}(s);
        for (ptrdiff_t i = 0; i < n; i++) y[i] = (x[i] - m) - shift;
    }}
    return 0;
}}
"""


_JOIN_SOURCE = r"""
/* One input of a join: A blocks of `chunk` bytes, each written `stride` bytes after the last. */
int rw_join_block(char *restrict out, const char *restrict in, ptrdiff_t A, ptrdiff_t chunk,
                  ptrdiff_t stride) {
    for (ptrdiff_t a = 0; a < A; a++) memcpy(out + a * stride, in + a * chunk, (size_t)chunk);
    return 0;
}
"""


_EXTREME_TEMPLATE = r"""
/* Extremes and their first index along R, column by column (B at a time, the loop vectorizes); a NaN
   wins and is kept once taken (v {OP} NaN is false), as in NumPy.  Correct for B = 1 too, but there
   NumPy's own SIMD loops are faster: the caller runs NumPy's. */
int rw_{NAME}_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t A, ptrdiff_t R, ptrdiff_t B) {{
    for (ptrdiff_t a = 0; a < A; a++) {{
        const {T} *x = in + a * R * B;
        {T} *y = out + a * B;
        for (ptrdiff_t b = 0; b < B; b++) y[b] = x[b];
        for (ptrdiff_t r = 1; r < R; r++)
            for (ptrdiff_t b = 0; b < B; b++) {{
                {T} v = x[r * B + b];
                y[b] = (v {OP} y[b] || v != v) ? v : y[b];
            }}
    }}
    return 0;
}}

int rw_arg{NAME}_{S}(const {T} *restrict in, int64_t *restrict out, ptrdiff_t A, ptrdiff_t R,
                      ptrdiff_t B, {T} *restrict best) {{
    for (ptrdiff_t a = 0; a < A; a++) {{
        const {T} *x = in + a * R * B;
        int64_t *y = out + a * B;
        for (ptrdiff_t b = 0; b < B; b++) {{
            best[b] = x[b];
            y[b] = 0;
        }}
        for (ptrdiff_t r = 1; r < R; r++)
            for (ptrdiff_t b = 0; b < B; b++) {{
                {T} v = x[r * B + b];
                int take = best[b] == best[b] && (v {OP} best[b] || v != v);
                best[b] = take ? v : best[b];
                y[b] = take ? r : y[b];
            }}
    }}
    return 0;
}}
"""


def reductions_source(vector_math_declarations: str) -> str:
    """The module's C source (`vector_math_declarations` lets gcc call libmvec's SIMD exp)."""
    parts = [
        "#include <math.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n",
        vector_math_declarations,
        _JOIN_SOURCE,
    ]
    for ctype, suffix in TYPES.values():
        exp, log = ("exp", "log") if ctype == "double" else ("expf", "logf")
        parts.append(_REDUCTION_TEMPLATE.format(T=ctype, S=suffix, EXP=exp, LOG=log))
        for name, order in (("max", ">"), ("min", "<")):
            parts.append(_EXTREME_TEMPLATE.format(T=ctype, S=suffix, NAME=name, OP=order))
    return "".join(parts)


_AXES_KERNELS = {ops.Sum: "sum", ops.Mean: "sum", ops.Prod: "prod", ops.Max: "max", ops.Min: "min"}
_ARG_KERNELS = {ops.Argmax: "argmax", ops.Argmin: "argmin"}
_COLUMNS_ONLY = (ops.Max, ops.Min)
"""Kernels run only where the reduced block has axes after it (B > 1): over the last axes NumPy is faster."""
_ROW_KERNELS = {ops.Softmax: "softmax", ops.LogSoftmax: "log_softmax"}
REDUCTION_OPS = (*_AXES_KERNELS, *_ARG_KERNELS, *_ROW_KERNELS, ops.Join)
"""The op classes this module has kernels for."""


def reduction_impl(module: ctypes.CDLL, node: Apply, reference: Impl) -> Impl | None:
    """A C implementation of `node` around `reference` (NumPy's), or None when the node has none."""
    op, dtype = node.op, node.outputs[0].dtype
    if type(op) is ops.Join:
        if any(v.dtype != dtype for v in node.inputs):
            return None
        kernel = _c_function(module, "rw_join_block", 5)
        return Impl(_join_run(kernel, op.axis, np.dtype(dtype), reference.fn))
    source = node.inputs[0].dtype
    if source not in TYPES or (type(op) not in _ARG_KERNELS and source != dtype):
        return None
    suffix = TYPES[source][1]
    if type(op) in _AXES_KERNELS:
        kernel = _c_function(module, f"rw_{_AXES_KERNELS[type(op)]}_{suffix}", 5)
        rows = type(op) not in _COLUMNS_ONLY
        return Impl(_axes_run(kernel, op.axis, np.dtype(dtype), isinstance(op, ops.Mean), rows, reference.fn))
    if type(op) in _ARG_KERNELS:
        kernel = _c_function(module, f"rw_{_ARG_KERNELS[type(op)]}_{suffix}", 6)
        return Impl(_arg_run(kernel, op.axis, np.dtype(source), reference.fn))
    if type(op) in _ROW_KERNELS:
        kernel = _c_function(module, f"rw_{_ROW_KERNELS[type(op)]}_{suffix}", 4)
        return Impl(_rows_run(kernel, op.axis, np.dtype(dtype), reference.fn))
    return None


def _c_function(module: ctypes.CDLL, name: str, n_args: int) -> Callable[..., int]:
    """`name` from `module`: two pointers, then sizes, then (for six arguments) a scratch pointer."""
    sizes = [ctypes.c_ssize_t] * (min(n_args, 5) - 2)
    scratch = [ctypes.c_void_p] if n_args == 6 else []
    return ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, *sizes, *scratch)((name, module))


def _blocks(shape: tuple[int, ...], first: int, last: int) -> tuple[int, int, int]:
    """(A, R, B): the products of the lengths before axis `first`, from `first` to `last`, after `last`."""
    return (
        int(np.prod(shape[:first], dtype=np.int64)),
        int(np.prod(shape[first : last + 1], dtype=np.int64)),
        int(np.prod(shape[last + 1 :], dtype=np.int64)),
    )


def _axes_run(
    kernel: Callable[..., int],
    axis: Any,
    dtype: np.dtype,
    mean: bool,
    rows: bool,
    reference: Callable[..., Any],
) -> Callable[[np.ndarray], Any]:
    def run(x: np.ndarray) -> Any:
        ndim = x.ndim
        axes = sorted({a % ndim for a in axis}) if axis is not None else list(range(ndim))
        if not axes or x.dtype != dtype or axes != list(range(axes[0], axes[-1] + 1)):
            return reference(x)
        shape = x.shape
        outer, reduced, inner = _blocks(shape, axes[0], axes[-1])
        if reduced == 0 or outer * inner == 0 or (inner == 1 and not rows):
            return reference(x)
        x = np.ascontiguousarray(x)
        out = np.empty(shape[: axes[0]] + shape[axes[-1] + 1 :], dtype)
        kernel(x.ctypes.data, out.ctypes.data, outer, reduced, inner)
        if mean:
            out /= reduced
        return out

    return run


def _rows_run(
    kernel: Callable[..., int], axis: int, dtype: np.dtype, reference: Callable[..., Any]
) -> Callable[[np.ndarray], Any]:
    def run(x: np.ndarray) -> Any:
        if x.ndim == 0 or axis % x.ndim != x.ndim - 1 or x.dtype != dtype or x.size == 0:
            return reference(x)
        x = np.ascontiguousarray(x)
        out = np.empty(x.shape, dtype)
        if kernel(x.ctypes.data, out.ctypes.data, x.size // x.shape[-1], x.shape[-1]) != 0:
            return reference(x)  # a row whose maximum is not finite: NumPy's result
        return out

    return run


def _arg_run(
    kernel: Callable[..., int], axis: int | None, dtype: np.dtype, reference: Callable[..., Any]
) -> Callable[[np.ndarray], Any]:
    """Argmax/Argmin along an axis with axes after it; rows and the flattened array run NumPy's."""

    def run(x: np.ndarray) -> Any:
        if axis is None or x.dtype != dtype or x.ndim == 0:
            return reference(x)  # the flattened array is one row: NumPy's is faster
        position = axis % x.ndim
        outer, reduced, inner = _blocks(x.shape, position, position)
        if reduced == 0 or outer * inner == 0 or inner == 1:
            return reference(x)  # NumPy's error for an empty axis, its empty result, its faster rows
        x = np.ascontiguousarray(x)
        out = np.empty(x.shape[:position] + x.shape[position + 1 :], np.int64)
        scratch = np.empty(inner, dtype)
        kernel(x.ctypes.data, out.ctypes.data, outer, reduced, inner, scratch.ctypes.data)
        return out

    return run


def _join_run(
    kernel: Callable[..., int], axis: int, dtype: np.dtype, reference: Callable[..., Any]
) -> Callable[..., Any]:
    def run(*arrays: np.ndarray) -> Any:
        first = arrays[0]
        ndim = first.ndim
        if ndim == 0 or not -ndim <= axis < ndim:
            return reference(*arrays)
        position = axis % ndim
        others = first.shape[:position], first.shape[position + 1 :]
        if any(
            a.dtype != dtype or a.ndim != ndim or (a.shape[:position], a.shape[position + 1 :]) != others
            for a in arrays
        ):
            return reference(*arrays)  # NumPy's casts, or its error naming the mismatch
        outer, _, inner = _blocks(first.shape, position, position)
        total = sum(a.shape[position] for a in arrays)
        out = np.empty((*others[0], total, *others[1]), dtype)
        stride, offset = total * inner * dtype.itemsize, 0
        for a in arrays:
            chunk = a.shape[position] * inner * dtype.itemsize
            if chunk and outer:
                a = np.ascontiguousarray(a)
                kernel(out.ctypes.data + offset, a.ctypes.data, outer, chunk, stride)
            offset += chunk
        return out

    return run

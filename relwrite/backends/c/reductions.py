"""C kernels for reductions, softmax and joins: Sum, Mean, Prod, Max and Min over a block of adjacent
axes, Argmax and Argmin along one axis, Softmax and LogSoftmax along the last axis, for float32 and
float64; Join of arrays of any one dtype.  Max, Min, Argmax and Argmin run in C where the reduced
axes have axes after them (column by column: 0.8x and 0.25x NumPy's time on a 1000x1000 matrix);
along the last axes NumPy's SIMD loops beat what gcc makes of a NaN-propagating loop, so they run
NumPy's.

One graph-independent module, built once per machine into the module cache.
An array is read as (A, R, B): the axes before the reduced block, the block,
the axes after it.  With B = 1 a row is summed by NumPy's own pairwise
algorithm and multiplied in order, as NumPy does; with B > 1 rows are combined
element by element, in NumPy's order: sums, means and products are
bit-identical to NumPy's.  A join copies each input's blocks into
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

from relwrite.backends.c.codegen import pairwise_sum_source
from relwrite.backends.numpy.impls import Impl
from relwrite.graph import ops
from relwrite.graph.basic import Apply

TYPES = {"float64": ("double", "f64"), "float32": ("float", "f32")}
_MASKS = {"double": "long long", "float": "int"}

_REDUCTION_TEMPLATE = r"""
int rw_sum_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t A, ptrdiff_t R, ptrdiff_t B) {{
    for (ptrdiff_t a = 0; a < A; a++) {{
        const {T} *x = in + a * R * B;
        {T} *y = out + a * B;
        if (B == 1) {{
            y[0] = rw_pairwise_{S}(x, R);
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
        if (B == 1) {{  /* in order, as NumPy multiplies (so products are bit-identical to NumPy's) */
            {T} acc = 1;
            for (ptrdiff_t r = 0; r < R; r++) acc *= x[r];
            y[0] = acc;
        }} else {{
            for (ptrdiff_t b = 0; b < B; b++) y[b] = x[b];
            for (ptrdiff_t r = 1; r < R; r++)
                for (ptrdiff_t b = 0; b < B; b++) y[b] *= x[r * B + b];
        }}
    }}
    return 0;
}}


/* The row's maximum, and whether every element is finite (v * 0 is 0 for a finite v, NaN for an
   infinity or a NaN): the maximum is meaningful only then.  Written with gcc's vector extensions (a
   compare and a blend per 64 bytes, four running maxima): the plain `v > m ? v : m` loop does not
   vectorize without -ffinite-math-only. */
typedef {T} rw_lanes_{S} __attribute__((vector_size(64)));
typedef {I} rw_mask_{S} __attribute__((vector_size(64)));
#define RW_LANES_{S} (64 / (ptrdiff_t)sizeof({T}))

static {T} rw_row_max_{S}(const {T} *restrict x, ptrdiff_t n, int *finite) {{
    rw_lanes_{S} m[4], z[4];
    for (int j = 0; j < 4; j++) {{
        m[j] = x[0] + (rw_lanes_{S}){{0}};
        z[j] = (rw_lanes_{S}){{0}};
    }}
    ptrdiff_t i = 0;
    for (; i + 4 * RW_LANES_{S} <= n; i += 4 * RW_LANES_{S})
        for (int j = 0; j < 4; j++) {{
            rw_lanes_{S} v;
            memcpy(&v, x + i + j * RW_LANES_{S}, sizeof v);
            rw_mask_{S} greater = v > m[j];
            m[j] = (rw_lanes_{S})(((rw_mask_{S})v & greater) | ((rw_mask_{S})m[j] & ~greater));
            z[j] += v * 0;
        }}
    {T} best = x[0], zero = 0;
    for (int j = 0; j < 4; j++)
        for (ptrdiff_t k = 0; k < RW_LANES_{S}; k++) {{
            best = m[j][k] > best ? m[j][k] : best;
            zero += z[j][k];
        }}
    for (; i < n; i++) {{
        best = x[i] > best ? x[i] : best;
        zero += x[i] * 0;
    }}
    *finite = zero == 0;
    return best;
}}

/* One row's exp(x - max) into y, and their sum in eight running sums; 0 when the row holds an infinity
   or a NaN.  With `split` the terms equal to 1 (the maximum's, counted apart: `tops`) are kept out of
   the sum of the others, so that log_softmax can take log1p(others + tops - 1), which keeps every digit
   of a sum the maximum dominates (log(1 + 1e-11) would lose half of them); softmax needs only the
   sum (others, with tops 0), and saves three operations per element. */
static inline int rw_row_exp_{S}(const {T} *restrict x, {T} *restrict y, ptrdiff_t n, int split, {T} *max,
                                 {T} *others, {T} *tops) {{
    int finite;
    {T} m = rw_row_max_{S}(x, n, &finite);
    if (!finite) return 0;
    {T} acc[8] = {{0, 0, 0, 0, 0, 0, 0, 0}}, count[8] = {{0, 0, 0, 0, 0, 0, 0, 0}};
    ptrdiff_t i = 0;
    if (split) {{
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) {{
                {T} shifted = x[i + k] - m, e = rw_exp_nonpositive_{S}(shifted), top = ({T})(shifted == 0);
                y[i + k] = e;
                acc[k] += e - top; /* exp(0) is exactly 1: a maximum adds 0 here and 1 to its count */
                count[k] += top;
            }}
    }} else {{
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; k++) {{
                {T} e = rw_exp_nonpositive_{S}(x[i + k] - m);
                y[i + k] = e;
                acc[k] += e;
            }}
    }}
    for (; i < n; i++) {{
        {T} shifted = x[i] - m, top = split ? ({T})(shifted == 0) : 0;
        y[i] = rw_exp_nonpositive_{S}(shifted);
        acc[0] += y[i] - top;
        count[0] += top;
    }}
    *others = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    *tops = ((count[0] + count[1]) + (count[2] + count[3])) + ((count[4] + count[5]) + (count[6] + count[7]));
    *max = m;
    return 1;
}}

int rw_softmax_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t rows, ptrdiff_t n) {{
    for (ptrdiff_t row = 0; row < rows; row++) {{
        {T} *y = out + row * n, m, others, tops;
        if (!rw_row_exp_{S}(in + row * n, y, n, 0, &m, &others, &tops)) return 1;
        {T} scale = 1 / (tops + others);  /* a multiply per element, not a divide: within an ulp of y / s */
        for (ptrdiff_t i = 0; i < n; i++) y[i] = y[i] * scale;
    }}
    return 0;
}}

int rw_log_softmax_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t rows, ptrdiff_t n) {{
    for (ptrdiff_t row = 0; row < rows; row++) {{
        const {T} *x = in + row * n;
        {T} *y = out + row * n, m, others, tops;
        if (!rw_row_exp_{S}(x, y, n, 1, &m, &others, &tops)) return 1;
        {T} shift = {LOG1P}(others + (tops - 1));
        for (ptrdiff_t i = 0; i < n; i++) y[i] = (x[i] - m) - shift;
    }}
    return 0;
}}
"""


_EXP_SOURCE = r"""
/* exp(x) for x <= 0, within an ulp of the exact value, inlined so that softmax loops vectorize (libmvec's
   exp, an out-of-line call, runs 3.5x slower here): x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts),
   exp(r) by a polynomial fitted to it on that interval (degree 11 for double, 6 for float: error 3e-18
   and 2e-9, under half an ulp), 2^n applied in two halves so a subnormal result is rounded once; below
   the smallest subnormal, 0.  The reduction and the Horner steps are fused multiply-adds where the
   target has them (one rounding each; 1.6x faster than separate ones). */
#if defined(__FMA__)
#define RW_MADD(a, b, c) __builtin_fma(a, b, c)
#define RW_MADDF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define RW_MADD(a, b, c) ((a) * (b) + (c))
#define RW_MADDF(a, b, c) ((a) * (b) + (c))
#endif
"""


_EXP_CONSTANTS = {
    # clamp, shifter, log2(e), ln2's high and low parts, int type, exponent bias and shift
    "double": (
        "-746.0", "0x1.8p52", "0x1.71547652b82fep0", "0x1.62e42fefa3800p-1", "0x1.ef35793c7673p-45",
        "int64_t", 1023, 52,
    ),
    "float": (
        "-104.0f", "0x1.8p23f", "0x1.715476p0f", "0x1.62e4p-1f", "0x1.7f7d1cp-20f", "int32_t", 127, 23,
    ),
}  # fmt: skip

_EXP_POLYNOMIALS = {
    # exp(r) on [-ln2 / 2, ln2 / 2], highest degree first: mpmath.chebyfit(mpmath.exp, [-a, a], N)
    # with a = ln2 / 2 at 40 digits, N = 12 (double) and 7 (float, the coefficients rounded to float)
    "double": (
        "0x1.af631d0059becp-26", "0x1.28b4057f44145p-22", "0x1.71ddf5749d126p-19", "0x1.a01991ac8730ap-16",
        "0x1.a01a01b14378fp-13", "0x1.6c16c187fbe02p-10", "0x1.111111110f225p-7", "0x1.555555554f0cfp-5",
        "0x1.555555555555ap-3", "0x1.0000000000011p-1", "0x1p+0", "0x1p+0",
    ),
    "float": (
        "0x1.6d7532p-10f", "0x1.126fa6p-7f", "0x1.5554acp-5f", "0x1.555404p-3f",
        "0x1p-1f", "0x1p+0f", "0x1p+0f",
    ),
}  # fmt: skip


def _exp_source(ctype: str, suffix: str) -> str:
    """`rw_exp_nonpositive_{suffix}` for `ctype` (see `_EXP_SOURCE`): its Horner steps written out."""
    clamp, shifter, log2e, ln2_high, ln2_low, itype, bias, bits = _EXP_CONSTANTS[ctype]
    madd = "RW_MADD" if ctype == "double" else "RW_MADDF"
    first, *rest = _EXP_POLYNOMIALS[ctype]
    steps = "".join(f"    p = {madd}(p, r, {c});\n" for c in rest)
    return f"""
static inline {ctype} rw_exp_nonpositive_{suffix}({ctype} x) {{
    x = x < {clamp} ? {clamp} : x;
    const {ctype} shifter = {shifter};
    {ctype} n = {madd}(x, {log2e}, shifter) - shifter;
    {ctype} r = {madd}(-n, {ln2_high}, x);
    r = {madd}(-n, {ln2_low}, r);
    {ctype} p = {first};
{steps}    {itype} k = ({itype})n, k1 = k >> 1, k2 = k - k1;
    {itype} b1 = (k1 + {bias}) << {bits}, b2 = (k2 + {bias}) << {bits};
    {ctype} s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return p * s1 * s2;
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


def reductions_source() -> str:
    """The module's C source."""
    parts = [
        "#include <math.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <string.h>\n",
        _EXP_SOURCE,
        _JOIN_SOURCE,
    ]
    for ctype, suffix in TYPES.values():
        parts.append(_exp_source(ctype, suffix))
        parts.append(pairwise_sum_source(f"rw_pairwise_{suffix}", ctype))
        log1p = "log1p" if ctype == "double" else "log1pf"
        parts.append(_REDUCTION_TEMPLATE.format(T=ctype, S=suffix, I=_MASKS[ctype], LOG1P=log1p))
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

"""C kernels for reductions, softmax and joins: Sum, Mean, Prod, Max and Min over a block of adjacent
axes, Argmax and Argmin along one axis, Softmax and LogSoftmax along the last axis, for float32 and
float64 (the softmaxes of a float32 row computed in double and rounded once, as NumPy's backend computes
them); Join of arrays of any one dtype.  Max, Min, Argmax and Argmin run in C where the reduced axes have
axes after them (column by column: 0.8x and 0.25x NumPy's time on a 1000x1000 matrix);
along the last axes NumPy's SIMD loops beat what gcc makes of a NaN-propagating loop, so they run
NumPy's.

One graph-independent module, built once per machine into the module cache.
An array is read as (A, R, B): the axes before the reduced block, the block,
the axes after it.  With B = 1 a row is summed by NumPy's own pairwise
algorithm and multiplied in order, as NumPy does; with B > 1 rows are combined
element by element, in NumPy's order: sums, means and products are
bit-identical to NumPy's.  A join copies each input's blocks into
place.  Softmax and LogSoftmax make two passes over a row (its maximum, then
exp and the sum) and one over the result; where the CPU has AVX-512, a row
whose terms are all normal numbers takes a table-driven exp 8 or 16 lanes at a
time (0.75 -> 0.51 ms on 1000x1000 float64); a row holding an infinity or a NaN,
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
"""


_ROWS_TEMPLATE = r"""
/* Softmax and LogSoftmax rows, in double only: a float32 row is computed in double and rounded once
   (`_rows_run`), as NumPy's backend computes it; in float, 1 + 4.07e-7 rounds to 1 + 3.58e-7 and exp is
   within an ulp, so an element came out an ulp off its exact value (a third of them, for log_softmax). */

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
    *max = m;
#if defined(__AVX512F__)
    if (rw_row_exp_lanes_{S}(x, y, n, split, m, others, tops)) return 1;
#endif
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
    return 1;
}}

int rw_softmax_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t rows, ptrdiff_t n) {{
    for (ptrdiff_t row = 0; row < rows; row++) {{
        {T} *y = out + row * n, m, others, tops;
        if (!rw_row_exp_{S}(in + row * n, y, n, 0, &m, &others, &tops)) return 1;
        {T} scale = 1 / (tops + others);  /* a multiply per element, not a divide: within an ulp */
        for (ptrdiff_t i = 0; i < n; i++) y[i] = y[i] * scale;
    }}
    return 0;
}}

int rw_log_softmax_{S}(const {T} *restrict in, {T} *restrict out, ptrdiff_t rows, ptrdiff_t n) {{
    for (ptrdiff_t row = 0; row < rows; row++) {{
        const {T} *x = in + row * n;
        {T} *y = out + row * n, m, others, tops;
        if (!rw_row_exp_{S}(x, y, n, 1, &m, &others, &tops)) return 1;
        {T} shift = log1p(others + (tops - 1));
        /* -(shift - d), not d - shift: a maximum's entry, -log1p(others), is below zero when the row has
           other entries (all finite here), so one that rounds to zero is -0.0; a row of one is exactly 0 */
        if (n == 1) y[0] = 0;
        else for (ptrdiff_t i = 0; i < n; i++) y[i] = -(shift - (x[i] - m));
    }}
    return 0;
}}
"""


_EXP_SOURCE = r"""
/* exp(x) for x <= 0, within an ulp of the exact value, inlined so that softmax loops vectorize (libmvec's
   exp, an out-of-line call, runs 3.5x slower here): x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts),
   exp(r) by a polynomial fitted to it on that interval (degree 11: error 3e-18, under half an ulp), 2^n
   applied in two halves so a subnormal result is rounded once; below the smallest subnormal, 0.  The
   reduction and the Horner steps are fused multiply-adds where the target has them (one rounding each;
   1.6x faster than separate ones). */
#if defined(__FMA__)
#define RW_MADD(a, b, c) __builtin_fma(a, b, c)
#else
#define RW_MADD(a, b, c) ((a) * (b) + (c))
#endif
"""


_EXP_CONSTANTS = (
    # clamp, shifter, log2(e), ln2's high and low parts, int type, exponent bias and shift
    "-746.0", "0x1.8p52", "0x1.71547652b82fep0", "0x1.62e42fefa3800p-1", "0x1.ef35793c7673p-45",
    "int64_t", 1023, 52,
)  # fmt: skip

_EXP_POLYNOMIAL = (
    # exp(r) on [-ln2 / 2, ln2 / 2], highest degree first: mpmath.chebyfit(mpmath.exp, [-a, a], 12) with
    # a = ln2 / 2 at 40 digits
    "0x1.af631d0059becp-26", "0x1.28b4057f44145p-22", "0x1.71ddf5749d126p-19", "0x1.a01991ac8730ap-16",
    "0x1.a01a01b14378fp-13", "0x1.6c16c187fbe02p-10", "0x1.111111110f225p-7", "0x1.555555554f0cfp-5",
    "0x1.555555555555ap-3", "0x1.0000000000011p-1", "0x1p+0", "0x1p+0",
)  # fmt: skip


def _exp_source() -> str:
    """`rw_exp_nonpositive_f64` (see `_EXP_SOURCE`): its Horner steps written out."""
    clamp, shifter, log2e, ln2_high, ln2_low, itype, bias, bits = _EXP_CONSTANTS
    ctype, suffix, madd = "double", "f64", "RW_MADD"
    first, *rest = _EXP_POLYNOMIAL
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


_LANES_EXP_TEMPLATE = r"""
#if defined(__AVX512F__)
#include <immintrin.h>
/* exp(x) of {L} lanes whose results are normal numbers (x >= {FLOOR}), within 0.8 ulp of the exact value
   and 1.5x faster than `rw_exp_nonpositive_{S}`: x = (16 k + j) ln2 / 16 + r with |r| <= ln2 / 32, so
   exp(x) = 2^k 2^(j / 16) exp(r); 2^(j / 16) from a table of 16 (a high and a low part, picked by a
   permute), exp(r) - 1 = r + r^2 P(r) with P of degree {DEGREE}, and 2^k added to the exponent's bits. */
static const {T} rw_exp_high_{S}[16] = {{{TABLE_HIGH}}}, rw_exp_low_{S}[16] = {{{TABLE_LOW}}};

static inline {V} rw_exp_lanes_{S}({V} x) {{
    const {V} shifter = _mm512_set1_{P}({SHIFTER});
    {V} z = _mm512_fmadd_{P}(x, _mm512_set1_{P}({SCALE}), shifter);
    {V} n = _mm512_sub_{P}(z, shifter);
    {V} r = _mm512_fnmadd_{P}(n, _mm512_set1_{P}({STEP_HIGH}), x);
    r = _mm512_fnmadd_{P}(n, _mm512_set1_{P}({STEP_LOW}), r);
    __m512i bits = _mm512_cast{P}_si512(z);
    {V} t = {LOOKUP_HIGH}, t_low = {LOOKUP_LOW};
    {V} p = _mm512_set1_{P}({FIRST});
{STEPS}    {V} q = _mm512_fmadd_{P}(p, _mm512_mul_{P}(r, r), r);
    {V} s = _mm512_add_{P}(t, _mm512_fmadd_{P}(t, q, t_low));
    __m512i k = _mm512_slli_{E}(_mm512_srai_{E}(bits, 4), {MANTISSA});
    return _mm512_castsi512_{P}(_mm512_add_{E}(_mm512_cast{P}_si512(s), k));
}}

/* The terms of `lanes` of x (see `rw_row_exp_lanes_{S}`): stored, added to the sums, their tops counted. */
static inline {M} rw_exp_step_{S}(const {T} *restrict x, {T} *restrict y, {M} lanes, int split, {V} max,
                                  {V} *acc, {V} *count) {{
    const {V} one = _mm512_set1_{P}(1), zero = _mm512_setzero_{P}();
    {V} shifted = _mm512_sub_{P}(_mm512_maskz_loadu_{P}(lanes, x), max);
    {V} e = rw_exp_lanes_{S}(shifted);
    _mm512_mask_storeu_{P}(y, lanes, e);
    {M} top = split ? _mm512_mask_cmp_{P}_mask(lanes, shifted, zero, _CMP_EQ_OQ) : 0;
    *acc = _mm512_mask_add_{P}(*acc, lanes, *acc, _mm512_mask_sub_{P}(e, top, e, one));
    *count = _mm512_mask_add_{P}(*count, top, *count, one);
    return _mm512_mask_cmp_{P}_mask(lanes, shifted, _mm512_set1_{P}({FLOOR}), _CMP_LT_OQ);
}}

/* `rw_row_exp_{S}` {L} lanes at a time; 0 (y to be rewritten) when a term would not be a normal number:
   the scalar loop then computes the row, rounding subnormal terms once. */
static int rw_row_exp_lanes_{S}(const {T} *restrict x, {T} *restrict y, ptrdiff_t n, int split, {T} m,
                               {T} *others, {T} *tops) {{
    const {V} max = _mm512_set1_{P}(m);
    {V} acc = _mm512_setzero_{P}(), count = acc;
    {M} below = 0;
    ptrdiff_t i = 0;
    for (; i + {L} <= n; i += {L}) below |= rw_exp_step_{S}(x + i, y + i, ({M})-1, split, max, &acc, &count);
    if (i < n) below |= rw_exp_step_{S}(x + i, y + i, ({M})((1u << (n - i)) - 1), split, max, &acc, &count);
    if (below) return 0;
    *others = _mm512_reduce_add_{P}(acc);
    *tops = _mm512_reduce_add_{P}(count);
    return 1;
}}
#endif
"""

_LANES = (
    # lanes, vector and mask types, intrinsic suffixes, mantissa bits, the floor of normal results, shifter,
    # 16 / ln2, ln2 / 16 in a high and a low part
    8, "__m512d", "__mmask8", "pd", "epi64", 52, "-708.0", "0x1.8p52", "0x1.71547652b82fep+4",
    "0x1.62e42fefa39efp-5", "0x1.abc9e3b39803fp-60",
)  # fmt: skip

_LANES_POLYNOMIAL = (
    # P(r) ~ (exp(r) - 1 - r) / r^2 on [-ln2 / 32, ln2 / 32], highest degree first:
    # mpmath.chebyfit(P, [-a, a], 5) with a = ln2 / 32 at 40 digits (q's error 2.8e-17)
    "0x1.6c17bb51f236dp-10", "0x1.11120af701debp-7", "0x1.55555555194d2p-5", "0x1.55555554dd44dp-3", "0x1p-1",
)  # fmt: skip

_POWERS_OF_TWO = (
    # 2^(j / 16) for j = 0..15: the nearest double and the rest, from mpmath at 40 digits
    (
        "0x1p+0", "0x1.0b5586cf9890fp+0", "0x1.172b83c7d517bp+0", "0x1.2387a6e756238p+0",
        "0x1.306fe0a31b715p+0", "0x1.3dea64c123422p+0", "0x1.4bfdad5362a27p+0", "0x1.5ab07dd485429p+0",
        "0x1.6a09e667f3bcdp+0", "0x1.7a11473eb0187p+0", "0x1.8ace5422aa0dbp+0", "0x1.9c49182a3f090p+0",
        "0x1.ae89f995ad3adp+0", "0x1.c199bdd85529cp+0", "0x1.d5818dcfba487p+0", "0x1.ea4afa2a490dap+0",
    ),
    (
        "0x0p+0", "0x1.8a62e4adc610bp-54", "-0x1.19041b9d78a76p-55",
        "0x1.9b07eb6c70573p-54", "0x1.6f46ad23182e4p-55", "0x1.ada0911f09ebcp-55",
        "0x1.d4397afec42e2p-56", "0x1.6324c054647adp-54", "-0x1.bdd3413b26456p-54",
        "-0x1.41577ee04992fp-55", "0x1.6e9f156864b27p-54", "0x1.c7c46b071f2bep-56",
        "0x1.7a1cd345dcc81p-54", "0x1.11065895048ddp-55", "0x1.2ed02d75b3707p-55",
        "-0x1.e9c23179c2893p-54",
    ),
)  # fmt: skip


def _lanes_exp_source() -> str:
    """`rw_exp_lanes_f64` and `rw_row_exp_lanes_f64` (see `_LANES_EXP_TEMPLATE`)."""
    lanes, vector, mask, p, e, mantissa, floor, shifter, scale, step_high, step_low = _LANES
    first, *rest = _LANES_POLYNOMIAL
    high, low = _POWERS_OF_TWO
    # two registers hold a table: bit 3 of the index picks one
    lookup = (
        "_mm512_permutex2var_pd(_mm512_loadu_pd(rw_exp_{0}_f64), bits, _mm512_loadu_pd(rw_exp_{0}_f64 + 8))"
    )
    return _LANES_EXP_TEMPLATE.format(
        T="double", S="f64", L=lanes, V=vector, M=mask, P=p, E=e, MANTISSA=mantissa, FLOOR=floor,
        SHIFTER=shifter, SCALE=scale, STEP_HIGH=step_high, STEP_LOW=step_low, DEGREE=len(rest),
        FIRST=first, STEPS="".join(f"    p = _mm512_fmadd_{p}(p, r, _mm512_set1_{p}({c}));\n" for c in rest),
        LOOKUP_HIGH=lookup.format("high"), LOOKUP_LOW=lookup.format("low"), TABLE_HIGH=", ".join(high),
        TABLE_LOW=", ".join(low),
    )  # fmt: skip


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
        parts.append(pairwise_sum_source(f"rw_pairwise_{suffix}", ctype))
        parts.append(_REDUCTION_TEMPLATE.format(T=ctype, S=suffix))
        for name, order in (("max", ">"), ("min", "<")):
            parts.append(_EXTREME_TEMPLATE.format(T=ctype, S=suffix, NAME=name, OP=order))
    parts += [_exp_source(), _lanes_exp_source(), _ROWS_TEMPLATE.format(T="double", S="f64", I="long long")]
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
    if type(op) in _ROW_KERNELS:  # in double, rounded once (see _ROWS_TEMPLATE)
        kernel = _c_function(module, f"rw_{_ROW_KERNELS[type(op)]}_f64", 4)
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
    """Along the last axis, a C row kernel in double, the result rounded once to `dtype`."""
    work_dtype = np.dtype(np.float64)

    def run(x: np.ndarray) -> Any:
        if x.ndim == 0 or axis % x.ndim != x.ndim - 1 or x.dtype != dtype or x.size == 0:
            return reference(x)
        wide = np.ascontiguousarray(x, dtype=work_dtype)
        out = np.empty(x.shape, work_dtype)
        if kernel(wide.ctypes.data, out.ctypes.data, x.size // x.shape[-1], x.shape[-1]) != 0:
            return reference(x)  # a row whose maximum is not finite: NumPy's result
        return out if work_dtype == dtype else out.astype(dtype)

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

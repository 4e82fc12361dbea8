"""fma(a, b, c) = a * b + c rounded once, over NumPy arrays of float16, float32 or float64.

NumPy has no fma ufunc and Python 3.11's `math` no `fma`.  The fast path is
error-free: the exact value is split into a candidate `v` in the target
dtype and two float64 residuals, `a * b + c == v + r1 + r2` exactly; `v` is
the correctly rounded result wherever the residuals are together clearly
smaller than half the gap from `v` to its nearer neighbour (or where a
residual is zero and `v` came from one correctly rounded sum).  Elsewhere
(overflow, a product so small its error underflows, a near tie) the exact
rational value is computed in integers and rounded, element by element.

float64: Dekker's product (Veltkamp's split) gives `a * b == p + e`, Knuth's
TwoSum three error-free sums.  float16 and float32: products are exact in
float64, one TwoSum gives the exact sum, the candidate is its float64 sum
rounded to the narrow dtype.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

DTYPES = ("float16", "float32", "float64")
"""The dtypes `fma` computes in."""

_SPLITTER = 2.0**27 + 1.0
_MAX_FACTOR = 2.0**995
"""Beyond this, Veltkamp's split of a factor could overflow."""
_MIN_PRODUCT = 2.0**-968
"""Below this (exponents of the factors summing under -970), Dekker's product error could underflow."""
_SURE = 0.4999
"""The residuals' float64 sum must be under this share of the gap to `v`'s nearer neighbour: with the
sum's own rounding, their exact sum is then under half of it, and `v` the nearest value."""


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s, err with s = fl(a + b) and a + b == s + err exactly (Knuth; no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """hi, lo of 26 significant bits each, a == hi + lo (Veltkamp)."""
    t = _SPLITTER * a
    hi = t - (t - a)
    return hi, a - hi


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p, e with p = fl(a * b) and a * b == p + e exactly (Dekker; see `_MAX_FACTOR`, `_MIN_PRODUCT`)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _nearest(v: np.ndarray, r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """Where v + r1 + r2 (exactly) surely rounds to v in v's dtype: |r1| + |r2| under half the smaller
    gap around v.  Not at infinities or NaN."""
    down = np.abs(v - np.nextafter(v, v.dtype.type(-np.inf))).astype(np.float64)
    up = np.abs(np.nextafter(v, v.dtype.type(np.inf)) - v).astype(np.float64)
    return np.isfinite(v) & (np.abs(r1) + np.abs(r2) < _SURE * np.minimum(down, up))


def _fast64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p, e = _two_product(a, b)
    s, t = _two_sum(p, c)
    u, w = _two_sum(t, e)
    v, x = _two_sum(s, u)  # a * b + c == v + x + w
    valid = (np.abs(a) <= _MAX_FACTOR) & (np.abs(b) <= _MAX_FACTOR) & (np.abs(p) >= _MIN_PRODUCT)
    valid &= np.isfinite(v) & np.isfinite(x) & np.isfinite(w)
    # w == 0: v is fl(s + u) with s + u the exact value, rounded once by the hardware (ties included)
    return v, valid & ((w == 0) | _nearest(v, x, w))


def _fast_narrow(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    p = a.astype(np.float64) * b.astype(np.float64)  # exact: 2 * 24 significant bits at most
    s, t = _two_sum(p, c.astype(np.float64))
    v = s.astype(dtype)
    r1 = s - v.astype(np.float64)  # exact: below v's gap, in s's precision
    # t == 0: v is s rounded once, s the exact value
    return v, np.isfinite(s) & np.isfinite(t) & ((t == 0) | _nearest(v, r1, t))


def _rounded(numerator: int, denominator: int, dtype: np.dtype) -> Any:
    """numerator / denominator (denominator > 0) correctly rounded to `dtype`, ties to even; 0 is +0.

    float64: Python's integer true division rounds correctly.  Narrower: that division rounded to odd
    (53 bits, at least two more than the dtype's), then to the dtype, rounds as the exact value would.
    """
    try:
        r = numerator / denominator
    except OverflowError:
        r = math.inf if numerator > 0 else -math.inf
    if dtype != np.float64 and math.isfinite(r):
        n, d = r.as_integer_ratio()
        exact = numerator * d - n * denominator  # the sign of (exact value - r)
        if exact and not int(np.float64(r).view(np.uint64)) & 1:
            r = math.nextafter(r, math.inf if exact > 0 else -math.inf)
    with np.errstate(over="ignore"):  # past the dtype's range: infinite
        return dtype.type(r)


def exact_fma(a: float, b: float, c: float, dtype: Any) -> Any:
    """a * b + c of finite numbers, computed in integers and rounded once to `dtype` (a scalar of it)."""
    (na, da), (nb, db), (nc, dc) = (float(v).as_integer_ratio() for v in (a, b, c))
    numerator = na * nb * dc + nc * da * db
    if numerator == 0 and (a == 0 or b == 0):
        return np.dtype(dtype).type(a * b + c)  # zeros: the sign IEEE gives an exact zero sum
    return _rounded(numerator, da * db * dc, np.dtype(dtype))


def fma(a: Any, b: Any, c: Any, dtype: Any = np.float64) -> np.ndarray:
    """a * b + c rounded once to `dtype` (float16, float32 or float64), elementwise with broadcasting.

    Operands are first converted to `dtype`.  Special values as C99's fma: NaN if any operand is,
    or where an infinity meets a zero factor or an infinity of the other sign; infinite addends
    win over finite products, even those whose rounded value would overflow.
    """
    dtype = np.dtype(dtype)
    if dtype.name not in DTYPES:
        raise TypeError(f"fma computes in {', '.join(DTYPES)}, not {dtype}")
    a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=dtype) for v in (a, b, c)))
    with np.errstate(all="ignore"):
        v, sure = _fast64(a, b, c) if dtype == np.float64 else _fast_narrow(a, b, c, dtype)
        finite_product = np.isfinite(a) & np.isfinite(b)
        special = ~(finite_product & np.isfinite(c)) | (a == 0) | (b == 0)
        # a zero factor: a * b is an exact (signed) zero; an infinite or NaN addend to a finite product
        # is the result; otherwise IEEE arithmetic on the infinities and NaN says what fma does
        simple = np.where(finite_product & ~np.isfinite(c), c, a * b + c)
        result = np.where(special, simple, v).astype(dtype, copy=False)
    unsure = np.flatnonzero(~(sure | special))
    if unsure.size:
        flat, operands = result.reshape(-1), [np.ravel(v) for v in (a, b, c)]
        for k in unsure:
            flat[k] = exact_fma(operands[0][k], operands[1][k], operands[2][k], dtype)
    return result

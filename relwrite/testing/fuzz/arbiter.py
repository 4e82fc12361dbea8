"""The mpmath arbiter: relwrite's nodes over real numbers with IEEE-like infinities and NaN, and no overflow.

When a mode and the NumPy reference disagree and a long double walk cannot
tell a stabilization from a bug, `walks` evaluates the graph with mpmath
numbers of `MP_BITS` bits through these functions; `mpmath_available` says
whether the arbiter can run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from relwrite.graph import ops
from relwrite.testing.fuzz.semantics import _NODE_UFUNCS, _REDUCTIONS, _shape_op_value


@functools.cache
def _mpmath() -> Any:
    """The fuzzer's own mpmath context (its precision is set per walk; mpmath's global one is left alone)."""
    import mpmath

    return mpmath.MPContext()


MP_BITS = (128, 4096)
"""The mpmath precisions tried, in turn, when long double cannot tell a stabilization from a bug."""


def mpmath_available() -> bool:
    """Whether the mpmath arbiter of stabilizations can run (mpmath is installed)."""
    try:
        _mpmath()
    except ImportError:
        return False
    return True


def _mp_real(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` on mpmath numbers, with NaN for complex results and IEEE infinities for poles."""
    mp = _mpmath()

    def real(*args: Any) -> Any:
        args = [a if isinstance(a, mp.mpf) else mp.mpf(a) for a in args]
        if any(mp.isnan(a) for a in args):
            return fn(*args) if fn in (_mp_pow, _mp_hypot) else mp.nan
        try:
            value = fn(*args)
        except ZeroDivisionError:
            return mp.inf
        return mp.nan if isinstance(value, mp.mpc) else value

    return real


def _mp_div(a: Any, b: Any) -> Any:
    mp = _mpmath()
    if b == 0:
        return mp.nan if a == 0 else (mp.inf if a > 0 else -mp.inf)
    return a / b


def _mp_pow(a: Any, b: Any) -> Any:
    mp = _mpmath()
    if b == 0 or a == 1:  # numpy: x ** 0 is 1 and 1 ** y is 1, NaN included
        return mp.mpf(1)
    if mp.isnan(a) or mp.isnan(b):
        return mp.nan
    if mp.isinf(b):  # C99 pow: only whether |a| is above, at or below 1 matters (mpmath goes complex)
        magnitude = abs(a)
        if magnitude == 1:
            return mp.mpf(1)
        return mp.inf if (magnitude > 1) == (b > 0) else mp.mpf(0)
    if mp.isinf(a):  # C99 pow: the sign survives only an odd integer exponent
        odd = mp.isint(b) and int(b) % 2 == 1
        if b < 0:
            return mp.mpf(0)
        return -mp.inf if a < 0 and odd else mp.inf
    if a != 0 and mp.isfinite(a) and mp.isfinite(b):
        scale = b * mp.log(abs(a), 2)
        if abs(scale) > 2**62:  # far outside any float range: mpmath would work for ages
            if a < 0 and not mp.isint(b):
                return mp.nan
            if scale < 0:
                return mp.mpf(0)
            return -mp.inf if a < 0 and mp.isint(b) and int(b) % 2 else mp.inf
    return mp.power(a, b)


def _mp_hypot(a: Any, b: Any) -> Any:
    """C99 hypot: infinite where either operand is, even when the other is NaN."""
    mp = _mpmath()
    if mp.isinf(a) or mp.isinf(b):
        return mp.inf
    if mp.isnan(a) or mp.isnan(b):
        return mp.nan
    return mp.hypot(a, b)


def _mp_atan2(y: Any, x: Any) -> Any:
    """C99 atan2: the angle of (x, y), also where both are infinite (a diagonal: ±pi/4, ±3pi/4)."""
    mp = _mpmath()
    if mp.isinf(y) and mp.isinf(x):
        angle = mp.pi / 4 if x > 0 else 3 * mp.pi / 4
        return angle if y > 0 else -angle
    return mp.atan2(y, x)


def _mp_cbrt(x: Any) -> Any:
    """The real cube root (mpmath's is the principal, complex one, for negative x)."""
    mp = _mpmath()
    return -mp.cbrt(-x) if x < 0 else mp.cbrt(x)


_HUGE_BITS = 4096
"""Arguments above 2**_HUGE_BITS (far outside any float range) get their limit, not a long computation."""


def _mp_limited(fn: Callable[[Any], Any], limit: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`fn`, but `limit(x)` for huge finite x (mpmath's exp or sin of 2**(10**300) would not finish)."""
    mp = _mpmath()

    def limited(x: Any) -> Any:
        if mp.isfinite(x) and x != 0 and mp.mag(x) > _HUGE_BITS:
            return limit(x)
        return fn(x)

    return limited


def _mp_log1mexp(x: Any) -> Any:
    """log(1 - exp(x)) without the cancellations any precision hits: log1p(-exp(x)) below -ln 2 (at
    x = -1e237 it is a negative number below every float, -0.0 once rounded, where 1 - exp(x) rounds
    to 1), log(-expm1(x)) above (at x = -1e-300, 1 - exp(x) rounds to 0); -0.0 at -inf, as
    log1p(-0.0) is.  Above 0, NaN."""
    mp = _mpmath()
    if mp.isinf(x) and x < 0:  # the limit from below, 0 approached by negative values: -0.0 once rounded
        return -mp.ldexp(1, -(2**20))
    if x < -mp.log(2):
        return mp.log1p(-mp.exp(x))
    return mp.log(-mp.expm1(x))


def _mp_erfc(x: Any) -> Any:
    """erfc(x); beyond 2**500, where mpmath's erfc overflows a float inside, its asymptotic series.

    exp(-x**2) / (x sqrt(pi)) * (1 - 1 / (2 x**2)) is off by 3 / (4 x**4) of itself there: < 1e-600.
    """
    mp = _mpmath()
    if mp.isfinite(x) and x > 0 and mp.mag(x) > 500:
        return mp.exp(-x * x) / (x * mp.sqrt(mp.pi)) * (1 - 1 / (2 * x * x))
    return mp.erfc(x)


def _mp_extremum(pick: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    mp = _mpmath()
    return lambda a, b: mp.nan if mp.isnan(a) or mp.isnan(b) else pick(a, b)


def _mp_elementwise(kind: type) -> Callable[..., Any] | None:
    """The mpmath form of an elementwise op class (None: numpy's object loops already do it)."""
    mp = _mpmath()
    table = {
        ops.TrueDiv: _mp_div,
        ops.Reciprocal: lambda x: _mp_div(mp.mpf(1), x),
        ops.Pow: _mp_real(_mp_pow),
        ops.Maximum: _mp_extremum(max),
        ops.Minimum: _mp_extremum(min),
        ops.Exp: _mp_real(_mp_limited(mp.exp, lambda x: mp.inf if x > 0 else mp.mpf(0))),
        ops.Log: _mp_real(mp.log),
        ops.Log1p: _mp_real(mp.log1p),
        ops.Expm1: _mp_real(_mp_limited(mp.expm1, lambda x: mp.inf if x > 0 else mp.mpf(-1))),
        ops.Sqrt: _mp_real(mp.sqrt),
        ops.Sin: _mp_real(_mp_limited(mp.sin, lambda x: mp.nan)),
        ops.Cos: _mp_real(_mp_limited(mp.cos, lambda x: mp.nan)),
        ops.Tanh: _mp_real(_mp_limited(mp.tanh, lambda x: mp.mpf(mp.sign(x)))),
        ops.Tan: _mp_real(_mp_limited(mp.tan, lambda x: mp.nan)),
        ops.Asin: _mp_real(mp.asin),
        ops.Acos: _mp_real(mp.acos),
        ops.Atan: _mp_real(_mp_limited(mp.atan, lambda x: mp.sign(x) * mp.pi / 2)),
        ops.Sinh: _mp_real(_mp_limited(mp.sinh, lambda x: mp.sign(x) * mp.inf)),
        ops.Cosh: _mp_real(_mp_limited(mp.cosh, lambda x: mp.inf)),
        ops.Cbrt: _mp_real(_mp_cbrt),
        ops.Hypot: _mp_real(_mp_hypot),
        ops.Atan2: _mp_real(_mp_atan2),
        ops.Fma: _mp_real(lambda a, b, c: mp.fadd(mp.fmul(a, b, exact=True), c)),
        ops.Sqr: lambda x: x * x,
        ops.Sigmoid: _mp_real(
            _mp_limited(lambda x: 1 / (1 + mp.exp(-x)), lambda x: mp.mpf(1) if x > 0 else mp.mpf(0))
        ),
        ops.Erf: _mp_real(_mp_limited(mp.erf, lambda x: mp.mpf(mp.sign(x)))),
        ops.Erfc: _mp_real(_mp_limited(_mp_erfc, lambda x: mp.mpf(0) if x > 0 else mp.mpf(2))),
        ops.Log1mexp: _mp_real(
            _mp_limited(_mp_log1mexp, lambda x: mp.nan if x > 0 else -mp.ldexp(1, -(2**20)))
        ),
        ops.Softplus: _mp_real(
            _mp_limited(lambda x: mp.log1p(mp.exp(x)), lambda x: x if x > 0 else mp.mpf(0))
        ),
    }
    return table.get(kind)


def _mp_map(fn: Callable[..., Any], *arrays: Any) -> np.ndarray:
    return np.asarray(np.frompyfunc(fn, len(arrays), 1)(*arrays), dtype=object)


def _mp_reduce_max(x: Any, axis: tuple[int, ...] | None, keepdims: bool = False) -> np.ndarray:
    x = np.asarray(x, dtype=object)  # arithmetic on a 0-d object array gives a bare mpf
    axes = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in axis)
    pick = np.frompyfunc(_mp_extremum(max), 2, 1)
    result = x
    for a in sorted(axes, reverse=True):
        if result.shape[a] == 0:
            raise ValueError("zero-size array to reduction operation maximum which has no identity")
        result = pick.reduce(result, axis=a, keepdims=keepdims)
    return np.asarray(result, dtype=object)


def _mp_node_value(op: Any, args: list[Any]) -> Any:
    """A node on object arrays of mpmath numbers."""
    mp = _mpmath()
    kind = type(op)
    fn = _mp_elementwise(kind)
    if fn is not None:
        return _mp_map(fn, *args)
    if isinstance(op, ops.Cast):
        as_float = _mp_map(lambda v: float(v), args[0]).astype(np.float64)
        return as_float if op.dtype.startswith("float") else as_float.astype(op.dtype)
    if kind in (ops.Lt, ops.Le, ops.Gt, ops.Ge, ops.Eq, ops.Neq):
        return _NODE_UFUNCS[kind](*args).astype(bool)
    if kind is ops.Fill:
        return np.array(np.broadcast_to(args[1], np.broadcast_shapes(args[0].shape, args[1].shape)))
    if kind in (ops.Sum, ops.Mean):
        total = np.sum(args[0], axis=op.axis)
        if kind is ops.Sum:
            return total
        axes = range(args[0].ndim) if op.axis is None else op.axis
        count = int(np.prod([args[0].shape[a] for a in axes]))
        return _mp_map(lambda t: _mp_div(mp.mpf(t), mp.mpf(count)), total)
    if kind is ops.Max:
        return _mp_reduce_max(args[0], op.axis)
    if kind is ops.Min:
        return np.asarray(-_mp_reduce_max(-args[0], op.axis), dtype=object)
    if kind is ops.Prod:
        return np.prod(args[0], axis=op.axis)
    if kind in (ops.Argmax, ops.Argmin):  # an index: found on the values rounded to float64
        return _REDUCTIONS[kind](_mp_map(float, args[0]).astype(np.float64), axis=op.axis)
    if kind is ops.Join:
        return np.concatenate(args, axis=op.axis)
    if kind is ops.Assert:
        return args[0]
    if kind is ops.LogSumExp:
        total = np.sum(_mp_map(_mp_elementwise(ops.Exp), args[0]), axis=op.axis)
        return _mp_map(_mp_elementwise(ops.Log), total)
    if isinstance(op, ops.Softmax):
        x = args[0]
        shifted = x - _mp_reduce_max(x, (op.axis,), keepdims=True)
        exps = _mp_map(_mp_elementwise(ops.Exp), shifted)
        total = np.sum(exps, axis=op.axis, keepdims=True)
        if isinstance(op, ops.LogSoftmax):
            return shifted - _mp_map(_mp_real(mp.log), total)
        return _mp_map(_mp_div, exps, total)
    if kind in _NODE_UFUNCS:
        return _NODE_UFUNCS[kind](*args)
    return _shape_op_value(op, args)

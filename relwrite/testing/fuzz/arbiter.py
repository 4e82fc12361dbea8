"""The mpmath arbiter: relwrite's nodes evaluated exactly, by the exact reference (`relwrite.backends.exact`).

When a mode and the NumPy reference disagree and a long double walk cannot
tell a stabilization from a bug, `walks` evaluates the graph with reference
numbers of `MP_BITS` bits: every op by the reference's table (so a fuzz
verdict and an accuracy claim rest on the same values), but for what a walk
decides itself (`_mp_node_value`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from relwrite.backends import exact
from relwrite.graph import ops
from relwrite.testing.fuzz.semantics import _REDUCTIONS, _shape_op_value

MP_BITS = (128, 4096)
"""The mpmath precisions tried, in turn, when long double cannot tell a stabilization from a bug."""


def _mp_map(fn: Callable[..., Any], *arrays: Any) -> np.ndarray:
    return np.asarray(np.frompyfunc(fn, len(arrays), 1)(*arrays), dtype=object)


def _mp_node_value(op: Any, args: list[Any]) -> Any:
    """A node on object arrays of reference numbers: the exact reference's value, but a cast to an
    integer or boolean dtype (NumPy's conversion of the value rounded to float64: the walk keeps each
    node's dtype, and integers wrap), the index of an extremum (found on the values rounded to float64),
    an assertion (its value) and indexing and shape ops the reference has none for (the fuzzer's own).
    A negative base's power takes an exponent within the walk's precision of an integer as that integer
    (`_integral_exponents`)."""
    kind = type(op)
    if kind is ops.Pow and all(isinstance(a, np.ndarray) and a.dtype == object for a in args):
        args = [args[0], _integral_exponents(*args)]
    if kind is ops.Cast and not op.dtype.startswith("float"):
        return _mp_map(float, args[0]).astype(np.float64).astype(op.dtype)
    if kind in (ops.Argmax, ops.Argmin):
        return _REDUCTIONS[kind](_mp_map(float, args[0]).astype(np.float64), axis=op.axis)
    if kind is ops.Assert:
        return args[0]
    if exact.has_reference(op):
        return _rounded(exact.node_value(op, args))
    return _shape_op_value(op, args)


def _integral_exponents(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """`exponent`, each element under a negative base that lies within 2**-(precision - 32) of an integer
    (relative to its size) made that integer.  A negative base's power is defined at integers only,
    and a value that is one over the reals comes out of a wide walk a few units of its last bit off:
    sigmoid(log(x / (1 - x))) / -x is exactly -1, and (-1) ** -1 = -1 where the walk's -1 - 2**-128
    to that power is NaN (seed 39, graph 1112)."""
    context = exact.context
    near = context.ldexp(context.mpf(1), 32 - context.prec)

    def snapped(x: Any, y: Any) -> Any:
        if context.isfinite(x) and x < 0 and context.isfinite(y) and not context.isint(y):
            whole = context.nint(y)
            if abs(y - whole) <= near * max(1, abs(y)):
                return whole
        return y

    base, exponent = np.broadcast_arrays(base, exponent)
    return _mp_map(snapped, base, exponent)


def _rounded(values: Any) -> Any:
    """`values` rounded to the walk's precision: the exact reference may return more bits (its guard
    digits), and a value kept wider than its copies that other ops round (-1 * exp(x)) does not cancel
    against them (exp(x) + -1 * exp(x) was 2**-129 of exp(x), not 0; seed 22, graph 1783)."""
    values = np.asarray(values)
    if values.dtype != object:
        return values
    mpf = exact.context.mpf
    return _mp_map(lambda v: +v if isinstance(v, mpf) else v, values)

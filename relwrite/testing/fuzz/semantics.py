"""The fuzzer's own NumPy semantics of relwrite's ops: what each recipe call and each graph node computes.

`recipe` evaluates recipes and `walks` evaluates graphs with these functions.
They are written apart from `relwrite.backends.numpy` on purpose (a reference
that shared the implementation it checks could not catch its mistakes), and
a dot product can be summed in each order BLAS may use (`SUMMATION_ORDERS`).
The ops whose formula overflows or cancels in a narrow dtype where the value
itself does not (sigmoid, log1mexp, softmax, log-softmax, logsumexp) are
computed in long double and rounded once to the op's dtype: that rounding is
what an op of that dtype can best give, and where the backends give it, they
are right.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from relwrite.graph import ops
from relwrite.graph import shape as shape_ops


def _errstate() -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    stack.enter_context(np.errstate(all="ignore"))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore", RuntimeWarning)
    return stack


def _float_dtype_of(x: Any) -> np.dtype:
    """The floating dtype numpy's float ufuncs (exp) give for `x`."""
    return np.exp(np.zeros(0, dtype=np.asarray(x).dtype)).dtype


def _is_literal(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def _ref_fold(ufunc: np.ufunc, args: Sequence[Any]) -> Any:
    """A variadic op as a left fold; Python literals take the dtype NumPy gives them next to every array."""
    if len(args) > 2 and any(_is_literal(a) for a in args):
        dtypes = [np.asarray(a).dtype for a in args if not _is_literal(a)]
        args = [np.asarray(a, dtype=np.result_type(*dtypes, a)) if _is_literal(a) else a for a in args]
    if len(args) == 1:
        return np.array(args[0], copy=True)
    acc = ufunc(args[0], args[1])
    for arg in args[2:]:
        acc = ufunc(acc, arg)
    return acc


def _ref_sigmoid(x: Any) -> Any:
    """sigmoid in numpy's float dtype of `x`, computed wider and rounded once: 1 / (1 + exp(-x)) in the
    dtype itself overflows exp below -11 in float16 (-88 in float32), giving 0 where sigmoid(-17) is
    the float16 4.1e-8 rounds to (6e-8)."""
    dtype = _float_dtype_of(x)
    wide = np.longdouble if dtype == np.longdouble else np.float64
    xf = np.asarray(x).astype(dtype).astype(wide)  # the op's dtype first: an int64 rounds to float64
    small = np.exp(np.negative(np.abs(xf)))  # exp(-|x|) never overflows
    return np.asarray(np.where(xf >= 0, 1, small) / np.add(1, small)).astype(dtype)


def _ref_softplus(x: Any) -> Any:
    xf = np.asarray(x).astype(_float_dtype_of(x))
    return np.logaddexp(xf.dtype.type(0), xf)


def _ref_special(function: Callable[[float], float]) -> Callable[[Any], Any]:
    """An elementwise float function NumPy lacks (erf, erfc), over Python's `math`, in numpy's float dtype."""

    def ref(x: Any) -> Any:
        dtype = _float_dtype_of(x)
        values = np.frompyfunc(function, 1, 1)(np.asarray(x, dtype=np.float64))
        return np.asarray(values, dtype=np.float64).astype(dtype)

    return ref


def _nearest_float(value: Fraction, dtype: np.dtype) -> np.generic:
    """`value` rounded to the nearest float of `dtype`, ties to even; infinite past the largest float by
    half its ulp (infinity stands where the next float would)."""
    try:
        guess = dtype.type(float(value))
    except OverflowError:
        return dtype.type(math.inf if value > 0 else -math.inf)
    top = Fraction(2) ** int(np.finfo(dtype).maxexp)
    candidates = [np.nextafter(guess, dtype.type(-np.inf)), guess, np.nextafter(guess, dtype.type(np.inf))]

    def rank(candidate: np.generic) -> tuple[Fraction, int]:
        at = (top if candidate > 0 else -top) if np.isinf(candidate) else Fraction(float(candidate))
        return abs(at - value), int(np.asarray(candidate).view(f"u{dtype.itemsize}")) & 1

    return min(candidates, key=rank)


def _exact_fma(x: Any, y: Any, z: Any, dtype: np.dtype) -> np.generic:
    """x * y + z in fractions, rounded once to `dtype`; C99's special values."""
    x, y, z = float(x), float(y), float(z)
    if not (math.isfinite(x) and math.isfinite(y)) or not math.isfinite(z) or x == 0 or y == 0:
        return dtype.type(z if math.isfinite(x) and math.isfinite(y) and not math.isfinite(z) else x * y + z)
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    return dtype.type(0.0) if exact == 0 else _nearest_float(exact, dtype)


def _ref_fma(a: Any, b: Any, c: Any) -> Any:
    """fma rounded once, in numpy.hypot's float dtype of the operands; a * b + c in a long double walk."""
    arrays = [np.asarray(v) for v in (a, b, c)]
    if any(v.dtype == np.longdouble for v in arrays):
        return arrays[0] * arrays[1] + arrays[2]
    dtype = functools.reduce(
        lambda d, e: np.hypot(np.zeros(0, d), np.zeros(0, e)).dtype, (v.dtype for v in arrays)
    )
    values = np.frompyfunc(lambda x, y, z: _exact_fma(x, y, z, dtype), 3, 1)(
        *(v.astype(dtype) for v in arrays)
    )
    return np.asarray(values, dtype=dtype)


def _ref_log1mexp(x: Any) -> Any:
    """log(1 - exp(x)) in numpy's float dtype of `x`, computed in long double by the forms accurate on
    each side of -log 2 (log(-expm1(x)) above, log1p(-exp(x)) below) and rounded once: the plain formula
    in float16 gave +0.0 for log1mexp(-62) (1 - exp(-62) is 1), whose value -1.2e-27 rounds to -0.0, so
    1 / log1mexp(-62) changed sign.  NaN for x > 0, where it is undefined."""
    dtype = _float_dtype_of(x)
    xf = np.asarray(x).astype(dtype).astype(np.longdouble)  # the op's dtype first: an int64 rounds
    with np.errstate(invalid="ignore", divide="ignore"):
        near = np.log(np.negative(np.expm1(np.minimum(xf, 0))))
        far = np.log1p(np.negative(np.exp(xf)))
        values = np.where(xf > -np.log(np.longdouble(2)), near, far)
    return np.where(xf > 0, np.nan, values).astype(dtype)


def _ref_assert(value: Any, *conditions: Any) -> Any:
    """The checked value, or the AssertionError relwrite raises where a condition fails."""
    if not all(np.all(c) for c in conditions):
        raise AssertionError("checked")
    return np.array(value)


def _ref_fill(model: Any, value: Any) -> Any:
    model = np.asarray(model)
    shape = np.broadcast_shapes(model.shape, np.shape(value))
    dtype = value.dtype if isinstance(value, np.ndarray) else np.result_type(model.dtype, value)
    return np.full(shape, value, dtype=dtype)


def _ref_softmax(x: Any, axis: int, log: bool) -> Any:
    """Softmax (log-softmax) along `axis`, computed in long double and rounded once to numpy's float
    dtype of `x` (in float16 log(1 + exp(-10)) is log(1) = 0, so log_softmax([0, -10]) lost its -4.5e-5);
    in a slice holding +inf and no NaN, the limit: the k infinities share the whole mass (1/k each,
    log: -log k) and the rest get 0 (log: -inf).  Along an axis of length 0 there is nothing to
    normalize: an empty array, as logsumexp's sum is empty."""
    dtype = _float_dtype_of(x)
    xf = np.asarray(x).astype(dtype).astype(np.longdouble)  # the op's dtype first: int64 rounds
    top = np.max(xf, axis=axis, keepdims=True, initial=-np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = xf - np.where(np.isposinf(top), 0, top)
        total = np.sum(np.exp(shifted), axis=axis, keepdims=True)
        plain = shifted - np.log(total) if log else np.exp(shifted) / total
        if log:  # a maximum's entry is -log(1 + the others' terms): below 0 where another is above -inf
            others_live = np.sum(xf > -np.inf, axis=axis, keepdims=True) > 1
            plain = np.where((plain == 0) & others_live, -0.0, plain)
        infinite = np.isposinf(xf)
        k = np.sum(infinite, axis=axis, keepdims=True)
        limit = np.where(infinite, -np.log(k), -np.inf) if log else np.where(infinite, 1.0 / k, 0.0)
    return np.where(np.isposinf(top), limit, plain).astype(dtype)


def _ref_logsumexp(x: Any, axis: Any) -> Any:
    """log(sum(exp(x))) over `axis`, shifted by the finite maximum so that no exp overflows; computed in
    long double and rounded once to numpy's float dtype of `x` (as `_ref_softmax`)."""
    dtype = _float_dtype_of(x)
    xf = np.asarray(x).astype(dtype).astype(np.longdouble)  # the op's dtype first: int64 rounds
    axes = tuple(range(xf.ndim)) if axis is None else axis
    finite = np.where(np.isfinite(xf), xf, -np.inf)
    m = np.max(finite, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)
    return np.asarray(np.squeeze(m, axis=axes) + np.log(np.sum(np.exp(xf - m), axis=axes))).astype(dtype)


def _ref_dimshuffle(x: Any, order: Sequence[Any]) -> Any:
    x = np.asarray(x)
    kept = [o for o in order if o != "x"]
    dropped = [a for a in range(x.ndim) if a not in kept]
    shape = [1 if o == "x" else x.shape[o] for o in order]
    return np.transpose(x, kept + dropped).reshape(shape)


def _ref_alloc(value: Any, shape: Sequence[int]) -> Any:
    return np.array(np.broadcast_to(np.asarray(value), tuple(shape)))


SUMMATION_ORDERS = (None, ("forward", False), ("reversed", False), ("forward", True), ("reversed", True))
"""How the reference sums a dot product's terms: NumPy's own way (None), or in sequence, forward or
reversed, rounding after each product and addition or only after each fused multiply-add.  BLAS
fixes none of these (NumPy's own result changes with the layout), so a mode may match any."""

_summation: tuple[str, bool] | None = None


@contextlib.contextmanager
def _summing(order: tuple[str, bool] | None) -> Iterator[None]:
    """Evaluate dot products in the block with the summation `order` (see SUMMATION_ORDERS)."""
    global _summation
    previous, _summation = _summation, order
    try:
        yield
    finally:
        _summation = previous


def _product(a: Any, b: Any) -> np.ndarray:
    """``np.dot(a, b)`` summed in the current order (ranks up to 2)."""
    a, b = np.asarray(a), np.asarray(b)
    if _summation is None or a.ndim == 0 or b.ndim == 0 or a.dtype.kind != "f" or b.dtype.kind != "f":
        return np.asarray(np.dot(a, b))
    direction, fused = _summation
    rows = a if a.ndim == 2 else a[None, :]
    cols = b if b.ndim == 2 else b[:, None]
    dtype = np.result_type(a, b)
    total = np.zeros((rows.shape[0], cols.shape[1]), dtype=dtype)
    inner = range(rows.shape[1]) if direction == "forward" else range(rows.shape[1] - 1, -1, -1)
    with _errstate():
        for k in inner:
            if fused:  # one rounding per multiply-add: exact products, summed wide, then rounded
                wide = np.multiply.outer(rows[:, k].astype(np.longdouble), cols[k].astype(np.longdouble))
                total = (total.astype(np.longdouble) + wide).astype(dtype)
            else:
                total = total + np.multiply.outer(rows[:, k], cols[k])
    if a.ndim == 1:
        total = total[0]
    return total[..., 0] if b.ndim == 1 else total


def _ref_gemm(z: Any, a: Any, x: Any, y: Any, b: Any) -> Any:
    return np.add(np.multiply(b, z), np.multiply(a, _product(x, y)))


def _ref_gemv(y: Any, a: Any, mat: Any, x: Any, b: Any) -> Any:
    return np.add(np.multiply(b, y), np.multiply(a, _product(mat, x)))


def _ref_ger(mat: Any, a: Any, x: Any, y: Any) -> Any:
    return np.add(mat, np.multiply(a, np.outer(x, y)))


def _broadcast_to_all(value: Any, args: Sequence[Any]) -> np.ndarray:
    """`value` as a Composite output made of the inputs `args` gives it: their broadcast shape, used or
    not (a fresh array)."""
    return np.array(np.broadcast_to(value, np.broadcast_shapes(*(np.shape(a) for a in args))))


def _ref_key(key: tuple) -> tuple:
    """A recipe's index as NumPy takes it (lists become integer arrays)."""
    return tuple(np.asarray(k, dtype=np.int64) if isinstance(k, list) else k for k in key)


def _ref_update(x: np.ndarray, y: Any, key: tuple, setting: bool) -> np.ndarray:
    """x with x[key] set to y, or increased by y (repeated array indices accumulating), as a new array."""
    out = np.array(x, copy=True)
    key = _ref_key(key)
    if setting:
        out[key] = y
    elif any(isinstance(k, np.ndarray) for k in key):
        np.add.at(out, key, y)
    else:
        out[(*key, ...)] += y  # a view even for one element: the sum wraps in x's dtype, as documented
    return out


def _indexing_value(op: Any, args: list[Any]) -> np.ndarray:
    """An indexing node on its arrays (index inputs may come widened: they are made integers again)."""
    updating = isinstance(op, ops.IncSubtensor)
    values = iter(args[2:] if updating else args[1:])

    def integer(v: Any) -> Any:
        v = np.asarray(v)
        return v.astype(np.int64) if v.dtype.kind == "i" else np.vectorize(int, otypes=[np.int64])(v)

    key: list[Any] = []
    for entry in op.idx_list:
        if entry == "newaxis":
            key.append(None)
        elif entry == "int":
            key.append(int(integer(next(values))))
        elif entry == "array":
            key.append(integer(next(values)).tolist())
        else:
            key.append(slice(*(int(integer(next(values))) if has else None for has in entry[1:])))
    if updating:
        return _ref_update(args[0], args[1], tuple(key), op.set_instead_of_inc)
    return np.asarray(args[0][_ref_key(tuple(key))])


def _shape_op_value(op: Any, args: list[Any]) -> np.ndarray:
    if isinstance(op, (ops.Subtensor, ops.AdvancedSubtensor, ops.IncSubtensor)):
        return _indexing_value(op, args)
    x = args[0]
    if isinstance(op, shape_ops.Shape):
        return np.array(np.shape(x), dtype=np.int64)
    if isinstance(op, shape_ops.Shape_i):
        return np.array(np.shape(x)[op.i], dtype=np.int64)
    if isinstance(op, ops.DimShuffle):
        return _ref_dimshuffle(x, op.new_order)
    if isinstance(op, ops.Reshape):
        return np.reshape(x, op.shape)
    if isinstance(op, ops.Alloc):
        return _ref_alloc(x, op.shape)
    raise NotImplementedError(f"the fuzzer's reference has no semantics for {type(op).__name__}")


_NODE_UFUNCS: dict[type, Callable[..., Any]] = {
    ops.Sub: np.subtract,
    ops.TrueDiv: np.true_divide,
    ops.Pow: np.power,
    ops.Maximum: np.maximum,
    ops.Minimum: np.minimum,
    ops.Lt: np.less,
    ops.Le: np.less_equal,
    ops.Gt: np.greater,
    ops.Ge: np.greater_equal,
    ops.Eq: np.equal,
    ops.Neq: np.not_equal,
    ops.Neg: np.negative,
    ops.Exp: np.exp,
    ops.Log: np.log,
    ops.Log1p: np.log1p,
    ops.Expm1: np.expm1,
    ops.Sqrt: np.sqrt,
    ops.Sqr: np.square,
    ops.Sin: np.sin,
    ops.Cos: np.cos,
    ops.Tanh: np.tanh,
    ops.Tan: np.tan,
    ops.Asin: np.arcsin,
    ops.Acos: np.arccos,
    ops.Atan: np.arctan,
    ops.Sinh: np.sinh,
    ops.Cosh: np.cosh,
    ops.Cbrt: np.cbrt,
    ops.Hypot: np.hypot,
    ops.Atan2: np.arctan2,
    ops.Fma: _ref_fma,
    ops.Abs: np.absolute,
    ops.Sigmoid: _ref_sigmoid,
    ops.Softplus: _ref_softplus,
    ops.Erf: _ref_special(math.erf),
    ops.Erfc: _ref_special(math.erfc),
    ops.Log1mexp: _ref_log1mexp,
    ops.Reciprocal: lambda x: np.true_divide(1, x),
    ops.Identity: lambda x: np.array(x, copy=True),
    ops.Switch: np.where,
    ops.Dot: np.dot,
    ops.Dot22: np.matmul,
    ops.Gemm: _ref_gemm,
    ops.Gemv: _ref_gemv,
    ops.Ger: _ref_ger,
    ops.Add: lambda *a: _ref_fold(np.add, a),
    ops.Mul: lambda *a: _ref_fold(np.multiply, a),
}


_REDUCTIONS = {
    ops.Sum: np.sum,
    ops.Mean: np.mean,
    ops.Max: np.max,
    ops.Min: np.min,
    ops.Prod: np.prod,
    ops.Argmax: np.argmax,
    ops.Argmin: np.argmin,
}

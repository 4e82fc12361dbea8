"""The exact reference: what relwrite's ops compute over the real numbers, with mpmath.

One table (`elementwise`, `node_value`) gives every op with a reference its
exact meaning; `evaluate` runs a graph on it at many points.  The accuracy
cost, the fuzzer's arbiter and the FPCore scorer all judge floating point
against it, so an accuracy claim and a fuzz verdict about one expression rest
on the same values.

The policy, for every op:

- **Numbers.** Values are mpmath numbers of this module's own `context`
  (mpmath's global context is left alone), computed in the bits `precision`
  sets: exact for sums and products (given the bits), mpmath's correct
  rounding for the functions.  Floats convert exactly.  Rounding to a float
  format is the caller's.  `fma` rounds x * y + z once (the product exact).
- **Zeros are unsigned** (mpmath has no -0): a zero operand is +0, and an
  op gives C99's value at +0: 1 / 0 = +inf, atan2(0, -1) = pi, 0 ** -1 =
  +inf, where C99 and NumPy give the other sign for a -0.0 operand.
- **Infinities** are the limits: at +-inf an op gives the limit of the real
  function where it has one (exp(-inf) = 0, tanh(inf) = 1, atan(inf) = pi/2,
  erfc(-inf) = 2, atan2(inf, inf) = pi/4), and C99's value where the real
  function has none (pow(-inf, 0.5) = +inf, pow(-2, inf) = +inf).
- **Poles** give the infinity C99 gives at +0: log(0) = log1p(-1) =
  log1mexp(0) = -inf, x / 0 = +-inf by the sign of x, 0 ** y = +inf for
  y < 0.
- **NaN** is a value outside the function's real domain (log or sqrt of a
  negative, asin(2), inf - inf, 0 * inf, 0 / 0, a negative base to a
  non-integer power: mpmath's complex results become NaN).  A NaN operand
  gives NaN, except where C99 gives one value for every value of that
  operand: pow(x, 0) = pow(1, y) = 1 and hypot(+-inf, NaN) = +inf.
  maximum and minimum propagate NaN (NumPy's ops, not C99's fmax).
- **No overflow.**  mpmath's exponents are unbounded, so no value overflows;
  but an argument beyond 2**`MAX_ARGUMENT_SCALE` (past every float, met only
  as an exact intermediate, as exp(x) in exp(exp(x))) gets the function's
  limit at the matching infinity without computing (the exact value rounds
  to it in every float format, and computing it would take time growing
  with the argument): exp(2**1200) = inf, tanh = +-1, erfc = 0 or 2,
  softplus(x) = x or 0; a power whose binary exponent passes
  2**`MAX_ARGUMENT_SCALE` likewise.  sin, cos and tan have no limit: NaN
  there, as wherever mpmath overflows computing a value.
- **A zero approached from below** (log1mexp at -inf and beyond the argument
  bound) is -`TINY`, a negative number below every float that rounds to
  -0.0, C99's log1p(-0.0).
- **Casts** to a float dtype are the identity (the value is exact, rounding
  is not the reference's); to an integer dtype they truncate toward zero, to
  bool they test x != 0, and a NaN, infinite or out-of-range value cast to an
  integer is NaN (no value: undefined in C).
- **Reductions** follow from the elementwise table: max and min propagate
  NaN, softmax is exp(x - max x) / sum (the same value, exp's argument kept
  small), a mean of no elements is 0 / 0 = NaN.  Every elementwise op but `Composite` has a reference, and so
  do fill, cast, the reductions, softmax, dot and the BLAS ops, alloc,
  dimshuffle, reshape and join (`has_reference`); indexing has none.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import reduce

import mpmath
import numpy as np

from relwrite.graph import ops
from relwrite.graph.basic import Constant, Op, Variable, io_toposort
from relwrite.graph.subtensor import ARRAY, index_of

context = mpmath.MPContext()
"""The mpmath context every reference value belongs to (its precision is set by `precision`)."""

MAX_ARGUMENT_SCALE = 1100
"""The binary scale (|x| < 2**1100, past every float64) beyond which exp-like functions take their limit
and periodic ones have no value: their cost grows with the argument's scale (exp(exp(x)) would not end)."""

ERFC_ASYMPTOTE_SCALE = 64
"""Beyond 2**64, erfc is its two-term asymptotic series (off by under 2**-254 of itself; mpmath's own
overflows a float inside past 2**510)."""

TINY = context.ldexp(1, -(2**20))
"""A positive number below every float's smallest subnormal: -TINY stands for 0 approached from below."""

_nan, _inf = context.nan, context.inf
_ZERO, _ONE = context.mpf(0), context.mpf(1)


class NoReferenceError(ValueError):
    """An op without an exact reference."""


@contextmanager
def precision(bits: int) -> Iterator[None]:
    """Compute reference values in the block with `bits` bits of precision (53 or more: a float64
    converts exactly)."""
    if bits < 53:
        raise ValueError(f"the exact reference needs 53 bits or more, not {bits}")
    with context.workprec(int(bits)):
        yield


def array(data: object) -> np.ndarray:
    """Values as an object array of exact mpmath numbers (booleans kept as Python booleans)."""
    return _map(_number, np.asarray(data).astype(object))


def _mpf(x: object) -> object:
    """A number (Python's, NumPy's or mpmath's) as a reference number."""
    return x if isinstance(x, context.mpf) else context.mpf(x.item() if isinstance(x, np.generic) else x)


def _number(x: object) -> object:
    """`x` as a reference number, booleans kept."""
    return bool(x) if isinstance(x, (bool, np.bool_)) else _mpf(x)


def _map(function: Callable, *arrays: object) -> np.ndarray:
    with np.errstate(all="ignore"):  # flags mpmath's Python arithmetic raises mean nothing here
        return np.asarray(np.frompyfunc(function, len(arrays), 1)(*arrays), dtype=object)


def scale(x: object) -> int | None:
    """The binary exponent of a nonzero finite number (None otherwise)."""
    if not isinstance(x, context.mpf) or not x or not context.isfinite(x):
        return None
    mantissa, exponent = x.man_exp
    return exponent + int(mantissa).bit_length()


def _huge(x: object) -> bool:
    binary = scale(x)
    return binary is not None and binary > MAX_ARGUMENT_SCALE


def _numeric(function: Callable, nan_valued: bool = True) -> Callable:
    """`function` on reference numbers: NaN for a NaN operand (unless `nan_valued` is False: the function
    decides), for a complex result (outside the real domain) and where mpmath overflows."""

    def f(*xs):
        xs = [_mpf(x) for x in xs]
        if nan_valued and any(context.isnan(x) for x in xs):
            return _nan
        try:
            value = function(*xs)
        except OverflowError:
            return _nan
        return value if isinstance(value, context.mpf) else _nan

    f.__doc__ = function.__doc__
    return f


def _limited(function: Callable, limit: Callable) -> Callable:
    """`function`, but `limit(x)` (its limit at the infinity of x's sign) past 2**`MAX_ARGUMENT_SCALE`."""

    def f(x):
        return limit(x) if _huge(x) else function(x)

    f.__doc__ = function.__doc__
    return f


def _signed(positive: object, negative: object) -> Callable:
    return lambda x: positive if x > 0 else negative


def _divide(a, b):
    """a / b; +-inf by the sign of a at b = 0 (an unsigned zero: +0), NaN for 0 / 0."""
    if b == 0:
        return _nan if a == 0 else (_inf if a > 0 else -_inf)
    return a / b


def _odd(y) -> bool:
    return context.isint(y) and int(y) % 2 == 1


def _power(x, y):
    """x ** y with C99's pow at zeros and infinities; NaN for a negative base to a non-integer."""
    if y == 0 or x == 1:
        return _ONE
    if context.isnan(x) or context.isnan(y):
        return _nan
    if context.isinf(y):  # only whether |x| is above, at or below 1 matters
        size = abs(x)
        if size == 1:
            return _ONE
        return _inf if (size > 1) == (y > 0) else _ZERO
    if context.isinf(x):  # the sign survives an odd integer exponent only
        if y < 0:
            return _ZERO
        return -_inf if x < 0 and _odd(y) else _inf
    if x == 0:
        return _inf if y < 0 else _ZERO
    if x < 0 and not context.isint(y):
        return _nan
    if scale(y) + abs(scale(x)).bit_length() + 1 > MAX_ARGUMENT_SCALE:  # y log2|x| may be that large
        with context.workprec(64):
            exponent = y * context.log(abs(x), 2)
        if abs(exponent) > 2**MAX_ARGUMENT_SCALE:  # the result's binary exponent
            if exponent < 0:
                return _ZERO
            return -_inf if x < 0 and _odd(y) else _inf
    if context.isint(y) and abs(y) > 2**64:
        # mpmath raises to an integer power by repeated squaring, one multiplication per bit of the
        # exponent at the working precision; exp(y log|x|) costs about the same at any size, with guard
        # bits for the size of y log|x| (its absolute error is the result's relative one)
        with context.workprec(64):
            rough = abs(y * context.log(abs(x)))
        with context.extraprec(32 + max(scale(rough) or 0, 0)):
            size = context.exp(y * context.log(abs(x)))
        return -size if x < 0 and _odd(y) else +size
    return context.power(x, y)


def _cbrt(x):
    """The real cube root (mpmath's is the principal, complex one, for negative x)."""
    return -context.cbrt(-x) if x < 0 else context.cbrt(x)


def _atan2(y, x):
    """The angle of (x, y); C99's at two infinities (mpmath's is NaN there): +-pi/4 or +-3pi/4."""
    if context.isinf(y) and context.isinf(x):
        angle = context.pi / 4 if x > 0 else 3 * context.pi / 4
        return angle if y > 0 else -angle
    return context.atan2(y, x)


def _hypot(x, y):
    """sqrt(x**2 + y**2): +inf where either is infinite, even with a NaN (C99's hypot)."""
    if context.isinf(x) or context.isinf(y):
        return _inf
    if context.isnan(x) or context.isnan(y):
        return _nan
    return context.hypot(x, y)


def _fma(x, y, z):
    """x * y + z with the product exact, rounded once to the working precision."""
    return context.fadd(context.fmul(x, y, exact=True), z)


def _exp_reduced(x):
    """exp(x), as 2**m exp(r) with r = x - m ln 2 small for a large integral x (every float past 2**53
    is one): mpmath raises e to an integral x by repeated squaring, a multiplication per bit of x at
    the working precision, where exp(r) is a short series."""
    if not (context.isint(x) and abs(x) > 2**64):
        return context.exp(x)
    with context.extraprec(32 + (scale(x) or 0)):
        quotient = x / context.ln2
        whole = int(context.floor(quotient))
        return context.ldexp(context.exp((quotient - whole) * context.ln2), whole)


_exp = _limited(_exp_reduced, _signed(_inf, _ZERO))


def _erfc(x):
    """erfc; past 2**`ERFC_ASYMPTOTE_SCALE`, its asymptote exp(-x**2) / (x sqrt(pi)) (1 - 1 / 2x**2)."""
    if context.isfinite(x) and x > 0 and context.mag(x) > ERFC_ASYMPTOTE_SCALE:
        return _exp(-x * x) / (x * context.sqrt(context.pi)) * (1 - 1 / (2 * x * x))
    return context.erfc(x)


def _log(x):
    """The natural logarithm; -inf at 0."""
    return -_inf if x == 0 else context.log(x)


def _log1p(x):
    """log(1 + x); -inf at -1."""
    return -_inf if x == -1 else context.log1p(x)


def _log1mexp(x):
    """log(1 - exp(x)) without the cancellation any precision hits: log1p(-exp(x)) below -ln 2 (at
    x = -1e237, 1 - exp(x) rounds to 1), log(-expm1(x)) above (at x = -1e-300 it rounds to 0); -inf at
    0, NaN above, -`TINY` at -inf."""
    if x > 0:
        return _nan
    if x == 0:
        return -_inf
    if context.isinf(x):
        return -TINY
    if x < -context.ln2:
        return context.log1p(-context.exp(x))
    return context.log(-context.expm1(x))


def _sigmoid(x):
    """1 / (1 + exp(-x))."""
    return 1 / (1 + context.exp(-x))


def _softplus(x):
    """log(1 + exp(x))."""
    return context.log1p(context.exp(x))


def _extremum(pick: Callable) -> Callable:
    """`pick` of two numbers, NaN if either is (NumPy's maximum and minimum)."""

    def f(a, b):
        return _nan if context.isnan(a) or context.isnan(b) else pick(a, b)

    return f


_ELEMENTWISE: dict[type, Callable] = {
    ops.Add: lambda *xs: reduce(operator.add, xs),
    ops.Mul: lambda *xs: reduce(operator.mul, xs),
    ops.Sub: operator.sub,
    ops.Neg: operator.neg,
    ops.Abs: abs,
    ops.Sqr: lambda x: x * x,
    ops.Identity: lambda x: x,
    ops.TrueDiv: _numeric(_divide),
    ops.Reciprocal: _numeric(lambda x: _divide(_ONE, x)),
    ops.Pow: _numeric(_power, nan_valued=False),
    ops.Fma: _numeric(_fma),
    ops.Hypot: _numeric(_hypot, nan_valued=False),
    ops.Atan2: _numeric(_atan2),
    ops.Maximum: _extremum(max),
    ops.Minimum: _extremum(min),
    ops.Exp: _numeric(_exp),
    ops.Expm1: _numeric(_limited(context.expm1, _signed(_inf, -_ONE))),
    ops.Log: _numeric(_log),
    ops.Log1p: _numeric(_log1p),
    ops.Sqrt: _numeric(context.sqrt),
    ops.Cbrt: _numeric(_cbrt),
    ops.Sin: _numeric(_limited(context.sin, lambda x: _nan)),
    ops.Cos: _numeric(_limited(context.cos, lambda x: _nan)),
    ops.Tan: _numeric(_limited(context.tan, lambda x: _nan)),
    ops.Asin: _numeric(context.asin),
    ops.Acos: _numeric(context.acos),
    ops.Atan: _numeric(context.atan),
    ops.Sinh: _numeric(_limited(context.sinh, _signed(_inf, -_inf))),
    ops.Cosh: _numeric(_limited(context.cosh, lambda x: _inf)),
    ops.Tanh: _numeric(_limited(context.tanh, _signed(_ONE, -_ONE))),
    ops.Sigmoid: _numeric(_limited(_sigmoid, _signed(_ONE, _ZERO))),
    ops.Softplus: _numeric(_limited(_softplus, lambda x: x if x > 0 else _ZERO)),
    ops.Erf: _numeric(_limited(context.erf, _signed(_ONE, -_ONE))),
    ops.Erfc: _numeric(_limited(_erfc, _signed(_ZERO, 2 * _ONE))),
    ops.Log1mexp: _numeric(_limited(_log1mexp, _signed(_nan, -TINY))),
    ops.Lt: operator.lt,
    ops.Le: operator.le,
    ops.Gt: operator.gt,
    ops.Ge: operator.ge,
    ops.Eq: operator.eq,
    ops.Neq: operator.ne,
    ops.Switch: lambda c, a, b: a if c else b,
}

_COMPARISONS = (ops.Lt, ops.Le, ops.Gt, ops.Ge, ops.Eq, ops.Neq)

_STRUCTURAL = (
    ops.Fill, ops.Cast, ops.Softmax, ops.Sum, ops.Mean, ops.Max, ops.Min, ops.Prod, ops.LogSumExp,
    ops.Dot, ops.Dot22, ops.Gemm, ops.Gemv, ops.Ger, ops.Alloc, ops.DimShuffle, ops.Reshape, ops.Join,
    ops.Subtensor, ops.AdvancedSubtensor, ops.IncSubtensor,
)  # fmt: skip
"""The ops besides the elementwise ones of `_ELEMENTWISE` that `node_value` computes exactly."""


def elementwise(kind: type) -> Callable | None:
    """The exact function of an elementwise op class on reference numbers (None: it has none)."""
    return _ELEMENTWISE.get(kind)


def has_reference(op: Op) -> bool:
    """Whether `op` has an exact reference."""
    return type(op) in _ELEMENTWISE or isinstance(op, _STRUCTURAL)


def _cast(dtype: np.dtype) -> Callable:
    """The exact cast of a number to `dtype` (see the module's policy)."""
    if dtype.kind == "f":
        return lambda x: x
    if dtype.kind == "b":
        return lambda x: bool(x != 0)
    info = np.iinfo(dtype)

    def truncated(x):
        x = _mpf(x)
        if context.isnan(x) or context.isinf(x):
            return _nan
        whole = int(x)
        return context.mpf(whole) if info.min <= whole <= info.max else _nan

    return truncated


def _reduce_max(x: np.ndarray, axis: tuple[int, ...] | None, keepdims: bool = False) -> np.ndarray:
    """The NaN-propagating maximum of `x` over `axis` (None: every axis)."""
    x = np.asarray(x, dtype=object)  # arithmetic on a 0-d object array gives a bare number
    axes = range(x.ndim) if axis is None else [a % x.ndim for a in axis]
    pick = np.frompyfunc(_ELEMENTWISE[ops.Maximum], 2, 1)
    result = x
    for a in sorted(axes, reverse=True):
        if result.shape[a] == 0:
            raise ValueError("zero-size array to reduction operation maximum which has no identity")
        result = pick.reduce(result, axis=a, keepdims=keepdims)
    return np.asarray(result, dtype=object)


def _softmax(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    if np.shape(x)[axis] == 0:  # nothing to normalize: empty, as the backends give it
        return np.asarray(x, dtype=object).copy()
    shifted = x - _reduce_max(x, (axis,), keepdims=True)
    exps = _map(_ELEMENTWISE[ops.Exp], shifted)
    if log:  # log(total) as log1p of all but one maximum's 1: log(1 + 1e-30) would round to 0
        at_top = shifted == 0
        rest = np.sum(np.where(at_top, 0, exps), axis=axis, keepdims=True)
        rest = rest + (np.sum(at_top, axis=axis, keepdims=True) - 1)
        return shifted - _map(_ELEMENTWISE[ops.Log1p], rest)
    total = np.sum(exps, axis=axis, keepdims=True)
    return _map(_ELEMENTWISE[ops.TrueDiv], exps, total)


def _dimshuffle(op: ops.DimShuffle, x: np.ndarray) -> np.ndarray:
    if op.dropped:
        x = x.squeeze(axis=op.dropped)
    kept = [o for o in op.new_order if o != "x"]
    rank = {axis: k for k, axis in enumerate(sorted(kept))}
    x = x.transpose(tuple(rank[o] for o in kept))
    return x[tuple(np.newaxis if o == "x" else slice(None) for o in op.new_order)]


def _key(op: ops.Subtensor | ops.AdvancedSubtensor | ops.IncSubtensor, index: Sequence[np.ndarray]) -> tuple:
    """The Python index of an indexing op from its index operands' exact values (integers)."""
    integers = [np.asarray(i).astype(np.int64) if np.ndim(i) else int(i) for i in index]
    return index_of(op.idx_list)(integers)


def _written(op: ops.IncSubtensor, x: np.ndarray, y: np.ndarray, *index: np.ndarray) -> np.ndarray:
    """A copy of x with the indexed part set to y, or y added to it (repeated array indices adding up)."""
    out, key = np.array(x, dtype=object, copy=True), _key(op, index)
    if isinstance(y, np.ndarray) and y.ndim == 0:
        y = y[()]  # a 0-d object array written into one element would be stored as the array itself
    if op.set_instead_of_inc:
        out[key] = y
    elif ARRAY in op.idx_list:
        np.add.at(out, key, y)
    else:
        out[(*key, ...)] += y
    return out


def node_value(op: Op, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """`op` applied to its operands' exact values (object arrays of reference numbers), as an object
    array (a boolean array for comparisons).  Raises NoReferenceError for an op without a reference."""
    function = _ELEMENTWISE.get(type(op))
    if function is not None:
        value = _map(function, *arrays)
        return value.astype(bool) if isinstance(op, _COMPARISONS) else value
    if isinstance(op, ops.Fill):
        model, value = arrays
        return np.broadcast_to(value, np.broadcast_shapes(model.shape, value.shape)).copy()
    if isinstance(op, ops.Cast):
        return _map(_cast(np.dtype(op.dtype)), arrays[0])
    if isinstance(op, ops.Softmax):
        return _softmax(arrays[0], op.axis, isinstance(op, ops.LogSoftmax))
    if isinstance(op, (ops.Sum, ops.Prod)):
        reduced = np.sum if isinstance(op, ops.Sum) else np.prod
        return np.asarray(reduced(arrays[0], axis=op.axis), dtype=object)
    if isinstance(op, ops.Mean):
        x = arrays[0]
        count = np.prod([x.shape[a] for a in (range(x.ndim) if op.axis is None else op.axis)], dtype=int)
        return _map(lambda t: _divide(_mpf(t), context.mpf(int(count))), np.sum(x, axis=op.axis))
    if isinstance(op, ops.Max):
        return _reduce_max(arrays[0], op.axis)
    if isinstance(op, ops.Min):
        return np.asarray(-_reduce_max(-arrays[0], op.axis), dtype=object)
    if isinstance(op, ops.LogSumExp):
        total = np.sum(_map(_ELEMENTWISE[ops.Exp], arrays[0]), axis=op.axis)
        return _map(_ELEMENTWISE[ops.Log], total)
    if isinstance(op, (ops.Dot, ops.Dot22)):
        return np.asarray(np.dot(arrays[0], arrays[1]), dtype=object)
    if isinstance(op, (ops.Gemm, ops.Gemv)):  # b * z + a * (x @ y)
        z, a, x, y, b = arrays
        return np.asarray(b * z + a * np.dot(x, y), dtype=object)
    if isinstance(op, ops.Ger):  # m + a * outer(x, y)
        m, a, x, y = arrays
        return np.asarray(m + a * np.multiply.outer(x, y), dtype=object)
    if isinstance(op, ops.Alloc):
        return np.broadcast_to(arrays[0], op.shape).copy()
    if isinstance(op, ops.DimShuffle):
        return _dimshuffle(op, arrays[0])
    if isinstance(op, ops.Reshape):
        return arrays[0].reshape(op.shape)
    if isinstance(op, ops.Join):
        return np.concatenate(arrays, axis=op.axis)
    if isinstance(op, (ops.Subtensor, ops.AdvancedSubtensor)):
        x, *index = arrays
        return np.asarray(x[_key(op, index)], dtype=object)
    if isinstance(op, ops.IncSubtensor):
        return _written(op, *arrays)
    raise NoReferenceError(f"no exact reference for {type(op).__name__} ops")


def aligned(arrays: Sequence[np.ndarray], ndim: int) -> list[np.ndarray]:
    """Values stacked along a first point axis, given axes of length 1 after it to have `ndim` axes of
    their own: elementwise ops then broadcast each point's operands as the graph does (a scalar with a
    vector), not the point axis with an axis of the point."""
    return [a.reshape(a.shape[0], *(1,) * (ndim + 1 - a.ndim), *a.shape[1:]) for a in arrays]


def evaluate(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    points: Sequence[np.ndarray],
    bits: int,
    env: dict[Variable, np.ndarray] | None = None,
) -> list[np.ndarray]:
    """The exact values of `outputs` at `points` (a value of every input per point, stacked along a first
    axis), computed in `bits` bits, as object arrays stacked the same way.

    A graph of elementwise ops is evaluated once on the stacked points
    (each point's operands broadcast as the graph says); any other, point
    by point.  `env`, when given, receives the value of every variable
    computed, stacked along a first axis of the points.  Raises
    NoReferenceError for an op without a reference.
    """
    inputs, outputs = list(inputs), list(outputs)
    if len(points) != len(inputs):
        raise ValueError(f"{len(inputs)} inputs, but values of {len(points)} at each point")
    nodes = io_toposort(inputs, outputs)
    constants: dict[Variable, np.ndarray] = {}
    for var in [v for n in nodes for v in n.inputs] + outputs:
        if var.owner is None and var not in inputs:
            if not isinstance(var, Constant):
                raise ValueError(f"{var} is an input of the graph but not of `inputs`")
            constants[var] = array(var.data)
    for node in nodes:
        if not has_reference(node.op):
            raise NoReferenceError(f"no exact reference for {type(node.op).__name__} ops")
    count = len(points[0]) if points else 1
    env = {} if env is None else env
    with precision(bits):
        if all(isinstance(n.op, ops.Elemwise) for n in nodes):
            env.update((v, array(p)) for v, p in zip(inputs, points))
            env.update((v, c[np.newaxis]) for v, c in constants.items())
            for node in nodes:
                operands = aligned([env[i] for i in node.inputs], node.outputs[0].ndim)
                env[node.outputs[0]] = node_value(node.op, operands)
        else:
            if not count:
                raise ValueError("no points to evaluate a graph of non-elementwise ops at")
            found: list[dict[Variable, np.ndarray]] = []
            for k in range(count):
                values = {**constants, **{v: array(p[k]) for v, p in zip(inputs, points)}}
                for node in nodes:
                    values[node.outputs[0]] = node_value(node.op, [values[i] for i in node.inputs])
                found.append(values)
            env.update((v, np.stack([values[v] for values in found])) for v in found[0])
    return [np.broadcast_to(env[v], (count, *env[v].shape[1:])) for v in outputs]

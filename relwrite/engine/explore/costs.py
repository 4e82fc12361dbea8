"""Costs of forms: node count, flops, depth (bottom-up, for extraction) and accuracy (of whole forms).

`NodeCount`, `Flops` and `Depth` are `CostFunction`s: a node's cost from
its op, its operands' types and their costs, as egg's `CostFunction`.
`Flops` reads static shapes (a length the type does not know counts as
`UNKNOWN_LENGTH`), so ``A @ (B @ x)`` and ``(A @ B) @ x`` cost what their
shapes make them cost and extraction picks the cheap association.

`Accuracy` measures a whole form in the manner of Herbie: input values are
drawn uniformly over floating-point bit patterns (within user ranges), the
input expression is evaluated at them in high precision with mpmath to give
the reference, and a form's error is the mean over points and elements of
log2(ULP distance to the reference + 1).  Inputs of any shapes broadcast as
the graph says; each point holds a value for every element of every input.

Overflow, infinities and NaN follow Herbie's policy, so the measure is
defined (finite, between 0 and the float's width) for every form:

- a point is kept only where the reference is valid at every element: a
  real number (not NaN: a domain error such as log of a negative) that,
  rounded to the result's float type, is finite (Herbie drops the points
  whose exact result overflows to infinity), and that could be computed: an
  exp-like or periodic function of an argument beyond 2**`MAX_ARGUMENT_SCALE`
  (far past every float, reached only through intermediate overflow as in
  exp(exp(x))) has no exact value here, so the point is dropped, as Herbie
  drops the points its ground truth cannot be computed at;
- a form's infinity is the ordinal next to the largest finite float, so
  overflowing where the reference is the largest float costs one bit (as
  Herbie's ordinals), and a NaN where the reference is a number costs the
  float's width (Herbie's maximal error).
"""

from __future__ import annotations

import copy
import math
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial, reduce

import mpmath
import numpy as np

from relwrite.backends.numpy.function import function
from relwrite.backends.numpy.impls import evaluate
from relwrite.engine.explore.extract import CostFunction
from relwrite.engine.explore.precondition import Precondition, parse_precondition
from relwrite.graph import ops
from relwrite.graph.basic import Apply, Constant, Op, Variable, graph_inputs, io_toposort
from relwrite.graph.printing import expression_text
from relwrite.graph.types import TensorType

Domain = Mapping[str, tuple[float, float]] | Precondition | str
"""Where accuracy samples inputs: a range per input name, or a precondition (object or text)."""

SAMPLING_ROUNDS = 16
"""How many rounds of points `Accuracy` draws looking for points where a precondition holds."""

UNKNOWN_LENGTH = 64
"""The length `Flops` assumes for an axis whose static length is unknown."""

MAX_PRECISION = 2400
"""The most bits `Accuracy` computes references with (enough for sums of float64 values of any scale)."""

FLOAT64_SPAN = 2100
"""Scales (in bits) between the largest float64 and the smallest subnormal, with a margin."""

MAX_ARGUMENT_SCALE = 1100
"""The binary scale (|x| < 2**1100, past every float64) beyond which exp-like and periodic functions have no
exact value here: their cost grows with the argument's scale, and exp(exp(x)) would not end."""

NODE_EPSILON = 1e-3
"""What every node adds to `Flops`, so that of two forms with equal flops the smaller is cheaper."""


class NodeCount(CostFunction):
    """The number of nodes of a form, leaves (inputs and constants) included."""

    name = "nodes"
    additive = True

    def leaf(self, value: Variable) -> float:
        return 1.0

    def node(self, op, type_, operand_types, operand_costs) -> float:
        return 1.0 + sum(operand_costs)


class Depth(CostFunction):
    """The number of ops on the longest path from an input to the result."""

    name = "depth"

    def leaf(self, value: Variable) -> float:
        return 0.0

    def node(self, op, type_, operand_types, operand_costs) -> float:
        return 1.0 + max(operand_costs, default=0.0)


_CHEAP = (
    ops.Add, ops.Sub, ops.Mul, ops.Neg, ops.Abs, ops.Sqr, ops.Maximum, ops.Minimum, ops.Switch,
    ops.Lt, ops.Le, ops.Gt, ops.Ge, ops.Eq, ops.Neq, ops.Identity, ops.Cast, ops.Fill, ops.Fma,
)  # fmt: skip
_DIVIDING = (ops.TrueDiv, ops.Reciprocal, ops.Sqrt)


class Flops(CostFunction):
    """Floating-point operations of a form, from static shapes.

    Elementwise: one per element for arithmetic, 4 for division and square
    root, 16 for transcendental functions; dot: 2 m k n; reductions: one per
    input element; shape ops: none.
    """

    name = "flops"
    additive = True

    def leaf(self, value: Variable) -> float:
        return 0.0

    def node(self, op, type_, operand_types, operand_costs) -> float:
        return node_flops(op, type_, operand_types) + NODE_EPSILON + sum(operand_costs)


def _size(type_: TensorType) -> float:
    return float(math.prod(UNKNOWN_LENGTH if d is None else d for d in type_.shape))


def _length(d: int | None) -> float:
    return float(UNKNOWN_LENGTH if d is None else d)


def node_flops(op: Op, type_: TensorType, operand_types: Sequence[TensorType]) -> float:
    """The flops of one application of `op` to operands of `operand_types`, giving a value of `type_`."""
    out = _size(type_)
    if isinstance(op, (ops.Dot, ops.Dot22, ops.Gemm, ops.Gemv, ops.Ger)):
        matrices = [t for t in operand_types if t.ndim >= 1]
        if isinstance(op, (ops.Dot, ops.Dot22)) and len(matrices) == 2:
            inner = _length(matrices[0].shape[-1])
            return 2.0 * out * inner
        return 2.0 * sum(_size(t) for t in operand_types) + 2.0 * out
    if isinstance(op, ops.Composite):
        return out * len(op.nodes)
    if isinstance(op, ops.Elemwise):
        if isinstance(op, _CHEAP):
            return out * max(1, len(operand_types) - 1)
        return out * (4.0 if isinstance(op, _DIVIDING) else 16.0)
    if isinstance(op, ops.Softmax):
        return 20.0 * out
    if isinstance(op, (ops.DimShuffle, ops.Reshape)):
        return 0.0
    if isinstance(op, ops.Reduce):
        return sum(_size(t) for t in operand_types)
    return out


# -- accuracy ------------------------------------------------------------------------------------------


class AccuracyError(ValueError):
    """The accuracy of a form cannot be measured (an op without a reference, no real sample point)."""


def _real(x: mpmath.mpf) -> mpmath.mpf:
    """A real result, or NaN where mpmath went complex (log or sqrt of a negative, fractional powers)."""
    return x if isinstance(x, mpmath.mpf) else mpmath.nan


def _divide(a: mpmath.mpf, b: mpmath.mpf) -> mpmath.mpf:
    if b == 0:
        if a == 0 or mpmath.isnan(a):
            return mpmath.nan
        return mpmath.inf if a > 0 else -mpmath.inf
    return a / b


def _bounded(function_: Callable) -> Callable:
    """`function_` of one argument, NaN (no exact value: the point is dropped) where the argument's
    magnitude passes 2**`MAX_ARGUMENT_SCALE`."""

    def f(x):
        scale = _scale(x)
        return mpmath.nan if scale is not None and scale > MAX_ARGUMENT_SCALE else function_(x)

    return f


_exp = _bounded(mpmath.exp)


def _power(a: mpmath.mpf, b: mpmath.mpf) -> mpmath.mpf:
    """a ** b; NaN where the result's scale (|b log2 |a||) could pass 2**`MAX_ARGUMENT_SCALE`."""
    scale_a, scale_b = _scale(a), _scale(b)
    if (
        scale_a is not None
        and scale_b is not None
        and abs(a) != 1
        and scale_b + abs(scale_a).bit_length() + 1 > MAX_ARGUMENT_SCALE
    ):
        return mpmath.nan
    try:
        return _real(mpmath.power(a, b))
    except ZeroDivisionError:
        return mpmath.inf


def _erfc(x: mpmath.mpf) -> mpmath.mpf:
    """erfc, by its asymptotic form beyond 2**64, where the series' next term is below 2**-129 of it
    (mpmath's own overflows a float there)."""
    if x > 2**64:
        return _exp(-x * x) / (x * mpmath.sqrt(mpmath.pi))
    return mpmath.erfc(x)


def _cbrt(x: mpmath.mpf) -> mpmath.mpf:
    """The real cube root (mpmath's is the principal, complex one, for negative x)."""
    return -mpmath.cbrt(-x) if x < 0 else mpmath.cbrt(x)


def _atan2(y: mpmath.mpf, x: mpmath.mpf) -> mpmath.mpf:
    """The angle of (x, y), C99's at two infinities too (mpmath's is NaN there): ±pi/4 or ±3pi/4."""
    if mpmath.isinf(y) and mpmath.isinf(x):
        angle = mpmath.pi / 4 if x > 0 else 3 * mpmath.pi / 4
        return angle if y > 0 else -angle
    return mpmath.atan2(y, x)


def _hypot(x: mpmath.mpf, y: mpmath.mpf) -> mpmath.mpf:
    """sqrt(x**2 + y**2); infinite where either is, NaN in the other included (C99's hypot)."""
    if mpmath.isinf(x) or mpmath.isinf(y):
        return mpmath.inf
    return mpmath.hypot(x, y)


def _fma(x: mpmath.mpf, y: mpmath.mpf, z: mpmath.mpf) -> mpmath.mpf:
    """x * y + z with the product exact, rounded once to the working precision."""
    return mpmath.fadd(mpmath.fmul(x, y, exact=True), z)


def _extremum(pick: Callable) -> Callable:
    def f(a, b):
        if mpmath.isnan(a) or mpmath.isnan(b):
            return mpmath.nan
        return pick(a, b)

    return f


_MP_ELEMENTWISE: dict[type, Callable] = {
    ops.Add: lambda *xs: reduce(operator.add, xs),
    ops.Mul: lambda *xs: reduce(operator.mul, xs),
    ops.Sub: operator.sub,
    ops.TrueDiv: _divide,
    ops.Pow: _power,
    ops.Neg: operator.neg,
    ops.Exp: mpmath.exp,
    ops.Log: lambda x: _real(mpmath.log(x)) if x != 0 else -mpmath.inf,
    ops.Log1p: lambda x: _real(mpmath.log1p(x)) if x != -1 else -mpmath.inf,
    ops.Expm1: mpmath.expm1,
    ops.Sqrt: lambda x: _real(mpmath.sqrt(x)),
    ops.Sqr: lambda x: x * x,
    ops.Sin: mpmath.sin,
    ops.Cos: mpmath.cos,
    ops.Tanh: mpmath.tanh,
    ops.Tan: mpmath.tan,
    ops.Asin: lambda x: _real(mpmath.asin(x)),
    ops.Acos: lambda x: _real(mpmath.acos(x)),
    ops.Atan: mpmath.atan,
    ops.Sinh: mpmath.sinh,
    ops.Cosh: mpmath.cosh,
    ops.Cbrt: _cbrt,
    ops.Hypot: _hypot,
    ops.Atan2: _atan2,
    ops.Fma: _fma,
    ops.Abs: abs,
    ops.Sigmoid: lambda x: 1 / (1 + mpmath.exp(-x)),
    ops.Softplus: lambda x: mpmath.log1p(mpmath.exp(x)),
    ops.Erf: mpmath.erf,
    ops.Erfc: _erfc,
    ops.Log1mexp: lambda x: (
        mpmath.log(-mpmath.expm1(x)) if x < 0 else (-mpmath.inf if x == 0 else mpmath.nan)
    ),
    ops.Reciprocal: lambda x: _divide(mpmath.mpf(1), x),
    ops.Identity: lambda x: x,
    ops.Maximum: _extremum(max),
    ops.Minimum: _extremum(min),
    ops.Lt: operator.lt,
    ops.Le: operator.le,
    ops.Gt: operator.gt,
    ops.Ge: operator.ge,
    ops.Eq: operator.eq,
    ops.Neq: operator.ne,
    ops.Switch: lambda c, a, b: a if c else b,
}
_TRANSCENDENTAL = (
    ops.Exp, ops.Expm1, ops.Sin, ops.Cos, ops.Tanh, ops.Sigmoid, ops.Softplus,
    ops.Erf, ops.Erfc, ops.Log1mexp, ops.Tan, ops.Sinh, ops.Cosh,
)  # fmt: skip
"""Ops whose exact value costs time or memory growing with the argument's scale (bounded by `_bounded`)."""


def _unknown_on_overflow(function_: Callable) -> Callable:
    """`function_`, NaN (no exact value: the point is dropped) where mpmath overflows computing it."""

    def f(*xs):
        try:
            return function_(*xs)
        except OverflowError:
            return mpmath.nan

    return f


_MP_ELEMENTWISE = {
    op: _unknown_on_overflow(_bounded(f) if op in _TRANSCENDENTAL else f) for op, f in _MP_ELEMENTWISE.items()
}


def _mp_array(data: np.ndarray) -> np.ndarray:
    """An array as an object array of exact mpmath numbers (booleans kept)."""
    data = np.asarray(data)
    if data.dtype.kind == "b":
        return data.astype(object)
    return np.asarray(np.frompyfunc(lambda v: mpmath.mpf(v), 1, 1)(data.astype(object)), dtype=object)


def _mp_softmax(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    top = np.max(x, axis=axis, keepdims=True)
    shifted = x - top
    exps = np.frompyfunc(_exp, 1, 1)(shifted)
    total = np.sum(exps, axis=axis, keepdims=True)
    if log:
        return shifted - np.frompyfunc(mpmath.log, 1, 1)(total)
    return exps / total


_STRUCTURAL_REFERENCES = (
    ops.Fill, ops.Cast, ops.Softmax, ops.Sum, ops.Mean, ops.Max, ops.LogSumExp, ops.Dot, ops.Dot22,
    ops.Gemm, ops.Gemv, ops.Ger, ops.Alloc, ops.DimShuffle, ops.Reshape,
)  # fmt: skip
"""The ops besides the elementwise ones of `_MP_ELEMENTWISE` that `_mp_node` computes exactly."""


def has_reference(op: Op) -> bool:
    """Whether `op` has an exact (mpmath) reference here."""
    return type(op) in _MP_ELEMENTWISE or isinstance(op, _STRUCTURAL_REFERENCES)


def _mp_node(op: Op, arrays: list[np.ndarray]) -> np.ndarray:
    """One node evaluated on object arrays of mpmath numbers (one point)."""
    function_ = _MP_ELEMENTWISE.get(type(op))
    if function_ is not None:
        return np.asarray(np.frompyfunc(function_, len(arrays), 1)(*arrays), dtype=object)
    if isinstance(op, ops.Fill):
        model, value = arrays
        return np.broadcast_to(value, np.broadcast_shapes(model.shape, value.shape)).copy()
    if isinstance(op, ops.Cast):
        return arrays[0]
    if isinstance(op, (ops.Softmax,)):
        return _mp_softmax(arrays[0], op.axis, isinstance(op, ops.LogSoftmax))
    if isinstance(op, ops.Sum):
        return np.asarray(np.sum(arrays[0], axis=op.axis), dtype=object)
    if isinstance(op, ops.Mean):
        total = np.asarray(np.sum(arrays[0], axis=op.axis), dtype=object)
        return total / (arrays[0].size // max(total.size, 1))
    if isinstance(op, ops.Max):
        return np.asarray(np.max(arrays[0], axis=op.axis), dtype=object)
    if isinstance(op, ops.LogSumExp):
        total = np.asarray(np.sum(np.frompyfunc(_exp, 1, 1)(arrays[0]), axis=op.axis), dtype=object)
        return np.asarray(np.frompyfunc(_MP_ELEMENTWISE[ops.Log], 1, 1)(total), dtype=object)
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
        x = arrays[0]
        if op.dropped:
            x = x.squeeze(axis=op.dropped)
        kept = [o for o in op.new_order if o != "x"]
        rank = {axis: k for k, axis in enumerate(sorted(kept))}
        x = x.transpose(tuple(rank[o] for o in kept))
        return x[tuple(np.newaxis if o == "x" else slice(None) for o in op.new_order)]
    if isinstance(op, ops.Reshape):
        return arrays[0].reshape(op.shape)
    raise AccuracyError(f"no high-precision reference for {type(op).__name__} ops")


def _ordinals(values: np.ndarray) -> np.ndarray:
    """Floats mapped to int64 counting representable values: ULP distance is a difference."""
    width = values.dtype.itemsize * 8
    bits = values.view(np.int64 if width == 64 else np.int32).astype(np.int64)
    magnitude = bits & ((1 << (width - 1)) - 1)
    return np.where(bits < 0, -magnitude, magnitude)


def mean_bits(values: np.ndarray, exact: np.ndarray) -> float | None:
    """Mean `bits_of_error` of `values` against `exact` values (rounded to the values' type) over the
    elements whose exact value is known (not NaN); None when none is, or the values are not floats."""
    values = np.asarray(values)
    if values.dtype.kind != "f":
        return None
    with np.errstate(all="ignore"):
        exact = np.asarray(exact).astype(values.dtype)
    values, exact = np.broadcast_arrays(values, exact)
    known = ~np.isnan(exact)
    if not known.any():
        return None
    return float(np.mean(bits_of_error(values[known], exact[known])))


def evaluate_stacked(node: Apply, operands: Sequence[np.ndarray], samples: int) -> np.ndarray:
    """One application evaluated in its own precision at `samples` points: `operands` are stacked along
    a first axis (of length 1 for a value the same at every point); an elementwise op runs once over
    the stack, any other point by point."""
    with np.errstate(all="ignore"):
        if isinstance(node.op, ops.Elemwise):
            return evaluate(node, _aligned(operands, node.outputs[0].ndim))[0]
        return np.stack(
            [np.asarray(evaluate(node, [o[min(k, len(o) - 1)] for o in operands])[0]) for k in range(samples)]
        )


def bits_of_error(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """log2(ULP distance + 1) per element, at most the float's width (Herbie's measure).

    Infinities count as the values next to the largest finite floats (their bit patterns' order, as
    Herbie's ordinals); a NaN against a number is the float's width, NaN against NaN no error.
    """
    values = np.asarray(values)
    reference = np.asarray(reference, dtype=values.dtype)
    width = float(values.dtype.itemsize * 8)
    a, b = _ordinals(values), _ordinals(reference)
    with np.errstate(all="ignore"):
        same_sign = (a >= 0) == (b >= 0)  # then a - b fits in int64; else the distance is |a| + |b|
        distance = np.where(
            same_sign,
            np.abs(np.where(same_sign, a - b, 0)).astype(np.float64),
            np.abs(a) + np.abs(b.astype(float)),
        )
        error = np.log2(distance + 1.0)
    nan, nan_reference = np.isnan(values), np.isnan(reference)
    return np.where(nan | nan_reference, np.where(nan & nan_reference, 0.0, width), np.minimum(error, width))


class Accuracy:
    """Bits of error of forms of `expr` against an mpmath reference of `expr` (Herbie's measure).

    `samples` points are drawn with `seed`, each input uniformly over the
    bit patterns of its float type, or of the interval `ranges[name]`;
    `ranges` may instead be a `Precondition` (or its text, "0 < x < y"):
    inputs are drawn within the box it implies and kept where it holds, as
    Herbie samples under an FPCore's `:pre`.  Unknown lengths are `length`.
    Calling the object on a form (a graph over the same inputs) gives its
    mean bits of error.
    """

    name = "accuracy"

    def __init__(
        self,
        expr: Variable,
        samples: int = 256,
        ranges: Domain | None = None,
        seed: int = 0,
        precision: int = 128,
        length: int = 3,
    ):
        if expr.type.numpy_dtype.kind != "f":
            raise AccuracyError(f"accuracy needs a floating result, {expression_text(expr)} is {expr.dtype}")
        self.inputs = [v for v in graph_inputs([expr]) if not isinstance(v, Constant)]
        if not self.inputs:
            raise AccuracyError(f"accuracy needs inputs to sample, {expression_text(expr)} has none")
        for v in self.inputs:
            if v.type.numpy_dtype.kind != "f":
                raise AccuracyError(f"accuracy needs floating inputs, {v.name or v} is {v.dtype}")
        names = [v.name for v in self.inputs]
        precondition = None
        if isinstance(ranges, str):
            ranges = parse_precondition(ranges, names)
        if isinstance(ranges, Precondition):
            precondition, box = ranges, ranges.ranges
            empty = sorted(n for n, i in box.items() if i.is_empty)
            if empty:
                raise AccuracyError(f"the precondition {precondition} holds nowhere (no value of {empty[0]})")
            ranges = {n: (i.lo, i.hi) for n, i in box.items() if n in names}
        ranges = dict(ranges or {})
        unknown = sorted(set(ranges) - set(names))
        if unknown:
            raise AccuracyError(f"ranges name no input of the expression: {', '.join(unknown)}")
        self.expr, self.precondition, self.precision = expr, precondition, precision
        self.seed, self._ranges = seed, ranges
        self._shapes = [tuple(length if d is None else d for d in v.type.shape) for v in self.inputs]
        rng = np.random.default_rng(seed)
        self.point_seconds = 0.0
        """Seconds the exact reference took per point, when last computed (to size another sample)."""
        self.points, self.reference = self._measured(self._points(rng, samples, self._shapes, ranges))
        if not len(self.reference):
            raise AccuracyError(
                f"{expression_text(expr)} is not a real number, or overflows, at every sample point"
            )

    def _measured(self, points: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
        """The points where the reference is valid (a real number, finite in the result's type) and that
        reference."""
        samples = len(points[0])
        if not samples:
            return points, np.zeros((0, *points[0].shape[1:]), dtype=self.expr.type.numpy_dtype)
        started = time.perf_counter()
        with np.errstate(all="ignore"):  # rounded to the result's type: past its range, infinite
            reference = self.exact([self.expr], points)[0].astype(self.expr.type.numpy_dtype)
        self.point_seconds = (time.perf_counter() - started) / samples
        keep = np.isfinite(reference.reshape(samples, -1)).all(axis=1)
        return [p[keep] for p in points], reference[keep]

    def at(self, points: Sequence[np.ndarray]) -> Accuracy:
        """The same measure over other `points` (a value of every input per point, stacked along a first
        axis), kept where the precondition holds and the reference is valid: to judge forms near a point."""
        points = [np.asarray(p, dtype=v.type.numpy_dtype) for v, p in zip(self.inputs, points, strict=True)]
        other = copy.copy(self)
        other.points, other.reference = self._measured(self._holding(points))
        return other

    def resampled(self, samples: int, seed: int) -> Accuracy:
        """The same measure over `samples` fresh points drawn with `seed` (same ranges and precondition):
        to confirm on points a search did not see what it chose on these."""
        other = copy.copy(self)
        drawn = self._points(np.random.default_rng(seed), samples, self._shapes, self._ranges)
        other.points, other.reference = self._measured(drawn)
        return other

    def _points(
        self,
        rng: np.random.Generator,
        samples: int,
        shapes: list[tuple[int, ...]],
        ranges: Mapping[str, tuple[float, float]],
    ) -> list[np.ndarray]:
        """`samples` points, each input within its range, where the precondition holds at every element:
        drawn in rounds of `samples` (at most `SAMPLING_ROUNDS`; fewer points if the precondition is rare)."""
        kept: list[list[np.ndarray]] = [[] for _ in self.inputs]
        found = 0
        for _ in range(SAMPLING_ROUNDS if self.precondition is not None else 1):
            drawn = [
                _sample(rng, v.type.numpy_dtype, (samples, *shape), ranges.get(v.name))
                for v, shape in zip(self.inputs, shapes)
            ]
            for k, d in enumerate(self._holding(drawn)):
                kept[k].append(d)
            found += len(kept[0][-1])
            if found >= samples:
                break
        if found == 0:
            raise AccuracyError(
                f"the precondition {self.precondition} holds at none of {SAMPLING_ROUNDS * samples} points"
                " drawn"
            )
        return [np.concatenate(k)[:samples] for k in kept]

    def _holding(self, points: list[np.ndarray]) -> list[np.ndarray]:
        """The points where the precondition (if any) holds at every element."""
        if self.precondition is None or not len(points[0]):
            return points
        try:
            mask = self.precondition.holds({v.name: d for v, d in zip(self.inputs, points)})
        except ValueError as error:  # shapes that do not broadcast
            raise AccuracyError(f"the precondition cannot be evaluated on the inputs: {error}") from None
        samples = len(points[0])
        holds = np.broadcast_to(mask, np.broadcast_shapes(mask.shape, (samples,) + (1,) * (mask.ndim - 1)))
        holds = holds.reshape(samples, -1).all(axis=1)
        return [p[holds] for p in points]

    def exact(self, outputs: Sequence[Variable], points: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """The exact values of graphs over the inputs at `points` (default: the sample), each rounded to
        float64 and stacked along a first axis (NaN where a value is not real or cannot be computed).

        Values are computed in `precision` bits; where a sum adds operands
        further apart in scale than that (``1 + x`` at x = 1e-300 needs a
        thousand bits) the graphs holding it are computed again at those
        points with enough bits for the sum to be exact, up to
        `MAX_PRECISION`.  Many graphs are computed together, each shared
        subterm once.
        """
        points = self.points if points is None else points
        outputs = list(outputs)
        values, needed = self._exact(outputs, io_toposort(self.inputs, outputs), points, self.precision)
        precision = np.full(needed.shape, self.precision)
        while True:
            over = (needed > precision) & (precision < MAX_PRECISION)
            if not over.any():
                return values
            rows, columns = np.flatnonzero(over.any(axis=1)), np.flatnonzero(over.any(axis=0))
            bits = min(MAX_PRECISION, int(needed[over].max()) + 64)
            again = [outputs[r] for r in rows]
            nodes = io_toposort(self.inputs, again)
            finer, needs = self._exact(again, nodes, [p[columns] for p in points], bits)
            for r, fine, need in zip(rows, finer, needs):
                values[r][columns] = fine
                needed[r, columns] = need
                precision[r, columns] = bits

    def _exact(
        self, outputs: list[Variable], nodes: list, points: list[np.ndarray], precision: int
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """`outputs` at `points` in `precision` bits, rounded to float64 (stacked along a first axis),
        and for each output and point the bits the sums it is made of need to be exact."""
        count = len(points[0])
        batched = all(isinstance(n.op, ops.Elemwise) for n in nodes)
        groups = [points] if batched else [[p[k : k + 1] for p in points] for k in range(count)]
        results: list[list[np.ndarray]] = [[] for _ in outputs]
        needs: list[list[np.ndarray]] = [[] for _ in outputs]
        with mpmath.workprec(precision):
            for group in groups:
                values: dict[Variable, np.ndarray] = {v: _mp_array(p) for v, p in zip(self.inputs, group)}
                nothing = np.zeros(len(group[0]), dtype=np.int64)
                need: dict[Variable, np.ndarray] = {}
                for node in nodes:
                    arrays = [
                        values[i] if i in values else _mp_array(i.data)[np.newaxis] for i in node.inputs
                    ]
                    if batched:
                        result = _mp_node(node.op, _aligned(arrays, node.outputs[0].ndim))
                    else:  # one point: the op sees its operands as they are, without the sample axis
                        result = _mp_node(node.op, [a[0] for a in arrays])[np.newaxis]
                    values[node.outputs[0]] = result
                    mine = reduce(np.maximum, (need.get(i, nothing) for i in node.inputs), nothing)
                    if isinstance(node.op, (ops.Add, ops.Sub)):
                        need_of = partial(_needed_bits, precision)
                        operands = _aligned(arrays, node.outputs[0].ndim)
                        spans = np.asarray(
                            np.frompyfunc(need_of, len(arrays) + 1, 1)(result, *operands), dtype=np.int64
                        )
                        spans = np.broadcast_to(spans, (len(mine), *spans.shape[1:]))
                        mine = np.maximum(mine, spans.reshape(len(mine), -1).max(axis=1, initial=0))
                    need[node.outputs[0]] = mine
                for out, found, wanted in zip(outputs, results, needs):
                    value = values[out] if out in values else _mp_array(out.data)[np.newaxis]
                    with np.errstate(over="ignore"):  # a value beyond the float range rounds to infinity
                        rounded = np.frompyfunc(_rounded, 1, 1)(value)
                    found.append(np.asarray(rounded, dtype=np.float64))
                    wanted.append(need.get(out, nothing))
        stacked = [
            np.concatenate([np.broadcast_to(r, (len(n), *r.shape[1:])) for r, n in zip(found, wanted)])
            for found, wanted in zip(results, needs)
        ]
        return stacked, np.stack([np.concatenate(wanted) for wanted in needs])

    def values(self, form: Variable) -> np.ndarray:
        """The form evaluated in its own precision at every sample point (stacked along a first axis).

        A form of elementwise ops only is evaluated once on the stacked
        points (it broadcasts over the extra axis); any other, point by point.
        """
        nodes = io_toposort(self.inputs, [form])
        with np.errstate(all="ignore"):
            if all(isinstance(n.op, ops.Elemwise) for n in nodes):
                values: dict[Variable, np.ndarray] = dict(zip(self.inputs, self.points))
                for node in nodes:
                    operands = _aligned([_value(values, i) for i in node.inputs], node.outputs[0].ndim)
                    values[node.outputs[0]] = evaluate(node, operands)[0]
                (value,) = _aligned([_value(values, form)], self.reference.ndim - 1)
                return np.broadcast_to(value, self.reference.shape)
            run = function(self.inputs, form)
            return np.stack([np.asarray(run(*point)) for point in zip(*self.points)])

    def point_errors(self, form: Variable) -> np.ndarray:
        """The form's bits of error at each sample point (the mean over its elements), in point order."""
        if not len(self.reference):
            return np.zeros(0)
        errors = bits_of_error(self.values(form), self.reference)
        return errors.reshape(len(errors), -1).mean(axis=1)

    def __call__(self, form: Variable) -> float:
        return float(np.mean(self.point_errors(form)))

    def local_errors(self, form: Variable) -> list[tuple[Variable, float]]:
        """Herbie's local error of each application in `form` (operands first): the mean bits of error
        of its op applied in floating point to its operands' exact values (rounded), against its own
        exact value, i.e. the bits that op loses, not those its operands bring (points where a value is
        not real do not count; an application with none left is not listed).

        Raises AccuracyError when an op of `form` has no exact reference.
        """
        nodes = [n for n in io_toposort(self.inputs, [form]) if len(n.outputs) == 1]
        if not nodes:  # an input or a constant: no op to lose bits
            return []
        for node in nodes:
            if not has_reference(node.op):
                raise AccuracyError(f"no high-precision reference for {type(node.op).__name__} ops")
        outputs = [n.outputs[0] for n in nodes]
        exact: dict[Variable, np.ndarray] = dict(zip(self.inputs, self.points))
        with np.errstate(all="ignore"):
            exact.update((v, e.astype(v.type.numpy_dtype)) for v, e in zip(outputs, self.exact(outputs)))
        samples = len(self.points[0])
        found = []
        for node, out in zip(nodes, outputs):
            value = evaluate_stacked(node, [_value(exact, i) for i in node.inputs], samples)
            bits = mean_bits(value, exact[out])
            if bits is not None:
                found.append((out, bits))
        return found


def _scale(x: mpmath.mpf) -> int | None:
    """The binary exponent of a nonzero finite number (None otherwise)."""
    if not isinstance(x, mpmath.mpf) or x == 0 or not mpmath.isfinite(x):
        return None
    mantissa, exponent = x.man_exp
    return exponent + int(mantissa).bit_length()


def _needed_bits(precision: int, result: mpmath.mpf, *operands: mpmath.mpf) -> int:
    """The bits a sum `result` of `operands` needs to be right: its operands' spread in scale plus
    what cancellation lost, plus 64; twice `precision` when it cancelled to exactly 0.

    Operands further apart than the float64 range matter to no float result and do not count.
    """
    scales = [s for s in map(_scale, operands) if s is not None]
    if not scales:
        return 0
    top = max(scales)
    if result == 0:
        return 2 * precision if len(scales) > 1 else 0
    spread = top - min(scales)
    lost = top - (_scale(result) if _scale(result) is not None else top)
    bits = max(spread if spread <= FLOAT64_SPAN else 0, lost)
    return bits + 64 if bits else 0


def _value(values: Mapping[Variable, np.ndarray], v: Variable) -> np.ndarray:
    """The value computed for `v` at every point (a first axis), or its data with a sample axis of 1."""
    found = values.get(v)
    return np.asarray(v.data)[np.newaxis] if found is None else found


def _aligned(arrays: Sequence[np.ndarray], ndim: int) -> list[np.ndarray]:
    """Values stacked along a first sample axis, given axes of length 1 after it to have `ndim` axes of
    their own: elementwise ops then broadcast each point's operands as the graph does (a scalar with a
    vector), not the sample axis with an axis of the point."""
    return [a.reshape(a.shape[0], *(1,) * (ndim + 1 - a.ndim), *a.shape[1:]) for a in arrays]


def _rounded(x: mpmath.mpf) -> float:
    if isinstance(x, (bool, np.bool_)):
        return float(x)
    if mpmath.isnan(x):
        return math.nan
    return float(x)


def _sample(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], bounds) -> np.ndarray:
    """Floats of `dtype` uniform over bit patterns: over all finite values, or those in `bounds`."""
    info = np.finfo(dtype)
    low, high = (float(-info.max), float(info.max)) if bounds is None else map(float, bounds)
    if not low <= high:
        raise AccuracyError(f"empty range [{low}, {high}]")
    low, high = max(low, float(-info.max)), min(high, float(info.max))  # a precondition's box may be open
    ends = _ordinals(np.array([low, high], dtype=dtype))
    ordinals = rng.integers(int(ends[0]), int(ends[1]), size=shape, endpoint=True)
    width = dtype.itemsize * 8
    sign = (ordinals < 0).astype(np.uint64) << np.uint64(width - 1)
    bits = np.abs(ordinals).astype(np.uint64) | sign
    return bits.astype(np.uint64 if width == 64 else np.uint32).view(dtype)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points (error, flops) no other point beats in both, by increasing flops."""
    order = sorted(range(len(points)), key=lambda i: (points[i][1], points[i][0]))
    front, best = [], math.inf
    for i in order:
        if points[i][0] < best:
            front.append(i)
            best = points[i][0]
    return front


COSTS: dict[str, Callable[[], CostFunction]] = {"nodes": NodeCount, "flops": Flops, "depth": Depth}

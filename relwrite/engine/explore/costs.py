"""Costs of forms: node count, flops, depth (bottom-up, for extraction) and accuracy (of whole forms).

`NodeCount`, `Flops` and `Depth` are `CostFunction`s: a node's cost from
its op, its operands' types and their costs, as egg's `CostFunction`.
`Flops` reads static shapes (a length the type does not know counts as
`UNKNOWN_LENGTH`), so ``A @ (B @ x)`` and ``(A @ B) @ x`` cost what their
shapes make them cost and extraction picks the cheap association.

`Accuracy` measures a whole form in the manner of Herbie: input values are
drawn uniformly over floating-point bit patterns (within user ranges), the
input expression is evaluated at them exactly (`relwrite.backends.exact`,
whose policy says what an op's value is at infinities, poles and NaN) to
give the reference, and a form's error is the mean over points and elements
of log2(ULP distance to the reference + 1).  Inputs of any shapes broadcast
as the graph says; each point holds a value for every element of every
input.

Overflow, infinities and NaN follow Herbie's policy, so the measure is
defined (finite, between 0 and the float's width) for every form:

- a point is kept only where the reference is valid at every element: a
  real number (not NaN: a domain error such as log of a negative) that,
  rounded to the result's float type, is finite (Herbie drops the points
  whose exact result overflows to infinity), and that could be computed: a
  periodic function of an argument beyond 2**`exact.MAX_ARGUMENT_SCALE`
  (far past every float, reached only through intermediate overflow as in
  sin(exp(exp(x)))) has no exact value here, so the point is dropped, as
  Herbie drops the points its ground truth cannot be computed at;
- a form's infinity is the ordinal next to the largest finite float, so
  overflowing where the reference is the largest float costs one bit (as
  Herbie's ordinals), and a NaN where the reference is a number costs the
  float's width (Herbie's maximal error).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial, reduce

import numpy as np

from relwrite.backends import exact
from relwrite.backends.exact import has_reference
from relwrite.backends.numpy.function import numpy_function
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

RARE = 0.25
"""The share of a round's points below which a precondition is rare over bit patterns (`Accuracy._points`
then draws every other round uniformly over the reals of the inputs' ranges)."""

UNKNOWN_LENGTH = 64
"""The length `Flops` assumes for an axis whose static length is unknown."""

MAX_PRECISION = 2400
"""The most bits `Accuracy` computes references with (enough for sums of float64 values of any scale)."""

FLOAT64_SPAN = 2100
"""Scales (in bits) between the largest float64 and the smallest subnormal, with a margin."""

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


def _ordinals(values: np.ndarray) -> np.ndarray:
    """Floats mapped to int64 counting representable values: ULP distance is a difference."""
    width = values.dtype.itemsize * 8
    bits = values.view(np.int64 if width == 64 else np.int32).astype(np.int64)
    magnitude = bits & ((1 << (width - 1)) - 1)
    return np.where(bits < 0, -magnitude, magnitude)


def mean_bits(values: np.ndarray, exact: np.ndarray) -> float | None:
    """Mean `bits_of_error` of `values` against `exact` values (rounded to the values' type) over the
    elements whose exact value is known (not NaN); None when none is, or the values are not floats."""
    found = element_bits(values, exact)
    if found is None:
        return None
    errors, known = found
    return float(errors.sum() / known.sum())


def element_bits(values: np.ndarray, exact: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """`bits_of_error` of `values` against `exact` (rounded to the values' type), element by element
    (broadcast together), 0 where the exact value is unknown (NaN), and where it is known; None when it
    is nowhere, or the values are not floats."""
    values = np.asarray(values)
    if values.dtype.kind != "f":
        return None
    with np.errstate(all="ignore"):
        exact = np.asarray(exact).astype(values.dtype)
    values, exact = np.broadcast_arrays(values, exact)
    known = ~np.isnan(exact)
    if not known.any():
        return None
    return np.where(known, bits_of_error(values, exact), 0.0), known


def evaluate_stacked(node: Apply, operands: Sequence[np.ndarray], samples: int) -> np.ndarray:
    """One application evaluated in its own precision at `samples` points: `operands` are stacked along
    a first axis (of length 1 for a value the same at every point); an elementwise op runs once over
    the stack, any other point by point."""
    with np.errstate(all="ignore"):
        if isinstance(node.op, ops.Elemwise):
            return evaluate(node, exact.aligned(operands, node.outputs[0].ndim))[0]
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
        drawn in rounds of `samples` (at most `SAMPLING_ROUNDS`; fewer points if the precondition is rare).

        Points are uniform over bit patterns (Herbie's measure); where fewer
        than `RARE` of a round's points meet the precondition (relational
        predicates over bounded boxes, as ``x1 + x2 >= 2`` with x1, x2 in
        [0, 6], whose floats mostly lie near 0), every other round draws
        uniformly over the reals of each bounded range instead.
        """
        kept: list[list[np.ndarray]] = [[] for _ in self.inputs]
        found = 0
        for round_ in range(SAMPLING_ROUNDS if self.precondition is not None else 1):
            uniform = round_ % 2 == 1 and found < RARE * samples * (round_ + 1) / 2
            drawn = [
                _sample(rng, v.type.numpy_dtype, (samples, *shape), ranges.get(v.name), uniform)
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
        env: dict[Variable, np.ndarray] = {}
        try:
            values = exact.evaluate(self.inputs, outputs, points, precision, env=env)
        except exact.NoReferenceError as error:
            raise AccuracyError(str(error)) from None
        nothing = np.zeros(len(points[0]), dtype=np.int64)
        need: dict[Variable, np.ndarray] = {}
        for node in nodes:
            mine = reduce(np.maximum, (need.get(i, nothing) for i in node.inputs), nothing)
            if isinstance(node.op, (ops.Add, ops.Sub)):
                operands = exact.aligned([_value(env, i) for i in node.inputs], node.outputs[0].ndim)
                need_of = np.frompyfunc(partial(_needed_bits, precision), len(operands) + 1, 1)
                spans = np.asarray(need_of(env[node.outputs[0]], *operands), dtype=np.int64)
                spans = np.broadcast_to(spans, (len(mine), *spans.shape[1:]))
                mine = np.maximum(mine, spans.reshape(len(mine), -1).max(axis=1, initial=0))
            need[node.outputs[0]] = mine
        with np.errstate(over="ignore"):  # a value beyond the float range rounds to infinity
            rounded = [np.asarray(np.frompyfunc(_rounded, 1, 1)(v), dtype=np.float64) for v in values]
        return rounded, np.stack([need.get(out, nothing) for out in outputs])

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
                    operands = exact.aligned([_value(values, i) for i in node.inputs], node.outputs[0].ndim)
                    values[node.outputs[0]] = evaluate(node, operands)[0]
                (value,) = exact.aligned([_value(values, form)], self.reference.ndim - 1)
                return np.broadcast_to(value, self.reference.shape)
            run = numpy_function(self.inputs, form)
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
                raise AccuracyError(f"no exact reference for {type(node.op).__name__} ops")
        outputs = [n.outputs[0] for n in nodes]
        known: dict[Variable, np.ndarray] = dict(zip(self.inputs, self.points))
        with np.errstate(all="ignore"):
            known.update((v, e.astype(v.type.numpy_dtype)) for v, e in zip(outputs, self.exact(outputs)))
        samples = len(self.points[0])
        found = []
        for node, out in zip(nodes, outputs):
            value = evaluate_stacked(node, [_value(known, i) for i in node.inputs], samples)
            bits = mean_bits(value, known[out])
            if bits is not None:
                found.append((out, bits))
        return found


def _needed_bits(precision: int, result: object, *operands: object) -> int:
    """The bits a sum `result` of `operands` needs to be right: its operands' spread in scale plus
    what cancellation lost, plus 64; twice `precision` when it cancelled to exactly 0.

    Operands further apart than the float64 range matter to no float result and do not count.
    """
    scales = [s for s in map(exact.scale, operands) if s is not None]
    if not scales:
        return 0
    top = max(scales)
    if result == 0:
        return 2 * precision if len(scales) > 1 else 0
    spread = top - min(scales)
    lost = top - (exact.scale(result) if exact.scale(result) is not None else top)
    bits = max(spread if spread <= FLOAT64_SPAN else 0, lost)
    return bits + 64 if bits else 0


def _value(values: Mapping[Variable, np.ndarray], v: Variable) -> np.ndarray:
    """The value computed for `v` at every point (a first axis), or its data with a sample axis of 1."""
    found = values.get(v)
    return np.asarray(v.data)[np.newaxis] if found is None else found


def _rounded(x: object) -> float:
    """A reference number (or boolean) rounded to float64 (overflowing to infinity, NaN kept)."""
    if isinstance(x, (bool, np.bool_)):
        return float(x)
    return math.nan if exact.context.isnan(x) else float(x)


def _sample(
    rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], bounds, uniform: bool = False
) -> np.ndarray:
    """Floats of `dtype` uniform over bit patterns: over all finite values, or those in `bounds`; with
    `uniform` and bounds, uniform over the reals between them instead."""
    info = np.finfo(dtype)
    low, high = (float(-info.max), float(info.max)) if bounds is None else map(float, bounds)
    if not low <= high:
        raise AccuracyError(f"empty range [{low}, {high}]")
    low, high = max(low, float(-info.max)), min(high, float(info.max))  # a precondition's box may be open
    if uniform and bounds is not None and high - low < float(info.max):
        return rng.uniform(low, high, size=shape).astype(dtype)
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

"""Whether two graphs compute the same values: evaluation on inputs, and the judgement of the difference.

`check_relation` (property tests of rules, `relwrite.testing`) and the
check of explored forms (`relwrite.engine.explore.checking`) compare a left
and a right graph the same way: each evaluated with the NumPy backend (its
intermediate values read for overflow and subnormal numbers), the values
agreeing where equal, both NaN, or within sqrt(eps) of the coarser float
type (the absolute tolerance scaled by the largest magnitude computed);
positions where the left side does not reproduce in the next lower
precision are ill-conditioned and not compared.  No hypothesis here: what
draws the inputs is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from relwrite.backends.numpy.function import numpy_function
from relwrite.graph.basic import Constant, Variable, ancestors, constant, io_toposort
from relwrite.graph.types import TensorType


class NoUsableExample(ValueError):
    """No example could be drawn that the check compares: every draw broke an assumption, was not
    finite where only finite values are compared, or was otherwise rejected."""


class SoundnessError(AssertionError):
    """A rule whose two sides differ on some input; the message describes the counterexample.

    Attributes: `rule` (its name), `direction` ("forward" or "backward"),
    `inputs` (input name -> array), `left` and `right` (the two graphs; either
    may be None when it could not be built) and `left_value`, `right_value`.
    """

    def __init__(
        self,
        message: str,
        rule: str,
        direction: str,
        inputs: Mapping[str, np.ndarray],
        left: Variable | None = None,
        right: Variable | None = None,
        left_value: np.ndarray | None = None,
        right_value: np.ndarray | None = None,
    ):
        super().__init__(message)
        self.rule = rule
        self.direction = direction
        self.inputs = dict(inputs)
        self.left, self.right = left, right
        self.left_value, self.right_value = left_value, right_value


@dataclass(frozen=True)
class Evaluated:
    """A graph's value on some inputs, and what its intermediate values say about it."""

    value: np.ndarray
    magnitude: float  # the largest finite magnitude among the graph's intermediate values
    underflow: bool  # whether some intermediate value is subnormal (and so has lost precision)
    overflow: bool  # whether some value computed from finite inputs is not finite


class Evaluator:
    """`graph` compiled once (NumPy backend) with its intermediate values, to evaluate on many inputs."""

    def __init__(self, graph: Variable, inputs: Sequence[Variable]):
        outputs = [graph, *(v for v in ancestors([graph]) if v.owner is not None and v is not graph)]
        self.function = numpy_function(list(inputs), outputs)

    def __call__(self, values: Sequence[np.ndarray]) -> Evaluated:
        """The graph's value on `values` (one per input), with what its intermediates say of it."""
        with np.errstate(all="ignore"):
            results = self.function(*values)
        return _evaluated(results, values)


def evaluate(graph: Variable, inputs: Sequence[Variable], values: Sequence[np.ndarray]) -> Evaluated:
    """Evaluate `graph` on `values` (one per input) with the NumPy backend."""
    return Evaluator(graph, inputs)(values)


def _evaluated(results: Sequence[np.ndarray], values: Sequence[np.ndarray]) -> Evaluated:
    finite_inputs = all(finite(v) for v in values)
    return Evaluated(
        np.asarray(results[0]),
        max(magnitude(r) for r in results),
        any(subnormal(r) for r in results),
        finite_inputs and not all(finite(r) for r in results),
    )


def finite(array: np.ndarray) -> bool:
    array = np.asarray(array)
    return array.dtype.kind != "f" or bool(np.isfinite(array).all())


def magnitude(array: np.ndarray) -> float:
    array = np.asarray(array)
    if array.dtype.kind not in "iuf" or array.size == 0:
        return 0.0
    finite = np.abs(array[np.isfinite(array)]) if array.dtype.kind == "f" else np.abs(array)
    return float(finite.max()) if finite.size else 0.0


def subnormal(array: np.ndarray) -> bool:
    array = np.asarray(array)
    if array.dtype.kind != "f":
        return False
    magnitude = np.abs(array)
    return bool(((magnitude > 0) & (magnitude < np.finfo(array.dtype).smallest_normal)).any())


def tolerances(dtype: np.dtype, rtol: float | None, atol: float | None, scale: float) -> tuple[float, float]:
    """Relative and absolute tolerances for `dtype`: sqrt(eps), the absolute one times `scale`."""
    if dtype.kind != "f":
        return (rtol or 0.0, atol or 0.0)
    tolerance = float(np.sqrt(np.finfo(dtype).eps))
    return (tolerance if rtol is None else rtol, tolerance * scale if atol is None else atol)


def difference(
    left: np.ndarray,
    right: np.ndarray,
    finite_only: bool,
    rtol: float | None,
    atol: float | None,
    scale: float,
    unreliable: Callable[[], np.ndarray | None] = lambda: None,
    inputs_dtype: np.dtype | None = None,
) -> str | None:
    """How `right` differs from `left`, or None when they agree.

    `unreliable()`, asked only when some values differ, marks positions where
    `left` itself is too inaccurate to compare against.  Float tolerances are
    those of the coarser of the result's dtype and `inputs_dtype` (the
    coarsest float input): a float64 result of float32 inputs may carry
    float32 rounding, e.g. log(x) + log(y) against log(x * y).
    """
    if left.dtype != right.dtype:
        return f"dtypes differ: left {left.dtype.name}, right {right.dtype.name}"
    if left.shape != right.shape:
        return f"shapes differ: left {left.shape}, right {right.shape}"
    precision = left.dtype
    if (
        inputs_dtype is not None
        and left.dtype.kind == "f"
        and np.finfo(inputs_dtype).eps > np.finfo(precision).eps
    ):
        precision = inputs_dtype
    r_tol, a_tol = tolerances(precision, rtol, atol, scale)
    if left.dtype.kind == "f":
        with np.errstate(all="ignore"):
            same = (left == right) | (np.isnan(left) & np.isnan(right))
            close = (
                np.isfinite(left)
                & np.isfinite(right)
                & (np.abs(left - right) <= a_tol + r_tol * np.abs(left))
            )
        agree = same | close
        if finite_only:
            agree |= ~np.isfinite(left)
        if not agree.all():
            skipped = unreliable()
            if skipped is not None:
                agree |= skipped
    else:
        exact_left, exact_right = left.astype(np.float64), right.astype(np.float64)  # no integer overflow
        agree = np.abs(exact_left - exact_right) <= a_tol + r_tol * np.abs(exact_left)
    if agree.all():
        return None
    index = tuple(int(i) for i in np.argwhere(~agree)[0])
    where = f" at index {index}" if index else ""
    return (
        f"values differ{where}: left {left[index].tolist()!r}, right {right[index].tolist()!r}"
        f" (rtol={r_tol:.3g}, atol={a_tol:.3g})"
    )


def coarsest_float(values: Sequence[np.ndarray]) -> np.dtype | None:
    """The float dtype with the largest epsilon among `values`, or None when none is a float."""
    floats = [np.asarray(v).dtype for v in values if np.asarray(v).dtype.kind == "f"]
    return max(floats, key=lambda d: np.finfo(d).eps) if floats else None


LOWER_PRECISION = {"float64": "float32", "float32": "float16"}


def unreliable_positions(
    graph: Variable, inputs: Sequence[Variable], values: Sequence[np.ndarray], value: np.ndarray, scale: float
) -> np.ndarray | None:
    """Where `value` (graph's value on the binding) is numerically unreliable, or None if unknown.

    The graph is evaluated again with its float inputs and constants in the
    next lower precision; a finite position whose value is not reproduced
    within that precision's tolerance is ill-conditioned (catastrophic
    cancellation, say), so its last digits in the higher precision mean
    nothing either.  Stabilizing rules exist for such positions.
    """
    lower = LOWER_PRECISION.get(value.dtype.name)
    if lower is None:
        return None
    try:
        lowered = in_precision(graph, inputs, values, np.dtype(lower))
    except Exception:
        return None
    if lowered.shape != value.shape:
        return None
    tolerance = float(np.sqrt(np.finfo(lower).eps))
    with np.errstate(all="ignore"):
        reproduced = np.isfinite(lowered) & (
            np.abs(value - lowered) <= tolerance * scale + tolerance * np.abs(value)
        )
    return np.isfinite(value) & ~reproduced


def in_precision(
    graph: Variable, inputs: Sequence[Variable], values: Sequence[np.ndarray], dtype: np.dtype
) -> np.ndarray:
    """`graph` evaluated with every wider float input and constant cast to `dtype`, and its integer inputs
    too (values drawn for checks are small integers, exact in every float): so a float computed from an
    integer, as log1p(expm1(i)), is reproduced in the lower precision as well."""

    def lowered(v: Variable) -> Variable:
        if v.type.numpy_dtype.kind == "f" and v.type.numpy_dtype.itemsize > dtype.itemsize:
            if isinstance(v, Constant):
                return constant(v.data.astype(dtype))
            return TensorType(dtype, v.type.shape)(v.name)
        return v

    def lowered_input(v: Variable) -> Variable:
        if v.type.numpy_dtype.kind in "iu":
            return TensorType(dtype, v.type.shape)(v.name)
        return lowered(v)

    replacement = {v: lowered_input(v) for v in inputs}
    for node in io_toposort(list(inputs), [graph]):
        args = [replacement[i] if i in replacement else lowered(i) for i in node.inputs]
        for old, new in zip(node.outputs, node.op.make_node(*args).outputs):
            replacement[old] = new
    cast = [value.astype(replacement[v].dtype) for v, value in zip(inputs, values)]
    with np.errstate(all="ignore"):
        return np.asarray(numpy_function([replacement[v] for v in inputs], replacement[graph])(*cast))

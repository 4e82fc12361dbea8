"""Regimes, as Herbie infers them: where no single form is accurate over the whole input range, one form
per range of an input, joined by `switch`.

The sample points of an `Accuracy` are sorted by one scalar input; dynamic
programming over the sorted points (`segment`) splits them into segments,
one candidate form per segment, with the least total bits of error, where
each split costs `PENALTY` bits per point (a split must save that much on
average, so it never fits noise) and each segment holds at least
`MIN_POINTS` points.  Each scalar input is tried and the cheapest
segmentation wins.  A split between two neighbouring sample values is then
refined by bisection over the floats between them: at the midpoint, which of
the two forms is more accurate (against the exact reference, the other
inputs taken from the neighbouring points) says on which side the split
lies; the split point kept is the shortest decimal between the last two
values.  `switch_graph` writes the result as
``switch(x < s1, f1, switch(x < s2, f2, f3))``, one graph that every backend
evaluates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from relwrite.engine.explore.costs import Accuracy, _ordinals
from relwrite.graph import ops
from relwrite.graph.basic import Variable, constant

PENALTY = 1.0
"""Bits of error per sample point a split must save (Herbie: one bit per point)."""

MIN_POINTS = 4
"""The fewest sample points a segment holds (when there are several)."""

BISECTION_STEPS = 16
"""The most midpoints a split point's bisection evaluates."""

NEIGHBOURS = 8
"""Sample points on each side of a split whose other inputs the bisection evaluates the forms at."""


@dataclass(frozen=True)
class Segmentation:
    """Sorted points cut into segments: segment k is points `starts[k]` up to the next start (or the end),
    computed by candidate `choices[k]`; `cost` the total bits of error plus the penalties."""

    choices: tuple[int, ...]
    starts: tuple[int, ...]
    cost: float


def segment(
    errors: np.ndarray,
    splittable: np.ndarray | None = None,
    penalty: float = 0.0,
    min_points: int = 1,
) -> Segmentation:
    """The segmentation of points (in order) with the least total error plus `penalty` per split.

    `errors[c, i]` is candidate c's error at point i; `splittable[i]` (length
    points + 1) says whether a segment may start at point i (a split between
    equal values could not be written as a comparison); every segment of
    several holds at least `min_points` points.  Exact: dynamic programming
    over the prefixes, O(points² · candidates).
    """
    errors = np.asarray(errors, dtype=np.float64)
    if errors.ndim != 2 or errors.shape[0] == 0 or errors.shape[1] == 0:
        raise ValueError(
            f"errors must be a (candidates, points) array with both non-empty, got {errors.shape}"
        )
    if min_points < 1:
        raise ValueError(f"min_points must be at least 1, got {min_points}")
    n = errors.shape[1]
    allowed = np.ones(n + 1, dtype=bool) if splittable is None else np.asarray(splittable, dtype=bool)
    if allowed.shape != (n + 1,):
        raise ValueError(f"splittable must have points + 1 = {n + 1} entries, got {allowed.shape}")
    sums = np.concatenate([np.zeros((errors.shape[0], 1)), np.cumsum(errors, axis=1)], axis=1)
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    previous = np.zeros(n + 1, dtype=np.int64)
    choice = np.zeros(n + 1, dtype=np.int64)
    starts = np.flatnonzero(allowed)
    for j in range(min(min_points, n), n + 1):
        inner = starts[(starts >= min_points) & (starts <= j - min_points)]
        if j >= min_points or j == n:
            inner = np.concatenate([[0], inner])
        if not inner.size:
            continue
        segment_errors = sums[:, j, None] - sums[:, inner]
        winners = segment_errors.argmin(axis=0)
        totals = (
            best[inner] + np.where(inner > 0, penalty, 0.0) + segment_errors[winners, np.arange(inner.size)]
        )
        k = int(np.argmin(totals))
        best[j], previous[j], choice[j] = totals[k], inner[k], winners[k]
    cuts, picks, j = [], [], n
    while j > 0:
        cuts.append(int(previous[j]))
        picks.append(int(choice[j]))
        j = int(previous[j])
    cuts.reverse()
    picks.reverse()
    merged_choices, merged_starts = [picks[0]], [cuts[0]]
    for start, pick in zip(cuts[1:], picks[1:]):  # neighbours computed alike are one segment
        if pick != merged_choices[-1]:
            merged_choices.append(pick)
            merged_starts.append(start)
    saved = penalty * (len(picks) - len(merged_choices))
    return Segmentation(tuple(merged_choices), tuple(merged_starts), float(best[n] - saved))


@dataclass(frozen=True)
class Split:
    """Regimes found: `choices[k]` (a candidate's index) computes where `splits[k-1] <= variable <
    splits[k]`; `bits` the mean bits of error of the joined form over the sample."""

    variable: Variable
    splits: tuple[float, ...]
    choices: tuple[int, ...]
    bits: float


@dataclass(frozen=True)
class Regimes:
    """How a piecewise form is made: `branches[k]` (a `Form`) computes where `splits[k-1] <= variable <
    splits[k]`."""

    variable: str
    splits: tuple[float, ...]
    branches: tuple[Any, ...]

    def ranges(self) -> list[str]:
        """Each branch's range of the variable, as text (``x < 1.5``, ``1.5 <= x < 3.0``, ``x >= 3.0``)."""
        v, edges = self.variable, [repr(float(s)) for s in self.splits]
        if not edges:
            return ["everywhere"]
        middle = [f"{low} <= {v} < {high}" for low, high in pairwise(edges)]
        return [f"{v} < {edges[0]}", *middle, f"{v} >= {edges[-1]}"]

    def __str__(self) -> str:
        pieces = [f"{where}: {branch.derivation}" for where, branch in zip(self.ranges(), self.branches)]
        return f"regimes on {self.variable}: " + " | ".join(pieces)

    def to_dict(self) -> dict:
        """Plain data (for JSON): the variable, the split points and each branch's range and derivation."""
        return {
            "variable": self.variable,
            "splits": list(self.splits),
            "branches": [
                {"range": where, "derivation": branch.derivation}
                for where, branch in zip(self.ranges(), self.branches)
            ],
        }


def infer_regimes(
    accuracy: Accuracy,
    candidates: Sequence[Variable],
    penalty: float = PENALTY,
    min_points: int = MIN_POINTS,
) -> Split | None:
    """The regimes of `candidates` (forms of `accuracy`'s expression) most accurate over its sample, or None
    where one candidate alone is best.  Splits only scalar inputs (ValueError when there is none)."""
    variables = [k for k, v in enumerate(accuracy.inputs) if v.type.ndim == 0]
    if not variables:
        names = ", ".join(v.name or str(v) for v in accuracy.inputs)
        raise ValueError(
            f"regimes split the range of a scalar input; {names} are not scalars "
            "(splitting inputs element by element is out of scope)"
        )
    if not candidates:
        raise ValueError("regimes need at least one candidate form")
    errors = np.stack([accuracy.point_errors(c) for c in candidates])
    points = errors.shape[1]
    found: tuple[float, int, np.ndarray, Segmentation] | None = None
    for k in variables:
        values = accuracy.points[k]
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        splittable = np.concatenate([[True], ordered[1:] > ordered[:-1], [True]])
        cut = segment(errors[:, order], splittable, penalty * points, min_points)
        if found is None or cut.cost < found[0]:
            found = (cut.cost, k, order, cut)
    assert found is not None
    _, k, order, cut = found
    if len(cut.choices) == 1:
        return None
    variable = accuracy.inputs[k]
    splits = []
    for left, right, start in zip(cut.choices, cut.choices[1:], cut.starts[1:]):
        splits.append(_refined(accuracy, k, order, start, candidates[left], candidates[right]))
    joined = switch_graph(variable, splits, [candidates[c] for c in cut.choices])
    return Split(variable, tuple(splits), cut.choices, float(accuracy(joined)))


def switch_graph(variable: Variable, splits: Sequence[float], branches: Sequence[Variable]) -> Variable:
    """``switch(variable < splits[0], branches[0], switch(variable < splits[1], branches[1], ...))``."""
    if len(branches) != len(splits) + 1:
        raise ValueError(f"{len(splits)} split points need {len(splits) + 1} branches, got {len(branches)}")
    joined = branches[-1]
    for split, branch in zip(reversed(splits), reversed(branches[:-1])):
        bound = constant(np.asarray(split, dtype=variable.type.numpy_dtype))
        joined = ops.switch(ops.lt(variable, bound), branch, joined)
    return joined


def _refined(
    accuracy: Accuracy, k: int, order: np.ndarray, start: int, left: Variable, right: Variable
) -> float:
    """The split point between sample values `low` (the last of the left segment, sorted by input `k`)
    and `high` (the first of the right one): bisection on which of `left` and `right` is more accurate,
    then the shortest decimal in (low, high] (near the midpoint where both are as accurate, if one is)."""
    values = accuracy.points[k]
    dtype = values.dtype
    low, high = values[order[start - 1]], values[order[start]]
    near = order[max(start - NEIGHBOURS, 0) : start + NEIGHBOURS]
    close = 1 << max(np.finfo(dtype).nmant - 4, 0)  # a sixteenth of a binade: past it, pick a short decimal
    for _ in range(BISECTION_STEPS):
        ends = _ordinals(np.array([low, high], dtype=dtype))
        if int(ends[1]) - int(ends[0]) <= close:
            break
        centre = (int(ends[0]) + int(ends[1])) // 2
        middle = _from_ordinal(centre, dtype)
        points = [
            np.full(len(near), middle, dtype=dtype) if j == k else p[near]
            for j, p in enumerate(accuracy.points)
        ]
        if all(p.ndim == 1 for p in points):  # scalar inputs: each distinct point once
            points = list(np.unique(np.stack(points, axis=1), axis=0).T)
        nearby = accuracy.at(points)
        if not len(nearby.reference):
            break
        difference = float(np.mean(nearby.point_errors(left)) - np.mean(nearby.point_errors(right)))
        if difference < 0:
            low = middle
        elif difference > 0:
            high = middle
        else:  # as accurate as each other there: split near it
            low = _from_ordinal(max(int(ends[0]), centre - close), dtype)
            high = _from_ordinal(min(centre + close, int(ends[1])), dtype)
            break
    return _shortest_between(low, high)


def _from_ordinal(ordinal: int, dtype: np.dtype) -> np.floating:
    """The float of `dtype` whose ordinal (`costs._ordinals`) is `ordinal`."""
    width = dtype.itemsize * 8
    bits = abs(ordinal) | ((1 << (width - 1)) if ordinal < 0 else 0)
    unsigned = np.uint64 if width == 64 else np.uint32
    return np.array([bits], dtype=unsigned).view(dtype)[0]


def _shortest_between(low: np.floating, high: np.floating) -> float:
    """A number of `low`'s float type in (low, high] with the fewest significant decimal digits: 0 when
    the interval holds it, else the first of high and the midpoint rounded to 1, 2, ... digits inside."""
    kind = type(low)
    if low < 0 <= high:
        return 0.0
    middle = kind(low / 2 + high / 2)
    for digits in range(1, 18):
        for value in (middle, high):
            rounded = kind(float(f"{float(value):.{digits - 1}e}"))
            if low < rounded <= high:
                return float(rounded)
    return float(high)

"""Tensor types: a numpy dtype plus a static shape whose entries are ints or None."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from contextlib import suppress
from functools import cache
from typing import Any

import numpy as np

Shape = tuple[int | None, ...]


def _dtype_name(dtype: Any) -> str:
    """The canonical name of a supported dtype (cached: numpy's dtype names are slow to compute)."""
    try:
        return _DTYPE_NAMES[dtype]
    except (KeyError, TypeError):
        pass
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"TensorType: {dtype!r} is not a numpy dtype") from exc
    if dt.kind not in "biuf":
        raise TypeError(f"TensorType: dtype {dt.name} is not supported (bool, int, uint, float only)")
    with suppress(TypeError):  # unhashable dtype specs are just not cached
        _DTYPE_NAMES[dtype] = dt.name
    return dt.name


_DTYPE_NAMES: dict[Any, str] = {}


def _normalize_shape(shape: Iterable[int | None]) -> Shape:
    out = []
    for dim in shape:
        if dim is None:
            out.append(None)
        elif isinstance(dim, (int, np.integer)) and not isinstance(dim, bool) and dim >= 0:
            out.append(int(dim))
        else:
            raise ValueError(f"shape entries must be non-negative ints or None, got {dim!r}")
    return tuple(out)


class TensorType:
    """The type of an array: its dtype and a static shape (`None` = unknown length).

    Instances are immutable, hashable and equal by (dtype, shape).  Calling a
    type makes a fresh input variable of that type: ``TensorType("float64", (None,))("x")``
    (attached by `relwrite.graph.basic`, which defines Variable on top of types).
    """

    __slots__ = ("_hash", "dtype", "shape")

    def __init__(self, dtype: Any, shape: Iterable[int | None] = ()):
        object.__setattr__(self, "dtype", _dtype_name(dtype))
        object.__setattr__(self, "shape", _normalize_shape(shape))
        object.__setattr__(self, "_hash", hash((TensorType, self.dtype, self.shape)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TensorType is immutable")

    def __reduce__(self) -> tuple:
        return TensorType, (self.dtype, self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def __eq__(self, other: object) -> bool:
        return type(other) is TensorType and self.dtype == other.dtype and self.shape == other.shape

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"TensorType({self.dtype}, {self.shape})"

    def clone(self, dtype: Any = None, shape: Iterable[int | None] | None = None) -> TensorType:
        return TensorType(self.dtype if dtype is None else dtype, self.shape if shape is None else shape)

    def is_super(self, other: TensorType) -> bool:
        """True when every value of type `other` is also a value of this type."""
        return (
            isinstance(other, TensorType)
            and self.dtype == other.dtype
            and self.ndim == other.ndim
            and all(s is None or s == o for s, o in zip(self.shape, other.shape))
        )

    def is_compatible(self, other: TensorType) -> bool:
        """True when some value has both types (same dtype and rank, no clashing lengths)."""
        return (
            isinstance(other, TensorType)
            and self.dtype == other.dtype
            and self.ndim == other.ndim
            and all(s is None or o is None or s == o for s, o in zip(self.shape, other.shape))
        )

    def value_error(self, value: Any) -> str | None:
        """Why `value` (already an ndarray) is not of this type, or None when it is."""
        if value.dtype != self.numpy_dtype:
            return f"expected dtype {self.dtype}, got {value.dtype.name}"
        if value.ndim != self.ndim:
            return f"expected {self.ndim} dimension(s), got {value.ndim} (shape {value.shape})"
        for axis, (want, got) in enumerate(zip(self.shape, value.shape)):
            if want is not None and want != got:
                return f"expected length {want} on axis {axis}, got shape {value.shape}"
        return None


def fits(small: Shape, big: Shape) -> bool:
    """Whether static shapes prove `small` never enlarges `big` when the two broadcast.

    True when `small` has no more dimensions and each of its lengths is 1 or
    a known length equal to `big`'s; unknown lengths prove nothing.
    """
    if len(small) > len(big):
        return False
    return all(s == 1 or (s is not None and s == b) for s, b in zip(reversed(small), reversed(big)))


def broadcast_shapes(*shapes: Shape, op_name: object = "broadcast") -> Shape:
    """Static numpy broadcasting; raises TypeError (naming `op_name`) on lengths that can never broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out: list[int | None] = []
    for axis, dims in enumerate(zip(*padded)):
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise TypeError(f"{op_name}: shapes {', '.join(map(str, shapes))} cannot broadcast (axis {axis})")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def upcast(*dtypes: Any) -> str:
    """The dtype numpy gives to an expression mixing arrays of these dtypes."""
    return np.result_type(*[np.dtype(d) for d in dtypes]).name


class LiteralOverflowError(OverflowError, ValueError):
    """A Python number too large for the dtype it takes in a graph (NumPy 2 raises OverflowError too)."""


def describe_literal(value: bool | int | float) -> str:
    """`value` as text for an error message, long integers shortened to their first digits and size."""
    text = repr(value)
    if isinstance(value, int) and len(text) > 24:
        return f"{text[:12]}... ({len(text.lstrip('-'))} digits)"
    return text


def dtype_of_python_scalar(value: bool | int | float, others: Sequence[str], exact_ints: bool = False) -> str:
    """The dtype a Python scalar takes next to arrays of `others`: NumPy 2's weak-scalar rule (NEP 50).

    Next to arrays the scalar takes the dtype ``np.result_type(*others, value)``
    gives: an int keeps an integer operand's dtype and becomes a float operand's
    dtype, a float keeps a float operand's dtype and is float64 next to integers.
    Alone it takes NumPy's default (bool, int64, float64).  A value the dtype
    cannot hold raises LiteralOverflowError naming the value and the dtype, as
    NumPy 2 does, never wraps or silently widens; a finite float that would
    become inf counts as not held.  With `exact_ints` (comparisons, which NumPy 2
    evaluates exactly for out-of-range ints) an int that the operands' integer
    dtype cannot hold takes int64 instead, when int64 can.
    """
    kind = bool if isinstance(value, bool) else int if isinstance(value, int) else float
    dtype = _weak_result_type(tuple(others), kind) if others else np.dtype(_DEFAULT_SCALAR_DTYPES[kind])
    if kind is bool:
        return dtype.name
    named = f"the Python {'integer' if kind is int else 'float'} {describe_literal(value)}"
    context = f"next to {_listed(others)} operands" if others else "with no array operand"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if info.min <= value <= info.max:
            return dtype.name
        if exact_ints and _INT64.min <= value <= _INT64.max:
            return "int64"
        raise LiteralOverflowError(
            f"{named} is out of bounds for {dtype.name}, the dtype it takes {context} ({_RULE}); "
            "give it a float operand or write it as a float"
        )
    try:
        converted = float(value)
    except OverflowError:
        converted = math.inf
    if math.isfinite(converted):
        with np.errstate(over="ignore"):
            converted = float(dtype.type(converted))
    if math.isinf(converted) and not (kind is float and math.isinf(value)):
        raise LiteralOverflowError(f"{named} overflows {dtype.name}, the dtype it takes {context} ({_RULE})")
    return dtype.name


_RULE = "NumPy 2's rule for Python scalars"


def _listed(dtypes: Sequence[str]) -> str:
    return ", ".join(dict.fromkeys(dtypes))


_DEFAULT_SCALAR_DTYPES = {bool: "bool", int: "int64", float: "float64"}
_INT64 = np.iinfo(np.int64)


@cache
def _weak_result_type(others: tuple[str, ...], kind: type) -> np.dtype:
    """numpy's dtype for arrays of `others` combined with a Python scalar of type `kind` (NEP 50)."""
    return np.result_type(*[np.dtype(d) for d in others], kind(0))


# Short names for the common ranks, used by constructors and the text front end.
RANK_NAMES: dict[str, int] = {"scalar": 0, "vector": 1, "matrix": 2, "tensor3": 3, "tensor4": 4}

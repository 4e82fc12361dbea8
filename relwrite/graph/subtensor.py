"""Indexing: `x[1:, i]` (Subtensor), `x[idx_array]` (AdvancedSubtensor), `inc_subtensor`, `set_subtensor`.

An index is kept as a static *pattern* (a tuple with one entry per index
item) plus the graph inputs that fill it, so that bounds can be symbolic and
equal indices merge:

- ``"int"``: a scalar integer input (an axis taken away);
- ``("slice", has_start, has_stop, has_step)``: a slice, each bound present
  (an input) or absent (`None` in Python's sense);
- ``"newaxis"``: a new length-1 axis (`None` in NumPy's sense);
- ``"array"``: an integer array input (advanced indexing, NumPy's rules:
  the broadcast index arrays' axes replace the indexed axes where those
  indices are adjacent, and come first when they are not).

Literal bounds are integer constants, so static shapes follow them: a
constant index beyond a known length is an IndexError here, naming the
index, not at run time.  Boolean masks are refused (their result's length is
not a function of the types): index with an integer array instead.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from relwrite.graph.basic import Apply, Constant, Op, Variable, as_variable, constant
from relwrite.graph.types import TensorType, broadcast_shapes

INT = "int"
ARRAY = "array"
NEWAXIS = "newaxis"

Pattern = tuple[Any, ...]


def index_of(pattern: Pattern, scalar: Callable[[Any], Any] = int) -> Callable[[Sequence[Any]], tuple]:
    """A function from the index inputs' values (ints, or integer arrays for ARRAY entries) to the
    Python index `pattern` stands for: what every backend indexes with (`scalar` reads an int or a
    slice bound: a bridge passes its symbolic ones through)."""

    def build(values: Sequence[Any]) -> tuple:
        items, given = [], iter(values)
        for entry in pattern:
            if entry == NEWAXIS:
                items.append(None)
            elif entry == INT:
                items.append(scalar(next(given)))
            elif entry == ARRAY:
                items.append(next(given))
            else:
                items.append(slice(*(scalar(next(given)) if has else None for has in entry[1:])))
        return tuple(items)

    return build


def _is_slice_entry(entry: Any) -> bool:
    return isinstance(entry, tuple) and len(entry) == 4 and entry[0] == "slice"


def _inputs_taken(entry: Any) -> int:
    """How many graph inputs one pattern entry reads."""
    if _is_slice_entry(entry):
        return builtins.sum(bool(b) for b in entry[1:])
    return 1 if entry in (INT, ARRAY) else 0


def _check_pattern(owner: str, pattern: Any) -> Pattern:
    if not isinstance(pattern, tuple):
        raise TypeError(f"{owner}: the index pattern must be a tuple, got {pattern!r}")
    for entry in pattern:
        ok = entry in (INT, ARRAY, NEWAXIS) or (
            _is_slice_entry(entry) and all(isinstance(b, bool) for b in entry[1:])
        )
        if not ok:
            raise TypeError(f"{owner}: {entry!r} is not an index pattern entry")
    return pattern


def _known_int(var: Variable) -> int | None:
    """The value of a constant scalar integer, else None."""
    if isinstance(var, Constant) and var.ndim == 0:
        return int(var.data)
    return None


def _describe_index(var: Variable) -> str:
    value = _known_int(var)
    return str(value) if value is not None else str(var)


def _slice_length(
    length: int | None, bounds: tuple[Variable | None, ...], op: Op, inputs: Sequence[Variable]
) -> int | None:
    """The static length of `slice(*bounds)` over an axis of `length`, when the types settle it."""
    step = bounds[2]
    values = [None if b is None else _known_int(b) for b in bounds]
    if step is not None and values[2] == 0:
        raise ValueError(
            f"{op}: slice step cannot be zero (inputs: {', '.join(str(v.type) for v in inputs)})"
        )
    if any(b is not None and v is None for b, v in zip(bounds, values)):
        return None  # a symbolic bound
    if length is None:
        return None
    return len(range(*slice(*values).indices(length)))


class _Indexed(Op):
    """What Subtensor, AdvancedSubtensor and IncSubtensor share: the pattern and its reading."""

    def split_inputs(self, index_inputs: Sequence[Variable]) -> list[tuple[Any, list[Variable]]]:
        """Each pattern entry with the inputs it reads."""
        items, k = [], 0
        for entry in self.idx_list:
            n = _inputs_taken(entry)
            items.append((entry, list(index_inputs[k : k + n])))
            k += n
        return items

    def check_index_inputs(
        self, x: Variable, index_inputs: Sequence[Variable], inputs: Sequence[Variable]
    ) -> None:
        expected = builtins.sum(_inputs_taken(e) for e in self.idx_list)
        if len(index_inputs) != expected:
            raise self.type_error(
                inputs, f"the index pattern reads {expected} input(s), got {len(index_inputs)}"
            )
        for entry, items in self.split_inputs(index_inputs):
            for var in items:
                integer = np.issubdtype(np.dtype(var.dtype), np.integer)
                if entry == ARRAY:
                    if var.dtype == "bool":
                        raise self.type_error(
                            inputs, f"boolean mask {var} is not supported: index with an integer array"
                        )
                    if not integer or var.ndim == 0:
                        raise self.type_error(inputs, f"index {var} must be an integer array")
                elif not integer or var.ndim != 0:
                    raise self.type_error(inputs, f"index {var} must be a scalar integer")
        consumed = builtins.sum(1 for e in self.idx_list if e != NEWAXIS)
        if consumed > x.ndim:
            raise self.type_error(inputs, f"too many indices ({consumed}) for {x.ndim} dimension(s)")

    def indexed_shape(
        self, x: Variable, index_inputs: Sequence[Variable], inputs: Sequence[Variable]
    ) -> tuple:
        """The static shape of `x[index]`, with NumPy's placement of advanced-index axes."""
        self.check_index_inputs(x, index_inputs, inputs)
        items = self.split_inputs(index_inputs)
        advanced = ARRAY in self.idx_list
        basic: list[int | None] = []
        advanced_shapes: list[tuple] = []
        advanced_positions: list[int] = []
        axis = 0
        for position, (entry, args) in enumerate(items):
            if entry == NEWAXIS:
                basic.append(1)
                continue
            length = x.type.shape[axis]
            if entry == INT:
                value = _known_int(args[0])
                if value is not None and length is not None and not -length <= value < length:
                    raise IndexError(
                        f"{self}: index {_describe_index(args[0])} is out of bounds for axis {axis} "
                        f"with length {length} (input {x})"
                    )
                if advanced:
                    advanced_shapes.append(())
                    advanced_positions.append(position)
            elif entry == ARRAY:
                advanced_shapes.append(args[0].type.shape)
                advanced_positions.append(position)
            else:
                present = iter(args)
                bounds = tuple(next(present) if has else None for has in entry[1:])
                basic.append(_slice_length(length, bounds, self, inputs))
            if entry != NEWAXIS:
                axis += 1
            if advanced and entry in (INT, ARRAY) and len(advanced_positions) == 1:
                first_basic = len(basic)  # where the advanced block goes when the indices are adjacent
        basic.extend(x.type.shape[axis:])
        if not advanced:
            return tuple(basic)
        block = broadcast_shapes(*advanced_shapes, op_name=str(self))
        adjacent = advanced_positions == list(range(advanced_positions[0], advanced_positions[-1] + 1))
        at = first_basic if adjacent else 0
        return (*basic[:at], *block, *basic[at:])


def _subtensor_str(name: str, pattern: Pattern) -> str:
    parts = []
    for entry in pattern:
        if entry == NEWAXIS:
            parts.append("newaxis")
        elif entry in (INT, ARRAY):
            parts.append(entry)
        else:
            start, stop, step = ("*" if has else "" for has in entry[1:])
            parts.append(f"{start}:{stop}" + (f":{step}" if step else ""))
    return f"{name}{{{', '.join(parts)}}}"


class Subtensor(_Indexed):
    """Basic indexing, `x[pattern]` read from `(x, *index inputs)`: a view of `x`."""

    __props__ = ("idx_list",)

    def __init__(self, idx_list: Pattern):
        pattern = _check_pattern("Subtensor", idx_list)
        if ARRAY in pattern:
            raise TypeError("Subtensor: an integer array index is AdvancedSubtensor's")
        super().__init__(idx_list=pattern)

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = [as_variable(v) for v in inputs]
        if not inputs:
            raise self.type_error(inputs, "takes the indexed array first")
        x, *index = inputs
        shape = self.indexed_shape(x, index, inputs)
        return Apply(self, inputs, [Variable(TensorType(x.dtype, shape))])

    def __str__(self) -> str:
        return _subtensor_str("Subtensor", self.idx_list)


class AdvancedSubtensor(_Indexed):
    """Integer array indexing (with ints, slices and new axes beside), `x[pattern]`: a new array."""

    __props__ = ("idx_list",)

    def __init__(self, idx_list: Pattern):
        pattern = _check_pattern("AdvancedSubtensor", idx_list)
        if ARRAY not in pattern:
            raise TypeError("AdvancedSubtensor: the pattern has no integer array (that is Subtensor's)")
        super().__init__(idx_list=pattern)

    make_node = Subtensor.make_node

    def __str__(self) -> str:
        return _subtensor_str("AdvancedSubtensor", self.idx_list)


class IncSubtensor(_Indexed):
    """`x` with `x[pattern]` increased by `y` (or set to `y`), read from `(x, y, *index inputs)`.

    `y` broadcasts to the indexed part's shape and casts to `x`'s dtype
    (same kind only).  With integer arrays and repeated indices, increments
    accumulate (as `numpy.add.at`); a set keeps the last value.
    """

    __props__ = ("idx_list", "set_instead_of_inc")

    def __init__(self, idx_list: Pattern, set_instead_of_inc: bool = False):
        pattern = _check_pattern("IncSubtensor", idx_list)
        if not isinstance(set_instead_of_inc, bool):
            raise TypeError(f"IncSubtensor: set_instead_of_inc must be a bool, got {set_instead_of_inc!r}")
        super().__init__(idx_list=pattern, set_instead_of_inc=set_instead_of_inc)

    @property
    def name(self) -> str:
        return "set_subtensor" if self.set_instead_of_inc else "inc_subtensor"

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = [as_variable(v) for v in inputs]
        if len(inputs) < 2:
            raise self.type_error(inputs, "takes the array, the value, then the index inputs")
        x, y, *index = inputs
        part = self.indexed_shape(x, index, inputs)
        if y.ndim > len(part):
            raise self.type_error(inputs, f"value {y} has more dimensions than the indexed part {part}")
        for have, want in zip(reversed(y.type.shape), reversed(part)):
            if have is not None and have != 1 and want is not None and have != want:
                raise self.type_error(inputs, f"value {y} of shape {y.type.shape} cannot broadcast to {part}")
        if not np.can_cast(np.dtype(y.dtype), np.dtype(x.dtype), "same_kind"):
            raise self.type_error(inputs, f"value {y} ({y.dtype}) cannot be cast to the array's {x.dtype}")
        return Apply(self, inputs, [Variable(x.type)])

    def __str__(self) -> str:
        return _subtensor_str("SetSubtensor" if self.set_instead_of_inc else "IncSubtensor", self.idx_list)


# -- building indices ------------------------------------------------------------------------------------


def _index_input(value: Any, what: str) -> Variable:
    if isinstance(value, Variable):
        return value
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"indexing: {what} {value!r} is a bool; use an integer")
    if isinstance(value, (int, np.integer)):
        return constant(int(value), dtype="int64")
    raise TypeError(f"indexing: {what} {value!r} is not an integer or a graph variable")


def split_index(x: Variable, key: Any) -> tuple[Pattern, list[Variable]]:
    """A Python index (what `x[key]` receives) as a pattern and its inputs; Ellipsis expanded."""
    items = list(key) if isinstance(key, tuple) else [key]
    if builtins.sum(item is Ellipsis for item in items) > 1:
        raise IndexError("indexing: an index can only have a single ellipsis ('...')")
    if any(item is Ellipsis for item in items):
        at = next(k for k, i in enumerate(items) if i is Ellipsis)
        used = builtins.sum(1 for i in items if i is not None and i is not Ellipsis)
        items[at : at + 1] = [slice(None)] * builtins.max(x.ndim - used, 0)
    pattern: list[Any] = []
    inputs: list[Variable] = []
    for item in items:
        if item is None:
            pattern.append(NEWAXIS)
        elif isinstance(item, slice):
            bounds = (item.start, item.stop, item.step)
            pattern.append(("slice", *(b is not None for b in bounds)))
            names = ("slice start", "slice stop", "slice step")
            inputs.extend(_index_input(b, n) for b, n in zip(bounds, names) if b is not None)
        elif isinstance(item, (list, np.ndarray)) or (isinstance(item, Variable) and item.ndim > 0):
            var = item if isinstance(item, Variable) else constant(np.asarray(item))
            if var.dtype == "bool":
                raise TypeError(f"indexing: boolean mask {var} is not supported; index with an integer array")
            if not np.issubdtype(np.dtype(var.dtype), np.integer):
                raise TypeError(f"indexing: index array {var} must hold integers, not {var.dtype}")
            pattern.append(ARRAY)
            inputs.append(var)
        else:
            pattern.append(INT)
            inputs.append(_index_input(item, "index"))
    return tuple(pattern), inputs


def subtensor(x: Any, key: Any) -> Variable:
    """`x[key]`: basic indexing (Subtensor) or, with integer arrays, AdvancedSubtensor."""
    x = as_variable(x)
    if isinstance(key, tuple) and not key:  # x[()] is x
        return x
    pattern, inputs = split_index(x, key)
    kind = AdvancedSubtensor if ARRAY in pattern else Subtensor
    return kind(pattern)(x, *inputs)


def _indexed_parts(part: Variable, function: str) -> tuple[Variable, Pattern, list[Variable]]:
    """The array, pattern and index inputs of `part`, which must be an indexing result `x[...]`."""
    owner = part.owner if isinstance(part, Variable) else None
    if owner is None or not isinstance(owner.op, (Subtensor, AdvancedSubtensor)):
        raise TypeError(f"{function}: the first argument must be an indexed array such as x[1:], got {part}")
    return owner.inputs[0], owner.op.idx_list, owner.inputs[1:]


def inc_subtensor(part: Variable, value: Any) -> Variable:
    """`x` with the part `x[idx]` (the first argument) increased by `value`."""
    x, pattern, index = _indexed_parts(part, "inc_subtensor")
    return IncSubtensor(pattern)(x, as_variable(value, [x.dtype]), *index)


def set_subtensor(part: Variable, value: Any) -> Variable:
    """`x` with the part `x[idx]` (the first argument) replaced by `value`."""
    x, pattern, index = _indexed_parts(part, "set_subtensor")
    return IncSubtensor(pattern, set_instead_of_inc=True)(x, as_variable(value, [x.dtype]), *index)

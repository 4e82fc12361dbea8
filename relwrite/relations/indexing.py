"""Indexing rules: whole subtensors go, indexing moves below elementwise ops, indexings merge, writes
simplify.

`useless_subtensor`: ``x[:, ::1] -> x`` (every axis taken whole, none
added); backward it writes `x` as ``x[:, :]``; `useless_slice` omits the
slice bounds that change nothing (``x[0:] -> x``, ``m[1, :] -> m[1]``).
`subtensor_lift`:
``f(x, 2.0)[i] -> f(x[i], 2.0)``, Aesara's local_subtensor_lift (compute
only the part that is read); backward it gathers the indexing again.  An
operand is indexed like the result only when it provably has the result's
shape (the one array operand, or static lengths all equal): an operand that
broadcasts would need its own index.  `subtensor_merge`: ``x[1:][2:] ->
x[3:]``, ``x[::-1][2:][1] -> x[-4]`` for literal indices; `subtensor_of_alloc`:
``alloc(c, 4, 3)[1:, 0] -> alloc(c, 3)``.  Writes (`inc_subtensor`,
`set_subtensor`): of the whole array (`useless_inc_subtensor`), read back at
the same index (`read_of_write`), into zeros, of zeros, of the value already
there, of an alloc.  Rules that drop a write or an index may give a value
where the original raises (an index out of bounds, a value that does not
broadcast): rule-safety.md's refinement.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.subtensor import ARRAY, INT, NEWAXIS, IncSubtensor, Subtensor
from relwrite.graph.types import TensorType
from relwrite.relations.registry import CANON, rule
from relwrite.relations.runtime import Computed

SUBTENSOR = (*CANON, "specialize")  # the phases PyTensor runs its indexing rewrites in
FULL = ("slice", False, False, False)


def _takes_everything(idx: tuple, index: tuple) -> bool:
    """Whether every pattern entry is a whole axis: `:`, or `::1` with a constant step of one."""
    steps = iter(index)
    for entry in idx:
        if not isinstance(entry, tuple) or entry[1] or entry[2]:
            return False
        if entry[3]:
            step = next(steps)
            if not (isinstance(step, Constant) and step.ndim == 0 and int(step.data) == 1):
                return False
    return True


def whole(idx: tuple, x: Variable, index: tuple) -> Variable | None:
    """`x` itself when the index `idx` (its inputs `index`) takes every axis whole, else None."""
    return x if _takes_everything(idx, index) else None


def written_whole(whole: Variable) -> list[dict]:
    """The preimage of `whole`: `whole` as `whole[:, ..., :]` (one whole slice per axis)."""
    if whole.ndim == 0:
        return []
    return [{"idx": (FULL,) * whole.ndim, "x": whole, "index": ()}]


# the right side is x itself: a computed value, so that its inverse writes x as x[:, ..., :]
useless_subtensor = rule(
    "useless_subtensor",
    (Subtensor.pattern(idx_list="idx"), "x", "*index"),
    "whole",
    CANON,
    keeps_type=True,
    compute={"whole": Computed(whole, inverse=written_whole)},
    examples=("x[:]", "m[:, ::1]"),
    types={"x": "vector", "m": "matrix"},
    doc="x[:, ::1] -> x: indexing that takes every axis whole is the array itself. Exact.",
)


def _canonical_slice(bounds: list[Variable | None], n: int | None) -> list[Variable | None]:
    """The bounds of one slice with those that change nothing omitted: a step of 1, a start at the first
    position taken anyway, a stop at or past the end (for a static length `n`)."""
    start, stop, step = bounds
    sign = 1 if step is None else _constant_int(step)
    if sign is None:  # a symbolic step: which end a bound clips at is unknown
        return bounds
    if sign == 1:
        step = None
    begin, end = _constant_int(start), _constant_int(stop)
    if begin is not None:  # forward: from 0, or from before it; backward: from -1, or past the end
        first = (
            begin == 0 or (n is not None and -begin >= n)
            if sign > 0
            else begin == -1 or (n is not None and begin >= n - 1)
        )
        start = None if first else start
    if end is not None and n is not None and (end >= n if sign > 0 else end < -n):
        stop = None
    return [start, stop, step]


def _canonical_index(idx: tuple, shape: tuple, index: tuple) -> tuple[tuple, list[Variable]] | None:
    """The index `idx` (inputs `index`, over an array of static `shape`) with every slice bound that
    changes nothing omitted and trailing whole slices dropped; None when that changes nothing (or the
    index holds an integer array: advanced indexing, whose slices are not read here)."""
    if ARRAY in idx:
        return None
    values = iter(index)
    entries: list[tuple[Any, list[Variable]]] = []
    axis = 0
    for entry in idx:
        if entry == NEWAXIS:
            entries.append((entry, []))
            continue
        if entry == INT:
            entries.append((entry, [next(values)]))
        else:
            bounds = [next(values) if has else None for has in entry[1:]]
            bounds = _canonical_slice(bounds, shape[axis])
            entries.append(
                (("slice", *(b is not None for b in bounds)), [b for b in bounds if b is not None])
            )
        axis += 1
    while entries and entries[-1][0] == FULL:
        entries.pop()
    new_idx = tuple(entry for entry, _ in entries)
    if new_idx == idx:
        return None
    return new_idx, [v for _, inputs in entries for v in inputs]


def sliced(idx: tuple, x: Variable, index: tuple) -> Variable | None:
    """`x[idx]` with the slice bounds that change nothing omitted, or `x` itself; None when nothing
    changes or every axis is taken whole as written (useless_subtensor's)."""
    if _takes_everything(idx, index):
        return None
    canonical = _canonical_index(idx, x.type.shape, index)
    if canonical is None:
        return None
    new_idx, new_index = canonical
    return Subtensor(new_idx)(x, *new_index) if new_idx else x


useless_slice = rule(
    "useless_slice",
    (Subtensor.pattern(idx_list="idx"), "x", "*index"),
    "sliced",
    SUBTENSOR,
    keeps_type=True,
    compute={"sliced": sliced},
    examples=("x[0:]", "m[1, :]", "s[:7]", "s[-9:]", "x[::-1][-1::-1]", "m[0:, 2::1]"),
    types={"x": "vector", "m": "matrix", "s": "(5,)"},
    doc="""x[0:] -> x, m[1, :] -> m[1], x[:7] -> x (a static length of at most 7): slice bounds that change
    nothing (a start at the first position, a stop at or past the end, a step of 1, for a negative step
    a start of -1) are omitted and trailing whole slices dropped (Aesara's local_useless_slice).
    Exact.""",
)


def sliced_write(idx: tuple, setting: bool, x: Variable, v: Variable, index: tuple) -> Variable | None:
    """The write `inc/set_subtensor(x[idx], v)` with the slice bounds that change nothing omitted."""
    canonical = _canonical_index(idx, x.type.shape, index)
    if canonical is None:
        return None
    new_idx, new_index = canonical
    return IncSubtensor(new_idx, setting)(x, v, *new_index)


useless_slice_write = rule(
    "useless_slice_write",
    (IncSubtensor.pattern(idx_list="idx", set_instead_of_inc="setting"), "x", "v", "*index"),
    "written",
    SUBTENSOR,
    keeps_type=True,
    compute={"written": sliced_write},
    examples=("set_subtensor(x[0:], v)", "inc_subtensor(m[1, :], v)", "inc_subtensor(s[:7:1], v)"),
    types={"x": "vector", "m": "matrix", "s": "(5,)", "v": "scalar"},
    doc="""set_subtensor(x[0:], v) -> set_subtensor(x[:], v): useless_slice for the index of a write.
    Exact.""",
)


def _whole_or_reversed(idx: tuple, index: tuple) -> bool:
    """Whether every entry is a slice without bounds but a literal step of 1 or -1 (`:`, `::-1`)."""
    steps = iter(index)
    for entry in idx:
        if not isinstance(entry, tuple) or entry[1] or entry[2]:
            return False
        if entry[3] and _constant_int(next(steps)) not in (1, -1):
            return False
    return True


def _as_dtype(v: Variable, dtype: str) -> Variable:
    return v if v.dtype == dtype else o.cast(v, dtype)


def _fits(shape: tuple, into: tuple) -> bool:
    """Whether static shapes prove that an array of `shape` broadcasts into one of shape `into` (so a
    write of it there cannot raise): each length 1, or known and equal."""
    return len(shape) <= len(into) and all(
        have == 1 or (have is not None and have == want)
        for have, want in zip(reversed(shape), reversed(into))
    )


def _checked_at_build(idx: tuple, shape: tuple, index: tuple) -> bool:
    """Whether indexing an array of static `shape` with `idx` cannot raise: slices never do, and each
    int index is a literal on an axis of static length (its bounds were checked when the graph was built)."""
    values, axis = iter(index), 0
    for entry in idx:
        if entry == NEWAXIS:
            continue
        if entry == INT:
            if _constant_int(next(values)) is None or shape[axis] is None:
                return False
        else:
            for _ in range(sum(entry[1:])):
                next(values)
        axis += 1
    return True


def _part(idx: tuple, x: Variable, index: tuple) -> Variable:
    return Subtensor(idx)(x, *index)


def whole_write(idx: tuple, setting: bool, x: Variable, v: Variable, index: tuple) -> Variable | None:
    """set_subtensor(x[:], v) -> v broadcast to x; inc_subtensor(x[:], v) -> x + v, both in x's dtype
    (reversed axes, `::-1`, reverse `v`); None unless every axis is written whole and v surely fits."""
    if not _whole_or_reversed(idx, index) or not _fits(v.type.shape, x.type.shape):
        return None
    reverses = any(entry[3] for entry in idx)
    if not setting and not reverses:  # x[:] += v adds in the promoted dtype and rounds once into x's
        return _as_dtype(o.add(x, v), x.dtype)
    whole = v if v.type.shape == x.type.shape else o.fill(x, v)
    if not reverses:
        return _as_dtype(whole, x.dtype)
    written = _part(idx, whole, index)  # x[::-1] = v writes v reversed
    return _as_dtype(written, x.dtype) if setting else _as_dtype(o.add(x, written), x.dtype)


useless_inc_subtensor = rule(
    "useless_inc_subtensor",
    (IncSubtensor.pattern(idx_list="idx", set_instead_of_inc="setting"), "x", "v", "*index"),
    "whole",
    SUBTENSOR,
    keeps_type=True,
    compute={"whole": whole_write},
    examples=(
        "set_subtensor(x[:], c)",
        "inc_subtensor(x[:], c)",
        "set_subtensor(s[:], y)",
        "set_subtensor(m[::-1], r)",
        "inc_subtensor(m[:, ::-1], c)",
    ),
    types={"x": "vector", "c": "scalar", "s": "(3,)", "y": "(3,)", "m": "matrix", "r": "(1, 1)"},
    doc="""set_subtensor(x[:], v) -> v (broadcast to x's shape), inc_subtensor(x[:], v) -> x + v: a write
    of the whole array, in x's dtype (Aesara's local_useless_inc_subtensor; `::-1` axes reverse v),
    where static shapes prove v broadcasts into x (the write cannot raise). Exact.""",
)


def read_back(idx: tuple, setting: bool, x: Variable, v: Variable, index: tuple) -> Variable | None:
    """What `x[idx]` holds after the write of `v` there: v broadcast to it, or x[idx] + v, in x's dtype;
    None unless static shapes prove v fits (the part is still read where its index may raise)."""
    part = _part(idx, x, index)
    if not _fits(v.type.shape, part.type.shape):
        return None
    if not setting:
        return _as_dtype(o.add(part, v), x.dtype)
    v = _as_dtype(v, x.dtype)
    if (
        v.type.shape == part.type.shape
        and None not in v.type.shape
        and _checked_at_build(idx, x.type.shape, index)
    ):
        return v
    return o.fill(part, v)


read_of_write = rule(
    "read_of_write",
    (
        Subtensor.pattern(idx_list="idx"),
        (IncSubtensor.pattern(idx_list="idx", set_instead_of_inc="setting"), "x", "v", "*index"),
        "*index",
    ),
    "read",
    SUBTENSOR,
    keeps_type=True,
    compute={"read": read_back},
    examples=(
        "set_subtensor(x[i], c)[i]",
        "set_subtensor(s[1:3], c)[1:3]",
        "set_subtensor(s[1:3], v)[1:3]",
        "inc_subtensor(x[2:-1], c)[2:-1]",
        "set_subtensor(m[0, ::-1], c)[0, ::-1]",
    ),
    types={"x": "vector", "s": "(4,)", "m": "matrix", "v": "(2,)", "c": "scalar", "i": "scalar:int64"},
    doc="""set_subtensor(x[i], v)[i] -> v, inc_subtensor(x[i], v)[i] -> x[i] + v: reading back what was
    just written at the same index (in x's dtype; Aesara's local_read_of_write_same_indices for basic
    indexing), where static shapes prove v fits the part. v is broadcast to the part, fill(x[i], v),
    unless static shapes and literal indices prove it has the part's shape in bounds. Exact.""",
)


def is_zeros(zero: Variable) -> bool:
    """Whether `zero` is a constant of zeros (either sign)."""
    return isinstance(zero, Constant) and zero.data.size > 0 and not np.any(zero.data)


_INC = IncSubtensor.pattern(idx_list="idx", set_instead_of_inc=False)
_SET = IncSubtensor.pattern(idx_list="idx", set_instead_of_inc=True)
_ZEROS_DOC = """inc_subtensor(zeros[i], v) -> set_subtensor(zeros[i], v): increments of an array of zeros
    ({what}) set instead (Aesara's local_incsubtensor_of_zeros_to_setsubtensor). Reassociates, as
    add_zero: where v holds -0.0, the increment gives +0.0."""

inc_of_filled_zeros_to_set = rule(
    "inc_of_filled_zeros_to_set",
    (_INC, (o.fill, "model", "zero"), "v", "*index"),
    (_SET, (o.fill, "model", "zero"), "v", "*index"),
    SUBTENSOR,
    semantics="reassociates",
    where=is_zeros,
    examples=("inc_subtensor(zeros_like(x)[1:], v)", "inc_subtensor(zeros_like(m)[0], x)"),
    types={"x": "vector", "m": "matrix", "v": "scalar"},
    doc=_ZEROS_DOC.format(what="zeros_like(x), fill(x, 0)"),
)

inc_of_alloc_zeros_to_set = rule(
    "inc_of_alloc_zeros_to_set",
    (_INC, (o.Alloc.pattern(shape="shape"), "zero"), "v", "*index"),
    (_SET, (o.Alloc.pattern(shape="shape"), "zero"), "v", "*index"),
    SUBTENSOR,
    semantics="reassociates",
    where=is_zeros,
    examples=("inc_subtensor(alloc(0.0, 4, 3)[1:, 0], v)",),
    types={"v": "scalar"},
    doc=_ZEROS_DOC.format(what="alloc(0, ...)"),
)


def adds_nothing(idx: tuple, x: Variable, zero: Variable, index: tuple) -> bool:
    """Whether `zero` is zeros that surely fit the part `x[idx]`, which cannot raise."""
    return (
        is_zeros(zero)
        and _checked_at_build(idx, x.type.shape, index)
        and _fits(zero.type.shape, _part(idx, x, index).type.shape)
    )


inc_subtensor_of_zeros = rule(
    "inc_subtensor_of_zeros",
    (_INC, "x", "zero", "*index"),
    "x",
    SUBTENSOR,
    semantics="reassociates",
    where=adds_nothing,
    examples=("inc_subtensor(x[1:], 0.0)", "inc_subtensor(s[0], 0)"),
    types={"x": "vector", "s": "(3, 2)"},
    doc="""inc_subtensor(x[i], 0) -> x: adding zeros changes nothing (Aesara's local_incsubtensor_of_zeros),
    where the index cannot raise (slices, literal ints at static lengths). Reassociates, as add_zero:
    -0.0 + 0 is +0.0.""",
)


def same_value_fits(idx: tuple, shape: tuple, c: Variable, index: tuple) -> bool:
    """Whether `c` is a scalar and indexing the filled array (static `shape`) cannot raise."""
    return c.ndim == 0 and _checked_at_build(idx, shape, index)


def same_value_fits_model(idx: tuple, model: Variable, c: Variable, index: tuple) -> bool:
    return same_value_fits(idx, model.type.shape, c, index)


_FILLED_DOC = """set_subtensor(alloc(c, ...)[i], c) -> alloc(c, ...): writing into an array filled with
    the scalar c the same c changes nothing (Aesara's local_setsubtensor_of_constants), where the
    index cannot raise (slices, literal ints at static lengths). Exact."""

set_of_alloc_same_value = rule(
    "set_of_alloc_same_value",
    (_SET, (o.Alloc.pattern(shape="shape"), "c"), "c", "*index"),
    (o.Alloc.pattern(shape="shape"), "c"),
    SUBTENSOR,
    where=same_value_fits,
    examples=("set_subtensor(alloc(c, 4, 3)[1:], c)", "set_subtensor(alloc(0.0, 5)[2], 0.0)"),
    types={"c": "scalar"},
    doc=_FILLED_DOC,
)

set_of_fill_same_value = rule(
    "set_of_fill_same_value",
    (_SET, (o.fill, "model", "c"), "c", "*index"),
    (o.fill, "model", "c"),
    SUBTENSOR,
    where=same_value_fits_model,
    keeps_type=True,
    examples=("set_subtensor(fill(x, c)[1:], c)", "set_subtensor(zeros_like(m)[0], 0.0)"),
    types={"c": "scalar", "x": "vector", "m": "(2, 3)"},
    doc=_FILLED_DOC.replace("alloc(c, ...)", "fill(x, c)"),
)


def alloc_fits(idx: tuple, x: Variable, shape: tuple, z: Variable, index: tuple) -> bool:
    """Whether the alloc's value `z` (static shape) and the alloc (static `shape`) surely fit the part
    `x[idx]`: neither the alloc nor the write can raise, with or without it."""
    return None not in z.type.shape and _fits(shape, _part(idx, x, index).type.shape)


write_of_alloc = rule(
    "write_of_alloc",
    (
        IncSubtensor.pattern(idx_list="idx", set_instead_of_inc="setting"),
        "x",
        (o.Alloc.pattern(shape="shape"), "z"),
        "*index",
    ),
    (IncSubtensor.pattern(idx_list="idx", set_instead_of_inc="setting"), "x", "z", "*index"),
    SUBTENSOR,
    where=alloc_fits,
    keeps_type=True,
    examples=("inc_subtensor(x[1:], alloc(c, 3))", "set_subtensor(m[1:3], alloc(y, 2, 4))"),
    types={"x": "(4,)", "c": "scalar", "m": "(5, 4)", "y": "(4,)"},
    doc="""inc_subtensor(x[i], alloc(z, ...)) -> inc_subtensor(x[i], z): the write broadcasts z itself
    (Aesara's local_useless_inc_subtensor_alloc). Exact where the write does not raise.""",
)


def _shaped_like(operand: Variable, result: Variable, arrays: list[Variable]) -> bool:
    """Whether `operand` of an elementwise node surely has the node's result shape (or is a scalar)."""
    if operand.ndim == 0:
        return True
    if operand.ndim != result.ndim:
        return False
    if len({id(a) for a in arrays}) == 1:
        return True  # the only array operand: the result has its shape
    return None not in operand.type.shape and operand.type.shape == result.type.shape


def lifted(idx: tuple, f: Op, operands: tuple, index: tuple) -> Variable | None:
    """f(a[index], b[index], ...) for an elementwise f, scalars left as they are, when every array
    operand surely has f's result shape; else None."""
    if not isinstance(f, o.Elemwise):
        return None
    arrays = [v for v in operands if v.ndim > 0]
    if not arrays:
        return None
    inner = f.make_node(*operands).outputs[0]
    if not all(_shaped_like(v, inner, arrays) for v in operands):
        return None
    op = Subtensor(idx)
    return f(*(v if v.ndim == 0 else op(v, *index) for v in operands))


def gathered(lifted: Variable) -> list[dict]:
    """The preimage of `lifted`: f(a[index], b[index]) -> (f, (a, b), the index)."""
    node = lifted.owner if isinstance(lifted, Variable) else None
    if node is None or not isinstance(node.op, o.Elemwise) or len(node.outputs) != 1:
        return []
    indexed = [v for v in node.inputs if v.owner is not None and isinstance(v.owner.op, Subtensor)]
    if not indexed or any(v.ndim > 0 and v not in indexed for v in node.inputs):
        return []
    parts = [v.owner for v in indexed]
    op, index = parts[0].op, tuple(parts[0].inputs[1:])
    if any(p.op != op or tuple(p.inputs[1:]) != index for p in parts):
        return []
    operands = tuple(v.owner.inputs[0] if v.owner in parts else v for v in node.inputs)
    return [{"idx": op.idx_list, "f": node.op, "operands": operands, "index": index}]


# f's operands are any number: the lifted application is computed, and its inverse reads the
# right side's node (the operands indexed alike) to gather the index again
subtensor_lift = rule(
    "subtensor_lift",
    (Subtensor.pattern(idx_list="idx"), ("f", "*operands"), "*index"),
    "lifted",
    CANON,
    keeps_type=True,
    compute={"lifted": Computed(lifted, inverse=gathered)},
    examples=("exp(x)[1:]", "(x * 2.0)[::-1]", "(m + m)[1:, ::2]"),
    types={"x": "vector", "m": "matrix"},
    doc="""f(x, 2.0)[i] -> f(x[i], 2.0): index before an elementwise op, computing only what is read.
    Operands that may broadcast against the result are left alone (the rule does not apply). Exact.""",
)


def _constant_int(v: Any) -> int | None:
    return int(v.data) if isinstance(v, Constant) and v.ndim == 0 else None


def _literal_items(idx: tuple, index: tuple) -> list[int | slice] | None:
    """The pattern as ints and Python slices of literal bounds; None for a symbolic bound or a new axis."""
    values = iter(index)
    items: list[int | slice] = []
    for entry in idx:
        if entry == "int":
            i = _constant_int(next(values))
            if i is None:
                return None
            items.append(i)
        elif isinstance(entry, tuple):
            bounds = [_constant_int(next(values)) if has else None for has in entry[1:]]
            if any(has and b is None for has, b in zip(entry[1:], bounds)):
                return None
            items.append(slice(*bounds))
        else:
            return None
    return items


def _taken(n: int, inner: slice, outer: int | slice) -> int | range | None:
    """The positions `range(n)[inner][outer]` of an axis of length `n`; None where the pair raises."""
    try:
        return range(n)[inner][outer]
    except IndexError:
        return None


def _as_slice(r: range, n: int) -> slice:
    """The slice taking exactly the positions `r` of an axis of length `n` (bounds omitted where they can)."""
    if not r:
        return slice(0, 0)
    step = r.step
    if step > 0:
        return slice(r.start or None, r.stop if r.stop < n else None, None if step == 1 else step)
    return slice(None if r.start == n - 1 else r.start, r.stop if r.stop >= 0 else None, step)


def _forward_merge(inner: slice, outer: int | slice) -> int | slice | None:
    """The merged index where both take forward from literal, non-negative bounds (any magnitude, no
    length needed): x[a:b:c][d:e:f] -> x[a + d*c : min(b, a + e*c) : c*f], x[a:b:c][i] -> x[a + i*c]
    (where i < the inner slice's count before clipping, so both raise exactly past the end); else None."""
    start, stop, step = inner.start or 0, inner.stop, inner.step or 1
    if start < 0 or (stop is not None and stop < 0) or step < 0:
        return None
    if isinstance(outer, int):
        if outer < 0 or (stop is not None and start + outer * step >= stop):
            return None
        return start + outer * step
    start2, stop2, step2 = outer.start or 0, outer.stop, outer.step or 1
    if start2 < 0 or (stop2 is not None and stop2 < 0) or step2 < 0:
        return None
    end = None if stop2 is None else start + stop2 * step
    if stop is not None:
        end = stop if end is None else min(stop, end)
    first = start + start2 * step
    return slice(first or None, end, None if step * step2 == 1 else step * step2)


_MERGE_SPAN = 2048  # the most axis lengths a merge for an unknown length may need to check


def _merged_axis(inner: slice, outer: int | slice, n: int | None) -> int | slice | None:
    """One index of an axis taking what `inner` then `outer` take (and raising where they do): for a
    static length `n` computed, else the literal index (a bound counted from the start or from the end)
    that agrees at every length; None when no literal index does (x[::2][-1:] depends on parity)."""
    if n is not None:
        taken = _taken(n, inner, outer)
        return taken if taken is None or isinstance(taken, int) else _as_slice(taken, n)
    forward = _forward_merge(inner, outer)
    if forward is not None:
        return forward
    numbers = (
        [abs(b) for b in (inner.start, inner.stop, outer.start, outer.stop) if b is not None]
        if (isinstance(outer, slice))
        else [abs(b) for b in (inner.start, inner.stop, outer) if b is not None]
    )
    step, step2 = abs(inner.step or 1), abs(outer.step or 1) if isinstance(outer, slice) else 1
    stable = 2 + sum(numbers) * (step + 1)  # from here on no bound is clipped: positions move with n
    period = step * step2
    probe = stable + period
    span = 2 * probe + 3 * period + 2  # covers the candidates' own bounds (at most about `probe`)
    if span > _MERGE_SPAN:
        return None
    taken = _taken(probe, inner, outer)
    if taken is None:
        return None
    if isinstance(taken, int):
        candidates: list[int | slice] = [taken, taken - probe]
    else:
        starts = (None, taken.start, taken.start - probe)
        stops = (None, taken.stop, taken.stop - probe)
        candidates = [slice(0, 0)] if not taken else []
        candidates += [slice(a, b, None if taken.step == 1 else taken.step) for a in starts for b in stops]
    wanted = [_taken(n, inner, outer) for n in range(span)]
    for candidate in candidates:
        if all(_taken(n, slice(None), candidate) == want for n, want in enumerate(wanted)):
            return candidate
    return None


def merged_subtensor(
    x: Variable, inner: tuple, inner_index: tuple, outer: tuple, outer_index: tuple
) -> Variable | None:
    """x[composed] for x[inner][outer] with literal indices, where one literal index takes what the pair
    takes (at x's static lengths, or at every length where a length is unknown); else None."""
    first, second = _literal_items(inner, inner_index), _literal_items(outer, outer_index)
    if first is None or second is None:
        return None
    first = first + [slice(None)] * (x.ndim - len(first))
    kept = [k for k, item in enumerate(first) if isinstance(item, slice)]  # the inner result's axes, in order
    composed = list(first)
    for position, item in enumerate(second):
        k = kept[position]
        merged = _merged_axis(first[k], item, x.type.shape[k])
        if merged is None:
            return None
        composed[k] = merged
    while composed and composed[-1] == slice(None):
        composed.pop()
    return x[tuple(composed)] if composed else x


# the composed index is a new index list with its own inputs: a compute builds the indexing
subtensor_merge = rule(
    "subtensor_merge",
    (
        Subtensor.pattern(idx_list="outer"),
        (Subtensor.pattern(idx_list="inner"), "x", "*inner_index"),
        "*outer_index",
    ),
    "merged",
    SUBTENSOR,
    keeps_type=True,
    compute={"merged": merged_subtensor},
    examples=(
        "x[1:][2:]",
        "m[1:, ::2][:, 1:]",
        "x[::2][1::3]",
        "x[2:9:2][1:3]",
        "x[::-1][2:]",
        "x[-5:-1][::-2]",
        "x[2:][1]",
        "x[:-2][-1]",
        "s[::-2][1:-1]",
    ),
    types={"x": "vector", "m": "matrix", "s": "(9,)"},
    doc="""x[a:b:c][d:e:f] -> x[g:h:k], x[a:][i] -> x[j]: two indexings with literal bounds as one (Aesara's
    local_subtensor_merge), negative bounds and steps included: at a static length the positions
    taken are computed, at an unknown one the literal index is the one that takes the same positions at
    every length (a bound counted from the start or from the end), raising where the pair raises;
    where none does (x[::2][-1:] reads the length's parity), the pair stays. Exact.""",
)


def part_shape(idx: tuple, shape: tuple[int, ...], value: Variable, index: tuple) -> tuple[int, ...] | None:
    """The static shape of alloc(value, *shape)[idx] for a scalar value, where it is known; else None."""
    if value.ndim != 0:
        return None
    part = Subtensor(idx).make_node(Variable(TensorType(value.dtype, shape)), *index).outputs[0]
    return None if None in part.type.shape else part.type.shape


subtensor_of_alloc = rule(
    "subtensor_of_alloc",
    (Subtensor.pattern(idx_list="idx"), (o.Alloc.pattern(shape="shape"), "value"), "*index"),
    (o.Alloc.pattern(shape="part"), "value"),
    CANON,
    keeps_type=True,
    compute={"part": part_shape},
    examples=("alloc(c, 4, 3)[1:, ::2]", "alloc(c, 5)[::2]"),
    types={"c": "scalar"},
    doc="""alloc(c, 4, 3)[1:, 0] -> alloc(c, 3): the part of a filled array, filled directly, for a
    scalar c where the part's static shape is known (a new array of the same value). Exact.""",
)


def _is_zeros(v: Variable) -> bool:
    """Whether `v` is zeros everywhere by construction: a zero constant, fill(model, 0), alloc(0, ...)."""
    if isinstance(v, Constant):
        return v.data.size > 0 and not np.any(v.data)
    node = v.owner
    if node is None:
        return False
    if isinstance(node.op, o.Fill):
        return _is_zeros(node.inputs[1])
    if isinstance(node.op, o.Alloc):
        return _is_zeros(node.inputs[0])
    return False


def zero_increment(term: Any) -> bool:
    """Whether `term` is an increment of zeros, `inc_subtensor(zeros[idx], y)`, or a write there
    (`set_subtensor(zeros[idx], y)`, what inc_of_zeros_to_set makes of it)."""
    node = term.owner if isinstance(term, Variable) else None
    return node is not None and isinstance(node.op, IncSubtensor) and _is_zeros(node.inputs[0])


zero_increment.heads = (IncSubtensor,)


def serialized(increment: Variable, rest: tuple) -> Variable | None:
    """The sum of `rest` with `increment` (the first increment of zeros among the terms) and the other
    increments of zeros of the sum's type applied on top, in order; None unless `increment` has the
    sum's type and the terms left sum to exactly it."""
    result = o.add(increment, *rest)
    if increment.type != result.type or not rest:
        return None
    movable = [increment, *(t for t in rest if t.type == result.type and zero_increment(t))]
    others = [t for t in rest if not any(t is m for m in movable)]
    if not others:
        return None
    base = others[0] if len(others) == 1 else o.add(*others)
    if base.type != result.type:  # the other terms alone must already have the sum's shape and dtype
        return None
    for term in movable:
        node = term.owner
        base = IncSubtensor(node.op.idx_list)(base, *node.inputs[1:])
    return base


# an increment of zeros is an add operand read at depth (fill or alloc of a zero under it), and the
# rest are applied in order: the constraint and the compute read structure
inc_subtensor_serialize = rule(
    "inc_subtensor_serialize",
    (o.add, {"pattern": "increment", "constraint": zero_increment}, "*rest"),
    "serialized",
    CANON,
    keeps_type=True,
    compute={"serialized": serialized},
    semantics="reassociates",
    examples=(
        "x + inc_subtensor(zeros_like(x)[1:], z)",
        "x + inc_subtensor(zeros_like(x)[0], z) + inc_subtensor(zeros_like(x)[2:], w)",
    ),
    types={"x": "vector", "z": "scalar", "w": "scalar"},
    doc="""x + inc(zeros[i], a) + inc(zeros[j], b) -> inc(inc(x[i], a)[j], b) (inc: inc_subtensor):
    increments of zeros (what gradients of indexing build; writes into zeros alike) applied to the sum
    in turn, Aesara's
    local_IncSubtensor_serialize, where the other terms sum to exactly their type. Reassociates, as
    add_zero: where a term is -0.0 and nothing is added to it, the left side is +0.0.""",
)

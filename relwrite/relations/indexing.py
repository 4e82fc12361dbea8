"""Indexing rules: whole subtensors go, indexing moves below elementwise ops, indexings merge.

`useless_subtensor`: ``x[:, ::1] -> x`` (every axis taken whole, none
added); backward it writes `x` as ``x[:, :]``.  `subtensor_lift`:
``f(x, 2.0)[i] -> f(x[i], 2.0)``, Aesara's local_subtensor_lift (compute
only the part that is read); backward it gathers the indexing again.  An
operand is indexed like the result only when it provably has the result's
shape (the one array operand, or static lengths all equal): an operand that
broadcasts would need its own index.  `subtensor_merge`: ``x[1:][2:] ->
x[3:]`` for literal, forward-stepping indices; `subtensor_of_alloc`:
``alloc(c, 4, 3)[1:, 0] -> alloc(c, 3)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.subtensor import IncSubtensor, Subtensor
from relwrite.graph.types import TensorType
from relwrite.relations.registry import rule
from relwrite.relations.runtime import Computed

CANON = ("canonicalize", "fast_run", "fast_compile")
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


def _plain_items(idx: tuple, index: tuple) -> list[tuple] | None:
    """The pattern as ("int", i) / ("slice", start, stop, step) with literal, non-negative bounds and a
    positive step (None where absent); None for anything else (a symbolic or negative bound, a new axis)."""
    values = iter(index)
    items: list[tuple] = []
    for entry in idx:
        if entry == "int":
            i = _constant_int(next(values))
            if i is None or i < 0:
                return None
            items.append(("int", i))
        elif isinstance(entry, tuple):
            bounds = [_constant_int(next(values)) if has else None for has in entry[1:]]
            if any(has and b is None for has, b in zip(entry[1:], bounds)):
                return None
            start, stop, step = bounds
            if (
                (start is not None and start < 0)
                or (stop is not None and stop < 0)
                or (step is not None and step <= 0)
            ):
                return None
            items.append(("slice", start or 0, stop, step or 1))
        else:
            return None
    return items


def merged_subtensor(
    x: Variable, inner: tuple, inner_index: tuple, outer: tuple, outer_index: tuple
) -> Variable | None:
    """x[composed] for x[inner][outer] with literal, forward-stepping indices; else None."""
    first, second = _plain_items(inner, inner_index), _plain_items(outer, outer_index)
    if first is None or second is None:
        return None
    first = first + [("slice", 0, None, 1)] * (x.ndim - len(first))
    kept = [k for k, item in enumerate(first) if item[0] == "slice"]  # the inner result's axes, in order
    composed = list(first)
    for position, item in enumerate(second):
        k = kept[position]
        _, start, stop, step = first[k]
        if item[0] == "int":
            if stop is not None:  # the inner slice's end could make the outer index raise: keep both
                return None
            composed[k] = ("int", start + item[1] * step)
        else:
            _, start2, stop2, step2 = item
            end = None if stop2 is None else start + stop2 * step
            if stop is not None:
                end = stop if end is None else min(stop, end)
            composed[k] = ("slice", start + start2 * step, end, step * step2)
    while composed and composed[-1] == ("slice", 0, None, 1):
        composed.pop()
    key = tuple(
        item[1] if item[0] == "int" else slice(item[1] or None, item[2], None if item[3] == 1 else item[3])
        for item in composed
    )
    return x[key] if key else x


# the composed index is a new index list with its own inputs: a compute builds the indexing
subtensor_merge = rule(
    "subtensor_merge",
    (
        Subtensor.pattern(idx_list="outer"),
        (Subtensor.pattern(idx_list="inner"), "x", "*inner_index"),
        "*outer_index",
    ),
    "merged",
    CANON,
    keeps_type=True,
    compute={"merged": merged_subtensor},
    examples=("x[1:][2:]", "m[1:, ::2][:, 1:]", "x[::2][1::3]", "x[2:9:2][1:3]"),
    types={"x": "vector", "m": "matrix"},
    doc="""x[a][b] -> x[c]: two indexings with literal, forward-stepping bounds as one (Aesara's
    local_subtensor_merge). Exact: an int index is merged only where it raises exactly when the pair
    would.""",
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
    """Whether `term` is an increment of zeros, `inc_subtensor(zeros[idx], y)`."""
    node = term.owner if isinstance(term, Variable) else None
    return (
        node is not None
        and isinstance(node.op, IncSubtensor)
        and not node.op.set_instead_of_inc
        and _is_zeros(node.inputs[0])
    )


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
        base = node.op(base, *node.inputs[1:])
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
    increments of zeros (what gradients of indexing build) applied to the sum in turn, Aesara's
    local_IncSubtensor_serialize, where the other terms sum to exactly their type. Reassociates, as
    add_zero: where a term is -0.0 and nothing is added to it, the left side is +0.0.""",
)

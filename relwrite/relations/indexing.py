"""Indexing rules: whole subtensors go, indexing moves below elementwise ops, indexings merge.

`useless_subtensor`: ``x[:, ::1] -> x`` (every axis taken whole, none
added); backward it writes `x` as ``x[:, :]``.  `subtensor_lift`:
``f(x, 2.0)[i] -> f(x[i], 2.0)``, the seed's local_subtensor_lift (compute
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
from relwrite.graph.basic import Apply, Constant, Variable
from relwrite.graph.subtensor import IncSubtensor, Subtensor
from relwrite.relations.goals import Goal, node_mappingo
from relwrite.relations.operands import reads
from relwrite.relations.registry import relation

CANON = ("canonicalize", "fast_run", "fast_compile")
FULL = ("slice", False, False, False)


def _takes_everything(op: Subtensor, index: tuple) -> bool:
    """Whether every pattern entry is a whole axis: `:`, or `::1` with a constant step of one."""
    steps = iter(index)
    for entry in op.idx_list:
        if not isinstance(entry, tuple) or entry[1] or entry[2]:
            return False
        if entry[3]:
            step = next(steps)
            if not (isinstance(step, Constant) and step.ndim == 0 and int(step.data) == 1):
                return False
    return True


def _indexed(parts: tuple) -> tuple[Subtensor, tuple] | None:
    """(op, operands) of a Subtensor node: the indexed array first, then the index inputs; else None."""
    op, operands = parts
    if not isinstance(op, Subtensor) or not isinstance(operands, tuple) or not operands:
        return None
    return op, operands


def _indexed_node(parts: tuple, kind: type) -> tuple[Subtensor, Apply, tuple] | None:
    """(op, node, index) of a Subtensor node whose indexed array a single-output node of `kind` computes."""
    split = _indexed(parts)
    if split is None:
        return None
    op, operands = split
    node = operands[0].owner if isinstance(operands[0], Variable) else None
    if node is None or not isinstance(node.op, kind) or len(node.outputs) != 1:
        return None
    return op, node, operands[1:]


def whole(parts: tuple) -> Variable | None:
    split = _indexed(parts)
    if split is None:
        return None
    op, operands = split
    return operands[0] if _takes_everything(op, operands[1:]) else None


def written_whole(x: Any) -> list[tuple]:
    """`x` as `x[:, ..., :]` (one whole slice per axis)."""
    if not isinstance(x, Variable) or x.ndim == 0:
        return []
    return [(Subtensor((FULL,) * x.ndim), (x,))]


@relation(
    CANON,
    tracks=(Subtensor,),
    examples=("x[:]", "m[:, ::1]"),
    types={"x": "vector", "m": "matrix"},
)
def useless_subtensor(lhs: Any, rhs: Any) -> Goal:
    """x[:, ::1] -> x: indexing that takes every axis whole is the array itself. Exact."""
    return node_mappingo(lhs, rhs, Subtensor, whole, written_whole)


def _shaped_like(operand: Variable, result: Variable, arrays: list[Variable]) -> bool:
    """Whether `operand` of an elementwise node surely has the node's result shape (or is a scalar)."""
    if operand.ndim == 0:
        return True
    if operand.ndim != result.ndim:
        return False
    if len({id(a) for a in arrays}) == 1:
        return True  # the only array operand: the result has its shape
    return None not in operand.type.shape and operand.type.shape == result.type.shape


def lifted(parts: tuple) -> Variable | None:
    """(Subtensor, (f(a, b, ...), *index)) -> f(a[index], b[index], ...), scalars left as they are."""
    found = _indexed_node(parts, o.Elemwise)
    if found is None:
        return None
    op, node, index = found
    inner = node.outputs[0]
    arrays = [v for v in node.inputs if v.ndim > 0]
    if not arrays or not all(_shaped_like(v, inner, arrays) for v in node.inputs):
        return None
    return node.op(*(v if v.ndim == 0 else op(v, *index) for v in node.inputs))


def gathered(result: Any) -> list[tuple]:
    """The preimage of `lifted`: f(a[index], b[index]) -> (Subtensor, (f(a, b), *index))."""
    node = result.owner if isinstance(result, Variable) else None
    if node is None or not isinstance(node.op, o.Elemwise) or len(node.outputs) != 1:
        return []
    indexed = [v for v in node.inputs if v.owner is not None and isinstance(v.owner.op, Subtensor)]
    if not indexed or any(v.ndim > 0 and v not in indexed for v in node.inputs):
        return []
    parts = [v.owner for v in indexed]
    op, index = parts[0].op, tuple(parts[0].inputs[1:])
    if any(p.op != op or tuple(p.inputs[1:]) != index for p in parts):
        return []
    try:
        inner = node.op(*(v.owner.inputs[0] if v.owner in parts else v for v in node.inputs))
    except (TypeError, ValueError):
        return []
    return [(op, (inner, *index))]


@relation(
    CANON,
    tracks=(Subtensor,),
    examples=("exp(x)[1:]", "(x * 2.0)[::-1]", "(m + m)[1:, ::2]"),
    types={"x": "vector", "m": "matrix"},
)
def subtensor_lift(lhs: Any, rhs: Any) -> Goal:
    """f(x, 2.0)[i] -> f(x[i], 2.0): index before an elementwise op, computing only what is read.

    Operands that may broadcast against the result are left alone (the rule
    does not apply). Exact.
    """
    return node_mappingo(lhs, rhs, Subtensor, lifted, gathered)


def _constant_int(v: Any) -> int | None:
    return int(v.data) if isinstance(v, Constant) and v.ndim == 0 else None


def _plain_items(op: Subtensor, index: tuple) -> list[tuple] | None:
    """The pattern as ("int", i) / ("slice", start, stop, step) with literal, non-negative bounds and a
    positive step (None where absent); None for anything else (a symbolic or negative bound, a new axis)."""
    values = iter(index)
    items: list[tuple] = []
    for entry in op.idx_list:
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


def merged_subtensor(parts: tuple) -> Variable | None:
    """(Subtensor, (x[inner], *outer index)) -> x[composed] for literal, forward-stepping indices."""
    found = _indexed_node(parts, Subtensor)
    if found is None:
        return None
    op, node, outer_index = found
    x = node.inputs[0]
    inner, outer = _plain_items(node.op, tuple(node.inputs[1:])), _plain_items(op, outer_index)
    if inner is None or outer is None:
        return None
    inner = inner + [("slice", 0, None, 1)] * (x.ndim - len(inner))
    kept = [k for k, item in enumerate(inner) if item[0] == "slice"]  # the inner result's axes, in order
    composed = list(inner)
    for position, item in enumerate(outer):
        k = kept[position]
        _, start, stop, step = inner[k]
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


@relation(
    CANON,
    tracks=(Subtensor,),
    backward="the composed index does not say how it was split",
    examples=("x[1:][2:]", "m[1:, ::2][:, 1:]", "x[::2][1::3]", "x[2:9:2][1:3]"),
    types={"x": "vector", "m": "matrix"},
)
def subtensor_merge(lhs: Any, rhs: Any) -> Goal:
    """x[a][b] -> x[c]: two indexings with literal, forward-stepping bounds as one (the seed's
    local_subtensor_merge). Exact: an int index is merged only where it raises exactly when the
    pair would."""
    return node_mappingo(lhs, rhs, Subtensor, merged_subtensor)


def alloc_part(parts: tuple) -> Variable | None:
    """(Subtensor, (alloc(v, *shape), *index)) -> alloc(v, *part shape) for a scalar v, where the
    part's static shape is known (a new array of the same value, never the whole one)."""
    found = _indexed_node(parts, o.Alloc)
    if found is None or found[1].inputs[0].ndim != 0:
        return None
    op, node, index = found
    shape = op.make_node(node.outputs[0], *index).outputs[0].type.shape
    if None in shape:
        return None
    return o.alloc(node.inputs[0], *shape)


@relation(
    CANON,
    tracks=(Subtensor,),
    backward="the part does not say which array it was cut from",
    examples=("alloc(c, 4, 3)[1:, ::2]", "alloc(c, 5)[::2]"),
    types={"c": "scalar"},
)
def subtensor_of_alloc(lhs: Any, rhs: Any) -> Goal:
    """alloc(c, 4, 3)[1:, 0] -> alloc(c, 3): the part of a filled array, filled directly. Exact."""
    return node_mappingo(lhs, rhs, Subtensor, alloc_part)


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


def _zero_increment(term: Any) -> bool:
    """Whether `term` is an increment of zeros, `inc_subtensor(zeros[idx], y)`."""
    node = term.owner if isinstance(term, Variable) else None
    return (
        node is not None
        and isinstance(node.op, IncSubtensor)
        and not node.op.set_instead_of_inc
        and _is_zeros(node.inputs[0])
    )


def serialized(parts: tuple) -> Variable | None:
    """(Add, terms) -> the other terms' sum with each increment of zeros applied on top, in order."""
    op, terms = parts
    if not isinstance(op, o.Add) or not isinstance(terms, tuple) or len(terms) < 2:
        return None
    increments = [t for t in terms if _zero_increment(t)]
    if not increments:  # the common case, settled before building anything
        return None
    result = op(*terms)
    movable = [t for t in increments if t.type == result.type]  # of exactly the sum's type
    rest = [t for t in terms if not any(t is m for m in movable)]
    if not movable or not rest:
        return None
    base = rest[0] if len(rest) == 1 else op(*rest)
    if base.type != result.type:  # the other terms alone must already have the sum's shape and dtype
        return None
    for term in movable:
        node = term.owner
        base = node.op(base, *node.inputs[1:])
    return base


@relation(
    CANON,
    tracks=(o.Add,),
    backward="the increments do not say which were made on zeros",
    semantics="reassociates",
    examples=(
        "x + inc_subtensor(zeros_like(x)[1:], z)",
        "x + inc_subtensor(zeros_like(x)[0], z) + inc_subtensor(zeros_like(x)[2:], w)",
    ),
    types={"x": "vector", "z": "scalar", "w": "scalar"},
    screen=reads(IncSubtensor),
)
def inc_subtensor_serialize(lhs: Any, rhs: Any) -> Goal:
    """x + inc(zeros[i], a) + inc(zeros[j], b) -> inc(inc(x[i], a)[j], b) (inc: inc_subtensor):
    increments of zeros (what gradients of indexing build) applied to the sum in turn, the seed's
    local_IncSubtensor_serialize, where the other terms sum to exactly their type. Reassociates, as
    add_zero: where a term is -0.0 and nothing is added to it, the left side is +0.0."""
    return node_mappingo(lhs, rhs, o.Add, serialized)

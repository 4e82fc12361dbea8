"""Indexing rules: the declarations agree with the goal relations they replaced, on their examples and
on generated indexings of inputs, elementwise ops, indexings, allocs and sums of increments, forward
and (useless_subtensor, subtensor_lift) backward."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import run, var

import relwrite as rw
from relwrite.engine import KanrenRelationSub
from relwrite.graph import ops as o
from relwrite.graph.basic import Apply, Constant, Variable
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.graph.subtensor import IncSubtensor, Subtensor
from relwrite.graph.terms import same_expression
from relwrite.relations import Rule, indexing
from relwrite.relations.goals import node_mappingo
from relwrite.relations.indexing import FULL
from relwrite.relations.pattern import to_graph

RULES = {r.name: r for r in vars(indexing).values() if isinstance(r, Rule)}

# -- the goal relations the declarations replaced, as they were -----------------------------------


def _old_takes_everything(op: Subtensor, index: tuple) -> bool:
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


def _old_indexed(parts: tuple) -> tuple[Subtensor, tuple] | None:
    """(op, operands) of a Subtensor node: the indexed array first, then the index inputs; else None."""
    op, operands = parts
    if not isinstance(op, Subtensor) or not isinstance(operands, tuple) or not operands:
        return None
    return op, operands


def _old_indexed_node(parts: tuple, kind: type) -> tuple[Subtensor, Apply, tuple] | None:
    """(op, node, index) of a Subtensor node whose indexed array a single-output node of `kind` computes."""
    split = _old_indexed(parts)
    if split is None:
        return None
    op, operands = split
    node = operands[0].owner if isinstance(operands[0], Variable) else None
    if node is None or not isinstance(node.op, kind) or len(node.outputs) != 1:
        return None
    return op, node, operands[1:]


def _old_whole(parts: tuple) -> Variable | None:
    split = _old_indexed(parts)
    if split is None:
        return None
    op, operands = split
    return operands[0] if _old_takes_everything(op, operands[1:]) else None


def _old_written_whole(x: Any) -> list[tuple]:
    """`x` as `x[:, ..., :]` (one whole slice per axis)."""
    if not isinstance(x, Variable) or x.ndim == 0:
        return []
    return [(Subtensor((FULL,) * x.ndim), (x,))]


def _old_useless_subtensor(lhs: Any, rhs: Any):
    """x[:, ::1] -> x: indexing that takes every axis whole is the array itself. Exact."""
    return node_mappingo(lhs, rhs, Subtensor, _old_whole, _old_written_whole)


def _old_shaped_like(operand: Variable, result: Variable, arrays: list[Variable]) -> bool:
    """Whether `operand` of an elementwise node surely has the node's result shape (or is a scalar)."""
    if operand.ndim == 0:
        return True
    if operand.ndim != result.ndim:
        return False
    if len({id(a) for a in arrays}) == 1:
        return True  # the only array operand: the result has its shape
    return None not in operand.type.shape and operand.type.shape == result.type.shape


def _old_lifted(parts: tuple) -> Variable | None:
    """(Subtensor, (f(a, b, ...), *index)) -> f(a[index], b[index], ...), scalars left as they are."""
    found = _old_indexed_node(parts, o.Elemwise)
    if found is None:
        return None
    op, node, index = found
    inner = node.outputs[0]
    arrays = [v for v in node.inputs if v.ndim > 0]
    if not arrays or not all(_old_shaped_like(v, inner, arrays) for v in node.inputs):
        return None
    return node.op(*(v if v.ndim == 0 else op(v, *index) for v in node.inputs))


def _old_gathered(result: Any) -> list[tuple]:
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


def _old_subtensor_lift(lhs: Any, rhs: Any):
    """f(x, 2.0)[i] -> f(x[i], 2.0): index before an elementwise op, computing only what is read.

    Operands that may broadcast against the result are left alone (the rule
    does not apply). Exact.
    """
    return node_mappingo(lhs, rhs, Subtensor, _old_lifted, _old_gathered)


def _old_constant_int(v: Any) -> int | None:
    return int(v.data) if isinstance(v, Constant) and v.ndim == 0 else None


def _old_plain_items(op: Subtensor, index: tuple) -> list[tuple] | None:
    """The pattern as ("int", i) / ("slice", start, stop, step) with literal, non-negative bounds and a
    positive step (None where absent); None for anything else (a symbolic or negative bound, a new axis)."""
    values = iter(index)
    items: list[tuple] = []
    for entry in op.idx_list:
        if entry == "int":
            i = _old_constant_int(next(values))
            if i is None or i < 0:
                return None
            items.append(("int", i))
        elif isinstance(entry, tuple):
            bounds = [_old_constant_int(next(values)) if has else None for has in entry[1:]]
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


def _old_merged_subtensor(parts: tuple) -> Variable | None:
    """(Subtensor, (x[inner], *outer index)) -> x[composed] for literal, forward-stepping indices."""
    found = _old_indexed_node(parts, Subtensor)
    if found is None:
        return None
    op, node, outer_index = found
    x = node.inputs[0]
    inner, outer = _old_plain_items(node.op, tuple(node.inputs[1:])), _old_plain_items(op, outer_index)
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


def _old_subtensor_merge(lhs: Any, rhs: Any):
    """x[a][b] -> x[c]: two indexings with literal, forward-stepping bounds as one (the seed's
    local_subtensor_merge). Exact: an int index is merged only where it raises exactly when the
    pair would."""
    return node_mappingo(lhs, rhs, Subtensor, _old_merged_subtensor)


def _old_alloc_part(parts: tuple) -> Variable | None:
    """(Subtensor, (alloc(v, *shape), *index)) -> alloc(v, *part shape) for a scalar v, where the
    part's static shape is known (a new array of the same value, never the whole one)."""
    found = _old_indexed_node(parts, o.Alloc)
    if found is None or found[1].inputs[0].ndim != 0:
        return None
    op, node, index = found
    shape = op.make_node(node.outputs[0], *index).outputs[0].type.shape
    if None in shape:
        return None
    return o.alloc(node.inputs[0], *shape)


def _old_subtensor_of_alloc(lhs: Any, rhs: Any):
    """alloc(c, 4, 3)[1:, 0] -> alloc(c, 3): the part of a filled array, filled directly. Exact."""
    return node_mappingo(lhs, rhs, Subtensor, _old_alloc_part)


def _old_is_zeros(v: Variable) -> bool:
    """Whether `v` is zeros everywhere by construction: a zero constant, fill(model, 0), alloc(0, ...)."""
    if isinstance(v, Constant):
        return v.data.size > 0 and not np.any(v.data)
    node = v.owner
    if node is None:
        return False
    if isinstance(node.op, o.Fill):
        return _old_is_zeros(node.inputs[1])
    if isinstance(node.op, o.Alloc):
        return _old_is_zeros(node.inputs[0])
    return False


def _old_zero_increment(term: Any) -> bool:
    """Whether `term` is an increment of zeros, `inc_subtensor(zeros[idx], y)`."""
    node = term.owner if isinstance(term, Variable) else None
    return (
        node is not None
        and isinstance(node.op, IncSubtensor)
        and not node.op.set_instead_of_inc
        and _old_is_zeros(node.inputs[0])
    )


def _old_serialized(parts: tuple) -> Variable | None:
    """(Add, terms) -> the other terms' sum with each increment of zeros applied on top, in order."""
    op, terms = parts
    if not isinstance(op, o.Add) or not isinstance(terms, tuple) or len(terms) < 2:
        return None
    increments = [t for t in terms if _old_zero_increment(t)]
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


def _old_inc_subtensor_serialize(lhs: Any, rhs: Any):
    """x + inc(zeros[i], a) + inc(zeros[j], b) -> inc(inc(x[i], a)[j], b) (inc: inc_subtensor):
    increments of zeros (what gradients of indexing build) applied to the sum in turn, the seed's
    local_IncSubtensor_serialize, where the other terms sum to exactly their type. Reassociates, as
    add_zero: where a term is -0.0 and nothing is added to it, the left side is +0.0."""
    return node_mappingo(lhs, rhs, o.Add, _old_serialized)


OLD = {
    "useless_subtensor": _old_useless_subtensor,
    "subtensor_lift": _old_subtensor_lift,
    "subtensor_merge": _old_subtensor_merge,
    "subtensor_of_alloc": _old_subtensor_of_alloc,
    "inc_subtensor_serialize": _old_inc_subtensor_serialize,
}
BACKWARD = {"useless_subtensor", "subtensor_lift"}


def first_answer(relation, graph, direction):
    """The first answer of `relation` run `direction` on `graph`, as a graph (None when there is none)."""
    q = var()
    found = run(1, q, relation(graph, q) if direction == "forward" else relation(q, graph))
    return to_graph(found[0], like=graph) if found else None


def assert_same_answers(name, graph, direction):
    rule = RULES[name]
    expected, got = first_answer(OLD[name], graph, direction), first_answer(rule, graph, direction)
    assert (expected is None) == (got is None), (pprint(graph), direction, expected, got)
    assert expected is None or same_expression(expected, got), (pprint(expected), pprint(got))
    if direction == "forward":  # the engine takes the same replacement
        taken = KanrenRelationSub(rule).transform(None, graph.owner) if graph.owner is not None else False
        assert bool(taken) == (expected is not None)
        assert not taken or same_expression(taken[0], expected)


KEYS = [slice(None), slice(1, None), slice(None, None, 2), slice(None, None, -1), slice(0, None, 1), 0, 1, -1]


@st.composite
def indexings(draw):
    """v[key] for v an input, an elementwise op, an indexing or an alloc; or a sum with increments."""
    x = rw.tensor("x", "float64", (None,) * draw(st.integers(1, 2)))
    y = rw.tensor("y", "float64", draw(st.sampled_from([x.type.shape, (None,) * x.ndim, (1,) * x.ndim])))

    def key(v):
        return tuple(draw(st.sampled_from(KEYS)) for _ in range(draw(st.integers(1, v.ndim))))

    kind = draw(st.sampled_from(["input", "exp", "mul", "add", "index", "alloc", "increments"]))
    if kind == "increments":
        terms = [x] + [
            rw.inc_subtensor(
                draw(st.sampled_from([rw.zeros_like(x), rw.zeros_like(x), x])).__getitem__(key(x)),
                rw.scalar(f"z{k}"),
            )
            for k in range(draw(st.integers(1, 3)))
        ]
        return o.add(*draw(st.permutations(terms)))
    v = {
        "input": lambda: x,
        "exp": lambda: o.exp(x),
        "mul": lambda: o.mul(x, rw.constant(2.0)),
        "add": lambda: o.add(x, y),
        "index": lambda: x[key(x)],
        "alloc": lambda: rw.alloc(draw(st.sampled_from([rw.scalar("c"), rw.vector("c")])), 4, 3),
    }[kind]()
    if v.ndim == 0:
        return o.exp(v)
    return v[key(v)]


@pytest.mark.parametrize("name", sorted(OLD))
@given(graph=indexings())
def test_the_declarations_agree_with_the_old_relations(name, graph):
    assert_same_answers(name, graph, "forward")
    if name in BACKWARD:
        assert_same_answers(name, graph, "backward")
        rhs = first_answer(RULES[name], graph, "forward")
        if rhs is not None:
            assert_same_answers(name, rhs, "backward")
    else:
        assert not RULES[name].backward


@pytest.mark.parametrize("name, text", [(n, t) for n in OLD for t in RULES[n].examples])
def test_the_declarations_agree_on_their_examples(name, text):
    graph = parse(text, types=RULES[name].types)
    assert first_answer(RULES[name], graph, "forward") is not None
    assert_same_answers(name, graph, "forward")
    if name in BACKWARD:
        assert_same_answers(name, first_answer(RULES[name], graph, "forward"), "backward")

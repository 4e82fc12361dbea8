"""Shape rules: the declarations agree with the goal relations they replaced, on their examples and on
generated shape reads of elementwise, reduced and transposed graphs, forward and (shape_i_of_shape)
backward."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import run, var

import relwrite as rw
from relwrite.engine import KanrenRelationSub
from relwrite.graph import ops as o
from relwrite.graph.basic import Variable, constant
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.graph.shape import Shape, Shape_i, length_read, promoted_length, promoted_shape
from relwrite.graph.subtensor import INT, Subtensor
from relwrite.graph.terms import same_expression
from relwrite.relations import Rule, shapes
from relwrite.relations.goals import node_mappingo
from relwrite.relations.pattern import to_graph

RULES = {r.name: r for r in vars(shapes).values() if isinstance(r, Rule)}


def _old_promoted(parts):
    op, operands = parts
    if not isinstance(operands, tuple) or len(operands) != 1:
        return None
    if isinstance(op, Shape):
        return promoted_shape(operands[0])
    if isinstance(op, Shape_i):
        return promoted_length(operands[0], op.i)
    return None


def _old_shape_promotion(lhs, rhs):
    return node_mappingo(lhs, rhs, (Shape, Shape_i), _old_promoted)


def _old_length_of_shape(parts):
    op, operands = parts
    read = length_read(op, operands) if isinstance(op, Subtensor) and isinstance(operands, tuple) else None
    return None if read is None else Shape_i(read[1])(read[0])


def _old_shape_indexed(result):
    owner = result.owner if isinstance(result, Variable) else None
    if owner is None or not isinstance(owner.op, Shape_i):
        return []
    return [(Subtensor((INT,)), (Shape()(owner.inputs[0]), constant(owner.op.i, dtype="int64")))]


def _old_shape_i_of_shape(lhs, rhs):
    return node_mappingo(lhs, rhs, Subtensor, _old_length_of_shape, _old_shape_indexed)


def _old_static_shape(parts):
    op, operands = parts
    if not isinstance(operands, tuple) or len(operands) != 1:
        return None
    (x,) = operands
    if isinstance(op, Shape) and None not in x.type.shape:
        return constant(np.array(x.type.shape, dtype=np.int64))
    if isinstance(op, Shape_i) and x.type.shape[op.i] is not None:
        return constant(x.type.shape[op.i], dtype="int64")
    return None


def _old_known_shape(lhs, rhs):
    return node_mappingo(lhs, rhs, (Shape, Shape_i), _old_static_shape)


# an old relation on Shape and Shape_i is two declarations now, one per head
OLD = {
    "shape_promotion": (_old_shape_promotion, ("shape_promotion", "shape_i_promotion")),
    "shape_i_of_shape": (_old_shape_i_of_shape, ("shape_i_of_shape",)),
    "known_shape": (_old_known_shape, ("known_shape", "known_length")),
}
BACKWARD = {"shape_i_of_shape"}


def first_answer(relation, graph, direction):
    """The first answer of `relation` run `direction` on `graph`, as a graph (None when there is none)."""
    q = var()
    found = run(1, q, relation(graph, q) if direction == "forward" else relation(q, graph))
    return to_graph(found[0], like=graph) if found else None


def assert_same_answers(name, graph, direction):
    old, names = OLD[name]
    expected = first_answer(old, graph, direction)
    answers = [a for a in (first_answer(RULES[n], graph, direction) for n in names) if a is not None]
    assert len(answers) == (expected is not None), (pprint(graph), direction, expected, answers)
    assert expected is None or same_expression(expected, answers[0]), (pprint(expected), pprint(answers[0]))
    if direction == "forward":  # the engine takes the same replacement
        taken = [KanrenRelationSub(RULES[n]).transform(None, graph.owner) for n in names]
        assert any(taken) == (expected is not None)


@st.composite
def shape_reads(draw):
    """shape(v), shape_i(v, i) or shape(v)[i] for v an input, or an elementwise, reduced or transposed op."""
    lengths = st.sampled_from([None, 1, 3])
    x = rw.tensor("x", "float64", tuple(draw(lengths) for _ in range(draw(st.integers(1, 2)))))
    y = rw.tensor("y", "float64", tuple(draw(lengths) for _ in range(draw(st.integers(1, 2)))))
    kind = draw(st.sampled_from(["input", "exp", "add", "sum", "transpose"]))
    v = {
        "input": lambda: x,
        "exp": lambda: o.exp(x),
        "add": lambda: o.add(x, y),
        "sum": lambda: o.Sum(0)(x),
        "transpose": lambda: o.transpose(x),
    }[kind]()
    read = draw(st.sampled_from(["shape", "shape_i", "index"]))
    if read == "shape" or v.ndim == 0:
        return Shape()(v)
    i = draw(st.integers(-v.ndim, v.ndim - 1))
    if read == "shape_i":
        return Shape_i(i % v.ndim)(v)
    return Subtensor((INT,))(Shape()(v), constant(i, dtype=draw(st.sampled_from(["int64", "int32"]))))


@pytest.mark.parametrize("name", sorted(OLD))
@given(graph=shape_reads())
def test_the_declarations_agree_with_the_old_relations(name, graph):
    assert_same_answers(name, graph, "forward")
    if name in BACKWARD:
        assert_same_answers(name, graph, "backward")
    else:
        assert not any(RULES[n].backward for n in OLD[name][1])
    for n in OLD[name][1]:
        rhs = first_answer(RULES[n], graph, "forward")
        if rhs is not None and name in BACKWARD:
            assert_same_answers(name, rhs, "backward")


@pytest.mark.parametrize(
    "name, text", [(n, t) for n, (_, names) in OLD.items() for m in names for t in RULES[m].examples]
)
def test_the_declarations_agree_on_their_examples(name, text):
    (rule,) = (RULES[m] for m in OLD[name][1] if text in RULES[m].examples)
    graph = parse(text, types=rule.types)
    assert first_answer(rule, graph, "forward") is not None
    assert_same_answers(name, graph, "forward")

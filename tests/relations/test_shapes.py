"""Shape rules: each rewrites its examples, and on generated shape reads of elementwise, reduced and
transposed graphs every answer keeps the values it replaces, forward and (shape_i_of_shape) backward; the
known_* rules answer exactly where the static type knows the value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import relwrite as rw
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, constant
from relwrite.graph.parse import parse
from relwrite.graph.shape import Shape, Shape_i
from relwrite.graph.subtensor import INT, Subtensor
from relwrite.relations import Rule, shapes
from tests.relations.rule_checks import assert_answers_keep_values

RULES = {r.name: r for r in vars(shapes).values() if isinstance(r, Rule)}
BACKWARD = {"shape_i_of_shape"}


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


def test_only_shape_i_of_shape_runs_backward():
    assert {name for name, r in RULES.items() if r.backward} == BACKWARD


@pytest.mark.parametrize("name, text", [(n, t) for n, r in RULES.items() for t in r.examples])
@given(data=st.data())
def test_the_rules_rewrite_their_examples_keeping_their_values(name, text, data):
    rule = RULES[name]
    assert assert_answers_keep_values(rule, parse(text, types=rule.types), data) is not None


@pytest.mark.parametrize("name", sorted(RULES))
@given(graph=shape_reads(), data=st.data())
def test_the_rules_keep_the_values_of_generated_shape_reads(name, graph, data):
    rhs = assert_answers_keep_values(RULES[name], graph, data)
    op, read = graph.owner.op, graph.owner.inputs[0]  # a constant exactly where the type knows the value
    if name == "known_shape":
        assert (rhs is not None) == (isinstance(op, Shape) and None not in read.type.shape)
    if name == "known_length":
        assert (rhs is not None) == (isinstance(op, Shape_i) and read.type.shape[op.i] is not None)
    if name.startswith("known_"):
        assert rhs is None or isinstance(rhs, Constant)

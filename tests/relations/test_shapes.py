"""Shape rules: each rewrites its examples, and on generated shape reads of elementwise, reduced and
transposed graphs every answer keeps the values it replaces, forward and (shape_i_of_shape,
reshape_lift) backward; the known_* rules answer exactly where the static type knows the value."""

from __future__ import annotations

import numpy as np
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
BACKWARD = {"shape_i_of_shape", "reshape_lift"}


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


def test_only_shape_i_of_shape_and_reshape_lift_run_backward():
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


LENGTH_FACTS = [
    ("x.shape[0] >= 0", lambda x: x.shape[0] >= 0, True),
    ("0 <= x.shape[0]", lambda x: o.le(constant(0), x.shape[0]), True),
    ("x.shape[0] < 0", lambda x: x.shape[0] < 0, False),
    ("0 > x.shape[0]", lambda x: o.gt(constant(0), x.shape[0]), False),
    ("shape_i(x, 0) >= -1.5", lambda x: o.ge(Shape_i(0)(x), constant(-1.5)), True),
]


@pytest.mark.parametrize("text, build, truth", LENGTH_FACTS, ids=[t for t, _, _ in LENGTH_FACTS])
def test_comparisons_of_a_length_with_a_non_positive_bound_fold_in_fast_run(text, build, truth):
    x = rw.vector("x")
    f = rw.function([x], build(x), mode="fast_run")
    assert not any(isinstance(node.op, (o.Ge, o.Le, o.Lt, o.Gt)) for node in f.fgraph.apply_nodes), text
    for length in (0, 3):
        assert bool(f(np.zeros(length))) is truth


LENGTH_CLAMPS = [
    ("switch(s <= 0, 0, s)", lambda s: o.switch(o.le(s, constant(0)), constant(0), s)),
    ("switch(s < 0, 0, s)", lambda s: o.switch(o.lt(s, constant(0)), constant(0), s)),
    ("switch(s <= -1, 7, s)", lambda s: o.switch(o.le(s, constant(-1)), constant(7), s)),
    ("maximum(s, 0)", lambda s: o.maximum(s, constant(0))),
    ("maximum(0, s)", lambda s: o.maximum(constant(0), s)),
]


@pytest.mark.parametrize("text, build", LENGTH_CLAMPS, ids=[t for t, _ in LENGTH_CLAMPS])
def test_a_length_clamped_at_zero_is_the_length_in_fast_run(text, build):
    m = rw.matrix("m")
    f = rw.function([m], build(m.shape[1]), mode="fast_run")
    assert not any(isinstance(node.op, (o.Switch, o.Maximum)) for node in f.fgraph.apply_nodes), text
    for shape in ((2, 0), (2, 5)):
        assert int(f(np.zeros(shape))) == shape[1]


@pytest.mark.parametrize(
    "name, text",
    [
        ("length_ge_nonpositive", "shape_i(x, 0) >= 1"),
        ("length_lt_nonpositive", "shape_i(x, 0) < 1"),
        ("length_clamp_switch", "switch(shape_i(x, 0) <= 0, 1, shape_i(x, 0))"),
        ("length_clamp_switch", "switch(shape_i(x, 0) >= 0, 0, shape_i(x, 0))"),
        ("length_clamp_switch", "switch(shape_i(x, 0) <= 0, 0, shape_i(m, 0))"),
        ("length_max_nonpositive", "maximum(shape_i(x, 0), 1)"),
        ("length_max_nonpositive", "maximum(x, 0)"),
    ],
)
def test_length_rules_leave_bounds_a_length_can_cross_alone(name, text):
    graph = parse(text, types={"x": "vector", "m": "matrix"})
    assert list(RULES[name].forward(graph)) == []

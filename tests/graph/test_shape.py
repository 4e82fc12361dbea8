"""Symbolic shapes: inferred lengths equal the computed shapes on the fuzzer's graphs (every op), shape
promotion never computes the tensor it asks about, and the ops' errors name them."""

from __future__ import annotations

import numpy as np
import pytest

import relwrite as rw
from relwrite.engine.db import rewrite_graph
from relwrite.graph import ops
from relwrite.graph.printing import pprint
from relwrite.graph.shape import Shape, Shape_i
from relwrite.graph.shape_inference import ShapeFeature, infer_shape, promoted_shape
from relwrite.testing import fuzz
from relwrite.testing.fuzz import walks

SEED = 4242


@pytest.mark.parametrize("index", range(60))
def test_inferred_lengths_equal_the_computed_shapes(index):
    recipe, input_sets, _, _ = fuzz.draw_graph(SEED, index)
    variables = recipe.build()
    inputs = [variables[i] for i in recipe.inputs]
    targets = [v for v in variables if v.owner is not None]
    feature = ShapeFeature()
    lengths = [feature.shape_tuple(v) for v in targets]
    flat = [n for group in lengths for n in group]
    values = [input_sets[0][i] for i in recipe.inputs]
    try:
        computed = walks._walk(inputs, [*targets, *flat], values, "native")
    except (IndexError, AssertionError, ValueError):  # a graph whose run raises has no shapes
        return
    got = iter(computed[len(targets) :])
    for var, value, group in zip(targets, computed, lengths):
        assert tuple(int(next(got)) for _ in group) == np.shape(value), pprint(var)


def test_shape_promotion_never_computes_the_tensor():
    x, y, m = rw.vector("x"), rw.vector("y"), rw.matrix("m")
    cases = [
        (rw.shape(rw.log(x)), "shape(x)"),
        (rw.shape_i(rw.exp(m).sum(axis=0) * 2.0, 0), "shape_i(m, 1)"),
        (rw.shape(m)[1], "shape_i(m, 1)"),
    ]
    for expression, expected in cases:
        assert pprint(rewrite_graph(expression, include=["fast_run"])) == expected
    broadcast = rewrite_graph(rw.shape(rw.exp(x) + y), include=["fast_run"])
    assert not any(
        node.op == rw.exp(x).owner.op for node in rw.FunctionGraph(outputs=[broadcast]).apply_nodes
    )
    f = rw.function([x, y], rw.shape(rw.exp(x) + y))
    assert list(f(np.ones(3), np.ones(1))) == [3] and list(f(np.ones(1), np.ones(4))) == [4]
    assert list(f(np.ones(0), np.ones(1))) == [0]  # a length of 0 broadcasts against 1 as NumPy does


def test_static_lengths_are_constants_and_the_rest_refer_to_inputs():
    t = rw.tensor("t", "float64", (2, None))
    (lengths,) = infer_shape(rw.exp(t).owner)
    assert int(lengths[0].data) == 2 and isinstance(lengths[1].owner.op, Shape_i)
    assert (
        pprint(rewrite_graph(rw.shape(rw.tensor("s", "float64", (2, 3))), include=["fast_run"])) == "[2, 3]"
    )
    assert promoted_shape(t) is None  # an input's shape is its own


def test_shape_ops_check_their_inputs_and_parse():
    x = rw.vector("x")
    with pytest.raises(TypeError, match=r"Shape_i\{1\}: axis 1 is out of range for 1 dimension"):
        rw.shape_i(x, 1)
    with pytest.raises(TypeError, match="non-negative int"):
        Shape_i(-1)
    with pytest.raises(TypeError, match="takes 1 input"):
        Shape()(x, x)
    assert rw.shape_i(x, -1).owner.op == Shape_i(0)
    assert (
        pprint(rw.parse("shape_i(x, 0) + shape(x)[0]", types={"x": "vector"}))
        == "(shape_i(x, 0) + shape(x)[0])"
    )


def test_the_shape_attribute_is_symbolic_and_unpacks_by_rank():
    m = rw.matrix("m")
    assert isinstance(m.shape.owner.op, Shape) and m.type.shape == (None, None)
    rows, cols = m.shape  # a vector of static length iterates over its elements
    f = rw.function([m], [rows * cols, m.shape[-1], m.shape], mode="fast_run")
    area, last, whole = f(np.ones((3, 4)))
    assert (int(area), int(last), whole.tolist()) == (12, 4, [3, 4])
    assert {type(n.op) for n in f.fgraph.apply_nodes} <= {Shape_i, Shape, ops.Mul, ops.Composite}
    with pytest.raises(TypeError, match="cannot be iterated"):
        iter(rw.vector("v"))  # its length is not static

"""Variable.eval: a variable's value from its inputs' values, compiled once per inputs, mode and graph."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relwrite as rw
import relwrite.compile.function as function_module
from relwrite.graph.basic import graph_inputs
from relwrite.graph.fg import MissingInputError
from relwrite.testing import expression_graphs, input_values


@pytest.fixture
def compiles(monkeypatch):
    """The calls `eval` makes to `function`, counted."""
    calls = []
    compile_ = function_module.function

    def counting(*args, **kwargs):
        calls.append(args)
        return compile_(*args, **kwargs)

    monkeypatch.setattr(function_module, "function", counting)
    return calls


def test_eval_by_variable_or_name_in_the_default_mode():
    x, y = rw.vector("x"), rw.float64("y")
    out = rw.exp(x) * y
    expected = np.exp([0.0, 1.0]) * 2.0
    np.testing.assert_allclose(out.eval({x: np.array([0.0, 1.0]), y: 2.0}), expected)
    np.testing.assert_allclose(out.eval({"x": [0.0, 1.0], "y": 2.0}), expected)
    np.testing.assert_array_equal(x.eval({x: [3.0]}), [3.0])


def test_a_graph_of_constants_needs_no_values():
    assert (rw.exp(rw.constant(0.0)) + 1.0).eval() == 2.0
    assert rw.constant(2.5).eval({}) == 2.5


def test_the_compiled_function_is_kept_per_inputs_and_mode(compiles):
    x = rw.vector("x")
    out = rw.log1p(x) * 3.0
    for values in ([0.0], [1.0, 2.0], [5.0]):
        np.testing.assert_allclose(out.eval({x: values}, mode="fast_compile"), np.log1p(values) * 3.0)
    assert len(compiles) == 1
    out.eval({"x": [1.0]}, mode="fast_compile")  # by name: the same inputs
    assert len(compiles) == 1
    out.eval({x: [1.0]}, mode="o2")
    assert len(compiles) == 2
    assert (rw.log1p(x) * 3.0).eval({x: [1.0]}, mode="fast_compile") == np.log1p(1.0) * 3.0  # its own cache
    assert len(compiles) == 3


def test_a_graph_edited_in_place_is_compiled_afresh(compiles):
    x = rw.vector("x")
    inner = rw.exp(x)
    out = inner + 1.0
    assert out.eval({x: [0.0]}, mode="fast_compile") == 2.0
    fgraph = rw.FunctionGraph([x], [out], clone=False)
    fgraph.replace(inner, rw.sin(x))  # edits out's node in place
    assert out.eval({x: [0.0]}, mode="fast_compile") == 1.0
    assert len(compiles) == 2


def test_a_missing_input_is_named():
    x, y = rw.vector("x"), rw.float64("y")
    with pytest.raises(MissingInputError, match="eval: no value given for the input y of the graph of"):
        (x * y).eval({x: [1.0]})
    with pytest.raises(MissingInputError, match="no value given for the input x, y"):
        (x * y).eval()


def test_keys_that_are_not_inputs_of_the_graph_are_named():
    x, y, w = rw.vector("x"), rw.float64("y"), rw.float64("w")
    out = x * y
    with pytest.raises(ValueError, match=r"eval: w is not an input of the graph of .*; its inputs: x, y"):
        out.eval({x: [1.0], y: 1.0, w: 2.0})
    with pytest.raises(ValueError, match=r"eval: no input of the graph of .* is named 'q'; its inputs: x, y"):
        out.eval({x: [1.0], y: 1.0, "q": 2.0})
    with pytest.raises(ValueError, match=r"eval: .* is not an input of the graph"):
        out.eval({x: [1.0], y: 1.0, out: 2.0})  # an intermediate variable is not an input
    with pytest.raises(ValueError, match="y is given twice"):
        out.eval({x: [1.0], y: 1.0, "y": 2.0})
    with pytest.raises(ValueError, match=r"2 inputs of the graph of .* are named 'x'; use the variables"):
        (x + rw.vector("x")).eval({"x": [1.0]})
    with pytest.raises(TypeError, match=r"expected a dict of input values.*got list"):
        out.eval([1.0, 2.0])
    with pytest.raises(TypeError, match="the keys are input variables or their names, got 3"):
        out.eval({3: 1.0})
    with pytest.raises(TypeError, match="input 'x'"):
        out.eval({x: [[1.0]], y: 1.0})  # values are checked against the input's type


@settings(max_examples=30, deadline=None)
@given(expression_graphs(max_nodes=8), st.data())
def test_eval_agrees_with_the_compiled_function_on_every_call(graph, data):
    _, output = graph
    inputs = graph_inputs([output])
    f = rw.function(inputs, output, mode="fast_compile")
    for _ in range(2):  # the second call reuses the compiled function kept on the variable
        values = data.draw(input_values(inputs)) if inputs else []
        with np.errstate(all="ignore"):
            got = output.eval(dict(zip(inputs, values, strict=True)), mode="fast_compile")
            np.testing.assert_array_equal(got, f(*values))

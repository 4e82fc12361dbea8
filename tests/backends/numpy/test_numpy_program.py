"""The generated entry point: the same results as the linker's loop, checks inline, errors named."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from relwrite.backends.numpy import EvaluationError, Function, program
from relwrite.backends.numpy.linker import NumpyLinker
from relwrite.graph import ops
from relwrite.graph.basic import scalar, vector
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.types import TensorType
from tests.backends.numpy.test_numpy_linker import link, random_graphs, reference


def entry(linker: NumpyLinker, single: bool = False):
    return linker.entry([None] * len(linker.input_slots), single)


@given(graph=random_graphs())
def test_straight_line_code_matches_the_loop_and_the_reference(graph):
    inputs, outputs, arrays = graph
    linker = link(inputs, outputs)
    before = [a.copy() for a in arrays]
    straight = entry(linker)
    for _ in range(2):
        got, looped = straight(*arrays), linker(*arrays)
        for result, by_loop, expected in zip(got, looped, reference(inputs, outputs, before)):
            np.testing.assert_array_equal(result, expected)
            np.testing.assert_array_equal(by_loop, expected)
            assert not any(np.shares_memory(result, a) for a in arrays)
    for array, original in zip(arrays, before):
        np.testing.assert_array_equal(array, original)


def test_a_program_longer_than_the_limit_runs_the_loop(monkeypatch):
    monkeypatch.setattr(program, "STRAIGHT_LINE_STEPS", 1)
    x = vector("x")
    linker = link([x], [ops.exp(ops.sin(x)) * 2.0])
    call = entry(linker, single=True)
    assert "run" in call.__globals__ and "f0" not in call.__globals__
    np.testing.assert_allclose(call(np.arange(3.0)), np.exp(np.sin(np.arange(3.0))) * 2.0)


def test_a_failing_step_is_named_with_its_inputs_and_the_entry_stays_usable():
    x, y = vector("x"), vector("y")
    call = entry(link([x, y], [ops.exp(ops.add(x, y))]), single=True)
    with pytest.raises(EvaluationError, match=r"add\(x, y\) on \(float64\[3\], float64\[4\]\)") as info:
        call(np.ones(3), np.ones(4))
    assert info.value.node.op == ops.add
    np.testing.assert_array_equal(call(np.zeros(2), np.zeros(2)), np.ones(2))


def test_a_wrong_number_of_arguments_says_how_many():
    x = vector("x")
    call = entry(link([x], [ops.exp(x)]))
    with pytest.raises(TypeError, match="takes 1 input"):
        call()
    with pytest.raises(TypeError, match="takes 1 input"):
        call(np.ones(2), np.ones(2))


def test_an_output_that_is_an_input_or_repeated_comes_back_as_given():
    x = vector("x")
    linker = NumpyLinker(FunctionGraph([x], [x, ops.exp(x), ops.exp(x)], clone=False))
    data = np.array([0.0, 1.0])
    first, second, third = entry(linker)(data)
    assert not np.shares_memory(first, data)
    np.testing.assert_array_equal(second, np.exp(data))
    np.testing.assert_array_equal(third, np.exp(data))


@pytest.mark.parametrize(
    ("dtype", "value", "accepted"),
    [
        ("float64", 1.5, True),
        ("float64", np.float64(1.5), True),
        ("float64", np.array(1.5), True),
        ("float64", np.float32(1.5), True),  # a safe cast
        ("float64", 3, True),  # an int that converts exactly
        ("float32", 1.5, True),  # exact in float32
        ("float32", 0.1, False),  # not exact in float32
        ("float32", np.float64(1.5), False),  # not a safe cast
        ("int64", True, True),
        ("int64", 2.5, False),
        ("bool", True, True),
        ("float64", "1.5", False),
        ("float64", np.ones(2), False),
    ],
)
def test_scalar_inputs_take_exact_values_and_refuse_the_rest_naming_the_input(dtype, value, accepted):
    x = scalar("x", dtype)
    f = Function(*_graph(x))
    if accepted:
        result = f(value)
        assert result.dtype == np.dtype(dtype) and result.shape == ()
        assert result == np.asarray(value).astype(dtype)
    else:
        with pytest.raises(TypeError, match="input 'x'"):
            f(value)


def _graph(x):
    return FunctionGraph([x], [ops.identity(x)], clone=True), True


def test_fixed_lengths_are_checked_inline():
    x = TensorType("float64", (3,))("x")
    f = Function(FunctionGraph([x], [ops.exp(x)], clone=True), True)
    np.testing.assert_allclose(f(np.zeros(3)), np.ones(3))
    with pytest.raises(TypeError, match="input 'x'"):
        f(np.zeros(4))

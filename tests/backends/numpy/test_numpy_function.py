"""`function`: input conversion and checks, keyword arguments, fresh results."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from relwrite.backends.numpy import Function, numpy_function
from relwrite.graph import ops
from relwrite.graph.basic import constant, matrix, scalar, tensor, vector
from relwrite.graph.fg import MissingInputError

DTYPES = ("bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64")


def test_single_output_returns_an_array_and_a_list_returns_a_list():
    x, y = vector("x"), vector("y")
    single = numpy_function([x, y], x + y)
    assert isinstance(single, Function)
    np.testing.assert_array_equal(single([1.0, 2.0], [3.0, 4.0]), [4.0, 6.0])
    both = numpy_function([x, y], [x + y, x * y])
    total, product = both(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    np.testing.assert_array_equal(total, [4.0, 6.0])
    np.testing.assert_array_equal(product, [3.0, 8.0])


def test_scalar_results_are_zero_d_arrays():
    a, b = scalar("a"), scalar("b")
    result = numpy_function([a, b], a + b)(1.0, 2.0)
    assert type(result) is np.ndarray and result.shape == () and result == 3.0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (np.ones(3, dtype="float64"), r"input 'x' \(position 0\).*float32.*float64"),
        (np.ones((3, 1), dtype="float32"), r"input 'x' \(position 0\).*1 dimension\(s\), got 2"),
        (np.ones(4, dtype="float32"), r"input 'x' \(position 0\).*length 3 on axis 0, got shape \(4,\)"),
        (np.ones(3, dtype="int64"), r"input 'x'.*int64.*does not cast safely to float32"),
        ("abc", r"input 'x'.*must be bool, integer or float"),
        (1j, r"input 'x'.*must be bool, integer or float"),
        ([[1.0], [2.0, 3.0]], r"input 'x'.*cannot convert"),
        (0.1, r"input 'x'.*does not convert exactly to float32"),
    ],
)
def test_bad_inputs_raise_type_errors_naming_the_input(value, message):
    x = vector("x", dtype="float32", shape=(3,))
    f = numpy_function([x], ops.exp(x))
    with pytest.raises(TypeError, match=message):
        f(value)


def test_unnamed_inputs_are_named_by_position():
    x, y = vector("x"), vector()
    f = numpy_function([x, y], x + y)
    with pytest.raises(TypeError, match=r"input 1 expects .*got 2"):
        f(np.ones(2), np.ones((2, 2)))


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        (3, True),
        (3.0, True),
        (True, True),
        (3.5, False),
        (2**70, False),
        (2**62 + 1, True),
        ([1, 2], False),
    ],
)
def test_python_values_are_accepted_when_they_convert_exactly(value, accepted):
    n = scalar("n", dtype="int64")
    f = numpy_function([n], ops.identity(n))
    if accepted:
        assert f(value) == int(value)
    else:
        with pytest.raises(TypeError, match="input 'n'"):
            f(value)


def test_python_lists_convert_exactly_to_float_inputs():
    x = vector("x", dtype="float32")
    f = numpy_function([x], x * 2)
    result = f([1, 2.5, -3])
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, [2.0, 5.0, -6.0])
    with pytest.raises(TypeError, match="does not convert exactly"):
        f([2**24 + 1])


@given(
    source=st.sampled_from(DTYPES),
    target=st.sampled_from(DTYPES),
    data=st.data(),
)
def test_arrays_are_accepted_exactly_when_the_cast_is_safe(source, target, data):
    value = data.draw(hnp.arrays(source, hnp.array_shapes(max_dims=2, max_side=3)))
    x = tensor("x", dtype=target, shape=(None,) * value.ndim)
    f = numpy_function([x], ops.identity(x))
    if np.can_cast(value.dtype, target, "safe"):
        result = f(value)
        assert result.dtype == np.dtype(target)
        np.testing.assert_array_equal(result, value.astype(target))
    else:
        with pytest.raises(TypeError, match=rf"input 'x'.*{source}"):
            f(value)


def test_numpy_scalars_follow_the_safe_cast_rule():
    x = scalar("x")
    f = numpy_function([x], x + 1.0)
    assert f(np.float32(1.5)) == 2.5
    assert f(np.int32(2)) == 3.0
    with pytest.raises(TypeError, match="input 'x'"):
        f(np.complex128(1.0))


def test_wrong_argument_counts_are_type_errors():
    x, y = vector("x"), vector("y")
    f = numpy_function([x, y], x + y)
    with pytest.raises(TypeError, match="takes 2 input"):
        f(np.ones(2))
    with pytest.raises(TypeError, match="takes 2 input"):
        f(np.ones(2), np.ones(2), np.ones(2))


def test_keyword_arguments_bind_by_input_name():
    x, y = vector("x"), vector("y")
    f = numpy_function([x, y], x - y)
    a, b = np.array([5.0]), np.array([2.0])
    np.testing.assert_array_equal(f(x=a, y=b), [3.0])
    np.testing.assert_array_equal(f(y=b, x=a), [3.0])
    np.testing.assert_array_equal(f(a, y=b), [3.0])
    with pytest.raises(TypeError, match="no input named 'z'"):
        f(a, z=b)
    with pytest.raises(TypeError, match=r"two values for input 'x'"):
        f(a, x=b)
    with pytest.raises(TypeError, match=r"missing input 'y' \(position 1\)"):
        f(x=a)
    with pytest.raises(TypeError, match=r"input 'y'.*complex64"):
        f(x=a, y=np.ones(1, dtype="complex64"))


def test_inputs_sharing_a_name_must_be_passed_by_position():
    first, second = vector("v"), vector("v")
    f = numpy_function([first, second], first - second)
    np.testing.assert_array_equal(f([3.0], [1.0]), [2.0])
    with pytest.raises(TypeError, match="several inputs are named 'v'"):
        f(v=[1.0])


def test_repeated_calls_give_fresh_correct_results():
    x = vector("x")
    c = constant(np.array([1.0, 2.0]))
    f = numpy_function([x], [ops.exp(ops.exp(x)), x, c])
    first = f(np.array([0.0, 1.0]))
    kept = [r.copy() for r in first]
    second = f(np.array([2.0, -1.0]))
    for old, copy in zip(first, kept):
        np.testing.assert_array_equal(old, copy)  # the second call did not write into them
    for old, new in zip(first, second):
        assert not np.shares_memory(old, new)
    np.testing.assert_array_equal(second[0], np.exp(np.exp([2.0, -1.0])))
    first[2][:] = 0.0
    np.testing.assert_array_equal(f(np.zeros(2))[2], [1.0, 2.0])


def test_inputs_are_never_modified():
    x = matrix("x")
    data = np.arange(6.0).reshape(2, 3)
    numpy_function([x], ops.sin(ops.exp(x)) * 2.0)(data)
    np.testing.assert_array_equal(data, np.arange(6.0).reshape(2, 3))


def test_a_variable_missing_from_inputs_is_named():
    x, y = vector("x"), vector("forgotten")
    with pytest.raises(MissingInputError, match=r"function: .*forgotten.*not an input"):
        numpy_function([x], x + y)


def test_inputs_listed_twice_or_not_variables_are_rejected():
    x = vector("x")
    with pytest.raises(ValueError, match="listed twice"):
        numpy_function([x, x], x * 2)
    with pytest.raises(TypeError, match="input 0 is 3"):
        numpy_function([3], x)


def test_the_caller_graph_is_cloned():
    x = vector("x")
    out = ops.exp(x)
    f = numpy_function(x, out)
    assert f.fgraph.outputs[0] is not out
    assert f.fgraph.inputs[0] is not x and f.fgraph.inputs[0].name == "x"

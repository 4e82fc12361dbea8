"""Indexing: static shapes against NumPy's, symbolic bounds, updates, errors that name the culprit, text."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import relwrite as rw
from relwrite.backends.numpy import EvaluationError
from relwrite.graph import ops
from relwrite.graph.basic import tensor
from relwrite.graph.printing import pprint

shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5)


@given(shapes, st.data())
def test_static_shape_is_numpys_where_known(shape, data):
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    hidden = tuple(None if data.draw(st.booleans()) else n for n in shape)
    for static in (shape, hidden):
        result = tensor("x", "float64", static)[index]
        expected = np.empty(shape)[index].shape
        assert len(result.type.shape) == len(expected)
        if static == shape:
            assert result.type.shape == expected
        assert all(s is None or s == e for s, e in zip(result.type.shape, expected))


@given(hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=4), st.data())
def test_advanced_indexing_places_the_index_axes_as_numpy_does(shape, data):
    """Adjacent integer-array (and int) indices put their axes where they stand; separated ones, first."""
    items = []
    for n in shape:
        kind = data.draw(st.sampled_from(["array", "int", "slice"]))
        if kind == "array":
            items.append(
                data.draw(
                    hnp.arrays(np.int64, st.sampled_from([(3,), (2, 1)]), elements=st.integers(-n, n - 1))
                )
            )
        elif kind == "int":
            items.append(data.draw(st.integers(-n, n - 1)))
        else:
            items.append(slice(None, None, data.draw(st.sampled_from([None, 2, -1]))))
    if not any(isinstance(i, np.ndarray) for i in items):
        items[0] = np.array([0])
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    result = tensor("x", "float64", shape)[tuple(items)]
    assert isinstance(result.owner.op, ops.AdvancedSubtensor)
    assert result.type.shape == x[tuple(items)].shape
    f = rw.function([result.owner.inputs[0]], result)
    np.testing.assert_array_equal(f(x), x[tuple(items)])


def test_symbolic_bounds_and_indices_evaluate_as_numpy():
    x, i, j = rw.matrix("x"), rw.scalar("i", "int64"), rw.scalar("j", "int32")
    f = rw.function([x, i, j], [x[i], x[i:j, ::-1], x[:, j], x[-i:, None, 1:j:2]])
    a = np.arange(20.0).reshape(4, 5)
    for got, want in zip(f(a, 1, 3), [a[1], a[1:3, ::-1], a[:, 3], a[-1:, None, 1:3:2]]):
        np.testing.assert_array_equal(got, want)


def test_updates_set_and_increment_and_repeated_indices_accumulate():
    x, y = rw.vector("x"), rw.vector("y")
    idx = np.array([0, 2, 0])
    f = rw.function(
        [x, y],
        [rw.set_subtensor(x[1:3], y[:2]), rw.inc_subtensor(x[::2], 10.0), rw.inc_subtensor(x[idx], 1.0)],
    )
    a, b = np.arange(5.0), np.array([7.0, 8.0, 9.0])
    first, second, third = f(a, b)
    np.testing.assert_array_equal(first, [0.0, 7.0, 8.0, 3.0, 4.0])
    np.testing.assert_array_equal(second, [10.0, 1.0, 12.0, 3.0, 14.0])
    np.testing.assert_array_equal(third, [2.0, 1.0, 3.0, 3.0, 4.0])
    np.testing.assert_array_equal(a, np.arange(5.0))  # the caller's array is never written


@pytest.mark.parametrize("mode", ["fast_run", "fast_compile"])
def test_an_increment_wraps_in_the_arrays_dtype_at_an_integer_index_as_at_a_slice(mode):
    """y casts to x's dtype as NumPy's += on a view does: int8 -127 + int32 -2 is 127 for one element
    too (NumPy's element assignment raised OverflowError: Python integer -129 out of bounds for int8)."""
    x, y = tensor("x", "int8", (3,)), tensor("y", "int32", ())
    f = rw.function([x, y], [rw.inc_subtensor(x[0], y), rw.inc_subtensor(x[:1], y)], mode=mode)
    one, part = f(np.array([-127, 5, 6], dtype="int8"), np.array(-2, dtype="int32"))
    np.testing.assert_array_equal(one, np.array([127, 5, 6], dtype="int8"))
    np.testing.assert_array_equal(part, one)


@pytest.mark.parametrize("mode", ["fast_run", "fast_compile"])
def test_an_update_in_place_never_clobbers_a_value_read_later(mode):
    x = rw.vector("x")
    shared = rw.exp(x)
    updated = rw.set_subtensor(shared[0], 0.0)
    f = rw.function([x], [updated + shared, rw.inc_subtensor(rw.exp(x * 2.0)[1:], 1.0)], mode=mode)
    a = np.array([0.0, 1.0, 2.0])
    got, other = f(a)
    expected = np.exp(a).copy()
    expected[0] = 0.0
    np.testing.assert_allclose(got, expected + np.exp(a))
    np.testing.assert_allclose(other, np.exp(2 * a) + np.array([0.0, 1.0, 1.0]))


def test_bad_indices_are_clear_errors_naming_the_index_or_input():
    x = tensor("x", "float64", (3, 4))
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for axis 1 with length 4 \(input x\)"):
        x[0, 5]
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for axis 0"):
        x[-4]
    with pytest.raises(TypeError, match=r"too many indices \(3\) for 2 dimension"):
        x[0, 0, 0]
    with pytest.raises(TypeError, match=r"index 1\.5 is not an integer"):
        x[1.5]
    with pytest.raises(TypeError, match="boolean mask"):
        x[np.array([True, False, True])]
    with pytest.raises(TypeError, match="must be a scalar integer"):
        x[rw.scalar("f")]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x[::0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(TypeError, match="must be an indexed array such as x"):
        rw.set_subtensor(x, 1.0)
    with pytest.raises(TypeError, match="cannot broadcast"):
        rw.set_subtensor(x[0], rw.tensor("y", "float64", (3,)))
    with pytest.raises(TypeError, match="cannot be cast"):
        rw.inc_subtensor(rw.tensor("n", "int64", (3,))[0], 1.5)
    with pytest.raises(TypeError, match="cannot be iterated"):
        list(x)


def test_an_index_out_of_range_at_run_time_names_the_node_and_numpys_error():
    x, i = rw.vector("x"), rw.scalar("i", "int64")
    f = rw.function([x, i], x[i])
    assert f(np.arange(3.0), -3) == 0.0
    with pytest.raises(
        EvaluationError, match=r"Subtensor\{int\}\(x, i\).*IndexError: index 3 is out of bounds"
    ):
        f(np.arange(3.0), 3)


@given(shapes, st.data())
def test_indexing_prints_as_python_and_parses_back(shape, data):
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=False))
    x = tensor("x", "float64", (None,) * len(shape))
    result = x[index]
    if result is x:
        return
    text = pprint(result)
    again = rw.parse(text, types={"x": x.type})
    assert pprint(again) == text
    update = rw.set_subtensor(result, 2.0)
    assert pprint(rw.parse(pprint(update), types={"x": x.type})) == pprint(update)


def _forward_index(draw, ndim):
    items = []
    for _ in range(draw(st.integers(1, ndim))):
        if draw(st.booleans()):
            items.append(draw(st.integers(0, 6)))
        else:
            bound = st.one_of(st.none(), st.integers(0, 7))
            items.append(slice(draw(bound), draw(bound), draw(st.one_of(st.none(), st.integers(1, 3)))))
    return tuple(items)


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6), st.data())
def test_merged_indexings_give_numpys_values_and_raise_where_numpy_does(shape, data):
    from relwrite.engine.db import rewrite_graph

    first = _forward_index(data.draw, len(shape))
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    try:
        part = x[first]
    except IndexError:
        return
    if part.ndim == 0:
        return
    second = _forward_index(data.draw, part.ndim)
    var = rw.tensor("x", "float64", (None,) * len(shape))
    merged = rewrite_graph(var[first][second], include=["canonicalize"])
    f = rw.function([var], merged, mode="fast_compile")
    try:
        expected = part[second]
    except IndexError:
        with pytest.raises(EvaluationError, match="IndexError"):
            f(x)
        return
    np.testing.assert_array_equal(f(x), expected)

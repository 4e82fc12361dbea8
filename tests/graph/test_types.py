"""TensorType, static broadcasting and dtype promotion."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.graph.basic import scalar, vector
from relwrite.graph.types import (
    LiteralOverflowError,
    TensorType,
    broadcast_shapes,
    dtype_of_python_scalar,
    upcast,
)
from relwrite.testing import tensor_types

DTYPES = ("bool", "int8", "int32", "int64", "uint8", "float32", "float64")


@given(tensor_types(DTYPES, max_ndim=3))
def test_equal_types_hash_equal(t):
    same = TensorType(np.dtype(t.dtype), list(t.shape))
    assert same == t and hash(same) == hash(t)
    assert t.ndim == len(t.shape)


@given(tensor_types(DTYPES, max_ndim=3), tensor_types(DTYPES, max_ndim=3))
def test_equality_is_dtype_and_shape(a, b):
    assert (a == b) == (a.dtype == b.dtype and a.shape == b.shape)


def test_type_is_immutable_and_validated():
    t = TensorType("float64", (None, 3))
    with pytest.raises(AttributeError):
        t.dtype = "float32"
    assert t != (None, 3) and t != "float64"
    with pytest.raises(TypeError, match="complex128 is not supported"):
        TensorType("complex128")
    with pytest.raises(TypeError, match="not a numpy dtype"):
        TensorType("nonsense")
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="non-negative ints or None"):
            TensorType("float64", (bad,))


def test_type_call_makes_an_input_variable():
    x = TensorType("float32", (None,))("x")
    assert x.type == TensorType("float32", (None,)) and x.owner is None and x.name == "x"


@given(tensor_types(("float32", "float64"), max_ndim=3), st.data())
def test_is_super_and_is_compatible(t, data):
    # A specialisation of t: some unknown lengths made known.
    concrete = tuple(d if d is not None else data.draw(st.integers(1, 4)) for d in t.shape)
    special = TensorType(t.dtype, concrete)
    assert t.is_super(special) and t.is_compatible(special) and special.is_compatible(t)
    assert special.is_super(t) == (special == t)
    assert t.is_super(t)


def test_is_super_and_is_compatible_reject_other_dtype_rank_or_length():
    t = TensorType("float64", (None, 3))
    assert not t.is_super(TensorType("float32", (2, 3)))
    assert not t.is_super(TensorType("float64", (3,)))
    assert not t.is_compatible(TensorType("float64", (None, 4)))
    assert TensorType("float64", (2, None)).is_compatible(TensorType("float64", (None, 3)))
    assert not TensorType("float64", (2, None)).is_super(TensorType("float64", (None, 3)))
    assert not t.is_super("not a type")


def test_value_error_messages():
    t = TensorType("float64", (None, 3))
    assert t.value_error(np.zeros((5, 3))) is None
    assert t.value_error(np.zeros((5, 3), dtype="float32")) == "expected dtype float64, got float32"
    assert t.value_error(np.zeros(3)) == "expected 2 dimension(s), got 1 (shape (3,))"
    assert t.value_error(np.zeros((5, 4))) == "expected length 3 on axis 1, got shape (5, 4)"


concrete_shapes = st.lists(st.integers(0, 3), max_size=3).map(tuple)


@given(st.lists(concrete_shapes, min_size=1, max_size=4))
def test_broadcast_shapes_matches_numpy_on_concrete_shapes(shapes):
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(TypeError, match=r"^myop: shapes .* cannot broadcast"):
            broadcast_shapes(*shapes, op_name="myop")
    else:
        assert broadcast_shapes(*shapes) == expected


@given(st.lists(concrete_shapes, min_size=1, max_size=4), st.data())
def test_broadcast_shapes_with_unknown_lengths_is_sound(shapes, data):
    """Hiding lengths never claims a wrong length: every known result length is the true one."""
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        return
    hidden = [tuple(None if data.draw(st.booleans()) else d for d in s) for s in shapes]
    result = broadcast_shapes(*hidden)
    assert len(result) == len(expected)
    assert all(r is None or r == e for r, e in zip(result, expected))


def test_broadcast_shapes_none_handling():
    assert broadcast_shapes((None,), (3,)) == (3,)
    assert broadcast_shapes((None,), (1,)) == (None,)
    assert broadcast_shapes((None, 1), (4,)) == (None, 4)
    assert broadcast_shapes((None,), ()) == (None,)
    assert broadcast_shapes() == ()
    with pytest.raises(TypeError, match=r"add: shapes \(2, None\), \(3, 1\) cannot broadcast \(axis 0\)"):
        broadcast_shapes((2, None), (3, 1), op_name="add")


@given(st.lists(st.sampled_from(DTYPES), min_size=1, max_size=3))
def test_upcast_is_numpy_result_type(dtypes):
    assert upcast(*dtypes) == np.result_type(*dtypes).name


def test_python_scalars_keep_the_array_dtype_when_they_fit():
    assert dtype_of_python_scalar(2.0, ["float32"]) == "float32"
    assert dtype_of_python_scalar(100, ["int8"]) == "int8"
    assert dtype_of_python_scalar(2, ["float32"]) == "float32"
    assert dtype_of_python_scalar(True, ["int8"]) == "int8"
    assert dtype_of_python_scalar(2.5, ["int32"]) == "float64"
    assert dtype_of_python_scalar(2.0, []) == "float64"
    assert dtype_of_python_scalar(2, []) == "int64"
    assert dtype_of_python_scalar(True, []) == "bool"


@pytest.mark.parametrize(
    ("value", "others", "numpy_raises", "message"),
    [
        (
            1000,
            ["int8"],
            True,
            "the Python integer 1000 is out of bounds for int8, the dtype it takes next to int8",
        ),
        (-1, ["uint8"], True, "the Python integer -1 is out of bounds for uint8"),
        (
            2**63,
            [],
            True,
            "the Python integer 9223372036854775808 is out of bounds for int64, .* no array operand",
        ),
        (
            2**64,
            ["int64", "int64"],
            True,
            r"18446744073709551616 is out of bounds for int64, .* next to int64 op",
        ),
        (
            10**400,
            ["float64"],
            True,
            r"the Python integer 100000000000\.\.\. \(401 digits\) overflows float64",
        ),
        # NumPy 2 only warns when a literal overflows a smaller float dtype, and computes with inf: we refuse
        (1e300, ["float32"], False, "the Python float 1e[+]300 overflows float32"),
        (100000, ["float16"], False, "the Python integer 100000 overflows float16"),
    ],
)
def test_python_scalars_that_do_not_fit_raise(value, others, numpy_raises, message):
    with pytest.raises(LiteralOverflowError, match=message):
        dtype_of_python_scalar(value, others)
    array = np.zeros(1, others[0] if others else "int64")
    if numpy_raises:
        with pytest.raises(OverflowError):
            np.add(array, value)
    else:
        with pytest.warns(RuntimeWarning, match="overflow"):
            assert np.isinf(np.add(array, value)).all()


def test_python_ints_beyond_int64_are_converted_next_to_floats():
    assert dtype_of_python_scalar(2**64, ["float64"]) == "float64"
    assert dtype_of_python_scalar(99999999999999999999999999999, ["float32"]) == "float32"
    assert dtype_of_python_scalar(float("inf"), ["float16"]) == "float16"  # inf is held, not overflowed


def test_comparisons_take_out_of_range_ints_exactly_as_numpy_2():
    assert dtype_of_python_scalar(1000, ["int8"], exact_ints=True) == "int64"
    assert dtype_of_python_scalar(-1, ["uint8"], exact_ints=True) == "int64"
    with pytest.raises(LiteralOverflowError, match="out of bounds for int8"):
        dtype_of_python_scalar(2**64, ["int8"], exact_ints=True)


def test_python_scalars_in_expressions():
    x = vector("x", dtype="float32")
    assert (x * 2.0).dtype == "float32"
    assert (2.0 * x).dtype == "float32"
    i = scalar("i", dtype="int8")
    assert (i + 1).dtype == "int8"
    with pytest.raises(LiteralOverflowError, match="1000 is out of bounds for int8"):
        i + 1000
    assert (i < 1000).owner.inputs[1].type == TensorType("int64", ())

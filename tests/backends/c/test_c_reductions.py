"""C kernels for Sum, Mean, Softmax and LogSoftmax: NumPy's results (sums to rounding), NumPy's shapes,
and NumPy's results or errors on every edge (non-finite rows, empty axes, other axes and dtypes)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import relwrite as rw
from relwrite.backends.c import CLinker, c_available
from relwrite.backends.numpy import NumpyLinker
from relwrite.graph import ops
from relwrite.graph.basic import tensor
from relwrite.graph.fg import FunctionGraph

pytestmark = pytest.mark.skipif(not c_available(), reason="no working C compiler")
TOLERANCE = {"float64": 1e-12, "float32": 1e-5}


def linked(op, dtype: str, ndim: int):
    x = tensor("x", dtype=dtype, shape=(None,) * ndim)
    fgraph = FunctionGraph([x], [op(x)])
    return CLinker(fgraph), NumpyLinker(fgraph)


def assert_close(got: np.ndarray, want: np.ndarray, dtype: str, scale: float) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    tolerance = TOLERANCE[dtype]
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * scale, equal_nan=True)


@st.composite
def reduction_cases(draw):
    dtype = draw(st.sampled_from(sorted(TOLERANCE)))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=6))
    ndim = len(shape)
    first = draw(st.integers(0, ndim - 1))
    last = draw(st.integers(first, ndim - 1))
    axis = draw(st.sampled_from([None, tuple(range(first, last + 1)), first - ndim, tuple({0, ndim - 1})]))
    values = draw(hnp.arrays(dtype, shape, elements=st.floats(-100, 100, width=int(dtype[-2:]))))
    return dtype, axis, values


@given(reduction_cases(), st.sampled_from([ops.Sum, ops.Mean]))
def test_sums_and_means_over_any_axes_agree_with_numpy(case, kind):
    dtype, axis, values = case
    c_linker, numpy_linker = linked(kind(axis), dtype, values.ndim)
    assert c_linker.c_nodes  # the C kernel, or NumPy for what it does not cover (inside the impl)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's mean of an empty slice says so
        want = numpy_linker(values)[0]
        got = c_linker(values)[0]
    assert_close(got, want, dtype, scale=100.0 * max(values.size, 1))


@given(
    st.sampled_from(sorted(TOLERANCE)),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=9),
    st.sampled_from([ops.Softmax, ops.LogSoftmax]),
    st.integers(-1, 0),
    st.data(),
)
def test_softmax_along_either_axis_agrees_with_numpy_on_any_values(dtype, shape, kind, axis, data):
    special = st.sampled_from([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30])
    elements = st.one_of(st.floats(-50, 50, width=int(dtype[-2:])), special)
    values = data.draw(hnp.arrays(dtype, shape, elements=elements))
    c_linker, numpy_linker = linked(kind(axis), dtype, len(shape))
    with np.errstate(all="ignore"):
        try:
            want = numpy_linker(values)[0]
        except Exception as error:  # an empty axis has no maximum: the same error from both
            with pytest.raises(type(error)):
                c_linker(values)
            return
        got = c_linker(values)[0]
    assert_close(got, want, dtype, scale=1.0)


def test_the_linker_runs_the_kernels_and_they_win_on_rows():
    x = rw.matrix("x")
    fgraph = FunctionGraph([x], [ops.Softmax(-1)(x), ops.Sum(1)(x), ops.Max(1)(x)])
    kinds = {type(n.op) for n in CLinker(fgraph).c_nodes}
    assert kinds == {ops.Softmax, ops.Sum}  # Max stays NumPy's


def test_an_empty_reduction_gives_numpys_result():
    c_linker, _ = linked(ops.Sum(0), "float64", 2)
    np.testing.assert_array_equal(c_linker(np.empty((0, 3)))[0], np.zeros(3))

"""C kernels for Sum, Mean, Prod, Max, Min, Argmax, Argmin, Softmax, LogSoftmax and Join: NumPy's results
(bit for bit, but for softmaxes, which agree to rounding), NumPy's shapes, and NumPy's results or errors
on every edge (non-finite values, empty axes, other axes and dtypes)."""

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
    np.testing.assert_array_equal(got, want)  # NumPy's pairwise summation, step for step
    assert got.dtype == want.dtype


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


def test_the_linker_runs_the_kernels_of_every_reduction_and_join():
    x = rw.matrix("x")
    kinds = [ops.Softmax(-1), ops.Sum(1), ops.Prod(1), ops.Max(0), ops.Min(1), ops.Argmax(0), ops.Argmin(1)]
    fgraph = FunctionGraph([x], [kind(x) for kind in kinds] + [ops.Join(1)(x, x)])
    assert {type(n.op) for n in CLinker(fgraph).c_nodes} == {*map(type, kinds), ops.Join}


SPECIAL = st.sampled_from([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30])


@given(reduction_cases(), st.sampled_from([ops.Prod, ops.Max, ops.Min]), st.data())
def test_products_and_extremes_over_any_axes_agree_with_numpy_on_any_values(case, kind, data):
    dtype, axis, values = case
    if data.draw(st.booleans()):  # infinities, NaNs and signed zeros, placed anywhere
        specials = data.draw(hnp.arrays(dtype, values.shape, elements=SPECIAL))
        mask = data.draw(hnp.arrays(bool, values.shape))
        values = np.where(mask, specials, values).astype(dtype)
    c_linker, numpy_linker = linked(kind(axis), dtype, values.ndim)
    with np.errstate(all="ignore"):
        try:
            want = numpy_linker(values)[0]
        except Exception as error:  # the extreme of an empty axis: the same error from both
            with pytest.raises(type(error)):
                c_linker(values)
            return
        got = c_linker(values)[0]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


@given(
    st.sampled_from(sorted(TOLERANCE)),
    hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=6),
    st.sampled_from([ops.Argmax, ops.Argmin]),
    st.data(),
)
def test_argmax_and_argmin_along_any_axis_give_numpys_first_index(dtype, shape, kind, data):
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    elements = st.one_of(st.integers(-3, 3).map(float), SPECIAL)  # ties, NaNs and infinities
    values = data.draw(hnp.arrays(dtype, shape, elements=elements))
    c_linker, numpy_linker = linked(kind(axis), dtype, len(shape))
    try:
        want = numpy_linker(values)[0]
    except Exception as error:  # an empty axis: the same error from both
        with pytest.raises(type(error)):
            c_linker(values)
        return
    got = c_linker(values)[0]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype == np.int64


@given(
    st.sampled_from(["float64", "float32", "int64", "int8", "bool"]),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
    st.integers(1, 4),
    st.data(),
)
def test_join_of_any_dtype_agrees_with_numpy_and_refuses_what_numpy_refuses(dtype, shape, count, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    arrays = []
    for _ in range(count):
        this = list(shape)
        this[axis] = data.draw(st.integers(0, 4))
        if data.draw(st.integers(0, 9)) == 0 and len(shape) > 1:  # sometimes a mismatch elsewhere
            this[(axis + 1) % len(shape)] += 1
        arrays.append(data.draw(hnp.arrays(dtype, tuple(this))))
    if data.draw(st.booleans()) and arrays[0].ndim > 1:
        arrays[0] = np.asfortranarray(arrays[0])  # not C-contiguous
    xs = [tensor(f"x{i}", dtype=dtype, shape=(None,) * len(shape)) for i in range(count)]
    fgraph = FunctionGraph(xs, [ops.Join(axis)(*xs)])
    c_linker, numpy_linker = CLinker(fgraph), NumpyLinker(fgraph)
    assert c_linker.c_nodes
    try:
        want = numpy_linker(*arrays)[0]
    except Exception as error:
        with pytest.raises(type(error)):
            c_linker(*arrays)
        return
    got = c_linker(*arrays)[0]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


def test_an_empty_reduction_gives_numpys_result():
    c_linker, _ = linked(ops.Sum(0), "float64", 2)
    np.testing.assert_array_equal(c_linker(np.empty((0, 3)))[0], np.zeros(3))


@pytest.mark.parametrize(
    ("dtype", "spread"), [("float64", 760.0), ("float64", 700.0), ("float32", 110.0), ("float32", 86.0)]
)
def test_softmax_keeps_subnormal_and_vanishing_terms_to_a_few_ulps(dtype, spread):
    """The kernel's own exp: down to the subnormals and below them (to zero), as NumPy's; rows whose terms
    are all normal numbers (the smaller spreads) take the vector path where the CPU has one."""
    rng = np.random.default_rng(7)
    values = (-rng.uniform(0, spread, (50, 257))).astype(dtype)
    values[:, 0] = 0.0  # each row's maximum is 0, so every term is exp of a value down to -spread
    c_linker, numpy_linker = linked(ops.Softmax(-1), dtype, 2)
    got, want = c_linker(values)[0], numpy_linker(values)[0]
    assert np.array_equal(got == 0, want == 0)
    tiny = np.finfo(dtype).smallest_subnormal
    ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.maximum(np.abs(want), tiny))
    assert ulps.max() <= 8  # exp within an ulp; the sum's order and the multiply by 1/sum add a few


def test_an_ill_conditioned_sum_is_numpys_to_the_bit():
    """A sum that cancels (1e300 - 1e300 - 1) depends on the order of the additions: NumPy's."""
    c_linker, numpy_linker = linked(ops.Sum(None), "float64", 1)
    values = np.array([0.0, 1e300, 0.0, 0.0, 0.0, 0.0, -1e300, 0.0, -1.0])
    assert c_linker(values)[0] == numpy_linker(values)[0] == -1.0


@pytest.mark.parametrize("linker", [CLinker, NumpyLinker])
def test_log_softmax_of_a_dominant_maximum_keeps_every_digit(linker):
    """log_softmax([25.68, 0, 0, -16.17]) at the maximum is -log1p(1.4e-11): log(1 + 1.4e-11) would keep
    only half its digits.  Against mpmath, to a few ulps, along the last axis and along the first."""
    mpmath = pytest.importorskip("mpmath")
    row = [25.684834542525973, 0.0, 0.0, -16.173611786006553]
    mp = mpmath.MPContext()
    mp.prec = 200
    total = mp.fsum(mp.exp(mp.mpf(v) - row[0]) for v in row)
    exact = np.array([float(mp.mpf(v) - row[0] - mp.log(total)) for v in row])
    x = tensor("x", dtype="float64", shape=(None, None))
    for axis, values in ((-1, np.array([row])), (0, np.array([row]).T)):
        got = linker(FunctionGraph([x], [ops.LogSoftmax(axis)(x)]))(values)[0].ravel()
        np.testing.assert_allclose(got, exact, rtol=4e-16, atol=0)


@pytest.mark.parametrize("linker", [CLinker, NumpyLinker])
def test_log_softmax_rounding_to_zero_below_it_is_minus_zero(linker):
    """A maximum's entry is -log1p(the others' terms): below zero wherever another entry is above -inf,
    so where it rounds to zero it is -0.0 and 1 / log_softmax is -inf (fuzzer seed 31, graph 2023: 0 - 0
    gave +0.0).  A row of one entry, or whose others are -inf, is exactly 0."""
    x = tensor("x", dtype="float64", shape=(None, None))
    f = linker(FunctionGraph([x], [ops.LogSoftmax(-1)(x)]))
    for row, signs in (([0.0, -800.0], [True, True]), ([5.9e19, 0.0], [True, True]), ([3.0], [False])):
        got = f(np.array([row]))[0].ravel()
        assert got[0] == 0 and list(np.signbit(got)) == signs, (row, got)
    if linker is NumpyLinker:  # the C kernel leaves rows holding an infinity to NumPy
        got = f(np.array([[1.0, -np.inf], [np.inf, 1.0]]))[0]
        assert got[0, 0] == 0 and not np.signbit(got[0, 0])
        assert got[1, 0] == 0 and np.signbit(got[1, 0])


@pytest.mark.parametrize("linker", [CLinker, NumpyLinker])
def test_a_float32_softmax_is_rounded_once(linker):
    """softmax([15.81, 0, -7.17, 0]) in float32 is the exact softmax rounded once: a float32 sum rounded
    1 + 4.07e-7 to 1 + 3.58e-7 and a float exp is within an ulp, each an ulp off at the maximum or at
    the smallest term (fuzzer seed 35, graph 2361, where a power amplified it)."""
    mpmath = pytest.importorskip("mpmath")
    row = [15.81253719329834, 0.0, -7.171184539794922, 0.0]
    mp = mpmath.MPContext()
    mp.prec = 200
    total = mp.fsum(mp.exp(mp.mpf(v)) for v in row)
    exact = np.array([float(mp.exp(mp.mpf(v)) / total) for v in row]).astype(np.float32)
    x = tensor("x", dtype="float32", shape=(None, None))
    got = linker(FunctionGraph([x], [ops.Softmax(-1)(x)]))(np.array([row], dtype=np.float32))[0]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got[0], exact)


@pytest.mark.parametrize("linker", [CLinker, NumpyLinker])
def test_a_float32_log_softmax_is_rounded_once(linker):
    """A float32 log_softmax is the exact value rounded once (a third of the elements were an ulp off
    when it was computed in float): rows of 2 to 5 entries of several scales, against mpmath."""
    mpmath = pytest.importorskip("mpmath")
    mp = mpmath.MPContext()
    mp.prec = 120
    rng = np.random.default_rng(0)
    x = tensor("x", dtype="float32", shape=(None, None))
    f = linker(FunctionGraph([x], [ops.LogSoftmax(-1)(x)]))
    for _ in range(100):
        row = (rng.standard_normal(int(rng.integers(2, 6))) * rng.choice([1, 5, 20])).astype(np.float32)
        top = float(row.max())
        total = mp.fsum(mp.exp(mp.mpf(float(v)) - top) for v in row)
        exact = np.array([float(mp.mpf(float(v)) - top - mp.log(total)) for v in row]).astype(np.float32)
        np.testing.assert_array_equal(f(row[None])[0][0], exact)

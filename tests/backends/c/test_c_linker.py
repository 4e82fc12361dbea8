"""The C linker gives the NumPy backend's results: fused loops on any dtypes, layouts and values, BLAS ops."""

from __future__ import annotations

import ctypes
import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

from relwrite.backends.c import CLinker, c_available
from relwrite.backends.c.codegen import GENERATOR_VERSION, ndarray_layout, runtime_source
from relwrite.backends.numpy import EvaluationError, NumpyLinker, evaluate
from relwrite.backends.numpy.function import Function
from relwrite.compile.function import function
from relwrite.graph import ops
from relwrite.graph.basic import Constant, Variable, constant, matrix, scalar, tensor, vector
from relwrite.graph.fg import FunctionGraph

requires_c = pytest.mark.skipif(not c_available(), reason="no working C compiler")
pytestmark = requires_c

FLOAT_OPS = (
    ops.add,
    ops.mul,
    ops.sub,
    ops.true_div,
    ops.neg,
    ops.exp,
    ops.log,
    ops.log1p,
    ops.expm1,
    ops.sqrt,
    ops.sqr,
    ops.sin,
    ops.cos,
    ops.tanh,
    ops.tan,
    ops.asin,
    ops.acos,
    ops.atan,
    ops.sinh,
    ops.cosh,
    ops.cbrt,
    ops.hypot,
    ops.atan2,
    ops.fma,
    ops.abs,
    ops.maximum,
    ops.minimum,
    ops.pow,
    ops.reciprocal,
    ops.sigmoid,
    ops.softplus,
    ops.lt,
    ops.ge,
    ops.switch,
    ops.identity,
)
INT_OPS = (
    ops.add,
    ops.mul,
    ops.sub,
    ops.true_div,
    ops.neg,
    ops.abs,
    ops.sqr,
    ops.maximum,
    ops.minimum,
    ops.lt,
    ops.eq,
    ops.neq,
    ops.switch,
    ops.fill,
    ops.Cast("float64"),
    ops.Cast("int16"),
    ops.Cast("bool"),
)
SPECIAL_FLOATS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.0, 1e-310, 1e300, -1e300)
RTOL = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2}


def link(inputs: list[Variable], outputs: list[Variable]) -> tuple[CLinker, NumpyLinker]:
    fgraph = FunctionGraph(inputs, outputs)
    return CLinker(fgraph), NumpyLinker(fgraph)


def tolerance_of(op: ops.Composite, arrays: list[np.ndarray]) -> tuple[float, float]:
    """(rtol, atol) for the composite's results: by its least precise float dtype, atol scaled by the
    largest finite magnitude among its inputs and inner values (as numpy computes them)."""
    values: dict[Variable, np.ndarray] = dict(zip(op.inputs, arrays))
    with np.errstate(all="ignore"):
        for node in op.nodes:
            args = [v.data if isinstance(v, Constant) else values[v] for v in node.inputs]
            values.update(zip(node.outputs, evaluate(node, args)))
    rtol, scale = RTOL["float64"], 1.0
    for value in values.values():
        value = np.asarray(value)
        if value.dtype.kind == "f":
            rtol = max(rtol, RTOL[value.dtype.name])
        finite = np.abs(value[np.isfinite(value)].astype(np.float64))
        if finite.size:
            scale = max(scale, float(finite.max()))
    return rtol, rtol * scale


def assert_same(got: np.ndarray, want: np.ndarray, tolerance: tuple[float, float] | None = None) -> None:
    """Equal for exact dtypes; for floats, NaN and infinities where numpy has them, close elsewhere."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    infinite = np.isinf(want)
    np.testing.assert_array_equal(got[infinite], want[infinite])
    finite = ~np.isnan(want) & ~infinite
    rtol, atol = tolerance or (RTOL[want.dtype.name], RTOL[want.dtype.name])
    atol = min(atol, float(np.finfo(want.dtype).max))
    np.testing.assert_allclose(got[finite], want[finite], rtol=max(rtol, RTOL[want.dtype.name]), atol=atol)


def applied(op: ops.Composite, outer: list[Variable]) -> list[Variable]:
    return op(*outer) if len(op.outputs) > 1 else [op(*outer)]


def check_against_numpy(
    inputs: list[Variable],
    outputs: list[Variable],
    arrays: list[np.ndarray],
    tolerance: tuple[float, float] | None = None,
) -> CLinker:
    c_linker, numpy_linker = link(inputs, outputs)
    with np.errstate(all="ignore"):
        want = numpy_linker(*arrays)
        got = c_linker(*arrays)
    for g, w in zip(got, want):
        assert_same(g, w, tolerance)
    return c_linker


# -- strategies ----------------------------------------------------------------------------------------


def elements(dtype: np.dtype, special: bool) -> st.SearchStrategy:
    if dtype.kind != "f":
        return hnp.from_dtype(dtype)
    if special:
        largest = float(np.finfo(dtype).max)
        return st.sampled_from([v for v in SPECIAL_FLOATS if not np.isfinite(v) or abs(v) < largest])
    return st.floats(-1e3, 1e3, width=dtype.itemsize * 8)


@st.composite
def composites(draw: st.DrawFn, dtypes: tuple[str, ...], pool_ops: tuple, max_nodes: int = 10):
    """A Composite over 1-3 0-d inputs of `dtypes`, built from `pool_ops` (rejected operands skipped)."""
    inputs = [scalar(f"x{k}", draw(st.sampled_from(dtypes))) for k in range(draw(st.integers(1, 3)))]
    pool: list[Variable] = list(inputs)
    for _ in range(draw(st.integers(0, 2))):
        dtype = np.dtype(draw(st.sampled_from(dtypes)))
        pool.append(constant(draw(elements(dtype, special=False)), dtype=dtype.name))
    made: list[Variable] = []
    for _ in range(draw(st.integers(1, max_nodes))):
        op = draw(st.sampled_from(pool_ops))
        count = op.nin if op.nin is not None else draw(st.integers(1, 3))
        operands = [draw(st.sampled_from(pool)) for _ in range(count)]
        if made and draw(st.booleans()):
            operands[0] = made[-1]  # grow deep chains
        try:
            node = op.make_node(*operands)
        except TypeError:
            continue
        pool.extend(node.outputs)
        made.extend(node.outputs)
    if not made:
        made.append(ops.identity(inputs[0]))
    outputs = [made[-1]]
    if len(made) > 1 and draw(st.booleans()):
        outputs.append(draw(st.sampled_from(made[:-1])))
    return ops.Composite(inputs, outputs)


@st.composite
def laid_out(draw: st.DrawFn, dtype: np.dtype, shape: tuple[int, ...], special: bool) -> np.ndarray:
    """An array of `shape`: contiguous, Fortran-ordered, reversed, strided or a broadcast view."""
    layout = draw(st.sampled_from(["c", "f", "reversed", "strided", "broadcast"]))
    if layout == "strided":
        doubled = tuple(2 * n for n in shape)
        big = np.asarray(draw(hnp.arrays(dtype, doubled, elements=elements(dtype, special))))
        return big[tuple(slice(None, None, 2) for _ in shape)] if shape else big
    if layout == "broadcast" and shape:
        row = draw(hnp.arrays(dtype, shape[-1:], elements=elements(dtype, special)))
        return np.broadcast_to(row, shape)
    array = np.asarray(draw(hnp.arrays(dtype, shape, elements=elements(dtype, special))))
    if layout == "f":
        return np.asfortranarray(array)
    if layout == "reversed" and shape:
        return np.ascontiguousarray(array[..., ::-1])[..., ::-1]
    return array


@st.composite
def composite_cases(draw: st.DrawFn, dtypes: tuple[str, ...], pool_ops: tuple, special: bool = False):
    """A Composite applied to outer variables of broadcastable ranks, and arrays for them."""
    op = draw(composites(dtypes, pool_ops))
    shapes = draw(
        hnp.mutually_broadcastable_shapes(num_shapes=len(op.inputs), min_dims=0, max_dims=3, max_side=5)
    ).input_shapes
    outer = [tensor(f"x{k}", v.dtype, (None,) * len(s)) for k, (v, s) in enumerate(zip(op.inputs, shapes))]
    arrays = [draw(laid_out(np.dtype(v.dtype), s, special)) for v, s in zip(op.inputs, shapes)]
    return op, outer, arrays


# -- elementwise ----------------------------------------------------------------------------------------


@given(composite_cases(("float64",), FLOAT_OPS))
def test_float64_composites_equal_numpy(case):
    op, outer, arrays = case
    check_against_numpy(outer, applied(op, outer), arrays, tolerance_of(op, arrays))


@given(composite_cases(("float32",), FLOAT_OPS))
def test_float32_composites_equal_numpy(case):
    op, outer, arrays = case
    check_against_numpy(outer, applied(op, outer), arrays, tolerance_of(op, arrays))


@given(composite_cases(("float64", "float32"), FLOAT_OPS, special=True))
def test_nan_inf_and_denormals_propagate_as_in_numpy(case):
    op, outer, arrays = case
    check_against_numpy(outer, applied(op, outer), arrays, tolerance_of(op, arrays))


@given(composite_cases(("int8", "uint8", "int32", "int64", "uint64", "bool", "float64"), INT_OPS))
def test_integer_bool_and_mixed_composites_equal_numpy(case):
    op, outer, arrays = case
    check_against_numpy(outer, applied(op, outer), arrays, tolerance_of(op, arrays))


def test_a_float_composite_runs_as_one_compiled_loop():
    xi, yi = scalar("x"), scalar("y")
    op = ops.Composite([xi, yi], [ops.tanh(ops.exp(xi) * yi) + ops.sin(yi) / ops.sqrt(ops.abs(xi) + 1.0)])
    x, y = matrix("x"), vector("y")
    a = np.random.default_rng(0).standard_normal((50, 40))
    b = np.random.default_rng(1).standard_normal(40)
    linker = check_against_numpy([x, y], [op(x, y)], [a, b])
    assert [n.op for n in linker.c_nodes] == [op]
    check_against_numpy([x, y], [op(x, y)], [a.T.copy().T[::2, ::-1], b[::-1]])


def test_integer_wraparound_and_signed_extremes_match_numpy():
    xi, yi = scalar("x", "int8"), scalar("y", "int8")
    op = ops.Composite([xi, yi], [ops.abs(xi) + ops.neg(yi) * xi, ops.sqr(xi) - yi])
    x, y = vector("x", "int8"), vector("y", "int8")
    values = np.array([-128, -127, -1, 0, 1, 127], dtype=np.int8)
    linker = check_against_numpy([x, y], op(x, y), [np.repeat(values, 6), np.tile(values, 6)])
    assert linker.c_nodes


def test_maximum_and_minimum_propagate_nan_and_break_ties_like_numpy():
    xi, yi = scalar("x"), scalar("y")
    op = ops.Composite([xi, yi], [ops.maximum(xi, yi), ops.minimum(xi, yi), 1.0 / ops.maximum(xi, yi)])
    x, y = vector("x"), vector("y")
    grid = np.array([np.nan, 0.0, -0.0, 1.0, -np.inf, np.inf])
    a, b = np.repeat(grid, grid.size), np.tile(grid, grid.size)
    c_linker, numpy_linker = link([x, y], op(x, y))
    with np.errstate(divide="ignore"):
        pairs = list(zip(c_linker(a, b), numpy_linker(a, b)))
    for got, want in pairs:
        np.testing.assert_array_equal(got, want)  # exact, signs of zeros and infinities included


def test_sigmoid_and_softplus_are_stable_at_the_extremes():
    xi = scalar("x")
    op = ops.Composite([xi], [ops.sigmoid(xi), ops.softplus(xi)])
    x = vector("x")
    a = np.array([-1e4, -800.0, -40.0, -1.0, 0.0, 1.0, 40.0, 800.0, 1e4, np.inf, -np.inf, np.nan])
    sig, soft = check_against_numpy([x], op(x), [a])(a)
    assert np.all(np.isfinite(sig[:-1])) and sig[0] == 0.0 and sig[8] == 1.0
    assert soft[8] == 1e4 and soft[0] == 0.0 and soft[4] == np.log(2.0)


def test_nested_composites_are_inlined():
    ai, bi = scalar("a"), scalar("b")
    inner = ops.Composite([ai, bi], [ops.exp(ai) - bi, ai * bi])
    xi, yi = scalar("x"), scalar("y")
    first, second = inner(xi, yi)
    outer_op = ops.Composite([xi, yi], [ops.tanh(first) + second])
    x, y = vector("x"), vector("y")
    a, b = np.linspace(-2, 2, 7), np.linspace(3, -1, 7)
    linker = check_against_numpy([x, y], [outer_op(x, y)], [a, b])
    assert linker.c_nodes


def test_inputs_of_size_zero_and_single_elements():
    xi, yi = scalar("x"), scalar("y")
    op = ops.Composite([xi, yi], [ops.exp(xi) + yi])
    x, y = matrix("x"), vector("y")
    check_against_numpy([x, y], [op(x, y)], [np.ones((0, 3)), np.ones(3)])
    check_against_numpy([x, y], [op(x, y)], [np.ones((1, 1)), np.ones(1)])


def test_unaligned_inputs_are_read_safely():
    raw = np.zeros(8 * 64 + 1, dtype=np.uint8)
    unaligned = raw[1:].view(np.float64)
    unaligned[:] = np.linspace(-3, 3, 64)
    assert not unaligned.flags.aligned
    xi = scalar("x")
    op = ops.Composite([xi], [ops.exp(xi) * 2.0])
    x = vector("x")
    check_against_numpy([x], [op(x)], [unaligned])
    check_against_numpy([x], [op(x)], [unaligned[::3]])


def test_0d_composites_compile_and_plain_elementwise_nodes_stay_with_numpy():
    xi, yi = scalar("x"), scalar("y")
    op = ops.Composite([xi, yi], [xi + yi])
    x, y = scalar("x"), scalar("y")
    assert link([x, y], [op(x, y)])[0].c_nodes
    assert not link([x, y], [x + y])[0].c_nodes
    check_against_numpy([x, y], [op(x, y)], [np.array(0.5), np.array(2.0)])


def test_unsupported_inner_ops_leave_the_node_to_numpy():
    xi, yi = scalar("x", "int32"), scalar("y", "int32")
    op = ops.Composite([xi, yi], [ops.pow(xi, yi) + 1])  # integer power: numpy raises on negative exponents
    x, y = vector("x", "int32"), vector("y", "int32")
    linker = check_against_numpy([x, y], [op(x, y)], [np.arange(5, dtype=np.int32), np.full(5, 2, np.int32)])
    assert not linker.c_nodes


def test_inputs_of_another_rank_take_numpys_broadcasting():
    xi, yi = scalar("x"), scalar("y")
    op = ops.Composite([xi, yi], [ops.exp(xi) * yi])
    x, y = vector("x"), scalar("y")
    c_linker, numpy_linker = link([x, y], [op(x, y)])
    a, b = np.ones(3), np.arange(6.0).reshape(2, 3)  # b breaks its 0-d type: the kernel declines
    np.testing.assert_array_equal(c_linker(a, b)[0], numpy_linker(a, b)[0])
    with pytest.raises(EvaluationError, match="Composite"):
        c_linker(np.ones(3), np.ones((2, 2)))


def test_kernel_inputs_must_be_arrays_of_their_dtype():
    xi = scalar("x")
    op = ops.Composite([xi], [ops.exp(xi) + 1.0])
    x = vector("x")
    linker, _ = link([x], [op(x)])
    with pytest.raises(TypeError, match=r"input 0 .* must be a float64 ndarray, got a float32 array"):
        linker(np.ones(3, dtype=np.float32))
    with pytest.raises(TypeError, match="got a list"):
        linker([1.0, 2.0])
    np.testing.assert_allclose(linker(np.ma.masked_array(np.zeros(2)))[0], [2.0, 2.0])


def test_outputs_that_alias_inputs_are_copies():
    xi = scalar("x")
    op = ops.Composite([xi], [ops.exp(xi)])
    x = vector("x")
    linker, _ = link([x], [op(x), x])
    a = np.ones(3)
    assert not np.shares_memory(linker(a)[1], a)


# -- denormals, threads and the GIL --------------------------------------------------------------------------


def test_loading_modules_keeps_denormals():
    xi = scalar("x")
    op = ops.Composite([xi], [xi * 1.0 + 0.0])
    x, m = vector("x"), matrix("m")
    linker, _ = link([x, m], [op(x), ops.dot22(m, m)])  # the runtime, BLAS and graph modules
    assert len(linker.c_nodes) == 2
    tiny = np.array([1e-310, -5e-324])
    np.testing.assert_array_equal(linker(tiny, np.eye(2))[0], tiny)
    assert np.array(1e-310) * 1.0 == 1e-310  # numpy itself: no flush-to-zero from a loaded module
    assert np.float64(1e-310) * np.float64(1.0) != 0.0


def long_linker() -> tuple[CLinker, np.ndarray]:
    xi = scalar("x")
    op = ops.Composite([xi], [ops.tanh(ops.sin(ops.exp(ops.cos(xi)))) + ops.log1p(ops.sqr(xi))])
    x = vector("x")
    linker, _ = link([x], [op(x)])
    return linker, np.linspace(-1.0, 1.0, 4_000_000)


def test_kernels_are_foreign_functions_that_release_the_gil():
    from relwrite.backends.c.linker import _function, _runtime

    module = _runtime().cache.load(runtime_source(ndarray_layout()), (GENERATOR_VERSION,))
    probe = _function(module, "rw_probe", 1)
    assert not probe._flags_ & ctypes._FUNCFLAG_PYTHONAPI  # a PYFUNCTYPE would keep the GIL
    assert probe(np.empty((2, 3))) == 2003


def test_another_thread_keeps_running_during_a_long_kernel():
    linker, data = long_linker()
    call: list[float] = []
    worker = threading.Thread(
        target=lambda: (call.append(time.perf_counter()), linker(data), call.append(time.perf_counter()))
    )
    ticks = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
    worker.join()
    start, end = call
    quarter = (end - start) / 4
    # Holding the GIL through the kernel would stop this thread for the whole middle of the call.
    assert any(start + quarter < t < end - quarter for t in ticks)


def test_concurrent_calls_from_threads_are_correct():
    xi, yi = scalar("x"), scalar("y")
    op = ops.Composite([xi, yi], [ops.exp(xi) * yi - ops.sin(xi)])
    x, y = vector("x"), vector("y")
    linker, _ = link([x, y], [op(x, y)])
    data = [(np.full(20_000, k / 7.0), np.linspace(0, k, 20_000)[::-1]) for k in range(24)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda pair: linker(*pair)[0], data))
    for (a, b), got in zip(data, results):
        np.testing.assert_array_equal(got, linker(a, b)[0])


# -- BLAS ---------------------------------------------------------------------------------------------------

BLAS_RTOL = {"float64": 1e-11, "float32": 1e-4}


def layouts(array: np.ndarray) -> list[np.ndarray]:
    """The same values as C-ordered, Fortran-ordered (a transpose for BLAS), strided and reversed arrays."""
    big = np.zeros(tuple(2 * n for n in array.shape), dtype=array.dtype)
    strided = big[tuple(slice(None, None, 2) for _ in array.shape)]
    strided[...] = array
    reversed_ = np.ascontiguousarray(array[::-1])[::-1]
    return [array, np.asfortranarray(array), strided, reversed_]


def blas_graph(dtype: str) -> tuple[list[Variable], list[Variable]]:
    z, x, y = matrix("Z", dtype), matrix("X", dtype), matrix("Y", dtype)
    a, b = scalar("a", dtype), scalar("b", dtype)
    v, w = vector("v", dtype), vector("w", dtype)
    return [z, a, x, y, b, v, w], [
        ops.gemm(z, a, x, y, b),
        ops.dot22(x, y),
        ops.gemv(v, a, x, w, b),
        ops.ger(z, a, v, w),
    ]


def blas_values(dtype: str, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    def normal(*shape):
        return rng.standard_normal(shape).astype(dtype)

    a, b = np.array(1.5, dtype), np.array(-0.5, dtype)
    return [normal(n, n), a, normal(n, n), normal(n, n), b, normal(n), normal(n)]


def check_blas(dtype: str, values: list[np.ndarray]) -> CLinker:
    inputs, outputs = blas_graph(dtype)
    c_linker, numpy_linker = link(inputs, outputs)
    with np.errstate(all="ignore"):
        for got, want in zip(c_linker(*values), numpy_linker(*values)):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=BLAS_RTOL[dtype], atol=BLAS_RTOL[dtype] * 10)
    return c_linker


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("layout", range(4))
def test_blas_ops_equal_numpy_on_every_layout(dtype, layout):
    rng = np.random.default_rng(layout)
    values = blas_values(dtype, 7, rng)
    values = [layouts(v)[layout] if v.ndim else v for v in values]
    linker = check_blas(dtype, values)
    assert len(linker.c_nodes) == 4


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_blas_ops_on_transposed_and_mixed_layouts(dtype):
    rng = np.random.default_rng(5)
    z, a, x, y, b, v, w = blas_values(dtype, 6, rng)
    check_blas(dtype, [z.T, a, x.T, y, b, v[::-1], w])
    check_blas(dtype, [z, a, x, y.T, b, v, w[::-1]])
    check_blas(dtype, [np.broadcast_to(z[:1], z.shape), a, x[:, ::-1], y.T[::-1], b, v, w])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_blas_ops_on_rectangular_and_empty_shapes(dtype):
    rng = np.random.default_rng(3)
    z, x, y = matrix("Z", dtype), matrix("X", dtype), matrix("Y", dtype)
    a, b = scalar("a", dtype), scalar("b", dtype)
    v, w, u = vector("v", dtype), vector("w", dtype), vector("u", dtype)
    outputs = [ops.gemm(z, a, x, y, b), ops.dot22(x, y), ops.gemv(v, a, x, w, b), ops.ger(z, a, v, u)]
    c_linker, numpy_linker = link([z, a, x, y, b, v, w, u], outputs)
    for m, k, n in [(3, 5, 2), (1, 4, 1), (0, 3, 2), (3, 0, 2), (2, 3, 0), (4, 1, 3)]:
        values = [
            rng.standard_normal((m, n)).astype(dtype),
            np.array(2.0, dtype),
            rng.standard_normal((m, k)).astype(dtype),
            rng.standard_normal((k, n)).astype(dtype),
            np.array(0.25, dtype),
            rng.standard_normal(m).astype(dtype),
            rng.standard_normal(k).astype(dtype),
            rng.standard_normal(n).astype(dtype),
        ]
        for got, want in zip(c_linker(*values), numpy_linker(*values)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=BLAS_RTOL[dtype], atol=1e-5)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_blas_ops_propagate_nan_and_inf_like_numpy(dtype):
    rng = np.random.default_rng(9)
    z, a, x, y, b, v, w = blas_values(dtype, 5, rng)
    x[1, 2], y[0, 0], z[3, 3], v[2], w[4] = np.nan, np.inf, -np.inf, np.inf, np.nan
    w[0] = 0.0  # inf * 0 in the outer product is NaN in numpy
    check_blas(dtype, [z, a, x, y, b, v, w])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_zero_scales_keep_numpys_nan_semantics(dtype):
    rng = np.random.default_rng(11)
    z, _, x, y, _, v, w = blas_values(dtype, 4, rng)
    z[0, 0], x[1, 1], v[0] = np.inf, np.inf, np.nan
    zero = np.array(0.0, dtype)
    check_blas(dtype, [z, zero, x, y, zero, v, w])  # 0 * inf is NaN in numpy; BLAS would skip it
    check_blas(dtype, [z, np.array(1.0, dtype), x, y, zero, v, w])


def test_gemm_broadcasts_z_as_numpy_does():
    z, x, y, a, b = matrix("Z"), matrix("X"), matrix("Y"), scalar("a"), scalar("b")
    rng = np.random.default_rng(2)
    values = [rng.standard_normal((1, 3)), np.array(2.0), rng.standard_normal((4, 5))]
    values.append(rng.standard_normal((5, 3)))
    check_against_numpy([z, a, x, y, b], [ops.gemm(z, a, x, y, b)], [*values, np.array(3.0)])


def test_blas_threads_are_controlled_by_threadpoolctl():
    from threadpoolctl import threadpool_info, threadpool_limits

    from relwrite.backends.c.blas import find_blas

    blas = find_blas()
    if blas is None:
        pytest.skip("no CBLAS in this process")
    loaded = {info["filepath"]: info for info in threadpool_info()}
    assert blas.path in loaded
    with threadpool_limits(limits=1, user_api="blas"):
        assert {i["filepath"]: i for i in threadpool_info()}[blas.path]["num_threads"] == 1
        rng = np.random.default_rng(4)
        check_blas("float64", blas_values("float64", 64, rng))


# -- BLAS kernels round as numpy does: fast_run against fast_compile on special values -------------------

# Matrix entries are small multiples of 1/2 and one power of two, so every sum of products is exact
# whatever order BLAS sums in; the scales add a power of two that overflows next to the largest entries.
# Any difference is then the kernels' scaling and summing, which must be numpy's to the last bit.
BIG_ENTRY = {"float32": 2.0**8, "float64": 2.0**20}
HUGE_SCALE = {"float32": 2.0**120, "float64": 2.0**1010}


def entries(dtype: str) -> st.SearchStrategy[float]:
    finite = [0.0, -0.0, 1.0, 1.5, 2.0, 3.0, BIG_ENTRY[dtype]]
    return st.sampled_from([*finite, *(-v for v in finite[2:]), np.inf, -np.inf, np.nan])


def scales(dtype: str) -> st.SearchStrategy[float]:
    return st.one_of(entries(dtype), st.sampled_from([0.5, HUGE_SCALE[dtype], -HUGE_SCALE[dtype]]))


@st.composite
def blas_case(draw: st.DrawFn, dtype: str) -> tuple[str, list[np.ndarray]]:
    """An op name and its inputs: sizes up to 3, broadcast Z / y / A, transposed operands, special values."""
    name = draw(st.sampled_from(["gemm", "dot22", "gemv", "ger"]))
    m, k, n = (draw(st.integers(0, 3)) for _ in range(3))

    def array(*shape: int) -> np.ndarray:
        result = draw(hnp.arrays(dtype, shape, elements=entries(dtype)))
        return np.asfortranarray(result) if result.ndim == 2 and draw(st.booleans()) else result

    def scale() -> np.ndarray:
        return np.array(draw(scales(dtype)), dtype)

    def base(*shape: int) -> np.ndarray:  # broadcast to `shape` by the op
        ones = tuple(1 for _ in shape)
        rows_or_columns = [(1, shape[1]), (shape[0], 1)] if len(shape) == 2 else []
        return array(*draw(st.sampled_from([shape, ones, *rows_or_columns])))

    if name == "gemm":
        return name, [base(m, n), scale(), array(m, k), array(k, n), scale()]
    if name == "dot22":
        return name, [array(m, k), array(k, n)]
    if name == "gemv":
        return name, [base(m), scale(), array(m, k), array(k), scale()]
    return name, [base(m, n), scale(), array(m), array(n)]


@functools.cache
def blas_functions(name: str, dtype: str) -> tuple[Function, Function]:
    """The op alone, compiled with fast_run (C kernels) and fast_compile (NumPy)."""
    z, x, y = matrix("Z", dtype), matrix("X", dtype), matrix("Y", dtype)
    a, b, v, w = scalar("a", dtype), scalar("b", dtype), vector("v", dtype), vector("w", dtype)
    graphs = {
        "gemm": ([z, a, x, y, b], ops.gemm(z, a, x, y, b)),
        "dot22": ([x, y], ops.dot22(x, y)),
        "gemv": ([v, a, x, w, b], ops.gemv(v, a, x, w, b)),
        "ger": ([z, a, v, w], ops.ger(z, a, v, w)),
    }
    inputs, output = graphs[name]
    fast, reference = (function(inputs, output, mode=mode) for mode in ("fast_run", "fast_compile"))
    assert [type(node.op).__name__.lower() for node in fast.linker.c_nodes] == [name]
    return fast, reference


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@settings(max_examples=300)  # cheap examples; the failures of scaling first need a few hundred
@given(data=st.data())
def test_blas_kernels_agree_with_numpy_on_special_values(dtype, data):
    name, values = data.draw(blas_case(dtype))
    fast, reference = blas_functions(name, dtype)
    with np.errstate(all="ignore"):
        got, want = fast(*values), reference(*values)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want, err_msg=name)  # NaN where NaN, infinities of the same sign


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_blas_kernels_scale_after_the_product_as_numpy_does(dtype):
    a_huge = np.array(1e4 if dtype == "float32" else 1e300, dtype)
    x = np.array([3e38 if dtype == "float32" else 1e300], dtype)
    zero = np.zeros(1, dtype)
    fast, reference = blas_functions("ger", dtype)
    values = [np.array([[-17.0]], dtype), a_huge, x, zero]
    np.testing.assert_array_equal(fast(*values), [[-17.0]])  # a * (x * 0), not (a * x) * 0
    np.testing.assert_array_equal(fast(*values), reference(*values))
    fast, reference = blas_functions("gemv", dtype)
    values = [np.ones(1, dtype), a_huge, x[:, None], zero, np.array(1.0, dtype)]
    np.testing.assert_array_equal(fast(*values), reference(*values))
    fast, reference = blas_functions("gemm", dtype)
    values = [
        np.full((1, 1), -np.inf, dtype),
        a_huge,
        x[:, None],
        np.ones((1, 1), dtype),
        np.array(0.0, dtype),
    ]
    np.testing.assert_array_equal(fast(*values), reference(*values))  # 0 * -inf is NaN, as in numpy


@requires_c
def test_generated_sources_are_the_modules_the_linker_loads():
    from relwrite.backends.c import generated_sources
    from relwrite.backends.c.compiler import default_cache
    from relwrite.backends.c.linker import _blas_build, _reductions_build

    x, A, B = vector("x"), matrix("A"), matrix("B")
    f = function([x, A, B], [(ops.exp(x) * 2.0 + x).sum(), ops.dot(A, B).max(axis=0)], mode="fast_run")
    sources = generated_sources(f.fgraph)
    cache, blas = default_cache(), _blas_build(ndarray_layout())
    keys = {
        "graph": (GENERATOR_VERSION,),
        "runtime": (GENERATOR_VERSION,),
        "reductions": _reductions_build(cache)[1],
    }
    if blas is not None:  # a CBLAS was found
        keys["BLAS"] = blas[1]
    assert set(sources) == set(keys)
    for name, source in sources.items():
        assert cache.key(source, keys[name]) in cache._loaded, name  # the very source that was compiled
    assert "int rw_s0(" in sources["graph"]  # the sum computed with the loop
    assert generated_sources(FunctionGraph([x], [ops.exp(x)])) == {}  # a lone exp runs NumPy's


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_what_0d_inputs_alone_compute_is_one_value_for_every_element(dtype):
    """log1p of a 0-d input across a vector is computed once: a vectorized loop would take it from the
    vector math library in its SIMD lanes and from libm in its tail, which may differ in the last bit
    (an argmax of the equal values then picked a late element: fuzzer seed 19, graph 690)."""
    si, vi = scalar("s", dtype), scalar("v", dtype)
    op = ops.Composite([si, vi], [ops.log1p(ops.exp(si)) + vi * 0.0])
    s, v = tensor("s", dtype, ()), vector("v", dtype)
    c_linker, _ = link([s, v], [op(s, v)])
    assert [n.op for n in c_linker.c_nodes] == [op]
    zeros = np.zeros(37, dtype=dtype)
    for value in np.linspace(-3.0, 3.0, 97, dtype=dtype):
        (out,) = c_linker(np.array(value, dtype=dtype), zeros)
        assert np.all(out == out[0]) and np.argmax(out) == 0
        np.testing.assert_allclose(out[0], np.log1p(np.exp(np.float64(value))), rtol=1e-6)

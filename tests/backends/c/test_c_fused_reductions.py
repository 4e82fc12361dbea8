"""Sums and means of elementwise loops run as one kernel (no n-element array in between): the same
result as the unfused loop and reduction, bit for bit, and the unfused path wherever the kernel cannot
take the inputs as they are."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from relwrite.backends.c import CLinker, c_available
from relwrite.backends.c.fused_reductions import reductions_of_loops
from relwrite.backends.numpy import NumpyLinker
from relwrite.engine.fusion import FusionRewriter
from relwrite.graph import ops
from relwrite.graph.basic import constant, tensor
from relwrite.graph.fg import FunctionGraph

pytestmark = pytest.mark.skipif(not c_available(), reason="no working C compiler")


def fused_graph(build, dtype: str = "float64", ndim: int = 1) -> tuple[FunctionGraph, list]:
    x = tensor("x", dtype=dtype, shape=(None,) * ndim)
    y = tensor("y", dtype=dtype, shape=(None,) * ndim)
    s = tensor("s", dtype=dtype, shape=())
    fgraph = FunctionGraph([x, y, s], [build(x, y, s)])
    FusionRewriter().rewrite(fgraph)
    return fgraph


def unfused(fgraph: FunctionGraph) -> CLinker:
    """The same graph linked with no reduction fused into its loop."""
    import relwrite.backends.c.linker as linker_module

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(linker_module, "reductions_of_loops", lambda fgraph, nodes: {})
        return CLinker(fgraph)


_LINKED: dict[tuple, tuple] = {}


def linked(name: str, dtype: str, ndim: int) -> tuple[CLinker, CLinker, NumpyLinker]:
    """(fused, unfused, NumPy) linkers of ARITHMETIC[name], built once per test session."""
    key = (name, dtype, ndim)
    if key not in _LINKED:
        fgraph = fused_graph(ARITHMETIC[name], dtype, ndim)
        _LINKED[key] = CLinker(fgraph), unfused(fgraph), NumpyLinker(fgraph)
    return _LINKED[key]


ARITHMETIC = {
    "sum((x - y) * s + x * x)": lambda x, y, s: ops.Sum()(ops.add(ops.mul(ops.sub(x, y), s), ops.mul(x, x))),
    "mean(x * y)": lambda x, y, s: ops.Mean()(ops.mul(x, y)),
    "sum(x / (y + 2))": lambda x, y, s: ops.Sum()(ops.true_div(x, ops.add(y, constant(2.0)))),
    "mean(sqrt(abs(x)) - s)": lambda x, y, s: ops.Mean()(ops.sub(ops.sqrt(ops.abs(x)), s)),
}


def arrays(dtype: str, ndim: int):
    finite = st.floats(-1e3, 1e3, width=32 if dtype == "float32" else 64)
    edge = st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300 if dtype == "float64" else 1e-30])
    shape = hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=0, max_side=300 if ndim == 1 else 20)
    return shape.flatmap(
        lambda s: st.tuples(
            hnp.arrays(dtype, s, elements=finite | edge),
            hnp.arrays(dtype, s, elements=finite | edge),
            hnp.arrays(dtype, (), elements=finite),
        )
    )


@pytest.mark.parametrize("name", sorted(ARITHMETIC))
@pytest.mark.parametrize("dtype, ndim", [("float64", 1), ("float32", 1), ("float64", 2)])
@given(data=st.data())
def test_a_fused_sum_equals_the_unfused_loop_and_reduction_bit_for_bit(name, dtype, ndim, data):
    fused, plain, numpy_linker = linked(name, dtype, ndim)
    assert len(fused.c_nodes) == 2  # the loop hands its inputs on, the reduction runs the kernel
    x, y, s = data.draw(arrays(dtype, ndim))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # means of nothing, inf - inf: NumPy's warnings
        (want,) = numpy_linker(x, y, s)
        (got,) = fused(x, y, s)
        (unfused_got,) = plain(x, y, s)
    assert got.shape == () and got.dtype == want.dtype
    np.testing.assert_array_equal(got, unfused_got)
    np.testing.assert_array_equal(got, want)


def test_a_large_fused_sum_follows_numpys_pairwise_order():
    fgraph = fused_graph(ARITHMETIC["sum((x - y) * s + x * x)"])
    rng = np.random.default_rng(0)
    for n in (127, 128, 129, 1000, 2047, 2048, 2049, 4104, 8193, 100_003):  # around 128 and FILLED_BLOCK
        x, y, s = rng.standard_normal(n) * 1e3, rng.standard_normal(n), np.array(0.37)
        (got,) = CLinker(fgraph)(x, y, s)
        assert got == np.sum((x - y) * s + x * x)


def test_transcendental_loops_are_fused_and_agree_to_rounding():
    fgraph = fused_graph(lambda x, y, s: ops.Sum()(ops.add(ops.exp(ops.neg(x)), ops.tanh(y))))
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(10_001), rng.standard_normal(10_001)
    (got,) = CLinker(fgraph)(x, y, np.array(0.0))
    (unfused_got,) = unfused(fgraph)(x, y, np.array(0.0))
    np.testing.assert_allclose(got, unfused_got, rtol=1e-13)
    np.testing.assert_allclose(got, np.sum(np.exp(-x) + np.tanh(y)), rtol=1e-13)


@pytest.mark.parametrize(
    "values",
    [
        (np.arange(20.0)[::2], np.ones(10), np.array(2.0)),  # a strided input
        (np.ones((3, 4)), np.ones((1, 4)), np.array(2.0)),  # inputs that broadcast
        (np.zeros(0), np.zeros(0), np.array(2.0)),  # no elements: NumPy's sum of nothing
    ],
    ids=["strided", "broadcasting", "empty"],
)
def test_inputs_the_kernel_cannot_take_run_the_unfused_path(values):
    x, y, s = values
    ndim = x.ndim
    fgraph = fused_graph(ARITHMETIC["sum((x - y) * s + x * x)"], ndim=ndim)
    (got,) = CLinker(fgraph)(x, y, s)
    np.testing.assert_array_equal(got, np.sum((x - y) * s + x * x))


def test_a_loop_value_read_elsewhere_is_not_fused():
    x, y = tensor("x", shape=(None,)), tensor("y", shape=(None,))
    product = ops.mul(ops.add(x, y), y)
    fgraph = FunctionGraph([x, y], [ops.Sum()(product), product])
    FusionRewriter().rewrite(fgraph)
    assert reductions_of_loops(fgraph, fgraph.toposort()) == {}
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    total, values = CLinker(fgraph)(a, b)
    assert total == 36.0 and np.array_equal(values, [12.0, 24.0])


def test_a_sum_over_some_axes_is_not_fused():
    x = tensor("x", shape=(None, None))
    fgraph = FunctionGraph([x], [ops.Sum(axis=0)(ops.mul(x, x))])
    assert reductions_of_loops(fgraph, fgraph.toposort()) == {}


@given(data=st.data())
def test_random_loops_summed_in_one_kernel_agree_with_the_unfused_path(data):
    """Random elementwise graphs (shared subexpressions, constants, unused inputs) under a mean: the fused
    kernel agrees with the loop and the reduction run apart, bit for bit but for rounding inside libm."""
    from relwrite.testing import expression_graphs, input_values

    inputs, out = data.draw(expression_graphs(max_nodes=8, input_type="vector"))
    if out.dtype not in ("float32", "float64") or out.ndim != 1:
        return
    fgraph = FunctionGraph(inputs, [ops.Mean()(out)])
    FusionRewriter().rewrite(fgraph)
    fused = CLinker(fgraph)
    (mean_node,) = [n for n in fgraph.apply_nodes if isinstance(n.op, ops.Mean)]
    if isinstance(mean_node.inputs[0].owner.op, ops.Elemwise):
        assert reductions_of_loops(fgraph, fgraph.toposort())  # the path under test is taken
    values = data.draw(input_values(fgraph.inputs, min_len=1, max_len=300))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        (got,) = fused(*values)
        (want,) = unfused(fgraph)(*values)
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)

"""The PyTensor bridge: from_pytensor / to_pytensor round trips, types, opaque ops, deep graphs, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

pytest.importorskip("pytensor", reason="the PyTensor bridge needs the extra relwrite[pytensor]")

import pytensor
import pytensor.raise_op
import pytensor.tensor as pt
from pytensor.graph.basic import Apply as PtApply
from pytensor.graph.basic import Constant as PtConstant
from pytensor.graph.op import Op as PtOp
from pytensor.graph.traversal import io_toposort
from pytensor.tensor import blas

import relwrite
from relwrite.engine.db import rewrite_graph
from relwrite.graph import ops
from relwrite.graph.basic import Constant
from relwrite.interop.pytensor import OpaqueOp, RelwriteOp, from_pytensor, to_pytensor


def f64(value: float):
    return pt.constant(value, dtype="float64")


PY = pytensor.compile.mode.Mode(linker="py", optimizer=None)
"""Evaluate graphs as built: no PyTensor rewrite, no C compilation."""

x = pt.tensor("x", dtype="float64", shape=(3, 4))
y = pt.tensor("y", dtype="float64", shape=(4, 3))
v = pt.tensor("v", dtype="float64", shape=(4,))
w = pt.tensor("w", dtype="float32", shape=(None,))
b = pt.tensor("b", dtype="int8", shape=(4,))
i = pt.lscalar("i")

GRAPHS = {
    "elementwise": pt.log1p(pt.exp(x)) * pt.tanh(v) - pt.sqrt(pt.abs(x)) / (1 + pt.sigmoid(x) ** 2),
    "special": pt.erf(v) + pt.erfc(v) + pt.softplus(v) + pt.maximum(v, 0.5) - pt.minimum(v, -0.5),
    "comparisons": pt.switch((x > 0) & (x < 1), x, pt.neg(x)),
    "casts": pt.cast(x, "float32") + pt.sqrt(b) + pt.cast(b, "float64").sum(),
    "mixed dtypes": w * 2 + pt.cast(w, "int32") + b.sum(),
    "reductions": x.sum(axis=0) + x.prod(axis=0) + x.max(axis=0) + x.min() + pt.argmax(x, axis=0),
    "mean": pt.mean(x, axis=1) + pt.mean(v),
    "dot": pt.dot(x, v) + (x @ y).sum(axis=0),
    "blas": blas.gemm_no_inplace(x @ y, f64(2.0), x, y, f64(0.5)).sum(axis=0)
    + blas.gemv_no_inplace(v[:3], f64(1.5), x, v, f64(0.5))
    + blas._dot22(x, y)[0]
    + blas.ger(x, f64(2.0), v[:3], v).sum(axis=1),
    "dimshuffle": x.T.dimshuffle(0, "x", 1).sum(axis=(1, 2)) + v[None, :].sum(),
    "reshape": x.reshape((2, 6)).sum(axis=0) + x.reshape((-1,))[3],
    "subtensor": x[1:, 2] + x[0, ::2].sum() + x[i, -1] + v[[0, 2, 2]].sum() + x[:, [0, 1]].sum(),
    "updates": pt.inc_subtensor(x[1:, :2], 1.0).sum()
    + pt.set_subtensor(v[[0, 3]], 7.0).sum()
    + pt.inc_subtensor(v[[1, 1]], 2.0).sum(),
    "join": pt.concatenate([x, x * 2], axis=1).sum(axis=1) + pt.stack([v, v]).sum(),
    "shape": pt.cast(x.shape[0] * x.shape[1], "float64") + pt.cast(pt.shape(v)[0], "float64"),
    "alloc": pt.alloc(v, 3, 4).sum() + pt.alloc(2.0, 2, 3).sum(),
    "assert": pytensor.raise_op.Assert("v must be finite")(v, pt.all(pt.isinf(v) | (v < 10))) * 2,
    "softmax": pt.special.softmax(x, axis=1).sum(axis=0) + pt.special.log_softmax(v),
    "constants": x * np.arange(12.0).reshape(3, 4) + np.float32(1.5),
}
INPUTS = {x: (3, 4), y: (4, 3), v: (4,), w: (5,), b: (4,), i: ()}


def _inputs_of(graph) -> list:
    return [var for var in pytensor.graph.graph_inputs([graph]) if var in INPUTS]


def _values(draw) -> dict:
    floats = st.floats(-3, 3, allow_nan=False, width=64)
    out = {
        x: draw(hnp.arrays("float64", INPUTS[x], elements=floats)),
        y: draw(hnp.arrays("float64", INPUTS[y], elements=floats)),
        v: draw(hnp.arrays("float64", INPUTS[v], elements=floats)),
        w: draw(hnp.arrays("float32", INPUTS[w], elements=st.floats(-3, 3, width=32))),
        b: draw(hnp.arrays("int8", INPUTS[b], elements=st.integers(0, 100))),
        i: np.int64(draw(st.integers(-3, 2))),
    }
    return out


@pytest.fixture(scope="module", params=sorted(GRAPHS))
def compiled(request):
    graph = GRAPHS[request.param]
    inputs = _inputs_of(graph)
    out, mapping = from_pytensor(graph)
    back = to_pytensor(out, mapping)
    both = pytensor.function(inputs, [graph, back], mode=PY)
    native = relwrite.function([mapping[p] for p in inputs], out, mode="fast_compile")
    return request.param, graph, inputs, out, back, both, native


@given(data=st.data())
@settings(max_examples=15)
def test_round_trip_values_equal(compiled, data):
    """PyTensor's graph, its relwrite conversion and the conversion back agree on random inputs."""
    name, graph, inputs, out, back, both, native = compiled
    values = _values(data.draw)
    args = [values[p] for p in inputs]
    expected, returned = both(*args)
    np.testing.assert_allclose(returned, expected, rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(native(*args), expected, rtol=1e-5, err_msg=name)


def test_types_survive(compiled):
    """Dtypes and static shapes carry over both ways; only 'assert' keeps PyTensor's all() as an opaque op."""
    name, graph, inputs, out, back, *_ = compiled
    assert back.type == graph.type, name
    assert (out.dtype, out.type.shape) == (graph.type.dtype, graph.type.shape), name


UNMAPPED = {"comparisons": {"And"}, "assert": {"Or", "Isinf", "All{axes=None}"}}
"""The PyTensor ops of GRAPHS relwrite has no counterpart for (logical and/or, isinf, all)."""


def test_mapped_ops_are_native():
    """Every op family above converts to relwrite's own ops; only the ops relwrite lacks stay opaque."""
    for name, graph in GRAPHS.items():
        out, _ = from_pytensor(graph)
        nodes = relwrite.FunctionGraph(outputs=[out], clone=False).apply_nodes
        opaque = {str(n.op.op) for n in nodes if isinstance(n.op, OpaqueOp)}
        assert opaque == UNMAPPED.get(name, set()), name


def test_blas_ops_map_to_relwrite_blas():
    out, _ = from_pytensor(GRAPHS["blas"])
    kinds = {type(n.op) for n in relwrite.FunctionGraph(outputs=[out], clone=False).apply_nodes}
    assert {ops.Gemm, ops.Gemv, ops.Dot22, ops.Ger} <= kinds


def test_constants_keep_value_and_dtype():
    graph = pt.constant(np.array([1.5, 2.5], dtype="float32")) * w[:2]
    out, _ = from_pytensor(graph)
    (c,) = [v for v in out.owner.inputs if isinstance(v, Constant)]
    assert c.dtype == "float32" and c.type.shape == (2,) and np.array_equal(c.data, [1.5, 2.5])
    back = to_pytensor(c)
    assert isinstance(back, PtConstant) and back.type.dtype == "float32" and np.array_equal(back.data, c.data)


def test_compiled_function_graph_with_fused_loops():
    """PyTensor's own rewritten graph (fused Composite loops, BLAS) converts and evaluates equal."""
    graph = pt.exp(x).sum(axis=1) * pt.log1p(x**2).mean() + pt.dot(x, v)
    fn = pytensor.function([x, v], graph, mode=pytensor.compile.mode.Mode(linker="py", optimizer="fast_run"))
    fgraph = fn.maker.fgraph
    outs, mapping = from_pytensor(fgraph)
    assert list(mapping) == list(fgraph.inputs)
    native = relwrite.function([mapping[p] for p in fgraph.inputs], outs[0], mode="fast_compile")
    rng = np.random.default_rng(1)
    xs, vs = rng.normal(size=(3, 4)), rng.normal(size=4)
    np.testing.assert_allclose(native(xs, vs), fn(xs, vs), rtol=1e-12)


class Double(PtOp):
    """A PyTensor op relwrite has never heard of."""

    __props__ = ()

    def make_node(self, a):
        a = pt.as_tensor_variable(a)
        return PtApply(self, [a], [a.type()])

    def perform(self, node, inputs, output_storage):
        output_storage[0][0] = 2 * inputs[0]


def test_opaque_op_evaluates_rewrites_around_and_comes_back():
    graph = pt.exp(pt.log(Double()(v * 1.0 + 0.0)))
    out, mapping = from_pytensor(graph)
    nodes = relwrite.FunctionGraph(outputs=[out], clone=False).apply_nodes
    (opaque,) = [n for n in nodes if isinstance(n.op, OpaqueOp)]
    assert opaque.op.op == Double() and not isinstance(opaque.op, ops.Elemwise)
    rewritten = rewrite_graph(out, include=("fast_run",))  # fusion and all: the opaque node stays whole
    kept = [
        n
        for n in relwrite.FunctionGraph(outputs=[rewritten], clone=False).apply_nodes
        if isinstance(n.op, OpaqueOp)
    ]
    assert len(kept) == 1 and kept[0].inputs[0] is mapping[v]  # v * 1.0 + 0.0 rewritten to v inside
    values = np.array([0.5, 1.0, 2.0, 3.0])
    assert np.allclose(relwrite.function([mapping[v]], rewritten)(values), 2 * values)
    back = to_pytensor(rewritten, mapping)
    assert any(n.op == Double() for n in io_toposort([v], [back]))
    assert np.allclose(pytensor.function([v], back, mode=PY)(values), 2 * values)


def test_relwrite_op_pytensor_lacks_becomes_relwrite_op():
    a = relwrite.vector("a")
    back = to_pytensor(relwrite.hypot(a, 1e200) + relwrite.cbrt(a))
    assert isinstance(back.owner.inputs[0].owner.op, RelwriteOp) or any(
        isinstance(n.op, RelwriteOp) for n in io_toposort([], [back])
    )
    (p,) = [var for var in pytensor.graph.graph_inputs([back]) if var.name == "a"]
    got = pytensor.function([p], back, mode=PY)(np.array([1e200, -8.0]))
    np.testing.assert_allclose(got, [np.hypot(1e200, 1e200) + np.cbrt(1e200), np.hypot(-8.0, 1e200) - 2.0])


def test_ten_thousand_node_chain_converts_without_recursion():
    chain = v
    for k in range(10_000):
        chain = pt.exp(chain) if k % 2 else pt.log(chain)
    out, mapping = from_pytensor(chain)
    back = to_pytensor(out, mapping)
    assert out.owner.op == ops.exp and back.owner.op == chain.owner.op
    assert len(io_toposort([v], [back])) == 10_000


@pytest.mark.parametrize("bad", [3.0, "exp(x)", relwrite.scalar("r"), [], [x, 2]])
def test_from_pytensor_names_bad_input(bad):
    with pytest.raises(TypeError, match="from_pytensor takes a PyTensor variable"):
        from_pytensor(bad)


def test_to_pytensor_names_bad_input():
    with pytest.raises(TypeError, match="to_pytensor takes relwrite variables, got TensorVariable"):
        to_pytensor(x)


def test_types_relwrite_lacks_are_named():
    z = pt.tensor("z", dtype="complex128", shape=(2,))
    with pytest.raises(TypeError, match=r"PyTensor variable z of type .*complex128"):
        from_pytensor(pt.real(z))


def test_switch_on_numbers_and_nodes_of_constants():
    """PyTensor switches on integers (a condition is any nonzero); nodes of constants come in folded."""
    k = pt.tensor("k", dtype="int64", shape=(4,))
    graph = pt.switch(k, v, -v) + pt.exp(pt.constant(np.array([0.0, 1.0, 2.0, 3.0])))
    out, mapping = from_pytensor(graph)
    nodes = relwrite.FunctionGraph(outputs=[out], clone=False).apply_nodes
    assert not any(isinstance(n.op, OpaqueOp) for n in nodes)
    assert not any(n.op == ops.exp for n in nodes)  # exp of the constant folded
    values = (np.array([0, 3, -1, 0]), np.array([1.0, 2.0, 3.0, 4.0]))
    expected = pytensor.function([k, v], graph, mode=PY)(*values)
    got = relwrite.function([mapping[k], mapping[v]], out, mode="fast_compile")(*values)
    np.testing.assert_allclose(got, expected)


def test_an_opaque_op_keeps_the_static_shapes_pytensor_knew():
    """Split's output lengths come from its computed split sizes: relwrite keeps PyTensor's (1,) and (3,)."""
    sizes = pt.stack([pt.constant(1), v.shape[0] - 1])
    first, rest = pt.split(v, sizes, n_splits=2)
    out, _ = from_pytensor([first, rest])
    assert [o.type.shape for o in out] == [(1,), (3,)]
    assert isinstance(out[0].owner.op, OpaqueOp)


def test_an_opaque_view_of_an_input_never_lets_a_later_step_overwrite_the_input():
    """SpecifyShape's perform returns its input itself; relwrite's in-place steps must not write into it."""
    graph = pt.exp(pt.specify_shape(v, (4,))) + 1.0
    out, mapping = from_pytensor(graph)
    values = np.array([0.0, 1.0, 2.0, 3.0])
    kept = values.copy()
    got = relwrite.function([mapping[v]], out, mode="fast_run")(values)
    np.testing.assert_allclose(got, np.exp(kept) + 1.0)
    assert np.array_equal(values, kept)

"""The NumPy linker: call order, freeing, buffer reuse, aliasing and deep graphs."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

from relwrite.backends.numpy import EvaluationError, NumpyLinker, evaluate
from relwrite.engine.inplace import InplaceRewriter
from relwrite.graph import ops
from relwrite.graph.basic import Constant, Variable, constant, matrix, scalar, vector
from relwrite.graph.fg import FunctionGraph


def link(inputs, outputs, inplace: bool = True) -> NumpyLinker:
    """The graph linked, after the in-place marks `function`'s fast_run pipeline would give it."""
    fgraph = FunctionGraph(inputs, outputs, clone=False)
    if inplace:
        InplaceRewriter().rewrite(fgraph)
    return NumpyLinker(fgraph)


def reference(inputs: list[Variable], outputs: list[Variable], arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Node-by-node evaluation with a dict and fresh copies: no reuse, no shared buffers."""
    values = {var: np.array(a, copy=True) for var, a in zip(inputs, arrays)}
    for node in FunctionGraph(inputs, outputs, clone=False).toposort():
        args = [v.data if isinstance(v, Constant) else values[v] for v in node.inputs]
        for out, value in zip(node.outputs, evaluate(node, [np.array(a, copy=True) for a in args])):
            values[out] = value
    return [o.data if isinstance(o, Constant) else values[o] for o in outputs]


def constant_slots(linker: NumpyLinker) -> set[int]:
    first = len(linker.input_slots)  # the template `_rest` holds the slots after the inputs
    return {first + i for i, value in enumerate(linker._rest) if value is not None}


def test_every_intermediate_is_freed_during_the_call():
    x, y = vector("x"), vector("y")
    outputs = [ops.exp(x) * y + ops.sin(x), ops.tanh(y) * 2.0]
    linker = link([x, y], outputs)
    results = linker(np.arange(3.0), np.ones(3))
    np.testing.assert_allclose(results[0], np.exp(np.arange(3.0)) * 1.0 + np.sin(np.arange(3.0)))
    constants = constant_slots(linker)
    assert constants  # the 2.0
    freed = {s for step in linker.steps for s in step.free_slots}
    kept = constants | set(linker.input_slots) | set(linker.output_slots)
    produced = {s for step in linker.steps for s in step.output_slots}
    assert produced - kept <= freed
    assert not freed & (constants | set(linker.output_slots))


def test_calls_are_reentrant_across_threads():
    from concurrent.futures import ThreadPoolExecutor

    x = vector("x")
    linker = link([x], [ops.tanh(ops.exp(ops.sin(x)) * 2.0)])
    data = [np.full(1000, float(k)) for k in range(32)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda a: linker(a)[0], data))
    for a, got in zip(data, results):
        np.testing.assert_allclose(got, np.tanh(np.exp(np.sin(a)) * 2.0))


def test_each_intermediate_is_freed_at_its_last_use():
    x = vector("x")
    e = ops.exp(x)
    s = ops.sin(e)
    out = ops.add(s, e)
    linker = link([x], [out])
    steps = {step.node.op: step for step in linker.steps}
    slot = {step.node.outputs[0]: step.output_slots[0] for step in linker.steps}
    assert slot[e] in steps[ops.add].free_slots  # read by sin and add: freed after add
    assert slot[e] not in steps[ops.sin].free_slots
    assert linker.input_slots[0] in steps[ops.exp].free_slots
    assert all(linker.output_slots[0] not in step.free_slots for step in linker.steps)


def test_a_chain_reuses_each_dying_buffer():
    x = vector("x")
    linker = link([x], [ops.exp(ops.exp(ops.exp(x)))])
    first, second, third = linker.steps
    assert first.reuse_slot is None  # x is a graph input: never written
    assert second.reuse_slot == first.output_slots[0]
    assert third.reuse_slot == second.output_slots[0]
    data = np.array([0.0, 0.5, -1.0])
    before = data.copy()
    (result,) = linker(data)
    np.testing.assert_array_equal(result, np.exp(np.exp(np.exp(before))))
    np.testing.assert_array_equal(data, before)


def test_a_buffer_read_later_is_not_reused():
    x = vector("x")
    e = ops.exp(x)
    out = ops.add(ops.exp(e), e)  # e has two clients
    linker = link([x], [out])
    by_node = {step.node.outputs[0]: step for step in linker.steps}
    e_slot = by_node[e].output_slots[0]
    assert by_node[e.owner.outputs[0]].reuse_slot is None
    assert by_node[out.owner.inputs[0]].reuse_slot is None  # exp(e) must not overwrite e
    assert by_node[out].reuse_slot in (e_slot, by_node[out.owner.inputs[0]].output_slots[0])
    data = np.array([0.0, 1.0])
    np.testing.assert_array_equal(linker(data)[0], np.exp(np.exp(data)) + np.exp(data))


def test_outputs_and_views_keep_their_buffers():
    x = matrix("x")
    e = ops.exp(x)
    t = e.T
    out = ops.exp(e)  # e is an output and has a live view: never overwritten
    linker = link([x], [e, out + t.T, t])
    assert all(step.reuse_slot is None for step in linker.steps if step.node.op == ops.exp)
    data = np.arange(6.0).reshape(2, 3) / 6
    got = linker(data)
    np.testing.assert_array_equal(got[0], np.exp(data))
    np.testing.assert_array_equal(got[1], np.exp(np.exp(data)) + np.exp(data))
    np.testing.assert_array_equal(got[2], np.exp(data).T)


def test_a_view_of_a_dying_buffer_is_not_written_into():
    x = matrix("x")
    t = ops.exp(x).T
    linker = link([x], [ops.exp(t)])
    assert linker.steps[-1].reuse_slot is None
    data = np.ones((2, 3))
    np.testing.assert_array_equal(linker(data)[0], np.exp(np.exp(data)).T)


def test_reuse_checks_the_runtime_shape_when_broadcasting():
    x, m = matrix("x"), matrix("m")
    linker = link([x, m], [ops.add(ops.exp(x), m)])
    step = linker.steps[-1]
    assert step.reuse_slot is not None and step.check_shape
    row, grid = np.array([[0.0, 1.0, 2.0]]), np.ones((2, 3))
    np.testing.assert_array_equal(linker(row, grid)[0], np.exp(row) + grid)  # (1, 3) cannot hold (2, 3)
    np.testing.assert_array_equal(linker(grid, row)[0], np.exp(grid) + row)  # (2, 3) can


def test_static_shapes_settle_reuse_without_a_check():
    x = vector("x", shape=(3,))
    y = vector("y", shape=(3,))
    linker = link([x, y], [ops.mul(ops.exp(x), y)])
    step = linker.steps[-1]
    assert step.reuse_slot is not None and not step.check_shape


def test_no_reuse_across_dtypes():
    x = vector("x", dtype="int64")
    linker = link([x], [ops.exp(ops.neg(x))])
    assert linker.steps[-1].reuse_slot is None  # int64 buffer, float64 result
    np.testing.assert_array_equal(linker(np.array([1, 2]))[0], np.exp(-np.array([1, 2])))


def test_variadic_add_never_writes_into_a_later_operand():
    x, y, z = vector("x"), vector("y"), vector("z")
    linker = link([x, y, z], [ops.add(x, y, ops.exp(z))])
    assert linker.steps[-1].reuse_slot is None
    a, b, c = np.ones(2), np.full(2, 2.0), np.zeros(2)
    np.testing.assert_array_equal(linker(a, b, c)[0], a + b + np.exp(c))
    fresh_first = link([x, y, z], [ops.add(ops.exp(z), x, y)])
    assert fresh_first.steps[-1].reuse_slot is not None
    np.testing.assert_array_equal(fresh_first(a, b, c)[0], np.exp(c) + a + b)


def test_a_composite_writes_into_a_dying_buffer():
    i0, i1 = scalar("i0"), scalar("i1")
    fused = ops.Composite([i0, i1], [ops.exp(i0) * i1 + 1.0])
    x, y = vector("x"), vector("y")
    linker = link([x, y], [fused(ops.sin(x), y)])
    assert linker.steps[-1].reuse_slot == linker.steps[0].output_slots[0]
    a, b = np.array([0.0, 1.0]), np.array([2.0, 3.0])
    np.testing.assert_array_equal(linker(a, b)[0], np.exp(np.sin(a)) * b + 1.0)


def test_outputs_that_alias_inputs_or_constants_are_copies():
    x = vector("x")
    c = constant(np.array([1.0, 2.0]))
    linker = link([x], [x, ops.identity(x), c, x.dimshuffle("x", 0)])
    data = np.array([5.0, 6.0])
    results = linker(data)
    for result in results:
        assert not np.shares_memory(result, data)
        assert result.flags.writeable
    results[2][0] = 100.0
    np.testing.assert_array_equal(linker(data)[2], [1.0, 2.0])


def test_an_error_names_the_node_and_leaves_the_linker_usable():
    x, y = vector("x"), vector("y")
    linker = link([x, y], [ops.exp(ops.add(x, y))])
    with pytest.raises(EvaluationError, match=r"add\(x, y\)") as info:
        linker(np.ones(3), np.ones(4))
    assert info.value.node.op == ops.add
    np.testing.assert_array_equal(linker(np.zeros(2), np.zeros(2))[0], np.ones(2))


def test_wrong_number_of_arrays_is_a_type_error():
    x = vector("x")
    with pytest.raises(TypeError, match="1 input"):
        link([x], [ops.exp(x)])()


@pytest.mark.slow
def test_a_100000_node_chain_evaluates():
    x = vector("x")
    one = constant(1.0)
    out = x
    for _ in range(100_000):
        out = ops.add(out, one)
    linker = link([x], [out])
    assert len(linker.steps) == 100_000
    assert all(step.reuse_slot is not None for step in linker.steps[1:])
    (result,) = linker(np.array([0.0, 0.5]))
    np.testing.assert_array_equal(result, [100_000.0, 100_000.5])


# -- random graphs against node-by-node evaluation ---------------------------------------------------

UNARY = [ops.neg, ops.sin, ops.tanh, ops.sqr, ops.abs, ops.identity, ops.exp, ops.sigmoid]
BINARY = [ops.add, ops.mul, ops.sub, ops.maximum]


@st.composite
def random_graphs(draw):
    """A random elementwise DAG over a scalar, a vector and a matrix, with runtime arrays that fit."""
    s, v, m = scalar("s"), vector("v"), matrix("m")
    arrays = [np.array(0.5), np.array([0.1, -0.2, 0.3]), np.linspace(-1, 1, 6).reshape(2, 3)]
    pool = [(s, ()), (v, (3,)), (m, (2, 3))]
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["unary", "binary", "add3", "view"]))
        a, shape_a = draw(st.sampled_from(pool))
        if kind == "unary":
            pool.append((draw(st.sampled_from(UNARY))(a), shape_a))
        elif kind == "view":
            if len(shape_a) == 2:
                pool.append((a.T.T, shape_a))
            else:
                pool.append((a.dimshuffle("x", *range(len(shape_a))), (1, *shape_a)))
        else:
            others = [draw(st.sampled_from(pool)) for _ in range(1 if kind == "binary" else 2)]
            try:
                shape = np.broadcast_shapes(shape_a, *(o[1] for o in others))
            except ValueError:
                continue
            op = draw(st.sampled_from(BINARY)) if kind == "binary" else ops.add
            pool.append((op(a, *(o[0] for o in others)), shape))
    outputs = draw(st.lists(st.sampled_from([p[0] for p in pool]), min_size=1, max_size=3))
    return [s, v, m], outputs, arrays


@given(graph=random_graphs())
def test_random_graphs_match_node_by_node_evaluation(graph):
    inputs, outputs, arrays = graph
    linker = link(inputs, outputs)
    before = [a.copy() for a in arrays]
    for _ in range(2):  # a second call must not see anything left over from the first
        got = linker(*arrays)
        for result, expected in zip(got, reference(inputs, outputs, before)):
            np.testing.assert_array_equal(result, expected)
    for array, original in zip(arrays, before):
        np.testing.assert_array_equal(array, original)

"""In-place marks: what the DestroyHandler refuses, how it keeps marks legal, and that in-place runs give
the values of the original graph."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import relwrite as rw
from relwrite.compile.function import Mode
from relwrite.engine.db import Query
from relwrite.engine.inplace import InplaceRewriter
from relwrite.graph import ops
from relwrite.graph.destroy import DestroyHandler, destroy_handler
from relwrite.graph.features import ReplaceValidate
from relwrite.graph.fg import FunctionGraph, InconsistencyError
from relwrite.testing import expression_graphs, input_values


def _graph(outputs, inputs):
    fgraph = FunctionGraph(inputs, outputs, clone=False, features=[ReplaceValidate(), DestroyHandler()])
    return fgraph, destroy_handler(fgraph)


def test_refusals_name_the_reason():
    x, y = rw.vector("x"), rw.vector("y")
    e = rw.exp(x)
    shared = rw.sin(e)
    fgraph, handler = _graph([rw.cos(e) + shared, shared, (x.T * 2.0)], [x, y])
    add, cos_node = fgraph.outputs[0].owner, fgraph.outputs[0].owner.inputs[0].owner
    assert "graph input" in handler.refusal(fgraph, e.owner, 0)
    assert "graph output" in handler.refusal(fgraph, add, 1)  # shared is an output too
    assert "may run after" in handler.refusal(fgraph, cos_node, 0)  # sin(e) reads e too
    with pytest.raises(InconsistencyError, match="may not overwrite input 0"):
        handler.destroy(fgraph, cos_node, 0)
    product = fgraph.outputs[2].owner
    assert "graph input" in handler.refusal(fgraph, product, 0)  # x.T is a view of the input x
    assert handler.destroyed == {}


def test_a_dying_buffer_is_marked_once_and_a_second_destroyer_is_refused():
    x = rw.vector("x")
    e = rw.exp(x)
    view = e.dimshuffle(0)
    fgraph, handler = _graph([rw.sin(view) + 1.0], [x])
    sin_node = fgraph.outputs[0].owner.inputs[0].owner
    handler.destroy(fgraph, sin_node, 0)
    assert handler.destroyed == {sin_node: 0}
    add = fgraph.outputs[0].owner
    assert handler.refusal(fgraph, add, 0) is None  # sin's own result dies in the add
    assert "graph output" not in (handler.refusal(fgraph, sin_node, 0) or "")


def test_a_rewrite_giving_an_overwritten_buffer_a_later_reader_is_rejected():
    x = rw.vector("x")
    e = rw.exp(x)
    out = rw.sin(e) * 2.0
    other = rw.cos(x)
    fgraph, handler = _graph([out, other], [x])
    sin_node = out.owner.inputs[0].owner if out.owner.inputs[0].owner else out.owner.inputs[1].owner
    handler.destroy(fgraph, sin_node, 0)
    before = fgraph.fingerprint(by_identity=True)
    with pytest.raises(InconsistencyError, match="overwrite input 0 unsafely"):
        fgraph.replace_validate(other, rw.cos(e) + 0.0)  # a new reader of e, not before sin
    assert fgraph.fingerprint(by_identity=True) == before


def test_fast_run_without_the_inplace_tag_writes_nothing_in_place():
    x = rw.vector("x")
    graph = rw.exp(rw.sin(x) * 2.0) + rw.cos(x)
    no_inplace = Mode("numpy", Query(include=["fast_run"], exclude=["inplace"]))
    f = rw.function([x], graph, mode=no_inplace)
    assert destroy_handler(f.fgraph) is None
    assert all(step.reuse_slot is None for step in f.linker.steps)
    g = rw.function([x], graph, mode=Mode("numpy", "fast_run"))
    assert destroy_handler(g.fgraph) is not None
    a = np.linspace(-1, 1, 7)
    np.testing.assert_allclose(f(a), g(a))


@given(expression_graphs(max_nodes=12), st.data())
def test_in_place_runs_give_the_original_graphs_values(graph, data):
    """Every node marked where the handler allows, outputs sharing intermediates: the NumPy linker,
    writing in place wherever the marks and its own checks allow, gives the unmarked graph's values."""
    inputs, output = graph
    extra = [v for v in {n.outputs[0] for n in rw.FunctionGraph(inputs, [output], clone=False).apply_nodes}]
    outputs = [output, *extra[: data.draw(st.integers(0, 2))]]
    values = data.draw(input_values(inputs))
    plain = rw.function(inputs, outputs, mode=Mode("numpy", Query(include=["merge"])), cache=False)
    fgraph = FunctionGraph(inputs, outputs)
    InplaceRewriter().rewrite(fgraph)
    from relwrite.backends.numpy.linker import NumpyLinker

    linker = NumpyLinker(fgraph)
    copies = [np.array(v, copy=True) for v in values]
    with np.errstate(all="ignore"):
        expected = plain(*values)
        got = linker(*copies)
    for a, b in zip(expected, got):
        np.testing.assert_array_equal(a, b)
    for v, c in zip(values, copies):
        np.testing.assert_array_equal(v, c)  # inputs are never written
    assert all(
        isinstance(n.op, (ops.Elemwise,)) or n not in destroy_handler(fgraph).destroyed
        for n in fgraph.apply_nodes
    )

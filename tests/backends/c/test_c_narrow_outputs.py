"""Composites whose outputs may be narrower than their loop: the C kernel runs where the shapes agree at
run time, the op-by-op NumPy path where they do not; both give NumPy's results and shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.backends.c import CLinker, c_available
from relwrite.backends.numpy import NumpyLinker
from relwrite.engine.fusion import FusionRewriter
from relwrite.graph import ops
from relwrite.graph.basic import vector
from relwrite.graph.fg import FunctionGraph

requires_c = pytest.mark.skipif(not c_available(), reason="no working C compiler")


def fused_shared_intermediate() -> FunctionGraph:
    """exp(x) is an output and feeds sin(exp(x)) + y: one Composite, exp(x) its narrow second output."""
    x, y = vector("x"), vector("y")
    t = ops.exp(x)
    fgraph = FunctionGraph([x, y], [ops.sin(t) + y, t])
    FusionRewriter().rewrite(fgraph)
    return fgraph


def test_a_shared_intermediate_of_unknown_length_is_fused_with_its_readers():
    (node,) = fused_shared_intermediate().apply_nodes
    assert isinstance(node.op, ops.Composite) and len(node.outputs) == 2
    assert sorted(node.op.output_inputs) == [(0,), (0, 1)]


@requires_c
@given(st.sampled_from([(3, 3), (1, 3), (3, 1), (1, 1), (0, 1)]), st.data())
def test_the_kernel_and_the_op_by_op_path_agree_with_numpy(lengths, data):
    fgraph = fused_shared_intermediate()
    c_linker, numpy_linker = CLinker(fgraph), NumpyLinker(fgraph)
    assert c_linker.c_nodes
    x = np.array(data.draw(st.lists(st.floats(-3, 3), min_size=lengths[0], max_size=lengths[0])))
    y = np.array(data.draw(st.lists(st.floats(-3, 3), min_size=lengths[1], max_size=lengths[1])))
    expected = [np.sin(np.exp(x)) + y, np.exp(x)]
    for got in (c_linker(x, y), numpy_linker(x, y)):
        for value, want in zip(got, expected):
            assert value.shape == want.shape
            np.testing.assert_allclose(value, want, rtol=1e-12)


@requires_c
def test_outputs_whose_inputs_do_not_broadcast_together_run_op_by_op():
    """log(x) feeds log(x) * y and 3 * z + log(x): one Composite over x, y, z, whose outputs each have
    their own shape; where y and z do not broadcast together the group runs op by op (fuzzer seed 197).
    x is a matrix of unknown shape, which may be full (a vector's log would be computed apart, once)."""
    from relwrite.graph.basic import matrix

    x, y, z = matrix("x"), matrix("y"), matrix("z")
    shared = ops.log(x)
    fgraph = FunctionGraph([x, y, z], [ops.add(z, z, z, shared), shared * y])
    FusionRewriter().rewrite(fgraph)
    (node,) = fgraph.apply_nodes
    assert isinstance(node.op, ops.Composite) and len(node.outputs) == 2
    values = (np.array([[2.0]]), np.zeros((0, 3)), np.ones((3, 3)))
    expected = [3 * values[2] + np.log(values[0]), np.log(values[0]) * values[1]]
    for got in (CLinker(fgraph)(*values), NumpyLinker(fgraph)(*values)):
        for value, want in zip(got, expected):
            assert value.shape == want.shape
            np.testing.assert_allclose(value, want, rtol=1e-12)

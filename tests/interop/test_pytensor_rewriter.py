"""relwrite inside PyTensor's pipeline: RelwriteRewriter and relwrite_mode."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pytensor", reason="the PyTensor bridge needs the extra relwrite[pytensor]")

import pytensor
import pytensor.tensor as pt
from pytensor.graph.traversal import io_toposort

from relwrite.engine.explore import Limits
from relwrite.interop.pytensor import RelwriteRewriter, relwrite_mode

PLAIN = pytensor.compile.mode.Mode(linker="py", optimizer="fast_compile")
"""PyTensor's fast_compile rewrites only (no stabilization of its own), the Python linker."""

x = pt.dscalar("x")
v = pt.dvector("v")
m = pt.dmatrix("m")

GRAPHS = [
    pt.log(1 + pt.exp(x)),
    pt.exp(pt.log(v)) * 1.0 + 0.0 - v / 2,
    (m * 2).sum(axis=1) + pt.dot(m, v) - pt.special.softmax(m, axis=1).max(axis=1),
    pt.switch(v > 0, pt.sqrt(v**2), -v) + pt.log1p(pt.exp(-pt.abs(v))),
]


@pytest.fixture(scope="module")
def functions():
    mode = relwrite_mode(PLAIN)
    pairs = []
    for graph in GRAPHS:
        inputs = [var for var in pytensor.graph.graph_inputs([graph]) if var in (x, v, m)]
        pairs.append(
            (
                inputs,
                pytensor.function(inputs, graph, mode=PLAIN),
                pytensor.function(inputs, graph, mode=mode),
            )
        )
    return pairs


@given(seed=st.integers(0, 2**32 - 1), scale=st.sampled_from([1.0, 10.0]))
@settings(max_examples=20)
def test_functions_compiled_with_relwrite_give_equal_values(functions, seed, scale):
    rng = np.random.default_rng(seed)
    values = {x: rng.normal() * scale, v: rng.normal(size=3) * scale, m: rng.normal(size=(2, 3)) * scale}
    for inputs, plain, rewritten in functions:
        args = [values[p] for p in inputs]
        # atol: where log(1 + exp(x)) loses its bits to rounding (x < -15), relwrite's softplus keeps them
        np.testing.assert_allclose(rewritten(*args), plain(*args), rtol=1e-9, atol=1e-12)


def test_unstable_graph_gets_the_stable_form(functions):
    """log(1 + exp(x)) overflows at x = 1000; relwrite's stabilize rules give softplus, which does not."""
    inputs, plain, rewritten = functions[0]
    assert math.isinf(plain(1000.0))
    assert rewritten(1000.0) == 1000.0
    assert rewritten(-1000.0) == 0.0 and plain(-1000.0) == 0.0
    ops = [
        str(node.op) for node in io_toposort(rewritten.maker.fgraph.inputs, rewritten.maker.fgraph.outputs)
    ]
    assert ops == ["Softplus"]


def test_best_form_by_a_cost_inside_pytensor():
    rewriter = RelwriteRewriter(
        cost="nodes", limits=Limits(seconds=math.inf, rule_seconds=math.inf, iterations=4)
    )
    mode = relwrite_mode(PLAIN, rewriter, name="relwrite_nodes")
    graph = pt.exp(x * 1.0 + 0.0) - 0.0
    fn = pytensor.function([x], graph, mode=mode)
    assert [str(node.op) for node in fn.maker.fgraph.apply_nodes] == ["Exp"]
    assert fn(2.5) == math.exp(2.5)


def test_a_taken_name_is_not_silently_reused():
    relwrite_mode(PLAIN)
    with pytest.raises(ValueError, match="'relwrite' is registered"):
        relwrite_mode(PLAIN, RelwriteRewriter(include=("stabilize",)))

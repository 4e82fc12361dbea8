"""Pickling and deep copies: types, variables, graphs, FunctionGraphs with their features, rules and
compiled functions come back equal and working, without recursion over graph depth."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import relwrite as rw
from relwrite.backends.numpy import numpy_function
from relwrite.compile.function import function
from relwrite.graph import ops
from relwrite.graph.basic import Constant, graph_inputs
from relwrite.graph.features import History, ReplaceValidate
from relwrite.graph.fg import FunctionGraph
from relwrite.relations import catalogue
from relwrite.testing import expression_graphs, input_values

ROUND_TRIPS = {
    "pickle": lambda v: pickle.loads(pickle.dumps(v)),
    "pickle protocol 5": lambda v: pickle.loads(pickle.dumps(v, protocol=5)),
    "deepcopy": copy.deepcopy,
}
round_trips = pytest.mark.parametrize("round_trip", ROUND_TRIPS.values(), ids=ROUND_TRIPS)


@round_trips
def test_types_ops_and_constants_come_back_equal(round_trip):
    for value in (rw.vector("x").type, ops.add, ops.Sum((0, 1)), ops.DimShuffle(2, (1, 0)), rw.constant(2.5)):
        assert round_trip(value) == value


@round_trips
@given(graph=expression_graphs(max_nodes=10), data=st.data())
def test_a_random_graph_comes_back_printing_and_computing_the_same(round_trip, graph, data):
    inputs, output = graph
    inputs_back, output_back = round_trip((inputs, output))
    assert rw.pprint(output_back) == rw.pprint(output)
    used = [v for v in graph_inputs([output_back]) if not isinstance(v, Constant)]
    assert all(any(v is i for i in inputs_back) for v in used)  # the inputs are the graph's own
    values = data.draw(input_values(inputs))
    with np.errstate(all="ignore"):
        expected = numpy_function(inputs, output)(*values)
        got = numpy_function(inputs_back, output_back)(*values)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.slow
@round_trips
def test_a_100000_node_chain_needs_no_recursion(round_trip):
    x = rw.vector("x")
    out = x
    for _ in range(100_000):
        out = ops.exp(out)
    back = round_trip(out)
    depth, node = 0, back.owner
    while node is not None:
        depth, node = depth + 1, node.inputs[0].owner
    assert depth == 100_000


@round_trips
def test_a_function_graph_keeps_its_features_working(round_trip):
    x = rw.vector("x")
    fgraph = FunctionGraph([x], [ops.exp(ops.log(x)) * 2.0], features=[History(), ReplaceValidate()])
    back = round_trip(fgraph)
    back.check_integrity()
    assert back.fingerprint() == fgraph.fingerprint()
    assert {type(f) for f in back._features} == {History, ReplaceValidate}
    (mul,) = [n for n in back.apply_nodes if n.op == ops.mul]
    checkpoint = back.checkpoint()
    back.replace_validate(mul.inputs[0], back.inputs[0])
    assert rw.pprint(back.outputs[0]) == "(x * 2.0)"
    back.revert(checkpoint)
    assert back.fingerprint() == fgraph.fingerprint()


@round_trips
def test_catalogue_rules_come_back_as_themselves(round_trip):
    for rule in catalogue():
        assert round_trip(rule) is rule


def test_a_rule_nobody_holds_cannot_be_pickled_and_says_which():
    made = [rw.relations.rule("unheld_rule", (ops.exp, (ops.log, "x")), "x")]
    with pytest.raises(pickle.PicklingError, match="unheld_rule"):
        pickle.dumps(made[0])


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run"])
def test_a_compiled_function_reloads_without_compiling(mode, monkeypatch):
    from relwrite.backends.c import compiler

    x = rw.vector("x")
    f = function([x], ops.exp(x) * 2.0 + x, mode=mode)
    data = pickle.dumps(f)
    monkeypatch.setattr(compiler.ModuleCache, "_compile", lambda *a: pytest.fail("compiled again"))
    back = pickle.loads(data)
    assert type(back.linker) is type(f.linker)  # the class travels by its module path
    values = np.array([0.5, -1.0, 2.0])
    np.testing.assert_array_equal(back(values), f(values))
    np.testing.assert_array_equal(copy.deepcopy(f)(values), f(values))


def test_a_graph_pickled_here_is_equal_to_its_ops_in_another_process(tmp_path):
    """An op's cached hash names its class by identity, which a fresh process (a spawned worker, a
    remote executor) does not share: unpickled there, its ops must still equal the module's."""
    import pickle
    import subprocess
    import sys

    v = rw.vector("v")
    expr = ops.exp(v) - ops.sum(v, axis=0) * 2.0
    hash(expr.owner.op), hash(expr.owner.inputs[0].owner.op)  # the hashes cached before pickling
    path = tmp_path / "graph.pkl"
    path.write_bytes(pickle.dumps(expr))
    check = (
        "import pickle, sys\n"
        "from relwrite.graph import ops\n"
        "expr = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "(left, right) = expr.owner.inputs\n"
        "assert expr.owner.op == ops.sub and hash(expr.owner.op) == hash(ops.sub)\n"
        "assert left.owner.op == ops.exp and {left.owner.op: 1}[ops.exp] == 1\n"
        "assert right.owner.inputs[0].owner.op == ops.Sum(axis=(0,))\n"
    )
    done = subprocess.run([sys.executable, "-c", check, str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

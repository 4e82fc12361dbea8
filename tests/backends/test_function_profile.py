"""function(..., profile=True): compile time split into rewriting, validation and linking, the rewriter's
profile nested in run order, and each node's share of the calls' time."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relwrite as rw
from relwrite.backends.c import c_available
from relwrite.compile.function import function
from relwrite.compile.profile import FunctionProfile, OpTime
from relwrite.graph.basic import graph_inputs
from relwrite.testing import expression_graphs


def _profiled(mode: str, **kwargs):
    x, w = rw.vector("x"), rw.matrix("W")
    f = function([x, w], rw.tanh(rw.dot(w, x) + 1.0) * 2.0, mode=mode, profile=True, **kwargs)
    for _ in range(3):
        f(np.ones(3), np.ones((4, 3)))
    return f


@pytest.mark.parametrize(
    "mode",
    ["fast_compile", pytest.param("fast_run", marks=pytest.mark.skipif(not c_available(), reason="no C"))],
)
def test_the_summary_says_where_compile_and_call_time_went(mode):
    f = _profiled(mode)
    profile = f.profile
    assert isinstance(profile, FunctionProfile)
    assert profile.calls == 3 and profile.call_time > 0
    assert profile.apply_nodes == len(f.fgraph.apply_nodes)
    assert profile.rewrite_time > 0 and profile.link_time > 0 and profile.validate_time >= 0
    assert set(profile.node_times) == set(f.fgraph.apply_nodes)
    assert 0 < sum(profile.node_times.values()) <= profile.call_time
    text = profile.summary()
    for line in (
        "Function profiling",
        "Time in 3 calls to Function.__call__",
        "Total compile time",
        f"Number of Apply nodes: {profile.apply_nodes}",
        "Rewrite time",
        "Validate time",
        "Linker time",
        "Rewriter profile",
        "Time per op class over all calls",
        "Time per op over all calls",
        "Time per node over all calls",
        "<% time> <sum %> <apply time> <time per call> <type> <#call> <#apply> <op class>",
    ):
        assert line in text, line
    assert profile.node_calls == dict.fromkeys(f.fgraph.apply_nodes, 3)
    kinds = {row.name: row.kind for row in profile.by_op_class()}
    if mode == "fast_run":
        assert kinds["Composite"] == "C"  # the fused loop runs compiled
    else:
        assert set(kinds.values()) == {"Py"}  # the NumPy linker compiles nothing
    for node in f.fgraph.apply_nodes:
        assert f"   {type(node.op).__name__}\n" in text and f"   {node.op}\n" in text
    assert "test_function_profile.py" in profile.message  # where the function was made
    assert str(next(iter(f.fgraph.apply_nodes))) in text


def test_phases_are_listed_in_the_order_they_ran():
    text = _profiled("fast_run").profile.summary()
    positions = [text.index(f"('{phase}'") for phase in ("merge1", "canonicalize", "stabilize", "specialize")]
    assert positions == sorted(positions)


def test_a_message_names_the_function_and_profiling_changes_no_result():
    x = rw.vector("x")
    f = function([x], rw.exp(x) + 1.0, mode="fast_compile", profile="the exp one")
    assert f.profile.message == "the exp one"
    np.testing.assert_array_equal(f(np.array([0.0, 1.0])), np.exp([0.0, 1.0]) + 1.0)


@pytest.mark.parametrize(
    "mode",
    ["fast_compile", pytest.param("fast_run", marks=pytest.mark.skipif(not c_available(), reason="no C"))],
)
def test_a_pickled_profiled_function_keeps_its_profile_and_counts_on(mode):
    import pickle

    f = _profiled(mode)
    loaded = pickle.loads(pickle.dumps(f))
    profile = loaded.profile
    assert isinstance(profile, FunctionProfile) and profile is not f.profile
    assert profile.message == f.profile.message and profile.calls == 3
    assert (profile.apply_nodes, profile.rewrite_time, profile.link_time, profile.call_time) == (
        f.profile.apply_nodes,
        f.profile.rewrite_time,
        f.profile.link_time,
        f.profile.call_time,
    )
    assert set(profile.node_times) == set(loaded.fgraph.apply_nodes)  # keyed by the loaded graph's nodes
    by_text = {str(node): seconds for node, seconds in profile.node_times.items()}
    assert by_text == {str(node): seconds for node, seconds in f.profile.node_times.items()}
    assert profile.summary() == f.profile.summary()
    assert set(profile.node_calls) == set(loaded.fgraph.apply_nodes) and set(profile.node_calls.values()) == {
        3
    }
    assert {str(n) for n in profile.c_nodes} == {str(n) for n in f.profile.c_nodes}  # the new linker's
    before = dict(profile.node_times)
    np.testing.assert_array_equal(loaded(np.ones(3), np.ones((4, 3))), f(np.ones(3), np.ones((4, 3))))
    assert profile.calls == 4 and all(profile.node_times[node] > before[node] for node in before)
    assert set(profile.node_calls.values()) == {4}


def test_the_tables_by_op_class_op_and_node_from_given_times():
    x = rw.vector("x")
    a, b, c = rw.exp(x).owner, rw.exp(rw.log(x)).owner, rw.log(x).owner
    profile = FunctionProfile(
        "made up",
        node_times={a: 0.5, b: 0.25, c: 0.25},
        node_calls={a: 2, b: 2, c: 2},
        c_nodes=frozenset({a}),
    )
    assert profile.by_op_class() == [OpTime("Exp", 0.75, 4, 2, "C+Py"), OpTime("Log", 0.25, 2, 1, "Py")]
    assert profile.by_op() == [OpTime("exp", 0.75, 4, 2, "C+Py"), OpTime("log", 0.25, 2, 1, "Py")]
    assert profile.by_op()[0].per_call == 0.75 / 4
    text = profile.summary(most_ops=1, most_nodes=2)
    assert text.split("\n\n")[-3:] == [
        "Time per op class over all calls\n"
        "--------------------------------\n"
        "  <% time> <sum %> <apply time> <time per call> <type> <#call> <#apply> <op class>\n"
        "    75.0%    75.0%  7.500e-01s  1.875e-01s  C+Py       4       2   Exp\n"
        "  ... 1 more, 25.0% of the time",
        "Time per op over all calls\n"
        "--------------------------\n"
        "  <% time> <sum %> <apply time> <time per call> <type> <#call> <#apply> <op>\n"
        "    75.0%    75.0%  7.500e-01s  1.875e-01s  C+Py       4       2   exp\n"
        "  ... 1 more, 25.0% of the time",
        "Time per node over all calls\n"
        "----------------------------\n"
        "  <% time> <sum %> <apply time> <time per call> <type> <#call> <node>\n"
        "    50.0%    50.0%  5.000e-01s  2.500e-01s     C       2   exp(x)\n"
        "    25.0%    75.0%  2.500e-01s  1.250e-01s    Py       2   exp(log.0)\n"
        "  ... 1 more nodes, 25.0% of the time",
    ]
    for bad in ({"most_ops": -1}, {"most_nodes": 2.5}, {"most_ops": True}):
        with pytest.raises(ValueError, match="must be a number of rows >= 0, got"):
            profile.summary(**bad)


@settings(max_examples=15, deadline=None)
@given(expression_graphs(max_nodes=8), st.integers(min_value=1, max_value=3))
def test_the_groups_account_for_every_node_call_and_second(graph, calls):
    _, output = graph
    inputs = graph_inputs([output])
    f = function(inputs, output, mode="fast_compile", profile="groups")
    for _ in range(calls):
        with np.errstate(all="ignore"):
            f(*(np.full(2, 0.5) for _ in inputs))
    profile = f.profile
    nodes = f.fgraph.apply_nodes
    assert profile.node_calls == dict.fromkeys(nodes, calls)
    for rows, key in (
        (profile.by_op_class(), lambda n: type(n.op).__name__),
        (profile.by_op(), lambda n: str(n.op)),
    ):
        assert sum(row.nodes for row in rows) == len(nodes) and sum(row.calls for row in rows) == calls * len(
            nodes
        )
        assert {row.name: row.nodes for row in rows} == Counter(key(n) for n in nodes)
        assert math.isclose(sum(row.seconds for row in rows), sum(profile.node_times.values()), abs_tol=1e-12)
        assert [row.seconds for row in rows] == sorted((row.seconds for row in rows), reverse=True)
        assert {row.kind for row in rows} <= {"Py"}  # the NumPy linker compiles nothing

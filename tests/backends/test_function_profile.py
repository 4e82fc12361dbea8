"""function(..., profile=True): compile time split into rewriting, validation and linking, the rewriter's
profile nested in run order, and each node's share of the calls' time."""

from __future__ import annotations

import numpy as np
import pytest

import relwrite as rw
from relwrite.backends.c import c_available
from relwrite.backends.function import function
from relwrite.backends.profile import FunctionProfile


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
        "Time per node over all calls",
    ):
        assert line in text, line
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
    before = dict(profile.node_times)
    np.testing.assert_array_equal(loaded(np.ones(3), np.ones((4, 3))), f(np.ones(3), np.ones((4, 3))))
    assert profile.calls == 4 and all(profile.node_times[node] > before[node] for node in before)

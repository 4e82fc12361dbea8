"""benchmarks/pymc_models.py runs: its pieces on small models, so it cannot rot (no timing asserted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymc", reason="benchmarks/pymc_models.py needs the extra relwrite[pytensor]")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("pymc_benchmark", ROOT / "benchmarks" / "pymc_models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_eight_models_and_a_round_trip_of_each_graph_of_one(bench):
    assert len(bench.MODELS) == 8
    model = bench.MODELS["poisson_glm"]()
    pts = bench.points(model, 3, seed=0)
    for graph in (model.logp(), model.dlogp()):
        converted = bench.round_trip(graph, model.value_vars, pts)
        assert converted["trip"] < 1e-12 and converted["own"] < 1e-12


def test_checks_come_out_nested_ones_too(bench):
    model = bench.MODELS["eight_schools_centered"]()
    out, _ = bench.from_pytensor(bench.without_checks(model.logp()))
    assert bench.opaque_ops(out) == []


def test_relative_difference_counts_disagreeing_infinities(bench):
    assert bench.relative(np.array([1.0, np.inf]), np.array([1.0, np.inf])) == 0.0
    assert bench.relative(np.array([1.0, np.inf]), np.array([1.0, -np.inf])) == np.inf
    assert bench.relative(np.array([np.nan]), np.array([np.nan])) == 0.0

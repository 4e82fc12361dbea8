"""benchmarks/explore.py runs: every row on tiny inputs, so the script cannot rot (no timing asserted)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from relwrite.graph.printing import pprint

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("explore_benchmark", ROOT / "benchmarks" / "explore.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = _load()


def test_the_quick_run_prints_every_section_and_removes_the_baselines_worktree(capsys, monkeypatch):
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    roots = []

    def timings(root: Path, chain: int, long_chain: int) -> dict[str, float]:
        roots.append(root)
        assert (root / "relwrite" / "__init__.py").exists()
        return {"case": 1.0}

    monkeypatch.setattr(bench, "rewrite_timings", timings)
    assert bench.main(["--repeat", "1", "--quick", "--no-install", "--baseline", "HEAD"]) == 0
    out = capsys.readouterr().out
    for heading in ("1. Equal work", "2. prove", "3. explore at scale", "4. Rewrite speed"):
        assert heading in out
    assert "n = 3 " in out and "(RecursionError)" not in out
    assert "ratio this / HEAD: 1.000x" in out
    assert roots[0] == ROOT and roots[1] != ROOT and not roots[1].exists()
    listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True)
    assert str(roots[1]) not in listed.stdout


def test_rewrite_timings_reads_every_case_of_rewrite_py():
    found = bench.rewrite_timings(ROOT, chain=1, long_chain=0)
    assert {"seed", "seed +unsafe", "seed fast_run", "chain x1"} <= set(found)
    assert all(seconds > 0 for seconds in found.values())


def test_the_equal_work_rows_saturate_on_relwrites_side():
    assert bench.distributivity_relwrite(1).stop == "saturated"
    assert bench.comm_assoc_relwrite(3, 1).stop == "saturated"
    assert bench.seed_proof_relwrite(1).stop == "goal reached"


def test_egglog_and_relwrite_build_the_same_e_graph_under_distributivity():
    egglog = pytest.importorskip("egglog")
    ours, theirs = bench.distributivity_relwrite(1), bench.distributivity_egglog(egglog, 1)
    assert (ours.nodes, theirs.nodes) == (23, 23)  # 5 leaves and 18 applications, both saturated
    assert bench.seed_proof_egglog(egglog, 1).stop == "goal reached"
    assert bench.comm_assoc_egglog(egglog, 3, 1).nodes == 15  # 3 leaves, 12 sums of 2 or 3 of them


def test_the_dag_has_the_nodes_asked_for_and_explores_within_its_limit():
    from relwrite.graph.basic import io_toposort

    assert len(io_toposort([], [bench.shared_dag(300)])) == 300  # every node is used
    _, outcome = bench.explore_all(bench.shared_dag(300), bench.Limits(seconds=0.5), 1)
    assert outcome.startswith("forms: ")


def test_relwrite_alone_lists_and_rechecks_forms_and_finds_log1p():
    expr = bench.seed_small()
    exploration, forms = bench.every_rule_forms(expr, count=3)
    assert forms
    assert bench.recheck(expr, exploration, forms) == len(forms)
    assert pprint(bench.most_accurate("log(1 + x)", {}).expr) == "log1p(x)"

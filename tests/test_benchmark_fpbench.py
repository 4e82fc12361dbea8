"""benchmarks/fpbench.py runs on a small suite (no timing asserted): rows, reasons, Herbie's columns, the
summary; and Herbie's published results it reads are well-formed and name the suite's benchmarks."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

from relwrite.interop.fpcore import read_fpcore, read_fpcores

ROOT = Path(__file__).resolve().parents[1]
HAMMING = ROOT / "tests" / "data" / "hamming"


def _load():
    spec = importlib.util.spec_from_file_location("fpbench_benchmark", ROOT / "benchmarks" / "fpbench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_small_suite_prints_each_benchmark_herbie_beside_it_and_the_summary(tmp_path, capsys):
    (tmp_path / "a.fpcore").write_text(
        '(FPCore (x) :name "expm1" :pre (<= (fabs x) 1) (- (exp x) 1))\n'
        '(FPCore (n) :name "loop" (while (< n 3) ([n 0 (+ n 1)]) n))\n'
        '(FPCore (x) :name "2sqrt (example 3.1)" :pre (and (> x 1) (< x 1e+308))\n'
        "  (- (sqrt (+ x 1)) (sqrt x)))\n",
        encoding="utf-8",
    )
    bench = _load()
    assert bench.main(["--suite", str(tmp_path), "--limit-iterations", "2", "--limit-seconds", "inf"]) == 0
    out = capsys.readouterr().out
    assert "quoted from issue 26, not measured here" in out
    header = next(line for line in out.splitlines() if line.startswith("benchmark"))
    assert header.split()[:5] == ["benchmark", "input", "output", "herbie", "herbie@ours"]
    row = next(line for line in out.splitlines() if line.startswith("expm1"))
    assert row.split()[1:3] != ["-", "-"] and float(row.split()[2]) < 1 and "yes" in row and "expm1(x)" in row
    assert row.split()[3:5] == ["-", "-"]  # no published result of that name
    row = next(line for line in out.splitlines() if line.startswith("2sqrt (example 3.1)")).split()
    published, rescored = float(row[5]), float(row[6])
    assert published == 0.2 and rescored < 1  # Herbie's 1/(sqrt(x+1)+sqrt(x)) on our points
    assert "not expressible: benchmark 'loop': unsupported loop construct" in out
    assert "expressible: 2 of 3; measured: 2" in out
    assert "by Herbie's published bits: " in out and "by Herbie's program scored here: " in out
    published_line = next(line for line in out.splitlines() if "by Herbie's published bits" in line)
    assert re.search(r": \d of 1; Herbie under 1 bit: 1 of 1$", published_line)


def test_herbies_published_results_are_well_formed_and_name_the_suites_benchmarks():
    doc = json.loads((HAMMING / "herbie-results.json").read_text(encoding="utf-8"))
    assert "Herbie's own measurement on its own sample" in doc["note"]
    suite = {
        b.name: b for path in HAMMING.glob("*.fpcore") for b in read_fpcores(path.read_text(encoding="utf-8"))
    }
    names = [r["name"] for r in doc["results"]]
    assert sorted(names) == sorted(suite) and len(names) == 28
    read = []
    for r in doc["results"]:
        if r["herbie_bits"] is None:
            assert (
                r["source"] is None
                and r["original_bits"] is None
                and "missing" in r["note"]
                and "output" not in r
            )
            continue
        assert re.fullmatch(
            r"https://nightly\.cs\.washington\.edu/reports/herbie/[^ ]+/graph\.html(\.gz)?", r["source"]
        )
        assert 0 <= r["herbie_bits"] <= 64 and 0 <= r["original_bits"] <= 64
        if "output" in r:
            arguments = re.match(r"\(FPCore \(([^()]*)\) ", r["output"]).group(1).split()
            assert sorted(arguments) == sorted(v.name for v in suite[r["name"]].inputs), r["name"]
            assert r["output"].count("(") == r["output"].count(")")
            herbie = read_fpcore(r["output"])  # each reads (five call fma), so herbie@ours scores it
            assert sorted(v.name for v in herbie.inputs) == sorted(arguments)
            read.append(r["name"])
    assert len(read) == 16

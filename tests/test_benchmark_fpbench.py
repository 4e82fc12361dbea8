"""benchmarks/fpbench.py runs on a small suite (no timing asserted): rows, reasons, the summary."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("fpbench_benchmark", ROOT / "benchmarks" / "fpbench.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_small_suite_prints_each_benchmark_and_the_summary(tmp_path, capsys):
    (tmp_path / "a.fpcore").write_text(
        '(FPCore (x) :name "expm1" :pre (<= (fabs x) 1) (- (exp x) 1))\n'
        '(FPCore (n) :name "loop" (while (< n 3) ([n 0 (+ n 1)]) n))\n',
        encoding="utf-8",
    )
    bench = _load()
    assert bench.main(["--suite", str(tmp_path), "--limit-iterations", "2", "--limit-seconds", "inf"]) == 0
    out = capsys.readouterr().out
    assert "quoted from issue 26, not measured here" in out
    row = next(line for line in out.splitlines() if line.startswith("expm1"))
    assert row.split()[1:3] != ["-", "-"] and float(row.split()[2]) < 1 and "yes" in row and "expm1(x)" in row
    assert "not expressible: benchmark 'loop': unsupported loop construct" in out
    assert "expressible: 1 of 2; measured: 1" in out and "under 1 bit: 1 of 1 expressible" in out

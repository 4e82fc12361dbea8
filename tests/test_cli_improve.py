"""`relwrite improve FILE.fpcore...` and `relwrite.interop.improve`: benchmarks in, most accurate forms
out as a table, JSON, FPCore, Python, C and HTML pages; failures per benchmark, never a crash."""

from __future__ import annotations

import ctypes
import html
import json
import math
import pickle
import re
import shutil
import subprocess
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from relwrite import function
from relwrite.cli import main
from relwrite.engine.explore import Limits
from relwrite.interop.fpcore import read_fpcores
from relwrite.interop.improve import Improvement, c_source, fpcore_text, improve_benchmarks, python_module

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CC = shutil.which("cc") or shutil.which("gcc")

SUITE = """
(FPCore (x)
 :name "expm1 (example 3.7)"
 :pre (<= (fabs x) 1)
 :herbie-target 0
 (- (exp x) 1))

(FPCore (x)
 :name "2sqrt"
 :pre (and (<= 1 x) (<= x 1e15))
 (- (sqrt (+ x 1)) (sqrt x)))
"""

UNREADABLE = '(FPCore (n) :name "loop" (while (< n 3) ([n 0 (+ n 1)]) n))'

WORK = ["--limit-iterations", "4", "--limit-seconds", "inf"]
"""Work budgets alone: outcomes that do not depend on the machine."""

LIMITS = Limits(iterations=4, seconds=math.inf, rule_seconds=math.inf)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "suite.fpcore"
    path.write_text(SUITE, encoding="utf-8")
    return path


def _rows(out: str) -> dict[str, list[str]]:
    """The table's rows: name -> [input bits, output bits, time, improved]."""
    rows = {}
    for line in out.splitlines()[1:-1]:
        name, rest = re.split(r"\s{2,}", line, maxsplit=1)
        rows[name] = re.split(r"\s{2,}", rest, maxsplit=3)
    return rows


def test_the_table_shows_bits_before_and_after_and_the_improved_expression(suite, capsys):
    assert main(["improve", str(suite), *WORK]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["benchmark", "input", "output", "time", "improved"]
    rows = _rows(out)
    assert list(rows) == ["expm1 (example 3.7)", "2sqrt"]
    before, after, _, expr = rows["expm1 (example 3.7)"]
    assert expr == "expm1(x)" and float(after) < 1 < 30 < float(before)
    before, after, _, expr = rows["2sqrt"]
    assert float(after) < 1 < float(before) and "sqrt" in expr
    assert out.splitlines()[-1].startswith("2 benchmark(s): 2 improved, 0 failed")


def test_a_missing_file_is_a_clear_error_before_anything_runs(suite, tmp_path, capsys):
    missing = tmp_path / "nope.fpcore"
    assert main(["improve", str(suite), str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == f"relwrite: error: no such file: {missing}" and captured.out == ""


def test_an_unreadable_fpcore_is_a_failed_row_and_the_others_still_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = Path("mixed.fpcore")
    path.write_text(SUITE + UNREADABLE, encoding="utf-8")
    broken = Path("broken.fpcore")
    broken.write_text("(FPCore (x) (+ x 1)", encoding="utf-8")
    assert main(["improve", str(path), str(broken), *WORK]) == 1
    rows = _rows(capsys.readouterr().out)
    assert rows["expm1 (example 3.7)"][3] == "expm1(x)"
    failed = {name: cells[-1] for name, cells in rows.items() if cells[-1].startswith("failed: ")}
    assert len(failed) == 2
    assert failed["mixed.fpcore (unreadable)"].startswith(
        "failed: FPCoreError: mixed.fpcore: benchmark 'loop'"
    )
    assert (
        failed["broken.fpcore"]
        == "failed: FPCoreError: broken.fpcore: unclosed list opened at line 1, column 1"
    )


def test_a_benchmark_that_fails_inside_the_search_is_reported_not_raised(tmp_path, capsys):
    path = tmp_path / "nowhere.fpcore"
    path.write_text(SUITE + '(FPCore (x) :name "not real" (sqrt (- -1 (* x x))))', encoding="utf-8")
    assert main(["improve", str(path), *WORK, "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["failed"] == 1
    bad = document["benchmarks"][2]
    assert bad["name"] == "not real" and not bad["ok"] and bad["error"].startswith("AccuracyError")
    assert [b["ok"] for b in document["benchmarks"][:2]] == [True, True]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--jobs", "0"], "--jobs must be at least 1, got 0"),
        (["--format", "fpcore,rust", "--out", "OUT"], "--format: unknown format 'rust'"),
        (["--format", "python"], "--format says what --out writes: give --out DIR too"),
        (["--limit-iterations", "0"], "--limit-iterations must be a positive int, got 0"),
    ],
)
def test_bad_options_are_one_line_errors(suite, tmp_path, capsys, argv, message):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert main(["improve", str(suite), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"relwrite: error: {message}")


def test_the_outputs_read_back_and_compute_what_the_forms_compute(suite, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["improve", str(suite), *WORK, "--out", str(out), "--format", "fpcore,python,c"]) == 0
    forms = {b.name: b for b in read_fpcores((out / "improved.fpcore").read_text(encoding="utf-8"))}
    assert list(forms) == ["expm1 (example 3.7)", "2sqrt"]
    assert str(forms["expm1 (example 3.7)"].precondition) == "abs(x) <= 1"
    assert forms["expm1 (example 3.7)"].properties == [(":herbie-target", "0")]
    assert forms["expm1 (example 3.7)"].expr.owner.op.name == "expm1"

    namespace: dict = {}
    exec((out / "improved.py").read_text(encoding="utf-8"), namespace)
    xs = np.array([1.0, 2.5, 1e6, 1e14])
    for name, bench in forms.items():
        fn = namespace[{"expm1 (example 3.7)": "expm1_example_3_7", "2sqrt": "f_2sqrt"}[name]]
        graph = function(bench.inputs, bench.expr, mode="fast_compile")
        points = xs / 1e15 if "expm1" in name else xs
        expected = [float(graph(p)) for p in points]
        assert [float(fn(p)) for p in points] == expected

    if CC is None:
        pytest.skip("no C compiler")
    library = tmp_path / "improved.so"
    subprocess.run(
        [CC, "-shared", "-fPIC", "-O1", "-o", str(library), str(out / "improved.c"), "-lm"], check=True
    )
    compiled = ctypes.CDLL(str(library))
    f = compiled.f_2sqrt
    f.restype, f.argtypes = ctypes.c_double, [ctypes.c_double]
    assert f(1e14) == float(namespace["f_2sqrt"](1e14))


def test_two_jobs_give_what_one_gives(suite, tmp_path, capsys):
    path = tmp_path / "three.fpcore"
    path.write_text(SUITE + '(FPCore (x) :name "log1p" :pre (< 0 x 1e-3) (log (+ 1 x)))', encoding="utf-8")
    documents = []
    for jobs in ("1", "2"):
        assert main(["improve", str(path), *WORK, "--jobs", jobs, "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        for bench in document["benchmarks"]:
            del bench["seconds"]
        documents.append(document)
    assert documents[0] == documents[1]
    assert [b["output"] for b in documents[0]["benchmarks"]][2] == "log1p(x)"


def test_the_api_runs_on_any_executor_and_its_results_pickle(suite):
    benchmarks = read_fpcores(suite.read_text(encoding="utf-8"))
    with ThreadPoolExecutor(2) as pool:
        results = improve_benchmarks(benchmarks, pool, LIMITS)
    serial = improve_benchmarks(benchmarks, None, LIMITS)
    assert [r.to_dict()["output"] for r in results] == [r.to_dict()["output"] for r in serial]
    copy = pickle.loads(pickle.dumps(results))
    assert [c.output_bits for c in copy] == [r.output_bits for r in results]
    assert copy[0].improved.inputs == list(copy[0].improved.expr.owner.inputs)
    assert "def expm1_example_3_7(x):" in python_module(copy) and "double f_2sqrt(double x)" in c_source(copy)


class _Broken(Executor):
    """An executor whose tasks all fail (a worker that died)."""

    def submit(self, fn, /, *args, **kwargs):
        future: Future = Future()
        future.set_exception(RuntimeError("worker died"))
        return future


def test_a_task_the_executor_loses_is_a_failed_improvement(suite):
    benchmarks = read_fpcores(suite.read_text(encoding="utf-8"))
    results = improve_benchmarks(benchmarks, _Broken(), LIMITS)
    assert [r.ok for r in results] == [False, False]
    assert results[0].error == "the executor failed: RuntimeError: worker died"
    assert isinstance(results[0], Improvement) and results[0].name == "expm1 (example 3.7)"


def test_the_report_has_a_page_per_benchmark_and_an_index(suite, tmp_path, capsys):
    report = tmp_path / "report"
    path = tmp_path / "mixed.fpcore"
    path.write_text(SUITE + UNREADABLE, encoding="utf-8")
    assert main(["improve", str(path), *WORK, "--report", str(report)]) == 1
    index = (report / "index.html").read_text(encoding="utf-8")
    pages = re.findall(r"<a href='([^']+)'>", index)
    assert pages == ["01-expm1-example-3-7.html", "02-2sqrt.html", "03-mixed-fpcore-unreadable.html"]
    page = html.unescape((report / pages[0]).read_text(encoding="utf-8"))
    assert "relwrite improve: expm1 (example 3.7)" in page and "expm1(x)" in page
    plots = page[page.index("Bits of error against each input") : page.index("Derivation")]
    assert plots.count("<svg") == 1 and plots.count("<polyline") == 2  # one input: one plot, two lines
    assert "input: " in plots and "output: " in plots
    assert "<th>assumptions</th>" in page and "<script" not in page
    assert "Failed" in (report / pages[2]).read_text(encoding="utf-8")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/install-optional installs it)")
def test_the_report_pages_load_in_a_headless_browser(suite, tmp_path, capsys):
    report = tmp_path / "report"
    assert main(["improve", str(suite), *WORK, "--report", str(report)]) == 0
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    for page, title in (
        ("index.html", "relwrite improve: 2 benchmarks"),
        ("02-2sqrt.html", "relwrite improve: 2sqrt"),
    ):
        dom = subprocess.run(
            [CHROMIUM, *flags, "--dump-dom", (report / page).as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        assert title in html.unescape(dom)
    assert "<polyline" in dom and "sqrt" in dom


def test_a_piecewise_form_shows_its_split_points_in_the_report_json_and_outputs():
    from relwrite.engine.explore import best_form
    from relwrite.engine.explore.costs import Accuracy
    from relwrite.graph import ops as o
    from relwrite.relations import rule
    from relwrite.report import improve_report

    (bench,) = read_fpcores('(FPCore (x) :name "hyperbolic" (+ (sqrt (+ 1 (* x x))) x))')
    root = (o.sqrt, (o.add, 1.0, (o.mul, "x", "x")))
    conjugate = rule("conjugate", (o.add, root, "x"), (o.true_div, 1.0, (o.sub, root, "x")), tags=["explore"])
    form = best_form(bench.expr, cost="accuracy", rules=[conjugate], limits=LIMITS, series=False)
    accuracy = Accuracy(bench.expr)
    improvement = Improvement("hyperbolic", bench, form, accuracy(bench.expr), form.cost, accuracy=accuracy)
    assert improvement.output_bits < improvement.input_bits - 5
    page = html.unescape(improve_report(improvement))
    regimes = page[page.index("Regimes on x") : page.index("Derivation")]
    (split,) = form.regimes.splits
    assert -10 < split < 0  # the conjugate left of it, the input (accurate there) right
    at = repr(split)
    assert (
        f"Split points: {at}." in regimes
        and f"<td>x < {at}</td>" in regimes
        and f"<td>x >= {at}</td>" in regimes
    )
    assert improvement.to_dict()["regimes"]["splits"] == [split]
    assert f"(if (< x {at}) (/ 1 (- (sqrt" in fpcore_text([improvement])
    assert f"np.where(x < {at}, " in python_module([improvement])
    assert f"return (x < {at}) ? " in c_source([improvement])


def test_a_series_approximation_is_marked_and_no_series_keeps_to_equal_forms(tmp_path, capsys):
    path = tmp_path / "invcot.fpcore"
    path.write_text(
        '(FPCore (x) :name "invcot" :pre (and (< -0.026 x) (< x 0.026)) (- (/ 1 x) (/ 1 (tan x))))',
        encoding="utf-8",
    )
    assert main(["improve", str(path), *WORK, "--json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)["benchmarks"]
    assert found["approximate"] is True and found["derivation"].startswith("series in x at 0")
    assert found["output_bits"] < 1 < 50 < found["input_bits"]
    assert main(["improve", str(path), *WORK]) == 0
    assert _rows(capsys.readouterr().out)["invcot"][3].endswith("(approximate)")
    assert main(["improve", str(path), *WORK, "--no-series", "--json"]) == 0
    (exact,) = json.loads(capsys.readouterr().out)["benchmarks"]
    assert exact["approximate"] is False and "series" not in exact["derivation"]

"""explore, best_form and improve take PyTensor graphs: converted on the way in, forms back as PyTensor."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("pytensor", reason="the PyTensor bridge needs the extra relwrite[pytensor]")

import pytensor
import pytensor.tensor as pt
from pytensor.graph.basic import Variable as PtVariable

import relwrite
from relwrite import Limits, best_form, explore
from relwrite.cli import main
from relwrite.interop.improve import improve_benchmark

PY = pytensor.compile.mode.Mode(linker="py", optimizer=None)
BUDGET = Limits(seconds=math.inf, rule_seconds=math.inf, iterations=6, nodes=3000)

x = pt.dscalar("x")


def test_best_form_of_a_pytensor_graph_comes_back_as_pytensor():
    form = best_form(pt.log(1 + pt.exp(x)), cost="accuracy", limits=BUDGET)
    assert isinstance(form.expr, relwrite.Variable) and isinstance(form.foreign, PtVariable)
    fn = pytensor.function([x], form.foreign, mode=PY)  # over the graph's own input x
    assert fn(1000.0) == 1000.0 and fn(0.0) == pytest.approx(math.log(2.0))
    assert "softplus" in form.derivation


def test_explore_lists_pytensor_forms():
    forms = list(explore(pt.exp(x * 1.0 + 0.0) - 0.0, limits=BUDGET, most=3))
    assert forms and all(isinstance(f.foreign, PtVariable) for f in forms)
    fn = pytensor.function([x], forms[0].foreign, mode=PY)
    assert fn(0.5) == pytest.approx(math.exp(0.5))


def test_improve_takes_a_pytensor_graph():
    budget = Limits(seconds=math.inf, rule_seconds=math.inf, iterations=2, nodes=300)
    improvement = improve_benchmark(pt.sqrt(x + 1) - pt.sqrt(x), budget, series=False)
    assert improvement.ok and improvement.output_bits < improvement.input_bits
    assert [v.name for v in improvement.benchmark.inputs] == ["x"]
    (y,) = improvement.benchmark.inputs
    expected = relwrite.function([y], improvement.form.expr, mode="fast_compile")(1e12)
    assert pytensor.function([x], improvement.form.foreign, mode=PY)(1e12) == expected


def test_relwrite_input_has_no_foreign_form():
    assert best_form(relwrite.scalar("y") * 1.0, limits=BUDGET).foreign is None


@pytest.mark.parametrize("bad", ["log(1 + exp(x))", 3.0, [x]])
def test_other_input_is_named(bad):
    with pytest.raises(TypeError, match=r"expected a graph Variable \(relwrite's, or one of pytensor\), got"):
        best_form(bad)


MODEL = """
import pytensor.tensor as pt
x = pt.dscalar("x")
softplus_naive = pt.log(1 + pt.exp(x))
difference = pt.sqrt(x + 1) - pt.sqrt(x)
not_a_graph = 42
"""


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL, encoding="utf-8")
    return path


def test_explore_command_takes_a_graph_a_python_file_builds(model_file, capsys):
    argv = ["explore", f"{model_file}:softplus_naive", "--cost", "accuracy", "-n", "1"]
    status = main([*argv, "--limit-iterations", "4", "--limit-seconds", "inf"])
    out = capsys.readouterr().out
    assert status == 0 and "1. softplus(x)" in out


def test_improve_command_takes_a_graph_a_python_file_builds(model_file, capsys):
    argv = ["improve", f"{model_file}:difference", "--json", "--no-series"]
    status = main([*argv, "--limit-iterations", "2", "--limit-nodes", "300", "--limit-seconds", "inf"])
    (row,) = json.loads(capsys.readouterr().out)["benchmarks"]
    assert status == 0 and row["name"] == "difference" and row["output_bits"] < row["input_bits"]


@pytest.mark.parametrize(
    ("name", "error"),
    [("nothing", "defines no 'nothing'"), ("not_a_graph", "expected a graph Variable")],
)
def test_a_graph_file_that_gives_no_graph_is_one_line(model_file, capsys, name, error):
    assert main(["explore", f"{model_file}:{name}"]) == 2
    assert error in capsys.readouterr().err

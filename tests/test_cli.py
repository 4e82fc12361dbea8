"""The `relwrite` command: the demo, `rewrite`, and one-line errors for bad input."""

import subprocess
import sys

import pytest

from relwrite.cli import main


def test_demo_prints_rewrites_and_evaluates_the_seed_expression(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "(z + (((y * x) / y) * (z / x)))" in out
    assert "FunctionGraph(add(z, mul(true_div(mul(y, x), y), true_div(z, x))))" in out
    assert "add [id A]" in out
    assert "FunctionGraph(add(z, mul(x, true_div(z, x))))" in out
    assert "EquilibriumRewriter  simplify" in out
    assert "x=2.0, y=3.0, z=5.0: before 10.0, after 10.0" in out


def test_rewrite_prints_before_after_and_profile(capsys):
    assert main(["rewrite", "exp(0.0) * x + x", "--var", "x:vector", "--profile"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "before: ((exp(0.0) * x) + x)"
    assert out[1] == "after:  ((1.0 * x) + x)"
    assert any("constant_folding" in line for line in out)


def test_rewrite_with_include_and_exclude(capsys):
    assert (
        main(["rewrite", "exp(0.0) + x", "--include", "canonicalize", "--exclude", "constant_folding"]) == 0
    )
    assert capsys.readouterr().out.splitlines()[1] == "after:  (exp(0.0) + x)"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "required"),
        (["nonsense"], "invalid choice"),
        (["demo", "--bogus"], "unrecognized arguments"),
        (["rewrite", "x +"], "cannot parse 'x +'"),
        (["rewrite", "foo(x)"], "unknown function 'foo'"),
        (["rewrite", "x", "--mode", "bogus"], "unknown mode 'bogus'"),
        (["rewrite", "x", "--var", "x"], "expected NAME:TYPE"),
        (["rewrite", "x", "--var", "x:vec"], "unknown type spec 'vec'"),
        (
            ["rewrite", "x @ y", "--var", "x:vector", "--var", "y:scalar"],
            "dot: inputs must be vectors or matrices",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err_lines = captured.err.strip().splitlines()
    assert len(err_lines) == 1 and err_lines[0].startswith("relwrite: error:")
    assert message in err_lines[0]
    assert "Traceback" not in captured.err


def test_python_dash_m_runs_the_command():
    done = subprocess.run([sys.executable, "-m", "relwrite", "demo"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "after 10.0" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "relwrite", "frobnicate"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr

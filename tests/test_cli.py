"""The `relwrite` command: the demo, `rewrite`, `rules`, `check`, and one-line errors for bad input."""

import re
import subprocess
import sys

import pytest

from relwrite.cli import main
from relwrite.relations import catalogue
from relwrite.relations.docs import catalogue_markdown, describe


def test_demo_prints_rewrites_compiles_and_times_the_seed_expression(capsys):
    assert main(["demo", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "(z + (((y * x) / y) * (z / x)))" in out
    assert "FunctionGraph(add(z, mul(true_div(mul(y, x), y), true_div(z, x))))" in out
    assert "add [id A]" in out
    assert "FunctionGraph(mul(2.0, z))" in out
    assert "mul_div_cancel x1" in out
    assert "EquilibriumRewriter  canonicalize" in out
    assert "x=2.0, y=3.0, z=5.0: before 10.0, after 10.0" in out
    timing = next(line for line in out.splitlines() if line.startswith("time:"))
    assert "relwrite" in timing and "plain numpy" in timing and "x faster" in timing


def test_rewrite_prints_before_after_and_profile(capsys):
    assert main(["rewrite", "exp(0.0) * x + x", "--var", "x:vector", "--profile"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "before: ((exp(0.0) * x) + x)"
    assert out[1] == "after:  (2.0 * x)"
    assert any("constant_folding" in line for line in out)


def test_rewrite_with_include_and_exclude(capsys):
    assert (
        main(["rewrite", "exp(0.0) + x", "--include", "canonicalize", "--exclude", "constant_folding"]) == 0
    )
    assert capsys.readouterr().out.splitlines()[1] == "after:  (x + exp(0.0))"


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
    assert "after 10.0" in done.stdout and "x faster" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "relwrite", "frobnicate"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


# -- relwrite rules ----------------------------------------------------------------------


def _blocks(out: str) -> dict[str, list[str]]:
    """The printed rules: name -> its indented lines."""
    blocks: dict[str, list[str]] = {}
    for block in out.strip().split("\n\n")[:-1]:
        name, *lines = block.splitlines()
        blocks[name] = lines
    return blocks


def test_rules_lists_every_catalogue_rule_and_the_count(capsys):
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    rules = catalogue()
    blocks = _blocks(out)
    assert list(blocks) == [r.name for r in rules]
    assert out.strip().splitlines()[-1] == f"{len(rules)} rules"
    for r in rules:
        lines = blocks[r.name]
        assert lines[0] == f"  tags:        {', '.join(sorted(r.tags))}"
        assert lines[1] == (
            "  directions:  both"
            if r.backward
            else f"  directions:  forward (not backward: {r.backward_note})"
        )
        assert lines[2] == f"  assumptions: {', '.join(str(a) for a in r.assumptions) or 'none'}"
        assert lines[3] == f"  example:     {describe(r).example_text}"


def test_rules_show_the_example_rewritten_by_the_rule(capsys):
    assert main(["rules", "--name", "neg_neg"]) == 0
    out = capsys.readouterr().out
    assert "  example:     -(-x) -> x\n" in out
    assert out.strip().splitlines()[-1] == f"1 of {len(catalogue())} rules (name containing 'neg_neg')"


def test_rules_tag_filters(capsys):
    assert main(["rules", "--tag", "unsafe"]) == 0
    out = capsys.readouterr().out
    unsafe = [r.name for r in catalogue() if "unsafe" in r.tags]
    assert unsafe and list(_blocks(out)) == unsafe
    assert out.strip().splitlines()[-1] == f"{len(unsafe)} of {len(catalogue())} rules (tag unsafe)"


def test_rules_tags_combine_and_a_known_tag_may_select_nothing(capsys):
    assert main(["rules", "--tag", "canonicalize", "--tag", "explore", "--name", "no_such_rule"]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines() == [
        f"0 of {len(catalogue())} rules (tag canonicalize, tag explore, name containing 'no_such_rule')"
    ]


def test_rules_markdown_prints_the_catalogue_page(capsys):
    assert main(["rules", "--markdown"]) == 0
    assert capsys.readouterr().out == catalogue_markdown()


# -- relwrite check ----------------------------------------------------------------------

USER_MODULE = """
from relwrite.graph import ops as o
from relwrite.relations import rule

double_neg = rule("double_neg", (o.neg, (o.neg, "x")), "x", ["canonicalize"], examples=["-(-x)"])
sin_is_cos = rule("sin_is_cos", (o.sin, "x"), (o.cos, "x"), ["canonicalize"], examples=["sin(x)"])
"""


@pytest.fixture
def user_module(tmp_path):
    path = tmp_path / "my_rules.py"
    path.write_text(USER_MODULE)
    return path


def test_check_a_user_module_reports_pass_fail_and_exits_1(user_module, capsys):
    assert main(["check", str(user_module), "--max-examples", "20"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"checking 2 rules of {user_module}"
    assert re.fullmatch(r"  double_neg  PASS +\d+\.\d\d s", lines[1])
    assert re.fullmatch(r"  sin_is_cos  FAIL +\d+\.\d\d s", lines[2])
    counterexample = lines[3:-1]
    assert counterexample and all(line.startswith("      ") for line in counterexample)
    assert lines[-1] == "1 passed, 1 failed"


def test_check_one_rule_of_a_user_module_exits_0(user_module, capsys):
    assert main(["check", str(user_module), "--rule", "double_neg", "--max-examples", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and "double_neg  PASS" in lines[1]
    assert lines[-1] == "1 passed, 0 failed"


def test_check_a_catalogue_rule(capsys):
    assert main(["check", "--rule", "neg_neg", "--max-examples", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "checking 1 rule of the catalogue"
    assert "neg_neg  PASS" in lines[1]
    assert lines[-1] == "1 passed, 0 failed"


def test_check_collects_rules_and_the_relations_list_by_module_name(tmp_path, monkeypatch, capsys):
    (tmp_path / "listed_rules.py").write_text(
        USER_MODULE
        + "def plain(lhs, rhs):\n    return double_neg(lhs, rhs)\n\n"
        + "alias = double_neg\nRELATIONS = [plain, sin_is_cos]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    checked = []

    def fake_check(relation, **options):
        checked.append((relation, options))
        if relation is checked[0][0]:
            raise AssertionError("counterexample: x=1.0\nleft 1.0, right 2.0")

    monkeypatch.setattr("relwrite.testing.soundness.check_relation", fake_check)
    assert main(["check", "listed_rules"]) == 1
    module = sys.modules["listed_rules"]
    assert checked == [(module.double_neg, {}), (module.sin_is_cos, {}), (module.plain, {})]
    lines = capsys.readouterr().out.splitlines()
    assert [
        line.split()[:2] for line in lines[1:] if line.startswith("  ") and not line.startswith("    ")
    ] == [
        ["double_neg", "FAIL"],
        ["sin_is_cos", "PASS"],
        ["plain", "PASS"],
    ]
    assert lines[2:4] == ["      counterexample: x=1.0", "      left 1.0, right 2.0"]
    assert lines[-1] == "2 passed, 1 failed"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rules", "--tag", "bogus"], "unknown tag 'bogus'; known tags: "),
        (["rules", "--markdown", "--tag", "unsafe"], "--markdown prints the whole catalogue"),
        (["check", "no_such_module_xyz"], "cannot import module 'no_such_module_xyz'"),
        (["check", "missing_rules.py"], "no such file: missing_rules.py"),
        (["check", "json"], "no rules found in json"),
        (["check", "--rule", "no_such_rule"], "no rule named 'no_such_rule' in the catalogue"),
        (["check", "--max-examples", "0"], "--max-examples must be at least 1"),
        (["check", "--max-examples", "many"], "invalid int value: 'many'"),
    ],
)
def test_bad_rules_and_check_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err_lines = captured.err.strip().splitlines()
    assert len(err_lines) == 1 and err_lines[0].startswith("relwrite: error:")
    assert message in err_lines[0]
    assert captured.out == ""


def test_check_a_file_that_raises_on_import_is_one_line(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("import math\n\nraise RuntimeError('no\\nway')\n")
    assert main(["check", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err == f"relwrite: error: importing {str(broken)!r} failed: RuntimeError: no\n"

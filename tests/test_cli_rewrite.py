"""`relwrite rewrite`: the rules that fired, --eval before and after, --show-c, --json."""

from __future__ import annotations

import json
import re

import pytest

from relwrite.cli import main

STABILIZED = ["rewrite", "log(1 + exp(x))", "--var", "x:vector"]


def test_the_rules_that_fired_are_listed_with_their_counts(capsys):
    assert main(["rewrite", "x * 1 + 0 * y + x", "--include", "unsafe"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (rules,) = [line for line in lines if line.startswith("rules applied:")]
    assert "collect_terms x1" in rules and "mul_zero x1" in rules and "add_zero x1" in rules


def test_nothing_to_do_says_so(capsys):
    assert main(["rewrite", "x"]) == 0
    assert "rules applied: none" in capsys.readouterr().out


def test_eval_shows_the_values_before_and_after(capsys):
    assert main([*STABILIZED, "--eval", "x=1,800"]) == 0
    out = capsys.readouterr().out
    assert "evaluated before: [1.31326169,        inf]" in out
    assert "evaluated after:  [  1.31326169, 800.        ]" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--eval", "q=1"], "--eval 'q=1': expected NAME=VALUES for a variable of the expression: x"),
        (["--eval", "x=1,a"], "--eval x: '1,a' is not a comma-separated list of numbers"),
        (["--eval", "x"], "--eval 'x': expected NAME=VALUES"),
    ],
)
def test_bad_eval_values_are_one_line_naming_the_variable(argv, message, capsys):
    assert main([*STABILIZED, *argv]) == 2
    assert message in capsys.readouterr().err


def test_eval_needs_every_variable_and_a_scalar_takes_one_number(capsys):
    assert main(["rewrite", "x + y", "--eval", "x=1"]) == 2
    assert "--eval: no values for y" in capsys.readouterr().err
    assert main(["rewrite", "x + y", "--eval", "x=1,2", "--eval", "y=1"]) == 2
    assert "--eval x: '1,2' is not a number" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("x:int8", "1000", "--eval x: 1000 is out of range for int8 (-128 to 127)"),  # said: not a number
        ("x:int8", "-129", "--eval x: -129 is out of range for int8 (-128 to 127)"),
        ("x:uint8", "-1", "--eval x: -1 is out of range for uint8 (0 to 255)"),
        (
            "x:int64",
            "9223372036854775808",
            "--eval x: 9223372036854775808 is out of range for int64 "
            "(-9223372036854775808 to 9223372036854775807)",
        ),
        ("x:int64", "1.5", "--eval x: 1.5 is not a whole number (x is int64)"),  # was truncated to 1
        ("x:int32", "nan", "--eval x: nan is not a whole number (x is int32)"),
        ("x:(3,):int16", "1,2,40000", "--eval x: 40000 is out of range for int16 (-32768 to 32767)"),
        ("x:(2,):int16", "1,2.5", "--eval x: 2.5 is not a whole number (x is int16)"),
        (
            "x:float32",
            "1e39",
            "--eval x: 1e39 is out of range for float32 (largest finite magnitude 3.4028235e+38)",
        ),
        ("x:float64", "1e400", "--eval x: 1e400 is out of range for float64"),
        ("x:bool", "2", "--eval x: '2' is not a bool (0, 1, true or false)"),
        ("x:int8", "abc", "--eval x: 'abc' is not a number"),
    ],
)
def test_eval_values_are_read_exactly_for_the_inputs_dtype(var, value, message, capsys):
    assert main(["rewrite", "x", "--var", var, "--eval", f"x={value}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"relwrite: error: {message}")
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize(
    ("var", "value", "shown"),
    [
        ("x:int8", "127", "127"),
        ("x:int8", "-128", "-128"),
        ("x:int64", "1e3", "1000"),  # a whole number however written
        ("x:int64", "9223372036854775807", "9223372036854775807"),  # exact: not through a float
        ("x:uint8", "255", "255"),
        ("x:(3,):int16", "1, 2,-3", "[ 1,  2, -3]"),
        ("x:float32", "inf", "inf"),  # infinity as written, not out of range
        ("x:float16", "65519", "6.55e+04"),  # rounds to 65504, the largest float16: in range
        ("x:bool", "true", "True"),
    ],
)
def test_eval_values_in_range_are_taken_exactly(var, value, shown, capsys):
    assert main(["rewrite", "x", "--var", var, "--eval", f"x={value}"]) == 0
    assert f"evaluated after:  {shown}\n" in capsys.readouterr().out


def test_show_c_prints_the_kernels_of_the_result(capsys):
    assert main(["rewrite", "log(1 + exp(x)) * 2", "--var", "x:vector", "--show-c"]) == 0
    out = capsys.readouterr().out
    assert "int rw_k0(" in out and "log1p(exp(" in out
    assert main([*STABILIZED, "--show-c"]) == 0  # one node: NumPy runs it, no kernel is generated
    assert "the result runs no generated C" in capsys.readouterr().out


def test_show_c_prints_the_sum_computed_with_its_loop_and_every_module_that_runs(capsys):
    assert main(["rewrite", "sum(exp(x) * 2 + x)", "--var", "x:vector", "--show-c"]) == 0
    out = capsys.readouterr().out
    assert "int rw_k0(" in out and "int rw_s0(" in out  # the loop, and the sum fused with it
    for module in ("graph", "runtime", "reductions"):
        assert f"/* ---- the {module} module ---- */" in out
    assert "int rw_elemwise(" in out and "int rw_sum_f64(" in out


def test_json_is_one_document_with_every_part(capsys):
    assert main([*STABILIZED, "--eval", "x=1,800", "--show-c", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["input"] == "log((1.0 + exp(x)))" and document["output"] == "softplus(x)"
    assert document["rules"] == {"softplus": 1} and document["mode"] == "fast_run"
    assert document["eval"]["after"] == [pytest.approx(1.3132616875182228), 800.0]
    assert document["c"] == ""  # softplus alone: no fused kernel


def test_rules_json_lists_the_chosen_rules_with_their_facts(capsys):
    assert main(["rules", "--name", "neg_neg", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["name"] == "neg_neg" and entry["semantics"] == "exact" and entry["backward"] is True
    assert "canonicalize" in entry["tags"] and entry["examples"] == ["-(-x)"]


def test_check_json_reports_each_rule_and_the_seed(capsys):
    assert main(["check", "--rule", "neg_neg", "--max-examples", "5", "--seed", "3", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["seed"] == 3 and document["passed"] == 1 and document["failed"] == 0
    assert [r["rule"] for r in document["rules"]] == ["neg_neg"] and document["rules"][0]["outcome"] == "PASS"


def strict_json(text: str):
    """Parse as RFC 8259 JSON: the bare NaN, Infinity and -Infinity Python's json accepts are errors."""

    def refuse(token: str):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_json_writes_non_finite_values_as_strings(capsys):
    """`x / 0` evaluated printed bare Infinity and NaN, which no strict JSON parser reads."""
    assert main(["rewrite", "x / 0", "--var", "x:vector", "--eval", "x=1,-1,0", "--json"]) == 0
    document = strict_json(capsys.readouterr().out)
    assert document["eval"]["before"] == ["Infinity", "-Infinity", "NaN"]
    assert [float(v) for v in document["eval"]["after"]][:2] == [float("inf"), float("-inf")]
    assert main(["rewrite", "x / 0", "--eval", "x=1", "--json"]) == 0  # a scalar
    assert strict_json(capsys.readouterr().out)["eval"] == {"before": "Infinity", "after": "Infinity"}


def test_json_with_profile_includes_the_profile(capsys):
    assert main([*STABILIZED, "--profile"]) == 0
    text = capsys.readouterr().out
    assert main([*STABILIZED, "--profile", "--json"]) == 0
    profile = strict_json(capsys.readouterr().out)["profile"]
    assert profile[0].startswith("SequentialRewriter  optdb")

    def shape(lines):  # the lines with their numbers (times) blanked
        return [re.sub(r"\d+(\.\d+)?", "#", line) for line in lines]

    # the same lines (rules that never applied are listed by their time, which differs between runs)
    assert sorted(shape(profile)) == sorted(shape(text[text.index("SequentialRewriter") :].splitlines()))
    assert main([*STABILIZED, "--json"]) == 0
    assert "profile" not in strict_json(capsys.readouterr().out)


def test_an_empty_report_path_is_refused(capsys):
    assert main([*STABILIZED, "--report", ""]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "relwrite: error: argument --report: expected a path to write, got ''\n"

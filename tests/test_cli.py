"""The `relwrite` command: the demo, `rewrite`, `rules`, `check`, and one-line errors for bad input."""

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import relwrite
from relwrite import parse, pprint
from relwrite.cli import main
from relwrite.engine import optdb
from relwrite.relations import catalogue
from relwrite.relations.docs import catalogue_markdown, describe

ROOT = Path(__file__).resolve().parent.parent


def test_demo_prints_rewrites_compiles_and_times_the_seed_expression(capsys):
    assert main(["demo", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "(z + (((y * x) / y) * (z / x)))" in out
    assert "FunctionGraph(add(z, mul(true_div(mul(y, x), y), true_div(z, x))))" in out
    assert "add [id A]" in out
    assert "FunctionGraph(mul(2.0, z))" in out
    assert "mul_cancel_common x1" in out  # the common factors x and y cancelled at once
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
    argv = ["rewrite", "exp(0.0) + x", "--mode", "fast_compile", "--include", "canonicalize"]
    assert main([*argv, "--exclude", "constant_folding"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "after:  (x + exp(0.0))"


def _after(capsys) -> str:
    return capsys.readouterr().out.splitlines()[1].removeprefix("after:  ")


@pytest.mark.parametrize("mode", ["fast_compile", "o2", "fast_run"])
def test_include_adds_a_tag_to_the_modes_query(mode, capsys):
    assert main(["rewrite", "x * y / y", "--mode", mode]) == 0
    assert _after(capsys) != "x"  # mul_div_cancel is unsafe: not in any mode by default
    assert main(["rewrite", "x * y / y", "--mode", mode, "--include", "unsafe"]) == 0
    assert _after(capsys) == "x"
    cancelling = ["--exclude", "mul_div_cancel", "--exclude", "mul_div_cancel_common"]
    assert main(["rewrite", "x * y / y", "--mode", mode, "--include", "unsafe", *cancelling]) == 0
    assert _after(capsys) != "x"


def test_include_and_exclude_compose_with_the_mode_as_query_methods_do(monkeypatch, capsys):
    queries = []
    real_query = optdb.query
    monkeypatch.setattr(optdb, "query", lambda query: queries.append(query) or real_query(query))
    argv = ["rewrite", "x", "--mode", "o2", "--include", "unsafe", "--include", "blas"]
    assert main([*argv, "--exclude", "fusion", "--exclude", "log_exp"]) == 0
    from relwrite.engine import mode_query

    assert queries == [mode_query("o2").including("unsafe", "blas").excluding("fusion", "log_exp")]


@pytest.mark.parametrize("option", ["--include", "--exclude"])
@pytest.mark.parametrize("tag", ["bogus", "o2", "Unsafe"])
def test_unknown_tags_are_rejected_naming_the_tag_and_the_known_ones(option, tag, capsys, monkeypatch):
    """The known tags and rewriter names (2,226 characters on one line before) wrap to the terminal."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["rewrite", "x", option, tag]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    first, *lines = captured.err.splitlines()
    assert first.startswith(f"relwrite: error: unknown tag {tag!r} for {option}")
    if tag == "Unsafe":
        assert first.endswith("(did you mean 'unsafe'?)")
    assert lines[0].startswith("  known tags: ") and all(
        line.startswith("    ") for line in lines[1:] if "or a" not in line
    )
    assert max(map(len, lines)) <= 80 and len(lines) > 10
    known = set(
        re.split(r",? ", " ".join(lines).replace("known tags:", "").replace("or a rewriter's name:", ""))
    )
    assert {"unsafe", "canonicalize", "fast_run", "mul_div_cancel", "constant_folding", "merge1"} <= known


def test_a_tag_both_included_and_excluded_is_rejected(capsys):
    assert main(["rewrite", "x", "--include", "unsafe", "--exclude", "unsafe"]) == 2
    assert (
        capsys.readouterr().err == "relwrite: error: tag 'unsafe' is given to both --include and --exclude\n"
    )


NEGATIVE_EXPRESSIONS = ["-x", "-x * y", "-(x)", "-1 + x", "-(-x)", "--x", "-1.5*x", "-x*y"]


@pytest.mark.parametrize("expr", NEGATIVE_EXPRESSIONS)
@pytest.mark.parametrize(
    "arrange",
    [
        lambda e: [e],
        lambda e: ["--", e],
        lambda e: [e, "--var", "x:vector"],
        lambda e: ["--var", "x:vector", e],
        lambda e: ["--var=x:vector", "--profile", e, "--mode", "o1"],
    ],
    ids=["alone", "after --", "before an option", "after an option", "between options"],
)
def test_an_expression_may_start_with_a_minus(expr, arrange, capsys):
    argv = arrange(expr)
    assert main(["rewrite", *argv]) == 0
    out = capsys.readouterr().out
    types = {"x": "vector"} if any("x:vector" in a for a in argv) else {}
    assert out.splitlines()[0] == f"before: {pprint(parse(expr, types))}"
    assert ("EquilibriumRewriter" in out) == ("--profile" in argv)


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"relwrite {importlib.metadata.version('relwrite')}\n"
    assert importlib.metadata.version("relwrite") == relwrite.__version__


def test_version_of_an_uninstalled_source_tree_comes_from_the_package(monkeypatch, capsys):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"relwrite {relwrite.__version__}\n"


def test_help_returns_0_instead_of_exiting(capsys):
    assert main(["rewrite", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: relwrite rewrite")


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
        (["rewrite", "x", "--var", "1x:vector"], "expected NAME:TYPE"),
        (["rewrite", "x", "--var", "x:vector", "--var", "x:matrix"], "--var 'x' is given twice"),
        (["rewrite", "x", "--var", "y:vector"], "--var 'y': the expression 'x' has no variable 'y'"),
        (["rewrite", "x", "--var"], "argument --var: expected one argument"),
        (["rewrite", "x", "--mode", "o5"], "unknown mode 'o5'; known modes: fast_compile"),
        (["rewrite", "x", "--prof"], "unrecognized arguments: --prof"),
        (["rewrite", "-x", "-y"], "unrecognized arguments: -y"),
        (["rewrite", "x", "y"], "unrecognized arguments: y"),
        (["rewrite"], "the following arguments are required: expr"),
        (["rewrite", ""], "cannot parse ''"),
        (["rewrite", "-"], "cannot parse '-'"),
        (["rewrite", "(x"], "cannot parse '(x': '(' was never closed"),
        (["rewrite", "x y"], "cannot parse 'x y': invalid syntax at column 3"),
        (["rewrite", "lambda: 1"], "unsupported syntax 'Lambda'"),
        (["rewrite", "{x}"], "unsupported syntax 'Set'"),
        (["rewrite", "-x[0]"], "too many indices (1) for 0 dimension(s)"),
        (["rewrite", "__import__('os')"], "unknown function '__import__'"),
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
        assert lines[1] == f"  semantics:   {r.semantics}"
        assert lines[2] == (
            "  directions:  both"
            if r.backward
            else f"  directions:  forward (not backward: {r.backward_note})"
        )
        assert lines[3] == f"  assumptions: {', '.join(str(a) for a in r.assumptions) or 'none'}"
        assert lines[4] == f"  example:     {describe(r).example_text}"


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
    seed = re.fullmatch(rf"checking 2 rules of {re.escape(str(user_module))} \(seed (\d+)\)", lines[0])[1]
    assert re.fullmatch(r"  double_neg  PASS +\d+\.\d\d s", lines[1])
    assert re.fullmatch(r"  sin_is_cos  FAIL +\d+\.\d\d s", lines[2])
    counterexample = lines[3:-1]
    assert counterexample and all(line.startswith("      ") for line in counterexample)
    assert lines[-1] == f"1 passed, 1 failed; to reproduce, add --seed {seed}"


def test_check_one_rule_of_a_user_module_exits_0(user_module, capsys):
    assert main(["check", str(user_module), "--rule", "double_neg", "--max-examples", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and "double_neg  PASS" in lines[1]
    assert lines[-1] == "1 passed, 0 failed"


def test_check_a_catalogue_rule(capsys):
    assert main(["check", "--rule", "neg_neg", "--max-examples", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"checking 1 rule of the catalogue \(seed \d+\)", lines[0])
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
    seed = checked[0][1]["seed"]
    assert isinstance(seed, int)
    assert checked == [(rel, {"seed": seed}) for rel in (module.double_neg, module.sin_is_cos, module.plain)]
    lines = capsys.readouterr().out.splitlines()
    assert [
        line.split()[:2] for line in lines[1:] if line.startswith("  ") and not line.startswith("    ")
    ] == [
        ["double_neg", "FAIL"],
        ["sin_is_cos", "PASS"],
        ["plain", "PASS"],
    ]
    assert lines[2:4] == ["      counterexample: x=1.0", "      left 1.0, right 2.0"]
    assert lines[-1] == f"2 passed, 1 failed; to reproduce, add --seed {seed}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rules", "--markdown", "--tag", "unsafe"], "--markdown prints the whole catalogue"),
        (["check", "no_such_module_xyz"], "cannot import module 'no_such_module_xyz'"),
        (["check", "missing_rules.py"], "no such file: missing_rules.py"),
        (["check", "json"], "no rules found in json"),
        (["check", "--rule", "no_such_rule"], "no rule named 'no_such_rule' in the catalogue"),
        (["check", "--max-examples", "0"], "--max-examples must be at least 1"),
        (["check", "--max-examples", "many"], "invalid int value: 'many'"),
        (["check", "--seed", "x"], "argument --seed: invalid int value: 'x'"),
    ],
)
def test_bad_rules_and_check_input_is_one_line_and_exit_2(argv, message, capsys):
    """(An unknown tag lists the known ones after its line: tested with rewrite's tags above.)"""
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


def _counterexample(out: str) -> list[str]:
    """The lines a failing rule's report prints: everything but the header, timings and summary."""
    return [line for line in out.splitlines() if line.startswith("      ")]


def test_a_seed_reproduces_a_counterexample(user_module, capsys):
    assert main(["check", str(user_module), "--max-examples", "15"]) == 1
    out = capsys.readouterr().out
    seed = re.search(r"add --seed (\d+)$", out)[1]
    assert main(["check", str(user_module), "--max-examples", "15", "--seed", seed]) == 1
    again = capsys.readouterr().out
    assert again.splitlines()[0].endswith(f"(seed {seed})")
    assert again.splitlines()[-1] == "1 passed, 1 failed"  # the seed was given: no hint
    assert _counterexample(again) == _counterexample(out) != []
    # each rule's run depends only on the seed: checking the rule alone finds the same counterexample
    assert (
        main(["check", str(user_module), "--rule", "sin_is_cos", "--max-examples", "15", "--seed", seed]) == 1
    )
    assert _counterexample(capsys.readouterr().out) == _counterexample(out)


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relwrite", *argv],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_check_leaves_no_hypothesis_directory_where_it_runs(user_module, tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    cache = tmp_path / "cache"
    env = {"RELWRITE_CACHE_DIR": str(cache), "HYPOTHESIS_STORAGE_DIRECTORY": ""}
    passing = _run(["check", "--rule", "neg_neg", "--max-examples", "200"], cwd, **env)  # reads constants
    assert passing.returncode == 0, passing.stderr
    failing = _run(["check", str(user_module), "--max-examples", "5"], cwd, **env)
    assert failing.returncode == 1, failing.stderr
    assert list(cwd.iterdir()) == []
    assert (cache / "hypothesis").is_dir()  # hypothesis's files went to relwrite's cache


@pytest.mark.parametrize("cache", ["RELWRITE_CACHE_DIR", "XDG_CACHE_HOME"])
def test_explore_and_check_write_nothing_where_they_run(tmp_path, cache):
    """`explore` once checked its forms with hypothesis, and left ./.hypothesis (65 files) where it ran;
    it now checks them without hypothesis and writes nothing.  `check`'s hypothesis files (its constants
    cache) go to relwrite's cache, and no example database is kept (nothing is replayed from one run to
    the next)."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = {"RELWRITE_CACHE_DIR": "", "XDG_CACHE_HOME": "", "HYPOTHESIS_STORAGE_DIRECTORY": ""}
    env[cache] = str(tmp_path / "cache")
    hypothesis_files = tmp_path / "cache" / ("relwrite" if cache == "XDG_CACHE_HOME" else "") / "hypothesis"
    explored = _run(["explore", "log(1 + exp(x))", "-n", "3", "--limit-seconds", "inf"], cwd, **env)
    assert explored.returncode == 0, explored.stderr
    assert "softplus(x)" in explored.stdout
    assert list(cwd.iterdir()) == [] and not hypothesis_files.exists()
    # hypothesis reads the constants of the code under test (and caches them) only when a draw asks for
    # one, one draw in twenty: two hundred examples make sure it does (5 left no cache once in a while)
    checked = _run(["check", "--rule", "neg_neg", "--max-examples", "200"], cwd, **env)
    assert checked.returncode == 0, checked.stderr
    assert list(cwd.iterdir()) == []
    assert hypothesis_files.is_dir() and not (hypothesis_files / "examples").exists()


def test_check_without_hypothesis_is_one_line(tmp_path):
    """An install without dependencies (pip --no-deps) gets a clear error, not a traceback."""
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "from relwrite.cli import main\n"
        "raise SystemExit(main(['check']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "relwrite: error: relwrite.testing needs hypothesis, a dependency of relwrite: "
        "pip install 'hypothesis>=6.100'\n"
    )
    code = "import sys; sys.modules['hypothesis'] = None\nimport relwrite.testing\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "ModuleNotFoundError: relwrite.testing needs hypothesis, a dependency of relwrite: "
        "pip install 'hypothesis>=6.100'"
    )


def test_runtime_dependencies_are_declared():
    """`pip install -e .` (the README's command) must bring everything relwrite needs at run time.

    hypothesis: `relwrite check` and relwrite.testing.  packaging: etuples imports it, without
    declaring it, to decide whether to register its unify/reify support; a fresh environment
    without it rewrites silently less (`log(1 + exp(x))` stays `log1p(exp(x))`).
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.match(r"[A-Za-z0-9_.-]+", dep)[0].lower() for dep in project["dependencies"]}
    assert {"hypothesis", "packaging", "etuples", "logical-unification", "minikanren"} <= declared
    assert not any(dep.startswith("hypothesis") for dep in project["optional-dependencies"]["test"])


def test_etuples_unification_support_is_active():
    """What goes wrong without packaging: etuples' terms are then opaque to reify and unify."""
    from etuples import etuple
    from unification import reify, unify, var

    x = var()
    assert reify(etuple(relwrite.neg, x), {x: 1.0}) == etuple(relwrite.neg, 1.0)
    assert unify(etuple(relwrite.neg, x), etuple(relwrite.neg, 2.0)) == {x: 2.0}

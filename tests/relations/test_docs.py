"""The catalogue page: generated from the registry, committed up to date, examples rewritten by their rule."""

import difflib
import re
from pathlib import Path

import pytest

from relwrite.graph import ops as o
from relwrite.relations import catalogue, rule
from relwrite.relations.docs import catalogue_markdown, describe, rewrite_example

PAGE = Path(__file__).resolve().parents[2] / "docs" / "catalogue.md"


def test_committed_catalogue_page_is_up_to_date():
    expected = catalogue_markdown()
    committed = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    if committed != expected:
        diff = difflib.unified_diff(
            committed.splitlines(), expected.splitlines(), "docs/catalogue.md", "generated", lineterm="", n=1
        )
        shown = "\n".join(list(diff)[:40])
        pytest.fail(
            "docs/catalogue.md differs from the registry; regenerate it with\n"
            "    relwrite rules --markdown > docs/catalogue.md\n" + shown,
            pytrace=False,
        )


def test_page_lists_every_rule_under_its_phase():
    page = catalogue_markdown()
    for r in catalogue():
        section = page.index(f"\n## {r.phase}\n")
        entry = page.index(f"\n### {r.name}\n")
        assert entry > section
        assert all(
            page.find(f"\n## {other}\n", section + 1, entry) == -1 for other in ("stabilize", "specialize")
        )


def test_every_catalogue_example_is_rewritten_by_its_rule():
    problems = []
    for r in catalogue():
        d = describe(r)
        if d.example is None or d.example[0] == d.example[1]:
            problems.append(f"{r.name}: {d.example_error or 'no example'}")
    assert not problems, "\n".join(problems)


double_neg = rule("double_neg", (o.neg, (o.neg, "x")), "x", ["canonicalize"], examples=["exp(-(-x))"])
mul_zero = rule(
    "mul_zero_right",
    (o.mul, "x", 0),
    (o.fill, "x", 0),
    ["specialize", "unsafe"],
    examples=["y * 0", "x"],
    types={"y": "vector"},
)
drop_y = rule("drop_y", (o.add, "x", "y"), "x", ["stabilize"], assumptions=["y > 1"], examples=["x"])


def test_rewrite_example_takes_one_step_of_the_rule_alone():
    assert rewrite_example(double_neg, "exp(-(-x))") == ("exp(-(-x))", "exp(x)")
    assert rewrite_example(double_neg, "-(-(-(-x)))") == ("-(-(-(-x)))", "-(-x)")
    before, after = rewrite_example(mul_zero, "y * 0")
    assert (before, after) == ("(y * 0.0)", "fill(y, 0.0)")


def test_rewrite_example_errors_name_the_rule():
    with pytest.raises(ValueError, match=r"rule drop_y does not rewrite its example x"):
        rewrite_example(drop_y, "x")
    with pytest.raises(ValueError, match=re.escape("example 'x +' of rule drop_y does not parse: ")):
        rewrite_example(drop_y, "x +")


def test_page_entries_show_directions_assumptions_and_problems():
    page = catalogue_markdown([double_neg, mul_zero, drop_y])
    assert "3 rules (1 canonicalize, 1 stabilize, 1 specialize).\n" in page
    assert page.index("## canonicalize") < page.index("## stabilize") < page.index("## specialize")
    assert (
        "### double_neg\n\nneg(neg(x)) -> x\n\n- tags: canonicalize\n- semantics: exact\n- directions: both\n"
        in page
    )
    assert "\n- tags: specialize, unsafe\n- semantics: unsafe\n" in page
    assert "- tags: stabilize\n- semantics: stabilizes\n" in page
    assert "- example: `exp(-(-x))` -> `exp(x)`\n" in page
    assert "- directions: forward (not backward: the right side does not determine y)\n" in page
    assert "- assumptions: `y > 1`\n" in page
    assert "- example: (error: rule drop\\_y does not rewrite its example x)\n" in page


def test_page_escapes_markdown_in_docs_outside_code_spans():
    mul_one = rule(
        "mul_one", (o.mul, "x", 1), "x", ["canonicalize"], doc="x * 1 -> x, as `x * 1 == x`; a_b <c>"
    )
    assert "\nx \\* 1 -> x, as `x * 1 == x`; a\\_b \\<c>\n" in catalogue_markdown([mul_one])

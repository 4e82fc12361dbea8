"""Identities for accurate forms (relwrite.relations.identities): opt-in, run by the accuracy search.

Their soundness both ways on generated types and values is checked catalogue-wide in test_catalogue.py
(identities over the reals: finite inputs within their assumptions, no value overflowing on one side
only); here, what they match, that only the accuracy search runs them, and what it finds with them.
"""

import math

import pytest

from relwrite import scalar
from relwrite.engine import rewrite_graph
from relwrite.engine.explore.api import best_form, prove, select_rules
from relwrite.engine.explore.runner import Limits
from relwrite.graph import ops as o
from relwrite.graph.printing import pprint
from relwrite.relations import identities
from relwrite.relations.pattern import to_graph
from relwrite.relations.registry import Rule

RULES = [r for r in vars(identities).values() if isinstance(r, Rule)]
WORK = Limits(iterations=4, nodes=5_000, seconds=math.inf, rule_seconds=math.inf)


def forward(rule, graph):
    return [pprint(to_graph(a.value, like=graph)) for a in rule.answers(graph)]


def test_every_identity_is_opt_in_and_equal_over_the_reals():
    assert len(RULES) >= 15
    for r in RULES:
        assert {"explore", "accuracy"} <= r.tags and r.semantics in ("reassociates", "exact"), r.name
    defaults = {r.name for r in select_rules()}
    assert not defaults & {r.name for r in RULES}
    assert {r.name for r in RULES} <= {r.name for r in select_rules(include=["accuracy"])}


def test_no_rewriting_pipeline_takes_a_conjugate():
    x = scalar("x")
    for mode in ("fast_run", "stabilize", "o4"):
        assert "sqrt" in pprint(rewrite_graph(o.sqrt(x + 1) - o.sqrt(x), include=[mode])), mode


@pytest.mark.parametrize(
    ("name", "expr", "expected"),
    [
        (
            "sqrt_difference",
            lambda a, b: o.add(o.sqrt(a), o.neg(o.sqrt(b))),
            "((a + -b) / (sqrt(a) + sqrt(b)))",
        ),
        ("exp_difference", lambda a, b: o.add(o.exp(a), o.neg(o.exp(b))), "(exp(b) * expm1((a + -b)))"),
        ("sin_difference", lambda a, b: o.add(o.sin(a), o.neg(o.sin(b))), "sin((0.5 * (a + -b)))"),
        ("log_quotient", lambda a, b: o.log(a / b), "(log(a) + -log(b))"),
        ("neg_quotient", lambda a, b: o.neg(a / b), "(-a / b)"),
        (
            "tan_difference",
            lambda a, b: o.add(o.tan(a), o.neg(o.tan(b))),
            "sin((a + -b)) / (cos(a) * cos(b))",
        ),
        (
            "atan_difference",
            lambda a, b: o.add(o.atan(a), o.neg(o.atan(b))),
            "atan(((a + -b) / (1.0 + (a * b))))",
        ),
        ("cbrt_difference", lambda a, b: o.add(o.cbrt(a), o.neg(o.cbrt(b))), "(a + -b) / "),
        ("tan_half_angle", lambda a, b: o.add(1, o.neg(o.cos(a))) / o.sin(a), "tan((0.5 * a))"),
        ("sinh_exp", lambda a, b: o.add(o.exp(a), o.neg(o.exp(o.neg(a)))), "(2.0 * sinh(a))"),
    ],
)
def test_forward_forms(name, expr, expected):
    a, b = scalar("a"), scalar("b")
    found = forward(getattr(identities, name), expr(a, b))
    assert any(expected in f for f in found), found


def test_sin_cos_squares_gives_ones_shaped_like_x():
    x = scalar("x")
    assert forward(identities.sin_cos_squares, o.add(o.pow(o.sin(x), 2), o.pow(o.cos(x), 2))) == [
        "fill(x, 1.0)"
    ]


def test_a_wider_sum_keeps_its_other_terms():
    a, b, c = scalar("a"), scalar("b"), scalar("c")
    (found,) = forward(identities.sqrt_difference, o.add(o.sqrt(a), o.neg(o.sqrt(b)), c))
    assert "c" in found and "sqrt(a) + sqrt(b)" in found


def test_integer_operands_are_left_alone():
    i, j = scalar("i", dtype="int64"), scalar("j", dtype="int64")
    assert forward(identities.squares_difference, o.add(o.pow(i, 2), o.neg(o.pow(j, 2)))) == []


def test_the_accuracy_search_finds_the_conjugate():
    x = scalar("x")
    form = best_form(
        o.sqrt(x + 1) - o.sqrt(x), cost="accuracy", ranges={"x": (1.0, 1e15)}, limits=WORK, unsafe=True
    )
    assert form.cost < 1 and "sqrt_difference" in form.derivation, form
    plain = best_form(o.sqrt(x + 1) - o.sqrt(x), cost="nodes", limits=WORK, unsafe=True)
    assert "sqrt_difference" not in plain.derivation


def test_the_identities_never_make_abs_x_equal_x():
    # an e-graph union is unconditional: sqrt(a * b) = sqrt(a) * sqrt(b) "for a, b >= 0" at a = b = x
    # would prove abs(x) = x and collapse every class of log(sigmoid(x)) into a handful
    x = scalar("x")
    limits = Limits(iterations=8, nodes=3_000, seconds=math.inf, rule_seconds=math.inf)
    assert prove(o.sqrt(x * x), x, include=["accuracy"], unsafe=True, limits=limits, check=False) is None


@pytest.mark.parametrize(
    ("expr", "accurate", "rule"),
    [
        (
            lambda x, e: o.tan(x + e) - o.tan(x),
            lambda x, e: o.sin(e) / (o.cos(x) * o.cos(x + e)),
            "tan_difference",
        ),
        (
            lambda x, e: o.atan(x + 1) - o.atan(x),
            lambda x, e: o.atan(1 / (1 + x * (x + 1))),
            "atan_difference",
        ),
        (lambda x, e: (1 - o.cos(x)) / o.sin(x), lambda x, e: o.tan(0.5 * x), "tan_half_angle"),
        (
            lambda x, e: o.cbrt(x + 1) - o.cbrt(x),
            lambda x, e: 1 / (o.cbrt(x + 1) ** 2 + o.cbrt(x + 1) * o.cbrt(x) + o.cbrt(x) ** 2),
            "cbrt_difference",
        ),
        (
            lambda x, e: (1 - o.cos(x)) / (x * x),
            lambda x, e: 2.0 * o.sqr(o.sin(x / 2.0) / x),
            "square_quotient",
        ),
        (  # exp(x) - 2 becomes a sum, add(-2, exp(x)), after the outer sum was made: add_assoc splices it
            lambda x, e: o.exp(x) - 2 + o.exp(-x),
            lambda x, e: 4 * o.sqr(o.sinh(x / 2)),
            ("add_assoc", "exp_sum_minus_two"),
        ),
    ],
)
def test_the_accurate_forms_of_herbies_benchmarks_are_reached(expr, accurate, rule):
    """Within a budget of work the e-graph holds the accurate form (extraction picks among its forms)."""
    x, e = scalar("x"), scalar("e")
    limits = Limits(iterations=6, nodes=5_000, seconds=math.inf, rule_seconds=math.inf)
    proof = prove(expr(x, e), accurate(x, e), include=["accuracy"], unsafe=True, limits=limits, check=False)
    rules = {rule} if isinstance(rule, str) else set(rule)
    assert proof is not None and rules <= {s.rule for s in proof.steps}

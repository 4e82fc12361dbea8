"""Explanations: the chain of rule steps between two forms, and the assumptions it relies on."""

import json
import math

import numpy as np
from hypothesis import given, settings

from relwrite import parse, scalar
from relwrite.backends.numpy.function import numpy_function
from relwrite.engine.explore.api import best_form, explore, prove, select_rules
from relwrite.engine.explore.egraph import FOLDING, EGraph
from relwrite.engine.explore.explain import Explainer
from relwrite.engine.explore.runner import Limits, Runner
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, graph_inputs
from relwrite.graph.printing import pprint
from relwrite.relations import get_rule
from relwrite.testing import expression_graphs

WORK = Limits(seconds=math.inf, rule_seconds=math.inf)
"""Searches whose findings are asserted are bounded by work, never by seconds (the default is 5 s)."""

SEED = "add(z, mul(true_div(mul(y, x), y), true_div(z, x)))"
CANCELLING = [r for r in select_rules(unsafe=True) if "explore" not in r.tags]
"""The catalogue without exploration's identities over the reals: the seed's proof cancels, step by step
(with fraction arithmetic it is shorter: see test_with_fraction_arithmetic_the_seed_proof_is_shorter)."""


def test_the_seed_proof_assumes_exactly_what_it_cancels():
    a = parse(SEED)
    proof = prove(a, parse("2 * z"), rules=CANCELLING, limits=WORK)
    assert proof is not None
    assert proof.assumptions == {"x != 0", "y != 0"}
    assert [(s.rule, s.direction) for s in proof.steps] == [
        ("mul_div_cancel", "forward"),
        ("mul_cancel", "forward"),
        ("collect_terms", "forward"),
    ]
    assert [sorted(s.assumptions) for s in proof.steps] == [["y != 0"], ["x != 0"], []]
    assert proof.unsafe and all(s.unsafe for s in proof.steps[:2]) and not proof.steps[2].unsafe
    assert pprint(proof.steps[-1].expression) == "(2.0 * z)"
    assert "assumptions: x != 0, y != 0" in str(proof)


def test_every_step_expression_computes_the_input():
    a = parse(SEED)
    proof = prove(a, parse("2 * z"), rules=CANCELLING, limits=WORK)
    inputs = sorted(_inputs(a), key=str)
    values = [np.float64(v) for v in (1.5, -2.5, 3.25)]  # x, y, z: nonzero
    expected = numpy_function(inputs, a)(*values)
    for step in proof.steps:
        assert np.isclose(numpy_function(inputs, step.expression)(*values), expected)


def test_the_seed_is_proven_by_default_under_its_assumptions_and_not_without_unsafe_rules():
    proof = prove(parse(SEED), parse("2 * z"), limits=WORK)
    assert proof is not None and proof.unsafe and {"x != 0", "y != 0"} <= proof.assumptions
    assert prove(parse(SEED), parse("2 * z"), unsafe=False, limits=Limits(seconds=1)) is None


def test_a_step_run_backward_says_so():
    x = scalar("x")
    proof = prove(o.softplus(x), o.log(1.0 + o.exp(x)), rules=["softplus"], limits=WORK)
    assert [(s.rule, s.direction) for s in proof.steps] == [("softplus", "backward")]
    assert pprint(proof.steps[0].before) == "softplus(x)"


def test_steps_rewrite_subterms_in_place():
    x, y = scalar("x"), scalar("y")
    proof = prove(o.exp(o.log(1.0 + o.exp(x))) * y, y * o.exp(o.softplus(x)), rules=["softplus"], limits=WORK)
    (step,) = proof.steps
    assert pprint(step.before) == "log((1.0 + exp(x)))" and pprint(step.after) == "softplus(x)"
    assert pprint(step.expression) == "(y * exp(softplus(x)))"


def test_with_fraction_arithmetic_the_seed_proof_is_shorter():
    proof = prove(parse(SEED), parse("2 * z"), unsafe=True, limits=WORK)
    assert proof is not None and proof.rules == ("collect_terms", "mul_div_cancel", "mul_fractions")
    assert {"x != 0", "y != 0"} <= proof.assumptions  # and the product cancelled: (x * y) != 0


def test_equal_up_to_ac_needs_no_step():
    xs = [scalar(f"x{k}") for k in range(10)]
    proof = prove(o.add(*xs), o.add(*reversed(xs)), limits=WORK)
    assert proof is not None and proof.steps == () and proof.assumptions == frozenset()
    assert "equal as they stand" in str(proof)


def _inputs(graph):
    return [v for v in graph_inputs([graph]) if not isinstance(v, Constant)]


def test_explanations_as_plain_data():
    proof = prove(parse(SEED), parse("2 * z"), rules=CANCELLING, limits=WORK)
    data = json.loads(json.dumps(proof.to_dict()))
    assert data["assumptions"] == ["x != 0", "y != 0"]
    assert data["steps"][0] == {
        "rule": "mul_div_cancel",
        "direction": "forward",
        "before": "((x * y) / y)",
        "after": "x",
        "expression": "(z + (x * (z / x)))",
        "assumptions": ["y != 0"],
        "unsafe": True,
    }


def test_past_the_congruence_bound_chains_follow_the_proof_forest_and_stay_sound(monkeypatch):
    """Classes too big to pair every congruent node use the forest's links: still a valid derivation."""
    from relwrite.engine.explore import explain

    monkeypatch.setattr(explain, "MAX_CONGRUENCES", 0)
    a = parse(SEED)
    proof = prove(a, parse("2 * z"), rules=CANCELLING, limits=WORK)
    assert proof is not None and proof.assumptions == {"x != 0", "y != 0"}
    inputs = sorted(_inputs(a), key=str)
    values = [np.float64(v) for v in (1.5, -2.5, 3.25)]
    expected = numpy_function(inputs, a)(*values)
    assert pprint(proof.steps[-1].expression) == "(2.0 * z)"
    for step in proof.steps:
        assert np.isclose(numpy_function(inputs, step.expression)(*values), expected)


THREE = Limits(iterations=3, nodes=300, seconds=math.inf, rule_seconds=math.inf)
FEW = Limits(iterations=3, nodes=2_000, seconds=math.inf, rule_seconds=math.inf)
"""A budget of work (the seconds only guard against a hang: no test result depends on them): x / x = 1
and the fold of 1 + 1 come within the first two iterations."""
WIDER = Limits(iterations=6, nodes=2_000, seconds=math.inf, rule_seconds=math.inf)
"""A wider search, for what must not be found at all."""


def _folds_only_constants(step) -> bool:
    """A folding step rewrites an application of constants to its value or back (no hidden rewrite
    of its operands)."""
    applied = step.before if step.direction == "forward" else step.after
    return applied.owner is not None and all(isinstance(i, Constant) for i in applied.owner.inputs)


def test_a_folded_constant_carries_the_assumptions_of_what_made_it_constant():
    """1 + x / x folds to 2.0 only through x / x = 1, which assumes x != 0 and is unsafe (NaN at 0)."""
    form = best_form(parse("1 + x / x"), unsafe=True, limits=FEW)  # checked numerically: no raise
    assert pprint(form.expr) == "2.0"
    assert form.assumptions == {"x != 0"} and form.unsafe
    # folded by the e-graph, or by the rule folding sums of constants once x / x is 1.0: one step either way
    assert form.steps[0].rule == "div_self" and form.steps[-1].rule in (FOLDING, "fold_add_constants")
    assert all(_folds_only_constants(s) for s in form.steps if s.rule == FOLDING)
    assert "assuming x != 0" in str(form) and "(unsafe)" in str(form)
    assert form.to_dict()["assumptions"] == ["x != 0"] and form.to_dict()["unsafe"]


def test_without_unsafe_rules_a_constant_is_never_folded_out_of_x_over_x():
    form = best_form(parse("1 + x / x"), unsafe=False, limits=WIDER)
    assert pprint(form.expr) != "2.0" and not form.unsafe
    default = best_form(parse("1 + x / x"), limits=FEW)
    assert pprint(default.expr) == "2.0" and default.unsafe and default.assumptions == {"x != 0"}
    named = best_form(parse("1 + x / x"), rules=["div_self", "useless_fill"], limits=FEW)
    assert pprint(named.expr) == "2.0" and named.unsafe and named.assumptions == {"x != 0"}


def test_a_proof_through_folding_prints_its_assumptions():
    proof = prove(parse("1 + x / x"), parse("2.0"), unsafe=True, limits=FEW)
    assert proof is not None and proof.assumptions == {"x != 0"} and proof.unsafe
    assert "assumptions: x != 0" in str(proof) and "assumptions: none" not in str(proof)
    assert "uses unsafe rules" in str(proof)


@settings(max_examples=15, deadline=None)
@given(expression_graphs(ops=(o.add, o.mul, o.sub, o.true_div, o.neg, o.exp), n_inputs=1, max_nodes=4))
def test_every_forms_assumptions_are_those_of_its_steps_folded_ones_included(graph):
    _, output = graph
    for form in explore(
        output,
        unsafe=True,
        limits=Limits(iterations=3, nodes=300, seconds=math.inf, rule_seconds=math.inf),
        check=False,
    ):
        steps = form.steps
        assert form.assumptions == frozenset().union(*(s.assumptions for s in steps)), str(form)
        assert form.unsafe == any(s.unsafe for s in steps), str(form)
        assert all(_folds_only_constants(s) for s in steps if s.rule == FOLDING), str(form)


def test_a_step_keeps_the_subterms_its_rule_did_not_rewrite():
    """1.0 * q -> q (mul_ones_like) where q's class holds x * y / y and x (equal assuming y != 0) is made
    on one term of q on both sides (1.0 * x -> x), so explaining 1.0 * x = x * y / y takes the
    cancelling step and its assumption, not one step 1.0 * x -> x * y / y assuming nothing."""
    x, y = scalar("x"), scalar("y")
    cancelled = x * y / y
    g = EGraph()
    roots = [g.intern(e) for e in (o.exp(cancelled), o.sin(cancelled), o.mul(1.0, cancelled))]
    Runner(g, [get_rule("mul_div_cancel")], "forward", THREE).run(roots)  # x's class joins the larger
    Runner(g, [get_rule("mul_ones_like")], "forward", THREE).run(roots)
    start, end = g.intern(o.mul(1.0, x), flatten=False), g.intern(cancelled, flatten=False)
    assert g.find(start) == g.find(end) == g.find(roots[2])
    proof = Explainer(g).explain(start, end)
    assert proof.assumptions == {"y != 0"}
    assert [(s.rule, s.direction) for s in proof.steps] == [
        ("mul_ones_like", "forward"),
        ("mul_div_cancel", "backward"),
    ]

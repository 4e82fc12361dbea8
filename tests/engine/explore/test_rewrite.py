"""The adapter between exploration and the rule runtime: answers both ways, bindings, budgets."""

import pytest
from kanren.core import eq, lall

from relwrite import parse, scalar
from relwrite.engine.explore.rewrite import Budget, RuleTimeout, backward_heads, reach, rule_answers
from relwrite.graph import ops as o
from relwrite.graph.printing import pprint
from relwrite.relations.registry import Rule, get_rule, rule


def test_forward_answers_of_a_pattern_rule_carry_its_bindings():
    term = parse("exp(log(x))")
    (answer,) = rule_answers(get_rule("exp_log"), term, "forward")
    assert answer.term is term.owner.inputs[0].owner.inputs[0]
    assert answer.bindings == {"x": answer.term}


def test_backward_answers_are_left_sides():
    answers = rule_answers(get_rule("softplus"), parse("softplus(x)"), "backward")
    assert [pprint(a.term) for a in answers] == ["log((1.0 + exp(x)))"]


def test_bindings_of_a_relation_come_from_its_named_variables():
    (answer,) = rule_answers(get_rule("mul_div_cancel"), parse("(y * x) / y"), "forward")
    assert pprint(answer.term) == "x"
    assert pprint(answer.bindings["y"]) == "y"


def test_bindings_a_run_does_not_name_are_read_from_the_rule_examples():
    # mul_cancel cancels inside Python code: its x is no logic variable, but its examples name it
    (answer,) = rule_answers(get_rule("mul_cancel"), parse("(a + b) * (z / (a + b))"), "forward")
    assert pprint(answer.term) == "z"
    assert pprint(answer.bindings["x"]) == "(a + b)"


def test_answers_holding_logic_variables_are_dropped():
    lossy = rule("lossy", (o.mul, "x", "y"), "x", tags=("explore",))  # backward: y is unknown
    assert rule_answers(lossy, parse("z"), "backward") == []


def test_a_rule_that_runs_too_long_is_interrupted():
    def spin(lhs, rhs):
        def goal(state):
            while True:
                pass
            yield state

        return goal

    with pytest.raises(RuleTimeout):
        rule_answers(Rule("spin", spin, tags=("explore",)), parse("exp(x)"), "forward", Budget(4, 0.05))


def test_an_endless_stream_is_cut_at_the_answer_budget():
    def endless(lhs, rhs):
        def goal(state):
            while True:
                yield from eq(rhs, lhs)(state)

        return goal

    x = scalar("x")
    answers = rule_answers(Rule("endless", endless, tags=("explore",)), o.exp(x), "forward", Budget(3, None))
    assert len(answers) == 3


def test_the_wrong_direction_is_refused():
    with pytest.raises(ValueError, match="direction"):
        rule_answers(get_rule("softplus"), parse("x"), "sideways")


def test_what_the_declaration_says_about_directions():
    a_relation = Rule("a_relation", lambda lhs, rhs: eq(lhs, rhs), tags=("explore",))
    assert backward_heads(get_rule("softplus")) == (o.softplus,)
    assert backward_heads(get_rule("neg_neg")) == ()  # the right side is a bare variable: it would wrap
    assert backward_heads(get_rule("mul_div_cancel")) == ()  # declared not meaningful backward
    assert backward_heads(a_relation) is None  # a relation: any head
    assert backward_heads(get_rule("expm1")) is None  # (add, expm1(x), *rest) of no rest is expm1(x)
    assert reach(get_rule("softplus"), "forward") == 2
    assert reach(get_rule("softplus"), "backward") == 0
    assert reach(get_rule("expm1"), "forward") == 1  # a pattern now: exp(x) among the terms
    assert reach(a_relation, "forward") is None


def test_relation_failures_propagate():
    def broken(lhs, rhs):
        return lall(eq(lhs, rhs), lambda state: 1 / 0)

    with pytest.raises(ZeroDivisionError):
        rule_answers(Rule("broken", broken, tags=("explore",)), parse("exp(x)"), "forward")

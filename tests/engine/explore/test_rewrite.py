"""The adapter between exploration and the rule runtime for goal rules: answers, bindings, budgets."""

import pytest
from kanren.core import eq, lall

from relwrite import parse, scalar
from relwrite.engine.explore.rewrite import Budget, RuleTimeout, rule_answers
from relwrite.graph import ops as o
from relwrite.graph.printing import pprint
from relwrite.relations import get_rule
from relwrite.relations.registry import Rule


def test_forward_answers_of_a_pattern_rule_carry_its_bindings():
    term = parse("exp(log(x))")
    (answer,) = rule_answers(get_rule("exp_log"), term)
    assert answer.term is term.owner.inputs[0].owner.inputs[0]
    assert answer.bindings == {"x": answer.term}


def test_a_computed_value_names_what_an_assumption_is_about():
    # mul_cancel cancels inside Python code: the factor it cancels is its computed x, which x != 0 is about
    (answer,) = rule_answers(get_rule("mul_cancel"), parse("(a + b) * (z / (a + b))"))
    assert pprint(answer.term) == "z"
    assert {name: pprint(value) for name, value in answer.bindings.items()} == {"x": "(a + b)"}


def test_answers_holding_logic_variables_are_dropped():
    def anything(lhs, rhs):
        return lall()  # leaves the right side unbound

    assert rule_answers(Rule("anything", anything, tags=("explore",)), parse("exp(x)")) == []


def test_a_rule_that_runs_too_long_is_interrupted():
    def spin(lhs, rhs):
        def goal(state):
            while True:
                pass
            yield state

        return goal

    with pytest.raises(RuleTimeout):
        rule_answers(Rule("spin", spin, tags=("explore",)), parse("exp(x)"), Budget(4, 0.05))


def test_an_endless_stream_is_cut_at_the_answer_budget():
    def endless(lhs, rhs):
        def goal(state):
            while True:
                yield from eq(rhs, lhs)(state)

        return goal

    x = scalar("x")
    answers = rule_answers(Rule("endless", endless, tags=("explore",)), o.exp(x), Budget(3, None))
    assert len(answers) == 3


def test_relation_failures_propagate():
    def broken(lhs, rhs):
        return lall(eq(lhs, rhs), lambda state: 1 / 0)

    with pytest.raises(ZeroDivisionError):
        rule_answers(Rule("broken", broken, tags=("explore",)), parse("exp(x)"))

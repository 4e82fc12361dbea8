"""The runner: rules applied both ways within limits, failing rules skipped, the scheduler."""

import math

import pytest
from hypothesis import given, settings

from relwrite import parse, scalar
from relwrite.engine.explore.egraph import EGraph
from relwrite.engine.explore.runner import BackoffScheduler, Limits, Runner, StopReason
from relwrite.graph import ops as o
from relwrite.relations.registry import Rule, catalogue, get_rule, rule
from relwrite.testing import expression_graphs

WORK = {"seconds": math.inf, "rule_seconds": math.inf}
"""No time limits: what a run finds depends on its budgets of work alone, not on the machine's load."""
DEFAULT = [r for r in catalogue() if not r.tags & {"unsafe", "explore"}]


def run(expr, rules, direction="both", **limits):
    g = EGraph()
    root = g.intern(expr)
    report = Runner(g, rules, direction, Limits(**{**WORK, **limits})).run([root])
    return g, root, report


def same_class(g, root, expr):
    return g.lookup(expr).cls == g.find(root)


def test_forward_runs_reach_the_stable_form():
    x = scalar("x")
    g, root, report = run(o.log(1 + o.exp(x)), [get_rule("softplus")], "forward")
    assert report.stop_reason == StopReason.SATURATED
    assert same_class(g, root, o.softplus(x))


def test_backward_runs_find_the_left_sides():
    x = scalar("x")
    g, root, report = run(o.softplus(x), [get_rule("softplus")], "backward")
    assert same_class(g, root, o.log(1.0 + o.exp(x)))
    g, root, report = run(o.softplus(x), [get_rule("softplus")], "forward")
    assert not same_class(g, root, o.log(1.0 + o.exp(x)))


def test_multi_level_patterns_match_across_classes():
    # log(1 + -sigmoid(x)) matches only once sub_to_add_neg put 1 + -sigmoid(x) in the class of 1 - sigmoid(x)
    x = scalar("x")
    expr = parse("log(1 - sigmoid(x))", types={"x": x})
    g, root, report = run(expr, [get_rule("sub_to_add_neg"), get_rule("log_one_minus_sigmoid")], "forward")
    assert same_class(g, root, o.neg(o.softplus(x)))


def test_wrapping_answers_do_not_grow_the_graph():
    x = scalar("x")
    g, root, report = run(o.exp(x) + x, DEFAULT)
    assert report.stop_reason == StopReason.SATURATED
    assert not same_class(g, root, o.neg(o.neg(o.exp(x) + x)))
    assert not same_class(g, root, o.add(0.0, o.exp(x), x))


def test_a_rule_that_raises_is_reported_and_skipped():
    def boom(lhs, rhs):
        def goal(state):
            raise RuntimeError("boom")
            yield state

        return goal

    x = scalar("x")
    rules = [Rule("boom", boom, tags=("explore",), tracks=(o.log,)), get_rule("softplus")]
    g, root, report = run(o.log(1 + o.exp(x)), rules)
    assert "boom" in report.failed and "RuntimeError: boom" in report.failed["boom"]
    assert same_class(g, root, o.softplus(x))


def test_a_rule_that_never_ends_is_reported_and_skipped():
    def spin(lhs, rhs):
        def goal(state):
            while True:
                pass
            yield state

        return goal

    x = scalar("x")
    rules = [Rule("spin", spin, tags=("explore",), tracks=(o.log,)), get_rule("softplus")]
    g, root, report = run(o.log(1 + o.exp(x)), rules, rule_seconds=0.05)
    assert "RuleTimeout" in report.failed["spin"]
    assert report.rules["spin"].runs == 1
    assert same_class(g, root, o.softplus(x))


def test_answers_of_another_type_are_not_merged():
    x = scalar("x")
    to_int = rule("to_int", (o.exp, "x"), (o.Cast("int64"), (o.exp, "x")), tags=("explore",))
    g, root, report = run(o.exp(x), [to_int])
    assert report.stop_reason == StopReason.SATURATED and report.rules["to_int"].answers == 1
    assert g.class_count == 2


@settings(max_examples=15)
@given(expression_graphs(max_nodes=8))
def test_the_node_limit_is_overshot_by_less_than_one_application(graph):
    inputs, output = graph
    g = EGraph()
    root = g.intern(output)
    limit = g.node_count + 15
    report = Runner(g, DEFAULT, limits=Limits(nodes=limit, iterations=6, **WORK)).run([root])
    assert report.nodes == g.node_count
    assert g.node_count < limit + max(report.largest_step, 1)
    if report.stop_reason != StopReason.NODE_LIMIT:  # a run stopped otherwise never reached the limit
        assert g.node_count < limit


def test_time_and_iteration_limits_stop_the_run():
    x = scalar("x")
    expr = o.exp(x)
    for _ in range(300):
        expr = o.log(1 + o.exp(expr))
    g, root, report = run(expr, DEFAULT, seconds=0.2)
    assert report.stop_reason == StopReason.TIME_LIMIT
    assert report.seconds < 2
    g, root, report = run(o.log(1 + o.exp(x)), DEFAULT, iterations=1)
    assert report.iterations == 1


def test_limits_are_validated():
    with pytest.raises(ValueError, match=r"Limits\.nodes"):
        Limits(nodes=0)
    with pytest.raises(ValueError, match=r"Limits\.seconds"):
        Limits(seconds=-1)
    with pytest.raises(ValueError, match="direction"):
        Runner(EGraph(), [], "upward")


def test_the_scheduler_bans_rules_that_keep_matching_and_lifts_bans_to_finish():
    r = get_rule("softplus")
    s = BackoffScheduler(match_limit=10, ban_length=2)
    assert s.admit(r, "forward", 0, 10)
    assert not s.admit(r, "forward", 0, 11)
    assert not s.can_search(r, "forward", 1) and s.can_search(r, "backward", 1)
    assert s.can_search(r, "forward", 3)
    assert s.admit(r, "forward", 3, 20)  # the limit doubled with the ban
    s.record(r, "backward", 3, runs=50, unions=0)
    assert not s.can_search(r, "backward", 4)
    assert s.lift_bans(4) and s.can_search(r, "backward", 4)
    assert not s.lift_bans(4)


def test_idle_rules_are_backed_off_but_run_again_before_saturation():
    x = scalar("x")
    dots = rule("never", (o.dot, "a", "b"), (o.dot, "b", "a"), tags=("explore",))
    g, root, report = run(o.log(1 + o.exp(x)) + o.log(1 + o.exp(o.neg(x))), [*DEFAULT, dots])
    assert report.stop_reason == StopReason.SATURATED
    assert report.rules["never"].runs == 0  # it tracks dot, which is nowhere

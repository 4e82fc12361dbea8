"""Assertions: a run-time check the default rewrites keep unless it cannot fail; dropping all is opt-in."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import run, var

import relwrite as rw
from relwrite.backends.function import function
from relwrite.engine import KanrenRelationSub, rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.basic import constant
from relwrite.graph.terms import same_expression
from relwrite.relations import assertions
from relwrite.relations.goals import node_mappingo
from relwrite.relations.pattern import to_graph


def test_a_condition_that_holds_goes_and_the_others_stay():
    x = rw.vector("x")
    kept = rewrite_graph(rw.assert_op(x, constant(True), x > 0, message="m") + 1, include=["canonicalize"])
    assert rw.pprint(kept) == "(1.0 + assert_op(x, (x > 0.0), message='m'))"
    gone = rewrite_graph(rw.assert_op(x, constant(np.ones(3, dtype=bool))) + 1, include=["canonicalize"])
    assert rw.pprint(gone) == "(1.0 + x)"


def test_every_check_goes_only_when_unsafe_rules_are_asked_for():
    x = rw.vector("x")
    checked = rw.assert_op(x, x > 0) * 2.0
    assert "assert_op" in rw.pprint(rewrite_graph(checked, include=["fast_run"], clone=True))
    assert rw.pprint(rewrite_graph(checked, include=["canonicalize", "unsafe"], clone=True)) == "(2.0 * x)"


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run"])
def test_a_compiled_check_raises_with_its_message(mode):
    x = rw.vector("x")
    f = function([x], rw.assert_op(x, x > 0, message="x must be positive") * 2.0, mode=mode)
    np.testing.assert_array_equal(f(np.array([1.0, 2.0])), [2.0, 4.0])
    with pytest.raises(Exception, match="x must be positive"):
        f(np.array([1.0, -2.0]))


# -- the declarations agree with the goal relations they replaced ------------------------------------


def _old_useless_assert(lhs, rhs):
    def without_true_conditions(parts):
        op, operands = parts
        if not isinstance(op, o.Assert) or not isinstance(operands, tuple):
            return None
        return assertions.without_true_conditions(op.message, operands[0], operands[1:])

    return node_mappingo(lhs, rhs, o.Assert, without_true_conditions)


def _old_remove_all_assert(lhs, rhs):
    def checked_value(parts):
        op, operands = parts
        return operands[0] if isinstance(op, o.Assert) and isinstance(operands, tuple) else None

    return node_mappingo(lhs, rhs, o.Assert, checked_value)


OLD = {"useless_assert": _old_useless_assert, "remove_all_assert": _old_remove_all_assert}


def first_answer(relation, graph, direction):
    """The first answer of `relation` run `direction` on `graph`, as a graph (None when there is none)."""
    q = var()
    found = run(1, q, relation(graph, q) if direction == "forward" else relation(q, graph))
    return to_graph(found[0], like=graph) if found else None


@st.composite
def checks(draw):
    """assert_op(x, c...) with conditions true everywhere, empty, false or only known at run time."""
    x = rw.vector("x")
    options = [
        constant(True),
        constant(np.ones(3, dtype=bool)),
        constant(np.array([True, False])),
        constant(np.zeros(0, dtype=bool)),
        constant(1.0),
        constant(False),
        x > 0,
    ]
    conditions = draw(st.lists(st.sampled_from(options), min_size=1, max_size=3))
    checked = rw.assert_op(x, *conditions, message=draw(st.sampled_from(["m", "assertion failed"])))
    return checked if draw(st.integers(0, 3)) else o.exp(checked)


@pytest.mark.parametrize("name", sorted(OLD))
@given(graph=checks())
def test_the_declarations_agree_with_the_old_relations_forward(name, graph):
    rule = getattr(assertions, name)
    assert not rule.backward  # neither ran backward: what was dropped is lost
    expected, got = first_answer(OLD[name], graph, "forward"), first_answer(rule, graph, "forward")
    assert (expected is None) == (got is None), rw.pprint(graph)
    assert expected is None or same_expression(expected, got), (rw.pprint(expected), rw.pprint(got))
    engine = KanrenRelationSub(rule).transform(None, graph.owner)
    assert (engine is False or not engine) == (expected is None)

"""Assertions: a run-time check the default rewrites keep unless it cannot fail; dropping all is opt-in."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import relwrite as rw
from relwrite.backends.numpy.function import numpy_function as evaluated  # the graph as it is, not rewritten
from relwrite.compile.function import function
from relwrite.engine import rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable, constant
from relwrite.relations import assertions
from relwrite.testing import input_values
from tests.relations.rule_checks import assert_answers_keep_values


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


# -- on generated checks: exactly the conditions that are constants true everywhere go ------------------


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


def true_everywhere(condition: Variable) -> bool:
    return isinstance(condition, Constant) and condition.data.size > 0 and bool(condition.data.all())


def outcome(graph: Variable, x: Variable, value: np.ndarray) -> np.ndarray | None:
    """`graph`'s value for x = `value`, or None where a check fails."""
    try:
        with np.errstate(all="ignore"):
            return np.asarray(evaluated([x], graph)(value))
    except Exception:
        return None


@pytest.mark.parametrize("name", ["useless_assert", "remove_all_assert"])
@given(graph=checks(), data=st.data())
def test_the_rules_drop_the_conditions_they_promise_on_generated_checks(name, graph, data):
    rule = getattr(assertions, name)
    assert not rule.backward  # neither runs backward: what was dropped is lost
    rhs = assert_answers_keep_values(rule, graph, data)
    if not isinstance(graph.owner.op, o.Assert):
        assert rhs is None
        return
    x, *conditions = graph.owner.inputs
    kept = [c for c in conditions if not true_everywhere(c)]
    if name == "remove_all_assert":
        assert rhs is x
    elif len(kept) == len(conditions):
        assert rhs is None
    elif not kept:
        assert rhs is x
    else:
        assert rhs.owner.op == graph.owner.op and rhs.owner.inputs == [x, *kept], rw.pprint(rhs)
    if name == "useless_assert" and rhs is not None:  # a check that fails still fails
        (value,) = data.draw(input_values([x], elements=st.floats(-2, 2)), label="x")
        assert (outcome(graph, x, value) is None) == (outcome(rhs, x, value) is None), (rw.pprint(rhs), value)

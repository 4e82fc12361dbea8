"""Assertions: a run-time check the default rewrites keep unless it cannot fail; dropping all is opt-in."""

from __future__ import annotations

import numpy as np
import pytest

import relwrite as rw
from relwrite.backends.function import function
from relwrite.engine import rewrite_graph
from relwrite.graph.basic import constant


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

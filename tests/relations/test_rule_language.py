"""The rule language: the seeds' etuple notation, op-parameter capture, op variables, computed values
(with and without an inverse) and the errors of bad declarations."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest
from etuples import etuple
from etuples.core import ExpressionTuple
from hypothesis import given
from hypothesis import strategies as st
from kanren import eq, run
from unification import var
from unification.variable import isvar

from relwrite import float64, matrix, pprint, tensor, vector
from relwrite.backends.numpy import numpy_function
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable, constant
from relwrite.graph.terms import GraphETuple, same_expression
from relwrite.relations import rule
from relwrite.relations.pattern import as_graph
from relwrite.relations.runtime import Computed
from relwrite.testing import ac_text, check_relation, expression_graphs

x, y = float64("x"), float64("y")
A = matrix("A")


def forward(r, term) -> list[str]:
    return [pprint(as_graph(v)) for v in r.forward(term)]


def backward(r, term) -> list[str]:
    return [pprint(as_graph(a.value)) for a in islice(r.answers(term, "backward"), 16)]


def holds_logic_variables(term) -> bool:
    stack = [term]
    while stack:
        item = stack.pop()
        if isvar(item):
            return True
        if isinstance(item, (tuple, ExpressionTuple)) and not isinstance(item, GraphETuple):
            stack.extend(item)
    return False


# -- the seeds' notation ----------------------------------------------------------------------------

a, b = var(), var()
LOG_OF_PRODUCT = rule(
    "r", etuple(o.log, etuple(o.mul, a, b)), etuple(o.add, etuple(o.log, a), etuple(o.log, b))
)


def test_the_seeds_etuple_rule_runs_forward():
    assert forward(LOG_OF_PRODUCT, o.log(o.mul(x, y))) == ["(log(x) + log(y))", "(log(y) + log(x))"]
    assert forward(LOG_OF_PRODUCT, o.log(o.add(x, y))) == []


def test_the_seeds_etuple_rule_runs_backward():
    assert LOG_OF_PRODUCT.backward
    assert backward(LOG_OF_PRODUCT, o.add(o.log(x), o.log(y))) == ["log((x * y))", "log((y * x))"]
    q = var()
    found = [pprint(as_graph(v)) for v in run(0, q, LOG_OF_PRODUCT.relation(q, o.add(o.log(x), o.log(y))))]
    assert found == ["log((x * y))", "log((y * x))"]


def test_the_seeds_etuple_rule_runs_with_both_sides_unbound():
    left, right = var(), var()
    ((lhs, rhs),) = run(3, (left, right), LOG_OF_PRODUCT.relation(left, right))
    assert lhs[0] is o.log and lhs[1][0] is o.mul and rhs[0] is o.add
    p, q = lhs[1][1], lhs[1][2]
    assert isvar(p) and isvar(q) and p is not q and {p, q}.isdisjoint({a, b})  # fresh, not the rule's
    assert rhs[1] == etuple(o.log, p) and rhs[2] == etuple(o.log, q)
    # bound afterwards, the unbound answer is the forward run's
    then = run(0, right, LOG_OF_PRODUCT.relation(left, right), eq(left, o.log(o.mul(x, y))))
    assert [pprint(as_graph(v)) for v in then] == ["(log(x) + log(y))"]


@given(expression_graphs(max_nodes=4), expression_graphs(max_nodes=4))
def test_the_seeds_rule_backward_gives_back_every_left_side_it_rewrote(first, second):
    g = o.log(o.mul(first[1], second[1]))
    for right in LOG_OF_PRODUCT.forward(g):
        lefts = [ac_text(as_graph(a.value)) for a in LOG_OF_PRODUCT.answers(as_graph(right), "backward")]
        assert ac_text(g) in lefts


# -- op-parameter capture ----------------------------------------------------------------------------

SUM_OF_NEG = rule(
    "sum_of_neg", (o.Sum.pattern(axis="a"), (o.neg, "x")), (o.neg, (o.Sum.pattern(axis="a"), "x"))
)


def test_an_op_template_binds_the_prop_and_rebuilds_the_op_with_it():
    (answer,) = SUM_OF_NEG.answers(o.Sum(axis=0)(o.neg(A)))
    assert answer.bindings["a"] == (0,)
    built = as_graph(answer.value)
    assert built.owner.op == o.neg and built.owner.inputs[0].owner.op == o.Sum(axis=0)
    assert backward(SUM_OF_NEG, built) == ["sum(-A, axis=(0,))"]


@given(st.sampled_from([None, 0, 1, 2, (0, 1), (0, 2), (1, 2), (0, 1, 2)]))
def test_forward_then_backward_keeps_every_axis(axis):
    g = o.Sum(axis=axis)(o.neg(tensor("T", shape=(None, None, None))))
    (right,) = (as_graph(v) for v in SUM_OF_NEG.forward(g))
    assert right.owner.inputs[0].owner.op == o.Sum(axis=axis)
    assert [same_expression(as_graph(a.value), g) for a in SUM_OF_NEG.answers(right, "backward")] == [True]


def test_literal_props_must_equal():
    only_first = rule(
        "sum0_of_neg", (o.Sum.pattern(axis=(0,)), (o.neg, "x")), (o.neg, (o.Sum.pattern(axis=(0,)), "x"))
    )
    assert forward(only_first, o.Sum(axis=0)(o.neg(A))) == ["-sum(A, axis=(0,))"]
    assert forward(only_first, o.Sum(axis=1)(o.neg(A))) == []
    assert forward(only_first, o.Max(axis=0)(o.neg(A))) == []  # another class with the same props


def test_a_repeated_prop_name_must_take_one_value():
    same_axes = rule(
        "sum_of_sum",
        (o.Sum.pattern(axis="a"), (o.Sum.pattern(axis="a"), "x")),
        (o.Sum.pattern(axis="a"), "x"),
    )
    t = tensor("T", shape=(None, None, None))
    assert len(forward(same_axes, o.Sum(axis=0)(o.Sum(axis=0)(t)))) == 1
    assert forward(same_axes, o.Sum(axis=0)(o.Sum(axis=1)(t))) == []


def test_a_bad_prop_name_raises_naming_the_class():
    with pytest.raises(TypeError, match=r"Sum\.pattern: no props \['axes'\]; its props are \('axis',\)"):
        o.Sum.pattern(axes="a")


def test_both_sides_unbound_keep_the_captured_prop_linked():
    """Unbound, a template is an op pattern whose props are the rule's variables (shared by both sides)."""
    left, right = var(), var()
    found = run(
        0,
        (left, right),
        SUM_OF_NEG.relation(left, right),
        eq(left, o.Sum(axis=0)(o.neg(A))),
        eq(right, o.neg(o.Max(axis=1)(A))),
    )
    assert found == ()
    (answer,) = run(1, right, SUM_OF_NEG.relation(left, right), eq(left, o.Sum(axis=0)(o.neg(A))))
    assert same_expression(as_graph(answer), o.neg(o.Sum(axis=0)(A)))


# -- op variables ------------------------------------------------------------------------------------

ANY_UNARY_OF_NEG_NEG = rule(
    "any_unary_of_neg_neg", (o.neg, ("f", (o.neg, (o.neg, "x")))), (o.neg, ("f", "x"))
)


def test_an_op_variable_matches_any_op_and_rebuilds_it():
    assert forward(ANY_UNARY_OF_NEG_NEG, o.neg(o.exp(o.neg(o.neg(x))))) == ["-exp(x)"]
    assert forward(ANY_UNARY_OF_NEG_NEG, o.neg(o.sin(o.neg(o.neg(x))))) == ["-sin(x)"]
    assert backward(ANY_UNARY_OF_NEG_NEG, o.neg(o.sin(x))) == ["-sin(-(-x))"]


def test_an_op_variable_named_twice_must_be_one_op():
    same_op = rule("twice", (o.add, ("f", "x"), ("f", "y")), ("f", (o.add, "x", "y")))
    assert forward(same_op, o.add(o.exp(x), o.exp(y))) != []
    assert forward(same_op, o.add(o.exp(x), o.sin(y))) == []


def test_an_op_variable_heads_the_left_side_only_with_the_ops_it_tracks():
    with pytest.raises(ValueError, match="rule headless: the left side must be an application of an op"):
        rule("headless", ("f", "x"), "x")
    with pytest.raises(ValueError, match="rule headed: `heads` is for a left side headed by an op variable"):
        rule("headed", (o.exp, "x"), "x", heads=(o.Elemwise,))
    lifted = rule(
        "lifted",
        ("f", (o.neg, "x")),
        (o.neg, ("f", "x")),
        where=lambda f: f in (o.sin, o.tan),
        heads=(o.Elemwise,),
    )
    assert lifted.tracks == (o.Elemwise,) and lifted.backward
    assert forward(lifted, o.sin(o.neg(x))) == ["-sin(x)"]
    assert forward(lifted, o.cos(o.neg(x))) == []
    assert backward(lifted, o.neg(o.tan(x))) == ["tan(-x)"]


# -- computed values -----------------------------------------------------------------------------------


def plus_one(c):
    """The exponent one higher, for a scalar constant exponent; None (the rule does not apply) otherwise."""
    return constant(c.data + 1) if isinstance(c, Constant) and c.ndim == 0 else None


def minus_one(d):
    return [{"c": constant(d.data - 1)}] if isinstance(d, Constant) and d.ndim == 0 else []


POW_TIMES_BASE = rule(
    "pow_times_base",
    (o.mul, (o.pow, "x", "c"), "x"),
    (o.pow, "x", "d"),
    compute={"d": Computed(plus_one, minus_one)},
)
POW_TIMES_BASE_FORWARD_ONLY = rule(
    "pow_times_base_forward_only", (o.mul, (o.pow, "x", "c"), "x"), (o.pow, "x", "d"), compute={"d": plus_one}
)


def test_a_computed_value_builds_the_right_side():
    for r in (POW_TIMES_BASE, POW_TIMES_BASE_FORWARD_ONLY):
        assert forward(r, o.mul(o.pow(x, 2.0), x)) == ["(x ** 3.0)"]


def test_a_computed_value_of_none_refuses_the_match():
    for r in (POW_TIMES_BASE, POW_TIMES_BASE_FORWARD_ONLY):
        assert forward(r, o.mul(o.pow(x, y), x)) == []
        q = var()
        assert run(0, q, r.relation(o.mul(o.pow(x, y), x), q)) == ()


def test_a_declared_inverse_runs_the_rule_backward():
    assert POW_TIMES_BASE.backward and POW_TIMES_BASE.backward_note is None
    assert backward(POW_TIMES_BASE, o.pow(x, 3.0)) == ["((x ** 2.0) * x)"]
    assert backward(POW_TIMES_BASE, o.pow(x, y)) == []  # the inverse has no candidate: no answer


def test_without_an_inverse_the_rule_does_not_run_backward_and_says_which_value():
    r = POW_TIMES_BASE_FORWARD_ONLY
    assert r.backward is False
    assert r.backward_note == "d is computed without a declared inverse"
    q = var()
    assert run(0, q, r.relation(q, o.pow(x, 3.0))) == ()
    left, right = var(), var()
    ((lhs, rhs),) = run(3, (left, right), r.relation(left, right))  # unbound: the patterns, not examples
    assert holds_logic_variables(lhs) and isvar(rhs[2])


def test_an_inverse_candidate_the_function_does_not_map_back_is_dropped():
    wrong = rule(
        "wrong_inverse",
        (o.mul, (o.pow, "x", "c"), "x"),
        (o.pow, "x", "d"),
        compute={"d": Computed(plus_one, lambda d: [{"c": d}])},  # d itself: plus_one(d) is not d
    )
    assert wrong.backward
    assert backward(wrong, o.pow(x, 3.0)) == []


@given(
    expression_graphs(max_nodes=4).map(lambda graph: graph[1]),
    st.integers(-8, 8).map(lambda k: k / 2),  # exact in binary: d - 1 + 1 is d
)
def test_an_invertible_computed_value_gives_back_the_left_side(base, exponent):
    g = o.mul(o.pow(base, constant(np.float64(exponent))), base)
    (right,) = (as_graph(v) for v in POW_TIMES_BASE.forward(g))
    assert right.owner.op == o.pow and float(right.owner.inputs[1].data) == exponent + 1
    lefts = [ac_text(as_graph(a.value)) for a in POW_TIMES_BASE.answers(right, "backward")]
    assert ac_text(g) in lefts


# -- bad declarations ------------------------------------------------------------------------------------


def test_a_right_side_variable_the_left_side_does_not_bind_is_an_error():
    with pytest.raises(
        ValueError, match=r"rule stray: the right side uses \['y'.*which the left side does not bind"
    ):
        rule("stray", (o.neg, "x"), (o.exp, "y"))


def test_a_computed_value_reading_an_unknown_name_is_an_error():
    with pytest.raises(
        ValueError, match="rule unknown: computed 'd' reads 'z', which the rule does not name"
    ):
        rule("unknown", (o.neg, "x"), (o.exp, "d"), compute={"d": lambda z: z})


def test_a_computed_value_that_is_not_callable_is_an_error():
    with pytest.raises(TypeError, match=r"rule not_callable: computed 'd': .* must be callable, got 3"):
        rule("not_callable", (o.neg, "x"), (o.exp, "d"), compute={"d": 3})
    with pytest.raises(TypeError, match="a computed value's inverse must be callable, got 3"):
        Computed(plus_one, 3)


def test_a_computed_value_named_like_a_variable_is_an_error():
    with pytest.raises(ValueError, match="rule clash: computed 'x' is already a variable of the left side"):
        rule("clash", (o.neg, "x"), (o.exp, "x"), compute={"x": lambda x: x})


def test_graph_leaves_in_a_pattern_match_only_themselves():
    only_x = rule("exp_of_x", (o.exp, x), (o.neg, x))
    assert forward(only_x, o.exp(x)) == ["-x"]
    assert forward(only_x, o.exp(y)) == []
    assert isinstance(as_graph(next(only_x.forward(o.exp(x)))), Variable)


def test_an_ndarray_in_a_pattern_is_the_constant_holding_it_both_ways():
    """PyTensor's patterns take ndarray constants: an array matches the constants equal to it (not a
    constant of other values or another shape), builds that constant on the right, and runs backward."""
    ones_times = rule("ones_times", (o.mul, "x", np.ones(3)), "x", ["canonicalize"], keeps_type=True)
    x = vector("x", shape=(3,))
    assert [same_expression(a, x) for a in ones_times.forward(x * np.ones(3))] == [True]
    assert list(ones_times.forward(x * np.full(3, 2.0))) == []
    assert list(ones_times.forward(vector("z") * np.ones(4))) == []
    shifted = rule(
        "shifted", (o.add, "x", np.array([1.0, 2.0])), (o.sub, "x", np.array([-1.0, -2.0])), ["canonicalize"]
    )
    y = vector("y", shape=(2,))
    (answer,) = shifted.forward(y + np.array([1.0, 2.0]))
    values = np.array([0.5, -3.0])
    np.testing.assert_array_equal(
        numpy_function([y], as_graph(answer))(values), values + np.array([1.0, 2.0])
    )
    assert shifted.backward
    assert check_relation(shifted, max_examples=20, types={"x": "(2,)"}).directions == ("forward", "backward")
    assert rule("zero_d", (o.mul, "x", np.array(2.0)), (o.add, "x", "x"), ["canonicalize"]).forward(x * 2.0)

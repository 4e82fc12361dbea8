"""Sigmoid, softmax and reshape_lift (issue 27): on generated graphs of each family, in either way of
writing a negation and in float32 and float64, every rule keeps the values it replaces (forward and
back) and the family's forms are rewritten; the default pipeline reaches sigmoid, exp, x, softmax and
-softplus from what users write, and there gives the accurate value where the left side overflows,
cancels or divides inf by inf (checked against mpmath, at large |x|)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite.backends.numpy.function import numpy_function
from relwrite.compile.function import function
from relwrite.engine import rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, graph_inputs, tensor
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.relations import Rule, shapes, stabilize
from relwrite.testing import input_values
from tests.relations.rule_checks import assert_answers_keep_values

SIGMOID_RULES = [
    r
    for r in vars(stabilize).values()
    if isinstance(r, Rule) and any(part in r.name for part in ("exp", "sigmoid")) and "softmax" not in r.name
]
SOFTMAX_RULES = [r for r in vars(stabilize).values() if isinstance(r, Rule) and "softmax" in r.name]


def negate(e, written: str):
    return o.neg(e) if written == "neg" else o.mul(-1.0, e)


@st.composite
def sigmoid_forms(draw):
    """(graph, whether a sigmoid rule should rewrite it): a member of the sigmoid family (exp over 1 + exp,
    1 / (1 + exp(+-x)), reciprocals, sigmoid times exp, odds), its negation written neg or mul(-1, .),
    or a near miss (2 + exp(x), exp of another variable, a sigmoid of y)."""
    dtype = draw(st.sampled_from(["float64", "float32"]))
    x, y = tensor("x", dtype, (None,)), tensor("y", dtype, (None,))
    written = draw(st.sampled_from(["neg", "mul"]))
    one = draw(st.sampled_from([1.0, 2.0])) if draw(st.booleans()) else 1.0
    z = draw(st.sampled_from([x, y]))  # the second occurrence: x for the family, y for a near miss
    minus_x = negate(x, written)
    forms = {
        "exp/(1+exp)": lambda: o.true_div(o.exp(x), o.add(one, o.exp(z))),
        "y*exp/(1+exp)": lambda: o.true_div(o.mul(y, o.exp(x)), o.add(one, o.exp(z))),
        "1/(1+exp(-x))": lambda: o.true_div(1.0, o.add(one, o.exp(minus_x))),
        "y/(1+exp)": lambda: o.true_div(y, o.add(one, o.exp(x))),
        "reciprocal": lambda: o.reciprocal(o.add(one, o.exp(draw(st.sampled_from([x, minus_x]))))),
        "sigmoid*exp(-x)": lambda: o.mul(o.sigmoid(x), o.exp(negate(z, written))),
        "sigmoid(-x)*exp": lambda: o.mul(o.exp(z), o.sigmoid(minus_x)),
        "odds": lambda: o.true_div(o.sigmoid(x), o.add(one, negate(o.sigmoid(z), written))),
        "odds of sigmoid(-x)": lambda: o.true_div(o.sigmoid(x), o.sigmoid(negate(z, written))),
        "inverse odds": lambda: o.true_div(o.add(one, negate(o.sigmoid(x), written)), o.sigmoid(z)),
    }
    name = draw(st.sampled_from(sorted(forms)))
    graph = forms[name]()
    reads_one = name not in ("sigmoid*exp(-x)", "sigmoid(-x)*exp", "odds of sigmoid(-x)")
    # y / (1 + exp(y)) is still y / (1 + exp(.)): only the products and the odds need the same x twice
    reads_z_as_x = name in (
        "sigmoid*exp(-x)",
        "sigmoid(-x)*exp",
        "odds",
        "odds of sigmoid(-x)",
        "inverse odds",
    )
    near_miss = (reads_one and one != 1.0) or (reads_z_as_x and z is y)
    return graph, not near_miss


@given(form=sigmoid_forms(), data=st.data())
@settings(max_examples=150)
def test_sigmoid_rules_keep_values_and_rewrite_exactly_the_family(form, data):
    graph, in_family = form
    rewritten = [r.name for r in SIGMOID_RULES if assert_answers_keep_values(r, graph, data) is not None]
    assert bool(rewritten) == in_family, (pprint(graph), rewritten)


@st.composite
def softmax_forms(draw):
    """exp(x) / sum(exp(x), axis, keepdims=True), with x - max(x, axis) in place of x or not, for float x
    of 1 to 3 dimensions; near misses sum over other axes, another variable or two axes."""
    dtype = draw(st.sampled_from(["float64", "float32"]))
    ndim = draw(st.integers(1, 3))
    x, y = tensor("x", dtype, (None,) * ndim), tensor("y", dtype, (None,) * ndim)
    axis = draw(st.integers(-ndim, ndim - 1))
    summed = draw(st.sampled_from([(axis,), None, tuple(range(ndim))]))
    body = x
    if draw(st.booleans()):
        body = o.add(x, negate(o.max(x, axis=draw(st.sampled_from([(axis,), None])), keepdims=True), "neg"))
    keepdims = draw(st.booleans())
    if not keepdims and not (ndim == 1 or summed is None):
        keepdims = True
    z = draw(st.sampled_from([body, body, y]))
    graph = o.true_div(o.exp(body), o.sum(o.exp(z), axis=summed, keepdims=keepdims))
    softmax = (
        z is body and (ndim == 1 or (summed is not None and len(summed) == 1)) and (keepdims or ndim == 1)
    )
    return graph, softmax


@given(form=softmax_forms(), data=st.data())
@settings(max_examples=100)
def test_softmax_rules_keep_values_and_recognize_exactly_exp_over_its_sum(form, data):
    graph, softmax = form
    rewritten = [r.name for r in SOFTMAX_RULES if assert_answers_keep_values(r, graph, data) is not None]
    assert bool(rewritten) == softmax, (pprint(graph), rewritten)
    if softmax:
        result = rewrite_graph(graph, include=["fast_run"], exclude=["fusion"], clone=True)
        assert pprint(result).startswith("softmax("), pprint(result)


UNARY = [o.exp, o.softplus, o.sigmoid, o.neg, o.abs, o.log1p, o.tanh, lambda v: o.cast(v, "float32")]


@given(data=st.data())
@settings(max_examples=80)
def test_reshape_lift_keeps_values_both_ways_for_unary_elementwise_ops(data):
    m = tensor("m", data.draw(st.sampled_from(["float64", "float32"])), (2, 3))
    f = data.draw(st.sampled_from(UNARY))
    shape = data.draw(st.sampled_from([(6,), (3, 2), (-1,), (1, 6, 1), (3, -1)]))
    lifted = assert_answers_keep_values(shapes.reshape_lift, o.Reshape(shape)(f(m)), data)
    assert lifted is not None and isinstance(lifted.owner.inputs[0].owner.op, o.Reshape)
    assert assert_answers_keep_values(shapes.reshape_lift, o.Reshape(shape)(o.add(m, m)), data) is None


# -- the pipeline, at large |x| --------------------------------------------------------------------


def mp_sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


def mp_log_sigmoid(x):
    """log(sigmoid(x)) = -log1p(exp(-x)), without rounding 1 + exp(-x) (at any working precision)."""
    return -mpmath.log1p(mpmath.exp(-x))


PIPELINE = [
    # user's text, what fast_run makes of it, the exact value (mpmath)
    ("exp(x)/(1+exp(x))", "sigmoid(x)", mp_sigmoid),
    ("1/(1+exp(-x))", "sigmoid(x)", mp_sigmoid),
    ("1/(1+exp(-1.0*x))", "sigmoid(x)", mp_sigmoid),
    ("1/(1+exp(x))", "sigmoid(-x)", lambda x: mp_sigmoid(-x)),
    # NaN kept at the infinity where the product is 0 * inf (fuzzer seed 29, graph 2436)
    ("exp(x)*sigmoid(-x)", "switch(x == inf, nan, sigmoid(x))", mp_sigmoid),
    ("exp(x)*sigmoid(-1.0*x)", "switch(x == inf, nan, sigmoid(x))", mp_sigmoid),
    ("sigmoid(x)*exp(-x)", "switch(x == -inf, nan, sigmoid(-x))", lambda x: mp_sigmoid(-x)),
    ("sigmoid(x)/(1-sigmoid(x))", "exp(x)", mpmath.exp),
    ("sigmoid(x)/(1 + -1.0*sigmoid(x))", "exp(x)", mpmath.exp),
    ("(1-sigmoid(x))/sigmoid(x)", "exp(-x)", lambda x: mpmath.exp(-x)),
    ("log(sigmoid(x)/(1-sigmoid(x)))", "x", lambda x: x),
    ("log(sigmoid(x))", "-softplus(-x)", mp_log_sigmoid),
    ("log(1-sigmoid(x))", "-softplus(x)", lambda x: mp_log_sigmoid(-x)),
    ("log(1 + -1.0*sigmoid(x))", "-softplus(x)", lambda x: mp_log_sigmoid(-x)),
    ("log(sigmoid(-1.0*x))", "-softplus(x)", lambda x: mp_log_sigmoid(-x)),
]


def evaluate(graph, values: np.ndarray) -> np.ndarray:
    inputs = sorted((v for v in graph_inputs([graph]) if not isinstance(v, Constant)), key=lambda v: v.name)
    with np.errstate(all="ignore"):
        return np.asarray(numpy_function(inputs, graph)(values))


@pytest.mark.parametrize("text, expected, exact", PIPELINE, ids=[t for t, _, _ in PIPELINE])
@given(
    values=st.lists(st.floats(-1000, 1000), min_size=1, max_size=5) | st.sampled_from([[-800.0, 40.0, 720.0]])
)
@settings(max_examples=20)
def test_fast_run_reaches_the_stable_form_and_its_value_at_any_x(text, expected, exact, values):
    x = tensor("x", "float64", (None,))
    result = rewrite_graph(parse(text, types={"x": x}), include=["fast_run"], exclude=["fusion"], clone=True)
    assert pprint(result) == pprint(parse(expected, types={"x": x}))
    points = np.array(values)
    with mpmath.workprec(200):
        reference = np.array([float(exact(mpmath.mpf(v))) for v in points])
    np.testing.assert_allclose(evaluate(result, points), reference, rtol=1e-13, atol=1e-300)


def test_the_naive_forms_fail_where_the_pipeline_is_accurate():
    """The points the pipeline test reaches defeat the left sides: inf / inf, 0 * inf, 1 - 1."""
    x = tensor("x", "float64", (None,))
    for text, point in [
        ("exp(x)/(1+exp(x))", 800.0),
        ("exp(x)*sigmoid(-x)", 800.0),
        ("log(1-sigmoid(x))", 40.0),
    ]:
        naive = evaluate(parse(text, types={"x": x}), np.array([point]))
        assert not np.isfinite(naive).all(), text
    odds = evaluate(parse("sigmoid(x)/(1-sigmoid(x))", types={"x": x}), np.array([40.0]))
    assert np.isinf(odds).all()


def test_softmax_from_exp_and_sum_is_finite_where_exp_overflows():
    m = tensor("m", "float64", (None, None))
    shifted = "exp(m - max(m, axis=1, keepdims=True))"
    graph = parse(f"{shifted} / sum({shifted}, axis=1, keepdims=True)", types={"m": m})
    result = rewrite_graph(graph, include=["fast_compile"], clone=True)
    assert pprint(result).startswith("softmax((m + -"), pprint(result)  # recognized, its shift kept
    graph = parse("exp(m) / sum(exp(m), axis=1, keepdims=True)", types={"m": m})
    result = rewrite_graph(graph, include=["fast_compile"], clone=True)
    assert pprint(result) == "softmax(m, axis=1)"
    values = np.array([[1000.0, 999.0], [-1000.0, 0.0], [0.0, np.inf]])
    naive = evaluate(graph, values)
    assert np.isnan(naive[0]).all() and np.isnan(naive[2, 1])
    expected = [[1 / (1 + np.exp(-1.0)), 1 / (1 + np.exp(1.0))], [0.0, 1.0], [0.0, 1.0]]
    np.testing.assert_allclose(evaluate(result, values), expected, rtol=1e-15, atol=1e-300)


def test_log_of_exp_over_its_sum_is_log_softmax_and_exp_of_log_softmax_is_softmax():
    m = tensor("m", "float64", (None, None))
    graph = parse("log(exp(m) / sum(exp(m), axis=0, keepdims=True))", types={"m": m})
    assert pprint(rewrite_graph(graph, include=["fast_run"], clone=True)) == "log_softmax(m, axis=0)"
    graph = parse("exp(log_softmax(m, axis=0))", types={"m": m})
    assert pprint(rewrite_graph(graph, include=["fast_run"], clone=True)) == "softmax(m, axis=0)"


def test_a_reshape_between_log_one_minus_and_sigmoid_is_lifted_so_softplus_is_reached():
    x = tensor("x", "float64", (None,))
    graph = parse("log(1 - sigmoid(x).reshape((2, -1)))", types={"x": x})
    result = rewrite_graph(graph, include=["fast_run"], exclude=["fusion"], clone=True)
    assert pprint(result) == "-softplus(reshape(x, shape=(2, -1)))"
    values = np.array([40.0, 800.0, -3.0, 0.5])
    with mpmath.workprec(200):
        reference = [float(mp_log_sigmoid(-mpmath.mpf(v))) for v in values]
    np.testing.assert_allclose(evaluate(result, values).ravel(), reference, rtol=1e-13)


@given(
    values=st.lists(st.floats(-2, 2) | st.sampled_from([0.0, -0.0, 1.0, 1 - 2**-53, 2**-1074]), min_size=1)
)
@settings(max_examples=60)
def test_sigmoid_of_logit_is_x_on_the_unit_interval_and_nan_outside_as_the_left_side(values):
    x = tensor("x", "float64", (None,))
    for text in ("sigmoid(log(x/(1-x)))", "sigmoid(log(x/(1 + -1.0*x)))"):
        graph = parse(text, types={"x": x})
        result = rewrite_graph(graph, include=["fast_run"], exclude=["fusion"], clone=True)
        assert "sigmoid" not in pprint(result) and "log" not in pprint(result)
        points = np.array(values)
        left, right = evaluate(graph, points), evaluate(result, points)
        np.testing.assert_array_equal(np.isnan(right), np.isnan(left))
        inside = (points >= 0) & (points <= 1)
        np.testing.assert_array_equal(right[inside], points[inside])
        np.testing.assert_allclose(left[inside], points[inside], rtol=1e-12, atol=1e-300)


def shifted_log_softmax(values: np.ndarray, axis: int) -> np.ndarray:
    """x - max - log(sum(exp(x - max))) along `axis`, in float64 (each exp at most 1)."""
    m = values.max(axis=axis, keepdims=True)
    return values - m - np.log(np.exp(values - m).sum(axis=axis, keepdims=True))


@given(data=st.data())
@settings(max_examples=40)
def test_x_minus_its_logsumexp_is_log_softmax_in_fast_run_and_finite_at_large_x(data):
    ndim = data.draw(st.integers(1, 3))
    axis = data.draw(st.integers(-ndim, ndim - 1))
    x = tensor("x", "float64", (None,) * ndim)
    kept = "" if ndim == 1 and data.draw(st.booleans()) else f", axis={axis}, keepdims=True"
    minus = data.draw(st.sampled_from(["x - {}", "x + -1.0*{}"]))
    text = minus.format(data.draw(st.sampled_from([f"log(sum(exp(x){kept}))", f"logsumexp(x{kept})"])))
    graph = parse(text, types={"x": x})
    result = rewrite_graph(graph, include=["fast_run"], exclude=["fusion"], clone=True)
    assert pprint(result) == f"log_softmax(x, axis={axis % ndim if kept else 0})", text
    (values,) = data.draw(input_values([x], elements=st.floats(-1000, 1000)))
    expected = shifted_log_softmax(values, axis if kept else 0)
    np.testing.assert_allclose(evaluate(result, values), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_sigmoid_times_an_exp_keeps_nan_where_it_is_zero_times_infinity(dtype):
    """sigmoid(x) * exp(-x) is 0 * inf at x = -inf: NaN, kept by the stable form (sigmoid(-x) alone gave
    its limit 1 there, which only an unsafe rule may: fuzzer seed 29, graph 2436); finite where the
    left side overflows to NaN (x = -1000), 0 at x = inf as the left side."""
    x = tensor("x", dtype, (None,))
    values = np.array([-np.inf, -1000.0, 0.0, np.inf, np.nan], dtype=dtype)
    for graph, expected in (
        (o.sigmoid(x) * o.exp(-x), [np.nan, 1.0, 0.5, 0.0, np.nan]),
        (o.sigmoid(-x) * o.exp(x), [0.0, 0.0, 0.5, np.nan, np.nan]),
    ):
        f = function([x], graph, mode="fast_run")
        np.testing.assert_array_equal(f(values), np.array(expected, dtype=dtype))

"""Stabilize rules: each rewrites its examples, agrees with its left side both ways, never fires on
near misses, and is accurate where the left side overflows, underflows or cancels."""

from decimal import Decimal, localcontext
from functools import cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import run, var

from relwrite import constant, log, matrix, parse, pprint, vector
from relwrite.backends.numpy import numpy_function  # evaluates a graph as it is, without rewriting it
from relwrite.engine import KanrenRelationSub, rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.basic import graph_inputs, tensor
from relwrite.graph.terms import same_expression
from relwrite.relations import Rule, catalogue, stabilize
from relwrite.relations.pattern import to_graph
from relwrite.testing import ac_text, input_values
from tests.relations.rule_checks import assert_answers_keep_values

RULES = [r for r in vars(stabilize).values() if isinstance(r, Rule)]
RULES_BY_NAME = {r.name: r for r in RULES}
EXAMPLES = [pytest.param(r.name, text, id=f"{r.name}: {text}") for r in RULES for text in r.examples]

# Where each left side is itself accurate to ~1e-9, so that it can be compared with the right side.
ACCURATE_RANGE = {
    "log1p": (-0.25, 1e3),
    "log_one_minus_sigmoid": (-30.0, 15.0),
    "log_one_minus_sigmoid_times_minus_one": (-30.0, 15.0),
    "log1p_neg_sigmoid": (-30.0, 15.0),
    "log1p_neg_sigmoid_times_minus_one": (-30.0, 15.0),
    # 1 - sigmoid(x) cancels for large x: the odds' left sides are accurate below 15
    "odds_sigmoid": (-30.0, 15.0),
    "odds_sigmoid_times_minus_one": (-30.0, 15.0),
    "inverse_odds_sigmoid": (-30.0, 15.0),
    "inverse_odds_sigmoid_times_minus_one": (-30.0, 15.0),
    "log1p_expm1_integer": (-15.0, 30.0),  # below, expm1(i) is near -1 and log1p of it cancels
}
DEFAULT_RANGE = (-30.0, 30.0)


def forward(rule: Rule, graph):
    """The replacement the engine takes from `rule` for `graph` (None when the rule does not apply)."""
    result = KanrenRelationSub(rule).transform(None, graph.owner)
    return result[0] if result else None


def backward(rule: Rule, graph):
    """The first left side `rule` run backward gives for `graph`, as a graph (None when there is none)."""
    q = var()
    answers = run(1, q, rule(q, graph))
    return to_graph(answers[0], like=graph) if answers else None


@cache
def example(name: str, text: str):
    """(inputs, left side, forward result, backward result) for one example of a rule."""
    rule = RULES_BY_NAME[name]
    lhs = parse(text, types=rule.types)
    rhs = forward(rule, lhs)
    assert rhs is not None, f"{name} does not rewrite its example {text}"
    back = backward(rule, rhs) if rule.backward else None
    inputs = sorted(graph_inputs([lhs]), key=lambda v: v.name)
    return inputs, lhs, rhs, back


def evaluate(inputs, graph, values):
    with np.errstate(all="ignore"):
        return numpy_function(inputs, graph)(*values)


def assert_agree(expected: np.ndarray, actual: np.ndarray) -> None:
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-7, atol=1e-9, equal_nan=True)


# -- metadata --------------------------------------------------------------------------------------


def test_the_catalogue_holds_every_stabilize_rule_once():
    names = [r.name for r in catalogue()]
    assert len(names) == len(set(names))
    assert {r.name for r in RULES} <= set(names)
    assert len(RULES) >= 10


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_rules_carry_complete_metadata(rule):
    assert rule.phase == "stabilize"
    assert "fast_run" in rule.tags
    assert rule.tracks, "stabilize rules name the ops they apply to"
    assert rule.examples and rule.doc
    # the sigmoid-from-exp rules and the odds are forward only (registry `one_way`): backward they would
    # expand every exp(x) or sigmoid(x), and exploration would never saturate
    assert rule.backward or rule.backward_note.startswith("forward only: "), rule.backward_note
    assert rule.semantics in ("stabilizes", "unsafe") and not rule.assumptions
    assert ("unsafe" in rule.tags) == (rule.semantics == "unsafe")


def test_only_softplus_minus_self_is_unsafe_and_log_exp_runs_by_default():
    unsafe = [r.name for r in RULES if r.semantics == "unsafe"]
    assert unsafe == ["softplus_minus_self", "softplus_minus_self_times_minus_one"]
    for name in ("log_exp", "sqrt_sqr", "softplus"):
        assert RULES_BY_NAME[name].semantics == "stabilizes" and "unsafe" not in RULES_BY_NAME[name].tags
    x = vector("x")
    assert pprint(rewrite_graph(log(o.exp(x)), include=["fast_run"])) == "x"


# -- examples, both directions, numerically --------------------------------------------------------


@pytest.mark.parametrize("name, text", EXAMPLES)
def test_examples_rewrite_and_come_back(name, text):
    inputs, lhs, rhs, back = example(name, text)
    assert rhs.type == lhs.type
    assert pprint(rhs) != pprint(lhs)
    if not RULES_BY_NAME[name].backward:  # forward only (`one_way`)
        return
    assert back is not None, f"{name} run backward on {pprint(rhs)} gives nothing"
    assert ac_text(back) == ac_text(lhs)  # the same left side, its sum's terms in any order


@pytest.mark.parametrize("name, text", EXAMPLES)
def test_kanren_runs_give_few_answers_the_first_being_the_rewrite(name, text):
    inputs, lhs, rhs, back = example(name, text)
    rule, q = RULES_BY_NAME[name], var()
    answers = run(0, q, rule(lhs, q))
    assert 1 <= len(answers) <= 3
    assert pprint(to_graph(answers[0], like=lhs)) == pprint(rhs)
    backward = run(0, q, rule(q, rhs))
    assert (
        1 <= len(backward) <= 3
        if rule.backward or not rule.backward_note.startswith("forward only")
        else not backward
    )


@pytest.mark.parametrize("name, text", EXAMPLES)
@given(data=st.data())
def test_both_sides_agree_where_the_left_side_is_accurate(name, text, data):
    inputs, lhs, rhs, back = example(name, text)
    low, high = ACCURATE_RANGE.get(name, DEFAULT_RANGE)
    integers = all(v.type.numpy_dtype.kind in "iu" for v in inputs)
    elements = st.integers(int(low), int(high)) if integers else st.floats(low, high)
    values = data.draw(input_values(inputs, elements=elements))
    expected = evaluate(inputs, lhs, values)
    assert_agree(expected, evaluate(inputs, rhs, values))
    if back is not None:
        assert_agree(expected, evaluate(inputs, back, values))


# -- accuracy where the left side fails ------------------------------------------------------------

PLACES = 400  # digits: enough for 1 + exp(-700) to keep its exp(-700)


def dexp(x: Decimal) -> Decimal:
    return x.exp()


def reference(fn, values: np.ndarray) -> np.ndarray:
    """`fn` applied to each element in high-precision decimal arithmetic, rounded to float64."""
    with localcontext() as ctx:
        ctx.prec = PLACES
        return np.array([float(fn(Decimal(float(v)))) for v in np.ravel(values)]).reshape(np.shape(values))


def softplus_ref(x: Decimal) -> Decimal:
    return (1 + dexp(x)).ln()


ACCURACY = [
    ("softplus", "log(add(1, exp(x)))", [800.0, 50.0, 1e-10, -50.0, -700.0], softplus_ref),
    ("softplus_log1p", "log1p(exp(x))", [800.0, 50.0, -700.0], softplus_ref),
    ("log1p", "log(add(1, x))", [1e-20, -1e-20, 1e-10, 3e-5], lambda x: (1 + x).ln()),
    ("expm1", "add(-1, exp(x))", [1e-20, -1e-10, 1e-5], lambda x: dexp(x) - 1),
    ("log_sigmoid", "log(sigmoid(x))", [-800.0, -40.0, 40.0], lambda x: -softplus_ref(-x)),
    ("log_sigmoid_neg", "log(sigmoid(neg(x)))", [800.0, 40.0, -40.0], lambda x: -softplus_ref(x)),
    (
        "log_one_minus_sigmoid",
        "log(add(1, neg(sigmoid(x))))",
        [800.0, 40.0, 37.0, -40.0],
        lambda x: -softplus_ref(x),
    ),
    ("log1p_neg_sigmoid", "log1p(neg(sigmoid(x)))", [800.0, 40.0, -40.0], lambda x: -softplus_ref(x)),
    ("softplus_minus_self", "add(neg(x), softplus(x))", [40.0, 100.0, 700.0], lambda x: softplus_ref(-x)),
    ("log_exp", "log(exp(x))", [800.0, -800.0, 1e308, -1e308, -745.0], lambda x: x),
    ("sqrt_sqr", "sqrt(sqr(x))", [1e200, -1e300, 1e-200, -1e-170], abs),
]


@pytest.mark.parametrize("name, text, points, exact", ACCURACY, ids=[case[0] for case in ACCURACY])
def test_the_right_side_is_accurate_where_the_left_side_is_not(name, text, points, exact):
    x = vector("x")
    lhs = parse(text, types={"x": x})
    rhs = forward(RULES_BY_NAME[name], lhs)
    values = np.array(points)
    expected = reference(exact, values)
    np.testing.assert_allclose(evaluate([x], rhs, [values]), expected, rtol=1e-14, atol=1e-300)
    naive = evaluate([x], lhs, [values])
    assert not np.allclose(naive, expected, rtol=1e-6, atol=0), "the example should defeat the left side"


def logsumexp_ref(row) -> float:
    with localcontext() as ctx:
        ctx.prec = PLACES
        return float(sum(dexp(Decimal(float(v))) for v in row).ln())


def test_logsumexp_is_accurate_where_exp_overflows_or_underflows():
    x = matrix("x")
    rows = np.array([[1000.0, 1000.0], [-1000.0, -999.0], [1e-3, 2e-3], [-800.0, 30.0]])
    rhs = forward(stabilize.logsumexp, parse("log(sum(exp(x), axis=1))", types={"x": x}))
    expected = [logsumexp_ref(row) for row in rows]
    np.testing.assert_allclose(evaluate([x], rhs, [rows]), expected, rtol=1e-14)
    vec = vector("v")
    rhs = forward(stabilize.logsumexp, parse("log(sum(exp(v)))", types={"v": vec}))
    np.testing.assert_allclose(evaluate([vec], rhs, [rows[0]]), expected[0], rtol=1e-14)


def test_logsumexp_keeps_the_infinities_of_the_left_side():
    x = matrix("x")
    inf = np.inf
    rows = np.array(
        [[-inf, -inf, -inf], [inf, 1.0, -inf], [-inf, 0.0, 0.0], [inf, inf, 2.0], [np.nan, 0.0, 1.0]]
    )
    lhs = parse("log(sum(exp(x), axis=1))", types={"x": x})
    rhs = forward(stabilize.logsumexp, lhs)
    expected = evaluate([x], lhs, [rows])
    np.testing.assert_array_equal(evaluate([x], rhs, [rows]), expected)
    np.testing.assert_allclose(expected[2], np.log(2.0))


def test_log_softmax_is_finite_where_softmax_underflows():
    x = matrix("x")
    values = np.array([[0.0, 1000.0], [-1000.0, 0.0]])
    lhs = parse("log(softmax(x))", types={"x": x})
    rhs = forward(stabilize.log_softmax, lhs)
    assert np.isinf(evaluate([x], lhs, [values])).any()
    np.testing.assert_allclose(evaluate([x], rhs, [values]), [[-1000.0, 0.0], [-1000.0, 0.0]], rtol=1e-15)


def test_logsumexp_over_columns_broadcasts_the_maximum_back():
    x = matrix("x")
    values = np.array([[1.0, 500.0, -3.0], [800.0, 2.0, 0.5]])
    lhs = parse("log(sum(exp(x), axis=0))", types={"x": x})
    rhs = forward(stabilize.logsumexp, lhs)
    assert rhs.type == lhs.type
    expected = [logsumexp_ref(column) for column in values.T]
    np.testing.assert_allclose(evaluate([x], rhs, [values]), expected, rtol=1e-14)


# -- near misses -----------------------------------------------------------------------------------

NEAR_MISSES = [
    ("log1p", "log(add(2, x))", {}),
    ("log1p", "log(add(1, x))", {"x": "vector:int64"}),  # 1 + x wraps around for integers
    ("log1p", "log(mul(1, x))", {}),
    ("softplus", "log(add(2, exp(x)))", {}),
    ("softplus", "log(add(1, exp(x), y))", {}),
    ("softplus_log1p", "log1p(sqrt(x))", {}),
    ("expm1", "add(-2, exp(x))", {}),
    ("expm1", "add(1, exp(x))", {}),
    ("expm1", "add(-1, log(x), y)", {}),
    ("expm1", "mul(-1, exp(x))", {}),
    ("log_sigmoid", "log(tanh(x))", {}),
    ("log_sigmoid", "log(sigmoid(x))", {"x": "vector:int8"}),  # the rewrite negates x
    ("log_sigmoid_neg", "log(sigmoid(abs(x)))", {}),
    ("log_one_minus_sigmoid", "log(add(1, sigmoid(x)))", {}),
    ("log_one_minus_sigmoid", "log(add(2, neg(sigmoid(x))))", {}),
    ("log1p_neg_sigmoid", "log1p(sigmoid(x))", {}),
    ("log_softmax", "log(log_softmax(x))", {"x": "matrix"}),
    ("log_softmax", "log(exp(x))", {"x": "matrix"}),
    ("logsumexp", "log(mean(exp(x), axis=1))", {"x": "matrix"}),
    ("logsumexp", "log(max(exp(x), axis=1))", {"x": "matrix"}),
    ("logsumexp", "log(sum(x, axis=1))", {"x": "matrix"}),
    ("logsumexp", "log(sum(exp(x)))", {"x": "vector:int32"}),
    ("softplus_minus_self", "add(neg(y), softplus(x))", {}),
    ("softplus_minus_self", "add(neg(x), softplus(x))", {"x": "vector:int16"}),
]


@pytest.mark.parametrize("name, text, types", NEAR_MISSES, ids=[f"{n}: {t}" for n, t, _ in NEAR_MISSES])
def test_rules_do_not_fire_on_near_misses(name, text, types):
    assert list(RULES_BY_NAME[name].forward(parse(text, types=types))) == []


def test_a_constant_array_is_not_dropped_from_a_sum():
    x = vector("x")
    graph = log(o.add(constant(np.ones(3)), x))
    assert list(stabilize.log1p.forward(graph)) == []


# -- the pipeline ----------------------------------------------------------------------------------

PIPELINE = ["canonicalize", "stabilize", "specialize"]

CANONICAL_INPUTS = [
    ("log(add(1, exp(x)))", "softplus(x)"),
    ("log(add(1, neg(sigmoid(x))))", "-softplus(x)"),
    ("add(-1, exp(x))", "expm1(x)"),
    ("log(add(1, x))", "log1p(x)"),
    ("log(sigmoid(x))", "-softplus(-x)"),
    ("log(softmax(x))", "log_softmax(x)"),
    ("log1p(exp(x))", "softplus(x)"),
]

USER_INPUTS = [
    ("log(1 + exp(x))", "softplus(x)"),
    ("log(1 - sigmoid(x))", "-softplus(x)"),
    ("exp(x) - 1", "expm1(x)"),
    ("log(1 + x)", "log1p(x)"),
]


@pytest.mark.parametrize("text, expected", CANONICAL_INPUTS + USER_INPUTS)
def test_the_default_pipeline_stabilizes(text, expected):
    x = vector("x")
    result = rewrite_graph(parse(text, types={"x": x}), include=PIPELINE)
    assert pprint(result) == pprint(parse(expected, types={"x": x}))


def test_the_pipeline_turns_log_sum_exp_into_the_logsumexp_op():
    x = matrix("x")
    result = rewrite_graph(parse("log(sum(exp(x), axis=1))", types={"x": x}), include=PIPELINE)
    assert pprint(result) == "logsumexp(x, axis=(1,))"
    values = np.array([[1000.0, 999.0], [-5.0, 3.0]])
    expected = [logsumexp_ref(row) for row in values]
    np.testing.assert_allclose(evaluate([x], result, [values]), expected, rtol=1e-14)


# -- generated reductions: the rules fire exactly on their patterns, keeping the values ---------------


@st.composite
def log_reductions(draw):
    """R(f(x)) or log(R(f(x))) for a reduction or softmax R and f in exp/log/neg/none, of several dtypes."""
    dtype = draw(st.sampled_from(["float64", "float32", "int32"]))
    ndim = draw(st.integers(1, 3))
    x = tensor("x", dtype=dtype, shape=(None,) * ndim)
    inner = draw(st.sampled_from([o.exp, o.exp, o.exp, o.log, o.neg, None]))
    body = x if inner is None else inner(x)
    axes = draw(st.none() | st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim, unique=True))
    axis = draw(st.integers(-ndim, ndim - 1))
    if axes is not None and len({a % ndim for a in axes}) != len(axes):
        axes = None
    outer = draw(
        st.sampled_from(
            [
                *(o.Sum(axes), o.Sum(axes), o.Mean(axes), o.Max(axes), o.LogSumExp(axes)),
                *(o.Softmax(axis), o.Softmax(axis), o.LogSoftmax(axis)),
            ]
        )
    )
    return log(outer(body)) if draw(st.integers(0, 3)) else outer(body)


def expected_rewrite(name: str, graph):
    """What `name` makes of `graph`, read off its structure: log(softmax(x)) -> log_softmax(x), and
    log(sum(exp(x))) -> logsumexp(x) over the same axes for float x; None for anything else."""
    if graph.owner is None or graph.owner.op != o.log:
        return None
    (reduced,) = graph.owner.inputs
    if reduced.owner is None:
        return None
    op, (inner,) = reduced.owner.op, reduced.owner.inputs
    if name == "log_softmax":
        return o.LogSoftmax(op.axis)(inner) if type(op) is o.Softmax else None
    exps = inner.owner is not None and inner.owner.op == o.exp
    if type(op) is not o.Sum or not exps or inner.owner.inputs[0].type.numpy_dtype.kind != "f":
        return None
    return o.LogSumExp(op.axis)(inner.owner.inputs[0])


@pytest.mark.parametrize("name", ["log_softmax", "logsumexp"])
@given(graph=log_reductions(), data=st.data())
def test_log_reductions_fuse_exactly_where_they_read_a_log_of_softmax_or_of_a_sum_of_exps(name, graph, data):
    rhs = assert_answers_keep_values(RULES_BY_NAME[name], graph, data)
    expected = expected_rewrite(name, graph)
    assert (rhs is None) == (expected is None), (pprint(graph), rhs)
    assert expected is None or same_expression(rhs, expected), (pprint(rhs), pprint(expected))


# -- integer inputs of log(exp(i)) and log1p(expm1(i)); exp(softplus(x)) ------------------------------


@pytest.mark.parametrize(
    "build, dtype, float_dtype",
    [
        (lambda i: log(o.exp(i)), "int64", "float64"),
        (lambda i: log(o.exp(i)), "int8", "float16"),
        (lambda i: log(o.exp(i)), "int16", "float32"),
        (lambda i: o.log1p(o.expm1(i)), "int64", "float64"),
        (lambda i: o.log1p(o.expm1(i)), "uint8", "float16"),
    ],
    ids=[
        "log(exp(int64))",
        "log(exp(int8))",
        "log(exp(int16))",
        "log1p(expm1(int64))",
        "log1p(expm1(uint8))",
    ],
)
def test_fast_run_turns_integer_inverses_into_a_cast_to_their_float_dtype(build, dtype, float_dtype):
    i = tensor("i", dtype, (None,))
    graph = build(i)
    assert graph.dtype == float_dtype
    rewritten = rewrite_graph(graph, include=["fast_run"], exclude=["fusion"], clone=True)
    assert pprint(rewritten) == pprint(o.Cast(float_dtype)(i))
    info = np.iinfo(dtype)
    values = np.array(sorted({0, 1, 5, 11, 100, int(info.max), int(info.min)}), dtype=dtype)
    (j,) = graph_inputs([rewritten])
    naive, result = evaluate([i], graph, [values]), evaluate([j], rewritten, [values])
    assert result.dtype == naive.dtype == float_dtype
    np.testing.assert_array_equal(result, values.astype(float_dtype))  # exact where exp overflows too
    finite = np.isfinite(naive)
    np.testing.assert_allclose(result[finite], naive[finite], rtol=4 * float(np.finfo(float_dtype).eps))
    assert not finite.all(), "the values should overflow exp on the left side"


def test_float_inverses_are_not_taken_for_integer_ones():
    assert list(RULES_BY_NAME["log_exp_integer"].forward(parse("log(exp(x))", types={"x": "vector"}))) == []
    assert (
        list(RULES_BY_NAME["log_exp_integer"].forward(parse("log(exp(x))", types={"x": "vector:bool"}))) == []
    )
    assert list(RULES_BY_NAME["log_exp"].forward(parse("log(exp(x))", types={"x": "vector:int64"}))) == []


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fast_run_turns_exp_of_softplus_into_one_plus_exp(dtype):
    x = vector("x", dtype=dtype)
    rewritten = rewrite_graph(o.exp(o.softplus(x)), include=["fast_run"], exclude=["fusion"], clone=True)
    assert pprint(rewritten) == pprint(parse("1 + exp(x)", types={"x": x}))
    values = np.array([-np.inf, -800.0, -30.0, -1.0, -0.0, 0.0, 2.0, 30.0, 80.0, np.inf, np.nan], dtype=dtype)
    (y,) = graph_inputs([rewritten])
    np.testing.assert_allclose(
        evaluate([y], rewritten, [values]),
        evaluate([x], o.exp(o.softplus(x)), [values]),
        rtol=1e-5,
        equal_nan=True,
    )

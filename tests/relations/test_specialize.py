"""Specialize rules: each rewrites its examples, computes what its left side computes (both ways, floats
and integers, infinities and NaN included), and never fires on near misses."""

from functools import cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from kanren import run, var

import relwrite as rw
from relwrite import constant, parse, pprint, scalar, vector
from relwrite.backends.numpy import numpy_function  # evaluates a graph as it is, without rewriting it
from relwrite.engine import KanrenRelationSub, rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.basic import graph_inputs
from relwrite.relations import Rule, catalogue, specialize
from relwrite.relations.pattern import to_graph
from relwrite.testing import input_values

RULES = [r for r in vars(specialize).values() if isinstance(r, Rule)]
RULES_BY_NAME = {r.name: r for r in catalogue() if "specialize" in r.phases}
EXAMPLES = [pytest.param(r.name, text, id=f"{r.name}: {text}") for r in RULES for text in r.examples]
SPECIAL_VALUES = np.array(
    [-np.inf, -1e300, -2.5, -1.0, -0.0, 0.0, 5e-324, 1e-310, 1e-300, 0.5, 1.0, 3.0, 1e300, np.inf, np.nan]
)


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
def example(name: str, text: str, types: tuple[tuple[str, str], ...] | None = None):
    """(inputs, left side, forward result, backward result) for `text` rewritten by rule `name`."""
    rule = RULES_BY_NAME[name]
    lhs = parse(text, types=rule.types if types is None else dict(types))
    rhs = forward(rule, lhs)
    assert rhs is not None, f"{name} does not rewrite {text}"
    back = backward(rule, rhs) if rule.backward else None
    inputs = sorted(graph_inputs([lhs]), key=lambda v: v.name)
    return inputs, lhs, rhs, back


def evaluate(inputs, graph, values):
    with np.errstate(all="ignore"):
        return numpy_function(inputs, graph)(*values)


EXP_OF_A_LOG = {
    "exp_log_nan_switch",
    "expm1_log_nan_switch",
    "exp_log1p_nan_switch",
    "expm1_log1p_nan_switch",
    "log1mexp_log_nan_switch",
}
"""Rules whose left side takes exp of a rounded log: the log's rounding (half an ulp of up to 745)
comes out as a relative error up to 745 times the epsilon in the left side's value."""


LOG_OF_A_ROUNDING = {"log_reciprocal", "log_sqrt"}
"""Rules whose left side takes the log of a rounded value: near x = 1 the rounding (half an ulp of about
1) is an absolute error of the log, which is near 0 there, so relative errors grow without bound."""


def assert_same(expected: np.ndarray, actual: np.ndarray, name: str = "") -> None:
    """Equal dtype and shape, and equal values up to a rounding (NaN where NaN, infinities included)."""
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    rtol = 1e-13 if name in EXP_OF_A_LOG else 1e-14
    atol = 1e-15 if name in LOG_OF_A_ROUNDING else 1e-320
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


def elements(rule: Rule) -> st.SearchStrategy[float]:
    """Finite floats of moderate size satisfying the rule's assumptions."""
    low, high, open_low, open_high = -1e3, 1e3, False, False
    for assumption in rule.assumptions:
        if assumption.op in (">", ">="):
            low, open_low = assumption.value, assumption.op == ">"
        elif assumption.op in ("<", "<="):
            high, open_high = assumption.value, assumption.op == "<"
    # log(1 / x) overflows at a subnormal x where -log(x) is finite: the rule gains there (shown below)
    subnormal = rule.name != "log_reciprocal"
    floats = st.floats(low, high, exclude_min=open_low, exclude_max=open_high, allow_subnormal=subnormal)
    excluded = [a.value for a in rule.assumptions if a.op == "!="]
    return floats.filter(lambda v: v not in excluded) if excluded else floats


# -- metadata --------------------------------------------------------------------------------------


def test_the_catalogue_holds_every_specialize_rule_once():
    names = [r.name for r in catalogue()]
    assert len(names) == len(set(names))
    assert {r.name for r in RULES} <= set(names)
    assert len(RULES) >= 12


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_rules_carry_complete_metadata(rule):
    assert rule.phase == "specialize"
    assert "fast_run" in rule.tags
    assert rule.tracks, "specialize rules name the ops they apply to"
    assert rule.examples and rule.doc
    assert rule.backward, rule.backward_note
    assert ("unsafe" in rule.tags) == bool(rule.assumptions)


# -- examples, both directions, numerically --------------------------------------------------------


@pytest.mark.parametrize("name, text", EXAMPLES)
def test_examples_rewrite_and_come_back(name, text):
    inputs, lhs, rhs, back = example(name, text)
    assert rhs.type == lhs.type
    assert pprint(rhs) != pprint(lhs)
    assert back is not None, f"{name} run backward on {pprint(rhs)} gives nothing"
    assert pprint(back) == pprint(lhs)


@pytest.mark.parametrize("name, text", EXAMPLES)
def test_kanren_runs_give_few_answers_the_first_being_the_rewrite(name, text):
    inputs, lhs, rhs, back = example(name, text)
    rule, q = RULES_BY_NAME[name], var()
    answers = run(0, q, rule(lhs, q))
    assert 1 <= len(answers) <= 3
    assert pprint(to_graph(answers[0], like=lhs)) == pprint(rhs)
    assert 1 <= len(run(0, q, rule(q, rhs))) <= 3


@pytest.mark.parametrize("name, text", EXAMPLES)
@given(data=st.data())
def test_both_sides_agree_on_the_domain(name, text, data):
    inputs, lhs, rhs, back = example(name, text)
    values = data.draw(input_values(inputs, elements=elements(RULES_BY_NAME[name])))
    expected = evaluate(inputs, lhs, values)
    assert_same(expected, evaluate(inputs, rhs, values), name)
    assert_same(expected, evaluate(inputs, back, values), name)


SAFE_ONE_INPUT = [
    pytest.param(r.name, text, id=f"{r.name}: {text}")
    for r in RULES
    if "unsafe" not in r.tags
    for text in r.examples
    if len(graph_inputs([parse(text, types=r.types)])) == 1
]


@pytest.mark.parametrize("name, text", SAFE_ONE_INPUT)
def test_both_sides_agree_on_infinities_nan_and_signed_zeros(name, text):
    inputs, lhs, rhs, back = example(name, text)
    expected = evaluate(inputs, lhs, [SPECIAL_VALUES])
    assert_same(expected, evaluate(inputs, rhs, [SPECIAL_VALUES]), name)
    assert_same(expected, evaluate(inputs, back, [SPECIAL_VALUES]), name)


def test_pow_minus_half_differs_outside_its_assumption_only_at_minus_zero_and_minus_inf():
    inputs, lhs, rhs, back = example("pow_minus_half", "x ** -0.5")
    left, right = evaluate(inputs, lhs, [SPECIAL_VALUES]), evaluate(inputs, rhs, [SPECIAL_VALUES])
    differs = ~np.isclose(left, right, equal_nan=True)
    assert set(SPECIAL_VALUES[differs].tolist()) == {-np.inf, 0.0}  # -0.0 == 0.0: the sign is lost in a set
    assert np.signbit(SPECIAL_VALUES[differs]).all()


INTEGER_CASES = [
    ("pow_two", "x ** 2", "vector:int8"),
    ("pow_two", "x ** 2", "vector:uint16"),
    ("pow_one", "x ** 1", "vector:int16"),
    ("pow_zero", "x ** 0", "vector:int32"),
    ("mul_self", "mul(x, x)", "vector:int8"),
    ("sqr_neg", "sqr(neg(x))", "vector:uint8"),
    ("sqr_neg", "sqr(neg(x))", "vector:int8"),
    ("mul_minus_one", "mul(-1, x)", "vector:int8"),
    ("mul_minus_one", "mul(-1, x, y)", "vector:int64"),
    ("mul_one", "mul(1, x, y)", "vector:int16"),
    ("add_zero", "add(0, x)", "vector:uint8"),
    ("pow_odd", "x ** 15", "vector:int8"),
    ("pow_even", "x ** 16", "vector:uint16"),
    ("add_neg_to_sub", "add(x, neg(y))", "vector:int8"),
]


@pytest.mark.parametrize(
    "name, text, spec", INTEGER_CASES, ids=[f"{n}: {t} {s}" for n, t, s in INTEGER_CASES]
)
@given(data=st.data())
def test_integer_results_are_identical_wrap_around_included(name, text, spec, data):
    inputs, lhs, rhs, back = example(name, text, (("x", spec), ("y", spec.replace("vector", "scalar"))))
    values = [data.draw(hnp.arrays(v.type.numpy_dtype, (3,) * v.ndim)) for v in inputs]
    expected = evaluate(inputs, lhs, values)
    for graph in (rhs, back):
        actual = evaluate(inputs, graph, values)
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)


def test_pow_zero_keeps_the_shape_of_the_base():
    x = vector("x")
    rhs = forward(specialize.pow_zero, x**0)
    np.testing.assert_array_equal(evaluate([x], rhs, [np.array([np.nan, 0.0, -np.inf])]), [1.0, 1.0, 1.0])


def test_div_by_constant_folds_to_a_product_in_the_pipeline_and_float32_stays_float32():
    x = vector("x", dtype="float32")
    result = rewrite_graph(parse("x / 4.0", types={"x": x}), include=["specialize"])
    assert pprint(result) == "(0.25 * x)"
    assert result.dtype == "float32"


# -- near misses -----------------------------------------------------------------------------------

NEAR_MISSES = [
    ("pow_two", "x ** 3", {}),
    ("pow_two", "x ** 2.5", {}),
    ("pow_minus_two", "x ** -2", {"x": "vector:int64"}),  # numpy refuses negative powers of integers
    ("pow_half", "x ** 0.5", {"x": "vector:int32"}),  # a float64 power, a float32 sqrt
    ("pow_half", "x ** 0.5", {"x": "vector:float16"}),  # NumPy's float16 power is C99's: +inf at -inf
    ("pow_minus_half", "x ** 0.5", {}),
    ("pow_minus_one", "x ** -1", {"x": "vector:int64"}),
    ("pow_minus_one", "x ** 1", {}),
    ("pow_one", "x ** 1.5", {}),
    ("pow_one", "1 ** x", {}),
    ("pow_zero", "x ** 1e-300", {}),
    ("mul_self", "mul(x, y)", {}),
    ("mul_self", "mul(x, x, x)", {}),
    ("sqr_neg", "sqr(abs(x))", {}),
    ("mul_minus_one", "mul(-2, x)", {}),
    ("mul_minus_one", "mul(-1)", {}),
    ("mul_minus_one", "mul(x, y)", {}),
    ("mul_one", "mul(2, x)", {}),
    ("add_zero", "add(1, x, y)", {}),
    ("one_over", "true_div(2, x)", {}),
    ("one_over", "true_div(1, x)", {"x": "vector:int64"}),
    ("div_by_constant", "x / y", {}),
    ("div_by_constant", "x / 0.0", {}),
    ("div_by_constant", "x / 1e-320", {}),  # 1 / c overflows
    ("div_by_constant", "x / 1e308", {}),  # 1 / c is subnormal
]


@pytest.mark.parametrize("name, text, types", NEAR_MISSES, ids=[f"{n}: {t} {ts}" for n, t, ts in NEAR_MISSES])
def test_rules_do_not_fire_on_near_misses(name, text, types):
    assert list(RULES_BY_NAME[name].forward(parse(text, types=types))) == []


def test_mul_minus_one_does_not_regroup_an_int8_product_a_float_widens():
    x, y = vector("x", dtype="int8"), vector("y")
    graph = o.mul(constant(np.int8(-1)), x, y)  # -1 * x wraps around in int8 before y widens it
    assert list(specialize.mul_minus_one.forward(graph)) == []
    result = rewrite_graph(graph, include=["canonicalize", "specialize"])
    values = (np.array([-128], dtype=np.int8), np.array([1.0]))
    np.testing.assert_array_equal(numpy_function([x, y], result)(*values), [-128.0])


def test_div_by_constant_leaves_an_integer_divisor_alone():
    x = vector("x", dtype="int64")
    assert list(specialize.div_by_constant.forward(o.true_div(x, constant(np.int64(4))))) == []


@pytest.mark.parametrize("name", ["add_zero", "add_zeros_like", "mul_one", "mul_ones_like", "pow_zero"])
def test_constant_arrays_that_could_broadcast_are_not_dropped(name):
    x = scalar("x")
    zeros, ones = constant(np.zeros(3)), constant(np.ones(3))
    graph = {
        "add_zero": o.add(zeros, x, x),
        "add_zeros_like": o.add(zeros, x, x),
        "mul_one": o.mul(ones, x, x),
        "mul_ones_like": o.mul(ones, x, x),
        "pow_zero": o.pow(x, zeros),
    }[name]
    assert list(RULES_BY_NAME[name].forward(graph)) == []


def test_neutral_rules_serve_canonicalize_and_specialize():
    """One rule in two phases: the zeros and ones constant folding leaves in specialize go too."""
    for name in ("add_zero", "mul_one", "add_zeros_like", "mul_ones_like"):
        assert {"canonicalize", "specialize"} <= set(RULES_BY_NAME[name].phases)


# -- the pipeline ----------------------------------------------------------------------------------

PIPELINE = ["canonicalize", "stabilize", "specialize"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x ** 2", "sqr(x)"),
        ("x / 4.0", "0.25 * x"),
        ("x ** -1", "reciprocal(x)"),
        ("x ** 0.5", "sqrt(x)"),
        ("x ** -2", "reciprocal(sqr(x))"),
        ("x * x", "sqr(x)"),
        ("mul(-1, x, y)", "-(x * y)"),
        ("x ** -0.5", "x ** -0.5"),  # unsafe: left alone unless asked for
    ],
)
def test_the_default_pipeline_specializes(text, expected):
    x, y = vector("x"), vector("y")
    result = rewrite_graph(parse(text, types={"x": x, "y": y}), include=PIPELINE)
    assert pprint(result) == pprint(parse(expected, types={"x": x, "y": y}))


def test_the_pipeline_with_unsafe_rules_takes_pow_minus_half():
    x = vector("x")
    result = rewrite_graph(parse("x ** -0.5", types={"x": x}), include=[*PIPELINE, "unsafe"])
    assert pprint(result) == pprint(o.reciprocal(o.sqrt(x)))


def test_the_pipeline_turns_pow_zero_into_ones_of_the_shape_of_x():
    x = vector("x")
    result = rewrite_graph(parse("x ** 0", types={"x": x}), include=PIPELINE)
    assert pprint(result) == pprint(o.fill(x, 1.0))


# -- inverse functions: fast_run keeps the left side's NaN outside the domain --------------------------

DOMAIN_POINTS = np.array([-np.inf, -2.0, -1.0, -0.5, -0.0, 0.0, 1e-30, 0.25, 1.0, 3.0, 1e30, np.inf, np.nan])

INVERSES = [
    ("exp(log(x))", lambda x: o.exp(o.log(x)), "switch(x >= 0, x, nan)"),
    (
        "expm1(log(x))",
        lambda x: o.expm1(o.log(x)),
        "switch(x >= 0, x - 1, nan)",
    ),  # add_negative_constant_to_sub
    ("exp(log1p(x))", lambda x: o.exp(o.log1p(x)), "switch(x >= -1, 1 + x, nan)"),
    ("expm1(log1p(x))", lambda x: o.expm1(o.log1p(x)), "switch(x >= -1, x, nan)"),
    ("sqr(sqrt(x))", lambda x: o.sqr(o.sqrt(x)), "switch(x >= 0, x, nan)"),
    ("sqrt(x) ** 2", lambda x: o.sqrt(x) ** 2, "switch(x >= 0, x, nan)"),
    ("log1mexp(log(x))", lambda x: o.log1mexp(o.log(x)), "switch(x >= 0, log1p(-x), nan)"),
    ("log(sqrt(x))", lambda x: o.log(o.sqrt(x)), "0.5 * log(x)"),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("text, build, expected", INVERSES, ids=[case[0] for case in INVERSES])
def test_fast_run_specializes_inverse_functions_keeping_their_values(text, build, expected, dtype):
    x = vector("x", dtype=dtype)
    graph = build(x)
    assert pprint(rewrite_graph(graph, include=["fast_run"], exclude=["fusion"], clone=True)) == pprint(
        parse(expected, types={"x": x})
    )
    points = DOMAIN_POINTS.astype(dtype)
    compiled = rw.function([x], graph, mode="fast_run")(points)
    naive = evaluate([x], graph, [points])  # the graph as written, not rewritten
    assert compiled.dtype == naive.dtype == dtype
    np.testing.assert_array_equal(
        np.isnan(compiled), np.isnan(naive)
    )  # NaN outside the domain, and only there
    rtol = 1e-13 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(compiled, naive, rtol=rtol, atol=1e-37, equal_nan=True)


def test_log_reciprocal_is_opt_in_and_differs_only_at_minus_zero():
    x = vector("x")
    graph = o.log(o.reciprocal(x))
    assert pprint(rewrite_graph(graph, include=["fast_run"], exclude=["fusion"], clone=True)) == pprint(graph)
    rewritten = rewrite_graph(graph, include=["fast_run", "unsafe"], exclude=["fusion"], clone=True)
    assert pprint(rewritten) == pprint(-o.log(x))
    points = np.array([-2.0, -0.0, 0.0, 0.5, 3.0, np.inf, np.nan])
    (y,) = graph_inputs([rewritten])
    left, right = evaluate([x], graph, [points]), evaluate([y], rewritten, [points])
    differs = ~((left == right) | (np.isnan(left) & np.isnan(right)))
    assert points[differs].tolist() == [-0.0] and np.isnan(left[differs]).all() and right[differs] == np.inf
    tiny = np.array([5e-324])  # 1 / x overflows: the left side is inf, the right side finite
    assert evaluate([x], graph, [tiny])[0] == np.inf
    assert evaluate([y], rewritten, [tiny])[0] == pytest.approx(744.44007192138126)


# -- integer powers by repeated squaring, and subtraction, in the compiled pipeline ----------------


def compiled_ops(f) -> list[type]:
    """The op classes a compiled function runs, those inside fused loops included."""
    found = []
    for node in f.fgraph.apply_nodes:
        found.append(type(node.op))
        if isinstance(node.op, o.Composite):
            found += [type(inner.op) for inner in node.op.nodes]
    return found


@pytest.mark.parametrize("n, squares, products", [(3, 1, 1), (4, 2, 0), (15, 3, 3), (16, 4, 0), (-15, 3, 3)])
def test_integer_powers_become_chains_of_squares_and_products_in_fast_run(n, squares, products):
    x = vector("x")
    f = rw.function([x], x**n, mode="fast_run")
    ran = compiled_ops(f)
    assert o.Pow not in ran
    assert (ran.count(o.Sqr), ran.count(o.Mul), ran.count(o.Reciprocal)) == (squares, products, int(n < 0))
    values = np.array([-2.5, -1.0, 0.5, 1.0, 1.7, 3.0, np.inf, np.nan])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(f(values), values**n, rtol=1e-14, equal_nan=True)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64"])
def test_integer_powers_of_integers_wrap_around_as_numpy_does(dtype):
    x = vector("x", dtype=dtype)
    f = rw.function([x], parse("x ** 15", types={"x": x}), mode="fast_run")
    assert o.Pow not in compiled_ops(f)
    values = np.array([0, 1, 2, 3, 7, 100], dtype=dtype)
    np.testing.assert_array_equal(f(values), values**15)


@pytest.mark.parametrize(
    "name, text, types",
    [
        ("pow_odd", "x ** 513", {}),
        ("pow_even", "x ** 514", {}),
        ("pow_odd", "x ** 3.5", {}),
        ("pow_even", "x ** 2", {}),
        ("pow_odd", "x ** 1", {}),
        ("pow_negative_integer", "x ** -2", {}),
        ("pow_negative_integer", "x ** -3", {"x": "vector:int32"}),
        ("add_neg_to_sub", "add(x, neg(y))", {"x": "vector", "y": "vector:int8"}),
        ("add_negative_constant_to_sub", "add(2.0, x)", {}),
        ("add_neg_to_sub", "add(x, neg(y), z)", {"y": "vector", "z": "vector"}),
        ("add_negative_constant_to_sub", "add(-2.0, x, y)", {"y": "vector"}),
        ("add_negative_constant_to_sub", "add(-2, x)", {"x": "vector:int64"}),
    ],
)
def test_power_and_subtraction_rules_leave_near_misses_alone(name, text, types):
    assert list(RULES_BY_NAME[name].forward(parse(text, types={"x": "vector", **types}))) == []


def test_a_power_array_of_exponents_is_left_alone():
    x = vector("x")
    assert list(specialize.pow_odd.forward(o.pow(x, constant(np.array([3.0, 3.0]))))) == []


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x - y", "x - y"),
        ("neg(y) + x", "x - y"),
        ("x - 2.5", "x - 2.5"),
        ("1 - x", "1.0 - x"),
        ("x - y - 1.0", "add(-1.0, x, neg(y))"),  # a sum of three terms keeps its negation, as in PyTensor
    ],
)
def test_subtraction_comes_back_at_specialize_and_stays_add_neg_in_canonical_form(text, expected):
    x, y = vector("x"), vector("y")
    canonical = rewrite_graph(parse(text, types={"x": x, "y": y}), include=["canonicalize"])
    assert canonical.owner.op == o.add
    result = rewrite_graph(parse(text, types={"x": x, "y": y}), include=PIPELINE)
    assert pprint(result) == pprint(parse(expected, types={"x": x, "y": y}))
    graph = parse(text, types={"x": x, "y": y})
    f = rw.function(sorted(graph_inputs([graph]), key=lambda v: v.name), graph, mode="fast_run")
    subtracts, ran = result.owner.op == o.sub, compiled_ops(f)
    assert (o.Sub in ran, o.Neg in ran) == (subtracts, not subtracts)

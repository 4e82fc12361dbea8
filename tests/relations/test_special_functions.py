"""Special-function stabilizations: each rewrites its examples and comes back from its right side, is
sound in both directions in float32 too, and is accurate (against mpmath) exactly where its left side
cancels, underflows or overflows; and the default pipeline reaches them from what users write
(PyTensor issue 1476: log(1 - exp(x)) after canonicalize)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import run, var

import relwrite as rw
from relwrite.backends.c import c_available
from relwrite.backends.numpy.function import numpy_function
from relwrite.engine import rewrite_graph
from relwrite.engine.db import mode_query
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable, graph_inputs, tensor
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.relations import Rule, catalogue, special_functions
from relwrite.relations.docs import rewrite_example_graphs
from relwrite.relations.pattern import to_graph
from relwrite.testing import ac_text, check_relation

RULES = [r for r in vars(special_functions).values() if isinstance(r, Rule)]
BY_NAME = {r.name: r for r in RULES}
by_rule = pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
EXAMPLES = [pytest.param(r, text, id=f"{r.name}: {text}") for r in RULES for text in r.examples]
LINKERS = ["numpy", *(["c"] if c_available() else [])]


def evaluate(graph: Variable, **values: np.ndarray) -> np.ndarray:
    inputs = sorted((v for v in graph_inputs([graph]) if not isinstance(v, Constant)), key=lambda v: v.name)
    with np.errstate(all="ignore"):
        return numpy_function(inputs, graph)(
            *(np.full((1,) * v.ndim, values[v.name], dtype=v.dtype) for v in inputs)
        )


# -- the module's rules ----------------------------------------------------------------------------


def test_the_module_holds_catalogue_stabilizations_that_run_by_default():
    names = {r.name for r in catalogue()}
    assert len(RULES) >= 12 and all(r.name in names for r in RULES)
    for r in RULES:
        assert r.phase == "stabilize" and "fast_run" in r.tags and r.doc and r.examples
        assert r.semantics == ("unsafe" if r.name == "exp_times_exp" else "stabilizes")


@pytest.mark.parametrize("rule, text", EXAMPLES)
def test_examples_rewrite_keep_their_type_and_come_back(rule, text):
    before, after = rewrite_example_graphs(rule, text)
    assert after.type == before.type and pprint(after) != pprint(before)
    assert rule.backward
    q = var()
    lefts = [to_graph(found, like=after) for found in run(4, q, rule(q, after))]
    assert ac_text(before) in [ac_text(left) for left in lefts], [pprint(left) for left in lefts]


@by_rule
def test_sound_in_both_directions_in_float32_unless_typed_otherwise(rule):
    types = {name: spec if ":" in spec else f"{spec}:float32" for name, spec in rule.types.items()}
    report = check_relation(rule, types=types, max_examples=25, seed=3)
    assert report.directions == ("forward", "backward")


# -- accuracy where the left side fails ------------------------------------------------------------


def exact(fn, *args: float) -> float:
    with mpmath.workprec(300):
        return float(fn(*(mpmath.mpf(a) for a in args)))


def mp_log1mexp(x):
    return mpmath.log(-mpmath.expm1(x))


def mp_logdiffexp(x, y):
    return x + mpmath.log(-mpmath.expm1(y - x))


ACCURACY = [
    # rule, example, inputs, exact value (mpmath)
    ("log_one_minus_exp", "log(add(1, neg(exp(x))))", {"x": -1e-20}, exact(mp_log1mexp, -1e-20)),
    ("log_one_minus_exp", "log(add(1, neg(exp(x))))", {"x": -50.0}, exact(mp_log1mexp, -50.0)),
    ("log1p_neg_exp", "log1p(neg(exp(x)))", {"x": -1e-20}, exact(mp_log1mexp, -1e-20)),
    ("log_neg_expm1", "log(neg(expm1(x)))", {"x": -40.0}, exact(mp_log1mexp, -40.0)),
    ("one_minus_erf", "add(1, neg(erf(x)))", {"x": 10.0}, exact(mpmath.erfc, 10.0)),
    ("one_minus_erfc", "add(1, neg(erfc(x)))", {"x": 1e-20}, exact(mpmath.erf, 1e-20)),
    ("one_minus_erf_times_minus_one", "add(1, mul(-1, erf(x)))", {"x": 10.0}, exact(mpmath.erfc, 10.0)),
    ("one_minus_erfc_times_minus_one", "add(1, mul(-1, erfc(x)))", {"x": 1e-20}, exact(mpmath.erf, 1e-20)),
    ("two_minus_erfc_times_minus_one", "add(2, mul(-1, erfc(x)))", {"x": -10.0}, exact(mpmath.erfc, 10.0)),
    ("erf_minus_one", "add(-1, erf(x))", {"x": 10.0}, -exact(mpmath.erfc, 10.0)),
    ("erfc_neg_minus_one", "add(-1, erfc(neg(x)))", {"x": 1e-20}, exact(mpmath.erf, 1e-20)),
    ("erfc_minus_one", "add(-1, erfc(x))", {"x": 1e-20}, -exact(mpmath.erf, 1e-20)),
    ("minus_one_minus_erf", "add(-1, neg(erf(x)))", {"x": -10.0}, -exact(mpmath.erfc, 10.0)),
    (
        "minus_one_minus_erf_times_minus_one",
        "add(-1, mul(-1, erf(x)))",
        {"x": -10.0},
        -exact(mpmath.erfc, 10.0),
    ),
    (
        "log_one_minus_erf_times_minus_one",
        "log(add(1, mul(-1, erf(x))))",
        {"x": 10.0},
        exact(lambda x: mpmath.log(mpmath.erfc(x)), 10.0),
    ),
    ("log1mexp_log1mexp", "log1mexp(log1mexp(x))", {"x": -800.0}, -800.0),
    (
        "logdiffexp",
        "log(add(exp(x), neg(exp(y))))",
        {"x": 1000.0, "y": 999.0},
        exact(mp_logdiffexp, 1000.0, 999.0),
    ),
    (
        "logdiffexp",
        "log(add(exp(x), neg(exp(y))))",
        {"x": -800.0, "y": -801.0},
        exact(mp_logdiffexp, -800.0, -801.0),
    ),
    (
        "logdiffexp_times_minus_one",
        "log(add(exp(x), mul(-1, exp(y))))",
        {"x": 1000.0, "y": 999.0},
        exact(mp_logdiffexp, 1000.0, 999.0),
    ),
    ("one_plus_erf", "add(1, erf(x))", {"x": -10.0}, exact(mpmath.erfc, 10.0)),
    (
        "log_one_minus_exp_times_minus_one",
        "log(add(1, mul(-1, exp(x))))",
        {"x": -1e-20},
        exact(mp_log1mexp, -1e-20),
    ),
    ("log1p_neg_exp_times_minus_one", "log1p(mul(-1, exp(x)))", {"x": -1e-20}, exact(mp_log1mexp, -1e-20)),
    ("log_neg_expm1_times_minus_one", "log(mul(-1, expm1(x)))", {"x": -40.0}, exact(mp_log1mexp, -40.0)),
    (
        "one_minus_sigmoid_times_minus_one",
        "add(1, mul(-1, sigmoid(x)))",
        {"x": 40.0},
        exact(lambda x: 1 / (1 + mpmath.exp(x)), 40.0),
    ),
    ("two_minus_erfc", "add(2, neg(erfc(x)))", {"x": -10.0}, exact(mpmath.erfc, 10.0)),
    (
        "log_one_minus_erf",
        "log(add(1, neg(erf(x))))",
        {"x": 10.0},
        exact(lambda x: mpmath.log(mpmath.erfc(x)), 10.0),
    ),
    ("log_erfc", "log(erfc(x))", {"x": 30.0}, exact(lambda x: mpmath.log(mpmath.erfc(x)), 30.0)),
    ("log_erfc", "log(erfc(x))", {"x": 1e100}, -1e200),
    ("log_erfc_float32", "log(erfc(x))", {"x": 12.0}, exact(lambda x: mpmath.log(mpmath.erfc(x)), 12.0)),
    (
        "one_minus_sigmoid",
        "add(1, neg(sigmoid(x)))",
        {"x": 40.0},
        exact(lambda x: 1 / (1 + mpmath.exp(x)), 40.0),
    ),
    (
        "sigmoid_minus_one",
        "add(-1, sigmoid(x))",
        {"x": 40.0},
        -exact(lambda x: 1 / (1 + mpmath.exp(x)), 40.0),
    ),
    ("log1p_expm1", "log1p(expm1(x))", {"x": 1000.0}, 1000.0),
    ("exp_times_exp", "mul(exp(a), exp(b))", {"a": 800.0, "b": -750.0}, exact(mpmath.exp, 50.0)),
]


@pytest.mark.parametrize("name, text, values, expected", ACCURACY, ids=[f"{a[0]}: {a[2]}" for a in ACCURACY])
def test_the_right_side_is_accurate_where_the_left_side_is_not(name, text, values, expected):
    before, after = rewrite_example_graphs(BY_NAME[name], text)
    left, right = float(evaluate(before, **values)[0]), float(evaluate(after, **values)[0])
    assert right == pytest.approx(expected, rel=2 * float(np.finfo(after.dtype).eps), abs=0)
    assert left != pytest.approx(expected, rel=1e-6, abs=0)


def test_every_rule_of_the_module_is_shown_accurate():
    assert {a[0] for a in ACCURACY} == set(BY_NAME)


# -- log(erfc(x)) --------------------------------------------------------------------------------------


LOG_ERFC = [("float64", 26.0), ("float32", 9.0)]
"""Each float dtype log(erfc(x)) is stabilized in, with where its asymptotic series takes over."""


def log_erfc_graph(dtype: str = "float64") -> tuple[Variable, Variable, Variable]:
    """x, log(erfc(x)) and that graph through fast_run."""
    x = tensor("x", dtype, (None,))
    return x, o.log(o.erfc(x)), _rewritten(o.log(o.erfc(x)))


def _rewritten(graph: Variable) -> Variable:
    """`graph` through fast_run, in place (its inputs stay the inputs)."""
    return rewrite_graph(graph, include=["fast_run"])


def exact_log_erfc(value: float) -> float:
    with mpmath.workprec(200):
        return float(mpmath.log(mpmath.erfc(mpmath.mpf(value))))


@pytest.mark.parametrize("dtype, threshold", LOG_ERFC)
@given(data=st.data())
def test_log_erfc_is_the_plain_formula_below_the_threshold_and_accurate_beyond(dtype, threshold, data):
    value = data.draw(
        st.floats(
            -30, 1e150 if dtype == "float64" else float(np.float32(1e18)), width=np.dtype(dtype).itemsize * 8
        )
    )
    x, plain, rewritten = log_erfc_graph(dtype)
    with np.errstate(divide="ignore"):
        got = numpy_function([x], rewritten)(np.array([value], dtype=dtype))[0]
        before = numpy_function([x], plain)(np.array([value], dtype=dtype))[0]
    if value < threshold:
        assert got == before
    else:
        assert got == pytest.approx(exact_log_erfc(value), rel=3 * float(np.finfo(dtype).eps), abs=0)


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("dtype, threshold", LOG_ERFC)
def test_log_erfc_at_the_edges_on_every_backend(dtype, threshold, linker):
    x = tensor("x", dtype, (None,))
    f = rw.function([x], o.log(o.erfc(x)), mode=rw.Mode(linker, mode_query("fast_run")))
    values = np.array([-np.inf, -0.0, threshold - 0.001, threshold, 1e5], dtype=dtype)
    with np.errstate(all="raise"):  # neither branch makes an inf or NaN the switch then drops
        got = f(values)
    assert got.dtype == dtype and got[:2].tolist() == [np.log(np.array(2.0, dtype=dtype)), 0.0]
    expected = [exact_log_erfc(float(v)) for v in values[2:]]
    np.testing.assert_allclose(got[2:], expected, rtol=4 * float(np.finfo(dtype).eps))
    with np.errstate(all="ignore"):
        got = f(np.array([np.inf, np.nan, 1e300], dtype=dtype))
    assert got[0] == got[2] == -np.inf and np.isnan(got[1])


def test_log_erfc_does_not_apply_to_its_own_result():
    """Its small branch reads erfc(minimum(x, 26)): an argument known to stay below the series' start."""
    rule = BY_NAME["log_erfc"]
    _, _, rewritten = log_erfc_graph()
    assert pprint(_rewritten(rewritten)) == pprint(rewritten)
    assert list(rule.forward(parse("log(erfc(minimum(x, 26.0)))", types={"x": "vector"}))) == []
    assert list(rule.forward(parse("log(erfc(minimum(x, 3.0)))", types={"x": "vector"}))) == []
    assert list(rule.forward(parse("log(erfc(minimum(x, 30.0)))", types={"x": "vector"})))


@pytest.mark.parametrize("dtype", ["int64", "float16"])
def test_log_erfc_leaves_other_dtypes_alone(dtype):
    graph = parse("log(erfc(x))", types={"x": f"vector:{dtype}"})
    assert not [r for r in (BY_NAME["log_erfc"], BY_NAME["log_erfc_float32"]) if list(r.forward(graph))]


# -- what the default pipeline does with what users write ---------------------------------------------

PIPELINE = [
    ("log(1 - exp(x))", lambda x: o.log(1 - o.exp(x)), "log1mexp(x)"),  # PyTensor issue 1476
    ("log1p(-exp(x))", lambda x: o.log1p(-o.exp(x)), "log1mexp(x)"),
    ("log(-expm1(x))", lambda x: o.log(-o.expm1(x)), "log1mexp(x)"),
    ("1 - erf(x)", lambda x: 1 - o.erf(x), "erfc(x)"),
    ("1 - erfc(x)", lambda x: 1 - o.erfc(x), "erf(x)"),
    ("2 - erfc(x)", lambda x: 2 - o.erfc(x), "erfc(-x)"),
    ("1 + erf(x)", lambda x: 1 + o.erf(x), "erfc(-x)"),
    ("log1p(expm1(x))", lambda x: o.log1p(o.expm1(x)), "x"),
    ("(-1.0 * erf(x)) + 1", lambda x: (-1.0 * o.erf(x)) + 1, "erfc(x)"),
    ("1 + (-1.0 * erfc(x))", lambda x: 1 + (-1.0 * o.erfc(x)), "erf(x)"),
    ("erf(x) - 1", lambda x: o.erf(x) - 1, "-erfc(x)"),
    ("-1 + erfc(-x)", lambda x: -1 + o.erfc(-x), "erf(x)"),
    ("erfc(x) - 1", lambda x: o.erfc(x) - 1, "-erf(x)"),
    ("-erf(x) - 1", lambda x: -o.erf(x) - 1, "-erfc(-x)"),
    ("-1.0 * erf(x) - 1", lambda x: -1.0 * o.erf(x) - 1, "-erfc(-x)"),
    ("log(1 - exp(x)) as -1.0 * exp(x)", lambda x: o.log(1 + -1.0 * o.exp(x)), "log1mexp(x)"),
    ("log1p(-1.0 * exp(x))", lambda x: o.log1p(-1.0 * o.exp(x)), "log1mexp(x)"),
    ("log(-1.0 * expm1(x))", lambda x: o.log(-1.0 * o.expm1(x)), "log1mexp(x)"),
    ("1 + -1.0 * sigmoid(x)", lambda x: 1 + -1.0 * o.sigmoid(x), "sigmoid(-x)"),
    (
        "log(exp(x) - exp(2 * x))",
        lambda x: o.log(o.exp(x) - o.exp(2 * x)),
        # specialize's add_neg_to_sub writes the difference back
        "switch(((2.0 * x) == -inf), x, (x + log1mexp(((2.0 * x) - x))))",
    ),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("text, build, expected", PIPELINE, ids=[p[0] for p in PIPELINE])
def test_fast_run_reaches_the_stable_form(text, build, expected, dtype):
    x = tensor("x", dtype, (None,))
    rewritten = rewrite_graph(build(x), include=["fast_run"], exclude=["fusion"], clone=True)
    assert pprint(rewritten) == expected
    assert rewritten.dtype == dtype


@pytest.mark.parametrize("linker", LINKERS)
def test_log_one_minus_exp_is_accurate_once_compiled(linker):
    x = tensor("x", "float64", (None,))
    f = rw.function([x], o.log(1 - o.exp(x)), mode=rw.Mode(linker, mode_query("fast_run")))
    values = [-1e-20, -1e-5, -0.5, -0.7, -50.0]
    np.testing.assert_allclose(f(np.array(values)), [exact(mp_log1mexp, v) for v in values], rtol=4e-16)


@pytest.mark.parametrize("negate", [lambda e: -e, lambda e: -1.0 * e], ids=["-exp(y)", "-1.0 * exp(y)"])
def test_log_of_a_difference_of_exps_is_finite_once_compiled(negate):
    x, y = tensor("x", "float64", (None,)), tensor("y", "float64", (None,))
    f = rw.function([x, y], o.log(o.exp(x) + negate(o.exp(y))), mode="fast_run")
    xs = np.array([1000.0, -800.0, 2.0, 1.0, 3.0, 5.0, -np.inf, np.inf, 1e300, np.inf])
    ys = np.array([999.0, -801.0, 2.0, 2.0, -np.inf, np.nan, -np.inf, 4.0, 1e300, np.inf])
    expected = [exact(mp_logdiffexp, a, b) for a, b in zip(xs[:2], ys[:2])]
    got = f(xs, ys)
    np.testing.assert_allclose(got[:2], expected, rtol=4e-16)  # the left side: NaN and -inf there
    assert got[2] == -np.inf and np.isnan(got[3]) and got[4] == 3.0 and np.isnan(got[5])
    # log(0 - 0) at x = y = -inf, as the left side (y - x is NaN there: fuzzer seed 27, graph 662); the
    # limit where both exps overflow; inf - inf, NaN, at x = y = inf
    assert got[6] == -np.inf and got[7] == np.inf and got[8] == -np.inf and np.isnan(got[9])


def test_log1mexp_of_log1mexp_is_x_on_its_domain_and_nan_beyond_once_compiled():
    x = tensor("x", "float64", (None,))
    f = rw.function([x], o.log1mexp(o.log1mexp(x)), mode="fast_run")
    values = np.array([-800.0, -40.0, -1.0, -0.0, 0.5, np.inf, -np.inf, np.nan])
    got = f(values)
    np.testing.assert_allclose(got[:4], values[:4], rtol=1e-15)
    assert np.isnan(got[4:6]).all() and got[6] == -np.inf and np.isnan(got[7])

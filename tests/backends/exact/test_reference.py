"""The exact reference: NumPy's values to a few ulps on ordinary inputs, its stated policy at the edges,
graphs at points, and the same values for the accuracy cost and the fuzzer's arbiter."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite.backends import exact
from relwrite.backends.numpy.function import numpy_function
from relwrite.engine.explore.costs import Accuracy
from relwrite.graph import ops
from relwrite.graph.basic import constant, graph_inputs, matrix, scalar, tensor, vector
from relwrite.testing.fuzz.walks import _wide_walk

ELEMENTWISE = sorted(
    {
        type(v): v for v in vars(ops).values() if isinstance(v, ops.Elemwise) and not isinstance(v, ops.Fill)
    }.values(),
    key=lambda op: type(op).__name__,
)
"""Every elementwise op of the language with no parameters (Fill and Cast are structural: tested apart)."""

ULPS = 4
"""How far (in units in the last place) NumPy's float64 values may be from the exact value rounded."""


def _arity(op: ops.Elemwise) -> int:
    return 2 if op.nin is None else op.nin


def _reference(op: ops.Elemwise, *args: float | int, bits: int = 128) -> float:
    """`op` at `args` by the reference, rounded to float64."""
    with exact.precision(bits):
        value = exact.elementwise(type(op))(*(exact.context.mpf(a) for a in args))
    return float(value) if isinstance(value, bool) or not exact.context.isnan(value) else math.nan


def test_every_elementwise_op_has_a_reference():
    assert ELEMENTWISE and all(exact.elementwise(type(op)) is not None for op in ELEMENTWISE)
    assert all(exact.has_reference(op) for op in ELEMENTWISE)
    assert not exact.has_reference(ops.Assert("x"))


_NUMPY: dict[ops.Elemwise, object] = {}


def _numpy(op: ops.Elemwise, *args: float) -> float:
    """`op` at `args` by the NumPy backend, in float64 (the condition of a switch as a boolean)."""
    if op not in _NUMPY:
        variables = [scalar(f"x{k}") for k in range(len(args))]
        if isinstance(op, ops.Switch):
            variables[0] = scalar("c", dtype="bool")
        _NUMPY[op] = numpy_function(variables, op(*variables))
    with np.errstate(all="ignore"):
        return float(_NUMPY[op](*args))


ORDINARY = st.one_of(
    st.floats(-4.0, 4.0), st.floats(-1e4, 1e4), st.floats(-1e-6, 1e-6, allow_subnormal=False)
).map(float)
"""Ordinary finite inputs: near zero, of moderate size, and small."""


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(ELEMENTWISE), data=st.data())
def test_the_reference_rounds_to_numpys_float64_values_within_a_few_ulps(op, data):
    """On ordinary finite inputs every op's exact value, rounded, is NumPy's float64 result to a few ulps,
    with NaN (outside the domain) and infinities (overflow) at the same places."""
    args = [data.draw(ORDINARY, label=f"x{k}") for k in range(_arity(op))]
    if isinstance(op, ops.Switch):
        args[0] = data.draw(st.booleans(), label="condition")
    want, got = _numpy(op, *args), _reference(op, *args)
    if math.isnan(want) or math.isinf(want):
        assert got == want or (math.isnan(got) and math.isnan(want)), (args, got, want)
    else:
        assert abs(got - want) <= ULPS * np.spacing(abs(want)), (args, got, want)


INF, NAN = math.inf, math.nan
HUGE = 2**1200
"""Past every float and the argument bound (2**1100): only an exact intermediate is this large."""

EDGES = [
    # division: a pole at an unsigned zero (+0), 0 / 0 and NaN / 0 are NaN
    (ops.true_div, (1.0, 0.0), INF),
    (ops.true_div, (-1.0, 0.0), -INF),
    (ops.true_div, (1.0, -0.0), INF),  # NumPy: -inf (the reference has no -0)
    (ops.true_div, (0.0, 0.0), NAN),
    (ops.true_div, (NAN, 0.0), NAN),
    (ops.true_div, (INF, INF), NAN),
    (ops.reciprocal, (0.0,), INF),
    # pow: C99's at zeros and infinities, NaN for a negative base to a non-integer
    (ops.pow, (0.0, -1.0), INF),
    (ops.pow, (0.0, -0.5), INF),
    (ops.pow, (0.0, 2.0), 0.0),
    (ops.pow, (-8.0, 1 / 3), NAN),
    (ops.pow, (-2.0, 3.0), -8.0),
    (ops.pow, (NAN, 0.0), 1.0),
    (ops.pow, (1.0, NAN), 1.0),
    (ops.pow, (NAN, 1.0), NAN),
    (ops.pow, (-INF, 0.5), INF),  # C99 (NumPy's array power takes the square root: NaN)
    (ops.pow, (-INF, 3.0), -INF),
    (ops.pow, (-INF, -3.0), 0.0),
    (ops.pow, (-0.5, INF), 0.0),
    (ops.pow, (-2.0, INF), INF),
    (ops.pow, (-1.0, -INF), 1.0),
    (ops.pow, (0.5, -INF), INF),
    (ops.pow, (3.0, HUGE), INF),  # the result's binary exponent passes 2**1100: its limit
    (ops.pow, (0.5, HUGE), 0.0),
    (ops.pow, (-3.0, HUGE), INF),
    # logarithms: poles give -inf, outside the domain NaN
    (ops.log, (0.0,), -INF),
    (ops.log, (-1.0,), NAN),
    (ops.log, (INF,), INF),
    (ops.log, (-INF,), NAN),
    (ops.log1p, (-1.0,), -INF),
    (ops.log1p, (-2.0,), NAN),
    (ops.log1mexp, (0.0,), -INF),
    (ops.log1mexp, (1e-300,), NAN),
    (ops.log1mexp, (-700.0,), -9.85967654375977e-305),  # not 0: 1 - exp(-700) cancels at any precision
    (ops.log1mexp, (HUGE,), NAN),
    # roots and inverse functions
    (ops.sqrt, (-1.0,), NAN),
    (ops.sqrt, (INF,), INF),
    (ops.cbrt, (-8.0,), -2.0),
    (ops.cbrt, (-INF,), -INF),
    (ops.asin, (2.0,), NAN),
    (ops.acos, (-2.0,), NAN),
    (ops.atan, (-INF,), -math.pi / 2),
    # atan2: C99's at infinities (mpmath's is NaN at two), NaN with a NaN, an unsigned zero is +0
    (ops.atan2, (INF, INF), math.pi / 4),
    (ops.atan2, (INF, -INF), 3 * math.pi / 4),
    (ops.atan2, (-INF, INF), -math.pi / 4),
    (ops.atan2, (-INF, -INF), -3 * math.pi / 4),
    (ops.atan2, (1.0, -INF), math.pi),
    (ops.atan2, (-1.0, -INF), -math.pi),
    (ops.atan2, (0.0, -1.0), math.pi),
    (ops.atan2, (-0.0, -1.0), math.pi),  # NumPy: -pi (the reference has no -0)
    (ops.atan2, (0.0, 0.0), 0.0),
    (ops.atan2, (INF, NAN), NAN),
    (ops.atan2, (NAN, INF), NAN),
    # hypot: infinite with an infinity, NaN included (C99)
    (ops.hypot, (INF, NAN), INF),
    (ops.hypot, (NAN, -INF), INF),
    (ops.hypot, (NAN, 1.0), NAN),
    (ops.hypot, (1e300, 1e300), 1e300 * math.sqrt(2)),
    # NumPy's maximum and minimum propagate NaN (not C99's fmax)
    (ops.maximum, (NAN, 1.0), NAN),
    (ops.minimum, (1.0, NAN), NAN),
    (ops.maximum, (-INF, 1.0), 1.0),
    # arithmetic outside the domain
    (ops.sub, (INF, INF), NAN),
    (ops.mul, (0.0, INF), NAN),
    (ops.fma, (INF, 0.0, 1.0), NAN),
    (ops.fma, (0.1, 10.0, -1.0), float(Fraction(0.1) * 10 - 1)),  # the product exact, one rounding
    # limits at infinities
    (ops.exp, (-INF,), 0.0),
    (ops.expm1, (-INF,), -1.0),
    (ops.tanh, (INF,), 1.0),
    (ops.sigmoid, (-INF,), 0.0),
    (ops.softplus, (-INF,), 0.0),
    (ops.erf, (-INF,), -1.0),
    (ops.erfc, (-INF,), 2.0),
    (ops.erfc, (1e300,), 0.0),
    (ops.sin, (INF,), NAN),
    # past the argument bound: the limit, or NaN for a periodic function
    (ops.exp, (HUGE,), INF),
    (ops.exp, (-HUGE,), 0.0),
    (ops.expm1, (-HUGE,), -1.0),
    (ops.sinh, (-HUGE,), -INF),
    (ops.cosh, (-HUGE,), INF),
    (ops.tanh, (-HUGE,), -1.0),
    (ops.sigmoid, (-HUGE,), 0.0),
    (ops.softplus, (-HUGE,), 0.0),
    (ops.erf, (HUGE,), 1.0),
    (ops.erfc, (-HUGE,), 2.0),
    (ops.sin, (HUGE,), NAN),
    (ops.cos, (-HUGE,), NAN),
    (ops.tan, (HUGE,), NAN),
]


@pytest.mark.parametrize(
    ("op", "args", "expected"), EDGES, ids=lambda v: str(v) if isinstance(v, ops.Op) else None
)
def test_the_edge_policy(op, args, expected):
    got = _reference(op, *args)
    assert got == expected or (math.isnan(got) and math.isnan(expected)), (got, expected)


def test_a_zero_approached_from_below_rounds_to_minus_zero():
    """log1mexp at -inf (and past the bound) is 0 approached from below: -0.0 once rounded, C99's
    log1p(-0.0), so 1 / log1mexp(-inf) is -inf, as NumPy's."""
    for x in (-INF, -HUGE):
        value = _reference(ops.log1mexp, x)
        assert value == 0.0 and math.copysign(1.0, value) == -1.0
    with np.errstate(divide="ignore"):
        assert _numpy(ops.reciprocal, _reference(ops.log1mexp, -INF)) == -INF


def test_a_power_near_one_to_a_huge_exponent_is_computed_not_taken_to_its_limit():
    """(1 + 2**-2000) ** 2**1099 is exp(2**-901 ln 2), about 1: the bound is on the result's exponent."""
    with exact.precision(4096):
        x = 1 + exact.context.ldexp(1, -2000)
        value = exact.elementwise(ops.Pow)(x, exact.context.ldexp(1, 1099))
    assert float(value) == 1.0


def test_softplus_of_a_huge_argument_is_the_argument():
    with exact.precision(128):
        x = exact.context.mpf(HUGE)
        assert exact.elementwise(ops.Softplus)(x) == x


def test_erfc_past_its_asymptote_bound_is_mpmaths_to_its_precision():
    """Beyond 2**64 erfc is its two-term asymptote: off by under 2**-254 of itself (mpmath's own erfc
    overflows past 2**510; at 2**70 both still run)."""
    for scale in (65, 70, 200):
        with exact.precision(128):
            x = exact.context.ldexp(1, scale)
            ours = exact.elementwise(ops.Erfc)(x)
            theirs = exact.context.erfc(x)
            assert abs(ours / theirs - 1) < exact.context.ldexp(1, -120)


@pytest.mark.parametrize(
    ("dtype", "value", "expected"),
    [
        ("float32", 0.1, 0.1),  # identity: the value stays exact
        ("int32", 2.7, 2.0),
        ("int32", -2.7, -2.0),
        ("int32", 1e20, NAN),  # out of range: no value
        ("int64", NAN, NAN),
        ("int8", INF, NAN),
        ("bool", 0.0, False),
        ("bool", NAN, True),
    ],
)
def test_casts(dtype, value, expected):
    with exact.precision(128):
        (got,) = exact.node_value(ops.Cast(dtype), [exact.array(np.array([value]))])
    if isinstance(expected, bool):
        assert got is expected
    else:
        assert float(got) == expected or (math.isnan(float(got)) and math.isnan(expected))


def test_reductions_propagate_nan_and_a_mean_of_nothing_is_nan():
    with exact.precision(128):
        x = exact.array(np.array([[1.0, NAN], [3.0, 2.0]]))
        assert [float(v) for v in exact.node_value(ops.Max(axis=1), [x])][1] == 3.0
        assert math.isnan(float(exact.node_value(ops.Max(axis=1), [x])[0]))
        assert math.isnan(float(exact.node_value(ops.Min(axis=None), [x])))
        assert float(exact.node_value(ops.Mean(axis=None), [x[1]])) == 2.5
        assert math.isnan(float(exact.node_value(ops.Mean(axis=None), [exact.array(np.zeros(0))])))
        assert float(exact.node_value(ops.Prod(axis=None), [x[1]])) == 6.0


def test_precision_is_the_references_own():
    """`precision` sets the reference's bits and leaves mpmath's global context alone."""
    before = mpmath.mp.prec
    tiny = 2.0**-200
    with exact.precision(256):
        assert mpmath.mp.prec == before
        assert exact.context.mpf(1) + exact.context.mpf(tiny) - 1 == exact.context.mpf(tiny)
    with exact.precision(128):
        assert exact.context.mpf(1) + exact.context.mpf(tiny) - 1 == 0


def _fraction(value: object) -> Fraction:
    mantissa, exponent = value.man_exp  # of |value|
    return (-1 if value < 0 else 1) * Fraction(mantissa) * Fraction(2) ** exponent


def test_a_graph_at_points_broadcasts_each_point_as_the_graph_says():
    """x * y + 1 with x a vector and y a scalar: once over the stacked points, each point's y with every
    element of its x; exactly (the sums need no rounding at 128 bits)."""
    x, y = vector("x", shape=(3,)), scalar("y")
    expr = x * y + 1
    xs, ys = np.array([[1.0, 2.0, 3.0], [0.5, 1e-30, -2.0]]), np.array([2.0, 1e30])
    env: dict = {}
    (value,) = exact.evaluate([x, y], [expr], [xs, ys], 128, env=env)
    assert value.shape == (2, 3)
    expected = [[Fraction(a) * Fraction(b) + 1 for a in row] for row, b in zip(xs, ys)]
    assert [[_fraction(v) for v in row] for row in value] == expected
    assert env[x].shape == (2, 3) and env[expr].shape == (2, 3)


def test_a_graph_with_non_elementwise_ops_is_evaluated_point_by_point():
    a, x = matrix("A", shape=(2, 2)), vector("x", shape=(2,))
    expr = ops.dot(a, x) * constant(2.0)
    points = [
        np.array([[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]]),
        np.array([[1.0, 1.0], [5.0, 7.0]]),
    ]
    (value,) = exact.evaluate([a, x], [expr], points, 128)
    assert [[float(v) for v in row] for row in value] == [[6.0, 14.0], [14.0, 10.0]]


@pytest.mark.parametrize("op", [ops.softmax, ops.log_softmax])
def test_softmax_of_an_axis_of_length_zero_is_empty(op):
    """Nothing to normalize: an empty array, as the backends give (its maximum raised ValueError)."""
    from relwrite.graph.basic import tensor

    x = tensor("x", dtype="float64", shape=(2, 0))
    (value,) = exact.evaluate([x], [op(x, axis=1)], [np.zeros((3, 2, 0))], 128)
    assert value.shape == (3, 2, 0)


def test_a_graph_without_a_reference_or_with_missing_inputs_is_refused():
    x, y = scalar("x"), scalar("y")
    points = [np.array([1.0])]
    with pytest.raises(exact.NoReferenceError, match="Argmax"):
        exact.evaluate([x], [ops.Argmax(axis=None)(x)], points, 128)
    with pytest.raises(ValueError, match="y"):
        exact.evaluate([x], [x + y], points, 128)
    with pytest.raises(ValueError, match="1 inputs"):
        exact.evaluate([x], [x + 1], [np.array([1.0]), np.array([2.0])], 128)


SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -8.0, 700.0, -700.0, 1e300, -1e300, INF, -INF, NAN])


@pytest.mark.parametrize(
    "build",
    [
        lambda x, y: ops.pow(x, y) / y,
        lambda x, y: ops.atan2(y, x) + ops.hypot(x, y),
        lambda x, y: ops.log1mexp(-x * y) - ops.erfc(x * y),
        lambda x, y: ops.maximum(ops.log(x), ops.exp(ops.exp(y))),
        lambda x, y: ops.sin(x * y * y) + ops.tanh(x * y * y),
    ],
)
def test_the_accuracy_cost_and_the_fuzzers_arbiter_see_the_same_values(build):
    """One evaluator: the accuracy cost's reference and the fuzzer's mpmath walk agree at every pair of
    special values (signed zeros, poles, huge products, infinities, NaN)."""
    x, y = scalar("x"), scalar("y")
    expr = build(x, y)
    xs, ys = (a.ravel() for a in np.meshgrid(SPECIALS, SPECIALS))
    accuracy = Accuracy(expr, samples=8, ranges={"x": (0.5, 2.0), "y": (0.5, 2.0)})
    order = [xs if v.name == "x" else ys for v in accuracy.inputs]
    (cost,) = accuracy.exact([expr], order)
    walked = [
        float(_wide_walk([x, y], [expr], [np.float64(a), np.float64(b)], 128)[0].item())
        for a, b in zip(xs, ys)
    ]
    np.testing.assert_array_equal(cost, np.array(walked))


@settings(max_examples=40, deadline=None)
@given(
    st.integers(65, 1000),
    st.integers(1, 2**53 - 1),
    st.sampled_from([1, -1]),
    st.sampled_from([(1, -70), (3, -2), (-3, 0)]),  # 1 - 2**-70, 0.75, -3 as (m, e): m * 2**e or 1 - 2**e
)
def test_exp_and_integral_powers_of_huge_integers_are_mpmaths_values_reduced(bits, mantissa, sign, base):
    # every float past 2**53 is an integer, which mpmath raises e (or x) to by repeated squaring, one
    # multiplication per bit; the reference reduces the argument instead and must give the same value
    from relwrite.backends.exact import reference

    context = reference.context
    x = context.mpf(sign * mantissa) * context.mpf(2) ** (bits - 53)
    m, e = base
    base = 1 - context.ldexp(1, e) if e < -10 else context.ldexp(m, e)
    with context.workprec(200):
        got, expected = reference._exp_reduced(x), context.exp(x)
        assert abs(got - expected) <= abs(expected) * context.ldexp(1, -190)
        y = context.mpf(mantissa) * 2**65 + 1  # an odd integer past 2**64: the sign survives
        power, direct = reference._power(base, y), context.power(base, y)
        assert abs(power - direct) <= abs(direct) * context.ldexp(1, -180)


INDEXINGS = {
    "x[1:][0]": lambda x, i: x[1:][0],
    "x[::-1]": lambda x, i: x[::-1],
    "x[i]": lambda x, i: x[i],
    "inc_subtensor(x[1], 2)": lambda x, i: ops.inc_subtensor(x[1], 2.0),
    "set_subtensor(x[1:], x[:-1])": lambda x, i: ops.set_subtensor(x[1:], x[:-1]),
    "inc_subtensor(x[i], x[i])": lambda x, i: ops.inc_subtensor(x[i], x[i]),  # repeated indices add up
}


@pytest.mark.parametrize("name", INDEXINGS)
@given(
    values=st.lists(st.floats(-1e6, 1e6), min_size=3, max_size=5),
    picks=st.lists(st.integers(0, 2), min_size=1, max_size=4),
)
def test_indexing_and_writes_have_exact_values_numpy_rounds_to(name, values, picks):
    x, i = vector("x"), tensor("i", "int64", (None,))
    graph = INDEXINGS[name](x, i)
    inputs = [x, i] if i in graph_inputs([graph]) else [x]
    point = [np.array(values), np.array(picks, dtype=np.int64)][: len(inputs)]
    (value,) = exact.evaluate(inputs, [graph], [p[np.newaxis] for p in point], 200)
    rounded = np.array([float(v) for v in np.ravel(value[0])]).reshape(np.shape(value[0]))
    np.testing.assert_allclose(rounded, numpy_function(inputs, graph)(*point), rtol=1e-15)


def test_a_write_of_a_0d_value_stores_the_number_not_an_array():
    """set_subtensor(x[1, -1], i) of a 0-d i stored the 0-d object array itself in the element, which no
    later op could read (the fuzzer's exact walk failed on it: seed 30, graph 2388)."""
    x, i = matrix("x"), tensor("i", "int64", ())
    for graph in (ops.set_subtensor(x[1, -1], i), ops.inc_subtensor(x[1, -1], i)):
        (value,) = _wide_walk([x, i], [graph], [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array(5)], 128)
        assert all(isinstance(v, exact.context.mpf) for v in value.ravel())
        assert [float(v) for v in value.ravel()] == [
            1.0,
            2.0,
            3.0,
            5.0 if graph.owner.op.set_instead_of_inc else 9.0,
        ]


def test_log_softmax_of_a_dominant_maximum_is_below_zero_at_it():
    """log_softmax([0, -800]) at 0 is -log1p(e**-800), not log(1 + e**-800) = log(1) = 0: -0.0 once
    rounded, so 1 / log_softmax is -inf there (fuzzer seed 31, graph 2023)."""
    x = tensor("x", dtype="float64", shape=(2,))
    (value,) = exact.evaluate([x], [ops.LogSoftmax(0)(x)], [np.array([[0.0, -800.0]])], 128)
    top = float(value[0][0])
    assert top == 0.0 and math.copysign(1.0, top) == -1.0
    assert float(value[0][1]) == -800.0

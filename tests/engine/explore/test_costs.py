"""Costs: flops from shapes, bits of error against an mpmath reference, the Pareto front."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite import matrix, parse, scalar, tensor, vector
from relwrite.engine.explore.costs import (
    Accuracy,
    AccuracyError,
    Flops,
    bits_of_error,
    node_flops,
    pareto_front,
)
from relwrite.engine.explore.precondition import PreconditionError, parse_precondition
from relwrite.graph import ops as o
from relwrite.graph.basic import Variable, constant, graph_inputs
from relwrite.graph.types import TensorType


def test_flops_read_static_shapes():
    a, x = TensorType("float64", (30, 40)), TensorType("float64", (40,))
    assert node_flops(o.dot, TensorType("float64", (30,)), [a, x]) == 2 * 30 * 40
    assert node_flops(o.exp, x, [x]) == 16 * 40
    assert node_flops(o.add, x, [x, x, x]) == 2 * 40
    assert node_flops(o.fma, x, [x, x, x]) == 2 * 40  # a product and a sum, as mul then add
    assert node_flops(o.DimShuffle(2, (1, 0)), TensorType("float64", (40, 30)), [a]) == 0
    assert Flops().node(o.neg, x, [x], [5.0]) > 5.0 + 40


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_bits_of_error_count_ulps(value):
    v = np.float64(value)
    assert bits_of_error(v, v) == 0
    with np.errstate(over="ignore"):
        up = np.nextafter(v, np.inf)
    assert bits_of_error(up, v) == 1  # one ulp: log2(1 + 1); past the largest float, infinity
    assert 0 < bits_of_error(np.float64(np.inf), v) <= 64
    assert bits_of_error(np.float64(np.nan), v) == 64


def test_bits_of_error_of_non_finite_values_follow_herbies_ordinals():
    """Infinities sit next to the largest floats (Herbie's ordinals); NaN against a number is maximal."""
    big = np.finfo(np.float64).max
    assert bits_of_error(np.float64(np.inf), np.float64(np.inf)) == 0
    assert bits_of_error(np.float64(np.inf), np.float64(big)) == 1
    assert bits_of_error(np.float64(-np.inf), np.float64(-big)) == 1
    assert 63.99 < bits_of_error(np.float64(-np.inf), np.float64(np.inf)) <= 64
    assert bits_of_error(np.float64(np.inf), np.float64(1.0)) == 62  # 2**62 floats from 1 to inf
    assert bits_of_error(np.float32(np.nan), np.float32(1.0)) == 32
    assert bits_of_error(np.float32(1.0), np.float32(np.nan)) == 32
    assert bits_of_error(np.float64(np.nan), np.float64(np.nan)) == 0
    assert bits_of_error(np.float64(-0.0), np.float64(0.0)) == 0


def test_the_reference_is_exact_where_floats_cancel():
    accuracy = Accuracy(parse("log(1 + x)"))
    x = accuracy.inputs[0]
    tiny = np.abs(accuracy.points[0]) < 1e-20
    assert tiny.any()  # bit patterns put many points near zero
    assert np.array_equal(accuracy.reference[tiny], np.log1p(accuracy.points[0][tiny]))
    assert accuracy(o.log1p(x)) < 0.5
    assert accuracy(parse("log(1 + x)", types={"x": x})) > 10


@pytest.mark.parametrize(
    ("plain", "stable", "types"),
    [
        ("log(1 + exp(x))", "softplus(x)", {}),
        ("exp(x) - 1", "expm1(x)", {}),
        ("log(sigmoid(x))", "-softplus(-x)", {}),
        ("log(softmax(x))", "log_softmax(x)", {"x": "vector"}),
    ],
)
def test_stable_forms_have_fewer_bits_of_error(plain, stable, types):
    accuracy = Accuracy(parse(plain, types=types))
    x = accuracy.inputs[0]
    assert accuracy(parse(stable, types={"x": x})) + 5 < accuracy(parse(plain, types={"x": x}))


def test_points_where_the_input_is_not_real_are_dropped():
    accuracy = Accuracy(parse("sqrt(x)"), samples=200)
    assert (accuracy.points[0] >= 0).all()
    assert 50 < len(accuracy.points[0]) < 150


def test_ranges_bound_the_samples():
    accuracy = Accuracy(parse("exp(x)"), ranges={"x": (-1.0, 2.0)}, samples=100)
    assert accuracy.points[0].min() >= -1 and accuracy.points[0].max() <= 2
    with pytest.raises(AccuracyError, match="name no input"):
        Accuracy(parse("exp(x)"), ranges={"y": (0, 1)})


def test_a_precondition_bounds_and_filters_the_samples():
    x, y = scalar("x"), scalar("y")
    accuracy = Accuracy(o.log(y - x), ranges="0 < x < y and y <= 10", samples=200)
    by_name = {v.name: p for v, p in zip(accuracy.inputs, accuracy.points)}
    assert len(by_name["x"]) == 200
    assert (by_name["x"] > 0).all() and (by_name["x"] < by_name["y"]).all() and (by_name["y"] <= 10).all()
    exact = Accuracy(
        o.log(y - x), ranges=parse_precondition("0 < x < y and y <= 10", ["x", "y"]), samples=200
    )
    assert all((a == b).all() for a, b in zip(accuracy.points, exact.points))  # text or object: one draw


def test_a_precondition_that_holds_nowhere_or_reads_no_input_is_refused():
    with pytest.raises(AccuracyError, match="holds nowhere"):
        Accuracy(parse("log(x)"), ranges="x > 1 and x < 0")
    with pytest.raises(PreconditionError, match="'y', not among the inputs x"):
        Accuracy(parse("log(x)"), ranges="y > 1")


def test_a_rare_precondition_gives_the_points_it_finds():
    accuracy = Accuracy(parse("log(x)"), ranges="x != 0 and abs(x - 1) < 1e-300", samples=50)
    assert 0 < len(accuracy.points[0]) <= 50


def test_a_relation_rare_among_bit_patterns_is_found_drawing_uniformly_over_the_box():
    # floats in [0, 6] lie mostly near 0: x + y >= 11 holds at about one bit pattern in a million, and
    # at 1.4% of the square
    accuracy = Accuracy(parse("x + y"), ranges="0 <= x <= 6 and 0 <= y <= 6 and x + y >= 11", samples=256)
    x, y = (p for _, p in sorted(zip([v.name for v in accuracy.inputs], accuracy.points)))
    assert len(x) > 0 and (x + y >= 11).all() and (x <= 6).all() and (y <= 6).all()
    common = Accuracy(parse("x + y"), ranges="0 <= x <= 6 and 0 <= y <= 6", samples=256)
    assert np.mean(np.concatenate(common.points) < 1e-3) > 0.5  # a common one keeps to bit patterns


def test_float32_forms_are_measured_in_their_precision():
    x = scalar("x", "float32")
    accuracy = Accuracy(o.log1p(x))
    assert accuracy.reference.dtype == np.float32
    assert accuracy(o.log1p(x)) < 0.5


def test_accuracy_needs_floats_and_real_points():
    with pytest.raises(AccuracyError, match="floating"):
        Accuracy(scalar("n", "int64") + 1)
    with pytest.raises(AccuracyError, match="not a real number"):
        Accuracy(o.log(o.neg(o.abs(scalar("x"))) - 1.0))


def test_non_elementwise_forms_are_measured_point_by_point():
    a, x = matrix("A", shape=(2, 3)), vector("x", shape=(3,))
    accuracy = Accuracy(o.dot(a, x), samples=20, ranges={"A": (-1, 1), "x": (-1, 1)})
    assert accuracy(o.dot(a, x)) < 1
    assert accuracy.values(o.dot(a, x)).shape == (20, 2)


def test_pareto_front_keeps_the_undominated():
    points = [(10.0, 5.0), (1.0, 50.0), (12.0, 6.0), (0.5, 60.0), (1.0, 40.0)]
    assert pareto_front(points) == [0, 4, 3]


@pytest.mark.parametrize(
    "build",
    [
        lambda: o.erf(scalar("x")),
        lambda: o.erfc(scalar("x")),
        lambda: o.log(o.erfc(scalar("x"))),  # erfc of huge x: mpmath's series overflows, not the asymptote
        lambda: o.log1mexp(scalar("x")),
        lambda: o.tan(scalar("x")),
        lambda: o.asin(scalar("x")),
        lambda: o.acos(scalar("x")),
        lambda: o.atan(scalar("x")),
        lambda: o.sinh(scalar("x")),
        lambda: o.cosh(scalar("x")),
        lambda: o.cbrt(scalar("x")),
        lambda: o.hypot(scalar("x"), scalar("y")),
        lambda: o.atan2(scalar("y"), scalar("x")),
        lambda: o.fma(scalar("x"), scalar("y"), scalar("z")),
        lambda: o.max(vector("x")),  # a 0-d reference of a graph measured point by point
        lambda: o.sum(vector("x")),
        lambda: o.logsumexp(vector("x")),
    ],
)
def test_ops_beyond_the_arithmetic_have_references(build):
    expr = build()
    accuracy = Accuracy(expr, samples=32)
    assert np.isfinite(accuracy(expr))
    assert accuracy.reference.shape == (len(accuracy.points[0]),)


ELEMENTARY_RANGES = [
    (o.tan, {"x": (-1e3, 1e3)}),
    (o.tan, {"x": (1.5707, 1.5709)}),  # about the pole at pi/2
    (o.asin, {"x": (-1, 1)}),
    (o.acos, {"x": (-1, 1)}),
    (o.atan, {"x": (-1e6, 1e6)}),
    (o.sinh, {"x": (-700, 700)}),
    (o.sinh, {"x": (-1e-3, 1e-3)}),
    (o.cosh, {"x": (-700, 700)}),
    (o.cbrt, {"x": (-1e300, 1e300)}),
    (o.cbrt, {"x": (-8, -1e-300)}),
    (o.hypot, {"x": (-1e300, 1e300), "y": (-1e-300, 1e300)}),
    (o.atan2, {"x": (-10, 10), "y": (-1e-3, 1e-3)}),
]


@pytest.mark.parametrize(("op", "ranges"), ELEMENTARY_RANGES)
def test_elementary_references_are_within_an_ulp_of_numpy(op, ranges):
    """NumPy's libm functions are within an ulp of the exact value: so is the reference (cbrt's real
    root of a negative, the right branch of atan2, hypot without overflow)."""
    expr = op(*(scalar(name) for name in ranges))
    accuracy = Accuracy(expr, samples=200, ranges=ranges)
    assert accuracy.reference.shape == (200,)  # every point real and finite
    assert np.max(bits_of_error(accuracy.values(expr), accuracy.reference)) <= 1
    assert accuracy(expr) < 0.5


def test_elementary_references_outside_the_domain_are_not_real():
    with pytest.raises(AccuracyError, match="not a real number"):
        Accuracy(o.asin(scalar("x")), ranges={"x": (1.5, 3)})
    with pytest.raises(AccuracyError, match="not a real number"):
        Accuracy(o.acos(scalar("x")), ranges={"x": (-3, -1.5)})


def test_hypot_is_accurate_where_the_plain_formula_overflows():
    x, y = scalar("x"), scalar("y")
    accuracy = Accuracy(o.hypot(x, y), samples=64, ranges={"x": (1e200, 1e300), "y": (1e200, 1e300)})
    assert accuracy(o.hypot(x, y)) < 0.5
    assert accuracy(o.sqrt(x * x + y * y)) > 50


def test_fma_is_exact_where_the_plain_formula_cancels():
    """The reference rounds x * y + z once: fma is within half an ulp of it everywhere (0 bits), and
    x * y + z, rounded twice, loses everything where z is -(x * y) rounded."""
    x, y, z = scalar("x"), scalar("y"), scalar("z")
    fused = o.fma(x, y, z)
    accuracy = Accuracy(fused, samples=200, ranges={"x": (1, 2), "y": (1, 2), "z": (-4, -1)})
    assert accuracy(fused) == 0
    near = [np.array([0.1, 1 / 3, 1.7]), np.array([10.0, 3.0, 1.9])]
    cancelling = accuracy.at([*near, -(near[0] * near[1])])
    assert cancelling.reference.shape == (3,) and cancelling(fused) == 0
    assert cancelling(x * y + z) > 40
    with np.errstate(all="ignore"):
        assert np.array_equal(cancelling.values(fused), cancelling.reference)


def test_the_blas_ops_and_alloc_have_references():
    a, b = matrix("A", shape=(2, 3)), matrix("B", shape=(3, 2))
    m, x, y, s = matrix("M", shape=(2, 2)), vector("x", shape=(3,)), vector("y", shape=(2,)), scalar("s")
    for expr in [
        o.gemv(y, 2.0, a, x, 0.5),
        o.gemm(m, 2.0, a, b, 0.5),
        o.ger(a, 2.0, y, x),
        o.dot22(a, b),
        o.alloc(s, 2, 2),
    ]:
        names = {v.name for v in graph_inputs([expr])}
        accuracy = Accuracy(expr, samples=16, ranges=dict.fromkeys(names, (-1.0, 1.0)))
        assert accuracy(expr) < 1, expr


@pytest.mark.parametrize(
    ("text", "types", "exact"),
    [
        ("x + 0.5", {"x": "vector"}, lambda p: p["x"] + 0.5),
        ("x - y", {"x": "vector", "y": "scalar"}, lambda p: p["x"] - p["y"][:, None]),
        ("y - x", {"x": "(3,)", "y": "scalar"}, lambda p: p["y"][:, None] - p["x"]),
        ("A + x", {"A": "matrix", "x": "vector"}, lambda p: p["A"] + p["x"][:, None, :]),
        ("A - y", {"A": "(2,3)", "y": "scalar"}, lambda p: p["A"] - p["y"][:, None, None]),
        ("x + 0.5", {"x": "(3,):float32"}, lambda p: p["x"] + np.float32(0.5)),
    ],
)
def test_sums_and_differences_of_vectors_and_matrices_broadcast_point_by_point(text, types, exact):
    """Each point's operands broadcast as the graph says (a scalar with every element of a vector); a sum
    of two floats is correctly rounded, so the reference is the float sum exactly."""
    expr = parse(text, types=types)
    accuracy = Accuracy(expr, samples=64)
    points = {v.name: p for v, p in zip(accuracy.inputs, accuracy.points)}
    with np.errstate(all="ignore"):
        assert np.array_equal(accuracy.reference, exact(points))
    assert accuracy(expr) == 0.0
    assert accuracy.reference.shape[0] == len(accuracy.points[0]) > 0


def test_a_sum_measured_point_by_point_broadcasts_as_well():
    x, y = vector("x", shape=(3,)), scalar("y")
    expr = o.sum(x - y)  # a reduction: measured one point at a time
    accuracy = Accuracy(expr, samples=32, ranges={"x": (-1.0, 1.0), "y": (-1.0, 1.0)})
    assert 0 <= accuracy(expr) < 1 and 0 <= accuracy(o.sum(x) - 3.0 * y) < 2


def test_nested_exponentials_drop_only_the_points_whose_exact_value_overflows():
    """exp(exp(x)) overflows a float past x = 6.56, and has no exact value here past x = 1100 ln 2 (the
    scale of exp(x) passes `MAX_ARGUMENT_SCALE`): such points are dropped (Herbie's policy), the rest
    measured."""
    x = scalar("x")
    accuracy = Accuracy(o.exp(o.exp(x)))
    assert np.isfinite(accuracy.reference).all() and accuracy.points[0].max() < 6.6
    assert 0 < len(accuracy.points[0]) < 256
    assert accuracy(o.exp(o.exp(x))) < 1
    inner = Accuracy(o.log(o.log(o.exp(o.exp(x)))), samples=64, ranges={"x": (0.5, 2000.0)})  # x itself
    assert np.array_equal(inner.reference, inner.points[0]) and inner.points[0].max() < 763  # 1100 ln 2
    assert 0 < inner(o.log(o.log(o.exp(o.exp(x))))) <= 64 and inner(x) == 0
    for expr in (o.sin(o.exp(o.exp(x))), o.exp(-o.exp(o.exp(x))), o.sqr(o.sqr(o.exp(x))) ** 1e300):
        assert np.isfinite(Accuracy(expr, samples=32)(expr))


def test_the_best_form_by_accuracy_of_non_scalars_and_nested_exponentials():
    from relwrite.engine.explore.api import best_form
    from relwrite.engine.explore.runner import Limits

    work = Limits(iterations=3, nodes=500, seconds=float("inf"), rule_seconds=float("inf"))
    form = best_form(parse("x + 0.5", types={"x": "vector"}), cost="accuracy", limits=work)
    assert form.cost == 0.0
    form = best_form(parse("A - x", types={"A": "matrix", "x": "vector"}), cost="accuracy", limits=work)
    assert form.cost == 0.0
    assert np.isfinite(best_form(parse("exp(exp(x))"), cost="accuracy", limits=work).cost)


_TYPES = [
    TensorType("float64", ()),
    TensorType("float64", (3,)),
    TensorType("float64", (None,)),
    TensorType("float64", (2, 3)),
    TensorType("float64", (1, 3)),
    TensorType("float32", (3,)),
    TensorType("float32", ()),
]
_OPS = [
    o.add, o.sub, o.mul, o.true_div, o.neg, o.exp, o.log, o.sqrt, o.sqr, o.tanh, o.sin, o.cos, o.abs,
    o.maximum, o.expm1, o.log1p, o.sigmoid, o.softplus, o.pow, o.sum,
]  # fmt: skip


@st.composite
def _mixed_graphs(draw) -> Variable:
    """A random graph over inputs of random float types (broadcasting one another), elementwise ops and
    a whole-array sum."""
    types = draw(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3))
    pool: list[Variable] = [constant(draw(st.sampled_from([0.5, 2.0, 1e300, -3.0])))]
    pool += [tensor(f"x{k}", t.dtype, shape=t.shape) for k, t in enumerate(types)]
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(_OPS))
        arity = 2 if op in (o.add, o.sub, o.mul, o.true_div, o.maximum, o.pow) else 1
        operands = [pool[-1] if draw(st.booleans()) else draw(st.sampled_from(pool)) for _ in range(arity)]
        try:
            pool.append(op(*operands))
        except (TypeError, ValueError):
            continue
    return pool[-1]


@settings(max_examples=60, deadline=None)
@given(_mixed_graphs())
def test_the_accuracy_cost_is_finite_and_never_raises_on_random_graphs(expr):
    try:
        accuracy = Accuracy(expr, samples=16)
    except AccuracyError as error:  # nothing to measure: no inputs, or not a real number at any point
        assert "inputs to sample" in str(error) or "at every sample point" in str(error), error
        return
    width = accuracy.reference.dtype.itemsize * 8
    for form in (expr, o.neg(o.neg(expr))):
        bits = accuracy(form)
        assert np.isfinite(bits) and 0 <= bits <= width


def test_the_reference_atan2_is_c99s_at_two_infinities():
    expr = parse("atan2(y, x)")
    accuracy = Accuracy(expr)
    names = [v.name for v in accuracy.inputs]
    ys, xs = np.array([np.inf, np.inf, -np.inf, -np.inf]), np.array([np.inf, -np.inf, np.inf, -np.inf])
    points = [ys if name == "y" else xs for name in names]
    (exact,) = accuracy.exact([expr], points)
    assert list(exact.astype(float)) == list(np.arctan2(ys, xs))

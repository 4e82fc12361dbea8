"""Costs: flops from shapes, bits of error against an mpmath reference, the Pareto front."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite import matrix, parse, scalar, vector
from relwrite.engine.explore.costs import (
    Accuracy,
    AccuracyError,
    Flops,
    bits_of_error,
    node_flops,
    pareto_front,
)
from relwrite.graph import ops as o
from relwrite.graph.basic import graph_inputs
from relwrite.graph.types import TensorType


def test_flops_read_static_shapes():
    a, x = TensorType("float64", (30, 40)), TensorType("float64", (40,))
    assert node_flops(o.dot, TensorType("float64", (30,)), [a, x]) == 2 * 30 * 40
    assert node_flops(o.exp, x, [x]) == 16 * 40
    assert node_flops(o.add, x, [x, x, x]) == 2 * 40
    assert node_flops(o.DimShuffle(2, (1, 0)), TensorType("float64", (40, 30)), [a]) == 0
    assert Flops().node(o.neg, x, [x], [5.0]) > 5.0 + 40


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_bits_of_error_count_ulps(value):
    v = np.float64(value)
    assert bits_of_error(v, v) == 0
    up = np.nextafter(v, np.inf)
    if np.isfinite(up):
        assert bits_of_error(up, v) == 1  # one ulp: log2(1 + 1)
        assert bits_of_error(np.float64(np.inf), v) == 64
    assert bits_of_error(np.float64(np.nan), v) == 64


def test_bits_of_error_of_non_finite_values():
    assert bits_of_error(np.float64(np.inf), np.float64(np.inf)) == 0
    assert bits_of_error(np.float64(-np.inf), np.float64(np.inf)) == 64
    assert bits_of_error(np.float32(np.nan), np.float32(1.0)) == 32
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

"""Regimes: the segmentation is optimal, splits separate the sample, and a piecewise form beats each piece."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite import function, parse, vector
from relwrite.engine.explore.api import REGIME_SAMPLES, _widened, best_form, share_inputs
from relwrite.engine.explore.costs import Accuracy
from relwrite.engine.explore.regimes import _shortest_between, infer_regimes, segment, switch_graph
from relwrite.engine.explore.runner import Limits
from relwrite.graph import ops as o
from relwrite.graph.basic import graph_inputs
from relwrite.relations.registry import rule

WORK = Limits(iterations=4, nodes=1_000, seconds=math.inf, rule_seconds=math.inf)

# sqrt(1 + x^2) + x cancels for x far below 0; its conjugate 1 / (sqrt(1 + x^2) - x) cancels for x far above.
CONJUGATE = rule(
    "hyperbolic_conjugate",
    (o.add, (o.sqrt, (o.add, 1.0, (o.sqr, "x"))), "x"),
    (o.true_div, 1.0, (o.sub, (o.sqrt, (o.add, 1.0, (o.sqr, "x"))), "x")),
    tags=("explore",),
)
PLAIN, CONJUGATED = "sqrt(1 + sqr(x)) + x", "1 / (sqrt(1 + sqr(x)) - x)"


@st.composite
def error_tables(draw, most_points=7):
    candidates = draw(st.integers(1, 3))
    points = draw(st.integers(1, most_points))
    bits = st.integers(0, 64).map(float)
    errors = np.array(draw(st.lists(bits, min_size=candidates * points, max_size=candidates * points)))
    splittable = draw(st.lists(st.booleans(), min_size=points + 1, max_size=points + 1))
    return errors.reshape(candidates, points), np.array(splittable)


def _cost(errors, choices, starts, penalty):
    ends = [*starts[1:], errors.shape[1]]
    spent = sum(errors[c, a:b].sum() for c, a, b in zip(choices, starts, ends))
    return spent + penalty * (len(choices) - 1)


def _brute_force(errors, splittable, penalty, min_points):
    """The least cost of any segmentation, trying every set of cuts."""
    n = errors.shape[1]
    best = errors.sum(axis=1).min()
    places = [i for i in range(1, n) if splittable[i]]
    for count in range(1, len(places) + 1):
        for cuts in itertools.combinations(places, count):
            bounds = [0, *cuts, n]
            if min(b - a for a, b in itertools.pairwise(bounds)) < min_points:
                continue
            spent = sum(errors[:, a:b].sum(axis=1).min() for a, b in itertools.pairwise(bounds))
            best = min(best, spent + penalty * count)
    return best


@settings(max_examples=200, deadline=None)
@given(error_tables(), st.sampled_from([0.0, 1.0, 7.5, 100.0]), st.integers(1, 3))
def test_the_segmentation_is_the_cheapest_and_never_worse_than_one_form(table, penalty, min_points):
    errors, splittable = table
    cut = segment(errors, splittable, penalty, min_points)
    assert cut.cost <= errors.sum(axis=1).min() + 1e-9
    assert cut.cost == pytest.approx(_brute_force(errors, splittable, penalty, min_points))
    assert cut.cost == pytest.approx(_cost(errors, cut.choices, cut.starts, penalty))
    assert cut.starts[0] == 0 and all(splittable[s] for s in cut.starts[1:])
    lengths = np.diff([*cut.starts, errors.shape[1]])
    assert len(cut.choices) == 1 or lengths.min() >= min_points
    assert all(a != b for a, b in itertools.pairwise(cut.choices))  # neighbours computed alike are merged


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda c: st.lists(st.integers(0, c - 1), min_size=1, max_size=12).map(lambda w: (c, w))
    )
)
def test_without_a_penalty_each_point_gets_its_own_winner(drawn):
    candidates, winners = drawn
    errors = np.full((candidates, len(winners)), 10.0)
    errors[winners, np.arange(len(winners))] = 1.0
    cut = segment(errors)
    runs = [c for c, _ in itertools.groupby(winners)]
    assert cut.choices == tuple(runs)
    assert cut.cost == pytest.approx(len(winners))


def test_bad_error_tables_are_refused():
    with pytest.raises(ValueError, match="candidates, points"):
        segment(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="splittable must have points \\+ 1 = 4"):
        segment(np.zeros((2, 3)), np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match="min_points"):
        segment(np.zeros((2, 3)), min_points=0)


@pytest.mark.parametrize("kind", [np.float64, np.float32])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_split_point_separates_its_two_sample_values(kind, data):
    finite = st.floats(allow_nan=False, allow_infinity=False, width=np.finfo(kind).bits)
    low, high = sorted((kind(data.draw(finite)), kind(data.draw(finite))))
    if not low < high:
        return
    split = kind(_shortest_between(low, high))
    assert low < split <= high  # `x < split` sends low to the left form and high to the right one


def test_a_constructed_two_regime_expression_gets_a_switch_that_beats_both_forms():
    plain = parse(PLAIN)
    form = best_form(plain, cost="accuracy", rules=[CONJUGATE], limits=WORK, series=False)
    assert form.regimes is not None and form.regimes.variable == "x" and not form.approximate
    (split,) = form.regimes.splits
    assert -1e3 < split < 0  # the conjugate left of a point where both are accurate, the plain form right
    assert [b.derivation for b in form.regimes.branches] == ["hyperbolic_conjugate", "input"]
    accuracy = Accuracy(plain)
    conjugated = share_inputs(plain, parse(CONJUGATED))
    assert form.cost == pytest.approx(accuracy(form.expr))
    assert form.cost < accuracy(plain) - 5 and form.cost < accuracy(conjugated) - 5
    assert form.derivation == f"regimes on x: x < {split!r}: hyperbolic_conjugate | x >= {split!r}: input"
    assert form.steps[-1].rule == "regimes" and form.to_dict()["regimes"]["splits"] == [split]
    x = next(v for v in graph_inputs([plain]) if v.name == "x")
    run = function([x], form.expr)
    for value in (-1e8, -3.0, 0.5, 1e8):
        exact = (
            math.sqrt(1 + value * value) + value if value > 0 else 1 / (math.sqrt(1 + value * value) - value)
        )
        assert float(run(value)) == pytest.approx(exact, rel=1e-12)


def test_regimes_can_be_turned_off_and_a_form_accurate_everywhere_needs_none():
    plain = parse(PLAIN)
    single = best_form(plain, cost="accuracy", rules=[CONJUGATE], limits=WORK, regimes=False, series=False)
    assert single.regimes is None and "switch" not in str(single)
    stable = best_form(parse("log(1 + exp(x))"), cost="accuracy", limits=WORK)
    assert stable.regimes is None and stable.derivation == "softplus"


def test_the_input_whose_range_separates_the_forms_is_split():
    # x comes first and takes no part: the split must be on y.
    plain = parse("x * 0.5 + (sqrt(1 + sqr(y)) + y)")
    conjugated = share_inputs(plain, parse("x * 0.5 + 1 / (sqrt(1 + sqr(y)) - y)"))
    accuracy = Accuracy(plain, ranges={"x": (-1.0, 1.0)})
    assert accuracy.inputs[0].name == "x"
    split = infer_regimes(accuracy, [plain, conjugated])
    assert split is not None and split.variable.name == "y" and split.choices == (1, 0)
    assert split.bits < min(accuracy(plain), accuracy(conjugated))


def test_one_form_best_everywhere_gives_no_regimes():
    plain = parse(PLAIN)
    accuracy = Accuracy(plain)
    assert infer_regimes(accuracy, [plain, plain]) is None


def test_regimes_with_another_cost_or_without_a_scalar_input_are_clear_errors():
    with pytest.raises(ValueError, match=r"regimes=True needs cost='accuracy'.*got cost='nodes'"):
        best_form(parse("x + 1"), cost="nodes", regimes=True, limits=WORK)
    v = vector("v")
    with pytest.raises(ValueError, match=r"scalar input.*element by element is out of scope"):
        best_form(o.exp(v) - 1.0, cost="accuracy", regimes=True, limits=WORK)
    accuracy = Accuracy(o.exp(v) - 1.0)
    with pytest.raises(ValueError, match="v are not scalars"):
        infer_regimes(accuracy, [o.exp(v) - 1.0])


def test_switch_graph_nests_the_branches_in_order():
    x = parse("x")
    joined = switch_graph(x, [-1.0, 2.0], [x * 0.0, x * 1.0, x * 2.0])
    run = function([x], joined)
    assert [float(run(v)) for v in (-3.0, 0.0, 5.0)] == [0.0, 0.0, 10.0]
    with pytest.raises(ValueError, match="2 split points need 3 branches, got 2"):
        switch_graph(x, [-1.0, 2.0], [x, x])


def test_accuracy_per_point_and_at_other_points_respect_the_precondition():
    expr = parse("sqrt(x + 1) - sqrt(x)")
    accuracy = Accuracy(expr, ranges="1 <= x <= 1e15")
    errors = accuracy.point_errors(expr)
    assert errors.shape == (len(accuracy.reference),) and accuracy(expr) == pytest.approx(errors.mean())
    nearby = accuracy.at([np.array([0.5, 2.0, 1e16, 4.0])])  # 0.5 and 1e16 break the precondition
    assert list(nearby.points[0]) == [2.0, 4.0] and nearby.point_errors(expr).shape == (2,)
    assert accuracy.at([np.array([-1.0])]).point_errors(expr).shape == (0,)


def test_a_root_of_a_perturbed_square_gets_its_conjugate_where_it_cancels():
    plain = parse("x - sqrt(x * x - 1)")  # cancels for x > 0 (the conjugate does not), not for x < 0
    form = best_form(plain, cost="accuracy", limits=WORK, series=False)
    assert form.regimes is not None and form.regimes.splits == (0.0,)
    left, right = form.regimes.branches
    assert left.derivation == "input" and "root_square_difference" in right.derivation
    assert "x > 0" in right.assumptions
    x = next(v for v in graph_inputs([plain]) if v.name == "x")
    run = function([x], form.expr)
    for value in (-1e8, -3.0, 3.0, 1e8):
        exact = (
            value - math.sqrt(value * value - 1) if value < 0 else 1 / (value + math.sqrt(value * value - 1))
        )
        assert float(run(value)) == pytest.approx(exact, rel=1e-12)


def test_regimes_are_chosen_on_a_wider_sample_as_the_time_left_allows():
    accuracy = Accuracy(parse(PLAIN))
    wide = _widened(accuracy, math.inf)
    assert len(wide.reference) > 3 * len(accuracy.reference)
    assert len(wide.reference) <= REGIME_SAMPLES
    assert _widened(accuracy, 0.0) is accuracy  # no time for more points than it has

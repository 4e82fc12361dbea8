"""Accuracy-aware extraction: exact values per class, the beam over every e-node, local error."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite import parse
from relwrite.engine.explore.accurate import BEAM, SPECIALIST_GAIN, AccurateExtractor, _Candidate
from relwrite.engine.explore.api import (
    BITS_TOLERANCE,
    CANDIDATES,
    Exploration,
    _simplest_among_equals,
    best_form,
)
from relwrite.engine.explore.costs import Accuracy, AccuracyError, NodeCount
from relwrite.engine.explore.egraph import EGraph
from relwrite.engine.explore.extract import Trees, enumerate_trees
from relwrite.engine.explore.runner import Limits
from relwrite.graph import ops as o
from relwrite.graph.basic import io_toposort
from relwrite.graph.printing import expression_text
from relwrite.testing import expression_graphs

# Searches bounded by work alone: what they find does not depend on the machine.
SMALL = Limits(iterations=3, nodes=300, seconds=math.inf, rule_seconds=math.inf)
MEDIUM = Limits(nodes=1_000, seconds=math.inf, rule_seconds=math.inf)

TEXTS = [
    "sqrt(x + 1) - sqrt(x)",
    "(1 - cos(x)) / (x * x)",
    "log(1 + x) - log(x)",
    "exp(x) - 1",
    "1 / (x + 1) - 1 / x",
    "(x + y) - x",
    "x * y + x * z",
]


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(TEXTS), st.sampled_from([None, "0 < x", "-1 < x < 1"]))
def test_the_form_found_is_scored_by_accuracy_and_never_worse_than_the_input(text, ranges):
    expr = parse(text)
    try:
        accuracy = Accuracy(expr, ranges=ranges)
    except AccuracyError:
        return
    form = best_form(expr, cost="accuracy", limits=SMALL, unsafe=True, ranges=ranges, check=False)
    assert form.cost == accuracy(form.expr)  # the same measure, on the same sample
    assert form.cost <= accuracy(expr)


@settings(max_examples=40, deadline=None)
@given(expression_graphs(n_inputs=2, max_nodes=8))
def test_exact_values_of_many_graphs_are_those_of_each(graph):
    _, output = graph
    try:
        accuracy = Accuracy(output)
    except AccuracyError:
        return
    terms = [n.outputs[0] for n in io_toposort(accuracy.inputs, [output])]
    for term, value in zip(terms, accuracy.exact(terms)):
        np.testing.assert_array_equal(value, accuracy.exact([term])[0])


def test_a_form_more_accurate_than_every_one_of_the_smallest_is_found():
    expr = parse("(1 - cos(x)) / (x * x)")
    accuracy = Accuracy(expr)
    exploration = Exploration([expr], include=["accuracy"], unsafe=True, limits=MEDIUM)
    exploration.run()
    trees = Trees(NodeCount())
    root = exploration.roots[0]
    smallest = list(enumerate_trees(exploration.egraph, root, trees, CANDIDATES, CANDIDATES))
    assert len(smallest) == CANDIDATES
    best_of_smallest = min(accuracy(trees.graph(t)) for t in smallest)
    form = exploration.best(0, accuracy)
    assert form.cost < best_of_smallest - 10  # bits
    assert "sin" in expression_text(form.expr)  # 1 - cos(x) = 2 sin(x / 2)^2, run backward


def test_local_error_names_the_subterm_that_loses_the_bits():
    x = parse("x")
    expr = o.sqrt(x + 1.0) - o.sqrt(x)
    errors = dict(Accuracy(expr, ranges="0 < x").local_errors(expr))
    assert max(errors, key=errors.get) is expr  # the subtraction cancels; the square roots round once
    assert errors[expr] > 30 and errors[expr.owner.inputs[1]] < 1


def test_the_input_is_listed_once_as_written_naming_its_worst_subterm():
    expr = parse("(x + y) - x")
    exploration = Exploration([expr], include=["accuracy"], limits=Limits(iterations=1, seconds=math.inf))
    exploration.run()
    forms = list(exploration.forms(0, "accuracy", check=False))
    assert sum(not f.steps for f in forms) == 1  # the input, not also its (flattened) tree
    written = next(f for f in forms if not f.steps)
    assert written.expr is expr
    assert written.worst_subterm[0] is expr and written.to_dict()["worst_subterm"]["bits"] > 1


@given(
    st.lists(
        st.tuples(st.floats(0, 64), st.integers(-1, 30), st.integers(0, 10**6), st.integers(0, 100)),
        max_size=20,
    )
)
def test_forms_within_the_bits_tolerance_list_the_smallest_first(rows):
    """The listing is a permutation of the rows; each row is the smallest of those within
    `BITS_TOLERANCE` of the most accurate row not yet listed."""
    ordered = _simplest_among_equals(rows)
    assert sorted(ordered) == sorted(rows)
    for k, row in enumerate(ordered):
        left = ordered[k:]
        best = min(r[0] for r in left)
        assert row[0] <= best + BITS_TOLERANCE
        assert row[1] == min(r[1] for r in left if r[0] <= best + BITS_TOLERANCE)


def test_a_beam_keeps_beside_its_best_a_candidate_far_more_accurate_on_some_points():
    expr = parse("x + 1")
    egraph = EGraph()
    cls = egraph.find(egraph.intern(expr))
    extractor = AccurateExtractor(egraph, Accuracy(expr), Trees(NodeCount()))
    n = extractor.samples
    extractor.exact[cls] = np.zeros(n)
    extractor._values[0] = np.zeros(n)
    errors = {k: np.full(n, 10.0) for k in range(BEAM)}  # the beam: 10 bits everywhere
    errors[100] = np.r_[np.zeros(n // 2), np.full(n - n // 2, 60.0)]  # exact on half, worst on average
    errors[101] = np.full(n, 12.0)  # worse everywhere
    errors[102] = np.full(n, 10.0 - SPECIALIST_GAIN / (2 * n))  # better, but by less than the gain asked
    extractor._bits.update(errors)
    beam = [_Candidate(k, (10.0, 1, k)) for k in range(BEAM)]
    others = [_Candidate(k, (float(errors[k].mean()), 1, k)) for k in (101, 102, 100)]
    assert [c.tree for c in extractor._specialists(cls, beam, others)] == [100]
    assert extractor._specialists(cls, beam, others[:2]) == []

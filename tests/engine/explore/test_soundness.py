"""Soundness of exploration: every class of a saturated e-graph holds terms equal over the reals, where
the assumptions its explanations name hold, and every step of those explanations is equal on its own."""

import math
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from relwrite import scalar
from relwrite.engine.explore.api import Exploration
from relwrite.engine.explore.costs import Accuracy, NodeCount
from relwrite.engine.explore.explain import Explanation
from relwrite.engine.explore.extract import Trees, enumerate_trees
from relwrite.engine.explore.runner import Limits
from relwrite.graph import ops as o
from relwrite.graph.basic import Variable
from relwrite.graph.printing import expression_text
from relwrite.interop.fpcore import read_fpcores
from relwrite.interop.improve import improve_benchmark
from relwrite.testing import expression_graphs

DATA = Path(__file__).parents[2] / "data"

LIMITS = Limits(iterations=3, nodes=300, seconds=math.inf, rule_seconds=math.inf)
"""A budget of work: the e-graph a run grows (and so the test) does not depend on the machine."""

POINTS = 16
TERMS = 6
"""Term nodes compared per class (the first made), besides the distinct trees extracted from it."""
TREES = 3

COMPARE = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal, "!=": np.not_equal}


class Exact:
    """Exact values (mpmath, rounded to float64) of graphs over `inputs` at fixed points, each graph once."""

    def __init__(self, inputs: list[Variable]):
        self.accuracy = Accuracy(o.add(*inputs) if len(inputs) > 1 else o.neg(inputs[0]), samples=1)
        rng = np.random.default_rng(0)
        self.points = [rng.uniform(-4.0, 4.0, POINTS) for _ in self.accuracy.inputs]
        self.values: dict[Variable, np.ndarray] = {}

    def __call__(self, graphs: list[Variable]) -> list[np.ndarray]:
        missing = list(dict.fromkeys(g for g in graphs if g not in self.values))
        if missing:
            self.values.update(zip(missing, self.accuracy.exact(missing, self.points)))
        return [self.values[g] for g in graphs]

    def holds(self, conditions) -> np.ndarray:
        """Where every condition (term, comparison, number) holds (nowhere a term is not real)."""
        mask = np.ones(POINTS, dtype=bool)
        for term, op, value in conditions:
            (values,) = self([term])
            with np.errstate(invalid="ignore"):
                mask &= np.all(COMPARE[op](values, value).reshape(POINTS, -1), axis=1)
        return mask


def assert_equal_where_assumed(exact: Exact, a: Variable, b: Variable, conditions, why: str) -> None:
    """a and b equal at the points where the conditions hold and both are finite."""
    va, vb = exact([a, b])
    mask = exact.holds(conditions) & np.isfinite(va).reshape(POINTS, -1).all(axis=1)
    mask &= np.isfinite(vb).reshape(POINTS, -1).all(axis=1)
    if not mask.any():
        return
    assert np.allclose(va[mask], vb[mask], rtol=1e-6, atol=1e-9), (
        f"{expression_text(a)} != {expression_text(b)}: {va[mask]} vs {vb[mask]} at "
        f"{[p[mask] for p in exact.points]}\n{why}"
    )


def assert_explanation_sound(exact: Exact, a: Variable, b: Variable, explanation: Explanation) -> None:
    conditions = [c for step in explanation.steps for c in step.conditions]
    assert_equal_where_assumed(exact, a, b, conditions, str(explanation))
    for step in explanation.steps:
        assert_equal_where_assumed(exact, step.before, step.after, step.conditions, f"the step {step}")


def assert_classes_sound(inputs: list[Variable], expr: Variable, unsafe: bool) -> None:
    """`expr` (over `inputs`, and maybe others) saturated on a budget of work with the default rules
    and the accuracy identities (and the unsafe rules, which hold only under their assumptions): each
    class's term nodes and extracted trees equal the class's first term wherever the explanation of
    their equality assumes, and so does each step of it."""
    exploration = Exploration([expr], limits=LIMITS, include=["accuracy"], unsafe=unsafe)
    exploration.run()
    egraph, exact = exploration.egraph, Exact(inputs)
    trees = Trees(NodeCount())
    for cls in egraph.reachable(exploration.roots):
        first, *terms = egraph.terms(cls)[:TERMS]
        extracted = enumerate_trees(egraph, cls, trees, TREES, TREES)
        members = terms + [egraph.intern(trees.graph(t), flatten=False) for t in extracted]
        for member in dict.fromkeys(members):
            if member != first:
                explanation = exploration.explain(first, member)
                assert_explanation_sound(exact, egraph.term(first), egraph.term(member), explanation)


@given(expression_graphs(n_inputs=2, max_nodes=5, input_type="float64"), st.booleans())
def test_every_class_holds_equal_terms_where_its_explanations_assume(graph, unsafe):
    assert_classes_sound(*graph, unsafe)


def test_a_union_assuming_what_later_fails_does_not_make_steps_that_do_not_hold():
    """x / x = 1 assuming x != 0, for an x = -a - -a later found to be 0: 0 and 1 then share a class,
    and a match found where a class was 0.0 is still applied to 0.0 (not to the 1.0 a union of the same
    iteration gave the class), so no step rewrites 1.0 * -1.0 to 0.0 as if it were x * 0."""
    a = scalar("a")
    assert_classes_sound([a], (-a - -a) / (-a - -a), unsafe=True)


def test_the_hamming_logs_benchmark_is_improved_without_an_unsound_form():
    """At 8 iterations exp(log(x)) -> x was applied at x = -1.0 and a step read -1.0 as 1.0 * 1.0:
    `relwrite improve` failed with UnsoundFormError at mul_ones_like (backward): neg(1.0) -> mul(1.0, 1.0)."""
    (benchmark,) = [
        b
        for b in read_fpcores((DATA / "hamming" / "series.fpcore").read_text())
        if b.name == "logs (example 3.8)"
    ]
    improvement = improve_benchmark(
        benchmark, Limits(iterations=8, nodes=10_000, seconds=math.inf, rule_seconds=math.inf)
    )
    assert improvement.ok, improvement.error
    assert (
        improvement.output_bits < 1 < improvement.input_bits
    )  # with exp(log(-1.0)) -> -1.0 applied: 63 bits

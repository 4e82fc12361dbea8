"""Identities over the reals (relwrite.relations.algebra): exploration's by default, never a pipeline's.

Each rule's soundness both ways on generated types and values is checked catalogue-wide in
test_catalogue.py (an explore rule over the reals: finite inputs within its assumptions); here, what
they match in flat sums and products, what they refuse, and what exploration finds with them.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite import matrix, parse, scalar, tensor, vector
from relwrite.backends.numpy.function import numpy_function
from relwrite.engine import rewrite_graph
from relwrite.engine.explore.api import best_form, explore, prove, select_rules
from relwrite.engine.explore.runner import Limits
from relwrite.graph import ops as o
from relwrite.graph.printing import pprint
from relwrite.relations import algebra, get_rule
from relwrite.relations.pattern import to_graph
from relwrite.testing import check_relation

RULES = [getattr(algebra, name) for name in dir(algebra) if name in {r.name for r in select_rules()}]
WORK = Limits(iterations=8, nodes=3_000, seconds=math.inf, rule_seconds=math.inf)
DIVISORS = {
    "add_fractions": {"b != 0", "d != 0"},
    "mul_fractions": {"b != 0", "d != 0"},
    "div_div_numerator": {"b != 0", "c != 0"},
    "div_div_denominator": {"b != 0", "c != 0"},
    "div_distribute": {"c != 0"},
    "mul_distribute": set(),
    "dot_distribute": set(),
    "dot_assoc": set(),
    "add_assoc": set(),
    "mul_assoc": set(),
}
FORWARD_ONLY = {"add_assoc", "mul_assoc"}  # a flat sum does not say which of its terms were nested


def forward(rule, graph):
    return [pprint(to_graph(a.value, like=graph)) for a in rule.answers(graph)]


def backward(rule, graph):
    return [pprint(to_graph(a.value, like=graph)) for a in rule.answers(graph, "backward")]


def test_every_identity_is_explored_by_default_equal_over_the_reals_and_assumes_its_divisors():
    assert sorted(r.name for r in RULES) == sorted(DIVISORS)
    for r in RULES:
        assert r.tags == {"canonicalize", "explore"} and r.semantics == "reassociates", r.name
        assert {str(a) for a in r.assumptions} == DIVISORS[r.name], r.name
        assert r.backward == (r.name not in FORWARD_ONLY), r.name


def test_no_rewriting_pipeline_distributes():
    a, b, c = scalar("a"), scalar("b"), scalar("c")
    for mode in ("fast_run", "canonicalize", "o4"):
        out = rewrite_graph(a * (b + c) + a / (b / c), include=[mode])
        assert "((a * b) + (a * c))" not in pprint(out) and "(a / (b / c))" in pprint(out), mode


def test_distribution_matches_inside_flat_products_and_sums():
    a, b, c, d, e = (scalar(n) for n in "abcde")
    found = forward(algebra.mul_distribute, o.mul(a, b, o.add(c, d, e)))
    assert "((c * a * b) + ((d + e) * a * b))" in found and len(found) == 3  # each term split off
    assert set(backward(algebra.mul_distribute, o.add(a * b, a * c))) == {"((b + c) * a)", "((c + b) * a)"}
    assert forward(algebra.mul_distribute, o.mul(a, b)) == []
    assert forward(algebra.mul_distribute, o.add(a, b)) == []


def test_distribution_keeps_one_dtype():
    x, i = vector("x"), vector("i", dtype="int8")
    assert forward(algebra.mul_distribute, o.mul(x, o.add(i, i))) == []  # int8 i + i wraps first
    j = vector("j", dtype="int8")
    assert forward(algebra.mul_distribute, o.mul(j, o.add(i, i)))  # integers: a ring, exact


def test_dot_distributes_only_well_typed_terms_and_gathers_backward():
    a = matrix("A", shape=(3, 4))
    x, y, z = (vector(n, shape=(4,)) for n in "xyz")
    assert forward(algebra.dot_distribute, o.dot(a, o.add(x, y, z)))[0] == "((A @ x) + (A @ (y + z)))"
    assert backward(algebra.dot_distribute, o.add(o.dot(a, x), o.dot(a, y)))[0] == "(A @ (x + y))"
    s, unknown = scalar("s"), vector("u")
    assert forward(algebra.dot_distribute, o.dot(a, o.add(x, s))) == []  # s broadcasts: A @ s is no product
    assert forward(algebra.dot_distribute, o.dot(matrix("B"), o.add(unknown, unknown * 2.0))) == []
    assert backward(algebra.dot_distribute, o.add(o.dot(a, x), o.dot(matrix("B", shape=(3, 4)), y))) == []


def test_dot_reassociates_a_matrix_between_vectors_or_matrices():
    a, b, c = matrix("A", shape=(2, 3)), matrix("B", shape=(3, 4)), matrix("C", shape=(4, 5))
    assert forward(algebra.dot_assoc, o.dot(o.dot(a, b), c)) == ["(A @ (B @ C))"]
    assert backward(algebra.dot_assoc, o.dot(a, o.dot(b, c))) == ["((A @ B) @ C)"]
    v, w = vector("v", shape=(3,)), matrix("W", shape=(2, 5))
    assert forward(algebra.dot_assoc, o.dot(o.dot(a, v), w)) == []  # v @ W is no product
    f32 = tensor("F", "float32", (4, 5))
    assert forward(algebra.dot_assoc, o.dot(o.dot(a, b), f32)) == []


def test_flops_pick_the_cheap_association_of_a_chain():
    a, b, c = matrix("A", shape=(64, 8)), matrix("B", shape=(8, 256)), matrix("C", shape=(256, 2))
    form = best_form(o.dot(o.dot(a, b), c), cost="flops", limits=WORK)
    assert pprint(form.expr) == "(A @ (B @ C))" and form.derivation == "dot_assoc" and not form.unsafe
    assert form.cost < 2 * 8 * 256 * 2 + 2 * 64 * 8 * 2 + 1  # 10,240 flops, not 327,680
    a, b, d = matrix("A", shape=(2, 256)), matrix("B", shape=(256, 2)), matrix("D", shape=(2, 512))
    form = best_form(o.dot(a, o.dot(b, d)), cost="flops", limits=WORK)
    assert pprint(form.expr) == "((A @ B) @ D)"  # backward: 6,144 flops, not 526,336


def test_explore_lists_the_distributed_and_blas_forms_without_unsafe_rules():
    a = matrix("A", shape=(3, 4))
    x, y = vector("x", shape=(4,)), vector("y", shape=(4,))
    forms = list(explore(o.dot(a, x + y), limits=WORK))
    shown = {pprint(f.expr): f for f in forms}
    assert "((A @ x) + (A @ y))" in shown and shown["((A @ x) + (A @ y))"].derivation == "dot_distribute"
    assert any(text.startswith("gemv(") for text in shown)
    assert not any(f.unsafe for f in forms)


def test_fraction_arithmetic_proves_with_the_divisors_assumed():
    proof = prove(parse("a / b + c / d"), parse("(a * d + b * c) / (b * d)"), limits=WORK)
    assert proof is not None and not proof.unsafe
    assert {"b != 0", "d != 0"} <= proof.assumptions
    proof = prove(parse("(a / b) / c"), parse("a / (b * c)"), limits=WORK)
    assert proof is not None and proof.assumptions == {"b != 0", "c != 0"}
    proof = prove(parse("(a + b) / c"), parse("a / c + b / c"), limits=WORK)
    assert proof is not None and proof.assumptions == {"c != 0"}


def test_fractions_of_integers_are_left_alone():
    i, j = scalar("i", "int64"), scalar("j", "int64")
    assert forward(algebra.div_div_numerator, o.true_div(o.true_div(i, j), i)) == []
    assert forward(algebra.add_fractions, o.add(o.true_div(i, j), o.true_div(j, i))) == []


@pytest.mark.parametrize("name", sorted(DIVISORS))
def test_each_rule_is_sound_both_ways_over_the_reals(name):
    report = check_relation(get_rule(name), direction="both", max_examples=40)
    directions = ("forward",) if name in FORWARD_ONLY else ("forward", "backward")
    assert all(report.examples.get(d, 0) > 0 for d in directions), report.examples


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 5), st.data())
def test_a_product_of_a_sum_of_n_terms_distributes_to_values_it_had(n, data):
    terms = [scalar(f"t{k}") for k in range(n)]
    a = scalar("a")
    expr = o.mul(a, o.add(*terms))
    found = [f.expr for f in explore(expr, rules=[algebra.mul_distribute], limits=WORK, check=False)]
    products = {frozenset({"a", t.name}) for t in terms}

    def fully_distributed(form):  # a sum of every a * t, nested or flat (one form up to AC)
        stack, summed = [form], []
        while stack:
            v = stack.pop()
            if v.owner is not None and v.owner.op == o.add:
                stack.extend(v.owner.inputs)
            else:
                summed.append(v)
        factors = [v.owner.inputs if v.owner is not None and v.owner.op == o.mul else () for v in summed]
        return len(summed) == n and {frozenset(pprint(f) for f in fs) for fs in factors} == products

    assert any(fully_distributed(form) for form in found), [pprint(f) for f in found]
    flat = o.add(*(o.mul(t, a) for t in terms))
    values = data.draw(st.lists(st.floats(-100, 100), min_size=n + 1, max_size=n + 1))
    f = numpy_function([a, *terms], [expr, flat])
    left, right = f(*map(np.float64, values))
    assert np.isclose(left, right, rtol=1e-9, atol=1e-9 * max(1.0, *map(abs, values)) ** 2)


def test_association_splices_a_nested_sum_once_in_one_dtype_and_runs_forward_only():
    a, b, c, d = (scalar(n) for n in "abcd")
    assert forward(algebra.add_assoc, o.add(o.add(a, b, c), d)) == ["(a + b + c + d)"]  # one match, not 3
    assert set(forward(algebra.mul_assoc, o.mul(o.mul(a, b), o.mul(c, d)))) == {  # one level at a time
        "(a * b * (c * d))",
        "(c * d * (a * b))",
    }
    assert forward(algebra.add_assoc, o.add(a, b)) == []
    i = scalar("i", dtype="int8")
    assert forward(algebra.add_assoc, o.add(o.add(i, i), a)) == []  # int8 i + i wraps before widening
    assert backward(algebra.add_assoc, o.add(a, b, c)) == []

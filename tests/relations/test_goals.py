"""The relational primitives for `@relation` goals (both directions, fast failure), the predicates, and the
operand-list functions the canonicalize rules compute with."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import eq, lall, run, var

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, constant, matrix, scalar, tensor, vector
from relwrite.graph.printing import graph_repr
from relwrite.relations.goals import along, conj, literalo, mappingo, nodeo, operandso, whereo
from relwrite.relations.operands import (
    cancelled,
    canonical_key,
    divided_out,
    folded_constants,
    like_factors,
    like_terms,
    nestings,
    rotations,
    sorted_terms,
    spliced,
    without_neutral,
)
from relwrite.relations.pattern import as_graph
from relwrite.relations.predicates import (
    broadcasts_into,
    equals_everywhere,
    filled_constant,
    is_float,
    is_signed,
    same_dtype_at,
)

x, y, z = scalar("x"), scalar("y"), scalar("z")


def shown(terms) -> list[str]:
    return [graph_repr([as_graph(t)]) for t in terms]


def test_operandso_reads_a_graph_and_builds_one():
    args = var()
    assert run(0, args, operandso(x + y, o.add, args)) == ((x, y),)
    assert run(0, args, operandso(x * y, o.add, args)) == ()  # another head: no answer
    assert run(0, args, operandso(x, o.add, args)) == ()  # an input is an atom
    term = var()
    (built,) = run(0, term, operandso(term, o.mul, (x, y)))
    assert built.owner.op == o.mul and built.owner.inputs == [x, y]
    assert run(0, term, operandso(term, o.add, args)) == ()  # neither side known
    assert run(0, term, operandso(term, o.dot, (x, y))) == ()  # ill-typed: nothing built


def test_operandso_keeps_holes_as_an_etuple():
    term, hole = var(), var()
    (partial,) = run(0, term, operandso(term, o.add, (x, hole)))
    assert partial[0] == o.add and partial[1] is x and partial[2] is hole


def test_nodeo_matches_op_classes_both_ways():
    a = matrix("a")
    op, arg = var(), var()
    ((found_op, found_arg),) = run(0, (op, arg), nodeo(a.T, o.DimShuffle, op, (arg,)))
    assert found_op == o.DimShuffle(2, (1, 0)) and found_arg is a
    assert run(0, op, nodeo(o.exp(a), o.DimShuffle, op, (arg,))) == ()
    term = var()
    (built,) = run(0, term, nodeo(term, o.DimShuffle, o.DimShuffle(2, (1, 0)), (a,)))
    assert built.owner.op.is_transpose and built.owner.inputs == [a]


def test_along_runs_from_whichever_end_is_known():
    def doubled(lhs, rhs):
        middle = var()
        return along(lhs, operandso(lhs, o.neg, (middle,)), operandso(rhs, o.exp, (middle,)))

    q = var()
    (forward,) = run(0, q, doubled(o.neg(x), q))
    assert graph_repr([forward]) == "exp(x)"
    (backward,) = run(0, q, doubled(q, o.exp(x)))
    assert graph_repr([backward]) == "neg(x)"


def test_mappingo_backward_keeps_only_true_preimages():
    def halve(n):
        return n // 2 if n % 2 == 0 else None

    q = var()
    assert run(0, q, mappingo(10, q, halve)) == (5,)
    assert run(0, q, mappingo(7, q, halve)) == ()
    # candidates 8, 9, 10, 11: only 10 halves to 5
    assert run(0, q, mappingo(q, 5, halve, lambda m: range(8, 12))) == (10,)
    assert run(0, q, mappingo(q, 5, halve)) == ()  # no preimages given: not run backward


def test_literalo_tests_a_constant_everywhere_or_gives_the_number():
    q = var()
    assert run(0, q, literalo(constant([1.0, 1.0]), 1)) == (q,)
    assert run(0, q, literalo(constant([1.0, 2.0]), 1)) == ()
    assert run(0, q, literalo(x, 1)) == ()  # an input is no constant
    assert run(0, q, literalo(q, 0)) == (0,)


def test_whereo_decides_at_once_or_once_its_term_is_ground():
    q = var()
    assert run(0, q, whereo(x, is_float)) == (q,)
    assert run(0, q, whereo(vector("i", dtype="int8"), is_float)) == ()
    assert run(0, q, conj(whereo(q, is_float), eq(q, x))) == (x,)  # waits for q
    assert run(0, q, conj(whereo(q, is_float), eq(q, vector("i", dtype="int8")))) == ()


def test_conj_agrees_with_lall():
    a, b = var(), var()
    goals = (eq(a, 1), eq(b, a))
    assert run(0, (a, b), conj(*goals)) == run(0, (a, b), lall(*goals)) == ((1, 1),)


def test_predicates():
    i, u = vector("i", dtype="int8"), vector("u", dtype="uint8")
    assert is_float(x) and not is_float(i) and not is_float(1.0)
    assert is_signed(x) and is_signed(i) and not is_signed(u)
    assert same_dtype_at(0, 0)(o.exp(o.log(x))) and not same_dtype_at(0, 0)(o.exp(o.log(i)))
    assert not same_dtype_at(0, 0)(o.exp(x))  # the path leaves the graph
    assert broadcasts_into(tensor("a", shape=(1, 3)), tensor("b", shape=(None, 3)))
    assert not broadcasts_into(vector("p"), vector("q"))
    layers = filled_constant(o.fill(vector("m"), o.fill(x, constant(0.0))))
    assert layers is not None and [str(m) for m in layers[0]] == ["m", "x"] and layers[1].data == 0
    assert filled_constant(o.fill(x, y)) is None
    assert equals_everywhere(constant([1.0, 1.0]), 1) and not equals_everywhere(constant(np.zeros(0)), 0)


# -- operand lists: the functions the canonicalize rules compute their right sides with ------------------


def test_spliced_flattens_at_any_depth_and_only_one_dtype():
    assert shown(spliced(o.add, (x, o.add(y, o.add(z, x))))) == ["x", "y", "z", "x"]
    i, j = vector("i", dtype="int8"), vector("j", dtype="int8")
    assert spliced(o.add, (i, o.add(j, vector("f")))) is None
    assert spliced(o.add, (x, y)) is None  # nothing to flatten


@given(st.permutations(["a", "b", "c", "d"]), st.integers(0, 4))
def test_sorted_terms_is_a_stable_sort_whose_rotations_come_back(names, position):
    variables = {n: scalar(n) for n in "abcd"}
    terms = [variables[n] for n in names]
    terms.insert(position, constant(2.0))
    ordered = sorted_terms(tuple(terms))
    expected = sorted(terms, key=canonical_key)
    if expected == terms:
        assert ordered is None
        return
    assert list(ordered) == expected
    assert any(sorted_terms(candidate) == ordered for candidate in rotations(ordered))  # a preimage


def test_nestings_flatten_back():
    w = scalar("w")
    found = list(nestings(o.mul, (x, y, z, w)))
    assert len(found) == 5  # runs of 2 (three places) and of 3 (two places)
    for candidate in found:
        assert shown(spliced(o.mul, candidate)) == ["x", "y", "z", "w"]


def test_folded_constants_combine_first_and_leave_overflow_for_run_time():
    assert shown(folded_constants(o.mul, (constant(2.0), x, constant(3.0)))) == ["6.0", "x"]
    big = constant(1e308)
    assert folded_constants(o.mul, (big, x, big)) is None
    assert folded_constants(o.add, (constant(2.0), x)) is None


def test_without_neutral_drops_what_cannot_widen():
    v = vector("v")
    zeros_like_v = o.fill(v, constant(0.0))
    assert shown(without_neutral(o.add, (x, constant(0.0), y))) == ["x", "y"]
    assert shown(without_neutral(o.add, (v, zeros_like_v))) == ["v"]  # same shape
    assert without_neutral(o.add, (x, zeros_like_v)) is None  # v may widen x
    assert shown(without_neutral(o.add, (x,))) == ["x"]  # add(x) is x


def test_like_terms_splits_exact_and_cancelling_groups():
    three_x = o.mul(constant(3.0), x)
    assert shown(like_terms(False, (x, y, three_x))) == ["mul(4.0, x)", "y"]
    assert like_terms(False, (x, o.neg(x))) is None  # inf - inf: not exact
    assert shown(like_terms(True, (x, y, o.neg(x)))) == [
        "y"
    ]  # zeros shaped like x, dropped: x cannot widen y
    i = vector("i", dtype="uint8")
    assert shown(like_terms(False, (i, o.neg(i)))) == ["fill(i, 0)"]  # exact for integers


def test_like_terms_in_a_wider_sum_adds_no_node():
    """y + x + x stays (y + 2*x is a product more); where the group already spends a node on a
    coefficient or a negation, gathering does not add one and goes ahead."""
    assert like_terms(False, (y, x, x)) is None
    assert shown(like_terms(False, (x, x))) == ["mul(2.0, x)"]  # the whole sum: the add goes
    assert shown(like_terms(False, (y, x, o.mul(constant(2.0), x)))) == ["y", "mul(3.0, x)"]
    assert shown(like_terms(False, (y, o.neg(x), o.neg(x)))) == ["y", "mul(-2.0, x)"]
    xy = o.mul(x, y)
    assert shown(like_terms(False, (z, xy, xy))) == ["z", "mul(2.0, x, y)"]
    i, j = vector("i", dtype="int16"), vector("j", dtype="int16")
    assert shown(like_terms(False, (j, i, i, o.neg(i)))) == ["j", "i"]  # the neg goes, exactly


def test_like_factors_gathers_positive_integer_powers_exactly():
    assert shown(like_factors(False, (x, y, o.pow(x, constant(2.0))))) == ["pow(x, 3.0)", "y"]
    assert like_factors(False, (x, y, x)) is None  # in a wider product y * x ** 2 is a node more
    assert shown(like_factors(False, (x, x))) == ["pow(x, 2.0)"]
    roots = (o.pow(x, constant(0.5)), o.pow(x, constant(0.5)))
    assert like_factors(False, roots) is None
    assert shown(like_factors(True, roots)) == ["pow(x, 1.0)"]
    i = vector("i", dtype="int8")
    assert shown(like_factors(False, (i, i))) == ["pow(i, 2)"]
    assert like_factors(True, (i, i)) is None


def test_cancelling_factors():
    v = vector("v")
    assert shown(cancelled((x, o.true_div(z, x), y))) == ["z", "y"]
    assert shown(cancelled((v, o.reciprocal(v), y))) == ["fill(v, 1.0)", "y"]
    assert cancelled((x, o.true_div(z, y))) is None
    assert shown(divided_out((y, (x, y, z)))) == ["x", "z"]
    assert divided_out((y, (x, z))) is None
    ints = (vector("i", dtype="int64"), vector("j", dtype="int64"))
    assert divided_out((ints[1], ints)) is None  # integer products may have wrapped


def test_constant_is_not_a_term_of_a_group():
    c = Constant(x.type, 2.0)
    assert like_terms(False, (c, c, x)) is None


@pytest.mark.parametrize(
    "value, number, expected",
    [
        (np.float32(0.1), 0.1, True),  # compared in the constant's dtype, as the graph would
        (np.float64(0.1), np.float32(0.1), False),
        (np.uint8(255), -1, False),
        (np.nan, np.nan, True),  # a NaN in a pattern matches a NaN constant (NaN != NaN elsewhere)
        (np.nan, 0, False),
        (np.float32(1.0), np.nan, False),
        (-0.0, 0, True),
        (np.array([1.0, 1.0]), 1, True),
        (np.array([1.0, 2.0]), 1, False),
        (np.zeros(0), 0, False),
    ],
)
def test_is_literal_compares_every_element_in_the_constants_dtype(value, number, expected):
    from relwrite import constant
    from relwrite.relations.predicates import is_literal

    assert is_literal(constant(value), number) is expected


# -- shapes proven by the graph ----------------------------------------------------------------------


def test_a_filled_zero_whose_shape_the_other_terms_carry_is_dropped():
    """fill(tanh(x + y), 0) beside exp(y) * x: its shape comes from x and y, which the product's does
    too, so the zeros widen nothing and go; beside exp(x) alone they stay (y may be longer)."""
    from relwrite.engine import rewrite_graph

    a, b = vector("a"), vector("b")
    zeros = o.fill(o.tanh(o.add(a, b)), constant(0.0))
    kept = rewrite_graph(o.add(zeros, o.mul(o.exp(b), a)), include=["canonicalize"])
    assert graph_repr([kept]) == "mul(a, exp(b))"
    still = rewrite_graph(o.add(zeros, o.exp(a)), include=["canonicalize"])
    assert "fill" in graph_repr([still])


def test_shape_sources_look_through_elementwise_nodes_only_within_their_budget():
    from relwrite.relations import operands

    a, b = vector("a"), vector("b")
    total = o.Sum(None)(a)
    assert operands.shape_sources((o.exp(o.add(a, constant(1.0), o.mul(b, total))),)) == {a, b, total}
    inner = scalar("s")
    fused = o.Composite([inner], [o.exp(inner)])(a)
    assert operands.shape_sources((fused,)) == {fused}  # a Composite's outputs may be narrower
    deep = a
    for _ in range(operands.SHAPE_SOURCES_BUDGET):
        deep = o.exp(deep)
    assert operands.shape_sources((deep,)) is None
    assert not operands.shaped_within((o.fill(deep, constant(0.0)),), (o.mul(a, b),))


@given(st.data())
def test_shaped_within_is_sound_at_every_broadcast_of_the_inputs(data):
    """Whenever `shaped_within((p,), (q,))` holds for two nodes of a graph, p broadcast against q has
    q's shape, whichever inputs are of length 1 and which of length 3."""
    from relwrite.backends.numpy.function import numpy_function
    from relwrite.graph.basic import io_toposort
    from relwrite.relations.operands import shaped_within
    from relwrite.testing import expression_graphs

    inputs, output = data.draw(expression_graphs(n_inputs=3, max_nodes=10))
    nodes = [*inputs, *(v for node in io_toposort(inputs, [output]) for v in node.outputs)]
    p = data.draw(st.sampled_from(nodes))
    q = data.draw(st.sampled_from([v for v in nodes if v is not p]))
    if not shaped_within((p,), (q,)):
        return
    both = numpy_function(inputs, [p, q])
    for lengths in itertools.product([1, 3], repeat=len(inputs)):
        with np.errstate(all="ignore"):
            p_value, q_value = both(*(np.full(n, 0.5) for n in lengths))
        assert np.broadcast_shapes(np.shape(p_value), np.shape(q_value)) == np.shape(q_value), lengths

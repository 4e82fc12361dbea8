"""Graph variables as etuple terms: etuplize, car/cdr, unify/reify, evaluation and kanren relations."""

import pytest
from cons import car, cdr, cons
from cons.core import ConsError
from etuples import etuple, etuplize, rands, rator
from etuples.core import ExpressionTuple, InvalidExpression
from hypothesis import given
from hypothesis import strategies as st
from kanren import conso, eq, fact, heado, run, tailo, var
from kanren.assoccomm import assoc_flatten, associative, commutative, eq_assoccomm
from kanren.core import lall
from kanren.graph import mapo
from kanren.term import applyo
from unification import reify, unify
from unification import vars as lvars

from relwrite.graph.basic import Variable, constant, float64, io_toposort, matrix, vector
from relwrite.graph.ops import Composite, add, dot, exp, mul, neg, true_div
from relwrite.graph.terms import GraphETuple, OpETuple

fact(associative, add)
fact(commutative, add)


def dot_distributeo(in_lv, out_lv):
    """The seed's relation ``A.dot(a + b ...) == A.dot(a) + A.dot(b) ...``."""
    A_lv, add_term_lv, add_cdr_lv, dot_cdr_lv, add_flat_lv = lvars(5)
    return lall(
        eq(in_lv, etuple(dot, A_lv, add_term_lv)),
        heado(add, add_term_lv),
        assoc_flatten(add_term_lv, add_flat_lv),
        tailo(add_cdr_lv, add_flat_lv),
        conso(add, dot_cdr_lv, out_lv),
        mapo(lambda x, y: conso(dot, etuple(A_lv, x), y), add_cdr_lv, dot_cdr_lv),
    )


def exp_chain(leaf, length):
    """exp(exp(...exp(leaf))) with `length` nodes."""
    out = leaf
    for _ in range(length):
        out = exp(out)
    return out


def expanded_depth(term):
    """How many levels down the first-input path of a graph term have been built."""
    depth = 0
    while isinstance(term, GraphETuple) and term._expression is not None:
        depth += 1
        term = term._expression[1]
    return depth


def assert_same_structure(a, b):
    """a and b have the same ops and shape over the very same leaves (checked without terms.py)."""
    stack = [(a, b)]
    while stack:
        u, v = stack.pop()
        assert (u.owner is None) == (v.owner is None)
        if u.owner is None:
            assert u is v
            continue
        assert u.owner.op == v.owner.op
        assert len(u.owner.inputs) == len(v.owner.inputs)
        stack.extend(zip(u.owner.inputs, v.owner.inputs))


@pytest.fixture(scope="module")
def long_chain():
    return exp_chain(float64("x"), 100_000)


@pytest.fixture
def xyz():
    return float64("x"), float64("y"), float64("z")


@pytest.fixture
def two_outputs(xyz):
    """Both outputs of one multi-output node."""
    a, b = float64("a"), float64("b")
    x, y, _ = xyz
    return Composite([a, b], [add(a, b), mul(a, b)])(x, y)


# -- the seed's unification section -----------------------------------------------------


def test_unify_graph_with_etuple_pattern_and_reify_builds_graph(xyz):
    x, y, _ = xyz
    y_lv = var()
    s = unify(add(x, y), etuple(add, x, y_lv))
    assert s == {y_lv: y}
    out = reify(etuple(add, y_lv, y_lv), s).evaled_obj
    assert isinstance(out, Variable)
    assert out.owner.op == add
    assert out.owner.inputs == [y, y]


def test_cons_pattern_matches_variadic_add_and_rebuilds_with_another_op(xyz):
    x, y, z = xyz
    op_lv, args_lv = var(), var()
    s = unify(cons(op_lv, args_lv), add(x, y, z))
    assert s[op_lv] == add
    assert s[args_lv] == etuple(x, y, z)
    out = reify(cons(mul, args_lv), s).evaled_obj
    assert out.owner.op == mul
    assert out.owner.inputs == [x, y, z]


def test_unify_fails_on_different_op_or_arity(xyz):
    x, y, z = xyz
    assert unify(add(x, y), etuple(mul, x, var())) is False
    assert unify(add(x, y, z), etuple(add, x, var())) is False
    assert unify(exp(x), etuple(exp, y)) is False


def test_unify_atoms_with_terms(xyz):
    x, _, _ = xyz
    assert unify(x, etuple(exp, var())) is False
    assert unify(etuple(exp, var()), x) is False
    assert unify(x, cons(var(), var())) is False
    q = var()
    graph = exp(x)
    assert unify(graph, q) == {q: graph}
    assert unify(q, graph) == {q: graph}


def test_unify_term_first_and_nested_bindings_are_lazy_terms(xyz):
    x, y, _ = xyz
    inner = add(x, y)
    q = var()
    s = unify(etuple(exp, q), exp(inner))
    assert isinstance(s[q], GraphETuple)
    assert s[q].variable is inner
    assert s[q].evaled_obj is inner


def test_constants_unify_by_value(xyz):
    x, _, _ = xyz
    assert unify(add(x, constant(2.0)), etuple(add, x, constant(2.0))) == {}
    assert unify(add(x, constant(2.0)), etuple(add, x, constant(3.0))) is False


# -- etuplize ------------------------------------------------------------------------------


def test_etuplize_is_lazy_and_evaluates_to_the_variable_itself(xyz):
    x, y, _ = xyz
    graph = exp(add(x, y))
    term = etuplize(graph)
    assert isinstance(term, GraphETuple)
    assert term.evaled_obj is graph
    assert expanded_depth(term) == 0
    assert term[0] == exp
    assert expanded_depth(term) == 1
    child = term[1]
    assert isinstance(child, GraphETuple)
    assert child.variable is graph.owner.inputs[0]
    assert child._expression is None
    assert list(child) == [add, x, y]


def test_etuplize_atoms_follows_etuples_convention(xyz, two_outputs):
    x, _, _ = xyz
    c = constant(1.5)
    for atom in (x, c, *two_outputs):
        with pytest.raises(TypeError, match="atom"):
            etuplize(atom)
        assert etuplize(atom, return_bad_args=True) is atom


def test_terms_are_equal_to_their_expressions(xyz):
    x, y, _ = xyz
    graph = exp(add(x, y))
    term = etuplize(graph)
    assert term == etuple(exp, etuple(add, x, y))
    assert term == ExpressionTuple((exp, ExpressionTuple((add, x, y))))
    assert term == graph
    assert term == etuplize(exp(add(x, y)))
    assert term != etuple(exp, etuple(add, y, x))
    assert term != etuplize(exp(add(y, x)))
    assert hash(term) == hash(graph) == hash(etuplize(graph))


def test_graph_terms_print_one_level():
    deep = exp_chain(float64("x"), 2_000)
    term = etuplize(deep)
    assert str(term) == repr(term) == "e(exp, exp.0)"


# -- car and cdr -----------------------------------------------------------------------------


def test_car_cdr_of_a_variable(xyz):
    x, y, z = xyz
    graph = add(x, exp(y), z)
    assert car(graph) == add
    args = cdr(graph)
    assert args == etuple(x, etuple(exp, y), z)
    assert isinstance(args[1], GraphETuple)
    assert args[0] is x


def test_cons_of_car_and_cdr_is_the_original_term(xyz):
    x, y, _ = xyz
    graph = add(x, y)
    whole = cons(car(graph), cdr(graph))
    assert isinstance(whole, GraphETuple)
    assert whole.evaled_obj is graph


def test_concatenating_op_etuples_keeps_the_fast_class(xyz):
    x, y, _ = xyz
    joined = etuple(add, x) + etuple(y)
    assert isinstance(joined, OpETuple)
    assert joined.evaled_obj.owner.inputs == [x, y]


def test_car_cdr_of_atoms_raise_cons_error(xyz, two_outputs):
    x, _, _ = xyz
    for atom in (x, constant(1.0), *two_outputs):
        with pytest.raises(ConsError):
            car(atom)
        with pytest.raises(ConsError):
            cdr(atom)


def test_rator_rands_and_applyo_in_both_directions(xyz):
    x, y, _ = xyz
    graph = mul(x, y)
    assert rator(graph) == mul
    assert rands(graph) == etuple(x, y)
    op_lv, args_lv = var(), var()
    assert run(0, (op_lv, args_lv), applyo(op_lv, args_lv, graph)) == ((mul, etuple(x, y)),)
    (built,) = run(0, var("built"), applyo(mul, etuple(x, y), var("built")))
    assert built.owner.op == mul
    assert built.owner.inputs == [x, y]


# -- evaluation ----------------------------------------------------------------------------


def test_etuple_with_an_op_head_evaluates_by_calling_the_op(xyz):
    x, y, _ = xyz
    term = etuple(add, x, etuple(exp, y))
    assert isinstance(term, OpETuple)
    out = term.evaled_obj
    assert out.owner.op == add
    assert out.owner.inputs[0] is x
    assert out.owner.inputs[1].owner.op == exp
    assert term.evaled_obj is out


def test_plain_expression_tuples_of_ops_still_evaluate(xyz):
    x, y, _ = xyz
    out = ExpressionTuple((mul, x, ExpressionTuple((neg, y)))).evaled_obj
    assert out.owner.op == mul
    assert out.owner.inputs[1].owner.op == neg


def test_op_etuples_without_an_op_head_evaluate_as_plain_etuples(xyz):
    x, y, _ = xyz
    derived = etuple(add, x, y)[1:]
    assert isinstance(derived, OpETuple)
    with pytest.raises(InvalidExpression):
        _ = derived.evaled_obj
    assert etuple(max, 1, 2).evaled_obj == 2


def test_op_etuples_reject_keyword_arguments(xyz):
    x, y, _ = xyz
    with pytest.raises(TypeError, match="keyword"):
        _ = etuple(add, x, y, axis=1).evaled_obj


def test_evaluating_an_unreified_logic_variable_names_it(xyz):
    x, _, _ = xyz
    with pytest.raises(TypeError, match="~"):
        _ = etuple(add, x, var()).evaled_obj


# -- kanren --------------------------------------------------------------------------------


def test_run_eq_against_a_pattern():
    A, x = matrix("A"), vector("x")
    q = var()
    assert run(0, q, eq(dot(A, x), etuple(dot, q, x))) == (A,)


def test_dot_distribute_forward():
    A, x, y = matrix("A"), vector("x"), vector("y")
    q = var()
    (res,) = run(0, q, dot_distributeo(dot(A, add(x, y)), q))
    out = res.evaled_obj
    assert out.owner.op == add
    for term, leaf in zip(out.owner.inputs, (x, y)):
        assert term.owner.op == dot
        assert term.owner.inputs == [A, leaf]


def test_dot_distribute_flattens_nested_adds():
    A = matrix("A")
    x, y, z, w = (vector(n) for n in "xyzw")
    q = var()
    (res,) = run(0, q, dot_distributeo(dot(A, add(add(x, y), add(z, w))), q))
    out = res.evaled_obj
    assert out.owner.op == add
    assert len(out.owner.inputs) == 4
    for term, leaf in zip(out.owner.inputs, (x, y, z, w)):
        assert term.owner.op == dot
        assert term.owner.inputs == [A, leaf]


def test_dot_distribute_backward_gathers():
    A, x, y = matrix("A"), vector("x"), vector("y")
    q = var()
    (res,) = run(1, q, dot_distributeo(q, add(dot(A, x), dot(A, y))))
    out = res.evaled_obj
    assert out.owner.op == dot
    assert out.owner.inputs[0] is A
    summed = out.owner.inputs[1]
    assert summed.owner.op == add
    assert summed.owner.inputs == [x, y]


def test_associative_commutative_matching_on_graphs(xyz):
    x, y, z = xyz
    q = var()
    (res,) = run(0, q, eq_assoccomm(etuple(add, z, q), add(x, add(y, z))))
    assert res.owner.op == add
    assert set(res.owner.inputs) == {x, y}


def test_dot_distribute_does_not_apply_to_other_terms():
    A, x, y = matrix("A"), vector("x"), vector("y")
    q = var()
    assert run(0, q, dot_distributeo(dot(A, mul(x, y)), q)) == ()
    assert run(0, q, dot_distributeo(add(x, y), q)) == ()


# -- deep graphs -----------------------------------------------------------------------------


@pytest.mark.slow
def test_matching_at_the_root_of_a_long_chain_looks_two_levels_deep(long_chain):
    term = etuplize(long_chain)
    assert term.evaled_obj is long_chain
    z = var()
    s = unify(term, etuple(exp, etuple(exp, z)))
    assert s[z].variable is long_chain.owner.inputs[0].owner.inputs[0]
    assert expanded_depth(term) == 2
    s = unify(long_chain, etuple(exp, etuple(exp, etuple(exp, z))))
    assert s[z].evaled_obj is long_chain.owner.inputs[0].owner.inputs[0].owner.inputs[0]


@pytest.mark.slow
def test_reify_does_not_walk_a_deep_bound_graph(long_chain):
    z = var()
    term = etuplize(long_chain)
    for bound in (long_chain, term):
        res = reify(etuple(add, z, etuple(neg, z)), {z: bound})
        assert res[1] is bound
        assert res[2][1] is bound
    assert expanded_depth(term) == 0
    out = reify(etuple(add, z, z), {z: term}).evaled_obj
    assert out.owner.inputs == [long_chain, long_chain]


def test_separately_built_long_chains_unify():
    x = float64("x")
    a, b = exp_chain(x, 20_000), exp_chain(x, 20_000)
    assert unify(a, b) == {}
    assert unify(etuplize(a), etuplize(b)) == {}
    assert unify(a, etuplize(b)) == {}
    assert etuplize(a) == b
    assert unify(a, exp_chain(float64("x"), 20_000)) is False
    assert unify(a, b.owner.inputs[0]) is False


def test_long_chain_unifies_with_a_fully_built_plain_etuple():
    x = float64("x")
    graph = exp_chain(x, 20_000)
    plain = x
    for _ in range(20_000):
        plain = etuple(exp, plain)
    assert unify(graph, plain) == {}


def test_shared_subgraphs_are_compared_once():
    x = float64("x")
    a, b = x, x
    for _ in range(200):  # 2**200 paths: only a per-pair memo finishes
        a, b = add(a, a), add(b, b)
    assert unify(a, b) == {}
    assert etuplize(a) == b


# -- properties ------------------------------------------------------------------------------

_OPS = [(add, 2), (add, 3), (mul, 2), (mul, 3), (exp, 1), (neg, 1), (true_div, 2)]


@st.composite
def expression_graphs(draw):
    """A random graph over three float64 inputs, built step by step (so subgraphs may be shared)."""
    pool = [float64("a"), float64("b"), float64("c")]
    for _ in range(draw(st.integers(1, 12))):
        op, arity = draw(st.sampled_from(_OPS))
        pool.append(op(*(pool[draw(st.integers(0, len(pool) - 1))] for _ in range(arity))))
    return pool[-1]


def plain_terms(graph, make):
    """The full term of `graph`, built bottom-up with `make(op, *inputs)`."""
    terms = {}
    for node in io_toposort([], [graph]):
        terms[node.outputs[0]] = make(node.op, *(terms.get(v, v) for v in node.inputs))
    return terms[graph]


@given(expression_graphs(), st.sampled_from([etuple, lambda *items: ExpressionTuple(items)]))
def test_full_rebuild_from_a_plain_term_gives_the_same_graph(graph, make):
    term = plain_terms(graph, make)
    rebuilt = term.evaled_obj
    assert rebuilt is not graph
    assert_same_structure(rebuilt, graph)
    assert unify(graph, term) == {}
    assert unify(term, graph) == {}
    assert unify(rebuilt, graph) == {}
    assert etuplize(graph) == term


# -- structural hashing -----------------------------------------------------------------------------------


def _copy(graph):
    """A node-by-node copy of `graph` over the same inputs: equal as an expression, no node shared."""
    from relwrite.graph.basic import graph_inputs

    copies = {v: v for v in graph_inputs([graph])}
    for node in io_toposort(list(copies), [graph]):
        new = node.op.make_node(*(copies.get(v, v) for v in node.inputs))
        copies.update(zip(node.outputs, new.outputs))
    return copies[graph]


@given(st.data())
def test_graphs_equal_as_expressions_hash_alike_and_others_mostly_not(data):
    from relwrite.graph import ops as o
    from relwrite.graph.terms import same_expression, structural_hash
    from relwrite.testing.strategies import expression_graphs

    ops_ = (o.add, o.mul, o.neg, o.exp, o.sin, o.sqr)
    _, a = data.draw(expression_graphs(ops=ops_, max_nodes=10))
    _, b = data.draw(expression_graphs(ops=ops_, max_nodes=10))
    memo: dict = {}
    assert structural_hash(a, memo) == structural_hash(_copy(a), memo)
    if structural_hash(a, memo) != structural_hash(b, memo):
        assert not same_expression(a, b)


@pytest.mark.slow
def test_structural_hash_of_a_100000_deep_chain_does_not_recurse():
    from relwrite.graph.terms import structural_hash

    x = vector("x")
    out = x
    for _ in range(100_000):
        out = exp(out)
    assert structural_hash(out, {}) == structural_hash(_copy(out), {})


def test_like_terms_among_many_look_alikes_are_grouped_exactly():
    """sin(x * 1) + ... + sin(x * n) share a shallow signature: only equal terms may be grouped."""
    from relwrite.graph.ops import sin
    from relwrite.relations.operands import like_terms

    x = vector("x")
    terms = [sin(mul(x, constant(float(k)))) for k in range(1, 200)]
    assert like_terms(False, tuple(terms)) is None  # no two alike
    doubled = like_terms(False, (*terms, mul(constant(2.0), _copy(terms[7]))))
    assert doubled is not None and len(doubled) == len(terms)


def test_an_interrupt_entering_record_expansions_leaves_no_recorder():
    """Wherever an interrupt falls inside `record_expansions.__enter__`, no recorder stays registered
    (its `__exit__` does not run then; a stale one would collect every node later matches read)."""
    import sys

    from relwrite.graph import terms

    enter = terms.record_expansions.__enter__.__code__
    lines = 0

    def counter(frame, event, arg):
        nonlocal lines
        if frame.f_code is enter and event == "line":
            lines += 1
        return counter

    previous = sys.gettrace()
    sys.settrace(counter)
    try:
        with terms.record_expansions():
            pass
    finally:
        sys.settrace(previous)
    assert lines >= 3
    # recorders another test left (an interrupt in an engine's `finally`, test_engine_faults) are not ours
    before = list(terms._recorders)
    for at in range(lines):
        seen = 0

        def interrupt(frame, event, arg, at=at):
            nonlocal seen
            if frame.f_code is enter and event == "line":
                seen += 1
                if seen == at + 1:
                    raise KeyboardInterrupt
            return interrupt

        sys.settrace(interrupt)
        try:
            with pytest.raises(KeyboardInterrupt), terms.record_expansions():
                pass
        finally:
            sys.settrace(previous)
        stayed = [r for r in terms._recorders if not any(r is b for b in before)]
        assert stayed == [], f"a recorder stayed after an interrupt at line {at} of __enter__"

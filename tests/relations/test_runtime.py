"""The rule runtime: one matcher and one run loop behind every rule, in both directions."""

from __future__ import annotations

import subprocess
import sys
from itertools import islice

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import eq, run, var

from relwrite import float64, parse, pprint, tensor, vector
from relwrite.backends.numpy import numpy_function
from relwrite.engine import EquilibriumRewriter, KanrenRelationSub
from relwrite.graph import ops as o
from relwrite.graph.basic import Variable
from relwrite.graph.fg import FunctionGraph
from relwrite.relations import catalogue, rule
from relwrite.relations.guards import is_ground
from relwrite.relations.pattern import Pattern, Rest, to_graph
from relwrite.relations.predicates import is_float
from relwrite.relations.runtime import answers, direct_answers, forward_matches
from relwrite.testing import check_relation

x, y, z = float64("x"), float64("y"), float64("z")
LOG_OF_ONE_PLUS = rule("log_of_one_plus", (o.log, (o.add, 1, "*rest")), (o.log1p, (o.add, "*rest")))


def texts(rule_, term, direction="forward", n=8):
    """The answers of `rule_` on `term`, printed."""
    return [pprint(to_graph(a.value, like=term)) for a in islice(answers(rule_, term, direction), n)]


# -- sequence variables and operand multisets -----------------------------------------------------------


def test_a_sequence_variable_reads_a_flat_sum_holding_the_one_anywhere():
    assert texts(LOG_OF_ONE_PLUS, o.log(o.add(x, 1.0, y))) == ["log1p((x + y))"]
    assert texts(LOG_OF_ONE_PLUS, o.log(o.add(y, x, 1.0))) == [
        "log1p((y + x))"
    ]  # the others keep their order
    assert texts(LOG_OF_ONE_PLUS, o.log(o.add(1.0, x))) == ["log1p(x)"]  # a sum of one term is the term
    assert texts(LOG_OF_ONE_PLUS, o.log(o.add(x, y))) == []


def test_rest_splices_as_a_sequence_variable():
    spliced = rule("spliced", (o.log, (o.add, 1, *Rest("rest"))), (o.log1p, (o.add, *Rest("rest"))))
    assert texts(spliced, o.log(o.add(x, 1.0, y))) == ["log1p((x + y))"]


def test_every_operand_must_be_matched_without_a_sequence_variable():
    cancel = rule("cancel", (o.add, "a", (o.neg, "a")), (o.fill, "a", 0))
    assert texts(cancel, o.add(o.neg(x), x)) == ["fill(x, 0.0)"]  # either order
    assert texts(cancel, o.add(o.neg(x), x, y)) == []


def test_a_variadic_pattern_enumerates_every_assignment_of_operands():
    swap = rule("swap", (o.mul, "a", "b"), (o.true_div, "a", (o.reciprocal, "b")))
    assert sorted(texts(swap, o.mul(x, y))) == ["(x / reciprocal(y))", "(y / reciprocal(x))"]


def test_the_same_name_twice_must_match_the_same_expression():
    double = rule("double", (o.add, "a", "a", "*rest"), (o.add, (o.mul, 2, "a"), "*rest"))
    assert set(texts(double, o.add(x, y, o.exp(z), o.exp(z)))) == {"((2.0 * exp(z)) + x + y)"}
    assert texts(double, o.add(x, y, z)) == []


@given(
    st.sampled_from(
        [(o.true_div, "a", "a"), (o.mul, "a", "a"), (o.sub, {"pattern": "a", "constraint": is_float}, "a")]
    ),
    st.sampled_from(["same", "equal", "other"]),
)
def test_a_name_taken_twice_is_checked_before_matching_with_the_matchers_own_answer(spec, operand):
    """The compiled check that the operands a name takes twice are one value (x / y refused at once)
    refuses exactly what matching would: one variable, two equal graphs, or two different ones."""
    pattern = Pattern(spec)
    first_graph, second_graph = {"same": (x, x), "equal": (o.exp(x), o.exp(x)), "other": (x, y)}[operand]
    value = spec[0](first_graph, second_graph)
    found = list(pattern.matches(value))
    assert (len(found) > 0) == (operand != "other")
    if found:
        assert found[0][pattern.names["a"]] is first_graph


def test_operands_in_order_for_other_ops_with_a_sequence_in_the_middle():
    pattern = Pattern((o.true_div, "*front", "b"))
    (s,) = pattern.matches(o.true_div(x, y))
    assert s[pattern.names["*front"]] == (x,)
    assert s[pattern.names["b"]] is y


@pytest.mark.parametrize(
    "spec, message",
    [
        ((o.add, "*a", "*b"), "at most one sequence variable"),
        ({"pattern": (o.log, "*a"), "constraint": is_float}, None),
        ((o.log, {"pattern": "*a", "constraint": is_float}), "cannot apply to the sequence"),
    ],
)
def test_bad_sequence_patterns_are_refused_by_name(spec, message):
    if message is None:
        Pattern(spec)  # a constraint on an application holding a sequence is fine
        return
    with pytest.raises(ValueError, match=message):
        Pattern(spec)


def test_a_sequence_variable_at_the_root_is_refused():
    with pytest.raises(ValueError, match="must be a named operand"):
        rule("bad", "*rest", "x")


@given(st.permutations(["one", "x", "y", "z"]))
def test_a_rule_reads_any_order_of_a_sum_and_keeps_its_value(order):
    terms = {"one": 1.0, "x": x, "y": y, "z": z}
    graph = o.log(o.add(*(terms[t] for t in order)))
    (result,) = [to_graph(a.value, like=graph) for a in answers(LOG_OF_ONE_PLUS, graph)]
    assert result.owner.op == o.log1p
    values = [np.float64(0.25), np.float64(0.5), np.float64(1.5)]
    np.testing.assert_allclose(
        numpy_function([x, y, z], result)(*values), numpy_function([x, y, z], graph)(*values)
    )


# -- backward and generative runs -------------------------------------------------------------------------


def test_backward_rebuilds_the_left_side_around_the_rest():
    assert texts(LOG_OF_ONE_PLUS, o.log1p(o.add(x, y)), "backward") == [
        "log((1.0 + x + y))",
        "log((1.0 + (x + y)))",
    ]
    assert texts(LOG_OF_ONE_PLUS, o.log1p(x), "backward") == ["log((1.0 + x))"]


def test_a_guard_waits_until_its_variable_is_bound():
    guarded = rule("guarded", (o.neg, (o.neg, {"pattern": "x", "constraint": is_float})), "x")
    a, b = var(), var()
    assert len(run(2, (a, b), guarded(a, b))) == 1  # generative: the guard is pending
    integer = tensor("i", dtype="int64", shape=())
    assert run(0, a, guarded(a, b), eq(b, integer)) == ()  # decided, and refused, once b is bound
    (left,) = run(0, a, guarded(a, b), eq(b, x))
    assert pprint(to_graph(left, like=x)) == "-(-x)"


def test_where_guards_read_several_variables_and_must_name_them():
    def longer_than_one(rest):
        return len(rest) > 1

    pick = rule("pick", (o.add, 0, "*rest"), (o.add, "*rest"), where=longer_than_one)
    assert texts(pick, o.add(0.0, x, y)) == ["(x + y)"]
    assert texts(pick, o.add(0.0, x)) == []

    def reads_w(w):
        return True

    with pytest.raises(ValueError, match="reads 'w'"):
        rule("bad", (o.add, 0, "*rest"), (o.add, "*rest"), where=reads_w)


def test_keeps_type_refuses_answers_that_would_widen_the_result():
    zeros = rule("zeros", (o.add, 0, "*rest"), (o.add, "*rest"), keeps_type=True)
    assert texts(zeros, o.add(np.zeros(3), float64("s"))) == []  # the zeros give the sum its length
    loose = rule("loose", (o.add, 0, "*rest"), (o.add, "*rest"))
    assert texts(loose, o.add(np.zeros(3), float64("s"))) == ["s"]  # left to the engine, which refuses it


# -- the one runtime: every catalogue rule, through it and through plain kanren -----------------------------

CATALOGUE = catalogue()
EXAMPLES = [(r, text) for r in CATALOGUE for text in r.examples]


def _printed(values, like):
    return sorted(
        pprint(to_graph(v, like=like)) for v in values if isinstance(to_graph(v, like=like), Variable)
    )


@pytest.mark.parametrize(("rule_", "text"), EXAMPLES, ids=[f"{r.name}: {t}" for r, t in EXAMPLES])
def test_runtime_answers_are_plain_kanren_answers(rule_, text):
    lhs = parse(text, types=rule_.types)
    q = var()
    through_runtime = [a.value for a in islice(rule_.answers(lhs), 8)]
    through_kanren = list(run(8, q, rule_(lhs, q)))
    assert through_runtime, f"{rule_.name} does not rewrite its example {text}"
    assert _printed(through_runtime, lhs) == _printed(through_kanren, lhs)
    if rule_.backward:
        rhs = to_graph(through_runtime[0], like=lhs)
        back = [a.value for a in islice(rule_.answers(rhs, "backward"), 8)]
        assert _printed(back, rhs) == _printed(run(8, q, rule_(q, rhs)), rhs)


@pytest.mark.parametrize("rule_", CATALOGUE, ids=lambda r: r.name)
def test_every_declared_rule_runs_generatively(rule_):
    """With both sides unbound a declared rule answers with its patterns (fresh logic variables); a goal
    written in Python answers nothing, never examples."""
    a, b = var(), var()
    found = run(2, (a, b), rule_(a, b))
    if rule_.sides is None:
        assert found == ()
        return
    assert found, f"{rule_.name} gives no pair with both sides unbound"
    assert any(not is_ground(side) for pair in found for side in pair), "answers are patterns, not examples"


# -- user rules without ceremony ------------------------------------------------------------------------


def test_a_user_rule_needs_no_tags_and_checks():
    mine = rule("double_negation", (o.neg, (o.neg, "v")), "v")
    assert mine.tags == frozenset() and mine.phases == ()
    report = check_relation(mine, types={"v": "vector"})
    assert report.directions == ("forward", "backward") and all(n > 0 for n in report.examples.values())


def test_relwrite_check_accepts_a_user_rule_without_tags(tmp_path):
    module = tmp_path / "my_rules.py"
    module.write_text(
        "from relwrite.graph import ops as o\n"
        "from relwrite.relations import rule\n"
        'mine = rule("double_negation", (o.neg, (o.neg, "v")), "v", types={"v": "vector"})\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "relwrite", "check", str(module)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "double_negation" in done.stdout


def test_a_user_rule_runs_in_the_engine_on_any_operand_order():
    v = vector("v")
    fgraph = FunctionGraph([v], [o.exp(o.log(o.add(v, 1.0)))])
    EquilibriumRewriter([KanrenRelationSub(LOG_OF_ONE_PLUS)]).rewrite(fgraph)
    assert pprint(fgraph.outputs[0]) == "exp(log1p(v))"


# -- cheap paths: they give exactly what the full run gives ---------------------------------------------

SCREENED_RULES = [r for r in CATALOGUE if r.screen is not None]
OPERAND_RULES = [r for r in CATALOGUE if r.sides is not None and r.sides.computed]  # a function computes
"""Rules with a computed right side: the engine's direct answers call it, the kanren goal runs it too."""
RANDOM_OPS = (o.add, o.mul, o.neg, o.exp, o.log, o.sub, o.true_div, o.sqr, o.log1p, o.sigmoid)


def _subterms(graph):
    from relwrite.graph.basic import graph_inputs, io_toposort

    return [n.outputs[0] for n in io_toposort(list(graph_inputs([graph])), [graph])]


@given(st.data())
def test_a_screen_never_refuses_what_its_rule_matches(data):
    """`Rule.screen` is a necessary condition: a refused node has no match (so the engine may skip it)."""
    from relwrite.testing.strategies import expression_graphs

    _, out = data.draw(expression_graphs(ops=RANDOM_OPS, max_nodes=8))
    for term in _subterms(out):
        for rule_ in SCREENED_RULES:
            if not rule_.screen(term):
                if rule_.sides is not None:  # the declaration's answers, without the screen
                    found = next(forward_matches(rule_.sides, term), None)
                    assert found is None, f"{rule_.name} screened out {pprint(term)}"
                else:  # the relation itself, run without the rule's screen
                    found = next(answers(rule_.relation, term), None)
                    assert found is None, f"{rule_.name} screened out {pprint(term)}"


OPERAND_SCREENED_RULES = [r for r in CATALOGUE if r.operand_screen is not None]


@given(st.data())
def test_an_operand_screen_never_refuses_what_its_rule_matches(data):
    """`Rule.operand_screen` is a necessary condition too: a node it refuses (its screen admitted)
    has no match."""
    from relwrite.testing.strategies import expression_graphs

    _, out = data.draw(expression_graphs(ops=RANDOM_OPS, max_nodes=8))
    for term in _subterms(out):
        for rule_ in OPERAND_SCREENED_RULES:
            if rule_.screen(term) and not rule_.operand_screen(term):
                found = next(forward_matches(rule_.sides, term), None)
                assert found is None, f"{rule_.name} screened out {pprint(term)} by its operands"


@pytest.mark.parametrize("rule_", OPERAND_SCREENED_RULES, ids=lambda r: r.name)
def test_an_operand_screen_admits_every_example(rule_):
    for text in rule_.examples:
        term = parse(text, types=rule_.types)
        assert rule_.operand_screen(term), f"{rule_.name} screens out its example {text}"


def test_an_operand_screen_reads_the_operands_operands():
    """1 - erf(x) written with mul(-1, .): a sum holding 1 and some product passes the heads screen;
    only a product of -1 and an erf passes the operands'."""
    rule_ = next(r for r in CATALOGUE if r.name == "one_minus_erf_times_minus_one")
    types = {"x": "vector", "y": "vector"}
    refused = parse("add(1, mul(2, exp(x)), y)", types=types)
    admitted = parse("add(y, mul(-1, erf(x)), 1)", types=types)
    assert rule_.screen(refused) and not rule_.operand_screen(refused)
    assert rule_.screen(admitted) and rule_.operand_screen(admitted)
    gemm = next(r for r in CATALOGUE if r.name == "add_to_gemm")  # a declared operand screen
    assert gemm.screen(refused) and not gemm.operand_screen(refused)


def test_a_constraint_decides_a_constant_operand_in_the_screen():
    """add_zeros_like's operand constraint accepts fills and constants: of constants, only zeros."""
    x = vector("x")
    add_zeros_like = next(r for r in CATALOGUE if r.name == "add_zeros_like")
    assert add_zeros_like.screen(o.add(x, 0.0))
    assert add_zeros_like.screen(o.add(x, o.fill(x, 0.0)))
    assert not add_zeros_like.screen(o.add(x, 1.0))


@pytest.mark.parametrize(
    "name, admitted, refused",
    [
        ("flatten_add", "add(x, add(y, 1))", "add(x, mul(y, 2))"),
        ("flatten_add", "add(x, add(y, 1))", "mul(x, add(y, 1))"),
        ("fold_add_constants", "add(1, x, 2)", "add(1, x, y)"),
        ("collect_terms", "add(1, x, y)", "add(1, x)"),
        ("collect_factors", "mul(x, x)", "mul(2, x)"),
        ("mul_div_cancel", "true_div(mul(x, y), y)", "true_div(add(x, y), y)"),
    ],
)
def test_an_operand_rule_screens_on_its_operands_heads(name, admitted, refused):
    rule_ = next(r for r in CATALOGUE if r.name == name)
    types = {"x": "vector", "y": "vector"}
    assert rule_.screen(parse(admitted, types=types))
    assert not rule_.screen(parse(refused, types=types))


@pytest.mark.parametrize("rule_", SCREENED_RULES, ids=lambda r: r.name)
def test_a_screen_admits_every_example(rule_):
    for text in rule_.examples:
        assert rule_.screen(parse(text, types=rule_.types)), f"{rule_.name} screens out its example {text}"


def test_flatten_sort_and_fold_answer_without_kanren():
    term = parse("add(y, add(x, 1), 2)", types={"x": "vector", "y": "vector"})
    for name in ("flatten_add", "flatten_mul", "sort_add", "sort_mul", "fold_add_constants"):
        rule_ = next(r for r in CATALOGUE if r.name == name)
        direct = direct_answers(rule_, term)
        assert direct is not None, name  # the declaration's matcher answers: no kanren states
        assert all(a.state is None for a in direct), name


@pytest.mark.parametrize("rule_", OPERAND_RULES, ids=lambda r: r.name)
@given(data=st.data())
def test_an_operand_rule_answers_without_kanren_what_kanren_answers(rule_, data):
    from relwrite.testing.strategies import expression_graphs

    _, out = data.draw(expression_graphs(ops=RANDOM_OPS, max_nodes=8))
    q = var()
    for term in _subterms(out):
        direct = [a.value for a in direct_answers(rule_, term)]
        assert _printed(direct, term) == _printed(run(4, q, rule_(term, q)), term), pprint(term)


@pytest.mark.parametrize("rule_", OPERAND_RULES, ids=lambda r: r.name)
def test_a_function_rule_answers_its_examples_without_kanren_what_kanren_answers(rule_):
    q = var()
    for text in rule_.examples:
        for term in _subterms(parse(text, types=rule_.types)):
            direct = [a.value for a in direct_answers(rule_, term)]
            assert _printed(direct, term) == _printed(run(4, q, rule_(term, q)), term), (text, pprint(term))


def test_a_constraint_declaring_its_heads_lets_the_screen_refuse_without_calling_it():
    calls = []

    def is_exp(value):
        calls.append(value)
        return value.owner is not None and value.owner.op == o.exp

    is_exp.heads = (o.exp,)
    drop_exp = rule("drop_exp", (o.add, {"pattern": "e", "constraint": is_exp}, "*rest"), (o.add, "*rest"))
    a, b = vector("a"), vector("b")
    assert not drop_exp.screen(a + b) and not calls
    assert drop_exp.screen(a + o.exp(b))
    assert [pprint(v) for v in drop_exp.forward(a + o.exp(b))] == ["a"]


@pytest.mark.parametrize("what", ["screen", "operand_screen"])
def test_a_declared_rules_screen_that_is_not_callable_is_refused_by_name(what):
    """rule() combines a screen with its pattern's own: a number given is refused there, naming the rule,
    not called (and failing) on the first node it meets."""
    with pytest.raises(TypeError, match=rf"rule my_rule: a {what} must be callable, got 3"):
        rule("my_rule", (o.exp, (o.log, "x")), "x", **{what: 3})


@pytest.mark.parametrize("what", ["screen", "guard", "operand_screen"])
def test_a_screen_or_guard_that_is_not_callable_is_refused_by_name(what):
    from relwrite.relations import relation

    with pytest.raises(TypeError, match=rf"rule my_rule: a {what} must be callable, got 3"):

        @relation(tags=["canonicalize"], tracks=(o.add,), examples=(), **{what: 3})
        def my_rule(lhs, rhs):
            return eq(lhs, rhs)

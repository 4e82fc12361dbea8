"""explore, best_form, prove: forms sound and distinct, stabilizations found, proofs never false."""

import math
import sys
from itertools import islice, pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite import function as rw_function
from relwrite import matrix, parse, scalar, vector
from relwrite.backends.numpy import EvaluationError
from relwrite.backends.numpy.function import numpy_function
from relwrite.engine.explore.api import (
    Form,
    UncheckedFormError,
    UnsoundFormError,
    best_form,
    check_form,
    explore,
    pareto,
    prove,
    select_rules,
)
from relwrite.engine.explore.costs import AccuracyError
from relwrite.engine.explore.egraph import AC_OPS
from relwrite.engine.explore.explain import Step
from relwrite.engine.explore.runner import Limits
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, constant, graph_inputs, io_toposort
from relwrite.graph.printing import pprint
from relwrite.relations import catalogue, get_rule
from relwrite.relations.registry import rule
from relwrite.testing import expression_graphs, input_values

# Searches whose findings a test asserts are bounded by work alone (iterations, e-nodes, answers and
# steps per rule run), never by seconds: a loaded machine finds the same forms, only later.
WORK = Limits(seconds=math.inf, rule_seconds=math.inf)
SMALL = Limits(iterations=4, nodes=400, seconds=math.inf, rule_seconds=math.inf)
GOAL = Limits(nodes=5_000, seconds=math.inf, rule_seconds=math.inf)


_NUMBERS: dict = {}


def ac_key(graph):
    """An independent canonical key of a graph up to associativity and commutativity of add and mul.

    Keys are numbered as they are made, so deep graphs give flat keys.
    """
    numbers = _NUMBERS
    keys = {}
    stack = [graph]
    while stack:
        v = stack[-1]
        if v in keys:
            stack.pop()
            continue
        if v.owner is None:
            leaf = ("leaf", v.data.tobytes() if isinstance(v, Constant) else id(v))
            keys[v] = (None, numbers.setdefault(leaf, len(numbers)), ())
            stack.pop()
            continue
        missing = [i for i in v.owner.inputs if i not in keys]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        op = v.owner.op
        operands = []
        for i in v.owner.inputs:
            key = keys[i]
            if op in AC_OPS and key[0] == op and i.dtype == v.dtype:
                operands.extend(key[2])
            else:
                operands.append(key[1])
        operands = tuple(sorted(operands)) if op in AC_OPS else tuple(operands)
        keys[v] = (op, numbers.setdefault((op, operands), len(numbers)), operands)
    return keys[graph][1] if graph.owner is not None else keys[graph]


def evaluate(graph, inputs, values):
    with np.errstate(all="ignore"):
        return np.asarray(numpy_function(inputs, graph)(*values), dtype=np.float64)


def agree(left, right, scale, where=True):
    left, right, where = np.broadcast_arrays(left, right, where)
    both = np.isfinite(left) & np.isfinite(right) & where
    return np.allclose(left[both], right[both], rtol=1e-6, atol=1e-6 * scale)


_COMPARE = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal, "!=": np.not_equal}


def assumptions_hold(steps, inputs, values):
    """Where every assumption of `steps` holds on the inputs' `values` (broadcast, elementwise)."""
    where = np.True_
    for step in steps:
        for term, comparison, value in step.conditions:
            where = where & _COMPARE[comparison](evaluate(term, inputs, values), value)
    return where


UNSAFE = Limits(iterations=3, nodes=300, seconds=math.inf, rule_seconds=math.inf)


@settings(max_examples=12)
@given(expression_graphs(max_nodes=6), st.data())
def test_every_form_computes_the_input(graph, data):
    inputs, output = graph
    forms = list(explore(output, limits=SMALL, check=False))
    assert forms and forms[0].cost <= min(f.cost for f in forms)
    values = data.draw(input_values(inputs))
    expected = evaluate(output, inputs, values)
    scale = max(1.0, *(float(np.max(np.abs(v), initial=0)) for v in values))
    for form in forms[:20]:
        assert agree(expected, evaluate(form.expr, inputs, values), scale), (pprint(output), str(form))


@settings(max_examples=10)
@given(expression_graphs(ops=(o.add, o.mul, o.sub, o.true_div, o.neg, o.exp, o.log), max_nodes=5), st.data())
def test_with_unsafe_rules_every_form_computes_the_input_where_its_assumptions_hold(graph, data):
    inputs, output = graph
    forms = list(explore(output, unsafe=True, limits=UNSAFE, check=False, most=20))
    values = data.draw(input_values(inputs))
    expected = evaluate(output, inputs, values)
    scale = max(1.0, *(float(np.max(np.abs(v), initial=0)) for v in values))
    for form in forms:
        where = assumptions_hold(form.steps, inputs, values)
        assert agree(expected, evaluate(form.expr, inputs, values), scale, where), (pprint(output), str(form))


@settings(max_examples=10)
@given(expression_graphs(ops=(o.add, o.mul, o.sub, o.true_div, o.neg, o.exp, o.log), max_nodes=5), st.data())
def test_a_checked_form_raises_exactly_where_an_assumption_fails(graph, data):
    inputs, output = graph
    forms = list(explore(output, unsafe=True, limits=UNSAFE, check=False, most=20))
    values = data.draw(input_values(inputs))
    for form in forms:
        checked = form.checked()
        if not form.assumptions:
            assert checked is form.expr
            continue
        if np.all(assumptions_hold(form.steps, inputs, values)):
            want = evaluate(form.expr, inputs, values)
            np.testing.assert_array_equal(evaluate(checked, inputs, values), want)
        else:
            with pytest.raises(EvaluationError, match=r"an assumption of .* fails"):
                evaluate(checked, inputs, values)


def test_a_checked_unsafe_form_keeps_its_assumption_through_fast_run():
    x = vector("x")
    (form,) = [f for f in explore(x / x, unsafe=True, limits=UNSAFE) if f.derivation == "div_self"]
    f = rw_function([x], form.checked(), mode="fast_run")
    np.testing.assert_array_equal(f(np.array([2.0, 3.0])), [1.0, 1.0])
    with pytest.raises(EvaluationError, match=r"x != 0"):
        f(np.array([2.0, 0.0]))


@settings(max_examples=12)
@given(expression_graphs(max_nodes=6))
def test_forms_are_distinct_up_to_ac_and_ordered_by_cost(graph):
    inputs, output = graph
    forms = list(explore(output, limits=SMALL, check=False))
    keys = [ac_key(f.expr) for f in forms]
    assert len(set(keys)) == len(keys)
    assert [f.cost for f in forms] == sorted(f.cost for f in forms)


@settings(max_examples=15)
@given(expression_graphs(max_nodes=5), expression_graphs(max_nodes=5), st.data())
def test_prove_never_claims_a_pair_that_differs(first, second, data):
    (inputs, a), (_, b) = first, second
    proof = prove(a, b, limits=SMALL, check=False)
    if proof is None:
        return
    b = proof.steps[-1].expression if proof.steps else b
    values = data.draw(input_values(inputs))
    scale = max(1.0, *(float(np.max(np.abs(v), initial=0)) for v in values))
    by_name = {v.name: value for v, value in zip(inputs, values)}
    used = [v for v in graph_inputs([b]) if not isinstance(v, Constant)]
    assert agree(evaluate(a, inputs, values), evaluate(b, used, [by_name[v.name] for v in used]), scale)


@settings(max_examples=12)
@given(
    expression_graphs(max_nodes=5),
    st.sampled_from([lambda a: a + 1.0, lambda a: 2.0 * a, lambda a: -a, o.exp]),
    st.data(),
)
def test_prove_never_claims_an_expression_equals_a_changed_one(graph, change, data):
    # unsafe rules included: the claim may rest on assumptions, but where they hold it must be true
    inputs, a = graph
    proof = prove(a, change(a), unsafe=True, limits=UNSAFE, check=False)
    if proof is None:
        return
    values = data.draw(input_values(inputs))
    scale = max(1.0, *(float(np.max(np.abs(v), initial=0)) for v in values))
    where = assumptions_hold(proof.steps, inputs, values)
    assert agree(evaluate(a, inputs, values), evaluate(change(a), inputs, values), scale, where), str(proof)


def test_prove_takes_a_number_on_either_side_and_says_what_it_cannot_take():
    """A number is a constant of the other side's dtype (the int 0 beside float64 x - x is 0.0)."""
    x = scalar("x")
    for a, b in [(x - x, 0), (0, x - x), (x / x, np.float64(1))]:
        proof = prove(a, b, limits=SMALL)
        assert proof is not None and proof.steps
        assert all(step.expression.dtype == "float64" for step in proof.steps)
    assert pprint(prove(x - x, 0, limits=SMALL).steps[-1].expression) == "0.0"
    with pytest.raises(TypeError, match="two numbers"):
        prove(1, 2)
    with pytest.raises(TypeError, match=r"expected a graph Variable.*got str"):
        prove("x", x)
    with pytest.raises(TypeError, match=r"expected a graph Variable.*got NoneType"):
        prove(x, None)


def test_prove_does_not_equate_a_shifted_expression():
    x = scalar("x")
    assert prove(o.log(1 + o.exp(x)), o.softplus(x) + 1.0, unsafe=True, limits=Limits(seconds=2)) is None


@pytest.mark.parametrize(
    ("plain", "stable", "types"),
    [
        ("log(1 + exp(x))", "softplus(x)", {}),
        pytest.param("log(softmax(x))", "log_softmax(x, axis=-1)", {"x": "vector"}),
        ("log(sigmoid(x))", "-softplus(-x)", {}),
        ("exp(x) - 1", "expm1(x)", {}),
        ("log(1 + x)", "log1p(x)", {}),
    ],
)
def test_best_form_by_accuracy_finds_the_stabilizations(plain, stable, types):
    limits = Limits(nodes=300, seconds=math.inf, rule_seconds=math.inf)  # each is found within 300 e-nodes
    form = best_form(parse(plain, types=types), cost="accuracy", limits=limits)
    assert pprint(form.expr) == stable
    assert form.cost < 1  # bits of error
    assert form.steps and not form.unsafe


def test_the_accuracy_front_runs_from_cheap_to_accurate():
    front = pareto(parse("log(1 + exp(x))"), limits=GOAL)
    assert [pprint(p.form.expr) for p in front][-1] == "softplus(x)"
    assert front[-1].bits < 1 and all(a.flops <= b.flops for a, b in pairwise(front))


DOT_DISTRIBUTE = get_rule("dot_distribute")


def test_explore_the_seed_relation_both_ways():
    a = matrix("A", shape=(3, 4))
    x, y = vector("x", shape=(4,)), vector("y", shape=(4,))
    forms = [pprint(f.expr) for f in explore(o.dot(a, x + y), rules=[DOT_DISTRIBUTE], limits=WORK)]
    assert forms == ["(A @ (x + y))", "((A @ x) + (A @ y))"]
    back = list(explore(o.dot(a, x) + o.dot(a, y), rules=[DOT_DISTRIBUTE], direction="backward", limits=WORK))
    assert [pprint(f.expr) for f in back] == ["(A @ (x + y))", "((A @ x) + (A @ y))"]
    assert back[0].derivation == "dot_distribute~" and not back[0].unsafe  # equal over the reals


SEED_WORK = Limits(iterations=4, nodes=2_000, seconds=math.inf, rule_seconds=math.inf)
"""The seed's search bounded by work: under a 2-second budget a loaded machine listed other forms first."""


def test_forms_of_the_seed_expression_list_many_variants():
    a, b = matrix("A", shape=(4, 4)), matrix("B", shape=(4, 4))
    x, y, z, w = (vector(n, shape=(4,)) for n in "xyzw")
    expr = o.dot(a, x + (y + o.dot(b, z + w)))
    forms = list(islice(explore(expr, include=("explore", "unsafe"), limits=SEED_WORK, check=False), 60))
    assert len(forms) == 60
    assert len({ac_key(f.expr) for f in forms}) == 60
    shown = [pprint(f.expr) for f in forms]
    assert "((A @ (B @ (w + z))) + (A @ x) + (A @ y))" in shown  # distributed twice, one flat sum (add_assoc)
    assert "(((A @ B) @ (w + z)) + (A @ (x + y)))" in shown  # and reassociated


def test_a_sum_equals_its_reversal_at_once():
    xs = [scalar(f"x{k}") for k in range(10)]
    reversed_sum = xs[-1]
    for x in reversed(xs[:-1]):
        reversed_sum = reversed_sum + x
    proof = prove(
        o.add(*xs), reversed_sum, limits=Limits(iterations=1, seconds=math.inf, rule_seconds=math.inf)
    )
    assert proof is not None and not proof.steps


def test_an_unsound_rule_is_caught_and_its_step_named():
    wrong = rule("exp_is_log", (o.exp, "x"), (o.log, "x"), tags=("explore",))
    x = scalar("x")
    with pytest.raises(UnsoundFormError, match="step 1: exp_is_log") as caught:
        list(explore(o.exp(x) + 1.0, rules=[wrong], limits=WORK))
    assert caught.value.step == 1


def test_prove_checks_its_proof_numerically():
    wrong = rule("exp_is_log", (o.exp, "x"), (o.log, "x"), tags=("explore",))
    x = scalar("x")
    with pytest.raises(UnsoundFormError, match="exp_is_log"):
        prove(o.exp(x), o.log(x), rules=[wrong], limits=WORK)
    assert prove(o.exp(x), o.log(x), rules=[wrong], check=False, limits=WORK) is not None


def test_a_two_thousand_node_input_explores_within_its_limits():
    x = scalar("x")
    expr = x
    for k in range(2_000):
        expr = o.exp(expr) if k % 2 else o.log(1 + expr)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(500)  # any recursion over the depth would fail
    try:
        forms = explore(expr, limits=Limits(seconds=1))
        first = next(forms)
    finally:
        sys.setrecursionlimit(limit)
    assert ac_key(first.expr) is not None


def test_prove_shares_inputs_by_name():
    assert prove(parse("x * 1"), parse("x"), limits=WORK) is not None
    with pytest.raises(ValueError, match="input x is"):
        prove(parse("x * 1"), parse("x", types={"x": "vector"}))


def test_costs_may_be_callables():
    x = scalar("x")
    forms = list(explore(o.log(1 + o.exp(x)), cost=lambda g: -len(pprint(g)), check=False, limits=WORK))
    lengths = [len(pprint(f.expr)) for f in forms]
    assert len(forms) > 2 and lengths == sorted(lengths, reverse=True)  # the longest first, by the callable
    assert all(f.cost == -n for f, n in zip(forms, lengths))


def test_bad_arguments_are_clear_errors():
    x = scalar("x")
    with pytest.raises(ValueError, match="cost must be one of"):
        next(explore(x, cost="speed"))
    with pytest.raises(ValueError, match="direction must be"):
        next(explore(x, direction="sideways"))
    with pytest.raises(TypeError, match="graph Variable"):
        next(explore("x"))
    with pytest.raises(TypeError, match="Rule objects or rule names"):
        select_rules([42])
    with pytest.raises(KeyError, match="no_such_rule"):
        select_rules(["no_such_rule"])
    with pytest.raises(ValueError, match="include names no tag"):
        select_rules(include=("shiny",))


def test_default_rules_are_the_identities_over_the_reals_and_leave_out_accuracy_unless_asked():
    names = {r.name for r in select_rules()}
    assert {"softplus", "mul_div_cancel", "dot_distribute", "add_fractions"} <= names
    safe = {r.name for r in select_rules(unsafe=False)}
    assert "mul_div_cancel" not in safe and {"softplus", "dot_distribute"} <= safe
    assert "sqrt_difference" not in names and "sqrt_difference" in {
        r.name for r in select_rules(include=["accuracy"])
    }
    everything = {r.name for r in select_rules(include=("explore", "unsafe", "accuracy"))}
    assert everything == {r.name for r in catalogue() if not r.composes}


def test_a_shortcut_is_left_out_where_the_rules_it_composes_are_in():
    shortcut = get_rule("mul_cancel_common")
    assert shortcut.composes and set(shortcut.composes) <= {r.name for r in select_rules()}
    assert shortcut not in select_rules()
    assert select_rules([shortcut]) == [shortcut]  # named, it is used


def test_forms_as_plain_data():
    form = best_form(parse("log(1 + exp(x))"), limits=GOAL)
    data = form.to_dict()
    assert data["expr"] == "softplus(x)" and data["derivation"] == "softplus"
    assert data["steps"][0]["rule"] == "softplus" and data["assumptions"] == []
    assert "softplus" in str(form)


def test_a_cost_that_cannot_measure_the_input_fails_before_exploring():
    iterations = []
    forms = explore(scalar("n", "int64") + 1, cost="accuracy", progress=iterations.append)
    with pytest.raises(AccuracyError, match=r"floating result, \(n \+ 1\) is int64"):
        next(forms)
    assert iterations == []
    with pytest.raises(AccuracyError, match="inputs to sample"):
        best_form(parse("1.0 + 2.0"), cost="accuracy")


def test_the_public_names_are_exported_from_relwrite():
    import relwrite
    import relwrite.engine.explore as exploration

    for name in ("explore", "best_form", "prove", "pareto", "Form", "Limits", "Explanation"):
        assert name in relwrite.__all__
        assert getattr(relwrite, name) is getattr(exploration, name)
    assert set(relwrite.__all__) <= set(dir(relwrite))


def test_best_form_prices_forms_as_dags_and_keeps_sharing():
    x = scalar("x")
    form = best_form(o.exp(x) * o.exp(x) + o.exp(x), limits=SMALL)
    assert form.cost == 4  # x, exp(x) once, and two more nodes
    assert len([n for n in io_toposort([x], [form.expr]) if n.op == o.exp]) == 1
    assert next(explore(o.exp(x) * o.exp(x), limits=SMALL)).cost == 3  # the input itself, as a DAG


def test_listings_show_no_folded_or_neutral_constant_factors():
    x, y = scalar("x"), scalar("y")
    expr = x * o.sqr(constant(1.0)) + o.abs(constant(-1.0)) * o.exp(y)
    shown = [pprint(f.expr) for f in explore(expr, limits=SMALL, most=40)]
    assert shown and not any(
        "sqr(1.0)" in s or "abs(-1.0)" in s or "1.0 *" in s or "* 1.0" in s for s in shown
    ), shown
    assert len(set(shown)) == len(shown)


@pytest.mark.parametrize("text", ["(x - x) / (x - x)", "(-a - -a) / (-a - -a)", "log(x - x) * 0"])
@pytest.mark.parametrize("unsafe", [False, True])
def test_a_form_that_cannot_be_checked_anywhere_is_passed_over(text, unsafe):
    """Unions assuming what later fails ((x - x) / (x - x) = 1 assuming x - x != 0) give forms whose
    assumptions hold at no input drawn: best_form and explore pass over them rather than raise."""
    expr = parse(text)
    limits = Limits(iterations=4, nodes=500, seconds=math.inf, rule_seconds=math.inf)
    best = best_form(expr, unsafe=unsafe, limits=limits, check_examples=5)
    listed = list(explore(expr, unsafe=unsafe, limits=limits, most=3, check_examples=5))
    assert best.expr is not None and listed


def test_check_form_says_when_no_input_could_be_compared():
    x = scalar("x")
    expr = o.true_div(o.sub(x, x), o.sub(x, x))
    one = constant(1.0)
    step = Step(
        "div_self", "forward", expr, one, one, frozenset({"x - x != 0"}), ((o.sub(x, x), "!=", 0.0),), True
    )
    with pytest.raises(UncheckedFormError, match="could not be checked"):
        check_form(expr, Form(one, 0.0, (step,)), frozenset({"unsafe"}))

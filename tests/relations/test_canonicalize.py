"""The canonicalize rules: what each does to its examples and to near misses, the values it keeps, and the
canonical form the rules reach together (a fixed point, no rule undoing another).

Every rule's soundness in both directions on random types and values is checked catalogue-wide in
test_catalogue.py; here each example is also evaluated forward and backward on drawn values, and so is
every answer the operand-list and shape rules give on the subterms of generated graphs.
"""

import warnings
from itertools import islice

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import run, var
from unification.variable import isvar

import relwrite as rw
from relwrite.backends.numpy.function import numpy_function
from relwrite.backends.numpy.impls import EvaluationError
from relwrite.compile.function import function as compile_in_mode
from relwrite.engine import Query, RewriteWarning, rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.basic import (
    Constant,
    Variable,
    ancestors,
    constant,
    graph_inputs,
    io_toposort,
    matrix,
    scalar,
    tensor,
    vector,
)
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.parse import parse
from relwrite.graph.printing import graph_repr, pprint
from relwrite.relations import canonicalize as c
from relwrite.relations import catalogue, get_rule
from relwrite.relations.pattern import as_graph, can_replace, to_graph
from relwrite.testing import DEFAULT_ELEMWISE_OPS, expression_graphs, input_values
from tests.relations.rule_checks import assert_answers_keep_values, assert_screened_out_only_without_answer
from tests.relations.test_semantics import compiled as compiled_once
from tests.relations.test_semantics import evaluate

RULES = [r for r in catalogue() if r.phase == "canonicalize"]
UNSAFE = ["canonicalize", "unsafe"]
FINITE = st.floats(-10, 10).filter(lambda v: v == 0 or abs(v) >= 2**-20)


def forward(rule, graph: Variable) -> Variable | None:
    """The rule's first answer on `graph` that may replace it, as a graph, or None."""
    for answer in islice(rule.forward(graph), 16):
        if isvar(answer):
            continue
        new = to_graph(answer, like=graph)
        if can_replace(graph, new):
            return new
    return None


def backward(rule, graph: Variable, n: int = 8) -> list[Variable]:
    q = var()
    return [as_graph(found) for found in run(n, q, rule(q, graph))]


def canon(text: str, types: dict | None = None, include=("canonicalize",)) -> str:
    return graph_repr([rewrite_graph(parse(text, types or {}), include=list(include))])


def respecting(rule, inputs: list[Variable], values: list[np.ndarray]) -> list[np.ndarray]:
    """`values` moved into the domain the rule's assumptions (x > 0, x >= 0, x != 0, bounds) describe."""
    fixed = []
    for v, value in zip(inputs, values):
        for a in (a for a in rule.assumptions if a.name == v.name):
            if a.op in (">", ">="):  # reflected above the bound
                value = a.value + np.abs(value - a.value) + (0.5 if a.op == ">" else 0.0)
            elif a.op == "!=":
                value = np.where(value == a.value, a.value + 1.0, value)
            assert np.all(a.holds(value)), f"cannot draw values for {a}"
        fixed.append(value)
    return fixed


def _evaluated(graph: Variable, inputs: list[Variable], values) -> tuple[np.ndarray | None, type | None]:
    """The graph's value, or the error it raised (an index past a drawn length)."""
    try:
        with np.errstate(all="ignore"):
            return np.asarray(compiled_once(tuple(inputs), graph)(*values)), None
    except EvaluationError as exc:
        return None, type(exc.__cause__ or exc)


def assert_same_values(lhs: Variable, rhs: Variable, inputs: list[Variable], values, finite_only: bool):
    (left, left_error), (right, right_error) = (_evaluated(g, inputs, values) for g in (lhs, rhs))
    assert left_error == right_error, (pprint(lhs), pprint(rhs), values, left_error, right_error)
    if left_error is not None:
        return  # both raise the same error, as an exact rewrite of an indexing must
    assert left.dtype == right.dtype and left.shape == right.shape, (pprint(lhs), pprint(rhs))
    agree = np.isclose(left, right, rtol=1e-9, atol=1e-9, equal_nan=True)
    if finite_only:
        agree |= ~np.isfinite(left)
    assert agree.all(), (pprint(lhs), pprint(rhs), values, left, right)


# -- the catalogue entries -------------------------------------------------------------------------


def test_canonicalize_rules_cover_the_issue_list_with_metadata():
    names = {r.name for r in RULES}
    required = {
        "neg_neg",
        "neg_div_neg",
        "sub_to_add_neg",
        "add_zero",
        "mul_one",
        "mul_zero",
        "div_one",
        "sub_self",
        "mul_div_cancel",
        "mul_cancel",
        "flatten_add",
        "flatten_mul",
        "sort_add",
        "sort_mul",
        "fold_add_constants",
        "fold_mul_constants",
        "collect_terms",
        "collect_factors",
        "exp_log",
        "dimshuffle_chain",
        "reshape_chain",
        "sum_scalar_mul",
        "useless_fill",
        "useless_alloc",
        "useless_identity",
        "useless_cast",
        "dot_distribute",
    }
    assert required <= names, sorted(required - names)
    assert len(RULES) >= 35
    for r in RULES:
        assert r.tracks and r.examples and r.doc, r.name
        assert ("fast_run" in r.tags) != ("explore" in r.tags), r.name
    assert {"mul_zero", "sub_self", "mul_div_cancel", "mul_cancel", "exp_log"} <= {
        r.name for r in RULES if "unsafe" in r.tags
    }


# -- each rule on its examples ---------------------------------------------------------------------

REWRITES = [
    ("neg_neg", "-(-x)", "x"),
    ("neg_div_neg", "(-x) / (-y)", "true_div(x, y)"),
    ("sub_to_add_neg", "x - y", "add(x, neg(y))"),
    ("sub_to_add_neg", "exp(x) - 1", "add(exp(x), neg(1.0))"),
    ("sub_self", "x - x", "fill(x, 0.0)"),
    ("neg_mul_constant", "-(2 * x)", "mul(-2.0, x)"),
    ("neg_mul_constant", "-(mul(3, x, y))", "mul(-3.0, x, y)"),
    ("add_zero", "x + 0", "x"),
    ("add_zero", "add(0, x, y)", "add(x, y)"),
    ("add_of_one_term", "add(x)", "x"),
    ("mul_one", "x * 1", "x"),
    ("mul_one", "mul(1, x, y)", "mul(x, y)"),
    ("mul_of_one_factor", "mul(x)", "x"),
    ("mul_zero", "x * 0", "0.0"),
    ("mul_zero", "mul(0, x, y)", "0.0"),
    ("div_one", "x / 1", "x"),
    ("div_self", "x / x", "fill(x, 1.0)"),
    ("mul_div_cancel", "(x * y) / y", "x"),
    ("mul_div_cancel", "(y * x) / y", "x"),
    ("mul_div_cancel", "mul(x, y, z) / y", "mul(x, z)"),
    ("mul_cancel", "x * (z / x)", "z"),
    ("mul_cancel", "mul(x, reciprocal(x), z)", "z"),
    ("mul_cancel", "mul(y, z / x, x)", "mul(y, z)"),
    ("flatten_add", "add(x, add(y, z))", "add(x, y, z)"),
    ("flatten_add", "(x + y) + (z + w)", "add(x, y, z, w)"),
    ("flatten_add", "add(add(add(x, y), z), w)", "add(x, y, z, w)"),
    ("flatten_mul", "mul(x, mul(y, z))", "mul(x, y, z)"),
    ("sort_add", "y + x", "add(x, y)"),
    ("sort_add", "add(exp(x), 1)", "add(1.0, exp(x))"),
    ("sort_add", "add(x, 2, y)", "add(2.0, x, y)"),
    ("sort_mul", "mul(exp(x), 2)", "mul(2.0, exp(x))"),
    ("fold_add_constants", "add(2, x, 3)", "add(5.0, x)"),
    ("fold_mul_constants", "mul(x, 2, 0.5, y)", "mul(1.0, x, y)"),
    ("collect_terms", "x + x", "mul(2.0, x)"),
    ("collect_terms", "add(mul(2, x), mul(3, x))", "mul(5.0, x)"),
    ("collect_terms", "add(x, y, mul(2, x))", "add(mul(3.0, x), y)"),
    ("collect_terms", "add(neg(x), neg(x))", "mul(-2.0, x)"),
    ("collect_terms", "add(mul(x, 3), mul(2, x))", "mul(5.0, x)"),  # a coefficient anywhere in its product
    ("collect_terms", "add(mul(x, y), mul(2, x, y))", "mul(3.0, x, y)"),
    ("collect_terms_cancelling", "add(x, neg(x))", "fill(x, 0.0)"),
    ("collect_terms_cancelling", "add(mul(3, x), neg(x))", "mul(2.0, x)"),
    ("collect_terms_cancelling", "add(y, x, mul(-1, x))", "y"),
    ("collect_factors", "x * x", "pow(x, 2.0)"),
    ("collect_factors", "mul(x ** 2, x)", "pow(x, 3.0)"),
    ("collect_factors", "mul(x ** 2, y, x)", "mul(pow(x, 3.0), y)"),
    ("collect_factors_general", "mul(x ** 0.5, x ** 0.5)", "pow(x, 1.0)"),
    ("collect_factors_general", "mul(x ** y, x)", "pow(x, add(y, 1.0))"),
    ("exp_log", "exp(log(x))", "x"),
    ("log_exp", "log(exp(x))", "x"),
    ("sqrt_sqr", "sqrt(sqr(x))", "abs(x)"),
    ("sqr_sqrt", "sqr(sqrt(x))", "x"),
    ("abs_abs", "abs(abs(x))", "abs(x)"),
    ("abs_neg", "abs(-x)", "abs(x)"),
    ("useless_identity", "identity(x)", "x"),
    ("useless_fill", "fill(x, y)", "y"),
    ("useless_fill", "fill(m, y)", "y"),
    ("useless_dimshuffle", "transpose(x)", "x"),
    ("dimshuffle_chain", "transpose(transpose(A))", "A"),
    ("useless_cast", 'x.astype("float64")', "x"),
    ("useless_alloc", "alloc(x, 2, 3)", "x"),
    ("useless_reshape", "x.reshape(2, 3)", "x"),
    ("useless_reshape", "v.reshape(-1)", "v"),
    ("reshape_chain", "x.reshape(3, 2).reshape(6)", "Reshape{(6,)}(x)"),
    ("sum_scalar_mul", "sum(2 * v)", "mul(2.0, Sum{axis=None}(v))"),
    ("sum_scalar_mul", "sum(mul(2, v, w), axis=0)", "mul(2.0, Sum{axis=(0,)}(mul(v, w)))"),
    ("sum_scalar_mul_general", "sum(mul(c, v), axis=0)", "mul(c, Sum{axis=(0,)}(v))"),
    ("dot_distribute", "A @ (x + y)", "add(dot(A, x), dot(A, y))"),
    ("dot_distribute", "A @ add(x, y, z)", "add(dot(A, x), dot(A, add(y, z)))"),
]


@pytest.mark.parametrize(("name", "text", "expected"), REWRITES, ids=[f"{n}:{t}" for n, t, _ in REWRITES])
def test_rule_rewrites_example_at_the_root(name, text, expected):
    rule = get_rule(name)
    result = forward(rule, parse(text, rule.types))
    assert result is not None, f"{name} does not rewrite {text}"
    assert graph_repr([result]) == expected


EXAMPLES = [(r, text) for r in RULES for text in r.examples]


@pytest.mark.parametrize(("rule", "text"), EXAMPLES, ids=[f"{r.name}:{t}" for r, t in EXAMPLES])
def test_example_keeps_its_values_forward_and_backward(rule, text):
    lhs = parse(text, rule.types)
    rhs = forward(rule, lhs)
    assert rhs is not None
    found = backward(rule, rhs, n=4) if rule.backward else []
    assert found or not rule.backward, f"{rule.name} finds no left side for {pprint(rhs)}"
    inputs = [v for v in graph_inputs([lhs]) if not isinstance(v, Constant)]
    floats = all(v.type.numpy_dtype.kind == "f" for v in inputs)  # integer inputs draw integers
    elements = FINITE if floats else None
    finite_only = "unsafe" in rule.tags

    @given(data=st.data())  # the rewrites are made once, above; the values vary
    def keeps_its_values(data):
        values = respecting(rule, inputs, data.draw(input_values(inputs, elements=elements)))
        assert_same_values(lhs, rhs, inputs, values, finite_only)
        for other in found:
            assert_same_values(other, rhs, inputs, values, finite_only)

    keeps_its_values()


NEAR_MISSES = [
    ("neg_neg", "-x", None),
    ("neg_div_neg", "(-x) / y", None),
    ("neg_div_neg", "(-i) / (-j)", {"i": "vector:int64", "j": "vector:int64"}),
    ("sub_to_add_neg", "i - j", {"i": "vector:int16", "j": "vector:int8"}),
    ("sub_self", "x - y", None),
    ("sub_self", "i - i", {"i": "vector:int8"}),
    ("neg_mul_constant", "-(x * y)", None),
    ("add_zero", "x + 1", None),
    ("mul_one", "x * 2", None),
    ("mul_zero", "x * 1", None),
    ("div_one", "x / 2", None),
    ("div_one", "i / 1", {"i": "vector:int64"}),
    ("div_self", "x / y", None),
    ("mul_div_cancel", "(x * y) / z", None),
    ("mul_div_cancel", "x / y", None),
    ("mul_div_cancel", "(i * j) / j", {"i": "vector:int64", "j": "vector:int64"}),
    ("mul_cancel", "x * (z / y)", None),
    ("mul_cancel", "mul(x, reciprocal(y))", None),
    ("flatten_add", "add(x, mul(y, z))", None),
    ("flatten_add", "add(i, add(j, x))", {"i": "vector:int8", "j": "vector:int8"}),
    ("flatten_mul", "mul(x, add(y, z))", None),
    ("sort_add", "add(1, x, y)", None),
    ("sort_add", "add(x, exp(x))", None),
    ("sort_mul", "mul(i, x)", {"i": "vector:int8"}),
    ("fold_add_constants", "add(1, x)", None),
    ("collect_terms", "x + y", None),
    ("collect_terms", "add(x, neg(x))", None),
    ("collect_terms", "add(mul(2, x), mul(2, y))", None),
    ("collect_terms_cancelling", "x + x", None),
    ("collect_factors", "x * y", None),
    ("collect_factors", "mul(x ** 0.5, x ** 0.5)", None),
    ("collect_factors_general", "x * x", None),
    ("exp_log", "exp(log(x) + 1)", None),
    ("exp_log", "exp(log(i))", {"i": "vector:int64"}),
    ("log_exp", "log(exp(x) + 1)", None),
    ("sqrt_sqr", "sqrt(abs(x))", None),
    ("sqr_sqrt", "sqr(sqrt(i))", {"i": "vector:int8"}),
    ("abs_abs", "abs(neg(x))", None),
    ("abs_neg", "abs(neg(u))", {"u": "vector:uint8"}),
    ("useless_fill", "fill(y, x)", {"y": "matrix"}),
    ("useless_fill", "fill(v, w)", {"v": "vector", "w": "vector"}),
    ("useless_dimshuffle", "transpose(A)", {"A": "matrix"}),
    ("dimshuffle_chain", "transpose(exp(transpose(A)))", {"A": "matrix"}),
    ("sum_scalar_mul", "sum(v * w)", {"v": "vector", "w": "vector"}),
    ("sum_scalar_mul", "sum(c * v)", {"v": "vector"}),
    ("sum_scalar_mul_general", "sum(mul(c, v))", {"v": "vector:float32"}),
    ("dot_distribute", "A @ (x + y)", {"A": "matrix", "x": "vector", "y": "vector"}),
    ("dot_distribute", "A @ x", {"A": "(3, 4)", "x": "(4,)"}),
]


@pytest.mark.parametrize(("name", "text", "types"), NEAR_MISSES, ids=[f"{n}:{t}" for n, t, _ in NEAR_MISSES])
def test_rule_leaves_near_misses_alone(name, text, types):
    rule = get_rule(name)
    graph = parse(text, types or {})
    assert forward(rule, graph) is None


# -- shape and dtype ops ----------------------------------------------------------------------------


def test_useless_cast_alloc_and_reshape_both_ways():
    x = tensor("x", shape=(2, 3))
    v = vector("v")
    cases = [
        (c.useless_cast, o.cast(x, "float64"), x),
        (c.useless_alloc, o.alloc(x, 2, 3), x),
        (c.useless_reshape, x.reshape(2, 3), x),
        (c.useless_reshape, x.reshape(-1, 3), x),
        (c.useless_reshape, v.reshape(-1), v),
    ]
    for rule, lhs, rhs in cases:
        assert forward(rule, lhs) is rhs, rule.name
        found = backward(rule, rhs)
        assert found and all(f.owner.inputs[0] is rhs for f in found), rule.name
        assert any(f.owner.op == lhs.owner.op for f in found), rule.name


def test_useless_cast_alloc_and_reshape_near_misses():
    x, v = tensor("x", shape=(2, 3)), vector("v")
    assert forward(c.useless_cast, o.cast(x, "float32")) is None
    assert forward(c.useless_alloc, o.alloc(v, 3)) is None
    assert forward(c.useless_alloc, o.alloc(scalar("s"), 2, 3)) is None
    assert forward(c.useless_reshape, x.reshape(3, 2)) is None
    assert forward(c.useless_reshape, matrix("m").reshape(-1, 3)) is None


def test_reshape_chain_skips_the_middle_and_resolves_minus_one():
    x = tensor("x", shape=(2, 3))
    assert graph_repr([forward(c.reshape_chain, x.reshape(3, 2).reshape(6))]) == graph_repr([x.reshape(6)])
    m = matrix("m")
    flat = m.reshape(6).reshape(-1, 2)  # the middle reshape makes the outer length known: 3
    result = forward(c.reshape_chain, flat)
    assert result.owner.inputs[0] is m and result.owner.op.shape == (3, 2) and result.type == flat.type
    assert backward(c.reshape_chain, result) == []
    values = [np.arange(6.0).reshape(2, 3)]
    assert_same_values(flat, result, [m], values, finite_only=False)


def test_dimshuffle_chain_composes_general_orders():
    t = tensor("t", shape=(None, 1, None))
    lhs = o.DimShuffle(3, (2, 0))(t).dimshuffle("x", 1, 0)  # drop the length-1 axis, then add one
    result = forward(c.dimshuffle_chain, lhs)
    assert result.owner.inputs[0] is t and result.owner.op.new_order == ("x", 0, 2)
    assert_same_values(lhs, result, [t], [np.arange(6.0).reshape(2, 1, 3)], finite_only=False)


# -- shapes, dtypes and the backward direction of the operand-list rules ---------------------------


def test_cancelling_keeps_the_shape_a_dropped_operand_gave():
    x, y = scalar("x"), vector("y")
    assert graph_repr([forward(c.mul_div_cancel, (x * y) / y)]) == "mul(x, fill(y, 1.0))"
    assert graph_repr([forward(c.mul_cancel, y * (x / y))]) == "mul(fill(y, 1.0), x)"
    assert forward(c.add_zero, o.add(x, constant(np.zeros(3)))) is None
    assert graph_repr([forward(c.mul_zero, o.mul(y, 0))]) == "fill(y, 0.0)"
    i = vector("i", dtype="int8")
    zeros = forward(c.mul_zero, o.mul(i, 0))
    assert zeros.dtype == "int8" and zeros.type.shape == (None,)


def test_integer_like_terms_cancel_exactly_in_the_safe_pipeline():
    i = vector("i", dtype="int8")
    assert graph_repr([rewrite_graph(i - i, include=["canonicalize"])]) == "fill(i, 0)"
    assert canon("x - x", {"x": "vector"}) == "add(x, neg(x))"


def test_flatten_backward_renests_runs_of_operands():
    x, y, z = scalar("x"), scalar("y"), scalar("z")
    forms = {graph_repr([f]) for f in backward(c.flatten_add, o.add(x, y, z))}
    assert forms == {"add(add(x, y), z)", "add(x, add(y, z))"}


def test_sort_backward_gives_rotations_that_sort_back():
    x, y = scalar("x"), scalar("y")
    forms = [graph_repr([f]) for f in backward(c.sort_add, o.add(1.0, x, y))]
    assert forms == ["add(x, y, 1.0)", "add(y, 1.0, x)"]
    assert backward(c.sort_add, o.add(y, x)) == []  # not sorted: no left side sorts to it


def test_neutral_and_constant_rules_backward():
    x, y = scalar("x"), scalar("y")
    assert {graph_repr([f]) for f in backward(c.add_zero, o.add(x, y))} == {
        "add(0.0, x, y)",
        "add(0.0, add(x, y))",
    }
    assert [graph_repr([f]) for f in backward(c.mul_one, x)] == ["mul(1.0, x)"]
    assert [graph_repr([f]) for f in backward(c.neg_mul_constant, o.mul(2.0, x))] == ["neg(mul(-2.0, x))"]


def test_sum_scalar_mul_and_dot_distribute_backward():
    v, w = vector("v"), vector("w")
    forms = {graph_repr([f]) for f in backward(c.sum_scalar_mul, o.mul(2.0, o.sum(o.mul(v, w))))}
    assert forms == {"Sum{axis=None}(mul(2.0, v, w))", "Sum{axis=None}(mul(2.0, mul(v, w)))"}
    a, x, y = tensor("A", shape=(3, 4)), tensor("x", shape=(4,)), tensor("y", shape=(4,))
    gathered = {graph_repr([f]) for f in backward(get_rule("dot_distribute"), o.dot(a, x) + o.dot(a, y))}
    assert gathered == {"dot(A, add(x, y))", "dot(A, add(y, x))"}


def test_operand_list_rules_scale_to_many_operands():
    xs = [scalar(f"v{k:03d}") for k in range(300)]
    doubled = [o.mul(constant(2.0), x) for x in xs[:50]]
    total = rewrite_graph(o.add(*reversed(xs), *doubled), include=["canonicalize"])
    assert total.owner.op == o.add and len(total.owner.inputs) == 300
    operands = total.owner.inputs
    assert operands[:250] == xs[50:]  # inputs in name order, then the collected terms 3 * v000 ...
    assert [graph_repr([t]) for t in operands[250:252]] == ["mul(3.0, v000)", "mul(3.0, v001)"]


def test_a_deep_chain_of_sums_flattens_without_recursion():
    x = scalar("x")
    chain = x
    for k in range(5000):
        chain = chain + scalar(f"y{k}")
    flat = forward(c.flatten_add, chain)
    assert flat.owner.op == o.add and len(flat.owner.inputs) == 5001 and flat.owner.inputs[0] is x


# -- the canonical form ----------------------------------------------------------------------------

CANONICAL = [
    ("1 + x", None, "add(1.0, x)"),
    ("exp(x) - 1", None, "add(-1.0, exp(x))"),
    ("3 * x + x", None, "mul(4.0, x)"),
    ("x * x", None, "pow(x, 2.0)"),
    ("x - y", None, "add(x, neg(y))"),
    ("x + 0 + y * 1", None, "add(x, y)"),
    ("(x * 2) * (3 * y)", None, "mul(6.0, x, y)"),
    ("-(-(2 * x))", None, "mul(2.0, x)"),
    ("2 * x + 3 * (x + y) - y", None, "add(mul(3.0, add(x, y)), mul(2.0, x), neg(y))"),
    ("exp(x) * 2 + 1 - x / 3", None, "add(1.0, mul(2.0, exp(x)), neg(true_div(x, 3.0)))"),
    ("transpose(transpose(A)) + 0", {"A": "matrix"}, "A"),
    ("sum(2 * v * 3)", {"v": "vector"}, "mul(6.0, Sum{axis=None}(v))"),
]


@pytest.mark.parametrize(("text", "types", "expected"), CANONICAL, ids=[t for t, _, _ in CANONICAL])
def test_canonical_form(text, types, expected):
    assert canon(text, types) == expected


CANONICAL_UNSAFE = [
    ("x * y * x / y", None, "pow(x, 2.0)"),
    ("x + 2 * x + y - 3 * x", None, "y"),
    ("(x - x) * y", {"x": "vector", "y": "vector"}, "fill(x, fill(y, 0.0))"),
    ("exp(log(x)) * (z / x)", None, "z"),
]


@pytest.mark.parametrize(
    ("text", "types", "expected"), CANONICAL_UNSAFE, ids=[t for t, _, _ in CANONICAL_UNSAFE]
)
def test_canonical_form_with_unsafe_rules(text, types, expected):
    assert canon(text, types, include=UNSAFE) == expected


def test_seed_expression_becomes_two_z_with_unsafe_rules():
    seed = parse("add(z, mul(true_div(mul(y, x), y), true_div(z, x)))")
    result = rewrite_graph(seed, include=["canonicalize", "stabilize", "specialize", "unsafe"])
    assert pprint(result) == "(2.0 * z)"
    assert graph_repr([result]) == "mul(2.0, z)"
    safe = rewrite_graph(
        parse("add(z, mul(true_div(mul(y, x), y), true_div(z, x)))"), include=["canonicalize"]
    )
    assert graph_repr([safe]) != "mul(2.0, z)"  # the cancellations need y != 0 and x != 0


INCLUDES = {"safe": ["canonicalize"], "unsafe": UNSAFE}
INPUT_TYPES = ["vector", "matrix:float32", "vector:int8"]
# Rewritten sums round differently: where the left side cancels to exactly 0 before a log, a sqrt or a
# division, the right side may reach -1e-16 and so NaN or an infinity of the other sign.  Values are
# compared on graphs of ops continuous everywhere.
CONTINUOUS_OPS = [op for op in DEFAULT_ELEMWISE_OPS if op not in (o.log, o.sqrt, o.true_div)]


def rewritten_to_a_fixed_point(inputs: list[Variable], output: Variable, include: list[str]) -> FunctionGraph:
    """The canonicalized graph, checked to be reached without a RewriteWarning and left alone by a rerun."""
    fgraph = FunctionGraph(inputs, [output], clone=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RewriteWarning)
        rewrite_graph(fgraph, include=include)
        reached = fgraph.fingerprint()
        rewrite_graph(fgraph, include=include)
    assert fgraph.fingerprint() == reached, "a second rewrite changed the result: rules undo each other"
    return fgraph


@pytest.mark.parametrize("input_type", INPUT_TYPES)
@pytest.mark.parametrize("include", INCLUDES.values(), ids=INCLUDES.keys())
@given(data=st.data())
def test_random_graphs_reach_a_fixed_point(include, input_type, data):
    rewritten_to_a_fixed_point(*data.draw(expression_graphs(max_nodes=14, input_type=input_type)), include)


@pytest.mark.parametrize("input_type", INPUT_TYPES)
@pytest.mark.parametrize("include", INCLUDES.values(), ids=INCLUDES.keys())
@given(data=st.data())
def test_random_graphs_keep_their_values_where_finite(include, input_type, data):
    inputs, output = data.draw(expression_graphs(CONTINUOUS_OPS, max_nodes=14, input_type=input_type))
    fgraph = rewritten_to_a_fixed_point(inputs, output, include)
    floating = inputs[0].type.numpy_dtype.kind == "f"
    low = 0 if inputs[0].dtype.startswith("u") else -5
    values = data.draw(input_values(inputs, elements=FINITE if floating else st.integers(low, 5)))
    intermediates = [output, *(v for v in ancestors([output]) if v.owner is not None and v is not output)]
    with np.errstate(all="ignore"):
        left, *computed = map(np.asarray, numpy_function(inputs, intermediates)(*values))
        right = np.asarray(numpy_function(fgraph.inputs, fgraph.outputs)(*values)[0])
    assert left.dtype == right.dtype and left.shape == right.shape
    if left.dtype.kind == "f":
        # equal expressions round differently: tolerate sqrt(eps), relative to the largest value computed
        finite = np.isfinite(left)
        scale = 1 + max(np.max(np.abs(v[np.isfinite(v)]), initial=0) for v in [left, *computed])
        tolerance = np.sqrt(np.finfo(left.dtype).eps)
        agree = np.isclose(left, right, rtol=tolerance, atol=tolerance * scale) | ~finite
    else:
        agree = left == right
    assert agree.all(), (pprint(output), repr(fgraph), values, left, right)


def test_a_neutral_operand_that_widens_the_fold_stays():
    """add(a, int64 0, b) with int32 a and b sums in int64 from its second step; add(a, b, 0) would wrap
    around in int32 first (the fuzzer's seed 43 found add_zeros_like doing that)."""
    from relwrite.graph.basic import constant, tensor

    zero = constant(np.array([0], dtype="int64"))
    a, b = tensor("a", "int32", (1,)), tensor("b", "int32", (None, None))
    total = o.add(a, zero, b, zero)
    big, one = np.array([2**31 - 1], dtype="int32"), np.array([[1]], dtype="int32")
    expected = numpy_function([a, b], total)(big, one)
    assert expected.tolist() == [[2**31]]
    for tags in (["canonicalize"], ["fast_run"]):
        rewritten = rewrite_graph(total, include=tags)
        assert numpy_function([a, b], rewritten)(big, one).tolist() == [[2**31]], pprint(rewritten)
    x = o.add(tensor("x", "int32", (3,)), constant(np.int64(0)), tensor("y", "int32", (3,)))
    assert len(rewrite_graph(x, include=["canonicalize"]).owner.inputs) == 3  # add_zero keeps it too


# -- constants the rules compute: exact, refused where they do not fit the dtype ------------------------

INTEGER_DTYPES = ["int8", "int16", "int32", "int64", "uint8"]


def typed(value: int, dtype: str) -> Constant:
    return constant(np.array(value, dtype=dtype))


def test_collected_integer_exponents_do_not_wrap_around():
    """int8 n1 ** 127 * n1 became n1 ** -128 (127 + 1 wrapped in int8), which raised "Integers to
    negative integer powers"; the exponent 128 does not fit int8, so the factors stay apart."""
    x0 = tensor("x0", "int8", (None,))  # every int8 value at once
    n1 = o.add(o.add(x0, x0), typed(127, "int8"))
    product = o.mul(o.pow(n1, typed(127, "int8")), n1)
    rewritten = rewrite_graph(product, include=["canonicalize"])
    assert not any(
        v.owner is not None and v.owner.op == o.pow and int(v.owner.inputs[1].data) < 0
        for v in ancestors([rewritten])
    ), pprint(rewritten)
    every = np.arange(-128, 128, dtype="int8")
    before, after = (evaluate(g, {"x0": every}) for g in (product, rewritten))
    assert before.error is None and after.error is None, after.error
    assert np.array_equal(before.value, after.value)
    # where the total fits, the factors are still collected
    collected = rewrite_graph(o.mul(o.pow(n1, typed(3, "int8")), n1), include=["canonicalize"])
    assert "** 4" in pprint(collected)


@given(st.sampled_from(INTEGER_DTYPES), st.data())
def test_collecting_integer_factors_and_terms_keeps_numpys_values(dtype, data):
    """Factors, terms, folded constants and a negated coefficient, with exponents and coefficients
    anywhere in the dtype's range: the canonical form gives what NumPy gives on the graph as written
    (wrapping around included), or the rule leaves the constants apart."""
    info = np.iinfo(dtype)
    x = tensor("x", dtype, (None,))
    exponents = data.draw(st.lists(st.integers(1, info.max), min_size=1, max_size=3), label="exponents")
    numbers = st.integers(info.min, info.max)
    coefficients = data.draw(st.lists(numbers, min_size=2, max_size=3), label="coefficients")
    c = [typed(k, dtype) for k in coefficients]
    graphs = {
        "factors": o.mul(*(o.pow(x, typed(e, dtype)) for e in exponents), x),
        "terms": o.add(*(o.mul(k, x) for k in c), o.neg(o.mul(c[0], x)), x),
        "folded sum": o.add(x, *c),
        "folded product": o.mul(x, *c),
        "negated product": o.neg(o.mul(c[-1], x)),
    }
    edges = [info.min, info.max, 0, 1, 2, info.max - 1]
    drawn = data.draw(st.lists(numbers, min_size=1, max_size=4), label="x")
    values = {"x": np.array(edges + drawn, dtype=dtype)}
    for name, graph in graphs.items():
        rewritten = rewrite_graph(graph, include=["canonicalize"])
        before, after = evaluate(graph, values), evaluate(rewritten, values)
        assert before.error == after.error, (name, pprint(rewritten), after.error)
        assert np.array_equal(before.value, after.value), (name, pprint(graph), pprint(rewritten))


# -- generated graphs: on every subterm, each rule's answers keep the values both ways ------------------

SHAPE_RULES = [
    "useless_dimshuffle",
    "useless_cast",
    "useless_alloc",
    "useless_reshape",
    "dimshuffle_chain",
    "reshape_chain",
    "sum_scalar_mul",
    "sum_scalar_mul_general",
]
OPERAND_KINDS = ("add", "mul", "add", "mul", "neg", "div", "reciprocal", "pow", "fill")
FOCUS = {  # the nodes each rule reads, drawn half the time so that every rule fires on some graphs
    "flatten_add": ("add",),
    "flatten_mul": ("mul",),
    "fold_add_constants": ("add",),
    "fold_mul_constants": ("mul",),
    "sort_add": ("add",),
    "sort_mul": ("mul",),
    "neg_mul_constant": ("neg", "mul"),
    "mul_zero": ("mul",),
    "mul_div_cancel": ("mul", "div"),
    "mul_cancel": ("mul", "div", "reciprocal"),
    "collect_terms": ("add", "neg", "mul"),
    "collect_terms_cancelling": ("add", "neg", "mul"),
    "collect_factors": ("mul", "pow"),
    "collect_factors_general": ("mul", "pow"),
}

GENERATED_OPS = (o.add, o.mul, o.neg, o.sub, o.exp, o.true_div, o.reciprocal, o.pow, o.sqr)


def subterms(graph: Variable) -> list[Variable]:
    return [n.outputs[0] for n in io_toposort(list(graph_inputs([graph])), [graph]) if len(n.outputs) == 1]


def assert_keeps_values_on_subterms(name: str, graph: Variable, data) -> None:
    """Rule `name` on every subterm of `graph`: its answers keep the values, forward and back, and a rule
    declared idempotent does not match what it built."""
    rule = get_rule(name)
    for term in subterms(graph):
        rhs = assert_answers_keep_values(rule, term, data)
        if rhs is not None and rule.idempotent:
            assert forward(rule, rhs) is None, (name, pprint(term), pprint(rhs))


@st.composite
def operand_list_graphs(draw, kinds=OPERAND_KINDS) -> Variable:
    """Nested sums and products of a few leaves, constants (zeros and ones too), negations, powers,
    quotients, reciprocals and fills (the nodes of `kinds`): what the operand-list rules read.  Half the
    nodes take the one built before them among their operands, so the graph nests."""
    dtype = draw(st.sampled_from(["float64", "float32", "int8"]))
    leaves = [tensor(name, dtype, (None,)) for name in "xy"]
    leaves += [
        constant(np.array(k, dtype=dtype)) for k in draw(st.lists(st.sampled_from([0, 1, 2, -1]), max_size=3))
    ]
    pool = list(leaves)
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(kinds))
        args = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=4))
        if draw(st.booleans()):  # nest: take the node built before this one
            args[draw(st.integers(0, len(args) - 1))] = pool[-1]
        try:
            if kind in ("add", "mul"):
                built = (o.add if kind == "add" else o.mul)(*args)
            elif kind == "neg":  # often of a product led by a constant, or beside its operand
                built = o.neg(o.mul(leaves[-1], *args[1:]) if draw(st.booleans()) else args[0])
                built = o.add(args[0], built) if draw(st.booleans()) else built
            elif kind == "div":
                built = o.true_div(args[0], args[1])
            elif kind == "reciprocal":
                built = o.reciprocal(args[0])
            elif kind == "pow":
                built = o.pow(args[0], draw(st.sampled_from([constant(np.array(2, dtype=dtype)), args[1]])))
            else:
                built = o.fill(args[0], constant(np.array(draw(st.sampled_from([0, 1])), dtype=dtype)))
        except (TypeError, ValueError):
            continue
        pool.append(built)
    return pool[-1]


@pytest.mark.parametrize("name", list(FOCUS))
@given(data=st.data())
def test_operand_list_rules_keep_the_values_of_generated_operand_lists(name, data):
    graph = data.draw(st.one_of(operand_list_graphs(), operand_list_graphs(FOCUS[name])), label="graph")
    assert_keeps_values_on_subterms(name, graph, data)


@pytest.mark.parametrize("name", list(FOCUS))
@given(data=st.data())
def test_operand_list_rules_keep_the_values_of_generated_graphs(name, data):
    input_type = data.draw(st.sampled_from(INPUT_TYPES))
    _, graph = data.draw(expression_graphs(GENERATED_OPS, max_nodes=10, input_type=input_type), label="graph")
    assert_keeps_values_on_subterms(name, graph, data)


@st.composite
def shape_op_graphs(draw) -> Variable:
    """Chains of DimShuffle, Reshape, Cast, Alloc and Sum-of-products over a tensor of drawn static shape."""
    shape = tuple(draw(st.lists(st.sampled_from([None, 1, 2, 3]), max_size=3)))
    dtype = draw(st.sampled_from(["float64", "float32", "int8"]))
    graph = tensor("x", dtype, shape)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["dimshuffle", "reshape", "cast", "alloc", "sum"]))
        static = graph.type.shape
        try:
            if kind == "dimshuffle":
                order = [
                    a
                    for a in draw(st.permutations(range(graph.ndim)))
                    if static[a] != 1 or draw(st.booleans())
                ]
                for _ in range(draw(st.integers(0, 1))):
                    order.insert(draw(st.integers(0, len(order))), "x")
                graph = o.DimShuffle(graph.ndim, tuple(order))(graph)
            elif kind == "reshape":
                size = None if None in static else int(np.prod(static))
                options = [(-1,), tuple(-1 if s is None else s for s in static)]
                if size is not None:
                    options += [static, (size,), (1, size), (size, 1), (-1, 1)]
                graph = graph.reshape(*draw(st.sampled_from(options)))
            elif kind == "cast":
                graph = o.cast(graph, draw(st.sampled_from([graph.dtype, "float64", "float32"])))
            elif kind == "alloc" and None not in static:
                graph = o.Alloc(draw(st.sampled_from([static, (2, *static)])))(graph)
            elif kind == "sum":
                scalar_ = draw(
                    st.sampled_from([constant(np.array(2, dtype=graph.dtype)), tensor("s", graph.dtype, ())])
                )
                factors = [scalar_, graph] if draw(st.booleans()) else [graph, scalar_, graph]
                axis = draw(st.sampled_from([None, *range(graph.ndim)]))
                graph = o.Sum(axis)(o.mul(*factors))
        except (TypeError, ValueError):
            continue
    return graph


@pytest.mark.parametrize("name", SHAPE_RULES)
@given(data=st.data())
def test_shape_rules_keep_the_values_of_generated_shape_op_chains(name, data):
    assert_keeps_values_on_subterms(name, data.draw(shape_op_graphs(), label="graph"), data)


# -- PyTensor's alloc, join, cast, dot and reduction rewrites (issue 27): each fires in its modes --------


def _mode_cases() -> list[tuple[str, list[Variable], Variable, str]]:
    """(rule, inputs, graph, what canonicalize makes of it) for the cases PyTensor's tests check."""
    v, e, s = tensor("v", "float64", (3,)), tensor("e", "float64", (0,)), scalar("s")
    i = tensor("i", "int32", (3,))
    A, B = tensor("A", "float64", (2, 3)), tensor("B", "float64", (3, 4))
    return [
        ("sum_div_scalar", [v], o.sum(v / 4.0), "(sum(v, axis=None) / 4.0)"),
        ("prod_scalar_mul", [s, v], o.prod(s * v), "(prod(v, axis=None) * (s ** 3.0))"),
        ("cast_cast", [i], o.cast(o.cast(i, "int64"), "float32"), "cast(i, dtype='float32')"),
        ("alloc_alloc", [s], o.alloc(o.alloc(s, 3), 2, 3), "alloc(s, shape=(2, 3))"),
        ("join_of_one_part", [v], o.stack([v]), "dimshuffle(v, input_ndim=1, new_order=('x', 0))"),
        ("join_of_empty_parts", [v, e], o.concatenate([e, v, e]), "v"),
        ("transpose_of_dot", [A, B], o.transpose(o.dot(A, B)), "(B.T @ A.T)"),
    ]


@pytest.mark.parametrize("mode", ["fast_run", "fast_compile"])
@pytest.mark.parametrize("case", range(len(_mode_cases())))
def test_pytensor_alloc_join_cast_dot_rewrites_fire_in_their_modes_keeping_values(case, mode):
    name, inputs, graph, expected = _mode_cases()[case]
    assert {"canonicalize", "fast_run", "fast_compile"} <= get_rule(name).tags
    assert pprint(rewrite_graph(graph, include=["canonicalize"], clone=True)) == expected
    compiled = compile_in_mode(inputs, graph, mode=mode)
    ops = [node.op for node in compiled.fgraph.apply_nodes]
    inner = [n.op for op in ops if isinstance(op, o.Composite) for n in op.nodes]
    assert not any(isinstance(op, o.Join) for op in ops)  # no join of one part, nor of empty ones
    assert (
        sum(isinstance(op, o.Alloc) for op in ops) <= 1
        and sum(isinstance(op, o.Cast) for op in ops + inner) <= 1
    )
    assert sum(isinstance(op, o.DimShuffle) for op in ops) <= 2  # B.T @ A.T fold into the product's call
    rng = np.random.default_rng(case)
    values = [rng.integers(-9, 9, v.type.shape).astype(v.dtype) for v in inputs]
    np.testing.assert_allclose(compiled(*values), numpy_function(inputs, graph)(*values), rtol=1e-6)


def test_transpose_of_dot_runs_both_ways_on_matrices_only():
    A, B, x = matrix("A"), matrix("B"), vector("x")
    rule = get_rule("transpose_of_dot")
    lifted = forward(rule, o.transpose(o.dot(A, B)))
    assert pprint(lifted) == "(B.T @ A.T)"
    assert any(pprint(g) == "(A @ B).T" for g in backward(rule, lifted))
    assert forward(rule, o.transpose(o.dot(A, x).dimshuffle("x", 0))) is None


def test_cast_cast_only_drops_a_cast_that_changes_no_value():
    x = tensor("x", "float64", (3,))
    rule = get_rule("cast_cast")
    assert forward(rule, o.cast(o.cast(x, "float32"), "float64")) is None  # rounds x to float32
    assert forward(rule, o.cast(o.cast(x, "int64"), "float64")) is None  # truncates
    i = tensor("i", "int16", (3,))
    assert pprint(forward(rule, o.cast(o.cast(i, "float32"), "int8"))) == "cast(i, dtype='int8')"
    values = np.array([-32768, 300, 32767], dtype=np.int16)
    before, after = o.cast(o.cast(i, "float32"), "int8"), forward(rule, o.cast(o.cast(i, "float32"), "int8"))
    np.testing.assert_array_equal(numpy_function([i], after)(values), numpy_function([i], before)(values))


def test_sum_div_scalar_needs_a_finite_nonzero_constant_unless_unsafe():
    x, s = vector("x"), scalar("s")
    assert canon("sum(x / 0.0)", {"x": "vector"}) == "Sum{axis=None}(true_div(x, 0.0))"
    assert canon("sum(x / s)", {"x": "vector", "s": "scalar"}) == "Sum{axis=None}(true_div(x, s))"
    graph = o.sum(x / s)
    unsafe = rewrite_graph(graph, include=UNSAFE, clone=True)
    assert pprint(unsafe) == "(sum(x, axis=None) / s)"


def test_dot_of_zeros_is_unsafe_and_opt_in():
    B = tensor("B", "float64", (3, 4))
    graph = o.dot(o.alloc(0.0, 2, 3), B)
    assert pprint(rewrite_graph(graph, include=["canonicalize"], clone=True)) == pprint(graph)
    assert pprint(rewrite_graph(graph, include=UNSAFE, clone=True)) == "alloc(0.0, shape=(2, 4))"
    assert (
        pprint(rewrite_graph(o.dot(B.T, o.alloc(0.0, 3)), include=UNSAFE, clone=True))
        == "alloc(0.0, shape=(4,))"
    )
    assert "unsafe" in get_rule("dot_with_zeros").tags and get_rule("dot_of_zeros").semantics == "unsafe"


@given(st.data())
def test_prod_scalar_mul_raises_the_scalars_to_the_count_reduced(data):
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.sampled_from([1, 2, 3, None])) for _ in range(ndim))
    axis = data.draw(st.none() | st.lists(st.integers(0, ndim - 1), unique=True, min_size=1).map(tuple))
    dtype = data.draw(st.sampled_from(["float64", "float32", "int64"]))
    s, x = tensor("s", dtype, ()), tensor("x", dtype, shape)
    graph = o.prod(o.mul(s, x), axis=axis)
    rhs = assert_answers_keep_values(get_rule("prod_scalar_mul"), graph, data)
    axes = range(ndim) if axis is None else axis
    assert (rhs is not None) == (dtype != "int64" and all(shape[a] is not None for a in axes)), pprint(graph)


UNARY_OPS = [
    op
    for op in vars(o).values()
    if isinstance(op, o.Elemwise) and op.nin == 1 and type(op).make_node is o.Elemwise.make_node
]


@pytest.mark.parametrize("mode", ["fast_run", "fast_compile"])
def test_every_unary_elementwise_op_of_an_alloc_runs_once_per_element_of_its_value(mode):
    s = scalar("s")
    assert len(UNARY_OPS) >= 25
    for op in [*UNARY_OPS, o.Cast("float32")]:
        graph = op(o.alloc(s, 2, 3))
        compiled = compile_in_mode([s], graph, mode=mode)
        (out,) = compiled.fgraph.outputs
        assert isinstance(out.owner.op, o.Alloc), (op, pprint(out))
        value = np.float64(0.75)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(compiled(value), numpy_function([s], graph)(value), rtol=1e-6)


@pytest.mark.parametrize(
    "text, dropped",
    [
        ("add(alloc(s, 2, 3), m)", True),
        ("mul(m, alloc(v, 2, 3), s)", True),
        ("pow(m, alloc(v, 2, 3))", True),
        ("switch(m > 0, alloc(s, 2, 3), m)", True),
        ("add(alloc(s, 2, 3), v)", False),  # v alone is only (3,): the alloc gives the rows
        ("add(alloc(s, 2, 3), u)", False),  # u's length is unknown: nothing proves the shape
    ],
)
def test_an_alloc_among_operands_that_shape_the_result_anyway_goes(text, dropped):
    types = {"s": "scalar", "m": "(2, 3)", "v": "(3,)", "u": "vector"}
    graph = parse(text, types)
    inputs = sorted(graph_inputs([graph]), key=lambda v: v.name)
    inputs = [v for v in inputs if not isinstance(v, Constant)]
    compiled = compile_in_mode(inputs, graph, mode="fast_run")
    has_alloc = any(isinstance(n.op, o.Alloc) for n in compiled.fgraph.apply_nodes)
    assert has_alloc != dropped, pprint(compiled.fgraph.outputs[0])
    rng = np.random.default_rng(0)
    values = [rng.uniform(0.5, 2.0, [3 if d is None else d for d in v.type.shape]) for v in inputs]
    np.testing.assert_allclose(compiled(*values), numpy_function(inputs, graph)(*values))


def test_dimshuffles_that_only_move_length_one_axes_collapse_to_their_input():
    C, R, T = (
        tensor("C", "float64", (3, 1)),
        tensor("R", "float64", (1, 1)),
        tensor("T", "float64", (1, None, 1)),
    )
    cases = [
        o.DimShuffle(1, (0, "x"))(o.DimShuffle(2, (0,))(C)),  # a length-1 axis dropped, then one added
        o.transpose(R),
        o.DimShuffle(3, (2, 1, 0))(T),
        o.DimShuffle(1, (0,))(o.DimShuffle(1, ("x", 0))(tensor("x", "float64", (None,))).dimshuffle(1)),
    ]
    for graph in cases:
        for mode in ("fast_run", "fast_compile"):
            compiled = compile_in_mode(graph_inputs([graph]), graph, mode=mode)
            assert not any(isinstance(n.op, o.DimShuffle) for n in compiled.fgraph.apply_nodes), pprint(graph)
    moved = o.DimShuffle(3, (1, 0, 2))(tensor("U", "float64", (1, 2, 1)))  # the length-2 axis moves
    assert forward(get_rule("useless_dimshuffle"), moved) is None


# -- 0 / x and 1 ** x in the compiled pipeline -----------------------------------------------------

FAST_RUN_UNSAFE = rw.Mode(query=Query(include=["fast_run", "unsafe"]))


def ops_of(f) -> set[type]:
    return {type(node.op) for node in f.fgraph.apply_nodes}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_zero_div_gives_zeros_with_unsafe_rules_and_keeps_the_nan_at_zero_without(dtype):
    x = vector("x", dtype=dtype)
    values = np.array([2.0, -np.inf, 0.0, np.nan], dtype=dtype)
    unsafe = rw.function([x], parse("0 / x", types={"x": x}), mode=FAST_RUN_UNSAFE)
    assert o.TrueDiv not in ops_of(unsafe)
    result = unsafe(values)
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, np.zeros(4))
    safe = rw.function([x], parse("0 / x", types={"x": x}), mode="fast_run")
    with np.errstate(invalid="ignore"):
        assert np.isnan(safe(values)[2:]).all()


def test_zero_div_keeps_the_shape_zeros_broadcast_to_and_leaves_integers_alone():
    x = vector("x")
    f = rw.function([x], o.true_div(constant(np.zeros((2, 1))), o.exp(x)), mode=FAST_RUN_UNSAFE)
    assert not ops_of(f) & {o.TrueDiv, o.Exp}
    np.testing.assert_array_equal(f(np.ones(3)), np.zeros((2, 3)))
    assert list(c.zero_div.forward(parse("0 / i", types={"i": "vector:int32"}))) == []
    assert list(c.zero_div.forward(o.true_div(constant(np.array([0.0, 1.0])), x))) == []


def test_one_pow_gives_ones_in_fast_run_for_every_exponent():
    x = vector("x")
    f = rw.function([x], parse("1 ** x", types={"x": x}), mode="fast_run")
    assert o.Pow not in ops_of(f)
    np.testing.assert_array_equal(f(np.array([np.nan, np.inf, -np.inf, 0.0, -3.5])), np.ones(5))
    s = scalar("s")
    g = rw.function([s], o.pow(constant(np.ones((3,))), s), mode="fast_run")
    assert o.Pow not in ops_of(g)
    np.testing.assert_array_equal(g(np.float64(np.nan)), np.ones(3))


def test_one_pow_leaves_integer_powers_and_other_bases_alone():
    assert list(c.one_pow.forward(parse("1 ** i", types={"i": "vector:int32"}))) == []
    assert list(c.one_pow.forward(parse("2 ** x", types={"x": "vector"}))) == []
    assert list(c.one_pow.forward(o.pow(constant(np.array([1.0, 2.0])), vector("x")))) == []


@given(
    lengths=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    ones=st.lists(st.integers(0, 3), max_size=3),
    minus_one=st.booleans(),
)
def test_a_reshape_that_only_moves_length_one_axes_is_a_dimshuffle_with_the_same_values(
    lengths, ones, minus_one
):
    x = tensor("x", "float64", tuple(lengths))
    target = [d for d in lengths if d != 1]
    for position in ones:
        target.insert(min(position, len(target)), 1)
    if minus_one and target:
        target[-1] = -1
    graph = o.Reshape(tuple(target))(x)
    (moved,) = list(c.reshape_to_dimshuffle.forward(graph)) or [None]
    assert moved is not None, (lengths, target)
    moved = to_graph(moved, like=graph)
    assert isinstance(moved.owner.op, o.DimShuffle) and moved.type == graph.type
    value = np.arange(float(np.prod(lengths))).reshape(lengths)
    np.testing.assert_array_equal(numpy_function([x], moved)(value), numpy_function([x], graph)(value))


def test_a_reshape_that_regroups_lengths_stays_a_reshape():
    for shape, target in [((2, 3), (6,)), ((2, 3), (3, 2)), ((6,), (2, 3))]:
        assert list(c.reshape_to_dimshuffle.forward(o.Reshape(target)(tensor("x", "float64", shape)))) == []
    assert list(c.reshape_to_dimshuffle.forward(o.Reshape((3, 1))(tensor("u", "float64", (None,))))) == []


CANCELLING_CONSTANTS = [2.0, 0.5, -1.0, -3.0, 0.0, -0.0, np.inf, -np.inf, np.nan]


@st.composite
def sums_of_like_terms(draw: st.DrawFn) -> Variable:
    """A float sum of 2-5 terms c * v, -(c * v), -v or v over a few shared v, with constants of every sign
    and non-finite ones, as canonicalize leaves products (the constant anywhere among the factors)."""
    x, y = vector("x"), vector("y")
    cores = [x, y, o.exp(x), o.mul(x, y)]
    terms = []
    for _ in range(draw(st.integers(2, 5))):
        core = draw(st.sampled_from(cores))
        shape = draw(st.sampled_from(["plain", "scaled", "negated", "negated scaled", "scaled last"]))
        c = constant(draw(st.sampled_from(CANCELLING_CONSTANTS)))
        term = {
            "plain": core,
            "scaled": o.mul(c, core),
            "scaled last": o.mul(core, c),
            "negated": o.neg(core),
            "negated scaled": o.neg(o.mul(c, core)),
        }[shape]
        terms.append(term)
    return o.add(*terms)


@pytest.mark.parametrize("name", ["collect_terms", "collect_terms_cancelling"])
@given(total=sums_of_like_terms())
def test_the_gathering_of_terms_is_screened_out_only_where_it_has_no_answer(name, total):
    """Their operand screens (two terms whose factors' heads agree, a negated product matching any; for
    the cancelling rule also a negated term, or a product with a constant not finite and positive) are
    necessary conditions on the sums where they may apply: they refuse none they rewrite."""
    assert_screened_out_only_without_answer(get_rule(name), total)


def test_the_gathering_of_terms_screens_out_sums_of_unlike_terms():
    x, y = vector("x"), vector("y")
    rule_ = get_rule("collect_terms")
    assert not rule_.operand_screen(o.add(x, y, o.exp(x))) and not rule_.operand_screen(o.add(x, 2.0))
    assert rule_.operand_screen(o.add(o.mul(3.0, o.exp(x)), o.exp(y)))  # heads agree; the rule decides
    assert rule_.operand_screen(o.add(o.neg(o.mul(x, y)), o.exp(y)))  # a negated product's factors are deeper
    assert not rule_.operand_screen(o.add(o.neg(x), y)) and rule_.operand_screen(o.add(o.neg(x), x))


def test_collect_terms_cancelling_screens_out_sums_of_positive_coefficients():
    x, y = vector("x"), vector("y")
    rule_ = get_rule("collect_terms_cancelling")
    assert not rule_.operand_screen(o.add(o.mul(2.0, x), x, o.exp(y)))
    assert rule_.operand_screen(o.add(o.mul(2.0, x), o.neg(x)))
    assert rule_.operand_screen(o.add(o.mul(x, -1.0), x))
    assert rule_.operand_screen(o.add(o.mul(np.nan, x), x))
    assert not rule_.operand_screen(o.add(o.neg(vector("i", "int64")), vector("j", "int64")))


@st.composite
def products_of_like_factors(draw: st.DrawFn) -> Variable:
    """A float product of 2-4 factors v or v ** e over a few shared v, exponents integer or not, constant
    or not, with a constant factor now and then."""
    x, y = vector("x"), vector("y")
    bases = [x, y, o.exp(x)]
    factors = []
    for _ in range(draw(st.integers(2, 4))):
        base = draw(st.sampled_from(bases))
        exponent = draw(st.sampled_from([None, 2.0, 3.0, 0.5, -1.0, 0.0, "y"]))
        if exponent is None:
            factors.append(base)
        else:
            factors.append(o.pow(base, y if exponent == "y" else constant(exponent)))
    if draw(st.booleans()):
        factors.insert(draw(st.integers(0, len(factors))), constant(draw(st.sampled_from([2.0, -1.0]))))
    return o.mul(*factors)


@pytest.mark.parametrize("name", ["collect_factors", "collect_factors_general"])
@given(product=products_of_like_factors())
def test_the_gathering_of_factors_is_screened_out_only_where_it_has_no_answer(name, product):
    """Their operand screens (a power among the factors, one with an exponent not a positive integer for
    the general rule; or factors all alike) are necessary conditions: they refuse none they rewrite."""
    assert_screened_out_only_without_answer(get_rule(name), product)


def test_the_gathering_of_factors_screens_out_products_without_powers():
    x, y = vector("x"), vector("y")
    exact, general = get_rule("collect_factors"), get_rule("collect_factors_general")
    assert exact.operand_screen(o.mul(x, x)) and not exact.operand_screen(o.mul(x, y))
    assert not exact.operand_screen(o.mul(2.0, x, x)) and exact.operand_screen(o.mul(2.0, o.pow(x, 2.0), x))
    assert not general.operand_screen(o.mul(o.pow(x, 2.0), x)) and general.operand_screen(
        o.mul(o.pow(x, 0.5), x)
    )
    assert general.operand_screen(o.mul(o.pow(x, y), x))


@st.composite
def products_with_quotients(draw: st.DrawFn) -> Variable:
    """A float product of 2-4 factors among x, y, exp(x), x * y, quotients and reciprocals of those."""
    x, y = vector("x"), vector("y")
    plain = [x, y, o.exp(x), o.mul(x, y)]
    forms = [*plain, *(o.true_div(a, b) for a in plain[:2] for b in plain), *(o.reciprocal(a) for a in plain)]
    return o.mul(*draw(st.lists(st.sampled_from(forms), min_size=2, max_size=4)))


@given(product=products_with_quotients())
def test_the_cancelling_of_factors_is_screened_out_only_where_it_has_no_answer(product):
    """mul_cancel's operand screen (a quotient or reciprocal whose divisor has another factor's head) and
    mul_div_cancel's (the divisor has a head among the numerator's factors) refuse nothing they rewrite."""
    assert_screened_out_only_without_answer(get_rule("mul_cancel"), product)
    for divisor in (vector("x"), product.owner.inputs[-1]):
        assert_screened_out_only_without_answer(get_rule("mul_div_cancel"), o.true_div(product, divisor))

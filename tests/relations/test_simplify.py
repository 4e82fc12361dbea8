"""Simplify rules: each rewrites its examples as documented and comes back from its right side, is sound
in both directions in another float dtype, and refuses the near misses that would change a value, a dtype
or a shape (a float NaN, an integer square that wraps, a dropped operand that widens the result).

Catalogue-wide checks (metadata, soundness on random types, edge-value semantics, the runtime against
plain kanren) live in test_catalogue.py, test_semantics.py and test_runtime.py.
"""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import run, var
from unification.variable import isvar

import relwrite as rw
from relwrite.backends.numpy.function import numpy_function
from relwrite.compile.function import function as compile_in_mode
from relwrite.engine import rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable, ancestors, graph_inputs, tensor
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.graph.terms import same_expression
from relwrite.relations import Rule, catalogue, simplify
from relwrite.relations.docs import rewrite_example_graphs
from relwrite.relations.pattern import can_replace, to_graph
from relwrite.testing import ac_text, check_relation
from tests.relations.rule_checks import assert_answers_keep_values

RULES = [r for r in vars(simplify).values() if isinstance(r, Rule)]
BY_NAME = {r.name: r for r in RULES}
by_rule = pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
EXAMPLES = [pytest.param(r, text, id=f"{r.name}: {text}") for r in RULES for text in r.examples]


def forward(rule: Rule, graph: Variable) -> Variable | None:
    """The rule's first answer on `graph` that may replace it, as a graph, or None."""
    for answer in islice(rule.forward(graph), 16):
        if not isvar(answer):
            new = to_graph(answer, like=graph)
            if can_replace(graph, new):
                return new
    return None


def evaluate(graph: Variable, **values: np.ndarray) -> np.ndarray:
    inputs = sorted((v for v in graph_inputs([graph]) if not isinstance(v, Constant)), key=lambda v: v.name)
    with np.errstate(all="ignore"):
        return numpy_function(inputs, graph)(*(values[v.name] for v in inputs))


def float32_types(types: dict[str, str]) -> dict[str, str]:
    """The rule's types with float64 (written or implied) replaced by float32."""
    changed = {}
    for name, spec in types.items():
        kind, _, dtype = spec.partition(":")
        changed[name] = f"{kind}:float32" if dtype in ("", "float64") else spec
    return changed


# -- the module's rules ----------------------------------------------------------------------------


def test_the_module_holds_at_least_forty_catalogue_rules_all_canonicalize():
    names = {r.name for r in catalogue()}
    assert len(RULES) >= 40
    assert all(r.name in names for r in RULES)
    assert all(r.phase == "canonicalize" and r.doc and r.examples for r in RULES)


def test_the_rules_valid_only_under_assumptions_are_unsafe_and_opt_in():
    unsafe = {r.name for r in RULES if r.semantics == "unsafe"}
    assert unsafe == {"log_of_product", "sqr_over_self", "expm1_log1p", "softplus_log"}
    assert all(BY_NAME[n].assumptions and "unsafe" in BY_NAME[n].tags for n in unsafe)
    x = tensor("x", "float64", (None,))
    graph = o.softplus(o.log(x))  # PyTensor issue 1451: log1p(x), where x >= 0 (NaN below on the left)
    assert pprint(rewrite_graph(graph, include=["canonicalize"], clone=True)) == "softplus(log(x))"
    assert pprint(rewrite_graph(graph, include=["canonicalize", "unsafe"], clone=True)) == "log1p(x)"


@pytest.mark.parametrize("rule, text", EXAMPLES)
def test_examples_rewrite_keep_their_type_and_come_back(rule, text):
    before, after = rewrite_example_graphs(rule, text)
    assert after.type == before.type and pprint(after) != pprint(before)
    if rule.backward:
        q = var()
        lefts = [to_graph(found, like=after) for found in run(4, q, rule(q, after))]
        assert ac_text(before) in [ac_text(left) for left in lefts], [pprint(left) for left in lefts]


@by_rule
def test_sound_in_both_directions_in_float32(rule):
    report = check_relation(rule, types=float32_types(rule.types), max_examples=25, seed=9)
    assert report.examples["forward"] > 0
    assert ("backward" in report.directions) == rule.backward


# -- what the examples become ----------------------------------------------------------------------

DOCUMENTED = [
    ("maximum_self", "maximum(x, x)", "x"),
    ("lt_self", "x < x", "fill(x, False)"),
    ("switch_true", "switch(True, a, b)", "a"),
    ("switch_false", "switch(False, a, b)", "b"),
    ("abs_sqr", "abs(sqr(x))", "sqr(x)"),
    ("cos_neg", "cos(neg(x))", "cos(x)"),
    ("erf_neg", "erf(neg(x))", "-erf(x)"),
    ("mul_by_reciprocal", "mul(x, reciprocal(y))", "(x / y)"),
    ("add_fill_cut", "add(fill(m, x), y)", "(x + y)"),
    ("pow_of_pow", "pow(pow(x, 2), 3)", "(x ** mul(2.0, 3.0))"),  # constant folding multiplies
    ("log_of_product", "log(mul(a, b))", "(log(a) + log(b))"),
    ("sqr_over_self", "true_div(sqr(x), x)", "x"),
    ("softplus_log", "softplus(log(x))", "log1p(x)"),
    ("sum_neg", "sum(neg(X), axis=1)", "-sum(X, axis=(1,))"),
    ("sum_sum", "sum(sum(X, axis=0))", "sum(X, axis=None)"),
    ("sum_sum", "sum(sum(T, axis=1), axis=-1)", "sum(T, axis=(1, 2))"),
]


@pytest.mark.parametrize("name, text, expected", DOCUMENTED)
def test_an_example_becomes_what_the_rule_documents(name, text, expected):
    assert pprint(rewrite_example_graphs(BY_NAME[name], text)[1]) == expected


# -- near misses: no rewrite where a value, dtype or shape would change ------------------------------

NEAR_MISSES = [
    ("le_self", "x <= x", {"x": "vector"}),  # a NaN is not <= itself
    ("ge_self", "x >= x", {"x": "vector"}),
    ("eq_self", "x == x", {"x": "vector:float32"}),
    ("neq_self", "x != x", {"x": "vector"}),
    ("abs_sqr", "abs(sqr(x))", {"x": "vector:int8"}),  # 12 * 12 wraps to -112 in int8
    ("sin_neg", "sin(neg(x))", {"x": "vector:int64"}),  # -INT_MIN wraps
    ("switch_true", "switch(True, a, b)", {"a": "(1,)", "b": "(3,)"}),  # b widens the result
    ("switch_same", "switch(c, a, a)", {"c": "(2, 3):bool", "a": "(3,)"}),  # c widens it
    ("add_fill_cut", "add(fill(m, x), y)", {"m": "(2, 3)", "x": "(3,)", "y": "(3,)"}),  # m widens it
    ("pow_of_pow", "pow(pow(x, 2), 0.5)", {"x": "vector"}),  # sqrt(x ** 2) is abs(x)
    ("pow_of_pow", "pow(pow(x, y), 2)", {"x": "vector", "y": "vector"}),
    ("sum_neg", "sum(neg(x))", {"x": "vector:int8"}),  # the sum widens: -(-128) wraps first
    ("sum_neg", "sum(neg(x))", {"x": "vector:bool"}),
    ("extremum_of_neg", "max(neg(x))", {"x": "vector:int64"}),  # -min wraps at the smallest integer
    (
        "sum_of_join",
        "sum(join(X, Y, axis=1))",
        {"X": "matrix", "Y": "matrix"},
    ),  # rows may differ: join raises
    ("sum_of_join", "sum(join(x, n, axis=0))", {"x": "vector", "n": "vector:int8"}),  # the join converts n
    ("sum_of_join", "sum(join(x, y, axis=0), axis=0)", {"x": "vector", "y": "vector"}),
    # fuzzer: moving the fill's value first makes True + True a bool sum (True) before int8 widens it
    (
        "add_fill_cut",
        "add(fill(m, b), n, fill(m, b), y)",
        {"m": "(2,)", "b": "bool", "n": "(2,):int8", "y": "(2,)"},
    ),
    ("extremum_of_neg", "sum(neg(x))", {"x": "vector"}),
    ("sum_sum", "sum(mean(X, axis=0))", {"X": "matrix"}),
]


@pytest.mark.parametrize("name, text, types", NEAR_MISSES, ids=[f"{n}: {t}" for n, t, _ in NEAR_MISSES])
def test_near_misses_are_not_rewritten(name, text, types):
    try:
        graph = parse(text, types=types)
    except TypeError:  # the near miss does not even build (neg of a bool)
        return
    assert forward(BY_NAME[name], graph) is None


def test_a_float_nan_is_why_x_le_x_stays():
    x = parse("x <= x", types={"x": "vector"})
    assert evaluate(x, x=np.array([1.0, np.nan])).tolist() == [True, False]


def test_x_lt_x_is_false_everywhere_nan_included_and_keeps_the_shape():
    rewritten = rewrite_example_graphs(BY_NAME["lt_self"], "x < x", {"x": "(3,)"})[1]
    assert rewritten.type.shape == (3,) and rewritten.dtype == "bool"
    assert evaluate(rewritten, x=np.array([np.nan, -np.inf, 0.0])).tolist() == [False, False, False]


def test_odd_functions_keep_the_sign_of_zero():
    values = np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, 1e-310, -3.5])
    for name in ("sin_neg", "tanh_neg", "erf_neg"):
        before, after = rewrite_example_graphs(BY_NAME[name], BY_NAME[name].examples[0])
        left, right = evaluate(before, x=values), evaluate(after, x=values)
        np.testing.assert_array_equal(left, right)
        numbers = ~np.isnan(left)  # the sign of a NaN means nothing
        assert np.array_equal(np.signbit(left[numbers]), np.signbit(right[numbers])), name


def test_fill_cut_keeps_the_shape_the_fill_gave():
    """fill(m, x) + y with m and y of one shape: dropping m changes nothing, however x broadcasts."""
    types = {"m": "(2, 3)", "x": "(3,)", "y": "(2, 3)"}
    before, after = rewrite_example_graphs(BY_NAME["add_fill_cut"], "add(fill(m, x), y)", types)
    assert after.type == before.type and pprint(after) == "(x + y)"
    m, x, y = np.zeros((2, 3)), np.arange(3.0), np.ones((2, 3))
    np.testing.assert_array_equal(evaluate(before, m=m, x=x, y=y), evaluate(after, x=x, y=y))


# -- sums ----------------------------------------------------------------------------------------------


def test_sum_neg_is_exact_for_64_bit_integers_wrapping_around():
    before, after = rewrite_example_graphs(BY_NAME["sum_neg"], "sum(neg(n))")
    n = np.array([np.iinfo(np.int64).min, 5, -7, np.iinfo(np.int64).max], dtype=np.int64)
    assert evaluate(before, n=n) == evaluate(after, n=n)


def test_sum_neg_differs_only_in_the_sign_of_a_zero_sum():
    before, after = rewrite_example_graphs(BY_NAME["sum_neg"], "sum(neg(x))")
    x = np.array([0.0, -0.0])
    left, right = evaluate(before, x=x), evaluate(after, x=x)
    assert left == right == 0.0 and np.signbit(left) != np.signbit(right)


@st.composite
def nested_sums(draw) -> tuple[tuple[int, ...], object, object]:
    """(shape, inner axis, outer axis) of a valid sum(sum(x, inner), outer); axes may be negative."""
    shape = tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=4)))
    ndim = len(shape)

    def axes(rank: int):
        if rank == 0:
            return st.none()
        chosen = st.lists(st.integers(0, rank - 1), unique=True).map(sorted)
        signed = chosen.flatmap(lambda a: st.tuples(*(st.sampled_from([i, i - rank]) for i in a)))
        return st.none() | signed | st.integers(-rank, rank - 1)

    inner = draw(axes(ndim))
    reduced = ndim if inner is None else len({inner % ndim} if isinstance(inner, int) else set(inner))
    outer = draw(axes(ndim - reduced))
    return shape, inner, outer


@given(nested_sums(), st.data())
def test_sum_sum_merges_any_axes_into_one_exact_integer_sum(case, data):
    shape, inner, outer = case
    x = tensor("x", "int64", shape)
    before = o.sum(o.sum(x, axis=inner), axis=outer)
    after = forward(BY_NAME["sum_sum"], before)
    assert after is not None and after.type == before.type
    assert after.owner.inputs[0] is x and isinstance(after.owner.op, o.Sum)
    values = data.draw(
        st.lists(st.integers(-(2**62), 2**62), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))
    )
    array = np.array(values, dtype=np.int64).reshape(shape)
    np.testing.assert_array_equal(numpy_function([x], after)(array), numpy_function([x], before)(array))


# -- generated reductions: each rule fires exactly where its documentation says, keeping the values ----

INNER = ("neg", "neg", "sum", "max", "min", "join", "exp", "none")
OUTER = (o.Sum, o.Sum, o.Max, o.Min, o.Mean)
FOCUS = {  # the heads each rule reads, drawn half the time so that every rule fires on some graphs
    "sum_neg": (("neg",), (o.Sum,)),
    "extremum_of_neg": (("neg",), (o.Max,)),
    "min_of_neg": (("neg",), (o.Min,)),
    "sum_of_join": (("join",), (o.Sum,)),
    "sum_sum": (("sum",), (o.Sum, o.Mean)),
}


@st.composite
def reductions(draw, inners=INNER, outers=OUTER):
    """R(f(x...)) for a reduction R in `outers`, f in `inners` (neg/sum/max/min/join/exp or none), of
    several dtypes and axes."""
    dtype = draw(st.sampled_from(["float64", "float32", "int64", "int8"]))
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.sampled_from([None, 2, 3])) for _ in range(ndim))

    def axes(rank):
        if rank == 0:
            return None
        chosen = draw(st.lists(st.integers(0, rank - 1), unique=True, max_size=rank))
        return (
            None
            if not chosen or draw(st.booleans())
            else tuple(a - rank * draw(st.booleans()) for a in chosen)
        )

    x = tensor("x", dtype, shape)
    inner = draw(st.sampled_from(inners))
    if inner == "neg":
        body = o.neg(x)
    elif inner in ("sum", "max", "min"):
        body = {"sum": o.Sum, "max": o.Max, "min": o.Min}[inner](axes(ndim))(x)
    elif inner == "join":
        other = tensor("y", draw(st.sampled_from([dtype, "float64"])), shape)
        parts = draw(st.lists(st.sampled_from([x, other]), min_size=1, max_size=3))
        body = o.Join(draw(st.integers(-ndim, ndim - 1)))(*parts)
    else:
        body = o.exp(x) if inner == "exp" else x
    outer = draw(st.sampled_from(outers))
    return outer(axes(body.ndim))(body)


def expected_rewrite(name: str, graph: Variable) -> Variable | bool | None:
    """What rule `name` makes of `graph`, read off its structure and types: a graph, True where only its
    values are promised (sum_sum, sum_of_join), None where the rule must not fire."""
    op, (body,) = graph.owner.op, graph.owner.inputs
    inner = body.owner.op if body.owner is not None else None
    if name == "sum_sum":
        return (type(op) is o.Sum and type(inner) is o.Sum) or None
    if name == "sum_of_join":
        if type(op) is not o.Sum or op.axis is not None or not isinstance(inner, o.Join):
            return None
        parts = body.owner.inputs
        along = inner.axis % body.ndim
        lengths_agree = all(
            len({p.type.shape[d] for p in parts}) == 1 and parts[0].type.shape[d] is not None
            for d in range(body.ndim)
            if d != along
        )
        return (len({p.dtype for p in parts}) == 1 and lengths_agree) or None
    if inner != o.neg:
        return None
    (x,) = body.owner.inputs
    if name == "sum_neg":  # where the sum keeps x's dtype
        keeps = np.zeros(1, dtype=x.dtype).sum().dtype == x.dtype
        return o.neg(op(x)) if type(op) is o.Sum and keeps else None
    mirror = {"extremum_of_neg": (o.Max, o.Min), "min_of_neg": (o.Min, o.Max)}[name]
    floats = x.type.numpy_dtype.kind == "f"
    return o.neg(mirror[1](op.axis)(x)) if type(op) is mirror[0] and floats else None


@pytest.mark.parametrize("name", sorted(FOCUS))
@given(data=st.data())
def test_reduction_rules_fire_where_documented_keeping_the_values(name, data):
    graph = data.draw(st.one_of(reductions(), reductions(*FOCUS[name])), label="graph")
    rhs = assert_answers_keep_values(BY_NAME[name], graph, data)
    expected = expected_rewrite(name, graph)
    assert (rhs is None) == (expected is None), (pprint(graph), rhs)
    if isinstance(expected, Variable):
        assert same_expression(rhs, expected), (pprint(rhs), pprint(expected))
    if name == "sum_sum" and rhs is not None:  # one sum of x
        assert isinstance(rhs.owner.op, o.Sum) and rhs.owner.inputs == graph.owner.inputs[0].owner.inputs


# -- PyTensor's reduction rewrites and switch merges (issue 27): each fires in its modes -----------------


def _mode_cases() -> list[tuple[str, list[Variable], Variable, str]]:
    """(rule, inputs, graph, what canonicalize makes of it) for the cases PyTensor's tests check."""
    X, Y = tensor("X", "float64", (2, 3)), tensor("Y", "float64", (2, 3))
    C, s = tensor("C", "float64", (3, 1)), tensor("s", "float64", ())
    c, a, b, d = (tensor(n, "bool" if n == "c" else "float64", (3,)) for n in "cabd")
    return [
        ("prod_prod", [X], o.prod(o.prod(X, 0), 0), "prod(X, axis=None)"),
        ("sum_of_length_one_axes", [C], o.sum(C, axis=1), "dimshuffle(C, input_ndim=2, new_order=(0,))"),
        ("max_of_length_one_axes", [C], o.max(C, axis=1), "dimshuffle(C, input_ndim=2, new_order=(0,))"),
        ("sum_of_alloc", [s], o.sum(o.alloc(s, 2, 3)), "(6.0 * s)"),
        ("sum_of_alloc", [s], o.sum(o.alloc(s, 2, 3), axis=0), "alloc((2.0 * s), shape=(3,))"),
        ("prod_of_alloc", [s], o.prod(o.alloc(s, 2, 3)), "(s ** 6.0)"),
        (
            "sum_of_join_axes",
            [X, Y],
            o.sum(o.concatenate([X, Y]), 0),
            "(sum(X, axis=(0,)) + sum(Y, axis=(0,)))",
        ),
        (
            "sum_of_join_axes",
            [X, Y],
            o.sum(o.concatenate([X, Y]), 1),
            "join(sum(X, axis=(1,)), sum(Y, axis=(1,)), axis=0)",
        ),
        ("sum_of_join_axes", [X, Y], o.sum(o.stack([X, Y]), 0), "(X + Y)"),
        ("switch_merge_then", [c, a, b, d], o.switch(c, o.switch(c, a, b), d), "switch(c, a, d)"),
        ("switch_merge_else", [c, a, b, d], o.switch(c, a, o.switch(c, b, d)), "switch(c, a, d)"),
    ]


@pytest.mark.parametrize("mode", ["fast_run", "fast_compile"])
@pytest.mark.parametrize("case", range(len(_mode_cases())))
def test_pytensor_reductions_and_switch_merges_fire_in_their_modes_keeping_values(case, mode):
    name, inputs, graph, expected = _mode_cases()[case]
    assert {"canonicalize", "fast_run", "fast_compile"} <= BY_NAME[name].tags
    assert pprint(rewrite_graph(graph, include=["canonicalize"], clone=True)) == expected
    compiled = compile_in_mode(inputs, graph, mode=mode)
    ops = [node.op for node in compiled.fgraph.apply_nodes]
    nested = [op for op in ops if isinstance(op, o.Composite)]
    inner_switches = sum(isinstance(n.op, o.Switch) for op in nested for n in op.nodes)
    assert sum(isinstance(op, o.Switch) for op in ops) + inner_switches <= 1  # the two switches merged
    assert sum(isinstance(op, (o.Prod, o.Join)) for op in ops) <= 1  # one product, no join of parts
    if name.endswith("_alloc"):  # nothing filled only to be reduced
        assert not any(isinstance(op, o.Reduce) for op in ops), ops
    rng = np.random.default_rng(case)
    values = [
        rng.random(v.type.shape) > 0.5 if v.dtype == "bool" else rng.normal(size=v.type.shape) for v in inputs
    ]
    np.testing.assert_allclose(compiled(*values), numpy_function(inputs, graph)(*values), rtol=1e-12)


@given(nested_sums(), st.data())
def test_prod_prod_merges_any_axes_into_one_exact_integer_product(case, data):
    shape, inner, outer = case
    x = tensor("x", "int64", shape)
    before = o.prod(o.prod(x, axis=inner), axis=outer)
    after = forward(BY_NAME["prod_prod"], before)
    assert after is not None and after.type == before.type
    assert after.owner.inputs[0] is x and isinstance(after.owner.op, o.Prod)
    size = int(np.prod(shape))
    values = data.draw(st.lists(st.integers(-(2**40), 2**40), min_size=size, max_size=size))
    array = np.array(values, dtype=np.int64).reshape(shape)  # products wrap around: exact either way
    np.testing.assert_array_equal(numpy_function([x], after)(array), numpy_function([x], before)(array))


LENGTH_ONE = {o.Sum: "sum_of_length_one_axes", o.Prod: "prod_of_length_one_axes"}
LENGTH_ONE |= {o.Max: "max_of_length_one_axes", o.Min: "min_of_length_one_axes"}


@given(st.data())
def test_reductions_over_length_one_axes_drop_exactly_those_axes(data):
    kind = data.draw(st.sampled_from(sorted(LENGTH_ONE, key=str)), label="kind")
    dtype = data.draw(st.sampled_from(["float64", "float32", "int64", "int8"]), label="dtype")
    shape = tuple(
        data.draw(st.lists(st.sampled_from([1, 1, 2, None]), min_size=1, max_size=4), label="shape")
    )
    ndim = len(shape)
    chosen = data.draw(st.lists(st.integers(0, ndim - 1), unique=True, min_size=1), label="axes")
    axis = None if data.draw(st.booleans()) else tuple(a - ndim * data.draw(st.booleans()) for a in chosen)
    graph = kind(axis)(tensor("x", dtype, shape))
    rhs = assert_answers_keep_values(BY_NAME[LENGTH_ONE[kind]], graph, data)
    axes = range(ndim) if axis is None else {a % ndim for a in axis}
    fires = all(shape[a] == 1 for a in axes) and graph.dtype == dtype
    assert (rhs is not None) == fires, (pprint(graph), rhs)
    if fires:  # a DimShuffle keeping the other axes in order, of x itself
        assert isinstance(rhs.owner.op, o.DimShuffle) and rhs.owner.inputs == graph.owner.inputs
        assert rhs.owner.op.new_order == tuple(a for a in range(ndim) if a not in axes)


JOIN_KINDS = {o.Sum: "sum_of_join_axes", o.Prod: "prod_of_join_axes"}
JOIN_KINDS |= {o.Max: "max_of_join_axes", o.Min: "min_of_join_axes"}


@pytest.mark.parametrize("kind", list(JOIN_KINDS), ids=list(JOIN_KINDS.values()))
@given(data=st.data())
def test_a_reduction_of_a_join_over_explicit_axes_combines_the_parts_or_joins_theirs(kind, data):
    ndim = data.draw(st.integers(1, 3), label="ndim")
    shape = tuple(data.draw(st.sampled_from([2, 3, None])) for _ in range(ndim))
    along = data.draw(st.integers(-ndim, ndim - 1), label="join axis")
    dtypes = data.draw(
        st.lists(st.sampled_from(["float64", "int64"]), min_size=1, max_size=3), label="dtypes"
    )
    parts = []
    for i, dtype in enumerate(dtypes):  # the parts may differ in length on the joined axis only
        lengths = list(shape)
        lengths[along % ndim] = data.draw(st.sampled_from([1, 2, None]))
        parts.append(tensor(f"p{i}", dtype, tuple(lengths)))
    axes = tuple(data.draw(st.lists(st.integers(0, ndim - 1), unique=True, min_size=1), label="axes"))
    graph = kind(axes)(o.concatenate(parts, axis=along))
    rhs = assert_answers_keep_values(BY_NAME[JOIN_KINDS[kind]], graph, data)
    joined_reduced = along % ndim in axes
    off_axis_known = all(shape[d] is not None for d in range(ndim) if d != along % ndim)
    nonempty = kind in (o.Sum, o.Prod) or not joined_reduced or all(p.type.shape[along] for p in parts)
    assert (rhs is not None) == (len(set(dtypes)) == 1 and off_axis_known and nonempty), (pprint(graph), rhs)
    if rhs is not None and not joined_reduced:  # across the joined axis: a join of the reductions
        assert isinstance(rhs.owner.op, o.Join) and len(rhs.owner.inputs) == len(parts)


ALLOC_KINDS = {o.Sum: "sum_of_alloc", o.Prod: "prod_of_alloc", o.Max: "max_of_alloc", o.Min: "min_of_alloc"}


@pytest.mark.parametrize("kind", list(ALLOC_KINDS), ids=list(ALLOC_KINDS.values()))
@given(data=st.data())
def test_a_reduction_of_an_alloc_is_computed_from_its_value_and_the_count(kind, data):
    dtype = data.draw(st.sampled_from(["float64", "float32", "int64", "int8"]), label="dtype")
    shape = tuple(data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3), label="shape"))
    value_shape = data.draw(st.sampled_from([(), (1,), shape[-1:]]), label="value shape")
    chosen = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True), label="axes")
    axis = tuple(chosen) or None
    x = tensor("x", dtype, value_shape)
    graph = kind(axis)(o.Alloc(shape)(x))
    rhs = assert_answers_keep_values(BY_NAME[ALLOC_KINDS[kind]], graph, data)
    n = int(np.prod([shape[a] for a in (range(len(shape)) if axis is None else axis)]))
    fires = value_shape == () and graph.dtype == dtype and (n > 0 or kind is o.Prod)
    assert (rhs is not None) == fires, (pprint(graph), rhs)
    if fires:  # no reduction left: the value, combined with the count
        assert not any(isinstance(v.owner.op, o.Reduce) for v in ancestors([rhs]) if v.owner is not None)


@pytest.mark.parametrize(
    "text, dtype",
    [
        ("neg(mul(x, neg(y)))", "float64"),
        ("neg(mul(neg(x), y, z))", "float64"),
        ("neg(mul(x, -2.0))", "float64"),
        ("neg(mul(x, neg(y)))", "int8"),
    ],
)
def test_a_negated_product_with_a_negated_factor_loses_both_signs_in_fast_run(text, dtype):
    x, y, z = (tensor(n, dtype, (None,)) for n in "xyz")
    graph = parse(text, types={"x": x, "y": y, "z": z})
    inputs = [v for v in (x, y, z) if v in graph_inputs([graph])]
    f = rw.function(inputs, graph, mode="fast_run")
    ran = [n.op for node in f.fgraph.apply_nodes for n in getattr(node.op, "nodes", [node])]
    assert not any(isinstance(op, o.Neg) for op in ran), pprint(graph)
    values = [np.array([-128, 3, 7], dtype=dtype) if dtype == "int8" else np.array([1.5, -2.0, 3.0])] * len(
        inputs
    )
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(f(*values), numpy_function(inputs, graph)(*values))


def test_neg_mul_neg_leaves_products_of_mixed_dtypes_alone():
    graph = parse("neg(mul(x, neg(i)))", types={"x": "vector", "i": "vector:int8"})
    assert list(BY_NAME["neg_mul_neg"].forward(graph)) == []


@st.composite
def reductions_of_new_axes(draw):
    """A reduction (sum, prod, max, min) of x with length-1 axes inserted (x's own axes in order) over
    a drawn set of axes, and the values of x."""
    ndim = draw(st.integers(1, 3))
    order: list = list(range(ndim))
    for _ in range(draw(st.integers(1, 2))):
        order.insert(draw(st.integers(0, len(order))), "x")
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(order) - 1), min_size=1))))
    kind = draw(st.sampled_from([o.Sum, o.Prod, o.Max, o.Min]))
    lengths = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
    x = tensor("x", "float64", (None,) * ndim)
    value = np.random.default_rng(draw(st.integers(0, 99))).uniform(0.5, 2.0, lengths)
    return kind(axes)(o.DimShuffle(ndim, tuple(order))(x)), x, value, [order[a] for a in axes]


@given(reductions_of_new_axes())
def test_a_reduction_of_new_axes_reduces_x_itself_keeping_values(case):
    graph, x, value, reduced = case
    rule = {o.Sum: simplify.sum_of_new_axes, o.Prod: simplify.prod_of_new_axes}.get(
        type(graph.owner.op),
        simplify.max_of_new_axes if isinstance(graph.owner.op, o.Max) else simplify.min_of_new_axes,
    )
    answers = list(rule.forward(graph))
    assert bool(answers) == any(a != "x" for a in reduced)  # fires where an axis of x itself is reduced
    for answer in answers:
        rewritten = to_graph(answer, like=graph)
        assert rewritten.type == graph.type
        np.testing.assert_allclose(numpy_function([x], rewritten)(value), numpy_function([x], graph)(value))


@pytest.mark.parametrize(
    "text, scalar",
    [
        ("sub([2.0, 2.0, 2.0], m)", True),
        ("pow(m, [[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]])", True),
        ("add([0.5, 0.5, 0.5], m, v)", True),
        ("mul(m, [[-1.0, -1.0, -1.0]])", True),
        ("sub([2.0, 2.5, 2.0], m)", False),  # not uniform
        ("add([[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]], v)", False),  # the constant gives the rows
        ("add([2.0, 2.0, 2.0], u)", False),  # u's length is unknown
    ],
)
def test_a_uniform_array_constant_is_its_number_where_the_others_give_the_shape(text, scalar):
    types = {"m": "(2, 3)", "v": "(3,)", "u": "vector"}
    graph = parse(text, types)
    inputs = sorted((v for v in graph_inputs([graph]) if not isinstance(v, Constant)), key=lambda v: v.name)
    compiled = compile_in_mode(inputs, graph, mode="fast_compile")
    arrays = [c for n in compiled.fgraph.apply_nodes for c in n.inputs if isinstance(c, Constant) and c.ndim]
    assert (not arrays) == scalar, pprint(compiled.fgraph.outputs[0])
    values = [
        np.linspace(0.5, 2.0, 3 if d is None else d) if v.ndim == 1 else np.full((2, 3), 1.5)
        for v in inputs
        for d in v.type.shape[:1]
    ]
    np.testing.assert_allclose(compiled(*values), numpy_function(inputs, graph)(*values))


@pytest.mark.parametrize("dropped", ["uniform", "alloc"])
def test_an_operand_moved_first_never_changes_a_mixed_dtype_fold(dropped):
    """add(x, c, c) with boolean c of ones is x + 2 (the fold runs left to right, promoting as it goes);
    made add(True, True, x) by moving the constants first it was x + 1 (True + True is True).  The
    fuzzer found it; between two operands, or among one dtype, moving one first is exact."""
    x = tensor("x", dtype="float64", shape=(2, 2))
    ones = rw.constant(np.ones((2, 2), dtype=bool))
    c = ones if dropped == "uniform" else o.alloc(np.bool_(True), 2, 2)
    graph = o.add(x, c, c)
    value = np.zeros((2, 2))
    for mode in ("fast_compile", "fast_run"):
        got = compile_in_mode([x], graph, mode=mode)(value)
        np.testing.assert_array_equal(got[0] if isinstance(got, list) else got, np.full((2, 2), 2.0))

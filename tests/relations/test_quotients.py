"""The seed's mul canonicalization (mul_div_canonical, mul_of_quotients, mul_div_cancel_common), its greedy
distributor, and the fill sink: the forms the pipelines reach, the modes they fire in, and the values they
keep on generated graphs."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.backends.numpy.function import numpy_function
from relwrite.compile.function import function as compile_in_mode
from relwrite.engine import rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.basic import Variable, ancestors, constant, tensor
from relwrite.graph.printing import pprint
from relwrite.relations import get_rule, quotients
from relwrite.relations.simplify import broadcasting_elementwise
from tests.relations.rule_checks import assert_answers_keep_values, assert_screened_out_only_without_answer

SAFE, UNSAFE = ["canonicalize"], ["canonicalize", "unsafe"]


def vectors(names: str, dtype: str = "float64", shape: tuple = (3,)) -> list[Variable]:
    return [tensor(n, dtype, shape) for n in names]


def canon(graph: Variable, include=SAFE) -> str:
    return pprint(rewrite_graph(graph, include=include, clone=True))


def divisions(graph: Variable) -> int:
    return sum(v.owner is not None and v.owner.op in (o.true_div, o.reciprocal) for v in ancestors([graph]))


def values_for(inputs: list[Variable], seed: int = 0) -> list[np.ndarray]:
    """Finite nonzero values of either sign (where the unsafe cancellations are valid)."""
    rng = np.random.default_rng(seed)
    return [
        (rng.uniform(0.5, 2, v.type.shape) * rng.choice([-1, 1], v.type.shape)).astype(v.dtype)
        for v in inputs
    ]


def evaluate(graph: Variable, values: dict[str, np.ndarray]) -> np.ndarray:
    """`graph` evaluated on the values of its named inputs (a rewritten clone has inputs of its own)."""
    inputs = sorted({v for v in ancestors([graph]) if v.owner is None and v.name}, key=lambda v: v.name)
    return numpy_function(inputs, graph)(*(values[v.name] for v in inputs))


def assert_same_values(inputs: list[Variable], before: Variable, after: Variable, seed: int = 0) -> None:
    values = dict(zip([v.name for v in inputs], values_for(inputs, seed)))
    np.testing.assert_allclose(evaluate(after, values), evaluate(before, values), rtol=1e-6)


# -- the canonical quotient --------------------------------------------------------------------------------


def _canonical_cases():
    x, y, z, a, b, c, d = vectors("xyzabcd")
    return [
        ("(-1*x)/y/(-2*z)", ((-1.0 * x) / y) / (-2.0 * z), "(x / (2.0 * y * z))"),
        ("(2*x)/(4*y)", (2.0 * x) / (4.0 * y), "(x / (2.0 * y))"),
        ("2*x/2", (2.0 * x) / 2.0, "x"),
        ("x/y/z", x / y / z, "(x / (y * z))"),
        ("x/(y/z)", x / (y / z), "((x * z) / y)"),
        ("(6*x)/(3*y)", (6.0 * x) / (3.0 * y), "((2.0 * x) / y)"),
        ("2*(x/4)", 2.0 * (x / 4.0), "(x / 2.0)"),
        ("(a/b)*(c/d)", (a / b) * (c / d), "((a * c) / (b * d))"),
        ("x/reciprocal(y)/z", x / o.reciprocal(y) / z, "((x * y) / z)"),
        ("reciprocal(reciprocal(x)*y)", o.reciprocal(o.reciprocal(x) * y), "(x / y)"),
        ("reciprocal(x/y)", o.reciprocal(x / y), "(y / x)"),
    ]


@pytest.mark.parametrize("case", range(len(_canonical_cases())), ids=[c[0] for c in _canonical_cases()])
def test_products_and_quotients_become_one_division_with_their_constants_combined(case):
    _, graph, expected = _canonical_cases()[case]
    result = rewrite_graph(graph, include=SAFE, clone=True)
    assert pprint(result) == expected
    inputs = [v for v in ancestors([graph]) if v.owner is None and v.name]
    assert_same_values(inputs, graph, result)


def test_the_safe_pipeline_cancels_only_constants():
    x, y, z = vectors("xyz")
    assert canon(x / y / x) == "(x / (x * y))"  # x may be 0: x / x is NaN there
    assert canon((2.0 * x) / (2.0 * y)) == "(x / y)"
    assert canon(x / 3.0) == "(x / 3.0)"  # one constant already: nothing to combine
    assert canon(x / (y * z)) == "(x / (y * z))"
    assert canon((x * y) / (z * 0.0)) == "((x * y) / (0.0 * z))"  # a division by zero is left as it is


def test_unsafe_rules_cancel_common_factors_under_their_assumption():
    x, y, z, a, b, c, d = vectors("xyzabcd")
    rule = get_rule("mul_div_cancel_common")
    assert "unsafe" in rule.tags and [str(s) for s in rule.assumptions] == ["x != 0"]
    cases = [
        (x / y / x, "(1.0 / y)"),
        ((a / b) * (b / c) * (c / d), "(a / d)"),
        ((2.0 * x * y) / (4.0 * y * z), "(x / (2.0 * z))"),
        (x / x, "fill(x, 1.0)"),
    ]
    for graph, expected in cases:
        result = rewrite_graph(graph, include=UNSAFE, clone=True)
        assert pprint(result) == expected
        inputs = [v for v in (x, y, z, a, b, c, d) if v in set(ancestors([graph]))]
        assert_same_values(inputs, graph, result)


def test_a_cancelled_factor_that_may_widen_the_result_leaves_ones_shaped_like_it():
    x, y = tensor("x", "float64", (None,)), tensor("y", "float64", (None,))
    graph = x / y / x
    result = rewrite_graph(graph, include=UNSAFE, clone=True)
    assert pprint(result) == "fill(x, (1.0 / y))"
    xs, ys = np.array([1.5, -2.0, 4.0]), np.array([0.5])
    values = {"x": xs, "y": ys}
    np.testing.assert_allclose(evaluate(result, values), evaluate(graph, values))


def test_integer_and_mixed_dtype_factors_are_left_alone():
    i, j = vectors("ij", "int32")
    x, f = tensor("x", "float64", (3,)), tensor("f", "float32", (3,))
    for graph in (i / j / i, x / f / x):
        assert divisions(rewrite_graph(graph, include=UNSAFE, clone=True)) == 2, pprint(graph)


@pytest.mark.parametrize("mode", ["fast_run", "fast_compile"])
def test_canonical_quotients_fire_in_fast_run_and_fast_compile(mode):
    x, y, z = vectors("xyz")
    for graph in (((-1.0 * x) / y) / (-2.0 * z), x / y / z, (2.0 * x) / (4.0 * y)):
        compiled = compile_in_mode([x, y, z], graph, mode=mode)
        ops = [n.op for n in compiled.fgraph.apply_nodes]
        inner = [n.op for op in ops if isinstance(op, o.Composite) for n in op.nodes]
        assert sum(op in (o.true_div, o.reciprocal) for op in ops + inner) <= 1, pprint(
            compiled.fgraph.outputs
        )
        values = values_for([x, y, z])
        np.testing.assert_allclose(compiled(*values), numpy_function([x, y, z], graph)(*values), rtol=1e-6)


LEAVES = "xyz"
CONSTANTS = [2.0, -4.0, 0.5, 3.0, -1.0]


@st.composite
def quotient_trees(draw, depth: int = 4) -> Variable:
    """A random tree of products, quotients and reciprocals over x, y, z and a few constants."""
    leaves = vectors(LEAVES)
    nodes = [draw(st.sampled_from(leaves))]
    for _ in range(draw(st.integers(1, depth))):
        kind = draw(st.sampled_from(["mul", "div", "rdiv", "reciprocal", "const"]))
        other = draw(st.sampled_from(leaves + nodes))
        current = nodes[-1]
        if kind == "mul":
            current = current * other
        elif kind == "div":
            current = current / other
        elif kind == "rdiv":
            current = other / current
        elif kind == "reciprocal":
            current = o.reciprocal(current)
        else:
            c = constant(np.float64(draw(st.sampled_from(CONSTANTS))))
            current = draw(st.sampled_from([c * current, current / c, c / current]))
        nodes.append(current)
    return nodes[-1]


@given(quotient_trees(), st.sampled_from(["safe", "unsafe"]), st.integers(0, 10))
def test_generated_quotient_trees_reach_one_division_keeping_their_values(graph, kind, seed):
    include = SAFE if kind == "safe" else UNSAFE
    result = rewrite_graph(graph, include=include, clone=True)
    assert divisions(result) <= 1, (pprint(graph), pprint(result))
    factors = [
        i
        for v in ancestors([result])
        if v.owner is not None and v.owner.op in (o.mul, o.true_div)
        for i in v.owner.inputs
    ]
    constants = [f for f in factors if f.owner is None and f.name is None and f.ndim == 0]
    assert len(constants) <= 1, (pprint(graph), pprint(result))
    inputs = vectors(LEAVES)
    values = values_for(inputs, seed)  # finite, nonzero: where the unsafe cancellations are valid
    named = dict(zip(LEAVES, values))
    np.testing.assert_allclose(evaluate(result, named), evaluate(graph, named), rtol=1e-9)


@given(quotient_trees(), st.data())
def test_quotient_rules_keep_values_on_generated_trees(graph, data):
    for name in ("mul_div_canonical", "mul_of_quotients", "mul_div_cancel_common"):
        assert_answers_keep_values(get_rule(name), graph, data)


# -- the greedy distributor --------------------------------------------------------------------------------


def test_the_greedy_distributor_multiplies_a_sum_where_a_division_goes():
    a, b, x, z, y = vectors("abxzy")
    assert "unsafe" in get_rule("greedy_distributor").tags
    cases = [
        ((a / z + b / x) * x * z, "((a * x) + (b * z))"),
        ((a / x + b) * x, "(a + (b * x))"),
        (o.mul(x, o.add(a / x, o.neg(b / x)), y), "(y * (a + -b))"),
    ]
    for graph, expected in cases:
        assert divisions(rewrite_graph(graph, include=SAFE, clone=True)) >= 1  # safe: nothing cancels
        result = rewrite_graph(graph, include=UNSAFE, clone=True)
        assert pprint(result) == expected
        assert_same_values([a, b, x, z, y], graph, result)


def test_the_greedy_distributor_leaves_sums_it_would_only_lengthen():
    a, b, c, d, x, z = vectors("abcdxz")
    rule = get_rule("greedy_distributor")
    for graph in ((a + b) * x, o.mul(o.add(a / x, b, c, d), x), o.mul(a / z + b, x)):
        assert next(rule.forward(graph), None) is None, pprint(graph)


@given(st.data())
def test_mul_div_canonical_is_screened_out_only_where_it_has_no_answer(data):
    """Its operand screen (with both sides' factors in view: a nested product, quotient or reciprocal,
    two 0-d constants, a 1, or a divisor of magnitude at most 1) is a necessary condition: it refuses no
    quotient the rule rewrites."""
    a, b, x = vectors("abx")
    forms = [a, b, x, o.exp(a), a * b, a / b, o.reciprocal(x), *(constant(c) for c in (2.0, 0.5, 1.0, -4.0))]

    def side():
        factors = data.draw(st.lists(st.sampled_from(forms), min_size=1, max_size=3))
        return factors[0] if len(factors) == 1 else o.mul(*factors)

    assert_screened_out_only_without_answer(get_rule("mul_div_canonical"), o.true_div(side(), side()))


@given(st.data())
def test_the_greedy_distributor_is_screened_out_only_where_it_has_no_answer(data):
    """Its operand screen (a sum among the factors with a quotient, reciprocal or negation among its
    terms) is a necessary condition: it refuses no product the rule rewrites."""
    a, b, x, z = vectors("abxz")
    term_forms = [a, b, a / x, b / z, o.neg(a / x), o.reciprocal(x), a * b, o.neg(b), a / (x * z)]
    terms = data.draw(st.lists(st.sampled_from(term_forms), min_size=2, max_size=3))
    factors = [
        o.add(*terms),
        *data.draw(st.lists(st.sampled_from([x, z, a, constant(2.0)]), min_size=1, max_size=3)),
    ]
    product = o.mul(*data.draw(st.permutations(factors)))
    assert_screened_out_only_without_answer(get_rule("greedy_distributor"), product)


# -- the fill sink -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run"])
def test_the_fill_sink_leaves_an_integer_power_on_the_filled_array(mode):
    """numpy's power of integers raises on a negative exponent, for the elements it computes: of an
    empty filled array none, of the fill's value one.  (x > x) ** -2 of an empty int64 x gave [] and
    raised once the fill of False was sunk (fuzzer seed 28, graph 2115); float powers sink."""
    x = tensor("x", "int64", (None,))
    compiled = compile_in_mode([x], o.gt(x, x) ** -2, mode=mode)
    assert compiled(np.array([], dtype=np.int64)).shape == (0,)
    rule = get_rule("fill_sink_0")
    m, y = tensor("m", "float64", (2, 3)), tensor("y", "float64", (3,))
    assert next(rule.forward(o.fill(m, y) ** 2.0), None) is not None
    assert next(rule.forward(o.fill(x, o.gt(x, x)) ** -2), None) is None


@pytest.mark.parametrize("mode", ["fast_run", "o2"])
def test_log_of_a_sum_with_filled_ones_reaches_log1p(mode):
    x, y = tensor("x", "float64", (3,)), tensor("y", "float64", (2, 3))
    graph = o.log(x + o.fill(y, 1.0))
    compiled = compile_in_mode([x, y], graph, mode=mode)
    ops = [n.op for n in compiled.fgraph.apply_nodes]
    inner = [n.op for op in ops if isinstance(op, o.Composite) for n in op.nodes]
    assert o.log1p in ops + inner and o.log not in ops + inner
    xs, ys = np.array([1e-10, 0.5, 2.0]), np.zeros((2, 3))
    np.testing.assert_allclose(compiled(xs, ys), numpy_function([x, y], graph)(xs, ys))


def test_exp_of_a_fill_runs_on_the_fills_value():
    a, b = tensor("a", "float64", (2, 3)), tensor("b", "float64", (3,))
    assert canon(o.exp(o.fill(a, b))) == "fill(a, exp(b))"
    assert canon(o.exp(o.fill(a, b)) * o.fill(a, 2.0)) == "fill(a, (2.0 * exp(b)))"


def _elementwise_ops() -> list:
    return [op for op in vars(o).values() if broadcasting_elementwise(op)]


def _filled_applications(op) -> list[tuple[Variable, list[Variable]]]:
    """op applied with a fill at each operand position (the fill widens a (3,) value to (2, 3))."""
    m = tensor("m", "float64", (2, 3))
    if op is o.switch:
        args = [tensor("c", "bool", (3,)), tensor("p", "float64", (3,)), tensor("q", "float64", (3,))]
    else:
        args = [tensor(f"v{k}", "float64", (3,)) for k in range(op.nin)]
    found = []
    for k in range(op.nin):
        filled = list(args)
        filled[k] = o.fill(m, args[k])
        try:
            found.append((op(*filled), [m, *args]))
        except (TypeError, ValueError):
            continue
    return found


def test_every_fixed_arity_elementwise_op_sinks_a_fill_at_every_position():
    ops = _elementwise_ops()
    assert o.switch in ops and o.exp in ops and o.fill not in ops and o.add not in ops
    for op in ops:
        for graph, inputs in _filled_applications(op):
            result = rewrite_graph(graph, include=SAFE, clone=True)
            assert result.owner is not None and result.owner.op == o.fill, (op, pprint(result))
            assert result.type == graph.type
            rng = np.random.default_rng(1)
            values = [
                rng.uniform(0.1, 0.9, v.type.shape).astype(v.dtype)
                if v.dtype != "bool"
                else rng.random(3) > 0.5
                for v in inputs
            ]
            np.testing.assert_allclose(
                evaluate(result, dict(zip([v.name for v in inputs], values))),
                evaluate(graph, dict(zip([v.name for v in inputs], values))),
                rtol=1e-12,
                equal_nan=True,
            )


@given(st.data())
def test_fill_sink_rules_keep_values_on_generated_fills(data):
    op = data.draw(st.sampled_from([*_elementwise_ops(), o.add, o.mul]))
    cases = _filled_applications(op) if op.nin is not None else []
    if op.nin is None:
        m, v, w = tensor("m", "float64", (2, 3)), tensor("v", "float64", (3,)), tensor("w", "float64", (3,))
        cases = [(op(v, o.fill(m, w)), [m, v, w])]
    if not cases:
        return
    graph, _ = data.draw(st.sampled_from(cases))
    names = [f"fill_sink_{k}" for k in range(3)] + ["add_fill_sink", "mul_fill_sink"]
    assert any(assert_answers_keep_values(get_rule(n), graph, data) is not None for n in names), pprint(graph)


@pytest.mark.parametrize(
    ("divisor", "dtype", "regroups"),
    [
        (0.5, "float64", True),
        (2.0, "float64", False),
        (np.nan, "float32", True),
        (np.inf, "float64", False),
        (-128, "int8", False),
        (1, "int8", True),
        (-1.0, "float64", True),
    ],
)
def test_the_quotient_screens_read_a_divisors_magnitude_as_a_float(divisor, dtype, regroups):
    """x / c regroups (c moves up as 1 / c) only for |c| <= 1, NaN included; the screens read |c| as a
    float: abs(complex(nan)) raised OverflowError after a C call had left errno at ERANGE (seed 44,
    graph 1174, compiling in o2), and int8 -128's NumPy abs is -128."""
    x = tensor("x", dtype="float64", shape=())
    c = constant(np.array(divisor, dtype=dtype))
    assert quotients._may_regroup_quotient(x / c) is regroups
    assert quotients._may_regroup_factors(x / c) is regroups

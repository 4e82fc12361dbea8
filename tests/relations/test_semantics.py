"""Rule semantics (docs/rule-safety.md), enforced on edge values: every catalogue rule's examples,
rewritten by the rule, keep their values as the rule's `semantics` promises.

For each example the left side and its rewrite are evaluated with the NumPy backend on inputs
filled with edge values (0, -0.0, +-inf, NaN, the largest and the smallest normal float,
integer minima and maxima...).  Where the two differ:

- exact: never (NaN, infinities, the sign of a zero and integer wrap-around included);
- reassociates: only where the two sides, evaluated in extended precision (np.longdouble),
  agree to within the rounding of the largest value either computes;
- stabilizes: only where the right side is finite and equals the extended-precision value of
  the left side, or where even that overflows and the inputs the position reads are not NaN,
  or where the left side rounds to an infinity and the right side is NaN even in extended
  precision (the exact value is undefined), or where the left side is NaN after an intermediate
  became infinite and the right side is infinite (inputs not NaN: the limit), or where the left side
  is NaN, its inputs are not, and the right side is finite and the left side's value over the reals
  (the exact backend, where nothing overflows or underflows; an infinite input taken as the largest
  float of its sign: the limit), as exp(x) / (1 + exp(x)) -> sigmoid(x) at x = 1e308;
- unsafe: anywhere an assumption fails, an input is not finite or the left side is not finite;
  elsewhere as `reassociates`.  So do the rules tagged explore (identities over the reals that
  only exploration uses), whatever their semantics.

Empty arrays get the same treatment: the rewrite of a zero-size example gives what the left
side gives, or raises the same kind of error.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite.backends.exact import NoReferenceError
from relwrite.backends.exact import evaluate as exact_evaluate
from relwrite.backends.numpy.function import numpy_function
from relwrite.compile.function import function as compiled_function
from relwrite.engine import rewrite_graph
from relwrite.engine.folding import constant_folding
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable, constant, graph_inputs, io_toposort, tensor
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.relations import SEMANTICS, Rule, catalogue, get_rule, rule
from relwrite.relations.docs import rewrite_example_graphs
from relwrite.relations.pattern import can_replace

RULES = catalogue()
EXAMPLES = [pytest.param(r, text, id=f"{r.name}: {text}") for r in RULES for text in r.examples]
EXTENDED = np.dtype(np.longdouble)
COMBINATIONS = 300  # edge-value combinations tried per example beyond the exhaustive ones
TOLERANCE = 8  # in units of the output dtype's epsilon


def edge_values(dtype: np.dtype) -> list:
    """The edge values of a dtype, and a few ordinary ones (whose products and powers round)."""
    if dtype.kind == "f":
        info = np.finfo(dtype)
        big, tiny = (1e308, 1e-308) if dtype.itemsize >= 8 else (float(info.max), float(info.smallest_normal))
        return [0.0, -0.0, np.inf, -np.inf, np.nan, big, tiny, -big, 1.0, -2.5, 0.1, 3.7e-5, 1234.567]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return sorted({0, 1, 2, info.max, info.min, -1 if dtype.kind == "i" else info.max - 1})
    return [False, True]


def concrete_shape(v: Variable, length: int = 3) -> tuple[int, ...]:
    return tuple(length if d is None else d for d in v.type.shape)


# -- evaluation -------------------------------------------------------------------------------------


def by_name(graph: Variable) -> list[Variable]:
    return sorted((v for v in graph_inputs([graph]) if not isinstance(v, Constant)), key=lambda v: v.name)


@dataclass
class Outcome:
    value: np.ndarray | None
    error: type | None


@lru_cache(maxsize=64)
def compiled(inputs: tuple[Variable, ...], outputs: Variable | tuple[Variable, ...]):
    """`numpy_function(inputs, outputs)`, compiled once for the many input values an example is checked at."""
    return numpy_function(list(inputs), outputs if isinstance(outputs, Variable) else list(outputs))


def evaluate(graph: Variable, values: dict[str, np.ndarray]) -> Outcome:
    inputs = by_name(graph)
    try:
        with np.errstate(all="ignore"):
            return Outcome(
                np.asarray(compiled(tuple(inputs), graph)(*(values[v.name] for v in inputs))), None
            )
    except Exception as exc:
        cause = exc.__cause__ or exc.__context__
        return Outcome(None, type(cause) if cause is not None else type(exc))


def _blas_definition(node, args: list[Variable]) -> Variable:
    """The value a BLAS node computes, written with generic ops (BLAS ops take no long double)."""
    op = node.op
    if isinstance(op, o.Dot22):
        return o.dot(*args)
    if isinstance(op, o.Gemm):
        z, a, x, y, b = args
        return o.add(o.mul(b, z), o.mul(a, o.dot(x, y)))
    if isinstance(op, o.Gemv):
        y, a, m, x, b = args
        return o.add(o.mul(b, y), o.mul(a, o.dot(m, x)))
    if isinstance(op, o.Ger):
        m, a, x, y = args
        return o.add(m, o.mul(a, o.dot(o.DimShuffle(1, (0, "x"))(x), o.DimShuffle(1, ("x", 0))(y))))
    raise TypeError(f"no definition for {op}")


def extended(graph: Variable, values: dict[str, np.ndarray]) -> tuple[np.ndarray, float]:
    """`graph` with its float inputs and constants in long double: (its value, the largest magnitude seen)."""
    inputs, wide_inputs, outputs = widened_graph(graph)
    args = [values[v.name].astype(w.dtype) for v, w in zip(inputs, wide_inputs)]
    with np.errstate(all="ignore"):
        results = compiled(wide_inputs, outputs)(*args)
    arrays = [*map(np.asarray, results), *args]
    magnitudes = [np.abs(r[np.isfinite(r)]) for r in arrays if r.dtype.kind == "f"]
    scale = max([float(m.max()) for m in magnitudes if m.size] + [0.0])
    return np.asarray(results[0]), scale


@lru_cache(maxsize=64)
def widened_graph(graph: Variable) -> tuple[list[Variable], tuple[Variable, ...], tuple[Variable, ...]]:
    """`graph` rebuilt in long double: its inputs, theirs widened, and (its value, every intermediate)."""

    def widened(v: Variable) -> Variable:
        if v.type.numpy_dtype.kind != "f":
            return v
        if isinstance(v, Constant):
            return constant(v.data.astype(EXTENDED))
        return tensor(v.name, EXTENDED, v.type.shape)

    inputs = by_name(graph)
    replacement = {v: widened(v) for v in inputs}
    for node in io_toposort(inputs, [graph]):
        args = [replacement[i] if i in replacement else widened(i) for i in node.inputs]
        if isinstance(node.op, (o.Dot22, o.Gemm, o.Gemv, o.Ger)):
            outputs = [_blas_definition(node, args)]
        else:
            outputs = node.op.make_node(*args).outputs
        replacement.update(zip(node.outputs, outputs))
    top = replacement[graph] if graph in replacement else widened(graph)
    intermediate = [v for v in io_toposort([replacement[v] for v in inputs], [top]) for v in v.outputs]
    return inputs, tuple(replacement[v] for v in inputs), (top, *intermediate)


def close(a: np.ndarray, b: np.ndarray, eps: float, scale: float) -> np.ndarray:
    """Where a and b agree to within rounding: both NaN, equal, or near relative to them and to `scale`."""
    a, b = np.asarray(a, dtype=EXTENDED), np.asarray(b, dtype=EXTENDED)
    with np.errstate(all="ignore"):
        near = np.abs(a - b) <= TOLERANCE * eps * (np.maximum(np.abs(a), np.abs(b)) + scale)
        return (a == b) | (np.isnan(a) & np.isnan(b)) | (np.isfinite(a) & np.isfinite(b) & near)


# -- the classification -----------------------------------------------------------------------------


def trusted(r: Rule, graph: Variable, values: dict[str, np.ndarray], infinite: bool = False) -> np.ndarray:
    """Where `graph`'s value reads only input elements that meet the rule's assumptions and are finite
    (or, with `infinite`, not NaN).

    The graph is evaluated with those elements replaced by 1 and the others by NaN: a position that
    comes out NaN read one of the others (or made a NaN of its own: counted as untrusted too).
    """
    marked = {}
    for name, value in values.items():
        good = np.ones(value.shape, dtype=bool)
        for a in r.assumptions:
            if a.name == name:
                good &= a.holds(value)
        if value.dtype.kind == "f":
            good &= ~np.isnan(value) if infinite else np.isfinite(value)
            marked[name] = np.where(good, 1, np.nan).astype(value.dtype)
        elif not good.all():
            return np.zeros((), dtype=bool)
        else:
            marked[name] = value
    outcome = evaluate(graph, marked)
    if outcome.value is None or outcome.value.dtype.kind != "f":
        return np.ones((), dtype=bool)
    # a graph NaN at 1 (log1mexp(log1mexp(1))) is marked again with the trusted elements' own values
    own = {
        name: np.where(np.isnan(m), m, values[name]) if m.dtype.kind == "f" else m
        for name, m in marked.items()
    }
    again = evaluate(graph, own)
    return ~np.isnan(outcome.value) | (again.value is not None and ~np.isnan(again.value))


def overflows(graph: Variable, values: dict[str, np.ndarray]) -> bool:
    """Whether some value `graph` computes is infinite (an intermediate past the float range, as
    expm1(2 * x) in tanh's expm1 form at x = 1e308, where the reals are finite)."""
    inputs = by_name(graph)
    computed = [v for node in io_toposort(inputs, [graph]) for v in node.outputs]
    with np.errstate(all="ignore"):
        results = compiled(tuple(inputs), tuple(computed))(*(values[v.name] for v in inputs))
    return any(np.asarray(r).dtype.kind == "f" and bool(np.isinf(r).any()) for r in results)


def exact_limit(graph: Variable, values: dict[str, np.ndarray]) -> np.ndarray:
    """`graph`'s value over the reals (the exact backend: no intermediate overflows), each infinite float
    input replaced by the largest finite float of its sign; NaN where there is no reference."""
    inputs = by_name(graph)
    points = []
    for v in inputs:
        value = values[v.name]
        if value.dtype.kind == "f":
            value = np.where(np.isinf(value), np.copysign(np.finfo(value.dtype).max, value), value)
        points.append(value[np.newaxis])
    try:
        (found,) = exact_evaluate(inputs, [graph], points, 2200)  # past float64's exponents and digits
    except NoReferenceError:
        return np.full(np.shape(values[inputs[0].name]) if inputs else (), np.nan)
    with np.errstate(all="ignore"):  # a value past the float range rounds to an infinity
        return np.vectorize(float, otypes=[np.float64])(found[0])


def assumptions_hold(r: Rule, values: dict[str, np.ndarray]) -> bool:
    """Whether every input element meets the rule's assumptions."""
    return all(bool(np.all(a.holds(values[a.name]))) for a in r.assumptions if a.name in values)


def violation(r: Rule, before: Variable, after: Variable, values: dict[str, np.ndarray]) -> str | None:
    """Why the rewrite breaks the rule's semantics on `values`, or None."""
    left, right = evaluate(before, values), evaluate(after, values)
    if left.error is not None or right.error is not None:
        if left.error == right.error:
            return None
        if r.semantics == "unsafe" and right.error is None and not assumptions_hold(r, values):
            return None  # a check the rule drops may fail where its assumptions do (remove_all_assert)
        return f"left side {left.error or 'evaluates'}, right side {right.error or 'evaluates'}"
    lv, rv = left.value, right.value
    if lv.dtype != rv.dtype or lv.shape != rv.shape:
        return f"left side {lv.dtype}{lv.shape}, right side {rv.dtype}{rv.shape}"
    if lv.dtype.kind == "f":
        same = (lv == rv) | (np.isnan(lv) & np.isnan(rv))
        if r.semantics == "exact":  # the sign of a zero too (1 / x tells them apart), not of a NaN
            same &= (lv != 0) | (np.signbit(lv) == np.signbit(rv))
    else:
        same = lv == rv
    if same.all():
        return None
    semantics = r.semantics
    if semantics == "exact":
        return f"exact, but left {lv.tolist()} and right {rv.tolist()} differ"
    if semantics == "unsafe" or "explore" in r.tags:  # over the reals: finite inputs meeting the assumptions
        same |= ~(trusted(r, before, values) & np.isfinite(lv))
        if "explore" in r.tags:  # identities over the reals: of finite inputs (pow(1, nan) is 1)
            if not all(np.isfinite(v).all() for v in values.values() if v.dtype.kind == "f"):
                return None
            if overflows(after, values):  # an intermediate past the float range
                same |= ~np.isfinite(rv)
        semantics = "reassociates"
    eps = float(np.finfo(lv.dtype).eps) if lv.dtype.kind == "f" else 0.0
    ext_left, left_scale = extended(before, values)
    if semantics == "reassociates":
        ext_right, right_scale = extended(after, values)
        agree = close(ext_left, ext_right, eps, max(left_scale, right_scale))
        problem = "the extended-precision values of the two sides differ"
    else:  # stabilizes: the right value where the left side fails
        beyond = np.isinf(ext_left) & trusted(r, before, values, infinite=True)  # even long double overflows
        agree = np.isfinite(rv) & (close(rv, ext_left, eps, left_scale) | beyond)
        # where rounding makes the left side infinite and the exact value is undefined (log(1 - exp(x))
        # at x = 1e-308: 1 - exp(x) rounds to 0), the right side may say NaN, in extended precision too
        ext_right, _ = extended(after, values)
        agree |= np.isinf(lv) & np.isnan(rv) & np.isnan(ext_right)
        # where an intermediate rounds to an infinity and the left side makes a NaN of it (inf - inf in
        # log(exp(x) - exp(y)) at x = y = 800), the right side may give the infinite limit
        if overflows(before, values):
            agree |= np.isnan(lv) & np.isinf(rv) & trusted(r, before, values, infinite=True)
        # where the left side makes a NaN of an intermediate past the float range (inf / inf in exp(x) /
        # (1 + exp(x)) at x = 1e308, 0 / 0 in exp(x) / sum(exp(x)) at x = -1e308), the right side may give
        # its finite value over the reals (the exact backend: nothing overflows or underflows), an
        # infinite input taken as the largest float of its sign (the limit)
        floats = any(v.dtype.kind == "f" for v in values.values())  # integers are never NaN
        unresolved = np.isnan(lv) & np.isfinite(rv) & ~(agree | same)
        unresolved &= trusted(r, before, values, infinite=True) if floats else True
        if unresolved.any():
            agree |= unresolved & close(rv, exact_limit(before, values), eps, left_scale)
        problem = "the right side is not the finite extended-precision value of the left side"
    if bool(np.all(agree | same)):
        return None
    where = tuple(int(i) for i in np.argwhere(~(agree | same))[0])
    return (
        f"{semantics}, but {problem} at {where}: left {lv[where]!r}, right {rv[where]!r},"
        f" extended left {ext_left[where]!r}"
    )


def combinations(inputs: list[Variable], seed: int) -> list[dict[str, np.ndarray]]:
    """Input values: every input filled with one edge value (every combination, or a sample), and
    arrays whose elements are edge values drawn independently."""
    edges = [edge_values(v.type.numpy_dtype) for v in inputs]
    rng = np.random.default_rng(seed)
    total = int(np.prod([len(e) for e in edges]))
    if total <= 1000:
        picks = list(itertools.product(*edges))
    else:
        picks = [tuple(e[rng.integers(len(e))] for e in edges) for _ in range(COMBINATIONS)]
    cases = [
        {v.name: np.full(concrete_shape(v), p, dtype=v.type.numpy_dtype) for v, p in zip(inputs, pick)}
        for pick in picks
    ]
    for _ in range(40):
        cases.append(
            {
                v.name: np.array(rng.choice(np.array(e, dtype=object), concrete_shape(v)), dtype=v.dtype)
                for v, e in zip(inputs, edges)
            }
        )
    return cases


def violations(r: Rule, before: Variable, after: Variable, seed: int = 0) -> list[str]:
    problems = []
    for values in combinations(by_name(before), seed):
        problem = violation(r, before, after, values)
        if problem is not None:
            shown = ", ".join(f"{k}={v.tolist()!r}" for k, v in values.items())
            problems.append(f"{pprint(before)} -> {pprint(after)} at {shown}: {problem}")
    return problems


def retyped(r: Rule, text: str, dtype: str | None, vectors: bool = False) -> dict[str, Variable]:
    """The example's inputs with `dtype` (None: as the rule types them), 0-d ones as vectors if asked."""
    inputs = by_name(parse(text, r.types))
    return {
        v.name: tensor(v.name, dtype or v.dtype, (None,) if vectors and v.ndim == 0 else v.type.shape)
        for v in inputs
    }


def rewritten(r: Rule, text: str, types: dict[str, Variable] | None) -> tuple[Variable, Variable] | None:
    try:
        return rewrite_example_graphs(r, text, types)
    except (ValueError, TypeError):
        return None


VARIANTS = [
    pytest.param(r, text, dtype, id=f"{r.name}: {text} [{dtype or 'as typed'}]")
    for r in RULES
    for text in r.examples
    for dtype in (None, "float32", "int8", "int64")
    if dtype is None or rewritten(r, text, retyped(r, text, dtype)) is not None
]


# -- metadata ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("r", RULES, ids=[r.name for r in RULES])
def test_every_rule_declares_its_semantics_consistently_with_its_tags(r):
    assert r.semantics in SEMANTICS
    assert ("unsafe" in r.tags) == (r.semantics == "unsafe")
    if r.assumptions:
        assert r.semantics == "unsafe" or "explore" in r.tags, "a rule that needs assumptions is opt-in"
    if r.semantics == "stabilizes":
        assert r.phase == "stabilize" and "fast_run" in r.tags


def test_the_classification_decided_for_issue_8():
    for name in ("log_exp", "sqrt_sqr", "softplus", "logsumexp", "log_softmax"):
        assert get_rule(name).semantics == "stabilizes", name
    for name in ("softplus_minus_self", "sub_self", "mul_div_cancel", "mul_zero", "exp_log"):
        assert get_rule(name).semantics == "unsafe" and "unsafe" in get_rule(name).tags, name
    for name in ("flatten_add", "sort_mul", "fold_mul_constants", "collect_terms", "collect_factors"):
        assert get_rule(name).semantics == "reassociates", name
    assert get_rule("log_exp").phase == "stabilize" and not get_rule("log_exp").assumptions


def test_a_rule_semantics_defaults_from_its_tags_and_is_checked():
    lhs, rhs = (o.neg, (o.neg, "x")), "x"
    assert rule("a", lhs, rhs, ["canonicalize"]).semantics == "exact"
    assert rule("b", lhs, rhs, ["stabilize"]).semantics == "stabilizes"
    assert rule("c", lhs, rhs, ["canonicalize", "unsafe"]).semantics == "unsafe"
    declared = rule("d", lhs, rhs, ["canonicalize"], semantics="unsafe")
    assert declared.semantics == "unsafe" and "unsafe" in declared.tags
    assert rule("e", lhs, rhs, ["specialize"], semantics="reassociates").semantics == "reassociates"
    with pytest.raises(ValueError, match="rule f: semantics must be one of exact, reassociates"):
        rule("f", lhs, rhs, ["canonicalize"], semantics="approximate")
    with pytest.raises(ValueError, match="rule g: tagged unsafe, so its semantics is unsafe, not 'exact'"):
        rule("g", lhs, rhs, ["canonicalize", "unsafe"], semantics="exact")


# -- edge values --------------------------------------------------------------------------------------


@pytest.mark.parametrize("r, text, dtype", VARIANTS)
def test_rewritten_examples_keep_the_values_their_semantics_promise(r, text, dtype):
    before, after = rewritten(r, text, None if dtype is None else retyped(r, text, dtype))
    problems = violations(r, before, after)
    assert not problems, f"{r.name} ({r.semantics}): {len(problems)} violations, first:\n" + "\n".join(
        problems[:3]
    )


def test_the_check_catches_a_rule_that_claims_too_much():
    pretends = rule("pretends", (o.log, (o.exp, "x")), "x", ["canonicalize"], examples=["log(exp(x))"])
    before, after = rewrite_example_graphs(pretends, "log(exp(x))")
    assert any("exact, but" in p for p in violations(pretends, before, after))
    wrong = rule("wrong", (o.log1p, "x"), (o.log, "x"), ["stabilize"], examples=["log1p(x)"])
    before, after = rewrite_example_graphs(wrong, "log1p(x)")
    assert any("stabilizes, but" in p for p in violations(wrong, before, after))
    regrouped = rule("regrouped", (o.mul, "x", (o.mul, "y", "z")), (o.mul, "x", "y", "z"), ["canonicalize"])
    assert get_rule("flatten_mul").semantics == "reassociates"
    before, after = rewrite_example_graphs(regrouped, "mul(x, mul(y, z))")
    assert any("exact, but" in p for p in violations(regrouped, before, after))


# -- empty arrays -----------------------------------------------------------------------------------


def _empty_case(r: Rule, text: str):
    types = retyped(r, text, None, vectors=True)
    found = rewritten(r, text, types)
    if found is None or not any(None in v.type.shape for v in types.values()):
        return None
    return pytest.param(r, text, types, id=f"{r.name}: {text}")


EMPTY = [case for r in RULES for text in r.examples if (case := _empty_case(r, text)) is not None]


@pytest.mark.parametrize("r, text, types", EMPTY)
def test_rewrites_of_empty_arrays_give_what_the_left_side_gives(r, text, types):
    before, after = rewritten(r, text, types)  # once: the graphs (and what compiles them) are kept
    inputs = by_name(before)
    unknown = [(v.name, axis) for v in inputs for axis, d in enumerate(v.type.shape) if d is None]

    @settings(max_examples=15, deadline=None)
    @given(data=st.data())
    def gives_what_the_left_side_gives(data):
        empty = data.draw(st.sampled_from(unknown))
        values = {}
        for v in inputs:
            shape = tuple(
                0 if (v.name, axis) == empty else (d if d is not None else data.draw(st.sampled_from([0, 1])))
                for axis, d in enumerate(v.type.shape)
            )
            fill = data.draw(st.sampled_from(edge_values(v.type.numpy_dtype)))
            values[v.name] = np.full(shape, fill, dtype=v.type.numpy_dtype)
        problem = violation(r, before, after, values)
        assert problem is None, f"{pprint(before)} -> {pprint(after)} at {values}: {problem}"

    gives_what_the_left_side_gives()


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run", "o1", "o2", "o3", "o4"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_log_sum_exp_of_an_empty_axis_is_minus_infinity_in_every_mode(mode, axis):
    x = tensor("x", "float64", (None, None))
    f = compiled_function([x], o.log(o.sum(o.exp(x), axis=axis)), mode=mode)
    with np.errstate(divide="ignore"):
        expected = np.log(np.sum(np.exp(np.zeros((2, 0))), axis=axis))
        np.testing.assert_array_equal(f(np.zeros((2, 0))), expected)
        assert np.all(f(np.zeros((0, 0))) == -np.inf) or f(np.zeros((0, 0))).size == 0


def test_the_logsumexp_op_is_stable_and_minus_infinity_over_empty_axes():
    x = tensor("x", "float32", (None, None))
    values = np.array([[100.0, 100.0], [-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 0.0]], dtype=np.float32)
    with np.errstate(divide="ignore"):
        result = numpy_function([x], o.logsumexp(x, axis=1))(values)
        assert result.dtype == np.float32
        np.testing.assert_allclose(result, [100 + np.log(2), -np.inf, np.inf, np.nan], rtol=1e-6)
        assert numpy_function([x], o.logsumexp(x))(np.zeros((3, 0), dtype=np.float32)) == -np.inf
    assert pprint(o.logsumexp(x, axis=1)) == "logsumexp(x, axis=(1,))"


# -- regrouping respects integer dtypes -----------------------------------------------------------------


def test_expm1_does_not_regroup_an_int8_term():
    y, x = tensor("y", "int8", (None,)), tensor("x", "float64", (None,))
    graph = o.add(constant(np.int8(-1)), y, o.exp(x))
    assert list(get_rule("expm1").forward(graph)) == []
    values = (np.array([0.3]), np.array([-128], dtype=np.int8))
    with np.errstate(over="ignore"):
        expected = -1 + values[1] + np.exp(values[0])
        for mode in ("fast_compile", "fast_run", "o4"):
            np.testing.assert_allclose(compiled_function([x, y], graph, mode=mode)(*values), expected)
    assert expected[0] > 128  # -1 + y wraps around to 127 in int8


def test_blas_updates_do_not_regroup_narrower_integer_terms_or_factors():
    x, y, z = tensor("X", "float64", (3, 4)), tensor("Y", "float64", (4, 2)), tensor("Z", "float64", (3, 2))
    i, j = tensor("i", "int8", (3, 2)), tensor("j", "int8", (3, 2))
    a, b = tensor("a", "int8", ()), tensor("b", "int8", ())
    gemm = get_rule("add_to_gemm")
    assert list(gemm.forward(o.add(i, o.dot(x, y), z, j))) == []  # i + j would wrap around in int8
    assert list(gemm.forward(o.add(o.mul(a, o.dot(x, y), b), z))) == []  # so would a * b
    (one_scalar,) = list(gemm.forward(o.add(o.mul(a, o.dot(x, y)), z)))  # one factor: only converted
    alpha = one_scalar.owner.inputs[1]
    assert isinstance(one_scalar.owner.op, o.Gemm) and alpha.owner.op == o.Cast("float64")
    w = tensor("W", "float64", (3, 2))
    assert list(gemm.forward(o.add(w, o.dot(x, y), z)))  # one dtype: regrouped
    m, u, v = tensor("A", "float64", (3, 4)), tensor("u", "int8", (4,)), tensor("v", "int8", (4,))
    assert list(get_rule("dot_distribute").forward(o.dot(m, o.add(u, v)))) == []


REGROUP_NAMES = {"i": "int8", "j": "int8", "k": "int16", "f": "float32", "u": "float64", "w": "float64"}


@st.composite
def mixed_sums(draw) -> Variable:
    """An add or mul of operands of mixed dtypes (integers, floats, exps, constants), under log, neg, sum."""
    names = draw(st.lists(st.sampled_from(sorted(REGROUP_NAMES)), min_size=1, max_size=4, unique=True))
    terms: list[Variable] = []
    for name in names:
        v = tensor(name, REGROUP_NAMES[name], (None,))
        terms.append(o.exp(v) if v.dtype.startswith("float") and draw(st.booleans()) else v)
    for _ in range(draw(st.integers(0, 2))):
        value = draw(st.sampled_from([-1, 0, 1, 2]))
        dtype = draw(st.sampled_from(["int8", "int64", "float32", "float64"]))
        terms.insert(draw(st.integers(0, len(terms))), constant(np.asarray(value, dtype=dtype)))
    if len(terms) < 2:
        terms.append(constant(np.asarray(-1, dtype=draw(st.sampled_from(["int8", "float64"])))))
    root = draw(st.sampled_from([o.add, o.mul]))(*terms)
    return draw(st.sampled_from([lambda g: g, o.log, o.neg, o.sum]))(root)


@settings(max_examples=60, deadline=None)
@given(graph=mixed_sums())
def test_rules_regroup_mixed_dtype_operands_only_as_their_semantics_allow(graph):
    fgraph = FunctionGraph(outputs=[graph], clone=False)
    nodes = list(fgraph.toposort())
    for r in RULES:
        for node in nodes:
            old = node.outputs[0]
            new = next((a for a in r.forward(old) if isinstance(a, Variable) and can_replace(old, a)), None)
            if new is None:
                continue
            problems = violations(r, old, new)
            assert not problems, f"{r.name} ({r.semantics}): " + problems[0]


# -- constants: folding and the canonical order ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "1e200 * x * 1e200",
        "1e-200 * x * 1e-200",
        "mul(x, 1e200, y, 1e200)",
        "1e308 + x + 1e308",
        "-1e308 + x - 1e308",
    ],
)
def test_constants_that_would_fold_to_an_overflow_or_underflow_stay_apart(text):
    graph = parse(text)
    folded = rewrite_graph(graph, include=["canonicalize"])
    assert not any(
        isinstance(v, Constant) and (not np.all(np.isfinite(v.data)) or np.any(v.data == 0))
        for v in graph_inputs([folded])
    ), pprint(folded)
    inputs = by_name(graph)
    for values in combinations(inputs, seed=1):
        assert violation(get_rule("fold_mul_constants"), graph, folded, values) is None


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run", "o2", "o4"])
def test_huge_constant_factors_around_a_tiny_value_keep_it_finite_in_every_mode(mode):
    x = tensor("x")
    assert compiled_function([x], 1e200 * x * 1e200, mode=mode)(np.float64(1e-300)) == pytest.approx(1e100)
    assert compiled_function([x], 1e308 + x + 1e308, mode=mode)(np.float64(-1e308)) == pytest.approx(1e308)


def test_sorting_keeps_unfolded_constants_apart():
    x, y = tensor("x"), tensor("y")
    big = constant(1e200)
    assert list(get_rule("sort_mul").forward(o.mul(big, x, big))) == []
    (answer,) = list(get_rule("sort_mul").forward(o.mul(y, big, x, big)))
    assert pprint(answer) == "(1e+200 * x * y * 1e+200)"
    (answer,) = list(get_rule("sort_mul").forward(o.mul(x, constant(2.0), y)))
    assert pprint(answer) == "(2.0 * x * y)"


@given(a=st.integers(-128, 127), b=st.integers(-128, 127), op=st.sampled_from([o.add, o.mul]))
def test_integer_constants_fold_with_the_wraparound_of_their_dtype(a, b, op):
    x = tensor("x", "int8", (None,))
    graph = op(constant(np.int8(a)), x, constant(np.int8(b)))
    rule_name = "fold_add_constants" if op is o.add else "fold_mul_constants"
    (answer,) = list(get_rule(rule_name).forward(graph))
    values = np.arange(-128, 128, dtype=np.int8)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(numpy_function([x], answer)(values), numpy_function([x], graph)(values))


@pytest.mark.parametrize(
    "graph, folds",
    [
        (o.mul(constant(1e200), constant(1e200)), False),
        (o.mul(constant(1e-200), constant(1e-200)), False),
        (o.add(constant(np.float16(60000)), constant(np.float16(60000))), False),
        (o.exp(constant(1000.0)), False),
        (o.mul(constant(np.inf), constant(2.0)), True),
        (o.mul(constant(np.int8(100)), constant(np.int8(100)), constant(np.int8(3))), True),
        (o.add(constant(np.int64(2**62)), constant(np.int64(2**62))), True),
        (o.sqr(constant(np.int16(300))), True),
    ],
    ids=[
        "overflow",
        "underflow",
        "float16 overflow",
        "exp overflow",
        "inf stays inf",
        "int8",
        "int64",
        "sqr",
    ],
)
def test_constant_folding_never_makes_an_infinity_or_a_zero_and_wraps_integers_as_run_time(graph, folds):
    result = constant_folding.transform(None, graph.owner)
    assert bool(result) == folds
    if folds:
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(result[0].data, numpy_function([], graph)())
        assert result[0].dtype == graph.dtype

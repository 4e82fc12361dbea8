"""The differential fuzzer: a bounded run in the suite, and checks that the fuzzer itself judges right.

`test_no_bugs_in_a_bounded_fuzz_run` fails on any bug the fuzzer finds and
prints each one with a self-contained reproducer; `benchmarks/fuzz.py` runs
the long version.
"""

from __future__ import annotations

import inspect
import math
import runpy
from pathlib import Path

import numpy as np
import pytest

from relwrite.backends.numpy.function import numpy_function
from relwrite.compile.function import MODES, Mode
from relwrite.engine.db import EquilibriumDB, Query, SequenceDB
from relwrite.engine.node_rewriters import KanrenRelationSub
from relwrite.graph import ops, shape, subtensor
from relwrite.graph.basic import tensor
from relwrite.relations import get_rule, rule
from relwrite.testing import fuzz
from relwrite.testing.fuzz import judge, semantics

SEED = 20240
CASES = runpy.run_path(str(Path(__file__).with_name("fuzz_cases.py")))["CASES"]
"""Graphs that once exposed bugs, pinned as recipes: a graph index changes with the catalogue."""
GRAPHS = 100  # x 7 modes (5 distinct pipelines): several hundred graph x mode evaluations


def test_no_bugs_in_a_bounded_fuzz_run():
    report = fuzz.run(GRAPHS, seed=SEED)
    assert report.graphs == GRAPHS
    assert all(report.counts[m]["tried"] == GRAPHS for m in fuzz.DEFAULT_MODES)
    if report.bugs:
        text = "\n\n".join(f.describe() for f in report.bugs[:20])
        pytest.fail(f"{len(report.bugs)} bug(s) found by the fuzzer:\n{report.table()}\n\n{text}")


def test_every_mode_relwrite_defines_is_fuzzed():
    assert set(MODES) <= set(fuzz.DEFAULT_MODES)


def test_graphs_cover_every_op_of_the_language():
    """Every op class users can build (Composite included) appears in the graphs a run draws."""
    wanted = {
        cls
        for module in (ops, shape)
        for cls in vars(module).values()
        if inspect.isclass(cls)
        and issubclass(cls, ops.Op)
        and cls.__module__ in (ops.__name__, subtensor.__name__, shape.__name__)
    } - {ops.Elemwise, ops.Reduce}
    seen: set[type] = set()
    for index in range(2000):  # the rarest op (tan) is in about one graph in 200
        recipe, _, _, _ = fuzz.draw_graph(SEED, index)
        seen.update(type(v.owner.op) for v in recipe.build() if v.owner is not None)
        if wanted <= seen:
            break
    assert wanted - seen == set()


def test_graphs_are_deterministic_and_share_subexpressions():
    first = fuzz.draw_graph(SEED, 3)
    again = fuzz.draw_graph(SEED, 3)
    assert first[0].lines() == again[0].lines()
    for a, b in zip(first[1], again[1]):
        assert all(np.array_equal(a[i], b[i], equal_nan=True) for i in a)
    shared = 0
    for index in range(60):
        recipe = fuzz.draw_graph(SEED, index)[0]
        uses = [a.index for s in recipe.steps for a in s.args if isinstance(a, fuzz.Ref)]
        shared += len(uses) != len(set(uses))
    assert shared > 0


def _recipe(*steps: fuzz.RecipeStep, outputs: list[int]) -> fuzz.Recipe:
    return fuzz.Recipe(list(steps), outputs)


def _vector(name: str, dtype: str = "float64") -> fuzz.RecipeStep:
    return fuzz.RecipeStep("input", params={"name": name, "dtype": dtype, "shape": (None,)})


def _mode_with(lhs: object, rhs: object) -> Mode:
    """A NumPy mode whose only rewrite is the rule lhs -> rhs (a wrong one, to plant a bug)."""
    bad = rule("planted", lhs, rhs, tags=("canonicalize",))
    phase = EquilibriumDB("canonicalize")
    phase.register("planted", KanrenRelationSub(bad, name="planted"), "canonicalize")
    db = SequenceDB("planted_db")
    db.register("canonicalize", phase, "canonicalize", position=1)
    return Mode("numpy", Query(include=["canonicalize"]), db)


def test_a_wrong_rewrite_is_a_bug_with_a_reproducer():
    recipe = _recipe(_vector("x"), fuzz.RecipeStep("call", "exp", (fuzz.Ref(0),)), outputs=[1])
    values = [{0: np.array([0.0, 1.0, -2.0])}]
    findings = fuzz.check(recipe, values, _mode_with((ops.exp, "x"), "x"))
    assert [f.category for f in findings] == ["wrong"]
    assert "differs" in findings[0].detail
    assert "a rewrite is wrong" in findings[0].hint
    failure = fuzz.Failure(0, ["fast_compile"], findings[0], recipe, [values[0][0]])
    assert "rw.exp(x)" in failure.reproducer()
    exec(compile(failure.reproducer(), "<reproducer>", "exec"), {})  # it runs as printed


def test_a_value_where_numpy_raises_is_declared_only_when_the_rewritten_graph_gives_it():
    """NumPy refuses negative integer powers of integers: a rewrite that removes the power refines."""
    recipe = _recipe(
        _vector("x", "int64"), fuzz.RecipeStep("call", "op**", (fuzz.Ref(0), fuzz.Ref(0))), outputs=[1]
    )
    values = [{0: np.array([2, -1])}]
    findings = fuzz.check(recipe, values, _mode_with((ops.pow, "x", "y"), "x"))
    assert [f.category for f in findings] == ["declared"]
    assert "removed the computation that raises" in findings[0].detail
    assert fuzz.check(recipe, values, fuzz.parse_mode("fast_compile")) == []
    defined = [{0: np.array([2, 3])}]  # where the original is defined, the wrong rule is a bug
    planted = _mode_with((ops.pow, "x", "y"), "x")
    assert [f.category for f in fuzz.check(recipe, defined, planted)] == ["wrong"]


def test_a_stabilization_is_an_improvement_not_a_bug():
    """log(1 + exp(x)) at x = 800 is inf in NumPy; fast_run's softplus gives 800, the right value.

    A boolean output beside it (x > 0) is compared exactly and does not get in the way.
    """
    recipe = _recipe(
        _vector("x"),
        fuzz.RecipeStep("call", "exp", (fuzz.Ref(0),)),
        fuzz.RecipeStep("call", "op+", (1.0, fuzz.Ref(1))),
        fuzz.RecipeStep("call", "log", (fuzz.Ref(2),)),
        fuzz.RecipeStep("call", "op>", (fuzz.Ref(0), 0)),
        outputs=[4, 3],
    )
    values = [{0: np.array([800.0, 0.5])}]
    assert [f.category for f in fuzz.check(recipe, values, fuzz.parse_mode("fast_run"))] == ["improvement"]
    assert fuzz.check(recipe, values, fuzz.parse_mode("fast_compile")) == []


def test_the_exact_walk_takes_the_minimum_of_a_scalar():
    """min(log1mexp(x)) at x = -110.66 is -8.7e-49: the mpmath walk takes a 0-d minimum (it used to
    fail on one), and the reference, rounded once, agrees with relwrite's stable log1mexp."""
    from relwrite.testing.fuzz.walks import _wide_walk

    x = tensor("x", dtype="float64", shape=())
    (value,) = _wide_walk([x], [ops.min(ops.log1mexp(x), axis=None)], [np.array(-110.66049791935373)], 128)
    assert float(value) == pytest.approx(-math.exp(-110.66049791935373))
    recipe = _recipe(
        fuzz.RecipeStep("input", params={"name": "x", "dtype": "float64", "shape": ()}),
        fuzz.RecipeStep("call", "log1mexp", (fuzz.Ref(0),)),
        fuzz.RecipeStep("call", "min", (fuzz.Ref(1),), params={"axis": None}),
        outputs=[2],
    )
    values = [{0: np.array(-110.66049791935373)}]
    assert fuzz.check(recipe, values, fuzz.parse_mode("fast_run")) == []


def test_the_exact_log1mexp_keeps_the_sign_of_a_vanishing_value():
    """1 / log1mexp(-1.7e237): log1mexp is a negative number below every float there, -0.0 rounded, so
    relwrite's -inf is right and the plain formula's log(1 - 0) = +0.0, then +inf, is not (seed 41)."""
    recipe = _recipe(
        _vector("x"),
        fuzz.RecipeStep("call", "log1mexp", (fuzz.Ref(0),)),
        fuzz.RecipeStep("call", "true_div", (1, fuzz.Ref(1))),
        outputs=[2],
    )
    values = [{0: np.array([-1.679894869741554e237, -1e-300, -0.5])}]
    for mode in ("fast_compile", "fast_run"):
        assert fuzz.check(recipe, values, fuzz.parse_mode(mode)) == []
    # the reference rounds once: log1mexp of int8 -62 is float16 -0.0, not log(1 - 0) = +0.0 (seed 25, 1120)
    tiny = semantics._ref_log1mexp(np.array(-62, dtype=np.int8))
    assert tiny.dtype == np.float16 and tiny == 0 and np.signbit(tiny)


@pytest.mark.parametrize(
    ("case", "mode", "categories"),
    [
        # n * v < v, v = x + 2 + log1p(expm1(x)) at x = -1e253: log1p(expm1(x)) is -inf at any precision,
        # x once stabilized; the comparison hides the infinity, the exact rewritten walk confirms True
        ((37, 740), "fast_run", ["improvement"]),
        # 1 / log1mexp(-1.7e237): -0.0, so -inf, as the reference rounds it (once judged an improvement)
        ((41, 728), "fast_compile", []),
        ((43, 1401), "fast_compile", []),  # add(int32 a, int64 0, int32 b): the zero stays, no wrap-around
        ((47, 675), "fast_run", []),  # float16 x ** 0.5 at -inf: +inf, as NumPy's float16 power gives
        ((53, 748), "fast_compile", ["improvement"]),  # log_softmax of a dominant maximum, to the last digit
        # float16 log_softmax rounds -4.1e-8 to -6e-8, the nearest subnormal (NumPy's log(1 + tiny) is 0),
        # as the reference does since it computes wide and rounds once (seed 22, graph 174 alike)
        ((61, 1292), "fast_compile", []),
        ((97, 445), "fast_compile", []),  # 2 * (int8 x * x * y * y): the coefficient no longer widens x * x
        ((103, 1062), "fast_compile", []),  # x / log1mexp(-inf): -0.0, the limit from below, as the reference
        # float16 log1mexp(-10) is a subnormal, rounded once by the reference as by the backends
        ((103, 1456), "fast_compile", []),
    ],
)
def test_graphs_the_fuzzer_once_flagged_are_judged_right(case, mode, categories):
    recipe, input_sets = CASES[case]
    found = {f.category for f in fuzz.check(recipe, input_sets, fuzz.parse_mode(mode))}
    assert found == set(categories)


def test_an_index_the_static_shape_rules_out_is_a_refusal_not_a_crash():
    """x[0] of a value of static length 0 raises IndexError as NumPy would: the type system refusing the
    step, like a TypeError (seed 89 reported the graph's constructor as crashed)."""
    draws = [fuzz.draw_graph(89, index) for index in range(200)]  # the op tables shift which draw it is
    assert all(crash is None for *_, crash in draws)
    assert sum(rejected for _, _, rejected, _ in draws) >= 1


def test_a_declared_reassociation_is_not_a_bug():
    """x * y * x overflows in x ** 2 at (1e200, 1e-200): declared by collect_factors, right in long double."""
    recipe = _recipe(
        _vector("x"),
        _vector("y"),
        fuzz.RecipeStep("call", "op*", (fuzz.Ref(0), fuzz.Ref(1))),
        fuzz.RecipeStep("call", "op*", (fuzz.Ref(2), fuzz.Ref(0))),
        outputs=[3],
    )
    values = [{0: np.array([1e200, 2.0]), 1: np.array([1e-200, 3.0])}]
    findings = fuzz.check(recipe, values, fuzz.parse_mode("fast_compile"))
    assert [f.category for f in findings] == ["declared"]


def test_a_reassociation_through_a_rounded_constant_is_declared():
    """float32 sum(x / 3) -> 0.33333334 * sum(x) (sum_div_scalar, div_by_constant) overflows where the
    original does not (seed 41, graph 659): right over the reals but for the constant's rounding, one
    ulp of float32, which the wide walks' 12-digit agreement had called a wrong value."""
    recipe = _recipe(
        fuzz.RecipeStep("input", params={"name": "x", "dtype": "float32", "shape": (2, 3)}),
        fuzz.RecipeStep("call", "true_div", (fuzz.Ref(0), 3)),
        fuzz.RecipeStep("call", "sum", (fuzz.Ref(1),), {"axis": 0}),
        outputs=[2],
    )
    huge = np.float32(3.4028235e38)
    values = [{0: np.array([[0.0, huge, 1.0], [0.0, huge, 2.0]], dtype="float32")}]
    for mode in ("fast_compile", "fast_run"):
        assert [f.category for f in fuzz.check(recipe, values, fuzz.parse_mode(mode))] == ["declared"]


def test_a_reassociation_with_a_wrong_constant_is_still_a_bug(monkeypatch):
    """Moving the rewritten graph's constants by rounding noise accepts a constant rounded to its dtype,
    not one a rule got wrong: x / 3 -> x * 0.3333, said to be div_by_constant, is a wrong value."""
    recipe = _recipe(_vector("x"), fuzz.RecipeStep("call", "true_div", (fuzz.Ref(0), 3.0)), outputs=[1])
    values = [{0: np.array([1e308, 2.0, -7.0])}]
    said = get_rule("div_by_constant")
    monkeypatch.setattr(
        judge._Case, "rules_applied", lambda self, mode: [] if said.name in mode.query.exclude else [said]
    )
    findings = fuzz.check(recipe, values, _mode_with((ops.true_div, "x", 3.0), (ops.mul, "x", 0.3333)))
    assert [f.category for f in findings] == ["wrong"]


def test_a_stabilization_in_a_fused_graph_is_judged_within_its_own_rounding():
    """sin(log(1 - sigmoid(exp(x)))) at x = 28.9 is NaN as written and sin(-softplus(exp(x))) after
    stabilizing (seed 42, graph 497): sin of 3.5e12 moves by 5e-4 per ulp of its argument, noise the
    rewritten graph's wide walk shows only when it reaches inside the fused Composite."""
    recipe = _recipe(
        _vector("x"),
        fuzz.RecipeStep("call", "exp", (fuzz.Ref(0),)),
        fuzz.RecipeStep("call", "sigmoid", (fuzz.Ref(1),)),
        fuzz.RecipeStep("call", "neg", (fuzz.Ref(2),)),
        fuzz.RecipeStep("call", "add", (1, fuzz.Ref(3))),
        fuzz.RecipeStep("call", "log", (fuzz.Ref(4),)),
        fuzz.RecipeStep("call", "sin", (fuzz.Ref(5),)),
        outputs=[6],
    )
    values = [{0: np.array([0.0, 28.89742113867671, 1.0])}]
    for mode in ("fast_run", "o2"):
        assert [f.category for f in fuzz.check(recipe, values, fuzz.parse_mode(mode))] == ["improvement"]


def test_a_power_at_an_integer_exponent_exact_over_the_reals_is_judged_at_it():
    """v = sigmoid(log(x / (1 - x))) / -x is exactly -1 (the stabilized graph computes it so), and
    v ** v <= v ** v holds; the wide walks' v is -1 - 2**-128, whose power is NaN, and the comparison
    false (seed 39, graph 1112): the walk takes that exponent as the integer it is within its bits."""
    steps = [
        _vector("x"),
        fuzz.RecipeStep("call", "mul", (-1, fuzz.Ref(0))),
        fuzz.RecipeStep("call", "add", (1, fuzz.Ref(1))),
        fuzz.RecipeStep("call", "true_div", (fuzz.Ref(0), fuzz.Ref(2))),
        fuzz.RecipeStep("call", "log", (fuzz.Ref(3),)),
        fuzz.RecipeStep("call", "sigmoid", (fuzz.Ref(4),)),
        fuzz.RecipeStep("call", "true_div", (fuzz.Ref(5), fuzz.Ref(1))),
        fuzz.RecipeStep("call", "pow", (fuzz.Ref(6), fuzz.Ref(6))),
        fuzz.RecipeStep("call", "le", (fuzz.Ref(7), fuzz.Ref(7))),
    ]
    values = [{0: np.array([0.25, 6.70603915095384e-154, 0.5])}]
    findings = fuzz.check(_recipe(*steps, outputs=[8]), values, fuzz.parse_mode("fast_compile"))
    assert [f.category for f in findings] == ["improvement"]


def _huge_constant_products(twice: bool) -> fuzz.Recipe:
    """float32 n6 * n6 * 3e38 * n5 with n6 = 1 / n5 (issue 24), or two equal such products subtracted:
    the canonical order multiplies 3e38 * n5 first, which overflows at n5 = 25.86 (exactly 1.16e37)."""
    steps = [
        _vector("n5", "float32"),
        fuzz.RecipeStep("call", "true_div", (1.0, fuzz.Ref(0))),
    ]
    for _ in range(2 if twice else 1):
        first = len(steps)
        steps += [
            fuzz.RecipeStep("call", "op*", (fuzz.Ref(1), fuzz.Ref(1))),
            fuzz.RecipeStep("call", "op*", (fuzz.Ref(first), np.float32(3e38))),
            fuzz.RecipeStep("call", "op*", (fuzz.Ref(first + 1), fuzz.Ref(0))),
        ]
    if twice:
        steps.append(fuzz.RecipeStep("call", "op-", (fuzz.Ref(4), fuzz.Ref(7))))
    return _recipe(*steps, outputs=[len(steps) - 1])


HUGE_CONSTANT_VALUES = [{0: np.array([25.86, 1.0, 2.0], dtype="float32")}]


@pytest.mark.parametrize("twice", [False, True], ids=["product", "difference of equal products"])
@pytest.mark.parametrize("mode", fuzz.DEFAULT_MODES)
def test_an_overflow_only_reordering_causes_is_declared(mode, twice):
    """docs/modes.md's policy: inf (or inf - inf, NaN) where NumPy's order written gives 1.16e37 (or 0)
    is declared; everything else is compared as usual."""
    findings = fuzz.check(_huge_constant_products(twice), HUGE_CONSTANT_VALUES, fuzz.parse_mode(mode))
    assert [f.category for f in findings] == ["declared"], findings
    finite = [{0: np.array([1.0, 0.5, 0.25], dtype="float32")}]  # 3e38 * n5 fits: as written, to rounding
    assert fuzz.check(_huge_constant_products(twice), finite, fuzz.parse_mode(mode)) == []


def test_a_backend_wrong_after_a_reordering_is_a_bug(monkeypatch):
    """A reassociating rule fired and the rewritten graph is right over the reals, but the backend's value
    is not the rewritten graph's: a bug (it was declared before the judge asked what the graph gives)."""
    compile_mode = judge._Case.compile

    class Corrupted:
        def __init__(self, f):
            self.f, self.fgraph = f, f.fgraph

        def __call__(self, *args):
            out = np.array(self.f(*args), copy=True)
            out[np.isinf(out)] = 7.0
            return out

    def corrupted(self, mode):
        f, messages = compile_mode(self, mode)
        return Corrupted(f), messages

    monkeypatch.setattr(judge._Case, "compile", corrupted)
    findings = fuzz.check(
        _huge_constant_products(False), HUGE_CONSTANT_VALUES, fuzz.parse_mode("fast_compile")
    )
    assert [f.category for f in findings] == ["wrong"]


def test_an_undefined_cast_is_not_compared():
    """nan cast to int8 has no defined value: any result is accepted there, the rest is compared."""
    recipe = _recipe(
        _vector("x"), fuzz.RecipeStep("call", "cast", (fuzz.Ref(0),), {"dtype": "int8"}), outputs=[1]
    )
    values = [{0: np.array([np.nan, 1e10, 3.7])}]
    for mode in ("fast_compile", "fast_run"):
        assert fuzz.check(recipe, values, fuzz.parse_mode(mode)) == []


def test_modes_parse_with_linker_and_tags():
    assert fuzz.parse_mode("fast_run:numpy").linker == "numpy"
    assert "unsafe" in fuzz.parse_mode("o1+unsafe").query.include
    with pytest.raises(ValueError, match="unknown mode"):
        fuzz.parse_mode("o9")


def test_a_rewrite_that_removes_a_shape_error_refines_and_its_values_are_still_checked():
    """Dropping a computation drops its broadcast error (declared); on agreeing shapes values still count."""
    recipe = _recipe(
        _vector("x"), _vector("y"), fuzz.RecipeStep("call", "mul", (fuzz.Ref(0), fuzz.Ref(1))), outputs=[2]
    )
    mismatched = {0: np.array([1.0, 2.0]), 1: np.array([3.0, 4.0, 5.0])}
    agreeing = {0: np.array([1.0, 2.0]), 1: np.array([3.0, 4.0])}
    planted = _mode_with((ops.mul, "x", "y"), "x")
    assert [f.category for f in fuzz.check(recipe, [mismatched], planted)] == ["declared"]
    assert [f.category for f in fuzz.check(recipe, [agreeing], planted)] == ["wrong"]


def test_integer_wraparound_before_a_float_is_kept_by_the_wide_walks():
    """x * x wraps in int64 before meeting a float: the stabilized softplus of it is an improvement."""
    recipe = _recipe(
        fuzz.RecipeStep("input", params={"name": "i", "dtype": "int64", "shape": ()}),
        fuzz.RecipeStep("input", params={"name": "x", "dtype": "float64", "shape": ()}),
        fuzz.RecipeStep("call", "mul", (fuzz.Ref(0), fuzz.Ref(0), fuzz.Ref(1))),
        fuzz.RecipeStep("call", "exp", (fuzz.Ref(2),)),
        fuzz.RecipeStep("call", "log1p", (fuzz.Ref(3),)),
        outputs=[4],
    )
    values = [{0: np.array(-4261752863850285365), 1: np.array(2.0)}]
    assert [f.category for f in fuzz.check(recipe, values, fuzz.parse_mode("fast_run"))] == ["improvement"]


def test_integer_wraparound_inside_a_fused_node_is_kept_by_the_wide_walks():
    """1.0 - (i + i) fused, int8 i = 85: i + i wraps to -86, so the log_softmax of [1, 1, 1, 87] ends in
    -log1p(3 e^-86) = -1.3e-37, which relwrite gives and NumPy rounds to 0; the wide walks widened the
    fused node's int8 inputs first and computed 1 - 170 (seed 24 reported it wrong)."""
    inner = _recipe(
        fuzz.RecipeStep("input", params={"name": "i0", "dtype": "int8", "shape": ()}),
        fuzz.RecipeStep("call", "add", (fuzz.Ref(0), fuzz.Ref(0))),
        fuzz.RecipeStep("call", "op-", (1.0, fuzz.Ref(1))),
        outputs=[2],
    )
    recipe = _recipe(
        _vector("x0", "int8"),
        fuzz.RecipeStep("call", "composite", (fuzz.Ref(0),), {"inner": inner}),
        fuzz.RecipeStep("call", "log_softmax", (fuzz.Ref(1),), {"axis": 0}),
        outputs=[2],
    )
    values = [{0: np.array([0, 0, 0, 85], dtype="int8")}]
    found = fuzz.check(recipe, values, fuzz.parse_mode("fast_compile"))
    assert [f.category for f in found] == ["improvement"]


def test_a_narrower_partial_product_rounds_in_the_wide_walks_slack():
    """mul(x, x, v, y) of a float32 x computes x * x in float32: the noisy wide walks move that partial
    product as float32 rounding does, so relwrite's log_softmax (log1p of the small terms, exact to the
    last digit of its float32-rounded input) is an improvement on NumPy's log(1 + 1.8e-13), not a bug
    3e-7 away from the exact product (seed 24)."""
    recipe = _recipe(
        fuzz.RecipeStep("input", params={"name": "x", "dtype": "float32", "shape": ()}),
        _vector("v"),
        fuzz.RecipeStep("input", params={"name": "y", "dtype": "float64", "shape": ()}),
        fuzz.RecipeStep("call", "mul", (fuzz.Ref(0), fuzz.Ref(0), fuzz.Ref(1), fuzz.Ref(2))),
        fuzz.RecipeStep("call", "log_softmax", (fuzz.Ref(3),), {"axis": -1}),
        outputs=[4],
    )
    values = [
        {
            0: np.array(1.9144896268844604, dtype="float32"),
            1: np.array([-5.211570232178224, 0.0]),
            2: np.array(-1.3352105854086573),
        }
    ]
    found = fuzz.check(recipe, values, fuzz.parse_mode("fast_compile"))
    assert [f.category for f in found] == ["improvement"]


def test_a_fused_nodes_other_outputs_do_not_decide_whether_the_rewritten_walk_passes_an_infinity():
    """argmax(log1p(-sigmoid(x)) * b) for b all False: NumPy's log1p(-1) = -inf makes NaN, its index 1;
    the stabilized -softplus(x) makes -0.0 everywhere, index 0. fast_run fuses the product with the
    other output, sqr of the same -softplus(x), which overflows: the exact walk of the argmax's input
    passes no infinity, so the stabilization is an improvement (seed 24, graph 6263, reported wrong)."""
    recipe = _recipe(
        _vector("x"),
        _vector("b", "bool"),
        fuzz.RecipeStep("call", "sigmoid", (fuzz.Ref(0),)),
        fuzz.RecipeStep("call", "neg", (fuzz.Ref(2),)),
        fuzz.RecipeStep("call", "log1p", (fuzz.Ref(3),)),
        fuzz.RecipeStep("call", "mul", (fuzz.Ref(4), fuzz.Ref(1))),
        fuzz.RecipeStep("call", "argmax", (fuzz.Ref(5),), {"axis": 0}),
        fuzz.RecipeStep("call", "op**", (fuzz.Ref(4), 2)),
        outputs=[6, 7],
    )
    # several huge x: the reference's rounding noise cannot make every sigmoid fall below 1
    values = [{0: np.array([0.0, 1e200, 1e200, 1e200, 1e200, 1e200]), 1: np.zeros(6, dtype=bool)}]
    found = fuzz.check(recipe, values, fuzz.parse_mode("fast_run"))
    assert [f.category for f in found] == ["improvement"]


def test_an_infinity_a_later_op_hides_is_judged_element_by_element():
    """log1p(-sigmoid(x)) ** -sigmoid(x): NumPy's log1p(-1) = -inf at x = 2.3e269 gives (-inf) ** -1 =
    -0.0; the stabilized -softplus(x) gives the right -2.3e269, and -4.3e-270 after the power. No
    precision settles it (sigmoid is 1 at 4096 bits too): the original's walk passes an infinity there
    and the rewritten one does not, as for a comparison, though the other elements (x = 0, a negative
    number to the power -0.5) are NaN in both (seed 24, graph 20825, reported wrong)."""
    recipe = _recipe(
        _vector("x"),
        fuzz.RecipeStep("call", "sigmoid", (fuzz.Ref(0),)),
        fuzz.RecipeStep("call", "neg", (fuzz.Ref(1),)),
        fuzz.RecipeStep("call", "log1p", (fuzz.Ref(2),)),
        fuzz.RecipeStep("call", "op**", (fuzz.Ref(3), fuzz.Ref(2))),
        outputs=[4],
    )
    values = [{0: np.array([0.0, 2.319507978467112e269, 0.0])}]
    found = fuzz.check(recipe, values, fuzz.parse_mode("fast_run"))
    assert [f.category for f in found] == ["improvement"]


def test_an_increment_of_one_element_past_its_dtype_wraps_as_the_graph_does():
    """x + inc_subtensor(zeros_like(x)[0], y) becomes inc_subtensor(x[0], y): for int8 x[0] = -127 and
    int32 y = -2 the call raised OverflowError where the original wraps to 127; the reference raised
    too on an increment that overflows by itself (seed 24, graph 32329, reported crashed)."""
    steps = [
        fuzz.RecipeStep("input", params={"name": "x0", "dtype": "int8", "shape": (3,)}),
        fuzz.RecipeStep("input", params={"name": "x1", "dtype": "int32", "shape": ()}),
        fuzz.RecipeStep("call", "zeros_like", (fuzz.Ref(0),)),
        fuzz.RecipeStep("call", "inc_subtensor", (fuzz.Ref(2), fuzz.Ref(1)), {"key": (0,)}),
        fuzz.RecipeStep("call", "op+", (fuzz.Ref(0), fuzz.Ref(3))),
        fuzz.RecipeStep("call", "inc_subtensor", (fuzz.Ref(0), fuzz.Ref(1)), {"key": (0,)}),
    ]
    values = [{0: np.array([-127, 0, 0], dtype="int8"), 1: np.array(-2, dtype="int32")}]
    for output in (4, 5):  # the rewritten graph, and the increment written directly
        for mode in ("fast_compile", "fast_run"):
            assert fuzz.check(_recipe(*steps, outputs=[output]), values, fuzz.parse_mode(mode)) == []


def test_a_dot_product_whose_terms_overflow_may_end_in_either_infinity_or_nan():
    """-1.5e18 * 1.9e30 + 9e34 * 2.8e36 in float32: NumPy says NaN, an FMA-using BLAS -inf: both allowed."""
    recipe = _recipe(
        fuzz.RecipeStep("input", params={"name": "v", "dtype": "float32", "shape": (3, 1)}),
        fuzz.RecipeStep("input", params={"name": "m", "dtype": "float32", "shape": (3, None)}),
        fuzz.RecipeStep("call", "dot22", (fuzz.Ref(1), fuzz.Ref(0))),
        outputs=[2],
    )
    v = np.array([[0.0], [1.9474628e30], [2.7792621e36]], dtype="float32")
    m = np.array([[0.0, -1.548029e18, 9.010364e34], [0, 0, 0], [0, 0, 0]], dtype="float32")
    findings = fuzz.check(recipe, [{0: v, 1: m}], fuzz.parse_mode("fast_run"))
    assert findings == []
    finite = [{0: np.ones((3, 1), dtype="float32"), 1: np.eye(3, dtype="float32")}]
    assert fuzz.check(recipe, finite, fuzz.parse_mode("fast_run")) == []


def test_rounding_inside_a_fused_node_counts_as_rounding_noise():
    """x ** exp(c) at x = 1.4e-79 amplifies a float32 exp's last-place difference (libm against NumPy)."""
    recipe, input_sets = CASES[7, 853]
    assert any(s.op == "composite" for s in recipe.steps)
    assert fuzz.check(recipe, input_sets, fuzz.parse_mode("fast_run")) == []


def test_a_stabilization_no_precision_can_confirm_is_an_improvement():
    """sin(log1p(-sigmoid(x))) at x = 1.3e9: 1 - sigmoid(x) needs 1.9e9 bits; -softplus(x) is right."""
    recipe, input_sets = CASES[11, 6666]
    findings = fuzz.check(recipe, input_sets, fuzz.parse_mode("fast_run"))
    assert [f.category for f in findings] == ["improvement"]


@pytest.mark.parametrize(
    ("index", "category"),
    [
        (945, "improvement"),  # log(sigmoid(-1.4e62)) ** -inf: C99 pow at an infinite exponent is 0
        (5157, "declared"),  # log(exp(x) * log(exp(x))) at x = -1.3e250: x * exp(x) underflows to -0.0
        (7291, "declared"),  # sqrt(sqr(x)) at x = 6.6e-29 in float32: |x| where the original underflows
        (9851, "declared"),  # log1p(-sigmoid(x)) collected into a square that overflows at x = 3.4e219
    ],
)
def test_a_rule_that_moves_overflow_or_underflow_is_judged_by_exact_walks(index, category):
    """Rules exact over the reals may move where rounding leaves the range; the wide walks arbitrate."""
    recipe, input_sets = CASES[11, index]
    findings = fuzz.check(recipe, input_sets, fuzz.parse_mode("fast_run"))
    assert {f.category for f in findings} == {category}


def test_the_reference_log1mexp_is_undefined_above_zero_as_the_op_is():
    """log(1 - exp(1e-300)) is the log of a negative number: NaN, though exp(1e-300) rounds to 1."""
    from relwrite.backends.numpy import numpy_function
    from relwrite.graph.basic import vector

    values = np.array([1e-300, 0.0, -1.0, -1e-300, 2.0])
    x = vector("x")
    with np.errstate(all="ignore"):
        reference = semantics._ref_log1mexp(values)
        got = numpy_function([x], ops.log1mexp(x))(values)
    np.testing.assert_array_equal(np.isnan(reference), [True, False, False, False, True])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(reference))
    # below zero the plain formula loses what the op keeps (-1e-300: -inf against -690.8); the wide walks
    # arbitrate there, so only the domain is the reference's to say
    assert got[3] == pytest.approx(np.log(1e-300))


@pytest.mark.parametrize("log", [False, True])
def test_the_reference_softmax_of_an_empty_axis_is_empty_as_the_ops_is(log):
    """softmax over an axis of length 0 normalizes nothing: the backends give an empty array, and so
    does the reference (its maximum of the axis raised ValueError; seed 12 found it)."""
    from relwrite.backends.numpy import numpy_function
    from relwrite.graph.basic import tensor

    x = tensor("x", dtype="float64", shape=(3, 0))
    op = ops.log_softmax if log else ops.softmax
    values = np.zeros((3, 0))
    reference = semantics._ref_softmax(values, 1, log)
    got = numpy_function([x], op(x, axis=1))(values)
    assert reference.shape == got.shape == (3, 0)
    row = semantics._ref_softmax(np.array([[0.0, np.log(3.0)]]), 1, log)  # the rest of the op as before
    np.testing.assert_allclose(row, np.log([[0.25, 0.75]]) if log else [[0.25, 0.75]])


def test_the_wide_walks_round_integers_to_the_float_dtype_an_op_computes_them_in():
    """sin of an int64 is sin of the integer rounded to float64, as NumPy computes it; the wide walks
    took the integer exactly (sin(2**62 + 1) is not sin(2**62)), so a rewritten graph's wide value
    disagreed with the backend's, and a stabilization was judged wrong (seed 27, graph 2058).  Sums
    round their integer operands alike."""
    from relwrite.testing.fuzz.walks import _wide_walk

    x = tensor("x", dtype="int64", shape=(None,))
    y = tensor("y", dtype="float64", shape=(None,))
    values = [np.array([2**62 + 1, -6726214007537046300]), np.array([0.0, 0.0])]
    for precision in ("long", 128):
        sines, sums = _wide_walk([x, y], [ops.sin(x), ops.add(x, y)], values, precision)
        assert [float(v) for v in sines] == pytest.approx([math.sin(float(v)) for v in values[0]], rel=1e-12)
        assert [float(v) for v in sums] == [float(v) for v in values[0]]


def test_the_walks_give_a_fused_composites_outputs_their_own_shapes():
    """Fusion makes Composites whose outputs have the shapes of the inputs they are made of: the walks
    broadcast every output to all the inputs, so an output beside an empty one came out empty and the
    rewritten graph could not be walked (seed 27, graph 1355)."""
    from relwrite.graph.basic import scalar
    from relwrite.testing.fuzz.walks import _walk, _wide_walk

    ai, bi = scalar("a"), scalar("b")
    fused = ops.Composite([ai, bi], [ai * 2.0, ai + bi], own_shapes=True)
    a, b = tensor("a", dtype="float64", shape=(None, 1)), tensor("b", dtype="float64", shape=(None,))
    args = [np.ones((2, 1)), np.zeros(0)]
    for values in (_walk([a, b], fused(a, b), args, "native"), _wide_walk([a, b], fused(a, b), args, 128)):
        assert [np.shape(v) for v in values] == [(2, 1), (2, 0)]
    assert float(_walk([a, b], fused(a, b), args, "native")[0][1, 0]) == 2.0


def test_the_exact_walk_rounds_what_the_exact_reference_computes_wider():
    """exp(1.2e214) came from the exact reference with its guard bits while -1 * exp(x) was rounded to
    the walk's 128 bits, so exp(x) + -1 * exp(x) did not cancel and log of it was x, not -inf; the
    stabilized x + log1mexp(0) = -inf was judged wrong (seed 22, graph 1783)."""
    from relwrite.testing.fuzz.walks import _wide_walk

    x = tensor("x", dtype="float64", shape=(None,))
    graph = ops.log(ops.add(ops.exp(x), ops.mul(-1, ops.exp(x))))
    (value,) = _wide_walk([x], [graph], [np.array([0.0, 1.2418049327851728e214])], 128)
    assert [float(v) for v in value] == [-math.inf, -math.inf]


def test_the_reference_log_softmax_and_logsumexp_are_rounded_once():
    """In float16 log(1 + exp(-10)) is log(1) = 0: log_softmax([71, 113, 123]) lost the -4.5e-5 of its
    maximum, which the backends keep (seed 22, graph 174).  The references compute in long double and
    round once."""
    x = np.array([[71.0, 113.0, 123.0]], dtype=np.float16)
    exact = [v - 123 - math.log1p(math.exp(-10) + math.exp(-52)) for v in (71.0, 113.0, 123.0)]
    np.testing.assert_array_equal(semantics._ref_softmax(x, 1, True), np.array([exact], dtype=np.float16))
    assert semantics._ref_softmax(x, 1, True)[0, 2] < 0
    total = semantics._ref_logsumexp(x, (1,))
    assert total.dtype == np.float16 and total[0] == np.float16(123 + math.log1p(math.exp(-10)))
    # integers become the op's float dtype first: 2**63 - 1 and 2**63 - 2 are one float64 (seed 22, 999)
    big = np.array([[2**63 - 1], [0], [2**63 - 2]], dtype=np.int64)
    np.testing.assert_array_equal(semantics._ref_softmax(big, 0, True)[[0, 2], 0], [-math.log(2)] * 2)
    assert semantics._ref_sigmoid(np.array([2**63 - 1])).dtype == np.float64


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_the_reference_sigmoid_is_rounded_once_where_the_plain_formula_overflows(dtype):
    """1 / (1 + exp(-x)) in float16 overflows exp below -11 and gave 0 for sigmoid(-17), whose value
    4.1e-8 rounds to the float16 6e-8 as the backends give it (seed 21, graph 1919: log of it is -16.6,
    not -inf).  The reference is the sigmoid rounded once, at both ends and at NaN."""
    values = np.array(
        [-np.inf, -800.0, -90.0, -17.0, -11.5, -1.0, 0.0, 2.5, 40.0, np.inf, np.nan], dtype=dtype
    )
    exact = np.array(
        [0.0 if v == -np.inf else 1.0 / (1.0 + math.exp(-v)) if v > -700 else 0.0 for v in values]
    )
    exact[-1] = np.nan
    reference = semantics._ref_sigmoid(values)
    assert reference.dtype == values.dtype
    np.testing.assert_array_equal(reference, exact.astype(dtype))
    got = numpy_function([x := tensor("x", dtype=dtype, shape=(None,))], ops.sigmoid(x))(values)
    np.testing.assert_allclose(got, reference, rtol=np.finfo(dtype).eps * 4, atol=0)
    assert reference[3] > 0


def test_the_fuzzers_fma_rounds_once_and_is_drawn():
    """The reference's fma (fractions, apart from the backend's) is the NumPy backend's bit for bit, in
    float64, float32 and float16 (hypot's dtype of int8 operands); the drawer makes fma calls."""
    rng = np.random.default_rng(0)
    for dtype in ("float64", "float32", "int8"):
        a, b = ((rng.standard_normal(200) * 100).astype(dtype) for _ in range(2))
        with np.errstate(all="ignore"):
            c = np.where(rng.random(200) < 0.5, -(a * b), rng.standard_normal(200)).astype(dtype)
        x, y, z = (tensor(n, dtype=dtype, shape=(None,)) for n in "xyz")
        values, reference = numpy_function([x, y, z], ops.fma(x, y, z))(a, b, c), semantics._ref_fma(a, b, c)
        bits = f"u{reference.dtype.itemsize}"
        assert values.dtype == reference.dtype
        np.testing.assert_array_equal(values.view(bits), reference.view(bits))
    drawn = [fuzz.draw_graph(0, index)[0] for index in range(200)]
    assert any(step.op == "fma" for recipe in drawn for step in recipe.steps)

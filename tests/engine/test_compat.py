"""Every code example of the seed's "Graph Rewriting" manual, run through relwrite.engine.compat.

Only the seed's import lines are changed; each test checks the printout the
seed shows, then that the rewritten graph computes what the original did.
"""

import re

import numpy as np
import pytest
from etuples import etuple
from kanren import conso, eq, fact, heado, tailo
from kanren.assoccomm import assoc_flatten, associative
from kanren.core import lall
from kanren.graph import mapo
from unification import vars as lvars

import relwrite
import relwrite as at
from relwrite import add, float64, identity, mul, true_div
from relwrite import dot as _dot
from relwrite.engine import KanrenRelationSub, derive_tracks
from relwrite.engine.compat import (
    EquilibriumOptimizer,
    GlobalOptimizer,
    LocalOptimizer,
    MergeOptimizer,
    OpRemove,
    OpSub,
    OptimizationQuery,
    PatternSub,
    aesara,
    optdb,
    optimize_graph,
)
from relwrite.graph.features import ReplaceValidate

RNG = np.random.default_rng(0)


def values_of(fgraph):
    """The graph evaluated by the NumPy backend on fixed random inputs (one scalar or array per input)."""
    inputs = [RNG.uniform(0.5, 2.0, size=[3] * v.ndim) for v in fgraph.inputs]
    return relwrite.backends.numpy.numpy_function(fgraph.inputs, fgraph.outputs)(*inputs), inputs


def evaluate(fgraph, inputs):
    return relwrite.backends.numpy.numpy_function(fgraph.inputs, fgraph.outputs)(*inputs)


class Simplify(GlobalOptimizer):
    def add_requirements(self, fgraph):
        fgraph.attach_feature(ReplaceValidate())

    def apply(self, fgraph):
        for node in fgraph.toposort():
            if node.op == true_div:
                x, y = node.inputs
                z = node.outputs[0]
                if x.owner and x.owner.op == mul:
                    a, b = x.owner.inputs
                    if y == a:
                        fgraph.replace_validate(z, b)
                    elif y == b:
                        fgraph.replace_validate(z, a)


class LocalSimplify(LocalOptimizer):
    def transform(self, fgraph, node):
        if node.op == true_div:
            x, y = node.inputs
            if x.owner and x.owner.op == mul:
                a, b = x.owner.inputs
                if y == a:
                    return [b]
                elif y == b:
                    return [a]
        return False

    def tracks(self):
        return [true_div]


def seed_graph():
    x = float64("x")
    y = float64("y")
    z = float64("z")
    a = add(z, mul(true_div(mul(y, x), y), true_div(z, x)))
    return aesara.graph.fg.FunctionGraph([x, y, z], [a])


def test_global_simplify():
    simplify = Simplify()
    e = seed_graph()
    assert repr(e) == "FunctionGraph(add(z, mul(true_div(mul(y, x), y), true_div(z, x))))"
    before, inputs = values_of(e)
    assert simplify.optimize(e) is None
    assert repr(e) == "FunctionGraph(add(z, mul(x, true_div(z, x))))"
    e.check_integrity()
    np.testing.assert_allclose(evaluate(e, inputs), before)


def test_merge_before_simplify():
    simplify = Simplify()
    x = float64("x")
    y = float64("y")
    z = float64("z")
    a = true_div(mul(add(y, z), x), add(y, z))
    e = aesara.graph.fg.FunctionGraph([x, y, z], [a])
    assert repr(e) == "FunctionGraph(true_div(mul(add(y, z), x), add(y, z)))"
    before, inputs = values_of(e)
    simplify.optimize(e)
    assert repr(e) == "FunctionGraph(true_div(mul(add(y, z), x), add(y, z)))"

    result = MergeOptimizer().optimize(e)
    assert isinstance(result, tuple) and len(result) == 7
    assert result[0] == 0 and result[2:] == (None, None, {}, 1, 0)
    assert isinstance(result[1], float) and result[1] >= 0
    assert re.fullmatch(r"\(0, [0-9.e-]+, None, None, \{\}, 1, 0\)", repr(result))
    assert repr(e) == "FunctionGraph(true_div(mul(*1 -> add(y, z), x), *1))"
    np.testing.assert_allclose(evaluate(e, inputs), before)

    simplify.optimize(e)
    assert repr(e) == "FunctionGraph(x)"
    e.check_integrity()
    np.testing.assert_allclose(evaluate(e, inputs), before)


def test_topo_optimizer_with_local_simplify():
    e = seed_graph()
    before, inputs = values_of(e)
    simplify = aesara.graph.opt.TopoOptimizer(LocalSimplify())
    result = simplify.optimize(e)
    assert result[0] is simplify
    assert result[1:4] == (1, 5, 3)
    assert len(result) == 7 and all(isinstance(t, float) for t in result[4:])
    assert re.fullmatch(
        r"\(<relwrite\.engine\.compat\.TopoOptimizer object at 0x[0-9a-f]+>, 1, 5, 3, .*, .*, .*\)",
        repr(result),
    )
    assert repr(e) == "FunctionGraph(add(z, mul(x, true_div(z, x))))"
    np.testing.assert_allclose(evaluate(e, inputs), before)


def test_pattern_subs_of_the_seed():
    local_simplify_1 = PatternSub((true_div, (mul, "x", "y"), "y"), "x")
    local_simplify_2 = PatternSub((true_div, (mul, "x", "y"), "x"), "y")
    e = seed_graph()
    before, inputs = values_of(e)
    aesara.graph.opt.TopoOptimizer([local_simplify_1, local_simplify_2]).optimize(e)
    assert repr(e) == "FunctionGraph(add(z, mul(x, true_div(z, x))))"
    np.testing.assert_allclose(evaluate(e, inputs), before)


@pytest.mark.parametrize("numerator_first", ["x", "y"])
def test_each_seed_pattern_covers_one_argument_order(numerator_first):
    """(x * y) / y needs local_simplify_1, (y * x) / y needs local_simplify_2."""
    local_simplify_1 = PatternSub((true_div, (mul, "x", "y"), "y"), "x")
    local_simplify_2 = PatternSub((true_div, (mul, "x", "y"), "x"), "y")
    matching, other = (
        (local_simplify_1, local_simplify_2)
        if numerator_first == "x"
        else (local_simplify_2, local_simplify_1)
    )
    x, y = float64("x"), float64("y")
    numerator = mul(x, y) if numerator_first == "x" else mul(y, x)
    e = aesara.graph.fg.FunctionGraph([x, y], [true_div(numerator, y)])
    aesara.graph.opt.TopoOptimizer(other).optimize(e)
    assert (
        repr(e)
        == f"FunctionGraph(true_div(mul({numerator_first}, {'y' if numerator_first == 'x' else 'x'}), y))"
    )
    aesara.graph.opt.TopoOptimizer(matching).optimize(e)
    assert repr(e) == "FunctionGraph(x)"


def test_op_sub_and_op_remove():
    add_to_mul = OpSub(add, mul)
    remove_identity = OpRemove(identity)
    x, y = float64("x"), float64("y")
    e = aesara.graph.fg.FunctionGraph([x, y], [identity(add(x, y))])
    aesara.graph.opt.TopoOptimizer([remove_identity, add_to_mul]).optimize(e)
    assert repr(e) == "FunctionGraph(mul(x, y))"
    e.check_integrity()
    np.testing.assert_allclose(evaluate(e, [np.float64(3.0), np.float64(4.0)]), [12.0])


# -- miniKanren: distributing a dot product over additions ------------------------------------------


def dot_distributeo(in_lv, out_lv):
    """A `kanren` goal constructor relation for the relation
    ``A.dot(a + b ...) == A.dot(a) + A.dot(b) ...``."""
    A_lv, add_term_lv, add_cdr_lv, dot_cdr_lv, add_flat_lv = lvars(5)

    return lall(
        # Make sure the input is a `_dot`
        eq(in_lv, etuple(_dot, A_lv, add_term_lv)),
        # Make sure the term being `_dot`ed is an `add`
        heado(at.add, add_term_lv),
        # Flatten the associative pairings of `add` operations
        assoc_flatten(add_term_lv, add_flat_lv),
        # Get the flattened `add` arguments
        tailo(add_cdr_lv, add_flat_lv),
        # Add all the `_dot`ed arguments and set the output
        conso(at.add, dot_cdr_lv, out_lv),
        # Apply the `_dot` to all the flattened `add` arguments
        mapo(lambda x, y: conso(_dot, etuple(A_lv, x), y), add_cdr_lv, dot_cdr_lv),
    )


@pytest.fixture(scope="module")
def seed_kanren_setup():
    aesara.pprint.assign(_dot, aesara.printing.OperatorPrinter("@", -1, "left"))
    fact(associative, at.add)


VALUES = {name: RNG.normal(size=3) for name in "xyzw"} | {name: RNG.normal(size=(3, 3)) for name in "AB"}


def value_of(output):
    """`output` evaluated with VALUES bound to its inputs by name."""
    inputs = relwrite.graph.basic.graph_inputs([output])
    return relwrite.backends.numpy.numpy_function(inputs, output)(*[VALUES[v.name] for v in inputs])


def test_dot_distribute_forward_and_backward(seed_kanren_setup):
    A, B = VALUES["A"], VALUES["B"]
    x, y, z, w = (VALUES[name] for name in "xyzw")
    dot_distribute_opt = EquilibriumOptimizer([KanrenRelationSub(dot_distributeo)], max_use_ratio=10)
    x_at = at.vector("x")
    y_at = at.vector("y")
    A_at = at.matrix("A")
    test_at = A_at.dot(x_at + y_at)
    assert aesara.pprint(test_at) == "(A @ (x + y))"
    before = value_of(test_at)
    res = optimize_graph(test_at, include=[], custom_opt=dot_distribute_opt, clone=False)
    assert aesara.pprint(res) == "((A @ x) + (A @ y))"
    np.testing.assert_allclose(value_of(res), before, rtol=1e-12)
    np.testing.assert_allclose(before, A @ (x + y), rtol=1e-12)

    z_at = at.vector("z")
    w_at = at.vector("w")
    test_at = A_at.dot((x_at + y_at) + (z_at + w_at))
    assert aesara.pprint(test_at) == "(A @ ((x + y) + (z + w)))"
    before = value_of(test_at)
    res = optimize_graph(test_at, include=[], custom_opt=dot_distribute_opt, clone=False)
    assert aesara.pprint(res) == "((A @ x) + (A @ y) + (A @ z) + (A @ w))"
    np.testing.assert_allclose(value_of(res), before, rtol=1e-12)
    np.testing.assert_allclose(before, A @ (x + y + z + w), rtol=1e-12)

    B_at = at.matrix("B")
    w_at = at.vector("w")
    test_at = A_at.dot(x_at + (y_at + B_at.dot(z_at + w_at)))
    assert aesara.pprint(test_at) == "(A @ (x + (y + (B @ (z + w)))))"
    before = value_of(test_at)
    res = optimize_graph(test_at, include=[], custom_opt=dot_distribute_opt, clone=False)
    assert aesara.pprint(res) == "((A @ x) + (A @ y) + ((A @ (B @ z)) + (A @ (B @ w))))"
    np.testing.assert_allclose(value_of(res), before, rtol=1e-12)
    np.testing.assert_allclose(before, A @ (x + (y + B @ (z + w))), rtol=1e-12)

    dot_gather_opt = EquilibriumOptimizer(
        [KanrenRelationSub(lambda x, y: dot_distributeo(y, x))], max_use_ratio=10
    )
    rev_res = optimize_graph(res, include=[], custom_opt=dot_gather_opt, clone=False)
    assert aesara.pprint(rev_res) == "(A @ (x + y + (B @ (z + w))))"
    np.testing.assert_allclose(value_of(rev_res), before, rtol=1e-12)


def test_the_seed_relations_cannot_be_indexed_by_head_op():
    """dot_distributeo's answer stream on fresh variables does not end: it is tried on every node."""
    assert derive_tracks(dot_distributeo) is None
    assert derive_tracks(lambda x, y: dot_distributeo(y, x)) is None
    assert KanrenRelationSub(dot_distributeo).tracks() is None


# -- the optimization database ----------------------------------------------------------------------


def test_seed_queries_and_registration():
    fast_run = optdb.query(OptimizationQuery(include=["fast_run"]))
    fast_compile = optdb.query(OptimizationQuery(include=["fast_compile"]))
    fast_run_no_inplace = optdb.query(OptimizationQuery(include=["fast_run"], exclude=["inplace"]))
    assert [step.name for step in fast_compile.rewriters] == ["merge1", "canonicalize", "stabilize"]
    in_place = ["add_destroy_handler", "inplace_marks"]
    assert [step.name for step in fast_run.rewriters][-3:] == [*in_place, "merge3"]
    assert [step.name for step in fast_run_no_inplace.rewriters] == [
        step.name for step in fast_run.rewriters if step.name not in in_place
    ]

    simplify = Simplify()
    optdb.register("simplify", simplify, "fast_run", position=0.5)
    try:
        names = [step.name for step in optdb.query(OptimizationQuery(include=["fast_run"])).rewriters]
        assert names[:3] == ["merge1", "simplify", "canonicalize"]
        e = seed_graph()
        optdb.query(OptimizationQuery(include=["fast_run"], exclude=["fusion"])).rewrite(e)
        assert repr(e) == "FunctionGraph(add(z, mul(x, true_div(z, x))))"
    finally:
        optdb.remove("simplify")
    assert "simplify" not in optdb


def test_aesara_namespace_paths():
    assert aesara.graph.kanren.KanrenRelationSub is KanrenRelationSub
    assert aesara.graph.opt_utils.optimize_graph is optimize_graph
    assert aesara.graph.optdb.OptimizationQuery is OptimizationQuery
    assert aesara.compile.optdb is optdb
    assert aesara.graph.opt.MergeOptimizer is MergeOptimizer
    assert aesara.graph.fg.FunctionGraph is relwrite.FunctionGraph

"""Node rewriters: node_rewriter, OpSub, OpRemove, PatternSub, KanrenRelationSub, derive_tracks."""

import warnings

import kanren.core
import numpy as np
import pytest
import toolz
from etuples import etuple
from kanren import conde, eq, lall, run, var
from unification import reify, unify

import relwrite
from relwrite import (
    FunctionGraph,
    add,
    constant,
    cos,
    exp,
    float64,
    identity,
    log,
    mul,
    neg,
    scalar,
    sin,
    true_div,
    vector,
)
from relwrite.engine import (
    EquilibriumRewriter,
    KanrenRelationSub,
    NodeRewriter,
    OpRemove,
    OpSub,
    PatternSub,
    RewriteError,
    RewriteWarning,
    derive_tracks,
    in2out,
    node_rewriter,
    out2in,
)
from relwrite.engine.node_rewriters import (
    BudgetExceeded,
    FunctionNodeRewriter,
    collect_rejections,
    kanren_budget,
    reject_answer,
    replacement_pairs,
)
from relwrite.graph import ops
from relwrite.graph.basic import Apply, Op, Variable, as_variable
from relwrite.relations.runtime import run_relation


def exp_log(lhs, rhs):
    x = var()
    return lall(eq(lhs, etuple(exp, etuple(log, x))), eq(rhs, x))


def rewrite_once(rewriter, *outputs, inputs=None):
    """A FunctionGraph of `outputs` after one in-to-out walk of `rewriter` (the caller's graph kept)."""
    fgraph = FunctionGraph(inputs, list(outputs))
    in2out(rewriter).rewrite(fgraph)
    fgraph.check_integrity()
    return fgraph


def output_node(fgraph):
    return fgraph.outputs[0].owner


# -- node_rewriter and the base class ----------------------------------------------------------------


def test_node_rewriter_decorator_keeps_tracks_and_name():
    @node_rewriter([exp, ops.Log])
    def drop_exp(fgraph, node):
        """Drop exp (for the test)."""
        return [node.inputs[0]] if node.op == exp else False

    assert drop_exp.tracks() == [exp, ops.Log]
    assert drop_exp.name == "drop_exp" and str(drop_exp) == "drop_exp"
    assert drop_exp.__doc__ == "Drop exp (for the test)."
    x = float64("x")
    assert repr(rewrite_once(drop_exp, sin(exp(x)))) == "FunctionGraph(sin(x))"


def test_node_rewriter_rejects_tracks_that_are_not_ops():
    with pytest.raises(TypeError, match="'exp'"):
        node_rewriter(["exp"])
    with pytest.raises(TypeError, match="int"):
        node_rewriter([int])


def test_node_rewriter_rejects_an_empty_tracks_list_when_decorating():
    with pytest.raises(ValueError, match=r"tracks is an empty list.*use None"):
        node_rewriter([])
    with pytest.raises(ValueError, match="FunctionNodeRewriter: tracks is an empty list"):
        FunctionNodeRewriter(lambda fgraph, node: False, tracks=())
    assert node_rewriter(None)(lambda fgraph, node: False).tracks() is None


@pytest.mark.parametrize("tracks", [exp, ops.Log, "exp"])
def test_node_rewriter_rejects_tracks_that_are_not_a_list(tracks):
    with pytest.raises(TypeError, match="tracks must be None or a list of ops or op classes, got"):
        node_rewriter(tracks)


def test_node_rewriter_base_class_needs_transform():
    class Incomplete(NodeRewriter):
        pass

    x = float64("x")
    with pytest.raises(NotImplementedError, match="Incomplete"):
        Incomplete().transform(None, exp(x).owner)
    assert Incomplete().tracks() is None


def test_replacement_pairs_checks_what_transform_returned():
    x, y = float64("x"), float64("y")
    node = add(x, y).owner
    rewriter = OpSub(add, mul)
    assert replacement_pairs(rewriter, node, False) == []
    assert replacement_pairs(rewriter, node, [None]) == []
    assert replacement_pairs(rewriter, node, [x]) == [(node.outputs[0], x)]
    assert replacement_pairs(rewriter, node, {node.outputs[0]: y}) == [(node.outputs[0], y)]
    with pytest.raises(RewriteError, match=r"add -> mul.*2 replacements.*1 outputs"):
        replacement_pairs(rewriter, node, [x, y])
    with pytest.raises(RewriteError, match=r"add -> mul returned 3"):
        replacement_pairs(rewriter, node, 3)
    with pytest.raises(RewriteError, match="not graph variables"):
        replacement_pairs(rewriter, node, [1.0])


# -- OpSub and OpRemove --------------------------------------------------------------------------------


def test_op_sub_replaces_only_its_op():
    x, y = float64("x"), float64("y")
    sub = OpSub(add, mul)
    assert sub.tracks() == [add]
    assert sub.transform(None, mul(x, y).owner) is False
    fgraph = rewrite_once(sub, sin(add(x, y)))
    assert repr(fgraph) == "FunctionGraph(sin(mul(x, y)))"


def test_op_remove_makes_output_i_input_i():
    x = float64("x")
    fgraph = rewrite_once(OpRemove(identity), exp(identity(identity(x))))
    assert repr(fgraph) == "FunctionGraph(exp(x))"


def test_op_remove_of_an_op_with_more_inputs_than_outputs_is_a_clear_error():
    x, y = float64("x"), float64("y")
    with pytest.raises(RewriteError, match=r"remove add: add has 2 inputs but 1 outputs"):
        OpRemove(add).transform(None, add(x, y).owner)


@pytest.mark.parametrize("make_rewriter", [in2out, out2in, lambda r: EquilibriumRewriter([r])])
def test_op_remove_error_is_reported_with_the_rewriter_name_and_the_graph_stays_valid(make_rewriter):
    x, y = float64("x"), float64("y")
    fgraph = FunctionGraph([x, y], [exp(add(x, y))])
    fingerprint = fgraph.fingerprint(by_identity=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_rewriter(OpRemove(add)).rewrite(fgraph)
    messages = [str(w.message) for w in caught if issubclass(w.category, RewriteWarning)]
    assert len(messages) == 1
    assert "rewriter remove add raised RewriteError" in messages[0] and "skipped" in messages[0]
    fgraph.check_integrity()
    assert fgraph.fingerprint(by_identity=True) == fingerprint


@pytest.mark.parametrize("make_rewriter", [in2out, lambda r: EquilibriumRewriter([r])])
def test_op_remove_error_is_raised_when_asked(make_rewriter):
    x, y = float64("x"), float64("y")
    fgraph = FunctionGraph([x, y], [exp(add(x, y))])
    fingerprint = fgraph.fingerprint(by_identity=True)
    rewriter = make_rewriter(OpRemove(add))
    rewriter.raise_errors = True
    with pytest.raises(RewriteError, match="remove add"):
        rewriter.rewrite(fgraph)
    fgraph.check_integrity()
    assert fgraph.fingerprint(by_identity=True) == fingerprint


# -- PatternSub --------------------------------------------------------------------------------------


def test_pattern_sub_name_and_tracks():
    rewriter = PatternSub((exp, (log, "a")), "a")
    assert rewriter.name == "exp(log(a)) -> a"
    assert rewriter.tracks() == [exp]
    assert PatternSub((exp, "a"), "a", name="drop_exp").name == "drop_exp"
    assert PatternSub((exp, "a"), "a", tracks=[ops.Exp]).tracks() == [ops.Exp]


def test_pattern_sub_input_pattern_must_be_an_application():
    with pytest.raises(TypeError, match="application of an op"):
        PatternSub("a", "a")
    with pytest.raises(TypeError, match="application of an op"):
        PatternSub(("exp", "a"), "a")  # "exp" names an op variable: the head is unknown
    with pytest.raises(ValueError, match="must start with an op"):
        PatternSub((1.5, "a"), "a")
    with pytest.raises(TypeError, match="unsupported pattern element"):
        PatternSub((exp, [1]), "a")
    with pytest.raises(ValueError, match="'pattern'"):
        PatternSub((exp, {"constraint": bool}), "a")
    with pytest.raises(ValueError, match="input patterns"):
        PatternSub((exp, "a"), {"pattern": "a", "constraint": bool})


def test_pattern_sub_repeated_names_must_match_the_same_graph():
    x, y = float64("x"), float64("y")
    rewriter = PatternSub((add, "a", "a"), (mul, "a", 2))
    assert repr(rewrite_once(rewriter, add(x, y))) == "FunctionGraph(add(x, y))"
    assert repr(rewrite_once(rewriter, add(x, x))) == "FunctionGraph(mul(x, 2.0))"
    # two distinct nodes computing the same expression count as the same
    assert repr(rewrite_once(rewriter, add(exp(x), exp(x)))) == "FunctionGraph(mul(exp(x), 2.0))"


@pytest.mark.parametrize(
    ("pattern", "build"),
    [
        ((exp, (neg, (neg, "a"))), lambda x, y: exp(neg(neg(x)))),
        ((exp, (mul, "a", (sin, "a"))), lambda x, y: exp(mul(x, sin(x)))),
        ((add, (exp, "a"), (log, (sin, "b"))), lambda x, y: add(exp(x), log(sin(y)))),
        ((add, (exp, (neg, "a")), (log, (sin, (neg, "a")))), lambda x, y: add(exp(neg(x)), log(sin(neg(x))))),
    ],
)
def test_pattern_sub_matches_patterns_several_levels_deep(pattern, build):
    x, y = float64("x"), float64("y")
    assert repr(rewrite_once(PatternSub(pattern, "a"), build(x, y), inputs=[x, y])) == "FunctionGraph(x)"


def test_pattern_sub_constraint_on_a_variable():
    x, y = float64("x"), float64("y")
    only_x = PatternSub((mul, {"pattern": "a", "constraint": lambda v: v.name == "x"}, "b"), "b")
    assert repr(rewrite_once(only_x, mul(x, y))) == "FunctionGraph(y)"
    assert repr(rewrite_once(only_x, mul(y, x))) == "FunctionGraph(mul(y, x))"


def test_pattern_sub_constraint_on_an_intermediate_application():
    x, y = float64("x"), float64("y")
    seen = []

    def log_of_x(v):
        seen.append(v)
        return v.owner.inputs[0].name == "x"

    rewriter = PatternSub((exp, {"pattern": (log, "a"), "constraint": log_of_x}), "a")
    fgraph = rewrite_once(rewriter, add(exp(log(x)), exp(log(y))), inputs=[x, y])
    assert repr(fgraph) == "FunctionGraph(add(x, exp(log(y))))"
    assert all(isinstance(v, Variable) and v.owner.op == log for v in seen)


def test_pattern_sub_constraint_on_the_whole_pattern():
    x, y = float64("x"), float64("y")
    rewriter = PatternSub(
        {"pattern": (exp, (log, "a")), "constraint": lambda v: v.owner.inputs[0].owner.inputs[0] is x},
        "a",
    )
    assert rewriter.tracks() == [exp]
    e = exp(log(x))
    # the root may have several clients: only intermediates are checked
    fgraph = FunctionGraph([x, y], [add(e, exp(log(y)), mul(e, 2.0))], clone=False)
    in2out(rewriter).rewrite(fgraph)
    assert repr(fgraph) == "FunctionGraph(add(x, exp(log(y)), mul(x, 2.0)))"


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "int8", "uint8"])
def test_pattern_sub_number_matches_a_constant_of_any_dtype_with_that_value(dtype):
    x = scalar("x", dtype=dtype)
    rewriter = PatternSub((mul, "a", 1), "a")
    assert repr(rewrite_once(rewriter, mul(x, constant(1, dtype=dtype)))) == "FunctionGraph(x)"
    unchanged = rewrite_once(rewriter, mul(x, constant(2, dtype=dtype)))
    assert output_node(unchanged).op == mul and output_node(unchanged).inputs[1].data == 2


def test_pattern_sub_number_matches_arrays_whose_every_element_has_that_value():
    x, y = vector("x"), vector("y")
    rewriter = PatternSub((mul, "a", 1), "a")
    ones = constant(np.ones(2))
    x2 = vector("x2", shape=(2,))
    assert repr(rewrite_once(rewriter, mul(x2, ones))) == "FunctionGraph(x2)"
    # x may have length 1 and broadcast against the ones: dropping them could change the shape
    with pytest.warns(RewriteWarning, match=r"static shape \(None,\) loses the length 2 on axis 0 of \(2,\)"):
        assert "mul" in repr(rewrite_once(rewriter, mul(x, ones)))
    assert "mul" in repr(rewrite_once(rewriter, mul(x, constant([1.0, 2.0]))))
    assert "mul" in repr(rewrite_once(rewriter, mul(x, constant(1.5))))
    # a number never matches a non-constant
    assert repr(rewrite_once(rewriter, mul(x, y))) == "FunctionGraph(mul(x, y))"


def test_pattern_sub_output_numbers_take_the_dtype_of_the_replaced_output():
    i, x = scalar("i", dtype="int32"), float64("x")
    rewriter = PatternSub((mul, "a", 0), 0)
    fgraph = rewrite_once(rewriter, add(mul(i, constant(0, dtype="int32")), mul(x, 0.0)), inputs=[i, x])
    assert repr(fgraph) == "FunctionGraph(add(0, 0.0))"
    assert [v.dtype for v in output_node(fgraph).inputs] == ["int32", "float64"]


def test_pattern_sub_refuses_an_intermediate_with_two_clients():
    x = float64("x")
    shared = log(x)
    graph = add(exp(shared), shared)
    refusing = PatternSub((exp, (log, "a")), "a")
    assert repr(rewrite_once(refusing, graph)) == "FunctionGraph(add(exp(*1 -> log(x)), *1))"
    allowing = PatternSub((exp, (log, "a")), "a", allow_multiple_clients=True)
    assert repr(rewrite_once(allowing, graph)) == "FunctionGraph(add(x, log(x)))"


def test_pattern_sub_type_mismatch_means_no_rewrite():
    x, v = float64("x"), vector("v")
    keep_first = PatternSub((add, "a", "b"), "a")
    node = FunctionGraph([x, v], [add(x, v)]).outputs[0].owner
    with pytest.warns(RewriteWarning, match=r"rule add\(a, b\) -> a at add\(x, v\): .*rank 0 instead of 1"):
        assert keep_first.transform(None, node) is False  # a scalar cannot replace a vector
    f32 = scalar("f", dtype="float32")
    node = FunctionGraph([f32, x], [add(x, f32)]).outputs[0].owner
    assert keep_first.transform(None, node) == [node.inputs[0]]  # both float64 scalars
    node = FunctionGraph([f32, x], [add(f32, x)]).outputs[0].owner
    with pytest.warns(RewriteWarning, match="dtype float32 instead of float64"):
        assert keep_first.transform(None, node) is False  # float32 cannot replace float64


def test_pattern_sub_that_rebuilds_the_node_changes_nothing():
    x = float64("x")
    rebuild = PatternSub((exp, (log, "a")), (exp, (log, "a")))
    node = exp(log(x)).owner
    assert rebuild.transform(None, node) is False
    profile = EquilibriumRewriter([rebuild]).rewrite(FunctionGraph([x], [exp(log(x))]))
    assert profile.applied == 0 and profile.stopped_early is None


# -- KanrenRelationSub -----------------------------------------------------------------------------------


def exp_choices(lhs, rhs):
    """exp(x) is related to three other graphs (not all equal to it: only the order matters here)."""
    x = var()
    return lall(
        eq(lhs, etuple(exp, x)),
        conde([eq(rhs, etuple(mul, x, 2.0))], [eq(rhs, etuple(add, x, x))], [eq(rhs, etuple(neg, x))]),
    )


def test_kanren_relation_sub_takes_the_first_answer_by_default():
    x = float64("x")
    node = exp(x).owner
    rewriter = KanrenRelationSub(exp_choices)
    assert rewriter.name == "exp_choices"
    assert [str(a) for a in rewriter.answers(node.outputs[0])] == [
        "e(mul, x, 2.0)",
        "e(add, x, x)",
        "e(neg, x)",
    ]
    (new,) = rewriter.transform(None, node)
    assert new.owner.op == mul and new.owner.inputs[0] is x


def test_kanren_relation_sub_runs_the_relation_it_holds_now():
    """The plan of a relation's direct forward run is kept between nodes, and remade when `relation`
    is replaced: a pattern's matcher first, then a plain goal."""
    from relwrite.relations import get_rule

    x = float64("x")
    rewriter = KanrenRelationSub(get_rule("mul_one").relation)
    assert rewriter.transform(None, exp(x).owner) is False
    assert rewriter.transform(None, mul(x, 1.0).owner) == [x]
    rewriter.relation = exp_choices
    (new,) = rewriter.transform(None, exp(x).owner)
    assert new.owner.op == mul and new.owner.inputs[0] is x


def test_kanren_relation_sub_results_filter_picks_among_the_answers():
    x = float64("x")
    node = exp(x).owner
    third = KanrenRelationSub(exp_choices, results_filter=lambda answers: list(answers)[2])
    (new,) = third.transform(None, node)
    assert new.owner.op == neg and new.owner.inputs == [x]
    none = KanrenRelationSub(exp_choices, results_filter=lambda answers: None)
    assert none.transform(None, node) is False


def test_kanren_relation_sub_node_filter_vetoes_nodes():
    x, y = float64("x"), float64("y")
    only_x = KanrenRelationSub(exp_log, node_filter=lambda node: node.inputs[0].owner.inputs[0].name == "x")
    fgraph = FunctionGraph([x, y], [add(exp(log(x)), exp(log(y)))])
    EquilibriumRewriter([only_x]).rewrite(fgraph)
    assert repr(fgraph) == "FunctionGraph(add(x, exp(log(y))))"


def test_kanren_relation_sub_skips_answers_that_do_not_type_check():
    x, v = float64("x"), vector("v")

    def first_operand_or_second(lhs, rhs):
        a, b = var(), var()
        return lall(eq(lhs, etuple(add, a, b)), conde([eq(rhs, a)], [eq(rhs, b)]))

    fgraph = FunctionGraph([x, v], [exp(add(x, v))])
    with pytest.warns(RewriteWarning, match=r"rule first_operand_or_second at add\(x, v\): .*rank 0"):
        profile = EquilibriumRewriter([KanrenRelationSub(first_operand_or_second)]).rewrite(fgraph)
    assert profile.rules["first_operand_or_second"].rejected_answers == 1
    assert repr(fgraph) == "FunctionGraph(exp(v))"  # x (a scalar) cannot replace a vector


def test_kanren_relation_sub_ignores_answers_equal_to_the_input():
    x = float64("x")

    def same(lhs, rhs):
        a = var()
        return lall(eq(lhs, etuple(exp, etuple(log, a))), eq(rhs, etuple(exp, etuple(log, a))))

    fgraph = FunctionGraph([x], [sin(exp(log(x)))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile = EquilibriumRewriter([KanrenRelationSub(same)]).rewrite(fgraph)
    assert profile.applied == 0
    assert repr(fgraph) == "FunctionGraph(sin(exp(log(x))))"


class SinCos(Op):
    """A two-output op (sin(x), cos(x)) for the multi-output tests."""

    def make_node(self, x):
        x = as_variable(x)
        return Apply(self, [x], [x.type(), x.type()])


sincos = SinCos()


def sincos_of(outputs, x):
    """Goal: `outputs` are the outputs of a sincos node applied to `x`."""

    def goal(state):
        outs = reify(outputs, state)
        if isinstance(outs, list) and len(outs) == 2 and isinstance(outs[0], Variable):
            node = outs[0].owner
            if node is not None and node.op == sincos:
                bound = unify(x, node.inputs[0], state)
                if bound is not False:
                    yield bound

    return goal


def split_sincos(lhs, rhs):
    x = var()
    return lall(sincos_of(lhs, x), eq(rhs, [etuple(sin, x), etuple(cos, x)]))


def test_kanren_relation_sub_rewrites_multi_output_nodes():
    x = float64("x")
    s, c = sincos(x)
    fgraph = FunctionGraph([x], [add(s, mul(c, 2.0))])
    rewriter = KanrenRelationSub(split_sincos, tracks=[SinCos])
    profile = EquilibriumRewriter([rewriter]).rewrite(fgraph)
    assert profile.applied == 1
    assert repr(fgraph) == "FunctionGraph(add(sin(x), mul(cos(x), 2.0)))"
    fgraph.check_integrity()
    assert relwrite.backends.numpy.numpy_function(fgraph.inputs, fgraph.outputs[0])(0.5) == pytest.approx(
        np.sin(0.5) + 2 * np.cos(0.5)
    )


def test_kanren_relation_sub_multi_output_answer_of_the_wrong_length_is_skipped():
    x = float64("x")

    def one_for_two(lhs, rhs):
        a = var()
        return lall(sincos_of(lhs, a), eq(rhs, [etuple(sin, a)]))

    node = sincos(x)[0].owner
    with pytest.warns(RewriteWarning, match="rule one_for_two at .*: 1 replacements for the 2 outputs"):
        assert KanrenRelationSub(one_for_two, tracks=[sincos]).transform(None, node) is False


# -- derive_tracks ---------------------------------------------------------------------------------------


def test_derive_tracks_of_a_simple_relation():
    assert derive_tracks(exp_log) == [exp]
    assert KanrenRelationSub(exp_log).tracks() == [exp]


def test_derive_tracks_collects_every_head_of_a_disjunction():
    def two_heads(lhs, rhs):
        x = var()
        return conde(
            [eq(lhs, etuple(exp, etuple(log, x))), eq(rhs, x)],
            [eq(lhs, etuple(neg, etuple(neg, x))), eq(rhs, x)],
            [eq(lhs, etuple(exp, etuple(neg, x))), eq(rhs, x)],
        )

    assert derive_tracks(two_heads) == [exp, neg]


def test_derive_tracks_gives_none_when_the_head_is_open_or_unknown():
    def any_term(lhs, rhs):
        return eq(lhs, rhs)

    def raising(lhs, rhs):
        raise RuntimeError("needs a ground input")

    assert derive_tracks(any_term) is None
    assert derive_tracks(raising) is None
    # a goal that only answers for ground terms has no answer here: the head is unknown, not "none"
    assert derive_tracks(split_sincos) is None
    assert KanrenRelationSub(split_sincos).tracks() is None


def test_derive_tracks_gives_none_for_an_endless_stream():
    from kanren.goals import membero

    def endless(lhs, rhs):
        return lall(membero(lhs, rhs))

    assert derive_tracks(endless, limit=5) is None


def test_relation_tracks_attribute_and_explicit_tracks_win():
    def relation(lhs, rhs):
        return exp_log(lhs, rhs)

    relation.tracks = (ops.Exp,)
    assert KanrenRelationSub(relation).tracks() == [ops.Exp]
    assert KanrenRelationSub(exp_log, tracks=[true_div]).tracks() == [true_div]


# -- budgets on kanren runs ------------------------------------------------------------------------------


def test_kanren_is_left_as_it_is():
    """The budget counts what relwrite pulls from a run; kanren's stream merger stays toolz's own."""
    assert kanren.core.interleave is toolz.interleave


def naturalso(n):
    """Goal: n is a natural number, produced in an endless flat loop."""

    def goal(s):
        k = 0
        while True:
            yield unify(n, k, s)
            k += 1

    return goal


def test_a_kanren_budget_stops_a_run_at_its_steps_and_every_later_step():
    q = var()
    with kanren_budget("probe", max_steps=20) as meter:
        stream = run_relation(lambda a, b: naturalso(b), "anything")
        assert len([next(stream) for _ in range(20)]) == 20
        with pytest.raises(BudgetExceeded, match="probe: no answer within max_steps=20 steps"):
            next(stream)
        with pytest.raises(BudgetExceeded):
            next(run_relation(lambda a, b: eq(a, b), 1))  # the budget stays spent
    assert meter.error is not None and meter.error.budget == "max_steps" and meter.steps > 20
    assert run(1, q, eq(q, 1)) == (1,)  # outside the block runs are not bounded


def test_a_kanren_budget_interrupts_a_goal_spinning_inside_kanren():
    """A conjunction failing on every state of an endless stream passes nothing to relwrite: the clock
    stops it."""

    def never(a, b):
        n = var()
        return lall(naturalso(n), eq(n, -1))

    with (
        kanren_budget("probe", max_seconds=0.05) as meter,
        pytest.raises(BudgetExceeded, match=r"probe: no answer within max_seconds=0.05 \("),
    ):
        next(run_relation(never, 1))
    assert meter.error.budget == "max_seconds"


def test_kanren_budget_limits_must_be_positive():
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        kanren_budget("x", max_steps=0)
    with pytest.raises(ValueError, match="max_seconds must be positive"):
        kanren_budget("x", max_seconds=0)
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        KanrenRelationSub(exp_log, max_steps=0)


def test_nested_rejection_collectors_each_keep_their_own():
    """An inner block leaving while both lists are empty (equal) must not take the outer block's list
    off the stack: the outer one would then collect nothing and later warnings would vanish."""
    node = exp(float64("x")).owner
    with collect_rejections() as outer:
        with collect_rejections():
            pass
        reject_answer("r", node, "why")
    assert outer == [("r", node, "why")]
    with pytest.warns(RewriteWarning, match="why not"):
        reject_answer("r", node, "why not")  # no block open: a warning


def test_a_budget_left_on_the_stack_by_an_interrupted_exit_fails_no_later_run():
    """An interrupt landing in a budget block's exit leaves its meter on the thread's stack; once spent,
    it must not fail the kanren runs that come after its block."""
    from relwrite.relations.budget import _meters

    def interrupted_block():
        meter = kanren_budget("left behind", max_steps=1)
        meter.__enter__()  # the exit never runs, as when an interrupt lands on its first line
        return meter

    meter = interrupted_block()
    assert meter in _meters()
    one_two_three = run_relation(lambda a, b: conde([eq(b, 1)], [eq(b, 2)], [eq(b, 3)]), 0)
    assert [reify(q, s) for q, s in one_two_three] == [1, 2, 3]
    assert meter not in _meters()  # dropped once it found its block gone

"""Graph rewriters: the base class, SequentialRewriter, walks (in2out/out2in), MergeRewriter and commit."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import relwrite
from relwrite import (
    FunctionGraph,
    abs,
    add,
    constant,
    exp,
    float64,
    log,
    maximum,
    mul,
    neg,
    sin,
    sqr,
    true_div,
)
from relwrite.engine import (
    GraphRewriter,
    MergeRewriter,
    PatternSub,
    RewriteError,
    RewriteWarning,
    SequentialRewriter,
    WalkingGraphRewriter,
    in2out,
    node_rewriter,
    out2in,
)
from relwrite.engine.db import rewrite_graph
from relwrite.engine.graph_rewriters import commit
from relwrite.graph import ops
from relwrite.graph.destroy import DestroyHandler, destroy_handler
from relwrite.graph.features import Feature, ReplaceValidate
from relwrite.graph.fg import InconsistencyError
from relwrite.testing import expression_graphs, input_values

# Rules that hold exactly in floating point (NaN and infinities included), so values must not change at all.
EXACT_RULES = [
    PatternSub((neg, (neg, "a")), "a"),
    PatternSub((mul, "a", 1), "a"),
    PatternSub((true_div, "a", 1), "a"),
    PatternSub((maximum, "a", "a"), "a"),
    PatternSub((abs, (neg, "a")), (abs, "a")),
    PatternSub((abs, (abs, "a")), (abs, "a")),
    PatternSub((sqr, (neg, "a")), (sqr, "a")),
]
RULE_OPS = (neg, mul, true_div, maximum, abs, sqr, add, exp, log, sin)


def evaluate(fgraph, values):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return relwrite.backends.numpy.numpy_function(fgraph.inputs, fgraph.outputs)(*values)


def recording(order_log, tracks=None):
    @node_rewriter(tracks, name="recorder")
    def recorder(fgraph, node):
        order_log.append(node.op)
        return False

    return recorder


# -- GraphRewriter and SequentialRewriter -----------------------------------------------------------


def test_rewrite_needs_a_function_graph():
    x = float64("x")
    with pytest.raises(TypeError, match="expected a FunctionGraph, got Variable"):
        MergeRewriter().rewrite(exp(x))


def test_graph_rewriter_base_class_needs_apply_and_attaches_replace_validate():
    class Incomplete(GraphRewriter):
        pass

    x = float64("x")
    fgraph = FunctionGraph([x], [exp(x)])
    with pytest.raises(NotImplementedError, match="Incomplete"):
        Incomplete().rewrite(fgraph)
    assert hasattr(fgraph, "replace_validate")


class Record(GraphRewriter):
    def __init__(self, log, label):
        self.log, self.label = log, label

    def apply(self, fgraph):
        self.log.append(self.label)
        return self.label


def test_sequential_rewriter_applies_in_order_and_nests_profiles():
    log = []
    x = float64("x")
    inner = SequentialRewriter(Record(log, "b"), Record(log, "c"), name="inner")
    seq = SequentialRewriter([Record(log, "a"), inner, Record(log, "d")], name="outer")
    profile = seq.rewrite(FunctionGraph([x], [exp(x)]))
    assert log == ["a", "b", "c", "d"]
    assert [step[2] for step in profile.steps] == [0, 1, 2]
    assert [step[1] for step in profile.steps] == ["Record", "SequentialRewriter", "Record"]
    nested = profile.steps[1][4]
    assert nested.name == "inner" and [step[4] for step in nested.steps] == ["b", "c"]
    assert profile.nodes_before == profile.nodes_after == 1


def test_sequential_rewriter_rejects_node_rewriters():
    with pytest.raises(TypeError, match="is not a graph rewriter"):
        SequentialRewriter(PatternSub((exp, "a"), "a"))


# -- walks -----------------------------------------------------------------------------------------


def test_walk_orders():
    x = float64("x")
    graph = sin(exp(neg(x)))
    for make, expected in [(in2out, [neg, exp, sin]), (out2in, [sin, exp, neg])]:
        log = []
        make(recording(log)).rewrite(FunctionGraph([x], [graph]))
        assert log == expected


def test_walk_rejects_an_unknown_order():
    with pytest.raises(ValueError, match="'sideways'"):
        WalkingGraphRewriter(recording([]), order="sideways")


def test_walk_dispatches_by_tracks_including_op_classes():
    x, y = float64("x"), float64("y")
    by_instance, by_class, by_base_class, everywhere = [], [], [], []
    walk = in2out(
        recording(by_instance, tracks=[sin]),
        recording(by_class, tracks=[ops.Exp]),
        recording(by_base_class, tracks=[ops.Elemwise]),
        recording(everywhere),
    )
    v = relwrite.vector("v")
    walk.rewrite(FunctionGraph([x, y, v], [add(exp(x), sin(y), relwrite.dot(v, v))]))
    assert by_instance == [sin]
    assert by_class == [exp]
    assert by_base_class == [exp, sin, add]
    assert everywhere == [exp, sin, relwrite.dot, add]


def test_walk_profile_counts_changes_and_nodes():
    x, y, z = float64("x"), float64("y"), float64("z")
    fgraph = FunctionGraph([x, y, z], [add(z, mul(true_div(mul(y, x), y), true_div(z, x)))])
    walk = in2out(PatternSub((true_div, (mul, "a", "b"), "a"), "b"))
    profile = walk.rewrite(fgraph)
    assert profile.rewriter is walk
    assert (profile.nb_changed, profile.nodes_start, profile.nodes_end) == (1, 5, 3)


@pytest.mark.parametrize(
    ("ignore_newtrees", "expected"),
    [(True, "FunctionGraph(sin(neg(neg(x))))"), (False, "FunctionGraph(sin(x))")],
)
def test_walk_visits_new_nodes_unless_told_not_to(ignore_newtrees, expected):
    x = float64("x")
    exp_to_neg_neg = PatternSub((exp, "a"), (neg, (neg, "a")))
    neg_neg = PatternSub((neg, (neg, "a")), "a")
    fgraph = FunctionGraph([x], [sin(exp(x))])
    out2in(exp_to_neg_neg, neg_neg, ignore_newtrees=ignore_newtrees).rewrite(fgraph)
    assert repr(fgraph) == expected
    fgraph.check_integrity()


@given(expression_graphs(ops=RULE_OPS, max_nodes=15), st.data(), st.sampled_from([in2out, out2in]))
def test_walks_keep_graphs_valid_and_values_unchanged(graph, data, make_walk):
    inputs, output = graph
    fgraph = FunctionGraph(inputs, [output])
    values = data.draw(input_values(fgraph.inputs))
    before = evaluate(fgraph, values)
    make_walk(*EXACT_RULES, ignore_newtrees=False).rewrite(fgraph)
    fgraph.check_integrity()
    np.testing.assert_array_equal(evaluate(fgraph, values), before)


# -- commit -----------------------------------------------------------------------------------------


def test_commit_rejects_a_cycle_and_leaves_the_graph_unchanged():
    x = float64("x")
    fgraph = FunctionGraph([x], [exp(log(x))])
    fgraph.attach_feature(ReplaceValidate())
    log_out = fgraph.outputs[0].owner.inputs[0]
    fingerprint = fgraph.fingerprint(by_identity=True)
    with pytest.warns(RewriteWarning, match="rewriter cyclic proposed .* that would close a cycle"):
        assert commit(fgraph, [(log_out, fgraph.outputs[0])], "cyclic") is False
    fgraph.check_integrity()
    assert fgraph.fingerprint(by_identity=True) == fingerprint


def test_commit_rolls_back_every_pair_when_a_later_one_is_rejected():
    x, y = float64("x"), float64("y")
    fgraph = FunctionGraph([x, y], [add(exp(x), log(y))])
    fgraph.attach_feature(ReplaceValidate())
    exp_out, log_out = fgraph.outputs[0].owner.inputs
    fingerprint = fgraph.fingerprint(by_identity=True)
    with pytest.warns(RewriteWarning, match="cycle"):
        assert commit(fgraph, [(exp_out, sin(fgraph.inputs[0])), (log_out, fgraph.outputs[0])], "r") is False
    fgraph.check_integrity()
    assert fgraph.fingerprint(by_identity=True) == fingerprint


def test_commit_reports_a_type_error_as_the_rewriters_bug():
    x = float64("x")
    fgraph = FunctionGraph([x], [exp(x)])
    fgraph.attach_feature(ReplaceValidate())
    fingerprint = fgraph.fingerprint(by_identity=True)
    bad = relwrite.vector("v")
    with pytest.raises(RewriteError, match="rewriter my_rule proposed an invalid replacement"):
        commit(fgraph, [(fgraph.outputs[0], bad)], "my_rule")
    assert fgraph.fingerprint(by_identity=True) == fingerprint


def test_commit_validation_failure_is_a_rejection():
    class Veto(ReplaceValidate):
        def on_attach(self, fgraph):
            pass

        def on_detach(self, fgraph):
            pass

        def on_validate(self, fgraph):
            raise InconsistencyError("vetoed")

    x = float64("x")
    fgraph = FunctionGraph([x], [exp(log(x))])
    fgraph.attach_feature(ReplaceValidate())
    fgraph.attach_feature(Veto())
    fingerprint = fgraph.fingerprint(by_identity=True)
    assert commit(fgraph, [(fgraph.outputs[0], fgraph.inputs[0])], "vetoed_rule") is False
    fgraph.check_integrity()
    assert fgraph.fingerprint(by_identity=True) == fingerprint


# -- MergeRewriter ----------------------------------------------------------------------------------------


def test_merge_merges_duplicates_level_by_level():
    x, y = float64("x"), float64("y")
    fgraph = FunctionGraph([x, y], [add(exp(sin(x)), exp(sin(x)), exp(sin(y)))])
    profile = MergeRewriter().rewrite(fgraph)
    assert repr(fgraph) == "FunctionGraph(add(*1 -> exp(sin(x)), *1, exp(sin(y))))"
    assert profile.nb_merged == 2 and profile.nb_fail == 0 and profile.nb_constant == 0
    assert len(fgraph.apply_nodes) == 5
    fgraph.check_integrity()


def test_merge_treats_equal_constants_as_one():
    x, y = float64("x"), float64("y")
    two_a, two_b = constant(2.0), constant(2.0)
    fgraph = FunctionGraph([x, y], [add(mul(x, two_a), mul(x, two_b), mul(y, two_b))], clone=False)
    profile = MergeRewriter().rewrite(fgraph)
    assert profile.nb_merged == 1
    assert profile.nb_constant == 2  # both reads of two_b now read two_a
    mul_nodes = [n for n in fgraph.apply_nodes if n.op == mul]
    assert len(mul_nodes) == 2
    assert mul_nodes[0].inputs[1] is mul_nodes[1].inputs[1]


def test_merge_does_not_merge_different_constants_or_ops():
    x = float64("x")
    fgraph = FunctionGraph([x], [add(mul(x, 2.0), mul(x, 3.0), exp(x), sin(x))])
    profile = MergeRewriter().rewrite(fgraph)
    assert profile.nb_merged == 0 and len(fgraph.apply_nodes) == 5


class VetoEveryChange(Feature):
    """A feature whose validation rejects every change; counts how often it was asked."""

    def __init__(self):
        self.asked = 0

    def on_validate(self, fgraph):
        self.asked += 1
        raise InconsistencyError("vetoed")


def vetoed_duplicates():
    x = float64("x")
    fgraph = FunctionGraph([x], [add(exp(x), exp(x))])
    fgraph.attach_feature(ReplaceValidate())
    veto = VetoEveryChange()
    fgraph.attach_feature(veto)
    return fgraph, veto


def test_a_merge_validation_rejects_is_counted_once_and_not_retried(no_hang):
    """The rejected merge's undo touched the duplicates again, which queued them for another try: forever."""
    fgraph, veto = vetoed_duplicates()
    fingerprint = fgraph.fingerprint(by_identity=True)
    profile = MergeRewriter().rewrite(fgraph)
    assert profile.nb_fail == 1 and profile.nb_merged == 0
    assert veto.asked == 1
    assert fgraph.fingerprint(by_identity=True) == fingerprint
    fgraph.check_integrity()


@pytest.mark.parametrize("include", [["merge"], ["canonicalize"], ["fast_run"]])
def test_rewrite_graph_returns_when_validation_rejects_every_merge(no_hang, include):
    fgraph, veto = vetoed_duplicates()
    rewrite_graph(fgraph, include=include)
    assert repr(fgraph) == "FunctionGraph(add(exp(x), exp(x)))"
    fgraph.check_integrity()


def test_duplicates_each_overwritten_in_place_are_left_apart(no_hang):
    """Merging the two sin(x) would let both in-place exps overwrite one buffer: the DestroyHandler
    rejects it, and the merge is not tried again."""
    x = float64("x")
    first, second = exp(sin(x)), exp(sin(x))
    features = [ReplaceValidate(), DestroyHandler()]
    fgraph = FunctionGraph([x], [add(first, second)], clone=False, features=features)
    handler = destroy_handler(fgraph)
    handler.destroy(fgraph, first.owner, 0)
    handler.destroy(fgraph, second.owner, 0)
    fingerprint = fgraph.fingerprint(by_identity=True)
    profile = MergeRewriter().rewrite(fgraph)
    assert profile.nb_fail == 1 and profile.nb_merged == 0
    assert fgraph.fingerprint(by_identity=True) == fingerprint
    assert handler.destroyed == {first.owner: 0, second.owner: 0}
    fgraph.check_integrity()
    handler.on_validate(fgraph)  # the marks are still legal


def test_merge_of_two_long_identical_chains():
    x = float64("x")
    chains = []
    for _ in range(2):
        v = x
        for k in range(20_000):
            v = sin(v) if k % 2 else exp(v)
        chains.append(v)
    fgraph = FunctionGraph([x], chains, clone=False)
    profile = MergeRewriter().rewrite(fgraph)
    assert profile.nb_merged == 20_000
    assert fgraph.outputs[0] is fgraph.outputs[1]
    assert len(fgraph.apply_nodes) == 20_000


@given(expression_graphs(max_nodes=15), st.data())
def test_merge_keeps_values_collapses_a_copy_and_is_idempotent(graph, data):
    inputs, output = graph
    copy = relwrite.graph.basic.clone(inputs, [output], copy_inputs=False)[1][0]
    fgraph = FunctionGraph(inputs, [output, copy])
    alone = FunctionGraph(inputs, [output])
    MergeRewriter().rewrite(alone)
    values = data.draw(input_values(fgraph.inputs))
    before = evaluate(fgraph, values)

    MergeRewriter().rewrite(fgraph)
    fgraph.check_integrity()
    assert fgraph.outputs[0] is fgraph.outputs[1]
    assert len(fgraph.apply_nodes) == len(alone.apply_nodes)
    np.testing.assert_array_equal(evaluate(fgraph, values)[0], before[0])
    np.testing.assert_array_equal(evaluate(fgraph, values)[1], before[1])

    fingerprint = fgraph.fingerprint(by_identity=True)
    again = MergeRewriter().rewrite(fgraph)
    assert (again.nb_merged, again.nb_constant, again.nb_fail) == (0, 0, 0)
    assert fgraph.fingerprint(by_identity=True) == fingerprint


@given(expression_graphs(max_nodes=10))
def test_dispatch_by_signature_refuses_exactly_what_the_screens_refuse(graph):
    """`TracksIndex.for_node` decides head-reading screens once per node signature: on every node
    (the cache warm or cold) it refuses exactly the rewriters whose screen refuses the node."""
    from relwrite.engine.db import optdb
    from relwrite.engine.graph_rewriters import TracksIndex
    from relwrite.engine.node_rewriters import NodeRewriter
    from relwrite.graph.basic import io_toposort

    inputs, output = graph
    rewriters = optdb.query(include=["canonicalize"]).rewriters[0].node_rewriters
    assert any(r.screen_reads_heads for r in rewriters)
    index = TracksIndex(rewriters)
    for _ in range(2):
        for node in io_toposort(inputs, [output]):
            candidates, refused = index.for_node(node)
            assert sorted((*candidates, *refused)) == list(index.for_op(node.op))
            for k in refused:
                assert rewriters[k].screen_reads_heads and not rewriters[k].screen(node)
            for k in candidates:
                r: NodeRewriter = rewriters[k]
                assert not r.screen_reads_heads or r.screen is None or r.screen(node)

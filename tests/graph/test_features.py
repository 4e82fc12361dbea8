"""History, ReplaceValidate, NodeFinder and ChangeTracker."""

import pytest

from relwrite.graph.basic import float64, vector
from relwrite.graph.features import AlreadyThere, ChangeTracker, Feature, History, NodeFinder, ReplaceValidate
from relwrite.graph.fg import FunctionGraph, InconsistencyError
from relwrite.graph.ops import Elemwise, Exp, add, exp, log, mul, neg, sqrt, true_div


def seed_graph():
    x, y, z = float64("x"), float64("y"), float64("z")
    out = add(z, mul(true_div(mul(y, x), y), true_div(z, x)))
    return FunctionGraph([x, y, z], [out], clone=False), (x, y, z)


def test_history_nested_checkpoints():
    fg, (x, y, z) = seed_graph()
    fg.attach_feature(History())
    start = fg.fingerprint(by_identity=True)
    outer = fg.checkpoint()
    fg.replace(fg.outputs[0], exp(x))
    middle_print = fg.fingerprint(by_identity=True)
    inner = fg.checkpoint()
    fg.replace(fg.outputs[0], log(y))
    fg.revert(inner)
    assert fg.fingerprint(by_identity=True) == middle_print
    fg.revert(outer)
    assert fg.fingerprint(by_identity=True) == start
    fg.check_integrity()
    with pytest.raises(ValueError, match="no checkpoint 5"):
        fg.revert(5)


def test_history_restores_pruned_nodes():
    fg, (x, y, z) = seed_graph()
    fg.attach_feature(History())
    nodes = set(fg.apply_nodes)
    mark = fg.checkpoint()
    for node in fg.toposort():
        if node in fg.apply_nodes and node.op == true_div:
            fg.replace(node.outputs[0], x)
    assert set(fg.apply_nodes) != nodes
    fg.revert(mark)
    assert set(fg.apply_nodes) == nodes
    fg.check_integrity()


def test_second_history_is_refused():
    fg, _ = seed_graph()
    first = History()
    fg.attach_feature(first)
    fg.attach_feature(History())
    assert [f for f in fg.features if isinstance(f, History)] == [first]
    with pytest.raises(AlreadyThere):
        History().on_attach(fg)


class RejectSqrt(Feature):
    def on_validate(self, fgraph):
        if any(n.op == sqrt for n in fgraph.apply_nodes):
            raise InconsistencyError("no sqrt allowed")


def test_replace_validate_applies_valid_replacements():
    fg, (x, y, z) = seed_graph()
    fg.attach_feature(ReplaceValidate())
    div = next(n for n in fg.toposort() if n.op == true_div and n.inputs[1] is y)
    fg.replace_validate(div.outputs[0], x, reason="simplify")
    assert repr(fg) == "FunctionGraph(add(z, mul(x, true_div(z, x))))"


@pytest.mark.parametrize(
    "make_pairs",
    [
        lambda fg, x, y, z: [(fg.outputs[0], exp(x)), (fg.inputs[0], sqrt(y))],
        lambda fg, x, y, z: [(fg.outputs[0], neg(y)), (x, vector("v"))],
        lambda fg, x, y, z: [(fg.outputs[0], neg(y)), (float64("stranger"), x)],
    ],
    ids=["validation-fails", "type-error-midway", "foreign-variable"],
)
def test_rejected_replacement_leaves_graph_exactly_as_it_was(make_pairs):
    fg, (x, y, z) = seed_graph()
    fg.attach_feature(ReplaceValidate())
    fg.attach_feature(RejectSqrt())
    before = fg.fingerprint(by_identity=True)
    nodes = set(fg.apply_nodes)
    with pytest.raises((InconsistencyError, TypeError, ValueError)):
        fg.replace_all_validate(make_pairs(fg, x, y, z))
    assert fg.fingerprint(by_identity=True) == before
    assert set(fg.apply_nodes) == nodes
    fg.check_integrity()


def test_replace_validate_rejects_cycle_unchanged():
    x = float64("x")
    e = exp(x)
    fg = FunctionGraph([x], [log(e)], clone=False, features=[ReplaceValidate()])
    before = fg.fingerprint(by_identity=True)
    with pytest.raises(InconsistencyError):
        fg.replace_validate(x, mul(e, 2.0))
    assert fg.fingerprint(by_identity=True) == before


def test_node_finder_tracks_imports_and_prunes():
    fg, (x, y, z) = seed_graph()
    finder = NodeFinder()
    fg.attach_feature(finder)
    assert len(fg.get_nodes(true_div)) == 2
    assert len(fg.get_nodes(Elemwise)) == 5
    fg.replace(fg.outputs[0], exp(x))
    assert fg.get_nodes(true_div) == []
    assert [n.op for n in fg.get_nodes(Exp)] == [exp]
    assert len(fg.get_nodes(Elemwise)) == 1
    fg.remove_feature(finder)
    assert not hasattr(fg, "get_nodes")


def test_change_tracker_records_changed_nodes():
    fg, (x, y, z) = seed_graph()
    tracker = ChangeTracker()
    fg.attach_feature(tracker)
    assert not tracker.changed
    div = next(n for n in fg.toposort() if n.op == true_div and n.inputs[1] is y)
    fg.replace(div.outputs[0], exp(x))
    assert tracker.changed and tracker.nb_imported == 1
    changed_ops = [n.op for n in tracker.changed_nodes]
    assert changed_ops == [exp, mul]
    tracker.reset()
    assert not tracker.changed and not tracker.changed_nodes


def test_cloned_graph_gets_fresh_stateful_features():
    fg, _ = seed_graph()
    fg.attach_feature(ReplaceValidate())
    fg.attach_feature(NodeFinder())
    new = fg.clone()
    assert len(new.get_nodes(true_div)) == 2
    mark = new.checkpoint()
    new.replace(new.outputs[0], new.inputs[0])
    new.revert(mark)
    new.check_integrity()
    assert fg.checkpoint() == 0


def test_history_is_forgotten_after_transactions_when_no_checkpoint_was_taken():
    x = float64("x")
    out = x
    for _ in range(50):
        out = neg(neg(out))
    fg = FunctionGraph([x], [out], clone=False, features=[ReplaceValidate()])
    history = next(f for f in fg.features if isinstance(f, History))
    for node in fg.toposort()[::2]:
        if node in fg.apply_nodes:
            fg.replace_validate(node.outputs[0], exp(node.inputs[0]))
    assert history.changes == []
    mark = fg.checkpoint()
    fg.replace_validate(fg.outputs[0], x)
    assert len(history.changes) == 1
    fg.revert(mark)
    fg.check_integrity()

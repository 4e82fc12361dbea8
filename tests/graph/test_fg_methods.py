"""FunctionGraph methods, one behaviour at a time (seed 002's reference)."""

import pytest

from relwrite.graph.basic import constant, float64, vector
from relwrite.graph.features import Feature
from relwrite.graph.fg import FunctionGraph, GraphIntegrityError, InconsistencyError, MissingInputError
from relwrite.graph.ops import add, exp, log, mul, neg, true_div


class Recorder(Feature):
    def __init__(self):
        self.events = []

    def on_attach(self, fgraph):
        self.events.append(("attach",))

    def on_detach(self, fgraph):
        self.events.append(("detach",))

    def on_import(self, fgraph, node, reason):
        self.events.append(("import", node.op, reason))

    def on_prune(self, fgraph, node, reason):
        self.events.append(("prune", node.op, reason))

    def on_change_input(self, fgraph, node, i, var, new_var, reason):
        self.events.append(("change", node if node == "output" else node.op, i, reason))


@pytest.fixture
def seed_graph():
    x, y, z = float64("x"), float64("y"), float64("z")
    out = add(z, mul(true_div(mul(y, x), y), true_div(z, x)))
    return FunctionGraph([x, y, z], [out], clone=False), (x, y, z)


def test_construction_registers_nodes_variables_and_clients(seed_graph):
    fg, (x, y, z) = seed_graph
    assert len(fg.apply_nodes) == 5
    assert {v for v in (x, y, z)} <= set(fg.variables)
    assert fg.clients[fg.outputs[0]] == [("output", 0)]
    assert len(fg.clients[x]) == 2 and len(fg.clients[z]) == 2
    fg.check_integrity()


def test_clone_true_leaves_caller_graph_untouched():
    x = float64("x")
    out = exp(x)
    fg = FunctionGraph([x], [out])
    assert fg.inputs[0] is not x and fg.outputs[0] is not out
    fg.replace(fg.outputs[0], fg.inputs[0])
    assert out.owner.op == exp and out.owner.inputs == [x]


def test_inputs_default_to_graph_leaves():
    x, y = float64("x"), float64("y")
    fg = FunctionGraph(outputs=[add(x, mul(y, 2.0))], clone=False)
    assert fg.inputs == [x, y]


def test_missing_input_is_named():
    x, y = float64("x"), float64("y")
    with pytest.raises(MissingInputError, match="variable y"):
        FunctionGraph([x], [add(x, y)], clone=False)


def test_import_var_missing_and_import_missing(seed_graph):
    fg, (x, y, z) = seed_graph
    w = float64("w")
    before = fg.fingerprint(by_identity=True)
    with pytest.raises(MissingInputError, match="variable w"):
        fg.import_var(exp(add(x, w)))
    assert fg.fingerprint(by_identity=True) == before
    fg.check_integrity()
    fg.import_var(exp(w), import_missing=True)
    assert fg.inputs[-1] is w


def test_replace_prunes_and_calls_features(seed_graph):
    fg, (x, y, z) = seed_graph
    rec = Recorder()
    fg.attach_feature(rec)
    div = next(n for n in fg.toposort() if n.op == true_div and n.inputs[1] is y)
    fg.replace(div.outputs[0], x, reason="simplify")
    fg.check_integrity()
    assert div not in fg.apply_nodes
    assert ("change", mul, 0, "simplify") in rec.events
    pruned = [e[1] for e in rec.events if e[0] == "prune"]
    assert pruned == [true_div, mul]
    assert repr(fg) == "FunctionGraph(add(z, mul(x, true_div(z, x))))"


def test_replace_rejects_bad_types_and_foreign_variables(seed_graph):
    fg, (x, y, z) = seed_graph
    with pytest.raises(TypeError, match="cannot replace"):
        fg.replace(x, vector("v"))
    with pytest.raises(ValueError, match="not in the graph"):
        fg.replace(float64("stranger"), x)
    fg.check_integrity()


def test_replace_rejects_cycles_and_leaves_graph_unchanged():
    x = float64("x")
    e = exp(x)
    fg = FunctionGraph([x], [log(e)], clone=False)
    before = fg.fingerprint(by_identity=True)
    with pytest.raises(InconsistencyError, match="cycle"):
        fg.replace(x, add(e, 1.0))
    assert fg.fingerprint(by_identity=True) == before
    fg.check_integrity()


def test_replace_all_skips_pruned_variables():
    x = float64("x")
    inner = exp(x)
    outer = neg(inner)
    fg = FunctionGraph([x], [outer], clone=False)
    fg.replace_all([(outer, x), (inner, log(x))])
    assert fg.outputs == [x]
    fg.check_integrity()


def test_change_node_input_on_outputs(seed_graph):
    fg, (x, y, z) = seed_graph
    fg.change_node_input("output", 0, y)
    assert fg.outputs == [y] and not fg.apply_nodes
    fg.check_integrity()


def test_add_and_remove_output_renumbers_clients():
    x = float64("x")
    a, b, c = exp(x), neg(x), log(x)
    fg = FunctionGraph([x], [a, b, c], clone=False)
    fg.remove_output(0)
    assert fg.outputs == [b, c]
    assert fg.clients[c] == [("output", 1)]
    assert a.owner not in fg.apply_nodes
    fg.add_output(mul(b, c))
    fg.check_integrity()


def test_remove_node_removes_dependents_and_orphans():
    x, y = float64("x"), float64("y")
    shared = add(x, y)
    out1 = exp(shared)
    out2 = neg(y)
    fg = FunctionGraph([x, y], [out1, out2, log(out1)], clone=False)
    fg.remove_node(shared.owner)
    assert fg.outputs == [out2]
    assert set(fg.apply_nodes) == {out2.owner}
    fg.check_integrity()


def test_remove_input_removes_what_depends_on_it():
    x, y = float64("x"), float64("y")
    fg = FunctionGraph([x, y], [exp(x), neg(y), add(x, y)], clone=False)
    fg.remove_input(0)
    assert fg.inputs == [y]
    assert [o.owner.op for o in fg.outputs] == [neg]
    fg.check_integrity()


def test_constants_are_shared_by_value():
    x = float64("x")
    fg = FunctionGraph([x], [add(mul(x, 2.0), constant(2.0))], clone=False)
    two = [v for v in fg.variables if getattr(v, "data", None) is not None]
    assert len(two) == 1 and len(fg.clients[two[0]]) == 2
    fg.check_integrity()


def test_toposort_is_cached_and_honours_orderings():
    x = float64("x")
    a, b = exp(x), neg(x)
    fg = FunctionGraph([x], [add(a, b)], clone=False)
    first = fg.toposort()
    assert fg.toposort() == first and fg.toposort() is not fg.toposort()

    class BBeforeA(Feature):
        def orderings(self, fgraph):
            return {a.owner: [b.owner]}

    fg.attach_feature(BBeforeA())
    order = fg.toposort()
    assert order.index(b.owner) < order.index(a.owner)


def test_feature_attach_detach_and_callbacks():
    x = float64("x")
    fg = FunctionGraph([x], [exp(x)], clone=False)
    rec = Recorder()
    fg.attach_feature(rec)
    fg.attach_feature(rec)
    assert rec.events == [("attach",)]
    fg.replace(fg.outputs[0], neg(x), reason="r")
    assert ("import", neg, "r") in rec.events and ("prune", exp, "r") in rec.events
    assert fg.collect_callbacks("orderings") == {rec: {}}
    fg.remove_feature(rec)
    assert rec.events[-1] == ("detach",)


def test_clone_get_equiv_maps_every_node(seed_graph):
    fg, _ = seed_graph
    rec = Recorder()
    fg.attach_feature(rec)
    new, equiv = fg.clone_get_equiv()
    assert new.fingerprint() == fg.fingerprint()
    assert all(equiv[n] in new.apply_nodes for n in fg.apply_nodes)
    assert not set(new.apply_nodes) & set(fg.apply_nodes)
    assert rec in new.features


def test_check_integrity_detects_tampering(seed_graph):
    fg, (x, _, _) = seed_graph
    fg.clients[x].append(("output", 7))
    with pytest.raises(GraphIntegrityError, match="clients"):
        fg.check_integrity()


def test_fingerprint_distinguishes_structure():
    x, y = float64("x"), float64("y")
    f1 = FunctionGraph([x, y], [add(x, y)], clone=False)
    f2 = FunctionGraph([x, y], [add(y, x)], clone=False)
    f3 = FunctionGraph([x, y], [add(x, y)])
    assert f1.fingerprint() != f2.fingerprint()
    assert f1.fingerprint() == f3.fingerprint()
    assert f1.fingerprint(by_identity=True) != f3.fingerprint(by_identity=True)


def test_deep_chain_edits():
    x = float64("x")
    out = x
    for _ in range(100_000):
        out = exp(out)
    fg = FunctionGraph([x], [out], clone=False)
    bottom = fg.toposort()[0]
    fg.replace(bottom.outputs[0], neg(x))
    assert len(fg.apply_nodes) == 100_000
    fg.remove_node(fg.toposort()[0])
    assert fg.outputs == [] and not fg.apply_nodes

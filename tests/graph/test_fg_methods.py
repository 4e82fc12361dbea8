"""FunctionGraph methods, one behaviour at a time (seed 002's reference)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.graph.basic import Op, Variable, constant, float64, vector
from relwrite.graph.features import Feature, NodeFinder
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


@pytest.mark.slow
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


# -- failures leave the graph as it was ------------------------------------------------------------------


def _state(fg):
    """Everything a mutation may touch, comparable before and after."""
    return (
        list(fg.inputs),
        list(fg.outputs),
        {node: list(node.inputs) for node in fg.apply_nodes},
        set(fg.variables),
        {var: sorted((id(n), i) for n, i in clients) for var, clients in fg.clients.items()},
    )


def test_pruning_past_a_client_already_removed_completes():
    """The issue's repro: a client dropped before its reader goes made the later pruning raise halfway."""
    x, y = vector("x"), vector("y")
    a = exp(x)
    c = add(log(a), y)
    d = mul(c, c, a)
    fg = FunctionGraph([x, y], [d, a, c], clone=False)
    fg.remove_client(c, (d.owner, 1))  # d still reads c there: its link went first
    fg.remove_output(0)  # prunes d, whose link (c, (d, 1)) is already gone
    assert fg.outputs == [a, c] and d.owner not in fg.apply_nodes
    fg.check_integrity()


def test_remove_client_of_a_non_client_names_both_and_changes_nothing(seed_graph):
    fg, (x, y, z) = seed_graph
    node = fg.outputs[0].owner
    before = _state(fg)
    with pytest.raises(ValueError, match=r"input 1 of add\(z, mul\.0\) is not a client of variable x"):
        fg.remove_client(x, (node, 1))
    with pytest.raises(ValueError, match=r"is not a client of variable w of type"):
        fg.remove_client(vector("w"), (node, 0))
    assert _state(fg) == before
    fg.check_integrity()


def test_replace_all_undoes_the_pairs_applied_before_a_refused_one(seed_graph):
    fg, (x, y, z) = seed_graph
    inner = next(n for n in fg.apply_nodes if n.op == true_div and n.inputs[1] is y).outputs[0]
    rec = Recorder()
    fg.attach_feature(rec)
    before = _state(fg)
    with pytest.raises(TypeError, match="cannot replace"):
        fg.replace_all([(inner, x), (z, vector("v"))])
    assert _state(fg) == before
    fg.check_integrity()
    assert ("prune", true_div, None) in rec.events and ("import", true_div, "rollback") in rec.events


def test_change_node_input_checks_everything_before_changing(seed_graph):
    fg, (x, y, z) = seed_graph
    root = fg.outputs[0].owner
    before = _state(fg)
    stranger = add(x, y).owner
    with pytest.raises(ValueError, match="is not a node of the graph"):
        fg.change_node_input(stranger, 0, z)
    with pytest.raises(IndexError, match="has no input 2"):
        fg.change_node_input(root, 2, z)
    with pytest.raises(IndexError, match="the graph has no output 1"):
        fg.change_node_input("output", 1, z)
    with pytest.raises(InconsistencyError, match="cycle"):
        fg.change_node_input(root.inputs[1].owner, 0, neg(fg.outputs[0]))
    with pytest.raises(TypeError, match="expected a Variable"):
        fg.change_node_input(root, 0, 3.0)
    with pytest.raises(MissingInputError):
        fg.change_node_input(root, 0, exp(float64("w")))
    assert _state(fg) == before
    assert stranger.inputs == [x, y]
    fg.check_integrity()


def test_removals_check_indices_and_nodes_first(seed_graph):
    fg, _ = seed_graph
    before = _state(fg)
    for bad in (lambda: fg.remove_output(1), lambda: fg.remove_output(-1), lambda: fg.remove_input(3)):
        with pytest.raises(IndexError, match=r"no (output|input)"):
            bad()
    with pytest.raises(ValueError, match="is not a node of the graph"):
        fg.remove_node(exp(float64("w")).owner)
    assert _state(fg) == before


def test_remove_input_read_by_several_outputs_removes_them_all():
    x, y = float64("x"), float64("y")
    fg = FunctionGraph([x, y], [x, exp(x), x, neg(y)], clone=False)
    fg.remove_input(0)
    assert [o.owner.op for o in fg.outputs] == [neg]
    fg.check_integrity()


@st.composite
def mutation_sequences(draw):
    """A graph over float64 vectors and a list of mutation choices (each valid or not, drawn at random)."""
    inputs = [vector(name) for name in "xyz"]
    pool = list(inputs)
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from([exp, neg, log, add, mul]))
        args = [draw(st.sampled_from(pool)) for _ in range(1 if op in (exp, neg, log) else 2)]
        pool.append(op(*args))
    outputs = draw(st.lists(st.sampled_from(pool[3:]), min_size=1, max_size=3))
    steps = draw(
        st.lists(st.tuples(st.sampled_from(MUTATIONS), st.randoms(use_true_random=False)), max_size=8)
    )
    return inputs, outputs, steps


def _pick(rng, items):
    items = list(items)
    return rng.choice(items) if items else None


def _replacement(fg, rng, var):
    """A candidate for `var`'s place: from the graph, of the wrong type, cyclic, foreign, or no Variable."""
    others = [v for v in fg.variables if v.type == var.type]
    kind = rng.randrange(6)
    if kind == 0:
        return exp(_pick(rng, others))
    if kind == 1:
        return _pick(rng, others)
    if kind == 2:
        return float64("scalar")
    if kind == 3 and fg.clients.get(var):
        reader = _pick(rng, fg.clients[var])[0]
        return neg(fg.outputs[0] if reader == "output" else reader.outputs[0])
    if kind == 4:
        return exp(vector("foreign"))
    return 3.0


def _m_replace(fg, rng):
    var = _pick(rng, fg.variables)
    fg.replace(var, _replacement(fg, rng, var))


def _m_replace_all(fg, rng):
    pairs = []
    for _ in range(rng.randrange(1, 4)):
        var = _pick(rng, fg.variables)
        pairs.append((var, _replacement(fg, rng, var)))
    fg.replace_all(pairs)


def _m_change_node_input(fg, rng):
    node = _pick(rng, [*fg.apply_nodes, "output", exp(vector("w")).owner])
    size = len(fg.outputs) if node == "output" else len(node.inputs)
    i = rng.randrange(-1, size + 1)
    old = fg.outputs[i] if node == "output" and 0 <= i < size else vector("v")
    fg.change_node_input(node, i, _replacement(fg, rng, old))


def _m_remove_client(fg, rng):
    var = _pick(rng, fg.variables)
    client = _pick(
        rng, [c for v in fg.variables for c in fg.clients[v] if c not in fg.clients[var]] + [(3, 0)]
    )
    fg.remove_client(var, client)  # never one of var's own clients: that alone unlinks a reader on purpose


def _m_add_output(fg, rng):
    var = _pick(rng, fg.variables)
    fg.add_output(var if rng.random() < 0.5 else _replacement(fg, rng, var))


def _m_remove_output(fg, rng):
    fg.remove_output(rng.randrange(-1, len(fg.outputs) + 1))


def _m_remove_node(fg, rng):
    fg.remove_node(_pick(rng, [*fg.apply_nodes, exp(vector("w")).owner]))


def _m_remove_input(fg, rng):
    fg.remove_input(rng.randrange(-1, len(fg.inputs) + 1))


def _m_import_node(fg, rng):
    new = _replacement(fg, rng, _pick(rng, fg.variables))
    fg.import_node(new.owner if isinstance(new, Variable) and new.owner is not None else new)
    fg.add_output(new)  # what an import is for: a graph reaches only what its outputs need


def _m_add_input(fg, rng):
    fg.add_input(
        rng.choice([vector("fresh"), constant(1.0), _pick(rng, fg.inputs) or vector("v")]), check=False
    )


MUTATIONS = [
    _m_replace,
    _m_replace_all,
    _m_change_node_input,
    _m_remove_client,
    _m_add_output,
    _m_remove_output,
    _m_remove_node,
    _m_remove_input,
    _m_import_node,
    _m_add_input,
]


@given(mutation_sequences())
def test_every_mutation_either_applies_or_leaves_the_graph_as_it_was(case):
    inputs, outputs, steps = case
    fg = FunctionGraph(inputs, outputs, features=[NodeFinder()], clone=False)
    for mutation, rng in steps:
        if not fg.outputs:
            break
        before = _state(fg)
        try:
            mutation(fg, rng)
        except (ValueError, TypeError, IndexError, InconsistencyError) as exc:
            assert _state(fg) == before, f"{mutation.__name__} raised {exc!r} after changing the graph"
        fg.check_integrity()
        assert set(fg.get_nodes(Op)) == set(fg.apply_nodes)

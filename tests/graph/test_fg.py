"""FunctionGraph invariants on random expression graphs: cloning, ordering, replace and revert."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.graph import ops
from relwrite.graph.basic import vector
from relwrite.graph.features import History
from relwrite.graph.fg import FunctionGraph, InconsistencyError
from relwrite.testing import expression_graphs

graphs = expression_graphs(max_nodes=15)


def _fgraph(graph, **kwargs):
    inputs, output = graph
    return FunctionGraph(inputs, [output], **kwargs)


@given(graphs)
def test_clone_has_the_same_fingerprint_and_is_consistent(graph):
    fgraph = _fgraph(graph)
    fgraph.check_integrity()
    copy = fgraph.clone()
    copy.check_integrity()
    assert copy.fingerprint() == fgraph.fingerprint()
    assert copy.fingerprint(by_identity=True) != fgraph.fingerprint(by_identity=True)
    assert not set(copy.apply_nodes) & set(fgraph.apply_nodes)


@given(graphs)
def test_construction_clones_the_callers_graph(graph):
    inputs, output = graph
    fgraph = _fgraph(graph)
    assert output not in fgraph.variables and output.owner not in fgraph.apply_nodes
    assert fgraph.fingerprint() == FunctionGraph(inputs, [output], clone=False).fingerprint()


def _assert_valid_order(fgraph):
    order = fgraph.toposort()
    assert len(order) == len(set(order)) and set(order) == set(fgraph.apply_nodes)
    position = {node: k for k, node in enumerate(order)}
    for node in order:
        for var in node.inputs:
            if var.owner is not None:
                assert position[var.owner] < position[node]


@given(graphs)
def test_toposort_is_a_valid_order(graph):
    _assert_valid_order(_fgraph(graph))


def _compatible(a, b):
    return a.type.is_super(b.type) or b.type.is_super(a.type)


@given(graphs, st.data())
def test_replace_then_revert_restores_the_graph_exactly(graph, data):
    fgraph = _fgraph(graph, features=[History()])
    original = fgraph.fingerprint(by_identity=True)
    mark = fgraph.checkpoint()
    for _ in range(data.draw(st.integers(1, 3), label="replacements")):
        variables = list(fgraph.variables)
        var = data.draw(st.sampled_from(variables), label="var")
        candidates = [v for v in variables if v is not var and _compatible(v, var)]
        if not candidates:
            continue
        new_var = data.draw(st.sampled_from(candidates), label="new_var")
        if data.draw(st.booleans(), label="wrap new_var in a new node"):
            new_var = ops.identity(new_var)  # a node the graph does not have yet: it gets imported
        before = fgraph.fingerprint(by_identity=True)
        readers = {node for node, _ in fgraph.clients[var] if node != "output"}
        try:
            fgraph.replace(var, new_var, reason="test")
        except InconsistencyError:
            assert fgraph.fingerprint(by_identity=True) == before
            assert readers & _ancestor_nodes(new_var, stop=var), "refused a replacement that closes no cycle"
        fgraph.check_integrity()
        _assert_valid_order(fgraph)
    fgraph.revert(mark)
    fgraph.check_integrity()
    assert fgraph.fingerprint(by_identity=True) == original


def _ancestor_nodes(var, stop):
    """Every node `var` depends on, not looking through `stop`."""
    seen, stack = set(), [var]
    while stack:
        v = stack.pop()
        if v.owner is not None and v is not stop and v.owner not in seen:
            seen.add(v.owner)
            stack.extend(v.owner.inputs)
    return seen


@pytest.mark.slow
def test_cycle_checks_on_a_deep_chain_walk_only_between_the_levels_involved():
    """A 100,000-node chain: a cycle far above the replaced variable is found, an acyclic replacement
    that reads a high node lifts the readers' levels, and neither recurses over the depth."""
    from relwrite.graph.basic import vector

    x = vector("x")
    chain = [x]
    for _ in range(100_000):
        chain.append(ops.exp(chain[-1]))
    branch = [x]
    for _ in range(20):
        branch.append(ops.cos(branch[-1]))
    fgraph = FunctionGraph([x], [chain[-1], branch[-1]], clone=False)
    with pytest.raises(InconsistencyError):
        fgraph.replace(chain[5], ops.sin(chain[90_000]))
    fgraph.check_integrity()
    fgraph.replace(branch[10], ops.sin(chain[90_000]))  # the rest of the branch now sits above the chain
    assert fgraph.levels()[branch[-1].owner] > fgraph.levels()[chain[90_000].owner] + 10
    fgraph.check_integrity()
    fgraph.forget_levels()
    assert fgraph.levels()[chain[-1].owner] == 100_000
    fgraph.check_integrity()


def test_reading_a_constant_equal_to_one_the_node_reads_elsewhere_keeps_both_clients():
    """Equal constants share one clients entry (they hash by value): replacing one by the other moves nothing.

    Found by the fuzzer: gemm(Transpose, 1.0, x, x, 1.0) lost the client at position 4 when merge
    replaced the second 1.0 by the first.
    """
    from relwrite.graph import ops as o
    from relwrite.graph.basic import constant, vector

    x = vector("x")
    first, second = constant(1.0), constant(1.0)
    assert first is not second and first == second
    out = o.add(x, first, o.exp(x), second)
    fgraph = FunctionGraph([x], [out], clone=False)
    fgraph.change_node_input(out.owner, 3, first)
    fgraph.check_integrity()
    assert sorted(i for _, i in fgraph.clients[first]) == [1, 3]


@given(graphs)
def test_in_holds_exactly_the_graphs_own_variables_and_nodes(graph):
    inputs, output = graph
    fgraph = _fgraph(graph)
    assert all(v in fgraph for v in fgraph.variables) and all(n in fgraph for n in fgraph.apply_nodes)
    assert output not in fgraph and (output.owner is None or output.owner not in fgraph)
    assert not any(v in fgraph for v in inputs)  # the caller's inputs were cloned
    nodes = list(fgraph.apply_nodes)
    fgraph.add_output(fgraph.inputs[0])
    fgraph.remove_output(0)
    assert fgraph.inputs[0] in fgraph and not any(node in fgraph for node in nodes)
    assert not any(out in fgraph for node in nodes for out in node.outputs)


def test_in_rejects_what_is_neither_a_variable_nor_a_node():
    v = vector("v")
    x = ops.exp(v)
    fgraph = FunctionGraph([v], [x], clone=False)
    assert v in fgraph and x in fgraph and x.owner in fgraph
    with pytest.raises(TypeError, match="`in` got str"):
        "x" in fgraph  # noqa: B015

"""FunctionGraph invariants on random expression graphs: cloning, ordering, replace and revert."""

from hypothesis import given
from hypothesis import strategies as st

from relwrite.graph import ops
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
        try:
            fgraph.replace(var, new_var, reason="test")
        except InconsistencyError:
            assert fgraph.fingerprint(by_identity=True) == before
        fgraph.check_integrity()
        _assert_valid_order(fgraph)
    fgraph.revert(mark)
    fgraph.check_integrity()
    assert fgraph.fingerprint(by_identity=True) == original


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

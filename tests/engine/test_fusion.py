"""Elementwise fusion: what gets fused, what must not be, and that fused graphs compute the same values."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from relwrite.backends.numpy.function import numpy_function
from relwrite.engine.db import Query, optdb
from relwrite.engine.fusion import FusionRewriter
from relwrite.engine.profile import WalkProfile
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable, constant, matrix, scalar, tensor, vector
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.types import TensorType

UNARY = (o.neg, o.exp, o.sin, o.cos, o.tanh, o.abs, o.sqr, o.sigmoid)
BINARY = (o.add, o.mul, o.sub, o.true_div, o.maximum)


def fused(inputs: list[Variable], outputs: list[Variable]) -> FunctionGraph:
    """A fused copy of the graph; the original variables stay as they were."""
    fgraph = FunctionGraph(inputs, outputs)
    FusionRewriter().rewrite(fgraph)
    fgraph.check_integrity()
    return fgraph


def composites(fgraph: FunctionGraph) -> list:
    return [n for n in fgraph.toposort() if isinstance(n.op, o.Composite)]


def evaluate(inputs, outputs, values) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return numpy_function(inputs, outputs)(*values)


def assert_fusion_keeps_values(inputs, outputs, values) -> FunctionGraph:
    fgraph = fused(inputs, outputs)
    expected = evaluate(inputs, outputs, values)
    results = evaluate(fgraph.inputs, fgraph.outputs, values)
    for old, new, want, got in zip(outputs, fgraph.outputs, expected, results):
        assert old.type.is_super(new.type)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    return fgraph


# -- random graphs ------------------------------------------------------------------------------------


@st.composite
def elementwise_graphs(draw):
    """Graphs of elementwise ops over inputs that broadcast, with shared intermediates, several outputs,
    constants and sums (non-elementwise readers whose results may feed back), plus input values in which
    unknown lengths are 1 or the full length independently."""
    lengths = draw(st.lists(st.integers(2, 3), min_size=2, max_size=2))  # per axis, from the right
    inputs = []
    for k in range(draw(st.integers(1, 3))):
        ndim = draw(st.integers(0, 2))
        shape = [draw(st.sampled_from((None, 1, lengths[ndim - 1 - axis]))) for axis in range(ndim)]
        inputs.append(tensor(f"x{k}", shape=shape))
    pool: list[Variable] = [
        *inputs,
        constant(2.0),
        constant(-0.5),
        constant(np.array([1.0, 3.0, -2.0][: lengths[0]])),
    ]
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(("unary", "binary", "binary", "variadic", "sum")))
        operand = st.sampled_from(pool)
        newest = pool[-1]
        try:
            if kind == "unary":
                node = draw(st.sampled_from(UNARY))(newest if draw(st.booleans()) else draw(operand))
            elif kind == "binary":
                node = draw(st.sampled_from(BINARY))(newest, draw(operand))
            elif kind == "variadic":
                node = draw(st.sampled_from((o.add, o.mul)))(newest, draw(operand), draw(operand))
            else:
                node = o.sum(draw(operand))
        except TypeError:  # static lengths that cannot broadcast
            continue
        pool.append(node)
    computed = [v for v in pool if v.owner is not None]
    if not computed:
        computed = [o.exp(inputs[0])]
    extra = draw(st.lists(st.sampled_from(computed), max_size=3))
    outputs = list(dict.fromkeys([computed[-1], *extra]))
    values = []
    for var in inputs:
        shape = tuple(
            (draw(st.sampled_from((1, lengths[var.ndim - 1 - axis]))) if d is None else d)
            for axis, d in enumerate(var.type.shape)
        )
        values.append(draw(hnp.arrays("float64", shape, elements=st.floats(-4, 4))))
    return inputs, outputs, values


def _runs(inputs, outputs, values) -> bool:
    try:
        evaluate(inputs, outputs, values)
    except Exception:  # lengths that do not broadcast at run time: not a graph to compare on
        return False
    return True


@given(elementwise_graphs())
def test_fused_graphs_compute_what_the_originals_compute(case):
    inputs, outputs, values = case
    if not _runs(inputs, outputs, values):
        return
    fgraph = assert_fusion_keeps_values(inputs, outputs, values)
    for node in composites(fgraph):
        assert len(node.op.nodes) >= 2 or len(node.outputs) > 1
        assert all(not isinstance(v, Constant) or v.ndim > 0 for v in node.inputs)


@given(elementwise_graphs())
def test_fused_graphs_on_numpy_write_over_no_value_still_needed(case):
    """With every intermediate worth writing over (no size floor), the NumPy Composite's results equal
    the original graph's, and its inputs are left as they were."""
    from unittest.mock import patch

    from relwrite.backends.numpy import impls

    inputs, outputs, values = case
    if not _runs(inputs, outputs, values):
        return
    copies = [np.copy(v) for v in values]
    with patch.object(impls, "REUSE_MIN_SIZE", 1):
        assert_fusion_keeps_values(inputs, outputs, values)
    for before, after in zip(copies, values):
        np.testing.assert_array_equal(before, after)


@given(elementwise_graphs())
def test_fusion_is_idempotent(case):
    inputs, outputs, _ = case
    fgraph = fused(inputs, outputs)
    before = fgraph.fingerprint(by_identity=True)
    profile = FusionRewriter().rewrite(fgraph)
    assert profile.nb_changed == 0
    assert fgraph.fingerprint(by_identity=True) == before


@pytest.mark.parametrize("second", ["add", "neg of add"])
def test_a_node_read_back_only_by_another_part_joins_its_own_in_one_run(second):
    """neg(x) feeds one output's sum and, through Sum, the other output's: grown with both sinks it
    stays out (it leads back into the group), but once the group splits it joins its own part, as a
    second run would have it join; the Composites do not read each other."""
    x = vector("x")
    shared = o.neg(x)
    first = o.neg(o.add(shared, x))
    other = o.add(o.Sum(None)(shared), x) if second == "add" else o.neg(o.add(o.Sum(None)(shared), x, x))
    fgraph = assert_fusion_keeps_values([x], [first, other], [np.linspace(-1, 1, 5)])
    reading_sum = [n for n in composites(fgraph) if len(n.outputs) == 2]
    assert len(reading_sum) == 1 and len(reading_sum[0].op.nodes) == 3  # neg(x) inside, exported to Sum
    before = fgraph.fingerprint(by_identity=True)
    assert FusionRewriter().rewrite(fgraph).nb_changed == 0
    assert fgraph.fingerprint(by_identity=True) == before


# -- chains ------------------------------------------------------------------------------------------------


def test_a_chain_of_twenty_ops_becomes_one_composite():
    x, y = vector("x"), vector("y")
    ops = [o.exp, o.sin, o.tanh, o.sqrt, o.abs, o.neg, o.cos, o.sigmoid, o.sqr, o.expm1]
    v = x
    for k in range(20):
        v = ops[k % 10](v) if k % 2 else (v + y if k % 4 else v * y)
    fgraph = assert_fusion_keeps_values([x, y], [v], [np.linspace(0.1, 1, 5), np.linspace(-1, 1, 5)])
    (node,) = fgraph.toposort()
    assert isinstance(node.op, o.Composite) and len(node.op.nodes) == 20
    assert node.inputs == fgraph.inputs


@pytest.mark.slow
def test_a_chain_of_100000_ops_fuses_without_recursion():
    x, half = vector("x"), constant(0.5)  # one constant read by 50,000 nodes
    v = x
    for k in range(100_000):
        v = (o.exp, o.sin, o.tanh)[k % 3](v) if k % 2 else v * half
    fgraph = FunctionGraph([x], [v], clone=False)
    profile = FusionRewriter().rewrite(fgraph)
    assert profile.nb_changed == 1 and profile.nodes_end == 1
    (node,) = fgraph.toposort()
    assert len(node.op.nodes) == 100_000 and node.inputs == [x]
    (result,) = evaluate(fgraph.inputs, fgraph.outputs, [np.array([0.25, -1.0])])
    assert result.shape == (2,) and np.isfinite(result).all()


# -- multiple clients ---------------------------------------------------------------------------------------


def test_an_intermediate_read_outside_becomes_another_output_of_the_composite():
    x = vector("x")
    t = o.exp(x)
    outputs = [o.sin(t) * 2.0 + o.cos(t), t, o.sum(t)]
    fgraph = assert_fusion_keeps_values([x], outputs, [np.array([0.5, -1.0, 2.0])])
    (node,) = composites(fgraph)
    assert len(node.outputs) == 2 and len(node.op.nodes) == 5
    assert fgraph.outputs[0].owner is node and fgraph.outputs[1].owner is node
    assert fgraph.outputs[2].owner.inputs == [fgraph.outputs[1]]


def test_outputs_sharing_intermediates_fuse_into_one_composite_and_unrelated_ones_apart():
    x, y = vector("x"), vector("y")
    shared = o.exp(x) * 2.0
    outputs = [o.sin(shared) + 1.0, o.cos(shared) * x, o.tanh(y) + 3.0]  # two related outputs, one apart
    fgraph = assert_fusion_keeps_values([x, y], outputs, [np.array([0.5, -1.0, 2.0]), np.array([0.25, 0.75])])
    related, apart = sorted(composites(fgraph), key=lambda node: -len(node.outputs))
    assert len(related.outputs) == 2 and related.inputs == [fgraph.inputs[0]]
    assert len(apart.outputs) == 1 and apart.inputs == [fgraph.inputs[1]]


def test_a_shared_dag_with_many_outputs_is_fused_once_per_part():
    """Each output reached from another's group used to fuse that group's Composite again (copying it
    whole); grown together from every output, the DAG is fused in one step."""
    x, y = vector("x"), vector("y")
    pool = [x, y]
    for k in range(300):
        pool.append(o.tanh(pool[-1] + pool[k // 2]) if k % 3 else o.exp(pool[-1] * pool[-2]))
    outputs = [pool[-1], *(o.sin(v) for v in pool[10::30])]  # each sin read by nothing else
    fgraph = FunctionGraph([x, y], outputs, clone=False)
    profile = FusionRewriter().rewrite(fgraph)
    assert profile.nb_changed == 1 and len(composites(fgraph)) == 1


def test_a_reader_that_leads_back_into_the_group_keeps_its_producer_out():
    x = vector("x")
    t = o.exp(x)
    out = o.sin(t) * o.sum(t)  # fusing exp with the product would close a cycle through the sum
    fgraph = assert_fusion_keeps_values([x], [out], [np.array([0.5, -1.0])])
    (node,) = composites(fgraph)
    assert [str(n.op) for n in node.op.nodes] == ["sin", "mul"]
    (exp_node,) = [n for n in fgraph.toposort() if n.op == o.exp]
    assert exp_node.outputs[0] in node.inputs


def test_a_shared_intermediate_read_only_inside_is_computed_once():
    x, y = vector("x"), vector("y")
    t = o.exp(x + y)
    fgraph = assert_fusion_keeps_values([x, y], [o.sin(t) * o.cos(t) + t], [np.ones(3), np.arange(3.0)])
    (node,) = fgraph.toposort()
    assert [str(n.op) for n in node.op.nodes].count("exp") == 1


# -- broadcasting ------------------------------------------------------------------------------------------


def test_an_output_narrower_than_the_group_is_not_fused_into_it():
    """exp(x) and tanh(exp(x)) are vectors: they fuse apart from the matrix product, which reads them once
    per row (fused into it, they would be computed once per row too)."""
    x, m = vector("x"), matrix("M")
    t = o.exp(x)
    fgraph = assert_fusion_keeps_values([x, m], [o.tanh(t) * m, t], [np.array([0.5, 1.0]), np.ones((3, 2))])
    (node,) = composites(fgraph)
    assert [str(n.op) for n in node.op.nodes] == ["exp", "tanh"]
    assert fgraph.outputs[1].owner is node and fgraph.outputs[0].owner.op == o.mul


def test_a_lower_rank_subgraph_is_computed_once_outside_the_matrix_loop():
    """log(xs + 5) - exp(xm * 5), PyTensor's test_not_fusing_broadcasted_subgraphs: the vector part is a
    Composite of its own, read by the matrix loop, which holds none of it."""
    xs, xm = vector("xs"), matrix("xm")
    values = [np.array([0.5, 1.0, 2.0]), np.arange(6.0).reshape(2, 3) / 6]
    fgraph = assert_fusion_keeps_values([xs, xm], [o.log(xs + 5.0) - o.exp(xm * 5.0)], values)
    vector_loop, matrix_loop = composites(fgraph)
    assert {str(n.op) for n in vector_loop.op.nodes} == {"add", "log"}
    assert {str(n.op) for n in matrix_loop.op.nodes} == {"mul", "exp", "sub"}
    assert vector_loop.outputs[0] in matrix_loop.inputs and xs not in matrix_loop.inputs
    assert all(read for read in matrix_loop.op.inputs_read)
    assert sorted(set().union(*matrix_loop.op.inputs_read)) == list(range(len(matrix_loop.inputs)))


@given(
    ranks=st.lists(st.integers(0, 2), min_size=2, max_size=4),
    values=st.lists(st.floats(-2, 2), min_size=4, max_size=4),
)
def test_no_fused_node_is_proven_narrower_than_its_composite(ranks, values):
    """Inputs of ranks 0 to 2 mixed by elementwise ops: every inner node of a fused Composite computes
    something of the Composite's full rank (nothing of a lower rank is recomputed per element), every
    input is read, and the values are NumPy's."""
    inputs = [tensor(f"x{k}", "float64", (None,) * r) for k, r in enumerate(ranks)]
    terms = [o.exp(inputs[0] * values[0])]
    for k, v in enumerate(inputs[1:]):
        terms.append(o.tanh(terms[-1] + v * values[(k + 1) % 4]))
    arrays = [np.full((3,) * r, 0.25 * (k + 1)) for k, r in enumerate(ranks)]
    fgraph = assert_fusion_keeps_values(inputs, [terms[-1]], arrays)
    for node in composites(fgraph):
        full = node.outputs[0].ndim
        reach = _ranks_reached(node.op, [v.ndim for v in node.inputs])
        assert all(rank == full for rank in reach), (node.op, reach)
        assert sorted(set().union(*node.op.inputs_read)) == list(range(len(node.inputs)))


def _ranks_reached(op, input_ranks):
    """The rank of every inner node's output of a Composite applied to inputs of `input_ranks`."""
    rank = dict(zip(op.inputs, input_ranks))
    for n in op.nodes:
        r = max((rank.get(v, 0) for v in n.inputs), default=0)
        rank.update((out, r) for out in n.outputs)
    return [rank[n.outputs[0]] for n in op.nodes]


def test_an_unused_composite_output_and_the_inputs_only_it_reads_are_dropped():
    """PyTensor's test_local_useless_composite_outputs: a Composite of x + 1 and y - 1 over x, y, z."""
    a, b, c = (TensorType("float64", ())() for _ in range(3))
    own = o.Composite([a, b, c], [a + 1.0, b - 1.0], own_shapes=True)
    x, y, z = matrix("x"), matrix("y"), matrix("z")
    first, second = own(x, y, z)
    values = (np.ones((1, 1)), np.ones((1, 1)), np.full((1, 1), np.nan))
    for outputs, read, expected in (
        ([first, second], [x, y], [2.0, 0.0]),
        ([first], [x], [2.0]),
        ([second], [y], [0.0]),
    ):
        fgraph = FunctionGraph([x, y, z], outputs, clone=False)
        optdb.query(Query(include=["canonicalize"])).rewrite(fgraph)
        (node,) = fgraph.toposort()
        assert list(node.inputs) == read and len(node.outputs) == len(outputs)
        got = numpy_function([x, y, z], fgraph.outputs)(*values)
        np.testing.assert_array_equal(got, [np.full((1, 1), e) for e in expected])


def test_an_unread_input_that_shapes_a_composite_stays_unless_it_provably_fits():
    """Without own shapes, every output broadcasts over every input: z of unknown shape may widen x + 1
    and stays; a length-1 z cannot and goes."""
    a, b = (TensorType("float64", ())() for _ in range(2))
    plain = o.Composite([a, b], [a + 1.0])
    x = matrix("x")
    for z, kept in ((matrix("z"), 2), (tensor("z", "float64", (1, 1)), 1)):
        fgraph = FunctionGraph([x, z], [plain(x, z)], clone=False)
        optdb.query(Query(include=["canonicalize"])).rewrite(fgraph)
        (node,) = fgraph.toposort()
        assert len(node.inputs) == kept


def test_runtime_broadcasting_of_unknown_lengths_is_respected():
    x, y = matrix("x"), matrix("y")
    t = o.exp(x)
    values = [np.array([[0.1, 0.2, 0.3]]), np.ones((2, 3))]  # x broadcasts over y's rows
    fgraph = assert_fusion_keeps_values([x, y], [o.sin(t) + y, o.cos(t)], values)
    assert evaluate(fgraph.inputs, fgraph.outputs, values)[1].shape == (1, 3)


def test_an_output_proven_full_by_static_shapes_stays_in_the_group():
    x, s = matrix("x"), scalar("s")
    t = o.exp(x)
    fgraph = assert_fusion_keeps_values([x, s], [t * s + 1.0, t], [np.ones((2, 3)), np.array(0.5)])
    (node,) = fgraph.toposort()
    assert len(node.outputs) == 2


def test_a_larger_constant_is_an_input_and_scalars_are_inlined():
    x = vector("x")
    offsets = constant(np.array([1.0, 2.0, 3.0]))
    out = o.exp(x * 2.0) + offsets
    fgraph = assert_fusion_keeps_values([x], [out], [np.array([0.0, 1.0, -1.0])])
    (node,) = fgraph.toposort()
    assert node.inputs == [fgraph.inputs[0], offsets]


# -- other cases ---------------------------------------------------------------------------------------------


def test_existing_composites_are_inlined_into_a_larger_group():
    x = vector("x")
    inner = TensorType("float64", ())()
    square_sin = o.Composite([inner], [o.sin(o.sqr(inner))])
    out = o.exp(square_sin(x)) + 1.0
    fgraph = assert_fusion_keeps_values([x], [out], [np.array([0.3, 0.7])])
    (node,) = fgraph.toposort()
    assert [str(n.op) for n in node.op.nodes] == ["sqr", "sin", "exp", "add"]


def test_lone_nodes_and_constant_groups_are_left_alone():
    x = vector("x")
    fgraph = fused([x], [o.exp(x), o.sum(o.sin(x))])
    assert not composites(fgraph)
    fgraph = fused([x], [o.dot(x, x), o.exp(constant(1.0)) * 2.0])
    assert not composites(fgraph)


def test_the_profile_counts_composites():
    x, y = vector("x"), vector("y")
    fgraph = FunctionGraph([x, y], [o.exp(x) + 1.0, o.dot(o.sin(y) * 2.0, x)])
    profile = FusionRewriter().rewrite(fgraph)
    assert isinstance(profile, WalkProfile)
    assert profile.nb_changed == 2 and profile.nodes_start == 5 and profile.nodes_end == 3


def test_fusion_runs_in_fast_run_after_specialize_and_before_merge2():
    steps = [step.name for step in optdb.query(Query(include=["fast_run"])).rewriters]
    assert steps.index("specialize") < steps.index("elemwise_fusion") < steps.index("merge2")
    assert {"fast_run", "fusion"} <= optdb.tags_of("elemwise_fusion")
    assert "elemwise_fusion" not in [s.name for s in optdb.query(Query(include=["fast_compile"])).rewriters]
    assert isinstance(optdb["elemwise_fusion"], FusionRewriter)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_dtypes_are_kept(dtype):
    x = vector("x", dtype=dtype)
    out = (x * 3 + x) * x
    values = [np.arange(4).astype(dtype)]
    fgraph = assert_fusion_keeps_values([x], [out], values)
    assert fgraph.outputs[0].dtype == dtype


def test_a_gemm_row_that_broadcasts_does_not_let_a_narrow_sibling_into_the_group():
    """gemm(Z, ...) with Z of static shape (1, 1) is (m, n) at run time (b * Z + a * X @ Y broadcasts).

    Its static type used to claim (1, 1), so fusion judged exp(c), also (1, 1), as wide as the group
    and returned it broadcast to 1x3.
    """
    z, c = matrix("z", shape=(1, 1)), matrix("c", shape=(1, 1))
    x, y = matrix("x"), matrix("y")
    product = o.gemm(z, -1.0, x, y, 0.5)
    sibling = o.exp(c)
    inputs, outputs = [z, c, x, y], [sibling + product, sibling]
    values = [np.full((1, 1), 2.0), np.full((1, 1), 0.5), np.ones((1, 2)), np.ones((2, 3))]
    fgraph = assert_fusion_keeps_values(inputs, outputs, values)
    got = evaluate(fgraph.inputs, fgraph.outputs, values)
    assert [a.shape for a in got] == [(1, 3), (1, 1)]

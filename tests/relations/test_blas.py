"""The BLAS rules: dot -> Dot22 and the Gemm, Gemv and Ger updates, both ways, with their guards."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kanren import run, var

from relwrite.backends.numpy.function import numpy_function
from relwrite.engine import EquilibriumRewriter, KanrenRelationSub, OpSub
from relwrite.engine.db import optdb, rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.basic import (
    Apply,
    Constant,
    Variable,
    ancestors,
    clone_get_equiv,
    constant,
    graph_inputs,
    matrix,
    scalar,
    vector,
)
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.relations import blas, catalogue
from relwrite.relations.pattern import as_graph, to_graph
from relwrite.testing import check_relation, input_values

RULES = [blas.dot_to_dot22, blas.add_to_ger, blas.add_to_gemm, blas.add_to_gemv]
BLAS_OP = {"dot_to_dot22": o.Dot22, "add_to_ger": o.Ger, "add_to_gemm": o.Gemm, "add_to_gemv": o.Gemv}
SMALL = st.floats(-10, 10, width=32)


def forward(rule, graph: Variable) -> Variable | None:
    """The rule's first answer on `graph`, as a graph, or None."""
    for answer in rule.forward(graph):
        return to_graph(answer, like=graph)
    return None


def backward(rule, graph: Variable) -> Variable | None:
    q = var()
    found = run(1, q, rule(q, graph))
    return as_graph(found[0]) if found else None


def nodes_of(graph: Variable, op_class: type) -> list[Apply]:
    return [v.owner for v in ancestors([graph]) if v.owner is not None and isinstance(v.owner.op, op_class)]


def evaluate(graphs: list[Variable], inputs: list[Variable], values: list[np.ndarray]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return numpy_function(inputs, graphs)(*values)


def assert_same_values(data, lhs: Variable, *others: Variable) -> None:
    """Every graph in `others` computes what `lhs` computes, on drawn inputs."""
    inputs = graph_inputs([lhs, *others])
    values = data.draw(input_values(inputs, elements=SMALL))
    expected, *results = evaluate([lhs, *others], inputs, values)
    tolerance = 1e-4 if expected.dtype == np.float32 else 1e-9
    for result in results:
        assert result.dtype == expected.dtype and result.shape == expected.shape
        np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance)


# -- catalogue and metadata --------------------------------------------------------------------------


def test_blas_rules_are_catalogued_after_specialize_with_full_metadata():
    rules = catalogue()
    names = [r.name for r in rules]
    assert [n for n in names if n in BLAS_OP] == [r.name for r in RULES]
    first_blas = names.index("dot_to_dot22")
    assert all(names.index(r.name) < first_blas for r in rules if r.name not in BLAS_OP)
    for rule in RULES:
        assert {"blas", "specialize", "fast_run"} <= rule.tags
        assert rule.phase == "specialize"
        assert rule.backward and rule.backward_note is None
        assert rule.examples and rule.types and rule.doc
        assert rule.name in optdb["specialize"]


def test_ger_is_tried_before_gemm_on_outer_products():
    names = [r.name for r in catalogue()]
    assert names.index("add_to_ger") < names.index("add_to_gemm")


# -- every example, forward and backward ------------------------------------------------------------

EXAMPLES = [(rule, text) for rule in RULES for text in rule.examples]


@pytest.mark.parametrize(("rule", "text"), EXAMPLES, ids=[f"{r.name}: {t}" for r, t in EXAMPLES])
@given(data=st.data())
def test_examples_rewrite_forward_and_back_to_equal_values(rule, text, data):
    lhs = parse(text, types=rule.types)
    rhs = forward(rule, lhs)
    assert rhs is not None, f"{rule.name} does not rewrite its example {text}"
    assert nodes_of(rhs, BLAS_OP[rule.name])
    assert rhs.type == lhs.type
    back = backward(rule, rhs)
    assert back is not None and not nodes_of(back, BLAS_OP[rule.name])
    assert_same_values(data, lhs, rhs, back)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_soundness_property_both_ways(rule):
    report = check_relation(rule)
    assert report.directions == ("forward", "backward")


# -- dot22 ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dot_of_float_matrices_of_one_dtype_becomes_dot22(dtype):
    x, y = matrix("X", dtype=dtype), matrix("Y", dtype=dtype)
    result = forward(blas.dot_to_dot22, o.dot(x, y))
    assert isinstance(result.owner.op, o.Dot22) and result.owner.inputs == [x, y]
    assert result.dtype == dtype


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (matrix("X", dtype="float32"), matrix("Y", dtype="float64")),
        (matrix("X", dtype="int64"), matrix("Y", dtype="int64")),
        (matrix("X"), vector("y")),
        (vector("x"), vector("y")),
    ],
    ids=["mixed float dtypes", "integers", "matrix-vector", "vector-vector"],
)
def test_dot22_refuses_what_blas_cannot_do(left, right):
    assert forward(blas.dot_to_dot22, o.dot(left, right)) is None


def test_dot22_backward_is_plain_dot():
    x, y = matrix("X"), matrix("Y")
    back = backward(blas.dot_to_dot22, o.dot22(x, y))
    assert back.owner.op == o.dot and back.owner.inputs == [x, y]


# -- gemm ----------------------------------------------------------------------------------------------

GEMM_TYPES = {"X": "(3,4)", "Y": "(4,2)", "Z": "(3,2)", "W": "(3,2)", "V": "(3,2)", "r": "(2,)"}


def gemm_of(graph: Variable) -> Apply:
    (node,) = nodes_of(graph, o.Gemm)
    return node


@pytest.mark.parametrize(
    ("text", "alpha", "beta", "kept"),
    [
        ("dot(X, Y) + Z", 1, 1, 0),
        ("a * dot(X, Y) + Z", "a", 1, 0),
        ("dot(X, Y) + b * Z", 1, "b", 0),
        ("Z + neg(dot(X, Y))", -1, 1, 0),
        ("neg(a * dot(X, Y)) + Z", "-a", 1, 0),
        ("Z + neg(b * Z)", None, None, None),
        ("c * a * dot(X, Y) + b * Z", "(c * a)", "b", 0),
        ("W + a * dot(X, Y) + b * Z", "a", "b", 1),
        ("W + V + dot(X, Y) + neg(Z)", 1, -1, 2),
        ("r + dot(X, Y) + Z", 1, 1, 1),
        ("a * X @ Y + b * Z", 1, "b", 0),
    ],
)
@given(data=st.data())
def test_gemm_variants(text, alpha, beta, kept, data):
    lhs = parse(text, types=GEMM_TYPES)
    rhs = forward(blas.add_to_gemm, lhs)
    if alpha is None:
        assert rhs is None
        return
    node = gemm_of(rhs)
    for factor, expected in ((node.inputs[1], alpha), (node.inputs[4], beta)):
        if isinstance(expected, str):
            assert pprint(factor) == expected
        else:
            assert isinstance(factor, Constant) and factor.data == expected and factor.dtype == "float64"
    others = rhs.owner.inputs if rhs.owner is not node else [rhs]
    assert len(others) - 1 == kept
    assert_same_values(data, lhs, rhs)


def test_gemm_prefers_the_scaled_term_as_z():
    lhs = parse("W + a * dot(X, Y) + b * Z", types=GEMM_TYPES)
    node = gemm_of(forward(blas.add_to_gemm, lhs))
    assert str(node.inputs[0]) == "Z" and str(node.inputs[4]) == "b"


@given(data=st.data())
def test_gemm_matches_dot22_already_specialized(data):
    x, y, z = matrix("X", shape=(3, 4)), matrix("Y", shape=(4, 2)), matrix("Z", shape=(3, 2))
    a = scalar("a")
    lhs = o.add(o.mul(a, o.dot22(x, y)), z)
    node = gemm_of(forward(blas.add_to_gemm, lhs))
    assert node.inputs[1] is a and node.inputs[2] is x and node.inputs[3] is y
    assert_same_values(data, lhs, forward(blas.add_to_gemm, lhs))


def test_gemm_converts_scalar_factors_as_numpy_promotes_them():
    x, y, z = (matrix(n, dtype="float32") for n in "XYZ")
    node = gemm_of(forward(blas.add_to_gemm, 2 * o.dot(x, y) + z))  # the literal 2 is a small int
    assert node.inputs[1] == Constant(node.inputs[1].type, 2.0) and node.inputs[1].dtype == "float32"
    a = scalar("a", dtype="float32")
    x, y, z = matrix("X"), matrix("Y"), matrix("Z")
    node = gemm_of(forward(blas.add_to_gemm, a * o.dot(x, y) + z))
    assert isinstance(node.inputs[1].owner.op, o.Cast) and node.inputs[1].owner.inputs == [a]


@pytest.mark.parametrize(
    "graph",
    [
        lambda: o.dot(matrix("X"), matrix("Y")) + matrix("Z", dtype="float32"),
        lambda: (
            scalar("a") * o.dot(matrix("X", dtype="float32"), matrix("Y", dtype="float32"))
            + matrix("Z", dtype="float32")
        ),
        lambda: o.dot(matrix("X", dtype="int64"), matrix("Y", dtype="int64")) + matrix("Z", dtype="int64"),
        lambda: o.dot(matrix("X", dtype="float32"), matrix("Y")) + matrix("Z"),
        lambda: (
            o.neg(o.dot(matrix("X", dtype="uint8"), matrix("Y", dtype="uint8")))
            + o.neg(matrix("Z", dtype="uint8"))
        ),
    ],
    ids=["Z of another dtype", "scalar upcasts the product", "integers", "mixed product dtypes", "unsigned"],
)
def test_gemm_dtype_guard(graph):
    assert forward(blas.add_to_gemm, graph()) is None


@pytest.mark.parametrize(
    "text",
    ["exp(Z) + Z", "M * dot(X, Y) + Z", "dot(X, Y) + r", "dot(X, Y) + a", "dot(X, Y) * Z"],
    ids=["no product", "matrix factor", "no matrix to add", "a scalar to add", "not a sum"],
)
def test_gemm_near_misses(text):
    lhs = parse(text, types={**GEMM_TYPES, "M": "(3,2)"})
    assert forward(blas.add_to_gemm, lhs) is None


@given(data=st.data())
def test_gemm_of_a_row_that_broadcasts_has_the_sums_type(data):
    """gemm broadcasts b * Z + a * X @ Y as NumPy does, so a row Z gives the sum's shape, not one row."""
    x, y = matrix("X", shape=(None, 4)), matrix("Y", shape=(4, 2))
    for z in (matrix("Z", shape=(1, None)), matrix("Z", shape=(1, 2)), matrix("Z")):
        total = o.dot(x, y) + z
        assert forward(blas.add_to_gemm, total).type == total.type
    x = matrix("X", shape=(3, 4))
    for shape in [(1, 2), (3, 1), (1, 1)]:
        total = o.dot(x, y) + matrix("Z", shape=shape)
        gemm = forward(blas.add_to_gemm, total)
        assert gemm.type == total.type and total.type.shape == (3, 2)
        assert_same_values(data, total, gemm)


@given(data=st.data())
def test_gemm_backward_from_a_gemm_node(data):
    x, y, z = matrix("X", shape=(3, 4)), matrix("Y", shape=(4, 2)), matrix("Z", shape=(3, 2))
    a = scalar("a")
    one = constant(1.0)
    for node, expected in [
        (o.gemm(z, a, x, y, scalar("b")), "((b * Z) + (a * (X @ Y)))"),
        (o.gemm(z, one, x, y, one), "(Z + (X @ Y))"),
        (o.gemm(z, a, x, y, constant(-1.0)), "(-Z + (a * (X @ Y)))"),
    ]:
        back = backward(blas.add_to_gemm, node)
        assert pprint(back) == expected
        assert_same_values(data, node, back)


# -- gemv ----------------------------------------------------------------------------------------------


@given(data=st.data())
def test_gemv_for_matrix_vector_and_vector_matrix_products(data):
    types = blas._GEMV_TYPES
    lhs = parse("a * dot(A, x) + b * y", types=types)
    node = forward(blas.add_to_gemv, lhs).owner
    assert isinstance(node.op, o.Gemv) and [str(v) for v in node.inputs] == ["y", "a", "A", "x", "b"]
    lhs = parse("dot(z, A) + w", types=types)
    rhs = forward(blas.add_to_gemv, lhs)
    matrix_input = rhs.owner.inputs[2]
    assert isinstance(matrix_input.owner.op, o.DimShuffle) and matrix_input.owner.op.is_transpose
    assert_same_values(data, lhs, rhs)


@pytest.mark.parametrize(
    "text",
    ["dot(x, x) + c", "dot(A, x) + A", "dot(A, B) + A"],
    ids=["vector-vector", "no vector to add", "matrix-matrix"],
)
def test_gemv_near_misses(text):
    lhs = parse(text, types={**blas._GEMV_TYPES, "A": "(3,3)", "x": "(3,)", "B": "(3,3)"})
    assert forward(blas.add_to_gemv, lhs) is None


# -- ger -----------------------------------------------------------------------------------------------


@given(data=st.data())
def test_ger_from_dimshuffled_vectors(data):
    x, y = vector("x", shape=(3,)), vector("y", shape=(2,))
    a_mat, a = matrix("A", shape=(3, 2)), scalar("a")
    lhs = a_mat + a * o.dot(x.dimshuffle(0, "x"), y.dimshuffle("x", 0))
    rhs = forward(blas.add_to_ger, lhs)
    assert rhs.owner.op == o.ger and rhs.owner.inputs == [a_mat, a, x, y]
    back = backward(blas.add_to_ger, rhs)
    assert not nodes_of(back, o.Ger)
    assert_same_values(data, lhs, rhs, back)


@pytest.mark.parametrize(
    ("column", "row"),
    [(matrix("u"), matrix("v")), (matrix("u"), matrix("v", shape=(1, None)))],
    ids=["unknown lengths", "not a column"],
)
def test_ger_needs_a_column_times_a_row(column, row):
    assert forward(blas.add_to_ger, matrix("A") + o.dot(column, row)) is None


# -- the pipeline ------------------------------------------------------------------------------------


def rewritten(graph: Variable, include=("fast_run",)) -> Variable:
    """`graph` rewritten by the pipeline, on the same input variables, the original left intact."""
    inputs = graph_inputs([graph])
    fgraph = rewrite_graph(FunctionGraph(inputs, [graph]), include=list(include))
    equiv = clone_get_equiv(fgraph.inputs, fgraph.outputs, memo=dict(zip(fgraph.inputs, inputs)))
    return equiv[fgraph.outputs[0]]


@given(data=st.data())
def test_fast_run_turns_the_seed_expression_into_gemm(data):
    a, b = scalar("a"), scalar("b")
    x, y, z = matrix("X", shape=(3, 4)), matrix("Y", shape=(4, 2)), matrix("Z", shape=(3, 2))
    graph = a * x @ y + b * z
    result = rewritten(graph)
    assert isinstance(result.owner.op, o.Gemm)
    assert_same_values(data, graph, result)
    graph = a * (x @ y) + b * z
    result = rewritten(graph)
    assert result.owner.op == o.gemm and result.owner.inputs == [z, a, x, y, b]
    assert not nodes_of(rewritten(graph, include=["fast_compile"]), o.Gemm)


@given(data=st.data())
def test_fast_run_chains_gemms_and_uses_dot22_for_the_rest(data):
    x, y, z = matrix("X", shape=(3, 4)), matrix("Y", shape=(4, 2)), matrix("Z", shape=(3, 2))
    p, q = matrix("P", shape=(3, 5)), matrix("Q", shape=(5, 2))
    graph = x @ y + p @ q + z
    result = rewritten(graph)
    assert len(nodes_of(result, o.Gemm)) == 2 and not nodes_of(result, o.Dot)
    assert_same_values(data, graph, result)
    plain = rewritten(x @ y)
    assert isinstance(plain.owner.op, o.Dot22)


def test_fast_run_turns_outer_products_into_ger_and_matrix_vector_into_gemv():
    x, y, a_mat, a = vector("x"), vector("y"), matrix("A"), scalar("a")
    result = rewritten(a_mat + a * o.dot(x.dimshuffle(0, "x"), y.dimshuffle("x", 0)))
    assert isinstance(result.owner.op, o.Ger)
    result = rewritten(o.dot(a_mat, x) + y)
    assert isinstance(result.owner.op, o.Gemv)


def test_a_product_made_by_another_rewriter_is_absorbed_in_the_same_run():
    """The gemm guard reads under a neg and a mul; those reads are recorded, so it is retried.

    Before, `maximum -> dot` changed a node three levels below the sum without
    the engine knowing add_to_gemm had looked there: a second run was needed.
    """
    X, Y, Z, a = matrix("X"), matrix("Y"), matrix("Z"), scalar("a")
    fgraph = FunctionGraph([X, Y, Z, a], [o.add(Z, o.neg(o.mul(a, o.maximum(X, Y))))])
    EquilibriumRewriter([KanrenRelationSub(blas.add_to_gemm), OpSub(o.maximum, o.dot)]).rewrite(fgraph)
    assert pprint(fgraph.outputs[0]) == "gemm(Z, -a, X, Y, 1.0)"

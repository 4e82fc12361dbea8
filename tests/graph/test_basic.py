"""Variables, constants, apply nodes, ops, constructors and the iterative graph walks."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.graph import ops
from relwrite.graph.basic import (
    Apply,
    Constant,
    Op,
    Variable,
    ancestors,
    as_variable,
    clone,
    clone_get_equiv,
    constant,
    float64,
    graph_inputs,
    io_toposort,
    matrix,
    scalar,
    tensor,
    toposort_nodes,
    type_from_spec,
    vector,
)
from relwrite.graph.types import TensorType
from relwrite.testing import arrays, expression_graphs, tensor_types

ALL_DTYPES = ("bool", "int8", "int32", "int64", "uint8", "float16", "float32", "float64")


# -- variables ---------------------------------------------------------------------


def test_variables_compare_by_identity():
    x, y = vector("x"), vector("x")
    assert x == x and x != y and len({x, y}) == 2


def test_variable_rejects_bad_type_and_name():
    with pytest.raises(TypeError, match="must be a TensorType"):
        Variable("float64")
    with pytest.raises(TypeError, match="name must be a str"):
        Variable(TensorType("float64"), name=3)


def test_variable_type_shortcuts_and_clone():
    x = matrix("x", dtype="float32", shape=(2, None))
    assert (x.dtype, x.ndim, x.type.shape) == ("float32", 2, (2, None))
    y = x.clone()
    assert y is not x and y.type == x.type and y.name == "x" and y.owner is None
    assert x.clone(name="z").name == "z"


# -- constants ---------------------------------------------------------------------


@given(tensor_types(ALL_DTYPES, max_ndim=2).flatmap(lambda t: arrays(t, finite=False)))
def test_constants_equal_and_hash_by_value(value):
    a, b = constant(value), constant(value.copy())
    assert a == b and hash(a) == hash(b)
    assert a.type == TensorType(value.dtype, value.shape)
    np.testing.assert_array_equal(a.data, value)


@given(tensor_types(ALL_DTYPES, max_ndim=2).flatmap(arrays), st.data())
def test_constants_with_a_changed_element_differ(value, data):
    flat = value.reshape(-1).copy()
    k = data.draw(st.integers(0, flat.size - 1))
    flat[k] = np.nextafter(flat[k], np.inf) if flat.dtype.kind == "f" else flat[k] ^ 1
    assert constant(value) != constant(flat.reshape(value.shape))


def test_constants_differ_by_dtype_and_shape():
    assert constant(1.0) != constant(np.float32(1.0))
    assert constant(1.0) != constant(1)
    assert constant([1.0, 2.0]) != constant([[1.0, 2.0]])


def test_constant_nans_are_all_equal():
    payload = np.frombuffer(np.uint64(0x7FF8_0000_0000_0001).tobytes(), dtype=np.float64)
    assert np.isnan(payload[0])
    variants = [constant(np.nan), constant(-np.nan), constant(payload[0]), constant(np.float64("nan"))]
    for v in variants:
        assert v == variants[0] and hash(v) == hash(variants[0])
    assert constant([1.0, np.nan]) == constant([1.0, -np.nan])
    assert constant(np.float32(np.nan)) != constant(np.nan)


def test_constant_signed_zeros_differ():
    assert constant(0.0) != constant(-0.0)
    assert constant([0.0, 1.0]) != constant([-0.0, 1.0])


def test_big_constants_are_hashed_by_digest_and_still_compared_exactly():
    big = np.arange(10_000, dtype=np.float64)
    a, b = constant(big), constant(big.copy())
    assert a == b and hash(a) == hash(b)
    changed = big.copy()
    changed[-1] += 1
    assert constant(changed) != a
    assert len(a._key[2]) < 64  # the key holds a digest, not 80 kB of data
    assert constant(np.zeros(16)) != constant(np.zeros(17))


def test_constant_data_is_a_private_read_only_copy():
    source = np.array([1.0, 2.0])
    c = constant(source)
    source[0] = 5.0
    assert c.data[0] == 1.0
    with pytest.raises(ValueError, match="read-only"):
        c.data[0] = 3.0


def test_constant_clone_is_itself_and_it_is_a_variable():
    c = constant(2.0)
    assert c.clone() is c and isinstance(c, Variable) and c.owner is None


def test_constant_errors():
    with pytest.raises(TypeError, match="does not fit"):
        Constant(TensorType("float64", (3,)), [1.0, 2.0])
    with pytest.raises(TypeError, match="unsupported value 'a'"):
        constant("a")
    with pytest.raises(TypeError, match="already a graph variable"):
        constant(vector("x"))
    with pytest.raises(TypeError, match="cannot use None as a graph variable"):
        as_variable(None)


def test_constant_str():
    assert str(constant(2.0)) == "2.0"
    assert str(constant(np.nan)) == "nan"
    assert str(constant([1, 2])) == "[1, 2]"
    assert str(constant(np.zeros(20))) == "Constant{TensorType(float64, (20,))}"
    assert str(constant(1.0, name="one")) == "one"


# -- apply nodes -------------------------------------------------------------------


def test_apply_links_outputs_back_to_it():
    x = vector("x")
    node = ops.add.make_node(x, x)
    out = node.outputs[0]
    assert out.owner is node and out.index == 0 and node.out is out
    assert node.nin == 2 and node.nout == 1 and node.default_output() is out


def test_apply_rejects_non_variables_and_stolen_outputs():
    x = vector("x")
    with pytest.raises(TypeError, match="input 1 is 3"):
        Apply(ops.add, [x, 3], [vector()])
    owned = ops.neg(x)
    with pytest.raises(ValueError, match="already belongs to another node"):
        Apply(ops.neg, [x], [owned])


def test_apply_out_needs_one_output():
    x = vector("x")
    node = Apply(ops.neg, [x], [vector(), vector()])
    with pytest.raises(ValueError, match="has 2 outputs, not one"):
        node.default_output()


def test_apply_clone_and_clone_with_new_inputs():
    x, y = vector("x"), vector("y")
    node = ops.add.make_node(x, y)
    copy = node.clone()
    assert copy.op is node.op and copy.inputs == [x, y] and copy.outputs[0] is not node.outputs[0]
    same_types = node.clone_with_new_inputs([y, x])
    assert same_types.inputs == [y, x] and same_types.outputs[0].type == node.outputs[0].type
    reinferred = node.clone_with_new_inputs([matrix("A", dtype="float32"), vector("z", dtype="float32")])
    assert reinferred.outputs[0].type == TensorType("float32", (None, None))
    with pytest.raises(ValueError, match="expected 2 inputs, got 1"):
        node.clone_with_new_inputs([x])


# -- ops ---------------------------------------------------------------------------


def test_ops_are_immutable():
    with pytest.raises(AttributeError, match="immutable"):
        ops.add.nin = 3
    with pytest.raises(AttributeError, match="immutable"):
        ops.Sum(0).axis = (1,)


def test_ops_equal_and_hash_by_props():
    assert ops.Sum(0) == ops.Sum((0,)) and hash(ops.Sum(0)) == hash(ops.Sum((0,)))
    assert ops.Sum(0) != ops.Sum(1)
    assert ops.Sum(0) != ops.Mean(0)
    assert ops.Sum(None) == ops.Sum()
    assert ops.Add() == ops.add and hash(ops.Add()) == hash(ops.add)
    assert ops.add != ops.mul
    assert ops.Cast("float32") == ops.Cast(np.float32) and ops.Cast("float32") != ops.Cast("float64")
    assert ops.DimShuffle(2, (1, 0)) == ops.DimShuffle(2, [1, 0])


def test_op_props_are_checked():
    class Scale(Op):
        __props__ = ("factor",)

    assert Scale(factor=2) == Scale(factor=2) and Scale(factor=2) != Scale(factor=3)
    with pytest.raises(TypeError, match="expected props"):
        Scale()
    with pytest.raises(TypeError, match="expected props"):
        Scale(factor=2, extra=1)
    with pytest.raises(NotImplementedError, match="Scale does not define make_node"):
        Scale(factor=2)(vector("x"))


def test_op_names_and_type_error_message():
    assert ops.add.name == "add" and ops.true_div.name == "true_div"
    assert str(ops.Sum(1)) == "Sum{axis=(1,)}"
    error = ops.add.type_error([vector("x"), scalar("s", dtype="int8")], "because")
    assert str(error) == "add: because (inputs: TensorType(float64, (None,)), TensorType(int8, ()))"


def test_op_call_returns_a_variable_or_a_list_for_several_outputs():
    x = vector("x")
    assert isinstance(ops.exp(x), Variable)

    class Split(Op):
        def make_node(self, v):
            return Apply(self, [v], [v.type(), v.type()])

    outs = Split()(x)
    assert isinstance(outs, list) and len(outs) == 2


# -- operator overloading ----------------------------------------------------------

x_, y_ = vector("x"), vector("y")
BINARY_OPERATORS = [
    (lambda a, b: a + b, ops.add),
    (lambda a, b: a - b, ops.sub),
    (lambda a, b: a * b, ops.mul),
    (lambda a, b: a / b, ops.true_div),
    (lambda a, b: a**b, ops.pow),
    (lambda a, b: a < b, ops.lt),
    (lambda a, b: a <= b, ops.le),
    (lambda a, b: a > b, ops.gt),
    (lambda a, b: a >= b, ops.ge),
    (lambda a, b: a @ b, ops.dot),
    (lambda a, b: a.dot(b), ops.dot),
]


@pytest.mark.parametrize(("build", "op"), BINARY_OPERATORS)
def test_binary_operators_build_their_op(build, op):
    x, y = vector("x"), vector("y")
    out = build(x, y)
    assert out.owner.op == op and out.owner.inputs == [x, y]


@pytest.mark.parametrize(("build", "op"), BINARY_OPERATORS[:5])
def test_reflected_operators_put_the_constant_on_the_left(build, op):
    x = vector("x")
    out = build(2, x)
    assert out.owner.op == op
    left, right = out.owner.inputs
    assert left == constant(2.0) and right is x


def test_reflected_matmul_with_an_array():
    x = vector("x")
    out = np.eye(2).tolist() @ x
    assert out.owner.op == ops.dot and out.owner.inputs[1] is x
    assert out.owner.inputs[0] == constant(np.eye(2))


def test_numpy_values_on_the_left_give_variables():
    x = vector("x")
    out = np.float64(2) * x
    assert isinstance(out, Variable) and out.owner.op == ops.mul
    assert out.owner.inputs[0] == constant(2.0) and out.owner.inputs[1] is x
    out = np.array([1.0, 2.0]) + x
    assert isinstance(out, Variable) and out.owner.op == ops.add
    assert out.owner.inputs[0] == constant([1.0, 2.0])


def test_unary_operators_and_methods():
    x = vector("x")
    A = matrix("A")
    assert (-x).owner.op == ops.neg
    assert abs(x).owner.op == ops.abs
    assert A.T.owner.op == ops.DimShuffle(2, (1, 0)) and A.T.owner.op.is_transpose
    assert x.sum(0).owner.op == ops.Sum(0)
    assert A.sum().owner.op == ops.Sum(None)
    assert A.mean(1).owner.op == ops.Mean(1)
    assert A.max((0, 1)).owner.op == ops.Max((0, 1))
    assert A.reshape(-1).owner.op == ops.Reshape((-1,))
    assert A.reshape((2, -1)).owner.op == ops.Reshape((2, -1))
    assert x.dimshuffle("x", 0).owner.op == ops.DimShuffle(1, ("x", 0))
    assert x.astype("float32").owner.op == ops.Cast("float32")


def test_variadic_add_is_one_node():
    x, y, z = vector("x"), vector("y"), vector("z")
    out = ops.add(x, y, z)
    assert out.owner.inputs == [x, y, z]
    assert (x + y + z).owner.inputs[0].owner.op == ops.add  # the operator stays binary


def test_variables_are_truthy_and_comparisons_build_nodes():
    x, y = scalar("x"), scalar("y")
    assert bool(x)
    assert isinstance(x < y, Variable)


# -- constructors ------------------------------------------------------------------


def test_constructors():
    assert scalar("s").type == TensorType("float64", ())
    assert scalar("s", dtype="int32").type == TensorType("int32", ())
    assert float64("f").type == TensorType("float64", ())
    assert vector("v").type == TensorType("float64", (None,))
    assert vector("v", dtype="float32", shape=(3,)).type == TensorType("float32", (3,))
    assert matrix("m").type == TensorType("float64", (None, None))
    assert tensor("t", shape=(None, 2, 1)).type == TensorType("float64", (None, 2, 1))
    assert tensor().type == TensorType("float64", ())
    assert vector("v").name == "v" and vector().name is None
    with pytest.raises(TypeError, match="not supported"):
        vector("v", dtype="complex64")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("vector", TensorType("float64", (None,))),
        ("matrix:float32", TensorType("float32", (None, None))),
        (" matrix : int8 ", TensorType("int8", (None, None))),
        ("scalar", TensorType("float64", ())),
        ("tensor3", TensorType("float64", (None,) * 3)),
        ("tensor4:bool", TensorType("bool", (None,) * 4)),
        ("float32", TensorType("float32", ())),
        ("(3,None):float32", TensorType("float32", (3, None))),
        ("()", TensorType("float64", ())),
        (TensorType("int8", (2,)), TensorType("int8", (2,))),
    ],
)
def test_type_from_spec(spec, expected):
    assert type_from_spec(spec) == expected


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("blah", ValueError, "unknown type 'blah'"),
        ("(3,x)", ValueError, r"bad shape in type spec '\(3,x\)'"),
        ("(-1,)", ValueError, "bad shape"),
        ("vector:complex128", TypeError, "complex128 is not supported"),
        ("vector:nonsense", TypeError, "'nonsense' is not a numpy dtype"),
        (3, TypeError, "must be a string or TensorType, got 3"),
    ],
)
def test_type_from_spec_errors(spec, error, message):
    with pytest.raises(error, match=message):
        type_from_spec(spec)


# -- walks -------------------------------------------------------------------------


def _is_topological(order, inputs, outputs):
    """Every node comes after the owners of its inputs (within the subgraph), each exactly once."""
    position = {node: k for k, node in enumerate(order)}
    if len(position) != len(order):
        return False
    blocked = set(inputs)
    for node in order:
        for var in node.inputs:
            if (
                var.owner is not None
                and var not in blocked
                and position.get(var.owner, len(order)) >= position[node]
            ):
                return False
    reached = {v.owner for v in ancestors(outputs, blocked) if v.owner is not None and v not in blocked}
    return reached == set(position)


def _structure(inputs, outputs):
    """The graph as plain data: ops and wiring, with variables named by position."""
    names = {v: f"i{k}" for k, v in enumerate(inputs)}
    lines = []
    for k, node in enumerate(io_toposort(inputs, outputs)):
        args = [names.get(v, repr(v._key) if isinstance(v, Constant) else "?") for v in node.inputs]
        for j, out in enumerate(node.outputs):
            names[out] = f"n{k}.{j}"
        lines.append((node.op, tuple(args), tuple(o.type for o in node.outputs)))
    return lines, [names[o] for o in outputs]


@given(expression_graphs(max_nodes=20))
def test_io_toposort_is_a_valid_order(graph):
    inputs, output = graph
    order = io_toposort(inputs, [output])
    assert _is_topological(order, inputs, [output])
    assert order[-1] is output.owner


@given(expression_graphs(max_nodes=20), st.data())
def test_io_toposort_stops_at_intermediate_inputs(graph, data):
    _, output = graph
    inner = [v for v in ancestors([output]) if v.owner is not None]
    cut = data.draw(st.lists(st.sampled_from(inner), max_size=3, unique=True))
    order = io_toposort(cut, [output])
    assert _is_topological(order, cut, [output])
    assert not any(v.owner in order for v in cut if v is not output)


@given(expression_graphs(max_nodes=20))
def test_clone_get_equiv_copies_structure_into_a_disjoint_graph(graph):
    inputs, output = graph
    equiv = clone_get_equiv(inputs, [output])
    new_inputs, new_output = [equiv[v] for v in inputs], equiv[output]
    assert _structure(new_inputs, [new_output]) == _structure(inputs, [output])
    old_objects = {id(obj) for obj in ancestors([output])} | {id(n) for n in io_toposort(inputs, [output])}
    for var in ancestors([new_output]):
        assert isinstance(var, Constant) or id(var) not in old_objects
    new_nodes = io_toposort(new_inputs, [new_output])
    assert [equiv[node] for node in io_toposort(inputs, [output])] == new_nodes
    assert not any(id(node) in old_objects for node in new_nodes)


def test_clone_get_equiv_takes_memo_entries_for_intermediate_variables_as_given():
    """As in Aesara: a pre-seeded variable is replaced by its entry, and what only it needed is not copied."""
    x = vector("x")
    a = ops.exp(x)
    b = ops.log(a)
    out = b + ops.neg(x)
    given_b = vector("given")
    memo = {b: given_b}
    equiv = clone_get_equiv([x], [out], memo=memo)
    assert equiv is memo and equiv[b] is given_b
    new_out = equiv[out]
    assert new_out.owner.inputs[0] is given_b
    assert new_out.owner.inputs[1].owner.inputs == [equiv[x]]
    assert a not in equiv and a.owner not in equiv and b.owner not in equiv


def test_clone_get_equiv_keeps_a_memo_entry_for_one_output_of_a_node_it_must_copy():
    s, t = scalar("s"), scalar("t")
    fused = ops.Composite([s, t], [s + t, s * t])
    x, y = vector("x"), vector("y")
    first, second = fused(x, y)
    out = ops.exp(first) + ops.exp(second)
    replacement = vector("replacement")
    equiv = clone_get_equiv([x, y], [out], memo={second: replacement})
    copied = equiv[first].owner
    assert copied is not first.owner and copied.inputs == [equiv[x], equiv[y]]
    assert equiv[second] is replacement
    assert equiv[out].owner.inputs[1].owner.inputs == [replacement]


def test_clone_get_equiv_uses_a_memo_entry_for_a_node():
    x = vector("x")
    node = ops.exp(x).owner
    out = ops.neg(node.outputs[0])
    stand_in = ops.sqrt(x).owner
    equiv = clone_get_equiv([x], [out], copy_inputs=False, memo={node: stand_in})
    assert equiv[node.outputs[0]] is stand_in.outputs[0]
    assert equiv[out].owner.inputs == [stand_in.outputs[0]]


def test_clone_keeps_inputs_when_asked_and_keeps_unlisted_leaves():
    x, y = vector("x"), vector("y")
    out = ops.exp(x + y)
    (new_x,), (new_out,) = clone([x], [out], copy_inputs=False)
    assert new_x is x and new_out is not out
    assert new_out.owner.inputs[0].owner.inputs == [x, y]  # y is not listed: kept as is
    (copied_x,), _ = clone([x], [out])
    assert copied_x is not x and copied_x.type == x.type and copied_x.name == "x"


@given(expression_graphs(max_nodes=20))
def test_graph_inputs_are_the_used_inputs_in_order_of_first_appearance(graph):
    inputs, output = graph
    found = graph_inputs([output])
    used = [v for v in ancestors([output]) if v.owner is None and not isinstance(v, Constant)]
    assert found == used and set(found) <= set(inputs)


def test_graph_inputs_order_and_blockers():
    x, y, z = scalar("x"), scalar("y"), scalar("z")
    mid = y * z
    out = ops.add(mid, x, 2.0, y)
    assert graph_inputs([out]) == [y, z, x]
    assert graph_inputs([out], blockers=[mid]) == [mid, x, y]
    assert graph_inputs([x, out]) == [x, y, z]


def test_toposort_nodes_reports_cycles():
    x = scalar("x")
    a = ops.neg(x)
    b = ops.exp(a)
    a.owner.inputs[0] = b  # tamper: a <- b <- a
    with pytest.raises(ValueError, match="cycle"):
        toposort_nodes([b.owner], lambda v: False)


def test_toposort_honours_extra_orderings():
    x = scalar("x")
    a, b = ops.exp(x), ops.sin(x)
    out = ops.add(a, b)
    assert io_toposort([x], [out]) == [a.owner, b.owner, out.owner]
    assert io_toposort([x], [out], {a.owner: [b.owner]}) == [b.owner, a.owner, out.owner]


@pytest.mark.slow
def test_walks_handle_a_100000_node_chain():
    x = vector("x")
    out = x
    for k in range(100_000):
        out = ops.neg(out) if k % 2 else ops.exp(out)
    order = io_toposort([x], [out])
    assert len(order) == 100_000 and order[0].inputs[0] is x and order[-1] is out.owner
    assert graph_inputs([out]) == [x]
    assert sum(1 for _ in ancestors([out])) == 100_001
    (new_x,), (new_out,) = clone([x], [out])
    depth, var = 0, new_out
    while var.owner is not None:
        var, depth = var.owner.inputs[0], depth + 1
    assert depth == 100_000 and var is new_x

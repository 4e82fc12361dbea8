"""The hypothesis strategies users import from relwrite.testing."""

import functools

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from relwrite.graph import ops
from relwrite.graph.basic import Constant, ancestors, graph_inputs, io_toposort, vector
from relwrite.graph.types import TensorType
from relwrite.testing import DEFAULT_ELEMWISE_OPS, arrays, expression_graphs, input_values, tensor_types

DTYPES = ("bool", "int8", "uint8", "int64", "float16", "float32", "float64")


# -- tensor_types ------------------------------------------------------------------


@given(tensor_types(("int8", "float32"), max_ndim=3, max_len=5, min_ndim=1))
def test_tensor_types_respect_their_bounds(t):
    assert t.dtype in ("int8", "float32") and 1 <= t.ndim <= 3
    assert all(d is None or 1 <= d <= 5 for d in t.shape)


def test_tensor_types_reach_unknown_and_known_lengths():
    assert find(tensor_types(), lambda t: t.ndim == 2 and t.shape[0] is None and t.shape[1] is not None)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"dtypes": ()}, InvalidArgument),
        ({"dtypes": ("complex64",)}, TypeError),
        ({"max_ndim": 1, "min_ndim": 2}, InvalidArgument),
        ({"max_len": 0}, InvalidArgument),
    ],
)
def test_tensor_types_reject_bad_arguments(kwargs, error):
    with pytest.raises(error):
        tensor_types(**kwargs)


# -- arrays ------------------------------------------------------------------------


@given(tensor_types(DTYPES, max_ndim=3), st.data())
def test_arrays_are_values_of_their_type(t, data):
    value = data.draw(arrays(t, min_len=2, max_len=3))
    assert isinstance(value, np.ndarray) and t.value_error(value) is None
    assert all(2 <= n <= 3 for n, d in zip(value.shape, t.shape) if d is None)
    if value.dtype.kind == "f":
        assert np.all(np.isfinite(value)) and np.all(np.abs(value) <= 1e3)


@given(arrays("(2,None):float32", elements=st.just(7.0)))
def test_arrays_take_a_spec_and_custom_elements(value):
    assert value.dtype == np.float32 and value.shape[0] == 2 and np.all(value == 7.0)


def test_arrays_can_be_non_finite_when_asked():
    vector_type = TensorType("float64", (None,))
    assert find(arrays(vector_type, finite=False), lambda a: np.isnan(a).any())
    assert find(arrays(vector_type, finite=False), lambda a: np.isinf(a).any())


@given(arrays(TensorType("int8", (None,)), min_len=0, max_len=0))
def test_arrays_allow_empty_lengths(value):
    assert value.shape == (0,)


def test_arrays_reject_bad_lengths():
    with pytest.raises(InvalidArgument, match="min_len <= max_len"):
        arrays(TensorType("float64", (None,)), min_len=3, max_len=2)


# -- expression_graphs -------------------------------------------------------------


def _nodes(graph):
    inputs, output = graph
    return io_toposort(inputs, [output])


@given(expression_graphs(max_nodes=10))
def test_expression_graphs_type_check(graph):
    inputs, output = graph
    assert len(inputs) == 3 and all(v.type == TensorType("float64", (None,)) for v in inputs)
    assert output.owner is not None
    nodes = _nodes(graph)
    assert 1 <= len(nodes) <= 10
    assert set(graph_inputs([output])) <= set(inputs)
    for node in nodes:
        assert node.op in DEFAULT_ELEMWISE_OPS
        assert [o.type for o in node.op.make_node(*node.inputs).outputs] == [o.type for o in node.outputs]


@given(expression_graphs(ops=(ops.add, ops.exp, ops.switch, ops.lt), n_inputs=2, input_type="matrix:int8"))
def test_expression_graphs_with_other_ops_and_types(graph):
    inputs, _ = graph
    assert len(inputs) == 2 and all(v.type == TensorType("int8", (None, None)) for v in inputs)
    for node in _nodes(graph):
        assert node.op in (ops.add, ops.exp, ops.switch, ops.lt)
        assert node.op.nin is None or len(node.inputs) == node.op.nin


@given(expression_graphs(ops=(ops.neg, ops.sub, ops.exp), input_type="vector:bool"))
def test_expression_graphs_skip_operands_an_op_rejects(graph):
    """neg and sub refuse bool inputs; the graphs still type-check."""
    for node in _nodes(graph):
        node.op.make_node(*node.inputs)


def test_expression_graphs_share_subexpressions_and_use_constants():
    def shares(graph):
        nodes = _nodes(graph)
        return any(sum(v is out for n in nodes for v in n.inputs) > 1 for n in nodes for out in n.outputs)

    first = settings(phases=[Phase.generate], database=None)  # found is enough: shrinking took 9 s
    assert find(expression_graphs(), shares, settings=first)
    constants = find(
        expression_graphs(), lambda g: any(isinstance(v, Constant) for v in ancestors([g[1]])), settings=first
    )
    assert constants
    wide = find(
        expression_graphs(ops=(ops.add,)),
        lambda g: any(len(n.inputs) == 3 for n in _nodes(g)),
        settings=first,
    )
    assert wide


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ops": ()}, "at least one op"),
        ({"n_inputs": 0}, "n_inputs >= 1"),
        ({"max_nodes": 0}, "max_nodes >= 1"),
        ({"ops": (ops.dot,)}, "pass elementwise ops"),
        ({"ops": (ops.neg, ops.sub), "input_type": "vector:bool"}, "none of .* accepts inputs"),
    ],
)
def test_expression_graphs_reject_bad_arguments(kwargs, message):
    @given(expression_graphs(**kwargs))
    def draw_one(graph):
        pass

    with pytest.raises(InvalidArgument, match=message):
        draw_one()


# -- input_values ------------------------------------------------------------------


INPUT_TYPES = [
    TensorType("float64", (None, 3)),
    TensorType("int8", (None,)),
    TensorType("float32", ()),
    TensorType("bool", (1, None)),
    TensorType("float64", (None, None, None)),
]


def _inputs_with_values(types):
    inputs = [t() for t in types]
    return st.tuples(st.just(inputs), input_values(inputs))


@given(st.lists(st.sampled_from(INPUT_TYPES), min_size=1, max_size=4).flatmap(_inputs_with_values))
def test_input_values_fit_their_types_and_broadcast(case):
    inputs, values = case
    assert len(values) == len(inputs)
    for var, value in zip(inputs, values):
        assert var.type.value_error(value) is None
    np.broadcast_shapes(*(v.shape for v in values))


NUMPY_OF = {
    ops.add: lambda *a: functools.reduce(np.add, a),
    ops.mul: lambda *a: functools.reduce(np.multiply, a),
    ops.sub: np.subtract,
    ops.true_div: np.true_divide,
    ops.neg: np.negative,
    ops.exp: np.exp,
    ops.log: np.log,
    ops.sqrt: np.sqrt,
    ops.sqr: np.square,
    ops.tanh: np.tanh,
    ops.sin: np.sin,
    ops.cos: np.cos,
    ops.abs: np.absolute,
    ops.maximum: np.maximum,
}


@given(st.data())
def test_generated_graphs_evaluate_on_input_values(data):
    """Values from input_values fit the graph: evaluating it gives an array of the output's type."""
    assert set(NUMPY_OF) == set(DEFAULT_ELEMWISE_OPS)
    inputs, output = data.draw(expression_graphs(input_type="(None,3)", max_nodes=8))
    values = data.draw(input_values(inputs))
    env = dict(zip(inputs, values))
    with np.errstate(all="ignore"):
        for node in io_toposort(inputs, [output]):
            args = [v.data if isinstance(v, Constant) else env[v] for v in node.inputs]
            env[node.outputs[0]] = np.asarray(NUMPY_OF[node.op](*args))
    result = env[output]
    assert result.dtype == output.dtype and result.ndim == output.ndim
    assert all(s is None or s == n for s, n in zip(output.type.shape, result.shape))


@given(input_values([vector("x", shape=(3,)), vector("y", shape=(4,)), vector("z")]))
def test_input_values_keep_static_lengths_even_when_they_clash(values):
    assert [v.shape for v in values] == [(3,), (4,), (3,)]


@given(input_values([vector("x"), vector("y")], elements=st.just(1.5), min_len=5, max_len=5))
def test_input_values_pass_elements_and_lengths_through(values):
    assert all(v.shape == (5,) and np.all(v == 1.5) for v in values)


def test_ac_text_ignores_the_order_of_sums_and_products_only():
    from relwrite.graph import ops as o
    from relwrite.graph.basic import vector
    from relwrite.testing import ac_text

    x, y, z = vector("x"), vector("y"), vector("z")
    assert ac_text(o.exp(x + y * z)) == ac_text(o.exp(z * y + x))
    assert ac_text(x - y) != ac_text(y - x)
    deep = x
    for _ in range(3_000):  # past the recursion limit; the text itself grows quadratically
        deep = o.exp(deep)
    assert ac_text(deep).startswith("exp(exp(")

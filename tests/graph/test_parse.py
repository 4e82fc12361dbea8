"""The text front end: what each construct builds, round trips through pprint, and every error."""

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.graph import ops
from relwrite.graph.basic import Constant, Variable, float64, matrix, vector
from relwrite.graph.parse import FUNCTIONS, parse
from relwrite.graph.printing import pprint
from relwrite.graph.types import TensorType


def same_structure(a: Variable, b: Variable) -> bool:
    """True when both graphs apply equal ops to the same leaves (constants: equal values), iteratively."""
    stack, seen = [(a, b)], set()
    while stack:
        left, right = stack.pop()
        if (id(left), id(right)) in seen:
            continue
        seen.add((id(left), id(right)))
        if left.owner is None or right.owner is None:
            if isinstance(left, Constant) or isinstance(right, Constant):
                if left != right:
                    return False
            elif left is not right:
                return False
            continue
        if (
            left.owner.op != right.owner.op
            or left.index != right.index
            or len(left.owner.inputs) != len(right.owner.inputs)
        ):
            return False
        stack.extend(zip(left.owner.inputs, right.owner.inputs))
    return True


# -- what each construct builds ---------------------------------------------------------------------


def test_names_default_to_float64_scalars_and_repeat_as_one_variable():
    out = parse("x * y + x")
    assert out.type == TensorType("float64", ())
    mul_node = out.owner.inputs[0].owner
    x, y = mul_node.inputs
    assert (x.name, y.name) == ("x", "y")
    assert out.owner.inputs[1] is x


def test_types_from_specs_tensor_types_and_variables():
    A = matrix("A")
    out = parse("A @ v + w", types={"A": A, "v": "(3,None):float32", "w": TensorType("float64", (None,))})
    dot_node = out.owner.inputs[0].owner
    assert dot_node.inputs[0] is A
    assert dot_node.inputs[1].type == TensorType("float32", (3, None))
    assert out.owner.inputs[1].type == TensorType("float64", (None,))
    assert parse("m", types={"m": "matrix:float32"}).type == TensorType("float32", (None, None))


def test_a_variable_in_types_may_be_a_subexpression():
    x = float64("x")
    shared = ops.exp(x)
    out = parse("e + e", types={"e": shared})
    assert out.owner.inputs == [shared, shared]


@pytest.mark.parametrize(
    ("text", "op"),
    [
        ("x - y", ops.sub),
        ("x / y", ops.true_div),
        ("x ** y", ops.pow),
        ("x < y", ops.lt),
        ("x <= y", ops.le),
        ("x > y", ops.gt),
        ("x >= y", ops.ge),
        ("x == y", ops.eq),
        ("x != y", ops.neq),
        ("maximum(x, y)", ops.maximum),
        ("minimum(x, y)", ops.minimum),
        ("sub(x, y)", ops.sub),
        ("true_div(x, y)", ops.true_div),
        ("pow(x, y)", ops.pow),
        ("fill(x, y)", ops.fill),
        ("hypot(x, y)", ops.hypot),
        ("atan2(x, y)", ops.atan2),
    ],
)
def test_binary_operators_and_functions(text, op):
    out = parse(text)
    assert out.owner.op == op
    assert [v.name for v in out.owner.inputs] == ["x", "y"]


UNARY_ELEMWISE = ("exp", "log", "log1p", "expm1", "sqrt", "sqr", "reciprocal", "sin", "cos", "tanh", "abs")
UNARY_ELEMWISE += ("tan", "asin", "acos", "atan", "sinh", "cosh", "cbrt", "erf", "erfc", "log1mexp")


@pytest.mark.parametrize("name", (*UNARY_ELEMWISE, "sigmoid", "softplus", "identity", "neg"))
def test_unary_functions(name):
    out = parse(f"{name}(x)")
    assert out.owner.op == getattr(ops, name)
    assert out.owner.inputs[0].name == "x"


def test_matmul_dot_transpose_and_methods():
    types = {"A": "matrix", "x": "vector"}
    assert pprint(parse("A @ x", types=types)) == "(A @ x)"
    assert pprint(parse("dot(A, x)", types=types)) == "(A @ x)"
    assert pprint(parse("A.dot(x)", types=types)) == "(A @ x)"
    assert pprint(parse("A.T", types=types)) == "A.T"
    assert pprint(parse("transpose(A)", types=types)) == "A.T"
    assert pprint(parse("A.T.dot(x).sum(axis=0)", types=types)) == "sum((A.T @ x), axis=(0,))"


def test_reductions_and_softmax_take_axis_keywords():
    types = {"A": "matrix"}
    assert parse("sum(A)", types).owner.op == ops.Sum(None)
    assert parse("sum(A, axis=None)", types).owner.op == ops.Sum(None)
    assert parse("sum(A, axis=1)", types).owner.op == ops.Sum(1)
    assert parse("mean(A, axis=(0, -1))", types).owner.op == ops.Mean((0, -1))
    assert parse("max(A, axis=-1)", types).owner.op == ops.Max(-1)
    assert parse("A.mean(axis=0)", types).owner.op == ops.Mean(0)
    assert parse("A.max()", types).owner.op == ops.Max(None)
    assert parse("softmax(A)", types).owner.op == ops.Softmax(-1)
    assert parse("log_softmax(A, axis=0)", types).owner.op == ops.LogSoftmax(0)


def test_reductions_take_keepdims_as_pytensor_does():
    types = {"A": "matrix"}
    kept = parse("sum(A, axis=1, keepdims=True)", types)
    assert kept.type.shape == (None, 1)
    assert kept.owner.op == ops.DimShuffle(1, (0, "x")) and kept.owner.inputs[0].owner.op == ops.Sum(1)
    assert parse("A.max(axis=-2, keepdims=True)", types).owner.op == ops.DimShuffle(1, ("x", 0))
    assert parse("prod(A, keepdims=True)", types).type.shape == (1, 1)
    assert parse("mean(A, axis=0, keepdims=False)", types).owner.op == ops.Mean(0)
    assert parse("logsumexp(A, axis=0, keepdims=True)", types).owner.inputs[0].owner.op == ops.LogSumExp(0)
    a = TensorType("float64", (2, 3))("a")
    for axis in (0, 1, -1, None, (0, 1)):
        assert (
            ops.min(a, axis=axis, keepdims=True).type.shape == np.zeros((2, 3)).min(axis, keepdims=True).shape
        )


def test_switch_and_like_helpers():
    out = parse("switch(x < y, x, y)")
    assert out.owner.op == ops.switch
    assert out.owner.inputs[0].owner.op == ops.lt
    assert pprint(parse("ones_like(x)")) == "fill(x, 1.0)"
    assert pprint(parse("zeros_like(x)")) == "fill(x, 0.0)"


def test_unparenthesised_chains_of_add_and_mul_are_variadic():
    assert pprint(parse("x + y + z")) == "(x + y + z)"
    assert pprint(parse("x * y * z * w")) == "(x * y * z * w)"
    assert pprint(parse("(x + y) + z")) == "((x + y) + z)"
    assert pprint(parse("x + (y + z)")) == "(x + (y + z))"
    assert pprint(parse("((x + y + z))")) == "(x + y + z)"
    assert pprint(parse("x - y - z")) == "((x - y) - z)"
    assert pprint(parse("x + y - z + w")) == "(((x + y) - z) + w)"
    assert pprint(parse("add(x)")) == "add(x)"
    assert pprint(parse("mul(x, y, z)")) == "(x * y * z)"


def test_unary_minus_on_a_literal_is_a_negative_constant():
    out = parse("x * -2.0")
    assert out.owner.inputs[1] == Constant(TensorType("float64", ()), -2.0)
    spaced = parse("x * - 2.0")
    assert spaced.owner.inputs[1] == Constant(TensorType("float64", ()), -2.0)
    assert parse("-(2.0)") == Constant(TensorType("float64", ()), -2.0)  # as Python computes it
    negated = parse("neg(2.0)")
    assert negated.owner.op == ops.neg
    assert negated.owner.inputs[0] == Constant(TensorType("float64", ()), 2.0)
    assert parse("-x").owner.op == ops.neg
    assert pprint(parse("-x ** 2")) == "-(x ** 2.0)"
    assert pprint(parse("(-2) ** x")) == "((-2.0) ** x)"
    assert parse("+x").name == "x"


def test_literals_take_numpy_dtypes_next_to_their_operands():
    assert parse("2").type == TensorType("int64", ())
    assert parse("2 + 3").type == TensorType("int64", ())
    assert parse("2.5").type == TensorType("float64", ())
    out = parse("v * 2", types={"v": "vector:float32"})
    assert out.owner.inputs[1] == Constant(TensorType("float32", ()), 2.0)
    assert parse("exp(2)").owner.inputs[0] == Constant(TensorType("int64", ()), 2)


def test_leading_whitespace_and_parenthesised_newlines_are_accepted():
    assert pprint(parse("  \n  x + y")) == "(x + y)"
    assert pprint(parse("(x +\n y)")) == "(x + y)"


def test_nested_expressions_up_to_the_parser_limit():
    deep_calls = "exp(" * 150 + "x" + ")" * 150
    out = parse(deep_calls)
    depth = 0
    while out.owner is not None:
        out, depth = out.owner.inputs[0], depth + 1
    assert depth == 150
    long_chain = parse(" - ".join(["x"] * 2000))  # 1,999 nested subtractions, walked without recursion
    assert pprint(long_chain).startswith("(" * 1999 + "x - x)")


# -- round trips --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "(A @ (x + y))",
        "((A @ x) + (A @ y))",
        "(A @ ((x + y) + (z + w)))",
        "(((A @ x) + (A @ y)) + ((A @ z) + (A @ w)))",
        "(A @ (x + (y + ((B @ z) + (B @ w)))))",
        "((A @ x) + ((A @ y) + ((A @ (B @ z)) + (A @ (B @ w)))))",
        "(A @ (x + (y + (B @ (z + w)))))",
    ],
)
def test_seed_printouts_read_back(text):
    types = {"A": "matrix", "B": "matrix", "x": "vector", "y": "vector", "z": "vector", "w": "vector"}
    assert pprint(parse(text, types)) == text


INPUTS = {name: float64(name) for name in "xyz"}
literals = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
)


@st.composite
def expression_graphs(draw):
    """Random graphs of arithmetic and elementwise functions over x, y, z and literals, with shared
    subterms."""
    pool = list(INPUTS.values())
    unary = ["neg", "exp", "tan", "asin", "acos", "atan", "sinh", "cosh", "cbrt"]
    binary = ["sub", "true_div", "pow", "hypot", "atan2"]
    for _ in range(draw(st.integers(1, 8))):
        operand = st.one_of(st.sampled_from(list(pool)), literals)
        kind = draw(st.sampled_from(["add", "mul", "fma", *binary, *unary]))
        if kind in ("add", "mul"):
            args = draw(st.lists(operand, min_size=1, max_size=3))
        elif kind in unary:
            args = [draw(operand)]
        elif kind == "fma":
            args = [draw(operand) for _ in range(3)]
        else:
            args = [draw(operand), draw(operand)]
        pool.append(getattr(ops, kind)(*args))
    return pool[-1]


@given(expression_graphs())
def test_parse_reads_back_what_pprint_writes(graph):
    text = pprint(graph)
    rebuilt = parse(text, types=INPUTS)
    assert same_structure(graph, rebuilt), (text, pprint(rebuilt))
    assert pprint(rebuilt) == text


# -- errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lambda: x", "parse: unsupported syntax 'Lambda' at column 1"),
        ("x + (lambda: 1)", "parse: unsupported syntax 'Lambda' at column 6"),
        ("[x]", "parse: an array literal holds numbers only at column 2"),
        (
            "x[0]",
            "parse: Subtensor{int}: too many indices (1) for 0 dimension(s) (inputs: "
            "TensorType(float64, ()), TensorType(int64, ())) at column 1",
        ),
        ("x[1.5]", "parse: indexing: index 1.5 is not an integer or a graph variable at column 1"),
        ("x if y else z", "parse: unsupported syntax 'IfExp' at column 1"),
        ("(x, y)", "parse: unsupported syntax 'Tuple' at column 1"),
        ("x // y", "parse: unsupported operator 'FloorDiv' at column 1"),
        ("x % y", "parse: unsupported operator 'Mod' at column 1"),
        ("not x", "parse: unsupported operator 'Not' at column 1"),
        ("~x", "parse: unsupported operator 'Invert' at column 1"),
        ("x in y", "parse: unsupported operator 'In' at column 1"),
        ("x < y < z", "parse: chained comparison (use one comparison per expression) at column 1"),
        ("x.foo", "parse: unsupported attribute '.foo' at column 1"),
        ("foo(x)", "parse: unknown function 'foo' at column 1"),
        ("x + x.bar()", "parse: unknown method '.bar' at column 5"),
        ("f(x)(y)", "parse: unsupported call of 'Call' at column 1"),
        ("exp(*x)", "parse: exp: unsupported *arguments at column 5"),
        ("exp(**x)", "parse: exp: unsupported **arguments at column 7"),
        ("sum(x, keepdims=1)", "parse: sum: keepdims must be True or False at column 17"),
        ("argmax(x, keepdims=True)", "parse: argmax: unexpected keyword 'keepdims' at column 20"),
        ("exp(x, axis=1)", "parse: exp: unexpected keyword 'axis' at column 13"),
        ("sum(x, axis=x)", "parse: axis must be an int, a tuple of ints or None at column 13"),
        ("sum(x, axis=(0, 1.5))", "parse: axis must be an int, a tuple of ints or None at column 17"),
        ("exp(x, y)", "parse: exp takes 1 operand(s), got 2 at column 1"),
        ("x.dot()", "parse: dot takes 2 operand(s), got 1 at column 1"),
        ("add()", "parse: add takes one or more operand(s), got 0 at column 1"),
        ("None", "parse: unsupported literal None at column 1"),
        ("x + 'a'", "parse: unsupported literal 'a' at column 5"),
        ("2j", "parse: unsupported literal 2j at column 1"),
        ("(x +\n  x.foo)", "parse: unsupported attribute '.foo' at line 2, column 3"),
        ("  \n   x.foo", "parse: unsupported attribute '.foo' at line 2, column 4"),
        ("x + é.foo", "parse: unsupported attribute '.foo' at column 5"),
    ],
)
def test_unsupported_text_names_the_offending_piece(text, message):
    with pytest.raises(ValueError) as info:
        parse(text)
    assert str(info.value) == message


@pytest.mark.parametrize("text", ["x +", "x +* y", "", "(x", "x = 1"])
def test_text_that_is_not_python_is_a_syntax_error(text):
    with pytest.raises(SyntaxError):
        parse(text)


def test_syntax_error_positions_count_the_skipped_indentation():
    with pytest.raises(SyntaxError) as info:
        parse("\n   x +* y")
    assert (info.value.lineno, info.value.offset) == (2, 7)


def test_too_many_nested_parentheses_is_pythons_syntax_error():
    with pytest.raises(SyntaxError, match="too many nested parentheses"):
        parse("exp(" * 250 + "x" + ")" * 250)


def test_chains_beyond_pythons_parser_are_a_value_error():
    with pytest.raises(ValueError, match="nested too deeply for Python's parser"):
        parse(" + ".join(["x"] * 100_000))


def test_bad_type_specs_name_the_variable():
    with pytest.raises(ValueError, match=r"^parse: name 'x' has unknown type spec 'vec': unknown type 'vec'"):
        parse("x", types={"x": "vec"})
    with pytest.raises(ValueError, match=r"^parse: name 'x' has unknown type spec 'vector:complex64': "):
        parse("x", types={"x": "vector:complex64"})
    with pytest.raises(ValueError, match=r"^parse: name 'y' has unknown type spec '\(3,n\)': bad shape"):
        parse("x", types={"y": "(3,n)"})
    with pytest.raises(TypeError, match="name 'x' maps to 3, not a type spec"):
        parse("x", types={"x": 3})
    with pytest.raises(TypeError, match="type names must be strings"):
        parse("x", types={1: "vector"})


def test_text_must_be_a_string():
    with pytest.raises(TypeError, match="expected the expression as a str, got bytes"):
        parse(b"x")


def test_type_errors_from_ops_propagate():
    with pytest.raises(TypeError, match="dot: inputs must be vectors or matrices"):
        parse("A @ t", types={"A": "matrix", "t": "tensor3"})
    with pytest.raises(TypeError, match="condition must be bool"):
        parse("switch(x, y, z)")
    with pytest.raises(TypeError, match="Softmax: axis must be an int"):
        parse("softmax(v, axis=(0,))", types={"v": vector("v")})


def test_calls_with_a_static_shape_or_dtype():
    from relwrite.graph.parse import parse

    assert parse("x.reshape(3, 2).reshape(6)", {"x": "(6,)"}).type.shape == (6,)
    assert parse("reshape(x, (2, 3))", {"x": "(6,)"}).type.shape == (2, 3)
    assert parse("alloc(x, 2, 3)").type.shape == (2, 3)
    assert parse('x.astype("float32")').dtype == "float32"
    assert parse('cast(x, "int8")').dtype == "int8"
    for text, message in [
        ("x.astype(3)", "the dtype must be one string"),
        ("alloc(x)", "alloc needs a shape after its operand"),
        ("reshape(x, y)", "the shape must be ints, or a tuple of them"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse(text)


def test_the_docs_list_every_function():
    """docs/expressions.md names every function the language knows (and nothing else)."""
    text = (Path(__file__).parents[2] / "docs" / "expressions.md").read_text()
    listing = text[text.index("Functions: ") : text.index("Methods: ")]
    named = set(re.findall(r"`([a-z_0-9]+)[`(]", listing))
    assert named == set(FUNCTIONS)


def test_dimshuffle_takes_axes_and_new_ones_as_a_function_and_a_method():
    v, m = vector("v"), matrix("m")
    column = parse("v.dimshuffle(0, 'x')", {"v": v})
    assert isinstance(column.owner.op, ops.DimShuffle) and column.owner.op.new_order == (0, "x")
    assert column.type.shape == (None, 1)
    turned = parse("dimshuffle(m, ('x', 1, 0))", {"m": m})
    assert turned.owner.op.new_order == ("x", 1, 0) and turned.ndim == 3
    with pytest.raises(ValueError, match="the order must be axes and 'x'"):
        parse("v.dimshuffle('y')", {"v": v})
    with pytest.raises(ValueError, match="bad order"):
        parse("v.dimshuffle(3)", {"v": v})


def test_array_literals_read_as_printing_shows_them():
    m = matrix("m", shape=(2, 2))
    grid = parse("m + [[1.0, 2.0], [3.0, -4.0]]", {"m": m}).owner.inputs[1]
    assert isinstance(grid, Constant) and grid.dtype == "float64" and grid.data.tolist() == [[1, 2], [3, -4]]
    ints = parse("[1, -2] * v", {"v": vector("v")}).owner.inputs[0]
    assert ints.dtype == "int64" and ints.data.tolist() == [1, -2]
    assert pprint(parse(pprint(parse("m - [[1.0, 2.0], [3.0, 4.0]]", {"m": m})), {"m": m})) == pprint(
        parse("m - [[1.0, 2.0], [3.0, 4.0]]", {"m": m})
    )
    for text, why in [
        ("[[1.0], [2.0, 3.0]] + m", "rectangular"),
        ("[x] + m", "numbers only"),
        ("[True] + m", "numbers only"),
        ("[] + m", "not empty"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse(text, {"m": m, "x": float64("x")})

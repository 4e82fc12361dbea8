"""Python numbers in graphs follow NumPy 2's weak-scalar rule (NEP 50), and literal arithmetic is Python's.

A Python int or float next to a tensor takes the tensor's dtype kind; one that
dtype cannot hold is a LiteralOverflowError (an OverflowError, as NumPy 2 raises,
and a ValueError, as the command line reports), never a wrapped or widened value.
The parser computes arithmetic between literals as Python does, so `10**400 * x`
is refused rather than folded to `0 * x`.  A differential property test runs
random programs mixing dtypes and literals through NumPy and through graphs.
"""

import operator
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.backends.numpy.function import numpy_function
from relwrite.cli import main
from relwrite.compile.function import function
from relwrite.graph import ops
from relwrite.graph.basic import Constant, Variable, as_variable, constant, tensor, vector
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.graph.types import LiteralOverflowError, TensorType

# -- the repros ------------------------------------------------------------------------------------


def test_a_literal_beyond_float64_is_refused_by_name():
    with pytest.raises(
        LiteralOverflowError, match=r"100000000000\.\.\. \(401 digits\) overflows float64"
    ) as info:
        parse("10**400 * x")
    assert isinstance(info.value, OverflowError) and isinstance(info.value, ValueError)
    assert "column 1" in str(info.value)


def test_the_command_line_reports_an_overflowing_literal_in_one_line(capsys):
    assert main(["rewrite", "10**400 * x"]) != 0
    err = capsys.readouterr().err.strip()
    assert "401 digits" in err and "float64" in err and "\n" not in err


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run"])
@pytest.mark.parametrize(
    ("text", "value"),
    [("2**63 + x", 2.0**63), ("2**64 + x", 2.0**64), ("99999999999999999999999999999 + x", 1e29)],
)
def test_integer_literals_next_to_a_float_are_converted_not_wrapped(text, value, mode):
    out = parse(text)
    assert out.owner.inputs[0] == Constant(TensorType("float64", ()), value)
    x = out.owner.inputs[1]
    f = function([x], out, mode=mode)
    assert f.fgraph.outputs[0] is not f.fgraph.inputs[0]  # `2**64 + x` used to compile to `x`
    assert f(1.5) == value + 1.5


def test_an_int8_tensor_plus_an_out_of_range_int_raises_as_numpy_2():
    v = vector("v", dtype="int8")
    for build in (
        lambda: v + 300,
        lambda: 300 + v,
        lambda: ops.add(v, 300),
        lambda: parse("v + 300", {"v": v}),
    ):
        with pytest.raises(LiteralOverflowError, match="300 is out of bounds for int8"):
            build()
    with pytest.raises(OverflowError, match="300 out of bounds for int8"):
        np.zeros(2, np.int8) + 300


# -- the weak-scalar rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "literal", "expected"),
    [
        ("int8", 3, "int8"),
        ("uint8", 255, "uint8"),
        ("float32", 3, "float32"),
        ("float16", 2**10, "float16"),
        ("int8", 0.5, "float64"),
        ("bool", 3, "int64"),
        ("bool", True, "bool"),
        ("int16", True, "int16"),
        ("float32", 2**64, "float32"),
    ],
)
def test_a_literal_takes_its_tensor_partners_dtype_kind(dtype, literal, expected):
    x = vector("x", dtype=dtype)
    reference = np.result_type(np.zeros(1, dtype), literal).name
    assert expected == reference
    for out in (x + literal, literal + x, ops.maximum(x, literal), parse("x + 3", {"x": x})):
        assert out.owner.inputs[0].dtype == reference or out.owner.inputs[1].dtype in (reference, dtype)
    assert (x + literal).dtype == reference


def test_a_literal_alone_gets_numpys_default_dtype():
    assert as_variable(3).type == TensorType("int64", ())
    assert as_variable(0.5).type == TensorType("float64", ())
    assert parse("2 + 3") == Constant(TensorType("int64", ()), 5)
    with pytest.raises(LiteralOverflowError, match="9223372036854775808 is out of bounds for int64"):
        as_variable(2**63)
    with pytest.raises(LiteralOverflowError, match="out of bounds for int64"):
        parse("2**64")
    assert parse("2.0**64") == Constant(TensorType("float64", ()), 2.0**64)


def test_explicit_constants_keep_numpys_array_dtype_and_refuse_clearly():
    assert constant(2**63).dtype == "uint64"  # np.asarray's choice
    with pytest.raises(LiteralOverflowError, match="too large for any integer dtype"):
        constant(2**70)
    with pytest.raises(LiteralOverflowError, match=r"\(401 digits\) does not fit float64"):
        constant(10**400, dtype="float64")


def test_comparisons_keep_out_of_range_ints_exact_as_numpy_2():
    x = vector("x", dtype="int8")
    out = x < 1000
    assert out.owner.inputs[1].type == TensorType("int64", ())
    values = np.array([-128, 127], np.int8)
    np.testing.assert_array_equal(numpy_function([x], out)(values), values < 1000)
    with pytest.raises(LiteralOverflowError, match="out of bounds for int8"):
        ops.lt(x, 2**64)  # beyond int64: refused, where NumPy compares exactly


def test_integer_true_division_takes_a_literal_its_float64_loop_holds():
    """NumPy 2 divides integers in float64, converting the literal there: `int8 / 300` is fine."""
    x = vector("x", dtype="int8")
    assert (x / 4).owner.inputs[1] == Constant(TensorType("int8", ()), 4)
    out = x / 300
    assert out.owner.inputs[1] == Constant(TensorType("float64", ()), 300.0)
    values = np.array([-128, 127], np.int8)
    np.testing.assert_array_equal(numpy_function([x], out)(values), values / 300)
    with pytest.raises(LiteralOverflowError, match="overflows float64"):
        x / 10**400


# -- literal arithmetic in the parser ---------------------------------------------------------------------


def test_literal_arithmetic_is_pythons_before_the_weak_rule_applies():
    v = vector("v", dtype="float32")
    assert parse("(1 / 3) * v", {"v": v}).owner.inputs[0] == Constant(TensorType("float32", ()), 1 / 3)
    assert pprint(parse("2 * 3 * x")) == "(6.0 * x)"
    assert pprint(parse("x * 2 * 3")) == "(x * 2.0 * 3.0)"  # (x * 2) * 3, as Python groups it
    assert parse("-(2.0)") == Constant(TensorType("float64", ()), -2.0)
    i = vector("i", dtype="int8")
    assert parse("(200 - 100) + i", {"i": i}).owner.inputs[0] == Constant(TensorType("int8", ()), 100)
    with pytest.raises(LiteralOverflowError, match="200 is out of bounds for int8"):
        parse("100 + 100 + i", {"i": i})  # (100 + 100) + i in Python too


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("1 / 0 + x", ValueError, r"parse: 1 / 0 divides by zero at column 1"),
        ("(-8) ** 0.5", ValueError, r"parse: \(-8\) \*\* 0.5 is not a real number at column 1"),
        (
            "10 ** 10 ** 10",
            LiteralOverflowError,
            r"10 \*\* 10000000000 is an integer of more than 65536 bits",
        ),
        ("x + 10.0 ** 400", LiteralOverflowError, r"10.0 \*\* 400 overflows.*\(at column 5\)"),
        ("10 ** 400 / 3 + x", LiteralOverflowError, r"/ 3 overflows"),
    ],
)
def test_literal_arithmetic_that_python_refuses_is_an_error_naming_it(text, error, message):
    with pytest.raises(error, match=message):
        parse(text)


@given(st.integers(-(2**70), 2**70), st.integers(-(2**70), 2**70), st.sampled_from(["+", "-", "*"]))
def test_a_pprinted_node_of_two_literals_reads_back_as_that_node(a, b, symbol):
    op = {"+": ops.add, "-": ops.sub, "*": ops.mul}[symbol]
    node = op(constant(float(a)), constant(float(b)))
    assert pprint(parse(pprint(node))) == pprint(node)
    assert parse(pprint(node)).owner.op == op


# -- differential: graphs against NumPy 2 --------------------------------------------------------------

TENSOR_DTYPES = (
    "bool",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "uint64",
    "float16",
    "float32",
    "float64",
)
LITERALS = (0, 1, -1, 3, 127, 128, -129, 255, 256, 2**31, 2**63 - 1, 2**63, 2**64, 10**30, True, False)
LITERALS += (0.5, -0.0, 3.5e38, 1e39, 1e300, float("inf"), float("nan"))
BINARY = [  # graph op, NumPy's function, the Python operator both overload
    (ops.add, np.add, operator.add),
    (ops.sub, np.subtract, operator.sub),
    (ops.mul, np.multiply, operator.mul),
    (ops.true_div, np.true_divide, operator.truediv),
    (ops.pow, np.power, operator.pow),
    (ops.maximum, np.maximum, None),
    (ops.minimum, np.minimum, None),
    (ops.lt, np.less, operator.lt),
    (ops.ge, np.greater_equal, operator.ge),
    (ops.eq, np.equal, None),
]
UNARY = [(ops.neg, np.negative), (ops.abs, np.absolute), (ops.exp, np.exp), (ops.sqrt, np.sqrt)]


def _numpy(fn, *args):
    """NumPy 2's outcome: ("ok", value), "overflow" (raised, or warned casting a literal), or the error."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore", over="warn"):
        warnings.simplefilter("always")
        try:
            value = fn(*args)
        except OverflowError:
            return "overflow", None
        except TypeError:
            return TypeError, None
        except ValueError:
            return ValueError, None
    if any("overflow encountered in cast" in str(w.message) for w in caught):
        return "overflow", None
    return "ok", np.asarray(value)


def _graph(fn, *args):
    try:
        return "ok", fn(*args)
    except LiteralOverflowError:
        return "overflow", None
    except TypeError:
        return TypeError, None


def _compares_a_huge_int(op, args) -> bool:
    """NumPy 2 compares ints beyond int64 exactly; relwrite refuses them (a documented difference)."""
    return op in (ops.lt, ops.ge, ops.eq) and any(
        isinstance(a, int) and not isinstance(a, bool) and not -(2**63) <= a < 2**63 for a in args
    )


REFERENCES = st.integers(0, 9).map(lambda k: ("ref", k))  # an input or an earlier result


@st.composite
def programs(draw):
    """Tensors of mixed dtypes and steps applying ops to them, to earlier results and to Python literals."""
    dtypes = draw(st.lists(st.sampled_from(TENSOR_DTYPES), min_size=3, max_size=3))
    shapes = draw(st.lists(st.sampled_from([(), (2,)]), min_size=3, max_size=3))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 3)) == 0:
            steps.append((draw(st.sampled_from(UNARY)), [draw(REFERENCES)], False))
        else:
            operands = draw(st.lists(REFERENCES | st.sampled_from(LITERALS), min_size=2, max_size=2))
            steps.append((draw(st.sampled_from(BINARY)), operands, draw(st.booleans())))
    return dtypes, shapes, steps


@given(programs())
def test_graphs_type_and_compute_python_literals_as_numpy_2(program):
    dtypes, shapes, steps = program
    inputs = [tensor(f"t{k}", dtype=d, shape=s) for k, (d, s) in enumerate(zip(dtypes, shapes))]
    arrays = [np.arange(1, 1 + int(np.prod(s))).reshape(s).astype(d) for d, s in zip(dtypes, shapes)]
    pool: list[tuple[Variable, np.ndarray]] = list(zip(inputs, arrays))
    built: list[tuple[Variable, np.ndarray]] = []
    for (op, reference, *symbol), operands, use_operator in steps:
        picked = [pool[o[1] % len(pool)] if isinstance(o, tuple) else (o, o) for o in operands]
        graph_args, numpy_args = [p[0] for p in picked], [p[1] for p in picked]
        literals = [a for a in graph_args if not isinstance(a, Variable)]
        build = op
        if use_operator and symbol and symbol[0] is not None and len(literals) < 2:
            build = reference = symbol[0]  # `x + 3`, `3 + x` on both sides
        want = _numpy(reference, *numpy_args)
        got = _graph(build, *graph_args)
        if got[0] == "overflow" and want[0] == "ok" and _compares_a_huge_int(op, literals):
            continue
        if want[0] is ValueError:  # integers to negative integer powers: refused when evaluated
            assert got[0] == "ok", (op, operands, got)
            with pytest.raises(Exception, match="negative integer powers"), np.errstate(all="ignore"):
                numpy_function(inputs, got[1])(*arrays)
            return
        assert got[0] == want[0], f"{op}{tuple(operands)}: NumPy 2 gives {want[0]}, the graph {got[0]}"
        if got[0] == "ok":
            var, value = got[1], want[1]
            assert var.dtype == value.dtype.name, (
                f"{op}{tuple(operands)}: typed {var.type}, NumPy gives {value.dtype}"
            )
            pool.append((var, value))
            built.append((var, value))
    if built:
        with np.errstate(all="ignore"):
            results = numpy_function(inputs, [var for var, _ in built])(*arrays)
        for (var, value), result in zip(built, results):
            assert result.dtype == value.dtype
            np.testing.assert_array_equal(result, value, err_msg=str(var))

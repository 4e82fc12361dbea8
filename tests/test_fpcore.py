"""FPCore in and out (relwrite.interop.fpcore) and preconditions (relwrite.engine.explore.precondition).

The Hamming benchmarks in tests/data/hamming are Herbie's (MIT license, kept there in LICENSE).
"""

import ctypes
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite.backends.numpy.function import numpy_function
from relwrite.engine.explore.precondition import (
    And,
    Call,
    Compare,
    Not,
    Num,
    Or,
    Precondition,
    PreconditionError,
    Truth,
    Var,
    parse_precondition,
)
from relwrite.graph import ops
from relwrite.graph.basic import scalar
from relwrite.graph.printing import graph_repr
from relwrite.interop.fpcore import (
    Benchmark,
    FPCoreError,
    read_data,
    read_fpcore,
    read_fpcores,
    to_c,
    to_fpcore,
    to_python,
)

HAMMING = sorted((Path(__file__).parent / "data" / "hamming").glob("*.fpcore"))
MISSING = re.compile(r"operation '([^']+)' is not available in relwrite")


def hamming_benchmarks() -> tuple[list[Benchmark], list[FPCoreError], int]:
    benchmarks, errors, count = [], [], 0
    for path in HAMMING:
        text = path.read_text()
        count += len(read_data(text))
        benchmarks += read_fpcores(text, errors)
    return benchmarks, errors, count


def same_benchmark(a: Benchmark, b: Benchmark) -> bool:
    return (
        graph_repr(a.expr) == graph_repr(b.expr)
        and a.expr.type == b.expr.type
        and [v.name for v in a.inputs] == [v.name for v in b.inputs]
        and (a.name, a.precision, a.properties) == (b.name, b.precision, b.properties)
        and a.precondition == b.precondition
    )


# -- the Hamming suite -------------------------------------------------------------------------


def test_every_hamming_benchmark_round_trips_or_names_the_op_relwrite_lacks():
    benchmarks, errors, count = hamming_benchmarks()
    assert count == 28 and len(benchmarks) + len(errors) == count
    for bench in benchmarks:
        again = read_fpcore(to_fpcore(bench))
        assert same_benchmark(bench, again), bench.name
    for error in errors:
        match = MISSING.search(str(error))
        assert match, error
        assert not hasattr(ops, match.group(1))
        assert re.search(r"benchmark '.+': .* at line \d+, column \d+", str(error))
    assert len(benchmarks) >= 23


def test_hamming_reads_what_the_file_says():
    (quadp, *_) = read_fpcores((HAMMING[0].parent / "quadratic.fpcore").read_text())
    assert quadp.name == "quadp (p42, positive)"
    assert [v.name for v in quadp.inputs] == ["a", "b", "c"]
    assert graph_repr(quadp.expr) == (
        "true_div(add(neg(b), sqrt(sub(mul(b, b), mul(4.0, mul(a, c))))), mul(2.0, a))"
    )
    assert [key for key, _ in quadp.properties] == [":herbie-expected", ":alt"]
    assert quadp.properties[1][1].startswith("(! :herbie-platform c")
    (sin2, *_) = read_fpcores((HAMMING[0].parent / "trigonometry.fpcore").read_text(), [])
    assert sin2.name == "2sin (example 3.3)"
    ranges = sin2.precondition.ranges
    assert (ranges["x"].lo, ranges["x"].hi) == (-1e4, 1e4)
    assert ranges["eps"].lo <= 0 and 1e4 * (1 - 1e-15) < ranges["eps"].hi <= 1e4


def test_python_output_computes_what_the_graph_does():
    benchmarks, _, _ = hamming_benchmarks()
    rng = np.random.default_rng(0)
    for bench in benchmarks:
        namespace: dict = {}
        exec(to_python(bench, function_name="f"), namespace)
        box = bench.precondition.ranges
        points = {
            name: np.clip(
                rng.standard_normal(64) * 10.0 ** rng.integers(-3, 4, 64), box[name].lo, box[name].hi
            )
            for name in (v.name for v in bench.inputs)
        }
        evaluate = numpy_function(bench.inputs, bench.expr)
        with np.errstate(all="ignore"):
            expected = [evaluate(*(points[v.name][i] for v in bench.inputs)) for i in range(64)]
            got = namespace["f"](*(points[v.name] for v in bench.inputs))
        np.testing.assert_array_equal(got, expected, err_msg=bench.name)


# -- reading -----------------------------------------------------------------------------------


def test_numbers_constants_and_let_scopes():
    bench = read_fpcore(
        "(FPCore (x) (let ([x (+ x 1/3)] [y x])"
        " (let* ([z (* x 0x1.8p1)] [w (- z PI)]) (+ w y (digits 3 -1 2)))))"
    )
    assert graph_repr(bench.expr) == (
        "add(sub(mul(add(x, 0.3333333333333333), 3.0), 3.141592653589793), x, 1.5)"
    )
    single = read_fpcore("(FPCore (x) :precision binary32 (+ x 0.1))")
    assert single.expr.dtype == "float32" and single.inputs[0].dtype == "float32"
    assert single.expr.owner.inputs[1].data == np.float32(0.1)
    assert read_fpcore(to_fpcore(single)).expr.owner.inputs[1].data == np.float32(0.1)


def test_binary32_numbers_round_once():
    # 1 + 2**-24 + 2**-60 lies just above the midpoint of two floats: double rounding gets it wrong
    text = "(FPCore (x) :precision binary32 (* x 1.000000059604644776130493508361689483))"
    (const,) = [v for v in read_fpcore(text).expr.owner.inputs if v.owner is None and v.name is None]
    assert const.data == np.nextafter(np.float32(1), np.float32(2))


def test_conditions_become_switches_and_write_back():
    text = "(FPCore (x y) (if (and (< 0 x y) (not (== x 1)) (or (!= x y) FALSE)) (- x) (fmax x y)))"
    bench = read_fpcore(text)
    assert bench.expr.owner.op == ops.switch
    again = read_fpcore(to_fpcore(bench))
    assert same_benchmark(bench, again)
    namespace: dict = {}
    exec(to_python(bench, function_name="f"), namespace)
    x, y = np.array([0.5, 1.0, 2.0, -1.0]), np.array([1.0, 2.0, 1.0, 3.0])
    evaluate = numpy_function(bench.inputs, bench.expr)
    np.testing.assert_array_equal(namespace["f"](x, y), [evaluate(a, b) for a, b in zip(x, y)])
    np.testing.assert_array_equal(namespace["f"](x, y), [-0.5, 2.0, 2.0, 3.0])


def test_several_fpcores_and_shared_subterms():
    benchmarks = read_fpcores('(FPCore (x) (let ([e (exp x)]) (* e e))) ; two\n(FPCore f (y) :name "g" y)')
    assert len(benchmarks) == 2 and benchmarks[1].identifier == "f" and benchmarks[1].name == "g"
    text = to_fpcore(benchmarks[0])
    assert "let*" in text and text.count("exp") == 1
    assert same_benchmark(read_fpcore(text), benchmarks[0])
    assert to_fpcore(benchmarks[1]).startswith("(FPCore f (y)")


def test_a_precondition_binds_names_with_let_and_let_star():
    (sequential,) = read_fpcores(
        "(FPCore (x y) :pre (let* ([s (+ x y)] [small (< s 2)]) (and small (< 0 x))) (- x y))"
    )
    (parallel,) = read_fpcores("(FPCore (x y) :pre (let ([x y] [y x]) (< x y)) (- x y))")  # a swap
    assert str(sequential.precondition) == "x + y < 2 and 0 < x"
    assert str(parallel.precondition) == "y < x"
    with pytest.raises(FPCoreError, match="unknown variable 's' in the precondition"):
        read_fpcores("(FPCore (x) :pre (let ([s x] [t (< s 1)]) t) x)")  # let binds in the outer scope


def test_a_cast_to_the_benchmarks_own_precision_is_its_operand():
    (bench,) = read_fpcores("(FPCore (x y) (cast (+ (cast x) y)))")
    (plain,) = read_fpcores("(FPCore (x y) (+ x y))")
    assert same_benchmark(bench, plain)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '(FPCore (x) :name "loop" (while (< x 1) ([x 0 (+ x 1)]) x))',
            "'loop': unsupported loop construct (while",
        ),
        ('(FPCore ((x 3)) :name "t" x)', "'t': unsupported tensor argument '(x 3)' at line 1, column 10"),
        (
            '(FPCore (x) :name "u"\n  (frobnicate x))',
            "'u': unknown operation 'frobnicate' at line 2, column 3",
        ),
        ("(FPCore (x) (+ x z))", "FPCore #1 (line 1, column 1): unknown variable 'z' at line 1, column 18"),
        ("(FPCore (x) :precision binary16 x)", "unsupported precision 'binary16'"),
        ('(FPCore (x) :name "n")', "expected properties then one body expression"),
        ("(FPCore (x) (+ x 1)", "unclosed list opened at line 1, column 1"),
        ("(FPCore (x) (+ x 1]))", "']' at line 1, column 19 closes the list opened at line 1, column 13"),
        ("(FPCore (x) :pre (< x y) x)", "unknown variable 'y' in the precondition at line 1, column 23"),
        ("(FPCore (x) :pre (< (dot x x) 1) x)", "unknown operation 'dot' in the precondition"),
        ("(FPCore (x) :pre (+ x 1) x)", "the precondition is a number"),
        ("(FPCore (x) (! :precision binary32 x))", "unsupported annotation construct (! ...)"),
        ("(FPCore (x) (- x 1 2))", "- takes one or two operands, got 3"),
        ("(FPCore (x) (cast x x))", "cast takes one operand"),
        ("(FPCore (x) (< x 1))", "the body is a condition"),
        ("(FPCore (x) (sqrt x x))", "(sqrt ...): sqrt: takes 1 input(s), got 2"),
        ("(FPCore (x x) x)", "argument 'x' appears twice"),
        ("(x)", "expected (FPCore ...)"),
    ],
)
def test_errors_name_the_construct_the_benchmark_and_the_position(text, message):
    with pytest.raises(FPCoreError) as info:
        read_fpcores(text)
    assert message in str(info.value)


def test_missing_ops_are_looked_up_when_read(monkeypatch):
    text = '(FPCore (x) :name "t" (cbrt x))'
    if not hasattr(ops, "cbrt"):
        with pytest.raises(FPCoreError, match=r"benchmark 't': operation 'cbrt' is not available"):
            read_fpcore(text)
    monkeypatch.setattr(ops, "cbrt", ops.sqrt, raising=False)
    assert read_fpcore(text).expr.owner.op == ops.sqrt


@pytest.mark.parametrize("depth", [5_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_deep_nesting_reads_and_writes_without_recursion(depth):
    text = (
        "(FPCore (x) :pre (< "
        + "(+ 1 " * depth
        + "x"
        + ")" * depth
        + " 2) "
        + "(- " * depth
        + "x"
        + ")" * depth
        + ")"
    )
    bench = read_fpcore(text)
    assert bench.expr.owner.op == ops.neg
    written = to_fpcore(bench)
    assert written.count("(- ") == depth
    again = read_fpcore(written)
    assert again.expr.owner.op == ops.neg and str(again.precondition) == str(bench.precondition)
    namespace: dict = {}
    exec(to_python(bench, function_name="f"), namespace)
    assert namespace["f"](3.0) == (3.0 if depth % 2 == 0 else -3.0)
    assert to_c(bench).count(";") > depth // 20


# -- writing -----------------------------------------------------------------------------------


def test_writers_take_an_expression_with_a_precondition_text():
    x, y = scalar("x"), scalar("y")
    expr = ops.sqr(x + 1) + ops.sigmoid(y) * ops.reciprocal(x)
    text = to_fpcore(expr, name="t", precondition="0 < x < y")
    bench = read_fpcore(text)
    assert bench.name == "t" and str(bench.precondition) == "0 < x < y"
    values = (np.array([0.5, 2.0]), np.array([1.0, 3.0]))
    for point in zip(*values):
        assert numpy_function(bench.inputs, bench.expr)(*point) == pytest.approx(
            numpy_function([x, y], expr)(*point)
        )
    python = to_python(expr, name="t", precondition="0 < x < y")
    assert '"""t\n\n    Precondition: 0 < x < y\n    """' in python


def test_writers_refuse_what_they_cannot_express():
    x = scalar("x")
    with pytest.raises(FPCoreError, match="reads y, not among the inputs"):
        to_fpcore(x + scalar("y"), inputs=[x])
    with pytest.raises(FPCoreError, match=r"op Sum.* has no FPCore form"):
        to_fpcore(ops.sum(ops.mul(x, x)))
    with pytest.raises(FPCoreError, match=r"input v must be a named float64 scalar"):
        to_fpcore(ops.dot(*[__import__("relwrite").vector("v")] * 2) + x)


def test_names_are_made_safe_for_python_and_c():
    bench = read_fpcore('(FPCore (lambda x.1 exp) :name "1 odd" (+ lambda x.1 exp (exp exp)))')
    python = to_python(bench)
    assert "def f_1_odd(lambda_, x_1, exp):" in python
    c = to_c(bench)
    assert "double f_1_odd(double lambda_, double x_1, double exp_)" in c
    namespace: dict = {}
    exec(python, namespace)
    assert namespace["f_1_odd"](1.0, 2.0, 0.0) == 4.0


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_output_compiles_and_agrees_with_python(tmp_path):
    text = (
        '(FPCore (a b) :name "mix" :pre (and (<= -3 a 3) (<= 0.5 b 2))'
        " (let* ([e (exp (- a))] [s (+ e b)])"
        " (if (< a b) (* s s (fabs a)) (- (pow b 1/2) (/ s (fmin a b))))))"
    )
    for precision in ("binary64", "binary32"):
        bench = read_fpcore(text.replace(":pre", f":precision {precision} :pre"))
        source = tmp_path / f"{precision}.c"
        source.write_text(to_c(bench, function_name="mix"))
        library = tmp_path / f"{precision}.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", str(source), "-o", str(library), "-lm"], check=True)
        ctype = ctypes.c_float if precision == "binary32" else ctypes.c_double
        mix = ctypes.CDLL(str(library)).mix
        mix.restype, mix.argtypes = ctype, [ctype, ctype]
        namespace: dict = {}
        exec(to_python(bench, function_name="mix"), namespace)
        dtype = np.float32 if precision == "binary32" else np.float64
        for a, b in [(-2.5, 0.5), (0.25, 1.5), (3.0, 2.0), (1.0, 1.0)]:
            expected = namespace["mix"](dtype(a), dtype(b))
            assert math.isclose(mix(a, b), float(expected), rel_tol=1e-5 if dtype is np.float32 else 1e-13)


# -- preconditions -----------------------------------------------------------------------------

NAMES = ("x", "y")
numbers = st.one_of(
    st.sampled_from([0.0, 1.0, -1.0, 2.0, 0.5, 710.0, 1e-16, 1e300]),
    st.floats(-1e6, 1e6, allow_nan=False, width=32).map(float),
)
variables = st.sampled_from(NAMES).map(Var)


def _terms() -> st.SearchStrategy:
    leaf = st.one_of(variables, numbers.map(Num))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.builds(lambda t: Call("fabs", (t,)), inner),
            st.builds(lambda t: Call("-", (t,)), inner),
            st.builds(
                lambda op, a, b: Call(op, (a, b)),
                st.sampled_from(["+", "-", "*", "/", "fmin", "fmax"]),
                inner,
                inner,
            ),
            st.builds(lambda t: Call("sqrt", (t,)), inner),
        ),
        max_leaves=4,
    )


terms = _terms()
comparisons = st.integers(1, 2).flatmap(
    lambda n: st.builds(
        lambda ops_, ts: Compare(tuple(ops_), tuple(ts)),
        st.lists(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), min_size=n, max_size=n),
        st.lists(terms, min_size=n + 1, max_size=n + 1),
    )
)
predicates = st.recursive(
    st.one_of(comparisons, st.booleans().map(Truth)),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda ps: And(tuple(ps))),
        st.lists(inner, min_size=1, max_size=3).map(lambda ps: Or(tuple(ps))),
        inner.map(Not),
    ),
    max_leaves=5,
)


def _scalar_term(term, point: dict) -> float:
    """Python's float arithmetic (IEEE), written out apart from the module's NumPy evaluation."""
    if isinstance(term, Num):
        return term.value
    if isinstance(term, Var):
        return point[term.name]
    args = [_scalar_term(a, point) for a in term.args]
    if term.op == "-" and len(args) == 1:
        return -args[0]
    a = args[0]
    if term.op == "fabs":
        return abs(a)
    if term.op == "sqrt":
        return math.sqrt(a) if a >= 0 or math.isnan(a) else math.nan
    b = args[1]
    if term.op in ("fmin", "fmax"):
        if math.isnan(a) or math.isnan(b):
            return b if math.isnan(a) else a
        return min(a, b) if term.op == "fmin" else max(a, b)
    if term.op == "/":
        if b == 0:
            return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1, b)
        return a / b
    return {"+": a + b, "-": a - b, "*": a * b}[term.op]


_SCALAR_COMPARE = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def _scalar_holds(predicate, point: dict) -> bool:
    if isinstance(predicate, Truth):
        return predicate.value
    if isinstance(predicate, Compare):
        values = [_scalar_term(t, point) for t in predicate.terms]
        return all(_SCALAR_COMPARE[op](a, b) for op, a, b in zip(predicate.ops, values, values[1:]))
    if isinstance(predicate, And):
        return all(_scalar_holds(p, point) for p in predicate.parts)
    if isinstance(predicate, Or):
        return any(_scalar_holds(p, point) for p in predicate.parts)
    return not _scalar_holds(predicate.part, point)


def _constants_of(predicate) -> list[float]:
    found, stack = [], [predicate]
    while stack:
        node = stack.pop()
        if isinstance(node, Num):
            found.append(node.value)
        stack.extend(getattr(node, "args", ()) or getattr(node, "terms", ()) or getattr(node, "parts", ()))
        if isinstance(node, Not):
            stack.append(node.part)
    return found


def _points(predicate) -> st.SearchStrategy:
    """Finite points, many at and beside the predicate's constants (where its boundaries are)."""
    near = [
        v
        for c in _constants_of(predicate)
        for v in (c, np.nextafter(c, -np.inf), np.nextafter(c, np.inf), -c)
    ]
    value = st.one_of(
        st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(near or [0.0]).map(float)
    )
    return st.fixed_dictionaries({name: value for name in NAMES})


@settings(max_examples=300, deadline=None)
@given(st.data(), predicates)
def test_mask_agrees_with_scalar_evaluation(data, predicate):
    precondition = Precondition(predicate, NAMES)
    points = data.draw(st.lists(_points(predicate), min_size=1, max_size=8))
    mask = precondition.holds({name: np.array([p[name] for p in points]) for name in NAMES})
    assert mask.dtype == bool and mask.shape == (len(points),)
    with np.errstate(all="ignore"):
        assert list(mask) == [_scalar_holds(predicate, p) for p in points]


@settings(max_examples=150, deadline=None)  # boxes have many edge cases: more than the profile's 40
@given(st.data(), predicates)
def test_box_contains_every_point_where_the_predicate_holds(data, predicate):
    precondition = Precondition(predicate, NAMES)
    box = precondition.ranges
    for _ in range(20):
        point = data.draw(_points(predicate))
        if precondition.holds({k: np.array(v) for k, v in point.items()}):
            for name in NAMES:
                assert box[name].lo <= point[name] <= box[name].hi, (str(precondition), point, box)


@settings(max_examples=300, deadline=None)
@given(predicates)
def test_python_text_and_fpcore_read_back_the_same_predicate(predicate):
    precondition = Precondition(predicate, NAMES)
    assert parse_precondition(str(precondition), NAMES) == precondition
    bench = read_fpcore(to_fpcore(scalar("x") + scalar("y"), precondition=precondition))
    points = {"x": np.array([0.0, 1.0, -2.5, 1e300]), "y": np.array([1.0, 1.0, 3.0, -1e-300])}
    np.testing.assert_array_equal(bench.precondition.holds(points), precondition.holds(points))


def test_boxes_of_common_preconditions():
    def box(text):
        return {k: (v.lo, v.hi) for k, v in parse_precondition(text).ranges.items()}

    assert box("-1 <= x <= 2") == {"x": (-1.0, 2.0)}
    assert box("0 < x < y <= 10") == {"x": (5e-324, np.nextafter(10, 0)), "y": (1e-323, 10.0)}
    assert box("abs(x) <= 3 and x != 0") == {"x": (-3.0, 3.0)}
    assert box("x < -1 or 2 < x < 5") == {"x": (-math.inf, np.nextafter(5, 0))}
    assert box("not (x >= 1)") == {"x": (-math.inf, np.nextafter(1, 0))}
    lo, hi = box("2 * x + 1 <= 7")["x"]
    assert hi >= 3.0 and hi - 3.0 < 1e-14 and lo == -math.inf
    assert parse_precondition("x < 1 and x > 2").ranges["x"].is_empty
    assert box("x * y < 1") == {"x": (-math.inf, math.inf), "y": (-math.inf, math.inf)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x <", "not an expression"),
        ("x + 1", "a number, not a condition"),
        ("x < 1 and y", "a number where a condition is expected at column 1"),
        ("foo(x) < 1", "foo: unknown operation 'foo' at column 1"),
        ("x < 1 if y else 2", "unsupported syntax 'IfExp'"),
        ("x in y", "unsupported comparison 'In'"),
        ("min(x) < 1", "min: 'fmin' takes 2 operand(s), got 1"),
    ],
)
def test_precondition_text_errors(text, message):
    with pytest.raises(PreconditionError) as info:
        parse_precondition(text)
    assert message in str(info.value)


def test_precondition_text_reads_fpcore_names_and_orders_inputs():
    pre = parse_precondition("x != 0 and y > 1 and abs(x) < PI ** 2", variables=["y", "x"])
    assert pre.variables == ("y", "x")
    assert str(pre) == "x != 0 and y > 1 and abs(x) < 3.141592653589793 ** 2"
    assert list(pre.holds({"x": np.array([0.0, 1.0, 10.0]), "y": 2.0})) == [False, True, False]
    with pytest.raises(PreconditionError, match="reads 'z', not among the inputs"):
        parse_precondition("z > 0", variables=["x"])


# -- fma -----------------------------------------------------------------------------------------

FMA = '(FPCore (a b c) :name "fused" :precision {precision} (- (fma a b c) (* 2 (fma c b (- a)))))'
FMA_POINTS = [
    (0.1, 10.0, -1.0),  # rounded twice, a * b + c is 0
    (1.0 + 2.0**-30, 1.0 - 2.0**-30, -1.0),  # -2**-60 exactly
    (1e308, 10.0, -1.7976931348623157e308),  # overflows once rounded
    (3.0, float("inf"), -float("inf")),
    (0.0, -1.0, -0.0),
    (2.0**-600, -(2.0**-600), 0.0),  # underflows to -0
    (2.0**-1074, 0.5, 1.0),
]


def fma_benchmarks():
    for precision in ("binary64", "binary32"):
        yield read_fpcore(FMA.format(precision=precision))


def fma_points(dtype) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return [np.array(column, dtype=dtype) for column in zip(*FMA_POINTS)]


def graph_values(bench: Benchmark) -> np.ndarray:
    """The graph's value at each of FMA_POINTS (NumPy backend), in the benchmark's dtype."""
    evaluate = numpy_function(bench.inputs, bench.expr)
    with np.errstate(all="ignore"):
        return np.array([evaluate(*point) for point in zip(*fma_points(bench.expr.dtype))])


def same_bits(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    known = ~np.isnan(want)
    bits = f"u{want.dtype.itemsize}"
    np.testing.assert_array_equal(got[known].view(bits), want[known].view(bits))


def test_fma_reads_rounds_once_and_round_trips():
    bench = read_fpcore("(FPCore (a b c) (fma a b c))")
    assert bench.expr.owner.op == ops.fma
    assert numpy_function(bench.inputs, bench.expr)(0.1, 10.0, -1.0) == 5.551115123125783e-17  # 0.1 * 10 - 1
    for bench in fma_benchmarks():
        assert "(fma a b c)" in to_fpcore(bench) and same_benchmark(bench, read_fpcore(to_fpcore(bench)))


def test_fma_python_output_rounds_once_as_the_graph_does():
    """The function to_python writes (its own fma: NumPy has none) gives the NumPy backend's bits, in
    binary64 and binary32 (rounded to odd, then to float32: once)."""
    for bench in fma_benchmarks():
        dtype = bench.expr.dtype
        namespace: dict = {}
        exec(to_python(bench, function_name="fused"), namespace)
        with np.errstate(all="ignore"):
            got = namespace["fused"](*fma_points(dtype))
        same_bits(got, graph_values(bench))
    # a float32 tie broken by a far smaller addend: the float64 sum rounded to float32 is the even one
    namespace = {}
    exec(
        to_python(read_fpcore("(FPCore (a b c) :precision binary32 (fma a b c))"), function_name="g"),
        namespace,
    )
    assert namespace["g"](np.float32(4097), np.float32(4097), np.float32(2.0**-40)) == np.float32(16785410)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_fma_c_output_compiles_and_rounds_as_the_graph_does(tmp_path):
    for bench in fma_benchmarks():
        source, library = tmp_path / f"{bench.precision}.c", tmp_path / f"{bench.precision}.so"
        source.write_text(to_c(bench, function_name="fused"))
        assert ("fmaf(" if bench.precision == "binary32" else "fma(") in source.read_text()
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", str(source), "-o", str(library), "-lm"], check=True)
        ctype = ctypes.c_float if bench.precision == "binary32" else ctypes.c_double
        fused = ctypes.CDLL(str(library)).fused
        fused.restype, fused.argtypes = ctype, [ctype] * 3
        dtype = bench.expr.dtype
        got = np.array([fused(*map(float, point)) for point in zip(*fma_points(dtype))], dtype=dtype)
        same_bits(got, graph_values(bench))


def test_fma_in_a_precondition():
    bench = read_fpcore("(FPCore (a b) :pre (< (fma a b 1) 0) (+ a b))")
    assert str(bench.precondition) == "fma(a, b, 1) < 0"
    holds = bench.precondition.holds({"a": np.array([-1.0, 2.0]), "b": np.array([2.0, 3.0])})
    np.testing.assert_array_equal(holds, [True, False])


@pytest.mark.parametrize("precision", ["binary64", "binary32"])
@settings(max_examples=200)
@given(data=st.data())
def test_the_written_fma_is_the_backends_bit_for_bit(precision, data):
    from relwrite.backends.numpy.fma import fma

    dtype = np.float32 if precision == "binary32" else np.float64
    width = 32 if precision == "binary32" else 64
    triples = st.lists(st.tuples(*[st.floats(width=width)] * 3), min_size=1, max_size=20)
    a, b, c = (np.array(column, dtype=dtype) for column in zip(*data.draw(triples)))
    with np.errstate(all="ignore"):  # cancellations
        c = np.where(data.draw(st.booleans()), (-(a.astype(np.float64) * b)).astype(dtype), c)
    namespace: dict = {}
    exec(
        to_python(read_fpcore(f"(FPCore (a b c) :precision {precision} (fma a b c))"), function_name="f"),
        namespace,
    )
    with np.errstate(all="ignore"):
        same_bits(namespace["f"](a, b, c), fma(a, b, c, dtype))

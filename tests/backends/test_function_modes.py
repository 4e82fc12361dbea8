"""`function(..., mode=...)`: every mode computes what the un-rewritten graph computes under NumPy.

The reference is `relwrite.backends.numpy.function` on the graph as built (no
rewriting).  Values agree within a tolerance by dtype, scaled by the result's
magnitude; non-finite results agree in kind (NaN, +inf, -inf) at every position.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import relwrite as rw
from relwrite.backends.c import c_available
from relwrite.backends.numpy import numpy_function as reference_function
from relwrite.compile.function import MODES, Mode, function
from relwrite.engine.db import Query
from relwrite.graph import ops
from relwrite.graph.basic import ancestors
from relwrite.testing.strategies import expression_graphs, input_values, tensor_types

CUSTOM_MODE = Mode(linker="numpy", query=Query(include=["fast_compile", "stabilize", "specialize"]))
ALL_MODES = [*MODES.values(), CUSTOM_MODE]
RTOL = {"float64": 1e-12, "float32": 1e-5}

needs_c = pytest.mark.skipif(not c_available(), reason="no working C compiler here")


def largest_finite(arrays: list[np.ndarray]) -> float:
    return max((float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0)) for a in arrays), default=0.0)


def assert_matches_reference(
    got: np.ndarray,
    want: np.ndarray,
    context: str,
    intermediates: list[np.ndarray] = (),
    overflow_may_be_avoided: bool = False,
) -> None:
    """`got` equals `want` within the dtype's tolerance, with NaN/inf in the same places and of the same kind.

    The tolerance is relative to the magnitude of the result and of the `intermediates` it was computed
    from: rewriting reorders arithmetic, so a result that cancels large terms keeps their rounding.
    With `overflow_may_be_avoided` (finite inputs, and the reference overflowed on the way) `got` may
    be finite where `want` is not: a stabilization (log(1 + exp(710)) -> softplus(710) = 710)
    computes what overflowed.
    """
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, context
    avoided = ~np.isfinite(want) & np.isfinite(got) if overflow_may_be_avoided else np.zeros(want.shape, bool)
    for kind in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(
            kind(got)[~avoided], kind(want)[~avoided], err_msg=f"{context}: {kind.__name__} differs"
        )
    finite = np.isfinite(want)
    rtol = RTOL[want.dtype.name]
    magnitude = max(1.0, largest_finite([want, *intermediates]))
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=rtol * magnitude, err_msg=context)


def assert_every_mode_matches_reference(inputs: list, output, values: list) -> None:
    computed = [v for v in ancestors([output]) if v.owner is not None]
    overflows: list[str] = []
    with np.errstate(all="ignore", over="call", call=lambda kind, flag: overflows.append(kind)):
        want, *intermediates = reference_function(inputs, [output, *computed])(*values)
    overflowed = bool(overflows) and all(np.all(np.isfinite(v)) for v in values)
    with np.errstate(all="ignore"):
        for mode in ALL_MODES:
            got = function(inputs, output, mode=mode)(*values)
            assert_matches_reference(got, want, f"mode {mode}", intermediates, overflowed)


graph_input_types = tensor_types(dtypes=("float64", "float32"), max_ndim=2)

# Rewrites reassociate sums, so where terms cancel and a tiny divisor then amplifies the rounding
# (e.g. (x1 + x0 - x0) / x1 with x1 ~ 1e-6), no tolerance fixed per dtype holds.  Finite values are
# kept at |x| >= 1e-3 (or 0) to bound that amplification; NaN/inf propagation is tested separately.
well_scaled = st.just(0.0) | st.floats(1e-3, 1e3) | st.floats(-1e3, -1e-3)
# Non-finite inputs among well-scaled ones: huge finite values would let reassociated products overflow
# where the original order did not (0 * x**3 vs x * (0 * x * x)), which no reordering rule can avoid.
with_non_finite = st.sampled_from([np.nan, np.inf, -np.inf]) | well_scaled


@given(graph_input_types.flatmap(lambda t: expression_graphs(input_type=t)), st.data())
def test_every_mode_equals_the_numpy_reference_on_random_graphs(graph, data):
    inputs, output = graph
    values = data.draw(input_values(inputs, elements=well_scaled))
    assert_every_mode_matches_reference(inputs, output, values)


@given(expression_graphs(), st.data())
def test_nan_and_infinities_propagate_as_in_numpy(graph, data):
    inputs, output = graph
    assert_every_mode_matches_reference(
        inputs, output, data.draw(input_values(inputs, elements=with_non_finite))
    )


def expression20(x, y, lib):
    """20 operations over exp, sin, tanh, sqrt, abs, + - * / (counted on the right)."""
    t1 = lib.exp(1.0 - lib.abs(x))  # 3
    t2 = lib.sin(y) * 0.5  # 5
    t3 = lib.tanh(x * y)  # 7
    t4 = lib.sqrt(lib.abs(t2) + 1.0)  # 10
    t6 = t3 - t1 / t4  # 12
    t7 = t6 * t6 + x  # 14
    t8 = lib.sin(t7) / (1.0 + lib.abs(y))  # 18
    return t8 - lib.tanh(t1)  # 20


def test_fast_run_fuses_a_20_op_expression_into_one_composite():
    x, y = rw.vector("x"), rw.vector("y")
    f = function([x, y], expression20(x, y, ops), mode="fast_run")
    (node,) = f.fgraph.apply_nodes
    assert isinstance(node.op, ops.Composite)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(1000), rng.standard_normal(1000)
    assert_matches_reference(f(a, b), expression20(a, b, np), "20-op expression")


def test_fast_run_turns_a_scaled_product_plus_scaled_matrix_into_gemm():
    a, b, x, y, z = rw.scalar("a"), rw.scalar("b"), rw.matrix("X"), rw.matrix("Y"), rw.matrix("Z")
    f = function([a, x, y, b, z], a * (x @ y) + b * z, mode="fast_run")
    assert any(isinstance(node.op, ops.Gemm) for node in f.fgraph.apply_nodes)
    rng = np.random.default_rng(0)
    xv, yv, zv = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    assert_matches_reference(f(1.5, xv, yv, -0.5, zv), 1.5 * (xv @ yv) - 0.5 * zv, "gemm")


@needs_c
def test_fast_run_runs_the_fused_loop_and_gemm_as_compiled_code():
    x, y = rw.vector("x"), rw.vector("y")
    assert function([x, y], expression20(x, y, ops), mode="fast_run").linker.c_nodes
    a, b, m, n, z = rw.scalar("a"), rw.scalar("b"), rw.matrix("X"), rw.matrix("Y"), rw.matrix("Z")
    gemm = function([a, m, n, b, z], a * (m @ n) + b * z, mode="fast_run")
    assert any(isinstance(node.op, ops.Gemm) for node in gemm.linker.c_nodes)


def test_fast_compile_neither_fuses_nor_uses_blas():
    x, y = rw.vector("x"), rw.vector("y")
    f = function([x, y], rw.exp(x) * y + x, mode="fast_compile")
    assert not any(isinstance(node.op, (ops.Composite, ops.Gemm)) for node in f.fgraph.apply_nodes)
    assert not hasattr(f.linker, "c_nodes")


# -- input checks and trust_input --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run"])
def test_inputs_are_checked_with_errors_naming_the_input(mode):
    x, y = rw.vector("x"), rw.vector("y", dtype="float32")
    f = function([x, y], rw.exp(x) + y, mode=mode)
    with pytest.raises(TypeError, match=r"takes 2 input\(s\), got 1"):
        f(np.ones(3))
    with pytest.raises(TypeError, match=r"input 'x' \(position 0\).*1 dimension\(s\), got 2"):
        f(np.ones((3, 1)), np.ones(3, dtype="float32"))
    with pytest.raises(TypeError, match=r"input 'y' \(position 1\).*does not cast safely to float32"):
        f(np.ones(3), np.ones(3))
    with pytest.raises(TypeError, match=r"no input named 'z'"):
        f(np.ones(3), z=np.ones(3))


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run"])
def test_checked_inputs_are_converted_exactly_and_bound_by_name(mode):
    x, y = rw.vector("x"), rw.vector("y")
    f = function([x, y], x * y - x, mode=mode)
    np.testing.assert_array_equal(f([1, 2, 3], y=np.array([2.0, 2.0, 2.0])), [1.0, 2.0, 3.0])


@pytest.mark.parametrize("mode", [*MODES, CUSTOM_MODE])
def test_trust_input_gives_the_same_results_on_exact_arrays(mode):
    x, y = rw.vector("x"), rw.vector("y")
    output = rw.tanh(x * y) + rw.exp(-rw.abs(x))
    checked = function([x, y], output, mode=mode)
    trusted = function([x, y], output, mode=mode, trust_input=True)
    a, b = np.linspace(-2.0, 2.0, 7), np.linspace(3.0, -1.0, 7)
    np.testing.assert_array_equal(trusted(a, b), checked(a, b))


def test_trust_input_skips_the_checks():
    x = rw.scalar("x")
    checked = function([x], x + 1.0, mode="fast_compile")
    trusted = function([x], x + 1.0, mode="fast_compile", trust_input=True)
    with pytest.raises(TypeError, match="input 'x'"):
        checked(np.zeros(3))
    np.testing.assert_array_equal(trusted(np.zeros(3)), np.ones(3))  # unchecked: numpy just broadcasts


@needs_c
def test_trusted_inputs_of_the_wrong_dtype_never_reach_a_kernel():
    x, y = rw.vector("x"), rw.vector("y")
    f = function([x, y], rw.tanh(x * y) + rw.exp(x), mode="fast_run", trust_input=True)
    assert f.linker.c_nodes
    with pytest.raises(TypeError, match="must be a float64 ndarray"):
        f(np.ones(4, dtype="float32"), np.ones(4))


# -- modes -------------------------------------------------------------------------------------------------


def test_an_unknown_mode_is_a_value_error_naming_it():
    x = rw.vector("x")
    with pytest.raises(ValueError, match=r"unknown mode 'fastest'.*fast_run"):
        function([x], x + 1.0, mode="fastest")


def test_a_mode_with_an_unknown_linker_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match=r"unknown linker 'jit'"):
        Mode(linker="jit")


def test_a_mode_with_an_unknown_query_name_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match=r"unknown mode 'quick'"):
        Mode(linker="numpy", query="quick")


# -- assertions --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", ["straight-line", "loop"])
@pytest.mark.parametrize("backend", ["as the mode says", "C forced off"])
@pytest.mark.parametrize("trust_input", [False, True])
@pytest.mark.parametrize("mode", [*MODES, CUSTOM_MODE], ids=[*MODES, "custom"])
def test_a_false_assertion_is_an_assertion_error_with_its_message_in_every_mode(
    mode, trust_input, backend, run, monkeypatch
):
    from relwrite.backends.numpy import EvaluationError, program

    if backend == "C forced off":
        monkeypatch.setenv("RELWRITE_NO_C", "1")
    if run == "loop":
        monkeypatch.setattr(program, "STRAIGHT_LINE_STEPS", 0)
    x = rw.vector("x")
    checked = rw.assert_op(rw.exp(x) * 2.0 + x, x > 0, message="x must be positive")
    f = function([x], checked * 3.0, mode=mode, trust_input=trust_input, cache=False)
    np.testing.assert_allclose(f(np.array([1.0])), [3.0 * (2.0 * np.e + 1.0)])
    with pytest.raises(AssertionError, match="x must be positive") as info:
        f(np.array([1.0, -1.0]))
    assert isinstance(info.value, EvaluationError)  # still the evaluation failure naming the node
    assert "Assert{'x must be positive'}" in str(info.value)


def test_other_evaluation_failures_are_not_assertion_errors():
    from relwrite.backends.numpy import EvaluationError

    x, y = rw.vector("x"), rw.vector("y")
    f = function([x, y], x + y, mode="fast_compile")
    with pytest.raises(EvaluationError) as info:
        f(np.ones(2), np.ones(3))
    assert not isinstance(info.value, AssertionError)


# -- the NumPy fallback ------------------------------------------------------------------------------------

FALLBACK_SCRIPT = textwrap.dedent(
    """
    import json, warnings
    import numpy as np
    import relwrite as rw
    from relwrite.backends.c import CFallbackWarning
    from relwrite.compile.function import function
    from relwrite.backends.numpy import numpy_function as reference_function
    from relwrite.graph import ops

    x, y = rw.vector("x"), rw.vector("y")
    a, b, m, n, z = rw.scalar("a"), rw.scalar("b"), rw.matrix("X"), rw.matrix("Y"), rw.matrix("Z")
    cases = [
        ([x, y], rw.sin(rw.exp(x) * y) / (1.0 + rw.abs(y)) - rw.tanh(x)),
        ([a, m, n, b, z], a * (m @ n) + b * z),
    ]
    rng = np.random.default_rng(0)
    values = [
        [rng.standard_normal(6), rng.standard_normal(6)],
        [np.array(2.0), rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), np.array(0.5),
         rng.standard_normal((3, 2))],
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        functions, errors = [], []
        for (inputs, output), value in [*zip(cases, values), *zip(cases, values)]:
            f = function(inputs, output, mode="fast_run")
            functions.append(f)
            errors.append(float(np.max(np.abs(f(*value) - reference_function(inputs, output)(*value)))))
    fused = (ops.Composite, ops.Gemm)
    print(json.dumps({
        "fused": [any(isinstance(nd.op, fused) for nd in f.fgraph.apply_nodes) for f in functions],
        "compiled": sum(len(f.linker.c_nodes) for f in functions),
        "errors": errors,
        "warnings": [str(w.message) for w in caught if issubclass(w.category, CFallbackWarning)],
    }))
    """
)


def test_relwrite_no_c_falls_back_to_numpy_with_one_warning(tmp_path):
    environment = {**os.environ, "RELWRITE_NO_C": "1", "RELWRITE_CACHE_DIR": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-c", FALLBACK_SCRIPT], capture_output=True, text=True, env=environment, check=False
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert all(report["fused"])  # the rewrites still run; only the linking changes
    assert report["compiled"] == 0
    assert max(report["errors"]) <= 1e-12
    assert len(report["warnings"]) == 1 and "RELWRITE_NO_C" in report["warnings"][0], report["warnings"]


# -- warm compiles ------------------------------------------------------------------------------------------


def _chain(name: str = "x"):
    from relwrite.graph import ops as o
    from relwrite.graph.basic import vector

    x = vector(name)
    return x, o.exp(x) * 2.0 + 1.0


def test_a_graph_compiled_before_is_neither_rewritten_nor_linked_again(monkeypatch):
    import numpy as np

    from relwrite.compile import function as compiling

    first = compiling.function(*_chain(), mode="fast_compile")
    monkeypatch.setattr(compiling, "_linker", lambda *a: pytest.fail("linked again"))
    x, out = _chain()
    again = compiling.function([x], out, mode="fast_compile")
    assert again.linker is first.linker
    np.testing.assert_array_equal(again(np.array([0.0, 1.0])), first(np.array([0.0, 1.0])))


@pytest.mark.parametrize(
    "change",
    ["another input name", "another mode", "cache off", "a RELWRITE_ setting", "the database's contents"],
)
def test_what_a_compiled_graph_depends_on_is_part_of_its_cache_key(change, monkeypatch):
    from relwrite.compile import function as compiling
    from relwrite.engine.db import optdb
    from relwrite.engine.graph_rewriters import MergeRewriter

    first = compiling.function(*_chain(), mode="fast_compile")
    kwargs: dict = {"mode": "fast_compile"}
    name = "x"
    if change == "another input name":
        name = "y"
    elif change == "another mode":
        kwargs["mode"] = "o2"
    elif change == "cache off":
        kwargs["cache"] = False
    elif change == "a RELWRITE_ setting":
        monkeypatch.setenv("RELWRITE_TEST_SETTING", "1")
    else:
        optdb.register("extra_merge", MergeRewriter(), "fast_compile", position=99)  # removed below
    try:
        x, out = _chain(name)
        assert compiling.function([x], out, **kwargs).linker is not first.linker
    finally:
        if "extra_merge" in optdb:
            optdb.remove("extra_merge")


@pytest.mark.parametrize("value", [1.5, np.float64(1.5), np.array(1.5), 2, True, np.float32(1.5)])
def test_scalar_inputs_of_every_kind_give_the_same_result(value):
    x = rw.float64("x")
    f = function([x], x * 2.0, mode="fast_compile")
    assert f(value) == float(value) * 2.0


@pytest.mark.parametrize("value", [1.5, np.float64(1.5)])
def test_a_scalar_that_does_not_convert_exactly_is_refused_by_name(value):
    i = rw.tensor("i", dtype="int64", shape=())
    with pytest.raises(TypeError, match="input 'i'"):
        function([i], i + 1, mode="fast_compile")(value)

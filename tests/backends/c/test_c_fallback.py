"""Without a working compiler, or with RELWRITE_NO_C=1, the C linker runs NumPy and warns once per process.

Each case runs in a fresh interpreter, since the warning and the toolchain are per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from relwrite.backends.c import c_available

SCRIPT = textwrap.dedent(
    """
    import json, warnings
    import numpy as np
    from relwrite.backends.c import CFallbackWarning, CLinker, c_available
    from relwrite.backends.numpy import NumpyLinker
    from relwrite.graph import ops
    from relwrite.graph.basic import matrix, scalar, vector
    from relwrite.graph.fg import FunctionGraph

    xi, yi = scalar("x"), scalar("y")
    op = ops.Composite([xi, yi], [ops.tanh(ops.exp(xi) * yi)])
    x, y = vector("x"), vector("y")
    z, m, n, a, b = matrix("Z"), matrix("X"), matrix("Y"), scalar("a"), scalar("b")
    graphs = [FunctionGraph([x, y], [op(x, y)]), FunctionGraph([z, a, m, n, b], [ops.gemm(z, a, m, n, b)])]
    rng = np.random.default_rng(0)
    values = [
        [rng.standard_normal(4), rng.standard_normal(4)],
        [rng.standard_normal((3, 3)), np.array(2.0), rng.standard_normal((3, 2)),
         rng.standard_normal((2, 3)), np.array(0.5)],
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        linkers = [CLinker(g) for g in graphs] + [CLinker(g) for g in graphs]
        same = all(
            np.array_equal(linker(*v)[0], NumpyLinker(linker.fgraph)(*v)[0])
            for linker, v in zip(linkers, values + values)
        )
    print(json.dumps({
        "available": c_available(),
        "compiled": sum(len(linker.c_nodes) for linker in linkers),
        "same": same,
        "warnings": [str(w.message) for w in caught if issubclass(w.category, CFallbackWarning)],
    }))
    """
)


def run_with(tmp_path, **env: str) -> dict:
    environment = {**os.environ, "RELWRITE_CACHE_DIR": str(tmp_path / "cache"), **env}
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=environment)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def assert_one_warning_and_numpy_results(report: dict, reason: str) -> None:
    assert report["available"] is False
    assert report["compiled"] == 0 and report["same"] is True
    assert len(report["warnings"]) == 1, report["warnings"]
    assert reason in report["warnings"][0] and "NumPy backend" in report["warnings"][0]


def test_relwrite_no_c_forces_the_numpy_backend(tmp_path):
    report = run_with(tmp_path, RELWRITE_NO_C="1")
    assert_one_warning_and_numpy_results(report, "RELWRITE_NO_C is set")


def test_a_missing_compiler_falls_back_with_one_warning(tmp_path):
    report = run_with(tmp_path, RELWRITE_CC="/nonexistent/gcc")
    assert_one_warning_and_numpy_results(report, "'/nonexistent/gcc' cannot run")


def test_a_failing_compiler_falls_back_with_one_warning(tmp_path):
    failing = tmp_path / "cc"
    failing.write_text("#!/bin/sh\nexit 1\n")
    failing.chmod(0o755)
    report = run_with(tmp_path, RELWRITE_CC=str(failing))
    assert_one_warning_and_numpy_results(report, "failed to report its version")


def test_a_compiler_that_cannot_build_falls_back_with_one_warning(tmp_path):
    broken = tmp_path / "cc"
    broken.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo "cc 1.0"; exit 0; fi\nexit 1\n')
    broken.chmod(0o755)
    report = run_with(tmp_path, RELWRITE_CC=str(broken))
    assert_one_warning_and_numpy_results(report, "failed (exit 1)")


@pytest.mark.skipif(not c_available(), reason="no working C compiler")
def test_with_a_compiler_nothing_is_warned_and_kernels_run(tmp_path):
    report = run_with(tmp_path)
    assert report["available"] is True and report["compiled"] == 4 and report["warnings"] == []


def test_c_available_is_false_when_forced_off(monkeypatch):
    monkeypatch.setenv("RELWRITE_NO_C", "1")
    assert c_available() is False

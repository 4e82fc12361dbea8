"""Finding CBLAS: numpy's OpenBLAS (64-bit integers), and scipy-openblas32 when it is installed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from relwrite.backends.c import c_available
from relwrite.backends.c.blas import BLAS_FUNCTIONS, _numpy_bundled, _symbols, find_blas


def test_numpys_openblas_is_found_with_64_bit_integers():
    if not _numpy_bundled():
        pytest.skip("this numpy does not bundle OpenBLAS")
    blas = find_blas()
    assert blas is not None and blas.int_bits == 64
    assert Path(blas.path).parent.name == "numpy.libs"
    assert len(blas.addresses) == len(BLAS_FUNCTIONS) and all(blas.addresses)


def test_libraries_without_cblas_are_skipped(tmp_path):
    assert _symbols(str(tmp_path / "missing.so")) is None
    assert _symbols("libc.so.6") is None


SCIPY_OPENBLAS32 = textwrap.dedent(
    """
    import json
    import numpy as np
    from relwrite.backends.c import blas
    blas._numpy_bundled = lambda: []
    blas._threadpoolctl_loaded = lambda: []
    from relwrite.backends.c import CLinker
    from relwrite.graph import ops
    from relwrite.graph.basic import matrix, scalar
    from relwrite.graph.fg import FunctionGraph
    z, x, y, a, b = matrix("Z"), matrix("X"), matrix("Y"), scalar("a"), scalar("b")
    linker = CLinker(FunctionGraph([z, a, x, y, b], [ops.gemm(z, a, x, y, b)]))
    rng = np.random.default_rng(0)
    zv, xv, yv = (rng.standard_normal((5, 5)) for _ in range(3))
    got = linker(zv, np.array(2.0), xv.T, yv, np.array(0.5))[0]
    print(json.dumps({
        "bits": blas.find_blas().int_bits,
        "compiled": len(linker.c_nodes),
        "error": float(np.max(np.abs(got - (0.5 * zv + 2.0 * xv.T @ yv)))),
    }))
    """
)


@pytest.mark.skipif(not c_available(), reason="no working C compiler")
def test_scipy_openblas32_is_the_fallback():
    pytest.importorskip("scipy_openblas32")
    run = subprocess.run([sys.executable, "-c", SCIPY_OPENBLAS32], capture_output=True, text=True, check=True)
    report = json.loads(run.stdout)
    assert report["bits"] == 32 and report["compiled"] == 1
    assert report["error"] < 1e-12
    assert np.isfinite(report["error"])

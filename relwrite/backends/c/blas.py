"""Finding CBLAS at run time: function pointers into an OpenBLAS already in the process.

Compiled modules do not link against BLAS; they receive function pointers
when loaded.  The library is, in order of preference:

1. the OpenBLAS numpy ships and has loaded (`numpy.libs/libscipy_openblas64_*`,
   symbols `scipy_cblas_dgemm64_`... taking 64-bit integers);
2. any OpenBLAS with the same symbols that threadpoolctl sees loaded;
3. the `scipy-openblas32` package when it is importable (symbols
   `scipy_cblas_dgemm`..., 32-bit integers).

Using the library numpy already loaded means one BLAS thread pool in the
process, which `threadpoolctl.threadpool_limits(n, user_api="blas")` controls.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

BLAS_FUNCTIONS = ("dgemm", "sgemm", "dgemv", "sgemv")
"""The CBLAS routines modules call, in the order of the table passed to a module."""

# (symbol prefix, symbol suffix, integer bits) of the OpenBLAS builds we recognise: numpy 2's and
# numpy 1's bundled ILP64 builds, and scipy-openblas32.
_NAMINGS = (("scipy_cblas_", "64_", 64), ("cblas_", "64_", 64), ("scipy_cblas_", "", 32))


@dataclass(frozen=True)
class BlasLibrary:
    """A loaded CBLAS: its file, its integer width and the address of each routine of BLAS_FUNCTIONS."""

    path: str
    int_bits: int
    addresses: tuple[int, ...]


def _symbols(path: str) -> BlasLibrary | None:
    """The routines of the library at `path`, if it exports one of the recognised namings."""
    try:
        library = ctypes.CDLL(path)
    except OSError:
        return None
    for prefix, suffix, bits in _NAMINGS:
        names = [f"{prefix}{name}{suffix}" for name in BLAS_FUNCTIONS]
        if all(hasattr(library, name) for name in names):
            addresses = tuple(ctypes.cast(getattr(library, name), ctypes.c_void_p).value for name in names)
            return BlasLibrary(path, bits, addresses)
    return None


def _numpy_bundled() -> list[str]:
    libs = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    return sorted(str(p) for p in libs.glob("lib*openblas*.so*"))


def _threadpoolctl_loaded() -> list[str]:
    from threadpoolctl import threadpool_info

    return [info["filepath"] for info in threadpool_info() if info.get("internal_api") == "openblas"]


def _scipy_openblas32() -> list[str]:
    try:
        import scipy_openblas32
    except ImportError:
        return []
    return [str(Path(scipy_openblas32.get_lib_dir()) / scipy_openblas32.get_library(fullname=True))]


@cache
def find_blas() -> BlasLibrary | None:
    """The CBLAS library modules call, found once per process; None when there is none."""
    # numpy's own copy first: a glob, cheaper than importing threadpoolctl (~12 ms).
    for candidates in (_numpy_bundled, _threadpoolctl_loaded, _scipy_openblas32):
        for path in candidates():
            found = _symbols(path)
            if found is not None:
                return found
    return None

"""erf, erfc and log1mexp in generated C: the NumPy backend's values to within two ulps, edge values
(the sign of a zero, infinities, NaN, subnormals, the branch point of log1mexp) exactly."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import relwrite as rw
from relwrite.backends.c import c_available
from relwrite.engine.db import mode_query

pytestmark = pytest.mark.skipif(not c_available(), reason="no working C compiler")

NAMES = ("erf", "erfc", "log1mexp")
DTYPES = ("float64", "float32")
EDGES = [
    -np.inf,
    -1e300,
    -745.2,
    -40.0,
    -0.6931471805599453,  # -log 2: where log1mexp changes formula
    -0.6931471805599452,
    -1e-310,  # subnormal
    -0.0,
    0.0,
    1e-310,
    0.5,
    5.9,  # erf rounds to 1 in float64
    26.6,  # erfc is subnormal
    30.0,  # erfc underflows to 0
    1e300,
    np.inf,
    np.nan,
]


@cache
def compiled(name: str, dtype: str, linker: str):
    x = rw.tensor("x", dtype=dtype, shape=(None,))
    return rw.function([x], getattr(rw, name)(x), mode=rw.Mode(linker, mode_query("fast_compile")))


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable values lie between a and b (0 where both are NaN or equal)."""
    a, b = np.asarray(a), np.asarray(b)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore"):
        spacing = np.spacing(np.maximum(np.abs(a), np.abs(b)).astype(a.dtype))
        gap = np.abs(a.astype(np.float64) - b.astype(np.float64)) / spacing.astype(np.float64)
    return np.where(same, 0.0, np.where(np.isfinite(gap), gap, np.inf))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_edge_values_are_numpys_sign_of_zero_included(name, dtype):
    with np.errstate(all="ignore"):  # 1e300 is inf in float32
        values = np.array(EDGES, dtype=dtype)
        from_c = compiled(name, dtype, "c")(values)
        from_numpy = compiled(name, dtype, "numpy")(values)
    assert from_c.dtype == from_numpy.dtype == np.dtype(dtype)
    assert np.array_equal(np.isnan(from_c), np.isnan(from_numpy))
    assert np.array_equal(
        np.signbit(from_c[~np.isnan(from_c)]), np.signbit(from_numpy[~np.isnan(from_numpy)])
    )
    assert ulps_apart(from_c, from_numpy).max() <= 2, list(zip(values, from_c, from_numpy))


def test_the_edge_values_are_the_functions_own():
    """Spot checks that do not depend on either backend: odd erf keeps -0.0, log1mexp(0) is -inf."""
    values = np.array([-np.inf, -0.0, 0.0, np.inf, np.nan])
    with np.errstate(all="ignore"):
        erf, erfc, log1mexp = (compiled(n, "float64", "c")(values) for n in NAMES)
    np.testing.assert_array_equal(erf, [-1.0, -0.0, 0.0, 1.0, np.nan])
    assert np.signbit(erf[1]) and not np.signbit(erf[2])
    np.testing.assert_array_equal(erfc, [2.0, 1.0, 1.0, 0.0, np.nan])
    np.testing.assert_array_equal(log1mexp, [-0.0, -np.inf, -np.inf, np.nan, np.nan])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_c_agrees_with_numpy_to_two_ulps(name, dtype, data):
    bound = 1e4 if name != "log1mexp" else 0.0
    elements = st.floats(-1e4, bound, width=32 if dtype == "float32" else 64, allow_subnormal=False)
    values = data.draw(arrays(dtype, st.integers(1, 16), elements=elements))
    with np.errstate(all="ignore"):
        from_c = compiled(name, dtype, "c")(values)
        from_numpy = compiled(name, dtype, "numpy")(values)
    assert ulps_apart(from_c, from_numpy).max() <= 2, list(zip(values, from_c, from_numpy))

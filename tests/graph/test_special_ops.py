"""erf, erfc and log1mexp: NumPy and C backends agree with the math library and with mpmath."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import relwrite as rw
from relwrite.backends.c import c_available

SPECIALS = [
    -np.inf,
    -800.0,
    -40.0,
    -1.0,
    -0.7,
    -0.6931,
    -1e-10,
    -0.0,
    0.0,
    1e-300,
    0.5,
    3.0,
    30.0,
    np.inf,
    np.nan,
]
LINKERS = ["numpy", *(["c"] if c_available() else [])]


def run(name: str, values: np.ndarray, linker: str) -> np.ndarray:
    x = rw.tensor("x", dtype=values.dtype, shape=(None,))
    mode = rw.Mode(linker, rw.engine.db.mode_query("fast_compile"))
    return rw.function([x], getattr(rw, name)(x), mode=mode)(values)


def exact(name: str, x: float) -> float:
    """The correctly rounded value (NaN where undefined), from mpmath at 200 bits."""
    with mpmath.workprec(200):
        if math.isnan(x) or (name == "log1mexp" and x > 0):
            return math.nan
        if name == "log1mexp":
            if x == 0:
                return -math.inf
            return float(mpmath.log(-mpmath.expm1(x)) if x > -1 else mpmath.log1p(-mpmath.exp(x)))
        return float(getattr(mpmath, name)(x))


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", ["erf", "erfc", "log1mexp"])
def test_special_values_match_the_exact_ones(name, linker):
    got = run(name, np.array(SPECIALS), linker)
    expected = np.array([exact(name, v) for v in SPECIALS])
    np.testing.assert_allclose(got, expected, rtol=4e-16, atol=0, equal_nan=True)


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("name", ["erf", "erfc", "log1mexp"])
def test_float32_stays_float32_and_close(name, linker):
    values = np.array([-3.0, -0.5, -1e-3, 0.25, 2.0], dtype=np.float32)
    got = run(name, values, linker)
    assert got.dtype == np.float32
    expected = np.array([exact(name, float(v)) for v in values])
    np.testing.assert_allclose(got, expected, rtol=2e-6, equal_nan=True)


@given(st.floats(-700, 0, exclude_max=True))
def test_log1mexp_is_accurate_where_the_plain_formula_is_not(x):
    """log(1 - exp(x)) loses every digit near 0 and below -37; log1mexp keeps them."""
    got = run("log1mexp", np.array([x]), "numpy")[0]
    assert got == pytest.approx(exact("log1mexp", x), rel=1e-15, abs=0)


def test_bool_literals_parse_as_bool_constants():
    graph = rw.parse("switch(True, a, b)", types={"a": "vector", "b": "vector"})
    condition = graph.owner.inputs[0]
    assert condition.dtype == "bool" and bool(condition.data) is True

"""Special and elementary functions in generated C (erf, erfc, log1mexp; FPBench's tan, asin, acos,
atan, sinh, cosh, cbrt, hypot, atan2): the NumPy backend's values to within a few ulps (`ULPS`), edge
values (the sign of a zero, infinities, NaN, subnormals, domain edges and branch points) exactly."""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import relwrite as rw
from relwrite.backends.c import c_available
from relwrite.engine.db import mode_query
from relwrite.graph import ops
from relwrite.graph.basic import scalar

pytestmark = pytest.mark.skipif(not c_available(), reason="no working C compiler")

SPECIAL = ("erf", "erfc", "log1mexp")
ELEMENTARY = ("tan", "asin", "acos", "atan", "sinh", "cosh", "cbrt", "hypot", "atan2")
NAMES = SPECIAL + ELEMENTARY
BINARY = ("hypot", "atan2")
DTYPES = ("float64", "float32")
ULPS = {"erf": 3, "erfc": 3, "log1mexp": 8, **dict.fromkeys(ELEMENTARY, 5)}
"""How many ulps C may be from NumPy.  Vectorized loops call libmvec's SIMD variants, within 4 ulps of
the exact value (glibc's bound), where NumPy's are within 1 (elementary: 3 measured, at tan's poles);
log1mexp composes two of them (6 measured, float32 near x = -1); float32 erfc measured 3 at 5 points
in a million."""
EDGES = [
    -np.inf,
    -1e300,
    -745.2,
    -40.0,
    -1.0000000000000002,  # just outside asin's and acos's domain
    -1.0,
    -0.6931471805599453,  # -log 2: where log1mexp changes formula
    -0.6931471805599452,
    -1e-310,  # subnormal
    -0.0,
    0.0,
    1e-310,
    0.5,
    0.9999999999999999,
    1.0,
    1.0000000000000002,
    1.5707963267948966,  # the float nearest pi/2: tan's largest finite values
    4.71238898038469,  # 3 pi/2
    5.9,  # erf rounds to 1 in float64
    26.6,  # erfc is subnormal
    30.0,  # erfc underflows to 0
    89.5,  # sinh and cosh overflow in float32
    710.5,  # ... and in float64
    1e22,  # tan's argument reduction at a large argument
    1e300,
    np.inf,
    np.nan,
]


def arity(name: str) -> int:
    return 3 if name == "fma" else 2 if name in BINARY else 1


@cache
def compiled(name: str, dtype: str, linker: str):
    """`name` applied elementwise to vectors of `dtype`, as a one-node Composite: the C linker compiles
    only Composites (a bare elementwise node is NumPy's)."""
    inner = [scalar(f"s{k}", dtype) for k in range(arity(name))]
    op = ops.Composite(inner, [getattr(ops, name)(*inner)])
    outer = [rw.tensor(f"x{k}", dtype=dtype, shape=(None,)) for k in range(arity(name))]
    f = rw.function(outer, op(*outer), mode=rw.Mode(linker, mode_query("fast_compile")))
    assert linker != "c" or f.linker.c_nodes
    return f


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable values lie between a and b (0 where both are NaN or equal)."""
    a, b = np.asarray(a), np.asarray(b)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and infinities have no spacing
        spacing = np.spacing(np.maximum(np.abs(a), np.abs(b)).astype(a.dtype))
        gap = np.abs(a.astype(np.float64) - b.astype(np.float64)) / spacing.astype(np.float64)
    return np.where(same, 0.0, np.where(np.isfinite(gap), gap, np.inf))


def both(name: str, dtype: str, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        return compiled(name, dtype, "c")(*values), compiled(name, dtype, "numpy")(*values)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_edge_values_are_numpys_sign_of_zero_included(name, dtype):
    with np.errstate(all="ignore"):  # 1e300 is inf in float32
        edges = np.array(EDGES, dtype=dtype)
    columns = np.array(list(itertools.product(edges, repeat=arity(name))), dtype=dtype).T
    values = [np.ascontiguousarray(c) for c in columns]
    from_c, from_numpy = both(name, dtype, values)
    assert from_c.dtype == from_numpy.dtype == np.dtype(dtype)
    assert np.array_equal(np.isnan(from_c), np.isnan(from_numpy))
    assert np.array_equal(
        np.signbit(from_c[~np.isnan(from_c)]), np.signbit(from_numpy[~np.isnan(from_numpy)])
    )
    assert ulps_apart(from_c, from_numpy).max() <= ULPS[name], list(zip(*values, from_c, from_numpy))


def test_the_edge_values_are_the_functions_own():
    """Spot checks that do not depend on either backend: odd erf keeps -0.0, log1mexp(0) is -inf."""
    values = np.array([-np.inf, -0.0, 0.0, np.inf, np.nan])
    with np.errstate(all="ignore"):
        erf, erfc, log1mexp = (compiled(n, "float64", "c")(values) for n in SPECIAL)
    np.testing.assert_array_equal(erf, [-1.0, -0.0, 0.0, 1.0, np.nan])
    assert np.signbit(erf[1]) and not np.signbit(erf[2])
    np.testing.assert_array_equal(erfc, [2.0, 1.0, 1.0, 0.0, np.nan])
    np.testing.assert_array_equal(log1mexp, [-0.0, -np.inf, -np.inf, np.nan, np.nan])


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("tan", (-0.0,), -0.0),
        ("tan", (np.inf,), np.nan),
        ("asin", (1.0,), math.pi / 2),
        ("asin", (-1.0000000000000002,), np.nan),
        ("asin", (-0.0,), -0.0),
        ("acos", (1.0,), 0.0),
        ("acos", (-1.0,), math.pi),
        ("acos", (2.0,), np.nan),
        ("atan", (-np.inf,), -math.pi / 2),
        ("atan", (-0.0,), -0.0),
        ("sinh", (-0.0,), -0.0),
        ("sinh", (-711.0,), -np.inf),
        ("cosh", (-np.inf,), np.inf),
        ("cosh", (-0.0,), 1.0),
        ("cbrt", (-8.0,), -2.0),
        ("cbrt", (-0.0,), -0.0),
        ("cbrt", (-np.inf,), -np.inf),
        ("hypot", (3.0, -4.0), 5.0),
        ("hypot", (np.nan, -np.inf), np.inf),  # C99: an infinite operand wins over NaN
        ("hypot", (1e300, 1e300), 1.4142135623730951e300),  # no intermediate overflow
        ("atan2", (-0.0, -1.0), -math.pi),
        ("atan2", (0.0, -0.0), math.pi),
        ("atan2", (-0.0, 0.0), -0.0),
        ("atan2", (np.inf, -np.inf), 3 * math.pi / 4),
        ("atan2", (1.0, np.nan), np.nan),
    ],
)
@pytest.mark.parametrize("linker", ["c", "numpy"])
def test_elementary_values_at_domain_edges(name, args, expected, linker):
    with np.errstate(all="ignore"):
        (got,) = compiled(name, "float64", linker)(*(np.array([a]) for a in args))
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected and np.signbit(got) == np.signbit(expected)


def _floats(dtype: str) -> st.SearchStrategy[float]:
    """Any float of `dtype` (NaN, infinities and subnormals included), and as often one near the
    functions' edges: inside [-1.5, 1.5] (asin, acos) or near a multiple of pi/2 (tan's poles)."""
    width = 32 if dtype == "float32" else 64
    return st.one_of(
        st.floats(width=width),
        st.floats(-1.5, 1.5, width=width),
        st.builds(lambda k, d: k * math.pi / 2 + d, st.integers(-1000, 1000), st.floats(-1e-6, 1e-6)).map(
            lambda v: float(np.array(v, dtype=dtype))
        ),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ELEMENTARY)
@given(data=st.data())
def test_elementary_c_agrees_with_numpy(name, dtype, data):
    values = [data.draw(arrays(dtype, 8, elements=_floats(dtype))) for _ in range(arity(name))]
    from_c, from_numpy = both(name, dtype, values)
    assert np.array_equal(np.isnan(from_c), np.isnan(from_numpy))
    assert ulps_apart(from_c, from_numpy).max() <= ULPS[name], list(zip(*values, from_c, from_numpy))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", SPECIAL)
@given(data=st.data())
def test_special_c_agrees_with_numpy(name, dtype, data):
    bound = 1e4 if name != "log1mexp" else 0.0
    elements = st.floats(-1e4, bound, width=32 if dtype == "float32" else 64, allow_subnormal=False)
    values = data.draw(arrays(dtype, st.integers(1, 16), elements=elements))
    from_c, from_numpy = both(name, dtype, [values])
    assert ulps_apart(from_c, from_numpy).max() <= ULPS[name], list(zip(values, from_c, from_numpy))


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_fma_is_numpys_bit_for_bit(dtype, data):
    """math.h's fma (fmaf) and the NumPy backend's both round once: the same bits, the sign of a zero
    included, on any floats and on sums that cancel (c near -a * b) or land near ties."""
    width = np.dtype(dtype).itemsize * 8
    floats = arrays(dtype, 24, elements=st.floats(width=width))
    a, b, c = (data.draw(floats) for _ in range(3))
    with np.errstate(all="ignore"):
        c = np.where(data.draw(arrays(bool, 24)), -(a * b) * data.draw(st.sampled_from([1, 1 + 2.0**-30])), c)
        c = c.astype(dtype)
    from_c, from_numpy = both("fma", dtype, [a, b, c])
    assert np.array_equal(np.isnan(from_c), np.isnan(from_numpy))
    known = ~np.isnan(from_numpy)
    bits = f"u{width // 8}"
    np.testing.assert_array_equal(from_c[known].view(bits), from_numpy[known].view(bits))

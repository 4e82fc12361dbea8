"""Generated C: the ndarray layout, literals, what has no C form, vector math and the module sources."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from relwrite.backends.c import c_available
from relwrite.backends.c.codegen import (
    Unsupported,
    _literal,
    blas_kernel_name,
    blas_source,
    composite_kernel,
    kernels_source,
    ndarray_layout,
    vector_math_declarations,
)
from relwrite.backends.c.compiler import ModuleCache, find_toolchain
from relwrite.graph import ops
from relwrite.graph.basic import constant, scalar

requires_c = pytest.mark.skipif(not c_available(), reason="no working C compiler")


@pytest.mark.parametrize(
    "array",
    [
        np.zeros((4, 6))[::2, ::-3],
        np.ones(5, dtype=np.int16),
        np.empty((2, 3, 4, 5), order="F"),
        np.array(1.5),
    ],
)
def test_the_measured_ndarray_layout_reads_any_array(array):
    layout = ndarray_layout()
    base = id(array)
    assert ctypes.c_void_p.from_address(base + layout.data).value == array.ctypes.data
    assert ctypes.c_int.from_address(base + layout.ndim).value == array.ndim
    if array.ndim:
        read = (ctypes.c_ssize_t * array.ndim).from_address
        assert tuple(read(ctypes.c_void_p.from_address(base + layout.dims).value)) == array.shape
        assert tuple(read(ctypes.c_void_p.from_address(base + layout.strides).value)) == array.strides


@pytest.mark.parametrize(
    ("value", "dtype", "code"),
    [
        (0.1, "float64", "((double)(0x1.999999999999ap-4))"),
        (-0.0, "float64", "((double)(-0x0.0p+0))"),
        (np.inf, "float32", "((float)(__builtin_inf()))"),
        (-np.inf, "float64", "((double)((-__builtin_inf())))"),
        (np.nan, "float64", '((double)(__builtin_nan("")))'),
        (True, "bool", "((uint8_t)1)"),
        (-(2**63), "int64", "(INT64_MIN)"),
        (2**64 - 1, "uint64", "((uint64_t)18446744073709551615ULL)"),
        (-7, "int8", "((int8_t)-7LL)"),
    ],
)
def test_constants_become_exact_c_literals(value, dtype, code):
    literal = _literal(constant(value, dtype=dtype))
    assert (literal.code, literal.dtype) == (code, dtype)


def test_float32_literals_are_exact():
    value = np.float32(0.1)
    assert _literal(constant(value, dtype="float32")).code == f"((float)({float(value).hex()}))"


@pytest.mark.parametrize(
    "build",
    [
        lambda: ops.pow(scalar("x", "int32"), scalar("y", "int32")),  # numpy raises on negative powers
        lambda: ops.cast(scalar("x"), "int32"),  # out-of-range float-to-int is undefined in C
        lambda: ops.exp(scalar("x", "int8")),  # computes in float16
        lambda: ops.lt(scalar("x", "int64"), scalar("y", "uint64")),  # a mixed-type loop
        lambda: ops.add(scalar("x", "float16"), scalar("y", "float16")),
    ],
)
def test_ops_without_a_c_form_are_unsupported(build):
    out = build()
    op = ops.Composite(list(out.owner.inputs), [out])
    with pytest.raises(Unsupported):
        composite_kernel(op, "rw_k0")


def test_a_composite_is_one_loop_over_restrict_pointers():
    xi, yi = scalar("x"), scalar("y", "float32")
    op = ops.Composite([xi, yi], [ops.exp(xi) * yi, ops.lt(xi, yi)])
    kernel = composite_kernel(op, "rw_k7")
    assert kernel.name == "rw_k7" and kernel.n_args == 4
    assert kernel.source.count("for (ptrdiff_t j = 0; j < n; j++)") == 1
    assert "double *restrict o0" in kernel.source and "uint8_t *restrict o1" in kernel.source
    assert "const float *restrict i1" in kernel.source
    assert "rw_elemwise(4, 2, arrays, rw_k7_sizes, rw_k7_block)" in kernel.source


def test_vector_math_is_declared_simd_in_double_and_float():
    text = vector_math_declarations(frozenset({"exp", "pow"}))
    assert 'double exp(double) __attribute__((simd("notinbranch")));' in text
    assert 'float expf(float) __attribute__((simd("notinbranch")));' in text
    assert 'double pow(double, double) __attribute__((simd("notinbranch")));' in text


def test_blas_sources_use_the_blas_integer_width():
    layout = ndarray_layout()
    assert "typedef int64_t rw_int;" in blas_source(layout, 64)
    assert "typedef int32_t rw_int;" in blas_source(layout, 32)
    with pytest.raises(ValueError, match="32 or 64"):
        blas_source(layout, 16)
    assert blas_kernel_name(ops.Gemm, "float32") == "rw_gemm_float32"
    with pytest.raises(Unsupported):
        blas_kernel_name(ops.Gemm, "int64")


@requires_c
def test_loops_call_the_vector_math_library(tmp_path):
    chain = find_toolchain()
    if "exp" not in chain.vector_math:
        pytest.skip("no libmvec variant of exp here")
    xi = scalar("x")
    kernel = composite_kernel(ops.Composite([xi], [ops.exp(xi)]), "rw_k0")
    cache = ModuleCache(tmp_path, chain)
    source = kernels_source([kernel], chain.vector_math)
    cache.load(source)
    widest = {"x86-64-v3": b"_ZGVdN4v_exp", "x86-64-v4": b"_ZGVeN8v_exp"}.get(chain.target, b"_ZGVbN2v_exp")
    assert widest in cache.path(cache.key(source)).read_bytes()

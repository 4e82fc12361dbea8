"""Static shapes never claim a length the value lacks.

BLAS ops compute `b * Z + a * X @ Y` (and the gemv / ger analogues) with
NumPy's broadcasting, so a row Z of shape (1, n) gives an (m, n) result: the
static shape is the broadcast one in every backend.  A property test builds
random graphs over every op, with static lengths partly hidden, and checks each
node's static type against its evaluated value and against NumPy's.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.backends.c import CLinker, c_available
from relwrite.backends.numpy.function import numpy_function
from relwrite.compile.function import Mode, function
from relwrite.graph import ops
from relwrite.graph.basic import Variable, matrix, scalar, tensor, vector
from relwrite.graph.fg import FunctionGraph

MODES = ["fast_compile", "fast_run", Mode("numpy", "fast_run")]


@pytest.mark.parametrize("mode", MODES, ids=str)
def test_reshaping_a_gemm_of_a_row_keeps_numpys_shape(mode):
    """The issue's repro: the row Z made gemm's type (1, None), so Reshape((1, -1)) looked like a no-op."""
    z, x, y = matrix("Z", shape=(1, None)), matrix("X"), matrix("Y")
    out = ops.Reshape((1, -1))(ops.gemm(z, -1.0, x, y, 0.5))
    assert out.type.shape == (1, None)
    values = [np.arange(4.0).reshape(1, 4), np.ones((3, 2)), np.ones((2, 4))]
    got = function([z, x, y], out, mode=mode)(*values)
    np.testing.assert_array_equal(got, (0.5 * values[0] - values[1] @ values[2]).reshape(1, -1))


# (op, runtime shapes of the inputs, NumPy's definition); alpha and beta are 0-d inputs
BROADCASTING_CASES = [
    (ops.gemm, [(1, 4), (), (3, 2), (2, 4), ()], lambda z, a, x, y, b: b * z + a * (x @ y)),
    (ops.gemm, [(3, 1), (), (3, 2), (2, 4), ()], lambda z, a, x, y, b: b * z + a * (x @ y)),
    (ops.gemm, [(1, 1), (), (3, 2), (2, 4), ()], lambda z, a, x, y, b: b * z + a * (x @ y)),
    (ops.gemm, [(3, 4), (), (1, 2), (2, 4), ()], lambda z, a, x, y, b: b * z + a * (x @ y)),
    (ops.gemm, [(3, 4), (), (3, 2), (2, 1), ()], lambda z, a, x, y, b: b * z + a * (x @ y)),
    (ops.gemv, [(1,), (), (3, 2), (2,), ()], lambda y, a, m, x, b: b * y + a * (m @ x)),
    (ops.gemv, [(3,), (), (1, 2), (2,), ()], lambda y, a, m, x, b: b * y + a * (m @ x)),
    (ops.ger, [(1, 3), (), (2,), (3,)], lambda m, a, x, y: m + a * np.outer(x, y)),
    (ops.ger, [(2, 1), (), (2,), (3,)], lambda m, a, x, y: m + a * np.outer(x, y)),
    (ops.ger, [(2, 3), (), (1,), (3,)], lambda m, a, x, y: m + a * np.outer(x, y)),
    (ops.ger, [(2, 3), (), (2,), (1,)], lambda m, a, x, y: m + a * np.outer(x, y)),
]


def _blas_case(op, shapes, reference, static_known):
    inputs = [tensor(f"i{k}", shape=s if static_known else (None,) * len(s)) for k, s in enumerate(shapes)]
    values = [np.linspace(-1.0, 2.0, int(np.prod(s))).reshape(s) for s in shapes]
    return inputs, values, op(*inputs), reference(*values)


@pytest.mark.parametrize("static_known", [True, False], ids=["static", "unknown"])
@pytest.mark.parametrize(("op", "shapes", "reference"), BROADCASTING_CASES, ids=lambda c: str(c)[:40])
def test_blas_ops_broadcast_their_sum_as_numpy_in_every_mode(op, shapes, reference, static_known):
    inputs, values, out, expected = _blas_case(op, shapes, reference, static_known)
    if static_known:
        assert out.type.shape == expected.shape
    for mode in MODES:
        got = function(inputs, out, mode=mode)(*values)
        assert got.shape == expected.shape, mode
        np.testing.assert_allclose(got, expected, rtol=1e-12, err_msg=str(mode))


@pytest.mark.skipif(not c_available(), reason="no working C compiler")
@pytest.mark.parametrize(("op", "shapes", "reference"), BROADCASTING_CASES, ids=lambda c: str(c)[:40])
def test_the_c_kernels_agree_with_numpy_on_broadcast_operands(op, shapes, reference):
    inputs, values, out, expected = _blas_case(op, shapes, reference, static_known=False)
    linker = CLinker(FunctionGraph(inputs, [out]))
    assert [type(n.op) for n in linker.c_nodes] == [type(op)]
    (got,) = linker(*values)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_blas_ops_refuse_lengths_that_never_broadcast():
    a = scalar("a")
    with pytest.raises(
        TypeError, match=r"Z of shape \(2, 4\) does not broadcast with X @ Y of shape \(3, None\)"
    ):
        ops.gemm(matrix(shape=(2, 4)), a, matrix(shape=(3, 2)), matrix(), a)
    with pytest.raises(TypeError, match=r"y of shape \(2,\) does not broadcast with A @ x of shape \(3,\)"):
        ops.gemv(vector(shape=(2,)), a, matrix(shape=(3, None)), vector(), a)
    with pytest.raises(TypeError, match=r"A of shape \(2, 3\) does not broadcast with outer\(x, y\)"):
        ops.ger(matrix(shape=(2, 3)), a, vector(), vector(shape=(4,)))


# -- every op: static shapes against evaluated values ----------------------------------------------------


class _Builder:
    """A random graph under construction: each variable with NumPy's value for it."""

    def __init__(self, draw):
        self.draw = draw
        self.inputs: list[Variable] = []
        self.input_values: list[np.ndarray] = []
        self.built: list[tuple[Variable, np.ndarray]] = []

    def fresh(self, shape: tuple[int, ...], dtype: str = "float64") -> tuple[Variable, np.ndarray]:
        """A new input of runtime `shape`, its static lengths each known or hidden."""
        static = tuple(None if self.draw(st.booleans()) else n for n in shape)
        var = tensor(f"i{len(self.inputs)}", dtype=dtype, shape=static)
        value = np.linspace(0.25, 1.5, int(np.prod(shape))).reshape(shape).astype(dtype)
        self.inputs.append(var)
        self.input_values.append(value)
        return var, value

    def operand(self, ndim: int | None = None) -> tuple[Variable, np.ndarray]:
        """A variable built so far (of rank `ndim` if given), or a fresh input."""
        pool = [(v, a) for v, a in self.built if ndim is None or a.ndim == ndim]
        if pool and self.draw(st.booleans()):
            return self.draw(st.sampled_from(pool))
        rank = self.draw(st.integers(0, 2)) if ndim is None else ndim
        return self.fresh(tuple(self.draw(st.integers(1, 3)) for _ in range(rank)))

    def partner(self, shape: tuple[int, ...]) -> tuple[Variable, np.ndarray]:
        """A fresh input broadcasting with `shape`: each length the same or 1, rank up to one more."""
        lengths = [self.draw(st.sampled_from([n, 1])) for n in shape]
        extra = [self.draw(st.integers(1, 3))] if len(shape) < 2 and self.draw(st.booleans()) else []
        dropped = self.draw(st.integers(0, len(lengths))) if not extra else 0
        return self.fresh(tuple(extra + lengths[dropped:]))

    def length_next_to(self, n: int) -> int:
        """A length that broadcasts with `n` in a sum: `n`, or 1 (or any, when `n` is 1)."""
        return self.draw(st.integers(1, 3)) if n == 1 else self.draw(st.sampled_from([n, 1]))

    def step(self) -> None:
        kind = self.draw(st.sampled_from(BUILDERS))
        var, value = kind(self)
        self.built.append((var, value))


def _elemwise(b: _Builder):
    op, reference = b.draw(
        st.sampled_from([(ops.add, np.add), (ops.mul, np.multiply), (ops.maximum, np.maximum)])
    )
    x, xv = b.operand()
    y, yv = b.partner(xv.shape)
    return (op(x, y), reference(xv, yv)) if b.draw(st.booleans()) else (op(y, x), reference(yv, xv))


def _unary(b: _Builder):
    x, xv = b.operand()
    return ops.tanh(x), np.tanh(xv)


def _composite(b: _Builder):
    s, t = scalar("s"), scalar("t")
    outputs = [s * ops.exp(t) + 1.0, ops.neg(s)]
    index = b.draw(st.integers(0, 1))
    x, xv = b.operand()
    y, yv = b.partner(xv.shape)
    out = ops.Composite([s, t], outputs)(x, y)[index]
    expected = [xv * np.exp(yv) + 1.0, np.broadcast_to(-xv, np.broadcast_shapes(xv.shape, yv.shape))][index]
    return out, expected


def _dot22(b: _Builder):
    x, xv = b.operand(2)
    y, yv = b.fresh((xv.shape[1], b.draw(st.integers(1, 3))))
    return ops.dot22(x, y), xv @ yv


def _dot(b: _Builder):
    x, xv = b.operand(b.draw(st.integers(1, 2)))
    y, yv = b.fresh((xv.shape[-1],) + ((b.draw(st.integers(1, 3)),) if b.draw(st.booleans()) else ()))
    return ops.dot(x, y), np.dot(xv, yv)


def _gemm(b: _Builder):
    z, zv = b.operand(2)
    m, n, k = b.length_next_to(zv.shape[0]), b.length_next_to(zv.shape[1]), b.draw(st.integers(1, 3))
    (a, av), (c, cv) = b.fresh(()), b.fresh(())
    (x, xv), (y, yv) = b.fresh((m, k)), b.fresh((k, n))
    return ops.gemm(z, a, x, y, c), cv * zv + av * (xv @ yv)


def _gemv(b: _Builder):
    y, yv = b.operand(1)
    m, n = b.length_next_to(yv.shape[0]), b.draw(st.integers(1, 3))
    (a, av), (c, cv) = b.fresh(()), b.fresh(())
    (mat, matv), (x, xv) = b.fresh((m, n)), b.fresh((n,))
    return ops.gemv(y, a, mat, x, c), cv * yv + av * (matv @ xv)


def _ger(b: _Builder):
    mat, matv = b.operand(2)
    m, n = b.length_next_to(matv.shape[0]), b.length_next_to(matv.shape[1])
    a, av = b.fresh(())
    (x, xv), (y, yv) = b.fresh((m,)), b.fresh((n,))
    return ops.ger(mat, a, x, y), matv + av * np.outer(xv, yv)


def _reshape(b: _Builder):
    x, xv = b.operand()
    shape = b.draw(st.sampled_from([(-1,), (1, -1), (-1, 1), (xv.size,), (1, xv.size, 1)]))
    return ops.Reshape(shape)(x), xv.reshape(shape)


def _dimshuffle(b: _Builder):
    x, xv = b.operand()
    if xv.ndim == 2 and b.draw(st.booleans()):
        return ops.transpose(x), xv.T
    order = ("x", *range(xv.ndim)) if b.draw(st.booleans()) else (*range(xv.ndim), "x")
    return ops.DimShuffle(xv.ndim, order)(x), xv.reshape(
        (*xv.shape, 1) if order[-1] == "x" else (1, *xv.shape)
    )


def _reduce(b: _Builder):
    x, xv = b.operand()
    op_class, reference = b.draw(st.sampled_from([(ops.Sum, np.sum), (ops.Max, np.max), (ops.Mean, np.mean)]))
    axis = b.draw(st.none() | st.integers(-xv.ndim, xv.ndim - 1)) if xv.ndim else None
    return op_class(axis)(x), np.asarray(reference(xv, axis=axis))


def _softmax(b: _Builder):
    x, xv = b.operand(b.draw(st.integers(1, 2)))
    shifted = np.exp(xv - xv.max(axis=-1, keepdims=True))
    return ops.softmax(x), shifted / shifted.sum(axis=-1, keepdims=True)


def _alloc(b: _Builder):
    x, xv = b.operand()
    target = tuple(b.length_next_to(n) if n == 1 else n for n in xv.shape)
    target = ((b.draw(st.integers(1, 3)),) if len(target) < 2 and b.draw(st.booleans()) else ()) + target
    return ops.alloc(x, *target), np.broadcast_to(xv, target)


def _fill(b: _Builder):
    x, xv = b.operand()
    y, yv = b.partner(xv.shape)
    return ops.fill(x, y), np.broadcast_to(yv, np.broadcast_shapes(xv.shape, yv.shape))


BUILDERS = [
    _elemwise,
    _unary,
    _composite,
    _dot22,
    _dot,
    _gemm,
    _gemv,
    _ger,
    _reshape,
    _dimshuffle,
    _reduce,
    _softmax,
    _alloc,
    _fill,
]


@st.composite
def graphs_with_values(draw):
    builder = _Builder(draw)
    for _ in range(draw(st.integers(1, 6))):
        builder.step()
    return builder


def _assert_fits(var: Variable, value: np.ndarray, expected: np.ndarray, where: str) -> None:
    assert value.dtype == np.dtype(var.dtype), f"{where}: {var} is {value.dtype}, typed {var.type}"
    assert value.shape == expected.shape, (
        f"{where}: {var} has shape {value.shape}, NumPy gives {expected.shape}"
    )
    assert value.ndim == var.ndim and all(s is None or s == n for s, n in zip(var.type.shape, value.shape)), (
        f"{where}: {var} of type {var.type} evaluated to shape {value.shape}"
    )


@given(graphs_with_values())
def test_every_nodes_static_type_fits_its_value(builder):
    outputs = [var for var, _ in builder.built]
    expected = [value for _, value in builder.built]
    values = numpy_function(builder.inputs, outputs)(*builder.input_values)
    for var, value, want in zip(outputs, values, expected):
        _assert_fits(var, value, want, "unrewritten")
        np.testing.assert_allclose(value, want, rtol=1e-6)
    rewritten = function(builder.inputs, outputs, mode=Mode("numpy", "fast_run"))(*builder.input_values)
    for var, value, want in zip(outputs, rewritten, expected):
        _assert_fits(var, value, want, "fast_run")
        np.testing.assert_allclose(value, want, rtol=1e-6)

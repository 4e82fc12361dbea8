"""Every op's NumPy implementation equals the numpy function it names, with the node's dtype."""

from __future__ import annotations

import inspect
import math
import pickle
import warnings
from collections.abc import Callable
from fractions import Fraction
from functools import reduce

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, reject, settings

from relwrite.backends.numpy import EvaluationError, evaluate, numpy_impl
from relwrite.backends.numpy.fma import fma
from relwrite.graph import ops
from relwrite.graph import shape as shape_module
from relwrite.graph import subtensor as subtensor_module
from relwrite.graph.basic import Apply, Op, Variable, scalar
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.subtensor import subtensor
from relwrite.graph.types import TensorType

DTYPES = ("float64", "float32", "int64", "int32", "int8", "uint8")
FLOATS = ("float64", "float32")
NUMERIC = (*DTYPES, "float16", "bool")

# -- strategies ---------------------------------------------------------------------------------


def arrays(dtype: str, shape: tuple[int, ...], bound: int | None = None) -> st.SearchStrategy[np.ndarray]:
    """Arrays of `dtype` and `shape`: every value of the dtype (nan, inf...) unless `bound` limits them."""
    dt = np.dtype(dtype)
    if bound is None or dt.kind == "b":
        return hnp.arrays(dt, shape)
    if dt.kind == "f":
        return hnp.arrays(dt, shape, elements=st.floats(-bound, bound, width=dt.itemsize * 8))
    info = np.iinfo(dt)
    return hnp.arrays(dt, shape, elements=st.integers(max(-bound, info.min), min(bound, info.max)))


small_shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def variable_for(array: np.ndarray, static: tuple[int | None, ...] | None = None) -> Variable:
    """An input variable of the array's dtype and rank, with unknown lengths unless `static`."""
    shape = (None,) * array.ndim if static is None else static
    return TensorType(array.dtype, shape)()


def node_on(op: Op, values: list[np.ndarray]) -> Apply:
    """The node of `op` on input variables typed after `values`; skips dtype mixes the op rejects."""
    try:
        return op.make_node(*(variable_for(v) for v in values))
    except TypeError:
        reject()


def elementwise_inputs(data: st.DataObject, count: int, dtypes=DTYPES, bound=None) -> list[np.ndarray]:
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=count, max_dims=3, max_side=3)
    ).input_shapes
    return [data.draw(arrays(data.draw(st.sampled_from(dtypes)), shape, bound)) for shape in shapes]


# A case draws inputs and returns (node, input arrays, reference function, exact comparison).
Case = Callable[[st.DataObject], tuple[Apply, list[np.ndarray], Callable[..., object], bool]]
CASES: dict[type[Op], Case] = {}


def case(*classes: type[Op]):
    def register(fn: Case) -> Case:
        for cls in classes:
            CASES[cls] = fn
        return fn

    return register


UNARY = {
    ops.Neg: (ops.neg, np.negative),
    ops.Exp: (ops.exp, np.exp),
    ops.Log: (ops.log, np.log),
    ops.Log1p: (ops.log1p, np.log1p),
    ops.Expm1: (ops.expm1, np.expm1),
    ops.Sqrt: (ops.sqrt, np.sqrt),
    ops.Sqr: (ops.sqr, np.square),
    ops.Sin: (ops.sin, np.sin),
    ops.Cos: (ops.cos, np.cos),
    ops.Tanh: (ops.tanh, np.tanh),
    ops.Tan: (ops.tan, np.tan),
    ops.Asin: (ops.asin, np.arcsin),
    ops.Acos: (ops.acos, np.arccos),
    ops.Atan: (ops.atan, np.arctan),
    ops.Sinh: (ops.sinh, np.sinh),
    ops.Cosh: (ops.cosh, np.cosh),
    ops.Cbrt: (ops.cbrt, np.cbrt),
    ops.Abs: (ops.abs, np.absolute),
    ops.Identity: (ops.identity, lambda x: x),
    ops.Reciprocal: (ops.reciprocal, lambda x: np.true_divide(1, x)),
}
BINARY = {
    ops.Sub: (ops.sub, np.subtract),
    ops.TrueDiv: (ops.true_div, np.true_divide),
    ops.Pow: (ops.pow, np.power),
    ops.Maximum: (ops.maximum, np.maximum),
    ops.Minimum: (ops.minimum, np.minimum),
    ops.Hypot: (ops.hypot, np.hypot),
    ops.Atan2: (ops.atan2, np.arctan2),
    ops.Lt: (ops.lt, np.less),
    ops.Le: (ops.le, np.less_equal),
    ops.Gt: (ops.gt, np.greater),
    ops.Ge: (ops.ge, np.greater_equal),
    ops.Eq: (ops.eq, np.equal),
    ops.Neq: (ops.neq, np.not_equal),
}
VARIADIC = {ops.Add: (ops.add, np.add), ops.Mul: (ops.mul, np.multiply)}


def _unary_case(cls):
    op, reference = UNARY[cls]

    def draw(data):
        values = elementwise_inputs(data, 1)
        return node_on(op, values), values, reference, True

    return draw


def _binary_case(cls):
    op, reference = BINARY[cls]

    def draw(data):
        values = elementwise_inputs(data, 2)
        return node_on(op, values), values, reference, True

    return draw


def _variadic_case(cls):
    op, ufunc = VARIADIC[cls]

    def draw(data):
        values = elementwise_inputs(data, data.draw(st.integers(1, 4)))
        return node_on(op, values), values, lambda *xs: reduce(ufunc, xs), True

    return draw


for _cls in UNARY:
    case(_cls)(_unary_case(_cls))
for _cls in BINARY:
    case(_cls)(_binary_case(_cls))
for _cls in VARIADIC:
    case(_cls)(_variadic_case(_cls))


def _naive_sigmoid(x):
    x = x.astype(np.exp(np.zeros((), x.dtype)).dtype)
    return 1 / (1 + np.exp(-x))


def _naive_softplus(x):
    x = x.astype(np.exp(np.zeros((), x.dtype)).dtype)
    return np.log1p(np.exp(x))


@case(ops.Sigmoid)
def _sigmoid(data):
    values = elementwise_inputs(data, 1, bound=10)
    return node_on(ops.sigmoid, values), values, _naive_sigmoid, False


@case(ops.Softplus)
def _softplus(data):
    values = elementwise_inputs(data, 1, bound=10)
    return node_on(ops.softplus, values), values, _naive_softplus, False


def _naive_special(function):
    def naive(x):
        x = x.astype(np.exp(np.zeros((), x.dtype)).dtype)
        return np.vectorize(function, otypes=[x.dtype])(x)

    return naive


@case(ops.Erf)
def _erf(data):
    values = elementwise_inputs(data, 1, bound=10)
    return node_on(ops.erf, values), values, _naive_special(math.erf), False


@case(ops.Erfc)
def _erfc(data):
    values = elementwise_inputs(data, 1, bound=10)
    return node_on(ops.erfc, values), values, _naive_special(math.erfc), False


@case(ops.Log1mexp)
def _log1mexp(data):
    values = elementwise_inputs(data, 1, bound=10)
    return (
        node_on(ops.log1mexp, values),
        values,
        _naive_special(lambda v: math.log(-math.expm1(v)) if v < 0 else (-math.inf if v == 0 else math.nan)),
        False,
    )


@case(ops.Switch)
def _switch(data):
    cond, a, b = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3)
    ).input_shapes
    values = [data.draw(arrays("bool", cond))]
    values += [data.draw(arrays(data.draw(st.sampled_from(DTYPES)), s)) for s in (a, b)]
    return node_on(ops.switch, values), values, np.where, True


def rounded(value: Fraction, dtype: np.dtype) -> float:
    """`value` rounded to `dtype` by integer arithmetic: nearest, ties to even, subnormals, infinity
    from the largest float plus half its ulp on."""
    if value == 0:
        return 0.0
    info = np.finfo(dtype)
    digits, magnitude = info.nmant + 1, abs(value)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1  # now 2**exponent <= magnitude < 2**(exponent + 1)
    quantum = max(exponent, int(info.minexp)) - (digits - 1)
    scaled = magnitude / Fraction(2) ** quantum
    m, rest = divmod(scaled.numerator, scaled.denominator)
    if 2 * rest > scaled.denominator or (2 * rest == scaled.denominator and m % 2):
        m += 1
    result = (
        math.inf
        if Fraction(m) * Fraction(2) ** quantum >= Fraction(2) ** int(info.maxexp)
        else math.ldexp(m, quantum)
    )
    return result if value > 0 else -result


def exact_fma(a: float, b: float, c: float, dtype: np.dtype) -> float:
    """IEEE 754's fusedMultiplyAdd of floats of `dtype`, spelled out: NaN cases, infinities, exact
    zeros' signs, then the exact value rounded once."""
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return math.nan
        product = math.copysign(math.inf, a) * math.copysign(1.0, b)
        return math.nan if math.isinf(c) and c != product else product
    if math.isinf(c):
        return c
    value = Fraction(a) * Fraction(b) + Fraction(c)
    if value == 0:  # an exact zero is -0 only as the sum of two negative zeros
        negative_product = (math.copysign(1.0, a) * math.copysign(1.0, b) < 0) and (a == 0 or b == 0)
        return -0.0 if negative_product and math.copysign(1.0, c) < 0 and c == 0 else 0.0
    return rounded(value, dtype)


def exact_fmas(a, b, c, dtype=None) -> np.ndarray:
    """`exact_fma` elementwise, in hypot's float dtype of the operands unless `dtype`."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    dtype = np.dtype(
        dtype
        or reduce(lambda d, e: np.hypot(np.zeros(0, d), np.zeros(0, e)).dtype, (a.dtype, b.dtype, c.dtype))
    )
    one = np.frompyfunc(lambda x, y, z: exact_fma(float(x), float(y), float(z), dtype), 3, 1)
    return np.asarray(one(a.astype(dtype), b.astype(dtype), c.astype(dtype)), dtype=dtype)


@case(ops.Fma)
def _fma(data):
    values = elementwise_inputs(data, 3, NUMERIC)
    return node_on(ops.fma, values), values, exact_fmas, True


@case(ops.Fill)
def _fill(data):
    values = elementwise_inputs(data, 2)

    def reference(model, value):
        return np.broadcast_to(value, np.broadcast_shapes(model.shape, value.shape))

    return node_on(ops.fill, values), values, reference, True


@case(ops.Cast)
def _cast(data):
    values = elementwise_inputs(data, 1)
    target = data.draw(st.sampled_from(NUMERIC))
    return node_on(ops.Cast(target), values), values, lambda x: x.astype(target), True


@case(ops.Composite)
def _composite(data):
    i0, i1 = scalar("i0"), scalar("i1")
    outputs = data.draw(
        st.sampled_from(
            [
                (ops.exp(i0) * i1 + 1.0, lambda a, b: np.exp(a) * b + 1.0),
                (ops.maximum(i0, ops.neg(i1)), lambda a, b: np.maximum(a, -b)),
                (
                    ops.sqr(i0),
                    lambda a, b: np.broadcast_to(np.square(a), np.broadcast_shapes(a.shape, b.shape)),
                ),
                (i1, lambda a, b: np.broadcast_to(b, np.broadcast_shapes(a.shape, b.shape))),
            ]
        )
    )
    values = elementwise_inputs(data, 2, dtypes=("float64",))
    node = ops.Composite([i0, i1], [outputs[0]]).make_node(*(variable_for(v) for v in values))
    return node, values, outputs[1], True


@case(ops.Dot)
def _dot(data):
    n, m, k = (data.draw(st.integers(0, 4)) for _ in range(3))
    x_shape = data.draw(st.sampled_from([(k,), (n, k)]))
    y_shape = data.draw(st.sampled_from([(k,), (k, m)]))
    dtypes = st.sampled_from(DTYPES)
    values = [
        data.draw(arrays(data.draw(dtypes), x_shape, 100)),
        data.draw(arrays(data.draw(dtypes), y_shape, 100)),
    ]
    return node_on(ops.dot, values), values, np.dot, True


def _blas_inputs(data, shapes):
    dtype = data.draw(st.sampled_from(FLOATS))
    return [data.draw(arrays(dtype, shape, 100)) for shape in shapes]


def _sizes(data, count):
    return [data.draw(st.integers(0, 4)) for _ in range(count)]


@case(ops.Dot22)
def _dot22(data):
    n, k, m = _sizes(data, 3)
    values = _blas_inputs(data, [(n, k), (k, m)])
    return node_on(ops.dot22, values), values, lambda x, y: x @ y, True


@case(ops.Gemm)
def _gemm(data):
    n, k, m = _sizes(data, 3)
    values = _blas_inputs(data, [(n, m), (), (n, k), (k, m), ()])
    return node_on(ops.gemm, values), values, lambda z, a, x, y, b: b * z + a * (x @ y), True


@case(ops.Gemv)
def _gemv(data):
    n, k = _sizes(data, 2)
    values = _blas_inputs(data, [(n,), (), (n, k), (k,), ()])
    return node_on(ops.gemv, values), values, lambda y, a, mat, x, b: b * y + a * (mat @ x), True


@case(ops.Ger)
def _ger(data):
    n, m = _sizes(data, 2)
    values = _blas_inputs(data, [(n, m), (), (n,), (m,)])
    return node_on(ops.ger, values), values, lambda mat, a, x, y: mat + a * np.outer(x, y), True


def _axes(data, ndim):
    if data.draw(st.booleans()):
        return None
    chosen = data.draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)) if ndim else []
    return tuple(a - ndim if data.draw(st.booleans()) else a for a in chosen)


def _reduction_case(cls, reference):
    def draw(data):
        x = data.draw(arrays(data.draw(st.sampled_from((*DTYPES, "bool"))), data.draw(small_shapes)))
        axis = _axes(data, x.ndim)
        return node_on(cls(axis), [x]), [x], lambda v: reference(v, axis=axis), True

    return draw


case(ops.Sum)(_reduction_case(ops.Sum, np.sum))
case(ops.Mean)(_reduction_case(ops.Mean, np.mean))
case(ops.Max)(_reduction_case(ops.Max, np.max))
case(ops.Min)(_reduction_case(ops.Min, np.min))
case(ops.Prod)(_reduction_case(ops.Prod, np.prod))


def _arg_case(cls, reference):
    def draw(data):
        x = data.draw(arrays(data.draw(st.sampled_from((*DTYPES, "bool"))), data.draw(small_shapes)))
        axis = data.draw(st.sampled_from([None, *range(-x.ndim, x.ndim)]))
        return node_on(cls(axis), [x]), [x], lambda v: reference(v, axis=axis), True

    return draw


@case(ops.Join)
def _join_case(data):
    x = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), data.draw(small_shapes.filter(len))))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    length = data.draw(st.integers(0, 3))
    other_shape = tuple(length if d == axis % x.ndim else n for d, n in enumerate(x.shape))
    y = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), st.just(other_shape)))
    return node_on(ops.Join(axis), [x, y]), [x, y], lambda a, b: np.concatenate([a, b], axis=axis), True


def _indexed(data, advanced: bool):
    """An array, a valid index for it (basic, or integer arrays) and the node `x[index]` on constants."""
    shapes = small_shapes.filter(lambda s: len(s) and (all(s) or not advanced))
    x = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), data.draw(shapes)))
    if advanced:  # integer arrays for k axes from `start` on, full slices before them
        k = data.draw(st.integers(1, x.ndim))
        start = data.draw(st.integers(0, x.ndim - k))
        arrays_shape = hnp.array_shapes(max_dims=2, max_side=3)
        found = data.draw(hnp.integer_array_indices(x.shape[start : start + k], result_shape=arrays_shape))
        index = (*(slice(None),) * start, *found)
    else:
        index = data.draw(hnp.basic_indices(x.shape, allow_newaxis=True, allow_ellipsis=True))
    node = subtensor(variable_for(x), index).owner
    if node is None:  # x[()] of a 0-d array is x
        reject()
    return x, index, node


@case(ops.Subtensor)
def _subtensor_case(data):
    x, index, node = _indexed(data, advanced=False)
    return node, [x, *(v.data for v in node.inputs[1:])], lambda a, *_: a[index], True


@case(ops.AdvancedSubtensor)
def _advanced_subtensor_case(data):
    x, index, node = _indexed(data, advanced=True)
    if not isinstance(node.op, ops.AdvancedSubtensor):
        reject()
    return node, [x, *(v.data for v in node.inputs[1:])], lambda a, *_: a[index], True


@case(ops.IncSubtensor)
def _inc_subtensor_case(data):
    x, index, part_node = _indexed(data, advanced=data.draw(st.booleans()))
    setting = data.draw(st.booleans())
    part = x[index].shape
    y = data.draw(arrays(x.dtype, st.just(part[data.draw(st.integers(0, len(part))) :])))
    node = ops.IncSubtensor(part_node.op.idx_list, setting).make_node(
        part_node.inputs[0], variable_for(y), *part_node.inputs[1:]
    )

    def reference(a, b, *_):
        out = a.copy()
        if setting:
            out[index] = b
        elif isinstance(part_node.op, ops.AdvancedSubtensor):
            np.add.at(out, index, b)
        else:
            out[index] += b
        return out

    return node, [x, y, *(v.data for v in part_node.inputs[1:])], reference, True


@case(shape_module.Shape, shape_module.Shape_i)
def _shape_case(data):
    x = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), data.draw(small_shapes.filter(len))))
    if data.draw(st.booleans()):
        return node_on(shape_module.Shape(), [x]), [x], np.shape, True
    i = data.draw(st.integers(0, x.ndim - 1))
    return node_on(shape_module.Shape_i(i), [x]), [x], lambda a: np.shape(a)[i], True


@case(ops.Assert)
def _assert_case(data):
    x = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), data.draw(small_shapes)))
    holds = np.ones(data.draw(small_shapes), dtype=bool)
    return node_on(ops.Assert("checked"), [x, holds]), [x, holds], lambda a, c: a, True


def test_a_failing_assertion_is_an_error_naming_its_message():
    x = np.array([1.0, -1.0])
    node = node_on(ops.Assert("x must be positive"), [x, x > 0])
    with pytest.raises(EvaluationError, match="AssertionError: x must be positive") as info:
        evaluate(node, [x, x > 0])
    assert isinstance(info.value, AssertionError)


case(ops.Argmax)(_arg_case(ops.Argmax, np.argmax))
case(ops.Argmin)(_arg_case(ops.Argmin, np.argmin))


@case(ops.LogSumExp)
def _logsumexp(data):
    x = data.draw(arrays(data.draw(st.sampled_from((*DTYPES, "bool"))), data.draw(small_shapes)))
    axis = _axes(data, x.ndim)
    dtype = np.exp(np.zeros((), x.dtype)).dtype
    # logaddexp's reduction never overflows, and gives its identity -inf over an empty axis.
    reference = lambda v: np.logaddexp.reduce(v.astype(dtype), axis=axis)  # noqa: E731
    return node_on(ops.LogSumExp(axis), [x]), [x], reference, False


def _naive_softmax(x, axis):
    e = np.exp(x.astype(np.exp(np.zeros((), x.dtype)).dtype))
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_case(cls, reference):
    def draw(data):
        shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
        # Bounded so that exp in the unshifted reference does not overflow (int8 gives float16).
        x = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), shape, bound=8))
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
        return node_on(cls(axis), [x]), [x], lambda v: reference(v, axis), False

    return draw


case(ops.Softmax)(_softmax_case(ops.Softmax, _naive_softmax))
case(ops.LogSoftmax)(_softmax_case(ops.LogSoftmax, lambda x, axis: np.log(_naive_softmax(x, axis))))


@case(ops.DimShuffle)
def _dimshuffle(data):
    shape = data.draw(small_shapes)
    x = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), shape))
    droppable = [a for a, n in enumerate(shape) if n == 1]
    dropped = set(data.draw(st.lists(st.sampled_from(droppable), unique=True))) if droppable else set()
    kept = data.draw(st.permutations([a for a in range(x.ndim) if a not in dropped]))
    order = list(kept)
    for _ in range(data.draw(st.integers(0, 2))):
        order.insert(data.draw(st.integers(0, len(order))), "x")
    static = tuple(1 if a in dropped else None for a in range(x.ndim))
    node = ops.DimShuffle(x.ndim, order).make_node(variable_for(x, static))

    def reference(v):
        # Independent of the implementation: read every output element from its input index.
        out_shape = tuple(1 if o == "x" else v.shape[o] for o in order)
        out = np.empty(out_shape, v.dtype)
        for index in np.ndindex(*out_shape):
            source = [0] * v.ndim
            for o, i in zip(order, index):
                if o != "x":
                    source[o] = i
            out[index] = v[tuple(source)]
        return out

    return node, [x], reference, True


@case(ops.Reshape)
def _reshape(data):
    shape = data.draw(small_shapes)
    x = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), shape))
    target = list(data.draw(st.permutations(shape)))
    if target and x.size and data.draw(st.booleans()):
        target[data.draw(st.integers(0, len(target) - 1))] = -1
    return node_on(ops.Reshape(target), [x]), [x], lambda v: np.reshape(v, target), True


@case(ops.Alloc)
def _alloc(data):
    target = data.draw(small_shapes)
    suffix = target[len(target) - data.draw(st.integers(0, len(target))) :]
    value_shape = tuple(1 if data.draw(st.booleans()) else n for n in suffix)
    value = data.draw(arrays(data.draw(st.sampled_from(DTYPES)), value_shape))
    return node_on(ops.Alloc(target), [value]), [value], lambda v: np.broadcast_to(v, target), True


# -- the property ------------------------------------------------------------------------------------


def concrete_op_classes() -> set[type[Op]]:
    bases = {Op, ops.Elemwise, ops.Reduce}
    return {
        cls
        for module in (ops, shape_module)
        for cls in vars(module).values()
        if inspect.isclass(cls)
        and issubclass(cls, Op)
        and cls not in bases
        and cls.__module__ in (ops.__name__, subtensor_module.__name__, shape_module.__name__)
    }


def test_every_op_class_has_an_implementation_and_a_case():
    base = numpy_impl.dispatch(Op)
    missing = {cls.__name__ for cls in concrete_op_classes() if numpy_impl.dispatch(cls) is base}
    assert not missing
    assert concrete_op_classes() == set(CASES)


@pytest.mark.parametrize("op_class", sorted(CASES, key=lambda c: c.__name__), ids=lambda c: c.__name__)
@given(data=st.data())
def test_op_equals_its_numpy_function(op_class, data):
    node, values, reference, exact = CASES[op_class](data)
    dtype = node.outputs[0].type.numpy_dtype
    # numpy's own warnings (invalid values, empty means) are not what is tested here.
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            expected = np.asarray(reference(*values))
        except (ValueError, ZeroDivisionError) as exc:
            with pytest.raises(EvaluationError, match=type(exc).__name__):
                evaluate(node, values)
            return
        (result,) = evaluate(node, values)
    assert type(result) is np.ndarray
    assert result.dtype == dtype
    assert result.shape == expected.shape
    if exact:
        np.testing.assert_array_equal(result, expected.astype(dtype))
    else:
        tolerance = 1e-5 if dtype == np.float64 else 2e-2
        np.testing.assert_allclose(result, expected.astype(dtype), rtol=tolerance, atol=tolerance)


@given(data=st.data())
def test_new_array_ops_do_not_share_memory_with_inputs(data):
    op_class = data.draw(st.sampled_from([ops.Fill, ops.Alloc, ops.Cast, ops.Add, ops.Composite, ops.Sum]))
    node, values, _, _ = CASES[op_class](data)
    with np.errstate(all="ignore"):
        (result,) = evaluate(node, values)
    assert result.flags.writeable
    assert not any(np.shares_memory(result, v) for v in values)


def test_multi_output_composite_gives_one_fresh_array_per_output():
    i0, i1 = scalar("i0"), scalar("i1")
    total = i0 + i1
    composite = ops.Composite([i0, i1], [total, total, i0])
    x, y = np.array([1.0, 2.0]), np.array([[10.0], [20.0]])
    node = composite.make_node(variable_for(x), variable_for(y))
    first, second, third = evaluate(node, [x, y])
    np.testing.assert_array_equal(first, x + y)
    np.testing.assert_array_equal(second, x + y)
    np.testing.assert_array_equal(third, np.broadcast_to(x, (2, 2)))
    assert not np.shares_memory(first, second)
    assert not np.shares_memory(third, x)


@given(x=hnp.arrays("float64", small_shapes, elements=st.floats(allow_nan=False)))
def test_sigmoid_and_softplus_never_overflow(x):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            sig = evaluate(ops.sigmoid(variable_for(x)).owner, [x])[0]
            soft = evaluate(ops.softplus(variable_for(x)).owner, [x])[0]
    assert np.all((sig >= 0) & (sig <= 1))
    assert np.all(soft >= np.maximum(x, 0))
    big, negative = np.abs(x) > 50, x < 0
    np.testing.assert_array_equal(sig[big & ~negative], 1.0)
    # far below zero sigmoid(x) = e^x / (1 + e^x) is e^x to within e^x relatively: tiny, not 0 (until e^x is)
    np.testing.assert_allclose(sig[big & negative], np.exp(x[big & negative]), rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(soft[big & ~negative], x[big & ~negative])


def test_softmax_of_huge_values_is_finite_and_normalised():
    x = np.array([[1000.0, 1001.0, 999.0], [-1e300, 0.0, 1e300]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        probabilities = evaluate(ops.softmax(variable_for(x)).owner, [x])[0]
        log_probabilities = evaluate(ops.log_softmax(variable_for(x)).owner, [x])[0]
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0)
    np.testing.assert_allclose(np.exp(log_probabilities), probabilities)


def test_zero_d_results_are_arrays_of_the_node_dtype():
    x = np.array([1, 2, 3], dtype="int8")
    node = ops.sum(variable_for(x)).owner
    (result,) = evaluate(node, [x])
    assert type(result) is np.ndarray and result.shape == () and result.dtype == node.outputs[0].dtype
    a = np.array(2.0, dtype="float32")
    (result,) = evaluate(ops.exp(variable_for(a)).owner, [a])
    assert type(result) is np.ndarray and result.dtype == np.float32


def test_numpy_errors_name_the_node():
    x, y = np.ones(3), np.ones(4)
    node = ops.add(variable_for(x), variable_for(y)).owner
    with pytest.raises(EvaluationError, match=r"add\(.*float64\[3\], float64\[4\].*ValueError") as info:
        evaluate(node, [x, y])
    assert info.value.node is node
    assert isinstance(info.value.__cause__, ValueError)


def test_an_op_without_implementation_is_reported_by_name():
    class Mystery(Op):
        def make_node(self, x):
            return Apply(self, [x], [x.type()])

    node = Mystery().make_node(scalar("x"))
    with pytest.raises(NotImplementedError, match="Mystery"):
        evaluate(node, [np.array(1.0)])


def test_with_own_shapes_each_output_has_the_shape_of_what_it_reads():
    i0, i1 = scalar("i0"), scalar("i1")
    composite = ops.Composite([i0, i1], [i0 + i1, ops.exp(i0), i0], own_shapes=True)
    x, y = np.array([1.0, 2.0]), np.array([[10.0], [20.0]])
    total, exp_x, same_x = evaluate(composite.make_node(variable_for(x), variable_for(y)), [x, y])
    np.testing.assert_array_equal(total, x + y)
    np.testing.assert_array_equal(exp_x, np.exp(x))
    np.testing.assert_array_equal(same_x, x)
    assert not np.shares_memory(same_x, x)


def test_a_fused_chain_keeps_no_intermediate_past_its_last_use():
    """A 20-op Composite on NumPy peaks near one output's size, not at one array per op."""
    import tracemalloc

    from relwrite.backends.numpy import NumpyLinker
    from relwrite.engine.fusion import FusionRewriter
    from relwrite.graph.basic import vector
    from relwrite.graph.fg import FunctionGraph

    x = vector("x")
    out = x
    for i in range(20):
        out = ops.exp(out) * 0.5 if i % 2 else ops.sin(out) + 1.0
    fgraph = FunctionGraph([x], [out])
    FusionRewriter().rewrite(fgraph)
    assert [type(n.op) for n in fgraph.apply_nodes] == [ops.Composite]
    linker, values = NumpyLinker(fgraph), np.linspace(-1.0, 1.0, 200_000)
    linker(values)  # warm: first-call allocations are not the kernel's
    tracemalloc.start()
    try:
        (result,) = linker(values)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 3 * result.nbytes


def _fused(inputs, outputs):
    from relwrite.engine.fusion import FusionRewriter

    fgraph = FunctionGraph(inputs, outputs)
    FusionRewriter().rewrite(fgraph)
    assert all(type(n.op) is ops.Composite for n in fgraph.apply_nodes)
    return fgraph


def test_a_fused_dag_writes_into_the_buffers_of_dying_intermediates():
    """t1 lives to the end and two other values meet it: op by op, each with a new array, the
    peak was four arrays; writing each result into a dying intermediate's buffer keeps it at three."""
    import tracemalloc

    from relwrite.backends.numpy import NumpyLinker
    from relwrite.graph.basic import vector

    x, y = vector("x"), vector("y")
    t1 = ops.exp(1.0 - ops.abs(x))
    t6 = ops.tanh(x * y) - t1 / ops.sqrt(ops.abs(ops.sin(y) * 0.5) + 1.0)
    out = ops.sin(t6 * t6 + x) / (1.0 + ops.abs(y)) - ops.tanh(t1)
    fgraph = _fused([x, y], [out])
    assert len(fgraph.apply_nodes) == 1
    linker = NumpyLinker(fgraph)
    a, b = np.linspace(-1.0, 1.0, 200_000), np.linspace(2.0, -3.0, 200_000)
    (expected,) = NumpyLinker(FunctionGraph([x, y], [out]))(a, b)  # op by op, unfused
    linker(a, b)
    tracemalloc.start()
    try:
        (result,) = linker(a, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(result, expected)
    assert peak <= 3.2 * result.nbytes
    assert a[0] == -1.0 and b[0] == 2.0  # the inputs are never written over


def test_a_fused_step_writes_only_into_a_buffer_of_its_result_shape():
    """exp(x) (a row) dies where it meets a matrix: the sum is larger than its buffer, and goes into a
    new array; an identity's buffer is its input's, and is never written over."""
    from relwrite.backends.numpy import NumpyLinker
    from relwrite.graph.basic import matrix, vector

    x, m = vector("x"), matrix("m")
    e = ops.exp(x)
    fgraph = _fused([x, m], [ops.sin(e + m), ops.neg(ops.identity(e) * 2.0)])
    a, b = np.linspace(0.0, 1.0, 5000), np.linspace(-1.0, 1.0, 3 * 5000).reshape(3, 5000)
    results = NumpyLinker(fgraph)(a, b)
    np.testing.assert_array_equal(results[0], np.sin(np.exp(a) + b))
    np.testing.assert_array_equal(results[1], -(np.exp(a) * 2.0))


def test_a_fold_never_writes_into_an_operand_it_reads_again_later():
    """b + x + b with b dying there: the fold writes b + x first, so b's buffer is not its output."""
    from relwrite.backends.numpy import NumpyLinker
    from relwrite.graph.basic import vector

    x = vector("x")
    b = ops.exp(x) + x
    fgraph = _fused([x], [ops.add(b, x, b)])
    a = np.linspace(-1.0, 1.0, 10_000)
    (result,) = NumpyLinker(fgraph)(a)
    np.testing.assert_array_equal(result, (np.exp(a) + a) + a + (np.exp(a) + a))


def test_a_long_sum_reads_each_dtype_once_to_plan_its_fold(monkeypatch):
    """The fold's per-step dtypes come from the previous step's (a sum of n terms resolves n dtype pairs,
    not n^2 / 2: a 33,000-term sum took minutes to link)."""
    xs = [scalar(f"x{k}", dtype="int8" if k % 3 else "float32") for k in range(300)]
    node = ops.add(*xs).owner
    resolved = []
    original = ops.Add.output_dtype
    monkeypatch.setattr(ops.Add, "output_dtype", lambda self, d: resolved.append(len(d)) or original(self, d))
    impl = numpy_impl(node.op, node)
    assert sum(resolved) <= 2 * len(xs)
    values = [np.asarray(k % 5, dtype=x.dtype) for k, x in enumerate(xs)]
    assert impl.fn(*values) == reduce(np.add, values)


@pytest.mark.parametrize("error", [ZeroDivisionError("boom"), AssertionError("x must be positive")])
def test_an_evaluation_error_pickles_with_its_class_message_and_node(error):
    """A worker process hands its EvaluationError to its parent: it must come back whole, whatever it
    wrapped (an assertion's is an AssertionFailedError, still an AssertionError)."""
    node = ops.exp(TensorType("float64", (None,))("x")).owner
    original = EvaluationError(node, [np.array([1.0, 2.0])], error)
    restored = pickle.loads(pickle.dumps(original))
    assert type(restored) is type(original)
    assert str(restored) == str(original)
    assert restored.node.op == node.op
    assert isinstance(restored, AssertionError) == isinstance(error, AssertionError)


# -- fma: rounded once ----------------------------------------------------------------------------


def same_floats(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bit for bit (the sign of a zero included), NaN where NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    bits = f"u{got.dtype.itemsize}"
    known = ~np.isnan(want)
    np.testing.assert_array_equal(got[known].view(bits), want[known].view(bits))


def near_product(width: int) -> st.SearchStrategy:
    """(a, b, c) where c is within a few ulps of -(a * b): the sum cancels, near ties and zeros."""

    def build(a: float, b: float, ulps: int, flip: bool) -> tuple[float, float, float]:
        dtype = np.dtype(f"float{width}")
        with np.errstate(all="ignore"):
            c = -(dtype.type(a) * dtype.type(b))
            for _ in range(abs(ulps)):
                c = np.nextafter(c, dtype.type(np.inf if ulps > 0 else -np.inf))
        return a, b, float(-c if flip else c)

    factor = st.floats(allow_nan=False, allow_infinity=False, width=width)
    return st.builds(build, factor, factor, st.integers(-3, 3), st.booleans())


def scaled(width: int) -> st.SearchStrategy:
    """(a, b, c) with c near the scale of a * b anywhere in the range, subnormals and overflow included."""
    dtype = np.dtype(f"float{width}")
    info = np.finfo(dtype)
    low, high = int(info.minexp) - info.nmant, int(info.maxexp)
    mantissa = st.floats(-2, 2, allow_nan=False, width=width)

    def build(ma: float, mb: float, mc: float, ea: int, eb: int, shift: int) -> tuple[float, ...]:
        with np.errstate(all="ignore"):
            a, b = dtype.type(math.ldexp(ma, ea)), dtype.type(math.ldexp(mb, eb))
            c = dtype.type(math.ldexp(mc, max(min(ea + eb + shift, high), low)))
        return float(a), float(b), float(c)

    exponents = st.integers(low // 2 - 8, high // 2 + 8)
    return st.builds(build, mantissa, mantissa, mantissa, exponents, exponents, st.integers(-60, 60))


def ties(width: int) -> st.SearchStrategy:
    """Products of odd integers one digit wider than the float (midpoints between two floats) plus a
    half-integer (an exact tie) or a far smaller addend (just off a tie, past any wider float too)."""
    dtype = np.dtype(f"float{width}")
    digits = np.finfo(dtype).nmant + 1

    def pair(a: int) -> st.SearchStrategy:  # b with a * b odd, of digits + 1 bits
        lo, hi = -(-(2**digits) // a), (2 ** (digits + 1) - 1) // a
        return st.integers(lo // 2, (hi - 1) // 2).map(lambda n: (a, 2 * n + 1))

    pairs = st.integers(2 ** (digits // 2 - 1), 2 ** (digits // 2)).map(lambda n: 2 * n + 1).flatmap(pair)
    halves = st.integers(-(2 ** (digits + 1)), 2 ** (digits + 1)).map(lambda n: n / 2)
    small = st.builds(math.ldexp, st.floats(-2, 2, allow_nan=False), st.integers(-240, 0))

    def build(ab: tuple[int, int], c: float) -> tuple[float, float, float]:
        with np.errstate(all="ignore"):
            return float(dtype.type(ab[0])), float(dtype.type(ab[1])), float(dtype.type(c))

    return st.builds(build, pairs, st.one_of(halves, small))


def triples(width: int) -> st.SearchStrategy:
    every = st.floats(width=width)
    return st.lists(
        st.one_of(st.tuples(every, every, every), near_product(width), scaled(width), ties(width)),
        min_size=1,
        max_size=40,
    )


@pytest.mark.parametrize("width", [64, 32, 16])
@settings(max_examples=300)
@given(data=st.data())
def test_fma_rounds_once_as_exact_arithmetic_does(width, data):
    """fma equals the exact a * b + c rounded once, bit for bit, over arrays that mix the fast path and
    its exact fallback: any floats (NaN, infinities, subnormals), cancellations, near ties, ties, and
    results at the edges of the range."""
    dtype = np.dtype(f"float{width}")
    a, b, c = (np.array(column, dtype=dtype) for column in zip(*data.draw(triples(width))))
    same_floats(fma(a, b, c, dtype), exact_fmas(a, b, c, dtype))


def test_fma_special_values_and_edges():
    inf, nan, tiny = math.inf, math.nan, 2.0**-1074
    cases = [
        ((0.1, 10.0, -1.0), 5.551115123125783e-17),  # a * b + c, rounded twice, is 0.0
        ((1e308, 10.0, -inf), -inf),  # the infinite addend wins over an overflowing product
        ((1e308, 10.0, -1.7976931348623157e308), inf),  # overflows once rounded
        ((2.0**1000, 2.0**24, -1.5 * 2.0**1023), 2.0**1022),  # the product overflows, the sum does not
        ((inf, 0.0, 1.0), nan),
        ((inf, 2.0, -inf), nan),
        ((nan, 0.0, inf), nan),
        ((-(2.0**-600), 2.0**-600, 0.0), -0.0),  # underflows to zero with the sign of the exact value
        ((tiny, 0.5, 0.0), 0.0),  # a tie between 0 and the least subnormal: even
        ((tiny, 1.5, 0.0), 2 * tiny),  # a tie between 1 and 2 least subnormals: even
        ((0.0, -1.0, -0.0), -0.0),
        ((0.0, -1.0, 0.0), 0.0),
        ((1.0, -1.0, 1.0), 0.0),  # an exact zero of nonzero terms is +0
    ]
    for (a, b, c), want in cases:
        got = fma(a, b, c)
        assert got.dtype == np.float64 and got.shape == ()
        same_floats(got.reshape(1), np.array([want]))
        same_floats(got.reshape(1), exact_fmas([a], [b], [c], "float64"))


@given(x=hnp.arrays("float16", small_shapes, elements=st.floats(-30, 30, width=16)))
def test_a_float16_sigmoid_is_rounded_once(x):
    """In float16 1 + exp(-8) is 1, so sigmoid(8) came out 1.0, not 0.9995 (and 1 / (1 - exp(1 -
    sigmoid(8))) infinite: fuzzer seed 35, graph 2237): it is computed in float32 and rounded once."""
    sig = evaluate(ops.sigmoid(variable_for(x)).owner, [x])[0]
    assert sig.dtype == np.float16
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(sig.astype(np.float64), exact, rtol=2.0**-11, atol=2.0**-24)  # half an ulp
    eight = np.array([8.0], dtype=np.float16)
    assert evaluate(ops.sigmoid(variable_for(eight)).owner, [eight])[0][0] == np.float16(0.99951171875)

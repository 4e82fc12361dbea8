"""The operations of the graph language and their type inference.

An op says *what* it computes (its props and output types); how it is
computed lives in the backends, which dispatch on the op's class.  Elementwise
ops resolve output dtypes exactly as the numpy ufunc they mirror does, and
broadcast static shapes as numpy would.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from functools import cache, lru_cache, reduce
from typing import Any

import numpy as np

from relwrite.graph.basic import Apply, Constant, Op, Variable, as_variable, as_variables, io_toposort
from relwrite.graph.shape import shape as symbolic_shape
from relwrite.graph.shape import static_length
from relwrite.graph.subtensor import (  # noqa: F401  (re-exported: ops is where ops are looked up)
    AdvancedSubtensor,
    IncSubtensor,
    Subtensor,
    inc_subtensor,
    set_subtensor,
    subtensor,
)
from relwrite.graph.types import Shape, TensorType, broadcast_shapes

# -- elementwise ---------------------------------------------------------------------


@cache
def _resolve(ufunc: np.ufunc, dtypes: tuple[str, ...]) -> str:
    return ufunc.resolve_dtypes(tuple(np.dtype(d) for d in dtypes) + (None,) * ufunc.nout)[-1].name


class Elemwise(Op):
    """An op applied element by element with numpy broadcasting.

    `nin` is the number of inputs (None: one or more).  `dtype_rule` is the
    numpy ufunc whose dtype resolution the output follows (type inference only).
    """

    nin: int | None = 1
    dtype_rule: np.ufunc | None = None
    exact_int_literals: bool = False
    """Comparisons: NumPy 2 compares Python ints beyond the operands' integer range exactly."""

    def as_inputs(self, inputs: Sequence[Any]) -> list[Variable]:
        """Python scalars take the dtype NumPy 2's loop for `dtype_rule` gives them (see `as_variables`)."""
        return as_variables(inputs, self.exact_int_literals, self.dtype_rule)

    def output_dtype(self, dtypes: list[str]) -> str:
        rule = self.dtype_rule
        if rule.nin == 1:
            return _resolve(rule, (dtypes[0],))
        return reduce(lambda acc, d: _resolve(rule, (acc, d)), dtypes[1:], dtypes[0])

    def make_node(self, *inputs: Variable) -> Apply:
        if all(isinstance(v, Variable) for v in inputs):  # the usual case: the types decide, once
            try:
                out_type = _elemwise_output_type(self, tuple([v.type for v in inputs]))
            except (TypeError, ValueError, np.exceptions.DTypePromotionError):
                pass  # the checks below name the inputs in the error
            else:
                return Apply(self, inputs, [Variable(out_type)])
        inputs = self.as_inputs(inputs)
        if self.nin is None:
            if not inputs:
                raise self.type_error(inputs, "needs at least one input")
        elif len(inputs) != self.nin:
            raise self.type_error(inputs, f"takes {self.nin} input(s), got {len(inputs)}")
        try:
            dtype = self.output_dtype([v.dtype for v in inputs])
        except (TypeError, np.exceptions.DTypePromotionError) as exc:
            raise self.type_error(inputs, f"unsupported dtypes ({exc})") from None
        shape = broadcast_shapes(*(v.type.shape for v in inputs), op_name=self)
        return Apply(self, inputs, [Variable(TensorType(dtype, shape))])


@lru_cache(maxsize=4096)
def _elemwise_output_type(op: Elemwise, types: tuple[TensorType, ...]) -> TensorType:
    """The output type of `op` on operands of these types (what `make_node` infers, kept for the next
    node of the same op and types: rewriting builds the same few kinds of node again and again)."""
    if op.nin is None:
        if not types:
            raise TypeError("no inputs")
    elif len(types) != op.nin:
        raise TypeError("input count")
    dtype = op.output_dtype([t.dtype for t in types])
    first = types[0]
    if all(t == first for t in types):
        return first if first.dtype == dtype else TensorType(dtype, first.shape)
    return TensorType(dtype, broadcast_shapes(*(t.shape for t in types), op_name=op))


def _elemwise(
    class_name: str, rule: np.ufunc, nin: int | None, doc: str, op_name: str | None = None, **attrs: Any
):
    cls = type(
        class_name,
        (Elemwise,),
        {"nin": nin, "dtype_rule": rule, "__doc__": doc, "__module__": __name__, **attrs},
    )
    if op_name is not None:
        cls.op_name = op_name
    return cls


Add = _elemwise("Add", np.add, None, "Sum of one or more inputs (variadic: add(x, y, z) is one node).")
Mul = _elemwise("Mul", np.multiply, None, "Product of one or more inputs (variadic).")
Sub = _elemwise("Sub", np.subtract, 2, "x - y.")
TrueDiv = _elemwise("TrueDiv", np.true_divide, 2, "x / y (true division).", "true_div")
Pow = _elemwise("Pow", np.power, 2, "x ** y.")
Maximum = _elemwise("Maximum", np.maximum, 2, "Elementwise maximum (NaN-propagating).")
Minimum = _elemwise("Minimum", np.minimum, 2, "Elementwise minimum (NaN-propagating).")
Lt = _elemwise("Lt", np.less, 2, "x < y.", exact_int_literals=True)
Le = _elemwise("Le", np.less_equal, 2, "x <= y.", exact_int_literals=True)
Gt = _elemwise("Gt", np.greater, 2, "x > y.", exact_int_literals=True)
Ge = _elemwise("Ge", np.greater_equal, 2, "x >= y.", exact_int_literals=True)
Eq = _elemwise("Eq", np.equal, 2, "x == y (elementwise).", exact_int_literals=True)
Neq = _elemwise("Neq", np.not_equal, 2, "x != y (elementwise).", exact_int_literals=True)
Neg = _elemwise("Neg", np.negative, 1, "-x.")
Exp = _elemwise("Exp", np.exp, 1, "e ** x.")
Log = _elemwise("Log", np.log, 1, "Natural logarithm.")
Log1p = _elemwise("Log1p", np.log1p, 1, "log(1 + x), accurate near 0.")
Expm1 = _elemwise("Expm1", np.expm1, 1, "exp(x) - 1, accurate near 0.")
Sqrt = _elemwise("Sqrt", np.sqrt, 1, "Square root.")
Sqr = _elemwise("Sqr", np.square, 1, "x * x.")
Sin = _elemwise("Sin", np.sin, 1, "Sine.")
Cos = _elemwise("Cos", np.cos, 1, "Cosine.")
Tanh = _elemwise("Tanh", np.tanh, 1, "Hyperbolic tangent.")
Tan = _elemwise("Tan", np.tan, 1, "Tangent.")
Asin = _elemwise("Asin", np.arcsin, 1, "Inverse sine, in [-pi/2, pi/2] (NaN outside [-1, 1]).")
Acos = _elemwise("Acos", np.arccos, 1, "Inverse cosine, in [0, pi] (NaN outside [-1, 1]).")
Atan = _elemwise("Atan", np.arctan, 1, "Inverse tangent, in [-pi/2, pi/2].")
Sinh = _elemwise("Sinh", np.sinh, 1, "Hyperbolic sine.")
Cosh = _elemwise("Cosh", np.cosh, 1, "Hyperbolic cosine.")
Cbrt = _elemwise("Cbrt", np.cbrt, 1, "Real cube root (negative for negative x).")
Hypot = _elemwise("Hypot", np.hypot, 2, "sqrt(x**2 + y**2) without intermediate overflow or underflow.")
Atan2 = _elemwise("Atan2", np.arctan2, 2, "atan2(y, x): the angle of the point (x, y), in [-pi, pi].")
Abs = _elemwise("Abs", np.absolute, 1, "Absolute value.")
Sigmoid = _elemwise("Sigmoid", np.exp, 1, "1 / (1 + exp(-x)).")
Softplus = _elemwise("Softplus", np.exp, 1, "log(1 + exp(x)), computed without overflow.")
Erf = _elemwise("Erf", np.exp, 1, "The error function, 2/sqrt(pi) * integral of exp(-t**2) from 0 to x.")
Erfc = _elemwise("Erfc", np.exp, 1, "1 - erf(x), accurate where erf(x) is near 1 (large x).")
Log1mexp = _elemwise(
    "Log1mexp", np.exp, 1, "log(1 - exp(x)) for x <= 0, accurate near 0 and for large negative x."
)


class Reciprocal(Elemwise):
    """1 / x, in the floating dtype true division gives."""

    def output_dtype(self, dtypes: list[str]) -> str:
        return _resolve(np.true_divide, (dtypes[0], dtypes[0]))


class Identity(Elemwise):
    """The input unchanged."""

    def output_dtype(self, dtypes: list[str]) -> str:
        return dtypes[0]


class Fma(Elemwise):
    """fma(x, y, z): x * y + z rounded once (C99's fma), in the float dtype hypot would give the inputs.

    NumPy has no fma ufunc: the float dtype follows `numpy.hypot`'s (integers compute in a float) and
    is float16, float32 or float64 (a long double fma has no exact implementation here).
    """

    nin = 3
    dtype_rule = np.hypot

    def output_dtype(self, dtypes: list[str]) -> str:
        dtype = super().output_dtype(dtypes)
        if dtype not in ("float16", "float32", "float64"):
            raise TypeError(f"fma computes in float16, float32 or float64, not {dtype}")
        return dtype


class Switch(Elemwise):
    """switch(cond, a, b): a where cond is true, else b (numpy.where)."""

    nin = 3

    def output_dtype(self, dtypes: list[str]) -> str:
        if dtypes[0] != "bool":
            raise TypeError(f"the condition must be bool, got {dtypes[0]}")
        return np.result_type(np.dtype(dtypes[1]), np.dtype(dtypes[2])).name


class Fill(Elemwise):
    """fill(model, value): `value` broadcast to the shape of `model` (model's values unused)."""

    nin = 2

    def output_dtype(self, dtypes: list[str]) -> str:
        return dtypes[1]


class Cast(Elemwise):
    """The input converted to `dtype` (numpy astype)."""

    __props__ = ("dtype",)

    def __init__(self, dtype: Any):
        super().__init__(dtype=TensorType(dtype).dtype)

    @property
    def name(self) -> str:
        return f"cast_{self.dtype}"

    def __str__(self) -> str:
        return self.name

    def output_dtype(self, dtypes: list[str]) -> str:
        return self.dtype


add, mul, sub, true_div, pow = Add(), Mul(), Sub(), TrueDiv(), Pow()
maximum, minimum = Maximum(), Minimum()
lt, le, gt, ge, eq, neq = Lt(), Le(), Gt(), Ge(), Eq(), Neq()
neg, exp, log, log1p, expm1 = Neg(), Exp(), Log(), Log1p(), Expm1()
sqrt, sqr, reciprocal, sin, cos, tanh = Sqrt(), Sqr(), Reciprocal(), Sin(), Cos(), Tanh()
tan, asin, acos, atan, sinh, cosh, cbrt = Tan(), Asin(), Acos(), Atan(), Sinh(), Cosh(), Cbrt()
hypot, atan2 = Hypot(), Atan2()
fma = Fma()
abs, sigmoid, softplus, identity = Abs(), Sigmoid(), Softplus(), Identity()
erf, erfc, log1mexp = Erf(), Erfc(), Log1mexp()
switch, fill = Switch(), Fill()


def cast(x: Any, dtype: Any) -> Variable:
    return Cast(dtype)(x)


def ones_like(x: Any) -> Variable:
    """Ones with the shape and dtype of `x`."""
    x = as_variable(x)
    return fill(x, Constant(TensorType(x.dtype, ()), 1))


def zeros_like(x: Any) -> Variable:
    """Zeros with the shape and dtype of `x`."""
    x = as_variable(x)
    return fill(x, Constant(TensorType(x.dtype, ()), 0))


# -- linear algebra ----------------------------------------------------------------


def _blas_dtype(op: Op, inputs: Sequence[Variable]) -> str:
    dtypes = {v.dtype for v in inputs}
    if len(dtypes) != 1 or not dtypes <= {"float32", "float64"}:
        raise op.type_error(inputs, "BLAS ops need inputs of one dtype, float32 or float64")
    return dtypes.pop()


def _check_dims(op: Op, inputs: Sequence[Variable], ndims: Sequence[int]) -> None:
    for i, (var, ndim) in enumerate(zip(inputs, ndims)):
        if var.ndim != ndim:
            raise op.type_error(inputs, f"input {i} must have {ndim} dimension(s), got {var.ndim}")


def _inner(op: Op, inputs: Sequence[Variable], a: int | None, b: int | None) -> None:
    if a is not None and b is not None and a != b:
        raise op.type_error(inputs, f"inner dimensions differ ({a} vs {b})")


def _sum_shape(
    op: Op, inputs: Sequence[Variable], name: str, shape: Shape, product: str, other: Shape
) -> Shape:
    """The static shape of `name + product` under NumPy broadcasting (TypeError when they never broadcast)."""
    try:
        return broadcast_shapes(shape, other)
    except TypeError:
        raise op.type_error(
            inputs, f"{name} of shape {shape} does not broadcast with {product} of shape {other}"
        ) from None


class Dot(Op):
    """Matrix/vector product of 1-d and 2-d inputs, as numpy.dot."""

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 2:
            raise self.type_error(inputs, f"takes 2 inputs, got {len(inputs)}")
        x, y = inputs
        if x.ndim not in (1, 2) or y.ndim not in (1, 2):
            raise self.type_error(inputs, "inputs must be vectors or matrices")
        if x.dtype == "bool" or y.dtype == "bool":
            raise self.type_error(inputs, "boolean inputs are not supported")
        _inner(self, inputs, x.type.shape[-1], y.type.shape[0])
        shape = x.type.shape[:-1] + y.type.shape[1:]
        dtype = np.result_type(np.dtype(x.dtype), np.dtype(y.dtype)).name
        return Apply(self, inputs, [Variable(TensorType(dtype, shape))])


class Dot22(Op):
    """Matrix @ matrix of one float dtype (a BLAS gemm call)."""

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 2:
            raise self.type_error(inputs, f"takes 2 inputs, got {len(inputs)}")
        _check_dims(self, inputs, (2, 2))
        dtype = _blas_dtype(self, inputs)
        x, y = inputs
        _inner(self, inputs, x.type.shape[1], y.type.shape[0])
        return Apply(self, inputs, [Variable(TensorType(dtype, (x.type.shape[0], y.type.shape[1])))])


class Gemm(Op):
    """gemm(Z, a, X, Y, b) = b * Z + a * (X @ Y), computed out of place.

    The sum broadcasts as in NumPy: a row Z of shape (1, n) next to an (m, n)
    product gives an (m, n) result, so the output's static shape is the
    broadcast of Z's and the product's, never simply Z's.
    """

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 5:
            raise self.type_error(inputs, f"takes 5 inputs (Z, a, X, Y, b), got {len(inputs)}")
        _check_dims(self, inputs, (2, 0, 2, 2, 0))
        dtype = _blas_dtype(self, inputs)
        z, _, x, y, _ = inputs
        _inner(self, inputs, x.type.shape[1], y.type.shape[0])
        shape = _sum_shape(self, inputs, "Z", z.type.shape, "X @ Y", (x.type.shape[0], y.type.shape[1]))
        return Apply(self, inputs, [Variable(TensorType(dtype, shape))])


class Gemv(Op):
    """gemv(y, a, A, x, b) = b * y + a * (A @ x), broadcast as in NumPy (a length-1 y spreads)."""

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 5:
            raise self.type_error(inputs, f"takes 5 inputs (y, a, A, x, b), got {len(inputs)}")
        _check_dims(self, inputs, (1, 0, 2, 1, 0))
        dtype = _blas_dtype(self, inputs)
        y, _, a_mat, x, _ = inputs
        _inner(self, inputs, a_mat.type.shape[1], x.type.shape[0])
        shape = _sum_shape(self, inputs, "y", y.type.shape, "A @ x", (a_mat.type.shape[0],))
        return Apply(self, inputs, [Variable(TensorType(dtype, shape))])


class Ger(Op):
    """ger(A, a, x, y) = A + a * outer(x, y), broadcast as in NumPy (a row or column A spreads)."""

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 4:
            raise self.type_error(inputs, f"takes 4 inputs (A, a, x, y), got {len(inputs)}")
        _check_dims(self, inputs, (2, 0, 1, 1))
        dtype = _blas_dtype(self, inputs)
        a_mat, _, x, y = inputs
        shape = _sum_shape(
            self, inputs, "A", a_mat.type.shape, "outer(x, y)", (x.type.shape[0], y.type.shape[0])
        )
        return Apply(self, inputs, [Variable(TensorType(dtype, shape))])


dot, dot22, gemm, gemv, ger = Dot(), Dot22(), Gemm(), Gemv(), Ger()


# -- reductions and softmax -----------------------------------------------------------


def _normalize_axis(axis: int | Sequence[int] | None) -> tuple[int, ...] | None:
    if axis is None:
        return None
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        return (int(axis),)
    try:
        axes = tuple(sorted(int(a) for a in axis))
    except TypeError:
        raise TypeError(f"axis must be an int, a sequence of ints or None, got {axis!r}") from None
    return axes


def _resolve_axes(op: Op, inputs: Sequence[Variable], axis: tuple[int, ...] | None) -> tuple[int, ...]:
    ndim = inputs[0].ndim
    if axis is None:
        return tuple(range(ndim))
    resolved = []
    for a in axis:
        if not -ndim <= a < ndim:
            raise op.type_error(inputs, f"axis {a} is out of range for {ndim} dimension(s)")
        resolved.append(a % ndim)
    if len(set(resolved)) != len(resolved):
        raise op.type_error(inputs, f"repeated axis in {axis}")
    return tuple(sorted(resolved))


@cache
def _reduce_dtype(kind: str, dtype: str) -> str:
    sample = np.zeros((1,), dtype=dtype)
    return getattr(np, kind)(sample).dtype.name


class Reduce(Op):
    """A reduction over `axis` (None: every axis); the reduced axes are dropped."""

    __props__ = ("axis",)
    numpy_name: str = "sum"

    def __init__(self, axis: int | Sequence[int] | None = None):
        super().__init__(axis=_normalize_axis(axis))

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 1:
            raise self.type_error(inputs, f"takes 1 input, got {len(inputs)}")
        (x,) = inputs
        axes = _resolve_axes(self, inputs, self.axis)
        shape = tuple(d for i, d in enumerate(x.type.shape) if i not in axes)
        try:
            dtype = _reduce_dtype(self.numpy_name, x.dtype)
        except TypeError as exc:
            raise self.type_error(inputs, str(exc)) from None
        return Apply(self, inputs, [Variable(TensorType(dtype, shape))])

    def __str__(self) -> str:
        return f"{type(self).__name__}{{axis={self.axis}}}"


class Sum(Reduce):
    """Sum over axes."""

    numpy_name = "sum"


class Mean(Reduce):
    """Mean over axes (floating result, as numpy.mean)."""

    numpy_name = "mean"


class Max(Reduce):
    """Maximum over axes."""

    numpy_name = "max"


class Min(Reduce):
    """Minimum over axes."""

    numpy_name = "min"


class Prod(Reduce):
    """Product over axes (NumPy's result dtype: small integers widen)."""

    numpy_name = "prod"


class Argmax(Op):
    """The index of the maximum along `axis` (None: of the flattened array), as numpy.argmax; int64."""

    __props__ = ("axis",)
    numpy_name = "argmax"

    def __init__(self, axis: int | None = None):
        if axis is not None and (not isinstance(axis, (int, np.integer)) or isinstance(axis, bool)):
            raise TypeError(f"{type(self).__name__}: axis must be an int or None, got {axis!r}")
        super().__init__(axis=None if axis is None else int(axis))

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 1:
            raise self.type_error(inputs, f"takes 1 input, got {len(inputs)}")
        (x,) = inputs
        if x.type.numpy_dtype.kind not in "biuf":
            raise self.type_error(inputs, f"needs numbers, got {x.dtype}")
        if self.axis is None:
            shape: tuple = ()
        else:
            (axis,) = _resolve_axes(self, inputs, (self.axis,))
            shape = tuple(d for i, d in enumerate(x.type.shape) if i != axis)
        return Apply(self, inputs, [Variable(TensorType("int64", shape))])

    def __str__(self) -> str:
        return f"{type(self).__name__}{{axis={self.axis}}}"


class Argmin(Argmax):
    """The index of the minimum along `axis` (None: of the flattened array), as numpy.argmin; int64."""

    numpy_name = "argmin"


class Softmax(Op):
    """exp(x) / sum(exp(x)) along `axis`, computed with the max shift."""

    __props__ = ("axis",)

    def __init__(self, axis: int = -1):
        if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
            raise TypeError(f"{type(self).__name__}: axis must be an int, got {axis!r}")
        super().__init__(axis=int(axis))

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 1:
            raise self.type_error(inputs, f"takes 1 input, got {len(inputs)}")
        (x,) = inputs
        if x.ndim == 0:
            raise self.type_error(inputs, "needs at least one dimension")
        _resolve_axes(self, inputs, (self.axis,))
        dtype = _resolve(np.exp, (x.dtype,))
        return Apply(self, inputs, [Variable(TensorType(dtype, x.type.shape))])

    def __str__(self) -> str:
        return f"{type(self).__name__}{{axis={self.axis}}}"


class LogSoftmax(Softmax):
    """log(softmax(x)) along `axis`, computed as x - max - log(sum(exp(x - max)))."""


class LogSumExp(Reduce):
    """log(sum(exp(x))) over axes, computed as m + log(sum(exp(x - m))) with m the finite maximum.

    No exp overflows; over an empty axis the result is -inf, as log(sum(exp(x))) gives.
    """

    numpy_name = "exp"  # the result has the dtype of exp(x)


class Assert(Op):
    """`x` unchanged, once every condition holds everywhere; else an AssertionError with `message`.

    Not elementwise: fusion never folds the check into a loop, and only the
    `remove_all_assert` rule (unsafe, opt-in) or a condition known to be
    true drops it.
    """

    __props__ = ("message",)
    op_name = "assert_op"

    def __init__(self, message: str = "assertion failed"):
        if not isinstance(message, str):
            raise TypeError(f"Assert: message must be a str, got {message!r}")
        super().__init__(message=message)

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) < 2:
            raise self.type_error(inputs, "takes the checked value and one or more conditions")
        return Apply(self, inputs, [Variable(inputs[0].type)])

    def __str__(self) -> str:
        return f"Assert{{{self.message!r}}}"


def assert_op(x: Any, *conditions: Any, message: str = "assertion failed") -> Variable:
    """`x`, checked at run time: every condition must hold everywhere (AssertionError naming `message`)."""
    return Assert(message)(x, *conditions)


class Join(Op):
    """Arrays joined along `axis`, as numpy.concatenate: one rank, equal lengths on the other axes."""

    __props__ = ("axis",)

    def __init__(self, axis: int = 0):
        if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
            raise TypeError(f"{type(self).__name__}: axis must be an int, got {axis!r}")
        super().__init__(axis=int(axis))

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if not inputs:
            raise self.type_error(inputs, "takes one or more inputs")
        ndim = inputs[0].ndim
        if ndim == 0 or any(v.ndim != ndim for v in inputs):
            raise self.type_error(inputs, "joins inputs of one rank, at least 1")
        (axis,) = _resolve_axes(self, inputs, (self.axis,))
        shape: list[int | None] = []
        for d in range(ndim):
            lengths = [v.type.shape[d] for v in inputs]
            if d == axis:
                shape.append(None if None in lengths else builtins.sum(lengths))
                continue
            known = {length for length in lengths if length is not None}
            if len(known) > 1:
                raise self.type_error(inputs, f"lengths {sorted(known)} differ on axis {d}")
            shape.append(known.pop() if known else None)
        dtype = np.result_type(*(v.type.numpy_dtype for v in inputs)).name
        return Apply(self, inputs, [Variable(TensorType(dtype, tuple(shape)))])

    def __str__(self) -> str:
        return f"Join{{axis={self.axis}}}"


def concatenate(tensors: Sequence[Any], axis: int = 0) -> Variable:
    """numpy.concatenate: `tensors` joined along an existing `axis`."""
    return Join(axis)(*tensors)


def stack(tensors: Sequence[Any], axis: int = 0) -> Variable:
    """numpy.stack: `tensors` (one shape) joined along a new `axis`."""
    tensors = as_variables(list(tensors))
    if not tensors:
        raise TypeError("stack: needs one or more tensors")
    ndim = tensors[0].ndim
    if not -ndim - 1 <= axis <= ndim:
        raise TypeError(f"stack: axis {axis} is out of range for {ndim + 1} dimension(s)")
    position = axis % (ndim + 1)
    order = [*range(position), "x", *range(position, ndim)]
    return Join(position)(*(DimShuffle(v.ndim, tuple(order))(v) for v in tensors))


def _reduced(op: type[Reduce], x: Any, axis: int | Sequence[int] | None, keepdims: bool) -> Variable:
    """`op` over `axis` of `x`; with `keepdims` the reduced axes are put back with length 1 (a DimShuffle)."""
    x = as_variable(x)
    reduced = op(axis)(x)
    if not keepdims:
        return reduced
    axes = _resolve_axes(reduced.owner.op, [x], reduced.owner.op.axis)
    kept = iter(range(reduced.ndim))
    return DimShuffle(reduced.ndim, tuple("x" if i in axes else next(kept) for i in range(x.ndim)))(reduced)


def sum(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
    return _reduced(Sum, x, axis, keepdims)


def mean(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
    return _reduced(Mean, x, axis, keepdims)


def max(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
    return _reduced(Max, x, axis, keepdims)


def min(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
    return _reduced(Min, x, axis, keepdims)


def prod(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
    return _reduced(Prod, x, axis, keepdims)


def argmax(x: Any, axis: int | None = None) -> Variable:
    return Argmax(axis)(x)


def argmin(x: Any, axis: int | None = None) -> Variable:
    return Argmin(axis)(x)


def softmax(x: Any, axis: int = -1) -> Variable:
    return Softmax(axis)(x)


def log_softmax(x: Any, axis: int = -1) -> Variable:
    return LogSoftmax(axis)(x)


def logsumexp(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
    return _reduced(LogSumExp, x, axis, keepdims)


# -- shape ops ----------------------------------------------------------------------------


class DimShuffle(Op):
    """Reorder axes and insert broadcastable ones: `new_order` lists input axes and 'x'.

    Input axes left out must have static length 1 (they are dropped).
    """

    __props__ = ("input_ndim", "new_order")

    def __init__(self, input_ndim: int, new_order: Sequence[int | str]):
        order = tuple(o if o == "x" else int(o) for o in new_order)
        axes = [o for o in order if o != "x"]
        if len(set(axes)) != len(axes) or any(not 0 <= a < input_ndim for a in axes):
            raise ValueError(f"DimShuffle: bad order {order} for {input_ndim} input dimension(s)")
        super().__init__(input_ndim=int(input_ndim), new_order=order)

    @property
    def dropped(self) -> tuple[int, ...]:
        return tuple(a for a in range(self.input_ndim) if a not in self.new_order)

    @property
    def is_transpose(self) -> bool:
        return self.new_order == tuple(reversed(range(self.input_ndim)))

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 1:
            raise self.type_error(inputs, f"takes 1 input, got {len(inputs)}")
        (x,) = inputs
        if x.ndim != self.input_ndim:
            raise self.type_error(inputs, f"expects {self.input_ndim} dimension(s), got {x.ndim}")
        for a in self.dropped:
            if x.type.shape[a] != 1:
                raise self.type_error(inputs, f"cannot drop axis {a} of length {x.type.shape[a]} (must be 1)")
        shape = tuple(1 if o == "x" else x.type.shape[o] for o in self.new_order)
        return Apply(self, inputs, [Variable(TensorType(x.dtype, shape))])

    def __str__(self) -> str:
        return "Transpose" if self.is_transpose else f"DimShuffle{{{','.join(map(str, self.new_order))}}}"


def transpose(x: Any) -> Variable:
    """Reverse the axes of `x` (x.T)."""
    x = as_variable(x)
    return DimShuffle(x.ndim, tuple(reversed(range(x.ndim))))(x)


def static_lengths(who: str, shape: Any) -> tuple[int, ...]:
    """`shape` (ints, or lengths known before run time such as `y.shape` for a `y` of static shape) as
    ints, or a TypeError naming `who` and the length that is only known at run time."""
    try:
        entries = list(shape)
    except TypeError:
        if isinstance(shape, Variable):
            raise TypeError(
                f"{who}: the shape {shape} is known only at run time ({who} takes static lengths)"
            ) from None
        raise TypeError(f"{who}: shape must be a sequence of ints, got {shape!r}") from None
    lengths = []
    for entry in entries:
        known = static_length(entry)
        if known is None:
            if isinstance(entry, Variable):
                raise TypeError(
                    f"{who}: the length {entry} is known only at run time ({who} takes static lengths)"
                )
            raise TypeError(f"{who}: shape must be a sequence of ints, got {shape!r}")
        lengths.append(known)
    return tuple(lengths)


class Reshape(Op):
    """The input's elements in a new static `shape` (one entry may be -1)."""

    __props__ = ("shape",)

    def __init__(self, shape: Sequence[int]):
        new = static_lengths("Reshape", shape)
        if new.count(-1) > 1 or any(s < -1 for s in new):
            raise ValueError(f"Reshape: bad shape {new} (non-negative lengths, at most one -1)")
        super().__init__(shape=new)

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 1:
            raise self.type_error(inputs, f"takes 1 input, got {len(inputs)}")
        (x,) = inputs
        known = int(np.prod([s for s in self.shape if s != -1]))
        out: tuple[int | None, ...] = tuple(None if s == -1 else s for s in self.shape)
        if None not in x.type.shape:
            size = int(np.prod(x.type.shape))
            if -1 in self.shape:
                if known == 0 or size % known:
                    raise self.type_error(inputs, f"cannot reshape {size} elements to {self.shape}")
                out = tuple(size // known if s == -1 else s for s in self.shape)
            elif size != known:
                raise self.type_error(inputs, f"cannot reshape {size} elements to {self.shape}")
        return Apply(self, inputs, [Variable(TensorType(x.dtype, out))])

    def __str__(self) -> str:
        return f"Reshape{{{self.shape}}}"


class Alloc(Op):
    """alloc(value): `value` broadcast to the static `shape`, in a new array."""

    __props__ = ("shape",)

    def __init__(self, shape: Sequence[int]):
        new = static_lengths("Alloc", shape)
        if any(s < 0 for s in new):
            raise ValueError(f"Alloc: lengths must be non-negative, got {new}")
        super().__init__(shape=new)

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != 1:
            raise self.type_error(inputs, f"takes 1 input, got {len(inputs)}")
        (value,) = inputs
        if value.ndim > len(self.shape):
            raise self.type_error(inputs, f"value has more dimensions than {self.shape}")
        for have, want in zip(reversed(value.type.shape), reversed(self.shape)):
            if have not in (None, 1, want):
                raise self.type_error(inputs, f"value cannot broadcast to {self.shape}")
        return Apply(self, inputs, [Variable(TensorType(value.dtype, self.shape))])

    def __str__(self) -> str:
        return f"Alloc{{{self.shape}}}"


def alloc(value: Any, *shape: int) -> Variable:
    return Alloc(shape)(value)


def _inputs_read(
    inputs: list[Variable], nodes: list[Apply], outputs: list[Variable]
) -> tuple[tuple[int, ...], ...]:
    """For each output of an inner graph, the positions of the inputs it depends on (in order)."""
    read: dict[Variable, frozenset[int]] = {v: frozenset([i]) for i, v in enumerate(inputs)}
    for node in nodes:
        needed = frozenset().union(*(read.get(v, frozenset()) for v in node.inputs))
        for out in node.outputs:
            read[out] = needed
    return tuple(tuple(sorted(read[v])) for v in outputs)


# -- fused elementwise ---------------------------------------------------------------------


class Composite(Elemwise):
    """Several elementwise ops fused into one: an inner graph from `inputs` to `outputs`.

    Every inner node must be an `Elemwise`; the inner inputs are 0-d
    placeholders whose dtypes the outer inputs must match.  Two composites are
    equal when their inner graphs are structurally the same.  Every output
    has the broadcast shape of all the inputs, as an elementwise op's does;
    with `own_shapes` (what fusion builds) each output has the broadcast
    shape of the inputs it depends on, which may be narrower: a backend
    looping over the full shape checks at run time that those agree, and
    runs the inner graph op by op where they do not.  `output_inputs` gives,
    per output, the inputs whose shapes make its shape.
    """

    __props__ = ("signature",)

    def __init__(self, inputs: Sequence[Variable], outputs: Sequence[Variable], own_shapes: bool = False):
        inputs, outputs = list(inputs), list(outputs)
        for var in inputs:
            if var.owner is not None or isinstance(var, Constant) or var.ndim != 0:
                raise TypeError(f"Composite: inner input {var} must be a 0-d ownerless variable")
        nodes = io_toposort(inputs, outputs)
        index: dict[Variable, str] = {v: f"i{k}" for k, v in enumerate(inputs)}
        lines = []
        for k, node in enumerate(nodes):
            if not isinstance(node.op, Elemwise):
                raise TypeError(f"Composite: inner op {node.op} is not elementwise")
            args = []
            for v in node.inputs:
                if v in index:
                    args.append(index[v])
                elif isinstance(v, Constant):
                    args.append(f"c({v.dtype}:{v.data.tolist()!r})")
                else:
                    raise TypeError(f"Composite: inner variable {v} is not computed from the inputs")
            for j, out in enumerate(node.outputs):
                index[out] = f"n{k}.{j}"
            lines.append((node.op, tuple(args)))
        for v in outputs:
            if v not in index:
                raise TypeError(f"Composite: output {v} is not computed from the inputs")
        sig = (
            tuple(v.dtype for v in inputs),
            tuple(lines),
            tuple(index[v] for v in outputs),
            own_shapes,
        )
        super().__init__(signature=sig)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "outputs", outputs)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "nin", len(inputs))
        read = _inputs_read(inputs, nodes, outputs)
        object.__setattr__(self, "inputs_read", read)
        everything = tuple(range(len(inputs)))
        object.__setattr__(self, "output_inputs", read if own_shapes else (everything,) * len(outputs))
        object.__setattr__(self, "own_shapes", own_shapes)

    def make_node(self, *inputs: Variable) -> Apply:
        inputs = as_variables(inputs)
        if len(inputs) != len(self.inputs):
            raise self.type_error(inputs, f"takes {len(self.inputs)} inputs, got {len(inputs)}")
        for i, (outer, inner) in enumerate(zip(inputs, self.inputs)):
            if outer.dtype != inner.dtype:
                raise self.type_error(inputs, f"input {i} must have dtype {inner.dtype}")
        broadcast_shapes(*(v.type.shape for v in inputs), op_name=self)  # the inputs must broadcast together
        outputs = [
            Variable(TensorType(v.dtype, broadcast_shapes(*(inputs[i].type.shape for i in read))))
            for v, read in zip(self.outputs, self.output_inputs)
        ]
        return Apply(self, inputs, outputs)

    def __str__(self) -> str:
        return "Composite{" + ", ".join(str(n.op) for n in self.nodes) + "}"


# -- the operators and methods of Variable ---------------------------------------------------


class _VariableMethods:
    """`Variable`'s operators and the methods that build ops, written next to the ops they build and
    attached to Variable below: basic.py, which defines Variable, is imported by every module of ops."""

    def __add__(self, other: Any) -> Variable:
        return add(self, other)

    def __radd__(self, other: Any) -> Variable:
        return add(other, self)

    def __sub__(self, other: Any) -> Variable:
        return sub(self, other)

    def __rsub__(self, other: Any) -> Variable:
        return sub(other, self)

    def __mul__(self, other: Any) -> Variable:
        return mul(self, other)

    def __rmul__(self, other: Any) -> Variable:
        return mul(other, self)

    def __truediv__(self, other: Any) -> Variable:
        return true_div(self, other)

    def __rtruediv__(self, other: Any) -> Variable:
        return true_div(other, self)

    def __pow__(self, other: Any) -> Variable:
        return pow(self, other)

    def __rpow__(self, other: Any) -> Variable:
        return pow(other, self)

    def __matmul__(self, other: Any) -> Variable:
        return dot(self, other)

    def __rmatmul__(self, other: Any) -> Variable:
        return dot(other, self)

    def __neg__(self) -> Variable:
        return neg(self)

    def __abs__(self) -> Variable:
        return abs(self)

    def __lt__(self, other: Any) -> Variable:
        return lt(self, other)

    def __le__(self, other: Any) -> Variable:
        return le(self, other)

    def __gt__(self, other: Any) -> Variable:
        return gt(self, other)

    def __ge__(self, other: Any) -> Variable:
        return ge(self, other)

    def __getitem__(self, key: Any) -> Variable:
        """`x[1:, i]`, `x[None]`, `x[..., 0]`, `x[index_array]`: see `relwrite.graph.subtensor`."""
        return subtensor(self, key)

    def __iter__(self) -> Any:
        """A vector of static length yields its elements (`n, m = x.shape`); nothing else iterates."""
        length = self.type.shape[0] if self.ndim == 1 else None
        if length is None:
            raise TypeError(f"{self} is symbolic: it cannot be iterated over (index it, x[0], instead)")
        return (self[i] for i in range(length))

    @property
    def shape(self) -> Variable:
        """The shape at run time, a symbolic int64 vector (`shape(x)`); the static one is `x.type.shape`."""
        return symbolic_shape(self)

    def dot(self, other: Any) -> Variable:
        return dot(self, other)

    @property
    def T(self) -> Variable:
        return transpose(self)

    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
        return _reduced(Sum, self, axis, keepdims)

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
        return _reduced(Mean, self, axis, keepdims)

    def max(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
        return _reduced(Max, self, axis, keepdims)

    def min(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
        return _reduced(Min, self, axis, keepdims)

    def prod(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Variable:
        return _reduced(Prod, self, axis, keepdims)

    def argmax(self, axis: int | None = None) -> Variable:
        return Argmax(axis)(self)

    def argmin(self, axis: int | None = None) -> Variable:
        return Argmin(axis)(self)

    def reshape(self, *shape: int | Sequence[int]) -> Variable:
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return Reshape(shape)(self)

    def dimshuffle(self, *pattern: int | str) -> Variable:
        return DimShuffle(self.ndim, pattern)(self)

    def astype(self, dtype: Any) -> Variable:
        return Cast(dtype)(self)


def _attach(methods: type, cls: type) -> None:
    """Put the functions and properties `methods` defines on `cls`, named as `cls`'s own."""
    for name, member in vars(methods).items():
        if callable(member) or isinstance(member, property):
            function = member.fget if isinstance(member, property) else member
            function.__qualname__ = f"{cls.__name__}.{name}"
            setattr(cls, name, member)


_attach(_VariableMethods, Variable)

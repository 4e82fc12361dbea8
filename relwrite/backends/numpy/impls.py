"""How the NumPy backend computes each op: one implementation per op class, by dispatch.

`numpy_impl(op, node)` is called once per node (at link time) and returns an
`Impl` whose `fn` maps input arrays to the node's outputs.  Everything that
depends only on the node (output dtypes, axes, permutations, the inner program
of a `Composite`) is worked out there, so a call only does the numpy work.

Every result is an `ndarray` (0-d arrays, never numpy scalars) of exactly the
node's output dtype.  Semantics are those of the numpy function each op names;
`Sigmoid`, `Softplus`, `Softmax`, `LogSoftmax` and `LogSumExp` are computed without overflow;
`Fma`, which NumPy lacks, rounds once (`relwrite.backends.numpy.fma`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache, partial, singledispatch
from itertools import accumulate, pairwise
from typing import Any, NamedTuple

import numpy as np

from relwrite.backends.numpy.fma import fma
from relwrite.graph import ops
from relwrite.graph.basic import Apply, Constant, Op, Variable
from relwrite.graph.shape import Shape, Shape_i
from relwrite.graph.subtensor import ARRAY, index_of


class Impl(NamedTuple):
    """The NumPy implementation of one node.

    `fn(*arrays)` returns the output array (a tuple of arrays for a node with
    several outputs).  When `inplace_inputs` is not empty, `fn` also takes
    `out=`: a buffer of the output's shape and dtype that it writes the result
    into, which may be the buffer of the input at any of those positions.
    `view` says the result may share memory with an input.  `keeps_shape`
    says the result always has the shape of the inputs it may overwrite (an
    update of part of an array), so a buffer never needs a shape check;
    otherwise the result has the inputs' broadcast shape.
    """

    fn: Callable[..., Any]
    inplace_inputs: tuple[int, ...] = ()
    view: bool = False
    keeps_shape: bool = False


class EvaluationError(RuntimeError):
    """A node failed to evaluate; names the node and the runtime inputs, chains numpy's error.

    Built on an AssertionError (a false `assert_op` condition), it is an
    `AssertionFailedError`: every backend and mode wraps failures the same
    way, and a failed assertion stays catchable as the AssertionError the
    op promises.
    """

    def __new__(cls, node: Apply, arrays: Sequence[Any], error: BaseException) -> EvaluationError:
        if cls is EvaluationError and isinstance(error, AssertionError):
            cls = AssertionFailedError
        return super().__new__(cls, node, arrays, error)

    def __init__(self, node: Apply, arrays: Sequence[Any], error: BaseException):
        self.node = node
        inputs = ", ".join(_describe(a) for a in arrays)
        super().__init__(f"evaluating {node} on ({inputs}) failed: {type(error).__name__}: {error}")

    def __reduce__(self) -> tuple:
        """Pickle by message and attributes: the arrays and the chained error need not pickle (a worker
        process hands the error to its parent, the cache stores nothing else of it)."""
        return _restored_error, (type(self), str(self)), {"node": self.node}


def _restored_error(cls: type[EvaluationError], message: str) -> EvaluationError:
    error = Exception.__new__(cls, message)
    Exception.__init__(error, message)
    return error


class AssertionFailedError(EvaluationError, AssertionError):
    """An `assert_op` condition was false: an EvaluationError (naming the node) and an AssertionError."""


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype.name}{list(value.shape)}"
    return type(value).__name__


@singledispatch
def numpy_impl(op: Op, node: Apply) -> Impl:
    """The implementation of `node` (whose op is `op`), chosen by the op's class."""
    raise NotImplementedError(f"the NumPy backend has no implementation for {type(op).__name__} ops")


def evaluate(node: Apply, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of `node` on `arrays`, for one-off evaluation such as constant folding."""
    impl = numpy_impl(node.op, node)
    try:
        result = impl.fn(*arrays)
    except Exception as exc:
        raise EvaluationError(node, arrays, exc) from exc
    return list(result) if len(node.outputs) > 1 else [result]


@cache
def _numpy_dtype(name: str) -> np.dtype:
    return np.dtype(name)


def _dtype(node: Apply, index: int = 0) -> np.dtype:
    return _numpy_dtype(node.outputs[index].dtype)


def _finish(value: Any, dtype: np.dtype) -> np.ndarray:
    """`value` as an ndarray of `dtype` (numpy returns scalars for 0-d results)."""
    if type(value) is np.ndarray and value.dtype == dtype:
        return value
    return np.asarray(value, dtype=dtype)


def _delivered(values: np.ndarray, dtype: np.dtype, out: np.ndarray | None) -> np.ndarray:
    """`values` as an ndarray of `dtype`, written into `out` where the linker gave one (a step in place)."""
    if out is None:
        return _finish(values, dtype)
    np.copyto(out, values, casting="unsafe")
    return out


def _all_positions(node: Apply) -> tuple[int, ...]:
    return tuple(range(len(node.inputs)))


# -- elementwise -------------------------------------------------------------------------

_UFUNCS: dict[type[Op], np.ufunc] = {
    ops.Sub: np.subtract,
    ops.TrueDiv: np.true_divide,
    ops.Pow: np.power,
    ops.Maximum: np.maximum,
    ops.Minimum: np.minimum,
    ops.Lt: np.less,
    ops.Le: np.less_equal,
    ops.Gt: np.greater,
    ops.Ge: np.greater_equal,
    ops.Eq: np.equal,
    ops.Neq: np.not_equal,
    ops.Neg: np.negative,
    ops.Exp: np.exp,
    ops.Log: np.log,
    ops.Log1p: np.log1p,
    ops.Expm1: np.expm1,
    ops.Sqrt: np.sqrt,
    ops.Sqr: np.square,
    ops.Sin: np.sin,
    ops.Cos: np.cos,
    ops.Tanh: np.tanh,
    ops.Tan: np.tan,
    ops.Asin: np.arcsin,
    ops.Acos: np.arccos,
    ops.Atan: np.arctan,
    ops.Sinh: np.sinh,
    ops.Cosh: np.cosh,
    ops.Cbrt: np.cbrt,
    ops.Hypot: np.hypot,
    ops.Atan2: np.arctan2,
    ops.Abs: np.absolute,
}


def _array_out() -> Any:
    """The `out=` making a ufunc return a 0-d array, not a scalar (`...`, NumPy >= 2.3), or None."""
    try:
        np.negative(np.zeros(()), out=...)
    except TypeError:
        return None
    return ...


_ARRAY_OUT = _array_out()


def _ufunc_impl(ufunc: np.ufunc, op: Op, node: Apply) -> Impl:
    dtype, array_out, ndarray = _dtype(node), _ARRAY_OUT, np.ndarray

    def run(*arrays: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        result = ufunc(*arrays, out=array_out if out is None else out)
        if type(result) is ndarray and result.dtype is dtype:
            return result
        return _finish(result, dtype)

    return Impl(run, _all_positions(node))


for _op_class, _ufunc in _UFUNCS.items():
    numpy_impl.register(_op_class, partial(_ufunc_impl, _ufunc))


def _covers(shape: tuple[int, ...], other: tuple[int, ...]) -> bool:
    return other == shape or np.broadcast_shapes(shape, other) == shape


def _fold_impl(ufunc: np.ufunc, op: Op, node: Apply) -> Impl:
    """A variadic op as the left fold of a binary ufunc: ((x0 . x1) . x2) . ..."""
    dtype = _dtype(node)
    count = len(node.inputs)
    if count == 1:
        return Impl(lambda x: np.array(x, dtype=dtype, copy=True))
    if count == 2:
        return _ufunc_impl(ufunc, op, node)
    # The accumulator may absorb the next input in place when the fold step keeps its dtype.
    partial_dtypes = list(
        accumulate(
            (v.dtype for v in node.inputs[1:]),
            lambda a, d: op.output_dtype([a, d]),
            initial=node.inputs[0].dtype,
        )
    )[1:]  # each prefix's, from the last (linear)
    keeps_dtype = [a == b for a, b in pairwise(partial_dtypes)]

    def run(*arrays: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        acc = ufunc(arrays[0], arrays[1], out=out)
        for arr, in_place in zip(arrays[2:], keeps_dtype):
            target = out
            if target is None and in_place and type(acc) is np.ndarray and _covers(acc.shape, arr.shape):
                target = acc
            acc = ufunc(acc, arr, out=target)
        return _finish(acc, dtype)

    # Writing into an input beyond the first two would overwrite it before the fold reads it.
    return Impl(run, (0, 1))


numpy_impl.register(ops.Add, partial(_fold_impl, np.add))
numpy_impl.register(ops.Mul, partial(_fold_impl, np.multiply))


@numpy_impl.register
def _reciprocal(op: ops.Reciprocal, node: Apply) -> Impl:
    dtype = _dtype(node)

    def run(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return _finish(np.divide(1, x, out=out, dtype=dtype), dtype)

    return Impl(run, (0,))


@numpy_impl.register
def _sigmoid(op: ops.Sigmoid, node: Apply) -> Impl:
    dtype = _dtype(node)
    # float16 computes in float32 and rounds once: in float16 1 + exp(-8) is 1, so sigmoid(8) was 1.0,
    # not 0.9995 (and 1 / (1 - exp(1 - sigmoid(8))) infinite: fuzzer seed 35, graph 2237)
    work = np.promote_types(dtype, np.float32)
    one = work.type(1)

    def run(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        x = x.astype(work, copy=False)
        small = np.exp(np.negative(np.abs(x)))  # exp(-|x|) never overflows
        numerator = np.where(x >= 0, one, small)
        quotient = np.divide(numerator, np.add(one, small), out=out if work == dtype else None)
        return quotient if quotient is out else _delivered(quotient, dtype, out)

    return Impl(run, (0,))


@numpy_impl.register
def _softplus(op: ops.Softplus, node: Apply) -> Impl:
    dtype = _dtype(node)
    zero = dtype.type(0)

    def run(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return _finish(np.logaddexp(zero, x.astype(dtype, copy=False), out=out), dtype)

    return Impl(run, (0,))


def _special_impl(function: Any, op: Op, node: Apply) -> Impl:
    """A float function NumPy lacks (erf, erfc), elementwise over Python's double-precision `math` one."""
    dtype = _dtype(node)
    elementwise = np.frompyfunc(function, 1, 1)

    def run(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        values = np.asarray(elementwise(np.asarray(x, dtype=np.float64)), dtype=np.float64)
        return _delivered(values, dtype, out)

    return Impl(run, (0,))


numpy_impl.register(ops.Erf, partial(_special_impl, math.erf))
numpy_impl.register(ops.Erfc, partial(_special_impl, math.erfc))


@numpy_impl.register
def _fma(op: ops.Fma, node: Apply) -> Impl:
    dtype = _dtype(node)

    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return _delivered(fma(a, b, c, dtype), dtype, out)

    return Impl(run, _all_positions(node))


@numpy_impl.register
def _log1mexp(op: ops.Log1mexp, node: Apply) -> Impl:
    dtype = _dtype(node)
    cut = dtype.type(-np.log(2.0))

    def run(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        x = x.astype(dtype, copy=False)
        with np.errstate(invalid="ignore", divide="ignore"):
            # log(-expm1(x)) near 0, log1p(-exp(x)) below -log 2: each where it is accurate (Maechler 2012)
            near = np.log(np.negative(np.expm1(np.minimum(x, 0))))
            far = np.log1p(np.negative(np.exp(x)))
            values = np.where(x > cut, near, far)
            values = np.where(x > 0, dtype.type(np.nan), values)
        return _delivered(values, dtype, out)

    return Impl(run, (0,))


@numpy_impl.register
def _identity(op: ops.Identity, node: Apply) -> Impl:
    return Impl(lambda x: x, view=True)


@numpy_impl.register
def _switch(op: ops.Switch, node: Apply) -> Impl:
    dtype = _dtype(node)
    return Impl(lambda cond, a, b: _finish(np.where(cond, a, b), dtype))


@numpy_impl.register
def _fill(op: ops.Fill, node: Apply) -> Impl:
    dtype = _dtype(node)

    def run(model: np.ndarray, value: np.ndarray) -> np.ndarray:
        result = np.empty(np.broadcast_shapes(model.shape, value.shape), dtype=dtype)
        np.copyto(result, value)
        return result

    return Impl(run)


@numpy_impl.register
def _cast(op: ops.Cast, node: Apply) -> Impl:
    dtype = _dtype(node)
    return Impl(lambda x: x.astype(dtype))


# -- fused elementwise ----------------------------------------------------------------------


def _needs_expanding(op: ops.Composite, impls: Sequence[Impl]) -> tuple[bool, ...]:
    """Which inner outputs must be put into a fresh array of their output's shape.

    Those the op broadcasts against inputs they do not read (an elementwise
    op's outputs all have the shape of all its inputs, unless `own_shapes`),
    and those whose buffer may be an inner input, a constant or the buffer of
    an earlier output (views share the buffer of the input they read).
    """
    origin: dict[Variable, Variable] = {v: v for v in op.inputs}
    for inner, impl in zip(op.nodes, impls):
        for var in inner.inputs:
            if isinstance(var, Constant):
                origin.setdefault(var, var)
        for out in inner.outputs:
            origin[out] = origin[inner.inputs[0]] if impl.view else out
    expand, taken = [], set(op.inputs)
    for var, read, shaped_by in zip(op.outputs, op.inputs_read, op.output_inputs):
        source = origin[var]
        expand.append(read != shaped_by or isinstance(source, Constant) or source in taken)
        taken.add(source)
    return tuple(expand)


def _last_reads(program: list[tuple], first_scratch: int, kept: set[int]) -> list[tuple[int, ...]]:
    """For each step of a Composite's program, the scratch slots it reads (or writes) for the last time.

    Inputs and constants (below `first_scratch`) belong to the caller; `kept`
    slots are outputs.  A value never read again is dropped after its step.
    """
    last: dict[int, int] = {}
    for step, (_, ins, outs, _) in enumerate(program):
        for slot in (*ins, *outs):
            if slot >= first_scratch and slot not in kept:
                last[slot] = step
    freed: list[list[int]] = [[] for _ in program]
    for slot, step in last.items():
        freed[step].append(slot)
    return [tuple(slots) for slots in freed]


REUSE_MIN_SIZE = 4096
"""A Composite whose inputs are all smaller than this many elements writes over no intermediate, nor
does one smaller than this (the checks would cost more than the allocations they save)."""


def _reusable_inputs(
    op: ops.Composite,
    impls: Sequence[Impl],
    program: list[tuple],
    freed: list[tuple[int, ...]],
    first_scratch: int,
) -> list[tuple[tuple[int, np.dtype], ...]]:
    """For each step of a Composite's program, the input positions whose buffer it may write its result
    into, with the dtype the result has: an intermediate read for the last time there, made by a step
    that returns a new array and read by none that returns a view of it, of the result's dtype, and
    read by the step only at positions the implementation may overwrite (a fold reads its third
    operand after writing its first result)."""
    shared = set()  # slots whose buffer another slot may hold: made or read by a view
    for (_, ins, outs, _), impl in zip(program, impls):
        if impl.view:
            shared.update(ins)
            shared.update(outs)
    plan = []
    for (_, ins, _outs, several), impl, inner, dying in zip(program, impls, op.nodes, freed):
        dtype = _numpy_dtype(inner.outputs[0].dtype)
        positions = tuple(
            (p, dtype)
            for p in impl.inplace_inputs
            if not several
            and ins[p] >= first_scratch
            and ins[p] in dying
            and ins[p] not in shared
            and inner.inputs[p].dtype == inner.outputs[0].dtype
            and all(q in impl.inplace_inputs for q, slot in enumerate(ins) if slot == ins[p])
        )
        plan.append(positions)
    return plan


def _spent_buffer(args: Sequence[Any], positions: tuple[tuple[int, np.dtype], ...]) -> np.ndarray | None:
    """The first of the arguments at `positions` that can take the step's result: an array owning its
    data, large enough to be worth it, of the result's dtype and broadcast shape."""
    for p, dtype in positions:
        buffer = args[p]
        if (
            type(buffer) is np.ndarray
            and buffer.size >= REUSE_MIN_SIZE
            and buffer.base is None
            and buffer.dtype == dtype
            and buffer.flags.writeable
            and np.broadcast_shapes(*(np.shape(a) for a in args)) == buffer.shape
        ):
            return buffer
    return None


@numpy_impl.register
def _composite(op: ops.Composite, node: Apply) -> Impl:
    """Runs the inner graph on the full arrays, each inner node through its own implementation.

    An intermediate goes after its last read, and a step writes its result
    into the buffer of an intermediate it reads for the last time where it
    can (`_reusable_inputs`): the peak stays near the most values alive at once.
    """
    slots: dict[Variable, int] = {v: i for i, v in enumerate(op.inputs)}
    constants: list[np.ndarray] = []
    for inner in op.nodes:
        for var in inner.inputs:
            if isinstance(var, Constant) and var not in slots:
                slots[var] = len(slots)
                constants.append(var.data)
    impls = [numpy_impl(inner.op, inner) for inner in op.nodes]
    program = []
    for inner, impl in zip(op.nodes, impls):
        for out in inner.outputs:
            slots[out] = len(slots)
        out_slots = tuple(slots[v] for v in inner.outputs)
        program.append((impl.fn, tuple(slots[v] for v in inner.inputs), out_slots, len(out_slots) > 1))
    scratch = len(slots) - len(op.inputs) - len(constants)
    output_slots = tuple(slots[v] for v in op.outputs)
    freed = _last_reads(program, first_scratch=len(op.inputs) + len(constants), kept=set(output_slots))
    reusable = _reusable_inputs(op, impls, program, freed, len(op.inputs) + len(constants))
    unplanned = [()] * len(program)  # small inputs: nothing is worth writing over
    expand = _needs_expanding(op, impls)
    expanding = any(expand)
    shaped_by = op.output_inputs
    dtypes = tuple(_numpy_dtype(v.dtype) for v in op.outputs)

    def evaluate_inner(arrays: Sequence[np.ndarray], out: np.ndarray | None) -> list[Any]:
        values = [*arrays, *constants, *([None] * scratch)]
        last = len(program) - 1
        plan = reusable if any(np.size(a) >= REUSE_MIN_SIZE for a in arrays) else unplanned
        for step, (fn, ins, outs, several) in enumerate(program):
            args = [values[i] for i in ins]
            if out is not None and step == last:
                result = fn(*args, out=out)
            elif plan[step] and (buffer := _spent_buffer(args, plan[step])) is not None:
                result = fn(*args, out=buffer)  # a dying intermediate's buffer: no new array
            else:
                result = fn(*args)
            if several:
                for slot, value in zip(outs, result):
                    values[slot] = value
            else:
                values[outs[0]] = result
            for slot in freed[step]:  # intermediates go after their last use: memory stays near one array
                values[slot] = None
            args = result = None
        results = [values[s] for s in output_slots]
        if expanding:
            for k, value in enumerate(results):
                if expand[k]:
                    shape = np.broadcast_shapes(*(arrays[i].shape for i in shaped_by[k]))
                    results[k] = np.empty(shape, dtype=dtypes[k])
                    np.copyto(results[k], value)
        return results

    if len(op.outputs) > 1:
        return Impl(lambda *arrays: tuple(evaluate_inner(arrays, None)))

    # The output's own node may write into `out` when it can take any of its inputs' buffers.
    final = op.outputs[0].owner
    accepts_out = (
        final is not None and not expand[0] and set(impls[-1].inplace_inputs) == set(range(len(final.inputs)))
    )
    if not accepts_out:
        return Impl(lambda *arrays: evaluate_inner(arrays, None)[0])

    def run(*arrays: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return evaluate_inner(arrays, out)[0]

    return Impl(run, _all_positions(node))


# -- linear algebra ------------------------------------------------------------------------------


@numpy_impl.register
def _dot(op: ops.Dot, node: Apply) -> Impl:
    dtype = _dtype(node)
    return Impl(lambda x, y: _finish(np.dot(x, y), dtype))


@numpy_impl.register
def _dot22(op: ops.Dot22, node: Apply) -> Impl:
    dtype = _dtype(node)
    return Impl(lambda x, y: _finish(np.matmul(x, y), dtype))


def _scaled_sum(base: np.ndarray, product: np.ndarray) -> np.ndarray:
    """base + product, in place in whichever fresh operand already has the result's shape."""
    if product.shape == np.broadcast_shapes(base.shape, product.shape):
        return np.add(base, product, out=product)
    return np.add(base, product)


@numpy_impl.register
def _gemm(op: ops.Gemm, node: Apply) -> Impl:
    dtype = _dtype(node)

    def run(z: np.ndarray, a: np.ndarray, x: np.ndarray, y: np.ndarray, b: np.ndarray) -> np.ndarray:
        product = np.matmul(x, y)
        product *= a
        return _finish(_scaled_sum(np.multiply(b, z), product), dtype)

    return Impl(run)


@numpy_impl.register
def _gemv(op: ops.Gemv, node: Apply) -> Impl:
    dtype = _dtype(node)

    def run(y: np.ndarray, a: np.ndarray, mat: np.ndarray, x: np.ndarray, b: np.ndarray) -> np.ndarray:
        product = np.matmul(mat, x)
        product *= a
        return _finish(_scaled_sum(np.multiply(b, y), product), dtype)

    return Impl(run)


@numpy_impl.register
def _ger(op: ops.Ger, node: Apply) -> Impl:
    dtype = _dtype(node)

    def run(mat: np.ndarray, a: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        product = np.outer(x, y)
        product *= a
        return _finish(_scaled_sum(mat, product), dtype)

    return Impl(run)


# -- reductions and softmax ----------------------------------------------------------------------

_REDUCTIONS: dict[type[Op], Callable[..., Any]] = {
    ops.Sum: np.sum,
    ops.Mean: np.mean,
    ops.Max: np.max,
    ops.Min: np.min,
    ops.Prod: np.prod,
}


def _reduce_impl(reduction: Callable[..., Any], op: ops.Reduce, node: Apply) -> Impl:
    dtype, axis = _dtype(node), op.axis
    return Impl(lambda x: _finish(reduction(x, axis=axis), dtype))


for _op_class, _reduction in _REDUCTIONS.items():
    numpy_impl.register(_op_class, partial(_reduce_impl, _reduction))


@numpy_impl.register
def _assert(op: ops.Assert, node: Apply) -> Impl:
    message = op.message

    def run(x: np.ndarray, *conditions: np.ndarray) -> np.ndarray:
        for condition in conditions:
            if not np.all(condition):
                raise AssertionError(message)
        return x

    return Impl(run, view=True)


@numpy_impl.register
def _join(op: ops.Join, node: Apply) -> Impl:
    dtype, axis = _dtype(node), op.axis
    return Impl(lambda *arrays: np.concatenate(arrays, axis=axis).astype(dtype, copy=False))


@numpy_impl.register
def _argmax(op: ops.Argmax, node: Apply) -> Impl:
    find, axis = getattr(np, op.numpy_name), op.axis
    return Impl(lambda x: np.asarray(find(x, axis=axis), dtype=np.int64))


def _shifted(x: np.ndarray, dtype: np.dtype, axis: int) -> np.ndarray:
    """x - max(x) along axis, as a fresh array of `dtype` (so exp of it never overflows).  In a slice
    holding +inf (and no NaN) the +infs are 0 and the rest -inf: the limit, softmax 1/k at the k infinities
    and 0 elsewhere; a slice of -inf or holding NaN is not shifted (NaN throughout, as exp(x) / sum(exp(x))
    gives); an empty axis has nothing to shift."""
    x = x.astype(dtype, copy=False)
    top = x.max(axis=axis, keepdims=True, initial=-np.inf)
    with np.errstate(invalid="ignore"):
        shifted = np.subtract(x, np.where(np.isfinite(top), top, 0))
    return np.where(top == np.inf, np.where(x == np.inf, 0, -np.inf), shifted).astype(dtype, copy=False)


def _log_sum_exp_shifted(shifted: np.ndarray, axis: Any) -> np.ndarray:
    """log(sum(exp(shifted))) along `axis` for shifted = x - max(x): the maximum's term is exactly 1, so
    this is log1p of the other terms' sum (and of the maximum's repeats), which keeps every digit of a
    sum the maximum dominates (log_softmax of a confident logit: log(1 + 1e-11) loses half of them)."""
    at_top = shifted == 0
    rest = np.exp(np.where(at_top, -np.inf, shifted)).sum(axis=axis, keepdims=True)
    return np.log1p(rest + (at_top.sum(axis=axis, keepdims=True) - 1))


@numpy_impl.register
def _softmax(op: ops.Softmax, node: Apply) -> Impl:
    dtype, axis = _dtype(node), op.axis
    # float16 and float32 compute in float64 and round once: a float32 sum of the terms rounds by up
    # to half an ulp of 1, which the division carries into every result (fuzzer seed 35, graph 2361)
    work = np.promote_types(dtype, np.float64)

    def run(x: np.ndarray) -> np.ndarray:
        result = np.exp(_shifted(x, work, axis))
        result /= result.sum(axis=axis, keepdims=True)
        return result.astype(dtype, copy=False)

    return Impl(run)


@numpy_impl.register
def _log_softmax(op: ops.LogSoftmax, node: Apply) -> Impl:
    dtype, axis = _dtype(node), op.axis
    work = np.promote_types(dtype, np.float64)  # rounded once, as `_softmax`: a third were an ulp off

    def run(x: np.ndarray) -> np.ndarray:
        result = _shifted(x, work, axis)
        with np.errstate(invalid="ignore", divide="ignore"):  # a slice of -inf or holding NaN: NaN
            result -= _log_sum_exp_shifted(result, axis)
        # a maximum's entry is -log(1 + the others' terms), below zero wherever another entry is above
        # -inf (a lone +inf's too, in the limit): where that rounds to zero it is -0.0, not 0 - 0 = +0.0
        others_live = (x > -np.inf).sum(axis=axis, keepdims=True) > 1
        return np.where((result == 0) & others_live, -0.0, result).astype(dtype, copy=False)

    return Impl(run)


@numpy_impl.register
def _logsumexp(op: ops.LogSumExp, node: Apply) -> Impl:
    dtype, axis = _dtype(node), op.axis

    def run(x: np.ndarray) -> np.ndarray:
        x = x.astype(dtype, copy=False)
        top = np.max(x, axis=axis, keepdims=True, initial=-np.inf)  # -inf over an empty axis
        top = np.where(np.isfinite(top), top, 0)  # slices of -inf, or holding +inf or NaN: no shift
        # Where the shift is 0 for non-finite slices, terms equal to 0 are not their maximum; the
        # result is still right: -inf for all -inf, +inf or NaN where those dominate.
        total = _log_sum_exp_shifted(x - top, axis) + top
        return _finish(np.squeeze(total, axis=axis), dtype)

    return Impl(run)


# -- shape ops --------------------------------------------------------------------------------------


@numpy_impl.register
def _dimshuffle(op: ops.DimShuffle, node: Apply) -> Impl:
    """Drop the length-1 axes left out, reorder the kept ones, insert the 'x' axes: all views."""
    dropped = op.dropped
    kept = [o for o in op.new_order if o != "x"]
    rank = {axis: k for k, axis in enumerate(sorted(kept))}
    permutation = tuple(rank[o] for o in kept)
    expand = tuple(np.newaxis if o == "x" else slice(None) for o in op.new_order)
    reorders = permutation != tuple(range(len(permutation)))
    inserts = "x" in op.new_order

    def run(x: np.ndarray) -> np.ndarray:
        if dropped:
            x = x.squeeze(axis=dropped)
        if reorders:
            x = x.transpose(permutation)
        if inserts:
            x = x[expand]
        return x

    return Impl(run, view=True)


@numpy_impl.register
def _reshape(op: ops.Reshape, node: Apply) -> Impl:
    shape = op.shape
    return Impl(lambda x: x.reshape(shape), view=True)


@numpy_impl.register
def _alloc(op: ops.Alloc, node: Apply) -> Impl:
    dtype, shape = _dtype(node), op.shape

    def run(value: np.ndarray) -> np.ndarray:
        result = np.empty(shape, dtype=dtype)
        np.copyto(result, value)
        return result

    return Impl(run)


# -- indexing -----------------------------------------------------------------------------------------


@numpy_impl.register
def _subtensor(op: ops.Subtensor, node: Apply) -> Impl:
    key_of = index_of(op.idx_list)
    return Impl(lambda x, *index: np.asarray(x[key_of(index)]), view=True)


@numpy_impl.register
def _advanced_subtensor(op: ops.AdvancedSubtensor, node: Apply) -> Impl:
    key_of = index_of(op.idx_list)
    return Impl(lambda x, *index: np.asarray(x[key_of(index)]))


@numpy_impl.register
def _inc_subtensor(op: ops.IncSubtensor, node: Apply) -> Impl:
    """A copy of x with the part changed; into `out` (x's own buffer when nothing reads x later)."""
    key_of, setting, accumulate = index_of(op.idx_list), op.set_instead_of_inc, ARRAY in op.idx_list

    def run(x: np.ndarray, y: np.ndarray, *index: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        key = key_of(index)
        if out is None:
            out = np.array(x, copy=True)
        elif out is not x:
            np.copyto(out, x)
        if setting:
            out[key] = y
        elif accumulate:
            np.add.at(out, key, y)
        else:  # a view even for one element: += casts as a ufunc, wrapping as x's dtype does, where an
            out[(*key, ...)] += y  # element (a NumPy scalar) refuses a sum beyond it (int8 -127 + -2)
        return out

    return Impl(run, inplace_inputs=(0,), keeps_shape=True)


# -- shapes -------------------------------------------------------------------------------------------


@numpy_impl.register
def _shape(op: Shape, node: Apply) -> Impl:
    return Impl(lambda x: np.array(x.shape, dtype=np.int64))


@numpy_impl.register
def _shape_i(op: Shape_i, node: Apply) -> Impl:
    i = op.i
    return Impl(lambda x: np.array(x.shape[i], dtype=np.int64))

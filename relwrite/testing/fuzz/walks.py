"""Graph walks: relwrite's nodes (of an original or a rewritten graph) evaluated by the fuzzer's semantics.

A walk computes node by node (no recursion over depth), in each node's own
dtype, in long double or with mpmath (`PRECISIONS`), optionally moving every
floating result by its rounding; it also shows the static types and the
non-finite values along the way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from relwrite.backends import exact
from relwrite.graph import ops
from relwrite.graph.basic import Apply, Constant, Variable, io_toposort
from relwrite.testing.fuzz.arbiter import _mp_map, _mp_node_value
from relwrite.testing.fuzz.semantics import (
    _NODE_UFUNCS,
    _REDUCTIONS,
    _broadcast_to_all,
    _errstate,
    _ref_logsumexp,
    _ref_softmax,
    _shape_op_value,
)

PRECISIONS = ("native", "long", "mp")
"""How graph walks compute floats: in their own dtype, in np.longdouble, or with mpmath (any exponent)."""


def _widen(value: np.ndarray, precision: str) -> np.ndarray:
    """`value` in the walk's wide float type (object arrays of mpmath numbers for "mp")."""
    if precision == "long":
        return value if value.dtype == np.longdouble else value.astype(np.longdouble)
    if value.dtype == object:
        return value
    mpf = exact.context.mpf
    convert = np.frompyfunc(lambda v: mpf(float(v)) if isinstance(v, float) else mpf(int(v)), 1, 1)
    return np.asarray(convert(value.astype(np.float64) if value.dtype.kind == "f" else value), dtype=object)


def _floated(value: Any, dtype: np.dtype | None) -> Any:
    """`value`, an integer or boolean array an op computes in the float `dtype`, converted to it as NumPy
    converts it (an int64 near 2**63 rounds to a multiple of 1024 in float64: sin of it is sin of that,
    not of the integer); anything else as it is."""
    value = np.asarray(value)
    if dtype is None or dtype.kind != "f" or value.dtype.kind not in "biu":
        return value
    return value.astype(dtype)


def _node_value(
    node: Apply,
    args: list[Any],
    precision: str,
    noise: np.random.Generator | None = None,
    constants: dict[Variable, Any] | None = None,
) -> list[Any]:
    """The outputs of `node` on `args` by the reference semantics, computing floats in `precision`.

    `noise` moves the partial results inside a wide add or mul (`_wide_fold`)
    and a Composite's inner results (each rounds to its dtype as the node's
    outputs do); the node's own outputs are moved by the walk.  `constants`
    are the values a Composite's inner constants take (`_walk`).
    """
    op = node.op
    if isinstance(op, ops.Composite):  # its inner nodes widen as they compute: integer steps still wrap
        outs = _walk(op.inputs, op.outputs, args, precision, noise, constants=constants)
        # each output has the shape of the inputs it is made of (`Composite.output_inputs`: all of them
        # unless fusion made the Composite with its outputs' own shapes)
        return [_broadcast_to_all(v, [args[i] for i in read]) for v, read in zip(outs, op.output_inputs)]
    wide = precision != "native" and node.outputs[0].dtype.startswith("float")
    if wide and isinstance(op, (ops.Add, ops.Mul)):
        ufunc = np.add if isinstance(op, ops.Add) else np.multiply
        return [_wide_fold(ufunc, args, [v.type.numpy_dtype for v in node.inputs], precision, noise)]
    if wide and not isinstance(op, (ops.Cast, ops.Fill)):
        first = 1 if isinstance(op, ops.Switch) else 0
        # an elementwise op computes integers in its float dtype: they round to it first
        dtype = node.outputs[0].type.numpy_dtype if isinstance(op, ops.Elemwise) else None
        args = [a if k < first else _widen(_floated(a, dtype), precision) for k, a in enumerate(args)]
    kind = type(op)
    if precision == "mp" and any(a.dtype == object for a in args if isinstance(a, np.ndarray)):
        result = _mp_node_value(op, args)
    elif kind in _NODE_UFUNCS:
        result = _NODE_UFUNCS[kind](*args)
    elif kind is ops.Fill:
        result = np.array(np.broadcast_to(args[1], np.broadcast_shapes(args[0].shape, args[1].shape)))
    elif kind is ops.Cast:
        result = args[0].astype(np.longdouble if wide else op.dtype)
    elif kind in _REDUCTIONS:
        result = _REDUCTIONS[kind](args[0], axis=op.axis)
    elif kind is ops.Join:
        result = np.concatenate(args, axis=op.axis)
    elif kind is ops.Assert:
        result = args[0]
    elif kind is ops.LogSumExp:
        result = _ref_logsumexp(args[0], op.axis)
    elif isinstance(op, ops.Softmax):
        result = _ref_softmax(args[0], op.axis, isinstance(op, ops.LogSoftmax))
    else:
        result = _shape_op_value(op, args)
    result = np.asarray(result)
    return [_widen(result, precision) if wide else result]


def _wide_fold(
    ufunc: np.ufunc,
    args: Sequence[Any],
    dtypes: Sequence[np.dtype],
    precision: str,
    noise: np.random.Generator | None = None,
) -> np.ndarray:
    """A variadic add or mul folded left as NumPy folds it, widened from the first float on.

    Integer operands met before any float combine in their own dtype, with
    its wraparound, as they do in the native walk: widening them first would
    compute a different (unwrapped) value, not the same one more precisely.
    With `noise`, a partial result that the graph computes in a float
    narrower than the node's (x * x of a float32 x in a float64 product)
    moves as that float's rounding moves it: the walk's noise on the node's
    output, at the node's dtype, is far smaller.  `dtypes` are the operands'
    static dtypes (`args` may come widened).
    """
    result = np.result_type(*dtypes)
    acc, native = np.asarray(args[0]), dtypes[0]
    for arg, dtype in zip(args[1:], dtypes[1:]):
        arg, native = np.asarray(arg), np.result_type(native, dtype)
        if "f" in (acc.dtype.kind, arg.dtype.kind) or object in (acc.dtype, arg.dtype):
            acc = np.asarray(
                ufunc(_widen(_floated(acc, native), precision), _widen(_floated(arg, native), precision))
            )
            if noise is not None and native.kind == "f" and native.itemsize < result.itemsize:
                acc = _rounding_noise(acc, native, noise)
        else:
            acc = np.asarray(ufunc(acc, arg))
    return _widen(np.asarray(acc), precision)


def _wide_walk(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    values: Sequence[Any],
    precision: str | int,
    noise: np.random.Generator | None = None,
    env: dict[Variable, Any] | None = None,
    constants: dict[Variable, Any] | None = None,
) -> list[Any]:
    """A walk in long double (`precision` "long") or with mpmath numbers of `precision` bits."""
    if precision == "long":
        return _walk(inputs, outputs, values, "long", noise, env, constants)
    with exact.precision(int(precision)):
        return _walk(inputs, outputs, values, "mp", noise, env, constants)


def _wide_spread(clean: Any, noisy: Sequence[Any]) -> np.ndarray:
    """Eight times the largest finite move between a wide value and its noisy walks, as float64."""
    spread = np.zeros(np.shape(clean))
    if clean.dtype != object and clean.dtype.kind != "f":  # integers and booleans have no rounding
        return spread
    with _errstate():
        for other in noisy:
            if clean.dtype == object:
                move = _mp_map(lambda a, b: float(abs(a - b)), clean, other).astype(np.float64)
            else:
                move = np.abs(other - clean).astype(np.float64)
            spread = np.maximum(spread, np.where(np.isfinite(move), move, 0))
        return 8 * spread  # a spread near the largest float is an infinite slack


def _walk(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    values: Sequence[Any],
    precision: str,
    noise: np.random.Generator | None = None,
    env: dict[Variable, Any] | None = None,
    constants: dict[Variable, Any] | None = None,
) -> list[Any]:
    """The outputs of a graph on `values` by `_node_value`, node by node (no recursion over depth).

    With `noise`, every floating result moves by two ulps of its own dtype
    (and two subnormal spacings), up or down at random: a wide walk then
    shows how much the rounding the graph's dtypes imply can move its
    outputs (the slack a comparison with it allows).
    `env`, when given, receives every variable's value; `constants` gives
    constants values other than their own, in the walk's precision (and in
    Composites' inner graphs: `_constants_moved`).
    """
    env = {} if env is None else env

    def start(value: Any) -> np.ndarray:
        value = np.asarray(value)
        return _widen(value, precision) if precision != "native" and value.dtype.kind == "f" else value

    with _errstate():
        for var, value in zip(inputs, values):
            env[var] = start(value)
        for node in io_toposort(inputs, outputs):
            args = []
            for var in node.inputs:
                if var not in env:  # a constant
                    env[var] = constants[var] if constants and var in constants else start(var.data)
                args.append(env[var])
            for out, value in zip(node.outputs, _node_value(node, args, precision, noise, constants)):
                if noise is not None and out.dtype.startswith("float"):
                    value = _rounding_noise(value, out.type.numpy_dtype, noise)
                env[out] = value
        return [env[v] if v in env else start(v.data) for v in outputs]


def _constants_moved(fgraph: Any, precision: str | int, noise: np.random.Generator) -> dict[Variable, Any]:
    """Every float constant `fgraph` reads, moved by two ulps of its dtype up or down at random (as
    `_rounding_noise` moves a node's result) and widened for a `_wide_walk` in `precision`, for its
    `env`: how far constants a rewrite computed in the graph's dtypes may be from the values they
    stand for over the reals."""
    wide = "long" if precision == "long" else "mp"
    moved: dict[Variable, Any] = {}
    graphs = [(fgraph.inputs, fgraph.outputs)]
    with _errstate():  # an infinite or NaN constant stays as it is, quietly
        while graphs:  # the graph, and the inner graphs of its Composites
            inputs, outputs = graphs.pop()
            for node in io_toposort(inputs, outputs):
                if isinstance(node.op, ops.Composite):
                    graphs.append((node.op.inputs, node.op.outputs))
                for v in node.inputs:
                    if isinstance(v, Constant) and v.dtype.startswith("float") and v not in moved:
                        value = _rounding_noise(np.asarray(v.data), v.type.numpy_dtype, noise)
                        moved[v] = _widen(value, wide)
    return moved


def _rounding_noise(value: np.ndarray, dtype: np.dtype, noise: np.random.Generator) -> np.ndarray:
    """`value` moved by two ulps of `dtype` (and two of its subnormal spacings), up or down at random."""
    info = np.finfo(dtype)  # two ulps either way: a draw near 0 would hide its rounding
    steps = noise.integers(0, 2, np.shape(value)) * 4.0 - 2.0
    return _nudged(value, steps * info.eps, steps * float(info.smallest_subnormal))


def _nudged(value: np.ndarray, move: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """`value * (1 + move) + floor` for finite elements, computed as value + value * move + floor (1 + move
    rounds): a relative move, and an absolute one of the dtype's subnormal spacing, which is how far
    rounding moves a value below the normal range (a float16 -4.1e-8 rounds to -6e-8)."""
    if value.dtype == object:
        finite = exact.context.isfinite
        return _mp_map(lambda v, m, f: v + v * m + f if finite(v) else v, value, move, floor)
    return np.where(
        np.isfinite(value), value + value * move.astype(value.dtype) + floor.astype(value.dtype), value
    )


def _non_finite_marks(inputs: Sequence[Variable], output: Variable, env: dict[Variable, Any]) -> np.ndarray:
    """Per element of `output` in a walk (`env` holds its values): whether it is, or is computed from, a
    float value that is NaN or beyond float64's range.  Elementwise nodes pass marks element by element
    (a fused node's other outputs do not count); any other node marks every element of its outputs
    when an element of an input is marked."""
    marks: dict[Variable, np.ndarray] = {}

    def own(var: Variable) -> np.ndarray:
        value = np.asarray(env[var])
        if not var.dtype.startswith("float"):
            return np.zeros(value.shape, dtype=bool)
        with _errstate():
            return ~np.isfinite(_narrowed(value, np.float64))

    for node in io_toposort(inputs, [output]):
        ins = [marks[v] if v in marks else own(v) for v in node.inputs]  # inputs and constants: their own
        for out in node.outputs:
            mark = own(out)
            if isinstance(node.op, ops.Elemwise):
                for m in ins:
                    mark = mark | m
            elif any(m.any() for m in ins):
                mark = np.ones(mark.shape, dtype=bool)
            marks[out] = mark
    return marks[output] if output in marks else own(output)


def _walk_all(
    inputs: Sequence[Variable], outputs: Sequence[Variable], values: Sequence[Any]
) -> Iterator[tuple[Variable, Any]]:
    """Every (variable, value) of a native-precision walk, for checking static types."""
    env: dict[Variable, Any] = dict(zip(inputs, (np.asarray(v) for v in values)))
    with _errstate():
        for node in io_toposort(inputs, outputs):
            args = [env[v] if v in env else np.asarray(v.data) for v in node.inputs]
            for out, value in zip(node.outputs, _node_value(node, args, "native")):
                env[out] = value
                yield out, value


def _type_problem(var: Variable, value: np.ndarray) -> str | None:
    if value.dtype != var.type.numpy_dtype:
        return f"static dtype {var.dtype}, computes {value.dtype.name}"
    if value.ndim != var.ndim or any(s is not None and s != n for s, n in zip(var.type.shape, value.shape)):
        return f"static shape {var.type.shape}, computes shape {value.shape}"
    return None


def _narrowed(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A wide (long double or mpmath) value rounded to `dtype`, overflowing to infinities."""
    with _errstate():
        if value.dtype == object:
            value = _mp_map(float, value).astype(np.float64)
        return value.astype(dtype)

"""C source for the nodes the C backend runs: fused elementwise loops and BLAS calls.

Code lives in three kinds of modules, each compiled once and cached on disk:

- the *runtime* (`runtime_source`): the elementwise driver, shared by every
  graph, and a probe that checks the whole chain works;
- the *BLAS* module (`blas_source`): kernels for `Dot22`, `Gemm`, `Gemv` and
  `Ger` in float32 and float64, calling CBLAS through function pointers set
  once after loading (`rw_set_blas`);
- one *kernels* module per linked graph (`kernels_source`): a loop per
  distinct `Composite`, handed the runtime's driver by `rw_set_driver`.

So a graph's own module holds only its loops (tens of milliseconds to
compile), and a graph of BLAS ops alone compiles nothing once the BLAS
module is cached.

Every exported kernel takes the node's arrays as `PyObject *` (outputs first,
allocated by the caller, then inputs) and reads each ndarray's data pointer,
rank, dimensions and strides straight from the object, at the offsets
`ndarray_layout` measured at start-up.  That lets ctypes pass an array for
~0.1 us, where `arr.ctypes.data` costs ~0.8 us, and lets the kernel run
without the GIL: it never touches a Python API, only memory the caller keeps
alive.

A kernel returns 0 when it computed the result, 1 when it leaves the call to
the NumPy implementation (shapes that need numpy's own broadcasting or error,
sizes beyond the BLAS integer), and -2 when it ran out of memory.  Kernels
keep their scratch on the stack or in memory allocated per call, so they are
reentrant.

BLAS kernels compute what the NumPy implementation computes, in the same
association: the product alone comes from BLAS (gemm or gemv with alpha 1
and beta 0, as `numpy.matmul` calls them), and the scales and the sum are
applied after it in C, in numpy's order and roundings (`b * Z + a * (X @ Y)`,
`A + a * (x_i * y_j)`).  Passing the scales to BLAS would round differently
and, worse, move overflow: BLAS scales `x` before the outer product, so
float32 `1e4 * 3e38 * 0` is NaN where numpy's `1e4 * (3e38 * 0)` is 0; it
skips `0 * inf` when a scale is zero, and may fuse the final multiply-add.
`Ger` needs no BLAS at all: it is one pass over memory either way.  The sums
inside `X @ Y` are BLAS's, as numpy's are; like numpy's own results between
layouts, they may round differently from numpy's non-BLAS loop (and where a
term overflows next to an infinite one, give inf for NaN).

An elementwise loop is a body over contiguous blocks of `n` elements; the
driver calls it once over whole arrays when every operand is contiguous, of
the output's shape and aligned, and otherwise coalesces axes and feeds it
blocks, gathering strided or broadcast (stride 0) operands into buffers.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache, singledispatch
from typing import NamedTuple

import numpy as np

from relwrite.backends.c.blas import BLAS_FUNCTIONS
from relwrite.backends.c.compiler import BINARY_VECTOR_MATH
from relwrite.graph import ops
from relwrite.graph.basic import Apply, Constant, Op, Variable

GENERATOR_VERSION = "2"
"""Bumped whenever generated code changes meaning; part of every module's cache key."""

C_TYPES = {
    "bool": "uint8_t",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "float32": "float",
    "float64": "double",
}
"""The dtypes generated loops handle (float16, complex and the rest run with NumPy)."""

BLAS_PREFIX = {"float64": "d", "float32": "s"}


class Unsupported(Exception):
    """This node has no C implementation; the message says why (the NumPy one runs instead)."""


@dataclass(frozen=True)
class ArrayLayout:
    """Byte offsets of an ndarray's data pointer, rank, dimensions and strides in the object."""

    data: int
    ndim: int
    dims: int
    strides: int


@cache
def ndarray_layout() -> ArrayLayout:
    """The ndarray object layout, measured on probe arrays; a RuntimeError if it is not the expected one.

    numpy's C struct starts, after the Python object header, with `char *data;
    int nd; npy_intp *dimensions; npy_intp *strides`.  The header's size
    differs between CPython builds, so the data pointer is looked for, and the
    rest is checked, on two probes of different rank.
    """
    probes = [np.empty((3, 5), dtype=np.float64)[:, ::2], np.empty((2, 3, 4), dtype=np.int8)[::-1]]
    pointer = ctypes.sizeof(ctypes.c_void_p)
    limit = np.ndarray.__basicsize__ - 4 * pointer
    for data in range(0, limit + 1, pointer):
        layout = ArrayLayout(data, data + pointer, data + 2 * pointer, data + 3 * pointer)
        if all(_matches(layout, probe) for probe in probes):
            return layout
    raise RuntimeError("the ndarray object layout is not the one numpy's C API documents")


def _matches(layout: ArrayLayout, probe: np.ndarray) -> bool:
    base = id(probe)
    if ctypes.c_void_p.from_address(base + layout.data).value != probe.ctypes.data:
        return False
    if ctypes.c_int.from_address(base + layout.ndim).value != probe.ndim:
        return False
    dims = ctypes.c_void_p.from_address(base + layout.dims).value
    strides = ctypes.c_void_p.from_address(base + layout.strides).value
    if not dims or not strides:
        return False
    read = (ctypes.c_ssize_t * probe.ndim).from_address
    return tuple(read(dims)) == probe.shape and tuple(read(strides)) == probe.strides


@dataclass(frozen=True)
class Kernel:
    """One exported C function `name(outputs..., inputs...)` returning a status, and its definition."""

    name: str
    source: str
    n_args: int


# -- elementwise expressions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    """A C expression and the dtype of its value."""

    code: str
    dtype: str


def _ctype(dtype: str) -> str:
    try:
        return C_TYPES[dtype]
    except KeyError:
        raise Unsupported(f"dtype {dtype} has no C loop") from None


def _as(value: Value, dtype: str) -> str:
    """`value` converted to `dtype`, as numpy casts an operand to a loop's dtype."""
    if value.dtype == dtype:
        return value.code
    return f"(({_ctype(dtype)})({value.code}))"


def _is_float(dtype: str) -> bool:
    return dtype in ("float32", "float64")


def _math(name: str, dtype: str) -> str:
    """The libm function `name` for `dtype` (expf for float32)."""
    return name + "f" if dtype == "float32" else name


@cache
def _loop_dtype(ufunc: np.ufunc, dtypes: tuple[str, ...]) -> str:
    """The dtype numpy computes `ufunc` in for these input dtypes (inputs are cast to it)."""
    resolved = ufunc.resolve_dtypes(tuple(np.dtype(d) for d in dtypes) + (None,) * ufunc.nout)
    loop = {d.name for d in resolved[: ufunc.nin]}
    if len(loop) != 1:
        raise Unsupported(f"{ufunc.__name__} on {dtypes} uses a mixed-type loop")
    (name,) = loop
    _ctype(name)
    return name


@singledispatch
def c_expression(op: Op, node: Apply, args: list[Value]) -> list[str]:
    """C expressions for the outputs of an inner node, computed as numpy does; `args` are its inputs."""
    raise Unsupported(f"{type(op).__name__} has no C expression")


_BINARY = {
    ops.Sub: ("-", np.subtract),
    ops.TrueDiv: ("/", np.true_divide),
    ops.Lt: ("<", np.less),
    ops.Le: ("<=", np.less_equal),
    ops.Gt: (">", np.greater),
    ops.Ge: (">=", np.greater_equal),
    ops.Eq: ("==", np.equal),
    ops.Neq: ("!=", np.not_equal),
}


def _binary(symbol: str, ufunc: np.ufunc, op: Op, node: Apply, args: list[Value]) -> list[str]:
    a, b = args
    loop = _loop_dtype(ufunc, (a.dtype, b.dtype))
    return [f"({_as(a, loop)} {symbol} {_as(b, loop)})"]


for _class, (_symbol, _ufunc) in _BINARY.items():
    c_expression.register(_class, lambda op, node, args, s=_symbol, u=_ufunc: _binary(s, u, op, node, args))


def _fold(op_class: type, args: list[Value]) -> Value:
    """((x0 . x1) . x2) . ..., each step in its own loop dtype and wrapped back to it, as numpy folds."""
    ufunc, symbol, bool_symbol = _FOLDS[op_class]
    acc = args[0]
    for arg in args[1:]:
        loop = _loop_dtype(ufunc, (acc.dtype, arg.dtype))
        operator = bool_symbol if loop == "bool" else symbol
        acc = Value(f"(({_ctype(loop)})({_as(acc, loop)} {operator} {_as(arg, loop)}))", loop)
    return acc


_FOLDS = {ops.Add: (np.add, "+", "|"), ops.Mul: (np.multiply, "*", "&")}
"""The variadic ops, folded left to right: their ufunc, and their operator on numbers and on bools."""

FOLD_OPERANDS = 16
"""The most operands one add or mul of a kernel folds (`_with_short_folds`)."""


def _long_fold(node: Apply) -> bool:
    """Whether `node` is an add or mul (or a subclass's) of more than `FOLD_OPERANDS` operands."""
    return isinstance(node.op, tuple(_FOLDS)) and len(node.inputs) > FOLD_OPERANDS


def _with_short_folds(op: ops.Composite) -> ops.Composite:
    """`op` with each add or mul of more than `FOLD_OPERANDS` operands written as a chain of them, each
    folding the previous one's value and the next 15 operands: the same steps in the same dtypes.

    A sum of thousands of terms then nests its C expression 16 deep, not thousands (gcc's parser
    recursion failed on 33,000), and the tree walk of `_schedule` computes 15 terms and adds them before
    computing more, so the values held at any point stay few (in one loop, or in the scratch slots of a
    chunked kernel).
    """
    if not any(map(_long_fold, op.nodes)):
        return op
    replaced: dict[Variable, Variable] = {}
    for node in op.nodes:  # in topological order
        inputs = [replaced.get(v, v) for v in node.inputs]
        if _long_fold(node):
            value = node.op(*inputs[:FOLD_OPERANDS])
            for start in range(FOLD_OPERANDS, len(inputs), FOLD_OPERANDS - 1):
                value = node.op(value, *inputs[start : start + FOLD_OPERANDS - 1])
            outputs = [value]
        elif any(new is not old for new, old in zip(inputs, node.inputs)):
            outputs = node.op.make_node(*inputs).outputs
        else:
            continue
        replaced.update(zip(node.outputs, outputs))
    return ops.Composite(op.inputs, [replaced.get(v, v) for v in op.outputs])


@c_expression.register
def _add(op: ops.Add, node: Apply, args: list[Value]) -> list[str]:
    return [_fold(ops.Add, args).code]


@c_expression.register
def _mul(op: ops.Mul, node: Apply, args: list[Value]) -> list[str]:
    return [_fold(ops.Mul, args).code]


def _extremum(ufunc: np.ufunc, symbol: str, args: list[Value]) -> list[str]:
    a, b = args
    loop = _loop_dtype(ufunc, (a.dtype, b.dtype))
    x, y = _as(a, loop), _as(b, loop)
    if _is_float(loop):  # NaN in either operand wins; on ties numpy returns the second operand
        return [f"(({x} {symbol} {y} || {x} != {x}) ? {x} : {y})"]
    return [f"(({x} {symbol} {y}) ? {x} : {y})"]


@c_expression.register
def _maximum(op: ops.Maximum, node: Apply, args: list[Value]) -> list[str]:
    return _extremum(np.maximum, ">", args)


@c_expression.register
def _minimum(op: ops.Minimum, node: Apply, args: list[Value]) -> list[str]:
    return _extremum(np.minimum, "<", args)


@c_expression.register
def _neg(op: ops.Neg, node: Apply, args: list[Value]) -> list[str]:
    loop = _loop_dtype(np.negative, (args[0].dtype,))
    return [f"(-{_as(args[0], loop)})"]


@c_expression.register
def _abs(op: ops.Abs, node: Apply, args: list[Value]) -> list[str]:
    loop = _loop_dtype(np.absolute, (args[0].dtype,))
    x = _as(args[0], loop)
    if _is_float(loop):
        return [f"{_math('fabs', loop)}({x})"]
    if loop.startswith("int"):  # wraps at the minimum, as numpy does
        return [f"({x} < 0 ? -{x} : {x})"]
    return [x]


@c_expression.register
def _sqr(op: ops.Sqr, node: Apply, args: list[Value]) -> list[str]:
    loop = _loop_dtype(np.square, (args[0].dtype,))
    x = _as(args[0], loop)
    return [f"({x} * {x})"]


_FLOAT_FUNCTIONS = {
    ops.Exp: ("exp", np.exp),
    ops.Log: ("log", np.log),
    ops.Log1p: ("log1p", np.log1p),
    ops.Expm1: ("expm1", np.expm1),
    ops.Sqrt: ("sqrt", np.sqrt),
    ops.Sin: ("sin", np.sin),
    ops.Cos: ("cos", np.cos),
    ops.Tanh: ("tanh", np.tanh),
    ops.Tan: ("tan", np.tan),
    ops.Asin: ("asin", np.arcsin),
    ops.Acos: ("acos", np.arccos),
    ops.Atan: ("atan", np.arctan),
    ops.Sinh: ("sinh", np.sinh),
    ops.Cosh: ("cosh", np.cosh),
    ops.Cbrt: ("cbrt", np.cbrt),
}


def _float_function(name: str, ufunc: np.ufunc, op: Op, node: Apply, args: list[Value]) -> list[str]:
    loop = _loop_dtype(ufunc, (args[0].dtype,))
    if not _is_float(loop):
        raise Unsupported(f"{ufunc.__name__} computes in {loop}")
    return [f"{_math(name, loop)}({_as(args[0], loop)})"]


for _class, (_name, _ufunc) in _FLOAT_FUNCTIONS.items():
    c_expression.register(
        _class, lambda op, node, args, n=_name, u=_ufunc: _float_function(n, u, op, node, args)
    )


_BINARY_FLOAT_FUNCTIONS = {
    ops.Pow: ("pow", np.power),  # integer powers stay NumPy's: it raises on negative exponents
    ops.Hypot: ("hypot", np.hypot),
    ops.Atan2: ("atan2", np.arctan2),
}


def _binary_float_function(name: str, ufunc: np.ufunc, op: Op, node: Apply, args: list[Value]) -> list[str]:
    a, b = args
    loop = _loop_dtype(ufunc, (a.dtype, b.dtype))
    if not _is_float(loop):
        raise Unsupported(f"{ufunc.__name__} computes in {loop}")
    return [f"{_math(name, loop)}({_as(a, loop)}, {_as(b, loop)})"]


for _class, (_name, _ufunc) in _BINARY_FLOAT_FUNCTIONS.items():
    c_expression.register(
        _class, lambda op, node, args, n=_name, u=_ufunc: _binary_float_function(n, u, op, node, args)
    )


def _float_output(node: Apply) -> str:
    dtype = node.outputs[0].dtype
    if not _is_float(dtype):
        raise Unsupported(f"{node.op} computes in {dtype}")
    return dtype


@c_expression.register
def _reciprocal(op: ops.Reciprocal, node: Apply, args: list[Value]) -> list[str]:
    dtype = _float_output(node)
    return [f"(({_ctype(dtype)})1 / {_as(args[0], dtype)})"]


@c_expression.register
def _sigmoid(op: ops.Sigmoid, node: Apply, args: list[Value]) -> list[str]:
    dtype = _float_output(node)
    t, x = _ctype(dtype), _as(args[0], dtype)
    # exp(-|x|) never overflows: 1 / (1 + e) for x >= 0, e / (1 + e) below.
    return [
        f"({{ const {t} x_ = {x}; const {t} e_ = {_math('exp', dtype)}(-{_math('fabs', dtype)}(x_)); "
        f"(x_ >= 0 ? ({t})1 : e_) / (({t})1 + e_); }})"
    ]


@c_expression.register
def _softplus(op: ops.Softplus, node: Apply, args: list[Value]) -> list[str]:
    dtype = _float_output(node)
    t, x = _ctype(dtype), _as(args[0], dtype)
    exp, log1p = _math("exp", dtype), _math("log1p", dtype)
    # numpy's logaddexp(0, x): x + log1p(exp(-x)) above 0, log1p(exp(x)) otherwise (NaN included).
    return [f"({{ const {t} x_ = {x}; x_ > 0 ? x_ + {log1p}({exp}(-x_)) : {log1p}({exp}(x_)); }})"]


@c_expression.register
def _fma(op: ops.Fma, node: Apply, args: list[Value]) -> list[str]:
    dtype = _float_output(node)  # math.h's fma (fmaf): rounded once, as the NumPy backend's
    return [f"{_math('fma', dtype)}({', '.join(_as(a, dtype) for a in args)})"]


@c_expression.register
def _erf(op: ops.Erf, node: Apply, args: list[Value]) -> list[str]:
    dtype = _float_output(node)
    return [f"{_math('erf', dtype)}({_as(args[0], dtype)})"]


@c_expression.register
def _erfc(op: ops.Erfc, node: Apply, args: list[Value]) -> list[str]:
    dtype = _float_output(node)
    return [f"{_math('erfc', dtype)}({_as(args[0], dtype)})"]


@c_expression.register
def _log1mexp(op: ops.Log1mexp, node: Apply, args: list[Value]) -> list[str]:
    dtype = _float_output(node)
    t, x = _ctype(dtype), _as(args[0], dtype)
    log, log1p, expm1, exp = (_math(f, dtype) for f in ("log", "log1p", "expm1", "exp"))
    # log(-expm1(x)) above -log 2, log1p(-exp(x)) below; NaN above 0, as the NumPy implementation
    return [
        f"({{ const {t} x_ = {x}; x_ > 0 ? ({t})NAN : "
        f"(x_ > ({t})-0.6931471805599453 ? {log}(-{expm1}(x_)) : {log1p}(-{exp}(x_))); }})"
    ]


@c_expression.register
def _identity(op: ops.Identity, node: Apply, args: list[Value]) -> list[str]:
    return [args[0].code]


@c_expression.register
def _switch(op: ops.Switch, node: Apply, args: list[Value]) -> list[str]:
    cond, a, b = args
    dtype = node.outputs[0].dtype
    return [f"({cond.code} ? {_as(a, dtype)} : {_as(b, dtype)})"]


@c_expression.register
def _fill(op: ops.Fill, node: Apply, args: list[Value]) -> list[str]:
    return [_as(args[1], node.outputs[0].dtype)]


@c_expression.register
def _cast(op: ops.Cast, node: Apply, args: list[Value]) -> list[str]:
    (x,) = args
    if op.dtype == "bool":
        return [f"({x.code} != 0)"]
    if _is_float(x.dtype) and not _is_float(op.dtype):
        raise Unsupported(f"casting {x.dtype} to {op.dtype} (out-of-range values are undefined in C)")
    return [_as(x, op.dtype)]


def _literal(constant: Constant) -> Value:
    """A 0-d constant as a C literal of its dtype (hex floats are exact)."""
    if constant.ndim != 0:
        raise Unsupported(f"inner constant {constant} is not 0-d")
    dtype = constant.dtype
    ctype = _ctype(dtype)
    value = constant.data.item()
    if _is_float(dtype):
        if np.isnan(value):
            code = '__builtin_nan("")'
        elif np.isinf(value):
            code = "__builtin_inf()" if value > 0 else "(-__builtin_inf())"
        else:
            code = float(value).hex()
        return Value(f"(({ctype})({code}))", dtype)
    if dtype == "bool":
        return Value(f"(({ctype}){int(value)})", dtype)
    if dtype == "int64" and value == np.iinfo(np.int64).min:
        return Value("(INT64_MIN)", dtype)
    suffix = "ULL" if dtype.startswith("u") else "LL"
    return Value(f"(({ctype}){int(value)}{suffix})", dtype)


@dataclass
class _Frame:
    """A composite being expanded: its remaining nodes, its variables' values, the node that called it."""

    op: ops.Composite
    nodes: Iterator[Apply]
    values: dict[Variable, Value]
    caller: Apply | None


def _value(values: dict[Variable, Value], var: Variable) -> Value:
    return _literal(var) if isinstance(var, Constant) else values[var]


def _schedule(op: ops.Composite) -> list[Apply]:
    """The composite's inner nodes in the order a tree walk from its outputs evaluates them, the
    heavier operand first (Sethi-Ullman's order; weight: the operand's tree size, shared nodes counted
    once per use).  The light operand's value is then the one held while the heavy one is computed,
    so fewer values are spilled around the vector math calls (a 20-op loop with exp, sin and tanh
    runs 1.2x faster than with the light operand first)."""
    weight: dict[Apply, int] = {}
    for node in op.nodes:  # in topological order
        total = 1 + sum(weight.get(v.owner, 0) for v in node.inputs)
        weight[node] = min(total, 1 << 40)

    def operands(node: Apply) -> Iterator[Variable]:
        return iter(sorted(node.inputs, key=lambda v: -weight.get(v.owner, 0)))

    order: list[Apply] = []
    placed: set[Apply] = set()
    for out in op.outputs:
        if out.owner is None or out.owner in placed:
            continue
        stack = [(out.owner, operands(out.owner))]
        placed.add(out.owner)
        while stack:
            node, pending = stack[-1]
            for v in pending:
                if v.owner is not None and v.owner not in placed:
                    placed.add(v.owner)
                    stack.append((v.owner, operands(v.owner)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


class _Statement(NamedTuple):
    """One line of a loop body: `const T name = (T)(...);`, and the names of the values it reads."""

    line: str
    name: str
    dtype: str
    reads: tuple[str, ...]


_NAME = re.compile(r"[tv]\d+")


def _loop_body(op: ops.Composite, inputs: list[Value]) -> tuple[list[_Statement], list[Value]]:
    """Statements computing the composite's outputs from `inputs`; nested composites are inlined.

    Walks with an explicit stack of frames, so nesting depth costs no recursion.
    """
    lines: list[_Statement] = []
    op = _with_short_folds(op)
    top = _Frame(op, iter(_schedule(op)), dict(zip(op.inputs, inputs)), None)
    frames = [top]
    while frames:
        frame = frames[-1]
        node = next(frame.nodes, None)
        if node is None:
            frames.pop()
            if frame.caller is not None:
                parent = frames[-1]
                for outer, inner in zip(frame.caller.outputs, frame.op.outputs):
                    parent.values[outer] = _value(frame.values, inner)
            continue
        args = [_value(frame.values, v) for v in node.inputs]
        if isinstance(node.op, ops.Composite):
            inner = _with_short_folds(node.op)
            frames.append(_Frame(inner, iter(_schedule(inner)), dict(zip(inner.inputs, args)), node))
            continue
        reads = tuple(a.code for a in args if _NAME.fullmatch(a.code))
        for out, code in zip(node.outputs, c_expression(node.op, node, args)):
            name = f"t{len(lines)}"
            ctype = _ctype(out.dtype)
            lines.append(_Statement(f"const {ctype} {name} = ({ctype})({code});", name, out.dtype, reads))
            frame.values[out] = Value(name, out.dtype)
    return lines, [_value(top.values, v) for v in op.outputs]


def composite_kernel(op: ops.Composite, name: str, scalars: Sequence[bool] = ()) -> Kernel:
    """The C kernel of a `Composite`: outputs (fresh, C-contiguous, of the broadcast shape) then inputs.

    The inputs `scalars` marks hold one value for every element (typed 0-d): they are read once per
    block, and what the loop computes from them alone is computed there too (`_hoisted`).
    Raises Unsupported when an inner op or dtype has no C form.
    """
    in_dtypes = [v.dtype for v in op.inputs]
    out_dtypes = [v.dtype for v in op.outputs]
    inputs = [Value(f"v{k}", dtype) for k, dtype in enumerate(in_dtypes)]
    statements, results = _loop_body(op, inputs)
    if len(statements) > LOOP_STATEMENTS:
        return _chunked_kernel(name, statements, results, in_dtypes, out_dtypes)
    prelude, body = _hoisted(statements, in_dtypes, scalars)
    params = [f"{_ctype(d)} *restrict o{k}" for k, d in enumerate(out_dtypes)]
    params += [f"const {_ctype(d)} *restrict i{k}" for k, d in enumerate(in_dtypes)]
    stores = [f"o{k}[j] = {_as(r, d)};" for k, (r, d) in enumerate(zip(results, out_dtypes))]
    n_ops = len(out_dtypes) + len(in_dtypes)
    casts = [f"({_ctype(d)} *)p[{k}]" for k, d in enumerate(out_dtypes)]
    casts += [f"(const {_ctype(d)} *)p[{len(out_dtypes) + k}]" for k, d in enumerate(in_dtypes)]
    sizes = ", ".join(str(np.dtype(d).itemsize) for d in (*out_dtypes, *in_dtypes))
    args = ", ".join(f"a{k}" for k in range(n_ops))
    indent = "\n        "
    source = f"""
static inline void {name}_loop(ptrdiff_t n, {", ".join(params)}) {{
    {prelude}for (ptrdiff_t j = 0; j < n; j++) {{
        {indent.join(body + stores)}
    }}
}}
static void {name}_block(ptrdiff_t n, char *const *p) {{
    {name}_loop(n, {", ".join(casts)});
}}
static const int {name}_sizes[] = {{{sizes}}};
int {name}({", ".join(f"void *a{k}" for k in range(n_ops))}) {{
    void *const arrays[] = {{{args}}};
    return rw_elemwise({n_ops}, {len(out_dtypes)}, arrays, {name}_sizes, {name}_block);
}}
"""
    return Kernel(name, source, n_ops)


def _hoisted(
    statements: list[_Statement], in_dtypes: Sequence[str], scalars: Sequence[bool]
) -> tuple[str, list[str]]:
    """(the code before a loop over element j: the inputs `scalars` marks, read once, and the statements
    computed from them and constants alone; the loop body: the other inputs' loads and statements).

    What 0-d inputs alone determine is the same for every element: computed once, it is besides one
    value, where a vectorized loop would compute it with the vector math library in its SIMD lanes and
    with libm in its scalar tail, which may differ in the last bit (an argmax of equal values then
    picks a late one)."""
    scalar = [k < len(scalars) and bool(scalars[k]) for k in range(len(in_dtypes))]
    invariant = {f"v{k}" for k, once in enumerate(scalar) if once}
    before = [f"const {_ctype(d)} v{k} = i{k}[0];" for k, d in enumerate(in_dtypes) if scalar[k]]
    body = [f"const {_ctype(d)} v{k} = i{k}[j];" for k, d in enumerate(in_dtypes) if not scalar[k]]
    for st in statements:
        if all(name in invariant for name in st.reads):
            invariant.add(st.name)
            before.append(st.line)
        else:
            body.append(st.line)
    return "".join(f"{line}\n    " for line in before), body


LOOP_STATEMENTS = 1024
"""The most statements a kernel's loop holds (compiled in at most ~1 s); a larger composite's kernel runs
its statements in loops of `CHUNK_STATEMENTS`, over blocks of `CHUNK_BLOCK` elements (`_chunked_kernel`)."""

CHUNK_STATEMENTS = 128
"""Statements per loop of a chunked kernel: smaller loops compile faster per statement (a 10,000-statement
composite of a random DAG: 10 s in loops of 64, 14 s of 256, 21 s of 1024; 26 s as one loop) and run
alike (values a later loop reads pass through memory: 1.3-1.5x the single loop's time there)."""

CHUNK_READS = 96
"""Values of earlier loops a loop of a chunked kernel reads at most (it ends sooner when it would read
more).  gcc's loop passes (induction variables, CSE after register allocation) grow faster than linearly
with a loop's memory streams; with random long-range reuse each loop's reads from scratch grow with the
graph (104 per loop of 128 statements at 5,000 statements, 125 at 50,000: gcc 13.5x for 9.9x the loops),
and a bound on them keeps the compile time per loop bounded."""

CHUNK_BLOCK = 256
"""Elements a chunked kernel's loops take at a time (the values passed between loops are kept for a block)."""


_SLOT_ITEM = max(np.dtype(d).itemsize for d in C_TYPES)
"""Bytes per element of a scratch slot: room for a value of any dtype a loop computes."""


def _chunks(statements: list[_Statement]) -> list[list[_Statement]]:
    """The statements in order, cut into loops of at most `CHUNK_STATEMENTS` statements that each read
    at most `CHUNK_READS` values of earlier loops (a statement reading more alone has a loop of its own)."""
    chunks: list[list[_Statement]] = []
    chunk: list[_Statement] = []
    earlier: set[str] = set()  # values of the loops before this one
    here: set[str] = set()
    reads: set[str] = set()  # values of earlier loops this loop reads
    for st in statements:
        new = {n for n in st.reads if n in earlier and n not in reads}
        if chunk and (len(chunk) >= CHUNK_STATEMENTS or len(reads) + len(new) > CHUNK_READS):
            chunks.append(chunk)
            earlier |= here
            chunk, here, reads = [], set(), set()
            new = {n for n in st.reads if n in earlier}
        chunk.append(st)
        here.add(st.name)
        reads |= new
    if chunk:
        chunks.append(chunk)
    return chunks


def _chunked_kernel(
    name: str, statements: list[_Statement], results: list[Value], in_dtypes: list[str], out_dtypes: list[str]
) -> Kernel:
    """A large composite's kernel as loops of bounded size (`_chunks`), run one after the
    other over each block of `CHUNK_BLOCK` elements; a value one loop computes and a later one reads
    passes through a scratch slot of a block's length, reused once its last reader has run.

    gcc's register allocation grows faster than linearly with a loop's live values (a 10,000-statement
    loop took 26 s to compile, a 5,000-statement one 8 s); loops of bounded size compile in time linear in
    the statement count, and compute the same values in the same order (results are bit-identical).
    """
    chunks = _chunks(statements)
    defined = {st.name: c for c, chunk in enumerate(chunks) for st in chunk}
    dtypes = {st.name: _ctype(st.dtype) for st in statements}
    reads = [{n for st in chunk for n in st.reads} for chunk in chunks]
    stores: list[list[int]] = [[] for _ in chunks]  # the outputs each loop stores
    for k, result in enumerate(results):
        chunk = defined.get(result.code, 0)
        stores[chunk].append(k)
        if _NAME.fullmatch(result.code):
            reads[chunk].add(result.code)
    last_read = {n: c for c, names in enumerate(reads) for n in names if defined.get(n, c) < c}
    slots, n_slots = _scratch_slots(chunks, last_read)
    offset = {n: slot * CHUNK_BLOCK * _SLOT_ITEM for n, slot in slots.items()}
    loops, calls = [], []
    for c, chunk in enumerate(chunks):
        used_inputs = sorted(int(n[1:]) for n in reads[c] if n.startswith("v"))
        imports = sorted((n for n in reads[c] if defined.get(n, c) < c), key=lambda n: int(n[1:]))
        exports = [st.name for st in chunk if st.name in last_read]
        params, args = ["ptrdiff_t m"], ["m"]
        for k in stores[c]:
            params.append(f"{_ctype(out_dtypes[k])} *restrict o{k}")
            args.append(f"({_ctype(out_dtypes[k])} *)p[{k}] + start")
        for k in used_inputs:
            params.append(f"const {_ctype(in_dtypes[k])} *restrict i{k}")
            args.append(f"(const {_ctype(in_dtypes[k])} *)p[{len(out_dtypes) + k}] + start")
        if imports or exports:  # one pointer to every slot: a loop with a stream per slot compiles slowly
            params.append("char *restrict s")
            args.append("s")
        lines = [f"const {_ctype(in_dtypes[k])} v{k} = i{k}[j];" for k in used_inputs]
        lines += [f"const {dtypes[n]} {n} = ((const {dtypes[n]} *)(s + {offset[n]}))[j];" for n in imports]
        lines += [st.line for st in chunk]
        lines += [f"(({dtypes[n]} *)(s + {offset[n]}))[j] = {n};" for n in exports]
        lines += [f"o{k}[j] = {_as(results[k], out_dtypes[k])};" for k in stores[c]]
        body = "\n        ".join(lines)
        loops.append(
            f"static __attribute__((noinline)) void {name}_c{c}({', '.join(params)}) {{\n"
            f"    for (ptrdiff_t j = 0; j < m; j++) {{\n        {body}\n    }}\n}}\n"
        )
        calls.append(f"        {name}_c{c}({', '.join(args)});\n")
    n_ops = len(out_dtypes) + len(in_dtypes)
    sizes = ", ".join(str(np.dtype(d).itemsize) for d in (*out_dtypes, *in_dtypes))
    source = f"""
static _Thread_local char *{name}_scratch;  /* the running call's scratch slots (calls do not nest) */
{"".join(loops)}
static void {name}_block(ptrdiff_t n, char *const *p) {{
    char *const s = {name}_scratch;
    for (ptrdiff_t start = 0; start < n; start += {CHUNK_BLOCK}) {{
        const ptrdiff_t m = n - start < {CHUNK_BLOCK} ? n - start : {CHUNK_BLOCK};
{"".join(calls)}    }}
}}
static const int {name}_sizes[] = {{{sizes}}};
int {name}({", ".join(f"void *a{k}" for k in range(n_ops))}) {{
    void *const arrays[] = {{{", ".join(f"a{k}" for k in range(n_ops))}}};
    char *s = malloc({max(n_slots, 1) * CHUNK_BLOCK * _SLOT_ITEM});
    if (!s) return -2;
    {name}_scratch = s;
    const int status = rw_elemwise({n_ops}, {len(out_dtypes)}, arrays, {name}_sizes, {name}_block);
    {name}_scratch = NULL;
    free(s);
    return status;
}}
"""
    return Kernel(name, source, n_ops)


def _scratch_slots(chunks: list[list[_Statement]], last_read: dict[str, int]) -> tuple[dict[str, int], int]:
    """A scratch slot for each value a later loop reads (`last_read`: the last loop reading it), reusing the
    slots of values whose last reader has run: (value -> slot, slot count)."""
    slots: dict[str, int] = {}
    released: dict[int, list[str]] = {}
    for n, c in last_read.items():
        released.setdefault(c, []).append(n)
    free: list[int] = []
    count = 0
    for c, chunk in enumerate(chunks):
        free.extend(slots[n] for n in released.get(c - 1, ()))  # their last reader was the previous loop
        for st in chunk:
            if st.name in last_read:
                if free:
                    slots[st.name] = free.pop()
                else:
                    slots[st.name], count = count, count + 1
    return slots, count


FILLED_BLOCK = 2048
"""Values a fused sum computes into its stack buffer at a time (then summed there as an array)."""


def pairwise_sum_source(name: str, ctype: str, fill: tuple[str, str, str] | None = None) -> str:
    """`static ctype name(const ctype *x, ptrdiff_t n)`: the sum of x[0..n) by NumPy's pairwise
    summation, step for step (so sums are bit-identical to NumPy's): fewer than 8 terms in order from
    -0.0; up to 128 in eight running sums (the loop vectorizes), combined as a tree, the rest added in
    order; longer runs split in two at a multiple of 8.

    With `fill` = (params, args, statement) also `static ctype name_computed(ptrdiff_t start,
    ptrdiff_t n, params)`: the same sum of values the statement computes into `buf` (those from
    `start`, n of them; `args` passes `params` on), `FILLED_BLOCK` at a time.  It splits longer runs
    as NumPy does, and a block's sum splits the same way again, so the tree is NumPy's.
    """
    source = f"""
static {ctype} {name}(const {ctype} *restrict x, ptrdiff_t n) {{
    if (n < 8) {{
        {ctype} res = -0.0;
        for (ptrdiff_t i = 0; i < n; i++) res += x[i];
        return res;
    }}
    if (n <= 128) {{
        {ctype} r[8];
        for (int k = 0; k < 8; k++) r[k] = x[k];
        ptrdiff_t i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int k = 0; k < 8; k++) r[k] += x[i + k];
        {ctype} res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += x[i];
        return res;
    }}
    ptrdiff_t half = n / 2;
    half -= half % 8;
    return {name}(x, half) + {name}(x + half, n - half);
}}
"""
    if fill is None:
        return source
    params, args, statement = fill
    return (
        source
        + f"""
static {ctype} {name}_computed(ptrdiff_t start, ptrdiff_t n, {params}) {{
    if (n <= {FILLED_BLOCK}) {{
        {ctype} buf[{FILLED_BLOCK}];
        {statement}
        return {name}(buf, n);
    }}
    ptrdiff_t half = n / 2;
    half -= half % 8;
    return {name}_computed(start, half, {args}) + {name}_computed(start + half, n - half, {args});
}}
"""
    )


def reduction_kernel(op: ops.Composite, scalars: Sequence[bool], name: str) -> Kernel:
    """The C kernel summing a one-output `Composite` over every element, without storing its values:
    `name(out, inputs..., n)` on contiguous inputs of n elements each, but those `scalars` marks,
    which hold one value.

    The sum is NumPy's pairwise summation step for step (as the reductions module's), each block
    of at most `FILLED_BLOCK` values computed into a stack buffer first, so it equals the unfused sum
    of the composite's values.  Raises Unsupported when the output is not float32 or float64 or an inner
    op has no C form.
    """
    (out,) = op.outputs
    if not _is_float(out.dtype):
        raise Unsupported(f"a fused sum of {out.dtype} values")
    t = _ctype(out.dtype)
    in_dtypes = [v.dtype for v in op.inputs]
    statements, (result,) = _loop_body(op, [Value(f"v{k}", d) for k, d in enumerate(in_dtypes)])
    if len(statements) > LOOP_STATEMENTS:  # fused, the loop would compile superlinearly (`_chunked_kernel`)
        raise Unsupported(f"a fused sum of {len(statements)} statements")
    params = ", ".join(f"const {_ctype(d)} *restrict i{k}" for k, d in enumerate(in_dtypes))
    args = ", ".join(f"i{k}" for k in range(len(in_dtypes)))
    prelude, body = _hoisted(statements, in_dtypes, scalars)
    casts = ", ".join(f"(const {_ctype(d)} *)a{k}" for k, d in enumerate(in_dtypes))
    indent = "\n        "
    source = f"""
static void {name}_fill({t} *restrict buf, ptrdiff_t start, ptrdiff_t n, {params}) {{
    {prelude}for (ptrdiff_t m = 0; m < n; m++) {{
        const ptrdiff_t j = start + m;
        {indent.join(body)}
        buf[m] = {_as(result, out.dtype)};
    }}
}}
{pairwise_sum_source(f"{name}_sum", t, (params, args, f"{name}_fill(buf, start, n, {args});"))}
int {name}(void *out, {", ".join(f"const void *a{k}" for k in range(len(in_dtypes)))}, ptrdiff_t n) {{
    *({t} *)out = {name}_sum_computed(0, n, {casts});
    return 0;
}}
"""
    return Kernel(name, source, len(in_dtypes) + 2)


# -- BLAS ---------------------------------------------------------------------------------------------

BLAS_ARITY = {ops.Dot22: 3, ops.Gemm: 6, ops.Gemv: 6, ops.Ger: 5}
"""The BLAS ops with kernels, and their kernels' argument counts (the output, then the node's inputs)."""


def blas_kernel_name(op_class: type, dtype: str) -> str:
    """The BLAS module's kernel for nodes of `op_class` on `dtype` (float32 or float64)."""
    if op_class not in BLAS_ARITY or dtype not in BLAS_PREFIX:
        raise Unsupported(f"no BLAS kernel for {op_class.__name__} on {dtype}")
    return f"rw_{op_class.__name__.lower()}_{dtype}"


_BLAS_BODIES: dict[type, str] = {
    ops.Dot22: """
    if (RW_NDIM(a0) != 2 || RW_NDIM(a1) != 2 || RW_NDIM(a2) != 2) return 1;
    const ptrdiff_t m = RW_DIMS(a1)[0], k = RW_DIMS(a1)[1], n = RW_DIMS(a2)[1];
    if (RW_DIMS(a2)[0] != k || RW_DIMS(a0)[0] != m || RW_DIMS(a0)[1] != n) return 1;
    return rw_{P}_matmul(m, n, k, a1, a2, ({T} *)RW_DATA(a0));
""",
    ops.Gemm: """
    if (RW_NDIM(a0) != 2 || RW_NDIM(a1) != 2 || RW_NDIM(a2) != 0 || RW_NDIM(a3) != 2
        || RW_NDIM(a4) != 2 || RW_NDIM(a5) != 0) return 1;
    const ptrdiff_t m = RW_DIMS(a3)[0], k = RW_DIMS(a3)[1], n = RW_DIMS(a4)[1];
    if (RW_DIMS(a4)[0] != k || RW_DIMS(a0)[0] != m || RW_DIMS(a0)[1] != n) return 1;
    rw_operand z;
    if (rw_broadcast(a1, m, n, &z)) return 1;
    {T} *out = ({T} *)RW_DATA(a0);
    const int status = rw_{P}_matmul(m, n, k, a3, a4, out);
    if (status) return status;
    rw_{P}_scale_add(out, m, n, *(const {T} *)RW_DATA(a2), *(const {T} *)RW_DATA(a5), &z);
    return 0;
""",
    ops.Gemv: """
    if (RW_NDIM(a0) != 1 || RW_NDIM(a1) != 1 || RW_NDIM(a2) != 0 || RW_NDIM(a3) != 2
        || RW_NDIM(a4) != 1 || RW_NDIM(a5) != 0) return 1;
    const ptrdiff_t m = RW_DIMS(a3)[0], n = RW_DIMS(a3)[1];
    if (RW_DIMS(a4)[0] != n || RW_DIMS(a0)[0] != m) return 1;
    rw_operand y;
    if (rw_broadcast(a1, m, 1, &y)) return 1;
    {T} *out = ({T} *)RW_DATA(a0);
    const int status = rw_{P}_matvec(m, n, a3, a4, out);
    if (status) return status;
    rw_{P}_scale_add(out, m, 1, *(const {T} *)RW_DATA(a2), *(const {T} *)RW_DATA(a5), &y);
    return 0;
""",
    ops.Ger: """
    if (RW_NDIM(a0) != 2 || RW_NDIM(a1) != 2 || RW_NDIM(a2) != 0 || RW_NDIM(a3) != 1 || RW_NDIM(a4) != 1)
        return 1;
    const ptrdiff_t m = RW_DIMS(a3)[0], n = RW_DIMS(a4)[0];
    if (RW_DIMS(a0)[0] != m || RW_DIMS(a0)[1] != n) return 1;
    rw_operand base;
    if (rw_broadcast(a1, m, n, &base)) return 1;
    if (m == 0 || n == 0) return 0;
    rw_vector y;
    const int status = rw_as_contiguous_vector(a4, sizeof({T}), &y);
    if (status) return status;
    rw_{P}_add_outer(({T} *)RW_DATA(a0), m, n, &base, *(const {T} *)RW_DATA(a2), RW_DATA(a3),
                     RW_STRIDES(a3)[0], (const {T} *)y.data);
    free(y.owned);
    return 0;
""",
}


# -- shared C ------------------------------------------------------------------------------------------

_PRELUDE = """\
/* Generated by relwrite (generator {version}). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define RW_DATA(a) (*(char *const *)((const char *)(a) + {data}))
#define RW_NDIM(a) (*(const int *)((const char *)(a) + {ndim}))
#define RW_DIMS(a) (*(const ptrdiff_t *const *)((const char *)(a) + {dims}))
#define RW_STRIDES(a) (*(const ptrdiff_t *const *)((const char *)(a) + {strides}))
#define RW_ALIGNED(p, size) ((uintptr_t)(p) % (uintptr_t)(size) == 0)
"""

_ELEMWISE_DRIVER = """
#define RW_BLOCK 256
typedef void (*rw_block_fn)(ptrdiff_t n, char *const *p);

/* Whether array `a` has exactly `shape`, is C-contiguous and aligned. */
static int rw_contiguous(const void *a, int nd, const ptrdiff_t *shape, int size) {
    if (RW_NDIM(a) != nd || !RW_ALIGNED(RW_DATA(a), size)) return 0;
    const ptrdiff_t *dims = RW_DIMS(a), *strides = RW_STRIDES(a);
    ptrdiff_t expect = size;
    for (int d = nd - 1; d >= 0; d--) {
        if (dims[d] != shape[d] || (dims[d] != 1 && strides[d] != expect)) return 0;
        expect *= dims[d];
    }
    return 1;
}

/* n elements of `size` bytes at `stride` from src into the contiguous dst (stride 0 repeats one). */
static void rw_gather(char *dst, const char *src, ptrdiff_t n, ptrdiff_t stride, int size) {
#define RW_GATHER(BYTES) for (ptrdiff_t k = 0; k < n; k++) memcpy(dst + k * BYTES, src + k * stride, BYTES)
    switch (size) {
    case 1: RW_GATHER(1); break;
    case 2: RW_GATHER(2); break;
    case 4: RW_GATHER(4); break;
    default: RW_GATHER(8); break;
    }
#undef RW_GATHER
}

/* Broadcast and strided operands: coalesce axes, then run the block over the innermost axis,
   RW_BLOCK elements at a time, gathering operands that are not contiguous along it. */
static int rw_elemwise_strided(int nops, int nout, void *const *arrays, const int *size, rw_block_fn block,
                               int nd, const ptrdiff_t *shape, ptrdiff_t total) {
    for (int j = 0; j < nout; j++)
        if (!rw_contiguous(arrays[j], nd, shape, size[j])) return 1;
    const int width = nd > 0 ? nd : 1;
    /* One allocation, in 8-byte units: strides, pointers, block buffers, then flags. */
    char *work = malloc(sizeof(ptrdiff_t) * (size_t)nops * width + 3 * sizeof(char *) * (size_t)nops
                        + (size_t)nops * RW_BLOCK * 8 + sizeof(int) * (size_t)nops);
    if (!work) return -2;
    ptrdiff_t *st = (ptrdiff_t *)work;                   /* st[j * width + d]: operand j's stride on axis d */
    char **ptr = (char **)(st + (size_t)nops * width);   /* operand j at the current outer position */
    char **bp = ptr + nops;                              /* what the block reads and writes */
    const char **filled = (const char **)(bp + nops);    /* the source a stride-0 buffer holds */
    char *buffers = (char *)(filled + nops);             /* RW_BLOCK elements per operand */
    int *direct = (int *)(buffers + (size_t)nops * RW_BLOCK * 8);
    for (int j = 0; j < nops; j++) {
        const int nj = RW_NDIM(arrays[j]), lead = nd - nj;
        if (nj > nd) { free(work); return 1; }
        const ptrdiff_t *dims = RW_DIMS(arrays[j]), *strides = RW_STRIDES(arrays[j]);
        for (int d = 0; d < nd; d++) {
            ptrdiff_t s = 0;
            if (d >= lead) {
                const ptrdiff_t len = dims[d - lead];
                if (len != shape[d] && len != 1) { free(work); return 1; }
                if (len != 1) s = strides[d - lead];
            }
            st[j * width + d] = s;
        }
    }
    if (total == 0) { free(work); return 0; }
    ptrdiff_t len[64];
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) continue;
        int merge = m > 0;
        for (int j = 0; j < nops && merge; j++) merge = st[j * width + m - 1] == st[j * width + d] * shape[d];
        if (merge) {
            len[m - 1] *= shape[d];
            for (int j = 0; j < nops; j++) st[j * width + m - 1] = st[j * width + d];
        } else {
            for (int j = 0; j < nops; j++) st[j * width + m] = st[j * width + d];
            len[m++] = shape[d];
        }
    }
    if (m == 0) {  /* a single element */
        len[m++] = 1;
        for (int j = 0; j < nops; j++) st[j * width] = size[j];
    }
    for (int j = 0; j < nops; j++) {
        ptr[j] = RW_DATA(arrays[j]);
        filled[j] = NULL;
        int aligned = RW_ALIGNED(ptr[j], size[j]);
        for (int d = 0; d < m; d++) aligned = aligned && st[j * width + d] % size[j] == 0;
        direct[j] = aligned && st[j * width + m - 1] == size[j];
        if (j < nout && !direct[j]) { free(work); return 1; }
    }
    const ptrdiff_t inner = len[m - 1];
    ptrdiff_t index[64] = {0};
    for (;;) {
        for (ptrdiff_t start = 0; start < inner; start += RW_BLOCK) {
            const ptrdiff_t n = inner - start < RW_BLOCK ? inner - start : RW_BLOCK;
            for (int j = 0; j < nops; j++) {
                const ptrdiff_t s = st[j * width + m - 1];
                char *src = ptr[j] + start * s;
                if (direct[j]) {
                    bp[j] = src;
                    continue;
                }
                bp[j] = buffers + (size_t)j * RW_BLOCK * 8;
                if (s != 0 || filled[j] != src) {
                    rw_gather(bp[j], src, n, s, size[j]);
                    filled[j] = s == 0 ? src : NULL;
                }
            }
            block(n, bp);
        }
        int d = m - 2;
        for (; d >= 0; d--) {
            for (int j = 0; j < nops; j++) ptr[j] += st[j * width + d];
            if (++index[d] < len[d]) break;
            for (int j = 0; j < nops; j++) ptr[j] -= st[j * width + d] * len[d];
            index[d] = 0;
        }
        if (d < 0) break;
    }
    free(work);
    return 0;
}

/* Run `block` over arrays[0..nops) (outputs first); one call when all are contiguous and aligned. */
int rw_elemwise(int nops, int nout, void *const *arrays, const int *size, rw_block_fn block) {
    const int nd = RW_NDIM(arrays[0]);
    const ptrdiff_t *shape = RW_DIMS(arrays[0]);
    if (nd > 64) return 1;
    ptrdiff_t total = 1;
    for (int d = 0; d < nd; d++) total *= shape[d];
    for (int j = 0; j < nops; j++)
        if (!rw_contiguous(arrays[j], nd, shape, size[j]))
            return rw_elemwise_strided(nops, nout, arrays, size, block, nd, shape, total);
    if (total > 0) {
        char *p[nops];
        for (int j = 0; j < nops; j++) p[j] = RW_DATA(arrays[j]);
        block(total, p);
    }
    return 0;
}
"""

_PROBE = """
int rw_probe(void *a) { return RW_NDIM(a) * 1000 + (int)RW_DIMS(a)[1]; }
"""

_KERNELS_HEADER = """\
/* Generated by relwrite (generator {version}). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <math.h>

typedef void (*rw_block_fn)(ptrdiff_t n, char *const *p);
typedef int (*rw_driver_fn)(int nops, int nout, void *const *arrays, const int *size, rw_block_fn block);
static rw_driver_fn rw_elemwise;

/* The runtime's driver; called once, right after the module is loaded. */
void rw_set_driver(void *driver) {{ rw_elemwise = (rw_driver_fn)driver; }}
"""

_BLAS_SHARED = """
typedef {int_type} rw_int;
#define RW_INT_MAX {int_max}
enum {{ RW_ROW_MAJOR = 101, RW_NO_TRANS = 111, RW_TRANS = 112 }};
enum {{ {routines}, RW_N_BLAS }};
static void *rw_blas[RW_N_BLAS];

/* The CBLAS routines, in the order above; called once, right after the module is loaded. */
void rw_set_blas(void *const *table) {{
    for (int k = 0; k < RW_N_BLAS; k++) rw_blas[k] = table[k];
}}

typedef struct {{ const char *data; rw_int ld; int trans; char *owned; }} rw_matrix;
typedef struct {{ const char *data; rw_int inc; char *owned; }} rw_vector;

/* A 2-d array as a BLAS operand: row-major as it is, its transpose when column-major, or a contiguous
   copy (negative, zero or misaligned strides).  0, 1 (too large for the BLAS integer) or -2 (no memory). */
static int rw_as_matrix(const void *a, int size, rw_matrix *mat) {{
    const ptrdiff_t r = RW_DIMS(a)[0], c = RW_DIMS(a)[1], s0 = RW_STRIDES(a)[0], s1 = RW_STRIDES(a)[1];
    const char *p = RW_DATA(a);
    mat->owned = NULL;
    if (r > RW_INT_MAX || c > RW_INT_MAX) return 1;
    const int aligned = RW_ALIGNED(p, size);
    if (aligned && (c <= 1 || s1 == size)
        && (r <= 1 || c == 0 || (s0 > 0 && s0 % size == 0 && s0 / size >= c))) {{
        mat->data = p;
        mat->trans = RW_NO_TRANS;
        mat->ld = (r <= 1 || c == 0) ? (c > 1 ? (rw_int)c : 1) : (rw_int)(s0 / size);
    }} else if (aligned && (r <= 1 || s0 == size)
               && (c <= 1 || (s1 > 0 && s1 % size == 0 && s1 / size >= r))) {{
        mat->data = p;
        mat->trans = RW_TRANS;
        mat->ld = c <= 1 ? (r > 1 ? (rw_int)r : 1) : (rw_int)(s1 / size);
    }} else {{
        char *copy = malloc(r * c > 0 ? (size_t)(r * c) * size : 1);
        if (!copy) return -2;
        for (ptrdiff_t i = 0; i < r; i++)
            for (ptrdiff_t j = 0; j < c; j++) memcpy(copy + (i * c + j) * size, p + i * s0 + j * s1, size);
        mat->data = copy;
        mat->owned = copy;
        mat->trans = RW_NO_TRANS;
        mat->ld = c > 1 ? (rw_int)c : 1;
    }}
    return 0;
}}

/* An operand broadcast to rows x cols (a 1-d array is a column): its data and byte strides, 0 along
   broadcast axes. */
typedef struct {{ const char *data; ptrdiff_t row, col; }} rw_operand;

/* `a` as an operand of shape rows x cols, as numpy broadcasts it; 1 when it does not broadcast. */
static int rw_broadcast(const void *a, ptrdiff_t rows, ptrdiff_t cols, rw_operand *op) {{
    const int nd = RW_NDIM(a);
    const ptrdiff_t r = RW_DIMS(a)[0], c = nd == 2 ? RW_DIMS(a)[1] : 1;
    if ((r != rows && r != 1) || (c != cols && c != 1)) return 1;
    op->data = RW_DATA(a);
    op->row = r == 1 ? 0 : RW_STRIDES(a)[0];
    op->col = c == 1 ? 0 : RW_STRIDES(a)[1];
    return 0;
}}

/* A 1-d array as a vector with increment 1: itself when contiguous and aligned, or a copy. */
static int rw_as_contiguous_vector(const void *a, int size, rw_vector *vec) {{
    const ptrdiff_t n = RW_DIMS(a)[0], s = RW_STRIDES(a)[0];
    const char *p = RW_DATA(a);
    vec->owned = NULL;
    vec->inc = 1;
    if (RW_ALIGNED(p, size) && (n <= 1 || s == size)) {{
        vec->data = p;
        return 0;
    }}
    char *copy = malloc(n > 0 ? (size_t)n * size : 1);
    if (!copy) return -2;
    for (ptrdiff_t i = 0; i < n; i++) memcpy(copy + i * size, p + i * s, size);
    vec->data = copy;
    vec->owned = copy;
    return 0;
}}

/* A 1-d array as a BLAS vector: itself with a positive increment, or a contiguous copy. */
static int rw_as_vector(const void *a, int size, rw_vector *vec) {{
    const ptrdiff_t n = RW_DIMS(a)[0], s = RW_STRIDES(a)[0];
    const char *p = RW_DATA(a);
    if (!RW_ALIGNED(p, size) || (n > 1 && (s <= 0 || s % size != 0 || s / size > RW_INT_MAX)))
        return rw_as_contiguous_vector(a, size, vec);
    vec->owned = NULL;
    vec->data = p;
    vec->inc = n <= 1 ? 1 : (rw_int)(s / size);
    return 0;
}}
"""

_BLAS_TYPED = """
typedef void (*rw_{P}gemm_fn)(int, int, int, rw_int, rw_int, rw_int, {T}, const {T} *, rw_int,
                              const {T} *, rw_int, {T}, {T} *, rw_int);
typedef void (*rw_{P}gemv_fn)(int, int, rw_int, rw_int, {T}, const {T} *, rw_int, const {T} *, rw_int,
                              {T}, {T} *, rw_int);

/* out (m x n, C-contiguous) = x @ y as numpy's matmul computes it: one gemm with alpha 1 and beta 0
   (BLAS then never reads out), zeros when the inner dimension is empty. */
static int rw_{P}_matmul(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const void *x, const void *y, {T} *out) {{
    if (m == 0 || n == 0) return 0;
    if (k == 0) {{
        memset(out, 0, (size_t)(m * n) * sizeof({T}));
        return 0;
    }}
    if (m > RW_INT_MAX || n > RW_INT_MAX || k > RW_INT_MAX) return 1;
    rw_matrix a, b;
    int status = rw_as_matrix(x, sizeof({T}), &a);
    if (status) return status;
    status = rw_as_matrix(y, sizeof({T}), &b);
    if (status) {{ free(a.owned); return status; }}
    ((rw_{P}gemm_fn)rw_blas[RW_{U}GEMM])(RW_ROW_MAJOR, a.trans, b.trans, (rw_int)m, (rw_int)n, (rw_int)k,
        1, (const {T} *)a.data, a.ld, (const {T} *)b.data, b.ld, 0, out, n > 1 ? (rw_int)n : 1);
    free(a.owned);
    free(b.owned);
    return 0;
}}

/* out (m) = mat (m x n) @ vec (n), by one gemv with alpha 1 and beta 0; zeros when n is 0. */
static int rw_{P}_matvec(ptrdiff_t m, ptrdiff_t n, const void *mat, const void *vec, {T} *out) {{
    if (m == 0) return 0;
    if (n == 0) {{
        memset(out, 0, (size_t)m * sizeof({T}));
        return 0;
    }}
    if (m > RW_INT_MAX || n > RW_INT_MAX) return 1;
    rw_matrix a;
    rw_vector x;
    int status = rw_as_matrix(mat, sizeof({T}), &a);
    if (status) return status;
    status = rw_as_vector(vec, sizeof({T}), &x);
    if (status) {{ free(a.owned); return status; }}
    const rw_int rows = a.trans == RW_NO_TRANS ? (rw_int)m : (rw_int)n;
    const rw_int cols = a.trans == RW_NO_TRANS ? (rw_int)n : (rw_int)m;
    ((rw_{P}gemv_fn)rw_blas[RW_{U}GEMV])(RW_ROW_MAJOR, a.trans, rows, cols, 1, (const {T} *)a.data, a.ld,
        (const {T} *)x.data, x.inc, 0, out, 1);
    free(a.owned);
    free(x.owned);
    return 0;
}}

/* out = beta * src + alpha * out over rows x cols (out C-contiguous, src broadcast), rounded as numpy
   rounds `b * Z + a * product`: each product, then the sum (the module is built with -ffp-contract=off). */
static void rw_{P}_scale_add({T} *restrict out, ptrdiff_t rows, ptrdiff_t cols, {T} alpha, {T} beta,
                             const rw_operand *src) {{
    for (ptrdiff_t i = 0; i < rows; i++) {{
        {T} *restrict o = out + i * cols;
        const char *s = src->data + i * src->row;
        if (src->col == sizeof({T}) && RW_ALIGNED(s, sizeof({T}))) {{
            const {T} *restrict z = (const {T} *)s;
            for (ptrdiff_t j = 0; j < cols; j++) o[j] = beta * z[j] + alpha * o[j];
            continue;
        }}
        for (ptrdiff_t j = 0; j < cols; j++) {{  /* strided, broadcast or misaligned */
            {T} z;
            memcpy(&z, s + j * src->col, sizeof z);
            o[j] = beta * z + alpha * o[j];
        }}
    }}
}}

/* out = base + alpha * outer(x, y) over m x n (out C-contiguous, base broadcast, y contiguous), rounded
   as numpy rounds `A + a * outer(x, y)`: x_i * y_j, then times alpha, then plus base. */
static void rw_{P}_add_outer({T} *restrict out, ptrdiff_t m, ptrdiff_t n, const rw_operand *base, {T} alpha,
                             const char *x, ptrdiff_t x_stride, const {T} *restrict y) {{
    for (ptrdiff_t i = 0; i < m; i++) {{
        {T} *restrict o = out + i * n;
        const char *s = base->data + i * base->row;
        {T} xi;
        memcpy(&xi, x + i * x_stride, sizeof xi);
        if (base->col == sizeof({T}) && RW_ALIGNED(s, sizeof({T}))) {{
            const {T} *restrict a = (const {T} *)s;
            for (ptrdiff_t j = 0; j < n; j++) o[j] = a[j] + alpha * (xi * y[j]);
            continue;
        }}
        for (ptrdiff_t j = 0; j < n; j++) {{  /* strided, broadcast or misaligned */
            {T} a;
            memcpy(&a, s + j * base->col, sizeof a);
            o[j] = a + alpha * (xi * y[j]);
        }}
    }}
}}
"""


def vector_math_declarations(functions: frozenset[str]) -> str:
    """Declarations that let gcc call libmvec's SIMD variants of these functions in vectorized loops."""
    lines = []
    for name in sorted(functions):
        for ctype, suffix in (("double", ""), ("float", "f")):
            params = f"{ctype}, {ctype}" if name in BINARY_VECTOR_MATH else ctype
            lines.append(f'{ctype} {name}{suffix}({params}) __attribute__((simd("notinbranch")));')
    return "\n".join(lines) + "\n"


def _prelude(layout: ArrayLayout) -> str:
    return _PRELUDE.format(
        version=GENERATOR_VERSION,
        data=layout.data,
        ndim=layout.ndim,
        dims=layout.dims,
        strides=layout.strides,
    )


def runtime_source(layout: ArrayLayout) -> str:
    """The runtime module: `rw_elemwise`, the driver of every elementwise loop, and `rw_probe`.

    `rw_probe(a)` returns `ndim * 1000 + shape[1]` of a 2-d array, which
    checks compiler, loader and ndarray layout together.
    """
    return _prelude(layout) + _ELEMWISE_DRIVER + _PROBE


def blas_source(layout: ArrayLayout, int_bits: int) -> str:
    """The BLAS module: every kernel of `BLAS_ARITY`, float32 and float64, for a BLAS of `int_bits` ints.

    `rw_set_blas` takes the addresses of `BLAS_FUNCTIONS`, in that order.
    """
    if int_bits not in (32, 64):
        raise ValueError(f"the BLAS integer width must be 32 or 64, got {int_bits}")
    routines = ", ".join(f"RW_{name.upper()}" for name in BLAS_FUNCTIONS)
    shared = _BLAS_SHARED.format(int_type=f"int{int_bits}_t", int_max=f"INT{int_bits}_MAX", routines=routines)
    parts = [_prelude(layout), shared]
    for dtype, prefix in BLAS_PREFIX.items():
        fields = {"T": C_TYPES[dtype], "P": prefix, "U": prefix.upper()}
        parts.append(_BLAS_TYPED.format(**fields))
        for op_class, arity in BLAS_ARITY.items():
            params = ", ".join(f"void *a{k}" for k in range(arity))
            body = _BLAS_BODIES[op_class].format(**fields)
            parts.append(f"int {blas_kernel_name(op_class, dtype)}({params}) {{{body}}}\n")
    return "".join(parts)


def kernels_source(kernels: Sequence[Kernel], vector_math: frozenset[str]) -> str:
    """A graph's module: its elementwise kernels, which call the driver `rw_set_driver` hands them."""
    return (
        _KERNELS_HEADER.format(version=GENERATOR_VERSION)
        + vector_math_declarations(vector_math)
        + "".join(k.source for k in kernels)
    )

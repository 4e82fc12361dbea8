"""Differential fuzzing: random graphs under every mode against a NumPy walk of the original graph.

`run(graphs, seed)` draws graphs with the constructors a user writes (shared
subexpressions, ranks 0-2 with broadcasting, static lengths known and
unknown, float/int/bool dtypes, constants and Python literals at the edges of
each dtype's range, every op of `relwrite.graph.ops`), evaluates each under
every mode on several input sets (random, wide-range and edge values) and
compares with a plain NumPy evaluation of the original, unrewritten graph:
same shape, dtype, NaN and infinity positions, values close, and an error
wherever NumPy raises.  Each difference is classified:

- improvement: the reference is off (non-finite or inaccurate) and the mode
  agrees with an extended-precision walk of the original graph: in
  ``np.longdouble``, then (when mpmath is installed) with mpmath numbers of
  128 and 4096 bits, which neither overflow nor underflow.  Where even those
  overflow to an infinity of the sign of the mode's finite value (a
  cancellation like 1 - sigmoid(1e19) needs more bits than any walk has), or
  pass through an infinity that a later op hides (a comparison, 1 / x) where
  the rewritten graph's walk, after a stabilization, passes through none, the
  same walk of the rewritten graph must give the mode's value;
- declared: a rule that fired is tagged ``unsafe``, or declares that it
  reassociates or stabilizes (`Rule.semantics`) and the extended-precision
  walks of the original and of the rewritten graph agree (right over the
  reals; only rounding and range differ: a stabilization may move an
  underflow, too), or, where no walk of the original settles, the walks of
  the rewritten graph and of the graph made without the reassociating rules
  agree and that graph is no bug; or the original raises and the rewritten
  graph, walked the same way, gives a value (a refinement: rewriting removed
  the computation that failed, see docs/rule-safety.md);
- bug: anything else: a wrong value, dtype or shape (``wrong``), an exception
  where NumPy gives a value (``crashed``), a rewritten graph failing
  ``check_integrity`` (``invalid``), a rewriter or compilation failure the
  library swallowed with a warning (``warned``), or an intermediate value
  whose static type is not what the graph computes (``types``, mode-independent).

Rounding noise is told apart from bugs by evaluating the reference again with
every floating intermediate perturbed by a couple of ulps: an element is
accepted within the spread that noise produces (so ill-conditioned
expressions do not count as bugs), and values that depend on undefined
conversions (NaN, infinity or out-of-range floats cast to integers) are not
compared.  Graph `i` of a run is drawn from ``(seed, i)`` alone, so any case
replays by itself; every failure carries a self-contained Python reproducer,
shrunk to few nodes.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import math
import operator
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

import relwrite as rw
from relwrite.backends.function import MODES, Mode, get_mode
from relwrite.backends.numpy.function import function_graph
from relwrite.engine.db import mode_query, optdb
from relwrite.engine.profile import EquilibriumProfile, SequenceProfile
from relwrite.graph import ops
from relwrite.graph import shape as shape_ops
from relwrite.graph.basic import Apply, Variable, io_toposort
from relwrite.relations import Rule, catalogue
from relwrite.relations.budget import BudgetExceeded, relation_budget

BUG_CATEGORIES = ("wrong", "crashed", "invalid", "warned", "types")
"""Outcomes that are bugs: the fuzzer's test fails on any of them."""

GRAPH_ROW = "(graph)"
"""The report's row for mode-independent findings (static types, constructors that crash)."""

DEFAULT_MODES: tuple[str, ...] = (*MODES, "fast_run:numpy")
"""Every mode relwrite defines, and fast_run's rewrites run by the NumPy linker."""

# -- values at the edges ----------------------------------------------------------------------

_F64 = np.finfo(np.float64)
_F32 = np.finfo(np.float32)
_F16 = np.finfo(np.float16)
_EDGE_FLOATS = {
    "float64": (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.nan, np.inf, -np.inf, 1e300, -1e300, float(_F64.max),
                -float(_F64.max), 1e-300, 5e-324, float(_F64.smallest_normal), 1e-8, 700.0, -750.0, 30.0),
    "float32": (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.nan, np.inf, -np.inf, 1e30, -1e30, float(_F32.max),
                -float(_F32.max), 1e-30, 1e-45, float(_F32.smallest_normal), 1e-4, 88.0, -104.0, 20.0),
    "float16": (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.nan, np.inf, -np.inf, 1e4, float(_F16.max),
                -float(_F16.max), 6e-8, float(_F16.smallest_normal), 11.0, -17.0),
}  # fmt: skip
_LITERAL_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, np.nan, np.inf, -np.inf, 1e-300, 5e-324, 1e300,
                   float(_F64.max), float(_F32.max), float(_F32.smallest_normal), 1e-45, 0.1)  # fmt: skip
_LITERAL_INTS = (0, 1, -1, 2, 3, -7, 127, 128, -129, 255, 300, 2**31 - 1, 2**31, 2**63 - 1, 2**63)
_DTYPES = ("float64", "float32", "float16", "int8", "int32", "int64", "uint8", "bool")
_DTYPE_WEIGHTS = np.array([0.34, 0.2, 0.03, 0.09, 0.07, 0.1, 0.04, 0.13])
_BLAS_DTYPES = ("float64", "float32")


def _edge_values(dtype: np.dtype) -> tuple[Any, ...]:
    if dtype.kind == "f":
        return _EDGE_FLOATS[dtype.name]
    if dtype.kind == "b":
        return (False, True)
    info = np.iinfo(dtype)
    values = (0, 1, 2, info.max, info.max - 1, info.min, info.min + 1)
    return values + ((-1, -2) if dtype.kind == "i" else ())


# -- recipes: graphs as the constructor calls a user writes ----------------------------------------


@dataclass(frozen=True)
class Ref:
    """An argument that is the value of an earlier step of the recipe."""

    index: int


@dataclass
class Step:
    """One line of a recipe.

    `kind` is ``input`` (params: name, dtype, static shape), ``constant``
    (params: value, dtype or None) or ``call`` (`op` names a constructor of
    `_CTORS`; `args` are Refs and Python literals; `params` its options).
    """

    kind: str
    op: str = ""
    args: tuple[Any, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Recipe:
    """A graph as a list of steps, the steps that are its outputs, and how `function` is given them."""

    steps: list[Step]
    outputs: list[int]
    single: bool = False

    @property
    def inputs(self) -> list[int]:
        return [i for i, s in enumerate(self.steps) if s.kind == "input"]

    def needed(self) -> list[int]:
        """The steps the outputs depend on, in order (inputs always kept: they are `function`'s arguments)."""
        keep = set(self.outputs)
        for i in range(len(self.steps) - 1, -1, -1):
            if i in keep:
                keep.update(a.index for a in self.steps[i].args if isinstance(a, Ref))
        return [i for i in range(len(self.steps)) if i in keep]

    def pruned(self) -> tuple[Recipe, dict[int, int]]:
        """The recipe without the steps no output needs, and the map from old step indices to new."""
        keep = self.needed()
        new_index = {old: new for new, old in enumerate(keep)}
        steps = [_remap(self.steps[i], new_index) for i in keep]
        return Recipe(steps, [new_index[o] for o in self.outputs], self.single), new_index

    def names(self) -> list[str]:
        return [s.params["name"] if s.kind == "input" else f"v{i}" for i, s in enumerate(self.steps)]

    def build(self) -> list[Variable]:
        """The graph: one Variable per step, made with the public constructors."""
        built: list[Variable] = []
        for step in self.steps:
            if step.kind == "input":
                p = step.params
                built.append(rw.tensor(p["name"], dtype=p["dtype"], shape=p["shape"]))
            elif step.kind == "constant":
                p = step.params
                built.append(rw.constant(p["value"], dtype=p["dtype"]))
            else:
                args = [built[a.index] if isinstance(a, Ref) else a for a in step.args]
                built.append(_CTORS[step.op].build(args, step.params))
        return built

    def lines(self, prefix: str = "") -> list[str]:
        """The recipe as Python statements (names prefixed with `prefix`)."""
        names = [prefix + n for n in self.names()]
        out = []
        for i, step in enumerate(self.steps):
            p = step.params
            if step.kind == "input":
                shape = repr(tuple(p["shape"]))
                out.append(f'{names[i]} = rw.tensor("{names[i]}", dtype="{p["dtype"]}", shape={shape})')
            elif step.kind == "constant":
                dtype = "" if p["dtype"] is None else f', dtype="{p["dtype"]}"'
                out.append(f"{names[i]} = rw.constant({_literal_text(p['value'])}{dtype})")
            else:
                if step.op == "composite":
                    out.extend(p["inner"].lines(prefix=f"{names[i]}_"))
                args = [names[a.index] if isinstance(a, Ref) else _literal_text(a) for a in step.args]
                out.append(f"{names[i]} = {_CTORS[step.op].text(args, p, names[i])}")
        return out


def _remap(step: Step, new_index: dict[int, int]) -> Step:
    args = tuple(Ref(new_index[a.index]) if isinstance(a, Ref) else a for a in step.args)
    return Step(step.kind, step.op, args, step.params)


def _literal_text(value: Any) -> str:
    """Python source for a literal or an array (exact: floats by repr, NaN and infinities by name)."""
    if isinstance(value, np.ndarray):
        body = _nested_text(value.tolist())
        return f'np.array({body}, dtype="{value.dtype.name}")'
    if isinstance(value, float):
        if np.isnan(value):
            return "float('nan')"
        if np.isinf(value):
            return "float('inf')" if value > 0 else "-float('inf')"
    return repr(value)


def _nested_text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_nested_text(v) for v in value) + "]"
    if isinstance(value, float):
        return _literal_text(value).replace("float('nan')", "np.nan").replace("float('inf')", "np.inf")
    return repr(value)


# -- constructors: how to build, evaluate and print each call ---------------------------------------


@dataclass(frozen=True)
class _Ctor:
    """A public constructor: `build` makes the Variable, `ref` computes it with NumPy, `text` prints it.

    `elementwise` says the value of an element depends only on the same
    (broadcast) element of the arguments (used to track undefined values).
    """

    build: Callable[[list[Any], dict[str, Any]], Variable]
    ref: Callable[[list[Any], dict[str, Any]], Any]
    text: Callable[[list[str], dict[str, Any], str], str]
    elementwise: bool = True


def _errstate() -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    stack.enter_context(np.errstate(all="ignore"))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore", RuntimeWarning)
    return stack


def _float_dtype_of(x: Any) -> np.dtype:
    """The floating dtype numpy's float ufuncs (exp) give for `x`."""
    return np.exp(np.zeros(0, dtype=np.asarray(x).dtype)).dtype


def _is_literal(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def _ref_fold(ufunc: np.ufunc, args: Sequence[Any]) -> Any:
    """A variadic op as a left fold; Python literals take the dtype NumPy gives them next to every array."""
    if len(args) > 2 and any(_is_literal(a) for a in args):
        dtypes = [np.asarray(a).dtype for a in args if not _is_literal(a)]
        args = [np.asarray(a, dtype=np.result_type(*dtypes, a)) if _is_literal(a) else a for a in args]
    if len(args) == 1:
        return np.array(args[0], copy=True)
    acc = ufunc(args[0], args[1])
    for arg in args[2:]:
        acc = ufunc(acc, arg)
    return acc


def _ref_sigmoid(x: Any) -> Any:
    xf = np.asarray(x).astype(_float_dtype_of(x))
    return np.true_divide(1, np.add(1, np.exp(np.negative(xf))))


def _ref_softplus(x: Any) -> Any:
    xf = np.asarray(x).astype(_float_dtype_of(x))
    return np.logaddexp(xf.dtype.type(0), xf)


def _ref_special(function: Callable[[float], float]) -> Callable[[Any], Any]:
    """An elementwise float function NumPy lacks (erf, erfc), over Python's `math`, in numpy's float dtype."""

    def ref(x: Any) -> Any:
        dtype = _float_dtype_of(x)
        values = np.frompyfunc(function, 1, 1)(np.asarray(x, dtype=np.float64))
        return np.asarray(values, dtype=np.float64).astype(dtype)

    return ref


def _nearest_float(value: Fraction, dtype: np.dtype) -> np.generic:
    """`value` rounded to the nearest float of `dtype`, ties to even; infinite past the largest float by
    half its ulp (infinity stands where the next float would)."""
    try:
        guess = dtype.type(float(value))
    except OverflowError:
        return dtype.type(math.inf if value > 0 else -math.inf)
    top = Fraction(2) ** int(np.finfo(dtype).maxexp)
    candidates = [np.nextafter(guess, dtype.type(-np.inf)), guess, np.nextafter(guess, dtype.type(np.inf))]

    def rank(candidate: np.generic) -> tuple[Fraction, int]:
        at = (top if candidate > 0 else -top) if np.isinf(candidate) else Fraction(float(candidate))
        return abs(at - value), int(np.asarray(candidate).view(f"u{dtype.itemsize}")) & 1

    return min(candidates, key=rank)


def _exact_fma(x: Any, y: Any, z: Any, dtype: np.dtype) -> np.generic:
    """x * y + z in fractions, rounded once to `dtype`; C99's special values."""
    x, y, z = float(x), float(y), float(z)
    if not (math.isfinite(x) and math.isfinite(y)) or not math.isfinite(z) or x == 0 or y == 0:
        return dtype.type(z if math.isfinite(x) and math.isfinite(y) and not math.isfinite(z) else x * y + z)
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    return dtype.type(0.0) if exact == 0 else _nearest_float(exact, dtype)


def _ref_fma(a: Any, b: Any, c: Any) -> Any:
    """fma rounded once, in numpy.hypot's float dtype of the operands; a * b + c in a long double walk."""
    arrays = [np.asarray(v) for v in (a, b, c)]
    if any(v.dtype == np.longdouble for v in arrays):
        return arrays[0] * arrays[1] + arrays[2]
    dtype = functools.reduce(
        lambda d, e: np.hypot(np.zeros(0, d), np.zeros(0, e)).dtype, (v.dtype for v in arrays)
    )
    values = np.frompyfunc(lambda x, y, z: _exact_fma(x, y, z, dtype), 3, 1)(
        *(v.astype(dtype) for v in arrays)
    )
    return np.asarray(values, dtype=dtype)


def _ref_log1mexp(x: Any) -> Any:
    """The plain formula (the wide walks arbitrate its rounding), NaN for x > 0 where it is undefined:
    1 - exp(x) is negative there even where exp(x) rounds to 1 (x = 1e-300)."""
    xf = np.asarray(x).astype(_float_dtype_of(x))
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.log(np.subtract(xf.dtype.type(1), np.exp(xf)))
    return np.where(xf > 0, xf.dtype.type(np.nan), values)


def _ref_assert(value: Any, *conditions: Any) -> Any:
    """The checked value, or the AssertionError relwrite raises where a condition fails."""
    if not all(np.all(c) for c in conditions):
        raise AssertionError("checked")
    return np.array(value)


def _ref_fill(model: Any, value: Any) -> Any:
    model = np.asarray(model)
    shape = np.broadcast_shapes(model.shape, np.shape(value))
    dtype = value.dtype if isinstance(value, np.ndarray) else np.result_type(model.dtype, value)
    return np.full(shape, value, dtype=dtype)


def _ref_softmax(x: Any, axis: int, log: bool) -> Any:
    xf = np.asarray(x).astype(_float_dtype_of(x))
    shifted = xf - np.max(xf, axis=axis, keepdims=True)
    total = np.sum(np.exp(shifted), axis=axis, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


def _ref_logsumexp(x: Any, axis: Any) -> Any:
    """log(sum(exp(x))) over `axis`, shifted by the finite maximum so that no exp overflows."""
    xf = np.asarray(x).astype(_float_dtype_of(x))
    axes = tuple(range(xf.ndim)) if axis is None else axis
    finite = np.where(np.isfinite(xf), xf, -np.inf)
    m = np.max(finite, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0).astype(xf.dtype)
    return np.squeeze(m, axis=axes) + np.log(np.sum(np.exp(xf - m), axis=axes))


def _ref_dimshuffle(x: Any, order: Sequence[Any]) -> Any:
    x = np.asarray(x)
    kept = [o for o in order if o != "x"]
    dropped = [a for a in range(x.ndim) if a not in kept]
    shape = [1 if o == "x" else x.shape[o] for o in order]
    return np.transpose(x, kept + dropped).reshape(shape)


def _ref_alloc(value: Any, shape: Sequence[int]) -> Any:
    return np.array(np.broadcast_to(np.asarray(value), tuple(shape)))


SUMMATION_ORDERS = (None, ("forward", False), ("reversed", False), ("forward", True), ("reversed", True))
"""How the reference sums a dot product's terms: NumPy's own way (None), or in sequence, forward or
reversed, rounding after each product and addition or only after each fused multiply-add.  BLAS
fixes none of these (NumPy's own result changes with the layout), so a mode may match any."""

_summation: tuple[str, bool] | None = None


@contextlib.contextmanager
def _summing(order: tuple[str, bool] | None) -> Iterator[None]:
    """Evaluate dot products in the block with the summation `order` (see SUMMATION_ORDERS)."""
    global _summation
    previous, _summation = _summation, order
    try:
        yield
    finally:
        _summation = previous


def _product(a: Any, b: Any) -> np.ndarray:
    """``np.dot(a, b)`` summed in the current order (ranks up to 2)."""
    a, b = np.asarray(a), np.asarray(b)
    if _summation is None or a.ndim == 0 or b.ndim == 0 or a.dtype.kind != "f" or b.dtype.kind != "f":
        return np.asarray(np.dot(a, b))
    direction, fused = _summation
    rows = a if a.ndim == 2 else a[None, :]
    cols = b if b.ndim == 2 else b[:, None]
    dtype = np.result_type(a, b)
    total = np.zeros((rows.shape[0], cols.shape[1]), dtype=dtype)
    inner = range(rows.shape[1]) if direction == "forward" else range(rows.shape[1] - 1, -1, -1)
    with _errstate():
        for k in inner:
            if fused:  # one rounding per multiply-add: exact products, summed wide, then rounded
                wide = np.multiply.outer(rows[:, k].astype(np.longdouble), cols[k].astype(np.longdouble))
                total = (total.astype(np.longdouble) + wide).astype(dtype)
            else:
                total = total + np.multiply.outer(rows[:, k], cols[k])
    if a.ndim == 1:
        total = total[0]
    return total[..., 0] if b.ndim == 1 else total


def _ref_gemm(z: Any, a: Any, x: Any, y: Any, b: Any) -> Any:
    return np.add(np.multiply(b, z), np.multiply(a, _product(x, y)))


def _ref_gemv(y: Any, a: Any, mat: Any, x: Any, b: Any) -> Any:
    return np.add(np.multiply(b, y), np.multiply(a, _product(mat, x)))


def _ref_ger(mat: Any, a: Any, x: Any, y: Any) -> Any:
    return np.add(mat, np.multiply(a, np.outer(x, y)))


def _fn_text(name: str) -> Callable[[list[str], dict[str, Any], str], str]:
    return lambda args, p, _: f"rw.{name}({', '.join(args)})"


_BINARY = {  # constructor name: (ufunc, operator symbol or None)
    "add": (np.add, "+"),
    "sub": (np.subtract, "-"),
    "mul": (np.multiply, "*"),
    "true_div": (np.true_divide, "/"),
    "pow": (np.power, "**"),
    "maximum": (np.maximum, None),
    "minimum": (np.minimum, None),
    "lt": (np.less, "<"),
    "le": (np.less_equal, "<="),
    "gt": (np.greater, ">"),
    "ge": (np.greater_equal, ">="),
    "eq": (np.equal, None),
    "neq": (np.not_equal, None),
}
_OPERATORS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "**": operator.pow,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_UNARY = {
    "neg": np.negative,
    "abs": np.absolute,
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sqrt": np.sqrt,
    "sqr": np.square,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sigmoid": _ref_sigmoid,
    "softplus": _ref_softplus,
    "reciprocal": lambda x: np.true_divide(1, x),
    "identity": lambda x: np.array(x, copy=True),
}
_SPECIAL_UNARY = {
    "erf": _ref_special(math.erf),
    "erfc": _ref_special(math.erfc),
    "log1mexp": _ref_log1mexp,
}
"""Unary ops drawn in place of exp, log1p or tanh from a side stream, so that adding them kept every
earlier graph of every seed as it was (the main stream draws exactly as before)."""
_SPECIAL_STANDS_IN_FOR = ("exp", "log1p", "tanh")
_ELEMENTARY_UNARY = {
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "cbrt": np.cbrt,
}
_ELEMENTARY_BINARY = {"hypot": np.hypot, "atan2": np.arctan2}
"""FPBench's elementary functions, drawn in place of sin, cos or sqrt (unary) and maximum or minimum
(binary) from a second side stream: the main stream and the first side stream draw as before."""
_ELEMENTARY_STANDS_IN_FOR = ("sin", "cos", "sqrt", "maximum", "minimum")


def _make_ctors() -> dict[str, _Ctor]:
    ctors: dict[str, _Ctor] = {}
    for name, (ufunc, symbol) in _BINARY.items():
        fn = getattr(rw, name)
        ctors[name] = _Ctor(lambda a, p, fn=fn: fn(*a), lambda a, p, u=ufunc: _ref_fold(u, a), _fn_text(name))
        if symbol is not None:
            ctors[f"op{symbol}"] = _Ctor(
                lambda a, p, o=_OPERATORS[symbol]: o(*a),
                lambda a, p, u=ufunc: u(*a),
                lambda a, p, _, s=symbol: f"{a[0]} {s} {a[1]}",
            )
    for name, ref in {**_UNARY, **_SPECIAL_UNARY, **_ELEMENTARY_UNARY, **_ELEMENTARY_BINARY}.items():
        fn = getattr(rw, name)
        ctors[name] = _Ctor(lambda a, p, fn=fn: fn(*a), lambda a, p, r=ref: r(*a), _fn_text(name))
    ctors["fma"] = _Ctor(lambda a, p: rw.fma(*a), lambda a, p: _ref_fma(*a), _fn_text("fma"))
    ctors["op-x"] = _Ctor(lambda a, p: -a[0], lambda a, p: np.negative(a[0]), lambda a, p, _: f"-{a[0]}")
    ctors["op-abs"] = _Ctor(
        lambda a, p: abs(a[0]), lambda a, p: np.absolute(a[0]), lambda a, p, _: f"abs({a[0]})"
    )
    ctors["switch"] = _Ctor(lambda a, p: rw.switch(*a), lambda a, p: np.where(*a), _fn_text("switch"))
    ctors["fill"] = _Ctor(lambda a, p: rw.fill(*a), lambda a, p: _ref_fill(*a), _fn_text("fill"))
    ctors["ones_like"] = _Ctor(
        lambda a, p: rw.ones_like(*a), lambda a, p: np.ones_like(*a), _fn_text("ones_like")
    )
    ctors["zeros_like"] = _Ctor(
        lambda a, p: rw.zeros_like(*a), lambda a, p: np.zeros_like(*a), _fn_text("zeros_like")
    )
    ctors["cast"] = _Ctor(
        lambda a, p: rw.cast(a[0], p["dtype"]),
        lambda a, p: np.asarray(a[0]).astype(p["dtype"]),
        lambda a, p, _: f'rw.cast({a[0]}, "{p["dtype"]}")',
    )
    ctors["astype"] = _Ctor(
        lambda a, p: a[0].astype(p["dtype"]),
        lambda a, p: np.asarray(a[0]).astype(p["dtype"]),
        lambda a, p, _: f'{a[0]}.astype("{p["dtype"]}")',
    )
    for name, reduction in (
        ("sum", np.sum),
        ("mean", np.mean),
        ("max", np.max),
        ("min", np.min),
        ("prod", np.prod),
        ("argmax", np.argmax),
        ("argmin", np.argmin),
    ):
        fn = getattr(rw, name)
        ctors[name] = _Ctor(
            lambda a, p, fn=fn: fn(a[0], axis=p["axis"]),
            lambda a, p, r=reduction: r(a[0], axis=p["axis"]),
            lambda a, p, _, n=name: f"rw.{n}({a[0]}, axis={p['axis']!r})",
            elementwise=False,
        )
        ctors[f".{name}"] = _Ctor(
            lambda a, p, n=name: getattr(a[0], n)(p["axis"]),
            lambda a, p, r=reduction: r(a[0], axis=p["axis"]),
            lambda a, p, _, n=name: f"{a[0]}.{n}({p['axis']!r})",
            elementwise=False,
        )
    ctors["logsumexp"] = _Ctor(
        lambda a, p: ops.logsumexp(a[0], axis=p["axis"]),
        lambda a, p: _ref_logsumexp(a[0], p["axis"]),
        lambda a, p, _: f"ops.logsumexp({a[0]}, axis={p['axis']!r})",
        elementwise=False,
    )
    for name, log in (("softmax", False), ("log_softmax", True)):
        fn = getattr(rw, name)
        ctors[name] = _Ctor(
            lambda a, p, fn=fn: fn(a[0], axis=p["axis"]),
            lambda a, p, log=log: _ref_softmax(a[0], p["axis"], log),
            lambda a, p, _, n=name: f"rw.{n}({a[0]}, axis={p['axis']})",
            elementwise=False,
        )
    ctors["assert_op"] = _Ctor(
        lambda a, p: rw.assert_op(*a, message="checked"),
        lambda a, p: _ref_assert(*a),
        lambda a, p, _: f"rw.assert_op({', '.join(a)}, message='checked')",
        elementwise=False,
    )
    ctors["concatenate"] = _Ctor(
        lambda a, p: rw.concatenate(list(a), axis=p["axis"]),
        lambda a, p: np.concatenate(a, axis=p["axis"]),
        lambda a, p, _: f"rw.concatenate([{', '.join(a)}], axis={p['axis']})",
        elementwise=False,
    )
    ctors["stack"] = _Ctor(
        lambda a, p: rw.stack(list(a), axis=p["axis"]),
        lambda a, p: np.stack(a, axis=p["axis"]),
        lambda a, p, _: f"rw.stack([{', '.join(a)}], axis={p['axis']})",
        elementwise=False,
    )
    ctors["dot"] = _Ctor(
        lambda a, p: rw.dot(*a), lambda a, p: _product(*a), _fn_text("dot"), elementwise=False
    )
    ctors["op@"] = _Ctor(
        lambda a, p: a[0] @ a[1],
        lambda a, p: _product(*a),
        lambda a, p, _: f"{a[0]} @ {a[1]}",
        elementwise=False,
    )
    ctors[".dot"] = _Ctor(
        lambda a, p: a[0].dot(a[1]),
        lambda a, p: _product(*a),
        lambda a, p, _: f"{a[0]}.dot({a[1]})",
        elementwise=False,
    )
    ctors["dot22"] = _Ctor(
        lambda a, p: rw.dot22(*a), lambda a, p: _product(*a), _fn_text("dot22"), elementwise=False
    )
    for name, ref in (("gemm", _ref_gemm), ("gemv", _ref_gemv), ("ger", _ref_ger)):
        fn = getattr(rw, name)
        ctors[name] = _Ctor(
            lambda a, p, fn=fn: fn(*a), lambda a, p, r=ref: r(*a), _fn_text(name), elementwise=False
        )
    ctors["transpose"] = _Ctor(
        lambda a, p: rw.transpose(a[0]),
        lambda a, p: np.transpose(a[0]),
        _fn_text("transpose"),
        elementwise=False,
    )
    ctors[".T"] = _Ctor(
        lambda a, p: a[0].T, lambda a, p: np.transpose(a[0]), lambda a, p, _: f"{a[0]}.T", False
    )
    ctors["shape"] = _Ctor(
        lambda a, p: shape_ops.shape(a[0]),
        lambda a, p: np.array(np.shape(a[0]), dtype=np.int64),
        lambda a, p, _: f"rw.shape({a[0]})",
        elementwise=False,
    )
    ctors["shape_i"] = _Ctor(
        lambda a, p: shape_ops.shape_i(a[0], p["axis"]),
        lambda a, p: np.array(np.shape(a[0])[p["axis"]], dtype=np.int64),
        lambda a, p, _: f"rw.shape_i({a[0]}, {p['axis']})",
        elementwise=False,
    )
    ctors["index"] = _Ctor(
        lambda a, p: a[0][p["key"]],
        lambda a, p: np.asarray(a[0][_ref_key(p["key"])]),
        lambda a, p, _: f"{a[0]}[{_key_text(p['key'])}]",
        elementwise=False,
    )
    for name in ("inc_subtensor", "set_subtensor"):
        ctors[name] = _Ctor(
            lambda a, p, n=name: getattr(rw, n)(a[0][p["key"]], a[1]),
            lambda a, p, n=name: _ref_update(a[0], a[1], p["key"], n == "set_subtensor"),
            lambda a, p, _, n=name: f"rw.{n}({a[0]}[{_key_text(p['key'])}], {a[1]})",
            elementwise=False,
        )
    ctors["dimshuffle"] = _Ctor(
        lambda a, p: a[0].dimshuffle(*p["order"]),
        lambda a, p: _ref_dimshuffle(a[0], p["order"]),
        lambda a, p, _: f"{a[0]}.dimshuffle({', '.join(map(repr, p['order']))})",
        elementwise=False,
    )
    ctors["reshape"] = _Ctor(
        lambda a, p: a[0].reshape(p["shape"]),
        lambda a, p: np.reshape(a[0], p["shape"]),
        lambda a, p, _: f"{a[0]}.reshape({tuple(p['shape'])!r})",
        elementwise=False,
    )
    ctors["alloc"] = _Ctor(
        lambda a, p: rw.alloc(a[0], *p["shape"]),
        lambda a, p: _ref_alloc(a[0], p["shape"]),
        lambda a, p, _: f"rw.alloc({', '.join([a[0], *map(str, p['shape'])])})",
        elementwise=False,
    )
    ctors["composite"] = _Ctor(_build_composite, _ref_composite, _composite_text)
    return ctors


def _build_composite(args: list[Any], params: dict[str, Any]) -> Variable:
    inner: Recipe = params["inner"]
    built = inner.build()
    return ops.Composite([built[i] for i in inner.inputs], [built[inner.outputs[0]]])(*args)


def _ref_composite(args: list[Any], params: dict[str, Any], noise: np.random.Generator | None = None) -> Any:
    """A fused node's value; with `noise`, every inner result is perturbed as a graph node's would be."""
    inner: Recipe = params["inner"]
    env = _evaluate(inner, dict(zip(inner.inputs, args)), noise)
    value = env.values[inner.outputs[0]]
    if isinstance(value, _Error):
        raise value.error
    return _broadcast_to_all(value, args)


def _broadcast_to_all(value: Any, args: Sequence[Any]) -> np.ndarray:
    """A Composite's output has the broadcast shape of all its inputs, used or not (a fresh array)."""
    return np.array(np.broadcast_to(value, np.broadcast_shapes(*(np.shape(a) for a in args))))


def _composite_text(args: list[str], params: dict[str, Any], name: str) -> str:
    inner: Recipe = params["inner"]
    names = [f"{name}_{n}" for n in inner.names()]
    ins = ", ".join(names[i] for i in inner.inputs)
    return f"ops.Composite([{ins}], [{names[inner.outputs[0]]}])({', '.join(args)})"


_CTORS = _make_ctors()


# -- the reference: a NumPy walk of a recipe (with rounding noise and undefined-value tracking) ----


@dataclass(frozen=True)
class _Error:
    """NumPy raised while computing this value (or a value it depends on)."""

    error: BaseException

    def describe(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"


@dataclass
class _Env:
    values: dict[int, Any]
    undefined: dict[int, np.ndarray]
    """Per step, where its value depends on an undefined conversion (absent: nowhere)."""


def _undefined_cast(x: np.ndarray, dtype: str) -> np.ndarray | None:
    """Where casting float `x` to integer `dtype` is undefined (NaN, infinite or out of range)."""
    target = np.dtype(dtype)
    if x.dtype.kind != "f" or target.kind not in "iu":
        return None
    info = np.iinfo(target)
    with np.errstate(all="ignore"):
        truncated = np.trunc(x.astype(np.longdouble))
        bad = ~np.isfinite(truncated) | (truncated < info.min) | (truncated > info.max)
    return bad if bad.any() else None


def _perturbed(value: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`value` with each element moved by up to two ulps (finite results stay finite)."""
    eps = np.finfo(value.dtype).eps
    noise = rng.uniform(-2.0, 2.0, value.shape) * eps
    moved = value * (1 + noise).astype(value.dtype)
    return np.where(np.isfinite(moved) | ~np.isfinite(value), moved, value)


def _evaluate(recipe: Recipe, inputs: dict[int, Any], noise: np.random.Generator | None = None) -> _Env:
    """The value of every step of `recipe` the outputs need, computed with NumPy from `inputs`."""
    env = _Env({}, {})
    with _errstate():
        for i in recipe.needed():
            step = recipe.steps[i]
            if step.kind == "input":
                env.values[i] = inputs[i]
                continue
            if step.kind == "constant":
                env.values[i] = np.asarray(step.params["value"], dtype=step.params["dtype"])
                continue
            args = [env.values[a.index] if isinstance(a, Ref) else a for a in step.args]
            failed = next((a for a in args if isinstance(a, _Error)), None)
            if failed is not None:
                env.values[i] = failed
                continue
            try:
                if step.op == "composite":  # rounding inside a fused node spreads like any other
                    value = np.asarray(_ref_composite(args, step.params, noise))
                else:
                    value = np.asarray(_CTORS[step.op].ref(args, step.params))
            except Exception as exc:  # NumPy's own error is the expected outcome
                env.values[i] = _Error(exc)
                continue
            if noise is not None and value.dtype.kind == "f":
                value = _perturbed(value, noise)
            env.values[i] = value
            undefined = _undefined_of(step, args, value, env)
            if undefined is not None:
                env.undefined[i] = undefined
    return env


def _undefined_of(step: Step, args: list[Any], value: np.ndarray, env: _Env) -> np.ndarray | None:
    """Where `value` depends on an undefined conversion, from its arguments' and its own."""
    marks = [env.undefined[a.index] for a in step.args if isinstance(a, Ref) and a.index in env.undefined]
    if step.op in ("cast", "astype"):
        own = _undefined_cast(np.asarray(args[0]), step.params["dtype"])
        if own is not None:
            marks.append(own)
    if not marks:
        return None
    if not _CTORS[step.op].elementwise:
        return np.ones(value.shape, dtype=bool)
    mask = np.zeros(value.shape, dtype=bool)
    for m in marks:
        mask |= np.broadcast_to(m, value.shape) if m.ndim <= value.ndim else m.any()
    return mask


# -- graph walks: the reference applied to relwrite's own nodes (rewritten graphs, long double) ------

# Written apart from relwrite.backends.numpy.impls on purpose: a reference that shared the
# implementation it checks could not catch that implementation's mistakes.
_NODE_UFUNCS: dict[type, Callable[..., Any]] = {
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
    ops.Fma: _ref_fma,
    ops.Abs: np.absolute,
    ops.Sigmoid: _ref_sigmoid,
    ops.Softplus: _ref_softplus,
    ops.Erf: _ref_special(math.erf),
    ops.Erfc: _ref_special(math.erfc),
    ops.Log1mexp: _ref_log1mexp,
    ops.Reciprocal: lambda x: np.true_divide(1, x),
    ops.Identity: lambda x: np.array(x, copy=True),
    ops.Switch: np.where,
    ops.Dot: np.dot,
    ops.Dot22: np.matmul,
    ops.Gemm: _ref_gemm,
    ops.Gemv: _ref_gemv,
    ops.Ger: _ref_ger,
    ops.Add: lambda *a: _ref_fold(np.add, a),
    ops.Mul: lambda *a: _ref_fold(np.multiply, a),
}

DOT_STEPS = frozenset({"dot", "op@", ".dot", "dot22", "gemm", "gemv"})
"""Recipe steps whose value sums products in an order BLAS leaves open."""

PRECISIONS = ("native", "long", "mp")
"""How graph walks compute floats: in their own dtype, in np.longdouble, or with mpmath (any exponent)."""


def _widen(value: np.ndarray, precision: str) -> np.ndarray:
    """`value` in the walk's wide float type (object arrays of mpmath numbers for "mp")."""
    if precision == "long":
        return value if value.dtype == np.longdouble else value.astype(np.longdouble)
    if value.dtype == object:
        return value
    mpf = _mpmath().mpf
    convert = np.frompyfunc(lambda v: mpf(float(v)) if isinstance(v, float) else mpf(int(v)), 1, 1)
    return np.asarray(convert(value.astype(np.float64) if value.dtype.kind == "f" else value), dtype=object)


def _node_value(
    node: Apply, args: list[Any], precision: str, noise: np.random.Generator | None = None
) -> list[Any]:
    """The outputs of `node` on `args` by the reference semantics, computing floats in `precision`.

    `noise` moves the partial results inside a wide add or mul (`_wide_fold`);
    the node's own outputs are moved by the walk.
    """
    op = node.op
    if isinstance(op, ops.Composite):  # its inner nodes widen as they compute: integer steps still wrap
        outs = _walk(op.inputs, op.outputs, args, precision)
        return [_broadcast_to_all(v, args) for v in outs]
    wide = precision != "native" and node.outputs[0].dtype.startswith("float")
    if wide and isinstance(op, (ops.Add, ops.Mul)):
        ufunc = np.add if isinstance(op, ops.Add) else np.multiply
        return [_wide_fold(ufunc, args, [v.type.numpy_dtype for v in node.inputs], precision, noise)]
    if wide and not isinstance(op, (ops.Cast, ops.Fill)):
        first = 1 if isinstance(op, ops.Switch) else 0
        args = [a if k < first else _widen(a, precision) for k, a in enumerate(args)]
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


_REDUCTIONS = {
    ops.Sum: np.sum,
    ops.Mean: np.mean,
    ops.Max: np.max,
    ops.Min: np.min,
    ops.Prod: np.prod,
    ops.Argmax: np.argmax,
    ops.Argmin: np.argmin,
}


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
            acc = np.asarray(ufunc(_widen(acc, precision), _widen(arg, precision)))
            if noise is not None and native.kind == "f" and native.itemsize < result.itemsize:
                acc = _rounding_noise(acc, native, noise)
        else:
            acc = np.asarray(ufunc(acc, arg))
    return _widen(np.asarray(acc), precision)


def _ref_key(key: tuple) -> tuple:
    """A recipe's index as NumPy takes it (lists become integer arrays)."""
    return tuple(np.asarray(k, dtype=np.int64) if isinstance(k, list) else k for k in key)


def _key_text(key: tuple) -> str:
    def item(k: Any) -> str:
        if isinstance(k, slice):
            text = ":".join("" if b is None else str(b) for b in (k.start, k.stop))
            return text + (f":{k.step}" if k.step is not None else "")
        return repr(k)

    return ", ".join(map(item, key)) + ("," if len(key) == 1 and not isinstance(key[0], slice) else "")


def _ref_update(x: np.ndarray, y: Any, key: tuple, setting: bool) -> np.ndarray:
    """x with x[key] set to y, or increased by y (repeated array indices accumulating), as a new array."""
    out = np.array(x, copy=True)
    key = _ref_key(key)
    if setting:
        out[key] = y
    elif any(isinstance(k, np.ndarray) for k in key):
        np.add.at(out, key, y)
    else:
        out[(*key, ...)] += y  # a view even for one element: the sum wraps in x's dtype, as documented
    return out


def _indexing_value(op: Any, args: list[Any]) -> np.ndarray:
    """An indexing node on its arrays (index inputs may come widened: they are made integers again)."""
    updating = isinstance(op, ops.IncSubtensor)
    values = iter(args[2:] if updating else args[1:])

    def integer(v: Any) -> Any:
        v = np.asarray(v)
        return v.astype(np.int64) if v.dtype.kind == "i" else np.vectorize(int, otypes=[np.int64])(v)

    key: list[Any] = []
    for entry in op.idx_list:
        if entry == "newaxis":
            key.append(None)
        elif entry == "int":
            key.append(int(integer(next(values))))
        elif entry == "array":
            key.append(integer(next(values)).tolist())
        else:
            key.append(slice(*(int(integer(next(values))) if has else None for has in entry[1:])))
    if updating:
        return _ref_update(args[0], args[1], tuple(key), op.set_instead_of_inc)
    return np.asarray(args[0][_ref_key(tuple(key))])


def _shape_op_value(op: Any, args: list[Any]) -> np.ndarray:
    if isinstance(op, (ops.Subtensor, ops.AdvancedSubtensor, ops.IncSubtensor)):
        return _indexing_value(op, args)
    x = args[0]
    if isinstance(op, shape_ops.Shape):
        return np.array(np.shape(x), dtype=np.int64)
    if isinstance(op, shape_ops.Shape_i):
        return np.array(np.shape(x)[op.i], dtype=np.int64)
    if isinstance(op, ops.DimShuffle):
        return _ref_dimshuffle(x, op.new_order)
    if isinstance(op, ops.Reshape):
        return np.reshape(x, op.shape)
    if isinstance(op, ops.Alloc):
        return _ref_alloc(x, op.shape)
    raise NotImplementedError(f"the fuzzer's reference has no semantics for {type(op).__name__}")


# -- mpmath: real arithmetic with IEEE-like infinities and NaN, and no overflow -------------------------


@functools.cache
def _mpmath() -> Any:
    """The fuzzer's own mpmath context (its precision is set per walk; mpmath's global one is left alone)."""
    import mpmath

    return mpmath.MPContext()


MP_BITS = (128, 4096)
"""The mpmath precisions tried, in turn, when long double cannot tell a stabilization from a bug."""


def _wide_walk(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    values: Sequence[Any],
    precision: str | int,
    noise: np.random.Generator | None = None,
    env: dict[Variable, Any] | None = None,
) -> list[Any]:
    """A walk in long double (`precision` "long") or with mpmath numbers of `precision` bits."""
    if precision == "long":
        return _walk(inputs, outputs, values, "long", noise, env)
    context = _mpmath()
    saved, context.prec = context.prec, int(precision)
    try:
        return _walk(inputs, outputs, values, "mp", noise, env)
    finally:
        context.prec = saved


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


def mpmath_available() -> bool:
    """Whether the mpmath arbiter of stabilizations can run (mpmath is installed)."""
    try:
        _mpmath()
    except ImportError:
        return False
    return True


def _mp_real(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` on mpmath numbers, with NaN for complex results and IEEE infinities for poles."""
    mp = _mpmath()

    def real(*args: Any) -> Any:
        args = [a if isinstance(a, mp.mpf) else mp.mpf(a) for a in args]
        if any(mp.isnan(a) for a in args):
            return fn(*args) if fn in (_mp_pow, _mp_hypot) else mp.nan
        try:
            value = fn(*args)
        except ZeroDivisionError:
            return mp.inf
        return mp.nan if isinstance(value, mp.mpc) else value

    return real


def _mp_div(a: Any, b: Any) -> Any:
    mp = _mpmath()
    if b == 0:
        return mp.nan if a == 0 else (mp.inf if a > 0 else -mp.inf)
    return a / b


def _mp_pow(a: Any, b: Any) -> Any:
    mp = _mpmath()
    if b == 0 or a == 1:  # numpy: x ** 0 is 1 and 1 ** y is 1, NaN included
        return mp.mpf(1)
    if mp.isnan(a) or mp.isnan(b):
        return mp.nan
    if mp.isinf(b):  # C99 pow: only whether |a| is above, at or below 1 matters (mpmath goes complex)
        magnitude = abs(a)
        if magnitude == 1:
            return mp.mpf(1)
        return mp.inf if (magnitude > 1) == (b > 0) else mp.mpf(0)
    if mp.isinf(a):  # C99 pow: the sign survives only an odd integer exponent
        odd = mp.isint(b) and int(b) % 2 == 1
        if b < 0:
            return mp.mpf(0)
        return -mp.inf if a < 0 and odd else mp.inf
    if a != 0 and mp.isfinite(a) and mp.isfinite(b):
        scale = b * mp.log(abs(a), 2)
        if abs(scale) > 2**62:  # far outside any float range: mpmath would work for ages
            if a < 0 and not mp.isint(b):
                return mp.nan
            if scale < 0:
                return mp.mpf(0)
            return -mp.inf if a < 0 and mp.isint(b) and int(b) % 2 else mp.inf
    return mp.power(a, b)


def _mp_hypot(a: Any, b: Any) -> Any:
    """C99 hypot: infinite where either operand is, even when the other is NaN."""
    mp = _mpmath()
    if mp.isinf(a) or mp.isinf(b):
        return mp.inf
    if mp.isnan(a) or mp.isnan(b):
        return mp.nan
    return mp.hypot(a, b)


def _mp_atan2(y: Any, x: Any) -> Any:
    """C99 atan2: the angle of (x, y), also where both are infinite (a diagonal: ±pi/4, ±3pi/4)."""
    mp = _mpmath()
    if mp.isinf(y) and mp.isinf(x):
        angle = mp.pi / 4 if x > 0 else 3 * mp.pi / 4
        return angle if y > 0 else -angle
    return mp.atan2(y, x)


def _mp_cbrt(x: Any) -> Any:
    """The real cube root (mpmath's is the principal, complex one, for negative x)."""
    mp = _mpmath()
    return -mp.cbrt(-x) if x < 0 else mp.cbrt(x)


_HUGE_BITS = 4096
"""Arguments above 2**_HUGE_BITS (far outside any float range) get their limit, not a long computation."""


def _mp_limited(fn: Callable[[Any], Any], limit: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`fn`, but `limit(x)` for huge finite x (mpmath's exp or sin of 2**(10**300) would not finish)."""
    mp = _mpmath()

    def limited(x: Any) -> Any:
        if mp.isfinite(x) and x != 0 and mp.mag(x) > _HUGE_BITS:
            return limit(x)
        return fn(x)

    return limited


def _mp_log1mexp(x: Any) -> Any:
    """log(1 - exp(x)) without the cancellations any precision hits: log1p(-exp(x)) below -ln 2 (at
    x = -1e237 it is a negative number below every float, -0.0 once rounded, where 1 - exp(x) rounds
    to 1), log(-expm1(x)) above (at x = -1e-300, 1 - exp(x) rounds to 0); -0.0 at -inf, as
    log1p(-0.0) is.  Above 0, NaN."""
    mp = _mpmath()
    if mp.isinf(x) and x < 0:  # the limit from below, 0 approached by negative values: -0.0 once rounded
        return -mp.ldexp(1, -(2**20))
    if x < -mp.log(2):
        return mp.log1p(-mp.exp(x))
    return mp.log(-mp.expm1(x))


def _mp_erfc(x: Any) -> Any:
    """erfc(x); beyond 2**500, where mpmath's erfc overflows a float inside, its asymptotic series.

    exp(-x**2) / (x sqrt(pi)) * (1 - 1 / (2 x**2)) is off by 3 / (4 x**4) of itself there: < 1e-600.
    """
    mp = _mpmath()
    if mp.isfinite(x) and x > 0 and mp.mag(x) > 500:
        return mp.exp(-x * x) / (x * mp.sqrt(mp.pi)) * (1 - 1 / (2 * x * x))
    return mp.erfc(x)


def _mp_extremum(pick: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    mp = _mpmath()
    return lambda a, b: mp.nan if mp.isnan(a) or mp.isnan(b) else pick(a, b)


def _mp_elementwise(kind: type) -> Callable[..., Any] | None:
    """The mpmath form of an elementwise op class (None: numpy's object loops already do it)."""
    mp = _mpmath()
    table = {
        ops.TrueDiv: _mp_div,
        ops.Reciprocal: lambda x: _mp_div(mp.mpf(1), x),
        ops.Pow: _mp_real(_mp_pow),
        ops.Maximum: _mp_extremum(max),
        ops.Minimum: _mp_extremum(min),
        ops.Exp: _mp_real(_mp_limited(mp.exp, lambda x: mp.inf if x > 0 else mp.mpf(0))),
        ops.Log: _mp_real(mp.log),
        ops.Log1p: _mp_real(mp.log1p),
        ops.Expm1: _mp_real(_mp_limited(mp.expm1, lambda x: mp.inf if x > 0 else mp.mpf(-1))),
        ops.Sqrt: _mp_real(mp.sqrt),
        ops.Sin: _mp_real(_mp_limited(mp.sin, lambda x: mp.nan)),
        ops.Cos: _mp_real(_mp_limited(mp.cos, lambda x: mp.nan)),
        ops.Tanh: _mp_real(_mp_limited(mp.tanh, lambda x: mp.mpf(mp.sign(x)))),
        ops.Tan: _mp_real(_mp_limited(mp.tan, lambda x: mp.nan)),
        ops.Asin: _mp_real(mp.asin),
        ops.Acos: _mp_real(mp.acos),
        ops.Atan: _mp_real(_mp_limited(mp.atan, lambda x: mp.sign(x) * mp.pi / 2)),
        ops.Sinh: _mp_real(_mp_limited(mp.sinh, lambda x: mp.sign(x) * mp.inf)),
        ops.Cosh: _mp_real(_mp_limited(mp.cosh, lambda x: mp.inf)),
        ops.Cbrt: _mp_real(_mp_cbrt),
        ops.Hypot: _mp_real(_mp_hypot),
        ops.Atan2: _mp_real(_mp_atan2),
        ops.Fma: _mp_real(lambda a, b, c: mp.fadd(mp.fmul(a, b, exact=True), c)),
        ops.Sqr: lambda x: x * x,
        ops.Sigmoid: _mp_real(
            _mp_limited(lambda x: 1 / (1 + mp.exp(-x)), lambda x: mp.mpf(1) if x > 0 else mp.mpf(0))
        ),
        ops.Erf: _mp_real(_mp_limited(mp.erf, lambda x: mp.mpf(mp.sign(x)))),
        ops.Erfc: _mp_real(_mp_limited(_mp_erfc, lambda x: mp.mpf(0) if x > 0 else mp.mpf(2))),
        ops.Log1mexp: _mp_real(
            _mp_limited(_mp_log1mexp, lambda x: mp.nan if x > 0 else -mp.ldexp(1, -(2**20)))
        ),
        ops.Softplus: _mp_real(
            _mp_limited(lambda x: mp.log1p(mp.exp(x)), lambda x: x if x > 0 else mp.mpf(0))
        ),
    }
    return table.get(kind)


def _mp_map(fn: Callable[..., Any], *arrays: Any) -> np.ndarray:
    return np.asarray(np.frompyfunc(fn, len(arrays), 1)(*arrays), dtype=object)


def _mp_reduce_max(x: Any, axis: tuple[int, ...] | None, keepdims: bool = False) -> np.ndarray:
    x = np.asarray(x, dtype=object)  # arithmetic on a 0-d object array gives a bare mpf
    axes = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in axis)
    pick = np.frompyfunc(_mp_extremum(max), 2, 1)
    result = x
    for a in sorted(axes, reverse=True):
        if result.shape[a] == 0:
            raise ValueError("zero-size array to reduction operation maximum which has no identity")
        result = pick.reduce(result, axis=a, keepdims=keepdims)
    return np.asarray(result, dtype=object)


def _mp_node_value(op: Any, args: list[Any]) -> Any:
    """A node on object arrays of mpmath numbers."""
    mp = _mpmath()
    kind = type(op)
    fn = _mp_elementwise(kind)
    if fn is not None:
        return _mp_map(fn, *args)
    if isinstance(op, ops.Cast):
        as_float = _mp_map(lambda v: float(v), args[0]).astype(np.float64)
        return as_float if op.dtype.startswith("float") else as_float.astype(op.dtype)
    if kind in (ops.Lt, ops.Le, ops.Gt, ops.Ge, ops.Eq, ops.Neq):
        return _NODE_UFUNCS[kind](*args).astype(bool)
    if kind is ops.Fill:
        return np.array(np.broadcast_to(args[1], np.broadcast_shapes(args[0].shape, args[1].shape)))
    if kind in (ops.Sum, ops.Mean):
        total = np.sum(args[0], axis=op.axis)
        if kind is ops.Sum:
            return total
        axes = range(args[0].ndim) if op.axis is None else op.axis
        count = int(np.prod([args[0].shape[a] for a in axes]))
        return _mp_map(lambda t: _mp_div(mp.mpf(t), mp.mpf(count)), total)
    if kind is ops.Max:
        return _mp_reduce_max(args[0], op.axis)
    if kind is ops.Min:
        return np.asarray(-_mp_reduce_max(-args[0], op.axis), dtype=object)
    if kind is ops.Prod:
        return np.prod(args[0], axis=op.axis)
    if kind in (ops.Argmax, ops.Argmin):  # an index: found on the values rounded to float64
        return _REDUCTIONS[kind](_mp_map(float, args[0]).astype(np.float64), axis=op.axis)
    if kind is ops.Join:
        return np.concatenate(args, axis=op.axis)
    if kind is ops.Assert:
        return args[0]
    if kind is ops.LogSumExp:
        total = np.sum(_mp_map(_mp_elementwise(ops.Exp), args[0]), axis=op.axis)
        return _mp_map(_mp_elementwise(ops.Log), total)
    if isinstance(op, ops.Softmax):
        x = args[0]
        shifted = x - _mp_reduce_max(x, (op.axis,), keepdims=True)
        exps = _mp_map(_mp_elementwise(ops.Exp), shifted)
        total = np.sum(exps, axis=op.axis, keepdims=True)
        if isinstance(op, ops.LogSoftmax):
            return shifted - _mp_map(_mp_real(mp.log), total)
        return _mp_map(_mp_div, exps, total)
    if kind in _NODE_UFUNCS:
        return _NODE_UFUNCS[kind](*args)
    return _shape_op_value(op, args)


def _walk(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    values: Sequence[Any],
    precision: str,
    noise: np.random.Generator | None = None,
    env: dict[Variable, Any] | None = None,
) -> list[Any]:
    """The outputs of a graph on `values` by `_node_value`, node by node (no recursion over depth).

    With `noise`, every floating result moves by two ulps of its own dtype
    (and two subnormal spacings), up or down at random: a wide walk then
    shows how much the rounding the graph's dtypes imply can move its
    outputs (the slack a comparison with it allows).
    `env`, when given, receives every variable's value.
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
                    env[var] = start(var.data)
                args.append(env[var])
            for out, value in zip(node.outputs, _node_value(node, args, precision, noise)):
                if noise is not None and out.dtype.startswith("float"):
                    value = _rounding_noise(value, out.type.numpy_dtype, noise)
                env[out] = value
        return [env[v] if v in env else start(v.data) for v in outputs]


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
        mp = _mpmath()
        return _mp_map(lambda v, m, f: v + v * m + f if mp.isfinite(v) else v, value, move, floor)
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


# -- comparing -----------------------------------------------------------------------------------------

_RTOL = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-2, "longdouble": 1e-12}
_RTOL_EXTENDED = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2}


def _close(expected: np.ndarray, got: np.ndarray, slack: np.ndarray | float, rtol: float) -> np.ndarray:
    """Elementwise agreement: equal NaN/inf positions (and signs), finite values within tolerance."""
    if expected.dtype.kind != "f":
        return np.asarray(expected == got)
    with _errstate():
        e = expected.astype(np.longdouble)
        g = got.astype(np.longdouble)
        same = (e == g) | (np.isnan(e) & np.isnan(g))
        finite = np.isfinite(e) & np.isfinite(g)
        atol = float(np.finfo(expected.dtype).smallest_normal)
        near = np.abs(g - e) <= atol + rtol * np.abs(e) + slack
    return same | (finite & near)


@dataclass
class _Reference:
    """The expected outcome of one call: the outputs (or NumPy's error) and what counts as close."""

    outputs: list[np.ndarray] | _Error
    alternatives: list[list[np.ndarray]]
    slack: list[np.ndarray]
    undefined: list[np.ndarray | None]
    env: _Env


def _slack(expected: np.ndarray, alternatives: list[np.ndarray]) -> np.ndarray | float:
    """Eight times the largest finite move the rounding noise caused, per element."""
    if expected.dtype.kind != "f" or not alternatives:
        return 0.0
    with _errstate():
        e = expected.astype(np.longdouble)
        spread = np.zeros(expected.shape, dtype=np.longdouble)
        for alt in alternatives:
            move = np.abs(alt.astype(np.longdouble) - e)
            spread = np.maximum(spread, np.where(np.isfinite(move), move, 0))
        return 8 * spread  # a spread near the largest float is an infinite slack


def _all_steps(recipe: Recipe) -> Iterator[Step]:
    """The steps of `recipe` and of the recipes of its fused nodes."""
    pending = [recipe]
    while pending:
        current = pending.pop()
        for step in current.steps:
            yield step
            if step.op == "composite":
                pending.append(step.params["inner"])


def _reference(recipe: Recipe, values: dict[int, np.ndarray], seed: int) -> _Reference:
    env = _evaluate(recipe, values)
    outputs = [env.values[o] for o in recipe.outputs]
    failed = next((o for o in outputs if isinstance(o, _Error)), None)
    if failed is not None:
        return _Reference(failed, [], [], [], env)
    rng = np.random.default_rng(seed)
    alternatives = []
    for _ in range(3):
        noisy = [_evaluate(recipe, values, rng).values[o] for o in recipe.outputs]
        if not any(isinstance(v, _Error) for v in noisy):
            alternatives.append(noisy)
    slack = [_slack(out, [alt[k] for alt in alternatives]) for k, out in enumerate(outputs)]
    if any(step.op in DOT_STEPS for step in _all_steps(recipe)):
        for order in SUMMATION_ORDERS[1:]:
            with _summing(order):
                ordered = [_evaluate(recipe, values).values[o] for o in recipe.outputs]
            if not any(isinstance(v, _Error) for v in ordered):
                alternatives.append(ordered)
    undefined = [env.undefined.get(o) for o in recipe.outputs]
    return _Reference(outputs, alternatives, slack, undefined, env)


def _mismatch(reference: _Reference, k: int, got: Any) -> tuple[str, np.ndarray | None]:
    """Why output `k` is wrong ('' when right), and the mask of wrong elements when the values differ."""
    expected = reference.outputs[k]
    if type(got) is not np.ndarray:
        return f"output {k} is a {type(got).__name__}, not an ndarray", None
    if got.dtype != expected.dtype:
        return f"output {k} has dtype {got.dtype.name}, NumPy gives {expected.dtype.name}", None
    if got.shape != expected.shape:
        return f"output {k} has shape {got.shape}, NumPy gives {expected.shape}", None
    rtol = _RTOL.get(expected.dtype.name, 0.0)
    ok = _close(expected, got, reference.slack[k], rtol)
    for alt in reference.alternatives:
        ok = ok | _close(alt[k], got, reference.slack[k], rtol)
    if reference.undefined[k] is not None:
        ok = ok | reference.undefined[k]
    if ok.all():
        return "", None
    bad = ~ok
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"output {k} differs at {int(bad.sum())} of {bad.size} elements, first at {where}: "
        f"got {got[where]!r}, NumPy gives {expected[where]!r}",
        bad,
    )


def _agreeing(value: np.ndarray, wide: np.ndarray, slack: np.ndarray | float) -> np.ndarray:
    """Where `value` matches a wide value rounded to its dtype (looser than the reference check)."""
    rounded = _narrowed(wide, value.dtype)
    if value.dtype.kind != "f":
        return np.asarray(value == rounded)
    return _close(rounded, value, slack, _RTOL_EXTENDED.get(value.dtype.name, 1e-9))


def _wide_precisions() -> tuple[str | int, ...]:
    """Long double, then mpmath (no overflow or underflow at all) at growing precision when installed."""
    return ("long", *MP_BITS) if mpmath_available() else ("long",)


def _wide_close(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> bool:
    """Whether two wide values (long double or mpmath) agree to 12 digits where `mask` is set."""
    if a.dtype != object and b.dtype != object:
        return bool(np.all(_close(a, b, 0.0, 1e-12)[mask]))
    mp = _mpmath()

    def close(x: Any, y: Any) -> bool:
        x, y = mp.mpf(x), mp.mpf(y)
        if mp.isnan(x) or mp.isnan(y):
            return bool(mp.isnan(x) and mp.isnan(y))
        return bool(x == y or abs(x - y) <= abs(x) * mp.mpf("1e-12"))

    return bool(np.all(np.asarray(np.frompyfunc(close, 2, 1)(a, b), dtype=bool)[mask]))


# -- modes -----------------------------------------------------------------------------------------------


def parse_mode(spec: str) -> Mode:
    """A mode from a name (`o3`), with a linker (`fast_run:numpy`) or with extra tags (`fast_run+unsafe`)."""
    name, *tags = spec.split("+")
    name, _, linker = name.partition(":")
    if not linker and not tags:
        return get_mode(name)
    base = get_mode(name)
    query = mode_query(name)
    for tag in tags:
        query = query.including(tag)
    return Mode(linker or base.linker, query, base.db)


def _mode_text(spec: str) -> str:
    if ":" not in spec and "+" not in spec:
        return f'"{spec}"'
    name, *tags = spec.split("+")
    name, _, linker = name.partition(":")
    query = f'mode_query("{name}")' + "".join(f'.including("{t}")' for t in tags)
    return f'rw.Mode("{linker or get_mode(name).linker}", {query})'


_RULES: dict[str, Rule] = {}


def _rule(name: str) -> Rule | None:
    if not _RULES:
        _RULES.update((r.name, r) for r in catalogue())
    return _RULES.get(name)


def _declared_precision(rule: Rule) -> str | None:
    """What the rule declares it preserves (``"reassociates"``: exact over the reals, not in floats).

    The catalogue calls it `Rule.semantics` (docs/rule-safety.md); `precision` is read when absent.
    """
    return getattr(rule, "semantics", None) or getattr(rule, "precision", None)


def _rules_applied(profile: Any) -> set[str]:
    """The names of the rewriters that applied somewhere in a (nested) rewrite profile."""
    names: set[str] = set()
    stack = [profile]
    while stack:
        p = stack.pop()
        if isinstance(p, SequenceProfile):
            stack.extend(step[4] for step in p.steps)
        elif isinstance(p, EquilibriumProfile):
            names.update(n for n, s in {**p.rules, **p.graph_rewriters}.items() if s.applied)
    return names


class FuzzTimeout(BudgetExceeded):
    """A compilation or a call took longer than the fuzzer allows (a hang)."""


def _deadline(seconds: float, what: str) -> contextlib.AbstractContextManager:
    """Stop the block with FuzzTimeout naming `what` after `seconds` (`relation_budget`, the one budget the
    rule runs inside are under too, so they nest: the block's deadline is not taken for a rule's)."""
    if seconds <= 0:
        return contextlib.nullcontext()
    return relation_budget(what, max_steps=None, max_seconds=seconds, error=FuzzTimeout)


# -- one graph, every mode ------------------------------------------------------------------------------


@dataclass
class Finding:
    """One difference between a mode and the reference, on one input set."""

    category: str
    detail: str
    input_set: int
    expected: str = ""
    got: str = ""
    hint: str = ""


def _describe_outputs(values: Any) -> str:
    if isinstance(values, _Error):
        return f"raises {values.describe()}"
    with np.printoptions(floatmode="unique", threshold=50):
        return repr(values)


_IGNORED_WARNINGS = (RuntimeWarning,)


class _Case:
    """A recipe built into a graph, with its input sets and the reference outcome on each."""

    def __init__(self, recipe: Recipe, input_sets: list[dict[int, np.ndarray]], seed: int, timeout: float):
        self.recipe = recipe
        self.input_sets = input_sets
        self.timeout = timeout
        self.variables = recipe.build()
        self.inputs = [self.variables[i] for i in recipe.inputs]
        self.outputs = [self.variables[o] for o in recipe.outputs]
        self.references = [_reference(recipe, values, seed + k) for k, values in enumerate(input_sets)]
        self._wide: dict[tuple[int, str | int], list[Any] | _Error] = {}

    def arguments(self, k: int) -> list[np.ndarray]:
        return [self.input_sets[k][i] for i in self.recipe.inputs]

    def type_findings(self) -> list[tuple[int, Finding]]:
        """The first step whose static type (as the constructors inferred it) is not what it computes."""
        for k, reference in enumerate(self.references):
            for i, value in reference.env.values.items():
                if isinstance(value, _Error) or self.recipe.steps[i].kind == "input":
                    continue
                problem = _type_problem(self.variables[i], value)
                if problem is not None:
                    name = self.recipe.names()[i]
                    return [(i, Finding("types", f"{name} = {self.variables[i]}: {problem}", k))]
        return []

    def wide(self, k: int, precision: str | int) -> tuple[list[Any], list[np.ndarray]] | _Error:
        """The original graph's outputs on input set `k` in a wide precision (`_wide_walk`), and their slack.

        The slack is the spread of two more walks with rounding noise at each
        op's own dtype: a float16 intermediate makes a float64 output only as
        exact as float16 allows, even where the reference overflowed.
        """
        if (k, precision) not in self._wide:
            try:
                walk = functools.partial(_wide_walk, self.inputs, self.outputs, self.arguments(k), precision)
                clean = walk()
                rng = np.random.default_rng(k)
                noisy = [walk(noise=rng) for _ in range(2)]
                spread = [_wide_spread(c, [n[j] for n in noisy]) for j, c in enumerate(clean)]
                self._wide[k, precision] = clean, spread
            except Exception as exc:
                self._wide[k, precision] = _Error(exc)
        return self._wide[k, precision]

    def compile(self, mode: Mode) -> tuple[Any, list[str]]:
        """`function` under `mode`, and the messages of the warnings it gave."""
        outputs = self.outputs[0] if self.recipe.single else list(self.outputs)
        with warnings.catch_warnings(record=True) as caught, _deadline(self.timeout, f"compiling in {mode}"):
            warnings.simplefilter("always")
            f = rw.function(list(self.inputs), outputs, mode=mode)
        messages = [str(w.message) for w in caught if not issubclass(w.category, _IGNORED_WARNINGS)]
        return f, messages

    def rules_applied(self, mode: Mode) -> list[Rule]:
        """The catalogue rules that fire when `mode` rewrites this graph (the rewrite is deterministic)."""
        outputs = self.outputs[0] if self.recipe.single else list(self.outputs)
        fgraph, _ = function_graph(list(self.inputs), outputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            profile = (mode.db or optdb).query(mode.query).rewrite(fgraph)
        return [r for r in map(_rule, sorted(_rules_applied(profile))) if r is not None]

    def check(self, mode: Mode, sets: Sequence[int] | None = None) -> list[Finding]:
        """Every difference between `mode` and the reference, classified."""
        try:
            f, messages = self.compile(mode)
        except Exception as exc:
            return [Finding("crashed", f"compiling raised {type(exc).__name__}: {_short(exc)}", 0)]
        findings = [
            Finding("warned", f"compiling warned: {_short(m)}", 0) for m in messages if _is_internal_error(m)
        ]
        try:
            f.fgraph.check_integrity()
        except Exception as exc:
            findings.append(
                Finding("invalid", f"the rewritten graph fails check_integrity: {_short(exc)}", 0)
            )
        kept: list[tuple[int, list[np.ndarray], list[np.ndarray]]] = []
        for k in range(len(self.input_sets)) if sets is None else sets:
            finding = self._call(f, mode, k, kept)
            if finding is not None:
                findings.append(finding)
        for k, got, copies in kept:  # a later call must not change an earlier call's results
            if not all(np.array_equal(a, b, equal_nan=a.dtype.kind == "f") for a, b in zip(got, copies)):
                findings.append(
                    Finding("wrong", "a later call changed the arrays an earlier call returned", k)
                )
                break
        return findings

    def _call(self, f: Any, mode: Mode, k: int, kept: list) -> Finding | None:
        reference = self.references[k]
        arguments = self.arguments(k)
        originals = [a.copy() for a in arguments]
        try:
            with _errstate(), _deadline(self.timeout, f"calling the {mode} function"):
                got = f(*arguments)
        except Exception as exc:
            if isinstance(reference.outputs, _Error):
                return None
            return Finding(
                "crashed",
                f"the call raised {type(exc).__name__}: {_short(exc)}",
                k,
                _describe_outputs(reference.outputs),
                f"raises {type(exc).__name__}: {_short(exc)}",
            )
        got = [got] if self.recipe.single else list(got)
        for a, b in zip(arguments, originals):
            if not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                return Finding("wrong", "the call modified an input array", k, "", _describe_outputs(got))
        shared = [
            (j, i)
            for j, out in enumerate(got)
            for i, a in enumerate(arguments)
            if isinstance(out, np.ndarray) and np.shares_memory(out, a)
        ]
        if shared:
            j, i = shared[0]
            return Finding("wrong", f"output {j} shares memory with input {i}", k, "", _describe_outputs(got))
        if isinstance(reference.outputs, _Error):
            if self._declared(mode, k, None, None):
                return Finding("declared", "a value where NumPy raises", k)
            if self._refines(f, k, got):
                return Finding("declared", "a rewrite removed the computation that raises", k)
            return Finding(
                "wrong",
                f"returned a value where NumPy raises {type(reference.outputs.error).__name__}",
                k,
                _describe_outputs(reference.outputs),
                _describe_outputs(got),
            )
        kept.append((k, got, [np.array(g, copy=True) for g in got]))
        found: list[Finding] = []
        for j in range(len(got)):  # every output: an improvement on one must not hide a bug on another
            problem, bad = _mismatch(reference, j, got[j])
            if not problem:
                continue
            category = "wrong"
            if bad is not None:
                try:
                    with _deadline(self.timeout, "classifying a difference"):
                        category = self._classify(f, mode, k, j, got[j], bad)
                except FuzzTimeout:
                    problem += " (the fuzzer's classification timed out)"
            hint = self._hint(f, k) if category == "wrong" else ""
            failed = [w for (i, _), w in self._wide.items() if i == k and isinstance(w, _Error)]
            if (
                category == "wrong" and failed
            ):  # the arbiter could not run: say so, it may be the fuzzer's fault
                hint += f"; an extended-precision walk failed: {_short(failed[0].describe(), 200)}"
            expected, shown = _describe_outputs(reference.outputs), _describe_outputs(got)
            found.append(Finding(category, problem, k, expected, shown, hint))
        return next((f for f in found if f.category in BUG_CATEGORIES), found[0] if found else None)

    def _classify(self, f: Any, mode: Mode, k: int, j: int, got: np.ndarray, bad: np.ndarray) -> str:
        """improvement, declared or wrong, for the elements `bad` of output `j` on input set `k`."""
        pending = bad
        widest = None
        for precision in _wide_precisions():
            wide = self.wide(k, precision)
            if isinstance(wide, _Error):
                continue
            slack = np.maximum(self.references[k].slack[j], wide[1][j])
            pending = pending & ~_agreeing(got, wide[0][j], slack)
            if not pending.any():
                return "improvement"
            widest = precision, wide[0][j], slack
        if widest is not None and self._beyond_range(f, mode, k, j, got, pending, *widest):
            return "improvement"
        if self._declared(mode, k, f, (j, bad, got)):
            return "declared"
        return "wrong"

    def _beyond_range(
        self,
        f: Any,
        mode: Mode,
        k: int,
        j: int,
        got: np.ndarray,
        pending: np.ndarray,
        precision: str | int,
        wide: Any,
        slack: np.ndarray,
    ) -> bool:
        """Whether the elements no wide walk settles are stabilizations no finite precision can confirm.

        That is: the widest walk of the original graph overflows there to an
        infinity of the sign of the mode's finite value, or, when a
        stabilizing rule fired, gives NaN where the mode gives a finite value (a
        cancellation such as 1 - sigmoid(x) at x = 1e19 needs more bits than
        any walk has, and log1p(-1) = -inf then makes sin of it NaN); and the
        same walk of the rewritten graph gives the mode's value (so the backend
        is right, and the rewrite is the one that is checked everywhere else).
        Or, after a stabilization, a later op hid the infinity
        (`_decided_past_an_infinity`).
        """
        stabilized = any(_declared_precision(r) == "stabilizes" for r in self.rules_applied(mode))
        if got.dtype.kind == "f":
            rounded = _narrowed(wide, got.dtype)
            with _errstate():
                unsettled = np.isinf(rounded) & np.isfinite(got) & (np.sign(rounded) == np.sign(got))
                if stabilized:
                    unsettled |= np.isnan(rounded) & np.isfinite(got)
            if np.all(unsettled[pending]):
                try:
                    rewritten = _wide_walk(f.fgraph.inputs, f.fgraph.outputs, self.arguments(k), precision)
                except Exception:
                    return False
                return bool(np.all(_agreeing(got, rewritten[j], slack)[pending]))
        return stabilized and self._decided_past_an_infinity(f, k, j, got, pending, precision, slack)

    def _decided_past_an_infinity(
        self,
        f: Any,
        k: int,
        j: int,
        got: np.ndarray,
        pending: np.ndarray,
        precision: str | int,
        slack: np.ndarray | float,
    ) -> bool:
        """After a stabilization: whether the elements `pending` of output `j` are computed, in the widest
        walk of the original from finite inputs, from an infinity or NaN that a later op hides (a
        comparison, or 1 / x: log1p(expm1(-1e253)) is -inf at any precision, x is not; log1p(-sigmoid(x))
        is -inf at x = 1e269, -softplus(x) is not), and in the same walk of the rewritten graph from no
        such value, that walk giving the mode's value there."""
        if not all(np.all(np.isfinite(np.asarray(v, dtype=np.float64))) for v in self.arguments(k)):
            return False
        values: dict[Variable, Any] = {}
        try:
            _wide_walk(self.inputs, [self.outputs[j]], self.arguments(k), precision, env=values)
            rewritten_values: dict[Variable, Any] = {}
            rewritten = _wide_walk(
                f.fgraph.inputs, [f.fgraph.outputs[j]], self.arguments(k), precision, env=rewritten_values
            )[0]
        except Exception:
            return False

        before = _non_finite_marks(self.inputs, self.outputs[j], values)
        after = _non_finite_marks(f.fgraph.inputs, f.fgraph.outputs[j], rewritten_values)
        if not np.all(before[pending]) or np.any(after[pending]):
            return False
        return bool(np.all(_agreeing(got, np.asarray(rewritten), slack)[pending]))

    def _declared(self, mode: Mode, k: int, f: Any, where: tuple[int, np.ndarray, np.ndarray] | None) -> bool:
        """Whether an unsafe rule fired, or one that changes rounding, exact in a wide walk here, and the
        mode's value is the rewritten graph's (docs/modes.md, "Reassociation").

        A reassociating or stabilizing rule is right over the reals and moves
        where rounding, overflow and underflow happen (``log(exp(x) * x)`` at
        x = -1e250 underflows to -0.0 and gives -inf where the exact value,
        and the original's 0 * -inf, are NaN).  The rewrite is exact here when
        a wide walk of the rewritten graph agrees with one of the original; or,
        where no walk of the original can settle (a cancellation no precision
        holds), with one of the graph the mode makes without those rules, when
        that graph is itself no bug here: blame splits rule class by rule class.
        Then only the order of the floating-point operations may explain the
        difference: the mode's value (`where`'s third item) must be what the
        rewritten graph gives walked in its own dtypes, or a backend computing
        garbage after a reordering would pass for one.
        """
        rules = self.rules_applied(mode)
        if any("unsafe" in r.tags for r in rules):
            return True
        moving = [r.name for r in rules if _declared_precision(r) in ("reassociates", "stabilizes")]
        if where is None or not moving:
            return False
        j, bad, got = where
        if not self._computes_rewritten(f, k, j, got, bad):
            return False
        if self._wide_agrees(f, k, j, bad, lambda precision: self.wide(k, precision)):
            return True
        reassociating = [r.name for r in rules if _declared_precision(r) == "reassociates"]
        if not reassociating:
            return False
        without = Mode(mode.linker, mode.query.excluding(*reassociating), mode.db)
        try:
            g, _ = self.compile(without)
        except Exception:
            return False
        if any(x.category in BUG_CATEGORIES for x in self.check(without, [k])):
            return False
        return self._wide_agrees(
            f,
            k,
            j,
            bad,
            lambda precision: [_wide_walk(g.fgraph.inputs, g.fgraph.outputs, self.arguments(k), precision)],
        )

    def _computes_rewritten(self, f: Any, k: int, j: int, got: np.ndarray, bad: np.ndarray) -> bool:
        """Whether output `j` of the mode is, at `bad`, what a walk of the rewritten graph in its own
        dtypes gives (within the spread rounding noise gives that walk, as for the reference)."""
        fgraph, arguments = f.fgraph, self.arguments(k)
        try:
            native = np.asarray(_walk(fgraph.inputs, fgraph.outputs, arguments, "native")[j])
            rng = np.random.default_rng(k)
            noisy = [
                np.asarray(_walk(fgraph.inputs, fgraph.outputs, arguments, "native", noise=rng)[j])
                for _ in range(3)
            ]
        except Exception:
            return False
        if native.shape != got.shape or native.dtype != got.dtype:
            return False
        close = _close(native, got, _slack(native, noisy), _RTOL.get(native.dtype.name, 0.0))
        return bool(np.all(close[bad]))

    def _wide_agrees(
        self, f: Any, k: int, j: int, bad: np.ndarray, other: Callable[[str | int], Any]
    ) -> bool:
        """Whether in some wide precision the rewritten graph's output `j` agrees with `other`'s at `bad`."""
        for precision in _wide_precisions():
            try:
                theirs = other(precision)
                rewritten = _wide_walk(f.fgraph.inputs, f.fgraph.outputs, self.arguments(k), precision)
            except Exception:
                continue
            if not isinstance(theirs, _Error) and _wide_close(theirs[0][j], rewritten[j], bad):
                return True
        return False

    def _refines(self, f: Any, k: int, got: Sequence[Any]) -> bool:
        """Whether the rewritten graph no longer holds the computation that makes the original raise.

        Rewriting may refine a graph (docs/rule-safety.md): a rule that drops
        a computation whose value is not needed drops its error too, so a
        value where NumPy raises is declared when a plain walk of the
        rewritten graph gives the mode's value; a backend that returns a value
        where its own graph raises is still a bug.  A rule's values are
        checked on every input set where the original does not raise.
        """
        try:
            values = _walk(f.fgraph.inputs, f.fgraph.outputs, self.arguments(k), "native")
        except Exception:
            return False
        pairs = [(np.asarray(v), np.asarray(g)) for v, g in zip(values, got)]
        return len(pairs) == len(got) and all(
            v.shape == g.shape and np.allclose(v, g, equal_nan=True) for v, g in pairs
        )

    def _hint(self, f: Any, k: int) -> str:
        """Where the wrong value comes from: the rewritten graph itself, or the backend running it."""
        fgraph = f.fgraph
        try:
            for var, value in _walk_all(fgraph.inputs, fgraph.outputs, self.arguments(k)):
                problem = _type_problem(var, value)
                if problem is not None:
                    return f"rewritten graph: {var.owner.op} has {problem}"
            values = _walk(fgraph.inputs, fgraph.outputs, self.arguments(k), "native")
        except Exception as exc:
            return f"the reference cannot evaluate the rewritten graph ({type(exc).__name__}: {_short(exc)})"
        reference = self.references[k]
        right = all(not _mismatch(reference, j, np.asarray(v))[0] for j, v in enumerate(values))
        if right:
            return "the rewritten graph is right under the reference: the linker or a kernel is wrong"
        return "the rewritten graph computes the wrong value: a rewrite is wrong"


def _short(item: Any, limit: int = 300) -> str:
    text = " ".join(str(item).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_internal_error(message: str) -> bool:
    """A warning that reports an exception relwrite swallowed (a rewriter raised, a C module failed)."""
    return " raised " in message or "failed" in message


def check(
    recipe: Recipe, input_sets: list[dict[int, np.ndarray]], mode: Mode, seed: int = 0, timeout: float = 120.0
) -> list[Finding]:
    """Every finding of `mode` on `recipe`; each input set maps the recipe's input steps to their values."""
    return _Case(recipe, input_sets, seed, timeout).check(mode)


# -- drawing graphs -----------------------------------------------------------------------------------


class _Drawer:
    """Draws one recipe, step by step, choosing each call's operands among the values so far.

    Every value's concrete shape comes from evaluating the reference on probe
    inputs as the recipe grows (or from its static shape where NumPy raises),
    so operands are chosen to broadcast and multiply as NumPy allows.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        max_inputs: int = 6,
        side: np.random.Generator | None = None,
        elementary: np.random.Generator | None = None,
        fused: np.random.Generator | None = None,
    ):
        self.rng = rng
        self.side = side
        self.elementary = elementary
        self.fused = fused
        self.max_inputs = max_inputs
        self.lengths = [
            int(n) for n in rng.choice([0, 1, 2, 3, 4, 5], size=3, p=[0.06, 0.14, 0.25, 0.25, 0.15, 0.15])
        ]
        self.steps: list[Step] = []
        self.variables: list[Variable] = []
        self.shapes: list[tuple[int, ...]] = []
        self.probes: list[Any] = []
        self.rejected = 0
        self.crash: tuple[Step, BaseException] | None = None

    # -- the pool of values
    def add(self, step: Step, probe: Any = None) -> int | None:
        """Append `step` if the constructors accept it (a refusal is counted; any other error is a crash)."""
        args = [self.variables[a.index] if isinstance(a, Ref) else a for a in step.args]
        try:
            if step.kind == "input":
                p = step.params
                var = rw.tensor(p["name"], dtype=p["dtype"], shape=p["shape"])
            elif step.kind == "constant":
                var = rw.constant(step.params["value"], dtype=step.params["dtype"])
                probe = np.asarray(step.params["value"], dtype=step.params["dtype"])
            else:
                var = _CTORS[step.op].build(args, step.params)
        except (TypeError, ValueError, OverflowError, IndexError):  # IndexError: a literal index the
            self.rejected += 1  # static shape rules out, refused as NumPy refuses it
            return None
        except Exception as exc:
            if self.crash is None:
                self.crash = (step, exc)
            return None
        if not isinstance(var, Variable):
            return None
        if step.kind == "call":
            probe = self._probe(step)
        if probe is not None:
            shape = probe.shape
        elif None not in var.type.shape:
            shape = var.type.shape
        else:
            return None
        self.steps.append(step)
        self.variables.append(var)
        self.shapes.append(tuple(shape))
        self.probes.append(probe)
        return len(self.steps) - 1

    def _probe(self, step: Step) -> np.ndarray | None:
        args = [self.probes[a.index] if isinstance(a, Ref) else a for a in step.args]
        if any(a is None for a in args):
            return None
        try:
            with _errstate():
                return np.asarray(_CTORS[step.op].ref(args, step.params))
        except Exception:
            return None

    def pick(self, pred: Callable[[int], bool] = lambda i: True) -> int | None:
        """A value satisfying `pred`, biased to recent ones (older ones are picked again: shared nodes)."""
        found = [i for i in range(len(self.steps)) if pred(i)]
        if not found:
            return None
        weights = np.arange(1, len(found) + 1, dtype=float) ** 1.5
        return found[int(self.rng.choice(len(found), p=weights / weights.sum()))]

    def operand(self, pred: Callable[[int], bool], dtype: str | None, shape: tuple[int, ...]) -> int | None:
        """A value satisfying `pred` or, sometimes (always when none does), a new input of `shape`."""
        found = self.pick(pred)
        if found is not None and self.rng.random() < 0.8:
            return found
        fresh = self.new_input(dtype, shape)
        return fresh if fresh is not None else found

    def dtype(self, i: int) -> str:
        return self.variables[i].dtype

    def broadcasts(self, shape: tuple[int, ...]) -> Callable[[int], bool]:
        def pred(i: int) -> bool:
            try:
                np.broadcast_shapes(shape, self.shapes[i])
            except ValueError:
                return False
            return True

        return pred

    # -- random pieces
    def random_dtype(self, choices: Sequence[str] | None = None) -> str:
        if choices is None:
            return str(self.rng.choice(_DTYPES, p=_DTYPE_WEIGHTS))
        return str(self.rng.choice(list(choices)))

    def length(self) -> int:
        return int(self.rng.choice(self.lengths))

    def random_shape(self, ndim: int | None = None) -> tuple[int, ...]:
        if ndim is None:
            ndim = int(self.rng.choice([0, 1, 2], p=[0.25, 0.4, 0.35]))
        return tuple(1 if self.rng.random() < 0.15 else self.length() for _ in range(ndim))

    def compatible_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A random shape that broadcasts with `shape`."""
        ndim = int(self.rng.integers(0, 3))
        out = []
        for axis in range(-ndim, 0):
            if -axis <= len(shape):
                out.append(1 if self.rng.random() < 0.3 else shape[axis])
            else:
                out.append(self.length())
        return tuple(out)

    def literal(self, near: str | None = None) -> Any:
        roll = self.rng.random()
        if near is not None and np.dtype(near).kind in "iub" and roll < 0.6:
            return int(self.rng.choice(_LITERAL_INTS)) * (1 if self.rng.random() < 0.8 else -1)
        if roll < 0.08:
            return bool(self.rng.random() < 0.5)
        if roll < 0.35:
            return int(self.rng.choice(_LITERAL_INTS))
        return float(self.rng.choice(_LITERAL_FLOATS))

    def new_input(self, dtype: str | None = None, shape: tuple[int, ...] | None = None) -> int | None:
        count = sum(s.kind == "input" for s in self.steps)
        if count >= self.max_inputs:
            return None
        dtype = dtype or self.random_dtype()
        shape = self.random_shape() if shape is None else shape
        static = tuple(n if self.rng.random() < (0.3 if n == 0 else 0.5) else None for n in shape)
        probe = _draw_array(self.rng, np.dtype(dtype), shape, edge=0.0)
        return self.add(Step("input", params={"name": f"x{count}", "dtype": dtype, "shape": static}), probe)

    def new_constant(self) -> int | None:
        dtype = self.random_dtype()
        shape = self.random_shape()
        value: Any = _draw_array(self.rng, np.dtype(dtype), shape, edge=0.5)
        given: str | None = None
        if not shape and self.rng.random() < 0.5:
            value = value.item()
            given = dtype if self.rng.random() < 0.5 else None
        return self.add(Step("constant", params={"value": value, "dtype": given}))

    # -- calls
    def draw_call(self) -> int | None:
        kinds = list(_CALL_WEIGHTS)
        weights = np.array(list(_CALL_WEIGHTS.values()), dtype=float)
        kind = kinds[int(self.rng.choice(len(kinds), p=weights / weights.sum()))]
        return getattr(self, f"call_{kind}")()

    def call_binary(self) -> int | None:
        a = self.pick()
        if a is None:
            return None
        name = str(self.rng.choice(list(_BINARY)))
        symbol = _BINARY[name][1]
        name = self.elementary_stand_in(name, _ELEMENTARY_BINARY)
        if self.rng.random() < 0.25:
            other: Any = self.literal(self.dtype(a))
        else:
            b = self.operand(self.broadcasts(self.shapes[a]), None, self.compatible_shape(self.shapes[a]))
            if b is None:
                return None
            other = Ref(b)
        args = (Ref(a), other) if self.rng.random() < 0.5 else (other, Ref(a))
        op = name
        if (
            symbol is not None
            and self.rng.random() < 0.5
            and (isinstance(args[0], Ref) or symbol in _ARITHMETIC)
        ):
            op = f"op{symbol}"
        return self.add(Step("call", op, args))

    def call_variadic(self) -> int | None:
        first = self.pick()
        if first is None:
            return None
        chosen = [first]
        shape = self.shapes[first]
        for _ in range(int(self.rng.integers(2, 4))):
            nxt = self.operand(self.broadcasts(shape), None, self.compatible_shape(shape))
            if nxt is None:
                return None
            chosen.append(nxt)
            shape = np.broadcast_shapes(shape, self.shapes[nxt])
        name = "add" if self.rng.random() < 0.5 else "mul"
        if len(chosen) == 3 and self.fused is not None and self.fused.random() < 0.3:
            name = "fma"  # from a third side stream: every other draw stays as it was
        return self.add(Step("call", name, tuple(Ref(i) for i in chosen)))

    def call_unary(self) -> int | None:
        a = self.pick()
        if a is None:
            return None
        name = str(self.rng.choice([*_UNARY, "op-x", "op-abs"]))
        if self.side is not None and name in _SPECIAL_STANDS_IN_FOR and self.side.random() < 0.3:
            name = str(self.side.choice(list(_SPECIAL_UNARY)))
        name = self.elementary_stand_in(name, _ELEMENTARY_UNARY)
        return self.add(Step("call", name, (Ref(a),)))

    def elementary_stand_in(self, name: str, table: dict[str, Any]) -> str:
        """`name`, or now and then an elementary function of `table` in its place."""
        if (
            self.elementary is not None
            and name in _ELEMENTARY_STANDS_IN_FOR
            and self.elementary.random() < 0.5
        ):
            return str(self.elementary.choice(list(table)))
        return name

    def call_switch(self) -> int | None:
        cond = self.operand(lambda i: self.dtype(i) == "bool", "bool", self.random_shape())
        if cond is None:
            return None
        shape = self.shapes[cond]
        args: list[Any] = [Ref(cond)]
        for _ in range(2):
            if self.rng.random() < 0.25:
                args.append(self.literal())
                continue
            b = self.operand(self.broadcasts(shape), None, self.compatible_shape(shape))
            if b is None:
                return None
            args.append(Ref(b))
            shape = np.broadcast_shapes(shape, self.shapes[b])
        return self.add(Step("call", "switch", tuple(args)))

    def call_fill(self) -> int | None:
        model = self.pick()
        if model is None:
            return None
        roll = self.rng.random()
        if roll < 0.5:
            return self.add(Step("call", "ones_like" if roll < 0.25 else "zeros_like", (Ref(model),)))
        if roll < 0.75:
            return self.add(Step("call", "fill", (Ref(model), self.literal(self.dtype(model)))))
        shape = self.shapes[model]
        value = self.operand(self.broadcasts(shape), None, self.compatible_shape(shape))
        return None if value is None else self.add(Step("call", "fill", (Ref(model), Ref(value))))

    def call_cast(self) -> int | None:
        a = self.pick()
        if a is None:
            return None
        op = "cast" if self.rng.random() < 0.5 else "astype"
        return self.add(Step("call", op, (Ref(a),), {"dtype": self.random_dtype()}))

    def call_reduce(self) -> int | None:
        a = self.pick(lambda i: len(self.shapes[i]) > 0) or self.pick()
        if a is None:
            return None
        ndim = len(self.shapes[a])
        roll = self.rng.random()
        if roll < 0.3 or ndim == 0:
            axis: Any = None
        elif roll < 0.75:
            axis = int(self.rng.integers(-ndim, ndim))
        else:
            count = int(self.rng.integers(1, ndim + 1))
            axis = tuple(int(x) for x in self.rng.choice(ndim, size=count, replace=False))
        name = str(self.rng.choice(["sum", "mean", "max", "min", "prod", "argmax", "argmin", "logsumexp"]))
        if name in ("argmax", "argmin") and isinstance(axis, tuple):
            axis = axis[0]
        op = name if self.rng.random() < 0.6 or name == "logsumexp" else f".{name}"
        return self.add(Step("call", op, (Ref(a),), {"axis": axis}))

    def call_assert(self) -> int | None:
        """A value checked against a condition that holds: a True constant, or x == x on integers."""
        a = self.pick()
        if a is None:
            return None
        if self.dtype(a).startswith(("int", "uint", "bool")) and self.rng.random() < 0.5:
            condition = self.add(Step("call", "eq", (Ref(a), Ref(a))))
            return self.add(Step("call", "assert_op", (Ref(a), Ref(condition))))
        return self.add(Step("call", "assert_op", (Ref(a), True)))

    def call_join(self) -> int | None:
        """concatenate (along an axis, other lengths equal) or stack (equal shapes) of 2-3 operands."""
        first = self.pick(lambda i: len(self.shapes[i]) > 0)
        if first is None:
            return None
        shape = self.shapes[first]
        stacking = self.rng.random() < 0.3
        axis = int(self.rng.integers(-len(shape) - stacking, len(shape) + stacking))
        along = axis % (len(shape) + stacking)
        operands = [first]
        for _ in range(int(self.rng.integers(1, 3))):
            wanted = (
                shape if stacking else tuple(self.length() if d == along else n for d, n in enumerate(shape))
            )
            fits = (
                (lambda i: self.shapes[i] == shape)
                if stacking
                else (
                    lambda i, s=shape: (
                        len(self.shapes[i]) == len(s)
                        and all(n == m for d, (n, m) in enumerate(zip(self.shapes[i], s)) if d != along)
                    )
                )
            )
            found = self.operand(fits, None, wanted)
            if found is None:
                return None
            operands.append(found)
        name = "stack" if stacking else "concatenate"
        return self.add(Step("call", name, tuple(Ref(i) for i in operands), {"axis": axis}))

    def call_softmax(self) -> int | None:
        a = self.operand(
            lambda i: len(self.shapes[i]) > 0, None, self.random_shape(int(self.rng.integers(1, 3)))
        )
        if a is None or not self.shapes[a]:
            return None
        ndim = len(self.shapes[a])
        name = "softmax" if self.rng.random() < 0.5 else "log_softmax"
        return self.add(Step("call", name, (Ref(a),), {"axis": int(self.rng.integers(-ndim, ndim))}))

    def call_dot(self) -> int | None:
        x = self.operand(
            lambda i: len(self.shapes[i]) in (1, 2), None, self.random_shape(int(self.rng.integers(1, 3)))
        )
        if x is None or len(self.shapes[x]) not in (1, 2):
            return None
        inner = self.shapes[x][-1]
        y_shape = (inner,) if self.rng.random() < 0.4 else (inner, self.length())
        y = self.operand(
            lambda i: len(self.shapes[i]) in (1, 2) and self.shapes[i][0] == inner, None, y_shape
        )
        if y is None or len(self.shapes[y]) not in (1, 2) or self.shapes[y][0] != inner:
            return None
        return self.add(Step("call", str(self.rng.choice(["dot", "op@", ".dot"])), (Ref(x), Ref(y))))

    def blas_operand(self, dtype: str, shape: tuple[int, ...]) -> Ref | None:
        found = self.operand(lambda i: self.dtype(i) == dtype and self.shapes[i] == shape, dtype, shape)
        return None if found is None else Ref(found)

    def blas_scalar(self, dtype: str) -> Ref | float | None:
        if self.rng.random() < 0.4:
            return float(self.rng.choice([0.0, 1.0, -1.0, 0.5, 2.0, 1e4, np.nan, np.inf, 1e-300]))
        return self.blas_operand(dtype, ())

    def call_blas(self) -> int | None:
        dtype = str(self.rng.choice(_BLAS_DTYPES))
        n, k, m = self.length(), self.length(), self.length()

        def loose(shape: tuple[int, ...]) -> tuple[int, ...]:  # an operand that broadcasts to `shape`
            return tuple(1 if self.rng.random() < 0.2 else d for d in shape)

        which = str(self.rng.choice(["dot22", "gemm", "gemv", "ger"]))
        if which == "dot22":
            parts = [self.blas_operand(dtype, (n, k)), self.blas_operand(dtype, (k, m))]
        elif which == "gemm":
            parts = [
                self.blas_operand(dtype, loose((n, m))),
                self.blas_scalar(dtype),
                self.blas_operand(dtype, (n, k)),
                self.blas_operand(dtype, (k, m)),
                self.blas_scalar(dtype),
            ]
        elif which == "gemv":
            parts = [
                self.blas_operand(dtype, loose((n,))),
                self.blas_scalar(dtype),
                self.blas_operand(dtype, (n, k)),
                self.blas_operand(dtype, (k,)),
                self.blas_scalar(dtype),
            ]
        else:
            parts = [
                self.blas_operand(dtype, loose((n, m))),
                self.blas_scalar(dtype),
                self.blas_operand(dtype, (n,)),
                self.blas_operand(dtype, (m,)),
            ]
        if any(p is None for p in parts):
            return None
        return self.add(Step("call", which, tuple(parts)))

    def call_shape(self) -> int | None:
        a = self.pick()
        if a is None:
            return None
        shape, static = self.shapes[a], self.variables[a].type.shape
        roll = self.rng.random()
        if roll < 0.3:
            return self.add(Step("call", "transpose" if self.rng.random() < 0.5 else ".T", (Ref(a),)))
        if roll < 0.65:
            order: list[Any] = [d for d in range(len(shape)) if static[d] != 1 or self.rng.random() < 0.5]
            self.rng.shuffle(order)
            for _ in range(int(self.rng.integers(0, 3 - len(order))) if len(order) < 2 else 0):
                order.insert(int(self.rng.integers(0, len(order) + 1)), "x")
            return self.add(Step("call", "dimshuffle", (Ref(a),), {"order": tuple(order)}))
        size = int(np.prod(shape))
        options = (
            [(size,), (1, size), (size, 1), (-1,), ()] if size == 1 else [(size,), (-1,), (1, -1), (-1, 1)]
        )
        options += [(d, size // d) for d in range(2, size) if size % d == 0]
        new = options[int(self.rng.integers(len(options)))]
        return self.add(Step("call", "reshape", (Ref(a),), {"shape": tuple(new)}))

    def call_index(self) -> int | None:
        """x[key] with ints, slices, new axes and integer lists, or inc_subtensor / set_subtensor of it."""
        a = self.pick(lambda i: len(self.shapes[i]) > 0)
        if a is None:
            return None
        key: list[Any] = []
        for n in self.shapes[a][: int(self.rng.integers(1, len(self.shapes[a]) + 1))]:
            roll = self.rng.random()
            if roll < 0.1:
                key.append(None)
            if roll < 0.35 and n > 0:
                key.append(int(self.rng.integers(-n, n)))
            elif roll < 0.85 or n == 0:
                bounds = [
                    int(self.rng.integers(-n - 1, n + 2)) if self.rng.random() < 0.5 else None for _ in "ab"
                ]
                step = [None, 1, 2, -1, -2][int(self.rng.integers(5))]
                key.append(slice(*bounds, step))
            else:
                key.append([int(k) for k in self.rng.integers(-n, n, size=int(self.rng.integers(1, 4)))])
        key_t = tuple(key)
        roll = self.rng.random()
        if roll < 0.6:
            return self.add(Step("call", "index", (Ref(a),), {"key": key_t}))
        try:
            part = np.empty(self.shapes[a])[_ref_key(key_t)].shape
        except (IndexError, ValueError):
            return None
        value: Any = self.literal() if self.rng.random() < 0.3 else None
        if value is None:
            value = self.operand(self.broadcasts(part), None, part)
            if value is None:
                return None
            value = Ref(value)
        name = "set_subtensor" if roll < 0.8 else "inc_subtensor"
        return self.add(Step("call", name, (Ref(a), value), {"key": key_t}))

    def call_length(self) -> int | None:
        """shape(x) or shape_i(x, axis) of a value (often an intermediate: shape promotion's case)."""
        a = self.pick(lambda i: len(self.shapes[i]) > 0)
        if a is None:
            return None
        if self.rng.random() < 0.5:
            return self.add(Step("call", "shape", (Ref(a),)))
        ndim = len(self.shapes[a])
        return self.add(Step("call", "shape_i", (Ref(a),), {"axis": int(self.rng.integers(-ndim, ndim))}))

    def call_alloc(self) -> int | None:
        if self.rng.random() < 0.4:
            value: Any = self.literal()
            vshape: tuple[int, ...] = ()
        else:
            found = self.pick()
            if found is None:
                return None
            value, vshape = Ref(found), self.shapes[found]
        extra = int(self.rng.integers(0, 3 - len(vshape))) if len(vshape) < 2 else 0
        shape = tuple(self.length() for _ in range(extra)) + tuple(
            self.length() if d == 1 and self.rng.random() < 0.5 else d for d in vshape
        )
        return self.add(Step("call", "alloc", (value,), {"shape": shape}))

    def call_composite(self) -> int | None:
        first = self.pick()
        if first is None:
            return None
        chosen = [first]
        shape = self.shapes[first]
        for _ in range(int(self.rng.integers(0, 3))):
            nxt = self.pick(self.broadcasts(shape))
            if nxt is not None and nxt not in chosen:
                chosen.append(nxt)
                shape = np.broadcast_shapes(shape, self.shapes[nxt])
        inner = _draw_inner(self.rng, [self.dtype(i) for i in chosen])
        if inner is None:
            return None
        return self.add(Step("call", "composite", tuple(Ref(i) for i in chosen), {"inner": inner}))

    def call_motif(self) -> int | None:
        """A catalogue rule's left side (one of its examples), its names bound to values or new inputs."""
        rule = _MOTIF_RULES[int(self.rng.integers(len(_MOTIF_RULES)))]
        text = str(self.rng.choice(list(rule.examples)))
        tree = ast.parse(text, mode="eval").body
        bound: dict[str, Any] = {}
        results: dict[int, Any] = {}
        stack: list[tuple[ast.AST, bool]] = [(tree, False)]
        while stack:
            node, ready = stack.pop()
            children = _motif_children(node)
            if not ready:
                stack.append((node, True))
                stack.extend((c, False) for c in children)
                continue
            if isinstance(node, ast.Name):
                if node.id not in bound:
                    bound[node.id] = self.bind(rule.types.get(node.id), list(bound.values()))
                value = bound[node.id]
            else:
                value = self.motif_call(node, [results[id(c)] for c in children])
            if value is None:
                return None
            results[id(node)] = value
        top = results[id(tree)]
        return top.index if isinstance(top, Ref) else None

    def bind(self, spec: str | None, others: list[Any]) -> Ref | None:
        """A value for a name of a rule example: an existing value or a new input of the example's type."""
        dtype = self.random_dtype(
            ("float64", "float64", "float32", "int8", "int64", "bool") if spec is None else None
        )
        if spec is None:
            shapes = [self.shapes[o.index] for o in others if isinstance(o, Ref)]
            try:
                shape = np.broadcast_shapes(*shapes) if shapes else self.random_shape()
            except ValueError:  # typed names that do not broadcast together (the operands of a dot)
                shape = shapes[-1]
            found = self.operand(self.broadcasts(shape), dtype, self.compatible_shape(shape))
        else:
            wanted = rw.graph.basic.type_from_spec(spec)
            shape = tuple(self.length() if d is None else d for d in wanted.shape)

            def fits(i: int) -> bool:
                have = self.shapes[i]
                return len(have) == len(shape) and all(
                    d is None or d == n for d, n in zip(wanted.shape, have)
                )

            found = self.operand(fits, dtype if self.rng.random() < 0.3 else "float64", shape)
        return None if found is None else Ref(found)

    def motif_call(self, node: ast.AST, args: list[Any]) -> Any:
        """One call of a rule example, as a recipe step (numbers stay Python literals)."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            if not isinstance(args[0], Ref):
                return -args[0]
            return self.add(Step("call", "op-x", (args[0],)))
        if isinstance(node, ast.BinOp):
            symbol = _AST_OPERATORS.get(type(node.op))
            if symbol is None or not any(isinstance(a, Ref) for a in args):
                return None
            return self._ref(self.add(Step("call", f"op{symbol}", tuple(args))))
        if isinstance(node, ast.Attribute) and node.attr == "T":
            return self._ref(self.add(Step("call", ".T", tuple(args))))
        if isinstance(node, ast.Subscript):
            key = _literal_key(node.slice)
            if key is None or not isinstance(args[0], Ref):
                return None
            return self._ref(self.add(Step("call", "index", (args[0],), {"key": key})))
        if not isinstance(node, ast.Call):
            return None
        keywords = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        if isinstance(node.func, ast.Attribute):
            obj, rest = args[0], args[1:]
            if node.func.attr == "astype":
                return self._ref(self.add(Step("call", "astype", (obj,), {"dtype": rest[0]})))
            if node.func.attr == "reshape":
                return self._ref(self.add(Step("call", "reshape", (obj,), {"shape": tuple(rest)})))
            return None
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if name in ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "softmax", "log_softmax"):
            default = -1 if "softmax" in name else None
            return self._ref(
                self.add(Step("call", name, tuple(args), {"axis": keywords.get("axis", default)}))
            )
        if name == "alloc":
            return self._ref(self.add(Step("call", "alloc", (args[0],), {"shape": tuple(args[1:])})))
        if name in ("inc_subtensor", "set_subtensor"):  # the part x[key] was built as an index step
            part = self.steps[args[0].index] if len(args) == 2 and isinstance(args[0], Ref) else None
            if part is None or part.op != "index":
                return None
            return self._ref(
                self.add(Step("call", name, (part.args[0], args[1]), {"key": part.params["key"]}))
            )
        if name == "shape_i" and len(args) == 2:
            return self._ref(self.add(Step("call", "shape_i", (args[0],), {"axis": args[1]})))
        if name in _CTORS and not keywords:
            return self._ref(self.add(Step("call", name, tuple(args))))
        return None

    @staticmethod
    def _ref(index: int | None) -> Ref | None:
        return None if index is None else Ref(index)

    def call_constant(self) -> int | None:
        return self.new_constant()

    def call_input(self) -> int | None:
        return self.new_input()


_ARITHMETIC = ("+", "-", "*", "/", "**")
_AST_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@"}
_MOTIF_RULES = [r for r in catalogue() if r.examples]
_CALL_WEIGHTS = {
    "binary": 26,
    "unary": 16,
    "variadic": 5,
    "switch": 4,
    "fill": 3,
    "cast": 5,
    "reduce": 7,
    "softmax": 3,
    "join": 2,
    "assert": 1,
    "dot": 4,
    "blas": 4,
    "shape": 7,
    "alloc": 2,
    "index": 4,
    "length": 2,
    "composite": 4,
    "motif": 14,
    "constant": 2,
    "input": 2,
}


def _literal_key(node: ast.AST) -> tuple | None:
    """A subscript of literal ints, slices of them and None, as a key (None when anything else)."""

    def number(item: ast.AST | None) -> int | None:
        return None if item is None else ast.literal_eval(item)

    items = node.elts if isinstance(node, ast.Tuple) else [node]
    key: list[Any] = []
    try:
        for item in items:
            if isinstance(item, ast.Slice):
                key.append(slice(number(item.lower), number(item.upper), number(item.step)))
            else:
                key.append(ast.literal_eval(item))
    except ValueError:
        return None
    if not all(k is None or isinstance(k, (int, slice)) for k in key):
        return None
    return tuple(key)


def _motif_children(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        return [node.value]
    if isinstance(node, ast.Call):
        head = [node.func.value] if isinstance(node.func, ast.Attribute) else []
        return head + list(node.args)
    return []


def _draw_inner(rng: np.random.Generator, dtypes: list[str]) -> Recipe | None:
    """The inner graph of a Composite: elementwise ops over 0-d inputs of `dtypes`."""
    drawer = _Drawer(rng, max_inputs=len(dtypes))
    for k, dtype in enumerate(dtypes):
        drawer.add(Step("input", params={"name": f"i{k}", "dtype": dtype, "shape": ()}), np.zeros((), dtype))
    if len(drawer.steps) != len(dtypes):
        return None
    for _ in range(int(rng.integers(1, 4))):
        for _attempt in range(6):
            found = drawer.call_binary() if rng.random() < 0.6 else drawer.call_unary()
            if found is not None:
                break
    if len(drawer.steps) == len(dtypes) or drawer.crash is not None:
        return None
    return Recipe(drawer.steps, [len(drawer.steps) - 1])


def _draw_array(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], edge: float) -> np.ndarray:
    """Random values of `dtype`; each element is an edge value of the dtype with probability `edge`."""
    size = int(np.prod(shape))
    if dtype.kind == "f":
        scale = float(rng.choice([1.0, 3.0, 30.0]))
        values = rng.standard_normal(size) * scale
    elif dtype.kind == "b":
        values = rng.random(size) < 0.5
    elif dtype.kind == "u":
        values = rng.integers(0, 11, size)
    else:
        values = rng.integers(-6, 7, size)
    values = values.astype(dtype)
    if edge > 0 and size:
        edges = np.array(_edge_values(dtype), dtype=dtype)
        chosen = rng.random(size) < edge
        values[chosen] = edges[rng.integers(0, len(edges), int(chosen.sum()))]
    return values.reshape(shape)


def _draw_wide(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Values across the whole range of `dtype` (floats log-uniform in magnitude)."""
    size = int(np.prod(shape))
    if dtype.kind == "f":
        top = {"float64": 300, "float32": 37, "float16": 4}[dtype.name]
        magnitudes = 10.0 ** rng.uniform(-top, top, size)
        values = magnitudes * rng.choice([-1.0, 1.0], size)
    elif dtype.kind == "b":
        values = rng.random(size) < 0.5
    else:
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, size, endpoint=True, dtype=dtype)
    with np.errstate(all="ignore"):
        return values.astype(dtype).reshape(shape)


def draw_graph(
    seed: int, index: int
) -> tuple[Recipe, list[dict[int, np.ndarray]], int, tuple[Recipe, BaseException] | None]:
    """Graph `index` of run `seed`: its recipe, input sets, rejected steps and any constructor crash."""
    rng = np.random.default_rng([seed, index])
    drawer = _Drawer(
        rng,
        side=np.random.default_rng([seed, index, 1]),
        elementary=np.random.default_rng([seed, index, 2]),
        fused=np.random.default_rng([seed, index, 3]),
    )
    for _ in range(int(rng.integers(1, 4))):
        drawer.new_input()
    for _ in range(int(rng.integers(0, 2))):
        drawer.new_constant()
    for _ in range(int(rng.integers(2, 13))):
        for _attempt in range(8):
            if drawer.draw_call() is not None:
                break
    computed = [i for i, s in enumerate(drawer.steps) if s.kind == "call"]
    if not computed:
        return draw_graph(seed, index + 1_000_003)
    used = {a.index for s in drawer.steps for a in s.args if isinstance(a, Ref)}
    sinks = [i for i in computed[:-1] if i not in used]
    outputs = [computed[-1], *sinks[: int(rng.integers(0, 3))]]
    if rng.random() < 0.15:  # an intermediate or an input as an output too (maybe twice)
        outputs.append(int(rng.choice(computed if rng.random() < 0.7 else range(len(drawer.steps)))))
    recipe = Recipe(drawer.steps, outputs, single=len(outputs) == 1 and rng.random() < 0.5)
    recipe, new_index = recipe.pruned()
    shapes = {new: drawer.shapes[old] for old, new in new_index.items()}
    input_sets = []
    for kind in ("random", "wide", "edge", "mixed"):
        values = {}
        for i in recipe.inputs:
            dtype = np.dtype(recipe.steps[i].params["dtype"])
            if kind == "random":
                values[i] = _draw_array(rng, dtype, shapes[i], edge=0.0)
            elif kind == "wide":
                values[i] = _draw_wide(rng, dtype, shapes[i])
            elif kind == "edge":
                values[i] = _draw_array(rng, dtype, shapes[i], edge=1.0)
            else:
                values[i] = _draw_array(rng, dtype, shapes[i], edge=0.3)
        input_sets.append(values)
    crash = None
    if drawer.crash is not None:
        step, error = drawer.crash
        crash = Recipe([*drawer.steps, step], [len(drawer.steps)]).pruned()[0], error
    return recipe, input_sets, drawer.rejected, crash


# -- shrinking ----------------------------------------------------------------------------------------------


def _candidates(case: _Case) -> Iterator[tuple[Recipe, dict[int, np.ndarray]]]:
    """Smaller recipes: one output; a call bypassed by one of its arguments; a call cut into an input."""
    recipe, env = case.recipe, case.references[0].env
    if len(recipe.outputs) > 1:
        for o in recipe.outputs:
            yield Recipe(recipe.steps, [o], single=False), {}
    for i in range(len(recipe.steps) - 1, -1, -1):
        step = recipe.steps[i]
        if step.kind != "call":
            continue
        for arg in step.args:
            if isinstance(arg, Ref):
                yield _replaced(recipe, i, arg.index), {}
        value = env.values.get(i)
        if isinstance(value, np.ndarray) and i not in env.undefined:
            yield _cut(recipe, i, case.variables[i], value), {i: value}


def _replaced(recipe: Recipe, old: int, new: int) -> Recipe:
    steps = [
        Step(
            s.kind,
            s.op,
            tuple(Ref(new) if isinstance(a, Ref) and a.index == old else a for a in s.args),
            s.params,
        )
        for s in recipe.steps
    ]
    outputs = [new if o == old else o for o in recipe.outputs]
    return Recipe(steps, outputs, recipe.single)


def _cut(recipe: Recipe, i: int, var: Variable, value: np.ndarray) -> Recipe:
    """`recipe` with step `i` made an input of the step's static type (its reference value feeds it)."""
    steps = list(recipe.steps)
    taken = {s.params["name"] for s in steps if s.kind == "input"}
    name = next(f"x{k}" for k in range(len(steps) + 1) if f"x{k}" not in taken)
    steps[i] = Step("input", params={"name": name, "dtype": value.dtype.name, "shape": var.type.shape})
    return Recipe(steps, recipe.outputs, recipe.single)


def shrink(
    recipe: Recipe,
    values: dict[int, np.ndarray],
    mode: Mode,
    category: str,
    seed: int,
    timeout: float,
    budget: int = 60,
) -> tuple[Recipe, dict[int, np.ndarray], Finding]:
    """A smaller recipe, then simpler inputs, on which `mode` still shows a finding of `category`.

    Structure first (fewer outputs, calls bypassed or cut into inputs, within
    `budget` attempts), then input elements set to zero (as many attempts again).
    """

    def failing(candidate: Recipe, candidate_values: dict[int, np.ndarray]) -> Finding | None:
        try:
            case = _Case(candidate, [candidate_values], seed, timeout)
        except Exception:
            return None
        return next((f for f in case.check(mode) if f.category == category), None)

    found = failing(recipe, values)
    if found is None:
        raise ValueError(f"shrink: {category} does not reproduce on the recipe given")
    best = (recipe, values, found)
    attempts, improved = 0, True
    while improved and attempts < budget:
        improved = False
        current, current_values, _ = best
        for candidate, extra in _candidates(_Case(current, [current_values], seed, timeout)):
            pruned, new_index = candidate.pruned()
            smaller = (len(pruned.steps), len(pruned.outputs)) < (len(current.steps), len(current.outputs))
            if not (smaller or extra):
                continue
            if attempts >= budget:
                break
            attempts += 1
            merged = {**current_values, **extra}
            new_values = {new_index[i]: v for i, v in merged.items() if i in new_index}
            new_values = {i: v for i, v in new_values.items() if pruned.steps[i].kind == "input"}
            found = failing(pruned, new_values)
            if found is not None:
                best, improved = (pruned, new_values, found), True
                break
    positions = [(i, p) for i, array in best[1].items() for p in np.ndindex(array.shape)]
    for i, position in positions[:budget]:  # one element at a time made 0, kept when it still fails
        array = best[1][i]
        if array[position] == 0 and not (array.dtype.kind == "f" and np.signbit(array[position])):
            continue
        simpler = array.copy()
        simpler[position] = 0
        candidate_values = {**best[1], i: simpler}
        found = failing(best[0], candidate_values)
        if found is not None:
            best = (best[0], candidate_values, found)
    return best


SHRINK_PER_SIGNATURE = 3
"""How many failures of one signature a run shrinks (shrinking costs dozens of compilations)."""


# -- runs ------------------------------------------------------------------------------------------


@dataclass
class Failure:
    """A bug found: which graph and mode, what differs, and a reproducer."""

    graph: int
    modes: list[str]
    finding: Finding
    recipe: Recipe
    values: list[np.ndarray]

    def reproducer(self) -> str:
        """A self-contained Python snippet that builds the graph, compiles it and calls it."""
        lines = ["import numpy as np", "import relwrite as rw", "from relwrite.graph import ops"]
        if any(":" in m or "+" in m for m in self.modes[:1]):
            lines.append("from relwrite.engine.db import mode_query")
        lines.append("")
        lines.extend(self.recipe.lines())
        if self.finding.category == "crashed" and self.modes == [GRAPH_ROW]:
            lines.append(f"# the last line raises: {self.finding.detail}")
            return "\n".join(lines)
        names = self.recipe.names()
        ins = ", ".join(names[i] for i in self.recipe.inputs)
        outs = (
            names[self.recipe.outputs[0]]
            if self.recipe.single
            else "[" + ", ".join(names[o] for o in self.recipe.outputs) + "]"
        )
        args = ", ".join(_literal_text(v) for v in self.values)
        if self.modes == [GRAPH_ROW]:
            lines.append(f"print({outs}.type)  # {self.finding.detail}")
            lines.append(f'print(rw.function([{ins}], {outs}, mode="fast_compile")({args}))')
            return "\n".join(lines)
        lines.append(f"f = rw.function([{ins}], {outs}, mode={_mode_text(self.modes[0])})")
        lines.append(f"print(f({args}))")
        if self.finding.expected:
            lines.append(f"# expected (NumPy on the original graph): {_short(self.finding.expected, 600)}")
        if self.finding.got:
            lines.append(f"# got: {_short(self.finding.got, 600)}")
        return "\n".join(lines)

    def describe(self) -> str:
        f = self.finding
        head = f"graph {self.graph} [{', '.join(self.modes)}] {f.category}: {f.detail}"
        if f.hint:
            head += f"\n  hint: {f.hint}"
        return head + "\n" + "\n".join("    " + line for line in self.reproducer().splitlines())


@dataclass
class FuzzReport:
    """Counts per mode (graphs with at least one finding of each category) and the failures."""

    modes: list[str]
    graphs: int = 0
    rejected: int = 0
    seconds: float = 0.0
    counts: dict[str, Counter] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    @property
    def bugs(self) -> list[Failure]:
        return [f for f in self.failures if f.finding.category in BUG_CATEGORIES]

    def table(self) -> str:
        columns = ("tried", *BUG_CATEGORIES, "improvement", "declared")
        rows = [("mode", *columns)]
        for mode in [*self.modes, GRAPH_ROW]:
            c = self.counts.get(mode, Counter())
            rows.append((mode, *(str(c[col]) for col in columns)))
        widths = [max(len(r[k]) for r in rows) for k in range(len(columns) + 1)]
        lines = [
            "  ".join(cell.rjust(w) if k else cell.ljust(w) for k, (cell, w) in enumerate(zip(r, widths)))
            for r in rows
        ]
        lines.append(
            f"{self.graphs} graphs in {self.seconds:.1f} s; {self.rejected} steps rejected by the type system"
        )
        return "\n".join(lines)


def _mode_groups(specs: Sequence[str]) -> list[tuple[Mode, list[str]]]:
    """Modes by what they do: names that are the same mode (o1 and fast_compile) are run once."""
    groups: list[tuple[Mode, list[str]]] = []
    for spec in specs:
        mode = parse_mode(spec)
        for known, names in groups:
            if known == mode:
                names.append(spec)
                break
        else:
            groups.append((mode, [spec]))
    return groups


def check_graph(
    seed: int,
    index: int,
    modes: Sequence[str] = DEFAULT_MODES,
    timeout: float = 120.0,
    minimize: bool = True,
    shrunk: Counter | None = None,
) -> tuple[dict[str, set[str]], list[Failure], int]:
    """Draw graph `index` of run `seed` and check it: (categories per mode, failures, rejected steps).

    Bugs are shrunk when `minimize`; with a `shrunk` counter, only the first
    `SHRINK_PER_SIGNATURE` of each signature (the rest repeat a known cause).
    """
    recipe, input_sets, rejected, crash = draw_graph(seed, index)
    seen: dict[str, set[str]] = {m: set() for m in (*modes, GRAPH_ROW)}
    failures: list[Failure] = []
    if crash is not None:
        crashed, exc = crash
        seen[GRAPH_ROW].add("crashed")
        op = crashed.steps[crashed.outputs[0]].op
        finding = Finding("crashed", f"the constructor {op} raised {type(exc).__name__}: {_short(exc)}", 0)
        failures.append(Failure(index, [GRAPH_ROW], finding, crashed, []))
    case_seed = seed * 1_000_003 + index
    try:
        case = _Case(recipe, input_sets, case_seed, timeout)
    except Exception as exc:  # the recipe built once already, so this is relwrite failing on a rebuild
        seen[GRAPH_ROW].add("crashed")
        failures.append(
            Failure(index, [GRAPH_ROW], Finding("crashed", f"rebuilding raised {exc!r}", 0), recipe, [])
        )
        return seen, failures, rejected
    for step, finding in case.type_findings():
        seen[GRAPH_ROW].add("types")
        culprit, new_index = Recipe(recipe.steps, [step], single=True).pruned()
        values = [input_sets[finding.input_set][i] for i in recipe.inputs if i in new_index]
        failures.append(Failure(index, [GRAPH_ROW], finding, culprit, values))
    for mode, names in _mode_groups(modes):
        findings = case.check(mode)
        reported: set[str] = set()
        for finding in findings:
            for name in names:
                seen[name].add(finding.category)
            if finding.category in reported:
                continue
            reported.add(finding.category)
            values = input_sets[finding.input_set]
            failure = Failure(index, names, finding, recipe, [values[i] for i in recipe.inputs])
            key = _shrink_key(failure)
            if shrunk is not None:
                shrunk[key] += 1
            wanted = shrunk is None or shrunk[key] <= SHRINK_PER_SIGNATURE
            if minimize and wanted and finding.category in BUG_CATEGORIES and finding.category != "warned":
                with contextlib.suppress(Exception):  # a case that does not shrink is reported whole
                    small, values, finding = shrink(
                        recipe, values, mode, finding.category, case_seed, timeout
                    )
                    failure = Failure(index, names, finding, small, [values[i] for i in small.inputs])
            failures.append(failure)
    return seen, failures, rejected


def run(
    graphs: int,
    seed: int = 0,
    modes: Sequence[str] = DEFAULT_MODES,
    start: int = 0,
    timeout: float = 120.0,
    minimize: bool = True,
    progress: Callable[[int, FuzzReport], None] | None = None,
) -> FuzzReport:
    """Check graphs `start .. start + graphs - 1` of run `seed` under `modes`."""
    for spec in modes:
        parse_mode(spec)  # a clear error for an unknown mode, before any work
    report = FuzzReport(list(modes))
    began = time.perf_counter()
    shrunk: Counter = Counter()
    for index in range(start, start + graphs):
        seen, failures, rejected = check_graph(seed, index, modes, timeout, minimize, shrunk)
        report.graphs += 1
        report.rejected += rejected
        for mode, categories in seen.items():
            counter = report.counts.setdefault(mode, Counter())
            if mode != GRAPH_ROW:
                counter["tried"] += 1
            counter.update(categories)
        report.failures.extend(failures)
        report.seconds = time.perf_counter() - began
        if progress is not None:
            progress(index, report)
    report.counts.setdefault(GRAPH_ROW, Counter())["tried"] = report.graphs
    return report


def _shrink_key(failure: Failure) -> str:
    """Before shrinking: category, modes, the shape of the detail and the op computing the wrong output."""
    found = re.match(r"output (\d+)", failure.finding.detail)
    head = ""
    if found is not None and int(found.group(1)) < len(failure.recipe.outputs):
        head = failure.recipe.steps[failure.recipe.outputs[int(found.group(1))]].op
    return f"{failure.finding.category} | {','.join(failure.modes)} | {head} | {_detail_shape(failure)}"


def _detail_shape(failure: Failure) -> str:
    return re.sub(r"[-+]?\d[\w.+-]*|\(.*?\)|\[.*?\]", "#", failure.finding.detail)[:80]


def signature(failure: Failure) -> str:
    """A key for grouping failures that likely share a cause: category, modes, ops involved, detail shape."""
    ops_used = sorted({s.op for s in failure.recipe.steps if s.kind == "call"})
    modes = ",".join(failure.modes)
    return f"{failure.finding.category} | {modes} | {' '.join(ops_used)} | {_detail_shape(failure)}"

"""Recipes: a fuzzed graph as the list of constructor calls a user writes.

A `Recipe` builds its graph with the public constructors (`_CTORS`: how each
call builds, computes with NumPy and prints), prints itself as Python for
the reproducers, and evaluates with NumPy step by step (`_evaluate`): the
reference every mode is compared with, optionally with rounding noise, and
tracking the values that depend on undefined conversions.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import relwrite as rw
from relwrite.graph import ops
from relwrite.graph import shape as shape_ops
from relwrite.graph.basic import Variable
from relwrite.testing.fuzz.semantics import (
    _broadcast_to_all,
    _errstate,
    _product,
    _ref_alloc,
    _ref_assert,
    _ref_dimshuffle,
    _ref_fill,
    _ref_fma,
    _ref_fold,
    _ref_gemm,
    _ref_gemv,
    _ref_ger,
    _ref_key,
    _ref_log1mexp,
    _ref_logsumexp,
    _ref_sigmoid,
    _ref_softmax,
    _ref_softplus,
    _ref_special,
    _ref_update,
)

# -- recipes: graphs as the constructor calls a user writes ----------------------------------------


@dataclass(frozen=True)
class Ref:
    """An argument that is the value of an earlier step of the recipe."""

    index: int


@dataclass
class RecipeStep:
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

    steps: list[RecipeStep]
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


def _remap(step: RecipeStep, new_index: dict[int, int]) -> RecipeStep:
    args = tuple(Ref(new_index[a.index]) if isinstance(a, Ref) else a for a in step.args)
    return RecipeStep(step.kind, step.op, args, step.params)


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


def _composite_text(args: list[str], params: dict[str, Any], name: str) -> str:
    inner: Recipe = params["inner"]
    names = [f"{name}_{n}" for n in inner.names()]
    ins = ", ".join(names[i] for i in inner.inputs)
    return f"ops.Composite([{ins}], [{names[inner.outputs[0]]}])({', '.join(args)})"


def _key_text(key: tuple) -> str:
    def item(k: Any) -> str:
        if isinstance(k, slice):
            text = ":".join("" if b is None else str(b) for b in (k.start, k.stop))
            return text + (f":{k.step}" if k.step is not None else "")
        return repr(k)

    return ", ".join(map(item, key)) + ("," if len(key) == 1 and not isinstance(key[0], slice) else "")


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


def _undefined_of(step: RecipeStep, args: list[Any], value: np.ndarray, env: _Env) -> np.ndarray | None:
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

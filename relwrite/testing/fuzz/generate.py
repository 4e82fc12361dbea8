"""Generating graphs: random recipes and their input sets, graph `index` of run `seed` drawn from both alone.

`draw_graph` grows a recipe call by call over the constructors of `recipe`
(ops, operators, methods, fused nodes, and the left sides of catalogue
rules' examples), keeping the calls the type system accepts, and draws four
input sets: random, wide-range, edge values and a mix.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import relwrite as rw
from relwrite.graph.basic import Variable
from relwrite.relations import catalogue
from relwrite.testing.fuzz.recipe import (
    _BINARY,
    _CTORS,
    _ELEMENTARY_BINARY,
    _ELEMENTARY_STANDS_IN_FOR,
    _ELEMENTARY_UNARY,
    _SPECIAL_STANDS_IN_FOR,
    _SPECIAL_UNARY,
    _UNARY,
    Recipe,
    RecipeStep,
    Ref,
)
from relwrite.testing.fuzz.semantics import (
    _errstate,
    _ref_key,
)

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
        self.steps: list[RecipeStep] = []
        self.variables: list[Variable] = []
        self.shapes: list[tuple[int, ...]] = []
        self.probes: list[Any] = []
        self.rejected = 0
        self.crash: tuple[RecipeStep, BaseException] | None = None

    # -- the pool of values
    def add(self, step: RecipeStep, probe: Any = None) -> int | None:
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

    def _probe(self, step: RecipeStep) -> np.ndarray | None:
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
        return self.add(
            RecipeStep("input", params={"name": f"x{count}", "dtype": dtype, "shape": static}), probe
        )

    def new_constant(self) -> int | None:
        dtype = self.random_dtype()
        shape = self.random_shape()
        value: Any = _draw_array(self.rng, np.dtype(dtype), shape, edge=0.5)
        given: str | None = None
        if not shape and self.rng.random() < 0.5:
            value = value.item()
            given = dtype if self.rng.random() < 0.5 else None
        return self.add(RecipeStep("constant", params={"value": value, "dtype": given}))

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
        return self.add(RecipeStep("call", op, args))

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
        return self.add(RecipeStep("call", name, tuple(Ref(i) for i in chosen)))

    def call_unary(self) -> int | None:
        a = self.pick()
        if a is None:
            return None
        name = str(self.rng.choice([*_UNARY, "op-x", "op-abs"]))
        if self.side is not None and name in _SPECIAL_STANDS_IN_FOR and self.side.random() < 0.3:
            name = str(self.side.choice(list(_SPECIAL_UNARY)))
        name = self.elementary_stand_in(name, _ELEMENTARY_UNARY)
        return self.add(RecipeStep("call", name, (Ref(a),)))

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
        return self.add(RecipeStep("call", "switch", tuple(args)))

    def call_fill(self) -> int | None:
        model = self.pick()
        if model is None:
            return None
        roll = self.rng.random()
        if roll < 0.5:
            return self.add(RecipeStep("call", "ones_like" if roll < 0.25 else "zeros_like", (Ref(model),)))
        if roll < 0.75:
            return self.add(RecipeStep("call", "fill", (Ref(model), self.literal(self.dtype(model)))))
        shape = self.shapes[model]
        value = self.operand(self.broadcasts(shape), None, self.compatible_shape(shape))
        return None if value is None else self.add(RecipeStep("call", "fill", (Ref(model), Ref(value))))

    def call_cast(self) -> int | None:
        a = self.pick()
        if a is None:
            return None
        op = "cast" if self.rng.random() < 0.5 else "astype"
        return self.add(RecipeStep("call", op, (Ref(a),), {"dtype": self.random_dtype()}))

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
        return self.add(RecipeStep("call", op, (Ref(a),), {"axis": axis}))

    def call_assert(self) -> int | None:
        """A value checked against a condition that holds: a True constant, or x == x on integers."""
        a = self.pick()
        if a is None:
            return None
        if self.dtype(a).startswith(("int", "uint", "bool")) and self.rng.random() < 0.5:
            condition = self.add(RecipeStep("call", "eq", (Ref(a), Ref(a))))
            return self.add(RecipeStep("call", "assert_op", (Ref(a), Ref(condition))))
        return self.add(RecipeStep("call", "assert_op", (Ref(a), True)))

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
        return self.add(RecipeStep("call", name, tuple(Ref(i) for i in operands), {"axis": axis}))

    def call_softmax(self) -> int | None:
        a = self.operand(
            lambda i: len(self.shapes[i]) > 0, None, self.random_shape(int(self.rng.integers(1, 3)))
        )
        if a is None or not self.shapes[a]:
            return None
        ndim = len(self.shapes[a])
        name = "softmax" if self.rng.random() < 0.5 else "log_softmax"
        return self.add(RecipeStep("call", name, (Ref(a),), {"axis": int(self.rng.integers(-ndim, ndim))}))

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
        return self.add(RecipeStep("call", str(self.rng.choice(["dot", "op@", ".dot"])), (Ref(x), Ref(y))))

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
        return self.add(RecipeStep("call", which, tuple(parts)))

    def call_shape(self) -> int | None:
        a = self.pick()
        if a is None:
            return None
        shape, static = self.shapes[a], self.variables[a].type.shape
        roll = self.rng.random()
        if roll < 0.3:
            return self.add(RecipeStep("call", "transpose" if self.rng.random() < 0.5 else ".T", (Ref(a),)))
        if roll < 0.65:
            order: list[Any] = [d for d in range(len(shape)) if static[d] != 1 or self.rng.random() < 0.5]
            self.rng.shuffle(order)
            for _ in range(int(self.rng.integers(0, 3 - len(order))) if len(order) < 2 else 0):
                order.insert(int(self.rng.integers(0, len(order) + 1)), "x")
            return self.add(RecipeStep("call", "dimshuffle", (Ref(a),), {"order": tuple(order)}))
        size = int(np.prod(shape))
        options = (
            [(size,), (1, size), (size, 1), (-1,), ()] if size == 1 else [(size,), (-1,), (1, -1), (-1, 1)]
        )
        options += [(d, size // d) for d in range(2, size) if size % d == 0]
        new = options[int(self.rng.integers(len(options)))]
        return self.add(RecipeStep("call", "reshape", (Ref(a),), {"shape": tuple(new)}))

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
            return self.add(RecipeStep("call", "index", (Ref(a),), {"key": key_t}))
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
        return self.add(RecipeStep("call", name, (Ref(a), value), {"key": key_t}))

    def call_length(self) -> int | None:
        """shape(x) or shape_i(x, axis) of a value (often an intermediate: shape promotion's case)."""
        a = self.pick(lambda i: len(self.shapes[i]) > 0)
        if a is None:
            return None
        if self.rng.random() < 0.5:
            return self.add(RecipeStep("call", "shape", (Ref(a),)))
        ndim = len(self.shapes[a])
        return self.add(
            RecipeStep("call", "shape_i", (Ref(a),), {"axis": int(self.rng.integers(-ndim, ndim))})
        )

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
        return self.add(RecipeStep("call", "alloc", (value,), {"shape": shape}))

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
        return self.add(RecipeStep("call", "composite", tuple(Ref(i) for i in chosen), {"inner": inner}))

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
            return self.add(RecipeStep("call", "op-x", (args[0],)))
        if isinstance(node, ast.BinOp):
            symbol = _AST_OPERATORS.get(type(node.op))
            if symbol is None or not any(isinstance(a, Ref) for a in args):
                return None
            return self._ref(self.add(RecipeStep("call", f"op{symbol}", tuple(args))))
        if isinstance(node, ast.Attribute) and node.attr == "T":
            return self._ref(self.add(RecipeStep("call", ".T", tuple(args))))
        if isinstance(node, ast.Subscript):
            key = _literal_key(node.slice)
            if key is None or not isinstance(args[0], Ref):
                return None
            return self._ref(self.add(RecipeStep("call", "index", (args[0],), {"key": key})))
        if not isinstance(node, ast.Call):
            return None
        keywords = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        if isinstance(node.func, ast.Attribute):
            obj, rest = args[0], args[1:]
            if node.func.attr == "astype":
                return self._ref(self.add(RecipeStep("call", "astype", (obj,), {"dtype": rest[0]})))
            if node.func.attr == "reshape":
                return self._ref(self.add(RecipeStep("call", "reshape", (obj,), {"shape": tuple(rest)})))
            return None
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if keywords.get("keepdims"):
            return None  # the recipe's reductions drop the axes they reduce
        if name in (
            "sum",
            "mean",
            "max",
            "min",
            "prod",
            "argmax",
            "argmin",
            "logsumexp",
            "softmax",
            "log_softmax",
        ):
            default = -1 if "softmax" in name else None
            return self._ref(
                self.add(RecipeStep("call", name, tuple(args), {"axis": keywords.get("axis", default)}))
            )
        if name == "alloc":
            return self._ref(self.add(RecipeStep("call", "alloc", (args[0],), {"shape": tuple(args[1:])})))
        if name in ("inc_subtensor", "set_subtensor"):  # the part x[key] was built as an index step
            part = self.steps[args[0].index] if len(args) == 2 and isinstance(args[0], Ref) else None
            if part is None or part.op != "index":
                return None
            return self._ref(
                self.add(RecipeStep("call", name, (part.args[0], args[1]), {"key": part.params["key"]}))
            )
        if name == "shape_i" and len(args) == 2:
            return self._ref(self.add(RecipeStep("call", "shape_i", (args[0],), {"axis": args[1]})))
        if name in _CTORS and not keywords:
            return self._ref(self.add(RecipeStep("call", name, tuple(args))))
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
        drawer.add(
            RecipeStep("input", params={"name": f"i{k}", "dtype": dtype, "shape": ()}), np.zeros((), dtype)
        )
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

"""Series approximations, as Herbie's taylor makes them: an expression expanded in one scalar input at 0
or at ±infinity, truncated to its first few terms.

Near a point where an expression cancels catastrophically (``1/x - 1/tan(x)``
at 0, ``1/(x+1) - 2/x + 1/(x-1)`` at infinity) no rearrangement over the
reals computes it well, but its leading terms do.  A truncated series is
not equal to the expression, so it is never a form of it: it is an
*approximation*, offered to the accuracy search as a candidate that regimes
may use on the range where it measures more accurate than every form
(`relwrite.engine.explore.api.regime_form`), and checked there on a fresh
sample against the exact reference.

The expansion is SymPy's (`lseries`: one term at a time, so a deadline
keeps the terms found so far); `to_sympy` and `from_sympy` translate the
elementwise scalar ops both ways.  An expression with an op SymPy has no
counterpart for (a comparison, a switch, a reduction) has no series.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from relwrite.graph import ops
from relwrite.graph.basic import Constant, Variable, constant, graph_inputs
from relwrite.relations.budget import BudgetExceeded

MOST_TERMS = 4
"""The most leading terms an approximation keeps (one candidate for each count from 1)."""

MOST_OPS = 40
"""The largest expression (in applications) expanded: SymPy's series of a larger one can take long."""

POINTS = (0.0, math.inf, -math.inf)
"""Where expansions are made, each in every scalar input (those the sample does not approach skipped)."""


class NoSeries(ValueError):
    """The expression has no series here: an op SymPy cannot expand, or SymPy found none."""


@dataclass(frozen=True)
class Approximation:
    """The first `terms` terms of the series of an expression in `variable` at `point`, as `expr` (a graph
    over the expression's inputs)."""

    expr: Variable
    variable: str
    point: float
    terms: int
    where: str = ""
    """A sign the series was specialised to (``b > 0``: each ``abs(b)`` in it taken as ``b``), or ''."""

    def __str__(self) -> str:
        where = "0" if self.point == 0 else ("inf" if self.point > 0 else "-inf")
        plural = "s" if self.terms > 1 else ""
        signed = f", taking {self.where}" if self.where else ""
        return f"series in {self.variable} at {where}, {self.terms} term{plural}{signed}"


def _sympy() -> Any:
    # SymPy takes a third of a second to import: loaded when a series is first asked for
    import sympy

    return sympy


_prepared = False


def prepare() -> None:
    """Load SymPy and its series machinery now (once per process): its first expansion imports and
    builds caches for half a second or more, which a caller timing its own search should not count (a
    benchmark run in a fresh worker process would otherwise spend its series share loading SymPy)."""
    global _prepared
    if _prepared:
        return
    sp = _sympy()
    x = sp.Symbol("x", real=True)
    far = sp.Symbol("x_far", positive=True)
    for expr, at, symbol in ((sp.sqrt(1 + x) - 1, 0, x), (sp.sqrt(far**2 + 1) - far, sp.oo, far)):
        terms = expr.lseries(symbol, at)
        for _ in range(2):
            next(terms)
    _prepared = True


def _to_sympy_table(sp: Any) -> dict[type, Callable[..., Any]]:
    return {
        ops.Add: lambda *xs: sp.Add(*xs),
        ops.Mul: lambda *xs: sp.Mul(*xs),
        ops.Sub: lambda a, b: a - b,
        ops.TrueDiv: lambda a, b: a / b,
        ops.Pow: lambda a, b: a**b,
        ops.Neg: lambda a: -a,
        ops.Reciprocal: lambda a: 1 / a,
        ops.Identity: lambda a: a,
        ops.Sqr: lambda a: a**2,
        ops.Sqrt: sp.sqrt,
        ops.Cbrt: lambda a: a ** sp.Rational(1, 3),
        ops.Exp: sp.exp,
        ops.Expm1: lambda a: sp.exp(a) - 1,
        ops.Log: sp.log,
        ops.Log1p: lambda a: sp.log(1 + a),
        ops.Sin: sp.sin,
        ops.Cos: sp.cos,
        ops.Tan: sp.tan,
        ops.Asin: sp.asin,
        ops.Acos: sp.acos,
        ops.Atan: sp.atan,
        ops.Atan2: sp.atan2,
        ops.Sinh: sp.sinh,
        ops.Cosh: sp.cosh,
        ops.Tanh: sp.tanh,
        ops.Hypot: lambda a, b: sp.sqrt(a**2 + b**2),
        ops.Fma: lambda a, b, c: a * b + c,
        ops.Abs: sp.Abs,
        ops.Sigmoid: lambda a: 1 / (1 + sp.exp(-a)),
        ops.Softplus: lambda a: sp.log(1 + sp.exp(a)),
        ops.Erf: sp.erf,
        ops.Erfc: sp.erfc,
    }


def to_sympy(expr: Variable) -> tuple[Any, dict[Any, Variable]]:
    """`expr` as a SymPy expression, and the graph input each of its symbols stands for.

    Scalar float inputs become real symbols; constants become the rationals
    their shortest decimals write (``0.1`` is 1/10, as the source said).
    NoSeries for anything else.
    """
    sp = _sympy()
    table = _to_sympy_table(sp)
    inputs = [v for v in graph_inputs([expr]) if not isinstance(v, Constant)]
    symbols: dict[Any, Variable] = {}
    done: dict[Variable, Any] = {}
    for k, v in enumerate(inputs):
        if v.type.ndim != 0 or v.type.numpy_dtype.kind != "f":
            raise NoSeries(f"input {v.name or v} is not a float scalar")
        symbol = sp.Symbol(v.name or f"x{k}", real=True)
        if symbol in symbols:
            raise NoSeries(f"two inputs are named {symbol}")
        symbols[symbol] = v
        done[v] = symbol
    applications = 0
    stack = [expr]
    while stack:
        v = stack[-1]
        if v in done:
            stack.pop()
            continue
        if isinstance(v, Constant):
            stack.pop()
            done[v] = _rational(sp, v)
            continue
        node = v.owner
        missing = [i for i in node.inputs if i not in done]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        make = table.get(type(node.op))
        if make is None or len(node.outputs) != 1:
            raise NoSeries(f"{node.op} has no SymPy counterpart")
        applications += 1
        if applications > MOST_OPS:
            raise NoSeries(f"more than {MOST_OPS} applications")
        done[v] = make(*(done[i] for i in node.inputs))
    return done[expr], symbols


def _rational(sp: Any, c: Constant) -> Any:
    data = np.asarray(c.data)
    if data.ndim != 0 or data.dtype.kind not in "biuf":
        raise NoSeries(f"the constant {c} is not a real scalar")
    value = float(data)
    if not math.isfinite(value):
        raise NoSeries(f"the constant {value} is not finite")
    return sp.Rational(repr(value))


def from_sympy(expr: Any, symbols: dict[Any, Variable], dtype: str) -> Variable:
    """The graph computing SymPy expression `expr` over the inputs `symbols` names, constants of `dtype`.

    Powers by 2 are `sqr`, by 1/2 and 1/3 `sqrt` and `cbrt`, by -1
    `reciprocal`; numbers (rationals, pi, E) are rounded to `dtype`.
    NoSeries for a function with no op.
    """
    sp = _sympy()
    functions: dict[Any, Callable[..., Variable]] = {
        sp.exp: ops.exp,
        sp.log: ops.log,
        sp.sin: ops.sin,
        sp.cos: ops.cos,
        sp.tan: ops.tan,
        sp.asin: ops.asin,
        sp.acos: ops.acos,
        sp.atan: ops.atan,
        sp.atan2: ops.atan2,
        sp.sinh: ops.sinh,
        sp.cosh: ops.cosh,
        sp.tanh: ops.tanh,
        sp.Abs: ops.abs,
        sp.erf: ops.erf,
        sp.erfc: ops.erfc,
    }
    built: dict[Any, Variable] = {}
    stack = [expr]
    while stack:
        e = stack[-1]
        if e in built:
            stack.pop()
            continue
        if e.is_Symbol:
            if e not in symbols:
                raise NoSeries(f"the series names {e}, which is no input")
            built[e] = symbols[e]
            stack.pop()
            continue
        if e.is_number:
            try:
                value = complex(e)
            except (TypeError, ValueError):
                raise NoSeries(f"the series holds the number {e}") from None
            if value.imag or not math.isfinite(value.real):
                raise NoSeries(f"the series holds the number {e}")
            built[e] = constant(np.asarray(value.real, dtype=dtype))
            stack.pop()
            continue
        missing = [a for a in e.args if a not in built]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        operands = [built[a] for a in e.args]
        if e.is_Add:
            built[e] = ops.add(*operands)
        elif e.is_Mul:
            built[e] = ops.mul(*operands)
        elif e.is_Pow:
            built[e] = _power(operands[0], e.args[1], dtype)
        elif e.func in functions:
            built[e] = functions[e.func](*operands)
        else:
            raise NoSeries(f"the series holds {e.func}, which has no op")
    return built[expr]


def _power(base: Variable, exponent: Any, dtype: str) -> Variable:
    named = {2: ops.sqr, 0.5: ops.sqrt, 1 / 3: ops.cbrt, -1: ops.reciprocal}
    value = float(exponent)
    for k, op in named.items():
        if value == k:
            return op(base)
    if value == -2:
        return ops.reciprocal(ops.sqr(base))
    return ops.pow(base, constant(np.asarray(value, dtype=dtype)))


def approximations(
    expr: Variable,
    points: dict[str, np.ndarray],
    most_terms: int = MOST_TERMS,
    bounded: Callable[[int], AbstractContextManager] = lambda pending: nullcontext(),
) -> Iterator[Approximation]:
    """The truncated series of `expr` in each scalar input, at 0 and at ±infinity, 1 to `most_terms`
    terms each, lazily: the first term of every expansion, then the second of each, and so on (a caller
    on a deadline keeps the shortest of all rather than the longest of one).

    `points` (name -> sampled values) says which expansions can matter: at
    +infinity only where some value exceeds 1, at -infinity where some is
    below -1, at 0 where some lies within (-1, 1).  Each term is computed
    inside `bounded(pending)` (a budget; `pending` counts the expansions
    still to take a turn in this round, itself included, to share what is
    left fairly): a `BudgetExceeded` it raises gives up that expansion only,
    except for its first term, which is tried again once at the end of the
    round (SymPy's first term of an expansion costs the most, and a 1-term
    series is often the one that matters).  A series holding ``abs(w)`` of
    an input `w` is also yielded specialised to each sign of `w`
    (`Approximation.where`): ``(abs(b) - b)/a`` is 0 where b > 0, which no
    rounding of the unspecialised one computes.  An expression with no
    series yields nothing.
    """
    if most_terms < 1:
        raise ValueError(f"most_terms must be at least 1, got {most_terms}")
    try:
        sympy_expr, symbols = to_sympy(expr)
    except NoSeries:
        return
    sp = _sympy()
    dtype = expr.type.numpy_dtype.name
    expansions = [
        _Expansion(sp, sympy_expr, symbol, point)
        for symbol in symbols
        for point in POINTS
        if _approached(np.asarray(points.get(str(symbol), ()), dtype=np.float64), point)
    ]
    for _ in range(most_terms):
        queue = list(expansions)
        while queue:
            expansion = queue.pop(0)
            try:
                with bounded(len(queue) + 1):
                    total = expansion.next_total()
            except BudgetExceeded:
                if expansion.terms == 0 and not expansion.retried:
                    expansion.restart()
                    queue.append(expansion)
                else:
                    expansion.done = True
                continue
            if total is None:
                continue
            for where, signed in _signed(sp, total, symbols):
                try:
                    graph = from_sympy(signed, symbols, dtype)
                except NoSeries:
                    expansion.done = True
                    break
                yield Approximation(graph, str(expansion.symbol), expansion.point, expansion.terms, where)
        expansions = [e for e in expansions if not e.done]


def _signed(sp: Any, total: Any, symbols: dict[Any, Variable]) -> Iterator[tuple[str, Any]]:
    """`total` as it is, then, for each input `w` it holds as ``Abs(w)``, specialised to ``w > 0`` and to
    ``w < 0`` (SymPy cancels what the sign makes equal)."""
    yield "", total
    for symbol in symbols:
        if total.has(sp.Abs(symbol)):
            yield f"{symbol} > 0", total.subs(sp.Abs(symbol), symbol)
            yield f"{symbol} < 0", total.subs(sp.Abs(symbol), -symbol)


def _approached(values: np.ndarray, point: float) -> bool:
    if not values.size:
        return False
    if point == 0:
        return bool(np.any(np.abs(values) < 1))
    return bool(np.any(values > 1)) if point > 0 else bool(np.any(values < -1))


class _Expansion:
    """One series being expanded: SymPy's lazy terms in `symbol` at `point`, and their sum so far.

    Towards ±infinity the symbol's sign is known, so it is expanded as a
    positive symbol (`far`: ``symbol = ±far``): ``sqrt(b*b)`` is ``b`` there,
    not ``Abs(b)``, whose difference with ``b`` would be left to floating
    point to cancel (and SymPy finds such terms faster).
    """

    def __init__(self, sp: Any, expr: Any, symbol: Any, point: float):
        self.sp, self.symbol, self.point = sp, symbol, point
        self.total, self.terms, self.done, self.retried = sp.Integer(0), 0, False, False
        self._terms: Iterator[Any] | None = None
        if point == 0:
            self._expr, self._far, self._back = expr, symbol, symbol
        else:
            far = sp.Symbol(f"{symbol.name}_far", positive=True)
            sign = 1 if point > 0 else -1
            self._expr, self._far, self._back = expr.subs(symbol, sign * far), far, sign * symbol

    def restart(self) -> None:
        """Start SymPy's expansion afresh (once: `retried`), after an interrupt ended its generator."""
        self._terms, self.retried = None, True

    def next_total(self) -> Any:
        """The sum of one more term (None, and `done`, when there is none: SymPy found no further term, or
        one that is no real power series term)."""
        sp = self.sp
        try:
            if self._terms is None:
                self._terms = self._expr.lseries(self._far, 0 if self.point == 0 else sp.oo)
            term = next(self._terms)
            if self._far is not self.symbol:
                term = term.subs(self._far, self._back)
        except BudgetExceeded:
            raise
        except Exception:  # StopIteration, PoleError, NotImplementedError...: SymPy has no further term
            term = None
        if term is None or term.has(sp.Order) or term.has(sp.zoo, sp.nan, sp.I):
            self.done = True
            return None
        self.total, self.terms = self.total + term, self.terms + 1
        return self.total

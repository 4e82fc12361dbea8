"""Preconditions of benchmarks: predicates over the inputs that a sampler respects.

One representation serves FPCore's `:pre` (read by `relwrite.interop.fpcore`) and the
short Python-like text of the command line (`parse_precondition("0 < x < y")`):
terms (`Num`, `Var`, `Call`, with FPCore's operation names) under predicates
(`Compare` chains, `And`, `Or`, `Not`, `Truth`).  A `Precondition` gives the
box its predicate implies (`ranges`, for sampling) and a vectorised mask
(`holds`).  Every walk over a predicate keeps its own stack: depth is no limit.
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from relwrite.backends.numpy.fma import fma


class PreconditionError(ValueError):
    """A predicate outside the language, naming the offending piece."""


# -- terms and predicates ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Num:
    """A real number (a float64 value)."""

    value: float


@dataclass(frozen=True, eq=False)
class Var:
    """An input, by name."""

    name: str


@dataclass(frozen=True, eq=False)
class Call:
    """An operation (FPCore's name: `+ - * / fabs fmin pow ...`; unary `-` negates) on terms."""

    op: str
    args: tuple[Term, ...]


Term = Num | Var | Call


@dataclass(frozen=True, eq=False)
class Truth:
    """TRUE or FALSE."""

    value: bool


@dataclass(frozen=True, eq=False)
class Compare:
    """A chain `t0 op0 t1 op1 t2 ...`: every adjacent pair holds (`0 < x <= y`, FPCore's `(< a b c)`)."""

    ops: tuple[str, ...]
    terms: tuple[Term, ...]

    def __post_init__(self) -> None:
        if len(self.terms) != len(self.ops) + 1 or not self.ops:
            raise PreconditionError(f"a comparison chain needs one more term than operators, got {self}")
        for op in self.ops:
            if op not in COMPARISONS:
                raise PreconditionError(f"unknown comparison {op!r}")


@dataclass(frozen=True, eq=False)
class And:
    parts: tuple[Predicate, ...]


@dataclass(frozen=True, eq=False)
class Or:
    parts: tuple[Predicate, ...]


@dataclass(frozen=True, eq=False)
class Not:
    part: Predicate


Predicate = Truth | Compare | And | Or | Not
Node = Term | Predicate

COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}

FUNCTIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "+": (2, np.add),
    "-": (2, np.subtract),
    "*": (2, np.multiply),
    "/": (2, np.true_divide),
    "fabs": (1, np.abs),
    "fmin": (2, np.fmin),
    "fmax": (2, np.fmax),
    "pow": (2, np.power),
    "hypot": (2, np.hypot),
    "fma": (3, fma),
    "atan2": (2, np.arctan2),
    "copysign": (2, np.copysign),
    "fmod": (2, np.fmod),
    **{
        name: (1, getattr(np, numpy_name))
        for name, numpy_name in {
            "sqrt": "sqrt",
            "cbrt": "cbrt",
            "exp": "exp",
            "exp2": "exp2",
            "expm1": "expm1",
            "log": "log",
            "log2": "log2",
            "log10": "log10",
            "log1p": "log1p",
            "sin": "sin",
            "cos": "cos",
            "tan": "tan",
            "asin": "arcsin",
            "acos": "arccos",
            "atan": "arctan",
            "sinh": "sinh",
            "cosh": "cosh",
            "tanh": "tanh",
            "asinh": "arcsinh",
            "acosh": "arccosh",
            "atanh": "arctanh",
            "floor": "floor",
            "ceil": "ceil",
            "trunc": "trunc",
        }.items()
    },
}
"""The operations a term may apply: FPCore's name -> (operand count, NumPy function).

`+` and `*` also take one or more operands (Herbie writes `(* 2 a b)`), `-` one or two."""

VARIADIC = ("+", "*")


def children(node: Node) -> tuple[Node, ...]:
    """The terms or predicates a node is built from."""
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Compare):
        return node.terms
    if isinstance(node, (And, Or)):
        return node.parts
    if isinstance(node, Not):
        return (node.part,)
    return ()


def fold(root: Node, combine: Callable[[Node, list[Any]], Any]) -> Any:
    """`combine(node, values of its children)` from the leaves up, without recursion."""
    values: dict[int, Any] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if ready:
            values[id(node)] = combine(node, [values[id(c)] for c in children(node)])
        elif id(node) not in values:
            stack.append((node, True))
            stack.extend((c, False) for c in children(node))
    return values[id(root)]


def emit(root: Any, render: Callable[[Any], Sequence[Any]]) -> str:
    """Text of `root`: `render(item)` gives its pieces, strings or items rendered in turn (no recursion)."""
    pieces: list[str] = []
    stack: list[Any] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            pieces.append(item)
        else:
            stack.extend(reversed(render(item)))
    return "".join(pieces)


def variables_of(root: Node) -> list[str]:
    """The names a term or predicate reads, in order of first appearance."""
    seen: dict[str, None] = {}
    stack: list[Node] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Var):
            seen.setdefault(node.name, None)
        stack.extend(reversed(children(node)))
    return list(seen)


def check_call(op: str, count: int) -> str | None:
    """Why `op` cannot take `count` operands in a term, or None when it can."""
    if op not in FUNCTIONS:
        return f"unknown operation {op!r}"
    arity = FUNCTIONS[op][0]
    if (op in VARIADIC and count >= 1) or (op == "-" and count in (1, 2)) or count == arity:
        return None
    return f"{op!r} takes {arity} operand(s), got {count}"


# -- evaluation ----------------------------------------------------------------------------------


def evaluate(root: Node, values: Mapping[str, Any]) -> Any:
    """The value of a term (float64 arrays) or predicate (bool arrays) at `values`, broadcast."""

    def combine(node: Node, args: list[Any]) -> Any:
        if isinstance(node, Num):
            return np.float64(node.value)
        if isinstance(node, Var):
            return np.asarray(values[node.name], dtype=np.float64)
        if isinstance(node, Call):
            if node.op == "-" and len(args) == 1:
                return np.negative(args[0])
            function = FUNCTIONS[node.op][1]
            if node.op not in VARIADIC and FUNCTIONS[node.op][0] != 2:
                return function(*args)
            result = args[0]
            for arg in args[1:]:
                result = function(result, arg)
            return result
        if isinstance(node, Truth):
            return np.bool_(node.value)
        if isinstance(node, Compare):
            result = np.bool_(True)
            for op, a, b in zip(node.ops, args, args[1:]):
                result = result & COMPARISONS[op](a, b)
            return result
        if isinstance(node, And):
            return functools.reduce(np.logical_and, args, np.bool_(True))
        if isinstance(node, Or):
            return functools.reduce(np.logical_or, args, np.bool_(False))
        return np.logical_not(args[0])

    with np.errstate(all="ignore"):
        return fold(root, combine)


# -- boxes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """The closed float64 range `[lo, hi]` of one input (`lo > hi`: no point satisfies the predicate)."""

    lo: float
    hi: float

    @property
    def is_empty(self) -> bool:
        return not self.lo <= self.hi

    def contains(self, values: Any) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        return (self.lo <= values) & (values <= self.hi)


_FULL = Interval(-math.inf, math.inf)
_EMPTY = Interval(math.inf, -math.inf)


@dataclass(frozen=True)
class _Range:
    """Where a term's non-NaN values lie, and whether it may be NaN where its inputs are finite."""

    lo: float
    hi: float
    nan: bool


_ANYTHING = _Range(-math.inf, math.inf, True)
_INCREASING = {
    "sqrt": 0.0,
    "cbrt": -math.inf,
    "exp": -math.inf,
    "exp2": -math.inf,
    "expm1": -math.inf,
    "log": 0.0,
    "log2": 0.0,
    "log10": 0.0,
    "log1p": -1.0,
    "atan": -math.inf,
    "sinh": -math.inf,
    "tanh": -math.inf,
    "asinh": -math.inf,
}
"""Increasing functions and the least operand they are defined at."""


def _down(x: float, ulps: int = 1) -> float:
    for _ in range(ulps):
        x = float(np.nextafter(x, -math.inf))
    return x


def _up(x: float, ulps: int = 1) -> float:
    for _ in range(ulps):
        x = float(np.nextafter(x, math.inf))
    return x


def _rounded(lo: float, hi: float, nan: bool, ulps: int = 1) -> _Range:
    """A range computed in round-to-nearest, widened outward so it holds the computed values."""
    if math.isnan(lo) or math.isnan(hi):
        return _ANYTHING
    return _Range(_down(lo, ulps), _up(hi, ulps), nan)


def _product(a: float, b: float) -> float:
    return 0.0 if a == 0 or b == 0 else a * b


def _term_range(term: Term, box: Mapping[str, Interval]) -> _Range:
    """A range holding every value of `term` at finite points of `box` (outward-rounded)."""

    def combine(node: Node, args: list[_Range]) -> _Range:
        if isinstance(node, Num):
            return _Range(node.value, node.value, math.isnan(node.value))
        if isinstance(node, Var):
            interval = box[node.name]
            return _Range(interval.lo, interval.hi, False)
        return _call_range(node.op, args)

    with np.errstate(all="ignore"):
        return fold(term, combine)


def _call_range(op: str, args: list[_Range]) -> _Range:
    nan = any(a.nan for a in args)
    if op == "-" and len(args) == 1:
        (a,) = args
        return _Range(-a.hi, -a.lo, a.nan)
    if op in VARIADIC and len(args) == 1:
        return args[0]
    if op in ("+", "-", "*", "/") and len(args) > 2:
        result = args[0]
        for arg in args[1:]:
            result = _call_range(op, [result, arg])
        return result
    if op == "+":
        a, b = args
        unbounded = (a.lo == -math.inf and b.hi == math.inf) or (a.hi == math.inf and b.lo == -math.inf)
        return _rounded(a.lo + b.lo, a.hi + b.hi, nan or unbounded)
    if op == "-":
        a, b = args
        return _call_range("+", [a, _Range(-b.hi, -b.lo, b.nan)])
    if op == "*":
        a, b = args
        corners = [_product(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        zero_times_inf = (a.lo <= 0 <= a.hi and math.inf in (-b.lo, b.hi)) or (
            b.lo <= 0 <= b.hi and math.inf in (-a.lo, a.hi)
        )
        return _rounded(min(corners), max(corners), nan or zero_times_inf)
    if op == "/":
        a, b = args
        if b.lo <= 0 <= b.hi:
            return _ANYTHING
        corners = [x / y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        if any(math.isnan(c) for c in corners):
            return _ANYTHING
        return _rounded(min(corners), max(corners), nan)
    if op == "fabs":
        (a,) = args
        if a.lo >= 0:
            return a
        if a.hi <= 0:
            return _Range(-a.hi, -a.lo, a.nan)
        return _Range(0.0, max(-a.lo, a.hi), a.nan)
    if op in ("fmin", "fmax"):
        a, b = args
        pick = min if op == "fmin" else max
        lo, hi = pick(a.lo, b.lo), pick(a.hi, b.hi)
        if a.nan:  # fmin(NaN, b) is b
            lo, hi = min(lo, b.lo), max(hi, b.hi)
        if b.nan:
            lo, hi = min(lo, a.lo), max(hi, a.hi)
        return _Range(lo, hi, a.nan and b.nan)
    if op in ("sin", "cos"):
        (a,) = args
        return _Range(-1.0, 1.0, a.nan or a.lo == -math.inf or a.hi == math.inf)  # sin(inf) is NaN
    if op in _INCREASING and len(args) == 1:
        (a,) = args
        least = _INCREASING[op]
        lo, hi = max(a.lo, least), a.hi
        if hi < least:
            return _Range(math.inf, -math.inf, True)
        return _rounded(_call_value(op, lo), _call_value(op, hi), nan or a.lo < least, ulps=4)
    return _ANYTHING


def _call_value(op: str, x: float) -> float:
    return float(FUNCTIONS[op][1](np.float64(x)))


def _narrowed(target: Term, lo: float, hi: float, box: dict[str, Interval]) -> None:
    """Narrow `box` so that `target` (an input, or an input under fabs, negation, or a constant
    sum or factor) lies in `[lo, hi]` at every finite point where it does; other terms are left."""
    while True:
        if isinstance(target, Var):
            old = box[target.name]
            box[target.name] = Interval(max(old.lo, lo), min(old.hi, hi))
            return
        if not isinstance(target, Call):
            return
        args = target.args
        if target.op in VARIADIC and len(args) == 1:
            target = args[0]
        elif target.op == "fabs":
            lo, hi, target = -hi, hi, args[0]
        elif target.op == "-" and len(args) == 1:
            lo, hi, target = -hi, -lo, args[0]
        elif target.op in ("+", "*", "-") and len(args) == 2 and any(isinstance(a, Num) for a in args):
            number_first = isinstance(args[0], Num)
            c = (args[0] if number_first else args[1]).value
            rest = args[1] if number_first else args[0]
            # the operation rounds: its exact result lies within one ulp of a bound it met
            lo, hi = _down(lo), _up(hi)
            with np.errstate(all="ignore"):
                if target.op == "+":
                    lo, hi = _down(lo - c), _up(hi - c)
                elif target.op == "-" and number_first:  # c - rest
                    lo, hi = _down(c - hi), _up(c - lo)
                elif target.op == "-":  # rest - c
                    lo, hi = _down(lo + c), _up(hi + c)
                elif c > 0 and math.isfinite(c):
                    lo, hi = _down(lo / c), _up(hi / c)
                elif c < 0 and math.isfinite(c):
                    lo, hi = _down(hi / c), _up(lo / c)
                else:
                    return
            if math.isnan(lo) or math.isnan(hi):
                return
            target = rest
        else:
            return


def _is_exact_target(term: Term) -> bool:
    """An input, possibly under fabs or negation: never NaN where the input is finite."""
    while isinstance(term, Call) and (term.op == "fabs" or (term.op == "-" and len(term.args) == 1)):
        term = term.args[0]
    return isinstance(term, Var)


def _pairs(predicate: Compare) -> list[tuple[Term, str, Term]]:
    return list(zip(predicate.terms, predicate.ops, predicate.terms[1:]))


_FLIPPED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _negated(predicate: Predicate) -> Predicate:
    """A predicate holding wherever `predicate` fails at finite inputs (exact where that is cheap)."""
    if isinstance(predicate, Truth):
        return Truth(not predicate.value)
    if isinstance(predicate, Not):
        return predicate.part
    if isinstance(predicate, And):
        return Or(tuple(Not(p) for p in predicate.parts))
    if isinstance(predicate, Or):
        return And(tuple(Not(p) for p in predicate.parts))
    alternatives = []
    for a, op, b in _pairs(predicate):
        # `not (x < 3)` is `x >= 3` unless a side may be NaN: only inputs and numbers are flipped
        if (_is_exact_target(a) or isinstance(a, Num)) and (_is_exact_target(b) or isinstance(b, Num)):
            alternatives.append(Compare((_FLIPPED[op],), (a, b)))
        else:
            return Truth(True)
    return alternatives[0] if len(alternatives) == 1 else Or(tuple(alternatives))


def _box(predicate: Predicate, box: dict[str, Interval]) -> dict[str, Interval]:
    """A box holding every finite point of `box` where `predicate` holds (interval propagation).

    The walk keeps its own stack of tagged tasks: ("box", predicate, start)
    leaves its box on `results`; an `and` narrows through its parts in turn,
    again while that changes something (a few rounds); an `or` takes the hull.
    """
    results: list[dict[str, Interval]] = []
    stack: list[tuple] = [("box", predicate, box)]
    while stack:
        task = stack.pop()
        tag = task[0]
        if tag == "box":
            _, node, current = task
            if isinstance(node, Truth):
                results.append(current if node.value else {name: _EMPTY for name in current})
            elif isinstance(node, Compare):
                results.append(_compare_box(node, current))
            elif isinstance(node, And):
                stack += [("round", node.parts, current, 0), ("parts", node.parts, 0, current)]
            elif isinstance(node, Or):
                stack.append(("hull", len(node.parts), current))
                stack.extend(("box", part, current) for part in reversed(node.parts))
            else:
                stack.append(("box", _negated(node.part), current))
        elif tag == "parts":  # narrow by parts[i:] in turn, starting from `current`
            _, parts, i, current = task
            if i == len(parts) or _is_empty(current):
                results.append(current)
            else:
                stack += [("next", parts, i + 1), ("box", parts[i], current)]
        elif tag == "next":
            _, parts, i = task
            stack.append(("parts", parts, i, results.pop()))
        elif tag == "round":
            _, parts, start, count = task
            narrowed = results.pop()
            if narrowed != start and count < 8 and not _is_empty(narrowed):
                stack += [("round", parts, narrowed, count + 1), ("parts", parts, 0, narrowed)]
            else:
                results.append(narrowed)
        else:  # hull
            _, count, start = task
            boxes = results[len(results) - count :]
            del results[len(results) - count :]
            results.append(_hull(boxes, start))
    (result,) = results
    return result


def _is_empty(box: Mapping[str, Interval]) -> bool:
    return any(interval.is_empty for interval in box.values())


def _hull(boxes: list[dict[str, Interval]], start: dict[str, Interval]) -> dict[str, Interval]:
    boxes = [b for b in boxes if not _is_empty(b)]
    if not boxes:
        return {name: _EMPTY for name in start}
    return {name: Interval(min(b[name].lo for b in boxes), max(b[name].hi for b in boxes)) for name in start}


def _compare_box(predicate: Compare, box: dict[str, Interval]) -> dict[str, Interval]:
    box = dict(box)
    for _ in range(4):  # a chain narrows in both directions
        before = dict(box)
        for a, op, b in _pairs(predicate):
            if op == "!=":
                continue
            if op in (">", ">="):
                a, b, op = b, a, "<" if op == ">" else "<="
            ra, rb = _term_range(a, box), _term_range(b, box)
            strict = op == "<"
            # where a < b holds, both sides are numbers: a lies below b's highest value, b above a's lowest
            hi = _down(rb.hi) if strict and _is_exact_target(a) else rb.hi
            lo = _up(ra.lo) if strict and _is_exact_target(b) else ra.lo
            _narrowed(a, -math.inf, hi, box)
            _narrowed(b, lo, math.inf, box)
            if op == "==":
                _narrowed(a, rb.lo, math.inf, box)
                _narrowed(b, -math.inf, ra.hi, box)
        if box == before or _is_empty(box):
            break
    return box


# -- the precondition ----------------------------------------------------------------------------


class Precondition:
    """A predicate over named inputs: the box it implies for sampling, and where it holds."""

    def __init__(self, predicate: Predicate, variables: Sequence[str]):
        self.predicate = predicate
        self.variables = tuple(variables)
        unknown = [name for name in variables_of(predicate) if name not in self.variables]
        if unknown:
            raise PreconditionError(
                f"the precondition reads {', '.join(map(repr, unknown))}, not among the inputs "
                f"{', '.join(self.variables) or '(none)'}"
            )

    @classmethod
    def always(cls, variables: Sequence[str]) -> Precondition:
        return cls(Truth(True), variables)

    @property
    def ranges(self) -> dict[str, Interval]:
        """Per input, a closed float64 range holding every finite point where the predicate holds."""
        return _box(self.predicate, {name: _FULL for name in self.variables})

    def holds(self, values: Mapping[str, Any]) -> np.ndarray:
        """Where the predicate holds, elementwise over the (broadcast) arrays of `values` (float64)."""
        missing = [name for name in self.variables if name not in values]
        if missing:
            raise PreconditionError(f"holds: no values for {', '.join(missing)}")
        arrays = [np.asarray(values[name], dtype=np.float64) for name in self.variables]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        return np.broadcast_to(evaluate(self.predicate, values), shape).copy()

    def __str__(self) -> str:
        return to_python_text(self.predicate)

    def __repr__(self) -> str:
        return f"Precondition({str(self)!r}, variables={self.variables!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Precondition) and self.variables == other.variables and str(self) == str(other)
        )

    def __hash__(self) -> int:
        return hash((self.variables, str(self)))


# -- Python-like text ----------------------------------------------------------------------------

_PYTHON_NAMES = {"abs": "fabs", "min": "fmin", "max": "fmax"}
_FPCORE_TO_PYTHON = {fpcore: python for python, fpcore in _PYTHON_NAMES.items()}


def _exact_constants() -> dict[str, Fraction]:
    """FPCore's named constants as exact fractions of 256-bit approximations (then rounded once)."""
    with mpmath.workprec(256):
        values = {
            "E": mpmath.e,
            "LOG2E": 1 / mpmath.ln2,
            "LOG10E": 1 / mpmath.ln10,
            "LN2": mpmath.ln2,
            "LN10": mpmath.ln10,
            "PI": mpmath.pi,
            "PI_2": mpmath.pi / 2,
            "PI_4": mpmath.pi / 4,
            "M_1_PI": 1 / mpmath.pi,
            "M_2_PI": 2 / mpmath.pi,
            "M_2_SQRTPI": 2 / mpmath.sqrt(mpmath.pi),
            "SQRT2": mpmath.sqrt(2),
            "SQRT1_2": mpmath.sqrt(mpmath.mpf(1) / 2),
        }
        exact = {}
        for name, value in values.items():
            mantissa, exponent = value.man_exp
            exact[name] = Fraction(mantissa) * Fraction(2) ** exponent
        return exact


EXACT_CONSTANTS = _exact_constants()
CONSTANTS: dict[str, float] = {
    **{name: float(value) for name, value in EXACT_CONSTANTS.items()},
    "INFINITY": math.inf,
    "NAN": math.nan,
}
"""FPCore's named constants (float64 values)."""

_BINARY_AST = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "pow"}
_COMPARE_AST = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


def parse_precondition(text: str, variables: Sequence[str] | None = None) -> Precondition:
    """A precondition from Python-like text: `"0 < x < y"`, `"x != 0 and abs(y) > 1"`.

    Comparisons chain; `and`, `or`, `not`, `True`, `False`; numbers, names,
    FPCore's constants (`PI`, `E`...), `+ - * / **`, and calls to FPCore's
    operations (`abs`, `min`, `max` are `fabs`, `fmin`, `fmax`).  `variables`
    orders the inputs (default: the names read, in order).  Nothing is evaluated.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise PreconditionError(f"precondition {text!r} is not an expression: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise PreconditionError(f"precondition {text!r} is nested too deeply") from None
    values: list[Any] = []
    stack: list[Any] = [tree.body]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            count, build = item
            args = values[len(values) - count :]
            del values[len(values) - count :]
            values.append(build(args))
            continue
        operands, build = _plan_python(item, text)
        stack.append((len(operands), build))
        stack.extend(reversed(operands))
    (predicate,) = values
    if not isinstance(predicate, (Truth, Compare, And, Or, Not)):
        raise PreconditionError(f"precondition {text!r} is a number, not a condition")
    names = variables_of(predicate) if variables is None else variables
    return Precondition(predicate, names)


def _plan_python(node: ast.AST, text: str) -> tuple[list[ast.AST], Callable[[list[Any]], Any]]:
    def error(what: str) -> PreconditionError:
        return PreconditionError(f"precondition {text!r}: {what} at column {node.col_offset + 1}")

    def terms(args: list[Any]) -> tuple[Term, ...]:
        for arg in args:
            if not isinstance(arg, (Num, Var, Call)):
                raise error("a condition where a number is expected")
        return tuple(args)

    def predicates(args: list[Any]) -> tuple[Predicate, ...]:
        for arg in args:
            if isinstance(arg, (Num, Var, Call)):
                raise error("a number where a condition is expected")
        return tuple(args)

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            return [], lambda _: Truth(node.value)
        if isinstance(node.value, (int, float)):
            return [], lambda _: Num(float(node.value))
        raise error(f"unsupported literal {node.value!r}")
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return [], lambda _: Num(CONSTANTS[node.id])
        return [], lambda _: Var(node.id)
    if isinstance(node, ast.BoolOp):
        kind = And if isinstance(node.op, ast.And) else Or
        return list(node.values), lambda args: kind(predicates(args))
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            return [node.operand], lambda args: Not(predicates(args)[0])
        if isinstance(node.op, ast.UAdd):
            return [node.operand], lambda args: terms(args)[0]
        if isinstance(node.op, ast.USub):
            literal = node.operand.value if isinstance(node.operand, ast.Constant) else None
            # `-2` is the number -2; `-0` negates 0 (`-0.0` is the number, as `_number_text` writes it)
            if type(literal) is float or (type(literal) is int and literal != 0):
                return [], lambda _: Num(-float(literal))
            return [node.operand], lambda args: Call("-", terms(args))
        raise error(f"unsupported operator {type(node.op).__name__!r}")
    if isinstance(node, ast.BinOp):
        op = _BINARY_AST.get(type(node.op))
        if op is None:
            raise error(f"unsupported operator {type(node.op).__name__!r}")
        return [node.left, node.right], lambda args: Call(op, terms(args))
    if isinstance(node, ast.Compare):
        comparisons = []
        for op in node.ops:
            if type(op) not in _COMPARE_AST:
                raise error(f"unsupported comparison {type(op).__name__!r}")
            comparisons.append(_COMPARE_AST[type(op)])
        return [node.left, *node.comparators], lambda args: Compare(tuple(comparisons), terms(args))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        name = _PYTHON_NAMES.get(node.func.id, node.func.id)
        why = check_call(name, len(node.args)) if name not in ("+", "-", "*", "/") else "unknown function"
        if why is not None:
            raise error(f"{node.func.id}: {why}")
        return list(node.args), lambda args: Call(name, terms(args))
    raise error(f"unsupported syntax {type(node).__name__!r}")


_PYTHON_LEVEL = {"+": 1, "-": 1, "*": 2, "/": 2}
_ATOM = 9


def _python_level(node: Node) -> float:
    """Binding strength of a node's text: or 0, and 0.2, not 0.3, comparison 0.5, + 1, * 2, unary 3, ** 4."""
    while len(children(node)) == 1 and (isinstance(node, (And, Or)) or getattr(node, "op", None) in VARIADIC):
        node = children(node)[0]  # (* x) is written as x, (and p) as p
    if isinstance(node, Or):
        return 0
    if isinstance(node, And):
        return 0.2
    if isinstance(node, Not):
        return 0.3
    if isinstance(node, Compare):
        return 0.5
    if isinstance(node, Num):
        return _ATOM if node.value >= 0 or math.isnan(node.value) else 3
    if isinstance(node, Call):
        if node.op == "-" and len(node.args) == 1:
            return 3
        if node.op == "pow":
            return 4
        if node.op in _PYTHON_LEVEL and len(node.args) > 1:
            return _PYTHON_LEVEL[node.op]
    return _ATOM


def _number_text(value: float) -> str:
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value)) if value or math.copysign(1, value) > 0 else "-0.0"
    return repr(value)


def to_python_text(root: Node) -> str:
    """The Python-like text of a term or predicate; `parse_precondition` reads it back."""

    def wrapped(child: Node, parens: bool) -> list[Any]:
        return ["(", child, ")"] if parens else [child]

    def render(node: Node) -> list[Any]:
        level = _python_level(node)
        if isinstance(node, Num):
            return [_number_text(node.value)]
        if isinstance(node, Var):
            return [node.name]
        if isinstance(node, Truth):
            return ["True" if node.value else "False"]
        if isinstance(node, Not):
            return ["not ", *wrapped(node.part, _python_level(node.part) < level)]
        if isinstance(node, (And, Or)) and len(node.parts) == 1:
            return [node.parts[0]]
        if isinstance(node, (And, Or)):
            joiner = " and " if isinstance(node, And) else " or "
            pieces: list[Any] = []
            for i, part in enumerate(node.parts):
                pieces += [joiner] if i else []
                pieces += wrapped(part, _python_level(part) <= level)
            return pieces
        if isinstance(node, Compare):
            pieces = [node.terms[0]]
            for op, term in zip(node.ops, node.terms[1:]):
                pieces += [f" {op} ", term]
            return pieces
        if node.op == "-" and len(node.args) == 1:
            return ["-", *wrapped(node.args[0], _python_level(node.args[0]) != _ATOM)]
        if node.op == "pow":
            a, b = node.args
            return [*wrapped(a, _python_level(a) != _ATOM), " ** ", *wrapped(b, _python_level(b) != _ATOM)]
        if level != _ATOM:
            pieces = []
            for i, arg in enumerate(node.args):
                pieces += [f" {node.op} "] if i else []
                pieces += wrapped(arg, _python_level(arg) < level or (i > 0 and _python_level(arg) <= level))
            return pieces
        if node.op in VARIADIC:  # one operand: FPCore's (* x) is x
            return [node.args[0]]
        name = _FPCORE_TO_PYTHON.get(node.op, node.op)
        pieces = [f"{name}("]
        for i, arg in enumerate(node.args):
            pieces += [", "] if i else []
            pieces.append(arg)
        return [*pieces, ")"]

    return emit(root, render)

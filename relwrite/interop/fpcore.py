"""FPBench's FPCore format (https://fpbench.org/spec/fpcore-2.0.html) in and out of relwrite graphs.

`read_fpcores(text)` gives one `Benchmark` per `(FPCore ...)` in the text:
its inputs (scalars of the benchmark's precision), its body as a graph, its
`:pre` as a `Precondition`, its name, precision and other properties (kept
as written).  `to_fpcore`, `to_python` and `to_c` write a graph back out.

The body may use numbers (decimal, rational `1/3`, hexadecimal, `(digits m
e b)`), FPCore's constants, `let`/`let*`, `if` (conditions of comparisons,
`and`, `or`, `not`), `cast` (to the benchmark's own precision: its
operand), and the operations relwrite has (in `:pre` too, with `let`): an operation's op is
looked up in `relwrite.graph.ops` when a benchmark is read, so `tan` reads
once relwrite has a `tan`.  Anything else (loops, tensors, annotations,
operations relwrite lacks) is an `FPCoreError` naming it, its benchmark and
its line and column.  Reading and writing keep their own stacks: a
100,000-deep expression reads and writes.

FPCore's `fmax`/`fmin` become relwrite's `maximum`/`minimum`, which propagate
NaN where C's `fmax`/`fmin` ignore it.
"""

from __future__ import annotations

import itertools
import keyword
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np

from relwrite.engine.explore.precondition import (
    CONSTANTS,
    EXACT_CONSTANTS,
    And,
    Call,
    Compare,
    Not,
    Num,
    Or,
    Precondition,
    PreconditionError,
    Predicate,
    Term,
    Truth,
    Var,
    check_call,
    emit,
    parse_precondition,
)
from relwrite.graph import ops
from relwrite.graph.basic import Constant, Op, Variable, graph_inputs, io_toposort
from relwrite.graph.types import TensorType


class FPCoreError(ValueError):
    """FPCore text outside what relwrite reads, or a graph FPCore (or Python, or C) cannot hold."""


PRECISIONS = {"binary64": "float64", "binary32": "float32"}

MATH_FUNCTIONS = (
    "sqrt",
    "cbrt",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "hypot",
    "fma",
    "erf",
    "erfc",
    "tgamma",
    "lgamma",
    "floor",
    "ceil",
    "trunc",
    "fmod",
    "copysign",
    "fdim",
)
"""FPCore's functions that C99's math.h has under the same name."""

OPERATIONS: dict[str, str] = {
    "+": "add",
    "*": "mul",
    "/": "true_div",
    "fabs": "abs",
    "fmax": "maximum",
    "fmin": "minimum",
    "pow": "pow",
    **{name: name for name in MATH_FUNCTIONS},
}
"""FPCore's operations -> the name of relwrite's op (`-` is `neg` or `sub` by its operand count)."""

COMPARISON_OPS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "neq"}

UNSUPPORTED = {
    "while": "loop",
    "while*": "loop",
    "for": "loop",
    "for*": "loop",
    "tensor": "tensor",
    "tensor*": "tensor",
    "array": "tensor",
    "dim": "tensor",
    "size": "tensor",
    "ref": "tensor",
    "!": "annotation",
}
"""FPCore constructs relwrite does not read, and what they are."""


@dataclass
class Benchmark:
    """One FPCore: inputs (scalar graph variables), the body, and its properties.

    `properties` holds the properties other than `:name`, `:pre` and
    `:precision` as (key, text as written), in order (`:alt` may repeat).
    """

    name: str | None
    inputs: list[Variable]
    expr: Variable
    precondition: Precondition
    precision: str = "binary64"
    properties: list[tuple[str, str]] = field(default_factory=list)
    identifier: str | None = None


# -- S-expressions -------------------------------------------------------------------------------


@dataclass(eq=False)
class Atom:
    text: str
    start: int
    is_string: bool = False


@dataclass(eq=False)
class SList:
    items: list[Datum]
    start: int
    end: int = -1


Datum = Atom | SList

_DELIMITERS = set('()[]";')
_CLOSING = {"(": ")", "[": "]"}


def _position(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def read_data(text: str) -> list[Datum]:
    """The S-expressions of `text` (`;` comments skipped; `[ ]` as parentheses), without recursion."""
    top: list[Datum] = []
    open_lists: list[tuple[SList, str]] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char.isspace():
            i += 1
        elif char == ";":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif char in _CLOSING:
            lst = SList([], i)
            (open_lists[-1][0].items if open_lists else top).append(lst)
            open_lists.append((lst, _CLOSING[char]))
            i += 1
        elif char in ")]":
            if not open_lists:
                raise FPCoreError(f"unbalanced {char!r} at {_position(text, i)}")
            lst, closing = open_lists.pop()
            if char != closing:
                raise FPCoreError(
                    f"{char!r} at {_position(text, i)} closes the list opened at {_position(text, lst.start)}"
                )
            lst.end = i + 1
            i += 1
        else:
            start = i
            if char == '"':
                chars: list[str] = []
                i += 1
                while i < n and text[i] != '"':
                    if text[i] == "\\" and i + 1 < n:
                        i += 1
                    chars.append(text[i])
                    i += 1
                if i >= n:
                    raise FPCoreError(f"unterminated string at {_position(text, start)}")
                atom = Atom("".join(chars), start, is_string=True)
                i += 1
            else:
                while i < n and not text[i].isspace() and text[i] not in _DELIMITERS:
                    i += 1
                atom = Atom(text[start:i], start)
            (open_lists[-1][0].items if open_lists else top).append(atom)
    if open_lists:
        raise FPCoreError(f"unclosed list opened at {_position(text, open_lists[-1][0].start)}")
    return top


def _symbol(datum: Datum) -> str | None:
    return datum.text if isinstance(datum, Atom) and not datum.is_string else None


# -- numbers -------------------------------------------------------------------------------------

_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_RATIONAL = re.compile(r"[+-]?\d+/\d+")
_HEX = re.compile(r"[+-]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?\d+)?")
_MAX_EXPONENT_DIGITS = 6  # 1e999999 is already beyond every float; refuse huge exact powers


def _exact_number(text: str) -> Fraction | float | None:
    """The exact value an FPCore number token denotes, or None when it is not a number."""
    if _DECIMAL.fullmatch(text):
        exponent = _DECIMAL.fullmatch(text).group(2)
        if exponent and len(exponent.lstrip("eE+-")) > _MAX_EXPONENT_DIGITS:
            return float(text)
        return Fraction(text)
    if _RATIONAL.fullmatch(text):
        numerator, denominator = text.split("/")
        return None if int(denominator) == 0 else Fraction(int(numerator), int(denominator))
    if _HEX.fullmatch(text):
        return float.fromhex(text)
    return None


def _rounded(value: Fraction | float, dtype: str) -> float:
    """`value` correctly rounded to `dtype` (ties to even), as a Python float."""
    if isinstance(value, float) or dtype == "float64":
        try:
            nearest = float(value)
        except OverflowError:
            nearest = math.inf if value > 0 else -math.inf
        return float(np.float64(nearest).astype(dtype)) if isinstance(value, float) else nearest
    try:
        guess = np.float32(float(value))
    except OverflowError:
        return math.inf if value > 0 else -math.inf
    if not np.isfinite(guess):
        return float(guess)
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    finite = [c for c in candidates if np.isfinite(c)]

    def distance(c: np.float32) -> tuple[Fraction, int]:
        return abs(Fraction(float(c)) - value), int(c.view(np.uint32)) & 1

    return float(min(finite, key=distance))


# -- reading -------------------------------------------------------------------------------------


def read_fpcores(text: str, errors: list[FPCoreError] | None = None) -> list[Benchmark]:
    """Every `(FPCore ...)` of `text` as a Benchmark.

    A benchmark relwrite cannot read raises an FPCoreError naming it; with an
    `errors` list, its error is appended there instead and the others are read.
    """
    if not isinstance(text, str):
        raise TypeError(f"read_fpcores: expected FPCore text as a str, got {type(text).__name__}")
    benchmarks = []
    for number, datum in enumerate(read_data(text), 1):
        try:
            benchmarks.append(_BenchmarkReader(text, datum, number).read())
        except FPCoreError as exc:
            if errors is None:
                raise
            errors.append(exc)
    return benchmarks


def read_fpcore(text: str) -> Benchmark:
    """The one FPCore of `text`."""
    benchmarks = read_fpcores(text)
    if len(benchmarks) != 1:
        raise FPCoreError(f"expected one FPCore, found {len(benchmarks)}")
    return benchmarks[0]


_FALSE = Constant(TensorType("bool", ()), False)
_TRUE = Constant(TensorType("bool", ()), True)


@dataclass
class _Task:
    """Build one value from the `count` values last computed (`datum`: where, for errors)."""

    count: int
    build: Callable[[list[Any]], Any]
    datum: Datum


@dataclass
class _Then:
    """Take the `count` values last computed and push the stack items `then` gives (a let's scope)."""

    count: int
    then: Callable[[list[Any]], list[Any]]


class _BenchmarkReader:
    def __init__(self, text: str, datum: Datum, number: int):
        self.text = text
        self.datum = datum
        self.label = f"FPCore #{number} ({_position(text, datum.start)})"
        self.dtype = "float64"

    def error(self, what: str, datum: Datum) -> FPCoreError:
        return FPCoreError(f"{self.label}: {what} at {_position(self.text, datum.start)}")

    def read(self) -> Benchmark:
        datum = self.datum
        if not isinstance(datum, SList) or not datum.items or _symbol(datum.items[0]) != "FPCore":
            raise self.error("expected (FPCore ...)", datum)
        items = datum.items[1:]
        identifier = None
        if items and _symbol(items[0]) is not None:
            identifier = _symbol(items[0])
            items = items[1:]
        if not items or not isinstance(items[0], SList):
            raise self.error("expected the list of arguments", items[0] if items else datum)
        arguments, rest = items[0], items[1:]
        properties: list[tuple[str, Datum]] = []
        i = 0
        while i < len(rest) - 1 and (_symbol(rest[i]) or "").startswith(":"):
            properties.append((rest[i].text, rest[i + 1]))
            i += 2
        if len(rest) - i != 1:
            raise self.error(
                "expected properties then one body expression", rest[i] if i < len(rest) else datum
            )
        body = rest[i]
        name, pre, precision, kept = None, None, "binary64", []
        for key, value in properties:
            if key == ":name":
                if not (isinstance(value, Atom) and value.is_string):
                    raise self.error(":name must be a string", value)
                name = value.text
                self.label = f"benchmark {name!r}"
            elif key == ":pre":
                pre = value
            elif key == ":precision":
                precision = _symbol(value) or ""
                if precision not in PRECISIONS:
                    raise self.error(f"unsupported precision {self.source(value)!r}", value)
            else:
                kept.append((key, self.source(value)))
        self.dtype = PRECISIONS[precision]
        inputs = self.arguments(arguments)
        names = [v.name for v in inputs]
        predicate = Truth(True) if pre is None else self.predicate(pre, set(names))
        try:
            precondition = Precondition(predicate, names)
        except PreconditionError as exc:
            raise self.error(str(exc), pre) from None
        expr = self.expression(body, {v.name: v for v in inputs})
        if expr.dtype == "bool":
            raise self.error("the body is a condition, not a number", body)
        return Benchmark(name, inputs, expr, precondition, precision, kept, identifier)

    def source(self, datum: Datum) -> str:
        """A datum's text as written."""
        if isinstance(datum, SList):
            return self.text[datum.start : datum.end]
        if datum.is_string:
            return _string_text(datum.text)
        return datum.text

    def arguments(self, arguments: SList) -> list[Variable]:
        inputs: list[Variable] = []
        for argument in arguments.items:
            name = _symbol(argument)
            if name is None:
                head = _symbol(argument.items[0]) if isinstance(argument, SList) and argument.items else None
                what = "annotated argument (!)" if head == "!" else "tensor argument"
                raise self.error(f"unsupported {what} {self.source(argument)!r}", argument)
            if _exact_number(name) is not None or name in CONSTANTS or name in ("TRUE", "FALSE"):
                raise self.error(f"argument {name!r} is not a variable name", argument)
            if any(v.name == name for v in inputs):
                raise self.error(f"argument {name!r} appears twice", argument)
            inputs.append(TensorType(self.dtype, ())(name))
        return inputs

    # -- expressions ------------------------------------------------------------------------------
    def number(self, datum: Atom) -> Constant | None:
        value = _exact_number(datum.text)
        if value is None:
            if datum.text in CONSTANTS:
                value = CONSTANTS[datum.text]
            else:
                return None
        return Constant(TensorType(self.dtype, ()), _rounded(value, self.dtype))

    def expression(self, root: Datum, env: dict[str, Variable]) -> Variable:
        """The graph of an FPCore expression; `let` scopes live on the task stack, not Python's."""
        values: list[Any] = []
        stack: list[Any] = [(root, env)]
        while stack:
            item = stack.pop()
            if isinstance(item, _Task):
                args = values[len(values) - item.count :]
                del values[len(values) - item.count :]
                values.append(item.build(args))
            elif isinstance(item, _Then):
                args = values[len(values) - item.count :]
                del values[len(values) - item.count :]
                stack.extend(item.then(args))
            elif isinstance(item[0], Atom):
                values.append(self.leaf(*item))
            else:
                stack.extend(self.plan(*item))
        (result,) = values
        return result

    def leaf(self, datum: Atom, scope: dict[str, Variable]) -> Variable:
        if datum.is_string:
            raise self.error(f"unexpected string {self.source(datum)}", datum)
        if datum.text in scope:
            return scope[datum.text]
        if datum.text == "TRUE":
            return _TRUE
        if datum.text == "FALSE":
            return _FALSE
        constant = self.number(datum)
        if constant is None:
            raise self.error(f"unknown variable {datum.text!r}", datum)
        return constant

    def plan(self, datum: SList, scope: dict[str, Variable]) -> list[Any]:
        """Stack items that evaluate the list `datum` (the last one runs first)."""
        if not datum.items:
            raise self.error("empty expression ()", datum)
        head, operands = _symbol(datum.items[0]), datum.items[1:]
        if head is None:
            raise self.error(f"expected an operation, got {self.source(datum.items[0])!r}", datum)
        if head == "digits":
            return [_Task(0, lambda _: self.digits(datum), datum)]
        if head in ("let", "let*"):
            return self.plan_let(datum, scope, sequential=head == "let*")
        if head in UNSUPPORTED:
            raise self.error(f"unsupported {UNSUPPORTED[head]} construct ({head} ...)", datum)
        if head == "cast":  # rounds to the precision in effect: the benchmark's, the only one here
            if len(operands) != 1:
                raise self.error("cast takes one operand", datum)
            return [_Task(1, lambda args: args[0], datum), (operands[0], scope)]
        if head == "if":
            if len(operands) != 3:
                raise self.error("if takes a condition and two branches", datum)
            build = lambda args: self.apply(ops.switch, args, datum, "if")  # noqa: E731
        else:
            build = self.operation(head, len(operands), datum)
        return [_Task(len(operands), build, datum)] + [(o, scope) for o in reversed(operands)]

    def plan_let(self, datum: SList, scope: dict[str, Any], sequential: bool) -> list[Any]:
        """`let` evaluates every binding in `scope`, `let*` each in the scope of those before it (the
        values bound: graph variables in a body, terms or conditions in a precondition)."""
        items = datum.items
        if len(items) != 3 or not isinstance(items[1], SList):
            raise self.error(f"expected ({items[0].text} ([name expr] ...) body)", datum)
        bindings = items[1].items
        for binding in bindings:
            if not (isinstance(binding, SList) and len(binding.items) == 2 and _symbol(binding.items[0])):
                raise self.error(f"a binding must be [name expr], got {self.source(binding)!r}", binding)
        names = [b.items[0].text for b in bindings]
        exprs = [b.items[1] for b in bindings]
        body = items[2]
        if not sequential:
            enter = _Then(len(names), lambda args: [(body, {**scope, **dict(zip(names, args))})])
            return [enter] + [(e, scope) for e in reversed(exprs)]

        def step(i: int, inner: dict[str, Any]) -> list[Any]:
            if i == len(names):
                return [(body, inner)]
            bind = _Then(1, lambda args: step(i + 1, {**inner, names[i]: args[0]}))
            return [bind, (exprs[i], inner)]

        return step(0, scope)

    def digits(self, datum: SList) -> Constant:
        parts = [_symbol(d) or "" for d in datum.items[1:]]
        if len(parts) != 3 or not all(re.fullmatch(r"[+-]?\d+", p) for p in parts) or int(parts[2]) < 2:
            raise self.error("digits takes three integers (digits m e b), b >= 2", datum)
        m, e, b = map(int, parts)
        if abs(e) > 100_000:
            raise self.error("digits exponent beyond any float", datum)
        value = Fraction(m) * Fraction(b) ** e
        return Constant(TensorType(self.dtype, ()), _rounded(value, self.dtype))

    def operation(self, head: str, count: int, datum: SList) -> Callable[[list[Variable]], Variable]:
        if head in COMPARISON_OPS:
            if count < 2:
                raise self.error(f"{head} takes two or more operands", datum)
            op = getattr(ops, COMPARISON_OPS[head])
            return lambda args: self.compare(op, head, args, datum)
        if head in ("and", "or"):
            return lambda args: self.logical(head, args, datum)
        if head == "not":
            if count != 1:
                raise self.error("not takes one operand", datum)
            return lambda args: self.apply(ops.switch, [args[0], _FALSE, _TRUE], datum, "not")
        if head == "-":
            if count not in (1, 2):
                raise self.error(f"- takes one or two operands, got {count}", datum)
            op = ops.neg if count == 1 else ops.sub
            return lambda args: self.apply(op, args, datum, "-")
        if head not in OPERATIONS:
            raise self.error(f"unknown operation {head!r}", datum)
        op = getattr(ops, OPERATIONS[head], None)
        if not isinstance(op, Op):
            raise self.error(
                f"operation {head!r} is not available in relwrite (relwrite.graph.ops has no "
                f"{OPERATIONS[head]!r})",
                datum,
            )
        return lambda args: self.apply(op, args, datum, head)

    def apply(self, op: Op, args: list[Variable], datum: SList, head: str) -> Variable:
        try:
            return op(*args)
        except TypeError as exc:
            raise self.error(f"({head} ...): {exc}", datum) from None

    def compare(self, op: Op, head: str, args: list[Variable], datum: SList) -> Variable:
        pairs = (
            [(a, b) for i, a in enumerate(args) for b in args[i + 1 :]]
            if head == "!="
            else list(itertools.pairwise(args))
        )
        tests = [self.apply(op, list(pair), datum, head) for pair in pairs]
        return self.logical("and", tests, datum)

    def logical(self, head: str, args: list[Variable], datum: SList) -> Variable:
        if not args:
            return _TRUE if head == "and" else _FALSE
        result = args[0]
        for arg in args[1:]:
            branches = [arg, _FALSE] if head == "and" else [_TRUE, arg]
            result = self.apply(ops.switch, [result, *branches], datum, head)
        if result.dtype != "bool":
            raise self.error(f"({head} ...) of numbers", datum)
        return result

    # -- preconditions ----------------------------------------------------------------------------
    def predicate(self, root: Datum, names: set[str]) -> Predicate:
        """`:pre` as a predicate over the inputs (terms of FPCore operations on numbers); `let` and
        `let*` bind names to terms or conditions, their scopes on the task stack as in bodies."""
        values: list[Any] = []
        stack: list[Any] = [(root, {})]
        while stack:
            item = stack.pop()
            if isinstance(item, _Task):
                args = values[len(values) - item.count :] if item.count else []
                del values[len(values) - item.count :]
                values.append(item.build(args))
                continue
            if isinstance(item, _Then):
                args = values[len(values) - item.count :]
                del values[len(values) - item.count :]
                stack.extend(item.then(args))
                continue
            datum, scope = item
            if isinstance(datum, Atom):
                values.append(scope[datum.text] if datum.text in scope else self.predicate_leaf(datum, names))
                continue
            if not datum.items or _symbol(datum.items[0]) is None:
                raise self.error(f"unsupported precondition {self.source(datum)!r}", datum)
            head, operands = datum.items[0].text, datum.items[1:]
            if head in ("let", "let*"):
                stack.extend(self.plan_let(datum, scope, sequential=head == "let*"))
                continue
            stack.append(_Task(len(operands), self.predicate_builder(head, len(operands), datum), datum))
            stack.extend((o, scope) for o in reversed(operands))
        (result,) = values
        if not isinstance(result, (Truth, Compare, And, Or, Not)):
            raise self.error("the precondition is a number, not a condition", root)
        return result

    def predicate_leaf(self, datum: Atom, names: set[str]) -> Any:
        if datum.is_string:
            raise self.error(f"unexpected string {self.source(datum)} in the precondition", datum)
        if datum.text in ("TRUE", "FALSE"):
            return Truth(datum.text == "TRUE")
        if datum.text in names:
            return Var(datum.text)
        constant = self.number(datum)
        if constant is None:
            raise self.error(f"unknown variable {datum.text!r} in the precondition", datum)
        return Num(float(constant.data))

    def predicate_builder(self, head: str, count: int, datum: SList) -> Callable[[list[Any]], Any]:
        def terms(args: list[Any]) -> tuple[Term, ...]:
            if not all(isinstance(a, (Num, Var, Call)) for a in args):
                raise self.error(f"({head} ...) of a condition where a number is expected", datum)
            return tuple(args)

        def predicates(args: list[Any]) -> tuple[Predicate, ...]:
            if any(isinstance(a, (Num, Var, Call)) for a in args):
                raise self.error(f"({head} ...) of a number where a condition is expected", datum)
            return tuple(args)

        if head in COMPARISON_OPS:
            if count < 2:
                raise self.error(f"{head} takes two or more operands", datum)
            if head == "!=" and count > 2:

                def distinct(args: list[Any]) -> Predicate:
                    ts = terms(args)
                    return And(tuple(Compare(("!=",), (a, b)) for i, a in enumerate(ts) for b in ts[i + 1 :]))

                return distinct
            return lambda args: Compare((head,) * (count - 1), terms(args))
        if head in ("and", "or"):
            kind = And if head == "and" else Or
            return lambda args: kind(predicates(args))
        if head == "not":
            if count != 1:
                raise self.error("not takes one operand", datum)
            return lambda args: Not(predicates(args)[0])
        if head == "digits":
            constant = self.digits(datum)
            return lambda _: Num(float(constant.data))
        why = check_call(head, count)
        if why is not None:
            construct = UNSUPPORTED.get(head)
            what = f"unsupported {construct} construct ({head} ...)" if construct else why
            raise self.error(f"{what} in the precondition", datum)
        if head in ("+", "*") and count == 1:  # (* x) is x
            return lambda args: terms(args)[0]
        return lambda args: Call(head, terms(args))


# -- writing -------------------------------------------------------------------------------------


def _string_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_FPCORE_SYMBOLS: dict[str, str] = {
    **{relwrite: fpcore for fpcore, relwrite in OPERATIONS.items()},
    **{relwrite: fpcore for fpcore, relwrite in COMPARISON_OPS.items()},
    "sub": "-",
    "neg": "-",
    "switch": "if",
}
"""relwrite's op names -> FPCore's."""

_INFIX_LEVEL = {
    "add": 1,
    "sub": 1,
    "mul": 2,
    "true_div": 2,
    "pow": 4,
    **dict.fromkeys(COMPARISON_OPS.values(), 0.5),
}
_INFIX_TEXT = {"add": "+", "sub": "-", "mul": "*", "true_div": "/", "pow": "**"}
_INFIX_TEXT.update({relwrite: fpcore for fpcore, relwrite in COMPARISON_OPS.items()})
_ATOM = 9.0
_UNARY = 3.0

_NUMPY_NAMES = {
    "abs": "np.abs",
    "maximum": "np.maximum",
    "minimum": "np.minimum",
    "asin": "np.arcsin",
    "acos": "np.arccos",
    "atan": "np.arctan",
    "atan2": "np.arctan2",
    "asinh": "np.arcsinh",
    "acosh": "np.arccosh",
    "atanh": "np.arctanh",
    "switch": "np.where",
    "erf": "np.vectorize(math.erf)",
    "erfc": "np.vectorize(math.erfc)",
}
"""relwrite's op names -> the NumPy function `to_python` calls: these, and every math.h function
NumPy has as a ufunc of the same name."""
_NUMPY_NAMES.update(
    (name, f"np.{name}")
    for name in MATH_FUNCTIONS
    if name not in _NUMPY_NAMES and isinstance(getattr(np, name, None), np.ufunc)
)

_NUMPY_NAMES["fma"] = "fma"

_PYTHON_FMA = '''def fma(x, y, z):
    """x * y + z rounded once to {dtype}, elementwise (Python 3.13's math.fma): exact in integers."""

    def one(x, y, z):
        x, y, z = float(x), float(y), float(z)
        if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)) or x == 0 or y == 0:
            return z if math.isfinite(x) and math.isfinite(y) and not math.isfinite(z) else x * y + z
        (nx, dx), (ny, dy), (nz, dz) = x.as_integer_ratio(), y.as_integer_ratio(), z.as_integer_ratio()
        n, d = nx * ny * dz + nz * dx * dy, dx * dy * dz
        try:
            r = n / d  # integer division rounds correctly
        except OverflowError:
            return math.inf if n > 0 else -math.inf{narrow}
        return r

    return np.vectorize(one, otypes=[np.{dtype}])(x, y, z)
'''
"""The function `to_python` defines inside one that calls fma (NumPy has none, Python 3.11 neither)."""

_PYTHON_FMA_NARROW = """
        rn, rd = r.as_integer_ratio()  # r rounded to odd instead: it rounds to float32 as n / d does
        if n * rd != rn * d and int(np.float64(r).view(np.int64)) % 2 == 0:
            r = math.nextafter(r, math.inf if n * rd > rn * d else -math.inf)"""

_C_NAMES = {
    "abs": "fabs",
    "maximum": "fmax",
    "minimum": "fmin",
    "pow": "pow",
    **{name: name for name in MATH_FUNCTIONS},
}
"""relwrite's op names -> the math.h function `to_c` calls (with an `f` suffix in binary32)."""

_C_KEYWORDS = set(
    [
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "main",
    ]
)


def _subject(
    subject: Benchmark | Variable,
    name: str | None,
    inputs: Sequence[Variable] | None,
    precondition: Precondition | str | None,
) -> Benchmark:
    """A Benchmark for what the writers were given, checked to be a scalar float expression."""
    if isinstance(subject, Benchmark):
        bench = subject
        name = bench.name if name is None else name
        inputs = bench.inputs if inputs is None else inputs
        precondition = bench.precondition if precondition is None else precondition
        expr, properties, identifier = bench.expr, bench.properties, bench.identifier
    elif isinstance(subject, Variable):
        expr, properties, identifier = subject, [], None
        inputs = graph_inputs([expr]) if inputs is None else inputs
    else:
        raise TypeError(f"expected a Benchmark or a graph Variable, got {type(subject).__name__}")
    inputs = list(inputs)
    precision = {dtype: p for p, dtype in PRECISIONS.items()}.get(expr.dtype)
    if precision is None or expr.ndim != 0:
        raise FPCoreError(f"the expression {expr} is not a binary64 or binary32 scalar (it is {expr.type})")
    for var in inputs:
        if var.name is None or var.ndim != 0 or var.dtype != expr.dtype:
            raise FPCoreError(f"input {var} must be a named {expr.dtype} scalar (it is {var.type})")
    if len({v.name for v in inputs}) != len(inputs):
        raise FPCoreError(f"two inputs share a name among {', '.join(v.name for v in inputs)}")
    free = [v for v in graph_inputs([expr]) if v not in inputs]
    if free:
        raise FPCoreError(f"the expression reads {', '.join(map(str, free))}, not among the inputs")
    names = [v.name for v in inputs]
    if precondition is None:
        precondition = Precondition.always(names)
    elif isinstance(precondition, str):
        precondition = parse_precondition(precondition, names)
    return Benchmark(name, inputs, _lowered(expr), precondition, precision, list(properties), identifier)


def _lowered(expr: Variable) -> Variable:
    """`expr` with the ops FPCore, NumPy and C lack written in those they have (sqr(x) is x * x)."""
    nodes = io_toposort([], [expr])
    if not any(node.op.name in _LOWERINGS for node in nodes):
        return expr
    new: dict[Variable, Variable] = {}
    for node in nodes:
        args = [new.get(v, v) for v in node.inputs]
        if len(node.outputs) != 1:
            raise FPCoreError(f"{node.op} has several outputs; FPCore expressions have one")
        lowering = _LOWERINGS.get(node.op.name)
        new[node.outputs[0]] = lowering(*args) if lowering else node.op(*args)
    return new[expr]


def _one(x: Variable) -> Constant:
    return Constant(TensorType(x.dtype, ()), 1)


_LOWERINGS: dict[str, Callable[[Variable], Variable]] = {
    "sqr": lambda x: ops.mul(x, x),
    "reciprocal": lambda x: ops.true_div(_one(x), x),
    "identity": lambda x: x,
    "sigmoid": lambda x: ops.true_div(_one(x), ops.add(_one(x), ops.exp(ops.neg(x)))),
    "softplus": lambda x: ops.log1p(ops.exp(x)),
    "log1mexp": lambda x: ops.log(ops.neg(ops.expm1(x))),
}


@dataclass
class _Layout:
    """Which nodes of an expression get a name (shared ones; too deep ones when `max_depth`) and in
    what order they are defined."""

    names: dict[Variable, str]
    defined: list[Variable]

    @classmethod
    def of(cls, expr: Variable, taken: set[str], max_depth: int | None) -> _Layout:
        nodes = io_toposort([], [expr])
        uses: dict[Variable, int] = {}
        for node in nodes:
            for var in node.inputs:
                uses[var] = uses.get(var, 0) + 1
        depth: dict[Variable, int] = {}
        names: dict[Variable, str] = {}
        defined: list[Variable] = []
        counter = 0
        for node in nodes:
            out = node.outputs[0]
            depth[out] = 1 + max((depth.get(v, 0) for v in node.inputs if v not in names), default=0)
            too_deep = max_depth is not None and depth[out] >= max_depth
            if out is not expr and (uses.get(out, 0) > 1 or too_deep):
                while f"t{counter}" in taken:
                    counter += 1
                names[out] = f"t{counter}"
                counter += 1
                defined.append(out)
        return cls(names, defined)


@dataclass
class _Define:
    """Render a named node's definition (its op), not its name."""

    var: Variable


# -- FPCore out ----------------------------------------------------------------------------------


@cache
def _named_constants(dtype: str) -> dict[float, str]:
    """The values of FPCore's named constants in `dtype` -> their names (written back by name)."""
    return {_rounded(exact, dtype): name for name, exact in reversed(EXACT_CONSTANTS.items())}


def _fpcore_number(value: float, dtype: str) -> str:
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "(- INFINITY)"
    name = _named_constants(dtype).get(value)
    if name is not None:
        return name
    if value == int(value) and abs(value) < 2**53:
        return str(int(value)) if value or math.copysign(1, value) > 0 else "-0.0"
    return str(np.float32(value)) if dtype == "float32" else repr(value)


def _predicate_fpcore(root: Predicate | Term) -> str:
    def render(node: Any) -> list[Any]:
        if isinstance(node, Num):
            return [_fpcore_number(node.value, "float64")]
        if isinstance(node, Var):
            return [node.name]
        if isinstance(node, Truth):
            return ["TRUE" if node.value else "FALSE"]
        if isinstance(node, Compare):
            if len(set(node.ops)) == 1 and (node.ops[0] != "!=" or len(node.ops) == 1):
                head, parts = node.ops[0], list(node.terms)
            else:
                head = "and"
                parts = [Compare((op,), (a, b)) for op, a, b in zip(node.ops, node.terms, node.terms[1:])]
        elif isinstance(node, (And, Or)):
            head, parts = ("and" if isinstance(node, And) else "or"), list(node.parts)
        elif isinstance(node, Not):
            head, parts = "not", [node.part]
        else:
            head, parts = node.op, list(node.args)
        pieces: list[Any] = ["(", head]
        for part in parts:
            pieces += [" ", part]
        return [*pieces, ")"]

    return emit(root, render)


def _is_truth(var: Variable, value: bool) -> bool:
    return isinstance(var, Constant) and var.dtype == "bool" and bool(var.data) == value


def _fpcore_render(layout: _Layout, dtype: str) -> Callable[[Any], list[Any]]:
    def render(item: Any) -> list[Any]:
        if isinstance(item, Variable):
            if item in layout.names:
                return [layout.names[item]]
            if isinstance(item, Constant):
                if item.dtype == "bool":
                    return ["TRUE" if item.data else "FALSE"]
                return [_fpcore_number(float(item.data), dtype)]
            if item.owner is None:
                return [item.name]
            var = item
        else:
            var = item.var
        node = var.owner
        name = node.op.name
        args: list[Any] = list(node.inputs)
        head = _FPCORE_SYMBOLS.get(name)
        if name == "switch" and var.dtype == "bool":  # conditions built by and / or / not
            cond, then, other = node.inputs
            if _is_truth(then, False) and _is_truth(other, True):
                head, args = "not", [cond]
            elif _is_truth(other, False):
                head, args = "and", [cond, then]
            elif _is_truth(then, True):
                head, args = "or", [cond, other]
        if head is None:
            raise FPCoreError(f"op {node.op} has no FPCore form")
        pieces: list[Any] = ["(", head]
        for arg in args:
            pieces += [" ", arg]
        return [*pieces, ")"]

    return render


def to_fpcore(
    subject: Benchmark | Variable,
    *,
    name: str | None = None,
    inputs: Sequence[Variable] | None = None,
    precondition: Precondition | str | None = None,
) -> str:
    """FPCore text of a benchmark, or of an expression (inputs: the graph's, in order of appearance).

    The keywords replace the benchmark's own.  Shared subexpressions become
    `let*` bindings; `:precision` is written for binary32, `:pre` unless TRUE;
    other properties as they were read.
    """
    bench = _subject(subject, name, inputs, precondition)
    names = {v.name for v in bench.inputs}
    layout = _Layout.of(bench.expr, names | set(CONSTANTS) | {"TRUE", "FALSE"}, None)
    render = _fpcore_render(layout, bench.expr.dtype)
    header = "(FPCore " + (f"{bench.identifier} " if bench.identifier else "")
    lines = [header + "(" + " ".join(v.name for v in bench.inputs) + ")"]
    if bench.name is not None:
        lines.append(f" :name {_string_text(bench.name)}")
    if bench.precision != "binary64":
        lines.append(f" :precision {bench.precision}")
    if not (isinstance(bench.precondition.predicate, Truth) and bench.precondition.predicate.value):
        lines.append(f" :pre {_predicate_fpcore(bench.precondition.predicate)}")
    lines += [f" {key} {text}" for key, text in bench.properties]
    body = emit(bench.expr, render)
    if layout.defined:
        bindings = "\n       ".join(f"[{layout.names[v]} {emit(_Define(v), render)}]" for v in layout.defined)
        body = f"(let* ({bindings})\n  {body})"
    lines.append(f" {body})")
    return "\n".join(lines) + "\n"


# -- Python and C out ----------------------------------------------------------------------------


def _identifier(name: str, taken: set[str], reserved: set[str]) -> str:
    """A C and Python identifier for `name`, not in `taken` or `reserved` (added to `taken`)."""
    text = re.sub(r"\W", "_", name, flags=re.ASCII) or "_"
    if text[0].isdigit():
        text = "_" + text
    while text in taken or text in reserved or keyword.iskeyword(text):
        text += "_"
    taken.add(text)
    return text


def function_name_of(name: str | None) -> str:
    """A Python and C identifier for a benchmark named `name` (its words joined by underscores)."""
    text = re.sub(r"\W+", "_", (name or "").lower(), flags=re.ASCII).strip("_")
    return "f" if not text else f"f_{text}" if text[0].isdigit() else text


class _Infix:
    """Infix text of elementwise graphs, in Python (NumPy) or C (math.h)."""

    def __init__(self, language: str, layout: _Layout, names: dict[Variable, str], dtype: str):
        self.language = language
        self.layout = layout
        self.names = names
        self.dtype = dtype
        self.called: set[str] = set()
        """The names of the ops written as calls."""

    def constant(self, const: Constant) -> str:
        value = const.data.item()
        c = self.language == "c"
        if const.dtype == "bool":
            return ("1" if value else "0") if c else repr(bool(value))
        if math.isnan(value):
            return "NAN" if c else "np.nan"
        if math.isinf(value):
            text = "INFINITY" if c else "np.inf"
            return text if value > 0 else "-" + text
        if self.dtype == "float32":
            text = str(np.float32(value))
            text = text if any(ch in text for ch in ".en") else text + ".0"
            return text + "f" if c else f"np.float32({text})"
        return repr(float(value))

    def level(self, var: Variable) -> float:
        """How tightly the text of `var` as an operand binds (a name: an atom)."""
        return _ATOM if var in self.names else self.own_level(var)

    def own_level(self, var: Variable) -> float:
        """How tightly the text of `var`'s own op binds."""
        if isinstance(var, Constant):
            value = var.data.item()
            negative = not isinstance(value, bool) and math.copysign(1, value) < 0
            return _UNARY if negative else _ATOM
        if var.owner is None:
            return _ATOM
        name = var.owner.op.name
        if name == "neg":
            return _UNARY
        if name == "switch":
            return 0.1 if self.language == "c" else _ATOM
        if name == "pow" and self.language == "c":
            return _ATOM
        return _INFIX_LEVEL.get(name, _ATOM)

    def function(self, op: Op) -> str:
        self.called.add(op.name)
        table = _NUMPY_NAMES if self.language == "python" else _C_NAMES
        text = table.get(op.name)
        if text is None:
            target = "NumPy" if self.language == "python" else "C"
            raise FPCoreError(f"op {op} has no {target} form")
        return text + "f" if self.language == "c" and self.dtype == "float32" else text

    def render(self, item: Any) -> list[Any]:
        if isinstance(item, Variable):
            if item in self.names:
                return [self.names[item]]
            if isinstance(item, Constant):
                return [self.constant(item)]
            var = item
        else:
            var = item.var
        node = var.owner
        name = node.op.name
        level = self.own_level(var)

        def operand(arg: Variable, parens: bool) -> list[Any]:
            return ["(", arg, ")"] if parens else [arg]

        if name == "neg":
            (arg,) = node.inputs
            return ["-", *operand(arg, self.level(arg) != _ATOM)]
        if name == "switch" and self.language == "c":
            pieces: list[Any] = []
            for i, arg in enumerate(node.inputs):
                pieces += [" ? " if i == 1 else " : "] if i else []
                pieces += operand(arg, self.level(arg) != _ATOM)
            return pieces
        if name in _INFIX_TEXT and not (name == "pow" and self.language == "c"):
            if name == "pow":
                a, b = node.inputs
                return [*operand(a, self.level(a) != _ATOM), " ** ", *operand(b, self.level(b) < _UNARY)]
            pieces = []
            for i, arg in enumerate(node.inputs):
                pieces += [f" {_INFIX_TEXT[name]} "] if i else []
                pieces += operand(arg, self.level(arg) < level or (i > 0 and self.level(arg) <= level))
            return pieces
        pieces = [self.function(node.op), "("]
        for i, arg in enumerate(node.inputs):
            pieces += [", "] if i else []
            pieces.append(arg)
        return [*pieces, ")"]


_MAX_INLINE_DEPTH = 16
"""Python/C: a subexpression nested deeper gets its own line (parsers limit nesting)."""


def _infix_parts(bench: Benchmark, language: str, reserved: set[str]) -> tuple[list[str], list, str, _Infix]:
    taken: set[str] = set()
    arguments = [_identifier(v.name, taken, reserved) for v in bench.inputs]
    layout = _Layout.of(bench.expr, taken | reserved, _MAX_INLINE_DEPTH)
    names = dict(zip(bench.inputs, arguments)) | layout.names
    infix = _Infix(language, layout, names, bench.expr.dtype)
    definitions = [(layout.names[v], v, emit(_Define(v), infix.render)) for v in layout.defined]
    return arguments, definitions, emit(bench.expr, infix.render), infix


def _describe(bench: Benchmark) -> list[str]:
    lines = [bench.name] if bench.name else []
    predicate = bench.precondition.predicate
    if not (isinstance(predicate, Truth) and predicate.value):
        lines.append(f"Precondition: {bench.precondition}")
    return lines


def to_python(
    subject: Benchmark | Variable,
    *,
    name: str | None = None,
    inputs: Sequence[Variable] | None = None,
    precondition: Precondition | str | None = None,
    function_name: str | None = None,
) -> str:
    """Python source of a NumPy function computing the expression (elementwise over arrays)."""
    bench = _subject(subject, name, inputs, precondition)
    reserved = {"np", "math", "fma"}
    function_name = function_name or function_name_of(bench.name)
    arguments, definitions, result, infix = _infix_parts(bench, "python", reserved | {function_name})
    uses_fma = "fma" in infix.called
    uses_math = uses_fma or any("math." in text for text in [result, *(d[2] for d in definitions)])
    lines = ["import math"] * uses_math + ["import numpy as np", "", ""]
    lines.append(f"def {function_name}({', '.join(arguments)}):")
    doc = _describe(bench)
    if doc:
        text = "\n\n    ".join(doc).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
        lines.append(f'    """{text}\n    """' if len(doc) > 1 else f'    """{text}"""')
    if uses_fma:
        narrow = _PYTHON_FMA_NARROW if bench.expr.dtype == "float32" else ""
        helper = _PYTHON_FMA.format(dtype=bench.expr.dtype, narrow=narrow)
        lines += [""] * bool(doc) + [f"    {line}" if line else "" for line in helper.splitlines()] + [""]
    lines += [f"    {target} = {text}" for target, _, text in definitions]
    lines.append(f"    return {result}")
    return "\n".join(lines) + "\n"


def to_c(
    subject: Benchmark | Variable,
    *,
    name: str | None = None,
    inputs: Sequence[Variable] | None = None,
    precondition: Precondition | str | None = None,
    function_name: str | None = None,
) -> str:
    """C source of a function (double, or float in binary32) computing the expression with math.h."""
    bench = _subject(subject, name, inputs, precondition)
    ctype = "float" if bench.expr.dtype == "float32" else "double"
    function_name = function_name or function_name_of(bench.name)
    reserved = _C_KEYWORDS | set(_C_NAMES.values()) | {n + "f" for n in _C_NAMES.values()} | {function_name}
    reserved |= {"NAN", "INFINITY"}
    arguments, definitions, result, _ = _infix_parts(bench, "c", reserved)
    lines = ["#include <math.h>", ""]
    doc = _describe(bench)
    if doc:
        lines.append("/* " + "\n * ".join(line.replace("*/", "* /") for line in doc) + " */")
    parameters = ", ".join(f"{ctype} {a}" for a in arguments) or "void"
    lines.append(f"{ctype} {function_name}({parameters}) {{")
    for target, var, text in definitions:
        lines.append(f"    {'int' if var.dtype == 'bool' else ctype} {target} = {text};")
    lines.append(f"    return {result};")
    lines.append("}")
    return "\n".join(lines) + "\n"

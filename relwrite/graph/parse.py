"""The text front end: `parse("exp(log(x)) * y / y", types={"x": "vector"})` builds a graph.

The language is a subset of Python expressions, read with `ast` and a
whitelist (never evaluated): names, int and float literals, `+ - * / ** @`,
unary `-` and `+`, one comparison `< <= > >= == !=`, calls to the ops in
`FUNCTIONS`, `x.T`, and the methods `x.sum(axis=...)`, `.mean`, `.max`, `.min`, `.prod`,
`.argmax`, `.argmin`, `.dot(y)`.
It reads back what `relwrite.graph.printing.pprint` writes:

- an unparenthesised chain `a + b + c` (or `a * b * c`) is one variadic node,
  as pprint writes one; `(a + b) + c` is two nodes;
- arithmetic between literals is Python's, done here exactly as Python
  evaluates `10**400 * x` before `x` is involved: `2**64`, `-(2.0)` and the
  leading literals of a chain, `2 * 3 * x`, are one number (pprint writes a
  node of two literals in call syntax, `pow(2, 64)`, so it reads back as that
  node).  Division by zero, complex results and integers beyond
  `MAX_LITERAL_BITS` bits are errors naming the piece;
- a literal then takes the dtype NumPy 2 gives a Python number next to the
  other operands (`relwrite.graph.basic.as_variable`), as in `x + 2`, and one
  that dtype cannot hold is a LiteralOverflowError (a ValueError) naming it.

Depth: the walk over the syntax tree keeps its own stack, but Python's parser
comes first.  Measured on CPython 3.11: it refuses more than 200 nested
parentheses, brackets or calls (SyntaxError "too many nested parentheses"),
and chains of more than about 3 x sys.getrecursionlimit() operators or unary
minuses (2,990 with the default limit: building the ast recurses; that
becomes a ValueError here).  Since pprint parenthesises every infix
application, its text for a graph more than 200 levels deep (fewer when calls
wrap infix operands, `exp((x + y))`) cannot be read back.
"""

from __future__ import annotations

import ast
import bisect
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from relwrite.graph import ops
from relwrite.graph import shape as shape_ops
from relwrite.graph.basic import Variable, as_variable, constant, type_from_spec
from relwrite.graph.types import LiteralOverflowError, TensorType, describe_literal


@dataclass(frozen=True)
class Function:
    """A callable of the language: `build(*operands, **axis)` with `arity` operands (None: one or more).

    `static` names what follows the operands, if anything: "shape" (ints, or
    one tuple of ints) or "dtype" (a string); it is passed after them.
    """

    build: Callable[..., Variable]
    arity: int | None
    takes_axis: bool = False
    takes_keepdims: bool = False  # a `keepdims=True` keyword (the reductions)
    static: str | None = None
    takes_message: bool = False  # a `message="..."` keyword (assert_op)


_ONE_OPERAND = ("exp", "log", "log1p", "expm1", "sqrt", "sqr", "reciprocal", "sin", "cos", "tanh", "abs")
_ONE_OPERAND += ("sigmoid", "softplus", "identity", "neg", "transpose", "ones_like", "zeros_like")
_ONE_OPERAND += ("erf", "erfc", "log1mexp", "tan", "asin", "acos", "atan", "sinh", "cosh", "cbrt")
_TWO_OPERANDS = ("maximum", "minimum", "sub", "true_div", "pow", "fill", "dot", "hypot", "atan2")

FUNCTIONS: dict[str, Function] = {
    **{name: Function(getattr(ops, name), 1) for name in _ONE_OPERAND},
    **{name: Function(getattr(ops, name), 2) for name in _TWO_OPERANDS},
    "switch": Function(ops.switch, 3),
    "fma": Function(ops.fma, 3),
    "inc_subtensor": Function(ops.inc_subtensor, 2),
    "shape": Function(shape_ops.shape, 1),
    "shape_i": Function(lambda x, axis: shape_ops.shape_i(x, *axis), 1, static="shape"),
    "set_subtensor": Function(ops.set_subtensor, 2),
    "add": Function(ops.add, None),
    "mul": Function(ops.mul, None),
    **{
        name: Function(getattr(ops, name), 1, takes_axis=True, takes_keepdims=name[:3] != "arg")
        for name in ("sum", "mean", "max", "min", "prod", "argmax", "argmin")
    },
    "join": Function(lambda *xs, axis=0: ops.Join(axis)(*xs), None, takes_axis=True),
    "assert_op": Function(ops.assert_op, None, takes_message=True),
    "logsumexp": Function(ops.logsumexp, 1, takes_axis=True, takes_keepdims=True),
    "softmax": Function(ops.softmax, 1, takes_axis=True),
    "log_softmax": Function(ops.log_softmax, 1, takes_axis=True),
    "reshape": Function(lambda x, shape: ops.Reshape(shape)(x), 1, static="shape"),
    "alloc": Function(lambda x, shape: ops.Alloc(shape)(x), 1, static="shape"),
    "cast": Function(ops.cast, 1, static="dtype"),
    "dimshuffle": Function(lambda x, order: ops.DimShuffle(x.ndim, order)(x), 1, static="order"),
}

# Methods take the receiver as their first operand.
METHODS: dict[str, Function] = {
    **{
        name: FUNCTIONS[name]
        for name in ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "dot", "reshape", "dimshuffle")
    },
    "astype": FUNCTIONS["cast"],
}

_BINARY = {
    ast.Add: ops.add,
    ast.Sub: ops.sub,
    ast.Mult: ops.mul,
    ast.Div: ops.true_div,
    ast.Pow: ops.pow,
    ast.MatMult: ops.dot,
}
_VARIADIC = (ast.Add, ast.Mult)
_COMPARE = {
    ast.Lt: ops.lt,
    ast.LtE: ops.le,
    ast.Gt: ops.gt,
    ast.GtE: ops.ge,
    ast.Eq: ops.eq,
    ast.NotEq: ops.neq,
}

# Python's arithmetic on two literals, for the operators the language folds between literals.
_PYTHON_ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}

MAX_LITERAL_BITS = 65_536
"""The largest integer (in bits) literal arithmetic may build: far beyond any dtype, and quick to compute."""

Value = Variable | int | float  # literals stay Python numbers until an op types them
TypeSpec = str | TensorType | Variable


def parse(text: str, types: Mapping[str, TypeSpec] | None = None) -> Variable:
    """Build the graph the expression `text` describes.

    `types` maps names to a type spec (`"vector"`, `"matrix:float32"`,
    `"(3,None)"`), a TensorType, or an existing Variable to use as is; other
    names are float64 scalars.  A name is one variable wherever it appears.
    Raises SyntaxError when the text is not Python, ValueError naming the
    offending piece when it is outside the language, and the ops' TypeError on
    ill-typed operands.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse: expected the expression as a str, got {type(text).__name__}")
    return _Parser(text, _variables_for(types or {})).run()


def _variables_for(types: Mapping[str, TypeSpec]) -> dict[str, Variable | TensorType]:
    resolved: dict[str, Variable | TensorType] = {}
    for name, spec in types.items():
        if not isinstance(name, str):
            raise TypeError(f"parse: type names must be strings, got {name!r}")
        if isinstance(spec, (Variable, TensorType)):
            resolved[name] = spec
        elif isinstance(spec, str):
            try:
                resolved[name] = type_from_spec(spec)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"parse: name {name!r} has unknown type spec {spec!r}: {exc}") from None
        else:
            raise TypeError(f"parse: name {name!r} maps to {spec!r}, not a type spec, TensorType or Variable")
    return resolved


@dataclass
class _Step:
    """Build one value from the values of `operands`, once those are built (`node`: where, for errors)."""

    operands: list[ast.expr]
    build: Callable[[list[Value]], Value]
    node: ast.AST | None = None


class _Parser:
    def __init__(self, text: str, types: dict[str, Variable | TensorType]):
        self.types = types
        self.names: dict[str, Variable] = {}
        # ast refuses leading indentation in eval mode: parse without it, report positions in `text`
        self.source = text.lstrip()
        self.encoded = text.encode("utf-8")
        self.skipped = len(self.encoded) - len(self.source.encode("utf-8"))
        self.line_starts = _line_starts(self.encoded)
        self.source_line_starts = _line_starts(self.source.encode("utf-8"))

    def run(self) -> Variable:
        try:
            tree = ast.parse(self.source, mode="eval")
        except SyntaxError as exc:
            # point into the text as given, before its leading whitespace was skipped
            skipped = self.encoded[: self.skipped]
            columns = len(skipped) - (skipped.rfind(b"\n") + 1)
            if exc.lineno == 1 and exc.offset:
                exc.offset += columns
            if exc.end_lineno == 1 and exc.end_offset:
                exc.end_offset += columns
            if exc.lineno is not None:
                exc.lineno += skipped.count(b"\n")
            if exc.end_lineno is not None:
                exc.end_lineno += skipped.count(b"\n")
            raise
        except (RecursionError, MemoryError):
            raise ValueError("parse: the expression is nested too deeply for Python's parser") from None
        values: list[Value] = []
        stack: list[ast.expr | _Step] = [tree.body]
        while stack:
            item = stack.pop()
            if isinstance(item, _Step):
                count = len(item.operands)
                args = values[len(values) - count :]
                del values[len(values) - count :]
                try:
                    values.append(item.build(args))
                except LiteralOverflowError as exc:
                    raise LiteralOverflowError(f"parse: {exc} (at {self.where(item.node)})") from None
                continue
            step = self.plan(item)
            step.node = item
            stack.append(step)
            stack.extend(reversed(step.operands))
        (result,) = values
        try:
            return as_variable(result)
        except LiteralOverflowError as exc:
            raise LiteralOverflowError(f"parse: {exc}") from None

    # -- positions ------------------------------------------------------------------
    def offset(self, node: ast.AST) -> int:
        """Byte offset of `node` in the original text."""
        return self.skipped + self.source_line_starts[node.lineno - 1] + node.col_offset

    def where(self, node: ast.AST) -> str:
        offset = self.offset(node)
        line = bisect.bisect_right(self.line_starts, offset) - 1
        column = len(self.encoded[self.line_starts[line] : offset].decode("utf-8", errors="replace")) + 1
        if len(self.line_starts) == 1:
            return f"column {column}"
        return f"line {line + 1}, column {column}"

    def error(self, what: str, node: ast.AST) -> ValueError:
        return ValueError(f"parse: {what} at {self.where(node)}")

    # -- the whitelist --------------------------------------------------------------
    def plan(self, node: ast.expr) -> _Step:
        if isinstance(node, ast.Name):
            return _Step([], lambda _: self.variable(node.id))
        if isinstance(node, ast.Constant):
            value = self.literal(node)
            return _Step([], lambda _: value)
        if isinstance(node, ast.UnaryOp):
            return self.plan_unary(node)
        if isinstance(node, ast.BinOp):
            return self.plan_binary(node)
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise self.error("chained comparison (use one comparison per expression)", node)
            op = _COMPARE.get(type(node.ops[0]))
            if op is None:
                raise self.error(f"unsupported operator {type(node.ops[0]).__name__!r}", node)
            return _Step([node.left, node.comparators[0]], lambda args: op(*args))
        if isinstance(node, ast.Attribute):
            if node.attr != "T":
                raise self.error(f"unsupported attribute '.{node.attr}'", node)
            return _Step([node.value], lambda args: ops.transpose(args[0]))
        if isinstance(node, ast.Call):
            return self.plan_call(node)
        if isinstance(node, ast.Subscript):
            return self.plan_subscript(node)
        if isinstance(node, ast.List):
            array = self.array(node)
            return _Step([], lambda _: array)
        raise self.error(f"unsupported syntax {type(node).__name__!r}", node)

    def array(self, node: ast.List) -> Variable:
        """`[[1.0, 2.0], [3.0, 4.0]]`: an array constant (as printing shows one), float64 when an
        element is a float, else int64; nested lists of numbers only, rectangular."""

        def element(item: ast.expr) -> Any:
            if isinstance(item, ast.List):
                return [element(e) for e in item.elts]
            sign, literal = (
                (-1, item.operand)
                if isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub)
                else (1, item)
            )
            value = literal.value if isinstance(literal, ast.Constant) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return sign * value
            raise self.error("an array literal holds numbers only", item)

        values = element(node)
        try:
            data = np.array(values)
        except ValueError:
            raise self.error("an array literal must be rectangular", node) from None
        if data.dtype == object or data.size == 0:
            raise self.error("an array literal must be rectangular and not empty", node)
        return constant(data.astype(np.float64 if data.dtype.kind == "f" else np.int64))

    def plan_subscript(self, node: ast.Subscript) -> _Step:
        """`x[1:, i]`, `x[None, ..., ::2]`: bounds and indices are expressions, built before the index."""
        items = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        operands: list[ast.expr] = [node.value]
        shape: list[Any] = []  # per item: None / Ellipsis, an operand position, or a slice of positions
        for item in items:
            if isinstance(item, ast.Constant) and (item.value is None or item.value is Ellipsis):
                shape.append(item.value)
            elif isinstance(item, ast.Slice):
                bounds = []
                for bound in (item.lower, item.upper, item.step):
                    if bound is None:
                        bounds.append(None)
                    else:
                        bounds.append(len(operands))
                        operands.append(bound)
                shape.append(tuple(bounds))
            else:
                shape.append(len(operands))
                operands.append(item)

        def build(args: list[Value]) -> Value:
            def value(k: int | None) -> Any:
                return None if k is None else args[k]

            key = [
                slice(*map(value, entry))
                if isinstance(entry, tuple)
                else entry
                if entry in (None, ...)
                else args[entry]
                for entry in shape
            ]
            try:
                return ops.subtensor(args[0], tuple(key))
            except (TypeError, IndexError, ValueError) as exc:
                raise self.error(str(exc), node) from None

        return _Step(operands, build)

    def literal(self, node: ast.Constant) -> int | float | Variable:
        """A number (a weak literal), or True / False: a bool constant (a switch's condition, say)."""
        value = node.value
        if isinstance(value, bool):
            return constant(np.bool_(value))
        if not isinstance(value, (int, float)):
            raise self.error(f"unsupported literal {value!r}", node)
        return value

    def plan_unary(self, node: ast.UnaryOp) -> _Step:
        if isinstance(node.op, ast.UAdd):
            return _Step([node.operand], lambda args: args[0])
        if not isinstance(node.op, ast.USub):
            raise self.error(f"unsupported operator {type(node.op).__name__!r}", node)
        return _Step([node.operand], lambda args: -args[0] if _is_literal(args[0]) else ops.neg(args[0]))

    def plan_binary(self, node: ast.BinOp) -> _Step:
        op = _BINARY.get(type(node.op))
        if op is None:
            raise self.error(f"unsupported operator {type(node.op).__name__!r}", node)
        operands = [node.right]
        left = node.left
        if isinstance(node.op, _VARIADIC):
            # `a + b + c` nests to the left; a link starting where the chain starts is not parenthesised
            while (
                isinstance(left, ast.BinOp)
                and type(left.op) is type(node.op)
                and (left.lineno, left.col_offset) == (node.lineno, node.col_offset)
            ):
                operands.append(left.right)
                left = left.left
        operands.append(left)
        operands.reverse()
        kind = type(node.op)
        if kind not in _PYTHON_ARITHMETIC:
            return _Step(operands, lambda args: op(*args))

        def build(args: list[Value]) -> Value:
            # Python evaluates a chain from the left: its leading literals meet each other first.
            while len(args) > 1 and _is_literal(args[0]) and _is_literal(args[1]):
                args = [self.fold(kind, args[0], args[1], node), *args[2:]]
            return args[0] if len(args) == 1 else op(*args)

        return _Step(operands, build)

    def fold(self, kind: type, a: int | float, b: int | float, node: ast.AST) -> int | float:
        """`a <op> b` as Python computes it, refusing what no dtype could hold or a graph could mean.

        Too large a result is a LiteralOverflowError that `run` places in the text.
        """
        piece = f"{_operand_text(a)} {_SYMBOLS[kind]} {_operand_text(b)}"
        if isinstance(a, int) and isinstance(b, int) and _int_bits(kind, a, b) > MAX_LITERAL_BITS:
            raise LiteralOverflowError(f"{piece} is an integer of more than {MAX_LITERAL_BITS} bits")
        try:
            value = _PYTHON_ARITHMETIC[kind](a, b)
        except ZeroDivisionError:
            raise self.error(f"{piece} divides by zero", node) from None
        except OverflowError as exc:
            raise LiteralOverflowError(f"{piece} overflows: {exc}") from None
        if not isinstance(value, (int, float)):
            raise self.error(f"{piece} is not a real number", node)
        return value

    def plan_call(self, node: ast.Call) -> _Step:
        operands: list[ast.expr] = []
        if isinstance(node.func, ast.Name):
            name = node.func.id
            function = FUNCTIONS.get(name)
            if function is None:
                raise self.error(f"unknown function {name!r}", node)
        elif isinstance(node.func, ast.Attribute):
            name = node.func.attr
            function = METHODS.get(name)
            if function is None:
                raise self.error(f"unknown method '.{name}'", node)
            operands.append(node.func.value)
        else:
            raise self.error(f"unsupported call of {type(node.func).__name__!r}", node)
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise self.error(f"{name}: unsupported *arguments", arg)
            operands.append(arg)
        statics: list[Any] = []
        if function.static is not None:
            if len(operands) <= function.arity:
                raise self.error(f"{name} needs a {function.static} after its operand(s)", node)
            operands, rest = operands[: function.arity], operands[function.arity :]
            statics.append(self.static(function.static, rest, name))
        kwargs: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                raise self.error(f"{name}: unsupported **arguments", keyword.value)
            if keyword.arg == "message" and function.takes_message:
                value = keyword.value
                if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                    raise self.error(f"{name}: the message must be one string", value)
                kwargs["message"] = value.value
                continue
            if keyword.arg == "keepdims" and function.takes_keepdims:
                value = keyword.value
                if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
                    raise self.error(f"{name}: keepdims must be True or False", value)
                kwargs["keepdims"] = value.value
                continue
            if keyword.arg != "axis" or not function.takes_axis:
                raise self.error(f"{name}: unexpected keyword {keyword.arg!r}", keyword.value)
            kwargs["axis"] = self.axis(keyword.value)
        count = len(operands)
        if (function.arity is None and count == 0) or (
            function.arity is not None and count != function.arity
        ):
            expected = "one or more" if function.arity is None else function.arity
            raise self.error(f"{name} takes {expected} operand(s), got {count}", node)
        return _Step(operands, lambda args: function.build(*args, *statics, **kwargs))

    def static(self, kind: str, nodes: list[ast.expr], name: str) -> Any:
        """A shape (ints, or one tuple of ints), a DimShuffle order (the same, 'x' for a new axis) or a
        dtype (one string) given to `name`."""
        if kind == "dtype":
            if len(nodes) == 1 and isinstance(nodes[0], ast.Constant) and isinstance(nodes[0].value, str):
                return nodes[0].value
            raise self.error(f"{name}: the dtype must be one string such as 'float32'", nodes[0])
        if len(nodes) == 1 and isinstance(nodes[0], ast.Tuple):
            nodes = list(nodes[0].elts)
        shape: list[int | str] = []
        for n in nodes:
            if kind == "order" and isinstance(n, ast.Constant) and n.value == "x":
                shape.append("x")
                continue
            sign, literal = (
                (-1, n.operand) if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) else (1, n)
            )
            if not (
                isinstance(literal, ast.Constant)
                and isinstance(literal.value, int)
                and not isinstance(literal.value, bool)
            ):
                what = "axes and 'x'" if kind == "order" else "ints"
                raise self.error(f"{name}: the {kind} must be {what}, or a tuple of them", n)
            shape.append(sign * literal.value)
        return tuple(shape)

    def axis(self, node: ast.expr) -> int | tuple[int, ...] | None:
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.Tuple):
            return tuple(self.axis_entry(element) for element in node.elts)
        return self.axis_entry(node)

    def axis_entry(self, node: ast.expr) -> int:
        sign = 1
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            sign, node = -1, node.operand
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, int)
            and not isinstance(node.value, bool)
        ):
            return sign * node.value
        raise self.error("axis must be an int, a tuple of ints or None", node)

    def variable(self, name: str) -> Variable:
        var = self.names.get(name)
        if var is None:
            spec = self.types.get(name, TensorType("float64", ()))
            var = spec if isinstance(spec, Variable) else spec(name)
            self.names[name] = var
        return var


def _is_literal(value: Value) -> bool:
    return not isinstance(value, Variable)


def _operand_text(value: int | float) -> str:
    text = describe_literal(value)
    return f"({text})" if text.startswith("-") else text


def _int_bits(kind: type, a: int, b: int) -> int:
    """An upper bound on the bits of `a <op> b` for ints, computed without computing it."""
    if kind is ast.Mult:
        return a.bit_length() + b.bit_length()
    if kind is ast.Pow and b > 0 and abs(a) > 1:
        return b * a.bit_length()
    return max(a.bit_length(), b.bit_length()) + 1


def _line_starts(encoded: bytes) -> list[int]:
    """Byte offsets where each line starts."""
    return [0] + [i + 1 for i, byte in enumerate(encoded) if byte == ord("\n")]

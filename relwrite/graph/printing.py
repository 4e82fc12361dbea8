"""Printing graphs: infix (`pprint`), trees (`dprint`), the FunctionGraph repr and Graphviz.

Every printer walks the graph with its own stack, never by recursion, so a
100,000-node chain prints as easily as a small graph.

- `pprint(x)` gives Python-like infix text, `((A @ x) + (A @ y))`, that
  `relwrite.graph.parse.parse` reads back into the same graph (for the ops
  it knows).
- `dprint(x)` gives Aesara's debug tree, with `[id A]` tags and shared nodes
  expanded once.
- `graph_repr(outputs)` gives the call-syntax body of `repr(FunctionGraph)`,
  with `*1 -> ...` tags on shared subterms.
- `to_dot(x)` gives Graphviz DOT text, and `picture_html(x)` the picture a
  notebook shows of a variable (attached to Variable here: basic.py, which
  defines it, is below printing) or of a FunctionGraph.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, TextIO

import numpy as np

from relwrite.graph import ops
from relwrite.graph.basic import Apply, Constant, Op, Variable, clone_get_equiv, io_toposort
from relwrite.graph.shape import Shape_i
from relwrite.graph.subtensor import ARRAY, INT, NEWAXIS
from relwrite.graph.terms import structural_hash

# How tightly a printed piece binds, deciding when an operand needs parentheses.
PREFIX = 0  # `-x` and negative literals: `(-x) ** 2` needs them
NUMBER = 50  # non-negative literals: fine as operands, but `(2).T` needs them
ATOM = 100  # names, calls, parenthesised infix, `x.T`, list literals

# dprint draws at most this many ` |` bars; deeper lines show their depth as `[depth] |`.
DPRINT_INDENT_CAP = 50

# Constants with more elements than this print as their type rather than their values.
_MAX_PRINTED_ELEMENTS = 16


def _as_outputs(obj: Any) -> list[Variable]:
    """The variables to print: a Variable, a sequence of them, anything with `.outputs` (a FunctionGraph),
    or anything with an `.fgraph` (a compiled function: the graph it runs, as rewritten)."""
    if isinstance(obj, Variable):
        return [obj]
    outputs = getattr(getattr(obj, "fgraph", obj), "outputs", obj)
    if isinstance(outputs, Sequence) and not isinstance(outputs, str):
        outputs = list(outputs)
        if all(isinstance(v, Variable) for v in outputs):
            return outputs
    raise TypeError(
        "expected a Variable, a sequence of Variables, a FunctionGraph or a compiled function, "
        f"got {type(obj).__name__}"
    )


def _constant_text(const: Constant) -> str:
    """A constant's value as a literal: `2`, `2.0`, `-1.5`, `[1.0, 2.0]` (large arrays: their type)."""
    # numpy's str of a scalar is the shortest text that reads back as the same value and dtype
    data = const.data
    if data.ndim == 0:
        return str(data[()])
    if not 0 < data.size <= _MAX_PRINTED_ELEMENTS:
        return f"Constant{{{const.type}}}"
    items = [str(v) for v in data.reshape(-1)]
    for length in reversed(data.shape):
        items = ["[" + ", ".join(items[i : i + length]) + "]" for i in range(0, len(items), length)]
    return items[0]


def _leaf_text(var: Variable) -> str:
    """A leaf as dprint and graph_repr show it: its name, its value, or its type."""
    if var.name is not None:
        return var.name
    if isinstance(var, Constant):
        return _constant_text(var)
    return str(var)


# -- pprint -------------------------------------------------------------------------------------

FOLDED_SYMBOLS = frozenset({"+", "-", "*", "/", "**"})
"""The operators `parse` computes itself, as Python does, between two number literals (`-`: also unary)."""


def _is_number_literal(var: Variable) -> bool:
    """Whether pprint writes `var` as a number literal (`2`, `-1.5`): `parse` reads it as a Python number."""
    return (
        isinstance(var, Constant)
        and var.name is None
        and var.data.ndim == 0
        and var.dtype != "bool"
        and bool(np.isfinite(var.data))
    )


@dataclass(frozen=True)
class Operand:
    """Input `index` of the node, parenthesised when it binds less tightly than `min_binding`."""

    index: int
    min_binding: float


@dataclass(frozen=True)
class Layout:
    """How one output prints: text pieces and operands in order, and how tightly the result binds."""

    parts: tuple[str | Operand, ...]
    binding: float


class Printer(Protocol):
    """What `PPrinter.assign` accepts: anything that lays out an apply node's output."""

    def layout(self, node: Apply, index: int) -> Layout: ...


class FunctionPrinter:
    """Call syntax `name(x, y, prop=value)`; `name` defaults to the op's name.

    Props print as keyword arguments; output `i` of a multi-output node gets `[i]`.
    """

    def __init__(self, name: str | None = None):
        self.name = name

    def layout(self, node: Apply, index: int) -> Layout:
        parts: list[str | Operand] = [f"{self.name or node.op.name}("]
        for i in range(len(node.inputs)):
            if i:
                parts.append(", ")
            parts.append(Operand(i, float("-inf")))
        props = [f"{p}={getattr(node.op, p)!r}" for p in node.op.__props__]
        if props:
            parts.append(", " * bool(node.inputs) + ", ".join(props))
        parts.append(")" if len(node.outputs) == 1 else f")[{index}]")
        return Layout(tuple(parts), ATOM)


class OperatorPrinter:
    """Infix `(x + y + z)`: one pair of parentheses around every application, as in Aesara.

    `precedence` follows Python's (higher binds tighter): an operand binding less
    tightly, such as `-x` under `**`, gets its own parentheses.  `assoc`
    ("left", "right" or "either") is accepted for compatibility with Aesara; since
    every application is parenthesised it never changes the text.  A
    single-input application prints in call syntax, `add(x)`, and so does an
    arithmetic one whose first two operands are number literals, `pow(2, 64)`,
    since the parser computes `2 ** 64` as Python does.
    """

    def __init__(self, symbol: str, precedence: float, assoc: str = "either"):
        if assoc not in ("left", "right", "either"):
            raise ValueError(f"OperatorPrinter: assoc must be 'left', 'right' or 'either', got {assoc!r}")
        self.symbol = symbol
        self.precedence = precedence
        self.assoc = assoc

    def layout(self, node: Apply, index: int) -> Layout:
        if len(node.inputs) < 2 or (
            self.symbol in FOLDED_SYMBOLS
            and _is_number_literal(node.inputs[0])
            and _is_number_literal(node.inputs[1])
        ):
            return FunctionPrinter().layout(node, index)
        parts: list[str | Operand] = ["("]
        for i in range(len(node.inputs)):
            if i:
                parts.append(f" {self.symbol} ")
            parts.append(Operand(i, self.precedence))
        parts.append(")")
        return Layout(tuple(parts), ATOM)


class PrefixPrinter:
    """A unary prefix operator, `-x`; the operand is parenthesised unless it is atomic: `-(x + y)`.

    Minus on a number literal prints in call syntax, `neg(2.0)`, since `-(2.0)` reads back as -2.0.
    """

    def __init__(self, symbol: str, precedence: float = PREFIX):
        self.symbol = symbol
        self.precedence = precedence

    def layout(self, node: Apply, index: int) -> Layout:
        if len(node.inputs) != 1 or (self.symbol in FOLDED_SYMBOLS and _is_number_literal(node.inputs[0])):
            return FunctionPrinter().layout(node, index)
        return Layout((self.symbol, Operand(0, ATOM)), self.precedence)


class CompositePrinter:
    """A fused node as the expression it computes, `fused[(exp(x) + 1.0)]`, over the node's own inputs."""

    def layout(self, node: Apply, index: int) -> Layout:
        return Layout(("fused[", *_composite_parts(node.op, index), "]"), ATOM)


@lru_cache(maxsize=256)
def _composite_parts(op: ops.Composite, index: int) -> tuple[str | Operand, ...]:
    """The inner expression of output `index` as text pieces and operands (one per inner input)."""
    marks = [f"\x00{i}\x00" for i in range(len(op.inputs))]
    memo = {inner: Variable(inner.type, name=mark) for inner, mark in zip(op.inputs, marks)}
    equiv = clone_get_equiv(op.inputs, op.outputs, copy_inputs=False, memo=memo)
    text = pprint(equiv[op.outputs[index]])
    parts: list[str | Operand] = []
    for k, piece in enumerate(text.split("\x00")):
        if k % 2:
            parts.append(Operand(int(piece), ATOM))
        elif piece:
            parts.append(piece)
    return tuple(parts)


class DimShufflePrinter:
    """`x.T` for a transpose, call syntax for any other DimShuffle."""

    def layout(self, node: Apply, index: int) -> Layout:
        if node.op.is_transpose:
            return Layout((Operand(0, ATOM), ".T"), ATOM)
        return FunctionPrinter("dimshuffle").layout(node, index)


class ShapeIPrinter:
    """`shape_i(x, 0)`: the axis as the parser reads it."""

    def layout(self, node: Apply, index: int) -> Layout:
        return Layout(("shape_i(", Operand(0, float("-inf")), f", {node.op.i})"), ATOM)


class SubtensorPrinter:
    """`x[1:, i]`, and `inc_subtensor(x[1:], y)` / `set_subtensor(x[1:], y)`: what the parser reads."""

    def layout(self, node: Apply, index: int) -> Layout:
        op = node.op
        updating = isinstance(op, ops.IncSubtensor)
        position = 2 if updating else 1
        parts: list[str | Operand] = [f"{op.name}("] if updating else []
        parts += [Operand(0, ATOM), "[" if op.idx_list else "[()"]
        for k, entry in enumerate(op.idx_list):
            if k:
                parts.append(", ")
            if entry == NEWAXIS:
                parts.append("None")
            elif entry in (INT, ARRAY):
                parts.append(Operand(position, float("-inf")))
                position += 1
            else:
                for j, has in enumerate(entry[1:] if entry[3] else entry[1:3]):
                    if j:
                        parts.append(":")
                    if has:
                        parts.append(Operand(position, float("-inf")))
                        position += 1
        parts.append("]")
        if updating:
            parts += [", ", Operand(1, float("-inf")), ")"]
        return Layout(tuple(parts), ATOM)


PrinterKey = Op | type | Callable[[Variable], bool]


class PPrinter:
    """Infix pretty printer; `pprint(variable_or_fgraph)` returns the text, one line per output.

    Leaves print as their name, constants as their value, and unnamed inputs as
    `_1`, `_2`, ... in order of appearance (skipping names the graph uses).
    Shared subterms are written out at every use (`graph_repr` and `dprint` show
    sharing); a graph whose written-out form would exceed `max_terms` terms is
    refused with a ValueError rather than printed for ever.
    """

    def __init__(self, max_terms: int = 1_000_000):
        self.max_terms = max_terms
        self._by_op: dict[Op, Printer] = {}
        self._by_class: dict[type, Printer] = {}
        self._by_predicate: list[tuple[Callable[[Variable], bool], Printer]] = []
        for op_class, printer in _default_printers().items():
            self.assign(op_class, printer)

    def assign(self, key: PrinterKey, printer: Printer) -> None:
        """Print with `printer` the outputs of an op instance, of an op class, or where `key(var)` holds.

        A predicate beats an op instance, which beats an op class (nearest base
        class first); among predicates the latest assigned wins.
        """
        if not callable(getattr(printer, "layout", None)):
            raise TypeError(f"PPrinter.assign: {printer!r} has no layout(node, index) method")
        if isinstance(key, Op):
            self._by_op[key] = printer
        elif isinstance(key, type) and issubclass(key, Op):
            self._by_class[key] = printer
        elif callable(key):
            self._by_predicate.insert(0, (key, printer))
        else:
            raise TypeError(f"PPrinter.assign: expected an Op, an Op class or a predicate, got {key!r}")

    def printer_for(self, var: Variable) -> Printer:
        """The printer used for the owned variable `var`."""
        for predicate, printer in self._by_predicate:
            if predicate(var):
                return printer
        return self.op_printer(var.owner.op)

    def op_printer(self, op: Op) -> Printer:
        """The printer assigned to `op` or its class (predicates aside)."""
        printer = self._by_op.get(op)
        if printer is not None:
            return printer
        for cls in type(op).__mro__:
            if cls in self._by_class:
                return self._by_class[cls]
        return _FUNCTION_PRINTER

    def __call__(self, obj: Any) -> str:
        outputs = _as_outputs(obj)
        nodes = io_toposort([], outputs)
        self._check_size(nodes, outputs)
        state = _PrintState(self, nodes, outputs)
        return "\n".join(state.text(out) for out in outputs)

    def _check_size(self, nodes: list[Apply], outputs: list[Variable]) -> None:
        total = _written_terms(nodes, outputs)
        if total > self.max_terms:
            raise ValueError(
                f"pprint: written out, the graph has {total} terms (limit {self.max_terms}) because shared "
                "subterms repeat at every use; use graph_repr or dprint, which show sharing"
            )


def _written_terms(nodes: list[Apply], outputs: list[Variable]) -> int:
    """How many terms `outputs` have written out as trees (shared subterms at every use), in one pass
    over their toposorted `nodes`."""
    terms: dict[Apply, int] = {}
    for node in nodes:
        terms[node] = 1 + sum(terms[v.owner] if v.owner is not None else 1 for v in node.inputs)
    return sum(terms[v.owner] if v.owner is not None else 1 for v in outputs)


class _PrintState:
    """One pprint call: the printer chosen for each op, placeholder names for unnamed inputs."""

    def __init__(self, printer: PPrinter, nodes: list[Apply], outputs: list[Variable]):
        self.printer = printer
        self.op_printers: dict[int, Printer] = {}
        self.placeholders: dict[int, str] = {}
        self.taken = {v.name for node in nodes for v in node.inputs if v.owner is None}
        self.taken.update(v.name for v in outputs if v.owner is None)
        self.next_placeholder = 1

    def layout(self, var: Variable) -> Layout:
        """The layout of `var`, asked for as `var` is written (so placeholders number in text order)."""
        if var.owner is not None:
            return self._printer_for(var).layout(var.owner, var.index)
        if var.name is not None:
            return Layout((var.name,), ATOM)
        if isinstance(var, Constant):
            text = _constant_text(var)
            if var.data.ndim:
                return Layout((text,), ATOM)
            return Layout((text,), PREFIX if text.startswith("-") else NUMBER)
        return Layout((self.placeholder(var),), ATOM)

    def _printer_for(self, var: Variable) -> Printer:
        if self.printer._by_predicate:
            return self.printer.printer_for(var)
        op = var.owner.op  # hashing ops is slow: look each op object up once
        if id(op) not in self.op_printers:
            self.op_printers[id(op)] = self.printer.op_printer(op)
        return self.op_printers[id(op)]

    def placeholder(self, var: Variable) -> str:
        name = self.placeholders.get(id(var))
        if name is None:
            while f"_{self.next_placeholder}" in self.taken:
                self.next_placeholder += 1
            name = f"_{self.next_placeholder}"
            self.taken.add(name)
            self.placeholders[id(var)] = name
        return name

    def text(self, output: Variable) -> str:
        pieces: list[str] = []
        stack: list[str | tuple[Variable, float]] = [(output, float("-inf"))]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                pieces.append(item)
                continue
            var, min_binding = item
            layout = self.layout(var)
            if layout.binding < min_binding:
                pieces.append("(")
                stack.append(")")
            for part in reversed(layout.parts):
                if isinstance(part, str):
                    stack.append(part)
                else:
                    stack.append((var.owner.inputs[part.index], part.min_binding))
        return "".join(pieces)


_FUNCTION_PRINTER = FunctionPrinter()


def _default_printers() -> dict[type, Printer]:
    return {
        ops.Lt: OperatorPrinter("<", -3, "left"),
        ops.Le: OperatorPrinter("<=", -3, "left"),
        ops.Gt: OperatorPrinter(">", -3, "left"),
        ops.Ge: OperatorPrinter(">=", -3, "left"),
        ops.Eq: OperatorPrinter("==", -3, "left"),
        ops.Neq: OperatorPrinter("!=", -3, "left"),
        ops.Add: OperatorPrinter("+", -2, "either"),
        ops.Sub: OperatorPrinter("-", -2, "left"),
        ops.Mul: OperatorPrinter("*", -1, "either"),
        ops.TrueDiv: OperatorPrinter("/", -1, "left"),
        ops.Dot: OperatorPrinter("@", -1, "left"),
        ops.Neg: PrefixPrinter("-"),
        ops.Pow: OperatorPrinter("**", 1, "right"),
        ops.DimShuffle: DimShufflePrinter(),
        ops.Composite: CompositePrinter(),
        ops.Cast: FunctionPrinter("cast"),
        ops.LogSoftmax: FunctionPrinter("log_softmax"),
        Shape_i: ShapeIPrinter(),
        ops.Subtensor: SubtensorPrinter(),
        ops.AdvancedSubtensor: SubtensorPrinter(),
        ops.IncSubtensor: SubtensorPrinter(),
    }


pprint = PPrinter()


# -- dprint -------------------------------------------------------------------------------------


def _tag(number: int) -> str:
    """Aesara's id letters: A..Z, then BA, BB, ... (base 26 with A as zero)."""
    letters = ""
    while True:
        number, digit = divmod(number, 26)
        letters = chr(ord("A") + digit) + letters
        if not number:
            return letters


def _indent(depth: int) -> str:
    if depth <= DPRINT_INDENT_CAP:
        return " |" * depth
    return f"[{depth}] |"


def dprint(
    obj: Any, file: TextIO | str | None = None, *, depth: int = -1, print_type: bool = False
) -> str | None:
    """Print the graph as a tree, Aesara style; `file="str"` returns the text instead.

    `obj` is a variable, a list of them, a FunctionGraph or a compiled
    function (the graph it runs, after rewriting).

    Each apply node and each leaf gets an id, `[id A]`, `[id B]`, ... (then
    `[id BA]`); a node's line ends with its output's name in quotes.  A node
    used by several parents is expanded under its first one only and shows as
    its bare line afterwards.  Children are indented with ` |` per level; past
    `DPRINT_INDENT_CAP` (50) levels a line starts with its depth, `[51] |`,
    instead, so the text stays linear in the size of the graph.

    `depth` limits the levels printed (1: the outputs alone; -1: all), as
    Aesara's `debugprint`; a node cut off by it is expanded where it next
    appears within reach.  `print_type` adds each variable's type after its
    id, `<TensorType(float64, (None,))>`.

    With `file=None` the tree goes to standard output; with a file object it is
    written there; either way the result is None.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < -1:
        raise ValueError(f"dprint: depth must be -1 (no limit) or a number of levels >= 0, got {depth!r}")
    if not isinstance(print_type, bool):
        raise TypeError(f"dprint: print_type must be True or False, got {print_type!r}")
    outputs = _as_outputs(obj)
    ids: dict[int, str] = {}
    expanded: set[Apply] = set()
    lines: list[str] = []

    def id_of(thing: Any) -> str:
        if id(thing) not in ids:
            ids[id(thing)] = _tag(len(ids))
        return ids[id(thing)]

    for output in outputs if depth else ():
        stack = [(output, 0)]
        while stack:
            var, level = stack.pop()
            node = var.owner
            shown_type = f" <{var.type}>" if print_type else ""
            if node is None:
                lines.append(f"{_indent(level)}{_leaf_text(var)} [id {id_of(var)}]{shown_type}")
                continue
            label = str(node.op) if len(node.outputs) == 1 else f"{node.op}.{var.index}"
            lines.append(f"{_indent(level)}{label} [id {id_of(node)}]{shown_type} '{var.name or ''}'")
            if node not in expanded and level + 1 != depth:
                expanded.add(node)
                stack.extend((inp, level + 1) for inp in reversed(node.inputs))
    text = "".join(line + "\n" for line in lines)
    if file == "str":
        return text
    if file is None:
        file = sys.stdout
    if not callable(getattr(file, "write", None)):
        raise TypeError(f"dprint: file must be None, 'str' or a writable file, got {file!r}")
    file.write(text)
    return None


# -- FunctionGraph repr -------------------------------------------------------------------------


def graph_repr(outputs: Any) -> str:
    """The outputs in call syntax, `add(z, mul(x, true_div(z, x)))`, separated by ", ".

    An apply node reached more than once is written out at its first occurrence
    as `*1 -> add(y, z)` and is `*1` afterwards; outputs of a multi-output node
    carry `::i`.  Leaves print as their name (or value, or type).
    """
    outputs = _as_outputs(outputs)
    uses: dict[Apply, int] = {}
    for node in io_toposort([], outputs):
        for var in node.inputs:
            if var.owner is not None:
                uses[var.owner] = uses.get(var.owner, 0) + 1
    for var in outputs:
        if var.owner is not None:
            uses[var.owner] = uses.get(var.owner, 0) + 1
    tags: dict[Apply, int] = {}
    expanded: set[Apply] = set()
    pieces: list[str] = []
    stack: list[str | Variable] = []
    for i, var in enumerate(reversed(outputs)):
        if i:
            stack.append(", ")
        stack.append(var)
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            pieces.append(item)
            continue
        node = item.owner
        if node is None:
            pieces.append(_leaf_text(item))
            continue
        suffix = f"::{item.index}" if len(node.outputs) > 1 else ""
        if node in expanded:
            pieces.append(f"*{tags[node]}{suffix}")
            continue
        expanded.add(node)
        if uses[node] > 1:
            tags[node] = len(tags) + 1
            pieces.append(f"*{tags[node]} -> ")
        pieces.append(f"{node.op}(")
        stack.append(")" + suffix)
        for i, var in enumerate(reversed(node.inputs)):
            if i:
                stack.append(", ")
            stack.append(var)
    return "".join(pieces)


SHORT_TERMS = 2_000
"""Above this many terms written out, `expression_text` gives `graph_repr`'s text instead of `pprint`'s."""


def expression_text(obj: Any, max_terms: int = SHORT_TERMS) -> str:
    """`pprint`'s text of `obj` when written out as a tree it has at most `max_terms` terms, else
    `graph_repr`'s, which writes each shared node once: linear in the graph's size, for messages,
    explanations and reports about graphs of any size (pprint of a chain that reuses each node twice
    doubles at every level)."""
    outputs = _as_outputs(obj)
    if _written_terms(io_toposort([], outputs), outputs) > max_terms:
        return graph_repr(outputs)
    return pprint(obj)


# -- Graphviz -----------------------------------------------------------------------------------


def _dot_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


_DOT_STYLES = {
    "input": 'style=filled, fillcolor="#b8e0b8"',
    "constant": 'style=filled, fillcolor="#e0e0e0"',
    "output": 'style=filled, fillcolor="#b8d0f0"',
    "changed": 'style=filled, fillcolor="#f8c890"',
}


def to_dot(obj: Any, name: str = "relwrite", *, before: Any = None, expand: bool = False) -> str:
    """Graphviz DOT text for the graph: each node a box labelled by its op and its result's type.

    Inputs, constants and outputs are ellipses filled in different colours
    (each use of a constant its own ellipse, beside its reader); a value
    computed by one node and read by another is the edge between the two.
    An edge into a node with several inputs is labelled at its head with the
    input's position, an edge out of a node with several outputs at its tail
    with the output's index (never mid-edge: that makes Graphviz double every
    rank of the layout).  A fused node shows the expression it computes over its
    inputs `#0`, `#1`...; with `expand` its inner graph is drawn too, in a
    box of its own.  With `before` (an earlier state of the graph: variables
    or anything with `.outputs`), the nodes whose expression `before` does
    not compute are filled orange: what a rewrite changed.
    """
    lines = [f"digraph {_dot_string(name)} {{", "  node [fontname=Helvetica]; edge [fontname=Helvetica];"]
    lines += _dot_body(_as_outputs(obj), "", before, expand)
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_dot_pair(before: Any, after: Any, name: str = "rewrite") -> str:
    """DOT text drawing two graphs side by side, `before` and `after`, what changed filled orange."""
    lines = [f"digraph {_dot_string(name)} {{", "  node [fontname=Helvetica]; edge [fontname=Helvetica];"]
    for prefix, graph, earlier in (("b", before, None), ("a", after, before)):
        lines.append(f"  subgraph cluster_{prefix} {{")
        lines.append(f"    label={_dot_string('before' if prefix == 'b' else 'after')};")
        lines += ["  " + line for line in _dot_body(_as_outputs(graph), prefix, earlier, False)]
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_body(outputs: list[Variable], prefix: str, before: Any, expand: bool) -> list[str]:
    """The DOT statements of one graph; identifiers start with `prefix` (so two graphs can share a page)."""
    old: set[int] | None = None
    if before is not None:
        memo: dict = {}
        old = {structural_hash(v, memo, depth=_FULL_DEPTH) for v in _subterms(_as_outputs(before))}
        new_memo: dict = {}
    output_ids = {id(v): k for k, v in enumerate(outputs)}
    leaf_ids: dict[int, str] = {}
    node_ids: dict[Apply, str] = {}
    lines: list[str] = []
    drawn = 0  # leaf ellipses so far

    def leaf(var: Variable) -> str:
        """The leaf's ellipse: one per input and output; one per use of a constant, which so sits next to
        its reader (one ellipse read all over a deep graph draws long edges through every rank of it,
        which Graphviz lays out in time growing with their number times the depth)."""
        nonlocal drawn
        shared = id(var) in output_ids or not isinstance(var, Constant)
        if shared and id(var) in leaf_ids:
            return leaf_ids[id(var)]
        leaf_id = f"{prefix}v{drawn}"
        drawn += 1
        if shared:
            leaf_ids[id(var)] = leaf_id
        kind = "output" if id(var) in output_ids else "constant" if isinstance(var, Constant) else "input"
        label = _dot_string(_leaf_text(var))
        lines.append(f"  {leaf_id} [label={label}, shape=ellipse, {_DOT_STYLES[kind]}];")
        return leaf_id

    for number, node in enumerate(io_toposort([], outputs)):
        node_id = node_ids[node] = f"{prefix}a{number}"
        changed = old is not None and any(
            structural_hash(out, new_memo, depth=_FULL_DEPTH) not in old for out in node.outputs
        )
        style = ", " + _DOT_STYLES["changed"] if changed else ""
        lines.append(f"  {node_id} [label={_dot_string(_node_label(node))}, shape=box{style}];")
        for position, var in enumerate(node.inputs):
            source = node_ids.get(var.owner) if var.owner is not None else None
            parts = [str(var.index)] if source is not None and len(var.owner.outputs) > 1 else []
            parts += [str(position)] if len(node.inputs) > 1 else []
            label = f" [headlabel={_dot_string(' -> '.join(parts))}]" if parts else ""
            lines.append(f"  {source or leaf(var)} -> {node_id}{label};")
        if expand and isinstance(node.op, ops.Composite):
            lines += _dot_inner(node, node_id)
    for k, var in enumerate(outputs):
        if var.owner is None:
            leaf(var)
            continue
        out_id = f"{prefix}o{k}"
        label = var.name or f"output {k}"
        lines.append(f"  {out_id} [label={_dot_string(label)}, shape=ellipse, {_DOT_STYLES['output']}];")
        index = f" [taillabel={var.index}]" if len(var.owner.outputs) > 1 else ""
        lines.append(f"  {node_ids[var.owner]} -> {out_id}{index};")
    return lines


_FULL_DEPTH = 1 << 30  # structural hashes over whole subgraphs (iterative: any depth)


def _subterms(outputs: list[Variable]) -> list[Variable]:
    return [out for node in io_toposort([], outputs) for out in node.outputs]


def _node_label(node: Apply) -> str:
    """The op, or a fused node's expression over its inputs #0, #1..., and the result's type."""
    result = node.outputs[0].type
    shape = (
        "("
        + ", ".join("?" if d is None else str(d) for d in result.shape)
        + ("," if result.ndim == 1 else "")
        + ")"
    )
    if not isinstance(node.op, ops.Composite):
        return f"{node.op}\n{result.dtype} {shape}"
    expressions = []
    for index in range(len(node.outputs)):
        pieces = _composite_parts(node.op, index)
        expressions.append("".join(p if isinstance(p, str) else f"#{p.index}" for p in pieces))
    return "fused\n" + "\n".join(expressions) + f"\n{result.dtype} {shape}"


def _dot_inner(node: Apply, node_id: str) -> list[str]:
    """A fused node's inner graph, in a box of its own, its inputs named #0, #1..."""
    op = node.op
    lines = [f"  subgraph cluster_{node_id} {{", f"    label={_dot_string(str(op))}; style=dashed;"]
    names = {v: f"{node_id}_i{k}" for k, v in enumerate(op.inputs)}
    for k, var in enumerate(op.inputs):
        lines.append(f'    {names[var]} [label="#{k}", shape=ellipse];')
    for number, inner in enumerate(op.nodes):
        inner_id = f"{node_id}_n{number}"
        lines.append(f"    {inner_id} [label={_dot_string(str(inner.op))}, shape=box];")
        for var in inner.inputs:
            if var in names:
                lines.append(f"    {names[var]} -> {inner_id};")
            elif isinstance(var, Constant):
                const_id = f"{inner_id}_c{len(lines)}"
                lines.append(
                    f"    {const_id} [label={_dot_string(_leaf_text(var))}, shape=ellipse, "
                    f"{_DOT_STYLES['constant']}];"
                )
                lines.append(f"    {const_id} -> {inner_id};")
        for out in inner.outputs:
            names[out] = inner_id
    lines.append("  }")
    return lines


PICTURE_NODE_LIMIT = 200
"""Graphs with more apply nodes show as text in notebooks and reports, without running Graphviz: its
layout time grows with the number of edges spanning many ranks times the depth (a 500-node chain
reading one input every fourth node takes 7 s even with the bounds of `PICTURE_DOT_FLAGS`)."""

PICTURE_SECONDS = 2.0
"""How long Graphviz may take over one picture; then the graph shows as text."""

PICTURE_DOT_FLAGS = ("-Gnslimit=2", "-Gnslimit1=2")
"""Graphviz's network simplex (ranking, then positioning) bounded to 2 passes over the nodes: most of
the time of a deep graph's layout, for a slightly less tidy picture."""


def picture_html(obj: Any, title: str = "") -> str:
    """HTML showing a graph in a notebook: Graphviz's SVG when the `dot` program runs, else its text.

    `obj` is what `to_dot` takes.  Above `PICTURE_NODE_LIMIT` nodes, or when
    `dot` takes more than `PICTURE_SECONDS`, the text is shown instead:
    `pprint`'s, or `graph_repr`'s where shared subterms would repeat too often
    (with `title` above it).
    """
    import html
    import shutil
    import subprocess

    outputs = _as_outputs(obj)
    heading = f"<b>{html.escape(title)}</b><br>" if title else ""
    dot = shutil.which("dot")
    if dot is not None and sum(1 for _ in io_toposort([], outputs)) <= PICTURE_NODE_LIMIT:
        try:
            run = subprocess.run(
                [dot, "-Tsvg", *PICTURE_DOT_FLAGS],
                input=to_dot(outputs),
                capture_output=True,
                text=True,
                timeout=PICTURE_SECONDS,
                check=True,
            )
            svg = run.stdout[run.stdout.find("<svg") :]
            if svg:
                return heading + svg
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        text = "\n".join(pprint(v) for v in outputs)
    except ValueError:  # written out, the shared subterms would repeat too often
        text = graph_repr(outputs)
    return f"{heading}<pre>{html.escape(text)}</pre>"


def _variable_picture(var: Variable) -> str:
    """A notebook shows the variable's graph as a picture (text without Graphviz)."""
    return picture_html(var)


Variable._repr_html_ = _variable_picture

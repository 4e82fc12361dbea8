"""Tuple patterns: the pattern language of `rule` and `PatternSub`, compiled to one matcher.

A pattern is
- a tuple ``(op, *sub_patterns)``: an application of `op`;
- a string: a named logic variable (the same name binds the same value);
- a string ``"*name"``, or ``*rest`` with ``rest = Rest("name")``: a sequence
  variable, standing for zero or more operands;
- ``{"pattern": p, "constraint": fn}``: `p`, accepted only when ``fn(value)`` is true;
- a Python or numpy number: on the input side it matches a constant whose
  every element equals it; on the output side it becomes a constant;
- a graph `Variable` or `Constant`: itself (a constant matches the
  constants equal to it: same type and values);
- a NumPy array: the constant holding it (a 0-d array, the number);
- a kanren logic variable (``unification.var()``): a variable, as a name is;
- an etuple S-expression ``etuple(op, *sub_patterns)``, as the seeds write
  rules: the same as the tuple;
- in the op position, an `Op`, a name (an op variable), a logic variable, or
  ``OpClass.pattern(prop="name", ...)``: an op of exactly that class (not a
  subclass: a LogSoftmax is no Softmax to a rule) whose named
  props bind (and must agree where a name repeats; literal props must equal).

Applications of a variadic op (add, mul: associative and commutative, kept
flat by canonicalize) match their operands as a multiset: ``(log, (add, 1,
*rest))`` matches a sum holding a 1 anywhere among its operands, binding
`rest` to the others in their order; without a sequence variable every
operand must be matched.  Elsewhere operands match in order, and a
sequence variable takes the operands between the fixed ones.  Built back,
``(add, *rest)`` of one operand is that operand, and of none does not build
(`EmptyApplication`: the match gives no answer).  A side that is only built
(a rule's right side) may splice several sequence variables into one
application, ``(add, *inner, *outer)``; such a side matches nothing (which
operands each would take is not determined), so its rule runs forward only.

One compiled pattern runs on two targets: graph variables (`GraphTarget`,
for the equilibrium engine and the rule runtime, reading every node through
`note_read` so that engines know what a match looked at) and e-classes of an
e-graph (exploration's target, which gives every e-node of a class as an
application).  A target says what the applications of a value are, when two
values are the same, which values are constants, and what guards see (of a
value, and of a value matched by an application pattern: a constraint there
reads the application matched, and an e-class holds many).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from etuples import etuple
from etuples.core import ExpressionTuple
from unification import var
from unification.variable import Var, isvar

from relwrite.graph.basic import Constant, Op, OpPattern, Variable, as_variable, constant
from relwrite.graph.terms import GraphETuple, note_read, same_expression
from relwrite.relations.predicates import NUMBER, as_graph, is_literal, is_logic_variable

Constraint = Callable[[Variable], bool]
Substitution = dict[Var, Any]


class Rest:
    """A sequence variable to splice into a pattern: ``(add, 1, *Rest("rest"))``."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a sequence variable needs an identifier name, got {name!r}")
        self.name = name

    def __iter__(self) -> Iterator[str]:
        yield f"*{self.name}"

    def __repr__(self) -> str:
        return f"Rest({self.name!r})"


def is_variadic(op: Any) -> bool:
    """Whether `op` takes any number of operands (add, mul): its operands form a multiset."""
    return isinstance(op, Op) and getattr(op, "nin", 0) is None


def application(value: Any) -> tuple[Any, tuple] | None:
    """(op, operands) when `value` applies an op (a single-output graph node or an etuple), else None."""
    if isinstance(value, GraphETuple):
        value = value.variable
    if isinstance(value, Variable):
        node = value.owner
        if node is None or len(node.outputs) != 1:
            return None
        note_read(node)
        return node.op, tuple(node.inputs)
    if isinstance(value, ExpressionTuple) and len(value) > 0:
        return value[0], tuple(value[1:])
    return None


def same_value(a: Any, b: Any) -> bool:
    """Whether two matched values are the same: one graph variable, equal constants or equal terms."""
    if a is b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple) and not isinstance(a, ExpressionTuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, (Variable, GraphETuple)) and isinstance(b, (Variable, GraphETuple)):
        a = a.variable if isinstance(a, GraphETuple) else a
        b = b.variable if isinstance(b, GraphETuple) else b
        return same_expression(a, b)  # one variable, equal constants, or two nodes computing one expression
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


# -- targets: what a pattern is matched on -------------------------------------------------------------


class GraphTarget:
    """Matching on graph variables (and terms): a value's one application is its node's op and inputs.

    With `clients` given, every matched intermediate node must have exactly
    one client, so rewriting does not duplicate shared work.
    """

    __slots__ = ("clients",)

    def __init__(self, clients: Mapping[Variable, list] | None = None):
        self.clients = clients

    def applications(self, value: Any) -> tuple[tuple[Any, tuple], ...]:
        found = application(value)
        return () if found is None else (found,)

    def shared(self, value: Any) -> bool:
        if self.clients is None:
            return False
        graph = value.variable if isinstance(value, GraphETuple) else value
        return isinstance(graph, Variable) and len(self.clients.get(graph, ())) > 1

    same = staticmethod(same_value)
    guarded = staticmethod(as_graph)
    structured = staticmethod(as_graph)

    @staticmethod
    def literal(value: Any, number: Any) -> bool:
        """Whether `value` is a constant equal to `number` (a term that does not evaluate is not)."""
        try:
            return is_literal(value, number)
        except (TypeError, ValueError):
            return False

    @staticmethod
    def guarded_match(value: Any, node: Any, s: Substitution) -> Any:
        """What a constraint on an application pattern sees of `value` matched under `s`: the value."""
        return as_graph(value)


GRAPHS = GraphTarget()
"""The graph target without client checks."""


# -- compiled patterns ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Named:
    var: Var


@dataclass(frozen=True)
class _Sequence:
    var: Var


@dataclass(frozen=True)
class _Number:
    value: Any


@dataclass(frozen=True)
class _Exactly:
    value: Any  # a graph object given in the pattern


@dataclass(frozen=True)
class _Guarded:
    inner: Any
    constraint: Constraint


@dataclass(frozen=True)
class _OpTemplate:
    """An op of class `kind`; `props` pairs prop names with a `_Named` (binds the value) or a literal."""

    kind: type
    props: tuple[tuple[str, Any], ...]

    def match(self, op: Any, s: Substitution, same: Callable[[Any, Any], bool]) -> Substitution | None:
        if type(op) is not self.kind:
            return None
        for prop, want in self.props:
            have = getattr(op, prop)
            if isinstance(want, _Named):
                bound = s.get(want.var, _UNBOUND)
                if bound is _UNBOUND:
                    s = {**s, want.var: have}
                elif not same(bound, have):
                    return None
            elif not same_value(want, have):
                return None
        return s

    def admits(self, op: Any) -> bool:
        """Whether `op` can match, from its class and literal props alone (what a screen may test)."""
        return type(op) is self.kind and all(
            isinstance(want, _Named) or same_value(want, getattr(op, prop)) for prop, want in self.props
        )

    def term(self, s: Mapping) -> OpPattern:
        """The op as a kanren term: its class with its props, bound or logic variables (see graph.terms)."""
        return OpPattern(
            self.kind, tuple((p, s.get(w.var, w.var) if isinstance(w, _Named) else w) for p, w in self.props)
        )

    def build(self, s: Mapping) -> Op:
        props = {p: s.get(w.var, w.var) if isinstance(w, _Named) else w for p, w in self.props}
        if any(is_logic_variable(v) for v in props.values()):
            raise Unbuildable(f"{self.kind.__name__} with unbound props {props}")
        try:
            return self.kind(**props)
        except (TypeError, ValueError) as exc:
            raise Unbuildable(f"{self.kind.__name__}({props}): {exc}") from exc


@dataclass(frozen=True)
class _Apply:
    op: Any  # an Op, an _OpTemplate, or a logic variable
    args: tuple
    multiset: bool
    op_is_var: bool = False  # decided once, at compile time: matching is the hot path
    fixed: tuple = ()  # the arguments other than the sequence variable, cheapest to match first
    sequence: _Sequence | None = None  # the sequence variable among the arguments
    split: int | None = None  # its position
    order: tuple[int, ...] = ()  # the positions of the `fixed` arguments, in their order
    # operand positions one name takes (x / x: ((0, 1),)), and whether every operand must be one value (x * x)
    equal: tuple[tuple[int, int], ...] = ()
    all_equal: bool = False

    def __post_init__(self) -> None:  # derived once, at compile time, for matching
        order = sorted(
            (i for i, a in enumerate(self.args) if not isinstance(a, _Sequence)),
            key=lambda i: _cost(self.args[i]),
        )
        split = next((i for i, a in enumerate(self.args) if isinstance(a, _Sequence)), None)
        object.__setattr__(self, "order", tuple(order))
        object.__setattr__(self, "fixed", tuple(self.args[i] for i in order))
        object.__setattr__(self, "split", split)
        object.__setattr__(self, "sequence", None if split is None else self.args[split])
        if split is None:  # with a sequence variable, positions shift: matching decides
            self._compile_equal_operands()

    def _compile_equal_operands(self) -> None:
        """The operands that must hold one value, tested before matching (a cheap refusal of `x / y` by
        `x / x`): pairs of positions one name takes in order; every operand of a multiset of one name."""
        names = []
        for arg in self.args:
            while isinstance(arg, _Guarded):
                arg = arg.inner
            names.append(arg.var if isinstance(arg, _Named) else None)
        if self.multiset:
            one_name = len(names) > 1 and names[0] is not None and len(set(names)) == 1
            object.__setattr__(self, "all_equal", one_name)
            return
        first: dict[Any, int] = {}
        pairs = []
        for i, name in enumerate(names):
            if name is not None:
                if name in first:
                    pairs.append((first[name], i))
                else:
                    first[name] = i
        object.__setattr__(self, "equal", tuple(pairs))

    @property
    def head(self) -> Op | type | None:
        """What the application's op is known to be: an op, an op class (a template), or None."""
        if isinstance(self.op, _OpTemplate):
            return self.op.kind
        return None if self.op_is_var else self.op


class Pattern:
    """A compiled pattern; `names` maps pattern strings to their logic variables (shared by both sides).

    `staged` marks an input side (constraints allowed); `commutative` False
    matches add and mul operands in order too, as Aesara's PatternSub does.
    """

    def __init__(
        self, spec: Any, names: dict[str, Var] | None = None, staged: bool = True, commutative: bool = True
    ):
        self.spec = spec
        self.input_side = staged
        self.commutative = commutative
        self.names: dict[str, Var] = {} if names is None else names
        self.matchable = True
        """False when an application splices several sequence variables: the side is only built."""
        self.root = self._compile(spec)
        root = self.root
        while isinstance(root, _Guarded):
            root = root.inner
        self.head = root.head if isinstance(root, _Apply) else None
        self._screen = _Screen.compile(self.root) if staged else None

    # -- compiling

    def _name(self, name: str) -> Var:
        v = self.names.get(name)
        if v is None:
            v = self.names[name] = var(prefix=name.lstrip("*"))
        return v

    def _adopt(self, v: Var) -> Var:
        """A logic variable given in the pattern, named in `names` after its token (``var("a")`` is a;
        ``var()`` is _N) so guards, computed values, assumptions and printouts can name it."""
        token = str(v.token)
        short = token.rsplit("_", 1)[0] if token.rsplit("_", 1)[-1].isdigit() else token
        for name in (short, token, f"_{token.lstrip('_')}"):
            if name.isidentifier() and self.names.get(name, v) is v:
                self.names[name] = v
                return v
        return v

    def _compile(self, spec: Any) -> Any:
        def leaf(item: Any, top: bool) -> Any:
            if isinstance(item, str):
                if item.startswith("*"):
                    if top or not item[1:].isidentifier():
                        raise ValueError(f"a sequence variable {item!r} must be a named operand of an op")
                    return _Sequence(self._name(item))
                if not item.isidentifier():
                    raise ValueError(f"a pattern variable needs an identifier name, got {item!r}")
                return _Named(self._name(item))
            if isvar(item):
                return _Named(self._adopt(item))
            if isinstance(item, GraphETuple):
                return _Exactly(item.variable)
            if isinstance(item, Variable):
                return _Exactly(item)
            if isinstance(item, NUMBER):
                return _Number(item)
            if isinstance(item, np.ndarray) and item.dtype.kind in "biuf":
                # an array is the constant holding it (a 0-d one, a number): equal constants match it
                return _Number(item[()]) if item.ndim == 0 else _Exactly(constant(item))
            raise TypeError(f"unsupported pattern element {item!r} ({type(item).__name__})")

        def op_of(head: Any, item: Any) -> tuple[Any, bool]:
            if isinstance(head, Op):
                return head, False
            if isvar(head):
                return head, True
            if isinstance(head, str) and head.isidentifier():
                return self._name(head), True
            if isinstance(head, OpPattern):
                props = tuple(
                    (p, _Named(self._name(v)) if isinstance(v, str) else _Named(v) if isvar(v) else v)
                    for p, v in head.props
                )
                return _OpTemplate(head.kind, props), False
            raise ValueError(
                f"an application pattern must start with an op, an op name or Op.pattern(...), got {item!r}"
            )

        # patterns are small: plain recursion over the pattern (never over a graph)
        def compile_(item: Any, top: bool) -> Any:
            if isinstance(item, Mapping):
                if set(item) - {"pattern", "constraint"} or "pattern" not in item:
                    raise ValueError(
                        f"pattern dict needs 'pattern' (and optionally 'constraint'), got {item!r}"
                    )
                inner = compile_(item["pattern"], top)
                if "constraint" not in item:
                    return inner
                if not self.input_side:
                    raise ValueError(f"constraints belong in input patterns, not in {item!r}")
                if isinstance(inner, _Sequence):
                    raise ValueError(f"a constraint cannot apply to the sequence variable in {item!r}")
                return _Guarded(inner, item["constraint"])
            if isinstance(item, ExpressionTuple) and not isinstance(item, GraphETuple):
                item = tuple(item)  # the seeds' etuple S-expressions read as tuples
            if isinstance(item, tuple):
                if not item:
                    raise ValueError("an application pattern needs an op, got ()")
                op, op_is_var = op_of(item[0], item)
                args = tuple(compile_(s, False) for s in item[1:])
                sequences = [a for a in args if isinstance(a, _Sequence)]
                if len(sequences) > 1:
                    if self.input_side:
                        raise ValueError(
                            f"at most one sequence variable per application of a matched side, got {item!r}"
                        )
                    self.matchable = False
                return _Apply(op, args, self.commutative and is_variadic(op), op_is_var)
            return leaf(item, top)

        return compile_(spec, True)

    # -- matching

    def match(self, value: Any, subst: Mapping | None = None, target: Any = GRAPHS) -> Substitution | None:
        """The first substitution making the pattern equal `value`, or None (see `matches`)."""
        return next(self.matches(value, subst, target), None)

    def matches(
        self, value: Any, subst: Mapping | None = None, target: Any = GRAPHS
    ) -> Iterator[Substitution]:
        """Every substitution making the pattern equal `value` on `target` (graphs by default), lazily.

        Sequence variables are bound to tuples of operands; a right side
        (not `staged`) also reads ``(add, *rest)`` as the sum of one operand.
        A side that is not `matchable` matches nothing.
        """
        if not self.matchable:
            return iter(())
        return _match(self.root, value, dict(subst or {}), target, True, not self.input_side)

    def screen(self, value: Any) -> bool:
        """A necessary condition for the pattern to match graph variable `value`, tested without matching.

        It reads the node computing `value` and the ops of that node's
        operands (an operand's op never changes), so rejecting the common
        non-match costs a few attribute reads.  Terms other than graph
        variables, and output-side patterns, always pass.
        """
        return self._screen is None or not isinstance(value, Variable) or self._screen.admits(value)

    @property
    def whole_operands(self) -> tuple[Op, Var] | None:
        """(op, sequence variable) when the pattern is ``(op, "*terms")``, an op applied to operands one
        sequence variable takes whole (its only match binds them all); else None."""
        root = self.root
        if (
            isinstance(root, _Apply)
            and isinstance(root.op, Op)
            and len(root.args) == 1
            and isinstance(root.args[0], _Sequence)
        ):
            return root.op, root.args[0].var
        return None

    @property
    def named(self) -> Var | None:
        """The variable the pattern is, when it is one name (a right side that is a computed value)."""
        return self.root.var if isinstance(self.root, _Named) else None

    @property
    def screens_operands(self) -> bool:
        """Whether `operand_screen` tests anything: some operand of the pattern is an application, or
        one name takes several operands."""
        return self._screen is not None and bool(self._screen.inner or self._screen.equal)

    def operand_screen(self, value: Any) -> bool:
        """A necessary condition one level below `screen`, for a `value` that passed it: each operand
        the pattern writes as an application must be computed by that op with the operand count and
        operand heads it requires, and operands one name takes must be nodes of one op.  It reads the
        nodes computing the operands, which may change while the node computing `value` stays, so an
        engine that caches refusals watches those nodes."""
        return self._screen is None or not isinstance(value, Variable) or self._screen.admits_operands(value)

    # -- building

    def term(self, s: Mapping) -> Any:
        """The term this pattern denotes under `s` (an etuple, or a bound value); unbound names stay."""
        return _build(self.root, s, _etuple)

    def build(self, s: Mapping) -> Any:
        """The graph this pattern denotes under substitution `s`."""
        return as_graph(self.term(s))

    def instantiate(self, s: Mapping, apply: Callable[[Op, list], Any]) -> Any:
        """The pattern built under `s` by `apply(op, operands)` at every application (bound values
        and numbers as they are): how a target other than etuples (an e-graph) builds a side."""
        return _build(self.root, s, apply)

    def nodes(self) -> Iterator[Any]:
        """Every compiled node of the pattern: each guard, application and its operands, depth first."""
        stack = [self.root]
        while stack:
            item = stack.pop()
            yield item
            if isinstance(item, _Guarded):
                stack.append(item.inner)
            elif isinstance(item, _Apply):
                stack.extend(item.args)

    def guards(self) -> list[tuple[Any, Constraint]]:
        """Every constraint of the pattern with the compiled sub-pattern it applies to."""
        return [(item.inner, item.constraint) for item in self.nodes() if isinstance(item, _Guarded)]

    def variables(self) -> set[Var]:
        """The logic variables the pattern names (sequence, op and prop variables included)."""
        found = set()
        for item in self.nodes():
            if isinstance(item, (_Named, _Sequence)):
                found.add(item.var)
            elif isinstance(item, _Apply):
                if item.op_is_var:
                    found.add(item.op)
                elif isinstance(item.op, _OpTemplate):
                    found.update(w.var for _, w in item.op.props if isinstance(w, _Named))
        return found

    def depth(self) -> int:
        """How many levels of applications below its root the pattern reads."""
        stack, deepest = [(self.root, 0)], 0
        while stack:
            item, level = stack.pop()
            if isinstance(item, _Guarded):
                stack.append((item.inner, level))
            elif isinstance(item, _Apply):
                deepest = max(deepest, level)
                stack.extend((a, level + 1) for a in item.args)
        return deepest

    @property
    def text(self) -> str:
        """The pattern written out, e.g. ``exp(log(x))``."""
        return _show(self.spec, {v: n for n, v in self.names.items()})

    def __repr__(self) -> str:
        return f"Pattern({self.text})"


def _match(
    node: Any, value: Any, s: Substitution, t: Any, top: bool, lone: bool = False
) -> Iterator[Substitution]:
    """Every match of the compiled `node` on `value` (on target `t`), extending `s`.

    With `lone` (output patterns, matched when a rule runs backward) an add
    or mul pattern also reads the value as the sum or product of itself
    alone, since building ``(add, *rest)`` of one operand gives that operand.
    """
    if isinstance(node, _Named):
        bound = s.get(node.var, _UNBOUND)
        if bound is _UNBOUND:
            yield {**s, node.var: value}
        elif t.same(bound, value):
            yield s
        return
    if isinstance(node, _Number):
        if t.literal(value, node.value):
            yield s
        return
    if isinstance(node, _Exactly):
        if t.same(node.value, value):
            yield s
        return
    if isinstance(node, _Guarded):
        application = isinstance(node.inner, _Apply)
        for found in _match(node.inner, value, s, t, top, lone):
            seen = t.guarded_match(value, node.inner, found) if application else t.guarded(value)
            if node.constraint(seen):
                yield found
        return
    if not top and t.shared(value):
        return
    if lone and node.multiset:  # also the value as the lone operand: (add, *rest) built of one is it
        views = [a for a in t.applications(value) if a[0] == node.op]
        for op, operands in [*views, (node.op, (value,))]:
            yield from _match_application(node, op, operands, s, t, lone)
        return
    for op, operands in t.applications(value):
        yield from _match_application(node, op, operands, s, t, lone)


def matched_term(node: Any, s: Mapping, guarded: Callable[[Any], Any]) -> Any:
    """The graph of the compiled application `node` under `s`, every bound value read through `guarded`
    (None when it does not build): what a constraint on an application sees on a target whose values
    are not graphs, such as an e-class (which holds many applications; this is the one matched)."""
    seen = {v: guarded(x) for v, x in s.items()}
    try:
        return as_graph(_build(node, seen, _etuple))
    except (Unbuildable, TypeError, ValueError):
        return None


def _match_application(
    node: _Apply, op: Any, operands: tuple, s: Substitution, t: Any, lone: bool
) -> Iterator[Substitution]:
    if node.op_is_var:
        bound = s.get(node.op, _UNBOUND)
        if bound is _UNBOUND:
            s = {**s, node.op: op}
        elif bound != op:
            return
    elif isinstance(node.op, _OpTemplate):
        found = node.op.match(op, s, t.same)
        if found is None:
            return
        s = found
    elif node.op != op:
        return
    if (node.equal or node.all_equal) and not _equal_operands_hold(node, operands, t):
        return
    if node.multiset:
        yield from _match_multiset(node, operands, s, t, lone)
    else:
        yield from _match_ordered(node, operands, s, t, lone)


def _equal_operands_hold(node: _Apply, operands: tuple, t: Any) -> bool:
    if len(operands) != len(node.args):
        return True  # the matcher refuses the count itself (or, with `lone`, reads the value alone)
    if node.all_equal:
        return all(t.same(operands[0], other) for other in operands[1:])
    return all(t.same(operands[i], operands[j]) for i, j in node.equal)


_UNBOUND = object()


@dataclass(frozen=True)
class _Screen:
    """What a node must have for a pattern to match it: its op, its operand count, and its operands' heads.

    `tests` pair an operand position (None: any operand, for operand
    multisets and the operands a sequence variable may shift) with a test:
    an op (or op template) the operand must be computed by, a number it must
    equal, or the `heads` a constraint on a named operand declares (a tuple
    of ops, op classes or `Constant`: what the constraint can accept at all;
    a constant operand is decided by the constraint itself, `_Heads`).
    Every test reads what a node's signature holds (`TracksIndex.for_node`),
    so an engine may decide the screen once per signature.
    """

    op: Op | _OpTemplate
    arity: int
    exact: bool  # the operand count is `arity`; else at least `arity` (a sequence variable takes the rest)
    tests: tuple[tuple[int | None, Any], ...]
    inner: tuple[tuple[int | None, _Screen], ...] = ()
    """The screens of the operands written as applications, placed as `tests` are (`admits_operands`)."""
    equal: tuple[tuple[int, int], ...] = ()
    """Operand positions one name takes (`_Apply.equal`; every pair for `all_equal`): their nodes must
    agree in op and operand count (`admits_operands`)."""

    @staticmethod
    def compile(root: Any, levels: int = 2) -> _Screen | None:
        while isinstance(root, _Guarded):
            root = root.inner
        if not isinstance(root, _Apply) or root.op_is_var:
            return None
        fixed = [a for a in root.args if not isinstance(a, _Sequence)]
        split = next((i for i, a in enumerate(root.args) if isinstance(a, _Sequence)), None)
        tests, inner = [], []
        for i, arg in enumerate(root.args):
            heads = None
            while isinstance(arg, _Guarded):
                if getattr(arg.constraint, "heads", None) is not None:
                    heads = _Heads(tuple(arg.constraint.heads), arg.constraint)
                arg = arg.inner
            if isinstance(arg, _Apply) and not arg.op_is_var:
                test: Any = arg.op
            elif isinstance(arg, _Number):
                test = arg
            elif heads is not None:
                test = heads
            else:
                continue
            if root.multiset:
                position = None
            elif split is None or i < split:
                position = i
            else:
                position = i - len(root.args)  # counted from the end, past the sequence
            tests.append((position, test))
            below = _Screen.compile(arg, levels - 1) if levels > 1 and isinstance(arg, _Apply) else None
            if below is not None:  # patterns are a few levels deep: recursion over the pattern
                inner.append((position, below))
        equal = root.equal
        if root.all_equal:
            equal = tuple((0, k) for k in range(1, len(root.args)))
        return _Screen(root.op, len(fixed), split is None, tuple(tests), tuple(inner), equal)

    def admits(self, value: Variable) -> bool:
        node = value.owner
        if node is None or len(node.outputs) != 1 or not _is_op(node.op, self.op):
            return False
        operands = node.inputs
        if len(operands) != self.arity if self.exact else len(operands) < self.arity:
            return False
        for position, test in self.tests:
            candidates = operands if position is None else (operands[position],)
            if not any(_passes(operand, test) for operand in candidates):
                return False
        return True

    def admits_operands(self, value: Variable) -> bool:
        """Whether the operands `inner` screens admit them, and the operands `equal` pairs may be one
        expression (`value` passed `admits`)."""
        operands = value.owner.inputs
        if self.equal and len(operands) == self.arity:
            for i, j in self.equal:
                if not _may_be_same(operands[i], operands[j]):
                    return False
        for position, below in self.inner:
            candidates = operands if position is None else (operands[position],)
            if not any(below.admits(operand) for operand in candidates):
                return False
        return True


def _may_be_same(a: Variable, b: Variable) -> bool:
    """A necessary condition for `same_expression(a, b)`: one atom, equal constants, or nodes of one op
    and operand count."""
    if a is b:
        return True
    node_a, node_b = a.owner, b.owner  # the nodes whose terms they denote (None: an atom)
    node_a = node_a if node_a is not None and len(node_a.outputs) == 1 else None
    node_b = node_b if node_b is not None and len(node_b.outputs) == 1 else None
    if node_a is None or node_b is None:
        return node_a is node_b and a == b
    return node_a.op == node_b.op and len(node_a.inputs) == len(node_b.inputs)


def _is_op(op: Op, test: Op | _OpTemplate) -> bool:
    return test.admits(op) if isinstance(test, _OpTemplate) else op == test


@dataclass(frozen=True)
class _Heads:
    """A screen's test from a constraint that declares `heads`: what it can accept at all.

    A constant operand is all value, so the constraint itself decides it;
    another operand passes when its owner's op is one of the heads.
    """

    heads: tuple[Any, ...]
    constraint: Constraint

    def passes(self, operand: Variable) -> bool:
        if isinstance(operand, Constant):
            return Constant in self.heads and bool(self.constraint(operand))
        return any(_has_head(operand, head) for head in self.heads)


def _passes(operand: Variable, test: Any) -> bool:
    if isinstance(test, _Number):
        return isinstance(operand, Constant) and is_literal(operand, test.value)
    if isinstance(test, _Heads):
        return test.passes(operand)
    owner = operand.owner
    return owner is not None and len(owner.outputs) == 1 and _is_op(owner.op, test)


def _has_head(operand: Variable, head: Any) -> bool:
    """Whether `operand` is a Constant (head `Constant`) or computed by `head` (an op, or an op class)."""
    if head is Constant:
        return isinstance(operand, Constant)
    owner = operand.owner
    if owner is None:
        return False
    return isinstance(owner.op, head) if isinstance(head, type) else owner.op == head


class Unbuildable(ValueError):
    """A side that does not build under its substitution: no answer."""


class EmptyApplication(Unbuildable):
    """A variadic application built with no operands: its sequence variables matched nothing."""


def _match_ordered(
    node: _Apply, operands: tuple, s: Substitution, t: Any, lone: bool
) -> Iterator[Substitution]:
    """Operands in order; a sequence variable takes the (zero or more) operands between the fixed ones."""
    args, split = node.args, node.split
    if split is None:
        if len(args) != len(operands):
            return
        pairs = [(args[i], operands[i]) for i in node.order]
    else:
        middle = len(operands) - len(args) + 1
        if middle < 0:
            return
        sequence = tuple(operands[split : split + middle])
        bound = s.get(node.sequence.var, _UNBOUND)
        if bound is _UNBOUND:
            s = {**s, node.sequence.var: sequence}
        elif not _same_sequence(tuple(bound), sequence, t):
            return
        # past the sequence, arguments are counted from the end of the operands
        pairs = [(args[i], operands[i if i < split else i - len(args)]) for i in node.order]
    states = [s]
    for pattern, value in pairs:  # cheapest tests first (`_Apply.order`)
        states = [found for state in states for found in _match(pattern, value, state, t, False, lone)]
        if not states:
            return
    yield from states


def _cost(node: Any) -> int:
    """Which operand patterns to try first: numbers and bound names fail fastest."""
    if isinstance(node, (_Number, _Exactly)):
        return 0
    if isinstance(node, _Named):
        return 1
    if isinstance(node, _Guarded):
        return _cost(node.inner)
    return 2


def _match_multiset(
    node: _Apply, operands: tuple, s: Substitution, t: Any, lone: bool
) -> Iterator[Substitution]:
    """Operands as a multiset: each fixed pattern takes a distinct operand; a sequence variable the rest."""
    fixed = node.fixed
    sequence = node.sequence
    if sequence is None and len(fixed) != len(operands):
        return
    if sequence is not None and len(operands) < len(fixed):
        return
    # depth-first over the fixed patterns; the stack holds (next pattern, used operands, substitution)
    stack: list[tuple[int, tuple[int, ...], Substitution]] = [(0, (), s)]
    while stack:
        k, used, state = stack.pop()
        if k == len(fixed):
            if sequence is None:
                yield state
                continue
            rest = tuple(v for i, v in enumerate(operands) if i not in used)
            bound = state.get(sequence.var, _UNBOUND)
            if bound is _UNBOUND:
                yield {**state, sequence.var: rest}
            elif _same_multiset(tuple(bound), rest, t):
                yield state
            continue
        options = []
        for i, operand in enumerate(operands):
            if i not in used:
                options.extend(
                    (k + 1, (*used, i), found) for found in _match(fixed[k], operand, state, t, False, lone)
                )
        stack.extend(reversed(options))  # first operand first


def _same_sequence(a: tuple, b: tuple, t: Any) -> bool:
    return len(a) == len(b) and all(t.same(x, y) for x, y in zip(a, b))


def _same_multiset(a: tuple, b: tuple, t: Any) -> bool:
    if len(a) != len(b):
        return False
    left = list(b)
    for item in a:
        index = next((i for i, other in enumerate(left) if t.same(item, other)), None)
        if index is None:
            return False
        left.pop(index)
    return True


def _etuple(op: Op, args: list) -> Any:
    return etuple(op, *args)


def _build(node: Any, s: Mapping, apply: Callable[[Op, list], Any]) -> Any:
    if isinstance(node, _Named):
        return s.get(node.var, node.var)
    if isinstance(node, _Number):
        return node.value
    if isinstance(node, _Exactly):
        return node.value
    if isinstance(node, _Guarded):
        return _build(node.inner, s, apply)
    if isinstance(node, _Sequence):
        raise TypeError("a sequence variable is spliced by its application")
    if node.op_is_var:
        op = s.get(node.op, node.op)
    elif isinstance(node.op, _OpTemplate):
        try:
            op = node.op.build(s)
        except Unbuildable:
            if apply is not _etuple:
                raise
            op = node.op.term(s)  # props unbound: an op pattern, which unifies with ops by their props
    else:
        op = node.op
    args: list[Any] = []
    for a in node.args:
        if isinstance(a, _Sequence):
            bound = s.get(a.var, a.var)
            if is_logic_variable(bound):
                args.append(bound)  # unbound: a logic variable stands for one operand
            else:
                args.extend(bound)
        else:
            args.append(_build(a, s, apply))
    if node.multiset and node.sequence is not None and len(args) == 1:
        return args[0]
    if node.multiset and not args:
        raise EmptyApplication(f"{op} of no operands")
    if apply is not _etuple and is_logic_variable(op):
        raise Unbuildable(f"the op variable {op} is unbound")
    return apply(op, args)


def _show(spec: Any, names: Mapping[Var, str]) -> str:
    if isinstance(spec, ExpressionTuple) and not isinstance(spec, GraphETuple):
        spec = tuple(spec)
    if isinstance(spec, tuple):
        return f"{_show(spec[0], names)}({', '.join(_show(s, names) for s in spec[1:])})"
    if isinstance(spec, Mapping):
        constraint = spec.get("constraint")
        suffix = f" if {getattr(constraint, '__name__', constraint)}" if constraint else ""
        return _show(spec.get("pattern"), names) + suffix
    if isvar(spec):
        return names.get(spec, str(spec))
    return str(spec)


# -- replacements ----------------------------------------------------------------------------------------


def to_graph(value: Any, like: Variable) -> Variable:
    """A rewrite's result as a graph variable: etuples are evaluated, plain numbers take `like`'s dtype."""
    value = as_graph(value)
    if isinstance(value, Variable):
        return value
    return as_variable(np.asarray(value, dtype=like.dtype))


def can_replace(old: Variable, new: Variable) -> bool:
    """Whether `new` may stand for `old`: same dtype and rank, and every static length of `old` kept.

    A replacement that forgets a static length could broadcast differently
    at run time, so rewriters refuse it (FunctionGraph.replace itself is laxer).
    """
    return old.type.is_super(new.type)


def build_replacement(pattern: Pattern, s: Mapping, like: Variable) -> Variable:
    """Build `pattern` under `s` as a graph variable; plain numbers take the dtype of `like`."""
    return to_graph(pattern.build(s), like)


def rebuilds(new: Variable, old: Variable, existing: Any = None, budget: int = 64) -> bool:
    """Whether `new`, walked through the nodes not in `existing`, rebuilds exactly `old`.

    Such a replacement would only swap a node for a copy and be proposed
    again forever; the walk descends only through nodes an answer built.

    Without a graph to tell new nodes from old (`existing` None), at most
    `budget` pairs are compared and a longer walk counts as a change.
    """
    stack = [(new, old)]
    while stack:
        a, b = stack.pop()
        if a is b or (isinstance(a, Constant) and a == b):
            continue
        if a.owner is None or b.owner is None:
            return False
        if existing is None:
            budget -= 1
            if budget < 0:
                return False
        elif a.owner in existing:
            return False
        if a.owner.op != b.owner.op or len(a.owner.inputs) != len(b.owner.inputs) or a.index != b.index:
            return False
        stack.extend(zip(a.owner.inputs, b.owner.inputs))
    return True


def first_replacement(answers: Iterable[Any], old: Variable, existing: Any = None) -> Variable | None:
    """The first answer that can replace `old`: a graph of a type that may stand for it, not a rebuilt copy.

    `existing` (a graph's apply nodes) tells new nodes from old for `rebuilds`.
    """
    for answer in answers:
        if isvar(answer):
            continue
        try:
            new = to_graph(answer, like=old)
        except (TypeError, ValueError):
            continue
        if new is not old and can_replace(old, new) and not rebuilds(new, old, existing):
            return new
    return None

"""Relational primitives for writing your own `@relation` goals.

The catalogue's rules are declarations (`rule(...)`); a relation that a
declaration cannot express is a function `rel(lhs, rhs) -> goal` composed
from kanren goals and these primitives.  Each is an ordinary kanren goal (a
function from a state to a stream of states) that works in both directions:
given a ground argument it checks or computes the other, given a logic
variable it produces values.

Terms are graphs whenever they are ground: goals that build a term from
bound parts build the graph node at once (an etuple only while logic
variables remain), so a forward run hands the engine ready graph variables.
Goals that read a term look at its head first and fail at once on another
op.  `literalo` and `whereo` test constants and guards; `operandso` and
`nodeo` read or build a node; `mappingo` relates two terms as the graph of
a Python function (with its preimages for the backward direction); `conj`
is a depth-first conjunction, and `along` chains such links between a left
and a right side so that a relation written once runs from whichever side
is known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from etuples import etuple
from etuples.core import ExpressionTuple
from kanren.core import eq
from unification import reify, unify
from unification.core import assoc
from unification.variable import Var, isvar

from relwrite.graph.basic import Op, Variable
from relwrite.graph.terms import GraphETuple
from relwrite.relations.guards import guardo
from relwrite.relations.operands import graph_of, same_terms
from relwrite.relations.predicates import NUMBER, is_literal, is_logic_variable, node_inputs

Goal = Callable[[Any], Iterator[Any]]


def literalo(v: Any, number: Any) -> Goal:
    """`v` is a constant equal to `number` everywhere; an unbound `v` becomes the plain number.

    A plain number takes the dtype of what it is combined with when the term
    is evaluated (numpy's rule for Python scalars), so one rule serves every dtype.
    """

    def goal(state):
        bound = _walk(v, state)
        if isvar(bound):
            yield from eq(bound, number)(state)
        elif is_literal(bound, number):
            yield state

    return goal


def whereo(v: Any, predicate: Callable[[Any], bool]) -> Goal:
    """`predicate` holds on the graph value of `v`: decided now when `v` is ground, else once it is.

    A waiting guard (`relwrite.relations.guards`), so relations built with
    it still run with their sides unbound.
    """
    return guardo(v, predicate)


def _has_logic_variables(term: Any) -> bool:
    stack = [term]
    while stack:
        item = stack.pop()
        if isinstance(item, Variable):
            continue
        cls = type(item)
        if Var in cls.__mro__:
            return True
        if (
            cls is tuple
            or cls is list
            or (isinstance(item, ExpressionTuple) and not isinstance(item, GraphETuple))
        ):
            stack.extend(item)
    return False


def _build(op: Op, args: Sequence[Any]) -> Any:
    """`op` applied to `args`: a graph when they are graphs (None if ill-typed), else an etuple."""
    if _has_logic_variables(args):
        return etuple(op, *args)
    graphs = [graph_of(a) if not isinstance(a, NUMBER) else a for a in args]
    if any(g is None for g in graphs):
        return None
    try:
        return op(*graphs)
    except (TypeError, ValueError):
        return None


def _arguments(term: Any, op: Op | None = None, kind: type | None = None) -> tuple[Op, tuple] | None:
    """(op, operands) of `term` when it applies `op` (or an op of class `kind`), else None."""
    if isinstance(term, GraphETuple):
        term = term.variable
    if isinstance(term, Variable):
        inputs = node_inputs(term, op, kind)
        return None if inputs is None else (term.owner.op, inputs)
    if isinstance(term, ExpressionTuple) and len(term) > 0:
        head = term[0]
        if (op is not None and head == op) or (kind is not None and isinstance(head, kind)):
            return head, tuple(term[1:])
    return None


def _kind_arguments(term: Any, kind: type | tuple[type, ...] | Op) -> tuple[Op, tuple] | None:
    """`_arguments` for an op class (or classes), or for one op."""
    return _arguments(term, op=kind) if isinstance(kind, Op) else _arguments(term, kind=kind)


def _bind(v: Any, value: Any, state: Any) -> Iterator[Any]:
    s = _unify(v, value, state)
    if s is not False:
        yield s


def _resolve(term: Any, state: Any) -> Any:
    """`term` with the state's bindings substituted (a shallow walk for anything but tuples)."""
    return reify(term, state) if isinstance(term, (tuple, list)) else _walk(term, state)


def _walk(value: Any, state: Any) -> Any:
    """What `value` is bound to in `state` (itself when it is not a bound logic variable)."""
    while Var in type(value).__mro__ and value in state:
        value = state[value]
    return value


def _unify(u: Any, v: Any, state: Any) -> Any:
    """`unify`, with the common case (an unbound logic variable on the left) done directly."""
    u = _walk(u, state)
    if is_logic_variable(u) and type(state) is dict:  # a constrained state must see the binding (its guards)
        return assoc(state, u, v)
    return unify(u, v, state)


def _then(stream: Iterable[Any], goal: Goal) -> Iterator[Any]:
    for state in stream:
        yield from goal(state)


def conj(*goals: Goal) -> Goal:
    """The conjunction of `goals`, depth first: kanren's `lall` without its per-call overhead.

    Every primitive here yields finitely many states, so depth-first search
    finds all answers; use `lall` where a goal may yield endlessly.
    """
    if len(goals) == 1:
        return goals[0]

    def goal(state):
        stream = goals[0](state)
        for g in goals[1:]:
            stream = _then(stream, g)
        return stream

    return goal


def along(lhs: Any, *links: Goal) -> Goal:
    """A chain of goals leading from `lhs` to a right side, run from whichever end is known.

    Each link relates its neighbours and needs one of them bound.  When `lhs`
    is bound the links run first to last (forward), otherwise last to first
    (backward, from the right side), so every link starts from a bound end.
    """
    forward, backward = conj(*links), conj(*reversed(links))

    def goal(state):
        return (backward if is_logic_variable(_walk(lhs, state)) else forward)(state)

    return goal


def operandso(term: Any, op: Op, args: Any) -> Goal:
    """`term` applies `op` to the tuple of terms `args`.

    With `term` bound, `args` are its operands (no answer when another op
    heads it: the cheap check comes first); with `args` a tuple, `term` is
    the application, built as a graph when the operands are graphs.  Neither
    known: no answer (`along` orders links so that this does not happen).
    """

    def goal(state):
        t = _walk(term, state)
        if not is_logic_variable(t):
            found = _arguments(t, op)
            if found is not None:
                s = _unify(args, found[1], state)
                if s is not False:
                    yield s
            return
        a = _resolve(args, state)
        if isinstance(a, (tuple, list)):
            built = _build(op, a)
            if built is not None:
                yield from _bind(t, built, state)

    return goal


def nodeo(term: Any, kind: type | tuple[type, ...] | Op, op: Any, args: Any) -> Goal:
    """`term` applies `op`, an op of class `kind` (e.g. a `DimShuffle`) or the op `kind` itself, to
    the tuple `args`.

    With `term` bound, `op` and `args` are read from it; with `op` and
    `args` bound, `term` is built.
    """

    def goal(state):
        t = _walk(term, state)
        if not is_logic_variable(t):
            found = _kind_arguments(t, kind)
            if found is not None:
                s = _unify((op, args), found, state)
                if s is not False:
                    yield s
            return
        head, a = _walk(op, state), _resolve(args, state)
        heads_match = head == kind if isinstance(kind, Op) else isinstance(head, kind)
        if heads_match and isinstance(a, (tuple, list)):
            built = _build(head, a)
            if built is not None:
                yield from _bind(t, built, state)

    return goal


def mappingo(
    x: Any, y: Any, forward: Callable[[Any], Any], preimages: Callable[[Any], Iterable[Any]] | None = None
) -> Goal:
    """`y` is `forward(x)`: the relation is the graph of a function (None where it does not apply).

    Forward (`x` known) computes `y`.  Backward (`y` known, `x` not), `x`
    ranges over the finitely many `preimages(y)` that `forward` maps onto
    `y`, so both directions agree by construction and every run ends.
    Without `preimages` there is no backward answer.
    """

    def goal(state):
        a = _resolve(x, state)
        if not _has_logic_variables(a):
            image = forward(a)
            if image is not None:
                s = _unify(y, image, state)
                if s is not False:
                    yield s
            return
        b = _resolve(y, state)
        if preimages is None or _has_logic_variables(b):
            return
        for candidate in preimages(b):
            if same_terms(forward(candidate), b):
                s = _unify(a, candidate, state)
                if s is not False:
                    yield s

    return goal

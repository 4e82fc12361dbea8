"""Primitive goals the catalogue's relations are composed from.

Each is an ordinary kanren goal (a function from a state to a stream of
states) that works in both directions: given a ground argument it checks or
computes the other, given a logic variable it produces values.  They walk
lists with Python loops, never recursion, so long operand lists are fine.

Terms are graphs whenever they are ground: goals that build a term from
bound parts build the graph node at once (an etuple only while logic
variables remain), so a forward run hands the engine ready graph variables.
Goals that read a term look at its head first and fail at once on another
op, so a relation tried on a node it does not match costs a few microseconds.

The operand-list goals (`flatteno`, `sortedo`, `foldedo`, `neutralo`,
`like_termso`, `like_factorso`, `cancelledo`, `divided_outo`) are the
associative-commutative machinery of the canonical form: each relates two
tuples of operands as the graph of a function (`mappingo`), whose forward
run is a polynomial pass over the list and whose backward run checks a
bounded set of candidate preimages against that function.  `along` chains
such links between a left and a right side so that a relation written once
runs from whichever side is known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from etuples import etuple, etuplize
from etuples.core import ExpressionTuple
from kanren.core import eq
from unification import reify, unify, var
from unification.core import assoc
from unification.utils import transitive_get as walk
from unification.variable import Var, isvar

from relwrite.graph.basic import Op, Variable
from relwrite.graph.terms import GraphETuple
from relwrite.relations.guards import guardo
from relwrite.relations.operands import (
    after_literal,
    cancelled,
    check_variadic,
    divided_out,
    folded_constants,
    graph_of,
    like_factors,
    like_terms,
    nestings,
    rotations,
    same_terms,
    sorted_terms,
    spliced,
    with_neutral,
    without_neutral,
)
from relwrite.relations.predicates import NUMBER, is_literal, is_logic_variable, node_inputs

Goal = Callable[[Any], Iterator[Any]]


def literalo(v: Any, number: Any) -> Goal:
    """`v` is a constant equal to `number` everywhere; an unbound `v` becomes the plain number.

    A plain number takes the dtype of what it is combined with when the term
    is evaluated (numpy's rule for Python scalars), so one rule serves every dtype.
    """

    def goal(state):
        bound = walk(v, state)
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


def operands(term: Any, op: Op) -> list[Any] | None:
    """The operands of `term` when it applies `op` (looking one level into a graph), else None."""
    if isinstance(term, Variable):
        if term.owner is None or term.owner.op != op or len(term.owner.outputs) != 1:
            return None
        term = etuplize(term)
    if isinstance(term, ExpressionTuple) and len(term) > 0 and term[0] == op:
        return list(term[1:])
    return None


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


def bound_graph(value: Any, state: Any) -> Variable | None:
    """The graph variable `value` stands for in `state`, or None while it is (partly) unbound."""
    value = _walk(value, state)
    if is_logic_variable(value):
        return None
    return graph_of(value)


def picko(items: Any, chosen: Any, rest: Any, preferred: Callable[[Any], bool] | None = None) -> Goal:
    """`chosen` is one of the tuple `items` and `rest` the others: pick each in turn, or put one back last.

    Picking tries the items `preferred` accepts first, then the others, each group in order.
    """

    def goal(state):
        whole = _resolve(items, state)
        if isinstance(whole, tuple):
            order = range(len(whole))
            if preferred is not None:
                order = sorted(order, key=lambda k: not preferred(whole[k]))
            for k in order:
                yield from _bind((chosen, rest), (whole[k], whole[:k] + whole[k + 1 :]), state)
            return
        others = _resolve(rest, state)
        if isinstance(others, tuple):
            yield from _bind(items, (*others, reify(chosen, state)), state)

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


def variadico(term: Any, op: Op, args: Any) -> Goal:
    """`term` is `applyo(op, args)`: `op` applied to the tuple `args`, or their only element.

    With `term` bound: its operands when `op` heads it with two or more,
    then the one-element tuple of `term` itself.
    """

    def goal(state):
        t = _walk(term, state)
        if not is_logic_variable(t):
            found = _arguments(t, op)
            if found is not None and len(found[1]) > 1:
                s = _unify(args, found[1], state)
                if s is not False:
                    yield s
            s = _unify(args, (t,), state)
            if s is not False:
                yield s
            return
        a = _resolve(args, state)
        if isinstance(a, (tuple, list)) and a:
            built = a[0] if len(a) == 1 else _build(op, a)
            if built is not None:
                s = _unify(t, built, state)
                if s is not False:
                    yield s

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


def involutiono(x: Any, y: Any, function: Callable[[Any], Any]) -> Goal:
    """`y` is `function(x)` for a `function` that is its own inverse: backward, `x` is `function(y)`.

    The backward direction is derived, not written: `mappingo` with the
    function as its own preimage (checked there: it must map back onto `y`).
    """

    def preimages(image: Any) -> list[Any]:
        back = function(image)
        return [] if back is None else [back]

    return mappingo(x, y, function, preimages)


def choiceo(x: Any, options: Callable[[Any], Iterable[Any]], given: Any) -> Goal:
    """`x` is one of `options(given)` (a finite choice); `given` must be bound.

    With `x` bound this tests membership, otherwise it enumerates the options.
    """

    def goal(state):
        g = _resolve(given, state)
        if _has_logic_variables(g):
            return
        for option in options(g):
            s = _unify(x, option, state)
            if s is not False:
                yield s

    return goal


def node_mappingo(
    lhs: Any,
    rhs: Any,
    kind: type | tuple[type, ...] | Op,
    forward: Callable[[Any], Any],
    preimages: Callable[[Any], Iterable[Any]] | None = None,
) -> Goal:
    """`lhs` applies an op of class `kind` (or the op `kind`) to operands, `rhs` is
    `forward((op, operands))`, and `rhs` may stand for `lhs`; backward (with `preimages`) the
    (op, operands) pairs mapped onto `rhs` build `lhs`.

    The shape of every rule that computes its right side from the node it matches.
    """
    op, operands = var(prefix="op"), var(prefix="operands")
    link = mappingo((op, operands), rhs, forward, preimages)
    node = nodeo(lhs, kind, op, operands)
    run = along(lhs, node, link) if preimages is not None else conj(node, link)
    chain = conj(run, replaceableo(lhs, rhs))

    def goal(state: Any) -> Iterator[Any]:
        return chain(state)

    return goal


def replaceableo(lhs: Any, rhs: Any) -> Goal:
    """`rhs` may stand for `lhs` in a graph: same dtype and rank, every static length of `lhs` kept.

    Checked once both are bound; a rule ending with it never proposes a
    replacement the engine would refuse.
    """

    def goal(state):
        old, new = graph_of(_walk(lhs, state)), graph_of(_walk(rhs, state))
        if old is not None and new is not None and old.type.is_super(new.type):
            yield state

    return goal


def rewrite_operandso(op: Op, lhs: Any, rhs: Any, relate: Callable[[Any, Any], Goal]) -> Goal:
    """`lhs` applies `op` to a tuple of operands, `rhs` is `applyo(op, other)`, `relate(operands, other)`.

    The shape of every rule on an add's or mul's operand list; the result
    must be able to replace `lhs` (`replaceableo`).
    """
    terms, result = var(prefix="terms"), var(prefix="result")
    link = relate(terms, result)
    chain = conj(
        along(lhs, operandso(lhs, op, terms), link, variadico(rhs, op, result)), replaceableo(lhs, rhs)
    )

    def goal(state: Any) -> Iterator[Any]:
        return chain(state)

    return goal


def flatteno(op: Op, nested: Any, flat: Any) -> Goal:
    """`flat` is `nested` with every operand that applies `op` replaced by its operands, at any depth.

    Backward it re-nests one run of two or more consecutive operands (all
    but the whole list), the shortest runs first.
    """
    check_variadic(op)
    return mappingo(nested, flat, partial(spliced, op), partial(nestings, op))


def sortedo(terms: Any, ordered: Any) -> Goal:
    """`ordered` is `terms` stably sorted by `canonical_key` (constants first), and differs from it.

    Only the first constant leads: others (those `foldedo` left apart because
    combining them would overflow, underflow or be invalid) go last, so the
    sort does not make the left-to-right fold combine them first
    (``1e200 * x * 1e200`` stays as it is).  Backward it proposes the
    rotations of `ordered` that sort back to it.
    """
    return mappingo(terms, ordered, sorted_terms, rotations)


def foldedo(op: Op, terms: Any, folded: Any) -> Goal:
    """`folded` is `terms` with its two or more constants combined by `op` into one, put first.

    The constants are combined in their own dtype (all operands share it:
    `regroupable`), so integers wrap around exactly as the graph would.  A
    combination that overflows, underflows (a zero or an inexact subnormal
    from non-zero floats) or is invalid (inf - inf) is refused and the
    constants stay apart: ``1e200 * x * 1e200`` never becomes ``inf * x``,
    which at x = 1e-300 would be inf instead of 1e100.  Not run backward: a
    folded constant does not say what it came from.
    """
    check_variadic(op)
    return mappingo(terms, folded, partial(folded_constants, op))


def neutralo(op: Op, terms: Any, kept: Any) -> Goal:
    """`kept` is `terms` without the neutral operands that provably do not widen the result, or one lone term.

    A neutral operand is a constant equal to `op`'s neutral element (0 for
    add, 1 for mul) or a fill of one (zeros or ones shaped like another
    term, as cancelling rules leave); it goes when every shape it carries
    broadcasts into the remaining operands' (`broadcasts_into`) or is that
    of one of them.  One
    operand always stays, and a lone operand is the whole result
    (``add(x) -> x``).  Backward it puts a 0-d neutral constant in front.
    """
    check_variadic(op)
    return mappingo(terms, kept, partial(without_neutral, op), partial(with_neutral, op))


def like_termso(terms: Any, collected: Any, cancelling: bool = False) -> Goal:
    """`collected` is the sum `terms` with like terms gathered: ``x + 3*x -> 4*x``, ``x + x -> 2*x``.

    A term is `c * f1 * f2...` (c a leading constant, else 1) or `-(...)`
    (c negated); terms whose factors are structurally the same form a group,
    replaced where its first term stood by `total * f1 * f2...`, by the
    factors alone when the total is 1, and by zeros shaped like them
    (`fill`) when it is 0.  Exact groups (integers, or floats whose
    coefficients are finite and nonzero with one sign) are gathered when
    `cancelling` is false; the others (``3*x - x``, ``x - x``: inf - inf is
    NaN while 2 * inf is not) only when it is true.  Not run backward: a
    total does not say how it was split.
    """
    return mappingo(terms, collected, partial(like_terms, cancelling))


def like_factorso(factors: Any, collected: Any, general: bool = False) -> Goal:
    """`collected` is the product `factors` with like factors gathered: ``x * x -> x ** 2``.

    A factor is `b ** e` (e its exponent) or `b` (exponent 1); factors with
    structurally the same base form a group, replaced where its first factor
    stood by `b ** (e1 + e2 ...)`.  Groups whose exponents are all positive
    integer constants are exact; the others (``x ** 0.5 * x ** 0.5 -> x``,
    ``x ** a * x -> x ** (a + 1)``, floats only) need `b > 0` and are gathered
    only when `general` is true.  Not run backward: a total exponent does not
    say how it was split.
    """
    return mappingo(factors, collected, partial(like_factors, general))


def cancelledo(factors: Any, kept: Any) -> Goal:
    """`kept` is the product `factors` with one factor cancelled against its divisor or reciprocal.

    ``x * (z / x) -> z`` and ``a * reciprocal(a) * b -> b``, anywhere in the
    list (floats; valid where x != 0).  The cancelled factor leaves ones
    shaped like it, dropped as `neutralo` would when they cannot widen the
    result.  Not run backward: what was cancelled is gone.
    """
    return mappingo(factors, kept, cancelled)


def divided_outo(divisor: Any, factors: Any, kept: Any) -> Goal:
    """`kept` is the product `factors` divided by `divisor`, one of its factors: ``(x * y) / y -> x``.

    The factor may sit anywhere in the list (floats; valid where y != 0); it
    leaves ones shaped like it, dropped as `neutralo` would when they cannot
    widen the result.  Not run backward: the divisor is gone.
    """
    return mappingo((divisor, factors), kept, divided_out)


def leading_literalo(number: Any, terms: Any, rest: Any) -> Goal:
    """`terms` is ``(number, *rest)``: a 0-d constant equal to `number`, then at least one term.

    Only a 0-d constant qualifies, so dropping it never changes the shape of
    the result.  Backward the plain number goes first (it takes the dtype of
    the terms beside it).
    """
    return mappingo(terms, rest, partial(after_literal, number), lambda kept: [(number, *kept)])

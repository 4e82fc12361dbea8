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
from functools import partial, reduce
from typing import Any

import numpy as np
from etuples import etuple, etuplize
from etuples.core import ExpressionTuple
from kanren.core import eq
from unification import reify, unify, var
from unification.core import assoc
from unification.utils import transitive_get as walk
from unification.variable import Var, isvar

from relwrite.graph import ops
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.terms import GraphETuple, note_read, same_expression
from relwrite.graph.types import Shape, TensorType, broadcast_shapes, upcast
from relwrite.relations.pattern import as_graph

Goal = Callable[[Any], Iterator[Any]]

_NUMBER = (bool, int, float, np.number, np.bool_)


def literal_value(value: Any) -> np.ndarray | None:
    """The value of a constant term (a Constant or a plain number), or None."""
    value = as_graph(value)
    if isinstance(value, Constant):
        return value.data
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return np.asarray(value)
    return None


def is_literal(value: Any, number: Any) -> bool:
    """Whether `value` is a constant whose every element equals `number`."""
    data = literal_value(value)
    return data is not None and data.size > 0 and bool(np.all(data == number))


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
    """Succeed when `v` is bound and `predicate(graph value of v)` holds (fails while `v` is unbound)."""

    def goal(state):
        bound = reify(v, state)
        if not isvar(bound) and predicate(as_graph(bound)):
            yield state

    return goal


def operands(term: Any, op: Op) -> list[Any] | None:
    """The operands of `term` when it applies `op` (looking one level into a graph), else None."""
    if isinstance(term, Variable):
        if term.owner is None or term.owner.op != op or len(term.owner.outputs) != 1:
            return None
        term = etuplize(term)
    if isinstance(term, ExpressionTuple) and len(term) > 0 and term[0] == op:
        return list(term[1:])
    return None


def applyo(op: Op, args: Sequence[Any]) -> Any:
    """The term applying `op` to `args`; a variadic op of one operand is that operand."""
    if len(args) == 1 and op.nin is None:
        return args[0]
    return etuple(op, *args)


def canonical_key(term: Any) -> tuple:
    """The sort key of an operand in a canonical add/mul: constants, then inputs by name, then the rest.

    Looks one level into a graph: applications sort by op name, then by the
    names of their leaf inputs, so `exp(b) + exp(a)` and `exp(a) + exp(b)` agree.
    """
    value = as_graph(term)
    if literal_value(value) is not None:
        return (0,)
    if isinstance(value, Variable) and value.owner is None:
        return (1, value.name or "", value.type.ndim)
    node = value.owner if isinstance(value, Variable) else None
    if node is None:
        return (3,)
    leaves = tuple(v.name or "" for v in node.inputs if v.owner is None and v.name)
    return (2, str(node.op), leaves)


def broadcasts_into(small: Variable, big: Variable) -> bool:
    """Whether static shapes prove `small` never enlarges `big`'s shape when the two broadcast.

    True when `small` has no more dimensions and each of its lengths is 1 or
    a known length equal to `big`'s; unknown lengths prove nothing.
    """
    return _fits(small.type.shape, big.type.shape)


def _fits(small: Shape, big: Shape) -> bool:
    """`broadcasts_into` on static shapes."""
    if len(small) > len(big):
        return False
    return all(s == 1 or (s is not None and s == b) for s, b in zip(reversed(small), reversed(big)))


# -- predicates for pattern constraints ------------------------------------------------------


def is_float(value: Any) -> bool:
    """Whether `value` is a graph variable of a floating dtype."""
    return isinstance(value, Variable) and value.type.numpy_dtype.kind == "f"


def is_signed(value: Any) -> bool:
    """Whether `value` is a graph variable of a signed integer or floating dtype (negation is exact)."""
    return isinstance(value, Variable) and value.type.numpy_dtype.kind in "if"


def is_zero_dimensional(value: Any) -> bool:
    """Whether `value` is a 0-d constant or a plain number (it cannot widen a shape it broadcasts into)."""
    data = literal_value(value)
    return data is not None and data.ndim == 0


def is_float_regroupable(value: Any) -> bool:
    """Whether `value` is a float add or mul whose operands may be regrouped (`regroupable`)."""
    return is_float(value) and operands_regroupable(value)


def is_signed_regroupable(value: Any) -> bool:
    """Whether `value` is a signed add or mul whose operands may be regrouped (negating it is exact)."""
    return is_signed(value) and operands_regroupable(value)


def neutral_drops(op: Op) -> Callable[[Variable, tuple[Variable, ...]], bool]:
    """A `where` guard (neutral, rest): `neutral` is `op`'s neutral element and never widens the `rest`.

    A neutral operand is a constant equal to 0 (add) or 1 (mul), possibly
    shaped by fills as cancelling rules leave it; it may go when every shape
    it carries broadcasts into the other operands' or is one of them.
    """
    _check_variadic(op)

    def neutral_fits(neutral: Variable, rest: tuple[Variable, ...]) -> bool:
        parts = _neutral_parts(op, neutral) if isinstance(neutral, Variable) else None
        if parts is None or not rest or not all(isinstance(r, Variable) for r in rest):
            return False
        shape = broadcast_shapes(*(r.type.shape for r in rest))
        return all(_fits(p.type.shape, shape) or any(_same(p, r) for r in rest) for p in parts)

    neutral_fits.__name__ = f"neutral_of_{op}_fits"
    return neutral_fits


def float_var(name: str) -> dict:
    """The pattern variable `name`, accepted only for floating values."""
    return {"pattern": name, "constraint": is_float}


def signed_var(name: str) -> dict:
    """The pattern variable `name`, accepted only for signed integer or floating values."""
    return {"pattern": name, "constraint": is_signed}


def same_dtype_at(*path: int) -> Callable[[Any], bool]:
    """A constraint on a pattern's root: its dtype equals that of the subterm reached by input indices `path`.

    `same_dtype_at(0, 0)` on ``exp(log(x))`` compares the result with `x`, so
    a rule dropping the ops in between cannot change the dtype (log of an
    integer is a float).
    """

    def constraint(value: Any) -> bool:
        node_value = value
        for index in path:
            if not isinstance(node_value, Variable) or node_value.owner is None:
                return False
            node_value = node_value.owner.inputs[index]
        return isinstance(node_value, Variable) and node_value.dtype == value.dtype

    constraint.__name__ = f"same_dtype_at{path}"
    return constraint


def regroupable(operands: Sequence[Variable]) -> bool:
    """Whether operands of an add or mul may be regrouped, reordered or moved out of it: they share one dtype.

    add and mul fold their operands left to right, promoting at each step as
    numpy does, so with mixed dtypes a partial result can be narrower than
    the whole: in ``add(-1, y, exp(x))`` with an int8 `y`, ``-1 + y`` wraps
    around in int8 before the float64 term widens the sum, and no other
    grouping computes that.  With one dtype every grouping computes in it:
    exactly for integers (wrap-around addition and multiplication are
    associative and commutative), up to rounding for floats (the rule's
    semantics then say `reassociates`).  Every rule that regroups the
    operands of an add or mul checks this.
    """
    if not operands:
        return False
    dtype = operands[0].dtype
    return all(v.dtype == dtype for v in operands)


def operands_regroupable(value: Any) -> bool:
    """Whether `value` is computed by an add or mul whose operands are `regroupable` (a constraint)."""
    inputs = _inputs(value, ops.add) or _inputs(value, ops.mul) if isinstance(value, Variable) else None
    return inputs is not None and regroupable(inputs)


# -- terms as graphs -----------------------------------------------------------------------------


def _graph(term: Any) -> Variable | None:
    """`term` as a graph variable (etuples are built), or None (e.g. when it holds logic variables)."""
    if isinstance(term, Variable):
        return term
    if isinstance(term, ExpressionTuple):
        try:
            value = term.evaled_obj
        except (TypeError, ValueError):
            return None
        return value if isinstance(value, Variable) else None
    return None


def _graphs(terms: Any) -> tuple[Variable, ...] | None:
    """A tuple of terms as graph variables, or None when one of them is not a graph."""
    if not isinstance(terms, (tuple, list)):
        return None
    graphs = tuple(map(_graph, terms))
    return None if any(g is None for g in graphs) else graphs


def _uniform(terms: Any) -> tuple[Variable, ...] | None:
    """`_graphs(terms)` when there is at least one and they may be regrouped (`regroupable`), else None."""
    graphs = _graphs(terms)
    return graphs if graphs and regroupable(graphs) else None


def _inputs(value: Variable, op: Op | None = None, kind: type | None = None) -> tuple[Variable, ...] | None:
    """The inputs of the single-output node computing `value` when its op is `op` (or of class `kind`)."""
    node = value.owner
    if node is None or len(node.outputs) != 1:
        return None
    if (op is not None and node.op is not op and node.op != op) or (
        kind is not None and not isinstance(node.op, kind)
    ):
        return None
    return tuple(note_read(node).inputs)


def _same(a: Variable, b: Variable) -> bool:
    """Whether two graphs compute the same expression (an iterative structural comparison)."""
    return a is b or same_expression(a, b)


def _same_terms(a: Any, b: Any) -> bool:
    """Structural equality of two terms or tuples of terms, graphs compared as expressions."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_terms(x, y) for x, y in zip(a, b))
    ga, gb = _graph(a), _graph(b)
    if ga is not None and gb is not None:
        return _same(ga, gb)
    return a == b


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
    graphs = [_graph(a) if not isinstance(a, _NUMBER) else a for a in args]
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
        inputs = _inputs(term, op, kind)
        return None if inputs is None else (term.owner.op, inputs)
    if isinstance(term, ExpressionTuple) and len(term) > 0:
        head = term[0]
        if (op is not None and head == op) or (kind is not None and isinstance(head, kind)):
            return head, tuple(term[1:])
    return None


def _bind(v: Any, value: Any, state: Any) -> Iterator[Any]:
    s = _unify(v, value, state)
    if s is not False:
        yield s


def _resolve(term: Any, state: Any) -> Any:
    """`term` with the state's bindings substituted (a shallow walk for anything but tuples)."""
    return reify(term, state) if isinstance(term, (tuple, list)) else _walk(term, state)


def _isvar(value: Any) -> bool:
    """`isvar` without its metaclass check: whether `value` is a logic variable."""
    return Var in type(value).__mro__


def _walk(value: Any, state: Any) -> Any:
    """What `value` is bound to in `state` (itself when it is not a bound logic variable)."""
    while Var in type(value).__mro__ and value in state:
        value = state[value]
    return value


def _unify(u: Any, v: Any, state: Any) -> Any:
    """`unify`, with the common case (an unbound logic variable on the left) done directly."""
    u = _walk(u, state)
    if _isvar(u):
        return assoc(state, u, v)
    return unify(u, v, state)


def _then(stream: Iterable[Any], goal: Goal) -> Iterator[Any]:
    for state in stream:
        yield from goal(state)


# -- goals over terms ---------------------------------------------------------------------------


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
        return (backward if _isvar(_walk(lhs, state)) else forward)(state)

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
        if not _isvar(t):
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
        if not _isvar(t):
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


def nodeo(term: Any, kind: type, op: Any, args: Any) -> Goal:
    """`term` applies `op`, an op of class `kind` (e.g. a `DimShuffle`), to the tuple `args`.

    With `term` bound, `op` and `args` are read from it; with `op` and
    `args` bound, `term` is built.
    """

    def goal(state):
        t = _walk(term, state)
        if not _isvar(t):
            found = _arguments(t, kind=kind)
            if found is not None:
                s = _unify((op, args), found, state)
                if s is not False:
                    yield s
            return
        head, a = _walk(op, state), _resolve(args, state)
        if isinstance(head, kind) and isinstance(a, (tuple, list)):
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
            if _same_terms(forward(candidate), b):
                s = _unify(a, candidate, state)
                if s is not False:
                    yield s

    return goal


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


def replaceableo(lhs: Any, rhs: Any) -> Goal:
    """`rhs` may stand for `lhs` in a graph: same dtype and rank, every static length of `lhs` kept.

    Checked once both are bound; a rule ending with it never proposes a
    replacement the engine would refuse.
    """

    def goal(state):
        old, new = _graph(_walk(lhs, state)), _graph(_walk(rhs, state))
        if old is not None and new is not None and old.type.is_super(new.type):
            yield state

    return goal


def rewrite_operandso(op: Op, lhs: Any, rhs: Any, relate: Callable[[Any, Any], Goal]) -> Goal:
    """`lhs` applies `op` to a tuple of operands, `rhs` is `applyo(op, other)`, `relate(operands, other)`.

    The shape of every rule on an add's or mul's operand list; the result
    must be able to replace `lhs` (`replaceableo`).
    """
    terms, result = var(prefix="terms"), var(prefix="result")
    return conj(
        along(lhs, operandso(lhs, op, terms), relate(terms, result), variadico(rhs, op, result)),
        replaceableo(lhs, rhs),
    )


# -- goals over operand lists of add and mul ---------------------------------------------------------
#
# Each relates two tuples of terms as the graph of a function on tuples (see `mappingo`).  They act
# only on operands of one dtype: reordering or regrouping integers of mixed widths would change where
# they wrap around, and floats of mixed widths where they round.

_NEUTRAL: dict[Op, int] = {ops.add: 0, ops.mul: 1}
_UFUNC: dict[Op, np.ufunc] = {ops.add: np.add, ops.mul: np.multiply}


def _check_variadic(op: Op) -> None:
    if op not in _NEUTRAL:
        raise ValueError(f"expected add or mul, got {op}")


def _constant(value: Any, dtype: str) -> Constant:
    array = np.asarray(value, dtype=dtype)
    return Constant(TensorType(dtype, array.shape), array)


def _neutral_like(op: Op, model: Variable, dtype: str) -> Variable:
    """`op`'s neutral element (0 or 1) of `dtype`, broadcast to `model`'s shape: fill(model, 0 or 1)."""
    return ops.fill(model, _constant(_NEUTRAL[op], dtype))


def flatteno(op: Op, nested: Any, flat: Any) -> Goal:
    """`flat` is `nested` with every operand that applies `op` replaced by its operands, at any depth.

    Backward it re-nests one run of two or more consecutive operands (all
    but the whole list), the shortest runs first.
    """
    _check_variadic(op)
    return mappingo(nested, flat, partial(_spliced, op), partial(_nestings, op))


def _spliced(op: Op, terms: Any) -> tuple[Variable, ...] | None:
    graphs = _uniform(terms)
    if graphs is None:
        return None
    dtype = graphs[0].dtype
    flat: list[Variable] = []
    stack = list(reversed(graphs))
    changed = False
    while stack:
        g = stack.pop()
        inner = _inputs(g, op)
        if inner is not None and all(i.dtype == dtype for i in inner):
            stack.extend(reversed(inner))
            changed = True
        else:
            flat.append(g)
    return tuple(flat) if changed else None


def _nestings(op: Op, terms: Any) -> Iterator[tuple[Variable, ...]]:
    graphs = _graphs(terms) or ()
    n = len(graphs)
    for length in range(2, n):
        for start in range(n - length + 1):
            inner = _build(op, graphs[start : start + length])
            if inner is not None:
                yield (*graphs[:start], inner, *graphs[start + length :])


def sortedo(terms: Any, ordered: Any) -> Goal:
    """`ordered` is `terms` stably sorted by `canonical_key` (constants first), and differs from it.

    Only the first constant leads: others (those `foldedo` left apart because
    combining them would overflow, underflow or be invalid) go last, so the
    sort does not make the left-to-right fold combine them first
    (``1e200 * x * 1e200`` stays as it is).  Backward it proposes the
    rotations of `ordered` that sort back to it.
    """
    return mappingo(terms, ordered, _sorted, _rotations)


_LAST = (4,)  # after every `canonical_key`


def _sorted(terms: Any) -> tuple[Variable, ...] | None:
    graphs = _uniform(terms)
    if graphs is None:
        return None
    keys = [canonical_key(g) for g in graphs]
    constants = [i for i, key in enumerate(keys) if key == (0,)]
    for i in constants[1:]:
        keys[i] = _LAST
    order = sorted(range(len(graphs)), key=keys.__getitem__)
    if order == list(range(len(graphs))):
        return None
    return tuple(graphs[i] for i in order)


def _rotations(terms: Any) -> Iterator[tuple[Variable, ...]]:
    graphs = _graphs(terms) or ()
    for k in range(1, len(graphs)):
        yield graphs[k:] + graphs[:k]


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
    _check_variadic(op)
    return mappingo(terms, folded, partial(_folded, op))


def _folded(op: Op, terms: Any) -> tuple[Variable, ...] | None:
    graphs = _uniform(terms)
    if graphs is None:
        return None
    constants = [g for g in graphs if isinstance(g, Constant)]
    if len(constants) < 2:
        return None
    try:
        with np.errstate(all="raise"):
            value = reduce(_UFUNC[op], [c.data for c in constants])
    except (FloatingPointError, ArithmeticError):
        return None
    rest = [g for g in graphs if not isinstance(g, Constant)]
    return (_constant(value, graphs[0].dtype), *rest)


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
    _check_variadic(op)
    return mappingo(terms, kept, partial(_without_neutral, op), partial(_with_neutral, op))


def filled_constant(value: Variable) -> tuple[list[Variable], Constant] | None:
    """(models, c) when `value` is a constant `c` broadcast by fills, fill(m1, fill(m2, c)); else None.

    Such a value is `c` everywhere, shaped by the models: cancelling rules
    leave zeros and ones of this form.
    """
    models = []
    while not isinstance(value, Constant):
        inputs = _inputs(value, ops.fill)
        if inputs is None:
            return None
        models.append(inputs[0])
        value = inputs[1]
    return models, value


def equals_everywhere(constant: Constant, number: Any) -> bool:
    """Whether every element of `constant` (at least one) equals `number`."""
    data = constant.data
    if data.ndim == 0:
        return bool(data.item() == number)
    return data.size > 0 and bool(np.all(data == number))


def _neutral_parts(op: Op, value: Variable) -> list[Variable] | None:
    """The variables whose shapes a neutral operand carries (fill models and the constant), or None."""
    layers = filled_constant(value)
    if layers is None or not equals_everywhere(layers[1], _NEUTRAL[op]):
        return None
    return [*layers[0], layers[1]]


def _without_neutral(op: Op, terms: Any) -> tuple[Variable, ...] | None:
    graphs = _uniform(terms)
    if graphs is None:
        return None
    kept = list(range(len(graphs)))
    for i, g in enumerate(graphs):
        if len(kept) == 1:
            break
        parts = _neutral_parts(op, g)
        if parts is None:
            continue
        others = [graphs[j] for j in kept if j != i]
        shape = broadcast_shapes(*(other.type.shape for other in others))
        if all(_fits(p.type.shape, shape) or any(_same(p, other) for other in others) for p in parts):
            kept.remove(i)
    if len(kept) == len(graphs) > 1:
        return None
    return tuple(graphs[j] for j in kept)


def _with_neutral(op: Op, terms: Any) -> Iterator[tuple[Variable, ...]]:
    graphs = _graphs(terms)
    if graphs:
        yield (_constant(_NEUTRAL[op], upcast(*(g.dtype for g in graphs))), *graphs)


def _dropping_neutral(op: Op, graphs: Sequence[Variable]) -> tuple[Variable, ...]:
    """`graphs` without the neutral operands `neutralo` would drop."""
    return _without_neutral(op, graphs) or tuple(graphs)


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
    return mappingo(terms, collected, partial(_like_terms, cancelling))


def _coefficient(term: Variable, dtype: str) -> tuple[np.ndarray, tuple[Variable, ...]]:
    """(c, factors) with `term` = c * factors..., looking through one neg and a leading constant."""
    negated = _inputs(term, ops.neg)
    if negated is not None:
        term = negated[0]
    coefficient: np.ndarray = np.ones((), dtype=dtype)
    factors = _inputs(term, ops.mul)
    if factors is None:
        factors = (term,)
    elif len(factors) > 1 and isinstance(factors[0], Constant) and factors[0].dtype == dtype:
        coefficient, factors = factors[0].data, factors[1:]
    if negated is not None:
        coefficient = np.negative(coefficient)
    return coefficient, factors


def _signature(value: Variable) -> Any:
    """A hashable summary, equal for structurally equal graphs: an atom, or its op and inputs' ops."""
    inputs = _inputs(value)
    if inputs is None:
        return value
    return (value.owner.op, tuple(i if _inputs(i) is None else i.owner.op for i in inputs))


def _groups(keys: Sequence[tuple[Variable, ...] | None]) -> list[list[int]]:
    """Indices of structurally equal keys (tuples of graphs), by first appearance; None keys skipped.

    Keys are bucketed by signature first, so only look-alikes are compared.
    """
    groups: list[list[int]] = []
    buckets: dict[tuple, list[list[int]]] = {}
    for i, key in enumerate(keys):
        if key is None:
            continue
        bucket = buckets.setdefault(tuple(map(_signature, key)), [])
        for group in bucket:
            if all(map(_same, keys[group[0]], key)):
                group.append(i)
                break
        else:
            bucket.append([i])
            groups.append(bucket[-1])
    return groups


def _same_sign(arrays: Sequence[np.ndarray]) -> bool:
    """Whether the arrays are finite and nonzero, all positive or all negative."""
    if not all(np.all(np.isfinite(a)) for a in arrays):
        return False
    return all(np.all(a > 0) for a in arrays) or all(np.all(a < 0) for a in arrays)


def _regrouped(graphs: Sequence[Variable], replacements: dict[int, list[int]], built: dict[int, Variable]):
    """`graphs` with each group's first member replaced by its `built` term and the other members gone."""
    gone = {i for members in replacements.values() for i in members[1:]}
    return tuple(built.get(i, g) for i, g in enumerate(graphs) if i not in gone)


def _like_terms(cancelling: bool, terms: Any) -> tuple[Variable, ...] | None:
    graphs = _uniform(terms)
    if graphs is None or graphs[0].type.numpy_dtype.kind not in "iuf":
        return None
    dtype = graphs[0].dtype
    parts = [None if isinstance(g, Constant) else _coefficient(g, dtype) for g in graphs]
    groups = _groups([None if p is None else p[1] for p in parts])
    replacements, built = {}, {}
    for group in groups:
        if len(group) < 2:
            continue
        coefficients = [parts[i][0] for i in group]
        exact = dtype[0] != "f" or _same_sign(coefficients)
        if exact == cancelling:
            continue
        try:
            with np.errstate(all="raise"):
                total = np.asarray(reduce(np.add, coefficients), dtype=dtype)
            term = _scaled(total, parts[group[0]][1], dtype)
        except (FloatingPointError, ArithmeticError, TypeError):
            continue
        replacements[group[0]], built[group[0]] = group, term
    return _dropping_neutral(ops.add, _regrouped(graphs, replacements, built)) if built else None


def _scaled(total: np.ndarray, factors: Sequence[Variable], dtype: str) -> Variable:
    """total * factors...: the factors alone for a 0-d total of 1, zeros shaped like them for 0."""
    if total.size > 0 and np.all(total == 0):
        value: Variable = _constant(total, dtype)
        for factor in reversed(factors):
            value = ops.fill(factor, value)
        return value
    if total.ndim == 0 and total == 1:
        return factors[0] if len(factors) == 1 else ops.mul(*factors)
    return ops.mul(_constant(total, dtype), *factors)


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
    return mappingo(factors, collected, partial(_like_factors, general))


def _power(factor: Variable) -> tuple[Variable, Variable | None]:
    """(base, exponent) of `factor`: `b ** e` or `b` itself with exponent None (1)."""
    inputs = _inputs(factor, ops.pow)
    return (inputs[0], inputs[1]) if inputs is not None else (factor, None)


def _positive_integer(exponent: Variable | None) -> bool:
    if exponent is None:
        return True
    if not isinstance(exponent, Constant) or exponent.data.ndim != 0:
        return False
    value = exponent.data
    return bool(np.isfinite(value) and value >= 1 and value == np.round(value))


def _like_factors(general: bool, factors: Any) -> tuple[Variable, ...] | None:
    graphs = _uniform(factors)
    if graphs is None or graphs[0].type.numpy_dtype.kind not in ("f" if general else "iuf"):
        return None
    dtype = graphs[0].dtype
    powers = [None if isinstance(g, Constant) else _power(g) for g in graphs]
    groups = _groups([None if p is None else (p[0],) for p in powers])
    replacements, built = {}, {}
    for group in groups:
        if len(group) < 2:
            continue
        exponents = [powers[i][1] for i in group]
        if all(map(_positive_integer, exponents)) == general:
            continue
        try:
            exponent = _total_exponent(exponents, dtype)
            term = ops.pow(powers[group[0]][0], exponent)
        except (FloatingPointError, ArithmeticError, TypeError):
            continue
        replacements[group[0]], built[group[0]] = group, term
    return _regrouped(graphs, replacements, built) if built else None


def _total_exponent(exponents: Sequence[Variable | None], dtype: str) -> Variable:
    """The sum of the exponents (None standing for 1): a constant when all are, else an add."""
    if all(e is None or isinstance(e, Constant) for e in exponents):
        with np.errstate(all="raise"):
            total = reduce(np.add, [np.ones((), dtype) if e is None else e.data for e in exponents])
        return _constant(total, dtype)
    return ops.add(*(_constant(1, dtype) if e is None else e for e in exponents))


def cancelledo(factors: Any, kept: Any) -> Goal:
    """`kept` is the product `factors` with one factor cancelled against its divisor or reciprocal.

    ``x * (z / x) -> z`` and ``a * reciprocal(a) * b -> b``, anywhere in the
    list (floats; valid where x != 0).  The cancelled factor leaves ones
    shaped like it, dropped as `neutralo` would when they cannot widen the
    result.  Not run backward: what was cancelled is gone.
    """
    return mappingo(factors, kept, _cancelled)


def _position(graphs: Sequence[Variable], target: Variable, skip: int = -1) -> int | None:
    return next((j for j, g in enumerate(graphs) if j != skip and _same(g, target)), None)


def _cancelled(factors: Any) -> tuple[Variable, ...] | None:
    graphs = _uniform(factors)
    if graphs is None or graphs[0].type.numpy_dtype.kind != "f":
        return None
    dtype = graphs[0].dtype
    for i, g in enumerate(graphs):
        division = _inputs(g, ops.true_div)
        if division is not None:
            j = _position(graphs, division[1], skip=i)
            if j is not None:
                new = list(graphs)
                new[i], new[j] = division[0], _neutral_like(ops.mul, division[1], dtype)
                return _dropping_neutral(ops.mul, new)
        inverse = _inputs(g, ops.reciprocal)
        if inverse is not None:
            j = _position(graphs, inverse[0], skip=i)
            if j is not None:
                new = list(graphs)
                new[j] = _neutral_like(ops.mul, inverse[0], dtype)
                del new[i]
                return _dropping_neutral(ops.mul, new)
    return None


def divided_outo(divisor: Any, factors: Any, kept: Any) -> Goal:
    """`kept` is the product `factors` divided by `divisor`, one of its factors: ``(x * y) / y -> x``.

    The factor may sit anywhere in the list (floats; valid where y != 0); it
    leaves ones shaped like it, dropped as `neutralo` would when they cannot
    widen the result.  Not run backward: the divisor is gone.
    """
    return mappingo((divisor, factors), kept, _divided_out)


def _divided_out(pair: Any) -> tuple[Variable, ...] | None:
    divisor, graphs = _graph(pair[0]), _uniform(pair[1])
    if divisor is None or graphs is None or graphs[0].type.numpy_dtype.kind != "f":
        return None
    j = _position(graphs, divisor)
    if j is None:
        return None
    new = list(graphs)
    new[j] = _neutral_like(ops.mul, divisor, graphs[0].dtype)
    return _dropping_neutral(ops.mul, new)


def leading_literalo(number: Any, terms: Any, rest: Any) -> Goal:
    """`terms` is ``(number, *rest)``: a 0-d constant equal to `number`, then at least one term.

    Only a 0-d constant qualifies, so dropping it never changes the shape of
    the result.  Backward the plain number goes first (it takes the dtype of
    the terms beside it).
    """
    return mappingo(terms, rest, partial(_after_literal, number), lambda kept: [(number, *kept)])


def _after_literal(number: Any, terms: Any) -> tuple | None:
    if isinstance(terms, tuple) and len(terms) >= 2:
        data = literal_value(terms[0])
        if data is not None and data.ndim == 0 and bool(data == number):
            return terms[1:]
    return None

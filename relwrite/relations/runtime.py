"""The rule runtime: the one way every rule is run, forward or backward.

A pattern rule's relation (`pattern_relation`) is a kanren goal compiled
from its two patterns.  It picks its strategy from what is bound:

- the left side ground (a graph, or a term without logic variables): the
  left pattern's matcher enumerates its matches (AC-aware, sequence
  variables, guards decided as soon as what they read is matched) and each
  builds the right side;
- else the right side ground: the same matcher run on the right pattern,
  the left side built from it, its guards decided or left waiting;
- else: both sides unified with the patterns' terms (fresh variables, one
  operand per sequence variable), every guard waiting (`guards.guardo`).

So `kanren.run(1, q, r(graph, q))` and `answers(r, graph)` agree by
construction: `answers` is that run, reified, with the values the rule's
named variables took (for assumptions and explanations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from etuples.core import ExpressionTuple
from kanren.core import lall
from unification import reify, unify, var
from unification.utils import transitive_get as walk
from unification.variable import Var, isvar

from relwrite.graph.basic import Variable
from relwrite.relations.budget import charge, metered
from relwrite.relations.guards import is_ground, with_guard
from relwrite.relations.pattern import Pattern, Unbuildable, _build, _etuple, as_graph, can_replace, to_graph
from relwrite.relations.predicates import is_logic_variable

if TYPE_CHECKING:
    from relwrite.relations.registry import Rule

DIRECTIONS = ("forward", "backward")


class Answer:
    """One answer of a rule: the other side's term (`value`), and the values its variables took.

    `state` is the kanren state that gave it (None when a pattern rule's
    matcher answered directly); `bindings` are computed on first use.
    """

    __slots__ = ("_bindings", "_named", "state", "value")

    def __init__(self, value: Any, state: Any, named: Callable[[], dict[str, Any]] | None = None):
        self.value, self.state, self._named, self._bindings = value, state, named, None

    @property
    def bindings(self) -> dict[str, Any]:
        """The values the answer's logic variables took, by name (`bindings_of`), computed on first use."""
        if self._bindings is None:
            self._bindings = self._named() if self._named is not None else bindings_of(self.state)
        return self._bindings

    def __repr__(self) -> str:
        return f"Answer({self.value!r})"


class Where:
    """A guard over several named variables of a rule: `predicate(*their graph values)`.

    A sequence variable's value is a tuple of graphs.  Decided as soon as the
    variables are bound: during matching forward, else when the built side is
    ground (`guards.guardo`).
    """

    def __init__(self, variables: tuple[Var, ...], predicate: Callable[..., bool]):
        self.variables, self.predicate = variables, predicate

    def __call__(self, values: tuple) -> bool:
        return bool(self.predicate(*(_graphs_of(v) for v in values)))

    def decided(self, s: Mapping) -> bool | None:
        """The guard's verdict under `s`, or None while a variable is unbound."""
        values = tuple(s.get(v, v) for v in self.variables)
        if not is_ground(values):
            return None
        return self._verdict(values)

    def holds(self, s: Mapping) -> bool:
        """The verdict under a complete forward match `s` (every value a graph): no groundness walk."""
        try:
            values = tuple(s[v] for v in self.variables)
        except KeyError:
            return bool(self.decided(s))
        return self._verdict(values)

    def _verdict(self, values: tuple) -> bool:
        try:
            return self(values)
        except (TypeError, ValueError):
            return False


def _graphs_of(value: Any) -> Any:
    if isinstance(value, tuple) and not isinstance(value, ExpressionTuple):
        return tuple(as_graph(v) for v in value)
    return as_graph(value)


def pattern_relation(
    name: str,
    lhs: Pattern,
    rhs: Pattern,
    named: tuple[str, ...] = (),
    where: tuple[Where, ...] = (),
    keeps_type: bool = False,
) -> Callable:
    """The kanren relation of the rule `lhs -> rhs` (see the module docstring).

    `where` holds the guards over several variables.  With `keeps_type`, an
    answer whose two sides are ground graphs must be able to replace what
    it answers for (same dtype and rank, static lengths kept), a guard for
    rules whose operands may broadcast or promote (dropping a zero).
    `named` lists variable names whose values each answer records in the
    state, bound to logic variables with those prefixes (`bindings_of`).
    """
    named_vars = [(lhs.names[n], n) for n in named if n in lhs.names]
    left_vars = sorted(lhs.variables(), key=str)

    def fresh(s: Mapping) -> dict:
        return {**{v: var(prefix=str(v.token).rsplit("_", 1)[0]) for v in left_vars}, **s}

    def forward_matches(given: Any) -> Iterator[tuple[dict, Any]]:
        """(substitution, right side) for each match of the left pattern on ground `given`."""
        for s in lhs.matches(given):
            charge()  # a match, used or refused, is a step of the run's budget
            if all(w.holds(s) for w in where):
                built = _term(rhs, s)
                if built is not None and (not keeps_type or _replaceable(given, built)):
                    yield s, built

    def relation(a: Any, b: Any) -> Callable[[Any], Iterator[Any]]:
        def goal(state: Any) -> Iterator[Any]:
            a_, b_ = walk(a, state), walk(b, state)
            if not isvar(a_) and is_ground(a_):
                for s, built in forward_matches(a_):
                    yield from _finish(state, None, b_, rhs, s, (), built)
            elif not isvar(b_) and is_ground(b_):
                for s in rhs.matches(b_):
                    charge()
                    s = fresh(s)
                    yield from _finish(state, b_, a_, lhs, s, _guards(s))
            else:
                s = fresh({})
                built = _term(lhs, s)
                if built is not None:
                    state = unify(a_, built, state)
                    if state is not False:
                        yield from _finish(state, None, b_, rhs, s, _guards(s))

        def _guards(s: Mapping) -> list:
            found = [(_build(inner, s, _etuple), predicate) for inner, predicate in lhs.guards()]
            return found + [(tuple(s.get(v, v) for v in w.variables), w) for w in where]

        def _finish(
            state: Any, given: Any, other: Any, side: Pattern, s: dict, guards: list, built: Any = None
        ) -> Iterator[Any]:
            built = _term(side, s) if built is None else built
            if built is None or (keeps_type and given is not None and not _replaceable(given, built)):
                return
            if isvar(other) and type(state) is dict and other not in state:
                state = {**state, other: built}  # the common case, without unify's dispatch
            else:
                state = unify(other, built, state)
            for term, predicate in guards:
                if state is False:
                    return
                state = with_guard(state, term, predicate)
            if state is False:
                return
            for v, n in named_vars:
                if v in s:
                    state = unify(var(prefix=n), s[v], state)
            yield state

        return goal

    relation.__name__ = name
    relation.forward_matches = forward_matches  # the matcher without kanren states: `answers` uses it
    relation.names = {v: n for n, v in lhs.names.items() if not n.startswith("*")}
    return relation


def _term(side: Pattern, s: Mapping) -> Any:
    """`side` built under `s`, or None when it cannot be (a variadic op left with no operand)."""
    try:
        return side.term(s)
    except Unbuildable:
        return None


def _replaceable(given: Any, built: Any) -> bool:
    """Whether ground `built` can stand for `given` in a graph (always, while either is not a graph)."""
    old = as_graph(given)
    if not isinstance(old, Variable) or not is_ground(built):
        return True
    try:
        new = to_graph(built, like=old)
    except (TypeError, ValueError):
        return False
    return can_replace(old, new)


def run_relation(relation: Callable, term: Any, direction: str = "forward") -> Iterator[Any]:
    """The states of `relation` with `term` on the side `direction` reads and a fresh variable on the other.

    Lazily: the caller bounds the run (`islice`, a `relation_budget`, which each state pulled is
    charged to as a step).
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    q = var()
    goal = relation(term, q) if direction == "forward" else relation(q, term)
    for state in metered((goal if callable(goal) else lall(goal))({})):
        yield q, state


def answers(rule: Rule | Callable, term: Any, direction: str = "forward") -> Iterator[Answer]:
    """The answers of `rule` (a Rule or any relation) for `term` run `direction`, lazily.

    Forward, `term` is the left side and the answers are right sides;
    backward the reverse.  A Rule's cheap `screen` and `guard` are tried first.  Each
    answer's `bindings` maps the names of the logic variables bound in its
    state (by prefix) to their values.
    """
    direct = direct_answers(rule, term, direction)
    if direct is not None:
        yield from direct
        return
    for q, state in run_relation(getattr(rule, "relation", rule), term, direction):
        value = walk(q, state)
        yield Answer(value if is_ground(value) else reify(value, state), state)


def direct_answers(
    rule: Rule | Callable, term: Any, direction: str = "forward", screened: bool = False
) -> Iterator[Answer] | None:
    """`answers` where plain function calls give them, without kanren states (a `relation_budget` still
    counts the matches and values): a screen or guard refusing a graph, a pattern's matcher on a ground
    term, a goal's `forward_values`; None when the goal must run.  `screened`: the caller has tested
    the screen."""
    found = forward_plan(rule, screened)(term) if direction == "forward" else None
    if found is None:
        return None
    names, matches, values = found
    if matches is not None:
        return (
            Answer(built, None, lambda s=s: {n: s[v] for v, n in names.items() if v in s})
            for s, built in matches
        )
    return (Answer(value, None, dict) for value in metered(values))


def plain_values(found: tuple | None) -> Iterable[Any] | None:
    """The values in what a `forward_plan` gives (None stays None: the goal must run)."""
    if found is None:
        return None
    _, matches, values = found
    return (built for _, built in matches) if matches is not None else values


def forward_plan(rule: Rule | Callable, screened: bool = False) -> Callable[[Any], tuple | None]:
    """A function of a term giving (the relation's variable names, its matcher's (substitution, built)
    pairs or None, values) where plain function calls answer forward (no values when a screen or
    guard refuses), None when kanren must run; the rule's attributes are read here, once, so a caller
    running one rule on many terms (the engine) keeps the plan."""
    guards = tuple(
        g
        for g in (None if screened else getattr(rule, "screen", None), getattr(rule, "guard", None))
        if g is not None
    )
    relation = getattr(rule, "relation", rule)
    matches = getattr(relation, "forward_matches", None)
    names = getattr(relation, "names", None) if matches is not None else None
    direct = getattr(relation, "forward_values", None)

    def plan(term: Any) -> tuple | None:
        if guards and isinstance(term, Variable):
            for guard in guards:
                if not guard(term):
                    return None, None, ()
        if matches is not None and not is_logic_variable(term) and is_ground(term):
            return names, matches(term), None  # the goal's own ground branch, without kanren states
        values = direct(term) if direct is not None else None  # a goal whose forward run is a call
        return None if values is None else (None, None, values)

    return plan


def bindings_of(state: Any) -> dict[str, Any]:
    """The values of a state's logic variables, by prefix (``var(prefix="y")`` is y), first binding kept."""
    bound: dict[str, Any] = {}
    for v in getattr(state, "data", state):
        if not isinstance(v, Var) or not isinstance(v.token, str):
            continue
        name = v.token.rsplit("_", 1)[0]
        if name and name not in bound:
            bound[name] = reify(v, state)
    return bound

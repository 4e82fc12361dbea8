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
from functools import partial
from typing import TYPE_CHECKING, Any

from etuples.core import ExpressionTuple
from kanren.core import lall
from unification import reify, unify, var
from unification.utils import transitive_get as walk
from unification.variable import Var, isvar

from relwrite.graph.basic import Variable
from relwrite.graph.terms import note_read
from relwrite.relations.budget import charge, metered
from relwrite.relations.guards import is_ground, with_guard
from relwrite.relations.pattern import (
    GRAPHS,
    Pattern,
    Unbuildable,
    _build,
    _etuple,
    as_graph,
    can_replace,
    same_value,
    to_graph,
)
from relwrite.relations.predicates import is_logic_variable

if TYPE_CHECKING:
    from relwrite.relations.registry import Rule

DIRECTIONS = ("forward", "backward")
"""The ways one rule runs."""

RUN_DIRECTIONS = (*DIRECTIONS, "both")
"""The ways a set of rules runs: one way, or both."""


def checked_direction(direction: str, allowed: tuple[str, ...] = RUN_DIRECTIONS) -> str:
    """`direction`, or a ValueError naming it and what is allowed."""
    if direction not in allowed:
        raise ValueError(f"direction must be one of {', '.join(allowed)}, got {direction!r}")
    return direction


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

    def holds(self, s: Mapping, t: Any = None) -> bool:
        """The verdict under a complete match `s` on target `t` (graphs when None): no groundness walk."""
        try:
            values = tuple(s[v] for v in self.variables)
        except KeyError:
            return bool(self.decided(s))
        if t is not None and t is not GRAPHS:
            return self._verdict(tuple(t.structured(v) for v in values))
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


class Computed:
    """A named value a rule computes from its variables: ``compute={"c": Computed(fn, inverse)}``.

    `function`'s parameters name the rule's variables (or values computed
    before it); it returns the value, or None where the rule does not apply.
    `inverse`, when declared, runs it backward: its parameters name the
    computed value and variables the rule's right side binds, and it returns
    candidate bindings (dicts by name) of `function`'s parameters; each is
    kept only when `function` maps it back onto the value, so the two
    directions agree by construction.  Without an inverse, a rule whose right
    side uses the value does not run backward.
    """

    def __init__(self, function: Callable[..., Any], inverse: Callable[..., Iterable[Mapping]] | None = None):
        for what, fn in (("function", function), ("inverse", inverse)):
            if fn is not None and not callable(fn):
                raise TypeError(f"a computed value's {what} must be callable, got {fn!r}")
        self.function, self.inverse = function, inverse


class _Compute:
    """A `Computed` compiled against a rule's names: the variable it binds and those its functions read."""

    def __init__(
        self, var_: Var, params: tuple[Var, ...], computed: Computed, inverse_params: tuple, names: dict
    ):
        self.var, self.params, self.computed = var_, params, computed
        self.inverse_params = inverse_params
        self.names = names  # parameter name -> variable, for the inverse's candidate bindings

    def value(self, s: Mapping, t: Any) -> Any:
        """The computed value under `s`, or None (unbound parameters, refusal, or a function error)."""
        try:
            args = [t.structured(s[v]) for v in self.params]
        except KeyError:
            return None
        try:
            return self.computed.function(*args)
        except (TypeError, ValueError, ArithmeticError):
            return None

    def preimages(self, s: Mapping, t: Any) -> Iterator[dict]:
        """`s` extended by each candidate of the inverse that the function maps back onto its value."""
        try:
            args = [t.structured(s[v]) for v in self.inverse_params]
            candidates = list(self.computed.inverse(*args))
        except KeyError:
            return
        except (TypeError, ValueError, ArithmeticError):
            return
        for candidate in candidates:
            extended = dict(s)
            for name, value in candidate.items():
                v = self.names.get(name)
                if v is None:
                    break
                bound = extended.get(v, _UNBOUND)
                if bound is _UNBOUND:
                    extended[v] = value
                elif not t.same(bound, value):
                    break
            else:
                image = self.value(extended, t)
                if image is not None and t.same(s[self.var], image):
                    yield extended


_UNBOUND = object()


class Sides:
    """A rule's declaration as the runtime reads it: its two patterns, `where` guards, computed values.

    `forward`/`backward` complete a substitution found by matching the side a
    direction reads, on any matching target (graph variables, e-classes):
    guards decided, computed values bound (backward through their inverses).
    Every way of running a rule goes through them: the kanren relation, the
    engine's direct answers, exploration's e-matching.
    """

    def __init__(
        self,
        lhs: Pattern,
        rhs: Pattern,
        where: tuple[Where, ...] = (),
        computed: tuple[_Compute, ...] = (),
        keeps_type: bool = False,
    ):
        self.lhs, self.rhs, self.where, self.computed, self.keeps_type = lhs, rhs, where, computed, keeps_type
        self.lhs_variables = frozenset(lhs.variables())
        self._constraints = lhs.guards()
        whole = lhs.whole_operands
        self.operand_list: tuple[Any, Var] | None = None
        """(op, its operands' variable) for a rule of a whole operand list whose right side is a value
        computed from it, ``(add, *terms) -> f(terms)``, with no `where` guard: its one match on a graph
        is the node's operand list (`forward_matches` reads it directly)."""
        if whole is not None and not where and rhs.named in {c.var for c in computed}:
            self.operand_list = whole

    def forward(self, s: dict, t: Any = GRAPHS) -> Iterator[dict]:
        """`s` (a match of the left side) with its guards decided and computed values bound (`completed`),
        as the one substitution of a stream (backward ones may give several)."""
        done = self.completed(s, t)
        if done is not None:
            yield done

    def completed(self, s: dict, t: Any = GRAPHS) -> dict | None:
        """`s` (a match of the left side) with its guards decided and computed values bound, or None
        where a guard or a computed value refuses."""
        if self.where and not all(w.holds(s, t) for w in self.where):
            return None
        for c in self.computed:
            value = c.value(s, t)
            if value is None:
                return None
            s = {**s, c.var: value}
        return s

    def backward(self, s: dict, t: Any = GRAPHS, partial: bool = False) -> Iterator[dict]:
        """`s` (a match of the right side) extended to the left side's variables through the inverses
        of the computed values it holds, with the left side's guards decided.

        With `partial` (a kanren run), variables nothing determines may stay
        unbound, and guards are left to the caller, which decides or defers them.
        """
        states = [s]
        for c in reversed(self.computed):
            if c.var not in s:
                continue
            if c.computed.inverse is None:
                return
            states = [found for state in states for found in c.preimages(state, t)]
        for state in states:
            if partial or (self.lhs_variables <= state.keys() and self._left_guards_hold(state, t)):
                yield state

    def _left_guards_hold(self, s: dict, t: Any) -> bool:
        for inner, constraint in self._constraints:
            value = s.get(inner.var, _UNBOUND) if hasattr(inner, "var") else _UNBOUND
            try:
                if value is _UNBOUND:
                    seen = {v: t.guarded(x) for v, x in s.items()}
                    ok = constraint(as_graph(_build(inner, seen, _etuple)))
                else:
                    ok = constraint(t.guarded(value))
            except (TypeError, ValueError):
                return False
            if not ok:
                return False
        return all(w.holds(s, t) for w in self.where)


def completions(rule: Any, s: dict, direction: str, target: Any = GRAPHS) -> Iterator[dict]:
    """The substitutions completing `s`, a match of the side of `rule` that `direction` reads, on `target`:
    what building the other side needs (see `Sides`)."""
    sides = rule.sides
    return sides.forward(s, target) if direction == "forward" else sides.backward(s, target)


def pattern_relation(name: str, sides: Sides, named: tuple[str, ...] = (), backward: bool = True) -> Callable:
    """The kanren relation of a rule declared by `sides` (see the module docstring).

    `named` lists variable names whose values each answer records in the
    state, bound to logic variables with those prefixes (`bindings_of`).
    `backward=False` (a rule declared one way) answers nothing for a bound
    right side and an unbound left side.
    """
    lhs, rhs, keeps_type = sides.lhs, sides.rhs, sides.keeps_type
    named_vars = [(lhs.names[n], n) for n in named if n in lhs.names]
    left_vars = sorted(lhs.variables(), key=str)

    def fresh(s: Mapping) -> dict:
        return {**{v: var(prefix=str(v.token).rsplit("_", 1)[0]) for v in left_vars}, **s}

    def relation(a: Any, b: Any) -> Callable[[Any], Iterator[Any]]:
        def goal(state: Any) -> Iterator[Any]:
            a_, b_ = walk(a, state), walk(b, state)
            if not isvar(a_) and is_ground(a_):
                for s, built in forward_matches(sides, a_):
                    yield from _finish(state, None, b_, rhs, s, (), built)
            elif not isvar(b_) and is_ground(b_):
                if not backward:
                    return
                for s in rhs.matches(b_):
                    charge()
                    for found in sides.backward(s, GRAPHS, partial=True):
                        found = fresh(found)
                        yield from _finish(state, b_, a_, lhs, found, _guards(found))
            else:
                s = fresh({c.var: var(prefix=str(c.var.token).rsplit("_", 1)[0]) for c in sides.computed})
                built = _term(lhs, s)
                if built is not None:
                    state = unify(a_, built, state)
                    if state is not False:
                        yield from _finish(state, None, b_, rhs, s, _guards(s) + _computations(s))

        def _guards(s: Mapping) -> list:
            found = [(_build(inner, s, _etuple), predicate) for inner, predicate in sides._constraints]
            return found + [(tuple(s.get(v, v) for v in w.variables), w) for w in sides.where]

        def _computations(s: Mapping) -> list:
            """Each computed value as a waiting guard: its function of its parameters equals it."""
            return [(tuple(s.get(v, v) for v in (*c.params, c.var)), _Agrees(c)) for c in sides.computed]

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
    return relation


class _Agrees:
    """A computed value's equation as a guard: decided once its parameters and the value are ground."""

    def __init__(self, compute: _Compute):
        self.compute = compute

    def __call__(self, values: tuple) -> bool:
        *params, value = (_graphs_of(v) for v in values)
        try:
            image = self.compute.computed.function(*params)
        except (TypeError, ValueError, ArithmeticError):
            return False
        return image is not None and same_value(image, value)


def forward_matches(sides: Sides, given: Any, as_graphs: bool = False) -> Iterator[tuple[dict, Any]]:
    """(substitution, right side) for each match of the left pattern on ground `given`; the right side
    an etuple, or with `as_graphs` the graph it evaluates to (what an engine replaces with)."""
    if sides.operand_list is not None and isinstance(given, Variable):
        done = _operand_list_match(sides, given)
        if done is not None:
            yield done, done[sides.rhs.named]
        return
    build = _graph if as_graphs else _term
    for s in sides.lhs.matches(given):
        charge()  # a match, used or refused, is a step of the run's budget
        for done in sides.forward(s):
            built = build(sides.rhs, done)
            if built is not None and (not sides.keeps_type or _replaceable(given, built)):
                yield done, built


def _operand_list_match(sides: Sides, given: Variable) -> dict | None:
    """The one match of an operand-list rule (`Sides.operand_list`) on graph variable `given`, completed
    by `Sides.completed` (its right side bound): the node's operands, read as the matcher reads them; None
    where the node is not the rule's op or the computed value refuses."""
    op, operands_var = sides.operand_list
    node = given.owner
    if node is None or len(node.outputs) != 1 or node.op != op:
        return None
    note_read(node)
    charge()
    done = sides.completed({operands_var: tuple(node.inputs)})
    if done is None or (sides.keeps_type and not _replaceable(given, done[sides.rhs.named])):
        return None
    return done


def _term(side: Pattern, s: Mapping) -> Any:
    """`side` built under `s`, or None when it cannot be (a variadic op left with no operand)."""
    try:
        return side.term(s)
    except Unbuildable:
        return None


def _graph(side: Pattern, s: Mapping) -> Any:
    """`_term`, evaluated as it is built: each application made by calling its op (what evaluating the
    etuple does, without the etuple); None where it cannot be built or an op refuses its operands."""
    try:
        return side.instantiate(s, _applied)
    except (Unbuildable, TypeError, ValueError):
        return None


def _applied(op: Any, operands: list) -> Any:
    return op(*operands)


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
    checked_direction(direction, DIRECTIONS)
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
    counts the matches): a screen or guard refusing a graph, a declared rule's matcher on a ground
    term; None when the goal must run.  `screened`: the caller has tested
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


def forward_plan(
    rule: Rule | Callable, screened: bool = False, as_graphs: bool = False
) -> Callable[[Any], tuple | None]:
    """A function of a term giving (the relation's variable names, its matcher's (substitution, built)
    pairs or None, values) where plain function calls answer forward (no values when a screen or
    guard refuses), None when kanren must run; the rule's attributes are read here, once, so a caller
    running one rule on many terms (the engine) keeps the plan.  `as_graphs`: the matcher's right
    sides are graphs (`forward_matches`)."""
    guards = _guards(rule, screened)
    sides = getattr(rule, "sides", None)
    matches = partial(forward_matches, sides, as_graphs=as_graphs) if sides is not None else None
    names = {v: n for n, v in sides.lhs.names.items() if not n.startswith("*")} if sides is not None else None

    def plan(term: Any) -> tuple | None:
        if guards and isinstance(term, Variable):
            for guard in guards:
                if not guard(term):
                    return None, None, ()
        if matches is not None and not is_logic_variable(term) and is_ground(term):
            return names, matches(term), None  # the goal's own ground branch, without kanren states
        return None

    return plan


def direct_answer(rule: Rule | Callable, screened: bool = False) -> Callable[[Any], Any] | None:
    """For a rule of a whole operand list (`Sides.operand_list`), a function of a graph variable giving
    its one forward answer, a graph, or None: `forward_plan` without the streams, for the engine, which
    tries such rules on most nodes.  None for any other rule."""
    sides = getattr(rule, "sides", None)
    if sides is None or sides.operand_list is None:
        return None
    guards = _guards(rule, screened)
    named = sides.rhs.named

    def answer(given: Any) -> Any:
        if not isinstance(given, Variable) or (guards and not all(guard(given) for guard in guards)):
            return None
        done = _operand_list_match(sides, given)
        return None if done is None else done[named]

    return answer


def _guards(rule: Rule | Callable, screened: bool) -> tuple[Callable[[Any], bool], ...]:
    """The rule's own tests of a term run before it: its guard, and its screen unless the caller
    (`screened`) tested that already."""
    return tuple(
        g
        for g in (None if screened else getattr(rule, "screen", None), getattr(rule, "guard", None))
        if g is not None
    )


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

"""Guards: Python predicates on terms as kanren constraints that wait until their terms are ground.

A rule's guard (``x is a float``, ``the shapes fit``) can only be decided on
a graph.  `guardo(term, predicate)` decides it at once when `term` is
ground, and otherwise records it in the state (a kanren `ConstrainedState`)
and decides it as soon as a later unification grounds the term, so a
guarded rule still runs generatively: ``run(2, (a, b), rule(a, b))``
answers with the guard pending on the answers' variables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from etuples.core import ExpressionTuple
from kanren.constraints import ConstrainedState, ConstraintStore
from unification import reify
from unification.variable import Var

from relwrite.graph.basic import Op, Variable
from relwrite.graph.terms import GraphETuple

Predicate = Callable[[Any], bool]


_ATOMS = (
    Variable,
    GraphETuple,
    Op,
    bool,
    int,
    float,
    complex,
    str,
    np.number,
    np.bool_,
    np.ndarray,
    type(None),
)


def is_ground(term: Any) -> bool:
    """Whether `term` provably holds no logic variable.

    Graph variables, lazy graph terms, ops and numbers are ground; tuples,
    lists and etuples are ground when their items are; anything else (a cons
    pair, an unknown object) counts as not ground, so callers unify or
    reify it rather than trust it.
    """
    stack = [term]
    while stack:
        item = stack.pop()
        if isinstance(item, _ATOMS):
            continue
        if isinstance(item, (tuple, list, ExpressionTuple)) and not isinstance(item, Var):
            stack.extend(item)
            continue
        return False
    return True


def holds(term: Any, predicate: Predicate) -> bool:
    """`predicate` on the graph value of ground `term` (an etuple is evaluated; failing to build is False)."""
    try:
        value = term.evaled_obj if isinstance(term, ExpressionTuple) else term
        return bool(predicate(value))
    except (TypeError, ValueError):
        return False


class GuardStore(ConstraintStore):
    """The pending guards of a state: (term, predicate) pairs decided once the term is ground."""

    __slots__ = ("pending",)
    op_str = "where"

    def __init__(self, pending: tuple[tuple[Any, Predicate], ...] = (), lvar_constraints: Any = None):
        super().__init__(lvar_constraints)
        self.pending = pending

    def pre_unify_check(self, lvar_map: Any, lvar: Any = None, value: Any = None) -> bool:
        return True

    def post_unify_check(
        self, lvar_map: Any, lvar: Any = None, value: Any = None, old_state: Any = None
    ) -> bool:
        still = []
        for term, predicate in self.pending:
            now = reify(term, lvar_map)
            if not is_ground(now):
                still.append((term, predicate))
            elif not holds(now, predicate):
                return False
        self.pending = tuple(still)  # `old_state` holds a copy of this store: updating it is safe
        return True

    def copy(self) -> GuardStore:
        return GuardStore(self.pending)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GuardStore) and self.pending == other.pending

    def __repr__(self) -> str:
        return f"GuardStore({len(self.pending)} pending)"


def with_guard(state: Any, term: Any, predicate: Predicate) -> Any:
    """`state` with the guard `predicate(term)`: decided now when `term` is ground (False when it fails)."""
    now = reify(term, state)
    if is_ground(now):
        return state if holds(now, predicate) else False
    state = ConstrainedState(state) if not isinstance(state, ConstrainedState) else state.copy()
    store = state.constraints.get(GuardStore)
    if store is None:
        store = state.constraints[GuardStore] = GuardStore()
    store.pending = (*store.pending, (term, predicate))
    return state


def guardo(term: Any, predicate: Predicate) -> Callable[[Any], Iterator[Any]]:
    """The goal: `predicate` holds on the graph value of `term`, now or once `term` is ground."""

    def goal(state: Any) -> Iterator[Any]:
        guarded = with_guard(state, term, predicate)
        if guarded is not False:
            yield guarded

    return goal

"""Tuple patterns: the small pattern language of `PatternSub` and `rule`.

A pattern is
- a tuple ``(op, *sub_patterns)``: an application of `op`;
- a string: a named logic variable (the same name binds the same value);
- ``{"pattern": p, "constraint": fn}``: `p`, accepted only when ``fn(variable)`` is true;
- a Python or numpy number: on the input side it matches a constant whose
  every element equals it; on the output side it becomes a constant;
- a graph `Variable` or `Constant`, or a kanren logic variable: itself.

Matching is staged: the outer application is unified with the graph first,
then each inner application with the variable bound in its place, so every
matched intermediate variable is known (for constraints and client checks)
and no more of the graph is looked at than the pattern covers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from etuples import etuple
from etuples.core import ExpressionTuple
from unification import reify, unify, var
from unification.variable import Var, isvar

from relwrite.graph.basic import Constant, Op, Variable, as_variable

Constraint = Callable[[Variable], bool]


def as_graph(value: Any) -> Any:
    """The graph object for a matched value: etuples are evaluated, the rest returned as is."""
    return value.evaled_obj if isinstance(value, ExpressionTuple) else value


def _constant_equal_to(number: Any) -> Constraint:
    target = np.asarray(number)

    def constraint(value: Variable) -> bool:
        return isinstance(value, Constant) and value.data.size > 0 and bool(np.all(value.data == target))

    constraint.__name__ = f"equals_{target.item()!r}"
    return constraint


@dataclass
class _Stage:
    """An inner application matched after the outer one: `term` must unify with the value of `slot`."""

    slot: Var
    term: Any


class Pattern:
    """A compiled pattern; `names` maps pattern strings to their logic variables."""

    def __init__(self, spec: Any, names: dict[str, Var] | None = None, staged: bool = True):
        self.spec = spec
        self.staged = staged
        self.names: dict[str, Var] = {} if names is None else names
        self.stages: list[_Stage] = []
        self.constraints: list[tuple[Var | None, Constraint]] = []  # None: the root
        self.term = self._compile(spec, top=True)
        root = spec
        while isinstance(root, Mapping):
            root = root.get("pattern")
        self.head = root[0] if isinstance(root, tuple) and root and isinstance(root[0], Op) else None
        self.depth = _depth(spec)

    def _name(self, name: str) -> Var:
        if name not in self.names:
            self.names[name] = var(prefix=name)
        return self.names[name]

    def _compile(self, spec: Any, top: bool = False) -> Any:
        if isinstance(spec, str):
            return self._name(spec)
        if isinstance(spec, Mapping):
            if set(spec) - {"pattern", "constraint"} or "pattern" not in spec:
                raise ValueError(f"pattern dict needs 'pattern' (and optionally 'constraint'), got {spec!r}")
            inner = self._compile(spec["pattern"], top=top)
            if "constraint" in spec:
                if not self.staged:
                    raise ValueError(f"constraints belong in input patterns, not in {spec!r}")
                if top and not isvar(inner):  # the root is the matched value itself: nothing to stage
                    self.constraints.append((None, spec["constraint"]))
                    return inner
                slot = inner if isvar(inner) else self._stage(inner)
                self.constraints.append((slot, spec["constraint"]))
                return slot
            return inner
        if isinstance(spec, tuple):
            if not spec or not isinstance(spec[0], (Op, Var)):
                raise ValueError(f"a tuple pattern must start with an op, got {spec!r}")
            if top or not self.staged:
                return etuple(spec[0], *(self._compile(s) for s in spec[1:]))
            # the stage is listed before its children's, so `match` binds a slot before reading it
            stage = _Stage(var(prefix="sub"), None)
            self.stages.append(stage)
            stage.term = etuple(spec[0], *(self._compile(s) for s in spec[1:]))
            return stage.slot
        if isinstance(spec, (Variable, Var)):
            return spec
        if isinstance(spec, (bool, int, float, np.number, np.bool_)):
            if not self.staged:
                return spec
            slot = var(prefix="const")
            self.constraints.append((slot, _constant_equal_to(spec)))
            return slot
        raise TypeError(f"unsupported pattern element {spec!r} ({type(spec).__name__})")

    def relational(
        self,
    ) -> tuple[Any, list[tuple[Var, Any]], list[tuple[Var, Constraint]], list[tuple[Var, Any]]]:
        """The pattern as one kanren term: (term, literals, constraints, bindings).

        Inner applications are written inline; every number becomes a logic
        variable listed in `literals` with its value; every constraint is
        listed with the variable it applies to, and a constrained
        application gets a variable of its own, tied to it in `bindings`.
        """
        literals: list[tuple[Var, Any]] = []
        constraints: list[tuple[Var, Constraint]] = []
        bindings: list[tuple[Var, Any]] = []

        def compile_(spec: Any) -> Any:
            if isinstance(spec, str):
                return self._name(spec)
            if isinstance(spec, Mapping):
                inner = compile_(spec["pattern"])
                if "constraint" in spec:
                    if not isvar(inner):
                        slot = var(prefix="sub")
                        bindings.append((slot, inner))
                        inner = slot
                    constraints.append((inner, spec["constraint"]))
                return inner
            if isinstance(spec, tuple):
                return etuple(spec[0], *(compile_(s) for s in spec[1:]))
            if isinstance(spec, (bool, int, float, np.number, np.bool_)):
                slot = var(prefix="literal")
                literals.append((slot, spec))
                return slot
            return spec

        term = compile_(self.spec)
        return term, literals, constraints, bindings

    def _stage(self, term: Any) -> Var:
        slot = var(prefix="sub")
        self.stages.append(_Stage(slot, term))
        return slot

    def match(
        self,
        value: Variable,
        subst: Mapping | None = None,
        clients: Mapping[Variable, list] | None = None,
    ) -> dict | None:
        """The substitution making the pattern equal `value`, or None.

        With `clients` given, every matched intermediate variable must have
        exactly one client (so rewriting does not duplicate shared work).
        """
        s = unify(self.term, value, dict(subst or {}))
        if s is False:
            return None
        for stage in self.stages:
            bound = as_graph(s[stage.slot])
            if not isinstance(bound, Variable) or bound.owner is None:
                return None
            if clients is not None and len(clients.get(bound, ())) > 1:
                return None
            s = unify(stage.term, bound, s)
            if s is False:
                return None
        for slot, constraint in self.constraints:
            if not constraint(value if slot is None else as_graph(reify(slot, s))):
                return None
        return s

    def build(self, s: Mapping) -> Any:
        """The graph this (output) pattern denotes under substitution `s`."""
        return as_graph(reify(self.term, s))

    @property
    def text(self) -> str:
        """The pattern written out, e.g. ``exp(log(x))``."""
        return _show(self.spec)

    def __repr__(self) -> str:
        return f"Pattern({self.text})"


def _depth(spec: Any) -> int:
    """Levels of applications in a pattern (0 for a variable or constant)."""
    stack, best = [(spec, 0)], 0
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            stack.append((item.get("pattern"), level))
        elif isinstance(item, tuple):
            best = max(best, level + 1)
            stack.extend((s, level + 1) for s in item[1:])
    return best


def _show(spec: Any) -> str:
    if isinstance(spec, tuple):
        return f"{spec[0]}({', '.join(_show(s) for s in spec[1:])})"
    if isinstance(spec, Mapping):
        constraint = spec.get("constraint")
        suffix = f" if {getattr(constraint, '__name__', constraint)}" if constraint else ""
        return _show(spec.get("pattern")) + suffix
    return str(spec)


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

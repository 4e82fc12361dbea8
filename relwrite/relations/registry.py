"""Rules: kanren relations with the metadata engines, tests and docs need.

A `Rule` is itself a relation — `rule(lhs, rhs)` is a kanren goal — so
`run(1, q, r(graph, q))` rewrites forward and `run(1, q, r(q, graph))` runs
backward.  It also records its name, tags, tracks (head ops), assumptions
(domain preconditions such as ``"y != 0"``), its semantics (how its right
side's values relate to its left side's: one of `SEMANTICS`, defined in
docs/rule-safety.md), whether running it backward is meaningful, and examples.

A catalogue rule is one `rule(name, lhs_pattern, rhs_pattern, ...)`
declaration: its two patterns compile once to the matcher the engines run
(`relwrite.relations.pattern`: on graph nodes, and on e-classes in
exploration) and give the kanren goal that specifies it; guards (`where`)
and computed bindings (`compute`, backward through a declared inverse)
complete a match (`relwrite.relations.runtime`).  A goal written by hand
becomes a rule with `@relation(...)`: it answers through kanren once a side
is bound.
"""

from __future__ import annotations

import importlib
import inspect
import operator
import pickle
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
from cons.core import ConsError, car
from kanren.core import lall
from unification import reify, var
from unification.utils import transitive_get as walk
from unification.variable import Var, isvar

from relwrite.graph import ops
from relwrite.graph.basic import Op
from relwrite.relations.budget import metered
from relwrite.relations.pattern import Pattern
from relwrite.relations.runtime import Answer, Computed, Sides, Where, _Compute, answers, pattern_relation

PHASES = ("canonicalize", "stabilize", "specialize")
CANON = ("canonicalize", "fast_run", "fast_compile")
"""The tags of a canonicalize rule: in every mode."""
UNSAFE = (*CANON, "unsafe")
"""The tags of an unsafe canonicalize rule (opt-in)."""
STABILIZE = ("stabilize", "fast_run")
"""The tags of a stabilize rule."""
SPECIALIZE = ("specialize", "fast_run")
"""The tags of a specialize rule."""
OPT_IN_TAGS = frozenset({"unsafe", "explore", "accuracy"})
SEMANTICS = ("exact", "reassociates", "stabilizes", "unsafe")
"""How a rule's right side computes its left side's values (docs/rule-safety.md):

- exact: the same values on every input, NaN, infinities and the sign of zero included;
- reassociates: equal over the reals; in floating point it may round differently and may
  overflow or underflow an intermediate where the left side did not;
- stabilizes: equal where the left side is finite and accurate; where the left side is
  non-finite or inaccurate only because of floating-point range or rounding, the right side
  gives the mathematically right finite value;
- unsafe (tag `unsafe`, opt-in): may change the value where the left side is mathematically
  undefined or different: outside its assumptions, or where an input or the left side is not finite.
"""
_COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "!=": operator.ne}
_ASSUMPTION = re.compile(
    r"^\s*([A-Za-z_]\w*)\s*(>=|<=|!=|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)


@dataclass(frozen=True)
class Assumption:
    """A domain precondition on one variable of a rule: ``name op value`` (e.g. ``x > 0``)."""

    name: str
    op: str
    value: float

    @classmethod
    def parse(cls, text: str) -> Assumption:
        found = _ASSUMPTION.match(text) if isinstance(text, str) else None
        if found is None:
            raise ValueError(
                f"assumption {text!r} is not of the form 'NAME OP NUMBER' with OP one of > >= < <= !="
            )
        name, op, value = found.groups()
        return cls(name, op, float(value))

    def holds(self, values: Any) -> np.ndarray:
        """Elementwise, whether `values` satisfy the assumption."""
        return _COMPARE[self.op](np.asarray(values), self.value)

    def __str__(self) -> str:
        return f"{self.name} {self.op} {self.value:g}"


class Rule:
    """A rewrite rule: a bidirectional kanren relation plus metadata.

    - `tags`: one phase (canonicalize, stabilize or specialize) and others such
      as fast_run, fast_compile, unsafe (valid only under `assumptions`, with
      finite inputs and left side: opt-in), explore (kept out of default pipelines);
    - `tracks`: the ops an input can be headed by (None: any);
    - `assumptions`: preconditions the rule needs, as `Assumption`s;
    - `semantics`: one of `SEMANTICS`; by default `unsafe` for a rule tagged
      unsafe, `stabilizes` for one tagged stabilize, else `exact`.  Declaring
      `unsafe` adds the tag; the tag with another semantics is an error;
    - `backward`: whether running it backward terminates and means something,
      with `backward_note` saying why not when it does not;
    - `examples`: left-hand sides in `parse` syntax, typed by `types`;
    - `guard`: an optional cheap test a graph must pass for the rule to match
      (a necessary condition), checked by `forward` before the relation is
      built, so that failing attempts cost microseconds;
    - `screen`: a necessary condition of the same kind that reads only the
      node's op and output count and, per operand, a constant's value or its
      owner's op and output count (none of which changes while the node
      stays), so an engine may decide it once per such signature and skip a
      screened-out attempt's bookkeeping; a pattern rule's is its left side's
      (`Pattern.screen`);
    - `operand_screen`: a necessary condition one level further down (the
      operands' nodes: their ops, operand counts and their operands' heads),
      tested on a node the screen admits; a pattern rule's holds its left
      side's (`Pattern.operand_screen`).  The operands' nodes may change while
      the node stays, so an engine watches them when it refuses;
    - `idempotent`: the graphs its forward run builds never match it again
      while their operands stay the same (sorting, flattening), so an engine
      need not try it on them;
    - `composes`: the names of rules whose steps, taken in turn, reach what
      this rule does in one: a shortcut for the rewriting engine, which
      would build and commit every intermediate graph.  Exploration, which
      applies every rule it has to saturation, gains no form from it and
      leaves it out where it has those rules (`select_rules`).
    """

    def __init__(
        self,
        name: str,
        relation: Callable[[Any, Any], Any],
        tags: Iterable[str],
        tracks: Sequence[Op | type] | None = None,
        assumptions: Iterable[str] = (),
        backward: bool | str = True,
        examples: Iterable[str] = (),
        types: Mapping[str, str] | None = None,
        doc: str = "",
        lhs: Pattern | None = None,
        rhs: Pattern | None = None,
        guard: Callable[[Any], bool] | None = None,
        semantics: str | None = None,
        screen: Callable[[Any], bool] | None = None,
        idempotent: bool = False,
        operand_screen: Callable[[Any], bool] | None = None,
        composes: Sequence[str] = (),
    ):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"rule name must be an identifier, got {name!r}")
        self.name = name
        self.relation = relation
        self.tags = frozenset(tags)
        self.semantics = _semantics(name, self.tags, semantics)
        if self.semantics == "unsafe":
            self.tags |= {"unsafe"}
        self.tracks = tuple(tracks) if tracks is not None else None
        self.assumptions = tuple(Assumption.parse(a) for a in assumptions)
        self.backward = backward is True
        self.backward_note = None if backward is True else (backward or "not meaningful backward")
        self.examples = tuple(examples)
        self.types = dict(types or {})
        self.doc = " ".join(doc.split())
        self.lhs, self.rhs = lhs, rhs
        for what, test in (("guard", guard), ("screen", screen), ("operand_screen", operand_screen)):
            if test is not None and not callable(test):
                raise TypeError(f"rule {name}: a {what} must be callable, got {test!r}")
        self.guard = guard
        self.screen = screen
        self.operand_screen = operand_screen
        self.idempotent = bool(idempotent)
        listed = isinstance(composes, (tuple, list))
        if not (listed and all(isinstance(c, str) and c != name for c in composes)):
            raise TypeError(f"rule {name}: composes must name other rules, got {composes!r}")
        self.composes = tuple(composes)
        self.home: tuple[str, str] | None = None
        """(module, attribute) holding a catalogue rule, set when the catalogue lists it (pickling)."""
        self.sides: Sides | None = None  # a declared rule's patterns, guards and computed values (`rule`)

    @property
    def phases(self) -> tuple[str, ...]:
        """The pipeline phases the rule belongs to (its canonicalize/stabilize/specialize tags)."""
        return tuple(p for p in PHASES if p in self.tags)

    @property
    def phase(self) -> str | None:
        """The first pipeline phase the rule belongs to (None for a user's untagged rule)."""
        return next(iter(self.phases), None)

    def __call__(self, lhs: Any, rhs: Any) -> Any:
        return self.relation(lhs, rhs)

    def answers(self, term: Any, direction: str = "forward") -> Iterator[Answer]:
        """The rule's answers for `term` run `direction`, lazily (`relwrite.relations.runtime.answers`)."""
        return answers(self, term, direction)

    def forward(self, term: Any) -> Iterator[Any]:
        """The values of the rule's forward answers for `term` (the right sides), lazily."""
        return (a.value for a in answers(self, term))

    def __reduce__(self) -> tuple:
        """Pickle by reference (its relation is code): as the module attribute holding it, its home
        (`home`: the catalogue's rules know theirs) or the first module found holding it; a rule held
        by no module cannot be pickled, and says so."""
        if self.home is not None:
            return _module_attribute, self.home
        for module in list(sys.modules.values()):
            for attribute, value in list(getattr(module, "__dict__", {}).items()):
                if value is self:
                    return _module_attribute, (module.__name__, attribute)
        raise pickle.PicklingError(
            f"rule {self.name} is neither in the catalogue nor a module attribute: define it at the top "
            "level of a module to pickle it"
        )

    def __repr__(self) -> str:
        return f"<Rule {self.name} [{', '.join(sorted(self.tags))}]>"


def _module_attribute(module: str, attribute: str) -> Any:
    return getattr(importlib.import_module(module), attribute)


def _semantics(name: str, tags: frozenset[str], semantics: str | None) -> str:
    """The rule's semantics: the declared one, checked against its tags, or the default its tags give."""
    if semantics is None:
        return "unsafe" if "unsafe" in tags else "stabilizes" if "stabilize" in tags else "exact"
    if semantics not in SEMANTICS:
        raise ValueError(f"rule {name}: semantics must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    if "unsafe" in tags and semantics != "unsafe":
        raise ValueError(f"rule {name}: tagged unsafe, so its semantics is unsafe, not {semantics!r}")
    return semantics


def rule(
    name: str,
    lhs: Any,
    rhs: Any,
    tags: Iterable[str] = (),
    *,
    assumptions: Iterable[str] = (),
    examples: Iterable[str] | None = None,
    types: Mapping[str, str] | None = None,
    doc: str = "",
    semantics: str | None = None,
    where: Callable[..., bool] | Iterable[Callable[..., bool]] = (),
    keeps_type: bool = False,
    compute: Mapping[str, Callable[..., Any] | Computed] | None = None,
    idempotent: bool = False,
    screen: Callable[[Any], bool] | None = None,
    operand_screen: Callable[[Any], bool] | None = None,
    heads: Sequence[Op | type] | None = None,
    one_way: str | None = None,
    composes: Sequence[str] = (),
) -> Rule:
    """A rule from two patterns (see relwrite.relations.pattern); one declaration, both directions.

    Strings and logic variables name variables shared by the two sides
    (``"*rest"`` a sequence of operands; ``Op.pattern(prop="p")`` an op's
    prop); a number on the left matches a constant equal to it (any dtype),
    on the right it becomes a constant of the dtype around it.  A user's rule
    needs no tags.

    `where` holds guards over several variables: each a function whose
    parameters are named after pattern variables (a sequence variable's
    value is a tuple of graphs), true when the rule applies.  `compute` names
    values the right side uses that a function computes from the variables
    (its parameters named after them; a `Computed` may declare an inverse,
    the only way such a rule runs backward).  With `keeps_type` the rule
    applies only where its right side can replace its left side (same dtype
    and rank, static lengths kept): for rules whose operands may broadcast or
    promote, such as dropping a zero from a sum.  A constraint on an operand
    may declare `heads`, a tuple of the ops, op classes or `Constant` it can
    accept at all: the rule's screen then skips nodes with no such operand
    without calling it.  `idempotent`: what the rule builds never matches it
    again while its operands stay (an engine need not retry it there).
    `screen` adds a necessary condition to the left pattern's own screen,
    reading only the heads of the node's operands (see `Rule`): for a rule
    reading a whole operand list, which its pattern cannot narrow.
    `operand_screen` adds one to the left pattern's operand screen, reading
    no deeper than the ops of the operands' operands (see `Rule`).
    `heads` (ops or op classes) are what a left side headed by an op
    variable, ``("op", (fill, "m", "v"))``, may match at its root: its
    tracks (a `where` guard on the op narrows it further).

    The directions follow from the declaration: backward runs when every
    variable of the left side is bound by the right side or by the declared
    inverse of a computed value the right side uses.  `one_way` (a reason)
    declares a rule forward only where its backward answers would expand
    every application of a common op (every exp(x) into a ratio of
    sigmoids), so that exploration would never saturate.  `composes` names
    the rules whose steps reach in turn what this one does in one (see `Rule`).
    """
    for what, test in (("screen", screen), ("operand_screen", operand_screen)):
        if test is not None and not callable(test):  # before it is combined with the pattern's own
            raise TypeError(f"rule {name}: a {what} must be callable, got {test!r}")
    names: dict[str, Var] = {}
    lhs_pattern = Pattern(lhs, names)
    if lhs_pattern.head is None and not heads:
        raise ValueError(
            f"rule {name}: the left side must be an application of an op (an op variable at its root needs"
            f" `heads`), got {lhs!r}"
        )
    if heads and lhs_pattern.head is not None:
        raise ValueError(f"rule {name}: `heads` is for a left side headed by an op variable, got {lhs!r}")
    computed = _computed(name, compute or {}, names)
    rhs_pattern = Pattern(rhs, names, staged=False)
    known = lhs_pattern.variables() | {c.var for c in computed}
    unknown = rhs_pattern.variables() - known
    if unknown:
        by_var = {v: n.lstrip("*") for n, v in names.items()}
        strays = sorted(by_var.get(v, str(v)) for v in unknown)
        raise ValueError(f"rule {name}: the right side uses {strays}, which the left side does not bind")
    backward = _backward(lhs_pattern, rhs_pattern, computed, names) if one_way is None else one_way
    parsed = [Assumption.parse(a) for a in assumptions]
    unnamed = sorted({a.name for a in parsed} - {n.lstrip("*") for n in names})
    if unnamed:
        raise ValueError(f"rule {name}: assumptions about {unnamed}, which the rule does not name")
    guards = tuple(_where(name, fn, names) for fn in ([where] if callable(where) else where))
    sides = Sides(lhs_pattern, rhs_pattern, guards, computed, keeps_type)
    relation = pattern_relation(name, sides, tuple(a.name for a in parsed), backward=one_way is None)
    if examples is None:
        examples = () if lhs_pattern.guards() or guards or computed else (lhs_pattern.text,)
    made = Rule(
        name,
        relation,
        tags,
        tracks=tuple(heads) if heads else (lhs_pattern.head,),
        assumptions=assumptions,
        backward=backward,
        examples=examples,
        types=types,
        doc=doc or f"{lhs_pattern.text} -> {rhs_pattern.text}",
        lhs=lhs_pattern,
        rhs=rhs_pattern,
        screen=lhs_pattern.screen if screen is None else _both(lhs_pattern.screen, screen),
        operand_screen=_both_or_either(
            lhs_pattern.operand_screen if lhs_pattern.screens_operands else None, operand_screen
        ),
        semantics=semantics,
        idempotent=idempotent,
        composes=composes,
    )
    made.sides = sides
    return made


NEGATIONS = (
    ("", lambda e: (ops.neg, e), "neg("),
    ("_times_minus_one", lambda e: (ops.mul, -1, e), "mul(-1, "),
)
"""The two forms of a negation a rule reads: neg(e), and mul(-1, e), which canonicalize leaves as the
user wrote it (specialize turns it into neg(e), after stabilize): (name suffix, builder, example opening)."""


def negation_twins(
    name: str,
    lhs: Callable[[Callable[[Any], tuple]], Any],
    rhs: Any,
    tags: Iterable[str],
    examples: tuple[str, ...],
    doc: str,
    **options: Any,
) -> tuple[Rule, Rule]:
    """The rule `name` with its left side's negation written neg(e), and `name`_times_minus_one with it
    written mul(-1, e): `lhs(negate)` builds the left side, `{n}` in an example stands for the negation's
    opening; `options` go to `rule` (types, keeps_type, semantics, ...)."""
    return tuple(
        rule(
            name + suffix,
            lhs(negate),
            rhs,
            tags,
            examples=tuple(e.format(n=opening) for e in examples),
            doc=doc + ("" if not suffix else " (the negation written -1 * e, as canonicalize leaves it)"),
            **options,
        )
        for suffix, negate, opening in NEGATIONS
    )


def _both_or_either(
    first: Callable[[Any], bool] | None, second: Callable[[Any], bool] | None
) -> Callable[[Any], bool] | None:
    """`_both` of the two tests, or the one given, or None."""
    if first is None or second is None:
        return first if second is None else second
    return _both(first, second)


def _both(first: Callable[[Any], bool], second: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def screen(value: Any) -> bool:
        return first(value) and second(value)

    return screen


def _computed(rule_name: str, compute: Mapping[str, Any], names: dict[str, Var]) -> tuple[_Compute, ...]:
    """The rule's computed values compiled against its names, in declaration order."""
    found = []
    for key, declared in compute.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"rule {rule_name}: a computed value needs an identifier name, got {key!r}")
        if key in names:
            raise ValueError(f"rule {rule_name}: computed {key!r} is already a variable of the left side")
        if not isinstance(declared, Computed):
            try:
                declared = Computed(declared)
            except TypeError as exc:
                raise TypeError(f"rule {rule_name}: computed {key!r}: {exc}") from None
        params = _parameters(rule_name, declared.function, names, f"computed {key!r}")
        names[key] = var(prefix=key)
        inverse = ()
        if declared.inverse is not None:
            inverse = _parameters(rule_name, declared.inverse, names, f"the inverse of {key!r}")
        by_name = {n.lstrip("*"): v for n, v in names.items()}
        found.append(_Compute(names[key], params, declared, inverse, by_name))
    return tuple(found)


def _parameters(rule_name: str, fn: Callable, names: Mapping[str, Var], what: str) -> tuple[Var, ...]:
    """The variables a function's parameters name (``rest`` may name ``*rest``)."""
    variables = []
    for parameter in inspect.signature(fn).parameters:
        key = parameter if parameter in names else f"*{parameter}"
        if key not in names:
            raise ValueError(f"rule {rule_name}: {what} reads {parameter!r}, which the rule does not name")
        variables.append(names[key])
    return tuple(variables)


def _backward(
    lhs: Pattern, rhs: Pattern, computed: tuple[_Compute, ...], names: Mapping[str, Var]
) -> bool | str:
    """True when running backward determines the left side, else why not."""
    if not rhs.matchable:
        return "the right side splices several sequence variables into one application: it matches nothing"
    bound = set(rhs.variables())
    for c in reversed(computed):
        if c.var in bound:
            if c.computed.inverse is None:
                return f"{c.var.token.rsplit('_', 1)[0]} is computed without a declared inverse"
            bound |= set(c.params)
    missing = sorted(n.lstrip("*") for n, v in names.items() if v in lhs.variables() and v not in bound)
    return f"the right side does not determine {', '.join(missing)}" if missing else True


def relation(
    tags: Iterable[str],
    tracks: Sequence[Op | type] | None = None,
    assumptions: Iterable[str] = (),
    backward: bool | str = True,
    examples: Iterable[str] = (),
    types: Mapping[str, str] | None = None,
    name: str | None = None,
    guard: Callable[[Any], bool] | None = None,
    semantics: str | None = None,
    screen: Callable[[Any], bool] | None = None,
    idempotent: bool = False,
    operand_screen: Callable[[Any], bool] | None = None,
) -> Callable[[Callable], Rule]:
    """Decorate a goal constructor `fn(lhs, rhs)` into a Rule (its docstring is the rule's doc).

    Tracks not given are derived with `derive_tracks`; `guard`, `screen` and
    `operand_screen` are cheap necessary conditions on a graph for the rule
    to match, the screen reading only heads and the operand screen no deeper
    than the operands' operands' heads; `idempotent` says its results never match it
    again (see Rule).  A goal written in Python answers once a side is
    bound; with both sides unbound it answers nothing (declare the rule with
    `rule` to have it answer with patterns).
    """

    def decorate(fn: Callable[[Any, Any], Any]) -> Rule:
        return Rule(
            name or fn.__name__,
            _goal_relation(fn),
            tags,
            tracks=tracks if tracks is not None else derive_tracks(fn),
            assumptions=assumptions,
            backward=backward,
            examples=examples,
            types=types,
            doc=fn.__doc__ or "",
            guard=guard,
            semantics=semantics,
            screen=screen,
            idempotent=idempotent,
            operand_screen=operand_screen,
        )

    return decorate


def _goal_relation(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`fn` as a relation: its goal, run once a side is bound; with both sides unbound, no answer (a goal
    written in Python computes one side from the other: it has no patterns to answer with)."""

    def relation_(lhs: Any, rhs: Any) -> Any:
        def goal(state: Any) -> Iterator[Any]:
            if isvar(walk(lhs, state)) and isvar(walk(rhs, state)):
                return
            goal_ = fn(lhs, rhs)
            yield from (goal_ if callable(goal_) else lall(goal_))(state)

        return goal

    relation_.__name__ = getattr(fn, "__name__", "relation")
    relation_.__doc__ = fn.__doc__
    return relation_


def derive_tracks(relation: Callable, limit: int = 32) -> list[Op] | None:
    """The head ops a relation's input can have, found by running it on fresh variables.

    Sound only when the stream of answers ends within `limit` and every
    answer fixes the input's head op; otherwise None (try the relation on
    every node).  Relations with no answer on fresh variables (goals that
    wait for ground input) get None too.
    """
    lhs, rhs = var(), var()
    heads: list[Op] = []
    try:
        states = list(islice(metered(relation(lhs, rhs)({})), limit + 1))
    except Exception:
        return None
    if not states or len(states) > limit:
        return None
    for state in states:
        try:
            head = car(reify(lhs, state))
        except ConsError:
            return None
        if not isinstance(head, Op):
            return None
        if head not in heads:
            heads.append(head)
    return heads


def _where(rule_name: str, fn: Callable[..., bool], names: Mapping[str, Var]) -> Where:
    """A `where` guard: its parameters name pattern variables (``rest`` may name ``*rest``)."""
    if not callable(fn):
        raise TypeError(f"rule {rule_name}: a where guard must be callable, got {fn!r}")
    return Where(_parameters(rule_name, fn, names, f"guard {getattr(fn, '__name__', fn)}"), fn)

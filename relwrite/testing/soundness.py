"""Soundness checks for rules: both sides of a relation must compute the same values.

`check_relation(rule)` generates left sides for a rule (from its pattern,
from running it on fresh logic variables, and from its examples), gives their
variables random types and values that respect the rule's assumptions, runs
the relation forward, evaluates both sides with the NumPy backend and
compares them; then runs it backward from each right side and compares
every left side found.  A mismatch raises `SoundnessError` (an
`AssertionError`) describing a counterexample that hypothesis has shrunk::

    from relwrite.testing import check_relation
    check_relation(my_rule)              # forward and backward
    check_relation(my_relation, assumptions=["x > 0"], direction="forward")

What counts as equal: the right side's type can replace the left side's (same
dtype and rank, static lengths kept: what the engine requires), same shape
(broadcasting included) and values equal within tolerances set by the dtype
(integers exactly), NaN equal to NaN.  Precision the left side itself
lacks is not held against the right side: positions where the left side is
ill-conditioned (its value is not reproduced when evaluated in the next lower
precision) are not compared, and examples whose left side passes through
subnormal numbers are skipped.

Where the left side is not finite, the right side must match it too, except
for rules whose semantics (docs/rule-safety.md) is `unsafe` (valid only under
their assumptions) or `stabilizes` (whose purpose is to replace overflowing or
NaN-producing computations), and rules tagged `explore` (identities over the
reals that only exploration uses, such as distribution): for those only the
positions where the left side is finite are compared, and inputs are never
NaN or infinite.  For other rules inputs are occasionally NaN
or infinite, so a rule that changes NaN/Inf behaviour (x * 0 -> 0) is caught.
"""

from __future__ import annotations

import ast
import math
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from etuples.core import ExpressionTuple
from hypothesis import HealthCheck, Phase, Verbosity, assume, given, settings
from hypothesis import seed as seeded
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from hypothesis.extra import numpy as hnp
from kanren.core import lall
from unification import reify, var
from unification.variable import Var, isvar

from relwrite.backends.compare import (
    Evaluated,
    NoUsableExample,
    SoundnessError,
    coarsest_float,
    difference,
    evaluate,
    magnitude,
    unreliable_positions,
)
from relwrite.graph.basic import (
    Op,
    Variable,
    graph_inputs,
    type_from_spec,
)
from relwrite.graph.parse import parse
from relwrite.graph.printing import expression_text
from relwrite.graph.terms import GraphETuple
from relwrite.graph.types import TensorType
from relwrite.relations.pattern import as_graph, to_graph
from relwrite.relations.registry import Assumption, Rule
from relwrite.relations.runtime import answers as runtime_answers
from relwrite.relations.runtime import checked_direction
from relwrite.testing.strategies import FLOAT_BOUND

MAX_ANSWERS = 4
"""How many answers of the relation are checked per left side (forward) and per right side (backward)."""

PROBE_STATES = 16
"""How many states of the relation run on fresh variables are read when looking for left-side templates."""

PROBE_TEMPLATES = 4
"""How many distinct left-side templates probing keeps."""

INT_BOUND = 100
"""Magnitude bound of generated integers (small enough that products rarely overflow)."""

TINY = 2.0**-20
"""Non-zero floats smaller than this in magnitude are not generated: products of them underflow to 0."""

MODERATE = 8.0
"""Half the floats drawn lie within this magnitude: wide draws alone overflow exp and hide most errors."""

FINITE_ONLY_SEMANTICS = frozenset({"unsafe", "stabilizes"})
"""Rules of these semantics are compared only where their left side is finite."""

REAL_ONLY_TAGS = frozenset({"explore"})
"""Rules with these tags (kept out of the rewriting pipelines: exploration's identities over the reals,
such as distribution) are compared as those of `FINITE_ONLY_SEMANTICS` are: on finite inputs, where their
left side is finite."""

FILLED_SIZE = 256
"""Arrays of more elements have a few drawn elements over one drawn background value (hypothesis's fill),
so that matrices of static shapes such as (64, 256) fit in what hypothesis draws for one example."""

_NUMBER = (bool, int, float, np.number, np.bool_)


@dataclass(frozen=True)
class SoundnessReport:
    """What `check_relation` checked: the directions, how many examples each, and notes (skips)."""

    rule: str
    directions: tuple[str, ...]
    examples: Mapping[str, int]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, repr=False)
class Binding:
    """A left side to check: the graph, its input variables, one value per input, and where it came from."""

    lhs: Variable
    inputs: tuple[Variable, ...]
    values: tuple[np.ndarray, ...]
    source: str

    @property
    def named_values(self) -> dict[str, np.ndarray]:
        """The values by input name (unnamed inputs as `input<i>`)."""
        return {_input_name(v, i): value for i, (v, value) in enumerate(zip(self.inputs, self.values))}

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={_show_value(value)}" for name, value in self.named_values.items())
        return f"Binding({expression_text(self.lhs)}; {values})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """The same text in hypothesis' report of a failing example."""
        printer.text(repr(self))


# -- what is checked: a rule, or a plain relation with arguments ------------------------------------------


@dataclass(frozen=True)
class _Subject:
    """A relation under test with the metadata the checks need."""

    name: str
    relation: Callable[[Any, Any], Any]
    rule: Rule | None
    tags: frozenset[str]
    assumptions: tuple[Assumption, ...]
    types: Mapping[str, TensorType]
    backward: bool
    backward_note: str | None
    examples: tuple[str, ...]

    @property
    def real_only(self) -> bool:
        """Whether the rule is an identity over the reals: compared where no value overflows."""
        return self.rule is not None and bool(self.rule.tags & REAL_ONLY_TAGS)

    @property
    def compares_non_finite(self) -> bool:
        if self.rule is None:
            return True
        return self.rule.semantics not in FINITE_ONLY_SEMANTICS and not self.rule.tags & REAL_ONLY_TAGS


def _subject(
    rule_or_relation: Rule | Callable,
    types: Mapping[str, str | TensorType] | None,
    assumptions: Iterable[str | Assumption],
) -> _Subject:
    if isinstance(assumptions, str):
        raise TypeError(
            f"assumptions must be a sequence of strings like 'x > 0', got the string {assumptions!r}"
        )
    extra = tuple(a if isinstance(a, Assumption) else Assumption.parse(a) for a in assumptions)
    if isinstance(rule_or_relation, Rule):
        rule = rule_or_relation
        return _Subject(
            name=rule.name,
            relation=rule.relation,
            rule=rule,
            tags=rule.tags,
            assumptions=rule.assumptions + extra,
            types=_resolve_types(rule.name, {**rule.types, **(types or {})}),
            backward=rule.backward,
            backward_note=rule.backward_note,
            examples=rule.examples,
        )
    if not callable(rule_or_relation):
        raise TypeError(
            f"check_relation needs a Rule or a relation function relation(lhs, rhs), got {rule_or_relation!r}"
        )
    name = getattr(rule_or_relation, "__name__", None) or repr(rule_or_relation)
    return _Subject(
        name=name,
        relation=rule_or_relation,
        rule=None,
        tags=frozenset(),
        assumptions=extra,
        types=_resolve_types(name, dict(types or {})),
        backward=True,
        backward_note=None,
        examples=(),
    )


def _resolve_types(name: str, types: Mapping[str, str | TensorType]) -> dict[str, TensorType]:
    resolved = {}
    for var_name, spec in types.items():
        try:
            resolved[var_name] = type_from_spec(spec)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}: variable {var_name!r} has a bad type spec {spec!r}: {exc}") from None
    return resolved


# -- left-side templates --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Template:
    """A left side with holes: `build(variables by name)` makes the graph."""

    description: str
    names: tuple[str, ...]
    build: Callable[[Mapping[str, Variable]], Variable]


def _term_template(term: Any, description: str) -> _Template | None:
    """A template from a kanren term whose logic variables are the holes, or None if it is not buildable."""
    if not isinstance(term, ExpressionTuple) or not term or not isinstance(term[0], Op):
        return None
    logic_vars: list[Var] = []
    stack = [term]
    while stack:
        item = stack.pop()
        if isinstance(item, GraphETuple):
            continue
        if isinstance(item, ExpressionTuple):
            if not item or not isinstance(item[0], Op):
                return None
            stack.extend(reversed(item[1:]))
        elif isvar(item):
            if item not in logic_vars:
                logic_vars.append(item)
        elif not isinstance(item, (*_NUMBER, Variable)):
            return None
    names: dict[Var, str] = {}
    for lv in logic_vars:
        base = str(lv.token).rsplit("_", 1)[0] if isinstance(lv.token, str) else ""
        base = base if base.isidentifier() else "v"
        name, k = base, 1
        while name in names.values():
            k += 1
            name = f"{base}{k}"
        names[lv] = name

    def build(variables: Mapping[str, Variable]) -> Variable:
        return as_graph(reify(term, {lv: variables[name] for lv, name in names.items()}))

    return _Template(description, tuple(names.values()), build)


def _example_template(text: str) -> _Template:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"example {text!r} is not an expression: {exc}") from None
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called]
    names = list(dict.fromkeys(n.id for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))))

    def build(variables: Mapping[str, Variable]) -> Variable:
        return parse(text, types=dict(variables))

    return _Template(f"example {text!r}", tuple(names), build)


def _probe_templates(relation: Callable[[Any, Any], Any]) -> list[_Template]:
    """Left sides the relation itself proposes when run on fresh logic variables (bounded)."""
    lhs, rhs = var(), var()
    try:
        states = list(islice(lall(relation(lhs, rhs))({}), PROBE_STATES))
    except Exception:
        return []
    templates: list[_Template] = []
    seen: set[str] = set()
    for state in states:
        term = reify(lhs, state)
        text = str(term)
        template = _term_template(term, f"left side {text} found by running the relation")
        if template is not None and text not in seen:
            seen.add(text)
            templates.append(template)
            if len(templates) == PROBE_TEMPLATES:
                break
    return templates


def _templates(subject: _Subject) -> list[_Template]:
    rule = subject.rule
    if rule is not None and rule.lhs is not None:
        term = rule.lhs.term({})  # its variables are the holes; a sequence variable stands for one operand
        pattern = _term_template(term, f"the rule's pattern {rule.lhs.text}")
        templates = [pattern] if pattern is not None else []
        return templates + [_example_template(t) for t in subject.examples if t != rule.lhs.text]
    return _probe_templates(subject.relation) + [_example_template(t) for t in subject.examples]


# -- values -----------------------------------------------------------------------------------------


def _float_bounds(assumptions: Sequence[Assumption], name: str) -> tuple[float, float, bool, bool]:
    """The interval (low, high, exclude_low, exclude_high) the assumptions on `name` leave."""
    low = high = None
    exclude_low = exclude_high = False
    for a in assumptions:
        if a.op in (">", ">=") and (low is None or a.value > low or (a.value == low and a.op == ">")):
            low, exclude_low = a.value, a.op == ">"
        elif a.op in ("<", "<=") and (high is None or a.value < high or (a.value == high and a.op == "<")):
            high, exclude_high = a.value, a.op == "<"
    if low is None and high is None:
        low, high = -FLOAT_BOUND, FLOAT_BOUND
    elif low is None:
        low = min(high, 0.0) - FLOAT_BOUND
    elif high is None:
        high = max(low, 0.0) + FLOAT_BOUND
    if low > high or (low == high and (exclude_low or exclude_high)):
        raise ValueError(f"the assumptions on {name} ({', '.join(map(str, assumptions))}) leave no value")
    return low, high, exclude_low, exclude_high


def _representable(bound: float, dtype: np.dtype, upward: bool) -> float:
    """`bound` rounded inward to a value of `dtype` (hypothesis needs exactly representable bounds)."""
    if dtype.itemsize >= 8:
        return bound
    rounded = dtype.type(bound)
    if upward and rounded < bound:
        rounded = np.nextafter(rounded, dtype.type(np.inf))
    elif not upward and rounded > bound:
        rounded = np.nextafter(rounded, dtype.type(-np.inf))
    return float(rounded)


@cache
def _elements(
    dtype: np.dtype, assumptions: tuple[Assumption, ...], name: str, non_finite: bool
) -> st.SearchStrategy:
    """Array elements of `dtype` satisfying `assumptions`; floats occasionally NaN/Inf when `non_finite`."""

    def holds(value: Any) -> bool:
        return all(bool(a.holds(value)) for a in assumptions)

    if dtype.kind == "b":
        return st.booleans().filter(holds)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high, exclude_low, exclude_high = _float_bounds(assumptions, name)
        low_int = max(info.min, -INT_BOUND, math.floor(low) + 1 if exclude_low else math.ceil(low))
        high_int = min(info.max, INT_BOUND, math.ceil(high) - 1 if exclude_high else math.floor(high))
        if low_int > high_int:
            raise ValueError(f"the assumptions on {name} leave no value of dtype {dtype.name}")
        return st.integers(low_int, high_int).filter(holds)
    low, high, exclude_low, exclude_high = _float_bounds(assumptions, name)
    finite = _float_range(dtype, low, high, exclude_low, exclude_high)
    moderate_low, moderate_high = max(low, -MODERATE), min(high, MODERATE)
    if moderate_low < moderate_high:  # half the draws moderate: where most rules' values live
        finite = st.one_of(
            _float_range(
                dtype,
                moderate_low,
                moderate_high,
                exclude_low and low == moderate_low,
                exclude_high and high == moderate_high,
            ),
            finite,
        )
    finite = finite.filter(holds)
    specials = [s for s in (math.nan, math.inf, -math.inf) if holds(s)] if non_finite else []
    if not specials:
        return finite
    special = st.sampled_from(specials)
    return st.integers(0, 7).flatmap(lambda k: special if k == 7 else finite)


def _float_range(
    dtype: np.dtype, low: float, high: float, exclude_low: bool, exclude_high: bool
) -> st.SearchStrategy:
    """Finite normal floats of `dtype` in [low, high] (ends excluded as told), none below TINY."""
    low_r, high_r = _representable(low, dtype, upward=True), _representable(high, dtype, upward=False)
    floats = st.floats(
        low_r,
        high_r,
        exclude_min=exclude_low and low_r == low,
        exclude_max=exclude_high and high_r == high,
        allow_nan=False,
        allow_subnormal=False,
        width=min(dtype.itemsize * 8, 64),
    )
    if max(abs(low), abs(high)) >= TINY:
        floats = floats.filter(lambda v: v == 0 or abs(v) >= TINY)
    return floats


# Strategies are made once and drawn from many times: hypothesis validates each strategy object it
# meets, so one made inside a draw costs that validation at every draw.
_DTYPES = st.sampled_from(("float64", "float64", "float64", "float32"))
_QUARTER = st.integers(0, 3)  # 3 one time in four
_BASES = st.integers(2, 3)
_LENGTHS = {base: st.one_of(st.just(base), st.integers(1, 3)) for base in (2, 3)}


@cache
def _integers(low: int, high: int) -> st.SearchStrategy:
    return st.integers(low, high)


@cache
def _arrays(
    dtype: np.dtype, shape: tuple[int, ...], elements: st.SearchStrategy, filled: bool
) -> st.SearchStrategy:
    """Arrays of `dtype` and `shape` drawn from `elements` (a large one: a few drawn elements, `filled`)."""
    return hnp.arrays(dtype, shape, elements=elements, fill=elements if filled else None)


def _draw_type(draw: st.DrawFn, full: Sequence[int], max_ndim: int) -> TensorType:
    """A random float type: float64 (sometimes float32), rank 0..max_ndim, lengths unknown, full or 1."""
    dtype = draw(_DTYPES)
    ndim = draw(_integers(0, max_ndim))
    shape: list[int | None] = []
    for axis in range(ndim):
        if draw(st.booleans()):
            shape.append(1 if draw(_QUARTER) == 3 else full[ndim - 1 - axis])
        else:
            shape.append(None)
    return TensorType(dtype, shape)


def _full_lengths(draw: st.DrawFn, fixed: Iterable[TensorType], rank: int) -> list[int]:
    """The length each axis position (counted from the right) has when it is not 1."""
    base = draw(_BASES)
    full = []
    for position in range(rank):
        known = [t.shape[-1 - position] for t in fixed if t.ndim > position]
        known = [d for d in known if d is not None and d != 1]
        full.append(known[0] if known else draw(_LENGTHS[base]))
    return full


def _unknown_length(draw: st.DrawFn, full: Sequence[int], position: int) -> int:
    """A value's length where its type does not say: usually the full length, sometimes 1 (to broadcast)."""
    if position >= len(full) or draw(_QUARTER) == 3:
        return 1
    return full[position]


def _input_name(v: Variable, position: int) -> str:
    return v.name if v.name else f"input{position}"


@cache
def _one_of_templates(templates: tuple[_Template, ...]) -> st.SearchStrategy:
    return st.sampled_from(templates)


@st.composite
def _bindings(
    draw: st.DrawFn,
    subject: _Subject,
    templates: Sequence[_Template],
    non_finite: bool,
    max_ndim: int,
    rejections: _Rejections | None,
) -> Binding:
    template = draw(_one_of_templates(tuple(templates)))
    fixed = [subject.types[n] for n in template.names if n in subject.types]
    rank = max([max_ndim, *(t.ndim for t in fixed)])
    full = _full_lengths(draw, fixed, rank)
    variables = {
        name: (subject.types[name] if name in subject.types else _draw_type(draw, full, max_ndim))(name)
        for name in template.names
    }
    try:
        lhs = template.build(variables)
    except (TypeError, ValueError) as exc:
        _reject(rejections, f"{template.description} did not build", exc)
    if not isinstance(lhs, Variable):
        _reject(rejections, f"{template.description} is not a graph")
    used = graph_inputs([lhs])
    inputs = [v for v in variables.values() if v in used]
    inputs += [v for v in used if v not in inputs]
    broadcast = draw(_integers(-1, len(inputs) - 1))  # an input drawn as 1s where its lengths are unknown
    values = []
    for position, v in enumerate(inputs):
        shape = tuple(
            d
            if d is not None
            else 1
            if position == broadcast
            else _unknown_length(draw, full, v.ndim - 1 - axis)
            for axis, d in enumerate(v.type.shape)
        )
        name = _input_name(v, position)
        assumed = tuple(a for a in subject.assumptions if a.name == name)
        elements = _elements(v.type.numpy_dtype, assumed, name, non_finite)
        values.append(draw(_arrays(v.type.numpy_dtype, shape, elements, math.prod(shape) > FILLED_SIZE)))
    return Binding(lhs, tuple(inputs), tuple(values), template.description)


class _Rejections:
    """Why drawn examples were rejected, counted, with the last error seen for each reason."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.errors: dict[str, str] = {}

    def add(self, reason: str, error: BaseException | None) -> None:
        self.counts[reason] += 1
        if error is not None:
            self.errors[reason] = _exception(error)

    def __str__(self) -> str:
        return "; ".join(
            f"{reason} ({count} times{', last: ' + self.errors[reason] if reason in self.errors else ''})"
            for reason, count in self.counts.most_common()
        )


def _reject(rejections: _Rejections | None, reason: str, error: BaseException | None = None) -> None:
    """Mark the example invalid (hypothesis draws another), noting why."""
    if rejections is not None:
        rejections.add(reason, error)
    assume(False)


def relation_bindings(
    rule_or_relation: Rule | Callable,
    types: Mapping[str, str | TensorType] | None = None,
    assumptions: Iterable[str | Assumption] = (),
    non_finite: bool | None = None,
    max_ndim: int = 2,
) -> st.SearchStrategy[Binding]:
    """Left sides of a relation with inputs and values: a hypothesis strategy of `Binding`s.

    Templates come from the rule's pattern (for `rule()` rules), else from
    running the relation on fresh logic variables, plus the rule's examples.
    Each variable (named by its logic variable's prefix or its example name)
    gets the type `types` or the rule's `types` give it, else a random float
    type of rank 0..`max_ndim` whose lengths broadcast (length-1 axes
    included); values satisfy the assumptions on the variable's name.
    Ill-typed combinations are rejected.  Floats are occasionally NaN or
    infinite when `non_finite` (default: unless the rule's semantics is unsafe or
    stabilizes).
    """
    subject = _subject(rule_or_relation, types, assumptions)
    templates = _checked_templates(subject)
    if max_ndim < 0:
        raise ValueError(f"max_ndim must be >= 0, got {max_ndim}")
    return _bindings(
        subject, templates, subject.compares_non_finite if non_finite is None else non_finite, max_ndim, None
    )


def _checked_templates(subject: _Subject) -> list[_Template]:
    templates = _templates(subject)
    if not templates:
        raise ValueError(
            f"{subject.name}: no left side to generate: running it on fresh logic variables gave no "
            "term headed by an op, and it has no examples (give the rule examples=[...])"
        )
    names = {n for t in templates for n in t.names}
    for a in subject.assumptions:
        if a.name not in names:
            raise ValueError(
                f"{subject.name}: assumption '{a}' names no variable of its left side "
                f"(variables: {', '.join(sorted(names)) or 'none'})"
            )
        try:
            _float_bounds([b for b in subject.assumptions if b.name == a.name], a.name)
        except ValueError as exc:
            raise ValueError(f"{subject.name}: {exc}") from None
    return templates


# -- evaluation and comparison ---------------------------------------------------------------------------


def _type_problem(old: Variable, new: Variable) -> str | None:
    """Why `new` cannot replace `old` in a graph (the engine's rule), or None."""
    if old.type.is_super(new.type):
        return None
    if old.dtype != new.dtype:
        what = f"dtype {new.dtype} instead of {old.dtype}"
    elif old.ndim != new.ndim:
        what = f"rank {new.ndim} instead of {old.ndim}"
    else:
        what = f"static shape {new.type.shape} does not keep {old.type.shape}"
    return f"types differ: {what} (the engine refuses such a replacement)"


# -- running the relation ----------------------------------------------------------------------------------


def _has_logic_variables(term: Any) -> bool:
    stack = [term]
    while stack:
        item = stack.pop()
        if isvar(item):
            return True
        if isinstance(item, (ExpressionTuple, tuple, list)) and not isinstance(item, GraphETuple):
            stack.extend(item)
    return False


def _answers(subject: _Subject, given: Any, direction: str) -> list[Any]:
    """The relation's answers for `given` run `direction` (the rule runtime), unbound ones dropped."""
    found = islice(runtime_answers(subject.rule or subject.relation, given, direction), MAX_ANSWERS)
    return [a.value for a in found if not isvar(a.value)]


def _answer_graph(answer: Any, like: Variable) -> Variable:
    if _has_logic_variables(answer):
        raise ValueError(f"the answer {answer} still contains logic variables")
    return to_graph(answer, like=like)


# -- the check ---------------------------------------------------------------------------------------------


@dataclass
class _Checker:
    subject: _Subject
    forward: bool
    backward: bool
    rtol: float | None
    atol: float | None
    examples: Counter = field(default_factory=Counter)
    rejections: _Rejections = field(default_factory=_Rejections)

    def check(self, binding: Binding) -> None:
        lhs = binding.lhs
        try:
            left = evaluate(lhs, binding.inputs, binding.values)
        except Exception as exc:
            _reject(self.rejections, "the left side did not evaluate on the drawn values", exc)
        if left.underflow:  # gradual underflow loses precision no tolerance can account for
            _reject(self.rejections, "the left side passed through subnormal numbers")
        if (
            not self.subject.compares_non_finite
            and left.value.dtype.kind == "f"
            and not np.isfinite(left.value).any()
        ):
            _reject(self.rejections, "the left side is nowhere finite: nothing to compare")
        try:
            answers = _answers(self.subject, lhs, "forward")
        except Exception as exc:
            self.fail("forward", binding, f"running the relation forward raised {_exception(exc)}", lhs)
        if not answers:
            _reject(self.rejections, "the relation did not rewrite the left side")
        right_sides = []
        for answer in answers:
            try:
                rhs = _answer_graph(answer, like=lhs)
                problem = _type_problem(lhs, rhs)
                right = evaluate(rhs, binding.inputs, binding.values)
            except Exception as exc:
                if self.forward:
                    self.fail(
                        "forward",
                        binding,
                        f"an answer could not be built or evaluated: {_exception(exc)}",
                        lhs,
                    )
                continue
            if self.forward:
                self.compare("forward", binding, lhs, left, rhs, right, problem)
            right_sides.append((rhs, right))
        if self.forward:
            self.examples["forward"] += 1
        if self.backward:
            if not right_sides:
                _reject(self.rejections, "no right side could be evaluated")
            for rhs, right in right_sides:
                self.check_backward(binding, rhs, right)
            self.examples["backward"] += 1

    def check_backward(self, binding: Binding, rhs: Variable, right: Evaluated) -> None:
        try:
            forms = _answers(self.subject, rhs, "backward")
        except Exception as exc:
            self.fail(
                "backward", binding, f"running the relation backward raised {_exception(exc)}", None, rhs
            )
        if not forms:
            self.fail(
                "backward",
                binding,
                "running the relation backward on the right side gave no left side",
                None,
                rhs,
            )
        for form in forms:
            try:
                found = _answer_graph(form, like=rhs)
                problem = _type_problem(rhs, found)
                left = evaluate(found, binding.inputs, binding.values)
            except Exception as exc:
                self.fail(
                    "backward",
                    binding,
                    f"a left side found could not be built or evaluated: {_exception(exc)}",
                    None,
                    rhs,
                )
            self.compare("backward", binding, found, left, rhs, right, problem)

    def compare(
        self,
        direction: str,
        binding: Binding,
        lhs: Variable,
        left: Evaluated,
        rhs: Variable,
        right: Evaluated,
        problem: str | None,
    ) -> None:
        if self.subject.real_only and left.overflow != right.overflow:
            _reject(self.rejections, "a value overflowed on one side only: not a comparison over the reals")
        if problem is None:
            scale = max(1.0, left.magnitude, right.magnitude, *(magnitude(v) for v in binding.values))
            problem = difference(
                left.value,
                right.value,
                not self.subject.compares_non_finite,
                self.rtol,
                self.atol,
                scale,
                lambda: unreliable_positions(lhs, binding.inputs, binding.values, left.value, scale),
                coarsest_float(binding.values),
            )
        if problem is not None:
            self.fail(direction, binding, problem, lhs, rhs, left.value, right.value)

    def fail(
        self,
        direction: str,
        binding: Binding,
        problem: str,
        lhs: Variable | None,
        rhs: Variable | None = None,
        left_value: np.ndarray | None = None,
        right_value: np.ndarray | None = None,
    ) -> None:
        inputs = binding.named_values
        lines = [f"{self.subject.name} is unsound {direction}: {problem}", "  inputs:"]
        lines += [f"    {name} = {_show_value(value)}" for name, value in inputs.items()]
        lines.append(f"  left side:    {expression_text(binding.lhs)}")
        if rhs is not None:
            lines.append(f"  right side:   {expression_text(rhs)}")
        if direction == "backward" and lhs is not None:
            lines.append(f"  left side found backward: {expression_text(lhs)}")
        if left_value is not None:
            label = "left value:  " if direction == "forward" else "value of the left side found:"
            lines.append(f"  {label} {_show_value(left_value)}")
            lines.append(f"  right value:  {_show_value(right_value)}")
        lines.append(f"  (left side from {binding.source})")
        raise SoundnessError(
            "\n".join(lines), self.subject.name, direction, inputs, lhs, rhs, left_value, right_value
        )


def _exception(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _show_value(value: Any) -> str:
    array = np.asarray(value)
    return f"{array.tolist()!r} ({array.dtype.name}, shape {array.shape})"


def hypothesis_directory() -> Path:
    """Where relwrite's own runs of hypothesis keep its files: ``hypothesis`` in relwrite's cache
    (`relwrite.backends.c.compiler.cache_path()`), or in the temporary directory without a home."""
    from relwrite.backends.c.compiler import cache_path

    try:
        return cache_path() / "hypothesis"
    except RuntimeError:  # no home directory
        return Path(tempfile.gettempdir()) / "relwrite" / "hypothesis"


@contextmanager
def hypothesis_files_in_cache() -> Iterator[None]:
    """Point hypothesis's storage (its cache of constants, an example database) at `hypothesis_directory()`.

    Hypothesis writes ``./.hypothesis`` by default; a command or a library
    call (`relwrite check`, `explore` checking its forms) must not litter the
    directory it runs in.  ``$HYPOTHESIS_STORAGE_DIRECTORY``, when set, is
    respected.  Afterwards hypothesis's storage is where it was.
    """
    from hypothesis.configuration import set_hypothesis_home_dir, storage_directory

    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    previous = storage_directory(intent_to_write=False).home_directory
    set_hypothesis_home_dir(hypothesis_directory())
    try:
        yield
    finally:
        set_hypothesis_home_dir(previous)


def check_relation(
    rule_or_relation: Rule | Callable,
    direction: str = "both",
    *,
    max_examples: int | None = None,
    types: Mapping[str, str | TensorType] | None = None,
    assumptions: Iterable[str | Assumption] = (),
    rtol: float | None = None,
    atol: float | None = None,
    seed: int | None = None,
    example_database: bool = True,
) -> SoundnessReport:
    """Property-test that a rule's two sides compute the same values; raise `SoundnessError` if not.

    `rule_or_relation` is a `Rule` or a plain relation `fn(lhs, rhs)` built
    from kanren goals.  `direction` is "forward" (the right sides the relation
    gives for generated left sides), "backward" (the left sides it gives when
    run on those right sides) or "both"; backward is skipped, with a note in
    the report, for rules that declare it not meaningful.  `types` and
    `assumptions` add to the rule's own (for a plain relation they are the
    only ones).  `max_examples` defaults to the current hypothesis profile's.
    Tolerances default to sqrt(eps) of the dtype, the absolute one scaled by
    the largest magnitude computed; integers compare exactly; positions where
    the left side is ill-conditioned are not compared.  With a `seed` the run
    is a function of it (and `max_examples`): hypothesis starts from it and
    uses no example database, which would replay earlier failures, so a
    counterexample can be reproduced.  `example_database=False` uses none
    either, and prints nothing (nothing saved, replayed or printed: what a
    check at run time wants; an interrupted check printed hypothesis's seed).

    Raises ValueError when no left side can be generated or arguments are bad.
    """
    checked_direction(direction)
    if max_examples is not None and (not isinstance(max_examples, int) or max_examples < 1):
        raise ValueError(f"max_examples must be a positive int or None, got {max_examples!r}")
    for label, tolerance in (("rtol", rtol), ("atol", atol)):
        if tolerance is not None and not tolerance >= 0:
            raise ValueError(f"{label} must be a non-negative number or None, got {tolerance!r}")
    subject = _subject(rule_or_relation, types, assumptions)
    notes = []
    backward = direction in ("both", "backward")
    if backward and not subject.backward:
        note = f"{subject.name}: backward not checked: {subject.backward_note}"
        if direction == "backward":
            raise ValueError(f"{note} (the rule declares it not meaningful)")
        notes.append(note)
        backward = False
    checker = _Checker(subject, direction in ("both", "forward"), backward, rtol, atol)
    templates = _checked_templates(subject)
    strategy = _bindings(subject, templates, subject.compares_non_finite, 2, checker.rejections)

    @settings(
        max_examples=max_examples or settings.default.max_examples,
        deadline=None,
        report_multiple_bugs=False,
        phases=[phase for phase in Phase if phase != Phase.explain],  # whatever profile a caller loaded
        suppress_health_check=list(HealthCheck),
        **({} if seed is None and example_database else {"database": None}),
        **({} if example_database else {"verbosity": Verbosity.quiet}),  # a run-time check prints nothing
    )
    @given(strategy)
    def run(binding: Binding) -> None:
        checker.check(binding)

    if seed is not None:
        run = seeded(seed)(run)

    try:
        run()
    except Unsatisfiable:
        reasons = str(checker.rejections)
        raise NoUsableExample(
            f"{subject.name}: no usable example could be generated ({reasons or 'every draw was rejected'}); "
            "check its examples, types and assumptions"
        ) from None
    checked = tuple(
        d
        for d in ("forward", "backward")
        if (d == "forward" and checker.forward) or (d == "backward" and backward)
    )
    return SoundnessReport(subject.name, checked, dict(checker.examples), tuple(notes))

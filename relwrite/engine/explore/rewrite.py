"""How exploration runs a rule: the one adapter between the e-graph and the rule runtime.

Everything the explorer asks of a rule goes through `rule_answers`: the
right sides a rule gives for a term (forward) or the left sides it gives for
a term (backward), each with the values of the variables its assumptions
name, so that an explanation can say ``y != 0`` about the `y` that was
actually cancelled.  Runs are bounded (`Budget`): at most `answers` answers
are read, and a run is under the rule runtime's budget of `steps` and
`seconds` (`relation_budget`: on the main thread a rule computing longer
than `seconds`, even in plain Python, is interrupted), past which it raises
`RuleTimeout` naming the rule.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from itertools import islice, permutations
from typing import Any

from etuples.core import ExpressionTuple
from unification.variable import Var

from relwrite.graph import ops
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.parse import parse
from relwrite.graph.terms import GraphETuple, same_expression
from relwrite.relations.budget import DEFAULT_MAX_STEPS, BudgetExceeded, relation_budget
from relwrite.relations.pattern import as_graph, is_variadic, to_graph
from relwrite.relations.registry import Rule
from relwrite.relations.runtime import answers as runtime_answers

DIRECTIONS = ("forward", "backward")
COMMUTATIVE = (ops.add, ops.mul)


@dataclass(frozen=True)
class Budget:
    """How much one rule run may take: `answers` answers read, `seconds` of computing and `steps` of work
    (`relation_budget`; None: no such limit)."""

    answers: int = 8
    seconds: float | None = 0.25
    steps: int | None = DEFAULT_MAX_STEPS


@dataclass(frozen=True)
class Answer:
    """One answer of a rule: the other side as a graph, and the values of its assumption variables."""

    term: Variable
    bindings: Mapping[str, Variable] = field(default_factory=dict)


class RuleTimeout(BudgetExceeded):
    """A rule run used up its budget of seconds or steps."""


def rule_answers(rule: Rule, term: Variable, direction: str, budget: Budget = Budget()) -> list[Answer]:
    """The answers of `rule` for the graph `term`, run `direction` ("forward" or "backward").

    Forward, `term` is the rule's left side and the answers are right sides;
    backward, `term` is the right side and the answers are left sides.
    Answers that still hold logic variables or do not build as graphs are
    dropped.  Raises `RuleTimeout` when the run outlasts `budget.seconds` or
    `budget.steps`, and whatever the rule itself raises.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
    names = tuple(dict.fromkeys(a.name for a in rule.assumptions))

    def what() -> str:
        return f"rule {rule.name} run {direction} on {term}"

    with relation_budget(what, budget.steps, budget.seconds, RuleTimeout) as meter:
        if direction == "forward":
            found = list(islice(_forward(rule, term, bool(names)), budget.answers))
        else:
            found = list(islice(_backward(rule, term, bool(names)), budget.answers))
    if meter.error is not None:  # raised inside the run and swallowed there
        raise meter.fresh_error()
    answers = []
    for other, found_bindings in found:
        lhs = term if direction == "forward" else other
        bindings = {n: v for n, v in found_bindings.items() if n in names}
        missing = [n for n in names if n not in bindings]
        if missing:
            bindings = {**bindings, **_bound_by_examples(rule, lhs, missing)}
        answers.append(Answer(other, bindings))
    return answers


def backward_heads(rule: Rule) -> tuple[Op, ...] | None:
    """The ops a right side of `rule` can be headed by, when the declaration says; None when it does not.

    An empty tuple means the rule is never run backward: either it declares
    that direction meaningless, or its right side is a bare variable, so
    that every backward answer would only wrap a term in ops of its own
    (``x -> -(-x)``) and grow every class without end.
    """
    if not rule.backward:
        return ()
    if rule.rhs is None:
        return None
    spec = rule.rhs.spec
    if isinstance(spec, tuple) and spec and isinstance(spec[0], Op):
        if is_variadic(spec[0]) and any(isinstance(s, str) and s.startswith("*") for s in spec[1:]):
            return None  # (add, x, *rest) of an empty rest is x itself: any head
        return (spec[0],)
    return ()


def reach(rule: Rule, direction: str) -> int | None:
    """How many levels below its root the side of `rule` that is matched in `direction` reads.

    Known for pattern rules (the depth of the pattern); None for relations
    built from goals, which may read any depth.
    """
    pattern = rule.lhs if direction == "forward" else rule.rhs
    if pattern is None:
        return None if direction == "forward" else 1
    stack, deepest = [(pattern.spec, 0)], 0
    while stack:
        spec, level = stack.pop()
        if isinstance(spec, Mapping):
            stack.append((spec.get("pattern"), level))
        elif isinstance(spec, tuple):
            deepest = max(deepest, level)
            stack.extend((s, level + 1) for s in spec[1:])
    return deepest


def _forward(rule: Rule, term: Variable, named: bool) -> Iterator[tuple[Variable, dict[str, Variable]]]:
    return _graphs(runtime_answers(rule, term, "forward"), term, named)


def _backward(rule: Rule, term: Variable, named: bool) -> Iterator[tuple[Variable, dict[str, Variable]]]:
    return _graphs(runtime_answers(rule, term, "backward"), term, named)


def _graphs(found: Iterator[Any], like: Variable, named: bool) -> Iterator[tuple[Variable, dict[str, Any]]]:
    """The rule runtime's answers as graphs, with the graph values of their named variables."""
    for answer in found:
        graph = _graph(answer.value, like)
        if graph is not None:
            yield graph, _named(answer.bindings) if named else {}


def _graph(value: Any, like: Variable | None) -> Variable | None:
    """`value` as a graph variable, or None when it holds logic variables or does not build.

    Plain numbers take `like`'s dtype; without `like` only graphs and terms qualify.
    """
    if _has_logic_variables(value):
        return None
    try:
        graph = to_graph(value, like=like) if like is not None else as_graph(value)
    except (TypeError, ValueError):
        return None
    return graph if isinstance(graph, Variable) else None


def _has_logic_variables(term: Any) -> bool:
    stack = [term]
    while stack:
        item = stack.pop()
        if isinstance(item, (Variable, GraphETuple)):
            continue
        if isinstance(item, Var):
            return True
        if isinstance(item, (tuple, list, ExpressionTuple)):
            stack.extend(item)
    return False


def _named(bindings: Mapping[str, Any]) -> dict[str, Variable]:
    """The graph values among a state's bindings by name."""
    bound = {}
    for name, value in bindings.items():
        graph = _graph(value, None)
        if graph is not None:
            bound[name] = graph
    return bound


def _bound_by_examples(rule: Rule, lhs: Variable, names: list[str]) -> dict[str, Variable]:
    """Values for assumption variables a run left unnamed, read by matching the rule's examples on `lhs`.

    A rule's examples name the variables its assumptions speak of; the first
    example whose shape matches `lhs` (commutative operands in any order)
    says which subterm each name is.
    """
    for example in _examples(rule):
        found = _match(example, lhs)
        if found is not None and all(n in found for n in names):
            return {n: found[n] for n in names}
    return {}


@cache
def _examples(rule: Rule) -> tuple[Variable, ...]:
    parsed = []
    for text in rule.examples:
        try:
            parsed.append(parse(text, types=rule.types))
        except (SyntaxError, TypeError, ValueError):
            continue
    return tuple(parsed)


def _match(pattern: Variable, target: Variable, limit: int = 4) -> dict[str, Variable] | None:
    """Bind the named inputs of the graph `pattern` to subgraphs of `target` (add/mul operands in any order).

    Commutative operand lists longer than `limit` are matched in order only.
    A depth-first search over pending pairs, kept on an explicit stack.
    """
    states: list[tuple[list[tuple[Variable, Variable]], dict[str, Variable]]] = [([(pattern, target)], {})]
    while states:
        pending, bound = states.pop()
        failed = False
        while pending and not failed:
            p, t = pending.pop()
            if p.owner is None:
                if isinstance(p, Constant):
                    failed = not (isinstance(t, Constant) and p == t)
                elif p.name in bound:
                    failed = not same_expression(bound[p.name], t)
                else:
                    bound = {**bound, p.name: t}
                continue
            node, other = p.owner, t.owner
            if other is None or node.op != other.op or len(node.inputs) != len(other.inputs):
                failed = True
                continue
            if node.op in COMMUTATIVE and 1 < len(node.inputs) <= limit:
                for order in list(permutations(other.inputs))[1:]:
                    states.append(([*pending, *zip(node.inputs, order)], bound))
            pending.extend(zip(node.inputs, other.inputs))
        if not failed:
            return bound
    return None

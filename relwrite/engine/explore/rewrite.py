"""How exploration runs a rule that is not a pattern (a kanren goal): the adapter to the rule runtime.

Pattern rules are e-matched (`machine`); a goal rule is run forward on an
e-node seen as a graph through `rule_answers`, which gives its right sides,
each with the values of the variables its assumptions name, so that an
explanation can say ``y != 0`` about the `y` that was actually cancelled.
Runs are bounded (`Budget`): at most `answers` answers are read, and a run
is under the rule runtime's budget of `steps` and `seconds`
(`relation_budget`: on the main thread a rule computing longer than
`seconds`, even in plain Python, is interrupted), past which it raises
`RuleTimeout` naming the rule.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from etuples.core import ExpressionTuple
from unification.variable import Var

from relwrite.graph.basic import Variable
from relwrite.graph.terms import GraphETuple
from relwrite.relations.budget import DEFAULT_MAX_STEPS, BudgetExceeded, relation_budget
from relwrite.relations.pattern import as_graph, to_graph
from relwrite.relations.registry import Rule
from relwrite.relations.runtime import answers as runtime_answers


@dataclass(frozen=True)
class Budget:
    """How much one rule run may take: `answers` answers read, `seconds` of computing and `steps` of work
    (`relation_budget`; None: no such limit)."""

    answers: int = 8
    seconds: float | None = 0.25
    steps: int | None = DEFAULT_MAX_STEPS


@dataclass(frozen=True)
class GraphAnswer:
    """One answer of a rule: the other side as a graph, and the values of its assumption variables."""

    term: Variable
    bindings: Mapping[str, Variable] = field(default_factory=dict)


class RuleTimeout(BudgetExceeded):
    """A rule run used up its budget of seconds or steps."""


def rule_answers(rule: Rule, term: Variable, budget: Budget = Budget()) -> list[GraphAnswer]:
    """The answers of `rule` run forward on the graph `term`: right sides, with the graph values of the
    variables its assumptions name (those its run binds).

    Answers that still hold logic variables or do not build as graphs are
    dropped.  Raises `RuleTimeout` when the run outlasts `budget.seconds` or
    `budget.steps`, and whatever the rule itself raises.
    """
    names = tuple(dict.fromkeys(a.name for a in rule.assumptions))

    def what() -> str:
        return f"rule {rule.name} run forward on {term}"

    with relation_budget(what, budget.steps, budget.seconds, RuleTimeout) as meter:
        found = list(
            islice(_graphs(runtime_answers(rule, term, "forward"), term, bool(names)), budget.answers)
        )
    if meter.error is not None:  # raised inside the run and swallowed there
        raise meter.fresh_error()
    return [GraphAnswer(other, {n: v for n, v in bound.items() if n in names}) for other, bound in found]


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

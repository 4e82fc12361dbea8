"""Exploration: equivalent forms of an expression, found by running relations both ways in an e-graph.

One module per concept, named after egg's: `egraph` (the equivalence store),
`terms` (e-nodes materialized as graphs for relations), `rewrite` (the one
adapter that runs a rule), `runner` (limits and the scheduler), `deadline` (one time limit through
every phase of a call), `extract`
(cheapest and distinct forms), `costs`, `regimes` (piecewise forms joined by `switch`), `explain`,
`dot`; `api` holds what
users call: `explore`, `best_form`, `prove` and `Form`.
"""

from relwrite.engine.explore.api import (
    Exploration,
    Form,
    ParetoPoint,
    UncheckedFormError,
    UnsoundFormError,
    best_form,
    check_form,
    explore,
    pareto,
    prove,
    resolve_cost,
    select_rules,
    share_inputs,
)
from relwrite.engine.explore.costs import Accuracy, AccuracyError, Depth, Flops, NodeCount
from relwrite.engine.explore.deadline import Deadline, TimeLimitReached
from relwrite.engine.explore.dot import egraph_dot
from relwrite.engine.explore.egraph import EGraph
from relwrite.engine.explore.explain import Explanation, Step
from relwrite.engine.explore.extract import CostFunction
from relwrite.engine.explore.runner import BackoffScheduler, Limits, Report, Runner, StopReason

__all__ = [
    "Accuracy",
    "AccuracyError",
    "BackoffScheduler",
    "CostFunction",
    "Deadline",
    "Depth",
    "EGraph",
    "Explanation",
    "Exploration",
    "Flops",
    "Form",
    "Limits",
    "NodeCount",
    "ParetoPoint",
    "Report",
    "Runner",
    "Step",
    "StopReason",
    "TimeLimitReached",
    "UncheckedFormError",
    "UnsoundFormError",
    "best_form",
    "check_form",
    "egraph_dot",
    "explore",
    "pareto",
    "prove",
    "resolve_cost",
    "select_rules",
    "share_inputs",
]

"""Assertions: run-time checks (`Assert`) that rewriting may drop when they cannot fail, or when asked.

`useless_assert` drops the conditions known to hold (constants true
everywhere) and the check with none left; `remove_all_assert` is the seed's
unsafe rewrite dropping every check (opt-in: `--include unsafe`).
"""

from __future__ import annotations

from typing import Any

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable
from relwrite.relations.goals import Goal, node_mappingo
from relwrite.relations.registry import relation

CANON = ("canonicalize", "fast_run", "fast_compile")
CHECKED = {"x": "vector", "c": "vector"}  # a condition holds where it is nonzero


def _holds(condition: Any) -> bool:
    return isinstance(condition, Constant) and condition.data.size > 0 and bool(condition.data.all())


def without_true_conditions(parts: tuple) -> Variable | None:
    """(op, operands) -> the assert without the conditions that are constants true everywhere (or its
    checked value when none is left); None when every condition may fail."""
    op, operands = parts
    if not isinstance(op, o.Assert) or not isinstance(operands, tuple):
        return None
    value, conditions = operands[0], operands[1:]
    kept = [c for c in conditions if not _holds(c)]
    if len(kept) == len(conditions):
        return None
    return op(value, *kept) if kept else value


@relation(
    CANON,
    tracks=(o.Assert,),
    backward="a condition known to hold does not say which it was",
    examples=("assert_op(x, True)",),
    types={"x": "vector"},
)
def useless_assert(lhs: Any, rhs: Any) -> Goal:
    """Assert(x, True, c) -> Assert(x, c), Assert(x, True) -> x: conditions that cannot fail go. Exact."""
    return node_mappingo(lhs, rhs, o.Assert, without_true_conditions)


def checked_value(parts: tuple) -> Variable | None:
    op, operands = parts
    return operands[0] if isinstance(op, o.Assert) and isinstance(operands, tuple) else None


@relation(
    (*CANON, "unsafe"),
    tracks=(o.Assert,),
    assumptions=("c != 0",),
    backward="the dropped conditions are lost",
    examples=("assert_op(x, c)",),
    types=CHECKED,
)
def remove_all_assert(lhs: Any, rhs: Any) -> Goal:
    """Assert(x, c...) -> x: every run-time check dropped (the seed's unsafe rewrite; valid where the
    conditions hold)."""
    return node_mappingo(lhs, rhs, o.Assert, checked_value)

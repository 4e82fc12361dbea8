"""Assertions: run-time checks (`Assert`) that rewriting may drop when they cannot fail, or when asked.

`useless_assert` drops the conditions known to hold (constants true
everywhere) and the check with none left; `remove_all_assert` is Aesara's
unsafe rewrite dropping every check (opt-in: `--include unsafe`).
"""

from __future__ import annotations

from typing import Any

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable
from relwrite.relations.registry import CANON, rule

CHECKED = {"x": "vector", "c": "vector"}  # a condition holds where it is nonzero


def _holds(condition: Any) -> bool:
    return isinstance(condition, Constant) and condition.data.size > 0 and bool(condition.data.all())


def without_true_conditions(message: str, x: Variable, conditions: tuple) -> Variable | None:
    """The assert without the conditions that are constants true everywhere (or its checked value `x`
    when none is left); None when every condition may fail."""
    kept = [c for c in conditions if not _holds(c)]
    if len(kept) == len(conditions):
        return None
    return o.Assert(message)(x, *kept) if kept else x


# the kept conditions are any of them, and none leaves x alone: a compute builds the right side
useless_assert = rule(
    "useless_assert",
    (o.Assert.pattern(message="message"), "x", "*conditions"),
    "checked",
    CANON,
    keeps_type=True,
    compute={"checked": without_true_conditions},
    examples=("assert_op(x, True)",),
    types={"x": "vector"},
    doc="Assert(x, True, c) -> Assert(x, c), Assert(x, True) -> x: conditions that cannot fail go. Exact.",
)

remove_all_assert = rule(
    "remove_all_assert",
    (o.Assert.pattern(), "x", "c", "*conditions"),
    "x",
    (*CANON, "unsafe"),
    keeps_type=True,
    assumptions=("c != 0",),
    examples=("assert_op(x, c)",),
    types=CHECKED,
    doc="""Assert(x, c...) -> x: every run-time check dropped (Aesara's unsafe rewrite; valid where the
    conditions hold).""",
)

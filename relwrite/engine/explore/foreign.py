"""Expressions of other languages given to `explore`, `best_form` and `improve`: one way in, one way back.

`in_relwrite(expr)` is the one conversion point: a relwrite Variable passes
as it is; a variable of another language (a PyTensor graph) is converted by
the bridge of the package its class comes from, which also gives the way
back, from a relwrite graph over the converted inputs to that language.
The bridges live in `relwrite.interop`, above the engine, so a bridge is
imported by name when an expression of its language comes in (and needs its
optional extra only then).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from relwrite.graph.basic import Variable

BRIDGES: dict[str, str] = {"pytensor": "relwrite.interop.pytensor"}
"""The top-level package of an expression's class -> the module whose `as_relwrite` converts it."""

Back = Callable[[Variable], Any]
"""From a relwrite graph over the converted inputs to the input's own language."""


def in_relwrite(expr: Any) -> tuple[Variable, Back | None]:
    """`expr` as a relwrite Variable, and the way back to its language (None when it was relwrite's)."""
    if isinstance(expr, Variable):
        return expr, None
    package = type(expr).__module__.partition(".")[0]
    bridge = BRIDGES.get(package)
    if bridge is None:
        raise TypeError(
            f"expected a graph Variable (relwrite's, or one of {', '.join(sorted(BRIDGES))}), "
            f"got {type(expr).__name__}: {expr!r:.80}"
        )
    return importlib.import_module(bridge).as_relwrite(expr)

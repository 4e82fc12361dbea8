"""What every command prints: strict JSON for `--json` (`json_text`) and errors that name the closest
valid choices (`unknown_choice`)."""

from __future__ import annotations

import difflib
import json
import math
import shutil
import textwrap
from collections.abc import Iterable
from typing import Any

import numpy as np


def json_text(document: Any) -> str:
    """`document` as strict JSON (RFC 8259), indented; every command's `--json` prints through it.

    JSON has no infinities or NaN: a non-finite number is written as the string
    "Infinity", "-Infinity" or "NaN" (what JavaScript's `Number()` and Python's
    `float()` read back), never as the bare tokens `json.dumps` writes by default.
    """
    return json.dumps(_strict(document), indent=2, allow_nan=False)


def _strict(value: Any) -> Any:
    """`value` with numpy scalars as Python numbers and non-finite floats as strings (see `json_text`)."""
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return value


def unknown_choice(problem: str, given: str, choices: Iterable[tuple[str, Iterable[str]]]) -> str:
    """`problem` (which names `given`) with the choices closest to `given`, then each labelled list of
    valid choices on lines of its own wrapped to the terminal's width (hundreds of names stay readable)."""
    choices = [(label, sorted(names)) for label, names in choices]
    close = difflib.get_close_matches(given, [name for _, names in choices for name in names], n=3)
    first = problem
    if close:
        first += f" (did you mean {' or '.join(map(repr, close))}?)"
    width = max(shutil.get_terminal_size().columns, 40)
    lines = [first]
    for label, names in choices:
        lines.append(
            textwrap.fill(
                ", ".join(names),
                width=width,
                initial_indent=f"  {label}: ",
                subsequent_indent="    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(lines)

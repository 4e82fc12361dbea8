"""`FILE.py:NAME`: a graph a user's Python file builds, given to a command (`relwrite explore`, `improve`).

The file runs as a script (as `relwrite check FILE.py` loads a module) and
`NAME` is one of its globals: a relwrite variable, or a variable of another
language relwrite has a bridge for (a PyTensor graph: `in_relwrite`).
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

SPEC = re.compile(r"^(?P<file>.+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)$")


class GraphFileError(Exception):
    """A `FILE.py:NAME` that gives no graph: one line naming the file and what went wrong."""


def is_graph_spec(text: str) -> bool:
    """Whether `text` names a graph in a Python file (an expression never has `.py:` in it)."""
    return SPEC.match(text) is not None


def load_object(spec: str) -> Any:
    """The global `NAME` of the Python file `FILE.py`, after running the file."""
    match = SPEC.match(spec)
    if match is None:
        raise GraphFileError(f"{spec!r} is not FILE.py:NAME")
    path, name = Path(match["file"]), match["name"]
    if not path.is_file():
        raise GraphFileError(f"no such file: {path}")
    try:
        names = runpy.run_path(str(path), run_name=f"_relwrite_graph_{path.stem}")
    except Exception as exc:
        message = str(exc).splitlines()[0] if str(exc) else ""
        raise GraphFileError(f"running {path} failed: {type(exc).__name__}: {message}") from None
    if name not in names:
        raise GraphFileError(f"{path} defines no {name!r}")
    return names[name]


def load_graph(spec: str) -> Any:
    """The relwrite graph of `FILE.py:NAME` (a PyTensor graph converted; anything else a GraphFileError)."""
    from relwrite.engine.explore.foreign import in_relwrite

    obj = load_object(spec)
    try:
        return in_relwrite(obj)[0]
    except (TypeError, ImportError) as exc:
        raise GraphFileError(f"{spec}: {str(exc).splitlines()[0]}") from None

"""`function(inputs, outputs, mode=...)`: rewrite a graph with a mode's rewrites, then link it.

A mode pairs a rewrite query with a linker: `fast_compile` (o1) only
canonicalizes and evaluates with NumPy; `fast_run` (o4) applies every
default rewrite (stabilize, specialize, BLAS, fusion) and runs the result
with the C linker, which falls back to NumPy with one warning when no C
compiler works.  `Mode(linker=..., query=...)` builds any other pairing.
"""

from __future__ import annotations

import inspect
import os
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from relwrite.backends.numpy.function import Function, function_graph
from relwrite.backends.numpy.linker import NumpyLinker
from relwrite.engine.db import Query, RewriteDatabase, mode_query, optdb
from relwrite.graph.basic import Constant, Variable, ancestors
from relwrite.graph.fg import FunctionGraph, MissingInputError
from relwrite.graph.memory import collection_paused

LINKERS = ("c", "numpy")


@dataclass(frozen=True)
class Mode:
    """How `function` compiles: which rewrites (`query` on `db`, default optdb) and which `linker`."""

    linker: str = "c"
    query: Query | str = "fast_run"
    db: RewriteDatabase | None = None

    def __post_init__(self) -> None:
        if self.linker not in LINKERS:
            raise ValueError(f"Mode: unknown linker {self.linker!r}; choose one of {', '.join(LINKERS)}")
        object.__setattr__(self, "query", mode_query(self.query))


MODES: dict[str, Mode] = {
    "fast_compile": Mode("numpy", "fast_compile"),
    "fast_run": Mode("c", "fast_run"),
    "o1": Mode("numpy", "o1"),
    "o2": Mode("numpy", "o2"),
    "o3": Mode("c", "o3"),
    "o4": Mode("c", "o4"),
}


def get_mode(mode: str | Mode) -> Mode:
    """A Mode from its name (fast_compile, fast_run, o1..o4) or itself."""
    if isinstance(mode, Mode):
        return mode
    try:
        return MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(f"unknown mode {mode!r}; known modes: {', '.join(MODES)}") from None


COMPILED_CACHE_SIZE = 64
"""How many compiled graphs `function` keeps in memory for warm compiles (least recently used go)."""

_compiled: OrderedDict[tuple, tuple[FunctionGraph, Any]] = OrderedDict()


def function(
    inputs: Variable | Sequence[Variable],
    outputs: Variable | Sequence[Variable],
    mode: str | Mode = "fast_run",
    trust_input: bool = False,
    cache: bool = True,
    profile: bool | str = False,
) -> Function:
    """Compile the graph from `inputs` to `outputs`: rewrite a copy with the mode's query, then link it.

    The call takes one value per input (by position or name) and returns one
    array for a single output variable, a list for a list.  Inputs are checked
    against their types (dtype, rank, static shape) unless `trust_input`, in
    which case arrays of exactly the right types must be passed positionally.

    A graph compiled before in this process (the same structure, input
    names and types, mode, rewrite database contents and ``RELWRITE_*``
    settings) is not rewritten or linked again: its compiled form is reused
    (warm compile), unless `cache` is False.

    With `profile` (True, or a message naming the function), the function
    records where its compile time and its calls' time go: `f.profile`
    (`relwrite.compile.profile.FunctionProfile`; `f.profile.summary()`).
    A profiled function is always compiled afresh.
    """
    mode = get_mode(mode)
    if profile:
        return _profiled(inputs, outputs, mode, trust_input, profile)
    fgraph, single = function_graph(inputs, outputs)
    rewriter = (mode.db or optdb).query(mode.query)
    key = _compile_key(fgraph, mode, rewriter) if cache else None
    compiled = _compiled.get(key) if key is not None else None
    if compiled is None:
        with collection_paused():
            rewriter.rewrite(fgraph)
            compiled = fgraph, _linker(mode, fgraph)
        if key is not None:
            _compiled[key] = compiled
            if len(_compiled) > COMPILED_CACHE_SIZE:
                _compiled.popitem(last=False)
    else:
        _compiled.move_to_end(key)
    fgraph, linker = compiled
    return Function(fgraph, single, linker=linker, trust_input=trust_input)


def _profiled(
    inputs: Variable | Sequence[Variable],
    outputs: Variable | Sequence[Variable],
    mode: Mode,
    trust_input: bool,
    profile: bool | str,
) -> Function:
    from relwrite.compile.profile import FunctionProfile, ProfiledFunction
    from relwrite.graph.features import ReplaceValidate

    if isinstance(profile, str):
        message = profile
    else:
        caller = inspect.stack(context=0)[2]
        message = f"{caller.filename}:{caller.lineno}"
    record = FunctionProfile(message)
    fgraph, single = function_graph(inputs, outputs)
    with collection_paused():
        start = time.perf_counter()
        record.rewrite_profile = (mode.db or optdb).query(mode.query).rewrite(fgraph)
        record.rewrite_time = time.perf_counter() - start
        start = time.perf_counter()
        linker = _linker(mode, fgraph)
        record.link_time = time.perf_counter() - start
    record.validate_time = sum(f.validate_time for f in fgraph.features if isinstance(f, ReplaceValidate))
    record.apply_nodes = len(fgraph.apply_nodes)
    return ProfiledFunction(fgraph, single, linker=linker, trust_input=trust_input, profile=record)


def _compile_key(fgraph: FunctionGraph, mode: Mode, rewriter: Any) -> tuple:
    """What a compiled graph depends on: the graph's structure and input names, the mode, the rewriter
    the database gives for the mode's query (a new one whenever its contents change), RELWRITE_* settings."""
    settings = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("RELWRITE_")))
    return (fgraph.fingerprint(), tuple(v.name for v in fgraph.inputs), mode.linker, rewriter, settings)


def _linker(mode: Mode, fgraph: FunctionGraph) -> Any:
    if mode.linker == "c":
        from relwrite.backends.c import CLinker

        return CLinker(fgraph)
    return NumpyLinker(fgraph)


def _eval(
    self: Variable,
    inputs_to_values: Mapping[Variable | str, Any] | None = None,
    mode: str | Mode = "fast_run",
) -> Any:
    """The value of this variable, given one value per input of its graph (by variable or name).

    `x.eval({x: [1.0, 2.0]})` compiles `function(inputs, self, mode)` once and
    keeps it on the variable (as PyTensor does), keyed by the inputs, the mode
    and the graph's nodes and edges as they are now, so that a graph edited in
    place since is compiled afresh.  A graph of constants needs no values.
    Leaving out an input is a MissingInputError naming it; a key that is not
    an input of the graph is a ValueError naming it.
    """
    if inputs_to_values is None:
        inputs_to_values = {}
    if not isinstance(inputs_to_values, Mapping):
        kind = type(inputs_to_values).__name__
        raise TypeError(f"eval: expected a dict of input values, {{variable or name: value}}, got {kind}")
    mode = get_mode(mode)
    inputs: list[Variable] = []
    edges: dict[Any, tuple[Variable, ...]] = {}
    for var in ancestors([self]):
        if var.owner is not None:
            edges.setdefault(var.owner, tuple(var.owner.inputs))
        elif not isinstance(var, Constant):
            inputs.append(var)
    values = _values_by_input(self, inputs, inputs_to_values)
    key = (tuple(inputs), mode, tuple(edges.items()))
    cache: dict[tuple, Function] = getattr(self, "_fn_cache", None) or {}
    compiled = cache.get(key)
    if compiled is None:
        compiled = function(inputs, self, mode=mode)
        cache[key] = compiled
        self._fn_cache = cache
    return compiled(*(values[var] for var in inputs))


def _values_by_input(
    output: Variable, inputs: list[Variable], given: Mapping[Variable | str, Any]
) -> dict[Variable, Any]:
    """`given` keyed by the graph's input variables (names looked up); clear errors for keys that are not
    inputs and for inputs with no value."""
    by_name: dict[str, list[Variable]] = {}
    for var in inputs:
        if var.name is not None:
            by_name.setdefault(var.name, []).append(var)
    listed = ", ".join(map(str, inputs)) or "none: it is computed from constants"
    values: dict[Variable, Any] = {}
    known = set(inputs)
    for key, value in given.items():
        if isinstance(key, str):
            named = by_name.get(key, [])
            if not named:
                raise ValueError(
                    f"eval: no input of the graph of {output} is named {key!r}; its inputs: {listed}"
                )
            if len(named) > 1:
                raise ValueError(
                    f"eval: {len(named)} inputs of the graph of {output} are named {key!r}; use the variables"
                )
            key = named[0]
        elif not isinstance(key, Variable):
            raise TypeError(f"eval: the keys are input variables or their names, got {key!r}")
        elif key not in known:
            raise ValueError(f"eval: {key} is not an input of the graph of {output}; its inputs: {listed}")
        if key in values:
            raise ValueError(f"eval: {key} is given twice (by variable and by name)")
        values[key] = value
    missing = [var for var in inputs if var not in values]
    if missing:
        raise MissingInputError(
            f"eval: no value given for the input {', '.join(map(str, missing))} of the graph of {output}"
        )
    return values


Variable.eval = _eval  # compiling is above the graph: attached here (relwrite.graph's docstring says why)

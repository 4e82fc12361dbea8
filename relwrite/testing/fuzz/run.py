"""Runs: graphs drawn one by one and judged under every mode, bugs shrunk to small reproducers, and a
report of counts per mode and category.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from relwrite.compile.function import MODES, Mode, get_mode
from relwrite.engine.db import mode_query
from relwrite.graph.basic import Variable
from relwrite.testing.fuzz.generate import draw_graph
from relwrite.testing.fuzz.judge import BUG_CATEGORIES, Finding, _Case, _short
from relwrite.testing.fuzz.recipe import (
    Recipe,
    RecipeStep,
    Ref,
    _literal_text,
)

GRAPH_ROW = "(graph)"
"""The report's row for mode-independent findings (static types, constructors that crash)."""

DEFAULT_MODES: tuple[str, ...] = (*MODES, "fast_run:numpy")
"""Every mode relwrite defines, and fast_run's rewrites run by the NumPy linker."""


# -- modes -----------------------------------------------------------------------------------------------


def parse_mode(spec: str) -> Mode:
    """A mode from a name (`o3`), with a linker (`fast_run:numpy`) or with extra tags (`fast_run+unsafe`)."""
    name, *tags = spec.split("+")
    name, _, linker = name.partition(":")
    if not linker and not tags:
        return get_mode(name)
    base = get_mode(name)
    query = mode_query(name)
    for tag in tags:
        query = query.including(tag)
    return Mode(linker or base.linker, query, base.db)


def _mode_text(spec: str) -> str:
    if ":" not in spec and "+" not in spec:
        return f'"{spec}"'
    name, *tags = spec.split("+")
    name, _, linker = name.partition(":")
    query = f'mode_query("{name}")' + "".join(f'.including("{t}")' for t in tags)
    return f'rw.Mode("{linker or get_mode(name).linker}", {query})'


# -- shrinking ----------------------------------------------------------------------------------------------


def _candidates(case: _Case) -> Iterator[tuple[Recipe, dict[int, np.ndarray]]]:
    """Smaller recipes: one output; a call bypassed by one of its arguments; a call cut into an input."""
    recipe, env = case.recipe, case.references[0].env
    if len(recipe.outputs) > 1:
        for o in recipe.outputs:
            yield Recipe(recipe.steps, [o], single=False), {}
    for i in range(len(recipe.steps) - 1, -1, -1):
        step = recipe.steps[i]
        if step.kind != "call":
            continue
        for arg in step.args:
            if isinstance(arg, Ref):
                yield _replaced(recipe, i, arg.index), {}
        value = env.values.get(i)
        if isinstance(value, np.ndarray) and i not in env.undefined:
            yield _cut(recipe, i, case.variables[i], value), {i: value}


def _replaced(recipe: Recipe, old: int, new: int) -> Recipe:
    steps = [
        RecipeStep(
            s.kind,
            s.op,
            tuple(Ref(new) if isinstance(a, Ref) and a.index == old else a for a in s.args),
            s.params,
        )
        for s in recipe.steps
    ]
    outputs = [new if o == old else o for o in recipe.outputs]
    return Recipe(steps, outputs, recipe.single)


def _cut(recipe: Recipe, i: int, var: Variable, value: np.ndarray) -> Recipe:
    """`recipe` with step `i` made an input of the step's static type (its reference value feeds it)."""
    steps = list(recipe.steps)
    taken = {s.params["name"] for s in steps if s.kind == "input"}
    name = next(f"x{k}" for k in range(len(steps) + 1) if f"x{k}" not in taken)
    steps[i] = RecipeStep("input", params={"name": name, "dtype": value.dtype.name, "shape": var.type.shape})
    return Recipe(steps, recipe.outputs, recipe.single)


def shrink(
    recipe: Recipe,
    values: dict[int, np.ndarray],
    mode: Mode,
    category: str,
    seed: int,
    timeout: float,
    budget: int = 60,
) -> tuple[Recipe, dict[int, np.ndarray], Finding]:
    """A smaller recipe, then simpler inputs, on which `mode` still shows a finding of `category`.

    Structure first (fewer outputs, calls bypassed or cut into inputs, within
    `budget` attempts), then input elements set to zero (as many attempts again).
    """

    def failing(candidate: Recipe, candidate_values: dict[int, np.ndarray]) -> Finding | None:
        try:
            case = _Case(candidate, [candidate_values], seed, timeout)
        except Exception:
            return None
        return next((f for f in case.check(mode) if f.category == category), None)

    found = failing(recipe, values)
    if found is None:
        raise ValueError(f"shrink: {category} does not reproduce on the recipe given")
    best = (recipe, values, found)
    attempts, improved = 0, True
    while improved and attempts < budget:
        improved = False
        current, current_values, _ = best
        for candidate, extra in _candidates(_Case(current, [current_values], seed, timeout)):
            pruned, new_index = candidate.pruned()
            smaller = (len(pruned.steps), len(pruned.outputs)) < (len(current.steps), len(current.outputs))
            if not (smaller or extra):
                continue
            if attempts >= budget:
                break
            attempts += 1
            merged = {**current_values, **extra}
            new_values = {new_index[i]: v for i, v in merged.items() if i in new_index}
            new_values = {i: v for i, v in new_values.items() if pruned.steps[i].kind == "input"}
            found = failing(pruned, new_values)
            if found is not None:
                best, improved = (pruned, new_values, found), True
                break
    positions = [(i, p) for i, array in best[1].items() for p in np.ndindex(array.shape)]
    for i, position in positions[:budget]:  # one element at a time made 0, kept when it still fails
        array = best[1][i]
        if array[position] == 0 and not (array.dtype.kind == "f" and np.signbit(array[position])):
            continue
        simpler = array.copy()
        simpler[position] = 0
        candidate_values = {**best[1], i: simpler}
        found = failing(best[0], candidate_values)
        if found is not None:
            best = (best[0], candidate_values, found)
    return best


SHRINK_PER_SIGNATURE = 3
"""How many failures of one signature a run shrinks (shrinking costs dozens of compilations)."""


# -- runs ------------------------------------------------------------------------------------------


@dataclass
class Failure:
    """A bug found: which graph and mode, what differs, and a reproducer."""

    graph: int
    modes: list[str]
    finding: Finding
    recipe: Recipe
    values: list[np.ndarray]

    def reproducer(self) -> str:
        """A self-contained Python snippet that builds the graph, compiles it and calls it."""
        lines = ["import numpy as np", "import relwrite as rw", "from relwrite.graph import ops"]
        if any(":" in m or "+" in m for m in self.modes[:1]):
            lines.append("from relwrite.engine.db import mode_query")
        lines.append("")
        lines.extend(self.recipe.lines())
        if self.finding.category == "crashed" and self.modes == [GRAPH_ROW]:
            lines.append(f"# the last line raises: {self.finding.detail}")
            return "\n".join(lines)
        names = self.recipe.names()
        ins = ", ".join(names[i] for i in self.recipe.inputs)
        outs = (
            names[self.recipe.outputs[0]]
            if self.recipe.single
            else "[" + ", ".join(names[o] for o in self.recipe.outputs) + "]"
        )
        args = ", ".join(_literal_text(v) for v in self.values)
        if self.modes == [GRAPH_ROW]:
            lines.append(f"print({outs}.type)  # {self.finding.detail}")
            lines.append(f'print(rw.function([{ins}], {outs}, mode="fast_compile")({args}))')
            return "\n".join(lines)
        lines.append(f"f = rw.function([{ins}], {outs}, mode={_mode_text(self.modes[0])})")
        lines.append(f"print(f({args}))")
        if self.finding.expected:
            lines.append(f"# expected (NumPy on the original graph): {_short(self.finding.expected, 600)}")
        if self.finding.got:
            lines.append(f"# got: {_short(self.finding.got, 600)}")
        return "\n".join(lines)

    def describe(self) -> str:
        f = self.finding
        head = f"graph {self.graph} [{', '.join(self.modes)}] {f.category}: {f.detail}"
        if f.hint:
            head += f"\n  hint: {f.hint}"
        return head + "\n" + "\n".join("    " + line for line in self.reproducer().splitlines())


@dataclass
class FuzzReport:
    """Counts per mode (graphs with at least one finding of each category) and the failures."""

    modes: list[str]
    graphs: int = 0
    rejected: int = 0
    seconds: float = 0.0
    counts: dict[str, Counter] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    @property
    def bugs(self) -> list[Failure]:
        return [f for f in self.failures if f.finding.category in BUG_CATEGORIES]

    def table(self) -> str:
        columns = ("tried", *BUG_CATEGORIES, "improvement", "declared")
        rows = [("mode", *columns)]
        for mode in [*self.modes, GRAPH_ROW]:
            c = self.counts.get(mode, Counter())
            rows.append((mode, *(str(c[col]) for col in columns)))
        widths = [max(len(r[k]) for r in rows) for k in range(len(columns) + 1)]
        lines = [
            "  ".join(cell.rjust(w) if k else cell.ljust(w) for k, (cell, w) in enumerate(zip(r, widths)))
            for r in rows
        ]
        lines.append(
            f"{self.graphs} graphs in {self.seconds:.1f} s; {self.rejected} steps rejected by the type system"
        )
        return "\n".join(lines)


def _mode_groups(specs: Sequence[str]) -> list[tuple[Mode, list[str]]]:
    """Modes by what they do: names that are the same mode (o1 and fast_compile) are run once."""
    groups: list[tuple[Mode, list[str]]] = []
    for spec in specs:
        mode = parse_mode(spec)
        for known, names in groups:
            if known == mode:
                names.append(spec)
                break
        else:
            groups.append((mode, [spec]))
    return groups


def check_graph(
    seed: int,
    index: int,
    modes: Sequence[str] = DEFAULT_MODES,
    timeout: float = 120.0,
    minimize: bool = True,
    shrunk: Counter | None = None,
) -> tuple[dict[str, set[str]], list[Failure], int]:
    """Draw graph `index` of run `seed` and check it: (categories per mode, failures, rejected steps).

    Bugs are shrunk when `minimize`; with a `shrunk` counter, only the first
    `SHRINK_PER_SIGNATURE` of each signature (the rest repeat a known cause).
    """
    recipe, input_sets, rejected, crash = draw_graph(seed, index)
    seen: dict[str, set[str]] = {m: set() for m in (*modes, GRAPH_ROW)}
    failures: list[Failure] = []
    if crash is not None:
        crashed, exc = crash
        seen[GRAPH_ROW].add("crashed")
        op = crashed.steps[crashed.outputs[0]].op
        finding = Finding("crashed", f"the constructor {op} raised {type(exc).__name__}: {_short(exc)}", 0)
        failures.append(Failure(index, [GRAPH_ROW], finding, crashed, []))
    case_seed = seed * 1_000_003 + index
    try:
        case = _Case(recipe, input_sets, case_seed, timeout)
    except Exception as exc:  # the recipe built once already, so this is relwrite failing on a rebuild
        seen[GRAPH_ROW].add("crashed")
        failures.append(
            Failure(index, [GRAPH_ROW], Finding("crashed", f"rebuilding raised {exc!r}", 0), recipe, [])
        )
        return seen, failures, rejected
    for step, finding in case.type_findings():
        seen[GRAPH_ROW].add("types")
        culprit, new_index = Recipe(recipe.steps, [step], single=True).pruned()
        values = [input_sets[finding.input_set][i] for i in recipe.inputs if i in new_index]
        failures.append(Failure(index, [GRAPH_ROW], finding, culprit, values))
    for mode, names in _mode_groups(modes):
        findings = case.check(mode)
        reported: set[str] = set()
        for finding in findings:
            for name in names:
                seen[name].add(finding.category)
            if finding.category in reported:
                continue
            reported.add(finding.category)
            values = input_sets[finding.input_set]
            failure = Failure(index, names, finding, recipe, [values[i] for i in recipe.inputs])
            key = _shrink_key(failure)
            if shrunk is not None:
                shrunk[key] += 1
            wanted = shrunk is None or shrunk[key] <= SHRINK_PER_SIGNATURE
            if minimize and wanted and finding.category in BUG_CATEGORIES and finding.category != "warned":
                with contextlib.suppress(Exception):  # a case that does not shrink is reported whole
                    small, values, finding = shrink(
                        recipe, values, mode, finding.category, case_seed, timeout
                    )
                    failure = Failure(index, names, finding, small, [values[i] for i in small.inputs])
            failures.append(failure)
    return seen, failures, rejected


def run(
    graphs: int,
    seed: int = 0,
    modes: Sequence[str] = DEFAULT_MODES,
    start: int = 0,
    timeout: float = 120.0,
    minimize: bool = True,
    progress: Callable[[int, FuzzReport], None] | None = None,
) -> FuzzReport:
    """Check graphs `start .. start + graphs - 1` of run `seed` under `modes`."""
    for spec in modes:
        parse_mode(spec)  # a clear error for an unknown mode, before any work
    report = FuzzReport(list(modes))
    began = time.perf_counter()
    shrunk: Counter = Counter()
    for index in range(start, start + graphs):
        seen, failures, rejected = check_graph(seed, index, modes, timeout, minimize, shrunk)
        report.graphs += 1
        report.rejected += rejected
        for mode, categories in seen.items():
            counter = report.counts.setdefault(mode, Counter())
            if mode != GRAPH_ROW:
                counter["tried"] += 1
            counter.update(categories)
        report.failures.extend(failures)
        report.seconds = time.perf_counter() - began
        if progress is not None:
            progress(index, report)
    report.counts.setdefault(GRAPH_ROW, Counter())["tried"] = report.graphs
    return report


def _shrink_key(failure: Failure) -> str:
    """Before shrinking: category, modes, the shape of the detail and the op computing the wrong output."""
    found = re.match(r"output (\d+)", failure.finding.detail)
    head = ""
    if found is not None and int(found.group(1)) < len(failure.recipe.outputs):
        head = failure.recipe.steps[failure.recipe.outputs[int(found.group(1))]].op
    return f"{failure.finding.category} | {','.join(failure.modes)} | {head} | {_detail_shape(failure)}"


def _detail_shape(failure: Failure) -> str:
    return re.sub(r"[-+]?\d[\w.+-]*|\(.*?\)|\[.*?\]", "#", failure.finding.detail)[:80]


def signature(failure: Failure) -> str:
    """A key for grouping failures that likely share a cause: category, modes, ops involved, detail shape."""
    ops_used = sorted({s.op for s in failure.recipe.steps if s.kind == "call"})
    modes = ",".join(failure.modes)
    return f"{failure.finding.category} | {modes} | {' '.join(ops_used)} | {_detail_shape(failure)}"

"""Function profiles: where `function(..., profile=True)` spent its compile time, and each call's.

`f.profile.summary()` gives, as text, the layout Theano's and Aesara's users
know: calls and their time, the compile time split into rewriting (the
rewriter's own profile nested, as `print_profile` prints it), validation and
linking (code generation, compiling and loading), and the time spent over all
calls per op class, per op and per node, largest first, as PyTensor's
`ProfileStats` prints them (share of the time in nodes, running share, time,
time per call, C or Python, calls, nodes).  `by_op_class()` and `by_op()`
give those rows as data.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from relwrite.backends.numpy.function import Function
from relwrite.backends.numpy.linker import NumpyLinker
from relwrite.engine.profile import print_profile
from relwrite.graph.basic import Apply
from relwrite.graph.fg import FunctionGraph


class OpTime(NamedTuple):
    """The time spent in the nodes of one op or op class over all calls (`FunctionProfile.by_op`)."""

    name: str
    seconds: float
    calls: int
    nodes: int
    kind: str
    """"C" when every node runs compiled code, "Py" when none does, "C+Py" when some do."""

    @property
    def per_call(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0


@dataclass
class FunctionProfile:
    """What one compiled function spent: compiling (once) and calling (accumulated over calls)."""

    message: str
    apply_nodes: int = 0
    rewrite_time: float = 0.0
    validate_time: float = 0.0
    link_time: float = 0.0
    rewrite_profile: Any = None
    calls: int = 0
    call_time: float = 0.0
    node_times: dict[Apply, float] = field(default_factory=dict)
    node_calls: dict[Apply, int] = field(default_factory=dict)
    c_nodes: frozenset[Apply] = frozenset()
    """The nodes that run compiled C code (the others run NumPy)."""

    @property
    def compile_time(self) -> float:
        return self.rewrite_time + self.link_time

    def by_op_class(self) -> list[OpTime]:
        """Time, calls and nodes per op class (`Composite`, `Dot22`, ...), largest time first."""
        return self._grouped(lambda node: type(node.op), lambda op_class: op_class.__name__)

    def by_op(self) -> list[OpTime]:
        """Time, calls and nodes per op (ops equal by their props share a row), largest time first."""
        return self._grouped(lambda node: node.op, str)

    def _grouped(self, key: Callable[[Apply], Hashable], name: Callable[[Any], str]) -> list[OpTime]:
        groups: dict[Hashable, list[Apply]] = {}
        for node in self.node_times:
            groups.setdefault(key(node), []).append(node)
        rows = []
        for group, nodes in groups.items():
            compiled = sum(node in self.c_nodes for node in nodes)
            kind = "C" if compiled == len(nodes) else "Py" if not compiled else "C+Py"
            seconds = sum(self.node_times[node] for node in nodes)
            calls = sum(self.node_calls.get(node, 0) for node in nodes)
            rows.append(OpTime(name(group), seconds, calls, len(nodes), kind))
        return sorted(rows, key=lambda row: (-row.seconds, row.name))

    def summary(self, most_nodes: int = 20, most_ops: int = 20) -> str:
        """The profile as text (the `most_ops` slowest op classes and ops, the `most_nodes` slowest nodes)."""
        for limit, value in (("most_nodes", most_nodes), ("most_ops", most_ops)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"summary: {limit} must be a number of rows >= 0, got {value!r}")
        in_nodes = sum(self.node_times.values())
        share = f" ({100 * in_nodes / self.call_time:.1f}%)" if self.call_time else ""
        lines = [
            "Function profiling",
            "==================",
            f"  Message: {self.message}",
            f"  Time in {self.calls} calls to Function.__call__: {self.call_time:e}s",
            f"  Time in nodes: {in_nodes:e}s{share}",
            f"  Total compile time: {self.compile_time:e}s",
            f"    Number of Apply nodes: {self.apply_nodes}",
            f"    Rewrite time: {self.rewrite_time:e}s",
            f"       Validate time: {self.validate_time:e}s",
            f"    Linker time (code generation, compiling, loading): {self.link_time:e}s",
            "",
            "Rewriter profile",
            "----------------",
        ]
        text = io.StringIO()
        print_profile(self.rewrite_profile, file=text, indent=2)
        lines += text.getvalue().rstrip("\n").splitlines()
        for what, rows in (("op class", self.by_op_class()), ("op", self.by_op())):
            lines += ["", f"Time per {what} over all calls", "-" * len(f"Time per {what} over all calls")]
            lines.append(f"  <% time> <sum %> <apply time> <time per call> <type> <#call> <#apply> <{what}>")
            total = 0.0
            for row in rows[:most_ops]:
                total += row.seconds
                lines.append(
                    f"  {_percent(row.seconds, in_nodes):>7}  {_percent(total, in_nodes):>7}  "
                    f"{row.seconds:.3e}s  {row.per_call:.3e}s  {row.kind:>4}  "
                    f"{row.calls:6d}  {row.nodes:6d}   {row.name}"
                )
            if len(rows) > most_ops:
                lines.append(
                    f"  ... {len(rows) - most_ops} more, {_percent(in_nodes - total, in_nodes)} of the time"
                )
        lines += ["", "Time per node over all calls", "----------------------------"]
        lines.append("  <% time> <sum %> <apply time> <time per call> <type> <#call> <node>")
        ranked = sorted(self.node_times.items(), key=lambda item: -item[1])
        total = 0.0
        for node, seconds in ranked[:most_nodes]:
            total += seconds
            calls = self.node_calls.get(node, 0)
            kind = "C" if node in self.c_nodes else "Py"
            lines.append(
                f"  {_percent(seconds, in_nodes):>7}  {_percent(total, in_nodes):>7}  {seconds:.3e}s  "
                f"{seconds / calls if calls else 0.0:.3e}s  {kind:>4}  {calls:6d}   {node}"
            )
        if len(ranked) > most_nodes:
            lines.append(
                f"  ... {len(ranked) - most_nodes} more nodes, "
                f"{_percent(in_nodes - total, in_nodes)} of the time"
            )
        return "\n".join(lines)


def _percent(part: float, whole: float) -> str:
    return f"{100 * part / whole if whole else 0.0:.1f}%"


class ProfiledFunction(Function):
    """A compiled function that counts its calls and times each node (`profile`)."""

    def __init__(
        self, fgraph: FunctionGraph, *args: Any, linker: NumpyLinker, profile: FunctionProfile, **kwargs: Any
    ):
        linker.time_nodes(
            profile.node_times, profile.node_calls
        )  # before the entry point is built from the steps
        profile.c_nodes = frozenset(getattr(linker, "c_nodes", ()))
        super().__init__(fgraph, *args, linker=linker, **kwargs)
        self.profile = profile

    def __reduce__(self) -> tuple:
        """Pickle as a compiled function does, with its profile: loading keeps the record and counts on.

        Node times and calls travel by the node's place in the graph's
        topological order (the graph pickles as a table of its own, with new nodes).
        """
        _, arguments = super().__reduce__()
        place = {node: k for k, node in enumerate(self.fgraph.toposort())}
        profile = self.profile
        times = [
            (place[node], seconds, profile.node_calls.get(node, 0))
            for node, seconds in profile.node_times.items()
        ]
        return _profiled, (
            *arguments,
            replace(profile, node_times={}, node_calls={}, c_nodes=frozenset()),
            times,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return super().__call__(*args, **kwargs)
        finally:
            self.profile.calls += 1
            self.profile.call_time += time.perf_counter() - start


def _profiled(
    fgraph: FunctionGraph,
    single_output: bool,
    linker: type[NumpyLinker],
    trust_input: bool,
    profile: FunctionProfile,
    times: list[tuple[int, float, int]],
) -> ProfiledFunction:
    nodes = fgraph.toposort()
    profile.node_times.update((nodes[k], seconds) for k, seconds, _ in times)
    profile.node_calls.update((nodes[k], calls) for k, _, calls in times)
    return ProfiledFunction(
        fgraph, single_output, linker=linker(fgraph), trust_input=trust_input, profile=profile
    )

"""Function profiles: where `function(..., profile=True)` spent its compile time, and each call's.

`f.profile.summary()` gives, as text, the layout Theano's and Aesara's users
know: calls and their time, the compile time split into rewriting (the
rewriter's own profile nested, as `print_profile` prints it), validation and
linking (code generation, compiling and loading), and the time spent in each
node over all calls, largest first.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field, replace
from typing import Any

from relwrite.backends.numpy.function import Function
from relwrite.backends.numpy.linker import NumpyLinker
from relwrite.engine.profile import print_profile
from relwrite.graph.basic import Apply
from relwrite.graph.fg import FunctionGraph


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

    @property
    def compile_time(self) -> float:
        return self.rewrite_time + self.link_time

    def summary(self, most_nodes: int = 20) -> str:
        """The profile as text (the `most_nodes` slowest nodes listed)."""
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
        lines += ["", "Time per node over all calls", "----------------------------", "  time - % - node"]
        ranked = sorted(self.node_times.items(), key=lambda item: -item[1])
        for node, seconds in ranked[:most_nodes]:
            percent = 100 * seconds / in_nodes if in_nodes else 0.0
            lines.append(f"  {seconds:e}s - {percent:5.1f}% - {node}")
        if len(ranked) > most_nodes:
            lines.append(f"  ... {len(ranked) - most_nodes} more nodes")
        return "\n".join(lines)


class ProfiledFunction(Function):
    """A compiled function that counts its calls and times each node (`profile`)."""

    def __init__(
        self, fgraph: FunctionGraph, *args: Any, linker: NumpyLinker, profile: FunctionProfile, **kwargs: Any
    ):
        linker.time_nodes(profile.node_times)  # before the entry point is built from the linker's steps
        super().__init__(fgraph, *args, linker=linker, **kwargs)
        self.profile = profile

    def __reduce__(self) -> tuple:
        """Pickle as a compiled function does, with its profile: loading keeps the record and counts on.

        Node times travel by the node's place in the graph's topological order
        (the graph pickles as a table of its own, with new nodes).
        """
        _, arguments = super().__reduce__()
        place = {node: k for k, node in enumerate(self.fgraph.toposort())}
        times = [(place[node], seconds) for node, seconds in self.profile.node_times.items()]
        return _profiled, (*arguments, replace(self.profile, node_times={}), times)

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
    times: list[tuple[int, float]],
) -> ProfiledFunction:
    nodes = fgraph.toposort()
    profile.node_times.update((nodes[k], seconds) for k, seconds in times)
    return ProfiledFunction(
        fgraph, single_output, linker=linker(fgraph), trust_input=trust_input, profile=profile
    )

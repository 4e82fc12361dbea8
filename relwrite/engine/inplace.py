"""The in-place steps of the pipeline: `add_destroy_handler` (position 49.5) and `inplace_marks` (75).

`AddDestroyHandler` attaches a `DestroyHandler` to the graph, so that the
rewrites after it keep in-place marks legal; `InplaceRewriter` then marks,
for every elementwise node (Composites included) and every
`inc_subtensor` / `set_subtensor`, an input whose buffer it may overwrite:
the first one the handler allows.  Both carry the `inplace` tag, so
``Query(include=["fast_run"], exclude=["inplace"])`` runs nothing in place,
as in Aesara.  Whether a marked node really writes in place is the
linker's choice: its implementation must be able to, and shapes must agree.
"""

from __future__ import annotations

import time

from relwrite.engine.graph_rewriters import GraphRewriter
from relwrite.engine.profile import WalkProfile
from relwrite.graph import ops
from relwrite.graph.destroy import DestroyHandler, destroy_handler
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.subtensor import IncSubtensor


class AddDestroyHandler(GraphRewriter):
    """Attach a DestroyHandler (the marker at 49.5: in-place marks may follow)."""

    def add_requirements(self, fgraph: FunctionGraph) -> None:
        fgraph.attach_feature(DestroyHandler())

    def apply(self, fgraph: FunctionGraph) -> None:
        return None


class InplaceRewriter(GraphRewriter):
    """Mark each elementwise node and update to overwrite an input it may (see the module)."""

    def add_requirements(self, fgraph: FunctionGraph) -> None:
        fgraph.attach_feature(DestroyHandler())

    def apply(self, fgraph: FunctionGraph) -> WalkProfile:
        start = time.perf_counter()
        handler = destroy_handler(fgraph)
        nodes = fgraph.toposort()
        ordered = time.perf_counter()
        marked = 0
        for node in nodes:
            if node in handler.destroyed or len(node.outputs) != 1:
                continue
            if isinstance(node.op, IncSubtensor):
                positions = [0]
            elif isinstance(node.op, ops.Elemwise):
                positions = range(len(node.inputs))
            else:
                continue
            for position in positions:
                if handler.refusal(fgraph, node, position) is None:
                    handler.destroy(fgraph, node, position)
                    marked += 1
                    break
        n = len(fgraph.apply_nodes)
        return WalkProfile(self, marked, n, n, ordered - start, time.perf_counter() - ordered, 0.0)

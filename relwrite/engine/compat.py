"""The seed documents' names (Aesara's older "optimizer" nomenclature) for relwrite's rewriters.

The seed tutorial runs with only its import lines changed, e.g.::

    from relwrite.engine.compat import aesara, GlobalOptimizer, TopoOptimizer
    from relwrite import float64, add, mul, true_div

`aesara` is a namespace laid out like the paths the seed spells in full
(`aesara.graph.fg.FunctionGraph`, `aesara.graph.opt.TopoOptimizer`,
`aesara.pprint.assign(...)`, `aesara.printing.OperatorPrinter`).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from relwrite.engine.db import Query, optdb, rewrite_graph
from relwrite.engine.equilibrium import EquilibriumRewriter
from relwrite.engine.graph_rewriters import (
    GraphRewriter,
    MergeRewriter,
    SequentialRewriter,
    WalkingGraphRewriter,
)
from relwrite.engine.node_rewriters import KanrenRelationSub, NodeRewriter, OpRemove, OpSub, PatternSub
from relwrite.graph import features, fg, printing


class GlobalOptimizer(GraphRewriter):
    """GraphRewriter under its seed name; `optimize` is `rewrite`."""

    optimize = GraphRewriter.rewrite


class LocalOptimizer(NodeRewriter):
    """NodeRewriter under its seed name."""


class TopoOptimizer(WalkingGraphRewriter):
    """WalkingGraphRewriter under its seed name."""

    optimize = GraphRewriter.rewrite


class EquilibriumOptimizer(EquilibriumRewriter):
    """EquilibriumRewriter under its seed name."""

    optimize = GraphRewriter.rewrite


class MergeOptimizer(MergeRewriter):
    """MergeRewriter under its seed name."""

    optimize = GraphRewriter.rewrite


class SeqOptimizer(SequentialRewriter):
    """SequentialRewriter under its seed name."""

    optimize = GraphRewriter.rewrite


OptimizationQuery = Query


def optimize_graph(
    graph: Any,
    include: Sequence[str] = ("canonicalize",),
    custom_opt: GraphRewriter | None = None,
    clone: bool = False,
    **kwargs: Any,
) -> Any:
    """`rewrite_graph` under its seed name (`custom_opt` is `custom_rewrite`)."""
    return rewrite_graph(graph, include=include, custom_rewrite=custom_opt, clone=clone, **kwargs)


_opt = SimpleNamespace(
    GlobalOptimizer=GlobalOptimizer,
    LocalOptimizer=LocalOptimizer,
    TopoOptimizer=TopoOptimizer,
    EquilibriumOptimizer=EquilibriumOptimizer,
    MergeOptimizer=MergeOptimizer,
    SeqOptimizer=SeqOptimizer,
    OpSub=OpSub,
    OpRemove=OpRemove,
    PatternSub=PatternSub,
)

aesara = SimpleNamespace(
    pprint=printing.pprint,
    dprint=printing.dprint,
    printing=printing,
    graph=SimpleNamespace(
        fg=fg,
        features=features,
        opt=_opt,
        optdb=SimpleNamespace(OptimizationQuery=Query),
        kanren=SimpleNamespace(KanrenRelationSub=KanrenRelationSub),
        opt_utils=SimpleNamespace(optimize_graph=optimize_graph),
    ),
    compile=SimpleNamespace(optdb=optdb),
)

__all__ = [
    "EquilibriumOptimizer",
    "GlobalOptimizer",
    "KanrenRelationSub",
    "LocalOptimizer",
    "MergeOptimizer",
    "OpRemove",
    "OpSub",
    "OptimizationQuery",
    "PatternSub",
    "SeqOptimizer",
    "TopoOptimizer",
    "aesara",
    "optdb",
    "optimize_graph",
]

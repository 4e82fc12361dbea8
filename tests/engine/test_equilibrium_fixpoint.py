"""A fixed point is a fixed point: a second equilibrium run on the result changes nothing.

The engine retries a failed attempt when anything the attempt read changes
(every read goes through `note_read`), so no rewrite can be left for a
second run to find; this holds for the default pipeline and for any set of
rules a user puts together.
"""

from __future__ import annotations

import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite.engine import EquilibriumRewriter, KanrenRelationSub, OpSub, PatternSub
from relwrite.engine.db import mode_query, optdb
from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, graph_inputs
from relwrite.graph.fg import FunctionGraph
from relwrite.relations import catalogue
from relwrite.testing.strategies import expression_graphs

OPS = (o.add, o.mul, o.sub, o.true_div, o.neg, o.exp, o.log, o.log1p, o.sqr, o.sqrt, o.sigmoid, o.maximum)
CATALOGUE = [r for r in catalogue() if "blas" not in r.tags]
EXTRA = [OpSub(o.maximum, o.minimum), PatternSub((o.sqrt, (o.sqr, "x")), (o.abs, "x")), OpSub(o.sub, o.add)]


def _graph(drawn) -> FunctionGraph:
    inputs, output = drawn
    free = [v for v in graph_inputs([output]) if not isinstance(v, Constant)]
    return FunctionGraph(free, [output])


def _quietly(rewrite, fgraph: FunctionGraph) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rewrite(fgraph)


@settings(max_examples=25)
@given(expression_graphs(ops=OPS, max_nodes=10))
def test_a_second_run_of_the_default_pipeline_changes_nothing(drawn):
    fgraph = _graph(drawn)
    pipeline = optdb.query(mode_query("fast_run"))
    _quietly(pipeline.rewrite, fgraph)
    once = fgraph.fingerprint()
    _quietly(pipeline.rewrite, fgraph)
    assert fgraph.fingerprint() == once


@settings(max_examples=25)
@given(
    expression_graphs(ops=OPS, max_nodes=10),
    st.lists(st.sampled_from(CATALOGUE), min_size=1, max_size=8, unique_by=lambda r: r.name),
    st.lists(st.sampled_from(EXTRA), max_size=2, unique=True),
)
def test_a_second_run_of_any_rule_set_changes_nothing(drawn, rules, extra):
    fgraph = _graph(drawn)
    rewriter = EquilibriumRewriter([*(KanrenRelationSub(r) for r in rules), *extra], max_use_ratio=50)
    _quietly(rewriter.rewrite, fgraph)
    once = fgraph.fingerprint()
    _quietly(rewriter.rewrite, fgraph)
    assert fgraph.fingerprint() == once, [r.name for r in rules]

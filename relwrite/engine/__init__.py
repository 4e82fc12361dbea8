"""Rewriters, the equilibrium engine, the rewrite database and profiles.

Node rewriters propose replacements for one node; graph rewriters edit a
whole FunctionGraph; `optdb` holds the default pipeline and `rewrite_graph`
runs it.  Aesara's older names are in `relwrite.engine.compat`.
"""

from relwrite.engine.db import (
    MODES,
    EquilibriumDB,
    Query,
    RewriteDatabase,
    SequenceDB,
    mode_query,
    optdb,
    rewrite_graph,
)
from relwrite.engine.equilibrium import EquilibriumRewriter
from relwrite.engine.folding import ConstantFolding, constant_folding
from relwrite.engine.fusion import FusionRewriter
from relwrite.engine.graph_rewriters import (
    GraphRewriter,
    MergeRewriter,
    NodeBudgetExceeded,
    RewriteWarning,
    SequentialRewriter,
    UndoLog,
    WalkingGraphRewriter,
    in2out,
    out2in,
)
from relwrite.engine.node_rewriters import (
    BudgetExceeded,
    FunctionNodeRewriter,
    KanrenRelationSub,
    NodeRewriter,
    OpRemove,
    OpSub,
    PatternSub,
    RewriteError,
    derive_tracks,
    kanren_budget,
    node_rewriter,
    relation_budget,
)
from relwrite.engine.profile import print_profile

__all__ = [
    "MODES",
    "BudgetExceeded",
    "ConstantFolding",
    "EquilibriumDB",
    "EquilibriumRewriter",
    "FunctionNodeRewriter",
    "FusionRewriter",
    "GraphRewriter",
    "KanrenRelationSub",
    "MergeRewriter",
    "NodeBudgetExceeded",
    "NodeRewriter",
    "OpRemove",
    "OpSub",
    "PatternSub",
    "Query",
    "RewriteDatabase",
    "RewriteError",
    "RewriteWarning",
    "SequenceDB",
    "SequentialRewriter",
    "UndoLog",
    "WalkingGraphRewriter",
    "constant_folding",
    "derive_tracks",
    "in2out",
    "kanren_budget",
    "mode_query",
    "node_rewriter",
    "optdb",
    "out2in",
    "print_profile",
    "relation_budget",
    "rewrite_graph",
]

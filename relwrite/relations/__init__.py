"""The rule catalogue: rewrite rules as bidirectional kanren relations with metadata.

`catalogue()` lists every rule; `rule(...)` and `@relation(...)` make new ones.
"""

from relwrite.relations.registry import (
    OPT_IN_TAGS,
    PHASES,
    SEMANTICS,
    Assumption,
    Rule,
    catalogue,
    derive_tracks,
    get_rule,
    relation,
    rule,
)

__all__ = [
    "OPT_IN_TAGS",
    "PHASES",
    "SEMANTICS",
    "Assumption",
    "Rule",
    "catalogue",
    "derive_tracks",
    "get_rule",
    "relation",
    "rule",
]

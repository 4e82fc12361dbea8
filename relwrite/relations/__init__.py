"""The rule catalogue: rewrite rules as bidirectional kanren relations with metadata.

`catalogue()` lists every rule of the phase modules below, in pipeline
order; `rule(...)` and `@relation(...)` make new ones.  The catalogue lives
here, above the phase modules it imports, so the registry that every phase
module imports never imports them back.
"""

from types import ModuleType

from relwrite.relations import (
    algebra,
    assertions,
    blas,
    canonicalize,
    identities,
    indexing,
    quotients,
    shapes,
    simplify,
    special_functions,
    specialize,
    stabilize,
)
from relwrite.relations.registry import (
    OPT_IN_TAGS,
    PHASES,
    SEMANTICS,
    Assumption,
    Rule,
    derive_tracks,
    relation,
    rule,
)

RULE_MODULES: tuple[ModuleType, ...] = (
    canonicalize,
    quotients,
    assertions,
    indexing,
    shapes,
    simplify,
    stabilize,
    special_functions,
    specialize,
    algebra,
    identities,
    blas,
)
"""The modules whose module-level rules make the catalogue, in pipeline order."""


def _listed() -> tuple[Rule, ...]:
    """Every module-level Rule of `RULE_MODULES`, each told its home (module, attribute) for pickling;
    a name defined twice is an error naming both modules, and so is a composed rule not listed."""
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for module in RULE_MODULES:
        for attribute, value in vars(module).items():
            if isinstance(value, Rule):
                if value.name in seen:
                    raise ValueError(
                        f"rule {value.name} is defined in {seen[value.name]} and {module.__name__}"
                    )
                seen[value.name] = module.__name__
                value.home = (module.__name__, attribute)
                rules.append(value)
    for r in rules:
        unknown = [c for c in r.composes if c not in seen]
        if unknown:
            raise ValueError(f"rule {r.name} composes {', '.join(unknown)}, not in the catalogue")
    return tuple(rules)


_CATALOGUE = _listed()
_BY_NAME = {r.name: r for r in _CATALOGUE}


def catalogue() -> list[Rule]:
    """Every rule of the catalogue, in definition order (phase modules in pipeline order)."""
    return list(_CATALOGUE)


def get_rule(name: str) -> Rule:
    """The catalogue rule called `name` (KeyError naming it otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no rule named {name!r} in the catalogue") from None


__all__ = [
    "OPT_IN_TAGS",
    "PHASES",
    "RULE_MODULES",
    "SEMANTICS",
    "Assumption",
    "Rule",
    "catalogue",
    "derive_tracks",
    "get_rule",
    "relation",
    "rule",
]

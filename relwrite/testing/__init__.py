"""Tools for testing rewrites: hypothesis strategies for types, arrays, expression graphs and inputs,
and soundness checks for rules (`check_relation`)."""

from relwrite.testing.soundness import (
    Binding,
    SoundnessError,
    SoundnessReport,
    check_relation,
    relation_bindings,
)
from relwrite.testing.strategies import (
    DEFAULT_ELEMWISE_OPS,
    arrays,
    expression_graphs,
    input_values,
    tensor_types,
)

__all__ = [
    "DEFAULT_ELEMWISE_OPS",
    "Binding",
    "SoundnessError",
    "SoundnessReport",
    "arrays",
    "check_relation",
    "expression_graphs",
    "input_values",
    "relation_bindings",
    "tensor_types",
]

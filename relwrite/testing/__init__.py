"""Tools for testing rewrites: hypothesis strategies for types, arrays, expression graphs and inputs,
soundness checks for rules (`check_relation`), comparison up to operand order (`ac_text`), and the
differential fuzzer (`relwrite.testing.fuzz`, imported on its own)."""

try:
    import hypothesis  # noqa: F401
except ModuleNotFoundError as exc:  # an install without relwrite's dependencies (pip --no-deps)
    if exc.name != "hypothesis":
        raise
    raise ModuleNotFoundError(
        "relwrite.testing needs hypothesis, a dependency of relwrite: pip install 'hypothesis>=6.100'",
        name="hypothesis",
    ) from None

from relwrite.testing.compare import ac_text
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
    "ac_text",
    "arrays",
    "check_relation",
    "expression_graphs",
    "input_values",
    "relation_bindings",
    "tensor_types",
]

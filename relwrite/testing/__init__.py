"""Tools for testing rewrites: hypothesis strategies for types, arrays, expression graphs and inputs."""

from relwrite.testing.strategies import (
    DEFAULT_ELEMWISE_OPS,
    arrays,
    expression_graphs,
    input_values,
    tensor_types,
)

__all__ = ["DEFAULT_ELEMWISE_OPS", "arrays", "expression_graphs", "input_values", "tensor_types"]

"""The exact backend: relwrite's ops over the real numbers with mpmath, the one reference that accuracy
costs, fuzz verdicts and the FPCore scorer judge floating point against (`reference` states its policy
for infinities, NaN, poles, overflow and precision)."""

from relwrite.backends.exact.reference import (
    MAX_ARGUMENT_SCALE,
    NoReferenceError,
    aligned,
    array,
    context,
    elementwise,
    evaluate,
    has_reference,
    node_value,
    precision,
    scale,
)

__all__ = [
    "MAX_ARGUMENT_SCALE",
    "NoReferenceError",
    "aligned",
    "array",
    "context",
    "elementwise",
    "evaluate",
    "has_reference",
    "node_value",
    "precision",
    "scale",
]

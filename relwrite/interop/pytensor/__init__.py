"""The PyTensor bridge: PyTensor graphs in and out of relwrite, and relwrite's rules inside PyTensor.

`from_pytensor(graph)` gives relwrite variables for PyTensor outputs (or a
`FunctionGraph`) and the inputs they read; `to_pytensor(outputs, inputs)`
gives PyTensor variables back, over the same PyTensor inputs.  Every op the
two languages share maps to its counterpart; an op relwrite does not know
becomes an `OpaqueOp` node (the PyTensor op kept, evaluated by its `perform`,
never looked into by a rule), and a relwrite op PyTensor lacks becomes a
`RelwriteOp` in PyTensor.  `RelwriteRewriter` runs a relwrite rewrite (a
query of its `optdb`, or `best_form` by a cost) as a step of PyTensor's own
pipeline, and `relwrite_mode` gives a PyTensor mode that includes it.

Needs the optional extra: ``pip install 'relwrite[pytensor]'``.
"""

try:
    import pytensor  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("relwrite.interop.pytensor needs PyTensor: pip install 'relwrite[pytensor]'") from exc

from relwrite.interop.pytensor.convert import Converted, as_relwrite, from_pytensor, to_pytensor
from relwrite.interop.pytensor.opaque import OpaqueOp, RelwriteOp
from relwrite.interop.pytensor.rewriter import RelwriteRewriter, relwrite_mode

__all__ = [
    "Converted",
    "OpaqueOp",
    "RelwriteOp",
    "RelwriteRewriter",
    "as_relwrite",
    "from_pytensor",
    "relwrite_mode",
    "to_pytensor",
]

"""The NumPy backend: one implementation per op class, a linker, and `function`."""

from relwrite.backends.numpy.function import Function, function
from relwrite.backends.numpy.impls import AssertionFailedError, EvaluationError, Impl, evaluate, numpy_impl
from relwrite.backends.numpy.linker import NumpyLinker, Step

__all__ = [
    "AssertionFailedError",
    "EvaluationError",
    "Function",
    "Impl",
    "NumpyLinker",
    "Step",
    "evaluate",
    "function",
    "numpy_impl",
]

"""The NumPy backend: one implementation per op class, a linker, and `numpy_function`."""

from relwrite.backends.numpy.function import Function, numpy_function
from relwrite.backends.numpy.impls import AssertionFailedError, EvaluationError, Impl, evaluate, numpy_impl
from relwrite.backends.numpy.linker import Instruction, NumpyLinker

__all__ = [
    "AssertionFailedError",
    "EvaluationError",
    "Function",
    "Impl",
    "Instruction",
    "NumpyLinker",
    "evaluate",
    "numpy_function",
    "numpy_impl",
]

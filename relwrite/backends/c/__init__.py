"""The C backend: fused elementwise loops and BLAS calls compiled at run time, with a NumPy fallback."""

from relwrite.backends.c.compiler import CompileError, CompilerUnavailableError, ModuleCache
from relwrite.backends.c.linker import CFallbackWarning, CLinker, c_available

__all__ = [
    "CFallbackWarning",
    "CLinker",
    "CompileError",
    "CompilerUnavailableError",
    "ModuleCache",
    "c_available",
]

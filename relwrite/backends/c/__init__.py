"""The C backend: fused elementwise loops and BLAS calls compiled at run time, with a NumPy fallback."""

from relwrite.backends.c.compiler import (
    CFallbackWarning,
    CompileError,
    CompilerUnavailableError,
    CompileTimeoutError,
    ModuleCache,
)
from relwrite.backends.c.linker import CLinker, c_available, generated_sources, prebuild

__all__ = [
    "CFallbackWarning",
    "CLinker",
    "CompileError",
    "CompileTimeoutError",
    "CompilerUnavailableError",
    "ModuleCache",
    "c_available",
    "generated_sources",
    "prebuild",
]

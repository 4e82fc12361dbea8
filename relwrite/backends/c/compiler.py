"""The C toolchain and the disk cache of compiled modules.

Modules are plain shared objects built by one `gcc -shared -fPIC` call and
loaded with ctypes.  The compiler comes from ``$RELWRITE_CC`` (default: `gcc`,
then `cc` on the PATH).  Flags follow what was measured on this project's
target machines: `-O3 -fno-math-errno -fno-trapping-math` lets gcc vectorize
loops that call libm, and glibc's vector math library (libmvec) supplies the
SIMD variants; `-march=x86-64-v3` is added only when the CPU has every feature
of that level.  `-ffast-math` is never used: gcc then links `crtfastmath.o`,
which makes the whole process flush denormals to zero.  `-ffp-contract=off`
keeps `a*b + c` as two roundings and `-fwrapv` makes signed overflow wrap, as
numpy computes them.

The cache (``$RELWRITE_CACHE_DIR``, default ``~/.cache/relwrite``) names each
module by a hash of its source, the flags, the compiler's version, the CPU
target and whatever the caller adds (the BLAS integer width, the generator
version).  A module is compiled to a temporary file in the cache directory and
renamed into place with `os.replace`, so a concurrent process never loads a
half-written file, and an existing module file is never written again: new
content always gets a new name.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

X86_64_V3_FLAGS = frozenset(
    # /proc/cpuinfo names of the x86-64-v2 features, then AVX, AVX2, BMI1/2, F16C, FMA, LZCNT, MOVBE, XSAVE.
    "cx16 lahf_lm popcnt pni ssse3 sse4_1 sse4_2 avx avx2 bmi1 bmi2 f16c fma abm movbe xsave".split()  # noqa: SIM905
)

VECTOR_MATH_FUNCTIONS = ("exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "pow")
"""libm functions that generated loops call and that libmvec may provide SIMD variants of."""

_BASE_FLAGS = (
    "-shared",
    "-fPIC",
    "-O3",
    "-std=gnu11",
    "-pipe",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-ffp-contract=off",
    "-fwrapv",
)


class CompilerUnavailableError(RuntimeError):
    """No working C compiler (missing, failing, or its output cannot be cached or loaded)."""


class CompileError(RuntimeError):
    """The compiler rejected a generated module; the message holds its diagnostics."""


@dataclass(frozen=True)
class Toolchain:
    """A C compiler and the flags modules are built with.

    `identity` is the compiler's path and version line (part of every cache
    key); `target` names the CPU level the code is built for; `vector_math`
    holds the functions of `VECTOR_MATH_FUNCTIONS` whose SIMD variants for
    that target exist in the C library, so generated code may declare them
    `simd`.
    """

    command: str
    identity: str
    target: str
    flags: tuple[str, ...]
    link_flags: tuple[str, ...]
    vector_math: frozenset[str]


def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return frozenset(match.group(1).split()) if match else frozenset()


def _supports_x86_64_v3(version_line: str) -> bool:
    """Whether the compiler knows `-march=x86-64-v3` (gcc 11, clang 12 and later)."""
    numbers = re.findall(r"(\d+)\.\d+(?:\.\d+)?", version_line)
    if not numbers:
        return False
    major = int(numbers[-1])
    return major >= (12 if "clang" in version_line else 11)


def _vector_math(target: str) -> frozenset[str]:
    """The functions whose libmvec variants for `target` exist, in double and in float."""
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        return frozenset()
    try:
        libmvec = ctypes.CDLL("libmvec.so.1")
    except OSError:
        return frozenset()
    # gcc calls the SSE variant ('b') in loop epilogues, and the AVX2 one ('d') when built for x86-64-v3.
    variants = (("b", 2), ("d", 4)) if target == "x86-64-v3" else (("b", 2),)
    found = set()
    for name in VECTOR_MATH_FUNCTIONS:
        params = "vv" if name == "pow" else "v"
        symbols = [f"_ZGV{isa}N{lanes}{params}_{name}" for isa, lanes in variants]
        symbols += [f"_ZGV{isa}N{2 * lanes}{params}_{name}f" for isa, lanes in variants]
        if all(hasattr(libmvec, symbol) for symbol in symbols):
            found.add(name)
    return frozenset(found)


def _compiler_command() -> str:
    configured = os.environ.get("RELWRITE_CC")
    if configured:
        return configured
    found = shutil.which("gcc") or shutil.which("cc")
    if found is None:
        raise CompilerUnavailableError("no C compiler found (looked for gcc and cc on the PATH)")
    return found


@cache
def find_toolchain() -> Toolchain:
    """The process's toolchain, found once; raises CompilerUnavailableError naming what is wrong."""
    command = _compiler_command()
    try:
        run = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CompilerUnavailableError(f"the C compiler {command!r} cannot run ({exc})") from None
    if run.returncode != 0 or not run.stdout.strip():
        raise CompilerUnavailableError(f"the C compiler {command!r} failed to report its version")
    version = run.stdout.strip().splitlines()[0]
    resolved = shutil.which(command) or command
    target = "generic"
    if platform.machine() == "x86_64" and _cpu_flags() >= X86_64_V3_FLAGS and _supports_x86_64_v3(version):
        target = "x86-64-v3"
    flags = _BASE_FLAGS + (("-march=x86-64-v3",) if target == "x86-64-v3" else ())
    # -z defs turns a missing symbol into a link error here rather than a load error later.
    link_flags = (("-Wl,-z,defs",) if sys.platform.startswith("linux") else ()) + ("-lm",)
    return Toolchain(
        command=command,
        identity=f"{os.path.realpath(resolved)} {version} {platform.machine()}",
        target=target,
        flags=flags,
        link_flags=link_flags,
        vector_math=_vector_math(target),
    )


def cache_directory() -> Path:
    """``$RELWRITE_CACHE_DIR`` or ``~/.cache/relwrite``, created if needed.

    Raises CompilerUnavailableError when it cannot be created or written to.
    """
    configured = os.environ.get("RELWRITE_CACHE_DIR")
    try:
        directory = Path(configured) if configured else Path.home() / ".cache" / "relwrite"
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except (OSError, RuntimeError) as exc:  # RuntimeError: no home directory to default to
        raise CompilerUnavailableError(
            f"the module cache directory {configured or '~/.cache/relwrite'!r} is not writable ({exc}); "
            "set RELWRITE_CACHE_DIR to a writable directory"
        ) from None
    return directory


class ModuleCache:
    """Compiled modules on disk, by content hash, and the ones loaded in this process.

    `load(source, extra_key)` returns the loaded module, compiling it only when
    no file of that key exists; `compiles` counts compiler runs.
    """

    def __init__(self, directory: Path, toolchain: Toolchain):
        self.directory = Path(directory)
        self.toolchain = toolchain
        self.compiles = 0
        self._loaded: dict[str, ctypes.CDLL] = {}
        self._lock = threading.Lock()

    def key(self, source: str, extra_key: Sequence[str] = ()) -> str:
        """The module's name: a hash of everything that determines the compiled code."""
        chain = self.toolchain
        digest = hashlib.sha256()
        for part in (chain.identity, chain.target, *chain.flags, *chain.link_flags, *extra_key, source):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()[:40]

    def path(self, key: str) -> Path:
        return self.directory / f"rw_{key}.so"

    def load(self, source: str, extra_key: Sequence[str] = ()) -> ctypes.CDLL:
        """The module compiled from `source`, from memory, from disk, or freshly compiled."""
        key = self.key(source, extra_key)
        with self._lock:
            module = self._loaded.get(key)
            if module is None:
                path = self.path(key)
                if not path.exists():
                    self._compile(source, path)
                module = self._loaded[key] = ctypes.CDLL(str(path))
            return module

    def _compile(self, source: str, path: Path) -> None:
        """Compile into a temporary file next to `path`, then rename it there atomically."""
        chain = self.toolchain
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{path.stem}-", suffix=".so.tmp")
        os.close(fd)
        try:
            command = [chain.command, *chain.flags, "-o", tmp, "-x", "c", "-", *chain.link_flags]
            self.compiles += 1
            try:
                run = subprocess.run(command, input=source, capture_output=True, text=True, check=False)
            except OSError as exc:
                raise CompilerUnavailableError(
                    f"the C compiler {chain.command!r} cannot run: {exc}"
                ) from None
            if run.returncode != 0:
                source_path = self._keep_source(path, source)
                raise CompileError(
                    f"{chain.command} failed (exit {run.returncode}) on {source_path}:\n{run.stderr.strip()}"
                )
            self._keep_source(path, source)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _keep_source(self, path: Path, source: str) -> Path:
        """Store the module's C source beside it (atomically too), for reading and debugging."""
        source_path = path.with_suffix(".c")
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{path.stem}-", suffix=".c.tmp")
        with os.fdopen(fd, "w") as handle:
            handle.write(source)
        os.replace(tmp, source_path)
        return source_path


@cache
def default_cache() -> ModuleCache:
    """The process's module cache, in `cache_directory()` with `find_toolchain()`."""
    return ModuleCache(cache_directory(), find_toolchain())

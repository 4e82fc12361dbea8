"""The C toolchain and the disk cache of compiled modules.

Modules are plain shared objects built by one `gcc -shared -fPIC` call and
loaded with ctypes.  The compiler comes from ``$RELWRITE_CC`` (default: `gcc`,
then `cc` on the PATH).  Flags follow what was measured on this project's
target machines: `-O3 -fno-math-errno -fno-trapping-math` lets gcc vectorize
loops that call libm, and glibc's vector math library (libmvec) supplies the
SIMD variants; `-march=x86-64-v4` (AVX-512, at its full 512-bit width) or
`-march=x86-64-v3` is added only when the CPU has every feature of that
level.  `-ffast-math` is never used: gcc then links `crtfastmath.o`, which
makes the whole process flush denormals to zero.  `-ffp-contract=off` keeps
`a*b + c` as two roundings and `-fwrapv` makes signed overflow wrap, as numpy
computes them.

Every compiler run has a time limit (``$RELWRITE_COMPILE_TIMEOUT`` seconds,
default 120): the compiler runs in its own process group, and on timeout the
whole group (gcc's cc1 and as too) is killed and CompileTimeoutError says so.
A compiler that timed out once is not run again in the process: every later
run raises the same CompileTimeoutError at once, so a hung compiler costs
one timeout, not one per module.

The cache (`cache_path()`: ``$RELWRITE_CACHE_DIR``, else
``$XDG_CACHE_HOME/relwrite``, else ``~/.cache/relwrite``) names each
module by a hash of its source, the flags, the compiler's version, the CPU
target and whatever the caller adds (the BLAS integer width, the generator
version).  It trusts nothing it finds on disk: beside each module
``rw_<key>.so`` a manifest ``rw_<key>.json`` records the key it was built for
and the size and sha256 of its bytes, and a module is loaded only when its
bytes match its manifest.  A truncated, garbage or swapped file, a missing
manifest, or a file that verifies but fails to load is deleted and rebuilt,
so a damaged cache heals instead of crashing the process (a truncated shared
object kills a process with SIGBUS when loaded).  Modules and manifests are
written to temporary files in the cache directory and renamed into place
with `os.replace`, never rewritten in place (another process may have the
file mapped); a process builds or deletes a module only while holding
an exclusive `flock` on ``rw_<key>.lock``, so processes compiling the same
module at once compile it once and all load the same file.  A cache
directory that cannot be created or written gives way, after one warning, to
a private temporary directory removed at exit.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path

X86_64_V3_FLAGS = frozenset(
    # /proc/cpuinfo names of the x86-64-v2 features, then AVX, AVX2, BMI1/2, F16C, FMA, LZCNT, MOVBE, XSAVE.
    "cx16 lahf_lm popcnt pni ssse3 sse4_1 sse4_2 avx avx2 bmi1 bmi2 f16c fma abm movbe xsave".split()  # noqa: SIM905
)

X86_64_V4_FLAGS = X86_64_V3_FLAGS | frozenset(
    # AVX-512: foundation, byte/word, conflict detection, doubleword/quadword, vector length extensions.
    "avx512f avx512bw avx512cd avx512dq avx512vl".split()  # noqa: SIM905
)

VECTOR_MATH_FUNCTIONS = (
    *("exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "pow"),
    *("tan", "asin", "acos", "atan", "sinh", "cosh", "cbrt", "hypot", "atan2"),
)
"""libm functions that generated loops call and that libmvec may provide SIMD variants of."""

BINARY_VECTOR_MATH = frozenset({"pow", "hypot", "atan2"})
"""The functions of `VECTOR_MATH_FUNCTIONS` taking two arguments."""

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


_TARGET_FLAGS = {
    "x86-64-v3": ("-march=x86-64-v3",),
    # the whole 512-bit width: gcc's generic tuning would stay at 256 bits
    "x86-64-v4": ("-march=x86-64-v4", "-mprefer-vector-width=512"),
}


class CompilerUnavailableError(RuntimeError):
    """No working C compiler (missing, failing, or its output cannot be cached or loaded)."""


class CompileError(RuntimeError):
    """The compiler rejected a generated module; the message holds its diagnostics."""


class CompileTimeoutError(CompilerUnavailableError):
    """The compiler did not finish within the compile timeout and was killed."""


class CFallbackWarning(UserWarning):
    """The C backend could not be used as configured: NumPy runs instead, or the cache moved."""


PARALLEL_SOURCE_BYTES = 200_000
"""Modules whose source is larger (about 2,500 statements of elementwise loops) are built with the
toolchain's `parallel_flags`: gcc's link-time optimization compiles their functions in parallel
partitions (a 10,000-statement module: 8.8 -> 5.0 s on two cores)."""

DEFAULT_COMPILE_TIMEOUT = 120.0
"""Seconds a compiler run may take when ``$RELWRITE_COMPILE_TIMEOUT`` is not set."""


def compile_timeout() -> float:
    """``$RELWRITE_COMPILE_TIMEOUT`` in seconds (default 120); a ValueError names a value that is not one."""
    text = os.environ.get("RELWRITE_COMPILE_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_COMPILE_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"RELWRITE_COMPILE_TIMEOUT must be a positive number of seconds, got {text!r}")
    return seconds


_timed_out: dict[str, str] = {}
"""The compilers (by command) that timed out in this process, with the error's message."""


def environment_problems() -> list[str]:
    """What is wrong with the ``RELWRITE_*`` settings, one line each naming the variable and its value.

    The library reads each setting when it needs it (a bad timeout then raises
    ValueError, a missing compiler or an unusable cache falls back with a
    warning); the command line checks them all first, so a mistyped setting is
    one line and exit status 2 whatever the command.
    """
    problems = []
    try:
        compile_timeout()
    except ValueError as exc:
        problems.append(str(exc))
    no_c = os.environ.get("RELWRITE_NO_C", "")
    if no_c not in ("", "0", "1"):
        problems.append(f"RELWRITE_NO_C must be 1 (never compile C) or 0, got {no_c!r}")
    compiler = os.environ.get("RELWRITE_CC", "")
    if compiler and shutil.which(compiler) is None:
        problems.append(f"RELWRITE_CC names no program that can run: {compiler!r}")
    cache = os.environ.get("RELWRITE_CACHE_DIR", "")
    if cache and os.path.exists(cache) and not os.path.isdir(cache):
        problems.append(f"RELWRITE_CACHE_DIR is not a directory: {cache!r}")
    return problems


_running: set[subprocess.Popen[str]] = set()
"""The compiler runs in progress in this process (any thread)."""
_running_lock = threading.Lock()


def stop_compilers() -> None:
    """Kill every compiler run in progress in this process, in any thread (after an interrupt).

    A build in another thread then fails at once (and leaves nothing in the
    cache) instead of holding up the interrupted caller that waits for it.
    """
    with _running_lock:
        running = list(_running)
    for process in running:
        with suppress(OSError):  # finished meanwhile
            os.killpg(process.pid, signal.SIGKILL)


def _kill_group(process: subprocess.Popen[str]) -> None:
    """Kill the process and everything it started (its own process group), then reap it."""
    with suppress(OSError):  # the group is gone already
        os.killpg(process.pid, signal.SIGKILL)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with suppress(OSError):  # unwritten input to a dead process
                stream.close()
    process.wait()


def _run_compiler(
    command: Sequence[str], source: str | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run a compiler command with `source` on stdin, killing it and its children after `timeout` seconds.

    Raises CompilerUnavailableError when the command cannot start and
    CompileTimeoutError when it does not finish in time, or did once before in this process.
    """
    earlier = _timed_out.get(command[0])
    if earlier is not None:
        raise CompileTimeoutError(earlier)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if source is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",  # diagnostics in any encoding
            start_new_session=True,  # its own process group, so a timeout kills cc1 and as with it
        )
    except OSError as exc:
        raise CompilerUnavailableError(f"the C compiler {command[0]!r} cannot run ({exc})") from None
    with _running_lock:
        _running.add(process)
    try:
        stdout, stderr = process.communicate(source, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        message = _timed_out[command[0]] = (
            f"the C compiler {command[0]!r} did not finish within the compile timeout of {timeout:g} s "
            "and was killed; it is not run again in this process "
            "(set RELWRITE_COMPILE_TIMEOUT to allow longer)"
        )
        raise CompileTimeoutError(message) from None
    except BaseException:  # an interrupt: leave no compiler behind
        _kill_group(process)
        raise
    finally:
        with _running_lock:
            _running.discard(process)
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


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
    parallel_flags: tuple[str, ...] = ()  # for large modules: code generation split over the CPU's cores


def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return frozenset(match.group(1).split()) if match else frozenset()


def _major_version(version_line: str) -> int:
    """The compiler's major version from its `--version` line (0 when the line names none)."""
    numbers = re.findall(r"(\d+)\.\d+(?:\.\d+)?", version_line)
    return int(numbers[-1]) if numbers else 0


def _supports_x86_64_v3(version_line: str) -> bool:
    """Whether the compiler knows `-march=x86-64-v3` and `-v4` (gcc 11, clang 12 and later)."""
    return _major_version(version_line) >= (12 if "clang" in version_line else 11)


def _vector_math(target: str) -> frozenset[str]:
    """The functions whose libmvec variants for `target` exist, in double and in float."""
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        return frozenset()
    try:
        libmvec = ctypes.CDLL("libmvec.so.1")
    except OSError:
        return frozenset()
    # gcc calls the SSE variant ('b') in loop epilogues, the AVX2 one ('d') when built for x86-64-v3,
    # and the AVX-512 one ('e') too for x86-64-v4.
    variants = {"x86-64-v3": (("b", 2), ("d", 4)), "x86-64-v4": (("b", 2), ("d", 4), ("e", 8))}.get(
        target, (("b", 2),)
    )
    found = set()
    for name in VECTOR_MATH_FUNCTIONS:
        params = "vv" if name in BINARY_VECTOR_MATH else "v"
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
        raise CompilerUnavailableError(
            "no C compiler found: looked for gcc and cc on the PATH; install one or set RELWRITE_CC"
        )
    return found


@cache
def find_toolchain() -> Toolchain:
    """The process's toolchain, found once; raises CompilerUnavailableError naming what is wrong."""
    command = _compiler_command()
    run = _run_compiler([command, "--version"], None, compile_timeout())
    if run.returncode != 0 or not run.stdout.strip():
        raise CompilerUnavailableError(f"the C compiler {command!r} failed to report its version")
    version = run.stdout.strip().splitlines()[0]
    resolved = shutil.which(command) or command
    target = "generic"
    if platform.machine() == "x86_64" and _supports_x86_64_v3(version):
        cpu = _cpu_flags()
        target = "x86-64-v4" if cpu >= X86_64_V4_FLAGS else "x86-64-v3" if cpu >= X86_64_V3_FLAGS else target
    flags = _BASE_FLAGS + _TARGET_FLAGS.get(target, ())
    # -z defs turns a missing symbol into a link error here rather than a load error later.
    link_flags = (("-Wl,-z,defs",) if sys.platform.startswith("linux") else ()) + ("-lm",)
    return Toolchain(
        command=command,
        identity=f"{os.path.realpath(resolved)} {version} {platform.machine()}",
        target=target,
        flags=flags,
        link_flags=link_flags,
        vector_math=_vector_math(target),
        # gcc 10 and later split link-time code generation over the cores (clang's LTO needs a linker plugin)
        parallel_flags=("-flto=auto",) if "clang" not in version and _major_version(version) >= 10 else (),
    )


def cache_path() -> Path:
    """Where relwrite keeps its files: ``$RELWRITE_CACHE_DIR``, else ``$XDG_CACHE_HOME/relwrite``, else
    ``~/.cache/relwrite`` (not created here).

    An `XDG_CACHE_HOME` that is not an absolute path is ignored, as the XDG
    base directory specification says.  Raises RuntimeError when the default
    is needed and there is no home directory.
    """
    configured = os.environ.get("RELWRITE_CACHE_DIR")
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "relwrite"
    return Path.home() / ".cache" / "relwrite"


def cache_directory() -> Path:
    """`cache_path()`, created if needed: where compiled modules go.

    When that path cannot be used (read-only, a regular file, under a regular
    file, no home directory), modules go to a private temporary directory,
    removed at exit, after one CFallbackWarning naming the path and the
    reason.  Raises CompilerUnavailableError only when no directory at all can
    be written.
    """
    wanted = "~/.cache/relwrite"  # the default, when there is no home directory to resolve it
    try:
        directory = cache_path()
        wanted = str(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
        return directory
    except (OSError, RuntimeError) as exc:  # RuntimeError: no home directory to default to
        problem = exc
    try:
        private = Path(tempfile.mkdtemp(prefix="relwrite-cache-"))
    except OSError as exc:
        raise CompilerUnavailableError(
            f"the module cache directory {wanted!r} is not writable ({problem}), "
            f"nor is a temporary directory ({exc}); set RELWRITE_CACHE_DIR to a writable directory"
        ) from None
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    warnings.warn(
        f"relwrite: the module cache directory {wanted!r} is not writable "
        f"({problem}); compiled modules go to the private directory {str(private)!r}, removed at exit, "
        "and are compiled again in every process; set RELWRITE_CACHE_DIR to a writable directory",
        CFallbackWarning,
        stacklevel=2,
    )
    return private


class ModuleCache:
    """Compiled modules on disk, by content hash and verified before loading, and those loaded here.

    `load(source, extra_key)` returns the loaded module, compiling it only when
    no verified file of that key exists; `compiles` counts compiler runs.
    `timeout` bounds each compiler run in seconds (default: `compile_timeout()`
    at each run).
    """

    def __init__(self, directory: Path | str, toolchain: Toolchain, timeout: float | None = None):
        self.directory = Path(directory)
        self.toolchain = toolchain
        self.timeout = timeout
        self.compiles = 0
        self._loaded: dict[str, ctypes.CDLL] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}

    def key(self, source: str, extra_key: Sequence[str] = ()) -> str:
        """The module's name: a hash of everything that determines the compiled code."""
        chain = self.toolchain
        digest = hashlib.sha256()
        for part in (chain.identity, chain.target, *chain.flags, *chain.link_flags, *extra_key, source):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()[:40]

    def path(self, key: str) -> Path:
        """The module file of `key`."""
        return self.directory / f"rw_{key}.so"

    def manifest_path(self, key: str) -> Path:
        """The manifest of `key`'s module: the key, size and sha256 recorded when it was built."""
        return self.directory / f"rw_{key}.json"

    def verify(self, key: str) -> bool:
        """Whether the module file of `key` exists and holds exactly the bytes its manifest records."""
        try:
            manifest = json.loads(self.manifest_path(key).read_text())
            data = self.path(key).read_bytes()
        except (OSError, ValueError):  # missing, unreadable, or not JSON (ValueError covers bad UTF-8)
            return False
        return (
            isinstance(manifest, dict)
            and manifest.get("key") == key
            and manifest.get("size") == len(data)
            and manifest.get("sha256") == hashlib.sha256(data).hexdigest()
        )

    def load(self, source: str, extra_key: Sequence[str] = ()) -> ctypes.CDLL:
        """The module compiled from `source`, from memory, from a verified file, or freshly compiled.

        Raises CompileError when the compiler rejects the source,
        CompilerUnavailableError (CompileTimeoutError on timeout) when it cannot
        build a loadable module, OSError when the cache directory fails.
        """
        key = self.key(source, extra_key)
        with self._lock:
            module = self._loaded.get(key)
            if module is not None:
                return module
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # one build per module; different modules build at once (from threads)
            module = self._loaded.get(key)
            if module is None:
                module = self._load(key, source)
                with self._lock:
                    self._loaded[key] = module
            return module

    def _load(self, key: str, source: str) -> ctypes.CDLL:
        """Load a verified file; else, holding the key's lock, delete what is there, rebuild and load."""
        path = str(self.path(key))
        if self.verify(key):
            try:
                return ctypes.CDLL(path)
            except OSError:  # verifies yet does not load: rebuilt below
                pass
        with self._exclusive(key):
            if self.verify(key):  # another process built it while this one waited
                try:
                    return ctypes.CDLL(path)
                except OSError:
                    pass
            self._discard(key)
            self._compile(source, key)
            try:
                return ctypes.CDLL(path)
            except OSError as exc:
                self._discard(key)
                raise CompilerUnavailableError(f"a freshly compiled module cannot be loaded: {exc}") from None

    @contextmanager
    def _exclusive(self, key: str) -> Iterator[None]:
        """Hold an exclusive lock on `key` across processes (released when the file closes, or at exit).

        On a file system without locks, processes may compile the same module
        at once; renames keep every file whole, and a load that loses the race
        fails cleanly (its nodes then run with NumPy).
        """
        fd = os.open(self.directory / f"rw_{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            with suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _discard(self, key: str) -> None:
        """Delete `key`'s module and manifest (the source is kept for reading)."""
        self.path(key).unlink(missing_ok=True)
        self.manifest_path(key).unlink(missing_ok=True)

    def _compile(self, source: str, key: str) -> None:
        """Compile into a temporary file, record its hash, then rename module and manifest into place."""
        chain, path = self.toolchain, self.path(key)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{path.stem}-", suffix=".so.tmp")
        os.close(fd)
        try:
            with self._lock:
                self.compiles += 1
            timeout = compile_timeout() if self.timeout is None else self.timeout
            attempts = (
                [chain.parallel_flags] if chain.parallel_flags and len(source) > PARALLEL_SOURCE_BYTES else []
            )
            for extra in [*attempts, ()]:  # a toolchain refusing the parallel build builds the module plainly
                command = [chain.command, *chain.flags, *extra, "-o", tmp, "-x", "c", "-", *chain.link_flags]
                run = _run_compiler(command, source, timeout)
                if run.returncode == 0:
                    break
            if run.returncode != 0:
                source_path = self._keep_source(path, source)
                raise CompileError(
                    f"{chain.command} failed (exit {run.returncode}) on {source_path}:\n{run.stderr.strip()}"
                )
            self._keep_source(path, source)
            data = Path(tmp).read_bytes()
            manifest = {"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            os.replace(tmp, path)
            self._write(self.manifest_path(key), json.dumps(manifest))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _keep_source(self, path: Path, source: str) -> Path:
        """Store the module's C source beside it, for reading and debugging."""
        source_path = path.with_suffix(".c")
        self._write(source_path, source)
        return source_path

    def _write(self, path: Path, text: str) -> None:
        """Write `text` to `path` atomically: a temporary file in the directory, then `os.replace`."""
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{path.name}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


@cache
def default_cache() -> ModuleCache:
    """The process's module cache, in `cache_directory()` with `find_toolchain()`.

    The toolchain comes first: without a compiler, the cache directory does not matter (nor warn).
    """
    toolchain = find_toolchain()
    return ModuleCache(cache_directory(), toolchain)

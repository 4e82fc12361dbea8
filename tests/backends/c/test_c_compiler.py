"""The toolchain and the module cache: flags, cache keys and hits, atomic writes, concurrent compiles."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from relwrite.backends.c import CLinker, c_available, compiler
from relwrite.backends.c.compiler import (
    DEFAULT_COMPILE_TIMEOUT,
    CFallbackWarning,
    CompileError,
    CompilerUnavailableError,
    CompileTimeoutError,
    ModuleCache,
    cache_directory,
    compile_timeout,
    find_toolchain,
)
from relwrite.graph import ops
from relwrite.graph.basic import scalar, vector
from relwrite.graph.fg import FunctionGraph

requires_c = pytest.mark.skipif(not c_available(), reason="no working C compiler")

SOURCE = "int rw_answer(void) { return 42; }\n"


@pytest.fixture
def module_cache(tmp_path: Path) -> ModuleCache:
    return ModuleCache(tmp_path, find_toolchain())


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(".")]


# -- toolchain ----------------------------------------------------------------------------------------------


@requires_c
def test_flags_never_use_fast_math():
    chain = find_toolchain()
    flags = chain.flags + chain.link_flags
    assert not [f for f in flags if "fast-math" in f or f == "-Ofast"]
    assert {"-shared", "-fPIC", "-O3", "-fno-math-errno", "-fno-trapping-math"} <= set(flags)


@requires_c
def test_x86_64_v3_and_v4_only_when_the_cpu_has_every_feature(monkeypatch):
    monkeypatch.setattr(compiler, "_cpu_flags", lambda: frozenset({"avx2", "fma", "avx512f"}))
    chain = find_toolchain.__wrapped__()
    assert chain.target == "generic" and not [f for f in chain.flags if f.startswith("-march")]
    if platform.machine() == "x86_64":
        monkeypatch.setattr(compiler, "_cpu_flags", lambda: compiler.X86_64_V3_FLAGS | {"avx512f"})
        chain = find_toolchain.__wrapped__()
        assert chain.target == "x86-64-v3" and "-march=x86-64-v3" in chain.flags
        monkeypatch.setattr(compiler, "_cpu_flags", lambda: compiler.X86_64_V4_FLAGS)
        chain = find_toolchain.__wrapped__()
        assert chain.target == "x86-64-v4" and "-march=x86-64-v4" in chain.flags


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        ("gcc (Debian 12.2.0-14+deb12u1) 12.2.0", True),
        ("gcc (GCC) 11.1.0", True),
        ("gcc (GCC) 10.2.1 20210110", False),
        ("Debian clang version 14.0.6", True),
        ("clang version 11.0.0", False),
        ("cc: some compiler", False),
    ],
)
def test_march_x86_64_v3_needs_gcc_11_or_clang_12(version, supported):
    assert compiler._supports_x86_64_v3(version) is supported


def test_a_missing_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("RELWRITE_CC", "/nonexistent/cc")
    with pytest.raises(CompilerUnavailableError, match=r"'/nonexistent/cc' cannot run"):
        find_toolchain.__wrapped__()


def test_a_failing_compiler_is_a_clear_error(monkeypatch, tmp_path):
    failing = tmp_path / "cc"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(0o755)
    monkeypatch.setenv("RELWRITE_CC", str(failing))
    with pytest.raises(CompilerUnavailableError, match="failed to report its version"):
        find_toolchain.__wrapped__()


def test_the_cache_directory_comes_from_the_environment_and_is_created(monkeypatch, tmp_path):
    wanted = tmp_path / "deep" / "cache"
    monkeypatch.setenv("RELWRITE_CACHE_DIR", str(wanted))
    assert cache_directory() == wanted and wanted.is_dir()
    monkeypatch.delenv("RELWRITE_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_directory() == tmp_path / ".cache" / "relwrite"


def test_the_cache_directory_honours_xdg_cache_home_after_relwrite_cache_dir(monkeypatch, tmp_path):
    """The docs name $XDG_CACHE_HOME/relwrite as the default; the cache used ~/.cache/relwrite regardless."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("RELWRITE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_directory() == tmp_path / "mine"  # RELWRITE_CACHE_DIR first
    monkeypatch.delenv("RELWRITE_CACHE_DIR")
    assert cache_directory() == tmp_path / "xdg" / "relwrite" and (tmp_path / "xdg" / "relwrite").is_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as XDG says
    assert cache_directory() == tmp_path / "home" / ".cache" / "relwrite"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert cache_directory() == tmp_path / "home" / ".cache" / "relwrite"


def test_an_unusable_cache_directory_gives_way_to_a_private_one_with_a_warning(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("RELWRITE_CACHE_DIR", str(blocker / "cache"))  # more cases in test_c_faults.py
    with pytest.warns(
        CFallbackWarning, match=r"not writable.*private directory.*RELWRITE_CACHE_DIR"
    ) as caught:
        directory = cache_directory()
    assert len(caught) == 1 and repr(str(blocker / "cache")) in str(caught[0].message)
    assert directory.is_dir() and directory.parent != blocker and os.access(directory, os.W_OK)
    assert blocker.read_text() == ""


def test_the_compile_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("RELWRITE_COMPILE_TIMEOUT", raising=False)
    assert compile_timeout() == DEFAULT_COMPILE_TIMEOUT == 120
    monkeypatch.setenv("RELWRITE_COMPILE_TIMEOUT", " 2.5 ")
    assert compile_timeout() == 2.5
    for bad in ("soon", "0", "-3", "nan", "inf"):
        monkeypatch.setenv("RELWRITE_COMPILE_TIMEOUT", bad)
        with pytest.raises(ValueError, match=rf"RELWRITE_COMPILE_TIMEOUT must be a positive number.*'{bad}'"):
            compile_timeout()


def sleeping_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """A compiler that reports its version but never finishes compiling (a child sleeps); and its pid file."""
    pids = tmp_path / "pids"
    script = tmp_path / "cc"
    script.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "fakecc 1.0"; exit 0; fi\n'
        f'sleep 1000 &\necho $! > "{pids}"\nwait\n'
    )
    script.chmod(0o755)
    return script, pids


@requires_c
def test_a_compile_that_outlasts_the_timeout_is_killed_with_its_children(tmp_path):
    script, pids = sleeping_compiler(tmp_path)
    chain = dataclasses.replace(find_toolchain(), command=str(script))
    cache = ModuleCache(tmp_path / "cache", chain, timeout=0.5)
    cache.directory.mkdir()
    with pytest.raises(CompileTimeoutError, match=r"did not finish within the compile timeout of 0.5 s"):
        cache.load(SOURCE)
    stat = Path(f"/proc/{int(pids.read_text())}/stat")
    assert _dies_within(stat, seconds=10.0)  # SIGKILL reaches the group's other processes asynchronously
    assert not cache.path(cache.key(SOURCE)).exists() and leftovers(cache.directory) == []


@requires_c
def test_a_compiler_that_timed_out_is_not_run_again_in_the_process(tmp_path):
    script, pids = sleeping_compiler(tmp_path)
    chain = dataclasses.replace(find_toolchain(), command=str(script))
    cache = ModuleCache(tmp_path / "cache", chain, timeout=0.5)
    cache.directory.mkdir()
    with pytest.raises(CompileTimeoutError, match=r"not run again in this process"):
        cache.load(SOURCE)
    pids.unlink()
    other = ModuleCache(tmp_path / "other", chain, timeout=60.0)  # even with a longer timeout
    other.directory.mkdir()
    with pytest.raises(CompileTimeoutError, match=r"timeout of 0.5 s .* not run again in this process"):
        other.load(SOURCE.replace("42", "43"))
    assert not pids.exists()  # the compiler did not start


def _dies_within(stat: Path, seconds: float) -> bool:
    """Whether the process whose /proc stat file is `stat` is gone or a zombie within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


# -- the cache -----------------------------------------------------------------------------------------


@requires_c
def test_a_module_compiles_once_then_loads_from_disk(module_cache, tmp_path):
    assert module_cache.load(SOURCE).rw_answer() == 42
    assert module_cache.load(SOURCE).rw_answer() == 42
    assert module_cache.compiles == 1
    again = ModuleCache(tmp_path, module_cache.toolchain)
    assert again.load(SOURCE).rw_answer() == 42
    assert again.compiles == 0
    assert (tmp_path / f"rw_{module_cache.key(SOURCE)}.c").read_text() == SOURCE


@requires_c
@pytest.mark.parametrize("parallel_flags", [("-flto=auto",), ("-fno-such-flag-anywhere",)])
def test_a_large_module_is_built_in_parallel_or_else_plainly(tmp_path, monkeypatch, parallel_flags):
    """Above PARALLEL_SOURCE_BYTES the toolchain's parallel flags are tried first; a compiler refusing
    them builds the module without them."""
    monkeypatch.setattr(compiler, "PARALLEL_SOURCE_BYTES", 0)
    chain = dataclasses.replace(find_toolchain(), parallel_flags=parallel_flags)
    commands = []
    run = compiler._run_compiler
    monkeypatch.setattr(
        compiler, "_run_compiler", lambda command, *a: commands.append(command) or run(command, *a)
    )
    cache = ModuleCache(tmp_path, chain)
    assert cache.load(SOURCE).rw_answer() == 42
    assert parallel_flags[0] in commands[0]
    refused = parallel_flags[0].startswith("-fno-such")
    assert len(commands) == (2 if refused else 1)
    assert parallel_flags[0] not in commands[-1] or not refused


@pytest.mark.parametrize(
    ("version", "flags"),
    [
        ("gcc (Debian 12.2.0-14) 12.2.0", ("-flto=auto",)),
        ("Debian clang version 14.0.6", ()),
        ("gcc 9.4.0", ()),
    ],
)
def test_only_gcc_10_and_later_builds_in_parallel(monkeypatch, version, flags):
    reply = subprocess.CompletedProcess([], 0, version, "")
    monkeypatch.setattr(compiler, "_run_compiler", lambda *a: reply)
    assert find_toolchain.__wrapped__().parallel_flags == flags  # not the process's cached toolchain


@requires_c
@pytest.mark.parametrize(
    "damage", ["garbage", "another module", "another module and its manifest", "no manifest"]
)
def test_a_damaged_module_file_is_rebuilt_and_never_loaded(module_cache, tmp_path, damage):
    other = "int rw_other(void) { return 7; }\n"
    module_cache.load(SOURCE)
    module_cache.load(other)
    path, other_path = (module_cache.path(module_cache.key(s)) for s in (SOURCE, other))

    def replace(target: Path, data: bytes) -> None:  # never in place: this process has the file mapped
        (tmp_path / "new").write_bytes(data)
        os.replace(tmp_path / "new", target)

    if damage == "garbage":
        replace(path, b"\x7fELF" + os.urandom(2000))
    elif damage.startswith("another module"):
        replace(path, other_path.read_bytes())
        if damage.endswith("manifest"):
            replace(path.with_suffix(".json"), other_path.with_suffix(".json").read_bytes())
    else:
        path.with_suffix(".json").unlink()
    assert not module_cache.verify(module_cache.key(SOURCE))
    again = ModuleCache(tmp_path, module_cache.toolchain)
    assert again.load(SOURCE).rw_answer() == 42
    assert again.compiles == 1 and again.verify(again.key(SOURCE)) and leftovers(tmp_path) == []


@requires_c
def test_the_key_covers_source_flags_compiler_target_and_extra_parts(module_cache):
    chain = module_cache.toolchain
    base = module_cache.key(SOURCE, ("blas-int64",))
    variants = [
        module_cache.key(SOURCE + "\n", ("blas-int64",)),
        module_cache.key(SOURCE, ("blas-int32",)),
        module_cache.key(SOURCE, ()),
    ]
    for change in ({"flags": (*chain.flags, "-g")}, {"identity": "gcc 99"}, {"target": "other"}):
        other = ModuleCache(module_cache.directory, dataclasses.replace(chain, **change))
        variants.append(other.key(SOURCE, ("blas-int64",)))
    assert base not in variants and len(set(variants)) == len(variants)
    assert module_cache.key(SOURCE, ("blas-int64",)) == base


@requires_c
def test_linking_the_same_graph_again_does_not_compile(tmp_path):
    def graph() -> FunctionGraph:
        xi = scalar("x")
        op = ops.Composite([xi], [ops.exp(xi) * 3.0 - xi])
        x = vector("x")
        return FunctionGraph([x], [op(x)])

    first = ModuleCache(tmp_path, find_toolchain())
    linker = CLinker(graph(), cache=first)
    assert first.compiles == 1 and linker.c_nodes
    second = ModuleCache(tmp_path, find_toolchain())
    again = CLinker(graph(), cache=second)
    assert second.compiles == 0 and again.c_nodes
    a = np.linspace(-1, 1, 9)
    np.testing.assert_array_equal(again(a)[0], linker(a)[0])


@requires_c
def test_modules_are_written_to_a_temporary_file_then_renamed(module_cache, tmp_path, monkeypatch):
    renames = []
    real_replace = os.replace

    def spy(src, dst):
        src, dst = Path(src), Path(dst)
        assert not dst.exists()  # nothing was ever written at a final name
        assert src.parent == dst.parent and src.name.startswith(".")
        if dst.suffix == ".so":
            assert src.read_bytes()[:4] == b"\x7fELF"  # complete before it becomes visible
        if dst.suffix == ".json":  # the manifest comes last, and records the bytes now in place
            recorded = json.loads(src.read_text())
            assert recorded["sha256"] == hashlib.sha256(dst.with_suffix(".so").read_bytes()).hexdigest()
        renames.append((src.name, dst.name))
        real_replace(src, dst)

    monkeypatch.setattr(compiler.os, "replace", spy)
    module_cache.load(SOURCE)
    key = module_cache.key(SOURCE)
    assert [dst for _, dst in renames] == [f"rw_{key}.c", f"rw_{key}.so", f"rw_{key}.json"]
    assert leftovers(tmp_path) == [] and module_cache.verify(key)


@requires_c
def test_an_existing_module_file_is_never_written_again(module_cache, tmp_path):
    module_cache.load(SOURCE)
    path = module_cache.path(module_cache.key(SOURCE))
    before = path.stat()
    ModuleCache(tmp_path, module_cache.toolchain).load(SOURCE)
    with pytest.raises(CompileError):
        module_cache.load("int broken(")
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )


@requires_c
def test_compile_errors_carry_the_diagnostics_and_leave_no_module(module_cache, tmp_path):
    with pytest.raises(CompileError, match=r"failed \(exit \d+\) on .*\.c:\n.*error"):
        module_cache.load("int broken(")
    key = module_cache.key("int broken(")
    assert not module_cache.path(key).exists()
    assert (tmp_path / f"rw_{key}.c").exists()  # kept for reading
    assert leftovers(tmp_path) == []


CONCURRENT = textwrap.dedent(
    """
    import sys, time
    from relwrite.backends.c.compiler import ModuleCache, find_toolchain
    cache = ModuleCache(sys.argv[1], find_toolchain())
    start = float(sys.argv[2])
    while time.time() < start:
        pass
    print(cache.load({source!r}).rw_answer(), cache.compiles)
    """
).format(source=SOURCE)


@requires_c
def test_two_processes_compiling_the_same_module_at_once_both_succeed(tmp_path):
    start = time.time() + 4.0
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT, str(tmp_path), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    for run, (out, err) in zip(runs, outputs):
        assert run.returncode == 0, err
        assert out.split()[0] == "42"
    assert sum(int(out.split()[1]) for out, _ in outputs) >= 1
    assert len(list(tmp_path.glob("*.so"))) == 1 and leftovers(tmp_path) == []


@requires_c
def test_threads_build_different_modules_at_once_and_each_module_once(tmp_path):
    """Two modules asked for from threads compile side by side (each compiler run waits, within a
    bound, until the other has started: they overlap only if the cache lets them), and threads
    asking for the same module share one build."""
    import threading

    marks = tmp_path / "marks"
    marks.mkdir()
    real = find_toolchain()
    script = tmp_path / "cc"
    script.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then exec ' + real.command + ' "$@"; fi\n'
        f'touch "{marks}/start.$$"\n'
        f'for i in $(seq 100); do [ $(ls "{marks}" | grep -c start) -ge 2 ] '
        f'&& touch "{marks}/overlap" && break; sleep 0.1; done\n'
        f'exec {real.command} "$@"\n'
    )
    script.chmod(0o755)
    cache = ModuleCache(tmp_path / "cache", dataclasses.replace(real, command=str(script)))
    cache.directory.mkdir()
    sources = [SOURCE, SOURCE.replace("42", "43")]
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda s=s: results.append(cache.load(s).rw_answer())) for s in sources * 2
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [42, 42, 43, 43]
    assert cache.compiles == 2
    assert (marks / "overlap").exists()


@requires_c
def test_prebuild_builds_the_machine_modules_once(tmp_path):
    """`prebuild()` in a fresh process fills an empty cache directory with the runtime, BLAS and
    reductions modules; a second process finds them all and compiles nothing."""
    program = (
        "import relwrite.backends.c as c\n"
        "from relwrite.backends.c.compiler import default_cache\n"
        "assert c.prebuild()\n"
        "print(default_cache().compiles)\n"
    )
    env = dict(os.environ, RELWRITE_CACHE_DIR=str(tmp_path))
    env.pop("RELWRITE_NO_C", None)
    runs = [
        subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    assert int(runs[0].stdout) >= 2 and int(runs[1].stdout) == 0
    assert len(list(tmp_path.glob("rw_*.so"))) == int(runs[0].stdout)

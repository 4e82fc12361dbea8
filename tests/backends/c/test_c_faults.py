"""Fault injection into the C backend: a damaged module cache, a hanging or missing compiler, unusable
cache paths, concurrent compiles.  In every case the process survives, returns the right numbers, and
warns at most once; a damaged cache heals.

Each scenario runs a graph in a fresh interpreter (a crash, such as the SIGBUS of loading a truncated
shared object, is then a failing test and not a dead test run), with its own cache directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from relwrite.backends.c import c_available
from relwrite.backends.c.compiler import ModuleCache, find_toolchain

pytestmark = pytest.mark.skipif(not c_available(), reason="no working C compiler")

# Runs variant argv[1] of a graph with the C linker (from time argv[2] on, if given), checks it against
# numpy, and reports as JSON: whether C was available, how many nodes ran compiled code, whether every
# result was right, the CFallbackWarnings, this process's compiler runs, and each role's module file.
SCRIPT = textwrap.dedent(
    """
    import json, sys, time, warnings
    import numpy as np

    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        from relwrite.backends.c import CFallbackWarning, CLinker, c_available
        from relwrite.backends.c.blas import find_blas
        from relwrite.backends.c.codegen import GENERATOR_VERSION, blas_source, ndarray_layout, runtime_source
        from relwrite.backends.c.compiler import default_cache
        from relwrite.backends.c.linker import _reductions_build
        from relwrite.graph import ops
        from relwrite.graph.basic import matrix, scalar, vector
        from relwrite.graph.fg import FunctionGraph

        variant = int(sys.argv[1])
        if len(sys.argv) > 2:  # imported: start compiling at that instant, with other processes
            while time.time() < float(sys.argv[2]):
                pass
        elementwise = [
            (lambda x, y, lib: lib.tanh(lib.exp(x) * y) + 1.5),
            (lambda x, y, lib: lib.sin(x) * y - 2.0),
        ][variant]
        xi, yi = scalar("x"), scalar("y")
        loop = ops.Composite([xi, yi], [elementwise(xi, yi, ops)])
        x, y = vector("x"), vector("y")
        a, X, Y, b, Z = scalar("a"), matrix("X"), matrix("Y"), scalar("b"), matrix("Z")
        linker = CLinker(FunctionGraph([x, y, a, X, Y, b, Z], [loop(x, y), ops.gemm(Z, a, X, Y, b)]))
        rng = np.random.default_rng(variant)
        xv, yv = rng.standard_normal(50), rng.standard_normal(50)
        av, bv = np.array(1.5), np.array(-0.5)
        Xv, Yv, Zv = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
        got = linker(xv, yv, av, Xv, Yv, bv, Zv)
        want = [elementwise(xv, yv, np), av * (Xv @ Yv) + bv * Zv]
        correct = all(np.allclose(g, w, rtol=1e-12, atol=1e-12) for g, w in zip(got, want))
        report = {
            "available": c_available(),
            "compiled": len(linker.c_nodes),
            "correct": bool(correct),
            "warnings": [str(w.message) for w in caught if issubclass(w.category, CFallbackWarning)],
        }
    if report["available"]:
        cache = default_cache()
        roles = {
            "runtime": cache.key(runtime_source(ndarray_layout()), (GENERATOR_VERSION,)),
            "blas": cache.key(
                blas_source(ndarray_layout(), find_blas().int_bits),
                (GENERATOR_VERSION, f"blas-int{find_blas().int_bits}"),
            ),
            "reductions": cache.key(*_reductions_build(cache)),
        }
        (roles["graph"],) = set(cache._loaded) - set(roles.values())
        report["compiles"] = cache.compiles
        report["modules"] = {role: str(cache.path(key)) for role, key in roles.items()}
    print(json.dumps(report))
    """
)


def run(cache: Path, variant: int = 0, timeout: float = 120, **env: str) -> dict:
    """Run the script in a fresh interpreter; it must exit normally (not crash, not hang)."""
    environment = {**os.environ, "RELWRITE_CACHE_DIR": str(cache), **env}
    for name in ("RELWRITE_NO_C", "RELWRITE_CC", "RELWRITE_COMPILE_TIMEOUT"):
        if name not in env:
            environment.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(variant)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
    )
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr}"
    return json.loads(done.stdout)


def assert_correct_with_c(report: dict, compiles: int | None = None) -> None:
    assert report["available"] and report["correct"] and report["warnings"] == []
    assert report["compiled"] == 2  # the elementwise loop and the Gemm
    if compiles is not None:
        assert report["compiles"] == compiles


def assert_consistent(cache: Path) -> None:
    """Every module file holds the bytes its manifest records for its key, and no temporary file is left."""
    modules = sorted(cache.glob("rw_*.so"))
    assert modules
    for module in modules:
        manifest = json.loads(module.with_suffix(".json").read_text())
        assert manifest["key"] == module.stem.removeprefix("rw_")
        assert manifest["size"] == module.stat().st_size
    checker = ModuleCache(cache, find_toolchain())
    assert all(checker.verify(module.stem.removeprefix("rw_")) for module in modules)
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    """A cache holding the runtime, the BLAS module and both graph variants; their reports."""
    cache = tmp_path_factory.mktemp("warm") / "cache"
    first, second = run(cache, 0), run(cache, 1)
    assert_correct_with_c(first)
    assert_correct_with_c(second, compiles=1)  # its own graph module only
    return cache, first["modules"], second["modules"]


@pytest.fixture
def cache(warm_cache: tuple[Path, dict, dict], tmp_path: Path) -> tuple[Path, dict, dict]:
    """A copy of the warm cache for one test to damage, and the module paths of both variants in it."""
    template, first, second = warm_cache
    copy = tmp_path / "cache"
    shutil.copytree(template, copy)

    def moved(modules: dict) -> dict:
        return {role: copy / Path(path).name for role, path in modules.items()}

    return copy, moved(first), moved(second)


# -- a damaged cache heals --------------------------------------------------------------------------------


def truncate(path: Path, other: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)  # in place, as a full disk or a killed writer leaves it


def garbage(path: Path, other: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def empty(path: Path, other: Path) -> None:
    path.write_bytes(b"")


def swap(path: Path, other: Path) -> None:
    shutil.copyfile(other, path)  # a valid module, of another graph


def swap_with_manifest(path: Path, other: Path) -> None:
    shutil.copyfile(other, path)
    shutil.copyfile(other.with_suffix(".json"), path.with_suffix(".json"))


def drop_manifest(path: Path, other: Path) -> None:
    path.with_suffix(".json").unlink()


def garble_manifest(path: Path, other: Path) -> None:
    path.with_suffix(".json").write_bytes(b"\xff{not json")


FAULTS = [truncate, garbage, empty, swap, swap_with_manifest, drop_manifest, garble_manifest]
DAMAGE = [("graph", fault) for fault in FAULTS]
DAMAGE += [("runtime", fault) for fault in (truncate, garbage, swap, drop_manifest)]  # graph-independent
DAMAGE += [(role, fault) for role in ("blas", "reductions") for fault in (truncate, swap)]


@pytest.mark.parametrize(
    ("role", "fault"), DAMAGE, ids=[f"{role}-{fault.__name__}" for role, fault in DAMAGE]
)
def test_a_damaged_module_is_rebuilt_never_loaded(cache, role, fault):
    directory, modules, others = cache
    damaged = modules[role]
    # Swap in a module of another role (or the other variant's graph): valid, loadable, and wrong.
    other = others["graph"] if role == "graph" else modules["graph"]
    fault(damaged, other)
    report = run(directory, 0)
    assert_correct_with_c(report, compiles=1)  # the damaged module alone, rebuilt
    assert report["modules"][role] == str(damaged)
    assert_consistent(directory)  # healed for good: every module verifies


def test_a_module_that_verifies_but_does_not_load_is_rebuilt(cache):
    directory, modules, _ = cache
    module = modules["graph"]
    bogus = b"not a shared object"
    module.write_bytes(bogus)
    manifest = json.loads(module.with_suffix(".json").read_text())
    manifest.update(size=len(bogus), sha256=hashlib.sha256(bogus).hexdigest())
    module.with_suffix(".json").write_text(json.dumps(manifest))
    assert_correct_with_c(run(directory, 0), compiles=1)
    assert_consistent(directory)


# -- the compiler: hanging, missing -------------------------------------------------------------------------

HANGING = """#!/bin/sh
if [ "$1" = "--version" ]; then
    {version}
fi
sleep 1000 &
echo $! >> "{pids}"
wait
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie is dead, whoever reaps it


def all_dead_within(pids: list[int], seconds: float) -> bool:
    """Whether every process in `pids` is dead within `seconds` (SIGKILL to a group lands asynchronously)."""
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("where", ["compiling", "reporting its version"])
def test_a_compiler_that_never_returns_is_killed_after_the_timeout(tmp_path, where):
    pids = tmp_path / "pids"
    version = (
        'echo "fakecc 1.0"; exit 0' if where == "compiling" else 'sleep 1000 & echo $! >> "{pids}"; wait'
    )
    compiler = tmp_path / "cc"
    compiler.write_text(HANGING.format(version=version.format(pids=pids), pids=pids))
    compiler.chmod(0o755)
    report = run(tmp_path / "cache", timeout=60, RELWRITE_CC=str(compiler), RELWRITE_COMPILE_TIMEOUT="1")
    assert report["available"] is False and report["compiled"] == 0 and report["correct"]
    assert len(report["warnings"]) == 1, report["warnings"]
    assert "compile timeout of 1 s" in report["warnings"][0] and "NumPy backend" in report["warnings"][0]
    started = [int(line) for line in pids.read_text().split()]
    assert started and all_dead_within(started, seconds=10.0)  # the compiler's children were killed too


# Compiles the graph-independent modules with a working compiler, then makes it hang (the file `hang`)
# with a compile timeout of 1 s, and compiles two graphs with `function`: reports each call's seconds,
# the compiler runs during each (one log line per run), the results' correctness and the CFallbackWarnings.
HANG_LATER_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time, warnings
    from pathlib import Path
    import numpy as np

    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        import relwrite as rw
        from relwrite.backends.c import CFallbackWarning, prebuild

        log, hang = Path(sys.argv[1]), Path(sys.argv[2])
        assert prebuild()
        hang.touch()
        os.environ["RELWRITE_COMPILE_TIMEOUT"] = "1"
        x, v = rw.vector("x"), np.linspace(-1.0, 1.0, 5)
        report = {"seconds": [], "runs": [], "correct": []}
        for expression, numpy_form in [
            (rw.exp(x) * 2.0 + x, np.exp(v) * 2.0 + v),
            (rw.tanh(x) * 3.0 - x, np.tanh(v) * 3.0 - v),
        ]:
            runs, start = len(log.read_text().splitlines()), time.monotonic()
            f = rw.function([x], expression, mode="fast_run")
            report["seconds"].append(time.monotonic() - start)
            report["runs"].append(len(log.read_text().splitlines()) - runs)
            report["correct"].append(bool(np.allclose(f(v), numpy_form, rtol=1e-12)))
        report["warnings"] = [str(w.message) for w in caught if issubclass(w.category, CFallbackWarning)]
    print(json.dumps(report))
    """
)


def test_a_compiler_that_hangs_is_not_run_again_after_one_timeout(tmp_path):
    log, hang = tmp_path / "runs", tmp_path / "hang"
    compiler = tmp_path / "cc"
    compiler.write_text(
        f'#!/bin/sh\necho "$@" >> "{log}"\n'
        f'if [ -e "{hang}" ] && [ "$1" != "--version" ]; then exec sleep 1000; fi\n'
        f'exec {find_toolchain().command} "$@"\n'
    )
    compiler.chmod(0o755)
    log.touch()
    environment = {
        **os.environ,
        "RELWRITE_CACHE_DIR": str(tmp_path / "cache"),
        "RELWRITE_CC": str(compiler),
    }
    for name in ("RELWRITE_NO_C", "RELWRITE_COMPILE_TIMEOUT"):
        environment.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", HANG_LATER_SCRIPT, str(log), str(hang)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=240,  # a guard: each graph compiled afresh after its own 1 s timeout, it still ends
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["correct"] == [True, True]  # both run with NumPy
    assert report["runs"] == [1, 0]  # the first graph's module timed out; the second never ran the compiler
    assert report["seconds"][0] < 1 + 30  # the timeout, and a generous guard for a loaded machine
    assert len(report["warnings"]) == 1, report["warnings"]
    assert "not run again in this process" in report["warnings"][0]


@pytest.mark.parametrize("how", ["a nonexistent RELWRITE_CC", "no gcc or cc on the PATH"])
def test_no_compiler_runs_numpy_with_one_warning(tmp_path, how):
    if how == "a nonexistent RELWRITE_CC":
        env, reason = {"RELWRITE_CC": str(tmp_path / "no-such-cc")}, "no-such-cc' cannot run"
    else:
        (tmp_path / "bin").mkdir()
        env, reason = (
            {"PATH": str(tmp_path / "bin")},
            "no C compiler found: looked for gcc and cc on the PATH",
        )
    report = run(tmp_path / "cache", **env)
    assert report["available"] is False and report["compiled"] == 0 and report["correct"]
    assert len(report["warnings"]) == 1 and reason in report["warnings"][0], report["warnings"]
    assert "NumPy backend" in report["warnings"][0]


# -- unusable cache paths ---------------------------------------------------------------------------------


def under_a_regular_file(tmp_path: Path) -> Path:
    (tmp_path / "a-file").write_text("")
    return tmp_path / "a-file" / "cache"


def a_regular_file(tmp_path: Path) -> Path:
    (tmp_path / "a-file").write_text("")
    return tmp_path / "a-file"


def a_directory_nobody_may_write(tmp_path: Path) -> Path:
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    return Path("/proc")  # not even root may create files there


def a_read_only_directory(tmp_path: Path) -> Path:
    if os.geteuid() == 0:
        pytest.skip("root writes to read-only directories (a_directory_nobody_may_write covers it)")
    directory = tmp_path / "read-only"
    directory.mkdir()
    directory.chmod(0o555)
    return directory


@pytest.mark.parametrize(
    "unusable", [under_a_regular_file, a_regular_file, a_directory_nobody_may_write, a_read_only_directory]
)
def test_an_unusable_cache_path_runs_c_from_a_private_directory_with_one_warning(tmp_path, unusable):
    path = unusable(tmp_path)
    report = run(path)
    assert report["available"] and report["correct"] and report["compiled"] == 2
    assert len(report["warnings"]) == 1, report["warnings"]
    assert repr(str(path)) in report["warnings"][0] and "not writable" in report["warnings"][0]
    private = Path(report["modules"]["graph"]).parent
    assert private != path and not private.exists()  # removed at exit


# -- concurrency ------------------------------------------------------------------------------------------


def test_four_processes_compiling_the_same_new_graph_at_once_all_succeed_and_agree(tmp_path):
    cache = tmp_path / "cache"
    environment = {**os.environ, "RELWRITE_CACHE_DIR": str(cache)}
    for name in ("RELWRITE_NO_C", "RELWRITE_CC", "RELWRITE_COMPILE_TIMEOUT"):
        environment.pop(name, None)
    start = time.time() + 5.0
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, "0", str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        for _ in range(4)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    reports = []
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, err
        reports.append(json.loads(out))
    for report in reports:
        assert_correct_with_c(report)
        assert report["modules"] == reports[0]["modules"]
    assert sum(report["compiles"] for report in reports) == 4  # runtime, BLAS, reductions, graph: each once
    assert len(list(cache.glob("rw_*.so"))) == 4
    assert_consistent(cache)

"""relwrite's compiled functions against numpy, hand-written C, one dgemm call and PyTensor, in one run.

Seven measurements, each printed with its ratio, its goal and whether the goal is met:

(a) a 20-op elementwise expression (exp, sin, tanh, sqrt, abs, + - * /) on two float64 vectors
    of 1e6 elements: `relwrite.function(mode="fast_run")` (one fused Composite loop) against
    numpy (20 ufunc calls), a hand-written fused C loop built with the same compiler and flags
    as relwrite's modules (the host's ISA), and PyTensor's default mode.  Goals: <= 1.1x the
    hand-written loop, >= 4x faster than PyTensor.
(b) `a * (X @ Y) + b * Z` on n x n float64 matrices (n = 512, 2048): relwrite (one Gemm) against
    one direct dgemm call into numpy's OpenBLAS through ctypes (Z copied first, as Gemm is out
    of place) and numpy.  Goal: within 3% of the direct call.
(c) per-call overhead of a scalar add, with input checks and with `trust_input=True`, against
    PyTensor's, with 0-d arrays, Python floats and numpy scalars.  Goal: <= 1 us with input checks.
(d) compile time (rewrite + link) of a 3-layer MLP forward graph (dot + bias, tanh, softmax, log,
    mean), each in a fresh process: the modules built once per machine (runtime, BLAS,
    reductions: `relwrite.backends.c.prebuild()` in an empty RELWRITE_CACHE_DIR), reported
    apart; cold (a cache directory holding only those) against jax.jit's compile of the same
    MLP when jax is installed; and from the cache (a second process on the same directory).
    Imports and graph building are not timed.  Goals: cold <= 0.5x jax.jit, <= 20 ms from
    the cache, <= 5 ms for a warm compile (the same graph again in the same process).
(e) softmax of the rows of a 1000x1000 float64 matrix in one thread (a fresh process with
    OMP/OpenBLAS/XLA limited to one thread): relwrite against jax.jit (x64) and numpy.
    Goal: <= 1.1x jax.

(f) a loss reduced to one number, mean((x - y) ** 2 * 0.5 + abs(x)) on two float64 vectors of 1e7
    elements, in one thread (a fresh process, as (e)): relwrite (the loop and its mean in one kernel,
    no 1e7-element array stored) against the same graph with the mean apart from its loop, numpy and
    jax.jit (x64, when installed).
    Goals: <= 0.75x relwrite's unfused time, <= 1x numpy's.

(g) memory of the NumPy fallback: the expression of (a) on two float64 vectors of 1e7 elements, each
    path in a fresh process: the peak resident memory a call adds (the kernel's output included),
    with the C backend (fast_run), with the NumPy linker (the fallback without a C compiler, which
    runs the fused Composite op by op) and with numpy's 20 ufunc calls.  Goal: the fallback's peak
    <= 3x the C path's.

Times are the best of `--repeat` rounds; in each round every contender runs once, in turn, so
load drifts hit all alike.  `--quick` shrinks the sizes (for a smoke run; goals then mean little).

    python benchmarks/eval.py
    python benchmarks/eval.py --repeat 15
    python benchmarks/eval.py --quick
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import relwrite as rw
from relwrite.backends.c import c_available
from relwrite.backends.c.blas import find_blas
from relwrite.backends.c.compiler import ModuleCache, find_toolchain
from relwrite.compile.function import Mode
from relwrite.graph import ops

warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")
try:
    import pytensor
    import pytensor.tensor as pt
except ImportError:
    pytensor = pt = None

# -- timing and reporting ---------------------------------------------------------------------------------


def interleaved(fns: list[Callable[[], Any]], repeat: int, number: int = 1) -> list[float]:
    """Best seconds per call of each function over `repeat` rounds, the functions taking turns."""
    for fn in fns:  # warm up: caches, lazy imports, first-touch page faults
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            best[k] = min(best[k], (time.perf_counter() - start) / number)
    return best


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.3f} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:7.3f} us"


def line(label: str, measured: str, ratio: str = "", goal: str = "", met: bool | None = None) -> None:
    verdict = "" if met is None else ("met" if met else "NOT met")
    print(f"  {label:<40s} {measured:>14s}  {ratio:<28s} {goal:<22s} {verdict}")


# -- (a) a 20-op elementwise expression -------------------------------------------------------------------


def expression20(x: Any, y: Any, lib: Any) -> Any:
    """20 operations (counted on the right) built with relwrite, numpy or PyTensor operators."""
    t1 = lib.exp(1.0 - lib.abs(x))  # 3
    t2 = lib.sin(y) * 0.5  # 5
    t3 = lib.tanh(x * y)  # 7
    t4 = lib.sqrt(lib.abs(t2) + 1.0)  # 10
    t6 = t3 - t1 / t4  # 12
    t7 = t6 * t6 + x  # 14
    t8 = lib.sin(t7) / (1.0 + lib.abs(y))  # 18
    return t8 - lib.tanh(t1)  # 20


HAND_WRITTEN = r"""
#include <math.h>
#include <stddef.h>
double exp(double) __attribute__((simd("notinbranch")));
double sin(double) __attribute__((simd("notinbranch")));
double tanh(double) __attribute__((simd("notinbranch")));
void hand(ptrdiff_t n, double *restrict out, const double *restrict x, const double *restrict y) {
    for (ptrdiff_t i = 0; i < n; i++) {
        const double a = x[i], b = y[i];
        const double t1 = exp(1.0 - fabs(a));
        const double t2 = sin(b) * 0.5;
        const double t3 = tanh(a * b);
        const double t4 = sqrt(fabs(t2) + 1.0);
        const double t6 = t3 - t1 / t4;
        const double t7 = t6 * t6 + a;
        const double t8 = sin(t7) / (1.0 + fabs(b));
        out[i] = t8 - tanh(t1);
    }
}
"""


def hand_written_loop(directory: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The expression as one C loop, compiled like relwrite's modules; returns a fresh array per call."""
    hand = ModuleCache(directory, find_toolchain()).load(HAND_WRITTEN).hand
    hand.argtypes = [ctypes.c_ssize_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    hand.restype = None

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np.empty_like(a)
        hand(a.size, out.ctypes.data, a.ctypes.data, b.ctypes.data)
        return out

    return run


def bench_elementwise(size: int, repeat: int) -> None:
    chain = find_toolchain()
    print(f"(a) 20-op elementwise expression on {size:.0e} float64 (target {chain.target})")
    x, y = rw.vector("x"), rw.vector("y")
    fn = rw.function([x, y], expression20(x, y, ops), mode="fast_run")
    composites = [n for n in fn.fgraph.toposort() if isinstance(n.op, ops.Composite)]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(size), rng.standard_normal(size)
    reference = expression20(a, b, np)
    contenders: dict[str, Callable[[], Any]] = {
        "relwrite fast_run": lambda: fn(a, b),
        "numpy": lambda: expression20(a, b, np),
    }
    with tempfile.TemporaryDirectory() as directory:
        hand = hand_written_loop(directory)
        contenders["hand-written fused C loop"] = lambda: hand(a, b)
        if pt is not None:
            px, py = pt.dvector("x"), pt.dvector("y")
            pt_fn = pytensor.function([px, py], expression20(px, py, pt))
            contenders["PyTensor default mode"] = lambda: pt_fn(a, b)
        for name, run in contenders.items():
            error = np.max(np.abs(run() - reference))
            if error > 1e-12:
                print(f"  warning: {name} differs from numpy by {error:.2e}")
        times = dict(zip(contenders, interleaved(list(contenders.values()), repeat)))
    ours = times["relwrite fast_run"]
    line(f"relwrite fast_run ({len(fn.fgraph.apply_nodes)} node, {len(composites)} Composite)", ms(ours))
    line("numpy", ms(times["numpy"]), f"numpy/relwrite = {times['numpy'] / ours:.2f}x")
    hand_time = times["hand-written fused C loop"]
    ratio = ours / hand_time
    line("hand-written fused C loop", ms(hand_time), f"relwrite/hand = {ratio:.3f}", "<= 1.1", ratio <= 1.1)
    if "PyTensor default mode" in times:
        pt_time = times["PyTensor default mode"]
        speedup = pt_time / ours
        line(
            "PyTensor default mode", ms(pt_time), f"PyTensor/relwrite = {speedup:.2f}x", ">= 4x", speedup >= 4
        )
    else:
        line("PyTensor default mode", "not installed")


# -- (b) a * (X @ Y) + b * Z -------------------------------------------------------------------------------

CBLAS_ROW_MAJOR, CBLAS_NO_TRANS = 101, 111


def direct_dgemm() -> Callable[[float, np.ndarray, np.ndarray, float, np.ndarray], np.ndarray]:
    """One cblas dgemm call into the OpenBLAS relwrite's C backend uses, on a copy of Z."""
    blas = find_blas()
    if blas is None:
        raise SystemExit("no CBLAS found: (b) needs numpy's OpenBLAS or scipy-openblas32")
    blas_int = ctypes.c_int64 if blas.int_bits == 64 else ctypes.c_int32
    pointer, double, enum = ctypes.c_void_p, ctypes.c_double, ctypes.c_int
    dgemm = ctypes.CFUNCTYPE(
        None, enum, enum, enum, blas_int, blas_int, blas_int, double, pointer, blas_int,
        pointer, blas_int, double, pointer, blas_int,
    )(blas.addresses[0])  # fmt: skip

    def run(alpha: float, x: np.ndarray, y: np.ndarray, beta: float, z: np.ndarray) -> np.ndarray:
        out = z.copy()
        m, k = x.shape
        n = y.shape[1]
        dgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, m, n, k, alpha, x.ctypes.data, k,
              y.ctypes.data, n, beta, out.ctypes.data, n)  # fmt: skip
        return out

    return run


def bench_gemm(sizes: tuple[int, ...], repeat: int) -> None:
    blas = find_blas()
    library = os.path.basename(blas.path) if blas else "none"
    print(f"(b) a * (X @ Y) + b * Z, float64 ({library}, {blas.int_bits if blas else '?'}-bit integers)")
    a, b = rw.scalar("a"), rw.scalar("b")
    x, y, z = rw.matrix("X"), rw.matrix("Y"), rw.matrix("Z")
    fn = rw.function([a, x, y, b, z], a * (x @ y) + b * z, mode="fast_run")
    graph = ", ".join(type(n.op).__name__ for n in fn.fgraph.toposort())
    dgemm = direct_dgemm()
    rng = np.random.default_rng(0)
    for n in sizes:
        bench_gemm_size(fn, graph, dgemm, rng, n, repeat)


def bench_gemm_size(
    fn: Any, graph: str, dgemm: Callable[..., np.ndarray], rng: Any, n: int, repeat: int
) -> None:
    xv, yv, zv = (rng.standard_normal((n, n)) for _ in range(3))
    alpha, beta = np.array(1.5), np.array(0.5)
    reference = 1.5 * (xv @ yv) + 0.5 * zv
    for result in (fn(alpha, xv, yv, beta, zv), dgemm(1.5, xv, yv, 0.5, zv)):
        np.testing.assert_allclose(result, reference, rtol=1e-10, atol=1e-10 * n)
    t_ours, t_direct, t_numpy = interleaved(
        [
            lambda: fn(alpha, xv, yv, beta, zv),
            lambda: dgemm(1.5, xv, yv, 0.5, zv),
            lambda: 1.5 * (xv @ yv) + 0.5 * zv,
        ],
        repeat,
        number=5 if n <= 512 else 1,
    )
    ratio = t_ours / t_direct
    line(f"n={n}: relwrite fast_run ({graph})", ms(t_ours))
    line(
        f"n={n}: copy Z + one dgemm call",
        ms(t_direct),
        f"relwrite/dgemm = {ratio:.3f}",
        "<= 1.03",
        ratio <= 1.03,
    )
    line(f"n={n}: numpy", ms(t_numpy), f"numpy/relwrite = {t_numpy / t_ours:.2f}x")


# -- (c) per-call overhead ---------------------------------------------------------------------------------


def bench_overhead(repeat: int) -> None:
    print("(c) per-call overhead of a scalar add (x + y, float64 0-d)")
    x, y = rw.scalar("x"), rw.scalar("y")
    checked = rw.function([x, y], x + y, mode="fast_run")
    trusted = rw.function([x, y], x + y, mode="fast_run", trust_input=True)
    u, v = np.array(1.0), np.array(2.0)
    a, b = np.float64(1.0), np.float64(2.0)
    number = 20000
    checked_kinds = {
        "relwrite, input checks (0-d arrays)": lambda: checked(u, v),
        "relwrite, input checks (Python floats)": lambda: checked(1.0, 2.0),
        "relwrite, input checks (numpy scalars)": lambda: checked(a, b),
    }
    contenders: dict[str, Callable[[], Any]] = {
        **checked_kinds,
        "relwrite, trust_input=True": lambda: trusted(u, v),
        "numpy np.add(x, y)": lambda: np.add(u, v),
    }
    if pt is not None:
        px, py = pt.dscalar("x"), pt.dscalar("y")
        pt_checked = pytensor.function([px, py], px + py)
        pt_trusted = pytensor.function([px, py], px + py)
        pt_trusted.trust_input = True
        contenders["PyTensor, input checks (0-d arrays)"] = lambda: pt_checked(u, v)
        contenders["PyTensor, trust_input=True"] = lambda: pt_trusted(u, v)
    times = dict(zip(contenders, interleaved(list(contenders.values()), repeat, number)))
    ours = times["relwrite, input checks (0-d arrays)"]
    pt_checked_time = times.get("PyTensor, input checks (0-d arrays)")
    for kind in checked_kinds:
        versus = f"PyTensor/relwrite = {pt_checked_time / times[kind]:.2f}x" if pt_checked_time else ""
        line(kind, us(times[kind]), versus, "<= 1 us", times[kind] <= 1e-6)
    ours_trusted = times["relwrite, trust_input=True"]
    pt_trusted_time = times.get("PyTensor, trust_input=True")
    versus = f"PyTensor/relwrite = {pt_trusted_time / ours_trusted:.2f}x" if pt_trusted_time else ""
    line("relwrite, trust_input=True", us(ours_trusted), versus)
    line(
        "numpy np.add(x, y)",
        us(times["numpy np.add(x, y)"]),
        f"relwrite/numpy = {ours / times['numpy np.add(x, y)']:.1f}x",
    )
    if pt is None:
        line("PyTensor", "not installed")
    else:
        line("PyTensor, input checks (0-d arrays)", us(pt_checked_time))
        line("PyTensor, trust_input=True", us(pt_trusted_time))


# -- (d) compile time --------------------------------------------------------------------------------------

COMPILE_IN_A_FRESH_PROCESS = r"""
import time
import relwrite as rw
import relwrite.backends.c  # imported here so that the timing below is rewriting and linking only

def mlp():
    X = rw.matrix("X")
    layers = [(rw.matrix(f"W{k}"), rw.vector(f"b{k}")) for k in (1, 2, 3)]
    h = X
    for k, (W, b) in enumerate(layers):
        h = rw.dot(h, W) + b
        h = rw.tanh(h) if k < 2 else h
    return [X, *(v for layer in layers for v in layer)], -rw.mean(rw.log(rw.softmax(h)))

inputs, loss = mlp()
start = time.perf_counter()
fn = rw.function(inputs, loss, mode="fast_run")
elapsed = time.perf_counter() - start
inputs, loss = mlp()  # the same graph built again: a warm compile
start = time.perf_counter()
rw.function(inputs, loss, mode="fast_run")
warm = time.perf_counter() - start
print(elapsed, len(fn.fgraph.apply_nodes), len(fn.linker.c_nodes), warm)
"""


PREBUILD_IN_A_FRESH_PROCESS = r"""
import time
import relwrite.backends.c as c
start = time.perf_counter()
assert c.prebuild()
print(time.perf_counter() - start)
"""

JAX_COMPILE_IN_A_FRESH_PROCESS = r"""
import time
import jax
import jax.numpy as jnp
import numpy as np

def loss(X, W1, b1, W2, b2, W3, b3):
    h = jnp.tanh(X @ W1 + b1)
    h = jnp.tanh(h @ W2 + b2)
    return -jnp.mean(jax.nn.log_softmax(h @ W3 + b3))

shapes = [(64, 32), (32, 32), (32,), (32, 32), (32,), (32, 10), (10,)]
args = [np.ones(s) for s in shapes]
start = time.perf_counter()
jax.jit(loss).lower(*args).compile()
print(time.perf_counter() - start)
"""


def run_fresh(program: str, cache_dir: str) -> list[str]:
    """The words `program` prints, run in a new interpreter on the cache directory `cache_dir`."""
    env = dict(os.environ, RELWRITE_CACHE_DIR=cache_dir)
    env.pop("RELWRITE_NO_C", None)
    run = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
    return run.stdout.split()


def bench_compile(repeat: int) -> None:
    print("(d) compile time (rewrite + link) of a 3-layer MLP forward graph, fresh process each")
    machine = tempfile.mkdtemp(prefix="relwrite-machine-")
    try:
        built = float(run_fresh(PREBUILD_IN_A_FRESH_PROCESS, machine)[0])
        cold, cached, warm = float("inf"), float("inf"), float("inf")
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as cache_dir:
                shutil.copytree(machine, cache_dir, dirs_exist_ok=True)
                seconds, nodes, compiled, again = run_fresh(COMPILE_IN_A_FRESH_PROCESS, cache_dir)
                cold, warm = min(cold, float(seconds)), min(warm, float(again))
                cached = min(cached, float(run_fresh(COMPILE_IN_A_FRESH_PROCESS, cache_dir)[0]))
    finally:
        shutil.rmtree(machine, ignore_errors=True)
    jax_cold = None
    if jax_installed():
        jax_cold = min(float(run_fresh(JAX_COMPILE_IN_A_FRESH_PROCESS, machine)[0]) for _ in range(repeat))
    print(f"  ({nodes} nodes after rewriting, {compiled} running compiled code)")
    line("modules built once per machine", ms(built), "runtime, BLAS, reductions, at once")
    versus = f"relwrite/jax = {cold / jax_cold:.2f}x" if jax_cold else "jax not installed"
    line(
        "cold (the graph's own kernels)",
        ms(cold),
        versus,
        "<= 0.5x jax.jit",
        cold <= 0.5 * jax_cold if jax_cold else None,
    )
    if jax_cold:
        line("jax.jit(...).lower().compile()", ms(jax_cold))
    line(
        "from the cache (second process)",
        ms(cached),
        f"cold/cached = {cold / cached:.1f}x",
        "<= 20 ms",
        cached <= 0.02,
    )
    line("warm (the same graph again, same process)", ms(warm), "", "<= 5 ms", warm <= 0.005)


# -- (e) softmax of rows -----------------------------------------------------------------------------------

SOFTMAX_IN_ONE_THREAD = r"""
import sys, time
import numpy as np
import relwrite as rw

repeat, number = int(sys.argv[1]), int(sys.argv[2])
data = np.random.default_rng(0).standard_normal((1000, 1000))
x = rw.matrix("x")
f = rw.function([x], rw.softmax(x, axis=-1), mode="fast_run")


def by_numpy():
    e = np.exp(data - data.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


contenders = {"relwrite": lambda: f(data), "numpy": by_numpy}
try:
    import jax

    jax.config.update("jax_enable_x64", True)
    softmax, on_device = jax.jit(lambda a: jax.nn.softmax(a, axis=-1)), jax.device_put(data)
    np.testing.assert_allclose(np.asarray(softmax(on_device)), f(data), rtol=1e-12)
    contenders["jax"] = lambda: softmax(on_device).block_until_ready()
except ImportError:
    pass
np.testing.assert_allclose(by_numpy(), f(data), rtol=1e-12)
best = dict.fromkeys(contenders, float("inf"))
for _ in range(repeat):
    for name, run in contenders.items():
        start = time.perf_counter()
        for _ in range(number):
            run()
        best[name] = min(best[name], (time.perf_counter() - start) / number)
print(*(f"{name}={seconds}" for name, seconds in best.items()))
"""


def run_in_one_thread(arguments: list[str]) -> str:
    """What `python arguments...` prints, run in a fresh process whose numpy, BLAS and jax (XLA) use
    one thread."""
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    )
    return subprocess.run(
        [sys.executable, *arguments], env=env, capture_output=True, text=True, check=True
    ).stdout


def bench_softmax(repeat: int) -> None:
    print("(e) softmax of the rows of a 1000x1000 float64 matrix, one thread (a fresh process)")
    printed = run_in_one_thread(["-c", SOFTMAX_IN_ONE_THREAD, str(repeat), "10"])
    times = {name: float(value) for name, value in (word.split("=") for word in printed.split())}
    ours, jax_time = times["relwrite"], times.get("jax")
    versus = f"relwrite/jax = {ours / jax_time:.2f}x" if jax_time else "jax not installed"
    line(
        "relwrite softmax(x, axis=-1)",
        ms(ours),
        versus,
        "<= 1.1x jax",
        ours <= 1.1 * jax_time if jax_time else None,
    )
    if jax_time:
        line("jax.jit(jax.nn.softmax)", ms(jax_time))
    line(
        "numpy (max, exp, sum, divide)", ms(times["numpy"]), f"relwrite/numpy = {ours / times['numpy']:.2f}x"
    )


# -- (f) a reduction fused into its loop ---------------------------------------------------------------------


def loss_terms(x: Any, y: Any, lib: Any) -> Any:
    return lib.mean((x - y) ** 2 * 0.5 + lib.abs(x))


def bench_fused_reduction(size: int, repeat: int) -> None:
    """Part (f) in a fresh process with every library on one thread (`fused_reduction_in_this_process`)."""
    print(f"(f) mean((x - y) ** 2 * 0.5 + abs(x)) on {size:.0e} float64, one thread (a fresh process)")
    print(
        run_in_one_thread([__file__, "--fused-reduction-child", str(size), "--repeat", str(repeat)]), end=""
    )


def fused_reduction_in_this_process(size: int, repeat: int) -> None:
    import relwrite.backends.c.linker as linker_module

    x, y = rw.vector("x"), rw.vector("y")
    fused = rw.function([x, y], loss_terms(x, y, rw), cache=False)
    original = linker_module.reductions_of_loops
    linker_module.reductions_of_loops = lambda fgraph, nodes: {}
    try:
        apart = rw.function([x, y], loss_terms(x, y, rw), cache=False)
    finally:
        linker_module.reductions_of_loops = original
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(size), rng.standard_normal(size)
    contenders: dict[str, Callable[[], Any]] = {
        "relwrite, mean fused into the loop": lambda: fused(a, b),
        "relwrite, mean apart": lambda: apart(a, b),
        "numpy": lambda: loss_terms(a, b, np),
    }
    if jax_installed():
        import jax

        jax.config.update("jax_enable_x64", True)
        jnp = jax.numpy
        jitted = jax.jit(lambda u, v: loss_terms(u, v, jnp))
        ja, jb = jax.device_put(a), jax.device_put(b)
        contenders["jax.jit"] = lambda: jitted(ja, jb).block_until_ready()
    expected = loss_terms(a, b, np)
    if fused(a, b) != apart(a, b) or abs(float(fused(a, b)) - expected) > 1e-12 * abs(expected):
        print("  warning: the fused mean differs from the unfused one or from numpy's")
    times = dict(zip(contenders, interleaved(list(contenders.values()), repeat)))
    ours = times["relwrite, mean fused into the loop"]
    line("relwrite, mean fused into the loop", ms(ours))
    ratio = ours / times["relwrite, mean apart"]
    line(
        "relwrite, mean apart",
        ms(times["relwrite, mean apart"]),
        f"fused/apart = {ratio:.2f}",
        "<= 0.75",
        ratio <= 0.75,
    )
    ratio = ours / times["numpy"]
    line("numpy", ms(times["numpy"]), f"relwrite/numpy = {ratio:.2f}", "<= 1", ratio <= 1)
    if "jax.jit" in times:
        line("jax.jit", ms(times["jax.jit"]), f"relwrite/jax = {ours / times['jax.jit']:.2f}")
    else:
        line("jax.jit", "not installed")


# -- (g) the NumPy fallback's memory -------------------------------------------------------------------------

MEMORY_PATHS = {
    "C backend (fast_run)": "c",
    "NumPy fallback (numpy linker)": "numpy",
    "numpy ufuncs": "ufuncs",
}


def bench_memory(size: int) -> None:
    """Part (g): each path in a fresh process (`memory_in_this_process`)."""
    print(
        f"(g) peak memory a call adds, the 20-op expression of (a) on {size:.0e} float64"
        " (a fresh process each)"
    )
    added = {}
    for label, path in MEMORY_PATHS.items():
        printed = run_in_one_thread([__file__, "--memory-child", path, "--size", str(size)]).split()
        added[label] = int(printed[0]) if printed and printed[0].isdigit() else None
    c_path = added["C backend (fast_run)"]
    if c_path is None:
        line("peak memory", "not measurable here (needs Linux's /proc/self/clear_refs)")
        return
    line("C backend (fast_run)", f"{c_path / 2**20:9.1f} MB")
    fallback = added["NumPy fallback (numpy linker)"]
    ratio = fallback / c_path
    line(
        "NumPy fallback (numpy linker)",
        f"{fallback / 2**20:9.1f} MB",
        f"fallback/C = {ratio:.2f}x",
        "<= 3x",
        ratio <= 3,
    )
    ufuncs = added["numpy ufuncs"]
    line("numpy ufuncs", f"{ufuncs / 2**20:9.1f} MB", f"numpy/C = {ufuncs / c_path:.2f}x")


def _resident_bytes(field: str) -> int:
    """A memory figure of this process from /proc/self/status (VmRSS now, VmHWM its peak), in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for row in status:
            if row.startswith(field + ":"):
                return int(row.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def memory_in_this_process(path: str, size: int) -> None:
    """Print the peak resident memory one call adds over what the process held before it (in bytes):
    the peak is reset first (Linux: writing 5 to /proc/self/clear_refs); prints "-" where it cannot be."""
    x, y = rw.vector("x"), rw.vector("y")
    if path == "ufuncs":
        run = lambda a, b: expression20(a, b, np)  # noqa: E731
    else:
        run = rw.function([x, y], expression20(x, y, ops), mode=Mode(path, "fast_run"), cache=False)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(size), rng.standard_normal(size)
    run(a[:1000], b[:1000])  # the first call's own allocations (loading, planning) are not the kernel's
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
        before = _resident_bytes("VmRSS")
        result = run(a, b)
        print(max(_resident_bytes("VmHWM") - before, 0), result.shape)
    except OSError:
        print("-")


def jax_installed() -> bool:
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds per measurement (best is kept)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--only", choices="abcdefg", action="append", help="run only these parts (repeatable; default: all)"
    )
    parser.add_argument("--fused-reduction-child", type=int, help=argparse.SUPPRESS)  # part (f)'s process
    parser.add_argument("--memory-child", choices=MEMORY_PATHS.values(), help=argparse.SUPPRESS)  # part (g)'s
    parser.add_argument("--size", type=int, default=10**7, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.fused_reduction_child:
        fused_reduction_in_this_process(args.fused_reduction_child, args.repeat)
        return
    if args.memory_child:
        memory_in_this_process(args.memory_child, args.size)
        return
    if not c_available():
        raise SystemExit("the C backend is unavailable here (no compiler, or RELWRITE_NO_C is set)")
    size, sizes = (10**5, (128, 256)) if args.quick else (10**6, (512, 2048))
    versions = f"numpy {np.__version__}" + (f", PyTensor {pytensor.__version__}" if pt else ", no PyTensor")
    print(f"relwrite evaluation: best of {args.repeat} interleaved rounds; {versions}")
    print(f"  {'':<40s} {'time':>14s}  {'ratio':<28s} {'goal':<22s} verdict")
    parts = {
        "a": lambda: bench_elementwise(size, args.repeat),
        "b": lambda: bench_gemm(sizes, args.repeat),
        "c": lambda: bench_overhead(args.repeat),
        "d": lambda: bench_compile(min(args.repeat, 5)),
        "e": lambda: bench_softmax(args.repeat),
        "f": lambda: bench_fused_reduction(size * 10, args.repeat),
        "g": lambda: bench_memory(size * 10),
    }
    for name, run in parts.items():
        if args.only is None or name in args.only:
            run()


if __name__ == "__main__":
    main()

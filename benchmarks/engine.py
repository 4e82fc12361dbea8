"""The equilibrium engine against a naive rewrite loop, side by side, on growing graphs.

Both apply the same ten kanren relations (`eq`/`etuple` patterns) to the
same graph: a long chain of elementwise ops, with a redex planted every few
dozen nodes, so a few rules match somewhere and most match nowhere.

- engine: `EquilibriumRewriter` (tracks dispatch, failure footprints,
  incremental merge);
- naive: repeat "try every rule on every node in toposort order" until a
  whole pass changes nothing.

The table gives the time of each at every size (the engine's best of
`--repeat` runs, the naive loop's only run), the growth ratios
t(10k)/t(1k) and t(100k)/t(10k) (linear growth is about 10; the goal is
t(10k)/t(1k) <= 12) and whether both reached the same graph (compared by
fingerprint, once the naive result is merged: the engine merges as it goes).
The naive loop is skipped at a size where its projected time exceeds
`--naive-budget`, and stopped if it runs past it.

A second table times the default pipeline (`rewrite_graph(..., include=
["fast_run"])`) on sums and products built in a Python loop,
``out = out + 1 if i % 2 else out * 1.0`` for n steps, against PyTensor's
`fast_run` rewrites of the same loop when PyTensor is importable (medians of
`--repeat` runs, graph building not timed); the goal is t(4000)/t(1000) <= 5.

A third table times `fast_run` rewriting, fusion included, on four graph
shapes at each size (`--shapes`, default `--sizes`): the alternating chain
above, a log(exp(...)) chain, a wide sum built left to right, and a random
elementwise DAG with shared subexpressions and an output every n/20 nodes;
it prints each growth ratio (linear: the size ratio) and how many
elementwise nodes (kernels) are left.  With `--link` it also times
`relwrite.function(..., mode="fast_run")` on each shape and size, rewriting
and linking with the C kernels compiled (a fresh process with an empty module
cache), and that growth; goal 12 for 10k -> 100k.

A last line compiles the alternating chain of `--function-chain` steps (default
100,000) with `relwrite.function(..., mode="fast_run")` in a fresh process and
prints the whole call's time (building the FunctionGraph, rewriting, linking)
and the process's peak memory; goals 10 s and 1 GB.

    python benchmarks/engine.py                 # 1k, 10k, 100k nodes; loops of 1k, 2k, 4k steps
    python benchmarks/engine.py --sizes 1000 5000 --naive-budget 30 --loops 1000 4000
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from etuples import etuple
from kanren import eq, lall, var

from relwrite.engine import EquilibriumRewriter, KanrenRelationSub, MergeRewriter, NodeRewriter
from relwrite.engine.graph_rewriters import commit
from relwrite.engine.node_rewriters import replacement_pairs
from relwrite.graph import ops
from relwrite.graph.basic import Variable, constant, graph_inputs, vector
from relwrite.graph.features import ReplaceValidate
from relwrite.graph.fg import FunctionGraph

ONE = constant(1.0)
ZERO = constant(0.0)


def _rule(name: str, lhs_of: Callable, rhs_of: Callable, arity: int = 1) -> Callable:
    """A relation `lhs == lhs_of(*vs)`, `rhs == rhs_of(*vs)` with fresh logic variables per call."""

    def relation(lhs, rhs):
        vs = [var() for _ in range(arity)]
        return lall(eq(lhs, lhs_of(*vs)), eq(rhs, rhs_of(*vs)))

    relation.__name__ = name
    return relation


RELATIONS = [
    _rule("exp_log", lambda x: etuple(ops.exp, etuple(ops.log, x)), lambda x: x),
    _rule("log_exp", lambda x: etuple(ops.log, etuple(ops.exp, x)), lambda x: x),
    _rule("neg_neg", lambda x: etuple(ops.neg, etuple(ops.neg, x)), lambda x: x),
    _rule("mul_one", lambda x: etuple(ops.mul, x, ONE), lambda x: x),
    _rule("add_zero", lambda x: etuple(ops.add, x, ZERO), lambda x: x),
    _rule("abs_abs", lambda x: etuple(ops.abs, etuple(ops.abs, x)), lambda x: etuple(ops.abs, x)),
    _rule("abs_neg", lambda x: etuple(ops.abs, etuple(ops.neg, x)), lambda x: etuple(ops.abs, x)),
    _rule("cos_neg", lambda x: etuple(ops.cos, etuple(ops.neg, x)), lambda x: etuple(ops.cos, x)),
    _rule("sqrt_sqr", lambda x: etuple(ops.sqrt, etuple(ops.sqr, x)), lambda x: etuple(ops.abs, x)),
    _rule(
        "div_mul",
        lambda x, y: etuple(ops.true_div, etuple(ops.mul, x, y), y),
        lambda x, y: x,
        arity=2,
    ),
]

# Ops of the chain: no two of them in a row form a redex; redexes are planted between them.
FILLER = [ops.sin, ops.tanh, ops.sqr, ops.cos, ops.exp]
# (builder, number of nodes it adds)
REDEXES = [
    (lambda v: ops.exp(ops.log(v)), 2),
    (lambda v: ops.neg(ops.neg(v)), 2),
    (lambda v: ops.mul(v, ONE), 1),
    (lambda v: ops.true_div(ops.mul(v, ops.sin(v)), ops.sin(v)), 4),
]


def make_graph(n_nodes: int, seed: int = 0) -> FunctionGraph:
    """A chain of `n_nodes` elementwise nodes, a redex every 40 nodes, every 7th node adding a recent one."""
    rng = random.Random(seed)
    x, y = vector("x"), vector("y")
    v: Variable = x
    recent = [x, y]
    count = 0
    while count < n_nodes:
        if count % 40 == 39:
            build, size = rng.choice(REDEXES)
            v = build(v)
            count += size
        else:
            v = ops.add(v, rng.choice(recent)) if count % 7 == 6 else rng.choice(FILLER)(v)
            count += 1
        recent = [*recent[-8:], v]
    return FunctionGraph([x, y], [v], clone=False)


def rules() -> list[KanrenRelationSub]:
    return [KanrenRelationSub(rel) for rel in RELATIONS]


def run_engine(fgraph: FunctionGraph) -> float:
    rewriter = EquilibriumRewriter(rules(), max_use_ratio=10)
    t0 = time.perf_counter()
    rewriter.rewrite(fgraph)
    return time.perf_counter() - t0


def run_naive(fgraph: FunctionGraph, deadline: float) -> float | None:
    """Full passes of every rule on every node until a pass changes nothing; None past `deadline`."""
    fgraph.attach_feature(ReplaceValidate())
    naive_rules: list[NodeRewriter] = rules()
    t0 = time.perf_counter()
    changed = True
    while changed:
        changed = False
        for node in fgraph.toposort():
            if time.perf_counter() > deadline:
                return None
            if node not in fgraph.apply_nodes:
                continue
            for rule in naive_rules:
                pairs = replacement_pairs(rule, node, rule.transform(fgraph, node))
                if pairs and commit(fgraph, pairs, str(rule)):
                    changed = True
                    break
    return time.perf_counter() - t0


def loop_graph(lib: object, n: int) -> object:
    """`out = out + 1 if i % 2 else out * 1.0` for n steps on a float64 vector (relwrite or PyTensor)."""
    out = lib.dvector("x") if lib is not None else vector("x")
    for i in range(n):
        out = out + 1 if i % 2 else out * 1.0
    return out


def time_loop(n: int, repeat: int, pytensor: object) -> tuple[float, float | None]:
    """Median seconds to rewrite the loop graph with fast_run: relwrite's, and PyTensor's (or None)."""
    from relwrite.engine.db import rewrite_graph

    ours, theirs = [], []
    for _ in range(repeat):
        graph = loop_graph(None, n)
        start = time.perf_counter()
        rewrite_graph(graph, include=["fast_run"])
        ours.append(time.perf_counter() - start)
        if pytensor is not None:
            from pytensor.graph.rewriting.utils import rewrite_graph as pt_rewrite_graph

            graph = loop_graph(pytensor, n)
            limit = sys.getrecursionlimit()
            sys.setrecursionlimit(100_000)  # PyTensor recurses over graph depth; relwrite runs at 1000
            try:
                start = time.perf_counter()
                pt_rewrite_graph(graph, include=["fast_run"], exclude=["inplace"])
                theirs.append(time.perf_counter() - start)
            finally:
                sys.setrecursionlimit(limit)
    return statistics.median(ours), statistics.median(theirs) if theirs else None


def alternating_chain(n: int) -> tuple[list[Variable], list[Variable]]:
    """The loop graph: `out = out + 1 if i % 2 else out * 1.0`, n steps (n nodes)."""
    out = loop_graph(None, n)
    return list(graph_inputs([out])), [out]


def unary_chain(n: int) -> tuple[list[Variable], list[Variable]]:
    """log(exp(...log(exp(x))...)): n nodes, every pair cancelling."""
    x = vector("x")
    out = x
    for _ in range(n // 2):
        out = ops.log(ops.exp(out))
    return [x], [out]


def wide_sum(n: int, lib: Any = None) -> tuple[list[Variable], list[Variable]]:
    """sin(x * 1) + sin(x * 2) + ... built left to right: n nodes that flatten into one wide add (built
    with relwrite, or with `lib`, pytensor.tensor)."""
    x = vector("x") if lib is None else lib.dvector("x")
    sin = ops.sin if lib is None else lib.sin
    out = sin(x)
    for k in range(2, n // 3 + 1):
        out = out + sin(x * float(k))
    return [x], [out]


def shared_dag(n: int, seed: int = 0, lib: Any = None) -> tuple[list[Variable], list[Variable]]:
    """A random elementwise DAG of about n nodes over four vectors, operands drawn mostly from recent
    nodes and some from anywhere (shared subexpressions), with every (n/20)th node also an output (built
    with relwrite, or with `lib`, pytensor.tensor: the same graph)."""
    at = ops if lib is None else lib
    rng = random.Random(seed)
    inputs = [vector(f"x{k}") if lib is None else lib.dvector(f"x{k}") for k in range(4)]
    pool: list[Any] = list(inputs)
    count = 0
    while count < n:
        a = pool[-1 - min(int(rng.expovariate(0.3)), len(pool) - 1)]
        b = rng.choice(pool)
        kind = rng.random()
        if kind < 0.3:
            v, count = at.add(a, b), count + 1
        elif kind < 0.5:
            v, count = at.mul(a, b), count + 1
        elif kind < 0.6:
            v, count = at.sub(a, b), count + 1
        elif kind < 0.75:
            v, count = at.tanh(a), count + 1
        elif kind < 0.9:
            v, count = at.exp(at.neg(at.sqr(a))), count + 3
        else:
            v, count = at.sin(a), count + 1
        pool.append(v)
    return inputs, [pool[-1], *pool[len(inputs) :: max(n // 20, 1)]]


SHAPES: dict[str, Callable[[int], tuple[list[Variable], list[Variable]]]] = {
    "alternating chain": alternating_chain,
    "log(exp) chain": unary_chain,
    "wide sum": wide_sum,
    "shared DAG": shared_dag,
}


def time_shape(
    build: Callable[[int], tuple[list[Variable], list[Variable]]], n: int
) -> tuple[float, int, int]:
    """Seconds of fast_run rewriting (fusion included) of `build(n)`, nodes before, kernels after."""
    from relwrite.engine.db import rewrite_graph

    inputs, outputs = build(n)
    fgraph = FunctionGraph(inputs, outputs, clone=False)
    before = len(fgraph.apply_nodes)
    start = time.perf_counter()
    rewrite_graph(fgraph, include=["fast_run"])
    seconds = time.perf_counter() - start
    kernels = sum(isinstance(node.op, ops.Elemwise) for node in fgraph.apply_nodes)
    return seconds, before, kernels


SHAPE_FUNCTION = """
import sys, time, warnings
sys.path.insert(0, sys.argv[1])
import engine
import relwrite as rw
from relwrite.backends.c.linker import prebuild
prebuild()  # the modules built once per machine: not the graph's cost
inputs, outputs = engine.SHAPES[sys.argv[2]](int(sys.argv[3]))
start = time.perf_counter()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    rw.function(inputs, outputs, mode="fast_run")
print(time.perf_counter() - start, sum("C module" in str(w.message) for w in caught))
"""


def time_shape_function(name: str, n: int) -> tuple[float, bool]:
    """Seconds of `function(mode="fast_run")` on shape `name` of size n (rewrite and link, the graph's C
    kernels compiled: a fresh process with an empty module cache, the machine's modules built before the
    clock starts), and whether a C module failed to build."""
    with tempfile.TemporaryDirectory() as cache:
        run = subprocess.run(
            [sys.executable, "-c", SHAPE_FUNCTION, str(Path(__file__).parent), name, str(n)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "RELWRITE_CACHE_DIR": cache},
        )
    seconds, failures = run.stdout.split()
    return float(seconds), int(failures) > 0


def main_shapes(sizes: list[int], budget: float, link: bool) -> None:
    """Growth of fast_run rewriting on every graph shape, and with `link` of rewriting and linking (see the
    module docstring)."""
    print()
    print("fast_run rewriting (fusion included) by graph shape; a size is skipped past the budget:")
    extra = f" | {'function()':>11} | {'growth':>6}" if link else ""
    header = f"{'shape':<18} | {'nodes':>8} | {'time':>11} | {'growth':>6}{extra} | elementwise nodes after"
    print(header)
    print("-" * len(header))
    for name, build in SHAPES.items():
        previous: tuple[int, float, float] | None = None
        for n in sizes:
            if previous is not None and previous[1] * (n / previous[0]) ** 1.2 > budget:
                print(f"{name:<18} | {n:>8} | {'skipped':>11} | {'-':>6} | projected past {budget:.0f} s")
                break
            seconds, before, kernels = time_shape(build, n)
            growth = f"{seconds / previous[1]:6.1f}" if previous is not None else "     -"
            linked = 0.0
            if link:
                linked, failed = time_shape_function(name, n)
                linked_growth = f"{linked / previous[2]:6.1f}" if previous is not None else "     -"
                note = " (a C module failed: NumPy ran it)" if failed else ""
                growth += f" | {_fmt(linked):>11} | {linked_growth}{note}"
            print(f"{name:<18} | {before:>8} | {_fmt(seconds):>11} | {growth} | {kernels}", flush=True)
            previous = (n, seconds, linked)


FUNCTION_CHAIN = """
import resource, sys, time
import numpy as np
import relwrite as rw
x = rw.vector("x")
out = x
for i in range(int(sys.argv[1])):
    out = out + 1 if i % 2 else out * 1.0
start = time.perf_counter()
f = rw.function([x], out, mode="fast_run")
seconds = time.perf_counter() - start
assert f(np.zeros(2))[0] == int(sys.argv[1]) // 2 and len(f.fgraph.apply_nodes) == 1
print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def main_function_chain(steps: int) -> None:
    """The alternating chain through `function(mode="fast_run")` in a fresh process: time and peak memory."""
    run = subprocess.run(
        [sys.executable, "-c", FUNCTION_CHAIN, str(steps)], capture_output=True, text=True, check=True
    )
    seconds, megabytes = map(float, run.stdout.split())
    met = seconds <= 10 and megabytes <= 1024
    print()
    print(
        f"function(mode='fast_run') on the alternating chain of {steps} steps: {seconds:.2f} s, "
        f"peak {megabytes:.0f} MB (goals 10 s, 1 GB: {'met' if met else 'NOT met'})"
    )


def _pytensor() -> object:
    try:
        import pytensor.tensor as pt
    except ImportError:
        return None
    return pt


def main_loops(loops: list[int], repeat: int) -> None:
    """The loop-built sums table (see the module docstring)."""
    pytensor = _pytensor()
    print()
    print("sums and products built in a loop, rewritten with fast_run (medians):")
    header = f"{'steps':>8} | {'relwrite':>10} | {'PyTensor':>10} | {'relwrite/PyTensor':>17}"
    print(header)
    print("-" * len(header))
    times = []
    for n in loops:
        ours, theirs = time_loop(n, repeat, pytensor)
        times.append(ours)
        shown = _fmt(theirs) if theirs is not None else "not installed"
        print(f"{n:>8} | {_fmt(ours):>10} | {shown:>10} | {_ratio(ours, theirs):>17}", flush=True)
    if 1_000 in loops and 4_000 in loops:
        ratio = times[loops.index(4_000)] / times[loops.index(1_000)]
        print(f"goal t(4000)/t(1000) <= 5: {ratio:.1f}, {'met' if ratio <= 5 else 'NOT met'}")


def _fmt(seconds: float | None, skipped: str | None = None) -> str:
    if skipped:
        return skipped
    return "-" if seconds is None else f"{seconds:9.3f} s"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:6.1f}" if a is not None and b else "     -"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000], help="graph sizes")
    parser.add_argument(
        "--naive-budget",
        type=float,
        default=120.0,
        help="skip the naive loop where its projected time exceeds this many seconds (default 120)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="engine runs per size; the best counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--loops", type=int, nargs="*", default=[1_000, 2_000, 4_000], help="loop steps (none: skip)"
    )
    parser.add_argument(
        "--shapes", type=int, nargs="*", default=None, help="sizes for the graph-shape table (none: skip)"
    )
    parser.add_argument(
        "--shape-budget", type=float, default=120.0, help="skip a shape's larger sizes projected past this"
    )
    parser.add_argument(
        "--function-chain", type=int, default=100_000, help="steps of the compiled chain (0: skip)"
    )
    parser.add_argument(
        "--link",
        action="store_true",
        help="also time function() on each shape, rewriting and linking with C compilation (fresh processes)",
    )
    args = parser.parse_args(argv)
    sys.setrecursionlimit(1000)  # the default: a RecursionError here means recursion over graph depth

    print(f"{len(RELATIONS)} KanrenRelationSub rules: {', '.join(r.__name__ for r in RELATIONS)}")
    header = f"{'nodes':>8} | {'engine':>11} | {'naive':>16} | {'naive/engine':>12} | same graph"
    print(header)
    print("-" * len(header))
    run_engine(make_graph(500, args.seed))  # first calls fill dispatch caches: keep them out of the timings
    run_naive(make_graph(500, args.seed), time.perf_counter() + args.naive_budget)
    engine_times: list[float] = []
    naive_times: list[float | None] = []
    for k, size in enumerate(args.sizes):
        t_engine = float("inf")
        for _ in range(args.repeat):
            fg_engine = make_graph(size, args.seed)
            start_nodes = len(fg_engine.apply_nodes)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a stop at max_use_ratio would make the timing meaningless
                t_engine = min(t_engine, run_engine(fg_engine))
        engine_times.append(t_engine)
        fg_naive = make_graph(size, args.seed)
        skipped = None
        t_naive: float | None = None
        if k and (naive_times[-1] is None or naive_times[-1] * size / args.sizes[k - 1] > args.naive_budget):
            skipped = f"skipped: > {args.naive_budget:.0f} s"
        else:
            t_naive = run_naive(fg_naive, time.perf_counter() + args.naive_budget)
            if t_naive is None:
                skipped = f"stopped: > {args.naive_budget:.0f} s"
        naive_times.append(t_naive)
        same = "-"
        if t_naive is not None:
            MergeRewriter().rewrite(fg_naive)  # the engine merges as it goes; the naive loop does not
            same = "yes" if fg_engine.fingerprint() == fg_naive.fingerprint() else "NO"
        print(
            f"{start_nodes:>8} | {_fmt(t_engine):>11} | {_fmt(t_naive, skipped):>16} | "
            f"{_ratio(t_naive, t_engine):>12} | {same}  ({len(fg_engine.apply_nodes)} nodes after)",
            flush=True,
        )
    print()
    print("growth (time ratio between consecutive sizes; linear is the size ratio):")
    for k in range(1, len(args.sizes)):
        label = f"t({args.sizes[k]})/t({args.sizes[k - 1]})"
        print(
            f"  {label:<24} size x{args.sizes[k] / args.sizes[k - 1]:.0f}: "
            f"engine {_ratio(engine_times[k], engine_times[k - 1])}, "
            f"naive {_ratio(naive_times[k], naive_times[k - 1])}"
        )
    if 1_000 in args.sizes and 10_000 in args.sizes:
        ratio = engine_times[args.sizes.index(10_000)] / engine_times[args.sizes.index(1_000)]
        print(f"goal t(10k)/t(1k) <= 12 for the engine: {ratio:.1f}, {'met' if ratio <= 12 else 'NOT met'}")
    if args.loops:
        main_loops(args.loops, args.repeat)
    if args.shapes is None or args.shapes:
        main_shapes(args.shapes or args.sizes, args.shape_budget, args.link)
    if args.function_chain:
        main_function_chain(args.function_chain)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""relwrite's default rewrite phases against PyTensor's, side by side, on three graphs.

Both run `rewrite_graph(fgraph, include=canonicalize + stabilize + specialize)`,
and each library's whole `fast_run` rewrites, on the same expression built
with each library:

- seed: z + ((y * x) / y) * (z / x) on float64 scalars;
- logistic: a logistic regression's loss, -mean(y log(p) + (1 - y) log(1 - p)) with
  p = sigmoid(X w + b);
- chain: x = exp(x) * 2 + 1 - x / 3, repeated `--chain` times (default 50:
  200 arithmetic operators and 50 exp) on a float64 vector, and `--long-chain`
  times (default 1250: 5,000 operators; 0 leaves it out);
- mlp: a 3-layer perceptron's loss, -mean(log(softmax(tanh(tanh(X W1 + b1) W2 + b2) W3 + b3)))
  with matrix weights and vector biases;
- dag: the random elementwise DAG with shared subexpressions of `engine.py`
  (about 500 and 4,000 nodes, every (n/20)th node an output);
- wide sum: sin(x * 1) + sin(x * 2) + ... of 1,000 nodes built left to right
  (canonicalize makes it one add of 333 terms).

relwrite runs three times per case: with the three phase tags, with `unsafe`
added (rules valid under assumptions, e.g. y != 0 for x * y / y -> x).
PyTensor, when importable, runs once per case with the three tags; its
figures are repeated on the unsafe row.  Times are the best of `--repeat`
turns, each on a freshly built graph, the two libraries' turns interleaved
(a turn runs a fast case up to five times in a row: `burst`);
building the graph (and its FunctionGraph) is not timed.  Node counts are apply nodes after rewriting.
The goal: relwrite's time <= 0.5x PyTensor's, with no more nodes.  PyTensor's
phases make rewrites relwrite calls unsafe: x * y / y and z / x * x cancel on
the seed, x - (x - y) - y on the 500-node DAG (wrong where a value is 0,
infinite or NaN).  For each case the script evaluates PyTensor's rewritten
graph against the graph as written at special values (0, 1, -1, inf, NaN);
where they differ it prints the point, and that case's node counts compare
safe-vs-safe on its "+unsafe" row only.

With `--against REV` a second table compares this checkout's relwrite with
relwrite at git revision REV (checked out in a temporary worktree): each
side runs every case in a process of its own, the two alternating, best of
`--repeat` processes (each timing a case as a `burst` after a warm-up run);
the goal is no slowdown beyond 1.1x.

    python benchmarks/rewrite.py
    python benchmarks/rewrite.py --repeat 10 --chain 100 --long-chain 0
    python benchmarks/rewrite.py --against a536390
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import engine  # the graph shapes of benchmarks/engine.py (this script's directory)

import relwrite as rw
from relwrite.engine import RewriteWarning, rewrite_graph
from relwrite.graph.fg import FunctionGraph

PHASES = ("canonicalize", "stabilize", "specialize")

warnings.filterwarnings("ignore", message="PyTensor could not link to a BLAS")  # rewriting needs no BLAS
try:
    import pytensor.tensor as pt
    from pytensor.graph.fg import FunctionGraph as PtFunctionGraph
    from pytensor.graph.rewriting.utils import rewrite_graph as pt_rewrite_graph
    from pytensor.printing import pprint as pt_pprint
except ImportError:
    pt = None


def seed_expression(x: Any, y: Any, z: Any) -> Any:
    return z + ((y * x) / y) * (z / x)


def seed(lib: Any) -> list:
    x, y, z = (lib.dscalar(n) for n in "xyz") if lib is pt else (rw.float64(n) for n in "xyz")
    return [seed_expression(x, y, z)]


def logistic(lib: Any) -> list:
    """A logistic regression's mean cross-entropy: p = sigmoid(X w + b)."""
    if lib is pt:
        X, w, y, b = pt.dmatrix("X"), pt.dvector("w"), pt.dvector("y"), pt.dscalar("b")
    else:
        X, w, y, b = rw.matrix("X"), rw.vector("w"), rw.vector("y"), rw.float64("b")
    p = lib.sigmoid(lib.dot(X, w) + b)
    return [-lib.mean(y * lib.log(p) + (1 - y) * lib.log(1 - p))]


def dag(lib: Any, n: int) -> list:
    return engine.shared_dag(n, lib=None if lib is rw else lib)[1]


def wide(lib: Any, n: int) -> list:
    return engine.wide_sum(n, lib=None if lib is rw else lib)[1]


def chain(lib: Any, repeats: int) -> list:
    x = lib.dvector("x") if lib is pt else rw.vector("x")
    for _ in range(repeats):
        x = lib.exp(x) * 2 + 1 - x / 3
    return [x]


def mlp(lib: Any) -> list:
    """A 3-layer perceptron's loss: tanh hidden layers (dot + bias), softmax output, log, mean."""
    if lib is pt:
        X, W1, W2, W3 = (pt.dmatrix(n) for n in ("X", "W1", "W2", "W3"))
        b1, b2, b3 = (pt.dvector(n) for n in ("b1", "b2", "b3"))
        softmax = pt.special.softmax
    else:
        X, W1, W2, W3 = (rw.matrix(n) for n in ("X", "W1", "W2", "W3"))
        b1, b2, b3 = (rw.vector(n) for n in ("b1", "b2", "b3"))
        softmax = rw.softmax
    h1 = lib.tanh(lib.dot(X, W1) + b1)
    h2 = lib.tanh(lib.dot(h1, W2) + b2)
    probabilities = softmax(lib.dot(h2, W3) + b3, axis=-1)
    return [-lib.mean(lib.log(probabilities))]


@dataclass
class Measure:
    seconds: float = float("inf")
    nodes_before: int = 0
    nodes_after: int = 0
    warnings: tuple[str, ...] = ()

    def add(self, run: tuple[float, int, int, list[str]]) -> None:
        """Keep the best time; node counts and warnings are those of the latest run."""
        seconds, self.nodes_before, self.nodes_after, caught = run
        self.seconds = min(self.seconds, seconds)
        self.warnings = tuple(caught)


def run_relwrite(build: Callable[[Any], list], include: tuple[str, ...]) -> tuple[float, int, int, list[str]]:
    fgraph = FunctionGraph(outputs=build(rw), clone=False)
    before = len(fgraph.apply_nodes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RewriteWarning)
        start = time.perf_counter()
        rewrite_graph(fgraph, include=include)
        seconds = time.perf_counter() - start
    messages = [str(w.message) for w in caught if issubclass(w.category, RewriteWarning)]
    return seconds, before, len(fgraph.apply_nodes), messages


def run_pytensor(build: Callable[[Any], list], include: tuple[str, ...]) -> tuple[float, int, int, list[str]]:
    fgraph = PtFunctionGraph(outputs=build(pt), clone=False)
    before = len(fgraph.apply_nodes)
    exclude = ("inplace",) if "fast_run" in include else ()  # in-place rewrites need a Supervisor, and
    start = time.perf_counter()  # relwrite decides in-place work at link time, not in rewriting
    pt_rewrite_graph(fgraph, include=include, exclude=exclude)
    seconds = time.perf_counter() - start
    return seconds, before, len(fgraph.apply_nodes), []


def cases_of(chain_steps: int, long_chain: int = 0) -> list[tuple[str, Callable[[Any], list]]]:
    cases = [
        ("seed", seed),
        ("logistic", logistic),
        (f"chain x{chain_steps}", lambda lib: chain(lib, chain_steps)),
        (f"chain x{long_chain}", lambda lib: chain(lib, long_chain)),
        ("mlp", mlp),
        ("dag 500", lambda lib: dag(lib, 500)),
        ("dag 4000", lambda lib: dag(lib, 4000)),
        ("wide sum 1000", lambda lib: wide(lib, 1000)),
    ]
    return [case for case in cases if case[0] != "chain x0"]


def variants_of(name: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """label -> (relwrite's tags, PyTensor's tags): the three phases, with unsafe, and all of fast_run."""
    return {
        name: (PHASES, PHASES),
        f"{name} +unsafe": ((*PHASES, "unsafe"), PHASES),
        f"{name} fast_run": (("fast_run",), ("fast_run",)),
    }


BURST_SECONDS = 0.05
"""Each side's turn runs a case again until this much time has gone (five runs at most)."""


def burst(measure: Measure, run: Callable[[], tuple[float, int, int, list[str]]]) -> None:
    """Run a case a few times in a row (one run when it takes BURST_SECONDS or more), keeping the best.

    The other library's turn, just before, leaves the processor's caches
    holding its own data: a fast case's first run then measures cache
    misses (the seed's 0.5 ms became 0.7 ms), so each side is timed warm.
    """
    spent = 0.0
    for _ in range(5):
        result = run()
        measure.add(result)
        spent += result[0]
        if spent >= BURST_SECONDS:
            break


def relwrite_timings(chain_steps: int, long_chain: int) -> dict[str, float]:
    """Seconds of every case and variant, the best of a `burst` after a warm-up run (what `--timings`
    prints): a fast case's single run moved by a tenth from process to process."""
    timings = {}
    for name, build in cases_of(chain_steps, long_chain):
        for label, (include, _) in variants_of(name).items():
            run_relwrite(build, include)
            measure = Measure()
            burst(measure, partial(run_relwrite, build, include))
            timings[label] = measure.seconds
    return timings


def compare_with_revision(revision: str, repeat: int, chain_steps: int, long_chain: int) -> None:
    """Print this checkout's relwrite against relwrite at `revision` (see the module docstring)."""
    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="relwrite-bench-") as scratch:
        checkout = Path(scratch) / "checkout"
        subprocess.run(
            ["git", "-C", str(here), "worktree", "add", "--detach", "--quiet", str(checkout), revision],
            check=True,
        )
        try:
            best: dict[str, dict[str, float]] = {"this": {}, revision: {}}
            for _ in range(repeat):
                for side, root in (("this", here), (revision, checkout)):
                    env = {**os.environ, "PYTHONPATH": str(root)}
                    command = [sys.executable, __file__, "--timings", "--chain", str(chain_steps)]
                    command += ["--long-chain", str(long_chain)]
                    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
                    for label, seconds in json.loads(out).items():
                        best[side][label] = min(seconds, best[side].get(label, float("inf")))
        finally:
            subprocess.run(
                ["git", "-C", str(here), "worktree", "remove", "--force", str(checkout)], check=True
            )
    print()
    header = f"{'case':<22} | {'this checkout':>13} | {revision[:13]:>13} | {'ratio':>6} | goal (<= 1.1x)"
    print(f"relwrite against relwrite at {revision} (best of {repeat}, each side in its own processes):")
    print(header)
    print("-" * len(header))
    for label, seconds in best["this"].items():
        base = best[revision][label]
        ratio = seconds / base
        print(
            f"{label:<22} | {seconds * 1e3:10.2f} ms | {base * 1e3:10.2f} ms | {ratio:5.2f}x | "
            f"{'met' if ratio <= 1.1 else 'NOT met'}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best counts")
    parser.add_argument("--chain", type=int, default=50, help="repetitions of the chain's step (default 50)")
    parser.add_argument(
        "--long-chain",
        type=int,
        default=1250,
        help="repetitions of the long chain's step (default 1250; 0: none)",
    )
    parser.add_argument("--against", metavar="REV", help="also compare with relwrite at this git revision")
    parser.add_argument("--timings", action="store_true", help=argparse.SUPPRESS)  # one side of --against
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.chain < 1 or args.long_chain < 0:
        parser.error("--repeat and --chain must be at least 1, --long-chain at least 0")
    if args.timings:
        print(json.dumps(relwrite_timings(args.chain, args.long_chain)))
        return 0

    cases = cases_of(args.chain, args.long_chain)
    if pt is None:
        print("PyTensor is not importable: its columns are empty.\n")
    header = (
        f"{'case':<22} | {'relwrite time':>13} | {'relwrite nodes after':>20} | {'pytensor time':>13} | "
        f"{'pytensor nodes after':>20} | {'time ratio':>10} | goal (<= 0.5x, nodes <= pytensor)"
    )
    print(header)
    print("-" * len(header))
    notes: list[str] = []
    for name, build in cases:
        variants = variants_of(name)
        unsafe = unsafe_point(build) if pt is not None else None
        if unsafe:
            notes.append(f"{name}: {unsafe}")
        ours = {label: Measure() for label in variants}
        theirs = {label: Measure() for label in variants} if pt is not None else {}
        for _ in range(args.repeat):  # interleaved, so a change in machine load hits both sides alike
            for label, (include, pt_include) in variants.items():
                if pt is not None:
                    burst(theirs[label], partial(run_pytensor, build, pt_include))
                burst(ours[label], partial(run_relwrite, build, include))
        for label, measured in ours.items():
            other = theirs.get(label)
            notes.append(
                f"{label}: relwrite {measured.nodes_before} -> {measured.nodes_after} nodes"
                + (f", pytensor {other.nodes_before} -> {other.nodes_after}" if other else "")
            )
            notes.extend(f"{label}: relwrite warned: {message}" for message in measured.warnings)
            print(_row(label, measured, other, unsafe_peer=label == name and unsafe is not None), flush=True)
    print()
    print("nodes before -> after:")
    for note in notes:
        print(f"  {note}")
    print()
    for include in (PHASES, (*PHASES, "unsafe")):
        out = rewrite_graph(seed(rw)[0], include=include)
        print(f"relwrite on the seed with {' + '.join(include)}: {rw.pprint(out)}")
    if pt is not None:
        fgraph = PtFunctionGraph(outputs=seed(pt), clone=False)
        pt_rewrite_graph(fgraph, include=PHASES)
        print(f"pytensor on the seed with {' + '.join(PHASES)}: {pt_pprint(fgraph.outputs[0])}")
    if args.against:
        compare_with_revision(args.against, args.repeat, args.chain, args.long_chain)
    return 0


SPECIAL_VALUES = (0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 0.5)


def unsafe_point(build: Callable[[Any], list]) -> str | None:
    """Where PyTensor's three phases change a case's values (relwrite calls such a rewrite unsafe:
    x * y / y -> x cancels, wrong where y is 0, infinite or NaN), or None: then the case's node counts
    compare safe-vs-safe on its "+unsafe" row only.

    Scalar inputs take every combination of 0, 1 and inf (three at most), vector inputs the special
    values each in another rotation; other inputs, and graphs PyTensor cannot evaluate unrewritten
    (its Python linker recurses over the graph's depth), are not tried: no claim is made.
    """
    import itertools

    import numpy as np
    import pytensor
    from pytensor.compile.mode import Mode

    fgraph = PtFunctionGraph(outputs=build(pt), clone=True)
    inputs = fgraph.inputs
    if not inputs or not all(v.type.ndim <= 1 for v in inputs):
        return None
    if any(v.type.ndim == 1 for v in inputs):
        points = [[np.roll(np.array(SPECIAL_VALUES), k) for k in range(len(inputs))]]
    elif len(inputs) <= 3:
        points = [
            [np.float64(x) for x in p] for p in itertools.product((0.0, 1.0, np.inf), repeat=len(inputs))
        ]
    else:
        return None
    as_written = Mode(linker="py", optimizer=None)  # no rewrites at all
    try:
        original = pytensor.function(inputs, list(fgraph.outputs), mode=as_written)
        pt_rewrite_graph(fgraph, include=PHASES)
        theirs = pytensor.function(inputs, list(fgraph.outputs), mode=as_written, on_unused_input="ignore")
        with np.errstate(all="ignore"):
            compared = [(point, list(zip(original(*point), theirs(*point)))) for point in points]
    except Exception:  # deep graphs (RecursionError), many-input adds its Python evaluation refuses
        return None
    for point, outputs in compared:
        for k, (before, after) in enumerate(outputs):
            differs = np.ravel(~np.isclose(before, after, rtol=1e-9, atol=0.0, equal_nan=True))
            if differs.any():
                i = int(np.argmax(differs))
                at = ", ".join(f"{v.name} = {np.ravel(x)[i]}" for v, x in zip(inputs, point))
                was, now = np.ravel(before)[i], np.ravel(after)[i]
                return (
                    f"unsafe by relwrite's definition: PyTensor's phases change output {k} at ({at})"
                    f" from {was} to {now} (relwrite does that only with `unsafe`)"
                )
    return None


def _row(label: str, ours: Measure, theirs: Measure | None, unsafe_peer: bool = False) -> str:
    """One table row; with `unsafe_peer` PyTensor's node count comes from rewrites relwrite calls
    unsafe, so nodes are compared on the "+unsafe" row instead (safe against safe)."""
    if theirs is None:
        their_time, their_nodes, ratio, goal = "-", "-", "-", "-"
    else:
        their_time, their_nodes = f"{theirs.seconds * 1e3:10.2f} ms", str(theirs.nodes_after)
        time_ratio = ours.seconds / theirs.seconds
        ratio = f"{time_ratio:.2f}x"
        nodes_ok = unsafe_peer or ours.nodes_after <= theirs.nodes_after
        misses = [what for what, ok in (("time", time_ratio <= 0.5), ("nodes", nodes_ok)) if not ok]
        goal = "met" if not misses else f"NOT met ({', '.join(misses)})"
        if unsafe_peer:
            goal += " (nodes: PyTensor's come from unsafe rewrites, see +unsafe)"
    return (
        f"{label:<22} | {ours.seconds * 1e3:10.2f} ms | {ours.nodes_after:>20} | {their_time:>13} | "
        f"{their_nodes:>20} | {ratio:>10} | {goal}"
    )


if __name__ == "__main__":
    sys.exit(main())

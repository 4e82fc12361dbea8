"""relwrite against Herbie's benchmarks (issue 26, item 6): `relwrite improve` over an FPCore suite.

Runs `improve_benchmarks` over every FPCore of every `*.fpcore` file of the
suite (default: tests/data/hamming, Herbie's 28 Hamming benchmarks; `--suite
DIR` for another, e.g. a checkout of FPBench's benchmarks) and prints per
benchmark: whether relwrite can express it (and why not), the bits of error
of the input and of the form found, the search time, and whether the form is
under 1 bit.  The bits are measured independently of the search: a fresh
`Accuracy(benchmark.expr, samples=1000, ranges=precondition, seed=12345)`
scores both input and output (the search samples 256 points with seed 0).

    python benchmarks/fpbench.py --jobs 2
    python benchmarks/fpbench.py --suite ../FPBench/benchmarks --limit-seconds 20
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from relwrite.engine.explore import Limits  # noqa: E402
from relwrite.engine.explore.costs import Accuracy  # noqa: E402
from relwrite.interop.fpcore import FPCoreError, read_fpcores  # noqa: E402
from relwrite.interop.improve import Improvement, benchmark_name, improve_benchmarks  # noqa: E402

SAMPLES, SEED = 1000, 12345
"""The independent measurement: points per benchmark and their seed."""

HERBIE = "Herbie 1.1 (quoted from issue 26, not measured here): 17 of 23 expressible benchmarks under 1 bit"


def score(improvement: Improvement) -> tuple[float, float] | str:
    """The input's and the output's bits of error on a fresh sample of SAMPLES points, or why not."""
    bench = improvement.benchmark
    try:
        accuracy = Accuracy(bench.expr, samples=SAMPLES, ranges=bench.precondition, seed=SEED)
        return float(accuracy(bench.expr)), float(accuracy(improvement.form.expr))
    except Exception as exc:
        return f"not measured: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def read_suite(suite: Path) -> tuple[list, list[tuple[str, str]]]:
    """(name, Benchmark) of every FPCore relwrite reads, and (file, why) for each it cannot."""
    readable, not_expressible = [], []
    for path in sorted(suite.rglob("*.fpcore")):
        errors: list[FPCoreError] = []
        try:
            benchmarks = read_fpcores(path.read_text(encoding="utf-8"), errors)
        except FPCoreError as exc:
            not_expressible.append((path.name, str(exc)))
            continue
        readable += [(benchmark_name(b, k), b) for k, b in enumerate(benchmarks, 1)]
        not_expressible += [(path.name, str(e)) for e in errors]
    return readable, not_expressible


def run(suite: Path, limits: Limits, executor: Executor | None) -> int:
    readable, not_expressible = read_suite(suite)
    print(f"relwrite improve over {suite} ({len(readable) + len(not_expressible)} FPCores)")
    print(f"limits per benchmark: {limits.seconds} s, {limits.iterations} iterations, {limits.nodes} e-nodes")
    print(f"bits of error: mean over {SAMPLES} points (seed {SEED}) where :pre holds, apart from the search")
    print(HERBIE)
    print()
    names = [name for name, _ in readable]
    improvements = improve_benchmarks([b for _, b in readable], executor, limits, names=names)
    done = [i for i in improvements if i.ok]
    scored = dict(zip(map(id, done), executor.map(score, done) if executor else map(score, done)))
    width = min(max([len(n) for n in names] + [9]), 38)
    print(f"{'benchmark':<{width}}  {'input':>6}  {'output':>6}  {'time':>7}  {'<1 bit':>6}  form or why not")
    under, times = 0, []
    for improvement in improvements:
        name = improvement.name[:width]
        times.append(improvement.seconds)
        result = scored.get(id(improvement), f"failed: {improvement.error}")
        if isinstance(result, str):
            print(f"{name:<{width}}  {'-':>6}  {'-':>6}  {improvement.seconds:6.2f}s  {'-':>6}  {result}")
            continue
        before, after = result
        under += after < 1
        form = str(improvement.to_dict()["output"])
        print(
            f"{name:<{width}}  {before:6.2f}  {after:6.2f}  {improvement.seconds:6.2f}s  "
            f"{'yes' if after < 1 else 'no':>6}  {form}"
        )
    for file, why in not_expressible:
        print(f"{file[:width]:<{width}}  {'-':>6}  {'-':>6}  {'-':>7}  {'-':>6}  not expressible: {why}")
    total = len(readable) + len(not_expressible)
    median = statistics.median(times) if times else math.nan
    print()
    print(f"expressible: {len(readable)} of {total}; measured: {len(scored)}")
    print(f"under 1 bit: {under} of {len(readable)} expressible (input and output measured as above)")
    print(f"median search time: {median:.2f} s")
    print(HERBIE)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=ROOT / "tests" / "data" / "hamming", metavar="DIR")
    parser.add_argument("--jobs", type=int, default=1, metavar="N")
    parser.add_argument("--limit-seconds", type=float, default=Limits.seconds, metavar="S")
    parser.add_argument("--limit-iterations", type=int, default=Limits.iterations, metavar="N")
    parser.add_argument("--limit-nodes", type=int, default=Limits.nodes, metavar="N")
    args = parser.parse_args(argv)
    if not args.suite.is_dir():
        parser.error(f"--suite {args.suite}: not a directory")
    untimed = {"rule_seconds": math.inf} if args.limit_seconds == math.inf else {}
    limits = Limits(args.limit_iterations, args.limit_nodes, seconds=args.limit_seconds, **untimed)
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            return run(args.suite, limits, pool)
    return run(args.suite, limits, None)


if __name__ == "__main__":
    sys.exit(main())

"""The differential fuzzer (`relwrite.testing.fuzz`): random graphs under every mode against NumPy.

Prints, per mode, the graphs tried and how many showed each outcome (wrong,
crashed, invalid, warned, types are bugs; improvement and declared are
not), then each bug with a shrunk, self-contained reproducer, grouped by a
signature (category, modes, ops involved) so one cause shows once with a
count.  Exits 1 when there is a bug.  Graph `i` of a run depends only on
``(seed, i)``, so ``--start i --graphs 1`` replays one case.  Compiled C
modules go to a fresh temporary cache unless ``RELWRITE_CACHE_DIR`` is set
(thousands of one-off modules would otherwise fill the user's cache).

    python benchmarks/fuzz.py --graphs 10000
    python benchmarks/fuzz.py --graphs 2000 --seed 7 --modes fast_compile o3 fast_run
    python benchmarks/fuzz.py --start 148 --graphs 1 --all
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", type=int, default=1000, help="how many graphs to draw (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    parser.add_argument("--start", type=int, default=0, help="index of the first graph (default 0)")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=None,
        help="modes to check: names (o3), name:linker (fast_run:numpy), name+tag (fast_run+unsafe); "
        "default: every mode and fast_run:numpy",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per compile or call")
    parser.add_argument("--no-shrink", action="store_true", help="report failing graphs whole")
    parser.add_argument("--all", action="store_true", help="list every failing case, not one per signature")
    parser.add_argument(
        "--quiet", action="store_true", help="no progress on stderr (a bar on a terminal, lines otherwise)"
    )
    args = parser.parse_args(argv)

    if "RELWRITE_CACHE_DIR" in os.environ:
        return _run(args)
    with tempfile.TemporaryDirectory(prefix="relwrite-fuzz-") as cache:
        os.environ["RELWRITE_CACHE_DIR"] = cache
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from relwrite.progress import Progress
    from relwrite.testing import fuzz

    modes = tuple(args.modes) if args.modes else fuzz.DEFAULT_MODES
    began = time.perf_counter()

    bar = Progress(args.graphs, "fuzzing", unit="graph")

    def progress(index: int, report: fuzz.FuzzReport) -> None:
        done = index - args.start + 1
        if args.quiet:
            return
        if bar.enabled:  # a terminal: a bar instead of lines
            bar.update(done, bugs=len(report.bugs))
            return
        if done % 100 == 0 or done == args.graphs:
            elapsed = time.perf_counter() - began
            print(
                f"  {done}/{args.graphs} graphs, {elapsed:.0f} s, {len(report.bugs)} bug reports",
                file=sys.stderr,
                flush=True,
            )

    with bar:
        report = fuzz.run(
            args.graphs,
            seed=args.seed,
            modes=modes,
            start=args.start,
            timeout=args.timeout,
            minimize=not args.no_shrink,
            progress=progress,
        )
    print(
        f"relwrite differential fuzzer: seed {args.seed}, graphs {args.start}..{args.start + args.graphs - 1}"
    )
    print()
    print(report.table())
    groups: dict[str, list[fuzz.Failure]] = defaultdict(list)
    for failure in report.bugs:
        groups[fuzz.signature(failure)].append(failure)
    if groups:
        print(f"\n{len(report.bugs)} bug reports in {len(groups)} groups (category | modes | ops | detail):")
    for key, failures in groups.items():
        graphs = sorted({f.graph for f in failures})
        shown = failures if args.all else failures[:1]
        more = " ..." if len(graphs) > 12 else ""
        print(f"\n== {key}\n   {len(failures)} report(s), graphs {graphs[:12]}{more}")
        for failure in shown:
            print(failure.describe())
    return 1 if report.bugs else 0


if __name__ == "__main__":
    sys.exit(main())

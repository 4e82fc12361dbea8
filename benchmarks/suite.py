"""The test suite's peak memory, time and reliability: the README's test command, measured from outside.

Runs ``python -m pytest`` (the README's test command, extra pytest arguments passed on) in a
child process, ``--runs`` times in a row, optionally beside ``--load`` CPU-bound busy
processes (a loaded 2-core machine), and prints per run: the outcome, the wall time and the
child's peak resident memory; then the medians, how many runs passed, and each goal with
whether it is met:

- peak resident memory <= 1.5 GB (the whole suite in one process);
- wall time <= 600 s (CI's budget on a busy 2-core machine);
- every run passes (a test's outcome never depends on the machine's load).

    python benchmarks/suite.py                       # one run, unloaded
    python benchmarks/suite.py --runs 20 --load 2    # the reliability check of issue 24
    python benchmarks/suite.py -- -m "not slow" tests/graph
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEMORY_GOAL = 1.5e9
TIME_GOAL = 600.0


def _spin(stop: multiprocessing.synchronize.Event) -> None:
    """A CPU-bound job: the load a busy machine puts beside the suite."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 1_103_515_245 + 12_345) % 2**31


def run_suite(pytest_args: list[str], log: Path) -> tuple[int, float, int]:
    """One run of the suite in a fresh process: (exit status, seconds, peak resident bytes).

    The peak is the pytest process's own (its ru_maxrss, read as pytest returns), not that of the
    programs tests start (a compiler, a browser), which RUSAGE_CHILDREN would report instead.
    """
    measure = (
        "import os, resource, sys, time\n"
        "import pytest\n"
        "report = os.dup(1)\n"
        "with open(sys.argv[1], 'w') as out:\n"
        "    os.dup2(out.fileno(), 1); os.dup2(out.fileno(), 2)\n"
        "    t = time.perf_counter()\n"
        "    s = int(pytest.main(['-p', 'no:cacheprovider', *sys.argv[2:]]))\n"
        "    t = time.perf_counter() - t\n"
        "    sys.stdout.flush()\n"
        "os.write(report, f'{s} {t} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}'.encode())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", measure, str(log), *pytest_args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    status, seconds, peak = int(out[0]), float(out[1]), int(out[2])
    return status, seconds, peak * (1024 if sys.platform != "darwin" else 1)  # Linux reports KiB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="runs in a row (default 1)")
    parser.add_argument("--load", type=int, default=0, help="CPU-bound busy processes beside the suite")
    parser.add_argument("--logs", type=Path, default=None, help="directory for each run's output")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.load < 0:
        parser.error("--runs must be at least 1 and --load at least 0")
    logs = args.logs or Path(os.environ.get("TMPDIR", "/tmp")) / "relwrite-suite-runs"
    logs.mkdir(parents=True, exist_ok=True)

    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.load)]
    for spinner in spinners:
        spinner.start()
    results = []
    try:
        print(f"{'run':>4} {'outcome':>8} {'seconds':>8} {'peak MB':>8}  log")
        for k in range(args.runs):
            log = logs / f"run-{k + 1}.log"
            status, seconds, peak = run_suite(args.pytest_args, log)
            results.append((status, seconds, peak))
            outcome = "passed" if status == 0 else f"exit {status}"
            print(f"{k + 1:>4} {outcome:>8} {seconds:>8.1f} {peak / 1e6:>8.0f}  {log}", flush=True)
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join(timeout=5)

    passed = sum(status == 0 for status, _, _ in results)
    seconds = statistics.median(s for _, s, _ in results)
    peak = max(p for _, _, p in results)
    print(f"\nbeside {args.load} busy process(es): {passed} of {len(results)} runs passed")
    for name, value, goal, unit in (
        ("peak resident memory (largest run)", peak / 1e9, MEMORY_GOAL / 1e9, "GB"),
        ("wall time (median)", seconds, TIME_GOAL, "s"),
    ):
        verdict = "met" if value <= goal else "NOT met"
        print(f"{name}: {value:.2f} {unit}, goal <= {goal:g} {unit}: {value / goal:.2f}x ({verdict})")
    return 0 if passed == len(results) and peak <= MEMORY_GOAL else 1


if __name__ == "__main__":
    sys.exit(main())

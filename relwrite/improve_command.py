"""`relwrite improve FILE.fpcore...`: the most accurate forms of FPBench benchmarks (the command's work).

The parser lives in `relwrite.cli`; the search is `relwrite.interop.improve`.
This module reads every FPCore of every file (an FPCore that cannot be read
is a failed row, the others still run), runs the benchmarks one after the
other or in a process pool (`--jobs`), prints a table (or JSON) and writes
the results as FPCore, Python and C (`--out`, `--format`) and as HTML pages
(`--report`).  Exit status 1 when any benchmark failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from relwrite.command_text import json_text, unknown_choice
from relwrite.graph_files import GraphFileError, is_graph_spec, load_object
from relwrite.progress import Progress

FORMATS = {"fpcore": "improved.fpcore", "python": "improved.py", "c": "improved.c"}
"""What `--format` names -> the file `--out DIR` gets."""


class ImproveError(Exception):
    """Bad input to the command: one line, exit status 2 (the CLI turns it into its CommandError)."""


def run(args: argparse.Namespace) -> int:
    from relwrite.interop.improve import Improvement, improve_benchmarks

    if args.jobs < 1:
        raise ImproveError(f"--jobs must be at least 1, got {args.jobs}")
    formats = _formats(args.format)
    if args.format is not None and args.out is None:
        raise ImproveError("--format says what --out writes: give --out DIR too")
    limits = _limits(args)
    out = _directory(args.out, "--out") if args.out is not None else None
    report = _directory(args.report, "--report") if args.report is not None else None
    slots: list[Improvement | int] = []  # a failure to read, or the index of a benchmark to run
    benchmarks, names = [], []
    for path in args.files:
        for item in _read(path):
            if isinstance(item, Improvement):
                slots.append(item)
            else:
                slots.append(len(benchmarks))
                names.append(item[0])
                benchmarks.append(item[1])
    with Progress(len(benchmarks), "improving", unit="benchmark") as bar:
        if args.jobs > 1 and len(benchmarks) > 1:
            # workers start as fresh interpreters (forkserver), not as forks of this process: a fork
            # copies its threads' locks mid-use and counts its whole heap as each worker's
            fresh = multiprocessing.get_context("forkserver")
            with ProcessPoolExecutor(max_workers=min(args.jobs, len(benchmarks)), mp_context=fresh) as pool:
                done = improve_benchmarks(
                    benchmarks, pool, limits, names=names, series=args.series, progress=bar.update
                )
        else:
            done = improve_benchmarks(
                benchmarks, None, limits, names=names, series=args.series, progress=bar.update
            )
    results = [done[slot] if isinstance(slot, int) else slot for slot in slots]
    if out is not None:
        _write_outputs(out, formats, results)
    if report is not None:
        _write_reports(report, results)
    if args.json:
        failed = sum(not r.ok for r in results)
        document = {"benchmarks": [r.to_dict() for r in results], "failed": failed}
        print(json_text(document))
    else:
        _print_table(results)
    return 0 if all(r.ok for r in results) else 1


def _limits(args: argparse.Namespace) -> Any:
    from relwrite.engine.explore import Limits

    try:
        untimed = args.limit_seconds == math.inf  # no rule is cut short by the clock either
        return Limits(
            iterations=args.limit_iterations,
            nodes=args.limit_nodes,
            seconds=args.limit_seconds,
            **({"rule_seconds": math.inf} if untimed else {}),
        )
    except ValueError as exc:
        message = str(exc)
        for field, flag in (("nodes", "--limit-nodes"), ("iterations", "--limit-iterations")):
            message = message.replace(f"Limits.{field}", flag)
        raise ImproveError(message.replace("Limits.seconds", "--limit-seconds")) from None


def _formats(text: str | None) -> list[str]:
    """The `--format` list (comma-separated; default fpcore), each checked."""
    if text is None:
        return ["fpcore"]
    chosen = [part.strip() for part in text.split(",")]
    for name in chosen:
        if name not in FORMATS:
            problem = f"--format: unknown format {name!r}"
            raise ImproveError(unknown_choice(problem, name, [("known formats", FORMATS)]))
    return list(dict.fromkeys(chosen))


def _directory(path: str, option: str) -> Path:
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImproveError(f"{option} {path!r}: cannot write there ({exc.strerror or exc})") from None
    return directory


def _read(path: str) -> list[Any]:
    """(name, Benchmark) for each FPCore of the file, a failed Improvement for each that cannot be read
    (one for the whole file when it is not FPCore text at all)."""
    from relwrite.interop.fpcore import FPCoreError, read_fpcores
    from relwrite.interop.improve import Improvement, benchmark_name

    if is_graph_spec(path):
        return [_graph_benchmark(path)]
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ImproveError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImproveError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    errors: list[FPCoreError] = []
    file = Path(path).name  # failures are named by the file's name; their errors give its path
    try:
        benchmarks = read_fpcores(text, errors)
    except FPCoreError as exc:
        return [Improvement.failed(file, f"FPCoreError: {path}: {exc}")]
    if not benchmarks and not errors:
        return [Improvement.failed(file, f"FPCoreError: {path}: no FPCore in the file")]
    items: list[Any] = [(benchmark_name(b, k), b) for k, b in enumerate(benchmarks, 1)]
    items += [Improvement.failed(f"{file} (unreadable)", f"FPCoreError: {path}: {e}") for e in errors]
    return items


def _graph_benchmark(spec: str) -> Any:
    """(NAME, Benchmark) of a graph a Python file builds (`FILE.py:NAME`), or a failed Improvement."""
    from relwrite.interop.improve import Improvement, as_benchmark

    try:
        obj = load_object(spec)
    except GraphFileError as exc:
        raise ImproveError(str(exc)) from None
    name = spec.rpartition(":")[2]
    try:
        return name, dataclasses.replace(as_benchmark(obj)[0], name=name)
    except (TypeError, ImportError) as exc:
        return Improvement.failed(name, f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def _print_table(results: list[Any]) -> None:
    """name, input bits, output bits, time and the improved expression (or the error), one row each."""
    from relwrite.graph.printing import expression_text

    width = min(max([len(r.name) for r in results] + [9]), 40)
    print(f"{'benchmark':<{width}}  {'input':>6}  {'output':>6}  {'time':>7}  improved")
    for r in results:
        name = r.name if len(r.name) <= width else r.name[: width - 3] + "..."
        if not r.ok:
            print(f"{name:<{width}}  {'-':>6}  {'-':>6}  {r.seconds:6.2f}s  failed: {r.error}")
            continue
        text = expression_text(r.form.expr) + ("  (approximate)" if r.form.approximate else "")
        print(f"{name:<{width}}  {r.input_bits:6.2f}  {r.output_bits:6.2f}  {r.seconds:6.2f}s  {text}")
    ok = [r for r in results if r.ok]
    better = sum(r.output_bits < r.input_bits for r in ok)
    failed = len(results) - len(ok)
    summary = f"{len(results)} benchmark(s): {better} improved, {failed} failed"
    print(summary + " (bits of error: the mean over the sample)")


def _write_outputs(directory: Path, formats: list[str], results: list[Any]) -> None:
    from relwrite.interop.improve import c_source, fpcore_text, python_module

    writers = {"fpcore": fpcore_text, "python": python_module, "c": c_source}
    for name in formats:
        target = directory / FORMATS[name]
        try:
            target.write_text(writers[name](results), encoding="utf-8")
        except OSError as exc:
            raise ImproveError(f"cannot write {target}: {exc.strerror or exc}") from None


def _page_name(number: int, name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "benchmark"
    return f"{number:02d}-{slug}.html"


def _write_reports(directory: Path, results: list[Any]) -> None:
    """One HTML page per benchmark and `index.html` linking them."""
    from relwrite.report import improve_index, improve_report, write_report

    pages = [_page_name(k, r.name) for k, r in enumerate(results, 1)]
    try:
        for result, page in zip(results, pages):
            write_report(str(directory / page), improve_report(result))
        write_report(str(directory / "index.html"), improve_index(results, pages))
    except OSError as exc:
        raise ImproveError(str(exc)) from None

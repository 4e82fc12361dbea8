"""`relwrite explore`: equivalent forms of an expression, a proof, pictures (the command's work).

The parser lives in `relwrite.cli`; this module turns its arguments into an
`Exploration`, shows a progress bar (tqdm) on runs longer than a second,
and prints the forms (or a proof) as text or JSON.
"""

from __future__ import annotations

import argparse
import math
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relwrite.command_text import json_text, unknown_choice
from relwrite.progress import Progress


class ExploreError(Exception):
    """Bad input to the command: one line, non-zero exit (the CLI turns it into its CommandError)."""


def run(args: argparse.Namespace, parse_expressions: Callable[[list[str], list[str]], list[Any]]) -> int:
    """Run the command; `parse_expressions(texts, var_specs)` is the CLI's parser of expressions."""
    from relwrite.engine.explore import (
        AccuracyError,
        Exploration,
        Limits,
        UnsoundFormError,
        egraph_dot,
        share_inputs,
    )

    if args.prove is not None:
        given = [flag for flag, value in (("-n", args.n), ("--cost", args.cost)) if value is not None]
        if given:
            raise ExploreError(f"--prove shows one proof: {' and '.join(given)} do not apply to it")
    args.n = 10 if args.n is None else args.n
    args.cost = "nodes" if args.cost is None else args.cost
    if args.where is not None and args.cost != "accuracy":
        raise ExploreError(f"--where {args.where!r} says where accuracy samples: it needs --cost accuracy")
    if args.n < 1:
        raise ExploreError(f"-n must be at least 1, got {args.n}")
    try:
        untimed = args.limit_seconds == math.inf  # no rule is cut short by the clock either
        limits = Limits(
            iterations=args.limit_iterations,
            nodes=args.limit_nodes,
            seconds=args.limit_seconds,
            **({"rule_seconds": math.inf} if untimed else {}),
        )
    except ValueError as exc:
        message = (
            str(exc)
            .replace("Limits.nodes", "--limit-nodes")
            .replace("Limits.iterations", "--limit-iterations")
            .replace("Limits.seconds", "--limit-seconds")
        )
        raise ExploreError(message) from None
    _check_tags(args.include)
    exprs = parse_expressions([args.expr] if args.prove is None else [args.expr, args.prove], args.var)
    if args.prove is not None:
        try:
            exprs[1] = share_inputs(exprs[0], exprs[1])
        except ValueError as exc:
            raise ExploreError(f"--prove {args.prove!r}: {exc}") from None
    dot_dir = _dot_directory(args.dot) if args.dot is not None else None
    bar = _Progress(limits)
    # the deadline of --limit-seconds starts here: the cost, the search, and every form's check
    include = [*args.include, "accuracy"] if args.cost == "accuracy" else args.include
    exploration = Exploration(
        exprs,
        direction=args.direction,
        limits=limits,
        include=include,
        unsafe=not args.safe_only,
        progress=bar.update,
    )
    if args.prove is None:
        try:
            cost = exploration.resolve_cost(args.cost, 0, _precondition(args.where, exprs[0]))
        except AccuracyError as exc:
            raise ExploreError(f"--cost {args.cost}: {exc}") from None
    try:
        if args.prove is not None:
            return _prove(args, exploration, bar, dot_dir)
        bar.start()
        exploration.run()
        bar.close()
        forms = []
        for form in exploration.forms(0, cost) if cost is not None else ():
            forms.append(form)
            if len(forms) == args.n:
                break
    except UnsoundFormError as exc:
        raise ExploreError(f"a form failed its numerical check: {str(exc).splitlines()[0]}") from None
    finally:
        bar.close()
    report = exploration.report
    if args.json:
        document = {"expr": args.expr, "cost": args.cost, "report": _report(report)}
        print(json_text({**document, "forms": [f.to_dict() for f in forms]}))
    else:
        print(f"{len(forms)} form(s) of {args.expr} by {args.cost} ({_summary(report)}):")
        for k, form in enumerate(forms, 1):
            print(f"{k:>3}. {form}")
    if args.report:
        _write_report(args, exprs[0], forms, cost, _summary(report))
    if dot_dir is not None:
        _write_dot(dot_dir, "egraph", egraph_dot(exploration.egraph, exploration.roots))
        for k, form in enumerate(forms, 1):
            _write_dot(dot_dir, f"form{k}", _form_dot(form.expr, f"form {k}"))
    return 0


def _precondition(text: str | None, expr: Any) -> Any:
    """The `--where` text as a precondition over the inputs of `expr`, or None."""
    if text is None:
        return None
    from relwrite.engine.explore.precondition import PreconditionError, parse_precondition
    from relwrite.graph.basic import Constant, graph_inputs

    names = [v.name for v in graph_inputs([expr]) if not isinstance(v, Constant)]
    try:
        return parse_precondition(text, names)
    except PreconditionError as exc:
        raise ExploreError(f"--where {text!r}: {exc}") from None


def _prove(args: argparse.Namespace, exploration: Any, bar: _Progress, dot_dir: Path | None) -> int:
    from relwrite.engine.explore import egraph_dot

    bar.start()
    explanation = exploration.proof()
    bar.close()
    if args.json:
        result = {
            "a": args.expr,
            "b": args.prove,
            "proven": explanation is not None,
            "report": _report(exploration.report),
            "explanation": explanation.to_dict() if explanation is not None else None,
        }
        print(json_text(result))
    elif explanation is not None:
        print(f"{args.expr} == {args.prove}:")
        print(explanation)
    else:
        print(
            f"not shown equal within the limits ({_summary(exploration.report)}): {args.expr} vs {args.prove}"
        )
    if args.report:
        _write_proof_report(args, exploration, explanation)
    if dot_dir is not None:
        _write_dot(dot_dir, "egraph", egraph_dot(exploration.egraph, exploration.roots))
    return 0 if explanation is not None else 1


class _Progress:
    """E-nodes against the node limit, as a `relwrite.progress.Progress` bar for each run."""

    def __init__(self, limits: Any):
        self.limits = limits
        self.bar: Progress | None = None

    def start(self) -> None:
        self.bar = Progress(self.limits.nodes, "exploring", unit="node")

    def update(self, report: Any) -> None:
        if self.bar is not None:
            self.bar.update(report.nodes, iteration=report.iterations, classes=report.classes)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _write_report(args: argparse.Namespace, expr: Any, forms: list, cost: Any, summary: str) -> None:
    """The HTML page of the exploration (`--report`); accuracy plotted where it can be measured."""
    from relwrite.engine.explore import Accuracy, AccuracyError
    from relwrite.report import explore_report, write_report

    accuracy = cost if isinstance(cost, Accuracy) else None
    if accuracy is None:
        try:
            accuracy = Accuracy(expr)
        except AccuracyError:
            accuracy = None
    page = explore_report(args.expr, expr, forms[:6], args.cost, summary, accuracy)
    try:
        write_report(args.report, page)
    except OSError as exc:
        raise ExploreError(str(exc)) from None


def _write_proof_report(args: argparse.Namespace, exploration: Any, explanation: Any) -> None:
    """The HTML page of the proof (`--report` with `--prove`): both expressions and the steps."""
    from relwrite.report import proof_report, write_report

    a, b = exploration.exprs
    page = proof_report(args.expr, args.prove, a, b, explanation, _summary(exploration.report))
    try:
        write_report(args.report, page)
    except OSError as exc:
        raise ExploreError(str(exc)) from None


def _report(report: Any) -> dict:
    return {
        "stop_reason": report.stop_reason,
        "iterations": report.iterations,
        "nodes": report.nodes,
        "classes": report.classes,
        "seconds": round(report.seconds, 4),
        "failed_rules": dict(report.failed),
        "stopped_phases": dict(report.phases),
    }


def _summary(report: Any) -> str:
    text = f"{report.stop_reason}, {report.iterations} iterations, {report.nodes} e-nodes"
    text += f", {report.seconds:.2f} s"
    if report.phases:
        text += f"; {', '.join(f'{phase} stopped at the {why}' for phase, why in report.phases.items())}"
    if report.failed:
        text += f"; rules skipped: {', '.join(sorted(report.failed))}"
    return text


def _check_tags(tags: list[str]) -> None:
    """Each `--include` tag must be a tag of some catalogue rule."""
    from relwrite.relations import OPT_IN_TAGS, catalogue

    known = set(OPT_IN_TAGS).union(*(r.tags for r in catalogue()))
    for tag in tags:
        if tag not in known:
            message = unknown_choice(f"unknown tag {tag!r} for --include", tag, [("known tags", known)])
            raise ExploreError(message)


def _dot_directory(path: str) -> Path:
    directory = Path(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".relwrite-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ExploreError(f"--dot {path!r}: cannot write there ({exc.strerror or exc})") from None
    return directory


def _form_dot(expr: Any, name: str) -> str:
    from relwrite.graph.printing import to_dot

    return to_dot(expr, name=name)


def _write_dot(directory: Path, stem: str, text: str) -> None:
    """Write `stem.dot`, and `stem.svg` when Graphviz's `dot` is installed (a note on stderr if it fails)."""
    source = directory / f"{stem}.dot"
    source.write_text(text, encoding="utf-8")
    dot = shutil.which("dot")
    if dot is None:
        return
    try:
        done = subprocess.run(
            [dot, "-Tsvg", str(source), "-o", str(source.with_suffix(".svg"))],
            check=False,
            timeout=60,
            capture_output=True,
            text=True,
        )
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        failed = done.returncode != 0
    except (OSError, subprocess.SubprocessError) as exc:
        why, failed = str(exc), True
    if failed:
        print(f"relwrite: note: dot could not render {source}: {why}", file=sys.stderr)

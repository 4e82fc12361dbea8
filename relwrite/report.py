"""Self-contained HTML reports of a rewrite, an exploration, a proof or an improved benchmark
(`relwrite rewrite/explore --report FILE`, `relwrite improve --report DIR`).

One page, no network and no scripts: the input and the result (Graphviz's
SVG inline when the `dot` program runs, their text otherwise), each rule
that fired in the order it fired with the subterm it replaced and what
replaced it, the profile; for an exploration, the forms with their costs,
derivations and assumptions, and each form's accuracy over the sampled
inputs as a plot of bits of error against the input value (Herbie's view); for
a proof, both expressions and the steps between them with their assumptions; for
an improved benchmark, its body and its most accurate form with their bits of
error plotted against each input, and the derivation with its assumptions.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np

from relwrite.graph.basic import Variable
from relwrite.graph.features import Feature
from relwrite.graph.printing import PPrinter, picture_html

STEP_TEXT_TERMS = 200
"""Subterms larger than this many terms are shown by name in the steps table."""

_short = PPrinter(max_terms=STEP_TEXT_TERMS)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 80em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
code, pre, td.term { font-family: ui-monospace, monospace; font-size: 0.92em; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
table { border-collapse: collapse; } td, th { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left;
vertical-align: top; } th { background: #f0f0f0; }
.pictures { display: flex; gap: 2em; flex-wrap: wrap; align-items: flex-start; }
.pictures > div { max-width: 48%; overflow: auto; } svg { max-width: 100%; height: auto; }
.unsafe { color: #a00; }
"""

PLOT_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")


def _text(var: Variable) -> str:
    try:
        return _short(var)
    except ValueError:  # too many terms written out
        return f"{var} (a graph of more than {STEP_TEXT_TERMS} terms)"


class RewriteLog(Feature):
    """The replacements made while it is attached, in order: (reason, replaced text, replacement text).

    A replacement later rolled back (a rejected transaction) is dropped
    again; the texts are taken when the replacement happens, so they show
    the subterms as they were then.
    """

    def __init__(self) -> None:
        self.steps: list[tuple[str, str, str]] = []
        self._pairs: list[tuple[Variable, Variable]] = []

    def on_change_input(
        self, fgraph: Any, node: Any, i: int, old: Variable, new: Variable, reason: Any
    ) -> None:
        if reason == "rollback":
            for k in range(len(self._pairs) - 1, -1, -1):
                if self._pairs[k] == (new, old):
                    del self._pairs[k], self.steps[k]
                    break
            return
        if self._pairs and self._pairs[-1] == (old, new):
            return  # the same replacement reaching another reader
        self._pairs.append((old, new))
        self.steps.append((str(reason or "replace"), _text(old), _text(new)))

    def clone(self) -> RewriteLog:
        return RewriteLog()


def _page(title: str, sections: Sequence[str]) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{''.join(sections)}</body></html>\n"
    )


def _section(heading: str, body: str) -> str:
    return f"<section><h2>{html.escape(heading)}</h2>{body}</section>"


def _pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def rewrite_report(
    expression: str,
    before: Variable,
    after: Variable,
    steps: Sequence[tuple[str, str, str]],
    profile_text: str,
    mode: str,
    evaluated: tuple[Any, Any] | None = None,
) -> str:
    """The page of one rewrite: input, result, the rules in the order they fired, the profile."""
    pictures = (
        f"<div class='pictures'><div>{picture_html(before, 'before')}</div>"
        f"<div>{picture_html(after, 'after')}</div></div>"
    )
    summary = (
        f"<p>mode <code>{html.escape(mode)}</code></p>"
        f"<p>input: <code>{html.escape(_text(before))}</code><br>"
        f"result: <code>{html.escape(_text(after))}</code></p>"
    )
    sections = [_section("Input and result", summary + pictures)]
    if evaluated is not None:
        sections.append(
            _section(
                "Evaluated",
                _pre(
                    f"before: {np.asarray(evaluated[0]).tolist()}\n"
                    f"after:  {np.asarray(evaluated[1]).tolist()}"
                ),
            )
        )
    rows = "".join(
        f"<tr><td>{k}</td><td>{html.escape(rule)}</td><td class='term'>{html.escape(old)}</td>"
        f"<td class='term'>{html.escape(new)}</td></tr>"
        for k, (rule, old, new) in enumerate(steps, 1)
    )
    table = (
        f"<table><tr><th>#</th><th>rule</th><th>subterm before</th><th>after</th></tr>{rows}</table>"
        if steps
        else "<p>No rule fired.</p>"
    )
    sections.append(_section(f"Rules that fired ({len(steps)}), in order", table))
    sections.append(_section("Profile", _pre(profile_text)))
    return _page(f"relwrite rewrite: {expression}", sections)


def explore_report(
    expression: str,
    original: Variable,
    forms: Sequence[Any],
    cost_name: str,
    summary: str,
    accuracy: Any | None,
) -> str:
    """The page of one exploration: the forms with costs, derivations and assumptions, and (when the
    expression's accuracy can be measured) each form's bits of error against the input value."""
    rows = []
    for k, form in enumerate(forms, 1):
        assumptions = ", ".join(sorted(form.assumptions)) or "none"
        unsafe = " <span class='unsafe'>(unsafe)</span>" if form.unsafe else ""
        rows.append(
            f"<tr><td>{k}</td><td class='term'>{html.escape(_text(form.expr))}</td><td>{form.cost:.4g}</td>"
            f"<td>{html.escape(form.derivation)}</td><td>{html.escape(assumptions)}{unsafe}</td></tr>"
        )
    table = (
        "<table><tr><th>#</th><th>form</th><th>cost</th><th>derivation</th><th>assumptions</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    sections = [
        _section("Input", f"<p><code>{html.escape(_text(original))}</code></p>" + picture_html(original)),
        _section(f"Forms by {cost_name} ({summary})", table),
    ]
    if forms:
        sections.append(_section("Best form", picture_html(forms[0].expr)))
    if accuracy is not None:
        sections.append(_section("Accuracy over the input range", accuracy_plot(accuracy, forms)))
    else:
        sections.append(
            _section("Accuracy over the input range", "<p>Not measured (no floating inputs).</p>")
        )
    return _page(f"relwrite explore: {expression}", sections)


def proof_report(
    expression: str, other: str, a: Variable, b: Variable, explanation: Any | None, summary: str
) -> str:
    """The page of one `explore --prove`: both expressions, and the steps from one to the other with
    what each assumed (or that they were not shown equal within the limits)."""
    pictures = (
        f"<div class='pictures'><div>{picture_html(a, 'a')}</div><div>{picture_html(b, 'b')}</div></div>"
    )
    sections = [
        _section(
            "The two expressions",
            f"<p>a: <code>{html.escape(_text(a))}</code><br>b: <code>{html.escape(_text(b))}</code></p>"
            + pictures,
        )
    ]
    if explanation is None:
        sections.append(_section("Not shown equal", f"<p>Within the limits ({html.escape(summary)}).</p>"))
        return _page(f"relwrite explore: {expression} vs {other}", sections)
    table = (
        _steps_table(explanation.steps)
        if explanation.steps
        else "<p>Equal as they stand (up to the order of sums and products).</p>"
    )
    if not explanation.complete:
        table += f"<p>Cut at {len(explanation.steps)} steps.</p>"
    assumptions = ", ".join(sorted(explanation.assumptions)) or "none"
    unsafe = (
        "<p class='unsafe'>Uses unsafe rules: valid where the expressions are finite, "
        "under the assumptions.</p>"
        if explanation.unsafe
        else ""
    )
    sections.append(_section(f"Equal ({summary}): the steps", table))
    sections.append(_section("Assumptions", f"<p>{html.escape(assumptions)}</p>{unsafe}"))
    return _page(f"relwrite explore: {expression} == {other}", sections)


def _steps_table(steps: Sequence[Any]) -> str:
    """The table of a derivation: each step's rule, direction, subterms and assumptions."""
    rows = []
    for k, step in enumerate(steps, 1):
        assumed = html.escape(", ".join(sorted(step.assumptions)) or "none")
        unsafe = " <span class='unsafe'>(unsafe)</span>" if step.unsafe else ""
        rows.append(
            f"<tr><td>{k}</td><td>{html.escape(step.rule)}</td><td>{html.escape(step.direction)}</td>"
            f"<td class='term'>{html.escape(_text(step.before))}</td>"
            f"<td class='term'>{html.escape(_text(step.after))}</td><td>{assumed}{unsafe}</td></tr>"
        )
    return (
        "<table><tr><th>#</th><th>rule</th><th>direction</th><th>subterm before</th><th>after</th>"
        f"<th>assumptions</th></tr>{''.join(rows)}</table>"
    )


def improve_report(improvement: Any) -> str:
    """The page of one benchmark of `relwrite improve`: its body and the most accurate form found with
    their bits of error, each one's error plotted against every input, a piecewise form's split points,
    and the derivation with the assumptions it relies on (or why the benchmark failed)."""
    title = f"relwrite improve: {improvement.name}"
    bench, form = improvement.benchmark, improvement.form
    if form is None:
        body = f"<p>Failed: {html.escape(improvement.error or '')}</p>"
        if bench is not None:
            body += f"<p>input: <code>{html.escape(_text(bench.expr))}</code></p>"
        return _page(title, [_section("Failed", body)])
    summary = (
        f"<p>precondition: <code>{html.escape(str(bench.precondition))}</code></p>"
        f"<table><tr><th></th><th>expression</th><th>bits of error</th></tr>"
        f"<tr><td>input</td><td class='term'>{html.escape(_text(bench.expr))}</td>"
        f"<td>{improvement.input_bits:.2f}</td></tr>"
        f"<tr><td>output</td><td class='term'>{html.escape(_text(form.expr))}</td>"
        f"<td>{improvement.output_bits:.2f}</td></tr></table>"
        f"<p>{improvement.seconds:.2f} s ({html.escape(improvement.search)}); bits of error are the mean "
        f"over {len(improvement.accuracy.reference)} points sampled where the precondition holds.</p>"
    )
    pictures = (
        f"<div class='pictures'><div>{picture_html(bench.expr, 'input')}</div>"
        f"<div>{picture_html(form.expr, 'output')}</div></div>"
    )
    sections = [_section("Input and output", summary + pictures)]
    plots = "".join(
        accuracy_plot(improvement.accuracy, [bench, form], variable=k, labels=["input", "output"])
        for k in range(len(improvement.accuracy.inputs))
    )
    sections.append(_section("Bits of error against each input", plots))
    if form.regimes is not None:
        sections.append(_section(f"Regimes on {form.regimes.variable}", _regimes_table(form.regimes)))
    derivation = _steps_table(form.steps) if form.steps else "<p>The input itself: no better form found.</p>"
    sections.append(_section(f"Derivation ({len(form.steps)} steps)", derivation))
    assumptions = ", ".join(sorted(form.assumptions)) or "none"
    unsafe = (
        "<p class='unsafe'>Uses unsafe rules: valid where the values are finite, under the assumptions.</p>"
        if form.unsafe
        else ""
    )
    approximate = (
        "<p class='unsafe'>An approximation: a truncated series stands for the input on its range (see the "
        "derivation), more accurate there than every equal form found, not equal to the input.</p>"
        if form.approximate
        else ""
    )
    sections.append(_section("Assumptions", f"<p>{html.escape(assumptions)}</p>{unsafe}{approximate}"))
    return _page(title, sections)


def _regimes_table(regimes: Any) -> str:
    """The split points of a piecewise form, and each branch: its range, expression, bits and derivation."""
    splits = ", ".join(repr(float(x)) for x in regimes.splits)
    rows = "".join(
        f"<tr><td>{html.escape(where)}</td><td class='term'>{html.escape(_text(branch.expr))}</td>"
        f"<td>{branch.cost:.2f}</td><td>{html.escape(branch.derivation)}</td></tr>"
        for where, branch in zip(regimes.ranges(), regimes.branches)
    )
    return (
        f"<p>Split points: {html.escape(splits)}. No single form is accurate over the whole sample; each "
        "branch is the most accurate one on its range (its bits of error are over the whole sample).</p>"
        "<table><tr><th>range</th><th>form</th><th>bits of error</th><th>derivation</th></tr>"
        f"{rows}</table>"
    )


def improve_index(improvements: Sequence[Any], pages: Sequence[str]) -> str:
    """The index of `relwrite improve --report`: each benchmark's bits before and after, linked to its
    page (`pages`, relative file names in the same order)."""
    rows = []
    for improvement, page in zip(improvements, pages):
        link = f"<a href='{html.escape(page)}'>{html.escape(improvement.name)}</a>"
        if improvement.form is None:
            rows.append(
                f"<tr><td>{link}</td><td colspan='3'>failed: {html.escape(improvement.error or '')}</td></tr>"
            )
            continue
        rows.append(
            f"<tr><td>{link}</td><td>{improvement.input_bits:.2f}</td><td>{improvement.output_bits:.2f}</td>"
            f"<td class='term'>{html.escape(_text(improvement.form.expr))}</td></tr>"
        )
    table = (
        "<table><tr><th>benchmark</th><th>input bits</th><th>output bits</th><th>output</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    return _page(f"relwrite improve: {len(improvements)} benchmarks", [_section("Benchmarks", table)])


def accuracy_plot(
    accuracy: Any,
    forms: Sequence[Any],
    width: int = 720,
    height: int = 300,
    variable: int = 0,
    labels: Sequence[str] | None = None,
) -> str:
    """An SVG plot of each form's bits of error (mean over a point's elements) at every sample point,
    points ordered by the value of input number `variable` (its first element), with a legend naming
    each form by its `labels` entry (default "form 1", "form 2"...)."""
    from relwrite.engine.explore.costs import bits_of_error

    if not 0 <= variable < len(accuracy.inputs):
        raise ValueError(f"variable must index one of the {len(accuracy.inputs)} inputs, got {variable}")
    if labels is not None and len(labels) != len(forms):
        raise ValueError(f"{len(labels)} labels for {len(forms)} forms")
    samples = len(accuracy.reference)
    first = np.asarray(accuracy.points[variable], dtype=np.float64).reshape(samples, -1)[:, 0]
    order = np.argsort(first, kind="stable")
    xs = first[order]
    count = len(xs)
    left, right, top, bottom = 50, 40, 15, 45
    inner_w, inner_h = width - left - right, height - top - bottom
    limit = float(accuracy.reference.dtype.itemsize * 8)

    def x_at(k: int) -> float:
        return left + (inner_w * k / max(count - 1, 1))

    def y_at(bits: float) -> float:
        return top + inner_h * (1 - bits / limit)

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height + 24 * len(forms)}'>"]
    parts.append(
        f"<rect x='{left}' y='{top}' width='{inner_w}' height='{inner_h}' fill='white' stroke='#999'/>"
    )
    for bits in (0, limit / 4, limit / 2, 3 * limit / 4, limit):
        y = y_at(bits)
        parts.append(f"<line x1='{left - 4}' x2='{left}' y1='{y:.1f}' y2='{y:.1f}' stroke='#999'/>")
        parts.append(f"<text x='{left - 6}' y='{y + 4:.1f}' font-size='11' text-anchor='end'>{bits:g}</text>")
    for k in np.linspace(0, count - 1, num=min(5, count)).astype(int):
        x = x_at(int(k))
        parts.append(
            f"<text x='{x:.1f}' y='{top + inner_h + 16}' font-size='11' "
            f"text-anchor='middle'>{xs[k]:.3g}</text>"
        )
    name = html.escape(accuracy.inputs[variable].name or "input")
    parts.append(
        f"<text x='{left + inner_w / 2}' y='{top + inner_h + 34}' font-size='12' text-anchor='middle'>"
        f"{name} (sample points in order of value)</text>"
    )
    parts.append(
        f"<text x='12' y='{top + inner_h / 2}' font-size='12' text-anchor='middle' "
        f"transform='rotate(-90 12 {top + inner_h / 2})'>bits of error</text>"
    )
    for f_index, form in enumerate(forms):
        color = PLOT_COLORS[f_index % len(PLOT_COLORS)]
        errors = bits_of_error(accuracy.values(form.expr), accuracy.reference)
        per_point = errors.reshape(count, -1).mean(axis=1)[order]
        points = " ".join(f"{x_at(k):.1f},{y_at(float(b)):.1f}" for k, b in enumerate(per_point))
        parts.append(
            f"<polyline points='{points}' fill='none' stroke='{color}' stroke-width='1.2' opacity='0.8'/>"
        )
        legend_y = height + 18 * f_index + 4
        mean = float(per_point.mean())
        parts.append(f"<rect x='{left}' y='{legend_y}' width='14' height='10' fill='{color}'/>")
        parts.append(
            f"<text x='{left + 20}' y='{legend_y + 9}' font-size='12'>"
            f"{html.escape(labels[f_index]) if labels else f'form {f_index + 1}'}: "
            f"{html.escape(_text(form.expr))} ({mean:.2f} bits on average)</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def write_report(path: str, page: str) -> None:
    """Write `page` to `path` (UTF-8); an OSError names the path."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(page)
    except OSError as exc:
        raise OSError(f"cannot write the report {path!r}: {exc.strerror or exc}") from None

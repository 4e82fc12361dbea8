"""The catalogue described for people: each rule's directions and an example before -> after.

`describe(rule)` is what `relwrite rules` prints; `catalogue_markdown()` is
the text of docs/catalogue.md (regenerate it with
`relwrite rules --markdown > docs/catalogue.md`).  Examples are rewritten by
one forward step of the rule alone, outermost match first, with the same
checks the engine applies (dtype and static shape kept), so what is shown is
what the rule does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from relwrite.graph.basic import Variable
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.relations import catalogue
from relwrite.relations.pattern import first_replacement
from relwrite.relations.registry import PHASES, Rule

MAX_ANSWERS = 64  # answers examined per node, as the engine's KanrenRelationSub does


def rewrite_example_graphs(
    r: Rule, text: str, types: Mapping[str, Any] | None = None
) -> tuple[Variable, Variable]:
    """`text` parsed with the rule's types (or `types`), and a copy rewritten by one forward step of `r`.

    The copy's inputs are new variables with the same names.  Raises
    ValueError when the example does not parse or the rule does not rewrite it.
    """
    try:
        expr = parse(text, r.types if types is None else types)
    except (SyntaxError, ValueError, TypeError) as exc:
        raise ValueError(f"example {text!r} of rule {r.name} does not parse: {exc}") from None
    fgraph = FunctionGraph(outputs=[expr])  # a copy: `expr` stays as it is
    for node in reversed(fgraph.toposort()):
        if len(node.outputs) != 1:
            continue
        old = node.outputs[0]
        new = first_replacement(
            islice((a.value for a in r.answers(old)), MAX_ANSWERS), old, fgraph.apply_nodes
        )
        if new is not None:
            fgraph.replace(old, new, reason=r.name)
            return expr, fgraph.outputs[0]
    raise ValueError(f"rule {r.name} does not rewrite its example {pprint(expr)}")


def rewrite_example(r: Rule, text: str) -> tuple[str, str]:
    """`text` (parsed with the rule's types) and its rewrite by one forward step of `r`, pretty-printed.

    Raises ValueError when the example does not parse or the rule does not rewrite it.
    """
    before, after = rewrite_example_graphs(r, text)
    return pprint(before), pprint(after)


def directions(r: Rule) -> str:
    """`both`, or `forward` with the reason the rule is not run backward."""
    return "both" if r.backward else f"forward (not backward: {r.backward_note})"


@dataclass(frozen=True)
class RuleDescription:
    """What `relwrite rules` and the catalogue page show for one rule.

    `example` is `(before, after)` for the rule's first example, None when
    the rule has none; `example_error` says what went wrong when rewriting it failed.
    """

    rule: Rule
    phase: str
    tags: str
    semantics: str
    directions: str
    assumptions: str
    example: tuple[str, str] | None
    example_error: str | None

    @property
    def example_text(self) -> str:
        if self.example is not None:
            return f"{self.example[0]} -> {self.example[1]}"
        return f"(error: {self.example_error})" if self.example_error else "(no example)"


def describe(r: Rule) -> RuleDescription:
    """The rule's facts, its first example rewritten by the rule."""
    example, error = None, None
    if r.examples:
        try:
            example = rewrite_example(r, r.examples[0])
        except ValueError as exc:
            error = str(exc)
    return RuleDescription(
        rule=r,
        phase=r.phase or "(no phase)",
        tags=", ".join(sorted(r.tags)),
        semantics=r.semantics,
        directions=directions(r),
        assumptions=", ".join(str(a) for a in r.assumptions) or "none",
        example=example,
        example_error=error,
    )


_INTRO = """\
# The rule catalogue

Every rewrite rule relwrite ships, generated from the registry
(`relwrite.relations.catalogue()`); do not edit by hand. Regenerate with

    relwrite rules --markdown > docs/catalogue.md

Each rule is one kanren relation between a left side and a right side. The
default pipeline (`rewrite_graph(g, include=["canonicalize", "stabilize",
"specialize"])`) runs the phases in that order, each to a fixed point, and
takes the rules whose tags the query includes; rules tagged `unsafe` (valid
only under their assumptions) or `explore` run only when the query names that
tag.  Exploration runs the `explore` identities by default, and the search for
the most accurate form (`best_form(cost="accuracy")`, `pareto`) the
`accuracy` identities too.

- **semantics**: how the right side's values relate to the left side's, one
  of `exact`, `reassociates` (equal over the reals, may round differently),
  `stabilizes` (the right value where the left side overflows, underflows or
  cancels) and `unsafe`; [What a rule preserves](rule-safety.md) defines them;
- **directions**: `both` when running the relation backward (right side to
  left side) terminates and means something, else `forward` and the reason;
- **assumptions**: what the inputs must satisfy for the two sides to be equal;
- **composes** (some rules): the rules whose steps reach in turn what the rule
  does in one; the rewriting engine saves their intermediate graphs,
  exploration leaves the shortcut out;
- **example**: the rule's first example and what one forward step of the rule
  alone makes of it.

`relwrite rules` prints the same in the terminal; `relwrite check` runs the
soundness checks of every rule.
"""


def _escape(text: str) -> str:
    """Markdown-escape prose (`*`, `_`, `<`, `[`, `]`, backslashes) outside `code spans`."""
    pieces = text.split("`")
    for i in range(0, len(pieces), 2):
        piece = pieces[i].replace("\\", "\\\\")
        for char in "*_<[]":
            piece = piece.replace(char, "\\" + char)
        pieces[i] = piece
    return "`".join(pieces)


def _entry(d: RuleDescription) -> list[str]:
    lines = [f"### {d.rule.name}\n"]
    if d.rule.doc:
        lines.append(_escape(d.rule.doc) + "\n")
    lines.append(f"- tags: {d.tags}")
    lines.append(f"- semantics: {d.semantics}")
    lines.append(f"- directions: {_escape(d.directions)}")
    lines.append(f"- assumptions: `{d.assumptions}`" if d.rule.assumptions else "- assumptions: none")
    if d.rule.composes:
        shortcut = ", ".join(f"`{c}`" for c in d.rule.composes)
        lines.append(f"- composes: {shortcut} (a shortcut: exploration, which has those, leaves it out)")
    if d.example is not None:
        lines.append(f"- example: `{d.example[0]}` -> `{d.example[1]}`")
    else:
        lines.append(f"- example: {_escape(d.example_text)}")
    return [*lines, ""]


def catalogue_markdown(rules: list[Rule] | None = None) -> str:
    """The catalogue page (docs/catalogue.md) for `rules` (default: the whole catalogue)."""
    descriptions = [describe(r) for r in (catalogue() if rules is None else rules)]
    phases = list(dict.fromkeys([*PHASES, *(d.phase for d in descriptions)]))
    counts = {p: sum(d.phase == p for d in descriptions) for p in phases}
    lines = [_INTRO]
    summary = ", ".join(f"{counts[p]} {p}" for p in phases if counts[p])
    lines.append(f"{len(descriptions)} rules ({summary}).\n" if descriptions else "No rules.\n")
    for phase in phases:
        if counts[phase]:
            lines.append(f"## {phase}\n")
            for d in descriptions:
                if d.phase == phase:
                    lines.extend(_entry(d))
    return "\n".join(lines).rstrip("\n") + "\n"

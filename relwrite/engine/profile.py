"""Profiles returned by graph rewriters, and `print_profile`, the one place that prints them.

Walk and merge profiles are tuples (their reprs read like Aesara's); the
equilibrium and sequence profiles are records with nested detail.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from functools import singledispatch
from typing import Any, NamedTuple, TextIO


class WalkProfile(NamedTuple):
    """What one walk over the graph did: (rewriter, changes, nodes before, nodes after, times)."""

    rewriter: Any
    nb_changed: int
    nodes_start: int
    nodes_end: int
    toposort_time: float
    loop_time: float
    callback_time: float

    __repr__ = tuple.__repr__


class MergeProfile(NamedTuple):
    """What a merge did: (failures, time, validate time, callback time, callbacks, merged, constants)."""

    nb_fail: int
    replace_time: float
    validate_time: float | None
    callback_time: float | None
    callbacks_time: dict
    nb_merged: int
    nb_constant: int

    __repr__ = tuple.__repr__


@dataclass
class RuleStats:
    """One node rewriter inside an equilibrium run."""

    time: float = 0.0
    attempts: int = 0
    applied: int = 0
    nodes_created: int = 0
    errors: int = 0
    edits: int = 0  # applications made by editing the graph inside transform
    budget_exceeded: int = 0  # relation runs stopped by their step or time budget
    rejected_answers: int = 0  # answers skipped for a type that cannot replace the output


@dataclass
class PassStats:
    """One generation of an equilibrium run: the nodes queued by the previous one."""

    time: float = 0.0
    nodes_at_start: int = 0
    visited: int = 0
    graph_rewriter_time: float = 0.0
    applied: Counter = field(default_factory=Counter)


@dataclass
class EquilibriumProfile:
    """An equilibrium run: passes, node counts and per-rule statistics."""

    name: str
    time: float = 0.0
    nodes_start: int = 0
    nodes_end: int = 0
    nodes_max: int = 0
    passes: list[PassStats] = field(default_factory=list)
    rules: dict[str, RuleStats] = field(default_factory=dict)
    graph_rewriters: dict[str, RuleStats] = field(default_factory=dict)
    merges: int = 0
    merges_rejected: int = 0  # duplicates left apart: validation rejected their merge, or types conflict
    merge_time: float = 0.0
    stopped_early: str | None = None

    @property
    def applied(self) -> int:
        return sum(s.applied for s in self.rules.values()) + sum(
            s.applied for s in self.graph_rewriters.values()
        )


@dataclass
class SequenceProfile:
    """A sequence of graph rewriters, each with its own profile."""

    name: str
    time: float = 0.0
    nodes_before: int = 0
    nodes_after: int = 0
    steps: list[tuple[str, str, int, float, Any]] = field(default_factory=list)


def print_profile(profile: Any, file: TextIO | None = None, indent: int = 0) -> None:
    """Print any rewriter's profile (nested profiles indented under their parent)."""
    out = sys.stdout if file is None else file
    for line in _lines(profile):
        print(" " * indent + line, file=out)


@singledispatch
def _lines(profile: Any) -> list[str]:
    return [repr(profile)] if profile is not None else []


@_lines.register
def _(profile: WalkProfile) -> list[str]:
    return [
        f"{type(profile.rewriter).__name__}  {profile.rewriter}",
        f"  nodes (start, end, changed) ({profile.nodes_start}, {profile.nodes_end}, {profile.nb_changed})",
        f"  toposort time {profile.toposort_time:.6f}s",
        f"  loop time {profile.loop_time:.6f}s",
    ]


@_lines.register
def _(profile: MergeProfile) -> list[str]:
    return [
        "MergeRewriter",
        f"  merged nodes {profile.nb_merged}, merged constants {profile.nb_constant}, "
        f"rejected {profile.nb_fail}",
        f"  time {profile.replace_time:.6f}s",
    ]


@_lines.register
def _(profile: EquilibriumProfile) -> list[str]:
    node_rule_time = sum(s.time for s in profile.rules.values())
    graph_time = sum(s.time for s in profile.graph_rewriters.values())
    lines = [
        f"EquilibriumRewriter  {profile.name}",
        f"  time {profile.time:.3f}s for {len(profile.passes)} passes",
        f"  nodes (start, end, max) {profile.nodes_start} {profile.nodes_end} {profile.nodes_max}",
        f"  time in node rewriters {node_rule_time:.3f}s",
        f"  time in graph rewriters {graph_time:.3f}s",
        f"  time in merge {profile.merge_time:.3f}s ({profile.merges} merged, "
        f"{profile.merges_rejected} rejected)",
    ]
    if profile.stopped_early:
        lines.append(f"  stopped early: {profile.stopped_early}")
    for k, p in enumerate(profile.passes):
        applied = " ".join(f"({name!r}, {count})" for name, count in p.applied.most_common(5))
        more = " ..." if len(p.applied) > 5 else ""
        lines.append(
            f"  {k:3d} - {p.time:.3f}s {sum(p.applied.values())} ({p.graph_rewriter_time:.3f}s in graph "
            f"rewriters) - {p.nodes_at_start} nodes, {p.visited} visited - {applied}{more}".rstrip()
        )
    stats = {**profile.rules, **profile.graph_rewriters}
    used = sorted(((n, s) for n, s in stats.items() if s.applied), key=lambda kv: -kv[1].time)
    unused = sorted(((n, s) for n, s in stats.items() if not s.applied), key=lambda kv: -kv[1].time)
    lines.append("  time - times applied - nodes created - name:")
    lines.extend(f"  {s.time:.3f}s - {s.applied} - {s.nodes_created} - {name}" for name, s in used)
    unused_time = sum(s.time for _, s in unused)
    lines.append(f"  {unused_time:.3f}s - in {len(unused)} rewriters that were never applied:")
    lines.extend(f"    {s.time:.3f}s - {name} ({s.attempts} tries)" for name, s in unused)
    for label, field_name in (
        ("rewriters that raised", "errors"),
        ("relations stopped by their budget", "budget_exceeded"),
        ("answers of the wrong type skipped", "rejected_answers"),
    ):
        counts = [(n, getattr(s, field_name)) for n, s in stats.items() if getattr(s, field_name)]
        if counts:
            lines.append(f"  {label}: " + ", ".join(f"{n} ({c}x)" for n, c in counts))
    return lines


@_lines.register
def _(profile: SequenceProfile) -> list[str]:
    lines = [
        f"SequentialRewriter  {profile.name}  time {profile.time:.3f}s for "
        f"{profile.nodes_before}/{profile.nodes_after} nodes before/after rewriting",
        "  time - (name, class, index), in the order they ran",
    ]
    for name, cls, index, seconds, sub in sorted(profile.steps, key=lambda s: s[2]):
        lines.append(f"  {seconds:.6f}s - ({name!r}, {cls!r}, {index})")
        lines.extend("    " + line for line in _lines(sub))
    return lines

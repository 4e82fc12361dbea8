"""Graphviz pictures of an e-graph: each class a cluster of its e-nodes, edges from e-nodes to classes."""

from __future__ import annotations

from collections.abc import Iterable

from relwrite.engine.explore.egraph import EGraph


def egraph_dot(egraph: EGraph, roots: Iterable[int] | None = None, name: str = "egraph") -> str:
    """The DOT text of `egraph` (the classes reachable from `roots`, or all of them).

    Each class is a dashed cluster holding its e-nodes; an edge leads from an
    e-node to the class of each operand (to an invisible anchor node inside
    the cluster, clipped at its border).
    """
    classes = egraph.reachable(roots) if roots is not None else sorted(egraph.classes)
    lines = [f'digraph "{_escape(name)}" {{', "  compound=true;", "  node [shape=box, fontname=monospace];"]
    for c in classes:
        lines.append(f"  subgraph cluster_{c} {{")
        lines.append(f'    style=dashed; label="class {c}";')
        lines.append(f'    anchor_{c} [shape=point, style=invis, label=""];')
        for n in egraph.nodes(c):
            leaf = egraph.leaf(n)
            label = str(leaf) if leaf is not None else str(egraph.op(n))
            lines.append(f'    node_{n} [label="{_escape(label)}"];')
        lines.append("  }")
    for c in classes:
        for n in egraph.nodes(c):
            for k, operand in enumerate(egraph.children(n)):
                lines.append(f'  node_{n} -> anchor_{operand} [lhead=cluster_{operand}, label="{k}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')

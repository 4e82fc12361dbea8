"""Comparing rewrite results up to the order of operands: rules may return a sum's terms in any order."""

from __future__ import annotations

from relwrite.graph import ops
from relwrite.graph.basic import Variable
from relwrite.graph.printing import pprint


def ac_text(graph: Variable) -> str:
    """`graph` written with the operands of every add and mul sorted: equal for graphs equal up to the
    order of those operands (``ac_text(x + y) == ac_text(y + x)``).  Iterative: deep graphs are fine."""
    texts: dict[Variable, str] = {}
    stack = [graph]
    while stack:
        var = stack[-1]
        if var in texts:
            stack.pop()
            continue
        node = var.owner
        if node is None:
            texts[var] = pprint(var)
            stack.pop()
            continue
        missing = [i for i in node.inputs if i not in texts]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        args = [texts[i] for i in node.inputs]
        if node.op in (ops.add, ops.mul):
            args.sort()
        texts[var] = f"{node.op}({', '.join(args)})"
    return texts[graph]

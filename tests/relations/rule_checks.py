"""Checks the rule-module tests share: a rule's first answer either way, and the property their generated
graphs are held to: every answer a rule gives keeps the values of what it replaces (evaluated with the
NumPy backend on drawn inputs), forward and back, and the engine rewrites exactly where the rule answers."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from kanren import run, var

from relwrite.backends.numpy.function import numpy_function
from relwrite.engine import KanrenRelationSub
from relwrite.graph.basic import Constant, Variable, ancestors, graph_inputs
from relwrite.graph.printing import pprint
from relwrite.relations import Rule
from relwrite.relations.guards import is_ground
from relwrite.relations.pattern import can_replace, to_graph
from relwrite.relations.runtime import forward_matches
from relwrite.testing import input_values

FINITE = st.floats(-10, 10).filter(lambda v: v == 0 or abs(v) >= 2**-20)
"""Float inputs: finite and moderate, no subnormals (the rules' values are compared, not their edges)."""


def first_answer(relation: Any, graph: Variable, direction: str) -> Variable | None:
    """The first answer of `relation` run `direction` on `graph`, as a graph (None when there is none)."""
    q = var()
    found = run(1, q, relation(graph, q) if direction == "forward" else relation(q, graph))
    return to_graph(found[0], like=graph) if found else None


def assert_same_values(before: Variable, after: Variable, data: st.DataObject, finite_only: bool) -> None:
    """`after` computes what `before` does on drawn inputs: same dtype and shape, integers exactly, floats
    within sqrt(eps) of the largest magnitude `before` computes (rewrites reassociate); where `before`
    raises there is nothing to compare.  `finite_only`: compare only where `before` is finite."""
    found = [v for v in graph_inputs([before, after]) if not isinstance(v, Constant)]
    inputs = sorted(dict.fromkeys(found), key=lambda v: v.name or "")  # stable: two inputs may share a name
    floats = all(v.type.numpy_dtype.kind == "f" for v in inputs)
    values = data.draw(input_values(inputs, elements=FINITE if floats else None, min_len=2), label="inputs")
    steps = [v for v in ancestors([before]) if v.owner is not None and v is not before]
    with np.errstate(all="ignore"):
        try:
            left, *computed = map(np.asarray, numpy_function(inputs, [before, *steps])(*values))
        except Exception:  # an index out of range, an alloc of the wrong length: the left side fails
            return
        right = np.asarray(numpy_function(inputs, after)(*values))
    shown = (pprint(before), pprint(after), values)
    assert left.dtype == right.dtype and left.shape == right.shape, (*shown, left, right)
    if left.dtype.kind != "f":
        assert np.array_equal(left, right), (*shown, left, right)
        return
    tolerance = float(np.sqrt(np.finfo(left.dtype).eps))
    magnitudes = [
        np.abs(v[np.isfinite(v)].astype(np.float64)) for v in [left, *computed] if v.dtype.kind == "f"
    ]
    scale = 1 + max((float(np.max(m, initial=0)) for m in magnitudes), default=0)
    agree = np.isclose(left, right, rtol=tolerance, atol=tolerance * scale, equal_nan=True)
    if finite_only:
        agree |= ~np.isfinite(left)
    assert agree.all(), (*shown, left, right)


def assert_answers_keep_values(rule: Rule, graph: Variable, data: st.DataObject) -> Variable | None:
    """`rule`'s first answer forward on `graph` (returned) keeps its values, may replace it, and is what
    the engine takes; where the rule runs backward, its first left sides for `graph` and for that answer
    keep their values too.  Rules valid only where the left side is finite are compared there."""
    finite_only = rule.semantics in ("unsafe", "stabilizes") or "explore" in rule.tags
    rhs = first_answer(rule, graph, "forward")
    taken = KanrenRelationSub(rule).transform(None, graph.owner) if graph.owner is not None else False
    assert bool(taken) == (rhs is not None), (rule.name, pprint(graph), rhs)
    if rhs is not None:
        assert can_replace(graph, rhs), (rule.name, pprint(graph), str(graph.type), str(rhs.type))
        assert_same_values(graph, rhs, data, finite_only)
    if rule.backward:
        for right in [graph] if rhs is None else [graph, rhs]:
            q = var()
            for found in run(2, q, rule(q, right)):
                if is_ground(found):  # a left side with fresh variables has no values
                    assert_same_values(to_graph(found, like=right), right, data, finite_only)
    return rhs


def assert_screened_out_only_without_answer(rule: Rule, term: Variable) -> None:
    """A rule's screen and operand screen are necessary conditions: a term they refuse has no answer."""
    if rule.screen(term) and (rule.operand_screen is None or rule.operand_screen(term)):
        return
    assert next(forward_matches(rule.sides, term), None) is None, f"{rule.name} screened out {pprint(term)}"

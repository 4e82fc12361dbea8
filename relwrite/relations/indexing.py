"""Indexing rules: a subtensor that takes everything goes, and indexing moves below elementwise ops.

`useless_subtensor`: ``x[:, ::1] -> x`` (every axis taken whole, none
added); backward it writes `x` as ``x[:, :]``.  `subtensor_lift`:
``f(x, 2.0)[i] -> f(x[i], 2.0)``, the seed's local_subtensor_lift (compute
only the part that is read); backward it gathers the indexing again.  An
operand is indexed like the result only when it provably has the result's
shape (the one array operand, or static lengths all equal): an operand that
broadcasts would need its own index.
"""

from __future__ import annotations

from typing import Any

from unification import var

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable
from relwrite.graph.subtensor import Subtensor
from relwrite.relations.goals import Goal, along, conj, mappingo, nodeo, replaceableo
from relwrite.relations.registry import relation

CANON = ("canonicalize", "fast_run", "fast_compile")
FULL = ("slice", False, False, False)


def _takes_everything(op: Subtensor, index: tuple) -> bool:
    """Whether every pattern entry is a whole axis: `:`, or `::1` with a constant step of one."""
    steps = iter(index)
    for entry in op.idx_list:
        if not isinstance(entry, tuple) or entry[1] or entry[2]:
            return False
        if entry[3]:
            step = next(steps)
            if not (isinstance(step, Constant) and step.ndim == 0 and int(step.data) == 1):
                return False
    return True


def whole(parts: tuple) -> Variable | None:
    op, operands = parts
    if not isinstance(op, Subtensor) or not isinstance(operands, tuple) or not operands:
        return None
    return operands[0] if _takes_everything(op, operands[1:]) else None


def written_whole(x: Any) -> list[tuple]:
    """`x` as `x[:, ..., :]` (one whole slice per axis)."""
    if not isinstance(x, Variable) or x.ndim == 0:
        return []
    return [(Subtensor((FULL,) * x.ndim), (x,))]


@relation(
    CANON,
    tracks=(Subtensor,),
    examples=("x[:]", "m[:, ::1]"),
    types={"x": "vector", "m": "matrix"},
)
def useless_subtensor(lhs: Any, rhs: Any) -> Goal:
    """x[:, ::1] -> x: indexing that takes every axis whole is the array itself. Exact."""
    op, operands = var(prefix="op"), var(prefix="operands")
    return conj(
        along(lhs, nodeo(lhs, Subtensor, op, operands), mappingo((op, operands), rhs, whole, written_whole)),
        replaceableo(lhs, rhs),
    )


def _shaped_like(operand: Variable, result: Variable, arrays: list[Variable]) -> bool:
    """Whether `operand` of an elementwise node surely has the node's result shape (or is a scalar)."""
    if operand.ndim == 0:
        return True
    if operand.ndim != result.ndim:
        return False
    if len({id(a) for a in arrays}) == 1:
        return True  # the only array operand: the result has its shape
    return None not in operand.shape and operand.shape == result.shape


def lifted(parts: tuple) -> Variable | None:
    """(Subtensor, (f(a, b, ...), *index)) -> f(a[index], b[index], ...), scalars left as they are."""
    op, operands = parts
    if not isinstance(op, Subtensor) or not isinstance(operands, tuple) or not operands:
        return None
    inner, index = operands[0], operands[1:]
    node = inner.owner if isinstance(inner, Variable) else None
    if node is None or not isinstance(node.op, o.Elemwise) or len(node.outputs) != 1:
        return None
    arrays = [v for v in node.inputs if v.ndim > 0]
    if not arrays or not all(_shaped_like(v, inner, arrays) for v in node.inputs):
        return None
    return node.op(*(v if v.ndim == 0 else op(v, *index) for v in node.inputs))


def gathered(result: Any) -> list[tuple]:
    """The preimage of `lifted`: f(a[index], b[index]) -> (Subtensor, (f(a, b), *index))."""
    node = result.owner if isinstance(result, Variable) else None
    if node is None or not isinstance(node.op, o.Elemwise) or len(node.outputs) != 1:
        return []
    indexed = [v for v in node.inputs if v.owner is not None and isinstance(v.owner.op, Subtensor)]
    if not indexed or any(v.ndim > 0 and v not in indexed for v in node.inputs):
        return []
    parts = [v.owner for v in indexed]
    op, index = parts[0].op, tuple(parts[0].inputs[1:])
    if any(p.op != op or tuple(p.inputs[1:]) != index for p in parts):
        return []
    try:
        inner = node.op(*(v.owner.inputs[0] if v.owner in parts else v for v in node.inputs))
    except (TypeError, ValueError):
        return []
    return [(op, (inner, *index))]


@relation(
    CANON,
    tracks=(Subtensor,),
    examples=("exp(x)[1:]", "(x * 2.0)[::-1]", "(m + m)[1:, ::2]"),
    types={"x": "vector", "m": "matrix"},
)
def subtensor_lift(lhs: Any, rhs: Any) -> Goal:
    """f(x, 2.0)[i] -> f(x[i], 2.0): index before an elementwise op, computing only what is read.

    Operands that may broadcast against the result are left alone (the rule
    does not apply). Exact.
    """
    op, operands = var(prefix="op"), var(prefix="operands")
    return conj(
        along(lhs, nodeo(lhs, Subtensor, op, operands), mappingo((op, operands), rhs, lifted, gathered)),
        replaceableo(lhs, rhs),
    )

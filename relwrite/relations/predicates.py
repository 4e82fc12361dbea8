"""Predicates on graphs and terms: dtypes, constants, shapes, and whether operands may be regrouped.

Plain functions (no kanren): rules use them as pattern constraints and
`where` guards, and the goals and the operand algebra build on them.  One
constant test serves everything: `literal_value` reads a constant or a plain
number, `is_literal` compares it with a number everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from etuples.core import ExpressionTuple
from unification.variable import Var

from relwrite.graph import ops
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.terms import note_read
from relwrite.graph.types import fits


def is_logic_variable(value: Any) -> bool:
    """`unification.isvar` without its metaclass hook (hot paths call it): whether `value` is a
    logic variable (objects made logic variables by `unification.variables` are not used here)."""
    return Var in type(value).__mro__


def as_graph(value: Any) -> Any:
    """The graph object for a matched value: etuples are evaluated, the rest returned as is."""
    return value.evaled_obj if isinstance(value, ExpressionTuple) else value


NUMBER = (bool, int, float, np.number, np.bool_)


def literal_value(value: Any) -> np.ndarray | None:
    """The value of a constant term (a Constant or a plain number), or None."""
    value = as_graph(value)
    if isinstance(value, Constant):
        return value.data
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return np.asarray(value)
    return None


def is_literal(value: Any, number: Any) -> bool:
    """Whether `value` is a constant whose every element equals `number` (a NaN `number`: is NaN)."""
    data = literal_value(value)
    if data is None or data.size == 0:
        return False
    if number != number:  # a NaN in a pattern matches a NaN constant, which equals nothing
        return data.dtype.kind in "fc" and bool(np.isnan(data).all())
    if data.ndim == 0:  # the common case, without numpy's reduction machinery (compared in its dtype)
        return bool(data == number)
    return bool((data == number).all())


def broadcasts_into(small: Variable, big: Variable) -> bool:
    """Whether static shapes prove `small` never enlarges `big`'s shape when the two broadcast.

    True when `small` has no more dimensions and each of its lengths is 1 or
    a known length equal to `big`'s; unknown lengths prove nothing.
    """
    return fits(small.type.shape, big.type.shape)


def is_float(value: Any) -> bool:
    """Whether `value` is a graph variable of a floating dtype."""
    return isinstance(value, Variable) and value.type.numpy_dtype.kind == "f"


def is_signed(value: Any) -> bool:
    """Whether `value` is a graph variable of a signed integer or floating dtype (negation is exact)."""
    return isinstance(value, Variable) and value.type.numpy_dtype.kind in "if"


def is_zero_dimensional(value: Any) -> bool:
    """Whether `value` is a 0-d constant or a plain number (it cannot widen a shape it broadcasts into)."""
    data = literal_value(value)
    return data is not None and data.ndim == 0


def is_float_regroupable(value: Any) -> bool:
    """Whether `value` is a float add or mul whose operands may be regrouped (`regroupable`)."""
    return is_float(value) and operands_regroupable(value)


def is_signed_regroupable(value: Any) -> bool:
    """Whether `value` is a signed add or mul whose operands may be regrouped (negating it is exact)."""
    return is_signed(value) and operands_regroupable(value)


def float_var(name: str) -> dict:
    """The pattern variable `name`, accepted only for floating values."""
    return {"pattern": name, "constraint": is_float}


def signed_var(name: str) -> dict:
    """The pattern variable `name`, accepted only for signed integer or floating values."""
    return {"pattern": name, "constraint": is_signed}


def same_dtype_at(*path: int) -> Callable[[Any], bool]:
    """A constraint on a pattern's root: its dtype equals that of the subterm reached by input indices `path`.

    `same_dtype_at(0, 0)` on ``exp(log(x))`` compares the result with `x`, so
    a rule dropping the ops in between cannot change the dtype (log of an
    integer is a float).
    """

    def constraint(value: Any) -> bool:
        node_value = value
        for index in path:
            if not isinstance(node_value, Variable) or node_value.owner is None:
                return False
            node_value = node_value.owner.inputs[index]
        return isinstance(node_value, Variable) and node_value.dtype == value.dtype

    constraint.__name__ = f"same_dtype_at{path}"
    return constraint


def regroupable(operands: Sequence[Variable]) -> bool:
    """Whether operands of an add or mul may be regrouped, reordered or moved out of it: they share one dtype.

    add and mul fold their operands left to right, promoting at each step as
    numpy does, so with mixed dtypes a partial result can be narrower than
    the whole: in ``add(-1, y, exp(x))`` with an int8 `y`, ``-1 + y`` wraps
    around in int8 before the float64 term widens the sum, and no other
    grouping computes that.  With one dtype every grouping computes in it:
    exactly for integers (wrap-around addition and multiplication are
    associative and commutative), up to rounding for floats (the rule's
    semantics then say `reassociates`).  Every rule that regroups the
    operands of an add or mul checks this.
    """
    if not operands:
        return False
    dtype = operands[0].dtype
    return all(v.dtype == dtype for v in operands)


def operands_regroupable(value: Any) -> bool:
    """Whether `value` is computed by an add or mul whose operands are `regroupable` (a constraint)."""
    inputs = (
        node_inputs(value, ops.add) or node_inputs(value, ops.mul) if isinstance(value, Variable) else None
    )
    return inputs is not None and regroupable(inputs)


def operands_reorderable(value: Any) -> bool:
    """Whether the operands of the add or mul computing `value` may take another order (a constraint):
    two of them (their sum is the same either way round), or any number that are `regroupable`; one
    moved first among three of mixed dtypes changes what the left-to-right fold computes."""
    inputs = (
        node_inputs(value, ops.add) or node_inputs(value, ops.mul) if isinstance(value, Variable) else None
    )
    return inputs is not None and (len(inputs) == 2 or regroupable(inputs))


def node_inputs(
    value: Variable, op: Op | None = None, kind: type | None = None
) -> tuple[Variable, ...] | None:
    """The inputs of the single-output node computing `value` when its op is `op` (or of class `kind`)."""
    node = value.owner
    if node is None or len(node.outputs) != 1:
        return None
    if (op is not None and node.op is not op and node.op != op) or (
        kind is not None and not isinstance(node.op, kind)
    ):
        return None
    return tuple(note_read(node).inputs)


def filled_constant(value: Variable) -> tuple[list[Variable], Constant] | None:
    """(models, c) when `value` is a constant `c` broadcast by fills, fill(m1, fill(m2, c)); else None.

    Such a value is `c` everywhere, shaped by the models: cancelling rules
    leave zeros and ones of this form.
    """
    models = []
    while not isinstance(value, Constant):
        inputs = node_inputs(value, ops.fill)
        if inputs is None:
            return None
        models.append(inputs[0])
        value = inputs[1]
    return models, value


def filled_by(models: Sequence[Variable], value: Variable) -> Variable:
    """`value` broadcast by each of `models` in turn, fill(m1, fill(m2, value)) (`filled_constant` undone)."""
    for model in reversed(models):
        value = ops.fill(model, value)
    return value


def equals_everywhere(constant: Constant, number: Any) -> bool:
    """Whether every element of `constant` (at least one) equals `number`."""
    data = constant.data
    if data.ndim == 0:
        return bool(data.item() == number)
    return data.size > 0 and bool(np.all(data == number))

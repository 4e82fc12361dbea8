"""`from_pytensor` and `to_pytensor`: the two walks of the bridge, in topological order without recursion.

Each walk converts node by node through its table (`inbound`, `outbound`);
a PyTensor node the table has no counterpart for is kept whole as an
`OpaqueOp`.  Inputs are mapped, not copied: `from_pytensor` says which
relwrite variable stands for each PyTensor input, and `to_pytensor` takes
that same mapping to build over the original PyTensor inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from pytensor.graph.basic import Apply as PtApply
from pytensor.graph.basic import Constant as PtConstant
from pytensor.graph.basic import Variable as PtVariable
from pytensor.graph.fg import FunctionGraph as PtFunctionGraph
from pytensor.tensor.type_other import MakeSlice, NoneTypeT, SliceType

from relwrite.backends.numpy.impls import EvaluationError, evaluate
from relwrite.graph import ops
from relwrite.graph.basic import Constant, Variable, io_toposort
from relwrite.graph.types import TensorType
from relwrite.interop.pytensor.inbound import converter_for
from relwrite.interop.pytensor.opaque import OpaqueOp
from relwrite.interop.pytensor.outbound import build
from relwrite.interop.pytensor.types import (
    pytensor_constant,
    pytensor_input,
    relwrite_constant,
    relwrite_type,
)


class Converted(NamedTuple):
    """What `from_pytensor` gives: the relwrite `outputs` (one variable for one PyTensor variable, else a
    list) and `inputs`, each PyTensor input -> the relwrite variable standing for it."""

    outputs: Variable | list[Variable]
    inputs: dict[PtVariable, Variable]


def _pytensor_outputs(graph: Any) -> tuple[list[PtVariable], list[PtVariable]]:
    """(outputs, declared inputs) of what `from_pytensor` accepts; a TypeError naming anything else."""
    if isinstance(graph, PtFunctionGraph):
        return list(graph.outputs), list(graph.inputs)
    items = [graph] if isinstance(graph, PtVariable) else graph
    if isinstance(items, (list, tuple)) and items and all(isinstance(v, PtVariable) for v in items):
        return list(items), []
    raise TypeError(
        "from_pytensor takes a PyTensor variable, a list of them or a PyTensor FunctionGraph, "
        f"got {type(graph).__name__}: {graph!r:.80}"
    )


def _pytensor_nodes(outputs: Iterable[PtVariable]) -> list[PtApply]:
    """The apply nodes the outputs depend on, dependencies first (an explicit stack: graphs are deep)."""
    order: list[PtApply] = []
    seen: set[PtApply] = set()
    stack: list[tuple[PtApply, bool]] = [(v.owner, False) for v in reversed(list(outputs)) if v.owner]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        stack.extend((v.owner, False) for v in reversed(node.inputs) if v.owner and v.owner not in seen)
    return order


_INDEX = TensorType("int64", ())


def _leaf(var: PtVariable) -> Any:
    """A PyTensor variable no node computes: a constant (a slice or `None` index as Python's), or an input."""
    if isinstance(var.type, NoneTypeT):
        return None
    if isinstance(var, PtConstant):
        if isinstance(var.type, SliceType):
            bounds = (var.data.start, var.data.stop, var.data.step)
            return slice(*(None if b is None else Constant(_INDEX, b) for b in bounds))
        return relwrite_constant(var)
    return relwrite_type(var)(name=var.name)


def _convert_node(node: PtApply, args: list[Any]) -> list[Any]:
    """The relwrite outputs of one PyTensor node, through the table or as an OpaqueOp; a node whose inputs
    are all constants is folded to constants (PyTensor builds split sizes and shapes that way, and its
    static shapes follow from their values, as relwrite's do only from constants)."""
    if isinstance(node.op, MakeSlice):
        return [slice(*args)]
    outs = None
    convert = converter_for(node.op)
    if convert is not None:
        try:
            outs = convert(node.op, node, args)
        except (TypeError, ValueError, IndexError):
            outs = None  # this instance has no counterpart (a dtype or a static length relwrite lacks)
    if outs is None:
        for var, arg in zip(node.inputs, args):
            if not isinstance(arg, Variable):
                raise TypeError(
                    f"PyTensor node {node} has no relwrite counterpart and its input {var} "
                    f"of type {var.type} cannot be passed to an opaque op"
                )
        shapes = [getattr(v.type, "shape", ()) for v in node.outputs]
        outs = OpaqueOp(node.op, [v.type for v in node.inputs], shapes).make_node(*args).outputs
    else:
        outs = [
            ops.cast(o, relwrite_type(v).dtype) if o.dtype != v.type.dtype else o
            for o, v in zip(outs, node.outputs)
        ]
    if args and all(isinstance(a, Constant) for a in args):
        return [_folded(o) for o in outs]
    return outs


def _folded(var: Variable) -> Variable:
    """`var` computed from constants, as a constant (the variable itself where evaluating it fails)."""
    env: dict[Variable, Any] = {}
    for node in io_toposort([], [var]):
        arrays = [v.data if isinstance(v, Constant) else env[v] for v in node.inputs]
        try:
            env.update(zip(node.outputs, evaluate(node, arrays)))
        except EvaluationError:
            return var
    value = env.get(var)
    return var if value is None else Constant(TensorType(var.dtype, np.shape(value)), value, name=var.name)


def from_pytensor(graph: PtVariable | Sequence[PtVariable] | PtFunctionGraph) -> Converted:
    """relwrite variables computing what PyTensor `graph` computes (see `Converted`).

    Constants, dtypes and static shapes carry over; an op relwrite has no
    counterpart for becomes an `OpaqueOp` node.  A FunctionGraph's inputs are
    all mapped, used or not, in its order.
    """
    outputs, declared = _pytensor_outputs(graph)
    env: dict[PtVariable, Any] = {}
    inputs: dict[PtVariable, Variable] = {}

    def value(var: PtVariable) -> Any:
        if var not in env:
            env[var] = _leaf(var)
            if var.owner is None and not isinstance(var, PtConstant) and isinstance(env[var], Variable):
                inputs[var] = env[var]
        return env[var]

    for var in declared:
        value(var)
    for node in _pytensor_nodes(outputs):
        env.update(zip(node.outputs, _convert_node(node, [value(v) for v in node.inputs])))
    converted = [value(v) for v in outputs]
    for var, out in zip(outputs, converted):
        if not isinstance(out, Variable):
            raise TypeError(f"PyTensor output {var} of type {var.type} has no relwrite counterpart")
    single = isinstance(graph, PtVariable)
    return Converted(converted[0] if single else converted, inputs)


def to_pytensor(
    outputs: Variable | Sequence[Variable], inputs: Mapping[PtVariable, Variable] | None = None
) -> PtVariable | list[PtVariable]:
    """PyTensor variables computing what the relwrite `outputs` compute (one for one, a list for a list).

    `inputs` maps PyTensor variables to the relwrite inputs standing for them
    (`from_pytensor`'s mapping): those are used as they are; any other
    relwrite input becomes a fresh PyTensor input of its name and type.
    """
    single = isinstance(outputs, Variable)
    items = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    for out in items:
        if not isinstance(out, Variable):
            raise TypeError(f"to_pytensor takes relwrite variables, got {type(out).__name__}: {out!r:.80}")
    env: dict[Variable, PtVariable] = {rw: p for p, rw in (inputs or {}).items()}

    def value(var: Variable) -> PtVariable:
        if var not in env:
            env[var] = pytensor_constant(var) if isinstance(var, Constant) else pytensor_input(var)
        return env[var]

    for node in io_toposort(list(env), items):
        env.update(zip(node.outputs, build(node.op, node, [value(v) for v in node.inputs])))
    results = [value(v) for v in items]
    return results[0] if single else results


def as_relwrite(expr: PtVariable) -> tuple[Variable, Any]:
    """One PyTensor variable as a relwrite variable, and the way back for relwrite graphs over its inputs
    (what `explore`, `best_form` and `improve_benchmark` use to take PyTensor graphs)."""
    if not isinstance(expr, PtVariable):
        raise TypeError(f"as_relwrite takes one PyTensor variable, got {type(expr).__name__}: {expr!r:.80}")
    out, inputs = from_pytensor(expr)
    return out, lambda graph: to_pytensor(graph, inputs)

"""Shape inference through every op, and `ShapeFeature`, which keeps every variable's lengths.

`infer_shape(node, input_shapes)` gives the lengths of a node's outputs as
scalar int64 graphs of its inputs' lengths, so a length can be computed
without the tensor (shape promotion: `shape(log(x))` is `shape(x)`).  Known
static lengths become constants; an op whose lengths depend on its values
(none of relwrite's so far) or that has no rule here gives `shape_i` of its
own output.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import singledispatch
from typing import Any

from relwrite.graph import ops
from relwrite.graph.basic import Apply, Constant, Op, Variable, constant
from relwrite.graph.fg import Feature
from relwrite.graph.shape import Shape, Shape_i, length
from relwrite.graph.subtensor import ARRAY, INT, NEWAXIS, AdvancedSubtensor, IncSubtensor, Subtensor

Lengths = tuple[Variable, ...]


def _constant(n: int) -> Variable:
    return constant(int(n), dtype="int64")


def _is_one(v: Variable) -> bool:
    return isinstance(v, Constant) and v.ndim == 0 and int(v.data) == 1


def _broadcast_length(lengths: Sequence[Variable]) -> Variable:
    """NumPy's broadcast of some lengths: a length of one gives way to the other (0 included)."""
    kept = [v for v in lengths if not _is_one(v)]
    if not kept:
        return _constant(1)
    known = [v for v in kept if isinstance(v, Constant)]
    if known:
        return known[0]
    result = kept[0]
    for other in kept[1:]:
        if other is not result:
            result = ops.switch(ops.eq(result, 1), other, result)
    return result


@singledispatch
def _infer(op: Op, node: Apply, shapes: list[Lengths]) -> list[Lengths] | None:
    """The outputs' lengths from the inputs' (None: no rule for this op)."""
    return None


@_infer.register
def _(op: ops.Elemwise, node: Apply, shapes: list[Lengths]) -> list[Lengths] | None:
    if isinstance(op, ops.Composite) and op.own_shapes:
        return None
    ndim = node.outputs[0].ndim
    out = []
    for axis in range(ndim):
        lengths = [s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0]
        out.append(_broadcast_length(lengths))
    return [tuple(out)] * len(node.outputs)


@_infer.register
def _(op: ops.Reduce, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    (x,) = node.inputs
    axes = range(x.ndim) if op.axis is None else {a % x.ndim for a in op.axis}
    return [tuple(n for a, n in enumerate(shapes[0]) if a not in axes)]


@_infer.register
def _(op: ops.Argmax, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    x = node.inputs[0]
    if op.axis is None:
        return [()]
    return [tuple(n for a, n in enumerate(shapes[0]) if a != op.axis % x.ndim)]


@_infer.register(ops.Softmax)
@_infer.register(ops.Assert)
@_infer.register(IncSubtensor)
def _(op: Op, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    return [shapes[0]]


@_infer.register
def _(op: ops.DimShuffle, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    return [tuple(_constant(1) if o == "x" else shapes[0][o] for o in op.new_order)]


@_infer.register
def _(op: ops.Reshape, node: Apply, shapes: list[Lengths]) -> list[Lengths] | None:
    if -1 not in op.shape:
        return [tuple(_constant(n) for n in op.shape)]
    return None


@_infer.register
def _(op: ops.Alloc, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    return [tuple(_constant(n) for n in op.shape)]


@_infer.register
def _(op: ops.Join, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    ndim = node.outputs[0].ndim
    along = op.axis % ndim
    out = []
    for axis in range(ndim):
        if axis == along:
            out.append(ops.add(*(s[axis] for s in shapes)) if len(shapes) > 1 else shapes[0][axis])
        else:
            out.append(next((s[axis] for s in shapes if isinstance(s[axis], Constant)), shapes[0][axis]))
    return [tuple(out)]


@_infer.register(ops.Dot)
@_infer.register(ops.Dot22)
def _(op: Op, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    a, b = shapes
    return [(*a[:-1], *b[1:])]


@_infer.register
def _(op: ops.Gemm, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    z, _, x, y, _ = shapes
    return [(_broadcast_length([z[0], x[0]]), _broadcast_length([z[1], y[1]]))]


@_infer.register
def _(op: ops.Gemv, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    y, _, a, _, _ = shapes
    return [(_broadcast_length([y[0], a[0]]),)]


@_infer.register
def _(op: ops.Ger, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    a, _, x, y = shapes
    return [(_broadcast_length([a[0], x[0]]), _broadcast_length([a[1], y[0]]))]


@_infer.register
def _(op: Shape, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    return [(_constant(len(shapes[0])),)]


@_infer.register
def _(op: Shape_i, node: Apply, shapes: list[Lengths]) -> list[Lengths]:
    return [()]


@_infer.register
def _(op: Subtensor, node: Apply, shapes: list[Lengths]) -> list[Lengths] | None:
    """Whole axes, new axes and dropped axes are known; a sliced axis only when its static length is."""
    out: list[Variable] = []
    axis, result = 0, node.outputs[0]
    for entry in op.idx_list:
        if entry == NEWAXIS:
            out.append(_constant(1))
            continue
        if entry == INT:
            axis += 1
            continue
        if entry == ARRAY:
            return None
        whole = not any(entry[1:])
        out.append(shapes[0][axis] if whole else length(result, len(out)))
        axis += 1
    out.extend(shapes[0][axis:])
    return [tuple(out)]


@_infer.register
def _(op: AdvancedSubtensor, node: Apply, shapes: list[Lengths]) -> None:
    return None


def infer_shape(node: Apply, input_shapes: Sequence[Lengths] | None = None) -> list[Lengths]:
    """The lengths of each output of `node` as scalar int64 graphs (of its inputs' lengths when `input_shapes`
    are not given); static lengths are constants, and a length no rule gives is `shape_i` of the output."""
    if input_shapes is None:
        input_shapes = [tuple(length(v, i) for i in range(v.ndim)) for v in node.inputs]
    found = _infer(node.op, node, list(input_shapes))
    results = []
    for k, out in enumerate(node.outputs):
        lengths = found[k] if found is not None else tuple(Shape_i(i)(out) for i in range(out.ndim))
        results.append(
            tuple(_constant(known) if known is not None else n for known, n in zip(out.type.shape, lengths))
        )
    return results


class ShapeFeature(Feature):
    """Every variable's lengths as scalar graphs of the graph's inputs' lengths, kept as nodes come in.

    `shape_of[var]` is a tuple of int64 scalar Variables (constants where
    static shapes know); `shape_tuple(var)` the same, computed on demand for a
    variable the graph has not seen.  Inputs' unknown lengths are
    `shape_i(input, i)`.  Graphs built here are not part of the graph: they
    are what a rewrite may put in place of a `shape_i` of an inner variable.
    """

    def __init__(self) -> None:
        self.shape_of: dict[Variable, Lengths] = {}

    def on_attach(self, fgraph: Any) -> None:
        self.shape_of = {}
        for var in fgraph.inputs:
            self._leaf(var)
        for node in fgraph.toposort():
            self.on_import(fgraph, node, "on_attach")

    def on_detach(self, fgraph: Any) -> None:
        self.shape_of = {}

    def _leaf(self, var: Variable) -> Lengths:
        lengths = tuple(length(var, i) for i in range(var.ndim))
        self.shape_of[var] = lengths
        return lengths

    def shape_tuple(self, var: Variable) -> Lengths:
        known = self.shape_of.get(var)
        if known is not None:
            return known
        if var.owner is None:
            return self._leaf(var)
        self._import(var.owner)
        return self.shape_of[var]

    def on_import(self, fgraph: Any, node: Apply, reason: Any) -> None:
        self._import(node)

    def _import(self, node: Apply) -> None:
        """Infer the shapes of `node` and of any ancestor not seen yet (with a stack: no recursion)."""
        stack = [node]
        while stack:
            current = stack[-1]
            missing = [v.owner for v in current.inputs if v not in self.shape_of and v.owner is not None]
            missing = [m for m in missing if any(o not in self.shape_of for o in m.outputs)]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            if all(o in self.shape_of for o in current.outputs):
                continue
            shapes = [self.shape_of.get(v) or self._leaf(v) for v in current.inputs]
            for out, lengths in zip(current.outputs, infer_shape(current, shapes)):
                self.shape_of[out] = lengths

    def on_prune(self, fgraph: Any, node: Apply, reason: Any) -> None:
        for out in node.outputs:
            self.shape_of.pop(out, None)

    def on_change_input(
        self, fgraph: Any, node: Any, i: int, old: Variable, new: Variable, reason: Any
    ) -> None:
        self.shape_tuple(new)

    def clone(self) -> ShapeFeature:
        return ShapeFeature()


def promoted_shape(var: Variable) -> Variable | None:
    """`shape(var)` without computing `var`: `shape(y)` when each length is y's, else the lengths stacked
    (inferred from the graph's inputs up); None when `var` has no owner or some length needs `var` itself."""
    if var.owner is None or var.ndim == 0:
        return None
    lengths = ShapeFeature().shape_tuple(var)
    if any(_reads(n, var) for n in lengths):
        return None
    sources = {n.owner.inputs[0] for n in lengths if n.owner is not None and isinstance(n.owner.op, Shape_i)}
    if len(sources) == 1:
        (source,) = sources
        if source.ndim == len(lengths) and all(
            n.owner is not None and isinstance(n.owner.op, Shape_i) and n.owner.op.i == k
            for k, n in enumerate(lengths)
        ):
            return Shape()(source)
    return ops.stack(list(lengths))


def promoted_length(var: Variable, i: int) -> Variable | None:
    """`shape_i(var, i)` without computing `var` (None when the length needs `var` itself)."""
    if var.owner is None:
        return None
    found = ShapeFeature().shape_tuple(var)[i]
    return None if _reads(found, var) else found


def _reads(graph: Variable, var: Variable) -> bool:
    """Whether `graph` depends on `var` (a walk with a stack)."""
    stack, seen = [graph], set()
    while stack:
        v = stack.pop()
        if v is var:
            return True
        if v.owner is not None and v.owner not in seen:
            seen.add(v.owner)
            stack.extend(v.owner.inputs)
    return False

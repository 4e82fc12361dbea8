"""Shape rules: never compute a tensor only to learn its shape.

`shape_promotion`: ``shape(log(x)) -> shape(x)`` and `shape_i_promotion`:
``shape_i(x + y, 0)`` -> the length it broadcasts to, from
`relwrite.graph.shape_inference.infer_shape` (Aesara's shape promotion and
local_track_shape_i); `shape_i_of_shape`: ``shape(x)[i] -> shape_i(x, i)``
(local_shape_to_shape_i); `known_shape` and `known_length`: a shape or length
that static types know is a constant.  A rule's left side has one head, so
each rule on Shape has its twin on Shape_i.  `reshape_lift` moves a reshape
below a unary elementwise op, toward the inputs.
"""

from __future__ import annotations

import numpy as np

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable, constant
from relwrite.graph.shape import Shape, Shape_i
from relwrite.graph.shape_inference import promoted_length, promoted_shape
from relwrite.graph.subtensor import INT, Subtensor
from relwrite.relations.registry import CANON, rule
from relwrite.relations.runtime import Computed

PROMOTION_TYPES = {"x": "vector", "y": "vector", "m": "matrix"}

# shape inference reads the graph below var (its lengths come from its inputs', at any depth): the
# compute reads structure
shape_promotion = rule(
    "shape_promotion",
    (Shape(), "var"),
    "promoted",
    CANON,
    keeps_type=True,
    compute={"promoted": promoted_shape},
    examples=("shape(log(x))", "shape(exp(m).T)"),
    types=PROMOTION_TYPES,
    doc="""shape(f(x)) -> shape(x), or the lengths of f(x, y) from x's and y's: no tensor computed only
    for its shape. Exact where the left side is defined (a shape asks nothing of the values).""",
)

# as shape_promotion, the compute reads the graph below var
shape_i_promotion = rule(
    "shape_i_promotion",
    (Shape_i.pattern(i="i"), "var"),
    "promoted",
    CANON,
    keeps_type=True,
    compute={"promoted": promoted_length},
    examples=("shape_i(x + y, 0)", "shape_i(sum(m, axis=0), 0)"),
    types=PROMOTION_TYPES,
    doc="""shape_i(f(x, y), i) -> its length from x's and y's: no tensor computed only for its shape.
    Exact where the left side is defined.""",
)


def shape_axis(x: Variable, i: Variable) -> int | None:
    """The axis of `x` a literal index `i` into its shape reads (counted from the start), else None."""
    if not isinstance(i, Constant) or i.data.ndim:
        return None
    index = int(i.data)
    return index % x.ndim if -x.ndim <= index < x.ndim else None


def shape_index(axis: int) -> list[dict]:
    """The preimage of `shape_axis`: the index `axis` itself, an int64 constant."""
    return [{"i": constant(axis, dtype="int64")}]


shape_i_of_shape = rule(
    "shape_i_of_shape",
    (Subtensor.pattern(idx_list=(INT,)), (Shape(), "x"), "i"),
    (Shape_i.pattern(i="axis"), "x"),
    CANON,
    keeps_type=True,
    compute={"axis": Computed(shape_axis, inverse=shape_index)},
    examples=("shape(m)[1]", "shape(x)[0]"),
    types={"x": "vector", "m": "matrix"},
    doc="shape(x)[i] -> shape_i(x, i): one length read directly. Exact.",
)


def static_shape(x: Variable) -> Variable | None:
    """The shape of `x` as a constant, where its static type knows every length."""
    return None if None in x.type.shape else constant(np.array(x.type.shape, dtype=np.int64))


known_shape = rule(
    "known_shape",
    (Shape(), "x"),
    "value",
    CANON,
    keeps_type=True,
    compute={"value": static_shape},
    examples=("shape(t)",),
    types={"t": "(2,3)"},
    doc="shape(x) -> its constant value, where types know. Exact.",
)


def static_length(i: int, x: Variable) -> Variable | None:
    """Length `i` of `x` as a constant, where its static type knows it."""
    return None if x.type.shape[i] is None else constant(x.type.shape[i], dtype="int64")


known_length = rule(
    "known_length",
    (Shape_i.pattern(i="i"), "x"),
    "value",
    CANON,
    keeps_type=True,
    compute={"value": static_length},
    examples=("shape_i(t, 1)",),
    types={"t": "(2,3)"},
    doc="shape_i(x, i) -> its constant length, where types know. Exact.",
)


# -- lengths are never negative --------------------------------------------------------------------

TRUE, FALSE = constant(np.True_), constant(np.False_)


def is_nonpositive(value: Variable) -> bool:
    """Whether `value` is a 0-d constant number <= 0 (so a length, never negative, is >= it; NaN is not)."""
    if not isinstance(value, Constant) or value.data.ndim or value.type.numpy_dtype.kind not in "iuf":
        return False
    return bool(value.data <= 0)


is_nonpositive.heads = (Constant,)
NONPOSITIVE = {"pattern": "c", "constraint": is_nonpositive}
LENGTH = (Shape_i.pattern(i="i"), "x")


def _length_comparison(name: str, lhs: tuple, result: Constant, example: str) -> object:
    truth = "true" if result is TRUE else "false"
    return rule(
        name,
        lhs,
        result,
        CANON,
        keeps_type=True,
        examples=(example,),
        types={"x": "vector", "m": "matrix"},
        doc=f"{example} -> {truth}, and likewise against any constant c <= 0: a length is never"
        " negative. Exact.",
    )


length_ge_nonpositive = _length_comparison(
    "length_ge_nonpositive", (o.ge, LENGTH, NONPOSITIVE), TRUE, "shape_i(x, 0) >= 0"
)
nonpositive_le_length = _length_comparison(
    "nonpositive_le_length", (o.le, NONPOSITIVE, LENGTH), TRUE, "0 <= shape_i(m, 1)"
)
length_lt_nonpositive = _length_comparison(
    "length_lt_nonpositive", (o.lt, LENGTH, NONPOSITIVE), FALSE, "shape_i(x, 0) < 0"
)
nonpositive_gt_length = _length_comparison(
    "nonpositive_gt_length", (o.gt, NONPOSITIVE, LENGTH), FALSE, "0 > shape_i(m, 1)"
)


def clamp_keeps_length(cmp: object, c: Constant, b: Variable) -> bool:
    """Whether switch(cmp(length, c), b, length) is the length: cmp is < or <= against c <= 0, and where
    the condition can hold (length <= 0, i.e. 0) the branch b is 0 too."""
    if cmp == o.lt or (cmp == o.le and c.data < 0):
        return True
    return cmp == o.le and isinstance(b, Constant) and not b.data.ndim and bool(b.data == 0)


length_clamp_switch = rule(
    "length_clamp_switch",
    (o.switch, ("cmp", LENGTH, NONPOSITIVE), "b", LENGTH),
    LENGTH,
    CANON,
    keeps_type=True,
    where=clamp_keeps_length,
    examples=("switch(shape_i(x, 0) <= 0, 0, shape_i(x, 0))", "switch(shape_i(m, 1) < 0, 0, shape_i(m, 1))"),
    types={"x": "vector", "m": "matrix"},
    doc="""switch(length <= 0, 0, length) -> length (and < 0, or a negative bound, with any branch): a
    length is never negative, so clamping it at 0 keeps it. Exact.""",
)

length_max_nonpositive = rule(
    "length_max_nonpositive",
    (o.maximum, LENGTH, NONPOSITIVE),
    LENGTH,
    CANON,
    keeps_type=True,
    examples=("maximum(shape_i(x, 0), 0)",),
    types={"x": "vector"},
    doc="maximum(length, c) -> length for a constant c <= 0: a length is never negative. Exact.",
)

nonpositive_max_length = rule(
    "nonpositive_max_length",
    (o.maximum, NONPOSITIVE, LENGTH),
    LENGTH,
    CANON,
    keeps_type=True,
    examples=("maximum(0, shape_i(x, 0))",),
    types={"x": "vector"},
    doc="maximum(c, length) -> length for a constant c <= 0: a length is never negative. Exact.",
)


def is_unary_elementwise(op: o.Op) -> bool:
    """Whether `op` maps each element of its one input to one element (casts and fused loops included)."""
    return isinstance(op, o.Elemwise) and op.nin == 1 and len(getattr(op, "outputs", (None,))) == 1


reshape_lift = rule(
    "reshape_lift",
    (o.Reshape.pattern(shape="shape"), ("op", "x")),
    ("op", (o.Reshape.pattern(shape="shape"), "x")),
    (*CANON, "specialize"),
    where=is_unary_elementwise,
    examples=("reshape(softplus(x), (2, 3))", "reshape(exp(m), (-1,))", "reshape(cast(m, 'float32'), (6,))"),
    types={"x": "vector", "m": "matrix"},
    doc="""reshape(f(x), shape) -> f(reshape(x, shape)) for every unary elementwise op f (PyTensor's
    local_reshape_lift), and back: f of a reshape is the reshape of f.  The reshape moves toward the
    inputs, where it meets other reshapes and the rules that read f(x) see through it
    (log(1 - reshape(sigmoid(x))) -> -softplus(reshape(x))).  Exact.""",
)

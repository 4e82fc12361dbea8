"""Hypothesis strategies for relwrite graphs: tensor types, arrays of a type, expression graphs, inputs.

They let a test say "for any graph over these ops, on any inputs of these
types" instead of listing cases by hand::

    from hypothesis import given, strategies as st
    from relwrite.testing import expression_graphs, input_values

    @given(expression_graphs(), st.data())
    def test_my_rewrite(graph, data):
        inputs, output = graph
        values = data.draw(input_values(inputs))
        ...
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp

from relwrite.graph import ops as graph_ops
from relwrite.graph.basic import Op, Variable, constant, type_from_spec
from relwrite.graph.types import TensorType

DEFAULT_ELEMWISE_OPS: tuple[Op, ...] = (
    graph_ops.add,
    graph_ops.mul,
    graph_ops.sub,
    graph_ops.true_div,
    graph_ops.neg,
    graph_ops.exp,
    graph_ops.log,
    graph_ops.sqrt,
    graph_ops.sqr,
    graph_ops.tanh,
    graph_ops.sin,
    graph_ops.cos,
    graph_ops.abs,
    graph_ops.maximum,
)
"""The elementwise ops `expression_graphs` draws from unless told otherwise."""

DEFAULT_INPUT_TYPE = TensorType("float64", (None,))
"""The type of `expression_graphs`' inputs unless told otherwise: float64 vectors."""

FLOAT_BOUND = 1e3
"""Default magnitude bound of generated floats: large enough to be interesting, small enough for exp/mul."""

_SMALL_CONSTANTS = {
    "f": (-1.0, 0.5, 1.0, 2.0, 3.0),
    "i": (-1, 1, 2, 3),
    "u": (1, 2, 3),
    "b": (False, True),
}


def _check_lengths(min_len: int, max_len: int) -> None:
    if not 0 <= min_len <= max_len:
        raise InvalidArgument(f"need 0 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")


@lru_cache(maxsize=64)
def _lengths(min_len: int, max_len: int) -> st.SearchStrategy[int]:
    """Lengths in min_len..max_len (one strategy object per range: see `_array_of`)."""
    return st.integers(min_len, max_len)


def tensor_types(
    dtypes: Sequence[str] = ("float64",), max_ndim: int = 2, max_len: int = 4, min_ndim: int = 0
) -> st.SearchStrategy[TensorType]:
    """TensorTypes of the given dtypes and rank `min_ndim..max_ndim`.

    Each static length is an int in `1..max_len` or, about half the time, None (unknown).
    """
    if not dtypes:
        raise InvalidArgument("tensor_types needs at least one dtype")
    for dtype in dtypes:
        TensorType(dtype)  # a clear error for an unsupported dtype, now rather than at draw time
    if not 0 <= min_ndim <= max_ndim:
        raise InvalidArgument(f"need 0 <= min_ndim <= max_ndim, got {min_ndim}, {max_ndim}")
    if max_len < 1:
        raise InvalidArgument(f"tensor_types needs max_len >= 1, got {max_len}")
    length = st.none() | st.integers(1, max_len)
    shapes = st.integers(min_ndim, max_ndim).flatmap(lambda ndim: st.tuples(*[length] * ndim))
    return st.builds(TensorType, st.sampled_from(tuple(dtypes)), shapes)


def _elements(dtype: np.dtype, finite: bool) -> st.SearchStrategy | None:
    """Default elements: finite floats of moderate size, or None for hypothesis' own choice."""
    if dtype.kind != "f":
        return None
    if finite:
        return st.floats(-FLOAT_BOUND, FLOAT_BOUND, width=dtype.itemsize * 8)
    return st.floats(width=dtype.itemsize * 8, allow_nan=True, allow_infinity=True)


@lru_cache(maxsize=1024)
def _array_of(
    dtype: np.dtype, shape: tuple[int, ...], elements: st.SearchStrategy | None, finite: bool
) -> st.SearchStrategy[np.ndarray]:
    """The arrays strategy of one dtype and shape, made once: hypothesis validates every strategy
    object it draws from (a filtered `elements` has its filter's source read again), so one made
    afresh at each draw cost a third of a rule's property test."""
    if elements is None:
        elements = _elements(dtype, finite)
    return hnp.arrays(dtype, shape, elements=elements)


def arrays(
    tensor_type: TensorType | str,
    elements: st.SearchStrategy | None = None,
    finite: bool = True,
    min_len: int = 1,
    max_len: int = 4,
) -> st.SearchStrategy[np.ndarray]:
    """Numpy arrays that are values of `tensor_type` (a TensorType or a spec like ``"matrix:float32"``).

    Static lengths are kept; unknown (None) lengths are drawn from
    `min_len..max_len`.  Floats are finite with `|x| <= 1e3` unless `finite`
    is False (then any float, NaN and infinities included) or `elements` is
    given; other dtypes take hypothesis' defaults.
    """
    tensor_type = type_from_spec(tensor_type)
    _check_lengths(min_len, max_len)
    length = st.integers(min_len, max_len)
    shapes = st.tuples(*[st.just(d) if d is not None else length for d in tensor_type.shape])
    return shapes.flatmap(lambda shape: _array_of(tensor_type.numpy_dtype, shape, elements, finite))


def _accepts(op: Op, operands: Sequence[Variable]) -> bool:
    try:
        op.make_node(*operands)
    except TypeError:
        return False
    return True


def _arity(op: Op) -> int | None:
    """The number of inputs `op` takes (None: variadic), or an error for a non-elementwise op."""
    if not hasattr(op, "nin"):
        raise InvalidArgument(f"expression_graphs: {op} has no `nin`; pass elementwise ops")
    return op.nin


@st.composite
def expression_graphs(
    draw: st.DrawFn,
    ops: Sequence[Op] = DEFAULT_ELEMWISE_OPS,
    n_inputs: int = 3,
    max_nodes: int = 12,
    input_type: TensorType | str = DEFAULT_INPUT_TYPE,
) -> tuple[list[Variable], Variable]:
    """Random expression graphs `(inputs, output)` over `ops`.

    The graph grows one node at a time from a pool holding `n_inputs` input
    variables of `input_type` and a few small 0-d constants: each step applies
    a drawn op to operands drawn from the pool (often the newest node, so
    graphs get deep; any pool member may be picked again, so subexpressions
    are shared).  Operands an op rejects are skipped, so every graph
    type-checks.  `output` is the last node built; some inputs may be unused.
    """
    ops = tuple(ops)
    if not ops:
        raise InvalidArgument("expression_graphs needs at least one op")
    if n_inputs < 1 or max_nodes < 1:
        raise InvalidArgument(f"need n_inputs >= 1 and max_nodes >= 1, got {n_inputs}, {max_nodes}")
    input_type = type_from_spec(input_type)
    arities = [_arity(op) for op in ops]
    inputs = [input_type(f"x{k}") for k in range(n_inputs)]
    fallback = next(
        (op for op, nin in zip(ops, arities) if _accepts(op, inputs[:1] * (nin or 2))),
        None,
    )
    if fallback is None:
        raise InvalidArgument(
            f"expression_graphs: none of {', '.join(map(str, ops))} accepts inputs of {input_type}"
        )

    values = _SMALL_CONSTANTS[input_type.numpy_dtype.kind]
    consts = draw(st.lists(st.sampled_from(values), max_size=2))
    pool: list[Variable] = [*inputs, *(constant(c, dtype=input_type.dtype) for c in consts)]
    n_nodes = draw(st.integers(1, max_nodes))
    newest: Variable | None = None
    for _ in range(n_nodes):
        k = draw(st.integers(0, len(ops) - 1))
        op, nin = ops[k], arities[k]
        n_operands = nin if nin is not None else draw(st.integers(2, 3))
        members = st.sampled_from(pool)
        operands = [draw(members) for _ in range(n_operands)]
        if newest is not None and draw(st.integers(0, 3)) > 0:  # mostly grow from the newest node
            operands[0] = newest
        if not _accepts(op, operands):
            continue
        node = op.make_node(*operands)
        pool.extend(node.outputs)
        newest = node.outputs[0]
    if newest is None:
        newest = fallback.make_node(*inputs[:1] * (fallback.nin or 2)).outputs[0]
    return inputs, newest


@st.composite
def input_values(
    draw: st.DrawFn,
    inputs: Sequence[Variable],
    elements: st.SearchStrategy | None = None,
    finite: bool = True,
    min_len: int = 1,
    max_len: int = 4,
) -> list[np.ndarray]:
    """One array per input variable (in order), of its type, with lengths that broadcast together.

    Axes are aligned from the right as in numpy broadcasting; every unknown
    length at one position takes the same drawn value (the static length
    another input has there, if any), so inputs that may broadcast do.  Use
    `dict(zip(inputs, values))` for a mapping.  Elements are as in `arrays`.
    """
    _check_lengths(min_len, max_len)
    types = [v.type for v in inputs]
    ndim = max((t.ndim for t in types), default=0)
    shared: list[int] = []
    for position in range(1, ndim + 1):  # counted from the right
        static = [t.shape[-position] for t in types if t.ndim >= position]
        known = [d for d in static if d is not None and d != 1]
        shared.append(known[0] if known else draw(_lengths(min_len, max_len)))
    values = []
    for t in types:
        shape = tuple(d if d is not None else shared[t.ndim - 1 - axis] for axis, d in enumerate(t.shape))
        values.append(draw(_array_of(t.numpy_dtype, shape, elements, finite)))
    return values

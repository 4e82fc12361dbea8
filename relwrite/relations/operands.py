"""The operand-multiset algebra of add and mul: plain functions on tuples of operand graphs.

Each is a function of the bound side only (flatten, sort, fold constants,
drop neutral elements, collect like terms or factors, cancel) and returns
None where it does not apply; the canonicalize rules compute their right
sides with them, and the backward direction, where there is one, checks
bounded candidate preimages (`nestings`, `rotations`) against them.  They
act only on operands of one dtype (`predicates.regroupable`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterator, Sequence
from functools import cache, reduce
from typing import Any

import numpy as np
from etuples.core import ExpressionTuple

from relwrite.graph import ops
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.terms import note_read, same_expression, structural_hash
from relwrite.graph.types import TensorType, broadcast_shapes
from relwrite.relations.predicates import (
    as_graph,
    equals_everywhere,
    filled_by,
    filled_constant,
    fits,
    literal_value,
    node_inputs,
    regroupable,
)


def canonical_key(term: Any) -> tuple:
    """The sort key of an operand in a canonical add/mul: constants, then inputs by name, then the rest.

    Looks one level into a graph: applications sort by op name, then by the
    names of their leaf inputs, so `exp(b) + exp(a)` and `exp(a) + exp(b)` agree.
    """
    value = as_graph(term)
    if not isinstance(value, Variable):
        return (0,) if literal_value(value) is not None else (3,)
    if isinstance(value, Constant):
        return (0,)
    node = value.owner
    if node is None:
        return (1, value.name or "", value.type.ndim)
    leaves = tuple(v.name or "" for v in node.inputs if v.owner is None and v.name)
    return (2, str(node.op), leaves)


def neutral_drops(op: Op) -> Callable[[Variable, tuple[Variable, ...]], bool]:
    """A `where` guard (neutral, rest): `neutral` is `op`'s neutral element and never widens the `rest`.

    A neutral operand is a constant equal to 0 (add) or 1 (mul), possibly
    shaped by fills as cancelling rules leave it; it may go when every shape
    it carries broadcasts into the other operands' or is one of them, and the
    others share one dtype (`rest_regroupable`).
    """
    check_variadic(op)

    def neutral_fits(neutral: Variable, rest: tuple[Variable, ...]) -> bool:
        parts = neutral_parts(op, neutral) if isinstance(neutral, Variable) else None
        if parts is None or not rest_regroupable(rest):
            return False
        return shaped_within(parts, rest)

    neutral_fits.__name__ = f"neutral_of_{op}fits"
    return neutral_fits


def shaped_within(parts: Sequence[Variable], others: Sequence[Variable]) -> bool:
    """Whether no part can widen what the `others` broadcast to (at least one other): an operand made
    of these parts may be dropped from among them.

    A part qualifies when its static shape `fits` the others', when it is
    one of them, or when each variable its shape comes from (`shape_sources`)
    fits the others' shape or is a source of it too: ``fill(tanh(x + y), 0)``
    beside ``exp(y) * x``.
    """
    shape = others[0].type.shape if len(others) == 1 else broadcast_shapes(*(o.type.shape for o in others))
    needed: set[Variable] = set()
    for part in parts:
        if fits(part.type.shape, shape) or any(same_graph(part, other) for other in others):
            continue
        sources = shape_sources((part,)) if len(part.type.shape) <= len(shape) else None
        if sources is None:
            return False
        needed.update(source for source in sources if not fits(source.type.shape, shape))
    if not needed:
        return True
    theirs = shape_sources(others, wanted=needed)
    return theirs is not None and needed <= theirs


_BROADCASTING = ops.Elemwise.make_node  # an output shaped as its inputs broadcast (a Composite's may not)
SHAPE_SOURCES_BUDGET = 256
"""How many variables `shape_sources` looks through before it gives up (keeps rules linear)."""


def shape_sources(values: Sequence[Variable], wanted: set[Variable] | None = None) -> set[Variable] | None:
    """The variables whose shapes the `values`' shape is the broadcast of, or None past the budget.

    An elementwise node's output has the broadcast shape of its inputs, so
    the search looks through elementwise nodes (those whose op builds its
    nodes as `Elemwise` does: not Composites, whose outputs may be
    narrower) down to other variables; 0-d constants shape nothing and are
    left out.  With `wanted` it stops once it has found them all.  At most
    `SHAPE_SOURCES_BUDGET` variables are looked at.
    """
    sources: set[Variable] = set()
    seen: set[Variable] = set()
    stack = list(values)
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if len(seen) > SHAPE_SOURCES_BUDGET:
            return None
        owner = current.owner
        if owner is not None and type(owner.op).make_node is _BROADCASTING:
            stack.extend(note_read(owner).inputs)
        elif not (isinstance(current, Constant) and current.ndim == 0):
            sources.add(current)
            if wanted is not None and current in wanted and wanted <= sources:
                return sources
    return sources


def rest_regroupable(rest: tuple[Any, ...]) -> bool:
    """A `where` guard for rules dropping one operand of an add or mul: the others share one dtype.

    The fold promotes left to right, so a dropped operand may be what widened
    a partial result: in ``add(a, int64 0, b)`` with int32 `a` and `b` the sum
    is taken in int64, in ``add(a, b)`` it wraps around in int32.  With the
    rest of one dtype, and the result's dtype kept (`keeps_type`), no partial
    result changes its dtype.
    """
    return bool(rest) and all(isinstance(r, Variable) for r in rest) and regroupable(rest)


# -- screens: necessary conditions reading only a node's operands' heads (see `registry.Rule`) ------


def reads(head: Op | type) -> Callable[[Any], bool]:
    """A screen: some operand of the node computing the value is computed by the op `head` (or by an
    op of class `head`): what flattening needs, or serializing increments."""

    def computed_by(operand: Variable) -> bool:
        owner = operand.owner
        if owner is None or len(owner.outputs) != 1:
            return False
        return isinstance(owner.op, head) if isinstance(head, type) else owner.op == head

    def screen(value: Any) -> bool:
        node = value.owner if isinstance(value, Variable) else None
        return node is None or any(computed_by(i) for i in node.inputs)

    screen.__name__ = f"reads_{getattr(head, '__name__', head)}"
    return screen


def holds_constants(value: Any) -> bool:
    """A screen: the node computing the value has two or more constant operands (to fold)."""
    node = value.owner if isinstance(value, Variable) else None
    return node is None or sum(isinstance(i, Constant) for i in node.inputs) >= 2


def holds_variables(value: Any) -> bool:
    """A screen: the node computing the value has two or more operands that are not constants (to
    gather like terms or factors)."""
    node = value.owner if isinstance(value, Variable) else None
    return node is None or sum(not isinstance(i, Constant) for i in node.inputs) >= 2


def is_neutral_of(op: Op) -> Callable[[Any], bool]:
    """A constraint: the value is `op`'s neutral element, possibly shaped by fills (`neutral_parts`).

    The test `neutral_drops` starts with, on one operand: a pattern checks it
    while matching, before the sequence of the other operands is bound.
    """
    check_variadic(op)

    def is_neutral(value: Any) -> bool:
        return isinstance(value, Variable) and neutral_parts(op, value) is not None

    is_neutral.__name__ = f"is_neutral_of_{op}"
    is_neutral.heads = (Constant, ops.fill)  # what `filled_constant` can accept: screens read it
    return is_neutral


def graph_of(term: Any) -> Variable | None:
    """`term` as a graph variable (etuples are built), or None (e.g. when it holds logic variables)."""
    if isinstance(term, Variable):
        return term
    if isinstance(term, ExpressionTuple):
        try:
            value = term.evaled_obj
        except (TypeError, ValueError):
            return None
        return value if isinstance(value, Variable) else None
    return None


def graphs_of(terms: Any) -> tuple[Variable, ...] | None:
    """A tuple of terms as graph variables, or None when one of them is not a graph."""
    if not isinstance(terms, (tuple, list)):
        return None
    graphs = tuple(map(graph_of, terms))
    return None if any(g is None for g in graphs) else graphs


def uniform_graphs(terms: Any) -> tuple[Variable, ...] | None:
    """`graphs_of(terms)` when there is at least one and they may be regrouped (`regroupable`), else None."""
    graphs = graphs_of(terms)
    return graphs if graphs and regroupable(graphs) else None


def same_graph(a: Variable, b: Variable) -> bool:
    """Whether two graphs compute the same expression (an iterative structural comparison)."""
    return a is b or same_expression(a, b)


def same_terms(a: Any, b: Any) -> bool:
    """Structural equality of two terms or tuples of terms, graphs compared as expressions."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_terms(x, y) for x, y in zip(a, b))
    ga, gb = graph_of(a), graph_of(b)
    if ga is not None and gb is not None:
        return same_graph(ga, gb)
    return a == b


NEUTRAL: dict[Op, int] = {ops.add: 0, ops.mul: 1}


UFUNC: dict[Op, np.ufunc] = {ops.add: np.add, ops.mul: np.multiply}


def check_variadic(op: Op) -> None:
    if op not in NEUTRAL:
        raise ValueError(f"expected add or mul, got {op}")


def typed_constant(value: Any, dtype: str) -> Constant:
    array = np.asarray(value, dtype=dtype)
    return Constant(TensorType(dtype, array.shape), array)


def exact_value(data: Any) -> Any:
    """A constant's value for exact arithmetic (`constant_result`): an integer as a Python int, an
    array of integers as an array of Python ints (numpy applies Python's operators to them), anything
    else as it is."""
    if isinstance(data, int):
        return data
    array = np.asarray(data)
    if array.dtype.kind not in "iu":
        return data
    return int(array) if array.ndim == 0 else array.astype(object)


_PYTHON_OPERATOR: dict[np.ufunc, Callable[..., int]] = {
    np.add: operator.add,
    np.multiply: operator.mul,
    np.negative: operator.neg,
}


def constant_result(ufunc: np.ufunc, operands: Sequence[Any], dtype: str, wraps: bool) -> np.ndarray | None:
    """`ufunc` (add, multiply, negative) of constant `operands` (folded left to right when there are
    several) as an array of `dtype`, or None when the rewrite needing it must not happen.

    The one way rules compute a constant from constants: folded sums and
    products, collected coefficients and exponents, a negated leading
    constant.  Integers are computed exactly, as Python ints.  A result
    outside the dtype's range is then taken modulo 2 ** bits when it `wraps`:
    it is a term or factor the graph itself computes in `dtype`, and
    wrap-around arithmetic is a ring, so the rewritten graph gives what the
    original gives (int8 x + 100 + 100 is x + -56).  Otherwise it counts
    something (an exponent: int8 x ** 127 * x is not x ** -128) and is
    refused.  Floats and bools are computed in their dtype, refused when a
    step overflows, underflows or is invalid.
    """
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        values = [exact_value(v) for v in operands]
        function = _PYTHON_OPERATOR[ufunc]
        result = function(values[0]) if len(values) == 1 else reduce(function, values)
        exact = np.asarray(result, dtype=object)
        if all(info.min <= v <= info.max for v in exact.flat):
            return exact.astype(dtype)
        if not wraps:
            return None
        modulus = 1 << info.bits
        return np.asarray((exact - info.min) % modulus + info.min, dtype=object).astype(dtype)
    try:
        with np.errstate(all="raise"):
            result = ufunc(operands[0]) if len(operands) == 1 else reduce(ufunc, operands)
            return np.asarray(result, dtype=dtype)
    except (FloatingPointError, ArithmeticError):
        return None


@cache
def neutral_constant(op: Op, dtype: str) -> Constant:
    """`op`'s neutral element (0 or 1) as a 0-d constant of `dtype` (one object: constants are values)."""
    return typed_constant(NEUTRAL[op], dtype)


def neutral_like(op: Op, model: Variable, dtype: str) -> Variable:
    """`op`'s neutral element (0 or 1) of `dtype`, broadcast to `model`'s shape: fill(model, 0 or 1)."""
    return ops.fill(model, neutral_constant(op, dtype))


def spliced(op: Op, terms: Any) -> tuple[Variable, ...] | None:
    """`terms` with every operand that applies `op` replaced by its operands, at any depth (operands of
    the list's one dtype only); None when none does."""
    graphs = uniform_graphs(terms)
    if graphs is None:
        return None
    dtype = graphs[0].dtype
    flat: list[Variable] = []
    stack = list(reversed(graphs))
    changed = False
    while stack:
        g = stack.pop()
        inner = node_inputs(g, op)
        if inner is not None and all(i.dtype == dtype for i in inner):
            stack.extend(reversed(inner))
            changed = True
        else:
            flat.append(g)
    return tuple(flat) if changed else None


def applied(op: Op, graphs: Sequence[Variable]) -> Variable | None:
    """`op` applied to `graphs`, or None when the op refuses their types."""
    try:
        return op(*graphs)
    except (TypeError, ValueError):
        return None


def variadic_applied(op: Op, graphs: Sequence[Variable]) -> Variable | None:
    """`op` applied to `graphs`, or the graph itself when there is one (an add or mul of one operand
    is that operand); None when the op refuses their types."""
    return graphs[0] if len(graphs) == 1 else applied(op, graphs)


def rebuilt(op: Op, function: Callable[[Any], Sequence[Variable] | None], terms: Any) -> Variable | None:
    """`op` applied to `function(terms)` (one operand: itself), or None where the function does not
    apply: the right side of a rule computed from the operand list it matched."""
    image = function(terms)
    return variadic_applied(op, image) if image else None


def operand_candidates(
    op: Op, candidates: Callable[[tuple[Variable, ...]], Iterator[tuple[Variable, ...]]], result: Any
) -> Iterator[dict[str, tuple[Variable, ...]]]:
    """The operand lists (as {"terms": ...}) `candidates` proposes for the operands of `result`, when
    it applies `op` to two or more: the inverse of a `rebuilt` right side."""
    operands = node_inputs(result, op) if isinstance(result, Variable) else None
    if operands is not None and len(operands) > 1:
        yield from ({"terms": terms} for terms in candidates(operands))


def nestings(op: Op, terms: Any) -> Iterator[tuple[Variable, ...]]:
    """The preimages of `spliced`: `terms` with one run of two or more consecutive operands (all but
    the whole list) nested under `op`, the shortest runs first."""
    graphs = graphs_of(terms) or ()
    n = len(graphs)
    for length in range(2, n):
        for start in range(n - length + 1):
            inner = applied(op, graphs[start : start + length])
            if inner is not None:
                yield (*graphs[:start], inner, *graphs[start + length :])


LAST = (4,)  # after every `canonical_key`


def sorted_terms(terms: Any) -> tuple[Variable, ...] | None:
    """`terms` stably sorted by `canonical_key` (constants first), or None when already sorted.

    Only the first constant leads: others (those `folded_constants` left
    apart because combining them would overflow, underflow or be invalid)
    go last, so the sort does not make the left-to-right fold combine them
    first (``1e200 * x * 1e200`` stays as it is).
    """
    graphs = uniform_graphs(terms)
    if graphs is None:
        return None
    keys = [canonical_key(g) for g in graphs]
    constants = [i for i, key in enumerate(keys) if key == (0,)]
    for i in constants[1:]:
        keys[i] = LAST
    order = sorted(range(len(graphs)), key=keys.__getitem__)
    if order == list(range(len(graphs))):
        return None
    return tuple(graphs[i] for i in order)


def rotations(terms: Any) -> Iterator[tuple[Variable, ...]]:
    """The rotations of `terms` other than itself: candidate preimages of `sorted_terms`."""
    graphs = graphs_of(terms) or ()
    for k in range(1, len(graphs)):
        yield graphs[k:] + graphs[:k]


def folded_constants(op: Op, terms: Any) -> tuple[Variable, ...] | None:
    """`terms` with its two or more constants combined by `op` into one, put first; None otherwise.

    The constants are combined in the operands' one dtype, so integers wrap
    around exactly as the graph would.  A combination that overflows,
    underflows or is invalid (`constant_result`) is refused and the
    constants stay apart: ``1e200 * x * 1e200`` never becomes ``inf * x``.
    """
    graphs = uniform_graphs(terms)
    if graphs is None:
        return None
    constants = [g for g in graphs if isinstance(g, Constant)]
    if len(constants) < 2:
        return None
    value = constant_result(UFUNC[op], [c.data for c in constants], graphs[0].dtype, wraps=True)
    if value is None:
        return None
    rest = [g for g in graphs if not isinstance(g, Constant)]
    return (typed_constant(value, graphs[0].dtype), *rest)


def neutral_parts(op: Op, value: Variable) -> list[Variable] | None:
    """The variables whose shapes a neutral operand carries (fill models and the constant), or None."""
    layers = filled_constant(value)
    if layers is None or not equals_everywhere(layers[1], NEUTRAL[op]):
        return None
    return [*layers[0], layers[1]]


def without_neutral(op: Op, terms: Any) -> tuple[Variable, ...] | None:
    """`terms` without the neutral operands that provably do not widen the result; None when none goes.

    A neutral operand is a constant equal to `op`'s neutral element (0 for
    add, 1 for mul) or a fill of one; it goes when every shape it carries is
    within the remaining operands' (`shaped_within`).  One operand always
    stays, and a lone operand is the whole result (``add(x) -> x``).
    """
    graphs = uniform_graphs(terms)
    if graphs is None:
        return None
    kept = list(range(len(graphs)))
    for i, g in enumerate(graphs):
        if len(kept) == 1:
            break
        parts = neutral_parts(op, g)
        if parts is None:
            continue
        if shaped_within(parts, [graphs[j] for j in kept if j != i]):
            kept.remove(i)
    if len(kept) == len(graphs) > 1:
        return None
    return tuple(graphs[j] for j in kept)


def dropping_neutral(op: Op, graphs: Sequence[Variable]) -> tuple[Variable, ...]:
    """`graphs` without the neutral operands `without_neutral` drops (all of them when none goes)."""
    return without_neutral(op, graphs) or tuple(graphs)


def _coefficient(term: Variable, dtype: str) -> tuple[Any, tuple[Variable, ...]]:
    """(c, factors) with `term` = c * factors..., looking through one neg and a product's one constant;
    c is exact (`exact_value`): an integer coefficient's negation need not fit `dtype`, only the total.

    A product of factors of several dtypes stays one factor: its fold may wrap around in a narrow
    dtype (int8 x * x) that a coefficient put first would widen away.
    """
    negated = node_inputs(term, ops.neg)
    if negated is not None:
        term = negated[0]
    coefficient: np.ndarray = _one(dtype)
    factors = node_inputs(term, ops.mul)
    if factors is None or not regroupable(factors):
        factors = (term,)
    elif len(factors) > 1:
        constants = [k for k, f in enumerate(factors) if isinstance(f, Constant) and f.dtype == dtype]
        if len(constants) == 1:  # anywhere: an e-class's product lists its operands in any order
            k = constants[0]
            coefficient, factors = factors[k].data, factors[:k] + factors[k + 1 :]
    if negated is not None:
        coefficient = operator.neg(exact_value(coefficient))
    return coefficient, factors


@cache
def _one(dtype: str) -> np.ndarray:
    """A read-only 0-d one of `dtype` (the coefficient of a term written without one)."""
    one = np.ones((), dtype=dtype)
    one.flags.writeable = False
    return one


def _signature(value: Variable) -> Any:
    """A hashable summary, equal for structurally equal graphs: an atom, or its op and inputs' ops."""
    node = value.owner
    if node is None or len(node.outputs) != 1:
        return value
    return (note_read(node).op, tuple(_head(i) for i in node.inputs))


def _head(value: Variable) -> Any:
    """The op computing `value` (an expression's head, its read noted), or `value` itself for an atom."""
    node = value.owner
    return value if node is None or len(node.outputs) != 1 else note_read(node).op


def _groups(keys: Sequence[tuple[Variable, ...] | None]) -> list[list[int]]:
    """Indices of structurally equal keys (tuples of graphs), by first appearance; None keys skipped.

    Keys are bucketed by their shallow signature (constant time each); only
    where a bucket already holds a group are the keys hashed structurally
    (a bounded depth down, shared subgraphs once), so a sum of many look-alike terms
    (sin(x * 1) + sin(x * 2) + ...) compares each term with its equals only,
    while a sum of terms with distinct shapes never walks their subgraphs.
    """
    groups: list[list[int]] = []
    buckets: dict[tuple, dict[tuple | None, list[list[int]]]] = {}
    memo: dict[tuple[Variable, int], int] = {}

    def full(key: tuple[Variable, ...]) -> tuple:
        return tuple(structural_hash(g, memo) for g in key)

    for i, key in enumerate(keys):
        if key is None:
            continue
        bucket = buckets.setdefault(tuple(map(_signature, key)), {})
        if not bucket:
            bucket[None] = [[i]]  # the first look-alike: hashed only if another one comes
            groups.append(bucket[None][0])
            continue
        if None in bucket:
            (first,) = bucket.pop(None)
            bucket[full(keys[first[0]])] = [first]
        candidates = bucket.setdefault(full(key), [])
        for group in candidates:
            if all(map(same_graph, keys[group[0]], key)):
                group.append(i)
                break
        else:
            candidates.append([i])
            groups.append(candidates[-1])
    return groups


def _same_sign(arrays: Sequence[np.ndarray]) -> bool:
    """Whether the arrays are finite and nonzero, all positive or all negative."""
    if all(a.ndim == 0 for a in arrays):  # the common case, in Python numbers (exact for every dtype)
        values = [a.item() for a in arrays]
        if not all(math.isfinite(v) for v in values):
            return False
        return all(v > 0 for v in values) or all(v < 0 for v in values)
    if not all(np.all(np.isfinite(a)) for a in arrays):
        return False
    return all(np.all(a > 0) for a in arrays) or all(np.all(a < 0) for a in arrays)


def _regrouped(graphs: Sequence[Variable], replacements: dict[int, list[int]], built: dict[int, Variable]):
    """`graphs` with each group's first member replaced by its `built` term and the other members gone."""
    gone = {i for members in replacements.values() for i in members[1:]}
    return tuple(built.get(i, g) for i, g in enumerate(graphs) if i not in gone)


def may_collect_terms(value: Variable) -> bool:
    """An operand screen of the rules gathering like terms (`like_terms`): two of the sum's terms may
    have structurally equal factors (`_coefficient`'s), their heads compared as far as an operand screen
    reads (a negated product's factors lie deeper: it may match any term)."""
    node = value.owner
    terms = [t for t in node.inputs if not isinstance(t, Constant)]
    if len(terms) < 2:
        return False
    dtype = node.inputs[0].dtype
    seen: set[tuple] = set()
    for term in terms:
        key = _factor_heads(term, dtype)
        if key is None or key in seen:
            return True
        seen.add(key)
    return False


def _factor_heads(term: Variable, dtype: str) -> tuple | None:
    """The heads of the factors `_coefficient` reads in `term` (None where they lie below a negation)."""
    owner = term.owner
    if owner is not None and owner.op == ops.neg and len(owner.outputs) == 1:
        term = owner.inputs[0]
        owner = term.owner
        if owner is not None and owner.op == ops.mul and len(owner.outputs) == 1:
            return None
    if owner is None or owner.op != ops.mul or len(owner.outputs) != 1 or not regroupable(owner.inputs):
        return (_operand_head(term),)
    factors = list(owner.inputs)
    constants = [k for k, f in enumerate(factors) if isinstance(f, Constant) and f.dtype == dtype]
    if len(factors) > 1 and len(constants) == 1:
        del factors[constants[0]]
    return tuple(map(_operand_head, factors))


def _operand_head(value: Variable) -> Any:
    """An atom itself (a constant by value), else its node's op and output count."""
    owner = value.owner
    return value if owner is None else (owner.op, len(owner.outputs))


def like_terms(cancelling: bool, terms: Any) -> tuple[Variable, ...] | None:
    """The sum `terms` with like terms gathered (``x + 3*x -> 4*x``), or None.

    A term is `c * f1 * f2...` (c a constant, else 1) or `-(...)` (c
    negated); terms whose factors are structurally the same form a group,
    replaced where its first term stood by `total * f1 * f2...`, by the
    factors alone when the total is 1, and by zeros shaped like them when it
    is 0.  Exact groups (integers, or floats whose coefficients are finite
    and nonzero with one sign) are gathered when `cancelling` is false; the
    others (``3*x - x``, ``x - x``: inf - inf is NaN) only when it is true.
    """
    graphs = uniform_graphs(terms)
    if graphs is None or graphs[0].type.numpy_dtype.kind not in "iuf":
        return None
    dtype = graphs[0].dtype
    parts = [None if isinstance(g, Constant) else _coefficient(g, dtype) for g in graphs]
    groups = _groups([None if p is None else p[1] for p in parts])
    replacements, built = {}, {}
    for group in groups:
        if len(group) < 2:
            continue
        coefficients = [parts[i][0] for i in group]
        exact = dtype[0] != "f" or _same_sign(coefficients)
        if exact == cancelling:
            continue
        total = constant_result(np.add, coefficients, dtype, wraps=True)
        if total is None:
            continue
        try:
            term = _scaled(total, parts[group[0]][1], dtype)
        except (ArithmeticError, TypeError):
            continue
        if (
            not cancelling
            and total.any()
            and len(group) < len(graphs)
            and _added_nodes(term, parts[group[0]][1]) > _term_nodes(graphs, group)
        ):
            continue  # in a wider sum not where it adds a node: y + x + x stays (y + 2*x is one more)
        replacements[group[0]], built[group[0]] = group, term
    return dropping_neutral(ops.add, _regrouped(graphs, replacements, built)) if built else None


def _term_nodes(graphs: Sequence[Variable], group: Sequence[int]) -> int:
    """How many distinct nodes the group's terms spend on their coefficients: a neg, a product."""
    nodes: set[int] = set()
    for i in group:
        term = graphs[i]
        negated = node_inputs(term, ops.neg)
        if negated is not None:
            nodes.add(id(term))
            term = negated[0]
        if node_inputs(term, ops.mul) is not None:
            nodes.add(id(term))
    return len(nodes)


def _added_nodes(term: Variable, factors: Sequence[Variable]) -> int:
    """How many nodes a gathered (nonzero) `term` adds: none when it is its one factor, else its product."""
    return 0 if any(term is factor for factor in factors) else 1


def _scaled(total: np.ndarray, factors: Sequence[Variable], dtype: str) -> Variable:
    """total * factors...: the factors alone for a 0-d total of 1, zeros shaped like them for 0."""
    if total.size > 0 and not total.any():
        return filled_by(factors, typed_constant(total, dtype))
    if total.ndim == 0 and total == 1:
        return factors[0] if len(factors) == 1 else ops.mul(*factors)
    return ops.mul(typed_constant(total, dtype), *factors)


def _power(factor: Variable) -> tuple[Variable, Variable | None]:
    """(base, exponent) of `factor`: `b ** e` or `b` itself with exponent None (1)."""
    inputs = node_inputs(factor, ops.pow)
    return (inputs[0], inputs[1]) if inputs is not None else (factor, None)


def _positive_integer(exponent: Variable | None) -> bool:
    if exponent is None:
        return True
    if not isinstance(exponent, Constant) or exponent.data.ndim != 0:
        return False
    value = exponent.data
    return bool(np.isfinite(value) and value >= 1 and value == np.round(value))


def like_factors(general: bool, factors: Any) -> tuple[Variable, ...] | None:
    """The product `factors` with like factors gathered (``x * x -> x ** 2``), or None.

    A factor is `b ** e` or `b` (exponent 1); factors with structurally the
    same base form a group, replaced where its first factor stood by
    `b ** (e1 + e2 ...)`.  Groups of positive integer constant exponents are
    exact; the others (``x ** 0.5 * x ** 0.5 -> x``, floats only) need
    `b > 0` and are gathered only when `general` is true.
    """
    graphs = uniform_graphs(factors)
    if graphs is None or graphs[0].type.numpy_dtype.kind not in ("f" if general else "iuf"):
        return None
    dtype = graphs[0].dtype
    powers = [None if isinstance(g, Constant) else _power(g) for g in graphs]
    groups = _groups([None if p is None else (p[0],) for p in powers])
    replacements, built = {}, {}
    for group in groups:
        if len(group) < 2:
            continue
        exponents = [powers[i][1] for i in group]
        if all(map(_positive_integer, exponents)) == general:
            continue
        if len(group) < len(graphs) and not any(exponent is not None for exponent in exponents):
            continue  # in a wider product not where it adds a node: x * y * x stays (y * x ** 2 is one more)
        exponent = _total_exponent(exponents, dtype)
        if exponent is None:
            continue
        try:
            term = ops.pow(powers[group[0]][0], exponent)
        except (ArithmeticError, TypeError):
            continue
        replacements[group[0]], built[group[0]] = group, term
    return _regrouped(graphs, replacements, built) if built else None


def may_gather_factors(general: bool) -> Callable[[Variable], bool]:
    """An operand screen of the rules gathering like factors (`like_factors`): the product has a power
    among its factors, one whose exponent is not a positive integer constant with `general`; else
    (exact gathering) all its factors may be alike (no constant, one head): x * x."""

    def screen(value: Variable) -> bool:
        factors = value.owner.inputs
        powers = [f.owner.inputs[1] for f in factors if f.owner is not None and f.owner.op == ops.pow]
        if general:
            return value.dtype.startswith("float") and not all(map(_positive_integer, powers))
        if powers:
            return True
        heads = {f if f.owner is None else (f.owner.op, len(f.owner.outputs)) for f in factors}
        return len(heads) == 1 and not any(isinstance(f, Constant) for f in factors)

    screen.__name__ = f"may_gather_{'any' if general else 'integer'}_powers"
    return screen


def _total_exponent(exponents: Sequence[Variable | None], dtype: str) -> Variable | None:
    """The sum of the exponents (None standing for 1): a constant when all are (None when it does not
    fit `dtype`: see `constant_result`), else an add."""
    if all(e is None or isinstance(e, Constant) for e in exponents):
        exponents_data = [_one(dtype) if e is None else e.data for e in exponents]
        total = constant_result(np.add, exponents_data, dtype, wraps=False)
        return None if total is None else typed_constant(total, dtype)
    return ops.add(*(neutral_constant(ops.mul, dtype) if e is None else e for e in exponents))


def _position(graphs: Sequence[Variable], target: Variable, skip: int = -1) -> int | None:
    return next((j for j, g in enumerate(graphs) if j != skip and same_graph(g, target)), None)


def may_cancel_a_factor(value: Variable) -> bool:
    """An operand screen of the rule `cancelled` answers: some factor is a quotient (a reciprocal) whose
    divisor (argument) has the head of another factor."""
    factors = value.owner.inputs
    heads = [_operand_head(f) for f in factors]
    for i, factor in enumerate(factors):
        owner = factor.owner
        if owner is None or len(owner.outputs) != 1:
            continue
        if owner.op == ops.true_div:
            head = _operand_head(owner.inputs[1])
        elif owner.op == ops.reciprocal:
            head = _operand_head(owner.inputs[0])
        else:
            continue
        if any(head == other for j, other in enumerate(heads) if j != i):
            return True
    return False


def may_divide_out(value: Variable) -> bool:
    """An operand screen of the rule `divided_out` answers, (x * y) / y: the divisor has the head of a
    factor of the numerator."""
    numerator, divisor = value.owner.inputs
    owner = numerator.owner
    head = _operand_head(divisor)
    return owner is None or any(_operand_head(f) == head for f in owner.inputs)


def cancelled(factors: Any) -> tuple[Variable, ...] | None:
    """The product `factors` with one factor cancelled against its divisor or reciprocal, or None.

    ``x * (z / x) -> z`` and ``a * reciprocal(a) * b -> b``, anywhere in the
    list (floats; valid where x != 0); the cancelled factor leaves ones
    shaped like it, dropped where they cannot widen the result.
    """
    graphs = uniform_graphs(factors)
    if graphs is None or graphs[0].type.numpy_dtype.kind != "f":
        return None
    for i, g in enumerate(graphs):
        division = node_inputs(g, ops.true_div)
        if division is not None:
            j = _position(graphs, division[1], skip=i)
            if j is not None:
                new = list(graphs)
                new[i] = division[0]
                return _cancelled_at(new, j)
        inverse = node_inputs(g, ops.reciprocal)
        if inverse is not None:
            j = _position(graphs, inverse[0], skip=i)
            if j is not None:
                new = list(graphs)
                del new[i]
                return _cancelled_at(new, j - (j > i))
    return None


def cancelled_factor(terms: Any) -> Variable | None:
    """The factor `cancelled` cancels (the divisor of a quotient, or the argument of a reciprocal, that
    is also a factor): what its assumption ``x != 0`` is about."""
    graphs = uniform_graphs(terms)
    if graphs is None or graphs[0].type.numpy_dtype.kind != "f":
        return None
    for i, g in enumerate(graphs):
        for op, k in ((ops.true_div, 1), (ops.reciprocal, 0)):
            inputs = node_inputs(g, op)
            if inputs is not None and _position(graphs, inputs[k], skip=i) is not None:
                return inputs[k]
    return None


def collected_base(terms: Any) -> Variable | None:
    """The base of the first group `like_factors(True, ...)` gathers: what ``x > 0`` is about."""
    graphs = uniform_graphs(terms)
    if graphs is None or graphs[0].type.numpy_dtype.kind != "f":
        return None
    powers = [None if isinstance(g, Constant) else _power(g) for g in graphs]
    for group in _groups([None if p is None else (p[0],) for p in powers]):
        exponents = [powers[i][1] for i in group]
        if len(group) > 1 and not all(map(_positive_integer, exponents)):
            return powers[group[0]][0]
    return None


def divided_out(pair: Any) -> tuple[Variable, ...] | None:
    """For `pair` = (divisor, factors): the product `factors` divided by `divisor`, one of its factors
    (``(x * y) / y -> x``; floats, valid where y != 0), or None.  The factor leaves ones shaped like it,
    dropped where they cannot widen the result."""
    divisor, graphs = graph_of(pair[0]), uniform_graphs(pair[1])
    if divisor is None or graphs is None or graphs[0].type.numpy_dtype.kind != "f":
        return None
    j = _position(graphs, divisor)
    return None if j is None else _cancelled_at(list(graphs), j)


def _cancelled_at(factors: list[Variable], j: int) -> tuple[Variable, ...]:
    """The product `factors` with factor j cancelled: gone where the others' shapes prove it widens
    nothing (`shaped_within`), else ones shaped like it (built only then); neutral operands dropped."""
    gone = factors[j]
    others = factors[:j] + factors[j + 1 :]
    if others and shaped_within((gone,), others):
        return dropping_neutral(ops.mul, others)
    factors[j] = neutral_like(ops.mul, gone, gone.dtype)
    return dropping_neutral(ops.mul, factors)

"""Variables, constants, apply nodes and ops, with iterative graph walks.

Nothing here recurses over graph depth: every walk keeps its own stack, so
graphs of 100,000 chained nodes are as easy to handle as small ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from typing import Any

import numpy as np
from unification.variable import isvar

from relwrite.graph.types import (
    RANK_NAMES,
    LiteralOverflowError,
    TensorType,
    describe_literal,
    dtype_of_python_scalar,
)


class Variable:
    """A value in a graph: an input (no owner) or output `index` of the apply node `owner`.

    Variables compare by identity.  Their operators and the methods that build
    ops (`x + y`, `x[i]`, `x.sum()`, `x.shape`, ...) are attached by
    `relwrite.graph.ops`, with the ops they build; a notebook's picture of one
    by `relwrite.graph.printing`, and `eval` by `relwrite.compile.function`
    (the graph package's docstring says why).
    """

    # `_fn_cache`: the functions `eval` compiled for this variable (unset until the first `eval`)
    __slots__ = ("__weakref__", "_fn_cache", "index", "name", "owner", "type")
    __array_priority__ = 1000  # numpy defers `ndarray + Variable` to us

    def __init__(
        self,
        type: TensorType,
        owner: Apply | None = None,
        index: int | None = None,
        name: str | None = None,
    ):
        if not isinstance(type, TensorType):
            raise TypeError(f"Variable type must be a TensorType, got {type!r}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"Variable name must be a str, got {name!r}")
        self.type = type
        self.owner = owner
        self.index = index
        self.name = name

    # -- pickling and copying -------------------------------------------

    def __reduce__(self) -> tuple:
        """Pickle (and deep-copy) without recursion over the graph: a computed variable travels with its
        ancestors as a flat node table (`GraphTable`); graph inputs and constants as themselves."""
        if self.owner is None:
            return _ownerless, (type(self), self.type, self.name, getattr(self, "data", None))
        return GraphTable.output, (GraphTable.of([self]), 0)

    # -- type shortcuts -------------------------------------------------
    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return self.type.ndim

    def clone(self, name: str | None = None) -> Variable:
        """A fresh ownerless variable of the same type (and name, unless given)."""
        return type(self)(self.type, name=self.name if name is None else name)

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        if self.owner is not None:
            return f"{self.owner.op}.{self.index}"
        return f"<{self.type}>"

    def __repr__(self) -> str:
        return str(self)

    def __bool__(self) -> bool:
        return True

    __hash__ = object.__hash__


def _variable_of(type_: TensorType, name: str | None = None) -> Variable:
    """`type_(name)`: a graph input of the type, named `name`."""
    return Variable(type_, name=name)


TensorType.__call__ = _variable_of  # types are below the variables they make (see Variable's docstring)


class Constant(Variable):
    """A variable with a fixed value; equal and hashed by type and value.

    Values compare bit for bit after NaN canonicalisation: every NaN equals
    every NaN, while 0.0 and -0.0 differ (they differ under division).
    """

    __slots__ = ("_hash", "_key", "data")

    def __init__(self, type: TensorType, data: Any, name: str | None = None):
        super().__init__(type, None, None, name)
        given = np.asarray(data)
        if given.dtype.kind not in "biuf":
            raise TypeError(f"constant {data!r} is not a bool, integer or float value")
        if given.dtype == type.numpy_dtype:
            array = np.array(given, copy=True)
        else:
            with np.errstate(all="ignore"):
                array = given.astype(type.numpy_dtype)
                if array.dtype.kind == "f" and given.dtype.kind == "f":  # rounding to a float type is fine
                    faithful = np.array_equal(np.isfinite(array), np.isfinite(given))
                else:
                    faithful = np.array_equal(array.astype(given.dtype), given)
            if not faithful:
                raise TypeError(f"constant {data!r} is not representable as {type.dtype}")
        error = type.value_error(array)
        if error is not None:
            raise TypeError(f"constant {data!r} does not fit {type}: {error}")
        array.setflags(write=False)
        self.data = array
        canonical = array
        if array.dtype.kind == "f" and (array != array if array.ndim == 0 else np.isnan(array).any()):
            canonical = np.where(np.isnan(array), np.nan, array).astype(array.dtype)
        raw = np.ascontiguousarray(canonical).tobytes()
        if len(raw) > 64:
            raw = hashlib.blake2b(raw, digest_size=16).digest() + len(raw).to_bytes(8, "little")
        self._key = (type, array.shape, raw)
        self._hash = hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Constant) and self._hash == other._hash and self._key == other._key

    def __hash__(self) -> int:
        return self._hash

    def clone(self, name: str | None = None) -> Constant:
        """Constants are immutable values: a clone is the constant itself."""
        return self

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        if self.data.ndim == 0:
            value = self.data.item()
            return repr(value) if not isinstance(value, float) or np.isfinite(value) else str(value)
        if self.data.size <= 8:
            return np.array2string(self.data, separator=", ")
        return f"Constant{{{self.type}}}"


class OpPattern:
    """An op of class `kind` whose props match `props` (see `Op.pattern`): data a pattern compiles."""

    __slots__ = ("kind", "props")

    def __init__(self, kind: type, props: tuple[tuple[str, Any], ...]):
        self.kind, self.props = kind, props

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpPattern) and (self.kind, self.props) == (other.kind, other.props)

    def __hash__(self) -> int:
        return hash((self.kind, tuple(p for p, _ in self.props)))

    def __repr__(self) -> str:
        given = ", ".join(f"{p}={v!r}" for p, v in self.props)
        return f"{self.kind.__name__}.pattern({given})"

    __str__ = __repr__


class Apply:
    """One application of an op: `op(*inputs)` computing `outputs`."""

    __slots__ = ("__weakref__", "inputs", "op", "outputs")

    def __init__(self, op: Op, inputs: Sequence[Variable], outputs: Sequence[Variable]):
        for i, var in enumerate(inputs):
            if not isinstance(var, Variable):
                raise TypeError(f"{op}: input {i} is {var!r}, not a Variable")
        self.op = op
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        for index, out in enumerate(self.outputs):
            if out.owner is not None and out.owner is not self:
                raise ValueError(f"{op}: output {out} already belongs to another node")
            out.owner = self
            out.index = index

    @property
    def out(self) -> Variable:
        """The single output of a one-output node."""
        if len(self.outputs) != 1:
            raise ValueError(f"{self.op} has {len(self.outputs)} outputs, not one")
        return self.outputs[0]

    def default_output(self) -> Variable:
        return self.out

    @property
    def nin(self) -> int:
        return len(self.inputs)

    @property
    def nout(self) -> int:
        return len(self.outputs)

    def clone(self) -> Apply:
        """Same op and inputs, fresh outputs."""
        return Apply(self.op, self.inputs, [Variable(o.type, name=o.name) for o in self.outputs])

    def clone_with_new_inputs(self, inputs: Sequence[Variable]) -> Apply:
        """This op on new inputs; output types are re-inferred unless the input types are unchanged."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f"{self.op}: expected {len(self.inputs)} inputs, got {len(inputs)}")
        if all(new.type == old.type for new, old in zip(inputs, self.inputs)):
            return Apply(self.op, inputs, [Variable(o.type, name=o.name) for o in self.outputs])
        return self.op.make_node(*inputs)

    def __str__(self) -> str:
        return f"{self.op}({', '.join(map(str, self.inputs))})"

    __repr__ = __str__


class Op:
    """An operation: immutable, hashable, equal by its `__props__`.

    Subclasses declare `__props__` (the attribute names that distinguish two
    instances) and implement `make_node`, which infers output types and raises
    a `TypeError` naming the op and the offending input types.
    """

    __props__: tuple[str, ...] = ()

    def __init__(self, **props: Any):
        missing = set(self.__props__) - set(props)
        extra = set(props) - set(self.__props__)
        if missing or extra:
            raise TypeError(f"{type(self).__name__}: expected props {self.__props__}, got {tuple(props)}")
        for key, value in props.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} ops are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} ops are immutable")

    def _props(self) -> tuple:
        return tuple(getattr(self, p) for p in self.__props__)

    def __eq__(self, other: object) -> bool:
        # ops are immutable: identity, then the cached hashes, decide most comparisons without the props
        if self is other:
            return True
        return type(self) is type(other) and hash(self) == hash(other) and self._props() == other._props()

    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((type(self), self._props()))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        # the cached hash is left behind: it hashes the class by identity, which another process (a
        # spawned worker, a remote executor) does not share, so an op unpickled there would equal nothing
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def __setstate__(self, state: dict) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)

    op_name: str | None = None

    @classmethod
    def pattern(cls, **props: Any) -> OpPattern:
        """An op of exactly this class in a rule's pattern, with some props given: a string (or logic
        variable) names the prop's value, anything else must equal it; props not given match any value.

        ``Sum.pattern(axis="a")`` matches every Sum and binds ``a`` to its axis;
        on a rule's right side it builds ``Sum(axis=<a's value>)``.
        """
        unknown = sorted(set(props) - set(cls.__props__))
        if unknown:
            raise TypeError(f"{cls.__name__}.pattern: no props {unknown}; its props are {cls.__props__}")
        literal = {p: v for p, v in props.items() if not isinstance(v, str) and not isvar(v)}
        if literal:  # literal props as the class stores them (Sum's axis 0 is (0,)), where it can say
            try:
                made = cls(**literal)
            except (TypeError, ValueError):
                made = None
            if made is not None:
                props = {p: getattr(made, p) if p in literal else v for p, v in props.items()}
        return OpPattern(cls, tuple(props.items()))

    @property
    def name(self) -> str:
        """The op's name in printouts: `op_name`, or the lower-case class name."""
        return self.op_name or type(self).__name__.lower()

    def __str__(self) -> str:
        if not self.__props__:
            return self.name
        props = ", ".join(f"{p}={getattr(self, p)!r}" for p in self.__props__)
        return f"{type(self).__name__}{{{props}}}"

    __repr__ = __str__

    def make_node(self, *inputs: Variable) -> Apply:
        raise NotImplementedError(f"{type(self).__name__} does not define make_node")

    def as_inputs(self, inputs: Sequence[Any]) -> list[Variable]:
        """The operands as Variables, Python scalars among them weak (`as_variables`): make_node's start."""
        return as_variables(inputs)

    def __call__(self, *inputs: Any) -> Variable | list[Variable]:
        node = self.make_node(*self.as_inputs(inputs))
        return node.outputs[0] if len(node.outputs) == 1 else node.outputs

    def type_error(self, inputs: Sequence[Variable], why: str) -> TypeError:
        """A TypeError naming this op and its input types."""
        types = ", ".join(str(v.type) for v in inputs)
        return TypeError(f"{self}: {why} (inputs: {types})")


def _ownerless(kind: type, type_: TensorType, name: str | None, data: Any) -> Variable:
    return Constant(type_, data, name) if issubclass(kind, Constant) else kind(type_, None, None, name)


class GraphTable:
    """A graph as a flat table, what pickling sends instead of nested nodes (graphs may be 100,000 deep).

    `leaves` are the ownerless variables read (pickled as themselves, so a
    graph input keeps its identity within one pickle); `nodes` are
    (op, input references, output (type, name) pairs) in topological order,
    an input reference being ("leaf", k) or (node, output index); `outputs`
    are references too.
    """

    def __init__(self, leaves: list[Variable], nodes: list[tuple], outputs: list[tuple]):
        self.leaves, self.nodes, self.outputs = leaves, nodes, outputs

    @staticmethod
    def of(outputs: Sequence[Variable]) -> GraphTable:
        refs: dict[Variable, tuple] = {}
        leaves: list[Variable] = []

        def ref(var: Variable) -> tuple:
            found = refs.get(var)
            if found is None or (var.owner is None and leaves[found[1]] is not var):
                found = refs[var] = ("leaf", len(leaves))
                leaves.append(var)
            return found

        nodes = []
        for node in toposort_nodes([v.owner for v in outputs if v.owner is not None], lambda v: False):
            inputs = tuple(ref(v) for v in node.inputs)
            for j, out in enumerate(node.outputs):
                refs[out] = (len(nodes), j)
            nodes.append((node.op, inputs, tuple((out.type, out.name) for out in node.outputs)))
        return GraphTable(leaves, nodes, [ref(v) for v in outputs])

    def build(self) -> list[Variable]:
        """The graph's output variables, rebuilt node by node."""
        built: list[list[Variable]] = []

        def at(reference: tuple) -> Variable:
            kind, index = reference
            return self.leaves[index] if kind == "leaf" else built[kind][index]

        for op, inputs, outputs in self.nodes:
            node = Apply(op, [at(r) for r in inputs], [Variable(t, name=n) for t, n in outputs])
            built.append(node.outputs)
        return [at(r) for r in self.outputs]

    @staticmethod
    def output(table: GraphTable, k: int) -> Variable:
        return table.build()[k]


# -- constructors ------------------------------------------------------------


def constant(value: Any, name: str | None = None, dtype: Any = None) -> Constant:
    """A constant of `value`, with numpy's dtype for it unless `dtype` is given."""
    if isinstance(value, Variable):
        raise TypeError(f"constant: {value} is already a graph variable")
    try:
        array = np.asarray(value, dtype=dtype)
    except OverflowError as exc:
        raise LiteralOverflowError(
            f"constant: {describe_literal(value)} does not fit {dtype}: {exc}"
        ) from None
    if array.dtype == object and isinstance(value, int):
        raise LiteralOverflowError(
            f"constant: the Python integer {describe_literal(value)} is too large for any integer dtype;"
            " give a float dtype or write it as a float"
        )
    if array.dtype.kind not in "biuf":
        raise TypeError(f"constant: unsupported value {value!r} of dtype {array.dtype}")
    return Constant(TensorType(array.dtype, array.shape), array, name=name)


def as_variable(value: Any, others: Sequence[str] = (), exact_ints: bool = False) -> Variable:
    """A Variable for `value`; a Python scalar is weak: it takes the dtype NumPy 2 gives it next to `others`.

    This is the one place Python numbers enter graphs (operators, op calls, the
    parser all come here); see `dtype_of_python_scalar` for the rule and its errors.
    """
    if isinstance(value, Variable):
        return value
    if _is_python_scalar(value):
        return constant(value, dtype=dtype_of_python_scalar(value, others, exact_ints))
    try:
        return constant(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot use {value!r} as a graph variable: {exc}") from None


def as_variables(
    values: Sequence[Any], exact_ints: bool = False, ufunc: np.ufunc | None = None
) -> list[Variable]:
    """Variables for an op's operands: Python scalars are weak, typed by the other operands (NEP 50).

    A scalar takes the dtype ``np.result_type`` gives it next to the operands that
    are not Python scalars (Variables, arrays); when all are Python scalars they
    meet at NumPy's default dtype of the widest kind among them.  `ufunc` is the
    NumPy function a binary op mirrors: where NumPy runs it in a wider loop
    (`int8_array / 300` divides in float64), a value only that loop's dtype holds
    takes that dtype instead of overflowing.  `exact_ints`: see `dtype_of_python_scalar`.
    """
    scalars = [v for v in values if _is_python_scalar(v)]
    if not scalars:
        return [as_variable(v) for v in values]
    others = [d for d in map(_numeric_dtype, values) if d is not None]
    if not others and len(scalars) == len(values):
        widest = max(scalars, key=lambda v: (isinstance(v, float), not isinstance(v, bool)))
        others = [dtype_of_python_scalar(type(widest)(0), ())]
    loop = _ufunc_loop(ufunc, values) if ufunc is not None and len(values) == ufunc.nin == 2 else None
    result = []
    for k, value in enumerate(values):
        try:
            result.append(as_variable(value, others, exact_ints))
        except LiteralOverflowError:
            if loop is None:
                raise
            result.append(
                as_variable(value, [loop[k]], exact_ints)
            )  # raises again if the loop cannot hold it
    return result


def _ufunc_loop(ufunc: np.ufunc, values: Sequence[Any]) -> tuple[str, ...] | None:
    """The operand dtypes of the loop `ufunc` runs on `values`, Python scalars weak; None if it has none."""
    descriptors = []
    for v in values:
        if _is_python_scalar(v):
            # NumPy takes the Python types int and float for weak scalars; a bool is the lowest dtype anyway
            kind = float if isinstance(v, float) else int
            descriptors.append(np.dtype(bool) if isinstance(v, bool) else kind)
        else:
            dtype = _numeric_dtype(v)
            if dtype is None:
                return None
            descriptors.append(np.dtype(dtype))
    return _resolved_loop(ufunc, tuple(descriptors))


@cache
def _resolved_loop(ufunc: np.ufunc, descriptors: tuple[Any, ...]) -> tuple[str, ...] | None:
    try:
        loop = ufunc.resolve_dtypes(descriptors + (None,) * ufunc.nout)
    except (TypeError, np.exceptions.DTypePromotionError):
        return None
    if any(d.kind not in "biuf" for d in loop[: ufunc.nin]):  # e.g. the object loop comparing two Python ints
        return None
    return tuple(d.name for d in loop[: ufunc.nin])


def _numeric_dtype(value: Any) -> str | None:
    """The dtype of an operand that is not a Python scalar, when it is a numeric one."""
    if isinstance(value, Variable):
        return value.dtype
    if _is_python_scalar(value):
        return None
    try:
        dtype = np.asarray(value).dtype
    except (TypeError, ValueError):
        return None
    return dtype.name if dtype.kind in "biuf" else None


def _is_python_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def tensor(name: str | None = None, dtype: Any = "float64", shape: Iterable[int | None] = ()) -> Variable:
    """An input variable of any rank; `shape` entries are lengths or None."""
    return TensorType(dtype, shape)(name)


def scalar(name: str | None = None, dtype: Any = "float64") -> Variable:
    return TensorType(dtype, ())(name)


def float64(name: str | None = None) -> Variable:
    return TensorType("float64", ())(name)


def _ranked(kind: str, ndim: int, dtype: Any, shape: Iterable[int | None]) -> TensorType:
    shape = tuple(shape)
    if len(shape) != ndim:
        raise ValueError(f"{kind}: shape {shape} must have {ndim} entries")
    return TensorType(dtype, shape)


def vector(name: str | None = None, dtype: Any = "float64", shape: tuple[int | None] = (None,)) -> Variable:
    return _ranked("vector", 1, dtype, shape)(name)


def matrix(
    name: str | None = None, dtype: Any = "float64", shape: tuple[int | None, int | None] = (None, None)
) -> Variable:
    return _ranked("matrix", 2, dtype, shape)(name)


def type_from_spec(spec: str | TensorType) -> TensorType:
    """Parse a type spec: `vector`, `matrix:float32`, `float32`, `tensor3`, `(3,None):float32`."""
    if isinstance(spec, TensorType):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"type spec must be a string or TensorType, got {spec!r}")
    kind, _, dtype = spec.partition(":")
    kind = kind.strip()
    dtype = dtype.strip() or "float64"
    if kind in RANK_NAMES:
        return TensorType(dtype, (None,) * RANK_NAMES[kind])
    if kind.startswith("(") and kind.endswith(")"):
        dims = [d.strip() for d in kind[1:-1].split(",") if d.strip()]
        try:
            return TensorType(dtype, [None if d == "None" else int(d) for d in dims])
        except ValueError:
            raise ValueError(f"bad shape in type spec {spec!r}") from None
    try:
        return TensorType(kind, ())  # a bare dtype means a scalar of it
    except TypeError:
        known = ", ".join(RANK_NAMES)
        raise ValueError(f"unknown type {spec!r} (use {known}, a dtype, or a shape like (3,None))") from None


# -- iterative walks -----------------------------------------------------------


def ancestors(outputs: Iterable[Variable], blockers: Iterable[Variable] = ()) -> Iterator[Variable]:
    """Every variable the outputs depend on (outputs included), each once, depth first."""
    blocked = set(blockers)
    seen: set[int] = set()
    stack = list(reversed(list(outputs)))
    while stack:
        var = stack.pop()
        if id(var) in seen:
            continue
        seen.add(id(var))
        yield var
        if var.owner is not None and var not in blocked:
            stack.extend(reversed(var.owner.inputs))


def graph_inputs(outputs: Iterable[Variable], blockers: Iterable[Variable] = ()) -> list[Variable]:
    """The non-constant leaves the outputs depend on, in order of first appearance."""
    blocked = set(blockers)
    return [
        v
        for v in ancestors(outputs, blocked)
        if (v.owner is None or v in blocked) and not isinstance(v, Constant)
    ]


def io_toposort(
    inputs: Iterable[Variable],
    outputs: Iterable[Variable],
    orderings: dict[Apply, Iterable[Apply]] | None = None,
) -> list[Apply]:
    """The apply nodes between inputs and outputs, each after the nodes it depends on.

    `orderings` maps a node to extra nodes that must come before it.
    """
    blocked = set(inputs)
    roots = [out.owner for out in outputs if out.owner is not None and out not in blocked]
    return toposort_nodes(roots, lambda var: var in blocked, orderings)


def toposort_nodes(
    roots: Iterable[Apply],
    stop: Callable[[Variable], bool],
    orderings: dict[Apply, Iterable[Apply]] | None = None,
) -> list[Apply]:
    """`roots` and the nodes they depend on, dependencies first, not walking past `stop(var)`.

    Raises ValueError naming a node when the walk finds a cycle.
    """
    order: list[Apply] = []
    done: set[Apply] = set()
    entered: set[Apply] = set()
    stack: list[Apply] = list(reversed(list(roots)))
    while stack:
        node = stack[-1]
        if node in done:
            stack.pop()
            continue
        if node not in entered:
            entered.add(node)
            deps = [v.owner for v in node.inputs if v.owner is not None and not stop(v)]
            if orderings:
                deps.extend(orderings.get(node, ()))
            for dep in reversed(deps):
                if dep not in done:
                    if dep in entered:
                        raise ValueError(f"the graph has a cycle through {dep}")
                    stack.append(dep)
            continue
        stack.pop()
        done.add(node)
        order.append(node)
    return order


def clone_get_equiv(
    inputs: Sequence[Variable],
    outputs: Sequence[Variable],
    copy_inputs: bool = True,
    memo: dict[Any, Any] | None = None,
) -> dict[Any, Any]:
    """Copy the graph between inputs and outputs; returns the map from old nodes/variables to new.

    Constants map to themselves.  Leaves that are not listed in `inputs` are kept as they are.
    `memo` (updated in place) may pre-seed the map: a variable found there is
    replaced by its entry and the graph above it is not walked or copied; an
    apply node found there is used as the copy of that node.
    """
    equiv: dict[Any, Any] = {} if memo is None else memo
    for var in inputs:
        if var not in equiv:
            equiv[var] = var.clone() if copy_inputs else var
    roots = [v.owner for v in outputs if v.owner is not None and v not in equiv]
    for node in toposort_nodes(roots, equiv.__contains__):
        new_node = equiv.get(node)
        if new_node is None:
            new_node = node.clone_with_new_inputs([equiv.setdefault(v, v) for v in node.inputs])
            equiv[node] = new_node
        for old, new in zip(node.outputs, new_node.outputs):
            equiv.setdefault(old, new)
    for var in outputs:
        equiv.setdefault(var, var)
    return equiv


def clone(
    inputs: Sequence[Variable], outputs: Sequence[Variable], copy_inputs: bool = True
) -> tuple[list[Variable], list[Variable]]:
    """Copies of inputs and outputs, with the graph between them copied."""
    equiv = clone_get_equiv(inputs, outputs, copy_inputs)
    return [equiv[v] for v in inputs], [equiv[v] for v in outputs]

"""Graphs as terms: the bridge between graph variables and etuples, cons, unification and kanren.

Importing this module registers our classes with `etuples` (`etuplize`,
`etuple`), `cons` (`car`/`cdr`) and `unification` (`_unify`/`_reify`), so
that graph variables can be matched directly against patterns:

    unify(add(x, y), etuple(add, x, y_lv))      -> {y_lv: y}
    unify(cons(op_lv, args_lv), add(x, y, z))   -> {op_lv: add, args_lv: e(x, y, z)}
    reify(etuple(add, y_lv, y_lv), s).evaled_obj -> add(y, y), a graph variable

A variable computed by a single-output node denotes the term
`e(op, *inputs)`.  `etuplize` gives that term as a `GraphETuple`, which is
lazy: one level is built when a match first looks at it, so matching a small
pattern at the root of a 100,000-node graph costs as much as matching it on a
small graph.  Graph inputs and constants are atoms (leaves of terms).  Outputs
of multi-output nodes are atoms too: `e(op, *inputs)` would evaluate to all
of the node's outputs, not to the one output at hand.

Graphs never contain logic variables, so graph terms are ground: reifying one
returns it unchanged and unifying two of them is a structural comparison of
the graphs, done iteratively (no recursion over graph depth).
"""

from __future__ import annotations

from collections.abc import Mapping

from cons.core import ConsError, ConsPair, _car, _cdr
from etuples import etuple, etuplize
from etuples.core import ExpressionTuple, KwdPair
from unification.core import _reify, _unify

from relwrite.graph.basic import Apply, Op, OpPattern, Variable

__all__ = [
    "GraphETuple",
    "OpETuple",
    "etuple",
    "etuplize",
    "note_read",
    "record_expansions",
    "same_expression",
    "structural_hash",
]

_ATOM = "an atom (graph input, constant or output of a multi-output node)"


_recorders: list[set[Apply]] = []


class record_expansions:  # lower case: used like a function, `with record_expansions() as seen`
    """Collect the nodes whose op or inputs term matching reads while the block runs.

    The equilibrium engine uses it to learn what a failed match depended on,
    so that it retries the match only when one of those nodes changes.  A
    class rather than a generator-based context manager: the engine opens
    one per rule attempt.  An interrupt inside `__enter__` takes the
    registration back: `__exit__` would not run, and a stale recorder would
    go on collecting every node any later match reads.
    """

    __slots__ = ("seen",)

    def __enter__(self) -> set[Apply]:
        seen: set[Apply] = set()
        self.seen = seen
        try:
            _recorders.append(seen)
            return seen
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc_info: object) -> None:
        if _recorders and _recorders[-1] is self.seen:  # the common case, once per rule attempt
            del _recorders[-1]
        else:
            remove_identical(_recorders, self.seen)


def remove_identical(stack: list, item: object) -> None:
    """Remove the last entry of `stack` that is `item` itself (if any).

    By identity: `list.remove` compares by value, and two collectors that
    collected the same things are equal (a nested block's would be taken).
    """
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is item:
            del stack[i]
            return


def note_read(node: Apply) -> Apply:
    """Note that matching read `node`'s op or inputs (for `record_expansions`)."""
    for seen in _recorders:
        seen.add(node)
    return node


def _expression_node(var: Variable) -> Apply | None:
    """The node whose term `var` denotes, or None when `var` is an atom."""
    node = var.owner
    if node is None or len(node.outputs) != 1:
        return None
    return node


def _term(var: Variable) -> GraphETuple | Variable:
    """`var` as a term element: a lazy GraphETuple for expressions, the variable itself for atoms."""
    return var if _expression_node(var) is None else GraphETuple.of(var)


def same_expression(u: Variable, v: Variable) -> bool:
    """Whether two graphs compute the same expression: same ops, same atoms, same shape.

    Atoms match when they are the same variable or equal constants.  Each pair
    of variables is compared once, so shared subgraphs cost nothing extra.
    """
    if u is v:
        return True
    node_u, node_v = _expression_node(u), _expression_node(v)
    if node_u is None or node_v is None:  # an atom: decided here, without the walk's bookkeeping
        return node_u is node_v and u == v
    if note_read(node_u).op != note_read(node_v).op or len(node_u.inputs) != len(node_v.inputs):
        return False
    stack = list(zip(node_u.inputs, node_v.inputs))
    seen: set[tuple[int, int]] = set()
    while stack:
        a, b = stack.pop()
        if a is b:
            continue
        key = (id(a), id(b))
        if key in seen:
            continue
        seen.add(key)
        node_a, node_b = _expression_node(a), _expression_node(b)
        if node_a is None or node_b is None:
            if node_a is not node_b or a != b:
                return False
        elif note_read(node_a).op != note_read(node_b).op or len(node_a.inputs) != len(node_b.inputs):
            return False
        else:
            stack.extend(zip(node_a.inputs, node_b.inputs))
    return True


def structural_hash(var: Variable, memo: dict[tuple[Variable, int], int], depth: int = 3) -> int:
    """A hash equal for any two graphs `same_expression` finds equal: their ops and atoms `depth` levels down.

    Bounded in depth so that hashing the operands of a node in a deep graph
    costs a bounded amount whatever lies below (graphs equal that far and
    different deeper share a hash: a comparison tells them apart).  Three
    levels tell look-alike terms apart (sin(x * 2) from sin(x * 3)); six
    walked a large part of a DAG of wide sums (each level multiplies the
    region by a sum's width), a fifth of the time of canonicalizing one.  `memo`
    holds (variable, depth) -> hash; share it across the calls of one
    comparison round.  Reads are noted like `same_expression`'s.
    """
    stack: list[tuple[Variable, int, bool]] = [(var, depth, False)]
    while stack:
        current, level, ready = stack.pop()
        if (current, level) in memo:
            continue
        node = _expression_node(current)
        if node is None:
            memo[current, level] = hash(current)  # a constant hashes by value, any other atom by identity
        elif level == 0:
            memo[current, level] = hash((note_read(node).op, len(node.inputs)))
        elif ready:
            memo[current, level] = hash((note_read(node).op, tuple(memo[i, level - 1] for i in node.inputs)))
        else:
            stack.append((current, level, True))
            stack.extend((i, level - 1, False) for i in node.inputs if (i, level - 1) not in memo)
    return memo[var, depth]


class OpETuple(ExpressionTuple):
    """An expression tuple headed by an `Op`; `etuple(op, ...)` builds one.

    It evaluates by calling the op directly, skipping the per-node
    `inspect.signature` that a plain `ExpressionTuple` does (several times
    slower than building the node).  Tuples derived from it (reified, sliced,
    consed) keep this class; when the head is not an op, evaluation is the
    plain etuple's.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        """Aesara's display, `e(add, y, y)`."""
        return str(self)

    def __add__(self, other):
        """Concatenate; `cons(car(t), cdr(t))` gives back `t` itself, graph terms included.

        When the pieces rejoin `other`'s parent term, that term is returned; the
        plain etuple would copy it into its own class, turning a `GraphETuple`
        into a term that no longer evaluates to its variable.
        """
        if isinstance(other, ExpressionTuple):
            joined = other.__radd__(self._tuple)
            if joined is other._parent:
                return joined
        return super().__add__(other)

    def _eval_step(self):
        if self._evaled_obj is not self.null:
            yield self._evaled_obj
            return
        items = self._tuple
        if not items or not isinstance(items[0], Op):
            yield from super()._eval_step()
            return
        op, inputs = items[0], []
        for item in items[1:]:
            if isinstance(item, KwdPair):
                raise TypeError(f"{op} takes no keyword arguments, got {item} in {self}")
            if isinstance(item, ExpressionTuple):
                item = yield item._eval_step()
            inputs.append(item)
        self._evaled_obj = op(*inputs)
        yield self._evaled_obj


def _etuple_of_op(*items, **kwargs) -> OpETuple:
    return OpETuple(items, **kwargs)


etuple.add((Op, [object]), _etuple_of_op)


class GraphETuple(OpETuple):
    """The term `e(op, *inputs)` of a graph variable, built on first access.

    `variable` is the graph variable; `evaled_obj` is that variable itself
    (nothing is rebuilt).  Inputs computed by single-output nodes appear as
    lazy GraphETuples, atoms as the variables themselves.

    Equality is structural, as for any etuple, and a GraphETuple also equals
    its variable (and any graph computing the same expression).  The hash is
    the variable's, so hashing is O(1) at any depth; two distinct graphs
    computing the same expression compare equal yet hash differently, so do
    not rely on sets of terms to merge such graphs.

    Tuples derived from a GraphETuple (slices, flattenings, conses) are not
    backed by a variable: constructing this class from a sequence gives an
    `OpETuple`.
    """

    __slots__ = ("_expression", "variable")

    def __new__(cls, seq=None, **kwargs):
        return OpETuple(seq, **kwargs)

    @classmethod
    def of(cls, variable: Variable) -> GraphETuple:
        """The term of `variable`, which must be computed by a single-output node."""
        if _expression_node(variable) is None:
            raise TypeError(f"{variable} is {_ATOM}")
        term = object.__new__(cls)
        term.variable = variable
        term._evaled_obj = variable
        term._parent = None
        term._expression = None
        return term

    @property
    def _tuple(self) -> tuple:
        if self._expression is None:
            node = note_read(self.variable.owner)
            self._expression = (node.op, *map(_term, node.inputs))
        return self._expression

    def _eval_step(self):
        yield self.variable

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GraphETuple):
            return same_expression(self.variable, other.variable)
        if isinstance(other, Variable):
            return same_expression(self.variable, other)
        return super().__eq__(other)

    def __hash__(self) -> int:
        return hash(self.variable)

    def __str__(self) -> str:
        node = self.variable.owner
        return f"e({', '.join(map(str, (node.op, *node.inputs)))})"

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


# -- etuplize, car and cdr -------------------------------------------------------------


@etuplize.register(Variable)
def etuplize_variable(
    x: Variable, shallow: bool = False, return_bad_args: bool = False
) -> GraphETuple | Variable:
    """The lazy term `e(op, *inputs)` of `x` (a `GraphETuple`).

    Laziness makes `shallow` irrelevant: only the levels a match looks at are
    ever built.  Atoms (inputs, constants, outputs of multi-output nodes) raise
    a TypeError, or are returned as they are when `return_bad_args` is true,
    as etuples' own `etuplize` does.
    """
    if _expression_node(x) is not None:
        return GraphETuple.of(x)
    if return_bad_args:
        return x
    raise TypeError(f"etuplize: {x} is {_ATOM}, not an expression")


def _expression_node_or_cons_error(z: Variable) -> Apply:
    node = _expression_node(z)
    if node is None:
        raise ConsError(f"{z} is {_ATOM}")
    return node


@_car.register(Variable)
def _car_variable(z: Variable) -> Op:
    return note_read(_expression_node_or_cons_error(z)).op


@_cdr.register(Variable)
def _cdr_variable(z: Variable) -> ExpressionTuple:
    _expression_node_or_cons_error(z)
    return GraphETuple.of(z)[1:]


# -- unification and reification ------------------------------------------------------


def _unify_expressions(u: Variable | GraphETuple, v: Variable | GraphETuple, s: Mapping):
    """Graphs hold no logic variables: they unify, leaving `s` as it is, when they are the same expression.

    One iterative walk does it all, so this returns directly instead of yielding sub-unifications.
    """
    u = u.variable if isinstance(u, GraphETuple) else u
    v = v.variable if isinstance(v, GraphETuple) else v
    return s if same_expression(u, v) else False


def _unify_variable_term(u: Variable, v: ExpressionTuple | ConsPair, s: Mapping):
    """Unify a graph variable with a term by looking one level into the graph."""
    yield False if _expression_node(u) is None else _unify(GraphETuple.of(u), v, s)


def _unify_term_variable(u: ExpressionTuple | ConsPair, v: Variable, s: Mapping):
    yield False if _expression_node(v) is None else _unify(u, GraphETuple.of(v), s)


def _reify_ground(u: GraphETuple, s: Mapping) -> GraphETuple:
    """Graph terms hold no logic variables: never walk them."""
    return u


_unify.add((Variable, Variable, Mapping), _unify_expressions)
_unify.add((GraphETuple, GraphETuple, Mapping), _unify_expressions)
_unify.add((Variable, GraphETuple, Mapping), _unify_expressions)
_unify.add((GraphETuple, Variable, Mapping), _unify_expressions)
_unify.add((Variable, (ExpressionTuple, ConsPair), Mapping), _unify_variable_term)
_unify.add(((ExpressionTuple, ConsPair), Variable, Mapping), _unify_term_variable)
_reify.add((GraphETuple, Mapping), _reify_ground)


def _unify_op_pattern(u: OpPattern, v: Op, s: Mapping):
    """An op pattern (an op class with props that may be logic variables) unifies with an op of its class
    by its props, so a rule's prop variables tie its two sides in a kanren run."""
    if type(v) is not u.kind:
        yield False
        return
    yield _unify(tuple(value for _, value in u.props), tuple(getattr(v, p) for p, _ in u.props), s)


def _unify_op_op_pattern(u: Op, v: OpPattern, s: Mapping):
    yield from _unify_op_pattern(v, u, s)


def _unify_op_patterns(u: OpPattern, v: OpPattern, s: Mapping):
    if u.kind is not v.kind or [p for p, _ in u.props] != [p for p, _ in v.props]:
        yield False
        return
    yield _unify(tuple(value for _, value in u.props), tuple(value for _, value in v.props), s)


def _reify_op_pattern(u: OpPattern, s: Mapping):
    """The op, once every prop is known (and the class accepts them); else the pattern, props reified."""
    props = yield _reify(tuple(value for _, value in u.props), s)
    named = tuple(zip((p for p, _ in u.props), props))
    if set(u.kind.__props__) <= {p for p, _ in named}:
        try:
            yield u.kind(**dict(named))
            return
        except (TypeError, ValueError):
            pass
    yield OpPattern(u.kind, named)


_unify.add((OpPattern, Op, Mapping), _unify_op_pattern)
_unify.add((Op, OpPattern, Mapping), _unify_op_op_pattern)
_unify.add((OpPattern, OpPattern, Mapping), _unify_op_patterns)
_reify.add((OpPattern, Mapping), _reify_op_pattern)

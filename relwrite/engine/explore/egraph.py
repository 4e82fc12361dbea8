"""The equivalence store: an e-graph in the sense of egg, with the record of why classes merged.

Every term the explorer sees is interned as *term nodes*: an op applied to
the exact term nodes of its operands, or a leaf (a graph input or a
constant).  Term nodes live in equivalence classes kept by union-find; an
*e-node* is a term node up to the classes of its operands, hash-consed in
`_memo`, and a class is the set of its e-nodes.  An e-node's canonical form
names its op by a small int (`op_id`), so hashing and comparing forms is
hashing ints, not ops (an op's hash is Python code).  Congruence (equal operands
give equal applications) is restored by `rebuild`, egg's deferred rebuilding.

add and mul are associative and commutative: their e-nodes hold the sorted
multiset of their operand classes, and interning splices nested sums
(products) of one dtype into one node, so every AC-equal form of a sum is the
same e-node and nothing has to search over orders.

Explanations follow egg's design: every union links the two term nodes it
was made on in a proof forest, with its reason (`Applied` for a rule,
`CONGRUENCE`, `FOLDING` for constant folding) and the time it was made;
a folding link always joins a constant to an application of constants (a
term node congruent to the folded one when its operands became constant by
rewriting), so a fold's proof carries the assumptions of those rewrites;
`proof_path` gives the chain of links between two term nodes of one class.
A congruence link keeps which operands it paired, and a rule application
between two term nodes already in one class is kept as a spare link
(`spare_links`): both let explanations look for shorter chains than the
forest's.

Nothing here recurses: terms are walked with explicit stacks, so a 100,000
node chain interns like a small graph.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from relwrite.backends.numpy.impls import EvaluationError, evaluate
from relwrite.graph import ops
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.types import TensorType
from relwrite.relations.operands import canonical_key
from relwrite.relations.registry import Rule

AC_OPS: frozenset[Op] = frozenset({ops.add, ops.mul})
"""Ops whose e-nodes hold sorted operand multisets (associative and commutative)."""

_AC_KINDS = frozenset(type(op) for op in AC_OPS)
"""Their classes: they have no props, so an op is one of them exactly when its class is (a faster test
on the hot paths than hashing the op)."""

CONGRUENCE = "congruence"
"""Reason of a union of two applications of one op to equivalent operands."""

FOLDING = "constant_folding"
"""Reason of a union of an application of constants with the constant it computes."""

PlaceholderClass = Callable[[Variable], "int | None"]


def _no_class(v: Variable) -> int | None:
    return None


def _never(v: Variable) -> bool:
    return False


@dataclass(frozen=True)
class Lookup:
    """Where a term already is: its class (None: absent), the classes of its subterms, of its operands."""

    cls: int | None
    inside: frozenset[int]
    operands: tuple[int | None, ...]


class Applied(NamedTuple):
    """A union made by a rule: run `direction` on the term node `source`, it answered `result`.

    `bindings` pairs the names of the rule's assumption variables with the
    term nodes they were bound to.  (A named tuple: one is made per union.)
    """

    rule: Rule
    direction: str
    source: int
    result: int
    bindings: tuple[tuple[str, int], ...] = ()


Reason = Applied | str


class EClass:
    """One equivalence class: its e-nodes (term node ids), every term node in it, parents, static type
    and a leaf it holds."""

    __slots__ = ("leaf", "nodes", "parents", "terms", "type")

    def __init__(self, node: int, type_: TensorType, leaf: Variable | None):
        self.nodes: list[int] = [node]
        self.terms: list[int] = [node]
        self.parents: list[tuple[tuple, int]] = []
        self.type = type_
        self.leaf = leaf


class EGraph:
    """Hash-consed e-nodes in union-find classes, congruence by rebuilding, and a proof forest."""

    def __init__(self) -> None:
        self._op: list[Op | None] = []
        self._kind: list[int] = []  # a term node's op id (0 for a leaf)
        self._op_ids: dict[Op, int] = {}
        self._children: list[tuple[int, ...]] = []
        self._leaf: list[Variable | None] = []
        self._type: list[TensorType] = []
        self._uf: list[int] = []
        self._proof: list[int | None] = []
        self._why: list[Reason | None] = []
        self._when: list[int] = []
        self._clock = 0
        # congruence links (a < b) -> a's operands paired with b's; () when they pair in order
        self._paired: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
        self._spare: dict[int, list[tuple[int, Applied]]] = {}
        self._exact: dict[tuple, int] = {}
        self._leaves: dict[Variable, int] = {}
        self._memo: dict[tuple, int] = {}
        self._tried_folding: set[tuple] = set()
        self._graphs: dict[int, Variable] = {}
        self._pending: list[int] = []
        self.classes: dict[int, EClass] = {}
        self.node_count = 0
        self.unions = 0
        self.changed: list[int] = []
        """Classes in the order they changed (created, merged: the class kept, or `mark_changed`), for
        incremental readers: a search remembers how far it has read."""
        self.touched: list[int] = []
        """E-nodes (their term nodes) in the order they changed: created, moved into another class by
        a merge, given new operand classes by a rebuild, or in a class `mark_changed` names.  A match
        made of e-nodes none of which is here since a search was there at that search, as it is now."""
        self._enode: list[bool] = []  # whether a term node stands for an e-node of its class
        self._signature: dict[int, tuple] = {}  # an e-node's canonical form when it was last touched
        self._clean = True  # no union since the last rebuild: every e-node's signature is its form

    # -- reading -------------------------------------------------------------------------------

    def find(self, i: int) -> int:
        """The id of the class of term node `i` (its union-find root)."""
        uf = self._uf
        root = i
        while uf[root] != root:
            root = uf[root]
        while uf[i] != root:
            uf[i], i = root, uf[i]
        return root

    @property
    def class_count(self) -> int:
        return len(self.classes)

    def op(self, node: int) -> Op | None:
        """The op of a term node (None for a leaf)."""
        return self._op[node]

    def leaf(self, node: int) -> Variable | None:
        """The graph input or constant a leaf term node is (None for an application)."""
        return self._leaf[node]

    def type(self, node: int) -> TensorType:
        return self._type[node]

    def op_id(self, op: Op) -> int:
        """The small int standing for `op` (and every op equal to it) in canonical forms: from 1 up,
        negative for add and mul (their operands are sorted)."""
        found = self._op_ids.get(op)
        if found is None:
            found = len(self._op_ids) + 1
            if type(op) in _AC_KINDS:
                found = -found
            self._op_ids[op] = found
        return found

    def children(self, node: int) -> tuple[int, ...]:
        """The classes of a term node's operands (sorted for add and mul)."""
        return self.canonical(node)[1]

    def exact_children(self, node: int) -> tuple[int, ...]:
        """The term nodes a term node was built from."""
        return self._children[node]

    def nodes(self, cls: int) -> list[int]:
        """The e-nodes of a class (one term node for each)."""
        return self.classes[self.find(cls)].nodes

    def constant(self, cls: int) -> int | None:
        """The term node of the constant a class holds (a leaf, or what folding computed), else None."""
        leaf = self.classes[self.find(cls)].leaf
        return self._leaves.get(leaf) if isinstance(leaf, Constant) else None

    def terms(self, cls: int) -> list[int]:
        """Every term node of a class."""
        return self.classes[self.find(cls)].terms

    def canonical(self, node: int) -> tuple:
        """The e-node of a term node: its op's id (`op_id`) and its operands' classes (sorted for add
        and mul);
        term nodes with one canonical e-node are congruent.  Between a rebuild and the next union an
        e-node's form is the one `rebuild` recorded (no operand class has merged since)."""
        if self._clean:
            found = self._signature.get(node)
            if found is not None:
                return found
        return self._canonical(node)

    def reachable(self, roots: Iterable[int]) -> list[int]:
        """The classes reachable from `roots` through operands, each once."""
        seen: set[int] = set()
        order: list[int] = []
        stack = [self.find(r) for r in roots]
        classes = self.classes
        form = self._signature.__getitem__ if self._clean else self._canonical  # `canonical`
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            order.append(c)
            for n in classes[c].nodes:
                stack.extend(form(n)[1])  # those seen by then are passed over when popped
        return order

    def mark_changed(self, classes: Iterable[int]) -> None:
        """Note `classes` (and their e-nodes) as changed for a reader's own reason (a search: they
        became reachable)."""
        for c in classes:
            self.changed.append(c)
            self.touched.extend(self.classes[self.find(c)].nodes)

    def is_enode(self, node: int) -> bool:
        """Whether term node `node` stands for an e-node of its class (is in `nodes` of its class)."""
        return self._enode[node]

    def near(self, classes: Iterable[int], levels: int) -> set[int]:
        """The classes of `classes` (found) and those up to `levels` parent links above them: where an
        e-match reading that deep can see them."""
        found = {self.find(c) for c in classes}
        frontier = found
        for _ in range(levels):
            above = set()
            for c in frontier:
                above.update(self.find(n) for _, n in self.classes[c].parents)
            frontier = above - found
            if not frontier:
                break
            found |= frontier
        return found

    def lookup_node(self, op: Op, children: Iterable[int]) -> int | None:
        """The class of the e-node `op(*children)` (children: term nodes or classes), None when absent.

        Between rebuilds the hash-cons may miss an e-node whose operands were merged since.
        """
        kind = self._op_ids.get(op)
        if kind is None:
            return None
        find = self.find
        classes = tuple([find(c) for c in children])
        if kind < 0:
            classes = tuple(sorted(classes))
        found = self._memo.get((kind, classes))
        return None if found is None else self.find(found)

    def lookup_tables(self) -> tuple[Callable[[tuple], int | None], list[int]]:
        """The hash-cons's ``get`` (canonical form -> a term node of that e-node) and the union-find
        array (a term node's parent, itself at a root), for code that looks e-nodes up by canonical
        form without a call per look-up; the same objects for the e-graph's life."""
        return self._memo.get, self._uf

    def term(self, node: int) -> Variable:
        """The graph a term node stands for (its exact term), built once and kept."""
        graphs = self._graphs
        stack = [node]
        while stack:
            n = stack[-1]
            if n in graphs:
                stack.pop()
                continue
            leaf = self._leaf[n]
            if leaf is not None:
                graphs[n] = leaf
                stack.pop()
                continue
            missing = [c for c in self._children[n] if c not in graphs]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            inputs = [graphs[c] for c in self._children[n]]
            op = self._op[n]
            if op in AC_OPS:
                inputs.sort(key=canonical_key)
            graphs[n] = op(*inputs)
        return graphs[node]

    # -- adding terms ----------------------------------------------------------------------------

    def leaf_node(self, value: Variable) -> int | None:
        """The term node of a graph input or constant (None when it is not in the e-graph)."""
        return self._leaves.get(value)

    def add_leaf(self, value: Variable) -> int:
        """The term node of a graph input or constant, created (in a class of its own) when new."""
        found = self._leaves.get(value)
        if found is not None:
            return found
        i = self._new(None, (), value, value.type)
        self._leaves[value] = i
        self.classes[i] = EClass(i, value.type, value)
        self._touch_new(i)
        return i

    def add_node(self, op: Op, children: tuple[int, ...], type_: TensorType, kind: int | None = None) -> int:
        """The term node `op(*children)` (children are term nodes), created when new; `kind` is
        `op_id(op)` when the caller knows it (hashing an op runs Python).

        A new term node whose e-node exists joins that e-node's class (a
        congruence link); otherwise it starts a class of its own, which
        constant folding may merge with the constant it computes.
        """
        if kind is None:
            kind = self.op_id(op)
        if kind < 0:
            children = tuple(sorted(children))
        key = (kind, children)
        exact = self._exact
        found = exact.get(key)
        if found is not None:
            return found
        i = self._new(op, children, None, type_, kind)
        exact[key] = i
        find, uf = self.find, self._uf
        classes = tuple([c if uf[c] == c else find(c) for c in children])
        canon = (kind, tuple(sorted(classes)) if kind < 0 else classes)  # `_canonical(i)`
        existing = self._memo.get(canon)
        if existing is not None:
            root = uf[i] = find(existing)
            self.classes[root].terms.append(i)
            self._link(i, existing, CONGRUENCE)
            return i
        self._memo[canon] = i
        eclasses = self.classes
        eclasses[i] = EClass(i, type_, None)
        self._touch_new(i, canon)
        constant = True
        for c in set(classes):
            here = eclasses[c]
            here.parents.append((canon, i))
            constant = constant and type(here.leaf) is Constant
        if constant:
            self._fold(i)
        return i

    def intern(
        self,
        root: Variable,
        placeholder_class: PlaceholderClass = _no_class,
        flatten: bool = True,
        exact: Callable[[Variable], bool] = _never,
    ) -> int:
        """Add the term of graph `root` and return its term node.

        `placeholder_class(v)` names the class a placeholder variable stands
        for (its subgraph is not read).  With `flatten`, sums of sums (and
        products of products) of one dtype become one node holding all their
        operands, except at subterms `exact(v)` says to keep as they are
        (terms materialized from e-nodes, which must land on those e-nodes).
        """
        ids, _ = self._walk(root, placeholder_class, flatten, exact, create=True)
        return ids[root]

    def lookup(
        self,
        root: Variable,
        placeholder_class: PlaceholderClass = _no_class,
        flatten: bool = True,
        exact: Callable[[Variable], bool] = _never,
    ) -> Lookup:
        """Where the term of `root` already is, adding nothing (see `intern` for the arguments)."""
        ids, operands = self._walk(root, placeholder_class, flatten, exact, create=False)
        found = ids.pop(root)
        return Lookup(
            None if found is None else self.find(found),
            frozenset(self.find(i) for i in ids.values() if i is not None),
            tuple(None if i is None else self.find(i) for i in operands),
        )

    def _walk(
        self,
        root: Variable,
        placeholder_class: PlaceholderClass,
        flatten: bool,
        exact: Callable[[Variable], bool],
        create: bool,
    ) -> tuple[dict[Variable, int | None], tuple[int | None, ...]]:
        """Term nodes (None: absent, when not `create`) of the term's variables, and the root's operands."""
        order, clients = self._postorder(root, placeholder_class)
        ids: dict[Variable, int | None] = {}
        flat: dict[Variable, list[int | None]] = {}
        operands_of: dict[Variable, tuple[int | None, ...]] = {}

        def term_id(v: Variable) -> int | None:
            if v not in ids:
                operands_of[v] = tuple(flat.pop(v))
                ids[v] = self._application(v.owner.op, operands_of[v], v.type, create)
            return ids[v]

        for v in order:
            cls = placeholder_class(v)
            if cls is not None:
                ids[v] = self.find(cls)
            elif not _expands(v):
                ids[v] = self.add_leaf(v) if create else self._leaves.get(v)
            elif flatten and _flattens(v) and not exact(v):
                operands: list[int | None] | None = None
                rest: list[int | None] = []
                for i in v.owner.inputs:
                    if i in flat and i.owner.op == v.owner.op and i.dtype == v.dtype:
                        if clients[i] == 1 and operands is None:
                            operands = flat.pop(i)
                        else:
                            rest.extend(flat.pop(i) if clients[i] == 1 else flat[i])
                    else:
                        rest.append(term_id(i))
                if operands is None:
                    operands = rest
                else:
                    operands.extend(rest)
                flat[v] = operands
            else:
                operands_of[v] = tuple(map(term_id, v.owner.inputs))
                ids[v] = self._application(v.owner.op, operands_of[v], v.type, create)
        term_id(root)
        return ids, operands_of.get(root, ())

    def _postorder(self, root: Variable, placeholder_class: PlaceholderClass) -> tuple[list[Variable], dict]:
        """The term's variables, operands before their users, and how often each is an operand."""
        order: list[Variable] = []
        clients: dict[Variable, int] = {}
        visited: set[Variable] = set()
        stack: list[tuple[Variable, bool]] = [(root, False)]
        while stack:
            v, expanded = stack.pop()
            if expanded:
                order.append(v)
                continue
            if v in visited:
                continue
            visited.add(v)
            stack.append((v, True))
            if placeholder_class(v) is None and _expands(v):
                for i in reversed(v.owner.inputs):
                    clients[i] = clients.get(i, 0) + 1
                    if i not in visited:
                        stack.append((i, False))
        return order, clients

    def _application(
        self, op: Op, children: tuple[int | None, ...], type_: TensorType, create: bool
    ) -> int | None:
        if create:
            return self.add_node(op, children, type_)
        if any(c is None for c in children):
            return None
        return self.lookup_node(op, children)

    def _touch_new(self, i: int, canon: tuple | None = None) -> None:
        """Note a new class holding the new e-node `i`."""
        self.node_count += 1
        self.changed.append(i)
        self.touched.append(i)
        self._enode[i] = True
        self._signature[i] = self._canonical(i) if canon is None else canon

    def _new(
        self,
        op: Op | None,
        children: tuple[int, ...],
        leaf: Variable | None,
        type_: TensorType,
        kind: int = 0,
    ) -> int:
        i = len(self._op)
        self._op.append(op)
        self._kind.append(kind)
        self._children.append(children)
        self._leaf.append(leaf)
        self._type.append(type_)
        self._uf.append(i)
        self._proof.append(None)
        self._why.append(None)
        self._when.append(0)
        self._enode.append(False)
        return i

    def _canonical(self, node: int) -> tuple:
        kind = self._kind[node]
        if not kind:
            return (None, (), node)
        find = self.find
        classes = tuple([find(c) for c in self._children[node]])
        return (kind, tuple(sorted(classes)) if kind < 0 else classes)

    # -- merging ---------------------------------------------------------------------------------

    def union(self, a: int, b: int, reason: Reason) -> bool:
        """Merge the classes of term nodes `a` and `b` because of `reason`; False when already one."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            if isinstance(reason, Applied) and a != b:
                self._spare.setdefault(a, []).append((b, reason))
                self._spare.setdefault(b, []).append((a, reason))
            return False
        self._link(a, b, reason)
        big, small = (ra, rb) if len(self.classes[ra].parents) >= len(self.classes[rb].parents) else (rb, ra)
        self._uf[small] = big
        kept, gone = self.classes[big], self.classes.pop(small)
        kept.nodes.extend(gone.nodes)
        self.touched.extend(gone.nodes)
        kept.terms.extend(gone.terms)
        kept.parents.extend(gone.parents)
        if gone.leaf is not None and (kept.leaf is None or isinstance(gone.leaf, Constant)):
            kept.leaf = gone.leaf
        if kept.type is not gone.type and kept.type.is_super(gone.type):
            kept.type = gone.type
        self._pending.append(big)
        self._clean = False
        self.changed.append(big)
        self.unions += 1
        return True

    def rebuild(self) -> None:
        """Restore congruence after unions: equal e-nodes merge, and so do their classes; then every
        class holding an e-node whose operands merged keeps one e-node of each canonical form."""
        dirty: set[int] = set()
        while self._pending:
            todo = {self.find(c) for c in self._pending}
            self._pending = []
            for c in todo:
                dirty.add(c)
                self._repair(c, dirty)
        for cls in {self.find(c) for c in dirty}:
            self._tidy(cls)
        self._clean = True

    def _tidy(self, cls: int) -> None:
        """Drop e-nodes of class `cls` congruent to an earlier one; touch those whose form changed.

        An e-node's form changed only when an operand class of its signature is no longer a root."""
        here, signature, unique, uf = self.classes[cls], self._signature, {}, self._uf
        for n in here.nodes:
            canon = signature[n]
            for c in canon[1]:
                if uf[c] != c:
                    canon = self._canonical(n)
                    break
            if unique.setdefault(canon, n) != n:
                self._enode[n] = False
                del signature[n]
            elif signature[n] != canon:
                signature[n] = canon
                self.touched.append(n)
        self.node_count -= len(here.nodes) - len(unique)
        here.nodes = list(unique.values())

    def _repair(self, cls: int, dirty: set[int]) -> None:
        memo, find, canonical, eclasses = self._memo, self.find, self._canonical, self.classes
        here = eclasses[find(cls)]
        parents, here.parents = here.parents, []
        kept: dict[tuple, int] = {}
        for key, node in parents:
            if memo.get(key) == node:
                del memo[key]
            canon = canonical(node)
            other = memo.get(canon)
            if other is None:
                memo[canon] = other = node
            elif find(other) != find(node):
                self.union(other, node, CONGRUENCE)
            kept[canon] = other
            dirty.add(node)
            for c in canon[1]:  # an operand class holding no constant: nothing folds (`_fold` decides)
                operand = eclasses.get(c)  # None: merged by the union above, so `_fold` looks
                if operand is not None and type(operand.leaf) is not Constant:
                    break
            else:
                self._fold(other)
        self.classes[find(cls)].parents.extend(kept.items())

    def _fold(self, node: int) -> None:
        """Constant folding as a class analysis: an application of constants joins its value's class."""
        op = self._op[node]
        if op is None or isinstance(op, (ops.Fill, ops.Alloc)):
            return
        classes, find = self.classes, self.find
        constants = []
        for c in self._children[node]:
            leaf = classes[find(c)].leaf
            if not isinstance(leaf, Constant):
                return
            constants.append(leaf)
        canon = self._canonical(node)
        if canon in self._tried_folding:
            return
        self._tried_folding.add(canon)
        try:
            apply = op.make_node(*constants)
            if len(apply.outputs) != 1:
                return
            with warnings.catch_warnings(), np.errstate(all="raise"):
                warnings.simplefilter("error")
                (value,) = evaluate(apply, [c.data for c in constants])
        except (
            EvaluationError,
            FloatingPointError,
            ArithmeticError,
            RuntimeWarning,
            TypeError,
            ValueError,
            NotImplementedError,  # an op the NumPy backend has no implementation for: it is not folded
        ):
            return
        folded = Constant(TensorType(apply.outputs[0].dtype, value.shape), value)
        self.union(self._over_constants(node, constants), self.add_leaf(folded), FOLDING)

    def _over_constants(self, node: int, constants: list[Constant]) -> int:
        """The term node applying `node`'s op to `constants` (its operands' constant values): `node`
        itself when its operands are those leaves, else a new term node congruent to it.

        Folding links the constant to this term node, so the proof of a folded
        class passes through the unions that made its operands constant (x / x
        = 1 under x != 0) and explanations carry their assumptions.
        """
        leaves = tuple(self.add_leaf(c) for c in constants)
        op = self._op[node]
        if (tuple(sorted(leaves)) if op in AC_OPS else leaves) == self._children[node]:
            return node
        over = self.add_node(op, leaves, self._type[node])
        if self.find(over) != self.find(node):
            self.union(over, node, CONGRUENCE)
        return over

    # -- proofs ----------------------------------------------------------------------------------

    def _link(self, a: int, b: int, reason: Reason) -> None:
        """Add the proof-forest edge a - b: re-root a's tree at a, then hang it under b.

        A congruence link records which operands of a and b it paired (operands
        whose classes are equal now, so proved equal by links made before it): for
        ops other than add and mul, the operands in order, noted as ().
        """
        if type(reason) is str and reason == CONGRUENCE:
            key = (a, b) if a < b else (b, a)
            self._paired[key] = () if self._kind[a] >= 0 else self._pairing(*key)
        self._clock += 1
        node, parent, why, when = a, b, reason, self._clock
        while node is not None:
            node_parent, node_why, node_when = self._proof[node], self._why[node], self._when[node]
            self._proof[node], self._why[node], self._when[node] = parent, why, when
            node, parent, why, when = node_parent, node, node_why, node_when

    def _pairing(self, a: int, b: int) -> tuple[tuple[int, int], ...]:
        """The operands of congruent add (mul) term nodes a and b paired, in a's order, each with one
        of b's operands in its class not yet taken."""
        xs, ys = self._children[a], list(self._children[b])
        pairs = []
        for c in xs:
            k = next(j for j, d in enumerate(ys) if d is not None and self.find(d) == self.find(c))
            pairs.append((c, ys[k]))
            ys[k] = None
        return tuple(pairs)

    def link_pairs(self, a: int, b: int) -> tuple[tuple[int, int], ...] | None:
        """The operand pairs of the congruence link between term nodes a and b, in a's operand order
        (None when the forest has no such link)."""
        pairs = self._paired.get((a, b) if a < b else (b, a))
        if pairs == ():  # paired in order (as a pairing of no operands reads too)
            return tuple(zip(self._children[a], self._children[b]))
        return pairs if pairs is None or a < b else flip_pairs(self._children[a], pairs)

    def forest_link(self, node: int) -> tuple[int, Reason, int] | None:
        """The proof-forest link from a term node towards its tree's root: (parent, reason, time)."""
        parent = self._proof[node]
        return None if parent is None else (parent, self._why[node], self._when[node])

    def spare_links(self, node: int) -> list[tuple[int, Applied]]:
        """Rule applications that linked `node` to a term node already in its class (not in the forest)."""
        return self._spare.get(node, [])

    def proof_time(self, a: int, b: int) -> int:
        """When the forest first held a chain from term node a to b: its latest link's time (0 if a is b)."""
        return max(
            (self._when[x] if self._proof[x] == y else self._when[y] for x, y, _ in self.proof_path(a, b)),
            default=0,
        )

    def proof_path(self, a: int, b: int) -> list[tuple[int, int, Reason]]:
        """The proof-forest edges (x, y, reason) leading from term node `a` to term node `b`.

        Both must be in one class (ValueError otherwise).
        """
        if self.find(a) != self.find(b):
            raise ValueError(f"term nodes {a} and {b} are not known to be equal")
        depth_of: dict[int, int] = {}
        chain_a = self._to_root(a)
        for k, n in enumerate(chain_a):
            depth_of[n] = k
        chain_b = self._to_root(b)
        meet = next(k for k, n in enumerate(chain_b) if n in depth_of)
        top = chain_b[meet]
        up = chain_a[: depth_of[top] + 1]
        down = chain_b[: meet + 1]
        edges = [(x, self._proof[x], self._why[x]) for x in up[:-1]]
        edges += [(self._proof[y], y, self._why[y]) for y in reversed(down[:-1])]
        return edges

    def _to_root(self, node: int) -> list[int]:
        chain = [node]
        while self._proof[chain[-1]] is not None:
            chain.append(self._proof[chain[-1]])
        return chain


def _expands(v: Variable) -> bool:
    """Whether the e-graph looks into `v`: an application (not an input, constant or multi-output result)."""
    node = v.owner
    return node is not None and len(node.outputs) == 1


def _flattens(v: Variable) -> bool:
    """Whether `v` is an add or mul whose operands all have its dtype (so nesting can be spliced)."""
    node = v.owner
    return node.op in AC_OPS and all(i.dtype == v.dtype for i in node.inputs)


def flip_pairs(operands: tuple[int, ...], pairs: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Operand pairs (c, d) of a congruence turned round: pairs (d, c), in the order of `operands`."""
    flipped: list[tuple[int, int] | None] = [(d, c) for c, d in pairs]
    ordered = []
    for d in operands:
        k = next(j for j, pair in enumerate(flipped) if pair is not None and pair[0] == d)
        ordered.append(flipped[k])
        flipped[k] = None
    return tuple(ordered)

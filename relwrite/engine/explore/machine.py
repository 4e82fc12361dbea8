"""The pattern machine: rule patterns matched on the e-classes of an e-graph, and sides built into it.

A rule's patterns compile once (`relwrite.relations.pattern.Pattern`) and
run on targets; `EClasses` is exploration's target, egg's e-matching: the
applications of a class are its e-nodes (an op and the classes of its
operands, sorted for add and mul), so a multi-level pattern matches through
any e-node of every class it passes, and a match is a substitution binding
pattern variables to classes (`ClassRef`), op props and operand sequences.

What guards and computed bindings see of a class is a proxy graph variable
(`proxy`): its constant or graph input when it holds one, else a
placeholder input standing for the class.  A graph built over placeholders
(a computed value, a relation's answer) is interned back with
`placeholder_class`.  A class keeps the proxy it had when first seen until
the next search (`refresh`): the matches a search found are applied with
what their guards and computed values saw, even where a union made since
gave the class another constant (a union under assumptions that fail can
merge classes of different values).

`instantiate` builds a side of a rule under a substitution: first as a tree
(`_Built`, typed by the ops' own `make_node`, numbers as weak scalars next
to the other operands), which `classes_inside` reads without adding
anything, then into the e-graph (`add`).  On the side a rule produces, an
add (mul) built as an operand of an add (mul) of its dtype is spliced into
it, as interning flattens sums; the side a rule matched is built as it was
matched, so that an explanation shows the exact term the rule saw.

A side of fixed ops other than add and mul over variables and numbers also
compiles to a matcher (`_Matcher`) that runs as Python made for it, one loop
per atom (`_source`), and, with a plan, is built by position from a match's
tuple of classes (`placed_plan`, `types_at`, `add_at`, `settled`): the
runner's fast path, which finds and adds what the general one does.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from types import CodeType
from typing import Any

from etuples.core import ExpressionTuple

from relwrite.engine.explore.egraph import AC_OPS, EGraph
from relwrite.graph.basic import Constant, Op, Variable
from relwrite.graph.terms import GraphETuple
from relwrite.graph.types import TensorType
from relwrite.relations.pattern import (
    Pattern,
    Unbuildable,
    _Apply,
    _Guarded,
    _Named,
    _Number,
    matched_term,
    same_value,
    to_graph,
)
from relwrite.relations.predicates import NUMBER, is_literal, is_logic_variable

VIEW_DEPTH = 3
"""How many levels of a class code in a rule (a `where` guard, a computed value) sees (`EClasses.view`)."""


class ClassRef(int):
    """An e-class (its id) as a matched value, distinct from an op prop that is a plain int."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"%{int(self)}"


class _Built:
    """An application `instantiate` built: its op, operands (`ClassRef`, `_Built`, graph variables) and
    type; `node` is its term node once added."""

    __slots__ = ("node", "op", "operands", "type")

    def __init__(self, op: Op, operands: tuple, type_: TensorType):
        self.op, self.operands, self.type = op, operands, type_
        self.node: int | None = None


class _Step(int):
    """An operand that is an earlier step of a plan (its index), distinct from a number."""

    __slots__ = ()


class _Plan:
    """A side of a rule compiled for building into the e-graph, when it is only applications of fixed
    ops that are not add or mul, to variables, numbers and each other: its applications (`steps`)
    in the order `EClasses.add` makes them, the root last; an operand of a step is ``(0, var)``,
    ``(1, number)`` or ``(2, _Step(k))``, the k-th step.  A side that is one variable has no steps."""

    __slots__ = ("steps", "var")

    def __init__(self, steps: tuple[tuple[Op, tuple[tuple[int, Any], ...]], ...], var: Any = None):
        self.steps, self.var = steps, var

    @staticmethod
    def compile(pattern: Pattern) -> _Plan | None:
        """The plan of `pattern`, None when it has other parts (they build through `Pattern.instantiate`)."""

        def bare(node: Any) -> Any:
            while isinstance(node, _Guarded):
                node = node.inner
            return node

        root = bare(pattern.root)
        if isinstance(root, _Named):
            return _Plan((), root.var)
        order: list[_Apply] = []  # as `add` makes them: operands last to first, each before its user
        stack, made = [root], set()
        while stack:
            node = stack[-1]
            if (
                not isinstance(node, _Apply)
                or not isinstance(node.op, Op)
                or node.op in AC_OPS
                or not node.args
            ):
                return None
            waiting = [a for a in map(bare, node.args) if isinstance(a, _Apply) and id(a) not in made]
            if waiting:
                stack.extend(waiting)
                continue
            stack.pop()
            made.add(id(node))
            order.append(node)
        index = {id(node): k for k, node in enumerate(order)}
        steps = []
        for node in order:
            operands = []
            for a in map(bare, node.args):
                if isinstance(a, _Named):
                    operands.append((0, a.var))
                elif isinstance(a, _Number):
                    operands.append((1, a.value))
                elif isinstance(a, _Apply):
                    operands.append((2, _Step(index[id(a)])))
                else:
                    return None
            steps.append((node.op, tuple(operands)))
        return _Plan(tuple(steps))


class _Matcher:
    """A side that reads only fixed ops that are not add or mul, applied to variables, numbers and
    each other (no constraints), compiled for e-matching without the general matcher.

    Its applications are `atoms`, in the order `Pattern.matches` visits them (the root first): each
    ``(op, arity, equal, pairs, parent, position)``, `equal` the operand positions that must hold one
    class, `pairs` ``(position, kind, x)`` in the order `Pattern.matches` tries them (kind 0 binds
    variable `x`, an index into `variables`, 1 checks it, 2 reads number `x`, 3 matches atom `x`),
    `parent` and `position` where the atom stands in its parent atom (None for the root).  `numbers`
    lists ``(number, atom, position)`` for each number.  A match is the tuple of the classes of
    `variables`, which are numbered in the order a match binds them.

    `run(read, enodes, literal, root, forced, width, base, applied, best)` is the side's search as
    Python made for it (one loop per atom, nested as the atoms are; see `_source`), which takes a
    class's e-nodes from `read` (`EClasses.enodes` so far) or `enodes`: it collects each match at
    class `root` into a `Matches` (whose fields are its last two arguments), its rank `base` plus
    its order (`EClasses.match` describes `forced` and `order`), and returns how many it found
    changing nothing: made for a rule's written side (`bind`'s `written`), it looks that side up
    under each match, inline, and a match that finds it in class `root` already goes into
    `applied`.  It reads ops as the op ids of one e-graph (`kinds`, one per atom), so it is made
    for that e-graph.
    """

    __slots__ = ("atoms", "kinds", "numbers", "run", "variables")

    def __init__(self, atoms: tuple, numbers: tuple, variables: tuple):
        self.atoms, self.numbers, self.variables = atoms, numbers, variables
        self.kinds: tuple[int, ...] = ()
        self.run: Callable | None = None

    def bind(self, egraph: EGraph, written: tuple | None = None) -> _Matcher:
        """This side's matcher with `run` made for `egraph`, and for the probe of the side a rule writes
        under its matches (`EClasses.probe`; None: every match is new).  None when the probe names a
        variable this side does not bind."""
        bound = _Matcher(self.atoms, self.numbers, self.variables)
        bound.kinds = tuple(egraph.op_id(atom[0]) for atom in self.atoms)
        constants: dict[str, Any] = {}
        probe = None
        if written is not None:
            steps, names = written
            if not set(names) <= set(self.variables):
                return None
            get, uf = egraph.lookup_tables()
            constants.update(get=get, uf=uf, find=egraph.find)
            constants.update((f"P{k}", egraph.op_id(op)) for k, (op, _) in enumerate(steps))
            probe = (steps, [self.variables.index(v) for v in names])
        source = _source(self.atoms, bound.kinds, len(self.variables), constants, probe)
        exec(_compiled(source), constants)
        bound.run = constants["run"]
        return bound

    @staticmethod
    def compile(pattern: Pattern) -> _Matcher | None:
        atoms: list[list] = []
        numbers: list[tuple] = []
        variables: list[Any] = []

        def atom(apply: Any, parent: int | None, position: int | None) -> int | None:
            if not isinstance(apply, _Apply) or not isinstance(apply.op, Op) or apply.op in AC_OPS:
                return None
            if apply.multiset or apply.sequence is not None or not apply.args:
                return None
            k = len(atoms)
            atoms.append([apply.op, len(apply.args), apply.equal, None, parent, position])
            pairs = []
            for at in apply.order:
                arg = apply.args[at]
                if isinstance(arg, _Named):
                    if arg.var in variables:
                        pairs.append((at, 1, variables.index(arg.var)))
                    else:
                        pairs.append((at, 0, len(variables)))
                        variables.append(arg.var)
                elif isinstance(arg, _Number):
                    pairs.append((at, 2, arg.value))
                    numbers.append((arg.value, k, at))
                else:
                    inner = atom(arg, k, at)  # patterns are small: recursion over the pattern, not a graph
                    if inner is None:
                        return None
                    pairs.append((at, 3, inner))
            atoms[k][3] = tuple(pairs)
            return k

        if atom(pattern.root, None, None) is None:
            return None
        return _Matcher(tuple(map(tuple, atoms)), tuple(numbers), tuple(variables))


@lru_cache(maxsize=1024)
def _compiled(source: str) -> CodeType:
    """`source` compiled, once per text: sides of one shape share it (their ops are constants), and
    compiling took more than a small exploration's search (the catalogue has a hundred sides)."""
    return compile(source, "<relwrite.engine.explore.machine>", "exec")


def _source(
    atoms: tuple, kinds: tuple[int, ...], variables: int, constants: dict[str, Any], probe: tuple | None
) -> str:
    """The source of `_Matcher.run` for `atoms`, their ops' ids `kinds` (they and the numbers go into
    `constants`), and the `probe` ``(steps, where)`` of the side written under a match (None: none).

    Atom j scans the e-nodes of class ``c{j}`` (those `forced` names, or all), skipping those of
    another op or arity; its operands bind ``v{x}``, check it, test a number, or open the loop of
    the atom below; a check failing skips to the next e-node of the innermost loop, as
    `Pattern.matches` drops that one state.  Patterns are a few atoms deep, so is the nesting.
    A new match looks the written side up (`_lookup`) and is noted applied when it is in `root`.
    """
    lines = ["def run(read, enodes, literal, root, forced, width, base, applied, best):"]
    lines.append("    noops = 0")
    lines += [f"    f{j} = forced.get({j})" for j in range(len(atoms))]
    lines.append("    c0 = root")

    def scan(j: int, depth: int) -> int:
        _, arity, equal, pairs, _, _ = atoms[j]
        constants[f"OP{j}"] = kinds[j]
        pad = "    " * depth
        lines.append(f"{pad}apps{j} = read.get(c{j})")
        lines.append(f"{pad}if apps{j} is None:")
        lines.append(f"{pad}    apps{j} = enodes(c{j})")
        lines.append(f"{pad}for k{j} in range(len(apps{j})) if f{j} is None else f{j}:")
        pad += "    "
        lines.append(f"{pad}op, a{j} = apps{j}[k{j}]")
        lines.append(f"{pad}if op != OP{j} or len(a{j}) != {arity}:")
        lines.append(f"{pad}    continue")
        for a, b in equal:
            lines.append(f"{pad}if a{j}[{a}] != a{j}[{b}]:")
            lines.append(f"{pad}    continue")
        for position, kind, x in pairs:
            operand = f"a{j}[{position}]"
            if kind == 0:
                lines.append(f"{pad}v{x} = {operand}")
            elif kind == 1:
                lines.append(f"{pad}if {operand} != v{x}:")
                lines.append(f"{pad}    continue")
            elif kind == 2:
                constants[f"N{j}_{position}"] = x
                lines.append(f"{pad}if not literal({operand}, N{j}_{position}):")
                lines.append(f"{pad}    continue")
            else:
                lines.append(f"{pad}c{x} = {operand}")
                depth = scan(x, depth + 1)
                pad = "    " * (depth + 1)
        return depth

    depth = scan(0, 1)
    values = "".join(f"v{x}, " for x in range(variables))
    order = "k0"
    for j in range(1, len(atoms)):
        order = f"({order}) * width + k{j}"
    pad = "    " * (depth + 1)
    lines += [f"{pad}key = (root, {values})", f"{pad}if key not in applied and key not in best:"]
    if probe is not None:
        steps, where = probe
        lines += _lookup(steps, [f"v{x}" for x in where], f"{pad}    ")
        lines += [f"{pad}    if found == root:", f"{pad}        applied.add(key)", f"{pad}        noops += 1"]
        lines.append(f"{pad}        continue")
    lines += [f"{pad}    best[key] = base + ({order})", "    return noops"]
    return "\n".join(lines) + "\n"


def _lookup(steps: tuple, values: list[str], pad: str) -> list[str]:
    """Lines setting ``found`` to the class of a probe's `steps` over the classes named `values`
    (roots as of the last rebuild), None when an e-node of it is absent: one look-up per step in
    the hash-cons (``get``, its op ids ``P0``...), each result taken to its root (``uf``, and
    ``find`` only past the first step up: unions compress paths, so one step mostly reaches it)."""
    if not steps:
        return [f"{pad}found = {values[0]}"]
    lines = []
    for k, (_, spec) in enumerate(steps):
        operands = "".join(f"{values[x]}, " if kind == 0 else f"s{x}, " for kind, x in spec)
        lines += [
            f"{pad}found = get((P{k}, ({operands})))",
            f"{pad}if found is not None:",
            f"{pad}    s{k} = found = uf[found]",
            f"{pad}    if uf[found] != found:",
            f"{pad}        s{k} = found = find(found)",
        ]
        pad += "    "
    return lines


def _settled_source(steps: tuple, where: list[int], count: int) -> str:
    """The source of the `EClasses.settled` function for a probe's `steps` whose k-th variable is at
    position ``where[k]`` of a match's `count` values.  It takes the values as arguments, and reads
    the hash-cons (``get``), the union-find array (``uf``, ``find``) and the steps' op ids
    (``OP0``...) from its globals, one look-up per step with no call but to ``get``."""
    arguments = "".join(f"v{k}, " for k in range(count))
    lines = [f"def settled(target, {arguments}):"]
    for k, at in enumerate(where):
        lines += [f"    x{k} = uf[v{at}]", f"    if uf[x{k}] != x{k}:", f"        x{k} = find(x{k})"]
    lines.append(f"    if target in ({''.join(f'x{k}, ' for k in range(len(where)))}):")
    lines.append("        return True")
    for k, (_, spec) in enumerate(steps):
        operands = "".join(f"x{x}, " if kind == 0 else f"s{x}, " for kind, x in spec)
        needed = [f"s{x} is not None" for kind, x in spec if kind == 1]
        look = f"get((OP{k}, ({operands})))"
        lines.append(
            f"    s{k} = {look} if {' and '.join(needed)} else None" if needed else f"    s{k} = {look}"
        )
        lines += [
            f"    if s{k} is not None:",
            f"        s{k} = uf[s{k}]",
            f"        if uf[s{k}] != s{k}:",
            f"            s{k} = find(s{k})",
        ]
        lines += [f"        if s{k} == target:", "            return True"]
    lines.append("    return False")
    return "\n".join(lines) + "\n"


class _Planned:
    """A side built by its plan under a substitution (nothing added yet): each step's operands (graph
    variables: classes' proxies and constants; `_Step`: earlier steps) and type."""

    __slots__ = ("operands", "plan", "types")

    def __init__(self, plan: _Plan, operands: list[list[Any]], types: list[TensorType]):
        self.plan, self.operands, self.types = plan, operands, types


class Matches:
    """What the searches of a compiled side collect (`EClasses.match`, `new_matches`): `best` maps
    each new match's key ``(class, *values)`` to its rank (its root's place in `position` times
    `scale`, plus its order; found again from another start, a match reads the same e-nodes, as a
    rebuilt class holds one e-node of each form, so it has the same rank); a key in `applied` is
    passed over, and so is one under which the side written is in its class already (the matcher
    looks it up): it goes into `applied` and is counted in `noops`.  Sorted by rank, `best` is the
    order a full search gives."""

    __slots__ = ("applied", "best", "noops", "position", "scale")

    def __init__(self, applied: set, position: Mapping[int, int], scale: int):
        self.applied, self.position, self.scale = applied, position, scale
        self.best: dict[tuple, int] = {}
        self.noops = 0


class EClasses:
    """The pattern-matching target over the classes of `egraph` (see the module docstring).

    A class's e-nodes are read once per search (`refresh` forgets them when
    the e-graph has changed); between rebuilds every look-up goes through `find`.
    """

    def __init__(self, egraph: EGraph):
        self.egraph = egraph
        self._applications: dict[int, tuple[tuple[Op, tuple[ClassRef, ...]], ...]] = {}
        self._placeholders: dict[int, Variable] = {}
        self._classes: dict[Variable, int] = {}
        self._types: dict[tuple, TensorType] = {}
        self._typed: dict[TensorType, Variable] = {}
        self._plans: dict[Pattern, _Plan | None] = {}
        self._unbound: dict[Pattern, _Matcher | None] = {}
        self._matchers: dict[tuple, _Matcher | None] = {}
        self._views: dict[tuple[int, int], Variable] = {}
        self._enodes: dict[int, tuple[tuple, ...]] = {}
        self._positions: dict[int, dict[tuple, int]] = {}
        self._proxies: dict[int, Variable] = {}
        self._slots: dict[int, tuple[Any, int, bool]] = {}
        self._type_numbers: dict[TensorType, int] = {}
        self._width: int | None = None

    def refresh(self) -> None:
        """Forget the e-nodes and proxies read so far (the e-graph changed)."""
        self._applications = {}
        self._proxies = {}
        self._slots = {}
        self._views = {}
        self._enodes = {}
        self._positions = {}
        self._width = None

    # -- the target protocol of `Pattern.matches`

    def applications(self, value: Any) -> tuple[tuple[Op, tuple[ClassRef, ...]], ...]:
        """One (op, operand classes) per e-node of a class; nothing for any other value."""
        if type(value) is not ClassRef:
            return ()
        egraph = self.egraph
        cls = egraph.find(value)
        found = self._applications.get(cls)
        if found is None:
            found = tuple(
                (op, tuple(map(ClassRef, egraph.children(n))))
                for n in egraph.nodes(cls)
                if (op := egraph.op(n)) is not None
            )
            self._applications[cls] = found
        return found

    def same(self, a: Any, b: Any) -> bool:
        """Whether two bound values are one: one class, equal props, elementwise for tuples."""
        a_class, b_class = type(a) is ClassRef, type(b) is ClassRef
        if a_class and b_class:
            return self.egraph.find(a) == self.egraph.find(b)
        if a_class or b_class:
            ref, other = (a, b) if a_class else (b, a)
            if isinstance(other, GraphETuple):
                other = other.variable
            if not isinstance(other, Variable):
                return False
            found = self.egraph.lookup(other, self.placeholder_class).cls
            return found is not None and found == self.egraph.find(ref)
        if isinstance(a, tuple) and isinstance(b, tuple) and not isinstance(a, ExpressionTuple):
            return len(a) == len(b) and all(self.same(x, y) for x, y in zip(a, b))
        return same_value(a, b)

    def literal(self, value: Any, number: Any) -> bool:
        """Whether the class holds a constant every element of which equals `number`."""
        if type(value) is ClassRef:
            leaf = self.egraph.classes[self.egraph.find(value)].leaf
            return isinstance(leaf, Constant) and is_literal(leaf, number)
        return is_literal(value, number)

    def guarded(self, value: Any) -> Any:
        """What a constraint sees of a bound value: what code in a rule sees (`structured`)."""
        return self.structured(value)

    def guarded_match(self, value: Any, node: Any, s: Mapping) -> Any:
        """What a constraint on an application pattern sees of a class it matched under `s`: the
        application matched, built over the proxies of what it bound (the class's proxy if it does not
        build)."""
        if type(value) is not ClassRef:
            return self.guarded(value)
        term = matched_term(node, s, self.guarded)
        return self.proxy(value) if term is None else term

    def shared(self, value: Any) -> bool:
        return False

    # -- compiled e-matching

    def matcher(self, pattern: Pattern, written: tuple | None = None) -> _Matcher | None:
        """`pattern` compiled for `match`, passing over the matches under which the side a rule writes
        (its `probe`, when given) is in the class matched already (None when the pattern has parts
        only `Pattern.matches` reads, or the probe names a variable the pattern does not bind)."""
        key = (pattern, written)
        if key not in self._matchers:
            if pattern not in self._unbound:
                self._unbound[pattern] = _Matcher.compile(pattern)
            matcher = self._unbound[pattern]
            self._matchers[key] = None if matcher is None else matcher.bind(self.egraph, written)
        return self._matchers[key]

    def enodes(self, cls: int) -> tuple[tuple, ...]:
        """The applications of class `cls` (a root) as ``(op id, operand classes)`` (`EGraph.canonical`),
        in the order of its e-nodes; read once per search."""
        found = self._enodes.get(cls)
        if found is None:
            canonical, op = self.egraph.canonical, self.egraph.op
            found = self._enodes[cls] = tuple(
                [canonical(n) for n in self.egraph.classes[cls].nodes if op(n) is not None]
            )
        return found

    def positions(self, cls: int) -> dict[tuple, int]:
        """Where each application of class `cls` (a root) stands in its `enodes`; read once per search."""
        found = self._positions.get(cls)
        if found is None:
            found = self._positions[cls] = {app: k for k, app in enumerate(self.enodes(cls))}
        return found

    def match(
        self, matcher: _Matcher, cls: int, into: Matches, forced: Mapping[int, Collection[int]] | None = None
    ) -> None:
        """Collect `into` the matches at class `cls` (a root; none when `into.position` does not hold
        it), keyed ``(cls, *classes of the variables)``, with the order of each: the positions of the
        e-nodes each atom matched in their classes (`enodes`) as the digits of one number in base
        `width` (sorted by it, matches come in the order `Pattern.matches` gives them).  `forced`
        names the positions an atom may take."""
        at = into.position.get(cls)
        if at is not None:
            into.noops += matcher.run(
                self._enodes,
                self.enodes,
                self._literal_class,
                cls,
                {} if forced is None else forced,
                self.width,
                at * into.scale,
                into.applied,
                into.best,
            )

    @property
    def width(self) -> int:
        """More than any class's number of e-nodes: the base of a match's `order` (per search)."""
        if self._width is None:
            self._width = 1 + max((len(e.nodes) for e in self.egraph.classes.values()), default=0)
        return self._width

    def _literal_class(self, cls: int, number: Any) -> bool:
        """`literal` of a class id."""
        leaf = self.egraph.classes[self.egraph.find(cls)].leaf
        return isinstance(leaf, Constant) and is_literal(leaf, number)

    def new_matches(self, matcher: _Matcher, nodes: list[int], into: Matches) -> int:
        """Collect `into` the matches (see `match`) that read at least one of the e-nodes `nodes` (term
        nodes standing for e-nodes); how many classes they were looked for from."""
        egraph, atoms, kinds = self.egraph, matcher.atoms, matcher.kinds
        find, canonical = egraph.find, egraph.canonical
        by_kind: dict[int, list[tuple[int, tuple]]] = {}  # op id -> its e-nodes and their forms
        constants: set[int] = set()
        for n in nodes:
            app = canonical(n)
            if app[0] is None:
                constants.add(find(n))
            else:
                by_kind.setdefault(app[0], []).append((n, app))
        searched = 0
        placed: dict[int, list[tuple[int, int]]] = {}  # op id -> (class, position) of its e-nodes in `nodes`
        for j in range(len(atoms)):
            at = placed.get(kinds[j])
            if at is None:
                at = placed[kinds[j]] = []
                positions = self.positions
                for n, app in by_kind.get(kinds[j], ()):
                    cls = find(n)
                    at.append((cls, positions(cls)[app]))
            starts: dict[int, set[int]] = {}
            for cls, k in at:
                starts.setdefault(cls, set()).add(k)
            searched += len(starts)
            self._through(matcher, j, [(cls, {j: ks}) for cls, ks in starts.items()], into)
        for number, j, position in matcher.numbers:
            frontier = [(c, {}) for c in constants if self.literal(ClassRef(c), number)]
            searched += len(frontier)
            self._through(matcher, j, self._up(matcher, j, position, frontier), into)
        return searched

    def _through(self, matcher: _Matcher, j: int, frontier: list, into: Matches) -> None:
        """Collect `into` the matches through the applications of atom `j` a frontier names: up the
        parents to the root atom, then down."""
        atoms = matcher.atoms
        while atoms[j][4] is not None:
            parent = atoms[j][4]
            frontier = self._up(matcher, parent, atoms[j][5], frontier)
            j = parent
        run, read, enodes, literal, width = (
            matcher.run,
            self._enodes,
            self.enodes,
            self._literal_class,
            self.width,
        )
        position, scale, applied, best = into.position, into.scale, into.applied, into.best
        noops = 0
        for root, forced in frontier:
            at = position.get(root)
            if at is not None:
                noops += run(read, enodes, literal, root, forced, width, at * scale, applied, best)
        into.noops += noops

    def _up(self, matcher: _Matcher, j: int, position: int, frontier: list) -> list:
        """The classes holding applications of atom `j` with a frontier class as operand `position`,
        each with the frontier's forced positions and those applications'."""
        kind, arity = matcher.kinds[j], matcher.atoms[j][1]
        egraph, positions = self.egraph, self.positions
        canonical, find, eclasses = egraph.canonical, egraph.find, egraph.classes
        grown = []
        for cls, forced in frontier:
            above: dict[int, set[int]] = {}
            for _, node in eclasses[cls].parents:  # congruent ones are one e-node: its position again
                app = canonical(node)
                operands = app[1]
                if app[0] == kind and len(operands) == arity and operands[position] == cls:
                    owner = find(node)
                    above.setdefault(owner, set()).add(positions(owner)[app])
            grown += [(owner, {**forced, j: ks}) for owner, ks in above.items()]
        return grown

    # -- proxies

    def structured(self, value: Any) -> Any:
        """What a `where` guard or a computed value reads of a bound value: a class as the graph of its
        first e-node `VIEW_DEPTH` levels deep over proxies (such code may look inside its values, and
        one arrangement of each class is what it sees); tuples elementwise; other values as they are."""
        if type(value) is ClassRef:
            return self.view(value, VIEW_DEPTH)
        if isinstance(value, tuple) and not isinstance(value, ExpressionTuple):
            return tuple(self.structured(v) for v in value)
        return value

    def view(self, cls: int, depth: int) -> Variable:
        """Class `cls` as the graph of its first e-node that builds, `depth` levels deep, its operands in
        the order that e-node was made with; a proxy at depth 0 or for a class holding a leaf."""
        cls = self.egraph.find(cls)
        key = (cls, depth)
        found = self._views.get(key)
        if found is not None:
            return found
        egraph, found = self.egraph, None
        if depth > 0 and egraph.classes[cls].leaf is None:
            for n in egraph.nodes(cls):
                op = egraph.op(n)
                if op is None:
                    continue
                operands = [self.view(c, depth - 1) for c in egraph.exact_children(n)]
                try:
                    node = op.make_node(*operands)
                except (TypeError, ValueError):
                    continue
                if len(node.outputs) == 1:
                    found = node.outputs[0]
                    break
        found = self.proxy(cls) if found is None else found
        self._views[key] = found
        return found

    def proxy(self, cls: int) -> Variable:
        """The graph variable standing for class `cls`: its constant or input, else its placeholder; the
        same one until `refresh` (see the module docstring)."""
        found = self._proxies.get(cls)
        if found is None:
            root = self.egraph.find(cls)
            leaf = self.egraph.classes[root].leaf
            found = self._proxies[cls] = leaf if leaf is not None else self.placeholder(root)
        return found

    def placeholder(self, cls: int) -> Variable:
        """The input variable standing for class `cls` (typed like the class), one per class."""
        cls = self.egraph.find(cls)
        v = self._placeholders.get(cls)
        if v is None:
            v = Variable(self.egraph.classes[cls].type, name=f"%{cls}")
            self._placeholders[cls] = v
            self._classes[v] = cls
        return v

    def placeholder_class(self, v: Variable) -> int | None:
        """The class a placeholder stands for (None for any other variable)."""
        cls = self._classes.get(v) if v.owner is None else None
        return None if cls is None else self.egraph.find(cls)

    def term(self, op: Op, children: tuple[int, ...]) -> Variable | None:
        """The e-node `op(*children)` as a graph over its operands' proxies (None when it does not build
        as one single-output application)."""
        try:
            node = op.make_node(*(self.proxy(c) for c in children))
        except (TypeError, ValueError):
            return None
        return node.outputs[0] if len(node.outputs) == 1 else None

    # -- looking up sides

    def probe(self, pattern: Pattern) -> tuple | None:
        """`pattern` compiled for `present`: ``(steps, variables)``, its applications in the order
        they nest (operands first, the root last), each ``(op, operands)``, an operand ``(0, k)`` for
        the k-th of its `variables` or ``(1, k)`` for the k-th step; a side that is one variable has
        no steps.  None when it has parts a look-up cannot follow (numbers, add, mul, constraints)."""
        variables: list[Any] = []
        steps: list[tuple] = []

        def operand(node: Any) -> tuple | None:
            if isinstance(node, _Named):
                if node.var not in variables:
                    variables.append(node.var)
                return (0, variables.index(node.var))
            if not isinstance(node, _Apply) or not isinstance(node.op, Op) or node.op in AC_OPS:
                return None
            if node.multiset or node.sequence is not None or not node.args:
                return None
            operands = [operand(a) for a in node.args]  # recursion over the pattern, not a graph
            if None in operands:
                return None
            steps.append((node.op, tuple(operands)))
            return (1, len(steps) - 1)

        return None if operand(pattern.root) is None else (tuple(steps), tuple(variables))

    @staticmethod
    def plain(pattern: Pattern) -> bool:
        """Whether `pattern` is fixed ops other than add and mul over variables: built under a match
        of it, it adds no e-node the match did not read (add and mul are built unspliced, which may
        make new e-nodes of parts of a sum; a number becomes a constant of the class's dtype, which
        may be new)."""
        for node in pattern.nodes():
            if isinstance(node, _Apply):
                if not isinstance(node.op, Op) or node.op in AC_OPS or node.multiset or node.sequence:
                    return False
            elif not isinstance(node, (_Guarded, _Named)):
                return False
        return True

    def present(self, probe: tuple, values: Mapping) -> int | None:
        """The class the side `probe` was compiled from already has under a match binding its
        variables to the classes `values` (found), None when some e-node of it is absent; adds nothing."""
        steps, variables = probe
        if not steps:
            return values[variables[0]]
        lookup = self.egraph.lookup_node
        classes: list[int] = []
        for op, spec in steps:
            cls = lookup(op, [values[variables[x]] if kind == 0 else classes[x] for kind, x in spec])
            if cls is None:
                return None
            classes.append(cls)
        return classes[-1]

    def settled(self, probe: tuple, variables: tuple) -> Callable | None:
        """``settled(target, *values)`` for the matches of a compiled side binding `variables`, made for
        the `probe` of the side a rule writes as Python (one look-up per step, see
        `_settled_source`): whether, over the values' current classes, that side is in class
        `target` or holds it as a proper subterm (applying the match would change nothing, or wrap
        the class in itself).  None when the probe names a variable not in `variables`."""
        steps, names = probe
        if not set(names) <= set(variables):
            return None
        egraph = self.egraph
        get, uf = egraph.lookup_tables()
        constants: dict[str, Any] = {"get": get, "uf": uf, "find": egraph.find}
        constants.update((f"OP{k}", egraph.op_id(op)) for k, (op, _) in enumerate(steps))
        where = [variables.index(v) for v in names]
        exec(_compiled(_settled_source(steps, where, len(variables))), constants)
        return constants["settled"]

    # -- building sides

    def instantiate(self, pattern: Pattern, s: Mapping, splice: bool = True) -> Any:
        """`pattern` built under `s` as a tree (nothing added yet): a `ClassRef`, a `_Built` (a
        `_Planned` when the pattern has a plan), or a graph variable.  Raises `Unbuildable` when it
        does not build (an unbound variable, a type error)."""
        plan = self.plan(pattern)
        if plan is not None:
            planned = self._planned(plan, s)
            if planned is not None:
                return planned

        def apply(op: Op, operands: list) -> _Built:
            return self._apply(op, operands, splice)

        return self._operand(pattern.instantiate(s, apply))

    def plan(self, pattern: Pattern) -> _Plan | None:
        """`pattern` compiled to a plan (None when it has parts only the general builder handles)."""
        if pattern in self._plans:
            return self._plans[pattern]
        plan = self._plans[pattern] = _Plan.compile(pattern)
        return plan

    def _planned(self, plan: _Plan, s: Mapping) -> Any:
        """`plan` built under `s` as `instantiate` builds its pattern (None when a variable is bound to
        something other than a class: the pattern then builds the general way)."""
        if not plan.steps:
            value = s.get(plan.var)
            return value if type(value) is ClassRef else None
        operands: list[list[Any]] = []
        types: list[TensorType] = []
        for op, spec in plan.steps:
            values: list[Any] = []
            numbers = False
            for kind, x in spec:
                if kind == 0:
                    value = s.get(x)
                    if type(value) is not ClassRef:
                        return None
                    values.append(self.proxy(value))
                elif kind == 2:
                    values.append(x)
                else:
                    values.append(x)
                    numbers = True
            inputs = [self._typed_variable(types[v]) if type(v) is _Step else v for v in values]
            if numbers:
                try:
                    inputs = op.as_inputs(inputs)
                except (TypeError, ValueError, OverflowError) as exc:
                    raise Unbuildable(f"{op} of {inputs}: {exc}") from exc
                values = [v if type(v) is _Step else i for v, i in zip(values, inputs)]
            types.append(self._type(op, inputs))
            operands.append(values)
        return _Planned(plan, operands, types)

    def _typed_variable(self, type_: TensorType) -> Variable:
        """The input variable standing for a built application of type `type_` (type inference only)."""
        typed = self._typed.get(type_)
        if typed is None:
            typed = self._typed[type_] = Variable(type_)
        return typed

    def _operand(self, value: Any) -> Any:
        if type(value) is ClassRef or isinstance(value, (_Built, Variable)):
            return value
        if isinstance(value, GraphETuple):
            return value.variable
        if isinstance(value, NUMBER):
            return value
        if isinstance(value, ExpressionTuple):
            return value.evaled_obj
        raise Unbuildable(f"{value!r} is not a class, a graph or a number")

    def _apply(self, op: Op, operands: list, splice: bool) -> _Built:
        if not isinstance(op, Op) or is_logic_variable(op):
            raise Unbuildable(f"{op!r} is not an op")
        values = []
        numbers = False
        for v in operands:
            kind = type(v)
            if kind is ClassRef:
                v = self.proxy(v)  # the class as its proxy: interned back to the class (or its leaf)
            elif kind is not _Built and not isinstance(v, Variable):
                v = self._operand(v)
                numbers = numbers or isinstance(v, NUMBER)
            values.append(v)
        if numbers:
            proxies = [self._proxy_of(v) for v in values]
            try:
                inputs = op.as_inputs(proxies)
            except (TypeError, ValueError, OverflowError) as exc:
                raise Unbuildable(f"{op} of {proxies}: {exc}") from exc
            values = [i if isinstance(v, NUMBER) else v for v, i in zip(values, inputs)]
        else:  # Variables only: as_inputs would return them as they are
            inputs = [self._proxy_of(v) if type(v) is _Built else v for v in values]
        type_ = self._type(op, inputs)
        if splice and op in AC_OPS and all(i.dtype == type_.dtype for i in inputs):
            flat: list[Any] = []
            for v in values:
                if isinstance(v, _Built) and v.op == op and v.node is None:
                    flat.extend(v.operands)
                else:
                    flat.append(v)
            values = flat
        return _Built(op, tuple(values), type_)

    def _proxy_of(self, value: Any) -> Any:
        if type(value) is ClassRef:
            return self.proxy(value)
        if isinstance(value, _Built):
            return self._typed_variable(value.type)
        return value

    def _type(self, op: Op, inputs: list[Variable]) -> TensorType:
        key = (op, tuple([i if isinstance(i, Constant) else i.type for i in inputs]))
        found = self._types.get(key)
        if found is None:
            try:
                node = op.make_node(*inputs)
            except (TypeError, ValueError) as exc:
                raise Unbuildable(f"{op} does not apply to {inputs}: {exc}") from exc
            if len(node.outputs) != 1:
                raise Unbuildable(f"{op} has {len(node.outputs)} outputs")
            found = self._types[key] = node.outputs[0].type
        return found

    # -- building sides by position: a compiled side's matches, without a substitution

    def placed_plan(self, pattern: Pattern, variables: tuple) -> tuple | None:
        """The plan of `pattern` reading a match's values by position in `variables` (for `types_at`
        and `add_at`): its steps, each ``(op, operands, op id)``, an operand ``(0, position)``
        or ``(2, step)``.  None when the pattern has no plan, is one variable, holds a number, or
        names a variable not in `variables`."""
        plan = self.plan(pattern)
        if plan is None or not plan.steps:
            return None
        placed = []
        for op, spec in plan.steps:
            operands = []
            for kind, x in spec:
                if kind == 1 or (kind == 0 and x not in variables):
                    return None
                operands.append((0, variables.index(x)) if kind == 0 else (2, x))
            placed.append((op, tuple(operands), self.egraph.op_id(op)))
        return tuple(placed)

    def types_at(self, steps: tuple, proxies: list[Variable]) -> list[TensorType]:
        """The types of placed `steps` built over the values' `proxies`, as `instantiate` types its
        plan; raises `Unbuildable` when a step does not apply."""
        types: list[TensorType] = []
        for op, spec, _ in steps:
            inputs = [proxies[x] if kind == 0 else self._typed_variable(types[x]) for kind, x in spec]
            types.append(self._type(op, inputs))
        return types

    def slots(self, classes: tuple) -> list[tuple[Any, int, bool]]:
        """How a match's values (`classes`, roots as of the search) enter its sides built by position
        (`types_at`, `add_at`), each ``(typing, ref, placeholder)``: `typing` is its proxy's type as a
        small number (or the constant it is), which names the sides' types in a cache; `ref` its
        class (a placeholder's, to take to its root then: `find`) or the term node of its leaf.  So
        both sides hold one term node for each variable.  Read once per class from a search to the
        applying of its matches."""
        known, found = self._slots, []
        for c in classes:
            slot = known.get(c)
            if slot is None:
                proxy = self.proxy(c)
                placeholder = self._classes.get(proxy)
                if isinstance(proxy, Constant):
                    typing: Any = proxy
                else:
                    typing = self._type_numbers.setdefault(proxy.type, len(self._type_numbers))
                if placeholder is None:
                    slot = (typing, self._add_variable(proxy), False)
                else:
                    slot = (typing, placeholder, True)
                known[c] = slot
            found.append(slot)
        return found

    def add_at(self, steps: tuple, types: list[TensorType], terms: list[int]) -> int:
        """The term node of placed `steps` (typed `types`) over the term nodes of a match's values
        (`slots`), as `add` adds the plan `instantiate` built."""
        add_node = self.egraph.add_node
        nodes: list[int] = []
        for (op, spec, op_id), type_ in zip(steps, types):
            children = tuple([nodes[x] if kind else terms[x] for kind, x in spec])
            nodes.append(add_node(op, children, type_, op_id))
        return nodes[-1]

    def type_of(self, built: Any, like: int) -> TensorType:
        """The static type of a built tree (a number takes class `like`'s dtype)."""
        if type(built) is ClassRef:
            return self.egraph.classes[self.egraph.find(built)].type
        if isinstance(built, _Planned):
            return built.types[-1]
        if isinstance(built, _Built):
            return built.type
        if isinstance(built, Variable):
            return built.type
        return to_graph(built, like=self.proxy(like)).type

    def add(self, built: Any, like: int) -> int:
        """The term node of a built tree, adding what is new (a number becomes a constant of class
        `like`'s dtype).

        A class stands for the term node of its proxy (its constant or input, else its root), as it
        does inside an application: the two sides of a rule then hold one term node for each variable,
        so an explanation step rewrites only what the rule rewrote.
        """
        egraph = self.egraph
        if type(built) is ClassRef:
            return self._add_variable(self.proxy(built))
        if isinstance(built, Variable):
            return self._add_variable(built)
        if type(built) is _Planned:
            nodes: list[int] = []
            for (op, _), operands, type_ in zip(built.plan.steps, built.operands, built.types):
                children = tuple([nodes[v] if type(v) is _Step else self._add_variable(v) for v in operands])
                nodes.append(egraph.add_node(op, children, type_))
            return nodes[-1]
        if not isinstance(built, _Built):
            return egraph.add_leaf(to_graph(built, like=self.proxy(like)))
        stack = [built]
        while stack:  # a built tree is as deep as the pattern: the stack only keeps the order explicit
            b = stack[-1]
            waiting = [o for o in b.operands if isinstance(o, _Built) and o.node is None]
            if waiting:
                stack.extend(waiting)
                continue
            stack.pop()
            if b.node is None:
                children = tuple(
                    o.node
                    if type(o) is _Built
                    else self._add_variable(o)
                    if isinstance(o, Variable)
                    else self.add(o, like)
                    for o in b.operands
                )
                b.node = egraph.add_node(b.op, children, b.type)
        return built.node

    def _add_variable(self, v: Variable) -> int:
        """`egraph.intern(v, placeholder_class)`, directly for a placeholder or a leaf."""
        if v.owner is None:
            cls = self._classes.get(v)
            return self.egraph.add_leaf(v) if cls is None else self.egraph.find(cls)
        return self.egraph.intern(v, self.placeholder_class)

    def _variable_class(self, v: Variable) -> int | None:
        """`egraph.lookup(v, placeholder_class).cls`, directly for a placeholder or a leaf."""
        egraph = self.egraph
        if v.owner is None:
            cls = self._classes.get(v)
            if cls is None:
                cls = egraph.leaf_node(v)
            return None if cls is None else egraph.find(cls)
        return egraph.lookup(v, self.placeholder_class).cls

    def classes_inside(self, built: Any) -> tuple[int | None, set[int], tuple[int | None, ...]]:
        """Where a built tree already is, adding nothing: its class (None: absent), the classes of its
        proper subterms that are present, and its operands' classes."""
        egraph = self.egraph
        inside: set[int] = set()

        def leaf_class(v: Any) -> int | None:
            if type(v) is ClassRef:
                return egraph.find(v)
            if isinstance(v, Variable):
                return self._variable_class(v)
            return None

        if type(built) is _Planned:
            classes: list[int | None] = []
            operands: tuple[int | None, ...] = ()
            for (op, _), values in zip(built.plan.steps, built.operands):
                operands = tuple(
                    [classes[v] if type(v) is _Step else self._variable_class(v) for v in values]
                )
                inside.update(c for c in operands if c is not None)
                classes.append(None if None in operands else egraph.lookup_node(op, operands))
            return classes[-1], inside, operands
        if not isinstance(built, _Built):
            return leaf_class(built), inside, ()
        found: dict[int, int | None] = {}
        operands: tuple[int | None, ...] = ()
        stack = [built]
        while stack:
            b = stack[-1]
            waiting = [o for o in b.operands if isinstance(o, _Built) and id(o) not in found]
            if waiting:
                stack.extend(waiting)
                continue
            stack.pop()
            operands = tuple(found[id(o)] if isinstance(o, _Built) else leaf_class(o) for o in b.operands)
            inside.update(c for c in operands if c is not None)
            found[id(b)] = None if None in operands else egraph.lookup_node(b.op, operands)
        return found[id(built)], inside, operands  # the root is popped last: `operands` are its own

"""FunctionGraph: a graph between inputs and outputs that can be edited in place.

It keeps, for every variable, the list of its clients (the `(node, i)` pairs
that read it, with the string ``"output"`` standing for the graph's outputs),
imports new nodes as replacements bring them in and prunes nodes nothing reads
any more.  Features attached to it are told of every change through callbacks:
the `Feature` protocol, defined here with the graph that calls it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, MutableSequence, Sequence
from typing import Any, Literal

from relwrite.graph import basic
from relwrite.graph.basic import Apply, Constant, Variable, toposort_nodes
from relwrite.graph.memory import collection_paused
from relwrite.graph.printing import graph_repr, picture_html

Node = Apply | Literal["output"]
Client = tuple[Node, int]


class MissingInputError(ValueError):
    """A node reads a leaf that is neither an input of the graph nor a constant."""


class InconsistencyError(Exception):
    """A change would leave the graph invalid (a cycle, or a feature's validation failed)."""


class GraphIntegrityError(Exception):
    """`check_integrity` found the graph's bookkeeping out of step with its nodes."""


class Clients(MutableSequence):
    """The clients of one variable: `(node, i)` pairs in the order they came, each at most once.

    A sequence (compares equal to a list of the same pairs) backed by an
    insertion-ordered dict, so that finding or removing a client costs O(1)
    however many readers a variable has: a constant shared by thousands of
    nodes would make every rewrite that drops one of them linear otherwise.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Client] = ()):
        self._items: dict[Client, None] = dict.fromkeys(items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Client]:
        return iter(self._items)

    def __contains__(self, client: object) -> bool:
        try:
            return client in self._items
        except TypeError:  # unhashable: not a client
            return False

    def __getitem__(self, k: Any) -> Any:
        items = list(self._items)
        return Clients(items[k]) if isinstance(k, slice) else items[k]

    def __setitem__(self, k: Any, client: Any) -> None:
        items = list(self._items)
        items[k] = client
        self._items = dict.fromkeys(items)

    def __delitem__(self, k: Any) -> None:
        items = list(self._items)
        del items[k]
        self._items = dict.fromkeys(items)

    def insert(self, k: int, client: Client) -> None:
        items = list(self._items)
        items.insert(k, client)
        self._items = dict.fromkeys(items)

    def append(self, client: Client) -> None:
        self._items[client] = None

    def discard(self, client: Client) -> bool:
        """Remove `client` if present (O(1)); whether it was."""
        try:
            del self._items[client]
        except (KeyError, TypeError):
            return False
        return True

    def renamed(self, old: Client, new: Client) -> None:
        """Replace `old` by `new` in place, keeping its position."""
        self._items = {new if c == old else c: None for c in self._items}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Clients, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(list(self._items))


class _AllOrNothing:
    """`FunctionGraph._all_or_nothing`: a class rather than a generator-based context manager, as
    every replacement opens one."""

    __slots__ = ("fgraph", "outermost")

    def __init__(self, fgraph: FunctionGraph):
        self.fgraph = fgraph
        self.outermost = False

    def __enter__(self) -> None:
        if self.fgraph._undo_log is None:  # else an enclosing block undoes everything
            self.outermost = True
            self.fgraph._undo_log = []

    def __exit__(self, kind: type | None, exc: BaseException | None, traceback: Any) -> None:
        if not self.outermost:
            return
        fgraph, log = self.fgraph, self.fgraph._undo_log
        fgraph._undo_log = None
        if kind is not None:
            for node, i, old in reversed(log):
                fgraph.change_node_input(node, i, old, reason="rollback", check=False)


class AlreadyThere(Exception):
    """Raised by `on_attach` when an equivalent feature is attached already."""


class Feature:
    """Base class of FunctionGraph extensions; every callback is optional and does nothing here."""

    def on_attach(self, fgraph: FunctionGraph) -> None:
        """Called once attached, when the graph is already populated."""

    def on_detach(self, fgraph: FunctionGraph) -> None:
        """Called by `remove_feature`: undo what on_attach installed."""

    def on_import(self, fgraph: FunctionGraph, node: Apply, reason: str | None) -> None:
        """Called when `node` joins the graph."""

    def on_prune(self, fgraph: FunctionGraph, node: Apply, reason: str | None) -> None:
        """Called after `node` left the graph."""

    def on_change_input(
        self, fgraph: FunctionGraph, node: Any, i: int, var: Variable, new_var: Variable, reason: str | None
    ) -> None:
        """Called after `node.inputs[i]` changed from `var` to `new_var` (node may be "output")."""

    def orderings(self, fgraph: FunctionGraph) -> dict[Apply, Iterable[Apply]]:
        """Extra dependencies for toposort: node -> nodes that must be computed first."""
        return {}

    def clone(self) -> Feature:
        """A copy to attach to a cloned graph; stateless features may return themselves."""
        return self


def _defines(feature: Any, name: str, base: type) -> bool:
    """Whether `feature` has a method `name` other than `base`'s (which does nothing)."""
    own = getattr(type(feature), name, None)
    return callable(getattr(feature, name, None)) and own is not getattr(base, name)


class FunctionGraph:
    """The subgraph between `inputs` and `outputs`, with clients and features.

    By default the graph between inputs and outputs is cloned, so editing the
    FunctionGraph never touches the caller's variables (`clone=False` adopts them).
    When `inputs` is None the graph's non-constant leaves become its inputs.
    """

    def __init__(
        self,
        inputs: Sequence[Variable] | None = None,
        outputs: Sequence[Variable] | None = None,
        *,
        features: Iterable[Any] = (),
        clone: bool = True,
    ):
        if outputs is None:
            raise TypeError("FunctionGraph needs outputs")
        outputs = list(outputs)
        for i, out in enumerate(outputs):
            if not isinstance(out, Variable):
                raise TypeError(f"FunctionGraph: output {i} is {out!r}, not a Variable")
        self.inputs: list[Variable] = []
        self.outputs: list[Variable] = []
        self.apply_nodes: dict[Apply, None] = {}
        self.variables: dict[Variable, None] = {}
        self.clients: dict[Variable, Clients] = {}
        self._input_set: set[Variable] = set()
        self._features: list[Any] = []
        self._callbacks: dict[str, list[Any]] = {}
        self._ordering_features: list[Any] = []  # those whose `orderings` may ask for any (not Feature's)
        self._version = 0
        self._toposort_cache: tuple[int, dict, list[Apply]] | None = None
        self._undo_log: list[tuple[Node, int, Variable]] | None = None
        self._levels: dict[Apply, int] | None = {}
        with collection_paused():  # cloning and importing allocate O(nodes) objects that all live on
            inputs = basic.graph_inputs(outputs) if inputs is None else list(inputs)
            if clone:
                inputs, outputs = basic.clone(inputs, outputs)
            for var in inputs:
                self.add_input(var)
            for var in outputs:
                self.add_output(var)
        for feature in features:
            self.attach_feature(feature)

    # -- variables and clients -------------------------------------------------------
    def setup_var(self, var: Variable) -> None:
        """Make `var` known to the graph (with no clients yet)."""
        if var not in self.variables:
            self.variables[var] = None
            self.clients.setdefault(var, Clients())

    def add_input(self, var: Variable, check: bool = True) -> None:
        """Add an ownerless, non-constant variable as a new input."""
        _require_variable("add_input", var)
        if check and var in self._input_set:
            return
        if var.owner is not None or isinstance(var, Constant):
            raise TypeError(f"FunctionGraph inputs must be ownerless non-constant variables, got {var}")
        if var in self._input_set:
            raise ValueError(f"{var} is already an input of the graph")
        self.inputs.append(var)
        self._input_set.add(var)
        self.setup_var(var)
        self._changed()

    def add_output(self, var: Variable, reason: str | None = None, import_missing: bool = False) -> None:
        """Add `var` (importing what it depends on) as a new output."""
        _require_variable("add_output", var)
        self.import_var(var, reason=reason, import_missing=import_missing)
        self.outputs.append(var)
        self.add_client(var, ("output", len(self.outputs) - 1))
        self._changed()

    def get_clients(self, var: Variable) -> list[Client]:
        """The `(node, i)` pairs such that `node.inputs[i]` is `var`."""
        return list(self.clients[var])

    def add_client(self, var: Variable, client: Client) -> None:
        self.clients[var].append(client)

    def remove_client(self, var: Variable, client: Client, reason: str | None = None) -> None:
        """Drop one client of `var`; prune what is left unread, walking up the graph.

        A node whose outputs all lose their clients is removed, and so on
        towards the inputs.  Inputs stay; orphaned constants are forgotten.
        `client` must be a client of `var` (a ValueError naming both leaves the
        graph untouched otherwise).  While pruning, a link that was already
        removed counts as removed, as in Aesara: removing a client before
        its reader goes is not an error.
        """
        clients = self.clients.get(var) if isinstance(var, Variable) else None
        if clients is None or client not in clients:
            raise ValueError(
                f"remove_client: {_describe_client(client)} is not a client of {self._describe(var)}"
                " (the graph is unchanged)"
            )
        self._notify_pruned(self._unlink([(var, client)]), reason)

    def _unlink(self, links: list[tuple[Variable, Client]]) -> list[Apply]:
        """Drop the `(var, client)` links and prune what is left unread; returns the pruned nodes.

        Only bookkeeping: the features hear of the pruned nodes afterwards, so a
        feature that raises cannot leave the graph half pruned.
        """
        pruned: list[Apply] = []
        work = list(links)
        while work:
            var, client = work.pop()
            clients = self.clients.get(var)
            if clients is None:  # forgotten when an earlier link to it went
                continue
            clients.discard(client)
            if clients:
                continue
            owner = var.owner
            if owner is not None:
                if owner in self.apply_nodes and not self._any_output_read(owner, var.index):
                    del self.apply_nodes[owner]
                    if self._levels is not None:
                        self._levels.pop(owner, None)
                    for out in owner.outputs:
                        self.variables.pop(out, None)
                        self.clients.pop(out, None)
                    pruned.append(owner)
                    work.extend((v, (owner, i)) for i, v in enumerate(owner.inputs))
            elif var not in self._input_set:
                del self.variables[var]
                del self.clients[var]
        if pruned:
            self._changed()
        return pruned

    def _any_output_read(self, node: Apply, start: int) -> bool:
        """Whether any output of `node` has a client, looking from output `start` on (then wrapping).

        A node's outputs are replaced in order, so the next one is the likely
        reader: replacing each output of a K-output node costs O(K), not O(K^2).
        """
        outputs = node.outputs
        return any(
            self.clients.get(outputs[k % len(outputs)]) for k in range(start + 1, start + 1 + len(outputs))
        )

    def _notify_pruned(self, pruned: list[Apply], reason: str | None) -> None:
        for node in pruned:
            self.execute_callbacks("on_prune", node, reason)

    # -- importing ----------------------------------------------------------------------
    def import_var(self, var: Variable, reason: str | None = None, import_missing: bool = False) -> None:
        """Bring `var` and everything it depends on into the graph (nothing changes when that fails)."""
        _require_variable("import_var", var)
        if var.owner is not None:
            if var.owner not in self.apply_nodes:
                self.import_node(var.owner, reason=reason, import_missing=import_missing)
        elif not isinstance(var, Constant) and var not in self._input_set:
            if not import_missing:
                raise MissingInputError(f"{self._describe(var)} is not an input of the graph")
            self.add_input(var)
        self.setup_var(var)

    def import_node(
        self, apply_node: Apply, check: bool = True, reason: str | None = None, import_missing: bool = False
    ) -> None:
        """Bring `apply_node` and the new nodes it depends on into the graph.

        Every leaf the new nodes read must be an input or a constant (unless
        `import_missing`); this is checked before anything changes.
        """
        if not isinstance(apply_node, Apply):
            raise TypeError(f"import_node: expected an Apply node, got {apply_node!r}")
        new_nodes = toposort_nodes(
            [apply_node] if apply_node not in self.apply_nodes else [],
            lambda v: v.owner in self.apply_nodes,
        )
        missing = []
        if check:
            for node in new_nodes:
                for i, var in enumerate(node.inputs):
                    if var.owner is None and not isinstance(var, Constant) and var not in self._input_set:
                        if not import_missing:
                            raise MissingInputError(
                                f"{self._describe(var)} (input {i} of {node.op}) is not an input of the graph"
                            )
                        missing.append(var)
        for var in missing:
            if var not in self._input_set:
                self.add_input(var)
        levels = self._levels
        for node in new_nodes:
            self.apply_nodes[node] = None
            if levels is not None:
                levels[node] = 1 + max((levels.get(v.owner, 0) for v in node.inputs if v.owner), default=0)
            for out in node.outputs:
                self.setup_var(out)
            for i, var in enumerate(node.inputs):
                self.setup_var(var)
                self.add_client(var, (node, i))
            self._changed()
            self.execute_callbacks("on_import", node, reason)

    @staticmethod
    def _describe(var: Variable) -> str:
        if not isinstance(var, Variable):
            return f"{var!r} (not a Variable)"
        return f"variable {var!s} of type {var.type}"

    # -- editing ----------------------------------------------------------------------------
    def change_node_input(
        self,
        node: Node,
        i: int,
        new_var: Variable,
        reason: str | None = None,
        import_missing: bool = False,
        check: bool = True,
    ) -> None:
        """Make `node.inputs[i]` (or output `i` when node is ``"output"``) read `new_var`.

        Everything is checked before the graph changes: the node is in the
        graph and reads its input `i` through a registered client, `new_var`
        can be imported, and (with `check`) the types agree and no cycle forms.
        """
        old = self._input_at(node, i)
        _require_variable("change_node_input", new_var)
        if old is new_var:
            return
        if (node, i) not in self.clients.get(old, ()):
            raise ValueError(
                f"change_node_input: {_describe_client((node, i))} is not registered as a client of "
                f"{self._describe(old)} (the graph is unchanged)"
            )
        if check:
            self._check_types(old, new_var)
            if node != "output" and self._would_cycle(old, new_var, readers={node}):
                raise InconsistencyError(f"reading {new_var} in {node} would create a cycle")
        self.import_var(new_var, reason=reason, import_missing=import_missing)
        if node == "output":
            self.outputs[i] = new_var
        else:
            node.inputs[i] = new_var
            self._raise_levels(node, new_var)
        pruned: list[Apply] = []
        if old != new_var:  # equal constants (they hash by value) share one clients entry: nothing moves
            self.add_client(new_var, (node, i))
            pruned = self._unlink([(old, (node, i))])
        self._changed()
        if self._undo_log is not None:
            self._undo_log.append((node, i, old))
        self._notify_pruned(pruned, reason)
        self.execute_callbacks("on_change_input", node, i, old, new_var, reason=reason)

    def _input_at(self, node: Node, i: int) -> Variable:
        """What `node` reads at position `i`, after checking the node is in the graph and has that input."""
        if node == "output":
            if not (isinstance(i, int) and 0 <= i < len(self.outputs)):
                raise IndexError(f"the graph has no output {i!r} (it has {len(self.outputs)})")
            return self.outputs[i]
        if not isinstance(node, Apply) or node not in self.apply_nodes:
            raise ValueError(f"{node!r} is not a node of the graph")
        if not (isinstance(i, int) and 0 <= i < len(node.inputs)):
            raise IndexError(f"{node} has no input {i!r} (it has {len(node.inputs)})")
        return node.inputs[i]

    def _all_or_nothing(self) -> _AllOrNothing:
        """Undo the block's input changes, newest first, if it raises: the graph is left as it was."""
        return _AllOrNothing(self)

    @staticmethod
    def _check_types(old: Variable, new: Variable) -> None:
        if not isinstance(new, Variable):
            raise TypeError(f"cannot replace {old} by {new!r}: not a Variable")
        if not (old.type.is_super(new.type) or new.type.is_super(old.type)):
            raise TypeError(f"cannot replace {old} of type {old.type} by {new} of type {new.type}")

    def replace(
        self,
        var: Variable,
        new_var: Variable,
        reason: str | None = None,
        verbose: bool = False,
        import_missing: bool = False,
    ) -> None:
        """Make every client of `var` read `new_var` instead.

        Raises ValueError when `var` is not in the graph, TypeError when the
        types differ, and InconsistencyError when the change would close a cycle.
        """
        if verbose:
            print(f"rewriting: {reason or 'replace'} replaces {var} by {new_var}")
        if not isinstance(var, Variable) or var not in self.variables:
            raise ValueError(f"replace: {self._describe(var)} is not in the graph")
        if var is new_var:
            return
        self._check_types(var, new_var)
        if self._would_cycle(var, new_var):
            raise InconsistencyError(f"replacing {var} by {new_var} would create a cycle")
        with self._all_or_nothing():
            for node, i in list(self.clients[var]):
                self.change_node_input(
                    node, i, new_var, reason=reason, import_missing=import_missing, check=False
                )

    def replace_all(self, pairs: Iterable[tuple[Variable, Variable]], **kwargs: Any) -> None:
        """`replace` each pair in turn; a variable an earlier replacement pruned is skipped.

        All or nothing: when a pair is refused, the pairs already applied are undone.
        """
        pairs = list(pairs)
        for var, _ in pairs:
            if not isinstance(var, Variable) or var not in self.variables:
                raise ValueError(f"replace_all: {self._describe(var)} is not in the graph")
        with self._all_or_nothing():
            for var, new_var in pairs:
                if var in self.variables:
                    self.replace(var, new_var, **kwargs)

    def _would_cycle(self, var: Variable, new_var: Variable, readers: set[Apply] | None = None) -> bool:
        """Whether `new_var` depends on a node that reads `var` (so replacing closes a loop).

        `readers` narrows the nodes that would read `new_var` (default: every client of `var`).

        Walks from `new_var` towards the inputs, but never below the lowest
        reader's level: a node whose level is no higher cannot depend on a
        reader, so the walk covers only the region between them (rewrites
        build replacements from near ancestors: usually a handful of nodes).
        """
        if readers is None:
            readers = {node for node, _ in self.clients[var] if node != "output"}
        if not readers or new_var.owner is None:
            return False
        levels = self.levels()
        floor = min(levels[node] for node in readers)
        seen: set[Apply] = set()
        stack = [new_var]
        while stack:
            v = stack.pop()
            node = v.owner
            if node is None or v is var or node in seen:
                continue
            seen.add(node)
            if node in readers:
                return True
            level = levels.get(node)
            if level is None or level > floor:  # a node being imported, or one a reader may lie under
                stack.extend(node.inputs)
        return False

    # -- levels ------------------------------------------------------------------------------
    def levels(self) -> dict[Apply, int]:
        """Each node's level: above the level of every node it reads (inputs and constants are 0).

        Kept up to date as the graph changes (a node reading a higher
        replacement rises, and its readers with it), so that cycle checks
        prune the walk; recomputed from a toposort when bookkeeping was
        rebuilt behind the graph's back (`forget_levels`).
        """
        if self._levels is None:
            order = toposort_nodes([o.owner for o in self.outputs if o.owner is not None], lambda v: False)
            levels: dict[Apply, int] = {}
            for node in order:
                levels[node] = 1 + max((levels.get(v.owner, 0) for v in node.inputs if v.owner), default=0)
            self._levels = levels
        return self._levels

    def resync(self) -> tuple[list[Apply], list[Apply]]:
        """Make the bookkeeping (nodes, variables, clients) agree with the structure again: for code that
        edited nodes' inputs or the output list directly, as a rollback does.  Returns the nodes that
        left and those that joined (features are not told: the caller knows what they can follow).

        Surviving entries keep their order.
        """
        order = toposort_nodes([o.owner for o in self.outputs if o.owner is not None], lambda v: False)
        expected: dict[Variable, list[Any]] = {v: [] for v in self.inputs}
        for i, out in enumerate(self.outputs):
            expected.setdefault(out, []).append(("output", i))
        for node in order:
            for out in node.outputs:
                expected.setdefault(out, [])
            for i, var in enumerate(node.inputs):
                expected.setdefault(var, []).append((node, i))
        reached = dict.fromkeys(order)
        dropped = [n for n in self.apply_nodes if n not in reached]
        added = [n for n in order if n not in self.apply_nodes]
        kept = [n for n in self.apply_nodes if n in reached]
        self.apply_nodes.clear()
        self.apply_nodes.update(dict.fromkeys([*kept, *added]))
        variables = [v for v in self.variables if v in expected]
        variables += [v for v in expected if v not in self.variables]
        self.variables.clear()
        self.variables.update(dict.fromkeys(variables))
        old_clients = dict(self.clients)
        self.clients.clear()
        for var in variables:
            want = expected[var]
            have = list(dict.fromkeys(old_clients.get(var, ())))
            wanted, had = set(want), set(have)
            self.clients[var] = Clients(
                [*(c for c in have if c in wanted), *(c for c in want if c not in had)]
            )
        self._changed()
        self.forget_levels()
        return dropped, added

    def restore_lists(self, inputs: Sequence[Variable], outputs: Sequence[Variable]) -> None:
        """Put back the input and output lists as they were (a rollback; `resync` follows)."""
        self.inputs[:] = inputs
        self.outputs[:] = outputs
        self._input_set = set(inputs)

    def forget_levels(self) -> None:
        """Drop the node levels (recomputed when next needed): for code that edits nodes' inputs directly."""
        self._levels = None

    def _raise_levels(self, node: Apply, new_var: Variable) -> None:
        """Lift `node` above `new_var` (which it now reads), and its readers above it, as far as needed."""
        levels = self._levels
        if levels is None or new_var.owner is None:
            return
        stack = [(node, levels.get(new_var.owner, 0) + 1)]
        limit = len(self.apply_nodes) + 1  # no acyclic graph has a higher level
        while stack:
            reader, level = stack.pop()
            if levels.get(reader, 0) >= level:
                continue
            if level > limit:  # an unchecked change closed a cycle: levels mean nothing now
                self._levels = None
                return
            levels[reader] = level
            for out in reader.outputs:
                stack.extend(
                    (client, level + 1) for client, _ in self.clients.get(out, ()) if client != "output"
                )

    def remove_output(self, output_idx: int, reason: str | None = None) -> None:
        """Drop output `output_idx`, pruning what only it needed."""
        if not (isinstance(output_idx, int) and 0 <= output_idx < len(self.outputs)):
            raise IndexError(
                f"remove_output: the graph has no output {output_idx!r} (it has {len(self.outputs)})"
            )
        var = self.outputs[output_idx]
        pruned = self._unlink([(var, ("output", output_idx))])
        del self.outputs[output_idx]
        for j in range(output_idx, len(self.outputs)):
            self.clients[self.outputs[j]].renamed(("output", j + 1), ("output", j))
        self._changed()
        self._notify_pruned(pruned, reason)

    def remove_node(self, node: Apply, reason: str | None = None) -> None:
        """Remove `node`, every node and output that depends on it, and what is left orphaned."""
        if not isinstance(node, Apply) or node not in self.apply_nodes:
            raise ValueError(f"remove_node: {node!r} is not a node of the graph")
        self._remove_outputs_depending_on(node.outputs, reason)

    def remove_input(self, input_idx: int, reason: str | None = None) -> None:
        """Drop input `input_idx` and everything that depends on it."""
        if not (isinstance(input_idx, int) and 0 <= input_idx < len(self.inputs)):
            raise IndexError(
                f"remove_input: the graph has no input {input_idx!r} (it has {len(self.inputs)})"
            )
        var = self.inputs[input_idx]
        self._remove_outputs_depending_on([var], reason)
        del self.inputs[input_idx]
        self._input_set.discard(var)
        self.variables.pop(var, None)
        self.clients.pop(var, None)
        self._changed()

    def _remove_outputs_depending_on(self, sources: Sequence[Variable], reason: str | None) -> None:
        """Remove every output computed from `sources`: the nodes between them go as nothing reads them."""
        doomed: set[Variable] = set(sources)
        stack = list(sources)
        while stack:
            for client, _ in self.clients.get(stack.pop(), ()):
                if client != "output":
                    for out in client.outputs:
                        if out not in doomed:
                            doomed.add(out)
                            stack.append(out)
        for idx in reversed(range(len(self.outputs))):
            if self.outputs[idx] in doomed:
                self.remove_output(idx, reason=reason)

    # -- features --------------------------------------------------------------------------
    @property
    def features(self) -> list[Any]:
        return list(self._features)

    def attach_feature(self, feature: Any) -> None:
        """Attach `feature` and call its `on_attach` (a feature raising AlreadyThere is skipped)."""
        if feature in self._features:
            return
        on_attach = getattr(feature, "on_attach", None)
        if on_attach is not None:
            try:
                on_attach(self)
            except AlreadyThere:
                return
        self._features.append(feature)
        self._callbacks.clear()  # the toposort cache stays: it is checked against the features' orderings
        if _defines(feature, "orderings", Feature):
            self._ordering_features.append(feature)

    def remove_feature(self, feature: Any) -> None:
        """Detach `feature` and call its `on_detach`."""
        self._features.remove(feature)
        self._callbacks.clear()
        if feature in self._ordering_features:
            self._ordering_features.remove(feature)
        on_detach = getattr(feature, "on_detach", None)
        if on_detach is not None:
            on_detach(self)

    def execute_callbacks(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Call `feature.<name>(self, *args, **kwargs)` on every feature that has it."""
        callbacks = self._callbacks.get(name)
        if callbacks is None:
            callbacks = [getattr(f, name) for f in self._features if callable(getattr(f, name, None))]
            self._callbacks[name] = callbacks
        for callback in callbacks:
            callback(self, *args, **kwargs)

    def collect_callbacks(self, name: str, *args: Any) -> dict[Any, Any]:
        """`{feature: feature.<name>(self, *args)}` for every feature that has it."""
        return {f: getattr(f, name)(self, *args) for f in self._features if callable(getattr(f, name, None))}

    # -- order, copies, checks ---------------------------------------------------------------
    def _changed(self) -> None:
        self._version += 1

    @property
    def version(self) -> int:
        """A counter every change to the graph increases (what caches of its order compare)."""
        return self._version

    def orderings(self) -> dict[Apply, list[Apply]]:
        """Extra evaluation dependencies the features ask for: node -> nodes that must come first."""
        merged: dict[Apply, list[Apply]] = {}
        for feature in self._ordering_features:
            for node, before in feature.orderings(self).items():
                merged.setdefault(node, []).extend(before)
        return merged

    def toposort(self) -> list[Apply]:
        """The apply nodes, each after its inputs' owners and any feature orderings (cached)."""
        orderings = self.orderings()
        cached = self._toposort_cache
        if cached is not None and cached[0] == self._version and cached[1] == orderings:
            return list(cached[2])
        order = toposort_nodes(
            [o.owner for o in self.outputs if o.owner is not None], lambda v: False, orderings
        )
        self._toposort_cache = (self._version, orderings, order)
        return list(order)

    def clone_get_equiv(
        self, check_integrity: bool = True, attach_feature: bool = True
    ) -> tuple[FunctionGraph, dict[Any, Any]]:
        """A copy of this graph (every node cloned) and the map from old to new objects."""
        equiv = basic.clone_get_equiv(self.inputs, self.outputs)
        new = FunctionGraph([equiv[v] for v in self.inputs], [equiv[v] for v in self.outputs], clone=False)
        if check_integrity:
            new.check_integrity()
        if attach_feature:
            for feature in self._features:
                new.attach_feature(feature.clone())
        return new, equiv

    def _repr_html_(self) -> str:
        """A notebook shows the graph as a picture (text without Graphviz)."""
        return picture_html(self, "FunctionGraph")

    def __reduce__(self) -> tuple:
        """Pickle (and deep-copy) as its inputs, a flat table of its nodes and its features.

        A feature whose class builds with no arguments comes back fresh
        (re-attached: it hears of the graph anew, its history starts empty);
        another is pickled as it is and re-attached.
        """
        table = basic.GraphTable.of([*self.inputs, *self.outputs])
        features = [_fresh_feature(f) for f in self._features]
        return _rebuilt_fgraph, (table, len(self.inputs), features)

    def clone(self, check_integrity: bool = True) -> FunctionGraph:
        return self.clone_get_equiv(check_integrity)[0]

    def check_integrity(self) -> None:
        """Verify nodes, variables and clients agree; raise GraphIntegrityError otherwise."""

        def fail(msg: str) -> None:
            raise GraphIntegrityError(msg)

        try:
            nodes = toposort_nodes([o.owner for o in self.outputs if o.owner is not None], lambda v: False)
        except ValueError as exc:
            fail(str(exc))
        if set(nodes) != set(self.apply_nodes):
            extra = set(self.apply_nodes) - set(nodes)
            fail(f"apply_nodes does not match the nodes the outputs reach (unreached: {extra})")
        expected_vars: set[Variable] = set(self.inputs) | set(self.outputs)
        expected_clients: dict[Variable, list[Client]] = {v: [] for v in self.inputs}
        for i, out in enumerate(self.outputs):
            expected_clients.setdefault(out, []).append(("output", i))
        for node in nodes:
            for j, out in enumerate(node.outputs):
                if out.owner is not node or out.index != j:
                    fail(f"output {j} of {node} does not point back to it")
                expected_vars.add(out)
                expected_clients.setdefault(out, [])
            for i, var in enumerate(node.inputs):
                if var.owner is None and not isinstance(var, Constant) and var not in self._input_set:
                    fail(f"{var} (input {i} of {node}) is not an input of the graph")
                expected_vars.add(var)
                expected_clients.setdefault(var, []).append((node, i))
        if set(self.variables) != expected_vars:
            fail(f"variables mismatch: {set(self.variables) ^ expected_vars}")
        for var, clients in expected_clients.items():
            have = self.clients.get(var)
            if have is None or sorted(map(_client_key, have)) != sorted(map(_client_key, clients)):
                fail(f"clients of {var} are {have}, expected {clients}")
        levels = self._levels
        for node in nodes if levels is not None else ():
            below = [
                v.owner
                for v in node.inputs
                if v.owner is not None and levels.get(v.owner, 0) >= levels.get(node, 0)
            ]
            if below:
                fail(f"level of {node} ({levels.get(node)}) is not above that of {below[0]}, which it reads")
        if set(self.clients) != expected_vars:
            fail(f"clients has entries for variables outside the graph: {set(self.clients) - expected_vars}")

    def fingerprint(self, by_identity: bool = False) -> str:
        """A digest of the graph's structure: ops, wiring, inputs, constants and outputs.

        Two graphs computing the same expression the same way have the same
        fingerprint; with `by_identity`, the node and variable objects count too
        (an edit undone exactly restores the fingerprint).
        """
        digest = hashlib.blake2b(digest_size=16)
        names: dict[Variable, str] = {v: f"i{k}" for k, v in enumerate(self.inputs)}
        order = toposort_nodes([o.owner for o in self.outputs if o.owner is not None], lambda v: False)
        for k, node in enumerate(order):
            args = []
            for var in node.inputs:
                if var not in names:
                    names[var] = f"c{var._key!r}" if isinstance(var, Constant) else f"free{id(var)}"
                args.append(names[var])
            for j, out in enumerate(node.outputs):
                names[out] = f"n{k}.{j}"
            ident = f"@{id(node)}" if by_identity else ""
            digest.update(f"{node.op!r}{ident}({','.join(args)});".encode())
        for out in self.outputs:
            if out not in names:
                names[out] = f"c{out._key!r}" if isinstance(out, Constant) else f"free{id(out)}"
            digest.update(f"out {names[out]};".encode())
        digest.update(" ".join(str(v.type) for v in self.inputs).encode())
        if by_identity:
            digest.update(" ".join(str(id(v)) for v in self.inputs).encode())
        return digest.hexdigest()

    def __contains__(self, item: Variable | Apply) -> bool:
        """`var in fgraph`, `node in fgraph`: whether a variable or an apply node belongs to the graph now.

        A constant is in the graph when an equal constant is (constants compare
        by value); anything but a Variable or an Apply is a TypeError.
        """
        if isinstance(item, Variable):
            return item in self.variables
        if isinstance(item, Apply):
            return item in self.apply_nodes
        raise TypeError(
            f"FunctionGraph holds Variables and Apply nodes; `in` got {type(item).__name__}: {item!r}"
        )

    def __repr__(self) -> str:
        return f"FunctionGraph({graph_repr(self.outputs)})"


def _require_variable(method: str, var: Any) -> None:
    if not isinstance(var, Variable):
        raise TypeError(f"{method}: expected a Variable, got {var!r}")


def _describe_client(client: Any) -> str:
    if isinstance(client, tuple) and len(client) == 2:
        node, index = client
        return f"output {index} of the graph" if node == "output" else f"input {index} of {node}"
    return repr(client)


def _client_key(client: Client) -> tuple[int, int]:
    node, index = client
    return (0 if node == "output" else id(node), index)


def _fresh_feature(feature: Any) -> Any:
    """The feature's class when it builds with no arguments (a fresh one is attached), else the feature."""
    import inspect

    try:
        parameters = inspect.signature(type(feature)).parameters.values()
    except (TypeError, ValueError):
        return feature
    required = [
        p for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    return type(feature) if not required else feature


def _rebuilt_fgraph(table: basic.GraphTable, n_inputs: int, features: list[Any]) -> FunctionGraph:
    variables = table.build()
    fgraph = FunctionGraph(variables[:n_inputs], variables[n_inputs:], clone=False)
    for feature in features:
        fgraph.attach_feature(feature() if isinstance(feature, type) else feature)
    return fgraph

"""FunctionGraph: a graph between inputs and outputs that can be edited in place.

It keeps, for every variable, the list of its clients (the `(node, i)` pairs
that read it, with the string ``"output"`` standing for the graph's outputs),
imports new nodes as replacements bring them in and prunes nodes nothing reads
any more.  Features attached to it are told of every change through callbacks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from relwrite.graph import basic
from relwrite.graph.basic import Apply, Constant, Variable, toposort_nodes

Node = Apply | Literal["output"]
Client = tuple[Node, int]


class MissingInputError(ValueError):
    """A node reads a leaf that is neither an input of the graph nor a constant."""


class InconsistencyError(Exception):
    """A change would leave the graph invalid (a cycle, or a feature's validation failed)."""


class GraphIntegrityError(Exception):
    """`check_integrity` found the graph's bookkeeping out of step with its nodes."""


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
        features: Iterable[Any] = (),
        clone: bool = True,
    ):
        if outputs is None:
            raise TypeError("FunctionGraph needs outputs")
        outputs = list(outputs)
        for i, out in enumerate(outputs):
            if not isinstance(out, Variable):
                raise TypeError(f"FunctionGraph: output {i} is {out!r}, not a Variable")
        inputs = basic.graph_inputs(outputs) if inputs is None else list(inputs)
        if clone:
            inputs, outputs = basic.clone(inputs, outputs)
        self.inputs: list[Variable] = []
        self.outputs: list[Variable] = []
        self.apply_nodes: dict[Apply, None] = {}
        self.variables: dict[Variable, None] = {}
        self.clients: dict[Variable, list[Client]] = {}
        self._input_set: set[Variable] = set()
        self._features: list[Any] = []
        self._callbacks: dict[str, list[Any]] = {}
        self._version = 0
        self._toposort_cache: tuple[int, dict, list[Apply]] | None = None
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
            self.clients.setdefault(var, [])

    def add_input(self, var: Variable, check: bool = True) -> None:
        """Add an ownerless, non-constant variable as a new input."""
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
        self.import_var(var, reason=reason, import_missing=import_missing)
        self.outputs.append(var)
        self.add_client(var, ("output", len(self.outputs) - 1))
        self._changed()

    def get_clients(self, var: Variable) -> list[Client]:
        """The `(node, i)` pairs such that `node.inputs[i]` is `var`."""
        return self.clients[var]

    def add_client(self, var: Variable, client: Client) -> None:
        self.clients[var].append(client)

    def remove_client(self, var: Variable, client: Client, reason: str | None = None) -> None:
        """Drop one client of `var`; prune what is left unread, walking up the graph.

        A node whose outputs all lose their clients is removed, and so on
        towards the inputs.  Inputs stay; orphaned constants are forgotten.
        """
        work = [(var, client)]
        while work:
            var, client = work.pop()
            clients = self.clients[var]
            node, index = client
            # Newest first: pruning walks from outputs to inputs, so the reader removed is usually
            # the last one added (an equal constant read by many nodes would be quadratic otherwise).
            for k in range(len(clients) - 1, -1, -1):
                c_node, c_index = clients[k]
                if c_node is node and c_index == index:
                    del clients[k]
                    break
            else:
                raise ValueError(f"{client} is not a client of {var}")
            if clients:
                continue
            owner = var.owner
            if owner is not None:
                if owner in self.apply_nodes and not any(self.clients.get(o) for o in owner.outputs):
                    work.extend(self._prune(owner, reason))
            elif var not in self._input_set:
                del self.variables[var]
                del self.clients[var]

    def _prune(self, node: Apply, reason: str | None) -> list[tuple[Variable, Client]]:
        """Remove `node` from the graph; returns the (input, client) links still to undo."""
        del self.apply_nodes[node]
        for out in node.outputs:
            self.variables.pop(out, None)
            self.clients.pop(out, None)
        self._changed()
        self.execute_callbacks("on_prune", node, reason)
        return [(var, (node, i)) for i, var in enumerate(node.inputs)]

    # -- importing ----------------------------------------------------------------------
    def import_var(self, var: Variable, reason: str | None = None, import_missing: bool = False) -> None:
        """Bring `var` and everything it depends on into the graph."""
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
        for node in new_nodes:
            self.apply_nodes[node] = None
            for out in node.outputs:
                self.setup_var(out)
            for i, var in enumerate(node.inputs):
                self.setup_var(var)
                self.add_client(var, (node, i))
            self._changed()
            self.execute_callbacks("on_import", node, reason)

    @staticmethod
    def _describe(var: Variable) -> str:
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
        """Make `node.inputs[i]` (or output `i` when node is ``"output"``) read `new_var`."""
        old = self.outputs[i] if node == "output" else node.inputs[i]
        if old is new_var:
            return
        if check:
            self._check_types(old, new_var)
        self.import_var(new_var, reason=reason, import_missing=import_missing)
        if node == "output":
            self.outputs[i] = new_var
        else:
            node.inputs[i] = new_var
        self.add_client(new_var, (node, i))
        self.remove_client(old, (node, i), reason=reason)
        self._changed()
        self.execute_callbacks("on_change_input", node, i, old, new_var, reason=reason)

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
        if var not in self.variables:
            raise ValueError(f"replace: {self._describe(var)} is not in the graph")
        if var is new_var:
            return
        self._check_types(var, new_var)
        if self._would_cycle(var, new_var):
            raise InconsistencyError(f"replacing {var} by {new_var} would create a cycle")
        for node, i in list(self.clients[var]):
            self.change_node_input(
                node, i, new_var, reason=reason, import_missing=import_missing, check=False
            )

    def replace_all(self, pairs: Iterable[tuple[Variable, Variable]], **kwargs: Any) -> None:
        """`replace` each pair in turn; a variable an earlier replacement pruned is skipped."""
        pairs = list(pairs)
        for var, _ in pairs:
            if var not in self.variables:
                raise ValueError(f"replace_all: {self._describe(var)} is not in the graph")
        for var, new_var in pairs:
            if var in self.variables:
                self.replace(var, new_var, **kwargs)

    def _would_cycle(self, var: Variable, new_var: Variable) -> bool:
        """Whether `new_var` depends on a node that reads `var` (so replacing closes a loop).

        Only the replacement's freshly built nodes are walked; the existing
        variables they read are safe when they are near ancestors of `var`
        (an ancestor cannot also depend on `var`), which is what rewrites build
        replacements from.  Anything else gets a full walk towards the inputs.
        """
        readers = {node for node, _ in self.clients[var] if node != "output"}
        if not readers or new_var.owner is None:
            return False
        frontier: list[Variable] = []
        seen: set[int] = set()
        stack = [new_var]
        while stack:
            v = stack.pop()
            if v.owner is None or v is var or id(v) in seen:
                continue
            seen.add(id(v))
            if v.owner in self.apply_nodes:
                frontier.append(v)
            else:
                stack.extend(v.owner.inputs)
        if not frontier:
            return False
        near: set[Variable] = set()
        level = [var]
        for _ in range(3):
            level = [i for v in level if v.owner is not None for i in v.owner.inputs if i not in near]
            near.update(level)
        stack = [v for v in frontier if v not in near]
        visited: set[Apply] = set()
        while stack:
            node = stack.pop().owner
            if node is None or node in visited:
                continue
            if node in readers:
                return True
            visited.add(node)
            stack.extend(v for v in node.inputs if v is not var and v not in near)
        return False

    def remove_output(self, output_idx: int, reason: str | None = None) -> None:
        """Drop output `output_idx`, pruning what only it needed."""
        var = self.outputs[output_idx]
        self.remove_client(var, ("output", output_idx), reason=reason)
        del self.outputs[output_idx]
        for j in range(output_idx, len(self.outputs)):
            clients = self.clients[self.outputs[j]]
            k = clients.index(("output", j + 1))
            clients[k] = ("output", j)
        self._changed()

    def remove_node(self, node: Apply, reason: str | None = None) -> None:
        """Remove `node`, every node and output that depends on it, and what is left orphaned."""
        doomed: dict[Apply, None] = {node: None}
        stack = [node]
        while stack:
            for out in stack.pop().outputs:
                for client, _ in self.clients.get(out, ()):
                    if client != "output" and client not in doomed:
                        doomed[client] = None
                        stack.append(client)
        doomed_outputs = {out for n in doomed for out in n.outputs}
        for idx in reversed(range(len(self.outputs))):
            if self.outputs[idx] in doomed_outputs:
                self.remove_output(idx, reason=reason)
        order = toposort_nodes([n for n in doomed if n in self.apply_nodes], lambda v: False)
        for dead in reversed(order):
            if dead in doomed and dead in self.apply_nodes:
                for var, client in self._prune(dead, reason):
                    if client in self.clients.get(var, ()):
                        self.remove_client(var, client, reason=reason)

    def remove_input(self, input_idx: int, reason: str | None = None) -> None:
        """Drop input `input_idx` and everything that depends on it."""
        var = self.inputs[input_idx]
        for client, i in list(self.clients[var]):
            if client == "output":
                if i < len(self.outputs) and self.outputs[i] is var:
                    self.remove_output(i, reason=reason)
            elif client in self.apply_nodes:
                self.remove_node(client, reason=reason)
        del self.inputs[input_idx]
        self._input_set.discard(var)
        self.variables.pop(var, None)
        self.clients.pop(var, None)
        self._changed()

    # -- features --------------------------------------------------------------------------
    @property
    def features(self) -> list[Any]:
        return list(self._features)

    def attach_feature(self, feature: Any) -> None:
        """Attach `feature` and call its `on_attach` (a feature raising AlreadyThere is skipped)."""
        from relwrite.graph.features import AlreadyThere

        if feature in self._features:
            return
        on_attach = getattr(feature, "on_attach", None)
        if on_attach is not None:
            try:
                on_attach(self)
            except AlreadyThere:
                return
        self._features.append(feature)
        self._callbacks.clear()
        self._toposort_cache = None

    def remove_feature(self, feature: Any) -> None:
        """Detach `feature` and call its `on_detach`."""
        self._features.remove(feature)
        self._callbacks.clear()
        self._toposort_cache = None
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

    def orderings(self) -> dict[Apply, list[Apply]]:
        """Extra evaluation dependencies the features ask for: node -> nodes that must come first."""
        merged: dict[Apply, list[Apply]] = {}
        for orderings in self.collect_callbacks("orderings").values():
            for node, before in orderings.items():
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

    def __repr__(self) -> str:
        from relwrite.graph.printing import graph_repr

        return f"FunctionGraph({graph_repr(self.outputs)})"


def _client_key(client: Client) -> tuple[int, int]:
    node, index = client
    return (0 if node == "output" else id(node), index)

"""The NumPy linker: turns a FunctionGraph into a flat program run over a list of slots.

Everything about the graph is worked out once, when linking: the call order,
one storage slot per variable, each step's input and output slots, the slots
to clear after their last use, and which steps may write their result into
the buffer of an input that dies there.  A call then only moves arrays between
slots and calls the precomputed implementations: no graph walk, no dict lookup.
Which implementation runs each node is `NumpyLinker.implementations`; the C
linker overrides only that (and checks its kernels' inputs), sharing the rest.

Buffer reuse needs the graph's permission: a `DestroyHandler` mark (see
`relwrite.graph.destroy`; a graph without one runs nothing in place).  It
is then decided statically from alias groups: a view op's output
(`Impl.view`: DimShuffle, Reshape, Identity) shares its input's group.  A step
that can take `out=` writes into an input when that input was freshly
allocated by an earlier step (not a graph input, a constant or a view), its
group is read by nothing later and holds no graph output, and its dtype is the
output's; its runtime shape is checked unless the static shapes settle it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from relwrite.backends.numpy.impls import EvaluationError, Impl, numpy_impl
from relwrite.backends.numpy.program import InputGuard, entry_point, fits
from relwrite.graph.basic import Apply, Constant, Variable
from relwrite.graph.destroy import destroy_handler
from relwrite.graph.fg import FunctionGraph


class Instruction(NamedTuple):
    """One node of the program: call `fn` on `input_slots`, store into `output_slots`.

    `free_slots` are cleared after the step (their last use).  When
    `reuse_slot` is set, the step passes that input's buffer as `out=`;
    `check_shape` says whether the buffer's shape must be checked first.
    """

    node: Apply
    fn: Callable[..., Any]
    input_slots: tuple[int, ...]
    output_slots: tuple[int, ...]
    free_slots: tuple[int, ...]
    reuse_slot: int | None
    check_shape: bool


class _AliasGroups:
    """Union-find over slots: slots whose arrays may share memory are in one group."""

    def __init__(self, size: int):
        self.parent = list(range(size))

    def find(self, slot: int) -> int:
        parent = self.parent
        while parent[slot] != slot:
            parent[slot] = parent[parent[slot]]
            slot = parent[slot]
        return slot

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


class _Lifetimes:
    """Static facts about every slot: when it is last read, what memory it may share.

    `last_use[s]` is the last step reading slot `s` (its producer when nothing
    reads it, `never` for outputs and constants); `fresh[s]` says a step
    allocated it (not a view); per group root, `group_end` is the last step
    reading any member and `external` says a graph input or constant is in it.
    """

    def __init__(
        self,
        size: int,
        step_slots: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
        impls: Sequence[Impl],
        kept: Iterable[int],
        outside: set[int],
    ):
        self.never = len(step_slots)
        self.last_use = [-1] * size
        self.fresh = [False] * size
        self.groups = _AliasGroups(size)
        for k, ((ins, outs), impl) in enumerate(zip(step_slots, impls)):
            for s in ins:
                self.last_use[s] = k
            for s in outs:
                self.last_use[s] = max(self.last_use[s], k)
                self.fresh[s] = not impl.view
                if impl.view:
                    for s_in in ins:
                        self.groups.union(s, s_in)
        for s in kept:
            self.last_use[s] = self.never
        self.group_end = [-1] * size
        self.external = [False] * size
        for s in range(size):
            root = self.groups.find(s)
            self.group_end[root] = max(self.group_end[root], self.last_use[s])
            self.external[root] = self.external[root] or s in outside

    def frees_by_step(self) -> dict[int, tuple[int, ...]]:
        """The slots to clear after each step: those whose last use it is."""
        frees: dict[int, list[int]] = {}
        for s, k in enumerate(self.last_use):
            if 0 <= k < self.never:
                frees.setdefault(k, []).append(s)
        return {k: tuple(slots) for k, slots in frees.items()}

    def aliases_outside(self, slot: int) -> bool:
        return self.external[self.groups.find(slot)]

    def reuse(
        self, k: int, node: Apply, impl: Impl, ins: tuple[int, ...], allowed: int | None
    ) -> tuple[int | None, bool]:
        """The input slot step `k` may write its output into (only input `allowed`, the graph's
        in-place mark), and whether its shape needs checking."""
        if len(node.outputs) != 1 or allowed not in impl.inplace_inputs:
            return None, False
        out = node.outputs[0]
        for position in (allowed,):
            s = ins[position]
            root = self.groups.find(s)
            var = node.inputs[position]
            if (
                not self.fresh[s]
                or self.external[root]
                or self.group_end[root] != k
                or var.dtype != out.dtype
            ):
                continue
            # Every input sharing the buffer must sit where the implementation may overwrite it.
            if any(self.groups.find(t) == root and p not in impl.inplace_inputs for p, t in enumerate(ins)):
                continue
            settled = (
                impl.keeps_shape
                or len(ins) == 1
                or (None not in var.type.shape and var.type.shape == out.type.shape)
            )
            return s, not settled
        return None, False


class NumpyLinker:
    """A FunctionGraph linked for evaluation with NumPy; call it with one array per input.

    Arrays are taken as given (`function` converts and checks them).  A call
    returns the list of output arrays; outputs that would alias an input or a
    constant are copies.  Each call works in its own storage list (inputs,
    then the template with constants preloaded), so calls are reentrant and
    thread-safe and the linker holds no array between calls.

    Subclasses run other code for some nodes by overriding `implementations`;
    slots, lifetimes, buffer reuse and the call loop stay this class's.
    """

    def __init__(self, fgraph: FunctionGraph):
        self.fgraph = fgraph
        nodes = fgraph.toposort()
        slot_of: dict[Variable, int] = {}
        for var in (*fgraph.inputs, *(v for n in nodes for v in (*n.inputs, *n.outputs)), *fgraph.outputs):
            slot_of.setdefault(var, len(slot_of))
        constants = {s: var.data for var, s in slot_of.items() if isinstance(var, Constant)}
        self.input_slots = tuple(slot_of[v] for v in fgraph.inputs)
        self.output_slots = tuple(slot_of[v] for v in fgraph.outputs)
        impls = self.implementations(nodes)
        step_slots = [
            (tuple(slot_of[v] for v in n.inputs), tuple(slot_of[v] for v in n.outputs)) for n in nodes
        ]

        size = len(slot_of)
        lifetimes = _Lifetimes(
            size,
            step_slots,
            impls,
            kept=(*self.output_slots, *constants),
            outside={*constants, *self.input_slots},
        )
        frees = lifetimes.frees_by_step()
        self.steps: list[Instruction] = []
        handler = destroy_handler(fgraph)
        marks = handler.destroyed if handler is not None else {}
        for k, (node, impl, (ins, outs)) in enumerate(zip(nodes, impls, step_slots)):
            reuse, check = lifetimes.reuse(k, node, impl, ins, marks.get(node))
            self.steps.append(Instruction(node, impl.fn, ins, outs, frees.get(k, ()), reuse, check))

        # A FunctionGraph's inputs are distinct and numbered first: a call's storage is [*arrays, *rest].
        self.constant_slots: dict[int, Any] = constants
        self._rest: list[Any] = [constants.get(s) for s in range(len(self.input_slots), size)]
        self.copied_outputs = tuple(
            i for i, s in enumerate(self.output_slots) if lifetimes.aliases_outside(s)
        )
        self._outputs = _gatherer(self.output_slots)
        self._link_steps()

    def _link_steps(self) -> None:
        """The loop's program from `steps`; generated entry points are rebuilt on demand."""
        self._entries: dict[tuple, Callable[..., Any]] = {}
        self._program = tuple(
            (
                step.fn,
                step.input_slots[0] if len(step.input_slots) == 1 else -1,
                _gatherer(step.input_slots),
                step.output_slots[0] if len(step.output_slots) == 1 else -1,
                step.output_slots,
                step.free_slots,
                -1 if step.reuse_slot is None else step.reuse_slot,
                step.check_shape,
                step.node,
                step.input_slots,
            )
            for step in self.steps
        )

    def entry(self, guards: Sequence[InputGuard | None], single: bool) -> Callable[..., Any]:
        """The program as one function of the arguments (see `relwrite.backends.numpy.program`),
        checking each argument that has a guard; built once per kind of guards and kept."""
        key = (tuple(None if g is None else g.key() for g in guards), single)
        found = self._entries.get(key)
        if found is None:
            found = self._entries[key] = entry_point(self, guards, single)
        return found

    def time_nodes(self, times: dict[Apply, float], calls: dict[Apply, int] | None = None) -> None:
        """From now on, add each node's run time to `times[node]` and count its runs in `calls[node]`
        (profiling; it costs two clock reads per run)."""
        counts: dict[Apply, int] = {} if calls is None else calls

        def timed(fn: Callable[..., Any], node: Apply) -> Callable[..., Any]:
            times.setdefault(node, 0.0)
            counts.setdefault(node, 0)

            def run(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    times[node] += time.perf_counter() - start
                    counts[node] += 1

            return run

        self.steps = [step._replace(fn=timed(step.fn, step.node)) for step in self.steps]
        self._link_steps()

    def implementations(self, nodes: Sequence[Apply]) -> list[Impl]:
        """One implementation per node (in order): NumPy's; nodes with the same op and types share one."""
        shared: dict[tuple, Impl] = {}
        impls = []
        for node in nodes:
            key = (node.op, tuple(v.type for v in node.inputs), tuple(v.type for v in node.outputs))
            impl = shared.get(key)
            if impl is None:
                impl = shared[key] = numpy_impl(node.op, node)
            impls.append(impl)
        return impls

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self._run(arrays)

    def _run(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The program run on `arrays` in fresh storage; the outputs, those aliasing inputs copied."""
        if len(arrays) != len(self.input_slots):
            raise TypeError(f"expected {len(self.input_slots)} input array(s), got {len(arrays)}")
        storage = [*arrays, *self._rest]
        node, ins = None, ()
        try:
            # `node` and `ins` are read by the error handler below, which names the failing node.
            for fn, single, gather, out, outs, frees, reuse, check, node, ins in self._program:  # noqa: B007
                if reuse < 0 and single >= 0:
                    result = fn(storage[single])
                else:
                    args = gather(storage)
                    if reuse < 0 or (check and not fits(storage[reuse], args)):
                        result = fn(*args)
                    else:
                        result = fn(*args, out=storage[reuse])
                if out >= 0:
                    storage[out] = result
                else:
                    for s, value in zip(outs, result):
                        storage[s] = value
                for s in frees:
                    storage[s] = None
        except Exception as exc:
            raise EvaluationError(node, [storage[i] for i in ins], exc) from exc
        results = list(self._outputs(storage))
        for i in self.copied_outputs:
            results[i] = np.array(results[i], copy=True)
        return results


def _gatherer(slots: tuple[int, ...]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """A function taking the values at `slots` out of a storage list, as a tuple (C speed for 2 or more)."""
    if len(slots) >= 2:
        return itemgetter(*slots)
    if len(slots) == 1:
        (slot,) = slots
        return lambda storage: (storage[slot],)
    return lambda storage: ()

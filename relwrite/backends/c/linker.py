"""The C linker: a FunctionGraph run with compiled kernels where they pay, NumPy everywhere else.

`CLinker(fgraph)` is called like `NumpyLinker`: one array per input, a list
of output arrays back.  When linking, each `Composite` with a C form gets a
loop, all of them in one module for the graph (compiled once, then loaded
from the disk cache); BLAS nodes (`Dot22`, `Gemm`, `Gemv`, `Ger`) call the
shared BLAS module's kernels.  Other nodes, and statically 0-d composites
too small to pay for a foreign call, keep their NumPy implementation.  A
kernel that meets a case it leaves to numpy (unusual broadcasting, sizes
beyond the BLAS integer) runs the node's NumPy implementation for that call.

When no compiler works (none found, failing, or slower than the compile
timeout), or ``RELWRITE_NO_C=1`` is set, the linker runs the whole graph with
the NumPy implementations and warns once per process; a module that fails to
build leaves its nodes to NumPy with one warning.  Modules come from the disk
cache only after their bytes are verified (see `relwrite.backends.c.compiler`).
Kernels run without the GIL (ctypes releases it), so threads calling linked
functions run in parallel; BLAS threads are those of numpy's OpenBLAS,
limited with `threadpoolctl.threadpool_limits(n, user_api="blas")`.

`CLinker` is a `NumpyLinker` that chooses other implementations for some
nodes: slots, lifetimes, buffer reuse and the call loop are the NumPy linker's.
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import numpy as np

from relwrite.backends.c.blas import BLAS_FUNCTIONS, find_blas
from relwrite.backends.c.codegen import (
    BLAS_ARITY,
    BLAS_PREFIX,
    GENERATOR_VERSION,
    ArrayLayout,
    Kernel,
    Unsupported,
    blas_kernel_name,
    blas_source,
    composite_kernel,
    kernels_source,
    ndarray_layout,
    reduction_kernel,
    runtime_source,
)
from relwrite.backends.c.compiler import (
    CFallbackWarning,
    CompileError,
    CompilerUnavailableError,
    CompileTimeoutError,
    ModuleCache,
    default_cache,
    find_toolchain,
    stop_compilers,
)
from relwrite.backends.c.fused_reductions import (
    deferred_impl,
    fused_reduction_impl,
    kernel_function,
    loop_composite,
    reductions_of_loops,
    scalar_inputs,
)
from relwrite.backends.c.reductions import REDUCTION_OPS, reduction_impl, reductions_source
from relwrite.backends.numpy.impls import Impl
from relwrite.backends.numpy.linker import NumpyLinker
from relwrite.backends.numpy.program import InputGuard
from relwrite.graph import ops
from relwrite.graph.basic import Apply
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.types import fits

_STATUS_MEMORY = -2
_STATUS_REFERENCE = 1


_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, CFallbackWarning, stacklevel=4)


_LOAD_ERRORS = (CompileError, CompilerUnavailableError, OSError)


def _warn_failed_build(key: str, message: str, error: BaseException) -> None:
    """Warn once per `key` that a module failed to build (`message`: what runs with NumPy instead), but
    once in all for a compiler timeout: the compiler is not run again, so every later build fails alike."""
    _warn_once("compile-timeout" if isinstance(error, CompileTimeoutError) else key, f"{message}: {error}")


@dataclass(frozen=True)
class _Runtime:
    """The process's C runtime: the module cache, the ndarray layout and the driver's address.

    `cache` is None when C cannot be used here; `reason` says why.
    """

    cache: ModuleCache | None
    layout: ArrayLayout | None
    driver: int
    reason: str


def _function(module: ctypes.CDLL, name: str, n_args: int) -> Callable[..., int]:
    """The module's `int name(PyObject *...)`, called without the GIL (CFUNCTYPE, not PYFUNCTYPE)."""
    return ctypes.CFUNCTYPE(ctypes.c_int, *([ctypes.py_object] * n_args))((name, module))


@cache
def _runtime() -> _Runtime:
    """Compile (once, then from the cache) and load the runtime module, probing that the chain works.

    The other graph-independent modules (BLAS, reductions) build in a thread
    at the same time, and are ready when this returns: a first compile pays
    for the slowest of them, not their sum.
    """
    try:
        module_cache = default_cache()
        try:
            layout = ndarray_layout()
        except RuntimeError as exc:
            raise CompilerUnavailableError(str(exc)) from None
        others = threading.Thread(
            target=_build_quietly,
            args=(module_cache, _machine_modules(module_cache, layout)),
            name="relwrite-prebuild",
        )
        others.start()
        try:
            module = module_cache.load(runtime_source(layout), (GENERATOR_VERSION,))
        except BaseException as exc:
            if not isinstance(exc, Exception):  # an interrupt: the thread's builds stop too
                stop_compilers()
            raise
        finally:
            others.join()  # no build outlives the first compile (nor writes into a cache being removed)
        if _function(module, "rw_probe", 1)(np.empty((2, 3))) != 2003:
            raise CompilerUnavailableError("a compiled probe misread an ndarray")
        driver = ctypes.cast(module.rw_elemwise, ctypes.c_void_p).value
    except (*_LOAD_ERRORS, AttributeError) as exc:  # AttributeError: a symbol missing from the module
        return _Runtime(None, None, 0, str(exc))
    return _Runtime(module_cache, layout, driver, "")


def _blas_build(layout: ArrayLayout) -> tuple[str, tuple[str, ...]] | None:
    """The BLAS module's source and cache key parts for this process's CBLAS (None: no CBLAS)."""
    blas = find_blas()
    if blas is None:
        return None
    return blas_source(layout, blas.int_bits), (GENERATOR_VERSION, f"blas-int{blas.int_bits}")


def _reductions_build(module_cache: ModuleCache) -> tuple[str, tuple[str, ...]]:
    """The reductions module's source and cache key parts."""
    return reductions_source(), (GENERATOR_VERSION, "reductions")


def _machine_modules(module_cache: ModuleCache, layout: ArrayLayout) -> list[tuple[str, tuple[str, ...]]]:
    """The graph-independent modules besides the runtime: built once per machine."""
    builds = [_blas_build(layout), _reductions_build(module_cache)]
    return [build for build in builds if build is not None]


def _build_quietly(module_cache: ModuleCache, builds: list[tuple[str, tuple[str, ...]]]) -> None:
    """Build modules ahead of need, one thread each; failures are left for the use to report."""

    def build(source: str, extra_key: tuple[str, ...]) -> None:
        with suppress(*_LOAD_ERRORS):
            module_cache.load(source, extra_key)

    threads = [threading.Thread(target=build, args=b, name="relwrite-prebuild") for b in builds[1:]]
    for thread in threads:
        thread.start()
    if builds:
        build(*builds[0])
    for thread in threads:
        thread.join()


@cache
def _blas_module() -> ctypes.CDLL | None:
    """The BLAS module, pointed at the process's CBLAS; None (after one warning) when either is missing."""
    runtime = _runtime()
    build = _blas_build(runtime.layout)
    if build is None:
        _warn_once(
            "no-blas",
            "relwrite: no CBLAS found (numpy's OpenBLAS or scipy-openblas32); BLAS ops run with NumPy",
        )
        return None
    try:
        module = runtime.cache.load(*build)
    except _LOAD_ERRORS as exc:
        _warn_failed_build("blas-module", "relwrite: the BLAS module failed, BLAS ops run with NumPy", exc)
        return None
    module.rw_set_blas((ctypes.c_void_p * len(BLAS_FUNCTIONS))(*find_blas().addresses))
    return module


@cache
def _reductions_module() -> ctypes.CDLL | None:
    """The reductions and softmax module (graph-independent: built once per machine); None if it fails."""
    runtime = _runtime()
    try:
        return runtime.cache.load(*_reductions_build(runtime.cache))
    except _LOAD_ERRORS as exc:
        _warn_failed_build(
            "reductions-module", "relwrite: the reductions module failed, they run with NumPy", exc
        )
        return None


def prebuild() -> bool:
    """Build (or load from the disk cache) every graph-independent module now, at once; whether C works here.

    A first `function` call does this itself; call it ahead (at start-up, or
    once per machine in a set-up script) so that compiles pay only for
    their own kernels.
    """
    if not c_available():
        return False
    _blas_module()
    _reductions_module()
    return True


def _forced_off() -> bool:
    return os.environ.get("RELWRITE_NO_C", "") not in ("", "0")


def c_available() -> bool:
    """Whether the C backend can compile and load modules here (False when RELWRITE_NO_C=1)."""
    return not _forced_off() and _runtime().cache is not None


# -- node implementations around kernels ------------------------------------------------------------


def _failure(status: int, reference: Callable[..., Any], arrays: Sequence[np.ndarray]) -> Any:
    """What a non-zero kernel status means: run the NumPy implementation, or out of memory."""
    if status == _STATUS_REFERENCE:
        return reference(*arrays)
    if status == _STATUS_MEMORY:
        raise MemoryError("a compiled kernel could not allocate its scratch memory")
    raise RuntimeError(f"a compiled kernel returned the unknown status {status}")


def _broadcast_shape(node: Apply) -> Callable[[Sequence[np.ndarray]], tuple[int, ...] | None]:
    """The loop's shape from the inputs' runtime shapes (inputs typed 0-d cannot change it), or None
    where they do not broadcast together: outputs that read only some inputs may still be computed
    op by op (or NumPy names the node that fails)."""
    shaped = tuple(i for i, v in enumerate(node.inputs) if v.ndim > 0)
    if not shaped:
        return lambda arrays: ()
    first, rest = shaped[0], shaped[1:]
    if not rest:
        return lambda arrays: arrays[first].shape

    def shape(arrays: Sequence[np.ndarray]) -> tuple[int, ...] | None:
        result = arrays[first].shape
        for i in rest:
            if arrays[i].shape != result:
                try:
                    return np.broadcast_shapes(*(a.shape for a in arrays))
                except ValueError:
                    return None
        return result

    return shape


def _narrow_outputs(node: Apply) -> tuple[tuple[int, ...], ...]:
    """For each output that may be narrower than the loop's full shape, the inputs it depends on.

    The kernel writes every output at the broadcast shape of all inputs; an
    output typed with the shape of fewer inputs (`Composite.output_inputs`)
    is right only where those already broadcast to the full shape, which
    static shapes prove when every input it skips is 0-d or fits its shape.
    """
    narrow = []
    for out, read in zip(node.outputs, node.op.output_inputs):
        skipped = [v for i, v in enumerate(node.inputs) if i not in read]
        if not all(fits(v.type.shape, out.type.shape) for v in skipped):
            narrow.append(read)
    return tuple(narrow)


def _composite_impl(node: Apply, kernel: Callable[..., int], reference: Impl) -> Impl:
    shape_of, ref, empty = _broadcast_shape(node), reference.fn, np.empty
    dtypes = tuple(np.dtype(v.dtype) for v in node.outputs)
    narrow = _narrow_outputs(node)
    if narrow:  # checked at run time: where an output is narrower than the loop, NumPy runs the group

        def run_checked(*arrays: np.ndarray) -> Any:
            shape = shape_of(arrays)
            if shape is None:
                return ref(*arrays)
            for read in narrow:
                if np.broadcast_shapes(*(arrays[i].shape for i in read)) != shape:
                    return ref(*arrays)
            outs = [empty(shape, dtype) for dtype in dtypes]
            status = kernel(*outs, *arrays)
            if status != 0:
                return _failure(status, ref, arrays)
            return outs[0] if len(outs) == 1 else tuple(outs)

        return Impl(run_checked)
    if len(dtypes) == 1:
        (dtype,) = dtypes

        def run(*arrays: np.ndarray) -> np.ndarray:
            shape = shape_of(arrays)
            if shape is None:
                return ref(*arrays)
            out = empty(shape, dtype)
            status = kernel(out, *arrays)
            return out if status == 0 else _failure(status, ref, arrays)

    else:

        def run(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
            shape = shape_of(arrays)
            if shape is None:
                return ref(*arrays)
            outs = [empty(shape, dtype) for dtype in dtypes]
            status = kernel(*outs, *arrays)
            return tuple(outs) if status == 0 else _failure(status, ref, arrays)

    return Impl(run)


_BLAS_OUTPUT_SHAPES: dict[type, Callable[[Sequence[np.ndarray]], tuple[int, ...]]] = {
    ops.Dot22: lambda a: (a[0].shape[0], a[1].shape[1]),
    ops.Gemm: lambda a: (a[2].shape[0], a[3].shape[1]),
    ops.Gemv: lambda a: (a[2].shape[0],),
    ops.Ger: lambda a: (a[2].shape[0], a[3].shape[0]),
}


def _blas_impl(node: Apply, kernel: Callable[..., int], reference: Impl) -> Impl:
    shape_of, ref, empty = _BLAS_OUTPUT_SHAPES[type(node.op)], reference.fn, np.empty
    dtype = np.dtype(node.outputs[0].dtype)

    def run(*arrays: np.ndarray) -> np.ndarray:
        try:
            out = empty(shape_of(arrays), dtype)
        except IndexError:  # inputs of the wrong rank: numpy's error, or numpy's result
            return ref(*arrays)
        status = kernel(out, *arrays)
        return out if status == 0 else _failure(status, ref, arrays)

    return Impl(run)


# -- the linker ---------------------------------------------------------------------------------------


_LoopKey = tuple[ops.Composite, tuple[bool, ...]]  # a loop and which of its inputs are scalars


def _graph_kernels(
    nodes: Sequence[Apply], fusable: dict[int, int]
) -> tuple[dict[_LoopKey, Kernel], list[int], dict[_LoopKey, Kernel], dict[int, _LoopKey]]:
    """The kernels of a graph's own module: one per Composite op with a C form and pattern of 0-d inputs
    (and the positions of the nodes running them), one per loop summed as it is computed among
    `fusable` (and, by the reduction's position, which one it runs)."""
    kernels: dict[_LoopKey, Kernel] = {}
    chosen: list[int] = []
    for index, node in enumerate(nodes):
        op = node.op
        if not isinstance(op, ops.Composite):
            continue
        key = (op, scalar_inputs(node))
        if key not in kernels:
            try:
                kernels[key] = composite_kernel(op, f"rw_k{len(kernels)}", key[1])
            except Unsupported:
                continue
        chosen.append(index)
    summing: dict[_LoopKey, Kernel] = {}
    fused: dict[int, _LoopKey] = {}
    for r, c in fusable.items():
        key = (loop_composite(nodes[c]), scalar_inputs(nodes[c]))
        if key not in summing:
            try:
                summing[key] = reduction_kernel(key[0], key[1], f"rw_s{len(summing)}")
            except Unsupported:
                continue
        fused[r] = key
    return kernels, chosen, summing, fused


def _blas_nodes_in(nodes: Sequence[Apply]) -> list[tuple[int, str]]:
    """(position, kernel name) of the nodes the BLAS module runs."""
    return [
        (index, blas_kernel_name(type(node.op), node.outputs[0].dtype))
        for index, node in enumerate(nodes)
        if type(node.op) in BLAS_ARITY and node.outputs[0].dtype in BLAS_PREFIX
    ]


def generated_sources(fgraph: FunctionGraph) -> dict[str, str]:
    """The C source of every module a `CLinker` of `fgraph` runs, by module, generated without compiling.

    "graph": the graph's own kernels (its fused loops and the sums computed
    with them); "runtime": the driver its loops run under; "reductions" and
    "BLAS": the shared modules, where nodes run their kernels (a kernel may
    still leave a call's inputs to NumPy).  Empty when nothing runs C.
    Raises RuntimeError where numpy's ndarray layout is not the one the C
    backend reads (it then runs nothing compiled).
    """
    nodes = fgraph.toposort()
    kernels, _, summing, _ = _graph_kernels(nodes, reductions_of_loops(fgraph, nodes))
    sources: dict[str, str] = {}
    if kernels or summing:
        vector_math: frozenset[str] = frozenset()
        with suppress(*_LOAD_ERRORS):  # without a compiler: the source without libmvec's declarations
            vector_math = find_toolchain().vector_math
        sources["graph"] = kernels_source([*kernels.values(), *summing.values()], vector_math)
        sources["runtime"] = runtime_source(ndarray_layout())
    if any(isinstance(node.op, REDUCTION_OPS) for node in nodes):  # a fused sum's fallback runs it too
        sources["reductions"] = reductions_source()
    build = _blas_build(ndarray_layout()) if _blas_nodes_in(nodes) else None
    if build is not None:
        sources["BLAS"] = build[0]
    return sources


class CLinker(NumpyLinker):
    """A FunctionGraph linked with C kernels where available; call it with one array per input.

    Inputs that feed a compiled kernel must be ndarrays of the input's dtype
    (`function` converts and checks values; a wrong one here is a TypeError,
    never a bad memory read).  A call returns the list of output arrays;
    outputs that would alias an input or a constant are copies.  Calls are
    reentrant and thread-safe, and kernels run without the GIL.

    `c_nodes` lists the nodes that run compiled code.  `cache` picks the module
    cache (default: the process's, in ``$RELWRITE_CACHE_DIR``).
    """

    def __init__(self, fgraph: FunctionGraph, cache: ModuleCache | None = None):
        self._cache = cache
        super().__init__(fgraph)
        fed = {v for node in self.c_nodes for v in node.inputs}
        self._c_inputs = tuple(
            (position, np.dtype(var.dtype)) for position, var in enumerate(fgraph.inputs) if var in fed
        )

    def implementations(self, nodes: Sequence[Apply]) -> list[Impl]:
        """Compiled kernels for Composites and BLAS nodes that have one, NumPy's elsewhere; sets `c_nodes`."""
        impls = super().implementations(nodes)
        compiled = self._compile(nodes, impls, self._cache)
        for index, impl in compiled.items():
            impls[index] = impl
        self.c_nodes: tuple[Apply, ...] = tuple(nodes[i] for i in sorted(compiled))
        return impls

    def _compile(
        self, nodes: Sequence[Apply], impls: Sequence[Impl], cache: ModuleCache | None
    ) -> dict[int, Impl]:
        """Implementations of the nodes that run compiled code (by position), around their NumPy ones."""
        if _forced_off():
            _warn_once("unavailable", "relwrite: RELWRITE_NO_C is set; graphs run with the NumPy backend")
            return {}
        runtime = _runtime()
        if runtime.cache is None:
            _warn_once(
                "unavailable",
                f"relwrite: the C backend is unavailable ({runtime.reason}); "
                "graphs run with the NumPy backend",
            )
            return {}
        compiled = self._blas_nodes(nodes, impls)
        compiled.update(self._reduction_nodes(nodes, impls))
        fusable = reductions_of_loops(self.fgraph, nodes)
        composites, fused = self._composite_nodes(
            nodes, impls, cache or runtime.cache, runtime.driver, fusable
        )
        compiled.update(composites)
        for r, kernel in fused.items():  # a reduction of a loop's values: one kernel for both
            c = fusable[r]
            loop, reduction = compiled.get(c, impls[c]), compiled.get(r, impls[r])
            compiled[r] = fused_reduction_impl(nodes[r], nodes[c], kernel, loop, reduction)
            compiled[c] = deferred_impl()
        return compiled

    @staticmethod
    def _reduction_nodes(nodes: Sequence[Apply], impls: Sequence[Impl]) -> dict[int, Impl]:
        chosen = [i for i, node in enumerate(nodes) if isinstance(node.op, REDUCTION_OPS)]
        module = _reductions_module() if chosen else None
        if module is None:
            return {}
        found = {i: reduction_impl(module, nodes[i], impls[i]) for i in chosen}
        return {i: impl for i, impl in found.items() if impl is not None}

    @staticmethod
    def _blas_nodes(nodes: Sequence[Apply], impls: Sequence[Impl]) -> dict[int, Impl]:
        chosen = _blas_nodes_in(nodes)
        module = _blas_module() if chosen else None
        if module is None:
            return {}
        functions = {
            name: _function(module, name, BLAS_ARITY[type(nodes[index].op)]) for index, name in chosen
        }
        return {index: _blas_impl(nodes[index], functions[name], impls[index]) for index, name in chosen}

    @staticmethod
    def _composite_nodes(
        nodes: Sequence[Apply],
        impls: Sequence[Impl],
        cache: ModuleCache,
        driver: int,
        fusable: dict[int, int],
    ) -> tuple[dict[int, Impl], dict[int, Callable[..., int]]]:
        """The Composites' implementations by position, and the fused kernels of the `fusable`
        reductions of their values (by the reduction's position), from one compiled module."""
        kernels, chosen, summing, fused = _graph_kernels(nodes, fusable)
        if not chosen and not fused:
            return {}, {}
        source = kernels_source([*kernels.values(), *summing.values()], cache.toolchain.vector_math)
        try:
            module = cache.load(source, (GENERATOR_VERSION,))
        except _LOAD_ERRORS as exc:
            _warn_failed_build(
                cache.key(source, (GENERATOR_VERSION,)),
                "relwrite: compiling a C module failed, its loops run with the NumPy backend",
                exc,
            )
            return {}, {}
        module.rw_set_driver(ctypes.c_void_p(driver))
        functions = {key: _function(module, k.name, k.n_args) for key, k in kernels.items()}
        composites = {
            i: _composite_impl(nodes[i], functions[nodes[i].op, scalar_inputs(nodes[i])], impls[i])
            for i in chosen
        }
        sums = {key: kernel_function(module, k.name, len(key[1])) for key, k in summing.items()}
        return composites, {r: sums[key] for r, key in fused.items()}

    def _kernel_input(self, position: int, value: Any) -> np.ndarray:
        """`value` for input `position` (it feeds a kernel) as an ndarray of its dtype, or a TypeError."""
        dtype = self.fgraph.inputs[position].type.numpy_dtype
        if not isinstance(value, np.ndarray) or value.dtype != dtype:
            var = self.fgraph.inputs[position]
            got = f"{value.dtype} array" if isinstance(value, np.ndarray) else type(value).__name__
            raise TypeError(f"CLinker: input {position} ({var}) must be a {dtype} ndarray, got a {got}")
        return np.asarray(value)

    def entry(self, guards: Sequence[InputGuard | None], single: bool) -> Callable[..., Any]:
        """The NumPy linker's entry point, with the inputs that feed kernels checked where `guards`
        leaves them unchecked (`trust_input`): a wrong value is a TypeError, never a bad memory read."""
        guards = list(guards)
        for position, dtype in self._c_inputs:
            if guards[position] is None:
                guards[position] = InputGuard(dtype, partial(self._kernel_input, position))
        return super().entry(guards, single)

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        if len(arrays) == len(self.input_slots):  # a wrong count is the NumPy linker's error
            for position, dtype in self._c_inputs:
                value = arrays[position]
                if type(value) is not np.ndarray or value.dtype is not dtype:
                    arrays = list(arrays)
                    for checked, _ in self._c_inputs:
                        arrays[checked] = self._kernel_input(checked, arrays[checked])
                    break
        return self._run(arrays)

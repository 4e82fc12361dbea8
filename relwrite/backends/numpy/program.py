"""A linked program as one generated Python function: the call's argument checks inline, then one line
per step.

Run through the linker's loop, a call pays for bookkeeping besides the steps
themselves: a storage list, a loop unpacking one tuple per step, each
argument check a separate call (about 1.5 us for a scalar add, six times
NumPy's own add).  The generated function does the same work in local
variables: `s3 = f2(s0, s1)` per step, `s0 = None` after a slot's last use,
a failing step named from its index `k`.  Compiling costs about 20 us per
step, paid once per program text (programs of one shape share their code),
so a program longer than `STRAIGHT_LINE_STEPS` keeps the linker's loop after
the same inline checks (there the steps' own cost dominates).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from types import CodeType
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from relwrite.backends.numpy.impls import EvaluationError

if TYPE_CHECKING:
    from relwrite.backends.numpy.linker import NumpyLinker

STRAIGHT_LINE_STEPS = 200
"""The longest program run as straight-line code; longer ones run the linker's loop."""


class InputGuard(NamedTuple):
    """The inline check of one argument.

    An ndarray of `dtype` (and of rank `ndim` with the `fixed` (axis, length)
    pairs, when given) passes as it is; a value whose exact type is in
    `exact_types` becomes `np.asarray(value)` (types that convert exactly to
    a 0-d array of `dtype`); anything else goes to `convert`, which returns
    the array or raises an error naming the input.
    """

    dtype: np.dtype
    convert: Callable[[Any], np.ndarray]
    ndim: int | None = None
    fixed: tuple[tuple[int, int], ...] = ()
    exact_types: tuple[type, ...] = ()

    def key(self) -> tuple:
        """What the generated check depends on (`convert` follows from the input it guards)."""
        return (self.dtype, self.ndim, self.fixed, self.exact_types)


def _copy(array: Any) -> np.ndarray:
    return np.array(array, copy=True)


def entry_point(linker: NumpyLinker, guards: Sequence[InputGuard | None], single: bool) -> Callable[..., Any]:
    """`linker`'s program as one function of the arguments, checking those with a guard.

    It returns the single output when `single`, else the list of outputs;
    a wrong number of arguments is a TypeError saying how many it takes.
    """
    count = len(linker.input_slots)
    if len(guards) != count:
        raise ValueError(f"entry_point: {len(guards)} guards for {count} inputs")
    env: dict[str, Any] = {"ndarray": np.ndarray, "asarray": np.asarray, "copy": _copy}
    names = [f"s{slot}" for slot in range(count)]
    lines = [
        "def call(*args):",
        f"    if len(args) != {count}:",
        f"        raise TypeError(f'function takes {count} input(s), got {{len(args)}}')",
    ]
    if count:
        lines.append(f"    {', '.join(names)}, = args")
    for i, guard in enumerate(guards):
        if guard is not None:
            lines += _guard_lines(i, guard, env)
    if len(linker.steps) > STRAIGHT_LINE_STEPS:
        env["run"] = linker._run
        lines.append(f"    outputs = run(({', '.join(names)}{',' if count else ''}))")
        lines.append("    return outputs[0]" if single else "    return outputs")
    else:
        lines += _step_lines(linker, env, single)
    namespace: dict[str, Any] = {}
    exec(_code("\n".join(lines), count), env, namespace)
    return namespace["call"]


@lru_cache(maxsize=1024)
def _code(source: str, count: int) -> CodeType:
    """The compiled `source` of a program: programs of one shape (the same steps over other graphs, as
    a soundness check builds by the thousand) share their code, and differ only in the names it reads."""
    return compile(source, f"<relwrite program of {count} inputs>", "exec")


def _guard_lines(i: int, guard: InputGuard, env: dict[str, Any]) -> list[str]:
    env[f"D{i}"], env[f"G{i}"] = guard.dtype, guard.convert
    name = f"s{i}"
    tests = [f"type({name}) is not ndarray", f"{name}.dtype is not D{i}"]
    if guard.ndim is not None:
        tests.append(f"{name}.ndim != {guard.ndim}")
        tests += [f"{name}.shape[{axis}] != {length}" for axis, length in guard.fixed]
    lines = [f"    if {' or '.join(tests)}:"]
    if guard.exact_types:
        env[f"X{i}"] = guard.exact_types
        lines.append(f"        {name} = asarray({name}) if type({name}) in X{i} else G{i}({name})")
    else:
        lines.append(f"        {name} = G{i}({name})")
    return lines


def _step_lines(linker: NumpyLinker, env: dict[str, Any], single: bool) -> list[str]:
    """The steps as straight-line code, returning the outputs (copies of those aliasing inputs, constants)."""
    constants = linker.constant_slots

    def name(slot: int) -> str:
        if slot in constants:
            env[f"K{slot}"] = constants[slot]
            return f"K{slot}"
        return f"s{slot}"

    steps = linker.steps
    lines = ["    k = -1", "    try:", "        pass"]
    for k, step in enumerate(steps):
        env[f"f{k}"] = step.fn
        args = ", ".join(name(s) for s in step.input_slots)
        targets = ", ".join(name(s) for s in step.output_slots)
        if len(step.output_slots) > 1:
            targets += ","
        call = f"f{k}({args})"
        if step.reuse_slot is not None:
            reused = f"f{k}({args}, out={name(step.reuse_slot)})"
            if step.check_shape:
                env["fits"] = fits
                call = f"{reused} if fits({name(step.reuse_slot)}, ({args},)) else {call}"
            else:
                call = reused
        lines += [f"        k = {k}", f"        {targets} = {call}"]
        lines += [f"        {name(s)} = None" for s in step.free_slots]
    env["fail"] = _failure(steps, name)
    lines += ["    except Exception as exc:", "        raise fail(k, locals(), exc) from exc"]
    copied = set(linker.copied_outputs)
    results = [f"copy({name(s)})" if i in copied else name(s) for i, s in enumerate(linker.output_slots)]
    lines.append(f"    return {results[0]}" if single else f"    return [{', '.join(results)}]")
    return lines


def _failure(steps: Sequence[Any], name: Callable[[int], str]) -> Callable[..., EvaluationError]:
    def fail(k: int, values: dict[str, Any], error: BaseException) -> EvaluationError:
        step = steps[k]
        return EvaluationError(step.node, [values.get(name(s)) for s in step.input_slots], error)

    return fail


def fits(buffer: np.ndarray, arrays: Sequence[np.ndarray]) -> bool:
    """Whether broadcasting `arrays` gives exactly the buffer's shape."""
    shape = buffer.shape
    try:
        return all(a.shape == shape or np.broadcast_shapes(shape, a.shape) == shape for a in arrays)
    except ValueError:  # they do not broadcast at all: the step raises its own error
        return False

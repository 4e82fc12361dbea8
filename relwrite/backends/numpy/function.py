"""`function`: a graph compiled for NumPy evaluation, callable with checked inputs.

No rewriting happens here: the graph is cloned into a FunctionGraph and linked
as it is.  Each argument is converted and checked against its input's type
once per call, with errors that name the input.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from relwrite.backends.numpy.linker import NumpyLinker
from relwrite.backends.numpy.program import InputGuard
from relwrite.graph.basic import Variable
from relwrite.graph.fg import FunctionGraph, MissingInputError
from relwrite.graph.types import TensorType

_MISSING = object()


def _label(var: Variable, position: int) -> str:
    return f"input {position}" if var.name is None else f"input {var.name!r} (position {position})"


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype.name} and shape {value.shape}"
    return f"{type(value).__name__} {reprlib.repr(value)}"


def _converts_exactly(array: np.ndarray, converted: np.ndarray) -> bool:
    back = converted.astype(array.dtype)
    return bool(np.array_equal(back, array, equal_nan=array.dtype.kind == "f"))


def _convert(value: Any, type_: TensorType, label: str) -> np.ndarray:
    """`value` as an array of `type_`, or a TypeError naming the input and what is wrong.

    Arrays and numpy scalars of another dtype are accepted when the cast is
    safe; Python scalars and lists when they convert exactly.
    """
    dtype = type_.numpy_dtype
    problem = f"{label} expects {type_}"
    if isinstance(value, Variable):
        raise TypeError(f"{problem}: got the graph variable {value}; pass a value")
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype != dtype:
            if not np.can_cast(array.dtype, dtype, "safe"):
                raise TypeError(f"{problem}: got {_describe(array)}, which does not cast safely to {dtype}")
            array = array.astype(dtype)
    else:
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{problem}: cannot convert {_describe(value)} to an array ({exc})") from None
        if array.dtype.kind not in "biuf":
            raise TypeError(
                f"{problem}: got {_describe(value)}; values must be bool, integer or float"
                " (and integers must fit in 64 bits)"
            )
        if array.dtype != dtype:
            with np.errstate(all="ignore"):
                converted = array.astype(dtype)
                exact = _converts_exactly(array, converted)
            if not exact:
                raise TypeError(f"{problem}: {_describe(value)} does not convert exactly to {dtype}")
            array = converted
    error = type_.value_error(array)
    if error is not None:
        raise TypeError(f"{problem}: {error}")
    return array


def _input_guard(var: Variable, position: int) -> InputGuard:
    """The check of one input: arrays that already fit pass inline, 0-d inputs also take exact Python
    and numpy scalars inline, anything else is converted (or refused) by `_convert`."""
    type_, label = var.type, _label(var, position)
    dtype = type_.numpy_dtype
    fixed = tuple((axis, length) for axis, length in enumerate(type_.shape) if length is not None)
    exact: tuple[type, ...] = ()
    if type_.ndim == 0:  # a numpy scalar of the input's dtype, and the Python scalar whose dtype it is
        exact = (dtype.type, *(kind for kind in (float, bool) if np.asarray(kind()).dtype == dtype))

    def convert(value: Any) -> np.ndarray:
        return _convert(value, type_, label)

    return InputGuard(dtype, convert, type_.ndim, fixed, exact)


class Function:
    """A linked FunctionGraph, called with one value per input, by position or by input name.

    Returns the list of output arrays, or the single array when built for one
    output.  Every call returns fresh arrays.  `linker` runs the graph (the
    NumPy linker unless another backend's is given); with `trust_input` the
    arguments go to it unchecked (positionally), saving the checks' cost.
    """

    def __init__(
        self,
        fgraph: FunctionGraph,
        single_output: bool = False,
        linker: NumpyLinker | None = None,
        trust_input: bool = False,
    ):
        self.fgraph = fgraph
        self.linker = NumpyLinker(fgraph) if linker is None else linker
        self.single_output = single_output
        self.trust_input = trust_input
        guards = [None if trust_input else _input_guard(v, i) for i, v in enumerate(fgraph.inputs)]
        self._call = self.linker.entry(guards, single_output)
        self._labels = tuple(_label(v, i) for i, v in enumerate(fgraph.inputs))
        self._positions: dict[str, list[int]] = {}
        for i, var in enumerate(fgraph.inputs):
            if var.name is not None:
                self._positions.setdefault(var.name, []).append(i)

    def __repr__(self) -> str:
        inputs = ", ".join(str(v) for v in self.fgraph.inputs)
        outputs = len(self.fgraph.outputs)
        return f"<compiled function ({inputs}) -> {outputs} output(s), {type(self.linker).__name__}>"

    def _repr_html_(self) -> str:
        """A notebook shows the compiled graph as a picture (text without Graphviz)."""
        from relwrite.graph.printing import picture_html

        return picture_html(self.fgraph, f"compiled function ({type(self.linker).__name__})")

    def __reduce__(self) -> tuple:
        """Pickle as the compiled graph and the linker's class (by its module path, so loading imports
        the backend that linked it): loading links it again, not rewriting it (the C linker's modules
        come back from the disk cache, without compiling)."""
        return _relinked, (self.fgraph, self.single_output, type(self.linker), self.trust_input)

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray | list[np.ndarray]:
        if kwargs:
            args = self._bind(args, kwargs)
        return self._call(*args)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """One value per input from positional and keyword arguments, as a Python call binds them."""
        count = len(self._labels)
        if len(args) > count:
            raise TypeError(f"function takes {count} input(s), got {len(args)} positional")
        values = [*args, *([_MISSING] * (count - len(args)))]
        for name, value in kwargs.items():
            positions = self._positions.get(name)
            if positions is None:
                raise TypeError(f"function has no input named {name!r}")
            if len(positions) > 1:
                raise TypeError(
                    f"several inputs are named {name!r} (positions {positions}); pass them by position"
                )
            if values[positions[0]] is not _MISSING:
                raise TypeError(f"function got two values for {self._labels[positions[0]]}")
            values[positions[0]] = value
        missing = [self._labels[i] for i, value in enumerate(values) if value is _MISSING]
        if missing:
            raise TypeError(f"function is missing {', '.join(missing)}")
        return values


def numpy_function(inputs: Variable | Sequence[Variable], outputs: Variable | Sequence[Variable]) -> Function:
    """Compile the graph from `inputs` to `outputs` for NumPy evaluation, without rewriting it.

    With a single output variable the call returns one array; with a list of
    outputs it returns a list.  Every variable the outputs depend on must be
    listed in `inputs` or be a constant.
    """
    return Function(*function_graph(inputs, outputs))


def function_graph(
    inputs: Variable | Sequence[Variable], outputs: Variable | Sequence[Variable]
) -> tuple[FunctionGraph, bool]:
    """The FunctionGraph (a copy) a `function` compiles, and whether one output variable was given.

    Raises clear errors for inputs that are not variables or listed twice,
    and for variables the outputs need that are not among the inputs.
    """
    inputs = [inputs] if isinstance(inputs, Variable) else list(inputs)
    for i, var in enumerate(inputs):
        if not isinstance(var, Variable):
            raise TypeError(f"function: input {i} is {var!r}, not a Variable")
        if var in inputs[:i]:
            raise ValueError(
                f"function: {var} is listed twice in inputs (positions {inputs.index(var)} and {i})"
            )
    single = isinstance(outputs, Variable)
    try:
        fgraph = FunctionGraph(inputs, [outputs] if single else list(outputs), clone=True)
    except MissingInputError as exc:
        raise MissingInputError(f"function: {exc}; add it to the inputs") from None
    return fgraph, single


def _relinked(
    fgraph: FunctionGraph, single_output: bool, linker: type[NumpyLinker], trust_input: bool
) -> Function:
    return Function(fgraph, single_output, linker=linker(fgraph), trust_input=trust_input)

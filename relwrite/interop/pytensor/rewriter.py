"""relwrite's rules as a step of PyTensor's pipeline: `RelwriteRewriter` and `relwrite_mode`.

The rewriter converts PyTensor's FunctionGraph (`from_pytensor`), rewrites
it with a query of relwrite's `optdb` (by default fast_run without fusion
and in-place marks, which PyTensor's own later steps do) or replaces each
output by its `best_form` under a cost, converts back over the same
PyTensor inputs and replaces the outputs (`replace_all_validate`).  Ops
relwrite does not know pass through as opaque nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytensor.compile import optdb as pytensor_optdb
from pytensor.compile.mode import Mode, get_mode
from pytensor.graph.fg import FunctionGraph as PtFunctionGraph
from pytensor.graph.rewriting.basic import GraphRewriter

from relwrite.engine.db import rewrite_graph
from relwrite.engine.explore import Limits, best_form
from relwrite.graph.basic import Variable
from relwrite.interop.pytensor.convert import from_pytensor, to_pytensor


class RelwriteRewriter(GraphRewriter):
    """A PyTensor graph rewriter that runs relwrite on the whole graph.

    `include`/`exclude` are tags of relwrite's `optdb` (see
    `relwrite.engine.db.rewrite_graph`); with `cost` ("nodes", "flops",
    "accuracy"...) each output is replaced by its `best_form` under that cost
    within `limits` instead.
    """

    def __init__(
        self,
        include: Iterable[str] = ("fast_run",),
        exclude: Iterable[str] = ("fusion", "inplace"),
        cost: Any = None,
        limits: Limits | None = None,
    ):
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self.cost = cost
        self.limits = limits

    def rewritten(self, outputs: list[Variable]) -> list[Variable]:
        """The relwrite outputs after this rewriter's query or search."""
        if self.cost is None:
            return rewrite_graph(
                outputs, include=self.include, exclude=self.exclude
            )  # in place: a fresh graph
        return [best_form(out, cost=self.cost, limits=self.limits).expr for out in outputs]

    def apply(self, fgraph: PtFunctionGraph) -> None:
        outputs, inputs = from_pytensor(fgraph)
        new = to_pytensor(self.rewritten(outputs), inputs)
        pairs = [(old, out) for old, out in zip(fgraph.outputs, new) if old is not out]
        if pairs:
            fgraph.replace_all_validate(pairs, reason="relwrite")

    def __str__(self) -> str:
        how = f"best_form(cost={self.cost!r})" if self.cost is not None else f"include={list(self.include)}"
        return f"RelwriteRewriter({how})"


_REGISTERED: dict[str, RelwriteRewriter] = {}


def relwrite_mode(
    base: str | Mode = "FAST_RUN",
    rewriter: RelwriteRewriter | None = None,
    name: str = "relwrite",
    position: float = 1.4,
) -> Mode:
    """PyTensor mode `base` including `rewriter` (default: `RelwriteRewriter()`), registered in
    PyTensor's optdb as `name` at `position` (1.4: after PyTensor's canonicalize, before its stabilize).

    A name is registered once; asking for another rewriter under a taken name is a ValueError.
    """
    known = _REGISTERED.get(name)
    if known is None:
        known = rewriter if rewriter is not None else RelwriteRewriter()
        pytensor_optdb.register(name, known, position=position)
        _REGISTERED[name] = known
    elif rewriter is not None and rewriter is not known:
        raise ValueError(
            f"relwrite_mode: {name!r} is registered with {known}; give the new rewriter another name"
        )
    return get_mode(base).including(name)

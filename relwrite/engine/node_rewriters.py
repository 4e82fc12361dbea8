"""Node rewriters: functions of one apply node proposing replacements for its outputs.

`transform(fgraph, node)` returns False (nothing to do), a list with one
replacement per output (None keeps that output), or a dict mapping graph
variables to their replacements.  `tracks()` names the ops (instances or
classes) a rewriter can apply to, so engines only try it where it can match.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from kanren.core import lall
from unification import reify, var
from unification.variable import isvar

from relwrite.graph.basic import Apply, Op, Variable
from relwrite.relations.pattern import Pattern, build_replacement, can_replace, rebuilds, to_graph
from relwrite.relations.registry import derive_tracks

Tracks = Sequence[Op | type] | None


class RewriteError(Exception):
    """A rewriter returned something that is not a valid replacement."""


class NodeRewriter:
    """Base class: override `transform`, and `tracks` when the rewriter only applies to some ops."""

    name: str | None = None

    def tracks(self) -> Tracks:
        """The ops or op classes this rewriter applies to; None means every node."""
        return None

    def transform(self, fgraph: Any, node: Apply) -> bool | list | dict:
        raise NotImplementedError(f"{type(self).__name__} does not define transform")

    def __str__(self) -> str:
        return self.name or type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


class FunctionNodeRewriter(NodeRewriter):
    """A plain function `fn(fgraph, node)` used as a node rewriter."""

    def __init__(self, fn: Callable[[Any, Apply], Any], tracks: Tracks = None, name: str | None = None):
        self.fn = fn
        self._tracks = None if tracks is None else list(tracks)
        self.name = name or getattr(fn, "__name__", None)
        self.__doc__ = fn.__doc__

    def tracks(self) -> Tracks:
        return self._tracks

    def transform(self, fgraph: Any, node: Apply) -> bool | list | dict:
        return self.fn(fgraph, node)


def node_rewriter(tracks: Tracks, name: str | None = None) -> Callable[[Callable], FunctionNodeRewriter]:
    """Decorate `fn(fgraph, node)` into a node rewriter applied to the ops in `tracks` (None: all)."""
    if tracks is not None:
        tracks = list(tracks)
        for t in tracks:
            if not isinstance(t, Op) and not (isinstance(t, type) and issubclass(t, Op)):
                raise TypeError(f"node_rewriter: tracks must hold ops or op classes, got {t!r}")

    def decorate(fn: Callable) -> FunctionNodeRewriter:
        return FunctionNodeRewriter(fn, tracks, name)

    return decorate


class OpSub(NodeRewriter):
    """Replace every application of `op1` by `op2` on the same inputs."""

    def __init__(self, op1: Op, op2: Op):
        self.op1, self.op2 = op1, op2
        self.name = f"{op1} -> {op2}"

    def tracks(self) -> Tracks:
        return [self.op1]

    def transform(self, fgraph: Any, node: Apply) -> bool | list:
        if node.op != self.op1:
            return False
        return self.op2.make_node(*node.inputs).outputs


class OpRemove(NodeRewriter):
    """Remove every application of `op`: output i becomes input i."""

    def __init__(self, op: Op):
        self.op = op
        self.name = f"remove {op}"

    def tracks(self) -> Tracks:
        return [self.op]

    def transform(self, fgraph: Any, node: Apply) -> bool | list:
        if node.op != self.op:
            return False
        if len(node.inputs) != len(node.outputs):
            raise RewriteError(
                f"{self}: {node.op} has {len(node.inputs)} inputs but {len(node.outputs)} outputs"
            )
        return list(node.inputs)


class PatternSub(NodeRewriter):
    """Replace what matches `in_pattern` by `out_pattern` (see relwrite.relations.pattern).

    Unless `allow_multiple_clients`, every intermediate node of a match must
    have a single client, so the rewrite never duplicates work still needed
    elsewhere.
    """

    def __init__(
        self,
        in_pattern: tuple,
        out_pattern: Any,
        allow_multiple_clients: bool = False,
        name: str | None = None,
        tracks: Tracks = None,
    ):
        self.in_pattern = Pattern(in_pattern)
        if self.in_pattern.head is None:
            raise TypeError(
                f"PatternSub: the input pattern must be an application of an op, got {in_pattern!r}"
            )
        self.out_pattern = Pattern(out_pattern, self.in_pattern.names, staged=False)
        self.allow_multiple_clients = allow_multiple_clients
        self._tracks = list(tracks) if tracks else [self.in_pattern.head]
        self.name = name or f"{self.in_pattern.text} -> {self.out_pattern.text}"

    def tracks(self) -> Tracks:
        return self._tracks

    def transform(self, fgraph: Any, node: Apply) -> bool | list:
        if len(node.outputs) != 1:
            return False
        out = node.outputs[0]
        clients = None if self.allow_multiple_clients else getattr(fgraph, "clients", None)
        s = self.in_pattern.match(out, clients=clients)
        if s is None:
            return False
        try:
            new = build_replacement(self.out_pattern, s, like=out)
        except TypeError:
            return False
        if not can_replace(out, new) or _changes_nothing([new], node, fgraph):
            return False
        return [new]


class KanrenRelationSub(NodeRewriter):
    """A kanren relation `relation(lhs, rhs)` used forward as a node rewriter.

    The relation is run with the node's output (its list of outputs for a
    multi-output node) as `lhs` and a fresh variable as `rhs`; answers come
    lazily.  By default the first answer that evaluates to a valid graph
    computing something other than the input's own expression is taken;
    `results_filter(iterator)` may pick another.  `node_filter(node)` may
    veto nodes.  Tracks come from `tracks`, from the relation's own `tracks`
    attribute (catalogue rules have one), or from `derive_tracks`.  At most
    `max_answers` answers are examined per node, so an endless stream of
    unusable answers cannot hang the engine.  A relation object with a
    `forward(term)` method (catalogue rules built by `rule`) supplies its
    answers from that faster matcher instead of a kanren run.
    """

    def __init__(
        self,
        relation: Callable,
        results_filter: Callable[[Iterator[Any]], Any] | None = None,
        node_filter: Callable[[Apply], bool] | None = None,
        tracks: Tracks = None,
        name: str | None = None,
        max_answers: int = 64,
    ):
        if max_answers < 1:
            raise ValueError(f"max_answers must be at least 1, got {max_answers}")
        self.relation = relation
        self.max_answers = max_answers
        self.results_filter = results_filter
        self.node_filter = node_filter
        if tracks is None:
            tracks = getattr(relation, "tracks", None)
        self._tracks = list(tracks) if tracks is not None else derive_tracks(relation)
        self.name = name or getattr(relation, "name", None) or getattr(relation, "__name__", None)

    def tracks(self) -> Tracks:
        return self._tracks

    def answers(self, term: Any) -> Iterator[Any]:
        """The relation's answers for `term`, lazily, reified (at most `max_answers`)."""
        forward = getattr(self.relation, "forward", None)
        if forward is not None:
            return islice(forward(term), self.max_answers)
        q = var()
        return islice((reify(q, state) for state in lall(self.relation(term, q))({})), self.max_answers)

    def transform(self, fgraph: Any, node: Apply) -> bool | list:
        if self.node_filter is not None and not self.node_filter(node):
            return False
        single = len(node.outputs) == 1
        term = node.outputs[0] if single else list(node.outputs)
        answers = (a for a in self.answers(term) if not isvar(a))
        if self.results_filter is not None:
            chosen = self.results_filter(answers)
            if chosen is None or chosen is False:
                return False
            outputs = _as_outputs(chosen, node, single)
            return False if _changes_nothing(outputs, node, fgraph) else outputs
        for answer in answers:
            try:
                outputs = _as_outputs(answer, node, single)
            except (TypeError, ValueError):
                continue
            if not _changes_nothing(outputs, node, fgraph):
                return outputs
        return False


def _changes_nothing(outputs: Sequence[Variable], node: Apply, fgraph: Any) -> bool:
    """Whether every replacement is a freshly built copy of the output it replaces (see `rebuilds`)."""
    existing = getattr(fgraph, "apply_nodes", None)
    return all(rebuilds(new, old, existing) for new, old in zip(outputs, node.outputs))


def _as_outputs(answer: Any, node: Apply, single: bool) -> list[Variable]:
    values = [answer] if single else list(answer)
    if len(values) != len(node.outputs):
        raise ValueError(f"expected {len(node.outputs)} replacements, got {len(values)}")
    outputs = []
    for value, old in zip(values, node.outputs):
        value = to_graph(value, like=old)
        if not can_replace(old, value):
            raise TypeError(f"{value} of type {value.type} cannot replace {old} of type {old.type}")
        outputs.append(value)
    return outputs


def replacement_pairs(rewriter: NodeRewriter, node: Apply, result: Any) -> list[tuple[Variable, Variable]]:
    """Check a transform's result and turn it into (old, new) pairs; RewriteError names the rewriter."""
    if result is False or result is None:
        return []
    if isinstance(result, Mapping):
        items: Iterable = result.items()
    elif isinstance(result, (list, tuple)):
        if len(result) != len(node.outputs):
            raise RewriteError(
                f"rewriter {rewriter} returned {len(result)} replacements "
                f"for the {len(node.outputs)} outputs of {node}"
            )
        items = zip(node.outputs, result)
    else:
        raise RewriteError(f"rewriter {rewriter} returned {result!r}; expected False, a list or a dict")
    pairs = []
    for old, new in items:
        if new is None or new is old:
            continue
        if not isinstance(old, Variable) or not isinstance(new, Variable):
            raise RewriteError(
                f"rewriter {rewriter} proposed replacing {old!r} by {new!r}: not graph variables"
            )
        pairs.append((old, new))
    return pairs

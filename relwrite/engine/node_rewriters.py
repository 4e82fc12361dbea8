"""Node rewriters: functions of one apply node proposing replacements for its outputs.

`transform(fgraph, node)` returns False (nothing to do), a list with one
replacement per output (None keeps that output), or a dict mapping graph
variables to their replacements.  `tracks()` names the ops (instances or
classes) a rewriter can apply to, so engines only try it where it can match.

Relation runs are bounded by a budget of steps and seconds
(`relwrite.relations.budget.relation_budget`), so a goal that spins without
answering, in kanren or in plain Python, is stopped with `BudgetExceeded`
naming the rule instead of hanging the engine.  Answers of a
type that cannot replace the node's output are skipped and reported through
`reject_answer`, which engines turn into one warning per rule.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import islice
from typing import Any

from relwrite.graph.basic import Apply, Op, Variable
from relwrite.graph.terms import remove_identical
from relwrite.relations.budget import (
    DEFAULT_MAX_SECONDS,
    DEFAULT_MAX_STEPS,
    BudgetExceeded,
    Meter,
    check_limits,
    metered,
    relation_budget,
)
from relwrite.relations.pattern import (
    GRAPHS,
    GraphTarget,
    Pattern,
    build_replacement,
    can_replace,
    rebuilds,
    to_graph,
)
from relwrite.relations.predicates import is_logic_variable
from relwrite.relations.registry import Rule, derive_tracks
from relwrite.relations.runtime import answers, direct_answer, forward_plan, plain_values

Tracks = Sequence[Op | type] | None

kanren_budget = relation_budget
"""The name `relation_budget` had while it bounded only kanren streams (kept for code that uses it)."""


class RewriteError(Exception):
    """A rewriter returned something that is not a valid replacement."""


class RewriteWarning(UserWarning):
    """A rewriter raised, answered with the wrong type, ran out of budget, or a run stopped early."""


# -- answers of the wrong type ---------------------------------------------------------------------------


def _type_mismatch(old: Variable, new: Variable) -> str:
    """Why `new` cannot stand for `old`: another dtype, another rank, or a static length lost."""
    want, got = old.type, new.type
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} instead of {want.dtype}"
    if got.ndim != want.ndim:
        return f"rank {got.ndim} instead of {want.ndim}"
    lost = [
        f"{n} on axis {axis}" for axis, (n, m) in enumerate(zip(want.shape, got.shape)) if n not in (None, m)
    ]
    return f"static shape {got.shape} loses the length {', '.join(lost)} of {want.shape}"


class _AnswerTypeError(TypeError):
    """An answer of a type that cannot replace the output it answers for."""


_local = threading.local()


@contextmanager
def collect_rejections() -> Iterator[list[tuple[str, Apply, str]]]:
    """Collect the answers rewriters reject for their type while the block runs: (rewriter, node, why)."""
    stack = getattr(_local, "rejections", None)
    if stack is None:
        stack = _local.rejections = []
    found: list[tuple[str, Apply, str]] = []
    try:
        stack.append(found)
        yield found
    finally:
        remove_identical(stack, found)


def reject_answer(rewriter: Any, node: Apply, why: str) -> None:
    """Report that `rewriter` answered at `node` with a replacement of the wrong type, which was skipped.

    Inside `collect_rejections` (engines run there) the report is collected;
    otherwise it is a RewriteWarning at once.
    """
    stack = getattr(_local, "rejections", None)
    if stack:
        stack[-1].append((str(rewriter), node, why))
    else:
        warnings.warn(f"rule {rewriter} at {node}: {why}; answer skipped", RewriteWarning, stacklevel=3)


class NodeRewriter:
    """Base class: override `transform`, and `tracks` when the rewriter only applies to some ops.

    `screen`, when set, is a necessary condition for `transform` to change a
    node that reads only the node, its inputs and their owners' ops (which
    never change): the engine tests it before an attempt's bookkeeping and
    does not record a screened-out attempt's reads.
    """

    name: str | None = None
    screen: Callable[[Apply], bool] | None = None
    screen_reads_heads: bool = False
    """Whether `screen` reads no more than the node's op and output count and, per operand, a
    constant's value or its owner's op and output count (a pattern's screen): engines may then
    decide it once per such signature (`TracksIndex.for_node`)."""
    operand_screen: Callable[[Apply], bool] | None = None
    """A necessary condition, tested after `screen`, that reads the nodes computing the node's operands
    (their ops, operand counts and operands' heads): engines watch those nodes when it refuses."""
    idempotent: bool = False
    """Whether the nodes this rewriter builds never match it again while their inputs stay (a sorted
    sum is sorted): engines then skip trying it on them."""

    def tracks(self) -> Tracks:
        """The ops or op classes this rewriter applies to; None means every node."""
        return None

    def transform(self, fgraph: Any, node: Apply) -> bool | list | dict:
        raise NotImplementedError(f"{type(self).__name__} does not define transform")

    def _screen_output(self, node: Apply) -> bool:
        """`screen` for rewriters whose test reads a single-output node's output (`_output_screen`)."""
        return len(node.outputs) != 1 or self._output_screen(node.outputs[0])

    def _screen_operands(self, node: Apply) -> bool:
        """`operand_screen` for rewriters whose test reads a single-output node's output."""
        return len(node.outputs) != 1 or self._output_operand_screen(node.outputs[0])

    def __str__(self) -> str:
        return self.name or type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


class FunctionNodeRewriter(NodeRewriter):
    """A plain function `fn(fgraph, node)` used as a node rewriter."""

    def __init__(self, fn: Callable[[Any, Apply], Any], tracks: Tracks = None, name: str | None = None):
        self.fn = fn
        self._tracks = _checked_tracks(type(self).__name__, tracks)
        self.name = name or getattr(fn, "__name__", None)
        self.__doc__ = fn.__doc__

    def tracks(self) -> Tracks:
        return self._tracks

    def transform(self, fgraph: Any, node: Apply) -> bool | list | dict:
        return self.fn(fgraph, node)


def _checked_tracks(caller: str, tracks: Tracks) -> list[Op | type] | None:
    """`tracks` as a list, or None (every node); a clear error when it is not None or a non-empty list of
    ops and op classes (an empty list would track nothing: the rewriter could never run)."""
    if tracks is None:
        return None
    if isinstance(tracks, (Op, type, str)) or not isinstance(tracks, Iterable):
        raise TypeError(f"{caller}: tracks must be None or a list of ops or op classes, got {tracks!r}")
    tracks = list(tracks)
    if not tracks:
        raise ValueError(
            f"{caller}: tracks is an empty list, which matches no node; use None to apply to every node"
        )
    for t in tracks:
        if not isinstance(t, Op) and not (isinstance(t, type) and issubclass(t, Op)):
            raise TypeError(f"{caller}: tracks must hold ops or op classes, got {t!r}")
    return tracks


def node_rewriter(tracks: Tracks, name: str | None = None) -> Callable[[Callable], FunctionNodeRewriter]:
    """Decorate `fn(fgraph, node)` into a node rewriter applied to the ops in `tracks` (None: all).

    `tracks` is checked here, before decorating: it must be None or a non-empty
    list of ops and op classes.
    """
    tracks = _checked_tracks("node_rewriter", tracks)

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
        self.in_pattern = Pattern(in_pattern, commutative=False)
        if self.in_pattern.head is None:
            raise TypeError(
                f"PatternSub: the input pattern must be an application of an op, got {in_pattern!r}"
            )
        self.out_pattern = Pattern(out_pattern, self.in_pattern.names, staged=False, commutative=False)
        self.allow_multiple_clients = allow_multiple_clients
        self._tracks = list(tracks) if tracks else [self.in_pattern.head]
        self._output_screen = self.in_pattern.screen
        self.screen = self._screen_output
        self.screen_reads_heads = True
        if self.in_pattern.screens_operands:
            self._output_operand_screen = self.in_pattern.operand_screen
            self.operand_screen = self._screen_operands
        self.name = name or f"{self.in_pattern.text} -> {self.out_pattern.text}"

    def tracks(self) -> Tracks:
        return self._tracks

    def transform(self, fgraph: Any, node: Apply) -> bool | list:
        if len(node.outputs) != 1:
            return False
        out = node.outputs[0]
        clients = None if self.allow_multiple_clients else getattr(fgraph, "clients", None)
        s = self.in_pattern.match(out, target=GRAPHS if clients is None else GraphTarget(clients))
        if s is None:
            return False
        try:
            new = build_replacement(self.out_pattern, s, like=out)
        except TypeError:
            return False
        if not can_replace(out, new):
            reject_answer(self, node, _cannot_replace(out, new))
            return False
        if _changes_nothing([new], node, fgraph):
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
    attribute (catalogue rules have one), or from `derive_tracks`.  Answers
    come from the rule runtime (`relwrite.relations.runtime.answers`).

    Each run is bounded: at most `max_answers` answers are examined, and the
    run (direct answers included) may take at most `max_steps` steps and
    `max_seconds` seconds (`relation_budget`: on the main thread the clock
    interrupts even a goal looping in plain Python), so neither an endless
    stream of unusable answers nor a goal that spins without answering can
    hang the engine; a run out of steps or time raises BudgetExceeded
    naming the rule.
    An answer whose type cannot replace the output (another dtype or rank,
    or a static length lost) is skipped and reported (`reject_answer`).
    """

    def __init__(
        self,
        relation: Callable,
        results_filter: Callable[[Iterator[Any]], Any] | None = None,
        node_filter: Callable[[Apply], bool] | None = None,
        tracks: Tracks = None,
        name: str | None = None,
        max_answers: int = 64,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_seconds: float = DEFAULT_MAX_SECONDS,
    ):
        if max_answers < 1:
            raise ValueError(f"max_answers must be at least 1, got {max_answers}")
        self.relation = relation
        self._forward_plan: tuple[Any, Callable[[Any], tuple | None] | None, Callable[[Any], Any] | None] = (
            None,
            None,
            None,
        )
        self.max_answers = max_answers
        self.results_filter = results_filter
        self.node_filter = node_filter
        self.name = name or getattr(relation, "name", None) or getattr(relation, "__name__", None)
        check_limits(max_steps, max_seconds)
        self.max_steps, self.max_seconds = max_steps, max_seconds
        if tracks is None:
            tracks = getattr(relation, "tracks", None)
        if tracks is None:
            with relation_budget(f"deriving the tracks of {self}", max_steps, max_seconds):
                tracks = derive_tracks(relation)  # None when the budget runs out
        self._tracks = list(tracks) if tracks is not None else None
        self.idempotent = bool(getattr(relation, "idempotent", False))
        self._output_screen = getattr(relation, "screen", None)
        if self._output_screen is not None:
            self.screen = self._screen_output
            # a Rule's screen reads only heads, by its contract; so does a pattern's
            self.screen_reads_heads = isinstance(relation, Rule) or isinstance(
                getattr(self._output_screen, "__self__", None), Pattern
            )
        self._output_operand_screen = getattr(relation, "operand_screen", None)
        if self._output_operand_screen is not None:
            self.operand_screen = self._screen_operands

    def tracks(self) -> Tracks:
        return self._tracks

    def answers(self, term: Any) -> Iterator[Any]:
        """The relation's answers for `term`, lazily, reified (at most `max_answers`; no budget)."""
        return islice((a.value for a in answers(self.relation, term)), self.max_answers)

    def transform(self, fgraph: Any, node: Apply) -> bool | list:
        if self.node_filter is not None and not self.node_filter(node):
            return False
        term = node.outputs[0] if len(node.outputs) == 1 else list(node.outputs)
        planned, plan, answer = self._forward_plan
        if planned is not self.relation:  # made at the first run, and again if `relation` is reassigned
            # the engine tests `screen` (the relation's) before calling transform
            screened = self.screen is not None
            plan = forward_plan(self.relation, screened=screened, as_graphs=True)
            answer = direct_answer(self.relation, screened=screened)
            self._forward_plan = self.relation, plan, answer
        what = lambda: f"rule {self} at {node}"  # noqa: E731  (the limits were checked at __init__)
        if answer is not None:  # one answer at most, computed by a plain call
            with Meter(what, self.max_steps, self.max_seconds, BudgetExceeded) as meter:
                built = answer(term)
            if meter.error is not None:
                raise meter.fresh_error()
            return False if built is None else self._first_replacement(fgraph, node, (built,))
        with Meter(what, self.max_steps, self.max_seconds, BudgetExceeded) as meter:
            direct = plain_values(plan(term))
            if type(direct) is tuple and not direct:  # refused, or no answer
                return False
            # plain function calls give `direct`; else the kanren stream (charged as it is pulled)
            found = metered(direct) if direct is not None else (a.value for a in answers(self.relation, term))
            result = self._first_replacement(fgraph, node, found)
        if meter.error is not None:  # raised inside the run and swallowed there
            raise meter.fresh_error()
        return result

    def _first_replacement(self, fgraph: Any, node: Apply, found: Iterable[Any]) -> bool | list:
        """The first of the answers' values `found` that replaces `node`'s outputs, or False."""
        single = len(node.outputs) == 1
        answers = (v for v in islice(found, self.max_answers) if not is_logic_variable(v))
        if self.results_filter is not None:
            chosen = self.results_filter(answers)
            if chosen is None or chosen is False:
                return False
            try:
                outputs = _as_outputs(chosen, node, single)
            except _AnswerTypeError as exc:
                reject_answer(self, node, str(exc))
                return False
            return False if _changes_nothing(outputs, node, fgraph) else outputs
        for answer in answers:
            try:
                outputs = _as_outputs(answer, node, single)
            except _AnswerTypeError as exc:
                reject_answer(self, node, str(exc))
                continue
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
    """An answer as one graph variable per output; _AnswerTypeError for a wrong count or type."""
    values = [answer] if single else list(answer)
    if len(values) != len(node.outputs):
        raise _AnswerTypeError(f"{len(values)} replacements for the {len(node.outputs)} outputs")
    outputs = []
    for value, old in zip(values, node.outputs):
        value = to_graph(value, like=old)
        if not can_replace(old, value):
            raise _AnswerTypeError(_cannot_replace(old, value))
        outputs.append(value)
    return outputs


def _cannot_replace(old: Variable, new: Variable) -> str:
    return f"{new} of type {new.type} cannot replace {old} of type {old.type}: {_type_mismatch(old, new)}"


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

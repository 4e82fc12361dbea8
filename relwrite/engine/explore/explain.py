"""Explanations: why two terms of an e-graph are equal, as a chain of rule applications.

Every union the e-graph made links two term nodes in its proof forest
(`EGraph.proof_path`).  An explanation walks that path, as egg's flat
explanations do: a link made by a rule (or by constant folding) is one step
rewriting a subterm of the whole expression; a congruence link (two
applications of one op to equal operands) is explained by explaining its
operands, in place.  Each step names its rule and the direction it was run
in, shows the subterm before and after and the whole expression after, and
carries the rule's assumptions said of the subterms the rule matched
(``y != 0`` for the `y` that `mul_div_cancel` cancelled).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from relwrite.engine.explore.egraph import AC_OPS, CONGRUENCE, FOLDING, Applied, EGraph, Reason
from relwrite.graph.basic import Variable
from relwrite.graph.printing import pprint
from relwrite.relations.operands import canonical_key
from relwrite.relations.registry import Rule

MAX_STEPS = 10_000
"""The most steps an explanation lists (its assumptions always cover the whole proof)."""


@dataclass(frozen=True)
class Step:
    """One rewrite: `rule` run `direction` turned the subterm `before` into `after`.

    `expression` is the whole expression after the step; `assumptions` what
    the rule assumed of the subterms it matched, as text, and `conditions`
    the same as (subterm, comparison, number); `unsafe` whether the rule is
    tagged unsafe (valid only under its assumptions, NaN/Inf aside).
    """

    rule: str
    direction: str
    before: Variable
    after: Variable
    expression: Variable
    assumptions: frozenset[str] = frozenset()
    conditions: tuple[tuple[Variable, str, float], ...] = ()
    unsafe: bool = False

    def to_dict(self) -> dict:
        """The step as plain data (for JSON): rule, direction, the subterm before and after, assumptions."""
        return {
            "rule": self.rule,
            "direction": self.direction,
            "before": pprint(self.before),
            "after": pprint(self.after),
            "expression": pprint(self.expression),
            "assumptions": sorted(self.assumptions),
            "unsafe": self.unsafe,
        }

    def __str__(self) -> str:
        text = f"{self.rule} ({self.direction}): {pprint(self.before)} -> {pprint(self.after)}"
        if self.assumptions:
            text += f"  [assuming {', '.join(sorted(self.assumptions))}]"
        return text


@dataclass(frozen=True)
class Explanation:
    """Why two expressions are equal: the steps from one to the other, and what they assume.

    `assumptions` and `unsafe` cover the whole proof; `complete` is False
    when the steps were cut at `MAX_STEPS`.
    """

    steps: tuple[Step, ...]
    assumptions: frozenset[str]
    unsafe: bool
    rules: tuple[str, ...]
    complete: bool = True

    def __str__(self) -> str:
        lines = [f"{k}. {step}" for k, step in enumerate(self.steps, 1)] or ["equal as they stand (up to AC)"]
        if not self.complete:
            lines.append(f"... (cut at {len(self.steps)} steps)")
        lines.append(f"assumptions: {', '.join(sorted(self.assumptions)) or 'none'}")
        if self.unsafe:
            lines.append("uses unsafe rules: valid where the expressions are finite, under the assumptions")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The explanation as plain data (for JSON)."""
        return {
            "steps": [s.to_dict() for s in self.steps],
            "assumptions": sorted(self.assumptions),
            "unsafe": self.unsafe,
            "rules": list(self.rules),
            "complete": self.complete,
        }

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)


class _Shown:
    """A node of the expression being rewritten: a term node as it is, or an op over shown operands."""

    __slots__ = ("node", "op", "operands")

    def __init__(self, node: int | None, op=None, operands: tuple = ()):
        self.node, self.op, self.operands = node, op, operands


class Explainer:
    """Explanations of equalities in one e-graph (assumption texts are cached per union)."""

    def __init__(self, egraph: EGraph):
        self.egraph = egraph
        self._assumed: dict[int, tuple[frozenset[str], tuple]] = {}
        self._graphs: dict[int, Variable] = {}

    def explain(self, a: int, b: int, max_steps: int = MAX_STEPS) -> Explanation:
        """The steps rewriting term node `a` into term node `b` (ValueError when not known equal)."""
        applied = self._applied(a, b)
        steps = self._steps(a, b, max_steps)
        return Explanation(
            steps=tuple(steps),
            assumptions=frozenset().union(*(self._assumptions(r)[0] for r in applied)),
            unsafe=any("unsafe" in r.rule.tags for r in applied),
            rules=tuple(sorted({r.rule.name for r in applied})),
            complete=len(steps) < max_steps or not self._has_more(a, b, max_steps),
        )

    def _has_more(self, a: int, b: int, max_steps: int) -> bool:
        return len(self._steps(a, b, max_steps + 1)) > max_steps

    # -- the rules a proof uses ------------------------------------------------------------------

    def _applied(self, a: int, b: int) -> list[Applied]:
        """Every rule union the proof of a = b goes through, each once (no flattening)."""
        seen: set[tuple[int, int]] = set()
        found: dict[int, Applied] = {}
        stack = [(a, b)]
        while stack:
            x, y = stack.pop()
            if x == y or (x, y) in seen:
                continue
            seen.add((x, y))
            for p, q, reason in self.egraph.proof_path(x, y):
                if isinstance(reason, Applied):
                    found[id(reason)] = reason
                elif reason == CONGRUENCE:
                    stack.extend(self._operand_pairs(p, q))
        return list(found.values())

    def _operand_pairs(self, x: int, y: int) -> list[tuple[int, int]]:
        """Operands of congruent term nodes x and y, paired (position i of x with an equal operand of y)."""
        egraph = self.egraph
        xs, ys = egraph.exact_children(x), list(egraph.exact_children(y))
        if egraph.op(x) not in AC_OPS:
            return list(zip(xs, ys))
        pairs = []
        for c in xs:
            k = next(j for j, d in enumerate(ys) if d is not None and egraph.find(d) == egraph.find(c))
            pairs.append((c, ys[k]))
            ys[k] = None
        return pairs

    # -- flat steps ------------------------------------------------------------------------------

    def _steps(self, a: int, b: int, max_steps: int) -> list[Step]:
        egraph = self.egraph
        root = _Shown(a)
        steps: list[Step] = []
        tasks: list[tuple] = [("explain", a, b, ())]
        while tasks and len(steps) < max_steps:
            kind, *args = tasks.pop()
            if kind == "set":
                root = self._replace(root, args[0], _Shown(args[1]))
            elif kind == "step":
                p, q, position, reason = args
                root = self._replace(root, position, _Shown(q))
                steps.append(self._step(p, q, reason, self._graph(root)))
            elif args[0] != args[1]:
                x, y, position = args
                for p, q, reason in reversed(egraph.proof_path(x, y)):
                    if reason == CONGRUENCE:
                        tasks.append(("set", position, q))
                        pairs = list(enumerate(self._operand_pairs(p, q)))
                        tasks.extend(("explain", c, d, (*position, i)) for i, (c, d) in reversed(pairs))
                    else:
                        tasks.append(("step", p, q, position, reason))
        return steps

    def _replace(self, root: _Shown, position: tuple[int, ...], new: _Shown) -> _Shown:
        """`root` with the node at `position` (operand indices) replaced by `new`."""
        path = [root]
        for i in position:
            path.append(self._operands(path[-1])[i])
        for parent, i in zip(reversed(path[:-1]), reversed(position)):
            operands = list(self._operands(parent))
            operands[i] = new
            new = _Shown(None, self._op(parent), tuple(operands))
        return new

    def _operands(self, shown: _Shown) -> tuple[_Shown, ...]:
        if shown.node is None:
            return shown.operands
        return tuple(_Shown(c) for c in self.egraph.exact_children(shown.node))

    def _op(self, shown: _Shown):
        return shown.op if shown.node is None else self.egraph.op(shown.node)

    def _graph(self, root: _Shown) -> Variable:
        """The graph of a shown expression (term nodes as their terms), without recursion."""
        built: dict[int, Variable] = {}
        stack = [root]
        while stack:
            shown = stack[-1]
            if id(shown) in built:
                stack.pop()
            elif shown.node is not None:
                built[id(shown)] = self.egraph.term(shown.node)
                stack.pop()
            else:
                missing = [o for o in shown.operands if id(o) not in built]
                if missing:
                    stack.extend(missing)
                    continue
                stack.pop()
                operands = [built[id(o)] for o in shown.operands]
                if shown.op in AC_OPS:
                    operands.sort(key=canonical_key)
                built[id(shown)] = shown.op(*operands)
        return built[id(root)]

    def _step(self, x: int, y: int, reason: Reason, expression: Variable) -> Step:
        egraph = self.egraph
        before, after = egraph.term(x), egraph.term(y)
        if isinstance(reason, Applied):
            forward = reason.source == x
            direction = reason.direction if forward else _other(reason.direction)
            texts, conditions = self._assumptions(reason)
            return Step(
                reason.rule.name,
                direction,
                before,
                after,
                expression,
                texts,
                conditions,
                "unsafe" in reason.rule.tags,
            )
        if reason != FOLDING:
            raise ValueError(f"unknown reason {reason!r} in the proof forest")
        direction = "forward" if egraph.leaf(y) is not None else "backward"
        return Step(FOLDING, direction, before, after, expression)

    def _assumptions(self, reason: Applied) -> tuple[frozenset[str], tuple[tuple[Variable, str, float], ...]]:
        """The rule's assumptions said of the subterms its variables matched: texts and conditions.

        An assumption whose variable the run did not report is stated of the
        rule's whole left side, by name, with no condition.
        """
        found = self._assumed.get(id(reason))
        if found is None:
            rule: Rule = reason.rule
            bound = dict(reason.bindings)
            lhs = reason.source if reason.direction == "forward" else reason.result
            texts, conditions = [], []
            for a in rule.assumptions:
                if a.name in bound:
                    term = self.egraph.term(bound[a.name])
                    texts.append(f"{pprint(term)} {a.op} {a.value:g}")
                    conditions.append((term, a.op, a.value))
                else:
                    texts.append(f"{a} for {rule.name} at {pprint(self.egraph.term(lhs))}")
            found = self._assumed[id(reason)] = (frozenset(texts), tuple(conditions))
        return found


def _other(direction: str) -> str:
    return "backward" if direction == "forward" else "forward"

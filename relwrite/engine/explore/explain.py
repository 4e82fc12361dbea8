"""Explanations: why two terms of an e-graph are equal, as a chain of rule applications.

Every union the e-graph made links two term nodes in its proof forest
(`EGraph.proof_path`).  An explanation is a chain of links, as egg's flat
explanations are: a link made by a rule (or by constant folding) is one step
rewriting a subterm of the whole expression; a congruence link (two
applications of one op to equal operands) is explained by explaining its
operands, in place.  Each step names its rule and the direction it was run
in, shows the subterm before and after and the whole expression after, and
carries the rule's assumptions said of the subterms the rule matched
(``y != 0`` for the `y` that `mul_div_cancel` cancelled).

The forest's own chain can be enormous: explaining the operands of its
congruence links repeats whole detours, thousands of steps for what two
steps show.  So the chain is the shortest one known, in the manner of
Flatt et al., "Small Proofs from Congruence Closure" (2022): a shortest
path among the term nodes of the class over rule links (forest and spare
ones, one step each) and congruences between any two congruent term nodes
(as many steps as the forest's chains between their operands).  A
congruence is used only between operands the forest had proved equal
before the equality being explained, so explaining operands always ends.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count

from relwrite.engine.explore.egraph import AC_OPS, CONGRUENCE, FOLDING, Applied, EGraph, Reason, flip_pairs
from relwrite.graph.basic import Variable
from relwrite.graph.printing import expression_text
from relwrite.relations.operands import canonical_key
from relwrite.relations.registry import Rule

MAX_STEPS = 10_000
MAX_CONGRUENCES = 400
"""Congruent pairs a class's shortest chains may use; past it, only the proof forest's (linear)."""
"""The most steps an explanation lists (its assumptions always cover the whole proof)."""

Link = tuple[int, int, Reason, tuple[tuple[int, int], ...]]
"""A link of a chain: from term node, to term node, why, and for a congruence its operand pairs."""


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
            "before": expression_text(self.before),
            "after": expression_text(self.after),
            "expression": expression_text(self.expression),
            "assumptions": sorted(self.assumptions),
            "unsafe": self.unsafe,
        }

    def __str__(self) -> str:
        before, after = expression_text(self.before), expression_text(self.after)
        text = f"{self.rule} ({self.direction}): {before} -> {after}"
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


@dataclass
class _ClassLinks:
    """The links among the term nodes of one class of `size` term nodes: rule links both ways
    (forest and spare), and congruences (n, m, operand pairs, when the forest proved the last pair)."""

    size: int
    rules: list[tuple[int, int, Reason]]
    congruences: list[tuple[int, int, tuple[tuple[int, int], ...], int]]
    adjacent: dict[int, list[tuple[int, Reason, tuple[tuple[int, int], ...], int]]] = field(
        default_factory=dict
    )
    """From each term node, its links (to, reason, operand pairs, when proved: -1 for a rule link), for
    the shortest chains to walk without relisting the whole class at each (`Explainer._shortest`)."""

    def __post_init__(self) -> None:
        for n, m, why in self.rules:
            self.adjacent.setdefault(n, []).append((m, why, (), -1))
        for n, m, pairs, latest in self.congruences:
            self.adjacent.setdefault(n, []).append((m, CONGRUENCE, pairs, latest))


class Explainer:
    """Explanations of equalities in one e-graph (assumption texts are cached per union)."""

    def __init__(self, egraph: EGraph):
        self.egraph = egraph
        self._assumed: dict[int, tuple[frozenset[str], tuple]] = {}
        self._graphs: dict[int, Variable] = {}
        self._chains: dict[tuple[int, int], list[Link]] = {}
        self._lengths: dict[tuple[int, int], int] = {}
        self._classes: dict[int, _ClassLinks] = {}
        self._times: dict[tuple[int, int], int] = {}

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
            for _, _, reason, pairs in self._chain(x, y):
                if isinstance(reason, Applied):
                    found[id(reason)] = reason
                stack.extend(pairs)
        return list(found.values())

    # -- the shortest chain ----------------------------------------------------------------------

    def _chain(self, a: int, b: int) -> list[Link]:
        """The shortest known chain of links from term node a to b (see the module's docstring).

        Chains are found for the operand pairs of a class's congruences before
        the class's own (an explicit stack: they are proved earlier, so this ends).
        """
        chains, lengths = self._chains, self._lengths
        stack = [(a, b)]
        while stack:
            x, y = pair = stack[-1]
            if pair in chains:
                stack.pop()
                continue
            if x == y:
                chains[pair], lengths[pair] = [], 0
                stack.pop()
                continue
            before = self._time(x, y)
            congruences = [c for c in self._class(x).congruences if c[3] < before]
            missing = [
                q for _, _, pairs, _ in congruences for q in pairs if q not in lengths and q[0] != q[1]
            ]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            chain = self._shortest(x, y, before)
            length = sum(1 if not pairs else sum(lengths.get(q, 0) for q in pairs) for *_, pairs in chain)
            operands = self.egraph.exact_children
            chains[pair], lengths[pair] = chain, length
            chains[y, x] = [
                (q, p, why, flip_pairs(operands(q), pairs) if pairs else ())
                for p, q, why, pairs in chain[::-1]
            ]
            lengths[y, x] = length
        return chains[a, b]

    def _shortest(self, a: int, b: int, before: int) -> list[Link]:
        """Dijkstra from a to b over the class's rule links (one step each) and its congruences proved
        before `before` (the steps their operands' chains take, known by then)."""
        lengths = self._lengths
        adjacent = self._class(a).adjacent
        best: dict[int, int] = {a: 0}
        came: dict[int, Link] = {}
        tie = count()
        heap = [(0, next(tie), a)]
        while heap:
            cost, _, n = heapq.heappop(heap)
            if n == b:
                break
            if cost > best[n]:
                continue
            for m, why, pairs, latest in adjacent.get(n, ()):
                if latest >= before:
                    continue
                length = sum(lengths[q] for q in pairs if q[0] != q[1]) if latest >= 0 else 1
                if cost + length < best.get(m, cost + length + 1):
                    best[m] = cost + length
                    came[m] = (n, m, why, pairs)
                    heapq.heappush(heap, (cost + length, next(tie), m))
        chain = []
        n = b
        while n != a:
            chain.append(came[n])
            n = came[n][0]
        return chain[::-1]

    def _class(self, node: int) -> _ClassLinks:
        """The links among the term nodes of `node`'s class (rebuilt when the class has grown)."""
        egraph = self.egraph
        terms = egraph.terms(node)
        cls = egraph.find(node)
        found = self._classes.get(cls)
        if found is not None and found.size == len(terms):
            return found
        rules: list[tuple[int, int, Reason]] = []
        congruent: dict[tuple, list[int]] = {}
        for n in terms:
            link = egraph.forest_link(n)
            if link is not None and link[1] != CONGRUENCE:
                rules += [(n, link[0], link[1]), (link[0], n, link[1])]
            rules += [(n, m, why) for m, why in egraph.spare_links(n)]
            if egraph.op(n) is not None:
                congruent.setdefault(egraph.canonical(n), []).append(n)
        if sum(len(group) * (len(group) - 1) for group in congruent.values()) <= MAX_CONGRUENCES:
            candidates = [(n, m) for group in congruent.values() for n in group for m in group if m != n]
        else:  # too many to pair up: the forest's own congruence links, which still connect the class
            candidates = []
            for n in terms:
                link = egraph.forest_link(n)
                if link is not None and link[1] == CONGRUENCE:
                    candidates += [(n, link[0]), (link[0], n)]
        congruences = []
        for n, m in candidates:
            pairs = self._operand_pairs(n, m)
            latest = max((self._time(c, d) for c, d in pairs), default=0)
            congruences.append((n, m, pairs, latest))
        found = self._classes[cls] = _ClassLinks(len(terms), rules, congruences)
        return found

    def _time(self, a: int, b: int) -> int:
        """When the forest first proved a = b (kept: the forest's chains never change)."""
        found = self._times.get((a, b))
        if found is None:
            found = self._times[a, b] = self._times[b, a] = self.egraph.proof_time(a, b)
        return found

    def _operand_pairs(self, x: int, y: int) -> tuple[tuple[int, int], ...]:
        """The operands of congruent term nodes x and y paired, in x's order.

        A congruence link of the forest pairs its operands as it did when made;
        others pair each operand of add and mul with the earliest-proved equal one.
        """
        egraph = self.egraph
        pairs = egraph.link_pairs(x, y)
        if pairs is not None:
            return pairs
        xs, ys = egraph.exact_children(x), list(egraph.exact_children(y))
        if egraph.op(x) not in AC_OPS:
            return tuple(zip(xs, ys))
        chosen = []
        for c in xs:
            options = [j for j, d in enumerate(ys) if d is not None and egraph.find(d) == egraph.find(c)]
            k = min(options, key=lambda j: self._time(c, ys[j]))
            chosen.append((c, ys[k]))
            ys[k] = None
        return tuple(chosen)

    # -- flat steps ------------------------------------------------------------------------------

    def _steps(self, a: int, b: int, max_steps: int) -> list[Step]:
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
                for p, q, reason, pairs in reversed(self._chain(x, y)):
                    if reason == CONGRUENCE:
                        tasks.append(("set", position, q))
                        tasks.extend(
                            ("explain", c, d, (*position, i))
                            for i, (c, d) in reversed(list(enumerate(pairs)))
                        )
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
                    texts.append(f"{expression_text(term)} {a.op} {a.value:g}")
                    conditions.append((term, a.op, a.value))
                else:
                    texts.append(f"{a} for {rule.name} at {expression_text(self.egraph.term(lhs))}")
            found = self._assumed[id(reason)] = (frozenset(texts), tuple(conditions))
        return found


def _other(direction: str) -> str:
    return "backward" if direction == "forward" else "forward"

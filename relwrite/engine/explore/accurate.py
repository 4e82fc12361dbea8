"""Accuracy-aware extraction: the most accurate forms of a class, from every e-node the e-graph holds.

Extraction by a whole-form accuracy cannot price a form bottom-up, and
enumerating forms smallest first never reaches an accurate form that is
large.  This module scores candidates bottom-up against exact values instead,
in the manner of Herbie's local-error search:

- *Exact values per class.*  Every member of a class is equal over the
  reals, so a class has one exact value at each sample point: it is computed
  once, from one e-node whose operand classes have theirs (a graph holding
  one defining term per class, evaluated by `Accuracy.exact` with its
  precision policy, each shared term once).  A class no e-node defines (an
  op without an exact reference) has none: its candidates are ranked by size
  alone.  Points where a class's value is not real do not count for it.
- *Candidates per e-node.*  A candidate is a tree (`extract.Trees`) with its
  floating-point values at the sample points: its op evaluated once over its
  operands' candidates' values (the NumPy backend's `evaluate`, in the order
  the form's graph will apply it), scored by mean bits of error against its
  class's exact values (`costs.mean_bits`).
- *A beam per class*: the `BEAM` best candidates of distinct values, ranked
  by bits, then size, and up to `SPECIALISTS` more that are much more
  accurate than those on some of the points (Herbie keeps every candidate
  best at some point: a form accurate on half the range only, as the
  quadratic formula's conjugate for b < 0, ranks low on the mean yet is the
  branch regimes need there).  Classes are revisited, through their parents, until no
  beam changes (the e-graph has cycles) or each has been visited `PASSES`
  times.  The input's own subterms seed the beams of their classes, so a
  search cut short still holds the input.

*Local error* (Herbie's): of an e-node, the bits its op loses applied in
floating point to its operands' exact values (rounded), against its class's
exact value; of an input expression, the same per subterm
(`Accuracy.local_errors`).  `focus` maps the input's local errors to its
classes, for the runner to apply matches where bits are lost first.

Everything stops at the call's `Deadline`: the exact values get a share of
the time left (cut, every class is ranked by size and the root by its
reference), the passes check it at every class and, cut, return the root's
beam as it is.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from relwrite.engine.explore.costs import (
    Accuracy,
    AccuracyError,
    element_bits,
    evaluate_stacked,
    has_reference,
    mean_bits,
)
from relwrite.engine.explore.deadline import Deadline, TimeLimitReached
from relwrite.engine.explore.egraph import EGraph
from relwrite.engine.explore.extract import Trees, _choices, _node_tree
from relwrite.graph.basic import Constant, Variable, io_toposort

BEAM = 4
"""Candidates kept per class.  A beam of one is greedy (each class its most accurate candidate alone,
which misses forms whose parts are individually worse but cancel better together); each more costs
a pass over every e-node's operand combinations: 4 to 8 keeps both small."""

COMBINATIONS = BEAM + 2
"""Operand combinations tried per e-node and visit, those of the best-ranked operands first."""

PASSES = 4
"""Passes over the classes at most: each visits, operands first, the classes an operand's changed beam
may improve (a class an earlier one of the pass uses waits for the next pass; cycles end here)."""

SEARCH_POINTS = 64
"""Sample points the search scores candidates on (evenly spread over the accuracy's sample): each class's
exact value costs an mpmath evaluation per point, and the forms found are measured on every point after."""

SPECIALISTS = 2
"""Candidates a beam keeps beyond `BEAM` for being more accurate than the beam on some points: each one
chosen saves the most bits over the beam so far, at least `SPECIALIST_GAIN` bits summed over the points."""

SPECIALIST_GAIN = 8.0
"""Bits (summed over the search's points) a specialist must save over the beam: a point's worth of a
form that is wrong elsewhere, not noise in the last bits."""

EXACT_SHARE = 0.6
"""The share of the extraction's time the exact values of the classes may take."""


@dataclass(frozen=True)
class _Candidate:
    tree: int
    rank: tuple[float, int, int]  # bits of error (0 when the class has no exact values), size, form


class AccurateExtractor:
    """The most accurate trees of the classes of `egraph`, scored against `accuracy`'s sample.

    `trees` are the trees extracted (their `size` ranks candidates of equal
    accuracy); `deadline` bounds the work (see the module docstring).
    """

    def __init__(self, egraph: EGraph, accuracy: Accuracy, trees: Trees, deadline: Deadline | None = None):
        self.egraph = egraph
        self.accuracy = accuracy
        self.trees = trees
        self.deadline = deadline
        count = len(accuracy.points[0])
        chosen = np.unique(np.linspace(0, count - 1, min(count, SEARCH_POINTS)).astype(np.int64))
        self.points = [p[chosen] for p in accuracy.points]
        self.reference = accuracy.reference[chosen]
        self.samples = len(chosen)
        self.exact: dict[int, np.ndarray] = {}
        self.order: list[int] = []
        """Classes in an order each is defined after its operands' classes (those defined first)."""
        self.beams: dict[int, list[_Candidate]] = {}
        self._values: dict[int, np.ndarray | None] = {}
        self._ranks: dict[int, tuple[float, int, int]] = {}
        self._bits: dict[int, np.ndarray] = {}  # tree -> bits of error per point (`_point_bits`)
        self._versions: dict[int, int] = {}  # class -> how often its beam changed
        self._made: dict[int, tuple[tuple[int, ...], list[int]]] = {}  # e-node -> (operand versions, trees)
        self._inputs = {v: p for v, p in zip(accuracy.inputs, self.points)}

    # -- exact values --------------------------------------------------------------------------

    def exact_values(self, root: int, classes: Sequence[int]) -> None:
        """The exact values of `classes` (those reachable from `root`) at the search's points, into
        `exact`: the root's are the accuracy's reference; the others' are computed within `EXACT_SHARE`
        of the time left (none when it passes, or when computing them fails).  Sets `order`."""
        egraph = self.egraph
        self.exact[egraph.find(root)] = self.reference
        defining = self._defining_terms(classes)
        self.order = [*defining, *(c for c in reversed(classes) if c not in defining)]
        defining.pop(egraph.find(root), None)
        if not defining:
            return
        order = list(defining)
        try:
            if self.deadline is None:
                values = self.accuracy.exact([defining[c] for c in order], self.points)
            else:
                with self.deadline.part(EXACT_SHARE).interrupting("extraction"):
                    values = self.accuracy.exact([defining[c] for c in order], self.points)
        except TimeLimitReached:
            return
        except (AccuracyError, ArithmeticError, ValueError, TypeError):
            return
        for c, value in zip(order, values):
            if not np.isnan(value).all():
                self.exact[c] = value

    def _defining_terms(self, classes: Sequence[int]) -> dict[int, Variable]:
        """A graph per class that one can be defined by: an e-node with an exact reference over
        operand classes already defined (leaves: the accuracy's inputs and constants)."""
        egraph, find = self.egraph, self.egraph.find
        members = set(classes)
        parents: dict[int, set[int]] = {c: set() for c in classes}
        for c in classes:
            for n in egraph.nodes(c):
                for k in egraph.children(n):
                    parents[k].add(c)
        defined: dict[int, Variable] = {}
        queue = list(reversed(classes))
        while queue:
            c = queue.pop()
            if c in defined:
                continue
            term = self._definition(c, defined)
            if term is None:
                continue
            defined[c] = term
            queue.extend(p for p in parents[c] if p not in defined and find(p) in members)
        return defined

    def _definition(self, cls: int, defined: dict[int, Variable]) -> Variable | None:
        egraph = self.egraph
        for n in _choices(egraph, cls):
            leaf = egraph.leaf(n)
            if leaf is not None:
                if isinstance(leaf, Constant) or leaf in self._inputs:
                    return leaf
                continue
            op, operands = egraph.op(n), egraph.children(n)
            if not has_reference(op) or any(k not in defined for k in operands):
                continue
            try:
                apply = op.make_node(*(defined[k] for k in operands))
            except (TypeError, ValueError):
                continue
            if len(apply.outputs) == 1:
                return apply.outputs[0]
        return None

    # -- candidates ----------------------------------------------------------------------------

    def values(self, tree: int) -> np.ndarray | None:
        """A tree's floating-point values at the sample points (None where it cannot be evaluated); its
        operands' values must be known (they are: trees are made bottom-up)."""
        if tree in self._values:
            return self._values[tree]
        trees = self.trees
        leaf = trees.leaf[tree]
        if leaf is not None:
            found = self._inputs.get(leaf)
            value = np.asarray(leaf.data)[np.newaxis] if found is None else found
        else:
            value = self._evaluate(tree)
        self._values[tree] = value
        return value

    def _evaluate(self, tree: int) -> np.ndarray | None:
        """The tree's op evaluated over its operands' values, as its graph applies it (operand order)."""
        trees = self.trees
        known: dict[Variable, np.ndarray] = {}
        for c in trees.children[tree]:
            value = self.values(c)
            if value is None:
                return None
            known[trees.graph(c)] = value
        graph = trees.graph(tree)
        node = graph.owner
        try:
            if all(i in known or isinstance(i, Constant) for i in node.inputs):  # as made: one op
                operands = [known[i] if i in known else np.asarray(i.data)[np.newaxis] for i in node.inputs]
                return evaluate_stacked(node, operands, self.samples)
            for node in io_toposort(list(known), [graph]):  # the op's own conversions besides
                operands = [known[i] if i in known else np.asarray(i.data)[np.newaxis] for i in node.inputs]
                known[node.outputs[0]] = evaluate_stacked(node, operands, self.samples)
        except Exception:  # an op the backend refuses at some point: the tree has no values here
            return None
        return known[graph]

    def rank(self, tree: int, cls: int) -> tuple[float, int, int] | None:
        """A candidate's rank in class `cls`: (bits of error, size, form); None if it has no values."""
        found = self._ranks.get(tree)
        if found is not None:
            return found
        value = self.values(tree)
        if value is None:
            return None
        exact = self.exact.get(cls)
        bits = self._mean_bits(tree, value, exact) if exact is not None else None
        rank = (0.0 if bits is None else bits, self.trees.size[tree], self.trees.form[tree])
        self._ranks[tree] = rank
        return rank

    def _mean_bits(self, tree: int, value: np.ndarray, exact: np.ndarray) -> float | None:
        """`costs.mean_bits` of a candidate, keeping its bits per point (`_point_bits`) from the same
        elementwise errors: the specialists' choice reads them, and they cost as much as the mean."""
        found = element_bits(value, exact)
        if found is None:
            return None
        errors, known = found
        self._bits[tree] = errors.reshape(self.samples, -1).mean(axis=1)
        return float(errors.sum() / known.sum())

    def local_error(self, node: int) -> float | None:
        """Herbie's local error of e-node `node`: bits its op loses over its operands' exact values
        (None unless its class and operand classes have exact values)."""
        egraph = self.egraph
        cls, operands = egraph.find(node), egraph.children(node)
        op = egraph.op(node)
        if op is None or cls not in self.exact or any(k not in self.exact for k in operands):
            return None
        try:
            inputs = [Variable(egraph.classes[k].type) for k in operands]
            apply = op.make_node(*inputs)
            with np.errstate(all="ignore"):
                exact = [self.exact[k].astype(i.type.numpy_dtype) for k, i in zip(operands, inputs)]
            value = evaluate_stacked(apply, exact, self.samples)
        except Exception:
            return None
        return mean_bits(value, self.exact[cls])

    # -- the beam search -----------------------------------------------------------------------

    def best(self, root: int, seeds: dict[int, int] | None = None) -> list[int]:
        """The root class's most accurate trees, best first (at most `BEAM`).

        `seeds` (class -> tree) start the beams (the input's subterms).  The
        exact values come first; past the deadline the beams found so far
        are used (the root's may then hold only its seed).
        """
        egraph, find = self.egraph, self.egraph.find
        root = find(root)
        classes = egraph.reachable([root])
        self.exact_values(root, classes)
        beams = self.beams = {c: [] for c in classes}
        for c, t in (seeds or {}).items():
            c = find(c)
            if c in beams and self.rank(t, c) is not None:
                beams[c] = [_Candidate(t, self.rank(t, c))]
        parents: dict[int, set[int]] = {c: set() for c in classes}
        for c in classes:
            for n in _choices(egraph, c):
                for k in egraph.children(n):
                    parents[k].add(c)
        position = {c: k for k, c in enumerate(self.order)}
        queue = [(0, position[c], c) for c in self.order]  # (pass, operands before their users)
        queued = dict.fromkeys(self.order, 0)  # class -> the pass it is next visited in
        try:
            while queue:
                if self.deadline is not None:
                    self.deadline.check("extraction")
                round_, _, c = heapq.heappop(queue)
                del queued[c]
                beam = self._beam(c, beams)
                if [b.tree for b in beam] != [b.tree for b in beams[c]]:
                    beams[c] = beam
                    self._versions[c] = self._versions.get(c, 0) + 1
                    for p in parents[c]:
                        later = round_ + (position[p] <= position[c])  # this pass if still ahead in it
                        if later < PASSES and p not in queued:
                            queued[p] = later
                            heapq.heappush(queue, (later, position[p], p))
        except TimeLimitReached:  # the root once more, over its operands' beams as they are now
            beams[root] = self._beam(root, beams)
        return [b.tree for b in beams[root]]

    def _beam(self, cls: int, beams: dict[int, list[_Candidate]]) -> list[_Candidate]:
        """The `BEAM` best candidates of distinct values of class `cls`, from its beam and its e-nodes
        over their operand classes' beams."""
        found: dict[int, _Candidate] = {b.tree: b for b in beams[cls]}
        for n in _choices(self.egraph, cls):
            operands = self.egraph.children(n)
            key = tuple(self._versions.get(k, 0) for k in operands)
            made = self._made.get(n)
            if made is None or made[0] != key:
                made = self._made[n] = (key, self._combinations(n, [beams[k] for k in operands]))
            for t in made[1]:
                if t not in found:
                    rank = self.rank(t, cls)
                    if rank is not None:
                        found[t] = _Candidate(t, rank)
        distinct: dict[bytes, _Candidate] = {}
        for candidate in sorted(found.values(), key=lambda b: b.rank):
            value = self._values[candidate.tree]
            distinct.setdefault(np.ascontiguousarray(value).tobytes() + str(value.shape).encode(), candidate)
        ranked = list(distinct.values())
        return ranked[:BEAM] + self._specialists(cls, ranked[:BEAM], ranked[BEAM:])

    def _specialists(self, cls: int, beam: list[_Candidate], others: list[_Candidate]) -> list[_Candidate]:
        """Up to `SPECIALISTS` of `others` that save the most bits over `beam` point by point (each at
        least `SPECIALIST_GAIN`), chosen one after another."""
        exact = self.exact.get(cls)
        if exact is None or not beam or not others or self._values[beam[0].tree].dtype.kind != "f":
            return []
        errors = [self._point_bits(c.tree, exact) for c in others]
        best = np.min([self._point_bits(c.tree, exact) for c in beam], axis=0)
        chosen: list[_Candidate] = []
        while len(chosen) < SPECIALISTS:
            gains = [float(np.sum(np.maximum(best - e, 0.0))) for e in errors]
            k = int(np.argmax(gains))
            if gains[k] < SPECIALIST_GAIN:
                break
            chosen.append(others[k])
            best = np.minimum(best, errors[k])
        return chosen

    def _point_bits(self, tree: int, exact: np.ndarray) -> np.ndarray:
        """A candidate's bits of error at each search point (0 where the exact value is unknown), as its
        rank computed them."""
        if tree not in self._bits:
            self._mean_bits(tree, self._values[tree], exact)
        return self._bits.get(tree, np.zeros(self.samples))  # no float values: no errors to tell

    def _combinations(self, node: int, choices: list[list[_Candidate]]) -> list[int]:
        """Up to `COMBINATIONS` trees of e-node `node` over its operands' beams, those whose operands
        rank best in their beams first."""
        egraph, trees = self.egraph, self.trees
        if egraph.leaf(node) is not None:
            return [trees.of_leaf(egraph.leaf(node))]
        if any(not c for c in choices):
            return []
        start = (0,) * len(choices)
        heap = [(0, start)]
        seen = {start}
        made = []
        while heap and len(made) < COMBINATIONS:
            total, index = heapq.heappop(heap)
            made.append(_node_tree(egraph, trees, node, [c[i].tree for c, i in zip(choices, index)]))
            for position, i in enumerate(index):
                if i + 1 < len(choices[position]):
                    successor = (*index[:position], i + 1, *index[position + 1 :])
                    if successor not in seen:
                        seen.add(successor)
                        heapq.heappush(heap, (total + 1, successor))
        return made


def term_trees(egraph: EGraph, trees: Trees, node: int) -> dict[int, int]:
    """The trees of term node `node` and of its subterms (as interned), by their classes."""
    made: dict[int, int] = {}
    found: dict[int, int] = {}
    stack = [node]
    while stack:
        n = stack[-1]
        if n in made:
            stack.pop()
            continue
        leaf = egraph.leaf(n)
        if leaf is not None:
            made[n] = trees.of_leaf(leaf)
        else:
            missing = [k for k in egraph.exact_children(n) if k not in made]
            if missing:
                stack.extend(missing)
                continue
            children = tuple(made[k] for k in egraph.exact_children(n))
            made[n] = trees.of_node(egraph.op(n), children, egraph.type(n))
        stack.pop()
        found.setdefault(egraph.find(n), made[n])
    return found


def focus(egraph: EGraph, accuracy: Accuracy, expr: Variable) -> dict[int, float]:
    """The classes of `expr`'s subterms with the bits each loses (its local error), where it loses
    some: what a search should rewrite first.  Empty when the local errors cannot be measured."""
    try:
        errors = accuracy.local_errors(expr)
    except (AccuracyError, ArithmeticError, ValueError, TypeError):
        return {}
    found: dict[int, float] = {}
    for v, bits in errors:
        cls = egraph.lookup(v).cls
        if cls is not None and bits > 0:
            found[cls] = max(found.get(cls, 0.0), bits)
    return found

"""Algebra over the reals: the identities exploration uses to find other forms of an expression.

Distribution (of products and of dot over sums), dot associativity and
fraction arithmetic hold over the real numbers, each under its
assumptions (no divisor is zero).  In floating point they round
differently and may overflow an intermediate, and at an infinite input
they may give NaN where the other side gives an infinity (``inf * (0 +
1)`` against ``inf * 0 + inf * 1``): that is what exploration's accuracy
cost measures, not a reason to hide a form.  So they are tagged `explore`:
exploration uses them by default, the rewriting pipelines never do
(docs/rule-safety.md: an explore rule is checked over the reals, where its
inputs are finite and its assumptions hold).

Each rule is one pattern pair run both ways: forward it distributes or
splits, backward it gathers.  add_assoc and mul_assoc run forward only: they
splice a sum found among the terms of a sum, which interning does for the
terms it sees and an e-graph must also do for a term class that becomes a
sum later (``exp(x) - 2`` as ``-2 + exp(x)``).  add and mul are flat and sorted, so the
patterns use sequence variables: ``(mul, (add, "x", "*ys"), "*fs")``
matches a sum among the factors of any product, taking one term of it as
`x` (the rule runs again on the rest, ``(add, *ys)``, so a sum of n terms
distributes fully).  Every rule regroups operands of one dtype only
(`predicates.regroupable`: mixed integer widths wrap around at different
places), divisions apply to floats only, and a dot is distributed or
reassociated only where static shapes prove every product well typed.
"""

from __future__ import annotations

from collections.abc import Sequence

from relwrite.graph import ops as o
from relwrite.graph.basic import Constant, Variable
from relwrite.graph.types import fits
from relwrite.relations.operands import canonical_key
from relwrite.relations.predicates import regroupable
from relwrite.relations.registry import rule

TAGS = ("canonicalize", "explore")
REAL = "reassociates"
"""Equal over the reals (docs/rule-safety.md), within the rule's assumptions."""

SCALARS = {"a": "scalar", "b": "scalar", "c": "scalar", "d": "scalar"}


def one_dtype(*values: Variable | Sequence[Variable]) -> bool:
    """Whether the values (graphs, or tuples of them from sequence variables) share one dtype."""
    flat = [w for v in values for w in (v if isinstance(v, tuple) else (v,))]
    return regroupable(flat)


def one_float_dtype(*values: Variable | Sequence[Variable]) -> bool:
    """Whether the values share one floating dtype (a quotient of integers is a float: no regrouping)."""
    flat = [w for v in values for w in (v if isinstance(v, tuple) else (v,))]
    return regroupable(flat) and flat[0].type.numpy_dtype.kind == "f"


def not_constant(*values: Variable) -> bool:
    """Whether no value is a constant (a constant divisor is `div_by_constant`'s: a product of constants
    in a divisor would only grow the e-graph with signs and ones, x / (-1 * -1 * y))."""
    return not any(isinstance(v, Constant) for v in values)


def same_full_shape(terms: Sequence[Variable]) -> bool:
    """Whether static shapes prove every term has the same shape (none broadcasts into another)."""
    return all(fits(u.type.shape, t.type.shape) for t in terms for u in terms)


# -- associativity ----------------------------------------------------------------------------------


def spliceable(y: Variable, ys: Sequence[Variable], xs: Sequence[Variable]) -> bool:
    """Whether a nested sum (product) ``y, *ys`` splices into its parent's other operands `xs`: there are
    some, all share one dtype, and `y` sorts first among the nested operands (`canonical_key`), so a
    nested sum of n terms is one match, not n that each build the same flat sum."""
    key = canonical_key(y)
    return bool(xs) and all(key <= canonical_key(v) for v in ys) and one_dtype(y, ys, xs)


add_assoc = rule(
    "add_assoc",
    (o.add, (o.add, "y", "*ys"), "*xs"),
    (o.add, "y", "*ys", "*xs"),
    TAGS,
    semantics=REAL,
    where=spliceable,
    keeps_type=True,
    examples=("(a + b) + c", "add(add(a, b), c, d)"),
    types=SCALARS,
    doc="(a + b) + c -> a + b + c: a sum among the terms of a sum spliced into it, one level, through "
    "every e-node of the term's class (flatten_add's code sees one arrangement of a class, and a class "
    "that becomes a sum after its parent was made, a - b as a + -b, is spliced only so).  Forward only: "
    "the flat sum does not say which terms were nested.  Equal over the reals.",
)

mul_assoc = rule(
    "mul_assoc",
    (o.mul, (o.mul, "y", "*ys"), "*xs"),
    (o.mul, "y", "*ys", "*xs"),
    TAGS,
    semantics=REAL,
    where=spliceable,
    keeps_type=True,
    examples=("(a * b) * c", "mul(mul(a, b), c, d)"),
    types=SCALARS,
    doc="(a * b) * c -> a * b * c: a product among the factors of a product spliced into it, one level, "
    "through every e-node of the factor's class (as add_assoc).  Forward only.  Equal over the reals.",
)


# -- distribution -----------------------------------------------------------------------------------

mul_distribute = rule(
    "mul_distribute",
    (o.mul, (o.add, "x", "*ys"), "*fs"),
    (o.add, (o.mul, "x", "*fs"), (o.mul, (o.add, "*ys"), "*fs")),
    TAGS,
    semantics=REAL,
    where=lambda x, ys, fs: bool(fs) and one_dtype(x, ys, fs),
    keeps_type=True,
    examples=("a * (b + c)", "(a + b) * c * d"),
    types=SCALARS,
    doc="a * (b + c) -> a * b + a * c among the factors of any product; backward it factors a sum of "
    "two products sharing factors: equal over the reals.",
)

dot_distribute = rule(
    "dot_distribute",
    (o.dot, "A", (o.add, "x", "*ys")),
    (o.add, (o.dot, "A", "x"), (o.dot, "A", (o.add, "*ys"))),
    TAGS,
    semantics=REAL,
    where=lambda A, x, ys: same_full_shape((x, *ys)) and one_dtype(A, x, ys),
    keeps_type=True,
    examples=("A @ (x + y)",),
    types={"A": "(3, 4)", "x": "(4,)", "y": "(4,)", "z": "(4,)"},
    doc="A @ (x + y + ...) -> A @ x + A @ (y + ...) (Aesara's dot_distributeo); backward it gathers. "
    "Only where static shapes prove every term has the sum's full shape (a term that broadcasts would "
    "not multiply on its own): equal over the reals.",
)


def _chain(A: Variable, B: Variable, C: Variable) -> bool:
    """Whether A @ B @ C reassociates: one dtype, B a matrix, A and C vectors or matrices."""
    return B.ndim == 2 and A.ndim in (1, 2) and C.ndim in (1, 2) and one_dtype(A, B, C)


dot_assoc = rule(
    "dot_assoc",
    (o.dot, (o.dot, "A", "B"), "C"),
    (o.dot, "A", (o.dot, "B", "C")),
    TAGS,
    semantics=REAL,
    where=_chain,
    keeps_type=True,
    examples=("(A @ B) @ C", "(x @ B) @ C"),
    types={"A": "(2, 3)", "x": "(3,)", "B": "(3, 4)", "C": "(4, 5)"},
    doc="(A @ B) @ C -> A @ (B @ C), both ways, for a matrix B between vectors or matrices of one dtype "
    "(flops pick the cheap association): equal over the reals.",
)


# -- fraction arithmetic ------------------------------------------------------------------------------

add_fractions = rule(
    "add_fractions",
    (o.add, (o.true_div, "a", "b"), (o.true_div, "c", "d"), "*rest"),
    (o.add, (o.true_div, (o.add, (o.mul, "a", "d"), (o.mul, "b", "c")), (o.mul, "b", "d")), "*rest"),
    TAGS,
    semantics=REAL,
    assumptions=("b != 0", "d != 0"),
    where=lambda a, b, c, d, rest: one_float_dtype(a, b, c, d, rest),
    keeps_type=True,
    examples=("a / b + c / d", "a / b + c / d + e"),
    types={**SCALARS, "e": "scalar"},
    doc="a / b + c / d -> (a * d + b * c) / (b * d) among the terms of any sum, for b, d != 0 (one "
    "division instead of two); backward it splits the fraction: equal over the reals.",
)

mul_fractions = rule(
    "mul_fractions",
    (o.mul, (o.true_div, "a", "b"), (o.true_div, "c", "d"), "*rest"),
    (o.mul, (o.true_div, (o.mul, "a", "c"), (o.mul, "b", "d")), "*rest"),
    TAGS,
    semantics=REAL,
    assumptions=("b != 0", "d != 0"),
    where=lambda a, b, c, d, rest: one_float_dtype(a, b, c, d, rest),
    keeps_type=True,
    examples=("(a / b) * (c / d)", "(a / b) * (c / d) * e"),
    types={**SCALARS, "e": "scalar"},
    doc="(a / b) * (c / d) -> (a * c) / (b * d) among the factors of any product, for b, d != 0: "
    "equal over the reals.",
)

div_div_numerator = rule(
    "div_div_numerator",
    (o.true_div, (o.true_div, "a", "b"), "c"),
    (o.true_div, "a", (o.mul, "b", "c")),
    TAGS,
    semantics=REAL,
    assumptions=("b != 0", "c != 0"),
    where=lambda a, b, c: one_float_dtype(a, b, c) and not_constant(b, c),
    keeps_type=True,
    examples=("(a / b) / c",),
    types=SCALARS,
    doc="(a / b) / c -> a / (b * c) for b, c != 0: equal over the reals.",
)

div_div_denominator = rule(
    "div_div_denominator",
    (o.true_div, "a", (o.true_div, "b", "c")),
    (o.true_div, (o.mul, "a", "c"), "b"),
    TAGS,
    semantics=REAL,
    assumptions=("b != 0", "c != 0"),
    where=lambda a, b, c: one_float_dtype(a, b, c) and not_constant(b, c),
    keeps_type=True,
    examples=("a / (b / c)",),
    types=SCALARS,
    doc="a / (b / c) -> (a * c) / b for b, c != 0: equal over the reals.",
)

div_distribute = rule(
    "div_distribute",
    (o.true_div, (o.add, "a", "*bs"), "c"),
    (o.add, (o.true_div, "a", "c"), (o.true_div, (o.add, "*bs"), "c")),
    TAGS,
    semantics=REAL,
    assumptions=("c != 0",),
    where=lambda a, bs, c: one_float_dtype(a, bs, c),
    keeps_type=True,
    examples=("(a + b) / c",),
    types=SCALARS,
    doc="(a + b) / c -> a / c + b / c for c != 0; backward it gathers fractions of one divisor: "
    "equal over the reals.",
)

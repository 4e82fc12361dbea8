"""Special functions: stabilizations through log1mexp, erf and erfc, expm1 and exp.

The rules match the canonical form canonicalize leaves (``1 - exp(x)`` is
``add(1, neg(exp(x)))``, its terms in any order: patterns read operand
multisets) and `stabilize` (docs/rule-safety.md): the right side is the
same function, accurate where the left side cancels (``1 - erf(x)`` for
large x, ``log(1 - exp(x))`` near 0) or overflows (``exp(a) * exp(b)``).
PyTensor's users ask for several of them (issues 1451, 1476).
"""

from __future__ import annotations

from relwrite.graph import ops as o
from relwrite.relations.predicates import float_var, is_float_regroupable
from relwrite.relations.registry import rule

STABILIZE = ("stabilize", "fast_run")
VECTOR = {"x": "vector"}


def _among_terms(*terms: object) -> dict:
    """A sum holding `terms` and any others (`*rest`), of one float dtype (its terms may be regrouped)."""
    return {"pattern": (o.add, *terms, "*rest"), "constraint": is_float_regroupable}


# -- log(1 - exp(x)) ------------------------------------------------------------------------------------

log_one_minus_exp = rule(
    "log_one_minus_exp",
    (o.log, {"pattern": (o.add, 1, (o.neg, (o.exp, "x"))), "constraint": is_float_regroupable}),
    (o.log1mexp, "x"),
    STABILIZE,
    examples=("log(add(1, neg(exp(x))))",),
    types=VECTOR,
    doc="log(1 - exp(x)) -> log1mexp(x), even after canonicalize (PyTensor issue 1476): accurate "
    "near 0, where 1 - exp(x) cancels, and for large negative x",
)
log1p_neg_exp = rule(
    "log1p_neg_exp",
    (o.log1p, (o.neg, (o.exp, float_var("x")))),
    (o.log1mexp, "x"),
    STABILIZE,
    examples=("log1p(neg(exp(x)))",),
    types=VECTOR,
    doc="log1p(-exp(x)) -> log1mexp(x): accurate near 0 too, where exp(x) rounds to 1",
)
log_neg_expm1 = rule(
    "log_neg_expm1",
    (o.log, (o.neg, (o.expm1, float_var("x")))),
    (o.log1mexp, "x"),
    STABILIZE,
    examples=("log(neg(expm1(x)))",),
    types=VECTOR,
    doc="log(-expm1(x)) -> log1mexp(x): accurate for large negative x too, where expm1(x) rounds to -1",
)

# -- erf and erfc -----------------------------------------------------------------------------------

one_minus_erf = rule(
    "one_minus_erf",
    _among_terms(1, (o.neg, (o.erf, "x"))),
    (o.add, (o.erfc, "x"), "*rest"),
    STABILIZE,
    keeps_type=True,
    examples=("add(1, neg(erf(x)))", "add(neg(erf(x)), y, 1)"),
    types={"x": "vector", "y": "vector"},
    doc="1 - erf(x) -> erfc(x), also among other terms: accurate for large x, where erf(x) rounds to 1",
)
one_minus_erfc = rule(
    "one_minus_erfc",
    _among_terms(1, (o.neg, (o.erfc, "x"))),
    (o.add, (o.erf, "x"), "*rest"),
    STABILIZE,
    keeps_type=True,
    examples=("add(1, neg(erfc(x)))",),
    types=VECTOR,
    doc="1 - erfc(x) -> erf(x): accurate near 0, where erfc(x) is near 1",
)
one_plus_erf = rule(
    "one_plus_erf",
    _among_terms(1, (o.erf, float_var("x"))),
    (o.add, (o.erfc, (o.neg, "x")), "*rest"),
    STABILIZE,
    keeps_type=True,
    examples=("add(1, erf(x))",),
    types=VECTOR,
    doc="1 + erf(x) -> erfc(-x): accurate for large negative x, where erf(x) rounds to -1",
)
two_minus_erfc = rule(
    "two_minus_erfc",
    _among_terms(2, (o.neg, (o.erfc, float_var("x")))),
    (o.add, (o.erfc, (o.neg, "x")), "*rest"),
    STABILIZE,
    keeps_type=True,
    examples=("add(2, neg(erfc(x)))",),
    types=VECTOR,
    doc="2 - erfc(x) -> erfc(-x): accurate for large negative x, where erfc(x) rounds to 2",
)

# -- sigmoid, expm1, exp -----------------------------------------------------------------------------

one_minus_sigmoid = rule(
    "one_minus_sigmoid",
    _among_terms(1, (o.neg, (o.sigmoid, float_var("x")))),
    (o.add, (o.sigmoid, (o.neg, "x")), "*rest"),
    STABILIZE,
    keeps_type=True,
    examples=("add(1, neg(sigmoid(x)))",),
    types=VECTOR,
    doc="1 - sigmoid(x) -> sigmoid(-x): accurate for large x, where sigmoid(x) rounds to 1",
)
log1p_expm1 = rule(
    "log1p_expm1",
    (o.log1p, (o.expm1, float_var("x"))),
    "x",
    STABILIZE,
    examples=("log1p(expm1(x))",),
    types=VECTOR,
    doc="log1p(expm1(x)) -> x: exact where expm1(x) does not overflow, and x itself where it does",
)
exp_times_exp = rule(
    "exp_times_exp",
    {"pattern": (o.mul, (o.exp, float_var("a")), (o.exp, "b"), "*rest"), "constraint": is_float_regroupable},
    (o.mul, (o.exp, (o.add, "a", "b")), "*rest"),
    (*STABILIZE, "unsafe"),
    keeps_type=True,
    examples=("mul(exp(a), exp(b))", "mul(exp(a), c, exp(b))"),
    types={"a": "vector", "b": "vector", "c": "vector"},
    doc="exp(a) * exp(b) -> exp(a + b): one exp, finite where exp(a) overflows and exp(b) makes up "
    "for it.  Unsafe: at infinite inputs inf * 0 is NaN on the left and exp(inf - big) is inf on the "
    "right (the limit, but a NaN turned into a number); and a + b rounds before exp amplifies it",
)

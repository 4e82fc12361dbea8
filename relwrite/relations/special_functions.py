"""Special functions: stabilizations through log1mexp, erf and erfc, expm1 and exp.

The rules match the canonical form canonicalize leaves (``1 - exp(x)`` is
``add(1, neg(exp(x)))``, its terms in any order: patterns read operand
multisets) and `stabilize` (docs/rule-safety.md): the right side is the
same function, accurate where the left side cancels (``1 - erf(x)`` for
large x, ``log(1 - exp(x))`` near 0), underflows (``log(erfc(x))`` for
x > 26.5) or overflows (``exp(a) * exp(b)``, ``log(exp(x) - exp(y))``).
PyTensor's users ask for several of them (issues 1451, 1476).

Canonicalize writes ``x - y`` as ``add(x, neg(y))`` but leaves a user's
``-1.0 * y`` as ``mul(-1, y)`` (specialize turns it into ``neg(y)``, after
this phase), so each rule reading a negation is declared twice (`_negated`):
`name` matches ``neg(e)``, `name`_times_minus_one matches ``mul(-1, e)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from relwrite.graph import ops as o
from relwrite.graph.basic import Variable
from relwrite.relations.predicates import float_var, is_float_regroupable, literal_value, node_inputs
from relwrite.relations.registry import STABILIZE, Rule, negation_twins, rule

VECTOR = {"x": "vector"}
PAIR = {"x": "vector", "y": "vector"}
NAN = float("nan")
NEG_INF = float("-inf")


def _among_terms(*terms: object) -> dict:
    """A sum holding `terms` and any others (`*rest`), of one float dtype (its terms may be regrouped)."""
    return {"pattern": (o.add, *terms, "*rest"), "constraint": is_float_regroupable}


def _negated(
    name: str,
    lhs: Callable[[Callable], Any],
    rhs: Any,
    examples: tuple[str, ...],
    doc: str,
    keeps_type: bool = True,
    types: dict[str, str] = VECTOR,
) -> tuple[Rule, Rule]:
    """`negation_twins` of a stabilization: `name` reads neg(e), `name`_times_minus_one mul(-1, e)."""
    return negation_twins(name, lhs, rhs, STABILIZE, examples, doc, keeps_type=keeps_type, types=types)


# -- log(1 - exp(x)) ------------------------------------------------------------------------------------

log_one_minus_exp, log_one_minus_exp_times_minus_one = _negated(
    "log_one_minus_exp",
    lambda negate: (o.log, {"pattern": (o.add, 1, negate((o.exp, "x"))), "constraint": is_float_regroupable}),
    (o.log1mexp, "x"),
    ("log(add(1, {n}exp(x))))",),
    "log(1 - exp(x)) -> log1mexp(x), even after canonicalize (PyTensor issue 1476): accurate "
    "near 0, where 1 - exp(x) cancels, and for large negative x",
    keeps_type=False,
)
log1p_neg_exp, log1p_neg_exp_times_minus_one = _negated(
    "log1p_neg_exp",
    lambda negate: (o.log1p, negate((o.exp, float_var("x")))),
    (o.log1mexp, "x"),
    ("log1p({n}exp(x)))",),
    "log1p(-exp(x)) -> log1mexp(x): accurate near 0 too, where exp(x) rounds to 1",
    keeps_type=False,
)
log_neg_expm1, log_neg_expm1_times_minus_one = _negated(
    "log_neg_expm1",
    lambda negate: (o.log, negate((o.expm1, float_var("x")))),
    (o.log1mexp, "x"),
    ("log({n}expm1(x)))",),
    "log(-expm1(x)) -> log1mexp(x): accurate for large negative x too, where expm1(x) rounds to -1",
    keeps_type=False,
)
log1mexp_log1mexp = rule(
    "log1mexp_log1mexp",
    (o.log1mexp, (o.log1mexp, float_var("x"))),
    (o.switch, (o.le, "x", 0), "x", NAN),
    STABILIZE,
    examples=("log1mexp(log1mexp(x))",),
    types=VECTOR,
    doc="log1mexp(log1mexp(x)) -> switch(x <= 0, x, nan): log(1 - (1 - exp(x))) is x on log1mexp's domain"
    " x <= 0, and both sides are NaN above it (and at NaN); accurate where log1mexp(x) is subnormal"
    " (x < -708, float32 x < -87) and finite where it rounds to -0.0 (x < -745, float32 x < -104) and"
    " the left side is -inf",
)

# the log of a difference of exps: its larger term taken out, the rest through log1mexp
logdiffexp, logdiffexp_times_minus_one = _negated(
    "logdiffexp",
    lambda negate: (
        o.log,
        {
            "pattern": (o.add, (o.exp, float_var("x")), negate((o.exp, float_var("y")))),
            "constraint": is_float_regroupable,
        },
    ),
    (o.switch, (o.eq, "y", NEG_INF), "x", (o.add, "x", (o.log1mexp, (o.add, "y", (o.neg, "x"))))),
    ("log(add(exp(x), {n}exp(y))))",),
    "log(exp(x) - exp(y)) -> switch(y == -inf, x, x + log1mexp(y - x)): finite where exp(x) overflows"
    " (log(exp(1000) - exp(999)) is NaN, the right side 999.54) or both exps underflow.  Both sides are"
    " NaN where x < y and -inf where x == y; at y = -inf both are x (exp(y) is 0; y - x alone is NaN at"
    " x = y = -inf).  Where exp(y) overflows too the left side is NaN (inf - inf) and the right side"
    " the limit: -inf at finite x == y, +inf at x = +inf > y.  Floats only: y - x of integers wraps"
    " around",
    keeps_type=False,
    types=PAIR,
)

# -- erf and erfc -----------------------------------------------------------------------------------
one_minus_erf, one_minus_erf_times_minus_one = _negated(
    "one_minus_erf",
    lambda negate: _among_terms(1, negate((o.erf, "x"))),
    (o.add, (o.erfc, "x"), "*rest"),
    ("add(1, {n}erf(x)))", "add({n}erf(x)), y, 1)"),
    "1 - erf(x) -> erfc(x), also among other terms: accurate for large x, where erf(x) rounds to 1",
    types=PAIR,
)
one_minus_erfc, one_minus_erfc_times_minus_one = _negated(
    "one_minus_erfc",
    lambda negate: _among_terms(1, negate((o.erfc, "x"))),
    (o.add, (o.erf, "x"), "*rest"),
    ("add(1, {n}erfc(x)))",),
    "1 - erfc(x) -> erf(x): accurate near 0, where erfc(x) is near 1",
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
two_minus_erfc, two_minus_erfc_times_minus_one = _negated(
    "two_minus_erfc",
    lambda negate: _among_terms(2, negate((o.erfc, float_var("x")))),
    (o.add, (o.erfc, (o.neg, "x")), "*rest"),
    ("add(2, {n}erfc(x)))",),
    "2 - erfc(x) -> erfc(-x): accurate for large negative x, where erfc(x) rounds to 2",
)
erf_minus_one = rule(
    "erf_minus_one",
    _among_terms(-1, (o.erf, "x")),
    (o.add, (o.neg, (o.erfc, "x")), "*rest"),
    STABILIZE,
    keeps_type=True,
    examples=("add(-1, erf(x))", "add(erf(x), y, -1)"),
    types=PAIR,
    doc="erf(x) - 1 -> -erfc(x), also among other terms: accurate for large x, where erf(x) rounds to 1",
)
erfc_neg_minus_one = rule(
    "erfc_neg_minus_one",
    _among_terms(-1, (o.erfc, (o.neg, float_var("x")))),
    (o.add, (o.erf, "x"), "*rest"),
    STABILIZE,
    keeps_type=True,
    examples=("add(-1, erfc(neg(x)))",),
    types=VECTOR,
    doc="erfc(-x) - 1 -> erf(x): accurate near 0, where erfc(-x) is near 1 (before erfc_minus_one, which"
    " would give -erf(-x))",
)
erfc_minus_one = rule(
    "erfc_minus_one",
    _among_terms(-1, (o.erfc, "x")),
    (o.add, (o.neg, (o.erf, "x")), "*rest"),
    STABILIZE,
    keeps_type=True,
    examples=("add(-1, erfc(x))",),
    types=VECTOR,
    doc="erfc(x) - 1 -> -erf(x): accurate near 0, where erfc(x) is near 1",
)
minus_one_minus_erf, minus_one_minus_erf_times_minus_one = _negated(
    "minus_one_minus_erf",
    lambda negate: _among_terms(-1, negate((o.erf, float_var("x")))),
    (o.add, (o.neg, (o.erfc, (o.neg, "x"))), "*rest"),
    ("add(-1, {n}erf(x)))",),
    "-1 - erf(x) -> -erfc(-x): accurate for large negative x, where erf(x) rounds to -1",
)

log_one_minus_erf, log_one_minus_erf_times_minus_one = _negated(
    "log_one_minus_erf",
    lambda negate: (o.log, {"pattern": (o.add, 1, negate((o.erf, "x"))), "constraint": is_float_regroupable}),
    (o.log, (o.erfc, "x")),
    ("log(add(1, {n}erf(x))))",),
    "log(1 - erf(x)) -> log(erfc(x)): finite for large x, where erf(x) rounds to 1 (the log of a "
    "normal's survival function)",
    keeps_type=False,
)


def asymptotic_candidate(dtype: str, threshold: float) -> Callable[[Any], bool]:
    """A constraint: `x` has `dtype` and is not known to stay below `threshold` (minimum(..., c <= it)).

    A log_erfc rule's own small branch reads erfc(minimum(x, threshold)), which needs no series: so the
    rule does not apply to its own result again.
    """

    def constraint(x: Any) -> bool:
        if not isinstance(x, Variable) or x.dtype != dtype:
            return False
        operands = node_inputs(x, o.minimum)
        if operands is None:
            return True
        bounds = [literal_value(v) for v in operands]
        return not any(b is not None and bool((b <= threshold).all()) for b in bounds)

    constraint.__name__ = f"may_exceed_{threshold:g}"
    return constraint


def _log_erfc_series(z: Any) -> tuple:
    """log(erfc(z)) for large z: -z**2 - log(z) - log(sqrt(pi)) + log1p(s(1 / (2 z**2))), s to six terms.

    s(u) = -u + 3u**2 - 15u**3 + 105u**4 - 945u**5 + 10395u**6 (coefficients (-1)**n (2n - 1)!!),
    written in Horner form; the first term left out is 135135 u**7.
    """
    u = (o.true_div, 0.5, (o.sqr, z))
    series: Any = 10395.0
    for coefficient in (-945.0, 105.0, -15.0, 3.0, -1.0):
        series = (o.add, coefficient, (o.mul, u, series))
    series = (o.mul, u, series)
    return (o.add, (o.neg, (o.sqr, z)), (o.neg, (o.log, z)), -0.5723649429247001, (o.log1p, series))


def _log_erfc(name: str, dtype: str, threshold: float, why: str) -> Rule:
    """log(erfc(x)) -> switch(x < t, log(erfc(minimum(x, t))), series(maximum(x, t))) for `dtype` x."""
    return rule(
        name,
        (o.log, (o.erfc, {"pattern": "x", "constraint": asymptotic_candidate(dtype, threshold)})),
        (
            o.switch,
            (o.lt, "x", threshold),
            (o.log, (o.erfc, (o.minimum, "x", threshold))),
            _log_erfc_series((o.maximum, "x", threshold)),
        ),
        STABILIZE,
        keeps_type=True,
        examples=("log(erfc(x))",),
        types={"x": f"vector:{dtype}"},
        doc=f"log(erfc(x)) -> switch(x < {threshold:g}, log(erfc(minimum(x, {threshold:g}))), the asymptotic "
        f"series of log(erfc(z)) at z = maximum(x, {threshold:g})) for {dtype} x (PyTensor's local_log_erfc, "
        f"here to full accuracy: {why}): finite where erfc(x) underflows to a subnormal and then to 0.  "
        "Each branch reads x clamped to its side, so neither makes an inf or NaN for the other to "
        "discard, and a NaN stays NaN",
    )


log_erfc = _log_erfc(
    "log_erfc",
    "float64",
    26.0,
    "erfc(x) is normal up to 26.5 and the series' first term left out is below 1e-19 of it from 26 on",
)
log_erfc_float32 = _log_erfc(
    "log_erfc_float32",
    "float32",
    9.0,
    "erfc(x) is normal up to 9.1 and the series' first term left out is below 1e-12 of it from 9 on",
)

# -- sigmoid, expm1, exp -----------------------------------------------------------------------------

one_minus_sigmoid, one_minus_sigmoid_times_minus_one = _negated(
    "one_minus_sigmoid",
    lambda negate: _among_terms(1, negate((o.sigmoid, float_var("x")))),
    (o.add, (o.sigmoid, (o.neg, "x")), "*rest"),
    ("add(1, {n}sigmoid(x)))",),
    "1 - sigmoid(x) -> sigmoid(-x): accurate for large x, where sigmoid(x) rounds to 1",
)
sigmoid_minus_one = rule(
    "sigmoid_minus_one",
    _among_terms(-1, (o.sigmoid, float_var("x"))),
    (o.add, (o.neg, (o.sigmoid, (o.neg, "x"))), "*rest"),
    STABILIZE,
    keeps_type=True,
    examples=("add(-1, sigmoid(x))", "add(sigmoid(x), y, -1)"),
    types=PAIR,
    doc="sigmoid(x) - 1 -> -sigmoid(-x), also among other terms: accurate for large x, where sigmoid(x)"
    " rounds to 1 (one_minus_sigmoid negated)",
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

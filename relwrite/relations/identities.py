"""Identities for accurate forms: the algebra an accuracy search runs backward, as Herbie's rules.

Each rule is equal over the real numbers under its assumptions, and
rounds differently in floating point: that difference is what the search
is for.  ``sqrt(a) - sqrt(b)`` loses every digit when a is close to b;
run forward, `sqrt_difference` gives ``(a - b) / (sqrt(a) + sqrt(b))``,
where the subtraction is of the arguments (exact, or nearly, once the
e-graph has simplified a - b) and nothing cancels.  Run backward the same
rule introduces the conjugate into a quotient.  The e-graph holds both
sides, and the accuracy cost picks.

They are tagged `accuracy` (opt-in): `best_form(cost="accuracy")` and
`pareto` use them; a plain `explore` includes them with
``include=["accuracy"]``.  No rewriting pipeline runs them.  Sums are flat
and sorted, so a difference is a sum holding a negated term, and
``"*rest"`` lets a rule act on a pair among the terms of a wider sum.
Every rule regroups operands of one floating dtype only.

An e-graph's union is unconditional, so an identity whose assumptions bind
two variables that may be one (``sqrt(a * b) = sqrt(a) * sqrt(b)`` for
a, b >= 0, at a = b = x) would merge ``abs(x)`` with ``x`` and collapse the
e-graph; such rules are left out until classes carry the intervals that
decide their assumptions.
"""

from __future__ import annotations

from relwrite.graph import ops as o
from relwrite.relations.algebra import one_float_dtype
from relwrite.relations.registry import Rule, rule

TAGS = ("stabilize", "explore", "accuracy")
REAL = "reassociates"
"""Equal over the reals (docs/rule-safety.md), within the rule's assumptions."""

SCALARS = {"a": "scalar", "b": "scalar", "c": "scalar", "x": "scalar"}


def _difference(minuend: object, subtrahend: object) -> tuple:
    """The pattern minuend - subtrahend among the terms of a sum (the sum's other terms: `rest`)."""
    return (o.add, minuend, (o.neg, subtrahend), "*rest")


# -- conjugates: differences of squares and cubes ---------------------------------------------------

sqrt_difference = rule(
    "sqrt_difference",
    _difference((o.sqrt, "a"), (o.sqrt, "b")),
    (o.add, (o.true_div, (o.add, "a", (o.neg, "b")), (o.add, (o.sqrt, "a"), (o.sqrt, "b"))), "*rest"),
    TAGS,
    semantics=REAL,
    assumptions=("a > 0",),
    where=lambda a, b, rest: one_float_dtype(a, b, rest),
    keeps_type=True,
    examples=("add(sqrt(a), neg(sqrt(b)))", "add(sqrt(x + 1), neg(sqrt(x)), c)"),
    types=SCALARS,
    doc="sqrt(a) - sqrt(b) -> (a - b) / (sqrt(a) + sqrt(b)) (the conjugate: nothing cancels when a is "
    "close to b); backward it takes a quotient by a sum of roots apart.  For a > 0.",
)

sqrt_conjugate_difference = rule(
    "sqrt_conjugate_difference",
    _difference("a", (o.sqrt, "d")),
    (o.add, (o.true_div, (o.add, (o.pow, "a", 2), (o.neg, "d")), (o.add, "a", (o.sqrt, "d"))), "*rest"),
    TAGS,
    semantics=REAL,
    assumptions=("a > 0",),
    where=lambda a, d, rest: one_float_dtype(a, d, rest),
    keeps_type=True,
    examples=("add(a, neg(sqrt(d)))", "add(a, neg(sqrt(d)), c)"),
    types={"a": "scalar", "d": "scalar", "c": "scalar"},
    doc="a - sqrt(d) -> (a**2 - d) / (a + sqrt(d)) (the conjugate of a difference with a root: where a "
    "is close to sqrt(d) the numerator cancels exactly, once simplified, and the denominator not at "
    "all, as in the quadratic formula's -b - sqrt(b*b - 4*a*c) for b < 0); backward it takes the "
    "quotient apart.  For a > 0 (the denominator is not 0).",
)

sqrt_conjugate_sum = rule(
    "sqrt_conjugate_sum",
    (o.add, "a", (o.sqrt, "d"), "*rest"),
    (
        o.add,
        (o.true_div, (o.add, (o.pow, "a", 2), (o.neg, "d")), (o.add, "a", (o.neg, (o.sqrt, "d")))),
        "*rest",
    ),
    TAGS,
    semantics=REAL,
    assumptions=("a < 0",),
    where=lambda a, d, rest: one_float_dtype(a, d, rest),
    keeps_type=True,
    examples=("add(a, sqrt(d))", "add(a, sqrt(d), c)"),
    types={"a": "scalar", "d": "scalar", "c": "scalar"},
    doc="a + sqrt(d) -> (a**2 - d) / (a - sqrt(d)) (the conjugate of a sum with a root: where -a is "
    "close to sqrt(d), as in the quadratic formula's -b + sqrt(b*b - 4*a*c) for b > 0, the numerator "
    "cancels exactly once simplified); backward it takes the quotient apart.  For a < 0 (the "
    "denominator is not 0).",
)


_ROOT = (o.sqrt, (o.add, (o.pow, "x", 2), "*e"))
"""sqrt(x**2 + e): a root of a square perturbed by the other terms `e`."""
_E = (o.add, "*e")


def _perturbed_square_root(
    name: str, pair: tuple, quotient: tuple, assumption: str, example: str, doc: str
) -> Rule:
    """A rule taking the `pair` of terms (x or -x, and +-`_ROOT`) among a sum's to `quotient`: its
    conjugate quotient with x**2 already cancelled from the numerator (that cancellation is exact
    algebra, which the e-graph would otherwise need several rounds to find)."""
    return rule(
        name,
        (o.add, *pair, "*rest"),
        (o.add, quotient, "*rest"),
        TAGS,
        semantics=REAL,
        assumptions=(assumption,),
        where=lambda x, e, rest: one_float_dtype(x, e, rest),
        keeps_type=True,
        examples=(example,),
        types={"x": "scalar", "e": "scalar"},
        doc=doc,
    )


root_square_difference = _perturbed_square_root(
    "root_square_difference",
    ("x", (o.neg, _ROOT)),
    (o.true_div, (o.neg, _E), (o.add, "x", _ROOT)),
    "x > 0",
    "add(x, neg(sqrt(add(x ** 2, e))))",
    "x - sqrt(x**2 + e) -> -e / (x + sqrt(x**2 + e)): the conjugate with x**2 cancelled from its "
    "numerator, so nothing cancels where e is small beside x**2; for x > 0.",
)
root_square_sum = _perturbed_square_root(
    "root_square_sum",
    ("x", _ROOT),
    (o.true_div, (o.neg, _E), (o.add, "x", (o.neg, _ROOT))),
    "x < 0",
    "add(x, sqrt(add(x ** 2, e)))",
    "x + sqrt(x**2 + e) -> -e / (x - sqrt(x**2 + e)) (the conjugate, x**2 cancelled); for x < 0.",
)
neg_root_square_difference = _perturbed_square_root(
    "neg_root_square_difference",
    ((o.neg, "x"), (o.neg, _ROOT)),
    (o.true_div, (o.neg, _E), (o.add, (o.neg, "x"), _ROOT)),
    "x < 0",
    "add(neg(x), neg(sqrt(add(x ** 2, e))))",
    "-x - sqrt(x**2 + e) -> -e / (-x + sqrt(x**2 + e)) (the conjugate, x**2 cancelled: the quadratic "
    "formula's -b - sqrt(b*b - 4*a*c) for b < 0); for x < 0.",
)
neg_root_square_sum = _perturbed_square_root(
    "neg_root_square_sum",
    ((o.neg, "x"), _ROOT),
    (o.true_div, _E, (o.add, "x", _ROOT)),
    "x > 0",
    "add(neg(x), sqrt(add(x ** 2, e)))",
    "-x + sqrt(x**2 + e) -> e / (x + sqrt(x**2 + e)) (the conjugate, x**2 cancelled: the quadratic "
    "formula's -b + sqrt(b*b - 4*a*c) for b > 0); for x > 0.",
)

squares_difference = rule(
    "squares_difference",
    _difference((o.pow, "a", 2), (o.pow, "b", 2)),
    (o.add, (o.mul, (o.add, "a", "b"), (o.add, "a", (o.neg, "b"))), "*rest"),
    TAGS,
    semantics=REAL,
    where=lambda a, b, rest: one_float_dtype(a, b, rest),
    keeps_type=True,
    examples=("add(a ** 2, neg(b ** 2))",),
    types=SCALARS,
    doc="a**2 - b**2 -> (a + b) * (a - b): the difference taken before squaring loses no digits to "
    "the squares' rounding; backward it multiplies out.",
)

cubes_difference = rule(
    "cubes_difference",
    _difference((o.pow, "a", 3), (o.pow, "b", 3)),
    (
        o.add,
        (o.mul, (o.add, "a", (o.neg, "b")), (o.add, (o.pow, "a", 2), (o.mul, "a", "b"), (o.pow, "b", 2))),
        "*rest",
    ),
    TAGS,
    semantics=REAL,
    where=lambda a, b, rest: one_float_dtype(a, b, rest),
    keeps_type=True,
    examples=("add(a ** 3, neg(b ** 3))",),
    types=SCALARS,
    doc="a**3 - b**3 -> (a - b) * (a**2 + a*b + b**2), the cube's conjugate; backward it multiplies out.",
)

neg_quotient = rule(
    "neg_quotient",
    (o.neg, (o.true_div, "a", "b")),
    (o.true_div, (o.neg, "a"), "b"),
    TAGS,
    semantics="exact",
    where=lambda a, b: one_float_dtype(a, b),
    keeps_type=True,
    examples=("-(a / b)",),
    types=SCALARS,
    doc="-(a / b) -> (-a) / b, exactly (rounding is symmetric): a difference of fractions becomes a "
    "sum of them, which add_fractions puts over one denominator.",
)

# -- exp and log ------------------------------------------------------------------------------------

exp_difference = rule(
    "exp_difference",
    _difference((o.exp, "a"), (o.exp, "b")),
    (o.add, (o.mul, (o.exp, "b"), (o.expm1, (o.add, "a", (o.neg, "b")))), "*rest"),
    TAGS,
    semantics=REAL,
    where=lambda a, b, rest: one_float_dtype(a, b, rest),
    keeps_type=True,
    examples=("add(exp(a), neg(exp(b)))", "add(exp(a), neg(exp(b)), c)"),
    types=SCALARS,
    doc="exp(a) - exp(b) -> exp(b) * expm1(a - b): no cancellation when a is close to b; backward it "
    "multiplies out.",
)

log_quotient = rule(
    "log_quotient",
    (o.log, (o.true_div, "a", "b")),
    (o.add, (o.log, "a"), (o.neg, (o.log, "b"))),
    TAGS,
    semantics=REAL,
    assumptions=("a > 0", "b > 0"),
    where=lambda a, b: one_float_dtype(a, b),
    keeps_type=True,
    examples=("log(a / b)",),
    types=SCALARS,
    doc="log(a / b) -> log(a) - log(b) for a, b > 0 (log((1 + x) / (1 - x)) becomes a difference of "
    "log1p's); backward it takes one log of a quotient.",
)

tanh_expm1 = rule(
    "tanh_expm1",
    (o.tanh, "x"),
    (o.true_div, (o.expm1, (o.mul, 2, "x")), (o.add, 2, (o.expm1, (o.mul, 2, "x")))),
    TAGS,
    semantics=REAL,
    where=lambda x: one_float_dtype(x),
    keeps_type=True,
    examples=("tanh(x)",),
    types=SCALARS,
    doc="tanh(x) -> expm1(2x) / (expm1(2x) + 2): tanh through expm1, accurate near 0 where "
    "(exp(2x) - 1) / (exp(2x) + 1) cancels; backward it recognises that quotient as tanh.",
)

# -- trigonometry -----------------------------------------------------------------------------------

sin_sum = rule(
    "sin_sum",
    (o.sin, (o.add, "a", "*bs")),
    (o.add, (o.mul, (o.sin, "a"), (o.cos, (o.add, "*bs"))), (o.mul, (o.cos, "a"), (o.sin, (o.add, "*bs")))),
    TAGS,
    semantics=REAL,
    where=lambda a, bs: bool(bs) and one_float_dtype(a, bs),
    keeps_type=True,
    examples=("sin(a + b)",),
    types=SCALARS,
    doc="sin(a + b) -> sin(a) cos(b) + cos(a) sin(b); backward it gathers the sum of products.",
)

cos_sum = rule(
    "cos_sum",
    (o.cos, (o.add, "a", "*bs")),
    (
        o.add,
        (o.mul, (o.cos, "a"), (o.cos, (o.add, "*bs"))),
        (o.neg, (o.mul, (o.sin, "a"), (o.sin, (o.add, "*bs")))),
    ),
    TAGS,
    semantics=REAL,
    where=lambda a, bs: bool(bs) and one_float_dtype(a, bs),
    keeps_type=True,
    examples=("cos(a + b)",),
    types=SCALARS,
    doc="cos(a + b) -> cos(a) cos(b) - sin(a) sin(b); backward it gathers the difference of products.",
)

sin_difference = rule(
    "sin_difference",
    _difference((o.sin, "a"), (o.sin, "b")),
    (
        o.add,
        (
            o.mul,
            2,
            (o.cos, (o.mul, 0.5, (o.add, "a", "b"))),
            (o.sin, (o.mul, 0.5, (o.add, "a", (o.neg, "b")))),
        ),
        "*rest",
    ),
    TAGS,
    semantics=REAL,
    where=lambda a, b, rest: one_float_dtype(a, b, rest),
    keeps_type=True,
    examples=("add(sin(a), neg(sin(b)))",),
    types=SCALARS,
    doc="sin(a) - sin(b) -> 2 cos((a + b) / 2) sin((a - b) / 2): the difference of arguments instead "
    "of values (sin(x + e) - sin(x) keeps its digits); backward the product becomes a difference.",
)

cos_difference = rule(
    "cos_difference",
    _difference((o.cos, "a"), (o.cos, "b")),
    (
        o.add,
        (
            o.mul,
            -2,
            (o.sin, (o.mul, 0.5, (o.add, "a", "b"))),
            (o.sin, (o.mul, 0.5, (o.add, "a", (o.neg, "b")))),
        ),
        "*rest",
    ),
    TAGS,
    semantics=REAL,
    where=lambda a, b, rest: one_float_dtype(a, b, rest),
    keeps_type=True,
    examples=("add(cos(a), neg(cos(b)))",),
    types=SCALARS,
    doc="cos(a) - cos(b) -> -2 sin((a + b) / 2) sin((a - b) / 2); backward the product becomes a difference.",
)

one_minus_cos = rule(
    "one_minus_cos",
    (o.add, 1, (o.neg, (o.cos, "x")), "*rest"),
    (o.add, (o.mul, 2, (o.pow, (o.sin, (o.mul, 0.5, "x")), 2)), "*rest"),
    TAGS,
    semantics=REAL,
    where=lambda x, rest: one_float_dtype(x, rest),
    keeps_type=True,
    examples=("add(1, neg(cos(x)))", "add(1, neg(cos(x)), a)"),
    types=SCALARS,
    doc="1 - cos(x) -> 2 sin(x/2)**2 (the half angle: no cancellation near 0); backward the square "
    "becomes the difference.",
)

square_quotient = rule(
    "square_quotient",
    (o.true_div, (o.sqr, "a"), (o.sqr, "b")),
    (o.sqr, (o.true_div, "a", "b")),
    TAGS,
    semantics=REAL,
    assumptions=("b != 0",),
    where=lambda a, b: one_float_dtype(a, b),
    keeps_type=True,
    examples=("sqr(a) / sqr(b)",),
    types=SCALARS,
    doc="sqr(a) / sqr(b) -> sqr(a / b): one square of a ratio, which neither underflows nor overflows "
    "where the two squares would ((1 - cos x) / x**2 near 0); backward the ratio's square splits.  "
    "For b != 0.",
)

sin_double = rule(
    "sin_double",
    (o.sin, (o.mul, 2, "x")),
    (o.mul, 2, (o.sin, "x"), (o.cos, "x")),
    TAGS,
    semantics=REAL,
    where=lambda x: one_float_dtype(x),
    keeps_type=True,
    examples=("sin(2 * x)",),
    types=SCALARS,
    doc="sin(2x) -> 2 sin(x) cos(x), the double angle; backward the product of sine and cosine.",
)

cos_double = rule(
    "cos_double",
    (o.cos, (o.mul, 2, "x")),
    (o.add, 1, (o.neg, (o.mul, 2, (o.pow, (o.sin, "x"), 2)))),
    TAGS,
    semantics=REAL,
    where=lambda x: one_float_dtype(x),
    keeps_type=True,
    examples=("cos(2 * x)",),
    types=SCALARS,
    doc="cos(2x) -> 1 - 2 sin(x)**2, the double angle; backward it halves the angle.",
)

sin_cos_squares = rule(
    "sin_cos_squares",
    (o.add, (o.pow, (o.sin, "x"), 2), (o.pow, (o.cos, "x"), 2), "*rest"),
    (o.add, (o.fill, "x", 1), "*rest"),
    TAGS,
    semantics=REAL,
    where=lambda x, rest: one_float_dtype(x, rest),
    keeps_type=True,
    examples=("sin(x) ** 2 + cos(x) ** 2", "sin(x) ** 2 + cos(x) ** 2 + a"),
    types=SCALARS,
    doc="sin(x)**2 + cos(x)**2 -> ones shaped like x (fill(x, 1)); backward such ones become the sum.",
)

tan_quotient = rule(
    "tan_quotient",
    (o.tan, "x"),
    (o.true_div, (o.sin, "x"), (o.cos, "x")),
    TAGS,
    semantics=REAL,
    where=lambda x: one_float_dtype(x),
    keeps_type=True,
    examples=("tan(x)",),
    types=SCALARS,
    doc="tan(x) -> sin(x) / cos(x): the sine and cosine identities then apply to a tangent; backward "
    "the quotient becomes one tan.",
)

tan_difference = rule(
    "tan_difference",
    _difference((o.tan, "a"), (o.tan, "b")),
    (
        o.add,
        (o.true_div, (o.sin, (o.add, "a", (o.neg, "b"))), (o.mul, (o.cos, "a"), (o.cos, "b"))),
        "*rest",
    ),
    TAGS,
    semantics=REAL,
    where=lambda a, b, rest: one_float_dtype(a, b, rest),
    keeps_type=True,
    examples=("add(tan(a), neg(tan(b)))", "add(tan(a), neg(tan(b)), c)"),
    types=SCALARS,
    doc="tan(a) - tan(b) -> sin(a - b) / (cos(a) cos(b)): the difference of arguments instead of values "
    "(tan(x + e) - tan(x) keeps its digits); backward the quotient becomes a difference.",
)

tan_half_angle = rule(
    "tan_half_angle",
    (o.true_div, (o.add, 1, (o.neg, (o.cos, "x"))), (o.sin, "x")),
    (o.tan, (o.mul, 0.5, "x")),
    TAGS,
    semantics=REAL,
    assumptions=("x != 0",),
    where=lambda x: one_float_dtype(x),
    keeps_type=True,
    examples=("add(1, neg(cos(x))) / sin(x)",),
    types=SCALARS,
    doc="(1 - cos(x)) / sin(x) -> tan(x / 2), the half angle (no cancellation near 0, no 0 / 0 at "
    "x = 0's neighbours); backward tan of a half becomes the quotient.  For x != 0.",
)

atan_difference = rule(
    "atan_difference",
    _difference((o.atan, "a"), (o.atan, "b")),
    (
        o.add,
        (o.atan, (o.true_div, (o.add, "a", (o.neg, "b")), (o.add, 1, (o.mul, "a", "b")))),
        "*rest",
    ),
    TAGS,
    semantics=REAL,
    assumptions=("a >= 0", "b >= 0"),
    where=lambda a, b, rest: one_float_dtype(a, b, rest),
    keeps_type=True,
    examples=("add(atan(a), neg(atan(b)))", "add(atan(a), neg(atan(b)), c)"),
    types=SCALARS,
    doc="atan(a) - atan(b) -> atan((a - b) / (1 + a b)), which holds where a b > -1 (here: a, b >= 0): "
    "atan(N + 1) - atan(N) keeps its digits as atan(1 / (1 + N (N + 1))); backward one atan of a "
    "quotient becomes a difference.",
)

# -- roots, exp and log ----------------------------------------------------------------------------

cbrt_difference = rule(
    "cbrt_difference",
    _difference((o.cbrt, "a"), (o.cbrt, "b")),
    (
        o.add,
        (
            o.true_div,
            (o.add, "a", (o.neg, "b")),
            (
                o.add,
                (o.pow, (o.cbrt, "a"), 2),
                (o.mul, (o.cbrt, "a"), (o.cbrt, "b")),
                (o.pow, (o.cbrt, "b"), 2),
            ),
        ),
        "*rest",
    ),
    TAGS,
    semantics=REAL,
    assumptions=("a != 0",),
    where=lambda a, b, rest: one_float_dtype(a, b, rest),
    keeps_type=True,
    examples=("add(cbrt(a), neg(cbrt(b)))", "add(cbrt(x + 1), neg(cbrt(x)), c)"),
    types=SCALARS,
    doc="cbrt(a) - cbrt(b) -> (a - b) / (cbrt(a)**2 + cbrt(a) cbrt(b) + cbrt(b)**2), the cube root's "
    "conjugate (cubes_difference with a**3 = cbrt(a)**3): nothing cancels when a is close to b; "
    "backward it takes such a quotient apart.  For a != 0.",
)

cbrt_cube = rule(
    "cbrt_cube",
    (o.pow, (o.cbrt, "a"), 3),
    "a",
    TAGS,
    semantics=REAL,
    where=lambda a: one_float_dtype(a),
    keeps_type=True,
    examples=("cbrt(a) ** 3",),
    types=SCALARS,
    doc="cbrt(a)**3 -> a (the real cube root, negative a included): a cube of roots that "
    "cubes_difference makes folds.",
)

expm1_sum = rule(
    "expm1_sum",
    (o.expm1, (o.add, "a", "*bs")),
    (
        o.add,
        (o.mul, (o.expm1, "a"), (o.expm1, (o.add, "*bs"))),
        (o.expm1, "a"),
        (o.expm1, (o.add, "*bs")),
    ),
    TAGS,
    semantics=REAL,
    where=lambda a, bs: bool(bs) and one_float_dtype(a, bs),
    keeps_type=True,
    examples=("expm1(a + b)",),
    types=SCALARS,
    doc="expm1(a + b) -> expm1(a) expm1(b) + expm1(a) + expm1(b) (exp(a + b) - 1 without an exp): "
    "a quotient by expm1(a) expm1(b) then splits into terms that do not overflow together; backward "
    "the sum becomes one expm1.",
)

# -- hyperbolic functions ----------------------------------------------------------------------------

sinh_exp = rule(
    "sinh_exp",
    _difference((o.exp, "x"), (o.exp, (o.neg, "x"))),
    (o.add, (o.mul, 2, (o.sinh, "x")), "*rest"),
    TAGS,
    semantics=REAL,
    where=lambda x, rest: one_float_dtype(x, rest),
    keeps_type=True,
    examples=("add(exp(x), neg(exp(-x)))", "add(exp(x), neg(exp(-x)), a)"),
    types=SCALARS,
    doc="exp(x) - exp(-x) -> 2 sinh(x): no cancellation near 0; backward sinh becomes exponentials.",
)

cosh_exp = rule(
    "cosh_exp",
    (o.add, (o.exp, "x"), (o.exp, (o.neg, "x")), "*rest"),
    (o.add, (o.mul, 2, (o.cosh, "x")), "*rest"),
    TAGS,
    semantics=REAL,
    where=lambda x, rest: one_float_dtype(x, rest),
    keeps_type=True,
    examples=("exp(x) + exp(-x)", "exp(x) + exp(-x) + a"),
    types=SCALARS,
    doc="exp(x) + exp(-x) -> 2 cosh(x); backward cosh becomes exponentials.",
)

exp_sum_minus_two = rule(
    "exp_sum_minus_two",
    (o.add, (o.exp, "x"), (o.exp, (o.neg, "x")), -2, "*rest"),
    (o.add, (o.mul, 4, (o.pow, (o.sinh, (o.mul, 0.5, "x")), 2)), "*rest"),
    TAGS,
    semantics=REAL,
    where=lambda x, rest: one_float_dtype(x, rest),
    keeps_type=True,
    examples=("add(exp(x), exp(-x), -2)", "add(exp(x), exp(-x), -2, a)"),
    types=SCALARS,
    doc="exp(x) + exp(-x) - 2 -> 4 sinh(x/2)**2, i.e. 2 (cosh(x) - 1), the hyperbolic half angle (as "
    "one_minus_cos): no cancellation near 0; backward the square becomes the sum.",
)

"""Exploration against egglog-python, side by side, where the two can do the same work.

Rows (each: relwrite's time, egglog's, and the ratio egglog / relwrite;
medians of `--repeat` runs, every run in a fresh e-graph):

- sum reversal, n = 6, 8, 10: prove that x0 + x1 + ... equals the sum in
  reverse order.  relwrite: `prove` (add holds a sorted operand multiset,
  so the two are one e-node at once).  egglog: commutativity and
  associativity rewrites, run until the two are equal ("egglog") and run
  to saturation ("egglog sat", what the anchors quote: 1.2-1.5 s at n = 10).
- the first 20 distinct forms of ``A @ (x + y)`` and of the seed's
  ``A @ (x + (y + (B @ (z + w))))``: relwrite `explore` with `dot_distribute`
  (AC is built in); egglog: AC plus dot distribution both ways, then
  `extract_multiple(expr, 20)`.  The forms each one lists are counted
  (egglog's may repeat a form up to AC).  Below each, relwrite alone: the
  same with every catalogue rule (explore and unsafe ones included, within
  2 s), and the numerical re-check of those forms that `explore` does
  before handing each out (timed apart from the rows above).
- stabilizations: time to the cheapest form.  relwrite: `best_form(...,
  cost="accuracy")` with all default rules (mpmath reference, re-check
  included); egglog: the one stabilizing rewrite and extraction by size
  (egglog has no accuracy measure, so its side only finds the smaller form).

egglog is an optional extra: when it is missing the script installs it
with pip into the running interpreter (`--no-install` to skip; its rows
then show relwrite alone).  It is never a dependency of relwrite.

    python benchmarks/explore.py
    python benchmarks/explore.py --repeat 3 --no-install
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from itertools import islice

from relwrite import matrix, parse, scalar, vector
from relwrite.engine.explore.api import Exploration, best_form, check_form, prove
from relwrite.engine.explore.runner import Limits
from relwrite.graph import ops
from relwrite.graph.printing import pprint

FORM_LIMITS = Limits(seconds=2)
GOAL_LIMITS = Limits(nodes=5_000, seconds=1)


def median_time(run: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The median wall time of `repeat` calls of `run`, and the last call's result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


# -- relwrite ---------------------------------------------------------------------------------------


def relwrite_sum_reversal(n: int) -> Callable[[], object]:
    xs = [scalar(f"x{k}") for k in range(n)]
    forward, backward = xs[0], xs[-1]
    for x in xs[1:]:
        forward = forward + x
    for x in reversed(xs[:-1]):
        backward = backward + x

    def run() -> object:
        proof = prove(forward, backward)
        assert proof is not None
        return proof

    return run


def seed_small() -> object:
    a, x, y = matrix("A", shape=(4, 4)), vector("x", shape=(4,)), vector("y", shape=(4,))
    return ops.dot(a, x + y)


def seed_large() -> object:
    a, b = matrix("A", shape=(4, 4)), matrix("B", shape=(4, 4))
    x, y, z, w = (vector(n, shape=(4,)) for n in "xyzw")
    return ops.dot(a, x + (y + ops.dot(b, z + w)))


def relwrite_forms(build: Callable[[], object], every_rule: bool, count: int = 20) -> Callable[[], list]:
    """The first `count` forms: with dot_distribute alone (egglog's work) or with every catalogue rule."""
    rules = None if every_rule else ["dot_distribute"]

    def run() -> list:
        exploration = Exploration([build()], rules, include=("explore", "unsafe"), limits=FORM_LIMITS)
        exploration.run()
        return list(islice(exploration.forms(0, check=False), count))

    return run


def relwrite_check(build: Callable[[], object], count: int = 20) -> Callable[[], int]:
    """Re-check numerically the first `count` forms (what `explore` does before handing each out)."""
    expr = build()
    exploration = Exploration([expr], include=("explore", "unsafe"), limits=FORM_LIMITS)
    exploration.run()
    forms = list(islice(exploration.forms(0, check=False), count))

    def run() -> int:
        for form in forms:
            check_form(expr, form, exploration.tags(form))
        return len(forms)

    return run


def relwrite_stable(text: str, types: dict) -> Callable[[], object]:
    def run() -> object:
        return best_form(parse(text, types=types), cost="accuracy", limits=GOAL_LIMITS)

    return run


# -- egglog -----------------------------------------------------------------------------------------


def load_egglog(install: bool):
    try:
        return importlib.import_module("egglog")
    except ImportError:
        if not install:
            return None
    print("installing egglog (an optional extra of this benchmark) ...", flush=True)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "egglog"], check=False)
    if done.returncode != 0:
        return None
    importlib.invalidate_caches()
    try:
        return importlib.import_module("egglog")
    except ImportError:
        return None


_LANGUAGE: list = []


def egglog_language(egglog):
    """A small term language for egglog: variables, numbers, + @ and a few functions (declared once)."""
    if _LANGUAGE:
        return _LANGUAGE[0]

    class T(egglog.Expr):
        def __init__(self, value: egglog.i64Like) -> None: ...

        @classmethod
        def var(cls, name: egglog.StringLike) -> T: ...

        def __add__(self, other: T) -> T: ...

        def __matmul__(self, other: T) -> T: ...

        def __neg__(self) -> T: ...

    functions = {}
    for name in ("log", "exp", "sigmoid", "softplus", "log1p", "expm1", "softmax", "log_softmax"):

        @egglog.function(egg_fn=f"term_{name}")
        def f(x: T) -> T: ...

        functions[name] = f
    _LANGUAGE.append((T, functions))
    return T, functions


def ac_rules(egglog, T):
    a, b, c = egglog.vars_("a b c", T)
    return [egglog.rewrite(a + b).to(b + a), egglog.rewrite(a + (b + c)).to((a + b) + c)]


def egglog_sum_reversal(egglog, n: int, saturate: bool) -> Callable[[], object]:
    T, _ = egglog_language(egglog)
    rules = egglog.ruleset(*ac_rules(egglog, T))
    xs = [T.var(f"x{k}") for k in range(n)]
    forward, backward = xs[0], xs[-1]
    for x in xs[1:]:
        forward = forward + x
    for x in reversed(xs[:-1]):
        backward = backward + x

    def run() -> object:
        g = egglog.EGraph()
        g.register(forward, backward)
        if saturate:
            g.run(rules.saturate())
        else:
            while not g.check_bool(egglog.eq(forward).to(backward)):
                g.run(rules)
        assert g.check_bool(egglog.eq(forward).to(backward))
        return g

    return run


def egglog_forms(egglog, large: bool, count: int = 20) -> Callable[[], list]:
    T, _ = egglog_language(egglog)
    a, b, c = egglog.vars_("a b c", T)
    rules = egglog.ruleset(*ac_rules(egglog, T), egglog.birewrite(a @ (b + c)).to((a @ b) + (a @ c)))
    A, B = T.var("A"), T.var("B")
    x, y, z, w = (T.var(n) for n in "xyzw")
    expr = A @ (x + (y + (B @ (z + w)))) if large else A @ (x + y)

    def run() -> list:
        g = egglog.EGraph()
        g.register(expr)
        g.run(rules.saturate())
        return g.extract_multiple(expr, count)

    return run


STABILIZATIONS = [
    ("log(1 + exp(x))", {}, lambda f, one, x: (f["log"](one + f["exp"](x)), f["softplus"](x))),
    ("log(sigmoid(x))", {}, lambda f, one, x: (f["log"](f["sigmoid"](x)), -f["softplus"](-x))),
    ("exp(x) - 1", {}, lambda f, one, x: (f["exp"](x) + -one, f["expm1"](x))),
    ("log(1 + x)", {}, lambda f, one, x: (f["log"](one + x), f["log1p"](x))),
    ("log(softmax(x))", {"x": "vector"}, lambda f, one, x: (f["log"](f["softmax"](x)), f["log_softmax"](x))),
]


def egglog_stable(egglog, build) -> Callable[[], object]:
    T, functions = egglog_language(egglog)
    v = egglog.var("v", T)
    lhs, rhs = build(functions, T(1), v)
    rules = egglog.ruleset(egglog.rewrite(lhs).to(rhs), *ac_rules(egglog, T))
    expr, _ = build(functions, T(1), T.var("x"))

    def run() -> object:
        g = egglog.EGraph()
        g.register(expr)
        g.run(rules * 4)  # enough for the one rewrite; saturating exp(x) + -1 under AC did not end in egglog
        return g.extract(expr)

    return run


# -- the table --------------------------------------------------------------------------------------


def row(label: str, ours: float, theirs: float | None, note: str = "") -> None:
    other = "-" if theirs is None else f"{theirs * 1000:9.1f} ms"
    ratio = "-" if theirs is None else f"{theirs / ours:.3g}x"
    print(f"{label:44s} {ours * 1000:9.1f} ms  {other:>12s}  {ratio:>9s}  {note}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (the median is shown)")
    parser.add_argument("--no-install", action="store_true", help="do not pip-install egglog when missing")
    args = parser.parse_args(argv)
    egglog = load_egglog(not args.no_install)
    print(f"{'work':44s} {'relwrite':>12s}  {'egglog':>12s}  {'ratio':>9s}  notes")

    for n in (6, 8, 10):
        ours, _ = median_time(relwrite_sum_reversal(n), args.repeat)
        theirs = sat = None
        if egglog is not None:
            theirs, _ = median_time(egglog_sum_reversal(egglog, n, saturate=False), args.repeat)
            sat, _ = median_time(egglog_sum_reversal(egglog, n, saturate=True), max(1, args.repeat // 2))
        row(f"sum reversal n={n}", ours, theirs, "" if sat is None else f"egglog sat {sat * 1000:.1f} ms")

    seeds = (("A @ (x + y)", seed_small, False), ("A @ (x + (y + (B @ (z + w))))", seed_large, True))
    for label, build, large in seeds:
        ours, forms = median_time(relwrite_forms(build, every_rule=False), args.repeat)
        theirs, found = (None, None)
        if egglog is not None:
            theirs, found = median_time(egglog_forms(egglog, large), args.repeat)
        note = f"forms: relwrite {len(forms)}" + ("" if found is None else f", egglog {len(found)}")
        row(f"20 forms of {label}", ours, theirs, note)
        every, forms = median_time(relwrite_forms(build, every_rule=True), max(1, args.repeat // 2))
        print(f"{'  all rules, relwrite alone':44s} {every * 1000:9.1f} ms  ({len(forms)} forms)", flush=True)
        checked, count = median_time(relwrite_check(build), 1)
        print(
            f"{'  re-checking them, relwrite alone':44s} {checked * 1000:9.1f} ms  ({count} forms)",
            flush=True,
        )

    for text, types, build in STABILIZATIONS:
        ours, form = median_time(relwrite_stable(text, types), args.repeat)
        theirs = None
        if egglog is not None:
            theirs, _ = median_time(egglog_stable(egglog, build), args.repeat)
        row(f"stable form of {text}", ours, theirs, f"relwrite: {pprint(form.expr)} ({form.cost:.2f} bits)")


if __name__ == "__main__":
    main()

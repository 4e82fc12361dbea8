"""Exploration's figures (issue 25, "Numbers"), relwrite beside egglog where the two do the same work.

Sections (times are medians of `--repeat` runs, each run in a fresh e-graph):

1. Equal work: the same rules on the same input in both, over binary
   operators neither treats as associative or commutative (relwrite's `add`
   and `mul` hold sorted operand multisets, so this benchmark declares its
   own binary `plus`, `times` and `div` ops and states commutativity and
   associativity as rules).  Rows: distributivity (both ways) of `dot` over
   `plus` on ``A @ (x + (y + (B @ (z + w))))``, to saturation;
   commutativity + associativity of 6, 7 and 8 leaves, to saturation; the
   seed's proof ``z + (y*x/y)*(z/x) = 2*z``, run until the two sides are
   equal.  Each side shows its time (building the e-graph and running the
   rules), its e-nodes and e-nodes per second; the ratio is relwrite /
   egglog, goal <= 10x.  The rows run to saturation build the same e-graph
   on both sides (equal e-node counts).  The seed's proof stops when the two
   sides are equal, and from its fourth iteration on relwrite's e-graph is
   the smaller: relwrite folds constants (``1 * 1`` joins the class of 1)
   and declines an answer that would hold its own class as a proper subterm
   (once ``x * 1 = x``, ``(x * 1) * 1`` only wraps x's class); with both
   turned off it builds egglog's 47, 104 and 330 e-nodes at iterations 4-6.
2. `prove` of an n-term sum and its reversal, n = 10, 50, 200, with the
   default rules: goal < 50 ms each.
3. `explore` at scale, all forms listed: a 2,000-node DAG with shared
   subterms (a chain of binary and unary ops whose second operands are drawn
   from anywhere before) and a 50-term sum, within their limits plus 10%,
   with no RecursionError.
4. Rewrite speed of the equilibrium engine: the sum of the per-case medians
   of `benchmarks/rewrite.py --timings` (each run a process of its own).
   With `--baseline REV` the same measurement runs on relwrite at git
   revision REV too (a temporary `git worktree`, put on PYTHONPATH), the two
   alternating; goal: this checkout / REV <= 1.05x.
5. relwrite alone: the forms of ``A @ (x + y)`` and of the seed above with
   every catalogue rule, their numerical re-check, and the most accurate
   form of five expressions (`best_form(..., cost="accuracy")`).

egglog is an optional extra: when it is missing the script installs it
with pip into the running interpreter (`--no-install` to skip; its columns
are then empty).  It is never a dependency of relwrite.  `--quick` runs every
row on tiny inputs (a smoke test, what tests/test_benchmarks.py runs).
`--only TEXT` runs only the equal-work rows whose label holds TEXT (e.g.
``--only "comm + assoc"``), and no other section.

    python benchmarks/explore.py
    python benchmarks/explore.py --repeat 3 --baseline main
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache, partial
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from relwrite import Limits, best_form, explore, float64, matrix, parse, prove, vector
from relwrite.engine.explore import Exploration, Report, check_form
from relwrite.graph import ops
from relwrite.graph.basic import Variable
from relwrite.graph.ops import Elemwise
from relwrite.graph.printing import pprint
from relwrite.relations.registry import Rule, rule

HERE = Path(__file__).resolve().parent
WORK = Limits(iterations=100, nodes=100_000, classes=100_000, seconds=math.inf, rule_seconds=math.inf)
"""Limits of the equal-work rows: budgets in work only, so no side stops on the clock."""
SCALE_LIMITS = Limits(seconds=2.0)
FORM_LIMITS = Limits(seconds=2.0)
GOAL_LIMITS = Limits(nodes=5_000, seconds=1.0)


def median_time(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The median wall time of `repeat` calls of `run`, and the last call's result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def goal(met: bool) -> str:
    return "met" if met else "NOT met"


# -- 1. equal work: binary operators, the same rules on both sides ----------------------------------


def _binary(name: str, ufunc: np.ufunc) -> Elemwise:
    """A binary elementwise op that is only itself to the e-graph (neither associative nor commutative)."""
    cls = type(name, (Elemwise,), {"nin": 2, "dtype_rule": ufunc, "__module__": __name__})
    cls.op_name = name.lower()
    return cls()


plus, times, div = _binary("Plus", np.add), _binary("Times", np.multiply), _binary("Div", np.true_divide)


@dataclass
class Side:
    """One engine's run of a row: median seconds, e-nodes, iterations, why it stopped."""

    seconds: float
    nodes: int
    iterations: int
    stop: str

    @property
    def rate(self) -> float:
        return self.nodes / self.seconds if self.seconds > 0 else math.inf


def relwrite_side(
    exprs: list[Variable], rules: list[Rule], direction: str, prove_equal: bool, repeat: int
) -> Side:
    """Time `Exploration(exprs, rules)` run to saturation, or (`prove_equal`) until exprs[0] == exprs[1]."""

    def run() -> Report:
        exploration = Exploration(exprs, rules, direction=direction, limits=WORK)
        if prove_equal:
            if exploration.proof(check=False) is None:
                raise RuntimeError(f"relwrite did not prove {exprs[0]} = {exprs[1]} within {WORK}")
            return exploration.report
        return exploration.run()

    seconds, report = median_time(run, repeat)
    return Side(seconds, report.nodes, report.iterations, report.stop_reason)


def distributivity_relwrite(repeat: int) -> Side:
    a, b = matrix("A", shape=(4, 4)), matrix("B", shape=(4, 4))
    x, y, z, w = (vector(n, shape=(4,)) for n in "xyzw")
    expr = ops.dot(a, plus(x, plus(y, ops.dot(b, plus(z, w)))))
    distribute = rule(
        "distribute", (ops.dot, "a", (plus, "b", "c")), (plus, (ops.dot, "a", "b"), (ops.dot, "a", "c"))
    )
    return relwrite_side([expr], [distribute], "both", False, repeat)


def comm_assoc_relwrite(leaves: int, repeat: int) -> Side:
    xs = [float64(f"x{k}") for k in range(leaves)]
    expr = xs[0]
    for x in xs[1:]:
        expr = plus(expr, x)
    rules = [
        rule("comm", (plus, "a", "b"), (plus, "b", "a")),
        rule("assoc", (plus, "a", (plus, "b", "c")), (plus, (plus, "a", "b"), "c")),
    ]
    return relwrite_side([expr], rules, "forward", False, repeat)


def seed_proof_relwrite(repeat: int) -> Side:
    x, y, z = (float64(n) for n in "xyz")
    lhs = plus(z, times(div(times(y, x), y), div(z, x)))
    rhs = times(2.0, z)
    rules = [
        rule("comm_mul", (times, "a", "b"), (times, "b", "a")),
        rule("assoc_mul", (times, "a", (times, "b", "c")), (times, (times, "a", "b"), "c")),
        rule("mul_div", (div, (times, "a", "b"), "c"), (times, "a", (div, "b", "c"))),
        rule("div_self", (div, "a", "a"), 1, assumptions=("a != 0",)),
        rule("mul_one", (times, "a", 1), "a"),
        rule("div_mul", (times, (div, "a", "b"), "b"), "a", assumptions=("b != 0",)),
        rule("add_self", (plus, "a", "a"), (times, 2, "a")),
    ]
    return relwrite_side([lhs, rhs], rules, "forward", True, repeat)


@cache
def egglog_terms(egglog: Any) -> type:
    """egglog's term language for these rows: numbers, named variables and binary + * / @."""

    class T(egglog.Expr):
        def __init__(self, value: egglog.i64Like) -> None: ...

        @classmethod
        def var(cls, name: egglog.StringLike) -> T: ...

        def __add__(self, other: T) -> T: ...

        def __mul__(self, other: T) -> T: ...

        def __truediv__(self, other: T) -> T: ...

        def __matmul__(self, other: T) -> T: ...

    return T


def egglog_side(egglog: Any, exprs: list[Any], rules: Any, prove_equal: bool, repeat: int) -> Side:
    """Time a fresh egglog EGraph holding `exprs` run to saturation, or until exprs[0] == exprs[1]
    (at most WORK.iterations iterations, as relwrite)."""

    def run() -> tuple[Any, Any]:
        egraph = egglog.EGraph()
        egraph.register(*exprs)
        if prove_equal:
            same = egglog.eq(exprs[0]).to(exprs[1])
            report = egraph.run(WORK.iterations, same, ruleset=rules)
            if not egraph.check_bool(same):
                raise RuntimeError(
                    f"egglog did not prove {exprs[0]} = {exprs[1]} within {WORK.iterations} iterations"
                )
        else:
            report = egraph.run(rules.saturate())
        return egraph, report

    seconds, (egraph, report) = median_time(run, repeat)
    nodes = sum(size for _, size in egraph.all_function_sizes())
    stop = "goal reached" if prove_equal else "saturated"
    return Side(seconds, nodes, len(report.iterations), stop)


def distributivity_egglog(egglog: Any, repeat: int) -> Side:
    T = egglog_terms(egglog)
    a, b, c = egglog.vars_("a b c", T)
    rules = egglog.ruleset(egglog.birewrite(a @ (b + c)).to((a @ b) + (a @ c)))
    A, B = T.var("A"), T.var("B")
    x, y, z, w = (T.var(n) for n in "xyzw")
    return egglog_side(egglog, [A @ (x + (y + (B @ (z + w))))], rules, False, repeat)


def comm_assoc_egglog(egglog: Any, leaves: int, repeat: int) -> Side:
    T = egglog_terms(egglog)
    a, b, c = egglog.vars_("a b c", T)
    rules = egglog.ruleset(egglog.rewrite(a + b).to(b + a), egglog.rewrite(a + (b + c)).to((a + b) + c))
    xs = [T.var(f"x{k}") for k in range(leaves)]
    expr = xs[0]
    for x in xs[1:]:
        expr = expr + x
    return egglog_side(egglog, [expr], rules, False, repeat)


def seed_proof_egglog(egglog: Any, repeat: int) -> Side:
    T = egglog_terms(egglog)
    a, b, c = egglog.vars_("a b c", T)
    rewrite = egglog.rewrite
    rules = egglog.ruleset(
        rewrite(a * b).to(b * a),
        rewrite(a * (b * c)).to((a * b) * c),
        rewrite((a * b) / c).to(a * (b / c)),
        rewrite(a / a).to(T(1)),
        rewrite(a * T(1)).to(a),
        rewrite((a / b) * b).to(a),
        rewrite(a + a).to(T(2) * a),
    )
    x, y, z = (T.var(n) for n in "xyz")
    return egglog_side(egglog, [z + ((y * x) / y) * (z / x), T(2) * z], rules, True, repeat)


def equal_work(egglog: Any, repeat: int, leaves: tuple[int, ...], only: str | None = None) -> None:
    print("1. Equal work: binary (non-AC) ops, the same rules and input on both sides")
    header = (
        f"{'row':<34} | {'relwrite':>10} {'e-nodes':>8} {'e-nodes/s':>10} | {'egglog':>10} {'e-nodes':>8} "
        f"{'e-nodes/s':>10} | {'ratio':>8} | goal (<= 10x)  notes"
    )
    print(header)
    print("-" * len(header))
    rows: list[tuple[str, Callable[[], Side], Callable[[Any], Side]]] = [
        (
            "distributivity A@(x+(y+(B@(z+w))))",
            lambda: distributivity_relwrite(repeat),
            lambda egglog: distributivity_egglog(egglog, repeat),
        )
    ]
    for n in leaves:
        rows.append(
            (
                f"comm + assoc, {n} leaves",
                lambda n=n: comm_assoc_relwrite(n, repeat),
                lambda egglog, n=n: comm_assoc_egglog(egglog, n, repeat),
            )
        )
    rows.append(
        (
            "seed's proof z+(y*x/y)*(z/x) = 2*z",
            lambda: seed_proof_relwrite(repeat),
            lambda egglog: seed_proof_egglog(egglog, repeat),
        )
    )
    for label, ours_of, theirs_of in rows:
        if only is not None and only.lower() not in label.lower():
            continue
        theirs = None if egglog is None else theirs_of(egglog)
        print(equal_work_row(label, ours_of(), theirs), flush=True)
    print()


def equal_work_row(label: str, ours: Side, theirs: Side | None) -> str:
    mine = f"{ours.seconds * 1e3:7.1f} ms {ours.nodes:8d} {ours.rate:10.3g}"
    notes = f"relwrite: {ours.stop}, {ours.iterations} iterations"
    if theirs is None:
        return f"{label:<34} | {mine} | {'-':>10} {'-':>8} {'-':>10} | {'-':>8} | {'-':13s}  {notes}"
    ratio = ours.seconds / theirs.seconds
    notes += f"; egglog: {theirs.stop}, {theirs.iterations} iterations"
    if ours.nodes != theirs.nodes:
        notes += "; e-graphs differ in size (constant folding, answers wrapping their class)"
    other = f"{theirs.seconds * 1e3:7.1f} ms {theirs.nodes:8d} {theirs.rate:10.3g}"
    return f"{label:<34} | {mine} | {other} | {ratio:7.3g}x | {goal(ratio <= 10):13s}  {notes}"


def load_egglog(install: bool) -> Any:
    """egglog, installed with pip into this interpreter when missing and `install`; None if unavailable."""
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


# -- 2. prove an n-term sum equal to its reversal ---------------------------------------------------


def sum_and_reversal(n: int) -> tuple[Variable, Variable]:
    xs = [float64(f"x{k}") for k in range(n)]
    forward, backward = xs[0], xs[-1]
    for x in xs[1:]:
        forward = forward + x
    for x in reversed(xs[:-1]):
        backward = backward + x
    return forward, backward


def prove_sum(n: int, repeat: int) -> tuple[float, int]:
    """Median seconds of `prove(sum, reversed sum)` and the proof's number of steps."""
    forward, backward = sum_and_reversal(n)

    def run() -> int:
        proof = prove(forward, backward)
        if proof is None:
            raise RuntimeError(f"prove found no proof for the {n}-term sum")
        return len(proof.steps)

    return median_time(run, repeat)


def proving(repeat: int, sizes: tuple[int, ...]) -> None:
    print("2. prove(x0 + ... + x(n-1), x(n-1) + ... + x0), default rules")
    for n in sizes:
        seconds, steps = prove_sum(n, repeat)
        print(
            f"  n = {n:<4d} {seconds * 1e3:8.2f} ms  ({steps} steps)  goal (< 50 ms): {goal(seconds < 0.05)}"
        )
    print()


# -- 3. explore at scale ----------------------------------------------------------------------------


def shared_dag(n: int, seed: int = 0) -> Variable:
    """A DAG of `n` apply nodes over four vectors: each node applies an op to the node before it and
    (binary ops) to an earlier node drawn at random, so subterms are shared and every node is used."""
    rng = random.Random(seed)
    pool: list[Variable] = [vector(f"x{k}") for k in range(4)]
    binary = (ops.add, ops.mul, ops.sub)
    unary = (ops.tanh, ops.exp, ops.sin, ops.neg, ops.sqr)
    for _ in range(n):
        if rng.random() < 0.6:
            pool.append(rng.choice(binary)(pool[-1], rng.choice(pool)))
        else:
            pool.append(rng.choice(unary)(pool[-1]))
    return pool[-1]


def explore_all(expr: Variable, limits: Limits, repeat: int) -> tuple[float, str]:
    """Median seconds of listing every form `explore` gives within `limits`, and how the last went."""
    reports: list[Report] = []

    def run() -> str:
        try:
            forms = list(explore(expr, limits=limits, progress=reports.append))
        except RecursionError:
            return "RecursionError"
        if not reports:
            return f"forms: {len(forms)}"
        last = reports[-1]  # the run's report as of its last iteration
        stop = f", {last.stop_reason}" if last.stop_reason else ""
        return f"forms: {len(forms)}, {last.nodes} e-nodes after {last.iterations} iterations{stop}"

    return median_time(run, repeat)


def exploring(repeat: int, dag_nodes: int, sum_terms: int, limits: Limits = SCALE_LIMITS) -> None:
    print(f"3. explore at scale, every form listed (limits: {limits.seconds:g} s, default budgets)")
    cases = (
        (f"{dag_nodes}-node DAG with shared subterms", shared_dag(dag_nodes)),
        (f"{sum_terms}-term sum", sum_and_reversal(sum_terms)[0]),
    )
    for label, expr in cases:
        seconds, outcome = explore_all(expr, limits, repeat)
        met = seconds <= limits.seconds * 1.1 and outcome != "RecursionError"
        print(
            f"  {label:<36} limit {limits.seconds * 1e3:6.0f} ms  took {seconds * 1e3:8.1f} ms  "
            f"({outcome})  goal (<= limit + 10%, no RecursionError): {goal(met)}",
            flush=True,
        )
    print()


# -- 4. rewrite speed of the equilibrium engine -----------------------------------------------------


def rewrite_timings(root: Path, chain: int, long_chain: int) -> dict[str, float]:
    """One run of benchmarks/rewrite.py's `--timings` (seconds per case) on the relwrite at `root`."""
    command = [sys.executable, str(HERE / "rewrite.py"), "--timings", "--chain", str(chain)]
    command += ["--long-chain", str(long_chain)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"benchmarks/rewrite.py --timings failed on {root}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


@contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """A temporary git worktree of this repository at `revision`, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="relwrite-baseline-") as scratch:
        path = Path(scratch) / "checkout"
        git = ["git", "-C", str(HERE.parent), "worktree"]
        subprocess.run([*git, "add", "--detach", "--quiet", str(path), revision], check=True)
        try:
            yield path
        finally:
            subprocess.run([*git, "remove", "--force", str(path)], check=True)


def rewrite_speed(
    repeat: int, baseline: str | None, chain: int = 50, long_chain: int = 1250
) -> tuple[float, float | None]:
    """Sum over rewrite.py's cases of the median seconds, for this checkout and (with `baseline`) for
    relwrite at that revision, the two alternating."""
    sides = {"this": HERE.parent}
    runs: dict[str, list[dict[str, float]]] = {"this": [], "baseline": []}
    with checkout(baseline) if baseline else nullcontext() as other:
        if other is not None:
            sides["baseline"] = other
        for _ in range(repeat):
            for side, root in sides.items():
                runs[side].append(rewrite_timings(root, chain, long_chain))
    totals = {side: _total(found) for side, found in runs.items() if found}
    return totals["this"], totals.get("baseline")


def _total(runs: list[dict[str, float]]) -> float:
    return sum(statistics.median(run[label] for run in runs) for label in runs[0])


def rewriting(repeat: int, baseline: str | None, chain: int, long_chain: int) -> None:
    print(f"4. Rewrite speed: benchmarks/rewrite.py --timings --chain {chain} --long-chain {long_chain}")
    ours, theirs = rewrite_speed(repeat, baseline, chain, long_chain)
    print(f"  this checkout: {ours * 1e3:9.1f} ms (sum over cases of the median)")
    if theirs is not None:
        ratio = ours / theirs
        print(f"  at {baseline}: {theirs * 1e3:9.1f} ms")
        print(f"  ratio this / {baseline}: {ratio:.3f}x  goal (<= 1.05x): {goal(ratio <= 1.05)}")
    print(flush=True)


# -- 5. relwrite alone ------------------------------------------------------------------------------


def seed_small() -> Variable:
    a, x, y = matrix("A", shape=(4, 4)), vector("x", shape=(4,)), vector("y", shape=(4,))
    return ops.dot(a, x + y)


def seed_large() -> Variable:
    a, b = matrix("A", shape=(4, 4)), matrix("B", shape=(4, 4))
    x, y, z, w = (vector(n, shape=(4,)) for n in "xyzw")
    return ops.dot(a, x + (y + ops.dot(b, z + w)))


def every_rule_forms(expr: Variable, count: int = 20) -> tuple[Exploration, list]:
    """The first `count` forms of `expr` with every catalogue rule (explore and unsafe ones), unchecked."""
    exploration = Exploration([expr], include=("explore", "unsafe"), limits=FORM_LIMITS)
    exploration.run()
    return exploration, list(islice(exploration.forms(0, check=False), count))


def recheck(expr: Variable, exploration: Exploration, forms: list) -> int:
    """Re-check `forms` numerically against `expr` (what `explore` does before handing each out)."""
    for form in forms:
        check_form(expr, form, exploration.tags(form))
    return len(forms)


STABILIZATIONS = (
    ("log(1 + exp(x))", {}),
    ("log(sigmoid(x))", {}),
    ("exp(x) - 1", {}),
    ("log(1 + x)", {}),
    ("log(softmax(x))", {"x": "vector"}),
)


def most_accurate(text: str, types: dict[str, str]) -> Any:
    return best_form(parse(text, types=types), cost="accuracy", limits=GOAL_LIMITS)


def relwrite_alone(repeat: int) -> None:
    print("5. relwrite alone")
    for label, build in (("A @ (x + y)", seed_small), ("A @ (x + (y + (B @ (z + w))))", seed_large)):
        expr = build()
        seconds, (exploration, forms) = median_time(partial(every_rule_forms, expr), repeat)
        print(f"  forms of {label:<30} {seconds * 1e3:8.1f} ms  ({len(forms)} forms, every rule)")
        checked, count = median_time(partial(recheck, expr, exploration, forms), 1)
        print(f"    re-checking them{'':24} {checked * 1e3:8.1f} ms  ({count} forms)", flush=True)
    for text, types in STABILIZATIONS:
        seconds, form = median_time(partial(most_accurate, text, types), repeat)
        print(
            f"  most accurate form of {text:<19} {seconds * 1e3:8.1f} ms  "
            f"{pprint(form.expr)} ({form.cost:.2f} bits)",
            flush=True,
        )


# -- the run ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (the median is shown)")
    parser.add_argument("--no-install", action="store_true", help="do not pip-install egglog when missing")
    parser.add_argument("--baseline", metavar="REV", help="also measure rewrite speed at this git revision")
    parser.add_argument("--quick", action="store_true", help="every row on tiny inputs (a smoke test)")
    parser.add_argument(
        "--only", metavar="TEXT", help="only the equal-work rows whose label holds TEXT, no other section"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    egglog = load_egglog(not args.no_install)
    if egglog is None:
        print("egglog is not available: its columns are empty.\n")
    if args.only is not None:
        equal_work(egglog, args.repeat, leaves=(3,) if args.quick else (6, 7, 8), only=args.only)
        return 0
    if args.quick:
        equal_work(egglog, args.repeat, leaves=(3,))
        proving(args.repeat, sizes=(3,))
        exploring(args.repeat, dag_nodes=20, sum_terms=3, limits=Limits(seconds=0.5))
        rewriting(args.repeat, args.baseline, chain=1, long_chain=0)
        return 0
    equal_work(egglog, args.repeat, leaves=(6, 7, 8))
    proving(args.repeat, sizes=(10, 50, 200))
    exploring(args.repeat, dag_nodes=2_000, sum_terms=50)
    rewriting(args.repeat, args.baseline, chain=50, long_chain=1250)
    relwrite_alone(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())

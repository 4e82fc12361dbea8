"""Eight PyMC models through the PyTensor bridge (issue 28): round trips, relwrite's fast_run against
PyTensor's, and the accuracy of the log-density in the tails before and after best_form.

For each model (a linear regression, the eight schools centered and non-centered, a hierarchical
logistic regression, a mixture of normals, a Poisson GLM, a stochastic-volatility random walk, a
Dirichlet-multinomial on the simplex) the log-density `model.logp()` and its gradient `model.dlogp()`
over the unconstrained space are converted with `from_pytensor`:

1. Round trip: `to_pytensor(from_pytensor(g))` evaluates equal to `g` (both under PyTensor's
   FAST_COMPILE) at `--points` random points of the unconstrained space (the initial point plus
   standard normal noise), and so does relwrite's own evaluation of the converted graph; the table
   gives the largest relative difference, the converted graph's nodes and its opaque ops.
2. fast_run: relwrite's fast_run of the converted graph against PyTensor's FAST_RUN of `g` (both
   compiled to C): apply nodes after rewriting, and the time of one call (best of `--repeat` rounds
   of `--calls` calls, the two alternating), with their ratio; values equal at the points.
3. Stability: the log-density with PyMC's parameter checks taken out (as PyMC compiles it) is
   measured by relwrite's accuracy cost (mean bits of error against an mpmath reference, Herbie's
   measure) at points in the tails, every unconstrained input in `--tail LO HI` and then in
   [-HI, -LO]: PyTensor's compiled FAST_RUN log-density, relwrite's evaluation of the converted
   graph, and the form `best_form(cost="accuracy")` finds within `--seconds` (given the PyTensor
   graph, so it comes back as PyTensor, compiled with FAST_RUN), with the rewrites it used.
   A model whose graph keeps an op with no exact reference (gammaln) is listed with why.

    python benchmarks/pymc_models.py
    python benchmarks/pymc_models.py --quick
    python benchmarks/pymc_models.py --models poisson_glm linear_regression --seconds 120
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

warnings.filterwarnings("ignore")  # ArviZ's and PyTensor's notices on import and compile

import pymc as pm  # noqa: E402
import pytensor  # noqa: E402
from pymc.logprob.utils import CheckParameterValue  # noqa: E402
from pytensor.graph.traversal import io_toposort  # noqa: E402

import relwrite  # noqa: E402
from relwrite import Limits, best_form  # noqa: E402
from relwrite.engine.explore.costs import Accuracy, AccuracyError, mean_bits  # noqa: E402
from relwrite.graph.fg import FunctionGraph  # noqa: E402
from relwrite.interop.pytensor import OpaqueOp, from_pytensor, to_pytensor  # noqa: E402

DATA = np.random.default_rng(28)
SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def linear_regression() -> pm.Model:
    x = np.linspace(-1, 1, 20)
    y = 1.5 + 2.0 * x + DATA.normal(0, 0.3, 20)
    with pm.Model() as model:
        a = pm.Normal("a", 0, 10)
        b = pm.Normal("b", 0, 10)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", a + b * x, sigma, observed=y)
    return model


def eight_schools_centered() -> pm.Model:
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        theta = pm.Normal("theta", mu, tau, shape=8)
        pm.Normal("y", theta, SCHOOLS_SIGMA, observed=SCHOOLS_Y)
    return model


def eight_schools_noncentered() -> pm.Model:
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        theta_tilde = pm.Normal("theta_tilde", 0, 1, shape=8)
        pm.Normal("y", mu + tau * theta_tilde, SCHOOLS_SIGMA, observed=SCHOOLS_Y)
    return model


def hierarchical_logistic() -> pm.Model:
    groups = np.repeat(np.arange(4), 10)
    x = DATA.normal(size=40)
    y = (DATA.random(40) < 1 / (1 + np.exp(-(0.5 * x + groups - 1.5)))).astype("int64")
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0, 2)
        sigma_a = pm.HalfNormal("sigma_a", 1)
        alpha = pm.Normal("alpha", mu_a, sigma_a, shape=4)
        beta = pm.Normal("beta", 0, 1)
        pm.Bernoulli("y", logit_p=alpha[groups] + beta * x, observed=y)
    return model


def normal_mixture() -> pm.Model:
    y = np.concatenate([DATA.normal(-2, 0.5, 15), DATA.normal(2, 0.7, 15)])
    with pm.Model() as model:
        w = pm.Dirichlet("w", np.ones(2))
        mu = pm.Normal("mu", 0, 5, shape=2)
        sigma = pm.HalfNormal("sigma", 1, shape=2)
        pm.NormalMixture("y", w, mu, sigma, observed=y)
    return model


def poisson_glm() -> pm.Model:
    x = np.linspace(0, 2, 25)
    y = DATA.poisson(np.exp(0.3 + 0.8 * x))
    with pm.Model() as model:
        a = pm.Normal("a", 0, 2)
        b = pm.Normal("b", 0, 2)
        pm.Poisson("y", pm.math.exp(a + b * x), observed=y)
    return model


def stochastic_volatility() -> pm.Model:
    returns = DATA.standard_t(4, 30) * 0.02
    with pm.Model() as model:
        step = pm.Exponential("step", 10)
        h = pm.GaussianRandomWalk("h", sigma=step, init_dist=pm.Normal.dist(0, 1), shape=30)
        nu = pm.Exponential("nu", 0.1)
        pm.StudentT("r", nu=nu, lam=pm.math.exp(-2 * h), observed=returns)
    return model


def dirichlet_multinomial() -> pm.Model:
    counts = np.array([12, 30, 8, 50])
    with pm.Model() as model:
        p = pm.Dirichlet("p", np.ones(4))
        pm.Multinomial("counts", n=int(counts.sum()), p=p, observed=counts)
    return model


MODELS: dict[str, Callable[[], pm.Model]] = {
    f.__name__: f
    for f in (
        linear_regression,
        eight_schools_centered,
        eight_schools_noncentered,
        hierarchical_logistic,
        normal_mixture,
        poisson_glm,
        stochastic_volatility,
        dirichlet_multinomial,
    )
}


def points(model: pm.Model, count: int, seed: int) -> list[list[np.ndarray]]:
    """`count` points of the unconstrained space: the initial point plus standard normal noise."""
    rng = np.random.default_rng(seed)
    start = model.initial_point()
    return [
        [np.asarray(start[v.name] + rng.normal(size=np.shape(start[v.name]))) for v in model.value_vars]
        for _ in range(count)
    ]


def relative(a: Any, b: Any) -> float:
    """The largest relative difference of two arrays (NaN and infinities must agree exactly)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    special_a, special_b = ~np.isfinite(a), ~np.isfinite(b)
    if not np.array_equal(special_a, special_b) or not np.array_equal(
        a[special_a], b[special_b], equal_nan=True
    ):
        return math.inf
    finite = np.isfinite(a)
    scale = np.maximum(np.abs(b[finite]), 1e-300)
    return float(np.max(np.abs(a[finite] - b[finite]) / scale, initial=0.0))


def opaque_ops(out: relwrite.Variable) -> list[str]:
    nodes = FunctionGraph(outputs=[out], clone=False).apply_nodes
    return sorted({str(n.op.op) for n in nodes if isinstance(n.op, OpaqueOp)})


def round_trip(graph: Any, value_vars: list, pts: list) -> dict[str, Any]:
    out, inputs = from_pytensor(graph)
    back = to_pytensor(out, inputs)
    both = pytensor.function(value_vars, [graph, back], mode="FAST_COMPILE", on_unused_input="ignore")
    native = relwrite.function([inputs[v] for v in value_vars], out, mode="fast_compile")
    trip = own = 0.0
    for args in pts:
        expected, returned = both(*args)
        trip = max(trip, relative(returned, expected))
        own = max(own, relative(native(*args), expected))
    nodes = len(FunctionGraph(outputs=[out], clone=False).apply_nodes)
    return {"out": out, "inputs": inputs, "trip": trip, "own": own, "nodes": nodes, "opaque": opaque_ops(out)}


def best_time(calls: list[Callable[[], Any]], repeat: int, count: int) -> list[float]:
    """Per contender, the best over `repeat` rounds of the time of one call (each round runs every one)."""
    best = [math.inf] * len(calls)
    for _ in range(repeat):
        for k, call in enumerate(calls):
            start = time.perf_counter()
            for _ in range(count):
                call()
            best[k] = min(best[k], (time.perf_counter() - start) / count)
    return best


def fast_run(graph: Any, value_vars: list, converted: dict, pts: list, repeat: int, calls: int) -> dict:
    theirs = pytensor.function(value_vars, graph, mode="FAST_RUN", on_unused_input="ignore")
    ours = relwrite.function([converted["inputs"][v] for v in value_vars], converted["out"], mode="fast_run")
    worst = max(relative(ours(*args), theirs(*args)) for args in pts)
    args = pts[0]
    ours_s, theirs_s = best_time([lambda: ours(*args), lambda: theirs(*args)], repeat, calls)
    return {
        "nodes": (len(ours.fgraph.apply_nodes), len(theirs.maker.fgraph.apply_nodes)),
        "seconds": (ours_s, theirs_s),
        "equal": worst,
    }


def without_checks(graph: Any) -> Any:
    """The graph with PyMC's parameter checks taken out, as PyMC's compiled functions have it (a check may
    sit inside another's input: replacing runs until none is left)."""
    while True:
        checks = {
            node.outputs[0]: node.inputs[0]
            for node in io_toposort([], [graph])
            if isinstance(node.op, CheckParameterValue)
        }
        if not checks:
            return graph
        graph = pytensor.clone_replace(graph, checks)


def derivation_rules(form: Any) -> str:
    names = []
    for step in form.steps:
        if step.rule not in names:
            names.append(step.rule)
    return ", ".join(names) or "-"


def stability(model: pm.Model, tail: tuple[float, float], seconds: float, samples: int) -> dict:
    graph = without_checks(model.logp())
    out, inputs = from_pytensor(graph)
    ranges = {inputs[v].name: tail for v in model.value_vars}
    try:
        accuracy = Accuracy(out, samples=samples, ranges=ranges)
    except AccuracyError as exc:
        return {"error": str(exc).splitlines()[0]}
    compiled = pytensor.function(model.value_vars, graph, mode="FAST_RUN", on_unused_input="ignore")
    order = [accuracy.inputs.index(inputs[v]) for v in model.value_vars]
    values = np.array([compiled(*(accuracy.points[i][k] for i in order)) for k in range(samples)])
    pytensor_bits = mean_bits(values, accuracy.reference)
    relwrite_bits = float(accuracy(out))
    started = time.perf_counter()
    limits = Limits(seconds=seconds)  # the PyTensor graph itself: the form comes back as PyTensor too
    form = best_form(graph, cost="accuracy", ranges=ranges, regimes=False, series=False, limits=limits)
    search = time.perf_counter() - started
    improved = pytensor.function(model.value_vars, form.foreign, mode="FAST_RUN", on_unused_input="ignore")
    improved_values = np.array([improved(*(accuracy.points[i][k] for i in order)) for k in range(samples)])
    return {
        "pytensor": pytensor_bits,
        "relwrite": relwrite_bits,
        "form_in_pytensor": mean_bits(improved_values, accuracy.reference),
        "rules": derivation_rules(form),
        "seconds": search,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100, help="random points per round trip (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="timing rounds (default 5)")
    parser.add_argument("--calls", type=int, default=200, help="calls per timing round (default 200)")
    parser.add_argument("--seconds", type=float, default=60.0, help="best_form's time per model (default 60)")
    parser.add_argument("--samples", type=int, default=64, help="accuracy sample points (default 64)")
    parser.add_argument("--tail", type=float, nargs=2, default=(8.0, 30.0), metavar=("LO", "HI"))
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--quick", action="store_true", help="10 points, 1 round, 10 calls, 5 s searches")
    args = parser.parse_args(argv)
    if args.quick:
        args.points, args.repeat, args.calls, args.seconds, args.samples = 10, 1, 10, 5.0, 16

    print(f"pytensor {pytensor.__version__}, pymc {pm.__version__}, relwrite {relwrite.__version__}")
    print(f"\n1. Round trip at {args.points} points, and the fast_run comparison (relwrite / PyTensor)\n")
    header = (
        f"{'model':<26} {'graph':<6} {'nodes':>5} {'trip':>8} {'own':>8} {'rw nodes':>8} {'pt nodes':>8} "
        f"{'rw us':>8} {'pt us':>8} {'ratio':>6} {'equal':>8}  opaque ops"
    )
    print(header)
    print("-" * len(header))
    ratios, worst_trip = [], 0.0
    for name in args.models:
        model = MODELS[name]()
        pts = points(model, args.points, seed=len(name))
        for kind, graph in (("logp", model.logp()), ("dlogp", model.dlogp())):
            converted = round_trip(graph, model.value_vars, pts)
            measured = fast_run(graph, model.value_vars, converted, pts, args.repeat, args.calls)
            ours_s, theirs_s = measured["seconds"]
            ratios.append(ours_s / theirs_s)
            worst_trip = max(worst_trip, converted["trip"], converted["own"])
            print(
                f"{name:<26} {kind:<6} {converted['nodes']:>5} {converted['trip']:>8.1e} "
                f"{converted['own']:>8.1e} {measured['nodes'][0]:>8} {measured['nodes'][1]:>8} "
                f"{ours_s * 1e6:>8.1f} {theirs_s * 1e6:>8.1f} {ours_s / theirs_s:>6.2f} "
                f"{measured['equal']:>8.1e}  {', '.join(converted['opaque']) or '-'}"
            )
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"\nlargest relative difference of a round trip or of relwrite's own evaluation: {worst_trip:.1e}")
    print(f"time relwrite fast_run / PyTensor FAST_RUN, geometric mean over {len(ratios)} graphs: {geo:.2f}x")

    print(
        f"\n2. Log-density accuracy in the tails ({args.samples} points, mean bits of error; best_form within"
    )
    print(
        f"   {args.seconds:g} s; PyTensor: its FAST_RUN function; relwrite: the converted graph on the NumPy"
    )
    print("   backend; best_form: the form found, back in PyTensor, compiled with FAST_RUN)")
    for lo, hi in (args.tail, (-args.tail[1], -args.tail[0])):
        print(f"\nevery unconstrained input in [{lo:g}, {hi:g}]\n")
        header = f"{'model':<26} {'PyTensor':>8} {'relwrite':>8} {'best_form':>9} {'search s':>8}  rewrites"
        print(header)
        print("-" * len(header))
        for name in args.models:
            row = stability(MODELS[name](), (lo, hi), args.seconds, args.samples)
            if "error" in row:
                print(f"{name:<26} {'-':>8} {'-':>8} {'-':>9} {'-':>8}  not measured: {row['error']}")
                continue
            print(
                f"{name:<26} {row['pytensor']:>8.2f} {row['relwrite']:>8.2f} {row['form_in_pytensor']:>9.2f} "
                f"{row['seconds']:>8.1f}  {row['rules']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

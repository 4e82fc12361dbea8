"""The bits of error relwrite measures agree with an independent mpmath evaluation of the original FPCores
(issue 26: to 0.1 bits, on Herbie's Hamming suite).

The independent side reads each FPCore's body as an S-expression and
evaluates it with mpmath's own functions at 4,096 bits (past the 2,100 bits
a float64 cancellation at the bottom of the range can need; no relwrite
reference table, no precision escalation), rounds it to float64, and counts
the ulps to relwrite's float64 value of the input as Herbie does (a NaN
against a number is 64 bits), with its own ordinals.  A benchmark using an
operation this small evaluator lacks is skipped, naming it.
"""

from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from relwrite.engine.explore.costs import Accuracy
from relwrite.interop.fpcore import Atom, SList, read_data, read_fpcores

SUITE = Path(__file__).resolve().parent / "data" / "hamming"

FUNCTIONS = {
    "sqrt": mpmath.sqrt,
    "exp": mpmath.exp,
    "log": mpmath.log,
    "expm1": mpmath.expm1,
    "log1p": mpmath.log1p,
    "sin": mpmath.sin,
    "cos": mpmath.cos,
    "tan": mpmath.tan,
    "atan": mpmath.atan,
    "sinh": mpmath.sinh,
    "fabs": abs,
    "cbrt": lambda x: mpmath.sign(x) * mpmath.cbrt(abs(x)),
    "pow": lambda x, y: mpmath.power(x, y),
    "hypot": mpmath.hypot,
}


class Unsupported(Exception):
    pass


def evaluate(datum, env):
    """The exact value of an FPCore expression (mpmath at the working precision)."""
    if isinstance(datum, Atom):
        if datum.text in env:
            return env[datum.text]
        if datum.text == "PI":
            return +mpmath.pi
        if datum.text == "E":
            return mpmath.e
        return mpmath.mpf(Fraction(datum.text).numerator) / Fraction(datum.text).denominator
    head, *args = datum.items
    name = head.text
    if name in ("let", "let*"):
        inner = dict(env)
        for binding in args[0].items:
            inner[binding.items[0].text] = evaluate(binding.items[1], inner if name == "let*" else env)
        return evaluate(args[1], inner)
    values = [evaluate(a, env) for a in args]
    if name == "+":
        return values[0] + values[1]
    if name == "-":
        return -values[0] if len(values) == 1 else values[0] - values[1]
    if name == "*":
        return values[0] * values[1]
    if name == "/":
        return values[0] / values[1]
    if name in FUNCTIONS:
        return FUNCTIONS[name](*values)
    raise Unsupported(name)


def ordinals(values: np.ndarray) -> np.ndarray:
    bits = values.astype(np.float64).view(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFFFFFFFFFF), bits)


def bodies() -> list[tuple[str, SList]]:
    found = []
    for path in sorted(SUITE.glob("*.fpcore")):
        for datum in read_data(path.read_text(encoding="utf-8")):
            items = datum.items
            name = next(
                items[k + 1].text
                for k in range(len(items) - 1)
                if isinstance(items[k], Atom) and items[k].text == ":name"
            )
            found.append((name.strip('"'), items[-1]))
    return found


BENCHMARKS = {b.name: b for path in sorted(SUITE.glob("*.fpcore")) for b in read_fpcores(path.read_text())}


@pytest.mark.parametrize(("name", "body"), bodies(), ids=[n for n, _ in bodies()])
def test_relwrites_bits_of_error_agree_with_an_independent_mpmath_evaluation(name, body):
    bench = BENCHMARKS[name]
    accuracy = Accuracy(bench.expr, samples=128, ranges=bench.precondition, seed=7)
    names = [v.name for v in accuracy.inputs]
    floats = np.asarray(accuracy.values(bench.expr), dtype=np.float64)  # relwrite's float64 evaluation
    exact = []
    with mpmath.workprec(4096):
        for point in zip(*accuracy.points):
            env = {n: mpmath.mpf(float(v)) for n, v in zip(names, point)}
            try:
                exact.append(float(evaluate(body, env)))
            except Unsupported as missing:
                pytest.skip(f"the independent evaluator has no {missing}")
    exact = np.array(exact)
    # ulps between the two, in Python integers (float64 ordinals near 2**62 lose the last ulps)
    distance = [abs(int(a) - int(b)) for a, b in zip(ordinals(floats), ordinals(exact))]
    bits = [64.0 if np.isnan(f) else min(np.log2(d + 1), 64) for f, d in zip(floats, distance)]  # Herbie's
    independent = float(np.mean(bits))
    assert abs(accuracy(bench.expr) - independent) <= 0.1, (accuracy(bench.expr), independent)

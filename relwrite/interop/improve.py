"""The most accurate forms of FPBench benchmarks (`relwrite improve`), one benchmark per task.

`improve_benchmark(benchmark, limits)` searches for the form of a benchmark's
body with the fewest bits of error (Herbie's measure) over inputs sampled
where its `:pre` holds, running the catalogue with its unsafe rules and the
`accuracy` identities, within `limits` (`Limits.seconds` is the benchmark's
whole budget: the reference, the search, extracting and checking the form).
Where no single form is accurate over the whole sample, the form is
piecewise: forms joined by `switch` on ranges of one input (`regime_form`).
As Herbie does, truncated series of the body (at 0 and at ±infinity in each
input) are candidates too: a form using one is approximate
(`Form.approximate`), chosen only where it is more accurate than every
equal form found, on the sample and on a fresh one.
Anything that goes wrong inside one benchmark becomes a failed
`Improvement` carrying the error's text, never an exception.

`improve_benchmarks(benchmarks, executor)` runs many, in order, on any
`concurrent.futures.Executor` (a process pool, or a Dask or Ray executor for
a large suite): benchmarks, limits and `Improvement`s all pickle.
`fpcore_text`, `python_module` and `c_source` write the results out.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from relwrite.engine.explore.api import Exploration, Form, in_language, regime_form
from relwrite.engine.explore.costs import Accuracy, AccuracyError
from relwrite.engine.explore.deadline import ACCURACY_SEARCH_SHARE
from relwrite.engine.explore.foreign import Back, in_relwrite
from relwrite.engine.explore.precondition import Precondition, Truth
from relwrite.engine.explore.runner import Limits
from relwrite.engine.explore.series import prepare as prepare_series
from relwrite.graph.basic import Constant, graph_inputs
from relwrite.graph.printing import expression_text
from relwrite.interop.fpcore import (
    PRECISIONS,
    Benchmark,
    FPCoreError,
    function_name_of,
    to_c,
    to_fpcore,
    to_python,
)


@dataclass(frozen=True)
class Improvement:
    """What `improve_benchmark` made of one benchmark.

    `form` is the most accurate form found (the body itself when nothing
    better was found in time) with its derivation and assumptions;
    `input_bits` and `output_bits` the mean bits of error of the body and of
    the form on `accuracy`'s sample; `seconds` the time taken.  A failed
    benchmark has `error` (the text of what went wrong) and no form.
    """

    name: str
    benchmark: Benchmark | None
    form: Form | None = None
    input_bits: float = math.nan
    output_bits: float = math.nan
    seconds: float = 0.0
    error: str | None = None
    search: str = ""
    accuracy: Accuracy | None = None

    @classmethod
    def failed(cls, name: str, error: str, benchmark: Benchmark | None = None, seconds: float = 0.0):
        """A benchmark that could not be read or improved, and why."""
        return cls(name, benchmark, error=error, seconds=seconds)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def improved(self) -> Benchmark | None:
        """The benchmark with the form as its body (name, `:pre` and other properties kept), or None."""
        if self.benchmark is None or self.form is None:
            return None
        return dataclasses.replace(self.benchmark, expr=self.form.expr)

    def to_dict(self) -> dict:
        """Plain data (for JSON): name, input and output expressions, bits, time, derivation or error."""
        document: dict[str, Any] = {"name": self.name, "ok": self.ok}
        if self.benchmark is not None:
            document["input"] = expression_text(self.benchmark.expr)
            document["precondition"] = str(self.benchmark.precondition)
        if self.form is not None:
            document["output"] = expression_text(self.form.expr)
            document["input_bits"] = self.input_bits
            document["output_bits"] = self.output_bits
            document["derivation"] = self.form.derivation
            document["steps"] = [s.to_dict() for s in self.form.steps]
            document["assumptions"] = sorted(self.form.assumptions)
            document["unsafe"] = self.form.unsafe
            document["approximate"] = self.form.approximate
            if self.form.regimes is not None:
                document["regimes"] = self.form.regimes.to_dict()
            document["search"] = self.search
        document["seconds"] = self.seconds
        if self.error is not None:
            document["error"] = self.error
        return document


def benchmark_name(benchmark: Benchmark, number: int) -> str:
    """The benchmark's `:name`, else its identifier, else `#number`."""
    return benchmark.name or benchmark.identifier or f"#{number}"


def as_benchmark(subject: Any) -> tuple[Benchmark, Back | None]:
    """A Benchmark as it is; an expression over named scalars, relwrite's or another language's (a PyTensor
    graph, through `in_relwrite`), as a benchmark with no precondition, and the way back to its language."""
    if isinstance(subject, Benchmark):
        return subject, None
    expr, back = in_relwrite(subject)
    inputs = [v for v in graph_inputs([expr]) if not isinstance(v, Constant)]
    for var in inputs:
        if var.name is None or var.ndim != 0 or var.dtype not in PRECISION_OF:
            raise TypeError(
                f"improve: the inputs of an expression must be named float32 or float64 scalars, got {var} "
                f"({var.type})"
            )
    precision = PRECISION_OF.get(expr.dtype)
    if precision is None:
        raise TypeError(f"improve: the expression must be a float32 or float64 value, got {expr.dtype}")
    precondition = Precondition(Truth(True), [v.name for v in inputs])
    return Benchmark(None, inputs, expr, precondition, precision), back


PRECISION_OF = {dtype: precision for precision, dtype in PRECISIONS.items()}


def improve_benchmark(
    benchmark: Benchmark | Any,
    limits: Limits | None = None,
    name: str | None = None,
    seed: int = 0,
    series: bool = True,
) -> Improvement:
    """The most accurate form of `benchmark`'s body found within `limits` (see the module docstring); with
    `series`, truncated series of the body are candidates too (a form using one is approximate).

    `benchmark` may be an expression instead (`as_benchmark`): a PyTensor graph's form also comes back
    as PyTensor (`Improvement.form.foreign`)."""
    benchmark, back = as_benchmark(benchmark)
    name = name or benchmark_name(benchmark, 1)
    if series:
        prepare_series()  # once per process, before the benchmark's clock starts
    start = time.perf_counter()
    try:
        exploration = Exploration([benchmark.expr], limits=limits, include=["accuracy"], unsafe=True)
        accuracy = _accuracy(exploration, benchmark, seed)
        if accuracy is None:
            return Improvement.failed(
                name, "the time limit passed while computing the exact reference", benchmark, _since(start)
            )
        exploration.focus(accuracy)
        report = exploration.run(share=ACCURACY_SEARCH_SHARE)
        form = regime_form(exploration, 0, accuracy, series=series)
        input_bits = float(accuracy(benchmark.expr))
        output_bits = input_bits if math.isnan(form.cost) or not form.steps else float(form.cost)
        if math.isnan(form.cost):
            form = dataclasses.replace(form, cost=input_bits)
        search = f"{report.stop_reason}, {report.iterations} iterations, {report.nodes} e-nodes"
        return Improvement(
            name,
            benchmark,
            in_language(form, back),
            input_bits,
            output_bits,
            _since(start),
            None,
            search,
            accuracy,
        )
    except Exception as exc:  # one benchmark's failure is reported, the others still run
        message = str(exc).splitlines()[0] if str(exc) else ""
        return Improvement.failed(name, f"{type(exc).__name__}: {message}", benchmark, _since(start))


def _accuracy(exploration: Exploration, benchmark: Benchmark, seed: int) -> Accuracy | None:
    """The accuracy cost over the benchmark's precondition, computed within the exploration's deadline."""
    from relwrite.engine.explore.deadline import TimeLimitReached

    try:
        with exploration.deadline.interrupting("cost"):
            return Accuracy(benchmark.expr, ranges=benchmark.precondition, seed=seed)
    except TimeLimitReached:
        return None
    except AccuracyError as exc:
        raise AccuracyError(f"cannot measure its accuracy: {exc}") from None


def _since(start: float) -> float:
    return time.perf_counter() - start


def improve_benchmarks(
    benchmarks: Sequence[Benchmark],
    executor: Executor | None = None,
    limits: Limits | None = None,
    *,
    names: Sequence[str] | None = None,
    seed: int = 0,
    series: bool = True,
    progress: Callable[[int], None] | None = None,
) -> list[Improvement]:
    """`improve_benchmark` of each benchmark, in order: on `executor` (any `concurrent.futures.Executor`)
    when given, else one after the other here.  A task the executor loses (a worker that died, a result
    that did not come back) is a failed Improvement naming why.  `progress(done)` is called as they end."""
    names = list(names) if names is not None else [benchmark_name(b, k) for k, b in enumerate(benchmarks, 1)]
    if len(names) != len(benchmarks):
        raise ValueError(f"{len(names)} names for {len(benchmarks)} benchmarks")
    results: list[Improvement] = []
    if executor is None:
        for bench, name in zip(benchmarks, names):
            results.append(improve_benchmark(bench, limits, name, seed, series))
            if progress is not None:
                progress(len(results))
        return results
    futures = [
        executor.submit(improve_benchmark, b, limits, name, seed, series)
        for b, name in zip(benchmarks, names)
    ]
    for bench, name, future in zip(benchmarks, names, futures):
        try:
            results.append(future.result())
        except Exception as exc:
            results.append(
                Improvement.failed(name, f"the executor failed: {type(exc).__name__}: {exc}", bench)
            )
        if progress is not None:
            progress(len(results))
    return results


def fpcore_text(improvements: Sequence[Improvement]) -> str:
    """One FPCore file of every improved benchmark (name, `:pre` and other properties kept)."""
    return "\n".join(to_fpcore(i.improved) for i in improvements if i.improved is not None)


def _function_names(improvements: Sequence[Improvement]) -> list[str]:
    """A distinct function name for each improved benchmark."""
    taken: set[str] = set()
    names = []
    for improvement in improvements:
        base = function_name_of(improvement.name)
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        names.append(name)
    return names


def _sources(
    improvements: Sequence[Improvement], write: Callable[..., str], header: str, comment: str
) -> str:
    """Each improved benchmark's function written by `write`, below one `header` of imports/includes;
    a benchmark the language cannot hold is a comment saying why."""
    done = [i for i in improvements if i.improved is not None]
    parts = []
    for improvement, name in zip(done, _function_names(done)):
        try:
            source = write(improvement.improved, function_name=name)
        except FPCoreError as exc:
            parts.append(f"{comment} {improvement.name}: not written ({exc})\n")
            continue
        parts.append(source[source.index("\n\n") :].strip("\n") + "\n")
    return header + "\n\n" + "\n\n".join(parts)


def python_module(improvements: Sequence[Improvement]) -> str:
    """A Python module with a NumPy function for each improved benchmark."""
    return _sources(improvements, to_python, "import math\n\nimport numpy as np\n", "#")


def c_source(improvements: Sequence[Improvement]) -> str:
    """A C file with a function for each improved benchmark (math.h)."""
    return _sources(improvements, to_c, "#include <math.h>\n", "//")

"""One deadline for a whole exploration call: saturation, extraction, explanation and checking.

A public call (`explore`, `best_form`, `prove`, `pareto`, `relwrite
explore`) starts one `Deadline` of `Limits.seconds` and passes it through
every phase: building the cost (the accuracy reference), growing the
e-graph (which stops at a share of the time, `SEARCH_SHARE`, so that forms
can still be extracted, explained and checked), then extracting,
explaining and checking forms.  Each phase stops when the deadline passes
and the call returns what it has, the phase recorded (`stops`).

Extraction reads the clock in its loops (`check`); work that cannot be
stopped between steps (the accuracy reference, a numerical check, an
explanation) runs `interrupting`: under a `relation_budget` whose error,
`TimeLimitReached`, passes through code that catches Exception.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

from relwrite.engine.explore.runner import StopReason
from relwrite.relations.budget import Interrupted, relation_budget

SEARCH_SHARE = 0.5
"""The share of a call's time that growing the e-graph may take when forms are extracted afterwards."""
ACCURACY_SEARCH_SHARE = 0.3
"""The share growing the e-graph may take when forms are extracted by accuracy (which scores every
e-node of the e-graph against exact values: `accurate`).  The extraction is cut by time too, and what a
cut beam holds depends on the order it met the classes: a smaller e-graph it can finish beats a larger
one it cannot (FPBench's 2cbrt: the exact conjugate in 6 worker processes of 6, was 2 at 0.4)."""
EXTRACTION_SHARE = 0.5
"""The share of the time left after the search that extracting forms by accuracy may take (the rest is
for measuring, explaining and checking them)."""
SERIES_SHARE = 0.6
"""The share of the time left (once the forms are measured) that expanding the input in series may take
(`Exploration.approximate`); the rest is for choosing regimes, explaining and checking the form chosen."""
PROOF_SHARE = 0.8
"""The share a proof's search may take (what follows it is one explanation and its check)."""
SLACK = 0.05
"""Seconds an interrupted phase is given beyond the deadline (so that the interrupt is not raced)."""


class TimeLimitReached(Interrupted):
    """An exploration phase reached the call's deadline."""


class Deadline:
    """When a call must be done: `seconds` from now (math.inf: no limit); `stops` records the phases the
    deadline stopped, with why."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        # aimed twice SLACK early (at most a tenth of the time): an interrupt given SLACK beyond it, and
        # the unwinding after it, still end the call within `seconds`
        self.at = time.perf_counter() + seconds - min(2 * SLACK, seconds / 10)
        self.stops: dict[str, StopReason] = {}

    def left(self) -> float:
        """Seconds left (0 once passed)."""
        return max(self.at - time.perf_counter(), 0.0)

    def passed(self) -> bool:
        return time.perf_counter() >= self.at

    def until(self, share: float) -> float:
        """The time (`time.perf_counter`) a phase taking `share` of what is left must stop at."""
        now = time.perf_counter()
        return self.at if math.isinf(self.at) else now + share * max(self.at - now, 0.0)

    def part(self, share: float) -> Deadline:
        """A deadline for a phase that may take `share` of the time left, recording its stops here."""
        part = Deadline(share * self.left() if not math.isinf(self.at) else math.inf)
        part.seconds, part.stops = self.seconds, self.stops
        return part

    def check(self, phase: str) -> None:
        """TimeLimitReached naming `phase` once the deadline has passed (the phase recorded in `stops`)."""
        if self.passed():
            self.stops.setdefault(phase, StopReason.TIME_LIMIT)
            raise TimeLimitReached(f"{phase}: time limit of {self.seconds:g} s reached", "max_seconds")

    @contextmanager
    def interrupting(self, phase: str) -> Iterator[None]:
        """Run the block under the deadline: TimeLimitReached interrupts it when the deadline passes
        (the phase recorded in `stops`).  Without a time limit (`seconds` infinite) nothing is armed."""
        self.check(phase)
        if math.isinf(self.at):
            yield
            return
        try:
            with relation_budget(
                lambda: f"{phase}: time limit of {self.seconds:g} s reached",
                max_steps=None,
                max_seconds=self.left() + SLACK,
                error=TimeLimitReached,
            ):
                yield
        except TimeLimitReached:
            self.stops.setdefault(phase, StopReason.TIME_LIMIT)
            raise

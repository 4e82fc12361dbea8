"""Progress bars (tqdm) for work that can take more than a second: shown on a terminal only, late.

A `Progress` draws nothing until its work has run for `PROGRESS_AFTER`
seconds, and nothing at all when standard error is not a terminal (pipes,
logs, tests), so quick runs and machine-read output stay clean.  The bar
goes away when the work ends (`leave=False`).
"""

from __future__ import annotations

import sys
import time
from typing import Any

PROGRESS_AFTER = 1.0
"""Seconds of work before a bar appears."""


class Progress:
    """A bar of `total` steps (`unit`), labelled `desc`: `update(count, **postfix)` sets how far it is."""

    def __init__(self, total: float, desc: str, unit: str = "it", stream: Any = None):
        self.total, self.desc, self.unit = total, desc, unit
        self.stream = sys.stderr if stream is None else stream
        self.started = time.perf_counter()
        self.bar: Any = None
        self.enabled: bool | None = None  # on a terminal: asked once the delay is over (a system call)

    def update(self, count: float, **postfix: Any) -> None:
        """Show `count` of `total` done (after PROGRESS_AFTER seconds, on a terminal)."""
        if self.enabled is False:
            return
        if self.bar is None:
            if time.perf_counter() - self.started < PROGRESS_AFTER:
                return
            if self.enabled is None:
                self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
                if not self.enabled:
                    return
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, file=self.stream, leave=False)
        if postfix:
            self.bar.set_postfix(refresh=False, **postfix)
        self.bar.update(max(0, min(count, self.total) - self.bar.n))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

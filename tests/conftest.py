"""Hypothesis profiles: `ci` (bounded, derandomized, no deadline) by default; `dev` for local sweeps.

Select with HYPOTHESIS_PROFILE=dev.  The `no_hang` fixture bounds a test of a fixed hang.
"""

import os
import signal

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "dev",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def no_hang():
    """A guard for tests of fixed hangs: the test fails (rather than hangs the suite) after 30 s.

    Only a bound on a regression, never a timing assertion: the fixed code returns at once.
    """

    def expired(signum, frame):
        raise TimeoutError("still running after 30 s: the hang is back")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, 30)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

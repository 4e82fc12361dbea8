"""Settings for the whole suite (tests, docs, README): hypothesis profiles, a bound on its garbage.

Hypothesis: `ci` (bounded, derandomized, no deadline) by default; `dev` for local sweeps, selected
with HYPOTHESIS_PROFILE=dev. The `no_hang` fixture bounds a test of a fixed hang.  A docs page whose
examples need an optional extra skips, with a one-line reason, where the extra is not installed.
"""

import gc
import importlib.util
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


GARBAGE_ALLOWANCE = 64 * 2**20
"""Resident bytes a test may leave above the last collection's level before the cyclic collector runs."""

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_collect_above = [0]


def _resident_bytes() -> int | None:
    """This process's resident memory (Linux's /proc), or None where the system does not say."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


@pytest.fixture(autouse=True)
def _collect_graph_garbage():
    """Run the cyclic collector after a test that left much memory behind.

    Graphs are cycles (a variable's owner lists it among its outputs), so a dropped
    graph waits for a full collection, and in a long process those come rarely: the
    suite's garbage of 100,000-node graphs and rule runs grew one process to 4.4 GB.
    Collecting after every test would cost minutes; collecting when resident memory
    passed the last level by GARBAGE_ALLOWANCE keeps the suite under 1.5 GB.  What survives a
    collection is frozen (`gc.freeze`): every later full collection, ours or automatic, walked those
    millions of long-lived objects again (a quarter of tests/relations' collector time).
    """
    yield
    resident = _resident_bytes()
    if resident is None:
        return
    if resident > _collect_above[0]:
        gc.collect()
        gc.freeze()  # what survived is the suite's own (modules, caches): later collections skip it
        _collect_above[0] = (_resident_bytes() or resident) + GARBAGE_ALLOWANCE


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


IN_ITS_OWN_PROCESS = ["docs/pytensor.md", "tests/test_benchmark_pymc.py"]
"""What imports PyMC (300 MB that would stay for the rest of the run): collected only in the process
tests/interop/test_pymc_process.py starts for it (RELWRITE_PYMC_PROCESS=1), so the suite's own
process stays under its memory bound."""

collect_ignore = [] if os.environ.get("RELWRITE_PYMC_PROCESS") else IN_ITS_OWN_PROCESS

PAGES_NEEDING: dict[str, tuple[str, ...]] = {"pytensor.md": ("pytensor", "pymc")}
"""Docs pages whose examples need an optional extra (relwrite[pytensor]) -> the modules they import."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip a docs page whose optional modules are not installed, with a one-line reason."""
    for item in items:
        needed = PAGES_NEEDING.get(item.path.name) if item.path.parent.name == "docs" else None
        missing = [name for name in needed or () if not _installed(name)]
        if missing:
            reason = f"docs/{item.path.name} needs {', '.join(missing)}: pip install 'relwrite[pytensor]'"
            item.add_marker(pytest.mark.skip(reason=reason))

"""The tests and docs that import PyMC run in a process of their own (conftest.IN_ITS_OWN_PROCESS):
importing PyMC holds about 300 MB for the rest of a process, which the suite's memory bound has no room
for.  Their outcome is this test's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_pymc_tests_and_the_pytensor_page_pass_in_their_own_process():
    pytest.importorskip("pytensor", reason="the PyTensor bridge needs the extra relwrite[pytensor]")
    from conftest import IN_ITS_OWN_PROCESS

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *IN_ITS_OWN_PROCESS],
        cwd=ROOT,
        env={**os.environ, "RELWRITE_PYMC_PROCESS": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

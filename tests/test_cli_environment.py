"""The command line's environment settings and interrupts: one line on standard error, never a traceback.

A bad `RELWRITE_*` setting is exit status 2 naming the variable and its
value; Ctrl-C (SIGINT) wherever the command is is "relwrite: interrupted"
and exit status 130, with no compiler left running.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from relwrite.cli import main

SETTINGS = ("RELWRITE_CC", "RELWRITE_NO_C", "RELWRITE_CACHE_DIR", "RELWRITE_COMPILE_TIMEOUT")


@pytest.fixture(autouse=True)
def no_settings(monkeypatch):
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)


def a_regular_file(tmp_path: Path) -> str:
    (tmp_path / "a-file").write_text("")
    return str(tmp_path / "a-file")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("RELWRITE_COMPILE_TIMEOUT", "abc", "RELWRITE_COMPILE_TIMEOUT must be a positive number"),
        ("RELWRITE_COMPILE_TIMEOUT", "-1", "RELWRITE_COMPILE_TIMEOUT must be a positive number"),
        ("RELWRITE_COMPILE_TIMEOUT", "inf", "RELWRITE_COMPILE_TIMEOUT must be a positive number"),
        ("RELWRITE_NO_C", "yes", "RELWRITE_NO_C must be 1 (never compile C) or 0"),
        ("RELWRITE_CC", "/nonexistent/gcc", "RELWRITE_CC names no program that can run"),
        ("RELWRITE_CACHE_DIR", a_regular_file, "RELWRITE_CACHE_DIR is not a directory"),
    ],
)
@pytest.mark.parametrize("command", [["demo"], ["rules", "--name", "neg_neg"]])
def test_a_bad_setting_is_one_line_naming_it_and_exit_2(
    name, value, message, command, tmp_path, monkeypatch, capsys
):
    value = value(tmp_path) if callable(value) else value
    monkeypatch.setenv(name, value)
    assert main(command) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"relwrite: error: {message}" + captured.err.partition(message)[2]
    assert captured.err.count("\n") == 1 and repr(value) in captured.err


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RELWRITE_COMPILE_TIMEOUT", " 2.5 "),
        ("RELWRITE_NO_C", "0"),
        ("RELWRITE_NO_C", "1"),
        ("RELWRITE_CC", ""),
    ],
)
def test_good_settings_pass(name, value, monkeypatch, capsys):
    monkeypatch.setenv(name, value)
    assert main(["rules", "--name", "neg_neg"]) == 0
    assert capsys.readouterr().err == ""


# -- interrupts ------------------------------------------------------------------------------------


def interrupted(argv: list[str], ready: Path, cwd: Path, env: dict[str, str] | None = None, script: str = ""):
    """Run the command in a fresh interpreter, SIGINT it once `ready` exists, and return it finished.

    `script` runs before the command (it may patch something to create `ready`).
    """
    # Ctrl-C as a terminal delivers it, whatever disposition or mask the test process passes on
    reset = "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
    reset += "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\n"
    code = f"{reset}{script}\nfrom relwrite.cli import main\nraise SystemExit(main({argv!r}))\n"
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert process.poll() is None, f"finished before it was interrupted: {process.communicate()}"
            assert time.monotonic() < deadline, "never got ready"
            time.sleep(0.05)
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=90)  # a guard: the bug held on until the compile timeout
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, out, err


def assert_interrupted(returncode: int, err: str) -> None:
    assert (returncode, err) == (130, "relwrite: interrupted\n")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_during_a_compile_is_one_line_and_stops_every_compiler(tmp_path):
    """The runtime compiles while a thread builds the BLAS and reduction modules: all of them stop."""
    started = tmp_path / "started"
    compiler = tmp_path / "slow-cc"
    compiler.write_text(
        "#!/bin/sh\n"
        'case "$1" in --version) echo "slow-cc 1.0"; exit 0;; esac\n'
        f"echo $$ >> {started}\n"
        "exec sleep 300\n"
    )
    compiler.chmod(0o755)
    env = {"RELWRITE_CC": str(compiler), "RELWRITE_CACHE_DIR": str(tmp_path / "cache")}
    returncode, out, err = interrupted(["demo"], started, tmp_path, env)
    assert_interrupted(returncode, err)
    pids = [int(line) for line in started.read_text().split()]
    deadline = time.monotonic() + 10
    while any(map(pid_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(pid_alive, pids))


def test_ctrl_c_during_explore_is_one_line(tmp_path):
    ready = tmp_path / "exploring"
    script = (
        "from pathlib import Path\n"
        "from relwrite.engine.explore import Exploration\n"
        "run = Exploration.run\n"
        f"def signalled(self, *a, **k):\n    Path({str(ready)!r}).touch()\n    return run(self, *a, **k)\n"
        "Exploration.run = signalled\n"
    )
    expr = " + ".join(f"exp(x{i}) * log(x{i}) / x{i}" for i in range(30))
    argv = ["explore", expr, "--limit-nodes", "10000000", "--limit-seconds", "600"]
    returncode, out, err = interrupted(argv, ready, tmp_path, script=script)
    assert_interrupted(returncode, err)


def test_ctrl_c_during_check_is_one_line(tmp_path):
    ready = tmp_path / "checking"
    (tmp_path / "slow_rules.py").write_text(
        "import time\n"
        "from pathlib import Path\n"
        "from kanren import eq\n"
        "def slow(lhs, rhs):\n"
        f"    Path({str(ready)!r}).touch()\n"
        "    while True:\n"
        "        time.sleep(0.01)\n"
        "RELATIONS = [slow]\n"
    )
    env = {"RELWRITE_CACHE_DIR": str(tmp_path / "cache")}
    returncode, out, err = interrupted(["check", str(tmp_path / "slow_rules.py")], ready, tmp_path, env)
    assert_interrupted(returncode, err)

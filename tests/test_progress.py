"""Progress bars: on a terminal after a delay, never in pipes; the rewrite pipeline and check use them."""

from __future__ import annotations

import io

import relwrite as rw
from relwrite import progress
from relwrite.engine.db import rewrite_graph
from relwrite.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_appears_only_on_a_terminal_and_only_after_the_delay(monkeypatch):
    pipe, terminal = io.StringIO(), Terminal()
    with Progress(10, "working", stream=pipe) as quiet, Progress(10, "working", stream=terminal) as shown:
        quiet.update(3)
        shown.update(3)
        assert terminal.getvalue() == ""  # not yet PROGRESS_AFTER seconds
        monkeypatch.setattr(progress, "PROGRESS_AFTER", 0.0)
        quiet.update(5)
        shown.update(5, step="merge")
    assert pipe.getvalue() == ""
    assert "working" in terminal.getvalue() and "/10" in terminal.getvalue()


def test_a_long_rewrite_shows_its_steps_on_a_terminal(monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(progress, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(progress.sys, "stderr", terminal)
    x = rw.vector("x")
    rewrite_graph(rw.exp(rw.log(x)) * 1.0, include=["fast_run"])
    assert "rewriting" in terminal.getvalue() and "step" in terminal.getvalue()

"""HTML reports: `relwrite rewrite/explore --report FILE` write one self-contained page that a real
headless browser loads and draws."""

from __future__ import annotations

import html
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from relwrite.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _rows(page: str) -> list[list[str]]:
    cells = re.findall(
        r"<tr><td>\d+</td><td>(.*?)</td><td class='term'>(.*?)</td><td class='term'>(.*?)</td></tr>", page
    )
    return [[html.unescape(c) for c in row] for row in cells]


def _self_contained(page: str) -> None:
    assert "<script" not in page
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:|//)", page)
    assert "<link" not in page


def test_a_rewrite_report_lists_each_rule_in_order_with_its_subterms(tmp_path, capsys):
    out = tmp_path / "rewrite.html"
    assert (
        main(
            ["rewrite", "log(1 + exp(x)) * 1.0 + exp(x)[1:].sum()", "--var", "x:vector", "--report", str(out)]
        )
        == 0
    )
    page = out.read_text(encoding="utf-8")
    _self_contained(page)
    rules = [rule for rule, _, _ in _rows(page)]
    assert rules.index("subtensor_lift") < rules.index("softplus") < rules.index("elemwise_fusion")
    assert ["mul_one", "(log((1.0 + exp(x))) * 1.0)", "log((1.0 + exp(x)))"] in _rows(page)
    assert ["softplus", "log((1.0 + exp(x)))", "softplus(x)"] in _rows(page)
    for heading in ("Input and result", "Rules that fired", "Profile"):
        assert heading in page
    assert "canonicalize" in page  # the profile's phases


def test_an_exploration_report_shows_forms_costs_derivations_and_accuracy(tmp_path, capsys):
    out = tmp_path / "explore.html"
    assert (
        main(["explore", "log(1 + exp(x))", "-n", "3", "--limit-seconds", "inf", "--report", str(out)]) == 0
    )
    page = out.read_text(encoding="utf-8")
    _self_contained(page)
    assert "softplus(x)" in page and "<th>derivation</th>" in page and "<th>assumptions</th>" in page
    plot = page[page.index("Accuracy over the input range") :]
    assert "<svg" in plot and plot.count("<polyline") == 3 and "bits of error" in plot


def test_a_report_that_cannot_be_written_is_a_clear_error(tmp_path, capsys):
    target = tmp_path / "missing" / "r.html"
    assert main(["rewrite", "x + 0", "--report", str(target)]) == 2
    assert f"cannot write the report {str(target)!r}" in capsys.readouterr().err


def _png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the decompressed scanlines of a PNG (enough to tell a blank page)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, width, height, idat = 8, 0, 0, b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    return width, height, zlib.decompress(idat)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/install-optional installs it)")
@pytest.mark.parametrize("command", ["rewrite", "explore"])
def test_the_report_loads_in_a_headless_browser_and_is_drawn(tmp_path, command):
    out = tmp_path / "report.html"
    argv = [command, "log(1 + exp(x))", "--report", str(out)]
    assert main(argv) == 0
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    url = out.as_uri()
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert f"relwrite {command}: log(1 + exp(x))" in html.unescape(dom)
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1000,1200", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    width, height, pixels = _png_pixels(shot)
    assert (width, height) == (1000, 1200)
    assert len(set(pixels)) > 16  # text, rules and a plot: far from one flat colour


def test_a_proof_report_shows_both_expressions_and_each_step(tmp_path, capsys):
    """`explore --prove --report` wrote nothing and said nothing."""
    out = tmp_path / "proof.html"
    argv = ["explore", "x * y / y", "--prove", "x", "--include", "unsafe", "--limit-seconds", "inf"]
    argv += ["--report", str(out)]
    assert main(argv) == 0
    page = out.read_text(encoding="utf-8")
    _self_contained(page)
    assert "relwrite explore: x * y / y == x" in html.unescape(page)
    steps = re.findall(r"<tr><td>\d+</td><td>(.*?)</td><td>(.*?)</td>", page)
    assert steps and all(direction in ("forward", "backward") for _, direction in steps)
    assert "y != 0" in html.unescape(page[page.index("<h2>Assumptions") :])


def test_a_proof_report_says_when_no_proof_was_found(tmp_path, capsys):
    out = tmp_path / "proof.html"
    argv = ["explore", "x", "--prove", "x + 1", "--limit-nodes", "50", "--report", str(out)]
    assert main(argv) == 1
    page = out.read_text(encoding="utf-8")
    assert "Not shown equal" in page and "relwrite explore: x vs x + 1" in html.unescape(page)

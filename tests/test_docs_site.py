"""The documentation site: `docs/` builds with MkDocs, warnings as errors, with the API reference."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strictly_with_every_page_and_the_api_reference(tmp_path):
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path / "site"), strict=True)
    build(config)
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    built = {
        p.parent.name if p.parent != tmp_path / "site" else "index"
        for p in (tmp_path / "site").rglob("index.html")
    }
    assert pages <= built, f"pages missing from the site: {pages - built}"
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "Compile the graph from" in api  # relwrite.function's docstring
    assert "DestroyHandler" in api and "Shape_i" in api


def test_every_page_is_in_the_navigation():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = {next(iter(entry.values())) for entry in config["nav"]}
    assert listed == {p.name for p in (ROOT / "docs").glob("*.md")}

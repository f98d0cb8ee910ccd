"""The manual as built: strict and clean, readable offline, and free of the seed numbers the
project's sources used to cite papers by."""

from __future__ import annotations

import re

from tests.docs.conftest import BuiltSite
from tests.docs.docsite import ROOT, pages, reference_hook, text_of

SEED = re.compile(r"\bseeds? 00[0-4]", re.IGNORECASE)
# what a page loads by itself: scripts, stylesheets, icons, images, frames, fonts in CSS
ASSET = re.compile(r"<(?:script|img|iframe|source|audio|video)\b[^>]*\bsrc=\"([^\"]+)\""
                   r"|<link\b[^>]*\bhref=\"([^\"]+)\"|url\(\s*['\"]?([^'\")]+)", re.IGNORECASE)


def test_the_manual_builds_strict_with_no_warning(docs_site: BuiltSite) -> None:
    assert "WARNING" not in docs_site.log, docs_site.log
    assert (docs_site.path / "index.html").is_file()
    for page in ("reference/cli.html", "reference/rest.html", "reference/python/index.html",
                 "tutorials/crawler.html", "benchmarks.html", "changelog.html"):
        assert (docs_site.path / page).is_file(), page


def test_no_seed_number_in_the_readme_the_manual_or_any_help() -> None:
    for path in [ROOT / "README.md", *pages()]:
        found = SEED.findall(path.read_text(encoding="utf-8"))
        assert not found, (path, found)
    for words, _, parser in reference_hook().commands():
        assert not SEED.search(parser.format_help()), ("polite", *words)


def test_no_seed_number_on_any_built_page(docs_site: BuiltSite) -> None:
    """The generated pages too: --help's texts and the public docstrings."""
    for path in docs_site.path.rglob("*.html"):
        found = SEED.findall(text_of(path.read_text(encoding="utf-8")))
        assert not found, (path.relative_to(docs_site.path), found)


def test_the_pages_load_nothing_from_elsewhere(docs_site: BuiltSite) -> None:
    """Read from file:// or a local server with no network: no CDN script, font or style,
    and links between pages are relative."""
    files = [*docs_site.path.rglob("*.html"), *docs_site.path.rglob("*.css")]
    assert len(files) > 30
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, path
        for match in ASSET.finditer(text):
            target = next(group for group in match.groups() if group is not None)
            assert not re.match(r"(?:https?:)?//", target), (path, target)
        if path.suffix == ".html" and path.name != "404.html":  # a server's page, by design
            for href in re.findall(r'<a\b[^>]*\bhref="([^"]+)"', text):
                assert not href.startswith("/"), (path, href)


def test_the_install_lines_name_every_extra() -> None:
    """README.md and the home page show an install line for each extra a user picks."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]
    wanted = set(extras) - {"test", "bench"}
    assert {"crawl", "survey", "all", "docs"} <= wanted
    for path in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        text = path.read_text(encoding="utf-8")
        missing = {extra for extra in wanted if f"'.[{extra}]'" not in text}
        assert not missing, (path.name, missing)

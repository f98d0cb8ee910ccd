"""The survey's AI-usage counts: which sites state preferences, through which mechanism,
for which purposes, and which AI crawlers of the crawler list they name and block, on a
corpus whose truth is known; and the measured counts of the shared corpus."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.commands import run
from tests.conftest import ON_CORPUS_SURVEY

FILES = {
    "a.example": "User-agent: *\nAllow: /\nContent-Usage: train-ai=n\n\n"
                 "User-agent: GPTBot\nDisallow: /\n",
    "b.example": "User-agent: *\nContent-Signal: search=yes, ai-train=no\n",
    "c.example": "License: https://c.example/license.xml\nUser-agent: CCBot\n"
                 "Disallow: /private\n",
    "d.example": "User-agent: *\nDisallow: /\n",
    # A Content-Usage line before any group applies to no crawler: not counted.
    "e.example": "Content-Usage: train-ai=n\nUser-agent: *\nAllow: /\n",
    # Malformed: the line is skipped, the mechanism not counted.
    "f.example": "User-agent: *\nContent-Usage: train-ai=n,\n",
}


def table(folder: Path, name: str) -> list[dict[str, str]]:
    with (folder / "report" / "tables" / f"{name}.csv").open(encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def test_usage_tables_equal_the_truth(tmp_path: Path) -> None:
    files = tmp_path / "robots"
    files.mkdir()
    for name, body in FILES.items():
        (files / f"{name}.txt").write_text(body)
    out = tmp_path / "s"
    assert run("survey", "--robots-dir", str(files), "--out", str(out)).returncode == 0
    result = run("report", str(out))
    assert result.returncode == 0, result.stderr
    usage = {r["mechanism"]: int(r["files"]) for r in table(out, "usage")}
    assert usage == {"content-usage": 1, "content-signal": 1, "license": 1, "any": 3}
    purposes = {(r["mechanism"], r["purpose"]): (int(r["allow"]), int(r["disallow"]))
                for r in table(out, "usage_purposes")}
    assert purposes[("content-usage", "train-ai")] == (0, 1)
    assert purposes[("content-signal", "search")] == (1, 0)
    assert purposes[("content-signal", "train-ai")] == (0, 1)
    assert sum(a + d for a, d in purposes.values()) == 3
    crawlers = {r["token"]: (int(r["files"]), int(r["named"]), int(r["blocked"]))
                for r in table(out, "ai_crawlers")}
    assert crawlers["GPTBot"] == (6, 1, 2)  # named in a; shut out in a and by d's "*"
    assert crawlers["CCBot"] == (6, 1, 1)  # named in c for /private only; d shuts it out
    assert crawlers["ClaudeBot"] == (6, 0, 1)
    svg = (out / "report" / "figures" / "ai_usage.svg").read_text(encoding="utf-8")
    assert "<svg" in svg and "no data in this survey" not in svg
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    assert 'id="t-usage"' in page and 'id="t-ai-crawlers"' in page


@pytest.mark.slow
@ON_CORPUS_SURVEY
def test_the_shared_corpus_counts(corpus_survey: Path) -> None:
    """The README's counts, measured on the shared robots.txt corpus."""
    out = corpus_survey
    usage = {r["mechanism"]: int(r["files"]) for r in table(out, "usage")}
    # The corpus predates every mechanism: no file states a preference.
    assert usage == {"content-usage": 0, "content-signal": 0, "license": 0, "any": 0}
    crawlers = {r["token"]: (int(r["files"]), int(r["named"]), int(r["blocked"]))
                for r in table(out, "ai_crawlers")}
    assert crawlers["CCBot"] == (3697, 36, 75)
    assert crawlers["Diffbot"] == (3697, 3, 49)
    assert crawlers["GPTBot"] == (3697, 0, 49)  # shut out by "*" groups alone

"""Seed 004's robots.txt counts: on small files whose figures are known, and on the real
corpus against an independent count."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from polite.core.survey import agent_key, file_stats, popular_agents, popular_fields
from polite.robots import parse
from tests.conftest import shared_path


def test_one_file_counted() -> None:
    stats = file_stats(b"\xef\xbb\xbfUser-agent: *\nUser-Agent: BadBot/2.1  # a comment\n"
                       b"Disallow: /a\nDISALLOW: /b\nDisalow: /typo\n\n"
                       b"User-agent: Other\nAllow: /\n# Disallow: /commented\n"
                       b"Sitemap: https://e.com/s.xml\nnot a field\n")
    assert stats.lines == 11
    assert stats.fields == Counter({"user-agent": 3, "disallow": 2, "disalow": 1, "allow": 1,
                                    "sitemap": 1})
    assert stats.agents == ["*", "BadBot/2.1", "Other"]
    assert stats.sections == [2, 0]  # two agents share the first section
    assert stats.sitemaps == 1


def test_agent_values_compare_without_case_whitespace_or_versions() -> None:
    assert agent_key("Googlebot/2.1") == agent_key(" googlebot ") == "googlebot"
    assert agent_key("Microsoft  URL Control") == "microsoft url control"
    assert agent_key("WebZIP/4.21") == agent_key("webzip") == "webzip"
    assert agent_key("*") == "*"


def test_tables_2_and_3() -> None:
    files = [file_stats(b"User-agent: *\nDisallow: /a\nDisallow: /b\n"),
             file_stats(b"User-agent: Googlebot/2.1\nDisallow: /x\nCrawl-delay: 5\n"
                        b"User-agent: *\nDisallow: /\n"),
             file_stats(b"User-Agent: googlebot\nAllow: /\n")]
    fields = {row.name: (row.files, row.count) for row in popular_fields(files)}
    assert fields == {"User-agent": (3, 4), "Disallow": (2, 4), "Crawl-delay": (1, 1),
                      "Allow": (1, 1)}
    agents = popular_agents(files)
    assert [(row.name, row.files, row.count) for row in agents] == [
        ("*", 2, 2), ("Googlebot", 2, 2)]
    assert agents[0].share == 0.5


def _independent(paths: list[Path]) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Files holding each field, lines of each field, and User-agent values, counted
    another way: each line cut at '#', split at its first ':', the name checked by hand."""
    holding: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    agents: Counter[str] = Counter()
    for path in paths:
        text = path.read_bytes().decode("utf-8", "replace").lstrip("\ufeff")
        seen = set()
        for line in text.splitlines():
            head, colon, value = line.partition("#")[0].partition(":")
            name = head.strip(" \t")
            if not colon or re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name) is None:
                continue
            key = name.lower()
            lines[key] += 1
            seen.add(key)
            if key == "user-agent":
                agents[agent_key(value)] += 1
        holding.update(seen)
    return holding, lines, agents


@pytest.mark.slow
def test_tables_2_and_3_on_the_corpus_equal_an_independent_count() -> None:
    folder = shared_path("corpus", "robots")
    # HTML served as robots.txt is its own outcome in the survey, not a robots.txt file.
    paths = [path for path in sorted(folder.glob("*.txt"))
             if not parse(path.read_bytes()).looks_like_html]
    assert len(paths) > 3000
    files = [file_stats(path.read_bytes()) for path in paths]
    holding, lines, agents = _independent(paths)
    for row in popular_fields(files)[:10]:
        assert (row.files, row.count) == (holding[row.name.lower()], lines[row.name.lower()])
    assert [row.name.lower() for row in popular_fields(files)[:3]] == [
        "user-agent", "disallow", "sitemap"]
    top = popular_agents(files)[:10]
    assert [row.count for row in top] == [n for _, n in agents.most_common(10)]
    assert top[0].name == "*"

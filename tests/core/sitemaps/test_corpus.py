"""Every fixture of ../shared/corpus/sitemaps against its expectation in expectations.json."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from polite.robots import parse as parse_robots
from polite.sitemaps import parse
from tests.conftest import SHARED, shared_path

CORPUS = SHARED / "corpus" / "sitemaps"


def _expectations() -> list[dict[str, Any]]:
    path = CORPUS / "expectations.json"
    if not path.exists():
        return []
    cases: list[dict[str, Any]] = json.loads(path.read_text())
    return cases


def _id(case: dict[str, Any]) -> str:
    return str(case["file"])


SITEMAP_CASES = [case for case in _expectations()
                 if case["kind"] not in ("robots.txt", "security-target", "gzip-bomb")]
ROBOTS_CASES = [case for case in _expectations() if case["kind"] == "robots.txt"]


def _base(case: dict[str, Any]) -> str:
    # The URL the source project's test fetched the file from, when it names one.
    url = str(case.get("sitemap_url_in_test") or "http://www.example.com/sitemap.xml")
    return url.split(" ")[0]


@pytest.mark.parametrize("case", SITEMAP_CASES, ids=_id)
def test_fixture_gives_its_expected_urls(case: dict[str, Any]) -> None:
    data = shared_path("corpus", "sitemaps", case["file"]).read_bytes()
    sitemap = parse(data, url=_base(case))
    locs = [entry.loc for entry in sitemap]
    expected = case["expected_url_count"]
    if expected is None:  # malformed: nothing comes out, and the break is reported
        assert locs == []
        assert sitemap.stopped is not None and sitemap.stopped.code == "broken-xml"
        assert "line 3" in sitemap.stopped.message
        return
    assert len(locs) == expected, sitemap.issues
    for loc in case["sample_locs"]:
        assert loc in locs
    assert sitemap.stopped is None, sitemap.stopped


@pytest.mark.parametrize("case", ROBOTS_CASES, ids=_id)
def test_robots_fixture_lists_its_sitemaps(case: dict[str, Any]) -> None:
    data = shared_path("corpus", "sitemaps", case["file"]).read_bytes()
    robots = parse_robots(data, url="http://domain.com/robots.txt")
    assert len(robots.sitemaps) == case["expected_url_count"], robots.sitemaps
    for loc in case["sample_locs"]:
        assert loc in robots.sitemaps


def test_the_gzip_bomb_is_refused_within_seconds_with_a_message() -> None:
    data = shared_path("corpus", "sitemaps", "scrapy_bomb-gzip.bin").read_bytes()
    started = time.monotonic()
    sitemap = parse(data)
    assert list(sitemap) == []
    assert sitemap.stopped is not None
    assert "not a sitemap" in sitemap.stopped.message
    # With Scrapy's 10,000,000-byte cap the size limit itself stops it.
    capped = parse(data, max_bytes=1_000_000)
    assert list(capped) == []
    assert capped.stopped is not None and capped.parser.bytes_out <= 1_000_000 + (1 << 20)
    assert time.monotonic() - started < 5


def test_the_gzip_bomb_says_its_filler_once() -> None:
    data = shared_path("corpus", "sitemaps", "scrapy_bomb-gzip.bin").read_bytes()
    sitemap = parse(data)
    assert list(sitemap) == []
    assert [(i.line, i.code, i.count) for i in sitemap.issues] == [
        (1, "not-a-url", 100), (100, "not-a-sitemap", 1)]
    assert sitemap.issues[0].message.endswith("(100 times: lines 1, 2, 3, 4, 5, 6, 7, 8, 9, "
                                              "10, ...)")


def test_the_regp_sample_reports_type_and_srcloc() -> None:
    data = shared_path("corpus", "sitemaps", "own_regp_sample.xml").read_bytes()
    entries = list(parse(data))
    assert [entry.type for entry in entries] == ["data", "list", "other", "data"]
    assert entries[0].srcloc == "http://www.example.com/news/hot.asp?date=1030&id=8"
    assert entries[3].srcloc == "http://www.example.com/newsItem.do?id=1"
    assert entries[1].srcloc is None


def test_xxe_target_is_never_read(tmp_path: Path) -> None:
    target = shared_path("corpus", "sitemaps", "crawler-commons_do-not-visit.txt")
    document = (
        '<?xml version="1.0"?>\n'
        f'<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file://{target}">]>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        "<url><loc>http://www.example.com/visit-here</loc></url>\n"
        "<url><loc>&xxe;</loc></url>\n"
        "</urlset>\n"
    ).encode()
    sitemap = parse(document)
    locs = [entry.loc for entry in sitemap]
    assert "http://www.example.com/do-not-visit-here" not in locs
    assert sitemap.stopped is not None and sitemap.stopped.code == "entity-declared"
    xinclude = (
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        'xmlns:xi="http://www.w3.org/2001/XInclude">\n'
        "<url><loc>http://www.example.com/visit-here</loc></url>\n"
        f'<url><loc><xi:include href="file://{target}" parse="text"/></loc></url>\n'
        "</urlset>\n"
    ).encode()
    assert [entry.loc for entry in parse(xinclude)] == ["http://www.example.com/visit-here"]

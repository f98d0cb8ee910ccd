"""A crawl that owns its folder's SQLite file commits its pages together (a group commit),
each page's line and WARC records on disk before the commit that marks it done; on a disk
short of room it commits each page on its own again."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import TypeVar

import pytest

from polite.crawl import CrawlSettings, open_crawler
from polite.crawl import crawler as crawler_module
from polite.storage.sqlite import SQLiteStore
from tests.sites import Reply, Site, serve

PAGES = 30
HTML = {"Content-Type": "text/html"}
T = TypeVar("T")


def await_(step: Coroutine[object, object, T]) -> T:
    return asyncio.run(step)


def chain_site(host: str) -> Site:
    site = Site(host)
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    site.routes["/"] = Reply(200, b'<a href="/p0">start</a>', HTML)
    for i in range(PAGES):
        link = f'<a href="/p{i + 1}">next</a>' if i + 1 < PAGES else ""
        site.routes[f"/p{i}"] = Reply(200, link.encode(), HTML)
    return site


def crawl_counting_commits(out: Path, site: Site, statements: list[str] | None = None
                           ) -> tuple[int, dict[str, int]]:
    """Crawl the site into ``out``; the COMMITs the crawl's store saw, and its counts (and
    every statement, into ``statements``)."""
    commits = 0

    def seen(statement: str) -> None:
        nonlocal commits
        commits += statement.strip().upper() == "COMMIT"
        if statements is not None:
            statements.append(statement)

    async def run() -> dict[str, int]:
        settings = CrawlSettings(agent="GroupBot", concurrency=4)
        async with open_crawler(out, settings, default_delay_s=0.0,
                                allow_private=True) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            crawler.frontier._db.set_trace_callback(seen)  # type: ignore[attr-defined]
            await crawler.run()
            return (await crawler.counts())._asdict()

    counts = asyncio.run(asyncio.wait_for(run(), 60))
    return commits, counts


def test_pages_are_committed_together_and_none_is_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the page count ends a group here (no time does), so that the count of commits
    # does not hang on how fast the machine is.
    monkeypatch.setattr(crawler_module, "GROUP_COMMIT_S", 3600.0, raising=False)
    site = chain_site("127.0.211.7")
    with serve(site):
        commits, counts = crawl_counting_commits(tmp_path, site)
    assert counts["fetched"] == PAGES + 1 and counts["queued"] == counts["leased"] == 0
    assert commits <= 3, commits  # one a page (two with its slot claim) before
    lines = [json.loads(line) for line in (tmp_path / "pages.jsonl").read_text().splitlines()]
    assert sorted(line["url"] for line in lines if line["outcome"] == "fetched") == sorted(
        {site.origin + "/", *(f"{site.origin}/p{i}" for i in range(PAGES))})
    paths = [path for _, path in site.arrivals if path != "/robots.txt"]
    assert len(paths) == len(set(paths)) == PAGES + 1


def test_the_lines_and_records_of_a_group_are_written_at_once_before_its_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crawler_module, "GROUP_COMMIT_S", 3600.0, raising=False)
    writes: list[int] = []
    write = os.write

    def counted(fd: int, data: bytes) -> int:
        writes.append(fd)
        return write(fd, data)

    monkeypatch.setattr(os, "write", counted)
    site = chain_site("127.0.211.10")
    with serve(site):
        _, counts = crawl_counting_commits(tmp_path, site)
    assert counts["fetched"] == PAGES + 1
    # a write of pages.jsonl and one of the WARC file a page before
    assert len(writes) <= 8, len(writes)
    lines = (tmp_path / "pages.jsonl").read_text().splitlines()
    assert len(lines) == PAGES + 1
    (warc,) = (tmp_path / "warc").glob("*.warc.gz")
    from fastwarc.warc import ArchiveIterator

    with warc.open("rb") as stream:
        kinds = [record.headers["WARC-Type"] for record in ArchiveIterator(stream)]
    assert kinds.count("response") == kinds.count("request") == PAGES + 1


def test_a_disk_short_of_room_commits_each_page_on_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crawler_module, "GROUP_COMMIT_S", 3600.0, raising=False)
    monkeypatch.setattr(crawler_module, "GROUP_MIN_FREE_BYTES", 1 << 62, raising=False)
    site = chain_site("127.0.211.8")
    with serve(site):
        commits, counts = crawl_counting_commits(tmp_path, site)
    assert counts["fetched"] == PAGES + 1
    assert commits >= PAGES + 1


def test_the_hosts_slots_are_written_with_the_group_and_read_back_after_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Alone with its file, the crawl keeps each host's slot and response time in memory and
    # writes them with the group's commit, not in statements of each page's own.
    monkeypatch.setattr(crawler_module, "GROUP_COMMIT_S", 3600.0, raising=False)
    site = chain_site("127.0.211.11")
    statements: list[str] = []
    with serve(site):
        commits, counts = crawl_counting_commits(tmp_path, site, statements)
        ended = time.time()
    assert counts["fetched"] == PAGES + 1
    slots = [s for s in statements if "slots" in s or "response_times" in s]
    # a read of the host's row, then a write of each table with each commit (before: a
    # read and a write of the slot, and a write of the response time, a page)
    assert len(slots) <= 1 + 2 * commits, slots
    # and what the crawl did is in the file for the next run: its last request's start,
    # from which the host's delay counts, and the response time. The start is when the
    # request really left (LateStart), at or after the page's fetched_at (written to the
    # millisecond, cut) by however long a busy machine took to send it.
    fetched = sorted(json.loads(line)["fetched_at"] for line in
                     (tmp_path / "pages.jsonl").read_text().splitlines())
    from datetime import datetime

    second_last, last = (datetime.fromisoformat(at).timestamp() for at in fetched[-2:])
    store = SQLiteStore(tmp_path / "crawl.sqlite", lambda: 0.0)
    try:
        claim = await_(store.peek(site.host, 3600.0))
        started = claim.at - 3600.0
        assert not claim.granted and second_last < started and last <= started + 0.001
        assert started <= ended
        (facts,) = await_(store.host_facts([site.host]))
        assert facts.response_time_s is not None and facts.response_time_s > 0
    finally:
        await_(store.close())


def test_a_crawl_run_again_at_once_keeps_the_hosts_delay_from_the_last_run(
        tmp_path: Path) -> None:
    # The host's last start, kept in memory during the run, is in the file when it ends:
    # the next run's first request waits for the delay that the last one began.
    site = chain_site("127.0.211.12")
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nCrawl-delay: 0.5\n")

    async def run(pages: int) -> None:
        settings = CrawlSettings(agent="GroupBot", max_pages=pages, sitemaps=False)
        async with open_crawler(tmp_path, settings, allow_private=True) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            await crawler.run()

    with serve(site):
        asyncio.run(asyncio.wait_for(run(2), 60))
        asyncio.run(asyncio.wait_for(run(1), 60))
    pages = [(at, path) for at, path in site.arrivals if path != "/robots.txt"]
    assert [path for _, path in pages] == ["/", "/p0", "/p1"]
    assert pages[2][0] - pages[1][0] >= 0.5 - 0.01, pages

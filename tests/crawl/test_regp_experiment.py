"""Seed 000, section 5, crawled for real: Tables 9, 10 and 11, the Visit-time window and
``Language: fr``, each on its own loopback site (``polite.demo``), measured at the site.

The crawler runs with a default delay of 0, as the seed's crawler had no delay of its own:
every gap the site sees is one the site asked for. Gaps are measured at the site between
request arrivals, and held to the intervals exactly: the crawler asks for a host's next slot
a few milliseconds after the time it is given, and a request that had to wait for its
connection moves its slot by that wait, so that the spacing holds where it is measured.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
import time
from pathlib import Path
from typing import Any

from polite.crawl import CrawlSettings, Page, open_crawler
from polite.demo import RegpSite, start_site, visit_time_value
from polite.demo.regp_site import SEED_RESOURCES, Request, resource_of

LANGUAGES = ("zh", "en")  # the crawler reads Chinese and English, not French
HOME, USELESS, LATEST, OLD = SEED_RESOURCES


def crawl(folder: Path, *sites: RegpSite, stop_at: RegpSite | None = None
          ) -> list[dict[str, Any]]:
    """Crawl the sites' home pages in one crawl; with ``stop_at``, stop after that site's
    first page. Returns pages.jsonl."""

    async def run() -> None:
        settings = CrawlSettings(agent="regpbot", languages=LANGUAGES, warc=False)
        crawler_box = []

        def stop(page: Page) -> None:
            if stop_at is not None and page.url.startswith(stop_at.origin + "/"):
                crawler_box[0].stop()

        async with open_crawler(folder, settings, default_delay_s=0, allow_private=True,
                                on_page=stop) as crawler:
            crawler_box.append(crawler)
            await crawler.add_seeds([site.origin + "/" for site in sites])
            await crawler.run()

    asyncio.run(run())
    lines = (folder / "pages.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def paths(site: RegpSite) -> list[str]:
    return [request.path for request in site.requests]


def rows(site: RegpSite) -> dict[str, tuple[bool, float | None]]:
    return {row.resource: (row.fetched, row.min_gap_s) for row in site.table()}


def test_table_9_without_robots_txt_only_the_linked_news(tmp_path: Path) -> None:
    with start_site("127.0.9.1", robots="none", news=6) as site:
        crawl(tmp_path, site)
    seen = paths(site)
    table = rows(site)
    # Home page Yes; useless pages Yes; latest news Yes; old news No (Table 9).
    assert [table[name][0] for name in SEED_RESOURCES] == [True, True, True, False]
    assert {"/login.do", "/reg.do", "/newsRelease.do"} <= set(seen)
    assert sorted(p for p in seen if p.startswith("/newsItem.do")) == [
        "/newsItem.do?id=4", "/newsItem.do?id=5", "/newsItem.do?id=6"]
    # The sitemap is there, but nothing names it; the snapshots and the Ajax comments are
    # never reached.
    assert not [p for p in seen if p.startswith(("/sitemap.xml", "/html/", "/comments.do"))]
    # Crawl delay 0: nothing asked the crawler to wait (far below Table 10's gaps).
    assert all(gap is not None and gap < 0.5 for fetched, gap in table.values() if fetched)


def test_table_10_regp_guides_the_crawler_to_every_snapshot(tmp_path: Path) -> None:
    with start_site("127.0.9.2", robots="regp", news=4) as site:
        pages = crawl(tmp_path, site)
    seen = paths(site)
    table = rows(site)
    # Home page Yes 0.5; useless pages No; latest and old news Yes 1.0 (Table 10).
    assert [table[name][0] for name in SEED_RESOURCES] == [True, False, True, True]
    assert not [p for p in seen if p in ("/login.do", "/reg.do", "/newsRelease.do")]
    # Every news page, old and latest, through its snapshot; none through newsItem.do.
    assert sorted(p for p in seen if p.startswith("/html/")) == [
        f"/html/news{n}.html" for n in range(1, 5)]
    assert not [p for p in seen if p.lower().startswith("/newsitem.do")]
    snapshots = {r["url"]: r.get("srcloc") for r in pages
                 if r.get("outcome") == "fetched" and "/html/" in r["url"]}
    assert snapshots == {f"{site.origin}/html/news{n}.html":
                         f"{site.origin}/newsItem.do?id={n}" for n in range(1, 5)}
    # Request-rate 120/m: 0.5 s between any two requests, robots.txt included; the /html/
    # brace block: 1 s before each snapshot.
    gaps = site.gaps()
    assert len(gaps) == len(seen) - 1 >= 6
    for gap, request in gaps:
        assert gap >= 0.5, (request.path, gap)
        if request.path.startswith("/html/"):
            assert gap >= 1.0, (request.path, gap)
    home_gap, latest_gap, old_gap = table[HOME][1], table[LATEST][1], table[OLD][1]
    assert home_gap is not None and home_gap >= 0.5
    assert latest_gap is not None and latest_gap >= 1.0
    assert old_gap is not None and old_gap >= 1.0
    # Cookie: user=robot on every page request; Encoding: gzip, deflate asked for.
    for request in site.requests:
        if resource_of(request.path, site.news) not in ("robots.txt", "sitemap.xml"):
            assert request.headers.get("cookie") == "user=robot", request.path
            assert request.headers.get("accept-encoding") == "gzip, deflate"
            assert request.headers.get("accept-language") == "zh-CN"


def test_table_11_old_rep_keeps_out_but_does_not_guide(tmp_path: Path) -> None:
    with start_site("127.0.9.3", robots="rep", news=6) as site:
        pages = crawl(tmp_path, site)
    seen = paths(site)
    table = rows(site)
    # Home page Yes; useless pages No; latest news Yes; old news No (Table 11).
    assert [table[name][0] for name in SEED_RESOURCES] == [True, False, True, False]
    assert not [p for p in seen if p in ("/login.do", "/reg.do", "/newsRelease.do")]
    assert not [p for p in seen if p.startswith(("/sitemap.xml", "/html/"))]
    blocked = sorted(r["url"].rsplit("/", 1)[1] for r in pages if r.get("rule"))
    assert blocked == ["login.do", "newsRelease.do", "reg.do"]
    assert all(gap is not None and gap < 0.5 for fetched, gap in table.values() if fetched)


def test_visit_time_window_waits_and_other_sites_go_on(tmp_path: Path) -> None:
    opens = math.ceil(time.time()) + 3  # Visit-time has whole seconds
    window = visit_time_value(opens)
    with start_site("127.0.9.4", robots="regp", news=2, visit_time=window) as late, \
            start_site("127.0.9.5", robots="none", news=3) as other:
        crawl(tmp_path, late, other, stop_at=late)
    # Before the window, the only request to the site is its robots.txt, which the crawler
    # must read to learn of the window at all.
    assert [r.path for r in late.requests if r.wall < opens] == ["/robots.txt"]
    after = [r for r in late.requests if r.wall >= opens]
    assert after, "nothing fetched once the window opened"
    # The countdown timer: the crawl of the site starts within a second of the opening.
    assert after[0].wall - opens < 1.0, after[0].wall - opens
    # Its sitemap first (robots.txt names it), then its first page, still within the second.
    assert [r.path for r in after[:2]] == ["/sitemap.xml", "/"]
    assert after[1].wall - opens < 1.0, after[1].wall - opens
    # The other site was crawled meanwhile, all of it before the window opened.
    assert rows(other)[HOME][0] and rows(other)[LATEST][0]
    assert max(r.wall for r in other.requests) < opens


def test_language_fr_no_page_and_the_reason_said(tmp_path: Path) -> None:
    with start_site("127.0.9.6", robots="regp", news=3, language="fr") as site:
        pages = crawl(tmp_path, site)
    assert paths(site) == ["/robots.txt"]
    (record,) = pages
    assert record["url"] == site.origin + "/"
    assert record["outcome"] == "skipped"
    assert "Language (fr)" in record["reason"] and "zh, en" in record["reason"]


def test_the_site_stamps_a_request_when_it_arrives_not_when_a_thread_gets_to_it() -> None:
    """The site's thread is held (a loaded machine) while the next request of a kept-alive
    connection arrives: the request is recorded at its arrival, before the thread was let
    go, not when the thread read it."""
    sent = threading.Event()
    holding = threading.Event()

    def hold(request: Request, status: int) -> None:
        if request.path == "/":
            holding.set()
            sent.wait(10)  # the thread is busy until the next request has been sent

    with start_site("127.0.151.1", robots="none", on_request=hold) as site, \
            socket.create_connection(site._server.server_address[:2]) as client:
        host = site.origin.removeprefix("http://")
        client.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert holding.wait(10)
        client.sendall(f"GET /news.do HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        released = time.monotonic()  # the bytes are in the site's socket by now
        sent.set()
        client.settimeout(10)
        while b"/news.do" not in b"".join(r.path.encode() for r in site.requests):
            assert client.recv(65536)
    news = next(r for r in site.requests if r.path == "/news.do")
    assert news.at <= released, news.at - released

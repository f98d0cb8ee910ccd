"""What a crawl asks of a site and writes about it: one line per site in ``sites.jsonl``,
and the site's REGP request guidance on every request after robots.txt, sitemaps too."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
from pathlib import Path

from polite.crawl import CrawlSettings, open_crawler
from tests.sites import Reply, Site, serve

HTML = {"Content-Type": "text/html"}


def crawl(folder: Path, site: Site, settings: CrawlSettings, delay_s: float) -> None:
    async def run() -> None:
        async with open_crawler(folder, settings, default_delay_s=delay_s,
                                allow_private=True) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            await crawler.run()

    asyncio.run(asyncio.wait_for(run(), 60))


def test_a_site_whose_sitemaps_wait_for_its_delay_has_one_line_in_sites_jsonl(
        tmp_path: Path) -> None:
    # The sitemap waits for the delay robots.txt's own fetch started: the host is set up
    # a second time when it comes due, and its line was written again.
    site = Site("127.0.6.21")
    site.routes.update({
        "/robots.txt": Reply(200, b"User-agent: *\nAllow: /\nSitemap: /sitemap.xml\n"),
        "/sitemap.xml": Reply(200, b"/a\n"),
        "/": Reply(200, b'<a href="/a">a</a>', HTML),
        "/a": Reply(200, b"a", HTML)})
    with serve(site):
        crawl(tmp_path, site, CrawlSettings(agent="OnceBot"), delay_s=0.3)
    assert site.requests[:2] == ["/robots.txt", "/sitemap.xml"]
    lines = (tmp_path / "sites.jsonl").read_text().splitlines()
    assert len(lines) == 1, lines
    assert json.loads(lines[0])["host"] == "127.0.6.21"


def test_every_request_after_robots_txt_carries_the_sites_regp_guidance(
        tmp_path: Path) -> None:
    site = Site("127.0.6.22")
    sitemap = "<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'><url><loc>" \
              "{origin}/listed</loc></url></urlset>"
    site.routes.update({
        "/robots.txt": Reply(200, b"Robot-version: 3.0\nUser-agent: *\nAllow: /\n"
                                  b"Cookie: session=robot\nEncoding: gzip\n"
                                  b"Sitemap: /sitemap.xml\n"),
        "/": Reply(200, b'<a href="/a">a</a>', HTML),
        "/a": Reply(200, b"a", HTML),
        "/listed": Reply(200, b"listed", HTML)})
    with serve(site):
        # the sitemap sent the way the site asked for it: gzip as the transfer's encoding
        body = sitemap.replace("{origin}", site.origin).encode()
        site.routes["/sitemap.xml"] = Reply(200, gzip.compress(body), {
            "Content-Type": "application/xml", "Content-Encoding": "gzip"})
        crawl(tmp_path, site, CrawlSettings(agent="GuidedBot", user_agent="GuidedBot/1.0 (+x)"),
              delay_s=0.0)
    paths = [path for _, path, _, _ in site.seen]
    assert paths[0] == "/robots.txt"
    assert set(paths[1:]) == {"/sitemap.xml", "/", "/a", "/listed"}
    for _, path, headers, _ in site.seen[1:]:
        assert headers.get("Cookie") == "session=robot", path
        assert headers.get("Accept-Encoding") == "gzip", path
        assert headers.get("User-Agent") == "GuidedBot/1.0 (+x)", path
    rows = [json.loads(line) for line in (tmp_path / "pages.jsonl").read_text().splitlines()]
    (read,) = [row for row in rows if row.get("kind") == "sitemap"]
    assert read["outcome"] == "fetched" and read["urls"] == 1


def test_robots_txt_sitemaps_and_pages_leave_through_the_crawls_one_client(
        tmp_path: Path) -> None:
    """One client a crawl: robots.txt carries the User-Agent the pages carry, and with one
    request at a time to the site the sitemap and the pages come over one kept-alive
    connection (robots.txt's own is not kept: the first request after it connects anew,
    through the private-address guard of that moment)."""
    site = Site("127.0.6.23")
    site.routes.update({
        "/robots.txt": Reply(200, b"User-agent: *\nAllow: /\nSitemap: /sitemap.xml\n"),
        "/": Reply(200, b'<a href="/a">a</a>', HTML),
        "/a": Reply(200, b"a", HTML),
        "/listed": Reply(200, b"listed", HTML)})
    with serve(site):
        site.routes["/sitemap.xml"] = Reply(200, f"{site.origin}/listed\n".encode())
        crawl(tmp_path, site, CrawlSettings(agent="OneBot", user_agent="OneBot/2.0 (+x)",
                                            per_host=1), delay_s=0.0)
    assert site.requests[0] == "/robots.txt"
    assert set(site.requests[1:]) >= {"/sitemap.xml", "/", "/a", "/listed"}
    assert {headers.get("User-Agent") for _, _, headers, _ in site.seen} == {
        "OneBot/2.0 (+x)"}
    assert len(set(site.peers[1:])) == 1, list(zip(site.requests, site.peers, strict=True))


def test_a_page_whose_connection_opens_later_than_the_delay_takes_a_new_turn(
        tmp_path: Path) -> None:
    """Three pages of a host in flight at once, its delay 0.5 s. /a's answer is slow, so /b
    needs a connection of its own, and opening it takes 0.9 s (its name resolves slowly):
    meanwhile /c is given the next slot and goes. Sent when its connection opened, /b would
    reach the site 0.4 s after /c; it is held back and fetched in a new turn, and at the
    site every two page requests are at least the delay apart."""
    site = Site("127.0.6.24")
    site.routes.update({
        "/robots.txt": Reply(200, b"User-agent: *\nCrawl-delay: 0.5\n"),
        "/": Reply(200, b'<a href="/a">a</a><a href="/b">b</a><a href="/c">c</a>', HTML),
        "/a": Reply(200, b"a", HTML, delay_s=2.0),
        "/b": Reply(200, b"b", HTML),
        "/c": Reply(200, b"c", HTML)})
    lookups = 0

    async def resolve(host: str) -> list[str]:
        # robots.txt, /, /a's kept connection; /b's is the third to open, /c's the fourth
        nonlocal lookups
        lookups += 1
        if lookups == 3:
            await asyncio.sleep(0.9)
        return [host]

    async def run() -> None:
        async with open_crawler(tmp_path, CrawlSettings(agent="LateBot", per_host=3,
                                                        sitemaps=False),
                                allow_private=True, resolve=resolve) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            await crawler.run()

    with serve(site):
        asyncio.run(asyncio.wait_for(run(), 60))
    pages = sorted((at, path) for at, path in site.arrivals if path != "/robots.txt")
    assert sorted(path for _, path in pages) == ["/", "/a", "/b", "/c"]
    assert [path for _, path in pages][-2:] == ["/c", "/b"]  # /b after /c, in a new turn
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(pages)]
    assert min(gaps) >= 0.5 - 0.01, pages
    rows = [json.loads(line) for line in (tmp_path / "pages.jsonl").read_text().splitlines()]
    assert sorted(row["url"].rsplit("/", 1)[1] for row in rows
                  if row.get("outcome") == "fetched") == ["", "a", "b", "c"]

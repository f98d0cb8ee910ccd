"""Whether fetching robots.txt takes the host's slot: one rule, said once in the manual
(docs/explanation/politeness.md, "robots.txt and the slot"), kept by every product and
measured at a loopback site. robots.txt takes no slot, except in ``polite crawl`` (the REGP
crawler, whose paper counts every request at the site)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest
import requests

from polite.crawl import CrawlSettings, open_crawler
from polite.errors import SlotNotReady
from polite.integrations.httpx import PoliteTransport
from polite.integrations.requests import PoliteAdapter
from tests.serving import ROOT, polite_serve
from tests.sites import Reply, Site, serve

DOCS = ROOT / "docs"
SECTION = "politeness.md#robotstxt-and-the-slot"
# Long enough that a page asked for right after robots.txt, with the slot taken by it, would
# be refused however slow the machine (the drop-ins and the proxy are asked not to wait).
LONG_DELAY_S = 60
CRAWL_DELAY_S = 1.0
HTML = {"Content-Type": "text/html; charset=utf-8"}


def _site(host: str, delay_s: float) -> Site:
    return Site(host, {
        "/robots.txt": Reply(200, f"User-agent: *\nCrawl-delay: {delay_s:g}\n".encode()),
        "/": Reply(200, b'<html><body><a href="/a">a</a></body></html>', HTML),
        "/a": Reply(200, b"<html><body>a</body></html>", HTML),
        "/b": Reply(200, b"b")})


def _paths(site: Site) -> list[str]:
    return [path for _, path in site.arrivals]


def test_the_rule_is_said_once_and_the_other_pages_link_to_it() -> None:
    said = re.compile(r"robots\.txt (does not use up|takes no)[^.]*slot", re.IGNORECASE)
    stating = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")
                     if path.name != "changelog.md" and path.parts[-2] != "reference"
                     and said.search(" ".join(path.read_text("utf-8").split())))
    assert stating == ["explanation/politeness.md"]
    politeness = (DOCS / "explanation" / "politeness.md").read_text("utf-8")
    assert "\n## robots.txt and the slot\n" in politeness
    assert "`polite crawl` is the one exception" in politeness
    for page in ("robots-fetch.md", "crawler.md", "survey.md"):
        assert f"]({SECTION})" in (DOCS / "explanation" / page).read_text("utf-8"), page


def test_the_httpx_transport_sends_the_first_page_in_the_slot_robots_txt_left_free() -> None:
    site = _site("127.0.35.1", LONG_DELAY_S)
    with serve(site), httpx.Client(transport=PoliteTransport(
            agent="SlotBot", allow_private=True, wait=False)) as client:
        assert client.get(site.origin + "/a").status_code == 200  # no wait after robots.txt
        with pytest.raises(SlotNotReady, match="Crawl-delay"):  # the page took the slot
            client.get(site.origin + "/b")
    assert _paths(site) == ["/robots.txt", "/a"]


def test_the_requests_adapter_sends_the_first_page_in_the_slot_robots_txt_left_free() -> None:
    site = _site("127.0.35.2", LONG_DELAY_S)
    with serve(site), requests.Session() as session:
        session.trust_env = False
        session.mount("http://", PoliteAdapter(agent="SlotBot", allow_private=True,
                                                wait=False))
        assert session.get(site.origin + "/a", timeout=30).status_code == 200
        with pytest.raises(SlotNotReady, match="Crawl-delay"):
            session.get(site.origin + "/b", timeout=30)
    assert _paths(site) == ["/robots.txt", "/a"]


def test_the_proxy_forwards_the_first_page_in_the_slot_robots_txt_left_free() -> None:
    site = _site("127.0.35.3", LONG_DELAY_S)
    with serve(site), polite_serve("--store", "memory://", "--allow-private") as api, \
            httpx.Client(proxy=str(api.base_url).rstrip("/"), trust_env=False,
                         timeout=30) as client:
        assert client.get(site.origin + "/a").status_code == 200  # reject mode: not a 429
        assert client.get(site.origin + "/b").status_code == 429
    assert _paths(site) == ["/robots.txt", "/a"]


def test_the_crawler_counts_robots_txt_as_a_request(tmp_path: Path) -> None:
    """The one exception: the first page waits the site's delay after robots.txt."""
    site = _site("127.0.35.4", CRAWL_DELAY_S)

    async def run() -> None:
        async with open_crawler(tmp_path / "crawl", CrawlSettings(agent="SlotBot"),
                                default_delay_s=0.0, allow_private=True) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            await crawler.run()

    with serve(site):
        asyncio.run(run())
    assert _paths(site) == ["/robots.txt", "/", "/a"]
    times = [at for at, _ in site.arrivals]
    assert times[1] - times[0] >= CRAWL_DELAY_S  # robots.txt took the slot
    assert times[2] - times[1] >= CRAWL_DELAY_S

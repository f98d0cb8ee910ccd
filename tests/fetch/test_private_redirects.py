"""A public site must not lead polite to an internal address: not by redirecting robots.txt,
a sitemap or a page there, and not by a name that resolves to a public address when checked
and to an internal one when connected to (DNS rebinding).

The "public" site is a loopback server whose address is let through by the guard's allowed
networks (as an operator allows an intranet); the "internal" one is another loopback address,
refused as private, that counts every request it gets. Names are resolved by a resolver the
test holds (names cannot be looked up here); everything else is real.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

from polite.clock import WallClock
from polite.core.robots.lifecycle import DisallowAll
from polite.crawl import CrawlSettings, open_crawler
from polite.fetch.http import PageFetcher
from polite.fetch.politeness import Politeness, message
from polite.fetch.robots import PublicHosts, RobotsFetcher, create_client, networks
from polite.fetch.sitemaps import SitemapWalker
from polite.storage import MemoryStore
from tests.sites import Reply, Site, serve

pytestmark = pytest.mark.anyio

PUBLIC, INTERNAL = "127.0.6.1", "127.0.6.2"
ALLOWED = networks([PUBLIC])  # the public site's address only
SECRET = b"ami-0123456789\nAKIASECRETKEY\n"
ROBOTS = b"User-agent: *\nAllow: /\n"


@contextmanager
def internal_server(port: int = 0) -> Iterator[Site]:
    """The address a site must not lead polite to, answering what an attacker wants."""
    with serve(Site(INTERNAL, {"/latest/meta-data/": Reply(200, SECRET),
                               "/robots.txt": Reply(200, ROBOTS),
                               "/": Reply(200, SECRET)}, port=port)) as site:
        yield site


class Rebinding:
    """A name that resolves to the public address the first ``public`` times it is looked
    up, and to the internal address after: what a rebinding attacker's nameserver does."""

    def __init__(self, public: int = 1) -> None:
        self.public = public
        self.asked = 0

    async def __call__(self, host: str) -> list[str]:
        assert host == "rebind.test", host
        self.asked += 1
        return [PUBLIC if self.asked <= self.public else INTERNAL]


@asynccontextmanager
async def guarded(hosts: PublicHosts) -> AsyncIterator[tuple[RobotsFetcher, Politeness]]:
    """robots.txt and the checks as polite serve and polite crawl build them."""
    clock = WallClock()
    store = MemoryStore(clock)
    async with create_client(guard=hosts) as client:
        robots = RobotsFetcher(client, store, clock, agent="politetest", public_hosts=hosts)
        yield robots, Politeness(robots, store, clock, agent="politetest",
                                 default_delay_s=0.0, public_hosts=hosts)


async def test_robots_txt_redirected_to_an_internal_address_is_not_followed() -> None:
    """The public site's /robots.txt answers 301 to the internal server: the hop is refused
    before it is asked for, robots.txt counts as unreachable (everything disallowed, asked
    again later, as after a network failure), and nothing of the internal answer is kept."""
    with internal_server() as internal:
        target = f"{internal.origin}/latest/meta-data/"
        with serve(Site(PUBLIC, {"/robots.txt": Reply(301, headers={"Location": target})})
                   ) as site:
            async with guarded(PublicHosts(WallClock(), allowed=ALLOWED)) as (robots,
                                                                            politeness):
                (verdict,) = await politeness.check([f"{site.origin}/page"])
                state = await robots.state(site.origin)
                known = await robots.known(site.origin)
    assert internal.requests == []
    assert site.requests == ["/robots.txt"]
    assert not verdict.allowed and verdict.cause == "robots"
    assert isinstance(state, DisallowAll)
    assert f"redirected to {target}" in state.reason and "private" in state.reason
    assert known is not None and known[1] == b""


async def test_a_public_redirect_is_still_followed() -> None:
    """The guard refuses only the private hop: a redirect within the allowed site goes on."""
    with serve(Site(PUBLIC, {"/robots.txt": Reply(301, headers={"Location": "/r"}),
                             "/r": Reply(200, b"User-agent: *\nDisallow: /x\n")})) as site:
        async with guarded(PublicHosts(WallClock(), allowed=ALLOWED)) as (_, politeness):
            verdicts = await politeness.check([f"{site.origin}/x", f"{site.origin}/y"])
    assert site.requests == ["/robots.txt", "/r"]
    assert [v.cause for v in verdicts] == ["robots", "allowed"]


async def test_a_sitemap_redirected_to_an_internal_address_is_not_followed() -> None:
    with internal_server() as internal:
        target = f"{internal.origin}/latest/meta-data/"
        with serve(Site(PUBLIC, {
                "/robots.txt": Reply(200, ROBOTS + b"Sitemap: /s.xml\n"),
                "/s.xml": Reply(302, headers={"Location": target})})) as site:
            hosts = PublicHosts(WallClock(), allowed=ALLOWED)
            async with guarded(hosts) as (_, politeness), create_client(guard=hosts) as client:
                walker = SitemapWalker(client, politeness, cross_host="any")
                files = [file async for file, _ in walker.walk(site.origin)]
    assert internal.requests == []
    assert [f.url for f in files] == [f"{site.origin}/s.xml"]
    assert f"redirected to {target}" in (files[0].error or "")
    assert "private" in (files[0].error or "")


async def test_robots_txt_of_a_rebinding_name_is_fetched_from_the_checked_address() -> None:
    """The name is public when the check looks it up and internal when the client would
    look it up again to connect: the client connects to what the guard checked, so the
    second answer is checked too and refused; the internal server hears nothing."""
    with internal_server() as internal:
        resolver = Rebinding(public=1)
        hosts = PublicHosts(WallClock(), allowed=ALLOWED, resolve=resolver)
        async with guarded(hosts) as (_, politeness):
            (verdict,) = await politeness.check([f"http://rebind.test:{internal.port}/page"])
    assert internal.requests == []
    assert resolver.asked == 2  # the check's lookup, then the connection's own
    assert not verdict.allowed and "private" in (message(verdict) or "")


async def test_a_sitemap_of_a_rebinding_name_is_fetched_from_the_checked_address() -> None:
    """robots.txt comes from the public address; by the time the sitemap it names is asked
    for, the name answers the internal one: the walk's connection is refused."""
    with internal_server() as internal, serve(Site(PUBLIC, {
            "/robots.txt": Reply(200, ROBOTS + b"Sitemap: /s.xml\n")}, port=internal.port)
            ) as site:
        resolver = Rebinding(public=2)  # the check's lookup and robots.txt's connection
        hosts = PublicHosts(WallClock(), allowed=ALLOWED, resolve=resolver)
        async with guarded(hosts) as (_, politeness), create_client(guard=hosts) as client:
            walker = SitemapWalker(client, politeness)
            files = [file async for file, _ in walker.walk(f"http://rebind.test:{site.port}")]
    assert site.requests == ["/robots.txt"]
    assert internal.requests == []
    assert resolver.asked == 3
    assert [f.url for f in files] == [f"http://rebind.test:{site.port}/s.xml"]
    assert "rebind.test (127.0.6.2) is a private" in (files[0].error or "")


async def test_the_guarded_client_connects_to_the_address_it_checked() -> None:
    """The same name answered the public address both times: the request goes to it (the
    name is never handed to another resolver), Host and all."""
    with serve(Site(PUBLIC, {"/robots.txt": Reply(200, b"User-agent: *\nDisallow: /x\n")})
               ) as site:
        resolver = Rebinding(public=10)
        hosts = PublicHosts(WallClock(), allowed=ALLOWED, resolve=resolver)
        async with guarded(hosts) as (_, politeness):
            verdicts = await politeness.check([f"http://rebind.test:{site.port}/x"])
    assert site.requests == ["/robots.txt"]
    assert site.seen[0][2]["Host"] == f"rebind.test:{site.port}"
    assert [v.cause for v in verdicts] == ["robots"]


async def test_the_page_fetcher_connects_only_to_an_address_the_guard_checked() -> None:
    with internal_server() as internal:
        resolver = Rebinding(public=1)
        hosts = PublicHosts(WallClock(), allowed=ALLOWED, resolve=resolver)
        assert await hosts.is_public("rebind.test")  # the politeness check's lookup
        pages = PageFetcher(resolve=hosts.address)
        try:
            got = await pages.get(f"http://rebind.test:{internal.port}/latest/meta-data/",
                                  {}, max_bytes=1024, deadline_s=10)
        finally:
            await pages.close()
    assert internal.requests == []
    assert got.status is None and got.failure == "private"
    assert "rebind.test (127.0.6.2) is a private" in (got.error or "")


def test_the_crawler_follows_no_redirect_to_an_internal_address(tmp_path: Path) -> None:
    """A page's redirect and a robots.txt's redirect to the internal server, and a rebinding
    name among the seeds: the crawl fetches the public pages and nothing internal."""
    with internal_server() as internal:
        target = f"{internal.origin}/latest/meta-data/"
        with serve(Site(PUBLIC, {
                "/robots.txt": Reply(200, ROBOTS),
                "/": Reply(200, b'<a href="/away">a</a><a href="/ok">o</a>',
                           {"Content-Type": "text/html"}),
                "/away": Reply(302, headers={"Location": target}),
                "/ok": Reply(200, b"fine", {"Content-Type": "text/html"})}, port=internal.port)
                   ) as site:

            async def run() -> None:
                settings = CrawlSettings(agent="politetest", scope="any", max_depth=3)
                async with open_crawler(tmp_path, settings, default_delay_s=0.0,
                                        allow_networks=ALLOWED,
                                        resolve=Rebinding(public=2)) as crawler:
                    await crawler.add_seeds([site.origin + "/",
                                             f"http://rebind.test:{site.port}/"])
                    await crawler.run()

            asyncio.run(asyncio.wait_for(run(), 60))
    rows = {row["url"]: row for row in map(
        json.loads, (tmp_path / "pages.jsonl").read_text().splitlines())}
    assert internal.requests == []
    assert rows[site.origin + "/ok"]["outcome"] == "fetched"
    assert rows[site.origin + "/away"]["location"] == target
    assert target not in rows or rows[target]["outcome"] != "fetched"
    rebound = rows[f"http://rebind.test:{site.port}/"]
    assert rebound["outcome"] != "fetched"

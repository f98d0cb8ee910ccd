"""Walking sites' sitemaps on real loopback servers: discovery, indexes, limits, politeness."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import time
import zlib
from typing import Any

import httpx
import pytest

from polite.clock import WallClock
from polite.core.politeness import WaitUntil
from polite.fetch import RobotsFetcher
from polite.fetch.politeness import LATE_UNNOTED_S, Politeness
from polite.fetch.sitemaps import SitemapFile, SitemapWalker, Taken, WalkSummary, polite_turn
from polite.sitemaps import Entry
from polite.storage import MemoryStore
from tests.fetch.test_decisions import StallingClock
from tests.sites import Reply, Site, serve

pytestmark = pytest.mark.anyio
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def walker(client: httpx.AsyncClient, *, delay_s: float = 0.01, **options: Any
           ) -> SitemapWalker:
    clock = WallClock()
    store = MemoryStore(clock)
    robots = RobotsFetcher(client, store, clock, agent="politetest", allow_private=True)
    politeness = Politeness(robots, store, clock, agent="politetest", default_delay_s=delay_s,
                            allow_private=True)
    return SitemapWalker(client, politeness, **options)


def urlset(*locs: str) -> bytes:
    body = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return f"<urlset {NS}>{body}</urlset>".encode()


def index(*locs: str) -> bytes:
    body = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f"<sitemapindex {NS}>{body}</sitemapindex>".encode()


async def walk(w: SitemapWalker, site: str) -> tuple[WalkSummary, list[SitemapFile],
                                                     list[Entry]]:
    summary = WalkSummary(site)
    files: list[SitemapFile] = []
    entries: list[Entry] = []
    async for file, got in w.walk(site, summary):
        files.append(file)
        entries += got
    return summary, files, entries


async def test_a_site_is_walked_from_robots_through_nested_indexes(
        client: httpx.AsyncClient) -> None:
    with serve(Site("127.0.0.21")) as site, serve(Site("127.0.0.22")) as other:
        o = site.origin
        pages = urlset(f"{o}/a", f"{o}/b", f"{o}/c")
        site.routes.update({
            "/robots.txt": Reply(200, (
                "User-agent: *\nDisallow: /private\n"
                f"Sitemap: <{o}/index.xml> # the main one\n"
                "Sitemap: /news.txt\n"
                f"sitemap: {o}/index.xml\n").encode()),
            "/index.xml": Reply(200, index(f"{o}/pages.xml", f"{o}/pages.xml.gz",
                                           f"{o}/deeper.xml", f"{o}/index.xml",
                                           f"{other.origin}/shared.xml")),
            "/pages.xml": Reply(200, pages),
            "/pages.xml.gz": Reply(200, gzip.compress(pages)),
            "/deeper.xml": Reply(200, index(f"{o}/more.xml")),
            "/more.xml": Reply(200, urlset(f"{o}/d", f"{o}/a", f"{other.origin}/x")),
            "/news.txt": Reply(200, f"{o}/e\n{o}/f\n".encode()),
        })
        summary, files, entries = await walk(walker(client), o)
    by_url: dict[str, SitemapFile] = {}
    for file in files:
        by_url.setdefault(file.url.removeprefix(o), file)
    assert summary.robots_sitemaps == 2  # the index named twice counts once
    assert sorted(e.loc.removeprefix(o) for e in entries) == ["/a", "/b", "/c", "/d", "/e",
                                                               "/f"]
    assert by_url["/pages.xml.gz"].duplicate_of == f"{o}/pages.xml"
    assert by_url["/index.xml"].level == 0 and by_url["/more.xml"].level == 2
    assert "cycle" in (files[[f.url for f in files].index(f"{o}/index.xml", 1)].error or "")
    assert "another host" in (by_url[f"{other.origin}/shared.xml"].error or "")
    assert by_url["/more.xml"].duplicates == 1 and by_url["/more.xml"].off_policy == 1
    assert summary.levels == {0: 1, 1: 1, 2: 1}
    assert (summary.files, summary.indexes, summary.urls, summary.skipped) == (5, 2, 6, 1)
    # Every file was asked for once; the shared host was never contacted.
    assert sorted(site.requests) == sorted(set(site.requests))
    assert other.requests == []


async def test_requests_to_a_host_keep_its_crawl_delay(client: httpx.AsyncClient) -> None:
    with serve(Site("127.0.0.23")) as site:
        o = site.origin
        site.routes.update({
            "/robots.txt": Reply(200, f"User-agent: *\nCrawl-delay: 0.3\nSitemap: {o}/i.xml\n"
                                 .encode()),
            "/i.xml": Reply(200, index(f"{o}/1.xml", f"{o}/2.xml", f"{o}/3.xml")),
            **{f"/{n}.xml": Reply(200, urlset(f"{o}/{n}")) for n in (1, 2, 3)},
        })
        summary, _, _ = await walk(walker(client), o)
    assert summary.urls == 3
    stamps = [at for at, path in site.arrivals if path != "/robots.txt"]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert len(gaps) == 3 and min(gaps) >= 0.25, gaps


async def test_disallowed_deep_and_missing_files_are_reported(client: httpx.AsyncClient
                                                              ) -> None:
    with serve(Site("127.0.0.24")) as site:
        o = site.origin
        site.routes.update({
            "/robots.txt": Reply(200, f"User-agent: *\nDisallow: /secret\nSitemap: {o}/0.xml\n"
                                 .encode()),
            "/0.xml": Reply(200, index(f"{o}/1.xml", f"{o}/secret.xml", f"{o}/gone.xml",
                                       "http://:80/no-host.xml")),
            "/1.xml": Reply(200, index(f"{o}/2.xml")),
            "/2.xml": Reply(200, index(f"{o}/3.xml")),
            "/secret.xml": Reply(200, urlset(f"{o}/hidden")),
        })
        summary, files, entries = await walk(walker(client, max_depth=2), o)
    errors = {f.url.removeprefix(o): f.error for f in files if f.error}
    assert "robots.txt" in (errors["/secret.xml"] or "").lower() or "disallow" in (
        errors["/secret.xml"] or "").lower()
    assert errors["/gone.xml"] == "HTTP 404"
    assert "deeper than 2" in (errors["/3.xml"] or "")
    assert "/secret.xml" not in site.requests and "/3.xml" not in site.requests
    assert "no host" in (errors["http://:80/no-host.xml"] or "")
    assert entries == [] and summary.errors == 4


async def test_well_known_paths_when_robots_names_none(client: httpx.AsyncClient) -> None:
    with serve(Site("127.0.0.25")) as site:
        o = site.origin
        site.routes.update({"/robots.txt": Reply(200, b"User-agent: *\nDisallow:\n"),
                            "/sitemap_index.xml": Reply(200, index(f"{o}/p.xml")),
                            "/p.xml": Reply(200, urlset(f"{o}/page"))})
        summary, files, _ = await walk(walker(client), o)
        assert files == [] and summary.robots_sitemaps == 0
        summary, files, entries = await walk(walker(client, well_known=True), o)
    assert [e.loc for e in entries] == [f"{o}/page"]
    assert summary.errors == 0  # /sitemap.xml and /sitemap.xml.gz are 404: not errors
    assert {f.url.removeprefix(o) for f in files} == {"/sitemap_index.xml", "/p.xml"}


async def test_cross_host_policy_site_allows_www(client: httpx.AsyncClient) -> None:
    w = walker(client, cross_host="site")
    assert w._on_policy("example.com", "https://www.example.com/s.xml")
    assert not w._on_policy("example.com", "https://cdn.example.com/s.xml")
    assert walker(client, cross_host="any")._on_policy("example.com", "https://x.test/s")
    with pytest.raises(ValueError, match="cross_host"):
        walker(client, cross_host="all")  # type: ignore[arg-type]


async def test_a_bomb_a_429_and_a_broken_file(client: httpx.AsyncClient) -> None:
    bomb = gzip.compress(f"<urlset {NS}>".encode() + b" " * (60 << 20), compresslevel=9)
    with serve(Site("127.0.0.26")) as site:
        o = site.origin
        site.routes.update({
            "/robots.txt": Reply(200, f"Sitemap: {o}/bomb.xml.gz\nSitemap: {o}/busy.xml\n"
                                 f"Sitemap: {o}/broken.xml\n".encode()),
            "/bomb.xml.gz": Reply(200, bomb),
            "/busy.xml": Reply(429, b"slow down", {"Retry-After": "1"}),
            "/broken.xml": Reply(200, f"<urlset {NS}><url><loc>{o}/kept</loc></url><url><loc>{o}"
                                 .encode()),
        })
        started = time.monotonic()
        _summary, files, entries = await walk(walker(client), o)
    assert time.monotonic() - started < 10
    errors = {f.url.removeprefix(o): f for f in files}
    assert "larger than 52,428,800 bytes" in (errors["/bomb.xml.gz"].error or "")
    assert errors["/busy.xml"].error == "HTTP 429"
    broken = errors["/broken.xml"]
    assert broken.error is None and broken.urls == 1
    assert any(i.code == "broken-xml" for i in broken.issues)
    issues = broken.as_json()["issues"]
    assert isinstance(issues, list)
    assert [(i["code"], i["count"], i["lines"]) for i in issues] == [("broken-xml", 1, [1])]
    assert [e.loc for e in entries] == [f"{o}/kept"]


async def test_read_streams_one_file(client: httpx.AsyncClient) -> None:
    with serve(Site("127.0.0.27")) as site:
        o = site.origin
        site.routes["/s.xml"] = Reply(200, urlset(*(f"{o}/{n}" for n in range(100))))
        batches: list[list[Entry]] = []
        file = await walker(client).read(f"{o}/s.xml", batches.append)
    assert file.urls == 100 and file.error is None
    assert [e.loc for batch in batches for e in batch] == [f"{o}/{n}" for n in range(100)]
    assert site.requests == ["/robots.txt", "/s.xml"]


async def test_the_wait_for_a_slot_is_not_counted_as_the_hosts_response_time(
        client: httpx.AsyncClient, tmp_path: Any) -> None:
    """An operator delay of 0.6 s spaces the files; the host answers at once. What the walk
    feeds back as the host's response time (and so its adaptive delay) is the answer's own
    time, kept in the store across a restart, and each file's seconds likewise."""
    from polite.storage import SQLiteStore

    with serve(Site("127.0.0.29")) as site:
        o = site.origin
        site.routes["/robots.txt"] = Reply(200, f"User-agent: *\nCrawl-delay: 0.05\n"
                                                f"Sitemap: {o}/index.xml\n".encode())
        site.routes["/index.xml"] = Reply(200, index(f"{o}/1.xml", f"{o}/2.xml", f"{o}/3.xml"))
        for n in (1, 2, 3):
            site.routes[f"/{n}.xml"] = Reply(200, urlset(f"{o}/page{n}"))
        clock = WallClock()
        store = SQLiteStore(tmp_path / "polite.sqlite", clock)
        await store.set_delay("127.0.0.29", 0.6)
        robots = RobotsFetcher(client, store, clock, agent="politetest", allow_private=True)
        politeness = Politeness(robots, store, clock, agent="politetest", allow_private=True)
        _, files, _ = await walk(SitemapWalker(client, politeness), o)
        await store.close()
    assert len(files) == 4 and all(f.error is None for f in files)
    assert all(f.seconds < 0.3 for f in files)  # each file's own time, not the wait before
    reopened = SQLiteStore(tmp_path / "polite.sqlite", clock)
    await reopened.delete_delay("127.0.0.29")
    ((_, response_s),) = await reopened.host_facts(["127.0.0.29"])
    await reopened.close()
    assert response_s is not None and response_s < 0.3  # the waits were about 0.6 s each


async def test_each_redirect_hop_takes_its_slot_and_is_checked_first(
        client: httpx.AsyncClient) -> None:
    # A sitemap that moved within its host, one that moved into a disallowed folder and one
    # that moved to another host: each hop is a request of its own, in its own slot, and is
    # not asked for when robots.txt or the walk's hosts say no.
    with serve(Site("127.0.0.26")) as site, serve(Site("127.0.0.27")) as other:
        o = site.origin
        site.routes.update({
            "/robots.txt": Reply(200, (f"User-agent: *\nCrawl-delay: 0.3\nDisallow: /private/\n"
                                       f"Sitemap: {o}/moved.xml\nSitemap: {o}/hidden.xml\n"
                                       f"Sitemap: {o}/away.xml\n").encode()),
            "/moved.xml": Reply(301, headers={"Location": "/real.xml"}),
            "/real.xml": Reply(200, urlset(f"{o}/a", f"{o}/b")),
            "/hidden.xml": Reply(302, headers={"Location": "/private/s.xml"}),
            "/private/s.xml": Reply(200, urlset(f"{o}/secret")),
            "/away.xml": Reply(307, headers={"Location": f"{other.origin}/s.xml"}),
        })
        other.routes["/s.xml"] = Reply(200, urlset(f"{other.origin}/x"))
        _, files, entries = await walk(walker(client), o)
    assert [e.loc for e in entries] == [f"{o}/a", f"{o}/b"]
    by_url = {file.url.removeprefix(o): file for file in files}
    assert by_url["/moved.xml"].error is None and by_url["/moved.xml"].urls == 2
    assert "redirected to" in (by_url["/hidden.xml"].error or "")
    assert "another host" in (by_url["/away.xml"].error or "")
    assert "/private/s.xml" not in site.requests and other.requests == []
    # Measured at the site: every request after robots.txt at least the delay apart.
    stamps = [at for at, path in site.arrivals if path != "/robots.txt"]
    assert len(stamps) == 4  # moved, real, hidden, away
    assert min(b - a for a, b in itertools.pairwise(stamps)) >= 0.25


async def test_a_walk_sends_the_sites_headers_and_undoes_the_encoding_they_asked_for(
        client: httpx.AsyncClient) -> None:
    with serve(Site("127.0.0.31")) as site:
        o = site.origin
        bomb = zlib.compress(b" " * (64 * 1024 * 1024))  # 64 MiB of spaces, ~64 KiB sent
        site.routes.update({
            "/robots.txt": Reply(200, f"Sitemap: {o}/deflated.xml\nSitemap: {o}/bomb.xml\n"
                                      f"Sitemap: {o}/broken.xml\n".encode()),
            "/deflated.xml": Reply(200, zlib.compress(urlset(f"{o}/a", f"{o}/b")),
                                   {"Content-Encoding": "deflate"}),
            "/bomb.xml": Reply(200, bomb, {"Content-Encoding": "deflate"}),
            "/broken.xml": Reply(200, b"not deflate at all", {"Content-Encoding": "deflate"})})
        headers = {"User-Agent": "SiteBot/2", "Cookie": "c=1", "Accept-Encoding": "deflate"}
        w = walker(client, max_bytes=1024 * 1024)
        files: dict[str, SitemapFile] = {}
        entries: list[Entry] = []
        async for file, got in w.walk(o, headers=headers):
            files[file.url.removeprefix(o)] = file
            entries += got
    assert [e.loc for e in entries] == [f"{o}/a", f"{o}/b"]
    assert files["/deflated.xml"].error is None
    assert files["/bomb.xml"].error is not None  # stopped at the cap, not inflated whole
    assert "Content-Encoding" in (files["/broken.xml"].error or "")
    for _, path, sent, _ in site.seen:
        if path != "/robots.txt":
            assert (sent["User-Agent"], sent["Cookie"], sent["Accept-Encoding"]) == (
                "SiteBot/2", "c=1", "deflate")


async def test_a_files_exchange_is_a_value_with_why_it_failed_and_its_bytes_as_sent(
        client: httpx.AsyncClient) -> None:
    """What a walk that keeps each file (the survey) gets for one: a failure kind it can
    record without reading a message, and the bytes as sent, a gzipped answer not undone."""
    with serve(Site("127.0.0.32")) as site:
        o = site.origin
        packed = gzip.compress(urlset(f"{o}/a"))
        site.routes.update({
            "/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private/\n"),
            "/s.xml": Reply(200, packed, headers={"Content-Encoding": "gzip",
                                                  "Content-Type": "application/xml"}),
            "/gone.xml": Reply(410),
            "/round.xml": Reply(302, headers={"Location": "/round.xml?again"}),
            "/round.xml?again": Reply(302, headers={"Location": "/round.xml"}),
            "/hidden.xml": Reply(301, headers={"Location": "/private/s.xml"}),
        })
        w = walker(client, decode=False)

        async def allowed(url: str) -> str | None:
            return "disallowed" if "/private/" in url else None

        kept = await w.fetch(f"{o}/s.xml", check=allowed)
        gone = await w.fetch(f"{o}/gone.xml", check=allowed)
        looping = await w.fetch(f"{o}/round.xml", check=allowed)
        hidden = await w.fetch(f"{o}/hidden.xml", check=allowed)
        unreachable = await w.fetch("http://127.0.0.33:9/s.xml", check=allowed)
    assert kept.failure is None and kept.status == 200 and kept.body == packed
    assert kept.content_type == "application/xml"
    assert (gone.failure, gone.status, gone.body) == ("status", 410, b"")
    assert looping.failure == "redirects" and looping.status == 302
    assert hidden.failure == "refused" and hidden.url == f"{o}/hidden.xml"
    assert "/private/s.xml" not in site.requests
    assert unreachable.failure == "connection" and unreachable.status is None


async def test_the_walk_reads_each_file_once_and_reports_a_sample_left_unread() -> None:
    """The walk the walker and the survey share: breadth first, a cycle and a file listed
    again reported unread, the children a selection leaves out met (not read when another
    index lists them) and reported once with the index that left them, the last file
    marked; under the survey's key (the URL as listed) two spellings are two files."""
    from polite.fetch.sitemaps import Listed, Step, Visited

    lists = {
        "http://a.test/index.xml": ["http://a.test/1.xml", "http://a.test/2.xml",
                                    "http://a.test/3.xml", "http://a.test/index.xml"],
        "http://a.test/1.xml": ["http://a.test/3.xml", "http://A.test/2.xml"],
    }
    read: list[str] = []

    async def reader(item: Listed) -> Visited[str]:
        read.append(item.url)
        return Visited(f"read {item.url}", lists.get(item.url, ()))

    def first_two(item: Listed, children: list[str]) -> tuple[list[str], list[str]]:
        return children[:2], children[2:]

    async def steps(**options: Any) -> list[Step[str]]:
        read.clear()
        return [step async for step in SitemapWalker.traverse(
            [Listed("http://a.test/index.xml", 0, None)], reader, **options)]

    sampled = await steps(select=first_two, key=str)
    assert read == ["http://a.test/index.xml", "http://a.test/1.xml", "http://a.test/2.xml",
                    "http://A.test/2.xml"]
    # index.xml itself, left out of its own sample, is met already: reported by no one.
    assert sampled[0].not_sampled == ("http://a.test/3.xml",)
    assert all(s.not_sampled == () for s in sampled[1:])
    assert [(s.listed.url, s.listed.level, s.duplicate_of) for s in sampled[1:]] == [
        ("http://a.test/1.xml", 1, None), ("http://a.test/2.xml", 1, None),
        ("http://a.test/3.xml", 2, "http://a.test/3.xml"), ("http://A.test/2.xml", 2, None)]
    assert sampled[1].listed.parent == "http://a.test/index.xml"
    assert [s.last for s in sampled] == [False, False, False, False, True]

    every = await steps()
    assert read == ["http://a.test/index.xml", "http://a.test/1.xml", "http://a.test/2.xml",
                    "http://a.test/3.xml"]
    by_url = {(s.listed.url, s.listed.parent): s for s in every}
    assert by_url[("http://a.test/index.xml", "http://a.test/index.xml")].cycle
    assert by_url[("http://A.test/2.xml", "http://a.test/1.xml")].duplicate_of \
        == "http://a.test/2.xml"
    assert by_url[("http://a.test/3.xml", "http://a.test/1.xml")].duplicate_of \
        == "http://a.test/3.xml"
    assert all(s.result is None for s in every if s.cycle or s.duplicate_of)


async def test_a_request_that_leaves_late_moves_the_hosts_next_slot_as_it_leaves(
        client: httpx.AsyncClient) -> None:
    """A file whose turn came 0.8 s before its request could go (a loop busy elsewhere, a
    place among the requests in flight to wait for) moves its host's next slot as the
    request leaves, not once its answer is in: a request given the slot meanwhile would
    reach the site less than the delay after it. The host answers 3 s late, so the two
    moments are far apart."""
    with serve(Site("127.0.0.31")) as site:
        o = site.origin
        site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nCrawl-delay: 1\n")
        site.routes["/slow.xml"] = Reply(200, urlset(f"{o}/a"), delay_s=3.0)
        clock = WallClock()
        store = MemoryStore(clock)
        robots = RobotsFetcher(client, store, clock, agent="politetest", allow_private=True)
        politeness = Politeness(robots, store, clock, agent="politetest", allow_private=True)
        walk = SitemapWalker(client, politeness)

        async def allow(_: str) -> str | None:
            return None

        async def turn(url: str) -> Taken | str:
            (found,) = await politeness.check([url], reserve=True)
            assert found.allowed
            given = time.monotonic()
            await asyncio.sleep(0.8)  # the request is handed to the client this late
            return Taken(given, found.grant)

        claimed = clock()
        fetching = asyncio.ensure_future(walk.fetch(f"{o}/slow.xml", check=allow, turn=turn))
        while "/slow.xml" not in site.requests:  # it left; its answer is 3 s away
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        (next_one,) = await politeness.check([f"{o}/other.xml"])
        got = await fetching
    assert got.status == 200
    decision = next_one.decision
    assert isinstance(decision, WaitUntil)
    # The slot after the late one: its delay after the moment it really left (claimed +
    # 0.8 s), not after the moment its turn was given.
    assert decision.at - claimed > 1.0 + 0.8 - 0.1, decision.at - claimed


async def test_a_file_held_up_between_its_slot_and_the_client_is_spaced_from_when_it_left(
        client: httpx.AsyncClient) -> None:
    """The survey's way (a turn, then the walker's exchange): the store reads its clock for
    /a.xml's slot, then the process is held up for 0.3 s before the request reaches the
    client. /b.xml, whose turn comes next, still reaches the site the host's delay after
    /a.xml (counted from the turn's end, /a.xml looked on time, and /b.xml came 0.2 s after
    it)."""
    with serve(Site("127.0.84.1")) as site:
        o = site.origin
        site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nCrawl-delay: 0.5\n")
        site.routes["/a.xml"] = Reply(200, urlset(f"{o}/a"))
        site.routes["/b.xml"] = Reply(200, urlset(f"{o}/b"))
        stalling = StallingClock()
        store = MemoryStore(stalling)
        clock = WallClock()
        robots = RobotsFetcher(client, store, clock, agent="politetest", allow_private=True)
        politeness = Politeness(robots, store, clock, agent="politetest", allow_private=True,
                                send_slack_s=LATE_UNNOTED_S)
        walk = SitemapWalker(client, politeness)

        async def allow(_: str) -> str | None:
            return None

        async def turn(url: str) -> Taken | str:
            return await polite_turn(politeness, url)

        await politeness.robots_state(f"{o}/a.xml")
        stalling.stall_s = 0.3
        first = await walk.fetch(f"{o}/a.xml", check=allow, turn=turn)
        assert not stalling.stall_s
        second = await walk.fetch(f"{o}/b.xml", check=allow, turn=turn)
    assert first.status == second.status == 200
    (a_at, a), (b_at, b) = sorted(arrival for arrival in site.arrivals
                                  if arrival[1] != "/robots.txt")
    assert (a, b) == ("/a.xml", "/b.xml")
    assert b_at - a_at >= 0.5 - 0.01, b_at - a_at


async def test_a_request_later_than_its_hosts_whole_delay_takes_a_new_turn(
        client: httpx.AsyncClient) -> None:
    """A file whose turn came, and then whose request could not go for longer than the
    host's whole delay (a busy loop, a place among the requests in flight), while another
    file of the host was given the next slot and went on time: sent then, it would reach
    the site right after that one. It is held back as it is about to leave and takes a new
    turn; at the site, every two requests are the delay apart."""
    with serve(Site("127.0.0.34")) as site:
        o = site.origin
        site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nCrawl-delay: 0.5\n")
        site.routes["/late.xml"] = Reply(200, urlset(f"{o}/a"))
        site.routes["/on-time.xml"] = Reply(200, urlset(f"{o}/b"))
        clock = WallClock()
        store = MemoryStore(clock)
        robots = RobotsFetcher(client, store, clock, agent="politetest", allow_private=True)
        politeness = Politeness(robots, store, clock, agent="politetest", allow_private=True)
        walk = SitemapWalker(client, politeness)
        turns: list[str] = []

        async def allow(_: str) -> str | None:
            return None

        async def late_turn(url: str) -> Taken | str:
            taken = await polite_turn(politeness, url)
            turns.append(url)
            if len(turns) == 1:  # the first turn: handed to the client 0.9 s after it
                await asyncio.sleep(0.9)
            return taken

        late = asyncio.ensure_future(walk.fetch(f"{o}/late.xml", check=allow,
                                                turn=late_turn))
        while not turns:
            await asyncio.sleep(0.01)
        # given the slot after the late one's (0.5 s on), it goes at once
        on_time = await walk.fetch(f"{o}/on-time.xml", check=allow,
                                   turn=lambda url: polite_turn(politeness, url))
        late_got = await late
    assert on_time.status == late_got.status == 200
    assert turns == [f"{o}/late.xml", f"{o}/late.xml"]  # a second turn for the late one
    arrivals = sorted(at for at, path in site.arrivals if path != "/robots.txt")
    assert [path for _, path in sorted(site.arrivals) if path != "/robots.txt"] \
        == ["/on-time.xml", "/late.xml"]
    # the second turn comes the delay after the on-time one's
    assert arrivals[1] - arrivals[0] >= 0.5 - 0.01, arrivals

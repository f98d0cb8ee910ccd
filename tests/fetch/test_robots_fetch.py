"""Fetching robots.txt from real servers on loopback: every row of the status table."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from polite.clock import WallClock
from polite.core.robots.lifecycle import AllowAll, DisallowAll, Parsed
from polite.errors import InvalidURL
from polite.fetch import RobotsFetcher, origin_of
from polite.fetch.http import PageFetcher
from polite.fetch.robots import PublicHosts, create_client, fetch_robots_txt, networks
from polite.storage import MemoryStore, SQLiteStore
from tests.sites import Reply, Site, serve

pytestmark = pytest.mark.anyio
ROBOTS = b"User-agent: *\nDisallow: /private\n"


def fetcher(client: httpx.AsyncClient, **options: object) -> RobotsFetcher:
    store = options.pop("store", None) or MemoryStore(WallClock())
    return RobotsFetcher(client, store, WallClock(), agent="politetest",  # type: ignore[arg-type]
                         allow_private=True, **options)  # type: ignore[arg-type]


async def test_200_is_parsed_and_cached(client: httpx.AsyncClient) -> None:
    with serve(Site("127.0.0.2", {"/robots.txt": Reply(200, ROBOTS)})) as site:
        robots = fetcher(client)
        state = await robots.state(site.origin + "/private/x")
        assert isinstance(state, Parsed)
        assert not state.robots.allowed(site.origin + "/private/x", "politetest")
        await robots.state(site.origin + "/other")
        assert site.requests == ["/robots.txt"]


async def test_one_fetch_in_flight_however_many_wait(client: httpx.AsyncClient) -> None:
    reply = Reply(200, ROBOTS, delay_s=0.3)
    with serve(Site("127.0.0.3", {"/robots.txt": reply})) as site:
        robots = fetcher(client)
        states = await asyncio.gather(*(robots.state(f"{site.origin}/p{i}") for i in range(25)))
        assert all(isinstance(s, Parsed) for s in states)
        assert site.requests == ["/robots.txt"]
        assert robots.fetches == 1


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(404), AllowAll),
        (Reply(410), AllowAll),
        (Reply(401), DisallowAll),
        (Reply(403), DisallowAll),
        (Reply(500), DisallowAll),
        (Reply(503, headers={"Retry-After": "120"}), DisallowAll),
        (Reply(429), DisallowAll),
        (Reply(200, b"<!doctype html><html><body>Welcome</body></html>"), AllowAll),
    ],
)
async def test_status_table(client: httpx.AsyncClient, reply: Reply, kind: type) -> None:
    with serve(Site("127.0.0.4", {"/robots.txt": reply})) as site:
        state = await fetcher(client).state(site.origin + "/")
        assert isinstance(state, kind), state


async def test_redirects_followed_up_to_five(client: httpx.AsyncClient) -> None:
    routes: dict[str, Reply | object] = {"/robots.txt": Reply(301, headers={"Location": "/r1"})}
    for hop in range(1, 5):
        routes[f"/r{hop}"] = Reply(302, headers={"Location": f"/r{hop + 1}"})
    routes["/r5"] = Reply(200, ROBOTS)
    with serve(Site("127.0.0.5", routes)) as site:  # type: ignore[arg-type]
        assert isinstance(await fetcher(client).state(site.origin + "/"), Parsed)
    routes["/r5"] = Reply(302, headers={"Location": "/r6"})
    routes["/r6"] = Reply(200, ROBOTS)
    with serve(Site("127.0.0.5", routes)) as site:  # type: ignore[arg-type]
        state = await fetcher(client).state(site.origin + "/")
        assert isinstance(state, DisallowAll) and "redirects" in state.reason


async def test_timeout_and_refused_connections(client: httpx.AsyncClient) -> None:
    with serve(Site("127.0.0.6", {"/robots.txt": Reply(200, ROBOTS, delay_s=2.0)})) as site:
        slow = fetcher(client, timeout=0.5)
        state = await slow.state(site.origin + "/")
        assert isinstance(state, DisallowAll) and "timed out" in state.reason
    closed = await fetcher(client).state(f"http://127.0.0.7:{site.port}/")
    assert isinstance(closed, DisallowAll)


async def test_private_addresses_are_refused_by_default(client: httpx.AsyncClient) -> None:
    with serve(Site("127.0.0.8", {"/robots.txt": Reply(200, ROBOTS)})) as site:
        guarded = RobotsFetcher(client, MemoryStore(WallClock()), WallClock(), agent="t")
        state = await guarded.state(site.origin + "/")
        assert isinstance(state, DisallowAll) and "private" in state.reason
        assert site.requests == []


async def test_oversized_body_is_cut(client: httpx.AsyncClient) -> None:
    big = ROBOTS + b"# filler\n" * 100_000
    with serve(Site("127.0.0.9", {"/robots.txt": Reply(200, big)})) as site:
        state = await fetcher(client, max_bytes=64 * 1024).state(site.origin + "/")
        assert isinstance(state, Parsed) and state.robots.truncated


async def test_state_survives_a_restart_through_sqlite(client: httpx.AsyncClient,
                                                       tmp_path: Path) -> None:
    path = tmp_path / "polite.sqlite"
    with serve(Site("127.0.0.10", {"/robots.txt": Reply(200, ROBOTS)})) as site:
        first = SQLiteStore(path, WallClock())
        await fetcher(client, store=first).state(site.origin + "/")
        await first.close()
        second = SQLiteStore(path, WallClock())
        again = fetcher(client, store=second)
        state = await again.state(site.origin + "/private")
        assert isinstance(state, Parsed)
        assert not state.robots.allowed(site.origin + "/private", "politetest")
        assert again.fetches == 0 and site.requests == ["/robots.txt"]
        await second.close()


def test_origins() -> None:
    assert origin_of("HTTPS://Example.COM:443/a?b") == "https://example.com"
    assert origin_of("http://example.com:8080/") == "http://example.com:8080"
    for bad in ("ftp://example.com/", "example.com/x", "http://", "http://e.com:99999/"):
        with pytest.raises(InvalidURL, match=r"URL|scheme|host"):
            origin_of(bad)


class StepClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_last_good_copy_for_up_to_30_days(client: httpx.AsyncClient) -> None:
    replies = [Reply(200, ROBOTS)]
    with serve(Site("127.0.0.11", {"/robots.txt": lambda: replies[-1]})) as site:
        clock = StepClock()
        robots = RobotsFetcher(client, MemoryStore(clock), clock, agent="politetest",
                               allow_private=True)
        assert isinstance(await robots.state(site.origin + "/"), Parsed)
        replies.append(Reply(503))
        clock.now += 2 * 86_400  # past the 24 h clamp: refetched, the site is down
        stale = await robots.state(site.origin + "/")
        assert isinstance(stale, Parsed) and stale.stale
        assert not stale.robots.allowed(site.origin + "/private", "politetest")
        clock.now += 31 * 86_400
        gone = await robots.state(site.origin + "/")
        assert isinstance(gone, DisallowAll)
        assert site.requests.count("/robots.txt") >= 3


async def test_memory_keeps_the_newest_states_and_the_store_the_rest(
        client: httpx.AsyncClient) -> None:
    store = MemoryStore(WallClock())
    sites = [Site(f"127.0.0.{n}", {"/robots.txt": Reply(200, ROBOTS)}) for n in (12, 13, 14)]
    with serve(sites[0]) as a, serve(sites[1]) as b, serve(sites[2]) as c:
        robots = fetcher(client, store=store, max_in_memory=2)
        for site in (a, b, c):
            await robots.state(site.origin + "/")
        assert robots.fresh(a.origin) is None  # pushed out of memory ...
        assert isinstance(await robots.state(a.origin + "/x"), Parsed)  # ... not forgotten
        assert a.requests == ["/robots.txt"] and robots.fetches == 3


async def test_processes_sharing_a_redis_store_fetch_a_file_once(
        client: httpx.AsyncClient, redis_url: str, redis_prefix: str) -> None:
    """Three fetchers, each with its own connection to one Redis (three workers): the one
    that claims the origin fetches, the others read its record from the store; a claim left
    by a holder that died runs out and the file is fetched then."""
    from polite.storage import RedisStore

    stores = [RedisStore.from_url(f"{redis_url}?prefix={redis_prefix}") for _ in range(3)]
    try:
        with serve(Site("127.0.41.10", {"/robots.txt": Reply(200, ROBOTS, delay_s=0.3)})
                   ) as site:
            fetchers = [fetcher(client, store=store) for store in stores]
            states = await asyncio.gather(*(f.state(f"{site.origin}/p{n}")
                                            for n, f in enumerate(fetchers)))
            assert all(isinstance(s, Parsed) for s in states)
            assert site.requests == ["/robots.txt"]
            assert sum(f.fetches for f in fetchers) == 1
        with serve(Site("127.0.41.11", {"/robots.txt": Reply(200, ROBOTS)})) as site:
            # a holder killed while fetching: its claim stays until it runs out
            assert await stores[0].claim_robots_fetch(site.origin, 0.4)
            started = asyncio.get_running_loop().time()
            state = await fetcher(client, store=stores[1]).state(site.origin + "/")
            assert isinstance(state, Parsed) and site.requests == ["/robots.txt"]
            assert asyncio.get_running_loop().time() - started >= 0.3
    finally:
        for store in stores:
            await store.close()


# -- the one robots.txt request every product makes (fetch_robots_txt) ---------------------


async def test_one_request_records_the_chain_and_counts_the_true_size(
        client: PageFetcher) -> None:
    """The redirect chain in order, the last exchange as it came: its body cut at the cap,
    its true size counted past it, its content type and headers."""
    big = ROBOTS + b"# filler\n" * 1_000
    with serve(Site("127.0.0.15", {
            "/robots.txt": Reply(301, headers={"Location": "/r1"}),
            "/r1": Reply(302, headers={"Location": "/r2"}),
            "/r2": Reply(200, big, headers={"Content-Type": "text/plain"})})) as site:
        got = await fetch_robots_txt(client, site.origin + "/robots.txt", guard=None,
                                     max_bytes=100, count_to=1 << 20, deadline_s=10.0,
                                     read_timeout_s=5.0)
    assert site.requests == ["/robots.txt", "/r1", "/r2"]
    assert got.url == site.origin + "/r2" and got.status == 200
    assert got.redirects == (site.origin + "/r1", site.origin + "/r2")
    assert got.body == big[:100] and got.truncated and got.size == len(big)
    assert got.content_type == "text/plain" and ("Content-Type", "text/plain") in got.headers
    assert got.failure is got.error is got.stopped is got.refused is None
    assert not got.loop and got.requests == 3


async def test_a_redirect_loop_ends_at_once_when_asked(client: PageFetcher) -> None:
    """A redirect back to a URL asked for already: the survey stops there (a loop, its
    redirect's status kept), the service runs the chain to the limit (too many redirects)."""
    routes = {"/robots.txt": Reply(301, headers={"Location": "/a"}),
              "/a": Reply(302, headers={"Location": "/robots.txt"})}
    with serve(Site("127.0.0.16", routes)) as site:  # type: ignore[arg-type]
        url = site.origin + "/robots.txt"
        looped = await fetch_robots_txt(client, url, guard=None, max_bytes=1_000,
                                        deadline_s=10.0, read_timeout_s=5.0, stop_loops=True)
        assert site.requests == ["/robots.txt", "/a"]
        assert looped.loop and looped.status == 302 and looped.url == site.origin + "/a"
        assert looped.redirects == (site.origin + "/a", url) and looped.stopped is None
        site.requests.clear()
        ran = await fetch_robots_txt(client, url, guard=None, max_bytes=1_000,
                                     deadline_s=10.0, read_timeout_s=5.0)
    assert len(site.requests) == 6 and not ran.loop
    assert ran.stopped == "more than 5 redirects" and len(ran.redirects) == 6


async def test_the_guard_refuses_the_first_url_and_a_hop_in_one_place() -> None:
    """One check, one text, for the first URL and each hop: nothing asked of the refused
    host, the chain up to it kept."""
    internal = Site("127.0.0.18", {"/robots.txt": Reply(200, ROBOTS)})
    guard = PublicHosts(WallClock(), allowed=networks(["127.0.0.17"]))
    with serve(internal), serve(Site("127.0.0.17", {
            "/robots.txt": Reply(301, headers={"Location": internal.origin + "/robots.txt"})
    })) as site:
        async with create_client(guard=guard) as client:
            hop = await fetch_robots_txt(client, site.origin + "/robots.txt", guard=guard,
                                         max_bytes=1_000, deadline_s=10.0, read_timeout_s=5.0)
            first = await fetch_robots_txt(client, internal.origin + "/robots.txt",
                                           guard=guard, max_bytes=1_000, deadline_s=10.0,
                                           read_timeout_s=5.0)
    refusal = "127.0.0.18 is a private or loopback address (--allow-private)"
    assert internal.requests == [] and site.requests == ["/robots.txt"]
    assert hop.refused == refusal and hop.requests == 1
    assert hop.url == internal.origin + "/robots.txt" and hop.redirects == (hop.url,)
    assert hop.stopped == f"redirected to {hop.url}: {refusal}"
    assert first.refused == refusal and first.requests == 0 and first.stopped is None


async def test_each_exchange_waits_for_the_callers_bound_on_requests(
        client: PageFetcher) -> None:
    """``in_flight`` is held during each exchange: with the caller's requests all in flight,
    robots.txt is not asked for until one ends."""
    bound = asyncio.Semaphore(1)
    with serve(Site("127.0.0.19", {"/robots.txt": Reply(200, ROBOTS)})) as site:
        async with bound:
            waiting = asyncio.ensure_future(fetch_robots_txt(
                client, site.origin + "/robots.txt", guard=None, max_bytes=1_000,
                deadline_s=10.0, read_timeout_s=5.0, in_flight=bound))
            await asyncio.sleep(0.3)
            assert not waiting.done() and site.requests == []
        got = await waiting
    assert got.status == 200 and got.body == ROBOTS and site.requests == ["/robots.txt"]


async def test_the_connection_is_kept_only_when_the_caller_keeps_it(
        client: PageFetcher) -> None:
    """The survey keeps robots.txt's connection for the sitemaps that follow; the service
    closes it (the host's next request connects, and is checked, anew)."""
    with serve(Site("127.0.0.20", {"/robots.txt": Reply(200, ROBOTS),
                                   "/s.xml": Reply(200, b"<urlset/>")})) as site:
        for keep_alive in (True, False):
            await fetch_robots_txt(client, site.origin + "/robots.txt", guard=None,
                                   max_bytes=1_000, deadline_s=10.0, read_timeout_s=5.0,
                                   keep_alive=keep_alive)
            await client.get(site.origin + "/s.xml", max_bytes=1_000, deadline_s=10.0)
        kept, closed = site.peers[:2], site.peers[2:]
    assert kept[0] == kept[1] and closed[0] != closed[1]

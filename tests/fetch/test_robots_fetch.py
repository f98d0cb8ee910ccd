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

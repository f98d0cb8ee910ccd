"""One frontier contract, every backend: memory, an SQLite file and a real redis-server."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st

from polite.errors import ConfigError, InvalidURL
from polite.storage import open_frontier
from polite.storage.base import HostFacts
from polite.storage.frontier import (
    LEASE_AHEAD,
    FrontierCounts,
    FrontierItem,
    FrontierStore,
    MemoryFrontier,
    SQLiteFrontier,
    settle,
    unseen,
)
from polite.storage.redis_frontier import RedisFrontier
from polite.storage.sqlite import SQLiteStore, Transaction
from tests.threads import run_apart

pytestmark = pytest.mark.anyio

LEASE_S = 30.0
Opener = Callable[[], FrontierStore]


def item(host: str, n: int, **fields: object) -> FrontierItem:
    return FrontierItem(f"http://{host}/{n}", host)._replace(**fields)


def _no_default_path() -> Path:
    raise AssertionError("every test names its store")


@pytest.fixture(params=["memory", "sqlite", "sqlite-held", "redis", "redis-cluster",
                        "redis-3-nodes"])
async def open_store(request: pytest.FixtureRequest, tmp_path: Path
                     ) -> AsyncIterator[Opener]:
    """Opens a frontier on the test's store; each call a new object on the same data (the
    same object for memory, whose data is the object). ``sqlite-held`` is an SQLite file
    whose transaction is held (a crawl alone with its folder's file: its leases kept in
    memory), ``redis-cluster`` one node in cluster mode (a plain client: scripts over two
    slots refused), ``redis-3-nodes`` a Redis Cluster of three primaries through the
    cluster client (``cluster=1``)."""
    kind = request.param
    if kind == "redis-3-nodes":
        nodes = request.getfixturevalue("redis_cluster_nodes")
        url = f"{nodes[1]}/0?cluster=1&prefix={request.getfixturevalue('redis_prefix')}"
    elif kind.startswith("redis"):
        server, prefix = (request.getfixturevalue(name) for name in (
            "redis_cluster_url" if kind == "redis-cluster" else "redis_url", "redis_prefix"))
        url = f"{server}?prefix={prefix}"
    else:
        url = "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'frontier.sqlite'}"
    memory = MemoryFrontier()
    opened: list[FrontierStore] = []

    def open_() -> FrontierStore:
        if kind == "memory":
            return memory
        if kind == "sqlite-held" and opened:
            # one frontier holds the file; what another finds there after it is what a
            # new run finds (tests/crawl/test_crawl_resume.py)
            pytest.skip("a held file is one frontier's")
        store = open_frontier(url, default_path=_no_default_path)
        opened.append(store)
        if kind == "sqlite-held":
            held = store.batch()
            assert isinstance(held, Transaction)
            held.hold()
        return store

    yield open_
    for store in opened:
        await store.close()


@pytest.fixture
def frontier(open_store: Opener) -> FrontierStore:
    return open_store()


async def lease_all(store: FrontierStore, host: str, now: float) -> list[str]:
    """The URLs of ``host`` leased one after another at ``now``, until none is left."""
    urls = []
    while (taken := await store.lease(host, now, LEASE_S)) is not None:
        urls.append(taken.url)
    return urls


async def test_a_url_is_added_once_whatever_happened_to_it(frontier: FrontierStore) -> None:
    a1, a2, a3, a4 = (item("a.example", n) for n in range(1, 5))
    assert await frontier.add([a1, a2, a1]) == [a1, a2]
    assert await frontier.add([a2, a3]) == [a3]
    assert await frontier.mark_seen([a3, a4, a4]) == [a4]
    assert await frontier.add([a4, a1]) == []
    assert await frontier.mark_seen([a1]) == []
    assert await frontier.counts() == FrontierCounts(queued=3, leased=0, fetched=0, skipped=1)
    taken = await frontier.lease("a.example", 0.0, LEASE_S)
    assert taken == a1
    await frontier.done(a1.url, fetched=True)
    assert await frontier.add([a1]) == []
    assert await lease_all(frontier, "a.example", 0.0) == [a2.url, a3.url]


async def test_each_host_is_first_in_first_out(frontier: FrontierStore) -> None:
    await frontier.add([item("a.example", 1), item("b.example", 1), item("a.example", 2)])
    await frontier.add([item("a.example", 3), item("b.example", 2)])
    assert await lease_all(frontier, "a.example", 0.0) == [
        "http://a.example/1", "http://a.example/2", "http://a.example/3"]
    assert await lease_all(frontier, "b.example", 0.0) == [
        "http://b.example/1", "http://b.example/2"]
    assert await frontier.lease("c.example", 0.0, LEASE_S) is None


async def test_every_field_comes_back_as_queued(frontier: FrontierStore) -> None:
    full = FrontierItem("https://a.example:8443/p?q=1", "a.example", depth=3, via="sitemap",
                        srcloc="https://a.example/orig", page_type="data", changefreq="daily",
                        lastmod=1_700_000_000.123456, hops=2, attempts=1, not_before=12.5)
    plain = FrontierItem("https://a.example/", "a.example")
    address = FrontierItem("http://[::1]:8080/a,b", "::1", srcloc="http://[::1]:8080/,")
    await frontier.add([full, plain, address])
    assert await frontier.lease("a.example", 20.0, LEASE_S) == full
    assert await frontier.lease("a.example", 20.0, LEASE_S) == plain
    assert await frontier.lease("::1", 20.0, LEASE_S) == address


async def test_a_url_is_not_taken_before_its_time(frontier: FrontierStore) -> None:
    await frontier.add([item("a.example", 1), item("a.example", 2, not_before=50.0),
                        item("a.example", 3)])
    assert await lease_all(frontier, "a.example", 10.0) == [
        "http://a.example/1", "http://a.example/3"]
    for n in (1, 3):
        await frontier.done(f"http://a.example/{n}", fetched=True)
    assert await frontier.lease("a.example", 49.9, LEASE_S) is None
    taken = await frontier.lease("a.example", 50.0, LEASE_S)
    assert taken is not None and taken.url == "http://a.example/2"


async def test_a_url_whose_time_came_keeps_its_place_in_the_queue(frontier: FrontierStore
                                                                  ) -> None:
    # Once due, a URL queued with a not_before is taken in queue order, not ahead of the
    # older URLs.
    await frontier.add([item("a.example", 1), item("a.example", 2, not_before=5.0),
                        item("a.example", 3, not_before=6.0), item("a.example", 4)])
    assert await lease_all(frontier, "a.example", 10.0) == [
        f"http://a.example/{n}" for n in (1, 2, 3, 4)]


async def test_an_expired_lease_comes_back_oldest_first(frontier: FrontierStore) -> None:
    await frontier.add([item("a.example", n) for n in (1, 2, 3, 4)])
    assert await lease_all(frontier, "a.example", 0.0) == [
        f"http://a.example/{n}" for n in (1, 2, 3, 4)]
    await frontier.done("http://a.example/2", fetched=True)
    assert await frontier.lease("a.example", LEASE_S - 0.1, LEASE_S) is None
    # The leases run out: the URLs come back in queue order, leased again until 60 s.
    assert await lease_all(frontier, "a.example", LEASE_S) == [
        f"http://a.example/{n}" for n in (1, 3, 4)]
    assert await frontier.counts() == FrontierCounts(0, 3, 1, 0)
    assert await frontier.next_due("a.example") == 2 * LEASE_S


async def test_done_stops_a_url_coming_back(frontier: FrontierStore) -> None:
    await frontier.add([item("a.example", 1), item("a.example", 2)])
    await frontier.lease("a.example", 0.0, LEASE_S)
    await frontier.done("http://a.example/1", fetched=True)
    await frontier.done("http://a.example/2", fetched=True)  # not leased: nothing happens
    await frontier.done("http://a.example/9", fetched=True)  # never seen
    await frontier.done("not a url", fetched=False)
    assert await lease_all(frontier, "a.example", 1e9) == ["http://a.example/2"]
    await frontier.done("http://a.example/2", fetched=False)
    assert await frontier.lease("a.example", 1e12, LEASE_S) is None
    assert await frontier.counts() == FrontierCounts(0, 0, 1, 1)
    assert await frontier.next_due("a.example") is None


async def test_done_with_a_revisit_time_queues_it_again(frontier: FrontierStore) -> None:
    a1 = item("a.example", 1)
    await frontier.add([a1])
    await frontier.lease("a.example", 0.0, LEASE_S)
    await frontier.release(a1._replace(attempts=2))  # a 503 first
    await frontier.lease("a.example", 0.0, LEASE_S)
    await frontier.add([item("a.example", 2)])
    await frontier.done(a1.url, fetched=True, revisit_at=100.0)
    assert await frontier.counts() == FrontierCounts(2, 0, 0, 0)
    assert await frontier.next_due("a.example") == 0.0
    assert await lease_all(frontier, "a.example", 99.0) == ["http://a.example/2"]
    await frontier.done("http://a.example/2", fetched=True)
    assert await frontier.next_due("a.example") == 100.0
    await frontier.add([item("a.example", 3)])
    revisited = await frontier.lease("a.example", 100.0, LEASE_S)
    assert revisited == a1._replace(not_before=100.0, attempts=0)
    assert await lease_all(frontier, "a.example", 100.0) == ["http://a.example/3"]


async def test_a_revisit_waits_behind_the_urls_queued_before_it(frontier: FrontierStore
                                                                ) -> None:
    await frontier.add([item("a.example", 1)])
    await frontier.lease("a.example", 0.0, LEASE_S)
    await frontier.add([item("a.example", 2)])
    await frontier.done("http://a.example/1", fetched=True, revisit_at=5.0)
    assert await lease_all(frontier, "a.example", 10.0) == [
        "http://a.example/2", "http://a.example/1"]


async def test_release_keeps_the_place_and_carries_attempts(frontier: FrontierStore) -> None:
    a1, a2, a3 = (item("a.example", n, depth=n) for n in (1, 2, 3))
    await frontier.add([a1, a2, a3])
    assert await frontier.lease("a.example", 0.0, LEASE_S) == a1
    await frontier.add([item("a.example", 4)])
    await frontier.release(a1._replace(attempts=1))
    assert await frontier.counts() == FrontierCounts(4, 0, 0, 0)
    assert await frontier.lease("a.example", 0.0, LEASE_S) == a1._replace(attempts=1)
    # Given back with a back-off: not before then, but then still ahead of a3.
    await frontier.release(a1._replace(attempts=2, not_before=60.0))
    assert await frontier.lease("a.example", 10.0, LEASE_S) == a2
    assert await frontier.lease("a.example", 60.0, LEASE_S) == a2  # its lease ran out
    assert await frontier.lease("a.example", 60.0, LEASE_S) == a1._replace(attempts=2,
                                                                           not_before=60.0)
    assert await frontier.lease("a.example", 60.0, LEASE_S) == a3


async def test_release_changes_only_the_time_and_the_attempts(frontier: FrontierStore
                                                              ) -> None:
    a1 = item("a.example", 1, depth=2)
    await frontier.add([a1])
    await frontier.lease("a.example", 0.0, LEASE_S)
    await frontier.release(a1._replace(depth=7, via="link", attempts=1))
    assert await frontier.lease("a.example", 0.0, LEASE_S) == a1._replace(attempts=1)
    await frontier.release(item("a.example", 9))  # never seen: nothing happens
    await frontier.release(a1._replace(attempts=5))
    await frontier.release(a1._replace(attempts=6))  # no longer leased: nothing happens
    assert await frontier.lease("a.example", 0.0, LEASE_S) == a1._replace(attempts=5)


async def test_next_due_and_hosts(frontier: FrontierStore) -> None:
    assert await frontier.next_due("a.example") is None
    assert await frontier.hosts() == []
    await frontier.add([item("a.example", 1), item("b.example", 1, not_before=70.0)])
    await frontier.add([item("c.example", 1, not_before=5.0),
                        item("c.example", 2, not_before=6.0)])
    await frontier.mark_seen([item("d.example", 1)])
    assert await frontier.next_due("a.example") == 0.0
    assert await frontier.next_due("d.example") is None
    assert sorted(await frontier.hosts()) == [
        ("a.example", 0.0), ("b.example", 70.0), ("c.example", 5.0)]
    await frontier.lease("a.example", 10.0, LEASE_S)
    await frontier.add([item("a.example", 2, not_before=20.0)])
    # c2 is due at 6 and stays queued behind the lease of c1.
    await frontier.lease("c.example", 10.0, LEASE_S)
    assert sorted(await frontier.hosts()) == [
        ("a.example", 20.0), ("b.example", 70.0), ("c.example", 6.0)]
    assert await frontier.next_due("a.example") == 20.0
    await frontier.done("http://a.example/1", fetched=True)
    await lease_all(frontier, "c.example", 10.0)
    assert sorted(await frontier.hosts()) == [
        ("a.example", 20.0), ("b.example", 70.0), ("c.example", 10.0 + LEASE_S)]
    for n in (1, 2):
        await frontier.done(f"http://c.example/{n}", fetched=False)
    assert await lease_all(frontier, "a.example", 20.0) == ["http://a.example/2"]
    await frontier.done("http://a.example/2", fetched=True)
    assert await frontier.hosts() == [("b.example", 70.0)]
    assert await frontier.next_due("c.example") is None


async def test_due_hosts_is_a_bounded_read_of_the_hosts_due(frontier: FrontierStore
                                                             ) -> None:
    assert await frontier.due_hosts(100.0, 10) == []
    await frontier.add([item(f"h{n}.example", 1, not_before=float(n)) for n in range(1, 8)])
    await frontier.add([item("a.example", 1)])
    assert await frontier.due_hosts(0.0, 10) == [("a.example", 0.0)]
    assert await frontier.due_hosts(3.0, 10) == [
        ("a.example", 0.0), ("h1.example", 1.0), ("h2.example", 2.0), ("h3.example", 3.0)]
    assert await frontier.due_hosts(100.0, 2) == [("a.example", 0.0), ("h1.example", 1.0)]
    # a leased URL's host is due when the lease ends
    await frontier.lease("a.example", 0.0, LEASE_S)
    assert await frontier.due_hosts(3.0, 10) == [
        ("h1.example", 1.0), ("h2.example", 2.0), ("h3.example", 3.0)]
    assert ("a.example", LEASE_S) in await frontier.due_hosts(LEASE_S, 10)
    await frontier.done("http://a.example/1", fetched=True)
    assert [host for host, _ in await frontier.due_hosts(1e9, 100)] == [
        f"h{n}.example" for n in range(1, 8)]


async def test_host_fetched_counts_fetched_urls_only(frontier: FrontierStore) -> None:
    assert await frontier.host_fetched() == {}
    await frontier.add([item("a.example", n) for n in range(4)] + [item("b.example", 1)])
    await frontier.mark_seen([item("c.example", 1)])
    for host, fetched in [("a.example", True), ("a.example", True), ("a.example", False),
                          ("b.example", True)]:
        taken = await frontier.lease(host, 0.0, LEASE_S)
        assert taken is not None
        await frontier.done(taken.url, fetched=fetched)
    await frontier.lease("a.example", 0.0, LEASE_S)  # leased, not fetched yet
    assert await frontier.host_fetched() == {"a.example": 2, "b.example": 1}


async def test_host_state_round_trip(frontier: FrontierStore) -> None:
    assert await frontier.get_host_state("a.example") is None
    await frontier.set_host_state("a.example", '{"robots": "ok"}')
    await frontier.set_host_state("b.example", "")
    await frontier.set_host_state("a.example", "done, ünïcode")
    assert await frontier.get_host_state("a.example") == "done, ünïcode"
    assert await frontier.get_host_state("b.example") == ""
    assert await frontier.get_host_state("c.example") is None
    assert await frontier.hosts() == []  # a state alone queues nothing


async def test_seed_hosts_are_kept_once_each(frontier: FrontierStore) -> None:
    assert await frontier.seed_hosts() == set()
    await frontier.add_seed_hosts(["a.example", "b.example"])
    await frontier.add_seed_hosts(["a.example"])
    await frontier.add_seed_hosts([])
    assert await frontier.seed_hosts() == {"a.example", "b.example"}


async def test_requeue_leased_gives_every_lease_back_in_place(frontier: FrontierStore
                                                              ) -> None:
    assert await frontier.requeue_leased() == 0
    await frontier.add([item("a.example", n) for n in (1, 2, 3)] + [item("b.example", 1)])
    a1 = await frontier.lease("a.example", 0.0, LEASE_S)
    assert a1 is not None
    await frontier.release(a1._replace(attempts=1))
    await frontier.lease("a.example", 0.0, LEASE_S)
    await frontier.lease("a.example", 0.0, LEASE_S)
    await frontier.lease("b.example", 0.0, LEASE_S)
    assert await frontier.requeue_leased() == 3
    assert await frontier.counts() == FrontierCounts(4, 0, 0, 0)
    assert sorted(await frontier.hosts()) == [("a.example", 0.0), ("b.example", 0.0)]
    again = await frontier.lease("a.example", 1.0, LEASE_S)
    assert again == a1._replace(attempts=1)
    assert await lease_all(frontier, "a.example", 1.0) == [
        "http://a.example/2", "http://a.example/3"]
    assert await frontier.requeue_leased() == 3


async def test_counts_follow_every_state(frontier: FrontierStore) -> None:
    assert await frontier.counts() == FrontierCounts(0, 0, 0, 0)
    await frontier.add([item("a.example", n) for n in range(6)])
    await frontier.mark_seen([item("b.example", 1), item("b.example", 2)])
    for _ in range(4):
        await frontier.lease("a.example", 0.0, LEASE_S)
    assert await frontier.counts() == FrontierCounts(2, 4, 0, 2)
    await frontier.done("http://a.example/0", fetched=True)
    await frontier.done("http://a.example/1", fetched=False)
    await frontier.done("http://a.example/2", fetched=True, revisit_at=50.0)
    await frontier.release(item("a.example", 3, attempts=1))
    assert await frontier.counts() == FrontierCounts(4, 0, 1, 3)


async def test_many_hosts_are_independent(frontier: FrontierStore) -> None:
    hosts = [f"h{i}.example" for i in range(12)]
    for n in range(4):  # interleaved, as links arrive
        await frontier.add([item(host, n) for host in hosts])
    await frontier.lease(hosts[0], 0.0, LEASE_S)
    await frontier.done(f"http://{hosts[0]}/0", fetched=True, revisit_at=500.0)
    taken = await frontier.lease(hosts[1], 0.0, LEASE_S)
    assert taken is not None
    await frontier.release(taken._replace(not_before=300.0))
    await frontier.lease(hosts[2], 0.0, LEASE_S)
    assert sorted(await frontier.hosts()) == sorted((host, 0.0) for host in hosts)
    for i, host in enumerate(hosts):
        expected = [f"http://{host}/{n}" for n in range(1 if i < 3 else 0, 4)]
        assert await lease_all(frontier, host, 10.0) == expected
    assert await frontier.counts() == FrontierCounts(2, 46, 0, 0)
    assert await frontier.host_fetched() == {}


# Hosts a lenient URL parser lets through (http://}evil.test/), and one that would share a
# tag with another if braces alone were encoded.
ODD_HOSTS = ["}evil.test", "{a}.test", "a{b.test", "a%7Bb.test", "{}", "{f}"]


async def test_hosts_with_braces_or_percent_signs_are_hosts_like_any(open_store: Opener
                                                                     ) -> None:
    # In a Redis Cluster each host's keys must share one slot: a brace in the host had
    # ended their hash tag early, and every script on the host was refused (CROSSSLOT).
    frontier = open_store()
    page = item("a.example", 0)
    await frontier.add([page])
    taken = await frontier.lease("a.example", 0.0, LEASE_S)
    assert taken == page
    settled = await settle(frontier, page.url, fetched=True,
                           add=[item(host, 1) for host in ODD_HOSTS[:3]],
                           mark=[item(host, 1) for host in ODD_HOSTS[3:]])
    assert [i.host for i in settled.added] == ODD_HOSTS[:3]
    assert [i.host for i in settled.marked] == ODD_HOSTS[3:]
    await frontier.add([item(host, 2) for host in ODD_HOSTS])
    for host in ODD_HOSTS:
        await frontier.set_host_state(host, f"state of {host}")
    for host in ODD_HOSTS:
        expected = [f"http://{host}/{n}" for n in ((1, 2) if host in ODD_HOSTS[:3] else (2,))]
        assert await lease_all(frontier, host, 0.0) == expected, host
        assert await frontier.get_host_state(host) == f"state of {host}"
        for url in expected:
            await frontier.done(url, fetched=True)
    assert await frontier.counts() == FrontierCounts(0, 0, 1 + 3 * 2 + 3, 3)
    assert await frontier.host_fetched() == {"a.example": 1, **{
        host: 2 if host in ODD_HOSTS[:3] else 1 for host in ODD_HOSTS}}


@pytest.mark.parametrize("open_store", ["sqlite", "redis"], indirect=True)
async def test_everything_survives_reopening(open_store: Opener) -> None:
    first = open_store()
    await first.add([item("a.example", n) for n in (1, 2, 3, 4)] + [item("b.example", 1)])
    await first.mark_seen([item("a.example", 9)])
    await first.lease("a.example", 0.0, LEASE_S)
    await first.done("http://a.example/1", fetched=True)
    a2 = await first.lease("a.example", 0.0, LEASE_S)
    assert a2 is not None
    await first.release(a2._replace(attempts=1, not_before=5.0))
    await first.lease("b.example", 0.0, LEASE_S)  # still leased after the reopen
    await first.set_host_state("a.example", "robots fetched")
    await first.add_seed_hosts(["a.example"])
    await first.close()

    second = open_store()
    assert await second.counts() == FrontierCounts(3, 1, 1, 1)
    assert await second.add([item("a.example", n) for n in range(1, 11)]) == [
        item("a.example", n) for n in (5, 6, 7, 8, 10)]
    assert await second.get_host_state("a.example") == "robots fetched"
    assert await second.seed_hosts() == {"a.example"}
    assert await second.host_fetched() == {"a.example": 1}
    assert sorted(await second.hosts()) == [("a.example", 0.0), ("b.example", LEASE_S)]
    assert await second.lease("b.example", 1.0, LEASE_S) is None
    assert await second.lease("a.example", 5.0, LEASE_S) == a2._replace(attempts=1,
                                                                        not_before=5.0)
    assert await lease_all(second, "a.example", 5.0) == [
        f"http://a.example/{n}" for n in (3, 4, 5, 6, 7, 8, 10)]
    assert await second.requeue_leased() == 9


async def test_a_batch_settles_a_page_and_leases_the_next_in_one_go(open_store: Opener
                                                                   ) -> None:
    # What the crawler does after a page: its links queued, the URL acknowledged and the
    # host's next URL leased, in one batch (nested writes join it); all of it is kept.
    first = open_store()
    await first.add([item("a.example", 1), item("a.example", 2)])
    taken = await first.lease("a.example", 0.0, LEASE_S)
    assert taken == item("a.example", 1)
    async with first.batch():
        async with first.batch():
            assert await first.add([item("a.example", n) for n in (2, 3)]) == [
                item("a.example", 3)]
        assert await first.mark_seen([item("b.example", 1)]) == [item("b.example", 1)]
        await first.done(taken.url, fetched=True)
        following = await first.lease("a.example", 0.0, LEASE_S)
    assert following == item("a.example", 2)
    await first.close()
    second = open_store()
    assert await second.counts() == FrontierCounts(1, 1, 1, 1)
    assert await second.requeue_leased() == 1
    assert await lease_all(second, "a.example", 0.0) == ["http://a.example/2",
                                                          "http://a.example/3"]


async def test_an_sqlite_batch_that_raises_leaves_nothing(tmp_path: Path) -> None:
    frontier = SQLiteFrontier(tmp_path / "frontier.sqlite")
    await frontier.add([item("a.example", 1)])
    taken = await frontier.lease("a.example", 0.0, LEASE_S)
    assert taken is not None
    with pytest.raises(RuntimeError):
        async with frontier.batch():
            await frontier.add([item("a.example", 2)])
            await frontier.done(taken.url, fetched=True)
            raise RuntimeError("a page hook failed")
    assert await frontier.counts() == FrontierCounts(0, 1, 0, 0)
    async with frontier.batch():  # and the next batch starts afresh
        await frontier.done(taken.url, fetched=False)
    assert await frontier.counts() == FrontierCounts(0, 0, 0, 1)
    await frontier.close()


def _inserts(frontier: SQLiteFrontier) -> list[str]:
    """The INSERT statements ``frontier`` sends its file from now on."""
    sent: list[str] = []
    frontier._db.set_trace_callback(
        lambda sql: sent.append(sql) if sql.startswith("INSERT INTO frontier ") else None)
    return sent


async def test_a_url_the_file_holds_is_not_asked_of_it_again(tmp_path: Path) -> None:
    frontier = SQLiteFrontier(tmp_path / "frontier.sqlite")
    await frontier.add([item("a.example", 1), item("a.example", 2)])
    await frontier.mark_seen([item("b.example", 1)])
    sent = _inserts(frontier)
    # a page's links: those met before answered from memory, the file asked for the new
    assert await frontier.add([item("a.example", 2), item("b.example", 1)]) == []
    assert sent == []
    assert await frontier.add([item("a.example", 1), item("a.example", 3)]) == [
        item("a.example", 3)]
    assert len(sent) == 1 and sent[0].count("'http://") == 1
    await frontier.close()
    # and a new process knows nothing but the file
    reopened = SQLiteFrontier(tmp_path / "frontier.sqlite")
    assert await reopened.add([item("a.example", 3), item("a.example", 4)]) == [
        item("a.example", 4)]
    await reopened.close()


async def test_a_url_whose_transaction_was_undone_is_added_again(tmp_path: Path) -> None:
    frontier = SQLiteFrontier(tmp_path / "frontier.sqlite")
    with pytest.raises(RuntimeError):
        async with frontier.batch():
            assert await frontier.add([item("a.example", 1)]) == [item("a.example", 1)]
            raise RuntimeError("a page hook failed")
    assert await frontier.add([item("a.example", 1)]) == [item("a.example", 1)]
    # held: a block undone alone, and a group whose commit never came
    transaction = frontier.batch()
    assert isinstance(transaction, Transaction)
    transaction.hold()
    async with transaction:
        await frontier.add([item("a.example", 2)])
    with pytest.raises(RuntimeError):
        async with transaction:
            await frontier.add([item("a.example", 3)])
            raise RuntimeError("a page hook failed")
    assert await frontier.add([item("a.example", 3)]) == [item("a.example", 3)]
    frontier._db.execute("ROLLBACK")  # what a commit that failed (a full disk) leaves
    async with transaction:
        assert await frontier.add([item("a.example", 2), item("a.example", 3)]) == [
            item("a.example", 2), item("a.example", 3)]
    assert transaction.commit()
    assert await frontier.add([item("a.example", 2), item("a.example", 3)]) == []
    await frontier.close()


async def test_a_pages_links_the_file_holds_are_left_out_before_they_are_items(
        tmp_path: Path) -> None:
    frontier = SQLiteFrontier(tmp_path / "frontier.sqlite")
    await frontier.add([item("a.example", 1)])
    await frontier.mark_seen([item("b.example", 1)])
    ask = unseen(frontier)
    urls = [item("a.example", 1).url, item("a.example", 2).url, item("b.example", 1).url]
    assert ask(urls) == [item("a.example", 2).url]
    async with frontier.batch():
        await frontier.add([item("a.example", 2)])
        # not committed yet: the file may still lose it
        assert ask(urls) == [item("a.example", 2).url]
    assert ask(urls) == []
    await frontier.close()
    # a frontier that keeps no cache answers every URL, as one of another kind does
    uncached = SQLiteFrontier(tmp_path / "frontier.sqlite", seen_cache_bytes=0)
    assert unseen(uncached)(urls) == urls
    await uncached.close()
    assert unseen(MemoryFrontier())(urls) == urls


async def test_the_seen_cache_keeps_to_its_budget(tmp_path: Path) -> None:
    frontier = SQLiteFrontier(tmp_path / "frontier.sqlite", seen_cache_bytes=1_000)
    await frontier.add([item("a.example", n) for n in range(5)])  # about 600 bytes
    sent = _inserts(frontier)
    assert await frontier.add([item("a.example", n) for n in range(5)]) == []
    assert sent == []
    await frontier.add([item("a.example", n) for n in range(5, 10)])  # over: begun again
    assert frontier._seen_bytes <= 1_000
    assert await frontier.add([item("a.example", n) for n in range(12)]) == [
        item("a.example", 10), item("a.example", 11)]
    assert sent  # what it forgot was asked of the file, which knows
    await frontier.close()


async def test_a_frontier_in_the_stores_file_shares_its_transactions(tmp_path: Path) -> None:
    # A crawl's folder: one SQLite file for the politeness store and the frontier, so a
    # page's response time and its acknowledgement are one commit, or neither.
    path = tmp_path / "crawl.sqlite"
    store = SQLiteStore(path, lambda: 100.0)
    frontier = open_frontier(f"sqlite:///{path}", default_path=_no_default_path, store=store)
    elsewhere = open_frontier(f"sqlite:///{tmp_path / 'other.sqlite'}",
                              default_path=_no_default_path, store=store)
    await frontier.add([item("a.example", 1)])
    taken = await frontier.lease("a.example", 0.0, LEASE_S)
    assert taken is not None
    with pytest.raises(RuntimeError):
        async with frontier.batch():
            await store.note_response("a.example", 0.25, None)
            await frontier.done(taken.url, fetched=True)
            raise RuntimeError("stopped half-way")
    assert await store.host_facts(["a.example"]) == [HostFacts(None, None)]
    assert await frontier.counts() == FrontierCounts(0, 1, 0, 0)
    async with frontier.batch():
        await store.note_response("a.example", 0.25, None)
        await frontier.done(taken.url, fetched=True)
    await elsewhere.add([item("b.example", 1)])  # its own file, its own connection
    await elsewhere.close()
    await frontier.close()  # the store's connection stays open for the store
    # and forgets the frontier's seen cache (the store's own listener stays)
    assert store.transaction._listeners == [store._ended]
    assert await store.host_facts(["a.example"]) == [HostFacts(None, 0.25)]
    await store.close()
    reopened = SQLiteFrontier(path)
    assert await reopened.counts() == FrontierCounts(0, 0, 1, 0)
    await reopened.close()


async def test_a_held_store_keeps_its_hosts_in_memory_until_the_commit(tmp_path: Path) -> None:
    # A crawl alone with its folder's file: the slots and response times of the pages of a
    # group are changed in memory and written with its commit; a block undone takes its
    # own back; a commit that failed leaves them for the next.
    path = tmp_path / "crawl.sqlite"
    now = [100.0]
    store = SQLiteStore(path, lambda: now[0])
    frontier = open_frontier(f"sqlite:///{path}", default_path=_no_default_path, store=store)
    await frontier.add([item("a.example", 1)])
    transaction = store.transaction
    transaction.hold()
    sent: list[str] = []
    store.connection.set_trace_callback(sent.append)
    (claim,) = await store.claim_batch([("a.example", (5.0,))], take=True)
    assert claim.granted == 0
    async with transaction:
        await store.note_response("a.example", 1.0, None)
    with pytest.raises(RuntimeError):
        async with transaction:
            await store.note_response("a.example", 3.0, 30.0)  # a 429 in a page undone
            raise RuntimeError("a page hook failed")
    now[0] = 102.0
    (claim,) = await store.claim_batch([("a.example", (5.0,))], take=True)
    assert claim.granted == -1 and claim.ats == (105.0,)  # from the claim at 100, no pause
    assert await store.host_facts(["a.example"]) == [HostFacts(None, 1.0)]
    # one read of the host, no write before the commit
    (read,) = [s for s in sent if "slots" in s or "response_times" in s]
    assert read.startswith("SELECT")
    reader = sqlite3.connect(path)  # what another process would read meanwhile
    assert reader.execute("SELECT count(*) FROM slots").fetchone() == (0,)
    reader.close()
    transaction.commit(hold=False)
    await store.close()
    reopened = SQLiteStore(path, lambda: 102.0)
    assert await reopened.host_facts(["a.example"]) == [HostFacts(None, 1.0)]
    (claim,) = await reopened.claim_batch([("a.example", (5.0,))], take=False)
    assert claim.granted == -1 and claim.ats == (105.0,)
    await reopened.close()


async def test_a_held_store_whose_commit_failed_writes_its_hosts_with_the_next(
        tmp_path: Path) -> None:
    path = tmp_path / "crawl.sqlite"
    store = SQLiteStore(path, lambda: 100.0)
    transaction = store.transaction
    transaction.hold()
    await store.note_response("a.example", 2.0, None)
    failing = [True]

    def full_disk() -> None:
        if failing[0]:
            raise sqlite3.OperationalError("database or disk is full")

    transaction.before_commit(full_disk)
    with pytest.raises(sqlite3.OperationalError):
        transaction.commit()
    assert not store.connection.in_transaction
    failing[0] = False
    assert await store.host_facts(["a.example"]) == [HostFacts(None, 2.0)]
    transaction.commit(hold=False)
    await store.close()
    reopened = SQLiteStore(path, lambda: 100.0)
    assert await reopened.host_facts(["a.example"]) == [HostFacts(None, 2.0)]
    await reopened.close()


@pytest.mark.parametrize("open_store", ["sqlite", "redis"], indirect=True)
async def test_two_frontiers_on_one_store_keep_one_queue(open_store: Opener) -> None:
    # Workers sharing one store: each queues links as it finds them, all take from one
    # queue, in the order the links were queued whoever queued them.
    first, second = open_store(), open_store()
    await first.add([item("a.example", 1), item("a.example", 2)])
    await second.add([item("a.example", 3)])
    await first.add([item("a.example", 4)])
    assert await second.add([item("a.example", 4)]) == []
    assert await lease_all(second, "a.example", 0.0) == [
        f"http://a.example/{n}" for n in (1, 2, 3, 4)]
    await first.done("http://a.example/1", fetched=True, revisit_at=1.0)
    await second.add([item("a.example", 5)])
    await second.done("http://a.example/2", fetched=True, revisit_at=1.0)
    assert await lease_all(first, "a.example", 1.0) == [
        f"http://a.example/{n}" for n in (1, 5, 2)]


async def test_open_frontier_names_the_backend(tmp_path: Path) -> None:
    assert isinstance(open_frontier("memory://", default_path=_no_default_path),
                      MemoryFrontier)
    default = open_frontier("", default_path=lambda: tmp_path / "default.sqlite")
    assert isinstance(default, SQLiteFrontier)
    await default.close()
    for url in ("redis://127.0.0.1:1/0?prefix=p:", "rediss://127.0.0.1:1/0"):
        shared = open_frontier(url, default_path=_no_default_path)  # connects when used
        assert isinstance(shared, RedisFrontier)
        await shared.close()
    with pytest.raises(ConfigError, match="no frontier"):
        open_frontier("postgres://x", default_path=_no_default_path)
    with pytest.raises(ConfigError, match="cannot open the frontier"):
        open_frontier(f"sqlite:///{tmp_path}/no/such/dir/f.sqlite",
                      default_path=_no_default_path)


async def test_redis_keys_follow_the_prefix_and_the_host_tag(redis_url: str,
                                                             redis_prefix: str) -> None:
    store = RedisFrontier.from_url(f"{redis_url}?prefix={redis_prefix}")
    look = aioredis.Redis.from_url(redis_url)
    try:
        await store.add([item("a.example", 1), item("b.example", 1, not_before=9.0)])
        await store.mark_seen([item("c.example", 1)])
        await store.lease("a.example", 0.0, LEASE_S)
        await store.set_host_state("a.example", "x")
        keys = sorted([k.decode() async for k in look.scan_iter(f"{redis_prefix}*")])
        tags = {k.split("{")[1].split("}")[0] for k in keys if "{" in k}
        # each host's keys share its tag, the crawl-wide keys share "f": two slots at most
        # for any operation, never one script over both
        assert tags == {"a.example", "b.example", "c.example", "f"}
        assert sorted(k for k in keys if "{f}" in k) == [
            f"{redis_prefix}{{f}}:applied", f"{redis_prefix}{{f}}:counts",
            f"{redis_prefix}{{f}}:hosts"]
        assert all("{" in k for k in keys)
        with pytest.raises(InvalidURL, match=r"on the host 'b\.example'"):
            await store.add([FrontierItem("http://a.example/x", "b.example")])
        with pytest.raises(InvalidURL, match="not an http"):
            await store.mark_seen([FrontierItem("ftp://a.example/x", "a.example")])
    finally:
        await store.close()
        await look.aclose()


@pytest.mark.parametrize("server", ["redis_url", "redis_cluster_url"])
async def test_redis_counts_mend_after_a_worker_killed_between_its_two_calls(
        server: str, redis_prefix: str, request: pytest.FixtureRequest) -> None:
    """A host's change is one script in its slot, the crawl-wide index and counts a second
    call in another: a worker killed between the two leaves them behind, and the host's
    next change (or a lease that finds nothing) brings them back exact."""
    url = f"{request.getfixturevalue(server)}?prefix={redis_prefix}"
    store = RedisFrontier.from_url(url, worker="w1")
    other = RedisFrontier.from_url(url, worker="w2")
    try:
        await store.add([item("a.example", 1), item("b.example", 1), item("b.example", 2)])
        taken = await store.lease("a.example", 0.0, LEASE_S)
        assert taken is not None
        # w1 acknowledges the URL, and dies before it updates the crawl-wide keys.
        short = "h/1"
        await store.flush()
        await store._script(store._done, "a.example",
                            ["a.example", short, "1", "", hashlib.blake2b(
                                short.encode(), digest_size=8).digest(), "w1"])
        assert await other.counts() == FrontierCounts(2, 1, 0, 0)  # behind
        # The host stays in the index, due when the lease would have ended; a worker that
        # tries it then finds nothing and sends the host's state.
        assert await other.due_hosts(LEASE_S, 10) == [("b.example", 0.0),
                                                      ("a.example", LEASE_S)]
        assert await other.lease("a.example", LEASE_S, LEASE_S) is None
        assert await other.counts() == FrontierCounts(2, 0, 1, 0)
        assert await other.hosts() == [("b.example", 0.0)]
        assert await other.host_fetched() == {"a.example": 1}
        # A lost update followed by another change of the host: the change carries all.
        got = await other.lease("b.example", 1.0, LEASE_S)
        assert got is not None
        # the lease's state sent now, not within the next few ms (a loaded machine decided
        # which came first, it or the lost update below)
        await other.flush()
        await other._script(other._release, "b.example", ["b.example", "h/1", 0, "0", "w2"])
        assert await other.counts() == FrontierCounts(1, 1, 1, 0)  # behind
        await other.add([item("b.example", 3)])
        assert await other.counts() == FrontierCounts(3, 0, 1, 0)
        assert await other.hosts() == [("b.example", 0.0)]
    finally:
        await store.close()
        await other.close()


async def test_redis_leases_have_owners_and_a_late_worker_changes_nothing(
        redis_url: str, redis_prefix: str) -> None:
    url = f"{redis_url}?prefix={redis_prefix}"
    first = RedisFrontier.from_url(url, worker="w1")
    second = RedisFrontier.from_url(url, worker="w2")
    try:
        await first.add([item("a.example", 1), item("a.example", 2)])
        taken = await first.lease("a.example", 0.0, 5.0)
        assert taken is not None and taken.url.endswith("/1")
        # w1's lease runs out and w2 takes the URL: w1's word on it no longer counts.
        again = await second.lease("a.example", 6.0, 5.0)
        assert again is not None and again.url == taken.url
        await first.done(taken.url, fetched=True)
        await first.release(taken)
        assert (await first.counts()).leased == 1
        await second.done(again.url, fetched=True)
        # second's state reaches the crawl-wide counts with its next call, or within
        # APPLY_S: flushed here at once
        await second.flush()
        assert await first.counts() == FrontierCounts(1, 0, 1, 0)
        # A lease that ran out but was not taken since is still its owner's to acknowledge.
        late = await first.lease("a.example", 7.0, 1.0)
        assert late is not None
        await first.done(late.url, fetched=False)
        assert await first.counts() == FrontierCounts(0, 0, 1, 1)
        # The seen set keeps digests, and still knows both URLs.
        assert await second.add([item("a.example", 1), item("a.example", 2)]) == []
    finally:
        await first.close()
        await second.close()


async def test_redis_workers_beat_on_the_servers_clock(redis_url: str,
                                                        redis_prefix: str) -> None:
    url = f"{redis_url}?prefix={redis_prefix}"
    worker = RedisFrontier.from_url(url, worker="m1-42")
    watcher = RedisFrontier.from_url(url)
    try:
        with pytest.raises(ConfigError, match="worker name"):
            await watcher.heartbeat({})
        at = await worker.heartbeat({"fetched": 3})
        now, beats = await watcher.workers()
        assert [(b.worker, b.about) for b in beats] == [("m1-42", {"fetched": 3})]
        assert beats[0].at == pytest.approx(at) and 0 <= now - at < 5
        await worker.add([item("a.example", 1)])
        assert await watcher.host_count() == (1, 0)
        await worker.forget_worker()
        assert (await watcher.workers())[1] == []
    finally:
        await worker.close()
        await watcher.close()


# -- every backend against the memory one, on random operations ------------------------------

HOSTS = st.sampled_from(["a.example", "b.example"])
LINKS = st.lists(st.tuples(HOSTS, st.integers(0, 5), st.sampled_from([0.0, 0.0, 3.0, 40.0])),
                 min_size=1, max_size=4)
LEASE = st.tuples(st.just("lease"), HOSTS, st.sampled_from([0.0, 0.0, 2.0, 15.0, 31.0]))
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("add"), LINKS),
    LEASE,
    st.tuples(st.just("done"), st.integers(0, 3), st.booleans(),
              st.sampled_from([None, None, 0.0, 5.0])),
    LEASE,
    st.tuples(st.just("release"), st.integers(0, 3), st.integers(0, 3),
              st.sampled_from([0.0, 4.0])),
    st.tuples(st.just("mark_seen"), LINKS),
    st.tuples(st.just("requeue_leased")),
), min_size=6, max_size=30)

_files = itertools.count()


async def _compare(open_other: Callable[[], FrontierStore],
                   operations: list[tuple[object, ...]]) -> None:
    other, model = open_other(), MemoryFrontier()
    now = 100.0
    leased: list[FrontierItem] = []  # what the model has leased, oldest first
    try:
        for operation in operations:
            name, *args = operation
            if name in ("add", "mark_seen"):
                links = [FrontierItem(f"http://{h}/{n}", h, not_before=now + nb if nb else 0.0)
                         for h, n, nb in args[0]]
                assert (await getattr(other, name)(links)) == await getattr(model, name)(links)
            elif name == "lease":
                host, step = args
                now += step
                taken = await model.lease(host, now, LEASE_S)
                assert await other.lease(host, now, LEASE_S) == taken
                if taken is not None:
                    leased = [x for x in leased if x.url != taken.url] + [taken]
            elif name == "done":
                which, fetched, revisit = args
                url = leased.pop(which % len(leased)).url if leased else "http://a.example/0"
                at = None if revisit is None else now + revisit
                await model.done(url, fetched=fetched, revisit_at=at)
                await other.done(url, fetched=fetched, revisit_at=at)
            elif name == "release":
                which, attempts, back_off = args
                if not leased:
                    continue
                given = leased.pop(which % len(leased))
                given = given._replace(attempts=attempts,
                                       not_before=now + back_off if back_off else 0.0)
                await model.release(given)
                await other.release(given)
            else:
                assert await other.requeue_leased() == await model.requeue_leased()
                leased = []
            assert await other.counts() == await model.counts()
        assert sorted(await other.hosts()) == sorted(await model.hosts())
        for host in ("a.example", "b.example"):
            assert await other.next_due(host) == await model.next_due(host)
        assert await other.host_fetched() == await model.host_fetched()
    finally:
        await other.close()


@settings(max_examples=50, deadline=None)
@given(operations=OPERATIONS)
def test_sqlite_does_what_memory_does(operations: list[tuple[object, ...]],
                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.getbasetemp() / f"compare-{next(_files)}.sqlite"
    asyncio.run(_compare(lambda: SQLiteFrontier(path), operations))


@settings(max_examples=50, deadline=None)
@given(operations=OPERATIONS)
def test_redis_does_what_memory_does(operations: list[tuple[object, ...]],
                                     redis_url: str) -> None:
    url = f"{redis_url}?prefix=c{uuid.uuid4().hex[:12]}:"
    asyncio.run(_compare(lambda: RedisFrontier.from_url(url), operations))


async def test_redis_scripts_come_back_after_the_server_forgets_them(
        redis_url: str, redis_prefix: str) -> None:
    """Scripts are loaded once and sent by SHA1; a server that lost them (SCRIPT FLUSH, a
    restart) is sent their text again and the frontier goes on."""
    store = RedisFrontier.from_url(f"{redis_url}?prefix={redis_prefix}", worker="w1")
    look = aioredis.Redis.from_url(redis_url)
    try:
        await store.add([item("a.example", 1), item("a.example", 2)])
        await look.script_flush()
        taken = await store.lease("a.example", 0.0, LEASE_S)
        assert taken is not None and taken.url.endswith("/1")
        await look.script_flush()
        got = await store.settle(taken.url, fetched=True, add=[item("a.example", 3)],
                                 lease=("a.example", 0.0, LEASE_S))
        assert [i.url for i in got.added] == ["http://a.example/3"]
        assert got.leased is not None and got.leased.url.endswith("/2")
        assert await store.counts() == FrontierCounts(1, 1, 1, 0)
    finally:
        await store.close()
        await look.aclose()


def test_a_workers_heartbeat_ends_with_its_block_whenever_the_block_ends(
        redis_url: str, redis_prefix: str) -> None:
    # Leaving the block ends the heartbeat. Ended by a cancel, it could beat on for good: a
    # cancel that lands in a round trip is now and then lost in redis-py, or comes back as
    # a ConnectionError the heartbeat rides out as Redis away, and a crawl worker whose
    # crawl was over never ended. Beating without a pause, most exits land in a round trip.
    # The trials run in a thread of their own, so that a heartbeat that does not end fails
    # the test rather than hanging it.
    beats: list[dict[str, object]] = []

    def about(ended: bool) -> dict[str, object]:
        beats.append({"ended": ended})
        return beats[-1]

    async def trials() -> None:
        worker = RedisFrontier.from_url(f"{redis_url}?prefix={redis_prefix}", worker="m1-43")
        try:
            for trial in range(40):
                async with worker.holding(0.3, about, beat_s=0.0):
                    await asyncio.sleep(0.001 * (trial % 7))
            _, (last,) = await worker.workers()
            assert last.about == {"ended": True}
        finally:
            await worker.close()

    run_apart(trials, 60, "a heartbeat went on after its block ended")
    assert sum(beat["ended"] is True for beat in beats) == 40 and len(beats) > 80


async def test_a_held_frontier_leases_in_memory_reading_a_hosts_urls_ahead(tmp_path: Path
                                                                         ) -> None:
    # A crawl alone with its file: a lease is not written (its row stays queued, so a kill
    # loses nothing); a host's next URLs are read a few at a time, handed out in order.
    path = tmp_path / "crawl.sqlite"
    frontier = SQLiteFrontier(path)
    await frontier.add([item("a.example", n) for n in range(40)])
    transaction = frontier.batch()
    assert isinstance(transaction, Transaction)
    transaction.hold()
    sent: list[str] = []
    frontier._db.set_trace_callback(sent.append)
    taken = []
    following = await frontier.lease("a.example", 0.0, LEASE_S)
    while following is not None:
        taken.append(following.url)
        async with frontier.batch():  # as a page is settled
            await frontier.done(following.url, fetched=True)
            following = await frontier.lease("a.example", 0.0, LEASE_S)
    assert taken == [f"http://a.example/{n}" for n in range(40)]
    assert not [s for s in sent if "lease_until" in s and s.startswith("UPDATE")]
    reads = [s for s in sent if s.startswith("SELECT") and "FROM frontier WHERE host" in s]
    assert len(reads) <= 40 // LEASE_AHEAD + 2, len(reads)  # one a page before
    # a kill: what was leased and not acknowledged is queued in the file
    await frontier.add([item("a.example", n) for n in (40, 41)])
    kept = await frontier.lease("a.example", 0.0, LEASE_S)
    assert kept == item("a.example", 40)
    assert await frontier.counts() == FrontierCounts(1, 1, 40, 0)
    transaction.commit()
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT url FROM frontier WHERE state = 0 ORDER BY seq").fetchall(
        ) == [("http://a.example/40",), ("http://a.example/41",)]
    reader.close()
    await frontier.close()


async def test_a_held_frontier_hands_a_lease_back_when_its_block_is_undone(tmp_path: Path
                                                                          ) -> None:
    frontier = SQLiteFrontier(tmp_path / "crawl.sqlite")
    await frontier.add([item("a.example", n) for n in range(3)])
    transaction = frontier.batch()
    assert isinstance(transaction, Transaction)
    transaction.hold()
    first = await frontier.lease("a.example", 0.0, LEASE_S)
    assert first == item("a.example", 0)
    with pytest.raises(RuntimeError):
        async with frontier.batch():
            await frontier.done(first.url, fetched=True)
            assert await frontier.lease("a.example", 0.0, LEASE_S) == item("a.example", 1)
            raise RuntimeError("a page hook failed")
    # the acknowledgement and the lease undone: the first still leased, the second queued
    assert await frontier.counts() == FrontierCounts(2, 1, 0, 0)
    assert await frontier.lease("a.example", 0.0, LEASE_S) == item("a.example", 1)
    await frontier.release(first._replace(not_before=5.0))
    assert await frontier.lease("a.example", 1.0, LEASE_S) == item("a.example", 2)
    assert await frontier.lease("a.example", 5.0, LEASE_S) == first._replace(not_before=5.0)
    await frontier.close()

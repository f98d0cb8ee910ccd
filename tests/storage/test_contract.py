"""One contract, every backend: the same table of cases against memory, SQLite and a real
redis-server."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from polite.core.politeness.rules import LEASE_RECHECK_S, claim_first
from polite.errors import ConfigError
from polite.storage import (
    HostActivity,
    MemoryStore,
    RedisStore,
    RobotsRecord,
    SQLiteStore,
    Store,
)
from tests.redis_server import redis_server

pytestmark = pytest.mark.anyio


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


Factory = Callable[[FakeClock], Store]


@pytest.fixture(params=["memory", "sqlite", "redis", "redis-3-nodes"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    opened: list[Store] = []
    if request.param == "redis":
        redis_url = f"{request.getfixturevalue('redis_url')}?"
        prefix = request.getfixturevalue("redis_prefix")
    elif request.param == "redis-3-nodes":  # a Redis Cluster through the cluster client
        redis_url = f"{request.getfixturevalue('redis_cluster_nodes')[0]}/0?cluster=1&"
        prefix = request.getfixturevalue("redis_prefix")

    def make(clock: FakeClock) -> Store:
        store: Store
        if request.param == "memory":
            store = MemoryStore(clock)
        elif request.param == "sqlite":
            store = SQLiteStore(tmp_path / "polite.sqlite", clock)
        else:
            store = RedisStore.from_url(f"{redis_url}prefix={prefix}", clock=clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.close()


CLAIMS = [
    # (last claim at, interval, asked at, granted, at)
    (None, 5.0, 100.0, True, 100.0),
    (100.0, 5.0, 103.0, False, 105.0),
    (100.0, 5.0, 105.0, True, 105.0),
    (100.0, 0.0, 100.0, True, 100.0),
]


@pytest.mark.parametrize(("last", "interval", "now", "granted", "at"), CLAIMS)
async def test_claim_table(make_store: Factory, last: float | None, interval: float, now: float,
                           granted: bool, at: float) -> None:
    store = make_store(FakeClock())
    if last is not None:
        assert (await store.claim("e.com", interval, last)).granted
    answer = await store.claim("e.com", interval, now)
    assert (answer.granted, answer.at) == (granted, at)
    # Right after a granted claim the slot is taken (unless no spacing is asked for); a
    # refused claim took nothing, so the answer is the same refusal.
    again = await store.peek("e.com", interval, now)
    assert again.granted is (granted and interval == 0)
    if not granted:
        assert again.at == at


async def test_one_slot_one_winner(make_store: Factory) -> None:
    store = make_store(FakeClock(50.0))
    answers = [await store.claim("e.com", 1.0) for _ in range(5)]
    assert [a.granted for a in answers] == [True, False, False, False, False]
    assert answers[1].at == 51.0
    assert (await store.claim("other.org", 1.0)).granted  # hosts are independent


async def test_hosts_with_braces_have_slots_of_their_own(make_store: Factory) -> None:
    # A brace in a host decides a Redis Cluster key's slot ({...} is a hash tag): each
    # host's slot key stays one key of its own, claimed alone or in a batch.
    store = make_store(FakeClock(50.0))
    hosts = ["}evil.test", "{a}.test", "{pages}", "a.test"]
    assert all([(await store.claim(host, 1.0)).granted for host in hosts])
    await store.back_off("{a}.test", 70.0)
    claims = await store.claim_batch([(host, (1.0,)) for host in hosts], take=False)
    assert [claim.ats for claim in claims] == [(51.0,), (70.0,), (51.0,), (51.0,)]


async def test_back_off_holds_the_host(make_store: Factory) -> None:
    clock = FakeClock(10.0)
    store = make_store(clock)
    await store.back_off("e.com", 70.0)
    await store.back_off("e.com", 40.0)  # an earlier back-off does not shorten it
    answer = await store.claim("e.com", 1.0)
    assert (answer.granted, answer.at) == (False, 70.0)
    clock.now = 70.0
    assert (await store.claim("e.com", 1.0)).granted


async def test_a_late_start_moves_the_slot_but_never_past_now(make_store: Factory) -> None:
    """shifted_start in every store: one request out, its lateness moves the host's start;
    two out at once (no delay), the first one's lateness counts from its own grant, so the
    start goes no later than the moment it is told."""
    clock = FakeClock(100.0)
    store = make_store(clock)
    await store.shift_start("e.com", 5.0)  # no slot yet: nothing to move
    assert (await store.peek("e.com", 1.0)).granted
    assert (await store.claim("e.com", 1.0)).granted
    clock.now = 103.0
    await store.shift_start("e.com", 2.0)  # left at 102: the next slot at 103
    assert (await store.peek("e.com", 1.0)).at == 103.0
    assert (await store.claim("e.com", 0.0)).granted  # 103.0
    clock.now = 103.5
    assert (await store.claim("e.com", 0.0)).granted  # 103.5, the first still out
    clock.now = 104.0
    await store.shift_start("e.com", 1.0)  # the first told, 1 s after its grant
    answer = await store.peek("e.com", 0.0)
    assert (answer.granted, answer.at) == (True, 104.0)  # not 104.5
    assert (await store.peek("e.com", 1.0)).at == 105.0


BATCHES = [
    # (last start, back-off until, candidate intervals, asked at)
    (None, None, (1.0,), 100.0),
    (100.0, None, (5.0, 1.0), 103.0),
    (100.0, None, (5.0, 4.0), 103.0),
    (100.0, 110.0, (1.0, 0.5), 103.0),
    (100.0, 90.0, (1.0,), 103.0),  # a back-off already over is not held_until
    (None, None, (1.0, 2.0, 3.0), 50.0),
]


@pytest.mark.parametrize(("last", "backoff", "intervals", "now"), BATCHES)
async def test_claim_batch_is_claim_first(make_store: Factory, last: float | None,
                                          backoff: float | None,
                                          intervals: tuple[float, ...], now: float) -> None:
    clock = FakeClock(now)
    store = make_store(clock)
    if last is not None:
        assert (await store.claim("e.com", 0.0, last)).granted
    if backoff is not None:
        await store.back_off("e.com", backoff)
    expected = claim_first(last, backoff, intervals, now)
    peeked, other = await store.claim_batch([("e.com", intervals), ("o.org", (9.0,))],
                                            take=False)
    assert peeked == expected
    assert other.granted == 0
    taken, _ = await store.claim_batch([("e.com", intervals), ("o.org", (9.0,))], take=True)
    assert taken == expected
    # What was taken is held: the same batch again gets nothing for either host.
    again = await store.claim_batch([("e.com", intervals), ("o.org", (9.0,))], take=True)
    assert again[1].granted == -1 and again[1].ats == (now + 9.0,)
    if expected.granted >= 0:
        assert (await store.peek("e.com", intervals[expected.granted], now)).granted is False


async def test_a_lease_holds_its_host_until_the_response_or_its_end(
        make_store: Factory) -> None:
    """A slot taken with a lease: nobody else is granted the host, whatever its spacing,
    until the response ends the lease (with its pause, in the same step) or the lease runs
    out (its holder died); the asker is told to ask again soon, never later than the
    spacing or a back-off would say."""
    clock = FakeClock(100.0)
    store = make_store(clock)
    (taken,) = await store.claim_batch([("e.com", (0.0,))], take=True, lease_s=30.0)
    assert taken.granted == 0
    clock.now = 101.0
    (held,) = await store.claim_batch([("e.com", (0.0, 5.0))], take=True, lease_s=30.0)
    assert held == claim_first(100.0, None, (0.0, 5.0), 101.0, 130.0)
    assert held.granted == -1 and held.ats == (101.0 + LEASE_RECHECK_S, 105.0)
    assert held.in_flight and held.held_until is None
    (peeked,) = await store.claim_batch([("e.com", (0.0,))], take=False)
    assert peeked.granted == -1  # a look sees the lease too
    (other,) = await store.claim_batch([("o.org", (0.0,))], take=True, lease_s=30.0)
    assert other.granted == 0  # hosts are independent
    # The response: a 429 with Retry-After: 10; its pause and the lease's end at once.
    await store.note_response("e.com", 0.2, 10.0, ends_lease=True)
    (paused,) = await store.claim_batch([("e.com", (0.0,))], take=True, lease_s=30.0)
    assert (paused.granted, paused.ats, paused.held_until) == (-1, (111.0,), 111.0)
    clock.now = 111.0
    (again,) = await store.claim_batch([("e.com", (0.0,))], take=True, lease_s=30.0)
    assert again.granted == 0
    # Its holder died: nothing ends the lease but time.
    clock.now = 140.0
    (lapsing,) = await store.claim_batch([("e.com", (0.0,))], take=True, lease_s=30.0)
    assert lapsing.granted == -1 and lapsing.ats == (140.0 + LEASE_RECHECK_S,)
    clock.now = 141.0
    (lapsed,) = await store.claim_batch([("e.com", (0.0,))], take=True)
    assert lapsed.granted == 0  # taken without a lease: none is left behind
    (free,) = await store.claim_batch([("e.com", (0.0,))], take=True)
    assert free.granted == 0
    # A request that got no response ends its lease with neither a time nor a pause.
    await store.claim_batch([("e.com", (0.0,))], take=True, lease_s=30.0)
    await store.note_response("e.com", None, None, ends_lease=True)
    assert (await store.claim_batch([("e.com", (0.0,))], take=True))[0].granted == 0


async def test_host_facts_and_responses(make_store: Factory) -> None:
    clock = FakeClock(200.0)
    store = make_store(clock)
    assert await store.host_facts(["e.com", "o.org"]) == [(None, None), (None, None)]
    await store.set_delay("e.com", 2.0)
    await store.note_response("o.org", 1.0, None)
    await store.note_response("o.org", 2.0, None)
    facts = await store.host_facts(["e.com", "o.org"])
    assert facts[0] == (2.0, None)
    assert facts[1].configured_delay_s is None
    assert facts[1].response_time_s == pytest.approx(1.3)
    await store.note_response("e.com", None, 30.0)  # a 429 with Retry-After: 30
    await store.note_response("e.com", None, 5.0)  # a shorter pause does not cut it
    answer = await store.claim("e.com", 1.0)
    assert (answer.granted, answer.at) == (False, 230.0)


async def test_delays(make_store: Factory) -> None:
    store = make_store(FakeClock())
    assert await store.get_delay("e.com") is None
    await store.set_delay("e.com", 2.5)
    await store.set_delay("a.org", 0.5)
    await store.set_delay("e.com", 3.0)
    assert await store.get_delay("e.com") == 3.0
    assert await store.all_delays() == {"a.org": 0.5, "e.com": 3.0}
    await store.delete_delay("a.org")
    assert await store.all_delays() == {"e.com": 3.0}
    assert await store.all_robots_delays() == {}
    await store.set_robots_delay("e.com", 0.5)
    await store.set_robots_delay("e.com", 2.0)
    await store.set_robots_delay("b.net", 0.25)
    assert await store.all_robots_delays() == {"e.com": 2.0, "b.net": 0.25}


async def test_activity_adds_counters_and_keeps_the_latest_facts(make_store: Factory
                                                                  ) -> None:
    store = make_store(FakeClock())
    assert await store.all_activity() == []
    await store.add_activity([
        HostActivity("e.com", allowed=2, delay_refused=1, last_seen=10.0, origin="http://e.com",
                     delay_s=1.0, delay_source="default", robots_status="200"),
        HostActivity("o.org", robots_refused=3)])
    # Another node adds its counts; its facts replace those given, the others stay.
    await store.add_activity([
        HostActivity("e.com", allowed=5, cache_hits=4, last_seen=12.5, delay_s=2.5,
                     delay_source="operator", backoff_until=99.0, backoff_reason="429"),
        HostActivity("n.net")])
    rows = {row.host: row for row in await store.all_activity()}
    assert rows["e.com"] == HostActivity(
        "e.com", allowed=7, robots_refused=0, delay_refused=1, cache_hits=4, last_seen=12.5,
        origin="http://e.com", delay_s=2.5, delay_source="operator", robots_status="200",
        backoff_until=99.0, backoff_reason="429")
    assert rows["o.org"] == HostActivity("o.org", robots_refused=3)
    assert rows["n.net"] == HostActivity("n.net")  # known without counts


async def test_nodes_beat_and_expire(make_store: Factory) -> None:
    clock = FakeClock()
    store = make_store(clock)
    assert await store.live_nodes() == {}
    await store.node_beat("a", '{"rps": 1}', 60.0)
    # b's beat lasts a second: long enough to be seen by the next calls on a loaded machine
    await store.node_beat("b", '{"rps": 2}', 1.0)
    await store.node_beat("a", '{"rps": 3}', 60.0)
    assert await store.live_nodes() == {"a": '{"rps": 3}', "b": '{"rps": 2}'}
    clock.advance(2.0)
    time.sleep(1.05)  # Redis expires keys on its own clock
    assert await store.live_nodes() == {"a": '{"rps": 3}'}


async def test_robots_records(make_store: Factory) -> None:
    store = make_store(FakeClock())
    record = RobotsRecord("https://e.com", "parsed", 200, b"User-agent: *\nDisallow: /\n",
                          1.0, 86_401.0, 0, "")
    assert await store.load_robots("https://e.com") is None
    await store.save_robots(record)
    assert await store.load_robots("https://e.com") == record


async def test_pages_are_kept_and_the_least_recently_used_go_first(make_store: Factory
                                                                    ) -> None:
    clock = FakeClock()
    store = make_store(clock)
    assert await store.page_get("http://e.com/a") is None
    for name in "abc":
        clock.advance(1)
        await store.page_put(f"http://e.com/{name}", name.encode() * 100, max_total_bytes=300)
    clock.advance(1)
    assert await store.page_get("http://e.com/a") == b"a" * 100  # a is now the newest use
    clock.advance(1)
    await store.page_put("http://e.com/d", b"d" * 100, max_total_bytes=300)
    assert await store.page_get("http://e.com/b") is None  # the least recently used
    assert await store.page_get("http://e.com/a") == b"a" * 100
    assert await store.page_usage() == (3, 300)
    clock.advance(1)
    await store.page_put("http://e.com/a", b"A" * 50, max_total_bytes=300)  # replaced
    assert await store.page_usage() == (3, 250)
    await store.page_delete("http://e.com/c")
    await store.page_delete("http://e.com/never")
    assert await store.page_usage() == (2, 150)
    assert await store.page_get("http://e.com/a") == b"A" * 50


async def test_sqlite_keeps_everything_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "polite.sqlite"
    first = SQLiteStore(path, FakeClock())
    await first.set_delay("e.com", 4.0)
    await first.claim("e.com", 10.0, 100.0)
    await first.page_put("http://e.com/", b"page", max_total_bytes=1000)
    await first.close()
    second = SQLiteStore(path, FakeClock())
    assert await second.get_delay("e.com") == 4.0
    assert await second.page_get("http://e.com/") == b"page"
    assert (await second.claim("e.com", 10.0, 105.0)).at == 110.0
    await second.close()


KILLED_WRITER = """
import asyncio, os, signal, sys
from polite.storage import SQLiteStore
async def main():
    store = SQLiteStore(sys.argv[1], lambda: 0.0)
    await store.set_delay("killed.example", 7.5)
    os.kill(os.getpid(), signal.SIGKILL)
asyncio.run(main())
"""


async def test_sqlite_write_survives_a_kill(tmp_path: Path) -> None:
    path = tmp_path / "polite.sqlite"
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], timeout=60,
                          check=False)
    assert done.returncode == -9
    store = SQLiteStore(path, FakeClock())
    assert await store.get_delay("killed.example") == 7.5
    await store.close()


CLAIMER = """
import asyncio, sys
from polite.storage import SQLiteStore
async def main():
    store = SQLiteStore(sys.argv[1], lambda: 500.0)
    won = sum([(await store.claim("shared.example", 3600.0)).granted for _ in range(200)])
    print(won)
asyncio.run(main())
"""


async def test_sqlite_processes_sharing_a_file_claim_each_slot_once(tmp_path: Path) -> None:
    path = str(tmp_path / "polite.sqlite")
    SQLiteStore(path, FakeClock())  # create the schema first
    env = dict(os.environ)
    workers = [subprocess.Popen([sys.executable, "-c", CLAIMER, path], stdout=subprocess.PIPE,
                                text=True, env=env) for _ in range(4)]
    wins = [int(w.communicate(timeout=120)[0]) for w in workers]
    assert sum(wins) == 1


async def test_redis_nodes_judge_by_the_server_clock(redis_url: str, redis_prefix: str) -> None:
    url = f"{redis_url}?prefix={redis_prefix}"
    first, second = RedisStore.from_url(url), RedisStore.from_url(url)
    try:
        taken = await first.claim("shared.example", 3600.0)
        assert taken.granted
        assert abs(taken.now - time.time()) < 60  # the server's clock, in seconds
        refused = await second.claim("shared.example", 3600.0)
        assert not refused.granted
        assert refused.at == pytest.approx(taken.at + 3600.0)
        batch = await second.claim_batch([("shared.example", (3600.0,))], take=True)
        assert batch[0].granted == -1
    finally:
        await first.close()
        await second.close()


REDIS_CLAIMER = """
import asyncio, sys
from polite.storage import RedisStore
async def main():
    store = RedisStore.from_url(sys.argv[1])
    won = 0
    for _ in range(200):
        won += (await store.claim("shared.example", 3600.0)).granted
        won += (await store.claim_batch([("batch.example", (3600.0,))], take=True))[0].granted == 0
    print(won)
    await store.close()
asyncio.run(main())
"""


async def test_redis_processes_claim_each_slot_once(redis_url: str, redis_prefix: str) -> None:
    url = f"{redis_url}?prefix={redis_prefix}"
    workers = [subprocess.Popen([sys.executable, "-c", REDIS_CLAIMER, url],
                                stdout=subprocess.PIPE, text=True) for _ in range(4)]
    wins = [int(w.communicate(timeout=120)[0]) for w in workers]
    assert sum(wins) == 2  # one slot per host, whichever process got it


async def test_redis_keeps_everything_across_a_server_restart(tmp_path: Path) -> None:
    record = RobotsRecord("https://e.com", "parsed", 200, b"User-agent: *\nCrawl-delay: 3\n",
                          1.0, 2.0, 0, "")
    with redis_server(tmp_path, appendonly=True) as url:
        store = RedisStore.from_url(url)
        await store.set_delay("e.com", 4.0)
        await store.save_robots(record)
        await store.close()
    with redis_server(tmp_path, appendonly=True) as url:
        store = RedisStore.from_url(url)
        assert await store.get_delay("e.com") == 4.0
        assert await store.load_robots("https://e.com") == record
        await store.close()


def test_redis_url_errors() -> None:
    with pytest.raises(ConfigError, match="expected redis://"):
        RedisStore.from_url("http://127.0.0.1:6379/0")
    with pytest.raises(ConfigError, match="database 0 only"):
        RedisStore.from_url("redis://127.0.0.1:6379/2?cluster=1")
    with pytest.raises(ConfigError, match="cluster= takes 1 or 0"):
        RedisStore.from_url("redis://127.0.0.1:6379/0?cluster=maybe")
    with pytest.raises(ConfigError, match="over TCP"):
        RedisStore.from_url("unix:///tmp/redis.sock?cluster=1")


async def test_redis_facts_kept_a_while_when_asked(redis_url: str, redis_prefix: str) -> None:
    """A crawl worker keeps a host's facts facts_ttl_s: another node's new delay comes then;
    its own, at once. Response times go with the next round trip."""
    url = f"{redis_url}?prefix={redis_prefix}"
    worker, operator = RedisStore.from_url(url), RedisStore.from_url(url)
    try:
        # a second: the facts are still kept after a round trip on a loaded machine
        worker.facts_ttl_s = 1.0
        assert await worker.host_facts(["e.com"]) == [(None, None)]
        await operator.set_delay("e.com", 4.0)
        assert await worker.host_facts(["e.com"]) == [(None, None)]  # kept
        await asyncio.sleep(1.05)
        assert await worker.host_facts(["e.com"]) == [(4.0, None)]
        await worker.set_delay("e.com", 5.0)
        await worker.note_response("e.com", 2.0, None)
        assert await operator.host_facts(["e.com"]) == [(5.0, None)]  # sample not sent yet
        assert await worker.host_facts(["e.com"]) == [(5.0, 2.0)]  # its own, at once
        await worker.note_response("e.com", 1.0, None)
        assert (await worker.host_facts(["e.com"]))[0].response_time_s == pytest.approx(1.7)
        await asyncio.sleep(0.35)
        assert (await operator.host_facts(["e.com"]))[0].response_time_s == pytest.approx(1.7)
        await worker.note_response("e.com", 2.7, None)
        await worker.claim("o.org", 1.0)  # a claim of its own carries the sample
        assert (await operator.host_facts(["e.com"]))[0].response_time_s == pytest.approx(2.0)
    finally:
        await worker.close()
        await operator.close()


async def test_a_sqlite_file_from_before_leases_takes_them(tmp_path: Path) -> None:
    """A store file whose slots have no lease column yet gets one as it is opened, and
    what it held stays."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE slots (host TEXT PRIMARY KEY, last_start REAL, "
                   "backoff_until REAL)")
        db.execute("INSERT INTO slots VALUES ('e.com', 100.0, 200.0)")
    clock = FakeClock(150.0)
    store = SQLiteStore(path, clock)
    try:
        (held,) = await store.claim_batch([("e.com", (1.0,))], take=True, lease_s=30.0)
        assert (held.granted, held.held_until) == (-1, 200.0)
        clock.now = 200.0
        assert (await store.claim_batch([("e.com", (1.0,))], take=True,
                                        lease_s=30.0))[0].granted == 0
        assert (await store.claim_batch([("e.com", (0.0,))], take=True))[0].in_flight
    finally:
        await store.close()
    await SQLiteStore(path, clock).close()  # opened again: the column is there

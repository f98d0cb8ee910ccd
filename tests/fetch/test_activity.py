"""The node's activity record: bounded trace, per-second counts, and a flush that loses
nothing when the store fails."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence

import pytest

from polite.core.robots.lifecycle import (
    FetchOutcome,
    Received,
    Unreachable,
    robots_state,
)
from polite.fetch.activity import Activity, robots_code
from polite.fetch.robots import _record, _state
from polite.storage import HostActivity, MemoryStore
from polite.storage.redis import RedisStore
from tests.threads import run_apart

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def exchange(activity: Activity, n: int, decision: str = "allowed", status: int = 200,
             url: str | None = None) -> None:
    """One request through the three calls the proxy makes: arrived, decided, ended."""
    watch = activity.watch("GET", url or f"http://e.com/{n}", "e.com", held=False)
    activity.decided(watch, decision)
    activity.ended(watch, decision, status, 0)


def test_the_trace_keeps_the_last_n_and_cuts_long_urls() -> None:
    clock = Clock()
    activity = Activity(trace_size=3, wall=clock)
    for n in range(10):
        exchange(activity, n)
    assert [e.url for e in activity.trace] == [f"http://e.com/{n}" for n in (7, 8, 9)]
    exchange(activity, 0, url="http://e.com/" + "a" * 5000)
    assert len(activity.trace[-1].url) == 2001
    assert activity.requests == 11
    assert Activity(trace_size=0).trace.maxlen == 0


def test_a_trace_entry_is_the_exchange_as_it_ended() -> None:
    clock = Clock()
    activity = Activity(wall=clock)
    watch = activity.watch("GET", "http://e.com/a", "e.com", held=True)
    activity.decided(watch, "delay")
    activity.ended(watch, "delay", 429, 1500)
    (entry,) = activity.trace
    json = entry.as_json()
    assert json["durationMs"] >= 0
    del json["durationMs"]
    assert json == {"time": 1000.0, "method": "GET", "url": "http://e.com/a",
                    "decision": "delay", "status": 429, "delayMs": 1500}


def test_rates_and_status_classes_per_second() -> None:
    clock = Clock()
    activity = Activity(wall=clock)
    for _ in range(10):
        exchange(activity, 0)
    exchange(activity, 0, "delay", 429)
    exchange(activity, 0, "allowed", 503)
    clock.now += 1
    assert activity.rate_now() == 12 / 5
    line = activity.timeline(3)
    assert [s["t"] for s in line] == [999, 1000, 1001]
    assert line[1] == {"t": 1000, "2xx": 10, "refused": 1, "5xx": 1}
    assert activity.statuses == {"2xx": 10, "refused": 1, "5xx": 1}


def test_a_status_is_counted_in_the_class_of_its_first_digit() -> None:
    activity = Activity()
    for status in (0, 101, 204, 304, 404, 599, 600, 999):
        exchange(activity, 0, "error" if status == 0 else "allowed", status)
    assert activity.statuses == {"1xx": 2, "2xx": 1, "3xx": 1, "4xx": 1, "5xx": 3}
    assert activity.totals == {"error": 1, "allowed": 7}


def test_queued_and_in_flight_go_back_to_nothing() -> None:
    activity = Activity()
    first = activity.watch("GET", "http://e.com/1", "e.com", held=True)
    second = activity.watch("GET", "http://e.com/2", "e.com", held=True)
    activity.decided(first, "allowed")
    assert (activity.queued["e.com"], activity.in_flight["e.com"]) == (1, 1)
    activity.ended(first, "allowed", 200, 0)
    assert (activity.queued["e.com"], "e.com" in activity.in_flight) == (1, False)
    activity.ended(second, "allowed", 0, 0)  # its client left before its slot came
    assert not activity.queued and not activity.in_flight
    refused = activity.watch("GET", "http://e.com/3", "e.com", held=True)
    activity.decided(refused, "delay")
    activity.ended(refused, "delay", 429, 1000)
    assert not activity.queued and not activity.in_flight


class FailingOnce(MemoryStore):
    def __init__(self) -> None:
        super().__init__(Clock())
        self.fail = True

    async def add_activity(self, rows: Sequence[HostActivity]) -> None:
        if self.fail:
            self.fail = False
            raise ConnectionError("the store is away")
        await super().add_activity(rows)


async def test_a_failed_flush_keeps_the_counts_for_the_next() -> None:
    store = FailingOnce()
    activity = Activity(store)
    activity.count("e.com", "allowed")
    activity.note("e.com", delay_s=2.0, delay_source="operator")
    with pytest.raises(ConnectionError):
        await activity.flush()
    activity.count("e.com", "cache")
    activity.note("e.com", delay_s=3.0)
    await activity.flush()
    (row,) = await store.all_activity()
    assert (row.allowed, row.cache_hits, row.delay_s, row.delay_source) == \
        (1, 1, 3.0, "operator")
    assert [h.host for h in await activity.hosts()] == ["e.com"]


@pytest.mark.parametrize(("outcome", "code"), [
    (Received(200, b"User-agent: *\nDisallow: /x\n"), "200"),
    (Received(200, b"<!DOCTYPE html><html><body>Welcome</body></html>"), "HTML"),
    (Received(404, b""), "404"),
    (Received(403, b""), "403"),
    (Received(503, b"", (("Retry-After", "120"),)), "503"),
    (Received(429, b""), "429"),
    (Unreachable("connection refused"), "unreachable"),
])
def test_the_dashboards_robots_code_comes_from_the_state_not_its_words(
        outcome: FetchOutcome, code: str) -> None:
    """The short code the dashboard shows for a host's robots.txt, read from the state's
    fields (status, html), as it was and as a restart reads it back from the store."""
    state = robots_state(outcome, 1000.0)
    assert robots_code(state) == code
    stored = _state(_record("http://e.com", state, b""), "auto", 500_000)
    assert robots_code(stored) == code
    if hasattr(state, "reason"):  # words are for people: another wording changes no code
        assert robots_code(dataclasses.replace(state, reason="reworded")) == code


def test_a_nodes_beat_on_redis_ends_when_cancelled_whenever_the_cancel_lands(
        redis_url: str, redis_prefix: str) -> None:
    # polite serve cancels the node's flush-and-beat loop at shutdown and waits for it. A
    # cancel that lands in a round trip is now and then lost in redis-py (or comes back as
    # a ConnectionError, which the loop rides out as a hiccup): the loop went on and the
    # shutdown waited for good. Beating without a pause, most cancels land in a round trip;
    # the trials run in a thread of their own, so that a loop that does not end fails the
    # test rather than hanging it.
    async def trials() -> None:
        store = RedisStore.from_url(f"{redis_url}?prefix={redis_prefix}")
        try:
            for trial in range(40):
                activity = Activity(store, node=f"n{trial}")
                activity.count("e.com", "allowed")
                running = asyncio.ensure_future(activity.run(0.0))
                await asyncio.sleep(0.001 * (trial % 7))
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
            # None lost. (A flush that a cancel cuts short after Redis took it is kept and
            # sent again: counted twice, as after any write whose answer did not come.)
            (row,) = await store.all_activity()
            assert row.host == "e.com" and row.allowed >= 40
        finally:
            await store.close()

    run_apart(trials, 60, "a cancelled beat went on")

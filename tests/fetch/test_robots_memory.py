"""Parsed robots.txt files in memory are bounded in bytes, not only by count.

A probe served a 500 KB file of 30,000 lines like ``Disallow: /p{i}/*x{i}$`` from 120
origins (a wildcard DNS name is enough): the service grew from 47 MiB to 2 GiB and kept it.
Here the file is scaled down to 150 lines (3.5 KB; a test of the whole size would take
minutes) and the budget to 512 KiB, so that the same 120 origins overflow it six times over
(about 20 files fit). tracemalloc makes parsing ten times slower, so the file and the
budget are scaled down together (600 lines in 2 MiB, then 300 in 1 MiB, overflowed it as
often, for four and two times the CPU).
"""

from __future__ import annotations

import gc
import tracemalloc

import httpx
import pytest

from polite.clock import WallClock
from polite.core.robots.lifecycle import Parsed
from polite.fetch import RobotsFetcher
from polite.fetch import robots as robots_module
from polite.fetch._budget import MEASURE_EVERY
from polite.fetch.politeness import Politeness
from polite.storage import MemoryStore
from polite.storage.base import RobotsRecord
from tests.sites import Reply, Site, serve

pytestmark = pytest.mark.anyio

HOSTILE = ("User-agent: *\n" + "".join(f"Disallow: /p{i}/*x{i}$\n"
                                       for i in range(150))).encode()
BUDGET = 512 * 1024
# A file large enough to be parsed in steps (fetch.robots.STEPPED_BYTES).
LARGE = ("User-agent: *\n" + "".join(f"Disallow: /p{i}/*x{i}$\n"
                                     for i in range(3000))).encode()


async def _hostile_origins(client: httpx.AsyncClient
                           ) -> tuple[WallClock, MemoryStore, list[str], RobotsFetcher]:
    """120 origins whose hostile robots.txt another node sharing the store fetched before
    (read and parsed from there), and a fetcher held to the budget."""
    clock = WallClock()
    store = MemoryStore(clock)
    origins = [f"http://h{i}.example" for i in range(120)]
    for origin in origins:
        await store.save_robots(RobotsRecord(origin, "parsed", 200, HOSTILE, clock(),
                                             clock() + 3600))
    robots = RobotsFetcher(client, store, clock, agent="politetest",
                           max_memory_bytes=BUDGET)
    return clock, store, origins, robots


async def test_120_hostile_files_stay_within_the_byte_budget(client: httpx.AsyncClient
                                                             ) -> None:
    _, _, origins, robots = await _hostile_origins(client)
    tracemalloc.start()
    try:
        for n, origin in enumerate(origins):
            state = await robots.state(origin + "/p7/ax7")
            assert isinstance(state, Parsed)
            assert not state.robots.allowed(origin + "/p7/ax7", "otherbot")
            assert state.robots.allowed(origin + "/p7/ax8", "otherbot")
            assert robots.memory_bytes <= BUDGET, n
            # the first origin, used after each other one, stays (least recently used go)
            assert robots.fresh(origins[0]) is not None
            del state
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # The count is an upper bound of what is held (the bodies are the store's).
    assert held <= robots.memory_bytes <= BUDGET
    assert robots.fresh(origins[1]) is None  # long since dropped: read again when asked
    again = await robots.state(origins[1] + "/p7/ax7")
    assert isinstance(again, Parsed) and not again.robots.allowed(origins[1] + "/p7/ax7", "x")


async def test_decisions_keep_no_file_past_the_budget(client: httpx.AsyncClient) -> None:
    """The politeness driver, deciding for 120 origins, holds no parsed file of its own (it
    kept each origin's last state to tell the dashboard of changes: every file, for ever)."""
    clock, store, origins, robots = await _hostile_origins(client)
    politeness = Politeness(robots, store, clock, agent="politetest", allow_private=True)
    await politeness.check([origins[0] + "/"])  # what every check allocates once
    gc.collect()
    tracemalloc.start()
    try:
        for origin in origins:
            (answer,) = await politeness.check([origin + "/p7/ax7"])
            assert not answer.allowed
        del answer
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # The files in memory, and the store's facts of 120 hosts (a few KiB each at most).
    assert held <= robots.memory_bytes + 120 * 4096


async def test_a_fetched_file_counts_toward_the_budget(client: httpx.AsyncClient) -> None:
    with serve(Site("127.74.12.1", {"/robots.txt": Reply(200, LARGE)})) as site:
        robots = RobotsFetcher(client, MemoryStore(WallClock()), WallClock(),
                               agent="politetest", allow_private=True)
        state = await robots.state(site.origin + "/p7/ax7")
        assert isinstance(state, Parsed) and robots.memory_bytes >= state.robots.footprint
        assert state.robots.footprint > len(LARGE)


async def test_a_state_in_use_is_measured_now_and_then(client: httpx.AsyncClient,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A crawl uses its hosts' states for every page: each use measured the file's bytes
    again; now every MEASURE_EVERY-th use does, and what lookups grew is charged then."""
    clock = WallClock()
    store = MemoryStore(clock)
    origin = "http://measured.example"
    await store.save_robots(RobotsRecord(origin, "parsed", 200, HOSTILE, clock(),
                                         clock() + 3600))
    robots = RobotsFetcher(client, store, clock, agent="politetest", allow_private=True)
    assert await robots.known(origin) is not None
    state = robots.fresh(origin)
    assert isinstance(state, Parsed)
    measured: list[int] = []
    footprint = type(state.robots).footprint

    def counted(self: object) -> int:
        measured.append(1)
        return footprint.fget(self)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(type(state.robots), "footprint", property(counted))
    for i in range(4 * MEASURE_EVERY):
        assert robots.fresh(origin) is state
        state.robots.allowed(f"{origin}/p{i}/ax{i}", "politetest")  # grows its matcher
    assert 1 <= len(measured) <= 4
    for _ in range(MEASURE_EVERY + 1):
        robots.fresh(origin)
    assert robots.memory_bytes == robots_module._cost(state, HOSTILE)

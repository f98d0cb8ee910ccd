"""A large robots.txt is worked on a step at a time on the event loop, never in one hold.

The probe's file (``User-agent: *``, ``Allow: /`` and 14,000 lines ``Content-Usage:
/*x{n}*y train-ai=n``, 507 KB) was parsed and its AI-usage rules compiled on a worker
thread: the event loop then waited for the interpreter's lock at each of its system calls,
the switch interval (5 ms) each time and longer on a loaded machine, so that ``GET
/health`` took 23 to 65 ms quiet and up to a quarter of a second at a load of 12.

What is asserted is a count, not a duration: how many times a task beside the work was
run, against how much work there was. The interpreter is told to let a thread keep the lock
for 30 s (as a loaded machine, keeping the other thread off a core, makes it keep it), so
that work on another thread holds the loop for all of its time whatever the machine does.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import httpx
import pytest

from polite.clock import WallClock
from polite.core._steps import STEP
from polite.core.robots.lifecycle import Parsed
from polite.core.robots.usage import MAX_TDMREP_BYTES, read_tdmrep, read_tdmrep_steps
from polite.fetch import RobotsFetcher
from polite.fetch._steps import stepped
from polite.fetch.politeness import Politeness
from polite.fetch.robots import robots_usage
from polite.storage import MemoryStore
from polite.storage.base import RobotsRecord

pytestmark = pytest.mark.anyio

T = TypeVar("T")

ORIGIN = "http://hostile.example"
LINES = 14_000
HOSTILE = ("User-agent: *\nAllow: /\n" + "".join(f"Content-Usage: /*x{n}*y train-ai=n\n"
                                                  for n in range(LINES))).encode()


@contextmanager
def lock_held_long() -> Iterator[None]:
    """A thread that takes the interpreter's lock keeps it until it waits on something."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


async def turns_beside(work: Awaitable[T]) -> tuple[T, int]:
    """``work``'s result, and how many times a task beside it ran while it was done (each
    time the event loop was given back)."""
    turns = 0
    done = False

    async def beside() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(beside())
    await asyncio.sleep(0)  # it has begun
    begun = turns
    try:
        result = await work
    finally:
        done = True
        await task
    return result, turns - begun


async def test_a_large_file_is_read_and_prepared_a_few_hundred_lines_a_turn(
        client: httpx.AsyncClient) -> None:
    """Read from the store (another node fetched it), parsed, its matcher and AI-usage
    rules built: the loop is given back at least once every :data:`STEP` lines (the work
    is more than the lines: each is read, then its pattern indexed twice)."""
    clock = WallClock()
    store = MemoryStore(clock)
    await store.save_robots(RobotsRecord(ORIGIN, "parsed", 200, HOSTILE, clock(),
                                         clock() + 3600))
    robots = RobotsFetcher(client, store, clock, agent="politetest")
    with lock_held_long():
        known, turns = await turns_beside(robots.known(ORIGIN))
    assert known is not None
    state = known[0]
    assert isinstance(state, Parsed)
    assert turns >= 3 * LINES // STEP, turns
    # what was built in steps is what the lookups use: nothing left to build
    usage, turns = await turns_beside(robots_usage(state.robots, [ORIGIN + "/page7x7y"],
                                                   "politetest"))
    assert turns == 0
    assert usage[0].pref("train-ai").value == "disallow"


async def test_lookups_in_a_large_file_are_one_a_turn(client: httpx.AsyncClient) -> None:
    """A verbose call's 50 URLs: one lookup among the 14,000 patterns a turn of the loop
    (each may take milliseconds)."""
    clock = WallClock()
    store = MemoryStore(clock)
    await store.save_robots(RobotsRecord(ORIGIN, "parsed", 200, HOSTILE, clock(),
                                         clock() + 3600))
    robots = RobotsFetcher(client, store, clock, agent="politetest")
    known = await robots.known(ORIGIN)
    assert known is not None and isinstance(known[0], Parsed)
    urls = [f"{ORIGIN}/page{n}x{n}y" for n in range(0, LINES, 280)]
    with lock_held_long():
        found, turns = await turns_beside(robots_usage(known[0].robots, urls, "politetest"))
    assert turns >= len(urls) - 1, turns
    for url, prefs in zip(urls, found, strict=True):
        n = url.rsplit("/page", 1)[1].split("x")[0]
        assert prefs.pref("train-ai").value == "disallow", url
        assert f": /*x{n}*y train-ai=n" in prefs.answer("train-ai").reason, url


# issue 34's other file: a tdmrep.json of 9,571 wildcard locations (468 KB, under the
# 512 KiB cap), every tenth with a policy
ENTRIES = 9_571
TDMREP = json.dumps([{"location": f"/*x{n}*y", "tdm-reservation": 1}
                     | ({"tdm-policy": f"https://example.com/p{n}"} if not n % 10 else {})
                     for n in range(ENTRIES)]).encode()


async def test_a_large_tdmrep_file_is_compiled_a_few_hundred_entries_a_turn() -> None:
    """As the crawler and the MCP server read a site's tdmrep.json: in steps on the event
    loop, the same answers as read at once."""
    with lock_held_long():
        tdmrep, turns = await turns_beside(stepped(read_tdmrep_steps(TDMREP)))
    assert turns >= 2 * ENTRIES // STEP, turns
    at_once = read_tdmrep(TDMREP)
    assert len(TDMREP) <= MAX_TDMREP_BYTES
    for n in (0, 7, 4_780, ENTRIES - 1):
        url = f"{ORIGIN}/page{n}x{n}y"
        found = tdmrep.preferences(url)
        assert found == at_once.preferences(url)
        # the first location that matches decides: /*x{first digit}*y
        first = int(str(n)[0])
        assert f"entry {first + 1}: location /*x{first}*y" in found.answer("train-ai").reason
        assert found.licenses == (("https://example.com/p0",) if first == 0 else ())
    assert tdmrep.preferences(ORIGIN + "/page7x").stated() == ()


# the other hostile file of the probe: wildcard rules, to the 500 KiB cap, for every
# agent but the fetcher's own (whose matcher the fetcher builds when the file comes)
RULES = 30_000
WILDCARDS = ("User-agent: politetest\nDisallow: /own/\n\nUser-agent: *\n"
             + "".join(f"Disallow: /p{i}/*x{i}$\n" for i in range(RULES))).encode()


async def test_another_agents_matcher_of_a_large_file_is_built_in_steps(
        client: httpx.AsyncClient) -> None:
    """A decision for an agent other than the fetcher's own (``?agent=``, a proxied
    request's User-Agent) needs a matcher of its own group's rules: built in steps before
    the decisions, not by the first of them."""
    clock = WallClock()
    store = MemoryStore(clock)
    await store.save_robots(RobotsRecord(ORIGIN, "parsed", 200, WILDCARDS, clock(),
                                         clock() + 3600))
    robots = RobotsFetcher(client, store, clock, agent="politetest")
    politeness = Politeness(robots, store, clock, agent="politetest", allow_private=True)
    await robots.known(ORIGIN)
    lines = 500 * 1024 // len(b"Disallow: /p10000/*x10000$\n")  # read to the cap
    with lock_held_long():
        answers, turns = await turns_beside(politeness.check(
            [ORIGIN + "/p7/ax7"], agent="otherbot"))
    assert turns >= lines // STEP, turns
    assert not answers[0].allowed
    (again,) = await politeness.check([ORIGIN + "/p7/ax8"], agent="otherbot")
    assert again.allowed


async def test_a_batch_decides_one_url_of_a_large_file_a_turn(
        client: httpx.AsyncClient) -> None:
    """A batch's decisions in a large file go one a turn of the loop: each is a match
    among its rules (rules x URL length, milliseconds for a long URL among thousands of
    wildcard rules). Before, the loop was given back once 10 ms of them had passed by the
    clock (the 50 decisions here ran in one or two holds); a URL of a small file costs
    little and many go a turn."""
    clock = WallClock()
    store = MemoryStore(clock)
    await store.save_robots(RobotsRecord(ORIGIN, "parsed", 200, WILDCARDS, clock(),
                                         clock() + 3600))
    robots = RobotsFetcher(client, store, clock, agent="politetest")
    politeness = Politeness(robots, store, clock, agent="politetest", allow_private=True)
    urls = [f"{ORIGIN}/p{i}/ax{i}" for i in range(50)]
    await politeness.check(urls[:2], agent="otherbot")  # its matcher built
    with lock_held_long():
        answers, turns = await turns_beside(politeness.check(urls, agent="otherbot"))
    assert turns >= len(urls) - 1, turns
    assert [a.allowed for a in answers] == [False] * len(urls)
    assert all(f"/p{i}/*x{i}$" in str(a.decision) for i, a in enumerate(answers))

"""LoopGate, the gate on its caller's loop (Scrapy's asyncio reactor uses it), against a
real loopback site: a host's line is decided in one go, in order, refusals and
cancellations reaching the right request."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from polite.errors import RobotsDisallowed
from polite.integrations import Grant, LoopGate
from polite.integrations._gate import Rest, run_now
from tests.sites import Reply, Site, serve

WAITING = 30


def site() -> Site:
    return Site("127.0.40.1", {
        "/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private/\n"),
        **{f"/p{n}": Reply(200, b"ok") for n in range(WAITING)}})


def test_a_host_s_line_is_decided_in_one_go_in_order() -> None:
    """Requests that queued while the host's first was being decided (its robots.txt
    fetched) are all decided within a few turns of the loop, not one turn each (on a busy
    reactor a turn takes tens of milliseconds)."""

    async def crawl(origin: str) -> tuple[int, list[Grant | BaseException]]:
        loop = asyncio.get_running_loop()
        turns = itertools.count()
        ticking = True

        def tick() -> None:  # once per turn of the loop
            next(turns)
            if ticking:
                loop.call_soon(tick)

        gate = LoopGate(agent="FarmBot", allow_private=True, default_delay_s=0.0,
                        adaptive_factor=0.0)
        tick()
        urls = [f"{origin}/p{n}" for n in range(WAITING)]
        urls[7] = f"{origin}/private/7"
        asks = [asyncio.create_task(gate.acquire(url)) for url in urls]
        await asyncio.sleep(0)  # all of them asked: the first fetches robots.txt
        asks[11].cancel()
        await asks[0]
        granted_at = next(turns)
        outcomes = await asyncio.gather(*asks[1:], return_exceptions=True)
        spent = next(turns) - granted_at
        ticking = False
        await gate.close()
        return spent, outcomes

    with serve(site()) as server:
        spent, outcomes = asyncio.run(crawl(server.origin))
    assert spent <= 5, f"{spent} turns of the loop for {WAITING - 1} waiting requests"
    assert isinstance(outcomes[6], RobotsDisallowed)  # /private/7
    assert "Disallow: /private/" in outcomes[6].reason
    assert isinstance(outcomes[10], asyncio.CancelledError)  # the one that gave up
    grants = [o for o in outcomes if isinstance(o, Grant)]
    assert len(grants) == WAITING - 3
    times = [g.granted_at for g in grants]
    assert times == sorted(times)  # in the order they asked
    assert [p for _, p in server.arrivals] == ["/robots.txt"]  # the gate fetches nothing else


def test_run_now_decides_a_free_slot_on_the_caller_s_stack() -> None:
    """What Scrapy's middleware relies on: with the store in memory, a host whose robots.txt
    is known and whose slot is free is granted, and a response reported, without the
    coroutine waiting once (no task, no turn of the loop); the host's first request waits
    for robots.txt and its rest, awaited, gives the grant; a refusal is raised at once."""

    async def crawl(origin: str) -> None:
        gate = LoopGate(agent="FarmBot", allow_private=True, default_delay_s=0.0,
                        adaptive_factor=0.0)
        assert gate.reports_at_once
        first = run_now(gate.acquire(f"{origin}/p0"))
        assert isinstance(first, Rest)  # robots.txt is fetched first
        grant = await first
        assert isinstance(grant, Grant)
        reported = run_now(gate.report(f"{origin}/p0", 200, elapsed_s=0.001, grant=grant))
        assert reported == (None,)
        second = run_now(gate.acquire(f"{origin}/p1"))
        assert isinstance(second, tuple) and isinstance(second[0], Grant)
        assert second[0].granted_at >= grant.granted_at
        with pytest.raises(RobotsDisallowed):
            run_now(gate.acquire(f"{origin}/private/2"))
        await gate.close()

    with serve(Site("127.0.42.1", {
            "/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private/\n"),
            "/p0": Reply(200, b"ok")})) as server:
        asyncio.run(crawl(server.origin))
    assert [p for _, p in server.arrivals] == ["/robots.txt"]


def test_a_cancelled_rest_cancels_its_coroutine() -> None:
    """Awaiting a Rest is awaiting the coroutine: cancelling the task that awaits it ends
    the coroutine with CancelledError (its cleanup runs), and its result comes through."""
    cleaned = []

    async def slow(delay_s: float) -> str:
        try:
            await asyncio.sleep(delay_s)
            return "done"
        finally:
            cleaned.append(delay_s)

    async def main() -> None:
        rest = run_now(slow(0.01))
        assert isinstance(rest, Rest)
        assert await rest == "done"

        async def waiting() -> str:
            started = run_now(slow(30))
            assert isinstance(started, Rest)
            return await started

        task = asyncio.create_task(waiting())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleaned == [0.01, 30]

"""LoopGate, the gate on its caller's loop (Scrapy's asyncio reactor uses it), against a
real loopback site: a host's line is decided in one go, in order, refusals and
cancellations reaching the right request."""

from __future__ import annotations

import asyncio
import itertools

from polite.errors import RobotsDisallowed
from polite.integrations import Grant, LoopGate
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

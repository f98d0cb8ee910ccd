"""A proxied request that leaves later than its host's slot: the next slot counts from when
it really left, so the delay holds at the site. The proxy runs in the test's process, so
that its lookup of the site's name can be made slow (the one part standing in for the
world: a resolver); the site, robots.txt and the spacing are real, and the site stamps
each request as the kernel took it."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from polite.api import create_app
from polite.clock import WallClock
from polite.fetch.politeness import Politeness
from polite.fetch.robots import RobotsFetcher, create_client
from polite.proxy import ProxyServer, ProxySettings
from polite.proxy.base import Mode
from polite.storage import open_store
from tests.sites import Reply, Site, serve

pytestmark = pytest.mark.anyio

SITE = "127.0.64.21"
DELAY_S = 1.0
LOOKUP_S = 0.15  # how late the first request leaves: well inside the delay


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _get(port: int, url: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
        length = next(int(line.split(b":", 1)[1]) for line in head.lower().split(b"\r\n")
                      if line.startswith(b"content-length:"))
        return head + await asyncio.wait_for(reader.readexactly(length), 60)
    finally:
        writer.close()


async def test_a_request_that_leaves_late_moves_its_hosts_next_slot() -> None:
    """The first request's connection waits LOOKUP_S for the name's lookup after its slot
    was given; before, the second request left at the slot counted from the first's grant,
    and reached the site LOOKUP_S less than the delay after it."""
    lookups = 0

    async def slow_first_lookup(host: str) -> str:
        nonlocal lookups
        lookups += 1
        if lookups == 1:
            await asyncio.sleep(LOOKUP_S)
        return host

    routes = {"/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"),
              "/a": Reply(200, b"a"), "/b": Reply(200, b"b")}
    clock = WallClock()
    store = open_store("memory://", clock)
    client = create_client()
    robots = RobotsFetcher(client, store, clock, agent="politetest", allow_private=True)
    politeness = Politeness(robots, store,
                            clock, agent="politetest", default_delay_s=DELAY_S,
                            allow_private=True)
    proxy = ProxyServer(politeness, create_app(politeness, store),
                        settings=ProxySettings(mode=Mode.WAIT), resolve=slow_first_lookup)
    with serve(Site(SITE, routes)) as site:  # type: ignore[arg-type]
        port = await proxy.start("127.0.0.1", 0)
        try:
            first = asyncio.create_task(_get(port, f"{site.origin}/a"))
            await asyncio.sleep(0.05)  # the first is in before the second
            answers = [await _get(port, f"{site.origin}/b"), await first]
        finally:
            await proxy.close()
            await client.aclose()
            await store.close()
    assert all(answer.startswith(b"HTTP/1.1 200 ") for answer in answers), answers
    assert lookups >= 1
    pages = [(at, path) for at, path in site.arrivals if path != "/robots.txt"]
    assert [path for _, path in pages] == ["/a", "/b"]
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(pages)]
    assert min(gaps) >= DELAY_S - 0.005, gaps

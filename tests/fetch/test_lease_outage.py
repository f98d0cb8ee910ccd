"""Redis killed while a request holding its host's lease is at the site: the end of the lease
cannot be written then, and is written once Redis is back (started again on the same files),
not when the lease runs out; by the sitemap walker and by ``polite mcp`` alike (the crawl's
workers: tests/crawl/test_crawl_store_outage.py). Seen by another process's driver: the host
is served again within a bound far below the lease's length."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis

from polite.clock import WallClock
from polite.fetch import RobotsFetcher, create_client
from polite.fetch.politeness import Politeness
from polite.fetch.sitemaps import SitemapWalker
from polite.storage import RedisStore
from polite.storage.redis import UNREACHABLE
from tests.mcp_server.mcp_client import stdio_session
from tests.redis_server import free_port, start_redis
from tests.sites import Reply, Site, serve

LEASE_S = 600.0  # the walker's lease; polite mcp's is its --fetch-deadline-s and a minute
# A bound, not a measure: the host is free within this of Redis coming back (a loaded
# machine is slow to reconnect), where it was held for the whole lease before.
BACK_WITHIN_S = 60.0
URLSET = (b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
          b"<url><loc>http://127.0.176.1/a</loc></url></urlset>")
PAGE = Reply(200, b"<html><body><article><p>" + b"Words of the page. " * 20
             + b"</p></article></body></html>", {"content-type": "text/html; charset=utf-8"})


class Outage:
    """A Redis on files of its own, killed from inside a site's answer (after saying whether
    the host's lease was held then) and started again on the same files."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._port = free_port()
        self.prefix = f"outage{uuid.uuid4().hex[:8]}:"
        self.url = f"redis://127.0.0.1:{self._port}/0?prefix={self.prefix}"
        self.server: subprocess.Popen[bytes] = start_redis(folder, self._port, appendonly=True)
        self.held_at_kill: list[bool] = []

    def killing(self, host: str, reply: Reply) -> Reply:
        with redis.Redis(port=self._port) as client:
            self.held_at_kill.append(
                client.hget(f"{self.prefix}slot:{host}", "lease") is not None)
        self.server.send_signal(signal.SIGKILL)
        self.server.wait(10)
        return reply

    async def restart(self) -> None:
        self.server = await asyncio.to_thread(start_redis, self._folder, self._port,
                                              appendonly=True)

    def stop(self) -> None:
        self.server.terminate()
        self.server.wait(10)


async def wait_served(store_url: str, url: str) -> None:
    """Ask, as another process would (a driver of its own), for ``url``'s slot until it is
    given; fails past :data:`BACK_WITHIN_S`."""
    clock = WallClock()
    store = RedisStore.from_url(store_url)
    try:
        async with create_client() as http:
            robots = RobotsFetcher(http, store, clock, agent="otherbot", allow_private=True)
            other = Politeness(robots, store, clock, agent="otherbot", default_delay_s=0.0,
                               allow_private=True)
            end = time.monotonic() + BACK_WITHIN_S
            found = None
            while True:
                try:
                    (found,) = await other.check([url], reserve=True)
                    if found.allowed:
                        return
                except UNREACHABLE:
                    pass  # still coming up
                assert time.monotonic() < end, f"{url}'s host still held: {found}"
                await asyncio.sleep(0.1)
    finally:
        await store.close()


@pytest.mark.anyio
async def test_the_sitemap_walker_ends_a_lease_redis_lost_once_it_is_back(
        tmp_path: Path, anyio_backend: str) -> None:
    outage = Outage(tmp_path)
    site = Site("127.0.176.1")
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    site.routes["/sitemap.xml"] = lambda: outage.killing(site.host, Reply(200, URLSET))
    clock = WallClock()
    store = RedisStore.from_url(outage.url)
    try:
        with serve(site):
            async with create_client() as http:
                robots = RobotsFetcher(http, store, clock, agent="walkbot", allow_private=True)
                politeness = Politeness(robots, store, clock, agent="walkbot",
                                        default_delay_s=0.0, allow_private=True)
                walker = SitemapWalker(http, politeness, host_lease_s=LEASE_S)
                with pytest.raises(UNREACHABLE):  # the answer could not be noted
                    await walker.read(f"{site.origin}/sitemap.xml", lambda _: None)
                await outage.restart()
                await wait_served(outage.url, f"{site.origin}/a")
    finally:
        await store.close()
        outage.stop()
    assert outage.held_at_kill == [True]


def test_polite_mcp_ends_a_lease_redis_lost_once_it_is_back(tmp_path: Path) -> None:
    outage = Outage(tmp_path)
    site = Site("127.0.176.2")
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    site.routes["/page"] = lambda: outage.killing(site.host, PAGE)
    options = ("--store", outage.url, "--allow-private", "--default-delay-s", "0",
               "--fetch-deadline-s", str(LEASE_S), "--max-wait-s", "5")

    async def run() -> bool:
        async with stdio_session(*options) as client:
            result = await client.call_tool("fetch", {"url": f"{site.origin}/page"})
            await outage.restart()
            # while the server runs on: it ends the lease, not the lease's length
            await wait_served(outage.url, f"{site.origin}/other")
            return bool(result.is_error)

    try:
        with serve(site):
            failed = asyncio.run(run())
    finally:
        outage.stop()
    assert outage.held_at_kill == [True]
    assert failed  # the page's answer could not be noted: not given as if all was well

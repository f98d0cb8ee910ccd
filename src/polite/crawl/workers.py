"""The workers of a crawl shared through Redis, or through an SQLite file by processes of one
machine: each says every second that it is alive (in Redis, with what it has done, which
``status`` reads back with the frontier's totals) and keeps its leases. Kept apart from the
crawler so that reading a shared crawl's progress needs no crawl extra."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from polite.crawl.crawler import Crawler

__all__ = ["ALIVE_S", "HEARTBEAT_S", "crawl_status", "heartbeat", "is_shared", "shares_frontier"]

HEARTBEAT_S = 1.0  # a worker says it is alive this often
ALIVE_S = 5.0  # and is counted as gone when it has not for this long


def is_shared(store: str, *, knob: str = "store=") -> bool:
    """Whether a store URL is one several workers share (Redis); a URL that is none of the
    stores is refused, named as ``knob``."""
    from polite.storage.url import read_store_url

    return bool(store) and read_store_url(store, knob).shared


def shares_frontier(store: str, *, knob: str = "store=") -> bool:
    """Whether workers started with ``store`` share one frontier: a Redis store, or an SQLite
    file named as the store (which the processes of one machine share)."""
    from polite.storage.url import read_store_url

    return bool(store) and read_store_url(store, knob).kind in ("redis", "sqlite")


@contextlib.asynccontextmanager
async def heartbeat(store: str, worker: str, crawler: Crawler,
                    folder: Path) -> AsyncIterator[None]:
    """While the crawl runs, say every second in the shared store that this worker is alive
    (in Redis, with what it has done: :func:`crawl_status` reads it) and keep its leases;
    nothing without a store."""
    if not store:
        yield
        return
    from polite.storage.frontier import SQLiteFrontier
    from polite.storage.redis_frontier import RedisFrontier

    frontier = crawler.frontier
    lease_s = crawler.settings.lease_s
    if isinstance(frontier, SQLiteFrontier):
        async with frontier.holding(lease_s, beat_s=HEARTBEAT_S, alive_s=ALIVE_S):
            yield
        return
    assert isinstance(frontier, RedisFrontier)
    started = time.time()

    def about(ended: bool) -> dict[str, object]:
        stats = crawler.stats
        return {"host": socket.gethostname(), "pid": os.getpid(), "out": str(folder),
                "started": round(started, 3), "fetched": stats.fetched,
                "failed": stats.failed, "skipped": sum(stats.skipped.values()),
                "in_flight": stats.in_flight, "pages_per_s": round(stats.pages_per_s(), 2),
                "ended": ended}

    async with frontier.holding(lease_s, about, beat_s=HEARTBEAT_S):
        yield


async def crawl_status(store: str, *, knob: str) -> dict[str, Any]:
    """A shared crawl's progress: the frontier's totals, the hosts, and each worker with
    whether it is alive (it beat within :data:`ALIVE_S` and did not say it ended)."""
    from polite.storage.redis_frontier import RedisFrontier

    frontier = RedisFrontier.from_url(store, knob=knob)
    try:
        counts = await frontier.counts()
        waiting, fetched_hosts = await frontier.host_count()
        now, beats = await frontier.workers()
    finally:
        await frontier.close()
    workers = [{"worker": beat.worker, "seconds_since_beat": round(now - beat.at, 1),
                "alive": not beat.about.get("ended") and now - beat.at < ALIVE_S,
                **beat.about} for beat in beats]
    return {"frontier": counts._asdict(), "hosts_waiting": waiting,
            "hosts_fetched": fetched_hosts,
            "workers_alive": sum(1 for w in workers if w["alive"]),
            "finished": counts.queued + counts.leased == 0, "workers": workers}

"""The workers of a crawl shared through Redis: each says every second that it is alive and
what it has done, and ``status`` reads them all back with the frontier's totals. Kept
apart from the crawler so that reading a shared crawl's progress needs no crawl extra."""

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

__all__ = ["ALIVE_S", "HEARTBEAT_S", "crawl_status", "heartbeat", "is_shared"]

HEARTBEAT_S = 1.0  # a worker says it is alive this often
ALIVE_S = 5.0  # and is counted as gone when it has not for this long


def is_shared(store: str, *, knob: str = "store=") -> bool:
    """Whether a store URL is one several workers share (Redis); a URL that is none of the
    stores is refused, named as ``knob``."""
    from polite.storage.url import read_store_url

    return bool(store) and read_store_url(store, knob).shared


@contextlib.asynccontextmanager
async def heartbeat(store: str, worker: str, crawler: Crawler,
                    folder: Path) -> AsyncIterator[None]:
    """While the crawl runs, say every second in the shared store that this worker is alive
    and what it has done (:func:`crawl_status` reads it); nothing without a store."""
    if not store:
        yield
        return
    from polite.storage.redis_frontier import RedisFrontier

    frontier = crawler.frontier
    assert isinstance(frontier, RedisFrontier)
    started = time.time()
    lease_s = crawler.settings.lease_s

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

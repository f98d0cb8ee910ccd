"""One survey on many workers: the domain list in Redis, each domain leased to one worker.

The list lives in a :class:`polite.storage.redis_frontier.RedisFrontier` named by the store
URL's prefix, each domain one item (``http://DOMAIN/`` on the host ``DOMAIN``, its rank in
``depth``, ``-1`` for none), so the survey's leases are the crawl's: owned by a worker,
renewed while it lives (:meth:`RedisFrontier.holding`), back in the queue when they run
out, and a domain acknowledged once, by the worker that holds it. The first worker loads the
list (a ``SET NX`` marker names it; a worker that finds the list half loaded, its loader
dead, loads it again: adding a domain twice queues it once). Each worker records what it
fetched in its own ``survey.sqlite``; ``polite report`` over all the folders reads their
union (:func:`polite.survey.merge.merge_surveys`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence

from polite.storage.frontier import FrontierItem
from polite.storage.redis_frontier import RedisFrontier

__all__ = ["SharedDomains"]

_LOAD_BATCH = 1_000  # domains per round trip while loading
_DUE_READ = 64  # due hosts read at once (a bounded read, whatever the list's size)


class SharedDomains:
    """The shared list: :meth:`load` once, then :meth:`take` and :meth:`finish` per domain
    until :meth:`take` says the list is done for every worker."""

    def __init__(self, frontier: RedisFrontier, *, lease_s: float = 600.0,
                 poll_s: float = 0.5) -> None:
        self.frontier = frontier
        self.lease_s = lease_s
        self._poll_s = poll_s
        self._prefix = frontier.prefix
        self._taken: list[str] = []  # due hosts read but not yet tried
        self._asking = asyncio.Lock()

    async def load(self, domains: Sequence[tuple[int | None, str]]) -> bool:
        """Queue the list unless another worker did; True when this worker loaded it."""
        client = self.frontier.client
        loaded = f"{self._prefix}s:loaded"
        while not await client.exists(loaded):
            # The loader's claim runs out, so a loader killed midway is taken over.
            if await client.set(f"{self._prefix}s:loader", self.frontier.worker or "-",
                                nx=True, ex=max(30, int(self.lease_s))):
                # a name the URL would read otherwise (a port, a query) is not a domain
                domains = [(rank, name) for rank, name in domains
                           if not any(c in name for c in ":?#[@\\")]
                for start in range(0, len(domains), _LOAD_BATCH):
                    await self.frontier.add([
                        FrontierItem(f"http://{name}/", name,
                                     depth=-1 if rank is None else rank)
                        for rank, name in domains[start:start + _LOAD_BATCH]])
                await client.set(loaded, str(len(domains)))
                return True
            await asyncio.sleep(self._poll_s)
        return False

    async def take(self) -> tuple[int | None, str] | None:
        """A domain leased to this worker, waiting while every domain left is leased to
        others; ``None`` once nothing is queued or leased (the survey is over)."""
        # One of this process's workers asks the store at a time: a hundred asking at once
        # read the same due hosts a hundred times over and held as many connections.
        async with self._asking:
            return await self._take()

    async def _take(self) -> tuple[int | None, str] | None:
        while True:
            if not self._taken:
                self._taken = [host for host, _ in
                               await self.frontier.due_hosts(time.time(), _DUE_READ)]
                # workers reading the same due hosts try them in different orders
                random.shuffle(self._taken)
            raced = bool(self._taken)
            while self._taken:
                host = self._taken.pop()
                item = await self.frontier.lease(host, time.time(), self.lease_s)
                if item is not None:
                    return (None if item.depth < 0 else item.depth), host
            if raced:
                continue  # others leased what was read: read again
            counts = await self.frontier.counts()
            if counts.queued + counts.leased == 0:
                return None
            await asyncio.sleep(self._poll_s * (0.5 + random.random()))

    async def finish(self, domain: str) -> None:
        """The domain is recorded in this worker's folder: no worker takes it again."""
        await self.frontier.done(f"http://{domain}/", fetched=True)

    async def left(self) -> int:
        counts = await self.frontier.counts()
        return counts.queued + counts.leased

"""What the service needs from storage, as small protocols; each backend passes one shared
contract suite (tests/storage/test_contract.py).

Times are seconds on the store's clock: a store that is shared between nodes (Redis) uses
its own server time, so that nodes with different clocks still agree on a slot.
"""

from __future__ import annotations

import asyncio
import errno
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol, runtime_checkable

from polite.core.politeness.decision import HostFacts
from polite.core.politeness.rules import HostClaim, SlotClaim

__all__ = [
    "COUNTERS",
    "FACTS",
    "ActivityStore",
    "DelayStore",
    "HostActivity",
    "HostClaim",
    "HostFacts",
    "PageStore",
    "RobotsRecord",
    "RobotsStore",
    "SharedRobotsStore",
    "SlotClaim",
    "SlotStore",
    "Store",
    "cannot_write",
    "raise_if_cancelled",
    "store_failed",
]

# A disk with no room (or none for this user), a disk that fails, one mounted read-only.
_WRITE_ERRNOS = frozenset((errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS))
# SQLite's primary result codes for the same: SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL.
_SQLITE_WRITE_CODES = frozenset((8, 10, 13))


def cannot_write(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) says a file could not be written: a full or
    failing disk, under a crawl's folder or an SQLite store. Not a page's failure: the work
    that needed the write stops, and is done again once there is room."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS:
            return True
        if isinstance(exc, sqlite3.Error) and \
                (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _SQLITE_WRITE_CODES:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def raise_if_cancelled() -> None:
    """For a loop that rides out a store's errors: raise the cancel its task was sent, if
    any. A store's client may raise its own error for a cancel that landed during a round
    trip (redis-py 8.1 raises ConnectionError for about half of the cancels that land in a
    pipeline's execute), and a loop that ignored it would never end: a crawl worker waited
    for good on its heartbeat once its crawl was over."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """A robots.txt fetch as stored: enough to rebuild the state after a restart."""

    origin: str
    kind: str  # "parsed" | "allow" | "disallow"
    status: int
    body: bytes
    fetched_at: float
    expires_at: float
    failures: int = 0
    reason: str = ""


@dataclass(frozen=True, slots=True)
class HostActivity:
    """What the dashboard shows of a host across the nodes sharing a store: counters that
    every node adds to, and facts of the latest decision (``None``: not known or not
    changed; the store keeps what it had). Times are wall-clock seconds."""

    host: str
    allowed: int = 0
    robots_refused: int = 0
    delay_refused: int = 0
    cache_hits: int = 0
    last_seen: float | None = None
    origin: str | None = None
    delay_s: float | None = None
    delay_source: str | None = None
    robots_status: str | None = None  # "200", "404 (no file: all allowed)", ...
    next_at: float | None = None  # when its next request may go, as last decided
    backoff_until: float | None = None
    backoff_reason: str | None = None

    def merged(self, newer: HostActivity) -> HostActivity:
        """Counters added, facts replaced by ``newer``'s where it has them."""
        changes: dict[str, object] = {}
        for item in fields(self):
            name = item.name
            if name in COUNTERS:
                changes[name] = getattr(self, name) + getattr(newer, name)
            elif name != "host" and getattr(newer, name) is not None:
                changes[name] = getattr(newer, name)
        return replace(self, **changes)  # type: ignore[arg-type]


# The fields of HostActivity that nodes add to; the others are facts, the latest one kept.
COUNTERS = ("allowed", "robots_refused", "delay_refused", "cache_hits")
FACTS = ("last_seen", "origin", "delay_s", "delay_source", "robots_status", "next_at",
         "backoff_until", "backoff_reason")


class ActivityStore(Protocol):
    """Per-host activity and the nodes sharing the store (the dashboard's shared part)."""

    async def add_activity(self, rows: Sequence[HostActivity]) -> None:
        """Add each row's counters to the host's and keep its facts given (one step)."""
        ...

    async def all_activity(self) -> list[HostActivity]:
        """Every host with activity recorded."""
        ...

    async def node_beat(self, node: str, info: str, ttl_s: float) -> None:
        """``node`` is alive for ``ttl_s`` more seconds; ``info`` is its JSON summary."""
        ...

    async def live_nodes(self) -> dict[str, str]:
        """node -> info, for the nodes whose last beat has not expired."""
        ...


class SlotStore(Protocol):
    async def claim(self, host: str, interval_s: float, now: float | None = None) -> SlotClaim:
        """Take the host's next slot if it is free at ``now`` (the store's clock if None)."""
        ...

    async def peek(self, host: str, interval_s: float, now: float | None = None) -> SlotClaim:
        """Like :meth:`claim` without taking the slot."""
        ...

    async def back_off(self, host: str, until: float) -> None:
        """No request to ``host`` before ``until`` (429/503 with Retry-After)."""
        ...

    async def shift_start(self, host: str, late_s: float) -> None:
        """The request of ``host``'s last slot left ``late_s`` after it (a connection to
        open first): the slot's start moves that much later, but not past the store's now
        (:func:`~polite.core.politeness.rules.shifted_start`), so that the next request is
        spaced from when this one really went. A shift, not a time, so that a store judged
        by its own clock (Redis) needs none of the caller's."""
        ...

    async def claim_batch(self, requests: Sequence[tuple[str, tuple[float, ...]]], *,
                          take: bool, lease_s: float | None = None) -> list[HostClaim]:
        """For each (host, candidate intervals): :func:`~polite.core.politeness.rules.
        claim_first` at the store's time, taking the granted slot when ``take``; all hosts
        in one step (one round trip where the store is remote). A host whose lease is held
        is granted nothing. ``lease_s`` (with ``take``): a granted slot also takes the
        host's lease, held until :meth:`note_response` ends it or ``lease_s`` runs out (its
        holder died), so that processes sharing the store have one request of a host in
        flight at a time and a 429's pause reaches the next request of any of them."""
        ...

    async def host_facts(self, hosts: Sequence[str]) -> list[HostFacts]:
        """:class:`HostFacts` for each host, in order, in one step."""
        ...

    async def note_response(self, host: str, elapsed_s: float | None,
                            pause_s: float | None, *, ends_lease: bool = False) -> None:
        """A response from ``host`` took ``elapsed_s``; ``pause_s`` (429/503) holds the host
        that long from the store's now (never shortening a longer back-off);
        ``ends_lease``: the host's lease ends, in the same step as the pause begins (a
        request that got no response ends it with neither)."""
        ...

    async def clock(self) -> float:
        """The store's own time, in seconds."""
        ...


class DelayStore(Protocol):
    async def get_delay(self, domain: str) -> float | None: ...

    async def set_delay(self, domain: str, delay_s: float) -> None: ...

    async def delete_delay(self, domain: str) -> None: ...

    async def all_delays(self) -> dict[str, float]: ...

    async def set_robots_delay(self, host: str, delay_s: float) -> None:
        """The spacing ``host``'s robots.txt last asked for (for ``GET /delays``)."""
        ...

    async def all_robots_delays(self) -> dict[str, float]: ...


class RobotsStore(Protocol):
    async def load_robots(self, origin: str) -> RobotsRecord | None: ...

    async def save_robots(self, record: RobotsRecord) -> None: ...


@runtime_checkable
class SharedRobotsStore(RobotsStore, Protocol):
    """A robots.txt store that processes on several machines share (Redis): one of them
    fetches an origin's file, the others wait for it in the store."""

    async def claim_robots_fetch(self, origin: str, hold_s: float) -> bool:
        """True when the caller may fetch ``origin``'s robots.txt: nobody else claimed it in
        the last ``hold_s`` (a claim ends when :meth:`end_robots_fetch` is called or its
        holder dies and ``hold_s`` runs out)."""
        ...

    async def end_robots_fetch(self, origin: str) -> None: ...


class PageStore(Protocol):
    """The HTTP page cache's bytes, one blob per URL (all its variants), least recently
    used first out once the total passes ``max_total_bytes``."""

    async def page_get(self, key: str) -> bytes | None: ...

    async def page_put(self, key: str, blob: bytes, *, max_total_bytes: int) -> None: ...

    async def page_delete(self, key: str) -> None: ...

    async def page_usage(self) -> tuple[int, int]:
        """(pages, bytes) held."""
        ...


def store_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is the store failing (Redis unreachable; SQLite locked, gone or
    unable to keep a write)."""
    # Redis's errors are known only once redis-py is loaded, which a Redis store does.
    errors = sys.modules.get("redis.exceptions")
    redis_error: Any = getattr(errors, "RedisError", None)
    return isinstance(exc, sqlite3.Error) or (redis_error is not None
                                              and isinstance(exc, redis_error))


class Store(SlotStore, DelayStore, RobotsStore, PageStore, ActivityStore, Protocol):
    """Everything at once: what ``polite serve`` is given."""

    async def check(self) -> None:
        """Raise when the store does not answer or could not keep what is written to it
        (Redis stopped; a SQLite file deleted, replaced or truncated): ``/health``."""
        ...

    async def close(self) -> None: ...

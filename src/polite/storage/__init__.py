"""Storage behind small protocols: memory, SQLite (the default) and, for many nodes, Redis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from polite.errors import ConfigError
from polite.storage.base import (
    ActivityStore,
    DelayStore,
    HostActivity,
    HostClaim,
    HostFacts,
    RobotsRecord,
    RobotsStore,
    SlotClaim,
    SlotStore,
    Store,
)
from polite.storage.memory import MemoryStore
from polite.storage.redis import RedisStore
from polite.storage.sqlite import SQLiteStore

__all__ = [
    "ActivityStore",
    "DelayStore",
    "HostActivity",
    "HostClaim",
    "HostFacts",
    "MemoryStore",
    "RedisStore",
    "RobotsRecord",
    "RobotsStore",
    "SQLiteStore",
    "SlotClaim",
    "SlotStore",
    "Store",
    "open_store",
]


def open_store(url: str, clock: Callable[[], float]) -> Store:
    """A store from its URL: ``sqlite:///PATH``, ``redis://HOST:PORT/DB`` or ``memory://``."""
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if path.parent and not path.parent.exists():
            raise ConfigError(f"--store {url}: the folder {path.parent} does not exist")
        return SQLiteStore(path, clock)
    if url.startswith(("redis://", "rediss://")):
        return RedisStore.from_url(url)
    if url in ("memory://", "memory"):
        return MemoryStore(clock)
    raise ConfigError(f"--store {url!r}: expected sqlite:///PATH, redis://HOST:PORT/DB or "
                      "memory://")

"""Storage behind small protocols: memory, SQLite (the default) and, for many nodes, Redis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polite.errors import SettingError
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

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    """The SQLite and Redis stores, imported when first named: redis-py alone costs a
    process about 65 ms and 10,000 objects (each of the garbage collector's full passes
    walks them all), which a crawler with its store in memory never needs."""
    if name == "RedisStore":
        from polite.storage.redis import RedisStore
        return RedisStore
    if name == "SQLiteStore":
        from polite.storage.sqlite import SQLiteStore
        return SQLiteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(url: str, clock: Callable[[], float], *, knob: str = "store=") -> Store:
    """A store from its URL: ``sqlite:///PATH``, ``redis://HOST:PORT/DB`` or ``memory://``.
    ``knob`` names the setting in errors as the caller's surface spells it (``--store``,
    ``POLITE_STORE``)."""
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if path.parent and not path.parent.exists():
            raise SettingError(knob, url, f"the folder {path.parent} does not exist")
        from polite.storage.sqlite import SQLiteStore
        return SQLiteStore(path, clock)
    if url.startswith(("redis://", "rediss://")):
        from polite.storage.redis import RedisStore
        return RedisStore.from_url(url, knob=knob)
    if url in ("memory://", "memory"):
        return MemoryStore(clock)
    raise SettingError(knob, url, "expected sqlite:///PATH, redis://HOST:PORT/DB or memory://")

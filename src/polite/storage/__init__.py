"""Storage behind small protocols: memory, SQLite (the default) and, for many nodes, Redis."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from polite.errors import SettingError, StoreURLError
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
from polite.storage.url import StoreURL, parse_store_url, read_store_url

if TYPE_CHECKING:
    from polite.storage.frontier import FrontierStore
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
    "StoreURL",
    "is_redis_store",
    "open_frontier",
    "open_store",
    "parse_store_url",
    "read_store_url",
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


def is_redis_store(store: object) -> TypeGuard[RedisStore]:
    """Whether ``store`` is a :class:`RedisStore`, without importing redis-py to ask: no
    store is one unless its module was imported to make it."""
    module = sys.modules.get("polite.storage.redis")
    return module is not None and isinstance(store, module.RedisStore)


def open_store(url: str, clock: Callable[[], float], *, knob: str = "store=") -> Store:
    """A store from its URL (:mod:`polite.storage.url`): ``sqlite:///PATH``,
    ``redis://HOST:PORT/DB`` (``rediss://``, ``unix:///SOCKET``) or ``memory://``. ``knob``
    names the setting in errors as the caller's surface spells it (``--store``,
    ``POLITE_STORE``)."""
    where = read_store_url(url, knob)
    if where.kind == "sqlite":
        assert where.path is not None
        if where.path.parent and not where.path.parent.exists():
            raise SettingError(knob, url, f"the folder {where.path.parent} does not exist")
        from polite.storage.sqlite import SQLiteStore
        return SQLiteStore(where.path, clock)
    if where.kind == "redis":
        from polite.storage.redis import RedisStore
        return RedisStore.from_url(where, knob=knob)
    return MemoryStore(clock)


def open_frontier(url: str, *, default_path: Callable[[], Path],
                  store: object = None, worker: str = "", knob: str = "store=") -> FrontierStore:
    """A frontier from a store URL (:mod:`polite.storage.url`); ``default_path`` gives the
    file when ``url`` is empty. An SQLite frontier shares the connection of ``store`` when
    it is an :class:`SQLiteStore` on the same file. ``worker`` names the leases' owner in a
    frontier that workers share (Redis, or an SQLite file). ``knob`` names the setting in errors
    (``--store``)."""
    from polite.storage.frontier import MemoryFrontier, SQLiteFrontier
    from polite.storage.sqlite import SQLiteStore

    shared = store if isinstance(store, SQLiteStore) else None
    if not url:
        return SQLiteFrontier(default_path(), store=shared)
    try:
        where = parse_store_url(url)
    except StoreURLError as exc:
        raise SettingError(knob, url, f"no frontier for this store ({exc.problem})") from exc
    if where.kind == "sqlite":
        assert where.path is not None
        return SQLiteFrontier(where.path, store=shared, worker=worker)
    if where.kind == "redis":
        from polite.storage.redis_frontier import RedisFrontier

        return RedisFrontier.from_url(where, worker=worker, knob=knob)
    return MemoryFrontier()

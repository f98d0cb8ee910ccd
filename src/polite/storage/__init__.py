"""Storage behind small protocols: memory, SQLite (the default) and, for many nodes, Redis."""

from __future__ import annotations

from polite.storage.base import (
    DelayStore,
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
    "DelayStore",
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
]

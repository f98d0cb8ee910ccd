"""What a process keeps in memory of many sites (parsed robots.txt files, compiled
tdmrep.json files), bounded by a count and by bytes: the least recently used go first."""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["MEASURE_EVERY", "LruBudget"]

# A value kept has its bytes counted again at every 16th use (lookups may have grown it, by
# a bounded amount each: measuring is not free, and a crawl uses a host's file for each of
# its pages).
MEASURE_EVERY = 16

K = TypeVar("K")
V = TypeVar("V")


class LruBudget(Generic[K, V]):
    """Values by key, each charged the bytes its owner measured, within ``max_count``
    values and ``max_bytes`` in all; the least recently used are dropped first, and the
    value just put is always kept (a single one larger than the budget included)."""

    __slots__ = ("_entries", "_max_bytes", "_max_count", "bytes")

    def __init__(self, max_count: int, max_bytes: int) -> None:
        # key -> (value, bytes charged, uses since it was put), least recently used first
        self._entries: dict[K, tuple[V, int, int]] = {}
        self._max_count = max(1, max_count)
        self._max_bytes = max_bytes
        self.bytes = 0  # what the values kept are charged, in all

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, key: K, value: V, cost: int) -> None:
        """``value`` kept for ``key``, charged ``cost`` bytes, as the most recently used
        (charged again when it was kept already: its bytes measured anew)."""
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        while entries and (len(entries) >= self._max_count
                           or self.bytes + cost > self._max_bytes):
            self.bytes -= entries.pop(next(iter(entries)))[1]
        entries[key] = (value, cost, 0)
        self.bytes += cost

    def get(self, key: K) -> tuple[V, int] | None:
        """The value of ``key`` and how many times it was got since it was put (its owner
        may measure it again every so often), made the most recently used; ``None`` when
        it is not kept."""
        entries = self._entries
        entry = entries.pop(key, None)
        if entry is None:
            return None
        value, cost, uses = entry
        entries[key] = (value, cost, uses + 1)
        return value, uses

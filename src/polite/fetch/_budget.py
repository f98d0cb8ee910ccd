"""What a process keeps in memory of many sites (parsed robots.txt files, compiled
tdmrep.json files), bounded by a count and by bytes: the least recently used go first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from polite.core.robots.usage import TdmRep

__all__ = ["MAX_TDMREP_SITES", "MEASURE_EVERY", "NO_TDMREP", "TDMREP_MEMORY_BYTES", "LruBudget",
           "tdmrep_files"]

# A value kept has its bytes counted again at every 16th use (lookups may have grown it, by
# a bounded amount each: measuring is not free, and a crawl uses a host's file for each of
# its pages).
MEASURE_EVERY = 16

K = TypeVar("K")
V = TypeVar("V")


class LruBudget(Generic[K, V]):
    """Values by key, each charged the bytes ``cost`` measures of it, within ``max_count``
    values and ``max_bytes`` in all; the least recently used are dropped first, and the
    value just put is always kept (a single one larger than the budget included). A value
    is measured again at every :data:`MEASURE_EVERY`-th use."""

    __slots__ = ("_cost", "_entries", "_max_bytes", "_max_count", "bytes")

    def __init__(self, max_count: int, max_bytes: int, cost: Callable[[V], int]) -> None:
        # key -> (value, bytes charged, uses since it was measured), least recently used
        # first
        self._entries: dict[K, tuple[V, int, int]] = {}
        self._max_count = max(1, max_count)
        self._max_bytes = max_bytes
        self._cost = cost
        self.bytes = 0  # what the values kept are charged, in all

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, key: K, value: V) -> None:
        """``value`` kept for ``key``, measured now, as the most recently used (charged
        anew when it was kept already)."""
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        cost = self._cost(value)
        while entries and (len(entries) >= self._max_count
                           or self.bytes + cost > self._max_bytes):
            self.bytes -= entries.pop(next(iter(entries)))[1]
        entries[key] = (value, cost, 0)
        self.bytes += cost

    def get(self, key: K) -> V | None:
        """The value of ``key``, made the most recently used (and measured again at every
        :data:`MEASURE_EVERY`-th use: what its lookups grew is charged then); ``None`` when
        it is not kept."""
        entries = self._entries
        entry = entries.pop(key, None)
        if entry is None:
            return None
        value, cost, uses = entry
        if uses >= MEASURE_EVERY:
            self.bytes -= cost
            self.put(key, value)
        else:
            entries[key] = (value, cost, uses + 1)
        return value


# Compiled /.well-known/tdmrep.json files, by origin or host (polite mcp's fetches, the
# crawler's pages). A file of 9,571 wildcard locations (468 KB, under the 512 KiB cap) holds
# 2 MB compiled; most sites have none, and are remembered as NO_TDMREP.
MAX_TDMREP_SITES = 10_000
TDMREP_MEMORY_BYTES = 64 * 1024 * 1024
_TDMREP_ENTRY_BYTES = 256  # a site remembered: its name and its entry
# What a site without a tdmrep.json (or whose file may not be read) is remembered as: it
# states no preference.
NO_TDMREP = TdmRep([], [])


def _tdmrep_cost(tdmrep: TdmRep) -> int:
    return _TDMREP_ENTRY_BYTES + (0 if tdmrep is NO_TDMREP else tdmrep.footprint)


def tdmrep_files(max_sites: int = MAX_TDMREP_SITES,
                 max_bytes: int = TDMREP_MEMORY_BYTES) -> LruBudget[str, TdmRep]:
    """Compiled tdmrep.json files by site, each charged what it holds."""
    return LruBudget(max_sites, max_bytes, _tdmrep_cost)

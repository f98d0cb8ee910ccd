"""The in-process store: dicts, for tests and single short-lived processes."""

from __future__ import annotations

from collections.abc import Callable

from polite.core.politeness.rules import SlotClaim, claim_slot
from polite.storage.base import RobotsRecord

__all__ = ["MemoryStore"]


class MemoryStore:
    """Nothing survives the process. ``clock`` is injected (``time.monotonic`` by default at
    the edges); the store never reads time itself."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last_start: dict[str, float] = {}
        self._backoff: dict[str, float] = {}
        self._delays: dict[str, float] = {}
        self._robots: dict[str, RobotsRecord] = {}

    async def clock(self) -> float:
        return self._clock()

    async def claim(self, host: str, interval_s: float, now: float | None = None) -> SlotClaim:
        now = self._clock() if now is None else now
        answer = claim_slot(self._last_start.get(host), self._backoff.get(host), interval_s, now)
        if answer.granted:
            self._last_start[host] = answer.at
        return answer

    async def peek(self, host: str, interval_s: float, now: float | None = None) -> SlotClaim:
        now = self._clock() if now is None else now
        return claim_slot(self._last_start.get(host), self._backoff.get(host), interval_s, now)

    async def back_off(self, host: str, until: float) -> None:
        self._backoff[host] = max(until, self._backoff.get(host, until))

    async def get_delay(self, domain: str) -> float | None:
        return self._delays.get(domain)

    async def set_delay(self, domain: str, delay_s: float) -> None:
        self._delays[domain] = delay_s

    async def delete_delay(self, domain: str) -> None:
        self._delays.pop(domain, None)

    async def all_delays(self) -> dict[str, float]:
        return dict(self._delays)

    async def load_robots(self, origin: str) -> RobotsRecord | None:
        return self._robots.get(origin)

    async def save_robots(self, record: RobotsRecord) -> None:
        self._robots[record.origin] = record

    async def close(self) -> None:
        return None

"""What the service needs from storage, as small protocols; each backend passes one shared
contract suite (tests/storage/test_contract.py).

Times are seconds on the store's clock: a store that is shared between nodes (Redis) uses
its own server time, so that nodes with different clocks still agree on a slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from polite.core.politeness.rules import SlotClaim

__all__ = ["DelayStore", "RobotsRecord", "RobotsStore", "SlotClaim", "SlotStore", "Store"]


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

    async def clock(self) -> float:
        """The store's own time, in seconds."""
        ...


class DelayStore(Protocol):
    async def get_delay(self, domain: str) -> float | None: ...

    async def set_delay(self, domain: str, delay_s: float) -> None: ...

    async def delete_delay(self, domain: str) -> None: ...

    async def all_delays(self) -> dict[str, float]: ...


class RobotsStore(Protocol):
    async def load_robots(self, origin: str) -> RobotsRecord | None: ...

    async def save_robots(self, record: RobotsRecord) -> None: ...


class Store(SlotStore, DelayStore, RobotsStore, Protocol):
    """Everything at once: what ``polite serve`` is given."""

    async def close(self) -> None: ...

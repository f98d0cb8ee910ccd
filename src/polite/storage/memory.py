"""The in-process store: dicts, for tests and single short-lived processes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from polite.core.politeness.rules import (
    HostClaim,
    SlotClaim,
    average_response_time,
    claim_first,
    claim_slot,
    shifted_start,
)
from polite.storage.base import HostActivity, HostFacts, RobotsRecord

__all__ = ["MemoryStore"]


class MemoryStore:
    """Nothing survives the process. ``clock`` is injected (``time.monotonic`` by default at
    the edges); the store never reads time itself."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last_start: dict[str, float] = {}
        self._backoff: dict[str, float] = {}
        self._leases: dict[str, float] = {}  # host -> when its request in flight's lease ends
        self._delays: dict[str, float] = {}
        self._robots_delays: dict[str, float] = {}
        self._robots: dict[str, RobotsRecord] = {}
        self._response_s: dict[str, float] = {}
        self._pages: OrderedDict[str, bytes] = OrderedDict()
        self._page_bytes = 0
        self._activity: dict[str, HostActivity] = {}
        self._nodes: dict[str, tuple[str, float]] = {}

    async def clock(self) -> float:
        return self._clock()

    async def check(self) -> None:
        return None  # this process's memory: there while the process is

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

    async def shift_start(self, host: str, late_s: float) -> None:
        if host in self._last_start and late_s > 0:
            self._last_start[host] = shifted_start(self._last_start[host], late_s,
                                                   self._clock())

    async def claim_batch(self, requests: Sequence[tuple[str, tuple[float, ...]]], *,
                          take: bool, lease_s: float | None = None) -> list[HostClaim]:
        now = self._clock()
        answers = []
        leases = self._leases
        for host, intervals in requests:
            answer = claim_first(self._last_start.get(host), self._backoff.get(host),
                                 intervals, now, leases.get(host))
            if take and answer.granted >= 0:
                self._last_start[host] = now
                if lease_s is not None:
                    leases[host] = now + lease_s
                elif host in leases:
                    del leases[host]  # lapsed
            answers.append(answer)
        return answers

    async def host_facts(self, hosts: Sequence[str]) -> list[HostFacts]:
        # A loop, not a comprehension: in Python 3.11 that is a function made and called,
        # and a batch is mostly one host (the proxy's every request).
        facts = []
        for host in hosts:
            facts.append(HostFacts(self._delays.get(host), self._response_s.get(host)))
        return facts

    async def note_response(self, host: str, elapsed_s: float | None,
                            pause_s: float | None, *, ends_lease: bool = False) -> None:
        if elapsed_s is not None:
            self._response_s[host] = average_response_time(self._response_s.get(host),
                                                            elapsed_s)
        if pause_s is not None:
            await self.back_off(host, self._clock() + pause_s)
        if ends_lease:
            self._leases.pop(host, None)

    async def get_delay(self, domain: str) -> float | None:
        return self._delays.get(domain)

    async def set_delay(self, domain: str, delay_s: float) -> None:
        self._delays[domain] = delay_s

    async def delete_delay(self, domain: str) -> None:
        self._delays.pop(domain, None)

    async def all_delays(self) -> dict[str, float]:
        return dict(self._delays)

    async def set_robots_delay(self, host: str, delay_s: float) -> None:
        self._robots_delays[host] = delay_s

    async def all_robots_delays(self) -> dict[str, float]:
        return dict(self._robots_delays)

    async def load_robots(self, origin: str) -> RobotsRecord | None:
        return self._robots.get(origin)

    async def save_robots(self, record: RobotsRecord) -> None:
        self._robots[record.origin] = record

    async def close(self) -> None:
        return None

    async def page_get(self, key: str) -> bytes | None:
        blob = self._pages.get(key)
        if blob is not None:
            self._pages.move_to_end(key)
        return blob

    async def page_put(self, key: str, blob: bytes, *, max_total_bytes: int) -> None:
        await self.page_delete(key)
        self._pages[key] = blob
        self._page_bytes += len(blob)
        while self._page_bytes > max_total_bytes and self._pages:
            _, victim = self._pages.popitem(last=False)
            self._page_bytes -= len(victim)

    async def page_delete(self, key: str) -> None:
        old = self._pages.pop(key, None)
        if old is not None:
            self._page_bytes -= len(old)

    async def page_usage(self) -> tuple[int, int]:
        return len(self._pages), self._page_bytes

    async def add_activity(self, rows: Sequence[HostActivity]) -> None:
        for row in rows:
            old = self._activity.get(row.host)
            self._activity[row.host] = row if old is None else old.merged(row)

    async def all_activity(self) -> list[HostActivity]:
        return list(self._activity.values())

    async def node_beat(self, node: str, info: str, ttl_s: float) -> None:
        self._nodes[node] = (info, self._clock() + ttl_s)

    async def live_nodes(self) -> dict[str, str]:
        now = self._clock()
        return {node: info for node, (info, until) in self._nodes.items() if until > now}

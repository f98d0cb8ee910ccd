"""The operator's dashboard: its JSON (hosts paged on the server, the header's figures), its
live feed (server-sent events) and its page (HTML, CSS and JavaScript shipped in the
package: no CDN, no build step).

Sorting and filtering run over every known host (the store's activity rows and the hosts
with a configured delay), from figures kept per host, so 10,000 hosts cost one read of the
store a second; only the rows of the page asked for are looked at closely (robots.txt as
known, the delays in force, the slot).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from polite.core.politeness.rules import earliest_in_windows
from polite.core.robots.lifecycle import AllowAll, DisallowAll, Parsed
from polite.fetch.activity import Activity, delay_source, robots_code
from polite.fetch.cache import PageCache
from polite.fetch.politeness import Politeness
from polite.storage.base import HostActivity, Store

__all__ = ["MAX_PAGE_ROWS", "SORTS", "STATES", "Dashboard", "HostQuery", "static_file"]

MAX_PAGE_ROWS = 500  # rows in one page of hosts
# The columns hosts can be sorted by, each with its key over the figures kept per host.
SORTS = ("host", "allowed", "robots_refused", "delay_refused", "cache_hits", "delay",
         "wakes", "last_seen", "robots", "queued")
# What the state filter keeps.
STATES = ("all", "backoff", "refused", "busy", "operator")
_ISSUES_SHOWN = 5  # robots.txt issues listed in a row (the count is always whole)


def static_file(name: str) -> bytes:
    """One of the page's files, as shipped in the package."""
    return (resources.files("polite.api") / "static" / name).read_bytes()


@dataclass(frozen=True, slots=True)
class HostQuery:
    """A page of hosts: sorted by one of :data:`SORTS`, filtered by a host substring and
    one of :data:`STATES`."""

    sort: str = "last_seen"
    descending: bool = True
    text: str = ""
    state: str = "all"
    offset: int = 0
    limit: int = 50


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


class Dashboard:
    """What the page shows, assembled from the node's :class:`Activity`, the store and the
    politeness driver."""

    def __init__(self, politeness: Politeness, store: Store, *,
                 cache: PageCache | None = None, env: Mapping[str, object] | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self._politeness = politeness
        self._store = store
        self._cache = cache
        self._env = dict(env or {})
        self.activity: Activity = politeness.activity
        self._clock = clock

    async def _now(self) -> float:
        return await self._store.clock()

    async def _known(self) -> tuple[list[HostActivity], dict[str, float]]:
        rows = {row.host: row for row in await self.activity.hosts()}
        configured = await self._store.all_delays()
        for host in configured:
            if host not in rows:
                rows[host] = HostActivity(host)
        return list(rows.values()), configured

    async def hosts(self, query: HostQuery) -> dict[str, object]:
        """One page of hosts, every row in full, and how many hosts matched."""
        now = await self._now()
        rows, configured = await self._known()
        busy = self.activity.queued + self.activity.in_flight
        default_s = self._politeness.default_delay_s
        text = query.text.strip().lower()
        state = query.state

        def keep(row: HostActivity) -> bool:
            if text and text not in row.host:
                return False
            if state == "backoff":
                return row.backoff_until is not None and row.backoff_until > now
            if state == "refused":
                return row.robots_refused + row.delay_refused > 0
            if state == "busy":
                return busy[row.host] > 0
            if state == "operator":
                return row.host in configured
            return True

        def delay_of(row: HostActivity) -> float:
            if row.delay_s is not None:
                return row.delay_s
            return configured.get(row.host, default_s)

        keys: dict[str, Callable[[HostActivity], Any]] = {
            "host": lambda r: r.host,
            "allowed": lambda r: r.allowed,
            "robots_refused": lambda r: r.robots_refused,
            "delay_refused": lambda r: r.delay_refused,
            "cache_hits": lambda r: r.cache_hits,
            "delay": delay_of,
            "wakes": lambda r: max(0.0, (r.next_at or 0.0) - now),
            "last_seen": lambda r: r.last_seen or 0.0,
            "robots": lambda r: r.robots_status or "",
            "queued": lambda r: busy[r.host],
        }
        key = keys[query.sort]
        matched = [row for row in rows if keep(row)]
        # The host breaks ties, so that pages do not shuffle between ticks.
        matched.sort(key=lambda r: r.host)
        matched.sort(key=key, reverse=query.descending)
        page = matched[query.offset:query.offset + query.limit]
        return {"total": len(matched), "known": len(rows), "offset": query.offset,
                "limit": query.limit, "sort": query.sort,
                "order": "desc" if query.descending else "asc", "now": now,
                "rows": await self._detail(page, configured, now)}

    async def _detail(self, page: list[HostActivity], configured: dict[str, float],
                      now: float) -> list[dict[str, object]]:
        origins = [row.origin or f"http://{row.host}" for row in page]
        standings = await self._politeness.standing(origins)
        activity = self.activity
        out: list[dict[str, object]] = []
        for row, origin, standing in zip(page, origins, standings, strict=True):
            delays, slot, state = standing.delays, standing.slot, standing.robots
            held = slot.held_until
            source = delay_source(delays)
            if held is not None:
                source = "back-off"
            elif delays.windows or delays.forbidden:
                opens = earliest_in_windows(now, delays.windows, delays.forbidden)
                if opens is None or opens > now:
                    source = "Visit-time window"
            wakes_at = slot.ats[0]
            robots: dict[str, object] | None = None
            if state is not None:
                robots = {"code": robots_code(state), "size": standing.robots_bytes,
                          "fetchedAt": state.fetched_at,
                          "expiresAt": state.retry_at if isinstance(state, DisallowAll)
                          else state.expires_at,
                          "kind": type(state).__name__, "issues": 0, "issueLines": []}
                if isinstance(state, Parsed):
                    issues = state.robots.issues
                    robots["issues"] = len(issues)
                    robots["issueLines"] = [str(issue) for issue in issues[:_ISSUES_SHOWN]]
                    robots["truncated"] = state.robots.truncated
                elif isinstance(state, AllowAll | DisallowAll):
                    robots["reason"] = state.reason
            backoff = None
            if held is not None:
                backoff = {"until": held, "reason": row.backoff_reason or "429 or 503"}
            out.append({
                "host": row.host, "origin": origin, "robots": robots,
                "delayMs": round(delays.interval_s * 1000), "delaySource": source,
                "configuredMs": None if row.host not in configured
                else round(configured[row.host] * 1000),
                "wakesAt": wakes_at,
                # judged by the store's time of the look, so that a free slot says 0
                "wakesInMs": 0 if slot.granted >= 0
                else max(0, round((wakes_at - slot.now) * 1000)),
                "backoff": backoff,
                "queued": activity.queued[row.host], "inFlight": activity.in_flight[row.host],
                "allowed": row.allowed, "robotsRefused": row.robots_refused,
                "delayRefused": row.delay_refused, "cacheHits": row.cache_hits,
                "lastSeen": row.last_seen})
        return out

    async def summary(self) -> dict[str, object]:
        """The header: this node's rates and status codes over time, the cache, the store
        and the nodes sharing it."""
        activity = self.activity
        cache: dict[str, object] | None = None
        if self._cache is not None:
            stats = self._cache.stats
            pages, size = await self._cache.usage()
            cache = {"hits": stats.hits, "misses": stats.misses,
                     "revalidations": stats.revalidated, "hitRatio": _round(stats.ratio),
                     "pages": pages, "bytes": size}
        nodes = await activity.nodes()
        return {"node": activity.summary(), "timeline": activity.timeline(120),
                "cache": cache, "store": self._env.get("store"),
                "mode": self._env.get("mode"), "agent": self._politeness.agent,
                "nodes": [{"name": name, **info} for name, info in sorted(nodes.items())],
                "now": await self._now()}

    async def events(self, query: HostQuery, every_s: float = 1.0) -> AsyncIterator[bytes]:
        """Server-sent events: the header and the page of hosts, every ``every_s``."""
        yield b"retry: 2000\n\n"
        while True:
            tick = {"summary": await self.summary(), "hosts": await self.hosts(query)}
            yield b"event: tick\ndata: " + json.dumps(tick).encode() + b"\n\n"
            await asyncio.sleep(every_s)

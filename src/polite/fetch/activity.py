"""What a node has seen, for the operator's dashboard, ``/trace`` and ``/metrics``.

Per node (memory): the last exchanges (a bounded ring), requests per second and status
codes over the last minutes, requests queued and in flight. In the store (shared by the
nodes of one Redis, or the processes of one SQLite file): per-host counters and the facts
of the latest decision, flushed about once a second in one step (a kill loses at most that
second's counts), and each node's heartbeat. Recording is a few dictionary operations, so
the proxy's hot path does not wait for the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from polite.core.politeness.rules import Delays
from polite.core.politeness.values import WaitSource
from polite.core.robots.lifecycle import AllowAll, DisallowAll, Parsed, RobotsState
from polite.storage.base import COUNTERS, FACTS, ActivityStore, HostActivity, raise_if_cancelled

__all__ = [
    "CAUSES",
    "TIMELINE_S",
    "Activity",
    "Watch",
    "delay_source",
    "robots_code",
]

# What became of a request: counted per host (the first four) and node-wide (all).
CAUSES = ("allowed", "robots", "delay", "cache", "invalid", "error")
_COUNTER_OF = {"allowed": "allowed", "robots": "robots_refused", "delay": "delay_refused",
               "cache": "cache_hits"}
_INDEX = {name: index for index, name in enumerate(COUNTERS)}
_COUNTER_INDEX = {cause: _INDEX[name] for cause, name in _COUNTER_OF.items()}
TIMELINE_S = 300  # seconds of per-second status counts kept for the chart
_RATE_WINDOW_S = 5  # "requests per second now" is the mean over this many seconds
MAX_TRACE_URL = 2000  # characters of a URL kept in the trace

# The dashboard's short names of the sources of a host's spacing
_SOURCES = {WaitSource.OPERATOR: "operator", WaitSource.CRAWL_DELAY: "Crawl-delay",
            WaitSource.REQUEST_RATE: "Request-rate", WaitSource.IP_DELAY: "Ip-delay",
            WaitSource.IP_RATE: "Ip-rate", WaitSource.ADAPTIVE: "adaptive",
            WaitSource.DEFAULT: "default"}


def delay_source(delays: Delays) -> str:
    """The short name of the source that set ``delays.interval_s``: operator, Crawl-delay,
    Request-rate, Ip-delay, Ip-rate, adaptive or default."""
    source = delays.reason()
    return _SOURCES.get(source, str(source))


def robots_code(state: RobotsState) -> str:
    """A robots.txt state in a few characters: ``200``, ``200 stale``, ``404``, ``HTML``,
    ``503``, ``unreachable``."""
    match state:
        case Parsed():
            return f"{state.status} stale" if state.stale else str(state.status)
        case AllowAll(html=True):
            return "HTML"
        case AllowAll() | DisallowAll() if state.status:
            return str(state.status)
        case AllowAll():
            return "no file"  # a state stored before states kept their status
        case DisallowAll():
            return "unreachable"
    return "?"


class Watch:
    """One exchange through the proxy as the dashboard and ``/trace`` see it, from its
    arrival (:meth:`Activity.watch`) through its decision (:meth:`Activity.decided`) to its
    end (:meth:`Activity.ended`): the proxy tells the activity those three things and
    nothing else. Once ended it is the trace's entry, as ``GET /trace`` shows it, not copied
    into another value (a named tuple made for it was 3,400 instructions of every proxied
    request). (Slots, not a dataclass: one is made per request.)"""

    __slots__ = ("at", "decision", "delay_ms", "duration_ms", "going", "held", "host",
                 "method", "started", "status", "url")

    def __init__(self, at: float, started: float, method: str, url: str, host: str,
                 held: bool) -> None:
        self.at = at  # wall-clock seconds when it arrived
        self.started = started  # monotonic seconds, for its duration
        self.method = method
        self.url = url  # in the trace, cut to MAX_TRACE_URL characters
        self.host = host
        self.held = held  # counted as queued: it may wait for its slot, not yet decided
        self.going = False  # counted as in flight: allowed, on its way to the origin
        # what became of it, once ended
        self.decision = ""  # one of CAUSES
        self.status = 0
        self.delay_ms = 0  # held before it went (wait modes), or the wait a 429 told
        self.duration_ms = 0.0

    def as_json(self) -> dict[str, object]:
        return {"time": self.at, "method": self.method, "url": self.url,
                "decision": self.decision, "status": self.status, "delayMs": self.delay_ms,
                "durationMs": round(self.duration_ms, 3)}


# By the status's first digit (0, none: 1xx, as ever; from 600 on: 5xx).
_CLASSES = ("1xx", "1xx", "2xx", "3xx", "4xx", "5xx")
_REFUSALS = frozenset(("robots", "delay"))  # decisions counted as "refused", not by status


class Activity:
    """One per node, shared by the proxy, the REST API and the politeness driver."""

    def __init__(self, store: ActivityStore | None = None, *, node: str = "local",
                 trace_size: int = 1000, wall: Callable[[], float] = time.time,
                 info: dict[str, object] | None = None) -> None:
        self._store = store
        self.node = node
        self._wall = wall
        self.started = wall()
        self.trace: deque[Watch] = deque(maxlen=max(0, trace_size))
        self.trace_size = max(0, trace_size)
        self.info = dict(info or {})  # what the heartbeat tells the other nodes
        # Plain dictionaries, counted with .get: Counter defines __delitem__ in Python, so
        # its every assignment is a Python call too (about 1,000 instructions a count).
        self.totals: dict[str, int] = {}  # node-wide, by cause
        self.statuses: dict[str, int] = {}  # node-wide, by status class
        self.requests = 0
        self.queued: Counter[str] = Counter()
        self.in_flight: Counter[str] = Counter()
        self._timeline: deque[tuple[int, dict[str, int]]] = deque(maxlen=TIMELINE_S)
        # Not yet in the store: host -> counters, host -> facts.
        self._counts: dict[str, list[int]] = {}
        self._facts: dict[str, dict[str, Any]] = {}
        self._snapshot: tuple[float, list[HostActivity]] | None = None

    # -- recording (no I/O) -----------------------------------------------------------

    def count(self, host: str, cause: str) -> None:
        """A decision about a request to ``host``: one of :data:`CAUSES`."""
        totals = self.totals
        totals[cause] = totals.get(cause, 0) + 1
        index = _COUNTER_INDEX.get(cause)
        if index is None or not host:
            return
        counts = self._counts.get(host)
        if counts is None:
            counts = self._counts[host] = [0] * len(COUNTERS)
        counts[index] += 1
        facts = self._facts.get(host)
        if facts is None:
            self._facts[host] = {"last_seen": self._wall()}
        else:
            facts["last_seen"] = self._wall()

    def note(self, host: str, **facts: Any) -> None:
        """Facts of the latest decision about ``host`` (see :class:`HostActivity`); a
        ``delays`` fact (:class:`Delays`) stands for ``delay_s`` and ``delay_source``, worked
        out only when the facts are read (a decision should not pay for naming its source)."""
        known = self._facts.get(host)
        if known is None:
            self._facts[host] = facts
        else:
            known.update(facts)

    def watch(self, method: str, url: str, host: str, *, held: bool) -> Watch:
        """A request arrives; ``held`` when it may wait for its host's slot (wait and
        ordered modes): it is counted as queued until it is decided or ends."""
        watch = Watch(self._wall(), time.monotonic(), method, url, host, held)
        if held:
            self._queue(host, 1)
        return watch

    def decided(self, watch: Watch, cause: str) -> None:
        """What politeness (or the cache) made of it, one of :data:`CAUSES`: counted for
        its host; an allowed request is in flight from then until it ends."""
        self.count(watch.host, cause)
        if watch.held:
            watch.held = False
            self._queue(watch.host, -1)
        if cause == "allowed":
            watch.going = True
            in_flight = self.in_flight
            # .get: a host's count goes when it falls to 0, and Counter's __missing__ is a
            # Python call each time it comes back
            in_flight[watch.host] = in_flight.get(watch.host, 0) + 1

    def ended(self, watch: Watch, decision: str, status: int, delay_ms: int) -> None:
        """It is over, however it ended (answered, refused, failed, or its client gone):
        no longer queued or in flight, and into the trace."""
        if watch.held:
            watch.held = False
            self._queue(watch.host, -1)
        if watch.going:  # no longer in flight: its host's count goes when it falls to 0
            watch.going = False
            in_flight = self.in_flight
            left = in_flight.get(watch.host, 0) - 1
            if left > 0:
                in_flight[watch.host] = left
            else:
                in_flight.pop(watch.host, None)
        # Into the trace and the per-second status counts, in place: once a request.
        if self.trace_size:
            if len(watch.url) > MAX_TRACE_URL:
                watch.url = watch.url[:MAX_TRACE_URL] + "…"
            watch.decision = decision
            watch.status = status
            watch.delay_ms = delay_ms
            watch.duration_ms = (time.monotonic() - watch.started) * 1000
            self.trace.append(watch)
        self.requests += 1
        kind = ("refused" if decision in _REFUSALS else  # not min() and max(): two calls
                _CLASSES[status // 100] if status < 600 else "5xx")
        statuses = self.statuses
        statuses[kind] = statuses.get(kind, 0) + 1
        second = int(self._wall())
        timeline = self._timeline
        if not timeline or timeline[-1][0] != second:
            timeline.append((second, {}))
        counts = timeline[-1][1]
        counts[kind] = counts.get(kind, 0) + 1

    def _queue(self, host: str, change: int) -> None:
        """A request to ``host`` starts (1) or stops (-1) being held for its slot (wait
        and ordered modes)."""
        queued = self.queued
        queued[host] += change
        if queued[host] <= 0:
            del queued[host]

    # -- reading --------------------------------------------------------------------------

    def rate_now(self) -> float:
        """Requests per second over the last few whole seconds."""
        now = int(self._wall())
        recent = sum(sum(c.values()) for second, c in self._timeline
                     if now - _RATE_WINDOW_S <= second < now)
        return recent / _RATE_WINDOW_S

    def rate_average(self) -> float:
        """Requests per second since the node started."""
        return self.requests / max(1.0, self._wall() - self.started)

    def timeline(self, seconds: int = 120) -> list[dict[str, object]]:
        """Per second, oldest first, the last ``seconds``: ``{"t", "2xx", ..., "refused"}``
        (seconds with nothing in them included, as zeros)."""
        now = int(self._wall())
        by_second = dict(self._timeline)
        return [{"t": second, **by_second.get(second, {})}
                for second in range(now - seconds + 1, now + 1)]

    def summary(self) -> dict[str, object]:
        """This node's header figures (also what its heartbeat carries)."""
        return {"node": self.node, "started": self.started,
                "rpsNow": round(self.rate_now(), 2), "rpsAverage": round(self.rate_average(), 3),
                "requests": self.requests, "decisions": dict(self.totals),
                "statuses": dict(self.statuses), "queued": sum(self.queued.values()),
                "inFlight": sum(self.in_flight.values()), **self.info}

    def pending(self) -> list[HostActivity]:
        """What was recorded since the last flush, one row a host."""
        hosts = self._counts.keys() | self._facts.keys()
        zero = [0] * len(COUNTERS)
        rows = []
        for host in hosts:
            given: dict[str, Any] = dict(zip(COUNTERS, self._counts.get(host, zero),
                                             strict=True))
            facts = self._facts.get(host)
            if facts:
                given.update(facts)
                delays = given.pop("delays", None)
                if delays is not None:
                    given["delay_s"] = delays.interval_s
                    if given.get("delay_source") is None:
                        given["delay_source"] = delay_source(delays)
            rows.append(HostActivity(host, **given))
        return rows

    async def hosts(self, max_age_s: float = 1.0) -> list[HostActivity]:
        """Every known host: the store's rows with this node's unflushed ones merged in.
        One read of the store serves every caller for ``max_age_s``."""
        now = self._wall()
        if self._snapshot is None or now - self._snapshot[0] > max_age_s:
            stored = [] if self._store is None else await self._store.all_activity()
            self._snapshot = (now, stored)
        rows = {row.host: row for row in self._snapshot[1]}
        for row in self.pending():
            old = rows.get(row.host)
            rows[row.host] = row if old is None else old.merged(row)
        return list(rows.values())

    # -- the store ------------------------------------------------------------------------

    async def flush(self) -> None:
        """Write what was recorded since the last flush (kept for the next one when the
        store fails)."""
        if self._store is None or not (self._counts or self._facts):
            return
        rows = self.pending()
        self._counts, self._facts = {}, {}
        try:
            await self._store.add_activity(rows)
        except BaseException:
            for row in rows:  # back in, under anything recorded meanwhile
                counts = self._counts.setdefault(row.host, [0] * len(COUNTERS))
                for i, name in enumerate(COUNTERS):
                    counts[i] += getattr(row, name)
                facts = {k: getattr(row, k) for k in FACTS if getattr(row, k) is not None}
                self._facts[row.host] = {**facts, **self._facts.get(row.host, {})}
            raise
        self._snapshot = None

    async def beat(self, ttl_s: float) -> None:
        if self._store is not None:
            await self._store.node_beat(self.node, json.dumps(self.summary()), ttl_s)

    async def nodes(self) -> dict[str, dict[str, object]]:
        """The live nodes sharing the store and their summaries (this one at least)."""
        found: dict[str, dict[str, object]] = {}
        if self._store is not None:
            for node, info in (await self._store.live_nodes()).items():
                with contextlib.suppress(ValueError):
                    found[node] = json.loads(info)
        found[self.node] = self.summary()
        return found

    async def run(self, every_s: float = 1.0) -> None:
        """Flush and beat every ``every_s`` until cancelled (then a last flush, and a beat
        that expires at once)."""
        try:
            while True:
                try:
                    await self.flush()
                    await self.beat(ttl_s=max(5.0, 5 * every_s))
                except Exception:  # a store that hiccups is tried again at the next beat
                    pass
                # A store's client may lose a cancel that lands in a round trip, or raise
                # it as its own error: the loop ends all the same.
                raise_if_cancelled()
                await asyncio.sleep(every_s)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.flush())
                # The heartbeat ends with the node: it leaves the others' lists at once.
                await asyncio.shield(self.beat(ttl_s=0.001))

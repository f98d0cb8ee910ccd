"""When may the next request to a host go: the arithmetic, pure and driven by ``now``.

DESIGN.md, "Politeness: when may a request go": the spacing is the largest of the operator's
delay for the host, the robots Crawl-delay (capped), the interval of Request-rate, REGP's
Ip-delay / Ip-rate, a brace block's delay for the path, an adaptive delay from the host's
response times and any back-off after 429/503; the default applies where neither the
operator nor the site set one. Visit-time and Time-forbidden move the earliest time into an
allowed window. The same arithmetic runs inside Redis as a Lua script; the contract tests
run one table of cases against both.
"""

from __future__ import annotations

from typing import NamedTuple

from polite.core.politeness.values import Allowed, RefusalReason, Refused, WaitSource, WaitUntil
from polite.core.robots.model import AgentRules
from polite.core.robots.values import DailyWindow, TimeRange, TimeWindow

__all__ = [
    "BACKOFF_STATUSES",
    "DEFAULT_DELAY_S",
    "LEASE_RECHECK_S",
    "MAX_CRAWL_DELAY_S",
    "Delays",
    "HostClaim",
    "SlotClaim",
    "average_response_time",
    "backoff_until",
    "claim_first",
    "claim_slot",
    "delays_for",
    "earliest_in_windows",
    "next_slot",
]

# Seed 001 chose one second where neither the operator nor the site says otherwise.
DEFAULT_DELAY_S = 1.0
# A Crawl-delay beyond this is read as this (DESIGN.md: "capped, configurable").
MAX_CRAWL_DELAY_S = 60.0
# The adaptive delay is this many times the host's recent response time.
ADAPTIVE_FACTOR = 1.0
# How far one new response time moves a host's running average (exponential weighting).
RESPONSE_TIME_WEIGHT = 0.3
# A 429 or 503 without a usable Retry-After pauses the host this long; a Retry-After is
# honoured up to a day.
DEFAULT_BACKOFF_S = 60.0
BACKOFF_STATUSES = frozenset((429, 503))  # the answers that pause a host
MAX_BACKOFF_S = 86_400.0
# A host whose request is in flight (its lease held, see claim_first) is asked about again
# this often at the most: when the response ends the lease is not known in advance, and
# the store of another process cannot wake the asker.
LEASE_RECHECK_S = 0.05


class Delays(NamedTuple):
    """Every source of spacing for one host, agent and path, in seconds; ``None`` = unset.
    (A named tuple: one is made per decision, and frozen dataclasses are slow to make.)"""

    configured_s: float | None = None
    crawl_delay_s: float | None = None
    request_rate_s: float | None = None
    ip_delay_s: float | None = None
    ip_rate_s: float | None = None
    adaptive_s: float | None = None
    default_s: float = DEFAULT_DELAY_S
    windows: tuple[TimeWindow, ...] = ()
    forbidden: tuple[TimeWindow, ...] = ()
    lines: tuple[tuple[str, int, bool], ...] = ()  # AgentRules.delay_lines

    @property
    def robots_s(self) -> float | None:
        """The largest spacing the site itself asks for."""
        crawl, rate = self.crawl_delay_s, self.request_rate_s
        ip_delay, ip_rate = self.ip_delay_s, self.ip_rate_s
        if crawl is None and rate is None and ip_delay is None and ip_rate is None:
            return None  # most sites ask for none: said at once
        found = None
        for value in (crawl, rate, ip_delay, ip_rate):
            if value is not None and (found is None or value > found):
                found = value
        return found

    @property
    def interval_s(self) -> float:
        """The spacing to keep: the largest source, the default when nobody set one."""
        robots = self.robots_s
        configured = self.configured_s
        if configured is None and robots is None:
            interval = self.default_s
        else:  # the larger, without max(): a builtin's call
            given, asked = configured or 0.0, robots or 0.0
            interval = given if given >= asked else asked
        adaptive = self.adaptive_s
        return interval if adaptive is None or adaptive <= interval else adaptive

    def reason(self) -> WaitSource:
        """Which source set :attr:`interval_s` (a brace block's own delay by its field)."""
        interval = self.interval_s
        if self.configured_s is not None and self.configured_s == interval:
            return WaitSource.OPERATOR
        for source, value in ((WaitSource.CRAWL_DELAY, self.crawl_delay_s),
                              (WaitSource.REQUEST_RATE, self.request_rate_s),
                              (WaitSource.IP_DELAY, self.ip_delay_s),
                              (WaitSource.IP_RATE, self.ip_rate_s)):
            if value is not None and value == interval:
                return source
        if self.adaptive_s is not None and self.adaptive_s == interval:
            return WaitSource.ADAPTIVE
        return WaitSource.DEFAULT

    def source(self) -> tuple[WaitSource, int | None]:
        """:meth:`reason` with the robots.txt line it was read from, when the site set it; a
        brace block's own delay for the path is named as such (``BRACE_BLOCK``)."""
        found = self.reason()
        key = _FIELD_KEYS.get(found)
        if key is not None:
            for field, line, in_block in self.lines:
                if field == key:
                    return (WaitSource.BRACE_BLOCK if in_block else found), line
        return found, None


_FIELD_KEYS = {WaitSource.CRAWL_DELAY: "crawl-delay", WaitSource.REQUEST_RATE: "request-rate",
               WaitSource.IP_DELAY: "ip-delay", WaitSource.IP_RATE: "ip-rate"}


def delays_for(
    rules: AgentRules,
    *,
    configured_s: float | None = None,
    default_s: float = DEFAULT_DELAY_S,
    max_crawl_delay_s: float = MAX_CRAWL_DELAY_S,
    response_time_s: float | None = None,
    adaptive_factor: float = ADAPTIVE_FACTOR,
) -> Delays:
    """The :class:`Delays` for an agent's robots fields and the operator's settings."""
    crawl = rules.crawl_delay_s
    rate = rules.request_rate
    ip_delay = rules.ip_delay_s
    ip_rate = rules.ip_rate
    cap = max_crawl_delay_s
    return Delays(
        configured_s,
        None if crawl is None else min(crawl, cap),
        None if rate is None else min(rate.interval_s, cap),
        None if ip_delay is None else min(ip_delay, cap),
        None if ip_rate is None else min(ip_rate.interval_s, cap),
        (None if response_time_s is None or adaptive_factor <= 0
         else min(response_time_s * adaptive_factor, cap)),
        default_s,
        rules.visit_time,
        rules.time_forbidden,
        rules.delay_lines,
    )


def earliest_in_windows(now: float, windows: tuple[TimeWindow, ...],
                        forbidden: tuple[TimeWindow, ...]) -> float | None:
    """The first instant at or after ``now`` inside a Visit-time window (any, when none is
    given) and outside every Time-forbidden period; ``None`` when there is none within a
    week (a period that never ends)."""
    at = now
    for _ in range(64):  # each step moves past one window edge; a week has few of them
        moved = False
        if windows and not any(w.contains(at) for w in windows):
            at = min(_next_open(w, at) for w in windows)
            moved = True
        for period in forbidden:
            if period.contains(at):
                at = period.end if isinstance(period, TimeRange) else period.next_end(at)
                moved = True
        if not moved:
            return at
        if at - now > 7 * 86_400:
            return None
    return None


def _next_open(window: TimeWindow, at: float) -> float:
    if isinstance(window, DailyWindow):
        return window.next_start(at)
    return window.start if window.start >= at else float("inf")


def next_slot(
    last_start: float | None,
    delays: Delays,
    now: float,
    *,
    backoff_until: float | None = None,
) -> Allowed | WaitUntil | Refused:
    """When the next request may start, given when the last one to the host started.

    Example (STYLE.md): last start at 100.0, a 5 s interval, asked at 103.0 -> wait until
    105.0.
    """
    interval = delays.interval_s
    if delays.windows or delays.forbidden:
        earliest = now if last_start is None else max(now, last_start + interval)
        if backoff_until is not None:
            earliest = max(earliest, backoff_until)
        allowed_at = earliest_in_windows(earliest, delays.windows, delays.forbidden)
        if allowed_at is None:
            return Refused(RefusalReason.NO_VISIT_TIME)
        if allowed_at > earliest:
            return WaitUntil(allowed_at, WaitSource.VISIT_TIME, interval_s=interval)
    return claimed(Allowed(interval, delays),
                   claim_first(last_start, backoff_until, (interval,), now))


def claimed(allowed: Allowed, claim: HostClaim, position: int = 0) -> Allowed | WaitUntil:
    """What an :class:`Allowed` (the candidate at ``position`` of its host's claim) becomes
    once the store answered: itself when granted; else a wait until the claim's time, held
    by a back-off in force, by another URL of the host granted earlier in the same batch,
    or by the spacing and the source that set it.

    Example: 5 s of configured delay, not granted, at 105.0 ->
    ``WaitUntil(105.0, OPERATOR, interval_s=5.0)``.
    """
    granted = claim.granted
    if granted == position:
        return allowed
    at = claim.ats[position]
    held = claim.held_until
    interval = allowed.interval_s
    if held is not None and (granted < 0 or granted > position) and at <= held:
        return WaitUntil(at, WaitSource.BACKOFF, interval_s=interval)
    if claim.in_flight and at <= claim.now + LEASE_RECHECK_S:  # not the spacing's time
        return WaitUntil(at, WaitSource.IN_FLIGHT, interval_s=interval)
    delays = allowed.delays
    source, line = delays.source()
    return WaitUntil(at, source, line, interval, 0 <= granted < position,
                     delays.reason() if source is WaitSource.BRACE_BLOCK else None)


class SlotClaim(NamedTuple):
    """The answer to "may I start now?" for a host: ``granted`` means the slot is now taken
    (``at`` is its start); otherwise ``at`` is the earliest time worth asking again. ``now``
    is the time the store judged by (its own clock when it keeps one, as Redis does), so
    ``at - now`` is the wait whoever asked."""

    granted: bool
    at: float
    now: float


def claim_slot(last_start: float | None, backoff_until: float | None, interval_s: float,
               now: float) -> SlotClaim:
    """The one piece of arithmetic every store shares (a Lua twin runs it inside Redis).

    Example: last start 100.0, interval 5.0, asked at 103.0 -> not granted, at 105.0.
    """
    earliest = _earliest_start(last_start, backoff_until, interval_s, now)
    return SlotClaim(earliest <= now, earliest, now)


def _earliest_start(last_start: float | None, backoff_until: float | None, interval_s: float,
                    now: float) -> float:
    """:func:`claim_slot`'s time alone (``now`` when the slot is free), without the named
    tuple around it: a named tuple costs about 3,000 instructions to make, and
    :func:`claim_first` makes one of its own a claim."""
    # the later, without max(): a builtin's call
    earliest = now if last_start is None or last_start + interval_s <= now \
        else last_start + interval_s
    return backoff_until if backoff_until is not None and backoff_until > earliest \
        else earliest


class HostClaim(NamedTuple):
    """One host's candidates in a batch, in the order they were asked: ``granted`` is the
    index of the one that may start now (-1: none), ``ats[i]`` the earliest start of
    candidate ``i``. A host gets at most one start per batch, so the candidates after the
    granted one wait their own interval from ``now``. ``held_until`` is the end of a
    back-off (429/503) still in force at ``now``, so that a refusal can name it;
    ``in_flight``: a request of the host holds its lease (see :func:`claim_first`)."""

    granted: int
    ats: tuple[float, ...]
    now: float
    held_until: float | None = None
    in_flight: bool = False


def claim_first(last_start: float | None, backoff_until: float | None,
                intervals: tuple[float, ...], now: float,
                leased_until: float | None = None) -> HostClaim:
    """:func:`claim_slot` over a host's candidates, each with its own interval (a brace
    block gives a path its own delay); the first that fits wins (a Lua twin runs in Redis).
    ``leased_until``: a request of the host is in flight, granted with a lease that ends
    when its response is noted or at this time (its holder died): nothing is granted before
    then, and the candidates are told to ask again :data:`LEASE_RECHECK_S` from ``now``
    (or at the lease's end, or their own time, whichever is later than the first two).

    Example: last start 100.0, intervals (5.0, 1.0), asked at 103.0 -> the second wins;
    the same with a lease until 130.0 -> none, at (105.0, 103.05).
    """
    leased = leased_until is not None and leased_until > now
    held = backoff_until if backoff_until is not None and backoff_until > now else None
    if len(intervals) == 1 and not leased:  # one candidate, no lease: the usual ask
        at = _earliest_start(last_start, backoff_until, intervals[0], now)
        return HostClaim(0 if at <= now else -1, (at,), now, held, False)
    ats = []
    granted = -1
    for index, interval in enumerate(intervals):
        if granted >= 0:
            ats.append(now + interval)
            continue
        at = _earliest_start(last_start, backoff_until, interval, now)
        if leased:
            assert leased_until is not None
            ats.append(max(at, min(leased_until, now + LEASE_RECHECK_S)))
            continue
        ats.append(at)
        if at <= now:
            granted = index
    return HostClaim(granted, tuple(ats), now, held, leased)


def shifted_start(last_start: float, late_s: float, now: float) -> float:
    """A host's last start once its request is told to have left ``late_s`` after its
    slot (a Lua twin runs in Redis). Moved that much later, but never past ``now``: a
    request has left by the time its lateness is told. The bound matters when several
    requests of a host are out at once (no delay): each one's lateness counts from its own
    grant, not from the latest, and adding them all would push the host's start into the
    future (measured: a zero-delay Scrapy crawl held hosts for up to a second).

    Example: last start 100.0, 2.0 s late, told at 101.0 -> 101.0; told at 103.0 -> 102.0.
    """
    return max(last_start, min(last_start + late_s, now))


def average_response_time(previous_s: float | None, sample_s: float) -> float:
    """The host's running response time after one more sample (exponentially weighted).

    Example: 1.0 s so far, a 2.0 s response -> 1.3 s.
    """
    if previous_s is None:
        return sample_s
    return previous_s + RESPONSE_TIME_WEIGHT * (sample_s - previous_s)


def backoff_until(status: int, retry_after_s: float | None, now: float) -> float | None:
    """Until when a host is left alone after answering ``status``: 429 and 503 ask for a
    pause (``Retry-After`` when given, up to a day; a minute otherwise); others do not."""
    if status not in BACKOFF_STATUSES:
        return None
    wait = DEFAULT_BACKOFF_S if retry_after_s is None else min(retry_after_s, MAX_BACKOFF_S)
    return now + max(wait, 0.0)

"""What a robots.txt fetch means: from the outcome of a fetch to the rules in force.

DESIGN.md, "Fetching robots.txt": 2xx parses (HTML served instead is treated as no file);
redirects are followed up to five hops (by the fetch layer); 401/403 disallow all by
default (the seeds) or allow all (RFC 9309); other 4xx allow all; 429, 5xx and network
errors disallow all with a retry and back-off, serving the last good copy for up to 30 days;
freshness follows HTTP caching, clamped to 24 hours (RFC 9309, 2.4).
"""

from __future__ import annotations

import calendar
import enum
import re
from dataclasses import dataclass
from email.utils import parsedate_tz
from typing import assert_never

from polite.core._steps import Steps, finish
from polite.core.robots import MAX_ROBOTS_BYTES, parse_steps
from polite.core.robots.robotstxt import RobotsTxt

__all__ = [
    "AllowAll",
    "DisallowAll",
    "FetchPolicy",
    "Parsed",
    "Received",
    "RobotsState",
    "StatusClass",
    "UnauthorizedMeans",
    "Unreachable",
    "freshness_s",
    "parse_retry_after",
    "robots_state",
    "status_class",
]

DAY_S = 86_400.0


class UnauthorizedMeans(enum.StrEnum):
    """How 401 and 403 answers are read."""

    DISALLOW = "disallow"  # seeds 000, 001, 002
    ALLOW = "allow"  # RFC 9309, 2.3.1.3


class StatusClass(enum.StrEnum):
    """The rows of the status table: what an answer's status alone says of robots.txt."""

    FILE = "file"  # 2xx: the body is the file (or an HTML page served instead)
    UNAUTHORIZED = "unauthorized"  # 401, 403: read as FetchPolicy.unauthorized says
    NO_FILE = "no_file"  # any other 4xx: there is no file, everything allowed
    UNAVAILABLE = "unavailable"  # 429, 5xx: the site cannot answer now
    # 1xx, and a 3xx with no Location to follow: no file and no failure the table names;
    # the driver reads it as unavailable, the survey by its body (seed 004 classes by body).
    UNEXPECTED = "unexpected"


def status_class(status: int) -> StatusClass:
    """The row of the status table an HTTP status falls in."""
    if 200 <= status < 300:
        return StatusClass.FILE
    if status in (401, 403):
        return StatusClass.UNAUTHORIZED
    if status == 429 or status >= 500:
        return StatusClass.UNAVAILABLE
    if status >= 400:
        return StatusClass.NO_FILE
    return StatusClass.UNEXPECTED


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """The rows of the status table that an operator may change."""

    unauthorized: UnauthorizedMeans = UnauthorizedMeans.DISALLOW
    max_ttl_s: float = DAY_S  # RFC 9309, 2.4: no longer than 24 hours
    min_ttl_s: float = 60.0
    stale_for_s: float = 30 * DAY_S  # serve the last good copy this long when unreachable
    first_retry_s: float = 60.0
    max_retry_s: float = 6 * 3600.0


@dataclass(frozen=True, slots=True)
class Received:
    """An HTTP answer at the end of the redirect chain."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    url: str = ""

    def header(self, name: str) -> str | None:
        lower = name.lower()
        for key, value in self.headers:
            if key.lower() == lower:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Unreachable:
    """No HTTP answer: DNS, connection, timeout, TLS, too many redirects."""

    reason: str


FetchOutcome = Received | Unreachable


@dataclass(frozen=True, slots=True)
class Parsed:
    """A robots.txt file in force."""

    robots: RobotsTxt
    fetched_at: float
    expires_at: float
    status: int = 200
    stale: bool = False  # the site is unreachable and this is the last good copy


@dataclass(frozen=True, slots=True)
class AllowAll:
    """No file (4xx, HTML instead of robots.txt, RFC 9309's 401/403): everything allowed.
    ``status``: the HTTP status that said so (0: not known); ``html``: a page was served."""

    reason: str
    fetched_at: float
    expires_at: float
    status: int = 0
    html: bool = False


@dataclass(frozen=True, slots=True)
class DisallowAll:
    """Nothing may be fetched until ``retry_at`` (5xx, 429, unreachable, 401/403);
    ``status``: the HTTP status of the last answer (0: no answer, the site unreachable)."""

    reason: str
    fetched_at: float
    retry_at: float
    failures: int = 1
    status: int = 0


RobotsState = Parsed | AllowAll | DisallowAll

_MAX_AGE = re.compile(r"(?:^|,)\s*(s-maxage|max-age)\s*=\s*\"?(\d+)", re.IGNORECASE)


def freshness_s(outcome: Received, now: float, policy: FetchPolicy) -> float:
    """How long an answer stays fresh: Cache-Control max-age, else Expires, else a day;
    clamped to [min_ttl_s, max_ttl_s]. ``no-store`` / ``no-cache`` mean the minimum."""
    cache_control = outcome.header("cache-control") or ""
    ttl = policy.max_ttl_s
    if re.search(r"no-store|no-cache", cache_control, re.IGNORECASE):
        ttl = policy.min_ttl_s
    else:
        ages = {m.group(1).lower(): int(m.group(2)) for m in _MAX_AGE.finditer(cache_control)}
        if ages:
            ttl = float(ages.get("s-maxage", ages.get("max-age", 0)))
        else:
            expires = outcome.header("expires")
            parsed = parsedate_tz(expires) if expires else None
            if parsed is not None:
                ttl = calendar.timegm(parsed[:6]) - (parsed[9] or 0) - now
    return min(max(ttl, policy.min_ttl_s), policy.max_ttl_s)


def _retry_in_s(failures: int, policy: FetchPolicy, retry_after_s: float | None) -> float:
    backoff: float = min(policy.first_retry_s * 2.0 ** max(failures - 1, 0), policy.max_retry_s)
    if retry_after_s is not None:
        backoff = max(backoff, min(retry_after_s, policy.max_retry_s))
    return backoff


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delay-seconds or an HTTP date)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    parsed = parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, calendar.timegm(parsed[:6]) - (parsed[9] or 0) - now)


def robots_state(
    outcome: FetchOutcome,
    now: float,
    *,
    previous: RobotsState | None = None,
    policy: FetchPolicy | None = None,
    agent_dialect: str = "auto",
    max_bytes: int = MAX_ROBOTS_BYTES,
) -> RobotsState:
    """The rules in force after a fetch of robots.txt ended with ``outcome`` at ``now``."""
    return finish(robots_state_steps(outcome, now, previous=previous, policy=policy,
                                     agent_dialect=agent_dialect, max_bytes=max_bytes))


def robots_state_steps(
    outcome: FetchOutcome,
    now: float,
    *,
    previous: RobotsState | None = None,
    policy: FetchPolicy | None = None,
    agent_dialect: str = "auto",
    max_bytes: int = MAX_ROBOTS_BYTES,
) -> Steps[RobotsState]:
    """:func:`robots_state` in steps (see :mod:`polite.core._steps`): a large file is
    read a few hundred lines a step."""
    policy = policy or FetchPolicy()
    match outcome:
        case Received(status=status):
            row = status_class(status)
            if row is StatusClass.FILE:
                robots = yield from parse_steps(outcome.body, agent_dialect,
                                                url=outcome.url or None, max_bytes=max_bytes)
                expires = now + freshness_s(outcome, now, policy)
                if robots.looks_like_html:
                    return AllowAll("the site serves an HTML page as robots.txt: no rules",
                                    now, expires, status, html=True)
                return Parsed(robots, now, expires, status)
            if row is StatusClass.UNAUTHORIZED:
                if policy.unauthorized is UnauthorizedMeans.ALLOW:
                    return AllowAll(f"HTTP {status}: allowed (RFC 9309 policy)", now,
                                    now + policy.max_ttl_s, status)
                return DisallowAll(f"HTTP {status} for robots.txt: everything disallowed",
                                   now, now + policy.max_ttl_s, status=status)
            if row is StatusClass.NO_FILE:
                return AllowAll(f"HTTP {status}: no robots.txt, everything allowed", now,
                                now + freshness_s(outcome, now, policy), status)
            retry_after = parse_retry_after(outcome.header("retry-after"), now)
            return _unavailable(f"HTTP {status} for robots.txt", now, previous, policy,
                                retry_after, status)
        case Unreachable(reason=reason):
            return _unavailable(f"robots.txt unreachable: {reason}", now, previous, policy,
                                None, 0)
        case _:
            assert_never(outcome)


def _unavailable(reason: str, now: float, previous: RobotsState | None, policy: FetchPolicy,
                 retry_after_s: float | None, status: int) -> RobotsState:
    failures = previous.failures + 1 if isinstance(previous, DisallowAll) else 1
    retry_at = now + _retry_in_s(failures, policy, retry_after_s)
    if isinstance(previous, Parsed) and now - previous.fetched_at <= policy.stale_for_s:
        # The last good copy stays in force while the site is down (DESIGN.md).
        return Parsed(previous.robots, previous.fetched_at, retry_at, previous.status,
                      stale=True)
    return DisallowAll(f"{reason}: everything disallowed until it answers", now, retry_at,
                       failures, status)

"""What a site does with one request: serve its robots.txt, let it through, refuse it (403)
or slow it down (429 with Retry-After), and what to log (seed 003, 4.9 and 4.12).

People pass untouched and unlogged. Every robot request is logged with the robots.txt
decision and the line in force; the :class:`~polite.core.site.rules.Enforcement` says
whether a robot that ignores the file is refused or throttled. ``/robots.txt`` itself is
always served. The spacing a robot is held to is polite's own (:mod:`polite.core.politeness`):
the largest of its Crawl-delay and Request-rate interval, inside Visit-time windows.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from polite.core.politeness.rules import delays_for, next_slot
from polite.core.politeness.values import Allowed, Refused, WaitUntil
from polite.core.robots.model import DecidedBy, Decision
from polite.core.robots.robotstxt import RobotsTxt
from polite.core.site.crawlers import Identity
from polite.core.site.rules import Enforcement
from polite.core.site.verify import Check, Verification

__all__ = [
    "ROBOTS_PATH",
    "Action",
    "InForce",
    "LogEntry",
    "SiteDecision",
    "Visit",
    "decide",
    "throttle_key",
]

ROBOTS_PATH = "/robots.txt"
# A robot refused by Time-forbidden / Visit-time with no opening in sight is asked to come
# back in this long.
_CLOSED_RETRY_S = 3600


class Action(enum.StrEnum):
    """What the adapter does."""

    SERVE_ROBOTS = "robots.txt"
    PASS = "pass"
    REFUSE = "refuse"  # 403
    THROTTLE = "throttle"  # 429 with Retry-After


@dataclass(frozen=True, slots=True)
class Visit:
    """The facts of one request the decision needs; ``target`` is the path with its query."""

    method: str
    target: str
    user_agent: str
    ip: str | None


@dataclass(frozen=True, slots=True)
class InForce:
    """The robots.txt the site serves now: parsed, its lines, its version."""

    robots: RobotsTxt
    lines: tuple[str, ...]
    version: int
    ttl_s: int
    enforcement: Enforcement

    def line_text(self, line: int | None) -> str:
        if line is None or not 0 < line <= len(self.lines):
            return ""
        return self.lines[line - 1]


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One robot request, as the access log keeps it."""

    at: float
    ip: str | None
    user_agent: str
    robot: str
    operator: str
    category: str
    verification: Verification
    how: str
    method: str
    target: str
    agent: str  # the name robots.txt was read under
    allowed: bool
    line: int | None  # the deciding line of the file in force
    rule: str
    version: int
    action: Action
    by: str = ""  # what verified the robot: "signature", "ranges", "dns" (else "")


@dataclass(frozen=True, slots=True)
class SiteDecision:
    """The answer: ``status`` and ``retry_after_s`` for a refusal or throttle, ``log`` for
    robots, ``slot_key`` when the visit starts a new interval for the throttle."""

    action: Action
    reason: str
    status: int | None = None
    retry_after_s: int | None = None
    log: LogEntry | None = None
    slot_key: str | None = None
    ask_signature: bool = False  # refused for want of a signature: say which (Accept-Signature)


_PASS_PERSON = SiteDecision(Action.PASS, "not a robot")
_SERVE_PERSON = SiteDecision(Action.SERVE_ROBOTS, "robots.txt is always served")


def throttle_key(identity: Identity, check: Check, ip: str | None) -> str:
    """Whose interval a visit counts against: a verified crawler's across all its addresses,
    anyone else's per address (a forger must not use up the real crawler's slot)."""
    if check.verdict is Verification.VERIFIED:
        return identity.name
    return f"{identity.name}@{ip}"


def decide(visit: Visit, identity: Identity, check: Check, in_force: InForce, *,
           last_start: float | None, now: float,
           signature_required: bool = False) -> SiteDecision:
    """The decision for one request (``last_start``: when this robot's last allowed visit
    began, see :func:`throttle_key`; ``signature_required``: the site takes this robot only
    with a valid Web Bot Auth signature)."""
    is_robots = visit.target == ROBOTS_PATH or visit.target.startswith(ROBOTS_PATH + "?")
    if not identity.is_robot:
        return _SERVE_PERSON if is_robots else _PASS_PERSON
    crawler = identity.crawler
    if is_robots:  # always allowed (RFC 9309, 2.2.2), whatever the rules' patterns say
        decision = Decision(True, None, "/robots.txt is always allowed",
                            by=DecidedBy.ROBOTS_TXT)
    else:
        decision = in_force.robots.decide("http://site" + visit.target, identity.agent)

    def entry(action: Action) -> LogEntry:
        return LogEntry(now, visit.ip, visit.user_agent, identity.name,
                        crawler.operator if crawler else "",
                        str(crawler.category) if crawler else "", check.verdict, check.how,
                        visit.method, visit.target, identity.agent, decision.allowed,
                        decision.line, in_force.line_text(decision.line), in_force.version,
                        action, check.by)

    if is_robots:
        return SiteDecision(Action.SERVE_ROBOTS, "robots.txt is always served",
                            log=entry(Action.SERVE_ROBOTS))
    enforce = in_force.enforcement
    if signature_required and check.by != "signature":
        return SiteDecision(Action.REFUSE, f"this site takes {identity.name} only with a valid "
                                           f"Web Bot Auth signature ({check.how})", 403,
                            log=entry(Action.REFUSE), ask_signature=True)
    # A signature that does not hold claims a name it cannot back, as a forger does.
    if enforce.refuse_forged and check.verdict in (Verification.FORGED,
                                                   Verification.INVALID):
        return SiteDecision(Action.REFUSE, f"not {identity.name}: {check.how}", 403,
                            log=entry(Action.REFUSE))
    if enforce.refuse_disallowed and not decision.allowed:
        return SiteDecision(Action.REFUSE, f"robots.txt disallows this to {identity.agent}: "
                                           f"{decision.reason}", 403, log=entry(Action.REFUSE))
    key = throttle_key(identity, check, visit.ip)
    if enforce.throttle:
        delays = delays_for(in_force.robots.agent_rules(identity.agent), default_s=0.0)
        if delays.robots_s is not None or delays.windows or delays.forbidden:
            slot = next_slot(last_start, delays, now)
            match slot:
                case Allowed():
                    pass
                case WaitUntil(at=at, source=why):
                    return SiteDecision(Action.THROTTLE, f"too fast: {why} asks for "
                                                         f"{delays.interval_s:g} s between visits",
                                        429, max(1, math.ceil(at - now)),
                                        log=entry(Action.THROTTLE))
                case Refused():
                    return SiteDecision(Action.THROTTLE, "robots.txt Time-forbidden / "
                                        "Visit-time leaves no time to visit", 429,
                                        _CLOSED_RETRY_S,
                                        log=entry(Action.THROTTLE))
    return SiteDecision(Action.PASS, decision.reason, log=entry(Action.PASS), slot_key=key)

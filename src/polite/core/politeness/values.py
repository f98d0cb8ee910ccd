"""What the politeness core answers for one URL: small frozen values, no wording.

``core`` decides, ``fetch`` gathers what the decision needs and claims
the slot, and each edge renders the same value its own way (the REST API in Riemer 2017's
JSON, the proxy as 403 / 429 + Retry-After, the drop-ins as exceptions, the crawler as a
``reason`` field). The values say what happened as types and enums; nobody above reads a
message to find out. They are named tuples, each of its own length (no two compare equal):
one is made per URL decided, and a frozen dataclass of five fields takes nearly three
times as long to make (measured: 0.84 us against 0.31 us).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, NamedTuple

from polite.core.robots.model import Dialect, Rule

if TYPE_CHECKING:
    from polite.core.politeness.rules import Delays

__all__ = ["Allowed", "Decision", "Disallowed", "RefusalReason", "Refused", "WaitSource",
           "WaitUntil"]


class WaitSource(enum.StrEnum):
    """What set the time a request must wait for; the value is how messages name it."""

    OPERATOR = "configured delay"
    CRAWL_DELAY = "robots.txt Crawl-delay"
    REQUEST_RATE = "robots.txt Request-rate"
    IP_DELAY = "robots.txt Ip-delay"
    IP_RATE = "robots.txt Ip-rate"
    BRACE_BLOCK = "robots.txt brace block"  # a REGP block's own delay for the path (the
    # words name the field, WaitUntil.field)
    VISIT_TIME = "robots.txt Visit-time / Time-forbidden"
    BACKOFF = "back-off after 429/503"
    IN_FLIGHT = "request in flight"  # another request of the host holds its lease
    ADAPTIVE = "adaptive delay"
    DEFAULT = "default delay"


class RefusalReason(enum.StrEnum):
    """Why a request may not go at all, whatever the rules of the path say."""

    INVALID_URL = "invalid URL"  # not http(s), no host, malformed
    PRIVATE_ADDRESS = "private address"  # the host resolves to a private/loopback address
    ROBOTS_UNAVAILABLE = "robots.txt unavailable"  # 401/403, or 429/5xx/unreachable (retried)
    NO_VISIT_TIME = "no visit time"  # Visit-time / Time-forbidden leave no time within a week


class Allowed(NamedTuple):
    """The request may go, taking the host's slot: ``interval_s`` after the host's last
    start, the spacing ``delays`` work out (their sources, should the slot be taken)."""

    interval_s: float
    delays: Delays


class WaitUntil(NamedTuple):
    """The request may go at ``at`` (seconds on the deciding clock), held by ``source``;
    ``line`` is the robots.txt line that set it, when one did. ``interval_s`` is the
    host's spacing; ``behind``: another URL of the host, asked in the same batch, took the
    slot; ``field``: for a brace block, which of its fields (Crawl-delay, Request-rate...)."""

    at: float
    source: WaitSource
    line: int | None = None
    interval_s: float = 0.0
    behind: bool = False
    field: WaitSource | None = None


class Disallowed(NamedTuple):
    """robots.txt disallows the URL: the deciding ``rule`` (``None`` when an IP rule
    decided), its ``line`` (``None`` for REGP's implicit first rule), the ``dialect`` the
    file was read in, and the robots layer's account of the match (``explanation``)."""

    rule: Rule | None
    line: int | None
    dialect: Dialect
    explanation: str


class Refused(NamedTuple):
    """The request may not go and its rules were not asked (``reason``). ``detail`` says
    what was found (the robots.txt outcome, the bad URL); ``retry_at``: when asking again
    may change the answer (robots.txt retried), ``None`` for never."""

    reason: RefusalReason
    detail: str = ""
    retry_at: float | None = None


Decision = Allowed | WaitUntil | Disallowed | Refused

"""The politeness core: may a request go and when, as plain values and arithmetic on ``now``."""

from __future__ import annotations

from polite.core.politeness.decision import NO_FACTS, HostFacts, Policy, decide
from polite.core.politeness.rules import (
    DEFAULT_DELAY_S,
    MAX_CRAWL_DELAY_S,
    Delays,
    HostClaim,
    SlotClaim,
    average_response_time,
    backoff_until,
    claim_first,
    claim_slot,
    claimed,
    delays_for,
    earliest_in_windows,
    next_slot,
    shifted_start,
)
from polite.core.politeness.values import (
    Allowed,
    Decision,
    Disallowed,
    RefusalReason,
    Refused,
    WaitSource,
    WaitUntil,
)

__all__ = [
    "DEFAULT_DELAY_S",
    "MAX_CRAWL_DELAY_S",
    "NO_FACTS",
    "Allowed",
    "Decision",
    "Delays",
    "Disallowed",
    "HostClaim",
    "HostFacts",
    "Policy",
    "RefusalReason",
    "Refused",
    "SlotClaim",
    "WaitSource",
    "WaitUntil",
    "average_response_time",
    "backoff_until",
    "claim_first",
    "claim_slot",
    "claimed",
    "decide",
    "delays_for",
    "earliest_in_windows",
    "next_slot",
    "shifted_start",
]

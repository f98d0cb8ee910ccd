"""The politeness core: when a request to a host may go, as plain arithmetic on ``now``."""

from __future__ import annotations

from polite.core.politeness.rules import (
    DEFAULT_DELAY_S,
    MAX_CRAWL_DELAY_S,
    Delays,
    HostClaim,
    Ready,
    Refused,
    SlotClaim,
    WaitUntil,
    average_response_time,
    backoff_until,
    claim_first,
    claim_slot,
    delays_for,
    earliest_in_windows,
    next_slot,
    shifted_start,
)

__all__ = [
    "DEFAULT_DELAY_S",
    "MAX_CRAWL_DELAY_S",
    "Delays",
    "HostClaim",
    "Ready",
    "Refused",
    "SlotClaim",
    "WaitUntil",
    "average_response_time",
    "backoff_until",
    "claim_first",
    "claim_slot",
    "delays_for",
    "earliest_in_windows",
    "next_slot",
    "shifted_start",
]

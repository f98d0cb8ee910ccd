"""The politeness core: when a request to a host may go, as plain arithmetic on ``now``."""

from __future__ import annotations

from polite.core.politeness.rules import (
    DEFAULT_DELAY_S,
    MAX_CRAWL_DELAY_S,
    Delays,
    Ready,
    Refused,
    SlotClaim,
    WaitUntil,
    claim_slot,
    delays_for,
    earliest_in_windows,
    next_slot,
)

__all__ = [
    "DEFAULT_DELAY_S",
    "MAX_CRAWL_DELAY_S",
    "Delays",
    "Ready",
    "Refused",
    "SlotClaim",
    "WaitUntil",
    "claim_slot",
    "delays_for",
    "earliest_in_windows",
    "next_slot",
]

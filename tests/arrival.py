"""When a request reached a test site, by the kernel's clock rather than the server's thread:
the demonstration sites' own helper (:mod:`polite.demo._arrival`), which the test sites
share, so that both measure politeness where it happens, whatever the load."""

from __future__ import annotations

from polite.demo._arrival import (
    ANCILLARY_BYTES,
    SO_TIMESTAMPNS,
    arrived,
    next_arrival,
    stamp_arrivals,
)

__all__ = ["ANCILLARY_BYTES", "SO_TIMESTAMPNS", "arrived", "next_arrival", "stamp_arrivals"]

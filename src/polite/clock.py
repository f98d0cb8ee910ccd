"""Clocks: the only place polite reads the time. Everything below takes ``now`` or a clock."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "WallClock"]


class Clock(Protocol):
    def __call__(self) -> float:
        """Seconds; comparable between the processes that share a store."""
        ...


class WallClock:
    """``time.time()``: what SQLite and Redis stores shared between processes need. Calling
    one calls ``time.time`` itself, without a Python frame between (a proxied request reads
    the clock about ten times)."""

    __call__ = staticmethod(time.time)

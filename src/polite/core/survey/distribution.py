"""How seed 004 states a heavy-tailed distribution: its mean, standard deviation and median
("the average size being 29.8 lines (σ=293.4) with a median of 7 lines", section 3.3), and
the counts a log-log plot of it draws."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Summary", "frequencies", "summarize"]


@dataclass(frozen=True, slots=True)
class Summary:
    """``sd`` is the population standard deviation (the seed does not say which; at the
    seed's scale the two agree to the digit shown)."""

    count: int
    mean: float
    sd: float
    median: float
    minimum: float
    maximum: float


def summarize(values: Sequence[float]) -> Summary | None:
    """The summary of ``values``, ``None`` when there are none."""
    count = len(values)
    if count == 0:
        return None
    ordered = sorted(values)
    mean = math.fsum(ordered) / count
    sd = math.sqrt(math.fsum((value - mean) ** 2 for value in ordered) / count)
    middle = count // 2
    median = (ordered[middle] if count % 2 else (ordered[middle - 1] + ordered[middle]) / 2)
    return Summary(count, mean, sd, float(median), float(ordered[0]), float(ordered[-1]))


def frequencies(values: Iterable[int]) -> list[tuple[int, int]]:
    """``(value, how many times)`` for every value met, by value."""
    return sorted(Counter(values).items())

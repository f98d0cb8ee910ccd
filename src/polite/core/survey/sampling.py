"""Seed 004's two samples: of a large sitemap index's children (section 2.3), and of a site's
page URLs beyond a bound (section 2.4). Randomness comes in as an object with ``randrange``
and ``sample`` (a seeded ``random.Random``), so a resumed survey draws the same."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

__all__ = ["DEFAULT_ALPHA", "DEFAULT_N0", "MAX_KEPT_URIS", "Random", "Reservoir",
           "sample_children"]

# Seed 004, 2.4: "For each site, we added up to 20000 URIs ... If we had more URIs available,
# we randomly sampled 20000."
MAX_KEPT_URIS = 20_000
# Seed 004, 2.3 gives the rule (at least max(n0, alpha * n) children of an index with n) but
# not its values: 100 children, or a tenth of a large index, keeps a site's fetches in the
# hundreds while every index of fewer than 100 files is read whole.
DEFAULT_N0 = 100
DEFAULT_ALPHA = 0.1

T = TypeVar("T")


class Random(Protocol):
    def randrange(self, stop: int, /) -> int: ...

    def sample(self, population: Sequence[int], k: int) -> list[int]: ...


def sample_children(children: Sequence[str], n0: int, alpha: float, rng: Random
                    ) -> tuple[list[str], list[str]]:
    """At least ``max(n0, ceil(alpha * n))`` of an index's ``n`` children, drawn uniformly:
    the chosen in the index's order, and the others."""
    wanted = max(n0, math.ceil(alpha * len(children)))
    if wanted >= len(children):
        return list(children), []
    chosen = set(rng.sample(range(len(children)), wanted))
    return ([c for i, c in enumerate(children) if i in chosen],
            [c for i, c in enumerate(children) if i not in chosen])


class Reservoir(Generic[T]):
    """A uniform sample of at most ``bound`` items of a stream (Vitter's algorithm R);
    ``seen`` counts every item offered."""

    def __init__(self, bound: int, rng: Random) -> None:
        self.bound = bound
        self.seen = 0
        self.kept: list[T] = []
        self._rng = rng

    def add(self, item: T) -> None:
        self.seen += 1
        if len(self.kept) < self.bound:
            self.kept.append(item)
            return
        slot = self._rng.randrange(self.seen)
        if slot < self.bound:
            self.kept[slot] = item

"""Seed 004's samples: an index's children (at least max(n0, alpha*n)) and a site's kept URLs
(a uniform reservoir), both drawn from a seeded generator."""

from __future__ import annotations

import math
import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from polite.core.survey.sampling import Reservoir, sample_children


@given(st.integers(0, 300), st.integers(0, 50), st.floats(0, 1))
def test_children_sampled_to_at_least_max_n0_alpha_n(n: int, n0: int, alpha: float) -> None:
    children = [f"https://e.example/s{i}.xml" for i in range(n)]
    chosen, left = sample_children(children, n0, alpha, random.Random(7))
    assert len(chosen) == min(n, max(n0, math.ceil(alpha * n)))
    assert sorted(chosen + left) == sorted(children)
    assert chosen == [c for c in children if c in set(chosen)]  # the index's order
    again, _ = sample_children(children, n0, alpha, random.Random(7))
    assert again == chosen  # the same seed, the same sample (a resumed survey)


@given(st.lists(st.integers(), max_size=200), st.integers(0, 50))
def test_the_reservoir_keeps_the_bound_and_counts_all(items: list[int], bound: int) -> None:
    reservoir: Reservoir[int] = Reservoir(bound, random.Random(1))
    for item in items:
        reservoir.add(item)
    assert reservoir.seen == len(items)
    assert len(reservoir.kept) == min(bound, len(items))
    assert not Counter(reservoir.kept) - Counter(items)


def test_the_reservoir_is_uniform() -> None:
    hits: Counter[int] = Counter()
    rng = random.Random(3)
    for _ in range(2_000):
        reservoir: Reservoir[int] = Reservoir(10, rng)
        for item in range(100):
            reservoir.add(item)
        hits.update(reservoir.kept)
    # Each of the 100 items is kept a tenth of the time: 200 of 2,000 draws, give or take.
    assert min(hits.values()) > 120 and max(hits.values()) < 290
    assert len(hits) == 100

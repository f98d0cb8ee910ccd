"""Long pure work done in steps, so that its caller can pause between them.

A step is a generator that yields (``None``) after each :data:`STEP` units of its work (a
line read, a pattern indexed) and returns its result. A caller that may wait for it all
runs it through with :func:`finish`; an event loop gives itself back between two steps, so
that no other request waits for more than one step of a large file's work.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

__all__ = ["STEP", "Steps", "finish"]

T = TypeVar("T")

Steps = Generator[None, None, T]

# Units of work between two pauses: a few hundred lines or patterns, well under a
# millisecond of a quiet core's time each (see docs/benchmarks.md).
STEP = 256


def finish(steps: Steps[T]) -> T:
    """The result of ``steps``, run through without pausing."""
    # Driven by a for loop over a generator that delegates to it: its result is handed over
    # without a StopIteration raised and caught (a small file's parse runs one of these).
    result: list[T] = []
    for _ in _collect(steps, result):
        pass
    return result[0]


def _collect(steps: Steps[T], result: list[T]) -> Steps[None]:
    result.append((yield from steps))


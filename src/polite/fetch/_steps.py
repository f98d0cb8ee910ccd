"""Long pure work run on the event loop, which gives itself back between two of its steps.

The work of a large file (reading 14,000 lines, indexing as many patterns) is done by the
core in steps of a few hundred units (see :mod:`polite.core._steps`). Run here, between two
steps the loop polls its sockets and runs what is ready, so that ``/health`` and the proxy
wait for one step at most, however loaded the machine. On a worker thread the same work
made every request wait for the interpreter's lock, the switch interval (5 ms) at each of
its system calls, and longer when the machine's other processes kept the thread holding
the lock off a core (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

from polite.core._steps import Steps

__all__ = ["stepped"]

T = TypeVar("T")


async def stepped(steps: Steps[T]) -> T:
    """The result of ``steps``, the event loop given back between two of them."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await asyncio.sleep(0)

"""The Redis store's deferred flush (what it holds back, sent a little later): a store that
closes while a flush fails (Redis unreachable) leaves nothing behind on its loop."""

from __future__ import annotations

import asyncio

from polite.storage.redis import _Later


async def _closing_while_a_flush_fails() -> int:
    calls = 0
    failing = asyncio.Event()
    go_on = asyncio.Event()

    async def flush() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:  # the armed flush: Redis is down, the store closes meanwhile
            failing.set()
            await go_on.wait()
            raise ConnectionError("Redis is unreachable")

    later = _Later(flush, 0.0)
    later.arm()
    await failing.wait()
    finishing = asyncio.create_task(later.finish())
    await asyncio.sleep(0)
    go_on.set()
    await finishing
    # the failed flush's retry was armed for a second later: it must not be
    await asyncio.sleep(1.5)
    return calls


def test_a_flush_that_fails_as_the_store_closes_arms_no_retry() -> None:
    # Before, the failed flush armed its retry after finish() had cancelled the timer: the
    # retry ran after the store was closed, or its task was left pending when the loop
    # closed ("Task was destroyed but it is pending", seen in a later test's set-up).
    assert asyncio.run(_closing_while_a_flush_fails()) == 2  # the failed one, the last

"""redis-py is imported by a process only when its store is Redis: the import costs each
``polite serve``, ``polite crawl`` and ``polite mcp`` on another store tens of
milliseconds of start-up and thousands of objects for the garbage collector to walk."""

from __future__ import annotations

from pathlib import Path

import pytest

from polite.clock import WallClock
from polite.storage import is_redis_store, open_store
from tests.imports import loaded


def test_the_products_start_without_redis_py() -> None:
    assert loaded("polite.serve, polite.crawl.setup, polite.mcp._server, "
                  "polite.frontier._server", "redis") == []


@pytest.mark.anyio
async def test_is_redis_store_tells_the_stores_apart(tmp_path: Path, redis_url: str) -> None:
    clock = WallClock()
    redis = open_store(redis_url, clock)
    sqlite = open_store(f"sqlite:///{tmp_path / 's.sqlite'}", clock)
    try:
        assert is_redis_store(redis)
        assert not is_redis_store(sqlite)
        assert not is_redis_store(open_store("memory://", clock))
        assert not is_redis_store(object())
    finally:
        await redis.close()
        await sqlite.close()

"""The page cache keeps what it decoded of a stored blob, keyed by the blob's bytes: two
nodes on one store each serve what the other stored last, never an older copy they decoded
before, and what is kept stays within its budget in bytes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from polite.fetch import cache
from polite.fetch.cache import PageCache
from polite.storage.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio

URL = "http://127.0.41.7/page"
FRESH = [(b"content-type", b"text/plain"), (b"cache-control", b"max-age=3600")]


async def stored_body(node: PageCache) -> bytes:
    choice = await node.lookup(b"GET", URL, [])
    assert choice.action == "serve" and choice.stored is not None
    return choice.stored.body


async def test_a_node_serves_what_another_stored_last(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    one, two = SQLiteStore(path, time.time), SQLiteStore(path, time.time)
    first, second = PageCache(one), PageCache(two)
    try:
        now = time.time()
        await first.store(URL, [], 200, b"OK", FRESH, b"version 1", now, now)
        assert await stored_body(second) == b"version 1"
        assert await stored_body(second) == b"version 1"  # from what it decoded
        await first.store(URL, [], 200, b"OK", FRESH, b"version 2", now + 1, now + 1)
        assert await stored_body(second) == b"version 2"
    finally:
        await one.close()
        await two.close()


async def test_what_is_kept_decoded_stays_within_its_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "DECODED_MAX_BYTES", 4096)
    store = SQLiteStore(tmp_path / "budget.sqlite", time.time)
    node = PageCache(store)
    try:
        now = time.time()
        for n in range(20):
            url = f"http://127.0.41.7/p{n}"
            await node.store(url, [], 200, b"OK", FRESH, b"x" * 1000, now, now)
            assert (await node.lookup(b"GET", url, [])).action == "serve"
        kept = node._decoded
        assert 0 < len(kept) < 20 and sum(map(len, kept)) <= 4096
        # the first pages were forgotten, and are decoded again when asked for
        assert (await node.lookup(b"GET", "http://127.0.41.7/p0", [])).action == "serve"
    finally:
        await store.close()

"""A crawl's queues are read a page at a time: ListQueues, GetStats and GetURLs on a crawl of
many queues give every queue once, across pages, and no call reads the crawl's queues
whole.

Scaled down: a crawl of a million queues is what the pages are for, but storing one takes
minutes; the stores here read 50 queues a page (``page``, 1,000 in the service) and the
crawl has 230, so every call crosses four page boundaries and ends on a part-filled page,
which is where a paging mistake (a queue read twice, or passed over) would show.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from polite.frontier._redis_store import RedisURLStore
from polite.frontier._store import Put, URLs, URLStore

PAGE = 50
QUEUES = 230
NOW = 1_000_000.0


class _Recording(redis.Redis):
    """A Redis client that notes the longest reply a command gave it (in elements)."""

    longest = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        for part in reply if isinstance(reply, tuple) else (reply,):  # SSCAN: cursor, page
            if isinstance(part, (list, dict, set)):
                self.longest = max(self.longest, len(part))
        return reply


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[URLs]:
    if request.param == "sqlite":
        made: URLs = URLStore(str(tmp_path / "f.sqlite"), default_delay_s=0.0, page=PAGE)
    else:
        client = _Recording.from_url(request.getfixturevalue("redis_url"))
        made = RedisURLStore(client, f"t{uuid.uuid4().hex[:10]}:", default_delay_s=0.0,
                             page=PAGE)
    try:
        yield made
    finally:
        made.close()


def _fill(store: URLs) -> tuple[list[str], list[str]]:
    """QUEUES queues of two URLs each; 30 of them completed, 20 blocked. (Every queue's
    key, the active ones' keys.)"""
    keys = [f"q{n:04d}" for n in range(QUEUES)]
    store.put([Put("c", f"http://{key}.example/{i}", key, {}, False)
               for key in keys for i in range(2)], NOW)
    done, blocked = keys[:30], keys[100:120]
    store.put([Put("c", f"http://{key}.example/{i}", key, {}, True)
               for key in done for i in range(2)], NOW)
    for key in blocked:
        store.block("c", key, NOW + 3600)
    return keys, [k for k in keys if k not in done and k not in blocked]


def _paged(store: URLs, size: int, *, include_inactive: bool) -> list[list[str]]:
    pages, start = [], 0
    while found := store.queues("c", include_inactive=include_inactive, start=start,
                                size=size, now=NOW):
        pages.append(found)
        start += len(found)
    return pages


def test_list_queues_pages_are_complete_and_do_not_overlap(store: URLs) -> None:
    keys, active = _fill(store)
    for include_inactive, expected in ((True, keys), (False, active)):
        pages = _paged(store, 37, include_inactive=include_inactive)
        every = [key for page in pages for key in page]
        assert every == expected  # each once, in order, none left out
        assert all(len(page) == 37 for page in pages[:-1])
    stats = store.stats("c", "", NOW)
    assert (stats.size, stats.completed, stats.queues, stats.active_queues) == (
        2 * (QUEUES - 30), 60, QUEUES, QUEUES - 30)
    assert store.stats("c", "q0150", NOW).size == 2
    largest = store.queue_counts("c", 3, NOW)
    assert [row[0] for row in largest] == ["q0030", "q0031", "q0032"]


def test_get_urls_goes_through_every_queue_a_page_at_a_time(store: URLs) -> None:
    """Every active queue gives once a call (the one served longest ago first), though
    those that give move to the end of the order while the pages are read."""
    _, active = _fill(store)
    first = store.take("c", "", per_queue=1, queues=0, lease_s=60.0, now=NOW)
    assert sorted(u.key for u in first) == active
    assert len({u.url for u in first}) == len(active)
    # a limit of queues is kept across pages, and the queues that gave come last
    second = store.take("c", "", per_queue=1, queues=120, lease_s=60.0, now=NOW + 1)
    assert sorted(u.key for u in second) == active[:120]
    third = store.take("c", "", per_queue=5, queues=0, lease_s=60.0, now=NOW + 2)
    assert sorted(u.key for u in third) == active[120:]  # those that had not given twice
    assert store.take("c", "", per_queue=5, queues=0, lease_s=60.0, now=NOW + 3) == []
    back = store.take("c", "", per_queue=0, queues=0, lease_s=60.0, now=NOW + 100)
    assert sorted(u.url for u in back) == sorted(
        f"http://{key}.example/{i}" for key in active for i in range(2))


def test_one_call_reads_a_page_of_queues_at_most(store: URLs) -> None:
    """What one call reads of a crawl's queues: on Redis, no reply longer than a page (the
    hash of every queue read whole was two elements a queue); on SQLite, every statement
    reading the queues' table is limited to a page, one after the other."""
    _fill(store)
    if isinstance(store, URLStore):
        statements: list[str] = []
        store._db.set_trace_callback(statements.append)
        try:
            store.take("c", "", per_queue=1, queues=0, lease_s=60.0, now=NOW)
        finally:
            store._db.set_trace_callback(None)
        reads = [s for s in statements if s.startswith("SELECT q.crawl")]
        assert reads and all(s.endswith(f"LIMIT {PAGE}") for s in reads), reads[:1]
        assert len(reads) == QUEUES // PAGE + 1  # the queues blocked are not read
        return
    assert isinstance(store, RedisURLStore)
    client = store._r
    assert isinstance(client, _Recording)
    for call in (lambda: store.queues("c", include_inactive=False, start=150, size=10,
                                      now=NOW),
                 lambda: store.stats("c", "", NOW),
                 lambda: store.queue_counts("c", 10, NOW),
                 lambda: store.queues("c", include_inactive=True, start=0, size=20,
                                      now=NOW)):
        client.longest = 0
        assert call()
        assert client.longest <= PAGE


def test_a_sqlite_file_of_queues_is_taken_along_an_index(tmp_path: Path) -> None:
    """The pages of queues GetURLs reads are found along an index of the time each queue
    last gave (of one crawl, or of every crawl), not by sorting the crawl's queues."""
    URLStore(str(tmp_path / "f.sqlite"), default_delay_s=0.0).close()
    db = sqlite3.connect(tmp_path / "f.sqlite")
    try:
        for where in ("q.crawl = ? AND ", ""):
            plan = db.execute(
                "EXPLAIN QUERY PLAN SELECT q.crawl FROM uf_queues q LEFT JOIN uf_crawls c ON"
                f" c.crawl = q.crawl WHERE {where}q.blocked_until <= ? AND q.held_until <= ?"
                " AND (q.served_at, q.crawl, q.key) > (?, ?, ?)"
                " ORDER BY q.served_at, q.crawl, q.key LIMIT ?",
                [1] * (7 if where else 6)).fetchall()
            text = " ".join(str(row[3]) for row in plan)
            assert "USING INDEX uf_queues_" in text and "TEMP B-TREE" not in text, text
    finally:
        db.close()


def test_get_urls_of_any_crawl_reads_the_crawl_set_a_page_at_a_time(redis_url: str) -> None:
    """A GetURLs of any crawl goes through every crawl once, from one further each call,
    and reads the set of crawls a page at a time (SSCAN), not whole; ListCrawls names each
    crawl once. (230 crawls: a set of more than 128 members is one SSCAN pages.)"""
    client = _Recording.from_url(redis_url)
    assert isinstance(client, _Recording)
    store = RedisURLStore(client, f"t{uuid.uuid4().hex[:10]}:", default_delay_s=0.0,
                          page=PAGE)
    try:
        names = [f"crawl{n:03d}" for n in range(QUEUES)]
        store.put([Put(name, "http://h.example/1", "h.example", {}, False) for name in names],
                  NOW)
        firsts = [store.take(None, "", per_queue=1, queues=1, lease_s=60.0, now=NOW)
                  for _ in range(2)]
        assert [len(first) for first in firsts] == [1, 1]
        assert firsts[0][0].crawl != firsts[1][0].crawl  # the turn moved on
        client.longest = 0
        rest = store.take(None, "", per_queue=1, queues=0, lease_s=60.0, now=NOW)
        assert client.longest <= 2 * PAGE  # SSCAN's COUNT is a hint, held to about a page
        taken = sorted([firsts[0][0].crawl, firsts[1][0].crawl, *(u.crawl for u in rest)])
        assert taken == names
        client.longest = 0
        assert store.crawls() == names
        assert client.longest <= 2 * PAGE
    finally:
        store.close()

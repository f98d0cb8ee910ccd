"""The crawl frontier as a storage port: what is queued, leased and done, per host.

A crawl's whole state lives here, so a killed crawl resumes where it stopped and several
workers can share one store. URLs arrive in the crawler's normal form
(:func:`polite.core.crawl.resolve_link`), which is the key of the seen set: a URL is added
once, whatever else happens to it. Taking a URL *leases* it; a lease that is never
acknowledged (the worker died) comes back once it expires. Each backend passes one contract
suite (tests/storage/test_frontier.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import os
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import NamedTuple, Protocol, cast

from polite.errors import ConfigError
from polite.storage.sqlite import SQLiteStore, Transaction, apply_schema, open_database

__all__ = [
    "NO_BATCH",
    "Batch",
    "FrontierCounts",
    "FrontierItem",
    "FrontierStore",
    "MemoryFrontier",
    "SQLiteFrontier",
    "Settled",
    "settle",
    "unseen",
]

QUEUED, LEASED, FETCHED, SKIPPED = 0, 1, 2, 3


class FrontierItem(NamedTuple):
    """A URL waiting to be fetched, with what the crawler knew when it queued it."""

    url: str
    host: str
    depth: int = 0
    via: str = "seed"  # seed | link | sitemap | redirect
    srcloc: str | None = None  # the original page this snapshot stands for (seed 000)
    page_type: str | None = None  # the sitemap's <type>: data | list | other
    changefreq: str | None = None
    lastmod: float | None = None  # seconds since the epoch
    hops: int = 0  # redirects followed to reach it
    attempts: int = 0  # fetches tried and given back (429, 503)
    not_before: float = 0.0  # not to be taken before (a revisit time, a back-off)


class FrontierCounts(NamedTuple):
    queued: int
    leased: int
    fetched: int
    skipped: int


class Settled(NamedTuple):
    """What :func:`settle` did: the items queued and marked seen (those new), the lease."""

    added: list[FrontierItem]
    marked: list[FrontierItem]
    leased: FrontierItem | None


class Batch(Protocol):
    """What :meth:`FrontierStore.batch` returns: an async context manager."""

    async def __aenter__(self) -> None: ...

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None: ...


class _NoBatch:
    """A batch for backends whose every change is already atomic on its own."""

    __slots__ = ()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None


NO_BATCH = _NoBatch()


class FrontierStore(Protocol):
    def batch(self) -> Batch:
        """The changes made inside are written together: in SQLite one transaction (one
        commit for a page's new links, its acknowledgement and the lease of its host's next
        URL, where each was a commit of its own), none of them kept when the block raises;
        memory and Redis make each change atomic on its own already. Nothing inside may wait
        on anything but this store: another task's changes would join the transaction."""
        ...

    async def add(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        """Queue the items whose URL was never seen; returns those, in order."""
        ...

    async def mark_seen(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        """Record URLs as decided without a fetch (skipped); returns those not seen before."""
        ...

    async def lease(self, host: str, now: float, lease_s: float) -> FrontierItem | None:
        """The host's oldest queued URL due at ``now`` (or, first, the oldest whose lease has
        expired), leased until ``now + lease_s``. Oldest is in queue order: a URL whose
        ``not_before`` has come takes its place in the queue, not the head."""
        ...

    async def done(self, url: str, *, fetched: bool, revisit_at: float | None = None) -> None:
        """A leased URL is decided; with ``revisit_at`` it is queued again for then, behind
        what is queued now, its ``attempts`` back to 0."""
        ...

    async def release(self, item: FrontierItem) -> None:
        """Give a leased URL back in its place in the queue, with the ``not_before`` and
        ``attempts`` of ``item`` (its other fields stay as queued)."""
        ...

    async def next_due(self, host: str) -> float | None:
        """When the host's earliest queued or leased URL is due (a queued URL at its
        ``not_before``, a leased one when its lease ends); ``None`` with none left."""
        ...

    async def hosts(self) -> list[tuple[str, float]]:
        """Every host with URLs queued or leased, and when its earliest one is due."""
        ...

    async def due_hosts(self, now: float, limit: int) -> list[tuple[str, float]]:
        """At most ``limit`` of the hosts due by ``now`` (as :meth:`hosts` gives them), the
        earliest first: what a worker sharing the frontier asks for now and then, bounded
        whatever the crawl's size."""
        ...

    async def host_fetched(self) -> dict[str, int]:
        """URLs fetched per host (for per-host budgets after a restart)."""
        ...

    async def get_host_state(self, host: str) -> str | None: ...

    async def add_seed_hosts(self, hosts: Sequence[str]) -> None:
        """The hosts of the crawl's seeds: its scope, kept for every later run."""
        ...

    async def seed_hosts(self) -> set[str]: ...

    async def set_host_state(self, host: str, state: str) -> None: ...

    async def requeue_leased(self) -> int:
        """Every lease given back at once (a crawl that owns the store, starting again)."""
        ...

    async def counts(self) -> FrontierCounts: ...

    async def close(self) -> None: ...


# -- in memory ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Entry:
    item: FrontierItem
    state: int
    seq: int
    lease_until: float = 0.0


class MemoryFrontier:
    """The frontier in this process's memory: for tests and one-off crawls."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        # host -> the URLs that may be taken, a heap in queue order (seq)
        self._queues: dict[str, list[tuple[int, str]]] = {}
        self._later: dict[str, list[tuple[float, int, str]]] = {}  # host -> not_before heap
        self._leased: dict[str, set[str]] = {}
        self._host_states: dict[str, str] = {}
        self._seeds: set[str] = set()
        self._seq = itertools.count()

    def batch(self) -> Batch:
        return NO_BATCH

    def _enqueue(self, entry: _Entry) -> None:
        item = entry.item
        entry.state = QUEUED
        if item.not_before > 0:
            heapq.heappush(self._later.setdefault(item.host, []),
                           (item.not_before, entry.seq, item.url))
        else:  # by its seq: a URL given back keeps its place ahead of later URLs
            heapq.heappush(self._queues.setdefault(item.host, []), (entry.seq, item.url))

    async def add(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        added = []
        for item in items:
            if item.url in self._entries:
                continue
            entry = _Entry(item, QUEUED, next(self._seq))
            self._entries[item.url] = entry
            self._enqueue(entry)
            added.append(item)
        return added

    async def mark_seen(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        marked = []
        for item in items:
            if item.url not in self._entries:
                self._entries[item.url] = _Entry(item, SKIPPED, next(self._seq))
                marked.append(item)
        return marked

    def _take_expired(self, host: str, now: float) -> str | None:
        expired = [self._entries[url] for url in self._leased.get(host, ())
                   if self._entries[url].lease_until <= now]
        return min(expired, key=lambda entry: entry.seq).item.url if expired else None

    async def lease(self, host: str, now: float, lease_s: float) -> FrontierItem | None:
        url = self._take_expired(host, now)
        if url is None:
            later = self._later.get(host)
            while later and later[0][0] <= now:  # their time came: into queue order
                _, seq, due = heapq.heappop(later)
                if self._entries[due].state == QUEUED:
                    heapq.heappush(self._queues.setdefault(host, []), (seq, due))
            queue = self._queues.get(host)
            while queue:
                _, candidate = heapq.heappop(queue)
                if self._entries[candidate].state == QUEUED:
                    url = candidate
                    break
        if url is None:
            return None
        entry = self._entries[url]
        entry.state, entry.lease_until = LEASED, now + lease_s
        self._leased.setdefault(host, set()).add(url)
        return entry.item

    def _unlease(self, url: str) -> _Entry | None:
        entry = self._entries.get(url)
        if entry is None or entry.state != LEASED:
            return None
        self._leased[entry.item.host].discard(url)
        return entry

    async def done(self, url: str, *, fetched: bool, revisit_at: float | None = None) -> None:
        entry = self._unlease(url)
        if entry is None:
            return
        if revisit_at is not None:  # queued again, so behind what is queued now
            entry.item = entry.item._replace(not_before=revisit_at, attempts=0)
            entry.seq = next(self._seq)
            self._enqueue(entry)
        else:
            entry.state = FETCHED if fetched else SKIPPED

    async def release(self, item: FrontierItem) -> None:
        entry = self._unlease(item.url)
        if entry is not None:
            entry.item = entry.item._replace(not_before=item.not_before,
                                             attempts=item.attempts)
            self._enqueue(entry)

    async def next_due(self, host: str) -> float | None:
        due = [self._entries[url].lease_until for url in self._leased.get(host, ())]
        due.extend(self._entries[url].item.not_before for _, url in self._queues.get(host, ())
                   if self._entries[url].state == QUEUED)
        due.extend(at for at, _, url in self._later.get(host, ())
                   if self._entries[url].state == QUEUED)
        return min(due) if due else None

    async def hosts(self) -> list[tuple[str, float]]:
        found = []
        for host in set(self._queues) | set(self._later) | set(self._leased):
            due = await self.next_due(host)
            if due is not None:
                found.append((host, due))
        return found

    async def due_hosts(self, now: float, limit: int) -> list[tuple[str, float]]:
        due = sorted((at, host) for host, at in await self.hosts() if at <= now)
        return [(host, at) for at, host in due[:limit]]

    async def host_fetched(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for entry in self._entries.values():
            if entry.state == FETCHED:
                counts[entry.item.host] = counts.get(entry.item.host, 0) + 1
        return counts

    async def get_host_state(self, host: str) -> str | None:
        return self._host_states.get(host)

    async def set_host_state(self, host: str, state: str) -> None:
        self._host_states[host] = state

    async def add_seed_hosts(self, hosts: Sequence[str]) -> None:
        self._seeds.update(hosts)

    async def seed_hosts(self) -> set[str]:
        return set(self._seeds)

    async def requeue_leased(self) -> int:
        urls = [url for leased in self._leased.values() for url in leased]
        for url in urls:
            entry = self._unlease(url)
            if entry is not None:
                self._enqueue(entry)
        return len(urls)

    async def counts(self) -> FrontierCounts:
        tally = [0, 0, 0, 0]
        for entry in self._entries.values():
            tally[entry.state] += 1
        return FrontierCounts(*tally)

    async def close(self) -> None:
        return None


# -- SQLite ------------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS frontier (
    url TEXT PRIMARY KEY, host TEXT NOT NULL, state INTEGER NOT NULL, seq INTEGER NOT NULL,
    not_before REAL NOT NULL, lease_until REAL NOT NULL DEFAULT 0, depth INTEGER NOT NULL,
    via TEXT NOT NULL, srcloc TEXT, page_type TEXT, changefreq TEXT, lastmod REAL,
    hops INTEGER NOT NULL, attempts INTEGER NOT NULL, owner TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS frontier_queue ON frontier (host, state, seq);
CREATE TABLE IF NOT EXISTS frontier_hosts (host TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS frontier_seed_hosts (host TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS frontier_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS frontier_workers (
    worker TEXT PRIMARY KEY, machine TEXT NOT NULL, pid INTEGER NOT NULL, beat REAL NOT NULL);
INSERT OR IGNORE INTO frontier_meta
    SELECT 'seq', COALESCE((SELECT MAX(seq) FROM frontier), 0)
    WHERE NOT EXISTS (SELECT 1 FROM frontier_meta WHERE name = 'seq');
"""
_COLUMNS = ("url, host, depth, via, srcloc, page_type, changefreq, lastmod, hops, attempts, "
            "not_before")


_LEASE = (
    f"UPDATE frontier SET state = {LEASED}, lease_until = ?1, owner = ?4 WHERE url = ("
    f"SELECT url FROM ("
    f"SELECT * FROM (SELECT url, 0 AS rank FROM frontier WHERE host = ?2 AND state = {LEASED}"
    f" AND lease_until <= ?3 ORDER BY seq LIMIT 1) UNION ALL SELECT * FROM (SELECT url, 1 FROM"
    f" frontier WHERE host = ?2 AND state = {QUEUED} AND not_before <= ?3 ORDER BY seq "
    f"LIMIT 1)) ORDER BY rank LIMIT 1) RETURNING {_COLUMNS}")
_MARKS = "(" + ", ".join(["?"] * 13) + ")"
WAL_CHECKPOINT_PAGES = 10_000
# The URLs a frontier knows the file holds, kept in memory up to this many bytes (about 100
# a URL beside its characters) and begun again when full: most links a page holds were
# met before (its site's menus, pages linked from many), and each of those asked of the
# file is a probe of the seen set's index at a random place. On the farm of
# bench/crawl_vs_scrapy.py, 14 of a page's 15 links; 40 us a page less.
SEEN_CACHE_BYTES = 32 << 20
_SEEN_ENTRY_BYTES = 100
_ROWS_PER_INSERT = 500  # 13 parameters a row, well under SQLite's 32,766
# While its transaction is held (a crawl alone with its file), a frontier leases in memory:
# a host's next URLs are read from the file this many at a time (one statement where each
# lease was an UPDATE of its own) and handed out one by one, never written LEASED; the
# reads kept for at most this many hosts at once (the host read longest ago dropped, its
# URLs read again at its next lease): about 6 MiB of items for URLs of 100 characters.
LEASE_AHEAD = 16
_AHEAD_HOSTS = 1_024


# A URL leased, to the worker named (any, when the frontier has no worker name): the
# statement's last parameters are LEASED and the name twice.
_MINE = "state = ? AND (? = '' OR owner = ?)"


_Kept = tuple[float, int, FrontierItem]  # a lease kept in memory: its end, queue place, item


def _row(item: FrontierItem, state: int, seq: int) -> tuple[object, ...]:
    return (*item, state, seq)


class SQLiteFrontier:
    """The frontier in an SQLite file (WAL): every change its own transaction, so a kill
    loses nothing that was acknowledged; queued URLs live on disk, not in memory.

    Processes of one machine may share the file as workers share a Redis frontier: made
    with ``worker=``, a frontier writes its name on each URL it leases, and its
    acknowledgement or release of a URL another worker has leased since changes nothing;
    while :meth:`holding`, it beats and keeps its leases, and gives back at its start only
    the leases of workers that are gone.

    With ``store``, an :class:`SQLiteStore` on the same file, the frontier shares its
    connection: a batch then holds the politeness store's writes too (a page's response
    time with its acknowledgement, one commit).

    While its transaction is held (:meth:`Transaction.hold`: no other process writes the
    file), a lease is kept in memory and the file's row stays queued until the URL is
    acknowledged or given back: a kill finds it queued, as it finds every URL whose page
    was not committed. A host's next URLs are read :data:`LEASE_AHEAD` at a time, in queue
    order, and handed out in that order until one queued before them comes due."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 5.0,
                 store: SQLiteStore | None = None, worker: str = "",
                 seen_cache_bytes: int = SEEN_CACHE_BYTES) -> None:
        """``seen_cache_bytes``: the memory kept for URLs known to be in the file (0:
        none), asked before the file; a URL enters it once the transaction that wrote or
        met it is committed, so that a transaction undone leaves none behind."""
        self.worker = worker
        self._seen: dict[str, None] = {}
        self._seen_bytes = 0
        self._seen_budget = seen_cache_bytes
        self._met: list[str] = []  # URLs written or met since the last commit
        self._mine = (LEASED, worker, worker)  # the last parameters of _MINE
        # Leases kept in memory while the transaction is held: host -> {url: (lease end,
        # queue place, item)}, url -> host; and each host's URLs read ahead (the last is the
        # next to hand out) with the time until which they stay the next in queue order.
        self._kept: dict[str, dict[str, _Kept]] = {}
        self._kept_hosts: dict[str, str] = {}
        self._ahead: dict[str, tuple[list[tuple[int, FrontierItem]], float]] = {}
        self._owns_connection = store is None or \
            store.path.resolve() != Path(path).resolve()
        if store is None or self._owns_connection:
            self._db = open_database(path, _SCHEMA, "the frontier",
                                     busy_timeout_s=busy_timeout_s)
            self._transaction = Transaction(self._db)
        else:
            self._db = store.connection
            self._transaction = store.transaction
            apply_schema(self._db, _SCHEMA, busy_timeout_s=busy_timeout_s)
        # Checkpoints write the WAL back into the file (and sync it): every 10,000 pages
        # (40 MB) rather than SQLite's 1,000, a page of the queue's index changed by many
        # commits in between is written back once. A fifth less CPU per crawled page.
        self._db.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        if seen_cache_bytes > 0:
            self._transaction.listen(self._ended)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(frontier)")}
        if "owner" not in columns:  # a file from before leases had owners
            with self._transaction:
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(frontier)")}
                if "owner" not in columns:  # another process may have added it meanwhile
                    self._db.execute("ALTER TABLE frontier ADD COLUMN owner TEXT NOT NULL "
                                     "DEFAULT ''")

    def batch(self) -> Batch:
        return self._transaction

    def _take_seqs(self, n: int) -> int:
        """The first of ``n`` new queue places; inside a write transaction, so that every
        process sharing the file draws from one counter."""
        (last,) = self._db.execute("UPDATE frontier_meta SET value = value + ? WHERE name = "
                                   "'seq' RETURNING value", (n,)).fetchone()
        return int(last) - n + 1

    def _ended(self, committed: bool) -> None:
        """The transaction ended (or may be undone): what it met enters the cache when it
        is committed, and is forgotten otherwise."""
        met, self._met = self._met, []
        if not committed or not met:
            return
        seen = self._seen
        for url in met:
            seen[url] = None
        self._seen_bytes += sum(map(len, met)) + _SEEN_ENTRY_BYTES * len(met)
        if self._seen_bytes > self._seen_budget:
            seen.clear()  # begun again: the URLs met often come back at once
            self._seen_bytes = 0

    def _insert(self, items: Sequence[FrontierItem], state: int) -> list[FrontierItem]:
        # URLs the cache knows are in the file are not asked of it again.
        if self._seen_budget > 0:
            seen = self._seen
            items = [item for item in items if item.url not in seen]
            if not items:
                return []
        # One statement per 500 URLs: those new to the seen set come back (RETURNING), the
        # others are ignored by the primary key; queue places from the file's one counter.
        db = self._db
        added: set[str] = set()
        with self._transaction:
            if self._seen_budget > 0:  # in the file once this transaction is committed
                self._met.extend(item.url for item in items)
            seq = self._take_seqs(len(items))
            for start in range(0, len(items), _ROWS_PER_INSERT):
                rows = items[start:start + _ROWS_PER_INSERT]
                values: list[object] = []
                for item in rows:
                    values.extend(_row(item, state, seq))
                    seq += 1
                marks = ", ".join([_MARKS] * len(rows))
                added.update(url for (url,) in db.execute(
                    f"INSERT INTO frontier ({_COLUMNS}, state, seq) VALUES {marks} "
                    "ON CONFLICT (url) DO NOTHING RETURNING url", values))
        new = []
        for item in items:  # in order, a URL given twice once
            if item.url in added:
                added.remove(item.url)
                new.append(item)
        return new

    def unseen(self, urls: Sequence[str]) -> list[str]:
        """Those of ``urls`` the seen cache does not hold (it holds only URLs the file
        holds; one it does not hold may be there too): a page's links are asked here before
        they are made into items, scope-tested and queued (see :func:`unseen`)."""
        seen = self._seen
        return [url for url in urls if url not in seen]

    async def add(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        return self._insert(items, QUEUED)

    async def mark_seen(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        return self._insert(items, SKIPPED)

    async def lease(self, host: str, now: float, lease_s: float) -> FrontierItem | None:
        if self._transaction.held:
            return self._lease_kept(host, now, lease_s)
        if self._kept:
            self._write_kept()
        # One atomic statement: a URL whose lease has run out (its worker died), oldest
        # first, else the oldest queued URL that is due; each candidate is one index probe.
        row = self._db.execute(_LEASE, (now + lease_s, host, now, self.worker)).fetchone()
        return None if row is None else FrontierItem(*row)

    # -- leases kept in memory while the transaction is held -------------------------------

    def _lease_kept(self, host: str, now: float, lease_s: float) -> FrontierItem | None:
        kept = self._kept.get(host)
        expired = None
        if kept:  # a lease that ran out first, oldest first, as the file's statement has it
            expired = min((lease for lease in kept.values() if lease[0] <= now),
                          default=None, key=lambda lease: lease[1])
        if expired is not None:
            self._unkeep(expired[2].url)
            seq, item = expired[1], expired[2]
        else:
            ahead = self._ahead.get(host)
            if ahead is None or not ahead[0] or now >= ahead[1]:
                ahead = self._read_ahead(host, now)
                if ahead is None:
                    return None
            seq, item = ahead[0].pop()
        self._keep(host, item, now + lease_s, seq)
        # a block rolled back takes the lease back: the URL is read from the file again
        self._transaction.on_undo(lambda: self._unkeep(item.url, forget_ahead=True))
        return item

    def _read_ahead(self, host: str, now: float
                    ) -> tuple[list[tuple[int, FrontierItem]], float] | None:
        """The host's next due URLs in queue order (those kept left out), and until when
        they stay next: the earliest time a URL queued before the last of them comes due.
        A head of URLs not due that fills the read is passed in a statement of its own."""
        kept = self._kept.get(host, {})
        limit = LEASE_AHEAD + len(kept)
        rows = self._db.execute(
            f"SELECT seq, {_COLUMNS} FROM frontier WHERE host = ? AND state = {QUEUED} "
            "ORDER BY seq LIMIT ?", (host, limit)).fetchall()
        items: list[tuple[int, FrontierItem]] = []
        until = float("inf")
        for seq, *row in rows:
            item = FrontierItem(*row)
            if item.url in kept:
                continue
            if item.not_before <= now:
                items.append((seq, item))
            else:
                until = min(until, item.not_before)
        if not items and len(rows) == limit:
            marks = ", ".join("?" * len(kept))
            found = self._db.execute(
                f"SELECT seq, {_COLUMNS} FROM frontier WHERE host = ? AND state = {QUEUED} "
                f"AND not_before <= ? AND url NOT IN ({marks}) ORDER BY seq LIMIT 1",
                (host, now, *kept)).fetchone()
            if found is not None:  # read again at the next lease
                items, until = [(found[0], FrontierItem(*found[1:]))], now
        if not items:
            self._ahead.pop(host, None)
            return None
        items.reverse()  # the next is the last
        ahead = (items, until)
        self._ahead.pop(host, None)
        if len(self._ahead) >= _AHEAD_HOSTS:
            del self._ahead[next(iter(self._ahead))]  # the host read longest ago
        self._ahead[host] = ahead
        return ahead

    def _keep(self, host: str, item: FrontierItem, until: float, seq: int) -> None:
        self._kept.setdefault(host, {})[item.url] = (until, seq, item)
        self._kept_hosts[item.url] = host

    def _unkeep(self, url: str, *, forget_ahead: bool = False) -> tuple[str, _Kept] | None:
        """A lease kept in memory ended: its host and what was kept (None: not kept)."""
        host = self._kept_hosts.pop(url, None)
        if host is None:
            return None
        leases = self._kept[host]
        lease = leases.pop(url)
        if not leases:
            del self._kept[host]
        if forget_ahead:
            self._ahead.pop(host, None)
        return host, lease

    def _ending(self, url: str) -> tuple[object, ...]:
        """The last parameters of _MINE for ``url``: a lease kept in memory (its row is
        queued in the file) ends here, and comes back should the block be rolled back."""
        ended = self._unkeep(url)
        if ended is None:
            return self._mine
        host, (until, seq, item) = ended
        self._transaction.on_undo(lambda: self._keep(host, item, until, seq))
        return (QUEUED, "", "")

    def _write_kept(self) -> None:
        """The transaction is no longer held: the leases kept in memory are written to the
        file as the others are, lest a lease taken from the file hand one out twice."""
        with self._transaction:
            self._db.executemany(
                f"UPDATE frontier SET state = {LEASED}, lease_until = ?, owner = ? "
                f"WHERE url = ? AND state = {QUEUED}",
                [(until, self.worker, url) for leases in self._kept.values()
                 for url, (until, _, _) in leases.items()])
        self._kept.clear()
        self._kept_hosts.clear()
        self._ahead.clear()

    async def done(self, url: str, *, fetched: bool, revisit_at: float | None = None) -> None:
        # a lease of this worker's only: one that ran out and was taken since is not its
        mine = self._ending(url)
        if revisit_at is None:
            self._db.execute(f"UPDATE frontier SET state = ? WHERE url = ? AND {_MINE}",
                             (FETCHED if fetched else SKIPPED, url, *mine))
        else:  # queued again, so behind what is queued now (and what was read ahead)
            with self._transaction:
                self._db.execute(
                    "UPDATE frontier SET state = ?, not_before = ?, attempts = 0, seq = ? "
                    f"WHERE url = ? AND {_MINE}",
                    (QUEUED, revisit_at, self._take_seqs(1), url, *mine))

    async def release(self, item: FrontierItem) -> None:
        mine = self._ending(item.url)
        # back in its place, ahead of what was read after it
        self._ahead.pop(item.host, None)
        self._db.execute(
            "UPDATE frontier SET state = ?, not_before = ?, attempts = ? "
            f"WHERE url = ? AND {_MINE}",
            (QUEUED, item.not_before, item.attempts, item.url, *mine))

    async def next_due(self, host: str) -> float | None:
        kept = self._kept.get(host)
        if kept:  # queued in the file, leased here
            marks = ", ".join("?" * len(kept))
            row = self._db.execute(
                "SELECT MIN(CASE state WHEN ? THEN lease_until ELSE not_before END) FROM "
                f"frontier WHERE host = ? AND state IN (?, ?) AND url NOT IN ({marks})",
                (LEASED, host, QUEUED, LEASED, *kept)).fetchone()
            due = [until for until, _, _ in kept.values()]
            if row is not None and row[0] is not None:
                due.append(float(row[0]))
            return min(due)
        row = self._db.execute(
            "SELECT MIN(CASE state WHEN ? THEN lease_until ELSE not_before END) FROM frontier "
            "WHERE host = ? AND state IN (?, ?)", (LEASED, host, QUEUED, LEASED)).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    async def _with_kept(self, found: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """Hosts and when each is due, as the file says, for the hosts with leases kept in
        memory as the leases say."""
        if not self._kept:
            return found
        kept = {host: await self.next_due(host) for host in self._kept}
        return [(host, kept.get(host) or due) for host, due in found]

    async def hosts(self) -> list[tuple[str, float]]:
        rows = self._db.execute(
            "SELECT host, MIN(CASE state WHEN ? THEN lease_until ELSE not_before END) "
            "FROM frontier WHERE state IN (?, ?) GROUP BY host",
            (LEASED, QUEUED, LEASED)).fetchall()
        return await self._with_kept([(host, float(due)) for host, due in rows])

    async def due_hosts(self, now: float, limit: int) -> list[tuple[str, float]]:
        if self._kept:  # every host, then the bound (only while leases are kept here)
            due = sorted((at, host) for host, at in await self.hosts() if at <= now)
            return [(host, at) for at, host in due[:limit]]
        rows = self._db.execute(
            "SELECT host, MIN(CASE state WHEN ? THEN lease_until ELSE not_before END) AS due "
            "FROM frontier WHERE state IN (?, ?) GROUP BY host HAVING due <= ? "
            "ORDER BY due, host LIMIT ?", (LEASED, QUEUED, LEASED, now, limit)).fetchall()
        return [(host, float(due)) for host, due in rows]

    async def host_fetched(self) -> dict[str, int]:
        rows = self._db.execute("SELECT host, COUNT(*) FROM frontier WHERE state = ? "
                                "GROUP BY host", (FETCHED,)).fetchall()
        return {host: int(n) for host, n in rows}

    async def get_host_state(self, host: str) -> str | None:
        row = self._db.execute("SELECT state FROM frontier_hosts WHERE host = ?",
                               (host,)).fetchone()
        return None if row is None else str(row[0])

    async def set_host_state(self, host: str, state: str) -> None:
        self._db.execute("INSERT INTO frontier_hosts (host, state) VALUES (?, ?) "
                         "ON CONFLICT(host) DO UPDATE SET state = excluded.state", (host, state))

    async def add_seed_hosts(self, hosts: Sequence[str]) -> None:
        self._db.executemany("INSERT OR IGNORE INTO frontier_seed_hosts (host) VALUES (?)",
                             [(host,) for host in hosts])

    async def seed_hosts(self) -> set[str]:
        return {str(row[0]) for row in
                self._db.execute("SELECT host FROM frontier_seed_hosts")}

    async def requeue_leased(self) -> int:
        kept = len(self._kept_hosts)  # queued in the file already
        self._kept.clear()
        self._kept_hosts.clear()
        self._ahead.clear()
        cursor = self._db.execute("UPDATE frontier SET state = ?, lease_until = 0 "
                                  "WHERE state = ?", (QUEUED, LEASED))
        return cursor.rowcount + kept

    # -- the workers sharing the file ----------------------------------------------------

    def _beat(self, now: float) -> None:
        self._db.execute(
            "INSERT INTO frontier_workers (worker, machine, pid, beat) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (worker) DO UPDATE SET machine = excluded.machine, "
            "pid = excluded.pid, beat = excluded.beat",
            (self.worker, socket.gethostname(), os.getpid(), now))

    def _renew(self, until: float) -> None:
        self._db.execute("UPDATE frontier SET lease_until = ? WHERE state = ? AND owner = ? "
                         "AND lease_until < ?", (until, LEASED, self.worker, until))

    def requeue_gone(self, now: float, alive_s: float) -> int:
        """Give back the leases of workers that are gone: those that have not beaten for
        ``alive_s``, whose process on this machine has ended, or that had no name (a run
        that did not share the file); and this worker's own, left by an earlier run under
        its name (a worker starting holds none). A live worker's leases stay its own."""
        machine = socket.gethostname()
        with self._transaction:
            live = [worker for worker, on, pid, beat in self._db.execute(
                        "SELECT worker, machine, pid, beat FROM frontier_workers")
                    if worker != self.worker and beat > now - alive_s and
                    (on != machine or _running(pid))]
            marks = ", ".join("?" * len(live))
            self._db.execute(f"DELETE FROM frontier_workers WHERE worker NOT IN ({marks}) "
                             "AND worker != ?", (*live, self.worker))
            cursor = self._db.execute(
                "UPDATE frontier SET state = ?, lease_until = 0, owner = '' WHERE state = ? "
                f"AND owner NOT IN ({marks})", (QUEUED, LEASED, *live))
        return cursor.rowcount

    @contextlib.asynccontextmanager
    async def holding(self, lease_s: float, *, beat_s: float = 1.0,
                      alive_s: float = 5.0) -> AsyncIterator[None]:
        """While the block runs: this worker beats every ``beat_s`` and its leases are
        renewed every third of ``lease_s``, so that they never run out while it lives; on
        entry the leases of workers gone (:meth:`requeue_gone`) come back; on exit this
        worker is struck off."""
        if not self.worker:
            raise ConfigError("sharing an SQLite frontier needs the frontier's worker name")
        now = time.time()
        self._beat(now)
        self.requeue_gone(now, alive_s)
        stopped = asyncio.Event()

        async def beat() -> None:
            renew_at = now + lease_s / 3
            while not stopped.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopped.wait(), beat_s)
                at = time.time()
                try:
                    self._beat(at)
                    if at >= renew_at:
                        self._renew(at + lease_s)
                        renew_at = at + lease_s / 3
                except sqlite3.OperationalError:  # busy past the timeout: the next beat
                    continue

        task = asyncio.create_task(beat())
        try:
            yield
        finally:
            stopped.set()
            await task
            self._db.execute("DELETE FROM frontier_workers WHERE worker = ?", (self.worker,))

    async def counts(self) -> FrontierCounts:
        tally = [0, 0, 0, 0]
        for state, n in self._db.execute("SELECT state, COUNT(*) FROM frontier "
                                         "GROUP BY state"):
            tally[int(state)] = int(n)
        kept = len(self._kept_hosts)  # queued in the file, leased here
        tally[QUEUED] -= kept
        tally[LEASED] += kept
        return FrontierCounts(*tally)

    async def close(self) -> None:
        self._transaction.forget(self._ended)  # the store's, when it shares its file
        self._seen.clear()
        self._kept.clear()
        self._kept_hosts.clear()
        self._ahead.clear()
        if self._owns_connection:
            self._db.close()


def _running(pid: int) -> bool:
    """Whether a process of this machine is running (or is not this user's to signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Settles(Protocol):
    async def settle(self, url: str, *, fetched: bool, revisit_at: float | None = None,
                     add: Sequence[FrontierItem] = (), mark: Sequence[FrontierItem] = (),
                     lease: tuple[str, float, float] | None = None) -> Settled: ...


async def settle(frontier: FrontierStore, url: str, *, fetched: bool,
                 revisit_at: float | None = None, add: Sequence[FrontierItem] = (),
                 mark: Sequence[FrontierItem] = (),
                 lease: tuple[str, float, float] | None = None) -> Settled:
    """A page decided: ``mark`` marked seen, ``add`` queued, ``url`` acknowledged (as
    :meth:`FrontierStore.done`), then ``lease`` (host, now, lease_s) taken. A backend that
    can do it all in one step does (Redis: one round trip where there were four); the others
    make the four changes in turn (inside :meth:`FrontierStore.batch`, one commit)."""
    # Asked of the object, not by isinstance of a runtime-checkable Protocol: that walks
    # the Protocol's members on every call, a few per cent of a crawl's CPU.
    if hasattr(frontier, "settle"):
        return await cast(_Settles, frontier).settle(url, fetched=fetched,
                                                     revisit_at=revisit_at, add=add,
                                                     mark=mark, lease=lease)
    marked = await frontier.mark_seen(mark) if mark else []
    added = await frontier.add(add) if add else []
    await frontier.done(url, fetched=fetched, revisit_at=revisit_at)
    return Settled(added, marked, None if lease is None else await frontier.lease(*lease))


class _Knows(Protocol):
    def unseen(self, urls: Sequence[str]) -> list[str]: ...


def unseen(frontier: FrontierStore) -> Callable[[Sequence[str]], Sequence[str]]:
    """The frontier's answer to which of a page's URLs may be new: its seen cache asked
    (URLs it knows the store holds left out, as :meth:`FrontierStore.add` would leave them),
    or all of them for a frontier that keeps none. Most links a page holds were met before;
    each left out here is an item not built, scope-tested and filtered."""
    if hasattr(frontier, "unseen"):
        return cast(_Knows, frontier).unseen
    return _every


def _every(urls: Sequence[str]) -> Sequence[str]:
    return urls

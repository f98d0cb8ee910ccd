"""The URL Frontier's state in one SQLite file: URLs per crawl and queue, leases, queue settings.

The URL Frontier API (crawler-commons/url-frontier) keeps more per URL than the crawler's own
frontier (:mod:`polite.storage.frontier`): a crawl ID, a queue key the client may choose, the
client's metadata, a date from which a fetched URL may be fetched again. Each URL is a row
keyed by (crawl, url); its ``due`` is when it may be handed out (``NULL``: completed, never
again), its ``lease_until`` when a URL handed out and not yet updated comes back. A queue's row
keeps what the client set for it (a delay, a block, a crawl limit) and when it last gave URLs.

Every method is one transaction under one lock: the gRPC server calls them from its threads.
Time enters as ``now`` (seconds since the epoch, as the API counts them).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from polite.errors import ConfigError

__all__ = ["MAX_KEY_CHARS", "MAX_METADATA_BYTES", "MAX_TAKE", "MAX_URL_CHARS", "QUEUE_PAGE", "Put",
           "QueueStats", "StoredURL", "URLStore", "URLs"]

# A URL longer than this is refused (SKIPPED): browsers and sitemaps (sitemaps.org) stop
# at about 2,000; the cap is set wider for crawlers that keep long query strings.
MAX_URL_CHARS = 8192
# The metadata of one URL, as JSON: what a crawler keeps (status, source, depth) is small.
MAX_METADATA_BYTES = 64 * 1024
MAX_KEY_CHARS = 1024
# The URLs one GetURLs hands out at most, whatever its limits of 0 ("no limit") say: the
# client asks again for more.
MAX_TAKE = 10_000
# The queues read at a time where a call goes through a crawl's queues (GetURLs looking for
# queues that can give; GetStats and ListQueues on a Redis store): a crawl of a million
# hosts is read a page at a time rather than whole.
QUEUE_PAGE = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS uf_urls (
    id INTEGER PRIMARY KEY,
    crawl TEXT NOT NULL,
    url TEXT NOT NULL,
    key TEXT NOT NULL,
    metadata TEXT NOT NULL,
    due REAL,
    lease_until REAL NOT NULL DEFAULT 0,
    known INTEGER NOT NULL DEFAULT 0,
    created INTEGER NOT NULL,
    UNIQUE (crawl, url)
);
CREATE INDEX IF NOT EXISTS uf_urls_queue ON uf_urls (crawl, key, due, id);
CREATE TABLE IF NOT EXISTS uf_queues (
    crawl TEXT NOT NULL,
    key TEXT NOT NULL,
    delay_s REAL,
    blocked_until REAL NOT NULL DEFAULT 0,
    served_at REAL NOT NULL DEFAULT 0,
    interval_s REAL NOT NULL DEFAULT 0,
    crawl_limit INTEGER NOT NULL DEFAULT 0,
    held_until REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (crawl, key)
);
CREATE INDEX IF NOT EXISTS uf_queues_turn ON uf_queues (crawl, served_at, key);
CREATE INDEX IF NOT EXISTS uf_queues_any_turn ON uf_queues (served_at, crawl, key);
CREATE TABLE IF NOT EXISTS uf_crawls (
    crawl TEXT PRIMARY KEY,
    delay_s REAL
);
CREATE TABLE IF NOT EXISTS uf_nodes (
    node TEXT PRIMARY KEY,
    seen REAL NOT NULL,
    active INTEGER NOT NULL DEFAULT 1
);
"""


@dataclass(frozen=True, slots=True)
class Put:
    """One URL sent by a client: discovered (added unless known) or known (an update)."""

    crawl: str
    url: str
    key: str
    metadata: dict[str, list[str]]
    known: bool
    refetch_at: float = 0.0  # known only: 0 means never again


@dataclass(frozen=True, slots=True)
class StoredURL:
    crawl: str
    url: str
    key: str
    metadata: dict[str, list[str]]
    due: float | None
    known: bool
    created: int


@dataclass(frozen=True, slots=True)
class QueueStats:
    size: int  # active URLs not in flight
    in_process: int
    completed: int
    active_queues: int
    queues: int


class URLs(Protocol):
    """What the service needs of a store: :class:`URLStore` (SQLite) and
    :class:`polite.frontier._redis_store.RedisURLStore` (one Redis or a Redis Cluster) each
    have it."""

    def close(self) -> None: ...
    def put(self, items: Sequence[Put], now: float) -> None: ...
    def take(self, crawl: str | None, key: str, *, per_queue: int, queues: int,
             lease_s: float, now: float) -> list[StoredURL]: ...
    def heads(self, crawl: str | None, key: str, *, per_queue: int, queues: int, now: float
              ) -> list[StoredURL]: ...
    def lease(self, crawl: str, url: str, lease_s: float, now: float, *,
              interval_s: float = 0.0) -> bool: ...
    def refuse(self, crawl: str, url: str, why: dict[str, list[str]]) -> None: ...
    def delete_queue(self, crawl: str, key: str) -> int: ...
    def delete_crawl(self, crawl: str) -> int: ...
    def purge(self, crawl: str, key: str, before: float) -> int: ...
    def set_delay(self, crawl: str, key: str, delay_s: float) -> None: ...
    def block(self, crawl: str, key: str, until: float) -> None: ...
    def set_limit(self, crawl: str, key: str, limit: int) -> None: ...
    def hold(self, queues: Sequence[tuple[str, str, float]]) -> None: ...
    def beat(self, node: str, now: float) -> None: ...
    def leave(self, node: str) -> None: ...
    def nodes(self, since: float) -> list[str]: ...
    def set_active(self, node: str | None, active: bool) -> None: ...
    def active(self, node: str | None, since: float) -> bool: ...
    def crawls(self) -> list[str]: ...
    def queues(self, crawl: str, *, include_inactive: bool, start: int, size: int,
               now: float) -> list[str]: ...
    def stats(self, crawl: str, key: str, now: float) -> QueueStats: ...
    def queue_counts(self, crawl: str, limit: int, now: float
                     ) -> list[tuple[str, int, int, int]]: ...
    def status(self, crawl: str, url: str, key: str) -> StoredURL | None: ...
    def urls(self, crawl: str, key: str, *, start: int, size: int, contains: str | None,
             ignore_case: bool) -> list[StoredURL]: ...
    def count(self, crawl: str, key: str, *, contains: str | None,
              ignore_case: bool) -> int: ...


class URLStore:
    """The frontier's URLs and queues in SQLite (``:memory:`` or a file path)."""

    def __init__(self, path: str, *, default_delay_s: float,
                 spacing_from_return: bool = False, page: int = QUEUE_PAGE) -> None:
        """``spacing_from_return``: a queue's delay runs from when its URL in flight came
        back (an update, or its lease lapsing), and a queue has one URL in flight at most,
        so that the spacing holds at the site whenever the crawler fetches what it got;
        otherwise (the reference service's way) from when it last gave URLs. ``page``: the
        queues :meth:`take` reads at a time."""
        if path != ":memory:":
            folder = Path(path).parent
            if not folder.is_dir():
                raise ConfigError(f"--store sqlite:///{path}: {folder} is not a folder")
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(uf_queues)")}
            if "held_until" not in columns:  # a file from before queues were held
                self._db.execute("ALTER TABLE uf_queues ADD COLUMN held_until REAL NOT NULL"
                                 " DEFAULT 0")
        except sqlite3.Error as exc:
            raise ConfigError(f"--store sqlite:///{path}: {exc}") from exc
        self._lock = threading.Lock()
        self._default_delay_s = default_delay_s
        self._from_return = spacing_from_return
        self._page = page

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writing ---------------------------------------------------------------------------

    def put(self, items: Sequence[Put], now: float) -> None:
        """Store the items in one transaction: a discovered URL is added unless its crawl
        knows it already; a known URL replaces what was kept (metadata, key, due date) and
        its lease ends."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                for item in items:
                    meta = json.dumps(item.metadata, separators=(",", ":"))
                    if item.known:
                        due = item.refetch_at if item.refetch_at > 0 else None
                        if self._from_return:  # the fetch is over: the spacing runs from now
                            db.execute(
                                "UPDATE uf_queues SET served_at = ? WHERE crawl = ? AND key IN"
                                " (SELECT key FROM uf_urls WHERE crawl = ? AND url = ?"
                                " AND lease_until > ?)",
                                (now, item.crawl, item.crawl, item.url, now))
                        db.execute(
                            "INSERT INTO uf_urls (crawl, url, key, metadata, due, known,"
                            " created) VALUES (?, ?, ?, ?, ?, 1, ?)"
                            " ON CONFLICT (crawl, url) DO UPDATE SET key = excluded.key,"
                            " metadata = excluded.metadata,"
                            " due = excluded.due, known = 1, lease_until = 0",
                            (item.crawl, item.url, item.key, meta, due, int(now)))
                    else:
                        db.execute(
                            "INSERT INTO uf_urls (crawl, url, key, metadata, due, created)"
                            " VALUES (?, ?, ?, ?, 0, ?) ON CONFLICT (crawl, url) DO NOTHING",
                            (item.crawl, item.url, item.key, meta, int(now)))
                    db.execute("INSERT INTO uf_queues (crawl, key) VALUES (?, ?)"
                               " ON CONFLICT DO NOTHING", (item.crawl, item.key))
                    db.execute("INSERT INTO uf_crawls (crawl) VALUES (?) ON CONFLICT DO NOTHING",
                               (item.crawl,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def take(self, crawl: str | None, key: str, *, per_queue: int, queues: int,
             lease_s: float, now: float) -> list[StoredURL]:
        """Lease the URLs due at ``now`` from at most ``queues`` queues (0: any number), at
        most ``per_queue`` of each (0: any number), the earliest due first in each queue;
        a queue gives URLs only when its delay has passed since it last gave some, it is not
        blocked and its crawl limit is not reached. ``crawl`` ``None``: every crawl."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                taken = self._take(crawl, key, per_queue, queues, lease_s, now)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return taken

    def heads(self, crawl: str | None, key: str, *, per_queue: int, queues: int, now: float
              ) -> list[StoredURL]:
        """The next URLs of each queue that :meth:`take` would give from, none leased: what
        the politeness driver is asked about before :meth:`lease` takes them. With
        ``spacing_from_return``, one URL of a queue with a spacing (its delay, or the
        host's interval as its last lease found it), up to ``per_queue`` of one without."""
        with self._lock:
            return self._take(crawl, key, per_queue, queues, 0.0, now, lease=False)

    def lease(self, crawl: str, url: str, lease_s: float, now: float, *,
              interval_s: float = 0.0) -> bool:
        """Lease one URL if it is still due and not leased; its queue has served now and
        keeps ``interval_s`` (the host's spacing as politeness found it) as its delay's
        floor. With ``spacing_from_return``, a queue with a spacing (that floor or its
        delay) has one URL in flight at most."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT u.key, q.delay_s, c.delay_s, q.crawl_limit FROM uf_urls u"
                    " JOIN uf_queues q ON q.crawl = u.crawl AND q.key = u.key"
                    " LEFT JOIN uf_crawls c ON c.crawl = u.crawl"
                    " WHERE u.crawl = ? AND u.url = ? AND u.due IS NOT NULL AND u.due <= ?"
                    " AND u.lease_until <= ?", (crawl, url, now, now)).fetchone()
                if row is not None and self._from_return and max(
                        self._delay(row[1], row[2]), interval_s) > 0 and db.execute(
                        "SELECT 1 FROM uf_urls WHERE crawl = ? AND key = ?"
                        " AND lease_until > ? LIMIT 1", (crawl, row[0], now)).fetchone():
                    row = None  # one in flight already
                if row is not None and row[3] and self._left(crawl, row[0], row[3], now) <= 0:
                    row = None  # the queue's crawl limit is reached
                if row is not None:
                    db.execute("UPDATE uf_urls SET lease_until = ? WHERE crawl = ? AND url = ?",
                               (now + lease_s, crawl, url))
                    db.execute("UPDATE uf_queues SET served_at = ?, interval_s = ?"
                               " WHERE crawl = ? AND key = ?",
                               (now, interval_s, crawl, row[0]))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return row is not None

    def refuse(self, crawl: str, url: str, why: dict[str, list[str]]) -> None:
        """A URL that will never be handed out (robots.txt disallows it): completed, with
        ``why`` added to its metadata."""
        with self._lock:
            row = self._db.execute("SELECT metadata FROM uf_urls WHERE crawl = ? AND url = ?",
                                   (crawl, url)).fetchone()
            if row is None:
                return
            meta = json.loads(row[0])
            meta.update(why)
            self._db.execute(
                "UPDATE uf_urls SET due = NULL, lease_until = 0, metadata = ?"
                " WHERE crawl = ? AND url = ?",
                (json.dumps(meta, separators=(",", ":")), crawl, url))

    def _delay(self, queue_s: float | None, crawl_s: float | None) -> float:
        """A queue's delay: its own (SetDelay), else its crawl's, else the default."""
        if queue_s is not None:
            return queue_s
        return crawl_s if crawl_s is not None else self._default_delay_s

    def _left(self, crawl: str, key: str, limit: int, now: float) -> int:
        """What a queue's crawl limit leaves to hand out: the limit less its URLs completed
        and those in flight (a URL whose lease lapsed counts again only once it is back)."""
        done, flying = self._db.execute(
            "SELECT coalesce(sum(due IS NULL), 0),"
            " coalesce(sum(due IS NOT NULL AND lease_until > ?), 0)"
            " FROM uf_urls WHERE crawl = ? AND key = ?", (now, crawl, key)).fetchone()
        return limit - int(done) - int(flying)

    def _take(self, crawl: str | None, key: str, per_queue: int, queues: int, lease_s: float,
              now: float, *, lease: bool = True) -> list[StoredURL]:
        taken: list[StoredURL] = []
        served: list[tuple[float, str, str]] = []  # the queues that gave
        for q_crawl, q_key, served_at, q_delay, c_delay, limit, interval_s in self._turns(
                crawl, key, now):
            if (queues and len(served) >= queues) or len(taken) >= MAX_TAKE:
                break
            spacing = max(self._delay(q_delay, c_delay), interval_s)
            if served_at and now < served_at + spacing:
                continue
            if self._from_return and spacing > 0 and self._db.execute(
                    "SELECT 1 FROM uf_urls WHERE crawl = ? AND key = ? AND lease_until > ?"
                    " LIMIT 1", (q_crawl, q_key, now)).fetchone():
                continue  # one URL in flight
            room = min(per_queue or MAX_TAKE, MAX_TAKE - len(taken))
            if self._from_return and spacing > 0:
                room = 1
            if limit:
                left = self._left(q_crawl, q_key, limit, now)
                if left <= 0:
                    continue
                room = min(room, left)
            found = self._db.execute(
                "SELECT id, url, metadata, due, known, created FROM uf_urls"
                " WHERE crawl = ? AND key = ? AND due IS NOT NULL AND due <= ?"
                " AND lease_until <= ? ORDER BY due, id LIMIT ?",
                (q_crawl, q_key, now, now, room)).fetchall()
            if not found:
                continue
            served.append((now, q_crawl, q_key))
            if lease:
                self._db.executemany("UPDATE uf_urls SET lease_until = ? WHERE id = ?",
                                     [(now + lease_s, row[0]) for row in found])
            taken.extend(StoredURL(q_crawl, url, q_key, json.loads(meta), due, bool(known),
                                   created) for _, url, meta, due, known, created in found)
        if lease:  # once the pages are read: a queue that gave moves to the end of the order
            self._db.executemany("UPDATE uf_queues SET served_at = ? WHERE crawl = ? AND"
                                 " key = ?", served)
        return taken

    def _turns(self, crawl: str | None, key: str, now: float) -> Iterator[tuple[Any, ...]]:
        """The queues not blocked nor held at ``now``, the one that gave URLs longest ago
        first, read a page at a time from after the last one read (by time served, crawl,
        key; :meth:`_take` notes which gave only once it has read them)."""
        where, args = ["q.blocked_until <= ?", "q.held_until <= ?"], [now, now]
        if crawl is not None:
            where.append("q.crawl = ?")
            args.append(crawl)  # type: ignore[arg-type]
        if key:
            where.append("q.key = ?")
            args.append(key)  # type: ignore[arg-type]
        after: tuple[Any, ...] = ()
        while True:
            rows = self._db.execute(
                "SELECT q.crawl, q.key, q.served_at, q.delay_s, c.delay_s, q.crawl_limit,"
                " q.interval_s FROM uf_queues q LEFT JOIN uf_crawls c ON c.crawl = q.crawl"
                f" WHERE {' AND '.join(where)}"
                + (" AND (q.served_at, q.crawl, q.key) > (?, ?, ?)" if after else "")
                + " ORDER BY q.served_at, q.crawl, q.key LIMIT ?",
                [*args, *after, self._page]).fetchall()
            yield from rows
            if len(rows) < self._page:
                return
            after = (rows[-1][2], rows[-1][0], rows[-1][1])

    def delete_queue(self, crawl: str, key: str) -> int:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            gone = db.execute("DELETE FROM uf_urls WHERE crawl = ? AND key = ?",
                              (crawl, key)).rowcount
            db.execute("DELETE FROM uf_queues WHERE crawl = ? AND key = ?", (crawl, key))
            db.execute("COMMIT")
            return int(gone)

    def delete_crawl(self, crawl: str) -> int:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            gone = db.execute("DELETE FROM uf_urls WHERE crawl = ?", (crawl,)).rowcount
            db.execute("DELETE FROM uf_queues WHERE crawl = ?", (crawl,))
            db.execute("DELETE FROM uf_crawls WHERE crawl = ?", (crawl,))
            db.execute("COMMIT")
            return int(gone)

    def purge(self, crawl: str, key: str, before: float) -> int:
        """Delete the URLs first stored before ``before``."""
        sql, args = "DELETE FROM uf_urls WHERE crawl = ? AND created < ?", [crawl, before]
        if key:
            sql += " AND key = ?"
            args.append(key)
        with self._lock:
            return int(self._db.execute(sql, args).rowcount)

    def set_delay(self, crawl: str, key: str, delay_s: float) -> None:
        """A queue's delay, or with no key the crawl's default for every queue."""
        with self._lock:
            if key:
                self._db.execute(
                    "INSERT INTO uf_queues (crawl, key, delay_s) VALUES (?, ?, ?)"
                    " ON CONFLICT DO UPDATE SET delay_s = excluded.delay_s",
                    (crawl, key, delay_s))
            else:
                self._db.execute(
                    "INSERT INTO uf_crawls (crawl, delay_s) VALUES (?, ?)"
                    " ON CONFLICT DO UPDATE SET delay_s = excluded.delay_s", (crawl, delay_s))

    def block(self, crawl: str, key: str, until: float) -> None:
        with self._lock:
            self._db.execute("UPDATE uf_queues SET blocked_until = ? WHERE crawl = ? AND key = ?",
                             (until, crawl, key))

    def set_limit(self, crawl: str, key: str, limit: int) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO uf_queues (crawl, key, crawl_limit) VALUES (?, ?, ?)"
                " ON CONFLICT DO UPDATE SET crawl_limit = excluded.crawl_limit",
                (crawl, key, limit))

    def hold(self, queues: Sequence[tuple[str, str, float]]) -> None:
        """Pass each queue (crawl, key, until) over until then: politeness said its next
        URL must wait (the host's delay, a back-off, a Visit-time window, robots.txt to be
        asked again), so that the queues which can give come first meanwhile."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("UPDATE uf_queues SET held_until = ? WHERE crawl = ? AND key = ?",
                               [(until, crawl, key) for crawl, key, until in queues])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    # -- the nodes sharing the file ----------------------------------------------------------

    def beat(self, node: str, now: float) -> None:
        """``node`` is alive at ``now`` (a node that stops beating drops out of :meth:`nodes`)."""
        with self._lock:
            self._db.execute("INSERT INTO uf_nodes (node, seen) VALUES (?, ?)"
                             " ON CONFLICT DO UPDATE SET seen = excluded.seen", (node, now))

    def leave(self, node: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM uf_nodes WHERE node = ?", (node,))

    def nodes(self, since: float) -> list[str]:
        """The nodes that beat at ``since`` or later."""
        with self._lock:
            rows = self._db.execute("SELECT node FROM uf_nodes WHERE seen >= ? ORDER BY node",
                                    (since,))
            return [row[0] for row in rows]

    def set_active(self, node: str | None, active: bool) -> None:
        """One node's state, or every node's (``None``)."""
        with self._lock:
            if node is None:
                self._db.execute("UPDATE uf_nodes SET active = ?", (int(active),))
            else:
                self._db.execute("UPDATE uf_nodes SET active = ? WHERE node = ?",
                                 (int(active), node))

    def active(self, node: str | None, since: float) -> bool:
        """Whether the node (or, ``None``, every node that beat since ``since``) is active."""
        with self._lock:
            if node is None:
                row = self._db.execute("SELECT min(active) FROM uf_nodes WHERE seen >= ?",
                                       (since,)).fetchone()
            else:
                row = self._db.execute("SELECT active FROM uf_nodes WHERE node = ?",
                                       (node,)).fetchone()
        return row is None or row[0] is None or bool(row[0])

    # -- reading ---------------------------------------------------------------------------

    def crawls(self) -> list[str]:
        with self._lock:
            rows = self._db.execute("SELECT DISTINCT crawl FROM uf_queues ORDER BY crawl")
            return [row[0] for row in rows]

    def queues(self, crawl: str, *, include_inactive: bool, start: int, size: int,
               now: float) -> list[str]:
        """A page of the crawl's queue keys; active: holding URLs not completed (in flight
        or not) and not blocked."""
        sql = "SELECT key FROM uf_queues q WHERE crawl = ?"
        if not include_inactive:
            sql += (" AND blocked_until <= ? AND EXISTS (SELECT 1 FROM uf_urls u WHERE"
                    " u.crawl = q.crawl AND u.key = q.key AND u.due IS NOT NULL)")
        sql += " ORDER BY key LIMIT ? OFFSET ?"
        args: list[object] = [crawl, *([] if include_inactive else [now]), size, start]
        with self._lock:
            return [row[0] for row in self._db.execute(sql, args)]

    def stats(self, crawl: str, key: str, now: float) -> QueueStats:
        where, args = "crawl = ?", [crawl]
        if key:
            where += " AND key = ?"
            args.append(key)
        with self._lock:
            db = self._db
            size, in_process, completed = db.execute(
                "SELECT coalesce(sum(due IS NOT NULL AND lease_until <= ?), 0),"
                " coalesce(sum(due IS NOT NULL AND lease_until > ?), 0),"
                f" coalesce(sum(due IS NULL), 0) FROM uf_urls WHERE {where}",
                [now, now, *args]).fetchone()
            # counted along the queues' index, not by collecting the keys of every URL
            active = db.execute(
                f"SELECT count(*) FROM uf_queues q WHERE {where} AND EXISTS (SELECT 1 FROM"
                " uf_urls u WHERE u.crawl = q.crawl AND u.key = q.key AND u.due IS NOT NULL)",
                args).fetchone()[0]
            queues = db.execute(f"SELECT count(*) FROM uf_queues WHERE {where}",
                                args).fetchone()[0]
        return QueueStats(int(size), int(in_process), int(completed), int(active), int(queues))

    def queue_counts(self, crawl: str, limit: int, now: float
                     ) -> list[tuple[str, int, int, int]]:
        """(key, queued, in process, completed) of at most ``limit`` of the crawl's queues,
        those with the most URLs not completed first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT q.key, coalesce(sum(u.due IS NOT NULL AND u.lease_until <= ?), 0),"
                " coalesce(sum(u.due IS NOT NULL AND u.lease_until > ?), 0),"
                " coalesce(sum(u.id IS NOT NULL AND u.due IS NULL), 0) AS done"
                " FROM uf_queues q LEFT JOIN uf_urls u ON u.crawl = q.crawl AND u.key = q.key"
                " WHERE q.crawl = ? GROUP BY q.key"
                " ORDER BY count(u.id) - done DESC, q.key LIMIT ?",
                (now, now, crawl, limit)).fetchall()
        return [(str(k), int(a), int(b), int(c)) for k, a, b, c in rows]

    def status(self, crawl: str, url: str, key: str) -> StoredURL | None:
        sql, args = "SELECT * FROM uf_urls WHERE crawl = ? AND url = ?", [crawl, url]
        if key:
            sql += " AND key = ?"
            args.append(key)
        with self._lock:
            row = self._db.execute(sql, args).fetchone()
        return None if row is None else _stored(row)

    def urls(self, crawl: str, key: str, *, start: int, size: int, contains: str | None,
             ignore_case: bool) -> list[StoredURL]:
        sql, args = self._filtered("SELECT *", crawl, key, contains, ignore_case)
        sql += " ORDER BY id LIMIT ? OFFSET ?"
        args += [size, start]
        with self._lock:
            return [_stored(row) for row in self._db.execute(sql, args)]

    def count(self, crawl: str, key: str, *, contains: str | None, ignore_case: bool) -> int:
        sql, args = self._filtered("SELECT count(*)", crawl, key, contains, ignore_case)
        with self._lock:
            return int(self._db.execute(sql, args).fetchone()[0])

    @staticmethod
    def _filtered(select: str, crawl: str, key: str, contains: str | None,
                  ignore_case: bool) -> tuple[str, list[object]]:
        sql, args = f"{select} FROM uf_urls WHERE crawl = ?", [crawl]
        if key:
            sql += " AND key = ?"
            args.append(key)
        if contains:
            if ignore_case:
                sql += " AND instr(lower(url), lower(?)) > 0"
            else:
                sql += " AND instr(url, ?) > 0"
            args.append(contains)
        return sql, list(args)


def _stored(row: tuple[object, ...]) -> StoredURL:
    _, crawl, url, key, meta, due, _, known, created = row
    return StoredURL(str(crawl), str(url), str(key), json.loads(str(meta)),
                     None if due is None else float(due),  # type: ignore[arg-type]
                     bool(known), int(created))  # type: ignore[call-overload]

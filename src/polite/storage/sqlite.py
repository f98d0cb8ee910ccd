"""The embedded store: one SQLite file in WAL mode, the default of ``polite serve``.

Every write is its own transaction, so a kill loses nothing that was answered. A slot is
claimed inside ``BEGIN IMMEDIATE``, so several processes sharing the file still hand each
slot out once. Statements run on the caller's thread: each is a few microseconds on a
local file, less than a hop to a worker thread would cost. A crawl's frontier may share the
connection (:meth:`polite.storage.frontier.SQLiteFrontier` with ``store``), so that a
page's writes to both are one commit.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from polite.core.politeness.rules import (
    RESPONSE_TIME_WEIGHT,
    HostClaim,
    SlotClaim,
    average_response_time,
    claim_first,
    claim_slot,
    shifted_start,
)
from polite.errors import ConfigError
from polite.storage.base import COUNTERS, FACTS, HostActivity, HostFacts, RobotsRecord

__all__ = ["SQLiteStore", "Transaction", "apply_schema", "open_database"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS slots (
    host TEXT PRIMARY KEY, last_start REAL, backoff_until REAL, lease_until REAL);
CREATE TABLE IF NOT EXISTS response_times (
    host TEXT PRIMARY KEY, seconds REAL NOT NULL);
CREATE TABLE IF NOT EXISTS delays (
    domain TEXT PRIMARY KEY, delay_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS robots_delays (
    host TEXT PRIMARY KEY, delay_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS robots (
    origin TEXT PRIMARY KEY, kind TEXT NOT NULL, status INTEGER NOT NULL, body BLOB NOT NULL,
    fetched_at REAL NOT NULL, expires_at REAL NOT NULL, failures INTEGER NOT NULL,
    reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pages (
    key TEXT PRIMARY KEY, blob BLOB NOT NULL, size INTEGER NOT NULL, used REAL NOT NULL);
CREATE INDEX IF NOT EXISTS pages_used ON pages (used);
CREATE TABLE IF NOT EXISTS page_bytes (id INTEGER PRIMARY KEY CHECK (id = 0), total INTEGER);
CREATE TABLE IF NOT EXISTS activity (
    host TEXT PRIMARY KEY, allowed INTEGER NOT NULL DEFAULT 0,
    robots_refused INTEGER NOT NULL DEFAULT 0, delay_refused INTEGER NOT NULL DEFAULT 0,
    cache_hits INTEGER NOT NULL DEFAULT 0, last_seen REAL, origin TEXT, delay_s REAL,
    delay_source TEXT, robots_status TEXT, next_at REAL, backoff_until REAL,
    backoff_reason TEXT);
CREATE TABLE IF NOT EXISTS nodes (node TEXT PRIMARY KEY, info TEXT NOT NULL, until REAL);
INSERT OR IGNORE INTO page_bytes (id, total) SELECT 0, COALESCE(SUM(size), 0) FROM pages;
"""

_NO_SLOT = (None, None, None)  # a host never claimed

# A host as a held store keeps it in memory (see SQLiteStore): its slot's three columns,
# its response time and its configured delay, read from the file in one statement.
_LAST, _BACKOFF, _LEASE, _SECONDS, _DELAY = range(5)
_HOST_ROW = ("SELECT (SELECT last_start FROM slots WHERE host = ?1), "
             "(SELECT backoff_until FROM slots WHERE host = ?1), "
             "(SELECT lease_until FROM slots WHERE host = ?1), "
             "(SELECT seconds FROM response_times WHERE host = ?1), "
             "(SELECT delay_s FROM delays WHERE domain = ?1)")
_WRITE_SLOT = ("INSERT INTO slots (host, last_start, backoff_until, lease_until) VALUES "
               "(?, ?, ?, ?) ON CONFLICT(host) DO UPDATE SET last_start = "
               "excluded.last_start, backoff_until = excluded.backoff_until, lease_until = "
               "excluded.lease_until")
_WRITE_SECONDS = ("INSERT INTO response_times (host, seconds) VALUES (?, ?) ON CONFLICT "
                  "(host) DO UPDATE SET seconds = excluded.seconds")
# Hosts a held store keeps in memory at most: past it, the longest kept half is forgotten
# at a commit, all written by then (read again from the file when next asked).
MAX_HELD_HOSTS = 100_000

# Counters add up; a fact given replaces the stored one, a NULL keeps it (nodes sharing the
# file each report what they saw).
_ADD_ACTIVITY = (
    f"INSERT INTO activity (host, {', '.join((*COUNTERS, *FACTS))}) VALUES "
    f"({', '.join('?' * (1 + len(COUNTERS) + len(FACTS)))}) ON CONFLICT (host) DO UPDATE SET "
    + ", ".join([*(f"{c} = {c} + excluded.{c}" for c in COUNTERS),
                 *(f"{f} = coalesce(excluded.{f}, {f})" for f in FACTS)]))


def open_database(path: str | Path, schema: str, what: str, *,
                  busy_timeout_s: float = 5.0) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL with NORMAL sync
    (a commit survives a kill of the process), ``schema`` applied; :class:`ConfigError`
    naming ``what`` when the file cannot be opened. Processes opening one file at once wait
    for each other within ``busy_timeout_s``, as writes do."""
    try:
        db = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None,
                             check_same_thread=False)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open {what} at {path}: {exc}") from exc
    try:
        _while_busy(lambda: db.execute("PRAGMA journal_mode=WAL"), busy_timeout_s)
        db.execute("PRAGMA synchronous=NORMAL")
        apply_schema(db, schema, busy_timeout_s=busy_timeout_s)
    except sqlite3.Error as exc:
        db.close()
        raise ConfigError(f"cannot open {what} at {path}: {exc}") from exc
    return db


def apply_schema(db: sqlite3.Connection, schema: str, *, busy_timeout_s: float = 5.0) -> None:
    """``schema`` (statements that may run again: ``IF NOT EXISTS``) in one write
    transaction, waiting within ``busy_timeout_s`` for processes opening the file too."""

    def apply() -> None:
        try:
            # BEGIN IMMEDIATE takes the write lock first, through the busy handler: no
            # reader's lock is upgraded half-way, which SQLite refuses at once rather than
            # wait (its deadlock rule)
            db.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")
        except sqlite3.Error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    _while_busy(apply, busy_timeout_s)


_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})  # with extended codes masked


def _while_busy(step: Callable[[], object], busy_timeout_s: float) -> None:
    """``step``, tried again while SQLite answers "database is locked" without waiting (a
    change of journal mode, or a file another process is creating), until
    ``busy_timeout_s`` has passed."""
    deadline = time.monotonic() + busy_timeout_s
    pause = 0.001
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            busy = (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _BUSY
            if not busy or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


class Transaction:
    """``BEGIN`` ... ``COMMIT`` (``ROLLBACK`` when the block raises) around the outermost of
    nested blocks on one connection: a write made inside an open transaction joins it. Used
    as ``with transaction:`` (a write transaction) or ``with transaction(write=False):``,
    and as an async context manager (a frontier's batch).

    Held (:meth:`hold`), the outermost blocks are savepoints of one transaction that stays
    open until :meth:`commit`: a block that raises is undone alone, and many blocks cost
    one commit, the pages they all change (the queue's index, the seed counter, the slots)
    written to the log once rather than once a block. Only for a connection whose file no
    other process writes: the write lock is held between commits."""

    __slots__ = ("_before_commit", "_begin", "_db", "_depth", "_held", "_listeners",
                 "_on_begin", "_undo")

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._depth = 0
        self._begin = "BEGIN IMMEDIATE"
        self._held = False
        self._on_begin: Callable[[], object] | None = None
        self._listeners: list[Callable[[bool], object]] = []
        self._before_commit: list[Callable[[], object]] = []
        self._undo: list[Callable[[], object]] = []  # the open held block's, in order

    def listen(self, listener: Callable[[bool], object]) -> None:
        """Call ``listener(True)`` after each commit, and ``listener(False)`` when what was
        written since the last commit may be undone (a block rolled back, a transaction
        ended by an error) or a transaction begins: a cache of what the file holds takes
        in what a transaction wrote once it is committed, and only then."""
        self._listeners.append(listener)

    def forget(self, listener: Callable[[bool], object]) -> None:
        """No longer call ``listener`` (its cache closed with its frontier)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def before_commit(self, write: Callable[[], object]) -> None:
        """Call ``write`` as each :meth:`commit` begins, with no block open: what a store
        keeps in memory while the transaction is held goes into the file with the group
        (``write`` begins a transaction when none is open and it has something to write)."""
        self._before_commit.append(write)

    def on_undo(self, undo: Callable[[], object]) -> None:
        """Inside a held block: call ``undo`` should the block be rolled back, so that what
        the block changed in memory is taken back with what it wrote (later changes are
        undone first). Outside one, or not held, nothing is kept: there is nothing to take
        back but the file's own writes."""
        if self._depth and self._held:
            self._undo.append(undo)

    def _tell(self, committed: bool) -> None:
        for listener in self._listeners:
            listener(committed)

    def __call__(self, *, write: bool = True) -> Transaction:
        if self._depth == 0 and not write and not self._held:
            self._begin = "BEGIN"  # a snapshot to read, taking no write lock
        return self

    def begin_held(self) -> None:
        """Held, make sure the transaction is open: a change kept in memory for it is then
        committed with the group, as soon as a write in the file would be."""
        if self._held and not self._db.in_transaction:
            self._tell(False)
            self._db.execute("BEGIN IMMEDIATE")
            if self._on_begin is not None:
                self._on_begin()

    def __enter__(self) -> None:
        if self._depth == 0:
            if self._held:
                self.begin_held()
                self._db.execute("SAVEPOINT block")
            else:
                self._tell(False)
                begin, self._begin = self._begin, "BEGIN IMMEDIATE"
                self._db.execute(begin)
        self._depth += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._depth -= 1
        if self._depth:
            return
        if self._held:
            undo, self._undo = self._undo, []
            if kind is not None:
                for step in reversed(undo):
                    step()
            if not self._db.in_transaction:  # an error (a full disk) ended it all
                self._tell(False)
                return
            if kind is not None:
                self._tell(False)
                self._db.execute("ROLLBACK TO block")
            self._db.execute("RELEASE block")
            return
        if kind is None:
            self._end()
            return
        self._tell(False)
        if self._db.in_transaction:  # an error may have ended it already
            self._db.execute("ROLLBACK")

    def _end(self) -> None:
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error:
            self._failed()
            raise
        self._tell(True)

    def _failed(self) -> None:
        """A commit, or what was written just before it, failed (a full disk): listeners
        are told, and the transaction it may leave open is ended so that the next BEGIN
        starts afresh."""
        self._tell(False)
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

    def hold(self, on_begin: Callable[[], object] | None = None) -> None:
        """From now on the outermost blocks join one transaction until :meth:`commit`;
        ``on_begin`` is called when that transaction begins (to plan its commit)."""
        self._held = True
        self._on_begin = on_begin

    @property
    def held(self) -> bool:
        """Whether blocks join one transaction until :meth:`commit` (:meth:`hold`): the
        file has no other writer, and what is kept of it in memory stays true."""
        return self._held

    @property
    def holding(self) -> bool:
        """Whether blocks made since the last :meth:`commit` are waiting for it."""
        return self._held and self._db.in_transaction

    def commit(self, *, hold: bool = True) -> bool:
        """Commit what the held blocks wrote, and what :meth:`before_commit`'s writers add
        (nothing while a block is open: False); with ``hold=False``, each block is its own
        transaction again from then on."""
        if self._depth:
            return False
        try:
            for write in self._before_commit:
                write()
        except sqlite3.Error:
            self._failed()
            raise
        self._held = hold
        if self._db.in_transaction:
            self._end()
        return True

    async def __aenter__(self) -> None:
        self.__enter__()

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(kind, exc, tb)


# A database file holds its first page whole, and no page is under 512 bytes: a file
# shorter than that lost what was in it (truncated under the process).
_LEAST_FILE_BYTES = 512
_HEADER = b"SQLite format 3\x00"


class SQLiteStore:
    """``clock`` must be comparable between processes that share the file: wall time.

    A write is followed by a look at the file opened: when it has no name left (deleted,
    or replaced by another file) or was truncated, what was written went where no restart
    finds it, and the write raises ``sqlite3.DatabaseError`` rather than be acknowledged
    (3,000 writes answered 200 into a deleted file were gone after a restart). The look is
    an ``fstat`` of a descriptor kept open, a few microseconds beside a commit's tens; it
    is never closed before the connection, as closing any descriptor of the file would
    drop the locks SQLite holds on it (POSIX advisory locks are per process).

    While its transaction is held (:meth:`Transaction.hold`: a crawl alone with its
    folder's file), no other process writes the file, so the hosts' slots, response times
    and configured delays are kept in memory: read from the file once a host, changed
    there, and written with the group's commit (:meth:`Transaction.before_commit`) rather
    than in four statements a page. A held block that is rolled back takes its changes
    back (:meth:`Transaction.on_undo`); a commit that fails leaves them to be written with
    the next one. What a kill loses is what it loses held: the group not yet committed."""

    def __init__(self, path: str | Path, clock: Callable[[], float], *,
                 busy_timeout_s: float = 5.0) -> None:
        self._clock = clock
        self.path = Path(path)
        self._db = open_database(path, _SCHEMA, "the SQLite store",
                                 busy_timeout_s=busy_timeout_s)
        self.transaction = Transaction(self._db)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(slots)")}
        if "lease_until" not in columns:  # a file from before slots had leases
            with self.transaction:
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(slots)")}
                if "lease_until" not in columns:  # another process may have added it
                    self._db.execute("ALTER TABLE slots ADD COLUMN lease_until REAL")
        # The file opened, and its device and inode (None: no file, ":memory:").
        self._fd: int | None = None
        self._file = (0, 0)
        if str(path) not in ("", ":memory:"):
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except OSError as exc:
                self._db.close()
                raise ConfigError(f"cannot open the SQLite store at {path}: "
                                  f"{exc.strerror}") from None
            found = os.fstat(self._fd)
            self._file = (found.st_dev, found.st_ino)
        # host -> its row (_LAST ... _DELAY) while the transaction is held; the hosts
        # changed since the last commit
        self._rows: dict[str, list[float | None]] = {}
        self._dirty: set[str] = set()
        self.transaction.before_commit(self._write_held)
        self.transaction.listen(self._ended)

    def _held(self, host: str) -> list[float | None] | None:
        """``host``'s row kept in memory, read from the file at its first use; ``None``
        while the transaction is not held (the file is the truth, and what was kept is
        forgotten: another process may write it from now on)."""
        if not self.transaction.held:
            if self._rows:
                self._rows.clear()
                self._dirty.clear()
            return None
        row = self._rows.get(host)
        if row is None:
            row = self._rows[host] = list(self._db.execute(_HOST_ROW, (host,)).fetchone())
        return row

    def _change(self, host: str, row: list[float | None]) -> None:
        """``row`` (``host``'s, held) is about to change: written at the next commit, and
        taken back with a held block that is rolled back."""
        self.transaction.begin_held()
        self._dirty.add(host)
        before = row.copy()
        self.transaction.on_undo(lambda: self._rows.__setitem__(host, before))

    def _write_held(self) -> None:
        """The rows changed since the last commit, into the transaction about to commit."""
        if not self._dirty or not self.transaction.held:
            return
        rows = self._rows
        slots = [(host, row[_LAST], row[_BACKOFF], row[_LEASE])
                 for host in self._dirty if (row := rows[host])[:3] != [None, None, None]]
        seconds = [(host, row[_SECONDS]) for host in self._dirty
                   if (row := rows[host])[_SECONDS] is not None]
        if not self._db.in_transaction:
            self._db.execute("BEGIN IMMEDIATE")
        self._db.executemany(_WRITE_SLOT, slots)
        self._db.executemany(_WRITE_SECONDS, seconds)
        self._kept()

    def _ended(self, committed: bool) -> None:
        if not committed:
            return  # what was changed is still to be written (a block undone took its own)
        self._dirty.clear()
        rows = self._rows
        if len(rows) > MAX_HELD_HOSTS:
            for host in list(rows)[:len(rows) - MAX_HELD_HOSTS // 2]:
                del rows[host]

    def _kept(self) -> None:
        """Raise ``sqlite3.DatabaseError`` when the file this store opened has no name left
        or lost its pages: what was just written would not be read again."""
        if self._fd is None:
            return
        found = os.fstat(self._fd)
        if found.st_nlink == 0:
            raise sqlite3.DatabaseError(
                f"the SQLite store {self.path} is no longer the file opened (deleted or "
                "replaced): what is written now would be lost; restart polite serve")
        if found.st_size < _LEAST_FILE_BYTES:
            raise sqlite3.DatabaseError(
                f"the SQLite store {self.path} was truncated to {found.st_size} bytes: what "
                "it held is lost and what is written now would be; restore it or start "
                "with a new file")

    async def check(self) -> None:
        """The file opened is still the file at the path (its device and inode), whole,
        readable and a SQLite database, and the connection answers."""
        self._kept()
        if self._fd is not None:
            try:
                found = os.stat(self.path)
            except OSError as exc:
                raise sqlite3.DatabaseError(
                    f"the SQLite store {self.path} is no longer the file opened "
                    f"({exc.strerror})") from None
            if (found.st_dev, found.st_ino) != self._file:
                raise sqlite3.DatabaseError(
                    f"the SQLite store {self.path} is no longer the file opened (another "
                    "file is at its path): what is written now would be lost; restart "
                    "polite serve")
            try:
                header = os.pread(self._fd, len(_HEADER), 0)
            except OSError as exc:
                raise sqlite3.DatabaseError(f"the SQLite store {self.path} cannot be read "
                                            f"({exc.strerror})") from None
            if header != _HEADER:
                raise sqlite3.DatabaseError(f"the SQLite store {self.path} is no longer a "
                                            "SQLite database (its header is overwritten)")
        self._db.execute("SELECT count(*) FROM delays").fetchone()

    @property
    def connection(self) -> sqlite3.Connection:
        """The store's connection, for a frontier in the same file to share."""
        return self._db

    async def clock(self) -> float:
        return self._clock()

    def _slot(self, host: str) -> tuple[float | None, float | None]:
        row = self._db.execute("SELECT last_start, backoff_until FROM slots WHERE host = ?",
                               (host,)).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    async def claim(self, host: str, interval_s: float, now: float | None = None) -> SlotClaim:
        now = self._clock() if now is None else now
        row = self._held(host)
        if row is not None:
            answer = claim_slot(row[_LAST], row[_BACKOFF], interval_s, now)
            if answer.granted:
                self._change(host, row)
                row[_LAST] = answer.at
            return answer
        with self.transaction:
            last_start, backoff_until = self._slot(host)
            answer = claim_slot(last_start, backoff_until, interval_s, now)
            if answer.granted:
                self._db.execute(
                    "INSERT INTO slots (host, last_start) VALUES (?, ?) ON CONFLICT(host) "
                    "DO UPDATE SET last_start = excluded.last_start", (host, answer.at))
        if answer.granted:
            self._kept()
        return answer

    async def peek(self, host: str, interval_s: float, now: float | None = None) -> SlotClaim:
        now = self._clock() if now is None else now
        row = self._held(host)
        if row is not None:
            return claim_slot(row[_LAST], row[_BACKOFF], interval_s, now)
        last_start, backoff_until = self._slot(host)
        return claim_slot(last_start, backoff_until, interval_s, now)

    async def back_off(self, host: str, until: float) -> None:
        row = self._held(host)
        if row is not None:
            self._change(host, row)
            row[_BACKOFF] = max(row[_BACKOFF] or 0.0, until)
            return
        self._db.execute(
            "INSERT INTO slots (host, backoff_until) VALUES (?, ?) ON CONFLICT(host) DO UPDATE "
            "SET backoff_until = max(coalesce(backoff_until, 0), excluded.backoff_until)",
            (host, until))
        self._kept()

    async def shift_start(self, host: str, late_s: float) -> None:
        if late_s > 0:
            row = self._held(host)
            if row is not None:
                last_start = row[_LAST]
                if last_start is not None:
                    self._change(host, row)
                    row[_LAST] = shifted_start(last_start, late_s, self._clock())
                return
            with self.transaction():
                last_start, _ = self._slot(host)
                if last_start is not None:
                    self._db.execute("UPDATE slots SET last_start = ? WHERE host = ?",
                                     (shifted_start(last_start, late_s, self._clock()), host))
            self._kept()

    async def claim_batch(self, requests: Sequence[tuple[str, tuple[float, ...]]], *,
                          take: bool, lease_s: float | None = None) -> list[HostClaim]:
        now = self._clock()
        db = self._db
        answers = []
        if self.transaction.held:
            for host, intervals in requests:
                kept = self._held(host)
                assert kept is not None
                answer = claim_first(kept[_LAST], kept[_BACKOFF], intervals, now, kept[_LEASE])
                if take and answer.granted >= 0:
                    self._change(host, kept)
                    kept[_LAST] = now
                    kept[_LEASE] = None if lease_s is None else now + lease_s
                answers.append(answer)
            return answers
        with self.transaction(write=take):
            for host, intervals in requests:
                row = db.execute("SELECT last_start, backoff_until, lease_until FROM slots "
                                 "WHERE host = ?", (host,)).fetchone() or _NO_SLOT
                answer = claim_first(row[0], row[1], intervals, now, row[2])
                if take and answer.granted >= 0:
                    # a lease lapsed before is gone with the new grant
                    db.execute("INSERT INTO slots (host, last_start, lease_until) VALUES "
                               "(?, ?, ?) ON CONFLICT(host) DO UPDATE SET last_start = "
                               "excluded.last_start, lease_until = excluded.lease_until",
                               (host, now, None if lease_s is None else now + lease_s))
                answers.append(answer)
        if take:
            self._kept()
        return answers

    async def host_facts(self, hosts: Sequence[str]) -> list[HostFacts]:
        if self.transaction.held:
            rows = [self._held(host) for host in hosts]
            return [HostFacts(row[_DELAY], row[_SECONDS]) for row in rows if row is not None]
        facts = []
        for host in hosts:  # one statement a host, both facts at once
            delay, seconds = self._db.execute(
                "SELECT (SELECT delay_s FROM delays WHERE domain = ?1), "
                "(SELECT seconds FROM response_times WHERE host = ?1)", (host,)).fetchone()
            facts.append(HostFacts(None if delay is None else float(delay),
                                   None if seconds is None else float(seconds)))
        return facts

    async def note_response(self, host: str, elapsed_s: float | None,
                            pause_s: float | None, *, ends_lease: bool = False) -> None:
        row = self._held(host)
        if row is not None:
            self._change(host, row)
            if pause_s is not None:
                row[_BACKOFF] = max(row[_BACKOFF] or 0.0, self._clock() + pause_s)
            if ends_lease:
                row[_LEASE] = None
            if elapsed_s is not None:
                row[_SECONDS] = average_response_time(row[_SECONDS], elapsed_s)
            return
        if ends_lease:
            # The pause and the lease's end in one transaction: another process granted
            # the host once the lease is gone sees the pause already.
            with self.transaction():
                if pause_s is not None:
                    await self.back_off(host, self._clock() + pause_s)
                self._db.execute("UPDATE slots SET lease_until = NULL WHERE host = ?",
                                 (host,))
            self._kept()
            pause_s = None
        if elapsed_s is not None:
            # average_response_time, as one atomic statement (the Redis store has a Lua twin;
            # the contract suite holds all three to the same numbers).
            self._db.execute(
                "INSERT INTO response_times (host, seconds) VALUES (?, ?) ON CONFLICT (host) "
                "DO UPDATE SET seconds = seconds + ? * (excluded.seconds - seconds)",
                (host, elapsed_s, RESPONSE_TIME_WEIGHT))
            self._kept()
        if pause_s is not None:
            await self.back_off(host, self._clock() + pause_s)

    async def get_delay(self, domain: str) -> float | None:
        row = self._db.execute("SELECT delay_s FROM delays WHERE domain = ?",
                               (domain,)).fetchone()
        return None if row is None else float(row[0])

    async def set_delay(self, domain: str, delay_s: float) -> None:
        self._db.execute("INSERT INTO delays (domain, delay_s) VALUES (?, ?) ON CONFLICT(domain) "
                         "DO UPDATE SET delay_s = excluded.delay_s", (domain, delay_s))
        self._kept()
        self._delay_held(domain, delay_s)

    async def delete_delay(self, domain: str) -> None:
        self._db.execute("DELETE FROM delays WHERE domain = ?", (domain,))
        self._kept()
        self._delay_held(domain, None)

    def _delay_held(self, domain: str, delay_s: float | None) -> None:
        """A configured delay written to the file, in the host's row kept in memory too
        (taken back with a held block that is rolled back, as the file's write is)."""
        row = self._rows.get(domain) if self.transaction.held else None
        if row is not None:
            before = row.copy()
            self.transaction.on_undo(lambda: self._rows.__setitem__(domain, before))
            row[_DELAY] = delay_s

    async def all_delays(self) -> dict[str, float]:
        rows = self._db.execute("SELECT domain, delay_s FROM delays ORDER BY domain")
        return {domain: float(delay) for domain, delay in rows}

    async def set_robots_delay(self, host: str, delay_s: float) -> None:
        self._db.execute("INSERT INTO robots_delays (host, delay_s) VALUES (?, ?) ON CONFLICT"
                         "(host) DO UPDATE SET delay_s = excluded.delay_s", (host, delay_s))
        self._kept()

    async def all_robots_delays(self) -> dict[str, float]:
        rows = self._db.execute("SELECT host, delay_s FROM robots_delays")
        return {host: float(delay) for host, delay in rows}

    async def load_robots(self, origin: str) -> RobotsRecord | None:
        row = self._db.execute(
            "SELECT origin, kind, status, body, fetched_at, expires_at, failures, reason "
            "FROM robots WHERE origin = ?", (origin,)).fetchone()
        return None if row is None else RobotsRecord(*row)

    async def save_robots(self, record: RobotsRecord) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO robots (origin, kind, status, body, fetched_at, expires_at, "
            "failures, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (record.origin, record.kind, record.status, record.body, record.fetched_at,
             record.expires_at, record.failures, record.reason))
        self._kept()

    async def page_get(self, key: str) -> bytes | None:
        row = self._db.execute("SELECT blob FROM pages WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self._db.execute("UPDATE pages SET used = ? WHERE key = ?", (self._clock(), key))
        return bytes(row[0])

    async def page_put(self, key: str, blob: bytes, *, max_total_bytes: int) -> None:
        # The total is kept in its own row, changed in the same transaction as the pages,
        # so a put costs the same with ten pages stored or a million.
        with self.transaction:
            old = self._db.execute("SELECT size FROM pages WHERE key = ?", (key,)).fetchone()
            self._db.execute("INSERT OR REPLACE INTO pages (key, blob, size, used) "
                             "VALUES (?, ?, ?, ?)", (key, blob, len(blob), self._clock()))
            self._db.execute("UPDATE page_bytes SET total = total + ? WHERE id = 0",
                             (len(blob) - (old[0] if old else 0),))
            (total,) = self._db.execute("SELECT total FROM page_bytes WHERE id = 0").fetchone()
            while total > max_total_bytes:
                row = self._db.execute("SELECT key, size FROM pages ORDER BY used LIMIT 1"
                                       ).fetchone()
                if row is None:
                    break
                self._db.execute("DELETE FROM pages WHERE key = ?", (row[0],))
                total -= row[1]
            self._db.execute("UPDATE page_bytes SET total = ? WHERE id = 0", (total,))
        self._kept()

    async def page_delete(self, key: str) -> None:
        with self.transaction:
            old = self._db.execute("SELECT size FROM pages WHERE key = ?", (key,)).fetchone()
            if old is not None:
                self._db.execute("DELETE FROM pages WHERE key = ?", (key,))
                self._db.execute("UPDATE page_bytes SET total = total - ? WHERE id = 0",
                                 (old[0],))
        self._kept()

    async def page_usage(self) -> tuple[int, int]:
        (count,) = self._db.execute("SELECT COUNT(*) FROM pages").fetchone()
        (total,) = self._db.execute("SELECT total FROM page_bytes WHERE id = 0").fetchone()
        return int(count), int(total)

    async def add_activity(self, rows: Sequence[HostActivity]) -> None:
        if not rows:
            return
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(_ADD_ACTIVITY, [
                tuple(getattr(row, name) for name in ("host", *COUNTERS, *FACTS))
                for row in rows])
        self._kept()

    async def all_activity(self) -> list[HostActivity]:
        rows = self._db.execute(f"SELECT host, {', '.join((*COUNTERS, *FACTS))} FROM activity")
        return [HostActivity(*row) for row in rows]

    async def node_beat(self, node: str, info: str, ttl_s: float) -> None:
        self._db.execute("INSERT OR REPLACE INTO nodes (node, info, until) VALUES (?, ?, ?)",
                         (node, info, self._clock() + ttl_s))
        self._kept()

    async def live_nodes(self) -> dict[str, str]:
        rows = self._db.execute("SELECT node, info FROM nodes WHERE until > ? ORDER BY node",
                                (self._clock(),))
        return dict(rows)

    async def close(self) -> None:
        self._db.close()  # a frontier sharing the connection is closed with it
        if self._fd is not None:  # after the connection: its locks are gone with it
            os.close(self._fd)
            self._fd = None

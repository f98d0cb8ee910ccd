"""The site's SQLite file: every saved version of the rules (with the robots.txt it made)
and the robot access log (seed 003, 4.9 and 4.11)."""

from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from polite.core.site import LogEntry, SiteRules, render, rules_from_json, rules_to_json
from polite.storage.sqlite import open_database

__all__ = ["RangeSource", "RobotStats", "SiteStore", "Version", "VisitRow"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS versions (
    id INTEGER PRIMARY KEY,
    saved_at REAL NOT NULL,
    author TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT '',
    rules TEXT NOT NULL,
    robots_txt TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS visits (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    ip TEXT,
    user_agent TEXT NOT NULL,
    robot TEXT NOT NULL,
    operator TEXT NOT NULL,
    category TEXT NOT NULL,
    verification TEXT NOT NULL,
    how TEXT NOT NULL,
    method TEXT NOT NULL,
    target TEXT NOT NULL,
    agent TEXT NOT NULL,
    allowed INTEGER NOT NULL,
    line INTEGER,
    rule TEXT NOT NULL,
    version INTEGER NOT NULL,
    action TEXT NOT NULL,
    status INTEGER,
    verified_by TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS ranges (
    crawler TEXT NOT NULL,
    source TEXT NOT NULL,
    creation_time REAL NOT NULL,
    fetched_at REAL NOT NULL,
    prefixes TEXT NOT NULL,
    PRIMARY KEY (crawler, source)
);
CREATE INDEX IF NOT EXISTS visits_robot ON visits (robot, at);
CREATE INDEX IF NOT EXISTS visits_at ON visits (at);
"""


@dataclass(frozen=True, slots=True)
class RangeSource:
    """A crawler's published range file as stored: where from, when the operator made it
    (``creation_time``) and when it was read here (``fetched_at``)."""

    crawler: str
    source: str
    creation_time: float
    fetched_at: float
    prefixes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Version:
    """A saved set of rules and the file it made; version 0 is the default, never saved."""

    id: int
    saved_at: float
    author: str
    note: str
    rules: SiteRules
    robots_txt: str


@dataclass(frozen=True, slots=True)
class VisitRow:
    """A logged robot request, as read back."""

    id: int
    at: float
    ip: str | None
    user_agent: str
    robot: str
    operator: str
    category: str
    verification: str
    how: str
    method: str
    target: str
    agent: str
    allowed: bool
    line: int | None
    rule: str
    version: int
    action: str
    status: int | None
    verified_by: str = ""  # "signature", "ranges", "dns" when verified


@dataclass(frozen=True, slots=True)
class RobotStats:
    """One robot's visits: how many, how verified, how many broke the file, where."""

    robot: str
    operator: str
    category: str
    visits: int
    verified: int
    forged: int
    disallowed: int
    refused: int
    throttled: int
    first_at: float
    last_at: float


_DEFAULT = SiteRules()


class SiteStore:
    """One SQLite file; safe to share between threads (one connection behind a lock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._db = open_database(path, _SCHEMA, "the site database")
        self._lock = threading.Lock()
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(visits)")}
        if "verified_by" not in columns:  # a database from before signatures were checked
            self._db.execute("ALTER TABLE visits ADD COLUMN verified_by TEXT NOT NULL "
                             "DEFAULT ''")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- versions ----------------------------------------------------------------------

    def current(self) -> Version:
        """The rules in force: the newest version, or the defaults before any save."""
        with self._lock:
            row = self._db.execute("SELECT id, saved_at, author, note, rules, robots_txt "
                                   "FROM versions ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            return Version(0, 0.0, "", "defaults", _DEFAULT, render(_DEFAULT).text)
        return self._version(row)

    def current_id(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT max(id) FROM versions").fetchone()
        return int(row[0] or 0)

    @staticmethod
    def _version(row: tuple[int, float, str, str, str, str]) -> Version:
        return Version(row[0], row[1], row[2], row[3], rules_from_json(row[4]), row[5])

    def version(self, version_id: int) -> Version | None:
        if version_id == 0:
            return Version(0, 0.0, "", "defaults", _DEFAULT, render(_DEFAULT).text)
        with self._lock:
            row = self._db.execute("SELECT id, saved_at, author, note, rules, robots_txt "
                                   "FROM versions WHERE id = ?", (version_id,)).fetchone()
        return None if row is None else self._version(row)

    def versions(self, limit: int = 100) -> list[Version]:
        """The newest versions first."""
        with self._lock:
            rows = self._db.execute("SELECT id, saved_at, author, note, rules, robots_txt "
                                    "FROM versions ORDER BY id DESC LIMIT ?",
                                    (limit,)).fetchall()
        return [self._version(r) for r in rows]

    def save(self, rules: SiteRules, *, now: float, author: str = "", note: str = "") -> Version:
        """Keep ``rules`` as a new version (the file in force from now)."""
        text = render(rules).text
        with self._lock:
            cursor = self._db.execute(
                "INSERT INTO versions (saved_at, author, note, rules, robots_txt) "
                "VALUES (?, ?, ?, ?, ?)", (now, author, note, rules_to_json(rules), text))
            version_id = int(cursor.lastrowid or 0)
        return Version(version_id, now, author, note, rules, text)

    def rollback(self, version_id: int, *, now: float, author: str = "") -> Version | None:
        """A new version with the rules of ``version_id`` (history is never rewritten)."""
        old = self.version(version_id)
        if old is None:
            return None
        return self.save(old.rules, now=now, author=author,
                         note=f"rollback to version {version_id}")

    def diff(self, version_id: int) -> str:
        """The change this version made to the file, as a unified diff."""
        new = self.version(version_id)
        if new is None:
            return ""
        with self._lock:
            row = self._db.execute("SELECT max(id) FROM versions WHERE id < ?",
                                   (version_id,)).fetchone()
        old = self.version(int(row[0] or 0))
        assert old is not None  # version 0 always exists
        lines = difflib.unified_diff(old.robots_txt.splitlines(), new.robots_txt.splitlines(),
                                     f"version {old.id}", f"version {new.id}", lineterm="")
        return "\n".join(lines)

    # -- published ranges --------------------------------------------------------------

    def save_ranges(self, crawler: str, source: str, creation_time: float,
                    prefixes: Iterable[str], fetched_at: float) -> None:
        """Keep ``crawler``'s file from ``source`` (replacing what that source gave)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO ranges (crawler, source, creation_time, fetched_at, "
                "prefixes) VALUES (?, ?, ?, ?, ?)",
                (crawler, source, creation_time, fetched_at, json.dumps(list(prefixes))))

    def ranges(self) -> list[RangeSource]:
        """Every stored range file, by crawler."""
        with self._lock:
            rows = self._db.execute("SELECT crawler, source, creation_time, fetched_at, "
                                    "prefixes FROM ranges ORDER BY crawler, source").fetchall()
        return [RangeSource(r[0], r[1], r[2], r[3], tuple(json.loads(r[4]))) for r in rows]

    def ranges_stamp(self) -> tuple[int, float]:
        """Changes whenever a range file is saved: how many, and the newest read."""
        with self._lock:
            row = self._db.execute("SELECT count(*), max(fetched_at) FROM ranges").fetchone()
        return int(row[0]), float(row[1] or 0.0)

    # -- the access log ----------------------------------------------------------------

    def log(self, entries: Iterable[tuple[LogEntry, int | None]]) -> None:
        """Record robot requests with the status they got."""
        rows = [(e.at, e.ip, e.user_agent, e.robot, e.operator, e.category,
                 str(e.verification), e.how, e.method, e.target, e.agent, int(e.allowed),
                 e.line, e.rule, e.version, str(e.action), status, e.by)
                for e, status in entries]
        with self._lock:
            self._db.executemany(
                "INSERT INTO visits (at, ip, user_agent, robot, operator, category, "
                "verification, how, method, target, agent, allowed, line, rule, version, "
                "action, status, verified_by) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows)

    def prune_visits(self, before: float) -> int:
        """Forget the robot requests logged before ``before``; how many were removed."""
        with self._lock:
            return int(self._db.execute("DELETE FROM visits WHERE at < ?",
                                        (before,)).rowcount)

    def visits(self, *, robot: str | None = None, limit: int = 200) -> list[VisitRow]:
        """The newest logged requests first."""
        query = ("SELECT id, at, ip, user_agent, robot, operator, category, verification, "
                 "how, method, target, agent, allowed, line, rule, version, action, status, "
                 "verified_by FROM visits")
        args: tuple[object, ...] = ()
        if robot is not None:
            query += " WHERE robot = ?"
            args = (robot,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY id DESC LIMIT ?",
                                    (*args, limit)).fetchall()
        return [VisitRow(*r[:12], bool(r[12]), *r[13:]) for r in rows]  # type: ignore[call-arg]

    def robot_stats(self) -> list[RobotStats]:
        """Per robot, the busiest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT robot, max(operator), max(category), count(*), "
                "sum(verification = 'verified'), sum(verification = 'forged'), "
                "sum(allowed = 0), sum(action = 'refuse'), sum(action = 'throttle'), "
                "min(at), max(at) FROM visits GROUP BY robot ORDER BY count(*) DESC").fetchall()
        return [RobotStats(*r) for r in rows]

    def broken_lines(self, limit: int = 50) -> list[tuple[int, int, str, str, int]]:
        """The lines robots went against: (version, line, rule, robot, times), most first."""
        with self._lock:
            return [tuple(r) for r in self._db.execute(
                "SELECT version, line, rule, robot, count(*) FROM visits "
                "WHERE allowed = 0 AND line IS NOT NULL AND action != 'robots.txt' "
                "GROUP BY version, line, rule, robot ORDER BY count(*) DESC LIMIT ?",
                (limit,)).fetchall()]

    def top_paths(self, limit: int = 20) -> list[tuple[str, int, int]]:
        """The paths robots asked for most: (path, requests, robots)."""
        with self._lock:
            return [tuple(r) for r in self._db.execute(
                "SELECT target, count(*), count(DISTINCT robot) FROM visits "
                "GROUP BY target ORDER BY count(*) DESC LIMIT ?", (limit,)).fetchall()]


"""The survey's state: one SQLite file in the survey's folder (``survey.sqlite``).

A site is one row (its outcome, status, error, where its robots.txt came from); bodies are
stored once, by their SHA-256. Every write is its own transaction, so a survey killed at
any moment keeps what it had recorded, and a site recorded is never fetched again.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from polite.storage.sqlite import open_database

__all__ = ["SiteRecord", "SitemapRecord", "SurveyStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sites (
    domain TEXT PRIMARY KEY, rank INTEGER, outcome TEXT NOT NULL, status INTEGER,
    error TEXT, robots_url TEXT, robots_hash TEXT, robots_bytes INTEGER,
    recorded_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS bodies (hash TEXT PRIMARY KEY, body BLOB NOT NULL);
-- seed 004's sitemapinfo (its Table 1: id, parent, uri, filetype, downloadinfo, localfile),
-- one row per sitemap file reached from a surveyed domain, plus what the report counts.
-- level: indirection level (0 = named by a Sitemap line of robots.txt; Table 4).
-- filetype: xml | xml.gz | text | text.gz | rss | atom | unknown; kind: urlset | index | NULL.
-- downloadinfo: ok, or the outcome class of the failure (the names of core.survey.outcomes:
-- not_found, forbidden, server_error, timeout, connection_error, dns_error, resolver_error,
-- redirect_loop, too_big, html, parse_error, robots_disallowed, not_sampled); localfile:
-- the body's hash.
-- cross_site: the file's host is not the domain's (the seed's "sitemap sharing").
CREATE TABLE IF NOT EXISTS sitemaps (
    id INTEGER PRIMARY KEY, domain TEXT NOT NULL, parent INTEGER, uri TEXT NOT NULL,
    level INTEGER NOT NULL, filetype TEXT, kind TEXT, downloadinfo TEXT NOT NULL,
    localfile TEXT, status INTEGER, bytes INTEGER, url_count INTEGER NOT NULL DEFAULT 0,
    child_count INTEGER NOT NULL DEFAULT 0, seconds REAL, cross_site INTEGER NOT NULL DEFAULT 0,
    error TEXT, recorded_at REAL NOT NULL, UNIQUE (domain, uri));
-- page URLs of a domain's sitemaps, kept up to a per-site bound (a uniform sample beyond it).
CREATE TABLE IF NOT EXISTS sitemap_urls (
    domain TEXT NOT NULL, sitemap_id INTEGER NOT NULL, loc TEXT NOT NULL, lastmod TEXT,
    changefreq TEXT, priority REAL, PRIMARY KEY (domain, loc));
-- one row per domain whose sitemaps are done: every URI counted, how many kept.
CREATE TABLE IF NOT EXISTS sitemap_sites (
    domain TEXT PRIMARY KEY, files INTEGER NOT NULL, uris_total INTEGER NOT NULL,
    uris_kept INTEGER NOT NULL, recorded_at REAL NOT NULL);
-- robots.txt of hosts outside the list that hold a listed domain's sitemap files (the
-- seed's sitemap sharing), read before fetching from them and kept so a resumed survey
-- does not read them again.
-- what the survey in this folder was made with (its source, agent and the settings that
-- change what is recorded), so that a run with others is refused rather than mixed in.
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS other_robots (
    host TEXT PRIMARY KEY, outcome TEXT NOT NULL, status INTEGER, robots_hash TEXT,
    recorded_at REAL NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class SiteRecord:
    domain: str
    rank: int | None
    outcome: str
    status: int | None = None
    error: str | None = None
    robots_url: str | None = None
    robots_hash: str | None = None
    robots_bytes: int | None = None  # the true size, also when the body kept was cut


@dataclass(frozen=True, slots=True)
class SitemapRecord:
    """One row of ``sitemaps`` (Roy 2008's sitemapinfo, Table 1, and what was measured)."""

    domain: str
    uri: str
    level: int
    downloadinfo: str
    parent: int | None = None
    filetype: str | None = None
    kind: str | None = None
    status: int | None = None
    bytes: int | None = None
    url_count: int = 0
    child_count: int = 0
    seconds: float | None = None
    cross_site: bool = False
    error: str | None = None
    localfile: str | None = None
    id: int | None = None


_SITEMAP_COLUMNS = ("domain, uri, level, downloadinfo, parent, filetype, kind, status, bytes, "
                    "url_count, child_count, seconds, cross_site, error, localfile, id")


def _keep_body(db: sqlite3.Connection, digest: str | None, body: bytes | None) -> None:
    if body is not None:
        db.execute("INSERT OR IGNORE INTO bodies (hash, body) VALUES (?, ?)", (digest, body))


def _sitemap_record(row: tuple[Any, ...]) -> SitemapRecord:
    return SitemapRecord(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
                         row[8], row[9], row[10], row[11], bool(row[12]), row[13], row[14],
                         row[15])


class SurveyStore:
    def __init__(self, path: str | Path) -> None:
        self._db = open_database(path, _SCHEMA, "the survey's state")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write, all or nothing: a kill between two leaves the earlier ones whole."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def record(self, site: SiteRecord, body: bytes | None, now: float) -> SiteRecord:
        """Keep one site's outcome and its robots.txt body (stored once by hash)."""
        digest = None
        if body is not None:
            digest = hashlib.sha256(body).hexdigest()
            site = SiteRecord(site.domain, site.rank, site.outcome, site.status, site.error,
                              site.robots_url, digest, site.robots_bytes)
        with self._transaction() as db:
            _keep_body(db, digest, body)
            db.execute(
                "INSERT OR REPLACE INTO sites (domain, rank, outcome, status, error, "
                "robots_url, robots_hash, robots_bytes, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (site.domain, site.rank, site.outcome, site.status, site.error,
                 site.robots_url, site.robots_hash, site.robots_bytes, now))
        return site

    def settle(self, settings: dict[str, str]) -> list[tuple[str, str, str]]:
        """The settings this folder's survey was made with, against ``settings``: (name,
        recorded, given) for each that differs; those not recorded yet (a new folder, or
        one made before they were) are recorded as given."""
        recorded = dict(self._db.execute("SELECT name, value FROM settings"))
        differ = [(name, recorded[name], value) for name, value in settings.items()
                  if name in recorded and recorded[name] != value]
        if not differ:
            with self._transaction() as db:
                db.executemany("INSERT OR IGNORE INTO settings (name, value) VALUES (?, ?)",
                               list(settings.items()))
        return differ

    def forget(self, domain: str) -> None:
        """Drop a site's row (its body stays, stored by hash for whoever shares it)."""
        with self._transaction() as db:
            db.execute("DELETE FROM sites WHERE domain = ?", (domain,))

    def recorded(self, domain: str) -> bool:
        return self._db.execute("SELECT 1 FROM sites WHERE domain = ?",
                                (domain,)).fetchone() is not None

    def sites(self) -> Iterator[SiteRecord]:
        rows = self._db.execute(
            "SELECT domain, rank, outcome, status, error, robots_url, robots_hash, "
            "robots_bytes FROM sites ORDER BY rank IS NULL, rank, domain")
        for row in rows:
            yield SiteRecord(*row)

    def body(self, digest: str) -> bytes | None:
        row = self._db.execute("SELECT body FROM bodies WHERE hash = ?", (digest,)).fetchone()
        return None if row is None else bytes(row[0])

    # -- sitemaps ---------------------------------------------------------------------------

    def record_sitemap(self, row: SitemapRecord, body: bytes | None, now: float
                       ) -> SitemapRecord:
        """Keep one sitemap file's row (its body once by hash); returns the row as stored,
        with its id and localfile. A file already recorded for the domain keeps its first
        row, which is returned."""
        with self._transaction() as db:
            return self._insert_sitemap(db, row, body, now)

    def _insert_sitemap(self, db: sqlite3.Connection, row: SitemapRecord, body: bytes | None,
                        now: float) -> SitemapRecord:
        digest = None if body is None else hashlib.sha256(body).hexdigest()
        _keep_body(db, digest, body)
        cursor = db.execute(
            "INSERT OR IGNORE INTO sitemaps (domain, uri, level, downloadinfo, parent, "
            "filetype, kind, status, bytes, url_count, child_count, seconds, cross_site, "
            "error, localfile, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?, ?, ?) RETURNING id",
            (row.domain, row.uri, row.level, row.downloadinfo, row.parent, row.filetype,
             row.kind, row.status, row.bytes, row.url_count, row.child_count,
             row.seconds, int(row.cross_site), row.error, digest, now))
        inserted = cursor.fetchone()
        if inserted is not None:
            return replace(row, id=int(inserted[0]), localfile=digest)
        found = db.execute(f"SELECT {_SITEMAP_COLUMNS} FROM sitemaps WHERE domain = ? "
                           "AND uri = ?", (row.domain, row.uri)).fetchone()
        return _sitemap_record(found)

    def sitemap_rows(self, domain: str) -> dict[str, SitemapRecord]:
        """The sitemap files recorded for ``domain``, by URI."""
        rows = self._db.execute(
            f"SELECT {_SITEMAP_COLUMNS} FROM sitemaps WHERE domain = ? ORDER BY id", (domain,))
        return {row[1]: _sitemap_record(row) for row in rows}

    def sitemaps_done(self, domain: str) -> bool:
        return self._db.execute("SELECT 1 FROM sitemap_sites WHERE domain = ?",
                                (domain,)).fetchone() is not None

    def finish_sitemaps(self, domain: str, urls: list[tuple[str, str, str | None, str | None,
                                                           float | None]],
                        ids: dict[str, int], files: int, uris_total: int, now: float, *,
                        last: tuple[SitemapRecord, bytes | None] | None = None) -> int:
        """Close a domain's sitemaps: its kept page URLs (``(sitemap uri, loc, lastmod,
        changefreq, priority)``, the file's id from ``ids``) and its totals (``files`` read
        whole, every URI counted), in one transaction, with the domain's ``last`` file's
        row when it was not recorded yet (one commit where there would be two); returns URLs
        kept."""
        with self._transaction() as db:
            if last is not None:
                row = self._insert_sitemap(db, *last, now)
                assert row.id is not None
                ids = {**ids, row.uri: row.id}
            db.executemany(
                "INSERT OR IGNORE INTO sitemap_urls (domain, sitemap_id, loc, lastmod, "
                "changefreq, priority) VALUES (?, ?, ?, ?, ?, ?)",
                [(domain, ids[uri], *rest) for uri, *rest in urls])
            # The domain's URLs are written here only, all at once: those kept are these.
            kept = len({url[1] for url in urls})
            db.execute("INSERT OR REPLACE INTO sitemap_sites (domain, files, uris_total, "
                       "uris_kept, recorded_at) VALUES (?, ?, ?, ?, ?)",
                       (domain, files, uris_total, kept, now))
        return int(kept)

    def site(self, domain: str) -> SiteRecord | None:
        row = self._db.execute(
            "SELECT domain, rank, outcome, status, error, robots_url, robots_hash, "
            "robots_bytes FROM sites WHERE domain = ?", (domain,)).fetchone()
        return None if row is None else SiteRecord(*row)

    def other_robots(self, host: str) -> tuple[str, bytes | None] | None:
        """The outcome and body of a host outside the list whose robots.txt was read."""
        row = self._db.execute("SELECT outcome, robots_hash FROM other_robots WHERE host = ?",
                               (host,)).fetchone()
        if row is None:
            return None
        return str(row[0]), None if row[1] is None else self.body(row[1])

    def record_other_robots(self, host: str, outcome: str, status: int | None,
                            body: bytes | None, now: float) -> None:
        digest = None if body is None else hashlib.sha256(body).hexdigest()
        with self._transaction() as db:
            _keep_body(db, digest, body)
            db.execute("INSERT OR REPLACE INTO other_robots (host, outcome, status, "
                       "robots_hash, recorded_at) VALUES (?, ?, ?, ?, ?)",
                       (host, outcome, status, digest, now))

    def close(self) -> None:
        self._db.close()

"""The survey's state: one SQLite file in the survey's folder (``survey.sqlite``).

A site is one row (its outcome, status, error, where its robots.txt came from); bodies are
stored once, by their SHA-256. Every write is its own transaction, so a survey killed at
any moment keeps what it had recorded, and a site recorded is never fetched again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from polite.storage.sqlite import open_database

__all__ = ["SiteRecord", "SurveyStore"]

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
-- not_found, forbidden, server_error, timeout, connection_error, dns_error, redirect_loop,
-- too_big, html, parse_error, robots_disallowed, not_sampled); localfile: the body's hash.
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


class SurveyStore:
    def __init__(self, path: str | Path) -> None:
        self._db = open_database(path, _SCHEMA, "the survey's state")

    def record(self, site: SiteRecord, body: bytes | None, now: float) -> SiteRecord:
        """Keep one site's outcome and its robots.txt body (stored once by hash)."""
        digest = None
        if body is not None:
            digest = hashlib.sha256(body).hexdigest()
            site = SiteRecord(site.domain, site.rank, site.outcome, site.status, site.error,
                              site.robots_url, digest, site.robots_bytes)
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            if body is not None:
                db.execute("INSERT OR IGNORE INTO bodies (hash, body) VALUES (?, ?)",
                           (digest, body))
            db.execute(
                "INSERT OR REPLACE INTO sites (domain, rank, outcome, status, error, "
                "robots_url, robots_hash, robots_bytes, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (site.domain, site.rank, site.outcome, site.status, site.error,
                 site.robots_url, site.robots_hash, site.robots_bytes, now))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return site

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

    def close(self) -> None:
        self._db.close()

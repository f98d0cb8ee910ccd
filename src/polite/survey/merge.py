"""The union of several surveys' folders (the workers of one shared survey) in one
``survey.sqlite``, which ``polite report`` reads as it reads a one-worker survey's.

A domain recorded by two workers (one was killed after recording it and before its lease
was acknowledged, and another did it again) is taken whole from one of them: the one that
finished its sitemaps, else the later record. Its sitemap rows keep their tree: ids are
shifted by each source's offset, parents and page URLs with them. Bodies and the robots.txt
of hosts outside the list are shared by all (by hash, by host).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from polite.errors import ConfigError
from polite.survey.store import SurveyStore

__all__ = ["merge_surveys"]


def _choices(sources: list[Path]) -> dict[str, int]:
    """domain -> index of the source its record is taken from."""
    best: dict[str, tuple[tuple[int, float], int]] = {}
    for at, path in enumerate(sources):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = db.execute(
                "SELECT s.domain, s.recorded_at, m.domain IS NOT NULL FROM sites s "
                "LEFT JOIN sitemap_sites m ON m.domain = s.domain").fetchall()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{path}: not a survey's state ({exc})") from exc
        finally:
            db.close()
        for domain, recorded_at, finished in rows:
            key = (int(finished), float(recorded_at))
            if domain not in best or key > best[domain][0]:
                best[domain] = (key, at)
    return {domain: at for domain, (_, at) in best.items()}


def merge_surveys(sources: list[Path], target: Path) -> int:
    """Write the union of the ``survey.sqlite`` files ``sources`` into ``target`` (a new
    file: an existing one is refused); returns the domains in it."""
    if target.exists():
        raise ConfigError(f"{target} exists: merge into a new folder")
    for path in sources:
        if not path.is_file():
            raise ConfigError(f"{path.parent}: no survey here ({path} is missing)")
    chosen = _choices(sources)
    SurveyStore(target).close()  # the schema
    db = sqlite3.connect(target, isolation_level=None)
    try:
        db.execute("BEGIN")
        for at, path in enumerate(sources):
            db.execute("ATTACH DATABASE ? AS src", (f"file:{path}?mode=ro",))
            db.execute("CREATE TEMP TABLE pick (domain TEXT PRIMARY KEY)")
            db.executemany("INSERT INTO pick VALUES (?)",
                           [(d,) for d, source in chosen.items() if source == at])
            (offset,) = db.execute("SELECT coalesce(max(id), 0) FROM main.sitemaps").fetchone()
            db.execute("INSERT OR IGNORE INTO main.bodies SELECT hash, body FROM src.bodies")
            db.execute("INSERT OR IGNORE INTO main.other_robots SELECT host, outcome, status, "
                       "robots_hash, recorded_at FROM src.other_robots")
            db.execute("INSERT INTO main.sites SELECT domain, rank, outcome, status, error, "
                       "robots_url, robots_hash, robots_bytes, recorded_at FROM src.sites "
                       "WHERE domain IN (SELECT domain FROM pick)")
            db.execute("INSERT INTO main.sitemaps SELECT id + ?1, domain, parent + ?1, uri, "
                       "level, filetype, kind, downloadinfo, localfile, status, bytes, "
                       "url_count, child_count, seconds, cross_site, error, recorded_at "
                       "FROM src.sitemaps WHERE domain IN (SELECT domain FROM pick)",
                       (offset,))
            db.execute("INSERT INTO main.sitemap_urls SELECT domain, sitemap_id + ?, loc, "
                       "lastmod, changefreq, priority FROM src.sitemap_urls "
                       "WHERE domain IN (SELECT domain FROM pick)", (offset,))
            db.execute("INSERT INTO main.sitemap_sites SELECT domain, files, uris_total, "
                       "uris_kept, recorded_at FROM src.sitemap_sites "
                       "WHERE domain IN (SELECT domain FROM pick)")
            db.execute("DROP TABLE temp.pick")
            db.execute("COMMIT")
            db.execute("DETACH DATABASE src")
            db.execute("BEGIN")
        db.execute("COMMIT")
    finally:
        db.close()
    return len(chosen)

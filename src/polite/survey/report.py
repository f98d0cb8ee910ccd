"""``polite report``'s tables from what a survey recorded (seed 004, section 3), as CSV."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from polite.core.survey import file_stats, popular_agents, popular_fields
from polite.core.survey.outcomes import Outcome
from polite.survey.store import SurveyStore

__all__ = ["write_tables"]

# Files that are robots.txt files: the others (errors, HTML served instead) have no fields.
_COUNTED = (Outcome.OK, Outcome.EMPTY, Outcome.TOO_BIG)


def _write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(rows)


def write_tables(store: SurveyStore, folder: Path) -> list[Path]:
    """``outcomes.csv``, ``fields.csv`` (Table 2), ``agents.csv`` (Table 3) and
    ``domains.csv`` in ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    outcomes: Counter[str] = Counter()
    files = []
    domains: list[list[object]] = []
    for site in store.sites():
        outcomes[site.outcome] += 1
        stats = None
        if site.outcome in _COUNTED and site.robots_hash is not None:
            body = store.body(site.robots_hash)
            if body is not None:
                stats = file_stats(body)
                files.append(stats)
        domains.append([site.domain, site.rank if site.rank is not None else "",
                        site.outcome, stats.lines if stats else "",
                        len(stats.sections) if stats else "",
                        stats.sitemaps if stats else "", "", ""])
    written = []
    path = folder / "outcomes.csv"
    _write(path, ["outcome", "sites"],
           [[outcome.value, outcomes.get(outcome.value, 0)] for outcome in Outcome])
    written.append(path)
    path = folder / "fields.csv"
    _write(path, ["field", "files", "fields", "fields_per_file"],
           [[row.name, row.files, row.count, round(row.share, 4)]
            for row in popular_fields(files)])
    written.append(path)
    path = folder / "agents.csv"
    _write(path, ["agent", "occurrences", "share"],
           [[row.name, row.count, round(row.share, 6)] for row in popular_agents(files)])
    written.append(path)
    path = folder / "domains.csv"
    _write(path, ["domain", "rank", "outcome", "robots_lines", "groups", "sitemap_lines",
                  "sitemap_files", "uris"], domains)
    written.append(path)
    return written

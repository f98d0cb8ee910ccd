"""A survey without fetching: robots.txt files already on disk, named ``HOST.txt`` (as
../shared/corpus/robots holds them), recorded as if fetched with a 200."""

from __future__ import annotations

from pathlib import Path

from polite.core.robots import MAX_ROBOTS_BYTES
from polite.core.survey.outcomes import body_outcome
from polite.survey.store import SiteRecord, SurveyStore

__all__ = ["import_robots_dir"]


def import_robots_dir(folder: Path, store: SurveyStore, now: float, *,
                      max_bytes: int = MAX_ROBOTS_BYTES) -> int:
    """Record every ``HOST.txt`` of ``folder`` not recorded yet; returns how many were."""
    added = 0
    for path in sorted(folder.glob("*.txt")):
        domain = path.stem.lower()
        if store.recorded(domain):
            continue
        body = path.read_bytes()
        outcome = body_outcome(body, max_bytes=max_bytes)
        store.record(SiteRecord(domain, None, str(outcome), 200, None, f"file:{path.name}",
                                None, len(body)), body[:max_bytes], now)
        added += 1
    return added

"""A survey without fetching: robots.txt files already on disk, named ``HOST.txt`` (as
../shared/corpus/robots holds them), recorded as if fetched with a 200. A file whose name is
no host (``not a host.txt``) or is hidden (``.hidden.txt``) is not a site: it is skipped and
named."""

from __future__ import annotations

from pathlib import Path

from polite.core.robots import MAX_ROBOTS_BYTES
from polite.core.survey.outcomes import body_outcome
from polite.core.urls import host_name_problem
from polite.survey.store import SiteRecord, SurveyStore

__all__ = ["import_robots_dir"]


def import_robots_dir(folder: Path, store: SurveyStore, now: float, *,
                      max_bytes: int = MAX_ROBOTS_BYTES) -> tuple[int, list[str]]:
    """Record every ``HOST.txt`` of ``folder`` not recorded yet; returns how many were, and
    the names of the files skipped (not named after a host)."""
    added = 0
    skipped = []
    for path in sorted(folder.glob("*.txt")):
        domain = path.stem.lower().rstrip(".")
        if path.name.startswith(".") or not path.is_file() or not domain \
                or host_name_problem(domain) is not None:
            skipped.append(path.name)
            continue
        if store.recorded(domain):
            continue
        with path.open("rb") as stream:  # kept up to the cap, counted to its true size
            body = stream.read(max_bytes)
            size = max(path.stat().st_size, len(body))
        outcome = body_outcome(body, size=size, max_bytes=max_bytes)
        store.record(SiteRecord(domain, None, str(outcome), 200, None, f"file:{path.name}",
                                None, size), body, now)
        added += 1
    return added, skipped

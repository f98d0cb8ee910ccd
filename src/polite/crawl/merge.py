"""One crawl's outputs from many workers, merged: ``polite crawl merge DIR... --out DIR``.

Workers sharing a frontier each write their own folder (``pages.jsonl``, ``sites.jsonl``,
``items.jsonl``, ``warc/``). The merged folder holds those files concatenated, worker after
worker, the WARC files linked (copied across file systems) under names that say whose they
were, and ``summary.json``: the outcomes per worker and in all, and the URLs fetched by more
than one worker (a request in flight when its worker died, fetched again by another).
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polite.core._documents import read_json
from polite.errors import ConfigError, MalformedDocument

__all__ = ["merge_outputs"]

_CONCATENATED = ("pages.jsonl", "sites.jsonl", "items.jsonl")
_LINES_LISTED = 100  # unreadable lines named in the summary (all are counted)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links not allowed
        shutil.copyfile(source, target)


def merge_outputs(folders: Sequence[str | Path], out: str | Path) -> dict[str, Any]:
    """Merge the workers' ``folders`` into ``out`` (new, or without a ``pages.jsonl``);
    returns the summary also written to ``out/summary.json``."""
    target = Path(out)
    sources = [Path(folder) for folder in folders]
    if not sources:
        raise ConfigError("crawl merge: name the workers' folders to merge")
    for source in sources:
        if not (source / "pages.jsonl").is_file():
            raise ConfigError(f"crawl merge: {source} has no pages.jsonl (not a crawl folder)")
        if source.resolve() == target.resolve():
            raise ConfigError(f"crawl merge: --out {target} is one of the folders merged")
    if (target / "pages.jsonl").exists():
        raise ConfigError(f"crawl merge: {target} already holds a pages.jsonl")
    target.mkdir(parents=True, exist_ok=True)
    workers: list[dict[str, Any]] = []
    fetched_by: dict[str, int] = Counter()
    outcomes: Counter[str] = Counter()
    total_bytes = 0
    bad_lines: list[str] = []
    with (target / "pages.jsonl").open("w", encoding="utf-8") as pages:
        for source in sources:
            counts: Counter[str] = Counter()
            worker_bytes = 0
            with (source / "pages.jsonl").open(encoding="utf-8", errors="replace") as lines:
                for number, line in enumerate(lines, 1):
                    try:
                        # a line cut by a kill mid-write has no newline: not kept
                        record = read_json(line) if line.endswith("\n") else None
                    except MalformedDocument:
                        record = None
                    if not isinstance(record, dict):
                        bad_lines.append(f"{source / 'pages.jsonl'}:{number}")
                        continue
                    pages.write(line)
                    outcome = str(record.get("outcome", "?"))
                    counts[outcome] += 1
                    if outcome == "fetched" and record.get("kind") != "sitemap":
                        fetched_by[str(record.get("url"))] += 1
                        worker_bytes += int(record.get("bytes") or 0)
            outcomes.update(counts)
            total_bytes += worker_bytes
            workers.append({"folder": str(source), **dict(sorted(counts.items())),
                            "bytes": worker_bytes})
    for name in _CONCATENATED[1:]:
        parts = [source / name for source in sources if (source / name).is_file()]
        if parts:
            with (target / name).open("wb") as merged:
                for part in parts:
                    with part.open("rb") as piece:
                        shutil.copyfileobj(piece, merged)
    warcs = 0
    for index, source in enumerate(sources):
        found = sorted((source / "warc").glob("*.warc.gz")) if (source / "warc").is_dir() else []
        if found:
            (target / "warc").mkdir(exist_ok=True)
        for warc in found:
            _link_or_copy(warc, target / "warc" / f"w{index:03d}-{source.name}-{warc.name}")
            warcs += 1
    summary: dict[str, Any] = {
        "workers": workers, "outcomes": dict(sorted(outcomes.items())),
        "pages": len(fetched_by), "bytes": total_bytes, "warc_files": warcs,
        "fetched_more_than_once": sorted(url for url, n in fetched_by.items() if n > 1),
        "lines_not_kept": bad_lines[:_LINES_LISTED], "lines_not_kept_count": len(bad_lines)}
    (target / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary

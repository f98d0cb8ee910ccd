"""What seed 004 counts in robots.txt files (section 3.3): fields as written (Table 2),
User-agent values (Table 3), lines (Figure 5), User-agent sections and their Disallow rules
(Figures 6 and 7), Sitemap lines (Figure 9).

A file is read line by line as the seed did: a field is a ``name: value`` line, the name as
written (``Disalow`` is a field of its own, as it is in the file), compared without regard
to case; ``#`` starts a comment. A User-agent section runs from a User-agent line (or a run
of them) to the next User-agent line after another field, or to the end of the file.
User-agent values are compared after the seed's adjustments for "capitalization,
whitespace, or version numbers".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "FileStats",
    "Popular",
    "agent_key",
    "file_stats",
    "popular_agents",
    "popular_fields",
]

_LINE = re.compile(r"[ \t]*([A-Za-z][A-Za-z0-9_-]*)[ \t]*:[ \t]*(.*)")
_VERSION = re.compile(r"(?:/|\s+v?)\d[\w.\-]*|[\s/]+$")
_SPACES = re.compile(r"\s+")


def agent_key(value: str) -> str:
    """A User-agent value as seed 004 compares them: case, whitespace and version numbers
    do not count (``Googlebot/2.1`` and ``googlebot`` are one)."""
    value = _SPACES.sub(" ", value.strip().lower())
    return _VERSION.sub("", value).strip() or value


@dataclass(slots=True)
class FileStats:
    """The counts of one robots.txt file."""

    lines: int = 0
    fields: Counter[str] = field(default_factory=Counter)  # lower-cased name -> occurrences
    spellings: Counter[str] = field(default_factory=Counter)  # names as written
    agents: list[str] = field(default_factory=list)  # User-agent values, in order
    sections: list[int] = field(default_factory=list)  # Disallow rules per section
    sitemaps: int = 0


def file_stats(body: bytes) -> FileStats:
    """Count one file (bytes as served; read as UTF-8, undecodable bytes replaced)."""
    text = body.decode("utf-8", "replace").lstrip("\ufeff")
    stats = FileStats()
    lines = text.splitlines()
    stats.lines = len(lines)
    in_agents = False  # the previous field was a User-agent line
    for line in lines:
        line = line.split("#", 1)[0]
        match = _LINE.match(line)
        if match is None:
            continue
        name, value = match.group(1), match.group(2).strip()
        key = name.lower()
        stats.fields[key] += 1
        stats.spellings[name] += 1
        if key == "user-agent":
            stats.agents.append(value)
            if not in_agents:
                stats.sections.append(0)
            in_agents = True
            continue
        in_agents = False
        if key == "disallow" and stats.sections:
            stats.sections[-1] += 1
        elif key == "sitemap":
            stats.sitemaps += 1
    return stats


@dataclass(frozen=True, slots=True)
class Popular:
    """One row of Table 2 (``files`` containing the field, ``count`` of all its lines) or
    Table 3 (``count`` of lines naming the agent, ``share`` of all User-agent lines)."""

    name: str
    files: int
    count: int
    share: float


def _display(spellings: Counter[str], key: str) -> str:
    """The spelling of a field name met most often (ties: the first in sort order)."""
    best = [(-n, name) for name, n in spellings.items() if name.lower() == key]
    return min(best)[1] if best else key


def popular_fields(files: Iterable[FileStats]) -> list[Popular]:
    """Table 2: fields by the number of files holding them, then by occurrences; ``share``
    is occurrences per file among those files."""
    holding: Counter[str] = Counter()
    occurrences: Counter[str] = Counter()
    spellings: Counter[str] = Counter()
    for stats in files:
        holding.update(stats.fields.keys())
        occurrences.update(stats.fields)
        spellings.update(stats.spellings)
    rows = [Popular(_display(spellings, key), holding[key], occurrences[key],
                    occurrences[key] / holding[key]) for key in holding]
    rows.sort(key=lambda row: (-row.files, -row.count, row.name.lower()))
    return rows


def popular_agents(files: Iterable[FileStats]) -> list[Popular]:
    """Table 3: User-agent values by occurrences (compared by :func:`agent_key`), each with
    its most common spelling, the files naming it, and its share of all User-agent lines."""
    counts: Counter[str] = Counter()
    holding: Counter[str] = Counter()
    spellings: dict[str, Counter[str]] = {}
    for stats in files:
        keys = [agent_key(value) for value in stats.agents]
        counts.update(keys)
        holding.update(set(keys))
        for key, value in zip(keys, stats.agents, strict=True):
            spellings.setdefault(key, Counter())[_SPACES.sub(" ", value.strip())] += 1
    total = sum(counts.values()) or 1
    rows = [Popular(_VERSION.sub("", spellings[key].most_common(1)[0][0]).strip() or key,
                    holding[key], n, n / total) for key, n in counts.items()]
    rows.sort(key=lambda row: (-row.count, row.name.lower()))
    return rows

"""A survey folder whose every figure is known by construction, for the report's tests.

The robots.txt side is recorded through :class:`SurveyStore` as a survey records it; the
sitemap side is written with plain SQL into the tables whose schema store.py fixes (the
harvest writes them the same way). The truth is computed here from the parameters that
built the files, not by reading them back.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from polite.survey import SiteRecord, SurveyStore

AGENTS = ("GPTBot", "Googlebot", "CCBot", "Bingbot")
# Each section j of a file names these agents (section 2 writes a version, folded away).
SECTION_AGENTS = (("*",), ("GPTBot",), ("Googlebot/2.1", "CCBot"))


@dataclass
class Truth:
    outcomes: Counter[str] = field(default_factory=Counter)
    lines: dict[str, int] = field(default_factory=dict)  # counted files only
    groups: dict[str, int] = field(default_factory=dict)
    sitemap_lines: dict[str, int] = field(default_factory=dict)
    field_files: Counter[str] = field(default_factory=Counter)
    field_lines: Counter[str] = field(default_factory=Counter)
    agent_lines: Counter[str] = field(default_factory=Counter)
    disallows: list[int] = field(default_factory=list)  # per section
    access: dict[str, Counter[str]] = field(default_factory=dict)
    named: Counter[str] = field(default_factory=Counter)
    ranks: dict[str, int] = field(default_factory=dict)
    outcome_of: dict[str, str] = field(default_factory=dict)
    levels: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    sitemap_files: Counter[str] = field(default_factory=Counter)
    uris: dict[str, int] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)
    trees: dict[str, tuple[int, int, int, int, int]] = field(default_factory=dict)
    tree_levels: dict[int, tuple[int, int]] = field(default_factory=dict)
    ulinks: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def summary(self, values: list[int]) -> tuple[float, float, float]:
        return statistics.fmean(values), statistics.pstdev(values), statistics.median(values)


def _site(i: int, truth: Truth) -> tuple[str, bytes | None]:
    """Site i's outcome and body, and its share of the truth."""
    domain = f"d{i:02d}.example"
    if i % 10 == 3:
        for agent in AGENTS:  # an empty file keeps no one out
            truth.access.setdefault(agent, Counter())["not_at_all"] += 1
    if i % 10 == 7:
        return "not_found", None
    if i % 10 == 9:
        return "html", b"<!doctype html><html><body>home</body></html>\n"
    if i % 10 == 3:
        truth.lines[domain] = 1
        truth.groups[domain] = 0
        truth.sitemap_lines[domain] = 0
        return "empty", b"# nothing here\n"
    sections = 1 + i % 3
    maps = i % 3
    out = [f"# robots.txt of {domain}"]
    per_file: Counter[str] = Counter()
    for j in range(sections):
        if j:
            out.append("")
        for agent in SECTION_AGENTS[j]:
            out.append(f"User-agent: {agent}")
            per_file["user-agent"] += 1
            truth.agent_lines[agent.split("/")[0].lower()] += 1
        count = (i + j) % 4
        truth.disallows.append(count)
        if count == 0:  # a rule keeps the group apart from the next User-agent line
            out.append("Allow: /public")
            per_file["allow"] += 1
        for n in range(count):
            path = "/" if n == 0 and (i + j) % 5 == 0 else f"/p{n}"
            out.append(f"Disallow: {path}")
            per_file["disallow"] += 1
    for n in range(maps):
        out.append(f"Sitemap: http://{domain}/sm{n}.xml")
        per_file["sitemap"] += 1
    truth.lines[domain] = len(out)
    truth.groups[domain] = sections
    truth.sitemap_lines[domain] = maps
    truth.field_files.update(per_file.keys())
    truth.field_lines.update(per_file)
    # Each agent's group: its own section when the file has one, else "*".
    own = {"GPTBot": 1, "Googlebot": 2, "CCBot": 2, "Bingbot": 0}
    for agent, j in own.items():
        if j >= sections:
            j = 0
        elif j:
            truth.named[agent] += 1
        count = (i + j) % 4
        access = ("not_at_all" if count == 0 else
                  "entirely" if (i + j) % 5 == 0 else "partly")
        truth.access.setdefault(agent, Counter())[access] += 1
    return ("too_big" if i == 25 else "ok"), ("\n".join(out) + "\n").encode()


def _sitemap(db: sqlite3.Connection, truth: Truth, domain: str, ident: int,
             parent: int | None, uri: str, level: int, info: str, *, kind: str = "urlset",
             urls: int = 0, children: int = 0, cross: int = 0) -> None:
    db.execute(
        "INSERT INTO sitemaps (id, domain, parent, uri, level, filetype, kind, downloadinfo, "
        "localfile, status, bytes, url_count, child_count, seconds, cross_site, error, "
        "recorded_at) VALUES (?, ?, ?, ?, ?, 'xml', ?, ?, NULL, ?, 100, ?, ?, 0.01, ?, NULL, 1)",
        (ident, domain, parent, uri, level, kind if info == "ok" else None, info,
         200 if info == "ok" else None, urls, children, cross))
    truth.errors[info] += 1
    if info != "not_sampled":  # files reached (Table 4 and Table 5 alike)
        truth.sitemap_files[domain] += 1
        truth.levels[level] += 1
    if info == "ok":
        truth.read.add(domain)


def _urls(db: sqlite3.Connection, domain: str, ident: int, locs: list[str]) -> None:
    db.executemany("INSERT INTO sitemap_urls (domain, sitemap_id, loc) VALUES (?, ?, ?)",
                   [(domain, ident, loc) for loc in locs])


def build_survey(folder: Path, count: int = 30) -> Truth:
    """Record ``count`` sites (ranks 50, 100, ...) and four sites' sitemaps in
    ``folder/survey.sqlite``; returns what the report must find."""
    truth = Truth()
    folder.mkdir(parents=True, exist_ok=True)
    store = SurveyStore(folder / "survey.sqlite")
    try:
        for i in range(1, count + 1):
            domain = f"d{i:02d}.example"
            outcome, body = _site(i, truth)
            truth.outcomes[outcome] += 1
            truth.ranks[domain] = 50 * i
            truth.outcome_of[domain] = outcome
            status = 404 if outcome == "not_found" else 200
            store.record(SiteRecord(domain, 50 * i, outcome, status, None,
                                    f"http://{domain}/robots.txt", None,
                                    None if body is None else len(body)), body, 1.0)
    finally:
        store.close()
    db = sqlite3.connect(folder / "survey.sqlite")
    with db:
        # d01: one sitemap of three URLs.
        _sitemap(db, truth, "d01.example", 1, None, "http://d01.example/sm0.xml", 0, "ok",
                 urls=3)
        _urls(db, "d01.example", 1, ["http://d01.example/a/1", "http://d01.example/a/2",
                                     "http://d01.example/b/1"])
        truth.uris["d01.example"] = 3
        truth.trees["d01.example"] = (3, 1, 6, 3, 2)  # uris, roots, nodes, leaves, depth
        truth.ulinks["d01.example"] = [("http://d01.example/a/", 2),
                                       ("http://d01.example/b/", 1)]
        # d02: an index of two sitemaps, one read (four URLs), one timed out.
        _sitemap(db, truth, "d02.example", 2, None, "http://d02.example/sm0.xml", 0, "ok",
                 kind="sitemapindex", children=2)
        _sitemap(db, truth, "d02.example", 3, 2, "http://d02.example/a.xml", 1, "ok", urls=4)
        _sitemap(db, truth, "d02.example", 4, 2, "http://d02.example/b.xml", 1, "timeout")
        _urls(db, "d02.example", 3, [f"http://d02.example/x/{n}" for n in range(1, 5)])
        truth.uris["d02.example"] = 4
        truth.trees["d02.example"] = (4, 1, 6, 4, 2)
        truth.ulinks["d02.example"] = [("http://d02.example/x/1", 1),
                                       ("http://d02.example/x/2", 1)]
        # d04: indexes three deep, a sampled-away child, a 404; 50,000 URLs, 5 kept.
        _sitemap(db, truth, "d04.example", 5, None, "http://d04.example/sm0.xml", 0, "ok",
                 kind="sitemapindex", children=3)
        _sitemap(db, truth, "d04.example", 6, 5, "http://d04.example/i1.xml", 1, "ok",
                 kind="sitemapindex", children=1)
        _sitemap(db, truth, "d04.example", 7, 5, "http://d04.example/gone.xml", 1,
                 "not_found")
        _sitemap(db, truth, "d04.example", 8, 5, "http://d04.example/skip.xml", 1,
                 "not_sampled")
        _sitemap(db, truth, "d04.example", 9, 6, "http://d04.example/i2.xml", 2, "ok",
                 kind="sitemapindex", children=1)
        _sitemap(db, truth, "d04.example", 10, 9, "http://d04.example/u.xml", 3, "ok",
                 urls=50_000)
        _urls(db, "d04.example", 10, [f"http://d04.example/p/q/r{n}.html"
                                      for n in range(1, 6)])
        db.execute("INSERT INTO sitemap_sites (domain, files, uris_total, uris_kept, "
                   "recorded_at) VALUES ('d04.example', 6, 50000, 5, 1)")
        truth.uris["d04.example"] = 50_000
        truth.trees["d04.example"] = (5, 1, 8, 5, 3)
        truth.ulinks["d04.example"] = [("http://d04.example/p/q/r1.html", 1),
                                       ("http://d04.example/p/q/r2.html", 1)]
        # d05: its sitemap on another site (the seed's sitemap sharing).
        _sitemap(db, truth, "d05.example", 11, None, "http://cdn.other/e.xml", 0, "ok",
                 urls=2, cross=1)
        _urls(db, "d05.example", 11, ["http://cdn.other/e/1", "http://cdn.other/e/2"])
        truth.uris["d05.example"] = 2
        truth.trees["d05.example"] = (2, 1, 4, 2, 2)
        truth.ulinks["d05.example"] = [("http://cdn.other/e/1", 1),
                                       ("http://cdn.other/e/2", 1)]
        # d08: its only sitemap refused.
        _sitemap(db, truth, "d08.example", 12, None, "http://d08.example/sm0.xml", 0,
                 "forbidden")
        truth.uris["d08.example"] = 0
    db.close()
    # Nodes and leaves per level over all trees, from the shapes above.
    truth.tree_levels = {0: (4, 0), 1: (1 + 1 + 1 + 1 + 1, 0), 2: (3 + 4 + 1 + 2, 3 + 4 + 2),
                         3: (5, 5)}
    return truth

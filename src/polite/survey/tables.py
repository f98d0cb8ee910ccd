"""Every table of seed 004's report, computed from a survey's folder.

``Survey(folder).table(name)`` is a pandas DataFrame (the ``survey`` extra);
``Survey(folder).rows(name)`` is the same table as plain Python rows, which is what the CSV
files hold. Tables are computed on first use, in three parts that do not depend on each
other: the robots.txt side (one pass over the bodies), the agents' access (each body parsed
by polite's matcher) and the sitemap side (the sitemap tables and the prefix trees of the
kept page URLs).

Which files are counted: robots.txt files are the sites whose outcome is ``ok``, ``empty``
or ``too_big`` (the others have no file: errors, or a page served in its place). A site
has "sitemap information" when its robots.txt has a Sitemap line (seed 004 found sitemaps
through robots.txt only, Figure 4). The sitemap columns are empty (null) when the survey
read no sitemaps at all (an offline ``--robots-dir`` survey).
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polite.core.robots import parse
from polite.core.survey import FileStats, file_stats, popular_agents, popular_fields
from polite.core.survey.access import Access, agent_access
from polite.core.survey.distribution import frequencies, summarize
from polite.core.survey.outcomes import Outcome
from polite.core.survey.usage_stats import MECHANISMS, UsageCounts, count_usage, usage_stats
from polite.core.ulinks import UriTree, ulinks
from polite.core.usage.vocab import MAIN_PURPOSES
from polite.errors import ConfigError
from polite.survey.store import SurveyStore

if TYPE_CHECKING:
    import pandas

__all__ = ["DEFAULT_AGENTS", "STRATA", "TABLES", "KeptUrl", "Survey", "Table"]

# Search engines and the AI crawlers that studies of robots.txt consent follow.
DEFAULT_AGENTS = (
    "Googlebot", "Bingbot", "GPTBot", "ChatGPT-User", "CCBot", "Google-Extended",
    "ClaudeBot", "anthropic-ai", "PerplexityBot", "Bytespider", "Applebot-Extended",
    "meta-externalagent",
)
# Figure 4's popularity strata: the top 1k, 10k and 100k of the ranked list, then all.
STRATA = (1_000, 10_000, 100_000)
_COUNTED = frozenset({Outcome.OK, Outcome.EMPTY, Outcome.TOO_BIG})

# name -> (columns, what it is). The order is the report's.
TABLES: dict[str, tuple[tuple[str, ...], str]] = {
    "outcomes": (("outcome", "sites"), "sites by outcome of their robots.txt request"),
    "availability": (("stratum", "sites", "robots", "robots_share", "sitemaps",
                      "sitemaps_share", "sitemaps_read", "sitemaps_read_share"),
                     "Fig. 4: robots.txt and sitemaps by popularity (cumulative strata)"),
    "robots_lines": (("lines", "files"), "Fig. 5: robots.txt files by size in lines"),
    "sections": (("sections", "files"), "Fig. 6: files by User-agent sections"),
    "fields": (("field", "files", "fields", "fields_per_file"),
               "Table 2: fields by the files holding them"),
    "agents": (("agent", "occurrences", "share"),
               "Table 3 and Fig. 8: User-agent values (case, whitespace, versions folded)"),
    "disallows": (("disallow_rules", "sections"), "Fig. 7: sections by Disallow rules"),
    "sitemap_lines": (("sitemap_lines", "files"), "Fig. 9: files by Sitemap lines"),
    "sitemap_errors": (("downloadinfo", "files"), "Fig. 10: sitemap files by download result"),
    "sitemap_levels": (("level", "files"), "Table 4: sitemap files by indirection level"),
    "sitemap_domains": (("domain", "rank", "sitemap_files", "uris", "uris_per_file",
                         "cumulative_uris", "cumulative_share"),
                        "Figs. 11-15, Tables 5-6: domains with sitemaps, by URIs"),
    "trees": (("domain", "rank", "uris", "roots", "nodes", "leaves", "depth"),
              "Figs. 16-17: the prefix tree of each domain's kept sitemap URLs"),
    "tree_levels": (("level", "nodes", "leaves"),
                    "Figs. 18-19: nodes and leaves per level, all trees together"),
    "access": (("agent", "sites", "entirely", "partly", "not_at_all", "named",
                "entirely_share", "partly_share", "not_at_all_share", "named_share"),
               "beyond Roy 2008: sites disallowing each agent entirely, partly, not at all"),
    "usage": (("mechanism", "files", "share"),
              "beyond Roy 2008: robots.txt files stating AI-usage preferences, by mechanism"),
    "usage_purposes": (("mechanism", "purpose", "allow", "disallow", "allow_share",
                        "disallow_share"),
                       "beyond Roy 2008: files allowing / disallowing each purpose"),
    "ai_crawlers": (("crawler", "token", "files", "named", "blocked", "named_share",
                     "blocked_share"),
                    "beyond Roy 2008: AI crawlers of the crawler list, named and denied / "
                    "by robots.txt files"),
    "distributions": (("distribution", "count", "mean", "sd", "median", "minimum",
                       "maximum"),
                      "mean, σ and median of the heavy-tailed distributions"),
    "domains": (("domain", "rank", "outcome", "robots_lines", "groups", "sitemap_lines",
                 "sitemap_files", "uris"), "one row per surveyed domain"),
    "ulinks": (("domain", "rank", "uri", "weight"), "each domain's ulinks (Roy 2008, 2.4)"),
    "sites": (("domain", "rank", "outcome", "status", "error", "robots_url", "robots_bytes",
               "robots_lines", "groups", "disallow_rules", "sitemap_lines"),
              "each site as recorded, with its robots.txt counts"),
    "sitemap_files": (("id", "domain", "parent", "uri", "level", "filetype", "kind",
                       "downloadinfo", "status", "bytes", "url_count", "child_count",
                       "seconds", "cross_site", "error"),
                      "each sitemap file (Roy 2008's sitemapinfo, Table 1)"),
}


@dataclass(frozen=True, slots=True)
class Table:
    """A table as plain rows; ``None`` is an empty cell."""

    name: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    @property
    def title(self) -> str:
        return TABLES[self.name][1]

    def column(self, name: str) -> list[Any]:
        i = self.columns.index(name)
        return [row[i] for row in self.rows]


@dataclass(frozen=True, slots=True)
class KeptUrl:
    """A page URL a survey kept from a domain's sitemaps (``lastmod`` as written)."""

    loc: str
    lastmod: str | None
    priority: float | None


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


class Survey:
    """A survey's folder (``survey.sqlite`` in it) read as Roy 2008's tables.

    ``agents`` are those of the ``access`` table; ``k`` the ulinks per domain.
    """

    def __init__(self, folder: str | Path, *, agents: tuple[str, ...] = DEFAULT_AGENTS,
                 k: int = 5, ai_crawlers: Sequence[tuple[str, str]] = ()) -> None:
        self.folder = Path(folder)
        database = self.folder / "survey.sqlite"
        if not database.is_file():
            raise ConfigError(f"{self.folder}: no survey here ({database} is missing)")
        if k < 1:
            raise ConfigError("k must be 1 or more")
        if not agents:
            raise ConfigError("give at least one agent")
        self.agents = agents
        self.k = k
        self.ai_crawlers = tuple(ai_crawlers)  # (name, robots.txt token), for ai_crawlers
        SurveyStore(database).close()  # an older survey gets the tables it lacks
        self._db = sqlite3.connect(database)
        self._tables: dict[str, Table] = {}
        self.facts: dict[str, Any] = {}  # single numbers the report states

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Survey:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(TABLES)

    def rows(self, name: str) -> Table:
        """Table ``name`` (one of :attr:`names`) as plain rows."""
        if name not in TABLES:
            raise ConfigError(f"no table {name!r}: the tables are {', '.join(TABLES)}")
        if name not in self._tables:
            if name in ("access", "usage", "usage_purposes", "ai_crawlers"):
                self._rules_side()
            elif name in ("sitemap_errors", "sitemap_levels", "sitemap_domains", "trees",
                          "tree_levels", "ulinks", "sitemap_files"):
                self._sitemap_side()
            else:
                self._robots_side()
                if name in ("domains", "availability", "distributions"):
                    self._sitemap_side()
                    self._joined()
        return self._tables[name]

    def table(self, name: str) -> pandas.DataFrame:
        """Table ``name`` as a pandas DataFrame (integer columns with empty cells are
        pandas' nullable ``Int64``)."""
        try:
            import pandas
        except ImportError as exc:
            raise ConfigError("DataFrames need the survey extra: "
                              "pip install 'polite-web[survey]'") from exc
        table = self.rows(name)
        frame = pandas.DataFrame.from_records(table.rows, columns=list(table.columns))
        for column in table.columns:
            values = [v for v in table.column(column) if v is not None]
            if values and all(isinstance(v, int) and not isinstance(v, bool)
                              for v in values) and len(values) < len(table.rows):
                frame[column] = frame[column].astype("Int64")
        return frame

    def kept_urls(self) -> Iterator[tuple[str, list[KeptUrl]]]:
        """Each domain's kept sitemap page URLs, domain by domain (in name order)."""
        current: str | None = None
        kept: list[KeptUrl] = []
        for domain, loc, lastmod, priority in self._db.execute(
                "SELECT domain, loc, lastmod, priority FROM sitemap_urls ORDER BY domain"):
            if domain != current:
                if current is not None:
                    yield current, kept
                current, kept = domain, []
            kept.append(KeptUrl(loc, lastmod, priority))
        if current is not None:
            yield current, kept

    def _put(self, name: str, rows: list[tuple[Any, ...]]) -> None:
        self._tables[name] = Table(name, TABLES[name][0], rows)

    # -- the robots.txt side -------------------------------------------------------------

    def _sites(self) -> Iterator[tuple[Any, ...]]:
        yield from self._db.execute(
            "SELECT s.domain, s.rank, s.outcome, s.status, s.error, s.robots_url, "
            "s.robots_bytes, b.body FROM sites s LEFT JOIN bodies b ON b.hash = s.robots_hash "
            "ORDER BY s.rank IS NULL, s.rank, s.domain")

    def _robots_side(self) -> None:
        if "fields" in self._tables:
            return
        outcomes: Counter[str] = Counter()
        files: list[FileStats] = []
        sites: list[tuple[Any, ...]] = []
        self._stats: dict[str, FileStats] = {}
        for domain, rank, outcome, status, error, url, size, body in self._sites():
            outcomes[outcome] += 1
            stats = None
            if outcome in _COUNTED and body is not None:
                stats = file_stats(bytes(body))
                files.append(stats)
                self._stats[domain] = stats
            sites.append((domain, rank, outcome, status, error, url, size,
                          stats.lines if stats else None,
                          len(stats.sections) if stats else None,
                          sum(stats.sections) if stats else None,
                          stats.sitemaps if stats else None))
        self._put("sites", sites)
        known = [o.value for o in Outcome]
        self._put("outcomes", [(name, outcomes.get(name, 0)) for name in known]
                  + [(name, n) for name, n in sorted(outcomes.items()) if name not in known])
        self._put("fields", [(row.name, row.files, row.count, round(row.share, 4))
                             for row in popular_fields(files)])
        agents = popular_agents(files)
        self._put("agents", [(row.name, row.count, round(row.share, 6)) for row in agents])
        self._put("robots_lines", frequencies(stats.lines for stats in files))
        self._put("sections", frequencies(len(stats.sections) for stats in files))
        per_section = [n for stats in files for n in stats.sections]
        self._put("disallows", frequencies(per_section))
        with_sitemaps = [stats.sitemaps for stats in files if stats.sitemaps]
        self._put("sitemap_lines", frequencies(with_sitemaps))
        self._distributions = {
            "robots_lines": summarize([stats.lines for stats in files]),
            "sections_per_file": summarize([len(stats.sections) for stats in files]),
            "disallows_per_section": summarize(per_section),
            "sitemap_lines_per_file": summarize(with_sitemaps),
            "agent_occurrences": summarize([row.count for row in agents]),
        }
        self.facts.update(
            sites=len(sites), files=len(files),
            agent_lines=sum(row.count for row in agents), distinct_agents=len(agents),
            agents_once=sum(1 for row in agents if row.count == 1),
            sections_total=len(per_section),
            sections_without_disallow=sum(1 for n in per_section if n == 0),
            sections_with_one_disallow=sum(1 for n in per_section if n == 1),
            files_with_sitemap_lines=len(with_sitemaps),
            sitemap_lines_total=sum(with_sitemaps),
            files_with_one_sitemap_line=sum(1 for n in with_sitemaps if n == 1))

    # -- beyond the seed: the agents' access, AI-usage preferences and AI crawlers ---------

    def _rules_side(self) -> None:
        """The tables read from each file's rules, its body parsed once for all of them."""
        counts: dict[str, Counter[Access]] = {agent: Counter() for agent in self.agents}
        named: Counter[str] = Counter()
        tokens = [token for _, token in self.ai_crawlers]
        stats = []
        files = 0
        for domain, _, outcome, _, _, _, _, body in self._sites():
            if outcome not in _COUNTED or body is None:
                continue
            files += 1
            robots = parse(bytes(body))
            for agent, found in agent_access(robots, self.agents, domain).items():
                counts[agent][found.access] += 1
                named[agent] += found.named
            stats.append(usage_stats(robots, tokens))
        rows = []
        for agent in self.agents:
            entirely, partly, none = (counts[agent][Access.ENTIRELY],
                                      counts[agent][Access.PARTLY],
                                      counts[agent][Access.NOT_AT_ALL])
            rows.append((agent, files, entirely, partly, none, named[agent],
                         _share(entirely, files), _share(partly, files),
                         _share(none, files), _share(named[agent], files)))
        self._put("access", rows)
        self._usage(count_usage(stats))

    def _usage(self, counts: UsageCounts) -> None:
        files = counts.files
        self._put("usage", [(m, counts.mechanisms[m], _share(counts.mechanisms[m], files))
                            for m in (*MECHANISMS, "any")])
        rows = []
        for mechanism in ("content-usage", "content-signal"):
            for purpose in MAIN_PURPOSES:
                allow = counts.stated[(mechanism, purpose, "allow")]
                disallow = counts.stated[(mechanism, purpose, "disallow")]
                rows.append((mechanism, purpose, allow, disallow, _share(allow, files),
                             _share(disallow, files)))
        self._put("usage_purposes", rows)
        self._put("ai_crawlers", [
            (name, token, files, counts.named[token], counts.blocked[token],
             _share(counts.named[token], files), _share(counts.blocked[token], files))
            for name, token in self.ai_crawlers])
        self.facts.update(usage_files=files, usage_any=counts.mechanisms["any"],
                          ai_naming_any=counts.naming_any, ai_blocking_any=counts.blocking_any)

    # -- the sitemap side -----------------------------------------------------------------

    def _sitemap_side(self) -> None:
        if "sitemap_levels" in self._tables:
            return
        db = self._db
        ranks = dict(db.execute("SELECT domain, rank FROM sites"))
        self._put("sitemap_files", list(db.execute(
            "SELECT id, domain, parent, uri, level, filetype, kind, downloadinfo, status, "
            "bytes, url_count, child_count, seconds, cross_site, error FROM sitemaps "
            "ORDER BY domain, id")))
        self._put("sitemap_errors", list(db.execute(
            "SELECT downloadinfo, COUNT(*) FROM sitemaps GROUP BY downloadinfo "
            "ORDER BY downloadinfo != 'ok', COUNT(*) DESC, downloadinfo")))
        # Files reached, downloaded or not; the children an index's sampling left out
        # were never requested and are not counted.
        self._put("sitemap_levels", list(db.execute(
            "SELECT level, COUNT(*) FROM sitemaps WHERE downloadinfo != 'not_sampled' "
            "GROUP BY level ORDER BY level")))
        ok = db.execute("SELECT COUNT(*), COUNT(DISTINCT uri) FROM sitemaps "
                        "WHERE downloadinfo = 'ok'").fetchone()
        self.facts.update(sitemap_downloads=ok[0], sitemap_distinct_files=ok[1])
        # Files reached, as Table 4 counts them (an index's children left out by its
        # sampling were never requested).
        files = dict(db.execute("SELECT domain, COUNT(*) FROM sitemaps "
                                "WHERE downloadinfo != 'not_sampled' GROUP BY domain"))
        read = {row[0] for row in db.execute(
            "SELECT DISTINCT domain FROM sitemaps WHERE downloadinfo = 'ok'")}
        uris = dict(db.execute(
            "SELECT domain, SUM(url_count) FROM sitemaps GROUP BY domain"))
        for domain, total, site_files in db.execute(
                "SELECT domain, uris_total, files FROM sitemap_sites"):
            uris[domain] = total
            files.setdefault(domain, site_files)
        self._has_sitemaps = bool(files)
        self._sitemap_counts = {domain: (files.get(domain, 0), uris.get(domain, 0))
                                for domain in set(files) | set(uris)}
        self._sitemaps_read = read
        ranked = sorted(((domain, ranks.get(domain), n, uris.get(domain, 0) or 0)
                         for domain, n in files.items()),
                        key=lambda row: (-row[3], -row[2], row[0]))
        everything = sum(row[3] for row in ranked)
        rows, running = [], 0
        for domain, rank, n, count in ranked:
            running += count
            rows.append((domain, rank, n, count, count / n if n else None, running,
                         _share(running, everything)))
        self._put("sitemap_domains", rows)
        self.facts.update(sitemap_domains=len(rows), sitemap_uris=everything,
                          domains_with_one_sitemap=sum(1 for row in rows if row[2] == 1))
        self._distributions_sitemaps = {
            "sitemap_files_per_domain": summarize([row[2] for row in rows]),
            "uris_per_domain": summarize([row[3] for row in rows]),
            "uris_per_sitemap_file": summarize([row[4] for row in rows if row[4] is not None]),
        }
        self._trees(ranks)

    def _trees(self, ranks: dict[str, int | None]) -> None:
        trees, links = [], []
        levels: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        domains_read = len(self._sitemaps_read)
        current: str | None = None
        tree = UriTree()

        def finish(domain: str, tree: UriTree) -> None:
            counts = tree.levels()
            for level, (nodes, leaves) in counts.items():
                levels[level][0] += nodes
                levels[level][1] += leaves
            trees.append((domain, ranks.get(domain), tree.uris, len(tree.roots),
                          sum(n for n, _ in counts.values()),
                          sum(leaves for _, leaves in counts.values()), max(counts)))
            for link in ulinks(tree, self.k):  # folds the tree: its counts are taken
                links.append((domain, ranks.get(domain), link.uri, int(link.weight)))

        for domain, loc in self._db.execute(
                "SELECT domain, loc FROM sitemap_urls ORDER BY domain"):
            if domain != current:
                if current is not None and tree.uris:
                    finish(current, tree)
                current, tree = domain, UriTree()
            tree.add(loc)
        if current is not None and tree.uris:
            finish(current, tree)
        order = {domain: (rank is None, rank, domain) for domain, rank in ranks.items()}
        trees.sort(key=lambda row: order.get(row[0], (True, None, row[0])))
        links.sort(key=lambda row: (order.get(row[0], (True, None, row[0])), -row[3]))
        # ulinks come heaviest first within a domain; the sort above is stable per domain.
        self._put("trees", trees)
        self._put("tree_levels", [(level, n, leaves)
                                  for level, (n, leaves) in sorted(levels.items())])
        self._put("ulinks", links)
        self.facts.update(tree_sites_read=domains_read, tree_sites=len(trees),
                          tree_roots=sum(row[3] for row in trees),
                          tree_max_depth=max((row[6] for row in trees), default=None))
        self._distributions_trees = {
            "tree_nodes": summarize([row[4] for row in trees]),
            "tree_depth": summarize([row[6] for row in trees]),
        }

    # -- tables of both sides -------------------------------------------------------------

    def _joined(self) -> None:
        if "domains" in self._tables:
            return
        sites = self._tables["sites"].rows
        has = self._has_sitemaps
        domains = []
        for domain, rank, outcome, *_, lines, groups, _, sitemap_lines in sites:
            files, uris = self._sitemap_counts.get(domain, (0, 0)) if has else (None, None)
            domains.append((domain, rank, outcome, lines, groups, sitemap_lines, files, uris))
        self._put("domains", domains)
        # A stratum is shown when it differs from the one before (a list of 1,500 has
        # the top 1k and the top 10k, which is all of it, but no top 100k).
        ranks = [row[1] for row in sites if row[1] is not None]
        strata = [(f"top {n // 1000}k", n) for i, n in enumerate(STRATA)
                  if any(r <= n for r in ranks)
                  and any(r > (STRATA[i - 1] if i else 0) for r in ranks)]
        rows = []
        for label, limit in [*strata, ("all", None)]:
            chosen = [row for row in sites
                      if limit is None or (row[1] is not None and row[1] <= limit)]
            robots = sum(1 for row in chosen if row[7] is not None)
            maps = sum(1 for row in chosen if row[10])
            read = (sum(1 for row in chosen if row[0] in self._sitemaps_read) if has
                    else None)
            rows.append((label, len(chosen), robots, _share(robots, len(chosen)), maps,
                         _share(maps, len(chosen)), read,
                         None if read is None else _share(read, len(chosen))))
        self._put("availability", rows)
        summaries = {**self._distributions, **self._distributions_sitemaps,
                     **self._distributions_trees}
        self._put("distributions", [
            (name, s.count, s.mean, s.sd, s.median, s.minimum, s.maximum)
            for name, s in summaries.items() if s is not None])

"""``polite report``: a survey's tables as CSV and Parquet, seed 004's figures as SVG, and
``index.html`` showing each beside the value the seed reported in 2008.

Writes ``DIR/report/``: ``tables/NAME.csv`` and ``data/NAME.parquet`` for every table of
:data:`polite.survey.tables.TABLES`, ``figures/figNN_*.svg`` (matplotlib) and
``index.html``, which links them relatively and loads nothing from elsewhere.
"""

from __future__ import annotations

import csv
import html
import importlib.util
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polite.errors import ConfigError
from polite.survey import seed2008
from polite.survey.tables import TABLES, Survey, Table

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["require_extra", "write_report"]

_EXTRA = ("pandas", "pyarrow", "matplotlib")


def require_extra() -> None:
    """Raise a clear error naming the extra when the report's libraries are missing."""
    missing = [name for name in _EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"polite report needs {', '.join(missing)}: install the survey "
                          "extra (pip install 'polite-web[survey]')")


# A cell a spreadsheet program would read as a formula: robots.txt files are written by
# strangers, and a User-agent line of "=cmd|..." must open as text, not run.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _write_csv(table: Table, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(table.columns)
        writer.writerows([_cell(v) for v in row] for row in table.rows)


def _write_parquet(table: Table, path: Path) -> None:
    import pyarrow
    import pyarrow.parquet

    columns = {name: table.column(name) for name in table.columns}
    arrays = {}
    for name, values in columns.items():
        kinds = {type(v) for v in values if v is not None}
        if kinds == {int, float}:
            values = [None if v is None else float(v) for v in values]
        elif kinds == {bytes}:
            values = [None if v is None else v.decode("utf-8", "replace") for v in values]
        arrays[name] = pyarrow.array(values) if kinds else pyarrow.nulls(len(values))
    pyarrow.parquet.write_table(pyarrow.table(arrays), path)


def write_report(survey: Survey, folder: Path, *, figures: bool = True) -> list[Path]:
    """Write the whole report into ``folder``; returns the files written. Without
    ``figures``, the tables, their data and the page alone (the page lists the figures not
    drawn)."""
    require_extra()
    tables, data = folder / "tables", folder / "data"
    for place in (tables, data):
        place.mkdir(parents=True, exist_ok=True)
    written = []
    for name in TABLES:
        table = survey.rows(name)
        _write_csv(table, tables / f"{name}.csv")
        _write_parquet(table, data / f"{name}.parquet")
        written += [tables / f"{name}.csv", data / f"{name}.parquet"]
    empty: set[str] | None = None  # None: no figure drawn
    if figures:
        drawn, empty = _figures(survey, folder / "figures")
        written += drawn
    else:  # an earlier report's figures would no longer be this survey's
        for name in FIGURES:
            (folder / "figures" / f"{name}.svg").unlink(missing_ok=True)
    page = folder / "index.html"
    page.write_text(_page(survey, empty), encoding="utf-8")
    written.append(page)
    return written


# -- figures ------------------------------------------------------------------------------

FIGURES: dict[str, str] = {
    "fig04_availability": "Fig. 4: robots.txt and sitemap information by popularity",
    "fig05_robots_lines": "Fig. 5: robots.txt size in lines",
    "fig06_sections": "Fig. 6: User-agent sections per robots.txt file",
    "fig07_disallows": "Fig. 7: Disallow rules per User-agent section",
    "fig08_agents": "Fig. 8: User-agent values by occurrences",
    "fig09_sitemap_lines": "Fig. 9: Sitemap lines per robots.txt file",
    "fig10_sitemap_errors": "Fig. 10: sitemap downloads by result",
    "fig11_sitemaps_per_domain": "Fig. 11: sitemap files per domain",
    "fig12_uris_per_domain": "Fig. 12: URIs per domain",
    "fig13_uri_coverage": "Fig. 13: cumulative share of all URIs",
    "fig14_uris_vs_files": "Fig. 14: URIs against sitemap files",
    "fig15_uris_per_file": "Fig. 15: average URIs per sitemap file",
    "fig16_tree_nodes": "Fig. 16: prefix-tree size in nodes",
    "fig17_tree_depth": "Fig. 17: prefix-tree depth",
    "fig18_nodes_per_level": "Fig. 18: nodes per level, all trees",
    "fig19_leaves_per_level": "Fig. 19: leaves per level, all trees",
    "access": "Sites disallowing each agent (beyond Roy 2008)",
    "ai_usage": "AI-usage preferences stated in robots.txt, by mechanism and purpose",
}


def _positive(xs: Sequence[Any], ys: Sequence[Any]) -> tuple[list[float], list[float]]:
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True)
             if x is not None and y is not None and x > 0 and y > 0]
    return [float(x) for x, _ in pairs], [float(y) for _, y in pairs]


def _loglog(ax: Axes, xs: Sequence[Any], ys: Sequence[Any], xlabel: str, ylabel: str, *,
            logx: bool = True) -> None:
    x, y = _positive(xs, ys)
    if not x:
        return
    ax.plot(x, y, ".", markersize=4, color="#1f5fa8", rasterized=len(x) > 5_000)
    if logx:
        ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def _plain(value: float) -> str:
    """A log axis's tick as a reader counts: 1, 20, 500, 3k, 10M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _ranked(values: Sequence[Any]) -> tuple[list[int], list[Any]]:
    ordered = sorted((v for v in values if v is not None), reverse=True)
    return list(range(1, len(ordered) + 1)), ordered


def _figures(survey: Survey, folder: Path) -> tuple[list[Path], set[str]]:
    """Draw every figure; returns the files and the names of those without data."""
    # a Figure of its own, not pyplot: no backend chosen, no figure manager kept, and
    # pyplot's import (a tenth of a small report's CPU) not paid; savefig draws the SVG
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogFormatter

    class _PlainLog(LogFormatter):
        """The ticks a log axis labels, in plain numbers: matplotlib's default writes each
        as a power of ten in its TeX-like mathtext, which took a fifth of a small report's
        instructions to parse and lay out (10.5 billion against 8.3 without)."""

        def __call__(self, x: float, pos: int | None = None) -> str:
            return _plain(x) if super().__call__(x, pos) else ""

    matplotlib.rcParams.update({"svg.hashsalt": "polite", "font.size": 9,
                                "axes.grid": True, "grid.alpha": 0.3})
    t = survey.rows
    domains = t("sitemap_domains")
    trees = t("trees")

    def availability(ax: Axes) -> None:
        table = t("availability")
        labels = table.column("stratum")
        series = [("robots.txt", "robots_share", "#1f5fa8"),
                  ("Sitemap lines", "sitemaps_share", "#e07b00"),
                  ("sitemaps read", "sitemaps_read_share", "#3a9a3a")]
        width = 0.27
        for i, (label, column, color) in enumerate(series):
            values = [v or 0.0 for v in table.column(column)]
            ax.bar([j + (i - 1) * width for j in range(len(labels))],
                   [100 * v for v in values], width, label=label, color=color)
        ax.axhline(100 * seed2008.FACTS["robots_share"], color="#1f5fa8", ls="--", lw=1,
                   label="2008: robots.txt, all")
        ax.axhline(100 * seed2008.FACTS["sitemaps_share"], color="#e07b00", ls="--", lw=1,
                   label="2008: sitemaps, all")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylabel("% of sites")
        ax.legend(fontsize=7)

    def histogram(name: str, xcol: str, xlabel: str, ylabel: str) -> Callable[[Axes], None]:
        return lambda ax: _loglog(ax, t(name).column(xcol), t(name).column(t(name).columns[1]),
                                  xlabel, ylabel)

    def agents(ax: Axes) -> None:
        ranks, counts = _ranked(t("agents").column("occurrences"))
        _loglog(ax, ranks, counts, "User-agent value, by occurrences", "occurrences",
                logx=False)

    def errors(ax: Axes) -> None:
        table = t("sitemap_errors")
        if not table.rows:
            return
        ax.barh(table.column("downloadinfo"), table.column("files"), color="#1f5fa8")
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_xlabel("sitemap files")

    def per_domain(column: str, ylabel: str) -> Callable[[Axes], None]:
        def draw(ax: Axes) -> None:
            ranks, values = _ranked(domains.column(column))
            _loglog(ax, ranks, values, "domain, ranked", ylabel)
        return draw

    def coverage(ax: Axes) -> None:
        shares = domains.column("cumulative_share")
        if not shares:
            return
        x = list(range(1, len(shares) + 1))
        ax.plot(x, [100 * (s or 0) for s in shares], color="#1f5fa8")
        ax.set_xscale("log")
        ax.set_xlabel("domains, by URIs")
        ax.set_ylim(0, 100.5)
        ax.set_ylabel("% of all URIs")

    def uris_vs_files(ax: Axes) -> None:
        _loglog(ax, domains.column("sitemap_files"), domains.column("uris"),
                "sitemap files", "URIs")
        if domains.rows:
            top = max(domains.column("sitemap_files"))
            ax.plot([1, max(top, 2)], [50_000, 50_000 * max(top, 2)], color="#c03030",
                    lw=1, ls="--", label="50,000 URIs a file (the protocol's limit)")
            ax.legend(fontsize=7)

    def per_file(ax: Axes) -> None:
        values = sorted(v for v in domains.column("uris_per_file") if v)
        _loglog(ax, range(1, len(values) + 1), values, "domains, by URIs per file",
                "URIs per sitemap file", logx=False)

    def tree_nodes(ax: Axes) -> None:
        ranks, nodes = _ranked(trees.column("nodes"))
        _loglog(ax, ranks, nodes, "domains, by tree size", "nodes")

    def tree_depth(ax: Axes) -> None:
        from collections import Counter

        counts = sorted(Counter(trees.column("depth")).items())
        ax.bar([d for d, _ in counts], [n for _, n in counts], color="#1f5fa8")
        ax.set_xlabel("depth (deepest level)")
        ax.set_ylabel("trees")

    def levels(column: str) -> Callable[[Axes], None]:
        def draw(ax: Axes) -> None:
            table = t("tree_levels")
            x, y = _positive([lv + 1 for lv in table.column("level")], table.column(column))
            if not x:
                return
            ax.plot([v - 1 for v in x], y, ".-", color="#1f5fa8")
            ax.set_yscale("log")
            ax.set_xlabel("level (0: the host)")
            ax.set_ylabel(column)
        return draw

    def access(ax: Axes) -> None:
        table = t("access")
        names = table.column("agent")
        left = [0.0] * len(names)
        for column, label, color in (("entirely_share", "entirely", "#c03030"),
                                     ("partly_share", "partly", "#e0a000"),
                                     ("not_at_all_share", "not at all", "#3a9a3a")):
            values = [100 * (v or 0.0) for v in table.column(column)]
            ax.barh(names, values, left=left, label=label, color=color)
            left = [a + b for a, b in zip(left, values, strict=True)]
        ax.invert_yaxis()
        ax.set_xlabel("% of robots.txt files")
        ax.legend(fontsize=7, loc="lower right")

    def ai_usage(ax: Axes) -> None:
        table = t("usage_purposes")
        rows = [r for r in table.rows if r[2] or r[3]]
        names = [f"{m} {p}" for m, p, *_ in rows]
        allow = [100 * (r[4] or 0.0) for r in rows]
        disallow = [100 * (r[5] or 0.0) for r in rows]
        if names:
            ax.barh(names, disallow, label="disallow", color="#c03030")
            ax.barh(names, allow, left=disallow, label="allow", color="#3a9a3a")
            ax.invert_yaxis()
            ax.set_xlabel("% of robots.txt files")
            ax.legend(fontsize=7, loc="lower right")

    draw: dict[str, Callable[[Axes], None]] = {
        "fig04_availability": availability,
        "fig05_robots_lines": histogram("robots_lines", "lines", "lines", "files"),
        "fig06_sections": histogram("sections", "sections", "User-agent sections", "files"),
        "fig07_disallows": histogram("disallows", "disallow_rules", "Disallow rules",
                                     "sections"),
        "fig08_agents": agents,
        "fig09_sitemap_lines": histogram("sitemap_lines", "sitemap_lines", "Sitemap lines",
                                         "files"),
        "fig10_sitemap_errors": errors,
        "fig11_sitemaps_per_domain": per_domain("sitemap_files", "sitemap files"),
        "fig12_uris_per_domain": per_domain("uris", "URIs"),
        "fig13_uri_coverage": coverage,
        "fig14_uris_vs_files": uris_vs_files,
        "fig15_uris_per_file": per_file,
        "fig16_tree_nodes": tree_nodes,
        "fig17_tree_depth": tree_depth,
        "fig18_nodes_per_level": levels("nodes"),
        "fig19_leaves_per_level": levels("leaves"),
        "access": access,
        "ai_usage": ai_usage,
    }
    folder.mkdir(parents=True, exist_ok=True)
    written, empty = [], set()
    for name, title in FIGURES.items():
        figure = Figure(figsize=(6.0, 3.6))
        ax = figure.subplots()
        draw[name](ax)
        if not ax.lines and not ax.patches:
            empty.add(name)
            ax.cla()
            ax.axis("off")
            ax.text(0.5, 0.5, "no data in this survey", ha="center", va="center")
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_major_formatter(_PlainLog())
                axis.set_minor_formatter(_PlainLog(labelOnlyBase=False))
        # the title's place given (where matplotlib would put it: no tick labels above
        # the axes), so that drawing does not lay out every tick label once more to find
        # it: a report's figures took 7 % more CPU
        ax.set_title(title, fontsize=9, y=1.0)
        # fixed margins: tight_layout measured every tick label, a third of the time
        figure.subplots_adjust(left=0.24 if name in ("access", "fig10_sitemap_errors",
                                                     "ai_usage")
                               else 0.12, right=0.97, bottom=0.14, top=0.91)
        path = folder / f"{name}.svg"
        figure.savefig(path, format="svg", metadata={"Date": None})
        written.append(path)
    return written, empty


# -- the page -----------------------------------------------------------------------------


def _number(value: Any, digits: int = 1) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if value.is_integer() and abs(value) < 1e15 and digits == 0:
            return f"{int(value):,}"
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _e(text: object) -> str:
    return html.escape(str(text))


def _html_table(head: Sequence[str], rows: Sequence[Sequence[Any]], *, cls: str = "",
                ident: str = "") -> str:
    attrs = (f' class="{cls}"' if cls else "") + (f' id="{ident}"' if ident else "")
    out = [f"<table{attrs}><thead><tr>"]
    out += [f"<th>{_e(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(
            f'<td class="{"n" if not isinstance(c, str) or c[:1].isdigit() else ""}">'
            f"{_e(c if isinstance(c, str) else _number(c, 0 if isinstance(c, int) else 2))}"
            "</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _side_by_side(ident: str, head: Sequence[str], new: Sequence[Sequence[Any]],
                  old: Sequence[Sequence[Any]]) -> str:
    """A table of this survey's rows beside the seed's, row by row."""
    n = max(len(new), len(old))
    blank = [""] * len(head)
    rows = []
    for i in range(n):
        left = list(new[i]) if i < len(new) else blank
        right = list(old[i]) if i < len(old) else blank
        rows.append([i + 1, *left, *right])
    heads = ["#", *[f"{h}" for h in head], *[f"{h} (2008)" for h in head]]
    return _html_table(heads, rows, cls="pair", ident=ident)


def _summary_line(survey: Survey, name: str, unit: str) -> str:
    found = {row[0]: row for row in survey.rows("distributions").rows}
    row = found.get(name)
    text = "This survey: no data."
    if row is not None:
        _, count, mean, sd, median, _, maximum = row
        text = (f"This survey: mean <b>{mean:,.1f}</b> {unit}, σ <b>{sd:,.1f}</b>, median "
                f"<b>{_number(median, 0 if float(median).is_integer() else 1)}</b>, "
                f"maximum {_number(maximum, 0)} (over {count:,}).")
    old = seed2008.SUMMARIES.get(name)
    if old is not None:
        text += (f" Roy 2008: mean {old[0]:g} {unit}, σ {old[1]:g}, median "
                 f"{old[2]:g}.")
    return f'<p class="stats" data-distribution="{_e(name)}">{text}</p>'


def _figure(name: str, empty: set[str] | None) -> str:
    """The figure ``name`` on the page; ``empty``: the figures drawn without data (None:
    none was drawn)."""
    if empty is None:
        return (f'<p class="note nodata">{_e(FIGURES[name])}: not drawn (this report was '
                f'written with --no-figures).</p>')
    if name in empty:
        return (f'<p class="note nodata">{_e(FIGURES[name])}: no data in this survey '
                f'(<a href="figures/{name}.svg">SVG</a>).</p>')
    return (f'<figure><img src="figures/{name}.svg" alt="{_e(FIGURES[name])}" '
            f'width="600" height="360"><figcaption>{_e(FIGURES[name])} '
            f'(<a href="figures/{name}.svg">SVG</a>)</figcaption></figure>')


def _csv_links(*names: str) -> str:
    return ("<p class=\"files\">" + " · ".join(
        f'<a href="tables/{n}.csv">{n}.csv</a> (<a href="data/{n}.parquet">Parquet</a>)'
        for n in names) + "</p>")


_STYLE = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
color:#1b1b1b;background:#fafafa}
main{max-width:1020px;margin:0 auto;padding:1.5em 2em 4em;background:#fff}
h1{font-size:1.7em;margin:.2em 0}h2{font-size:1.25em;margin-top:2.2em;
border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.88em}
th,td{padding:.25em .6em;border-bottom:1px solid #e4e4e4;text-align:left}
th{background:#f1f3f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
table.pair th:nth-child(n+2){white-space:nowrap}
figure{margin:1em 0}img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}.stats{background:#f5f8fc;border-left:3px solid
#1f5fa8;padding:.4em .8em}.files{font-size:.85em;color:#555}
nav ol{columns:2;font-size:.9em}.note{color:#555;font-size:.9em}
"""


def _page(survey: Survey, empty: set[str] | None) -> str:
    t = survey.rows
    facts = survey.facts
    old = seed2008.FACTS
    parts: list[str] = []
    add = parts.append
    sites = facts.get("sites", 0)
    files = facts.get("files", 0)
    add(f"<h1>Web site metadata: the survey in {_e(survey.folder.name or 'this folder')}"
        "</h1>")
    add(f'<p>{sites:,} sites surveyed, {files:,} robots.txt files '
        f"({_percent(files / sites if sites else None)}). Each table and figure of "
        "R. Roy's <i>Web Site Metadata</i> (UC Berkeley, 2008; Alexa's top 100,000 "
        "domains: 44,832 robots.txt files) stands beside the value it reported. "
        "robots.txt files are the sites whose outcome is <code>ok</code>, "
        "<code>empty</code> or <code>too_big</code>. Every table is also a CSV file "
        "(<code>tables/</code>) and a Parquet file (<code>data/</code>).</p>")
    sections = [
        ("outcomes", "Outcomes"), ("fig4", "Fig. 4 availability"), ("fig5", "Fig. 5 size"),
        ("fig6", "Fig. 6 sections"), ("table2", "Table 2 fields"),
        ("table3", "Table 3 user-agents"), ("fig7", "Fig. 7 Disallow rules"),
        ("fig8", "Fig. 8 user-agent frequency"), ("fig9", "Fig. 9 Sitemap lines"),
        ("fig10", "Fig. 10 sitemap errors"), ("table4", "Table 4 indirection"),
        ("fig11", "Fig. 11 and Table 6 sitemaps per domain"),
        ("fig12", "Figs. 12-13 and Table 5 URIs per domain"),
        ("fig14", "Figs. 14-15 URIs and files"), ("fig16", "Figs. 16-19 prefix trees"),
        ("access", "Agents' access"), ("ai-usage", "AI usage"), ("ulinks", "ulinks"),
    ]
    add("<nav><ol>" + "".join(f'<li><a href="#{i}">{_e(n)}</a></li>' for i, n in sections)
        + "</ol></nav>")

    add('<h2 id="outcomes">Outcomes of the robots.txt requests</h2>')
    add(_html_table(["outcome", "sites", "share"],
                    [[o, n, _percent(n / sites if sites else None)]
                     for o, n in t("outcomes").rows], ident="t-outcomes"))
    add(_csv_links("outcomes", "domains", "sites"))

    add('<h2 id="fig4">Fig. 4: availability by popularity</h2>')
    rows = [[s, n, r, _percent(rs), m, _percent(ms), "–" if rd is None else rd,
             _percent(rds)] for s, n, r, rs, m, ms, rd, rds in t("availability").rows]
    add(_html_table(["sites", "count", "robots.txt", "share", "Sitemap lines", "share",
                     "sitemaps read", "share"], rows, ident="t-availability"))
    add(f'<p class="note">Strata are cumulative (the top 1k is within the top 10k). '
        f"Roy 2008, all 100,000 domains: robots.txt {_percent(old['robots_share'])}, "
        f"sitemap information {_percent(old['sitemaps_share'])}. A survey without ranks "
        "(<code>--robots-dir</code>) has only the row <i>all</i>.</p>")
    add(_figure("fig04_availability", empty))
    add(_csv_links("availability"))

    add('<h2 id="fig5">Fig. 5: robots.txt size in lines</h2>')
    add(_summary_line(survey, "robots_lines", "lines"))
    add(f'<p class="note">Roy 2008\'s largest file: {old["largest_file_lines"]:,.0f} lines '
        "(cityweekend.com.cn, 12.3 MB). A file over the size cap is counted as far as it "
        "was kept.</p>")
    add(_figure("fig05_robots_lines", empty))
    add(_csv_links("robots_lines"))

    add('<h2 id="fig6">Fig. 6: User-agent sections per file</h2>')
    add(_summary_line(survey, "sections_per_file", "sections"))
    add('<p class="note">A section runs from a User-agent line (or a run of them) to the '
        "next User-agent line after another field. Files without one count as 0.</p>")
    add(_figure("fig06_sections", empty))
    add(_csv_links("sections"))

    add('<h2 id="table2">Table 2: popular fields</h2>')
    add(_side_by_side("t-fields", ["field", "files", "fields", "per file"],
                      [list(r) for r in t("fields").rows[:10]],
                      [list(r) for r in seed2008.FIELDS]))
    add(f'<p class="note">Fields as written, compared without case; over {files:,} files '
        "(2008: 44,832). All fields are in the CSV.</p>")
    add(_csv_links("fields"))

    add('<h2 id="table3">Table 3: popular User-agent values</h2>')
    add(_side_by_side("t-agents", ["agent", "occurrences", "share"],
                      [[a, n, _percent(s)] for a, n, s in t("agents").rows[:10]],
                      [[a, n, _percent(s)] for a, n, s in seed2008.AGENTS]))
    add(f'<p class="note">Values compared without case, whitespace or version numbers '
        f'(<code>Googlebot/2.1</code> is <code>googlebot</code>). This survey: '
        f"{facts.get('agent_lines', 0):,} User-agent lines, "
        f"{facts.get('distinct_agents', 0):,} distinct values; 2008: "
        f"{old['agent_lines']:,.0f} and {old['distinct_agents']:,.0f}.</p>")
    add(_csv_links("agents"))

    add('<h2 id="fig7">Fig. 7: Disallow rules per User-agent section</h2>')
    total = facts.get("sections_total", 0)
    zero, one = facts.get("sections_without_disallow", 0), facts.get(
        "sections_with_one_disallow", 0)
    add(_summary_line(survey, "disallows_per_section", "rules"))
    add(f'<p class="note">This survey: {total:,} sections; {zero:,} '
        f"({_percent(zero / total if total else None)}) without a Disallow rule (not drawn on "
        f"the log axis), {one:,} ({_percent(one / total if total else None)}) with one. "
        f"2008: {old['sections_total']:,.0f} sections; {old['sections_without_disallow']:,.0f}"
        f" (16.6 %) without, {old['sections_with_one_disallow']:,.0f} (68.5 %) with one; the "
        f"largest section had {old['largest_section_disallows']:,.0f} rules.</p>")
    add(_figure("fig07_disallows", empty))
    add(_csv_links("disallows"))

    add('<h2 id="fig8">Fig. 8: User-agent values by occurrences</h2>')
    add(_summary_line(survey, "agent_occurrences", "occurrences"))
    distinct = facts.get("distinct_agents", 0)
    once = facts.get("agents_once", 0)
    add(f'<p class="note">This survey: {distinct:,} distinct values, {once:,} '
        f"({_percent(once / distinct if distinct else None)}) named once. 2008: "
        f"{old['distinct_agents']:,.0f} distinct values, more than half named once.</p>")
    add(_figure("fig08_agents", empty))

    add('<h2 id="fig9">Fig. 9: Sitemap lines per robots.txt file</h2>')
    with_maps = facts.get("files_with_sitemap_lines", 0)
    single = facts.get("files_with_one_sitemap_line", 0)
    add(_summary_line(survey, "sitemap_lines_per_file", "lines"))
    add(f'<p class="note">This survey: {with_maps:,} files '
        f"({_percent(with_maps / files if files else None)}) with Sitemap lines, "
        f"{facts.get('sitemap_lines_total', 0):,} lines; {single:,} "
        f"({_percent(single / with_maps if with_maps else None)}) with one. 2008: "
        f"{old['files_with_sitemap_lines']:,.0f} files (14 %), "
        f"{old['sitemap_lines_total']:,.0f} lines; {old['files_with_one_sitemap_line']:,.0f} "
        f"(91 %) with one; at most {old['most_sitemap_lines']:,.0f}.</p>")
    add(_figure("fig09_sitemap_lines", empty))
    add(_csv_links("sitemap_lines"))

    add('<h2 id="fig10">Fig. 10: sitemap download errors</h2>')
    add(_html_table(["download", "files"], t("sitemap_errors").rows, ident="t-errors"))
    add(f'<p class="note">This survey: {facts.get("sitemap_downloads", 0):,} successful '
        f"downloads of {facts.get('sitemap_distinct_files', 0):,} distinct URIs. 2008: "
        f"{old['sitemap_downloads']:,.0f} downloads of {old['sitemap_distinct_files']:,.0f} "
        f"distinct files; timeouts the most common error, then 404; "
        f"{old['sitemap_forbidden']:,.0f} answered 403.</p>")
    add(_figure("fig10_sitemap_errors", empty))
    add(_csv_links("sitemap_errors", "sitemap_files"))

    add('<h2 id="table4">Table 4: indirection levels</h2>')
    levels = dict(t("sitemap_levels").rows)
    seed_levels = dict(seed2008.LEVELS)
    span = sorted(set(levels) | set(seed_levels))
    add(_html_table(["level", *[str(v) for v in span]],
                    [["files", *[levels.get(v, 0) for v in span]],
                     ["files (2008)", *[seed_levels.get(v, 0) for v in span]]],
                    ident="t-levels"))
    add('<p class="note">Level 0: a file named by a Sitemap line; level n: reached through '
        "n index files. Files left out by the sampling of large indexes are not counted.</p>")
    add(_csv_links("sitemap_levels"))

    add('<h2 id="fig11">Fig. 11 and Table 6: sitemap files per domain</h2>')
    by_files = sorted(t("sitemap_domains").rows, key=lambda r: (-r[2], r[0]))
    add(_side_by_side("t-sitemaps-per-domain", ["domain", "sitemaps"],
                      [[r[0], r[2]] for r in by_files[:10]],
                      [list(r) for r in seed2008.SITEMAPS_PER_DOMAIN]))
    add(_summary_line(survey, "sitemap_files_per_domain", "files"))
    ndom, ones = facts.get("sitemap_domains", 0), facts.get("domains_with_one_sitemap", 0)
    add(f'<p class="note">This survey: {ndom:,} domains with sitemap files, {ones:,} '
        f"({_percent(ones / ndom if ndom else None)}) with one. 2008: "
        f"{old['sitemap_domains']:,.0f} domains, {old['domains_with_one_sitemap']:,.0f} "
        "(73.2 %) with one.</p>")
    add(_figure("fig11_sitemaps_per_domain", empty))

    add('<h2 id="fig12">Figs. 12-13 and Table 5: URIs per domain</h2>')
    add(_side_by_side("t-uris-per-domain", ["domain", "sitemaps", "URIs"],
                      [[r[0], r[2], r[3]] for r in t("sitemap_domains").rows[:10]],
                      [list(r) for r in seed2008.URIS_PER_DOMAIN]))
    add(_summary_line(survey, "uris_per_domain", "URIs"))
    add(f'<p class="note">Roy 2008\'s Table 5 shows the amazon domains; here the ten '
        f"domains with the most URIs. This survey: {facts.get('sitemap_uris', 0):,} URIs in "
        f"all. 2008: {old['sitemap_uris']:,.0f}. URIs are counted in every file read, also "
        "beyond the URLs kept for the trees.</p>")
    add(_figure("fig12_uris_per_domain", empty))
    add(_figure("fig13_uri_coverage", empty))
    add(_csv_links("sitemap_domains"))

    add('<h2 id="fig14">Figs. 14-15: URIs against sitemap files</h2>')
    add(_summary_line(survey, "uris_per_sitemap_file", "URIs"))
    add('<p class="note">2008: ricardo.ch divided 549,637 URIs into 4,911 files; '
        "pt.anuncioo.com put more than 200,000 in one (over the protocol's 50,000).</p>")
    add(_figure("fig14_uris_vs_files", empty))
    add(_figure("fig15_uris_per_file", empty))

    add('<h2 id="fig16">Figs. 16-19: the URI prefix trees</h2>')
    add(_summary_line(survey, "tree_nodes", "nodes"))
    add(_summary_line(survey, "tree_depth", "levels"))
    add(f'<p class="note">One tree per domain over its kept sitemap URLs (one root per '
        f"host; a tree's depth is its deepest level, the host being level 0). This survey: "
        f"{facts.get('tree_sites_read', 0):,} domains with a sitemap file read, "
        f"{facts.get('tree_sites', 0):,} with URIs, {facts.get('tree_roots', 0):,} roots, "
        f"deepest level {_number(facts.get('tree_max_depth'), 0)}. 2008: "
        f"{old['tree_sites_read']:,.0f} sites read, {old['tree_sites']:,.0f} with URIs, "
        f"{old['tree_roots']:,.0f} roots, deepest level {old['tree_max_depth']:,.0f}; "
        "plateaus near 20K and 40K nodes from the 20,000-URI sample.</p>")
    for name in ("fig16_tree_nodes", "fig17_tree_depth", "fig18_nodes_per_level",
                 "fig19_leaves_per_level"):
        add(_figure(name, empty))
    add(_html_table(["level", "nodes", "leaves"], t("tree_levels").rows, ident="t-levels-tree"))
    add(_csv_links("trees", "tree_levels"))

    add('<h2 id="access">Beyond Roy 2008: which agents sites keep out</h2>')
    add('<p>Decided by polite\'s own robots.txt matcher for each robots.txt file. '
        "<b>Entirely</b>: the root <code>/</code> is disallowed to the agent. "
        "<b>Partly</b>: the root is allowed, but at least one Disallow rule with a path "
        "applies to the agent (from its own group, or from <code>*</code> when it has "
        "none). <b>Not at all</b>: no such rule. <b>Named</b>: the file has a User-agent "
        "line for the agent itself. Sites without a robots.txt file are not counted.</p>")
    add(_html_table(["agent", "files", "entirely", "partly", "not at all", "named"],
                    [[a, n, f"{e:,} ({_percent(es)})", f"{p:,} ({_percent(ps)})",
                      f"{z:,} ({_percent(zs)})", f"{m:,} ({_percent(ms)})"]
                     for a, n, e, p, z, m, es, ps, zs, ms in t("access").rows],
                    ident="t-access"))
    add(_figure("access", empty))
    add(_csv_links("access"))

    add('<h2 id="ai-usage">Beyond Roy 2008: AI-usage preferences and AI crawlers</h2>')
    add("<p>Files with a <code>Content-Usage</code> (draft-ietf-aipref-attach, read with "
        "draft-ietf-aipref-vocab-07) or <code>Content-Signal</code> "
        "(draft-romm-aipref-contentsignals) line in a User-agent group, or an RSL "
        "<code>License</code> line; a purpose counts when some such line allows or "
        "disallows it. AI crawlers are those of polite's crawler list: <b>named</b> by a "
        "User-agent line, <b>blocked</b> when <code>/</code> is disallowed to them.</p>")
    add(_html_table(["mechanism", "files"],
                    [[m, f"{n:,} ({_percent(s)})"] for m, n, s in t("usage").rows],
                    ident="t-usage"))
    add(_html_table(["mechanism", "purpose", "allow", "disallow"],
                    [[m, p, f"{a:,} ({_percent(sa)})", f"{d:,} ({_percent(sd)})"]
                     for m, p, a, d, sa, sd in t("usage_purposes").rows],
                    ident="t-usage-purposes"))
    add(_figure("ai_usage", empty))
    add(_html_table(["crawler", "token", "named", "blocked"],
                    [[c, k, f"{n:,} ({_percent(ns)})", f"{b:,} ({_percent(bs)})"]
                     for c, k, _, n, b, ns, bs in t("ai_crawlers").rows],
                    ident="t-ai-crawlers"))
    add(_csv_links("usage", "usage_purposes", "ai_crawlers"))

    add(f'<h2 id="ulinks">ulinks (k = {survey.k})</h2>')
    links = t("ulinks").rows
    add(f'<p class="note">Each domain\'s {survey.k} most useful pages from its sitemap URLs '
        "alone (Roy 2008, section 2.4). The first 20 domains; all are in the CSV.</p>")
    shown: list[str] = []
    for domain, *_ in links:
        if domain not in shown:
            shown.append(domain)
    add(_html_table(["domain", "ulink", "weight"],
                    [[d, u, w] for d, _, u, w in links if d in shown[:20]], ident="t-ulinks"))
    add(_csv_links("ulinks", "distributions"))
    body = "\n".join(parts)
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>Web site metadata: survey report</title><style>{_STYLE}</style>"
            f"</head><body><main>\n{body}\n</main></body></html>\n")

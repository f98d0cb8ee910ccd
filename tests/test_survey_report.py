"""``polite report``: every table equals the truth of a survey built to be known, the
Parquet files and DataFrames hold the same, and the corpus's Tables 2 and 3 equal an
independent count."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from pathlib import Path

import pytest

from polite.core.survey import agent_key
from polite.errors import ConfigError
from polite.robots import MAX_ROBOTS_BYTES
from polite.survey import Survey, write_report
from polite.survey.report import FIGURES, _plain
from tests.commands import run
from tests.conftest import ON_CORPUS_SURVEY, shared_path
from tests.core.test_survey_robots_stats import _independent
from tests.survey_truth import AGENTS, Truth, build_survey


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def value(cell: str) -> str:
    """A CSV cell's value: the report writes a ' before what a spreadsheet would run."""
    return cell[1:] if cell[:1] == "'" and cell[1:2] in ("=", "+", "-", "@", "\t", "\r") \
        else cell


def header(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as stream:
        return next(csv.reader(stream))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    folder = tmp_path_factory.mktemp("survey")
    truth = build_survey(folder)
    agents = [arg for agent in AGENTS for arg in ("--agent", agent)]
    result = run("report", str(folder), "-k", "2", *agents)
    assert result.returncode == 0, result.stderr
    assert "index.html" in result.stdout
    return folder / "report", truth


def test_without_figures_the_tables_and_data_are_the_same_and_the_page_says_so(
        built: tuple[Path, Truth], tmp_path: Path) -> None:
    """``--no-figures``: the same tables and data files as the whole report, no figure (an
    earlier report's are removed: they would not be this survey's), and the page saying,
    for each figure, that it was not drawn (not that there was no data)."""
    report, _ = built
    folder = tmp_path / "survey"
    shutil.copytree(report.parent, folder)  # the whole report written before, figures too
    assert list((folder / "report" / "figures").glob("*.svg"))
    agents = [arg for agent in AGENTS for arg in ("--agent", agent)]
    result = run("report", str(folder), "-k", "2", *agents, "--no-figures")
    assert result.returncode == 0, result.stderr
    alone = folder / "report"
    for kind in ("tables", "data"):
        names = sorted(path.name for path in (report / kind).iterdir())
        assert names == sorted(path.name for path in (alone / kind).iterdir())
        if kind == "tables":
            for name in names:
                assert (alone / kind / name).read_bytes() == (report / kind / name).read_bytes()
    assert not list((alone / "figures").glob("*.svg")) and (report / "figures").is_dir()
    page = (alone / "index.html").read_text(encoding="utf-8")
    assert page.count("not drawn (this report was written with --no-figures)") == len(FIGURES)
    assert "<img" not in page and "no data in this survey" not in page
    assert f"{len(names) * 2 + 1} files" in result.stdout  # tables, data and the page


def test_the_required_files_have_exactly_their_columns(built: tuple[Path, Truth]) -> None:
    report, _ = built
    required = {
        "outcomes": ["outcome", "sites"],
        "fields": ["field", "files", "fields", "fields_per_file"],
        "agents": ["agent", "occurrences", "share"],
        "sitemap_levels": ["level", "files"],
        "domains": ["domain", "rank", "outcome", "robots_lines", "groups", "sitemap_lines",
                    "sitemap_files", "uris"],
        "ulinks": ["domain", "rank", "uri", "weight"],
    }
    for name, columns in required.items():
        assert header(report / "tables" / f"{name}.csv") == columns, name
    for name in ("fig05_robots_lines", "fig10_sitemap_errors", "fig19_leaves_per_level"):
        svg = (report / "figures" / f"{name}.svg").read_text(encoding="utf-8")
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg


def test_robots_side_tables_equal_the_truth(built: tuple[Path, Truth]) -> None:
    report, truth = built
    tables = report / "tables"
    outcomes = {r["outcome"]: int(r["sites"]) for r in rows(tables / "outcomes.csv")}
    assert {k: v for k, v in outcomes.items() if v} == dict(truth.outcomes)
    fields = {r["field"].lower(): r for r in rows(tables / "fields.csv")}
    assert set(fields) == set(truth.field_files)
    for name, files in truth.field_files.items():
        row = fields[name]
        assert (int(row["files"]), int(row["fields"])) == (files, truth.field_lines[name])
        assert float(row["fields_per_file"]) == pytest.approx(
            truth.field_lines[name] / files, abs=1e-4)
    agents = {r["agent"].lower(): r for r in rows(tables / "agents.csv")}
    total = sum(truth.agent_lines.values())
    assert {k: int(r["occurrences"]) for k, r in agents.items()} == dict(truth.agent_lines)
    assert float(agents["*"]["share"]) == pytest.approx(truth.agent_lines["*"] / total,
                                                        abs=1e-6)
    domains = {r["domain"]: r for r in rows(tables / "domains.csv")}
    assert len(domains) == sum(truth.outcomes.values())
    for domain, row in domains.items():
        assert int(row["rank"]) == truth.ranks[domain]
        assert row["outcome"] == truth.outcome_of[domain]
        if domain in truth.lines:
            assert int(row["robots_lines"]) == truth.lines[domain]
            assert int(row["groups"]) == truth.groups[domain]
            assert int(row["sitemap_lines"]) == truth.sitemap_lines[domain]
        else:
            assert row["robots_lines"] == row["groups"] == row["sitemap_lines"] == ""
        assert int(row["sitemap_files"]) == truth.sitemap_files[domain]
        assert int(row["uris"]) == truth.uris.get(domain, 0)
    lines = Counter(truth.lines.values())
    assert {int(r["lines"]): int(r["files"]) for r in rows(tables / "robots_lines.csv")} \
        == dict(lines)
    assert {int(r["sections"]): int(r["files"]) for r in rows(tables / "sections.csv")} \
        == dict(Counter(truth.groups.values()))
    assert {int(r["disallow_rules"]): int(r["sections"])
            for r in rows(tables / "disallows.csv")} == dict(Counter(truth.disallows))
    maps = Counter(n for n in truth.sitemap_lines.values() if n)
    assert {int(r["sitemap_lines"]): int(r["files"])
            for r in rows(tables / "sitemap_lines.csv")} == dict(maps)
    stated = {r["distribution"]: r for r in rows(tables / "distributions.csv")}
    for name, values in (("robots_lines", list(truth.lines.values())),
                         ("sections_per_file", list(truth.groups.values())),
                         ("disallows_per_section", truth.disallows)):
        mean, sd, median = truth.summary(values)
        row = stated[name]
        assert int(row["count"]) == len(values)
        assert float(row["mean"]) == pytest.approx(mean, abs=1e-6)
        assert float(row["sd"]) == pytest.approx(sd, abs=1e-6)
        assert float(row["median"]) == median


def test_availability_by_popularity(built: tuple[Path, Truth]) -> None:
    report, truth = built
    strata = {r["stratum"]: r for r in rows(report / "tables" / "availability.csv")}
    assert list(strata) == ["top 1k", "top 10k", "all"]  # ranks reach 1,500: no 100k row
    for label, limit in (("top 1k", 1_000), ("top 10k", 10_000), ("all", 10**9)):
        chosen = [d for d, rank in truth.ranks.items() if rank <= limit]
        robots = [d for d in chosen if d in truth.lines]
        maps = [d for d in robots if truth.sitemap_lines[d]]
        read = [d for d in chosen if d in truth.read]
        row = strata[label]
        assert (int(row["sites"]), int(row["robots"]), int(row["sitemaps"]),
                int(row["sitemaps_read"])) == (len(chosen), len(robots), len(maps), len(read))
        assert float(row["robots_share"]) == pytest.approx(len(robots) / len(chosen),
                                                           abs=1e-6)


def test_sitemap_side_tables_equal_the_truth(built: tuple[Path, Truth]) -> None:
    report, truth = built
    tables = report / "tables"
    assert {int(r["level"]): int(r["files"]) for r in rows(tables / "sitemap_levels.csv")} \
        == dict(truth.levels) == {0: 5, 1: 4, 2: 1, 3: 1}
    assert {r["downloadinfo"]: int(r["files"]) for r in rows(tables / "sitemap_errors.csv")} \
        == dict(truth.errors)
    ranked = rows(tables / "sitemap_domains.csv")
    assert [r["domain"] for r in ranked][:2] == ["d04.example", "d02.example"]
    total = sum(truth.uris.values())
    running = 0
    for row in ranked:
        running += truth.uris[row["domain"]]
        assert int(row["sitemap_files"]) == truth.sitemap_files[row["domain"]]
        assert int(row["uris"]) == truth.uris[row["domain"]]
        assert int(row["cumulative_uris"]) == running
        assert float(row["cumulative_share"]) == pytest.approx(running / total, abs=1e-6)
    trees = {r["domain"]: r for r in rows(tables / "trees.csv")}
    assert {d: tuple(int(r[c]) for c in ("uris", "roots", "nodes", "leaves", "depth"))
            for d, r in trees.items()} == truth.trees
    assert {int(r["level"]): (int(r["nodes"]), int(r["leaves"]))
            for r in rows(tables / "tree_levels.csv")} == truth.tree_levels
    links: dict[str, list[tuple[str, int]]] = {}
    for row in rows(tables / "ulinks.csv"):
        assert int(row["rank"]) == truth.ranks[row["domain"]]
        links.setdefault(row["domain"], []).append((row["uri"], int(row["weight"])))
    assert links == truth.ulinks


def test_agents_access_by_polites_matcher(built: tuple[Path, Truth]) -> None:
    report, truth = built
    access = {r["agent"]: r for r in rows(report / "tables" / "access.csv")}
    assert list(access) == list(AGENTS)
    files = len(truth.lines)
    for agent in AGENTS:
        row = access[agent]
        counts = truth.access[agent]
        assert int(row["sites"]) == files
        assert {k: int(row[k]) for k in ("entirely", "partly", "not_at_all")} == {
            k: counts[k] for k in ("entirely", "partly", "not_at_all")}
        assert int(row["named"]) == truth.named[agent]
        assert float(row["entirely_share"]) == pytest.approx(counts["entirely"] / files,
                                                             abs=1e-6)
    assert sum(truth.access["GPTBot"].values()) == files  # empty files allow everything


def test_parquet_and_dataframes_hold_the_csv_tables(built: tuple[Path, Truth]) -> None:
    import pandas  # when used, not at collection (a second of CPU for every test worker)

    report, _ = built
    for name in ("domains", "fields", "sitemap_domains", "access", "ulinks"):
        frame = pandas.read_parquet(report / "data" / f"{name}.parquet")
        from_csv = pandas.read_csv(report / "tables" / f"{name}.csv")
        assert list(frame.columns) == list(from_csv.columns)
        assert len(frame) == len(from_csv)
        pandas.testing.assert_frame_equal(frame, from_csv, check_dtype=False, atol=1e-6)
    with Survey(report.parent, agents=AGENTS, k=2) as survey:
        domains = survey.table("domains")
        assert str(domains["robots_lines"].dtype) == "Int64"  # empty cells stay integers
        assert domains.loc[domains["domain"] == "d04.example", "uris"].item() == 50_000
        assert set(survey.names) >= {"outcomes", "fields", "agents", "ulinks", "trees"}
        with pytest.raises(ConfigError, match="no table"):
            survey.rows("nope")


def test_a_robots_only_survey_leaves_the_sitemap_columns_empty(tmp_path: Path) -> None:
    files = tmp_path / "robots"
    files.mkdir()
    (files / "a.example.txt").write_bytes(b"User-agent: *\nDisallow: /\n")
    (files / "b.example.txt").write_bytes(b"User-agent: GPTBot\nDisallow: /x\n")
    assert run("survey", "--robots-dir", str(files), "--out", str(tmp_path / "s")
               ).returncode == 0
    with Survey(tmp_path / "s") as survey:
        write_report(survey, tmp_path / "s" / "report")
    domains = rows(tmp_path / "s" / "report" / "tables" / "domains.csv")
    assert [(r["sitemap_files"], r["uris"]) for r in domains] == [("", ""), ("", "")]
    access = {r["agent"]: r for r in rows(tmp_path / "s" / "report" / "tables" / "access.csv")}
    assert (access["GPTBot"]["entirely"], access["GPTBot"]["partly"],
            access["GPTBot"]["named"]) == ("1", "1", "1")
    assert (access["CCBot"]["entirely"], access["CCBot"]["not_at_all"]) == ("1", "1")
    page = (tmp_path / "s" / "report" / "index.html").read_text(encoding="utf-8")
    assert "no data in this survey" in page


def test_without_the_extra_the_report_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from polite.survey import report

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyarrow" else real(name, *a))
    with pytest.raises(ConfigError,
                       match=r"pyarrow: install the survey extra .*polite-web\[survey\]"):
        report.require_extra()


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    nothing = run("report", str(tmp_path))
    assert nothing.returncode == 2 and "no survey here" in nothing.stderr
    build_survey(tmp_path / "s", count=3)
    bad = run("report", str(tmp_path / "s"), "-k", "0")
    assert bad.returncode == 2
    assert "argument -k/--k: must be a whole number from 1 to 10,000, not '0'" in bad.stderr


@pytest.mark.slow
@ON_CORPUS_SURVEY
def test_the_corpus_tables_2_and_3_equal_an_independent_count(tmp_path: Path,
                                                              corpus_survey: Path) -> None:
    corpus = shared_path("corpus", "robots")
    out = corpus_survey
    tables = out / "report" / "tables"
    outcomes = {r["domain"]: r["outcome"] for r in rows(tables / "domains.csv")}
    assert len(outcomes) == len(list(corpus.glob("*.txt")))
    paths = []
    cut = tmp_path / "cut"
    cut.mkdir()
    for path in sorted(corpus.glob("*.txt")):
        outcome = outcomes[path.stem.lower()]
        if outcome == "too_big":  # counted as far as it was kept
            paths.append(cut / path.name)
            paths[-1].write_bytes(path.read_bytes()[:MAX_ROBOTS_BYTES])
        elif outcome in ("ok", "empty"):
            paths.append(path)
    holding, lines, agents = _independent(paths)
    fields = {r["field"].lower(): r for r in rows(tables / "fields.csv")}
    assert {k: int(r["files"]) for k, r in fields.items()} == dict(holding)
    assert {k: int(r["fields"]) for k, r in fields.items()} == dict(lines)
    table3 = rows(tables / "agents.csv")
    assert {agent_key(value(r["agent"])): int(r["occurrences"]) for r in table3} \
        == dict(agents)
    assert [int(r["occurrences"]) for r in table3[:10]] == [n for _, n in
                                                            agents.most_common(10)]


def test_ulinks_reads_a_survey_folder(built: tuple[Path, Truth]) -> None:
    report, truth = built
    result = run("ulinks", str(report.parent), "-k", "2")
    assert result.returncode == 0, result.stderr
    found: dict[str, list[tuple[str, int]]] = {}
    for line in result.stdout.splitlines():
        domain, uri, weight = line.split("\t")
        found.setdefault(domain, []).append((uri, int(weight)))
    assert found == truth.ulinks
    as_json = run("ulinks", str(report.parent), "-k", "1", "--json")
    assert as_json.stdout.splitlines()[0] == (
        '{"domain": "d01.example", "uri": "http://d01.example/", "weight": 3}')


def test_ulinks_of_a_survey_without_sitemaps_is_a_clear_error(tmp_path: Path) -> None:
    build_survey(tmp_path / "s", count=0)
    import sqlite3

    with sqlite3.connect(tmp_path / "s" / "survey.sqlite") as db:
        db.execute("DELETE FROM sitemap_urls")
    result = run("ulinks", str(tmp_path / "s"))
    assert result.returncode == 2 and "kept no sitemap page URL" in result.stderr
    folder = run("ulinks", str(tmp_path))
    assert folder.returncode == 2 and "not a survey folder" in folder.stderr


def test_cells_a_spreadsheet_would_run_are_written_as_text(tmp_path: Path) -> None:
    files = tmp_path / "robots"
    files.mkdir()
    hostile = ["=cmd|' /C calc'!A0", "+SUM(1)", "-2+3", "@SUM(A1)"]
    (files / "a.example.txt").write_bytes(
        "".join(f"User-agent: {agent}\nDisallow: /\n\n" for agent in hostile).encode())
    assert run("survey", "--robots-dir", str(files), "--out", str(tmp_path / "s")
               ).returncode == 0
    with Survey(tmp_path / "s") as survey:
        write_report(survey, tmp_path / "s" / "report", figures=False)  # the tables are read
    cells = {r["agent"] for r in rows(tmp_path / "s" / "report" / "tables" / "agents.csv")}
    assert {agent_key(cell) for cell in cells} == {"'" + agent_key(a) for a in hostile}
    # The Parquet file is data for programs, not a sheet: it keeps the values as they were.
    import pandas

    data = pandas.read_parquet(tmp_path / "s" / "report" / "data" / "agents.parquet")
    assert {agent_key(agent) for agent in data["agent"]} == {agent_key(a) for a in hostile}


def test_a_binary_robots_txt_is_one_outcome_for_the_survey_and_the_report(
        tmp_path: Path) -> None:
    import random

    files = tmp_path / "robots"
    files.mkdir()
    noise = random.Random(4000).randbytes(4000)
    assert b"\n" in noise and b":" in noise  # lines, and colons a careless count would take
    (files / "binary.example.txt").write_bytes(noise)
    (files / "comments.example.txt").write_bytes(b"# nothing here yet\n# ask us\n")
    (files / "rules.example.txt").write_bytes(b"User-agent: *\nDisallow: /x\n")
    assert run("survey", "--robots-dir", str(files), "--out", str(tmp_path / "s")
               ).returncode == 0
    assert run("report", str(tmp_path / "s"), "--no-figures").returncode == 0
    tables = tmp_path / "s" / "report" / "tables"
    domains = {r["domain"]: (r["outcome"], r["robots_lines"]) for r in rows(tables / "domains.csv")}
    assert domains == {"binary.example": ("charset", ""), "comments.example": ("empty", "2"),
                       "rules.example": ("ok", "2")}
    assert {int(r["lines"]): int(r["files"]) for r in rows(tables / "robots_lines.csv")} \
        == {2: 2}


def test_log_axes_are_labelled_in_plain_numbers() -> None:
    """A log axis's ticks read as counts (1, 20, 3k), not as powers of ten in mathtext,
    whose parser took a fifth of a small report's instructions."""
    assert [_plain(v) for v in (0.5, 1, 20, 500, 1_000, 3_000, 100_000, 10_000_000)] \
        == ["0.5", "1", "20", "500", "1k", "3k", "100k", "10M"]

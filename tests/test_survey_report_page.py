"""The report's index.html in a real headless Chromium, opened from a file:// URL as a
reader opens it: its tables carry the survey's numbers beside the seed's, and every figure
loads from the report's own folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from polite.survey import Survey, write_report
from polite.survey.report import FIGURES
from tests.browser import screenshot
from tests.survey_truth import AGENTS, build_survey

if TYPE_CHECKING:
    from playwright.sync_api import Page


def cells(page: Page, table: str) -> list[list[str]]:
    return [[cell.strip() for cell in row] for row in page.eval_on_selector_all(
        f"#{table} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")]


def test_the_report_page_shows_the_tables_and_figures(tmp_path: Path, page: Page) -> None:
    truth = build_survey(tmp_path / "survey")
    with Survey(tmp_path / "survey", agents=AGENTS, k=2) as survey:
        write_report(survey, tmp_path / "survey" / "report")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto((tmp_path / "survey" / "report" / "index.html").as_uri())
    assert page.title() == "Web site metadata: survey report"
    outcomes = {row[0]: row[1] for row in cells(page, "t-outcomes")}
    assert {k: int(v) for k, v in outcomes.items() if v != "0"} == dict(truth.outcomes)
    fields = cells(page, "t-fields")
    files, lines = truth.field_files["user-agent"], truth.field_lines["user-agent"]
    assert fields[0][1:5] == ["User-agent", str(files), str(lines), f"{lines / files:.2f}"]
    assert fields[0][5:] == ["User-Agent", "42,578", "225,428", "5.29"]  # the seed's row
    levels = cells(page, "t-levels")
    assert levels[0] == ["files", "5", "4", "1", "1", "0"]
    assert levels[1] == ["files (2008)", "9,081", "90,512", "43,044", "533", "510"]
    access = {row[0]: row for row in cells(page, "t-access")}
    entirely = truth.access["GPTBot"]["entirely"]
    assert access["GPTBot"][2].startswith(f"{entirely} (")
    stats = page.text_content("[data-distribution=robots_lines]") or ""
    assert "Roy 2008: mean 29.8 lines, σ 293.4, median 7." in stats
    images = page.eval_on_selector_all(
        "img", "imgs => imgs.map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")
    assert len(images) == 17  # the seed's Figs. 4-19 and the agents' access
    assert all(done and width > 0 for _, done, width in images), images
    assert all(url.startswith("file://") for url in requests)  # nothing from elsewhere
    ulinks = cells(page, "t-ulinks")
    assert ["d01.example", "http://d01.example/a/", "2"] in ulinks
    text = page.text_content("body") or ""  # works are named by author and year
    assert "(Roy 2008, section 2.4)" in text and "Beyond Roy 2008" in text
    assert "seed" not in text.lower()
    assert screenshot(page, "survey-report").stat().st_size > 50_000


def test_a_report_without_figures_says_so_where_each_figure_stood(tmp_path: Path,
                                                                   page: Page) -> None:
    """``--no-figures``: the same tables, and in place of each figure a line saying it was
    not drawn; the page asks for no image."""
    build_survey(tmp_path / "survey")
    with Survey(tmp_path / "survey", agents=AGENTS, k=2) as survey:
        write_report(survey, tmp_path / "survey" / "report", figures=False)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto((tmp_path / "survey" / "report" / "index.html").as_uri())
    assert page.title() == "Web site metadata: survey report"
    assert cells(page, "t-levels")[0] == ["files", "5", "4", "1", "1", "0"]
    assert page.eval_on_selector_all("img", "imgs => imgs.length") == 0
    notes = page.eval_on_selector_all(
        "p.nodata", "ps => ps.map(p => p.textContent.trim())")
    assert len(notes) == len(FIGURES)
    assert all(note.endswith("not drawn (this report was written with --no-figures).")
               for note in notes), notes
    assert not [url for url in requests if not url.endswith("index.html")]
    assert screenshot(page, "survey-report-no-figures").stat().st_size > 20_000

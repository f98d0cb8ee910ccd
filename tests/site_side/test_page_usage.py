"""AI-usage preferences set per section on the configuration page, in a real headless
Chromium: the lines it writes are read back by polite's own parser as set (round trip), the
site's middleware adds the Content-Usage header they make, and a value outside the
vocabulary is shown as a problem and left out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from polite.core.robots import parse
from polite.core.robots.usage import from_robots
from polite.core.site import Field, RuleRow, Section, SiteRules, render
from polite.core.usage.statement import Pref, RuleValue
from polite.fetch.trust import client_context
from polite.site import SiteGuard, SiteStore
from tests.site_side.test_middleware import (
    CRAWLERS,
    PERSON_UA,
    SEARCH_UA,
    Clock,
    Resolver,
)
from tests.site_side.test_middleware import _served as _mw_served
from tests.site_side.test_page import _served, _shot, servers  # noqa: F401 (a fixture)

if TYPE_CHECKING:
    from playwright.sync_api import Page


def _add_rule(page: Page, section: int, row: int, field: str, value: str) -> None:
    page.click(f"#section-{section} >> text=+ Add a rule to")
    cell = page.locator(f'input[name="s{section}.r{row}.value"]')
    cell.wait_for()
    page.wait_for_load_state("networkidle")
    page.select_option(f'select[name="s{section}.r{row}.field"]', field)
    agent = page.locator(f'input[name="s{section}.r{row}.agent"]')
    if agent.input_value() != "*":  # a new row takes the robot of the row above it
        agent.fill("*")
    cell.press_sequentially(value)


@pytest.mark.slow
def test_preferences_per_section_round_trip(page: Page,
                                            servers: tuple[str, str, SiteStore]) -> None:  # noqa: F811
    page_url, site_url, store = servers
    _served(site_url, version=1)
    page.goto(page_url + "/")
    _add_rule(page, 1, 1, "Content-Usage", "train-ai=n")
    page.wait_for_function("document.querySelector('#generated').innerText.includes("
                           "'Content-Usage: /students/alice/ train-ai=n')")
    _add_rule(page, 0, 2, "Content-Usage", "train-ai=y, search=y")
    page.wait_for_function("document.querySelector('#generated').innerText.includes("
                           "'Content-Usage: train-ai=y, search=y')")
    _add_rule(page, 0, 3, "Content-Signal", "ai-input=maybe")
    page.wait_for_function("document.querySelector('#lint').innerText.includes('ai-input')")
    assert "yes or no" in page.locator("#problem-0-3").inner_text()
    _shot(page, "site-config-usage")
    page.click('tr[data-row="0-3"] button[title="Remove this rule"]')
    page.wait_for_function("!document.querySelector('#lint').innerText.includes('ai-input')")
    page.fill('input[name="author"]', "alice")
    page.fill('input[name="note"]', "preferences")
    page.click("text=Save as a new version")
    page.wait_for_selector("text=Saved as version 2")

    served = _served(site_url, version=2)
    robots = parse(served)
    # The parser reads back exactly the rows set, each with its section's path.
    written = sorted((d.value.path, d.value.statement.text) for g in robots.groups
                     for d in g.directives if isinstance(d.value, RuleValue))
    assert written == [("", "train-ai=y, search=y"), ("/students/alice/", "train-ai=n")]
    assert not [i for i in robots.issues if i.code == "bad-value"]
    alice = from_robots(robots, "/students/alice/page", "AnyBot")
    assert alice.pref("train-ai") is Pref.DISALLOW
    elsewhere = from_robots(robots, "/blog/1", "AnyBot")
    assert (elsewhere.pref("train-ai"), elsewhere.pref("search")) == (Pref.ALLOW, Pref.ALLOW)
    # The site's middleware sends the header the file's lines make for each path.
    headers = {path: httpx.get(site_url + path, trust_env=False, timeout=5,
                                verify=client_context()).headers
               for path in ("/students/alice/page", "/blog/1", "/admin/x")}
    assert headers["/students/alice/page"]["content-usage"] == "train-ai=n"
    assert headers["/blog/1"]["content-usage"] == "train-ai=y, search=y"
    assert "content-usage" not in headers["/admin/x"]  # disallowed: no preference applies
    assert store.current().author == "alice"


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_the_middleware_adds_the_content_usage_header(kind: str, tmp_path: Path) -> None:
    rules = SiteRules(sections=(
        Section("Whole site", "/", "webmaster", (
            RuleRow("*", Field.DISALLOW, "/private/"),
            RuleRow("*", Field.CONTENT_USAGE, "train-ai=n"),
            RuleRow("*", Field.CONTENT_SIGNAL, "search=yes"),
        )),
        Section("Shop", "/shop/", "shop team", (
            RuleRow("*", Field.CONTENT_USAGE, "train-ai=y, search=n"),
        )),
    ))
    store = SiteStore(tmp_path / "site.sqlite")
    store.save(rules, now=0.0, author="webmaster")
    guard = SiteGuard(store, crawlers=CRAWLERS, resolver=Resolver(), clock=Clock())
    with _mw_served(kind, guard) as url:
        def usage(path: str, agent: str = PERSON_UA) -> str | None:
            answer = httpx.get(url + path, headers={"User-Agent": agent}, trust_env=False,
                               timeout=5, verify=client_context())
            assert answer.status_code == 200, answer.text
            return answer.headers.get("content-usage")
        assert usage("/page") == "train-ai=n"  # Content-Signal is not this header's
        assert usage("/shop/item", SEARCH_UA) == "train-ai=y, search=n"
        assert usage("/robots.txt") is None
    store.close()


def test_rows_outside_the_vocabulary_are_problems() -> None:
    rules = SiteRules(sections=(
        Section("Whole site", "/", "webmaster", (
            RuleRow("*", Field.CONTENT_USAGE, "bots=n"),
            RuleRow("*", Field.CONTENT_USAGE, "train-ai=n,"),
            RuleRow("*", Field.CONTENT_SIGNAL, "ai-train=y"),
            RuleRow("*", Field.CONTENT_SIGNAL, "ai-train=no"),
        )),
        Section("Odd", "/a b/", "x", (RuleRow("*", Field.CONTENT_USAGE, "train-ai=n"),)),
    ))
    rendered = render(rules)
    problems = {(p.section, p.row): p.message for p in rendered.problems}
    assert "bots: not in draft-ietf-aipref-vocab-07" in problems[(0, 0)]
    assert "is not a list like" in problems[(0, 1)]
    assert "the value is yes or no" in problems[(0, 2)]
    assert (0, 3) not in problems
    assert "%20" in problems[(1, 0)]
    assert "Content-Signal: ai-train=no" in rendered.text
    assert "bots=n" not in rendered.text

"""The configuration page in a real headless Chromium, with a real site beside it (Starlette
and the middleware under uvicorn, reading the same SQLite file): add a rule in one section,
watch the file and the explain matrix change, save, roll back, and follow the site's served
/robots.txt at each step; then the robot visits page. Screenshots are kept."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from polite.core.site import Field, RuleRow, Section, SiteRules
from polite.site import SiteGuard, SiteMiddleware, SiteStore
from polite.site.page import create_site_app
from tests.browser import screenshot
from tests.site_servers import client_from, serve_asgi

if TYPE_CHECKING:
    from playwright.sync_api import Page
    from playwright.sync_api import Route as BrowserRoute

PAGE_HOST = "127.0.23.10"
SITE_HOST = "127.0.23.11"
START = SiteRules(sections=(
    Section("Whole site", "/", "webmaster", (
        RuleRow("*", Field.DISALLOW, "/admin/"),
        RuleRow("GPTBot", Field.DISALLOW, "/"),
    )),
    Section("Alice's pages", "/students/alice/", "alice", (
        RuleRow("*", Field.DISALLOW, "/students/alice/drafts/"),
    )),
), ttl_s=300)
NEW_RULE = "Disallow: /students/alice/notes/"


async def _hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("a page")


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[str, str, SiteStore]]:
    db = tmp_path / "site.sqlite"
    store = SiteStore(db)
    store.save(START, now=time.time(), author="webmaster", note="first rules")
    site_store = SiteStore(db)  # the site's own connection, as another process would have
    site = SiteMiddleware(Starlette(routes=[Route("/{p:path}", _hello)]),
                          SiteGuard(site_store))
    with serve_asgi(create_site_app(store), PAGE_HOST) as page_url, \
            serve_asgi(site, SITE_HOST) as site_url:
        yield page_url, site_url, store
    site_store.close()
    store.close()


def _served(site_url: str, *, version: int) -> str:
    """The site's /robots.txt once it serves ``version`` (it looks again each second)."""
    deadline = time.monotonic() + 10
    while True:
        answer = httpx.get(site_url + "/robots.txt", trust_env=False, timeout=5)
        if answer.headers["x-robots-version"] == str(version):
            return answer.text
        assert time.monotonic() < deadline, f"still serving {answer.headers}"
        time.sleep(0.2)


def _shot(page: Page, name: str) -> None:
    page.evaluate("window.scrollTo(0, 0)")  # the preview pane sticks to the top
    screenshot(page, name)


def _cell(page: Page, url: str, agent: str) -> str:
    cell = page.locator(f'#matrix td[data-url="{url}"][data-agent="{agent}"]')
    return str(cell.get_attribute("data-verdict"))


@pytest.mark.slow
def test_add_a_rule_save_and_roll_back(page: Page,
                                       servers: tuple[str, str, SiteStore]) -> None:
    page_url, site_url, store = servers
    first = _served(site_url, version=1)
    assert NEW_RULE not in first
    page.goto(page_url + "/")
    assert page.locator("#live-version").inner_text() == "1"
    page.fill('textarea[name="urls"]', "/students/alice/notes/today\n/admin/x\n/")
    page.fill('input[name="agents"]', "Googlebot, GPTBot")
    page.wait_for_selector('#matrix td[data-url="/students/alice/notes/today"]')
    assert _cell(page, "/students/alice/notes/today", "Googlebot") == "allowed"
    assert _cell(page, "/admin/x", "Googlebot") == "disallowed"
    assert _cell(page, "/", "GPTBot") == "disallowed"
    _shot(page, "site-config-start")

    # add a rule in Alice's section: a new row, then its path
    page.click("text=+ Add a rule to Alice's pages")
    row = page.locator('input[name="s1.r1.value"]')
    row.wait_for()
    assert page.locator('input[name="s1.r1.agent"]').input_value() == "*"
    row.fill("/students/alice/notes/")
    page.wait_for_function(
        "document.querySelector('#generated').innerText.includes("
        "'Disallow: /students/alice/notes/')")
    page.wait_for_selector('#matrix td[data-url="/students/alice/notes/today"]'
                           '[data-agent="Googlebot"][data-verdict="disallowed"]')
    assert page.locator("#generated li.changed").count() >= 1  # marked as not saved
    assert page.locator("#problem-1-1").inner_text() == ""  # an unfinished row is no error
    cell = page.locator('#matrix td[data-url="/students/alice/notes/today"]'
                        '[data-agent="Googlebot"]').inner_text()
    assert "Alice's pages (alice)" in cell  # the deciding line's section
    _shot(page, "site-config-edited")
    assert NEW_RULE not in _served(site_url, version=1)  # not saved: not served

    # a rule outside Alice's part is left out, and said so
    page.click("text=+ Add a rule to Alice's pages")
    added = page.locator('input[name="s1.r2.value"]')
    added.wait_for()
    page.wait_for_load_state("networkidle")
    # typed as a person types it, key by key (each key an input event): a single synthetic
    # event right after the form was replaced went unheard now and then under a long run
    added.press_sequentially("/admin/mine")
    page.wait_for_function("document.querySelector('#lint').innerText.includes('outside')")
    assert "outside this section's part" in page.locator("#problem-1-2").inner_text()
    _shot(page, "site-config-problem")
    page.click('tr[data-row="1-2"] button[title="Remove this rule"]')
    page.wait_for_function("!document.querySelector('#lint').innerText.includes('outside')")

    page.fill('input[name="author"]', "alice")
    page.fill('input[name="note"]', "keep my notes out")
    page.click("text=Save as a new version")
    page.wait_for_selector("text=Saved as version 2")
    assert page.locator("#live-version").inner_text() == "2"
    saved = _served(site_url, version=2)
    assert NEW_RULE in saved
    assert store.current().author == "alice"
    _shot(page, "site-config-saved")

    page.goto(page_url + "/versions")
    assert page.locator("#version-2 .badge").inner_text() == "served now"
    assert "/students/alice/notes/" in page.locator("#version-2 table.changes").inner_text()
    _shot(page, "site-config-versions")
    page.click("text=Roll back to version 1")
    page.wait_for_selector("#version-3 .badge")
    assert "rollback to version 1" in page.locator("#version-3 .meta").inner_text()
    assert _served(site_url, version=3) == first
    _shot(page, "site-config-rolled-back")


def test_the_robot_visits_page(page: Page, servers: tuple[str, str, SiteStore]) -> None:
    page_url, site_url, store = servers
    # OpenAI's published ranges, as polite site ranges update keeps them
    store.save_ranges("GPTBot", "https://openai.com/gptbot.json", time.time() - 86_400,
                      ["192.0.2.0/24"], fetched_at=time.time())
    bot = "Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)"
    with client_from("127.0.23.20", site_url, bot) as gpt:
        assert gpt.get("/robots.txt").status_code == 200
        for path in ("/blog/1", "/blog/2", "/admin/"):
            assert gpt.get(path).status_code == 200  # logged only
    with client_from("127.0.23.21", site_url, "ExampleCrawler/1.0") as other:
        other.get("/admin/panel")
    page.goto(page_url + "/access")
    text = page.locator("body").inner_text()  # works are named by author, as the docs do
    assert "(Jasani & Kumbharana, 4.9)" in text and "seed 0" not in text
    robots = page.locator("#robots").inner_text()
    assert "GPTBot" in robots and "OpenAI" in robots and "ExampleCrawler" in robots
    broken = page.locator("#broken").inner_text()
    assert "Disallow: /" in broken and "Disallow: /admin/" in broken
    gpt_row = page.locator("#robots tr", has_text="GPTBot").inner_text().split("\t")
    assert gpt_row[3:7] == ["4", "0", "4", "3"]  # visits, verified, forged, against the file
    # 127.0.23.20 is not in OpenAI's published ranges: a forged GPTBot
    assert "forged" in page.locator("#visits").inner_text()
    ranges = page.locator("#ranges").inner_text()
    assert "GPTBot" in ranges and "1.0 days" in ranges
    _shot(page, "site-config-robot-visits")


def test_the_page_is_behind_its_token(tmp_path: Path) -> None:
    store = SiteStore(tmp_path / "site.sqlite")
    with serve_asgi(create_site_app(store, token="s3cret"), "127.0.23.12") as url, \
            httpx.Client(base_url=url, trust_env=False, follow_redirects=True) as client:
        assert client.get("/").status_code == 401
        assert client.post("/save", data={"sections": "0"}).status_code == 401
        assert client.get("/", params={"token": "wrong"}).status_code == 401
        assert client.get("/", params={"token": "s3cret"}).status_code == 200  # now a cookie
        assert client.get("/versions").status_code == 200
        refused = client.post("/save", data={"sections": "0"},
                              headers={"origin": "http://elsewhere.test"})
        assert refused.status_code == 403
    assert store.current_id() == 0
    store.close()


def test_the_page_keeps_a_session_not_its_token(tmp_path: Path) -> None:
    store = SiteStore(tmp_path / "site.sqlite")
    now = [1_000_000.0]
    app = create_site_app(store, token="s3cret", clock=lambda: now[0])
    with serve_asgi(app, "127.0.23.12") as url, \
            httpx.Client(base_url=url, trust_env=False) as client:
        # Not ASCII, in each place a token is read: a wrong token (401), never a 500.
        odd = "\u00e9t\u00e9"
        assert client.get("/", params={"token": odd}).status_code == 401
        assert client.get("/", headers={"Authorization": f"Bearer {odd}".encode()}
                          ).status_code == 401
        assert client.get("/", headers={"Cookie": f"polite_site_session={odd}".encode()}
                          ).status_code == 401
        opened = client.get("/", params={"token": "s3cret"})
        assert opened.status_code == 303
        cookie = opened.headers["set-cookie"].lower()
        assert "s3cret" not in cookie and "max-age=28800" in cookie
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert client.get("/versions").status_code == 200
        # The token itself as the cookie, or a session of one's own making, is not one.
        kept = dict(client.cookies)
        client.cookies.clear()
        client.cookies.set("polite_site_session", "s3cret")
        assert client.get("/versions").status_code == 401
        client.cookies.set("polite_site_session", "9999999999." + "0" * 64)
        assert client.get("/versions").status_code == 401
        client.cookies.clear()
        client.cookies.update(kept)
        assert client.get("/versions").status_code == 200
        now[0] += 8 * 3600  # the session ends
        assert client.get("/versions").status_code == 401
    store.close()


def test_a_save_right_after_typing_is_not_lost_to_the_preview(
        page: Page, servers: tuple[str, str, SiteStore]) -> None:
    """The preview the last keystrokes schedule (a quarter of a second later) must not
    cancel a save already on its way: here the save is held at the browser for a second, so
    the preview always comes while it is in flight (a loaded server does the same)."""
    from playwright.sync_api import Error as PlaywrightError

    page_url, _, store = servers
    held: list[str] = []

    def slow_save(route: BrowserRoute) -> None:
        held.append(route.request.url)
        time.sleep(1.0)
        with contextlib.suppress(PlaywrightError):  # a cancelled request cannot go on
            route.continue_()

    page.route("**/save", slow_save)
    page.goto(page_url + "/")
    page.fill('input[name="author"]', "alice")
    page.locator('input[name="note"]').press_sequentially("typed then saved at once")
    page.click("text=Save as a new version")
    page.wait_for_selector("text=Saved as version 2", timeout=15_000)
    assert held, "the save went out"
    saved = store.version(2)
    assert saved is not None and (saved.author, saved.note) == ("alice",
                                                               "typed then saved at once")


HAND_WRITTEN = "User-agent: *\nDisallow: /cgi-bin/\nDisallow: /private/\n"


def test_an_added_rule_joins_the_hand_written_group_and_the_matrix_shows_its_paths(
        page: Page, tmp_path: Path) -> None:
    """After an import holding ``Disallow: /private/``, "Who may fetch what" with no paths
    typed shows the hand-written paths too; a rule for * added on the page goes into the
    hand-written * group (a second group ahead of it was read alone by the 1996 draft, which
    then allowed /cgi-bin/), and the page's lint has nothing to say of it."""
    store = SiteStore(tmp_path / "site.sqlite")
    store.save(SiteRules(sections=(Section("Whole site", "/", "webmaster"),),
                         manual_text=HAND_WRITTEN), now=time.time(), author="import")
    try:
        with serve_asgi(create_site_app(store), "127.0.23.13") as page_url:
            page.goto(page_url + "/")
            page.wait_for_selector('#matrix td[data-url="/private/page"]')
            assert _cell(page, "/private/page", "AnyOtherBot") == "disallowed"
            assert _cell(page, "/cgi-bin/page", "AnyOtherBot") == "disallowed"

            page.click("text=+ Add a rule to Whole site")
            row = page.locator('input[name="s0.r0.value"]')
            row.wait_for()
            assert page.locator('input[name="s0.r0.agent"]').input_value() == "*"
            page.wait_for_load_state("networkidle")
            row.press_sequentially("/admin/")
            page.wait_for_selector('#matrix td[data-url="/admin/page"][data-agent="AnyOtherBot"]'
                                   '[data-verdict="disallowed"]')
            generated = page.locator("#generated").inner_text()
            assert generated.count("User-agent: *") == 1, generated
            assert "agent-in-two-groups" not in page.locator("#lint").inner_text()
            # every dialect still keeps the hand-written rules: no split cell
            for url in ("/cgi-bin/page", "/private/page"):
                assert _cell(page, url, "AnyOtherBot") == "disallowed", url
            _shot(page, "site-config-rule-joins-hand-written-group")
    finally:
        store.close()

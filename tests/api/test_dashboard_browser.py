"""The dashboard as an operator uses it: Debian's Chromium on the page of a real ``polite
serve`` process while a client sends requests through its proxy to sites on loopback.
Spacing is measured where it happens, at the origin."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.api.test_dashboard_api import fill
from tests.browser import screenshot
from tests.serving import polite_serve, through
from tests.sites import Reply, Site, serve

if TYPE_CHECKING:
    from playwright.sync_api import Page

ORIGIN_A = "127.0.24.10"
ORIGIN_B = "127.0.24.11"


def row(page: Page, host: str) -> str:
    return f'#rows tr[data-host="{host}"]'


def wait_text(page: Page, selector: str, expected: str, timeout_s: float = 10) -> None:
    """Until the element's text contains ``expected`` (the feed brings it; no reload)."""
    locator = page.locator(selector)
    deadline = time.monotonic() + timeout_s
    while True:
        if locator.count() and expected in (locator.first.text_content() or ""):
            return
        assert time.monotonic() < deadline, \
            f"{selector}: {locator.first.text_content() if locator.count() else 'absent'}"
        page.wait_for_timeout(100)


def gap_at_origin(api: httpx.Client, site: Site, path: str) -> float:
    """Two requests in wait mode, one after the other: seconds between their arrivals."""
    with through(api, headers={"X-Polite-Mode": "wait"}) as client:
        before = len(site.arrivals)
        assert client.get(site.origin + path).status_code == 200
        assert client.get(site.origin + path).status_code == 200
    first, second = site.arrivals[before:before + 2]
    return second[0] - first[0]


@pytest.mark.slow
def test_live_rows_backoff_and_a_delay_edited_in_place(page: Page, tmp_path: Path) -> None:
    db = tmp_path / "polite.sqlite"
    options = ("--store", f"sqlite:///{db}", "--allow-private", "--default-delay-ms", "300")
    a = Site(ORIGIN_A, {"/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private\n"),
                        "/a": Reply(200, b"a")})
    b = Site(ORIGIN_B, {"/robots.txt": Reply(404),
                        "/busy": Reply(429, b"busy", {"Retry-After": "120"})})
    with serve(a), serve(b):
        with polite_serve(*options) as api:
            page.goto(f"{api.base_url}/dashboard")
            wait_text(page, "#live-text", "live")
            page.evaluate("window.notReloaded = true")
            with through(api) as client:
                assert client.get(f"{a.origin}/a").status_code == 200
                wait_text(page, row(page, ORIGIN_A) + " td.allowed", "1")
                assert client.get(f"{a.origin}/private/x").status_code == 403
                time.sleep(0.35)
                assert client.get(f"{a.origin}/a").status_code == 200
                assert client.get(f"{a.origin}/a").status_code == 429
                wait_text(page, row(page, ORIGIN_A) + " td.allowed", "2")
                wait_text(page, row(page, ORIGIN_A) + " td.robots-refused", "1")
                wait_text(page, row(page, ORIGIN_A) + " td.delay-refused", "1")
                assert client.get(f"{b.origin}/busy").status_code == 429
            # The origin's 429 holds its host: the row says why and until when.
            wait_text(page, row(page, ORIGIN_B) + " td.backoff-cell", "Retry-After: 120")
            wait_text(page, row(page, ORIGIN_B) + " td.backoff-cell", "until")
            wait_text(page, row(page, ORIGIN_B) + " td.delay", "back-off")
            wait_text(page, "#d-allowed", "3")
            assert page.evaluate("window.notReloaded") is True  # all of it came live
            screenshot(page, "dashboard-live")

            # The operator sets 1.5 s for host A on the page; the next requests keep it.
            page.click(row(page, ORIGIN_A) + " button.edit")
            page.fill(row(page, ORIGIN_A) + " td.delay input", "1500")
            page.press(row(page, ORIGIN_A) + " td.delay input", "Enter")
            wait_text(page, "#flash", "set to 1.5 s")
            wait_text(page, row(page, ORIGIN_A) + " td.delay", "operator")
            screenshot(page, "dashboard-delay-edited")
            assert gap_at_origin(api, a, "/a") >= 1.45
        # After a restart, the delay is still the operator's and still in force.
        with polite_serve(*options) as api:
            page.goto(f"{api.base_url}/dashboard?sort=host&order=asc")
            wait_text(page, row(page, ORIGIN_A) + " td.delay", "1.5 s")
            wait_text(page, row(page, ORIGIN_A) + " td.delay", "operator")
            wait_text(page, row(page, ORIGIN_A) + " td.allowed", "4")  # counts kept too
            assert gap_at_origin(api, a, "/a") >= 1.45
            screenshot(page, "dashboard-after-restart")


def test_ten_thousand_hosts_in_the_browser(page: Page, tmp_path: Path) -> None:
    db = tmp_path / "polite.sqlite"
    fill(db, 10_000)
    with polite_serve("--store", f"sqlite:///{db}") as api:
        page.goto(f"{api.base_url}/dashboard")
        wait_text(page, "#range", "1–50 of 10,000")
        assert page.locator("#rows tr").count() == 50
        page.click('th[data-sort="allowed"]')
        wait_text(page, "#rows tr:first-child td.allowed", "996")
        assert "sorted" in (page.get_attribute('th[data-sort="allowed"]', "class") or "")
        page.click("#next")
        wait_text(page, "#range", "51–100 of 10,000")
        allowed = [int(t.replace(",", "")) for t in
                   page.locator("#rows td.allowed").all_text_contents()]
        assert allowed == sorted(allowed, reverse=True) and len(allowed) == 50
        page.fill("#filter", "h0004")
        wait_text(page, "#range", "1–10 of 10")
        page.fill("#filter", "")
        page.select_option("#state", "operator")
        wait_text(page, "#range", "1–1 of 1")
        wait_text(page, "#rows tr:first-child td.delay", "9.0 s")
        page.select_option("#state", "all")
        page.click('th[data-sort="allowed"]')  # again: ascending
        wait_text(page, "#range", "1–50 of 10,000")
        wait_text(page, "#rows tr:first-child td.allowed", "0")
        screenshot(page, "dashboard-10000-hosts")


def test_beyond_loopback_the_dashboard_opened_with_its_token_keeps_a_session(
        page: Page, tmp_path: Path) -> None:
    """``/dashboard?token=`` once: the page and its live feed go on with a session cookie
    that is not the token and ends."""
    from tests.api.test_service import service

    # The service runs its loop in a thread of its own: Playwright's runs in this one.
    started, done = threading.Event(), threading.Event()
    found: list[str] = []

    def run() -> None:
        with service(tmp_path / "p.sqlite", admin_token="T0ken", private_reads=True) as api:
            found.append(str(api.base_url).rstrip("/") + "/")
            started.set()
            done.wait(60)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert started.wait(30), "the service did not start"
        base = found[0]
        page.goto(f"{base}dashboard?token=T0ken")
        assert "token" not in page.url  # the token is out of the address bar
        wait_text(page, "#live-text", "live")  # the feed, which sends no header, is let in
        cookies = page.context.cookies()
        assert [c["name"] for c in cookies] == ["polite_session"]
        session = cookies[0]
        assert "T0ken" not in session["value"]
        assert session["httpOnly"] and session["sameSite"] == "Strict"
        assert 0 < session["expires"] - time.time() <= 8 * 3600 + 60
        screenshot(page, "dashboard-session")
        page.context.clear_cookies()
        refused = page.goto(f"{base}dashboard")
        assert refused is not None and refused.status == 401
    finally:
        done.set()
        thread.join(30)

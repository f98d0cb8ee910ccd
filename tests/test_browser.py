"""The page tests' browser works: Debian's Chromium renders a page served on loopback."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.browser import screenshot
from tests.sites import Reply, Site, serve

if TYPE_CHECKING:
    from playwright.sync_api import Page


def test_chromium_renders_a_loopback_page_and_runs_its_script(page: Page) -> None:
    html = (b"<!doctype html><title>t</title><p id=a>static</p>"
            b"<script>document.getElementById('a').textContent = 'scripted'</script>")
    site = Site("127.0.0.1", {"/": Reply(200, html, {"Content-Type": "text/html"})})
    with serve(site):
        page.goto(site.origin + "/")
        assert page.text_content("#a") == "scripted"
        assert screenshot(page, "browser-self-test").stat().st_size > 0
    assert site.requests[0] == "/"

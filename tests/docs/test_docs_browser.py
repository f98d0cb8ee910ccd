"""The manual in a real headless Chromium, offline: the home page and the search from
file:// (as the README says to read it), a reference page and the search from a plain local
HTTP server, no request leaving either."""

from __future__ import annotations

import functools
import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tests.browser import screenshot
from tests.docs.conftest import BuiltSite

if TYPE_CHECKING:
    from playwright.sync_api import Page


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """``python -m http.server`` on loopback, in this process."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join(5)


def _requests(page: Page) -> list[str]:
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    return seen


def _styled(page: Page) -> None:
    """Material's stylesheet applied: a coloured header bar and the navigation drawn."""
    colour = page.eval_on_selector(".md-header", "e => getComputedStyle(e).backgroundColor")
    assert colour not in ("rgba(0, 0, 0, 0)", "transparent"), colour
    assert page.locator(".md-nav").first.is_visible()


def test_the_home_page_from_file(docs_site: BuiltSite, page: Page) -> None:
    seen = _requests(page)
    page.goto((docs_site.path / "index.html").as_uri())
    page.wait_for_load_state("load")
    assert page.title().startswith("polite")
    _styled(page)
    assert page.locator("h1").first.inner_text().rstrip("¶") == "polite"
    # a link to another page works from file:// (relative, ending in .html)
    page.click("a[href='tutorials/crawler.html']")
    page.wait_for_load_state("load")
    assert page.locator("h1").first.inner_text().rstrip("¶") == "Crawling politely"
    page.go_back()
    assert screenshot(page, "docs-home").stat().st_size > 30_000
    outside = [url for url in seen if not url.startswith(("file://", "data:", "blob:"))]
    assert not outside, outside


def _search(page: Page, word: str) -> None:
    """Type ``word`` in the search box until results come: a query typed before the page
    has read the index is not run, so it is typed again."""
    deadline = time.monotonic() + 30
    while page.locator(".md-search-result__item").count() == 0:
        assert time.monotonic() < deadline, page.inner_text(".md-search-result__meta")
        page.fill(".md-search__input", "")
        page.type(".md-search__input", word)
        page.wait_for_timeout(500)
    assert "matching document" in page.inner_text(".md-search-result__meta")


def test_the_search_from_file(docs_site: BuiltSite, page: Page) -> None:
    seen = _requests(page)
    page.goto((docs_site.path / "tutorials" / "crawler.html").as_uri())
    page.wait_for_load_state("load")
    _search(page, "intercept")
    # a result leads to its page, from the file it names
    page.locator(".md-search-result__item a").first.click()
    page.wait_for_load_state("load")
    assert page.url.startswith("file://") and page.url.split("#")[0].endswith(".html")
    outside = [url for url in seen if not url.startswith(("file://", "data:", "blob:"))]
    assert not outside, outside


def test_a_reference_page_and_the_search_from_a_local_server(docs_site: BuiltSite,
                                                             page: Page) -> None:
    with served(docs_site.path) as origin:
        seen = _requests(page)
        page.goto(f"{origin}/reference/cli.html")
        page.wait_for_load_state("load")
        _styled(page)
        assert screenshot(page, "docs-reference-cli").stat().st_size > 30_000
        # the nav's link to a command lands on its heading, its options' table below it
        page.locator("article table a[href='#polite-robots-check']").first.click()
        heading = page.locator("#polite-robots-check")
        assert heading.is_visible() and "polite robots check" in heading.inner_text()
        assert page.url.endswith("#polite-robots-check")
        assert page.locator("table:has-text('--dialect')").first.is_visible()
        # the search runs in the page, from the index the build wrote
        _search(page, "intercept")
    outside = [url for url in seen if not url.startswith((origin, "data:", "blob:"))]
    assert not outside, outside

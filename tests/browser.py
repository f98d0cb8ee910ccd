"""Pages people look at, in a real headless Chromium: Debian's ``chromium`` through Playwright.

Playwright's own browser download cannot work without the internet, so the browser is the
system's (``executable_path``). ``.ci/run`` installs it and sets ``POLITE_REQUIRE_CHROMIUM=1``,
so that in CI a missing browser is a failure, not a skip. Screenshots go to
``test-artifacts/screenshots/`` at the project's root (kept by CI, ignored by git).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "screenshots"

# Without the background-networking flags Chromium keeps dialling Google's hosts, which a
# closed network refuses; --no-sandbox because CI runs as root.
_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_binary() -> str:
    """The system Chromium's path, or a skip (a failure in CI) when it is not installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found is not None:
            return found
    message = "chromium is not installed (apt-get install -y chromium)"
    if os.environ.get("POLITE_REQUIRE_CHROMIUM") == "1":
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium(*extra_flags: str) -> Iterator[Browser]:
    """A headless Chromium with ``extra_flags`` too (``--host-resolver-rules``, say)."""
    binary = chromium_binary()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=binary,
                                              args=[*_FLAGS, *extra_flags], headless=True)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium per test module; each test opens its own page. Not one for the
    session: Playwright's synchronous API keeps its event loop running on the main thread
    while it is open, and the asyncio tests collected after a page test would then fail."""
    with chromium() as instance:
        yield instance


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (its own context: no cookies or storage shared between tests)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


# A screenshot's height at most: the CLI reference is 32,000 pixels tall and the survey's
# report 13,000, which no one reads whole from one image, and whose capture and encoding
# took Chromium a second of CPU for every 10,000 pixels.
MAX_SHOT_HEIGHT = 4_000


def screenshot(page: Page, name: str) -> Path:
    """Save the page as ``test-artifacts/screenshots/NAME.png`` (the whole page, to its
    first :data:`MAX_SHOT_HEIGHT` pixels) and return the path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    width, height = page.evaluate("[document.documentElement.scrollWidth, "
                                  "document.documentElement.scrollHeight]")
    page.screenshot(path=str(path), full_page=True,
                    clip={"x": 0, "y": 0, "width": width,
                          "height": min(height, MAX_SHOT_HEIGHT)})
    return path

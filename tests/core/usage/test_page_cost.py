"""A crawled page's AI-usage preferences on the common site (no preference stated anywhere)
cost a few Python calls: the file's views are looked up once, and parts with no TDMRep
technique are put together without its layering."""

from __future__ import annotations

import sys
from collections.abc import Callable

from polite.core.robots import parse
from polite.core.robots.usage import combine, from_headers, from_robots

PLAIN = b"User-agent: *\nDisallow: /private/\nDisallow: /search\n"
LICENSED = (b"License: https://example.com/license.xml\nUser-agent: *\n"
            b"Content-Usage: /ai/ train-ai=n\nDisallow: /private/\n")


def calls(work: Callable[[], object]) -> int:
    """The Python functions called while ``work`` runs, however deep."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def test_a_page_of_a_file_stating_nothing_is_a_few_calls() -> None:
    robots = parse(PLAIN)
    url = "https://example.com/p1"
    from_robots(robots, url, "polite")  # the views built once, as for a site's first page
    headers = from_headers([("Content-Type", "text/html")], "polite")
    # one lookup of the file's views (it took two, and twenty calls)
    assert calls(lambda: from_robots(robots, url, "polite")) <= 14
    found = from_robots(robots, url, "polite")
    # nothing to layer (it took twenty calls)
    assert calls(lambda: combine(headers, found)) <= 8
    assert combine(headers, found) == combine(found, headers) == found


def test_licenses_and_usage_lines_are_read_from_the_one_view() -> None:
    robots = parse(LICENSED)
    for _ in range(2):  # built, then found again: the same answers
        kept = from_robots(robots, "https://example.com/ai/page", "polite")
        assert kept.licenses == ("https://example.com/license.xml",)
        assert [s.where for s in kept.sources] == ["line 3"]
        other = from_robots(robots, "https://example.com/page", "polite")
        assert other.licenses == kept.licenses and not other.sources


def test_a_response_stating_nothing_is_one_pass_over_its_fields() -> None:
    plain = [("Content-Type", "text/html"), ("Content-Length", "4500"), ("ETag", '"a"')]
    # each field's name lowered once (it took 15: a pass per field asked for)
    assert calls(lambda: from_headers(plain, "polite", content_type="text/html")) <= 8
    assert from_headers(plain, "polite") == from_headers([], "polite")
    # a field that states one is still read, whatever its case
    stating = [*plain, ("X-ROBOTS-TAG", "polite: noai")]
    assert [s.where for s in from_headers(stating, "polite").sources] == ["header"]

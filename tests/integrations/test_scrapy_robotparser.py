"""Scrapy's own contract for a ROBOTSTXT_PARSER (its tests/test_robotstxt_interface.py),
stated again here and run against polite's parser; then the parser inside a real crawl."""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from polite.integrations.scrapy import RobotParser

# Scrapy is imported by the tests that run, not when the suite is collected (a second of
# CPU for every test worker)
pytestmark = pytest.mark.skipif(find_spec("scrapy") is None, reason="scrapy is not installed")


def parser(body: bytes, dialect: str = "auto") -> RobotParser:
    from polite.integrations.scrapy import RobotParser

    if dialect == "auto":
        return RobotParser.from_crawler(None, body)  # Scrapy's own call, crawler=None
    return RobotParser(body, dialect)


def test_it_is_a_scrapy_robot_parser() -> None:
    from scrapy.robotstxt import RobotParser as ScrapyRobotParser

    assert isinstance(parser(b""), ScrapyRobotParser)


def test_allow_and_disallow_for_every_agent() -> None:
    rp = parser(b"User-agent: * \nDisallow: /disallowed \nAllow: /allowed \nCrawl-delay: 10")
    assert rp.allowed("https://www.site.local/allowed", "*")
    assert not rp.allowed("https://www.site.local/disallowed", "*")
    assert rp.crawl_delay("*") == 10.0
    assert rp.crawl_delay(b"AnyBot") == 10.0


def test_wildcards_and_end_anchors_with_indented_lines() -> None:
    rp = parser(b"""User-agent: first
                Disallow: /disallowed/*/end$

                User-agent: second
                Allow: /*allowed
                Disallow: /
                """)
    assert rp.allowed("https://www.site.local/disallowed", "first")
    assert not rp.allowed("https://www.site.local/disallowed/xyz/end", "first")
    assert not rp.allowed("https://www.site.local/disallowed/abc/end", "first")
    assert rp.allowed("https://www.site.local/disallowed/xyz/endinglater", "first")
    assert rp.allowed("https://www.site.local/allowed", "second")
    assert rp.allowed("https://www.site.local/is_still_allowed", "second")
    assert rp.allowed("https://www.site.local/is_allowed_too", "second")


def test_the_longest_rule_wins_in_the_default_dialect() -> None:
    # RFC 9309, 2.2.2: the most specific match wins, whatever the order.
    rp = parser(b"User-agent: * \nDisallow: / \nAllow: /page")
    assert rp.allowed("https://www.site.local/page", "*")
    assert not rp.allowed("https://www.site.local/other", "*")


def test_the_first_rule_wins_in_the_1996_dialect() -> None:
    # Scrapy's order-based case: the 1996 draft reads rules top to bottom, first match wins.
    rp = parser(b"User-agent: * \nDisallow: / \nAllow: /page", "koster1996")
    assert not rp.allowed("https://www.site.local/page", "*")


@pytest.mark.parametrize("body", [b"", b"GIF89a\xd3\x00\xfe\x00\xa2"],
                         ids=["empty", "garbage"])
def test_an_empty_or_garbage_file_allows_everything(body: bytes) -> None:
    rp = parser(body)
    for url, agent in [("https://site.local/", "*"), ("https://site.local/", "chrome"),
                       ("https://site.local/index.html", "*"),
                       ("https://site.local/disallowed", "*")]:
        assert rp.allowed(url, agent)
    assert rp.crawl_delay("*") is None and rp.sitemaps == ()


def test_unicode_urls_and_agents() -> None:
    rp = parser("""
        User-Agent: *
        Disallow: /admin/
        Disallow: /static/
        Disallow: /wiki/K%C3%A4ytt%C3%A4j%C3%A4:
        Disallow: /wiki/Käyttäjä:

        User-Agent: UnicödeBöt
        Disallow: /some/randome/page.html""".encode())
    assert rp.allowed("https://site.local/", "*")
    assert not rp.allowed("https://site.local/admin/", "*")
    assert not rp.allowed("https://site.local/static/", "*")
    assert rp.allowed("https://site.local/admin/", "UnicödeBöt")
    assert not rp.allowed("https://site.local/wiki/K%C3%A4ytt%C3%A4j%C3%A4:", "*")
    assert not rp.allowed("https://site.local/wiki/Käyttäjä:", "*")
    assert rp.allowed("https://site.local/some/randome/page.html", "*")
    assert not rp.allowed("https://site.local/some/randome/page.html", "UnicödeBöt")
    assert not rp.allowed(b"https://site.local/admin/", b"*")  # Scrapy may pass bytes


def test_request_rate_and_sitemaps_are_read_too() -> None:
    rp = parser(b"User-agent: *\nRequest-rate: 1/5s\nSitemap: https://site.local/s.xml\n")
    assert rp.crawl_delay("AnyBot") == 5.0
    assert rp.sitemaps == ("https://site.local/s.xml",)

"""The crawler's pure decisions: links in normal form, scope, REGP guidance, revisits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polite.core.crawl import (
    accept_headers,
    in_scope,
    language_refusal,
    next_visit_s,
    page_plan,
    resolve_link,
    resolve_links,
    scope_test,
)
from polite.core.robots.meta import RobotsDirectives
from polite.core.robots.model import AgentRules
from polite.errors import InvalidURL


@pytest.mark.parametrize(("base", "href", "expected"), [
    ("http://e.com/a/b", "c", "http://e.com/a/c"),
    ("http://e.com/a/b", "/x#frag", "http://e.com/x"),
    ("http://e.com/", "HTTP://E.COM:80", "http://e.com/"),
    ("https://e.com/", "//o.org:443/p?q=1 2", "https://o.org/p?q=1%202"),
    ("http://e.com/", "/caf\u00e9", "http://e.com/caf%C3%A9"),
    ("http://e.com/", "/%zz%", "http://e.com/%25zz%25"),
    ("http://e.com/", "/ok%2Fescaped", "http://e.com/ok%2Fescaped"),
    ("http://e.com/", " \t/spaced\n", "http://e.com/spaced"),
    ("http://e.com/", "http://b\u00fccher.de/", "http://xn--bcher-kva.de/"),
])
def test_links_resolve_to_one_normal_form(base: str, href: str, expected: str) -> None:
    assert resolve_link(base, href) == expected


@pytest.mark.parametrize("href", ["", "javascript:void(0)", "mailto:a@b", "ftp://e.com/",
                                  "http://[::1", "//e.com:99999/", "/" + "a" * 3000])
def test_links_that_cannot_be_crawled_are_refused(href: str) -> None:
    with pytest.raises(InvalidURL):
        resolve_link("http://e.com/", href)


def test_scope() -> None:
    seeds = frozenset({"example.com"})
    assert in_scope("host", seeds, "example.com")
    assert not in_scope("host", seeds, "www.example.com")
    assert in_scope("site", seeds, "www.example.com")
    assert not in_scope("site", seeds, "other.com")
    assert in_scope("any", seeds, "other.com")


_HREFS = ["/p1", "c", "/x#frag", "HTTP://E.COM:80", "//o.org:443/p?q=1 2", "/caf\u00e9",
          "/%zz%", " \t/spaced\n", "javascript:void(0)", "", "/p1", "/a/../p1", "/" + "a" * 3000,
          "http://b\u00fccher.de/", "/q?x=1"]


@pytest.mark.parametrize("base", ["http://e.com/a/b", "https://E.com:443/", "http://e.com:8080/",
                                  "ftp://e.com/", "not a url"])
def test_a_pages_links_resolve_as_each_alone(base: str) -> None:
    expected: dict[str, None] = {}
    for href in _HREFS:
        try:
            expected[resolve_link(base, href)] = None
        except InvalidURL:
            continue
    assert resolve_links(base, _HREFS) == list(expected)


@given(st.lists(st.text(alphabet="/.:?#%@ab9 \u00e9", max_size=12), max_size=8))
def test_resolved_links_match_resolve_link(hrefs: list[str]) -> None:
    expected: dict[str, None] = {}
    for href in hrefs:
        try:
            expected[resolve_link("http://e.com/d/", href)] = None
        except InvalidURL:
            continue
    assert resolve_links("http://e.com/d/", hrefs) == list(expected)


@pytest.mark.parametrize("scope", ["host", "site", "any"])
def test_a_scope_test_answers_as_in_scope(scope: Literal["host", "site", "any"]) -> None:
    seeds = frozenset({"example.com", "www.shop.org", "a.net"})
    hosts = ["example.com", "www.example.com", "shop.org", "www.shop.org", "www.www.shop.org",
             "a.net", "b.net", "www.a.net", "other.com", ""]
    allowed = scope_test(scope, seeds)
    assert [allowed(h) for h in hosts] == [in_scope(scope, seeds, h) for h in hosts]
    assert allowed("shop.org") is (scope != "host")


@pytest.mark.parametrize(("noindex", "nofollow", "page_type", "keep", "follow"), [
    (False, False, None, True, True),
    (False, False, "list", True, True),
    (False, False, "data", True, False),  # seed 000: data pages' links are not followed
    (False, True, "list", True, False),  # the page's own nofollow has the last word
    (True, False, None, False, True),  # noindex: fetched, not kept, links followed
])
def test_page_plan(noindex: bool, nofollow: bool, page_type: str | None, keep: bool,
                   follow: bool) -> None:
    plan = page_plan(RobotsDirectives(noindex=noindex, nofollow=nofollow), page_type)
    assert (plan.keep, plan.follow) == (keep, follow)


def test_language() -> None:
    assert language_refusal(("zh-CN",), ("zh", "en")) is None
    assert language_refusal((), ("en",)) is None
    assert language_refusal(("fr",), ()) is None  # a crawler that names no language reads all
    refusal = language_refusal(("fr",), ("zh", "en"))
    assert refusal is not None and "fr" in refusal


def test_regp_fields_become_request_headers() -> None:
    rules = AgentRules(cookies=("user=robot",), encoding=("gzip", "deflate", "br"),
                       language=("zh-CN", "en"), charset=("utf-8",))
    headers = accept_headers(rules, ("en",))
    assert headers["Cookie"] == "user=robot"
    assert headers["Accept-Encoding"] == "gzip, deflate"  # br is not decoded here
    assert headers["Accept-Language"] == "en"
    assert headers["Accept-Charset"] == "utf-8"
    assert "Cookie" not in accept_headers(AgentRules())


def test_revisit_times() -> None:
    now = 1_000_000.0
    rules = AgentRules(index_pages=("/news/",),
                       change_frequency=(("daily", "/hot/*.html"), ("never", "/archive/")))
    assert next_visit_s("http://e.com/news/a", rules, fetched_at=now) == now + 3600
    assert next_visit_s("http://e.com/hot/x.html", rules, fetched_at=now) == now + 86400
    assert next_visit_s("http://e.com/HOT/x.html", rules, fetched_at=now) == now + 86400
    assert next_visit_s("http://e.com/archive/1", rules, fetched_at=now) is None
    assert next_visit_s("http://e.com/x", rules, changefreq="weekly",
                        fetched_at=now) == now + 7 * 86400
    old = datetime.fromtimestamp(now - 100 * 86400, UTC)
    assert next_visit_s("http://e.com/x", AgentRules(), lastmod=old,
                        fetched_at=now) == now + 10 * 86400
    assert next_visit_s("http://e.com/x", AgentRules(), fetched_at=now) == now + 7 * 86400


@given(st.sampled_from(["http://e.com/a/b?q", "https://E.com:443/x/", "http://e.com:8080/"]),
       st.from_regex(r"\A(/|https?://[a-z0-9.]{1,12}(:[0-9]{1,5})?/?)[a-z0-9_~!$&'()*+,;=:@./%?-]{0,30}\Z"))
def test_the_fast_path_for_plain_links_agrees_with_the_general_one(base: str, href: str
                                                                    ) -> None:
    """A leading space sends a link down the general path (it is stripped there)."""
    try:
        general = resolve_link(base, " " + href)
    except InvalidURL:
        with pytest.raises(InvalidURL):
            resolve_link(base, href)
        return
    assert resolve_link(base, href) == general

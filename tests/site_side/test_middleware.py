"""The middleware in a real Starlette app under uvicorn and a real WSGI app under wsgiref, on
loopback, visited by httpx clients posing as crawlers from chosen loopback addresses:
verified by the operator's range, verified by forward-confirmed reverse DNS (an injected
resolver: the real one would reach the internet), forged, unknown, and a person."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from polite.core.robots.lifecycle import FetchPolicy, Received, freshness_s
from polite.core.site import Enforcement, Field, RuleRow, Section, SiteRules, parse_crawlers
from polite.site import SiteGuard, SiteStore
from tests.site_servers import client_from, serve_guarded

ASGI_HOST = "127.0.23.1"
WSGI_HOST = "127.0.23.2"
IN_RANGE = "127.0.23.50"  # ExampleSearch's published range in this test's list
BY_DNS = "127.0.23.70"  # its PTR is under ExampleSearch's suffix and resolves back
FORGER = "127.0.23.60"  # a PTR elsewhere
STRANGER = "127.0.23.80"

CRAWLERS = parse_crawlers(json.dumps({"snapshot": "test", "crawlers": [
    {"name": "ExampleSearch", "operator": "Example Search Inc.", "category": "search",
     "tokens": ["ExampleSearchBot"], "ip_ranges": [f"{IN_RANGE}/32"],
     "host_suffixes": [".crawl.example-search.test"]},
]}))
SEARCH_UA = "Mozilla/5.0 (compatible; ExampleSearchBot/2.1; +https://example-search.test/bot)"
UNKNOWN_UA = "SomeCrawler/0.3"
PERSON_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


class Resolver:
    """DNS as the test's world has it."""

    def __init__(self) -> None:
        self.reverse_asked: list[str] = []

    def reverse(self, ip: str) -> list[str]:
        self.reverse_asked.append(ip)
        return {BY_DNS: ["crawl-70.crawl.example-search.test."],
                FORGER: ["host-60.some-isp.test"]}.get(ip, [])

    def forward(self, name: str) -> list[str]:
        return {"crawl-70.crawl.example-search.test.": [BY_DNS]}.get(name, [])


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


RULES = SiteRules(sections=(
    Section("Whole site", "/", "webmaster", (
        RuleRow("*", Field.DISALLOW, "/private/"),
        RuleRow("*", Field.REQUEST_RATE, "1/10s"),
        RuleRow("ExampleSearchBot", Field.DISALLOW, "/private/"),
        RuleRow("ExampleSearchBot", Field.CRAWL_DELAY, "20"),
    )),
    Section("Shop", "/shop/", "shop team", (
        RuleRow("*", Field.DISALLOW, "/shop/cart"),
    )),
), ttl_s=600)


def _served(kind: str, guard: SiteGuard) -> AbstractContextManager[str]:
    return serve_guarded(kind, guard, ASGI_HOST, WSGI_HOST)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[SiteStore, Clock, Resolver]]:
    store = SiteStore(tmp_path / "site.sqlite")
    store.save(RULES, now=0.0, author="webmaster")
    yield store, Clock(), Resolver()
    store.close()


def _line_of(text: str, wanted: str, after: str) -> int:
    lines = text.split("\n")
    return lines.index(wanted, lines.index(after)) + 1


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_logging_only_lets_every_robot_through_and_logs_each_with_the_line_in_force(
        kind: str, site: tuple[SiteStore, Clock, Resolver]) -> None:
    store, clock, resolver = site
    guard = SiteGuard(store, crawlers=CRAWLERS, resolver=resolver, clock=clock)
    text = store.current().robots_txt
    with _served(kind, guard) as url:
        with client_from("127.0.23.90", url, PERSON_UA) as person:
            assert person.get("/private/report").text == "page /private/report"
        with client_from(IN_RANGE, url, SEARCH_UA) as search:
            assert search.get("/private/a").status_code == 200
            robots = search.get("/robots.txt")
        with client_from(BY_DNS, url, SEARCH_UA) as search_by_dns:
            assert search_by_dns.get("/shop/cart").status_code == 200
        with client_from(FORGER, url, SEARCH_UA) as forger:
            assert forger.get("/about?x=1").status_code == 200
        with client_from(STRANGER, url, UNKNOWN_UA) as stranger:
            assert stranger.get("/shop/cart").status_code == 200
    # /robots.txt is the saved version's, with the webmaster's TTL, which polite's own
    # fetcher honours
    assert robots.text == text
    assert robots.headers["cache-control"] == "max-age=600"
    received = Received(200, robots.content, tuple(robots.headers.items()))
    assert freshness_s(received, 0.0, FetchPolicy()) == 600
    rows = list(reversed(store.visits()))
    assert [(r.ip, r.target, r.verification, r.allowed, r.action, r.status) for r in rows] == [
        (IN_RANGE, "/private/a", "verified", False, "pass", 200),
        (IN_RANGE, "/robots.txt", "verified", True, "robots.txt", 200),
        (BY_DNS, "/shop/cart", "verified", True, "pass", 200),
        (FORGER, "/about?x=1", "forged", True, "pass", 200),
        (STRANGER, "/shop/cart", "unknown", False, "pass", 200),
    ]  # and no row for the person
    assert rows[0].robot == "ExampleSearch" and rows[0].operator == "Example Search Inc."
    assert rows[0].line == _line_of(text, "Disallow: /private/", "User-agent: ExampleSearchBot")
    assert rows[0].rule == "Disallow: /private/" and rows[0].version == 1
    assert "published range" in rows[0].how
    assert "resolves back" in rows[2].how
    assert "some-isp" in rows[3].how
    assert rows[4].robot == "SomeCrawler" and rows[4].rule == "Disallow: /shop/cart"
    assert rows[4].line == _line_of(text, "Disallow: /shop/cart", "User-agent: *")
    assert resolver.reverse_asked == [BY_DNS, FORGER]  # ranges first: no DNS for IN_RANGE


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_enforcing_refuses_and_throttles_what_the_file_says(
        kind: str, site: tuple[SiteStore, Clock, Resolver]) -> None:
    store, clock, resolver = site
    store.save(SiteRules(RULES.sections, ttl_s=60,
                         enforcement=Enforcement(refuse_disallowed=True, throttle=True,
                                                 refuse_forged=True)), now=1.0)
    guard = SiteGuard(store, crawlers=CRAWLERS, resolver=resolver, clock=clock)
    with _served(kind, guard) as url, client_from(IN_RANGE, url, SEARCH_UA) as search, \
                client_from(FORGER, url, SEARCH_UA) as forger, \
                client_from(STRANGER, url, UNKNOWN_UA) as stranger, \
                client_from("127.0.23.90", url, PERSON_UA) as person:
        refused = search.get("/private/a")
        assert refused.status_code == 403
        assert "Disallow: /private/" in refused.text
        assert forger.get("/about").status_code == 403
        assert forger.get("/robots.txt").status_code == 200  # always served
        assert search.get("/page").status_code == 200  # starts the 20 s interval
        clock.now += 5
        throttled = search.get("/page2")
        assert throttled.status_code == 429
        assert throttled.headers["retry-after"] == "15"  # Crawl-delay: 20, 5 s ago
        clock.now += 15
        assert search.get("/page2").status_code == 200
        # the unknown robot reads the * group: Request-rate 1/10s
        assert stranger.get("/a").status_code == 200
        clock.now += 3
        assert stranger.get("/b").headers["retry-after"] == "7"
        assert stranger.get("/shop/cart").status_code == 403
        # the verified crawler's pace is its own, not the stranger's
        clock.now += 17
        assert search.get("/page3").status_code == 200
        assert person.get("/private/a").status_code == 200
        assert person.get("/private/b").status_code == 200
    actions = [(r.ip, r.target, r.action, r.status) for r in reversed(store.visits())]
    assert actions == [
        (IN_RANGE, "/private/a", "refuse", 403),
        (FORGER, "/about", "refuse", 403),
        (FORGER, "/robots.txt", "robots.txt", 200),
        (IN_RANGE, "/page", "pass", 200),
        (IN_RANGE, "/page2", "throttle", 429),
        (IN_RANGE, "/page2", "pass", 200),
        (STRANGER, "/a", "pass", 200),
        (STRANGER, "/b", "throttle", 429),
        (STRANGER, "/shop/cart", "refuse", 403),
        (IN_RANGE, "/page3", "pass", 200),
    ]
    assert all(r.version == 2 for r in store.visits())
    stats = {s.robot: s for s in store.robot_stats()}
    assert (stats["ExampleSearch"].visits, stats["ExampleSearch"].forged,
            stats["ExampleSearch"].refused, stats["ExampleSearch"].throttled) == (7, 2, 2, 1)
    assert {(b[2], b[3]) for b in store.broken_lines()} == {
        ("Disallow: /private/", "ExampleSearch"), ("Disallow: /shop/cart", "SomeCrawler")}


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_new_version_is_served_within_a_second_of_its_save(
        kind: str, site: tuple[SiteStore, Clock, Resolver]) -> None:
    store, clock, resolver = site
    guard = SiteGuard(store, crawlers=CRAWLERS, resolver=resolver, clock=clock)
    with _served(kind, guard) as url, client_from("127.0.23.90", url, PERSON_UA) as person:
        first = person.get("/robots.txt")
        assert first.headers["x-robots-version"] == "1"
        store.save(SiteRules(RULES.sections[:1], ttl_s=0), now=2.0)
        assert person.get("/robots.txt").text == first.text  # within the second
        clock.now += 1.5
        second = person.get("/robots.txt")
        assert second.headers["x-robots-version"] == "2"
        assert "/shop/cart" not in second.text
        assert second.headers["cache-control"] == "no-cache"
        assert person.head("/robots.txt").content == b""
    assert store.visits() == []  # people are not logged


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_behind_the_sites_own_proxy_the_forwarded_address_is_the_visitors(
        kind: str, site: tuple[SiteStore, Clock, Resolver]) -> None:
    store, clock, resolver = site
    proxy = "127.0.23.95"
    guard = SiteGuard(store, crawlers=CRAWLERS, resolver=resolver, clock=clock,
                      trusted_proxies=[f"{proxy}/32"])
    with _served(kind, guard) as url:
        with client_from(proxy, url, SEARCH_UA) as through_proxy:
            through_proxy.get("/a", headers={"x-forwarded-for": IN_RANGE})
        with client_from(FORGER, url, SEARCH_UA) as direct:
            direct.get("/b", headers={"x-forwarded-for": IN_RANGE})  # not our proxy
    rows = [(r.ip, r.verification) for r in reversed(store.visits())]
    assert rows == [(IN_RANGE, "verified"), (FORGER, "forged")]


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_the_bundled_list_names_tools_apart_and_says_when_ranges_are_not_loaded(
        kind: str, site: tuple[SiteStore, Clock, Resolver]) -> None:
    store, clock, resolver = site
    guard = SiteGuard(store, resolver=resolver, clock=clock)  # the bundled crawler list
    with _served(kind, guard) as url:
        with client_from(STRANGER, url, "Mozilla/5.0 (compatible; GPTBot/1.2)") as gpt:
            assert gpt.get("/a").status_code == 200
        with client_from(STRANGER, url, "python-httpx/0.28.1") as httpx_client:
            assert httpx_client.get("/b").status_code == 200
        with client_from(STRANGER, url, "python-requests/2.32.3") as requests_client:
            assert requests_client.get("/c").status_code == 200
    rows = {r.target: r for r in store.visits()}
    assert rows["/a"].verification == "unverifiable"
    # OpenAI does publish its addresses: they are only not read here yet
    assert "publishes no addresses" not in rows["/a"].how
    assert "gptbot.json" in rows["/a"].how and "polite site ranges update" in rows["/a"].how
    assert rows["/b"].robot == "python-httpx"
    assert rows["/c"].robot == "python-requests"

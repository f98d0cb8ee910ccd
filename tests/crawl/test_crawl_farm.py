"""The crawler against a farm of real sites on loopback, its politeness measured at the
origins: when each request arrived, and what was asked for."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from polite.crawl import CrawlSettings, Page, open_crawler
from tests.sites import Reply, Site, serve

HTML = {"Content-Type": "text/html; charset=utf-8"}


def page(*links: str, head: str = "", rel: dict[str, str] | None = None) -> Reply:
    anchors = "".join(
        f'<a href="{href}"{" rel=" + repr(rel[href]) if rel and href in rel else ""}>{href}</a>'
        for href in links)
    return Reply(200, f"<html><head>{head}</head><body>{anchors}</body></html>".encode(), HTML)


def chain_site(host: str, robots: str, pages: int = 6) -> Site:
    """A home page linking to /p0 .. /pN-1, each linking to the next and to /private/N."""
    site = Site(host)
    site.routes["/robots.txt"] = Reply(200, robots.encode())
    site.routes["/"] = page(*(f"/p{i}" for i in range(pages)))
    for i in range(pages):
        site.routes[f"/p{i}"] = page(f"/p{(i + 1) % pages}", f"/private/{i}")
        site.routes[f"/private/{i}"] = page("/")
    return site


@pytest.fixture
def farm() -> Iterator[dict[str, Site]]:
    sites = {
        "delay": chain_site("127.0.3.1", "User-agent: *\nCrawl-delay: 0.3\nDisallow: /private/\n"),
        "rate": chain_site("127.0.3.2", "User-agent: *\nRequest-rate: 5/1s\n"
                                        "Disallow: /private\n"),
        "fast": chain_site("127.0.3.3", "User-agent: FarmBot\nDisallow: /private/\n"
                                        "User-agent: *\nDisallow: /\n"),
        "guided": Site("127.0.3.4"),
        "busy": chain_site("127.0.3.5", "User-agent: *\nDisallow: /private/\n", pages=3),
    }
    guided = sites["guided"]
    guided.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    guided.routes["/"] = page("/nofollow-page", "/noindex-page", "/header-nofollow", "/a",
                              "/rel-only", rel={"/rel-only": "nofollow"})
    guided.routes["/nofollow-page"] = page(
        "/behind-nofollow", head='<meta name="robots" content="nofollow">')
    guided.routes["/noindex-page"] = page("/behind-noindex",
                                          head='<meta name="FarmBot" content="noindex">')
    guided.routes["/header-nofollow"] = Reply(200, b'<a href="/behind-header">x</a>',
                                              {**HTML, "X-Robots-Tag": "farmbot: nofollow"})
    guided.routes["/a"] = page("/")
    for path in ("/behind-nofollow", "/behind-noindex", "/behind-header", "/rel-only"):
        guided.routes[path] = page()
    # The busy site answers its first page with 429 and Retry-After: 2.
    busy = sites["busy"]
    answers = iter([Reply(429, b"slow down", {"Retry-After": "2"})])
    busy.routes["/p0"] = lambda: next(answers, page("/p1", "/private/0"))
    with ExitStack() as stack:
        for site in sites.values():
            stack.enter_context(serve(site))
        yield sites


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]


def gaps(site: Site) -> list[float]:
    """Seconds between the starts of consecutive requests (robots.txt excluded: it does not
    use up the host's slot)."""
    times = [at for at, path in site.arrivals if path != "/robots.txt"]
    return [b - a for a, b in itertools.pairwise(times)]


def crawl(out: Path, seeds: list[str], **settings: Any) -> None:
    async def run() -> None:
        async with open_crawler(out, CrawlSettings(agent="FarmBot", **settings),
                                default_delay_s=0.0, allow_private=True) as crawler:
            await crawler.add_seeds(seeds)
            await crawler.run()

    asyncio.run(run())


def test_a_farm_is_crawled_politely_as_measured_at_each_origin(
        farm: dict[str, Site], tmp_path: Path) -> None:
    crawl(tmp_path, [site.origin + "/" for site in farm.values()], concurrency=16)
    # Every request arrived at most once, and none for a disallowed path.
    for site in farm.values():
        paths = [path for _, path in site.arrivals]
        repeated = {p for p in paths if paths.count(p) > 1 and p != "/p0"}
        assert not repeated, (site.host, repeated)
        assert not [p for p in paths if p.startswith("/private")], site.host
    # The delays each site asked for, measured at the site.
    assert len(gaps(farm["delay"])) >= 6 and min(gaps(farm["delay"])) >= 0.3
    assert min(gaps(farm["rate"])) >= 0.2
    # "fast" allows FarmBot everything but /private/: every page fetched.
    assert {p for _, p in farm["fast"].arrivals} >= {"/", *(f"/p{i}" for i in range(6))}
    # Robots directives of the pages themselves.
    guided = {p for _, p in farm["guided"].arrivals}
    assert {"/nofollow-page", "/noindex-page", "/header-nofollow", "/a"} <= guided
    assert "/behind-nofollow" not in guided  # META nofollow
    assert "/behind-header" not in guided  # X-Robots-Tag for this agent
    assert "/rel-only" not in guided  # rel=nofollow, and linked from nowhere else
    assert "/behind-noindex" in guided  # noindex does not stop links
    # The 429: the busy host paused for its Retry-After, the other hosts went on meanwhile.
    busy = farm["busy"].arrivals
    first_429 = next(at for at, path in busy if path == "/p0")
    after = [at for at, path in busy if at > first_429]
    assert after and after[0] - first_429 >= 2.0 - 0.05
    others = [at for site in (farm["delay"], farm["rate"]) for at, _ in site.arrivals]
    assert any(first_429 < at < first_429 + 2.0 for at in others)
    assert [p for _, p in busy].count("/p0") == 2  # asked again once the pause was over

    rows = records(tmp_path)
    by_url = {(row["url"], row["outcome"]) for row in rows}
    noindex = next(r for r in rows if r["url"].endswith("/noindex-page"))
    assert noindex["outcome"] == "fetched" and noindex["noindex"] is True
    blocked = [r for r in rows if "/private/" in r["url"] and r["outcome"] == "skipped"]
    assert blocked and all("Disallow: /private" in r["reason"] for r in blocked)
    assert all("(line " in r["reason"] for r in blocked)
    assert (farm["fast"].origin + "/", "fetched") in by_url
    # The WARC holds request and response records of what was kept, not the noindex page.
    kept = set()
    for path in (tmp_path / "warc").glob("*.warc.gz"):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type == "response":
                    kept.add(record.rec_headers.get_header("WARC-Target-URI"))
    assert farm["guided"].origin + "/a" in kept
    assert farm["guided"].origin + "/noindex-page" not in kept


def test_a_site_that_disallows_the_agent_is_not_fetched_beyond_robots_txt(
        tmp_path: Path) -> None:
    site = chain_site("127.0.3.9", "User-agent: *\nDisallow: /\n")
    with serve(site):
        crawl(tmp_path, [site.origin + "/"])
    assert [p for _, p in site.arrivals] == ["/robots.txt"]
    (row,) = records(tmp_path)
    assert row["outcome"] == "skipped" and "Disallow: /" in row["reason"]


def test_a_url_disallowed_by_robots_txt_is_recorded_with_its_rule_and_line(
        tmp_path: Path) -> None:
    """The skipped record carries what decided (the rule, its line) besides the words, and
    the summary counts it under robots."""
    site = chain_site("127.0.83.20", "User-agent: *\nAllow: /\nDisallow: /private/\n",
                      pages=1)
    with serve(site):
        async def run() -> Counter[str]:
            async with open_crawler(tmp_path, CrawlSettings(agent="FarmBot"),
                                    default_delay_s=0.0, allow_private=True) as crawler:
                await crawler.add_seeds([site.origin + "/private/0"])
                return (await crawler.run()).skipped

        skipped = asyncio.run(run())
    (row,) = records(tmp_path)
    assert row["outcome"] == "skipped"
    assert (row["rule"], row["line"]) == ("Disallow: /private/", 3)
    assert row["reason"] == "Blocked by robots.txt: Disallow: /private/ (line 3)"
    assert skipped == Counter({"robots": 1})


def test_pages_come_decoded_into_the_warc_and_depth_and_page_caps_hold(tmp_path: Path) -> None:
    site = chain_site("127.0.3.10", "User-agent: *\nDisallow: /private/\n", pages=8)
    body = b"<html><body>" + b'<a href="/p0">p0</a>' * 50 + b"</body></html>"
    site.routes["/"] = Reply(200, gzip.compress(body), {**HTML, "Content-Encoding": "gzip"})
    with serve(site):
        crawl(tmp_path / "a", [site.origin + "/"], max_depth=2)
    fetched = [p for _, p in site.arrivals if p != "/robots.txt"]
    assert fetched == ["/", "/p0", "/p1"]  # depth 0, 1 and 2 only
    responses = {}
    for path in (tmp_path / "a" / "warc").glob("*.warc.gz"):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type == "response":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    responses[uri] = record.content_stream().read()
    assert responses[site.origin + "/"] == body

    site.arrivals.clear()
    with serve(site):
        crawl(tmp_path / "b", [site.origin + "/"], max_pages=3)
    assert len([p for _, p in site.arrivals if p != "/robots.txt"]) == 3


def test_a_hook_gets_each_page_and_returns_items_and_urls(tmp_path: Path) -> None:
    site = Site("127.0.3.11")
    site.routes["/robots.txt"] = Reply(200, b"Robot-version: 3.0\nUser-agent: *\nAllow: /\n"
                                            b"Cookie: user=robot\nLanguage: en\n"
                                            b"Mirror-site: http://mirror.example/\n")
    site.routes["/"] = page("/a")
    site.routes["/a"] = page()
    site.routes["/from-hook"] = page()
    seen: list[tuple[str, int, list[str]]] = []

    def hook(found: Page) -> list[object]:
        seen.append((found.url.removeprefix(site.origin), found.status, found.links))
        return [{"title": found.url}, "/from-hook"] if found.url.endswith("/") else []

    async def run() -> None:
        async with open_crawler(tmp_path, CrawlSettings(agent="HookBot", languages=("en",)),
                                default_delay_s=0.0, allow_private=True,
                                on_page=hook) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            await crawler.run()

    with serve(site):
        asyncio.run(run())
    assert seen[0] == ("/", 200, [site.origin + "/a"])
    assert {url for url, _, _ in seen} == {"/", "/a", "/from-hook"}
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert items == [{"title": site.origin + "/"}]
    for _, path, headers, _ in site.seen:
        if path != "/robots.txt":
            assert headers["Cookie"] == "user=robot" and headers["Accept-Language"] == "en"
            assert headers["User-Agent"] == "HookBot"
    (record,) = [json.loads(line) for line in (tmp_path / "sites.jsonl").read_text().splitlines()]
    assert record["dialect"] == "regp" and record["mirror_sites"] == ["http://mirror.example/"]
    # every file of the folder in one compact JSON Lines form, as pages.jsonl
    for name in ("pages.jsonl", "sites.jsonl", "items.jsonl"):
        for line in (tmp_path / name).read_text("utf-8").splitlines():
            assert line == json.dumps(json.loads(line), ensure_ascii=False,
                                      separators=(",", ":")), (name, line)


def test_revisit_queues_each_page_again_for_when_it_is_due(tmp_path: Path) -> None:
    site = Site("127.0.3.12")
    site.routes["/robots.txt"] = Reply(200, b"Robot-version: 3.0\nUser-agent: *\n"
                                            b"Change-hourly: /news\nIndex-page: /$\n")
    site.routes["/"] = page("/news", "/other")
    site.routes["/news"] = page()
    site.routes["/other"] = page()

    async def run() -> None:
        async with open_crawler(tmp_path, CrawlSettings(agent="Bot", revisit=True),
                                default_delay_s=0.0, allow_private=True) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            task = asyncio.create_task(crawler.run())
            while len(site.arrivals) < 4:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            assert not task.done()  # a revisiting crawl keeps going
            crawler.stop()
            await asyncio.wait_for(task, 10)
            counts = await crawler.counts()
            assert counts.queued == 3 and counts.fetched == 0  # each one due again later

    with serve(site):
        asyncio.run(run())
    rows = {row["url"].removeprefix(site.origin): row for row in records(tmp_path)}
    fetched = {path: datetime.fromisoformat(row["fetched_at"]) for path, row in rows.items()}
    due = {path: datetime.fromisoformat(row["next_visit"]) for path, row in rows.items()}
    assert (due["/news"] - fetched["/news"]).total_seconds() == pytest.approx(3600, abs=1)
    assert (due["/"] - fetched["/"]).total_seconds() == pytest.approx(3600, abs=1)
    assert (due["/other"] - fetched["/other"]).total_seconds() == pytest.approx(7 * 86400, abs=1)


def test_per_host_lets_several_requests_to_one_host_be_in_flight(tmp_path: Path) -> None:
    site = Site("127.0.3.13")
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    site.routes["/"] = page(*(f"/slow{i}" for i in range(6)))
    for i in range(6):
        site.routes[f"/slow{i}"] = Reply(200, b"slow", HTML, delay_s=2.0)
    with serve(site):
        crawl(tmp_path, [site.origin + "/"], per_host=3)
    slow = sorted(at for at, path in site.arrivals if path.startswith("/slow"))
    assert len(slow) == 6
    # three went out together, not one after another (then the third would have come two
    # answers, 4 s, after the first); a loaded machine spread three together over 1.1 s
    assert slow[2] - slow[0] < 2.0
    # One at a time, the last would have come at least five answers (10 s) after the first:
    # measured at the site, not by the crawl's own running time, which a loaded machine
    # stretches.
    assert slow[5] - slow[0] < 5 * 2.0


def test_a_crawl_on_a_redis_store(tmp_path: Path, redis_url: str, redis_prefix: str) -> None:
    """Politeness and frontier in a real redis-server: the crawl, its spacing at the site,
    and a second run on the same store that finds everything done."""
    site = chain_site("127.0.3.14", "User-agent: *\nCrawl-delay: 0.2\nDisallow: /private/\n",
                      pages=4)
    store = f"{redis_url}?prefix={redis_prefix}"

    async def run(out: Path) -> dict[str, int]:
        async with open_crawler(out, CrawlSettings(agent="RedisBot"), store=store,
                                default_delay_s=0.0, allow_private=True) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            await crawler.run()
            return (await crawler.counts())._asdict()

    with serve(site):
        first = asyncio.run(run(tmp_path / "a"))
        again = asyncio.run(run(tmp_path / "b"))
    paths = [p for _, p in site.arrivals if p != "/robots.txt"]
    assert sorted(paths) == ["/", "/p0", "/p1", "/p2", "/p3"]
    assert min(gaps(site)) >= 0.2
    assert first["fetched"] == 5 and first["queued"] == 0 and first["skipped"] == 4
    assert again == first  # the seed was seen: nothing fetched twice


def test_a_hook_that_raises_fails_its_page_and_the_crawl_goes_on(tmp_path: Path) -> None:
    site = chain_site("127.0.3.15", "User-agent: *\nDisallow: /private/\n", pages=3)

    def hook(found: Page) -> list[object]:
        if found.url.endswith("/p1"):
            raise ValueError("the user's parser broke")
        return []

    async def run() -> None:
        async with open_crawler(tmp_path, CrawlSettings(agent="Bot"), default_delay_s=0.0,
                                allow_private=True, on_page=hook) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            await crawler.run()
            assert (await crawler.counts()).queued == 0

    with serve(site):
        asyncio.run(run())
    rows = {row["url"].removeprefix(site.origin): row for row in records(tmp_path)
            if "url" in row}
    assert rows["/p1"]["outcome"] == "failed"
    assert rows["/p1"]["reason"] == "ValueError: the user's parser broke"
    assert rows["/p2"]["outcome"] == "fetched"  # linked from /p0 as well: the crawl went on

"""Crawl workers sharing a store (Redis, an SQLite file) take each host's lease with its slot,
as the drop-ins do, and end it on every way a request ends. Measured at the origins, by the
kernel's arrival stamps: no two requests to a host overlap, none come closer than its delay,
the store holds the host's lease while each request is there and none once the crawl is over,
and no host waits for a forgotten lease to run out."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

import pytest

from polite.crawl import CrawlSettings, Page, open_crawler
from polite.fetch.politeness import LEASE_S
from tests.commands import command_line
from tests.sites import Reply, Site, serve

HTML = {"Content-Type": "text/html"}
PAGES = [f"/p{i}" for i in range(6)]
DELAYS_S = (0.05, 0.08)
RETRY_AFTER_S = 1.0
READ_TIMEOUT_S = 6.0  # (a loaded machine has kept a site silent for over three seconds)
SLOW_S = 12.0  # /slow answers this late: the crawler has given up on it by then
# A host left waiting this long between two requests waited for a lease that was never
# ended (it runs out only after a fetch's deadline and a minute more); the longest wait
# the sites ask for is RETRY_AFTER_S.
STALL_S = LEASE_S / 2
# Every way a request of the crawler's ends, each on a path of its own.
PATHS = {"/robots.txt", "/.well-known/tdmrep.json", "/old-sitemap.xml", "/sitemap.xml", "/",
         *PAGES, "/retry", "/paid", "/slow", "/moved"}

LeaseHeld = Callable[[str], bool]


def lease_site(host: str, delay_s: float) -> Site:
    """A site whose requests end each way: pages, a redirect, a 429 then a 200, a 402, one
    answered after the crawler gave up, a sitemap reached through a redirect, tdmrep.json.
    Its robots.txt and sitemap are set once it is served (they name its port)."""
    made = Site(host)
    links = "".join(f'<a href="{path}">x</a>' for path in (*PAGES, "/moved", "/paid"))
    for path in ("/", *PAGES):
        made.routes[path] = Reply(200, links.encode(), HTML)
    made.routes["/moved"] = Reply(301, b"", {"Location": "/p1"})
    made.routes["/paid"] = Reply(402, b"pay", {"crawler-price": "USD 0.01"})
    made.routes["/slow"] = Reply(200, b"late", HTML, delay_s=SLOW_S)
    answers = iter([Reply(429, b"slow down", {"Retry-After": f"{RETRY_AFTER_S:g}"})])
    made.routes["/retry"] = lambda: next(answers, Reply(200, b"at last", HTML))
    made.routes["/.well-known/tdmrep.json"] = Reply(200, b"[]",
                                                    {"Content-Type": "application/json"})
    made.routes["/old-sitemap.xml"] = Reply(301, b"", {"Location": "/sitemap.xml"})
    made.routes["/robots.txt"] = Reply(200, f"User-agent: *\nCrawl-delay: {delay_s}\n".encode())
    return made


def name_files(site: Site) -> None:
    """robots.txt and the sitemap, naming the site's origin."""
    robots = site.routes["/robots.txt"]
    assert isinstance(robots, Reply)
    robots.body += f"Sitemap: {site.origin}/old-sitemap.xml\n".encode()
    urls = "".join(f"<url><loc>{site.origin}{path}</loc></url>"
                   for path in ("/p0", "/retry", "/slow", "/moved"))
    site.routes["/sitemap.xml"] = Reply(200, (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>").encode(), {"Content-Type": "application/xml"})


def watch(site: Site, held: LeaseHeld, seen: list[tuple[str, bool]]) -> None:
    """Each request but robots.txt's (which takes no slot before it goes) notes whether
    the store held its host's lease while it was at the site."""
    for path, route in list(site.routes.items()):
        if path == "/robots.txt":
            continue

        def observed(path: str = path, route: Reply | Callable[[], Reply] = route) -> Reply:
            seen.append((path, held(site.host)))
            return route() if callable(route) else route

        site.routes[path] = observed


def sqlite_lease(path: Path) -> LeaseHeld:
    def held(host: str) -> bool:
        with closing(sqlite3.connect(path, timeout=30)) as db:
            row = db.execute("SELECT lease_until FROM slots WHERE host = ?",
                             (host,)).fetchone()
        return row is not None and row[0] is not None

    return held


@contextmanager
def redis_lease(url: str, prefix: str) -> Iterator[tuple[LeaseHeld, Callable[[str], bool]]]:
    """Whether a host's lease is held, and whether its slot is in the store at all."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        yield (lambda host: client.hget(f"{prefix}slot:{host}", "lease") is not None,
               lambda host: bool(client.exists(f"{prefix}slot:{host}")))
    finally:
        client.close()


def crawl_worker(name: str, out: Path, store: str | None, *urls: str
                 ) -> subprocess.Popen[str]:
    shared = ["--store", store, "--worker", name] if store else []
    return subprocess.Popen(
        command_line("crawl", *urls, "--out", str(out), *shared, "--agent", "LeaseBot",
                     "--allow-private", "--default-delay-s", "0", "--purpose", "search",
                     "--read-timeout-s", str(READ_TIMEOUT_S), "--json"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def assert_polite(site: Site, delay_s: float) -> None:
    """What the site saw: every path; no two requests at once (robots.txt aside, which no
    slot is claimed for before it goes, and /slow's answer, long given up on); none closer
    than the delay; the 429's pause kept; no wait for a lease to run out."""
    arrivals = sorted(site.arrivals)
    assert {path for _, path in arrivals} == PATHS, site.host
    assert [path for _, path in arrivals].count("/retry") == 2, arrivals
    slot_taking = [(at, path) for at, path in arrivals if path != "/robots.txt"]
    close = [(a, b) for a, b in itertools.pairwise(slot_taking) if b[0] - a[0] < delay_s]
    assert not close, (site.host, close)
    spans = sorted((arrived, arrived if path == "/slow" else replied, path)
                   for arrived, replied, path in site.exchanges if path != "/robots.txt")
    overlapping = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    assert not overlapping, (site.host, overlapping)
    refused = min(replied for _, replied, path in site.exchanges if path == "/retry")
    after = min(at for at, _ in slot_taking if at > refused)
    assert after - refused >= RETRY_AFTER_S, (site.host, after - refused)
    stalls = [(a, b) for a, b in itertools.pairwise(arrivals) if b[0] - a[0] > STALL_S]
    assert not stalls, (site.host, stalls)


@pytest.mark.parametrize(("kind", "workers"), [("folder", 1), ("sqlite", 2), ("redis", 3)])
def test_crawl_workers_keep_one_request_of_a_host_in_flight_on_every_path(
        kind: str, workers: int, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """``folder``: one crawl on its own store keeps one request of a host in flight itself
    (it takes no lease); ``sqlite``, ``redis``: workers share the store and its leases."""
    net = {"folder": "127.0.171", "sqlite": "127.0.172", "redis": "127.0.173"}[kind]
    sites = [lease_site(f"{net}.{n + 1}", delay) for n, delay in enumerate(DELAYS_S)]
    seen: dict[str, list[tuple[str, bool]]] = {each.host: [] for each in sites}
    with ExitStack() as stack:
        store: str | None = None
        held: LeaseHeld | None = None
        has_slot: Callable[[str], bool] = lambda host: True  # noqa: E731
        if kind == "sqlite":
            path = tmp_path / "shared.sqlite"
            store, held = f"sqlite:///{path}", sqlite_lease(path)
        elif kind == "redis":
            prefix = f"l{uuid.uuid4().hex[:10]}:"
            url = request.getfixturevalue("redis_url")
            store = f"{url}?prefix={prefix}"
            held, has_slot = stack.enter_context(redis_lease(url, prefix))
        for each in sites:
            stack.enter_context(serve(each))
            name_files(each)
            if held is not None:
                watch(each, held, seen[each.host])
        seeds = [each.origin + "/" for each in sites]
        processes = [crawl_worker(f"w{n}", tmp_path / f"w{n}", store, *seeds)
                     for n in range(workers)]
        try:
            for process in processes:
                # long enough for a forgotten lease to run out, so the sites can show it
                out, err = process.communicate(timeout=600)
                # (what each site saw come, and what it answered how late, says where a
                # silence was)
                assert process.returncode == 0, (err[-3000:], {
                    each.host: ([(path, round(a, 3)) for a, path in each.arrivals],
                                [(path, round(r - a, 3)) for a, r, path in each.exchanges])
                    for each in sites})
                assert json.loads(out)["frontier"]["queued"] == 0
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.communicate()
        for each, delay in zip(sites, DELAYS_S, strict=True):
            assert_polite(each, delay)
            if held is not None:
                # the lease held while each request was at the site, none left behind
                assert {path for path, _ in seen[each.host]} == PATHS - {"/robots.txt"}
                assert all(was for _, was in seen[each.host]), seen[each.host]
                assert has_slot(each.host) and not held(each.host), each.host


def test_a_worker_ends_its_lease_when_a_page_hook_fails_and_when_it_is_cancelled(
        tmp_path: Path) -> None:
    """Two ways out the origin cannot cause: a page hook that raises (the crawl goes on to
    the next page of the host at once), and a crawl cancelled while a request is out (the
    host is free in the store once it has stopped)."""
    path = tmp_path / "shared.sqlite"
    held = sqlite_lease(path)
    site = Site("127.0.171.9")
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    site.routes["/"] = Reply(200, b'<a href="/boom">b</a><a href="/hang">h</a>', HTML)
    site.routes["/boom"] = Reply(200, b"<p>boom</p>", HTML)
    arrived, release = threading.Event(), threading.Event()
    at_hang: list[bool] = []

    def hang() -> Reply:
        at_hang.append(held(site.host))
        arrived.set()
        release.wait(60)
        return Reply(200, b"late", HTML)

    site.routes["/hang"] = hang

    def hook(page: Page) -> None:
        if page.url.endswith("/boom"):
            raise RuntimeError("the hook failed")

    async def crawl() -> None:
        async with open_crawler(tmp_path / "out", CrawlSettings(agent="LeaseBot"),
                                store=f"sqlite:///{path}", worker="w1", allow_private=True,
                                default_delay_s=0.0, on_page=hook) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            running = asyncio.create_task(crawler.run(owns_store=False))
            # /hang comes at once after /boom: the hook's failure ended /boom's lease
            assert await asyncio.to_thread(arrived.wait, STALL_S), site.arrivals
            while not running.done():  # the second cancel reaches the fetch in flight
                running.cancel()
                await asyncio.wait([running], timeout=0.05)
            assert running.cancelled()

    try:
        with serve(site):
            asyncio.run(crawl())
    finally:
        release.set()
    assert at_hang == [True]
    assert not held(site.host)
    lines = [json.loads(line) for line in
             (tmp_path / "out" / "pages.jsonl").read_text().splitlines()]
    assert [line["outcome"] for line in lines
            if line.get("url", "").endswith("/boom")] == ["failed"], lines


@pytest.mark.parametrize(("lease_s", "most_s"), [(2.0, 2.0), (600.0, 60.0 + LEASE_S)])
def test_a_worker_holds_a_host_no_longer_than_its_urls(
        lease_s: float, most_s: float, tmp_path: Path) -> None:
    """A worker killed mid-request keeps its host's lease until it runs out: no longer than
    the worker's URLs are held (``--lease-s``), and, with the default, a fetch's deadline
    and a minute more (it never lapses while the request is out)."""
    path = tmp_path / "shared.sqlite"
    site = Site("127.0.171.10")
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    arrived, release = threading.Event(), threading.Event()
    lease_left: list[float] = []

    def hang() -> Reply:
        with closing(sqlite3.connect(path, timeout=30)) as db:
            (until,) = db.execute("SELECT lease_until FROM slots WHERE host = ?",
                                  (site.host,)).fetchone()
        lease_left.append(until - time.time())
        arrived.set()
        release.wait(60)
        return Reply(200, b"late", HTML)

    site.routes["/"] = hang

    async def crawl() -> None:
        settings = CrawlSettings(agent="LeaseBot", lease_s=lease_s)
        async with open_crawler(tmp_path / "out", settings, store=f"sqlite:///{path}",
                                worker="w1", allow_private=True,
                                default_delay_s=0.0) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            running = asyncio.create_task(crawler.run(owns_store=False))
            assert await asyncio.to_thread(arrived.wait, 60), site.arrivals
            while not running.done():
                running.cancel()
                await asyncio.wait([running], timeout=0.05)

    try:
        with serve(site):
            asyncio.run(crawl())
    finally:
        release.set()
    (left,) = lease_left
    assert left <= most_s + 0.5, left  # (the wall clocks of two processes: a margin)
    assert most_s < 30 or left > most_s - 30, left  # held for about that long

"""``polite frontier serve`` with its politeness on: a crawler's loop (GetURLs, fetch,
PutURLs with the page's links) crawls two loopback sites whose robots.txt disallows a path
and asks a Crawl-delay. At the sites: nothing disallowed is requested, robots.txt once, and
no two pages of a site come closer than its delay."""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.frontier.frontier_client import KINDS, frontier, store_url, stubs
from tests.sites import Reply, Site, serve

DELAY_S = 1.0
ROBOTS = f"User-agent: *\nDisallow: /private\nCrawl-delay: {DELAY_S:g}\n".encode()
LINKS = {"/": ["/a", "/b", "/private/x"], "/a": ["/c", "/private/y", "/"], "/b": ["/c"],
         "/c": ["/a"]}


def _site(host: str) -> Site:
    def page(path: str) -> Reply:
        links = "".join(f'<a href="{link}">{link}</a>' for link in LINKS[path])
        return Reply(200, f"<html><body>{links}</body></html>".encode(),
                     {"Content-Type": "text/html"})

    routes: dict[str, Any] = {"/robots.txt": Reply(200, ROBOTS)}
    routes.update({path: page(path) for path in LINKS})
    routes.update({"/private/x": Reply(200, b"secret"), "/private/y": Reply(200, b"secret")})
    return Site(host, routes=routes)


def _crawl(client: Any, pb: Any, seeds: list[str]) -> int:
    """The loop of a crawler on the URL Frontier; how many pages it fetched."""
    def discovered(url: str) -> Any:
        return pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=url)))

    assert all(a.status == pb.AckMessage.OK
               for a in client.PutURLs(iter([discovered(u) for u in seeds])))
    fetched = 0
    deadline = time.monotonic() + 120
    with httpx.Client(trust_env=False, timeout=30) as http:
        while True:
            assert time.monotonic() < deadline, "the crawl did not end"
            got = list(client.GetURLs(pb.GetParams(max_urls_per_queue=10, max_queues=10,
                                                   delay_requestable=60,
                                                   anyCrawlID=pb.AnyCrawlID())))
            for info in got:
                page = http.get(info.url)
                fetched += 1
                base = info.url.split("/", 3)
                links = [f"{base[0]}//{base[2]}{href}"
                         for href in re.findall(r'href="([^"]+)"', page.text)]
                done = pb.URLItem(known=pb.KnownURLItem(info=info))
                acks = list(client.PutURLs(iter([done, *map(discovered, links)])))
                assert all(a.status == pb.AckMessage.OK for a in acks)
            if not got:
                stats = client.GetStats(pb.QueueWithinCrawlParams())
                if stats.size == 0 and stats.inProcess == 0:
                    return fetched
                time.sleep(0.05)  # a crawler asks again a little later


@pytest.mark.parametrize("kind", KINDS)
def test_a_crawl_keeps_robots_txt_and_the_crawl_delay_at_the_sites(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    pb = stubs(tmp_path.parent / "stubs")[0]
    store = store_url(kind, tmp_path, request)
    ip = {"sqlite": 1, "redis": 5, "redis-cluster": 7}[kind]
    sites = [_site(f"127.0.147.{ip}"), _site(f"127.0.147.{ip + 1}")]
    with serve(sites[0]), serve(sites[1]), frontier(
            tmp_path, "--store", store, "--allow-private", "--default-delay-s", "0") as client:
        fetched = _crawl(client, pb, [site.origin + "/" for site in sites])
        private = sites[0].origin + "/private/x"
        status = client.GetURLStatus(pb.URLStatusRequest(url=private))
        listed = list(client.ListURLs(pb.ListUrlParams(key=sites[1].host, filter="private")))
        stats = client.GetStats(pb.QueueWithinCrawlParams(key=sites[0].host))
    assert fetched == 8
    for site in sites:
        paths = [path for _, path in site.arrivals]
        assert not [p for p in paths if p.startswith("/private")], paths
        assert paths.count("/robots.txt") == 1, paths
        assert sorted(p for p in paths if p != "/robots.txt") == sorted(LINKS), paths
        pages = sorted(at for at, path in site.arrivals if path != "/robots.txt")
        gaps = [b - a for a, b in itertools.pairwise(pages)]
        assert min(gaps) >= DELAY_S, gaps
    assert status.WhichOneof("item") == "known"  # completed, never to be handed out
    assert list(status.known.info.metadata["polite.refused"].values) == [
        "robots.txt disallows it"]
    assert "Disallow: /private" in status.known.info.metadata["polite.robots_rule"].values[0]
    assert len(listed) == 2
    assert all(u.known.info.metadata["polite.refused"].values for u in listed)
    assert stats.counts["completed"] == 6


def test_an_unreadable_robots_txt_holds_the_host_and_a_lapsed_lease_comes_back(
        tmp_path: Path) -> None:
    """robots.txt answered 503: nothing of the host is handed out, nor completed, and no
    page is asked for. A URL of a readable site handed out and never sent back is handed out
    again once its lease lapses."""
    pb = stubs(tmp_path.parent / "stubs")[0]
    down = Site("127.0.147.3", routes={"/robots.txt": Reply(503, b"busy"),
                                       "/": Reply(200, b"page")})
    up = Site("127.0.147.4", routes={"/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"),
                                     "/": Reply(200, b"page")})
    with serve(down), serve(up), frontier(
            tmp_path, "--store", f"sqlite:///{tmp_path / 'f.sqlite'}", "--allow-private",
            "--default-delay-s", "0") as client:
        items = [pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=u)))
                 for u in (down.origin + "/", up.origin + "/")]
        assert len(list(client.PutURLs(iter(items)))) == 2
        params = pb.GetParams(max_queues=10, delay_requestable=1)
        first = [u.url for u in client.GetURLs(params)]
        assert first == [up.origin + "/"]
        again: list[str] = []
        deadline = time.monotonic() + 60
        while not again:  # the lease of one second lapses
            assert time.monotonic() < deadline
            time.sleep(0.1)
            again = [u.url for u in client.GetURLs(params)]
        assert again == [up.origin + "/"]
        held = client.GetURLStatus(pb.URLStatusRequest(url=down.origin + "/"))
    assert held.WhichOneof("item") == "discovered"
    assert "polite.refused" not in held.discovered.info.metadata
    assert [p for _, p in down.arrivals if p != "/robots.txt"] == []
    assert "/robots.txt" in [p for _, p in down.arrivals]


def _discovered(pb: Any, url: str) -> Any:
    return pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=url)))


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_host_with_no_spacing_gives_what_is_asked_one_with_a_spacing_one_url(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Crawl-delay: 0 and no delay set: a queue hands out up to max_urls_per_queue URLs a
    call, in flight together, what robots.txt disallows still refused. With a spacing (the
    default delay, or SetDelay as a floor over Crawl-delay: 0): one URL, and none more while
    it is in flight."""
    pb = stubs(tmp_path.parent / "stubs")[0]
    ip = 11 if kind == "sqlite" else 14
    zero = Site(f"127.0.147.{ip}", routes={
        "/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private\nCrawl-delay: 0\n")})
    spaced = Site(f"127.0.147.{ip + 1}", routes={
        "/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n")})
    floored = Site(f"127.0.147.{ip + 2}", routes={
        "/robots.txt": Reply(200, b"User-agent: *\nCrawl-delay: 0\n")})
    with serve(zero), serve(spaced), serve(floored), frontier(
            tmp_path, "--store", store_url(kind, tmp_path, request), "--allow-private",
            "--default-delay-s", "30") as client:
        urls = [zero.origin + path for path in ("/1", "/private/x", "/2", "/3", "/4")] + \
            [site.origin + path for site in (spaced, floored) for path in ("/1", "/2", "/3")]
        assert len(list(client.PutURLs(iter([_discovered(pb, u) for u in urls])))) == len(urls)
        client.SetDelay(pb.QueueDelayParams(key=floored.host, delay_requestable=1))
        params = pb.GetParams(max_urls_per_queue=3, max_queues=10, delay_requestable=60)
        first = sorted(u.url for u in client.GetURLs(params))
        second = sorted(u.url for u in client.GetURLs(params))
        third = list(client.GetURLs(params))
        refused = client.GetURLStatus(pb.URLStatusRequest(url=zero.origin + "/private/x"))
        stats = client.GetStats(pb.QueueWithinCrawlParams(key=zero.host))
    assert first == sorted([zero.origin + "/1", zero.origin + "/2", spaced.origin + "/1",
                            floored.origin + "/1"])
    assert second == [zero.origin + "/3", zero.origin + "/4"]
    assert third == []
    assert refused.known.info.metadata["polite.refused"].values == ["robots.txt disallows it"]
    assert (stats.inProcess, stats.counts["completed"]) == (4, 1)


def _fetch_each(client: Any, pb: Any, expected: int) -> None:
    """A crawler's loop: GetURLs, fetch each URL, send it back as done; until ``expected``
    URLs were fetched."""
    fetched = 0
    deadline = time.monotonic() + 120
    params = pb.GetParams(max_urls_per_queue=10, max_queues=10, delay_requestable=60)
    with httpx.Client(trust_env=False, timeout=30) as http:
        while fetched < expected:
            assert time.monotonic() < deadline, f"{fetched} of {expected} fetched"
            got = list(client.GetURLs(params))
            for info in got:
                http.get(info.url)
                fetched += 1
                done = pb.URLItem(known=pb.KnownURLItem(info=info))
                assert [a.status for a in client.PutURLs(iter([done]))] == [
                    pb.AckMessage.OK]
            if not got:
                time.sleep(0.02)  # a crawler asks again a little later


def _page_gaps(site: Site) -> list[float]:
    """The time between pages arriving at the site, by the kernel's stamps."""
    pages = sorted(at for at, path in site.arrivals if path != "/robots.txt")
    return [b - a for a, b in itertools.pairwise(pages)]


PAGES = ["/1", "/2", "/3", "/4"]


def test_a_crawl_delay_shorter_than_the_default_delay_sets_the_host_s_pace(
        tmp_path: Path) -> None:
    """robots.txt asks 0.5 s, the frontier's default is 20 s: the site gets its own pace.
    At the site, every gap is at least 0.5 s and each well under the default (a margin of
    19 s that load cannot eat)."""
    pb = stubs(tmp_path.parent / "stubs")[0]
    site = Site("127.0.147.20", routes={
        "/robots.txt": Reply(200, b"User-agent: *\nCrawl-delay: 0.5\n"),
        **{path: Reply(200, b"page") for path in PAGES}})
    with serve(site), frontier(tmp_path, "--store", f"sqlite:///{tmp_path / 'f.sqlite'}",
                               "--allow-private", "--default-delay-s", "20") as client:
        assert len(list(client.PutURLs(iter(
            [_discovered(pb, site.origin + path) for path in PAGES])))) == len(PAGES)
        _fetch_each(client, pb, len(PAGES))
    gaps = _page_gaps(site)
    assert len(gaps) == len(PAGES) - 1
    assert min(gaps) >= 0.5, gaps
    assert max(gaps) < 20.0, gaps


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_set_delay_is_a_floor_under_the_site_s_own_delay(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """SetDelay of 1 s on two queues: a site asking 0.2 s gets 1 s between its pages, one
    asking 1.5 s its own 1.5 s (measured at the sites, by the kernel's stamps)."""
    pb = stubs(tmp_path.parent / "stubs")[0]
    ip = 21 if kind == "sqlite" else 23
    quick, slow = (Site(f"127.0.147.{ip + i}", routes={
        "/robots.txt": Reply(200, f"User-agent: *\nCrawl-delay: {delay}\n".encode()),
        **{path: Reply(200, b"page") for path in PAGES}}) for i, delay in enumerate(
            ("0.2", "1.5")))
    with serve(quick), serve(slow), frontier(
            tmp_path, "--store", store_url(kind, tmp_path, request), "--allow-private",
            "--default-delay-s", "0") as client:
        items = [_discovered(pb, site.origin + path) for site in (quick, slow)
                 for path in PAGES]
        assert len(list(client.PutURLs(iter(items)))) == len(items)
        for site in (quick, slow):
            client.SetDelay(pb.QueueDelayParams(key=site.host, delay_requestable=1))
        _fetch_each(client, pb, len(items))
    quick_gaps, slow_gaps = _page_gaps(quick), _page_gaps(slow)
    assert len(quick_gaps) == len(slow_gaps) == len(PAGES) - 1
    assert min(quick_gaps) >= 1.0, quick_gaps
    assert min(slow_gaps) >= 1.5, slow_gaps


@pytest.mark.parametrize("kind", KINDS)
def test_a_queue_that_must_wait_does_not_keep_the_others_out_of_get_urls(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """GetURLs with max_queues=1: the first queue in order belongs to a host whose robots.txt
    answers 503 (nothing to hand out for a minute); it is passed over until then, and the
    next call gives the other queue's URL, where it would take the one place in every call."""
    pb = stubs(tmp_path.parent / "stubs")[0]
    ip = {"sqlite": 30, "redis": 32, "redis-cluster": 34}[kind]
    down = Site(f"127.0.147.{ip}", routes={"/robots.txt": Reply(503, b"busy")})
    up = Site(f"127.0.147.{ip + 1}", routes={"/robots.txt": Reply(200, b"User-agent: *\n")})
    with serve(down), serve(up), frontier(
            tmp_path, "--store", store_url(kind, tmp_path, request), "--allow-private",
            "--default-delay-s", "0") as client:
        urls = [down.origin + "/", up.origin + "/"]
        assert len(list(client.PutURLs(iter([_discovered(pb, u) for u in urls])))) == 2
        params = pb.GetParams(max_queues=1, delay_requestable=60)
        calls = [[u.url for u in client.GetURLs(params)] for _ in range(3)]
        stats = client.GetStats(pb.QueueWithinCrawlParams(key=down.host))
    assert calls[0] == []  # the down host's queue came first: robots.txt asked, 503
    assert [up.origin + "/"] in calls[1:], calls
    assert (stats.size, stats.inProcess, stats.counts["completed"]) == (1, 0, 0)
    assert [p for _, p in down.arrivals] == ["/robots.txt"]

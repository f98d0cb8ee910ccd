"""Several ``polite crawl`` processes sharing one crawl through a real redis-server: one is
killed with SIGKILL midway and another joins later. Measured at the origins: every page
fetched, none twice but what the killed worker had in flight, no gap under a site's delay."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from contextlib import ExitStack, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from polite.cli import main
from polite.crawl import CrawlSettings, open_crawler
from tests.commands import command_line
from tests.sites import Reply, Site, serve

PAGES = 30
HTML = {"Content-Type": "text/html"}
DELAYS_S = (0.1, 0.15, 0.1, 0.2, 0.1, 0.15)
LEASE_S = 2.0


def site(host: str, delay_s: float) -> Site:
    """A home page linking to /p0 .. /pN-1, each linking on to two more pages and home."""
    made = Site(host)
    made.routes["/robots.txt"] = Reply(200, f"User-agent: *\nCrawl-delay: {delay_s}\n".encode())
    made.routes["/"] = Reply(200, b'<a href="/p0">0</a><a href="/p1">1</a>', HTML)
    for i in range(PAGES):
        links = "".join(f'<a href="/p{j}">{j}</a>' for j in (2 * i + 2, 2 * i + 3) if j < PAGES)
        made.routes[f"/p{i}"] = Reply(200, (links + '<a href="/">home</a>').encode(), HTML)
    return made


def worker(name: str, out: Path, store: str, *urls: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command_line("crawl", *urls, "--out", str(out), "--store", store, "--worker", name,
                     "--agent", "FarmBot", "--user-agent", f"FarmBot-{name}", "--lease-s",
                     str(LEASE_S), "--allow-private", "--default-delay-ms", "0", "--json"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop(processes: Iterable[subprocess.Popen[str]]) -> None:
    for process in list(processes):
        if process.poll() is None:
            process.kill()
        process.communicate()


def polite(*args: str) -> Any:
    done = subprocess.run(command_line(*args, "--json"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def status_in_this_process(store: str) -> Any:
    """``polite crawl status`` run here rather than in a process of its own, whose start-up
    a loaded machine stretches to seconds: asked while the crawl is surely still going."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["crawl", "status", "--store", store, "--json"]) == 0
    return json.loads(out.getvalue())


def fetched_lines(out: Path) -> list[str]:
    lines = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    return [row["url"] for row in lines if row["outcome"] == "fetched"]


@pytest.mark.slow  # about 20 s: four crawl processes start, one lease runs out
def test_workers_share_a_crawl_through_redis_one_killed_one_joining(
        redis_url: str, tmp_path: Path) -> None:
    store = f"{redis_url}?prefix=w{uuid.uuid4().hex[:10]}:"
    sites = [site(f"127.0.26.{n + 1}", delay) for n, delay in enumerate(DELAYS_S)]
    seeds = []
    outs = {name: tmp_path / name for name in ("w1", "w2", "w3", "w4")}
    with ExitStack() as stack:
        for each in sites:
            stack.enter_context(serve(each))
            seeds.append(each.origin + "/")
        started = {name: worker(name, outs[name], store, *seeds) for name in ("w1", "w2", "w3")}
        stack.callback(_stop, started.values())  # none left running if the test fails
        total = len(sites) * (PAGES + 1)
        deadline = time.monotonic() + 60
        while sum(len(s.arrivals) for s in sites) < total // 3:
            assert time.monotonic() < deadline, "the workers did not get going"
            time.sleep(0.02)
        # w4 joins the crawl under way (no seeds) as w2 is killed: started before the status
        # call, since on a loaded machine a process may take seconds to get going, and the
        # crawl left for it is only a few seconds long.
        started["w4"] = worker("w4", outs["w4"], store)
        started["w2"].send_signal(signal.SIGKILL)
        started["w2"].communicate(timeout=10)
        # Seen from anywhere while it runs: the frontier's counts and the workers.
        status = status_in_this_process(store)
        assert status["finished"] is False and status["frontier"]["fetched"] > 0
        assert {w["worker"] for w in status["workers"]} >= {"w1", "w3"}
        summaries = {}
        for name in ("w1", "w3", "w4"):
            try:
                out, err = started[name].communicate(timeout=120)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{name} did not end within 120 s; the shared crawl then: "
                            f"{status_in_this_process(store)}")
            assert started[name].returncode == 0, err
            summaries[name] = json.loads(out)
    expected = {"/", *(f"/p{i}" for i in range(PAGES))}
    killed_asked: set[str] = set()
    for each in sites:
        paths = [path for _, path in each.arrivals if path != "/robots.txt"]
        assert set(paths) == expected, each.host  # every page, after the kill too
        killed_asked |= {each.origin + path for _, path, headers, _ in each.seen
                         if headers.get("User-Agent") == "FarmBot-w2" and path != "/robots.txt"}
        # No two requests to a site closer than its delay, whichever workers sent them.
        sent = [(at, path, seen[2].get("User-Agent")) for (at, path), seen
                 in zip(each.arrivals, each.seen, strict=True) if path != "/robots.txt"]
        delay = float(each.routes["/robots.txt"].body.split(b"Crawl-delay: ")[1])  # type: ignore[union-attr]
        close = [(a, b) for a, b in itertools.pairwise(sent) if b[0] - a[0] < delay]
        assert not close, (each.host, close)
    # None twice but the requests in flight at the kill: sent by the killed worker and not
    # acknowledged (written down or not); at most one a site (one request in flight a host).
    fetched = [url for out in outs.values() for url in fetched_lines(out)]
    by_survivors = [url for name in ("w1", "w3", "w4") for url in fetched_lines(outs[name])]
    assert len(by_survivors) == len(set(by_survivors))  # the living fetched each URL once
    arrivals_twice = {each.origin + path for each in sites
                      for path in expected
                      if [p for _, p in each.arrivals].count(path) > 1}
    assert arrivals_twice <= killed_asked, arrivals_twice - killed_asked
    assert all(sum(url.startswith(each.origin + "/") for url in arrivals_twice) <= 1
               for each in sites), arrivals_twice
    assert all(n <= 2 for each in sites for n in Counter(p for _, p in each.arrivals).values())
    assert {url for url in fetched if fetched.count(url) > 1} <= arrivals_twice
    assert len(set(fetched)) == len(sites) * len(expected)
    assert fetched_lines(outs["w4"]), "the worker that joined later took no part"
    for summary in summaries.values():
        assert summary["frontier"]["queued"] == 0 and summary["frontier"]["leased"] == 0
    status = polite("crawl", "status", "--store", store)
    assert status["finished"] is True
    assert status["frontier"]["fetched"] == len(sites) * len(expected)
    assert status["hosts_fetched"] == len(sites)
    ended = {w["worker"] for w in status["workers"] if w.get("ended")}
    assert ended == {"w1", "w3", "w4"}
    merged = polite("crawl", "merge", *map(str, outs.values()), "--out",
                    str(tmp_path / "merged"))
    assert merged["pages"] == len(sites) * len(expected)
    assert set(merged["fetched_more_than_once"]) <= arrivals_twice
    assert (tmp_path / "merged" / "pages.jsonl").read_text().count("\n") == sum(
        (out / "pages.jsonl").read_text().count("\n") for out in outs.values())
    assert len(list((tmp_path / "merged" / "warc").glob("*.warc.gz"))) == 4


def test_two_workers_share_a_crawl_on_a_three_node_redis_cluster(
        redis_cluster_nodes: list[str], tmp_path: Path) -> None:
    """``?cluster=1``: the frontier's and the politeness store's keys spread over three
    primaries; the crawl is the same as on one server, gaps measured at the sites."""
    import redis

    prefix = f"k{uuid.uuid4().hex[:10]}:"
    store = f"{redis_cluster_nodes[0]}/0?cluster=1&prefix={prefix}"
    sites = [site(f"127.0.41.{n + 1}", delay) for n, delay in enumerate((0.05, 0.05, 0.1, 0.05))]
    outs = {name: tmp_path / name for name in ("c1", "c2")}
    with ExitStack() as stack:
        for each in sites:
            stack.enter_context(serve(each))
        seeds = [each.origin + "/" for each in sites]
        started = {name: worker(name, outs[name], store, *seeds) for name in outs}
        for process in started.values():
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            assert json.loads(out)["frontier"]["queued"] == 0
    expected = {"/", *(f"/p{i}" for i in range(PAGES))}
    for each in sites:
        paths = [path for _, path in each.arrivals if path != "/robots.txt"]
        assert sorted(paths) == sorted(expected), each.host  # every page, once
        # both workers met the host at once: one fetched robots.txt, the other read it
        assert [path for _, path in each.arrivals].count("/robots.txt") == 1, each.host
        delay = float(each.routes["/robots.txt"].body.split(b"Crawl-delay: ")[1])  # type: ignore[union-attr]
        times = [at for at, path in each.arrivals if path != "/robots.txt"]
        close = [(a, b) for a, b in itertools.pairwise(times) if b - a < delay]
        assert not close, (each.host, close)
    fetched = [url for out in outs.values() for url in fetched_lines(out)]
    assert len(fetched) == len(set(fetched)) == len(sites) * len(expected)
    assert all(fetched_lines(out) for out in outs.values()), "a worker took no part"
    status = polite("crawl", "status", "--store", store)
    assert status["finished"] is True
    assert status["frontier"]["fetched"] == len(sites) * len(expected)
    # The keys are on every node: the hosts' frontier keys and politeness slots spread.
    per_node = []
    for node in redis_cluster_nodes:
        client = redis.Redis.from_url(node)
        try:
            per_node.append({key.decode() for key in client.scan_iter(f"{prefix}*")})
        finally:
            client.close()
    tags = [{k.split("{")[1].split("}")[0] for k in keys if "{" in k} - {"f"}
            for keys in per_node]
    assert sum(map(len, tags)) == len(sites) and len(set().union(*tags)) == len(sites)
    assert sum(1 for t in tags if t) >= 2, tags  # four hosts on two nodes at least
    assert all(keys for keys in per_node), [len(k) for k in per_node]


def test_a_redis_cluster_crawl_with_a_brace_in_a_linked_host(
        tmp_path: Path, redis_cluster_nodes: list[str], redis_prefix: str) -> None:
    # A link to http://}evil.test/ had broken the {HOST} hash tag of that host's keys: the
    # page's settling was refused (all keys must map to the same key slot), the page was
    # recorded fetched and failed, and its other links were lost.
    home = Site("127.0.6.41")
    home.routes.update({
        "/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"),
        "/": Reply(200, b'<a href="http://}evil.test/">e</a><a href="http://{x}.test/">x</a>'
                        b'<a href="/a">a</a><a href="/b">b</a>', HTML),
        "/a": Reply(200, b"a", HTML), "/b": Reply(200, b"b", HTML)})
    store = f"{redis_cluster_nodes[0]}/0?cluster=1&prefix={redis_prefix}"

    async def run() -> None:
        async with open_crawler(tmp_path, CrawlSettings(agent="TagBot"), store=store,
                                default_delay_s=0.0, allow_private=True,
                                worker="w1") as crawler:
            await crawler.add_seeds([home.origin + "/"])
            await crawler.run(owns_store=False, poll_s=0.2)

    with serve(home):
        asyncio.run(asyncio.wait_for(run(), 60))
    rows = [json.loads(line) for line in (tmp_path / "pages.jsonl").read_text().splitlines()]
    outcomes = Counter((row["url"].removeprefix(home.origin), row["outcome"]) for row in rows)
    assert outcomes == {("/", "fetched"): 1, ("/a", "fetched"): 1, ("/b", "fetched"): 1,
                        ("http://}evil.test/", "skipped"): 1,
                        ("http://{x}.test/", "skipped"): 1}

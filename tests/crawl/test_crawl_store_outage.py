"""Redis killed midway through a shared crawl and started again on the same files: the crawl
waits for it, saying so in one line, then goes on with the URLs it held (no lease runs out)
and ends as if nothing happened."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
import uuid
from pathlib import Path
from subprocess import Popen
from typing import NamedTuple

import pytest

from polite.crawl import CrawlSettings, StoreUnreachable, open_crawler
from polite.storage import RedisStore
from polite.storage.redis import HEALTH_CHECK_S
from tests.commands import command_line
from tests.redis_server import free_port, start_redis
from tests.sites import Reply, Site, serve

PAGES = 30
HTML = {"Content-Type": "text/html"}


def chain(host: str) -> Site:
    site = Site(host)
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nCrawl-delay: 0.1\n")
    for i in range(PAGES):
        link = f'<a href="/p{i + 1}">next</a>' if i + 1 < PAGES else ""
        site.routes["/" if i == 0 else f"/p{i}"] = Reply(200, link.encode(), HTML)
    return site


def wait_until(check: object, what: str, deadline_s: float = 120.0) -> None:
    """Wait for ``check`` to hold; a bound, not a measure (under load the crawl's start,
    a Python process importing polite, took more than 30 s)."""
    end = time.monotonic() + deadline_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < end, what
        time.sleep(0.02)


class Outage(NamedTuple):
    """How a crawl through a store's outage ended (:func:`crawl_through_an_outage`)."""

    returncode: int
    out: str
    err: str
    killed_at: int  # requests the site had when the store was found dead
    took_s: float  # from the store's start again to the crawl's end


def crawl_through_an_outage(tmp_path: Path, site: Site, store: str, server: Popen[bytes],
                            data: Path, port: int, timeout_s: float) -> Outage:
    """``polite crawl`` of ``site`` (served) on the Redis ``store`` whose ``server`` one of
    the site's routes kills: once it is dead, the crawl must still be waiting 3 s later;
    then Redis is started again on the same files (``data``) and ``port``, and the crawl's
    end is waited for (``timeout_s`` at most) and returned. Every process is ended
    whatever happens."""
    crawl = subprocess.Popen(
        command_line("crawl", site.origin + "/", "--out",
                     str(tmp_path / "out"), "--store", store, "--worker", "w1", "--allow-private",
                     "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: server.poll() is not None, "the crawl did not get going")
        killed_at = len(site.requests)
        time.sleep(3)
        assert crawl.poll() is None, crawl.communicate()[1][-3000:]  # it waits
        server = start_redis(data, port, appendonly=True)
        back = time.monotonic()
        out, err = crawl.communicate(timeout=timeout_s)
        took_s = time.monotonic() - back
    finally:
        crawl.kill()
        server.terminate()
        server.wait(10)
    return Outage(crawl.returncode, out, err, killed_at, took_s)


def test_a_crawl_waits_for_redis_and_goes_on_when_it_is_back(tmp_path: Path) -> None:
    data = tmp_path / "redis"
    data.mkdir()
    port = free_port()
    server = start_redis(data, port, appendonly=True)
    store = f"redis://127.0.0.1:{port}/0?prefix=outage{uuid.uuid4().hex[:8]}:"
    site = chain("127.0.6.51")
    # The store dies while a request is at the site: the request holds its host's lease,
    # which the worker cannot end until the store is back (then at once, not when it lapses)
    page = site.routes["/p9"]
    assert isinstance(page, Reply)
    dying = server

    def kill_the_store() -> Reply:
        dying.send_signal(signal.SIGKILL)
        dying.wait(10)
        return page

    site.routes["/p9"] = kill_the_store
    with serve(site):
        ended = crawl_through_an_outage(tmp_path, site, store, server, data, port, 120)
    err = ended.err
    assert ended.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    said = [line for line in err.splitlines() if "unreachable" in line]
    assert len(said) == 1 and said[0].startswith("polite crawl: the store"), err
    assert any("back" in line for line in err.splitlines())
    # Every page, and the URL the worker held at the kill without waiting out its lease
    # (600 s) or its host's (two minutes): all within a few seconds of the store coming back.
    paths = {path for path in site.requests if path != "/robots.txt"}
    assert paths == {"/", *(f"/p{i}" for i in range(1, PAGES))}
    assert ended.killed_at < len(site.requests)
    assert ended.took_s < 60
    summary = json.loads(ended.out)
    assert summary["frontier"]["queued"] == 0 and summary["frontier"]["fetched"] == PAGES


def test_connections_that_died_with_the_old_server_are_made_anew(tmp_path: Path) -> None:
    """Once Redis is back, the connections the pool held to the server that died are made
    anew as they are next used: no command fails on one (each had been an outage of its
    own, told after the crawl had said the store was back)."""
    data = tmp_path / "redis"
    data.mkdir()
    port = free_port()
    server = start_redis(data, port)

    async def run() -> list[BaseException | None]:
        store = RedisStore.from_url(f"redis://127.0.0.1:{port}/0?prefix=anew:")
        try:
            await asyncio.gather(*(store.check() for _ in range(8)))  # 8 pooled
            nonlocal server
            server.send_signal(signal.SIGKILL)
            await asyncio.to_thread(server.wait, 10)
            server = start_redis(data, port)
            await asyncio.sleep(HEALTH_CHECK_S * 1.5)  # idle: each is checked before use
            return await asyncio.gather(*(store.check() for _ in range(8)),
                                        return_exceptions=True)
        finally:
            await store.close()

    try:
        answers = asyncio.run(run())
    finally:
        server.terminate()
        server.wait(10)
    assert answers == [None] * 8, answers


def test_sigterm_while_waiting_for_redis_stops_the_crawl_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "redis"
    data.mkdir()
    port = free_port()
    server = start_redis(data, port)
    store = f"redis://127.0.0.1:{port}/0?prefix=gone{uuid.uuid4().hex[:8]}:"
    site = chain("127.0.6.52")
    with serve(site):
        crawl = subprocess.Popen(
            command_line("crawl", site.origin + "/", "--out", str(tmp_path / "out"), "--store",
                         store, "--worker", "w1", "--allow-private", "--json"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: len(site.requests) > 4, "the crawl did not get going")
            server.send_signal(signal.SIGKILL)
            server.wait(10)
            time.sleep(2)  # it waits, asking the store now and then
            assert crawl.poll() is None
            crawl.send_signal(signal.SIGTERM)
            out, err = crawl.communicate(timeout=30)
        finally:
            crawl.kill()
    assert crawl.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "unreachable" in err
    summary = json.loads(out)
    assert summary["stopped"] is True and summary["frontier"] is None  # the store's totals


def test_a_store_gone_for_longer_than_the_crawl_waits_ends_it_with_a_clear_error(
        tmp_path: Path) -> None:
    data = tmp_path / "redis"
    data.mkdir()
    port = free_port()
    server = start_redis(data, port)
    store = f"redis://127.0.0.1:{port}/0?prefix=gone{uuid.uuid4().hex[:8]}:"
    site = chain("127.0.6.53")
    told: list[tuple[bool, str]] = []

    async def run() -> None:
        settings = CrawlSettings(agent="PatientBot", store_patience_s=2.0)
        async with open_crawler(tmp_path / "out", settings, store=store, default_delay_s=0.0,
                                allow_private=True, worker="w1",
                                on_store=lambda up, detail: told.append((up, detail))
                                ) as crawler:
            await crawler.add_seeds([site.origin + "/"])
            task = asyncio.create_task(crawler.run(owns_store=False, poll_s=0.2))
            while len(site.requests) < 4:
                await asyncio.sleep(0.02)
            server.send_signal(signal.SIGKILL)
            await asyncio.to_thread(server.wait, 10)
            await task

    with serve(site), pytest.raises(StoreUnreachable, match="did not answer for"):
        try:
            asyncio.run(asyncio.wait_for(run(), 60))
        finally:
            server.kill()
    assert len(told) == 1 and told[0][0] is False and told[0][1]  # said once, with the error


def test_a_store_that_does_not_answer_at_the_start_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run(
        command_line("crawl", "http://127.0.6.54:9/", "--out", str(tmp_path), "--store",
                     f"redis://127.0.0.1:{free_port()}/0", "--allow-private"),
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("polite: --store redis://127.0.0.1:")
    assert "cannot reach it" in done.stderr


def test_a_sitemap_lease_redis_lost_is_ended_once_it_is_back(tmp_path: Path) -> None:
    """The store dies while a sitemap is at the site: its request holds the host's lease
    (three minutes), which the walker cannot end until the store is back; the crawl ends it
    then, and goes on with the host at once."""
    data = tmp_path / "redis"
    data.mkdir()
    port = free_port()
    server = start_redis(data, port, appendonly=True)
    store = f"redis://127.0.0.1:{port}/0?prefix=outage{uuid.uuid4().hex[:8]}:"
    site = chain("127.0.6.55")
    dying = server

    def kill_the_store() -> Reply:
        dying.send_signal(signal.SIGKILL)
        dying.wait(10)
        return Reply(200, b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                     b"<url><loc>" + site.origin.encode() + b"/p5</loc></url></urlset>")

    site.routes["/sitemap.xml"] = kill_the_store
    with serve(site):
        # the origin is known once serving: robots.txt names the sitemap there
        site.routes["/robots.txt"] = Reply(
            200, f"User-agent: *\nCrawl-delay: 0.1\nSitemap: {site.origin}/sitemap.xml\n"
            .encode())
        ended = crawl_through_an_outage(tmp_path, site, store, server, data, port, 150)
    assert ended.returncode == 0, ended.err[-3000:]
    assert "Traceback" not in ended.err
    paths = {path for path in site.requests if path not in ("/robots.txt", "/sitemap.xml")}
    assert paths == {"/", *(f"/p{i}" for i in range(1, PAGES))}
    # not the sitemap's lease (three minutes) waited out: a bound, not a measure
    assert ended.took_s < 60, ended.took_s
    assert json.loads(ended.out)["frontier"]["fetched"] == PAGES

"""Origins that misbehave: the crawl goes on, and each URL gets its outcome and reason."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

from polite.crawl import CrawlSettings, open_crawler
from tests.commands import command_line
from tests.sites import Reply, Site, request_head, serve, tcp_origin

HTML = {"Content-Type": "text/html"}
ROBOTS_404 = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


def misbehaving(after_robots: Callable[[socket.socket, threading.Event], None]
                ) -> Callable[[socket.socket, threading.Event], None]:
    """A raw origin that answers robots.txt with a 404 and any other request badly."""

    def handle(conn: socket.socket, stop: threading.Event) -> None:
        with conn:
            try:
                while True:
                    head = request_head(conn, 5.0)
                    if head is None:
                        return
                    if head.startswith(b"GET /robots.txt "):
                        conn.sendall(ROBOTS_404)
                        continue
                    after_robots(conn, stop)
                    return
            except OSError:
                return

    return handle


def reset(conn: socket.socket, stop: threading.Event) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def stall(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait(10)


def garbage(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"\x16\x03\x01 this is no HTTP at all\r\n\r\n")


def records(out: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    return {row["url"]: row for row in rows}


def test_faults_are_reported_one_by_one_and_the_crawl_goes_on(tmp_path: Path) -> None:
    site = Site("127.0.4.1")
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))  # 64 MiB inflated, ~64 KiB on the wire
    site.routes.update({
        "/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"),
        "/": Reply(200, b"<html><body>"
                        b'<a href="/loop1">l</a><a href="/huge">h</a><a href="/bomb">b</a>'
                        b'<a href="/broken">x</a><a href="/odd">o</a><a href="/binary">y</a>'
                        b"</body></html>", HTML),
        "/loop1": Reply(302, b"", {"Location": "/loop2"}),
        "/loop2": Reply(302, b"", {"Location": "/loop1"}),
        "/huge": Reply(200, b"<p>" + b"x" * (3 * 1024 * 1024), HTML),
        "/bomb": Reply(200, bomb, {**HTML, "Content-Encoding": "gzip"}),
        # Unclosed tags, stray brackets, a NUL: still read the way a browser would.
        "/broken": Reply(200, b"<html><body><<<div><p><a href='/after-broken'>x<table><tr>"
                              b"<a href=/unquoted>\0</a", HTML),
        "/odd": Reply(200, "<a href='/caf\u00e9 au lait'>c</a><a href='javascript:void(0)'>j</a>"
                           "<a href='mailto:x@y'>m</a><a href='http://[::1'>v</a>"
                           "<a href='//127.0.4.1:99999/'>p</a><a href='/%zz%'>z</a>"
                           "<a href='  /spaced\t\n '>s</a>".encode("latin-1"),
                      {"Content-Type": "text/html; charset=iso-8859-1"}),
        "/binary": Reply(200, bytes(range(256)) * 10, {"Content-Type": "application/x-junk"}),
        "/after-broken": Reply(200, b"ok", HTML),
        "/unquoted": Reply(200, b"ok", HTML),
        "/caf%C3%A9%20au%20lait": Reply(200, b"ok", HTML),
        "/%25zz%25": Reply(200, b"ok", HTML),
        "/spaced": Reply(200, b"ok", HTML),
    })
    with ExitStack() as stack:
        stack.enter_context(serve(site))
        ports = {name: stack.enter_context(tcp_origin(host, misbehaving(handler)))
                 for name, host, handler in (("reset", "127.0.4.2", reset),
                                             ("stall", "127.0.4.3", stall),
                                             ("garbage", "127.0.4.4", garbage))}
        seeds = [site.origin + "/", f"http://127.0.4.2:{ports['reset']}/",
                 f"http://127.0.4.3:{ports['stall']}/", f"http://127.0.4.4:{ports['garbage']}/",
                 "http://127.0.4.5:9/"]  # nothing listens there

        async def run() -> None:
            settings = CrawlSettings(agent="FaultBot", max_body_bytes=1024 * 1024,
                                     fetch_deadline_s=2.0, concurrency=8,
                                     robots_attempts=1)
            async with open_crawler(tmp_path, settings, default_delay_s=0.0,
                                    allow_private=True) as crawler:
                await crawler.add_seeds(seeds)
                await crawler.run()

        asyncio.run(asyncio.wait_for(run(), 60))
    rows = records(tmp_path)
    origin = site.origin
    assert rows[f"http://127.0.4.2:{ports['reset']}/"]["outcome"] == "failed"
    stalled = rows[f"http://127.0.4.3:{ports['stall']}/"]
    assert stalled["outcome"] == "failed" and "longer than 2 s" in stalled["reason"]
    assert rows[f"http://127.0.4.4:{ports['garbage']}/"]["outcome"] == "failed"
    # Nobody listening: robots.txt is unreachable, so the site is disallowed for now.
    assert rows["http://127.0.4.5:9/"]["outcome"] == "skipped"
    assert "robots.txt" in rows["http://127.0.4.5:9/"]["reason"]
    assert rows[origin + "/loop2"]["location"] == origin + "/loop1"
    assert "already seen" in rows[origin + "/loop2"]["reason"]
    huge, bombed = rows[origin + "/huge"], rows[origin + "/bomb"]
    assert huge["truncated"] and huge["bytes"] == 1024 * 1024
    assert bombed["truncated"] and bombed["bytes"] == 1024 * 1024
    for path in ("/after-broken", "/unquoted", "/caf%C3%A9%20au%20lait", "/spaced", "/%25zz%25"):
        assert rows[origin + path]["outcome"] == "fetched", path
    assert rows[origin + "/binary"]["outcome"] == "fetched"
    assert not any(url.startswith(("javascript", "mailto")) for url in rows)
    assert all(row["outcome"] != "failed" or row.get("reason") for row in rows.values())


def test_polite_crawl_follows_no_redirect_to_an_internal_address(tmp_path: Path) -> None:
    """Two public sites (their addresses let through with --allow-network): one redirects
    robots.txt to an internal address, the other a page. polite crawl asks the internal
    address for nothing: the first site's robots.txt is unreachable (kept so, to be asked
    again later), the second's redirect is recorded and its target refused."""
    internal = Site("127.0.6.23", {"/latest/meta-data/": Reply(200, b"AKIASECRETKEY\n")})
    with serve(internal):
        target = f"{internal.origin}/latest/meta-data/"
        robots_away = Site("127.0.6.21", {"/robots.txt": Reply(301, b"", {"Location": target}),
                                          "/": Reply(200, b"home", HTML)})
        page_away = Site("127.0.6.22", {
            "/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"),
            "/": Reply(200, b'<a href="/away">a</a>', HTML),
            "/away": Reply(302, b"", {"Location": target})})
        with serve(robots_away), serve(page_away), subprocess.Popen(
                command_line("crawl", robots_away.origin + "/", page_away.origin + "/", "--out",
                             str(tmp_path), "--allow-network", "127.0.6.21", "--allow-network",
                             "127.0.6.22/32", "--default-delay-ms", "0", "--scope", "any",
                             "--json"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as crawl:
            try:
                # robots.txt is kept unreachable, so the crawl waits to ask again: it is
                # stopped once both sites are done with.
                stored, rows = None, {}
                deadline = time.monotonic() + 60
                while stored is None or target not in rows:
                    assert crawl.poll() is None, crawl.communicate()
                    assert time.monotonic() < deadline, (stored, rows)
                    time.sleep(0.05)
                    stored = robots_record(tmp_path, robots_away.origin)
                    rows = records(tmp_path) if (tmp_path / "pages.jsonl").exists() else {}
            finally:
                crawl.terminate()
                crawl.communicate(timeout=30)
    assert internal.requests == []
    assert robots_away.requests == ["/robots.txt"]
    assert stored[0] == "disallow" and f"redirected to {target}" in stored[1]
    assert rows[page_away.origin + "/away"]["location"] == target
    assert rows[target]["outcome"] == "skipped" and "private" in rows[target]["reason"]


def robots_record(folder: Path, origin: str) -> tuple[str, str] | None:
    """The crawl's stored robots.txt state of ``origin`` (kind, reason), once there is one."""
    try:
        with closing(sqlite3.connect(folder / "crawl.sqlite", timeout=5)) as db:
            row = db.execute("SELECT kind, reason FROM robots WHERE origin = ?",
                             (origin,)).fetchone()
    except sqlite3.OperationalError:  # the crawl has not made its tables yet
        return None
    return None if row is None else (str(row[0]), str(row[1]))

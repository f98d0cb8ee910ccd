"""``polite mcp`` on a shared store takes each host's lease with its slot, as the drop-ins and
the crawl's workers do, and ends it however the request ends: answered, answered 429, given
up on (a read timeout), or for tdmrep.json. Seen at the site: the store holds the host's
lease while each request is there, and none once the server is done."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from tests.mcp_server.mcp_client import stdio_session, text
from tests.sites import Reply, Site, serve

HTML = {"content-type": "text/html; charset=utf-8"}
PAGE = Reply(200, b"<html><body><article><p>" + b"Words of the page. " * 20
             + b"</p></article></body></html>", HTML)


def test_a_shared_store_holds_the_host_while_each_request_is_out(tmp_path: Path) -> None:
    path = tmp_path / "mcp.sqlite"
    site = Site("127.0.174.1")
    seen: list[tuple[str, bool]] = []

    def held() -> bool:
        with closing(sqlite3.connect(path, timeout=30)) as db:
            row = db.execute("SELECT lease_until FROM slots WHERE host = ?",
                             (site.host,)).fetchone()
        return row is not None and row[0] is not None

    def watched(path: str, first: Reply | None = None, then: Reply = PAGE) -> None:
        answers = iter([] if first is None else [first])

        def answer() -> Reply:
            seen.append((path, held()))
            return next(answers, then)

        site.routes[path] = answer

    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    watched("/.well-known/tdmrep.json", Reply(404, b"none"))
    watched("/page")
    watched("/slow", then=Reply(200, b"late", HTML, delay_s=8.0))
    watched("/after-slow")
    watched("/busy", Reply(429, b"slow down", {"Retry-After": "1"}))
    watched("/after-busy")
    options = ("--store", f"sqlite:///{path}", "--allow-private", "--default-delay-s", "0",
               "--read-timeout-s", "3", "--purpose", "train-ai", "--max-wait-s", "20")

    async def run() -> dict[str, tuple[bool, str]]:
        found = {}
        async with stdio_session(*options) as client:
            for name in ("page", "slow", "after-slow", "busy", "after-busy"):
                result = await client.call_tool("fetch", {"url": f"{site.origin}/{name}"})
                found[name] = (bool(result.is_error), text(result))
        return found

    with serve(site):
        found = asyncio.run(run())
    assert not found["page"][0] and "Words of the page." in found["page"][1]
    assert found["slow"][0], found["slow"]  # given up on: its lease ended at once
    assert not found["after-slow"][0], found["after-slow"]  # not a lease's minute later
    assert found["busy"][0] and "429" in found["busy"][1], found["busy"]
    assert not found["after-busy"][0], found["after-busy"]  # the pause, not the lease
    # each once: the silence of /slow is a timeout, not a dropped connection to ask again on
    assert [p for p, _ in seen] == [
        "/.well-known/tdmrep.json", "/page", "/slow", "/after-slow", "/busy", "/after-busy"]
    assert all(was for _, was in seen), seen
    assert not held()

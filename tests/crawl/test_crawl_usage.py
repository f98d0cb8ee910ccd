"""``--purpose train-ai`` against a loopback farm with each AI-usage mechanism: robots.txt
Content-Usage and Content-Signal lines, Content-Usage / tdm-reservation / X-Robots-Tag
headers, robots and TDMRep META tags, and a tdmrep.json. What is kept is measured from the
WARC and pages.jsonl against the truth each site was built with."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from polite.core.robots.lifecycle import RobotsState
from polite.crawl import CrawlSettings, open_crawler
from polite.errors import SettingError
from polite.fetch.politeness import Politeness
from tests.crawl.test_crawl_farm import HTML, crawl, page, records
from tests.sites import Reply, Site, serve

# path -> kept under --purpose train-ai, per site; every page is linked from "/".
TRUTH: dict[str, dict[str, bool]] = {
    # draft-ietf-aipref-attach-05's example file.
    "robots": {"/": False, "/plain": False, "/ai-ok/a": True},
    "signal": {"/": False, "/open/p": True},
    "headers": {"/": True, "/h-usage": False, "/h-tdm": False, "/h-noai": False,
                "/h-yes": True, "/h-bad": True, "/h-other-agent": True},
    # META names and values are read whatever their case
    "meta": {"/": True, "/m-noai": False, "/m-tdm": False, "/m-other-agent": True,
             "/m-noai-upper": False, "/m-tdm-upper": False},
    "tdmrep": {"/": True, "/reserved/r": False, "/free": True},
}
NEVER = "/never/x"  # disallowed by robots.txt: never fetched at all


def _site(host: str, robots: str, paths: dict[str, bool]) -> Site:
    site = Site(host)
    site.routes["/robots.txt"] = Reply(200, robots.encode())
    links = [p for p in paths if p != "/"]
    site.routes["/"] = page(*links)
    for path in links:
        site.routes[path] = page()
    return site


@pytest.fixture
def usage_farm() -> Iterator[dict[str, Site]]:
    sites = {
        "robots": _site("127.0.9.1", "User-Agent: *\nAllow: /\nDisallow: /never/\n"
                                     "Content-Usage: train-ai=n\n"
                                     "Content-Usage: /ai-ok/ train-ai=y\n", TRUTH["robots"]),
        "signal": _site("127.0.9.2", "User-agent: *\nContent-Signal: search=yes, ai-train=no\n"
                                     "Content-Signal: /open/ ai-train=yes\n", TRUTH["signal"]),
        "headers": _site("127.0.9.3", "User-agent: *\nAllow: /\n", TRUTH["headers"]),
        "meta": _site("127.0.9.4", "User-agent: *\nAllow: /\n", TRUTH["meta"]),
        "tdmrep": _site("127.0.9.5", "User-agent: *\nAllow: /\n", TRUTH["tdmrep"]),
    }
    sites["robots"].routes["/"] = page("/plain", "/ai-ok/a", NEVER)
    sites["robots"].routes[NEVER] = page()
    headers = sites["headers"].routes
    headers["/h-usage"] = Reply(200, b"<p>x</p>", {**HTML, "Content-Usage": "train-ai=n"})
    headers["/h-tdm"] = Reply(200, b"<p>x</p>", {**HTML, "tdm-reservation": "1"})
    headers["/h-noai"] = Reply(200, b"<p>x</p>", {**HTML, "X-Robots-Tag": "noai"})
    headers["/h-yes"] = Reply(200, b"<p>x</p>", {**HTML, "Content-Usage": "train-ai=y"})
    headers["/h-bad"] = Reply(200, b"<p>x</p>", {**HTML, "Content-Usage": "train-ai=n,"})
    headers["/h-other-agent"] = Reply(200, b"<p>x</p>", {**HTML, "X-Robots-Tag": "otherbot: noai"})
    meta = sites["meta"].routes
    meta["/m-noai"] = page(head='<meta name="robots" content="noai, noimageai">')
    meta["/m-tdm"] = page(head='<meta name="tdm-reservation" content="1">')
    meta["/m-other-agent"] = page(head='<meta name="otherbot" content="noai">')
    meta["/m-noai-upper"] = page(head='<META NAME="Robots" CONTENT="NoAI">')
    meta["/m-tdm-upper"] = page(head='<meta name="TDM-Reservation" content="1">')
    sites["tdmrep"].routes["/.well-known/tdmrep.json"] = Reply(
        200, b'[{"location": "/reserved/*", "tdm-reservation": 1,'
             b' "tdm-policy": "https://example.com/policy.json"}]',
        {"Content-Type": "application/json"})
    with ExitStack() as stack:
        for site in sites.values():
            stack.enter_context(serve(site))
        yield sites


def _warc(out: Path) -> tuple[set[str], dict[str, dict[str, Any]]]:
    """The URLs with a response record, and each metadata record's JSON by URL."""
    kept: set[str] = set()
    meta: dict[str, dict[str, Any]] = {}
    for path in (out / "warc").glob("*.warc.gz"):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                url = record.rec_headers.get_header("WARC-Target-URI")
                if record.rec_type == "response":
                    kept.add(url)
                elif record.rec_type == "metadata":
                    meta[url] = json.loads(record.content_stream().read())
    return kept, meta


def test_train_ai_crawl_keeps_exactly_what_the_truth_allows(
        usage_farm: dict[str, Site], tmp_path: Path) -> None:
    crawl(tmp_path, [s.origin + "/" for s in usage_farm.values()], purpose="train-ai",
          concurrency=8)
    kept, meta = _warc(tmp_path)
    rows = {r["url"]: r for r in records(tmp_path)}
    expected_kept = {usage_farm[name].origin + path
                     for name, paths in TRUTH.items() for path, keep in paths.items() if keep}
    refused = {usage_farm[name].origin + path
               for name, paths in TRUTH.items() for path, keep in paths.items() if not keep}
    assert kept == expected_kept
    for url in refused:  # fetched (access allowed), not kept, with the reason
        assert rows[url]["outcome"] == "fetched", url
        assert rows[url]["usage_refused"] == "train-ai", url
        assert "usage: train-ai=disallow by " in rows[url]["guidance"], url
    for url in expected_kept:
        assert rows[url]["outcome"] == "fetched" and "usage_refused" not in rows[url], url
    # Access comes first: the disallowed page is not even asked for.
    assert NEVER not in {p for _, p in usage_farm["robots"].arrivals}
    # A refused page's links are still followed (like noindex): /ai-ok/a came from "/".
    robots = usage_farm["robots"].origin
    assert rows[robots + "/"]["guidance"].startswith("usage: train-ai=disallow by robots.txt "
                                                     "Content-Usage line 4")
    # Each mechanism named as the source, in pages.jsonl and the WARC metadata.
    def mechanism(site: str, path: str) -> set[str]:
        row = rows[usage_farm[site].origin + path]
        return {s["mechanism"] for s in row["usage"]["sources"]}
    assert mechanism("headers", "/h-usage") == {"Content-Usage header"}
    assert mechanism("headers", "/h-tdm") == {"tdm-reservation header"}
    assert mechanism("headers", "/h-noai") == {"X-Robots-Tag"}
    assert mechanism("meta", "/m-noai") == {"robots META"}
    assert mechanism("meta", "/m-tdm") == {"tdm-reservation META"}
    assert mechanism("tdmrep", "/reserved/r") == {"tdmrep.json"}
    assert mechanism("signal", "/") == {"robots.txt Content-Signal"}
    bad = rows[usage_farm["headers"].origin + "/h-bad"]["usage"]
    assert "malformed" in bad["issues"][0]
    ok = meta[robots + "/ai-ok/a"]["usage"]
    assert ok["prefs"] == {"train-ai": "allow"}
    assert ok["sources"][0]["vocabulary"] == "draft-ietf-aipref-vocab-07"
    # A page no source speaks of carries no usage field and no metadata record.
    assert usage_farm["tdmrep"].origin + "/free" not in meta
    assert "usage" not in rows[usage_farm["tdmrep"].origin + "/free"]
    assert usage_farm["tdmrep"].requests.count("/.well-known/tdmrep.json") == 1


def test_without_a_purpose_everything_allowed_is_kept_and_preferences_recorded(
        usage_farm: dict[str, Site], tmp_path: Path) -> None:
    crawl(tmp_path, [usage_farm["robots"].origin + "/", usage_farm["headers"].origin + "/"],
          concurrency=4)
    kept, _ = _warc(tmp_path)
    want = {usage_farm[name].origin + path for name in ("robots", "headers")
            for path in TRUTH[name]}
    assert kept == want
    rows = {r["url"]: r for r in records(tmp_path)}
    assert rows[usage_farm["robots"].origin + "/plain"]["usage"]["prefs"] == {
        "train-ai": "disallow"}
    assert not [r for r in rows.values() if "usage_refused" in r]
    assert "/.well-known/tdmrep.json" not in usage_farm["headers"].requests


def test_an_unknown_purpose_is_refused_by_name() -> None:
    with pytest.raises(SettingError, match="purpose="):
        CrawlSettings(purpose="sell-it")


def test_the_summary_counts_pages_kept_and_refused_by_purpose(
        usage_farm: dict[str, Site], tmp_path: Path) -> None:
    from tests.commands import run

    origin = usage_farm["robots"].origin + "/"
    result = run("crawl", origin, "--out", str(tmp_path / "c"), "--allow-private",
                 "--default-delay-s", "0", "--purpose", "train-ai")
    assert result.returncode == 0, result.stderr
    # "/" and "/plain" fetched and refused by Content-Usage, "/ai-ok/a" kept
    assert result.stdout.startswith(
        "polite crawl: 3 pages fetched (1 kept: 2 refused for train-ai by the sites' "
        "AI-usage preferences) from 1 host, "), result.stdout
    again = run("crawl", origin, "--out", str(tmp_path / "d"), "--allow-private",
                "--default-delay-s", "0", "--purpose", "train-ai", "--json")
    summary = json.loads(again.stdout)
    assert (summary["fetched"], summary["kept"], summary["refusedByPurpose"]) == (3, 1, 2)
    # the URLs this run added (the never-fetched /never/x too), beside what the frontier
    # still holds: no count called "queued" that the frontier contradicts
    assert summary["added"] == 4 and summary["frontier"]["queued"] == 0
    assert "queued" not in {k for k in summary if k != "frontier"}


def test_a_page_reads_the_robots_state_its_check_was_made_with(
        usage_farm: dict[str, Site], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page's AI-usage preferences come from the robots.txt state its slot was granted
    under, not from a second lookup of the state after its answer (one a page before)."""
    asked: list[str] = []
    looked_up = Politeness.robots_state

    async def counted(self: Politeness, url: str) -> RobotsState:
        asked.append(url)
        return await looked_up(self, url)

    monkeypatch.setattr(Politeness, "robots_state", counted)
    site = usage_farm["robots"]
    crawl(tmp_path, [site.origin + "/"])
    rows = {r["url"]: r for r in records(tmp_path)}
    fetched = [url for url, row in rows.items() if row["outcome"] == "fetched"
               and row.get("kind") is None]
    assert sorted(fetched) == sorted(site.origin + p for p in TRUTH["robots"])
    # the host's set-up reads it; no page does again
    assert asked == [site.origin + "/"]
    # ... and each page's preferences still name its robots.txt line
    assert "train-ai=n" in json.dumps(rows[site.origin + "/plain"]["usage"])
    assert "train-ai=y" in json.dumps(rows[site.origin + "/ai-ok/a"]["usage"])


def test_tdmrep_files_past_their_budget_are_read_again_never_left_out(tmp_path: Path) -> None:
    """The compiled tdmrep.json files a crawl keeps are bounded in bytes (a hostile site's
    file holds megabytes compiled, and a crawl may meet thousands): here a budget that keeps
    one file, over four sites whose pages interleave. A page is judged with its host's file
    as read when the page was decided on, even when the budget dropped it meanwhile, and a
    host whose file was dropped has it read again."""
    paths = {"/": True, "/reserved/r": False, "/free": True, "/reserved/s": False}
    sites = [_site(f"127.0.9.{40 + i}", "User-agent: *\nAllow: /\n", paths) for i in range(4)]
    for site in sites:
        site.routes["/.well-known/tdmrep.json"] = Reply(
            200, b'[{"location": "/reserved/*", "tdm-reservation": 1}]',
            {"Content-Type": "application/json"})
    kept_files: list[int] = []

    async def run() -> None:
        settings = CrawlSettings(agent="FarmBot", purpose="train-ai", concurrency=8,
                                 tdmrep_memory_bytes=1)
        async with open_crawler(tmp_path, settings, default_delay_s=0.0,
                                allow_private=True) as crawler:
            await crawler.add_seeds([site.origin + "/" for site in sites])
            await crawler.run()
            kept_files.append(len(crawler._tdmrep))

    with ExitStack() as stack:
        for site in sites:
            stack.enter_context(serve(site))
        asyncio.run(run())
    kept, _ = _warc(tmp_path)
    rows = {r["url"]: r for r in records(tmp_path)}
    assert kept_files == [1]  # the budget held one file at a time
    for site in sites:
        asked = [p for _, p in site.arrivals]
        assert sorted(p for p in asked if p in paths) == sorted(paths)  # each page once
        assert asked.count("/.well-known/tdmrep.json") >= 1
        for path, keep in paths.items():
            row = rows[site.origin + path]
            assert (site.origin + path in kept) is keep, (site.host, path)
            if not keep:
                assert {s["mechanism"] for s in row["usage"]["sources"]} == {"tdmrep.json"}

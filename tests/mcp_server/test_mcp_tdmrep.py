"""``polite mcp``'s tdmrep.json files, as its fetch tool reads them for ``train-ai``: each
site's compiled once, and kept within a byte budget (least recently used first out), with
the probe's hostile file of 9,571 wildcard locations (468 KB, 2 MB compiled) served by
real loopback sites."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from types import FrameType
from typing import TYPE_CHECKING

from polite.core.robots.usage import TdmRep
from tests.sites import Reply, Site, serve

if TYPE_CHECKING:
    from polite.mcp._fetch import FetchSettings, Given, NotGiven

# polite.mcp is imported by the tests that use it, not at collection: the MCP SDK's import
# (most of a second of CPU) would otherwise be paid by every process collecting the suite.

HTML = {"content-type": "text/html; charset=utf-8"}
PAGE = Reply(200, b"<html><head><title>A page</title></head><body><p>Words.</p></body></html>",
             HTML)
# No location matches /page (each needs an x and a y), none of them /x7y's but the 8th.
HOSTILE = json.dumps([{"location": f"/*x{n}*y", "tdm-reservation": 1}
                      for n in range(9_571)]).encode()


def _site(host: str) -> Site:
    return Site(host, routes={"/robots.txt": Reply(404), "/page": PAGE, "/x7y": PAGE,
                              "/.well-known/tdmrep.json": Reply(
                                  200, HOSTILE, {"content-type": "application/json"})})


def _fetched(settings: FetchSettings, urls: list[str]) -> tuple[list[Given | NotGiven], int]:
    """What fetching ``urls`` one after another gave, and how many tdmrep.json files were
    compiled meanwhile."""
    from polite.mcp._server import ServerOptions, open_fetch

    options = ServerOptions(allow_private=True, default_delay_s=0.0)
    compiled = 0
    made = TdmRep.__init__.__code__

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal compiled
        if event == "call" and frame.f_code is made:
            compiled += 1

    async def run() -> list[Given | NotGiven]:
        async with open_fetch(settings, options) as fetcher:
            return [await fetcher.fetch(url) for url in urls]

    sys.setprofile(profile)
    try:
        got = asyncio.run(run())
    finally:
        sys.setprofile(None)
    return got, compiled


def test_a_sites_tdmrep_json_is_compiled_once() -> None:
    """Before, each fetch compiled the site's tdmrep.json again from its body (a tenth of
    a second for this one)."""
    from polite.mcp._fetch import FetchSettings, Given, NotGiven

    settings = FetchSettings(purpose="train-ai", max_wait_s=5.0)
    site = _site("127.0.193.41")
    with serve(site):
        got, compiled = _fetched(settings, [f"{site.origin}/page"] * 3 + [f"{site.origin}/x7y"])
    assert [type(g) for g in got] == [Given, Given, Given, NotGiven], got
    refused = got[3]
    assert isinstance(refused, NotGiven) and "entry 8" in refused.why, refused
    assert compiled == 1
    assert site.requests.count("/.well-known/tdmrep.json") == 1


def test_compiled_tdmrep_files_are_kept_within_their_byte_budget() -> None:
    """Three sites' hostile files compiled are 6 MB; with a budget of 3 MB, one at a time is
    kept: the site asked again after another has its file fetched and compiled anew
    (before, every site's body was kept, 10,000 sites at most, whatever their bytes)."""
    from polite.mcp._fetch import FetchSettings, Given

    sites = [_site(f"127.0.193.{n}") for n in (42, 43, 44)]
    small = FetchSettings(purpose="train-ai", max_wait_s=5.0,
                          tdmrep_memory_bytes=3 * 1024 * 1024)
    with serve(sites[0]), serve(sites[1]), serve(sites[2]):
        order = [0, 0, 1, 2, 2, 0]
        got, compiled = _fetched(small, [f"{sites[n].origin}/page" for n in order])
    assert all(isinstance(g, Given) for g in got), got
    assert compiled == 4
    assert [s.requests.count("/.well-known/tdmrep.json") for s in sites] == [2, 1, 1]


# polite mcp on stdio, its input closed at once: it starts, serves nothing and ends; what
# the collector tracks then, and what it was told to leave, written at exit.
COLLECTOR = """
import atexit, gc, sys
atexit.register(lambda: print(gc.get_freeze_count(), len(gc.get_objects()), file=sys.stderr))
from polite.cli.main import main
sys.exit(main(["mcp", "--store", "memory://"]))
"""


def test_start_up_objects_are_out_of_the_collectors_reach() -> None:
    """A full pass of the garbage collector walks every object it tracks, on the event
    loop, when an allocation sets it off: reading the hostile tdmrep.json set one off, and
    the server's 90,000 start-up objects (the MCP SDK's models, modules, functions) held
    the loop some 60 ms of CPU. They are frozen before the server serves, as
    ``polite serve``'s are."""
    done = subprocess.run([sys.executable, "-c", COLLECTOR], input="", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    frozen, tracked = map(int, done.stderr.split()[-2:])
    assert frozen > 20_000, done.stderr
    assert tracked < frozen // 5, done.stderr

"""``polite mcp`` beside its peer: the reference fetch server from the package index run on
the same loopback sites, its differences recorded (the MCP Inspector, an independent client,
is in test_mcp_inspector.py: a module of its own, run beside this one)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.mcp_server.mcp_client import stdio_session, text
from tests.sites import Reply, Site, serve

if TYPE_CHECKING:
    from mcp import Client

pytestmark = pytest.mark.slow

REFERENCE = "mcp-server-fetch==2026.10.24"  # the version the comparison was written on
PAGE = Reply(200, b"<html><body><article><h1>Hello</h1><p>" + b"Readable words. " * 30
             + b"</p></article></body></html>", {"content-type": "text/html"})


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The reference server's command, installed from the package index in a venv of its
    own (its dependencies are not polite's)."""
    venv = tmp_path_factory.mktemp("reference") / "venv"
    # The tests' own pip installs into a venv made without one, and compiles nothing ahead
    # (the server is started once): seconds of work a run saved, the same server installed.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    python = str(venv / "bin" / "python")
    # uv where `make test` installed it (a third of pip's time), the tests' own pip elsewhere
    uv = Path(sys.executable).parent / "uv"
    command = ([str(uv), "pip", "install", "--quiet", "--python", python, REFERENCE]
               if uv.exists() else
               [sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
                "--disable-pip-version-check", "--no-compile", REFERENCE])
    installed = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env,
                               check=False)
    if installed.returncode != 0:
        last = (installed.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"{REFERENCE} cannot be installed from the package index: {last}")
    yield venv / "bin" / "mcp-server-fetch"


def _sites(base: int) -> dict[str, Site]:
    """One site per case, on 127.0.139.BASE+n."""
    return {
        "robots.txt answers 503": Site(f"127.0.139.{base + 1}", routes={
            "/robots.txt": Reply(503, b"busy"), "/page": PAGE}),
        "robots.txt disallows the page": Site(f"127.0.139.{base + 2}", routes={
            "/robots.txt": Reply(200, b"User-agent: *\nDisallow: /page\n"), "/page": PAGE}),
        "Content-Signal: ai-input=no": Site(f"127.0.139.{base + 3}", routes={
            "/robots.txt": Reply(200, b"User-agent: *\nContent-Signal: ai-input=no\n"),
            "/page": PAGE}),
        "Crawl-delay: 3, two pages in a row": Site(f"127.0.139.{base + 4}", routes={
            "/robots.txt": Reply(200, b"User-agent: *\nCrawl-delay: 3\n"), "/page": PAGE,
            "/next": PAGE}),
    }


async def _run(client: Client, sites: dict[str, Site]) -> dict[str, str]:
    """Each case's outcome as the site saw it and the agent was told."""
    found = {}
    for case, site in sites.items():
        results = [await client.call_tool("fetch", {"url": site.origin + "/page"})]
        if "Crawl-delay" in case:
            results.append(await client.call_tool("fetch", {"url": site.origin + "/next"}))
        pages = [at for at, path in site.arrivals if path in ("/page", "/next")]
        outcome = "fetched" if not results[0].is_error else "refused"
        if len(pages) == 2:
            gap = pages[1] - pages[0]
            outcome += f", Crawl-delay {'kept' if gap >= 3 else 'not kept'} ({gap:.2f} s apart)"
        assert all(text(r) for r in results)  # each call was answered
        found[case] = outcome
    return found


def test_the_reference_server_beside_polite_mcp(reference: Path, tmp_path: Path) -> None:
    ours, theirs = _sites(0), _sites(10)
    with ExitStack() as stack:
        for site in (*ours.values(), *theirs.values()):
            stack.enter_context(serve(site))

        async def polite() -> dict[str, str]:
            async with stdio_session("--store", "memory://", "--allow-private") as client:
                return await _run(client, ours)

        async def peer() -> dict[str, str]:
            from mcp import Client, StdioServerParameters

            # With node on its PATH, readabilipy runs an `npm install` of its script's
            # packages for each page until one succeeds: a reach off loopback, 1.5 s of CPU
            # a page, and where the registry cannot be reached the page then goes to
            # readabilipy's own Python. Without node, that Python extracts each page at
            # once. The cases compared (fetched or refused, the gap between two pages) do
            # not depend on how a page's text is extracted.
            params = StdioServerParameters(command=str(reference),
                                           args=["--allow-private-ips"],
                                           env={"PATH": str(reference.parent)})
            async with Client(params, cache=None, read_timeout_seconds=120) as client:
                return await _run(client, theirs)

        async def both() -> tuple[dict[str, str], dict[str, str]]:
            # side by side: each server's start and waits overlap the other's, and each
            # has sites of its own, so neither changes what the other is measured on
            return await asyncio.gather(polite(), peer())

        mine, peers = asyncio.run(both())
    rows = [{"case": case, "polite mcp": mine[case], REFERENCE: peers[case],
             "differ": mine[case].split(" (")[0] != peers[case].split(" (")[0]}
            for case in mine]
    (tmp_path / "differences.json").write_text(json.dumps(rows, indent=1), "utf-8")
    print(json.dumps(rows, indent=1))
    assert mine["robots.txt answers 503"] == "refused"
    assert mine["robots.txt disallows the page"] == "refused"
    assert mine["Content-Signal: ai-input=no"] == "refused"
    assert mine["Crawl-delay: 3, two pages in a row"].startswith("fetched, Crawl-delay kept")
    assert peers["robots.txt disallows the page"] == "refused"  # where the two agree
    assert len(rows) == 4

"""``polite mcp`` driven by the MCP Inspector's command-line mode from npm, an independent
client: it lists the tools and calls ``fetch`` (a module of its own, so that it runs beside
the reference server's comparison in test_mcp_peers.py rather than after it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.commands import command_line
from tests.mcp_server.mcp_client import LOOPBACK
from tests.mcp_server.test_mcp_peers import PAGE
from tests.sites import Reply, Site, serve

pytestmark = pytest.mark.slow

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
# What npm answers when it cannot be reached
_UNREACHABLE = ("Failed to establish a new connection", "Network is unreachable",
                "Temporary failure in name resolution", "ENOTFOUND", "EAI_AGAIN",
                "ETIMEDOUT", "ECONNREFUSED", "E404", "network")


def test_the_inspector_cli_lists_the_tools_and_fetches() -> None:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx (npm) is not installed: the MCP Inspector cannot be run")
    site = Site("127.0.139.31", routes={"/robots.txt": Reply(404), "/page": PAGE})
    server = command_line("mcp", *LOOPBACK)

    def inspect(*method: str) -> object:
        # the Inspector waits 15 s for the server by default: a loaded machine took longer
        # to start it, so two minutes, as a guard against a server that never answers
        done = subprocess.run([npx, "-y", INSPECTOR, "--cli", "--connect-timeout", "120000",
                               *server, *method],
                              capture_output=True, text=True, timeout=600, check=False,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0 and any(sign in done.stderr for sign in _UNREACHABLE):
            pytest.skip(f"{INSPECTOR} cannot be had from npm: "
                        f"{done.stderr.strip().splitlines()[-1]}")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    # The two calls are two Inspector runs, each with a server of its own: side by side,
    # their starts overlap (the listing does not touch the site).
    with serve(site), ThreadPoolExecutor(2) as pool:
        listing = pool.submit(inspect, "--method", "tools/list")
        calling = pool.submit(inspect, "--method", "tools/call", "--tool-name", "fetch",
                              "--tool-arg", f"url={site.origin}/page")
        listed, called = listing.result(), calling.result()
    assert isinstance(listed, dict)
    assert [tool["name"] for tool in listed["tools"]] == ["fetch", "may_fetch"]
    assert isinstance(called, dict) and not called.get("isError")
    assert "Readable words." in called["content"][0]["text"]
    assert site.requests == ["/robots.txt", "/page"]

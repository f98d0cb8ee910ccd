"""``polite mcp``'s settings are declared once (polite.config.MCP): the fetcher's and the
server's defaults are the declared ones, and a value out of bounds is refused by its flag."""

from __future__ import annotations

import dataclasses
import subprocess

from polite.config import MCP
from tests.commands import command_line


def test_the_fetchers_defaults_are_the_declared_ones() -> None:
    from polite.mcp._fetch import FetchSettings  # the MCP SDK when used, not at collection
    from polite.mcp._server import ServerOptions

    fetch = {f.name for f in dataclasses.fields(FetchSettings)} - {
        "max_redirects", "tdmrep_memory_bytes"}  # bounds of the code, not options
    server = {f.name for f in dataclasses.fields(ServerOptions)} - {
        "store", "allow_networks", "user_agent", "signer"}  # worked out by the command
    for name in fetch:
        assert getattr(FetchSettings(), name) == MCP[name].default, name
    for name in server:
        assert getattr(ServerOptions(), name) == MCP[name].default, name


def test_a_bad_value_is_refused_by_its_flag() -> None:
    done = subprocess.run(command_line("mcp", "--max-wait-s", "nan"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--max-wait-s" in done.stderr
    assert "Traceback" not in done.stderr

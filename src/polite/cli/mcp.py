"""``polite mcp``: the options; the server is :mod:`polite.mcp`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from polite.cli.common import add_command, resolve
from polite.config import FLAGS, MCP
from polite.errors import ConfigError

__all__ = ["add_mcp_command", "default_store"]


def add_mcp_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_command(
        commands, MCP, _mcp,
        help="run an MCP server whose fetch tool is polite: robots.txt, delays shared "
             "through the store, AI-usage preferences",
        description="A Model Context Protocol server for AI agents, on standard input and "
                    "output (what a desktop agent launches) or, with --http, streamable "
                    "HTTP. Its fetch tool obeys each site's robots.txt, Crawl-delay, "
                    "Request-rate and Visit-time (kept across every process sharing "
                    "--store) and the AI-usage preferences stated for --purpose, and says "
                    "why in every answer. Needs polite-web[mcp].")


def default_store() -> str:
    """mcp.sqlite in $XDG_DATA_HOME/polite, else ~/.local/share/polite (the XDG Base
    Directory specification's data folder); the folder is made."""
    data = os.environ.get("XDG_DATA_HOME") or os.path.join("~", ".local", "share")
    folder = Path(data).expanduser() / "polite"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot make {folder} for the store: {exc.strerror or exc}; "
                          "give --store") from exc
    return f"sqlite:///{folder / 'mcp.sqlite'}"


def _require_extra() -> None:
    from importlib.util import find_spec

    for name in ("mcp", "readability", "markdownify"):
        if find_spec(name) is None:
            raise ConfigError(f"polite mcp needs {name}: pip install 'polite-web[mcp]'")


def _address(text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not sep or not host or not 0 <= port <= 65_535:
        raise ConfigError(f"--http {text!r}: expected HOST:PORT (127.0.0.1:8765; port 0: "
                          "any free port)")
    return host, port


def _mcp(args: argparse.Namespace, out: TextIO) -> int:
    resolve(MCP, args)
    _require_extra()
    address = _address(args.http) if args.http else None
    from polite._listen import is_loopback  # the rule polite serve applies to its own --host

    if address is not None and not is_loopback(address[0]) and not args.admin_token:
        raise ConfigError(f"--http {args.http}: {address[0]} is not a loopback address: give "
                          "--admin-token so that the server is not open to the network")
    from polite.fetch.robots import networks
    from polite.identity.options import signer_from
    from polite.storage import read_store_url

    allowed = networks(args.allow_network)
    signer = signer_from(args.sign_with, args.signature_agent, knobs=FLAGS)
    store = args.store or default_store()
    read_store_url(store, FLAGS.store)  # a bad URL said now, not at the first fetch

    import asyncio

    from polite import __version__
    from polite.mcp._fetch import FetchSettings
    from polite.mcp._server import (
        ServerOptions,
        create_server,
        open_fetch,
        serve_http,
        serve_stdio,
        user_agent,
    )

    settings = FetchSettings(agent=args.agent, purpose=args.purpose,
                             max_wait_s=args.max_wait_s, max_body_bytes=args.max_body_bytes,
                             fetch_deadline_s=args.fetch_deadline_s)
    options = ServerOptions(store=store, allow_private=args.allow_private,
                            allow_networks=allowed, default_delay_s=args.default_delay_s,
                            max_crawl_delay_s=args.max_crawl_delay_s,
                            on_401_403=args.on_401_403,
                            connect_timeout_s=args.connect_timeout_s,
                            read_timeout_s=args.read_timeout_s,
                            user_agent=args.user_agent or user_agent(args.agent, __version__),
                            signer=signer)

    # readability-lxml tells of each page it found hard to read: not the agent's concern
    import logging

    logging.getLogger("readability").setLevel(logging.WARNING)

    from polite._loop import freeze_start_up

    async def run() -> None:
        async with open_fetch(settings, options) as fetcher:
            server = create_server(fetcher, version=__version__)
            # start-up's 90,000 objects (the MCP SDK's models among them) out of the
            # collector's reach: a full pass over them held the loop 60 ms whenever a
            # large tdmrep.json's reading set one off
            freeze_start_up()
            if address is None:
                await serve_stdio(server)
            else:
                await serve_http(server, *address, token=args.admin_token,
                                 client_read_s=args.client_read_s)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        if address is None:
            raise
        raise ConfigError(f"cannot listen on {args.http}: {exc.strerror or exc}") from exc
    return 0

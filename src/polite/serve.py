"""Wiring for ``polite serve``: reads the options, builds the store, fetcher, driver and app,
and runs them under uvicorn. Nothing below this reads options or the environment."""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path
from typing import TextIO

import uvicorn

from polite.api import create_app
from polite.clock import WallClock
from polite.errors import ConfigError
from polite.fetch.politeness import Politeness
from polite.fetch.robots import RobotsFetcher, create_client
from polite.storage import MemoryStore, SQLiteStore, Store

__all__ = ["open_store", "run_server"]


def open_store(url: str, clock: WallClock) -> Store:
    """A store from its URL: ``sqlite:///PATH`` or ``memory://``."""
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if path.parent and not path.parent.exists():
            raise ConfigError(f"--store {url}: the folder {path.parent} does not exist")
        return SQLiteStore(path, clock)
    if url in ("memory://", "memory"):
        return MemoryStore(clock)
    raise ConfigError(f"--store {url!r}: expected sqlite:///PATH or memory://")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run_server(args: argparse.Namespace, out: TextIO) -> int:
    if not _is_loopback(args.host) and not args.admin_token:
        raise ConfigError(f"--host {args.host} is not loopback: give --admin-token so that "
                          "writes are not open to the network")
    if args.default_delay_ms < 0:
        raise ConfigError("--default-delay-ms must be 0 or more")
    clock = WallClock()
    store = open_store(args.store, clock)
    client = create_client()
    fetcher = RobotsFetcher(client, store, clock, agent=args.agent,
                            allow_private=args.allow_private)
    politeness = Politeness(fetcher, store, clock, agent=args.agent,
                            default_delay_s=args.default_delay_ms / 1000,
                            max_crawl_delay_s=args.max_crawl_delay_s,
                            allow_private=args.allow_private)

    async def shutdown() -> None:
        await client.aclose()
        await store.close()

    app = create_app(politeness, store, admin_token=args.admin_token, on_shutdown=shutdown)
    out.write(f"polite serve: listening on http://{args.host}:{args.port} "
              f"(store {args.store}, agent {args.agent!r})\n")
    out.flush()
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                            lifespan="on", timeout_keep_alive=30)
    uvicorn.Server(config).run()
    return 0

"""``polite frontier serve``: the options; the service is :mod:`polite.frontier`."""

from __future__ import annotations

import argparse
from typing import TextIO

from polite.cli.common import add_command, add_group, resolve
from polite.config import FLAGS, FRONTIER_SERVE
from polite.errors import ConfigError

__all__ = ["add_frontier_commands"]


def add_frontier_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]
                          ) -> None:
    _, frontier_commands = add_group(
        commands, "frontier",
        help="the URL Frontier gRPC service, with polite's politeness inside",
        description="A frontier for crawlers in other languages (StormCrawler first) through "
                    "the URL Frontier API of crawler-commons.")
    add_command(
        frontier_commands, FRONTIER_SERVE, _serve,
        help="serve the URL Frontier API (gRPC) on a SQLite frontier",
        description="Serve the gRPC service urlfrontier.URLFrontier. GetURLs hands out a URL "
                    "only when robots.txt allows it for --agent and the host's delays "
                    "(Crawl-delay, Request-rate, Visit-time, --default-delay-s, the queue's "
                    "SetDelay) allow it; a URL robots.txt disallows is never handed out and "
                    "its metadata says why (GetURLStatus, ListURLs). Needs "
                    "polite-web[frontier].")


def _require_extra() -> None:
    from importlib.util import find_spec

    for name in ("grpc", "google"):
        if find_spec(name) is None:
            raise ConfigError(f"polite frontier needs {name}: "
                              "pip install 'polite-web[frontier]'")


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    resolve(FRONTIER_SERVE, args)
    _require_extra()
    from polite.storage import read_store_url

    where = read_store_url(args.store, FLAGS.store)
    if where.kind != "sqlite" or where.path is None:
        raise ConfigError(f"--store {args.store}: polite frontier serve keeps its frontier "
                          "in SQLite (sqlite:///PATH)")
    from polite.fetch.robots import networks

    allowed = networks(args.allow_network)

    import asyncio

    from polite.frontier._server import FrontierService, PolitenessOptions, open_politeness, serve
    from polite.frontier._store import URLStore

    store = URLStore(str(where.path), default_delay_s=args.default_delay_s,
                     spacing_from_return=args.robots == "on")

    def ready(port: int) -> None:
        print(f"polite frontier: listening on {args.host}:{port}", file=out, flush=True)

    async def run() -> None:
        options = PolitenessOptions(
            store=args.store, agent=args.agent, user_agent=args.user_agent or args.agent,
            default_delay_s=args.default_delay_s, max_crawl_delay_s=args.max_crawl_delay_s,
            on_401_403=args.on_401_403, allow_private=args.allow_private,
            allow_networks=allowed, connect_timeout_s=args.connect_timeout_s,
            read_timeout_s=args.read_timeout_s)
        async with open_politeness(options if args.robots == "on" else None) as politeness:
            service = FrontierService(store, politeness=politeness,
                                      node=f"{args.host}:{args.port}")
            await serve(service, args.host, args.port, ready)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: "
                          f"{exc.strerror or exc}") from exc
    finally:
        store.close()
    return 0

"""``polite frontier serve``: the options; the service is :mod:`polite.frontier`."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, TextIO

from polite.cli.common import add_command, add_group, resolve
from polite.config import FLAGS, FRONTIER_SERVE, FRONTIER_STATUS
from polite.errors import ConfigError

# A node's name in the store (ListNodes): printable, no space, bounded.
_NODE_NAME = re.compile(r"[!-~]{1,200}")

if TYPE_CHECKING:
    from polite.fetch.robots import Network
    from polite.frontier._store import URLs

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
        help="serve the URL Frontier API (gRPC) on a SQLite, Redis or Redis Cluster frontier",
        description="Serve the gRPC service urlfrontier.URLFrontier. GetURLs hands out a URL "
                    "only when robots.txt allows it for --agent and the host's delays "
                    "(Crawl-delay, Request-rate, Visit-time, --default-delay-s, the queue's "
                    "SetDelay) allow it; a URL robots.txt disallows is never handed out and "
                    "its metadata says why (GetURLStatus, ListURLs). Needs "
                    "polite-web[frontier].")
    add_command(
        frontier_commands, FRONTIER_STATUS, _status,
        help="a frontier's crawls, queues and counts",
        description="Read the store of polite frontier serve (running or not) and print, "
                    "per crawl, the URLs queued, in process and completed, and its largest "
                    "queues.")


def _require_extra() -> None:
    from importlib.util import find_spec

    for name in ("grpc", "google.protobuf"):
        try:
            found = find_spec(name) is not None
        except ModuleNotFoundError:  # no google package at all
            found = False
        if not found:
            raise ConfigError(f"polite frontier needs {name}: "
                              "pip install 'polite-web[frontier]'")


def _open(store: str, *, default_delay_s: float, spacing_from_return: bool) -> URLs:
    """The frontier's store: an SQLite file, or a Redis database or Redis Cluster that nodes
    on several machines share."""
    from polite.storage import read_store_url

    where = read_store_url(store, FLAGS.store)
    if where.kind == "sqlite" and where.path is not None:
        from polite.frontier._store import URLStore

        return URLStore(str(where.path), default_delay_s=default_delay_s,
                        spacing_from_return=spacing_from_return)
    if where.kind == "redis":
        import redis
        from redis.exceptions import RedisClusterException

        from polite.frontier._redis_store import RedisURLStore

        try:
            # A store that stops answering fails the call after a bounded wait, as
            # polite's other Redis clients do (a store thread of the node waits on it).
            bounded = {"socket_timeout": 5.0, "socket_connect_timeout": 5.0}
            client = (redis.RedisCluster.from_url(where.client_url, **bounded)
                      if where.cluster else redis.Redis.from_url(where.client_url, **bounded))
            client.ping()
        except (redis.RedisError, RedisClusterException) as exc:
            raise ConfigError(f"--store {store}: {exc}") from exc
        return RedisURLStore(client, where.prefix, default_delay_s=default_delay_s,
                             spacing_from_return=spacing_from_return)
    raise ConfigError(f"--store {store}: polite frontier keeps its frontier in SQLite "
                      "(sqlite:///PATH), Redis (redis://HOST:PORT/DB) or a Redis Cluster "
                      "(redis://NODE:PORT/0?cluster=1)")


def _status(args: argparse.Namespace, out: TextIO) -> int:
    resolve(FRONTIER_STATUS, args)
    import json
    import os
    import time

    from polite.storage import read_store_url

    where = read_store_url(args.store, FLAGS.store)
    if where.kind == "sqlite" and where.path is not None and not os.path.exists(where.path):
        raise ConfigError(f"--store {args.store}: no such file")
    store = _open(args.store, default_delay_s=0.0, spacing_from_return=False)
    try:
        now = time.time()
        crawls = []
        for crawl in store.crawls():
            stats = store.stats(crawl, "", now)
            queues = store.queue_counts(crawl, args.max_queues, now)
            crawls.append({"crawl": crawl, "queued": stats.size,
                           "in_process": stats.in_process, "completed": stats.completed,
                           "queues": stats.queues, "active_queues": stats.active_queues,
                           "largest_queues": [
                               {"key": k, "queued": q, "in_process": p, "completed": c}
                               for k, q, p, c in queues]})
    finally:
        store.close()
    if args.json:
        print(json.dumps({"crawls": crawls}, indent=2), file=out)
        return 0
    if not crawls:
        print("no crawls", file=out)
    for entry in crawls:
        print(f"crawl {entry['crawl']}: {entry['queued']} queued, {entry['in_process']} in "
              f"process, {entry['completed']} completed; {entry['queues']} queues "
              f"({entry['active_queues']} active)", file=out)
        for queue in entry["largest_queues"]:  # type: ignore[attr-defined]
            print(f"  {queue['key']}: {queue['queued']} queued, {queue['in_process']} in "
                  f"process, {queue['completed']} completed", file=out)
    return 0


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    resolve(FRONTIER_SERVE, args)
    from polite._listen import is_loopback, listen_problem  # polite serve's own rules

    problem = listen_problem("--host", args.host)
    if problem is not None:
        raise ConfigError(problem)
    if args.node_name is not None and not _NODE_NAME.fullmatch(args.node_name):
        raise ConfigError(f"--node-name {args.node_name[:80]!r}: 1 to 200 printable "
                          "characters, no space")
    if not is_loopback(args.host):
        # Secure by default: the gRPC service asks its clients for nothing, so it is not
        # offered beyond this machine.
        raise ConfigError(f"--host {args.host} is not a loopback address: polite frontier "
                          "serve does not authenticate its clients, so it listens on "
                          "loopback only (reach it from elsewhere through a tunnel or a "
                          "proxy that does)")
    _require_extra()
    allowed: tuple[Network, ...] = ()
    if args.allow_network:  # robots.txt's fetcher only loaded where it is wanted
        from polite.fetch.robots import networks

        allowed = networks(args.allow_network)

    import asyncio
    import signal

    from polite.frontier._server import (
        FrontierService,
        NameTaken,
        PolitenessOptions,
        open_politeness,
        serve,
    )
    # With politeness on, the driver applies the default delay where robots.txt sets none
    # (and only there); a queue's own delay is then what SetDelay gives it.
    polite = args.robots == "on"
    store = _open(args.store, default_delay_s=0.0 if polite else args.default_delay_s,
                  spacing_from_return=polite)

    def ready(port: int, metrics_port: int | None) -> None:
        if metrics_port is not None:
            print(f"polite frontier: metrics at http://{args.host}:{metrics_port}/metrics",
                  file=out, flush=True)
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
            serving = asyncio.ensure_future(serve(service, store, args.host, args.port, ready,
                                                  metrics_port=args.metrics_port,
                                                  name=args.node_name))
            # Ctrl-C or SIGTERM: a clean stop, which strikes the node off at once (ListNodes);
            # a node killed otherwise drops out when it has not beaten for a while.
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, serving.cancel)
            try:
                await serving
            except asyncio.CancelledError:
                if not serving.cancelled():
                    raise
            finally:
                for signum in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(signum)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: "
                          f"{exc.strerror or exc}") from exc
    except NameTaken as exc:
        raise ConfigError(str(exc)) from None
    finally:
        store.close()
    return 0

"""What the command groups share: the exit statuses, and the client, the private-address
check and the sitemap walker of the commands that fetch."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from polite.config import FLAGS

if TYPE_CHECKING:
    import httpx

    from polite.fetch.robots import Network

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FINDINGS", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_STORE",
           "EXIT_USAGE", "Parser", "fetch_client", "require_public", "sitemap_walker"]

EXIT_OK = 0
EXIT_FINDINGS = 1  # some URL is disallowed (check) or the file has problems (lint)
EXIT_USAGE = 2
# A run stopped by Ctrl-C or SIGTERM, after its clean stop: 128 + SIGINT, as shells report a
# program the signal ended, so a script tells it from a finished run.
EXIT_INTERRUPTED = 130
# The reader of the output went away (``| head``): 128 + SIGPIPE, what a shell reports for a
# Unix tool the broken pipe ended, and nothing said about it.
EXIT_BROKEN_PIPE = 141
# A shared crawl whose store did not come back within the time it waits for it.
EXIT_STORE = 1


class Parser(argparse.ArgumentParser):
    """An argparse parser whose command group may run one of its commands when none is
    named: ``polite crawl URL...`` is ``polite crawl run URL...``, as it was before
    ``status`` and ``merge`` became commands of their own."""

    default_command: str | None = None

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        if self.default_command is not None and args is not None:
            given = list(args)
            if not given or given[0] not in (*self._commands(), "-h", "--help"):
                given.insert(0, self.default_command)
            args = given
        return super().parse_known_args(args, namespace)

    def _commands(self) -> list[str]:
        return [name for action in self._actions
                if isinstance(action, argparse._SubParsersAction) for name in action.choices]


def require_public(url: str, allow_private: bool, allowed: Sequence[Network] = ()) -> None:
    """Refusing to fetch from a private address is an error that says what to add, not a
    verdict about the site (``allowed``: private networks let through)."""
    import asyncio

    from polite.core.urls import split_origin
    from polite.errors import ConfigError
    from polite.fetch.robots import is_public_host

    host = split_origin(url)[1]
    if not allow_private and not asyncio.run(is_public_host(host, allowed)):
        raise ConfigError(f"{host} is a private or loopback address; add --allow-private to "
                          "fetch from it")


def fetch_client(allow_private: bool) -> httpx.AsyncClient:
    """The client robots.txt and sitemaps are fetched with: with private addresses refused,
    every connection goes to the address the guard checked."""
    from polite.clock import WallClock
    from polite.fetch.robots import PublicHosts, create_client

    return create_client(guard=None if allow_private else PublicHosts(WallClock()))


def sitemap_walker(args: argparse.Namespace, client: Any, **options: Any) -> Any:
    from polite.clock import WallClock
    from polite.fetch.politeness import Politeness
    from polite.fetch.robots import RobotsFetcher
    from polite.fetch.sitemaps import SitemapWalker
    from polite.storage import MemoryStore

    clock = WallClock()
    store = MemoryStore(clock)
    robots = RobotsFetcher(client, store, clock, agent=args.agent,
                           allow_private=args.allow_private)
    politeness = Politeness(robots, store, clock, agent=args.agent,
                            default_delay_s=args.delay_ms / 1000,
                            allow_private=args.allow_private, private_hint=FLAGS.allow_private)
    return SitemapWalker(client, politeness, **options)

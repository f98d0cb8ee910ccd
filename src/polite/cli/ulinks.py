"""``polite ulinks``: a site's most useful pages from its sitemaps (Roy 2008, 2.4); the
algorithm is :mod:`polite.core.ulinks`."""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from polite.cli.common import add_command, local_file
from polite.config import ULINKS
from polite.core.survey.sampling import MAX_KEPT_URIS, Reservoir
from polite.errors import ConfigError

__all__ = ["add_ulinks_command"]

MAX_URIS = MAX_KEPT_URIS
YEAR_S = 365 * 86_400.0


def add_ulinks_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_command(
        commands, ULINKS, _ulinks,
        help="a site's most useful pages from its sitemaps (Roy 2008's ulinks)",
        description="Build the prefix tree of a site's sitemap URLs and fold it greedily "
                    "(Roy 2008, section 2.4); print the K heaviest remaining leaves, one "
                    "'URI<TAB>WEIGHT' a line.")


def _weight(entry: Any, weigh: str, now: float) -> float:
    if weigh == "priority":
        return 0.5 if entry.priority is None else float(entry.priority)
    if weigh == "recent":
        lastmod = entry.lastmod
        if isinstance(lastmod, str):  # as a survey keeps it
            lastmod = _timestamp(lastmod)
        if lastmod is None:
            return 0.5
        return float(2.0 ** (-max(0.0, now - lastmod.timestamp()) / YEAR_S))
    return 1.0


def _timestamp(text: str) -> Any:
    from datetime import UTC, datetime

    try:
        found = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def _sample(entries: Iterable[Any], limit: int, rng: random.Random) -> tuple[list[Any], int]:
    """Up to ``limit`` page entries, a uniform sample beyond (reservoir), and how many
    there were."""
    reservoir: Reservoir[Any] = Reservoir(limit, rng)
    for entry in entries:
        if getattr(entry, "kind", "url") == "url":  # a survey keeps page URLs only
            reservoir.add(entry)
    return reservoir.kept, reservoir.seen


def _entries(args: argparse.Namespace) -> Iterable[Any]:
    source: str = args.source
    if not source.startswith(("http://", "https://")):
        path = Path(local_file(source))
        if path.is_dir():
            raise ConfigError(f"{source}: not a survey folder (no survey.sqlite in it); give "
                              "a survey's folder, a site, a sitemap URL or a sitemap file")
        from polite.sitemaps import parse

        with path.open("rb") as stream:
            yield from parse(stream, max_bytes=args.max_sitemap_bytes)
        return
    import asyncio

    from polite.cli.common import fetch_client, require_public, sitemap_walker
    from polite.fetch.robots import origin_of

    require_public(source, args)
    found: list[Any] = []
    site = origin_of(source)
    is_site = source.rstrip("/") == site

    async def fetch() -> None:
        client, hosts = fetch_client(args)
        async with client:
            walker = sitemap_walker(args, client, hosts)
            if is_site:
                async for _, entries in walker.walk(site):
                    found.extend(entries)
            else:
                await walker.read(source, found.extend)

    asyncio.run(fetch())
    yield from found


def _print(link: Any, args: argparse.Namespace, out: TextIO, domain: str | None = None
           ) -> None:
    weight = round(link.weight, 6) if args.weigh != "count" else int(link.weight)
    if args.json:
        found = {"uri": link.uri, "weight": weight}
        out.write(json.dumps(found if domain is None else {"domain": domain, **found}) + "\n")
    else:
        out.write(("" if domain is None else f"{domain}\t") + f"{link.uri}\t{weight}\n")


def _survey_ulinks(args: argparse.Namespace, folder: Path, out: TextIO) -> int:
    """Each domain of a survey: its ulinks from the page URLs the survey kept."""
    from polite.core.ulinks import UriTree, ulinks
    from polite.survey import Survey

    now = time.time()
    domains = 0
    with Survey(folder) as survey:
        for domain, kept in survey.kept_urls():
            entries, _ = _sample(kept, args.max_uris, random.Random(0))
            tree = UriTree()
            for entry in entries:
                tree.add(entry.loc, _weight(entry, args.weigh, now))
            if tree.uris:
                domains += 1
                for link in ulinks(tree, args.k):
                    _print(link, args, out, domain)
    if not domains:
        raise ConfigError(f"{folder}: the survey kept no sitemap page URL")
    return 0


def _ulinks(args: argparse.Namespace, out: TextIO) -> int:
    from polite.core.ulinks import UriTree, ulinks

    if (Path(args.source) / "survey.sqlite").is_file():
        return _survey_ulinks(args, Path(args.source), out)
    entries, total = _sample(_entries(args), args.max_uris, random.Random(0))
    now = time.time()
    tree = UriTree()
    for entry in entries:
        tree.add(entry.loc, _weight(entry, args.weigh, now))
    if total > len(entries):
        print(f"polite: {total:,} URIs; a random {len(entries):,} of them in the tree "
              "(--max-uris)", file=sys.stderr)
    if not tree.uris:
        raise ConfigError(f"{args.source}: no page URL found in its sitemaps")
    for link in ulinks(tree, args.k):
        _print(link, args, out)
    return 0

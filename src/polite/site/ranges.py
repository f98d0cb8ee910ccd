"""``polite site ranges update``: crawler operators' published IP range files, read from
disk or fetched (200 only, no redirect, bounded, at most once an hour per URL, as the JAFAR
draft asks of consumers), and kept in the site's SQLite file with their ``creationTime``."""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from polite.clock import WallClock
from polite.core.site import CrawlerList
from polite.core.site.ranges import MAX_RANGE_FILE_BYTES, RangeFile, parse_range_file
from polite.errors import ConfigError
from polite.fetch.http import HttpClient, PageFetcher
from polite.fetch.robots import PublicHosts, create_client
from polite.site.store import SiteStore

__all__ = ["MIN_REFRESH_S", "RangeUpdate", "update_ranges"]

MIN_REFRESH_S = 3600.0  # the draft: consumers MUST NOT poll more often than hourly
FETCH_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class RangeUpdate:
    """What became of one source: ``file`` when read, else ``skipped`` or ``error``."""

    crawler: str
    source: str
    file: RangeFile | None = None
    skipped: str | None = None
    error: str | None = None


def _is_url(source: str) -> bool:
    return source.lower().startswith(("http://", "https://"))


def _basename(source: str) -> str:
    return posixpath.basename(urlsplit(source).path if _is_url(source) else source).lower()


def targets(crawlers: CrawlerList, sources: Sequence[str]) -> list[tuple[str, str]]:
    """(crawler, source) pairs: ``NAME=FILE|URL``, or a file or URL whose name is that of a
    crawler's published file (``googlebot.json``); none: every crawler's published URLs."""
    if not sources:
        return [(c.name, url) for c in crawlers.crawlers for url in c.ranges_urls]
    known = {_basename(url): c.name for c in crawlers.crawlers for url in c.ranges_urls}
    found = []
    for source in sources:
        name, sep, rest = source.partition("=")
        if sep and not _is_url(source) and crawlers.by_name(name) is not None:
            found.append((name, rest))
            continue
        if sep and not _is_url(source):
            raise ConfigError(f"{source!r}: no crawler is named {name!r}")
        crawler = known.get(_basename(source))
        if crawler is None:
            raise ConfigError(f"{source!r}: not the name of a crawler's published file "
                              f"({', '.join(sorted(known)) or 'none'}); say whose it is "
                              "with NAME=FILE")
        found.append((crawler, source))
    return found


async def _fetch(client: HttpClient, url: str) -> bytes:
    got = await client.get(url, max_bytes=MAX_RANGE_FILE_BYTES + 1,
                           deadline_s=FETCH_TIMEOUT_S, agent="polite")
    if got.failure == "timeout":
        raise TimeoutError
    if got.status is None or got.error is not None:
        raise ConfigError(f"not fetched: {got.error}")
    if got.status != 200:
        raise ConfigError(f"answered {got.status}, not 200")
    if got.truncated:
        raise ConfigError(f"over {MAX_RANGE_FILE_BYTES} bytes")
    return got.body


def update_ranges(store: SiteStore, crawlers: CrawlerList, sources: Sequence[str], *,
                  now: float, allow_private: bool = False,
                  client: Callable[[], PageFetcher] | None = None) -> list[RangeUpdate]:
    """Read each source and keep what it gives; a URL read less than an hour ago is left
    alone. ``client``: makes the client URLs are fetched with (names resolved, timeouts
    and private addresses as the caller says), on the loop it runs on; by default one
    refusing private addresses unless ``allow_private`` (which lets private and special
    prefixes in a file through too: a site's own test setup). Bad input (an unknown
    crawler, a file that is not a dated range file, or dated in the future) raises
    :class:`ConfigError`; a fetch that fails, or fetches what is not a range file, is
    reported and the stored file kept; each prefix refused is in the result's
    ``file.refused``."""
    pairs = targets(crawlers, sources)
    read_at = {(r.crawler, r.source): r.fetched_at for r in store.ranges()}
    results: list[RangeUpdate] = []
    make = client

    async def run() -> None:
        guard = None if allow_private else PublicHosts(WallClock())
        async with (create_client(guard=guard) if make is None else make()) as fetcher:
            for crawler, source in pairs:
                if not _is_url(source):
                    try:
                        data = Path(source).read_bytes()
                    except OSError as exc:
                        raise ConfigError(f"{source}: {exc.strerror}") from None
                    file = parse_range_file(data, source=source, now=now,
                                            allow_private=allow_private)
                else:
                    last = read_at.get((crawler, source))
                    if last is not None and now - last < MIN_REFRESH_S:
                        results.append(RangeUpdate(crawler, source, skipped=(
                            f"read {int((now - last) // 60)} min ago; at most hourly")))
                        continue
                    try:
                        data = await _fetch(fetcher, source)
                    except (ConfigError, TimeoutError) as exc:
                        why = "took too long" if isinstance(exc, TimeoutError) else str(exc)
                        results.append(RangeUpdate(crawler, source, error=why))
                        continue
                    try:
                        file = parse_range_file(data, source=source, now=now,
                                                allow_private=allow_private)
                    except ConfigError as exc:  # reported; the others are still read
                        results.append(RangeUpdate(crawler, source, error=str(exc)))
                        continue
                store.save_ranges(crawler, source, file.creation_time,
                                  [str(p) for p in file.prefixes], now)
                results.append(RangeUpdate(crawler, source, file))

    asyncio.run(run())
    return results

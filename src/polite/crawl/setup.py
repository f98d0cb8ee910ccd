"""Building a crawl: its folder, store, frontier, politeness driver and its one HTTP client."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from polite.clock import WallClock
from polite.config import DELAY, KEYWORDS, Knobs, check_float
from polite.core.politeness.rules import DEFAULT_DELAY_S, MAX_CRAWL_DELAY_S
from polite.crawl.crawler import Crawler, CrawlSettings, PageHook
from polite.crawl.output import CrawlOutput
from polite.errors import ConfigError
from polite.fetch.http import RequestHeaders
from polite.fetch.politeness import LATE_UNNOTED_S, Politeness, lease_length_s
from polite.fetch.resolve import first_address
from polite.fetch.robots import Network, PublicHosts, RobotsFetcher, create_client
from polite.fetch.sitemaps import FILE_DEADLINE_S, SitemapWalker
from polite.storage import is_redis_store, open_frontier, open_store

if TYPE_CHECKING:  # the identity extra is needed only by a crawl that signs
    from polite.identity.signatures import RequestSigner

__all__ = ["SHARED_FACTS_TTL_S", "SHARED_SEND_SLACK_S", "open_crawler"]

# Workers sharing a crawl claim each host's delay this much longer: a request may leave this
# late after its slot (a loaded machine, a connection to open) and no other worker's request
# comes closer than the delay at the site. Measured on two shared cores running four crawl
# processes, the farm and redis-server: requests left up to 65 ms late.
SHARED_SEND_SLACK_S = 0.1
# A worker on a Redis store keeps what it read of a host's configured delay and response
# times this long: a round trip less before most requests; an operator's new delay (set
# through polite serve on the same Redis) reaches running crawls within it.
SHARED_FACTS_TTL_S = 1.0


@asynccontextmanager
async def open_crawler(
    folder: str | Path,
    settings: CrawlSettings | None = None,
    *,
    store: str = "",
    default_delay_s: float = DEFAULT_DELAY_S,
    max_crawl_delay_s: float = MAX_CRAWL_DELAY_S,
    allow_private: bool = False,
    allow_networks: tuple[Network, ...] = (),
    resolve: Callable[[str], Awaitable[list[str]]] | None = None,
    connect_timeout_s: float = 10.0,
    read_timeout_s: float = 30.0,
    on_page: PageHook | None = None,
    worker: str = "",
    knobs: Knobs = KEYWORDS,
    on_store: Callable[[bool, str], None] | None = None,
    signer: RequestSigner | None = None,
) -> AsyncIterator[Crawler]:
    """A crawler writing to ``folder``, its state in ``store`` (``sqlite:///PATH``,
    ``memory://``; by default ``crawl.sqlite`` in the folder, which a crawl started again
    with the same folder resumes from). One crawl at a time per folder. ``worker`` names
    this process's leases in a frontier that workers share (``redis://``). Private
    addresses are refused unless ``allow_private``, or in ``allow_networks``; ``resolve``
    gives a host's addresses (the system's resolver by default), for the guard and for
    every connection; ``connect_timeout_s`` bounds connecting, ``read_timeout_s`` a wait
    for the next byte; ``signer`` signs every
    request (Web Bot Auth). ``knobs``: how the caller names the settings its errors point
    at (the command line's flags). While a Redis store does not answer the crawl waits for
    it, telling ``on_store`` (see :class:`Crawler`)."""
    # Checked before the folder is made; Politeness checks them again, by these names.
    check_float(default_delay_s, DELAY, knob=knobs.default_delay_s)
    check_float(max_crawl_delay_s, DELAY, knob="max_crawl_delay_s=")
    settings = settings or CrawlSettings()
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    lock = (out / "crawl.lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        lock.close()
        raise ConfigError(f"another crawl is writing to {out}") from exc
    clock = WallClock()
    store_url = store or f"sqlite:///{out / 'crawl.sqlite'}"
    try:
        politeness_store = open_store(store_url, clock, knob=knobs.store)
    except BaseException:  # a store URL refused: the folder's lock is not kept
        lock.close()
        raise
    if is_redis_store(politeness_store):
        politeness_store.facts_ttl_s = SHARED_FACTS_TTL_S
    frontier = open_frontier(store_url, default_path=lambda: out / "crawl.sqlite",
                             store=politeness_store, worker=worker, knob=knobs.store)
    # One guard for the checks and for every connection: robots.txt, sitemaps and pages go
    # to the address it checked, through one client that adds each site's header fields
    # and the signature to every request.
    hosts = PublicHosts(clock, allowed=allow_networks, resolve=resolve)
    client = create_client(
        guard=None if allow_private else hosts,
        resolve=None if resolve is None else first_address(resolve),
        connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s,
        headers=RequestHeaders(settings.user_agent or settings.agent,
                               languages=settings.languages),
        sign=None if signer is None else signer.headers)
    fetcher = RobotsFetcher(client, politeness_store, clock, agent=settings.agent,
                            allow_private=allow_private, public_hosts=hosts)
    politeness = Politeness(fetcher, politeness_store, clock, agent=settings.agent,
                            default_delay_s=default_delay_s,
                            max_crawl_delay_s=max_crawl_delay_s, allow_private=allow_private,
                            send_slack_s=SHARED_SEND_SLACK_S if worker else LATE_UNNOTED_S,
                            private_hint=knobs.allow_private, public_hosts=hosts,
                            robots_uses_slot=True)  # seed 000: every request counts
    # Workers sharing the store take each host's lease with its slot (see Crawler), for
    # sitemaps too: one request of a host in flight among them all.
    walker = SitemapWalker(client, politeness, cross_host="host",
                           host_lease_s=lease_length_s(FILE_DEADLINE_S, settings.lease_s)
                           if worker else None)
    output = CrawlOutput(out, warc=settings.warc, warc_gzip_level=settings.warc_gzip_level)
    unreachable: tuple[type[BaseException], ...] = ()
    if is_redis_store(politeness_store):
        from polite.storage.redis import UNREACHABLE

        unreachable = UNREACHABLE
    try:
        # the folder's own file, locked above, is written by no other process
        yield Crawler(politeness, frontier, client, output, clock, settings, walker=walker,
                      on_page=on_page, unreachable=unreachable, on_store=on_store,
                      group_commits=not store and not worker, host_leases=bool(worker))
    finally:
        output.close()
        await client.aclose()
        # what is still to be written to a store that went away stays unwritten
        with contextlib.suppress(*unreachable):
            await frontier.close()
        with contextlib.suppress(*unreachable):
            await politeness_store.close()
        lock.close()

"""Fetching robots.txt and sitemaps for many domains, seed 004's way (sections 2.3, 3.2).

robots.txt: ``http://DOMAIN/robots.txt`` first; when that answers HTML (a home page served
instead) or redirects to one, ``www.DOMAIN`` next, each asked for the way every product asks
for robots.txt (:func:`polite.fetch.robots.fetch_robots_txt`: redirects followed by polite,
five at most, each hop checked by the private-address guard), each redirect recorded.
Sitemaps: the Sitemap lines of the robots.txt read, index files followed with each file's
indirection level and parent (the sitemap walker's walk and exchange,
:class:`polite.fetch.sitemaps.SitemapWalker`), large indexes sampled (at least
``max(n0, alpha * n)`` of an index's ``n`` children, the others recorded ``not_sampled``),
files on other sites (the seed's "sitemap sharing") fetched after their own robots.txt and
marked ``cross_site``, page URLs kept up to a bound per site (a uniform sample beyond it).

Politeness: the shared driver (:class:`polite.fetch.politeness.Politeness`) on an in-memory
store, told the robots.txt the survey read for each host: between the starts of a host's
requests its delay (its robots.txt Crawl-delay or Request-rate, else the default), whatever
the number of domains at once. Fetching robots.txt does not use up the host's slot, as
everywhere in polite (DESIGN.md): a host's first sitemap may follow its robots.txt at once,
and each request after that waits the delay. A robots.txt redirect's hop is a request like
any other: it waits for its host's turn, spaced from the request redirected when that went
to the same host. A sitemap's redirect is a request to its
target's host: that host's robots.txt is read first and must allow it. Every file is
recorded as it ends, so a survey killed at any moment goes on where it stopped: a
robots.txt, a sitemap file or a domain recorded is not fetched again.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from polite.core.crawl import in_scope
from polite.core.politeness.rules import DEFAULT_DELAY_S
from polite.core.robots import MAX_ROBOTS_BYTES, RobotsTxt
from polite.core.robots.lifecycle import DisallowAll, Parsed
from polite.core.sitemaps import MAX_SITEMAP_BYTES, MAX_SITEMAP_URLS, Entry, SitemapParser
from polite.core.survey.outcomes import Outcome, body_outcome, rules_state, status_outcome
from polite.core.survey.sampling import (
    DEFAULT_ALPHA,
    DEFAULT_N0,
    MAX_KEPT_URIS,
    Reservoir,
    sample_children,
)
from polite.core.text import decode_text
from polite.core.urls import host_name_problem, split_origin
from polite.errors import ConfigError, InvalidURL
from polite.fetch.http import HttpClient, PageFetcher
from polite.fetch.politeness import LATE_UNNOTED_S, Grants, Politeness
from polite.fetch.resolve import Resolver
from polite.fetch.robots import (
    HopStart,
    Network,
    PublicHosts,
    RobotsFetcher,
    fetch_robots_txt,
    private_refusal,
)
from polite.fetch.sitemaps import (
    Deferred,
    Listed,
    SitemapWalker,
    Taken,
    Visited,
    parse_whole,
    polite_turn,
)
from polite.storage.base import RobotsRecord
from polite.storage.memory import MemoryStore
from polite.survey.store import SitemapRecord, SiteRecord, SurveyStore

if TYPE_CHECKING:
    from polite.survey.shared import SharedDomains

__all__ = ["MAX_SITEMAP_LEVEL", "Harvester", "read_domains"]

# HTTP requests in flight at once at most (see Harvester._requests).
MAX_IN_FLIGHT = 200
# Index nesting followed: the seed met level 4 at most (Table 4); deeper files are recorded
# ``not_sampled``.
MAX_SITEMAP_LEVEL = 5
# A robots.txt over the cap is counted to its end (its true size, seed 004's 12 MB case) up
# to this much; past it the size recorded is a lower bound (a compression bomb stops here).
_MAX_COUNTED_BYTES = 256 << 20
# How a request that got no answer is classed.
_FAILURES = {"timeout": Outcome.TIMEOUT, "dns": Outcome.DNS_ERROR,
             "resolver": Outcome.RESOLVER_ERROR}
# Sitemap parser stops that mean "over a size limit" (seed 004's cityweekend case, bombs).
_TOO_BIG_STOPS = ("too-large", "huge-markup", "too-many-names")
# Parser stops that mean the file broke off (cut short, or broken past its start): a
# ``parse_error``, the entries before the break kept and followed.
_BROKEN_STOPS = ("broken-xml",)
# Rows whose entries were read (in whole or up to a limit or a break): their children are
# followed and their page URLs kept, and a resumed survey reads them again from the store.
_READ_INFOS = ("ok", "too_big", "parse_error")
# A sitemap file's row that is never recorded: the survey's settings forbid fetching it.
_REFUSED = "refused"
# A file whose host asks to wait longer than the survey waits (a Visit-time window hours
# away): neither fetched nor refused by its rules.
_DEFERRED = "deferred"


def read_domains(path: Path) -> list[tuple[int | None, str]]:
    """``rank,domain`` lines (Tranco, Alexa) or one domain a line; blank lines, ``#``
    comments and a header line (``rank,domain``: words, no name) skipped;
    :class:`ConfigError` with the line number for a line that is neither, and for a file
    with no domain in it."""
    domains = []
    first = True
    for number, line in enumerate(decode_text(path.read_bytes(), str(path)).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        header, first = first and _HEADER.match(line) is not None, False
        if header:
            continue
        shown = repr(line) if len(line) <= 80 else f"{line[:80]!r}..."
        rank_text, comma, name = line.partition(",")
        rank: int | None = None
        if comma:
            if not rank_text.strip().isdigit():
                raise ConfigError(f"{path}:{number}: expected 'rank,domain' (a number, a "
                                  f"comma, a name), got {shown}")
            rank = int(rank_text)
        else:
            name = rank_text
        name = name.strip().lower().rstrip(".")
        problem = "no name" if not name else None
        if problem is None and ("/" in name or ":" in name):
            problem = "a URL or a path, not a host name"
        if problem is None:
            problem = host_name_problem(name)
        if problem is not None:
            raise ConfigError(f"{path}:{number}: not a domain: {shown} ({problem})")
        domains.append((rank, name))
    if not domains:
        raise ConfigError(f"{path}: no domain in it (one a line, or 'rank,domain' lines)")
    return domains


# A list's header line: two words, neither a number nor a name (Tranco's files have none,
# other lists' CSV exports do).
_HEADER = re.compile(r"[A-Za-z_ ]+,[A-Za-z_ ]+\Z")


# Hosts whose robots.txt state the politeness driver is told of at once (a domain's walk ends
# long before its hosts are dropped; one dropped is told again when asked about).
_TOLD_HOSTS = 16_384
# How long a state told to the driver stays in force: the survey's own, for its whole run.
_TOLD_FOR_S = 10 * 365 * 86_400.0
# What every field that spaces requests holds in its name (Crawl-delay, Request-rate,
# Visit-time, Time-forbidden, Ip-delay, Ip-rate) or starts with (a REGP brace block).
_SPACING = re.compile(rb"delay|rate|visit|forbidden|\{", re.IGNORECASE)


class _Told:
    """The robots.txt states the survey read, as the politeness driver's store of them: the
    driver never fetches robots.txt itself, each origin is told before it is asked about."""

    def __init__(self, keep: int = _TOLD_HOSTS) -> None:
        self._keep = keep
        self._records: OrderedDict[str, RobotsRecord] = OrderedDict()

    def __contains__(self, origin: str) -> bool:
        return origin in self._records

    async def load_robots(self, origin: str) -> RobotsRecord | None:
        return self._records.get(origin)

    async def save_robots(self, record: RobotsRecord) -> None:
        self._records[record.origin] = record
        self._records.move_to_end(record.origin)
        while len(self._records) > self._keep:
            self._records.popitem(last=False)


class _Turns:
    """A host's turn from the shared politeness driver: its delay (the robots.txt Crawl-delay,
    Request-rate or Visit-time of the survey's agent, else the default) between the starts of
    requests that use its slot, on an in-memory store. robots.txt takes no turn (DESIGN.md)."""

    def __init__(self, client: HttpClient, public: PublicHosts, *, agent: str,
                 delay_s: float, allow_private: bool) -> None:
        self._told = _Told()
        # The run's own client: the driver never fetches robots.txt through it (each origin
        # is told first), but it is the one requests to sites leave through.
        self._client = client
        # The wall clock, as the driver's: a Visit-time window is a time of day (on the
        # monotonic clock a window 3 hours away came out as any wait at all).
        self._clock = time.time
        # The slots: shared by every driver below, so a new one keeps each host's spacing.
        self._slots = MemoryStore(self._clock)
        self._grants = Grants()  # the slots given, as the slots: every driver's
        self._public = public
        self._agent, self._delay_s, self._allow_private = agent, delay_s, allow_private
        self._politeness = self._driver()
        self._origins = 0  # told to the present driver

    def _driver(self) -> Politeness:
        """A driver over the run's slots. It notes every origin it decides for, for a
        dashboard the survey has not: a new one every so many origins keeps a survey's
        memory flat, the slots staying in the store."""
        robots = RobotsFetcher(self._client, self._told, self._clock, agent=self._agent,
                               allow_private=self._allow_private, max_in_memory=_TOLD_HOSTS,
                               public_hosts=self._public)
        # No adaptive delay and no back-off: the survey's delays are the site's and the
        # default, as seed 004 spaced its requests.
        return Politeness(robots, self._slots, self._clock, agent=self._agent,
                          default_delay_s=self._delay_s, adaptive_factor=0.0, backoff=False,
                          allow_private=self._allow_private, public_hosts=self._public,
                          private_hint="--allow-private", send_slack_s=LATE_UNNOTED_S,
                          grants=self._grants)

    async def take(self, url: str, robots: bytes | None) -> Taken | str:
        """Wait for ``url``'s slot and take it (:class:`Taken`), or why ``url`` may not be
        fetched. ``robots``: the body of the robots.txt whose rules
        the host's requests follow (None: none)."""
        try:
            origin = split_origin(url)[0]
        except InvalidURL as exc:
            return str(exc)
        if origin not in self._told:
            self._origins += 1
            if self._origins > _TOLD_HOSTS // 2:
                self._politeness, self._origins = self._driver(), 1
            now = self._clock()
            # The survey asks only for what the rules allow: the driver needs them for the
            # spacing alone, and a file with no field that spaces requests is told as none
            # (the same spacing, without parsing the file a second time).
            await self._told.save_robots(
                RobotsRecord(origin, "parsed", 200, robots, now, now + _TOLD_FOR_S)
                if robots is not None and _SPACING.search(robots) is not None else
                RobotsRecord(origin, "allow", 0, b"", now, now + _TOLD_FOR_S, 0,
                             "no robots.txt field spaces requests"))
        return await polite_turn(self._politeness, url)

    @property
    def politeness(self) -> Politeness:
        """The present driver (a walk's requests are told to it as they end)."""
        return self._politeness


# A page URL kept from a sitemap: (the file's uri, loc, lastmod, changefreq, priority).
_KeptURL = tuple[str, str, str | None, str | None, float | None]


def _keep_urls(reservoir: Reservoir[_KeptURL], uri: str, entries: list[Entry]) -> None:
    """Offer a file's page URLs to the domain's sample."""
    for entry in entries:
        if entry.kind != "sitemap":
            reservoir.add((uri, entry.loc,
                           None if entry.lastmod is None else entry.lastmod.isoformat(),
                           entry.changefreq, entry.priority))


def _children(entries: list[Entry]) -> list[str]:
    """The child sitemaps a file lists, once each."""
    return list(dict.fromkeys(entry.loc for entry in entries if entry.kind == "sitemap"))


# A sitemap file read: its row, its body (None: recorded by an earlier run), its entries,
# and whether it was fetched now (its row still to be recorded).
_Read = tuple[SitemapRecord, bytes | None, list[Entry], bool]


@dataclass(slots=True)
class _Answer:
    outcome: Outcome | None  # None: a 2xx, its body in ``body``
    status: int | None = None
    error: str | None = None
    url: str | None = None
    redirects: tuple[str, ...] = ()
    content_type: str = ""
    seconds: float = 0.0
    body: bytes = b""  # a 2xx's body, up to the cap
    size: int = 0  # its true size (counted past the cap for robots.txt)
    # Not fetched because the survey's own settings forbid it (a private address without
    # --allow-private): no outcome of the site's, so nothing of it is recorded.
    refused: bool = False


@dataclass(slots=True)
class _Robots:
    """What rules the requests to one host: parsed robots.txt (``None``: none, all allowed)
    or a refusal (an unreachable robots.txt)."""

    robots: RobotsTxt | None
    refusal: str | None = None
    refused: bool = False  # not read: the survey's settings forbid it (see _Answer)
    body: bytes | None = None  # what ``robots`` was read from


def _filetype(parser: SitemapParser) -> str:
    base = {"urlset": "xml", "sitemapindex": "xml", "text": "text", "rss": "rss",
            "atom": "atom"}.get(parser.format or "", "unknown")
    return f"{base}.gz" if parser.compressed and base in ("xml", "text") else base


class Harvester:
    """robots.txt (and, unless ``sitemaps`` is off, sitemaps) of many domains,
    ``concurrency`` at once, each file recorded as it ends."""

    def __init__(self, store: SurveyStore, clock: Callable[[], float], *,
                 resolver: Resolver | None = None,
                 concurrency: int = 100, https: bool = False, agent: str = "polite",
                 connect_timeout_s: float = 10.0, read_timeout_s: float = 30.0,
                 max_bytes: int = MAX_ROBOTS_BYTES, allow_private: bool = False,
                 allow_networks: Sequence[Network] = (),
                 sitemaps: bool = True, delay_s: float = DEFAULT_DELAY_S,
                 n0: int = DEFAULT_N0, alpha: float = DEFAULT_ALPHA,
                 max_kept_uris: int = MAX_KEPT_URIS,
                 sitemap_max_bytes: int = MAX_SITEMAP_BYTES,
                 sitemap_max_urls: int = MAX_SITEMAP_URLS,
                 on_site: Callable[[str], None] | None = None) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ConfigError(f"alpha must be between 0 and 1, not {alpha}")
        if n0 < 0:
            raise ConfigError(f"n0 must be 0 or more, not {n0}")
        self._store = store
        self._clock = clock
        self._resolver = resolver
        self._concurrency = max(1, concurrency)
        self._scheme = "https" if https else "http"
        self._agent = agent
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._deadline_s = connect_timeout_s + read_timeout_s  # a whole exchange, at most
        self._headers = {"User-Agent": agent}
        self._fetcher: PageFetcher | None = None  # while a run is under way
        self._max_bytes = max_bytes
        self._allow_private = allow_private
        self._allow_networks = tuple(allow_networks)
        self._public: PublicHosts | None = None  # while a run is under way
        self._sitemaps = sitemaps
        self._turns: _Turns | None = None  # from a run's first sitemap to its end
        # Requests in flight, whatever the domains at once (most of which wait for a host's
        # delay): a burst larger than the loop can serve would count its own queueing
        # against the servers' timeouts.
        self._requests = asyncio.Semaphore(max(1, min(self._concurrency, MAX_IN_FLIGHT)))
        self._delay_s = delay_s
        self._n0, self._alpha = n0, alpha
        self._max_kept = max_kept_uris
        self._sitemap_max_bytes = sitemap_max_bytes
        self._sitemap_max_urls = sitemap_max_urls
        self._other_robots: dict[str, asyncio.Future[_Robots]] = {}
        # Listed domains whose robots.txt is to be fetched (a shared sitemap's host may be
        # one), and the fetches under way: each robots.txt is fetched once per survey.
        self._listed: dict[str, int | None] = {}
        self._fetching: dict[str, asyncio.Future[tuple[SiteRecord, bytes | None] | None]] = {}
        self.on_site = on_site  # called with each domain as it ends
        self.on_start: Callable[[int], None] | None = None
        self.surveyed = 0
        self.done: dict[str, int] = {}  # outcome -> sites, this run
        # What this run did not fetch because its settings forbid it (private addresses):
        # domains whose robots.txt and sitemap files of other domains. Nothing of them is
        # recorded, so that a run with other settings does them.
        self.refused: set[str] = set()
        self.refused_files = 0
        self.sitemap_files: dict[str, int] = {}  # downloadinfo -> files, this run

    def pending(self, domains: Iterable[tuple[int | None, str]]
                ) -> list[tuple[int | None, str, bool]]:
        """The domains that still have work, once each: (rank, name, whether its robots.txt
        is to be fetched); the others have their sitemaps to read."""
        todo = []
        seen: set[str] = set()
        for rank, name in domains:
            if name in seen:
                continue
            seen.add(name)
            fetch = not self._store.recorded(name)
            if fetch or (self._sitemaps and not self._store.sitemaps_done(name)):
                todo.append((rank, name, fetch))
        return todo

    async def run(self, domains: Iterable[tuple[int | None, str]]) -> int:
        """Survey every domain not done yet; returns how many were. ``on_start`` is told how
        many there are before the first request."""
        todo = self.pending(domains)
        self._listed = {name: rank for rank, name, fetch in todo if fetch}
        if self.on_start is not None:
            self.on_start(len(todo))
        async with self._client():
            queue: asyncio.Queue[tuple[int | None, str, bool]] = asyncio.Queue()
            for item in todo:
                queue.put_nowait(item)

            async def take() -> tuple[int | None, str, bool] | None:
                return None if queue.empty() else queue.get_nowait()

            await self._work(take, None, min(self._concurrency, len(todo) or 1))
        return len(todo)

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[None]:
        """The run's HTTP client: connections kept alive between a host's requests (its
        robots.txt and sitemaps), names resolved by the survey's resolver."""
        resolver = self._resolver
        addresses = None if resolver is None else resolver.addresses

        async def resolve(host: str) -> str:
            assert addresses is not None
            return (await addresses(host))[0]

        # Private addresses refused (but for the networks allowed): the one connected to is
        # the one the guard checked (a name looked up again to connect could answer
        # otherwise). Hops are asked about first, so that a refused one is not recorded.
        guard = self._public = PublicHosts(time.monotonic, resolve=addresses,
                                           allowed=self._allow_networks)
        self._fetcher = PageFetcher(
            connect_timeout_s=self._connect_timeout_s,
            resolve=guard.address if not self._allow_private
            else None if resolver is None else resolve)
        try:
            yield
        finally:
            await self._fetcher.close()
            self._fetcher = None
            self._public = None
            self._turns = None

    async def run_shared(self, shared: SharedDomains) -> int:
        """Survey the domains of a list shared by several workers (each leased to one);
        returns how many this worker did. A listed domain's robots.txt is this worker's to
        record only when it holds the domain's lease: a shared sitemap's host that is
        listed is read as a host outside the list (``other_robots``), as its robots.txt
        would otherwise be recorded by two workers."""
        async def take() -> tuple[int | None, str, bool] | None:
            while (taken := await shared.take()) is not None:
                rank, name = taken
                # a domain this folder recorded already (the worker ran before, under this
                # name, and was stopped) is not fetched again
                fetch = not self._store.recorded(name)
                if fetch or (self._sitemaps and not self._store.sitemaps_done(name)):
                    return rank, name, fetch
                await shared.finish(name)
            return None

        before = self.surveyed
        async with self._client():
            await self._work(take, shared.finish, self._concurrency)
        return self.surveyed - before

    async def _work(self, take: Callable[[], Awaitable[tuple[int | None, str, bool] | None]],
                    finish: Callable[[str], Awaitable[None]] | None, workers: int) -> None:
        """``workers`` coroutines surveying the domains ``take`` gives until it gives None;
        ``finish`` is told of each once it is recorded."""
        async def worker() -> None:
            while (taken := await take()) is not None:
                rank, name, fetch = taken
                site: tuple[SiteRecord, bytes | None] | None = None
                if fetch:
                    site = await self._site_once(rank, name)
                if self._sitemaps:
                    await self._domain_sitemaps(name, site)
                if self._fetcher is not None:  # its connections are of no further use
                    self._fetcher.release(name)
                    self._fetcher.release(f"www.{name}")
                if finish is not None:
                    await finish(name)
                if name not in self.refused:
                    self.surveyed += 1
                if self.on_site is not None:
                    self.on_site(name)

        # One worker's failure is the run's: the others stop with it (a gather alone would
        # leave them surveying after the run had raised).
        tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    # -- robots.txt --------------------------------------------------------------------------

    async def _site(self, rank: int | None,
                    domain: str) -> tuple[SiteRecord, bytes | None] | None:
        """Fetch and record one domain's robots.txt; the record and the body kept (``None``:
        not fetched, the survey's settings forbid it, and not recorded)."""
        answer = await self._robots(f"{self._scheme}://{domain}/robots.txt")
        if answer.refused:
            self.refused.add(domain)
            return None
        if answer.outcome is Outcome.HTML and not domain.startswith("www."):
            # Seed 004's second step: the www name, when the bare one served a home page.
            second = await self._robots(f"{self._scheme}://www.{domain}/robots.txt")
            if second.outcome not in (Outcome.DNS_ERROR, Outcome.RESOLVER_ERROR,
                                      Outcome.CONNECTION_ERROR):
                second.redirects = (*answer.redirects, f"www.{domain}", *second.redirects)
                answer = second
        error = answer.error
        if answer.redirects:
            error = json.dumps({"error": error, "redirects": list(answer.redirects)})
        body = answer.body if answer.status is not None and answer.size else None
        if answer.status is not None and 200 <= answer.status < 300 and body is None:
            body = b""
        outcome = answer.outcome or Outcome.EMPTY
        site = self._store.record(SiteRecord(domain, rank, str(outcome), answer.status, error,
                                             answer.url, None,
                                             answer.size if body is not None else None),
                                  body, self._clock())
        self.done[str(outcome)] = self.done.get(str(outcome), 0) + 1
        return site, body

    async def _site_once(self, rank: int | None, domain: str
                         ) -> tuple[SiteRecord, bytes | None] | None:
        """:meth:`_site`, once per domain whoever asks first (its own turn in the list, or
        another domain sharing a sitemap on it); ``None`` when it was recorded already."""
        future = self._fetching.get(domain)
        if future is None:
            if self._store.recorded(domain) or domain in self.refused:
                return None
            future = asyncio.get_running_loop().create_future()
            self._fetching[domain] = future
            try:
                future.set_result(await self._site(rank, domain))
            except asyncio.CancelledError:
                future.cancel()  # the run stops: whoever waits for it stops too
                raise
            except BaseException as exc:
                future.set_exception(exc)
                future.exception()  # retrieved: a waiter gets it, nobody logs it unread
                raise
            finally:
                del self._fetching[domain]  # the store answers from now on
        return await asyncio.shield(future)

    async def _robots(self, url: str) -> _Answer:
        answer = await self._get(url)
        if answer.outcome is None:
            answer.outcome = body_outcome(answer.body, content_type=answer.content_type,
                                          size=answer.size, max_bytes=self._max_bytes)
        return answer

    # -- one request -----------------------------------------------------------------------

    async def _get(self, url: str) -> _Answer:
        """GET a robots.txt the way all of polite does (:func:`fetch_robots_txt`): redirects
        followed, each hop's host checked first, a redirect back to a URL asked for already
        ending the chain; at once (it takes no turn of its host), each redirect's hop in
        its turn at its host (a request like any other), decoded per Content-Encoding, kept
        up to its cap and counted to its true size. Its connection is kept for the host's
        sitemaps that follow."""
        async def turn(asked: str, target: str) -> HopStart | str:
            return await self._host_turns().politeness.hop_turn(asked, target)

        got = await fetch_robots_txt(
            self._fetcher_in_run(), url, guard=self._guard(), max_bytes=self._max_bytes,
            count_to=_MAX_COUNTED_BYTES, deadline_s=self._deadline_s,
            read_timeout_s=self._read_timeout_s, headers=self._headers,
            in_flight=self._requests, stop_loops=True, turn=turn)
        if got.refused is not None:
            return _Answer(Outcome.CONNECTION_ERROR, error=got.refused, url=got.url,
                           redirects=got.redirects, refused=True)
        if got.loop:
            return _Answer(Outcome.REDIRECT_LOOP, got.status, url=got.url,
                           redirects=got.redirects)
        if got.stopped is not None:
            return _Answer(Outcome.REDIRECT_LOOP, error=got.stopped, url=got.url,
                           redirects=got.redirects)
        if got.error is not None and not (got.status is not None and got.truncated):
            return _Answer(_FAILURES.get(got.failure or "", Outcome.CONNECTION_ERROR),
                           got.status, error=got.error, url=got.url, redirects=got.redirects,
                           seconds=got.seconds)
        assert got.status is not None
        decided = status_outcome(got.status)
        if decided is not None:
            return _Answer(decided, got.status, url=got.url, redirects=got.redirects,
                           seconds=got.seconds)
        return _Answer(None, got.status, url=got.url, redirects=got.redirects,
                       content_type=got.content_type, seconds=got.seconds, body=got.body,
                       size=got.size)

    def _guard(self) -> PublicHosts | None:
        """The private-address guard under the survey's settings (None: --allow-private)."""
        return None if self._allow_private else self._public_hosts()

    async def _private(self, url: str) -> str | None:
        """Why ``url`` may not be asked for under the survey's settings: its host's address
        is private or loopback (without --allow-private)."""
        return await private_refusal(self._guard(), url)

    def _host_turns(self) -> _Turns:
        """The run's politeness driver, made at its first sitemap (a survey of robots.txt
        alone takes no turns and needs none)."""
        if self._turns is None:
            assert self._fetcher is not None, "within a run"
            self._turns = _Turns(self._fetcher, self._public_hosts(), agent=self._agent,
                                 delay_s=self._delay_s, allow_private=self._allow_private)
        return self._turns

    def _walker(self) -> SitemapWalker:
        """A walker on the run's client and the present driver: each file's bytes as sent
        (kept, stored by their hash), up to the survey's caps."""
        return SitemapWalker(
            self._fetcher_in_run(), self._host_turns().politeness,
            max_bytes=self._sitemap_max_bytes, max_urls=self._sitemap_max_urls,
            timeout=self._read_timeout_s, file_deadline_s=self._deadline_s, decode=False,
            in_flight=self._requests, tell_answers=False)

    def _fetcher_in_run(self) -> PageFetcher:
        assert self._fetcher is not None, "within a run"
        return self._fetcher

    def _public_hosts(self) -> PublicHosts:
        assert self._public is not None, "within a run"
        return self._public

    # -- the rules a host's requests follow ----------------------------------------------

    def _rules_from(self, outcome: str, body: bytes | None, url: str) -> _Robots:
        state = rules_state(outcome, body, url, self._clock())
        if isinstance(state, DisallowAll):
            return _Robots(None, f"robots.txt unreachable ({outcome}): RFC 9309 reads that "
                                 "as everything disallowed")
        if isinstance(state, Parsed):
            return _Robots(state.robots, body=body)
        return _Robots(None)

    async def _host_rules(self, domain: str, host: str,
                          own: _Robots) -> _Robots:
        """The robots.txt that governs ``host``: the domain's own (``own``) for its site (the
        name with or without www.), a listed domain's own (fetched now if its turn has not
        come), else read once and kept."""
        if in_scope("site", frozenset((domain,)), host):
            rules = own
        else:
            if host in self._listed:
                await self._site_once(self._listed[host], host)
            site = self._store.site(host)
            if site is not None:
                body = None if site.robots_hash is None else self._store.body(site.robots_hash)
                rules = self._rules_from(site.outcome, body,
                                         site.robots_url or f"http://{host}/robots.txt")
            else:
                rules = await self._shared_robots(host)
        return rules

    async def _shared_robots(self, host: str) -> _Robots:
        """The rules of a host outside the list, read once however many ask at a time."""
        future = self._other_robots.get(host)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._other_robots[host] = future
            try:
                future.set_result(await self._read_other_robots(host))
            except BaseException as exc:
                future.set_exception(exc)
                raise
            finally:
                del self._other_robots[host]
        return await asyncio.shield(future)

    async def _read_other_robots(self, host: str) -> _Robots:
        known = self._store.other_robots(host)
        if known is not None:
            return self._rules_from(known[0], known[1], f"http://{host}/robots.txt")
        url = f"{self._scheme}://{host}/robots.txt"
        answer = await self._robots(url)
        if answer.refused:
            return _Robots(None, answer.error, refused=True)
        outcome = str(answer.outcome)
        body = answer.body if answer.size else None
        self._store.record_other_robots(host, outcome, answer.status, body, self._clock())
        return self._rules_from(outcome, body, answer.url or url)

    # -- sitemaps ----------------------------------------------------------------------------

    async def _domain_sitemaps(self, domain: str,
                               fetched: tuple[SiteRecord, bytes | None] | None) -> None:
        """Read one domain's sitemaps (``fetched``: its robots.txt record and body, when this
        run fetched it; else they are read from the store)."""
        site: SiteRecord | None
        if fetched is not None:
            site, robots_body = fetched
        else:
            site = self._store.site(domain)
            if site is None:  # its robots.txt was not fetched (the settings forbid it)
                return
            robots_body = (None if site is None or site.robots_hash is None
                           else self._store.body(site.robots_hash))
        own = _Robots(None)
        if robots_body is not None and b"sitemap" not in robots_body.lower():
            pass  # no Sitemap line (most files): nothing to read, no rules needed
        elif site is not None:
            own = self._rules_from(site.outcome, robots_body, site.robots_url
                                   or f"{self._scheme}://{domain}/robots.txt")
        listed = own.robots.sitemaps if own.robots is not None else ()
        if not listed:
            # No file to read: the domain's totals alone (the walk, and the politeness
            # driver it takes turns from, are not made for nothing).
            self._store.finish_sitemaps(domain, [], {}, 0, 0, self._clock(), last=None)
            return
        # A robots.txt fetched by this run has no sitemap recorded yet (they come after it).
        recorded = self._store.sitemap_rows(domain) if fetched is None else {}
        files_ok = 0
        reservoir: Reservoir[_KeptURL] = Reservoir(self._max_kept, random.Random(domain))
        ids: dict[str, int] = {}
        last: tuple[SitemapRecord, bytes | None] | None = None
        refused = False  # a file not fetched: the domain's sitemaps are not done

        async def read(item: Listed) -> Visited[_Read]:
            """A file's row: recorded by an earlier run (read again from the store, nothing
            fetched) or fetched now; the children to follow are those of a file read."""
            row = recorded.get(item.url)
            if row is not None:
                entries = (self._reparse(item.url, row.localfile)
                           if row.downloadinfo in _READ_INFOS and row.localfile is not None
                           else [])
                return Visited((row, None, entries, False), _children(entries))
            parent = None if item.parent is None else ids[item.parent]
            row, body, entries = await self._sitemap_file(domain, item, parent, own)
            return Visited((row, body, entries, True),
                           _children(entries) if row.downloadinfo in _READ_INFOS else ())

        sampled: dict[str, str] = {}  # an index sampled -> how, for its children left out

        def select(item: Listed, children: list[str]) -> tuple[list[str], list[str]]:
            """A large index's sample; a child left out that an earlier run recorded keeps
            its row."""
            chosen, left = sample_children(children, self._n0, self._alpha,
                                           random.Random(item.url))
            sampled[item.url] = (f"index of {len(children):,} files: {len(chosen):,} sampled "
                                 f"(n0={self._n0}, alpha={self._alpha})")
            return chosen, [uri for uri in left if uri not in recorded]

        # Every URL listed is a file of its own (the survey counts each as listed), and the
        # same content under two names is two files read.
        walk = SitemapWalker.traverse(
            (Listed(urljoin(f"{self._scheme}://{domain}/", uri), 0, None) for uri in listed),
            read, key=str, select=select)
        async for step in walk:
            if step.result is None:
                continue  # listed again, or a cycle: one row a file
            row, body, entries, new = step.result
            if new:
                if row.downloadinfo == _REFUSED:
                    refused = True
                    self.refused_files += 1
                    continue
                self.sitemap_files[row.downloadinfo] = (
                    self.sitemap_files.get(row.downloadinfo, 0) + 1)
                if step.last:
                    # The domain's last file: its row is written with the domain's totals,
                    # one commit where there would be two; its page URLs are all it adds.
                    last = (row, body)
                    files_ok += row.downloadinfo == "ok"
                    _keep_urls(reservoir, step.listed.url, entries)
                    continue  # nothing is queued after it: the walk ends
                row = self._store.record_sitemap(row, body, self._clock())
            assert row.id is not None
            ids[step.listed.url] = row.id
            files_ok += row.downloadinfo == "ok"
            _keep_urls(reservoir, step.listed.url, entries)
            for uri in step.not_sampled:
                left_row = SitemapRecord(
                    domain, uri, step.listed.level + 1, "not_sampled", parent=row.id,
                    cross_site=self._cross_site(domain, uri), error=sampled[step.listed.url])
                self._store.record_sitemap(left_row, None, self._clock())
                self.sitemap_files["not_sampled"] = self.sitemap_files.get("not_sampled", 0) + 1
        if refused:
            # What was read stays recorded (a later run reads it from the store); the rest,
            # and the domain's totals, wait for a run whose settings let it fetch them.
            if last is not None:
                self._store.record_sitemap(*last, self._clock())
            return
        self._store.finish_sitemaps(domain, list(reservoir.kept), ids, files_ok, reservoir.seen,
                                    self._clock(), last=last)

    def _reparse(self, uri: str, digest: str) -> list[Entry]:
        """A recorded file's entries, read again from its stored body (nothing fetched)."""
        body = self._store.body(digest) or b""
        parser = SitemapParser(uri, max_bytes=self._sitemap_max_bytes,
                               max_urls=self._sitemap_max_urls)
        return parser.feed(body) + parser.close()

    def _cross_site(self, domain: str, uri: str) -> bool:
        host = (urlsplit(uri).hostname or "").lower()
        return not in_scope("site", frozenset((domain,)), host)

    async def _sitemap_file(self, domain: str, item: Listed, parent: int | None,
                            own: _Robots) -> tuple[SitemapRecord, bytes | None, list[Entry]]:
        """Fetch one sitemap file, politely: its row (``parent``: the id of the index that
        lists it), its raw body and its entries."""
        uri = item.url
        cross = self._cross_site(domain, uri)

        def failed(info: str, error: str | None, status: int | None = None,
                   seconds: float | None = None) -> tuple[SitemapRecord, None, list[Entry]]:
            return SitemapRecord(domain, uri, item.level, info, parent,
                                 status=status, seconds=seconds, cross_site=cross,
                                 error=error), None, []

        parts = urlsplit(uri)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("http", "https") or not host:
            return failed("parse_error", "not an http(s) URL")
        if item.level > MAX_SITEMAP_LEVEL:
            return failed("not_sampled", f"deeper than {MAX_SITEMAP_LEVEL} index levels")
        rules = await self._host_rules(domain, host, own)
        if rules.refused:
            return failed(_REFUSED, rules.refusal)
        if rules.refusal is not None:
            return failed("robots_disallowed", rules.refusal)
        if rules.robots is not None and not rules.robots.allowed(uri, self._agent):
            return failed("robots_disallowed", "disallowed by robots.txt")
        refused = await self._private(uri)
        if refused is not None:
            return failed(_REFUSED, refused)
        # Redirects: a hop is a request like any other to its host, read after that host's
        # robots.txt and in its turn.
        hop_rules, seen = rules, {uri}
        loop = False
        deferred: str | None = None  # the host asks to wait longer than the survey waits

        async def check(target: str) -> str | None:
            nonlocal hop_rules, refused, loop
            if target in seen:
                loop = True
                return "a redirect loop"
            seen.add(target)
            refused = await self._private(target)
            if refused is not None:
                return refused
            hop_rules = await self._host_rules(domain, (urlsplit(target).hostname or "").lower(),
                                               own)
            if hop_rules.refused:
                refused = hop_rules.refusal
                return refused
            refusal = hop_rules.refusal
            if refusal is None and hop_rules.robots is not None \
                    and not hop_rules.robots.allowed(target, self._agent):
                refusal = "disallowed by robots.txt"
            return refusal

        async def turn(target: str) -> Taken | str:
            nonlocal deferred
            taken = await self._host_turns().take(target, hop_rules.body)
            if isinstance(taken, Deferred):
                deferred = taken
            return taken

        got = await self._walker().fetch(uri, check=check, turn=turn,
                                         headers=lambda _: self._headers)
        if got.failure == "refused":
            if refused is not None:
                return failed(_REFUSED, refused)
            if loop:
                return failed(str(Outcome.REDIRECT_LOOP), None, got.status, 0.0)
            if deferred is not None:  # a Visit-time window hours away: not the rules' no
                return failed(_DEFERRED, got.error)
            return failed("robots_disallowed", got.error)  # its robots.txt disallows a hop
        if got.failure == "redirects":
            return failed(str(Outcome.REDIRECT_LOOP), got.error, None, 0.0)
        if got.failure not in (None, "status"):
            return failed(str(_FAILURES.get(got.failure or "", Outcome.CONNECTION_ERROR)),
                          got.error, got.status, got.seconds)
        assert got.status is not None
        decided = status_outcome(got.status)
        if decided is not None:
            return failed(str(decided), None, got.status, got.seconds)
        parser = SitemapParser(uri, max_bytes=self._sitemap_max_bytes,
                               max_urls=self._sitemap_max_urls)
        entries = await parse_whole(parser, got.body)
        urls = sum(1 for entry in entries if entry.kind == "url")
        children = len(entries) - urls
        stop = parser.stopped
        info, error = "ok", None
        if stop is not None:
            error = f"{stop.code}: {stop.message}"
        if stop is not None and stop.code in _TOO_BIG_STOPS:
            info = "too_big"
        elif stop is not None and stop.code in _BROKEN_STOPS:
            info = "parse_error"  # cut short: not the file the site meant, whatever came
        elif not entries and (stop is not None or parser.format in (None, "text")):
            # Nothing read, and not an empty urlset or index: what came is no sitemap.
            if error is None and parser.issues:
                error = f"{parser.issues[0].code}: {parser.issues[0].message}"
            looks_html = body_outcome(got.body[:1024], content_type=got.content_type,
                                      max_bytes=1 << 30) is Outcome.HTML
            info = "html" if looks_html else "parse_error"
        kind = {"sitemapindex": "index", "urlset": "urlset"}.get(parser.format or "")
        if kind is None and parser.format is not None:
            kind = "index" if children and not urls else "urlset"
        return SitemapRecord(domain, uri, item.level, info, parent,
                             filetype=_filetype(parser), kind=kind, status=got.status,
                             bytes=parser.bytes_in, url_count=urls, child_count=children,
                             seconds=got.seconds, cross_site=cross, error=error
                             ), got.body, entries

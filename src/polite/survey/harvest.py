"""Fetching robots.txt and sitemaps for many domains, seed 004's way (sections 2.3, 3.2).

robots.txt: ``http://DOMAIN/robots.txt`` first; when that answers HTML (a home page served
instead) or redirects to one, ``www.DOMAIN`` next. Redirects are followed by hand, five at
most, each recorded. Sitemaps: the Sitemap lines of the robots.txt read, index files followed
with each file's indirection level and parent, large indexes sampled (at least
``max(n0, alpha * n)`` of an index's ``n`` children, the others recorded ``not_sampled``),
files on other sites (the seed's "sitemap sharing") fetched after their own robots.txt and
marked ``cross_site``, page URLs kept up to a bound per site (a uniform sample beyond it).

Politeness: one request at a time per host, and between the end of one and the start of the
next the host's delay (its robots.txt Crawl-delay, else the default), whatever the number of
domains at once. Fetching robots.txt does not use up the host's slot, as everywhere in polite
(DESIGN.md): a host's first sitemap may follow its robots.txt at once, and each request after
that waits the delay. Every file is recorded as it ends, so a survey killed at any moment goes on
where it stopped: a robots.txt, a sitemap file or a domain recorded is not fetched again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from polite.core.crawl import in_scope
from polite.core.politeness.rules import DEFAULT_DELAY_S, delays_for
from polite.core.robots import MAX_ROBOTS_BYTES, RobotsTxt, parse
from polite.core.sitemaps import MAX_SITEMAP_BYTES, MAX_SITEMAP_URLS, Entry, SitemapParser
from polite.core.survey.outcomes import Outcome, body_outcome, status_outcome
from polite.core.survey.sampling import (
    DEFAULT_ALPHA,
    DEFAULT_N0,
    MAX_KEPT_URIS,
    Reservoir,
    sample_children,
)
from polite.core.text import decode_text
from polite.errors import ConfigError
from polite.fetch.http import PageFetcher
from polite.fetch.resolve import Resolver
from polite.fetch.robots import PublicHosts, is_public_host
from polite.survey.store import SitemapRecord, SiteRecord, SurveyStore

if TYPE_CHECKING:
    from polite.survey.shared import SharedDomains

__all__ = ["MAX_SITEMAP_LEVEL", "Harvester", "HostGate", "read_domains"]

MAX_REDIRECTS = 5
# HTTP requests in flight at once at most (see Harvester._requests).
MAX_IN_FLIGHT = 200
# Index nesting followed: the seed met level 4 at most (Table 4); deeper files are recorded
# ``not_sampled``.
MAX_SITEMAP_LEVEL = 5
# A robots.txt over the cap is counted to its end (its true size, seed 004's 12 MB case) up
# to this much; past it the size recorded is a lower bound (a compression bomb stops here).
_MAX_COUNTED_BYTES = 256 << 20
# robots.txt outcomes that hold Sitemap lines and rules.
_READABLE = (Outcome.OK, Outcome.TOO_BIG)
# RFC 9309, 2.3.1.4: an unreachable robots.txt (5xx, timeout) means everything is disallowed.
_UNREACHABLE = (Outcome.SERVER_ERROR, Outcome.TIMEOUT, Outcome.CONNECTION_ERROR)
# How a request that got no answer is classed.
_FAILURES = {"timeout": Outcome.TIMEOUT, "dns": Outcome.DNS_ERROR}
# Sitemap parser stops that mean "over a size limit" (seed 004's cityweekend case, bombs).
_TOO_BIG_STOPS = ("too-large", "huge-markup", "too-many-names")
# A sitemap file's row that is never recorded: the survey's settings forbid fetching it.
_REFUSED = "refused"


def read_domains(path: Path) -> list[tuple[int | None, str]]:
    """``rank,domain`` lines (Tranco, Alexa) or one domain a line; blank lines and ``#``
    comments skipped; :class:`ConfigError` with the line number for a line that is neither."""
    domains = []
    for number, line in enumerate(decode_text(path.read_bytes(), str(path)).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        rank_text, comma, name = line.partition(",")
        rank: int | None = None
        if comma:
            if not rank_text.strip().isdigit():
                raise ConfigError(f"{path}:{number}: expected 'rank,domain', got {line!r}")
            rank = int(rank_text)
        else:
            name = rank_text
        name = name.strip().lower().rstrip(".")
        if not name or "/" in name or " " in name:
            raise ConfigError(f"{path}:{number}: not a domain: {line!r}")
        domains.append((rank, name))
    return domains


@dataclass(slots=True)
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    free_at: float = 0.0
    ended_at: float | None = None
    delay_s: float | None = None


class HostGate:
    """One request at a time per host, and ``delay_s`` from the end of one to the start of the
    next: the gap seen at the host is never shorter than its delay."""

    def __init__(self, default_delay_s: float = DEFAULT_DELAY_S, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.default_delay_s = default_delay_s
        self._clock = clock
        self._slots: dict[str, _Slot] = {}

    def set_delay(self, host: str, delay_s: float) -> None:
        """The host's delay from now on, counted from the end of its last request too."""
        slot = self._slot(host)
        slot.delay_s = delay_s
        if slot.ended_at is not None:
            slot.free_at = max(slot.free_at, slot.ended_at + delay_s)

    def _slot(self, host: str) -> _Slot:
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slots[host] = _Slot()
        return slot

    @asynccontextmanager
    async def turn(self, host: str, *, uses_slot: bool = True) -> AsyncIterator[None]:
        """The host's turn: alone, and not before its delay since the last request that
        used the slot; ``uses_slot`` off (robots.txt) lets the next request follow at once."""
        slot = self._slot(host)
        async with slot.lock:
            # Checked again after each sleep: a loop's timers may fire a little early
            # (uvloop counts whole milliseconds, from the time its iteration began).
            while (wait := slot.free_at - self._clock()) > 0:
                await asyncio.sleep(wait)
            try:
                yield
            finally:
                if uses_slot:
                    delay = self.default_delay_s if slot.delay_s is None else slot.delay_s
                    slot.ended_at = self._clock()
                    slot.free_at = slot.ended_at + delay
        if len(self._slots) > 8_192:
            self._forget()

    def _forget(self) -> None:
        """Drop hosts nobody waits for whose delay has passed (memory stays flat)."""
        now = self._clock()
        for host in [h for h, s in self._slots.items()
                     if not s.lock.locked() and s.free_at <= now]:
            del self._slots[host]


# A compressed sitemap inflates up to a thousandfold: it is parsed this many bytes at a time,
# other domains' work let in between, so one bomb does not stall every timer of the survey.
_FEED_STEP = 4_096


async def _parse(parser: SitemapParser, body: bytes) -> list[Entry]:
    """The entries of a whole sitemap file, other domains' work let in between steps."""
    entries: list[Entry] = []
    for start in range(0, len(body), _FEED_STEP):
        entries += parser.feed(body[start:start + _FEED_STEP])
        if parser.stopped is not None:
            break
        if len(body) > _FEED_STEP:
            await asyncio.sleep(0)
    return entries + parser.close()


# A page URL kept from a sitemap: (the file's uri, loc, lastmod, changefreq, priority).
_KeptURL = tuple[str, str, str | None, str | None, float | None]


def _keep_urls(reservoir: Reservoir[_KeptURL], uri: str, entries: list[Entry]) -> list[str]:
    """Offer a file's page URLs to the domain's sample; returns the child sitemaps it
    lists."""
    children: list[str] = []
    for entry in entries:
        if entry.kind == "sitemap":
            children.append(entry.loc)
        else:
            reservoir.add((uri, entry.loc,
                           None if entry.lastmod is None else entry.lastmod.isoformat(),
                           entry.changefreq, entry.priority))
    return children


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


def _filetype(parser: SitemapParser) -> str:
    base = {"urlset": "xml", "sitemapindex": "xml", "text": "text", "rss": "rss",
            "atom": "atom"}.get(parser.format or "", "unknown")
    return f"{base}.gz" if parser.compressed and base in ("xml", "text") else base


@dataclass(slots=True)
class _Queued:
    uri: str
    level: int
    parent: int | None
    ancestors: frozenset[str] = frozenset()


class Harvester:
    """robots.txt (and, unless ``sitemaps`` is off, sitemaps) of many domains,
    ``concurrency`` at once, each file recorded as it ends."""

    def __init__(self, store: SurveyStore, clock: Callable[[], float], *,
                 resolver: Resolver | None = None,
                 concurrency: int = 100, https: bool = False, agent: str = "polite",
                 connect_timeout_s: float = 10.0, read_timeout_s: float = 30.0,
                 max_bytes: int = MAX_ROBOTS_BYTES, allow_private: bool = False,
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
        self._sitemaps = sitemaps
        self._gate = HostGate(delay_s)
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

        # Private addresses refused: the one connected to is the one the guard checked (a
        # name looked up again to connect could answer otherwise).
        guard = PublicHosts(time.monotonic, resolve=addresses)
        self._fetcher = PageFetcher(
            connect_timeout_s=self._connect_timeout_s,
            resolve=guard.address if not self._allow_private
            else None if resolver is None else resolve)
        try:
            yield
        finally:
            await self._fetcher.close()
            self._fetcher = None

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

        await asyncio.gather(*(worker() for _ in range(workers)))

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
            if second.outcome not in (Outcome.DNS_ERROR, Outcome.CONNECTION_ERROR):
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
            except BaseException as exc:
                future.set_exception(exc)
                raise
            finally:
                del self._fetching[domain]  # the store answers from now on
        return await asyncio.shield(future)

    async def _robots(self, url: str) -> _Answer:
        answer = await self._get(url, robots=True)
        if answer.outcome is None:
            answer.outcome = body_outcome(answer.body, content_type=answer.content_type,
                                          size=answer.size, max_bytes=self._max_bytes)
        return answer

    # -- one request, redirects by hand ---------------------------------------------------

    async def _get(self, url: str, *, robots: bool = False) -> _Answer:
        """GET ``url`` in the host's turn, redirects followed by hand. robots.txt: decoded
        per Content-Encoding, kept up to its cap and counted to its true size, the host's
        slot not used up; a sitemap: the bytes as sent (its parser inflates a gzip file
        within its own bounds)."""
        assert self._fetcher is not None, "within a run"
        # a sitemap one byte over its cap is what its parser needs to say "too big"
        max_bytes, count_to = ((self._max_bytes, _MAX_COUNTED_BYTES) if robots
                               else (self._sitemap_max_bytes + 1, 0))
        redirects: list[str] = []
        seen = {url}
        for _ in range(MAX_REDIRECTS + 1):
            host = (urlsplit(url).hostname or "").lower()
            if not self._allow_private and not await self._is_public(host):
                return _Answer(Outcome.CONNECTION_ERROR, error=f"{host} is a private or "
                               "loopback address (--allow-private)", url=url,
                               redirects=tuple(redirects), refused=True)
            async with self._gate.turn(host, uses_slot=not robots), self._requests:
                result = await self._fetcher.get(
                    url, self._headers, max_bytes=max_bytes, count_to=count_to,
                    decode=robots, deadline_s=self._deadline_s,
                    read_timeout_s=self._read_timeout_s)
            status = result.status
            if result.error is not None and not (status is not None and result.truncated):
                return _Answer(_FAILURES.get(result.failure or "", Outcome.CONNECTION_ERROR),
                               status, error=result.error, url=url,
                               redirects=tuple(redirects), seconds=result.elapsed_s)
            assert status is not None
            location = result.headers.get("Location")
            if status in (301, 302, 303, 307, 308) and location:
                target = urljoin(url, location)
                redirects.append(target)
                if target in seen:
                    return _Answer(Outcome.REDIRECT_LOOP, status, url=url,
                                   redirects=tuple(redirects))
                seen.add(target)
                url = target
                continue
            decided = status_outcome(status)
            if decided is not None:
                return _Answer(decided, status, url=url, redirects=tuple(redirects),
                               seconds=result.elapsed_s)
            return _Answer(None, status, url=url, redirects=tuple(redirects),
                           content_type=result.headers.get("Content-Type") or "",
                           seconds=result.elapsed_s, body=result.body, size=result.size)
        return _Answer(Outcome.REDIRECT_LOOP, error=f"more than {MAX_REDIRECTS} redirects",
                       url=url, redirects=tuple(redirects))

    async def _is_public(self, host: str) -> bool:
        """Whether every address of ``host`` is public (a name that does not resolve is
        let through: it fails as a DNS error)."""
        if self._resolver is None:
            return await is_public_host(host)
        try:
            found = await self._resolver.addresses(host)
        except OSError:
            return True
        return all(ipaddress.ip_address(address).is_global for address in found)

    # -- the rules a host's requests follow ----------------------------------------------

    def _rules_from(self, outcome: str, body: bytes | None, url: str) -> _Robots:
        if outcome in _UNREACHABLE:
            return _Robots(None, f"robots.txt unreachable ({outcome}): RFC 9309 reads that "
                                 "as everything disallowed")
        if outcome in _READABLE and body is not None:
            return _Robots(parse(body, url=url))
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
        if rules.robots is not None:
            delays = delays_for(rules.robots.agent_rules(self._agent),
                                default_s=self._delay_s)
            self._gate.set_delay(host, delays.interval_s)
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
        # A robots.txt fetched by this run has no sitemap recorded yet (they come after it).
        recorded = self._store.sitemap_rows(domain) if listed and fetched is None else {}
        files_ok = 0
        reservoir: Reservoir[_KeptURL] = Reservoir(self._max_kept, random.Random(domain))
        queue = [_Queued(urljoin(f"{self._scheme}://{domain}/", uri), 0, None)
                 for uri in listed]
        visited: set[str] = set()
        ids: dict[str, int] = {}
        last: tuple[SitemapRecord, bytes | None] | None = None
        refused = False  # a file not fetched: the domain's sitemaps are not done
        while queue:
            item = queue.pop(0)
            if item.uri in visited or item.uri in item.ancestors:
                continue  # one row a file, however often it is listed
            visited.add(item.uri)
            row = recorded.get(item.uri)
            entries: list[Entry] | None = None
            if row is None:
                row, body, entries = await self._sitemap_file(domain, item, own)
                if row.downloadinfo == _REFUSED:
                    refused = True
                    self.refused_files += 1
                    continue
                self.sitemap_files[row.downloadinfo] = (
                    self.sitemap_files.get(row.downloadinfo, 0) + 1)
                if not queue and not any(entry.kind == "sitemap" for entry in entries):
                    # The domain's last file: its row is written with the domain's totals,
                    # one commit where there would be two; its page URLs are all it adds.
                    last = (row, body)
                    files_ok += row.downloadinfo == "ok"
                    _keep_urls(reservoir, item.uri, entries)
                    break
                row = self._store.record_sitemap(row, body, self._clock())
            assert row.id is not None
            ids[item.uri] = row.id
            files_ok += row.downloadinfo == "ok"
            if row.downloadinfo not in ("ok", "too_big") or row.localfile is None:
                continue
            if entries is None:  # recorded by an earlier run: read again from the store
                entries = self._reparse(item.uri, row.localfile)
            children = list(dict.fromkeys(_keep_urls(reservoir, item.uri, entries)))
            chosen, left = sample_children(children, self._n0, self._alpha,
                                           random.Random(item.uri))
            for uri in left:
                if uri in visited or uri in recorded:
                    continue
                visited.add(uri)
                left_row = SitemapRecord(
                    domain, uri, item.level + 1, "not_sampled", parent=row.id,
                    cross_site=self._cross_site(domain, uri),
                    error=f"index of {len(children):,} files: {len(chosen):,} sampled "
                          f"(n0={self._n0}, alpha={self._alpha})")
                self._store.record_sitemap(left_row, None, self._clock())
                self.sitemap_files["not_sampled"] = self.sitemap_files.get("not_sampled", 0) + 1
            ancestors = item.ancestors | {item.uri}
            queue.extend(_Queued(uri, item.level + 1, row.id, ancestors) for uri in chosen)
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

    async def _sitemap_file(self, domain: str, item: _Queued,
                            own: _Robots) -> tuple[SitemapRecord, bytes | None, list[Entry]]:
        """Fetch one sitemap file, politely: its row, its raw body and its entries."""
        cross = self._cross_site(domain, item.uri)

        def failed(info: str, error: str | None, status: int | None = None,
                   seconds: float | None = None) -> tuple[SitemapRecord, None, list[Entry]]:
            return SitemapRecord(domain, item.uri, item.level, info, item.parent,
                                 status=status, seconds=seconds, cross_site=cross,
                                 error=error), None, []

        parts = urlsplit(item.uri)
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
        if rules.robots is not None and not rules.robots.allowed(item.uri, self._agent):
            return failed("robots_disallowed", "disallowed by robots.txt")
        parser = SitemapParser(item.uri, max_bytes=self._sitemap_max_bytes,
                               max_urls=self._sitemap_max_urls)
        answer = await self._get(item.uri)
        if answer.refused:
            return failed(_REFUSED, answer.error)
        if answer.outcome is not None:
            return failed(str(answer.outcome), answer.error, answer.status, answer.seconds)
        entries = await _parse(parser, answer.body)
        urls = sum(1 for entry in entries if entry.kind == "url")
        children = len(entries) - urls
        stop = parser.stopped
        info, error = "ok", None
        if stop is not None:
            error = f"{stop.code}: {stop.message}"
        if stop is not None and stop.code in _TOO_BIG_STOPS:
            info = "too_big"
        elif not entries and (stop is not None or parser.format in (None, "text")):
            # Nothing read, and not an empty urlset or index: what came is no sitemap.
            if error is None and parser.issues:
                error = f"{parser.issues[0].code}: {parser.issues[0].message}"
            looks_html = body_outcome(answer.body[:1024], content_type=answer.content_type,
                                      max_bytes=1 << 30) is Outcome.HTML
            info = "html" if looks_html else "parse_error"
        kind = {"sitemapindex": "index", "urlset": "urlset"}.get(parser.format or "")
        if kind is None and parser.format is not None:
            kind = "index" if children and not urls else "urlset"
        return SitemapRecord(domain, item.uri, item.level, info, item.parent,
                             filetype=_filetype(parser), kind=kind, status=answer.status,
                             bytes=parser.bytes_in, url_count=urls, child_count=children,
                             seconds=answer.seconds, cross_site=cross, error=error
                             ), answer.body, entries

"""Finding and reading a site's sitemaps, politely.

The walk starts from the Sitemap lines of the site's robots.txt (and, when asked, the usual
well-known paths), reads each file as it streams in, and follows index files breadth first.
Every request waits for its slot from the politeness service, so a walk never hits a host
harder than the host's robots.txt and the operator allow; a 429 or 503 pauses the host.

Bounds: index nesting (``max_depth``), files per walk (``max_files``), bytes and entries per
file (the protocol's 50 MB / 50,000), a time limit per file. Files are read once: the same
URL twice, an index that lists itself or an ancestor (a cycle), and a ``.xml`` and ``.xml.gz``
with the same content are each read or counted once.

The walk itself (:meth:`SitemapWalker.traverse`) and one file's exchange
(:meth:`SitemapWalker.fetch`) take their reader, their selection of an index's children and
each hop's check and turn from the caller: ``polite survey`` walks with them, keeping every
URL listed, each file's bytes and its rows from an earlier run.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, NamedTuple, TypeVar, cast
from urllib.parse import urljoin

from polite.core.crawl import in_scope
from polite.core.robots.lifecycle import Parsed
from polite.core.sitemaps import Entry, ParseIssue, SitemapParser
from polite.core.sitemaps.model import MAX_SITEMAP_BYTES, MAX_SITEMAP_URLS
from polite.errors import InvalidURL
from polite.fetch.http import FetchResult, HttpClient, Sink
from polite.fetch.politeness import HostLease, Politeness, message
from polite.fetch.redirects import Check, follow, redirect_target
from polite.fetch.robots import normal_url, split_origin

__all__ = ["WELL_KNOWN_PATHS", "CrossHost", "Deferred", "Failure", "Fetched", "Listed",
           "SitemapFile", "SitemapWalker", "Step", "Taken", "Visited", "WalkSummary",
           "parse_whole", "polite_turn"]

CrossHost = Literal["host", "site", "any"]
# Why a file's exchange gave no 2xx: the client's own failures (timeout, dns, resolver,
# connection, private, invalid), an answer of 3xx or more that is no redirect (status), a
# hop refused by the walk's check or turn (refused), or a chain of too many redirects
# (redirects).
Failure = Literal["timeout", "dns", "resolver", "connection", "private", "invalid", "status",
                  "refused", "redirects"]
R = TypeVar("R")


class Taken(NamedTuple):
    """A turn at a host, taken: when (the time.monotonic clock) and the slot's number
    (:attr:`~polite.fetch.politeness.Answer.grant`; 0: none to keep)."""

    at: float
    grant: int = 0
    lease: HostLease | None = None  # the host's lease taken with it (polite_turn's lease_s)


class Deferred(str):
    """Why a turn is not taken when the host asks to wait longer than a walk waits (a
    Visit-time window hours away): a refusal of the moment, not of the site's rules."""

    __slots__ = ()


# A hop's turn at its host, taken just before it is asked for (and again when its request
# could not leave in time), or why it may not be asked for.
Turn = Callable[[str], Awaitable[Taken | str]]

# Where sites put a sitemap when robots.txt names none (the protocol's own example path and
# the two most common variants).
WELL_KNOWN_PATHS = ("/sitemap.xml", "/sitemap_index.xml", "/sitemap.xml.gz")
# How long one file may take to arrive, whatever the per-read timeouts: a server that drips
# a byte a second must not hold a walk for good.
FILE_DEADLINE_S = 120.0
READ_TIMEOUT_S = 30.0  # no byte of a file for this long: it failed
# A host that asks to wait longer than this per request is reported, not waited for.
MAX_POLITE_WAIT_S = 300.0
_CLIENT_FAILURES = frozenset({"timeout", "dns", "resolver", "connection", "private",
                              "invalid"})
# Page URLs remembered to drop duplicates across files; past it, duplicates are counted
# through a second sighting only within one file.
MAX_REMEMBERED_URLS = 2_000_000


async def polite_turn(politeness: Politeness, url: str,
                      max_wait_s: float = MAX_POLITE_WAIT_S, *,
                      lease_s: float | None = None) -> Taken | str:
    """Wait for ``url``'s slot and take it (the walker's and the survey's turn for each
    file); the reason when it may not be fetched at all, or when its host asks to wait
    longer than ``max_wait_s`` (a Visit-time window hours away: reported, not waited for).
    ``lease_s``: the turn holds its host's lease too (:meth:`Politeness.lease`), which the
    caller ends once the request is over."""
    waited = 0.0
    while True:
        (found,) = await politeness.check([url], reserve=True, lease_s=lease_s)
        if found.allowed:
            return Taken(time.monotonic(), found.grant,
                         None if lease_s is None else politeness.lease(found, lease_s))
        pause = found.wait_s
        if pause is None:
            return message(found) or "not allowed"
        if waited + pause > max_wait_s:
            return Deferred(f"the host asks to wait {pause:.0f} s; more than "
                            f"{max_wait_s:.0f} s")
        await asyncio.sleep(pause)
        waited += pause


@dataclass(frozen=True, slots=True)
class Fetched:
    """One file's exchange, its redirects followed: a 2xx (``failure`` None, its bytes in
    ``body`` when the walk keeps them) or what stopped it, as a value."""

    url: str  # the last URL asked for
    status: int | None = None  # the last answer's
    failure: Failure | None = None
    error: str | None = None
    seconds: float = 0.0  # the last exchange's
    content_type: str = ""
    body: bytes = b""


# A compressed sitemap inflates up to a thousandfold: a whole file is parsed this many bytes
# at a time, other work let in between, so one bomb does not stall every timer of the loop.
_FEED_STEP = 4_096


async def parse_whole(parser: SitemapParser, body: bytes) -> list[Entry]:
    """The entries of a whole sitemap file, other work let in between steps."""
    entries: list[Entry] = []
    for start in range(0, len(body), _FEED_STEP):
        entries += parser.feed(body[start:start + _FEED_STEP])
        if parser.stopped is not None:
            break
        if len(body) > _FEED_STEP:
            await asyncio.sleep(0)
    return entries + parser.close()


@dataclass(frozen=True, slots=True)
class SitemapFile:
    """One sitemap file the walk met: read, skipped or failed (``error``).

    ``level`` is seed 004's indirection level: 0 for a file named by robots.txt (or found at
    a well-known path), one more for each index file passed through to reach it.
    """

    url: str
    level: int
    parent: str | None = None
    format: str | None = None
    urls: int = 0  # page URLs kept (duplicates and off-policy ones not counted)
    sitemaps: int = 0  # child sitemaps listed
    duplicates: int = 0  # page URLs already listed elsewhere
    off_policy: int = 0  # page URLs on a host the cross-host policy rules out
    status: int | None = None
    compressed: bool = False
    bytes: int = 0
    seconds: float = 0.0
    error: str | None = None
    duplicate_of: str | None = None
    issues: tuple[ParseIssue, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "url": self.url, "level": self.level, "parent": self.parent,
            "format": self.format, "urls": self.urls, "sitemaps": self.sitemaps,
            "duplicates": self.duplicates, "offPolicy": self.off_policy,
            "status": self.status, "compressed": self.compressed, "bytes": self.bytes,
            "seconds": round(self.seconds, 3), "error": self.error,
            "duplicateOf": self.duplicate_of,
            "issues": [{"line": i.line, "code": i.code, "severity": str(i.severity),
                        "message": i.message, "count": i.count,
                        "lines": list(i.lines or (i.line,))} for i in self.issues],
        }


@dataclass(slots=True)
class WalkSummary:
    """Totals of a walk, with seed 004's Table 4: files by indirection level."""

    site: str
    robots: str = ""  # how the site's robots.txt was read
    robots_sitemaps: int = 0
    files: int = 0
    indexes: int = 0
    urls: int = 0
    duplicates: int = 0
    errors: int = 0
    skipped: int = 0
    levels: dict[int, int] = field(default_factory=dict)

    def add(self, file: SitemapFile) -> None:
        if file.error is not None:
            self.errors += 1
            return
        if file.duplicate_of is not None:
            self.skipped += 1
            return
        self.files += 1
        if file.format == "sitemapindex":
            self.indexes += 1
        self.urls += file.urls
        self.duplicates += file.duplicates
        if file.urls:
            self.levels[file.level] = self.levels.get(file.level, 0) + 1

    def as_json(self) -> dict[str, object]:
        return {"site": self.site, "robots": self.robots,
                "robotsSitemaps": self.robots_sitemaps,
                "files": self.files, "indexes": self.indexes, "urls": self.urls,
                "duplicates": self.duplicates, "errors": self.errors,
                "skipped": self.skipped,
                "levels": {str(level): count for level, count in sorted(self.levels.items())}}


@dataclass(frozen=True, slots=True)
class Listed:
    """A sitemap file a walk met: where it was listed (``parent``, None for one the walk
    started from), its indirection level, and the index files above it (one of them listed
    again is a cycle)."""

    url: str
    level: int
    parent: str | None
    listed_in_robots: bool = False
    well_known: bool = False
    ancestors: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Visited(Generic[R]):
    """What reading a listed file gave: the reader's ``result`` (None: nothing to report),
    the child sitemaps to follow, and whether the URL now counts as met (listed again, it
    is a duplicate rather than read again)."""

    result: R | None
    children: Sequence[str] = ()
    met: bool = True


@dataclass(frozen=True, slots=True)
class Step(Generic[R]):
    """One listed file of a walk, in the order read: what the reader made of it (None: a
    cycle or a duplicate, not read, or nothing to report), the children left unread by the
    walk's selection, and whether it is the walk's last file (nothing queued after it)."""

    listed: Listed
    result: R | None = None
    cycle: bool = False
    duplicate_of: str | None = None
    not_sampled: tuple[str, ...] = ()
    last: bool = False


def _key(url: str) -> str:
    """The URL a file is known by in a walk (the same file under two spellings is met
    once); an invalid one as it is (its reader says why it is not read)."""
    try:
        return normal_url(url)
    except InvalidURL:
        return url


class SitemapWalker:
    """Walks the sitemaps of sites, one file at a time per site, politely.

    ``cross_host`` says which hosts a site's sitemap files and page URLs may be on:
    ``host`` (the protocol's rule: the site's own host), ``site`` (also the host with or
    without ``www.``), or ``any``.
    """

    def __init__(
        self,
        client: HttpClient,
        politeness: Politeness,
        *,
        max_depth: int = 5,
        max_files: int = 1_000,
        cross_host: CrossHost = "host",
        well_known: bool = False,
        max_bytes: int = MAX_SITEMAP_BYTES,
        max_urls: int = MAX_SITEMAP_URLS,
        timeout: float = READ_TIMEOUT_S,
        file_deadline_s: float = FILE_DEADLINE_S,
        max_wait_s: float = MAX_POLITE_WAIT_S,
        decode: bool = True,
        in_flight: asyncio.Semaphore | None = None,
        tell_answers: bool = True,
        host_lease_s: float | None = None,
    ) -> None:
        if cross_host not in ("host", "site", "any"):
            raise ValueError(f"cross_host must be host, site or any, not {cross_host!r}")
        self._client = client
        self._politeness = politeness
        self.max_depth = max_depth
        self.max_files = max_files
        self.cross_host = cross_host
        self.well_known = well_known
        self.max_bytes = max_bytes
        self.max_urls = max_urls
        self._timeout = timeout
        self.file_deadline_s = file_deadline_s
        self.max_wait_s = max_wait_s
        # Off: a file's bytes as sent (its parser inflates a gzip file within its own
        # bounds), for a walk that keeps them.
        self._decode = decode
        # Requests in flight at once, shared with the caller's other work when given.
        self._in_flight = in_flight
        # Off: the driver is not told each answer's time and status (one with no adaptive
        # delay and no back-off has no use for them, and a survey meets too many hosts to
        # keep a time for each).
        self._tell_answers = tell_answers
        # Given: processes sharing the store have one request of a host in flight at a
        # time; each turn of the walk's takes its host's lease for at most this long, which
        # its hop ends (by default longer than a file may take: it never lapses while the
        # request is out).
        self._lease_s = host_lease_s

    def with_limits(self, *, max_files: int, max_depth: int) -> SitemapWalker:
        """The same walker (client, politeness, policy) with other limits."""
        walker = copy.copy(self)
        walker.max_files, walker.max_depth = max_files, max_depth
        return walker

    # -- policy ----------------------------------------------------------------------------

    def _on_policy(self, site_host: str, url: str) -> bool:
        if self.cross_host == "any":
            return True
        try:
            host = split_origin(url)[1]
        except InvalidURL:
            return False
        return in_scope(self.cross_host, frozenset((site_host,)), host)

    # -- discovery ---------------------------------------------------------------------------

    async def discover(self, site: str) -> list[str]:
        """The sitemap URLs the site's robots.txt names, in order, once each."""
        return (await self._discover(site))[0]

    async def _discover(self, site: str) -> tuple[list[str], str]:
        robots_url = split_origin(site)[0] + "/robots.txt"
        state = await self._politeness.robots_state(robots_url)
        if not isinstance(state, Parsed):
            return [], f"robots.txt: {getattr(state, 'reason', '') or type(state).__name__}"
        found: dict[str, str] = {}
        for location in state.robots.sitemaps:
            url = urljoin(robots_url, location)
            try:
                found.setdefault(normal_url(url), url)
            except InvalidURL:
                continue
        return list(found.values()), f"robots.txt: {state.status}"

    # -- the walk ----------------------------------------------------------------------------

    async def walk(self, site: str, summary: WalkSummary | None = None, *,
                   headers: Mapping[str, str] | None = None
                   ) -> AsyncIterator[tuple[SitemapFile, list[Entry]]]:
        """Each file as it is finished, with its page entries (duplicates and off-policy
        URLs left out). ``summary``, when given, is kept up to date. ``headers``: those of
        every request to the site's host in place of the ones the client assembles for it
        (:class:`~polite.fetch.http.RequestHeaders`)."""
        origin, site_host = split_origin(site)
        summary = summary if summary is not None else WalkSummary(origin)
        listed, summary.robots = await self._discover(site)
        summary.robots_sitemaps = len(listed)
        start = [Listed(url, 0, None, listed_in_robots=True) for url in listed]
        if not start and self.well_known:
            start = [Listed(origin + path, 0, None, well_known=True)
                     for path in WELL_KNOWN_PATHS]
        contents: dict[bytes, str] = {}  # digest of a file's entries -> the URL read
        pages: set[str] = set()
        fetched = 0

        async def read(item: Listed) -> Visited[tuple[SitemapFile, list[Entry]]]:
            nonlocal fetched
            try:
                normal_url(item.url)
            except InvalidURL as exc:
                return _failed(item, str(exc))
            if item.level > self.max_depth:
                return _failed(item, f"deeper than {self.max_depth} index levels")
            if not self._on_policy(site_host, item.url):
                return _failed(item, f"on another host than {site_host} (cross-host "
                                     f"policy {self.cross_host!r})")
            if fetched >= self.max_files:
                return _failed(item, f"more than {self.max_files} files; not read")
            fetched += 1
            file, entries, children, digest = await self._read(item, site_host, pages,
                                                                headers=headers)
            if file.error is None and (file.urls or file.sitemaps or file.duplicates):
                if digest in contents:  # the same content under another name (.xml.gz)
                    file = _replace_duplicate(file, contents[digest])
                    entries, children = [], []
                else:
                    contents[digest] = item.url
            if item.well_known and file.status == 404:
                return Visited(None)  # a well-known path that is not there is no error
            return Visited((file, entries), children)

        async for step in SitemapWalker.traverse(start, read):
            item = step.listed
            if step.cycle:
                got = SitemapFile(item.url, item.level, item.parent,
                                  error="a cycle: the file lists itself or an index above it")
            elif step.duplicate_of is not None:
                got = SitemapFile(item.url, item.level, item.parent,
                                  duplicate_of=step.duplicate_of)
            elif step.result is None:
                continue
            else:
                got, entries = step.result
                summary.add(got)
                yield got, entries
                continue
            summary.add(got)
            yield got, []

    @staticmethod
    async def traverse(
        start: Iterable[Listed], read: Callable[[Listed], Awaitable[Visited[R]]], *,
        key: Callable[[str], str] = _key,
        select: Callable[[Listed, list[str]], tuple[Sequence[str], Sequence[str]]]
        | None = None,
    ) -> AsyncIterator[Step[R]]:
        """The walk itself: the files from ``start``, then the children each lists, breadth
        first, each handed to ``read`` once (by ``key``), a cycle or a duplicate reported
        unread. ``select``, when given, chooses which of a file's children are read (a
        sample of a large index): the others are met (not read later, wherever listed) and
        reported once in the file's step. Each step is yielded once its file is read and
        before the next is, so a caller that records it may do so in order."""
        queue = deque(start)
        seen: dict[str, str] = {}  # a file's key -> the URL met
        while queue:
            item = queue.popleft()
            known = key(item.url)
            if known in item.ancestors:
                yield Step(item, cycle=True)
                continue
            if known in seen:
                yield Step(item, duplicate_of=seen[known])
                continue
            if (visited := await read(item)).met:
                seen[known] = item.url
            children: Sequence[str] = visited.children
            left: list[str] = []
            if select is not None and children:
                children, unread = select(item, list(children))
                for url in unread:
                    if (other := key(url)) not in seen:
                        seen[other] = url
                        left.append(url)
            last = not queue and not visited.children
            ancestors = item.ancestors | {known}
            queue.extend(Listed(child, item.level + 1, item.url, ancestors=ancestors)
                         for child in children)
            yield Step(item, visited.result, not_sampled=tuple(left), last=last)

    @staticmethod
    def _headers(url: str, site_host: str, headers: Mapping[str, str] | None
                 ) -> Mapping[str, str] | None:
        """A request's headers: the walk's own for the site's host, else None (those the
        client assembles for the host the file is on)."""
        if headers is not None:
            try:
                if split_origin(url)[1] == site_host:
                    return headers
            except InvalidURL:
                pass
        return None

    async def _polite_turn(self, url: str) -> Taken | str:
        """Wait for ``url``'s slot and take it; the reason when it may not be fetched at
        all."""
        return await polite_turn(self._politeness, url, self.max_wait_s,
                                 lease_s=self._lease_s)

    async def fetch(self, url: str, *, check: Check, turn: Turn | None = None,
                    taken: Taken | None = None, sink: Sink | None = None,
                    headers: Callable[[str], Mapping[str, str] | None] = lambda _: None
                    ) -> Fetched:
        """One file's exchange, redirects followed by :func:`follow`: ``check`` is asked
        about each redirect's target before it is (``url`` itself is the caller's to
        check), ``turn``, when given, takes each hop's turn at its host just before it is
        asked for (``taken``: the first hop's, taken already), and a new one when the hop's
        request was held back because its slot went to another request. The body goes to
        ``sink`` when given, else it is kept in the value (up to the walk's cap, one byte
        over it: what the parser needs to say "too big"). ``headers``: a request's headers
        (None: the client's for its host)."""
        status: int | None = None
        failure: Failure | None = None
        error: str | None = None
        seconds, content_type, body, refused = 0.0, "", b"", False
        at = url

        async def checked(target: str) -> str | None:
            nonlocal refused
            why = await check(target)
            refused = why is not None
            return why

        first = taken

        async def hop(target: str) -> str | None:
            nonlocal status, failure, error, seconds, content_type, body, at, first
            at = target
            while True:
                given, first = first, None
                if given is None and turn is not None:
                    turned = await turn(target)
                    if isinstance(turned, str):
                        failure, error = "refused", turned
                        return None
                    given = turned
                # A turn that holds its host's lease (Taken.lease) ends it once its request
                # is over, whichever way: with the answer noted, or at once when there was
                # none, when the request was held back, on an error or a cancel.
                lease = None if given is None else given.lease
                async with lease or contextlib.nullcontext():
                    async with self._in_flight or contextlib.nullcontext():
                        # The request may leave later than its slot (a request in flight to
                        # wait for, a connection to open, a busy loop): the host's next slot
                        # counts from when it really went, noted as it goes, and a request
                        # whose slot was given again meanwhile does not go (LateStart).
                        late = self._politeness.late_start(
                            target, 0.0 if given is None else time.monotonic() - given.at,
                            0 if given is None else given.grant)
                        got = await self._client.get(
                            target, headers(target), max_bytes=self.max_bytes + 1,
                            deadline_s=self.file_deadline_s, read_timeout_s=self._timeout,
                            agent=self._politeness.agent, sink=sink, decode=self._decode,
                            leaving=late)
                    await late.noted()
                    if got.failure == "withheld" and turn is not None:
                        continue  # not sent: the host is free until the next turn
                    status, seconds = got.status, got.elapsed_s
                    target_next: str | None = None
                    if got.status is None or (got.error is not None and not got.truncated):
                        failure = cast(Failure, got.failure) \
                            if got.failure in _CLIENT_FAILURES else "connection"
                        error = got.error or "no answer"
                    else:
                        target_next = redirect_target(target, got.status,
                                                      got.headers.get("location"))
                        if target_next is None and got.status >= 300:
                            failure, error = "status", f"HTTP {got.status}"
                        if target_next is None:  # the answer kept (a survey reads a 300's)
                            content_type = got.headers.get("content-type") or ""
                            body = got.body
                    if got.status is not None and self._tell_answers:
                        # The host's response time is the wait for its answer, not the
                        # time the body takes to stream and be parsed.
                        held = lease or HostLease(self._politeness, target)  # or none
                        await held.note_response(got.status, elapsed_s=got.answered_s,
                                                 retry_after=got.headers.get("retry-after"))
                    return target_next

        try:
            stopped = await follow(url, hop, checked)
        finally:
            if first is not None and first.lease is not None:  # the turn was never used
                await first.lease.end()
        if stopped is not None:
            failure, error = ("refused" if refused else "redirects"), stopped
        return Fetched(at, status, failure, error, seconds, content_type, body)

    async def read(self, url: str, emit: Callable[[list[Entry]], None]) -> SitemapFile:
        """Read one sitemap file, politely, handing its entries (all of them, child
        sitemaps too, whatever their host) to ``emit`` as they arrive."""
        split_origin(url)  # InvalidURL for what is not http(s)
        file, _, _, _ = await self._read(Listed(url, 0, None), "", set(), emit=emit)
        return file

    async def _read(self, item: Listed, site_host: str, pages: set[str],
                    emit: Callable[[list[Entry]], None] | None = None,
                    headers: Mapping[str, str] | None = None
                    ) -> tuple[SitemapFile, list[Entry], list[str], bytes]:
        taken = await self._polite_turn(item.url)
        if isinstance(taken, str):
            return SitemapFile(item.url, item.level, item.parent, error=taken), [], [], b""
        # Timed from the slot on: the wait for it is the host's delay, not its response time.
        started = time.monotonic()
        parser = SitemapParser(item.url, max_bytes=self.max_bytes, max_urls=self.max_urls)
        entries: list[Entry] = []
        children: list[str] = []
        duplicates = off_policy = 0
        status: int | None = None
        error: str | None = None

        hasher = hashlib.blake2b(digest_size=16)  # of every entry, to spot a same-content twin

        emitted = 0

        def take(batch: list[Entry]) -> None:
            nonlocal duplicates, off_policy, emitted
            for entry in batch:
                hasher.update(f"{entry.kind} {entry.loc}\n".encode("utf-8", "surrogatepass"))
                if entry.kind == "sitemap":
                    children.append(entry.loc)
                elif emit is not None:
                    emitted += 1
                elif not self._on_policy(site_host, entry.loc):
                    off_policy += 1
                elif entry.loc in pages:
                    duplicates += 1
                else:
                    if len(pages) < MAX_REMEMBERED_URLS:
                        pages.add(entry.loc)
                    entries.append(entry)
            if emit is not None:
                emit(batch)

        # Redirects are followed here, each hop checked against the walk's hosts and then,
        # in its own turn, against robots.txt and the private-address guard before it is
        # asked for (a redirect is a request like any other to the site that gets it).
        async def check(url: str) -> str | None:
            if emit is None and not self._on_policy(site_host, url):
                return f"on another host (cross-host policy {self.cross_host!r})"
            return None

        def sink(got: FetchResult, piece: bytes) -> bool:
            # A redirect's or an error's body is not the file; the file is parsed as it
            # arrives (a Content-Encoding the site's Encoding asked for already undone by
            # the client, a bounded step at a time; a gzipped file itself, .xml.gz, is the
            # parser's), and the rest is not read once the parser has stopped.
            if got.status is None or not 200 <= got.status < 300:
                return True
            take(parser.feed(piece))
            return parser.stopped is None

        async def turn(url: str) -> Taken | str:
            turned = await self._polite_turn(url)
            if isinstance(turned, str) and url != item.url:
                return f"redirected to {url}: {turned}"
            return turned

        got = await self.fetch(item.url, check=check, turn=turn, taken=taken, sink=sink,
                               headers=lambda url: self._headers(url, site_host, headers))
        status, error = got.status, got.error
        if got.failure is None:
            take(parser.close())
        if error is None and parser.stopped is not None and parser.count == 0:
            error = parser.stopped.message
        file = SitemapFile(
            item.url, item.level, item.parent, parser.format, len(entries) + emitted, len(children),
            duplicates, off_policy, status, parser.compressed, parser.bytes_in,
            time.monotonic() - started, error, None, tuple(parser.issues))
        return file, entries, children, hasher.digest()


def _failed(item: Listed, error: str) -> Visited[tuple[SitemapFile, list[Entry]]]:
    """A listed file not read, and why (not met: listed again, it is reported again)."""
    return Visited((SitemapFile(item.url, item.level, item.parent, error=error), []),
                   met=False)


def _replace_duplicate(file: SitemapFile, original: str) -> SitemapFile:
    return SitemapFile(file.url, file.level, file.parent, file.format, 0, 0, 0, 0,
                       file.status, file.compressed, file.bytes, file.seconds, None, original,
                       file.issues)

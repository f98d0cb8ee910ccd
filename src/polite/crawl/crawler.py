"""The polite crawler: a frontier in a store, a scheduler that never polls, the politeness
driver that ``polite serve`` uses, and seed 000's REGP guidance.

Hosts wait in a heap keyed by the time they are due (DESIGN.md, "The crawler"): the time
the politeness driver gave (a delay, a closed Visit-time window, a 429 back-off: the seed's
"countdown timer") or the time a URL of theirs may be revisited. Nothing holds a worker
while it waits; ``concurrency`` bounds the fetches in flight, ``per_host`` those to one
host. Before a host's first page the crawler reads its robots.txt, refuses the host when its
``Language`` shares nothing with the crawler's, and reads every sitemap robots.txt names
(seed 000, 4.2: the "non-crawl queue"), queueing each entry's snapshot in place of the
original it stands for.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import inspect
import time
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field, fields
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from polite.clock import Clock
from polite.config import CRAWL
from polite.core.crawl import (
    PagePlan,
    Scope,
    language_refusal,
    link_key,
    next_visit_s,
    page_plan,
    resolve_link,
    resolve_links,
    scope_test,
)
from polite.core.identity import parse_price
from polite.core.politeness.values import Disallowed, RefusalReason, Refused
from polite.core.robots.lifecycle import DisallowAll, Parsed, RobotsState
from polite.core.robots.meta import (
    MAX_HTML_CHARS,
    RobotsDirectives,
    combine,
    parse_x_robots_tag,
)
from polite.core.robots.model import AgentRules
from polite.core.robots.usage import (
    MAX_TDMREP_BYTES,
    TDMREP_PATH,
    Preferences,
    TdmRep,
    from_headers,
    from_html,
    from_robots,
    from_tdmrep,
    read_tdmrep_steps,
)
from polite.core.robots.usage import (
    combine as combine_usage,
)
from polite.core.urls import split_origin
from polite.crawl.html import Link, extract_links, is_small
from polite.crawl.output import WARC_GZIP_LEVEL, CrawlOutput, Exchange, WriteFailed, iso_utc
from polite.errors import InvalidURL, PoliteError
from polite.fetch._budget import TDMREP_MEMORY_BYTES, tdmrep_files
from polite.fetch._steps import stepped
from polite.fetch.http import FetchResult, HttpClient
from polite.fetch.politeness import Answer, HostLease, Politeness, lease_length_s, message
from polite.fetch.sitemaps import SitemapWalker
from polite.storage.base import cannot_write, raise_if_cancelled
from polite.storage.frontier import (
    FrontierCounts,
    FrontierItem,
    FrontierStore,
    settle,
    unseen,
)
from polite.storage.sqlite import Transaction

__all__ = ["CrawlSettings", "CrawlStats", "Crawler", "Page", "PageHook", "StoreUnreachable"]

# Hosts whose state says their guidance is read; anything else is set up before a page.
READY = "ready"
REFUSED = "refused: "
HTML_TYPES = ("text/html", "application/xhtml+xml")
REDIRECTS = (301, 302, 303, 307, 308)
RETRIED = (429, 503)
# Hosts a worker sharing the frontier reads at each poll, at most: a worker's hosts at once
# are far fewer, and those it misses come up again at the next poll.
DUE_HOSTS_READ = 1_000
# A poll of the shared frontier is asked again no sooner than this many times what it took:
# a few milliseconds in Redis, where the poll interval decides; a scan of a large SQLite
# file shared by the processes of one machine costs at most a tenth of a worker's time.
POLL_COST_FACTOR = 10
MAX_MARGIN_S = 0.010
# A host told to wait is asked again a little after the time it was given (5 ms and 2 % of
# the wait, 10 ms at most): the spacing is then kept where it is measured, at the site,
# whatever the milliseconds a request takes to leave here and to be read there on a busy
# machine. Those milliseconds do not grow with the wait, so neither does the margin past
# 10 ms (it was 50 ms at most, 25 ms at a 1 s Crawl-delay: 2.4 % of such a crawl's pages).
def _margin_s(wait_s: float) -> float:
    return min(MAX_MARGIN_S, 0.005 + 0.02 * wait_s)


# While a shared store (Redis) does not answer, it is asked again after this long, doubled
# each time up to the most: its return is seen within seconds, and a dead one costs little.
STORE_RETRY_S = 0.5
STORE_RETRY_MAX_S = 8.0
# A store that answers again is said to be back once it has answered this long: the first
# requests after a restart may still meet a connection the restart closed, and that is
# the same outage, not a new one to tell.
STORE_SETTLE_S = 3.0
# A crawl that owns its SQLite file commits what its pages changed together: after this
# long, or this many pages, whichever comes first. One commit where there were a hundred
# writes the pages every page changes (the queue's index, the counter, the slots) to the
# log once. A kill loses what was not committed: those pages are fetched again (their
# lines and records are on disk already, written before the commit).
GROUP_COMMIT_S = 0.01
GROUP_COMMIT_PAGES = 100
# Below this much free space in the crawl's folder, each page is committed on its own again:
# a full disk then undoes one page's changes, which the crawl writes again in its reserve,
# not a group's.
GROUP_MIN_FREE_BYTES = 64 << 20


class StoreUnreachable(PoliteError):
    """The crawl's store did not answer for longer than the crawl waits for it."""



@dataclass(frozen=True, slots=True)
class CrawlSettings:
    """How a crawl runs; the command line's options. Each value is checked as
    :data:`polite.config.CRAWL` declares it, its keyword named in the error."""

    agent: str = "polite-crawler"
    user_agent: str | None = None  # the User-Agent header; the agent's token when None
    scope: Scope = "host"
    max_pages: int | None = None  # pages fetched by this run (a crawl resumed fetches more)
    max_depth: int | None = None
    max_pages_per_host: int = 100_000  # a budget against traps
    concurrency: int = 64
    per_host: int = 1
    languages: tuple[str, ...] = ()
    sitemaps: bool = True
    well_known_sitemaps: bool = False
    revisit: bool = False
    max_body_bytes: int = 10 * 1024 * 1024  # a body's cap, counted decoded (gzip bombs)
    max_redirects: int = 5
    fetch_deadline_s: float = 60.0  # a whole fetch, however slowly the bytes drip
    lease_s: float = 600.0
    store_patience_s: float = 600.0  # a shared store unreachable this long ends the crawl
    max_attempts: int = 3  # 429 / 503 answers before a URL is given up
    robots_attempts: int = 3  # robots.txt failures (5xx, 429, network) before a site's
    # URLs are given up; until then the site waits for the fetcher's back-off
    warc: bool = True
    warc_gzip_level: int = WARC_GZIP_LEVEL  # zlib's, for the WARC records (1: fastest)
    # What the pages are for (search, train-ai, ...): pages whose AI-usage preferences
    # refuse it are fetched but not kept. None: preferences recorded, nothing refused.
    purpose: str | None = None
    # pay-per-crawl: the most a page may cost (USD); a 402 asking no more is asked again
    # with crawler-max-price, signed. None: priced pages are skipped, their price recorded.
    max_price: float | None = None
    # compiled tdmrep.json files kept in memory hold at most this much (least recently
    # used out, read again when their host is next visited)
    tdmrep_memory_bytes: int = TDMREP_MEMORY_BYTES
    # the former name of max_body_bytes, still read (with a DeprecationWarning)
    max_bytes: InitVar[int | None] = None

    def __post_init__(self, max_bytes: int | None) -> None:
        if max_bytes is not None:
            warnings.warn("CrawlSettings(max_bytes=) is deprecated; use max_body_bytes=",
                          DeprecationWarning, stacklevel=3)
            object.__setattr__(self, "max_body_bytes", max_bytes)
        # max_pages=0 would fetch nothing and say nothing: leave it None for no limit.
        # max_depth=0 crawls the seeds alone.
        for setting in CRAWL.on("keyword"):
            if setting.name in _FIELDS:
                setting.check(getattr(self, setting.name), f"{setting.name}=")


_FIELDS = {f.name for f in fields(CrawlSettings)}


@dataclass(slots=True)
class Page:
    """A fetched page as a hook sees it."""

    url: str
    status: int
    headers: Mapping[str, str]  # case-insensitive
    body: bytes
    text: str | None  # decoded, for HTML
    depth: int
    via: str
    srcloc: str | None
    links: list[str] = field(default_factory=list)  # followed links, resolved
    directives: RobotsDirectives = field(default_factory=RobotsDirectives)


PageHook = Callable[[Page], Iterable[object] | Awaitable[Iterable[object] | None] | None]


@dataclass(slots=True)
class CrawlStats:
    """What this run did, for the progress display and the summary."""

    started: float = field(default_factory=time.monotonic)
    fetched: int = 0
    failed: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    bytes: int = 0
    hosts: set[str] = field(default_factory=set)
    # URLs this run added to the frontier (what is queued there now is the frontier's count:
    # ``Crawler.counts()``, the summary's "frontier").
    added: int = 0
    kept: int = 0  # of those fetched, answers written to the output (not noindex, not refused)
    refused_by_purpose: int = 0  # of those fetched, not kept: the site refuses the purpose
    in_flight: int = 0
    waiting_hosts: int = 0
    # host -> what it waits for (robots.txt that could not be read) and until when
    # (time.monotonic()): what a crawl that fetches nothing for minutes is doing
    waits: dict[str, tuple[str, float]] = field(default_factory=dict)
    # host -> why none of its pages could be fetched (robots.txt, the page itself)
    unreachable: dict[str, str] = field(default_factory=dict)

    def pages_per_s(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.fetched / elapsed if elapsed > 0 else 0.0

    def as_json(self) -> dict[str, object]:
        return {"fetched": self.fetched, "failed": self.failed,
                "skipped": dict(self.skipped), "bytes": self.bytes,
                "hosts": len(self.hosts), "added": self.added, "kept": self.kept,
                "refusedByPurpose": self.refused_by_purpose,
                "seconds": round(time.monotonic() - self.started, 3),
                "pagesPerSecond": round(self.pages_per_s(), 2)}


class _TurnFailed(Exception):
    """Something raised while ``item`` was decided (the cause is the error)."""

    def __init__(self, item: FrontierItem) -> None:
        super().__init__(item.url)
        self.item = item


def _decode(body: bytes, charset: str | None) -> str:
    """A page's text by its declared charset; UTF-8 when it names none or one Python does
    not know (a misspelt charset is common), undecodable bytes replaced."""
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:
        return body.decode("utf-8", "replace")


def _may_state_usage(text: str) -> bool:
    """Whether a page may hold the META tags :func:`from_html` reads (``noai`` in a robots
    tag, ``tdm-reservation`` or ``tdm-policy``), whatever their case, in the part of it
    that it reads: most pages hold none, and are spared a second parse."""
    # made lower case: on a 5 KB page, a quarter of the time of the two searches
    lower = text[:MAX_HTML_CHARS].lower()
    return "noai" in lower or "tdm-" in lower


def _unwritten(exc: BaseException) -> str:
    """What a write that failed says: the file (the crawl's own), or the store's error."""
    if isinstance(exc, WriteFailed):
        return str(exc)
    return f"cannot write to the crawl's store: {type(exc).__name__}: {exc}"


# The summary's family of a URL refused before it was fetched (the others are counted where
# they are found: scope, srcloc, budget, language, payment required).
_REFUSED_KIND = {RefusalReason.INVALID_URL: "invalid", RefusalReason.PRIVATE_ADDRESS: "private",
                 RefusalReason.ROBOTS_UNAVAILABLE: "robots",
                 RefusalReason.NO_VISIT_TIME: "robots"}


def _refusal(found: Answer) -> tuple[str, str, dict[str, Any]]:
    """A refused answer as a skipped record has it: its family, its reason, and for a rule
    of robots.txt the rule and its line."""
    decision = found.decision
    reason = message(found) or "not allowed"
    if type(decision) is Disallowed:
        rule = decision.rule
        return "robots", reason, {"rule": None if rule is None else str(rule),
                                  "line": decision.line}
    if type(decision) is Refused:
        return _REFUSED_KIND[decision.reason], reason, {}
    return "robots", reason, {}


def _site_record(host: str, origin: str, robots: RobotsState, rules: AgentRules,
                 refusal: str | None) -> dict[str, Any]:
    """What a site's robots.txt told the crawler, for ``sites.jsonl``: its status and
    dialect, the REGP fields kept for the record (Host, Mirror-site, Language) and those
    that shaped the requests."""
    record: dict[str, Any] = {"host": host, "origin": origin}
    if isinstance(robots, Parsed):
        body = robots.robots
        record.update(robots=robots.status, dialect=str(body.dialect),
                      sitemaps=list(body.sitemaps), host_field=body.host,
                      truncated=body.truncated)
    else:
        record.update(robots=None, reason=getattr(robots, "reason", ""))
    record.update(mirror_sites=list(rules.mirror_sites), languages=list(rules.language),
                  cookies=list(rules.cookies), encodings=list(rules.encoding),
                  index_pages=list(rules.index_pages))
    if refusal is not None:
        record["refused"] = refusal
    return record


class Crawler:
    """Crawls what its frontier holds, politely; add seeds with :meth:`add_seeds`, then
    :meth:`run` until nothing is left (or :meth:`stop`)."""

    def __init__(
        self,
        politeness: Politeness,
        frontier: FrontierStore,
        pages: HttpClient,
        output: CrawlOutput,
        clock: Clock,
        settings: CrawlSettings | None = None,
        *,
        walker: SitemapWalker | None = None,
        on_page: PageHook | None = None,
        unreachable: tuple[type[BaseException], ...] = (),
        on_store: Callable[[bool, str], None] | None = None,
        group_commits: bool = False,
        host_leases: bool = False,
    ) -> None:
        """``unreachable``: the errors that say the store does not answer (its server is
        down or restarting); the crawl then waits for it, telling ``on_store(False,
        error)`` once and ``on_store(True, "")`` when it is back, and goes on with the URLs
        it held. ``group_commits``: no other process writes the SQLite file of the frontier
        (and of the politeness store, when they share it), so pages may be committed
        together (:data:`GROUP_COMMIT_S`) while :meth:`run` owns the store.
        ``host_leases``: other processes share the politeness store, so a request granted
        holds its host's lease until it is over (:meth:`Politeness.check`'s ``lease_s``)."""
        self.settings = settings or CrawlSettings()
        self._politeness = politeness
        self._frontier = frontier
        self._unseen = unseen(frontier)
        self._pages = pages
        self._output = output
        self._clock = clock
        self._walker = walker
        self._on_page = on_page
        self.stats = CrawlStats()
        self._seed_hosts: set[str] = set()
        # in_scope for the seed hosts as they are (None: worked out again at its next use)
        self._in_scope: Callable[[str], bool] | None = None
        self._heap: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}
        self._in_flight: Counter[str] = Counter()
        self._pending: dict[str, FrontierItem] = {}  # leased, waiting for its slot
        self._host_states: dict[str, str] = {}
        self._host_rules: dict[str, AgentRules] = {}
        self._sites_recorded: set[str] = set()  # hosts with their line in sites.jsonl
        # a host's /.well-known/tdmrep.json, compiled, within a byte budget (a file dropped
        # from it is read again when its host is next visited); hosts with none, or whose
        # file robots.txt refuses, apart, as a name each
        self._tdmrep = tdmrep_files(max_bytes=self.settings.tdmrep_memory_bytes)
        self._no_tdmrep: set[str] = set()
        self._host_fetched: Counter[str] = Counter()
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(max(1, self.settings.concurrency))
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._shared = False
        self._poll_s = 1.0
        self._user_agent = self.settings.user_agent or self.settings.agent
        self._unreachable = unreachable
        self._on_store = on_store
        self._store_down_at: float | None = None  # when the store stopped answering
        self._store_hosts: set[str] = set()  # hosts whose turn the store's outage ended
        self._store_said_down = False  # on_store(False, ...) told, on_store(True, "") not yet
        self._store_back_at: float | None = None  # when to tell that it is back
        self._offered: dict[str, str] = {}  # URL -> the price it asked, to pay on the retry
        self._write_failed: BaseException | None = None  # the write that stopped the crawl
        self._group_commits = group_commits
        self._group: Transaction | None = None  # the transaction held between commits
        self._group_ripe = False  # the held transaction is due to be committed
        self._group_timer: asyncio.TimerHandle | None = None
        self._group_pages = 0  # pages settled in it
        # Workers sharing a store: a request granted holds its host until its response is
        # noted (the lease), so that they have one request of a host in flight at a time and
        # the next slot is given only once this one's late start is in the store. It lasts
        # longer than a fetch may (its deadline): it never lapses while the request is out,
        # unless the worker's URLs are held for less (see lease_length_s). Alone, the
        # crawler keeps one request of a host in flight itself (per_host).
        self._lease_s = (lease_length_s(self.settings.fetch_deadline_s, self.settings.lease_s)
                         if host_leases else None)

    # -- the frontier -----------------------------------------------------------------------

    async def add_seeds(self, urls: Sequence[str]) -> list[str]:
        """Queue the crawl's starting URLs (once: a seed already seen is not queued again);
        their hosts are the crawl's scope. Returns the URLs that were not http(s) URLs."""
        items, bad = [], []
        for url in urls:
            try:
                normal = link_key(url)
                host = split_origin(normal)[1]
            except InvalidURL:
                bad.append(url)
                continue
            self._seed_hosts.add(host)
            self._in_scope = None
            items.append(FrontierItem(normal, host, 0, "seed"))
        await self._frontier.add_seed_hosts(sorted({item.host for item in items}))
        added = await self._frontier.add(items)
        self.stats.added += len(added)
        for item in added:
            self._schedule(item.host, 0.0)
        return bad

    def _schedule(self, host: str, at: float) -> None:
        current = self._due.get(host)
        if current is not None and current <= at:
            return
        self._due[host] = at
        heapq.heappush(self._heap, (at, host))
        self._wake.set()

    # -- the scheduler ----------------------------------------------------------------------

    @property
    def frontier(self) -> FrontierStore:
        return self._frontier

    async def counts(self) -> FrontierCounts:
        """The frontier's totals, over every run of this crawl."""
        return await self._frontier.counts()

    def stop(self) -> None:
        """Finish the fetches in flight, take no new URL, and return from :meth:`run`."""
        self._stopping = True
        self._wake.set()

    async def run(self, *, owns_store: bool = True, poll_s: float = 1.0) -> CrawlStats:
        """Crawl until the frontier has nothing due (with ``revisit``, until stopped).
        ``owns_store``: no other worker shares the frontier, so leases left by an earlier
        run that was killed come back at once. Without it, workers share the frontier: each
        asks it every ``poll_s`` for the hosts the others filled or gave back (a dead
        worker's leases come back when they run out), and returns once the frontier has
        nothing queued or leased."""
        self._shared = not owns_store
        self._poll_s = poll_s
        if owns_store:
            await self._frontier.requeue_leased()
            batch = self._frontier.batch()
            if self._group_commits and isinstance(batch, Transaction) and self._has_room():
                batch.hold(self._group_began)
                self._group = batch
                self._output.hold(True)
        self._seed_hosts.update(await self._frontier.seed_hosts())
        self._in_scope = None
        self._host_fetched.update(await self._frontier.host_fetched())
        # alone, every host is this worker's; sharing, those due soon (the others come up
        # at the polls)
        for host, due in (await self._frontier.hosts() if owns_store else
                          await self._frontier.due_hosts(self._clock() + poll_s,
                                                         DUE_HOSTS_READ)):
            self._schedule(host, due)
        try:
            await self._loop()
        finally:
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            try:
                for item in self._pending.values():
                    await self._frontier.release(item)
            except Exception as exc:
                if not self.is_unreachable(exc) and not cannot_write(exc):
                    raise
                # stopped while the store is away (or its disk is full): the leases come
                # back when they run out, or when the next run begins
            self._pending.clear()
            try:
                self._commit(hold=False)
            except Exception as exc:
                if not cannot_write(exc):
                    raise
                self._write_failed = self._write_failed or exc
            if self._store_down_at is None:
                self._store_settled(ended=True)
        failed = self._write_failed
        if failed is not None:
            raise WriteFailed(f"{_unwritten(failed)}; stopped, what was not recorded is "
                              "still queued (make room, then run the same command to go on)"
                              ) from failed
        return self.stats

    def _cannot_write(self, exc: BaseException) -> None:
        """A write failed (a full disk): stop taking URLs, the space kept for this given
        up to the writes in flight; :meth:`run` then raises :class:`WriteFailed`."""
        if self._write_failed is None:
            self._write_failed = exc
        self._output.release_reserve(_unwritten(exc))
        self.stop()

    # -- the store's outages ------------------------------------------------------------------

    def is_unreachable(self, exc: BaseException | None) -> bool:
        """Whether ``exc`` (or what caused it) says the store does not answer."""
        while exc is not None:
            if isinstance(exc, self._unreachable):
                return True
            exc = exc.__cause__ or exc.__context__
        return False

    def _store_lost(self, exc: BaseException) -> None:
        raise_if_cancelled()  # a cancel that the store's client raised as its own error
        if self._store_down_at is None:
            self._store_down_at = self._clock()
        self._store_back_at = None
        if not self._store_said_down:
            self._store_said_down = True
            cause = exc
            while isinstance(cause, _TurnFailed) and cause.__cause__ is not None:
                cause = cause.__cause__
            if self._on_store is not None:
                self._on_store(False, str(cause) or type(cause).__name__)
        self._wake.set()

    def _store_settled(self, *, ended: bool = False) -> None:
        """Tell that the store is back once it has answered for :data:`STORE_SETTLE_S` (or
        the crawl ended with it answering)."""
        back_at = self._store_back_at
        if back_at is not None and (ended or self._clock() >= back_at):
            self._store_back_at = None
            self._store_said_down = False
            if self._on_store is not None:
                self._on_store(True, "")

    async def _await_store(self) -> None:
        """Wait for the store to answer again (asking it with a growing pause), then
        reschedule the hosts whose turns its outage ended; :class:`StoreUnreachable` past
        ``store_patience_s``. Returns at once when the crawl is stopped."""
        down_at = self._store_down_at
        assert down_at is not None
        pause = STORE_RETRY_S
        while not self._stopping:
            await self._idle(pause)
            if self._stopping:
                return
            try:
                await self._frontier.counts()
                # the leases whose end the store could not take, ended now it is back
                await self._politeness.end_kept()
            except Exception as exc:
                if not self.is_unreachable(exc):
                    raise
                waited = self._clock() - down_at
                if waited > self.settings.store_patience_s:
                    raise StoreUnreachable(
                        f"the store did not answer for {waited:.0f} s ({exc}); stopped (the "
                        "same command goes on once it is back)") from exc
                pause = min(pause * 2, STORE_RETRY_MAX_S)
                continue
            self._store_down_at = None
            self._store_back_at = self._clock() + STORE_SETTLE_S
            for host in self._store_hosts | set(self._pending):
                self._schedule(host, self._clock())
            self._store_hosts.clear()
            return

    # -- group commits ----------------------------------------------------------------------

    def _has_room(self) -> bool:
        return self._output.free_bytes() >= GROUP_MIN_FREE_BYTES

    def _group_began(self) -> None:
        self._group_pages = 0
        self._group_ripe = False
        # a timer of the loop's, armed once a group: the scheduler's waits stay untimed
        self._group_timer = asyncio.get_running_loop().call_later(GROUP_COMMIT_S,
                                                                  self._group_due)

    def _group_due(self) -> None:
        self._group_timer = None
        self._group_ripe = True
        self._wake.set()

    def _commit(self, *, hold: bool = True) -> None:
        """Write the pages' lines and records, then commit the held transaction that marks
        them done; with ``hold=False``, or when the folder's disk runs short of room, each
        page is written and committed on its own from then on."""
        group = self._group
        if group is None:
            return
        keep = hold and self._has_room()
        self._output.flush()
        if not group.commit(hold=keep):
            return
        if self._group_timer is not None:
            self._group_timer.cancel()
            self._group_timer = None
        self._group_ripe = False
        if not keep:
            self._group = None
            self._output.hold(False)

    def _budget_left(self) -> bool:
        # max_pages is this run's budget: a flag given to a run (a resumed crawl fetches
        # that many more); max_pages_per_host, a trap's, counts over every run
        limit = self.settings.max_pages
        return limit is None or self.stats.fetched + self.stats.in_flight < limit

    async def _poll(self) -> bool:
        """Take in what the other workers did to the shared frontier: the hosts with URLs
        due (those this worker holds reschedule themselves), new seeds' hosts. True when
        the frontier has nothing queued or leased: the crawl is over for every worker."""
        counts = await self._frontier.counts()
        if counts.queued + counts.leased == 0:
            return True
        self._seed_hosts.update(await self._frontier.seed_hosts())
        self._in_scope = None
        # a bounded read: the hosts due before the next poll, not every host of the crawl
        for host, due in await self._frontier.due_hosts(self._clock() + self._poll_s,
                                                        DUE_HOSTS_READ):
            if host not in self._pending and not self._in_flight[host]:
                self._schedule(host, due)
        return False

    async def _idle(self, wait_s: float | None) -> None:
        """Wait for a fetch to end, a host to be scheduled or ``wait_s``."""
        self._wake.clear()
        if wait_s is None:
            await self._wake.wait()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, wait_s))

    async def _loop(self) -> None:
        next_poll = self._clock() + self._poll_s
        while not self._stopping:
            raise_if_cancelled()  # a cancel the store's client lost in a round trip
            if self._output.full:  # a write found the disk full, and took the reserve
                self._cannot_write(WriteFailed(self._output.full))
                break
            self.stats.waiting_hosts = len(self._due)
            self._store_settled()
            group = self._group
            if group is not None and group.holding and (
                    self._group_ripe or self._group_pages >= GROUP_COMMIT_PAGES):
                try:
                    self._commit()
                except Exception as exc:
                    if not cannot_write(exc):
                        raise
                    # the pages of the group are fetched again by the next run
                    self._cannot_write(exc)
                    break
            if self._store_down_at is not None:
                await self._await_store()
                next_poll = self._clock()
                continue
            if self._shared and self._clock() >= next_poll:
                polled_at = self._clock()
                try:
                    if await self._poll() and not self.stats.in_flight:
                        return
                except Exception as exc:
                    if not self.is_unreachable(exc):
                        raise
                    self._store_lost(exc)
                    continue
                took = self._clock() - polled_at
                next_poll = self._clock() + max(self._poll_s, POLL_COST_FACTOR * took)
            until_poll = next_poll - self._clock() if self._shared else None
            budget = self._budget_left()
            if not self._heap or not budget:
                if not self.stats.in_flight and (not self._shared or not budget):
                    return
                await self._idle(until_poll)
                continue
            at, host = self._heap[0]
            if self._due.get(host) != at:
                heapq.heappop(self._heap)  # superseded by an earlier time
                continue
            wait = at - self._clock()
            if wait > 0:
                await self._idle(wait if until_poll is None else min(wait, until_poll))
                continue
            heapq.heappop(self._heap)
            del self._due[host]
            if self._in_flight[host] >= self.settings.per_host:
                continue  # the fetch in flight reschedules the host when it ends
            await self._slots.acquire()
            self._in_flight[host] += 1
            self.stats.in_flight += 1
            task = asyncio.create_task(self._turn(host))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _turn(self, host: str) -> None:
        """One URL of ``host``: set the host up if needed, then check, fetch and record."""
        again: float | None = None
        try:
            try:
                again = await self._take(host)
            except _TurnFailed as failed:  # a task boundary: one URL's failure ends no crawl
                assert failed.__cause__ is not None
                if self.is_unreachable(failed.__cause__):
                    # not the URL's failure: it is tried again once the store is back
                    self._pending.setdefault(host, failed.item)
                    raise
                if cannot_write(failed.__cause__):
                    # nor is a full disk: the URL stays queued, and the crawl stops
                    self._pending.setdefault(host, failed.item)
                    self._cannot_write(failed.__cause__)
                    return
                again = await self._failed(failed.item, failed.__cause__)
            except Exception as exc:  # before a URL was taken (the frontier itself)
                if self.is_unreachable(exc):
                    raise
                if cannot_write(exc):
                    self._cannot_write(exc)
                    return
                self.stats.failed += 1
                self._output.page({"host": host, "outcome": "failed",
                                   "reason": f"{type(exc).__name__}: {exc}"})
        except Exception as exc:
            if cannot_write(exc):  # recording a URL's failure found the disk full
                self._cannot_write(exc)
                return
            if not self.is_unreachable(exc):
                raise
            again = None
            self._store_hosts.add(host)
            self._store_lost(exc)
        finally:
            self._in_flight[host] -= 1
            self.stats.in_flight -= 1
            self._slots.release()
            if again is not None:
                self._schedule(host, again)
            self._wake.set()

    async def _failed(self, item: FrontierItem, exc: BaseException) -> float:
        """The URL being decided when something raised (a page hook, a bug) is failed with
        the error, and its host goes on."""
        self.stats.failed += 1
        self._output.page({"url": item.url, "outcome": "failed",
                           "reason": f"{type(exc).__name__}: {exc}", "via": item.via,
                           "depth": item.depth})
        if self._pending.get(item.host) is item:
            del self._pending[item.host]
        await self._frontier.done(item.url, fetched=False)
        return self._clock()

    async def _take(self, host: str) -> float | None:
        """Work on ``host``; returns when it is due again (``None``: nothing left)."""
        now = self._clock()
        item = self._pending.pop(host, None)
        if item is None:
            item = await self._frontier.lease(host, now, self.settings.lease_s)
            if item is None:
                return await self._frontier.next_due(host)
        try:
            return await self._decide(host, item, now)
        except Exception as exc:
            raise _TurnFailed(item) from exc

    async def _decide(self, host: str, item: FrontierItem, now: float) -> float | None:
        """Set the host up if needed, then check, fetch and record ``item``."""
        state = self._host_states.get(host)
        if state is None:
            state = await self._frontier.get_host_state(host) or ""
            self._host_states[host] = state
        if state != READY and not state.startswith(REFUSED):
            due = await self._set_up(host, item)
            if due is not None:
                self._pending[host] = item
                return due
            state = self._host_states[host]
        if state.startswith(REFUSED):  # only the site's Language refuses a whole host
            await self._skip(item, state.removeprefix(REFUSED), "language")
            return now
        tdmrep = None
        if self.settings.purpose is not None and host not in self._no_tdmrep:
            tdmrep = self._tdmrep.get(host)
            if tdmrep is None:
                read = await self._read_tdmrep(host, item.url)
                if isinstance(read, float):
                    self._pending[host] = item
                    return read
                tdmrep = read
        if self._host_fetched[host] >= self.settings.max_pages_per_host:
            await self._skip(item, f"per-host budget of {self.settings.max_pages_per_host} "
                                   "pages reached", "budget")
            return now
        (found,) = await self._politeness.check([item.url], reserve=True,
                                                agent=self.settings.agent,
                                                lease_s=self._lease_s)
        if not found.allowed:
            wait_s = found.wait_s
            if wait_s is None:
                kind, reason, facts = _refusal(found)
                await self._skip(item, reason, kind, facts)
                return now
            # the state it was judged under (a lookup only where the answer has none)
            robots = found.robots if found.robots is not None \
                else await self._politeness.robots_state(item.url)
            if isinstance(robots, DisallowAll):
                attempts = self.settings.robots_attempts
                if robots.failures >= attempts:
                    self.stats.waits.pop(host, None)
                    self.stats.unreachable[host] = robots.reason
                    await self._skip(item, f"robots.txt: {robots.reason} ({robots.failures} "
                                           "tries); the site is left alone", "robots")
                    return now
                self.stats.waits[host] = (
                    f"robots.txt, try {robots.failures + 1} of {attempts}: {robots.reason}",
                    time.monotonic() + wait_s)
            self._pending[host] = item
            return self._clock() + wait_s + _margin_s(wait_s)
        if self._in_flight[host] < self.settings.per_host:
            self._schedule(host, self._clock())  # room for another fetch to this host
        # The host's lease, taken with the slot (sharing the store), ends with the answer
        # or however else the request ends: forgotten, it would keep the host from every
        # worker until it ran out.
        async with self._politeness.lease(found, self._lease_s) as lease:
            return await self._fetch(item, lease, found.grant, found.robots, tdmrep)

    # -- a host's guidance ------------------------------------------------------------------

    async def _set_up(self, host: str, item: FrontierItem) -> float | None:
        """Read the host's robots.txt and sitemaps before its first page; returns a due time
        when the host may not be visited yet (its sitemaps wait for it too)."""
        origin = split_origin(item.url)[0]
        # Fetching robots.txt takes the host's slot when the politeness policy says so
        # (robots_uses_slot: the crawler's, for seed 000's Table 10 counts every request).
        robots = await self._politeness.robots_state(item.url)
        rules = AgentRules()
        if isinstance(robots, Parsed):
            rules = robots.robots.agent_rules(self.settings.agent, url=origin + "/")
        self._host_rules[host] = rules
        self._pages.headers.learn(host, rules)  # what the site asks every request to carry
        if isinstance(robots, DisallowAll):
            return None  # set up again once robots.txt can be read
        self.stats.waits.pop(host, None)  # robots.txt read at last
        refusal = language_refusal(rules.language, self.settings.languages)
        if host not in self._sites_recorded:
            # once: a host whose sitemaps wait for its delay is set up again when it is due
            self._sites_recorded.add(host)
            self._output.site(_site_record(host, origin, robots, rules, refusal))
        if refusal is not None:
            await self._set_host_state(host, REFUSED + refusal)
            return None
        walker = self._walker
        if walker is None or not self.settings.sitemaps:
            await self._set_host_state(host, READY)
            return None
        sitemaps = robots.robots.sitemaps if isinstance(robots, Parsed) else ()
        if sitemaps or self.settings.well_known_sitemaps:
            probe = origin + "/"
            (found,) = await self._politeness.check([probe], agent=self.settings.agent)
            wait_s = found.wait_s
            if not found.allowed and wait_s is not None:
                return self._clock() + wait_s
            await self._read_sitemaps(host, origin, item)
        await self._set_host_state(host, READY)
        return None

    async def _read_tdmrep(self, host: str, url: str) -> TdmRep | float | None:
        """Fetch the host's ``/.well-known/tdmrep.json``, with the spacing and the robots.txt
        of any other request: the file compiled (``None``: none, or refused), or a due time
        when the slot is not yet free."""
        target = split_origin(url)[0] + TDMREP_PATH
        (found,) = await self._politeness.check([target], reserve=True,
                                                agent=self.settings.agent,
                                                lease_s=self._lease_s)
        if not found.allowed:
            wait_s = found.wait_s
            if wait_s is not None:
                return self._clock() + wait_s + _margin_s(wait_s)
            self._no_tdmrep.add(host)  # refused (robots.txt): the file is not read
            return None
        async with self._politeness.lease(found, self._lease_s) as lease:
            # spaced from when it really went, as a page is (see _fetch)
            late = self._politeness.late_start(target, grant=found.grant)
            got = await self._pages.get(target, self._request_headers(host),
                                        max_bytes=MAX_TDMREP_BYTES + 1,
                                        deadline_s=self.settings.fetch_deadline_s,
                                        leaving=late)
            await late.noted()
            if got.failure == "withheld":  # asked again, in a new turn of its host's
                return self._clock()
            if got.status is not None:
                await lease.note_response(got.status, elapsed_s=got.answered_s)
        self._output.page({"url": target, "kind": "tdmrep", "status": got.status,
                           "outcome": "failed" if got.status is None else "fetched",
                           "bytes": len(got.body)})
        if got.status != 200 or not got.body:
            self._no_tdmrep.add(host)
            return None
        # compiled once here, not for each page of the host; in steps, the event loop (the
        # other hosts' pages) given back between them
        tdmrep = await stepped(read_tdmrep_steps(got.body))
        self._tdmrep.put(host, tdmrep)
        return tdmrep

    async def _usage(self, item: FrontierItem, got: FetchResult, text: str | None,
                     content_type: str, robots: RobotsState | None = None,
                     tdmrep: TdmRep | None = None) -> Preferences:
        """The page's AI-usage preferences: its robots.txt group (``robots``: the state its
        request was allowed under, else the one in force), its headers, its META tags and
        its host's tdmrep.json (``tdmrep``, as read when the page was decided on: the
        budget may have dropped it since)."""
        agent = self.settings.agent
        if robots is None:
            robots = await self._politeness.robots_state(item.url)
        parts = [from_headers(got.raw_headers, agent, content_type=content_type)]
        if isinstance(robots, Parsed):
            parts.append(from_robots(robots.robots, item.url, agent))
        if text is not None and _may_state_usage(text):
            parts.append(from_html(text, agent))  # most pages say neither: no second parse
        if tdmrep is not None:
            parts.append(from_tdmrep(tdmrep, item.url))
        return combine_usage(*parts)

    async def _set_host_state(self, host: str, state: str) -> None:
        self._host_states[host] = state
        await self._frontier.set_host_state(host, state)

    async def _read_sitemaps(self, host: str, origin: str, item: FrontierItem) -> None:
        walker = self._walker
        assert walker is not None
        depth = item.depth + 1
        async for file, entries in walker.walk(origin):
            record: dict[str, Any] = {
                "url": file.url, "outcome": "failed" if file.error else "fetched",
                "kind": "sitemap", "status": file.status, "via": "robots.txt"
                if file.level == 0 else "sitemap", "level": file.level,
                "bytes": file.bytes, "urls": file.urls}
            if file.error:
                record["reason"] = file.error
            if file.duplicate_of is None:
                self._output.page(record)
            items, originals = [], []
            for entry in entries:
                try:
                    url = link_key(entry.loc)
                    entry_host = split_origin(url)[1]
                except InvalidURL:
                    continue
                lastmod = entry.lastmod.timestamp() if entry.lastmod else None
                srcloc = None
                if entry.srcloc:
                    try:
                        srcloc = link_key(entry.srcloc)
                        originals.append(FrontierItem(srcloc, split_origin(srcloc)[1], depth,
                                                      "sitemap", srcloc=url))
                    except InvalidURL:
                        srcloc = None
                items.append(FrontierItem(url, entry_host, depth, "sitemap", srcloc,
                                          entry.type, entry.changefreq, lastmod))
            # The originals first: a snapshot stands for its page, which is then never
            # fetched, however it is reached (seed 000, 4.2).
            for original in await self._frontier.mark_seen(originals):
                self._output.page({"url": original.url, "outcome": "skipped",
                                   "reason": f"fetched as its snapshot {original.srcloc}",
                                   "via": "sitemap", "depth": depth})
                self.stats.skipped["srcloc"] += 1
            await self._add(items)

    # -- fetching ---------------------------------------------------------------------------

    def _request_headers(self, host: str) -> dict[str, str]:
        """Every request to ``host``, as the client assembles it for robots.txt, sitemaps
        and pages alike: the User-Agent and the site's REGP guidance."""
        return self._pages.headers(host, self._user_agent)

    async def _fetch(self, item: FrontierItem, lease: HostLease, grant: int = 0,
                     robots: RobotsState | None = None, tdmrep: TdmRep | None = None
                     ) -> float | None:
        settings = self.settings
        headers = self._request_headers(item.host)
        fetched_at = self._clock()
        offered = self._offered.pop(item.url, None)
        paying = [] if offered is None or settings.max_price is None else \
            [("crawler-max-price", f"USD {settings.max_price:.2f}")]
        # The spacing runs from when the request really went; a request whose slot (grant)
        # was given again before it could go does not (LateStart).
        late = self._politeness.late_start(item.url, grant=grant)
        got = await self._pages.get(item.url, headers, max_bytes=settings.max_body_bytes,
                                    deadline_s=settings.fetch_deadline_s, signed=paying,
                                    leaving=late)
        try:
            await late.noted()
        except Exception as exc:
            if not cannot_write(exc):
                raise
            # The store's disk is full, and the request has gone: the crawl stops, but the
            # page is recorded first (in the folder's reserve, given up now), or the next
            # run would fetch it again.
            self._cannot_write(exc)
        now = self._clock()
        if got.failure == "withheld":  # asked again, in a new turn of its host's
            if offered is not None:
                self._offered[item.url] = offered
            await self._frontier.release(item._replace(not_before=now))
            return now
        record: dict[str, Any] = {
            "url": item.url, "via": item.via, "depth": item.depth,
            "fetched_at": iso_utc(fetched_at), "elapsed_ms": round(got.elapsed_s * 1000, 1)}
        if item.srcloc:
            record["srcloc"] = item.srcloc
        status, body, error = got.status, got.body, got.error
        if status is None:
            record.update(outcome="failed", reason=error, status=None, bytes=len(body))
            self.stats.failed += 1
            self.stats.unreachable.setdefault(item.host, str(error))
            await self._settle(item, record, fetched=False)
            return now
        if status == 402:
            reason = self._priced(item, got.headers.get("crawler-price"), offered)
            if reason is None:  # asked again, offering to pay, when its slot comes
                await self._frontier.release(item._replace(attempts=item.attempts + 1,
                                                           not_before=now))
                return now
            await self._skip(item, reason, "payment required",
                             {"price": got.headers.get("crawler-price")})
            return now
        if offered is not None:
            record.update(price=offered, charged=got.headers.get("crawler-charged"))
        answered: tuple[int, float | None, HostLease] | None = (status, got.answered_s, lease)
        if status in RETRIED:  # the pause is written at once (other answers with the page)
            answered = None
            pause = await lease.note_response(status, elapsed_s=got.answered_s,
                                              retry_after=got.headers.get("retry-after"))
            if item.attempts + 1 < settings.max_attempts:
                until = now + (pause or 0.0)
                await self._frontier.release(item._replace(attempts=item.attempts + 1,
                                                           not_before=until))
                return until
        self.stats.fetched += 1
        self.stats.bytes += len(body)
        self.stats.hosts.add(item.host)
        self._host_fetched[item.host] += 1
        record.update(outcome="fetched", status=status, bytes=len(body),
                      content_type=got.headers.get("content-type", ""))
        if got.truncated:
            record["truncated"] = True
        if error is not None:  # the head arrived, the body did not all come
            record["reason"] = error
        if status in RETRIED:
            record["reason"] = f"HTTP {status} {settings.max_attempts} times; given up"
        keep = status not in RETRIED
        usage_meta: dict[str, Any] | None = None
        revisit_at: float | None = None
        found: list[FrontierItem] = []
        redirect = False
        location = got.headers.get("location")
        if status in REDIRECTS and location:
            found = self._redirect(item, location, record)
            redirect = bool(found)
        elif 200 <= status < 300:
            plan, found = await self._page(item, got, record, robots, tdmrep)
            keep = plan.keep
            usage_meta = record.get("usage")
            if settings.revisit:
                revisit_at = next_visit_s(
                    item.url, self._host_rules.get(item.host, AgentRules()),
                    changefreq=item.changefreq,
                    lastmod=None if item.lastmod is None else
                    datetime.fromtimestamp(item.lastmod, UTC),
                    fetched_at=fetched_at)
                if revisit_at is not None:
                    record["next_visit"] = iso_utc(revisit_at)
        if keep:
            self.stats.kept += 1
            self._output.exchange(Exchange(
                item.url, [("Host", item.url.split("/")[2]), *headers.items()], status,
                got.reason, got.http_version, got.raw_headers, body,
                metadata={"usage": usage_meta} if usage_meta else None), fetched_at)
        await self._settle(item, record, fetched=True, revisit_at=revisit_at, found=found,
                           redirect=redirect, answered=answered)
        return now

    async def _settle(self, item: FrontierItem, record: dict[str, Any], *, fetched: bool,
                      revisit_at: float | None = None,
                      found: Sequence[FrontierItem] = (), redirect: bool = False,
                      answered: tuple[int, float | None, HostLease] | None = None
                      ) -> None:
        """Record a decided URL: its new links queued, its line written, the URL
        acknowledged, its host's next URL leased and the response (``answered``: status,
        time to the head, for the adaptive delay, and the lease it ends) noted, all in one
        batch of the frontier's: one commit where there were five, when the politeness
        store shares the frontier's SQLite file, as in a crawl's folder, and one round trip
        to a Redis frontier. The line is written before the URL is acknowledged, so every
        acknowledged URL is on disk (resume after a kill). A batch the store could not write
        (its disk full) is written again once, in the room the crawl's folder kept, the line
        not twice."""
        written = False
        while True:
            try:
                async with self._frontier.batch():
                    if answered is not None:
                        # the lease of its request ends as the URL is settled (over once
                        # the batch is written: one the store lost is ended again)
                        await answered[2].note_response(answered[0], elapsed_s=answered[1],
                                                        batch=True)
                    links = found
                    if redirect:
                        # the line says whether the target was new: queued before the line
                        if not await self._add(list(found)):
                            record["reason"] = ("redirect to a URL already seen (a loop, or "
                                                "a page met before)")
                        links = ()
                    inside, outside = self._by_scope(links)
                    if not written:
                        self._output.page(record)
                        written = True
                    host = item.host
                    lease = None
                    if host not in self._pending and not self._stopping and \
                            self._budget_left():
                        # The host's next URL, leased now rather than in a statement of its
                        # own when the host comes due again (it waits in _pending, as one
                        # told to wait does).
                        lease = (host, self._clock(), self.settings.lease_s)
                    settled = await settle(self._frontier, item.url, fetched=fetched,
                                           revisit_at=revisit_at, add=inside, mark=outside,
                                           lease=lease)
                    self._took(settled.added, settled.marked)
                    if settled.leased is not None:
                        self._pending[host] = settled.leased
                if answered is not None:
                    answered[2].written()
                self._group_pages += 1
                return
            except Exception as exc:
                # once, when the store's disk is full and the folder's reserve not yet given
                if not cannot_write(exc) or not self._output.release_reserve(_unwritten(exc)):
                    raise

    def _redirect(self, item: FrontierItem, location: str,
                  record: dict[str, Any]) -> list[FrontierItem]:
        """The frontier entry a redirect leads to (none when it is unusable or one hop too
        many, with the reason in ``record``)."""
        try:
            target = resolve_link(item.url, location)
        except InvalidURL as exc:
            record["reason"] = f"redirect to an unusable location: {exc}"
            return []
        record["location"] = target
        if item.hops + 1 > self.settings.max_redirects:
            record["reason"] = f"more than {self.settings.max_redirects} redirects"
            return []
        return [FrontierItem(target, split_origin(target)[1], item.depth, "redirect",
                             item.srcloc, item.page_type, item.changefreq, item.lastmod,
                             item.hops + 1)]

    async def _page(self, item: FrontierItem, got: FetchResult, record: dict[str, Any],
                    robots: RobotsState | None = None, tdmrep: TdmRep | None = None
                    ) -> tuple[PagePlan, list[FrontierItem]]:
        """The page's links to follow, as its robots directives and its sitemap type allow
        (and those its hook returned), for the caller to queue."""
        agent = self.settings.agent
        body = got.body
        directives = parse_x_robots_tag(got.get_all("x-robots-tag"), agent)
        content_type = got.headers.get("content-type", "").split(";")[0].strip().lower()
        text: str | None = None
        links: list[Link] = []
        base = item.url
        if content_type in HTML_TYPES or (not content_type and body.lstrip()[:1] == b"<"):
            text = _decode(body, got.charset)
            # A large page on a thread: the parser lets go of the GIL, so the loop goes on
            # meanwhile (other fetches, Ctrl-C and SIGTERM) however long it takes. A small
            # one here: its work is bounded, and less than a thread's round trip costs.
            found = (extract_links(text, item.url, agent, small=True) if is_small(text)
                     else await asyncio.to_thread(extract_links, text, item.url, agent))
            if found.cut is not None:
                record["parse_cut"] = found.cut
            directives = combine(directives, found.directives)
            links, base = found.links, found.base
        plan = page_plan(directives, item.page_type)
        if not plan.keep:
            record["noindex"] = True
        usage = await self._usage(item, got, text, content_type, robots, tdmrep)
        if usage.sources or usage.issues or usage.licenses:
            record["usage"] = usage.to_json()
        purpose = self.settings.purpose
        if purpose is not None and usage.refuses(purpose):
            plan = PagePlan(False, plan.follow, ", ".join(
                filter(None, (plan.why, f"usage: {usage.answer(purpose).reason}"))))
            record["usage_refused"] = purpose
            self.stats.refused_by_purpose += 1
        if plan.why:
            record["guidance"] = plan.why
        followed: list[str] = []
        if plan.follow and links:
            followed = self._follow(item, base, links)
        record["links"] = len(links)
        record["followed"] = len(followed)
        depth = item.depth + 1
        # A link in normal form that starts with the page's origin and a slash is on the
        # page's host: most are, and need not be parsed again for it.
        same = split_origin(item.url)[0] + "/"
        # Links the frontier knows it holds (most, on a site's pages) are not made into
        # items: it would leave them out when they are queued.
        queue = [FrontierItem(url, item.host if url.startswith(same) else split_origin(url)[1],
                              depth, "link") for url in self._unseen(followed)]
        if self._on_page is not None:
            assert got.status is not None
            page = Page(item.url, got.status, got.headers, body, text, item.depth, item.via,
                        item.srcloc, followed, directives)
            queue.extend(await self._hook(page, item))
        return plan, queue

    def _follow(self, item: FrontierItem, base: str, links: list[Link]) -> list[str]:
        max_depth = self.settings.max_depth
        if max_depth is not None and item.depth + 1 > max_depth:
            return []
        # rel=nofollow: not followed from here (it may be from elsewhere)
        return resolve_links(base, (link.href for link in links if not link.nofollow))

    def _by_scope(self, items: Sequence[FrontierItem]
                  ) -> tuple[list[FrontierItem], list[FrontierItem]]:
        """The items in scope (to queue) and the others (to mark seen)."""
        inside: list[FrontierItem] = []
        outside: list[FrontierItem] = []
        if not items:
            return inside, outside
        if self._in_scope is None:
            self._in_scope = scope_test(self.settings.scope, self._seed_hosts)
        allowed = self._in_scope
        for item in items:
            if allowed(item.host):
                inside.append(item)
            else:
                outside.append(item)
        return inside, outside

    def _took(self, added: Sequence[FrontierItem], marked: Sequence[FrontierItem]) -> None:
        """Record what the frontier took: the items newly out of scope (once per URL), the
        hosts of those queued scheduled."""
        for item in marked:
            self._output.page({"url": item.url, "outcome": "skipped", "via": item.via,
                               "depth": item.depth,
                               "reason": f"out of scope (--scope {self.settings.scope})"})
            self.stats.skipped["scope"] += 1
        self.stats.added += len(added)
        for item in added:
            if item.host not in self._due and not self._in_flight[item.host]:
                self._schedule(item.host, item.not_before)

    async def _add(self, items: list[FrontierItem]) -> list[FrontierItem]:
        """Queue what is in scope; record what is not (once per URL)."""
        inside, outside = self._by_scope(items)
        marked = await self._frontier.mark_seen(outside) if outside else []
        added = await self._frontier.add(inside) if inside else []
        self._took(added, marked)
        return added

    async def _hook(self, page: Page, item: FrontierItem) -> list[FrontierItem]:
        """Run the user's hook on ``page``: its items are written, its URLs returned."""
        assert self._on_page is not None
        result = self._on_page(page)
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return []
        found, urls = [], []
        for value in result:
            if isinstance(value, str):
                urls.append(value)
            else:
                found.append(value)
        self._output.items(found)
        more = []
        for url in urls:
            try:
                normal = resolve_link(item.url, url)
            except InvalidURL:
                continue
            more.append(FrontierItem(normal, split_origin(normal)[1], item.depth + 1, "link"))
        return more

    async def _skip(self, item: FrontierItem, reason: str, kind: str,
                    extra: Mapping[str, Any] | None = None) -> None:
        """``item`` is not fetched: ``reason`` in its record, counted under ``kind``."""
        self.stats.skipped[kind] += 1
        await self._settle(item, {"url": item.url, "outcome": "skipped", "reason": reason,
                                  "via": item.via, "depth": item.depth,
                                  **({"srcloc": item.srcloc} if item.srcloc else {}),
                                  **(extra or {})},
                           fetched=False)

    def _priced(self, item: FrontierItem, price: str | None, offered: str | None
                ) -> str | None:
        """Why a 402 is the end of this URL, or ``None`` when it is to be asked again
        offering ``max_price`` (Cloudflare's pay-per-crawl: a request carrying a signed
        ``crawler-max-price`` at or above ``crawler-price`` is served and charged)."""
        limit = self.settings.max_price
        if price is None:
            return "payment required: HTTP 402 without a crawler-price"
        if offered is not None:
            return (f"payment required: crawler-price {price}, still refused with "
                    f"crawler-max-price USD {limit:.2f}")
        if limit is None:
            return f"payment required: crawler-price {price} (no --max-price)"
        parsed = parse_price(price)
        if parsed is None or parsed[0] != "USD":
            return f"payment required: crawler-price {price!r} is not a USD price"
        if parsed[1] > Decimal(f"{limit:.2f}"):
            return f"payment required: crawler-price {price} is over --max-price {limit:.2f}"
        self._offered[item.url] = price
        return None

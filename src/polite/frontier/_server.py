"""The URL Frontier gRPC service (``urlfrontier.URLFrontier``) on :mod:`polite.frontier._store`.

Each RPC does what the comments of the vendored ``urlfrontier.proto`` say. Politeness sits in
``GetURLs``: before a queue's next URL is handed out, the politeness driver
(:class:`polite.fetch.politeness.Politeness`) is asked about it and claims the host's slot; a URL
robots.txt disallows (or that points at a private address) is completed with the reason in its
metadata and never handed out, and a host whose delay has not passed keeps its URL for a later
call. With ``politeness`` ``None`` (``--robots off``) the queues' own delays are all there is,
as in the reference service.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, assert_never
from urllib.parse import urlsplit

import grpc

from polite.frontier._proto import urlfrontier_pb2 as pb
from polite.frontier._proto import urlfrontier_pb2_grpc as pb_grpc
from polite.frontier._store import (
    MAX_KEY_CHARS,
    MAX_METADATA_BYTES,
    MAX_TAKE,
    MAX_URL_CHARS,
    Put,
    StoredURL,
    URLs,
)

if TYPE_CHECKING:  # the politeness driver's modules are loaded where it runs alone: with
    # --robots off, a server starts without robots.txt's parser, fetcher and HTTP client
    from polite.fetch.politeness import Answer, Politeness
    from polite.fetch.robots import Network

__all__ = ["DEFAULT_CRAWL", "DEFAULT_LEASE_S", "Counters", "FrontierService",
           "PolitenessOptions", "metrics_text", "open_politeness", "serve"]

# The reference service's spelling of the crawl of URLs sent without one (CrawlID.DEFAULT)
DEFAULT_CRAWL = "DEFAULT"
# GetURLs' delay_requestable of 0: the reference service's 30 seconds
DEFAULT_LEASE_S = 30.0
MAX_CRAWL_CHARS = 256
# one page of ListQueues / ListURLs at most, whatever the client asks
MAX_PAGE = 10_000
MAX_BATCH = 10_000  # URLs of one DiscoveredBatch
# The threads a node's store calls run on: the stores' clients block (sqlite3, redis-py), so
# the event loop hands each call to one of these and serves the other RPCs meanwhile. A store
# that stops answering holds this many calls at most (each for the store's own timeout); the
# RPCs that need no store, and those of a crawl on another Redis Cluster node while a thread
# is free, go on.
STORE_THREADS = 8
# PutURLs stores what arrived while it stored the last batch in one call: at most this many
# items, or about this many bytes of them, are read ahead (then gRPC's flow control holds the
# client)
PUT_WINDOW = 500
PUT_WINDOW_BYTES = 4 * 1024 * 1024
# With politeness on, the queues one GetURLs asks about at most (one URL each)
MAX_POLITE_QUEUES = 1_000
# Each node notes it is alive this often in the store; one silent for NODE_GONE_S is gone
BEAT_S = 1.0
NODE_GONE_S = 5.0
# SetLogLevel: a logger is kept for the process's life once named, so the names a client may
# add are bounded (those of packages that log already are not counted)
MAX_NEW_LOGGERS = 100
MAX_LOGGER_CHARS = 256
# Metadata keys polite adds to a URL it will not hand out
REFUSED_KEY = "polite.refused"
RULE_KEY = "polite.robots_rule"

_log = logging.getLogger("polite.frontier")

_T = TypeVar("_T")


@dataclass(slots=True)
class Counters:
    """What the server has done since it started, for --metrics-port."""

    put_ok: int = 0
    put_skipped: int = 0
    put_failed: int = 0
    handed_out: int = 0
    refused: int = 0
    waited: int = 0
    by_rpc: dict[str, int] = field(default_factory=dict)


def _crawl(text: str) -> str:
    return text or DEFAULT_CRAWL


def _metadata(info: pb.URLInfo) -> dict[str, list[str]]:
    return {name: list(values.values) for name, values in info.metadata.items()}


def _info(stored: StoredURL) -> pb.URLInfo:
    info = pb.URLInfo(url=stored.url, key=stored.key, crawlID=stored.crawl)
    for name, values in stored.metadata.items():
        info.metadata[name].values.extend(values)
    return info


def _item(stored: StoredURL) -> pb.URLItem:
    info = _info(stored)
    if stored.known or stored.due is None:
        known = pb.KnownURLItem(info=info, refetchable_from_date=int(stored.due or 0))
        return pb.URLItem(known=known, ID=stored.url, creation_date=stored.created)
    return pb.URLItem(discovered=pb.DiscoveredURLItem(info=info), ID=stored.url,
                      creation_date=stored.created)


def read_put(info: pb.URLInfo, *, known: bool, refetch_at: float) -> Put | str:
    """The item to store, or why it is refused (SKIPPED: sending it again will not help)."""
    url = info.url
    if not url:
        return "no URL"
    if len(url) > MAX_URL_CHARS:
        return f"URL longer than {MAX_URL_CHARS} characters"
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"not a URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL with a host"
    key = info.key or parts.hostname
    if len(key) > MAX_KEY_CHARS:
        return f"key longer than {MAX_KEY_CHARS} characters"
    crawl = _crawl(info.crawlID)
    if len(crawl) > MAX_CRAWL_CHARS:
        return f"crawl ID longer than {MAX_CRAWL_CHARS} characters"
    # Refused from every store, so that SQLite and Redis take the same keys and crawl IDs
    # (a NUL is the separator in the Redis store's key names)
    if "\0" in key or "\0" in crawl:
        return "a NUL character in the key or the crawl ID"
    meta = _metadata(info)
    if sum(len(k) + sum(len(v) for v in vs) for k, vs in meta.items()) > MAX_METADATA_BYTES:
        return f"metadata larger than {MAX_METADATA_BYTES} characters"
    return Put(crawl, url, key, meta, known, refetch_at)


async def _batches(items: AsyncIterator[pb.URLItem], most: int, most_bytes: int
                   ) -> AsyncIterator[list[pb.URLItem]]:
    """``items`` in lists of those that arrived while the last list was handled. A task
    reads ahead while fewer than ``most`` items, or ``most_bytes`` bytes of them, wait, and
    then stops reading until the next list is taken; an error reading is raised once the
    items read before it are given."""
    waiting: deque[pb.URLItem] = deque()
    size = 0
    ended = False
    failed: BaseException | None = None
    more = asyncio.Event()  # something waits, or the reading ended
    room = asyncio.Event()  # fewer than the most wait
    room.set()

    async def read() -> None:
        nonlocal size, ended, failed
        it = aiter(items)
        try:
            while True:
                await room.wait()
                try:
                    item = await anext(it)
                except StopAsyncIteration:
                    return
                waiting.append(item)
                size += item.ByteSize()
                if len(waiting) >= most or size >= most_bytes:
                    room.clear()
                more.set()
        except Exception as exc:  # the client's stream broke: told after what came before
            failed = exc
        finally:
            ended = True
            more.set()

    reader = asyncio.create_task(read())
    try:
        while True:
            await more.wait()
            if waiting:
                batch = list(waiting)
                waiting.clear()
                size = 0
                if not ended:
                    more.clear()
                room.set()
                yield batch
            elif ended:
                if failed is not None:
                    raise failed
                return
            else:
                more.clear()
    finally:
        reader.cancel()


class FrontierService(pb_grpc.URLFrontierServicer):
    def __init__(self, store: URLs, *, politeness: Politeness | None, node: str,
                 clock: Callable[[], float] = time.time,
                 counters: Counters | None = None) -> None:
        self._store = store
        self._politeness = politeness
        self._clock = clock
        self.node = node
        self.counters = counters if counters is not None else Counters()
        self._new_loggers = 0  # loggers SetLogLevel made, kept for the process's life
        self._threads = ThreadPoolExecutor(STORE_THREADS, thread_name_prefix="frontier-store")

    def now(self) -> float:
        return self._clock()

    async def call(self, do: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``do(*args, **kwargs)`` on a store thread: what calls the store, and only that,
        runs there (one call per request where it can, a thread hop costing more than a
        small query)."""
        return await asyncio.get_running_loop().run_in_executor(
            self._threads, functools.partial(do, *args, **kwargs))

    def close(self) -> None:
        """End the store threads once the calls they run return (each bounded by the
        store's own timeout)."""
        self._threads.shutdown(wait=True)

    def _count(self, rpc: str) -> None:
        self.counters.by_rpc[rpc] = self.counters.by_rpc.get(rpc, 0) + 1

    async def ListNodes(self, request: pb.Empty, context: object) -> pb.StringList:
        self._count("ListNodes")
        return pb.StringList(values=await self.call(self._store.nodes, self._clock() - NODE_GONE_S))

    async def ListCrawls(self, request: pb.Local, context: object) -> pb.StringList:
        self._count("ListCrawls")
        return pb.StringList(values=await self.call(self._store.crawls))

    async def DeleteCrawl(self, request: pb.DeleteCrawlMessage, context: object) -> pb.Long:
        self._count("DeleteCrawl")
        return pb.Long(value=await self.call(self._store.delete_crawl, _crawl(request.value)))

    async def ListQueues(self, request: pb.Pagination, context: object) -> pb.QueueList:
        self._count("ListQueues")
        size = min(request.size or 100, MAX_PAGE)
        crawl = _crawl(request.crawlID)
        values = await self.call(self._store.queues, crawl,
                                 include_inactive=request.include_inactive,
                                 start=request.start, size=size, now=self._clock())
        return pb.QueueList(values=values, start=request.start, size=len(values),
                            crawlID=crawl)

    async def GetURLs(self, request: pb.GetParams, context: object
                      ) -> AsyncIterator[pb.URLInfo]:
        self._count("GetURLs")
        crawl = None if request.WhichOneof("item") == "anyCrawlID" else _crawl(request.crawlID)
        lease_s = float(request.delay_requestable) or DEFAULT_LEASE_S
        if self._politeness is None:
            taken = await self.call(self._take, crawl, request.key,
                                    per_queue=request.max_urls_per_queue,
                                    queues=request.max_queues, lease_s=lease_s)
            self.counters.handed_out += len(taken)
            for stored in taken:
                yield _info(stored)
            return
        # A host with a spacing gives one URL per call: its slot is claimed for it, and the
        # next is not due before the spacing has passed since that URL came back (two
        # handed out together could be fetched closer than that). The queues' next URLs
        # are asked about in one batch, so that the robots.txt files they need are fetched
        # concurrently. A queue whose URL went with no spacing at all (Crawl-delay: 0,
        # nobody setting a delay) then gives the rest of what is asked, in a second batch.
        per_queue = request.max_urls_per_queue or MAX_TAKE
        queues = min(request.max_queues or MAX_POLITE_QUEUES, MAX_POLITE_QUEUES)
        heads = await self.call(self._heads, crawl, request.key, queues)
        unspaced: list[StoredURL] = []
        for head, spacing in await self._hand_out(heads, lease_s):
            yield _info(head)
            if spacing == 0 and per_queue > 1:
                unspaced.append(head)
        if unspaced:
            more = await self.call(self._more_heads, unspaced, per_queue, len(heads))
            for head, _ in await self._hand_out(more, lease_s):
                yield _info(head)

    # -- what GetURLs does on a store thread, each one call ----------------------------------

    def _take(self, crawl: str | None, key: str, *, per_queue: int, queues: int,
              lease_s: float) -> list[StoredURL]:
        """The URLs handed out with no politeness; none while this node is not active."""
        if not self._store.active(self.node, 0.0):
            return []
        return self._store.take(crawl, key, per_queue=per_queue, queues=queues,
                                lease_s=lease_s, now=self._clock())

    def _heads(self, crawl: str | None, key: str, queues: int) -> list[StoredURL]:
        """The next URL of each queue, for politeness to be asked about."""
        if not self._store.active(self.node, 0.0):
            return []
        return self._store.heads(crawl, key, per_queue=1, queues=queues, now=self._clock())

    def _more_heads(self, unspaced: Sequence[StoredURL], per_queue: int, given: int
                    ) -> list[StoredURL]:
        """The next URLs of the queues whose URL went with no spacing, up to ``per_queue``
        of each with it, and :data:`MAX_TAKE` with the ``given`` ones."""
        more: list[StoredURL] = []
        for head in unspaced:
            if len(more) + given >= MAX_TAKE:
                break
            more += self._store.heads(head.crawl, head.key, per_queue=min(
                per_queue - 1, MAX_TAKE - len(more) - given), queues=1, now=self._clock())
        return more

    def _settle(self, leases: Sequence[tuple[StoredURL, float]],
                refusals: Sequence[tuple[StoredURL, dict[str, list[str]]]],
                held: dict[tuple[str, str], float], lease_s: float
                ) -> list[tuple[StoredURL, float]]:
        """Do what politeness decided: complete the URLs refused, lease those let go (each
        queue keeping its spacing; a URL another call took meanwhile is not handed out),
        pass the queues in ``held`` over until then. The URLs leased, with their spacing."""
        for head, why in refusals:
            self._store.refuse(head.crawl, head.url, why)
        handed = [(head, spacing) for head, spacing in leases if self._store.lease(
            head.crawl, head.url, lease_s, self._clock(), interval_s=spacing)]
        if held:
            self._store.hold([(crawl, key, until) for (crawl, key), until in held.items()])
        return handed

    async def _hand_out(self, heads: Sequence[StoredURL], lease_s: float
                        ) -> list[tuple[StoredURL, float]]:
        """Ask the politeness driver about ``heads`` (claiming their hosts' slots) and lease
        those it lets go: each with the spacing its queue keeps. A URL robots.txt disallows
        is completed, a queue whose URL must wait is passed over until then."""
        if not heads:
            return []
        assert self._politeness is not None
        answers = await self._politeness.check([head.url for head in heads], reserve=True)
        leases, refusals, held = self._decide(heads, answers)
        handed = await self.call(self._settle, leases, refusals, held, lease_s)
        self.counters.handed_out += len(handed)
        return handed

    def _decide(self, heads: Sequence[StoredURL], answers: Sequence[Answer]
                ) -> tuple[list[tuple[StoredURL, float]],
                           list[tuple[StoredURL, dict[str, list[str]]]],
                           dict[tuple[str, str], float]]:
        """What each answer does to its URL: (the URLs to lease, each with the spacing its
        queue keeps; those to complete, with why; the queues to pass over, until when)."""
        from polite.core.politeness.values import Allowed, Disallowed, Refused, WaitUntil

        leases: list[tuple[StoredURL, float]] = []
        refusals: list[tuple[StoredURL, dict[str, list[str]]]] = []
        held: dict[tuple[str, str], float] = {}
        for head, answer in zip(heads, answers, strict=True):
            wait_until: float | None = None  # on the politeness clock
            match answer.decision:
                case Allowed(interval_s=interval_s):
                    leases.append((head, interval_s))
                case WaitUntil(behind=True, interval_s=0.0, at=at) if at <= answer.now:
                    # another URL of the host took its slot in this batch, and with no
                    # spacing this one may go at the same moment
                    leases.append((head, 0.0))
                case WaitUntil(behind=behind, at=at):
                    if not behind:  # not only behind another URL of its host, handed out now
                        self.counters.waited += 1
                    wait_until = at
                case Disallowed() as no:
                    self.counters.refused += 1
                    refusals.append((head, {
                        REFUSED_KEY: ["robots.txt disallows it"],
                        RULE_KEY: [f"line {no.line}: {no.explanation}"]}))
                case Refused(retry_at=at) if at is not None:
                    self.counters.waited += 1  # robots.txt unavailable: asked again later
                    wait_until = at
                case Refused() as no:
                    self.counters.refused += 1
                    refusals.append((head, {REFUSED_KEY: [f"{no.reason.value}: {no.detail}"]}))
                case _ as never:
                    assert_never(never)
            if wait_until is not None:
                # passed over until then, so that a queue that must wait (a host whose
                # robots.txt does not answer, say) does not take the place of one that can
                # give in every call
                held.setdefault((head.crawl, head.key), self._clock() + wait_until - answer.now)
        return leases, refusals, held

    async def PutURLs(self, request_iterator: AsyncIterator[pb.URLItem], context: object
                      ) -> AsyncIterator[pb.AckMessage]:
        # The items that arrived while the last ones were stored are stored together, in one
        # call on a store thread, and acknowledged each in turn. What is read ahead is
        # bounded (PUT_WINDOW): gRPC's flow control holds a client that sends faster than
        # the store writes.
        self._count("PutURLs")
        async for items in _batches(request_iterator, PUT_WINDOW, PUT_WINDOW_BYTES):
            found: list[Put | str] = []
            idents: list[str] = []
            for item in items:
                kind = item.WhichOneof("item")
                if kind == "known":
                    info = item.known.info
                    found.append(read_put(info, known=True,
                                          refetch_at=float(item.known.refetchable_from_date)))
                elif kind == "discovered":
                    info = item.discovered.info
                    found.append(read_put(info, known=False, refetch_at=0.0))
                else:
                    info = pb.URLInfo()
                    found.append("neither a discovered nor a known URL")
                idents.append(item.ID or info.url)
            status = await self._put(found)
            for ident, one in zip(idents, found, strict=True):
                yield pb.AckMessage(ID=ident, status=status if isinstance(one, Put)
                                    else pb.AckMessage.SKIPPED)

    async def _put(self, found: Sequence[Put | str]) -> pb.AckMessage.Status:
        """Store the items read (one store call); strings are those refused."""
        puts = [f for f in found if isinstance(f, Put)]
        skipped = len(found) - len(puts)
        self.counters.put_skipped += skipped
        if not puts:
            return pb.AckMessage.SKIPPED
        try:
            await self.call(self._store.put, puts, self._clock())
        except Exception:
            _log.exception("storing %d URLs failed", len(puts))
            self.counters.put_failed += len(puts)
            return pb.AckMessage.FAIL
        self.counters.put_ok += len(puts)
        return pb.AckMessage.OK

    async def PutDiscovered(self, request_iterator: AsyncIterator[pb.DiscoveredBatch],
                            context: object) -> AsyncIterator[pb.BatchAck]:
        self._count("PutDiscovered")
        async for batch in request_iterator:
            if len(batch.items) > MAX_BATCH:
                yield pb.BatchAck(ID=batch.ID, statuses=[pb.AckMessage.SKIPPED] * len(
                    batch.items))
                continue
            found = [read_put(info, known=False, refetch_at=0.0) for info in batch.items]
            puts = [f for f in found if isinstance(f, Put)]
            status = await self._put(puts) if puts else pb.AckMessage.OK
            self.counters.put_skipped += len(found) - len(puts)
            yield pb.BatchAck(ID=batch.ID, statuses=[
                status if isinstance(f, Put) else pb.AckMessage.SKIPPED for f in found])

    async def GetStats(self, request: pb.QueueWithinCrawlParams, context: object) -> pb.Stats:
        self._count("GetStats")
        crawl = _crawl(request.crawlID)
        stats = await self.call(self._store.stats, crawl, request.key, self._clock())
        # size: the active URLs, those not completed, whether in flight or not (a queue is
        # active while it holds URLs not completed, ListQueues' comment says; the reference
        # counts them so); inProcess: those in flight
        return pb.Stats(size=stats.size + stats.in_process, inProcess=stats.in_process,
                        counts={"completed": stats.completed,
                                "active_queues": stats.active_queues},
                        numberOfQueues=stats.queues, crawlID=crawl)

    async def DeleteQueue(self, request: pb.QueueWithinCrawlParams, context: object) -> pb.Long:
        self._count("DeleteQueue")
        return pb.Long(value=await self.call(self._store.delete_queue, _crawl(request.crawlID),
                                             request.key))

    async def BlockQueueUntil(self, request: pb.BlockQueueParams, context: object) -> pb.Empty:
        self._count("BlockQueueUntil")
        await self.call(self._store.block, _crawl(request.crawlID), request.key,
                        float(request.time))
        return pb.Empty()

    async def SetActive(self, request: pb.Active, context: object) -> pb.Empty:
        self._count("SetActive")
        await self.call(self._store.set_active, self.node if request.local else None,
                        request.state)
        return pb.Empty()

    async def GetActive(self, request: pb.Local, context: object) -> pb.Boolean:
        self._count("GetActive")
        return pb.Boolean(state=await self.call(
            self._store.active, self.node if request.local else None,
            self._clock() - NODE_GONE_S))

    async def SetDelay(self, request: pb.QueueDelayParams, context: object) -> pb.Empty:
        self._count("SetDelay")
        await self.call(self._store.set_delay, _crawl(request.crawlID), request.key,
                        float(request.delay_requestable))
        return pb.Empty()

    async def SetLogLevel(self, request: pb.LogLevelParams,
                          context: grpc.aio.ServicerContext) -> pb.Empty:
        self._count("SetLogLevel")
        level = {pb.LogLevelParams.TRACE: logging.DEBUG, pb.LogLevelParams.DEBUG: logging.DEBUG,
                 pb.LogLevelParams.INFO: logging.INFO, pb.LogLevelParams.WARN: logging.WARNING,
                 pb.LogLevelParams.ERROR: logging.ERROR}.get(request.level, logging.INFO)
        name = request.package
        if len(name) > MAX_LOGGER_CHARS:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"package longer than {MAX_LOGGER_CHARS} characters")
        if name and name not in logging.root.manager.loggerDict:
            if self._new_loggers >= MAX_NEW_LOGGERS:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                    f"{MAX_NEW_LOGGERS} loggers made by SetLogLevel already; "
                                    "name a package that logs")
            self._new_loggers += 1
        logging.getLogger(name or None).setLevel(level)
        return pb.Empty()

    async def SetCrawlLimit(self, request: pb.CrawlLimitParams, context: object) -> pb.Empty:
        self._count("SetCrawlLimit")
        await self.call(self._store.set_limit, _crawl(request.crawlID), request.key,
                        request.limit)
        return pb.Empty()

    async def GetURLStatus(self, request: pb.URLStatusRequest,
                           context: grpc.aio.ServicerContext) -> pb.URLItem:
        self._count("GetURLStatus")
        stored = await self.call(self._store.status, _crawl(request.crawlID), request.url,
                                 request.key)
        if stored is None:
            await context.abort(grpc.StatusCode.NOT_FOUND,
                                f"{request.url} is not in crawl {_crawl(request.crawlID)}")
        assert stored is not None  # abort raises
        return _item(stored)

    async def ListURLs(self, request: pb.ListUrlParams, context: object
                       ) -> AsyncIterator[pb.URLItem]:
        self._count("ListURLs")
        size = min(request.size or 100, MAX_PAGE)
        found = await self.call(
            self._store.urls, _crawl(request.crawlID), request.key, start=request.start,
            size=size, contains=request.filter if request.HasField("filter") else None,
            ignore_case=request.ignoreCase)
        for stored in found:
            yield _item(stored)

    async def CountURLs(self, request: pb.CountUrlParams, context: object) -> pb.Long:
        self._count("CountURLs")
        return pb.Long(value=await self.call(
            self._store.count, _crawl(request.crawlID), request.key,
            contains=request.filter if request.HasField("filter") else None,
            ignore_case=request.ignoreCase))

    async def PurgeURLs(self, request: pb.PurgeUrlParams, context: object) -> pb.Long:
        self._count("PurgeURLs")
        before = self._clock() - request.days * 86_400.0
        return pb.Long(value=await self.call(self._store.purge, _crawl(request.crawlID),
                                             request.key, before))


@dataclass(frozen=True, slots=True)
class PolitenessOptions:
    store: str
    agent: str
    user_agent: str
    default_delay_s: float
    max_crawl_delay_s: float
    on_401_403: str
    allow_private: bool
    allow_networks: Sequence[Network]
    connect_timeout_s: float
    read_timeout_s: float


@contextlib.asynccontextmanager
async def open_politeness(options: PolitenessOptions | None
                          ) -> AsyncIterator[Politeness | None]:
    """The politeness driver on the frontier's store (robots.txt, slots, delays kept in
    the same SQLite file as the URLs), or ``None`` (``--robots off``)."""
    if options is None:
        yield None
        return
    from polite.clock import WallClock
    from polite.core.robots.lifecycle import FetchPolicy, UnauthorizedMeans
    from polite.fetch.http import RequestHeaders
    from polite.fetch.politeness import Politeness
    from polite.fetch.robots import PublicHosts, RobotsFetcher, create_client
    from polite.storage import open_store

    clock = WallClock()  # the API's times are seconds since the epoch
    store = open_store(options.store, clock, knob="--store")
    try:
        hosts = PublicHosts(clock, allowed=options.allow_networks)
        client = create_client(guard=None if options.allow_private else hosts,
                               connect_timeout_s=options.connect_timeout_s,
                               read_timeout_s=options.read_timeout_s,
                               headers=RequestHeaders(options.user_agent))
        try:
            policy = FetchPolicy(unauthorized=UnauthorizedMeans(options.on_401_403))
            robots = RobotsFetcher(client, store, clock, agent=options.agent, policy=policy,
                                   allow_private=options.allow_private, public_hosts=hosts)
            yield Politeness(robots, store, clock, agent=options.agent,
                             default_delay_s=options.default_delay_s,
                             max_crawl_delay_s=options.max_crawl_delay_s,
                             allow_private=options.allow_private, public_hosts=hosts,
                             private_hint="--allow-private or --allow-network")
        finally:
            await client.aclose()
    finally:
        await store.close()


def metrics_text(service: FrontierService, store: URLs) -> str:
    """The counters and the frontier's sizes in Prometheus's text format (0.0.4)."""
    c = service.counters
    lines = [
        "# HELP polite_frontier_put_total URLs received by PutURLs and PutDiscovered",
        "# TYPE polite_frontier_put_total counter",
        f'polite_frontier_put_total{{status="ok"}} {c.put_ok}',
        f'polite_frontier_put_total{{status="skipped"}} {c.put_skipped}',
        f'polite_frontier_put_total{{status="fail"}} {c.put_failed}',
        "# HELP polite_frontier_handed_out_total URLs handed out by GetURLs",
        "# TYPE polite_frontier_handed_out_total counter",
        f"polite_frontier_handed_out_total {c.handed_out}",
        "# HELP polite_frontier_refused_total URLs completed unfetched: robots.txt or the "
        "address refused them",
        "# TYPE polite_frontier_refused_total counter",
        f"polite_frontier_refused_total {c.refused}",
        "# HELP polite_frontier_waits_total queues passed over by GetURLs: their host's "
        "delay had not passed",
        "# TYPE polite_frontier_waits_total counter",
        f"polite_frontier_waits_total {c.waited}",
        "# HELP polite_frontier_rpc_total calls per RPC",
        "# TYPE polite_frontier_rpc_total counter",
        *(f'polite_frontier_rpc_total{{rpc="{name}"}} {count}'
          for name, count in sorted(c.by_rpc.items())),
        "# HELP polite_frontier_urls URLs in the frontier by crawl and state",
        "# TYPE polite_frontier_urls gauge",
    ]
    now = service.now()
    for crawl in store.crawls():
        stats = store.stats(crawl, "", now)
        label = crawl.replace("\\", "\\\\").replace('"', '\\"')
        lines += [f'polite_frontier_urls{{crawl="{label}",state="queued"}} {stats.size}',
                  f'polite_frontier_urls{{crawl="{label}",state="in_process"}} '
                  f"{stats.in_process}",
                  f'polite_frontier_urls{{crawl="{label}",state="completed"}} '
                  f"{stats.completed}"]
    return "\n".join(lines) + "\n"


async def _serve_metrics(service: FrontierService, store: URLs, host: str, port: int
                         ) -> asyncio.Server:
    """GET /metrics on its own port: one short answer a connection, bounded request."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
            if head.startswith(b"GET ") and path.split(b"?")[0] == b"/metrics":
                text = await service.call(metrics_text, service, store)
                body, status = text.encode(), b"200 OK"
            else:
                body, status = b"not found: GET /metrics\n", b"404 Not Found"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; "
                         b"version=0.0.4; charset=utf-8\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
                         + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(answer, host, port, limit=16 * 1024)


async def _beat(service: FrontierService, store: URLs) -> None:
    while True:
        await asyncio.sleep(BEAT_S)
        try:
            await service.call(store.beat, service.node, service.now())
        except Exception:  # a store that did not answer in time: beating again next time
            _log.warning("could not note in the store that %s is alive", service.node,
                         exc_info=True)


class NameTaken(Exception):
    """Another node alive on the same store goes by the name this one was to take."""


async def _claim(service: FrontierService, store: URLs) -> None:
    """Take ``service.node`` in the store, unless a node that is alive beats under it (two
    machines' nodes both named 127.0.0.1:7071 would be one node to ListNodes, SetActive and
    a clean stop). A name that beat lately may be a node killed a moment ago: it is taken
    when no beat comes under it for one and a half beats."""
    began = service.now()
    if service.node in await service.call(store.nodes, began - NODE_GONE_S):
        await asyncio.sleep(1.5 * BEAT_S)
        if service.node in await service.call(store.nodes, began):
            raise NameTaken(f"a node named {service.node} is alive on this store: give each "
                            "node sharing it a name of its own (--node-name)")
    await service.call(store.beat, service.node, service.now())


async def serve(service: FrontierService, store: URLs, host: str, port: int,
                ready: Callable[[int, int | None], None], *,
                metrics_port: int | None = None, name: str | None = None) -> None:
    """Serve until cancelled; ``ready`` is told the ports once they listen. The node is
    named ``name`` (default HOST:PORT) in the store while it runs (ListNodes); a name
    another node alive on the store has is refused (:class:`NameTaken`)."""
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 16 * 1024 * 1024)])
    pb_grpc.add_URLFrontierServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot listen on {host}:{port}")
    metrics = None
    if metrics_port is not None:
        metrics = await _serve_metrics(service, store, host, metrics_port)
    service.node = name or f"{host}:{bound}"
    await _claim(service, store)
    beating = asyncio.create_task(_beat(service, store))
    await server.start()
    ready(bound, None if metrics is None else metrics.sockets[0].getsockname()[1])
    try:
        await server.wait_for_termination()
    finally:
        beating.cancel()
        # struck off first: the other nodes stop naming this one while its last calls end
        try:
            await service.call(store.leave, service.node)
        except Exception:  # the store gone too: the node drops out once it stops beating
            _log.warning("could not strike %s off the store's nodes", service.node,
                         exc_info=True)
        if metrics is not None:
            metrics.close()
        await server.stop(grace=1.0)
        service.close()

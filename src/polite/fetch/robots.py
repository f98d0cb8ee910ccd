"""Fetching robots.txt: one fetch in flight per origin, the status table applied, the state
kept in a store so that a restart does not refetch (or forget) anything.

The decisions are made by :func:`polite.core.robots.lifecycle.robots_state`; this module
only performs the I/O and turns transport failures into :class:`Unreachable` values.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from polite.clock import Clock
from polite.config import ROBOTS_MEMORY_MB
from polite.core._steps import Steps, finish
from polite.core.robots import MAX_ROBOTS_BYTES, parse_steps
from polite.core.robots.lifecycle import (
    AllowAll,
    DisallowAll,
    FetchOutcome,
    FetchPolicy,
    Parsed,
    Received,
    RobotsState,
    Unreachable,
    robots_state_steps,
)
from polite.core.robots.robotstxt import RobotsTxt
from polite.core.robots.usage import Preferences, from_robots, prepare_usage
from polite.core.urls import normal_url, origin_of, split_origin
from polite.errors import ConfigError, PrivateAddress
from polite.fetch._budget import LruBudget
from polite.fetch._steps import stepped
from polite.fetch.http import HttpClient, Leaving, PageFetcher, RequestHeaders, Sign
from polite.fetch.redirects import follow, redirect_target
from polite.fetch.resolve import system_addresses
from polite.fetch.trust import client_context
from polite.storage.base import RobotsRecord, RobotsStore, SharedRobotsStore

__all__ = ["HopStart", "HopTurn", "PublicHosts", "RobotsAnswer", "RobotsFetcher",
           "create_client", "fetch_robots_txt", "is_public_host", "normal_url", "origin_of",
           "private_refusal", "robots_usage", "split_origin"]

# robots.txt: no byte for this long is a timeout, and one request (each redirect's hop
# apart) takes this long at most, however slowly its bytes drip.
DEFAULT_TIMEOUT = 10.0
ROBOTS_DEADLINE_S = 20.0
# Processes sharing a store (Redis): a claim on an origin's fetch is held this long at most
# (longer than a fetch's timeouts, so a slow site is not fetched twice; a dead holder's claim
# runs out), and the others look for its record this often.
SHARED_FETCH_HOLD_S = 30.0
SHARED_FETCH_POLL_S = 0.05
# A parsed file is kept with its matchers for the fetcher's own agent built, so that what it
# holds is counted when it comes (RobotsFetcher's byte budget; the matchers of other agents
# are counted when the file is next used). A body this large is parsed, and they built, in
# steps on the event loop (fetch._steps), which every other request must not wait for: a
# 500 KiB file of wildcard rules takes a few tenths of a second. Smaller ones take under a
# millisecond and are read at once.
STEPPED_BYTES = 32 * 1024
# Matching costs rules x URL length (12,000 wildcard rules against a 5,000-character URL:
# 23 ms); a batch gives the event loop back once it has decided in files of this many bytes
# in all since its last turn (a decision counted as a file of DECISION_BYTES at least), so
# that the proxy and /health go on being answered while a long one is decided: a turn after
# each URL of a large file, after 64 URLs of files of 512 bytes or less. Counted, not
# timed: on a loaded machine a clock's slice measures the other processes too.
DECISIONS_BYTES = STEPPED_BYTES
DECISION_BYTES = 512
# Parsed robots.txt files kept in memory hold at most this many bytes (RobotsFetcher).
ROBOTS_MEMORY_BYTES = int(ROBOTS_MEMORY_MB * 1024 * 1024)
# What a state costs besides its body and its parsed file (the record, the tuple, the key).
_STATE_BYTES = 1024


def create_client(*, verify: ssl.SSLContext | bool = True, guard: PublicHosts | None = None,
                  headers: RequestHeaders | None = None, sign: Sign | None = None,
                  connect_timeout_s: float = 10.0, read_timeout_s: float | None = None,
                  resolve: Callable[[str], Awaitable[str]] | None = None) -> PageFetcher:
    """The HTTP client robots.txt, sitemaps and pages are fetched with (one per run): no
    redirect followed inside it (polite follows them, checking each hop), no proxy from the
    environment (a politeness service must not route through whatever HTTP_PROXY says);
    ``verify``: how origins' certificates are checked (the system's trust by default);
    ``guard``: when given, every connection goes to the address it checked (None: private
    addresses allowed); ``headers``: each site's request header fields; ``sign``: the
    fields that sign every request; ``resolve``: a host's address when there is no guard
    (the system's resolver when None)."""
    tls = verify if isinstance(verify, ssl.SSLContext) else client_context()
    if verify is False:
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    return PageFetcher(connect_timeout_s=connect_timeout_s, tls=tls,
                       resolve=resolve if guard is None else guard.address, sign=sign,
                       headers=headers, read_timeout_s=read_timeout_s)


# How long a host found public is believed so (DNS answers commonly live a few minutes);
# an answer naming a private address is never kept, so such a host is refused every time.
PUBLIC_HOST_TTL_S = 60.0
MAX_PUBLIC_HOSTS = 10_000  # hosts remembered as public at once (the oldest go first)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _is_public_address(address: str, allowed: Sequence[Network] = ()) -> bool:
    ip = ipaddress.ip_address(address)
    return not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved
                or ip.is_multicast or ip.is_unspecified) or any(ip in n for n in allowed)


def networks(values: Iterable[str], option: str = "--allow-network") -> tuple[Network, ...]:
    """Networks written as ``10.1.0.0/16`` or a single address; :class:`ConfigError` naming
    ``option`` for what is neither."""
    found = []
    for value in values:
        try:
            found.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError:
            raise ConfigError(f"{option} {value!r}: not a network (10.1.0.0/16) or an "
                              "address") from None
    return tuple(found)


def _literal(host: str) -> str | None:
    """``host`` as an IP address when it is one written plainly (no lookup needed)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


async def is_public_host(host: str, allowed: Sequence[Network] = ()) -> bool:
    """Whether every address ``host`` resolves to is public (not private, loopback,
    link-local, reserved or multicast) or in ``allowed``: the guard against being an open
    relay."""
    literal = _literal(host)
    if literal is not None:
        return _is_public_address(literal, allowed)
    try:
        addresses = await system_addresses(host)
    except OSError:
        return True  # it will fail to connect and be reported as unreachable
    return all(_is_public_address(address, allowed) for address in addresses)


class PublicHosts:
    """:func:`is_public_host` with its public answers kept :data:`PUBLIC_HOST_TTL_S`, so that
    a service or a crawler asking about a host on every request looks its name up once a
    minute rather than each time (a lookup is a step to the resolver's thread, or worse).
    Only "public" is kept: a host whose addresses include a private one, or whose lookup
    failed, is looked up again next time, so the refusal stays exact. A plainly written
    address is judged without a lookup. ``resolve`` gives a host's addresses (the system
    resolver by default). ``allowed``: private networks let through all the same (an
    intranet to crawl), the others staying refused.

    :meth:`address` is the guard at the moment of connecting: one lookup, every address
    checked, and the one to connect to given back, so that nothing is looked up between the
    check and the connection."""

    def __init__(self, clock: Clock, *, ttl_s: float = PUBLIC_HOST_TTL_S,
                 resolve: Callable[[str], Awaitable[list[str]]] | None = None,
                 max_hosts: int = MAX_PUBLIC_HOSTS, allowed: Sequence[Network] = ()) -> None:
        self._clock = clock
        self._ttl_s = ttl_s
        self._resolve = resolve or system_addresses
        self._max_hosts = max_hosts
        self.allowed = tuple(allowed)
        self._public_until: dict[str, float] = {}  # host -> when the answer is too old

    async def address(self, host: str) -> str:
        """The address to connect to for ``host``, looked up now (never the kept answer)
        and checked; :class:`PrivateAddress` when any of its addresses is not public,
        ``OSError`` when it does not resolve."""
        literal = _literal(host)
        addresses = [literal] if literal is not None else await self._resolve(host)
        if not addresses:
            raise OSError(f"no address for {host}")
        for address in addresses:
            if not _is_public_address(address, self.allowed):
                raise PrivateAddress(_private(host if address == host
                                              else f"{host} ({address})"))
        return addresses[0]

    async def is_public(self, host: str) -> bool:
        literal = _literal(host)
        if literal is not None:
            return _is_public_address(literal, self.allowed)
        until = self._public_until.get(host)
        if until is not None and self._clock() < until:
            return True
        try:
            addresses = await self._resolve(host)
        except OSError:
            self._public_until.pop(host, None)
            return True  # it will fail to connect and be reported as unreachable
        public = all(_is_public_address(address, self.allowed) for address in addresses)
        self._public_until.pop(host, None)  # re-inserted last: the dict keeps age order
        if public:
            if len(self._public_until) >= self._max_hosts:
                del self._public_until[next(iter(self._public_until))]
            self._public_until[host] = self._clock() + self._ttl_s
        return public


def _private(named: str) -> str:
    return f"{named} is a private or loopback address (--allow-private)"


async def private_refusal(guard: PublicHosts | None, url: str) -> str | None:
    """Why ``url`` may not be asked for: its host is private or loopback (``guard`` None:
    private addresses allowed). Every request to a site is asked about first, each
    redirect's hop included (a public site may redirect to an internal address)."""
    if guard is None:
        return None
    host = (urlsplit(url).hostname or "").lower()
    return None if await guard.is_public(host) else _private(host)


class HopStart(Leaving, Protocol):
    """A redirect's hop given its turn at its host: the client's ``leaving`` as its request
    is about to go (False: held back, the slot given again meanwhile), and the note of its
    lateness awaited once it went (:class:`polite.fetch.politeness.LateStart`)."""

    async def noted(self) -> None: ...


# A robots.txt redirect's hop (the URL last asked for, the hop's target) waits for its turn
# at its host: the start it is given, or why it may not go.
HopTurn = Callable[[str, str], Awaitable[HopStart | str]]


@dataclass(frozen=True, slots=True)
class RobotsAnswer:
    """One robots.txt request, its redirects followed (:func:`fetch_robots_txt`): the last
    exchange as it came (an answer, or the client's failure) and how the chain went. Each
    caller classes it its own way: the status table's :class:`Received` or
    :class:`Unreachable` for the service, the proxy and the crawler, the survey's outcomes
    for the survey."""

    url: str  # where the chain stopped: the URL last asked for, or refused, or one too many
    status: int | None = None  # the last answer's (a redirect's, when the chain stopped)
    headers: tuple[tuple[str, str], ...] = ()  # as they came, repeats and order kept
    content_type: str = ""
    body: bytes = b""  # up to the cap
    size: int = 0  # the body's true size (counted past the cap up to ``count_to``)
    truncated: bool = False
    failure: str | None = None  # the client's kind of failure ("timeout", "dns", ...)
    error: str | None = None  # the last exchange's error
    seconds: float = 0.0  # the last exchange's
    redirects: tuple[str, ...] = ()  # each redirect's target, in order
    # Why the chain stopped short of an answer (a refused hop, or too many): None when an
    # exchange ended it.
    stopped: str | None = None
    # The private-address guard's refusal (of ``url``, the first URL or a hop): nothing was
    # asked of ``url``'s host.
    refused: str | None = None
    loop: bool = False  # a redirect to a URL already asked for (with ``stop_loops``)
    requests: int = 0  # how many went out


async def fetch_robots_txt(
        client: HttpClient, url: str, *, guard: PublicHosts | None, max_bytes: int,
        deadline_s: float, read_timeout_s: float | None, count_to: int = 0,
        headers: Mapping[str, str] | None = None, agent: str = "", keep_alive: bool = True,
        in_flight: asyncio.Semaphore | None = None, stop_loops: bool = False,
        follow_broken: bool = False, turn: HopTurn | None = None) -> RobotsAnswer:
    """GET the robots.txt at ``url``, the one way every part of polite asks for it:
    redirects followed by :func:`follow`, ``url`` and each hop checked first by the
    private-address guard (``guard``; None: private addresses allowed); at once (robots.txt
    takes no turn of its host). The body is kept up to ``max_bytes`` and counted to
    ``count_to``; ``deadline_s`` bounds each exchange, ``read_timeout_s`` a wait for a byte.
    ``headers``: the request's fields (None: the client's for the host, User-Agent
    ``agent``). ``keep_alive`` off: the connection is closed after each answer.
    ``in_flight``: held during each exchange (the caller's bound on requests at once).
    ``stop_loops``: a redirect to a URL already asked for ends the chain (``loop``) rather
    than running it to the limit. ``follow_broken``: a redirect whose body broke off is
    followed all the same (its head said where to), else it is the failure that ends the
    chain. ``turn``: each redirect's hop, once the guard lets it, waits for its turn at its
    host, as a page does (a hop is a request like any other: one to the same host would
    otherwise reach it moments after the last); a hop refused a turn ends the chain
    (``stopped``)."""
    refusal = await private_refusal(guard, url)
    if refusal is not None:
        return RobotsAnswer(url, refused=refusal)
    redirects: list[str] = []
    seen = {url}
    last = RobotsAnswer(url)
    asked = url  # the URL last asked for
    start: HopStart | None = None  # the turn the next hop was given

    async def check(target: str) -> str | None:
        nonlocal last, start
        refusal = await private_refusal(guard, target)
        if refusal is not None:
            last = RobotsAnswer(target, redirects=tuple(redirects), refused=refusal,
                                requests=last.requests)
            return refusal
        if turn is not None:
            turned = await turn(asked, target)
            if isinstance(turned, str):
                return turned
            start = turned
        return None

    async def hop(target: str) -> str | None:
        nonlocal last, asked, start
        asked = target
        while True:
            given, start = start, None
            leaving: Leaving | None = given
            async with in_flight or contextlib.nullcontext():
                got = await client.get(target, headers, max_bytes=max_bytes,
                                       count_to=count_to, deadline_s=deadline_s,
                                       read_timeout_s=read_timeout_s, agent=agent,
                                       keep_alive=keep_alive, leaving=leaving)
            if given is None:
                break
            await given.noted()
            if got.failure != "withheld" or turn is None:
                break
            # not sent: its slot went to another request before it could leave; a new turn
            turned = await turn(asked, target)
            if isinstance(turned, str):
                last = RobotsAnswer(target, redirects=tuple(redirects), failure="withheld",
                                    error=turned, requests=last.requests)
                return None
            start = turned
        last = RobotsAnswer(
            target, got.status, tuple(got.raw_headers), got.headers.get("content-type") or "",
            got.body, got.size, got.truncated, got.failure if got.error is not None else None,
            got.error, got.elapsed_s, tuple(redirects), requests=last.requests + 1)
        if got.status is None or (got.error is not None and not got.truncated
                                  and not follow_broken):
            return None
        following = redirect_target(target, got.status, got.headers.get("location"))
        if following is None:
            return None
        redirects.append(following)
        if stop_loops and following in seen:
            last = RobotsAnswer(target, got.status, redirects=tuple(redirects), loop=True,
                                requests=last.requests)
            return None
        seen.add(following)
        last = RobotsAnswer(following, got.status, redirects=tuple(redirects),
                            requests=last.requests)
        return following

    stopped = await follow(url, hop, check)
    if stopped is None:
        return last
    return RobotsAnswer(last.url, last.status, redirects=last.redirects, stopped=stopped,
                        refused=last.refused, requests=last.requests)


def _record(origin: str, state: RobotsState, body: bytes) -> RobotsRecord:
    match state:
        case Parsed():
            return RobotsRecord(origin, "parsed", state.status, body, state.fetched_at,
                                state.expires_at, 0, "stale" if state.stale else "")
        case AllowAll():
            return RobotsRecord(origin, "allow", state.status, b"", state.fetched_at,
                                state.expires_at, 0, state.reason)
        case DisallowAll():
            return RobotsRecord(origin, "disallow", state.status, b"", state.fetched_at,
                                state.retry_at, state.failures, state.reason)


def _cost(state: RobotsState, body: bytes) -> int:
    """The bytes a state kept in memory holds (:attr:`RobotsTxt.footprint`)."""
    parsed = state.robots.footprint if isinstance(state, Parsed) else 0
    return _STATE_BYTES + len(body) + parsed


def _prepared(state: RobotsState, agent: str) -> Steps[RobotsState]:
    """``state`` with what ``agent`` asks of a parsed file built now (its matcher, its
    AI-usage rules), so that the first check finds it ready, and its bytes measured; in
    steps."""
    if isinstance(state, Parsed):
        yield from prepare_usage(state.robots, agent)
        if state.robots.size >= STEPPED_BYTES:
            yield
        state.robots.footprint  # noqa: B018 (measured once, here)
    return state


async def robots_usage(robots: RobotsTxt, urls: Sequence[str], agent: str
                       ) -> list[Preferences]:
    """:func:`from_robots` for each of ``urls``. For a large file, what the lookups read
    is built first in steps (its AI-usage rules may have to be compiled for ``agent``: a
    tenth of a second for thousands of wildcard patterns), then the lookups run one a turn
    of the event loop: a lookup among thousands of wildcard patterns may take
    milliseconds."""
    if robots.size < STEPPED_BYTES or not urls:
        return [from_robots(robots, url, agent) for url in urls]
    await stepped(prepare_usage(robots, agent))
    found: list[Preferences] = []
    for url in urls:
        if found:
            await asyncio.sleep(0)
        found.append(from_robots(robots, url, agent))
    return found


def _state(record: RobotsRecord, dialect: str, max_bytes: int) -> RobotsState:
    """The state a stored record says."""
    return finish(_state_steps(record, dialect, max_bytes))


def _state_steps(record: RobotsRecord, dialect: str, max_bytes: int) -> Steps[RobotsState]:
    if record.kind == "parsed":
        robots = yield from parse_steps(record.body, dialect,
                                        url=record.origin + "/robots.txt",
                                        max_bytes=max_bytes)
        return Parsed(robots, record.fetched_at, record.expires_at, record.status,
                      stale=record.reason == "stale")
    if record.kind == "allow":  # a file-less 2xx answer is a page served as robots.txt
        return AllowAll(record.reason, record.fetched_at, record.expires_at, record.status,
                        html=200 <= record.status < 300)
    return DisallowAll(record.reason, record.fetched_at, record.expires_at, record.failures,
                       record.status)


def _expires_at(state: RobotsState) -> float:
    return state.retry_at if isinstance(state, DisallowAll) else state.expires_at


class RobotsFetcher:
    """The robots.txt state of any origin, fetched when missing or expired.

    However many callers ask about one origin at once, one request goes out and they all get
    its answer. Fetching robots.txt does not use up the host's politeness slot (DESIGN.md).
    """

    def __init__(
        self,
        client: HttpClient,
        store: RobotsStore,
        clock: Clock,
        *,
        agent: str,
        policy: FetchPolicy | None = None,
        max_bytes: int = MAX_ROBOTS_BYTES,
        allow_private: bool = False,
        dialect: str = "auto",
        timeout: float = DEFAULT_TIMEOUT,
        max_in_memory: int = 100_000,
        max_memory_bytes: int = ROBOTS_MEMORY_BYTES,
        public_hosts: PublicHosts | None = None,
    ) -> None:
        self._client = client
        self._public_hosts = public_hosts if public_hosts is not None else PublicHosts(clock)
        self._store = store
        self._clock = clock
        self._agent = agent
        self._policy = policy or FetchPolicy()
        self._max_bytes = max_bytes
        self._allow_private = allow_private
        self._dialect = dialect
        # A wait for robots.txt's next byte: its own, or the run's read timeout when that is
        # shorter (--read-timeout-s 1 gives a silent site up after a second, not ten).
        client_s = client.read_timeout_s
        self._timeout = timeout if client_s is None else min(timeout, client_s)
        # origin -> (state, body): memory keeps the most recently used, within a count and
        # a byte budget (the store has every state), their bytes counted again every so
        # often (the matchers and lookups since may have grown them, by a bounded amount a
        # lookup: measuring is not free, and a crawl uses a host's state for each page)
        self._states: LruBudget[str, tuple[RobotsState, bytes]] = LruBudget(
            max_in_memory, max_memory_bytes, lambda known: _cost(*known))
        self._in_flight: dict[str, asyncio.Future[RobotsState]] = {}
        self.fetches = 0  # how many requests went out: for /metrics and tests

    @property
    def memory_bytes(self) -> int:
        """What the states in memory hold (measured), in all."""
        return self._states.bytes

    def fresh(self, origin: str) -> RobotsState | None:
        """The state of ``origin`` when it is in memory and still in force (no I/O)."""
        known = self._states.get(origin)
        if known is not None and _expires_at(known[0]) > self._clock():
            return known[0]
        return None

    async def _read(self, record: RobotsRecord) -> RobotsState:
        """The state of a stored record, a large body parsed in steps."""
        def read() -> Steps[RobotsState]:
            state = yield from _state_steps(record, self._dialect, self._max_bytes)
            return (yield from _prepared(state, self._agent))

        return finish(read()) if len(record.body) < STEPPED_BYTES else await stepped(read())

    async def known(self, origin: str) -> tuple[RobotsState, bytes] | None:
        """What is known of ``origin``'s robots.txt (memory, else the store), fresh or not,
        and its body; never fetches."""
        known = self._states.get(origin)
        if known is None:
            record = await self._store.load_robots(origin)
            if record is not None:
                known = (await self._read(record), record.body)
                self._states.put(origin, known)
        return known

    async def state(self, url: str, turn: HopTurn | None = None) -> RobotsState:
        """The rules in force for ``url``'s origin, fetching robots.txt if needed; ``turn``:
        each redirect's hop waits for it (:func:`fetch_robots_txt`)."""
        origin = origin_of(url)
        now = self._clock()
        known = await self.known(origin)
        if known is not None and _expires_at(known[0]) > now:
            return known[0]
        pending = self._in_flight.get(origin)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[RobotsState] = asyncio.get_running_loop().create_future()
        self._in_flight[origin] = future
        try:
            state = await self._refresh(origin, known, turn)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiting callers get it, nobody logs it twice
            raise
        finally:
            del self._in_flight[origin]
        future.set_result(state)
        return state

    async def _refresh(self, origin: str, known: tuple[RobotsState, bytes] | None,
                       turn: HopTurn | None = None) -> RobotsState:
        store = self._store
        if not isinstance(store, SharedRobotsStore):
            return await self._fetch_and_save(origin, known, turn)
        # Processes sharing the store fetch a file once: the one that claims the origin
        # fetches, the others read the store until its record comes (or the claim ends
        # without one, its holder dead: then one of them claims it in turn).
        while not await store.claim_robots_fetch(origin, SHARED_FETCH_HOLD_S):
            await asyncio.sleep(SHARED_FETCH_POLL_S)
            state = await self._stored_fresh(origin)
            if state is not None:
                return state
        try:
            # the file may have come between the last look and the claim
            state = await self._stored_fresh(origin)
            return state if state is not None \
                else await self._fetch_and_save(origin, known, turn)
        finally:
            await store.end_robots_fetch(origin)

    async def _stored_fresh(self, origin: str) -> RobotsState | None:
        """The store's state of ``origin`` if it is in force (another process fetched it)."""
        record = await self._store.load_robots(origin)
        if record is None:
            return None
        known = (await self._read(record), record.body)
        if _expires_at(known[0]) <= self._clock():
            return None
        self._states.put(origin, known)
        return known[0]

    async def _fetch_and_save(self, origin: str, known: tuple[RobotsState, bytes] | None,
                              turn: HopTurn | None = None) -> RobotsState:
        outcome = await self._fetch(origin + "/robots.txt", turn)
        now = self._clock()
        large = isinstance(outcome, Received) and len(outcome.body) >= STEPPED_BYTES

        def read() -> Steps[RobotsState]:
            state = yield from robots_state_steps(
                outcome, now, previous=known[0] if known else None, policy=self._policy,
                agent_dialect=self._dialect, max_bytes=self._max_bytes)
            return (yield from _prepared(state, self._agent))

        state = await stepped(read()) if large else finish(read())
        body = outcome.body if isinstance(outcome, Received) else b""
        if isinstance(state, Parsed) and state.stale and known is not None:
            body = known[1]
        self._states.put(origin, (state, body))
        await self._store.save_robots(_record(origin, state, body))
        return state

    async def _fetch(self, url: str, turn: HopTurn | None = None) -> FetchOutcome:
        # The cap and one byte more: the parser reports the cut. Its connection is not kept
        # for the host's next request: that one connects, and is checked by the
        # private-address guard, anew (a name that rebinds between robots.txt and the first
        # page is caught there), as when robots.txt had a client of its own; it is one
        # connection a host a day. A body broken off after the head is what came of the
        # file (a redirect's head is followed all the same).
        got = await fetch_robots_txt(
            self._client, url, guard=None if self._allow_private else self._public_hosts,
            max_bytes=self._max_bytes + 1, deadline_s=ROBOTS_DEADLINE_S,
            read_timeout_s=self._timeout, agent=self._agent, keep_alive=False,
            follow_broken=True, turn=turn)
        if got.requests:
            self.fetches += 1
        # A refused hop leaves robots.txt unreachable, as a network failure does.
        if got.stopped is not None:
            return Unreachable(got.stopped)
        if got.refused is not None:
            return Unreachable(got.refused)
        if got.status is None:
            return Unreachable("timed out" if got.failure == "timeout"
                               else got.error or "no answer")
        return Received(got.status, got.body, got.headers, got.url)

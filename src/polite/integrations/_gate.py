"""The gate the drop-ins share: may this request go now, and what did it get.

The deciding is :class:`polite.fetch.politeness.Politeness`'s (``check(..., reserve=True)``
and ``note_response``), in this process with a store of any kind, or a running
``polite serve``'s (``POST /politeness/verbose?reserve=true`` and ``/politeness/feedback``).
:class:`LoopGate` runs them on its caller's asyncio loop (Scrapy's asyncio reactor);
:class:`PoliteGate` runs a LoopGate on an event loop of its own, in a thread, so that one
gate serves synchronous clients (requests, httpx's ``Client``), any asyncio loop and
Scrapy's plain Twisted reactor alike: the clients wait on a future, never on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import difflib
import functools
import inspect
import re
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar
from urllib.parse import unquote, urlsplit

from polite.clock import WallClock
from polite.config import DROPINS, KEYWORDS, Knobs
from polite.core._documents import read_json
from polite.core.politeness import (
    DEFAULT_DELAY_S,
    MAX_CRAWL_DELAY_S,
    Allowed,
    Decision,
    Delays,
    Disallowed,
    RefusalReason,
    Refused,
    WaitSource,
    WaitUntil,
)
from polite.core.politeness.rules import ADAPTIVE_FACTOR
from polite.core.robots import product_token
from polite.core.robots.lifecycle import DisallowAll, Parsed
from polite.core.robots.model import Dialect, Rule
from polite.core.robots.usage import Preferences, from_robots, purpose_json
from polite.errors import (
    ConfigError,
    FetchError,
    InvalidURL,
    MalformedDocument,
    RequestRefused,
    RobotsDisallowed,
    SettingError,
    SlotNotReady,
)
from polite.fetch.http import Sign
from polite.fetch.politeness import LEASE_S, Politeness, message
from polite.fetch.robots import (
    PublicHosts,
    RobotsFetcher,
    create_client,
    networks,
    split_origin,
)
from polite.identity.options import signer_from
from polite.storage import MemoryStore, open_store

if TYPE_CHECKING:
    from polite.identity.signatures import RequestSigner

__all__ = ["AllowPrivate", "Grant", "LoopGate", "PoliteGate", "Rest", "identity", "run_now",
           "unexpected_keywords"]

_T = TypeVar("_T")


def unexpected_keywords(owner: str, given: Iterable[str],
                        *takers: Callable[..., object]) -> None:
    """:class:`TypeError` naming ``owner`` (the class a user made, not the base that took
    the arguments) and the nearest known name, for a keyword argument none of the
    ``takers`` (constructors) names."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = [parameter.name for taker in takers
             for parameter in inspect.signature(taker).parameters.values()
             if parameter.kind in kinds and parameter.name != "self"]
    for name in given:
        if name not in names:
            near = difflib.get_close_matches(name, names, n=1)
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}"
                            + (f" (did you mean {near[0]!r}?)" if near else ""))
# Which private addresses may be reached: all (True), none (False), or those in some
# networks ("10.1.0.0/16", or one address), the others staying refused.
AllowPrivate = bool | Sequence[str]

ROBOTS_ATTEMPTS = 3  # robots.txt unreachable this many times in a row: the site is left alone
MAX_WAIT_S = 600.0  # a request that would wait longer in all is refused with the wait
# A call to a polite serve: 30 s in all, 5 s to connect (httpx is imported only by a gate
# on a service: its import, its command line's included, cost each Scrapy process 0.1 s)
SERVICE_TIMEOUT_S = 30.0
SERVICE_CONNECT_TIMEOUT_S = 5.0
# Later than this after its grant, a request's departure is recorded before it goes (one
# more step to the store); sooner, the report of its answer moves the slot.
LATE_DEPARTURE_S = 0.005
# Sleeping wakes a little after the slot rather than a little before it (timer rounding);
# the store judges the slot by its own clock either way.
WAKE_MARGIN_S = 0.002


@functools.lru_cache(maxsize=256)  # asked per request; a client has a User-Agent or a few
def identity(user_agent: str, agent: str) -> tuple[str, str]:
    """One identity for a drop-in's requests to a site: ``(token, user_agent)``, the product
    token robots.txt is read for and the User-Agent every request carries, robots.txt
    included. ``agent`` given, a request's ``user_agent`` that does not name it (a client
    library's own, ``python-httpx/0.28.1``) is replaced by it; one that names it
    (``ExampleBot/1.0 (+https://example.com/bot)``) is kept. Without ``agent`` the token is
    the User-Agent's own (RFC 9309, 2.2.1), ``polite`` when it has none."""
    if agent:
        if user_agent and re.search(rf"(?<![\w-]){re.escape(agent)}(?![\w-])", user_agent,
                                    re.IGNORECASE):
            return agent, user_agent
        return agent, agent
    token = product_token(user_agent) or "polite"
    return token, user_agent or token


class Rest(Awaitable[_T]):
    """The rest of a coroutine that :func:`run_now` started: awaiting it waits for what the
    coroutine was waiting on, then runs it on, as if it had been awaited from the start."""

    __slots__ = ("_coroutine", "_pending")

    def __init__(self, coroutine: Coroutine[Any, Any, _T], pending: Any) -> None:
        self._coroutine = coroutine
        self._pending = pending  # what the coroutine yielded: the event loop's to wait on

    def __await__(self) -> Generator[Any, Any, _T]:
        coroutine, pending = self._coroutine, self._pending
        while True:
            try:
                sent = yield pending
            except BaseException as exc:  # the awaiting task cancelled, or the wait failed
                try:
                    pending = coroutine.throw(exc)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
            else:
                try:
                    pending = coroutine.send(sent)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]


def run_now(coroutine: Coroutine[Any, Any, _T]) -> tuple[_T] | Rest[_T]:
    """Run ``coroutine`` here, on the caller's stack, until it first waits: its result (in a
    1-tuple) when it never does, else its :class:`Rest` to await. The gate's answers with
    the store in memory never wait, so a request is decided and its response reported
    without a task, a coroutine chain or a turn of the loop of their own (Scrapy's
    middleware: measured, a task per response cost more than the report itself). An
    exception the coroutine raises before waiting is raised here."""
    try:
        pending = coroutine.send(None)
    except StopIteration as stop:
        return (stop.value,)
    return Rest(coroutine, pending)


class _Turn(NamedTuple):
    """A request waiting in its host's line."""

    url: str
    agent: str
    user_agent: str
    started: float  # time.monotonic() when it asked
    future: asyncio.Future[Grant]


class Grant(NamedTuple):
    """A slot taken: how long the request waited for it, and when (``time.monotonic()``);
    with a purpose, the URL's robots.txt AI-usage preferences for it (``purpose``, ``pref``,
    ``reason``, ``sources``)."""

    waited_s: float
    granted_at: float
    usage: dict[str, object] | None = None


class Ruling(NamedTuple):
    """A decision as the gate acts on it: the value, how long until asking again may change
    it (``None``: it will not), and its words for an exception's reason."""

    decision: Decision
    wait_s: float | None
    reason: str | None


class _Backend(Protocol):
    immediate: bool  # its reports never wait (nothing to send anywhere)

    async def check(self, url: str, agent: str, user_agent: str) -> Ruling: ...

    async def usage(self, url: str, agent: str, purpose: str) -> dict[str, object]: ...

    async def note(self, url: str, status: int, elapsed_s: float | None,
                   retry_after: str | None, late_s: float | None) -> None: ...

    async def depart(self, url: str, late_s: float) -> None: ...

    async def abandon(self, url: str) -> None: ...

    async def given_up(self, url: str) -> str | None: ...

    async def close(self) -> None: ...


class _Local:
    """Politeness in this process; its state in ``store`` (memory, SQLite or Redis)."""

    def __init__(self, store_url: str, *, agent: str, allow_private: AllowPrivate,
                 dialect: str, default_delay_s: float, max_crawl_delay_s: float,
                 adaptive_factor: float, knobs: Knobs, sign: Sign | None) -> None:
        clock = WallClock()  # comparable between processes that share a SQLite file
        everything = allow_private is True
        if isinstance(allow_private, str):
            allow_private = (allow_private,)
        hosts = PublicHosts(clock, allowed=() if isinstance(allow_private, bool)
                            else networks(allow_private, "allow_private"))
        self._store = open_store(store_url, clock, knob=knobs.store)
        # robots.txt's connections go to the address the guard checked; it goes under the
        # User-Agent of the requests that asked for it, and signed as they are
        self._client = create_client(guard=None if everything else hosts, sign=sign)
        # A store in memory answers without waiting: a report may be done on its caller's
        # stack (run_now) rather than in a task of its own.
        self.immediate = isinstance(self._store, MemoryStore)
        # A store other processes may share: a request granted holds its host until its
        # response is noted (a lease), so that they have one request of a host in flight
        # at a time and a 429's pause reaches the next request of any of them.
        self._lease_s = None if self.immediate else LEASE_S
        fetcher = RobotsFetcher(self._client, self._store, clock, agent=agent,
                                allow_private=everything, dialect=dialect, public_hosts=hosts)
        self._politeness = Politeness(fetcher, self._store, clock, agent=agent,
                                      default_delay_s=default_delay_s,
                                      max_crawl_delay_s=max_crawl_delay_s,
                                      allow_private=everything,
                                      adaptive_factor=adaptive_factor, public_hosts=hosts,
                                      private_hint=knobs.allow_private)

    async def check(self, url: str, agent: str, user_agent: str) -> Ruling:
        if user_agent:
            with contextlib.suppress(InvalidURL):  # the check refuses it
                self._client.headers.identify(split_origin(url)[1], user_agent)
        (found,) = await self._politeness.check([url], reserve=True, agent=agent,
                                                lease_s=self._lease_s)
        return Ruling(found.decision, found.wait_s, message(found))

    async def note(self, url: str, status: int, elapsed_s: float | None,
                   retry_after: str | None, late_s: float | None) -> None:
        if late_s is not None and late_s > 0:
            await self._politeness.note_late_start(url, late_s)
        await self._politeness.note_response(url, status, elapsed_s=elapsed_s,
                                             retry_after=retry_after,
                                             ends_lease=self._lease_s is not None)

    async def depart(self, url: str, late_s: float) -> None:
        await self._politeness.note_late_start(url, late_s)

    async def abandon(self, url: str) -> None:
        if self._lease_s is not None:
            await self._politeness.end_lease(url)

    async def usage(self, url: str, agent: str, purpose: str) -> dict[str, object]:
        state = await self._politeness.robots_state(url)
        prefs = from_robots(state.robots, url, agent) if isinstance(state, Parsed) \
            else Preferences()
        return purpose_json(prefs, purpose)

    async def given_up(self, url: str) -> str | None:
        state = await self._politeness.robots_state(url)
        if isinstance(state, DisallowAll) and state.failures >= ROBOTS_ATTEMPTS:
            return f"robots.txt: {state.reason} ({state.failures} tries); the site is left alone"
        return None

    async def close(self) -> None:
        await self._client.aclose()
        await self._store.close()


def _decision_of(shown: dict[str, Any], error: str | None) -> Decision:
    """A decision back from its JSON (``POST /politeness/verbose?decision=true``); a
    ``LookupError`` or ``ValueError`` when it is not one. Times the service knows are given
    as the answer's ``retryAfter``; the value keeps only what the gate acts on."""
    match shown["kind"]:
        case "allowed":
            return Allowed(0.0, Delays())
        case "wait":
            field = shown.get("field")
            return WaitUntil(0.0, WaitSource[str(shown["source"]).upper()], shown.get("line"),
                             field=None if field is None else WaitSource[str(field).upper()])
        case "disallowed":
            pattern, line = shown.get("pattern"), shown.get("line")
            return Disallowed(None if pattern is None else Rule(False, str(pattern), line or 0),
                              line, Dialect(shown["dialect"]), str(shown["explanation"]))
        case "refused":
            return Refused(RefusalReason[str(shown["reason"]).upper()], error or "")
    raise ValueError(f"not a decision: {shown!r}")


class _Service:
    """A running ``polite serve``: it holds the slots, so many processes share them."""

    def __init__(self, service_url: str) -> None:
        self.immediate = False  # every answer is a round trip
        # http://:TOKEN@HOST:PORT: a service with --admin-token, which it asks of reserving
        # and of feedback; the token is sent as Bearer and kept out of messages.
        parts = urlsplit(service_url)
        token = unquote(parts.password or "")
        self._base = parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl().rstrip("/")
        import httpx

        self._client = httpx.AsyncClient(
            base_url=self._base, trust_env=False,
            timeout=httpx.Timeout(SERVICE_TIMEOUT_S, connect=SERVICE_CONNECT_TIMEOUT_S),
            headers={"authorization": f"Bearer {token}"} if token else None)

    async def _post(self, path: str, params: dict[str, str], body: object) -> Any:
        import httpx

        try:
            response = await self._client.post(path, params=params, json=body)
        except httpx.TransportError as exc:
            raise FetchError(f"polite serve at {self._base} did not answer: "
                             f"{type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise FetchError(f"polite serve at {self._base}{path} answered "
                             f"{response.status_code}: {response.text[:200]}")
        try:
            return read_json(response.content)
        except MalformedDocument as exc:
            raise FetchError(f"polite serve at {self._base}{path} answered what this client "
                             f"does not read: {exc}") from exc

    async def check(self, url: str, agent: str, user_agent: str) -> Ruling:
        # robots.txt is the service's request, under its own --agent and --sign-with
        answer = await self._post("/politeness/verbose",
                                  {"reserve": "true", "lease": "true", "agent": agent,
                                   "decision": "true"},
                                  [url])
        try:
            item = answer[0]
            retry_ms = int(item["retryAfter"])
            return Ruling(_decision_of(item["decision"], item.get("error")),
                          None if retry_ms < 0 else retry_ms / 1000, item.get("error"))
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise FetchError(f"polite serve at {self._base} answered {answer!r}") from exc

    async def usage(self, url: str, agent: str, purpose: str) -> dict[str, object]:
        answer = await self._post("/politeness/verbose", {"agent": agent, "purpose": purpose},
                                  [url])
        try:
            found = answer[0]["usage"]
        except (LookupError, TypeError) as exc:
            raise FetchError(f"polite serve at {self._base} answered {answer!r}") from exc
        if not isinstance(found, dict):
            raise FetchError(f"polite serve at {self._base} answered {answer!r}")
        return found

    async def note(self, url: str, status: int, elapsed_s: float | None,
                   retry_after: str | None, late_s: float | None) -> None:
        report: dict[str, object] = {"url": url, "status": status, "lease": True}
        if elapsed_s is not None:
            report["elapsedMs"] = min(3_600_000, round(elapsed_s * 1000, 3))
        if retry_after is not None:
            report["retryAfter"] = retry_after
        if late_s is not None and late_s > 0:
            report["lateMs"] = min(3_600_000, round(late_s * 1000, 3))
        await self._post("/politeness/feedback", {}, [report])

    async def depart(self, url: str, late_s: float) -> None:
        await self._post("/politeness/feedback", {},
                         [{"url": url, "lateMs": min(3_600_000, round(late_s * 1000, 3))}])

    async def abandon(self, url: str) -> None:
        await self._post("/politeness/feedback", {}, [{"url": url, "lease": True}])

    async def given_up(self, url: str) -> str | None:
        return None  # the service's own robots.txt policy; a long wait ends at max_wait_s

    async def close(self) -> None:
        await self._client.aclose()


def _backend(*, agent: str, store: str, service_url: str | None, allow_private: AllowPrivate,
             dialect: str, default_delay_s: float, max_crawl_delay_s: float,
             adaptive_factor: float, knobs: Knobs, sign: Sign | None) -> _Backend:
    if service_url is not None and store != "memory://":
        raise ConfigError(f"give {knobs.store.rstrip('=')} or {knobs.service_url.rstrip('=')}"
                          ", not both: the service keeps its own state")
    if service_url is not None and not service_url.startswith(("http://", "https://")):
        raise SettingError(knobs.service_url, service_url, "expected http://HOST:PORT")
    if service_url is not None:
        return _Service(service_url)
    return _Local(store, agent=agent or "polite", allow_private=allow_private,
                  dialect=dialect, default_delay_s=default_delay_s,
                  max_crawl_delay_s=max_crawl_delay_s, adaptive_factor=adaptive_factor,
                  knobs=knobs, sign=sign)


class LoopGate:
    """The gate on the asyncio event loop of its caller, no thread: :meth:`acquire` before a
    request, :meth:`report` after it, all awaited on one loop (the first that calls it; the
    store's connections belong to it). With the store in memory a slot free now is granted
    without the coroutine ever suspending, so a request pays for the decision and nothing
    else; Scrapy's middleware uses this on the asyncio reactor. The arguments are
    :class:`PoliteGate`'s.
    """

    def __init__(self, *, agent: str = "", store: str = "memory://",
                 service_url: str | None = None, allow_private: AllowPrivate = False,
                 dialect: str = "auto", default_delay_s: float = DEFAULT_DELAY_S,
                 max_crawl_delay_s: float = MAX_CRAWL_DELAY_S,
                 adaptive_factor: float = ADAPTIVE_FACTOR, wait: bool = True,
                 max_wait_s: float = MAX_WAIT_S, knobs: Knobs = KEYWORDS,
                 purpose: str | None = None, refuse_by_purpose: bool = False,
                 sign_with: str | None = None, signature_agent: str | None = None) -> None:
        # Checked before anything is built, as polite.config.DROPINS declares them and
        # named as the caller's surface spells them.
        for name, value in (("purpose", purpose), ("default_delay_s", default_delay_s),
                            ("max_crawl_delay_s", max_crawl_delay_s),
                            ("adaptive_factor", adaptive_factor), ("max_wait_s", max_wait_s),
                            ("dialect", dialect)):
            DROPINS[name].check(value, getattr(knobs, name, f"{name}="))
        # Every request the drop-ins send under this gate is signed with this key, and so
        # is robots.txt, which the gate sends itself.
        self.signer: RequestSigner | None = signer_from(sign_with, signature_agent,
                                                        knobs=knobs)
        # Built here, not on first use: a wrong store URL is refused at once. Nothing in it
        # needs a running loop yet (asyncio's locks and the clients bind on first use).
        self._backend = _backend(agent=agent, store=store, service_url=service_url,
                                 allow_private=allow_private, dialect=dialect,
                                 default_delay_s=default_delay_s,
                                 max_crawl_delay_s=max_crawl_delay_s,
                                 adaptive_factor=adaptive_factor, knobs=knobs,
                                 sign=None if self.signer is None else self.signer.headers)
        self.agent = agent
        self.wait = wait
        self.max_wait_s = max_wait_s
        self.purpose = purpose
        self.refuse_by_purpose = refuse_by_purpose
        # host -> the requests waiting while one of its requests is decided
        self._queues: dict[str, deque[_Turn]] = {}
        self._servers: set[asyncio.Task[None]] = set()  # kept until done (asyncio's advice)
        self._closed = False

    async def acquire(self, url: str, agent: str | None = None, *,
                      user_agent: str = "") -> Grant:
        """Wait for ``url``'s host slot and take it; :class:`RobotsDisallowed`,
        :class:`RequestRefused` or :class:`SlotNotReady` else. Requests to one host queue in
        order; requests to other hosts never wait behind them. ``user_agent``: the
        User-Agent the request carries, for robots.txt to carry too."""
        agent = agent or self.agent or "polite"
        try:
            host = split_origin(url)[1]
        except InvalidURL as exc:
            raise RequestRefused(url, str(exc)) from exc
        started = time.monotonic()
        queue = self._queues.get(host)
        if queue is not None:  # another request of the host is being decided: wait in line
            turn: asyncio.Future[Grant] = asyncio.get_running_loop().create_future()
            queue.append(_Turn(url, agent, user_agent, started, turn))
            return await turn
        # Nobody else asks for the host: decided right here, most often without suspending.
        self._queues[host] = deque()
        try:
            return await self._decide(url, agent, user_agent, started)
        finally:
            self._serve_queue(host)

    def _serve_queue(self, host: str) -> None:
        """The requests that queued for ``host`` meanwhile, decided in order by one task:
        while slots are free it grants them all in one go, rather than waking one waiter
        per turn of a loop that may be busy (Scrapy's reactor: tens of ms a turn)."""
        queue = self._queues[host]
        if not queue:
            del self._queues[host]
            return

        async def serve() -> None:
            try:
                while queue:
                    turn = queue.popleft()
                    if turn.future.done():  # cancelled: the client no longer waits
                        continue
                    try:
                        grant = await self._decide(turn.url, turn.agent, turn.user_agent,
                                                   turn.started)
                    except Exception as exc:  # the client's to handle, as if it asked itself
                        if not turn.future.done():
                            turn.future.set_exception(exc)
                        continue
                    except BaseException:  # this task cancelled (the gate closing)
                        turn.future.cancel()
                        raise
                    if not turn.future.done():
                        turn.future.set_result(grant)
            finally:
                del self._queues[host]
                for turn in queue:  # the loop is closing: nobody will decide these
                    turn.future.cancel()
                self._servers.discard(task)

        task = asyncio.get_running_loop().create_task(serve(), name=f"polite-gate {host}")
        self._servers.add(task)

    async def _decide(self, url: str, agent: str, user_agent: str, started: float) -> Grant:
        """Ask until the slot is taken (sleeping as told) or the request is refused; with a
        purpose the preferences are read first, so a refusal by them takes no slot."""
        usage = None
        if self.purpose is not None:
            usage = await self._backend.usage(url, agent, self.purpose)
            if self.refuse_by_purpose and usage["pref"] == "disallow":
                raise RequestRefused(url, f"AI-usage preferences refuse {self.purpose}: "
                                          f"{usage['reason']}")
        while True:
            # Taken before asking: a slot granted by the answer starts no earlier, so the
            # late start reported later is never too short.
            asked = time.monotonic()
            ruling = await self._backend.check(url, agent, user_agent)
            waited_s = time.monotonic() - started
            decision = ruling.decision
            if type(decision) is Allowed:
                return Grant(waited_s, asked, usage)
            if type(decision) is Disallowed:
                raise RobotsDisallowed(url, decision.explanation)
            reason = ruling.reason or "not allowed"
            wait_s = ruling.wait_s
            if wait_s is None:
                raise RequestRefused(url, reason)
            gave_up = await self._backend.given_up(url)
            if gave_up is not None:
                raise RequestRefused(url, gave_up)
            if not self.wait or waited_s + wait_s > self.max_wait_s:
                raise SlotNotReady(url, wait_s, reason)
            await asyncio.sleep(wait_s + WAKE_MARGIN_S)

    @property
    def reports_at_once(self) -> bool:
        """:meth:`report` never waits (the store is in memory): it may be run to its end on
        its caller's stack with :func:`run_now`. A report that goes to SQLite, Redis or a
        service needs a task of its own (its client's cancel scopes and context variables
        must stay in one task)."""
        return self._backend.immediate

    async def report(self, url: str, status: int, *, elapsed_s: float | None = None,
                     retry_after: str | None = None, grant: Grant | None = None,
                     at: float | None = None) -> None:
        """What a request got (see :meth:`PoliteGate.report`); ``at``: when its answer
        came (``time.monotonic()``), now if not given."""
        late_s = None if grant is None else \
            (time.monotonic() if at is None else at) - grant.granted_at
        await self._backend.note(url, status, elapsed_s, retry_after, late_s)

    async def abandon(self, url: str) -> None:
        """The request granted a slot for ``url`` got no response (it failed, or was
        dropped before it left): its host is free for the next request at once, rather
        than when its lease runs out."""
        await self._backend.abandon(url)

    async def depart(self, url: str, grant: Grant, *, at: float | None = None) -> Grant:
        """The request given ``grant`` leaves now, or ``at`` (see :meth:`PoliteGate.depart`);
        the grant to :meth:`report` with."""
        now = time.monotonic() if at is None else at
        late_s = now - grant.granted_at
        if late_s <= LATE_DEPARTURE_S:  # the answer's report will move the slot (report)
            return grant
        await self._backend.depart(url, late_s)
        return Grant(grant.waited_s, now, grant.usage)

    async def close(self) -> None:
        """Close the store (or the service's client)."""
        if not self._closed:
            self._closed = True
            for server in list(self._servers):
                server.cancel()
            await asyncio.gather(*self._servers, return_exceptions=True)
            await self._backend.close()


class PoliteGate:
    """Politeness for clients that fetch on their own: :meth:`acquire` before a request,
    :meth:`report` after it; a :class:`LoopGate` on an event loop of its own, in a thread,
    so that synchronous clients and any event loop can ask it.

    ``store`` is a store URL (``memory://``, ``sqlite:///PATH``, ``redis://HOST:PORT/DB``);
    ``service_url`` asks a running ``polite serve`` instead (its own ``--allow-private``
    and delays then apply). ``adaptive_factor`` times a host's running response time is
    the least spacing (0: off). ``wait=False`` raises :class:`SlotNotReady` rather than waiting.
    Requests to one host queue in order; requests to other hosts never wait behind them.
    ``knobs``: how the caller's surface names the settings its errors point at (Scrapy's
    ``POLITE_*``; the keyword arguments by default). ``sign_with`` an Ed25519 key file
    (``signature_agent`` its key directory's URL): robots.txt, which the gate fetches, is
    signed with it, and so is every request of the drop-ins that share the gate
    (:attr:`signer`). robots.txt goes under the User-Agent of the request that needed it
    (``acquire``'s ``user_agent``); with ``service_url`` it is the service's request, under
    its own ``--agent`` and ``--sign-with``.
    """

    def __init__(self, *, agent: str = "", store: str = "memory://",
                 service_url: str | None = None, allow_private: AllowPrivate = False,
                 dialect: str = "auto", default_delay_s: float = DEFAULT_DELAY_S,
                 max_crawl_delay_s: float = MAX_CRAWL_DELAY_S,
                 adaptive_factor: float = ADAPTIVE_FACTOR, wait: bool = True,
                 max_wait_s: float = MAX_WAIT_S, knobs: Knobs = KEYWORDS,
                 purpose: str | None = None, refuse_by_purpose: bool = False,
                 sign_with: str | None = None, signature_agent: str | None = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="polite-gate",
                                        daemon=True)
        self._thread.start()
        self._closed = False

        async def build() -> LoopGate:  # on the gate's loop, whose the clients will be
            return LoopGate(agent=agent, store=store, service_url=service_url,
                            allow_private=allow_private, dialect=dialect,
                            default_delay_s=default_delay_s,
                            max_crawl_delay_s=max_crawl_delay_s,
                            adaptive_factor=adaptive_factor, wait=wait, max_wait_s=max_wait_s,
                            knobs=knobs, purpose=purpose, refuse_by_purpose=refuse_by_purpose,
                            sign_with=sign_with, signature_agent=signature_agent)

        try:
            self._gate = self._submit(build()).result()
        except BaseException:
            self._stop()
            raise

    @property
    def agent(self) -> str:
        return self._gate.agent

    @property
    def wait(self) -> bool:
        return self._gate.wait

    @property
    def max_wait_s(self) -> float:
        return self._gate.max_wait_s

    @property
    def signer(self) -> RequestSigner | None:
        """What signs every request under this gate (``sign_with``), robots.txt included."""
        return self._gate.signer

    def _submit(self, coroutine: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    # -- asking -----------------------------------------------------------------------------

    def acquire(self, url: str, agent: str | None = None, *, user_agent: str = ""
                ) -> concurrent.futures.Future[Grant]:
        """A future :class:`Grant`, set once ``url``'s host slot is taken; its
        exception is :class:`RobotsDisallowed`, :class:`RequestRefused` or
        :class:`SlotNotReady`. ``user_agent``: the User-Agent the request carries, for the
        host's robots.txt request to carry too."""
        return self._submit(self._gate.acquire(url, agent, user_agent=user_agent))

    def acquire_blocking(self, url: str, agent: str | None = None, *,
                         user_agent: str = "") -> Grant:
        """:meth:`acquire`, waiting here (for synchronous clients)."""
        return self.acquire(url, agent, user_agent=user_agent).result()

    async def acquire_async(self, url: str, agent: str | None = None, *,
                            user_agent: str = "") -> Grant:
        """:meth:`acquire`, awaited from any asyncio loop."""
        return await asyncio.wrap_future(self.acquire(url, agent, user_agent=user_agent))

    # -- telling ----------------------------------------------------------------------------

    def report(self, url: str, status: int, *, elapsed_s: float | None = None,
               retry_after: str | None = None, grant: Grant | None = None
               ) -> concurrent.futures.Future[None]:
        """What a request got: its time feeds the adaptive delay, a 429 or 503 holds the host
        (``Retry-After`` honoured). Called as the answer's head arrives, with the request's
        ``grant``: the host's spacing then runs from that moment rather than from the grant,
        as Heritrix counts its delay from the end of a fetch. A client does not see when its
        request left (a connection to open first, a busy thread); counting from the answer
        keeps every gap at the origin at least the delay."""
        # The answer's time is taken here, not when the gate's thread gets to it.
        return self._submit(self._gate.report(url, status, elapsed_s=elapsed_s,
                                              retry_after=retry_after, grant=grant,
                                              at=time.monotonic()))

    def depart(self, url: str, grant: Grant) -> concurrent.futures.Future[Grant]:
        """The request given ``grant`` leaves now. Over :data:`LATE_DEPARTURE_S` after the
        grant (it waited for a busy thread or reactor), its host's spacing starts here,
        recorded before it goes, so that another process asking meanwhile already counts
        from here; sooner, nothing is recorded (the report of its answer moves the slot).
        The future's grant is the one to :meth:`report` with."""
        now = time.monotonic()
        if now - grant.granted_at <= LATE_DEPARTURE_S:  # no step to the gate's thread
            on_time: concurrent.futures.Future[Grant] = concurrent.futures.Future()
            on_time.set_result(grant)
            return on_time
        return self._submit(self._gate.depart(url, grant, at=now))

    def abandon(self, url: str) -> concurrent.futures.Future[None]:
        """The request granted a slot for ``url`` got no response (it failed, or was
        dropped before it left): with a shared store or a service, its host is free for
        the next request at once, rather than when the request's lease runs out."""
        return self._submit(self._gate.abandon(url))

    async def report_async(self, url: str, status: int, *, elapsed_s: float | None = None,
                           retry_after: str | None = None, grant: Grant | None = None
                           ) -> None:
        """:meth:`report`, awaited from any asyncio loop."""
        await asyncio.wrap_future(self.report(url, status, elapsed_s=elapsed_s,
                                              retry_after=retry_after, grant=grant))

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store (or the service's client) and stop the gate's thread."""
        if self._closed:
            return
        self._closed = True
        try:
            self._submit(self._gate.close()).result(timeout=10)
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> PoliteGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

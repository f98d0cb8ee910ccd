"""One port, two kinds of request (DESIGN.md, "Surfaces").

A request whose target is absolute (``GET http://site/path HTTP/1.1``) is proxied: robots.txt
and the host's slot are consulted through :class:`~polite.fetch.politeness.Politeness`, then
the request is forwarded over a kept-alive upstream connection and the response streamed
back. Anything else (``GET /health``) goes to the ASGI app given, the REST service.

HTTP/1.1 is read by llhttp on both sides (:mod:`polite.proxy.http1`); this module owns the
sockets. Refusals are answered here, never forwarded: robots.txt forbids (403, naming the
rule and its line), the host's slot is taken (``reject`` mode: 429 with ``Retry-After`` in
whole seconds and the exact wait in ``X-Polite-Retry-After-Ms``; ``wait`` mode: held until
the slot, up to a limit), a private or loopback target (403 unless allowed), a request
addressed to the proxy itself (a loop), ambiguous framing (both Content-Length and
Transfer-Encoding, or two lengths: request smuggling), a URL of another scheme than http and
https or a host name no lookup can take (400).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import math
import re
import sqlite3
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol
from urllib.parse import unquote, urlsplit

from polite.clock import WallClock
from polite.core.cache.policy import Choice, Stored, not_modified
from polite.core.robots.lifecycle import Parsed
from polite.core.robots.usage import from_robots
from polite.core.usage.statement import Pref
from polite.core.usage.vocab import PURPOSES
from polite.errors import InvalidURL, PrivateAddress
from polite.fetch.activity import TraceEntry
from polite.fetch.cache import PageCache
from polite.fetch.politeness import Answer, Politeness, message
from polite.fetch.robots import PublicHosts, split_origin
from polite.proxy.http1 import (
    END,
    EOF,
    LAST_CHUNK,
    Channel,
    Event,
    Head,
    Headers,
    ProtocolError,
    frame,
    request_head,
    response_head,
)

__all__ = ["Interception", "Mode", "ProxyServer", "ProxySettings", "TunnelCertificates"]

Message = MutableMapping[str, Any]
ASGIApp = Callable[[Message, Callable[[], Awaitable[Message]],
                    Callable[[Message], Awaitable[None]]], Awaitable[None]]
Key = tuple[str, str, int]  # scheme, host, port

# RFC 9110, 7.6.1: hop-by-hop fields, never forwarded (plus those named in Connection).
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                         b"transfer-encoding", b"upgrade", b"proxy-authorization",
                         b"proxy-authenticate"})
_VIA = b"1.1 polite"
# The longest wait a request may ask for with X-Polite-Timeout.
MAX_REQUEST_WAIT_S = 3600.0
_WRITE_BATCH = 65_536  # response bytes gathered before a write
_CHUNKED = (b"transfer-encoding", b"chunked")
_CLOSE = (b"connection", b"close")
_OTHER_SCHEME = re.compile(rb"([A-Za-z][A-Za-z0-9+.-]*)://")  # an absolute URL, not http(s)
_FRAMING = frozenset({b"content-length"})  # kept whatever Connection names
_TUNNEL_DEFAULTS = frozenset({b"x-polite-mode", b"x-polite-timeout", b"x-polite-client"})


class Mode(enum.StrEnum):
    """What happens to a request whose host's slot is taken."""

    REJECT = "reject"  # seed 001: 429 with Retry-After
    WAIT = "wait"  # hold it until the slot, up to ProxySettings.max_wait_s
    ORDERED = "ordered"  # wait, and answer one client's requests in the order they came


# (method, URL) -> the header fields that sign that request
Sign = Callable[[str, str], list[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class ProxySettings:
    mode: Mode = Mode.REJECT
    max_wait_s: float = 60.0  # wait mode: longer waits are answered 429 at once
    max_head_bytes: int = 32 * 1024  # request or response line plus header fields
    max_request_body_bytes: int = 16 * 1024 * 1024
    # A request to the REST API: refused by its Content-Length at once, and cut off once
    # past this, rather than read up to max_request_body_bytes first (40 clients sending
    # 15 MiB each took the process from 65 to 693 MiB).
    max_api_body_bytes: int = 1024 * 1024
    client_idle_s: float = 60.0  # a kept-alive client connection with no request
    client_read_s: float = 30.0  # a client that stops sending mid-request
    connect_s: float = 10.0
    origin_read_s: float = 30.0  # an origin that stops sending
    max_idle_upstream: int = 64  # kept-alive connections per origin
    tunnel_idle_s: float = 300.0  # a CONNECT tunnel with nothing passing either way
    # What requests are for, unless X-Polite-Purpose says: with refuse_usage, a URL whose
    # robots.txt preferences disallow the purpose is answered 403 with the reason.
    purpose: str | None = None
    refuse_usage: bool = False


class TunnelCertificates(Protocol):
    """Where an intercepted tunnel's certificate comes from (the local CA)."""

    def context_for(self, host: str) -> ssl.SSLContext:
        """A server-side TLS context presenting a certificate for ``host``."""
        ...


@dataclass(frozen=True, slots=True)
class Interception:
    """``--intercept-tls``: CONNECT tunnels are opened with a certificate of the local CA, so
    the requests inside get what plain http requests get; hosts in ``plain`` (clients that
    pin certificates) stay tunnels."""

    certificates: TunnelCertificates
    plain: frozenset[str] = frozenset()


class _InsideChannel(Channel):
    """The client side inside an intercepted tunnel (over TLS, which has no half-close)."""

    def eof_received(self) -> bool | None:
        super().eof_received()
        return None


class _ClientGone(Exception):
    """The client closed, stalled or broke the protocol; the connection is dropped."""


class _UpstreamError(Exception):
    def __init__(self, status: int, message: str, *,
                 tls: Literal["", "certificate", "handshake"] = "") -> None:
        super().__init__(message)
        self.status = status
        # The origin answered, but its certificate did not verify, or no TLS came of it
        # (it speaks another protocol, say).
        self.tls = tls


class _ClientChannel(Channel):
    """The client side: each connection is served by its own task."""

    def __init__(self, server: ProxyServer) -> None:
        super().__init__("request", max_head_bytes=server.settings.max_head_bytes)
        self._server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._server._serve(self)


class _Verdict(NamedTuple):
    """A decision as the proxy answers it: 403 when waiting will not change it
    (``retry_ms`` -1), else 429 with Retry-After; ``text`` the body's words."""

    allowed: bool
    cause: str
    retry_ms: int
    text: str | None

    @classmethod
    def of(cls, found: Answer) -> _Verdict:
        wait_s = found.wait_s
        return cls(found.allowed, found.cause,
                   -1 if wait_s is None else max(0, math.ceil(wait_s * 1000)), message(found))

    @property
    def status(self) -> int:
        return 403 if self.retry_ms < 0 else 429


def _product_token(user_agent: bytes | None) -> str | None:
    """``Mozilla/5.0 (compatible; ExampleBot/1.0)`` -> ``Mozilla``; a bare token as is."""
    if not user_agent:
        return None
    token = user_agent.decode("latin-1").strip().split("/", 1)[0].split(" ", 1)[0]
    return token or None


def _expects_continue(request: Head) -> bool:
    """The client waits for ``100 Continue`` before it sends the body."""
    expect = request.get(b"expect")
    return expect is not None and expect.strip().lower() == b"100-continue" \
        and request.framing != "none"


def _host_problem(host: str) -> str | None:
    """Why ``host`` cannot be looked up (a label empty or over 63 characters, or not one
    IDNA can write), or None."""
    try:
        host.encode("idna")
    except UnicodeError as exc:
        shown = host if len(host) <= 80 else host[:77] + "..."
        return (f"{shown!r} is not a host name a request can go to: {exc} (each label of a "
                "name is 1 to 63 characters)")
    return None


def _store_down(exc: Exception) -> bool:
    """Whether ``exc`` is the store failing (Redis unreachable, SQLite locked or gone)."""
    # Redis's errors are known only once redis-py is loaded, which a Redis store does.
    errors = sys.modules.get("redis.exceptions")
    redis_error: Any = getattr(errors, "RedisError", None)
    return isinstance(exc, sqlite3.Error) or (redis_error is not None
                                              and isinstance(exc, redis_error))


def _forwardable(headers: Headers) -> Headers:
    # A field named in Connection is the hop's own, except Content-Length: dropping it while
    # the body still goes on would leave the next hop to frame the message by itself (a
    # request without its length is a request with no body, the body then a second request
    # the checks never saw; a response without it runs to the close).
    named = {n.strip().lower() for key, value in headers if key == b"connection"
             for n in value.split(b",")} - _FRAMING
    return [(k, v) for k, v in headers if k not in _HOP_BY_HOP and k not in named]


class ProxyServer:
    """Listens on one address; ``app`` answers the origin-form requests."""

    def __init__(self, politeness: Politeness, app: ASGIApp, *,
                 settings: ProxySettings | None = None, cache: PageCache | None = None,
                 upstream_tls: ssl.SSLContext | None = None,
                 interception: Interception | None = None,
                 public_hosts: PublicHosts | None = None, sign: Sign | None = None) -> None:
        self._politeness = politeness
        # The private-address guard, asked once per request: the connection then goes to
        # the address it checked, never to the name looked up again.
        self._guard = public_hosts if public_hosts is not None else PublicHosts(WallClock())
        self._sign = sign  # Web Bot Auth: the fields that sign each forwarded request
        self._cache = cache
        self._app = app
        self.settings = settings or ProxySettings()
        self._idle: dict[Key, list[Channel]] = {}
        self._server: asyncio.Server | None = None
        self._addresses: set[tuple[str, int]] = set()
        self._tls = upstream_tls or ssl.create_default_context()
        self._interception = interception
        self._tasks: set[asyncio.Task[None]] = set()
        self.stats = {"forwarded": 0, "robots_refused": 0, "delayed": 0, "errors": 0,
                      "tunnels": 0, "intercepted": 0, "usage_refused": 0}
        # (peer address, client id) -> the last request of that client
        self._order_tail: dict[tuple[str, str], asyncio.Future[None]] = {}
        # host -> (the lock its waiters queue on, in order; how many hold or wait for it)
        self._host_turns: dict[str, tuple[asyncio.Lock, int]] = {}

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the port (useful with 0)."""
        await self._lifespan("startup")
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(lambda: _ClientChannel(self), host, port)
        except BaseException:
            await self.close()  # the app's lifespan ends too: no task left pending
            raise
        bound = self._server.sockets[0].getsockname()
        self._addresses = {(host.lower(), bound[1]), ("localhost", bound[1]),
                           ("127.0.0.1", bound[1])}
        return int(bound[1])

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        for pool in self._idle.values():
            for upstream in pool:
                upstream.close()
        self._idle.clear()
        await self._lifespan("shutdown")

    async def _lifespan(self, phase: str) -> None:
        """ASGI lifespan: one call of the app spans startup to shutdown."""
        loop = asyncio.get_running_loop()
        if phase == "startup":
            self._life_inbox: asyncio.Queue[Message] = asyncio.Queue()
            self._life_done = {"startup": loop.create_future(),
                               "shutdown": loop.create_future()}

            async def send(message: Message) -> None:
                kind = str(message["type"]).removeprefix("lifespan.")
                stage, _, outcome = kind.partition(".")
                future = self._life_done.get(stage)
                if future is None or future.done():
                    return
                if outcome == "failed":
                    future.set_exception(RuntimeError(message.get("message") or
                                                      f"{stage} failed"))
                else:
                    future.set_result(None)

            self._life_task = asyncio.ensure_future(self._app(
                {"type": "lifespan", "asgi": {"version": "3.0"}}, self._life_inbox.get, send))
        self._life_inbox.put_nowait({"type": f"lifespan.{phase}"})
        future = self._life_done[phase]
        await asyncio.wait({future, self._life_task}, timeout=30,
                           return_when=asyncio.FIRST_COMPLETED)
        if future.done():
            future.result()
        elif self._life_task.done():
            self._life_task.result()
        if phase == "shutdown" and not self._life_task.done():
            self._life_task.cancel()

    # -- the client side -----------------------------------------------------------------

    def _serve(self, client: Channel) -> None:
        task = asyncio.get_running_loop().create_task(self._client(client))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _client(self, client: Channel) -> None:
        assert client.transport is not None
        peer = client.transport.get_extra_info("peername") or ("", 0)
        try:
            await self._requests(client, peer)
        finally:
            client.close()

    async def _requests(self, client: Channel, peer: tuple[Any, ...],
                        tunnel: bytes = b"", defaults: Headers | None = None,
                        address: str | None = None) -> None:
        """Serves the requests of one connection; ``tunnel`` (``https://host:port``) for
        the inside of an intercepted tunnel, whose requests are in origin form, with the
        ``defaults`` fields they do not set themselves (the CONNECT's X-Polite-*), and the
        ``address`` the tunnel's host was checked at (None: its name, private allowed)."""
        try:
            while True:
                event = await client.next(self.settings.client_idle_s)
                if not isinstance(event, Head):
                    break
                if tunnel:
                    if event.target.startswith(b"/"):
                        event.target = tunnel + event.target
                    elif event.method == b"CONNECT" or not event.target.lower().startswith(
                            tunnel.lower() + b"/"):  # RFC 9112, 3.2.2: the absolute form
                        self._send_error(client, 400, "inside a tunnel a request goes to the "
                                         "tunnel's origin", close=True)
                        break
                for name, value in defaults or ():
                    if event.get(name) is None:
                        event.headers.append((name, value))
                written = client.written
                try:
                    keep = await self._request(client, event, peer, checked=bool(tunnel),
                                               address=address)
                except (_ClientGone, ProtocolError, ConnectionError, TimeoutError):
                    raise
                except Exception as exc:
                    # The store (Redis stopped, say) or a fault: the client hears why, when
                    # its answer has not begun, rather than seeing its connection drop.
                    self.stats["errors"] += 1
                    down = _store_down(exc)
                    if client.written == written:
                        self._send_error(client, 503 if down else 500, f"the store does not "
                                         f"answer ({type(exc).__name__}: {exc}); nothing is "
                                         f"let through without it" if down else
                                         f"internal error: {type(exc).__name__}", close=True)
                    if not down:
                        raise  # a fault still shows, as the task's error
                    break
                if not keep or not event.keep_alive or event.version != "1.1" or client.raw_mode:
                    break
        except ProtocolError as exc:
            self._send_error(client, exc.status, str(exc), close=True)
        except (_ClientGone, ConnectionError, TimeoutError):
            pass

    def _send_error(self, client: Channel, status: int, message: str,
                    headers: Headers | None = None, *, close: bool = False) -> None:
        body = (message.rstrip("\n") + "\n").encode()
        fields = [(b"content-type", b"text/plain; charset=utf-8"),
                  (b"content-length", b"%d" % len(body)), (b"via", _VIA)]
        if close:
            fields.append(_CLOSE)
        client.write(response_head(status, b"", fields + (headers or [])) + body)

    async def _drain(self, client: Channel) -> bool:
        """Read and drop the rest of a request's body, so the connection can go on."""
        received = 0
        while True:
            event = client.poll() or await client.next(self.settings.client_read_s)
            if event is END:
                return True
            if type(event) is not bytes:
                return False
            received += len(event)
            if received > self.settings.max_request_body_bytes:
                return False

    async def _answered(self, client: Channel, head: Head) -> bool:
        """After a response of the proxy's own: the request read to its end, the
        connection kept when that worked."""
        await client.drain()
        if _expects_continue(head):
            return False  # a client told no "go on" may not send its body: no way to go on
        try:
            return await self._drain(client)
        except ProtocolError:
            return False  # its body cannot be read: the answer is out, the connection goes

    async def _request(self, client: Channel, head: Head, peer: tuple[Any, ...], *,
                       checked: bool = False, address: str | None = None) -> bool:
        """One request; ``checked`` when its host was admitted already (the tunnel's, at
        ``address``)."""
        if head.method == b"CONNECT":
            return await self._tunnel(client, head, peer)
        target = head.target
        if not target[:8].lower().startswith((b"http://", b"https://")):
            other = _OTHER_SCHEME.match(target)
            if other is None:
                return await self._to_app(client, head, peer)
            # An absolute URL of a scheme this proxy does not speak is not a path of the API.
            self._send_error(client, 400, f"this proxy serves http and https URLs only, not "
                             f"{other.group(1).decode('latin-1').lower()}")
            return await self._answered(client, head)
        url = target.decode("latin-1")
        try:
            origin, host = split_origin(url)
        except InvalidURL as exc:
            self._send_error(client, 400, str(exc), close=True)
            return False
        problem = _host_problem(host)
        if problem is not None:
            self._send_error(client, 400, problem)
            return await self._answered(client, head)
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
        if (host, port) in self._addresses or _VIA in (head.get(b"via") or b""):
            self._send_error(client, 508, "this request is addressed to the proxy itself: "
                             "refused, not looped", close=True)
            return False
        asked = await self._admit(client, host, head, "forward", checked=checked,
                                  address=address)
        if not isinstance(asked, tuple):
            return bool(asked)
        mode, wait_s, address = asked
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        exchange = _Exchange(head, url, origin, (scheme, host, port),
                             path.encode("latin-1"),
                             parts.netloc.rsplit("@", 1)[-1].encode("latin-1"), address)
        if mode is not Mode.ORDERED:
            return await self._proxied(client, exchange, mode, wait_s)
        # Seed 001's sequential client: its requests are answered in the order they came,
        # each held until its slot, whichever connection they came on. A client is its
        # X-Polite-Client from its address: the same name from another address is another
        # client, which cannot hold this one's queue by claiming its name.
        name = (head.get(b"x-polite-client") or str(peer[0]).encode()).decode(
            "latin-1").strip()
        who = (str(peer[0]), name)
        previous = self._order_tail.get(who)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._order_tail[who] = done
        started = time.monotonic()
        try:
            if previous is not None:
                self._politeness.activity.queue(host, 1)
                try:
                    await asyncio.wait_for(asyncio.shield(previous), wait_s)
                except TimeoutError:
                    self._send_error(client, 504, f"ordered: an earlier request of client "
                                     f"{name!r} was still unanswered after {wait_s:g} s")
                    return await self._answered(client, head)
                finally:
                    self._politeness.activity.queue(host, -1)
            left = max(0.0, wait_s - (time.monotonic() - started))
            return await self._proxied(client, exchange, Mode.ORDERED, left)
        finally:
            done.set_result(None)
            if self._order_tail.get(who) is done:
                del self._order_tail[who]

    async def _admit(self, client: Channel, host: str, head: Head, verb: str, *,
                     checked: bool = False, address: str | None = None
                     ) -> tuple[Mode, float, str | None] | bool | None:
        """The checks a proxied request and a tunnel share: no private or loopback target
        unless allowed (403), a name that resolves (502), and a mode and timeout that can
        be read (400). The mode, the longest wait and the address to connect to (None: the
        name, private addresses allowed; ``address`` when ``checked``); else, once the
        refusal is sent, whether the connection goes on (None: it ends)."""
        if not checked and not self._politeness.allow_private:
            # A refused request keeps its connection, as other refusals do; a tunnel that
            # is not opened leaves nothing to go on with.
            tunnel = verb == "tunnel"
            try:
                address = await self._guard.address(host)
            except PrivateAddress as exc:
                self._send_error(client, 403, f"this proxy does not {verb} there: {exc}",
                                 close=tunnel)
                return None if tunnel else await self._answered(client, head)
            except OSError as exc:
                self._send_error(client, 502, f"{host} cannot be looked up: "
                                 f"{exc.strerror or exc}", close=tunnel)
                return None if tunnel else await self._answered(client, head)
        asked = self._asked(head)
        if isinstance(asked, str):
            self._send_error(client, 400, asked, close=True)
            return None
        return (*asked, address)

    def _asked(self, head: Head) -> tuple[Mode, float] | str:
        """The mode and the longest wait a request asks for (X-Polite-Mode,
        X-Polite-Timeout), or what is wrong with them."""
        mode = self.settings.mode
        mode_header = head.get(b"x-polite-mode")
        if mode_header is not None:
            try:
                mode = Mode(mode_header.decode("latin-1").strip().lower())
            except ValueError:
                return "X-Polite-Mode must be 'reject', 'wait' or 'ordered'"
        wait_s = self.settings.max_wait_s
        timeout_header = head.get(b"x-polite-timeout")
        if timeout_header is not None:
            try:
                wait_s = float(timeout_header.decode("latin-1").strip())
            except ValueError:
                return "X-Polite-Timeout must be a number of seconds"
            if not 0 <= wait_s <= MAX_REQUEST_WAIT_S:
                return f"X-Polite-Timeout must be from 0 to {MAX_REQUEST_WAIT_S:g} seconds"
        return mode, wait_s

    async def _proxied(self, client: Channel, exchange: _Exchange, mode: Mode,
                       wait_s: float) -> bool:
        """A request in absolute form, answered; what became of it is counted and traced."""
        arrived, started = time.time(), time.monotonic()
        try:
            return await self._polite(client, exchange, mode, wait_s)
        finally:
            activity = self._politeness.activity
            decision = exchange.decision if exchange.status else "error"
            activity.record(TraceEntry(
                arrived, exchange.head.method.decode("latin-1"), exchange.url, decision,
                exchange.status, exchange.held_ms, (time.monotonic() - started) * 1000))

    async def _polite(self, client: Channel, exchange: _Exchange, mode: Mode,
                      wait_s: float) -> bool:
        head = exchange.head
        host = exchange.key[1]
        activity = self._politeness.activity
        agent = _product_token(head.get(b"user-agent"))
        if self._cache is not None and head.method in (b"GET", b"HEAD"):
            choice = exchange.choice = await self._cache.lookup(
                head.method, exchange.url, head.headers,
                key=exchange.origin + exchange.path.decode("latin-1"))
            if choice.action == "serve":  # a hit: the site is not asked, no slot is used
                assert choice.stored is not None
                self._send_stored(client, head, choice.stored, choice.age,
                                  choice.not_modified)
                exchange.decision = "cache"
                exchange.status = 304 if choice.not_modified else choice.stored.status
                activity.count(host, "cache")
                return await self._answered(client, head)
            if choice.action == "gateway_timeout":
                exchange.status = 504
                self._send_error(client, 504, "only-if-cached: nothing usable is stored for "
                                 "this URL")
                return await self._answered(client, head)
        refusal = await self._usage_refusal(exchange.url, agent or self._politeness.agent,
                                            head)
        if refusal is not None:
            exchange.status, message = refusal
            exchange.decision = "usage" if exchange.status == 403 else "invalid"
            if exchange.status == 403:
                self.stats["usage_refused"] += 1
            self._send_error(client, exchange.status, message)
            return await self._answered(client, head)
        asked = time.monotonic()
        verdict = await self._verdict(exchange.url, agent, mode, wait_s)
        activity.count(host, verdict.cause)
        if not verdict.allowed:
            exchange.decision = verdict.cause
            exchange.status = verdict.status
            exchange.held_ms = max(0, verdict.retry_ms)
            self._refuse(client, verdict)
            return await self._answered(client, head)
        if mode is not Mode.REJECT:
            exchange.held_ms = math.ceil((time.monotonic() - asked) * 1000)
        activity.send(host, 1)
        try:
            return await self._forward(client, exchange)
        finally:
            activity.send(host, -1)

    async def _usage_refusal(self, url: str, agent: str, head: Head
                             ) -> tuple[int, str] | None:
        """(status, message) when the request is not to go: a purpose that is none of
        polite's (400), or one the URL's robots.txt preferences disallow (403, when told to
        refuse them)."""
        purpose = self.settings.purpose
        asked = head.get(b"x-polite-purpose")
        if asked is not None:
            purpose = asked.decode("latin-1").strip().lower() or None
            if purpose is not None and purpose not in PURPOSES:
                return 400, f"X-Polite-Purpose must be one of {', '.join(PURPOSES)}"
        if purpose is None or not self.settings.refuse_usage:
            return None
        state = await self._politeness.robots_state(url)
        if not isinstance(state, Parsed):
            return None
        answer = from_robots(state.robots, url, agent).answer(purpose)
        if answer.pref is not Pref.DISALLOW:
            return None
        return 403, f"AI-usage preferences refuse {purpose}: {answer.reason}"

    def _refuse(self, client: Channel, verdict: _Verdict) -> None:
        if verdict.retry_ms < 0:
            self.stats["robots_refused"] += 1
            self._send_error(client, 403, verdict.text or "refused")
        else:
            self.stats["delayed"] += 1
            seconds = max(1, math.ceil(verdict.retry_ms / 1000))
            self._send_error(client, 429, verdict.text or "too many requests",
                             [(b"retry-after", b"%d" % seconds),
                              (b"x-polite-retry-after-ms", b"%d" % verdict.retry_ms)])

    async def _verdict(self, url: str, agent: str | None, mode: Mode,
                       wait_s: float | None = None) -> _Verdict:
        if mode is Mode.REJECT:
            return _Verdict.of((await self._politeness.check([url], reserve=True,
                                                             agent=agent))[0])
        deadline = time.monotonic() + (self.settings.max_wait_s if wait_s is None else wait_s)
        # Requests waiting for one host are served first come, first served, whatever
        # connection they came on: an asyncio.Lock wakes its waiters in order, so a request
        # is never overtaken by a later one.
        host = split_origin(url)[1]
        turn, waiting = self._host_turns.get(host) or (asyncio.Lock(), 0)
        self._host_turns[host] = (turn, waiting + 1)
        self._politeness.activity.queue(host, 1)
        try:
            try:
                await asyncio.wait_for(turn.acquire(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return await self._still_queued(url, agent, host, wait_s)
            try:
                while True:
                    found = (await self._politeness.check([url], reserve=True,
                                                          agent=agent))[0]
                    verdict = _Verdict.of(found)
                    if verdict.allowed or verdict.retry_ms < 0:
                        return verdict
                    pause_s = verdict.retry_ms / 1000
                    if time.monotonic() + pause_s > deadline:
                        return verdict
                    await asyncio.sleep(pause_s)
            finally:
                turn.release()
        finally:
            self._politeness.activity.queue(host, -1)
            _, waiting = self._host_turns[host]
            if waiting == 1:
                del self._host_turns[host]
            else:
                self._host_turns[host] = (turn, waiting - 1)

    async def _still_queued(self, url: str, agent: str | None, host: str,
                            wait_s: float | None) -> _Verdict:
        """The answer to a request whose wait ran out behind earlier ones to its host."""
        verdict = _Verdict.of((await self._politeness.check([url], agent=agent))[0])
        if verdict.retry_ms < 0 and not verdict.allowed:
            return verdict
        waited = self.settings.max_wait_s if wait_s is None else wait_s
        return verdict._replace(
            allowed=False, retry_ms=max(verdict.retry_ms, 1000),
            text=f"earlier requests to {host} are still waiting for its slot; this one "
                 f"waited {waited:g} s behind them (--max-wait-s)")

    # -- CONNECT ---------------------------------------------------------------------------

    async def _tunnel(self, client: Channel, head: Head, peer: tuple[Any, ...]) -> bool:
        """A CONNECT tunnel. What passes through it is encrypted, so politeness is kept per
        host: robots.txt must allow the site's root, and opening the tunnel takes the host's
        slot once, however many requests then travel inside it. Intercepted, its requests
        are read and each is served as a plain one is."""
        authority = head.target.decode("latin-1")
        host, _, port_text = authority.rpartition(":")
        host = host.strip("[]").lower()
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            self._send_error(client, 400, "CONNECT needs host:port", close=True)
            return False
        port = int(port_text)
        problem = _host_problem(host)
        if problem is not None:
            self._send_error(client, 400, problem, close=True)
            return False
        if (host, port) in self._addresses:
            self._send_error(client, 508, "this tunnel leads to the proxy itself: refused, "
                             "not looped", close=True)
            return False
        asked = await self._admit(client, host, head, "tunnel")
        if not isinstance(asked, tuple):
            return False
        mode, wait_s, address = asked
        netloc = f"[{host}]" if ":" in host else host
        interception = self._interception
        if interception is not None and host not in interception.plain:
            intercepted = await self._intercept(client, interception, head, host, port,
                                                netloc, peer, address)
            if intercepted is not None:
                return intercepted
        # Tunnels carry TLS on 443 and 8443; anything else is read as plain HTTP's robots.txt.
        scheme = "https" if port in (443, 8443) else "http"
        default = 443 if scheme == "https" else 80
        root = f"{scheme}://{netloc}/" if port == default else f"{scheme}://{netloc}:{port}/"
        agent = _product_token(head.get(b"user-agent"))
        # A plain tunnel is traced as one exchange (CONNECT, the site's root, the decision,
        # how long it stayed open) and counted for its host, as the dashboard shows requests.
        arrived, started = time.time(), time.monotonic()
        activity = self._politeness.activity
        verdict = await self._verdict(root, agent, mode, wait_s)
        activity.count(host, verdict.cause)
        held_ms = 0 if mode is Mode.REJECT else math.ceil((time.monotonic() - started) * 1000)

        def trace(decision: str, status: int, delay_ms: int) -> None:
            activity.record(TraceEntry(arrived, "CONNECT", root, decision, status, delay_ms,
                                       (time.monotonic() - started) * 1000))

        if not verdict.allowed:
            self._refuse(client, verdict)
            trace(verdict.cause, verdict.status, max(0, verdict.retry_ms))
            await client.drain()
            return False
        try:
            upstream = await self._open(host, port, None, raw=True, address=address)
        except _UpstreamError as exc:
            self._send_error(client, exc.status, str(exc), close=True)
            trace("error", exc.status, held_ms)
            return False
        self.stats["tunnels"] += 1
        client.write(response_head(200, b"Connection Established", [(b"via", _VIA)]))
        if client.trailing:
            upstream.write(client.trailing)
        idle = self.settings.tunnel_idle_s

        async def pump(source: Channel, sink: Channel) -> None:
            with contextlib.suppress(ConnectionError, TimeoutError, OSError, ProtocolError):
                while True:
                    event = await source.next(idle)
                    if type(event) is not bytes:
                        if event is END:  # the CONNECT request's own end
                            continue
                        break
                    sink.write(event)
                    await sink.drain()
            sink.write_eof()

        activity.send(host, 1)
        try:
            await asyncio.gather(pump(client, upstream), pump(upstream, client))
        finally:
            activity.send(host, -1)
            upstream.close()
            trace(verdict.cause, 200, held_ms)
        return False

    async def _intercept(self, client: Channel, interception: Interception, head: Head,
                         host: str, port: int, netloc: str, peer: tuple[Any, ...],
                         address: str | None) -> bool | None:
        """Terminates the tunnel's TLS with a certificate of the local CA, then serves the
        requests inside as plain ones (robots.txt per URL, the slot per request, the cache).

        The origin is reached over TLS first: one that cannot be reached gets the CONNECT a
        502 or 504; one whose certificate does not verify gets every request inside the 502
        naming why (a client reads that body; it cannot read the body of a refused
        CONNECT); one with which no TLS comes about (SSH, SMTP, plain HTTP) is left to a
        plain tunnel (None). Else whether the connection goes on (it does not)."""
        key: Key = ("https", host, port)
        failure: _UpstreamError | None = None
        try:
            upstream = await self._open(host, port, self._tls, address=address)
        except _UpstreamError as exc:
            if exc.tls == "handshake":
                return None
            if not exc.tls:
                self._send_error(client, exc.status, str(exc), close=True)
                return False
            failure = exc
        else:
            self._release(key, upstream, None)  # the first request inside takes it
        if client.trailing:
            # Bytes sent before the tunnel was open cannot be handed to the TLS layer.
            self._send_error(client, 400, "data sent before the tunnel was open", close=True)
            return False
        try:
            context = interception.certificates.context_for(host)
        except (ValueError, OSError, ssl.SSLError) as exc:
            self._send_error(client, 500, f"no certificate for {host}: {exc}", close=True)
            return False
        assert client.transport is not None
        # Nothing more is read for the old protocol: the client's first TLS bytes may come
        # as soon as it reads the 200, and they are the TLS layer's.
        client.transport.pause_reading()
        client.write(response_head(200, b"Connection Established", [(b"via", _VIA)]))
        inside = _InsideChannel("request", max_head_bytes=self.settings.max_head_bytes)
        try:
            transport = await asyncio.get_running_loop().start_tls(
                client.transport, inside, context, server_side=True,
                ssl_handshake_timeout=self.settings.client_read_s)
        except (OSError, TimeoutError):  # ssl.SSLError is an OSError: the client gave up
            return False
        if transport is None:
            return False
        inside.connection_made(transport)
        self.stats["intercepted"] += 1
        try:
            if failure is not None:
                event = await inside.next(self.settings.client_idle_s)
                if isinstance(event, Head):
                    self.stats["errors"] += 1
                    self._send_error(inside, failure.status, str(failure), close=True)
                    await inside.drain()
            else:
                origin = f"https://{netloc}" + ("" if port == 443 else f":{port}")
                # Options set on the CONNECT (curl --proxy-header) hold for the requests.
                defaults = [(k, v) for k, v in head.headers if k in _TUNNEL_DEFAULTS]
                await self._requests(inside, peer, origin.encode("latin-1"), defaults,
                                     address)
        except (ProtocolError, ConnectionError, TimeoutError):
            pass
        finally:
            inside.close()
        return False

    # -- the origin side -----------------------------------------------------------------

    async def _open(self, host: str, port: int, tls: ssl.SSLContext | None, *,
                    raw: bool = False, address: str | None = None) -> Channel:
        """A connection to an origin, at ``address`` when given (the one the guard checked;
        the certificate is still checked for ``host``); ``raw`` for a tunnel (bytes the
        origin sends first, as some protocols do, are passed on too)."""
        loop = asyncio.get_running_loop()

        def made() -> Channel:
            channel = Channel("response", max_head_bytes=self.settings.max_head_bytes)
            if raw:
                channel.raw()
            return channel

        try:
            _, channel = await asyncio.wait_for(loop.create_connection(
                made, address or host, port, ssl=tls,
                server_hostname=host if tls is not None else None), self.settings.connect_s)
        except ssl.SSLCertVerificationError as exc:
            raise _UpstreamError(502, f"the certificate of {host}:{port} does not verify: "
                                 f"{exc.verify_message}", tls="certificate") from None
        except ssl.SSLError as exc:
            raise _UpstreamError(502, f"TLS with {host}:{port} failed: "
                                 f"{exc.reason or exc}", tls="handshake") from None
        except TimeoutError:
            raise _UpstreamError(504, f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise _UpstreamError(502, f"cannot connect to {host}:{port}: "
                                 f"{exc.strerror or exc}") from None
        return channel

    async def _connect(self, key: Key, address: str | None) -> tuple[Channel, bool]:
        pool = self._idle.get(key)
        while pool:
            upstream = pool.pop()
            upstream.idle = False
            if upstream.reusable and not upstream.closed and upstream.at_rest:
                return upstream, True
            upstream.close()
        scheme, host, port = key
        return await self._open(host, port, self._tls if scheme == "https" else None,
                                address=address), False

    def _release(self, key: Key, upstream: Channel, response: Head | None) -> None:
        """Keeps a connection for the next request to ``key`` when it can carry one
        (``response`` None: a new connection, nothing sent on it yet)."""
        if (response is None or (response.keep_alive and response.framing != "close")) \
                and upstream.reusable and not upstream.closed and upstream.at_rest:
            pool = self._idle.setdefault(key, [])
            if len(pool) < self.settings.max_idle_upstream:
                upstream.idle = True
                pool.append(upstream)
                return
        upstream.close()

    def _send_stored(self, client: Channel, request: Head, stored: Stored, age: float,
                     not_modified_: bool) -> None:
        fields = [(k, v) for k, v in stored.headers
                  if k not in (b"content-length", b"x-polite-origin-age", b"via")]
        fields += [(b"age", b"%d" % int(age)), (b"via", _VIA)]
        if not_modified_:
            keep = {b"cache-control", b"content-location", b"date", b"etag", b"expires",
                    b"vary", b"last-modified", b"age", b"via"}
            client.write(response_head(304, b"", [(k, v) for k, v in fields if k in keep]))
            return
        fields.append((b"content-length", b"%d" % len(stored.body)))
        head = response_head(stored.status, stored.reason, fields)
        client.write(head if request.method == b"HEAD" else head + stored.body)

    async def _upstream_event(self, upstream: Channel) -> Event:
        try:
            event = await upstream.next(self.settings.origin_read_s)
        except TimeoutError:
            raise _UpstreamError(504, "the origin did not answer in time") from None
        except ProtocolError as exc:
            raise _UpstreamError(502, f"the origin's answer is not HTTP: {exc}") from None
        if event is EOF:
            raise _UpstreamError(502, "the origin closed the connection mid-response")
        return event

    async def _forward(self, client: Channel, exchange: _Exchange) -> bool:
        request = exchange.head
        # X-Polite-* tell the proxy how to treat the request (mode, wait, client): they are
        # not the origin's to read.
        headers = [(k, v) for k, v in _forwardable(request.headers)
                   if k != b"host" and not k.startswith(b"x-polite-")]
        headers.insert(0, (b"host", exchange.netloc))
        via = request.get(b"via")
        headers.append((b"via", via + b", " + _VIA if via else _VIA))
        if request.framing == "chunked":
            headers.append(_CHUNKED)
        if _expects_continue(request):
            # The body is read from the client before the origin's answer is, so the proxy
            # says "go on" itself and the origin is not asked to (RFC 9110, 10.1.1).
            client.write(response_head(100, b"Continue", []))
            headers = [(k, v) for k, v in headers if k != b"expect"]
        choice = exchange.choice
        revalidating = choice is not None and choice.action == "revalidate"
        if revalidating:
            assert choice is not None
            headers = [(k, v) for k, v in headers
                       if k not in (b"if-none-match", b"if-modified-since")]
            headers += list(choice.conditional)
        if self._sign is not None:  # the client's own signature fields give way to ours
            signed = [(n.lower().encode("ascii"), v.encode("latin-1"))
                      for n, v in self._sign(request.method.decode("latin-1"), exchange.url)]
            ours = {name for name, _ in signed}
            headers = [(k, v) for k, v in headers if k not in ours] + signed
        wire = request_head(request.method, exchange.path, headers)
        started = time.monotonic()
        cache = self._cache
        request_time = cache.clock() if cache is not None else 0.0
        try:
            upstream, reused = await self._connect(exchange.key, exchange.address)
            try:
                response = await self._exchange(client, upstream, request, wire)
            except _UpstreamError:
                upstream.close()
                if not reused or request.framing != "none":
                    raise
                # A kept-alive connection the origin had closed: once more, on a new one.
                upstream, _ = await self._connect(exchange.key, exchange.address)
                response = await self._exchange(client, upstream, request, wire)
            except BaseException:  # the client broke off: the half-sent request goes too
                upstream.close()
                raise
        except _UpstreamError as exc:
            self.stats["errors"] += 1
            exchange.decision, exchange.status = "error", exc.status
            self._send_error(client, exc.status, str(exc), close=True)
            return False
        self.stats["forwarded"] += 1
        exchange.status = response.status
        # The origin's response time: until its answer's head, not the time the client
        # takes to read the body (a slow client must not slow the host down for everyone).
        elapsed_s = time.monotonic() - started
        if cache is not None and revalidating and response.status == 304:
            assert choice is not None and choice.stored is not None
            try:
                while (upstream.poll() or await self._upstream_event(upstream)) is not END:
                    pass
            except _UpstreamError:
                upstream.close()
            else:
                self._release(exchange.key, upstream, response)
            fresh = await cache.freshen(choice.stored, response.headers, request_time,
                                        cache.clock())
            self._send_stored(client, request, fresh, 0.0, not_modified(request.headers, fresh))
            await self._politeness.note_response(exchange.url, 304, elapsed_s=elapsed_s)
            return True
        body: bytearray | None = None
        if cache is not None and cache.wants(request.method, request.headers, response.status,
                                             response.headers):
            body = bytearray()
        out_headers = _forwardable(response.headers)
        out_headers.append((b"via", _VIA))
        keep = request.keep_alive and request.version == "1.1"
        chunked = False
        if response.framing in ("chunked", "close"):
            # The proxy frames what it passes on: a length beside the origin's chunks is not
            # the length of what goes out.
            out_headers = [(k, v) for k, v in out_headers if k != b"content-length"]
            if request.version == "1.1":
                chunked = True
                out_headers.append(_CHUNKED)
            else:
                keep = False  # an HTTP/1.0 client reads to the end of the connection
        if not keep:
            out_headers.append(_CLOSE)
        # What goes to the client is gathered and written when the origin's bytes run out
        # (or pass 64 KiB): a small response leaves in one write, a big one streams.
        pending = bytearray(response_head(response.status, response.reason, out_headers))
        try:
            while True:
                event = upstream.poll()
                if event is None:
                    if pending:
                        client.write(pending)
                        pending = bytearray()
                        await client.drain()
                    event = await self._upstream_event(upstream)
                if type(event) is bytes:
                    if body is not None:
                        body += event
                        if len(body) > cache.max_object_bytes:  # type: ignore[union-attr]
                            body = None
                    pending += frame(event, chunked)
                    if len(pending) >= _WRITE_BATCH:
                        client.write(pending)
                        pending = bytearray()
                        await client.drain()
                elif event is END:
                    if chunked:
                        pending += LAST_CHUNK
                    client.write(pending)
                    break
                else:
                    raise _UpstreamError(502, "the origin closed the connection "
                                         "mid-response")
        except _UpstreamError:
            if pending:
                client.write(pending)
            upstream.close()
            self.stats["errors"] += 1
            return False  # the status line is out; all we can do is cut the connection
        self._release(exchange.key, upstream, response)
        if cache is not None:
            if body is not None:
                await cache.store(exchange.url, request.headers, response.status,
                                  response.reason, response.headers, bytes(body),
                                  request_time, cache.clock())
            await cache.invalidate_after(request.method, exchange.url, response.status,
                                         response.headers)
        await self._politeness.note_response(
            exchange.url, response.status, elapsed_s=elapsed_s,
            retry_after=(response.get(b"retry-after") or b"").decode("latin-1") or None)
        await client.drain()
        return keep

    async def _exchange(self, client: Channel, upstream: Channel, request: Head,
                        wire: bytes) -> Head:
        """Sends the request (its body streamed from the client) and reads the response's
        head; 1xx answers go on to the client on the way."""
        upstream.expect_no_body = request.method == b"HEAD"
        upstream.write(wire)
        chunked = request.framing == "chunked"
        sent = 0
        while True:
            event = client.poll() or await client.next(self.settings.client_read_s)
            if event is END:
                if chunked:
                    upstream.write(LAST_CHUNK)
                break
            if type(event) is not bytes:
                raise _ClientGone("closed mid-request")
            sent += len(event)
            if sent > self.settings.max_request_body_bytes:
                raise _ClientGone("request body over the limit")
            upstream.write(frame(event, chunked))
            try:
                await upstream.drain()
            except ConnectionError as exc:
                raise _UpstreamError(502, f"the origin broke the connection: {exc}") from None
        informational = False
        while True:
            event = upstream.poll() or await self._upstream_event(upstream)
            if event is EOF:
                raise _UpstreamError(502, "the origin closed the connection without answering")
            if isinstance(event, Head):
                if event.status >= 200:
                    return event
                # 1xx (103 Early Hints, 100 Continue) go on to the client, never stored.
                informational = True
                if event.status != 101:
                    client.write(response_head(event.status, event.reason,
                                               _forwardable(event.headers)))
                continue
            if event is END and informational:
                informational = False
                continue
            raise _UpstreamError(502, "the origin's answer is not HTTP: a body before a head")

    # -- the API ---------------------------------------------------------------------------

    async def _to_app(self, client: Channel, head: Head, peer: tuple[Any, ...]) -> bool:
        limit = self.settings.max_api_body_bytes
        declared = (head.get(b"content-length") or b"").strip()
        if declared.isdigit() and int(declared) > limit:
            self._send_error(client, 413, f"request body of {int(declared)} bytes: the API "
                             f"reads at most {limit}", close=True)
            return False
        body = bytearray()
        while True:
            event = await client.next(self.settings.client_read_s)
            if type(event) is bytes:
                body += event
                if len(body) > limit:
                    self._send_error(client, 413, f"request body over {limit} bytes: the "
                                     "API reads at most that", close=True)
                    return False
            elif event is END:
                break
            else:
                return False
        raw_path, _, query = head.target.partition(b"?")
        scope: dict[str, Any] = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": head.version,
            "method": head.method.decode("latin-1"), "scheme": "http",
            "path": unquote(raw_path.decode("latin-1")), "raw_path": raw_path,
            "query_string": query, "root_path": "",
            "headers": head.headers,
            "client": (peer[0], peer[1]) if len(peer) >= 2 else None,
            "server": None,
        }
        delivered = False
        chunked = to_the_close = started = False
        bodiless = head.method == b"HEAD"

        async def receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            await asyncio.Event().wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            nonlocal chunked, to_the_close, started, bodiless
            if message["type"] == "http.response.start":
                status = int(message["status"])
                fields = [(bytes(k).lower(), bytes(v)) for k, v in message.get("headers", [])]
                bodiless = bodiless or status in (204, 304)
                if not bodiless and not any(k == b"content-length" for k, _ in fields):
                    if head.version == "1.1":
                        chunked = True
                        fields.append(_CHUNKED)
                    else:  # an HTTP/1.0 client reads to the end of the connection
                        to_the_close = True
                        fields.append(_CLOSE)
                started = True
                client.write(response_head(status, b"", fields))
            elif message["type"] == "http.response.body" and not bodiless:
                client.write(frame(message.get("body", b""), chunked))
                if chunked and not message.get("more_body", False):
                    client.write(LAST_CHUNK)
                await client.drain()

        try:
            await self._app(scope, receive, send)
        except Exception as exc:  # an app failure answers 500 and ends this connection
            if not started:
                self._send_error(client, 500, f"internal error: {type(exc).__name__}",
                                 close=True)
            return False
        return not to_the_close


@dataclass(slots=True)
class _Exchange:
    """A proxied request on its way: what was asked, and where it goes."""

    head: Head
    url: str
    origin: str
    key: Key
    path: bytes
    netloc: bytes
    address: str | None  # the one the guard checked (None: the name, private allowed)
    choice: Choice | None = None
    # what became of it, for the trace
    decision: str = "allowed"
    status: int = 0
    held_ms: int = 0

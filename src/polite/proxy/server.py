"""One port, two kinds of request (DESIGN.md, "Surfaces").

A request whose target is absolute (``GET http://site/path HTTP/1.1``) is proxied: robots.txt
and the host's slot are consulted through :class:`~polite.fetch.politeness.Politeness`, then
the request is forwarded over a kept-alive upstream connection and the response streamed
back. Anything else (``GET /health``) goes to the ASGI app given, the REST service.

HTTP/1.1 is spoken with h11 on both sides; this module owns the sockets. Refusals are answered
here, never forwarded: robots.txt forbids (403, naming the rule and its line), the host's slot
is taken (``reject`` mode: 429 with ``Retry-After`` in whole seconds and the exact wait in
``X-Polite-Retry-After-Ms``; ``wait`` mode: held until the slot, up to a limit), a private or
loopback target (403 unless allowed), a request addressed to the proxy itself (a loop),
ambiguous framing (both Content-Length and Transfer-Encoding: request smuggling).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import math
import ssl
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import h11

from polite.core.cache.policy import Choice, Stored, not_modified
from polite.errors import InvalidURL
from polite.fetch.cache import PageCache
from polite.fetch.politeness import NO_RETRY, Politeness, Verdict
from polite.fetch.robots import is_public_host, split_origin

__all__ = ["Mode", "ProxyServer", "ProxySettings"]

Message = MutableMapping[str, Any]
ASGIApp = Callable[[Message, Callable[[], Awaitable[Message]],
                    Callable[[Message], Awaitable[None]]], Awaitable[None]]

# RFC 9110, 7.6.1: hop-by-hop fields, never forwarded (plus those named in Connection).
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                         b"transfer-encoding", b"upgrade", b"proxy-authorization",
                         b"proxy-authenticate"})
_VIA = b"1.1 polite"
# The longest wait a request may ask for with X-Polite-Timeout.
MAX_REQUEST_WAIT_S = 3600.0
_READ_CHUNK = 65_536


class Mode(enum.StrEnum):
    """What happens to a request whose host's slot is taken."""

    REJECT = "reject"  # seed 001: 429 with Retry-After
    WAIT = "wait"  # hold it until the slot, up to ProxySettings.max_wait_s
    ORDERED = "ordered"  # wait, and answer one client's requests in the order they came


@dataclass(frozen=True, slots=True)
class ProxySettings:
    mode: Mode = Mode.REJECT
    max_wait_s: float = 60.0  # wait mode: longer waits are answered 429 at once
    max_head_bytes: int = 32 * 1024  # request or response line plus header fields
    max_request_body_bytes: int = 16 * 1024 * 1024
    client_idle_s: float = 60.0  # a kept-alive client connection with no request
    client_read_s: float = 30.0  # a client that stops sending mid-request
    connect_s: float = 10.0
    origin_read_s: float = 30.0  # an origin that stops sending
    max_idle_upstream: int = 64  # kept-alive connections per origin
    tunnel_idle_s: float = 300.0  # a CONNECT tunnel with nothing passing either way


class _ClientGone(Exception):
    """The client closed, stalled or broke the protocol; the connection is dropped."""


class _UpstreamError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class _Upstream:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    conn: h11.Connection


def _product_token(user_agent: bytes | None) -> str | None:
    """``Mozilla/5.0 (compatible; ExampleBot/1.0)`` -> ``Mozilla``; a bare token as is."""
    if not user_agent:
        return None
    token = user_agent.decode("latin-1").strip().split("/", 1)[0].split(" ", 1)[0]
    return token or None


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def _forwardable(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    named = {n.strip().lower() for key, value in headers if key == b"connection"
             for n in value.split(b",")}
    return [(k, v) for k, v in headers if k not in _HOP_BY_HOP and k not in named]


class ProxyServer:
    """Listens on one address; ``app`` answers the origin-form requests."""

    def __init__(self, politeness: Politeness, app: ASGIApp, *,
                 settings: ProxySettings | None = None, cache: PageCache | None = None) -> None:
        self._politeness = politeness
        self._cache = cache
        self._app = app
        self.settings = settings or ProxySettings()
        self._idle: dict[tuple[str, str, int], list[_Upstream]] = {}
        self._server: asyncio.Server | None = None
        self._addresses: set[tuple[str, int]] = set()
        self._tls = ssl.create_default_context()
        self.stats = {"forwarded": 0, "robots_refused": 0, "delayed": 0, "errors": 0,
                      "tunnels": 0}
        self._order_tail: dict[str, asyncio.Future[None]] = {}  # client id -> its last request

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the port (useful with 0)."""
        await self._lifespan("startup")
        self._server = await asyncio.start_server(self._client, host, port,
                                                  limit=self.settings.max_head_bytes)
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
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        for pool in self._idle.values():
            for upstream in pool:
                upstream.writer.close()
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

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.settings.max_head_bytes)
        peer = writer.get_extra_info("peername") or ("", 0)
        try:
            while True:
                event = await self._next(conn, reader, self.settings.client_idle_s)
                if isinstance(event, h11.ConnectionClosed):
                    break
                if not isinstance(event, h11.Request):
                    break
                keep = await self._request(conn, reader, writer, event, peer)
                if not keep or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            await self._send_error(conn, writer, exc.error_status_hint, str(exc))
        except (_ClientGone, ConnectionError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _next(self, conn: h11.Connection, reader: asyncio.StreamReader,
                    timeout_s: float) -> Any:
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            try:
                async with asyncio.timeout(timeout_s):
                    data = await reader.read(_READ_CHUNK)
            except TimeoutError:
                raise _ClientGone("idle") from None
            conn.receive_data(data)

    async def _send(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                    *events: Any) -> None:
        for event in events:
            data = conn.send(event)
            if data:
                writer.write(data)
        await writer.drain()

    async def _send_error(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                          status: int, message: str,
                          headers: list[tuple[bytes, bytes]] | None = None) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = (message.rstrip("\n") + "\n").encode()
        fields = [(b"content-type", b"text/plain; charset=utf-8"),
                  (b"content-length", str(len(body)).encode()), (b"via", _VIA)]
        if conn.their_state is not h11.DONE:
            fields.append((b"connection", b"close"))
        with contextlib.suppress(h11.LocalProtocolError, ConnectionError):
            await self._send(conn, writer, h11.Response(status_code=status,
                                                        headers=fields + (headers or [])),
                             h11.Data(data=body), h11.EndOfMessage())

    async def _request(self, conn: h11.Connection, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter, request: h11.Request,
                       peer: tuple[Any, ...]) -> bool:
        target = request.target
        headers = list(request.headers)
        if request.method == b"CONNECT":
            return await self._tunnel(conn, reader, writer, request)
        if not target.lower().startswith((b"http://", b"https://")):
            return await self._to_app(conn, reader, writer, request, peer)
        # Smuggling shapes: h11 picks chunked over Content-Length; a proxy must not guess.
        if _header(headers, b"transfer-encoding") is not None and \
                _header(headers, b"content-length") is not None:
            await self._send_error(conn, writer, 400, "both Content-Length and "
                                   "Transfer-Encoding: refused (request smuggling)")
            return False
        if _header(headers, b"transfer-encoding") is None and conn.their_state is h11.SEND_BODY \
                and (_header(headers, b"content-length") or b"0").strip() == b"0":
            # A request without a body is whole now: read its end, so that a refusal below
            # keeps the connection alive.
            conn.next_event()
        url = target.decode("latin-1")
        try:
            origin, host = split_origin(url)
        except InvalidURL as exc:
            await self._send_error(conn, writer, 400, str(exc))
            return False
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
        if (host, port) in self._addresses or (_VIA in (_header(headers, b"via") or b"")):
            await self._send_error(conn, writer, 508, "this request is addressed to the proxy "
                                   "itself: refused, not looped")
            return False
        asked = await self._admit(conn, writer, host, headers, "forward")
        if asked is None:
            return False
        mode, wait_s = asked
        if mode is not Mode.ORDERED:
            return await self._proxied(conn, reader, writer, request, url, origin,
                                       (scheme, host, port), mode, wait_s)
        # Seed 001's sequential client: its requests are answered in the order they came,
        # each held until its slot, whichever connection they came on.
        client = (_header(headers, b"x-polite-client") or str(peer[0]).encode()).decode(
            "latin-1").strip()
        previous = self._order_tail.get(client)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._order_tail[client] = done
        started = time.monotonic()
        try:
            if previous is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(previous), wait_s)
                except TimeoutError:
                    await self._send_error(conn, writer, 504, f"ordered: an earlier request "
                                           f"of client {client!r} was still unanswered after "
                                           f"{wait_s:g} s")
                    return conn.their_state is h11.DONE or await self._drain(conn, reader)
            left = max(0.0, wait_s - (time.monotonic() - started))
            return await self._proxied(conn, reader, writer, request, url, origin,
                                       (scheme, host, port), Mode.ORDERED, left)
        finally:
            done.set_result(None)
            if self._order_tail.get(client) is done:
                del self._order_tail[client]

    async def _admit(self, conn: h11.Connection, writer: asyncio.StreamWriter, host: str,
                     headers: list[tuple[bytes, bytes]], verb: str
                     ) -> tuple[Mode, float] | None:
        """The checks a proxied request and a tunnel share: no private or loopback target
        unless allowed (403), and a mode and timeout that can be read (400). The mode and
        the longest wait, or None once the refusal is sent."""
        if not self._politeness.allow_private and not await is_public_host(host):
            await self._send_error(conn, writer, 403, f"{host} is a private or loopback "
                                   f"address; this proxy does not {verb} there "
                                   "(--allow-private)")
            return None
        asked = self._asked(headers)
        if isinstance(asked, str):
            await self._send_error(conn, writer, 400, asked)
            return None
        return asked

    def _asked(self, headers: list[tuple[bytes, bytes]]) -> tuple[Mode, float] | str:
        """The mode and the longest wait a request asks for (X-Polite-Mode,
        X-Polite-Timeout), or what is wrong with them."""
        mode = self.settings.mode
        mode_header = _header(headers, b"x-polite-mode")
        if mode_header is not None:
            try:
                mode = Mode(mode_header.decode("latin-1").strip().lower())
            except ValueError:
                return "X-Polite-Mode must be 'reject', 'wait' or 'ordered'"
        wait_s = self.settings.max_wait_s
        timeout_header = _header(headers, b"x-polite-timeout")
        if timeout_header is not None:
            try:
                wait_s = float(timeout_header.decode("latin-1").strip())
            except ValueError:
                return "X-Polite-Timeout must be a number of seconds"
            if not 0 <= wait_s <= MAX_REQUEST_WAIT_S:
                return f"X-Polite-Timeout must be from 0 to {MAX_REQUEST_WAIT_S:g} seconds"
        return mode, wait_s

    async def _proxied(self, conn: h11.Connection, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter, request: h11.Request, url: str,
                       origin: str, key: tuple[str, str, int], mode: Mode,
                       wait_s: float) -> bool:
        headers = list(request.headers)
        agent = _product_token(_header(headers, b"user-agent"))
        choice = None
        if self._cache is not None and request.method in (b"GET", b"HEAD"):
            choice = await self._cache.lookup(request.method, url, headers)
            if choice.action == "serve":  # a hit: the site is not asked, no slot is used
                await self._serve_stored(conn, writer, request.method, choice)
                return conn.their_state is h11.DONE or await self._drain(conn, reader)
            if choice.action == "gateway_timeout":
                await self._send_error(conn, writer, 504, "only-if-cached: nothing usable is "
                                       "stored for this URL")
                return conn.their_state is h11.DONE or await self._drain(conn, reader)
        verdict = await self._verdict(url, agent, mode, wait_s)
        if not verdict.allowed:
            await self._refuse(conn, writer, verdict)
            return conn.their_state is h11.DONE or await self._drain(conn, reader)
        return await self._forward(conn, reader, writer, request, url, key, origin, choice)

    async def _refuse(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                      verdict: Verdict) -> None:
        if verdict.retry_after_ms == NO_RETRY:
            self.stats["robots_refused"] += 1
            await self._send_error(conn, writer, 403, verdict.error or "refused")
        else:
            self.stats["delayed"] += 1
            seconds = max(1, math.ceil(verdict.retry_after_ms / 1000))
            await self._send_error(
                conn, writer, 429, verdict.error or "too many requests",
                [(b"retry-after", str(seconds).encode()),
                 (b"x-polite-retry-after-ms", str(verdict.retry_after_ms).encode())])

    async def _verdict(self, url: str, agent: str | None, mode: Mode,
                       wait_s: float | None = None) -> Verdict:
        deadline = time.monotonic() + (self.settings.max_wait_s if wait_s is None else wait_s)
        while True:
            verdict = (await self._politeness.check([url], reserve=True, agent=agent))[0]
            if verdict.allowed or mode is Mode.REJECT or verdict.retry_after_ms < 0:
                return verdict
            pause_s = verdict.retry_after_ms / 1000
            if time.monotonic() + pause_s > deadline:
                return verdict
            await asyncio.sleep(pause_s)

    # -- CONNECT ---------------------------------------------------------------------------

    async def _tunnel(self, conn: h11.Connection, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter, request: h11.Request) -> bool:
        """A CONNECT tunnel. What passes through it is encrypted, so politeness is kept per
        host: robots.txt must allow the site's root, and opening the tunnel takes the host's
        slot once, however many requests then travel inside it."""
        headers = list(request.headers)
        authority = request.target.decode("latin-1")
        host, _, port_text = authority.rpartition(":")
        host = host.strip("[]").lower()
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            await self._send_error(conn, writer, 400, "CONNECT needs host:port")
            return False
        port = int(port_text)
        if (host, port) in self._addresses:
            await self._send_error(conn, writer, 508, "this tunnel leads to the proxy itself: "
                                   "refused, not looped")
            return False
        asked = await self._admit(conn, writer, host, headers, "tunnel")
        if asked is None:
            return False
        mode, wait_s = asked
        netloc = f"[{host}]" if ":" in host else host
        # Tunnels carry TLS on 443 and 8443; anything else is read as plain HTTP's robots.txt.
        scheme = "https" if port in (443, 8443) else "http"
        default = 443 if scheme == "https" else 80
        root = f"{scheme}://{netloc}/" if port == default else f"{scheme}://{netloc}:{port}/"
        agent = _product_token(_header(headers, b"user-agent"))
        verdict = await self._verdict(root, agent, mode, wait_s)
        if not verdict.allowed:
            await self._refuse(conn, writer, verdict)
            return False
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), self.settings.connect_s)
        except TimeoutError:
            await self._send_error(conn, writer, 504, f"connecting to {host}:{port} timed out")
            return False
        except OSError as exc:
            await self._send_error(conn, writer, 502, f"cannot connect to {host}:{port}: "
                                   f"{exc.strerror or exc}")
            return False
        self.stats["tunnels"] += 1
        await self._send(conn, writer, h11.Response(status_code=200, headers=[(b"via", _VIA)],
                                                    reason=b"Connection Established"))
        early, _ = conn.trailing_data
        if early:
            up_writer.write(early)
        idle = self.settings.tunnel_idle_s

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, TimeoutError, OSError):
                while data := await asyncio.wait_for(source.read(_READ_CHUNK), idle):
                    sink.write(data)
                    await sink.drain()
            with contextlib.suppress(OSError, RuntimeError):
                if sink.can_write_eof():
                    sink.write_eof()

        try:
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()
        return False

    async def _drain(self, conn: h11.Connection, reader: asyncio.StreamReader) -> bool:
        """Read and drop the rest of a refused request's body, so the connection can go on."""
        received = 0
        while True:
            event = await self._next(conn, reader, self.settings.client_read_s)
            if isinstance(event, h11.EndOfMessage):
                return True
            if not isinstance(event, h11.Data):
                return False
            received += len(event.data)
            if received > self.settings.max_request_body_bytes:
                return False

    # -- the origin side -----------------------------------------------------------------

    async def _connect(self, key: tuple[str, str, int]) -> tuple[_Upstream, bool]:
        pool = self._idle.get(key)
        while pool:
            upstream = pool.pop()
            if not upstream.reader.at_eof() and not upstream.writer.is_closing():
                return upstream, True
            upstream.writer.close()
        scheme, host, port = key
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=self.settings.max_head_bytes,
                                        ssl=self._tls if scheme == "https" else None),
                self.settings.connect_s)
        except TimeoutError:
            raise _UpstreamError(504, f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise _UpstreamError(502, f"cannot connect to {host}:{port}: "
                                 f"{exc.strerror or exc}") from None
        conn = h11.Connection(h11.CLIENT,
                              max_incomplete_event_size=self.settings.max_head_bytes)
        return _Upstream(reader, writer, conn), False

    def _release(self, key: tuple[str, str, int], upstream: _Upstream) -> None:
        conn = upstream.conn
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                upstream.writer.close()
                return
            pool = self._idle.setdefault(key, [])
            if len(pool) < self.settings.max_idle_upstream:
                pool.append(upstream)
                return
        upstream.writer.close()

    async def _serve_stored(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                            method: bytes, choice: Choice) -> None:
        stored = choice.stored
        assert stored is not None
        await self._send_stored(conn, writer, method, stored, choice.age, choice.not_modified)

    async def _send_stored(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                           method: bytes, stored: Stored, age: float,
                           not_modified_: bool) -> None:
        fields = [(k, v) for k, v in stored.headers
                  if k not in (b"content-length", b"x-polite-origin-age", b"via")]
        fields += [(b"age", str(int(age)).encode()), (b"via", _VIA)]
        if not_modified_:
            keep = {b"cache-control", b"content-location", b"date", b"etag", b"expires",
                    b"vary", b"last-modified", b"age", b"via"}
            await self._send(conn, writer, h11.Response(
                status_code=304, headers=[(k, v) for k, v in fields if k in keep]),
                h11.EndOfMessage())
            return
        fields.append((b"content-length", str(len(stored.body)).encode()))
        events: list[Any] = [h11.Response(status_code=stored.status, headers=fields,
                                          reason=stored.reason)]
        if method != b"HEAD" and stored.body:
            events.append(h11.Data(data=stored.body))
        events.append(h11.EndOfMessage())
        await self._send(conn, writer, *events)

    async def _forward(self, conn: h11.Connection, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter, request: h11.Request, url: str,
                       key: tuple[str, str, int], origin: str,
                       choice: Choice | None = None) -> bool:
        parts = urlsplit(url)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        headers = [(k, v) for k, v in _forwardable(list(request.headers)) if k != b"host"]
        netloc = parts.netloc.rsplit("@", 1)[-1]
        headers.insert(0, (b"host", netloc.encode("latin-1")))
        via = _header(list(request.headers), b"via")
        headers.append((b"via", via + b", " + _VIA if via else _VIA))
        revalidating = choice is not None and choice.action == "revalidate"
        if revalidating:
            assert choice is not None
            headers = [(k, v) for k, v in headers
                       if k not in (b"if-none-match", b"if-modified-since")]
            headers += list(choice.conditional)
        started = time.monotonic()
        request_time = self._cache.clock() if self._cache is not None else 0.0
        try:
            upstream, reused = await self._connect(key)
            try:
                response = await self._exchange(conn, reader, upstream, request.method, path,
                                                headers, writer)
            except _UpstreamError:
                if not reused:
                    raise
                upstream.writer.close()  # a kept-alive connection the origin had closed
                upstream, _ = await self._connect(key)
                response = await self._exchange(conn, reader, upstream, request.method, path,
                                                headers, writer)
        except _UpstreamError as exc:
            self.stats["errors"] += 1
            await self._send_error(conn, writer, exc.status, str(exc))
            return False
        self.stats["forwarded"] += 1
        cache = self._cache
        response_headers = list(response.headers)
        if cache is not None and revalidating and response.status_code == 304:
            assert choice is not None and choice.stored is not None
            try:
                while not isinstance(await self._upstream_event(upstream), h11.EndOfMessage):
                    pass
            except _UpstreamError:
                upstream.writer.close()
            else:
                self._release(key, upstream)
            fresh = await cache.freshen(choice.stored, response_headers, request_time,
                                        cache.clock())
            await self._send_stored(conn, writer, request.method, fresh, 0.0,
                                    not_modified(list(request.headers), fresh))
            await self._politeness.note_response(url, 304,
                                                 elapsed_s=time.monotonic() - started)
            return True
        body: bytearray | None = None
        if cache is not None and cache.wants(request.method, list(request.headers),
                                             response.status_code, response_headers):
            body = bytearray()
        out_headers = _forwardable(response_headers)
        out_headers.append((b"via", _VIA))
        # What goes to the client is gathered and written when the origin's bytes run out
        # (or pass 64 KiB): a small response leaves in one write, a big one streams.
        pending = bytearray(conn.send(h11.Response(status_code=response.status_code,
                                                   headers=out_headers,
                                                   reason=response.reason)) or b"")
        up = upstream.conn
        try:
            while True:
                try:
                    event = up.next_event()
                except h11.RemoteProtocolError as exc:
                    raise _UpstreamError(502, f"the origin's answer is not HTTP: {exc}"
                                         ) from None
                if event is h11.NEED_DATA:
                    if pending:
                        writer.write(pending)
                        pending = bytearray()
                        await writer.drain()
                    event = await self._upstream_event(upstream)
                if isinstance(event, h11.Data):
                    if body is not None:
                        body += event.data
                        if len(body) > cache.max_object_bytes:  # type: ignore[union-attr]
                            body = None
                    pending += conn.send(event) or b""
                    if len(pending) >= _READ_CHUNK:
                        writer.write(pending)
                        pending = bytearray()
                        await writer.drain()
                elif isinstance(event, h11.EndOfMessage):
                    pending += conn.send(h11.EndOfMessage()) or b""
                    writer.write(pending)
                    await writer.drain()
                    break
                else:
                    raise _UpstreamError(502, "the origin closed mid-response")
        except _UpstreamError:
            if pending:
                writer.write(pending)
            upstream.writer.close()
            self.stats["errors"] += 1
            return False  # the status line is out; all we can do is cut the connection
        self._release(key, upstream)
        if cache is not None:
            if body is not None:
                await cache.store(url, list(request.headers), response.status_code,
                                  response.reason, response_headers, bytes(body),
                                  request_time, cache.clock())
            await cache.invalidate_after(request.method, url, response.status_code,
                                         response_headers)
        await self._politeness.note_response(
            url, response.status_code, elapsed_s=time.monotonic() - started,
            retry_after=(_header(list(response.headers), b"retry-after") or b"")
            .decode("latin-1") or None)
        return True

    async def _upstream_event(self, upstream: _Upstream) -> Any:
        conn = upstream.conn
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise _UpstreamError(502, f"the origin's answer is not HTTP: {exc}") from None
            if event is not h11.NEED_DATA:
                return event
            try:
                async with asyncio.timeout(self.settings.origin_read_s):
                    data = await upstream.reader.read(_READ_CHUNK)
            except TimeoutError:
                raise _UpstreamError(504, "the origin did not answer in time") from None
            except OSError as exc:
                raise _UpstreamError(502, f"the origin broke the connection: {exc}") from None
            conn.receive_data(data)

    async def _exchange(self, conn: h11.Connection, reader: asyncio.StreamReader,
                        upstream: _Upstream, method: bytes, path: str,
                        headers: list[tuple[bytes, bytes]],
                        writer: asyncio.StreamWriter | None = None) -> h11.Response:
        up = upstream.conn
        try:
            upstream.writer.write(up.send(h11.Request(method=method, target=path.encode(),
                                                      headers=headers)) or b"")
            sent = 0
            while conn.their_state is h11.SEND_BODY:
                event = await self._next(conn, reader, self.settings.client_read_s)
                if isinstance(event, h11.Data):
                    sent += len(event.data)
                    if sent > self.settings.max_request_body_bytes:
                        raise _ClientGone("request body over the limit")
                    upstream.writer.write(up.send(event) or b"")
                elif isinstance(event, h11.EndOfMessage):
                    upstream.writer.write(up.send(h11.EndOfMessage()) or b"")
            if up.our_state is h11.SEND_BODY:  # the client's request had no body
                upstream.writer.write(up.send(h11.EndOfMessage()) or b"")
            await upstream.writer.drain()
        except OSError as exc:
            raise _UpstreamError(502, f"the origin broke the connection: {exc}") from None
        while True:
            event = await self._upstream_event(upstream)
            if isinstance(event, h11.Response):
                return event
            if isinstance(event, h11.InformationalResponse):
                # 1xx (103 Early Hints, 100 Continue) go on to the client, never stored.
                if writer is not None and event.status_code != 101 and \
                        conn.our_state is h11.SEND_RESPONSE:
                    with contextlib.suppress(h11.LocalProtocolError):
                        await self._send(conn, writer, h11.InformationalResponse(
                            status_code=event.status_code, headers=_forwardable(
                                list(event.headers)), reason=event.reason))
                continue
            raise _UpstreamError(502, "the origin closed the connection without answering")

    # -- the API ---------------------------------------------------------------------------

    async def _to_app(self, conn: h11.Connection, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter, request: h11.Request,
                      peer: tuple[Any, ...]) -> bool:
        body = bytearray()
        while True:
            event = await self._next(conn, reader, self.settings.client_read_s)
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.settings.max_request_body_bytes:
                    await self._send_error(conn, writer, 413, "request body too large")
                    return False
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                return False
        raw_path, _, query = request.target.partition(b"?")
        scope: dict[str, Any] = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": request.method.decode("latin-1"), "scheme": "http",
            "path": unquote(raw_path.decode("latin-1")), "raw_path": raw_path,
            "query_string": query, "root_path": "",
            "headers": [(k, v) for k, v in request.headers],
            "client": (peer[0], peer[1]) if len(peer) >= 2 else None,
            "server": None,
        }
        delivered = False

        async def receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            await asyncio.Event().wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                fields = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
                await self._send(conn, writer, h11.Response(status_code=message["status"],
                                                            headers=fields))
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if chunk:
                    await self._send(conn, writer, h11.Data(data=chunk))
                if not message.get("more_body", False):
                    await self._send(conn, writer, h11.EndOfMessage())

        try:
            await self._app(scope, receive, send)
        except Exception as exc:  # an app failure answers 500 and ends this connection
            await self._send_error(conn, writer, 500, f"internal error: {type(exc).__name__}")
            return False
        return True


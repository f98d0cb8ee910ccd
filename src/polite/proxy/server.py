"""One port, two kinds of request (DESIGN.md, "Surfaces").

A request whose target is absolute (``GET http://site/path HTTP/1.1``) is proxied: robots.txt
and the host's slot are consulted through :class:`~polite.fetch.politeness.Politeness`, then
the request is forwarded over a kept-alive upstream connection and the response streamed
back. Anything else (``GET /health``) goes to the ASGI app given, the REST service.

HTTP/1.1 is read by llhttp on both sides (:mod:`polite.fetch.wire`); this module owns the
sockets. Refusals are answered here, never forwarded: robots.txt forbids (403, naming the
rule and its line), the host's slot is taken (``reject`` mode: 429 with ``Retry-After`` in
whole seconds and the exact wait in ``X-Polite-Retry-After-Ms``; ``wait`` mode: held until
the slot, up to a limit), a private or loopback target (403 unless allowed), a request
addressed to the proxy itself (a loop), ambiguous framing (both Content-Length and
Transfer-Encoding, or two lengths: request smuggling), a URL of another scheme than http and
https or a host name no lookup can take (400).

The parts live beside this module, by what they do: :mod:`polite.proxy.base` (settings,
refusals, the checks every request passes, the wait for a slot), :mod:`polite.proxy.forward`
(absolute-form requests and the origin connections), :mod:`polite.proxy.tunnel` (CONNECT and
TLS interception), :mod:`polite.proxy.ordered` (ordered mode); this module is the host: it
listens, reads each request and sends it where it goes, the API included.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import ssl
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from polite.clock import WallClock
from polite.core.urls import PLAIN_ORIGIN
from polite.errors import InvalidURL
from polite.fetch.cache import PageCache
from polite.fetch.politeness import Politeness
from polite.fetch.robots import PublicHosts, split_origin
from polite.fetch.trust import client_context
from polite.fetch.wire import (
    END,
    LAST_CHUNK,
    Channel,
    Gathering,
    Head,
    Headers,
    Pool,
    ProtocolError,
    frame,
    response_head,
)
from polite.proxy.base import (
    _CHUNKED,
    _CLOSE,
    _ORDERED,
    _REJECT,
    _VIA,
    ASGIApp,
    Message,
    ProxySettings,
    _ClientGone,
    _Exchange,
    _host_problem,
    _read_fields,
)
from polite.proxy.forward import Sign
from polite.proxy.ordered import Ordered
from polite.proxy.tunnel import Interception, Tunnels
from polite.storage.base import store_failed

__all__ = ["ProxyServer"]

_OTHER_SCHEME = re.compile(rb"([A-Za-z][A-Za-z0-9+.-]*)://")  # an absolute URL, not http(s)
# The usual origin of an absolute target: a lower-case scheme, a host of letters, digits,
# dots and hyphens, a port.
_PLAIN_ORIGIN = re.compile(PLAIN_ORIGIN)
# An origin as a target writes it is read once for the 1,024 most recent: a proxy's requests
# go to few origins, each many times, and reading one was most of reading a target (14,000
# instructions, a tenth of a cache hit). Those longer than this are read the general way,
# so that what is kept stays under half a MiB.
_MAX_ORIGIN_CHARS = 300


def _plain_target(url: str) -> tuple[str, str, str, int, bytes, bytes] | None:
    """The common target (lower-case http(s), a plain host, a path of printable ASCII
    without a fragment) read at once: ``(origin, host, scheme, port, path, netloc)`` as
    split_origin, the host check and urlsplit make of it; None for any other, which the
    general way reads (and refuses in its own words)."""
    cut = url.find("/", 8)  # the path's start: past "http://" and a host's first character
    if not 0 < cut <= _MAX_ORIGIN_CHARS:
        return None
    path = url[cut:]
    # printable ASCII but the space, and no "#": the characters a plain path may hold
    if not (path.isascii() and path.isprintable()) or " " in path or "#" in path \
            or path.endswith("?"):
        return None
    known = _plain_origin(url[:cut])
    if known is None:
        return None
    origin, host, scheme, port, netloc = known
    return origin, host, scheme, port, path.encode("latin-1"), netloc


@functools.lru_cache(maxsize=1024)
def _plain_origin(written: str) -> tuple[str, str, str, int, bytes] | None:
    """``(origin, host, scheme, port, netloc)`` of an origin as a target writes it, when it
    is a plain one; None else."""
    m = _PLAIN_ORIGIN.fullmatch(written)
    if m is None:
        return None
    scheme, host, number = m.groups()
    default = 443 if scheme == "https" else 80
    given = default if number is None else int(number)
    # IDNA takes an ASCII name whose labels are 1 to 63 characters (the last may be empty):
    # a short name without empty labels is one, others are asked.
    short = len(host) <= 63 and host[0] != "." and ".." not in host
    if given > 65535 or not (short or _host_problem(host) is None):
        return None
    origin = f"{scheme}://{host}" if given == default else f"{scheme}://{host}:{given}"
    # a port 0 is read as urlsplit reads it
    return origin, host, scheme, given or default, written[len(scheme) + 3:].encode("latin-1")


class ProxyServer(Tunnels, Ordered):
    """Listens on one address; ``app`` answers the origin-form requests."""

    def __init__(self, politeness: Politeness, app: ASGIApp, *,
                 settings: ProxySettings | None = None, cache: PageCache | None = None,
                 upstream_tls: ssl.SSLContext | None = None,
                 interception: Interception | None = None,
                 public_hosts: PublicHosts | None = None, sign: Sign | None = None,
                 resolve: Callable[[str], Awaitable[str]] | None = None) -> None:
        self._politeness = politeness
        self._resolve = resolve
        # The private-address guard, asked once per request: the connection then goes to
        # the address it checked, never to the name looked up again.
        self._guard = public_hosts if public_hosts is not None else PublicHosts(WallClock())
        self._sign = sign  # Web Bot Auth: the fields that sign each forwarded request
        self._cache = cache
        self._app = app
        self.settings = settings or ProxySettings()
        # kept-alive connections to origins, at most so many each
        self._idle = Pool(max_per_origin=self.settings.max_idle_upstream)
        self._server: asyncio.Server | None = None
        self._addresses: set[tuple[str, int]] = set()
        self._tls = upstream_tls or client_context()
        self._interception = interception
        self._tasks: set[asyncio.Task[None]] = set()
        self.stats = {"forwarded": 0, "robots_refused": 0, "delayed": 0, "errors": 0,
                      "tunnels": 0, "intercepted": 0, "usage_refused": 0}
        # (peer address, client id) -> the last request of that client
        self._order_tail: dict[tuple[str, str], asyncio.Future[None]] = {}
        # host -> (the lock its waiters queue on, in order; how many hold or wait for it)
        self._host_turns: dict[str, tuple[asyncio.Lock, int]] = {}
        self._connections = 0  # client connections open
        self._gathering = Gathering(self._serves_many)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the port (useful with 0)."""
        await self._lifespan("startup")
        loop = asyncio.get_running_loop()
        try:
            # the client side: each connection is served by its own task
            self._server = await loop.create_server(
                lambda: Channel("request", max_head_bytes=self.settings.max_head_bytes,
                                gather=self._gathering, made=self._serve), host, port)
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
        self._idle.close()
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
        self._connections += 1
        try:
            await self._requests(client, peer)
        finally:
            self._connections -= 1
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
                    down = store_failed(exc)
                    if client.written == written:
                        self._send_error(client, 503 if down else 500, f"the store does not "
                                         f"answer ({type(exc).__name__}: {exc}); nothing is "
                                         f"let through without it" if down else
                                         f"internal error: {type(exc).__name__}", close=True)
                    if not down:
                        raise  # a fault still shows, as the task's error
                    break
                if not keep or not event.keep_alive or event.version != "1.1" or client.raw_mode():
                    break
        except ProtocolError as exc:
            self._send_error(client, exc.status, str(exc), close=True)
        except (_ClientGone, ConnectionError, TimeoutError):
            pass

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
        plain = _plain_target(url)
        if plain is not None:
            origin, host, scheme, port, path_bytes, netloc = plain
        else:
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
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            path_bytes = path.encode("latin-1")
            netloc = parts.netloc.rsplit("@", 1)[-1].encode("latin-1")
        via, user_agent, asks, names_purpose = _read_fields(head.headers)
        if (host, port) in self._addresses or (via is not None and _VIA in via):
            self._send_error(client, 508, "this request is addressed to the proxy itself: "
                             "refused, not looped", close=True)
            return False
        if checked or (self.settings.token is None and self._politeness.allow_private):
            # no token to ask for, no address to check: _admit's answer without its step
            asked = self._asked(head, asks)
            if isinstance(asked, str):
                self._send_error(client, 400, asked, close=True)
                return False
            mode, wait_s = asked
        else:
            admitted = await self._admit(client, host, head, "forward", checked=checked,
                                         address=address)
            if not isinstance(admitted, tuple):
                return bool(admitted)
            mode, wait_s, address = admitted
        watch = self._politeness.activity.watch(head.method.decode("latin-1"), url, host,
                                                held=mode is not _REJECT)
        exchange = _Exchange(head, url, origin, (scheme, host, port), path_bytes, netloc,
                             address, watch, via, user_agent, names_purpose)
        # Answered (in ordered mode after the client's earlier requests); its end, whatever
        # it was, is told to the activity (the dashboard, /trace).
        try:
            if mode is _ORDERED:
                return await self._ordered(client, exchange, peer, wait_s)
            return await self._polite(client, exchange, mode, wait_s)
        finally:
            self._politeness.activity.ended(
                watch, exchange.decision if exchange.status else "error", exchange.status,
                exchange.held_ms)

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


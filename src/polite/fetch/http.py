"""The HTTP client every request to a site leaves through (robots.txt, sitemaps, pages; the
crawler's, the survey's, the service's): HTTP/1.1 on the channels of :mod:`polite.fetch.wire`
(llhttp, through httptools, as the proxy's), one keep-alive connection per exchange in
flight.

A crawler's or a survey's CPU is mostly its requests, and a request costs httpx 650-900 us,
aiohttp 125 us and this client about 30 us (GETs of 8.5 KB pages on loopback, each client's
own loop, uvloop); httpx stays where a user hands polite a client of their own (the
drop-ins). Bodies are inflated here so that a gzip
bomb stops at the cap however well it compresses: ``zlib``'s ``max_length`` bounds each step.
Redirects are returned, not followed (the caller checks and spaces each hop).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import quote, urlsplit

from polite.core.crawl.guidance import accept_headers
from polite.core.robots import AgentRules
from polite.errors import PrivateAddress
from polite.fetch.resolve import ResolverFailure
from polite.fetch.trust import client_context
from polite.fetch.wire import END, Channel, Head, Pool, ProtocolError

__all__ = ["FetchResult", "HttpClient", "Leaving", "PageFetcher", "RequestHeaders", "Resolve",
           "Sink"]

# A host name to the address to connect to (a hosts file, a nameserver of the user's, the
# private-address guard); PrivateAddress is the address refused, any other exception it
# raises is the name not resolving.
Resolve = Callable[[str], Awaitable[str]]

IDLE_S = 15.0  # a kept-alive connection unused this long is closed, not reused
MAX_HEAD_BYTES = 64 * 1024  # a response's status line and header fields, at most
_INFLATE_STEP = 256 * 1024  # a compressed body is inflated at most this much at a time
# A request target keeps what a URL may hold; anything else is percent-encoded as UTF-8.
_TARGET_SAFE = "/?#[]@!$&'()*+,;=:%~-._"


class Headers(Mapping[str, str]):
    """Response header fields by name, case-insensitive; a repeated field gives its first
    value (:meth:`FetchResult.get_all` has them all)."""

    __slots__ = ("_fields",)

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        fields: dict[str, str] = {}
        for name, value in pairs:
            fields.setdefault(name.lower(), value)
        self._fields = fields

    def __getitem__(self, name: str) -> str:
        return self._fields[name.lower()]

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._fields.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


@dataclass(slots=True)
class FetchResult:
    """What one GET gave: a response (``status``) or an ``error``, never an exception."""

    status: int | None = None
    reason: str = ""
    http_version: str = "HTTP/1.1"
    headers: Mapping[str, str] = field(default_factory=dict)
    raw_headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    truncated: bool = False
    answered_s: float | None = None  # until the response's head: the host's response time
    late_s: float = 0.0  # from the call to the request's head being written (a connection
    # to open or to wait for, a busy loop)
    elapsed_s: float = 0.0  # the whole exchange
    error: str | None = None
    # why there is an error: "timeout", "dns" (the name did not resolve), "resolver" (the
    # resolver gave no answer about the name: silent, refused, SERVFAIL), "connection"
    # (refused, reset, closed early, not HTTP), "private" (the address is refused by the
    # guard), "invalid" (the URL or a header) or "withheld" (``leaving`` held the request
    # back: it was never sent)
    failure: str | None = None
    charset: str | None = None
    size: int = 0  # the body's bytes (inflated unless asked raw), also those past the cap

    def get_all(self, name: str) -> list[str]:
        """Every value of a response header (``X-Robots-Tag`` may come several times)."""
        lower = name.lower()
        return [value for key, value in self.raw_headers if key.lower() == lower]


class _Inflater:
    """gzip or deflate (zlib-wrapped or raw, as servers send either), bounded per step."""

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._zlib = zlib.decompressobj(47 if encoding in ("gzip", "x-gzip") else 15)
        self._raw_tried = encoding == "gzip" or encoding == "x-gzip"

    def inflate(self, data: bytes, limit: int) -> bytes:
        try:
            return self._zlib.decompress(data, limit)
        except zlib.error:
            if self._raw_tried:
                raise
            self._raw_tried = True  # "deflate" sent without its zlib wrapper
            self._zlib = zlib.decompressobj(-15)
            return self._zlib.decompress(data, limit)

    def more(self, limit: int) -> bytes:
        """What is still held back by the last step's limit."""
        tail = self._zlib.unconsumed_tail
        return self._zlib.decompress(tail, limit) if tail else b""


class _Broken(Exception):
    """The answer cannot be read to its end: ``failure`` and the error's text."""

    def __init__(self, message: str, failure: str = "connection") -> None:
        super().__init__(message)
        self.failure = failure


class _Body:
    """A body as it is read: kept up to the cap (or handed to the sink), then counted up to
    ``count_to`` (a file's true size)."""

    __slots__ = ("_count_to", "_max_bytes", "_sink", "body", "result")

    def __init__(self, result: FetchResult, max_bytes: int, count_to: int,
                 sink: Sink | None) -> None:
        self.result = result
        self.body = bytearray()
        self._max_bytes = max_bytes
        self._count_to = count_to
        self._sink = sink

    def take(self, piece: bytes) -> bool:
        """False when the rest is not to be read (the connection then goes)."""
        result = self.result
        room = self._max_bytes - result.size
        result.size += len(piece)
        if room > 0:
            kept = piece if len(piece) <= room else piece[:room]
            if self._sink is None:
                self.body += kept
            elif not self._sink(result, kept):
                return False  # the rest is not wanted
        if result.size > self._max_bytes:
            result.truncated = True
            if result.size > self._count_to:
                return False
        return True

    def inflate(self, inflater: _Inflater, data: bytes) -> bool:
        try:
            piece = inflater.inflate(data, _INFLATE_STEP)
            while piece:
                if not self.take(piece):
                    return False
                piece = inflater.more(_INFLATE_STEP)
        except zlib.error as exc:
            raise _Broken(f"the body's Content-Encoding is broken ({exc})") from None
        return True


def _channel() -> Channel:
    # Field names as sent (a page's record keeps them), each field counted with its ": "
    # and line end.
    return Channel("response", max_head_bytes=MAX_HEAD_BYTES, fold_names=False,
                   field_overhead=4)


def _ended(channel: Channel) -> str:
    exc = channel.lost
    if exc is not None:
        return f"{type(exc).__name__}: {exc}"
    return "the server closed the connection before the response was whole"


def _unreadable(error: ProtocolError) -> str:
    if error.status == 431:
        return f"the response's header fields pass {MAX_HEAD_BYTES} bytes"
    cause = error.__cause__  # the parser's words
    return f"the response is not HTTP/1.1: {cause}" if cause is not None else str(error)


class Leaving(Protocol):
    """Asked as a request is about to be written, with how long after the client's call
    that is: whether it may still go (a request whose slot was given again meanwhile may
    not); told once it is written (:class:`polite.fetch.politeness.LateStart`)."""

    def __call__(self, late_s: float) -> bool: ...

    def left(self) -> None:
        """The request is in the kernel's hands: how late it went is known now (the
        process can be held up between the question and the write, by a busy core)."""


WITHHELD = "held back as it was about to leave: its slot was given to another request"


async def _exchange(channel: Channel, request: bytes, max_bytes: int, started: float, *,
                    count_to: int, decode: bool, read_timeout_s: float | None,
                    sink: Sink | None, leaving: Leaving | None = None
                    ) -> FetchResult:
    """One request on ``channel`` and its answer; the channel is closed unless it can carry
    another exchange (a request ``leaving`` held back leaves it as it was)."""
    result = FetchResult()
    result.late_s = time.monotonic() - started
    if leaving is not None and not leaving(result.late_s):
        result.error, result.failure = WITHHELD, "withheld"
        return result
    body = _Body(result, max_bytes, count_to, sink)
    channel.write(request)
    if leaving is not None:
        leaving.left()
    try:
        kept = await _response(channel, body, started, decode, read_timeout_s)
    except BaseException as exc:  # the deadline, or the crawl stopping: not read further
        channel.close()
        if isinstance(exc, TimeoutError):  # the read time-out (the deadline cancels)
            exc = _Broken(f"no data for {read_timeout_s:g} s", "timeout")
        elif isinstance(exc, ProtocolError):
            exc = _Broken(_unreadable(exc))
        elif not isinstance(exc, _Broken):
            raise
        # No answer, or the head came and the body did not: an error (a body past the
        # cap is not one).
        if result.status is None or (result.error is None and not result.truncated):
            result.error = str(exc)
            result.failure = exc.failure
        result.body = bytes(body.body)
        return result
    result.body = bytes(body.body)
    if not kept:
        channel.close()
    return result


async def _response(channel: Channel, body: _Body, started: float, decode: bool,
                    read_timeout_s: float | None) -> bool:
    """Reads the answer into ``body`` and its result; whether the connection can carry
    another."""
    while True:  # past interim answers (100 Continue, 103 Early Hints)
        event = channel.poll() or await channel.next(read_timeout_s, silence=True)
        if type(event) is Head:
            if event.status >= 200:
                head = event
                break
            if channel.raw_mode():
                raise _Broken("the server switched protocols")
        elif event is not END:  # EOF (body pieces come only after a head)
            raise _Broken(_ended(channel))
    result = body.result
    result.status = head.status
    result.reason = head.reason.decode("latin-1")
    result.http_version = f"HTTP/{head.version}"
    result.answered_s = time.monotonic() - started
    result.raw_headers = raw = [(name.decode("latin-1"), value.decode("latin-1"))
                                for name, value in head.headers]
    headers = Headers(raw)
    result.headers = headers
    result.charset = _charset(headers.get("content-type"))
    inflater: _Inflater | None = None
    if decode:
        encoding = (headers.get("content-encoding") or "").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            inflater = _Inflater(encoding)
    while True:
        event = channel.poll() or await channel.next(read_timeout_s, silence=True)
        if type(event) is bytes:
            if not (body.take(event) if inflater is None else body.inflate(inflater, event)):
                return False  # the rest is not read: the connection goes
        elif event is END:
            break
        else:
            raise _Broken(_ended(channel))
    return head.keep_alive and channel.at_rest()


class _Unresolved(Exception):
    """The resolver given found no address for a name (``failure`` "dns"), or gave no
    answer about it ("resolver": :class:`~polite.fetch.resolve.ResolverFailure`)."""

    def __init__(self, text: str, failure: str = "dns") -> None:
        super().__init__(text)
        self.failure = failure


def _failure(exc: OSError | ValueError) -> str:
    """The kind of a connection's failure: "dns" when the system's resolver said the name
    has no address, "resolver" when it could not tell (EAI_AGAIN), else "connection"."""
    if isinstance(exc, socket.gaierror):
        return "resolver" if exc.errno == socket.EAI_AGAIN else "dns"
    return "resolver" if isinstance(exc, ResolverFailure) else "connection"


def _charset(content_type: str | None) -> str | None:
    for parameter in (content_type or "").split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower() or None
    return None


# (method, URL, fields to cover) -> those fields and the ones that sign the request
Sign = Callable[[str, str, Sequence[tuple[str, str]]], list[tuple[str, str]]]
# A body as it arrives, a piece at a time, with the response's head (status, headers) in the
# result; False when the rest is not wanted (the connection is then not reused).
Sink = Callable[[FetchResult, bytes], bool]
MAX_SITES = 100_000  # sites whose request headers are remembered at once (the oldest go)


class RequestHeaders:
    """The header fields of every request to a site, assembled in this one place for
    robots.txt, sitemaps and pages alike: the User-Agent (the one the site's requests were
    said to carry, else ``user_agent``, else the agent token of whoever asks) and, once the
    site's robots.txt has been read, what its REGP lines ask for (Cookie, Accept-Encoding,
    Accept-Charset, Accept-Language; seed 000, 3.2.9-3.2.12), ``languages`` being the
    crawler's own. A signature is added by the client that sends them (it covers every
    request)."""

    def __init__(self, user_agent: str = "", *, languages: Sequence[str] = (),
                 max_sites: int = MAX_SITES) -> None:
        self.user_agent = user_agent
        self._languages = tuple(languages)
        self._max_sites = max(1, max_sites)
        self._default = accept_headers(AgentRules(), self._languages)
        self._sites: dict[str, dict[str, str]] = {}  # host -> its REGP fields
        self._agents: dict[str, str] = {}  # host -> the User-Agent its requests carry

    def identify(self, host: str, user_agent: str) -> None:
        """Requests to ``host`` carry ``user_agent`` from now on: a drop-in's client sends
        the site's pages under it, so robots.txt goes under it too (one identity a site)."""
        if self._agents.get(host) == user_agent:
            return
        self._agents.pop(host, None)  # re-inserted last: the dict keeps age order
        while len(self._agents) >= self._max_sites:
            del self._agents[next(iter(self._agents))]
        self._agents[host] = user_agent

    def learn(self, host: str, rules: AgentRules) -> None:
        """``host``'s robots.txt asks for ``rules``' REGP fields from now on."""
        self._sites.pop(host, None)  # re-inserted last: the dict keeps age order
        while len(self._sites) >= self._max_sites:
            del self._sites[next(iter(self._sites))]
        self._sites[host] = accept_headers(rules, self._languages)

    def __call__(self, host: str, agent: str = "") -> dict[str, str]:
        said = self._agents.get(host) if self._agents else None
        return {"User-Agent": said or self.user_agent or agent,
                **self._sites.get(host, self._default)}


class HttpClient(Protocol):
    """The one seam requests to sites leave through (a transport, in httpx's sense):
    :class:`PageFetcher` is its implementation; anything with these methods stands in."""

    headers: RequestHeaders

    @property
    def read_timeout_s(self) -> float | None: ...

    async def get(self, url: str, headers: Mapping[str, str] | None = None, *,
                  max_bytes: int, deadline_s: float, count_to: int = 0, decode: bool = True,
                  read_timeout_s: float | None = None,
                  signed: Sequence[tuple[str, str]] = (), agent: str = "",
                  sink: Sink | None = None, keep_alive: bool = True,
                  leaving: Leaving | None = None) -> FetchResult: ...

    def release(self, host: str, port: int | None = None) -> None: ...

    async def aclose(self) -> None: ...


class PageFetcher:
    """GET with a body cap counted after decompression and a deadline for the whole
    exchange (``connect_timeout_s`` for connecting, within it); connections are kept alive
    and reused. How many requests go to one host at once is the crawler's to bound (its
    ``per_host``): each is a connection of its own here. ``headers``: the requests' header
    fields, per site; ``sign``: the fields that sign each request (Web Bot Auth)."""

    def __init__(self, *, connect_timeout_s: float = 10.0,
                 tls: ssl.SSLContext | None = None, resolve: Resolve | None = None,
                 sign: Sign | None = None, headers: RequestHeaders | None = None,
                 read_timeout_s: float | None = None) -> None:
        self._connect_timeout_s = connect_timeout_s
        # a wait for the next byte, for a request that does not name its own
        self._read_timeout_s = read_timeout_s
        self._sign = sign  # header fields that sign each request (Web Bot Auth), if any
        self.headers = headers if headers is not None else RequestHeaders()
        self._idle = Pool(idle_s=IDLE_S)  # kept-alive connections
        self._tls = tls  # certificates checked against the system's CAs when None
        self._resolve = resolve  # the system's resolver when None

    @property
    def read_timeout_s(self) -> float | None:
        """The wait for a byte of a request that does not name its own (None: none)."""
        return self._read_timeout_s

    async def __aenter__(self) -> PageFetcher:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def get(self, url: str, headers: Mapping[str, str] | None = None, *,
                  max_bytes: int, deadline_s: float, count_to: int = 0, decode: bool = True,
                  read_timeout_s: float | None = None,
                  signed: Sequence[tuple[str, str]] = (), agent: str = "",
                  sink: Sink | None = None, keep_alive: bool = True,
                  leaving: Leaving | None = None) -> FetchResult:
        """GET ``url``: its body kept up to ``max_bytes`` (``truncated`` past it) and counted
        in ``size`` up to ``count_to`` when that is larger; inflated per Content-Encoding
        unless ``decode`` is off (the bytes as sent). ``deadline_s`` bounds the whole
        exchange, ``read_timeout_s`` a wait for the next byte. ``headers``: the fields to
        send, the site's own (:class:`RequestHeaders`, User-Agent ``agent`` unless the
        client has one) when None. ``signed``: fields sent that the request's signature
        covers too (with a signer). ``sink``: given the body piece by piece rather than
        keeping it. ``keep_alive`` off: the connection is closed once the answer is read
        (the next request to the host connects, and resolves, anew). ``leaving``: asked
        as the request's head is about to be written, with how long after the call that
        is (again if the request goes a second time, on a new connection); when it answers
        False the request is not sent (failure ``"withheld"``) and its connection is kept
        for the next."""
        started = time.monotonic()
        try:
            parts = urlsplit(url)
            scheme, host = parts.scheme.lower(), parts.hostname
            if scheme not in ("http", "https") or not host:
                raise ValueError(f"not an http(s) URL: {url!r}")
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError as exc:
            return FetchResult(error=str(exc), failure="invalid")
        key = (scheme, host, port)
        if headers is None:
            headers = self.headers(host, agent)
        if self._sign is not None:
            headers = {**headers, **dict(self._sign("GET", url, signed))}
        elif signed:
            headers = {**headers, **dict(signed)}
        try:
            request = _request(parts.netloc, url[len(scheme) + 3 + len(parts.netloc):] or "/",
                               headers)
        except ValueError as exc:
            return FetchResult(error=str(exc), failure="invalid")
        result: FetchResult
        if read_timeout_s is None:
            read_timeout_s = self._read_timeout_s
        try:
            async with asyncio.timeout(deadline_s):
                result = await self._exchange(key, request, max_bytes, started, count_to,
                                              decode, read_timeout_s, sink, keep_alive, leaving)
        except TimeoutError:
            result = FetchResult(error=f"took longer than {deadline_s:g} s",
                                 failure="timeout")
        except _Unresolved as exc:
            result = FetchResult(error=str(exc), failure=exc.failure)
        except PrivateAddress as exc:
            result = FetchResult(error=str(exc), failure="private")
        except (OSError, ValueError) as exc:
            text = str(exc)
            result = FetchResult(error=f"{type(exc).__name__}: {text}" if text
                                 else type(exc).__name__,
                                 failure=_failure(exc))
        result.elapsed_s = time.monotonic() - started
        return result

    async def _exchange(self, key: tuple[str, str, int], request: bytes, max_bytes: int,
                        started: float, count_to: int, decode: bool,
                        read_timeout_s: float | None, sink: Sink | None,
                        keep_alive: bool, leaving: Leaving | None
                        ) -> FetchResult:
        connection = self._idle.take(key)
        if connection is not None:
            received = connection.received
            result = await _exchange(connection, request, max_bytes, started,
                                     count_to=count_to, decode=decode,
                                     read_timeout_s=read_timeout_s, sink=sink,
                                     leaving=leaving)
            if result.status is not None or connection.received != received \
                    or result.failure in ("withheld", "timeout"):
                # (a silence past the read timeout: the server has the request, which is
                # not sent twice)
                self._keep(key, connection, keep_alive)
                return result
            connection.close()
            # The server had closed the kept-alive connection as the request went: the
            # request was not read, and a GET is asked again on a connection of its own.
        connection = await self._connect(key)
        result = await _exchange(connection, request, max_bytes, started, count_to=count_to,
                                 decode=decode, read_timeout_s=read_timeout_s, sink=sink,
                                 leaving=leaving)
        self._keep(key, connection, keep_alive)
        return result

    def _keep(self, key: tuple[str, str, int], connection: Channel,
              keep_alive: bool = True) -> None:
        if keep_alive:
            self._idle.put(key, connection)
        else:
            connection.close()
            self._idle.sweep()

    async def _connect(self, key: tuple[str, str, int]) -> Channel:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        tls: ssl.SSLContext | None = None
        if scheme == "https":
            if self._tls is None:
                self._tls = client_context()
            tls = self._tls
        address = host
        if self._resolve is not None:
            # The address connected to is the one resolve gave (and, being the guard,
            # checked): no second lookup could answer otherwise.
            try:
                address = await self._resolve(host)
            except PrivateAddress:
                raise
            except ResolverFailure as exc:
                raise _Unresolved(f"{host} could not be looked up: {exc}", "resolver"
                                  ) from exc
            except Exception as exc:
                raise _Unresolved(f"{host} does not resolve: {exc}") from exc
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, connection = await loop.create_connection(
                    _channel, address, port, ssl=tls, server_hostname=host if tls else None)
        except TimeoutError:
            raise ConnectionError(f"no connection to {host}:{port} within "
                                  f"{self._connect_timeout_s:.0f} s") from None
        return connection

    def release(self, host: str, port: int | None = None) -> None:
        """Close the kept-alive connections to ``host`` (on ``port``, else on each scheme's
        default port): a caller done with a host (the survey, once a domain is recorded)
        keeps no socket open for it, however many hosts it goes through."""
        self._idle.drop(("http", host, port or 80))
        self._idle.drop(("https", host, port or 443))

    async def close(self) -> None:
        self._idle.close()

    aclose = close  # httpx's name, which the client's users had


def _request(netloc: str, target: str, headers: Mapping[str, str]) -> bytes:
    """The request's head: the target as the URL has it (ASCII; anything else
    percent-encoded), ``Host``, ``Accept: */*`` unless given, then ``headers``."""
    if "#" in target:
        target = target.split("#", 1)[0]
    if not target.isascii() or any(c <= " " for c in target):
        target = quote(target, safe=_TARGET_SAFE)
    lines = [f"GET {target} HTTP/1.1", f"Host: {netloc.rsplit('@', 1)[-1]}"]
    if not any(name.lower() == "accept" for name in headers):
        lines.append("Accept: */*")
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise ValueError(f"the request header {name!r} holds a line break or a colon")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")

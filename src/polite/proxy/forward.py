"""Forwarding: a request in absolute form (``GET http://site/path``), once politeness lets it
go, is sent over a kept-alive connection to its origin and the answer streamed back, stored
in the page cache when it may be."""

from __future__ import annotations

import abc
import asyncio
import math
import ssl
import time
from collections.abc import Callable
from typing import Any

from polite.core.cache.policy import Stored, invalidates, not_modified
from polite.core.politeness.rules import BACKOFF_STATUSES
from polite.core.robots.lifecycle import Parsed
from polite.core.usage.statement import Pref
from polite.core.usage.vocab import PURPOSES
from polite.fetch.cache import PageCache
from polite.fetch.politeness import LateStart
from polite.fetch.robots import robots_usage
from polite.fetch.wire import (
    END,
    EOF,
    LAST_CHUNK,
    Channel,
    Event,
    Head,
    Headers,
    Pool,
    ProtocolError,
    frame,
    request_head,
    response_head,
)
from polite.proxy.base import (
    _CHUNKED,
    _CLOSE,
    _HOP_BY_HOP,
    _REJECT,
    _VIA,
    Key,
    Mode,
    ProxyBase,
    Verdict,
    _ClientGone,
    _Exchange,
    _expects_continue,
    _forwardable,
    _product_token,
    _UpstreamError,
)
from polite.proxy.usage import asked_purpose, stored_with_usage, with_usage

__all__ = ["Forwarding", "Sign"]

_WRITE_BATCH = 65_536  # response bytes gathered before a write
_GIVEN_AGAIN = ("the host's next turn was given to a later request as this one was about to "
                "leave: ask again")
# A request's fields not sent on: the hop's own, and its Host, which the proxy writes from
# the target.
_NOT_SENT_ON = _HOP_BY_HOP | {b"host"}

# A stored response's fields not served as stored: the cache gives its own Age (the origin's
# is kept under this name), length and Via.
_NOT_SERVED = frozenset({b"content-length", b"x-polite-origin-age", b"via"})
# The fields a 304 answered from the cache carries (RFC 9110, 15.4.5), with its Age and Via.
_NOT_MODIFIED_FIELDS = frozenset({b"cache-control", b"content-location", b"date", b"etag",
                                  b"expires", b"vary", b"last-modified", b"age", b"via"})

# (method, URL) -> the header fields that sign that request
Sign = Callable[[str, str], list[tuple[str, str]]]



def _upstream_failure(exc: TimeoutError | ProtocolError) -> _UpstreamError:
    """What the client is answered when waiting for the origin ended in ``exc``."""
    if isinstance(exc, TimeoutError):
        return _UpstreamError(504, "the origin did not answer in time")
    return _UpstreamError(502, f"the origin's answer is not HTTP: {exc}")


def _signed(headers: Headers, signature: list[tuple[str, str]]) -> Headers:
    """``headers`` with the ``signature`` fields: the client's own fields of those names
    give way to them."""
    signed = [(n.lower().encode("ascii"), v.encode("latin-1")) for n, v in signature]
    ours = {name for name, _ in signed}
    return [(k, v) for k, v in headers if k not in ours] + signed


class Forwarding(ProxyBase):
    """Proxied requests in absolute form, and the connections to origins they go over."""

    _cache: PageCache | None
    _sign: Sign | None
    _idle: Pool
    _tls: ssl.SSLContext

    @abc.abstractmethod
    async def _ordered(self, client: Channel, exchange: _Exchange, peer: tuple[Any, ...],
                       wait_s: float) -> bool:
        """Ordered mode (:mod:`polite.proxy.ordered`): :meth:`_polite` once the client's
        earlier requests are answered."""

    async def _polite(self, client: Channel, exchange: _Exchange, mode: Mode,
                      wait_s: float) -> bool:
        """A request in absolute form, checked and answered (from the cache, refused or
        forwarded)."""
        head = exchange.head
        activity = self._politeness.activity
        agent = _product_token(exchange.user_agent)
        # Before the cache: a stored page is no more the purpose's to take than a fetched one.
        purpose = exchange.purpose = asked_purpose(head, self.settings.purpose) \
            if exchange.names_purpose else self.settings.purpose
        refusal = None if purpose is None else await self._usage_refusal(
            exchange.url, agent or self._politeness.agent, purpose)
        if refusal is not None:
            exchange.status, message = refusal
            exchange.decision = "usage" if exchange.status == 403 else "invalid"
            if exchange.status == 403:
                self.stats["usage_refused"] += 1
            self._send_error(client, exchange.status, message)
            return await self._answered(client, head)
        if self._cache is not None and head.method in (b"GET", b"HEAD"):
            choice = exchange.choice = await self._cache.lookup(
                head.method, exchange.url, head.headers,
                key=exchange.origin + exchange.path.decode("latin-1"))
            if choice.action == "serve":  # a hit: the site is not asked, no slot is used
                stored = choice.stored
                assert stored is not None
                if purpose is not None:  # none: served as stored, without the step
                    stored = await stored_with_usage(self._politeness, self.settings.purpose,
                                                     head, exchange.url, stored)
                self._send_stored(client, head, stored, choice.age, choice.not_modified)
                exchange.decision = "cache"
                exchange.status = 304 if choice.not_modified else stored.status
                activity.decided(exchange.watch, "cache")
                return self._answered_at_once(client, head) or await self._answered(client, head)
            if choice.action == "gateway_timeout":
                exchange.status = 504
                self._send_error(client, 504, "only-if-cached: nothing usable is stored for "
                                 "this URL")
                return await self._answered(client, head)
        split = (exchange.origin, exchange.key[1])
        if mode is _REJECT:  # asked once, as _verdict would, without its step
            verdict = Verdict.of(await self._politeness.check_one(
                exchange.url, reserve=True, agent=agent, split=split))
        else:  # held until its slot: how long counts (a refusal says its own wait below)
            asked = time.monotonic()
            verdict = await self._verdict(exchange.url, agent, mode, wait_s, split=split)
            exchange.held_ms = math.ceil((time.monotonic() - asked) * 1000)
        activity.decided(exchange.watch, verdict.cause)
        if not verdict.allowed:
            exchange.decision = verdict.cause
            exchange.status = verdict.status
            exchange.held_ms = max(0, verdict.retry_ms)
            self._refuse(client, verdict)
            return self._answered_at_once(client, head) or await self._answered(client, head)
        exchange.grant = verdict.grant
        return await self._forward(client, exchange)

    async def _usage_refusal(self, url: str, agent: str, purpose: str
                             ) -> tuple[int, str] | None:
        """(status, message) when a request with ``purpose`` (:func:`asked_purpose`) is not
        to go: a purpose that is none of polite's (400), or one the URL's robots.txt
        preferences disallow (403, when told to refuse them)."""
        if purpose not in PURPOSES:
            return 400, f"X-Polite-Purpose must be one of {', '.join(PURPOSES)}"
        if not self.settings.refuse_usage:
            return None
        state = await self._politeness.robots_state(url)
        if not isinstance(state, Parsed):
            return None
        (prefs,) = await robots_usage(state.robots, [url], agent)
        answer = prefs.answer(purpose)
        if answer.pref is not Pref.DISALLOW:
            return None
        return 403, f"AI-usage preferences refuse {purpose}: {answer.reason}"

    # -- the origin side -----------------------------------------------------------------

    async def _open(self, host: str, port: int, tls: ssl.SSLContext | None, *,
                    raw: bool = False, address: str | None = None) -> Channel:
        """A connection to an origin, at ``address`` when given (the one the guard checked;
        the certificate is still checked for ``host``); ``raw`` for a tunnel (bytes the
        origin sends first, as some protocols do, are passed on too)."""
        loop = asyncio.get_running_loop()
        if address is None and self._resolve is not None:
            try:
                address = await self._resolve(host)
            except OSError as exc:
                raise _UpstreamError(502, f"{host} cannot be looked up: "
                                     f"{exc.strerror or exc}") from None

        def made() -> Channel:
            channel = Channel("response", max_head_bytes=self.settings.max_head_bytes,
                              gather=self._gathering)
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
        upstream = self._idle.take(key)
        if upstream is not None:
            return upstream, True
        scheme, host, port = key
        return await self._open(host, port, self._tls if scheme == "https" else None,
                                address=address), False

    def _release(self, key: Key, upstream: Channel, response: Head | None) -> None:
        """Keeps a connection for the next request to ``key`` when it can carry one
        (``response`` None: a new connection, nothing sent on it yet)."""
        if response is None or (response.keep_alive and response.framing != "close"):
            self._idle.put(key, upstream)
        else:
            upstream.close()

    def _send_stored(self, client: Channel, request: Head, stored: Stored, age: float,
                     not_modified_: bool) -> None:
        fields = [(k, v) for k, v in stored.headers if k not in _NOT_SERVED]
        fields += ((b"age", b"%d" % int(age)), (b"via", _VIA))
        if not_modified_:
            client.write(response_head(304, b"", [(k, v) for k, v in fields
                                                  if k in _NOT_MODIFIED_FIELDS]))
            return
        fields.append((b"content-length", b"%d" % len(stored.body)))
        head = response_head(stored.status, stored.reason, fields)
        client.write(head if request.method == b"HEAD" else head + stored.body)

    async def _upstream_event(self, upstream: Channel) -> Event:
        try:
            event = await upstream.next(self.settings.origin_read_s)
        except (TimeoutError, ProtocolError) as exc:
            raise _upstream_failure(exc) from None
        if event is EOF:
            raise _UpstreamError(502, "the origin closed the connection mid-response")
        return event

    async def _forward(self, client: Channel, exchange: _Exchange) -> bool:
        request = exchange.head
        # X-Polite-* tell the proxy how to treat the request (mode, wait, client): they are
        # not the origin's to read.
        headers = [(b"host", exchange.netloc)]
        headers += _forwardable(request.headers, _NOT_SENT_ON, b"x-polite-")
        via = exchange.via
        headers.append((b"via", via + b", " + _VIA if via else _VIA))
        if request.framing != "none":  # a body follows (a GET has none: nothing to look at)
            if request.framing == "chunked":
                headers.append(_CHUNKED)
            if _expects_continue(request):
                # The body is read from the client before the origin's answer is, so the
                # proxy says "go on" itself and the origin is not asked to (RFC 9110, 10.1.1).
                client.write(response_head(100, b"Continue", []))
                headers = [(k, v) for k, v in headers if k != b"expect"]
        choice = exchange.choice
        revalidating = choice is not None and choice.action == "revalidate"
        if revalidating:
            assert choice is not None
            headers = [(k, v) for k, v in headers
                       if k not in (b"if-none-match", b"if-modified-since")]
            headers += list(choice.conditional)
        if self._sign is not None:
            headers = _signed(headers, self._sign(request.method.decode("latin-1"),
                                                  exchange.url))
        wire = request_head(request.method, exchange.path, headers)
        started = time.monotonic()
        cache = self._cache
        request_time = cache.clock() if cache is not None else 0.0
        leaving: LateStart | None = None
        try:
            # A kept connection when there is one, taken without a step of its own.
            upstream = self._idle.take(exchange.key)
            reused = upstream is not None
            if upstream is None:
                upstream, _ = await self._connect(exchange.key, exchange.address)
            if exchange.grant:
                # Leaving later than its slot (a connection to open, a busy machine), the
                # host's next slot counts from now, as a crawler's request does; not at all
                # when that slot was given meanwhile: the later request may be on its way.
                leaving = self._politeness.late_start(exchange.url, grant=exchange.grant)
                if not leaving(0.0):
                    self._idle.put(exchange.key, upstream)
                    raise _UpstreamError(429, _GIVEN_AGAIN)
            try:
                response = await self._exchange(client, upstream, request, wire, leaving)
            except _UpstreamError:
                upstream.close()
                if not reused or request.framing != "none":
                    raise
                # A kept-alive connection the origin had closed: once more, on a new one
                # (asked again whether it may go: the slot may be given again meanwhile).
                upstream, _ = await self._connect(exchange.key, exchange.address)
                if leaving is not None and not leaving(0.0):
                    self._idle.put(exchange.key, upstream)
                    raise _UpstreamError(429, _GIVEN_AGAIN) from None
                response = await self._exchange(client, upstream, request, wire, leaving)
            except BaseException:  # the client broke off: the half-sent request goes too
                upstream.close()
                raise
        except _UpstreamError as exc:
            self.stats["errors"] += 1
            exchange.decision, exchange.status = "error", exc.status
            self._send_error(client, exc.status, str(exc), close=True)
            return False
        if leaving is not None:
            await leaving.noted()
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
            fresh = await stored_with_usage(self._politeness, self.settings.purpose, request,
                                            exchange.url, fresh)
            self._send_stored(client, request, fresh, 0.0, not_modified(request.headers, fresh))
            await self._politeness.note_response(exchange.url, 304, elapsed_s=elapsed_s)
            return True
        body: bytearray | None = None
        if cache is not None and cache.wants(request.method, request.headers, response.status,
                                             response.headers):
            body = bytearray()
        out_headers = _forwardable(response.headers)
        out_headers.append((b"via", _VIA))
        if exchange.purpose is not None:
            try:
                out_headers = await with_usage(self._politeness, self.settings.purpose,
                                               request, exchange.url, out_headers)
            except BaseException:  # cancelled: the origin's connection is not the pool's
                upstream.close()
                raise
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
        # (or pass 64 KiB): a small response leaves in one write, a big one streams. The
        # pieces are joined once, as they are written.
        pending = [response_head(response.status, response.reason, out_headers)]
        size = len(pending[0])
        try:
            while True:
                event = upstream.poll()
                if event is None:
                    if pending:
                        client.write(b"".join(pending))
                        pending, size = [], 0
                        await client.drain()
                    event = await self._upstream_event(upstream)
                if type(event) is bytes:
                    if body is not None:
                        body += event
                        if len(body) > cache.max_object_bytes:  # type: ignore[union-attr]
                            body = None
                    piece = frame(event, True) if chunked else event
                    pending.append(piece)
                    size += len(piece)
                    if size >= _WRITE_BATCH:
                        client.write(b"".join(pending))
                        pending, size = [], 0
                        await client.drain()
                elif event is END:
                    if chunked:
                        pending.append(LAST_CHUNK)
                    client.write(b"".join(pending))
                    break
                else:
                    raise _UpstreamError(502, "the origin closed the connection "
                                         "mid-response")
        except _UpstreamError:
            if pending:
                client.write(b"".join(pending))
            upstream.close()
            self.stats["errors"] += 1
            return False  # the status line is out; all we can do is cut the connection
        except BaseException:  # the client went (or the task was cancelled) mid-body
            upstream.close()
            raise
        self._release(exchange.key, upstream, response)
        if cache is not None:
            if body is not None:
                await cache.store(exchange.url, request.headers, response.status,
                                  response.reason, response.headers, bytes(body),
                                  request_time, cache.clock())
            if invalidates(request.method, response.status):  # not a GET's
                await cache.invalidate_after(request.method, exchange.url, response.status,
                                             response.headers)
        # Retry-After is read of the answers that pause a host only: of others it says nothing
        await self._politeness.note_response(
            exchange.url, response.status, elapsed_s=elapsed_s,
            retry_after=(response.get(b"retry-after") or b"").decode("latin-1") or None
            if response.status in BACKOFF_STATUSES else None, host=exchange.key[1])
        if client.must_drain():  # a small answer has not filled the transport: no step
            await client.drain()
        return keep

    async def _exchange(self, client: Channel, upstream: Channel, request: Head,
                        wire: bytes, leaving: LateStart | None) -> Head:
        """Sends the request (its body streamed from the client) and reads the response's
        head; 1xx answers go on to the client on the way. ``leaving`` is told once the
        head is written."""
        upstream.expect_no_body = request.method == b"HEAD"
        upstream.write(wire)
        if leaving is not None:
            leaving.left()
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
            try:  # _upstream_event's wait, without a step of its own: a miss waits here
                event = await upstream.next(self.settings.origin_read_s)
            except (TimeoutError, ProtocolError) as exc:
                raise _upstream_failure(exc) from None
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

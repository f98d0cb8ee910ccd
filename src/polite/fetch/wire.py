"""HTTP/1.1 on a socket, for the proxy (both its sides) and the page client below every
request to a site: messages parsed by llhttp (through httptools), bytes written as they are.

A :class:`Channel` is an :class:`asyncio.Protocol` that turns what arrives into a queue of
events, read with :meth:`Channel.next`: a :class:`Head` (a request or a response line with
its header fields), body pieces as ``bytes`` (framing removed), :data:`END` when a message
is whole, :data:`EOF` when the peer has closed. A message that cannot be read raises
:class:`ProtocolError` with the status to answer. A body that goes to another peer is framed
again by :func:`frame`; a body whose length was known is passed on in the pieces it came in.

The parser is fed everything that arrives, so pipelined requests queue up; reading stops
while more than a bound of unread heads and body bytes wait, so a fast sender cannot fill
memory. A wait for the next event has one deadline, which bytes trickling in do not move
(unless the wait is one of silence, a client's read timeout). A :class:`Pool` keeps
channels between exchanges, by origin.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Final, Literal, cast

import httptools

__all__ = ["END", "EOF", "LAST_CHUNK", "Channel", "Event", "Gathering", "Head", "Headers",
           "Origin", "Pool", "ProtocolError", "frame", "request_head", "response_head"]

Headers = list[tuple[bytes, bytes]]
Origin = tuple[str, str, int]  # scheme, host, port
Framing = Literal["length", "chunked", "close", "none"]


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


END: Final = _Marker("END")  # the message is whole
EOF: Final = _Marker("EOF")  # the peer closed its side

# Unread heads and body bytes past which a channel stops reading from its socket.
_HIGH_WATER = 256 * 1024
# Bytes a gathering channel holds before :meth:`Channel.drain` hands them on.
_GATHER_BYTES = 64 * 1024
# The fields llhttp reads a message's Connection options from (keep-alive, close, upgrade).
_CONNECTION_FIELDS = frozenset({b"connection", b"proxy-connection"})


@dataclass(slots=True)
class Head:
    """A request or response line and its fields, in their order; names lower-cased unless
    the channel keeps them as sent."""

    method: bytes = b""  # requests
    target: bytes = b""
    status: int = 0  # responses
    reason: bytes = b""
    headers: Headers = field(default_factory=list)
    version: str = "1.1"
    keep_alive: bool = True
    framing: Framing = "none"  # how the body that follows is delimited
    size: int = 0  # about what it took on the wire

    def get(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def get_any_case(self, name: bytes) -> bytes | None:
        """:meth:`get` in a head whose names are kept as they were sent."""
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None


Event = Head | bytes | _Marker


class ProtocolError(Exception):
    """What arrived is not HTTP/1.1 this side will read; ``status`` is the answer to give."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Halt(Exception):
    """Stops the parser after a head whose message has no body however it is framed (the
    answer to a HEAD request)."""


def _request_framing(headers: Headers) -> Framing:
    length = None
    for key, value in headers:  # both fields looked for in one pass
        if key == b"transfer-encoding":
            return "chunked"  # llhttp reads no other coding in a request
        if key == b"content-length" and length is None:
            length = value
    return "length" if length is not None and length.strip() != b"0" else "none"


def _response_framing(status: int, headers: Headers, no_body: bool, folded: bool) -> Framing:
    """RFC 9112, 6.3. (``folded``: the head's field names are lower-cased.)"""
    if no_body or status < 200 or status in (204, 304):
        return "none"
    coding = length = None
    for key, value in headers:  # both fields looked for in one pass, the first of each
        if not folded:
            key = key.lower()
        if key == b"transfer-encoding":
            if coding is None:
                coding = value
        elif key == b"content-length" and length is None:
            length = value
    if coding is not None:
        return "chunked" if coding.rsplit(b",", 1)[-1].strip().lower() == b"chunked" \
            else "close"
    if length is not None:
        return "length" if length.strip() != b"0" else "none"
    return "close"  # a response without a length runs to the end of the connection


class Gathering:
    """The writes of channels held to the end of the loop's turn (see :class:`Channel`'s
    ``gather``), handed on by one callback a turn for all of them: a proxy serving many
    connections schedules one, not one for each connection it answered in that turn.
    ``wanted``, asked as a channel's write begins: whether its writes are held."""

    __slots__ = ("_held", "wanted")

    def __init__(self, wanted: Callable[[], bool]) -> None:
        self.wanted = wanted
        self._held: list[Channel] = []

    def hold(self, channel: Channel) -> None:
        """``channel`` has begun holding writes: it is flushed with the others."""
        if not self._held:
            channel._loop.call_soon(self._flush)
        self._held.append(channel)

    def _flush(self) -> None:
        held, self._held = self._held, []
        for channel in held:
            channel.flush()  # nothing, for one that flushed itself meanwhile (drain, close)


class Channel(asyncio.Protocol):
    """One HTTP/1.1 connection. ``side`` is what the peer sends: ``"request"`` on the
    client side, ``"response"`` on the origin side. ``fold_names`` off: field names are
    kept as sent (a client that records the answer) rather than lower-cased (a proxy that
    passes it on); ``field_overhead``: bytes each field counts for besides its name and
    value, against ``max_head_bytes``.

    ``gather``, asked as a write begins (its ``wanted``): whether what is written leaves at
    the end of the loop's turn, in one write (or once :data:`_GATHER_BYTES` wait, at
    :meth:`drain`), rather than at once (None: never); the channels sharing a
    :class:`Gathering` are flushed together. A proxy serving many connections then
    answers all the requests that came together before the peers it woke take the core:
    they find their answers waiting, rather than being woken, and the proxy preempted,
    once a request. (Serving one, it writes at once: a turn more would cost it a poll.)

    ``made``: told of the channel once its connection is made (a server's, to serve it).
    """

    # Slots, and one class for both sides of the proxy (a server is told of a connection by
    # ``made``, not by a subclass): every read of a field is then specialized once for good.
    # A subclass on one side made each read see two types in turn, and a dictionary of 36
    # fields is past the 30 that share their keys: 35,000 instructions of a proxied request.
    __slots__ = ("_buffered", "_connection", "_deadline", "_drained", "_error", "_events",
                 "_field_overhead", "_fields", "_fold", "_gather", "_gathered",
                 "_gathered_bytes", "_head", "_head_bytes", "_in_head", "_loop", "_made",
                 "_max_head", "_open_body", "_parser", "_paused_reading", "_paused_writing",
                 "_raw", "_reason", "_silence", "_timer", "_unfinished", "_url", "_waiter",
                 "closed", "expect_no_body", "idle", "lost", "received", "reusable", "side",
                 "trailing", "transport", "written")

    def __init__(self, side: Literal["request", "response"], *, max_head_bytes: int,
                 fold_names: bool = True, field_overhead: int = 0,
                 gather: Gathering | None = None,
                 made: Callable[[Channel], None] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._made = made
        self._gather = gather
        self._gathered: list[bytes] = []  # written, to leave at the end of the turn
        self._gathered_bytes = 0
        self._events: collections.deque[Event] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: ProtocolError | None = None
        self._buffered = 0
        self._paused_reading = False
        self._paused_writing = False
        self._drained: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._deadline = 0.0
        self._max_head = max_head_bytes
        self._fold = fold_names
        self._field_overhead = field_overhead
        self._silence: float | None = None  # a wait's time-out is one of silence
        self._head_bytes = 0
        self._unfinished = 0
        self._in_head = False
        self._head = Head()  # the last message's
        self._url = b""
        # the next head's parts as they come: its Head is made once they are all in
        self._reason = b""
        self._fields: Headers = []
        self._connection = False  # the head has a field llhttp reads as Connection
        self._raw = False  # tunnel: bytes pass as they are, unparsed
        self._open_body = False  # a head read whose body has not ended
        self.side = side
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.expect_no_body = False  # response side: the request was HEAD
        self.reusable = True  # response side: can carry another exchange
        # Response side: kept for a next exchange. A byte that comes now was never asked
        # for (a second answer, the start of one): the connection's framing is lost.
        self.idle = False
        self.trailing = b""  # bytes after a CONNECT or Upgrade head
        self.written = 0  # bytes written: whether an answer has begun
        self.received = 0  # bytes received: whether an answer has begun
        self.lost: Exception | None = None  # why the connection went, when not closed
        self._parser: httptools.HttpRequestParser | httptools.HttpResponseParser = (
            httptools.HttpRequestParser(self) if side == "request"
            else httptools.HttpResponseParser(self))

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        if self._made is not None:
            self._made(self)

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        if self.idle:
            self.reusable = False
        if self._silence is not None:
            self._deadline = self._loop.time() + self._silence
        if self._raw:
            self._push(data, len(data))
        elif self._error is None:  # parsed, each event queued by the callbacks below
            try:
                self._parser.feed_data(data)
            except httptools.HttpParserUpgrade as exc:
                # CONNECT, or a request asking to switch protocols: what follows is not HTTP.
                self.trailing = data[int(exc.args[0]):]
                self._raw = True
            except httptools.HttpParserCallbackError as exc:
                if isinstance(exc.__context__, _Halt):
                    self.reusable = False
                    self._raw = True  # anything after is dropped with the connection
                elif isinstance(exc.__context__, ProtocolError):
                    self._fail(exc.__context__)
                else:
                    self._fail(ProtocolError(400 if self.side == "request" else 502, str(exc)))
            except httptools.HttpParserError as exc:
                error = ProtocolError(400 if self.side == "request" else 502, _explain(exc))
                error.__cause__ = exc  # the parser's own words, for a client to report
                self._fail(error)
            else:
                if self._in_head:  # a head still incomplete: bound what the parser may hold
                    self._unfinished += len(data)
                    if self._unfinished > self._max_head + _HIGH_WATER:
                        self._fail(ProtocolError(431, "the header section is too large"))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def eof_received(self) -> bool | None:
        self._finish()
        # A client that has finished sending may still read its answer; the proxy closes
        # client connections itself. (TLS transports to origins ignore the wish.)
        return self.side == "request"

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = exc
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._finish()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _finish(self) -> None:
        if not self._raw and self._head.framing == "close" and not self._in_head \
                and self._head.status and self._error is None and self._open_body:
            self._open_body = False
            self._events.append(END)  # a close-delimited response ends with its connection
        self._events.append(EOF)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- httptools callbacks ---------------------------------------------------------

    def on_message_begin(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        self._unfinished = 0
        self._url = b""
        self._reason = b""
        self._fields = []
        self._connection = False

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > self._max_head:
            raise ProtocolError(414, "the request target is too long")

    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        lower = name.lower()
        self._fields.append((lower if self._fold else name, value))
        if lower in _CONNECTION_FIELDS:
            self._connection = True
        self._head_bytes += len(name) + len(value) + self._field_overhead
        if self._head_bytes > self._max_head:
            raise ProtocolError(431, "the header section is too large")

    def on_headers_complete(self) -> None:
        self._in_head = False
        parser = self._parser
        fields = self._fields
        # llhttp reads HTTP/0.9, 1.0, 1.1 and 2.0 only, and keeps a message alive without a
        # Connection (or Proxy-Connection) field asking for it in 1.1 alone: such a message's
        # version is known without asking the parser, which formats a string each time
        # (2,300 instructions a head, and a proxied request reads two).
        keep_alive = parser.should_keep_alive()
        version = "1.1" if keep_alive and not self._connection else parser.get_http_version()
        # Its size, about what it took on the wire: heads count against the bound on what
        # waits unread too, so that a client pipelining requests it never reads the answers
        # of is stopped like one sending a body nobody reads.
        if self.side == "request":
            target = self._url
            head = self._head = Head(
                parser.get_method(), target, 0, b"", fields,  # type: ignore[union-attr]
                version, keep_alive, _request_framing(fields),
                self._head_bytes + len(target) + 64)
        else:
            status = parser.get_status_code()  # type: ignore[union-attr]
            head = self._head = Head(
                b"", b"", status, self._reason, fields, version, keep_alive,
                _response_framing(status, fields, self.expect_no_body, self._fold),
                self._head_bytes + 64)
        self._events.append(head)
        self._buffered += head.size
        if self._buffered > _HIGH_WATER:
            self._grow(0)
        if self.expect_no_body and head.status >= 200:  # the answer to a HEAD: no body
            self._events.append(END)
            raise _Halt
        self._open_body = head.framing != "none"

    def on_body(self, body: bytes) -> None:
        self._events.append(body)  # _push, without its call: once a body piece
        self._buffered += len(body)
        if self._buffered > _HIGH_WATER:
            self._grow(0)

    def on_message_complete(self) -> None:
        self._open_body = False
        self._in_head = False
        self._events.append(END)

    # -- reading -----------------------------------------------------------------------

    def _push(self, data: bytes, size: int) -> None:
        self._events.append(data)
        self._grow(size)

    def _grow(self, size: int) -> None:
        """``size`` bytes more wait unread: reading pauses past the bound."""
        self._buffered += size
        if self._buffered > _HIGH_WATER and not self._paused_reading and self.transport:
            self._paused_reading = True
            self.transport.pause_reading()

    def _fail(self, error: ProtocolError) -> None:
        self._error = error

    def raw(self) -> None:
        """From now on what arrives is passed on as it is (a tunnel)."""
        self._raw = True

    # raw_mode, at_rest and must_drain are methods, not properties: each is asked once or
    # twice a request, and in Python 3.11 a property's read is never specialized (about
    # 600 instructions more than a method's call).
    def raw_mode(self) -> bool:
        """What arrives is no longer parsed (after CONNECT or an Upgrade request)."""
        return self._raw

    async def next(self, timeout_s: float | None, *, silence: bool = False) -> Event:
        """The next event; ``TimeoutError`` if none comes in ``timeout_s`` (bytes that
        trickle in without making an event do not extend it, unless ``silence``: then the
        time-out is of no byte arriving); None: no time-out."""
        deadline = 0.0
        self._silence = timeout_s if silence else None
        while not self._events:
            if self._error is not None:
                raise self._error
            if self.closed:
                return EOF
            # asyncio's Future made here, not by loop.create_future: uvloop's makes the same
            # one through a call of its own with a keyword (about 270 instructions more a
            # wait, and a proxied request waits twice).
            waiter = self._waiter = asyncio.Future(loop=self._loop)
            if timeout_s is None:
                if self._timer is not None:  # an earlier wait's: it must not end this one
                    self._timer.cancel()
                    self._timer = None
                try:
                    await waiter
                finally:
                    self._waiter = None
                continue
            # One timer per channel, moved only when a wait must end sooner than it rings:
            # a busy connection does not arm and cancel a timer per message.
            if not deadline:
                deadline = self._deadline = self._loop.time() + timeout_s
            if self._timer is None or deadline < self._timer.when():
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = self._loop.call_at(deadline, self._ring)
            try:
                await waiter
            finally:
                self._waiter = None
        return self.poll()  # type: ignore[return-value]

    def poll(self) -> Event | None:
        """The next event if one is here already, else None (then :meth:`next` waits)."""
        if not self._events:
            return None
        event = self._events.popleft()
        size = len(event) if type(event) is bytes else \
            event.size if type(event) is Head else 0
        if size:
            self._buffered -= size
            if self._paused_reading and self._buffered <= _HIGH_WATER // 2 \
                    and self.transport is not None:
                self._paused_reading = False
                self.transport.resume_reading()
        return event

    def take_end(self) -> bool:
        """Reads :data:`END` when it is the next event (a message without a body, read
        whole), without the step :meth:`next` is: whether it was."""
        events = self._events
        if events and events[0] is END:
            events.popleft()
            return True
        return False

    def _ring(self) -> None:
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # no wait in progress: the next one arms the timer again
        if self._loop.time() >= self._deadline:
            waiter.set_exception(TimeoutError())
        else:
            self._timer = self._loop.call_at(self._deadline, self._ring)

    def pending(self) -> bool:
        """Events wait to be read (another pipelined request, say)."""
        return bool(self._events)

    def at_rest(self) -> bool:
        """Between messages: nothing unread, no part of a next message come, no error."""
        return not self._events and not self._in_head and self._error is None

    # -- writing -----------------------------------------------------------------------

    def write(self, data: bytes | bytearray) -> None:
        if self.transport is not None and not self.closed:
            self.written += len(data)
            if not self._gathered:
                gather = self._gather
                if gather is None or not gather.wanted():
                    self.transport.write(data)
                    return
                gather.hold(self)
            self._gathered.append(bytes(data) if type(data) is not bytes else data)
            self._gathered_bytes += len(data)

    def flush(self) -> None:
        """What was gathered goes to the transport now (see ``gather``)."""
        gathered = self._gathered
        if not gathered:
            return
        self._gathered = []
        self._gathered_bytes = 0
        if self.transport is not None and not self.closed:
            self.transport.write(gathered[0] if len(gathered) == 1 else b"".join(gathered))

    def must_drain(self) -> bool:
        """Whether :meth:`drain` has anything to do (wait, hand gathered bytes on, or raise
        for a closed connection): a caller skips its step (a coroutine) when it has not."""
        return self._paused_writing or self.closed or self._gathered_bytes > _GATHER_BYTES

    async def drain(self) -> None:
        if self._gathered_bytes > _GATHER_BYTES:
            self.flush()  # then the transport's own buffer says whether to wait
        if self.closed:
            raise ConnectionResetError("the connection is closed")
        if self._paused_writing:
            self._drained = self._loop.create_future()
            await self._drained
            if self.closed:
                raise ConnectionResetError("the connection is closed")

    def write_eof(self) -> None:
        self.flush()
        if self.transport is not None and not self.closed and self.transport.can_write_eof():
            self.transport.write_eof()

    def close(self) -> None:
        self.flush()
        if self.transport is not None:
            self.transport.close()
        self.closed = True


class Pool:
    """Kept-alive channels to origins, the last kept the first reused. ``idle_s``: a channel
    kept longer is closed rather than reused (None: kept until its peer closes it);
    ``max_per_origin``: past it, a channel is closed rather than kept."""

    def __init__(self, *, idle_s: float | None = None, max_per_origin: int | None = None
                 ) -> None:
        self._idle: dict[Origin, list[tuple[float, Channel]]] = {}
        self._idle_s = idle_s
        self._max = max_per_origin
        self._swept = time.monotonic()

    def _usable(self, channel: Channel, since: float, now: float) -> bool:
        # A byte that came while it was kept was never asked for: its framing is lost.
        return channel.reusable and not channel.closed and channel.at_rest() and (
            self._idle_s is None or now - since < self._idle_s)

    def take(self, origin: Origin) -> Channel | None:
        """A kept channel to ``origin`` that can carry an exchange, if there is one."""
        idle = self._idle.get(origin)
        if not idle:
            return None
        idle_s = self._idle_s
        now = time.monotonic() if idle_s is not None else 0.0
        while idle:
            since, channel = idle.pop()
            channel.idle = False
            # _usable's test, written out: a request to an origin takes one channel
            if channel.reusable and not channel.closed and channel.at_rest() and (
                    idle_s is None or now - since < idle_s):
                return channel
            channel.close()
        return None

    def put(self, origin: Origin, channel: Channel) -> None:
        """Keeps ``channel``, between two exchanges, for the next to ``origin``; closes it
        when it cannot carry one or ``origin`` has its fill."""
        now = time.monotonic() if self._idle_s is not None else 0.0
        if channel.reusable and not channel.closed and channel.at_rest():
            idle = self._idle.setdefault(origin, [])
            if self._max is None or len(idle) < self._max:
                channel.idle = True
                idle.append((now, channel))
            else:
                channel.close()
        else:
            channel.close()
        if self._idle_s is not None:
            self.sweep(now)

    def sweep(self, now: float | None = None) -> None:
        """Closes the channels kept too long, now and then: they do not pile up, origins
        apart."""
        if self._idle_s is None:
            return
        if now is None:
            now = time.monotonic()
        if now - self._swept <= self._idle_s / 3:
            return
        self._swept = now
        for origin, idle in list(self._idle.items()):
            kept = []
            for since, channel in idle:
                if self._usable(channel, since, now):
                    kept.append((since, channel))
                else:
                    channel.close()
            if kept:
                self._idle[origin] = kept
            else:
                del self._idle[origin]

    def drop(self, origin: Origin) -> None:
        """Closes the channels kept to ``origin``."""
        for _, channel in self._idle.pop(origin, ()):
            channel.close()

    def close(self) -> None:
        for idle in self._idle.values():
            for _, channel in idle:
                channel.close()
        self._idle.clear()


def _explain(exc: httptools.HttpParserError) -> str:
    text = str(exc)
    if "Content-Length" in text and "Transfer-Encoding" in text:
        return ("both Content-Length and Transfer-Encoding: refused (request smuggling)")
    if "Content-Length" in text:
        return f"{text}: refused (request smuggling)"
    return f"not HTTP/1.1: {text}"


# A head's lines are joined by CRLF, each field's name and value by ": " (its join of the
# (name, value) pair), and the head ends with an empty line: no Python step per field, nor a
# % per field (a % parses its template each time: 2,500 instructions of a five-field head).
# A proxied request writes two heads.
_CRLF = b"\r\n"
_FIELD_JOIN = b": ".join


def response_head(status: int, reason: bytes, headers: Headers) -> bytes:
    start = _STATUS_STARTS.get(status) or b"HTTP/1.1 %d " % status
    return _CRLF.join([start + (reason or _REASONS.get(status, b"")),
                       *map(_FIELD_JOIN, headers), _CRLF])


def request_head(method: bytes, target: bytes, headers: Headers) -> bytes:
    return _CRLF.join([b"%s %s HTTP/1.1" % (method, target), *map(_FIELD_JOIN, headers),
                       _CRLF])


def frame(piece: bytes, chunked: bool) -> bytes:
    """A body piece as it goes on the wire."""
    if not chunked:
        return piece
    return b"%x\r\n%s\r\n" % (len(piece), piece) if piece else b""


LAST_CHUNK: Final = b"0\r\n\r\n"

# Every status's reason phrase (RFC 9110, 15), the newer names where they changed.
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
_REASONS.update({413: b"Content Too Large", 422: b"Unprocessable Content"})
# Their status lines' starts, made once: a response's line is then a look-up and a join, not
# a % that parses its template each time (little more than half the time; every response
# written has one).
_STATUS_STARTS = {status: b"HTTP/1.1 %d " % status for status in _REASONS}

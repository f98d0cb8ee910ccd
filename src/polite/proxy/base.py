"""What the proxy's parts share: its settings, the refusals it answers itself, the checks a
proxied request and a tunnel both pass, and the wait for a host's slot (``wait`` and
``ordered`` modes)."""

from __future__ import annotations

import abc
import asyncio
import base64
import binascii
import enum
import functools
import math
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from polite.core.access import token_matches
from polite.core.cache.policy import Choice
from polite.core.politeness import Allowed
from polite.errors import PrivateAddress
from polite.fetch.activity import Watch
from polite.fetch.politeness import Answer, Politeness, message
from polite.fetch.robots import PublicHosts, split_origin
from polite.fetch.wire import (
    END,
    Channel,
    Gathering,
    Head,
    Headers,
    Origin,
    ProtocolError,
    response_head,
)

__all__ = ["MAX_REQUEST_WAIT_S", "Mode", "ProxyBase", "ProxySettings"]

Message = MutableMapping[str, Any]
ASGIApp = Callable[[Message, Callable[[], Awaitable[Message]],
                    Callable[[Message], Awaitable[None]]], Awaitable[None]]
Key = Origin  # scheme, host, port: what upstream connections are kept by

# RFC 9110, 7.6.1: hop-by-hop fields, never forwarded (plus those named in Connection).
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                         b"transfer-encoding", b"upgrade", b"proxy-authorization",
                         b"proxy-authenticate"})
_VIA = b"1.1 polite"
# The longest wait a request may ask for with X-Polite-Timeout.
MAX_REQUEST_WAIT_S = 3600.0
_CHUNKED = (b"transfer-encoding", b"chunked")
_CLOSE = (b"connection", b"close")
_FRAMING = frozenset({b"content-length"})  # kept whatever Connection names
# The fields a request sets its mode and longest wait with (looked for in one pass, not by a
# Head.get of each: 2,000 instructions of every proxied request).
_ASKING = frozenset({b"x-polite-mode", b"x-polite-timeout"})



class Verdict(NamedTuple):
    """A decision as the proxy answers it: 403 when waiting will not change it
    (``retry_ms`` -1), else 429 with Retry-After; ``text`` the body's words."""

    allowed: bool
    cause: str
    retry_ms: int
    text: str | None
    grant: int = 0  # the slot given (Answer.grant): asked of again as the request leaves

    @classmethod
    def of(cls, found: Answer) -> Verdict:
        if type(found.decision) is Allowed:  # what the general way below makes of every yes
            return _GO._replace(grant=found.grant) if found.grant else _GO
        wait_s = found.wait_s
        return cls(found.allowed, found.cause,
                   -1 if wait_s is None else max(0, math.ceil(wait_s * 1000)), message(found))

    @property
    def status(self) -> int:
        return 403 if self.retry_ms < 0 else 429

_GO = Verdict(True, "allowed", -1, None)


class Mode(enum.StrEnum):
    """What happens to a request whose host's slot is taken."""

    REJECT = "reject"  # seed 001: 429 with Retry-After
    WAIT = "wait"  # hold it until the slot, up to ProxySettings.max_wait_s
    ORDERED = "ordered"  # wait, and answer one client's requests in the order they came


# Mode's members as module names, for the tests every request makes: in Python 3.11 an
# attribute of an Enum class is read through EnumType's __getattr__ hook, about 850
# instructions a read (two of a cache hit, three of a miss).
_REJECT: Final = Mode.REJECT
_ORDERED: Final = Mode.ORDERED

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
    # A token every proxied request and tunnel must bring in Proxy-Authorization (Basic
    # with it as the password, as a proxy URL's http://:TOKEN@host:port sends it, or
    # Bearer); None: the proxy is open (polite serve on loopback).
    token: str | None = field(default=None, repr=False)


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



# A client sends the same User-Agent with each request: its token is read once. The
# values kept are bounded by the request head's size (64 KiB by default): 2 MiB at most.
@functools.lru_cache(maxsize=32)
def _product_token(user_agent: bytes | None) -> str | None:
    """``Mozilla/5.0 (compatible; ExampleBot/1.0)`` -> ``Mozilla``; a bare token as is."""
    if not user_agent:
        return None
    token = user_agent.decode("latin-1").strip().split("/", 1)[0].split(" ", 1)[0]
    # interned: a robots.txt's matcher knows the agent it answered last by its identity
    return sys.intern(token) if token else None


def _read_fields(headers: Headers) -> tuple[bytes | None, bytes | None, bool, bool]:
    """What a proxied request's fields say to the proxy, read in one pass: its Via and
    User-Agent (the first of each), whether it asks for a mode or a wait (X-Polite-Mode,
    X-Polite-Timeout) and whether it names a purpose (X-Polite-Purpose). A Head.get of
    each and a pass of :meth:`ProxyBase._asked`'s own were 2,000 instructions of a
    request, and the usual one asks nothing."""
    via = user_agent = None
    asks = names_purpose = False
    for name, value in headers:
        if name == b"via":
            if via is None:
                via = value
        elif name == b"user-agent":
            if user_agent is None:
                user_agent = value
        elif name in _ASKING:
            asks = True
        elif name == b"x-polite-purpose":
            names_purpose = True
    return via, user_agent, asks, names_purpose


def _expects_continue(request: Head) -> bool:
    """The client waits for ``100 Continue`` before it sends the body."""
    if request.framing == "none":  # no body to wait for (a GET): no field to look for
        return False
    expect = request.get(b"expect")
    return expect is not None and expect.strip().lower() == b"100-continue"


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


def _proxy_credential(value: bytes | None) -> bytes | None:
    """The token a ``Proxy-Authorization`` field carries: Basic's password (whatever the
    user name) or Bearer's; None when there is none."""
    if value is None:
        return None
    scheme, _, rest = value.strip().partition(b" ")
    rest = rest.strip()
    if scheme.lower() == b"bearer":
        return rest
    if scheme.lower() == b"basic":
        try:
            pair = base64.b64decode(rest, validate=True)
        except (binascii.Error, ValueError):
            return None
        _, colon, password = pair.partition(b":")
        return password if colon else None
    return None


def _forwardable(headers: Headers, dropped: frozenset[bytes] = _HOP_BY_HOP,
                 own: bytes = b"") -> Headers:
    """The fields of ``headers`` that go on to the next hop: none of ``dropped`` (the hop's
    own by default), Connection and the fields it names, nor, with ``own``, any whose name
    starts with it."""
    # One pass that keeps each field's own pair: not a search for Connection and then a
    # comprehension, which in Python 3.11 is a function made and called, with a cell for
    # each name it reads, and a pair made again for each field (twice a proxied request).
    kept: Headers = []
    connection = False
    for pair in headers:
        key = pair[0]
        if key == b"connection":
            connection = True
        elif key not in dropped and not (own and key.startswith(own)):
            kept.append(pair)
    return _without_named(kept, headers) if connection else kept


def _without_named(kept: Headers, headers: Headers) -> Headers:
    """``kept`` without the fields named in the Connection fields of ``headers``."""
    # A field named in Connection is the hop's own, except Content-Length: dropping it while
    # the body still goes on would leave the next hop to frame the message by itself (a
    # request without its length is a request with no body, the body then a second request
    # the checks never saw; a response without it runs to the close).
    named = {n.strip().lower() for key, value in headers if key == b"connection"
             for n in value.split(b",")} - _FRAMING
    return [pair for pair in kept if pair[0] not in named]


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
    watch: Watch  # what the dashboard and /trace see of it
    via: bytes | None = None  # the request's Via field, read once
    user_agent: bytes | None = None  # its User-Agent field, read once
    names_purpose: bool = False  # it has an X-Polite-Purpose field
    purpose: str | None = None  # what it is for (asked_purpose), once it is read
    choice: Choice | None = None
    # what became of it, for the trace
    decision: str = "allowed"
    status: int = 0
    held_ms: int = 0
    grant: int = 0  # the host's slot it was given (0: none to keep, no delay)


class ProxyBase(abc.ABC):
    """The state and the steps every kind of request takes (see :mod:`polite.proxy.server`
    for the whole)."""

    _politeness: Politeness
    _guard: PublicHosts
    # a host's address when the guard is not asked (private addresses allowed); None: the
    # system's resolver, by the name
    _resolve: Callable[[str], Awaitable[str]] | None = None
    settings: ProxySettings
    stats: dict[str, int]
    _addresses: set[tuple[str, int]]
    _host_turns: dict[str, tuple[asyncio.Lock, int]]
    _connections: int  # client connections open
    _gathering: Gathering  # the writes of every connection, held by _serves_many

    def _serves_many(self) -> bool:
        """Whether a connection's writes wait for the end of the loop's turn (see
        :class:`~polite.fetch.wire.Channel`): while other clients are connected, whose
        requests may come in the same turn."""
        return self._connections > 1

    @abc.abstractmethod
    async def _requests(self, client: Channel, peer: tuple[Any, ...],
                        tunnel: bytes = b"", defaults: Headers | None = None,
                        address: str | None = None) -> None:
        """Serves the requests of one connection (the host's, :mod:`polite.proxy.server`)."""

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

    def _answered_at_once(self, client: Channel, head: Head) -> bool:
        """:meth:`_answered` without its steps (three coroutines), for the usual request: no
        body, its end read already, nothing to wait for. False: not answered so, ask
        :meth:`_answered`."""
        return head.framing == "none" and not client.must_drain() and client.take_end()

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


    async def _admit(self, client: Channel, host: str, head: Head, verb: str, *,
                     checked: bool = False, address: str | None = None
                     ) -> tuple[Mode, float, str | None] | bool | None:
        """The checks a proxied request and a tunnel share: no private or loopback target
        unless allowed (403), a name that resolves (502), and a mode and timeout that can
        be read (400). The mode, the longest wait and the address to connect to (None: the
        name, private addresses allowed; ``address`` when ``checked``); else, once the
        refusal is sent, whether the connection goes on (None: it ends). With a token
        (:attr:`ProxySettings.token`), a request that does not bring it is answered 407."""
        token = self.settings.token
        if not checked and token is not None:
            given = _proxy_credential(head.get(b"proxy-authorization"))
            if given is None or not token_matches(given, token):
                tunnel = verb == "tunnel"
                self._send_error(client, 407, "this proxy needs its token: "
                                 "Proxy-Authorization: Basic (the token as the password, "
                                 "as http://:TOKEN@host:port sends it) or Bearer",
                                 [(b"proxy-authenticate", b'Basic realm="polite"')],
                                 close=tunnel)
                return None if tunnel else await self._answered(client, head)
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

    def _asked(self, head: Head, asks: bool = True) -> tuple[Mode, float] | str:
        """The mode and the longest wait a request asks for (X-Polite-Mode,
        X-Polite-Timeout), or what is wrong with them; ``asks`` False: it has neither field
        (:func:`_read_fields` found none)."""
        if asks:
            for name, _ in head.headers:  # one pass: the usual request asks for neither
                if name in _ASKING:
                    break
            else:
                asks = False
        if not asks:
            return self.settings.mode, self.settings.max_wait_s
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


    def _refuse(self, client: Channel, verdict: Verdict) -> None:
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
                       wait_s: float | None = None,
                       split: tuple[str, str] | None = None) -> Verdict:
        """The answer to ``url``'s request in ``mode`` (``split``: ``split_origin(url)``,
        when the caller has it already)."""
        if mode is _REJECT:
            return Verdict.of(await self._politeness.check_one(url, reserve=True,
                                                               agent=agent, split=split))
        deadline = time.monotonic() + (self.settings.max_wait_s if wait_s is None else wait_s)
        # Requests waiting for one host are served first come, first served, whatever
        # connection they came on: an asyncio.Lock wakes its waiters in order, so a request
        # is never overtaken by a later one.
        host = split_origin(url)[1]
        turn, waiting = self._host_turns.get(host) or (asyncio.Lock(), 0)
        self._host_turns[host] = (turn, waiting + 1)
        try:
            try:
                await asyncio.wait_for(turn.acquire(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return await self._still_queued(url, agent, host, wait_s)
            try:
                while True:
                    verdict = Verdict.of((await self._politeness.check(
                        [url], reserve=True, agent=agent))[0])
                    if verdict.allowed or verdict.retry_ms < 0:
                        return verdict
                    pause_s = verdict.retry_ms / 1000
                    if time.monotonic() + pause_s > deadline:
                        return verdict
                    await asyncio.sleep(pause_s)
            finally:
                turn.release()
        finally:
            _, waiting = self._host_turns[host]
            if waiting == 1:
                del self._host_turns[host]
            else:
                self._host_turns[host] = (turn, waiting - 1)

    async def _still_queued(self, url: str, agent: str | None, host: str,
                            wait_s: float | None) -> Verdict:
        """The answer to a request whose wait ran out behind earlier ones to its host."""
        verdict = Verdict.of((await self._politeness.check([url], agent=agent))[0])
        if verdict.retry_ms < 0 and not verdict.allowed:
            return verdict
        waited = self.settings.max_wait_s if wait_s is None else wait_s
        return verdict._replace(
            allowed=False, retry_ms=max(verdict.retry_ms, 1000),
            text=f"earlier requests to {host} are still waiting for its slot; this one "
                 f"waited {waited:g} s behind them (--max-wait-s)")


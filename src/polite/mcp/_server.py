"""The MCP server: the ``fetch`` and ``may_fetch`` tools, the ``robots`` resource and the
``fetch`` prompt on the official MCP SDK, over stdio or streamable HTTP, and the wiring of
the store, the guard, the client and the politeness driver they share."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import socket
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, cast

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from polite.clock import WallClock
from polite.core.robots.lifecycle import FetchPolicy, UnauthorizedMeans
from polite.fetch.http import RequestHeaders
from polite.fetch.politeness import Politeness
from polite.fetch.robots import Network, PublicHosts, RobotsFetcher, create_client
from polite.mcp._fetch import FetchSettings, Given, NotGiven, PoliteFetch
from polite.storage import is_redis_store, open_store

if TYPE_CHECKING:  # the identity extra is needed only to sign
    from polite.identity.signatures import RequestSigner

__all__ = ["ServerOptions", "create_server", "open_fetch", "serve_http", "serve_stdio",
           "user_agent"]

# Processes sharing a store claim each host's delay this much longer (as the crawl's
# workers do): a request that leaves up to this late after its slot still keeps the delay
# at the site, whichever process sent the one before it.
SHARED_SEND_SLACK_S = 0.1
# Pages given lately, kept for the next part of a long one (start_index): asking for the
# rest of a page is not a new request to its site.
KEPT_PAGES = 32
KEPT_FOR_S = 300.0
# Where a webmaster reads what the agent is (its documentation: the how-to of polite mcp).
DOCS = "https://pypi.org/project/polite-web/"

FETCH_DESCRIPTION = (
    "Fetches a URL from the internet and extracts its readable content as markdown, "
    "politely: the site's robots.txt, its delays between requests (kept across every "
    "agent sharing this server's store) and its AI-usage preferences are obeyed, and every "
    "answer says why. A refusal names the robots.txt rule and line, or the preference and "
    "its source, that refused it; when the site asks for a pause the answer says when to "
    "try again instead of waiting.")
MAY_FETCH_DESCRIPTION = (
    "Says whether a URL may be fetched now, without fetching it (only its site's "
    "robots.txt is read): allowed, wait (with the seconds to wait), disallowed or refused, "
    "why, and the site's AI-usage preferences.")


def user_agent(agent: str, version: str) -> str:
    """The User-Agent every request carries: the product token, polite's version and
    where to read of it."""
    return f"{agent}/{version} (polite mcp, an AI agent's polite fetch; +{DOCS})"


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """What the wiring needs besides :class:`FetchSettings` (``polite mcp``'s options)."""

    store: str = "memory://"
    allow_private: bool = False
    allow_networks: tuple[Network, ...] = ()
    default_delay_s: float = 1.0
    max_crawl_delay_s: float = 60.0
    on_401_403: str = "disallow"
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    user_agent: str = ""  # the User-Agent header (default: the agent's token)
    signer: RequestSigner | None = field(default=None)


@asynccontextmanager
async def open_fetch(settings: FetchSettings, options: ServerOptions
                     ) -> AsyncIterator[PoliteFetch]:
    """The fetcher of a server: its store (shared with any process that opens the same
    one), the private-address guard, one HTTP client (signing when ``options.signer``),
    the robots.txt fetcher and the politeness driver."""
    clock = WallClock()  # comparable between processes that share a SQLite file
    store = open_store(options.store, clock, knob="--store")
    try:
        hosts = PublicHosts(clock, allowed=options.allow_networks)
        agent_header = options.user_agent or settings.agent
        client = create_client(guard=None if options.allow_private else hosts,
                               connect_timeout_s=options.connect_timeout_s,
                               read_timeout_s=options.read_timeout_s,
                               headers=RequestHeaders(agent_header),
                               sign=None if options.signer is None else options.signer.headers)
        policy = FetchPolicy(unauthorized=UnauthorizedMeans(options.on_401_403))
        robots = RobotsFetcher(client, store, clock, agent=settings.agent, policy=policy,
                               allow_private=options.allow_private, public_hosts=hosts)
        shared = is_redis_store(store) or options.store.startswith("sqlite:")
        politeness = Politeness(robots, store, clock, agent=settings.agent,
                                default_delay_s=options.default_delay_s,
                                max_crawl_delay_s=options.max_crawl_delay_s,
                                allow_private=options.allow_private, public_hosts=hosts,
                                private_hint="--allow-private or --allow-network",
                                send_slack_s=SHARED_SEND_SLACK_S if shared else 0.0)
        try:
            yield PoliteFetch(politeness, robots, client, settings, user_agent=agent_header,
                              host_leases=shared)
        finally:
            await client.aclose()
    finally:
        await store.close()


class _Kept:
    """The pages given lately (bounded in number and age), so that the rest of a long page
    is read from here, not asked of its site again."""

    def __init__(self) -> None:
        self._pages: OrderedDict[str, tuple[float, Given]] = OrderedDict()

    def get(self, url: str) -> tuple[float, Given] | None:
        found = self._pages.get(url)
        if found is None or time.monotonic() - found[0] > KEPT_FOR_S:
            return None
        return found

    def put(self, url: str, page: Given) -> None:
        self._pages.pop(url, None)
        self._pages[url] = (time.monotonic(), page)
        while len(self._pages) > KEPT_PAGES:
            self._pages.popitem(last=False)


def _part(page: Given, max_length: int, start_index: int) -> str:
    """The reference server's pagination: ``max_length`` characters from ``start_index``,
    with the ``start_index`` to go on from when more is left."""
    content = page.content
    if start_index >= len(content):
        return "<error>No more content available.</error>"
    part = content[start_index:start_index + max_length]
    if len(part) == max_length and start_index + max_length < len(content):
        part += (f"\n\n<error>Content truncated. Call the fetch tool with a start_index of "
                 f"{start_index + max_length} to get more content.</error>")
    return part


def _notes(agent: str, purpose: str, notes: tuple[str, ...], *, head: str) -> str:
    lines = [f"<polite agent=\"{agent}\" purpose=\"{purpose}\">", head]
    lines += [f"- {note}" for note in notes]
    lines.append("</polite>")
    return "\n".join(lines)


def render_given(fetcher: PoliteFetch, asked: str, page: Given, max_length: int,
                 start_index: int, *, kept_s: float | None = None) -> str:
    """A page as the agent reads it: the reference server's text, then why it was given."""
    settings = fetcher.settings
    head = f"fetched {page.url} (HTTP {page.status})" + (
        "" if page.url == asked else f", reached from {asked}")
    if kept_s is not None:
        head += f"; the copy fetched {kept_s:.0f} s ago (not asked of the site again)"
    return (f"{page.prefix}Contents of {asked}:\n{_part(page, max_length, start_index)}\n\n"
            + _notes(fetcher.agent, settings.purpose, page.notes, head=head))


def render_refusal(fetcher: PoliteFetch, asked: str, refused: NotGiven) -> str:
    """Why nothing was given, and when to ask again if that may help."""
    lines = [f"{fetcher.agent} did not fetch {asked}: {refused.why}"]
    if refused.retry_after_s is not None:
        lines.append(f"Retry after {refused.retry_after_s:.1f} s (at {refused.retry_at}).")
    else:
        lines.append("Asking again will not change this answer; the assistant must tell the "
                     "user that the page could not be read, and why.")
    return "\n".join(lines) + "\n" + _notes(fetcher.agent, fetcher.settings.purpose,
                                             refused.notes, head="not fetched")


def create_server(fetcher: PoliteFetch, *, version: str = "") -> MCPServer:
    """The MCP server over ``fetcher``: tools ``fetch`` and ``may_fetch``, the resource
    ``robots://{scheme}/{host}`` and the prompt ``fetch``; ``version``: polite's."""
    server = MCPServer("polite-mcp", version=version, log_level="WARNING",
                       instructions="Fetch web pages with the fetch tool: it obeys each "
                                    "site's robots.txt, delays and AI-usage preferences, "
                                    "and says why when it does not fetch.")
    kept = _Kept()
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                                idempotent_hint=True, open_world_hint=True)

    @server.tool(name="fetch", description=FETCH_DESCRIPTION, annotations=read_only,
                 structured_output=False)
    async def fetch(
        url: Annotated[str, Field(description="URL to fetch")],
        max_length: Annotated[int, Field(description="Maximum number of characters to "
                                         "return.", ge=1, le=999_999, strict=True)] = 5000,
        start_index: Annotated[int, Field(
            description="On return output starting at this character index, useful if a "
                        "previous fetch was truncated and more context is required.",
            ge=0, strict=True)] = 0,
        raw: Annotated[bool, Field(description="Get the actual HTML content of the "
                                   "requested page, without simplification.",
                                   strict=True)] = False,
    ) -> str:
        key = f"{int(raw)} {url}"
        found = kept.get(key) if start_index else None
        if found is not None:
            return render_given(fetcher, url, found[1], max_length, start_index,
                                kept_s=time.monotonic() - found[0])
        outcome = await fetcher.fetch(url, raw=raw)
        if isinstance(outcome, NotGiven):
            raise ToolError(render_refusal(fetcher, url, outcome))
        kept.put(key, outcome)
        return render_given(fetcher, url, outcome, max_length, start_index)

    @server.tool(name="may_fetch", description=MAY_FETCH_DESCRIPTION, annotations=read_only)
    async def may_fetch(url: Annotated[str, Field(description="URL to ask about")]
                        ) -> dict[str, Any]:
        return (await fetcher.may_fetch(url)).to_json()

    @server.resource("robots://{scheme}/{host}", name="robots",
                     description="A site's robots.txt as this server reads it for its agent: "
                                 "the outcome of fetching it, the delay asked, the AI-usage "
                                 "preferences and the file (host may carry :port)",
                     mime_type="text/plain")
    async def robots(scheme: str, host: str) -> str:
        return await fetcher.robots(f"{scheme}://{host}")

    @server.prompt(name="fetch", description="Fetch a URL and extract its contents as "
                   "markdown (a person's own request: robots.txt alone does not refuse it)")
    async def fetch_prompt(url: Annotated[str, Field(description="URL to fetch")]) -> str:
        outcome = await fetcher.fetch(url, person=True)
        if isinstance(outcome, NotGiven):
            return render_refusal(fetcher, url, outcome)
        return render_given(fetcher, url, outcome, len(outcome.content) or 1, 0)

    return server


async def serve_stdio(server: MCPServer) -> None:
    """Serve on standard input and output (what a desktop agent launches)."""
    await server.run_stdio_async()


Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


async def _refuse(send: Send, status: int, text: bytes,
                  field: tuple[bytes, bytes] = (b"connection", b"close")) -> None:
    """Answer ``status`` with ``text`` before the app sees the request."""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), field]})
    await send({"type": "http.response.body", "body": text})


def _with_token(app: App, token: str) -> App:
    """``app`` answering only requests that carry ``Authorization: Bearer TOKEN``."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                await _refuse(send, 401, b"polite mcp: Authorization: Bearer TOKEN is "
                              b"required\n", (b"www-authenticate", b"Bearer"))
                return
        await app(scope, receive, send)

    return guarded


# The largest request body read: an agent's message is a tool call of a few hundred bytes
# (the MCP SDK reads whatever it is sent into memory, and parses it whole).
MAX_MESSAGE_BYTES = 1024 * 1024
_TOO_LARGE = f"polite mcp: a message is {MAX_MESSAGE_BYTES} bytes at most\n".encode()
_TOO_SLOW = b"polite mcp: the message's body did not come in time\n"


def _bounded(app: App, read_s: float, max_bytes: int = MAX_MESSAGE_BYTES) -> App:
    """``app`` given request bodies of ``max_bytes`` at most, read whole within ``read_s``
    before it runs: a larger one (by its Content-Length, or as it arrives) is answered 413
    and never kept whole, a slower one 408."""

    async def bounded(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > max_bytes:
            await _refuse(send, 413, _TOO_LARGE)
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(read_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # the client went away
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > max_bytes:
                        await _refuse(send, 413, _TOO_LARGE)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _refuse(send, 408, _TOO_SLOW)
            return
        pending: list[MutableMapping[str, Any]] = [
            {"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> MutableMapping[str, Any]:
            return pending.pop() if pending else await receive()

        await app(scope, replay, send)

    return bounded


# A connection closed with a request's body unread (a 413 or 408 answered first) is closed
# for writing, and what the client still sends is read and dropped, up to these bounds,
# before it is closed for good: closed at once, the kernel answers the unread bytes with a
# reset, which a client still sending its body meets before it reads the answer.
LINGER_S = 2.0
LINGER_BYTES = 4 * MAX_MESSAGE_BYTES


class _Lingering:
    """A transport whose ``close()``, while a request's body is unread (``unread()``),
    ends the writing side once the answer has been sent, and closes the connection when
    the client has closed its side, or at the bounds (:data:`LINGER_S`,
    :data:`LINGER_BYTES`); the bytes read meanwhile are dropped. Otherwise it closes at
    once (an idle connection, a head that did not come, the server stopping)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                 unread: Callable[[], bool]) -> None:
        self._transport = transport
        self._loop = loop
        self._unread = unread
        self._closing = False
        self._dropped = 0
        self._timer: asyncio.TimerHandle | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    @property
    def lingering(self) -> bool:
        return self._closing and not self._transport.is_closing()

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        transport = self._transport
        if transport.is_closing() or not transport.can_write_eof() or not self._unread():
            transport.close()
            return
        transport.write_eof()  # after what is buffered, the answer
        transport.resume_reading()
        self._timer = self._loop.call_later(LINGER_S, self.end)

    def drop(self, data: bytes) -> None:
        self._dropped += len(data)
        if self._dropped > LINGER_BYTES:
            self.end()

    def end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._transport.close()


def _head_timed(read_s: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 connection, closed when a request's head has not come whole
    within ``read_s`` of the connection's start or of the last answer: uvicorn's own
    keep-alive timeout ends once a byte arrives, so a client could otherwise hold a
    connection open for ever, a byte of a head at a time. A connection closed with a
    request's body unread lingers (:class:`_Lingering`), so its answer is read."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadTimed(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _lingering: _Lingering  # made with the connection

        def _await_head(self) -> None:
            if self._head_timer is None and self.conn.their_state is h11.IDLE:
                self._head_timer = self.loop.call_later(read_s, self._head_late)

        def _head_came(self) -> None:
            if self._head_timer is not None and self.conn.their_state is not h11.IDLE:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self._lingering = _Lingering(transport, self.loop,
                                         lambda: self.conn.their_state is h11.SEND_BODY)
            super().connection_made(cast(asyncio.Transport, self._lingering))
            self._await_head()

        def data_received(self, data: bytes) -> None:
            if self._lingering.lingering:
                self._lingering.drop(data)
                return
            super().data_received(data)
            self._head_came()

        def eof_received(self) -> None:
            if self._lingering.lingering:
                self._lingering.end()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._head_came()
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._lingering.lingering:
                self._lingering.end()
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

    return HeadTimed


async def serve_http(server: MCPServer, host: str, port: int, *, token: str | None,
                     client_read_s: float) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` (``token``: asked of every
    request, before its body is read; ``client_read_s``: the time a request's head, and
    then its body, has to come whole); the address it listens on is written to standard
    error once it does."""
    import uvicorn

    app: App = _bounded(server.streamable_http_app(host=host), read_s=client_read_s)
    if token:
        app = _with_token(app, token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(2048)  # so that a client reading the line below finds it listening
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    config = uvicorn.Config(app, log_level="warning", lifespan="on",
                            http=_head_timed(client_read_s))
    print(f"polite mcp: listening on http://{shown}:{listener.getsockname()[1]}/mcp",
          file=sys.stderr, flush=True)
    with contextlib.closing(listener):
        await uvicorn.Server(config).serve(sockets=[listener])

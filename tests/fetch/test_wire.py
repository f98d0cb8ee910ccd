"""The HTTP/1.1 channel below the proxy and the page client, on real loopback sockets: events,
limits, time-outs and the bound on what is read ahead."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polite.fetch.wire import (
    END,
    EOF,
    Channel,
    Gathering,
    Head,
    Pool,
    ProtocolError,
    request_head,
    response_head,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def pair(side: str = "request", max_head_bytes: int = 4096, *, fold_names: bool = True,
               gather: bool | Gathering = False
               ) -> AsyncIterator[tuple[Channel, asyncio.StreamWriter]]:
    """A channel on the accepting end of a loopback connection, and the other end."""
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[Channel] = loop.create_future()

    def factory() -> Channel:
        channel = Channel(side, max_head_bytes=max_head_bytes,  # type: ignore[arg-type]
                          fold_names=fold_names,
                          gather=Gathering(lambda: True) if gather is True else gather or None)
        if not accepted.done():
            accepted.set_result(channel)
        return channel

    server = await loop.create_server(factory, "127.0.7.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.7.1", port)
    channel = await accepted
    writer.reader = reader  # type: ignore[attr-defined]  # what the channel wrote, to read
    try:
        yield channel, writer
    finally:
        writer.close()
        channel.close()
        server.close()


async def test_made_is_told_of_the_channel_once_its_connection_is_made() -> None:
    near, far = socket.socketpair()
    loop = asyncio.get_running_loop()
    told: list[tuple[Channel, bool]] = []
    _, channel = await loop.connect_accepted_socket(
        lambda: Channel("request", max_head_bytes=1024,
                        made=lambda made: told.append((made, made.transport is not None))),
        near)
    try:
        assert told == [(channel, True)]  # once, with its transport to write to
    finally:
        channel.close()
        far.close()


async def test_a_request_with_a_body_becomes_head_pieces_end() -> None:
    async with pair() as (channel, peer):
        peer.write(b"POST http://a.example/x HTTP/1.1\r\nHost: a.example\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
        head = await channel.next(5)
        assert isinstance(head, Head)
        assert (head.method, head.target, head.framing) == (b"POST", b"http://a.example/x",
                                                           "chunked")
        assert head.get(b"host") == b"a.example"
        body = b""
        while (event := await channel.next(5)) is not END:
            assert isinstance(event, bytes)
            body += event
        assert body == b"abcde"
        peer.close()
        assert await channel.next(5) is EOF


# Messages kept alive, each version with a field that keeps it so between two HTTP/1.1 ones
# without any (whose version is read without asking the parser), then each way a
# connection ends.
_KEPT = [(b"1.1", b""), (b"1.0", b"Connection: keep-alive\r\n"), (b"1.1", b""),
         (b"2.0", b"Proxy-Connection: keep-alive\r\n"), (b"1.1", b""),
         (b"0.9", b"CONNECTION: Keep-Alive\r\n"), (b"1.1", b""),
         (b"1.1", b"Connection: keep-alive\r\n"), (b"1.1", b"")]
_LAST = [(b"1.1", b"Connection: close\r\n"), (b"1.0", b""), (b"2.0", b""), (b"0.9", b""),
         (b"1.0", b"Connection: close\r\n")]


@pytest.mark.parametrize("last", _LAST)
@pytest.mark.parametrize("fold_names", [True, False])
@pytest.mark.parametrize("side", ["request", "response"])
async def test_each_messages_version_is_its_own_whatever_keeps_it_alive(
        side: str, fold_names: bool, last: tuple[bytes, bytes]) -> None:
    """The version each head says, and whether it keeps the connection, message by message
    on one connection."""
    sent = [*_KEPT, last]
    wire = b"".join((b"GET http://a.example/ HTTP/%s\r\nHost: a.example\r\n" if
                     side == "request" else
                     b"HTTP/%s 200 OK\r\nContent-Length: 0\r\n") % version
                    + connection + b"\r\n" for version, connection in sent)
    async with pair(side, fold_names=fold_names) as (channel, peer):
        peer.write(wire)
        read = []
        for _ in sent:
            head = await channel.next(5)
            assert isinstance(head, Head) and await channel.next(5) is END
            read.append((head.version, head.keep_alive))
        assert read == [(version.decode(), (version, connection) != last)
                        for version, connection in sent]


async def test_the_end_of_a_message_is_taken_only_when_it_is_next() -> None:
    async with pair() as (channel, peer):
        peer.write(b"POST http://a.example/x HTTP/1.1\r\nHost: a.example\r\n"
                   b"Content-Length: 2\r\n\r\nab"
                   b"GET http://a.example/y HTTP/1.1\r\nHost: a.example\r\n\r\n")
        assert isinstance(await channel.next(5), Head)
        assert not channel.take_end()  # its body comes first, and is still there
        assert await channel.next(5) == b"ab"
        assert channel.take_end()
        head = await channel.next(5)
        assert isinstance(head, Head) and head.target == b"http://a.example/y"
        assert channel.take_end()
        assert not channel.take_end()  # nothing more: nothing taken
        assert not channel.pending()


@pytest.mark.parametrize(("wire", "status"), [
    (b"GET /x HTTP/1.1\r\nHost: a\r\nX: " + b"y" * 5000 + b"\r\n\r\n", 431),
    (b"GET /" + b"x" * 5000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
    (b"NOT HTTP AT ALL\r\n\r\n", 400),
])
async def test_what_cannot_be_read_gets_its_status(wire: bytes, status: int) -> None:
    async with pair() as (channel, peer):
        peer.write(wire)
        with pytest.raises(ProtocolError) as raised:
            await channel.next(5)
        assert raised.value.status == status


async def test_a_head_that_never_ends_is_cut_off_at_a_bound() -> None:
    async with pair() as (channel, peer):
        peer.write(b"GET /x HTTP/1.1\r\nX: ")
        for _ in range(100):  # one endless header value, 1.6 MB
            peer.write(b"y" * 16384)
        with pytest.raises(ProtocolError) as raised:
            await channel.next(10)
        assert raised.value.status == 431


async def test_bytes_trickling_in_do_not_extend_the_wait() -> None:
    async with pair() as (channel, peer):

        async def trickle() -> None:
            peer.write(b"GET /x HTTP/1.1\r\n")
            for _ in range(30):
                await asyncio.sleep(0.05)
                peer.write(b"X: y\r\n")

        task = asyncio.ensure_future(trickle())
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await channel.next(0.5)
        assert time.monotonic() - started < 1.2
        task.cancel()


async def test_a_wait_of_silence_is_extended_by_each_byte_and_none_has_no_end() -> None:
    async with pair("response") as (channel, peer):

        async def trickle(head: bytes) -> None:
            for at in range(len(head)):
                await asyncio.sleep(0.05)
                peer.write(head[at:at + 1])

        head = b"HTTP/1.1 204 No Content\r\nX: " + b"y" * 12 + b"\r\n\r\n"
        task = asyncio.ensure_future(trickle(head))
        started = time.monotonic()
        answer = await channel.next(0.6, silence=True)  # a byte every 50 ms: never silent
        assert isinstance(answer, Head) and answer.status == 204
        assert time.monotonic() - started > 0.6  # longer than the wait, all told
        assert await channel.next(5) is END
        await task

        async def later(delay_s: float) -> None:
            await asyncio.sleep(delay_s)
            peer.write(b"HTTP/1.1 204 No Content\r\n\r\n")

        # A wait answered early leaves its timer armed; it does not end a later wait that
        # has no time-out.
        task = asyncio.ensure_future(later(0.05))
        assert isinstance(await channel.next(0.5), Head)
        assert await channel.next(5) is END
        task = asyncio.ensure_future(later(0.8))
        assert isinstance(await channel.next(None), Head)


async def test_field_names_may_be_kept_as_sent() -> None:
    async with pair("response", fold_names=False) as (channel, peer):
        peer.write(b"HTTP/1.1 200 OK\r\nContent-LENGTH: 2\r\nX-Mixed: a\r\n\r\nokHTTP/1.1")
        head = await channel.next(5)
        assert isinstance(head, Head) and head.framing == "length"
        assert head.headers == [(b"Content-LENGTH", b"2"), (b"X-Mixed", b"a")]
        assert head.get_any_case(b"x-mixed") == b"a" and head.get(b"x-mixed") is None
        assert await channel.next(5) == b"ok"
        assert await channel.next(5) is END


async def test_reading_stops_while_too_much_waits_unread() -> None:
    """A peer that pipelines requests nobody is answering is not read without bound: its
    writes back up instead."""
    request = b"GET http://a.example/x HTTP/1.1\r\nHost: a.example\r\n\r\n"
    async with pair() as (channel, peer):
        sent = 0

        def stalled() -> bool:
            return peer.transport.get_write_buffer_size() > 0

        for _ in range(2000):
            peer.write(request * 200)  # 10 KB at a time, 20 MB in all
            sent += len(request) * 200
            await asyncio.sleep(0)
            if stalled() and sent > 4 * 1024 * 1024:
                break
        await asyncio.sleep(0.2)
        queued = 0
        while channel.pending():
            event = channel.poll()
            queued += isinstance(event, Head)
        assert queued * len(request) < 1024 * 1024  # it stopped at its bound, not at 20 MB
        assert stalled()


async def test_a_gathering_channel_writes_at_the_end_of_the_turn_and_on_close() -> None:
    async with pair(gather=True) as (channel, peer):
        reader: asyncio.StreamReader = peer.reader  # type: ignore[attr-defined]
        channel.write(b"HTTP/1.1 200 OK\r\n")
        channel.write(bytearray(b"Content-Length: 2\r\n\r\nok"))
        assert channel.written == 40
        assert channel.transport is not None
        assert await reader.readexactly(40) == b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        channel.write(b"bye")
        channel.close()  # what was gathered goes first
        assert await reader.read() == b"bye"


async def test_channels_sharing_a_gathering_write_together_at_the_end_of_the_turn() -> None:
    """One callback a turn hands on what every channel of a Gathering held; one that
    flushed itself meanwhile (closed) is not written twice; while not wanted, a write
    leaves at once."""
    loop = asyncio.get_running_loop()
    scheduled = []
    call_soon = loop.call_soon

    def counted(callback, *args, **kwargs):  # type: ignore[no-untyped-def]
        if getattr(callback, "__self__", None) is gathering:  # not the transports' own
            scheduled.append(callback)
        return call_soon(callback, *args, **kwargs)

    wanted = True
    gathering = Gathering(lambda: wanted)
    async with pair(gather=gathering) as (first, first_peer), \
            pair(gather=gathering) as (second, second_peer):
        loop.call_soon = counted  # type: ignore[method-assign]
        try:
            first.write(b"one")
            second.write(b"two")
            first.write(b"!")
            second.close()  # what it held goes now, and not again with the others
        finally:
            loop.call_soon = call_soon  # type: ignore[method-assign]
        assert len(scheduled) == 1
        assert await first_peer.reader.readexactly(4) == b"one!"  # type: ignore[attr-defined]
        assert await second_peer.reader.read() == b"two"  # type: ignore[attr-defined]
        wanted = False
        first.write(b"now")
        assert first.transport is not None and first.transport.get_write_buffer_size() == 0
        assert await first_peer.reader.readexactly(3) == b"now"  # type: ignore[attr-defined]


async def test_a_gathering_channel_still_waits_for_a_peer_that_does_not_read() -> None:
    """drain hands on what was gathered past a bound, so the transport's own buffer stops a
    writer whose peer reads nothing: nothing piles up in the process."""
    async with pair(gather=True) as (channel, _):
        piece = b"x" * 65_536
        limit = 64 * 1024 * 1024  # far more than the sockets' buffers hold

        async def write() -> None:
            while channel.written < limit:
                channel.write(piece)
                await channel.drain()

        writing = asyncio.ensure_future(write())
        for _ in range(100):  # a writer that is never held runs to its end in one go
            await asyncio.sleep(0)
        assert not writing.done()
        assert channel.written < limit
        assert channel.transport is not None
        assert channel.transport.get_write_buffer_size() > 0  # handed on, held there
        writing.cancel()


@pytest.mark.parametrize(("wire", "fold_names", "framing"), [
    # whichever case the names are in, kept as sent or folded
    (b"X-Other: 1\r\nTransfer-Encoding: gzip, chunked\r\n", True, "chunked"),
    (b"X-Other: 1\r\nTRANSFER-encoding: gzip, chunked\r\n", False, "chunked"),
    (b"Content-LENGTH: 4\r\n", False, "length"),
    (b"Transfer-Encoding: gzip\r\n", True, "close"),  # a coding that is not chunked last
    (b"Content-Length: 0\r\n", True, "none"),
    (b"X-Other: 1\r\n", False, "close"),  # no length: to the end of the connection
])
async def test_a_responses_framing_is_read_from_its_fields(wire: bytes, fold_names: bool,
                                                            framing: str) -> None:
    async with pair("response", fold_names=fold_names) as (channel, peer):
        peer.write(b"HTTP/1.0 203 Partial Thing\r\n" + wire + b"\r\n")
        head = await channel.next(5)
        assert isinstance(head, Head) and head.framing == framing
        assert (head.status, head.reason, head.version) == (203, b"Partial Thing", "1.0")


def test_heads_are_written_with_their_fields_in_order() -> None:
    assert response_head(404, b"", []) == b"HTTP/1.1 404 Not Found\r\n\r\n"
    assert response_head(200, b"Fine", [(b"a", b"1"), (b"b", bytearray(b"2"))]) == \
        b"HTTP/1.1 200 Fine\r\na: 1\r\nb: 2\r\n\r\n"
    assert request_head(b"GET", b"/x?y", [(b"host", b"e.com"), (b"via", b"1.1 p")]) == \
        b"GET /x?y HTTP/1.1\r\nhost: e.com\r\nvia: 1.1 p\r\n\r\n"


async def test_an_answer_to_head_ends_at_its_head() -> None:
    async with pair("response") as (channel, peer):
        channel.expect_no_body = True
        peer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n")
        head = await channel.next(5)
        assert isinstance(head, Head) and head.status == 200 and head.framing == "none"
        assert await channel.next(5) is END
        assert not channel.reusable


async def test_an_answer_delimited_by_close_ends_with_the_connection() -> None:
    async with pair("response") as (channel, peer):
        peer.write(b"HTTP/1.0 200 OK\r\n\r\nsome")
        head = await channel.next(5)
        assert isinstance(head, Head) and head.framing == "close"
        assert await channel.next(5) == b"some"
        peer.write(b" more")
        assert await channel.next(5) == b" more"
        peer.close()
        assert await channel.next(5) is END
        assert await channel.next(5) is EOF


async def test_a_pool_reuses_the_last_kept_and_never_one_that_spoke_unasked() -> None:
    site = ("http", "a.example", 80)
    async with AsyncExitStack() as stack:
        (a, _), (b, _), (c, peer_c), (d, _) = [
            await stack.enter_async_context(pair("response")) for _ in range(4)]
        pool = Pool(max_per_origin=2)
        for channel in (a, b, d):
            pool.put(site, channel)
        assert d.closed and a.idle and b.idle and not (a.closed or b.closed)  # its bound
        assert pool.take(site) is b and not b.idle
        pool.put(site, c)
        peer_c.write(b"HTTP/1.1 200 OK\r\n\r\n")  # an answer nobody asked for
        async with asyncio.timeout(5):
            while not c.received:
                await asyncio.sleep(0.01)
        assert pool.take(site) is a and c.closed  # c lost its framing: closed, passed over
        assert pool.take(site) is None
        pool.put(site, b)
        pool.drop(site)
        assert b.closed and pool.take(site) is None
        timed = Pool(idle_s=0.2)
        timed.put(site, a)
        assert timed.take(site) is a
        timed.put(site, a)
        await asyncio.sleep(0.3)
        timed.sweep()  # now and then: a third of idle_s has passed
        assert a.closed and timed.take(site) is None


_HEADS = [b"GET http://a.example/ HTTP/1.1\r\nHost: a\r\n\r\n",
          b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
          b"PUT /x HTTP/1.1\r\nContent-Length: 3\r\n\r\n", b"CONNECT a:443 HTTP/1.1\r\n\r\n",
          b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", b"HTTP/1.0 200 OK\r\n\r\n",
          b"HTTP/1.1 103 Early Hints\r\n\r\n", b"5\r\nabcde\r\n", b"0\r\n\r\n", b"\r\n"]


async def _read_everything(side: str, pieces: list[bytes]) -> list[object]:
    """Feeds ``pieces`` through a real socket into a channel; its events to the end."""
    near, far = socket.socketpair()
    loop = asyncio.get_running_loop()
    failures: list[dict[str, object]] = []  # a callback that raised, reported by the loop
    loop.set_exception_handler(lambda _, context: failures.append(context))
    _, channel = await loop.connect_accepted_socket(
        lambda: Channel(side, max_head_bytes=1024), near)  # type: ignore[arg-type]
    far.setblocking(False)
    for piece in pieces:
        await loop.sock_sendall(far, piece)
    far.close()
    events: list[object] = []
    try:
        while (event := await channel.next(5)) is not EOF:
            events.append(event)
    except ProtocolError as exc:
        assert 400 <= exc.status < 600
        events.append(exc)
    finally:
        channel.close()
    await asyncio.sleep(0)
    assert not failures, failures
    return events


@settings(max_examples=150, deadline=None)
@given(side=st.sampled_from(["request", "response"]),
       pieces=st.lists(st.one_of(st.sampled_from(_HEADS), st.binary(max_size=64)),
                       max_size=8))
def test_any_bytes_give_events_or_a_protocol_error(side: str, pieces: list[bytes]) -> None:
    """Whatever arrives, in whatever pieces: heads, bodies and ends, or one ProtocolError
    with a status; never another exception, never a hang."""
    events = asyncio.run(_read_everything(side, pieces))
    for event in events:
        assert isinstance(event, Head | bytes | ProtocolError) or event is END

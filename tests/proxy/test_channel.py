"""The proxy's HTTP/1.1 channel on real loopback sockets: events, limits, time-outs and the
bound on what is read ahead."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from polite.proxy.http1 import END, EOF, Channel, Head, ProtocolError

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def pair(side: str = "request", max_head_bytes: int = 4096
               ) -> AsyncIterator[tuple[Channel, asyncio.StreamWriter]]:
    """A channel on the accepting end of a loopback connection, and the other end."""
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[Channel] = loop.create_future()

    def factory() -> Channel:
        channel = Channel(side, max_head_bytes=max_head_bytes)  # type: ignore[arg-type]
        if not accepted.done():
            accepted.set_result(channel)
        return channel

    server = await loop.create_server(factory, "127.0.7.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.7.1", port)
    channel = await accepted
    try:
        yield channel, writer
    finally:
        writer.close()
        channel.close()
        server.close()


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

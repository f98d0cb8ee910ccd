"""How messages are framed on their way through the proxy: chunked and close-delimited
bodies, HEAD, 1xx, pipelining, HTTP/1.0 clients, uploads, a large body. The origin here is a
raw socket server that answers each path with fixed bytes, so the framing is exactly what
the test says."""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from polite.proxy.base import _HOP_BY_HOP, _forwardable
from tests.serving import exchange, polite_serve, through
from tests.sites import tcp_origin

NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
BIG = bytes(range(256)) * 8192  # 2 MiB


@dataclass
class RawOrigin:
    host: str
    replies: dict[str, bytes]
    port: int = 0
    seen: list[tuple[bytes, bytes]] = field(default_factory=list)  # (head, body as sent)

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"


def _read_request(conn: socket.socket, buffer: bytearray) -> tuple[bytes, bytes] | None:
    while b"\r\n\r\n" not in buffer:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end])
    del buffer[:end]
    lower = head.lower()
    body_end = 0
    if b"transfer-encoding: chunked" in lower:
        while not (b"\r\n0\r\n\r\n" in buffer or buffer.startswith(b"0\r\n\r\n")):
            chunk = conn.recv(65536)
            if not chunk:
                return None
            buffer += chunk
        body_end = (buffer.index(b"0\r\n\r\n") if buffer.startswith(b"0\r\n\r\n")
                    else buffer.index(b"\r\n0\r\n\r\n") + 2) + 5
    elif b"content-length:" in lower:
        length = int(lower.split(b"content-length:")[1].split(b"\r\n")[0])
        while len(buffer) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            buffer += chunk
        body_end = length
    body = bytes(buffer[:body_end])
    del buffer[:body_end]
    return head, body


@contextmanager
def raw_origin(host: str, replies: dict[str, bytes]) -> Iterator[RawOrigin]:
    """Answers ``GET /robots.txt`` with 404 and each path in ``replies`` with its bytes; a
    reply that ends with ``\\r\\n\\r\\n`` keeps the connection, any other closes it."""
    site = RawOrigin(host, {"/robots.txt": NOT_FOUND, **replies})

    def serve_one(conn: socket.socket, stop: threading.Event) -> None:
        buffer = bytearray()
        with conn:
            while not stop.is_set():
                request = _read_request(conn, buffer)
                if request is None:
                    return
                site.seen.append(request)
                path = request[0].split(b" ")[1].decode()
                reply = site.replies.get(path, NOT_FOUND)
                conn.sendall(reply)
                if b"connection: close" in reply.lower() or not (
                        reply.endswith(b"\r\n\r\n") or b"content-length:" in reply.lower()
                        or b"transfer-encoding: chunked" in reply.lower()):
                    return

    with tcp_origin(host, serve_one) as port:
        site.port = port
        yield site


@pytest.fixture(scope="module", params=["uvloop", "asyncio"])
def proxy(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """The framing is the channel's, whichever event loop drives it."""
    with polite_serve("--store", "memory://", "--allow-private", "--no-cache",
                      "--adaptive-factor", "0", "--loop", request.param) as api:
        yield api


def zero_delay(api: httpx.Client, host: str) -> None:
    assert api.put(f"/delays/{host}", json={"delay": 0}).status_code == 200


def test_a_chunked_answer_is_passed_on_chunked(proxy: httpx.Client) -> None:
    reply = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    with raw_origin("127.0.6.1", {"/c": reply}) as site, through(proxy) as client:
        zero_delay(proxy, site.host)
        answer = client.get(f"{site.origin}/c")
        assert answer.status_code == 200 and answer.content == b"hello world"
        assert answer.headers["transfer-encoding"] == "chunked"
        assert client.get(f"{site.origin}/c").content == b"hello world"  # kept alive


def test_an_answer_delimited_by_close_reaches_a_1_1_client_chunked(
        proxy: httpx.Client) -> None:
    reply = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it, to the end"
    with raw_origin("127.0.6.2", {"/old": reply}) as site:
        zero_delay(proxy, site.host)
        request = f"GET {site.origin}/old HTTP/1.1\r\nHost: {site.host}\r\n\r\n".encode()
        got = exchange(proxy, request * 2, until_close=False, responses=2)
        first, _, second = got.partition(b"HTTP/1.1 200")[2].partition(b"HTTP/1.1 200")
        for part in (first, second):
            assert b"transfer-encoding: chunked" in part.lower()
            assert b"all of it, to the end" in part


def test_an_http_1_0_client_reads_to_the_close(proxy: httpx.Client) -> None:
    reply = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"3\r\nabc\r\n0\r\n\r\n")
    with raw_origin("127.0.6.3", {"/c": reply}) as site:
        zero_delay(proxy, site.host)
        got = exchange(proxy, f"GET {site.origin}/c HTTP/1.0\r\n\r\n".encode())
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200")
        assert b"chunked" not in head.lower() and b"connection: close" in head.lower()
        assert body == b"abc"


def test_head_gets_no_body_and_the_connection_goes_on(proxy: httpx.Client) -> None:
    head_reply = b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"
    page = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\npage"
    with raw_origin("127.0.6.4", {"/h": head_reply, "/p": page}) as site, \
            through(proxy) as client:
        zero_delay(proxy, site.host)
        answer = client.head(f"{site.origin}/h")
        assert answer.status_code == 200 and answer.headers["content-length"] == "50"
        assert answer.content == b""
        assert client.get(f"{site.origin}/p").content == b"page"


def test_early_hints_go_before_the_answer(proxy: httpx.Client) -> None:
    reply = (b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
             b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    with raw_origin("127.0.6.5", {"/e": reply}) as site:
        zero_delay(proxy, site.host)
        got = exchange(proxy, f"GET {site.origin}/e HTTP/1.1\r\nHost: x\r\n"
                              f"Connection: close\r\n\r\n".encode())
        assert got.startswith(b"HTTP/1.1 103")
        assert b"link: </s.css>; rel=preload" in got.lower()
        assert got.index(b"HTTP/1.1 200") > got.index(b"HTTP/1.1 103")
        assert got.endswith(b"\r\n\r\nok")


def test_pipelined_requests_are_answered_in_order(proxy: httpx.Client) -> None:
    replies = {f"/{n}": b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n%d" % n
               for n in range(5)}
    with raw_origin("127.0.6.6", replies) as site:
        zero_delay(proxy, site.host)
        requests = b"".join(f"GET {site.origin}/{n} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                            for n in range(5))
        got = exchange(proxy, requests + f"GET {site.origin}/4 HTTP/1.1\r\nHost: x\r\n"
                       f"Connection: close\r\n\r\n".encode())
        bodies = [part.rsplit(b"\r\n\r\n", 1)[1] for part in got.split(b"HTTP/1.1 200")[1:]]
        assert bodies == [b"0", b"1", b"2", b"3", b"4", b"4"]


def test_a_chunked_upload_is_sent_on_chunked(proxy: httpx.Client) -> None:
    made = b"HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nmade"

    def pieces() -> Iterator[bytes]:
        yield b"first,"
        yield b"second"

    with raw_origin("127.0.6.7", {"/up": made}) as site, through(proxy) as client:
        zero_delay(proxy, site.host)
        answer = client.post(f"{site.origin}/up", content=pieces())
        assert answer.status_code == 201 and answer.content == b"made"
        head, body = site.seen[-1]
        assert b"transfer-encoding: chunked" in head.lower()
        assert body.endswith(b"0\r\n\r\n") and b"first," in body and b"second" in body


def test_a_large_body_arrives_whole(proxy: httpx.Client) -> None:
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BIG) + BIG
    with raw_origin("127.0.6.8", {"/big": reply}) as site, through(proxy) as client:
        zero_delay(proxy, site.host)
        with client.stream("GET", f"{site.origin}/big") as answer:
            digest = hashlib.sha256()
            for piece in answer.iter_bytes():
                digest.update(piece)
        assert digest.digest() == hashlib.sha256(BIG).digest()


def test_an_answer_cut_short_ends_the_client_connection(proxy: httpx.Client) -> None:
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly this"
    with raw_origin("127.0.6.9", {"/cut": reply}) as site:
        zero_delay(proxy, site.host)
        got = exchange(proxy, f"GET {site.origin}/cut HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"only this")


def test_a_body_on_an_api_request_and_chunked_api_answers(proxy: httpx.Client) -> None:
    answer = proxy.post("/politeness", json=["http://127.0.6.10/x"])
    assert answer.status_code == 200 and isinstance(answer.json(), list)
    got = exchange(proxy, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 200") and b'"ok"' in got
    got = exchange(proxy, b"GET /metrics HTTP/1.0\r\n\r\n")  # read to the close
    assert got.startswith(b"HTTP/1.1 200") and b"chunked" not in got.lower()
    assert b"# TYPE polite_" in got.partition(b"\r\n\r\n")[2]


def test_expect_100_continue_is_answered_by_the_proxy(proxy: httpx.Client) -> None:
    made = b"HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nmade"
    with raw_origin("127.0.6.11", {"/up": made}) as site:
        zero_delay(proxy, site.host)
        with socket.create_connection(("127.0.0.1", int(proxy.base_url.port or 0)),
                                      timeout=10) as sock:
            sock.sendall(f"POST {site.origin}/up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                         f"Expect: 100-continue\r\nConnection: close\r\n\r\n".encode())
            sock.settimeout(0.5)  # a client waits about a second before sending anyway
            interim = sock.recv(4096)
            assert interim.startswith(b"HTTP/1.1 100")
            sock.settimeout(10)
            sock.sendall(b"hello")
            got = b""
            while chunk := sock.recv(4096):
                got += chunk
        assert got.startswith(b"HTTP/1.1 201") and got.endswith(b"made")
        head, body = site.seen[-1]
        assert body == b"hello" and b"expect:" not in head.lower()


def test_a_refused_request_that_awaits_100_continue_is_closed_not_held(
        proxy: httpx.Client) -> None:
    page = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    with raw_origin("127.0.6.12", {"/p": page}) as site:
        assert proxy.put(f"/delays/{site.host}", json={"delay": 60_000}).status_code == 200
        exchange(proxy, f"GET {site.origin}/p HTTP/1.1\r\nHost: x\r\n"
                        f"Connection: close\r\n\r\n".encode())  # takes the slot
        started = time.monotonic()
        got = exchange(proxy, f"POST {site.origin}/p HTTP/1.1\r\nHost: x\r\n"
                              f"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n".encode())
        assert got.startswith(b"HTTP/1.1 429")  # no 100: the body is never asked for
        assert time.monotonic() - started < 5  # and the connection ends at once


@pytest.mark.parametrize(("fields", "forwarded"), [
    # the usual message: the hop's own fields go, the others keep their order
    ([(b"host", b"a"), (b"keep-alive", b"5"), (b"accept", b"*/*"), (b"te", b"trailers"),
      (b"x-polite-mode", b"wait"), (b"user-agent", b"bot")],
     [(b"host", b"a"), (b"accept", b"*/*"), (b"user-agent", b"bot")]),
    # what Connection names goes too, before or after it, but Content-Length
    ([(b"x-a", b"1"), (b"connection", b"X-A, x-b ,content-length"), (b"content-length", b"2"),
      (b"x-b", b"3"), (b"x-c", b"4"), (b"connection", b"x-c")],
     [(b"content-length", b"2")]),
])
def test_the_fields_that_go_on_are_those_not_the_hops_own(
        fields: list[tuple[bytes, bytes]], forwarded: list[tuple[bytes, bytes]]) -> None:
    assert _forwardable(fields, _HOP_BY_HOP, b"x-polite-") == forwarded

"""polite's HTTP/1.1 client (the crawler's and the survey's) against raw loopback origins:
framings, keep-alive reuse, a kept-alive connection the server dropped, interim answers,
caps, true sizes, resolvers, timeouts, and what it refuses."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from polite.fetch.http import FetchResult, PageFetcher
from tests.sites import tcp_origin

# (a request's head, how many came before it on its connection) -> what to send (None: close)
Script = Callable[[bytes, int], list[bytes | None]]


@contextmanager
def origin(host: str, script: Script) -> Iterator[tuple[str, list[bytes], list[int]]]:
    """An origin that answers each request on a connection as ``script`` says; yields its
    base URL, the request heads it read and, per request, the connection's number."""
    heads: list[bytes] = []
    connections: list[int] = []
    counter = iter(range(1_000_000))
    lock = threading.Lock()

    def handle(conn: socket.socket, stop: threading.Event) -> None:
        with lock:
            number = next(counter)
        with conn:
            conn.settimeout(5)
            buffer = b""
            before = 0
            try:
                while True:
                    while b"\r\n\r\n" not in buffer:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        buffer += chunk
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    with lock:
                        heads.append(head)
                        connections.append(number)
                    for piece in script(head, before):
                        if piece is None:
                            return
                        conn.sendall(piece)
                    before += 1
            except OSError:
                return

    with tcp_origin(host, handle) as port:
        yield f"http://{host}:{port}", heads, connections


def fetch(urls: list[str], *, max_bytes: int = 1 << 20, deadline_s: float = 5.0,
          headers: dict[str, str] | None = None) -> list[FetchResult]:
    async def run() -> list[FetchResult]:
        fetcher = PageFetcher(connect_timeout_s=2.0)
        try:
            return [await fetcher.get(url, headers or {"User-Agent": "testbot"},
                                      max_bytes=max_bytes, deadline_s=deadline_s)
                    for url in urls]
        finally:
            await fetcher.close()

    return asyncio.run(run())


def ok(body: bytes, *fields: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % len(body) + b"".join(
        f + b"\r\n" for f in fields) + b"\r\n" + body)


def test_keep_alive_serves_many_requests_on_one_connection() -> None:
    with origin("127.0.12.1", lambda head, _: [ok(b"<p>" + head.split()[1] + b"</p>",
                                              b"Content-Type: text/html; charset=ISO-8859-1",
                                              b"X-Robots-Tag: noindex",
                                              b"x-robots-tag: nofollow")]) as (base, heads, conns):
        results = fetch([base + "/a", base + "/b?q=1", base + "/c"])
    assert [r.body for r in results] == [b"<p>/a</p>", b"<p>/b?q=1</p>", b"<p>/c</p>"]
    assert conns == [0, 0, 0]
    first = results[0]
    assert first.status == 200 and first.reason == "OK" and first.http_version == "HTTP/1.1"
    assert first.charset == "iso-8859-1" and first.headers["CONTENT-TYPE"].startswith("text")
    assert first.get_all("X-Robots-Tag") == ["noindex", "nofollow"]
    assert first.answered_s is not None and first.elapsed_s >= first.answered_s
    assert heads[0].split(b"\r\n")[:4] == [b"GET /a HTTP/1.1", b"Host: " + base[7:].encode(),
                                           b"Accept: */*", b"User-Agent: testbot"]


def test_chunked_close_delimited_and_interim_answers() -> None:
    def script(head: bytes, _: int) -> list[bytes | None]:
        path = head.split()[1]
        if path == b"/chunked":
            return [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                    b"5\r\nhello\r\n", b"6\r\n world\r\n0\r\n\r\n"]
        if path == b"/interim":
            return [b"HTTP/1.1 100 Continue\r\n\r\n", ok(b"after")]
        return [b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end", None]

    with origin("127.0.12.2", script) as (base, _, conns):
        results = fetch([base + "/chunked", base + "/interim", base + "/close",
                         base + "/chunked"])
    assert [(r.status, r.body, r.error) for r in results] == [
        (200, b"hello world", None), (200, b"after", None), (200, b"to the end", None),
        (200, b"hello world", None)]
    assert results[2].http_version == "HTTP/1.0"
    assert conns == [0, 0, 0, 1]  # the close-delimited answer ended its connection


def test_a_connection_the_server_dropped_is_replaced_without_an_error() -> None:
    # The server answers the first request of a connection and drops the connection when
    # the next one comes, unanswered (an idle timeout on its side): that request is asked
    # again on a new connection, and never reported as failed.
    def script(head: bytes, before: int) -> list[bytes | None]:
        return [ok(head.split()[1])] if before == 0 else [None]

    with origin("127.0.12.3", script) as (base, heads, conns):
        results = fetch([base + "/1", base + "/2", base + "/3"])
    assert [(r.status, r.body, r.error) for r in results] == [
        (200, b"/1", None), (200, b"/2", None), (200, b"/3", None)]
    assert [h.split()[1] for h in heads] == [b"/1", b"/2", b"/2", b"/3", b"/3"]
    assert conns == [0, 0, 1, 1, 2]


def test_caps_encodings_and_broken_answers_each_have_their_reason() -> None:
    deflated = zlib.compress(b"a" * 100_000)
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw_deflated = raw.compress(b"b" * 1000) + raw.flush()

    def script(head: bytes, _: int) -> list[bytes | None]:
        path = head.split()[1]
        if path == b"/deflate":
            return [ok(deflated, b"Content-Encoding: deflate")]
        if path == b"/raw-deflate":
            return [ok(raw_deflated, b"Content-Encoding: deflate")]
        if path == b"/big-head":
            return [b"HTTP/1.1 200 OK\r\n" + b"X-Filler: " + b"y" * 70_000 + b"\r\n\r\n"]
        if path == b"/cut":
            return [b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", None]
        if path == b"/stall":
            return [b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"]
        return [b"this is not HTTP\r\n\r\n", None]

    with origin("127.0.12.4", script) as (base, _, _):
        deflate, raw_result, big, cut, garbage = fetch(
            [base + p for p in ("/deflate", "/raw-deflate", "/big-head", "/cut", "/junk")],
            max_bytes=50_000)
        (stalled,) = fetch([base + "/stall"], deadline_s=0.5)
    assert deflate.truncated and deflate.body == b"a" * 50_000 and deflate.error is None
    assert raw_result.body == b"b" * 1000
    assert big.status is None and "header fields pass" in (big.error or "")
    assert cut.status == 200 and cut.body == b"only this" and "closed" in (cut.error or "")
    assert garbage.status is None and "not HTTP/1.1" in (garbage.error or "")
    assert stalled.status is None and stalled.error == "took longer than 0.5 s"


def test_targets_are_sent_as_ascii_and_header_injection_is_refused() -> None:
    with origin("127.0.12.5", lambda head, _: [ok(b"")]) as (base, heads, _):
        sent, injected, nobody = fetch([base + "/caf\u00e9 au lait?x=\u00e9"]) + fetch(
            [base + "/"], headers={"Cookie": "a=b\r\nX-Evil: 1"}) + fetch(
            ["http://127.0.12.6:9/"])
    assert sent.status == 200
    assert heads[0].startswith(b"GET /caf%C3%A9%20au%20lait?x=%C3%A9 HTTP/1.1\r\n")
    assert injected.status is None and "line break" in (injected.error or "")
    assert len(heads) == 1
    assert nobody.status is None and nobody.error and "Error" in nobody.error


def test_https_checks_the_certificate(tmp_path: Path) -> None:
    host = "127.0.12.7"
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={host}",
                    "-addext", f"subjectAltName=IP:{host}"],
                   check=True, capture_output=True, timeout=60)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)

    async def run() -> tuple[FetchResult, FetchResult]:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while await reader.readuntil(b"\r\n\r\n"):
                    writer.write(ok(b"secret"))
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                writer.close()

        server = await asyncio.start_server(answer, host, 0, ssl=server_side)
        port = server.sockets[0].getsockname()[1]
        url = f"https://{host}:{port}/"
        trusting = ssl.create_default_context(cafile=str(cert))
        try:  # time-outs far past a handshake's time on a busy machine (the first loads
            # the system's authorities): what is refused here is the certificate
            checked = PageFetcher(connect_timeout_s=30.0)
            refused = await checked.get(url, {}, max_bytes=1000, deadline_s=60.0)
            await checked.close()
            trusted = PageFetcher(connect_timeout_s=30.0, tls=trusting)
            fetched = await trusted.get(url, {}, max_bytes=1000, deadline_s=60.0)
            await trusted.close()
        finally:
            server.close()
            await server.wait_closed()
        return refused, fetched

    refused, fetched = asyncio.run(run())
    assert refused.status is None and "CERTIFICATE_VERIFY_FAILED" in (refused.error or "")
    assert (fetched.status, fetched.body) == (200, b"secret")


def test_true_sizes_raw_bodies_resolvers_and_read_timeouts_each_have_their_kind() -> None:
    gzipped = zlib.compress(b"c" * 5_000, wbits=31)

    def script(head: bytes, _: int) -> list[bytes | None]:
        path = head.split()[1]
        if path == b"/big":
            return [ok(b"x" * 3_000)]
        if path == b"/gzip":
            return [ok(gzipped, b"Content-Encoding: gzip")]
        return [b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome"]  # then nothing

    names = {"site.test": "127.0.12.8"}

    async def resolve(name: str) -> str:
        return names[name]  # KeyError: the name is unknown

    async def run(base: str) -> list[FetchResult]:
        fetcher = PageFetcher(connect_timeout_s=2.0, resolve=resolve)
        port = base.rsplit(":", 1)[1]
        named = f"http://site.test:{port}"
        try:
            return [
                await fetcher.get(named + "/big", {}, max_bytes=1_000, count_to=10_000,
                                  deadline_s=5),
                await fetcher.get(named + "/big", {}, max_bytes=1_000, count_to=2_000,
                                  deadline_s=5),
                await fetcher.get(named + "/gzip", {}, max_bytes=100_000, decode=False,
                                  deadline_s=5),
                await fetcher.get(named + "/gzip", {}, max_bytes=100_000, deadline_s=5),
                await fetcher.get(named + "/idle", {}, max_bytes=1_000, deadline_s=5,
                                  read_timeout_s=0.5),
                await fetcher.get(f"http://nowhere.test:{port}/", {}, max_bytes=1_000,
                                  deadline_s=5),
                await fetcher.get(named + "/big", {}, max_bytes=5_000, deadline_s=5),
                release(fetcher, "site.test", int(port)),
                await fetcher.get(named + "/big", {}, max_bytes=5_000, deadline_s=5),
            ]
        finally:
            await fetcher.close()

    def release(fetcher: PageFetcher, host: str, port: int) -> FetchResult:
        fetcher.release(host, port)
        return FetchResult()

    with origin("127.0.12.8", script) as (base, _, conns):
        counted, stopped, raw, inflated, idle, unknown, kept, _, fresh = asyncio.run(run(base))
    assert (counted.body, counted.size, counted.truncated, counted.error) == (
        b"x" * 1_000, 3_000, True, None)
    assert stopped.size > 2_000 and len(stopped.body) == 1_000 and stopped.truncated
    assert raw.body == gzipped and raw.size == len(gzipped)
    assert inflated.body == b"c" * 5_000 and inflated.size == 5_000
    assert idle.status == 200 and idle.failure == "timeout" and "no data" in (idle.error or "")
    assert idle.elapsed_s < 2
    assert unknown.status is None and unknown.failure == "dns"
    assert "nowhere.test" in (unknown.error or "")
    # A released host's kept-alive connection is closed: the next request opens another.
    assert kept.body == fresh.body == b"x" * 3_000 and conns[-1] == conns[-2] + 1


def test_field_names_are_kept_as_sent_and_a_kept_connection_that_spoke_is_not_reused() -> None:
    # The crawler records a page's header fields as the site sent them (WARC): names keep
    # their case. A kept-alive connection on which bytes come that no request asked for (a
    # second answer to one request) has lost its framing: the next request opens another.
    def script(head: bytes, before: int) -> list[bytes | None]:
        answer = ok(b"one", b"X-Robots-Tag: noindex", b"x-robots-tag: nofollow")
        return [answer + ok(b"unasked")] if head.split()[1] == b"/twice" else [answer]

    with origin("127.0.12.9", script) as (base, _, conns):
        first, twice, after = fetch([base + "/a", base + "/twice", base + "/b"])
    assert first.raw_headers == [("Content-Length", "3"), ("X-Robots-Tag", "noindex"),
                                 ("x-robots-tag", "nofollow")]
    assert twice.body == after.body == b"one" and after.error is None
    assert conns == [0, 0, 1]


def test_the_read_timeout_is_one_of_silence_not_of_a_slow_head() -> None:
    # A head that trickles in two bytes at a time, each well within the read timeout
    # (forty times: a busy machine may hold the sending thread back), though the whole
    # takes longer than it, is read; a silence as long as the timeout is not.
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Slow: " + b"s" * 60 + b"\r\n\r\nbody"

    def handle(conn: socket.socket, stop: threading.Event) -> None:
        with conn:
            conn.settimeout(5)
            try:
                request = conn.recv(65536)
                if b" /silent " in request:  # the head begins, then nothing
                    conn.sendall(answer[:20])
                    stop.wait(5)
                    return
                for at in range(0, len(answer), 2):
                    conn.sendall(answer[at:at + 2])
                    if stop.wait(0.05):
                        return
            except OSError:
                return

    async def run(base: str) -> list[FetchResult]:
        fetcher = PageFetcher(connect_timeout_s=10.0, read_timeout_s=2.0)
        try:
            return [await fetcher.get(base + path, {}, max_bytes=1_000, deadline_s=20,
                                      keep_alive=False) for path in ("/slow", "/silent")]
        finally:
            await fetcher.close()

    with tcp_origin("127.0.12.10", handle) as port:
        slow, silent = asyncio.run(run(f"http://127.0.12.10:{port}"))
    assert (slow.status, slow.body, slow.error) == (200, b"body", None)
    assert slow.elapsed_s > 2.0  # longer than the read timeout, all told
    assert silent.status is None and silent.failure == "timeout"
    assert silent.error == "no data for 2 s"


def test_a_switch_of_protocols_and_many_small_fields_past_the_head_bound_are_refused() -> None:
    # Each field counts with its ": " and line end: 2,000 fields of 29 bytes of name and
    # value are 66,000 bytes of head, past the 64 KiB bound (58,000 without).
    many = b"".join(b"X%04d: %b\r\n" % (n, b"v" * 24) for n in range(2_000))

    def script(head: bytes, _: int) -> list[bytes | None]:
        if head.split()[1] == b"/upgrade":
            return [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\n\r\nnot http", None]
        return [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + many + b"\r\nok", None]

    with origin("127.0.12.11", script) as (base, _, _):
        switched, crowded = fetch([base + "/upgrade", base + "/many"])
    assert (switched.status, switched.failure) == (None, "connection")
    assert switched.error == "the server switched protocols"
    assert (crowded.status, crowded.failure) == (None, "connection")
    assert crowded.error == "the response's header fields pass 65536 bytes"


def test_a_request_held_back_as_it_leaves_is_never_sent_and_its_connection_is_kept() -> None:
    # The politeness driver's last word (LateStart): asked as each head is about to be
    # written, with how late that is; False holds the request back. It never reaches the
    # site, on a fresh connection or a kept one, and the connection carries the next.
    told: list[float] = []

    class Leaving:
        def __init__(self, go: bool) -> None:
            self.go = go

        def __call__(self, late_s: float) -> bool:
            told.append(late_s)
            return self.go

        def left(self) -> None:
            assert self.go, "a request held back was written"

    with origin("127.0.12.9", lambda head, _: [ok(head.split()[1])]) as (base, heads, conns):
        async def run() -> list[FetchResult]:
            fetcher = PageFetcher(connect_timeout_s=2.0)
            try:
                return [await fetcher.get(base + path, {"User-Agent": "testbot"},
                                          max_bytes=1000, deadline_s=5.0,
                                          leaving=Leaving(path != "/held"))
                        for path in ("/held", "/a", "/held", "/b")]
            finally:
                await fetcher.close()

        held, a, held_again, b = asyncio.run(run())
    assert held.status is None and held.failure == held_again.failure == "withheld"
    assert held.error is not None and "given to another request" in held.error
    assert (a.body, b.body) == (b"/a", b"/b")
    assert [head.split()[1] for head in heads] == [b"/a", b"/b"]  # no held one came
    assert conns == [0, 0]  # the connection opened for the first, kept for every other
    assert len(told) == 4 and all(late >= 0 for late in told)


def test_a_silence_on_a_kept_connection_is_a_timeout_not_a_request_sent_again() -> None:
    # The server read the request on the kept-alive connection and says nothing for longer
    # than the read timeout: it has the request (a slow page), so asking again on a new
    # connection would send it twice without a slot of its own. Only a connection closed
    # before any answer is asked again (see the dropped-connection test above).
    def script(head: bytes, before: int) -> list[bytes | None]:
        return [ok(head.split()[1])] if before == 0 else []

    with origin("127.0.12.14", script) as (base, heads, conns):
        async def run() -> list[FetchResult]:
            fetcher = PageFetcher(connect_timeout_s=2.0, read_timeout_s=0.5)
            try:
                return [await fetcher.get(base + path, {"User-Agent": "testbot"},
                                          max_bytes=1000, deadline_s=5.0)
                        for path in ("/1", "/slow")]
            finally:
                await fetcher.close()

        first, slow = asyncio.run(run())
    assert (first.status, first.body) == (200, b"/1")
    assert slow.status is None and slow.failure == "timeout"
    assert [head.split()[1] for head in heads] == [b"/1", b"/slow"]  # sent once
    assert conns == [0, 0]

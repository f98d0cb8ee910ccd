"""The forward proxy of ``polite serve``, a real process, between real clients and real
origins on loopback."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.serving import exchange, polite_serve, seed_001_figure_4, send_staggered, through
from tests.sites import Reply, Site, serve, tcp_origin

ALLOW = Reply(200, b"User-agent: *\nDisallow: /private\n")
PAGE = Reply(200, b"x" * 1024, {"Content-Type": "text/plain"})  # not cacheable


@pytest.fixture(scope="module")
def proxy() -> Iterator[httpx.Client]:
    with polite_serve("--store", "memory://", "--allow-private", "--origin-timeout-s", "2",
                      "--max-wait-s", "5") as api:
        yield api


def test_seed_001_figure_4(proxy: httpx.Client) -> None:
    """One request every 200 ms for 5 s against a 1000 ms delay: every fifth passes."""
    with serve(Site("127.0.3.1", {"/robots.txt": ALLOW, "/page": PAGE})) as site:
        assert proxy.put("/delays/127.0.3.1", json={"delay": 1000}).status_code == 200
        with through(proxy) as client:
            statuses = seed_001_figure_4(client, f"{site.origin}/page", PAGE.body)
        passed = statuses.count(200)
        assert statuses[0] == 200
        assert 4 <= passed <= 6, statuses
        assert statuses.count(429) == 25 - passed
        assert site.requests.count("/page") == passed


def test_robots_refusal_names_the_rule_and_never_reaches_the_origin(
        proxy: httpx.Client) -> None:
    with serve(Site("127.0.3.2", {"/robots.txt": ALLOW, "/private/x": PAGE})) as site, \
            through(proxy) as client:
        answer = client.get(f"{site.origin}/private/x", headers={"User-Agent": "FooBot/2.1"})
        assert answer.status_code == 403
        assert "Disallow: /private (line 2)" in answer.text
        assert site.requests == ["/robots.txt"]


def test_wait_mode_holds_the_request_until_its_slot(proxy: httpx.Client) -> None:
    with serve(Site("127.0.3.3", {"/robots.txt": ALLOW, "/page": PAGE})) as site, \
            through(proxy) as client:
        proxy.put("/delays/127.0.3.3", json={"delay": 700})
        assert client.get(f"{site.origin}/page").status_code == 200
        started = time.monotonic()
        held = client.get(f"{site.origin}/page", headers={"X-Polite-Mode": "wait"})
        assert held.status_code == 200
        assert time.monotonic() - started > 0.5
        assert site.requests.count("/page") == 2


def test_headers_bodies_and_keep_alive(proxy: httpx.Client) -> None:
    with serve(Site("127.0.3.4", {"/robots.txt": ALLOW, "/form": Reply(201, b"made")})) as site, \
            through(proxy) as client:
        proxy.put("/delays/127.0.3.4", json={"delay": 0})
        for n in range(3):
            answer = client.post(f"{site.origin}/form", content=b"a=%d" % n,
                                 headers={"Connection": "keep-alive, X-Secret",
                                          "X-Secret": "hop", "X-Kept": "end-to-end",
                                          "X-Polite-Mode": "wait",
                                          "X-Polite-Client": "crawler-3"})
            assert answer.status_code == 201 and answer.content == b"made"
        method, path, sent, body = site.seen[-1]
        headers = {k.lower(): v for k, v in sent.items()}
        assert (method, path, body) == ("POST", "/form", b"a=2")
        assert headers["x-kept"] == "end-to-end"
        assert "x-secret" not in headers  # named in Connection: hop-by-hop
        # what the client told the proxy is not the origin's business
        assert not [name for name in headers if name.startswith("x-polite-")]
        assert "polite" in headers["via"]


def test_private_targets_are_refused_unless_allowed() -> None:
    with serve(Site("127.0.3.5", {"/robots.txt": ALLOW, "/": PAGE})) as site, \
            polite_serve("--store", "memory://") as api, through(api) as client:
        answer = client.get(f"{site.origin}/")
        assert answer.status_code == 403 and "private or loopback" in answer.text
        assert site.requests == []


def test_a_request_to_the_proxy_itself_is_refused(proxy: httpx.Client) -> None:
    with through(proxy) as client:
        answer = client.get(f"http://{proxy.base_url.host}:{proxy.base_url.port}/health")
        assert answer.status_code == 508


def test_smuggling_shapes_are_rejected(proxy: httpx.Client) -> None:
    answer = exchange(proxy, b"POST http://127.0.3.6/x HTTP/1.1\r\nHost: 127.0.3.6\r\n"
                        b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400")
    assert b"smuggling" in answer
    answer = exchange(proxy, b"GET http://127.0.3.6/x HTTP/1.1\r\nHost: a\r\n"
                        b"Content-Length: 1\r\nContent-Length: 2\r\n\r\nab")
    assert answer.startswith(b"HTTP/1.1 400")


def test_oversized_head_is_refused(proxy: httpx.Client) -> None:
    answer = exchange(proxy, b"GET http://127.0.3.6/x HTTP/1.1\r\nHost: a\r\nX-Big: "
                 + b"a" * 100_000 + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431") or answer.startswith(b"HTTP/1.1 400")


@contextmanager
def bad_origin(host: str, behaviour: str) -> Iterator[int]:
    """A TCP origin that serves robots.txt, then resets, stalls or talks garbage."""

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        with conn:
            request = conn.recv(65536)
            if b"/robots.txt" in request:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            elif behaviour == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00"
                                b"\x00\x00\x00\x00")
            elif behaviour == "stall":
                stop.wait(5)
            else:
                conn.sendall(b"this is not HTTP at all\r\n\r\n")

    with tcp_origin(host, answer) as port:
        yield port


@pytest.mark.parametrize(("address", "behaviour", "status"),
                         [("127.0.3.7", "reset", 502), ("127.0.3.8", "stall", 504),
                          ("127.0.3.9", "garbage", 502)])
def test_broken_origins_get_the_client_an_answer(proxy: httpx.Client, address: str,
                                                 behaviour: str, status: int) -> None:
    with bad_origin(address, behaviour) as port, through(proxy) as client:
        started = time.monotonic()
        answer = client.get(f"http://{address}:{port}/page")
        assert answer.status_code == status
        assert time.monotonic() - started < 10


def test_a_refusal_keeps_the_connection_alive(proxy: httpx.Client) -> None:
    with serve(Site("127.0.3.40", {"/robots.txt": ALLOW, "/page": PAGE})) as site:
        assert proxy.put("/delays/127.0.3.40", json={"delay": 60_000}).status_code == 200
        with socket.create_connection(("127.0.0.1", int(proxy.base_url.port or 0))) as sock:
            request = f"GET {site.origin}/page HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            sock.sendall(request + request)
            data = b""
            while data.count(b"HTTP/1.1 ") < 2 or not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                assert chunk, data
                data += chunk
    assert data.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 429" in data
    assert b"connection: close" not in data.lower()


def test_wait_mode_serves_one_host_first_come_first_served(proxy: httpx.Client) -> None:
    routes: dict[str, Reply | object] = {"/robots.txt": ALLOW}
    routes.update({f"/page{n}": PAGE for n in range(8)})
    with serve(Site("127.0.3.41", routes)) as site:  # type: ignore[arg-type]
        assert proxy.put("/delays/127.0.3.41", json={"delay": 250}).status_code == 200
        urls = [f"{site.origin}/page{n}" for n in range(8)]
        statuses = [status for status, _ in
                    send_staggered(proxy, urls, {"X-Polite-Mode": "wait"}, 0.03)]
    assert statuses == [200] * 8
    arrived = [path for _, path in site.arrivals if path != "/robots.txt"]
    assert arrived == [f"/page{n}" for n in range(8)]  # in the order they were sent
    times = [at for at, path in site.arrivals if path != "/robots.txt"]
    assert all(b - a >= 0.25 - 0.01 for a, b in itertools.pairwise(times))


def test_wait_mode_never_lets_a_later_request_pass_an_earlier_refused_one(
        proxy: httpx.Client) -> None:
    routes: dict[str, Reply | object] = {"/robots.txt": ALLOW}
    routes.update({f"/page{n}": PAGE for n in range(6)})
    with serve(Site("127.0.3.42", routes)) as site:  # type: ignore[arg-type]
        assert proxy.put("/delays/127.0.3.42", json={"delay": 1000}).status_code == 200
        urls = [f"{site.origin}/page{n}" for n in range(6)]
        answers = send_staggered(proxy, urls, {"X-Polite-Mode": "wait",
                                               "X-Polite-Timeout": "2.5"}, 0.03)
        statuses = [status for status, _ in answers]
    # Three slots fit in 2.5 s (now, +1 s, +2 s); once one request is refused, every later
    # one is too: none is served ahead of an earlier one.
    assert statuses == [200, 200, 200, 429, 429, 429], statuses
    arrived = [path for _, path in site.arrivals if path != "/robots.txt"]
    assert arrived == ["/page0", "/page1", "/page2"]


def test_a_private_target_refusal_keeps_the_connection_and_statuses_have_reasons() -> None:
    with serve(Site("127.0.3.43", {"/robots.txt": ALLOW, "/": PAGE})) as site, \
            polite_serve("--store", "memory://", "--admin-token", "secret") as api:
        port = int(api.base_url.port or 0)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            request = f"GET {site.origin}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            sock.sendall(request + request)
            data = b""
            while data.count(b"HTTP/1.1 403") < 2:
                chunk = sock.recv(65536)
                assert chunk, data
                data += chunk
        assert b"connection: close" not in data.lower()
        assert data.startswith(b"HTTP/1.1 403 Forbidden\r\n")
        assert site.requests == []
        with socket.create_connection(("127.0.0.1", port)) as sock:
            # (the API answers only a Host of its own: an address, localhost, --allowed-host)
            sock.sendall(b"PUT /delays/x.org HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Length: 2\r\n\r\n{}"
                         b"DELETE /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        assert b"HTTP/1.1 401 Unauthorized\r\n" in data
        assert b"HTTP/1.1 405 Method Not Allowed\r\n" in data


def test_a_slow_reader_is_not_the_origins_response_time(proxy: httpx.Client) -> None:
    """The adaptive delay follows the origin: a client that takes its time reading an
    answer holds the proxy, not the site, and the site's delay stays its own."""
    big = Reply(200, b"x" * (32 << 20), {"Content-Type": "text/plain"})
    with serve(Site("127.0.3.44", {"/robots.txt": ALLOW, "/big": big})) as site:
        assert proxy.put("/delays/127.0.3.44", json={"delay": 0}).status_code == 200
        with socket.create_connection(("127.0.0.1", int(proxy.base_url.port or 0))) as sock:
            sock.sendall(f"GET {site.origin}/big HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            time.sleep(2.0)  # the buffers fill and the proxy waits on this client
            got = 0
            while got < 32 << 20:
                chunk = sock.recv(1 << 20)
                assert chunk
                got += len(chunk)
        urls = [f"{site.origin}/a", f"{site.origin}/b"]
        error = proxy.post("/politeness/verbose", json=urls).json()[1]["error"]
        interval_ms = int(error.split("delay of ")[1].split(" ")[0])
        assert interval_ms < 1000, error

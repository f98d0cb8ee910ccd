"""CONNECT tunnels, ordered mode, and 1,000 client connections at once, through a real
``polite serve``."""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serving import polite_serve, polite_serve_process, send_staggered, until_counted
from tests.sites import Reply, Site, greet_first, serve, tcp_origin

PAGE = Reply(200, b"through the tunnel")


@pytest.fixture(scope="module")
def proxy() -> Iterator[httpx.Client]:
    with polite_serve("--store", "memory://", "--allow-private") as api:
        yield api


def proxy_address(api: httpx.Client) -> tuple[str, int]:
    return "127.0.0.1", int(api.base_url.port or 0)


def connect(api: httpx.Client, target: str, *headers: str) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(proxy_address(api), timeout=10)
    extra = "".join(f"{h}\r\n" for h in headers)
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{extra}\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return sock, head


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_a_tunnel_relays_bytes_and_takes_the_hosts_slot(proxy: httpx.Client) -> None:
    with serve(Site("127.0.5.1", {"/robots.txt": Reply(404), "/page": PAGE})) as site:
        assert proxy.put("/delays/127.0.5.1", json={"delay": 60_000}).status_code == 200
        target = f"127.0.5.1:{site.port}"
        sock, head = connect(proxy, target)
        with sock:
            assert head.startswith(b"HTTP/1.1 200"), head
            sock.sendall(f"GET /page HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"
                         .encode())
            answer = read_all(sock)
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"through the tunnel")
        again, refused = connect(proxy, target)
        again.close()
    assert refused.startswith(b"HTTP/1.1 429") and b"retry-after:" in refused.lower()
    assert site.requests == ["/robots.txt", "/page"]  # the proxy saw no path in the tunnel
    # The dashboard's trace shows both tunnels: the one opened (200, for as long as it was
    # open) and the one refused for the host's delay. An open tunnel is traced as it ends,
    # once the proxy has seen both sides close.
    for _ in range(50):
        traced = sorted((e["method"], e["decision"], e["status"]) for e in proxy.get(
            "/trace").json()["exchanges"] if e["url"] == f"http://{target}/")
        if len(traced) == 2:
            break
        time.sleep(0.05)
    assert traced == [("CONNECT", "allowed", 200), ("CONNECT", "delay", 429)]


def test_a_tunnel_passes_on_what_the_origin_says_first(proxy: httpx.Client) -> None:
    """Some protocols greet before the client speaks (SMTP, SSH): the greeting comes through."""

    with tcp_origin("127.0.5.9", greet_first) as port:
        sock, head = connect(proxy, f"127.0.5.9:{port}")
        with sock:
            assert head.startswith(b"HTTP/1.1 200"), head
            got = head.partition(b"\r\n\r\n")[2]
            while b"220 greetings\r\n" not in got:
                got += sock.recv(4096)
            sock.sendall(b"quit\r\n")
            while b"QUIT" not in got:
                got += sock.recv(4096)
        assert got == b"220 greetings\r\nQUIT\r\n"


def test_a_tunnel_to_a_site_that_disallows_everything_is_refused(proxy: httpx.Client) -> None:
    robots = Reply(200, b"User-agent: *\nDisallow: /\n")
    with serve(Site("127.0.5.2", {"/robots.txt": robots, "/page": PAGE})) as site:
        sock, head = connect(proxy, f"127.0.5.2:{site.port}")
        with sock:
            head += read_all(sock)
    assert head.startswith(b"HTTP/1.1 403") and b"Disallow: /" in head
    assert site.requests == ["/robots.txt"]


def test_bad_and_looping_tunnels(proxy: httpx.Client) -> None:
    sock, head = connect(proxy, "no-port")
    sock.close()
    assert head.startswith(b"HTTP/1.1 400")
    host, port = proxy_address(proxy)
    sock, head = connect(proxy, f"{host}:{port}")
    sock.close()
    assert head.startswith(b"HTTP/1.1 508")


def test_ordered_mode_answers_one_clients_requests_in_arrival_order(proxy: httpx.Client
                                                                     ) -> None:
    with serve(Site("127.0.5.3", {"/robots.txt": Reply(404), "/a": PAGE, "/b": PAGE,
                                  "/c": PAGE})) as site:
        assert proxy.put("/delays/127.0.5.3", json={"delay": 300}).status_code == 200
        # Sent 50 ms apart on connections opened first, from one thread: the proxy sees them
        # in this order, and must answer them in it.
        answers = send_staggered(proxy, [f"{site.origin}{path}" for path in ("/a", "/b", "/c")],
                                 {"X-Polite-Mode": "ordered", "X-Polite-Client": "crawler-7"},
                                 0.05)
    assert [status for status, _ in answers] == [200, 200, 200]
    finished = [at for _, at in answers]
    assert finished[0] < finished[1] < finished[2]
    assert site.requests[1:] == ["/a", "/b", "/c"]
    # Held, not refused: the site saw them 300 ms apart (its own arrival stamps; when the
    # client read each answer depends on how busy the machine is).
    times = [at for at, path in site.arrivals if path != "/robots.txt"]
    assert all(b - a >= 0.3 - 0.01 for a, b in itertools.pairwise(times)), times


def test_ordered_mode_times_out_behind_a_long_wait(proxy: httpx.Client) -> None:
    late_answered = threading.Event()

    def after_late() -> Reply:  # /b is unanswered until the request behind it has its 504
        late_answered.wait(30)
        return PAGE

    with serve(Site("127.0.5.4", {"/robots.txt": Reply(404), "/a": PAGE,
                                  "/b": after_late})) as site:
        assert proxy.put("/delays/127.0.5.4", json={"delay": 2000}).status_code == 200
        with httpx.Client(proxy=str(proxy.base_url).rstrip("/"), trust_env=False,
                          timeout=30) as client:
            headers = {"X-Polite-Mode": "ordered", "X-Polite-Client": "c2"}
            assert client.get(f"{site.origin}/a", headers=headers).status_code == 200
            held = threading.Thread(target=client.get, args=(f"{site.origin}/b",),
                                    kwargs={"headers": headers})
            held.start()
            # in the client's order once the proxy counts it (queued for its slot, or sent)
            assert until_counted(proxy, 1), "the held request did not reach the proxy"
            with httpx.Client(proxy=str(proxy.base_url).rstrip("/"), trust_env=False,
                              timeout=30) as other:
                late = other.get(f"{site.origin}/a", headers={**headers,
                                                              "X-Polite-Timeout": "0.3"})
            late_answered.set()
            held.join(30)
            bad = client.get(f"{site.origin}/a", headers={"X-Polite-Timeout": "soon"})
    assert late.status_code == 504 and "c2" in late.text
    assert bad.status_code == 400


async def _hold(host: str, port: int, count: int, url: str) -> list[bytes]:
    connections = [await asyncio.open_connection(host, port) for _ in range(count)]
    request = f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    answers: list[bytes] = []
    for _ in range(2):  # every connection asks twice: they are all held open between
        for _, writer in connections:
            writer.write(request)
        for reader, _ in connections:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            answers.append(head.split(b"\r\n")[0])
    for _, writer in connections:
        writer.close()
    return answers


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_a_thousand_client_connections_at_once() -> None:
    cached = Reply(200, b"x" * 1024, {"Cache-Control": "max-age=600"})
    with serve(Site("127.0.5.5", {"/robots.txt": Reply(404), "/page": cached})) as site, \
            polite_serve_process("--store", "memory://", "--allow-private") as (api, process):
        url = f"{site.origin}/page"
        host, port = proxy_address(api)
        asyncio.run(_hold(host, port, 50, url))  # warm: the page cached, code paths run
        before = _rss_kib(process.pid)
        answers = asyncio.run(_hold(host, port, 1000, url))
        after = _rss_kib(process.pid)
        assert api.get("/health").status_code == 200
    assert len(answers) == 2000 and all(a.startswith(b"HTTP/1.1 200 ") for a in answers)
    assert site.requests.count("/page") == 1
    assert after - before < 100 * 1024, (before, after)  # KiB: well under 100 KiB a connection


def test_ordered_mode_a_client_name_claimed_from_another_address_holds_nothing(
        proxy: httpx.Client) -> None:
    """X-Polite-Client once named a queue whoever sent it: a request from another address
    claiming a crawler's name, held for its slot, held the crawler's requests behind it."""
    port = int(proxy.base_url.port or 0)
    claim = {"X-Polite-Mode": "ordered", "X-Polite-Client": "crawler-9"}

    def send(source: str, url: str, headers: dict[str, str]) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30,
                                        source_address=(source, 0))
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        sock.sendall(f"GET {url} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
        return sock

    with serve(Site("127.0.61.40", {"/robots.txt": Reply(404), "/slow": PAGE})) as slow, \
            serve(Site("127.0.61.41", {"/robots.txt": Reply(404), "/page": PAGE})) as fast:
        assert proxy.put("/delays/127.0.61.40", json={"delay": 10_000}).status_code == 200
        assert proxy.put("/delays/127.0.61.41", json={"delay": 0}).status_code == 200
        with httpx.Client(proxy=str(proxy.base_url).rstrip("/"), trust_env=False,
                          timeout=30) as client:
            assert client.get(f"{slow.origin}/slow").status_code == 200  # the slot is taken
        # From another address, in the crawler's name: held about 10 s for the slot.
        squatter = send("127.0.61.42", f"{slow.origin}/slow",
                        {**claim, "X-Polite-Timeout": "15"})
        try:
            assert until_counted(proxy, 1), "the squatter did not reach the proxy"  # queued
            crawler = send("127.0.61.43", f"{fast.origin}/page",
                           {**claim, "X-Polite-Timeout": "3"})
            with crawler:
                answer = crawler.recv(4096)
        finally:
            squatter.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert fast.requests[-1] == "/page"

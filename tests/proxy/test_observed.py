"""What the dashboard and ``/trace`` see of the proxy: every exchange, however it ends
(forwarded, refused by robots.txt, timed out behind a client's earlier request in ordered
mode, a tunnel refused or relayed), is traced once, and none leaves a request counted as
queued or in flight once it is over. A real ``polite serve`` and real sites on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.serving import polite_serve, until_counted
from tests.sites import Reply, Site, serve

PAGE = Reply(200, b"a page")
ROBOTS = Reply(200, b"User-agent: *\nDisallow: /private\n")


@pytest.fixture
def api() -> Iterator[httpx.Client]:
    # No adaptive delay: the host's spacing is the delay the test sets, whatever time its
    # answers took on a loaded machine (the tunnel after /b would otherwise wait for it).
    with polite_serve("--store", "memory://", "--allow-private", "--trace-size", "50",
                      "--default-delay-ms", "0", "--adaptive-factor", "0") as client:
        yield client


def tunnel(api: httpx.Client, target: str) -> bytes:
    """A CONNECT to ``target``, its answer's head; a tunnel opened is closed at once."""
    with socket.create_connection(("127.0.0.1", int(api.base_url.port or 0)),
                                  timeout=10) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head and (chunk := sock.recv(4096)):
            head += chunk
        return head


def settled(api: httpx.Client, count: int) -> tuple[list[dict[str, object]], dict[str, object]]:
    """The trace once it holds ``count`` exchanges (a tunnel's end is traced when the
    proxy sees it closed), and the node's summary then."""
    deadline = time.monotonic() + 30
    while True:
        exchanges = api.get("/trace").json()["exchanges"]
        if len(exchanges) >= count or time.monotonic() > deadline:
            return exchanges, api.get("/dashboard/summary").json()["node"]
        time.sleep(0.05)


def test_every_exchange_is_traced_once_and_leaves_no_count_behind(api: httpx.Client) -> None:
    late_answered = threading.Event()

    def after_late() -> Reply:  # /b is unanswered until the request behind it has its 504
        late_answered.wait(30)
        return PAGE

    site = Site("127.0.46.1", {"/robots.txt": ROBOTS, "/a": PAGE, "/b": after_late,
                               "/private": PAGE})
    closed = Site("127.0.46.2", {"/robots.txt": Reply(200, b"User-agent: *\nDisallow: /\n")})
    with serve(site), serve(closed), \
            httpx.Client(proxy=str(api.base_url).rstrip("/"), trust_env=False,
                         timeout=30) as client:
        assert client.get(f"{site.origin}/a").status_code == 200
        assert client.get(f"{site.origin}/private").status_code == 403
        assert api.put("/delays/127.0.46.1", json={"delay": 2000}).status_code == 200
        ordered = {"X-Polite-Mode": "ordered", "X-Polite-Client": "c9"}
        held = threading.Thread(target=client.get, args=(f"{site.origin}/b",),
                                kwargs={"headers": ordered})
        held.start()  # waits for the host's slot, two seconds after /private's check
        # in the client's order once the proxy counts it (queued, or sent once its slot
        # came): the next request of the client waits for its answer, held at the site
        assert until_counted(api, 1), "the held request did not reach the proxy"
        with httpx.Client(proxy=str(api.base_url).rstrip("/"), trust_env=False,
                          timeout=30) as other:
            late = other.get(f"{site.origin}/a", headers={**ordered, "X-Polite-Timeout": "0.3"})
        late_answered.set()
        assert late.status_code == 504
        held.join(30)
        assert tunnel(api, f"127.0.46.2:{closed.port}").startswith(b"HTTP/1.1 403")
        assert api.put("/delays/127.0.46.1", json={"delay": 0}).status_code == 200
        assert tunnel(api, f"127.0.46.1:{site.port}").startswith(b"HTTP/1.1 200")
        exchanges, node = settled(api, 6)
    seen = sorted((str(e["method"]), str(e["url"]).rsplit("/", 1)[-1] or "/",
                   str(e["decision"]), int(str(e["status"]))) for e in exchanges)
    assert seen == sorted([("GET", "a", "allowed", 200), ("GET", "private", "robots", 403),
                           ("GET", "b", "allowed", 200), ("GET", "a", "error", 504),
                           ("CONNECT", "/", "robots", 403), ("CONNECT", "/", "allowed", 200)])
    assert node["queued"] == 0 and node["inFlight"] == 0
    assert node["requests"] == 6

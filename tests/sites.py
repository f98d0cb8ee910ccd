"""Real HTTP servers on loopback for tests: one per "site", each on its own 127.0.0.x."""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import BinaryIO

from tests.arrival import next_arrival, stamp_arrivals
from tests.port_80 import holding_port_80


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Site:
    """Routes path -> Reply (or a callable giving one); records every request path."""

    host: str
    routes: dict[str, Reply | Callable[[], Reply]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    port: int = 0
    # (method, path, headers, body) of every request, for tests that look closer
    seen: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    # (time.monotonic() at arrival, path): politeness measured where it happens
    arrivals: list[tuple[float, str]] = field(default_factory=list)
    tls: ssl.SSLContext | None = None  # an https site, with this server-side context
    # (client address, port) of every request: the connection it came on
    peers: list[tuple[str, int]] = field(default_factory=list)
    # (arrival, reply, path) of every request, once answered: the reply's time taken as its
    # head is about to be written (after Reply.delay_s), so a request that arrived before
    # another's reply was surely sent while that one was in flight
    exchanges: list[tuple[float, float, str]] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"


def read_exactly(stream: BinaryIO, length: int) -> bytes:
    """``length`` bytes of an unbuffered stream (a single read may return fewer), or fewer
    if it ends first."""
    chunks: list[bytes] = []
    while length > 0:
        chunk = stream.read(length)
        if not chunk:
            break
        chunks.append(chunk)
        length -= len(chunk)
    return b"".join(chunks)


@contextmanager
def serve(site: Site) -> Iterator[Site]:
    """``site`` served on a thread of its own until the block ends (on port 80, with its
    address's network held: tests/port_80.py)."""
    with holding_port_80([site.host] if site.port == 80 else []), _serving(site):
        yield site


@contextmanager
def _serving(site: Site) -> Iterator[Site]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Unbuffered, so that the next request's first bytes wait in the socket, where the
        # kernel's stamp of their arrival can be read (tests/arrival.py).
        rbufsize = 0
        arrived_at: float | None = None

        def handle_one_request(self) -> None:
            self.arrived_at = None
            connection = self.connection
            if not isinstance(connection, ssl.SSLSocket):
                self.arrived_at = next_arrival(connection)
            elif connection.pending() == 0:
                # The next TLS record still waits in the socket: its packets' stamp is the
                # request's arrival, peeked through a second handle on the same socket
                # (bytes already decrypted are noted once read, below).
                with socket.socket(fileno=os.dup(connection.fileno())) as raw:
                    raw.settimeout(connection.gettimeout())
                    self.arrived_at = next_arrival(raw)
            else:
                return super().handle_one_request()
            if self.arrived_at is None:  # the client closed the connection
                self.close_connection = True
                return
            super().handle_one_request()

        def do_POST(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = read_exactly(self.rfile, length)
            arrived = time.monotonic() if self.arrived_at is None else self.arrived_at
            site.arrivals.append((arrived, self.path))
            site.seen.append((self.command, self.path, dict(self.headers.items()), body))
            site.requests.append(self.path)
            site.peers.append(self.client_address[:2])
            route = site.routes.get(self.path, Reply(404, b"not found"))
            reply = route() if callable(route) else route
            if reply.delay_s:
                time.sleep(reply.delay_s)
            site.exchanges.append((arrived, time.monotonic(), self.path))
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            with suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(reply.body)

        def log_message(self, format: str, *args: object) -> None:
            return

    class Server(ThreadingHTTPServer):
        # Room for a burst of connections while the accepting thread waits for its turn (a
        # loaded machine): past the standard library's 5, a connection's handshake is
        # dropped and tried again a second later, then three, and the site seems to stall.
        request_queue_size = 128

        def finish_request(self, request: socket.socket, client_address: object) -> None:
            if site.tls is not None:  # the handshake on the connection's own thread
                request.settimeout(10)
                try:
                    wrapped = site.tls.wrap_socket(request, server_side=True)
                except (ssl.SSLError, OSError):
                    return  # a client that did not trust this site's certificate
                with wrapped:
                    super().finish_request(wrapped, client_address)  # type: ignore[arg-type]
                return
            super().finish_request(request, client_address)  # type: ignore[arg-type]

    server = Server((site.host, site.port), Handler)
    stamp_arrivals(server.socket)
    server.daemon_threads = True
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def request_head(conn: socket.socket, timeout_s: float = 30.0) -> bytes | None:
    """A request's head as a bare origin reads it (what came up to its blank line, and any
    more that came with it), or None when the client closed first."""
    conn.settimeout(timeout_s)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        head += chunk
    return head


@contextmanager
def tcp_origin(host: str, handle: Callable[[socket.socket, threading.Event], None]
               ) -> Iterator[int]:
    """A bare TCP server on ``host``: each connection is given to ``handle`` (with the event
    that says the server is stopping) on a thread of its own. Yields the port."""
    listener = socket.socket()
    listener.bind((host, 0))
    listener.listen(64)
    listener.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=handle, args=(conn, stop), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def greet_first(conn: socket.socket, stop: threading.Event) -> None:
    """A :func:`tcp_origin` handler for a protocol that greets before the client speaks
    (SMTP, SSH): ``220 greetings``, then what comes is echoed in capitals. A request for
    robots.txt gets a 404."""
    with conn:
        conn.settimeout(0.3)
        try:
            first = conn.recv(4096)
        except TimeoutError:
            first = b""
        if first.startswith(b"GET /robots.txt"):
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        conn.sendall(b"220 greetings\r\n")
        conn.settimeout(5)
        with suppress(OSError):
            while data := conn.recv(4096):
                conn.sendall(data.upper())

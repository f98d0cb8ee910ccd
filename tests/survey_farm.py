"""A farm of named sites for the survey: one asyncio HTTP/1.1 server on port 80 of many
loopback addresses, answering by the Host header, recording every request's arrival
(the kernel's stamp of its first bytes on time.monotonic()'s scale, host, path) where it
happens. Pages can stall (accept, never answer) or reset the connection. Names reach their
address through a hosts file (:meth:`hosts`).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from tests.arrival import ANCILLARY_BYTES, arrived, stamp_arrivals
from tests.port_80 import holding_port_80


@dataclass(frozen=True)
class Page:
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    stall: bool = False  # read the request, never answer
    reset: bool = False  # read the request, close with a TCP reset


NOT_FOUND = Page(404, b"not found")
IDLE_S = 5.0  # a kept-alive connection with no request this long is closed
HEAD_LIMIT = 65536  # a request head longer than this closes the connection
Router = Callable[[str, str], Page | None]  # (host, path) -> page


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


class _Wire:
    """One connection's bytes as they come, each read with the kernel's stamp of when it
    arrived (tests/arrival.py), so a request's arrival is when its first bytes reached the
    machine, not when this farm's loop got round to them."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self._buffer = b""
        self._buffer_arrived = 0.0

    async def receive(self) -> bytes:
        """The next bytes (empty once the peer closed), their arrival noted."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, ancillary, _, _ = self.connection.recvmsg(65536, ANCILLARY_BYTES)
            except (BlockingIOError, InterruptedError):
                ready: asyncio.Future[None] = loop.create_future()
                loop.add_reader(self.connection, _wake, ready)
                try:
                    await ready
                finally:
                    loop.remove_reader(self.connection)
                continue
            if data and not self._buffer:
                self._buffer_arrived = arrived(ancillary)
            return data

    async def head(self) -> tuple[bytes | None, float]:
        """A request's head (None if the connection ended or the head is too long) and when
        its first bytes arrived. Bodies are not read: the farm serves GET."""
        while b"\r\n\r\n" not in self._buffer:
            if len(self._buffer) > HEAD_LIMIT:
                return None, 0.0
            data = await self.receive()
            if not data:
                return None, 0.0
            self._buffer += data
        head, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        return head + b"\r\n\r\n", self._buffer_arrived


@dataclass
class Farm:
    """``sites``: name -> (address, {path: page}); ``router``: pages for names not listed
    (a farm of 100,000 names answered from their name); ``extra_hosts``: hosts-file lines
    for names that resolve but have no listener (connection refused)."""

    sites: dict[str, tuple[str, dict[str, Page]]] = field(default_factory=dict)
    router: Router | None = None
    router_addresses: tuple[str, ...] = ()
    port: int = 80
    extra_hosts: dict[str, str] = field(default_factory=dict)
    arrivals: list[tuple[float, str, str]] = field(default_factory=list)
    record: bool = True
    requests_total: int = 0
    _by_address: dict[str, dict[str, Page]] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def add(self, name: str, address: str, routes: dict[str, Page]) -> None:
        self.sites[name] = (address, routes)

    def hosts(self) -> str:
        lines = [f"{address} {name}" for name, (address, _) in self.sites.items()]
        lines += [f"{address} {name}" for name, address in self.extra_hosts.items()]
        return "\n".join(lines) + "\n"

    def requests(self, host: str) -> list[str]:
        return [path for _, name, path in self.arrivals if name == host]

    def page(self, host: str, path: str) -> Page:
        site = self.sites.get(host)
        if site is None and host[:1].isdigit():  # asked by address: the site there
            if not self._by_address:
                self._by_address.update((a, r) for a, r in self.sites.values())
            routes = self._by_address.get(host)
            site = None if routes is None else (host, routes)
        if site is not None:
            return site[1].get(path, NOT_FOUND)
        if self.router is not None:
            return self.router(host, path) or NOT_FOUND
        return NOT_FOUND

    async def _handle(self, connection: socket.socket) -> None:
        """Requests on one connection, kept alive (as web servers do) until the client
        closes it or leaves it idle for ``IDLE_S``."""
        wire = _Wire(connection)
        try:
            while await self._answer(wire):
                pass
        finally:
            connection.close()

    async def _answer(self, wire: _Wire) -> bool:
        """Read a request and answer it; whether the connection stays open."""
        try:
            async with asyncio.timeout(IDLE_S):
                head, arrived = await wire.head()
        except (ConnectionError, TimeoutError, OSError):
            return False
        if head is None:
            return False
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        path = parts[1] if len(parts) > 1 else "/"
        host = ""
        close = False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "host":
                host = value.strip().lower().rsplit(":", 1)[0]
            elif name == "connection":
                close = value.strip().lower() == "close"
        self.requests_total += 1
        if self.record:
            self.arrivals.append((arrived, host, path))
        page = self.page(host, path)
        if page.stall:
            with suppress(Exception):
                while await wire.receive():  # until the client gives up
                    pass
            return False
        if page.reset:
            wire.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            return False
        headers = "".join(f"{k}: {v}\r\n" for k, v in page.headers)
        if close:
            headers += "Connection: close\r\n"
        try:
            await asyncio.get_running_loop().sock_sendall(wire.connection, (
                f"HTTP/1.1 {page.status} X\r\nContent-Length: {len(page.body)}\r\n"
                f"{headers}\r\n").encode("latin-1") + page.body)
        except OSError:
            return False
        return not close

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            connection, _ = await loop.sock_accept(listener)
            connection.setblocking(False)
            task = loop.create_task(self._handle(connection))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @contextmanager
    def running(self) -> Iterator[Farm]:
        """Serve in a thread of its own (its own event loop) until the block ends (on port
        80, with its addresses' networks held: tests/port_80.py)."""
        addresses = {a for a, _ in self.sites.values()} | set(self.router_addresses)
        with holding_port_80(addresses if self.port == 80 else []), self._running():
            yield self

    @contextmanager
    def _running(self) -> Iterator[Farm]:
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        listeners: list[socket.socket] = []
        failure: list[BaseException] = []

        async def start() -> None:
            addresses = sorted({a for a, _ in self.sites.values()} | set(self.router_addresses))
            for address in addresses:
                listener = socket.socket()
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((address, self.port))
                listener.listen(1024)
                listener.setblocking(False)
                stamp_arrivals(listener)
                listeners.append(listener)
                self._tasks.add(loop.create_task(self._accept(listener)))

        def main() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(start())
            except BaseException as exc:  # reported to the caller
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            for task in list(self._tasks):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            for listener in listeners:
                listener.close()
            loop.close()

        thread = threading.Thread(target=main, daemon=True)
        thread.start()
        ready.wait(30)
        if failure:
            raise failure[0]
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

"""A farm of named sites for the survey: one asyncio HTTP/1.1 server on port 80 of many
loopback addresses, answering by the Host header, recording every request's arrival
(``time.monotonic()``, host, path) where it happens. Pages can stall (accept, never answer)
or reset the connection. Names reach their address through a hosts file (:meth:`hosts`).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Page:
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    stall: bool = False  # read the request, never answer
    reset: bool = False  # read the request, close with a TCP reset


NOT_FOUND = Page(404, b"not found")
IDLE_S = 5.0  # a kept-alive connection with no request this long is closed
Router = Callable[[str, str], Page | None]  # (host, path) -> page


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

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> None:
        """Requests on one connection, kept alive (as web servers do) until the client
        closes it or leaves it idle for ``IDLE_S``."""
        try:
            while await self._answer(reader, writer):
                pass
        finally:
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> bool:
        """Read a request and answer it; whether the connection stays open."""
        try:
            async with asyncio.timeout(IDLE_S):  # no task of its own: the arrival is noted
                head = await reader.readuntil(b"\r\n\r\n")  # as soon as the loop sees it
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                TimeoutError):
            return False
        arrived = time.monotonic()
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
                await reader.read()  # until the client gives up
            return False
        if page.reset:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        headers = "".join(f"{k}: {v}\r\n" for k, v in page.headers)
        if close:
            headers += "Connection: close\r\n"
        writer.write(f"HTTP/1.1 {page.status} X\r\nContent-Length: {len(page.body)}\r\n"
                     f"{headers}\r\n".encode("latin-1"))
        writer.write(page.body)
        try:
            await writer.drain()
        except ConnectionError:
            return False
        return not close

    @contextmanager
    def running(self) -> Iterator[Farm]:
        """Serve in a thread of its own (its own event loop) until the block ends."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        servers: list[asyncio.Server] = []
        failure: list[BaseException] = []

        async def start() -> None:
            addresses = sorted({a for a, _ in self.sites.values()} | set(self.router_addresses))
            for address in addresses:
                servers.append(await asyncio.start_server(
                    self._handle, address, self.port, reuse_address=True, backlog=1024))

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
            for server in servers:
                server.close()
            loop.run_until_complete(asyncio.sleep(0))
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

"""The forward proxy against a direct connection and proxy.py, in one run, on loopback.

A 1 KB origin (an asyncio server answering every request from memory, kept alive) on
127.0.4.1, with a robots.txt of two groups that polite checks every request against;
``polite serve`` started as a user starts it, with the origin's delay set to 0 and the
adaptive delay off, so that every request is forwarded (cache misses: each one reaches
the origin; the page is not cacheable), and again on a page the origin marks
``max-age=3600`` (cache hits: answered from the page cache, the origin asked once); proxy.py
(``proxy`` from PyPI) when installed. The origin and the clients are asyncio protocols on
uvloop (when installed), parsing no more than they must, so that the figures are the
servers' and not a client library's, and the load generator leaves the machine's cores to
the servers measured:

* added latency: the median of sequential requests over one kept-alive connection, minus the
  direct median;
* requests per second with 1 and 32 connections, each sending its next request when the
  last answer arrived;
* each server's CPU microseconds a request at 1 and 32 connections, and at 32 the share of a
  core the server used and the share the origin and the load generator used together: the
  side near 100 % is the limit; with neither near it (other work on the machine), the rate
  is the scheduler's, and the CPU a request is the figure to read.

Where ``taskset`` exists and there are two cores, the proxies measured (polite, proxy.py)
run on the second core and the origin and the load generator on the first: each proxy's rate
at 32 connections is then what one core of its own serves, rather than what is left of two
cores once the scheduler has placed the origin and the clients beside it
(``POLITE_BENCH_NO_PIN=1``: no pinning).

Run: ``.venv/bin/python bench/proxy_vs_peers.py [--seconds S] [--rounds R]``; all servers run
through the whole run, and each round measures every path in turn, so that a noisy machine
weighs on all of them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TypeVar

import httpx

BODY = b"x" * 1024
T = TypeVar("T")
ORIGIN = r"""
import asyncio, ssl, sys
try:
    import uvloop
except ImportError:
    uvloop = None
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"
            + b"x" * 1024)
CACHED = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n"
          b"Cache-Control: max-age=3600\r\n\r\n" + b"x" * 1024)
ROBOTS = (b"User-agent: *\nDisallow: /private/\nDisallow: /tmp/\nAllow: /private/ok\n\n"
          b"User-agent: otherbot\nDisallow: /\n\nSitemap: http://127.0.4.1/sitemap.xml\n")
ROBOTS_TXT = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
              % len(ROBOTS) + ROBOTS)
class Origin(asyncio.Protocol):
    # Requests without a body, answered from memory as their heads arrive.
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""
    def data_received(self, data):
        buffer, answers = self.buffer + data, []
        while (end := buffer.find(b"\r\n\r\n")) >= 0:
            line = buffer[:buffer.find(b"\r\n")]
            answers.append(ROBOTS_TXT if b"/robots.txt" in line else
                           CACHED if b"/cached" in line else RESPONSE)
            buffer = buffer[end + 4:]
        if len(buffer) > 65536:
            self.transport.close()
        self.buffer = buffer
        if answers:
            self.transport.write(b"".join(answers))
async def main():
    context = None  # https with a key and certificate chain (PEM) as the second argument
    if len(sys.argv) > 2:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[2])
        context.set_alpn_protocols(["http/1.1"])
    host = sys.argv[1] if len(sys.argv) > 1 else "127.0.4.1"
    server = await asyncio.get_running_loop().create_server(Origin, host, 0, ssl=context)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
(uvloop.run if uvloop else asyncio.run)(main())
"""


def pinned(core: int) -> list[str]:
    """The prefix that runs a command on one core (``taskset -c``), where taskset exists and
    there are two cores to share out; empty otherwise (and with ``POLITE_BENCH_NO_PIN=1``)."""
    if (shutil.which("taskset") is None or (os.cpu_count() or 1) < 2
            or os.environ.get("POLITE_BENCH_NO_PIN")):
        return []
    return ["taskset", "-c", str(core)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def started(command: list[str], port: int | None = None,
            pids: list[int] | None = None) -> Iterator[str]:
    """Runs ``command`` until the block ends: once its first line is out, or once ``port``
    answers; its process id goes to ``pids``."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    if pids is not None:
        pids.append(proc.pid)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline() if port is None else ""
        if port is not None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
        yield first.strip()
    finally:
        proc.terminate()
        proc.wait(20)


class Client:
    """One kept-alive connection sending GETs and reading Content-Length answers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 request: bytes) -> None:
        self.reader, self.writer, self.request = reader, writer, request

    async def get(self) -> None:
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.decode("latin-1").split("\r\n")[0])
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        with suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()


class Connection(asyncio.Protocol):
    """:class:`Client` as a protocol on the loop's own transport: no stream objects between
    the socket and the parse, so that the load generator takes as little of the machine
    as it can and the servers measured get the rest."""

    def __init__(self, request: bytes) -> None:
        self.request = request
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.need = 0  # bytes of the answer in the buffer (its head and body); 0: unknown

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._answered()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("the server closed the connection"))

    def _answered(self) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if not self.need:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end])
            if not head.startswith(b"HTTP/1.1 200"):
                waiter.set_exception(RuntimeError(head.decode("latin-1").split("\r\n")[0]))
                return
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            self.need = end + 4 + length
        if len(self.buffer) >= self.need:
            del self.buffer[:self.need]
            self.need = 0
            waiter.set_result(None)

    async def get(self) -> None:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(self.request)
        await self.waiter

    async def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def connect(via: tuple[str, int] | None, origin: tuple[str, int],
                  path: str = "/page") -> Connection:
    host, port = via or origin
    target = (f"http://{origin[0]}:{origin[1]}{path}" if via else path).encode()
    request = (b"GET " + target + b" HTTP/1.1\r\nHost: " + f"{origin[0]}:{origin[1]}".encode()
               + b"\r\nUser-Agent: benchbot/1.0\r\n\r\n")
    _, connection = await asyncio.get_running_loop().create_connection(
        lambda: Connection(request), host, port)
    return connection


def run(coroutine: Awaitable[T]) -> T:
    """``asyncio.run`` on uvloop when it is installed (the loop polite serve runs on, and
    the cheaper one for the load generator)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)  # type: ignore[arg-type]
    return uvloop.run(coroutine)  # type: ignore[arg-type]


async def latency(open_client: Callable[[], Awaitable[Client | Connection]], count: int
                  ) -> float:
    """The median time of ``count`` sequential requests on one kept-alive connection."""
    client = await open_client()
    for _ in range(50):
        await client.get()
    times = []
    for _ in range(count):
        started_at = time.perf_counter()
        await client.get()
        times.append(time.perf_counter() - started_at)
    await client.close()
    return statistics.median(times)


async def throughput(open_client: Callable[[], Awaitable[Client | Connection]],
                     connections: int, seconds: float) -> float:
    """Requests per second over ``connections`` connections, each sending its next request
    when the last answer arrived."""
    clients = await asyncio.gather(*(open_client() for _ in range(connections)))
    for client in clients:
        await client.get()  # the first request on a connection is not the steady state
    done = 0
    stop_at = time.perf_counter() + seconds

    async def run(client: Client | Connection) -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await client.get()
            done += 1

    started_at = time.perf_counter()
    await asyncio.gather(*(run(c) for c in clients))
    elapsed = time.perf_counter() - started_at
    await asyncio.gather(*(c.close() for c in clients))
    return done / elapsed


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` and its children so far (Linux's
    /proc; 0 elsewhere)."""
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0
    total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total + sum(cpu_seconds(int(child)) for child in children)


def measure(via: tuple[str, int] | None, origin: tuple[str, int], seconds: float,
            path: str = "/page", server: int | None = None,
            origin_pid: int | None = None) -> tuple[float, ...]:
    """The median latency, the rates at 1 and 32 connections and, with the ``server``'s
    process id, its CPU microseconds a request at 1 and at 32 connections (what a loaded
    machine moves least: the share of the cores a process gets does not change it); with
    the origin's too, the share of a core each side used at 32 connections: the server's,
    and the origin's and the load generator's together (the first core's, when pinned: near
    100 % there, the rate measures the load generator, not the server)."""
    def open_client() -> Awaitable[Connection]:
        return connect(via, origin, path)

    def cpu() -> float:
        return cpu_seconds(server) if server is not None else 0.0

    median = run(latency(open_client, 2000))
    before = cpu()
    one = run(throughput(open_client, 1, seconds))
    one_cpu = cpu() - before
    before = cpu()
    other_before = (time.process_time() + cpu_seconds(origin_pid) if origin_pid is not None
                    else 0.0)
    started_at = time.perf_counter()
    many = run(throughput(open_client, 32, seconds))
    elapsed = time.perf_counter() - started_at
    if server is None:
        return median, one, many
    per_request = 1e6 / seconds
    figures = (median, one, many, one_cpu / one * per_request,
               (cpu() - before) / many * per_request)
    if origin_pid is None:
        return figures
    # the elapsed time includes opening and closing the 32 connections: the shares are a
    # little under what the measured seconds themselves used
    other = time.process_time() + cpu_seconds(origin_pid) - other_before
    return (*figures, (cpu() - before) / elapsed * 100, other / elapsed * 100)


def report(results: dict[str, list[tuple[float, ...]]], peer: str, rates: list[str]
           ) -> None:
    """Prints the table of medians and polite's per-round ratios against ``peer``. Each
    figure: the latency (s), then the rates named by ``rates`` (at 1 and at 32 connections
    first); ``results`` has a "direct" path and a "polite (miss)" path, and ``peer``'s when
    it could be run."""

    def median(name: str, column: int) -> float:
        return statistics.median(r[column] for r in results[name])

    direct_latency, direct_many = median("direct", 0), median("direct", 2)
    print("| path | median latency | added | " + " | ".join(rates[:2]) + " | vs direct (32) |"
          + "".join(f" {rate} |" for rate in rates[2:]))
    print("|---|---:|---:|---:|---:|---:|" + "---:|" * len(rates[2:]))
    for name in results:
        latency_s, *figures = (median(name, c) for c in range(len(rates) + 1))
        print(f"| {name} | {latency_s * 1e3:.3f} ms | {(latency_s - direct_latency) * 1e3:+.3f}"
              f" ms | {figures[0]:,.0f} | {figures[1]:,.0f} | {figures[1] / direct_many:.2f} |"
              + "".join(f" {figure:,.0f} |" for figure in figures[2:]))
    if "polite (hit)" in results:
        hits = [hit[2] / miss[2] for hit, miss
                in zip(results["polite (hit)"], results["polite (miss)"], strict=True)]
        print(f"\npolite's hits / its misses at 32 connections, per round (min / median): "
              f"{min(hits):.2f}x / {statistics.median(hits):.2f}x")
    if peer not in results:
        return
    print(f"\npolite / {peer} on misses, per round (min / median):")
    for column, label in enumerate(rates, start=1):
        ratios = [ours[column] / theirs[column] for ours, theirs
                  in zip(results["polite (miss)"], results[peer], strict=True)]
        print(f"  {label}: {min(ratios):.2f}x / {statistics.median(ratios):.2f}x")
    added = [(ours[0] - direct[0]) / (theirs[0] - direct[0]) for ours, theirs, direct
             in zip(results["polite (miss)"], results[peer], results["direct"], strict=True)]
    print(f"  added latency, polite over {peer}: {min(added):.2f}x / "
          f"{statistics.median(added):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput figure")
    parser.add_argument("--rounds", type=int, default=3,
                        help="each path measured this many times, the paths in turn")
    parser.add_argument("--no-peer", action="store_true",
                        help="polite alone (bench/quick.py compares two trees of polite)")
    parser.add_argument("--json", type=Path, help="also write polite's figures here")
    args = parser.parse_args()
    binary = shutil.which("proxy") or shutil.which("proxy", path=str(
        Path(sys.executable).parent))
    clients, servers_core = pinned(0), pinned(1)
    if clients:  # this process is the load generator: on the origin's core
        os.sched_setaffinity(0, {0})
    with ExitStack() as stack:
        pids: list[int] = []  # the origin's, polite's, proxy.py's
        origin_port = stack.enter_context(started([*clients, sys.executable, "-c", ORIGIN],
                                                  pids=pids))
        origin = ("127.0.4.1", int(origin_port))
        port = free_port()
        stack.enter_context(started([*servers_core, sys.executable, "-m", "polite", "serve",
                                     "--port",
                                     str(port), "--store", "memory://", "--allow-private",
                                     "--agent", "benchbot", "--adaptive-factor", "0"], port,
                                    pids=pids))
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False)
        api.put(f"/delays/{origin[0]}", json={"delay": 0}).raise_for_status()
        api.close()  # no connection left open beside the ones measured
        paths: dict[str, tuple[tuple[str, int] | None, str]] = {
            "direct": (None, "/page"),
            "polite (miss)": (("127.0.0.1", port), "/page"),
            "polite (hit)": (("127.0.0.1", port), "/cached"),
        }
        if args.no_peer:
            pass
        elif binary is None:
            print("proxy.py is not installed (pip install proxy.py): its row is skipped")
        else:
            peer_port = free_port()
            stack.enter_context(started([*servers_core, binary, "--hostname", "127.0.0.1", "--port",
                                         str(peer_port), "--num-workers", "1"], peer_port,
                                        pids=pids))
            paths["proxy.py"] = (("127.0.0.1", peer_port), "/page")
        # whose CPU a path's requests cost: the server its client talks to
        servers = dict(zip(["direct", "polite (miss)", "proxy.py"], [pids[0], pids[1],
                                                                    pids[-1]], strict=True))
        servers["polite (hit)"] = pids[1]
        results: dict[str, list[tuple[float, ...]]] = {name: [] for name in paths}
        for round_ in range(args.rounds):
            for name, (via, path) in paths.items():
                results[name].append(measure(via, origin, args.seconds, path, servers[name],
                                             pids[0]))
            print(f"round {round_ + 1} of {args.rounds}: " + ", ".join(
                f"{name} {results[name][-1][2]:,.0f}/s" for name in paths) + " at 32",
                file=sys.stderr)

    print(f"\nmedians of {args.rounds} rounds, the paths measured in turn in each round\n")
    report(results, "proxy.py", ["req/s, 1 conn", "req/s, 32 conns",
                                 "server CPU µs/req (1)", "server CPU µs/req (32)",
                                 "server busy % (32)", "origin + clients busy % (32)"])
    if args.json:
        def median(name: str, column: int) -> float:
            return statistics.median(r[column] for r in results[name])

        args.json.write_text(json.dumps({
            "proxy added latency ms": (median("polite (miss)", 0) - median("direct", 0)) * 1e3,
            "proxy miss req/s 1 conn": median("polite (miss)", 1),
            "proxy miss req/s 32 conns": median("polite (miss)", 2),
            "proxy hit req/s 32 conns": median("polite (hit)", 2),
        }))

if __name__ == "__main__":
    main()

"""The memory of ``polite serve`` with hostile robots.txt files, and /health beside them.

Starts ``polite serve`` (memory store, ``--allow-private``) and one loopback origin on
``--origins`` ports, each serving the same robots.txt of ``--lines`` lines like
``Disallow: /p{i}/*x{i}$`` (cut at the 500 KiB cap by the service), asks one decision per
origin, and reports the service's resident memory (VmRSS) before and after, beside its
``--robots-memory-mb`` budget. Then it times ``GET /health`` while a
``POST /politeness/verbose?purpose=train-ai`` of 50 URLs works on a file of 14,000
``Content-Usage: /*x{n}*y`` lines. Linux only (reads /proc). Run:
``.venv/bin/python bench/robots_memory.py [--origins 120] [--budget-mb 512]``.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

HOST = "127.74.13.1"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def servers_on_a_thread(handle: Handler, host: str, count: int) -> list[int]:
    """``count`` listening ports on ``host``, each connection given to ``handle``, on an
    event loop of their own thread (a bench's origins, apart from the process measured)."""
    loop = asyncio.new_event_loop()
    ports: list[int] = []
    ready = threading.Event()

    async def start() -> None:
        for _ in range(count):
            server = await asyncio.start_server(handle, host, 0)
            ports.append(server.sockets[0].getsockname()[1])
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    ready.wait(30)
    return ports


def origins(bodies: dict[int, bytes], count: int) -> list[int]:
    """``count`` listening ports on HOST, each answering robots.txt with ``bodies[port]``
    (or the body under key 0), on an event loop of their own thread."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        port = writer.get_extra_info("sockname")[1]
        body = bodies.get(port, bodies[0]) if request.startswith(b"GET /robots.txt") else b""
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    return servers_on_a_thread(handle, HOST, count)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--origins", type=int, default=120)
    options.add_argument("--lines", type=int, default=30_000)
    options.add_argument("--budget-mb", type=float, default=None,
                         help="--robots-memory-mb for the service (its default when absent)")
    args = options.parse_args()
    hostile = ("User-agent: *\n" + "".join(f"Disallow: /p{i}/*x{i}$\n"
                                           for i in range(args.lines))).encode()
    usage = ("User-agent: *\nAllow: /\n" + "".join(f"Content-Usage: /*x{n}*y train-ai=n\n"
                                                   for n in range(14_000))).encode()
    bodies = {0: hostile}
    ports = origins(bodies, args.origins + 1)
    bodies[ports[-1]] = usage
    port = free_port()
    command = [sys.executable, "-m", "polite", "serve", "--port", str(port), "--store",
               "memory://", "--allow-private", "--default-delay-ms", "0"]
    if args.budget_mb is not None:
        command += ["--robots-memory-mb", str(args.budget_mb)]
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc, \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                         timeout=600) as api:
        try:
            for _ in range(200):
                try:
                    if api.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            before = rss_mib(proc.pid)
            started = time.perf_counter()
            for p in ports[:-1]:
                api.post("/politeness", json=[f"http://{HOST}:{p}/p7/ax7"])
            seconds = time.perf_counter() - started
            after = rss_mib(proc.pid)
            print(f"{args.origins} origins, robots.txt of {len(hostile):,} bytes "
                  f"({args.lines:,} lines, read to the cap): RSS {before:.0f} MiB before, "
                  f"{after:.0f} MiB after ({seconds:.1f} s); budget "
                  f"{args.budget_mb or 'default'} MiB")
            urls = [f"http://{HOST}:{ports[-1]}/page{n}x{n}y" for n in range(0, 14_000, 280)]
            done = threading.Event()
            took: list[float] = []

            def verbose() -> None:
                t = time.perf_counter()
                api.post("/politeness/verbose", json=urls, params={"purpose": "train-ai"})
                took.append(time.perf_counter() - t)
                done.set()

            threading.Thread(target=verbose, daemon=True).start()
            health: list[float] = []
            while not done.is_set():
                t = time.perf_counter()
                api.get("/health")
                health.append(time.perf_counter() - t)
            done.wait()
            print(f"verbose call of 50 URLs on 14,000 Content-Usage lines: {took[0]:.2f} s; "
                  f"/health answered {len(health)} times meanwhile, slowest "
                  f"{max(health) * 1000:.0f} ms")
        finally:
            proc.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Decisions per second of ``polite serve``, and its memory per known host.

One run, everything real and on loopback:

* an origin farm: 10,000 "sites" on 10,000 addresses 127.1.x.y (one listener each, one
  process), each serving the same small robots.txt;
* ``polite serve`` started as a user starts it, once on an SQLite file and once on a real
  ``redis-server``;
* clients posting ``POST /politeness/verbose`` with 100 URLs per call, spread over the 10,000
  hosts, several calls in flight at once.

Reported per store: the cold pass (every host's robots.txt fetched, parsed and stored), warm
passes looking (``reserve=false``, seed 001's services) and claiming (``reserve=true``), and
the server's resident memory per known host after the cold pass.

Run: ``.venv/bin/python bench/serve_decisions.py [--hosts N] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROBOTS = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 1\n"
FARM = r"""
import asyncio, sys
ROBOTS = ROBOTS_BODY
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
            + str(len(ROBOTS)).encode() + b"\r\n\r\n" + ROBOTS)
async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                break
            writer.write(RESPONSE)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()
async def main():
    hosts, port = sys.argv[1].split(","), int(sys.argv[2])
    servers = [await asyncio.start_server(handle, host, port, backlog=64) for host in hosts]
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
""".replace("ROBOTS_BODY", repr(ROBOTS))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def host_addresses(count: int) -> list[str]:
    return [f"127.1.{n // 250}.{n % 250 + 1}" for n in range(count)]


@contextmanager
def process(command: list[str], ready: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if ready not in line:
            assert proc.stderr is not None
            raise RuntimeError(f"{command[:4]} did not start: {line}{proc.stderr.read()}")
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


@contextmanager
def redis(folder: Path) -> Iterator[str | None]:
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    port = free_port()
    proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no", "--dir", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def batches(hosts: list[str], port: int, calls: int, per_call: int, rng: random.Random
            ) -> list[list[str]]:
    """``calls`` batches of ``per_call`` URLs; each batch walks on through the hosts, so
    consecutive batches touch different hosts (as a crawler's frontier does)."""
    out = []
    at = 0
    for _ in range(calls):
        batch = []
        for _ in range(per_call):
            host = hosts[at % len(hosts)]
            at += 1
            path = "/private/x" if rng.random() < 0.1 else f"/page/{rng.randrange(10**6)}"
            batch.append(f"http://{host}:{port}{path}")
        out.append(batch)
    return out


async def drive(base: str, work: list[list[str]], *, reserve: bool, concurrency: int
                ) -> tuple[float, int]:
    """Send every batch, ``concurrency`` in flight; returns (seconds, URLs allowed)."""
    queue: asyncio.Queue[list[str]] = asyncio.Queue()
    for batch in work:
        queue.put_nowait(batch)
    allowed = 0
    params = {"reserve": "true"} if reserve else {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=600, trust_env=False,
                                 limits=limits) as client:

        async def worker() -> None:
            nonlocal allowed
            while not queue.empty():
                batch = queue.get_nowait()
                answer = await client.post("/politeness/verbose", json=batch, params=params)
                answer.raise_for_status()
                allowed += sum(v["allowed"] for v in answer.json())

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started, allowed


def measure(store: str, hosts: list[str], farm_port: int, args: argparse.Namespace
            ) -> dict[str, float]:
    port = free_port()
    command = [sys.executable, "-m", "polite", "serve", "--port", str(port), "--store", store,
               "--allow-private", "--agent", "benchbot"]
    rng = random.Random(7)
    with process(command, "listening on") as server:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                if httpx.get(base + "/health", trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        before = rss_kib(server.pid)
        cold_work = batches(hosts, farm_port, len(hosts) // args.per_call, args.per_call, rng)
        cold_s, _ = asyncio.run(drive(base, cold_work, reserve=False,
                                      concurrency=args.concurrency))
        after = rss_kib(server.pid)
        results = {"cold": len(hosts) / cold_s,
                   "kib_per_host": (after - before) / len(hosts)}
        for reserve in (False, True):
            best = 0.0
            for _ in range(args.repeats):
                work = batches(hosts, farm_port, args.calls, args.per_call, rng)
                seconds, _ = asyncio.run(drive(base, work, reserve=reserve,
                                               concurrency=args.concurrency))
                best = max(best, args.calls * args.per_call / seconds)
            results["reserve" if reserve else "look"] = best
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--per-call", type=int, default=100)
    parser.add_argument("--calls", type=int, default=300, help="calls per warm pass")
    parser.add_argument("--concurrency", type=int, default=4, help="calls in flight")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1,000 hosts, fewer calls")
    parser.add_argument("--guard", action="store_true",
                        help="the SQLite store alone, 500 hosts (bench/quick.py)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.quick or args.guard:
        args.hosts, args.calls, args.repeats = (500, 30, 1) if args.guard else (1000, 50, 1)
    hosts = host_addresses(args.hosts)
    farm_port = free_port()
    rows = []
    with tempfile.TemporaryDirectory() as folder, \
            process([sys.executable, "-c", FARM, ",".join(hosts), str(farm_port)], "ready"), \
            redis(Path(folder)) as redis_url:
        stores = [("SQLite", f"sqlite:///{folder}/bench.sqlite"), ("memory", "memory://")]
        if args.guard:
            del stores[1:]
        elif redis_url is None:
            print("redis-server not installed: the Redis row is skipped")
        else:
            stores.append(("Redis", redis_url))
        for name, url in stores:
            print(f"measuring {name} ...", flush=True)
            rows.append((name, measure(url, hosts, farm_port, args)))
    print()
    print(f"`POST /politeness/verbose`, {args.per_call} URLs per call, {args.hosts:,} hosts, "
          f"{args.concurrency} calls in flight, {os.cpu_count()} cores (client, server, "
          "origins and Redis share them)")
    print()
    print("| store | cold pass (robots.txt fetched) | look (decisions/s) | "
          "reserve (decisions/s) | memory per known host |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r['cold']:,.0f} hosts/s | {r['look']:,.0f} | "
              f"{r['reserve']:,.0f} | {r['kib_per_host']:.1f} KiB |")
    if args.json:
        args.json.write_text(json.dumps({
            f"serve {name} {figure}": r[key] for name, r in rows for figure, key in (
                ("cold hosts/s", "cold"), ("look decisions/s", "look"),
                ("reserve decisions/s", "reserve"))}))


if __name__ == "__main__":
    main()

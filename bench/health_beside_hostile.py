"""``GET /health`` of ``polite serve`` while a hostile robots.txt is worked on, quiet and loaded.

Each round starts ``polite serve`` (memory store, ``--allow-private``) beside a loopback
origin whose robots.txt is ``User-agent: *``, ``Allow: /`` and 14,000 lines
``Content-Usage: /*x{n}*y train-ai=n`` (507 KB), then:

* sends one ``POST /politeness/verbose?purpose=train-ai`` of 50 URLs of that origin (the
  file fetched, parsed, its matcher and AI-usage rules built, 50 lookups) and asks
  ``GET /health`` again and again until it is answered: the call's time, and /health's
  median and slowest answer meanwhile;
* then sends ``--proxied`` requests through the proxy with ``X-Polite-Purpose: train-ai``
  (each refused, the file being known): their median time.

``--bodies`` then posts REST bodies of 1 MiB no endpoint reads (100,000 arrays of two
empty arrays and 200,000 short strings to ``/politeness/verbose``, 300,000 empty objects to
``/politeness/feedback``), ``GET /health`` asked meanwhile: the service's CPU time for each
and its answer's status.

``--holds`` runs the service with a thread beside its event loop that posts it a callback
every millisecond and, while the callback waits, samples the loop's stack: the longest
waits (wall-clock and the process's CPU time meanwhile) with where the loop was, and the
garbage collector's passes over 2 ms of CPU (the thread changes the switch interval to
1 ms: figures of their own, not to compare with a run without it). On uvloop (the
service's default when installed) a callback posted from the thread waited 100 to 250 ms
at times while ``/health``, asked meanwhile, was answered within 12 ms: the waits it reports
there are not the loop's; ``--loop asyncio`` runs the service on asyncio's loop, whose
waits the thread sees as they are.

``--busy N`` keeps N processes ``python3 -c 'while True: pass'`` running through the rounds
(the machine's two cores shared with them). ``--base DIR`` runs a second tree's ``src``
(``git worktree add --detach DIR main``) in alternate rounds, the same figures printed for
each. Run: ``.venv/bin/python bench/health_beside_hostile.py [--rounds 3] [--busy 2]
[--holds] [--bodies] [--loop asyncio] [--base DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from robots_memory import free_port, servers_on_a_thread

HOST = "127.74.14.1"
HOSTILE = ("User-agent: *\nAllow: /\n" + "".join(f"Content-Usage: /*x{n}*y train-ai=n\n"
                                                  for n in range(14_000))).encode()
SRC = Path(__file__).resolve().parents[1] / "src"


def origin() -> int:
    """A listening port on HOST answering robots.txt with HOSTILE, any other path with a
    small page, on an event loop of its own thread."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                body = HOSTILE if request.startswith(b"GET /robots.txt") else b"page\n"
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()

    (port,) = servers_on_a_thread(handle, HOST, 1)
    return port


def each_round(rounds: list[dict[str, float]], key: str, digits: int) -> str:
    """One figure of every round, as a table cell."""
    return ", ".join(f"{r[key]:.{digits}f}" for r in rounds)


def table(header: str, trees: dict[str, list[dict[str, float]]],
          columns: list[tuple[str, int]]) -> None:
    """A table: ``header``, then a row a tree, a cell a column (``key``, its digits) holding
    every round's figure."""
    print(header)
    for name, rounds in trees.items():
        print(" | ".join([name, *(each_round(rounds, key, digits) for key, digits in columns)]))


def cpu_s(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used (Linux: /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ``polite serve`` with the watchdog of --holds; what it saw is written to $HOLDS_OUT at exit.
HOLDS = r"""
import atexit, collections, gc, json, os, sys, threading, time, traceback
import polite.serve as serve
loops = []
make_loop = serve.new_event_loop
def new_event_loop(kind):
    loops.append(make_loop(kind))
    return loops[-1]
serve.new_event_loop = new_event_loop
main_thread = threading.get_ident()
main_cpu = time.pthread_getcpuclockid(main_thread)  # the loop's thread's CPU time alone
holds, passes, begun = [], [], {}
def timed(phase, info):
    if phase == "start":
        begun["cpu"] = time.thread_time()
    elif time.thread_time() - begun["cpu"] > 0.002:
        passes.append((info["generation"], (time.thread_time() - begun["cpu"]) * 1000))
gc.callbacks.append(timed)
def where(frame):
    stack = traceback.extract_stack(frame)
    ours = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in stack
            if "/polite/" in f.filename]
    return " < ".join(reversed(ours[-4:])) or "outside polite"
def watch():
    while not loops:
        time.sleep(0.01)
    while True:
        ran = threading.Event()
        wall, cpu = time.perf_counter(), time.clock_gettime(main_cpu)
        try:
            loops[0].call_soon_threadsafe(ran.set)
        except RuntimeError:
            return
        seen = []
        while not ran.wait(0.001):
            frame = sys._current_frames().get(main_thread)
            if frame is not None:
                seen.append(where(frame))
        waited = (time.perf_counter() - wall) * 1000
        if waited > 3:
            holds.append((waited, (time.clock_gettime(main_cpu) - cpu) * 1000,
                          collections.Counter(seen).most_common(1)))
        time.sleep(0.001)
threading.Thread(target=watch, daemon=True).start()
sys.setswitchinterval(0.001)
def write():
    with open(os.environ["HOLDS_OUT"], "w") as out:
        json.dump({"holds": sorted(holds, key=lambda h: h[1], reverse=True)[:3],
                   "gc": passes}, out)
atexit.register(write)
from polite.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


# REST bodies no endpoint reads (issue 34): what the JSON parser made of them was 100 to
# 230 ms of the event loop's time before any bound was checked.
BODIES = (("/politeness/verbose", b"[" + b",".join([b"[[],[]]"] * 100_000) + b"]"),
          ("/politeness/verbose", b"[" + b",".join([b'"ab"'] * 200_000) + b"]"),
          ("/politeness/feedback", b"[" + b",".join([b"{}"] * 300_000) + b"]"))


def _post(port: int, path: str, body: bytes, got: list[int], done: threading.Event) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                      timeout=60) as client:
        got.append(client.post(path, content=body).status_code)
    done.set()


def posted_bodies(port: int, pid: int) -> dict[str, float]:
    """Each of :data:`BODIES` posted, ``/health`` asked in a loop meanwhile: the service's
    CPU ms for the slowest body, the slowest /health, and the statuses (as one number)."""
    worst_cpu = worst_health = 0.0
    statuses = 0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                      timeout=60) as api:
        for path, body in BODIES:
            done = threading.Event()
            got: list[int] = []

            before = cpu_s(pid)
            threading.Thread(target=_post, args=(port, path, body, got, done),
                             daemon=True).start()
            while not done.is_set():
                t = time.perf_counter()
                api.get("/health")
                worst_health = max(worst_health, time.perf_counter() - t)
            worst_cpu = max(worst_cpu, cpu_s(pid) - before)
            statuses = statuses * 1000 + got[0]
    return {"body_cpu_ms": worst_cpu * 1000, "body_health_worst_ms": worst_health * 1000,
            "body_statuses": statuses}


def one_round(src: Path, proxied: int, holds: Path | None = None,
              bodies: bool = False, loop: str = "auto") -> dict[str, float]:
    port = free_port()
    site = origin()  # a new origin a round: its robots.txt is fetched afresh
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-m", "polite", "serve", "--port", str(port), "--store",
               "memory://", "--allow-private", "--default-delay-s", "0", "--loop", loop]
    if holds is not None:
        env["HOLDS_OUT"] = str(holds)
        command[1:3] = ["-c", HOLDS]
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=env) as proc, \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                         timeout=600) as api:
        try:
            for _ in range(300):
                try:
                    if api.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            urls = [f"http://{HOST}:{site}/page{n}x{n}y" for n in range(0, 14_000, 280)]
            done = threading.Event()
            took: list[float] = []

            def verbose() -> None:
                t = time.perf_counter()
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                                  timeout=600) as client:
                    client.post("/politeness/verbose", json=urls,
                                params={"purpose": "train-ai"})
                took.append(time.perf_counter() - t)
                done.set()

            call_cpu = cpu_s(proc.pid)
            threading.Thread(target=verbose, daemon=True).start()
            health: list[float] = []
            while not done.is_set():
                t = time.perf_counter()
                api.get("/health")
                health.append(time.perf_counter() - t)
            done.wait()
            call_cpu = cpu_s(proc.pid) - call_cpu
            times: list[float] = []
            statuses: set[int] = set()
            with httpx.Client(proxy=f"http://127.0.0.1:{port}", trust_env=False,
                              timeout=60, headers={"X-Polite-Purpose": "train-ai"}) as through:
                proxied_cpu = cpu_s(proc.pid)
                for n in range(proxied):
                    t = time.perf_counter()
                    got = through.get(f"http://{HOST}:{site}/page{n * 280}x{n * 280}y")
                    statuses.add(got.status_code)
                    times.append(time.perf_counter() - t)
                proxied_cpu = cpu_s(proc.pid) - proxied_cpu
            posted = posted_bodies(port, proc.pid) if bodies else {}
        finally:
            proc.terminate()
            proc.wait(10)
    return {"call_s": took[0], "call_cpu_s": call_cpu, "health_n": len(health),
            "health_median_ms": statistics.median(health) * 1000,
            "health_worst_ms": max(health) * 1000,
            "proxied_median_ms": statistics.median(times) * 1000 if times else 0.0,
            "proxied_cpu_ms": proxied_cpu * 1000 / max(1, proxied),
            "proxied_status": min(statuses, default=0), **posted}


# Run in a process of its own with a tree's src: the file read from a store (as when another
# node fetched it) and prepared, then 50 lookups, with a task beside them noting, at each
# of its turns, the wall-clock time and the process's CPU time (both threads) since its
# last turn. The CPU time between two turns is the work the loop waited for, whatever
# else the machine ran meanwhile.
PROBE = r"""
import asyncio, json, sys, time
from polite.clock import WallClock
from polite.fetch import RobotsFetcher, create_client
from polite.fetch.robots import robots_usage
from polite.storage import MemoryStore
from polite.storage.base import RobotsRecord
try:  # as polite serve does once it listens (a tree that has it)
    from polite._loop import freeze_start_up
except ImportError:
    freeze_start_up = None
body = sys.stdin.buffer.read()
ORIGIN = "http://hostile.example"
async def main():
    clock = WallClock()
    store = MemoryStore(clock)
    await store.save_robots(RobotsRecord(ORIGIN, "parsed", 200, body, clock(), clock() + 3600))
    gaps = []
    done = False
    async def beside():
        last = (time.perf_counter(), time.process_time())
        while not done:
            await asyncio.sleep(0)
            now = (time.perf_counter(), time.process_time())
            gaps.append((now[0] - last[0], now[1] - last[1]))
            last = now
    async with create_client() as client:
        robots = RobotsFetcher(client, store, clock, agent="politetest")
        if freeze_start_up is not None:
            freeze_start_up()
        task = asyncio.create_task(beside())
        started = time.process_time()
        state, _ = await robots.known(ORIGIN)
        urls = [f"{ORIGIN}/page{n}x{n}y" for n in range(0, 14_000, 280)]
        await robots_usage(state.robots, urls, "politetest")
        cpu = time.process_time() - started
        done = True
        await task
    wall = sorted(g[0] for g in gaps)
    held = sorted(g[1] for g in gaps)
    print(json.dumps({"turns": len(gaps), "cpu_s": cpu, "wall_worst_ms": wall[-1] * 1000,
                      "cpu_worst_ms": held[-1] * 1000,
                      "cpu_p99_ms": held[int(len(held) * 0.99)] * 1000}))
asyncio.run(main())
"""


def probe_round(src: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", PROBE], input=HOSTILE, env=env,
                         capture_output=True, check=True).stdout
    found: dict[str, float] = json.loads(out)
    return found


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--rounds", type=int, default=3)
    options.add_argument("--busy", type=int, default=0,
                         help="processes spinning on a core meanwhile")
    options.add_argument("--proxied", type=int, default=50)
    options.add_argument("--holds", action="store_true",
                         help="the service's longest waits of its event loop, and where")
    options.add_argument("--bodies", action="store_true",
                         help="then REST bodies of 1 MiB no endpoint reads")
    options.add_argument("--loop", default="auto", choices=("auto", "asyncio", "uvloop"),
                         help="the service's event loop (--holds: see the module's text)")
    options.add_argument("--base", type=Path, default=None,
                         help="another tree, run in alternate rounds (its src)")
    args = options.parse_args()
    trees = {"this tree": SRC}
    if args.base is not None:
        trees = {"base": args.base.resolve() / "src", **trees}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    found: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    probed: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    held: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    try:
        for _ in range(args.rounds):
            for name, src in trees.items():
                if args.holds:
                    with tempfile.TemporaryDirectory() as folder:
                        out = Path(folder) / "holds.json"
                        found[name].append(one_round(src, args.proxied, out, args.bodies,
                                                     args.loop))
                        held[name].append(json.loads(out.read_text()))
                else:
                    found[name].append(one_round(src, args.proxied, bodies=args.bodies,
                                                     loop=args.loop))
                probed[name].append(probe_round(src))
    finally:
        for spinner in busy:
            spinner.kill()
            spinner.wait()
    load = os.getloadavg()[0]
    print(f"{args.rounds} rounds, {args.busy} busy processes, load average {load:.1f}")
    table("tree | verbose call s | its CPU s (service, /health's included) | /health answers | "
          "/health median ms | /health worst ms | proxied median ms | its CPU ms | status",
          found, [("call_s", 2), ("call_cpu_s", 2), ("health_n", 0), ("health_median_ms", 1),
                  ("health_worst_ms", 0), ("proxied_median_ms", 1), ("proxied_cpu_ms", 1),
                  ("proxied_status", 0)])
    if args.bodies:
        table("\nREST bodies of 1 MiB: tree | the service's CPU ms for the slowest | "
              "/health worst ms meanwhile | statuses",
              found, [("body_cpu_ms", 0), ("body_health_worst_ms", 0), ("body_statuses", 0)])
    print("\nin one process: the file read from a store and prepared, then 50 lookups, "
          "a task beside them")
    table("tree | its turns | CPU s in all | most CPU ms between two turns | 99th "
          "percentile | most wall-clock ms between two turns",
          probed, [("turns", 0), ("cpu_s", 2), ("cpu_worst_ms", 1), ("cpu_p99_ms", 1),
                   ("wall_worst_ms", 0)])
    for name, seen_rounds in held.items():
        if seen_rounds:
            print(f"\n{name}: the service's event loop, its waits with the most CPU time "
                  "(wall ms, CPU ms of the loop's thread meanwhile, where it was most "
                  "often); collector passes over 2 ms of CPU (generation, ms)")
        for number, one in enumerate(seen_rounds, 1):
            for wall, cpu, seen in one["holds"]:
                place = f"{seen[0][0]} ({seen[0][1]} samples)" if seen else "not sampled"
                print(f"  round {number}: {wall:.0f} | {cpu:.1f} | {place}")
            print(f"  round {number}: collector " + ", ".join(
                f"{generation}: {ms:.1f}" for generation, ms in one["gc"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

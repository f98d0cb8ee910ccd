"""What the dashboard's bookkeeping costs the proxy: this tree's ``polite serve`` against
the same command from another git revision (``main`` unless told), in one run.

Every proxied request is now counted per host, traced and given to the per-second status
counts; this measures that, on cache misses (each request checked against robots.txt,
given the host's slot and forwarded) with the setup of ``bench/proxy_vs_peers.py`` (a 1 KB
origin on loopback, raw-socket clients, the host's delay at 0). Both servers run through the
whole run and each round measures both in turn; the figures are medians of the per-round
ratios.

Run: ``.venv/bin/python bench/dashboard_overhead.py [--against REV] [--seconds S]
[--rounds R]``
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from io import BytesIO
from pathlib import Path

import httpx

from proxy_vs_peers import ORIGIN, free_port, measure, started

ROOT = Path(__file__).resolve().parents[1]


def checkout(revision: str, into: Path) -> Path:
    """``src`` of ``revision``, unpacked under ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "src"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="main", help="the git revision to compare with")
    parser.add_argument("--seconds", type=float, default=2.0, help="per throughput figure")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        other_src = checkout(args.against, folder)
        origin_port = stack.enter_context(started([sys.executable, "-c", ORIGIN]))
        origin = ("127.0.4.1", int(origin_port))
        servers: dict[str, int] = {}
        pids: dict[str, int] = {}
        cpu_us: dict[str, list[float]] = {n: [] for n in ("this tree", args.against)}
        for name, src in (("this tree", ROOT / "src"), (args.against, other_src)):
            port = free_port()
            env = {**os.environ, "PYTHONPATH": str(src)}
            command = [sys.executable, "-m", "polite", "serve", "--port", str(port),
                       "--store", "memory://", "--allow-private", "--agent", "benchbot",
                       "--adaptive-factor", "0"]
            pids[name] = stack.enter_context(serving(command, port, env))
            api = httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False)
            api.put(f"/delays/{origin[0]}", json={"delay": 0}).raise_for_status()
            servers[name] = port
        results: dict[str, list[tuple[float, float, float]]] = {n: [] for n in servers}
        order = list(servers)
        for round_ in range(args.rounds):
            # Alternate which goes first, so that neither always has the warmer machine.
            for name in order if round_ % 2 == 0 else order[::-1]:
                before = cpu_s(pids[name])
                figures = measure(("127.0.0.1", servers[name]), origin, args.seconds)
                results[name].append(figures)
                # requests served in the round: 2,050 for the latency, then two runs
                requests = 2050 + (figures[1] + figures[2]) * args.seconds
                cpu_us[name].append((cpu_s(pids[name]) - before) / requests * 1e6)
            print(f"round {round_ + 1} of {args.rounds}: " + ", ".join(
                f"{n} {results[n][-1][2]:,.0f}/s at 32" for n in servers), file=sys.stderr)
    ours, theirs = results["this tree"], results[args.against]
    print(f"\nmedians of {args.rounds} rounds (cache misses through the proxy)\n")
    print("| polite serve | median latency | req/s, 1 conn | req/s, 32 conns |")
    print("|---|---:|---:|---:|")
    for name in servers:
        rows = results[name]
        print(f"| {name} | {statistics.median(r[0] for r in rows) * 1e3:.3f} ms | "
              f"{statistics.median(r[1] for r in rows):,.0f} | "
              f"{statistics.median(r[2] for r in rows):,.0f} |")
    print("\nCPU per request, the server process (/proc), medians: " + ", ".join(
        f"{n} {statistics.median(cpu_us[n]):.1f} µs" for n in servers))
    ratios_cpu = sorted(a / b for a, b in zip(cpu_us["this tree"], cpu_us[args.against],
                                              strict=True))
    print(f"  this tree / {args.against}: {ratios_cpu[0]:.3f} / "
          f"{statistics.median(ratios_cpu):.3f} / {ratios_cpu[-1]:.3f} (min / median / max)")
    print(f"\nthis tree / {args.against}, per round (min / median / max):")
    for column, label in ((0, "latency"), (1, "req/s at 1 connection"),
                          (2, "req/s at 32 connections")):
        ratios = sorted(a[column] / b[column] for a, b in zip(ours, theirs, strict=True))
        print(f"  {label}: {ratios[0]:.3f} / {statistics.median(ratios):.3f} / "
              f"{ratios[-1]:.3f}")


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def serving(command: list[str], port: int, env: dict[str, str]) -> Iterator[int]:
    """The command running with ``env`` until the block ends, once its port answers."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{command} did not start") from None
                time.sleep(0.1)
        yield proc.pid
    finally:
        proc.terminate()
        proc.wait(20)


if __name__ == "__main__":
    main()

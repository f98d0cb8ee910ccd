"""``polite crawl`` on 1, 2 and 4 worker processes sharing one crawl through redis-server.

The farm of ``bench/crawl_vs_scrapy.py`` (its own process, one listener per site, pages of
about 8.5 KB with ten links, no Crawl-delay) counts the pages where they arrive: pages per
second run from the first page to the last. Each round crawls a fresh farm with 1, 2 and 4
workers in turn (``--store redis://...``, a key prefix of its own, ``--default-delay-s
0``, ``--per-host 1``), and reports the workers' CPU (``wait4``), the farm's and
redis-server's (``/proc``). The machine has two cores, shared with other work: four
workers, the farm and Redis contend for them, so the figures say what the shared frontier
costs, not how far it scales on machines of their own.

``--cluster`` also runs this version on a Redis Cluster of three redis-server primaries
(made with ``redis-cli --cluster create``), Redis's CPU and requests summed over them.
``--baseline SRC`` also runs another version of polite (its ``src`` folder, e.g. from
``git archive COMMIT src | tar -x -C /tmp/old``) in the same rounds, interleaved with this
one, and prints the ratios of this version to it (medians of per-round ratios). Redis
requests per page (pipelines: round trips) come from ``INFO stats``
(``total_reads_processed``: a read event of the server per request or pipeline).

Run: ``.venv/bin/python bench/crawl_workers_redis.py [--rounds N] [--hosts N] [--pages N]
[--baseline SRC]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

from crawl_vs_scrapy import farm, farm_cpu_s
from serve_decisions import redis as redis_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' Redis Cluster
from tests.redis_server import redis_cluster as cluster


def pid_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_pid(url: str) -> int:
    port = url.rsplit(":", 1)[1].split("/")[0]
    found = subprocess.run(["pgrep", "-f", f"redis-server 127.0.0.1:{port}( |$)"],
                           capture_output=True,
                           text=True).stdout.split()
    return int(found[0])


def redis_reads(url: str) -> int:
    port = url.rsplit(":", 1)[1].split("/")[0]
    said = subprocess.run(["redis-cli", "-p", port, "info", "stats"], capture_output=True,
                          text=True).stdout
    return int(said.split("total_reads_processed:")[1].split()[0])


class Peer(NamedTuple):
    """What runs: a version of polite (``src``, None: this one) on a Redis (its store URL up
    to the prefix's value, and its servers' URLs)."""

    src: str | None
    store: str
    servers: list[str]


def redis_use(servers: list[str]) -> tuple[float, int]:
    """CPU seconds and requests read, summed over the servers."""
    return (sum(pid_cpu_s(redis_pid(url)) for url in servers),
            sum(redis_reads(url) for url in servers))


def one_round(folder: Path, peer: Peer, workers: int, hosts: int,
              pages: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": peer.src} if peer.src else None
    with farm(folder, hosts, pages, "10", "0") as (seeds, log, process):
        prefix = f"b{uuid.uuid4().hex[:8]}:"
        farm_before = farm_cpu_s(process)
        redis_before, reads_before = redis_use(peer.servers)
        started = []
        for n in range(workers):
            out = folder / f"{prefix[:-1]}-{n}"
            command = [sys.executable, "-m", "polite", "crawl", *seeds, "--out", str(out),
                       "--store", f"{peer.store}{prefix}", "--worker", f"w{n}",
                       "--allow-private", "--default-delay-s", "0", "--per-host", "1",
                       "--no-sitemaps", "--json", "--max-pages-per-host", str(pages)]
            started.append(subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, text=True, env=env))
        cpu = 0.0
        for worker in started:
            _, status, usage = os.wait4(worker.pid, 0)
            worker.returncode = os.waitstatus_to_exitcode(status)
            if worker.returncode:
                assert worker.stderr is not None
                raise SystemExit(worker.stderr.read())
            cpu += usage.ru_utime + usage.ru_stime
        redis_after, reads_after = redis_use(peer.servers)
        farm_cpu, redis_cpu = farm_cpu_s(process) - farm_before, redis_after - redis_before
        reads = reads_after - reads_before
    times = sorted(t for ts in json.loads(log.read_text())["arrivals"].values() for t in ts)
    fetched = len(times)
    return {"pages": fetched, "pages_per_s": (fetched - 1) / (times[-1] - times[0]),
            "crawl_cpu_ms": 1000 * cpu / fetched, "farm_cpu_ms": 1000 * farm_cpu / fetched,
            "redis_cpu_ms": 1000 * redis_cpu / fetched, "redis_round_trips": reads / fetched}


def table(title: str, results: dict[int, list[dict[str, float]]]) -> None:
    print(title)
    print("| workers | pages/s | x 1 worker (median of per-round ratios) | crawl CPU ms/page "
          "| farm CPU ms/page | Redis CPU ms/page | Redis round trips/page |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, rows in results.items():
        ratio = statistics.median(r["pages_per_s"] / one["pages_per_s"]
                                  for r, one in zip(rows, results[1], strict=True))
        print(f"| {n} | {statistics.median(r['pages_per_s'] for r in rows):,.0f} | "
              f"{ratio:.2f} | {statistics.median(r['crawl_cpu_ms'] for r in rows):.2f} | "
              f"{statistics.median(r['farm_cpu_ms'] for r in rows):.2f} | "
              f"{statistics.median(r['redis_cpu_ms'] for r in rows):.3f} | "
              f"{statistics.median(r['redis_round_trips'] for r in rows):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--pages", type=int, default=60, help="pages per host")
    parser.add_argument("--baseline", help="another version's src folder, run interleaved")
    parser.add_argument("--cluster", action="store_true",
                        help="also this version on a Redis Cluster of three primaries")
    args = parser.parse_args()
    counts = (1, 2, 4)
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        store = stack.enter_context(redis_server(folder))
        if store is None:
            raise SystemExit("redis-server is not installed")
        time.sleep(0.2)
        peers = {"this": Peer(None, f"{store}?prefix=", [store])}
        if args.baseline:
            peers["baseline"] = Peer(args.baseline, f"{store}?prefix=", [store])
        if args.cluster:
            home = folder / "cluster"
            home.mkdir()
            nodes = stack.enter_context(cluster(home))
            peers["cluster"] = Peer(None, f"{nodes[0]}/0?cluster=1&prefix=", nodes)
        results: dict[str, dict[int, list[dict[str, float]]]] = {
            name: {n: [] for n in counts} for name in peers}
        for round_ in range(args.rounds):
            for n in counts:  # interleaved: every count and peer in every round
                for name, peer in peers.items():
                    results[name][n].append(one_round(folder, peer, n, args.hosts,
                                                      args.pages))
                    print(f"round {round_ + 1}, {name}, {n} workers: {results[name][n][-1]}",
                          file=sys.stderr)
    head = (f"{args.hosts} hosts x {args.pages} pages, no delay, medians of {args.rounds} "
            "rounds (2 shared cores)")
    table(f"{head}, this version", results["this"])
    for name, title in (("baseline", f"the baseline ({args.baseline})"),
                        ("cluster", "this version on a Redis Cluster of three primaries")):
        if name not in results:
            continue
        table(f"{head}, {title}", results[name])
        print(f"| workers | pages/s this / {name} | crawl CPU a page this / {name} |")
        print("|---:|---:|---:|")
        for n in counts:
            pairs = list(zip(results["this"][n], results[name][n], strict=True))
            speed = statistics.median(a["pages_per_s"] / b["pages_per_s"] for a, b in pairs)
            cpu = statistics.median(a["crawl_cpu_ms"] / b["crawl_cpu_ms"] for a, b in pairs)
            print(f"| {n} | {speed:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()

"""``polite crawl`` on 1, 2 and 4 worker processes sharing one crawl through redis-server.

The farm of ``bench/crawl_vs_scrapy.py`` (its own process, one listener per site, pages of
about 8.5 KB with ten links, no Crawl-delay) counts the pages where they arrive: pages per
second run from the first page to the last. Each round crawls a fresh farm with 1, 2 and 4
workers in turn (``--store redis://...``, a key prefix of its own, ``--default-delay-ms
0``, ``--per-host 1``), and reports the workers' CPU (``wait4``), the farm's and
redis-server's (``/proc``). The machine has two cores, shared with other work: four
workers, the farm and Redis contend for them, so the figures say what the shared frontier
costs, not how far it scales on machines of their own.

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
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from crawl_vs_scrapy import farm, farm_cpu_s
from serve_decisions import redis as redis_server


def pid_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_pid(url: str) -> int:
    port = url.rsplit(":", 1)[1].split("/")[0]
    found = subprocess.run(["pgrep", "-f", f"redis-server.*{port}"], capture_output=True,
                           text=True).stdout.split()
    return int(found[0])


def redis_reads(url: str) -> int:
    port = url.rsplit(":", 1)[1].split("/")[0]
    said = subprocess.run(["redis-cli", "-p", port, "info", "stats"], capture_output=True,
                          text=True).stdout
    return int(said.split("total_reads_processed:")[1].split()[0])


def one_round(folder: Path, store: str, redis: int, workers: int, hosts: int,
              pages: int, src: str | None = None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src} if src else None
    with farm(folder, hosts, pages, 10, "0") as (seeds, log, process):
        prefix = f"b{uuid.uuid4().hex[:8]}:"
        farm_before, redis_before = farm_cpu_s(process), pid_cpu_s(redis)
        reads_before = redis_reads(store)
        started = []
        for n in range(workers):
            out = folder / f"{prefix[:-1]}-{n}"
            command = [sys.executable, "-m", "polite", "crawl", *seeds, "--out", str(out),
                       "--store", f"{store}?prefix={prefix}", "--worker", f"w{n}",
                       "--allow-private", "--default-delay-ms", "0", "--per-host", "1",
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
        farm_cpu, redis_cpu = farm_cpu_s(process) - farm_before, pid_cpu_s(redis) - redis_before
        reads = redis_reads(store) - reads_before
    times = sorted(t for ts in json.loads(log.read_text()).values() for t in ts)
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
    args = parser.parse_args()
    counts = (1, 2, 4)
    versions = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    results: dict[str, dict[int, list[dict[str, float]]]] = {
        v: {n: [] for n in counts} for v in versions}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with redis_server(folder) as store:
            if store is None:
                raise SystemExit("redis-server is not installed")
            time.sleep(0.2)
            redis = redis_pid(store)
            for round_ in range(args.rounds):
                for n in counts:  # interleaved: every count and version in every round
                    for version, src in versions.items():
                        results[version][n].append(one_round(folder, store, redis, n,
                                                             args.hosts, args.pages, src))
                        print(f"round {round_ + 1}, {version}, {n} workers: "
                              f"{results[version][n][-1]}", file=sys.stderr)
    head = (f"{args.hosts} hosts x {args.pages} pages, no delay, medians of {args.rounds} "
            "rounds (2 shared cores)")
    table(f"{head}, this version", results["this"])
    if args.baseline:
        table(f"{head}, the baseline ({args.baseline})", results["baseline"])
        print("| workers | pages/s this / baseline | crawl CPU a page this / baseline |")
        print("|---:|---:|---:|")
        for n in counts:
            pairs = list(zip(results["this"][n], results["baseline"][n], strict=True))
            speed = statistics.median(a["pages_per_s"] / b["pages_per_s"] for a, b in pairs)
            cpu = statistics.median(a["crawl_cpu_ms"] / b["crawl_cpu_ms"] for a, b in pairs)
            print(f"| {n} | {speed:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()

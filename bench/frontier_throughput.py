"""``polite frontier serve`` on one core: how many URLs a second it takes and hands out.

The server runs with ``--robots off`` (the frontier's own cost, not the sites'), on the
second core where ``taskset`` exists, and the client (stubs made from the vendored .proto by
grpcio-tools) on the first. Measured, each as URLs a second of the run's wall time, with the
server's CPU seconds (user + system, from /proc) beside it:

* **PutURLs**: discovered URLs on one stream, one AckMessage each;
* **PutDiscovered**: the same URLs again as new ones, in batches of 100 (a page's links);
* **GetURLs**: every URL handed out, in calls of 100 queues x 100 URLs (no delay).

Each store asked for (``--stores``: ``sqlite``, a file in a temporary folder; ``redis``, a
``redis-server`` started for the run; ``cluster``, a Redis Cluster of three primaries made
with ``redis-cli --cluster create``, as the tests make it) runs once a round, the stores in
turn, and the table gives each figure's median over the rounds. ``--crawls N`` spreads the
URLs over N crawl IDs, which GetURLs asks for together (``anyCrawlID``): on a Cluster, the
crawls' keys on several nodes. ``--base PATH`` runs the same stores on the code of another
checkout too (its ``src``), alternated with this one's.

Run: ``.venv/bin/python bench/frontier_throughput.py [--quick] [--rounds 3]
[--stores sqlite,redis,cluster] [--crawls 3] [--base ../other-checkout]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from serve_decisions import redis as redis_server

ROOT = Path(__file__).resolve().parents[1]
PROTO = ROOT / "src" / "polite" / "frontier" / "_proto" / "urlfrontier.proto"
OPERATIONS = ("PutURLs (discovered, one stream)", "PutDiscovered (batches of 100)",
              "GetURLs (100 queues x 100 URLs a call)")


def _stubs(folder: Path) -> tuple[Any, Any]:
    from grpc_tools import protoc  # type: ignore[import-untyped]

    include = Path(protoc.__file__).parent / "_proto"
    code = protoc.main(["grpc_tools.protoc", f"-I{PROTO.parent}", f"-I{include}",
                        f"--python_out={folder}", f"--grpc_python_out={folder}", str(PROTO)])
    if code != 0:
        raise SystemExit(f"protoc failed on {PROTO}")
    sys.path.insert(0, str(folder))
    return (importlib.import_module("urlfrontier_pb2"),
            importlib.import_module("urlfrontier_pb2_grpc"))


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _urls(prefix: str, hosts: int, per_host: int) -> Iterator[str]:
    for i in range(per_host):
        for h in range(hosts):
            yield f"http://{prefix}{h}.example/page/{i}"


def one_run(pb: Any, pb_grpc: Any, src: Path, store: str, hosts: int, per_host: int,
            crawls: int) -> list[tuple[int, float, float]]:
    """(URLs, URLs/s, server CPU s) of each operation, on a server of ``src`` and ``store``."""
    import grpc

    pin = ["taskset", "-c", "1"] if shutil.which("taskset") and os.cpu_count() != 1 else []
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["PYTHONPATH"] = str(src)
    server = subprocess.Popen(
        [*pin, sys.executable, "-m", "polite", "frontier", "serve", "--port", "0",
         "--robots", "off", "--default-delay-s", "0", "--store", store],
        stdout=subprocess.PIPE, text=True, env=env)
    rows: list[tuple[int, float, float]] = []
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if "listening on" not in line:
            raise SystemExit(f"the server did not start: {line}")
        if pin:
            os.sched_setaffinity(0, {0})
        address = line.rsplit(" ", 1)[1].strip()
        with grpc.insecure_channel(address) as channel:
            client = pb_grpc.URLFrontierStub(channel)

            def measure(run: Any) -> None:
                cpu, start = _cpu_s(server.pid), time.perf_counter()
                count = run()
                wall, used = time.perf_counter() - start, _cpu_s(server.pid) - cpu
                rows.append((count, count / wall, used))

            def crawl_of(n: int) -> str:
                return f"crawl{n % crawls}" if crawls > 1 else ""

            def put() -> int:
                items = (pb.URLItem(discovered=pb.DiscoveredURLItem(
                    info=pb.URLInfo(url=u, crawlID=crawl_of(n))))
                    for n, u in enumerate(_urls("a", hosts, per_host)))
                return sum(1 for _ in client.PutURLs(items))

            def put_batches() -> int:
                urls = list(_urls("b", hosts, per_host))
                batches = (pb.DiscoveredBatch(ID=str(i), items=[
                    pb.URLInfo(url=u, crawlID=crawl_of(i // 100)) for u in urls[i:i + 100]])
                    for i in range(0, len(urls), 100))
                return sum(len(a.statuses) for a in client.PutDiscovered(batches))

            def get() -> int:
                got = 0
                while True:
                    n = sum(1 for _ in client.GetURLs(pb.GetParams(
                        max_queues=100, max_urls_per_queue=100, delay_requestable=3600,
                        anyCrawlID=pb.AnyCrawlID())))
                    if n == 0:
                        return got
                    got += n

            measure(put)
            measure(put_batches)
            measure(get)
    finally:
        server.terminate()
        server.wait(10)
        if pin:
            os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the URLs")
    parser.add_argument("--stores", default="sqlite,redis",
                        help="comma-separated: sqlite, redis, cluster (default sqlite,redis)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each store (median)")
    parser.add_argument("--crawls", type=int, default=1, help="crawl IDs the URLs go to")
    parser.add_argument("--base", type=Path, help="another checkout, run beside this one")
    args = parser.parse_args()
    hosts, per_host = (100, 20) if args.quick else (1000, 20)
    kinds = args.stores.split(",")
    if not set(kinds) <= {"sqlite", "redis", "cluster"}:
        raise SystemExit(f"--stores: sqlite, redis or cluster, not {args.stores}")
    trees = {"this": ROOT / "src"}
    if args.base is not None:
        trees["base"] = args.base.resolve() / "src"
    results: dict[tuple[str, str], list[list[tuple[int, float, float]]]] = {}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        pb, pb_grpc = _stubs(tmp)
        servers: dict[str, str] = {}
        if "redis" in kinds:
            (tmp / "redis").mkdir()
            url = stack.enter_context(redis_server(tmp / "redis"))
            if url is None:
                raise SystemExit("redis-server is not installed")
            servers["redis"] = url
        if "cluster" in kinds:
            sys.path.insert(0, str(ROOT))  # the tests' Redis Cluster
            from tests.redis_server import redis_cluster

            (tmp / "cluster").mkdir()
            servers["cluster"] = stack.enter_context(redis_cluster(tmp / "cluster"))[0]
        for round_ in range(args.rounds):
            for kind in kinds:
                for tree, src in trees.items():
                    prefix = f"b{uuid.uuid4().hex[:8]}:"
                    store = {"sqlite": f"sqlite:///{tmp / f'{tree}-{round_}.sqlite'}",
                             "redis": f"{servers.get('redis')}?prefix={prefix}",
                             "cluster": f"{servers.get('cluster')}/0?cluster=1&prefix={prefix}",
                             }[kind]
                    results.setdefault((kind, tree), []).append(
                        one_run(pb, pb_grpc, src, store, hosts, per_host, args.crawls))
    print(f"{hosts * per_host:,} URLs a way in over {hosts:,} hosts and {args.crawls} "
          f"crawl(s); server on one core; medians of {args.rounds} round(s); load average "
          f"at the end {os.getloadavg()[0]:.1f}")
    print("| store | code | operation | URLs | URLs/s | server CPU s |")
    print("|---|---|---|---:|---:|---:|")
    for (kind, tree), runs in results.items():
        for i, name in enumerate(OPERATIONS):
            count = runs[0][i][0]
            rate = statistics.median(run[i][1] for run in runs)
            used = statistics.median(run[i][2] for run in runs)
            print(f"| {kind} | {tree} | {name} | {count:,} | {rate:,.0f} | {used:.2f} |")


if __name__ == "__main__":
    main()

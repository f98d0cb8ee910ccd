"""``polite frontier serve`` on one core: how many URLs a second it takes and hands out.

The server runs with ``--robots off`` (the frontier's own cost, not the sites') on a SQLite
file, on the second core where ``taskset`` exists, and the client (stubs made from the
vendored .proto by grpcio-tools) on the first. Measured, each as URLs a second of the run's
wall time, with the server's CPU seconds (user + system, from /proc) beside it:

* **PutURLs**: discovered URLs on one stream, one AckMessage each;
* **PutDiscovered**: the same URLs again as new ones, in batches of 100 (a page's links);
* **GetURLs**: every URL handed out, in calls of 100 queues x 100 URLs (no delay).

Run: ``.venv/bin/python bench/frontier_throughput.py [--quick] [--store redis://...]``
(a Redis for this run only: its keys are not removed).
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROTO = ROOT / "src" / "polite" / "frontier" / "_proto" / "urlfrontier.proto"


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the URLs")
    parser.add_argument("--store", help="the frontier's store (default: an SQLite file in a "
                        "temporary folder); redis://HOST:PORT/DB for Redis")
    args = parser.parse_args()
    hosts, per_host = (100, 20) if args.quick else (1000, 20)
    total = hosts * per_host
    import grpc

    with tempfile.TemporaryDirectory() as tmp:
        pb, pb_grpc = _stubs(Path(tmp))
        pin = ["taskset", "-c", "1"] if shutil.which("taskset") and os.cpu_count() != 1 else []
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env["PYTHONPATH"] = str(ROOT / "src")
        server = subprocess.Popen(
            [*pin, sys.executable, "-m", "polite", "frontier", "serve", "--port", "0",
             "--robots", "off", "--default-delay-s", "0", "--store",
             args.store or f"sqlite:///{Path(tmp) / 'f.sqlite'}"],
            stdout=subprocess.PIPE, text=True, env=env)
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
                rows = []

                def measure(name: str, run: Any) -> None:
                    cpu, start = _cpu_s(server.pid), time.perf_counter()
                    count = run()
                    wall, used = time.perf_counter() - start, _cpu_s(server.pid) - cpu
                    rows.append((name, count, count / wall, used))

                def put() -> int:
                    items = (pb.URLItem(discovered=pb.DiscoveredURLItem(
                        info=pb.URLInfo(url=u))) for u in _urls("a", hosts, per_host))
                    return sum(1 for _ in client.PutURLs(items))

                def put_batches() -> int:
                    urls = list(_urls("b", hosts, per_host))
                    batches = (pb.DiscoveredBatch(ID=str(i), items=[
                        pb.URLInfo(url=u) for u in urls[i:i + 100]])
                        for i in range(0, len(urls), 100))
                    return sum(len(a.statuses) for a in client.PutDiscovered(batches))

                def get() -> int:
                    got = 0
                    while True:
                        n = sum(1 for _ in client.GetURLs(pb.GetParams(
                            max_queues=100, max_urls_per_queue=100, delay_requestable=3600)))
                        if n == 0:
                            return got
                        got += n

                measure("PutURLs (discovered, one stream)", put)
                measure("PutDiscovered (batches of 100)", put_batches)
                measure("GetURLs (100 queues x 100 URLs a call)", get)
        finally:
            server.terminate()
            server.wait(10)
    print(f"{total:,} URLs a run over {hosts:,} hosts; server on one core; "
          f"store {args.store or 'SQLite'}")
    print("| operation | URLs | URLs/s | server CPU s |")
    print("|---|---|---|---|")
    for name, count, rate, used in rows:
        print(f"| {name} | {count:,} | {rate:,.0f} | {used:.2f} |")


if __name__ == "__main__":
    main()

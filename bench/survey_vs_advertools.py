"""polite survey against advertools on a loopback farm of named sites, in one run.

Two jobs, each over the same 1,000 sites (one address each, 127.0.13.1 on, port 80; needs
root): robots.txt alone, and robots.txt with the sitemap it names (a urlset of 20 URLs).
polite runs its Harvester with the farm's names from a hosts file; advertools cannot take a
hosts file, so it is given the same sites by address (``http://127.0.13.5/robots.txt``; the
farm answers an address as the site there): ``robotstxt_to_df`` on the list of 1,000 URLs
(its own thread pool), and for sitemaps ``sitemap_to_df`` on each site's robots.txt URL (it
reads the Sitemap lines itself), 24 sites at once in threads. The farm runs in a process of
its own, keeping connections alive as web servers do; each peer's run is a fresh interpreter
of its own. Rounds interleave the peers; the table gives medians of per-round rates and of
per-round ratios. Politeness is measured at the farm: the smallest gap between a request to
a host and the host's last request that used its slot (robots.txt does not), in polite's runs.

Then resident memory of a real ``polite survey`` process over 100,000 names (one farm
process answering every name of the hosts file from 100 addresses, cheap replies), sampled
every second: the state is on disk, so RSS should stay flat as domains are done.

    python bench/survey_vs_advertools.py [--rounds 3] [--sites 1000] [--memory 100000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from polite.fetch.resolve import build_resolver
from polite.serve import new_event_loop
from polite.survey.harvest import Harvester
from polite.survey.store import SurveyStore
from tests.survey_farm import Farm, Page

URLS_PER_SITEMAP = 20
POLITE_CONCURRENCY = 1_000
ADVERTOOLS_SITE_THREADS = 24


def address(i: int) -> str:
    return f"127.0.{13 + i // 250}.{i % 250 + 1}"


def site_routes(name: str, host: str | None = None) -> dict[str, Page]:
    """A site's robots.txt and sitemap; the Sitemap line names ``host`` (the name, or the
    address advertools asks by: it does not resolve a relative Sitemap line)."""
    urls = "".join(f"<url><loc>http://{name}/p/{k}</loc></url>"
                   for k in range(URLS_PER_SITEMAP))
    robots = (f"User-agent: *\nDisallow: /private/\nSitemap: http://{host or name}/"
              "sitemap.xml\n").encode()
    return {"/robots.txt": Page(200, robots, (("Content-Type", "text/plain"),)),
            "/sitemap.xml": Page(200, ('<?xml version="1.0"?><urlset xmlns="http://www.'
                                       f'sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
                                       ).encode(), (("Content-Type", "application/xml"),))}


def farm_of(sites: int) -> Farm:
    """Each site under its name (polite's runs) and under its address (advertools')."""
    farm = Farm()
    for i in range(sites):
        name = f"site{i}.bench.test"
        farm.add(name, address(i), site_routes(name))
        farm.add(address(i), address(i), site_routes(name, address(i)))
    return farm


def serve_farm(sites: int, ready: multiprocessing.synchronize.Event,
               stop: multiprocessing.synchronize.Event,
               gaps: multiprocessing.connection.Connection) -> None:
    farm = farm_of(sites)
    with farm.running():
        ready.set()
        while not stop.wait(0.2):
            if gaps.poll():
                gaps.recv()
                gaps.send(min_gaps(farm))
                farm.arrivals.clear()


def min_gaps(farm: Farm) -> tuple[float, int, int]:
    """The smallest gap between a request to a host (by name) and the host's last request
    that used its slot (robots.txt does not: a sitemap may follow it at once), how many such
    gaps, and how many requests followed a robots.txt."""
    last: dict[str, float] = {}
    seen: set[str] = set()
    smallest, count, followed = float("inf"), 0, 0
    for arrived, host, path in sorted(farm.arrivals):
        if host[:1].isdigit():
            continue  # advertools' requests, by address
        if host in last:
            smallest = min(smallest, arrived - last[host])
            count += 1
        elif host in seen and path != "/robots.txt":
            followed += 1
        seen.add(host)
        if path != "/robots.txt":
            last[host] = arrived
    return smallest, count, followed


def polite_rate(names: list[str], hosts: Path, sitemaps: bool, delay_s: float = 1.0
                ) -> tuple[float, float]:
    async def job() -> None:
        with tempfile.TemporaryDirectory() as folder:
            store = SurveyStore(Path(folder) / "survey.sqlite")
            harvester = Harvester(store, time.time, resolver=build_resolver(hosts=hosts),
                                  concurrency=POLITE_CONCURRENCY, allow_private=True,
                                  sitemaps=sitemaps, delay_s=delay_s)
            await harvester.run([(None, name) for name in names])
            assert harvester.done.get("ok") == len(names), harvester.done
            if sitemaps:
                assert harvester.sitemap_files.get("ok") == len(names), harvester.sitemap_files
            store.close()

    started, cpu = time.perf_counter(), time.process_time()
    loop = new_event_loop("auto")  # as polite survey runs
    try:
        loop.run_until_complete(job())
    finally:
        loop.close()
    return (len(names) / (time.perf_counter() - started),
            (time.process_time() - cpu) / len(names) * 1000)


def advertools_rate(sites: int, sitemaps: bool) -> tuple[float, float]:
    import logging

    import advertools

    logging.getLogger().setLevel(logging.WARNING)  # advertools logs each URL at INFO

    urls = [f"http://{address(i)}/robots.txt" for i in range(sites)]
    started, cpu = time.perf_counter(), time.process_time()
    if sitemaps:
        with ThreadPoolExecutor(ADVERTOOLS_SITE_THREADS) as pool:
            frames = list(pool.map(advertools.sitemap_to_df, urls))
        assert sum(len(frame) for frame in frames) == sites * URLS_PER_SITEMAP
    else:
        frame = advertools.robotstxt_to_df(urls)
        assert frame["robotstxt_url"].nunique() == sites
    return (sites / (time.perf_counter() - started),
            (time.process_time() - cpu) / sites * 1000)


def isolated(job: Callable[..., tuple[float, float]], *args: object) -> tuple[float, float]:
    """``job`` in a fresh interpreter of its own, as each tool runs for its users: neither
    peer pays for the other's imports (a garbage collection walks every live object)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(job, *args).result()


JOBS = {"robots": "robots.txt alone", "sitemaps": "robots.txt + sitemaps",
        "nodelay": "robots.txt + sitemaps, polite with --delay 0 (no politeness delay: the "
                   "machinery alone)"}


def rates(args: argparse.Namespace) -> None:
    context = multiprocessing.get_context("fork")
    ready, stop = context.Event(), context.Event()
    here, there = context.Pipe()
    process = context.Process(target=serve_farm, args=(args.sites, ready, stop, there),
                              daemon=True)
    process.start()
    if not ready.wait(60):
        raise SystemExit("the farm did not start")
    farm = farm_of(args.sites)
    names = [name for name in farm.sites if not name[:1].isdigit()]
    results: dict[str, list[tuple[float, float]]] = {
        f"{peer} {job}": [] for job in JOBS for peer in ("polite", "advertools")}
    smallest = float("inf")
    gaps = followed = 0
    try:
        with tempfile.TemporaryDirectory() as folder:
            hosts = Path(folder) / "hosts"
            hosts.write_text("".join(f"{farm.sites[name][0]} {name}\n" for name in names))
            for round_ in range(args.rounds):
                for job in JOBS:
                    if job == "nodelay":  # the farm's gaps so far: the runs with a delay
                        here.send("gaps")
                        low, count, after = here.recv()
                        smallest, gaps = min(smallest, low), gaps + count
                        followed += after
                    results[f"polite {job}"].append(isolated(
                        polite_rate, names, hosts, job != "robots",
                        0.0 if job == "nodelay" else 1.0))
                    if job != "nodelay":
                        results[f"advertools {job}"].append(
                            isolated(advertools_rate, args.sites, job == "sitemaps"))
                results["advertools nodelay"].append(results["advertools sitemaps"][-1])
                here.send("gaps")
                here.recv()  # the no-delay run's gaps are not politeness: dropped
                print(f"round {round_ + 1}: " + ", ".join(
                    f"{key} {values[-1][0]:,.0f}/s" for key, values in results.items()),
                    flush=True)
    finally:
        stop.set()
        process.join(10)
    print(f"\n{args.sites:,} sites, {args.rounds} rounds, medians of the rounds:")
    print("| job | polite (domains/s) | advertools (domains/s) | polite / advertools | "
          "CPU ms per domain, polite | CPU ms per domain, advertools |")
    print("|---|---:|---:|---:|---:|---:|")
    for job, label in JOBS.items():
        ours, theirs = results[f"polite {job}"], results[f"advertools {job}"]
        ratio = statistics.median(a[0] / b[0] for a, b in zip(ours, theirs, strict=True))
        print(f"| {label} | {statistics.median(r for r, _ in ours):,.0f} | "
              f"{statistics.median(r for r, _ in theirs):,.0f} | {ratio:.1f}x | "
              f"{statistics.median(c for _, c in ours):.2f} | "
              f"{statistics.median(c for _, c in theirs):.2f} |")
    print(f"\npoliteness at the farm, polite's runs with a 1 s delay: {followed:,} requests "
          f"right after a host's robots.txt (which does not use up the slot); {gaps:,} after "
          f"a request that did" + (f", the smallest gap {smallest:.3f} s" if gaps else ""))


def serve_router(count: int, ready: multiprocessing.synchronize.Event,
                 stop: multiprocessing.synchronize.Event) -> None:
    cache: dict[str, dict[str, Page]] = {}

    def route(host: str, path: str) -> Page | None:
        if not host.endswith(".mem.test"):
            return None
        routes = cache.get(host)
        if routes is None:
            routes = site_routes(host)
            if len(cache) < 1_000:
                cache[host] = routes
        return routes.get(path)

    farm = Farm(router=route, router_addresses=tuple(f"127.0.18.{k}" for k in range(1, 101)),
                record=False)
    with farm.running():
        ready.set()
        stop.wait()


def memory(args: argparse.Namespace) -> None:
    count = args.memory
    context = multiprocessing.get_context("fork")
    ready, stop = context.Event(), context.Event()
    process = context.Process(target=serve_router, args=(count, ready, stop), daemon=True)
    process.start()
    ready.wait(60)
    try:
        with tempfile.TemporaryDirectory() as folder:
            base = Path(folder)
            (base / "hosts").write_text("".join(
                f"127.0.18.{i % 100 + 1} d{i}.mem.test\n" for i in range(count)))
            (base / "top.csv").write_text("".join(f"{i + 1},d{i}.mem.test\n"
                                                  for i in range(count)))
            command = [sys.executable, "-m", "polite", "survey", str(base / "top.csv"),
                       "--out", str(base / "out"), "--hosts", str(base / "hosts"),
                       "--allow-private", "--concurrency", str(POLITE_CONCURRENCY),
                       "--no-progress"]
            if args.memory_robots_only:
                command.append("--no-sitemaps")
            started = time.monotonic()
            survey = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            samples: list[tuple[float, int, int]] = []
            database = base / "out" / "survey.sqlite"
            while survey.poll() is None:
                time.sleep(1.0)
                try:
                    status = Path(f"/proc/{survey.pid}/status").read_text()
                except FileNotFoundError:
                    break
                rss_kb = next((int(line.split()[1]) for line in status.splitlines()
                               if line.startswith("VmRSS:")), 0)
                if not rss_kb:  # the process is ending
                    break
                done = 0
                if database.exists():
                    with sqlite3.connect(database, timeout=5) as db:
                        (done,) = db.execute("SELECT count(*) FROM sites").fetchone()
                samples.append((time.monotonic() - started, done, rss_kb))
            output = survey.communicate()[0]
            size = database.stat().st_size
    finally:
        stop.set()
        process.join(10)
    job = "robots.txt alone" if args.memory_robots_only else "robots.txt + sitemaps"
    print(f"\nmemory over {count:,} domains ({job}): {output.strip()}")
    print("| seconds | domains done | RSS (MB) |")
    print("|---:|---:|---:|")
    step = max(1, len(samples) // 10)
    for seconds, done, rss_kb in samples[::step] + samples[-1:]:
        print(f"| {seconds:,.0f} | {done:,} | {rss_kb / 1024:,.0f} |")
    later = [rss for _, done, rss in samples if done >= count // 10]
    if later:
        print(f"RSS after the first 10% of domains: {min(later) / 1024:,.0f} to "
              f"{max(later) / 1024:,.0f} MB; the state on disk: {size / 1e6:,.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the rates (0: skip)")
    parser.add_argument("--sites", type=int, default=1_000)
    parser.add_argument("--memory", type=int, default=100_000,
                        help="domains of the memory run (0: skip it)")
    parser.add_argument("--memory-robots-only", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the farm listens on port 80: run as root")
    if args.sites > 1_250:
        raise SystemExit("--sites: at most 1,250 (127.0.13.1 to 127.0.17.250)")
    print(f"machine: {os.cpu_count()} CPUs, shared with other work (noisy figures)")
    if args.rounds:
        rates(args)
    if args.memory:
        memory(args)


if __name__ == "__main__":
    main()

"""``polite crawl`` against Scrapy on one farm of loopback sites, in one run.

Everything is measured where it happens: the farm (a process of its own, one listener per
site on its own 127.3.x.y address) notes when each request arrives, so pages per second and
the gaps between two requests to one site are the sites' figures, not the crawlers'. CPU is
each crawler's own (its process's user + system time, from ``wait4``), and the farm's is
given beside it. Where ``taskset`` exists, the farm runs on the first core and each crawler
on the second, so that a crawler's figure is one core's.

* **No delay**: 100 sites of 120 pages (about 5 KB, 10-20 links each, one link in twenty to
  a path robots.txt disallows, a sitemap robots.txt names); robots.txt sets no delay, both
  crawlers with no delay of their own
  (``--default-delay-s 0``; Scrapy's ``DOWNLOAD_DELAY = 0``), one request in flight per
  site (``--per-host 1``; ``CONCURRENT_REQUESTS_PER_DOMAIN = 1``), ``ROBOTSTXT_OBEY``, links
  followed alike (every ``<a href>`` of the site; polite reads the sitemaps too), every
  page of every site. A request for a disallowed path stops the bench.
* **1 s delay**: 200 sites whose robots.txt says ``Crawl-delay: 1``; the ideal is 200 pages
  a second with no gap under a second at any site. Scrapy runs as its users run it
  (``DOWNLOAD_DELAY = 0``: it does not read Crawl-delay) and configured by hand
  (``DOWNLOAD_DELAY = 1``).
* **Memory**: the resident size of a ``polite crawl`` process while its frontier grows to a
  million queued URLs (pages that each link to 500 pages never fetched).

Run: ``.venv/bin/python bench/crawl_vs_scrapy.py [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FARM = r"""
import asyncio, json, random, signal, sys, time
hosts, port, pages, links, delay, log, sitemaps = sys.argv[1:8]
hosts, port, pages = int(hosts), int(port), int(pages)
low, _, high = links.partition("-")
low, high = int(low), int(high or low)
# about 5 KB a page with its links
filler = b"<p>" + b"lorem ipsum dolor sit amet, consectetur adipiscing elit " * 70 + b"</p>"

def robots(host):
    return (b"User-agent: *\nDisallow: /private/\nDisallow: /search\n"
            + (b"Crawl-delay: %s\n" % delay.encode() if delay != "0" else b"")
            + (b"Sitemap: http://%s:%d/sitemap.xml\n" % (host.encode(), port)
               if sitemaps == "1" else b""))

def sitemap(host):
    urls = "".join(f"<url><loc>http://{host}:{port}/p{n}</loc></url>"
                   for n in range(min(pages, 50000)))
    return ('<?xml version="1.0" encoding="UTF-8"?><urlset xmlns='
            '"http://www.sitemaps.org/schemas/sitemap/0.9">' + urls + "</urlset>").encode()

def page(n):
    rng = random.Random(n)
    if low > 50:  # the memory run: every link a page of its own, never met twice
        hrefs = [f"/p{n * low + k + 1}" for k in range(low)]
    else:  # 10-20 links, one in twenty to a path robots.txt disallows
        hrefs = [f"/private/p{rng.randrange(pages)}" if rng.random() < 0.05
                 else f"/p{rng.randrange(pages)}" for _ in range(rng.randint(low, high))]
    body = "".join(f'<li><a href="{h}">{h}</a></li>' for h in hrefs).encode()
    return (b"<!DOCTYPE html><html><head><title>page</title></head><body><ul>" + body
            + b"</ul>" + filler + b"</body></html>")

cache = {}
arrivals = {}
disallowed = [0]

async def handle(reader, writer):
    host = writer.get_extra_info("sockname")[0]
    times = arrivals.setdefault(host, [])
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            times.append(time.monotonic())
            path = head.split(b" ", 2)[1]
            if path == b"/robots.txt" or path == b"/sitemap.xml":
                times.pop()
                body, kind = ((robots(host), b"text/plain") if path == b"/robots.txt"
                              else (sitemap(host), b"application/xml"))
            else:
                if path.startswith((b"/private/", b"/search")):
                    disallowed[0] += 1
                try:
                    n = int(path[2:]) if path.startswith(b"/p") else 0
                except ValueError:
                    n = 0
                body = cache.get(n)
                if body is None:
                    body = page(n)
                    if len(cache) < 5000:
                        cache[n] = body
                kind = b"text/html"
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                         % (kind, len(body)) + body)
            await writer.drain()
    except Exception:
        writer.close()

async def main():
    for i in range(hosts):
        await asyncio.start_server(handle, f"127.3.{i // 250}.{i % 250 + 1}", port,
                                   backlog=256)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    await stop.wait()
    with open(log, "w") as out:
        json.dump({"arrivals": arrivals, "disallowed": disallowed[0]}, out)

try:
    import uvloop
    uvloop.run(main())
except ImportError:
    asyncio.run(main())
"""

SPIDER = r'''
import sys
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

seeds, pages, delay = sys.argv[1].split(","), int(sys.argv[2]), float(sys.argv[3])

class Farm(CrawlSpider):
    name = "farm"
    start_urls = seeds
    allowed_domains = [url.split("/")[2].split(":")[0] for url in seeds]
    rules = (Rule(LinkExtractor(), follow=True),)

process = CrawlerProcess(settings={
    "ROBOTSTXT_OBEY": True, "CONCURRENT_REQUESTS": 64, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
    "CONCURRENT_REQUESTS_PER_IP": 0, "DOWNLOAD_DELAY": delay, "AUTOTHROTTLE_ENABLED": False,
    "HTTPCACHE_ENABLED": False, "LOG_LEVEL": "WARNING", "COOKIES_ENABLED": False,
    "CLOSESPIDER_PAGECOUNT": pages, "TELNETCONSOLE_ENABLED": False,
    "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
})
process.crawl(Farm)
process.start()
'''


def pinned(core: int) -> list[str]:
    """The prefix that runs a command on one core of its own (``taskset -c``), where taskset
    exists and there are two cores to share out: the farm on the first, each crawler on the
    second, so that neither takes the other's time. Empty where that cannot be done (and
    with ``POLITE_BENCH_NO_PIN=1``)."""
    if (shutil.which("taskset") is None or (os.cpu_count() or 1) < 2
            or os.environ.get("POLITE_BENCH_NO_PIN")):
        return []
    return ["taskset", "-c", str(core)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.3.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def farm(folder: Path, hosts: int, pages: int, links: str, delay: str, *,
         sitemaps: bool = True) -> Iterator[tuple[list[str], Path, subprocess.Popen[str]]]:
    """The farm, running; yields the seeds, the file its arrivals go to, the process. Each
    site has ``pages`` pages of about 5 KB, each linking to ``links`` (``"10-20"``: a number
    drawn in that range) of them, one link in twenty to a path its robots.txt disallows,
    and (``sitemaps``) a sitemap its robots.txt names listing every page."""
    port = free_port()
    log = folder / f"arrivals-{time.monotonic_ns()}.json"
    script = folder / "farm.py"
    script.write_text(FARM)
    process = subprocess.Popen([*pinned(0), sys.executable, str(script), str(hosts), str(port),
                                str(pages), links, delay, str(log),
                                "1" if sitemaps else "0"],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    seeds = [f"http://127.3.{i // 250}.{i % 250 + 1}:{port}/" for i in range(hosts)]
    try:
        yield seeds, log, process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def farm_cpu_s(process: subprocess.Popen[str]) -> float:
    with open(f"/proc/{process.pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_crawler(command: list[str], timeout_s: float) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of a crawler process."""
    started = time.monotonic()
    process = subprocess.Popen([*pinned(1), *command], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except BaseException:
        process.kill()
        raise
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        assert process.stderr is not None
        raise RuntimeError(f"{command[:3]} failed: {process.stderr.read()[-2000:]}")
    if wall > timeout_s:
        print(f"  (took {wall:.0f} s)")
    return wall, usage.ru_utime + usage.ru_stime


def site_figures(log: Path, limit_gap_s: float | None) -> tuple[int, float, int, float]:
    """(pages, pages per second at the farm, gaps under the limit, shortest gap). The rate
    counts the pages after each site's first over the time from the first page to the
    last: with a delay of d, n pages of one site take (n - 1) * d. A request for a path
    robots.txt disallows is an error: the crawlers obey it."""
    record = json.loads(log.read_text())
    if record["disallowed"]:
        raise RuntimeError(f"{record['disallowed']} requests for disallowed paths")
    arrivals = record["arrivals"]
    times = sorted(t for ts in arrivals.values() for t in ts)
    span = times[-1] - times[0] if len(times) > 1 else 1.0
    if limit_gap_s is not None:
        return_rate = (len(times) - len(arrivals)) / span
    else:
        return_rate = len(times) / span
    under, shortest = 0, float("inf")
    for ts in arrivals.values():
        ts.sort()
        for a, b in itertools.pairwise(ts):
            shortest = min(shortest, b - a)
            if limit_gap_s is not None and b - a < limit_gap_s:
                under += 1
    return len(times), return_rate, under, shortest


def polite_command(out: Path, seeds: list[str], pages: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "polite", "crawl", *seeds, "--out", str(out),
            "--allow-private", "--default-delay-s", "0", "--max-pages", str(pages),
            "--json", *extra]


def scrapy_command(folder: Path, seeds: list[str], pages: int, delay: float) -> list[str]:
    script = folder / "spider.py"
    script.write_text(SPIDER)
    return [sys.executable, str(script), ",".join(seeds), str(pages), str(delay)]


def no_delay(folder: Path, rounds: int, sites: int, per_site: int, *, peer: bool = True
             ) -> dict[str, float]:
    """Every page of ``sites`` sites of ``per_site`` pages; prints the table and returns
    polite's medians: pages/s at the farm and CPU ms per page (``peer=False``: polite
    alone, for bench/quick.py)."""
    pages = sites * per_site
    print(f"\n## No delay: {sites} sites x {per_site} pages (~5 KB, 10-20 links, robots.txt "
          f"Disallow lines, a sitemap), one request in flight per site, {rounds} interleaved "
          f"rounds\n")
    rows: dict[str, list[tuple[float, float, float, int]]] = {"polite crawl": []}
    if peer:
        rows["Scrapy"] = []
    for round_ in range(rounds):
        for name in rows:
            with farm(folder, sites, per_site, "10-20", "0") as (seeds, log, process):
                if name == "Scrapy":
                    command = scrapy_command(folder, seeds, pages, 0.0)
                else:
                    command = polite_command(folder / f"out-{round_}", seeds, pages)
                before = farm_cpu_s(process)
                _, cpu = run_crawler(command, 600)
                farm_cpu = farm_cpu_s(process) - before
            fetched, rate, _, _ = site_figures(log, None)
            rows[name].append((rate, cpu / fetched * 1000, farm_cpu / fetched * 1000, fetched))
    print("| crawler | pages fetched | pages/s at the farm | CPU ms per page "
          "| farm CPU ms per page |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in rows.items():
        print(f"| {name} | {statistics.median(r[3] for r in runs):,.0f} | "
              f"{statistics.median(r[0] for r in runs):,.0f} | "
              f"{statistics.median(r[1] for r in runs):.2f} | "
              f"{statistics.median(r[2] for r in runs):.2f} |")
    figures = {"crawl pages/s": statistics.median(r[0] for r in rows["polite crawl"]),
               "crawl CPU ms/page": statistics.median(r[1] for r in rows["polite crawl"])}
    if not peer:
        return figures
    ratios = [p[0] / s[0] for p, s in zip(rows["polite crawl"], rows["Scrapy"], strict=True)]
    cpu_ratios = [s[1] / p[1] for p, s in zip(rows["polite crawl"], rows["Scrapy"], strict=True)]
    print(f"\npolite / Scrapy, pages/s per round: {', '.join(f'{r:.2f}' for r in ratios)} "
          f"(median {statistics.median(ratios):.2f}); Scrapy's CPU per page / polite's: "
          f"median {statistics.median(cpu_ratios):.2f}")
    figures["crawl pages/s vs Scrapy"] = statistics.median(ratios)
    return figures


def with_delay(folder: Path, sites: int, seconds: float) -> None:
    pages = int(sites * seconds)
    print(f"\n## Crawl-delay: 1 on {sites} sites, {pages:,} pages a crawl (ideal: {sites} "
          "pages/s, no gap under 1 s)\n")
    print("| crawler | pages/s at the farm | of the ideal | gaps under 1 s | shortest gap |")
    print("|---|---:|---:|---:|---:|")
    for name, delay in (("polite crawl", None), ("Scrapy (DOWNLOAD_DELAY 0)", 0.0),
                        ("Scrapy (DOWNLOAD_DELAY 1)", 1.0)):
        # no sitemap: a site's pages are its first page's links, so that every crawler starts
        # each site with its first page (a sitemap read first would take a delay of its own)
        with farm(folder, sites, 2000, "10", "1", sitemaps=False) as (seeds, log, _):
            if delay is None:
                command = polite_command(folder / f"out-delay-{sites}", seeds, pages,
                                         "--concurrency", str(sites))
            else:
                command = scrapy_command(folder, seeds, pages, delay)
            run_crawler(command, 600)
        fetched, rate, under, shortest = site_figures(log, 1.0)
        print(f"| {name} | {rate:,.1f} | {rate / sites:.0%} | {under:,} of "
              f"{fetched - sites:,} | {shortest:.3f} s |")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def memory(folder: Path, target: int) -> None:
    print(f"\n## Memory while the frontier grows to {target:,} queued URLs\n")
    links = 500
    with farm(folder, 20, 10**9, str(links), "0") as (seeds, _, _):
        out = folder / "out-memory"
        command = polite_command(out, seeds, target // links + 40, "--no-warc")
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        samples: list[tuple[int, int]] = []
        marks = [target * k // 10 for k in (1, 2, 5, 10)]
        database = out / "crawl.sqlite"
        while process.poll() is None:
            time.sleep(1.0)
            if not database.exists():
                continue
            try:
                with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5) as db:
                    (queued,) = db.execute("SELECT COUNT(*) FROM frontier WHERE state = 0"
                                           ).fetchone()
            except sqlite3.Error:
                continue
            rss = rss_kib(process.pid)
            if rss:
                samples.append((queued, rss))
        process.wait()
    print("| queued URLs | resident MiB |")
    print("|---:|---:|")
    shown = {min(samples, key=lambda s: abs(s[0] - mark)) for mark in marks if samples}
    for queued, rss in sorted(shown):
        print(f"| {queued:,} | {rss / 1024:.0f} |")


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--quick", action="store_true", help="smaller runs")
    options.add_argument("--guard", action="store_true",
                         help="polite alone, one small crawl with no delay (bench/quick.py)")
    options.add_argument("--json", type=Path, help="also write polite's figures here")
    args = options.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        if args.guard:
            figures = no_delay(folder, 1, 50, 30, peer=False)
        elif args.quick:
            figures = no_delay(folder, 1, 50, 30)
            with_delay(folder, 50, 8)
            memory(folder, 100_000)
        else:
            figures = no_delay(folder, 3, 100, 120)
            with_delay(folder, 200, 20)
            memory(folder, 1_000_000)
    if args.json:
        args.json.write_text(json.dumps(figures))
    print(textwrap.dedent("""
        Pages per second are counted at the farm, from its first page request to its last;
        CPU is the crawler process's own. The machine is shared: read the ratios."""))


if __name__ == "__main__":
    main()

"""What polite's Scrapy drop-ins cost, against Scrapy itself, in one run.

1. The downloader middleware: a Scrapy CrawlSpider with
   ``polite.integrations.scrapy.PoliteDownloaderMiddleware`` against the same spider on
   plain Scrapy (ROBOTSTXT_OBEY, no delay), on a zero-delay loopback farm (the farm of
   bench/crawl_vs_scrapy.py: one asyncio process, many sites), pages per second counted at
   the farm; interleaved rounds, the median of the per-round ratios.
2. The robots.txt parser inside Scrapy: ``polite.integrations.scrapy.RobotParser`` against
   Scrapy's ``ProtegoRobotParser`` (its default), both called as RobotsTxtMiddleware calls
   them (``from_crawler(crawler, body)`` per site, ``allowed(url, user_agent)`` per
   request), on the real corpus in ../shared/corpus/robots and its URL workload; with how
   often the two disagree.

Run: ``python bench/integrations_vs_scrapy.py`` (``--quick`` for a short look, ``--rounds N``,
``--twisted`` to run both on Twisted's own epoll reactor too, where polite's gate works on a
thread of its own).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

# The other bench scripts, as modules: the farm and the corpus are theirs.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from crawl_vs_scrapy import farm, run_crawler, site_figures
from robots_vs_peers import DEFAULT_CORPUS, interleaved, load

SPIDER = r'''
import sys
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

seeds, pages, mode = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
twisted = mode.endswith("-twisted")  # Twisted's own epoll reactor, not Scrapy's asyncio one
mode = mode.removesuffix("-twisted")
polite = mode != "plain"

class Farm(CrawlSpider):
    name = "farm"
    start_urls = seeds
    allowed_domains = [url.split("/")[2].split(":")[0] for url in seeds]
    rules = (Rule(LinkExtractor(), follow=True),)

settings = {
    "ROBOTSTXT_OBEY": not polite, "CONCURRENT_REQUESTS": 64,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "CONCURRENT_REQUESTS_PER_IP": 0,
    "DOWNLOAD_DELAY": 0, "AUTOTHROTTLE_ENABLED": False, "HTTPCACHE_ENABLED": False,
    "LOG_LEVEL": "WARNING", "COOKIES_ENABLED": False, "CLOSESPIDER_PAGECOUNT": pages,
    "TELNETCONSOLE_ENABLED": False, "USER_AGENT": "FarmBot/1.0",
}
if polite:
    settings.update({
        "DOWNLOADER_MIDDLEWARES": {
            "polite.integrations.scrapy.PoliteDownloaderMiddleware": 543},
        "POLITE_ALLOW_PRIVATE": True, "POLITE_DEFAULT_DELAY": 0.0,
        # "overhead": the adaptive delay off, so that only the middleware's cost shows
        "POLITE_ADAPTIVE_FACTOR": 0.0 if mode == "overhead" else 1.0,
    })
if twisted:
    settings["TWISTED_REACTOR"] = "twisted.internet.epollreactor.EPollReactor"
process = CrawlerProcess(settings=settings)
process.crawl(Farm)
process.start()
'''


def middleware(folder: Path, rounds: int, sites: int, pages: int, twisted: bool) -> None:
    print(f"\n## Downloader middleware: {sites} sites, no delay, {pages:,} pages a crawl, "
          f"one request in flight per site, {rounds} interleaved rounds\n")
    script = folder / "spider.py"
    script.write_text(SPIDER)
    modes = {"Scrapy": "plain", "Scrapy + polite, adaptive delay off": "overhead",
             "Scrapy + polite, defaults (adaptive delay 1x response time)": "polite"}
    if twisted:  # polite's gate on a thread of its own, against Scrapy on the same reactor
        modes.update({"Scrapy, Twisted reactor": "plain-twisted",
                      "Scrapy + polite, defaults, Twisted reactor": "polite-twisted"})
    rates: dict[str, list[float]] = {name: [] for name in modes}
    cpu_ms: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(rounds):
        for name, mode in modes.items():
            with farm(folder, sites, 2000, 10, "0") as (seeds, log, _):
                _, cpu_s = run_crawler([sys.executable, str(script), ",".join(seeds),
                                        str(pages), mode], 600)
            fetched, rate, _, _ = site_figures(log, None)
            rates[name].append(rate)
            cpu_ms[name].append(cpu_s / fetched * 1000)
    print("| Scrapy | pages/s at the farm | per round | crawler CPU ms per page |")
    print("|---|---:|---|---:|")
    for name, runs in rates.items():
        print(f"| {name} | {statistics.median(runs):,.0f} | "
              f"{', '.join(f'{r:,.0f}' for r in runs)} | "
              f"{statistics.median(cpu_ms[name]):.2f} |")
    for name in list(modes)[1:]:
        if name == "Scrapy, Twisted reactor":
            continue
        base = "Scrapy, Twisted reactor" if name.endswith("Twisted reactor") else "Scrapy"
        per_round = [p / s for p, s in zip(rates[name], rates[base], strict=True)]
        cpu = [p / s for p, s in zip(cpu_ms[name], cpu_ms[base], strict=True)]
        print(f"\n{name} / {base}: pages/s per round "
              f"{', '.join(f'{r:.2f}' for r in per_round)} (median "
              f"{statistics.median(per_round):.2f}); CPU per page, median of the rounds' "
              f"ratios {statistics.median(cpu):.2f}")


def robot_parsers(corpus: Path, rounds: int, quick: bool, agent: str) -> None:
    from scrapy.robotstxt import ProtegoRobotParser
    from scrapy.utils.test import get_crawler

    from polite.integrations.scrapy import RobotParser

    bodies, workload = load(corpus, quick)
    crawler = get_crawler(settings_dict={"ROBOTSTXT_PARSER":
                                         "polite.integrations.scrapy.RobotParser"})
    print(f"\n## robots.txt inside Scrapy: {len(bodies):,} files, {len(workload):,} checks, "
          f"agent {agent!r}, {rounds} interleaved rounds\n")
    parsers = {"Protego (Scrapy's default)": ProtegoRobotParser,
               "polite RobotParser": RobotParser}
    parsed = {name: {d: cls.from_crawler(crawler, b) for d, b in bodies.items()}
              for name, cls in parsers.items()}

    def parse_all(cls: type) -> None:
        for body in bodies.values():
            cls.from_crawler(crawler, body)

    def check_all(name: str) -> list[bool]:
        table = parsed[name]
        return [table[d].allowed(u, agent) for d, u in workload]

    parse_times = interleaved({name: (lambda c=cls: parse_all(c))
                               for name, cls in parsers.items()}, rounds)
    check_times = interleaved({name: (lambda n=name: check_all(n)) for name in parsers},
                              rounds)
    answers = {name: check_all(name) for name in parsers}
    names = list(parsers)
    differ = sum(a != b for a, b in zip(answers[names[0]], answers[names[1]], strict=True))
    print("| parser | parse the corpus (ms) | checks/s |")
    print("|---|---:|---:|")
    for name in parsers:
        print(f"| {name} | {statistics.median(parse_times[name]) * 1000:,.0f} | "
              f"{len(workload) / statistics.median(check_times[name]):,.0f} |")
    for label, times in (("parse", parse_times), ("check", check_times)):
        per_round = [p / q for p, q in zip(times[names[0]], times[names[1]], strict=True)]
        print(f"\n{label}: Protego's time / polite's, per round: "
              f"{', '.join(f'{r:.2f}' for r in per_round)} "
              f"(median {statistics.median(per_round):.2f})")
    print(f"\nanswers that differ: {differ:,} of {len(workload):,} "
          f"({differ / len(workload):.2%}); allowed by polite: "
          f"{sum(answers[names[1]]):,}, by Protego: {sum(answers[names[0]]):,}")


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    options.add_argument("--agent", default="examplebot")
    options.add_argument("--quick", action="store_true")
    options.add_argument("--rounds", type=int, help="interleaved rounds (7; 3 with --quick)")
    options.add_argument("--twisted", action="store_true",
                         help="also both on Twisted's epoll reactor (polite's gate on a thread)")
    args = options.parse_args()
    started = time.monotonic()
    rounds = args.rounds or (3 if args.quick else 7)
    print("Shared machine (2 cores, other work running): read the ratios, not the rates.")
    with tempfile.TemporaryDirectory() as folder:
        middleware(Path(folder), rounds, 20 if args.quick else 40,
                   600 if args.quick else 1200, args.twisted)
    if (args.corpus / "urls.txt").exists():
        robot_parsers(args.corpus, rounds, args.quick, args.agent)
    else:
        print(f"\nno corpus at {args.corpus}: the parser comparison is skipped")
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

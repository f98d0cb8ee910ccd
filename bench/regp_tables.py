"""Seed 000's experiments (section 5) reproduced: its news website served on loopback
(``polite.demo``), crawled by ``polite.crawl`` once per robots.txt file, and Tables 9, 10
and 11 printed from what reached the site; then the section's last two experiments, a
``Visit-time`` window and ``Language: fr``.

Each table's "Fetch" says whether a request of that kind reached the site; its "Crawl delay
(s)" is the shortest gap the site measured before such a request (since the request before
it, of any kind; 0 where there was none, as the seed prints). The crawler runs with a default
delay of 0, as the seed's crawler had no delay of its own: every gap is one the site asked
for. Its languages are Chinese and English.

Run: ``.venv/bin/python bench/regp_tables.py [--news 10] [--window-s 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from polite.crawl import CrawlSettings, open_crawler
from polite.demo import RegpSite, start_site, visit_time_value
from polite.demo.regp_site import RobotsVariant, resource_of

LANGUAGES = ("zh", "en")
# Seed 000's Tables 9-11: title, robots.txt, and (fetched, crawl delay in seconds) per row
# (Home page, Useless pages, Latest news pages, Old news pages).
SEED_TABLES: dict[int, tuple[str, RobotsVariant, list[tuple[bool, float]]]] = {
    9: ("Fetching results without robots.txt", "none",
        [(True, 0.0), (True, 0.0), (True, 0.0), (False, 0.0)]),
    10: ("Fetching results with robots.txt", "regp",
         [(True, 0.5), (False, 0.0), (True, 1.0), (True, 1.0)]),
    11: ("Fetching result with the old REP", "rep",
         [(True, 0.0), (False, 0.0), (True, 0.0), (False, 0.0)]),
}


async def crawl(folder: Path, sites: list[RegpSite], delay_s: float) -> list[dict[str, Any]]:
    """One crawl from the sites' home pages; pages.jsonl as records."""
    settings = CrawlSettings(agent="regpbot", languages=LANGUAGES, warc=False)
    async with open_crawler(folder, settings, default_delay_s=delay_s,
                            allow_private=True) as crawler:
        await crawler.add_seeds([site.origin + "/" for site in sites])
        await crawler.run()
    lines = (folder / "pages.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _yes(value: bool) -> str:
    return "Yes" if value else "No"


def print_table(number: int, site: RegpSite, pages: list[dict[str, Any]], seconds: float
                ) -> bool:
    """Table ``number`` as measured, beside the seed's; whether the two agree."""
    title, variant, seed = SEED_TABLES[number]
    print(f"Table {number}. {title} (robots.txt: {variant}; {site.news} news items, "
          f"crawled in {seconds:.1f} s)\n")
    print("| Resource | Fetch | Crawl delay (s) | seed 000 |")
    print("|---|---|---:|---|")
    agree = True
    for row, (seed_fetched, seed_delay) in zip(site.table(), seed, strict=True):
        delay = row.min_gap_s if row.fetched and row.min_gap_s is not None else 0.0
        print(f"| {row.resource} | {_yes(row.fetched)} | {delay:.2f} | "
              f"{_yes(seed_fetched)}, {seed_delay:g} |")
        agree &= row.fetched == seed_fetched and round(delay, 1) == seed_delay
    requests = site.requests
    kinds = [resource_of(r.path, site.news) for r in requests]
    snapshots = sum(r.path.startswith("/html/") for r in requests)
    originals = sum(r.path.lower().startswith("/newsitem.do") for r in requests)
    gaps = site.gaps()
    html_gaps = [gap for gap, r in gaps if r.path.startswith("/html/")]
    skipped = sum(r.get("reason", "").startswith("fetched as its snapshot") for r in pages)
    print(f"\n{len(requests)} requests reached the site ({kinds.count('robots.txt')} "
          f"robots.txt, {kinds.count('sitemap.xml')} sitemap.xml, "
          f"{kinds.count('Comments (Ajax)')} comments.do); news pages fetched through their "
          f"snapshots: {snapshots} of {site.news}, through newsItem.do: {originals}"
          + (f" (pages.jsonl: {skipped} skipped as 'fetched as its snapshot')"
             if skipped else "") + ".")
    if gaps:
        print(f"Shortest gap between any two requests: {min(g for g, _ in gaps):.3f} s"
              + (f"; before a request under /html/: {min(html_gaps):.3f} s" if html_gaps
                 else "") + ".")
    print(f"As in the seed: {'yes' if agree else 'NO'}.\n")
    return agree


def table_run(number: int, host: str, news: int, delay_s: float) -> bool:
    variant = SEED_TABLES[number][1]
    with tempfile.TemporaryDirectory() as folder, \
            start_site(host, robots=variant, news=news) as site:
        started = time.monotonic()
        pages = asyncio.run(crawl(Path(folder), [site], delay_s))
        seconds = time.monotonic() - started
    return print_table(number, site, pages, seconds)


def visit_time_run(hosts: tuple[str, str], window_s: int, delay_s: float) -> bool:
    started = time.time()
    opens = math.ceil(started) + window_s  # Visit-time has whole seconds
    window = visit_time_value(opens)
    with tempfile.TemporaryDirectory() as folder, \
            start_site(hosts[0], robots="regp", news=3, visit_time=window) as late, \
            start_site(hosts[1], robots="none", news=3) as other:
        asyncio.run(crawl(Path(folder), [late, other], delay_s))
    print(f"Visit-time: {window} (the window opens {opens - started:.1f} s after the crawl "
          "starts)\n")
    before = [r.path for r in late.requests if r.wall < opens]
    after = [r for r in late.requests if r.wall >= opens]
    print(f"* The site with the window: before the opening {len(before)} request(s) "
          f"({', '.join(before)}: read to learn of the window); after it {len(after)}, the "
          + (f"first ({after[0].path}) {after[0].wall - opens:.3f} s after the opening, the "
             f"last {after[-1].wall - opens:.1f} s after it." if after else "none."))
    other_requests = other.requests
    print(f"* The site without a window, crawled meanwhile: {len(other_requests)} requests, "
          f"from {other_requests[0].wall - started:.3f} s to "
          f"{other_requests[-1].wall - started:.3f} s after the start.\n")
    return (before == ["/robots.txt"] and bool(after) and after[0].wall - opens < 1.0
            and other_requests[-1].wall < opens)


def language_run(host: str, delay_s: float) -> bool:
    with tempfile.TemporaryDirectory() as folder, \
            start_site(host, robots="regp", news=3, language="fr") as site:
        pages = asyncio.run(crawl(Path(folder), [site], delay_s))
    print("Language: fr (the crawler reads zh and en)\n")
    print(f"* Requests that reached the site: {', '.join(r.path for r in site.requests)}.")
    for record in pages:
        print(f"* pages.jsonl: {record['url']} {record['outcome']}: {record.get('reason')}")
    print()
    return ([r.path for r in site.requests] == ["/robots.txt"]
            and all(record["outcome"] == "skipped" for record in pages))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--news", type=int, default=10, help="news items (default 10)")
    parser.add_argument("--window-s", type=int, default=3,
                        help="the Visit-time window opens this long after the start")
    parser.add_argument("--default-delay-ms", type=int, default=0,
                        help="the crawler's own delay (default 0, as the seed's)")
    args = parser.parse_args(argv)
    delay_s = args.default_delay_ms / 1000
    results = [table_run(9, "127.0.0.2", args.news, delay_s),
               table_run(10, "127.0.0.3", args.news, delay_s),
               table_run(11, "127.0.0.4", args.news, delay_s),
               visit_time_run(("127.0.0.5", "127.0.0.6"), args.window_s, delay_s),
               language_run("127.0.0.7", delay_s)]
    print("Every experiment as the seed reports it." if all(results)
          else "Some experiment differs from the seed (see above).")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

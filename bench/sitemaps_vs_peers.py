"""polite's sitemap parser against bare lxml and its peers, in one run, reported as ratios.

One generated urlset of 50,000 URLs (about 11 MB: loc, lastmod, changefreq, priority, as
sitemap generators write them) is parsed by:

* ``lxml iterparse (bare)``: ``for _ in etree.iterparse(path): pass``, extracting nothing,
  keeping the tree (the yardstick of the issue);
* ``lxml iterparse + clear``: the same loop clearing each element, as a streaming reader must;
* ``polite``: ``polite.sitemaps.parse`` streamed from the file, every entry built and its
  lastmod and priority typed and checked;
* ``scrapy Sitemap`` (``scrapy.utils.sitemap.Sitemap``, lxml underneath, whole body);
* ``ultimate-sitemap-parser`` (``usp``, expat underneath, whole body).

Times are per parse, CPU seconds of this process over interleaved rounds; the ratios are
given of the medians and of the minimums. On a shared, noisy machine the minimum (each
contender's best round) is the steadiest figure; the median swings with the neighbours.
Memory is how much a fresh process's peak resident size grows while it parses 10,000 and
then 50,000 URLs (libraries imported and, for the whole-body parsers, the body already
read): a streaming parser's growth stays flat.

Run: ``make bench`` or ``.venv/bin/python bench/sitemaps_vs_peers.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from polite.sitemaps import parse

WORDS = ("red", "blue", "shoe", "table", "garden", "kitchen", "lamp", "chair", "wooden",
         "modern", "outdoor", "classic")


def generate(path: Path, count: int) -> None:
    rng = random.Random(7)
    parts = ['<?xml version="1.0" encoding="UTF-8"?>\n'
             '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n']
    for n in range(count):
        slug = "-".join(rng.choice(WORDS) for _ in range(5))
        parts.append(
            f"  <url>\n    <loc>https://www.example-shop.com/products/c{n % 97}/{slug}-{n}"
            f"</loc>\n    <lastmod>2024-{1 + n % 12:02d}-{1 + n % 28:02d}T{n % 24:02d}:"
            f"{n % 60:02d}:00+00:00</lastmod>\n    <changefreq>weekly</changefreq>\n"
            f"    <priority>0.{n % 10}</priority>\n  </url>\n")
    parts.append("</urlset>\n")
    path.write_text("".join(parts), encoding="utf-8")


def contenders(path: Path) -> dict[str, Callable[[], int]]:
    body = path.read_bytes()
    runs: dict[str, Callable[[], int]] = {}
    try:
        from lxml import etree
    except ImportError:
        print("lxml is not installed (pip install -e '.[bench]'); no yardstick")
        sys.exit(2)

    def lxml_bare() -> int:
        count = 0
        for _ in etree.iterparse(str(path)):
            count += 1
        return count

    def lxml_clear() -> int:
        count = 0
        for _, element in etree.iterparse(str(path)):
            element.clear()
            count += 1
        return count

    def polite() -> int:
        with path.open("rb") as file:
            return sum(1 for _ in parse(file))

    runs["lxml iterparse (bare)"] = lxml_bare
    runs["lxml iterparse + clear"] = lxml_clear
    runs["polite"] = polite
    try:
        from scrapy.utils.sitemap import Sitemap

        def scrapy() -> int:
            return sum(1 for _ in Sitemap(body))

        runs["scrapy Sitemap"] = scrapy
    except ImportError:
        print("scrapy is not installed; left out")
    try:
        from usp.fetch_parse import SitemapStrParser

        text = body.decode()

        def usp() -> int:
            return sum(1 for _ in SitemapStrParser(text).sitemap().all_pages())

        runs["ultimate-sitemap-parser"] = usp
    except ImportError:
        print("ultimate-sitemap-parser is not installed; left out")
    return runs


def high_water_kib() -> int:
    """This process's peak resident size so far, from /proc (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def peak_rss_mib(name: str, path: Path) -> float:
    """How much a fresh process's peak resident memory grows while ``name`` parses
    ``path`` (imports and the file's bytes are loaded before the first reading)."""
    # VmHWM (Linux) rather than ru_maxrss, which a child inherits from this big parent.
    code = (
        "import sys; from pathlib import Path; "
        "sys.path.insert(0, sys.argv[3]); import sitemaps_vs_peers as b; "
        "run = b.contenders(Path(sys.argv[2]))[sys.argv[1]]; "
        "before = b.high_water_kib(); run(); print(b.high_water_kib() - before)"
    )
    result = subprocess.run([sys.executable, "-c", code, name, str(path),
                             str(Path(__file__).parent)],
                            capture_output=True, text=True, check=True)
    return int(result.stdout.split()[-1]) / 1024


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--rounds", type=int, default=15)
    args = options.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp, "sitemap-50000.xml"), Path(tmp, "sitemap-10000.xml")
        generate(big, 50_000)
        generate(small, 10_000)
        runs = contenders(big)
        counts = {name: run() for name, run in runs.items()}  # warm-up, and a sanity check
        print(f"file: {big.stat().st_size / 1e6:.1f} MB, 50,000 URLs; "
              f"{args.rounds} interleaved rounds; Python {sys.version.split()[0]}")
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, run in runs.items():
                gc.collect()
                started = time.process_time()
                run()
                times[name].append(time.process_time() - started)
        yardstick = statistics.median(times["lxml iterparse (bare)"])
        best = min(times["lxml iterparse (bare)"])
        print("\n| parser | items | median s | min s | x bare lxml (median) | x bare lxml (min) "
              "| peak RSS growth, 10k / 50k URLs |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name in runs:
            median = statistics.median(times[name])
            memory = f"{peak_rss_mib(name, small):.0f} / {peak_rss_mib(name, big):.0f} MiB"
            print(f"| {name} | {counts[name]:,} | {median:.3f} | {min(times[name]):.3f} | "
                  f"{median / yardstick:.2f} | {min(times[name]) / best:.2f} | {memory} |")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"\n(this process peaked at {rss:.0f} MiB holding every contender's input)")


if __name__ == "__main__":
    main()

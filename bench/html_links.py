"""Which HTML parser the crawler takes links with: lexbor (selectolax) against lxml and the
standard library, on the same pages, in one run, reported as ratios.

Every contender does the crawler's whole job on a page: parse it, read ``<base href>``, the
robots META tags and every ``<a href>`` / ``<area href>`` / frame ``src`` with its ``rel``.

* ``selectolax (lexbor)``: ``polite.crawl.html.extract_links``, what the crawler runs;
* ``lxml.html``: ``lxml.html.fromstring`` and one XPath per kind of element;
* ``html.parser``: the standard library's tokenizer with a start-tag handler.

Pages are generated in the shape of real ones: a head with scripts and styles, nested
markup, 30-300 links, 20-120 KB, some of it broken (unclosed tags, stray brackets). Times
are CPU seconds per page over interleaved rounds; the ratio is against selectolax.

Run: ``.venv/bin/python bench/html_links.py [--pages N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from html.parser import HTMLParser

import lxml.html

from polite.crawl.html import extract_links

WORDS = ("news", "sport", "garden", "kitchen", "travel", "music", "books", "science", "art")


def make_page(rng: random.Random) -> str:
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             '<meta name="robots" content="index, follow">',
             f"<title>{rng.choice(WORDS)}</title>",
             "<style>" + "body{margin:0}" * rng.randint(10, 200) + "</style>",
             "<script>var x = '<a href=\"/not-a-link\">';" + "f();" * rng.randint(10, 300)
             + "</script></head><body>"]
    for _ in range(rng.randint(30, 300)):
        word = rng.choice(WORDS)
        rel = ' rel="nofollow"' if rng.random() < 0.05 else ""
        parts.append(f'<div class="c-{word}"><p>{word} ' * rng.randint(1, 3))
        parts.append(f'<a href="/{word}/{rng.randint(1, 10**6)}?p={rng.randint(1, 9)}"{rel}>'
                     f"{word} &amp; more</a>")
        parts.append("</p></div>" * rng.randint(0, 3))  # sometimes left open, as real pages do
        if rng.random() < 0.02:
            parts.append("<<<>")
    parts.append("</body></html>")
    return "".join(parts)


def with_selectolax(html: str) -> int:
    return len(extract_links(html, "http://example.com/", "PoliteBot").links)


def with_lxml(html: str) -> int:
    tree = lxml.html.fromstring(html)
    tree.xpath("//base/@href")
    for meta in tree.xpath("//meta[@name]"):
        meta.get("name"), meta.get("content")
    links = [(a.get("href"), a.get("rel")) for a in tree.xpath("//a[@href] | //area[@href]")]
    links += [(f.get("src"), None) for f in tree.xpath("//frame[@src] | //iframe[@src]")]
    return len(links)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str | None, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("a", "area", "frame", "iframe", "base", "meta"):
            fields = dict(attrs)
            self.links.append((fields.get("href") or fields.get("src"), fields.get("rel")))


def with_stdlib(html: str) -> int:
    parser = _Links()
    parser.feed(html)
    parser.close()
    return len(parser.links)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--pages", type=int, default=200)
    options.add_argument("--rounds", type=int, default=7)
    args = options.parse_args()
    rng = random.Random(2026)
    pages = [make_page(rng) for _ in range(args.pages)]
    size = sum(len(p) for p in pages) / len(pages)
    contenders: dict[str, Callable[[str], int]] = {
        "selectolax (lexbor)": with_selectolax, "lxml.html": with_lxml,
        "html.parser (stdlib)": with_stdlib}
    found = {name: sum(map(parse, pages)) for name, parse in contenders.items()}
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, parse in contenders.items():
            started = time.process_time()
            for html in pages:
                parse(html)
            times[name].append((time.process_time() - started) / len(pages))
    base = statistics.median(times["selectolax (lexbor)"])
    print(f"{args.pages} pages of {size / 1024:.0f} KB on average, {args.rounds} rounds\n")
    print("| parser | ms per page (median) | x selectolax | links found |")
    print("|---|---:|---:|---:|")
    for name in contenders:
        median = statistics.median(times[name])
        print(f"| {name} | {median * 1000:.2f} | {median / base:.2f} | {found[name]:,} |")


if __name__ == "__main__":
    main()

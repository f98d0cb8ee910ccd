"""A page built to make the HTML parser work for minutes (elements nested 100,000 deep: the
tree builder's work grows with the square of the depth) costs a crawl a bounded time, its
links are still found, and SIGTERM stops the crawl while such pages are being read."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from polite.crawl.html import MAX_DEPTH, extract_links
from tests.commands import command_line
from tests.sites import Reply, Site, serve

HTML = {"Content-Type": "text/html"}
DEEP = 100_000  # 100,000 nested <div>: over a minute of lexbor's time, unbounded


def nested(link: str, depth: int = DEEP) -> bytes:
    return (b"<html><body>" + b"<div>" * depth + f'<a href="{link}">x</a>'.encode()
            + b"</div>" * depth + b"</body></html>")


def crawl(out: Path, *urls: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command_line("crawl", *urls, "--out", str(out), "--allow-private",
                     "--default-delay-ms", "0", "--json"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_links_below_the_depth_cap_are_found_and_the_page_says_it_was_flattened() -> None:
    found = extract_links(nested("/deep", 10 * MAX_DEPTH).decode(), "http://a.test/", "Bot")
    assert [link.href for link in found.links] == ["/deep"]
    assert found.cut is not None and f"nesting of {MAX_DEPTH}" in found.cut
    # A large page as sloppy as real ones (paragraphs, list items and cells left open)
    # is no deeper than they are: parsed as it is, and nothing said.
    sloppy = "".join(f'<div><p><a href="/{i}">{i}</a></div><ul><li>x<li>y</ul>'
                     f"<table><tr><td>a<td>b<tr><td>c</table>" for i in range(6_000))
    plain = extract_links(sloppy, "http://a.test/", "Bot")
    assert plain.cut is None and len(plain.links) == 6_000


def test_a_deeply_nested_page_is_read_in_bounded_time(tmp_path: Path) -> None:
    site = Site("127.0.6.31")
    site.routes.update({"/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"),
                        "/": Reply(200, nested("/deep"), HTML),
                        "/deep": Reply(200, b"found", HTML)})
    with serve(site):
        started = time.monotonic()
        process = crawl(tmp_path, site.origin + "/")
        # Unbounded, the page alone took the parser well over a minute; bounded, a second or
        # two (a loaded machine included).
        try:
            _, err = process.communicate(timeout=40)
        finally:
            process.kill()
        took = time.monotonic() - started
    assert process.returncode == 0, err
    assert took < 40
    rows = {row["url"]: row for row in
            map(json.loads, (tmp_path / "pages.jsonl").read_text().splitlines())}
    home = rows[site.origin + "/"]
    assert home["followed"] == 1 and "read as text" in home["parse_cut"]
    assert rows[site.origin + "/deep"]["outcome"] == "fetched"  # the link under it all


def test_sigterm_stops_a_crawl_reading_deeply_nested_pages(tmp_path: Path) -> None:
    site = Site("127.0.6.32")
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    for i in range(20):
        site.routes["/" if i == 0 else f"/n{i}"] = Reply(200, nested(f"/n{i + 1}"), HTML)
    with serve(site):
        process = crawl(tmp_path, site.origin + "/")
        deadline = time.monotonic() + 30
        while "/" not in site.requests:
            assert time.monotonic() < deadline, "the crawl did not get going"
            time.sleep(0.01)
        time.sleep(0.3)  # the page is arriving or being parsed
        process.send_signal(signal.SIGTERM)
        try:
            out, err = process.communicate(timeout=20)  # unbounded: over a minute
        finally:
            process.kill()
    assert process.returncode == 130, err
    assert json.loads(out)["stopped"] is True and "Traceback" not in err
    assert len(site.requests) < 1 + 20  # stopped before the end

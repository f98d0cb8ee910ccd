"""A crawl killed with SIGKILL, or stopped with Ctrl-C, goes on where it stopped when started
again with the same folder: nothing lost, nothing fetched twice but what was in flight."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.commands import command_line
from tests.sites import Reply, Site, serve

PAGES = 40


def linked_site(host: str) -> Site:
    site = Site(host)
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nCrawl-delay: 0.05\n")
    site.routes["/"] = Reply(200, b'<a href="/p0">start</a>', {"Content-Type": "text/html"})
    for i in range(PAGES):
        links = f'<a href="/p{i + 1}">next</a><a href="/">home</a>' if i + 1 < PAGES else ""
        site.routes[f"/p{i}"] = Reply(200, links.encode(), {"Content-Type": "text/html"})
    return site


def start(out: Path, *urls: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "polite", "crawl", *urls, "--out", str(out), "--allow-private",
         "--default-delay-s", "0", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def wait_for_pages(site: Site, count: int, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while len(site.arrivals) < count:
        assert time.monotonic() < end, "the crawl did not get going"
        time.sleep(0.02)


def pages(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]


def test_sigkill_then_resume_loses_nothing_and_repeats_only_what_was_in_flight(
        tmp_path: Path) -> None:
    site = linked_site("127.0.5.1")
    with serve(site):
        first = start(tmp_path, site.origin + "/")
        wait_for_pages(site, 15)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=10)
        at_kill = len(site.arrivals)
        second = start(tmp_path)  # no seeds: the folder has them
        out, err = second.communicate(timeout=60)
        assert second.returncode == 0, err
    paths = [path for _, path in site.arrivals if path != "/robots.txt"]
    expected = {"/", *(f"/p{i}" for i in range(PAGES))}
    assert set(paths) == expected  # every page, after the kill too
    repeated = [p for p in expected if paths.count(p) > 1]
    assert len(repeated) <= 1, repeated  # one host, one request in flight at most
    assert at_kill < len(site.arrivals)
    decided = [row["url"] for row in pages(tmp_path)]
    assert {url.removeprefix(site.origin) for url in decided} == expected  # type: ignore[union-attr]
    summary = json.loads(out)
    assert summary["frontier"]["queued"] == 0 and summary["frontier"]["fetched"] == PAGES + 1


def test_ctrl_c_stops_cleanly_and_the_same_command_goes_on(tmp_path: Path) -> None:
    site = linked_site("127.0.5.2")
    with serve(site):
        first = start(tmp_path, site.origin + "/")
        wait_for_pages(site, 10)
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=30)
        assert first.returncode == 130, err  # stopped, not finished: a script can tell
        assert json.loads(out)["stopped"] is True
        assert "Traceback" not in err
        second = start(tmp_path, site.origin + "/")
        out, err = second.communicate(timeout=60)
        assert second.returncode == 0, err
    paths = [path for _, path in site.arrivals if path != "/robots.txt"]
    assert sorted(paths) == sorted({"/", *(f"/p{i}" for i in range(PAGES))})  # none twice


def test_output_to_a_reader_gone_away_ends_quietly(tmp_path: Path) -> None:
    # `polite crawl ... | head -0`: the reader closed before the summary was written.
    site = linked_site("127.0.5.4")
    read, write = os.pipe()
    with serve(site):
        process = subprocess.Popen(
            command_line("crawl", site.origin + "/", "--out", str(tmp_path),
                         "--allow-private", "--default-delay-s", "0", "--max-pages", "3"),
            stdout=write, stderr=subprocess.PIPE, text=True)
        os.close(write)
        os.close(read)
        _, err = process.communicate(timeout=60)
    assert len([p for _, p in site.arrivals if p != "/robots.txt"]) == 3  # it did crawl
    assert err == ""  # no "polite: Broken pipe", no traceback
    assert process.returncode == 141  # 128 + SIGPIPE, as a shell reports such a tool


def test_a_private_seed_needs_allow_private(tmp_path: Path) -> None:
    done = subprocess.run(
        command_line("crawl", "http://127.0.5.3:9/", "--out",
                     str(tmp_path)), capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "--allow-private" in done.stderr and "Traceback" not in done.stderr

"""What one run of ``polite crawl`` says and does when it has little or nothing to do: a seed
whose site cannot be reached, a folder with no crawl in it, a budget a run has spent, an
agent no site should receive."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from polite.crawl import CrawlSettings
from polite.errors import SettingError
from tests.commands import command_line, run
from tests.docs import examples
from tests.docs.docsite import ROOT
from tests.sites import Reply, Site, serve

# Addresses no other test uses; nothing listens on REFUSED's port 9.
SITE = "127.0.134.1"
AGENT_SITE = "127.0.134.2"
SHARED_SITE = "127.0.134.3"
REFUSED = "http://127.0.134.9:9/"


def crawl(*args: str) -> subprocess.CompletedProcess[str]:
    return run("crawl", *args, "--allow-private", "--default-delay-s", "0")


def one_try(tmp_path: Path) -> tuple[str, str]:
    """A config file that gives a site up after one robots.txt failure (the default three
    wait 60 s and 120 s between them)."""
    config = tmp_path / "one-try.toml"
    config.write_text("robots_attempts = 1\n")
    return "--config", str(config)


def small_site(host: str, pages: int) -> Site:
    site = Site(host)
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(pages - 1)).encode()
    site.routes["/"] = Reply(200, links, {"Content-Type": "text/html"})
    for i in range(pages - 1):
        site.routes[f"/p{i}"] = Reply(200, b"<p>a page</p>", {"Content-Type": "text/html"})
    return site


# -- a seed that cannot be crawled ---------------------------------------------------------


def test_a_crawl_whose_only_seed_is_unreachable_says_so_and_fails(tmp_path: Path) -> None:
    result = crawl(REFUSED, "--out", str(tmp_path / "b"), *one_try(tmp_path))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "no seed could be crawled: 127.0.134.9: robots.txt unreachable: " \
        "ConnectionRefusedError" in result.stderr
    assert "0 pages fetched" in result.stdout


def test_a_seed_whose_name_does_not_resolve_fails_the_crawl(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# names the test knows: none\n")  # nosuchhost.invalid resolves nowhere
    result = crawl("http://nosuchhost.invalid/", "--out", str(tmp_path / "b"),
                   "--hosts", str(hosts), *one_try(tmp_path), "--json")
    assert result.returncode == 1, result.stderr
    assert "no seed could be crawled: nosuchhost.invalid:" in result.stderr
    assert json.loads(result.stdout)["fetched"] == 0


def test_a_seed_that_cannot_be_crawled_beside_one_that_can_is_no_failure(
        tmp_path: Path) -> None:
    site = small_site(SITE, 2)
    with serve(site):
        result = crawl(site.origin + "/", REFUSED, "--out", str(tmp_path / "b"),
                       *one_try(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["fetched"] == 2


def test_a_worker_of_a_shared_crawl_that_only_met_a_late_page_is_no_failure(
        tmp_path: Path) -> None:
    """Workers of a shared crawl split its URLs: one whose every request failed (a page
    answered too late) while another fetched the site's pages says so, and is no failure
    (it once said that no seed could be crawled, and exited 1)."""
    site = small_site(SHARED_SITE, 2)
    site.routes["/late"] = Reply(200, b"late", {"Content-Type": "text/html"}, delay_s=5)
    store = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    with serve(site):
        first = crawl(site.origin + "/", "--out", str(tmp_path / "w1"), "--store", store,
                      "--worker", "w1", "--json")
        assert first.returncode == 0, first.stderr
        late = crawl(site.origin + "/late", "--out", str(tmp_path / "w2"), "--store", store,
                     "--worker", "w2", "--read-timeout-s", "1", "--json")
    assert late.returncode == 0, late.stderr
    assert "no seed could be crawled" not in late.stderr
    summary = json.loads(late.stdout)
    assert (summary["fetched"], summary["failed"], summary["frontier"]["fetched"]) == (0, 1, 2)


def read_until(fd: int, wanted: bytes, deadline_s: float = 60.0) -> bytes:
    """What a terminal shows until ``wanted`` appears (the escapes of the display kept)."""
    seen = b""
    end = time.monotonic() + deadline_s
    while wanted not in seen.replace(b"\r", b"").replace(b"\n", b""):
        left = end - time.monotonic()
        assert left > 0, f"never shown: {wanted!r}; shown: {seen[-2000:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 65_536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_on_a_terminal_a_crawl_says_what_it_waits_for(tmp_path: Path) -> None:
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
    process = subprocess.Popen(
        command_line("crawl", REFUSED, "--out", str(tmp_path / "b"), "--allow-private"),
        stdout=subprocess.PIPE, stderr=secondary, text=True,
        env={**os.environ, "COLUMNS": "250"})
    os.close(secondary)
    try:
        # robots.txt is asked again, later (60 s later: the test stops it before)
        shown = read_until(primary, b"ConnectionRefusedError")
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(primary)
    text = shown.decode(errors="replace")
    assert "waiting  127.0.134.9, " in text
    assert " s: robots.txt, try 2 of 3: robots.txt unreachable: ConnectionRefusedError" in text
    assert process.returncode == 130


# -- no URL and no crawl ----------------------------------------------------------------------


def test_no_url_and_no_crawl_in_the_folder_is_an_error(tmp_path: Path) -> None:
    result = crawl("--out", str(tmp_path / "emptyout"))
    assert result.returncode == 2
    assert f"no URL given and no crawl in {tmp_path / 'emptyout'} to go on with" \
        in result.stderr
    assert not (tmp_path / "emptyout").exists()  # nothing made


def test_no_url_and_no_crawl_in_the_store_file_is_an_error(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'none.sqlite'}"
    result = crawl("--out", str(tmp_path / "out"), "--store", store)
    assert result.returncode == 2
    assert f"no URL given and no crawl in {store} to go on with" in result.stderr


# -- the page budget is the run's -------------------------------------------------------------


def test_max_pages_is_each_runs_budget_and_a_run_with_nothing_left_says_why(
        tmp_path: Path) -> None:
    site = small_site(SITE, 5)
    out = str(tmp_path / "c2")
    with serve(site):
        first = crawl(site.origin + "/", "--out", out, "--max-pages", "2", "--json")
        second = crawl("--out", out, "--max-pages", "2", "--json")
        third = crawl("--out", out, "--max-pages", "2", "--json")
        fourth = crawl("--out", out, "--max-pages", "2")
    fetched = [json.loads(r.stdout)["fetched"] for r in (first, second, third)]
    assert fetched == [2, 2, 1], [r.stderr for r in (first, second, third)]
    assert fourth.returncode == 0, fourth.stderr
    assert "0 pages fetched" in fourth.stdout
    assert "nothing left to fetch: every URL of the crawl in" in fourth.stderr
    assert "(5 fetched)" in fourth.stderr
    pages = [path for _, path in site.arrivals if path != "/robots.txt"]
    assert sorted(pages) == sorted({"/", "/p0", "/p1", "/p2", "/p3"})  # each once


def test_the_help_says_max_pages_counts_per_run() -> None:
    result = run("crawl", "run", "--help")
    assert "this run" in " ".join(result.stdout.split()).split("--max-pages MAX_PAGES ")[-1][:120]


# -- an agent no site should receive ----------------------------------------------------------


@pytest.mark.parametrize("agent", ["", "   ", "My\nBot", "Bot\r\nX-Evil: 1", "Bot\x00",
                                   "Bot\x7f", "Bot\tX"])
def test_an_empty_or_control_character_agent_is_refused(agent: str) -> None:
    with pytest.raises(SettingError, match=r"^agent="):
        CrawlSettings(agent=agent)
    with pytest.raises(SettingError, match=r"^user_agent="):
        CrawlSettings(user_agent=agent)


@pytest.mark.parametrize("agent", ["", " ", "a\x01b"])
def test_the_command_line_refuses_such_an_agent_before_any_request(
        tmp_path: Path, agent: str) -> None:
    site = small_site(AGENT_SITE, 1)
    with serve(site):
        result = crawl(site.origin + "/", "--out", str(tmp_path / "a"), "--agent", agent)
        header = crawl(site.origin + "/", "--out", str(tmp_path / "u"), "--user-agent",
                       agent)
    for refused, flag in ((result, "--agent"), (header, "--user-agent")):
        assert refused.returncode == 2
        assert f"argument {flag}" in refused.stderr and ": must not" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert site.requests == []


def test_a_plain_agent_is_taken() -> None:
    assert CrawlSettings(agent="MyBot", user_agent="MyBot/1.0 (+https://e.com/bot)").agent \
        == "MyBot"


def test_the_tutorials_python_example_runs_twice(tmp_path: Path) -> None:
    """docs/tutorials/crawler.md's crawl from Python, run again as a reader would: the
    second run goes on with the crawl (max_pages is each run's), and still passes."""
    markdown = (ROOT / "docs" / "tutorials" / "crawler.md").read_text(encoding="utf-8")
    with examples.sites(markdown) as moved, contextlib.chdir(tmp_path):
        (block,) = [b for b in examples.blocks(examples.moved_text(markdown, moved))
                    if b.language == "python" and "open_crawler" in b.text]
        fetched = []
        for _ in range(2):
            namespace: dict[str, object] = {"__name__": "__docs__"}
            exec(compile(block.text, f"crawler.md:{block.line}", "exec"), namespace)
            fetched.append(namespace["titles"])
    assert len(fetched[0]) == 2 and len(fetched[1]) == 2
    assert not set(fetched[0]) & set(fetched[1])  # the second run's pages are new ones

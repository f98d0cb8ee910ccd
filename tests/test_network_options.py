"""Every command that fetches from sites resolves names and times out the same way:
``--hosts FILE``, ``--nameserver IP[:PORT]``, ``--connect-timeout-s``, ``--read-timeout-s``.
Each site here has a name only the hosts file (or the test's nameserver) knows."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.commands import run
from tests.sites import Reply, Site, serve, tcp_origin
from tests.test_survey_resume import dns_server

NAME = "site.test"  # no resolver but the test's knows it
ADDRESS = "127.0.87.1"


def routes(port_holder: list[int]) -> dict[str, Reply | object]:
    def robots() -> Reply:
        return Reply(200, (f"User-agent: *\nDisallow: /private\n"
                           f"Sitemap: http://{NAME}:{port_holder[0]}/sitemap.xml\n").encode(),
                     {"Content-Type": "text/plain"})

    def sitemap() -> Reply:
        base = f"http://{NAME}:{port_holder[0]}"
        return Reply(200, ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/'
                           f'schemas/sitemap/0.9"><url><loc>{base}/a</loc></url>'
                           f'<url><loc>{base}/b</loc></url></urlset>').encode(),
                     {"Content-Type": "application/xml"})

    page = Reply(200, b"<html><body>a page</body></html>", {"Content-Type": "text/html"})
    return {"/robots.txt": robots, "/sitemap.xml": sitemap, "/a": page, "/b": page}


@contextmanager
def named_site(tmp_path: Path, address: str = ADDRESS) -> Iterator[tuple[Site, Path]]:
    """The site, and a hosts file that names it (the only place its name resolves)."""
    port: list[int] = [0]
    site = Site(address, routes(port))  # type: ignore[arg-type]
    with serve(site):
        port[0] = site.port
        hosts = tmp_path / "hosts"
        hosts.write_text(f"# the test's names\n{address} {NAME}\n")
        yield site, hosts


def url(site: Site, path: str = "") -> str:
    return f"http://{NAME}:{site.port}{path}"


def ok(result: object, *codes: int) -> None:
    assert result.returncode in (codes or (0,)), result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in result.stderr  # type: ignore[attr-defined]


def test_robots_check_reaches_a_site_named_in_the_hosts_file(tmp_path: Path) -> None:
    with named_site(tmp_path) as (site, hosts):
        unknown = run("robots", "check", url(site), "/private", "--agent", "bot",
                      "--allow-private")
        result = run("robots", "check", url(site), "/private", "/a", "--agent", "bot",
                     "--allow-private", "--hosts", str(hosts))
    # without the hosts file the name resolves nowhere (all disallowed until it answers)
    assert unknown.returncode == 1 and "site.test does not resolve" in unknown.stdout
    assert "Traceback" not in unknown.stderr
    ok(result, 1)  # /private is disallowed
    lines = result.stdout.splitlines()
    assert lines[0] == f"{url(site)}/robots.txt: 200, dialect rfc9309"
    assert lines[1].startswith(f"disallowed {url(site)}/private") and "line 2" in lines[1]
    assert lines[2].split() == ["allowed", f"{url(site)}/a", "(no", "rule", "matches)"]
    assert site.requests == ["/robots.txt"]


def test_robots_explain_lint_and_diff_reach_a_site_named_in_the_hosts_file(
        tmp_path: Path) -> None:
    before = tmp_path / "before.txt"
    before.write_text("User-agent: *\nDisallow: /\n")
    with named_site(tmp_path) as (site, hosts):
        net = ("--allow-private", "--hosts", str(hosts))
        explain = run("robots", "explain", url(site), "/private", "-a", "bot", "--json", *net)
        lint = run("robots", "lint", url(site), "--json", *net)
        diff = run("robots", "diff", str(before), url(site), "-a", "bot", "--json", *net)
    ok(explain, 0, 1)
    assert json.loads(explain.stdout)  # the site's file, explained
    assert "Disallow: /private" in explain.stdout
    ok(lint, 0, 1)
    assert isinstance(json.loads(lint.stdout), list)
    ok(diff, 0, 1)
    assert json.loads(diff.stdout)
    assert "/robots.txt" in diff.stdout or diff.stdout.strip() not in ("", "[]", "{}")
    assert site.requests == ["/robots.txt"] * 3


def test_sitemap_parse_and_tree_reach_a_site_named_in_the_hosts_file(tmp_path: Path) -> None:
    with named_site(tmp_path) as (site, hosts):
        net = ("--allow-private", "--hosts", str(hosts), "--default-delay-s", "0")
        parsed = run("sitemap", "parse", url(site, "/sitemap.xml"), "--json", *net)
        tree = run("sitemap", "tree", url(site), "--urls", *net)
    ok(parsed)
    locations = [json.loads(line)["loc"] for line in parsed.stdout.splitlines()]
    assert locations == [url(site, "/a"), url(site, "/b")]
    ok(tree)
    assert url(site, "/a") in tree.stdout and url(site, "/b") in tree.stdout
    assert site.requests.count("/sitemap.xml") == 2


def test_ulinks_reach_a_site_named_in_the_hosts_file(tmp_path: Path) -> None:
    with named_site(tmp_path) as (site, hosts):
        result = run("ulinks", url(site), "--allow-private", "--hosts", str(hosts),
                     "--default-delay-s", "0", "-k", "2")
    ok(result)
    assert url(site, "/a") in result.stdout or url(site, "/b") in result.stdout
    assert "/sitemap.xml" in site.requests


def crawl_pages(out: Path) -> set[str]:
    with (out / "pages.jsonl").open() as lines:
        return {record["url"] for record in map(json.loads, lines)
                if record.get("status") == 200}


def test_crawl_reaches_a_site_named_in_the_hosts_file(tmp_path: Path) -> None:
    with named_site(tmp_path) as (site, hosts):
        result = run("crawl", url(site, "/a"), "--out", str(tmp_path / "c"), "--json",
                     "--allow-private", "--hosts", str(hosts), "--default-delay-s", "0",
                     "--no-warc")
    ok(result)
    assert json.loads(result.stdout)["fetched"] == 2
    assert {url(site, "/a"), url(site, "/b")} <= crawl_pages(tmp_path / "c")
    assert {"/robots.txt", "/sitemap.xml", "/a", "/b"} <= set(site.requests)


def test_crawl_asks_the_nameserver_given(tmp_path: Path) -> None:
    with named_site(tmp_path, "127.0.87.2") as (site, _), \
            dns_server("127.0.87.53", 5353, {NAME: "127.0.87.2"}) as asked:
        result = run("crawl", url(site, "/a"), "--out", str(tmp_path / "c"), "--json",
                     "--allow-private", "--nameserver", "127.0.87.53:5353",
                     "--default-delay-s", "0", "--no-warc")
    ok(result)
    assert json.loads(result.stdout)["fetched"] == 2
    assert {url(site, "/a"), url(site, "/b")} <= crawl_pages(tmp_path / "c")
    assert NAME in asked


def test_hosts_and_nameserver_together_are_refused(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{ADDRESS} {NAME}\n")
    result = run("sitemap", "tree", f"http://{NAME}/", "--allow-private", "--hosts",
                 str(hosts), "--nameserver", "127.0.87.53")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--hosts or --nameserver" in result.stderr


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_cannot_work_is_refused_by_name(value: str) -> None:
    result = run("robots", "lint", "http://site.test/", "--read-timeout-s", value)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (f"argument --read-timeout-s: must be a finite number above 0, at most 86,400 "
            f"(seconds), not {value!r}") in result.stderr


def silent(conn: socket.socket, stop: threading.Event) -> None:
    """Accepts, reads the request and never answers."""
    with conn:
        conn.settimeout(0.2)
        while not stop.is_set():
            try:
                if conn.recv(4096) == b"":
                    return
            except TimeoutError:
                continue
            except OSError:
                return


def test_robots_check_gives_up_on_a_silent_site_after_the_read_timeout(
        tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.87.9 {NAME}\n")
    held: list[float] = []

    def silent_timed(conn: socket.socket, stop: threading.Event) -> None:
        opened = time.monotonic()
        silent(conn, stop)
        held.append(time.monotonic() - opened)  # until the client gave up and closed

    with tcp_origin("127.0.87.9", silent_timed) as port:
        result = run("robots", "check", f"http://{NAME}:{port}/", "/a", "--agent", "bot",
                     "--allow-private", "--hosts", str(hosts), "--read-timeout-s", "1")
        deadline = time.monotonic() + 10
        while not held and time.monotonic() < deadline:  # the handler's thread notes it
            time.sleep(0.02)
    # robots.txt unreadable: everything disallowed until it answers, said with the reason
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout.startswith(f"disallowed http://{NAME}:{port}/a")
    assert "robots.txt unreachable: timed out" in result.stdout
    # robots.txt's own wait for a byte is 10 s, its deadline 20 s: a connection the client
    # gave up well before either, at the site, is the option at work
    assert held and max(held) < 6, held


def test_serve_proxies_to_a_site_named_in_the_hosts_file(tmp_path: Path) -> None:
    """The proxy's robots.txt fetch and its origin connection both resolve through the
    hosts file."""
    from tests.serving import polite_serve, through

    with named_site(tmp_path) as (site, hosts), \
            polite_serve("--store", "memory://", "--allow-private", "--hosts", str(hosts),
                         "--default-delay-s", "0", "--no-cache") as api, \
            through(api) as client:
        page = client.get(url(site, "/a"))
        refused = client.get(url(site, "/private"))
    assert page.status_code == 200 and page.text == "<html><body>a page</body></html>"
    assert refused.status_code == 403  # robots.txt, read from the site the file names
    assert site.requests == ["/robots.txt", "/a"]


def test_site_ranges_update_reaches_a_url_named_in_the_hosts_file(tmp_path: Path) -> None:
    from tests.identity.test_ranges import BING, _bytes

    crawlers = tmp_path / "crawlers.json"
    crawlers.write_text(json.dumps({"crawlers": [{"name": "ExampleBot", "tokens": [
        "ExampleBot"], "ranges_urls": [f"http://{NAME}/examplebot.json"]}]}))
    site = Site(ADDRESS, {"/examplebot.json": Reply(200, _bytes(BING))})
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{ADDRESS} {NAME}\n")
    with serve(site):
        result = run("site", "ranges", "update", "--db", str(tmp_path / "site.sqlite"),
                     "--crawlers", str(crawlers), f"ExampleBot={url(site, '/examplebot.json')}",
                     "--allow-private", "--hosts", str(hosts))
    ok(result)
    assert "ExampleBot: 1 prefixes" in result.stdout
    assert site.requests == ["/examplebot.json"]

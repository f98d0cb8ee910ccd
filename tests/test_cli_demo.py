"""``polite demo regp-site``, run as a user runs it: a real process serving on loopback."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from contextlib import ExitStack

import httpx

from tests.commands import run


def _interrupted(process: subprocess.Popen[str]) -> tuple[str, str]:
    """What ``process`` printed once Ctrl-C (SIGINT) ended it. It is given a minute, as a
    loaded machine may need (10 s was seen to pass); past that it is killed and its pipes
    closed, rather than left running with them open for a later test to find."""
    process.send_signal(signal.SIGINT)
    try:
        return process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise


def test_regp_site_serves_the_seed_site_and_prints_each_request() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "polite", "demo", "regp-site", "--host", "127.0.9.20",
         "--port", "0", "--news", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"on (http://127\.0\.9\.20:\d+)/ \(4 news items\), robots.txt: regp",
                          first)
        assert found, first + (process.stderr.read() if process.poll() is not None else "")
        origin = found.group(1)
        with httpx.Client(trust_env=False) as client:
            robots = client.get(origin + "/robots.txt").text
            assert "Request-rate: 120/m\n{\n  Allow: /newsitem.do?\n  Crawl-delay: 5\n}" in robots
            assert f"Sitemap: {origin}/sitemap.xml\n" in robots
            sitemap = client.get(origin + "/sitemap.xml").text
            assert (f"<loc>{origin}/html/news4.html</loc>\n"
                    f"<srcloc>{origin}/newsItem.do?id=4</srcloc>") in sitemap
            # The page loads its comments by Ajax; the snapshot has them inline.
            page = client.get(origin + "/newsItem.do?id=4").text
            assert 'fetch("/comments.do?id=4")' in page and "A first comment" not in page
            assert "A first comment on news 4." in client.get(origin + "/html/news4.html").text
            assert client.get(origin + "/comments.do?id=4").json()[0]["author"] == "reader4a"
            home = client.get(origin + "/").text
            for link in ("/login.do", "/reg.do", "/news.do", "/newsRelease.do",
                         "/newsItem.do?id=4", "/newsItem.do?id=2"):
                assert f'href="{link}"' in home
            assert 'href="/newsItem.do?id=1"' not in home  # only the three latest
    finally:
        out, err = _interrupted(process)
    assert process.returncode == 0, err
    assert re.search(r"^\s+0\.000 s\s+200 /robots.txt$", out, re.MULTILINE), out
    assert re.search(r"\+\d+\.\d{3} 200 /html/news4.html$", out, re.MULTILINE), out


def test_regp_site_refuses_what_it_cannot_serve() -> None:
    result = run("demo", "regp-site", "--port", "0", "--robots", "rep", "--language", "fr")
    assert result.returncode == 2
    assert "needs the REGP robots.txt" in result.stderr
    result = run("demo", "regp-site", "--port", "0", "--visit-time", "at nine")
    assert result.returncode == 2
    assert "cannot read Visit-time value 'at nine'" in result.stderr
    assert "Traceback" not in result.stderr


def test_regp_site_keeps_a_burst_of_connections_waiting_for_its_thread() -> None:
    """A crawler opening many connections at once while the site's thread is busy (here:
    not serving yet) has each handshake kept in the listening queue and answered once the
    thread takes it: with the standard library's backlog of 5, the seventh was dropped and
    connected only when tried again, a second later."""
    from polite.demo.regp_site import RegpSite

    with RegpSite(host="127.0.9.21") as site, ExitStack() as stack:
        address = site.origin.removeprefix("http://").split(":")
        conns = [stack.enter_context(socket.create_connection(
            (address[0], int(address[1])), timeout=0.5)) for _ in range(40)]
        site.start()
        for conn in conns:
            conn.settimeout(30)
            conn.sendall(b"GET /robots.txt HTTP/1.1\r\nHost: site\r\nConnection: close\r\n\r\n")
        assert all(conn.recv(12) == b"HTTP/1.1 200" for conn in conns)


def _first_success() -> list[tuple[str, list[str]]]:
    """The README's first success: each command with the lines it prints."""
    from tests.serving import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("A first success")
    block = readme[readme.index("```console\n", start) + 11:]
    block = block[:block.index("```")]
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def test_the_readmes_first_success_runs_on_the_demo_site_alone() -> None:
    """The README's commands as written, but for the ports (free ones, as others may be
    taken here) and the service's state (in memory, not ./polite.sqlite)."""
    import json
    import shlex
    import shutil

    from tests.serving import free_port, polite_serve_process

    steps = _first_success()
    assert [command.split()[:3] for command, _ in steps[:2]] == [
        ["make", "serve", "ARGS=--allow-private"], [".venv/bin/polite", "demo"]]
    if shutil.which("curl") is None:
        import pytest

        pytest.skip("the README's first success asks the service with curl")
    options = shlex.split(steps[0][0].split("ARGS=", 1)[1])
    site_port = free_port()
    demo = subprocess.Popen([sys.executable, "-m", "polite", "demo", "--port", str(site_port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with polite_serve_process(*options, "--store", "memory://", make=True) as (api, _):
            assert demo.stdout is not None
            printed = [demo.stdout.readline()]
            while printed[-1] and not printed[-1].startswith("  curl "):  # the last it says
                printed.append(demo.stdout.readline())
            origin = f"127.0.0.1:{site_port}"
            assert printed[0].startswith(f"polite demo: a small news site on http://{origin}/")

            def here(text: str) -> str:
                return (text.replace("127.0.0.1:8089", origin)
                        .replace("localhost:8080", f"localhost:{api.base_url.port}"))

            for command, expected in steps[2:]:
                words = shlex.split(here(command))
                # what polite demo says to try is what the README runs
                said = [here(line) for line in printed]
                assert f"  {here(command).replace('.venv/bin/', '')}\n" in said, command
                if words[0] == ".venv/bin/polite":
                    words = [sys.executable, "-m", "polite", *words[1:]]
                result = subprocess.run(words, capture_output=True, text=True, timeout=60,
                                        check=False)
                assert result.stderr == "", result.stderr
                if words[0] == "curl":
                    assert json.loads(result.stdout) == json.loads(here("\n".join(expected)))
                else:
                    assert result.stdout.splitlines() == [here(line) for line in expected]
    finally:
        _interrupted(demo)
    assert demo.returncode == 0

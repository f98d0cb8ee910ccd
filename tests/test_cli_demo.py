"""``polite demo regp-site``, run as a user runs it: a real process serving on loopback."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import httpx

from tests.test_cli import run


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
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=10)
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

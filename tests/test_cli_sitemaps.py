"""``polite sitemap parse`` and ``polite sitemap tree``, and ``GET /sitemaps`` on a real
``polite serve``: run as users run them, against real servers on loopback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.commands import run
from tests.serving import polite_serve
from tests.sites import Reply, Site, serve

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def _site(site: Site) -> None:
    o = site.origin
    pages = (f"<urlset {NS}><url><loc>{o}/a</loc><lastmod>2024-01-02</lastmod></url>"
             f"<url><loc>{o}/b</loc><lastmod>bad</lastmod></url></urlset>").encode()
    site.routes.update({
        "/robots.txt": Reply(200, f"User-agent: *\nCrawl-delay: 0.05\nSitemap: <{o}/i.xml>\n"
                             .encode()),
        "/i.xml": Reply(200, (f"<sitemapindex {NS}><sitemap><loc>{o}/p.xml.gz</loc></sitemap>"
                              f"<sitemap><loc>{o}/gone.xml</loc></sitemap></sitemapindex>")
                        .encode()),
        "/p.xml.gz": Reply(200, gzip.compress(pages)),
    })


def test_parse_a_file_as_json_lines(tmp_path: Path) -> None:
    sitemap = tmp_path / "s.xml.gz"
    sitemap.write_bytes(gzip.compress(
        f"<urlset {NS}><url><loc>https://e.com/a</loc><priority>0.5</priority></url>"
        "<url><loc>/rel</loc></url></urlset>".encode()))
    result = run("sitemap", "parse", str(sitemap), "--json", "--url", "https://e.com/s.xml")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows == [{"loc": "https://e.com/a", "kind": "url", "line": 1, "priority": 0.5},
                    {"loc": "https://e.com/rel", "kind": "url", "line": 1}]
    assert "relative <loc> '/rel'" in result.stderr


def test_parse_says_a_repeated_problem_once(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.bin"
    bomb.write_bytes(gzip.compress(b"This is a compression bomb.\n" * 400_000))
    result = run("sitemap", "parse", str(bomb))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{bomb}:1: error: 'This is a compression bomb.' is not an absolute http(s) URL; line "
        "skipped (100 times: lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...) [not-a-url]",
        f"{bomb}:100: error: no URL in the first 100 lines: this is not a sitemap "
        "[not-a-sitemap]",
    ]


def test_parse_reports_a_broken_file_with_its_line(tmp_path: Path) -> None:
    sitemap = tmp_path / "s.xml"
    sitemap.write_text(f"<urlset {NS}>\n<url><loc>https://e.com/a</loc></url>\n<url><loc>x\n")
    result = run("sitemap", "parse", str(sitemap))
    assert result.returncode == 1
    assert result.stdout == "url\thttps://e.com/a\n"
    assert f"{sitemap}:4: error: the XML breaks at line 4" in result.stderr


def test_parse_a_url_reads_robots_first() -> None:
    with serve(Site("127.0.0.31")) as site:
        _site(site)
        result = run("sitemap", "parse", f"{site.origin}/p.xml.gz", "--allow-private")
        assert site.requests == ["/robots.txt", "/p.xml.gz"]
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"url\t{site.origin}/a", f"url\t{site.origin}/b"]
    assert "'bad' is not a W3C datetime" in result.stderr


def test_tree_walks_and_sums_up() -> None:
    with serve(Site("127.0.0.32")) as site:
        _site(site)
        as_json = run("sitemap", "tree", site.origin, "--json", "--allow-private")
        as_text = run("sitemap", "tree", site.origin, "--allow-private", "--urls")
    assert as_json.returncode == 1, as_json.stderr  # /gone.xml is an error
    report = json.loads(as_json.stdout)
    assert report["summary"] == {"site": site.origin, "robots": "robots.txt: 200",
                                 "robotsSitemaps": 1, "files": 2,
                                 "indexes": 1, "urls": 2, "duplicates": 0, "errors": 1,
                                 "skipped": 0, "levels": {"1": 1}}
    files = {f["url"]: f for f in report["files"]}
    assert files[f"{site.origin}/p.xml.gz"]["compressed"] is True
    assert files[f"{site.origin}/gone.xml"]["error"] == "HTTP 404"
    # With --urls, standard output is the URLs alone; the tables went to standard error.
    assert as_text.stdout == f"{site.origin}/a\n{site.origin}/b\n"
    assert "indirection level" in as_text.stderr and "HTTP 404" in as_text.stderr


def test_tree_of_a_private_site_is_refused_without_the_option() -> None:
    with serve(Site("127.0.0.33")) as site:
        _site(site)
        result = run("sitemap", "tree", site.origin, "--json")
        assert site.requests == []
    assert result.returncode == 2 and result.stdout == ""
    assert "private or loopback" in result.stderr and "--allow-private" in result.stderr


def test_rest_sitemaps_on_polite_serve(tmp_path: Path) -> None:
    with serve(Site("127.0.0.34")) as site:
        _site(site)
        with polite_serve("--store", f"sqlite:///{tmp_path / 'p.sqlite'}",
                          "--allow-private") as api:
            answer = api.get("/sitemaps", params={"site": site.origin, "limit": "1"})
            missing = api.get("/sitemaps")
            bad = api.get("/sitemaps", params={"site": "ftp://x"})
            shallow = api.get("/sitemaps", params={"site": site.origin, "maxDepth": "0"})
            too_many = api.get("/sitemaps", params={"site": site.origin, "maxFiles": "5000"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["summary"]["urls"] == 2 and body["urls"] == [f"{site.origin}/a"]
    assert [f["level"] for f in body["files"]] == [0, 1, 1]
    assert missing.status_code == 400 and "site" in missing.json()["error"]
    assert bad.status_code == 400 and too_many.status_code == 400
    assert [f["error"] for f in shallow.json()["files"]][1:] == ["deeper than 0 index levels"] * 2


def test_parse_refuses_a_binary_file_in_one_line(tmp_path: Path) -> None:
    """A binary file is no sitemap (exit 1, one line), as an HTML page is; so is a text
    file with no URL at all."""
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    result = run("sitemap", "parse", str(binary))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{binary}:2: error: not a sitemap: a binary file (the control byte \\x1a) "
        "[not-a-sitemap]"]
    words = tmp_path / "notes.txt"
    words.write_text("hello\nworld\n")
    result = run("sitemap", "parse", str(words))
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        f"{words}:2: error: no URL in its 2 lines: this is not a sitemap [not-a-sitemap]")


def test_parse_reports_a_field_inside_another_extensions_element(tmp_path: Path) -> None:
    sitemap = tmp_path / "s.xml"
    sitemap.write_text(
        f'<urlset {NS} xmlns:video="http://www.google.com/schemas/sitemap-video/1.1" '
        'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">\n'
        "<url><loc>https://e.com/a</loc><video:video><image:loc>https://e.com/i</image:loc>"
        "</video:video></url>\n<url><loc>https://e.com/b</loc></url></urlset>\n")
    result = run("sitemap", "parse", str(sitemap))
    assert "Traceback" not in result.stderr
    assert result.stdout == "url\thttps://e.com/a\nurl\thttps://e.com/b\n"
    assert (f"{sitemap}:2: error: <image:loc> outside any <image:image>; left out "
            "[bad-extension]") in result.stderr

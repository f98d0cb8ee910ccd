"""``polite ulinks`` run as a user runs it: a sitemap file, and a site on loopback."""

from __future__ import annotations

import json
from pathlib import Path

from tests.commands import run
from tests.sites import Reply, Site, serve

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(locs: list[str], extra: str = "") -> bytes:
    body = "".join(f"<url><loc>{loc}</loc>{extra}</url>" for loc in locs)
    return f'<?xml version="1.0"?><urlset {NS}>{body}</urlset>'.encode()


def portal(origin: str) -> list[str]:
    locs = []
    for part, sections in (("books", ("fiction", "biography")), ("music", ("rock", "jazz"))):
        for section in sections:
            locs += [f"{origin}/{part}/{section}/{n}.html" for n in range(10)]
    return locs


def test_ulinks_of_a_sitemap_file(tmp_path: Path) -> None:
    sitemap = tmp_path / "sitemap.xml"
    sitemap.write_bytes(urlset(portal("http://www.big-portal.com")))
    result = run("ulinks", str(sitemap), "-k", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ("http://www.big-portal.com/books/\t20\n"
                             "http://www.big-portal.com/music/\t20\n")
    as_json = run("ulinks", str(sitemap), "-k", "1", "--json")
    # one ulink: everything folds into the site itself
    assert json.loads(as_json.stdout) == {"uri": "http://www.big-portal.com/", "weight": 40}
    sampled = run("ulinks", str(sitemap), "-k", "2", "--max-uris", "10")
    assert "a random 10 of them" in sampled.stderr and len(sampled.stdout.splitlines()) == 2
    folder = run("ulinks", str(tmp_path))
    assert folder.returncode == 2 and "survey folder" in folder.stderr


def test_ulinks_of_a_site_read_from_its_robots_txt() -> None:
    with serve(Site("127.0.6.1")) as site:
        o = site.origin
        site.routes["/robots.txt"] = Reply(200, f"User-agent: *\nCrawl-delay: 0.01\n"
                                                f"Sitemap: {o}/sitemap.xml\n".encode())
        site.routes["/sitemap.xml"] = Reply(200, urlset(portal(o), "<priority>0.5</priority>"))
        refused = run("ulinks", o)
        result = run("ulinks", o, "-k", "2", "--allow-private", "--weigh", "priority")
    assert refused.returncode == 2 and "--allow-private" in refused.stderr
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{o}/books/\t10.0\n{o}/music/\t10.0\n"

"""How ``polite survey`` classes what it reads, against a farm of named sites on loopback: a
robots.txt served as text/html is read by its content, a sitemap cut short is a
``parse_error`` (its entries before the break still counted), and an index's children left
out by its sampling are counted as files by no table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from polite.survey.tables import Survey
from tests.commands import run
from tests.conftest import ON_PORT_80
from tests.survey_farm import Farm, Page

pytestmark = ON_PORT_80

HTML = (("Content-Type", "text/html; charset=utf-8"),)


def urlset(urls: list[str]) -> bytes:
    return ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            + "".join(f"<url><loc>{u}</loc></url>" for u in urls) + "</urlset>").encode()


def index(children: list[str]) -> bytes:
    return ('<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/'
            'sitemap/0.9">' + "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in children)
            + "</sitemapindex>").encode()


def test_content_decides_a_cut_file_is_a_parse_error_and_tables_agree_on_files(
        tmp_path: Path) -> None:
    o = "http://shop.classes.test"
    whole = urlset([f"{o}/p{k}" for k in range(4)])
    cut = whole[:whole.index(b"<url><loc>http://shop.classes.test/p3")] + b"<url><lo"
    children = [f"{o}/c{k}.xml" for k in range(8)]
    farm = Farm()
    # A robots.txt served as text/html (a common server default): a file of rules all the
    # same, as every fetch of robots.txt reads it.
    farm.add("shop.classes.test", "127.0.35.1", {
        "/robots.txt": Page(200, b"User-agent: *\nDisallow: /cart\nSitemap: /cut.xml\n"
                            b"Sitemap: /index.xml\n", HTML),
        "/cut.xml": Page(200, cut),
        "/index.xml": Page(200, index(children)),
        **{f"/c{k}.xml": Page(200, urlset([f"{o}/c{k}/1"])) for k in range(8)}})
    farm.add("home.classes.test", "127.0.35.2", {
        "/robots.txt": Page(200, b"Welcome to the shop\n", HTML)})
    hosts = tmp_path / "hosts"
    hosts.write_text(farm.hosts())
    listing = tmp_path / "top.txt"
    listing.write_text("shop.classes.test\nhome.classes.test\n")
    out = tmp_path / "survey"
    with farm.running():
        result = run("survey", str(listing), "--out", str(out), "--hosts", str(hosts),
                     "--allow-private", "--delay", "0", "--n0", "2", "--alpha", "0.25")
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(out / "survey.sqlite") as db:
        outcomes = dict(db.execute("SELECT domain, outcome FROM sites"))
        files = {uri: (info, urls, error) for uri, info, urls, error in db.execute(
            "SELECT uri, downloadinfo, url_count, error FROM sitemaps")}
        kept = {loc for (loc,) in db.execute("SELECT loc FROM sitemap_urls")}
    assert outcomes == {"shop.classes.test": "ok", "home.classes.test": "html"}
    info, urls, error = files[f"{o}/cut.xml"]
    assert (info, urls) == ("parse_error", 3) and "broken-xml" in error
    assert {f"{o}/p{k}" for k in range(3)} <= kept  # what came before the break counts
    not_sampled = sum(1 for info, _, _ in files.values() if info == "not_sampled")
    assert not_sampled == 6  # max(2, 0.25 * 8) of the 8 children read
    with Survey(out) as survey:
        errors = dict(survey.rows("sitemap_errors").rows)
        levels = sum(n for _, n in survey.rows("sitemap_levels").rows)
        by_domain = {row[0]: row for row in survey.rows("sitemap_domains").rows}
    assert errors["parse_error"] == 1
    # Table 4 and Table 5 count the same files: those reached, not the children left out.
    assert levels == by_domain["shop.classes.test"][2] == len(files) - not_sampled == 4

"""``polite survey`` with sitemaps against a farm of ~300 named sites on loopback whose true
figures are known: every robots.txt outcome class, the www step, sitemap indexes of levels
0 to 3, files shared across sites, a gzip bomb, stalls, resets, sampled indexes, the
per-site bound on kept URLs. The survey's tables must equal the farm's truth; the gaps
between a host's requests, measured at the farm, never fall below its delay; a second run
fetches nothing."""

from __future__ import annotations

import gzip
import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from polite.core.survey.sampling import sample_children
from tests.commands import run
from tests.conftest import ON_PORT_80
from tests.survey_farm import Farm, Page

pytestmark = ON_PORT_80

TEXT = (("Content-Type", "text/plain"),)
HTML = (("Content-Type", "text/html"),)
XML = (("Content-Type", "application/xml"),)
DELAY_S = 0.05  # --delay of the test runs
SLOW_DELAY_S = 1.5  # the Crawl-delay of the slow sites
N0, ALPHA, MAX_URIS = 10, 0.25, 100


def urlset(urls: list[str]) -> bytes:
    items = "".join(f"<url><loc>{u}</loc></url>" for u in urls)
    return (f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/'
            f'0.9">{items}</urlset>').encode()


def index(children: list[str]) -> bytes:
    items = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in children)
    return (f'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/'
            f'sitemap/0.9">{items}</sitemapindex>').encode()


@dataclass
class Truth:
    farm: Farm
    domains: list[str] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    # (domain, uri) -> (level, parent uri, downloadinfo, url_count, child_count, cross_site)
    files: dict[tuple[str, str], tuple[int, str | None, str, int, int, bool]] = field(
        default_factory=dict)
    uris: dict[str, int] = field(default_factory=dict)  # domain -> URIs in its files read
    delays: dict[str, float] = field(default_factory=dict)  # host -> Crawl-delay
    _next: int = 0

    def address(self) -> str:
        self._next += 1
        block, last = divmod(self._next, 250)
        return f"127.0.{13 + block}.{last + 1}"

    def site(self, name: str, routes: dict[str, Page], outcome: str | None,
             listed: bool = True) -> None:
        self.farm.add(name, self.address(), routes)
        if listed:
            self.domains.append(name)
        if outcome is not None:
            self.outcomes[name] = outcome

    def file(self, domain: str, uri: str, level: int, parent: str | None, info: str = "ok",
             urls: int = 0, children: int = 0, cross: bool = False) -> None:
        self.files[(domain, uri)] = (level, parent, info, urls, children, cross)
        if info in ("ok", "too_big"):
            self.uris[domain] = self.uris.get(domain, 0) + urls


def robots(*lines: str) -> Page:
    return Page(200, ("User-agent: *\nDisallow: /private\n" + "".join(
        f"{line}\n" for line in lines)).encode(), TEXT)


def build() -> Truth:
    truth = Truth(Farm())
    # Plain sites: 0 to 2 urlsets each, some gzipped.
    for i in range(230):
        name = f"p{i}.survey.test"
        routes: dict[str, Page] = {}
        lines = []
        for j in range(i % 3):
            path = f"/sm{j}.xml.gz" if (i + j) % 4 == 0 else f"/sm{j}.xml"
            urls = [f"http://{name}/page/{j}/{k}" for k in range(i % 7 + 1)]
            body = urlset(urls)
            routes[path] = Page(200, gzip.compress(body) if path.endswith(".gz") else body)
            lines.append(f"Sitemap: {path}")
            truth.file(name, f"http://{name}{path}", 0, None, urls=len(urls))
        routes["/robots.txt"] = robots(*lines)
        truth.site(name, routes, "ok")
        truth.uris.setdefault(name, 0)
    # Indexes three deep: levels 0 to 3.
    for i in range(4):
        name = f"deep{i}.survey.test"
        o = f"http://{name}"
        routes = {"/robots.txt": robots("Sitemap: /idx0.xml"),
                  "/idx0.xml": Page(200, index([f"{o}/idx1.xml", f"{o}/leaf1.xml"])),
                  "/idx1.xml": Page(200, index([f"{o}/idx2.xml"])),
                  "/idx2.xml": Page(200, index([f"{o}/leaf3.xml"])),
                  "/leaf1.xml": Page(200, urlset([f"{o}/a", f"{o}/b", f"{o}/c"])),
                  "/leaf3.xml": Page(200, urlset([f"{o}/x{k}" for k in range(5)]))}
        truth.site(name, routes, "ok")
        truth.file(name, f"{o}/idx0.xml", 0, None, children=2)
        truth.file(name, f"{o}/idx1.xml", 1, f"{o}/idx0.xml", children=1)
        truth.file(name, f"{o}/leaf1.xml", 1, f"{o}/idx0.xml", urls=3)
        truth.file(name, f"{o}/idx2.xml", 2, f"{o}/idx1.xml", children=1)
        truth.file(name, f"{o}/leaf3.xml", 3, f"{o}/idx2.xml", urls=5)
    # Sitemap sharing: files on a host outside the list, and on another listed site.
    shared_routes = {"/robots.txt": robots()}
    for i in range(3):
        name = f"sharer{i}.survey.test"
        uri = f"http://shared.survey.test/s{i}.xml"
        shared_routes[f"/s{i}.xml"] = Page(200, urlset([f"http://{name}/{k}" for k in
                                                        range(4)]))
        truth.site(name, {"/robots.txt": robots(f"Sitemap: {uri}")}, "ok")
        truth.file(name, uri, 0, None, urls=4, cross=True)
    truth.site("shared.survey.test", shared_routes, None, listed=False)
    truth.farm.sites["p1.survey.test"][1]["/extra.xml"] = Page(200, urlset(["http://x.test/1"]))
    truth.site("borrower.survey.test", {"/robots.txt": robots(
        "Sitemap: http://p1.survey.test/extra.xml")}, "ok")
    truth.domains.insert(0, truth.domains.pop())  # surveyed before p1, whose file it reads
    truth.file("borrower.survey.test", "http://p1.survey.test/extra.xml", 0, None, urls=1,
               cross=True)
    # A gzip bomb: 60 MB of markup in a 60 kB file.
    bomb = gzip.compress(b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                         + b"<url><loc>http://bomb.survey.test/a</loc></url>"
                         + b" " * 60_000_000, 9)
    truth.site("bomb.survey.test", {"/robots.txt": robots("Sitemap: /bomb.xml.gz"),
                                    "/bomb.xml.gz": Page(200, bomb)}, "ok")
    truth.file("bomb.survey.test", "http://bomb.survey.test/bomb.xml.gz", 0, None, "too_big",
               urls=1)
    # Each way a sitemap file fails.
    o = "http://smfail.survey.test"
    failures = {"/gone.xml": (Page(404), "not_found"), "/closed.xml": (Page(403), "forbidden"),
                "/err.xml": (Page(503), "server_error"),
                "/stall.xml": (Page(stall=True), "timeout"),
                "/reset.xml": (Page(reset=True), "connection_error"),
                "/private/s.xml": (Page(200, urlset([f"{o}/p"])), "robots_disallowed"),
                "/broken.xml": (Page(200, b"this is no sitemap at all\n" * 3), "parse_error"),
                "/page.xml": (Page(200, b"<!DOCTYPE html><html><body>hi</body></html>", HTML),
                              "html"),
                "/loop.xml": (Page(301, headers=(("Location", "/loop.xml"),)),
                              "redirect_loop")}
    truth.site("smfail.survey.test", {"/robots.txt": robots(*(
        f"Sitemap: {path}" for path in failures)), **{p: f[0] for p, f in failures.items()}},
        "ok")
    for path, (_, info) in failures.items():
        truth.file("smfail.survey.test", o + path, 0, None, info)
    # A large index, sampled: max(N0, ALPHA * 60) = 15 of its 60 children read.
    o = "http://bigidx.survey.test"
    children = [f"{o}/c{j}.xml" for j in range(60)]
    routes = {"/robots.txt": robots("Sitemap: /index.xml"), "/index.xml": Page(200, index(
        children))}
    chosen, left = sample_children(children, N0, ALPHA, random.Random(f"{o}/index.xml"))
    assert len(chosen) == 15 and len(left) == 45
    for j, child in enumerate(children):
        routes[f"/c{j}.xml"] = Page(200, urlset([f"{o}/c{j}/1", f"{o}/c{j}/2"]))
        truth.file("bigidx.survey.test", child, 1, f"{o}/index.xml",
                   "ok" if child in chosen else "not_sampled", urls=2 if child in chosen
                   else 0)
    truth.site("bigidx.survey.test", routes, "ok")
    truth.file("bigidx.survey.test", f"{o}/index.xml", 0, None, children=60)
    # More URLs than the per-site bound: all counted, MAX_URIS kept.
    truth.site("many.survey.test", {"/robots.txt": robots("Sitemap: /all.xml"),
                                    "/all.xml": Page(200, urlset([
                                        f"http://many.survey.test/{k}" for k in range(150)]))},
               "ok")
    truth.file("many.survey.test", "http://many.survey.test/all.xml", 0, None, urls=150)
    # A site that asks for a longer delay between requests: long enough that its first
    # sitemap, which may follow robots.txt at once, cannot come as late as the delay on a
    # loaded machine.
    for i in range(2):
        name = f"slow{i}.survey.test"
        truth.delays[name] = SLOW_DELAY_S
        routes = {"/robots.txt": Page(200, f"User-agent: *\nCrawl-delay: {SLOW_DELAY_S}\n"
                                      .encode() + b"".join(
            f"Sitemap: /s{j}.xml\n".encode() for j in range(3)), TEXT)}
        for j in range(3):
            routes[f"/s{j}.xml"] = Page(200, urlset([f"http://{name}/{j}"]))
            truth.file(name, f"http://{name}/s{j}.xml", 0, None, urls=1)
        truth.site(name, routes, "ok")
    # robots.txt outcome classes.
    home = Page(200, b"<!DOCTYPE html><html><body>Welcome</body></html>", HTML)
    for i in range(3):
        name = f"html{i}.survey.test"
        truth.site(name, {"/robots.txt": home}, "ok")
        truth.site(f"www.{name}", {"/robots.txt": robots(
            f"Sitemap: http://www.{name}/sm.xml"),
            "/sm.xml": Page(200, urlset([f"http://www.{name}/"]))}, None, listed=False)
        truth.file(name, f"http://www.{name}/sm.xml", 0, None, urls=1)
    truth.site("htmlonly.survey.test", {"/robots.txt": home}, "html")
    truth.site("redirhome.survey.test", {"/robots.txt": Page(
        302, headers=(("Location", "/"),)), "/": home}, "html")
    for status, outcome in ((404, "not_found"), (410, "not_found"), (401, "forbidden"),
                            (403, "forbidden"), (500, "server_error"), (503, "server_error"),
                            (429, "server_error")):
        truth.site(f"s{status}.survey.test", {"/robots.txt": Page(status)}, outcome)
    truth.site("charset.survey.test", {"/robots.txt": Page(
        200, b"User-agent: *\nDisallow: /\n", (("Content-Type", "text/plain; charset=utf8x"),
                                               ))}, "charset")
    truth.site("latin.survey.test", {"/robots.txt": Page(
        200, b"User-agent: *\nDisallow: /caf\xe9\n", (("Content-Type",
                                                       "text/plain; charset=utf-8"),))},
        "charset")
    truth.site("huge.survey.test", {"/robots.txt": Page(
        200, b"User-agent: *\n" + b"Disallow: /a-long-rule/x\n" * 500_000, TEXT)}, "too_big")
    truth.site("empty.survey.test", {"/robots.txt": Page(200, b"", TEXT)}, "empty")
    truth.site("comments.survey.test", {"/robots.txt": Page(200, b"# nothing\n", TEXT)},
               "empty")
    truth.site("stall.survey.test", {"/robots.txt": Page(stall=True)}, "timeout")
    truth.site("reset.survey.test", {"/robots.txt": Page(reset=True)}, "connection_error")
    truth.farm.extra_hosts["refused.survey.test"] = "127.0.19.250"
    truth.domains.append("refused.survey.test")
    truth.outcomes["refused.survey.test"] = "connection_error"
    for i in range(3):
        truth.domains.append(f"nxdomain{i}.survey.test")
        truth.outcomes[f"nxdomain{i}.survey.test"] = "dns_error"
    truth.site("loop.survey.test", {
        "/robots.txt": Page(301, headers=(("Location", "/a"),)),
        "/a": Page(302, headers=(("Location", "/robots.txt"),))}, "redirect_loop")
    truth.site("chain.survey.test", {f"/{k}": Page(301, headers=(("Location", f"/{k + 1}"),))
                                     for k in range(8)} | {"/robots.txt": Page(
                                         301, headers=(("Location", "/0"),))},
               "redirect_loop")
    return truth


def robots_hops(routes: dict[str, Page]) -> set[str]:
    """The paths a fetch of a site's robots.txt asks for: /robots.txt and the redirects it
    leads to on the site."""
    paths, path = {"/robots.txt"}, "/robots.txt"
    while path in routes and 300 <= routes[path].status < 400:
        path = dict(routes[path].headers)["Location"]
        if path in paths:
            break
        paths.add(path)
    return paths


def survey(tmp_path: Path, truth: Truth, *extra: str) -> tuple[str, str]:
    hosts = tmp_path / "hosts"
    hosts.write_text(truth.farm.hosts())
    listing = tmp_path / "top.csv"
    listing.write_text("".join(f"{rank},{name}\n" for rank, name in
                               enumerate(truth.domains, 1)))
    # The stalled sites wait the read timeout out; 6 s, as 3 s let the 12.5 MB file's reply
    # fall silent that long on a busy machine (200 requests at once to one farm process),
    # and read as a timeout where the cap cuts it. No site is to time out connecting (the
    # refused one is refused at once): 2 s made 47 sites connection errors at load 20.
    result = run("survey", str(listing), "--out", str(tmp_path / "survey"), "--hosts",
                 str(hosts), "--allow-private", "--connect-timeout", "10", "--read-timeout",
                 "6", "--delay", str(DELAY_S), "--n0", str(N0), "--alpha", str(ALPHA),
                 "--max-uris", str(MAX_URIS), "--concurrency", "200", *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout, result.stderr


@pytest.mark.slow
def test_the_tables_equal_the_farms_truth(tmp_path: Path) -> None:
    truth = build()
    assert len(truth.domains) >= 250
    with truth.farm.running():
        first, _ = survey(tmp_path, truth)
        fetched = len(truth.farm.arrivals)
        second, _ = survey(tmp_path, truth)
        assert len(truth.farm.arrivals) == fetched  # nothing fetched again
    assert f"{len(truth.domains)} of {len(truth.domains)} domains surveyed" in first
    assert f"0 of {len(truth.domains)}" in second
    with sqlite3.connect(tmp_path / "survey" / "survey.sqlite") as db:
        outcomes = dict(db.execute("SELECT domain, outcome FROM sites"))
        rows = db.execute("SELECT s.domain, s.uri, s.level, p.uri, s.downloadinfo, "
                          "s.url_count, s.child_count, s.cross_site FROM sitemaps s LEFT JOIN "
                          "sitemaps p ON p.id = s.parent").fetchall()
        sites = {d: (t, k) for d, t, k in db.execute(
            "SELECT domain, uris_total, uris_kept FROM sitemap_sites")}
        kept_many = {loc for (loc,) in db.execute(
            "SELECT loc FROM sitemap_urls WHERE domain = 'many.survey.test'")}
        deep = {loc for (loc,) in db.execute(
            "SELECT loc FROM sitemap_urls WHERE domain = 'deep0.survey.test'")}
        huge = db.execute("SELECT robots_bytes, length(body) FROM sites JOIN bodies ON "
                          "hash = robots_hash WHERE domain = 'huge.survey.test'").fetchone()
        kinds = dict(db.execute("SELECT uri, filetype || '/' || kind FROM sitemaps WHERE "
                                "domain IN ('p0.survey.test', 'p4.survey.test', "
                                "'deep1.survey.test')"))
    assert outcomes == truth.outcomes
    got = {(d, u): (level, parent, info, urls, children, bool(cross))
           for d, u, level, parent, info, urls, children, cross in rows}
    assert got == truth.files
    assert {d: t for d, (t, _) in sites.items()} == {d: truth.uris.get(d, 0)
                                                      for d in truth.domains}
    assert all(k == min(t, MAX_URIS) for t, k in sites.values())
    assert len(kept_many) == MAX_URIS and kept_many <= {f"http://many.survey.test/{k}"
                                                        for k in range(150)}
    assert deep == {f"http://deep0.survey.test/{x}" for x in ("a", "b", "c")} | {
        f"http://deep0.survey.test/x{k}" for k in range(5)}
    assert huge == (len(b"User-agent: *\n" + b"Disallow: /a-long-rule/x\n" * 500_000),
                    500 * 1024)
    assert kinds["http://p4.survey.test/sm0.xml.gz"] == "xml.gz/urlset"
    assert kinds["http://deep1.survey.test/idx0.xml"] == "xml/index"
    # Each listed file read once; the shared host's robots.txt read once, before its files.
    shared = truth.farm.requests("shared.survey.test")
    assert shared[0] == "/robots.txt" and sorted(shared) == ["/robots.txt", "/s0.xml",
                                                              "/s1.xml", "/s2.xml"]
    assert truth.farm.requests("bigidx.survey.test").count("/index.xml") == 1
    # Every robots.txt read once, also p1's, which borrower's shared sitemap needs whenever
    # borrower's turn comes.
    assert all(truth.farm.requests(name).count("/robots.txt") == 1
               for name in truth.domains if name in truth.farm.sites)
    assert truth.farm.requests("p1.survey.test").count("/extra.xml") == 1
    # Politeness at the origin: a request to a host comes at least its delay (the default,
    # or the Crawl-delay it asks for) after the host's last request; fetching robots.txt
    # (its redirects within the host too) does not use up the slot, so the first sitemap may
    # follow it at once.
    robots = {host: robots_hops(routes) for host, (_, routes) in truth.farm.sites.items()}
    last: dict[str, float] = {}
    gaps = 0
    after_robots: dict[str, float] = {}
    previous: dict[str, tuple[float, str]] = {}
    for arrived, host, path in sorted(truth.farm.arrivals):
        if host in last:
            assert arrived - last[host] >= truth.delays.get(host, DELAY_S), (
                host, previous[host][1], path, arrived - last[host])
            gaps += 1
        if host in previous and previous[host][1] == "/robots.txt":
            after_robots.setdefault(host, arrived - previous[host][0])
        previous[host] = (arrived, path)
        if path not in robots.get(host, {"/robots.txt"}):
            last[host] = arrived
    assert gaps > 100
    # The sites asking for a longer delay had their first sitemap asked for sooner after robots.txt.
    assert all(after_robots[host] < delay for host, delay in truth.delays.items())

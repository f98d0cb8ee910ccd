"""``polite survey`` asks the shared politeness driver for each sitemap request, redirects
included: a hop to another host waits for that host's turn (its robots.txt Crawl-delay), and
a hop to a path its host's robots.txt disallows is not asked for. Measured at the farm."""

from __future__ import annotations

import datetime
import itertools
import sqlite3
from pathlib import Path

from tests.commands import run
from tests.conftest import ON_PORT_80
from tests.survey_farm import Farm, Page

pytestmark = ON_PORT_80

TEXT = (("Content-Type", "text/plain"),)
CRAWL_DELAY_S = 1.0


def urlset(urls: list[str]) -> bytes:
    return ('<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">' + "".join(
        f"<url><loc>{u}</loc></url>" for u in urls) + "</urlset>").encode()


def moved(to: str) -> Page:
    return Page(301, headers=(("Location", to),))



def _survey(farm: Farm, tmp_path: Path, domain: str) -> Path:
    """``polite survey`` of ``domain``, served by ``farm``; the survey's folder."""
    hosts = tmp_path / "hosts"
    hosts.write_text(farm.hosts())
    listing = tmp_path / "top.txt"
    listing.write_text(f"{domain}\n")
    out = tmp_path / "survey"
    with farm.running():
        result = run("survey", str(listing), "--out", str(out), "--hosts", str(hosts),
                     "--allow-private", "--delay", "0")
    assert result.returncode == 0, result.stderr
    return out

def test_redirects_take_their_hosts_turn_and_follow_their_robots_txt(tmp_path: Path) -> None:
    farm = Farm()
    store = "http://store.politeness.test"
    # a.politeness.test lists three sitemaps; each moved to a host that asks for a second
    # between requests, and one moved to a path its own robots.txt disallows.
    farm.add("a.politeness.test", "127.0.31.1", {
        "/robots.txt": Page(200, b"User-agent: *\nDisallow: /private/\n"
                            b"Sitemap: /s0.xml\nSitemap: /s1.xml\nSitemap: /s2.xml\n"
                            b"Sitemap: /gone.xml\n", TEXT),
        "/s0.xml": moved(f"{store}/s0.xml"), "/s1.xml": moved(f"{store}/s1.xml"),
        "/s2.xml": moved(f"{store}/s2.xml"), "/gone.xml": moved("/private/s.xml"),
        "/private/s.xml": Page(200, urlset(["http://a.politeness.test/secret"]))})
    farm.add("store.politeness.test", "127.0.31.2", {
        "/robots.txt": Page(200, f"User-agent: *\nCrawl-delay: {CRAWL_DELAY_S}\n".encode(),
                            TEXT),
        **{f"/s{i}.xml": Page(200, urlset([f"http://a.politeness.test/{i}"]))
           for i in range(3)}})
    out = _survey(farm, tmp_path, "a.politeness.test")
    with sqlite3.connect(out / "survey.sqlite") as db:
        files = dict(db.execute("SELECT uri, downloadinfo FROM sitemaps"))
    assert files == {**{f"http://a.politeness.test/s{i}.xml": "ok" for i in range(3)},
                     "http://a.politeness.test/gone.xml": "robots_disallowed"}
    # The disallowed target was never asked for.
    assert "/private/s.xml" not in farm.requests("a.politeness.test")
    # The store's robots.txt read before its files, which come a Crawl-delay apart (a
    # violation comes a few milliseconds apart; the tolerance is for the network's jitter).
    at_store = [(at, path) for at, host, path in sorted(farm.arrivals)
                if host == "store.politeness.test"]
    assert at_store[0][1] == "/robots.txt"
    files_at = [at for at, path in at_store if path != "/robots.txt"]
    assert len(files_at) == 3
    gaps = [later - earlier for earlier, later in itertools.pairwise(files_at)]
    assert min(gaps) >= CRAWL_DELAY_S - 0.1, gaps


def test_a_visit_time_window_hours_away_is_reported_not_waited_for(tmp_path: Path) -> None:
    """The driver reads Visit-time: a sitemap whose host opens its window hours from now is
    recorded ``deferred`` (a class of its own: not the rules' no) with the wait it asked for,
    and not asked for."""
    now = datetime.datetime.now(datetime.UTC)
    opens, closes = now + datetime.timedelta(hours=3), now + datetime.timedelta(hours=4)
    window = f"{opens:%H%M}-{closes:%H%M}"
    farm = Farm()
    farm.add("late.politeness.test", "127.0.31.3", {
        "/robots.txt": Page(200, f"User-agent: *\nVisit-time: {window}\nSitemap: /s.xml\n"
                            .encode(), TEXT),
        "/s.xml": Page(200, urlset(["http://late.politeness.test/1"]))})
    out = _survey(farm, tmp_path, "late.politeness.test")
    with sqlite3.connect(out / "survey.sqlite") as db:
        ((info, error),) = db.execute("SELECT downloadinfo, error FROM sitemaps").fetchall()
    assert info == "deferred" and "asks to wait" in error, error
    # the window opens in 3 hours (to the minute), read on the wall clock's time of day
    waited = float(error.split("asks to wait ")[1].split(" s")[0])
    assert 3 * 3600 - 120 <= waited <= 3 * 3600 + 5, error
    assert farm.requests("late.politeness.test") == ["/robots.txt"]


def test_a_robots_txt_redirect_hop_waits_its_hosts_turn(tmp_path: Path) -> None:
    """A robots.txt moved to another path of its host: the hop is a request like any other
    to the host, so it comes the survey's delay after the request it follows, and the
    host's sitemap the delay after the hop (by the kernel's arrival stamps; followed at
    once, the hop came a few milliseconds after robots.txt)."""
    delay_s = 0.5
    farm = Farm()
    farm.add("hop.politeness.test", "127.0.31.4", {
        "/robots.txt": moved("/policies/robots.txt"),
        "/policies/robots.txt": Page(200, b"User-agent: *\nSitemap: /s.xml\n", TEXT),
        "/s.xml": Page(200, urlset(["http://hop.politeness.test/a"]))})
    hosts = tmp_path / "hosts"
    hosts.write_text(farm.hosts())
    listing = tmp_path / "top.txt"
    listing.write_text("hop.politeness.test\n")
    out = tmp_path / "survey"
    with farm.running():
        result = run("survey", str(listing), "--out", str(out), "--hosts", str(hosts),
                     "--allow-private", "--delay", str(delay_s))
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(out / "survey.sqlite") as db:
        files = dict(db.execute("SELECT uri, downloadinfo FROM sitemaps"))
    assert files == {"http://hop.politeness.test/s.xml": "ok"}
    arrivals = sorted((at, path) for at, host, path in farm.arrivals
                      if host == "hop.politeness.test")
    assert [path for _, path in arrivals] == ["/robots.txt", "/policies/robots.txt",
                                             "/s.xml"]
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(arrivals)]
    assert min(gaps) >= delay_s - 0.01, arrivals

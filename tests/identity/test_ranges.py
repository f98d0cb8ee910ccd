"""Published IP range files (JAFAR, and Google's and Bing's files of the same shape): read,
stored with their creationTime by ``polite site ranges update``, and used by the site
middleware, the most specific prefix deciding whose an address is."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from pathlib import Path

import httpx
import pytest

from polite.core.site import parse_crawlers, verify_by_ranges
from polite.core.site.ranges import (
    RangeFile,
    RangeTable,
    parse_creation_time,
    parse_range_file,
)
from polite.errors import ConfigError
from polite.site import SiteGuard, SiteMiddleware, SiteStore, load_crawlers
from polite.site.page import create_site_app
from tests.commands import run
from tests.site_servers import client_from, serve_asgi
from tests.sites import Reply, Site, serve

# The shapes as the operators publish them (addresses from the documentation ranges).
JAFAR = {"creationTime": "2025-08-15T14:30:00Z", "prefixes": [
    {"ipv4Prefix": "192.0.2.0/24", "services": ["ExampleBot"]},
    {"ipv6Prefix": "2001:db8:abc::/48"},
    {"ipv4Prefix": "198.51.100.0/24", "ipv6Prefix": "2001:db8::/32"},  # both: ignored
    {"services": ["x"]},  # neither: ignored
]}
GOOGLE = {"creationTime": "2024-11-21T15:46:02.000000", "prefixes": [
    {"ipv6Prefix": "2001:db8:4801:10::/64"}, {"ipv4Prefix": "203.0.113.0/27"}]}
GOOGLE_OLDER = {"syncToken": "1700000000000", "creationTime": "2023-11-14T22:13:20.000000",
                "prefixes": [{"ipv4Prefix": "203.0.113.64/27"}]}
BING = {"creationTime": "2024-02-19T06:00:00.0000000", "prefixes": [
    {"ipv4Prefix": "198.51.100.0/24"}]}


def _bytes(document: object) -> bytes:
    return json.dumps(document).encode()


def _read(document: object, source: str) -> RangeFile:
    # the documentation ranges these shapes are written with are special-purpose ranges
    return parse_range_file(_bytes(document), source=source, allow_private=True)


def test_each_published_shape_is_read_with_its_date() -> None:
    jafar = _read(JAFAR, "jafar")
    assert jafar.creation_time == parse_creation_time("2025-08-15T14:30:00+00:00")
    assert jafar.creation_time == 1755268200.0
    assert [str(p) for p in jafar.prefixes] == ["192.0.2.0/24", "2001:db8:abc::/48"]
    assert jafar.skipped == 2
    google = _read(GOOGLE, "google")
    assert google.creation_time == 1732203962.0
    assert {p.version for p in google.prefixes} == {4, 6}
    assert _read(GOOGLE_OLDER, "old").creation_time == 1700000000.0
    assert _read(BING, "bing").creation_time == 1708322400.0
    assert parse_creation_time("2025-08-15T16:30:00+02:00") == 1755268200.0


@pytest.mark.parametrize(("document", "problem"), [
    ({"prefixes": [{"ipv4Prefix": "192.0.2.0/24"}]}, "no creationTime"),
    ({"creationTime": "yesterday", "prefixes": []}, "no creationTime"),
    ({"creationTime": "2025-01-01T00:00:00Z"}, '"prefixes"'),
    ([1, 2], "not a JSON object"),
])
def test_a_file_that_cannot_be_dated_or_read_is_refused(document: object, problem: str
                                                        ) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_range_file(_bytes(document), source="f.json")


CRAWLERS = parse_crawlers(json.dumps({"snapshot": "test", "crawlers": [
    {"name": "ExampleBot", "operator": "Example", "category": "search",
     "tokens": ["ExampleBot"],
     "ranges_urls": ["https://example.test/examplebot.json"]},
    {"name": "CloudFetcher", "operator": "Cloud", "category": "tool",
     "tokens": ["CloudFetcher"],
     "ranges_urls": ["https://cloud.test/fetchers.json"]},
]}))


def test_the_most_specific_prefix_decides_whose_an_address_is() -> None:
    net = ipaddress.ip_network
    table = RangeTable({"ExampleBot": [net("10.0.0.0/8"), net("2001:db8::/32")],
                        "CloudFetcher": [net("10.1.2.0/24"), net("2001:db8:1::/48")]})
    assert table.owner(ipaddress.ip_address("10.1.2.3")) == ("CloudFetcher", net("10.1.2.0/24"))
    assert table.owner(ipaddress.ip_address("10.1.3.3")) == ("ExampleBot", net("10.0.0.0/8"))
    assert table.owner(ipaddress.ip_address("2001:db8:1::5"))[0] == "CloudFetcher"  # type: ignore[index]
    assert table.owner(ipaddress.ip_address("2001:db8:2::5"))[0] == "ExampleBot"  # type: ignore[index]
    assert table.owner(ipaddress.ip_address("11.0.0.1")) is None
    example = CRAWLERS.by_name("ExampleBot")
    verdict = verify_by_ranges(example, "10.1.3.3", table)
    assert verdict.verdict == "verified" and verdict.by == "ranges"  # type: ignore[union-attr]
    verdict = verify_by_ranges(example, "10.1.2.3", table)
    assert verdict.verdict == "forged" and "CloudFetcher" in verdict.how  # type: ignore[union-attr]
    verdict = verify_by_ranges(example, "::ffff:10.1.3.3", table)
    assert verdict.verdict == "verified"  # type: ignore[union-attr]
    verdict = verify_by_ranges(example, "11.0.0.1", table)  # in no range of a publisher
    assert verdict.verdict == "forged"  # type: ignore[union-attr]


def test_the_bundled_list_ships_no_addresses_only_where_they_are_published() -> None:
    crawlers = load_crawlers()
    assert all(not c.ip_ranges for c in crawlers.crawlers)
    for name in ("Googlebot", "Bingbot", "GPTBot", "PerplexityBot", "DuckDuckBot",
                 "Applebot", "CCBot"):
        crawler = crawlers.by_name(name)
        assert crawler is not None and crawler.ranges_urls, name


def _polite(*argv: str) -> subprocess.CompletedProcess[str]:
    return run(*argv, timeout=60)


@pytest.fixture
def crawler_file(tmp_path: Path) -> Path:
    path = tmp_path / "crawlers.json"
    path.write_text(json.dumps({"snapshot": "test", "crawlers": [
        {"name": "ExampleBot", "operator": "Example", "category": "search",
         "tokens": ["ExampleBot"], "ranges_urls": ["https://example.test/examplebot.json"]},
        {"name": "CloudFetcher", "operator": "Cloud", "category": "tool",
         "tokens": ["CloudFetcher"]}]}))
    return path


def test_update_from_files(tmp_path: Path, crawler_file: Path) -> None:
    db = tmp_path / "site.sqlite"
    (tmp_path / "examplebot.json").write_bytes(_bytes(GOOGLE))
    (tmp_path / "cloud.json").write_bytes(_bytes(JAFAR))
    done = _polite("site", "ranges", "update", "--db", str(db), "--crawlers",
                   str(crawler_file), str(tmp_path / "examplebot.json"),
                   f"CloudFetcher={tmp_path / 'cloud.json'}", "--allow-private")
    assert done.returncode == 0, done.stderr
    assert "ExampleBot: 2 prefixes" in done.stdout and "made 2024-11-21 15:46" in done.stdout
    assert "CloudFetcher: 2 prefixes" in done.stdout and "2 entries passed over" in done.stdout
    store = SiteStore(db)
    rows = {r.crawler: r for r in store.ranges()}
    assert rows["ExampleBot"].creation_time == 1732203962.0
    assert set(rows["CloudFetcher"].prefixes) == {"192.0.2.0/24", "2001:db8:abc::/48"}
    store.close()


# What a hostile or careless file says to make every address a crawler's, one a line.
HOSTILE = """{"creationTime": "2025-03-01T00:00:00Z", "prefixes": [
  {"ipv4Prefix": "66.249.64.0/27"},
  {"ipv4Prefix": "0.0.0.0/0"},
  {"ipv6Prefix": "::/0"},
  {"ipv4Prefix": "127.0.0.0/8"},
  {"ipv4Prefix": "10.0.0.0/8"},
  {"ipv6Prefix": "::ffff:0:0/96"},
  {"ipv4Prefix": "1.2.3.4/8"},
  {"ipv4Prefix": "203.0.113.0/24"},
  {"ipv6Prefix": "2001:4860:4801:10::/64"},
  {"ipv6Prefix": "2001:4000::/18"}
]}
"""


def test_wide_private_special_and_misaligned_prefixes_are_refused_line_by_line(
        tmp_path: Path, crawler_file: Path) -> None:
    db = tmp_path / "site.sqlite"
    (tmp_path / "examplebot.json").write_text(HOSTILE)
    done = _polite("site", "ranges", "update", "--db", str(db), "--crawlers",
                   str(crawler_file), str(tmp_path / "examplebot.json"))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "ExampleBot: 2 prefixes" in done.stdout
    refused = [line for line in done.stdout.splitlines() if " refused: " in line]
    assert [line.split(": ", 1)[0].rsplit(":", 1)[1] for line in refused] == [
        "3", "4", "5", "6", "7", "8", "9", "11"]
    assert "0.0.0.0/0 refused: wider than /8" in done.stdout
    assert "::/0 refused: wider than /19" in done.stdout
    assert "2001:4000::/18 refused: wider than /19" in done.stdout
    assert "1.2.3.4/8 refused: host bits set" in done.stdout and "1.0.0.0/8" in done.stdout
    for special in ("127.0.0.0/8", "10.0.0.0/8", "::ffff:0:0/96", "203.0.113.0/24"):
        assert f"{special} refused: a private or special-purpose range" in done.stdout
    store = SiteStore(db)
    (row,) = store.ranges()
    assert set(row.prefixes) == {"66.249.64.0/27", "2001:4860:4801:10::/64"}
    table = RangeTable({row.crawler: [ipaddress.ip_network(p) for p in row.prefixes]})
    example = CRAWLERS.by_name("ExampleBot")
    assert verify_by_ranges(example, "203.0.113.50", table).verdict == "forged"  # type: ignore[union-attr]
    assert verify_by_ranges(example, "66.249.64.5", table).verdict == "verified"  # type: ignore[union-attr]
    store.close()


@pytest.mark.parametrize("created", ["9999-12-31T23:59:59+99:99", "2999-01-01T00:00:00Z"])
def test_a_file_made_in_the_future_is_refused(tmp_path: Path, crawler_file: Path,
                                             created: str) -> None:
    future = tmp_path / "examplebot.json"
    future.write_text(json.dumps({"creationTime": created,
                                  "prefixes": [{"ipv4Prefix": "66.249.64.0/27"}]}))
    done = _polite("site", "ranges", "update", "--db", str(tmp_path / "s.sqlite"),
                   "--crawlers", str(crawler_file), str(future))
    assert done.returncode == 2 and "creationTime" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    store = SiteStore(tmp_path / "s.sqlite")
    assert store.ranges() == []
    store.close()


def test_nothing_to_read_is_said(tmp_path: Path) -> None:
    bare = tmp_path / "crawlers.json"
    bare.write_text(json.dumps({"crawlers": [{"name": "X", "tokens": ["XBot"]}]}))
    done = _polite("site", "ranges", "update", "--db", str(tmp_path / "s.sqlite"),
                   "--crawlers", str(bare))
    assert done.returncode == 0 and "no range files to read" in done.stdout


@pytest.mark.parametrize(("source", "problem"), [
    ("unknown.json", "not the name of a crawler's published file"),
    ("NoSuchBot=x.json", "no crawler is named 'NoSuchBot'"),
])
def test_a_source_polite_cannot_place_is_refused(tmp_path: Path, crawler_file: Path,
                                                 source: str, problem: str) -> None:
    done = _polite("site", "ranges", "update", "--db", str(tmp_path / "s.sqlite"),
                   "--crawlers", str(crawler_file), source)
    assert done.returncode == 2 and problem in done.stderr and "Traceback" not in done.stderr


def test_an_undated_file_is_refused_by_name(tmp_path: Path, crawler_file: Path) -> None:
    undated = tmp_path / "examplebot.json"
    undated.write_bytes(_bytes({"prefixes": [{"ipv4Prefix": "192.0.2.0/24"}]}))
    done = _polite("site", "ranges", "update", "--db", str(tmp_path / "s.sqlite"),
                   "--crawlers", str(crawler_file), str(undated))
    assert done.returncode == 2 and "examplebot.json" in done.stderr
    assert "creationTime" in done.stderr


def test_update_from_urls_at_most_hourly(tmp_path: Path, crawler_file: Path) -> None:
    site = Site("127.0.25.1", {"/examplebot.json": Reply(200, _bytes(BING)),
                               "/moved/examplebot.json": Reply(302, b"", {
                                   "location": "/examplebot.json"})})
    db = tmp_path / "site.sqlite"
    with serve(site):
        url = site.origin + "/examplebot.json"
        refused = _polite("site", "ranges", "update", "--db", str(db), "--crawlers",
                          str(crawler_file), url)
        first = _polite("site", "ranges", "update", "--db", str(db), "--crawlers",
                        str(crawler_file), url, "--allow-private")
        again = _polite("site", "ranges", "update", "--db", str(db), "--crawlers",
                        str(crawler_file), url, "--allow-private")
        moved = _polite("site", "ranges", "update", "--db", str(db), "--crawlers",
                        str(crawler_file), site.origin + "/moved/examplebot.json",
                        "--allow-private")
    assert refused.returncode == 1 and "not read" in refused.stdout  # loopback, not allowed
    assert first.returncode == 0 and "1 prefixes" in first.stdout, first.stderr
    assert again.returncode == 0 and "left alone" in again.stdout and "hourly" in again.stdout
    assert moved.returncode == 1 and "302" in moved.stdout
    assert site.requests == ["/examplebot.json", "/moved/examplebot.json"]


def test_a_deeply_nested_file_is_refused_and_the_others_are_read(tmp_path: Path,
                                                                  crawler_file: Path) -> None:
    nested = b"[" * 60_000  # under the size cap; the JSON decoder alone would recurse
    local = tmp_path / "examplebot.json"
    local.write_bytes(nested)
    refused = _polite("site", "ranges", "update", "--db", str(tmp_path / "s.sqlite"),
                      "--crawlers", str(crawler_file), str(local))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"{local}: nested deeper than 64 at line 1" in refused.stderr
    site = Site("127.0.94.3", {"/examplebot.json": Reply(200, nested),
                               "/cloud.json": Reply(200, _bytes(JAFAR))})
    db = tmp_path / "site.sqlite"
    with serve(site):
        done = _polite("site", "ranges", "update", "--db", str(db), "--crawlers",
                       str(crawler_file), site.origin + "/examplebot.json",
                       f"CloudFetcher={site.origin}/cloud.json", "--allow-private")
    assert "Traceback" not in done.stderr
    assert done.returncode == 1 and "nested deeper than 64" in done.stdout, done.stdout
    assert "CloudFetcher: 2 prefixes" in done.stdout
    store = SiteStore(db)
    assert [r.crawler for r in store.ranges()] == ["CloudFetcher"]
    store.close()


def test_the_middleware_and_the_page_use_the_stored_ranges(tmp_path: Path) -> None:
    store = SiteStore(tmp_path / "site.sqlite")
    table = parse_range_file(_bytes({"creationTime": "2025-01-01T00:00:00Z", "prefixes": [
        {"ipv4Prefix": "127.0.25.0/24"}]}), source="f", allow_private=True)
    inner = parse_range_file(_bytes({"creationTime": "2025-01-02T00:00:00Z", "prefixes": [
        {"ipv4Prefix": "127.0.25.64/26"}]}), source="g", allow_private=True)
    store.save_ranges("ExampleBot", "examplebot.json", table.creation_time,
                      [str(p) for p in table.prefixes], fetched_at=1.0)
    store.save_ranges("CloudFetcher", "fetchers.json", inner.creation_time,
                      [str(p) for p in inner.prefixes], fetched_at=1.0)
    # kept by a version that took any prefix: never taken now
    store.save_ranges("ExampleBot", "everyone.json", inner.creation_time,
                      ["0.0.0.0/0", "::/0"], fetched_at=1.0)
    guard = SiteGuard(store, crawlers=CRAWLERS)

    async def hello(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]

    with serve_asgi(SiteMiddleware(hello, guard), "127.0.25.2") as url:
        with client_from("127.0.25.10", url, "ExampleBot/1.0") as own:
            assert own.get("/a").status_code == 200
        with client_from("127.0.25.70", url, "ExampleBot/1.0") as other:
            assert other.get("/b").status_code == 200
        with client_from("127.0.118.1", url, "ExampleBot/1.0") as anyone:
            assert anyone.get("/c").status_code == 200
    rows = {r.target: r for r in store.visits()}
    assert (rows["/a"].verification, rows["/a"].verified_by) == ("verified", "ranges")
    assert rows["/b"].verification == "forged" and "CloudFetcher" in rows["/b"].how
    assert rows["/c"].verification == "forged" and "0.0.0.0/0" not in rows["/c"].how
    with serve_asgi(create_site_app(store), "127.0.25.3") as page_url, \
            httpx.Client(base_url=page_url, trust_env=False) as client:
        page = client.get("/access").text
    assert 'id="ranges"' in page and "examplebot.json" in page and " days" in page
    store.close()

"""One reading of store URLs for every product: the politeness store, the frontier, the
drop-ins, ``polite serve``, ``polite crawl`` and a shared ``polite survey`` take the same
schemes (``memory://``, ``sqlite:///``, ``redis://``, ``rediss://``, ``unix://``, with
``?prefix=`` and ``?cluster=1``), each on a real store, and refuse the same URLs with the
same reason, each naming its own setting."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
from pathlib import Path

import pytest

from polite.errors import SettingError, SlotNotReady, StoreURLError
from polite.integrations import PoliteGate
from polite.storage import (
    MemoryStore,
    RedisStore,
    SQLiteStore,
    StoreURL,
    open_frontier,
    open_store,
    parse_store_url,
)
from polite.storage.frontier import FrontierItem, MemoryFrontier, SQLiteFrontier
from polite.storage.redis_frontier import RedisFrontier
from tests.commands import command_line, run
from tests.conftest import on_port_80
from tests.serving import polite_serve
from tests.sites import Reply, Site, serve

READ = [
    ("memory://", StoreURL("memory://", "memory")),
    ("memory", StoreURL("memory", "memory")),
    ("sqlite:///state/polite.sqlite",
     StoreURL("sqlite:///state/polite.sqlite", "sqlite", path=Path("state/polite.sqlite"))),
    ("sqlite:////var/polite.sqlite",
     StoreURL("sqlite:////var/polite.sqlite", "sqlite", path=Path("/var/polite.sqlite"))),
    ("redis://:pw@10.0.0.5:6380/2",
     StoreURL("redis://:pw@10.0.0.5:6380/2", "redis", client_url="redis://:pw@10.0.0.5:6380/2")),
    ("rediss://r.example:6379/0?prefix=crawl1:&ssl_ca_certs=/ca.pem",
     StoreURL("rediss://r.example:6379/0?prefix=crawl1:&ssl_ca_certs=/ca.pem", "redis",
              client_url="rediss://r.example:6379/0?ssl_ca_certs=/ca.pem", prefix="crawl1:")),
    ("unix:///run/redis.sock?db=3&prefix=s:",
     StoreURL("unix:///run/redis.sock?db=3&prefix=s:", "redis",
              client_url="unix:///run/redis.sock?db=3", prefix="s:")),
    ("redis://10.0.0.5:7000/0?cluster=1&prefix=c:",
     StoreURL("redis://10.0.0.5:7000/0?cluster=1&prefix=c:", "redis",
              client_url="redis://10.0.0.5:7000", prefix="c:", cluster=True)),
    ("redis://10.0.0.5:7000?cluster=no",
     StoreURL("redis://10.0.0.5:7000?cluster=no", "redis", client_url="redis://10.0.0.5:7000")),
]


@pytest.mark.parametrize(("url", "read"), READ, ids=[url for url, _ in READ])
def test_a_store_url_is_read_one_way(url: str, read: StoreURL) -> None:
    assert parse_store_url(url) == read
    assert read.shared is (read.kind == "redis")


REFUSED = [
    ("foo://x", "expected sqlite:///PATH, redis://HOST:PORT/DB or memory://"),
    ("/var/polite.sqlite", "expected sqlite:///PATH, redis://HOST:PORT/DB or memory://"),
    ("sqlite://polite.sqlite", "expected sqlite:///PATH (three slashes, then the file)"),
    ("sqlite:///", "sqlite:/// needs the file's path after it"),
    ("redis://127.0.0.1:6379/0?cluster=maybe", "cluster= takes 1 or 0, not 'maybe'"),
    ("redis://127.0.0.1:6379/2?cluster=1", "a Redis Cluster has database 0 only"),
    ("unix:///run/redis.sock?cluster=1", "a Redis Cluster is reached over TCP"),
    ("unix://", "unix:// needs the socket's path: unix:///SOCKET"),
]


@pytest.mark.parametrize(("url", "problem"), REFUSED, ids=[url for url, _ in REFUSED])
def test_a_store_url_that_names_no_store_is_refused_naming_no_setting(url: str,
                                                                      problem: str) -> None:
    with pytest.raises(StoreURLError) as refused:
        parse_store_url(url)
    assert refused.value.problem == problem
    assert str(refused.value) == f"store URL {url!r}: {problem}"


def test_each_consumer_names_its_own_setting(tmp_path: Path) -> None:
    """The reason is the parser's; the name of the setting is the caller's."""
    bad = "redis://127.0.0.1:6379/0?cluster=maybe"
    reason = "cluster= takes 1 or 0, not 'maybe'"
    for make, knob in [(lambda: open_store(bad, lambda: 0.0, knob="--store"), "--store"),
                       (lambda: open_store(bad, lambda: 0.0, knob="POLITE_STORE"),
                        "POLITE_STORE"),
                       (lambda: RedisStore.from_url(bad), "store="),
                       (lambda: RedisFrontier.from_url(bad, knob="--store"), "--store"),
                       (lambda: PoliteGate(store=bad), "store=")]:
        with pytest.raises(SettingError) as refused:
            make()
        assert refused.value.knob == knob and refused.value.problem == reason
    with pytest.raises(SettingError, match=r"^--store 'sqlite:///': no frontier for this "
                                           r"store \(sqlite:/// needs the file's path"):
        open_frontier("sqlite:///", default_path=lambda: tmp_path / "f.sqlite",
                      knob="--store")
    # A shared survey takes only a store that machines share.
    listing = tmp_path / "top.txt"
    listing.write_text("a.example\n")
    done = run("survey", str(listing), "--store", "memory://", "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "needs redis://, rediss:// or unix://" in done.stderr
    done = run("survey", str(listing), "--store", "sqlite:///", "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "--store 'sqlite:///': sqlite:/// needs the file's path" in done.stderr


SCHEMES = ["memory", "sqlite", "redis", "unix", "rediss", "cluster"]


def url_of(scheme: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The test's store of ``scheme``: a Redis one is a real server, under a prefix of the
    test's own."""
    if scheme == "memory":
        return "memory://"
    if scheme == "sqlite":
        return f"sqlite:///{tmp_path / 'polite.sqlite'}"
    prefix = request.getfixturevalue("redis_prefix")
    if scheme == "cluster":
        return f"{request.getfixturevalue('redis_cluster_url')}?cluster=1&prefix={prefix}"
    server = request.getfixturevalue({"redis": "redis_url", "unix": "redis_unix_url",
                                      "rediss": "rediss_url"}[scheme])
    return f"{server}{'&' if '?' in server else '?'}prefix={prefix}"


def over_tcp(url: str, request: pytest.FixtureRequest) -> str:
    """The same store reached the other way: a Unix socket's over TCP, and back."""
    prefix = parse_store_url(url).prefix
    if url.startswith("unix://"):
        return f"{request.getfixturevalue('redis_url')}?prefix={prefix}"
    return f"{request.getfixturevalue('redis_unix_url')}&prefix={prefix}"


@pytest.mark.anyio
@pytest.mark.parametrize("scheme", SCHEMES)
async def test_the_politeness_store_on_every_scheme(scheme: str, request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    url = url_of(scheme, request, tmp_path)
    store = open_store(url, lambda: 100.0, knob="--store")
    kind = {"memory": MemoryStore, "sqlite": SQLiteStore}.get(scheme, RedisStore)
    assert isinstance(store, kind)
    try:
        await store.set_delay("e.example", 4.0)
        assert await store.get_delay("e.example") == 4.0
        if scheme == "sqlite":
            with sqlite3.connect(tmp_path / "polite.sqlite") as db:
                assert db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
        if scheme in ("redis", "unix"):
            # the same server the other way, under the same prefix: the same delay
            other = open_store(over_tcp(url, request), lambda: 100.0)
            try:
                assert await other.get_delay("e.example") == 4.0
            finally:
                await other.close()
            elsewhere = open_store(url.replace("prefix=", "prefix=x"), lambda: 100.0)
            try:
                assert await elsewhere.get_delay("e.example") is None  # the prefix holds
            finally:
                await elsewhere.close()
    finally:
        await store.close()


@pytest.mark.anyio
@pytest.mark.parametrize("scheme", SCHEMES)
async def test_the_frontier_on_every_scheme(scheme: str, request: pytest.FixtureRequest,
                                            tmp_path: Path) -> None:
    url = url_of(scheme, request, tmp_path)
    frontier = open_frontier(url, default_path=lambda: pytest.fail("a URL was given"),
                             worker="w1", knob="--store")
    kind = {"memory": MemoryFrontier, "sqlite": SQLiteFrontier}.get(scheme, RedisFrontier)
    assert isinstance(frontier, kind)
    try:
        added = await frontier.add([FrontierItem("http://e.example/1", "e.example")])
        assert [item.url for item in added] == ["http://e.example/1"]
        if isinstance(frontier, RedisFrontier):
            await frontier.flush()  # the totals, sent a moment later otherwise
        if scheme in ("redis", "unix"):
            other = open_frontier(over_tcp(url, request), default_path=lambda: tmp_path)
            try:
                assert (await other.counts()).queued == 1
            finally:
                await other.close()
        elif scheme != "memory":
            assert (await frontier.counts()).queued == 1
    finally:
        await frontier.close()


def robots_site(host: str) -> Site:
    return Site(host, {"/robots.txt": Reply(200, b"User-agent: *\nCrawl-delay: 30\n"),
                       "/": Reply(200, b"<html><body>home</body></html>",
                                  {"Content-Type": "text/html"})})


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_drop_ins_on_every_scheme(scheme: str, request: pytest.FixtureRequest,
                                      tmp_path: Path) -> None:
    """A gate takes the host's slot in its store; a second gate on the same store (the
    other way to the same Redis, for ``unix://`` and ``redis://``) finds it taken."""
    url = url_of(scheme, request, tmp_path)
    second = over_tcp(url, request) if scheme in ("redis", "unix") else url
    site = robots_site(f"127.0.47.{SCHEMES.index(scheme) + 1}")
    with serve(site):
        first = PoliteGate(agent="UrlBot", store=url, allow_private=True, wait=False)
        try:
            first.acquire_blocking(site.origin + "/")
            if scheme != "memory":  # a store in memory is the gate's own
                other = PoliteGate(agent="UrlBot", store=second, allow_private=True,
                                   wait=False)
                try:
                    with pytest.raises(SlotNotReady):
                        other.acquire_blocking(site.origin + "/")
                finally:
                    other.close()
            with pytest.raises(SlotNotReady):
                first.acquire_blocking(site.origin + "/")
        finally:
            first.close()
    assert [path for _, path in site.arrivals] == ["/robots.txt"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_polite_serve_on_every_scheme(scheme: str, request: pytest.FixtureRequest,
                                      tmp_path: Path) -> None:
    """``polite serve --store URL`` starts, and the delay it is told is in that store."""
    url = url_of(scheme, request, tmp_path)
    with polite_serve("--store", url) as api:
        assert api.put("/delays/e.example", json={"delay": 5000}).status_code == 200
        assert {"domain": "e.example", "delay": 5000, "robotstxt_delay": None,
                "configured_delay": 5000} in api.get("/delays").json()
    if scheme != "memory":
        async def read() -> float | None:
            store = open_store(url, lambda: 0.0)
            try:
                return await store.get_delay("e.example")
            finally:
                await store.close()

        assert asyncio.run(read()) == 5.0


@pytest.mark.parametrize("scheme", SCHEMES)
def test_polite_crawl_on_every_scheme(scheme: str, request: pytest.FixtureRequest,
                                      tmp_path: Path) -> None:
    """``polite crawl --store URL`` crawls a site, its frontier in that store."""
    url = url_of(scheme, request, tmp_path)
    site = Site(f"127.0.48.{SCHEMES.index(scheme) + 1}", {
        "/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"),
        "/": Reply(200, b'<html><body><a href="/a">a</a></body></html>',
                   {"Content-Type": "text/html"}),
        "/a": Reply(200, b"<html><body>a</body></html>", {"Content-Type": "text/html"})})
    with serve(site):
        done = run("crawl", site.origin + "/", "--store", url, "--out", str(tmp_path / "out"),
                   "--allow-private", "--default-delay-ms", "0", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(path for _, path in site.arrivals) == ["/", "/a", "/robots.txt"]
    if scheme != "memory":
        async def counts() -> int:
            frontier = open_frontier(url, default_path=lambda: tmp_path / "none.sqlite")
            try:
                return (await frontier.counts()).fetched
            finally:
                await frontier.close()

        assert asyncio.run(counts()) == 2


@on_port_80
@pytest.mark.parametrize("scheme", ["redis", "unix", "rediss", "cluster"])
def test_a_shared_survey_on_every_shared_scheme(scheme: str, request: pytest.FixtureRequest,
                                                tmp_path: Path) -> None:
    """``polite survey LIST --store URL``: the domains are taken from the shared store, by
    the default hundred workers (more than redis-py's default pool of connections, which
    refused the hundred-and-first and left the run hanging)."""
    from tests.test_survey_resume import farm_of

    url = url_of(scheme, request, tmp_path)
    farm = farm_of(2, zone=f"{scheme}.url.test", third=49 + SCHEMES.index(scheme))
    hosts = tmp_path / "hosts"
    hosts.write_text(farm.hosts())
    listing = tmp_path / "top.txt"
    listing.write_text("".join(f"{rank},{name}\n" for rank, name in enumerate(farm.sites, 1)))
    with farm.running():
        done = subprocess.run(
            command_line("survey", str(listing), "--store", url,
                         "--hosts", str(hosts), "--allow-private", "--delay", "0", "--lease-s", "2",
                         "--out", str(tmp_path / "w")), capture_output=True, text=True,
            timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "w" / "survey.sqlite") as db:
        assert db.execute("SELECT count(*) FROM sitemap_sites").fetchone()[0] == 2

    async def counts() -> int:
        frontier = RedisFrontier.from_url(url)
        try:
            return (await frontier.counts()).fetched
        finally:
            await frontier.close()

    assert asyncio.run(counts()) == 2

"""The dashboard's JSON, its live feed, ``/env`` and ``/trace``: a real ``polite serve``
process, a client sending requests through its proxy to real sites on loopback, the SQLite
store on disk, and two nodes sharing a real redis-server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from polite.serve import Settings, masked_env
from polite.storage import HostActivity, SQLiteStore
from tests.redis_server import redis_server
from tests.serving import polite_serve, through
from tests.sites import Reply, Site, serve

ROBOTS = b"User-agent: *\nDisallow: /private\nCrawl-delay: 0.2\nFoo: bar\n"
TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    routes: dict[str, Reply] = {
        "/robots.txt": Reply(200, ROBOTS),
        "/page": Reply(200, b"page"),
        "/cached": Reply(200, b"kept", {"Cache-Control": "max-age=600"}),
        "/busy": Reply(429, b"slow down", {"Retry-After": "30"}),
    }
    with serve(Site("127.0.24.1", routes)) as running:
        yield running


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    db = tmp_path_factory.mktemp("dash") / "polite.sqlite"
    with polite_serve("--store", f"sqlite:///{db}", "--allow-private", "--admin-token", TOKEN,
                      "--trace-size", "5", "--default-delay-ms", "700") as client:
        yield client


def row_of(api: httpx.Client, host: str) -> dict[str, object]:
    page = api.get("/dashboard/hosts", params={"q": host}).json()
    rows = [r for r in page["rows"] if r["host"] == host]
    assert len(rows) == 1, page
    row: dict[str, object] = rows[0]
    return row


def ticks(api: httpx.Client, count: int, **params: str) -> list[dict[str, object]]:
    """The first ``count`` ticks of the live feed."""
    found: list[dict[str, object]] = []
    with api.stream("GET", "/dashboard/events", params=params) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        event = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "tick":
                found.append(json.loads(line.removeprefix("data: ")))
                if len(found) == count:
                    return found
    raise AssertionError("the feed ended early")


def test_counts_robots_backoff_and_trace(api: httpx.Client, site: Site) -> None:
    with through(api) as client:
        assert client.get(f"{site.origin}/page").status_code == 200
        assert client.get(f"{site.origin}/page").status_code == 429  # 0.7 s not over
        assert client.get(f"{site.origin}/private/a").status_code == 403
        time.sleep(0.75)
        assert client.get(f"{site.origin}/cached").status_code == 200
        assert client.get(f"{site.origin}/cached").status_code == 200  # from the cache
        time.sleep(0.75)
        assert client.get(f"{site.origin}/busy").status_code == 429  # the origin's own
    assert site.requests.count("/cached") == 1 and "/private/a" not in site.requests
    row = row_of(api, "127.0.24.1")
    assert (row["allowed"], row["robotsRefused"], row["delayRefused"], row["cacheHits"]) \
        == (3, 1, 1, 1)
    robots = row["robots"]
    assert isinstance(robots, dict)
    assert robots["code"] == "200" and robots["size"] == len(ROBOTS)
    assert robots["issues"] >= 1 and any("Foo" in line for line in robots["issueLines"])
    assert robots["expiresAt"] > robots["fetchedAt"]
    # The 429 with Retry-After: 30 holds the host: the row says why and until when.
    backoff = row["backoff"]
    assert isinstance(backoff, dict)
    assert "429" in backoff["reason"] and "Retry-After: 30" in backoff["reason"]
    assert row["delaySource"] == "back-off"
    assert 25_000 < int(row["wakesInMs"]) <= 30_000  # type: ignore[call-overload]
    assert abs(float(backoff["until"]) - time.time() - 30) < 5  # type: ignore[arg-type]
    # The trace keeps the last five, newest first, with what became of each.
    trace = api.get("/trace").json()
    assert trace["capacity"] == 5
    seen = [(e["method"], e["url"].removeprefix(site.origin), e["decision"], e["status"])
            for e in trace["exchanges"]]
    assert seen == [("GET", "/busy", "allowed", 429), ("GET", "/cached", "cache", 200),
                    ("GET", "/cached", "allowed", 200), ("GET", "/private/a", "robots", 403),
                    ("GET", "/page", "delay", 429)]
    refused = trace["exchanges"][4]
    assert 0 < refused["delayMs"] <= 700 and refused["durationMs"] >= 0
    assert [e["url"] for e in api.get("/trace", params={"limit": 2}).json()["exchanges"]] \
        == [f"{site.origin}/busy", f"{site.origin}/cached"]
    assert api.get("/trace", params={"limit": "x"}).status_code == 400
    # Prometheus gets the node's totals, never a label per host.
    metrics = api.get("/metrics").text
    assert 'polite_proxy_requests_total{decision="cache"} 1.0' in metrics
    assert "127.0.24.1" not in metrics


def test_env_is_what_was_configured_with_secrets_masked(api: httpx.Client) -> None:
    env = api.get("/env").json()
    assert env["allow_private"] is True and env["trace_size"] == 5
    assert env["default_delay_ms"] == 700 and env["agent"] == "politetest"
    assert env["admin_token"] == "******" and TOKEN not in json.dumps(env)
    assert env["store"].startswith("sqlite:///") and env["mode"] == "reject"
    assert "/env" in api.get("/openapi.json").json()["paths"]
    assert "/trace" in api.get("/openapi.json").json()["paths"]


def test_masked_store_urls() -> None:
    env = masked_env(Settings(store="redis://:hunter2@db.example:6379/0?prefix=p:",
                              admin_token="t"))
    assert env["store"] == "redis://:******@db.example:6379/0?prefix=p:"
    assert env["admin_token"] == "******"
    assert masked_env(Settings(store="redis://user:pw@h:1/0"))["store"] == \
        "redis://user:******@h:1/0"
    assert masked_env(Settings())["admin_token"] is None


def test_the_feed_pushes_rows_and_counters_as_they_change(api: httpx.Client) -> None:
    site = Site("127.0.24.2", {"/robots.txt": Reply(404), "/a": Reply(200, b"a")})
    with serve(site) as s, through(api) as client:
        allowed_at = time.monotonic()
        assert client.get(f"{s.origin}/a").status_code == 200
        first, second = ticks(api, 2, q="127.0.24.2")
        # the host's delay, the adaptive part with it (a busy machine's slow answers lengthen
        # it past the 700 ms configured), has passed
        delay_s = int(row_of(api, "127.0.24.2")["delayMs"]) / 1000  # type: ignore[call-overload]
        time.sleep(max(0.0, allowed_at + delay_s + 0.2 - time.monotonic()))
        assert client.get(f"{s.origin}/a").status_code == 200
        assert client.get(f"{s.origin}/a").status_code == 429
        later = ticks(api, 1, q="127.0.24.2")[0]
    for tick in (first, second, later):
        assert {"summary", "hosts"} <= tick.keys()
    rows = first["hosts"]["rows"]  # type: ignore[index]
    assert [r["host"] for r in rows] == ["127.0.24.2"]
    assert rows[0]["robots"]["code"] == "404" and rows[0]["allowed"] == 1
    assert later["hosts"]["rows"][0]["allowed"] == 2  # type: ignore[index]
    assert later["hosts"]["rows"][0]["delayRefused"] == 1  # type: ignore[index]
    summary = later["summary"]
    assert isinstance(summary, dict)
    assert summary["node"]["requests"] > first["summary"]["node"]["requests"]  # type: ignore[index]
    assert summary["store"].startswith("sqlite:///")
    assert [n["name"] for n in summary["nodes"]] == [summary["node"]["node"]]
    assert any(second.get("refused") for second in summary["timeline"])


def test_a_delay_set_over_the_api_is_in_force_and_shown(api: httpx.Client) -> None:
    with serve(Site("127.0.24.3", {"/robots.txt": Reply(404), "/a": Reply(200)})) as s:
        assert api.put("/delays/127.0.24.3", json={"delay": 2500}).status_code == 401
        assert api.put("/delays/127.0.24.3", json={"delay": 2500},
                       headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        with through(api) as client:
            client.get(f"{s.origin}/a")
        row = row_of(api, "127.0.24.3")
        assert (row["delayMs"], row["delaySource"], row["configuredMs"]) == \
            (2500, "operator", 2500)
        operator = api.get("/dashboard/hosts", params={"state": "operator"}).json()
        assert [r["host"] for r in operator["rows"]] == ["127.0.24.3"]


def test_bad_queries_get_400(api: httpx.Client) -> None:
    for params in ({"sort": "nope"}, {"order": "up"}, {"state": "x"}, {"limit": "100000"},
                   {"offset": "-1"}):
        answer = api.get("/dashboard/hosts", params=params)
        assert answer.status_code == 400, params
        assert "error" in answer.json()


def fill(db: Path, hosts: int) -> None:
    """``hosts`` known hosts written straight into the SQLite store."""
    async def write() -> None:
        store = SQLiteStore(db, time.time)
        now = time.time()
        await store.add_activity([
            HostActivity(f"h{n:05d}.example", allowed=n % 997, robots_refused=n % 7,
                         delay_refused=n % 13, cache_hits=n % 5, last_seen=now - n,
                         origin=f"https://h{n:05d}.example", delay_s=1 + n % 30,
                         delay_source="Crawl-delay", robots_status="200")
            for n in range(hosts)])
        await store.set_delay("h00042.example", 9.0)
        await store.close()
    # A thread of its own: a test driving the browser has an event loop running already.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write()).result()


def test_ten_thousand_hosts_page_sort_and_filter(tmp_path: Path) -> None:
    db = tmp_path / "polite.sqlite"
    fill(db, 10_000)
    with polite_serve("--store", f"sqlite:///{db}") as api:
        page = api.get("/dashboard/hosts", params={"sort": "allowed", "limit": 100}).json()
        assert (page["total"], page["known"], len(page["rows"])) == (10_000, 10_000, 100)
        counts = [r["allowed"] for r in page["rows"]]
        assert counts == sorted(counts, reverse=True) and counts[0] == 996
        # Ties are broken by the host, so pages follow on without overlap.
        again = api.get("/dashboard/hosts", params={"sort": "allowed", "limit": 100,
                                                    "offset": 100}).json()
        first_hosts = {r["host"] for r in page["rows"]}
        assert not first_hosts & {r["host"] for r in again["rows"]}
        assert again["rows"][0]["allowed"] <= counts[-1]
        by_host = api.get("/dashboard/hosts", params={"sort": "host", "order": "asc",
                                                      "offset": 9_990}).json()
        assert [r["host"] for r in by_host["rows"]] == \
            [f"h{n:05d}.example" for n in range(9_990, 10_000)]
        found = api.get("/dashboard/hosts", params={"q": "h0004", "sort": "host",
                                                    "order": "asc"}).json()
        assert found["total"] == 10 and found["rows"][2]["host"] == "h00042.example"
        assert found["rows"][2]["delayMs"] == 9000  # the operator's, looked at closely
        assert found["rows"][2]["robots"] is None  # never fetched: nothing invented
        assert found["rows"][2]["wakesInMs"] == 0  # no slot taken: it may go now


def test_nodes_sharing_redis_add_up_per_host(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url, \
            serve(Site("127.0.24.4", {"/robots.txt": Reply(404), "/a": Reply(200)})) as s:
        store = f"{url}?prefix=dash:"
        with polite_serve("--store", store, "--allow-private", "--node", "one") as one, \
                polite_serve("--store", store, "--allow-private", "--node", "two") as two:
            with through(one) as a, through(two) as b:
                assert a.get(f"{s.origin}/a").status_code == 200
                assert b.get(f"{s.origin}/a").status_code == 429  # the slot is shared
                time.sleep(1.1)
                assert b.get(f"{s.origin}/a").status_code == 200
            deadline = time.monotonic() + 10
            while True:  # each node flushes its counts once a second
                rows = [row_of(api, "127.0.24.4") for api in (one, two)]
                if all((r["allowed"], r["delayRefused"]) == (2, 1) for r in rows):
                    break
                assert time.monotonic() < deadline, rows
                time.sleep(0.2)
            nodes = [n["name"] for n in one.get("/dashboard/summary").json()["nodes"]]
            assert nodes == ["one", "two"]
        # A node that stops leaves the list at once (its last beat expires as it goes).
        with polite_serve("--store", store, "--node", "three") as three:
            nodes = [n["name"] for n in three.get("/dashboard/summary").json()["nodes"]]
            assert nodes == ["three"]

"""The politeness service over real HTTP: its server on loopback, origin sites on 127.0.0.x."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from polite.api import create_app
from polite.clock import WallClock
from polite.fetch.politeness import Politeness
from polite.fetch.robots import RobotsFetcher, create_client
from polite.fetch.trust import client_context
from polite.proxy import ProxyServer, ProxySettings
from polite.storage import SQLiteStore
from tests.commands import command_line
from tests.sites import Reply, Site, serve


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def service(db: Path, *, default_delay_ms: int = 1000, admin_token: str | None = None,
            private_reads: bool = False, proxy: ProxySettings | None = None
            ) -> Iterator[httpx.Client]:
    clock = WallClock()
    store = SQLiteStore(db, clock)
    client = create_client()
    fetcher = RobotsFetcher(client, store, clock, agent="politetest", allow_private=True)
    politeness = Politeness(fetcher, store, clock, agent="politetest",
                            default_delay_s=default_delay_ms / 1000, allow_private=True)

    async def shutdown() -> None:
        await client.aclose()
        await store.close()

    app = create_app(politeness, store, admin_token=admin_token, on_shutdown=shutdown,
                     private_reads=private_reads)
    server = ProxyServer(politeness, app, settings=proxy)
    loop = asyncio.new_event_loop()
    port = loop.run_until_complete(server.start("127.0.0.1", 0))
    running = loop.create_task(server.serve_forever())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def stop() -> None:
        running.cancel()
        await server.close()

    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                          timeout=10, verify=client_context()) as http:
            yield http
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_seed_001_listing_8(tmp_path: Path) -> None:
    robots = Reply(200, b"User-agent: *\nDisallow: /suche/\n")
    with serve(Site("127.0.0.20", {"/robots.txt": robots})) as site, \
            service(tmp_path / "p.sqlite") as api:
        urls = [f"{site.origin}/Lifestyle", f"{site.origin}/Karriere",
                f"{site.origin}/suche/12312"]
        verdicts = api.post("/politeness/verbose", json=urls).json()
        assert verdicts[0] == {"url": urls[0], "allowed": True, "error": None, "retryAfter": -1}
        assert verdicts[1]["allowed"] is False
        assert verdicts[1]["retryAfter"] == 1000
        assert "There must be a delay of 1000 milliseconds" in verdicts[1]["error"]
        assert verdicts[2]["allowed"] is False and verdicts[2]["retryAfter"] == -1
        assert "Disallow: /suche/ (line 2)" in verdicts[2]["error"]
        assert api.post("/politeness", json=urls).json() == [urls[0]]
        assert api.get("/politeness", params={"urls": ",".join(urls)}).json() == [urls[0]]
        assert site.requests == ["/robots.txt"]


def test_reserve_takes_the_slot_and_robots_delays_count(tmp_path: Path) -> None:
    robots = Reply(200, b"User-agent: *\nCrawl-delay: 3\n")
    with serve(Site("127.0.0.21", {"/robots.txt": robots})) as site, \
            service(tmp_path / "p.sqlite") as api:
        url = f"{site.origin}/page"
        first = api.post("/politeness/verbose?reserve=true", json=[url]).json()[0]
        assert first["allowed"]
        second = api.post("/politeness/verbose", json=[url]).json()[0]
        assert not second["allowed"] and 2000 < second["retryAfter"] <= 3000
        assert "Crawl-delay" in second["error"]
        delays = api.get("/delays").json()
        assert delays == [{"domain": "127.0.0.21", "delay": 3000, "robotstxt_delay": 3000,
                           "configured_delay": None}]


def test_regp_section_5_delays_per_path(tmp_path: Path) -> None:
    body = (b"Robot-version: 3.0\n\nUser-agent: *\nDisallow: /login.do\nRequest-rate: 120/m\n"
            b"{\n  Allow: /html/\n  Crawl-delay: 1\n}\n")
    with serve(Site("127.0.0.22", {"/robots.txt": Reply(200, body)})) as site, \
            service(tmp_path / "p.sqlite", default_delay_ms=0) as api:
        home = f"{site.origin}/"
        page = f"{site.origin}/html/news1.html"
        assert api.post("/politeness/verbose?reserve=true", json=[home]).json()[0]["allowed"]
        after_home = api.post("/politeness/verbose", json=[home, page]).json()
        assert 0 < after_home[0]["retryAfter"] <= 500
        assert 500 < after_home[1]["retryAfter"] <= 1000  # the /html/ block asks for 1 s


def test_runtime_delay_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "p.sqlite"
    with service(db) as api:
        answer = api.put("/delays/Example.COM", json={"delay": 2500})
        assert answer.status_code == 200
    with service(db) as api:
        assert api.get("/delays").json() == [{"domain": "example.com", "delay": 2500,
                                              "robotstxt_delay": None,
                                              "configured_delay": 2500}]


def test_admin_token(tmp_path: Path) -> None:
    with service(tmp_path / "p.sqlite", admin_token="s3cret") as api:
        assert api.put("/delays/e.com", json={"delay": 10}).status_code == 401
        ok = api.put("/delays/e.com", json={"delay": 10},
                     headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/politeness", b"{not json", 400),
        ("POST", "/politeness", b'{"urls": []}', 400),
        ("POST", "/politeness/verbose", b"[1, 2]", 400),
        ("GET", "/politeness", None, 400),
        ("PUT", "/delays/e.com", b'{"delay": -5}', 400),
        ("PUT", "/delays/e.com", b'{"delay": "fast"}', 400),
        ("POST", "/politeness", b"[" + b",".join([b'"http://e.com/x"'] * 10_000) + b"]", 413),
    ],
)
def test_bad_input_gets_a_clear_4xx(tmp_path: Path, method: str, path: str,
                                    body: bytes | None, status: int) -> None:
    with service(tmp_path / "p.sqlite") as api:
        answer = api.request(method, path, content=body)
        assert answer.status_code == status
        assert answer.json()["error"]
        assert api.get("/health").json() == {"status": "ok"}


# 1 MiB bodies no endpoint reads, which the JSON parser turned into 300,000 objects or so
# (100 to 230 ms of the event loop's time, in one hold) before the endpoint looked at them.
_WIDE = b"[" + b",".join([b"[]"] * 300_000) + b"]"
_NESTED = b"[" + b",".join([b"[[],[]]"] * 100_000) + b"]"
_OBJECTS = b"[" + b",".join([b"{}"] * 300_000) + b"]"
_STRINGS = b"[" + b",".join([b'"ab"'] * 200_000) + b"]"


@pytest.mark.parametrize(("path", "body", "status", "said"), [
    ("/politeness/verbose", _WIDE, 400, "nested deeper than 1 at line 1"),
    ("/politeness", _NESTED, 400, "nested deeper than 1 at line 1"),
    ("/politeness/verbose", _STRINGS, 413, "more than 1000 items at line 1; at most 1000"),
    ("/politeness/feedback", _OBJECTS, 413, "more than 7000 items at line 1; at most 7000"),
    ("/politeness/feedback", _NESTED, 400, "nested deeper than 2 at line 1"),
])
def test_a_body_over_its_endpoints_bounds_is_refused_before_it_is_parsed(
        tmp_path: Path, path: str, body: bytes, status: int, said: str) -> None:
    """Counted, not timed: what the service allocates while it answers (the parser's
    objects, 20 MB or more for each of these bodies, against a few copies of the body)."""
    with service(tmp_path / "p.sqlite") as api:
        tracemalloc.start()
        try:
            answer = api.post(path, content=body)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8 * 1024 * 1024, peak
        assert (answer.status_code, answer.json()["status"]) == (status, status), answer.text
        assert said in answer.json()["error"], answer.json()
        assert api.get("/health").json() == {"status": "ok"}


def test_non_urls_and_schemes_get_verdicts(tmp_path: Path) -> None:
    with service(tmp_path / "p.sqlite") as api:
        verdicts = api.post("/politeness/verbose",
                            json=["ftp://e.com/x", "not a url", "http://"]).json()
        assert [v["allowed"] for v in verdicts] == [False, False, False]
        assert all(v["retryAfter"] == -1 and v["error"] for v in verdicts)


def test_metrics_and_openapi(tmp_path: Path) -> None:
    with service(tmp_path / "p.sqlite") as api:
        api.post("/politeness/verbose", json=["ftp://e.com/x"])
        text = api.get("/metrics").text
        assert 'polite_decisions_total{result="refused"} 1.0' in text
        spec = api.get("/openapi.json").json()
        assert {"/politeness", "/politeness/verbose", "/delays"} <= set(spec["paths"])


def test_polite_serve_as_a_newcomer_runs_it(tmp_path: Path) -> None:
    port = free_port()
    command = command_line("serve", "--port", str(port), "--store",
                           f"sqlite:///{tmp_path / 'serve.sqlite'}")
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert f"listening on http://127.0.0.1:{port}" in line
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as api:
                deadline = time.monotonic() + 15
                while True:
                    try:
                        if api.get("/health").status_code == 200:
                            break
                    except httpx.TransportError:
                        assert time.monotonic() < deadline
                        time.sleep(0.1)
                answer = api.post("/politeness/verbose", json=["http://127.0.0.23/x"])
                verdict = answer.json()[0]
                assert not verdict["allowed"] and "private or loopback" in verdict["error"]
        finally:
            process.terminate()
            process.wait(10)


def test_serve_refuses_open_writes_on_a_public_interface() -> None:
    done = subprocess.run(command_line("serve", "--host", "0.0.0.0", "--store", "memory://"),
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert "--admin-token" in done.stderr


def test_a_back_off_is_named_as_the_cause_and_so_is_every_delay_source(tmp_path: Path) -> None:
    robots = Reply(200, b"User-agent: *\nCrawl-delay: 2\n")
    with serve(Site("127.0.0.27", {"/robots.txt": robots})) as site, \
            service(tmp_path / "p.sqlite") as api:
        urls = [f"{site.origin}/a", f"{site.origin}/b"]
        first, second = api.post("/politeness/verbose", json=urls).json()
        assert first["allowed"] is True
        # The refusal after the first URL of a host names the delay's source too.
        assert "(robots.txt Crawl-delay)" in second["error"]
        api.post("/politeness/feedback", json=[{"url": urls[0], "status": 503,
                                                 "retryAfter": 20}])
        (held,) = api.post("/politeness/verbose", json=[urls[1]]).json()
        assert held["allowed"] is False
        assert 18_000 <= held["retryAfter"] <= 20_000
        assert "back-off" in held["error"] and "429 or 503" in held["error"]
        assert "Crawl-delay" not in held["error"] and "default delay" not in held["error"]


def test_delays_after_a_restart_show_what_the_store_knows(tmp_path: Path) -> None:
    robots = Reply(200, b"User-agent: *\nCrawl-delay: 3\n")
    with serve(Site("127.0.0.28", {"/robots.txt": robots})) as site:
        with service(tmp_path / "p.sqlite") as api:
            api.put("/delays/127.0.0.28", json={"delay": 1500})
            api.post("/politeness/verbose", json=[f"{site.origin}/a"])
            before = api.get("/delays").json()
        with service(tmp_path / "p.sqlite") as api:  # a restart: nothing asked since
            after = api.get("/delays").json()
    row = {"domain": "127.0.0.28", "delay": 3000, "robotstxt_delay": 3000,
           "configured_delay": 1500}
    assert before == after == [row]


def test_delays_are_whole_milliseconds_and_metrics_count(tmp_path: Path) -> None:
    with service(tmp_path / "p.sqlite") as api:
        refused = api.put("/delays/e.com", json={"delay": 1.5})
        assert refused.status_code == 400 and "whole milliseconds" in refused.text
        assert api.put("/delays/e.com", json={"delay": 1500.0}).json() == {
            "domain": "e.com", "configured_delay": 1500}
        assert api.get("/delays").json()[0]["configured_delay"] == 1500
        text = api.get("/metrics").text
    assert "# TYPE polite_robots_fetches_total counter" in text or \
        "# TYPE polite_robots_fetches counter" in text
    assert "\npolite_robots_fetches_total 0.0" in text


def test_verbose_answers_carry_the_decision_as_a_value_when_asked(tmp_path: Path) -> None:
    """``?decision=true`` adds each answer's decision as a value (what the drop-ins act on
    against a running service); without it, seed 001's shape is unchanged."""
    robots = Reply(200, b"Robot-version: 3.0\nUser-agent: *\nAllow: /\nDisallow: /x\n"
                        b"Crawl-delay: 2\n")
    with serve(Site("127.0.83.10", {"/robots.txt": robots})) as site, \
            service(tmp_path / "p.sqlite") as api:
        urls = [f"{site.origin}/x", f"{site.origin}/a", f"{site.origin}/b", "ftp://e.com/"]
        plain = api.post("/politeness/verbose", json=urls).json()
        assert [sorted(item) for item in plain] == [["allowed", "error", "retryAfter", "url"]] * 4
        found = api.post("/politeness/verbose?decision=true&reserve=true", json=urls).json()
    assert [item["decision"] for item in found] == [
        {"kind": "disallowed", "pattern": "/x", "line": 4, "dialect": "regp",
         "explanation": "Disallow: /x (line 4)"},
        {"kind": "allowed"},
        {"kind": "wait", "source": "crawl_delay", "line": 5},
        {"kind": "refused", "reason": "invalid_url"}]
    assert found[0]["error"] == "Blocked by robots.txt: Disallow: /x (line 4)"

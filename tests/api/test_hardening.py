"""The REST service's edges: secrets in what it prints, hosts that cannot be hosts, bodies
and batches bounded, parameters read strictly, its own metrics apart from the proxy's."""

from __future__ import annotations

import json
import select
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from tests.api.test_service import service
from tests.commands import command_line
from tests.redis_server import redis_server
from tests.serving import free_port, polite_serve, through
from tests.sites import Reply, Site, serve

LONG_LABEL = "a" * 64
# A URL the service refuses without a lookup (loopback, and no --allow-private).
NOWHERE = "http://127.0.0.1:9/"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """The defaults (no --allow-private: every host is looked up before it is asked)."""
    db = tmp_path_factory.mktemp("hard") / "polite.sqlite"
    with polite_serve("--store", f"sqlite:///{db}") as client:
        yield client


def test_the_start_up_line_masks_the_redis_password(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        client = redis.Redis.from_url(url)
        client.config_set("requirepass", "s3cret-pass")
        client.close()
        store = url.replace("redis://", "redis://:s3cret-pass@")
        port = free_port()
        command = command_line("serve", "--port", str(port), "--store", store)
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) as process:
            try:
                assert process.stdout is not None
                line = process.stdout.readline()
                assert f"listening on http://127.0.0.1:{port}" in line, process.stderr
                assert "s3cret-pass" not in line
                assert "redis://:******@127.0.0.1:" in line
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                                  timeout=10) as api:
                    deadline = time.monotonic() + 15
                    while True:
                        try:
                            answer = api.get("/health")
                            break
                        except httpx.TransportError:
                            assert time.monotonic() < deadline
                            time.sleep(0.05)
                    assert answer.status_code == 200  # the password did reach Redis
            finally:
                process.terminate()
                process.wait(10)


@pytest.mark.parametrize(
    ("method", "path", "options", "named"),
    [
        ("POST", "/politeness/verbose", {"json": [f"http://{LONG_LABEL}.com/x"]}, "63"),
        ("POST", "/politeness", {"json": [f"http://{LONG_LABEL}.com/x"]}, "63"),
        ("GET", "/politeness", {"params": {"urls": f"http://{LONG_LABEL}.com/x"}}, "63"),
        ("GET", "/sitemaps", {"params": {"site": f"http://{LONG_LABEL}.com"}}, "63"),
        ("POST", "/politeness/feedback",
         {"json": [{"url": f"http://{LONG_LABEL}.com/x", "status": 503}]}, "63"),
        # a netloc that NFKC normalisation would change: urlsplit's ValueError
        ("POST", "/politeness/feedback",
         {"json": [{"url": "http://ex\uff03ample.com/", "status": 503}]}, "'url'"),
        ("POST", "/politeness/verbose",
         {"content": b"[" * 100_000 + b"]" * 100_000}, "nested"),
        ("POST", "/politeness/feedback",
         {"content": b"[" * 100_000 + b"]" * 100_000}, "nested"),
    ],
)
def test_inputs_that_crashed_get_a_clear_400(api: httpx.Client, method: str, path: str,
                                             options: dict[str, object], named: str) -> None:
    answer = api.request(method, path, **options)  # type: ignore[arg-type]
    assert answer.status_code == 400, answer.text
    assert named in answer.json()["error"]
    assert api.get("/health").json() == {"status": "ok"}


@pytest.mark.parametrize("domain", ["not%20a%20host", f"{LONG_LABEL}.com", "a..b", "e.com%3A80"])
def test_a_delay_for_what_cannot_be_a_host_is_refused(api: httpx.Client, domain: str) -> None:
    answer = api.put(f"/delays/{domain}", json={"delay": 5})
    assert answer.status_code == 400, answer.text
    assert "host" in answer.json()["error"]
    listed = {row["domain"] for row in api.get("/delays").json()}
    assert not any(" " in name or ".." in name or len(name) > 63 for name in listed), listed
    ok = api.put("/delays/b\u00fccher.example", json={"delay": 5})
    assert ok.status_code == 200


def test_rest_decisions_have_their_own_series_in_metrics(tmp_path: Path) -> None:
    routes = {"/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"), "/a": Reply(200, b"a")}
    with serve(Site("127.0.31.1", routes)) as site, \
            polite_serve("--store", "memory://", "--allow-private") as api:
        verdicts = api.post("/politeness/verbose",
                            json=[f"{site.origin}/a", f"{site.origin}/b"]).json()
        assert [v["allowed"] for v in verdicts] == [True, False]
        text = api.get("/metrics").text
        assert 'polite_api_decisions_total{decision="allowed"} 1.0' in text
        assert 'polite_api_decisions_total{decision="delay"} 1.0' in text
        assert "polite_proxy_requests_total{" not in text  # no proxy traffic yet
        with through(api) as client:
            assert client.get(f"{site.origin}/a").status_code == 200  # nothing reserved
        text = api.get("/metrics").text
        assert 'polite_proxy_requests_total{decision="allowed"} 1.0' in text
        assert 'polite_proxy_requests_total{decision="delay"}' not in text
        assert 'polite_api_decisions_total{decision="allowed"} 1.0' in text


# Every endpoint, with what it needs to answer 200 (or 204) when its query is right.
ENDPOINTS = [
    ("POST", "/politeness", {"json": []}),
    ("GET", "/politeness", {"params": {"urls": NOWHERE}}),
    ("POST", "/politeness/verbose", {"json": []}),
    ("POST", "/politeness/feedback", {"json": []}),
    ("GET", "/delays", {}),
    ("PUT", "/delays/e.com", {"json": {"delay": 5}}),
    ("DELETE", "/delays/e.com", {}),
    ("GET", "/sitemaps", {"params": {"site": NOWHERE}}),
    ("GET", "/health", {}),
    ("GET", "/metrics", {}),
    ("GET", "/openapi.json", {}),
    ("GET", "/env", {}),
    ("GET", "/trace", {}),
    ("GET", "/", {}),
    ("GET", "/dashboard", {}),
    ("GET", "/dashboard/static/dashboard.js", {}),
    ("GET", "/dashboard/hosts", {}),
    ("GET", "/dashboard/summary", {}),
    ("GET", "/dashboard/events", {}),
]


def _described(api: httpx.Client) -> dict[tuple[str, str], set[str]]:
    """(method, path) -> the query parameters /openapi.json gives it."""
    paths = api.get("/openapi.json").json()["paths"]
    return {(method.upper(), path.replace("{domain}", "e.com")
             .replace("{name}", "dashboard.js")):
            {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            for path, item in paths.items() for method, operation in item.items()}


def test_the_list_of_endpoints_is_the_described_one(api: httpx.Client) -> None:
    assert set(_described(api)) == {(method, path) for method, path, _ in ENDPOINTS}


@pytest.mark.parametrize(("method", "path", "options"), ENDPOINTS,
                         ids=[f"{m} {p}" for m, p, _ in ENDPOINTS])
def test_each_endpoint_reads_the_query_parameters_it_is_described_with(
        api: httpx.Client, method: str, path: str, options: dict[str, object]) -> None:
    """The names an endpoint reads, as its own 400 for an unknown one lists them, are
    those /openapi.json describes: the document cannot drift from the service."""
    params = {**options.pop("params", {}), "reserv": "true"}  # type: ignore[dict-item]
    with api.stream(method, path, params=params, **options) as answer:  # type: ignore[arg-type]
        error = json.loads(answer.read())["error"]
    reads = error.partition("; it reads ")[2]
    named = set() if reads in ("", "none") else set(reads.split(", "))
    assert named == _described(api)[(method, path)], error


@pytest.mark.parametrize(("method", "path", "options"), ENDPOINTS,
                         ids=[f"{m} {p}" for m, p, _ in ENDPOINTS])
def test_a_query_parameter_no_endpoint_reads_is_a_400_naming_it(
        api: httpx.Client, method: str, path: str, options: dict[str, object]) -> None:
    params = {**options.pop("params", {}), "reserv": "true"}  # type: ignore[dict-item]
    # Streamed: the live feed, when it takes the query, answers for as long as it is read.
    with api.stream(method, path, params=params, **options) as answer:  # type: ignore[arg-type]
        assert answer.status_code == 400, answer.headers
        assert "'reserv'" in json.loads(answer.read())["error"]


@pytest.mark.parametrize("path", ["/politeness", "/politeness/verbose"])
@pytest.mark.parametrize(("query", "named"), [
    ("reserve=ture", "'reserve'"), ("reserve=maybe", "'reserve'"), ("reserve=", "'reserve'"),
    ("reserve=true&reserve=false", "'reserve'"), ("ip=10.0.0.300", "'ip'"),
])
def test_a_value_the_api_cannot_read_is_a_400_naming_it(api: httpx.Client, path: str,
                                                       query: str, named: str) -> None:
    answer = api.post(f"{path}?{query}", json=[NOWHERE])
    assert answer.status_code == 400, answer.text
    assert named in answer.json()["error"]


def test_reserve_misspelt_no_longer_lets_two_calls_through(tmp_path: Path) -> None:
    routes = {"/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n")}
    with serve(Site("127.0.31.2", routes)) as site, \
            polite_serve("--store", "memory://", "--allow-private") as api:
        url = f"{site.origin}/a"
        for value in ("ture", "maybe"):
            answer = api.post(f"/politeness/verbose?reserve={value}", json=[url])
            assert answer.status_code == 400 and "reserve" in answer.json()["error"]
        first, second = (api.post("/politeness/verbose?reserve=TRUE", json=[url]).json()
                         for _ in range(2))
        assert first[0]["allowed"] is True
        assert second[0]["allowed"] is False and second[0]["retryAfter"] > 0


@pytest.mark.parametrize(("path", "body", "named"), [
    ("/delays/e.com", {"delay": 5, "dealy": 7}, "'dealy'"),
])
def test_a_key_a_body_does_not_have_is_a_400_naming_it(api: httpx.Client, path: str,
                                                      body: object, named: str) -> None:
    answer = api.put(path, json=body)
    assert answer.status_code == 400 and named in answer.json()["error"], answer.text


def test_a_feedback_key_it_does_not_read_is_a_400_naming_it(api: httpx.Client) -> None:
    answer = api.post("/politeness/feedback",
                      json=[{"url": "http://e.com/", "status": 503, "retry_after": 60}])
    assert answer.status_code == 400 and "'retry_after'" in answer.json()["error"]


def _answer_while_sending(api: httpx.Client, head: bytes, pieces: Iterator[bytes],
                          timeout_s: float = 10) -> tuple[bytes, int]:
    """``head``, then ``pieces`` one by one for as long as the server reads them; what it
    answered (read to its close) and how many body bytes went before the answer came."""
    sent = 0
    with socket.create_connection(("127.0.0.1", int(api.base_url.port or 0)),
                                  timeout=timeout_s) as sock:
        sock.sendall(head)
        got = b""
        for piece in pieces:
            if select.select([sock], [], [], 0)[0]:
                break  # an answer came: stop sending
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass  # the 413 came first; the reset is for the bytes left unread
        return got, sent


def test_an_api_body_declared_too_large_is_refused_before_it_is_read(
        api: httpx.Client) -> None:
    head = (b"POST /politeness/verbose HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 15728640\r\n\r\n")
    started = time.monotonic()
    got, _ = _answer_while_sending(api, head, iter([]))
    assert got.startswith(b"HTTP/1.1 413 "), got[:200]
    assert b"at most 1048576" in got
    assert time.monotonic() - started < 5  # at once, not when the client gives up
    assert api.get("/health").status_code == 200


def test_a_chunked_api_body_is_cut_off_past_the_limit(api: httpx.Client) -> None:
    head = (b"POST /politeness/verbose HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"10000\r\n" + b" " * 0x10000 + b"\r\n"  # 64 KiB a chunk, no end

    def pieces() -> Iterator[bytes]:
        for _ in range(16 * 16):  # up to 16 MiB, what was read before
            time.sleep(0.002)
            yield piece

    got, sent = _answer_while_sending(api, head, pieces())
    assert got.startswith(b"HTTP/1.1 413 "), got[:200]
    # Cut off past 1 MiB: what was still sent is what the socket buffers held, far from 16.
    assert sent < 8 * 1024 * 1024, sent
    assert api.get("/health").status_code == 200


# robots.txt matching costs rules x URL length: a file of many wildcard rules no URL below
# matches (each needs a b and a number), against URLs as long as the API takes.
HOSTILE_ROBOTS = ("User-agent: *\n" + "".join(f"Disallow: /*a*a*a*a*a*b{i}\n"
                                              for i in range(12_000))).encode()


def test_a_long_batch_does_not_stall_the_service(tmp_path: Path) -> None:
    routes = {"/robots.txt": Reply(200, HOSTILE_ROBOTS)}
    with serve(Site("127.0.31.3", routes)) as site, \
            polite_serve("--store", "memory://", "--allow-private") as api:
        # robots.txt fetched and its rules made ready once, before the measure
        assert api.post("/politeness/verbose", json=[f"{site.origin}/a"]).status_code == 200
        # /health's own time here and now, with no batch: on a loaded machine the scheduler
        # adds to every answer, batch or not
        idle = []
        for _ in range(10):
            sent = time.monotonic()
            assert api.get("/health").status_code == 200
            idle.append(time.monotonic() - sent)
        long = f"{site.origin}/" + "a" * (2000 - len(site.origin))
        # 120 of them: a batch of seconds (2.5 s on a slow two-core machine), long enough
        # for a score of probes at 50 ms apart
        urls = [f"{long}{n}" for n in range(120)]
        done: list[float] = []

        def big_call() -> None:
            with httpx.Client(base_url=api.base_url, trust_env=False, timeout=120) as other:
                answer = other.post("/politeness/verbose", json=urls)
            assert answer.status_code == 200
            done.append(time.monotonic())

        caller = threading.Thread(target=big_call)
        started = time.monotonic()
        caller.start()
        time.sleep(0.3)  # the call is in
        latencies = []
        while not done and time.monotonic() - started < 120:
            sent = time.monotonic()
            assert api.get("/health").status_code == 200
            if not done:  # answered while the batch was still being decided
                latencies.append(time.monotonic() - sent)
            time.sleep(0.05)
        caller.join(120)
        assert done, "the batch got no answer"
        # Several probes were answered in the batch's time, and most of them quickly: the
        # batch adds less than 50 ms to the median answer, or, on a machine so loaded that
        # the batch itself crawls, less than a twentieth of the batch's time (before, none
        # was answered until the batch's end: a probe waited half the batch on the median).
        batch_s = done[0] - started
        assert len(latencies) >= 5, (len(latencies), batch_s)
        assert statistics.median(latencies) < max(0.05 + statistics.median(idle),
                                                  batch_s / 20), (latencies, idle, batch_s)


def test_the_bounds_of_a_call_are_named(api: httpx.Client) -> None:
    too_long = "http://127.0.0.1:9/" + "a" * 2048
    answer = api.post("/politeness/verbose", json=[too_long])
    assert answer.status_code == 414 and "at most 2048" in answer.json()["error"]
    answer = api.get("/politeness", params={"urls": too_long})
    assert answer.status_code == 414 and "at most 2048" in answer.json()["error"]
    answer = api.post("/politeness/feedback", json=[{"url": too_long, "status": 200}])
    assert answer.status_code == 414 and "at most 2048" in answer.json()["error"]
    answer = api.post("/politeness/verbose", json=[NOWHERE] * 1001)
    assert answer.status_code == 413 and "at most 1000" in answer.json()["error"]


PRIVATE = ["/trace", "/env", "/delays", "/dashboard", "/dashboard/hosts",
           "/dashboard/summary", "/metrics", f"/politeness?urls={NOWHERE}"]
# Decisions beyond loopback: what a client may fetch is the token's holders' business too.
DECISIONS = [("POST", "/politeness", [NOWHERE]), ("POST", "/politeness/verbose", [NOWHERE]),
             ("GET", "/sitemaps?site=http://127.0.0.1:9", None)]


def test_beyond_loopback_decisions_and_what_clients_fetch_need_the_token(
        tmp_path: Path) -> None:
    with service(tmp_path / "p.sqlite", admin_token="T0ken", private_reads=True) as api:
        bearer = {"Authorization": "Bearer T0ken"}
        for path in PRIVATE:
            answer = api.get(path)
            assert answer.status_code == 401, (path, answer.text)
            assert api.get(path, headers=bearer).status_code == 200
        for method, path, body in DECISIONS:
            answer = api.request(method, path, json=body)
            assert answer.status_code == 401, (path, answer.text)
            assert api.request(method, path, json=body, headers=bearer).status_code != 401
        with api.stream("GET", "/dashboard/events") as feed:
            assert feed.status_code == 401
        # What is no one's business stays open: liveness, the description, the index.
        for path in ("/health", "/openapi.json", "/"):
            assert api.get(path).status_code == 200, path
        assert api.get("/dashboard", params={"token": "wrong"}).status_code == 401
        # A token that is not ASCII is a wrong token, not a fault.
        assert api.get("/dashboard", params={"token": "\u00e9t\u00e9"}).status_code == 401
        assert api.get("/trace", headers={"Authorization": "Bearer \u00e9t\u00e9".encode()}
                       ).status_code == 401
        # The dashboard opened once with its token: a session cookie for its own requests,
        # which is not the token (cookies are not kept per port) and ends.
        opened = api.get("/dashboard", params={"token": "T0ken"})
        assert opened.status_code == 303 and opened.headers["location"] == "/dashboard"
        cookie = opened.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert "max-age=28800" in cookie and "t0ken" not in cookie
        assert "T0ken" not in str(api.cookies)
        for path in PRIVATE:
            assert api.get(path).status_code == 200, path  # the client keeps the cookie
        # A session value of its own making is refused.
        api.cookies.clear()
        api.cookies.set("polite_session", "99999999999." + "0" * 64)
        assert api.get("/trace").status_code == 401
        api.cookies.set("polite_session", "T0ken")
        assert api.get("/trace").status_code == 401


def test_with_a_token_every_write_needs_it(tmp_path: Path) -> None:
    with service(tmp_path / "p.sqlite", admin_token="T0ken") as api:
        report = [{"url": "http://127.0.0.1:9/", "status": 503, "retryAfter": 60}]
        writes = [("POST", "/politeness/feedback", report),
                  ("POST", "/politeness/verbose?reserve=true", [NOWHERE]),
                  ("POST", "/politeness?reserve=1", [NOWHERE]),
                  ("PUT", "/delays/e.com", {"delay": 5}), ("DELETE", "/delays/e.com", None)]
        for method, path, body in writes:
            assert api.request(method, path, json=body).status_code == 401, path
            given = api.request(method, path, json=body,
                                headers={"Authorization": "Bearer T0ken"})
            assert given.status_code in (200, 204), (path, given.text)
        # Deciding without reserving changes nothing: open, as are reads on loopback.
        assert api.post("/politeness/verbose", json=[NOWHERE]).status_code == 200
        assert api.get("/trace").status_code == 200
        # And with the token, a browser page of another origin is still refused.
        crossed = api.post("/politeness/feedback", json=report, headers={
            "Authorization": "Bearer T0ken", "Origin": "http://127.0.32.1:8000"})
        assert crossed.status_code == 403


@pytest.mark.parametrize("command", [["serve", "--store", "memory://"],
                                     ["site", "serve", "--db", "site.sqlite"]])
def test_an_allowed_host_that_is_no_host_name_is_refused(tmp_path: Path,
                                                         command: list[str]) -> None:
    done = subprocess.run(command_line(*command, "--port", str(free_port()), "--allowed-host",
                                       "not a host"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2, done.stderr
    assert "--allowed-host 'not a host'" in done.stderr
    assert "Traceback" not in done.stderr

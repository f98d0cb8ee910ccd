"""``polite serve`` started as a user starts it (a real process), asked over HTTP about real
sites on loopback: every row of the fetch status table, every source of delay, a config
file, and two nodes sharing one politeness state through a real redis-server."""

from __future__ import annotations

import datetime as dt
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.commands import command_line
from tests.redis_server import redis_server
from tests.serving import free_port, polite_serve
from tests.sites import Reply, Site, serve


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    db = tmp_path_factory.mktemp("serve") / "polite.sqlite"
    with polite_serve("--store", f"sqlite:///{db}", "--allow-private") as client:
        yield client


def verdict(api: httpx.Client, url: str, **params: str) -> dict[str, object]:
    answer = api.post("/politeness/verbose", json=[url], params=params)
    assert answer.status_code == 200, answer.text
    result: dict[str, object] = answer.json()[0]
    return result


def redirects(count: int, final: Reply) -> dict[str, Reply]:
    routes = {f"/r{n}": Reply(302, headers={"Location": f"/r{n + 1}"}) for n in range(count)}
    routes["/robots.txt"] = Reply(301, headers={"Location": "/r0"}) if count else final
    routes[f"/r{count}"] = final
    return routes


ROBOTS = Reply(200, b"User-agent: *\nDisallow: /private\n")
HTML = Reply(200, b"<!DOCTYPE html><html><head><title>Home</title></head><body>Hi</body>"
                  b"</html>", {"Content-Type": "text/html"})

# (address, routes, allowed, error contains, waiting helps): DESIGN.md's status table.
STATUS_TABLE = [
    ("127.0.1.1", {"/robots.txt": ROBOTS}, True, None, None),
    # read through four hops, each a request to the host in its turn: the page waits the
    # delay after the last one
    ("127.0.1.2", redirects(4, ROBOTS), False, "(default delay)", True),
    ("127.0.1.3", redirects(5, ROBOTS), False, "redirects", True),
    ("127.0.1.4", {"/robots.txt": Reply(401)}, False, "401", True),
    ("127.0.1.5", {"/robots.txt": Reply(403)}, False, "403", True),
    ("127.0.1.6", {"/robots.txt": Reply(404)}, True, None, None),
    ("127.0.1.7", {"/robots.txt": Reply(410)}, True, None, None),
    ("127.0.1.8", {"/robots.txt": Reply(429, headers={"Retry-After": "600"})}, False, "429",
     True),
    ("127.0.1.9", {"/robots.txt": Reply(500)}, False, "500", True),
    ("127.0.1.10", {"/robots.txt": Reply(503)}, False, "503", True),
    ("127.0.1.11", {"/robots.txt": HTML}, True, None, None),
]


@pytest.mark.parametrize(("address", "routes", "allowed", "error", "waiting_helps"),
                         STATUS_TABLE, ids=[row[0] for row in STATUS_TABLE])
def test_status_table(api: httpx.Client, address: str, routes: dict[str, Reply],
                      allowed: bool, error: str | None, waiting_helps: bool | None) -> None:
    with serve(Site(address, dict(routes))) as site:
        answer = verdict(api, f"{site.origin}/page")
        assert answer["allowed"] is allowed, answer
        if error is not None:
            assert error in str(answer["error"])
        if waiting_helps:
            assert isinstance(answer["retryAfter"], int) and answer["retryAfter"] > 0
        if routes is STATUS_TABLE[0][1]:
            blocked = verdict(api, f"{site.origin}/private/x")
            assert not blocked["allowed"] and blocked["retryAfter"] == -1
            assert "Disallow: /private (line 2)" in str(blocked["error"])
        # Asked again, the answer comes from what was stored: robots.txt is not refetched.
        fetched = site.requests.count("/robots.txt")
        verdict(api, f"{site.origin}/other")
        assert site.requests.count("/robots.txt") == fetched == 1
        assert "/page" not in site.requests  # the service never fetches pages itself


def test_network_error_disallows_with_back_off(api: httpx.Client) -> None:
    answer = verdict(api, f"http://127.0.1.12:{free_port()}/page")
    assert not answer["allowed"] and isinstance(answer["retryAfter"], int)
    assert answer["retryAfter"] > 0


def test_one_robots_fetch_for_many_callers(api: httpx.Client) -> None:
    slow = Reply(200, b"User-agent: *\nAllow: /\n", delay_s=0.5)
    with serve(Site("127.0.1.13", {"/robots.txt": slow})) as site:
        urls = [f"{site.origin}/p{n}" for n in range(50)]
        answers = api.post("/politeness/verbose", json=urls).json()
        assert [a["allowed"] for a in answers] == [True] + [False] * 49
        assert site.requests == ["/robots.txt"]


def robots_site(address: str, body: str) -> Site:
    return Site(address, {"/robots.txt": Reply(200, body.encode())})


def reserve_then_wait(api: httpx.Client, url: str, **params: str) -> dict[str, object]:
    first = verdict(api, url, reserve="true", **params)
    assert first["allowed"], first
    return verdict(api, url, **params)


@pytest.mark.parametrize(
    ("address", "body", "low_ms", "high_ms", "source"),
    [
        ("127.0.2.1", "User-agent: *\nAllow: /\n", 900, 1000, "default delay"),
        ("127.0.2.2", "User-agent: *\nCrawl-delay: 4\n", 3000, 4000, "Crawl-delay"),
        ("127.0.2.3", "User-agent: *\nRequest-rate: 1/6s\n", 5000, 6000, "Request-rate"),
        ("127.0.2.4", "User-agent: *\nCrawl-delay: 3600\n", 59_000, 60_000, "Crawl-delay"),
        ("127.0.2.5", "Robot-version: 3.0\nUser-agent: *\nAllow: /\nIp-delay: 7\n", 6000,
         7000, "Ip-delay"),
        ("127.0.2.6", "Robot-version: 3.0\nUser-agent: *\nAllow: /\nIp-rate: 6/m\n", 9000,
         10_000, "Ip-rate"),
    ],
)
def test_delay_sources(api: httpx.Client, address: str, body: str, low_ms: int, high_ms: int,
                       source: str) -> None:
    with serve(robots_site(address, body)) as site:
        answer = reserve_then_wait(api, f"{site.origin}/a", ip="10.1.2.3")
        assert low_ms < int(str(answer["retryAfter"])) <= high_ms, answer
        assert source in str(answer["error"])


def test_operator_delay_set_at_run_time(api: httpx.Client) -> None:
    with serve(robots_site("127.0.2.7", "User-agent: *\nCrawl-delay: 2\n")) as site:
        assert api.put("/delays/127.0.2.7", json={"delay": 8000}).status_code == 200
        answer = reserve_then_wait(api, f"{site.origin}/a")
        assert 7000 < int(str(answer["retryAfter"])) <= 8000
        assert "configured delay" in str(answer["error"])
        row = [d for d in api.get("/delays").json() if d["domain"] == "127.0.2.7"]
        assert row == [{"domain": "127.0.2.7", "delay": 8000, "robotstxt_delay": 2000,
                        "configured_delay": 8000}]
        assert api.delete("/delays/127.0.2.7").status_code == 204


def _hhmm(moment: dt.datetime) -> str:
    return moment.strftime("%H%M")


def test_visit_time_and_time_forbidden(api: httpx.Client) -> None:
    now = dt.datetime.now(dt.UTC)
    later = f"{_hhmm(now + dt.timedelta(hours=2))}-{_hhmm(now + dt.timedelta(hours=3))}"
    around = f"{_hhmm(now - dt.timedelta(hours=1))}-{_hhmm(now + dt.timedelta(hours=1))}"
    visit = f"Robot-version: 3.0\nUser-agent: *\nAllow: /\nVisit-time: {later}\n"
    forbidden = f"Robot-version: 3.0\nUser-agent: *\nAllow: /\nTime-forbidden: {around}\n"
    with serve(robots_site("127.0.2.8", visit)) as a, \
            serve(robots_site("127.0.2.9", forbidden)) as b:
        waits = verdict(api, f"{a.origin}/x")
        assert not waits["allowed"] and "Visit-time" in str(waits["error"])
        assert 60 * 60_000 < int(str(waits["retryAfter"])) <= 2 * 60 * 60_000
        held = verdict(api, f"{b.origin}/x")
        assert not held["allowed"] and "Time-forbidden" in str(held["error"])
        assert 0 < int(str(held["retryAfter"])) <= 60 * 60_000


def test_back_off_after_429_and_503(api: httpx.Client) -> None:
    with serve(robots_site("127.0.2.10", "User-agent: *\nAllow: /\n")) as site:
        url = f"{site.origin}/a"
        assert verdict(api, url)["allowed"]
        told = api.post("/politeness/feedback",
                        json=[{"url": url, "status": 503, "retryAfter": "120"}])
        assert told.json() == [{"url": url, "pausedFor": 120_000}]
        answer = verdict(api, url)
        assert not answer["allowed"] and 119_000 < int(str(answer["retryAfter"])) <= 120_000
    with serve(robots_site("127.0.2.11", "User-agent: *\nAllow: /\n")) as site:
        url = f"{site.origin}/a"
        api.post("/politeness/feedback", json=[{"url": url, "status": 429}])
        answer = verdict(api, url)  # no Retry-After: a minute
        assert 59_000 < int(str(answer["retryAfter"])) <= 60_000
        ok = api.post("/politeness/feedback", json=[{"url": url, "status": 200}]).json()
        assert ok == [{"url": url, "pausedFor": None}]


def test_adaptive_delay_follows_response_times(api: httpx.Client) -> None:
    with serve(robots_site("127.0.2.12", "User-agent: *\nCrawl-delay: 1\n")) as site:
        url = f"{site.origin}/a"
        api.post("/politeness/feedback", json=[{"url": url, "status": 200, "elapsedMs": 5000}])
        answer = reserve_then_wait(api, url)
        assert 4000 < int(str(answer["retryAfter"])) <= 5000
        assert "adaptive delay" in str(answer["error"])


@pytest.mark.parametrize(
    "body",
    [b"[{\"url\": \"http://e.com/\"}]", b"[{\"url\": \"nope\", \"status\": 200}]",
     b"[{\"url\": \"http://e.com/\", \"status\": 200, \"elapsedMs\": -1}]", b"{}",
     b"[{\"url\": \"http://e.com/\", \"status\": 200, \"lateMs\": \"soon\"}]",
     b"[{\"url\": \"http://e.com/\", \"status\": 200, \"lease\": \"yes\"}]",
     b"[{\"url\": \"http://e.com/\", \"lease\": false}]"],
)
def test_feedback_bad_input(api: httpx.Client, body: bytes) -> None:
    answer = api.post("/politeness/feedback", content=body)
    assert answer.status_code == 400 and answer.json()["error"]


def test_401_403_policy_is_configurable(tmp_path: Path) -> None:
    with serve(Site("127.0.2.13", {"/robots.txt": Reply(403)})) as site, \
            polite_serve("--store", "memory://", "--allow-private", "--on-401-403",
                         "allow") as api:
        assert verdict(api, f"{site.origin}/x")["allowed"]


def test_config_file(tmp_path: Path) -> None:
    config = tmp_path / "polite.toml"
    config.write_text('default_delay_ms = 2500\nallow_private = true\n'
                      '[delays_s]\n"127.0.2.14" = 9\n')
    with serve(robots_site("127.0.2.14", "User-agent: *\nAllow: /\n")) as configured, \
            serve(robots_site("127.0.2.15", "User-agent: *\nAllow: /\n")) as plain, \
            polite_serve("--store", "memory://", "--config", str(config)) as api:
        answer = reserve_then_wait(api, f"{configured.origin}/a")
        assert 8000 < int(str(answer["retryAfter"])) <= 9000
        answer = reserve_then_wait(api, f"{plain.origin}/a")
        assert 2000 < int(str(answer["retryAfter"])) <= 2500


@pytest.mark.parametrize(
    ("text", "message"),
    [("port = \"eighty\"\n", "port 'eighty': must be a whole number"),
     ("colour = 1\n", "unknown setting"),
     ("[delays\n", "not TOML"), ("[delays]\n\"e.com\" = -4\n", "delays.e.com"),
     ("[delays]\n\"e.com\" = 1.5\n", "delays.e.com 1.5: must be a whole number"),
     ("[delays_s]\n\"e.com\" = 86401\n", "delays_s.e.com 86401: must be a finite number"),
     ("loop = \"trio\"\n", "loop 'trio': one of auto, asyncio, uvloop")],
)
def test_bad_config_file(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "polite.toml"
    config.write_text(text)
    done = subprocess.run(command_line("serve", "--config", str(config)),
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert message in done.stderr


def test_two_nodes_share_one_delay_through_redis(tmp_path: Path) -> None:
    with redis_server(tmp_path) as redis_url, \
            serve(robots_site("127.0.2.16", "User-agent: *\nAllow: /\n")) as site, \
            polite_serve("--store", redis_url, "--allow-private") as node_a, \
            polite_serve("--store", redis_url, "--allow-private") as node_b:
        assert node_a.put("/delays/127.0.2.16", json={"delay": 5000}).status_code == 200
        url = f"{site.origin}/a"
        assert verdict(node_b, url, reserve="true")["allowed"]
        seen_by_a = verdict(node_a, url, reserve="true")
        assert not seen_by_a["allowed"]
        assert 4000 < int(str(seen_by_a["retryAfter"])) <= 5000
        assert "configured delay" in str(seen_by_a["error"])
        rows = node_b.get("/delays").json()
        assert {"domain": "127.0.2.16", "delay": 5000, "robotstxt_delay": None,
                "configured_delay": 5000} in rows
        # Both nodes fetched nothing twice: the robots.txt state is shared too.
        assert site.requests == ["/robots.txt"]


def test_redis_store_that_does_not_answer_is_a_clear_error() -> None:
    done = subprocess.run(command_line("serve", "--store",
                                       f"redis://127.0.0.1:{free_port()}/0"),
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert "the Redis store does not answer" in done.stderr


def test_a_port_in_use_is_one_clean_message(tmp_path: Path) -> None:
    with polite_serve("--store", "memory://") as api:
        port = str(api.base_url.port)
        second = subprocess.run(command_line("serve", "--port", port, "--store", "memory://"),
                                capture_output=True, text=True, timeout=30)
    assert second.returncode == 2
    assert second.stderr.strip().splitlines() == [
        f"polite: cannot listen on 127.0.0.1:{port}: error while attempting to bind on "
        f"address ('127.0.0.1', {port}): address already in use"]


def test_answers_from_a_cut_robots_txt_say_so_and_max_bytes_reads_on(tmp_path: Path) -> None:
    body = b"User-agent: *\nAllow: /\n" + b"# filler\n" * 4000 + b"Disallow: /late\n"
    with serve(Site("127.0.1.40", {"/robots.txt": Reply(200, body)})) as site:
        with polite_serve("--store", "memory://", "--allow-private", "--max-bytes",
                          "1000") as api:
            (cut,) = api.post("/politeness/verbose", json=[f"{site.origin}/late"]).json()
        with polite_serve("--store", "memory://", "--allow-private") as api:
            (whole,) = api.post("/politeness/verbose", json=[f"{site.origin}/late"]).json()
    assert cut["allowed"] is True and "read only that far" in cut["warning"]
    assert whole["allowed"] is False and "Disallow: /late" in whole["error"]
    assert "warning" not in whole


def test_a_robots_txt_redirect_to_an_internal_address_is_not_followed() -> None:
    """A public site (its address let through with --allow-network) redirects robots.txt to
    an internal address: polite serve does not ask for it, the site counts as robots.txt
    unreachable, and nothing of the internal answer shows on the dashboard."""
    secret = b"ami-0123456789\nAKIASECRETKEY\n"
    with serve(Site("127.0.6.12", {"/latest/meta-data/": Reply(200, secret)})) as internal:
        target = f"{internal.origin}/latest/meta-data/"
        with serve(Site("127.0.6.11", {"/robots.txt": Reply(301, headers={"Location": target})})
                   ) as site, polite_serve("--store", "memory://", "--allow-network",
                                           "127.0.6.11") as api:
            answer = verdict(api, site.origin + "/page")
            dashboard = api.get("/dashboard/hosts").text
            refused = verdict(api, internal.origin + "/latest/meta-data/")
    assert internal.requests == []
    assert site.requests == ["/robots.txt"]
    assert answer["allowed"] is False
    assert f"redirected to {target}" in str(answer["error"])
    assert "AKIASECRETKEY" not in dashboard and "ami-0123456789" not in dashboard
    # the network allowed is the site's address only: the internal one stays refused
    assert refused["allowed"] is False and "private" in str(refused["error"])


def test_allow_network_must_be_a_network() -> None:
    done = subprocess.run(command_line("serve", "--allow-network",
                                       "10.1.0.0/33"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--allow-network '10.1.0.0/33': not a network" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_lease_holds_the_host_until_the_feedback_ends_it(api: httpx.Client) -> None:
    """reserve=true&lease=true: with no delay to keep, a slot taken still holds its host
    until the feedback of its request says so; without a lease the next goes at once."""
    with serve(robots_site("127.0.2.41", "User-agent: *\nAllow: /\n")) as site:
        host = site.origin.removeprefix("http://").split(":")[0]
        assert api.put(f"/delays/{host}", json={"delay": 0}).status_code == 200
        url = f"{site.origin}/a"
        assert verdict(api, url, reserve="true")["allowed"]
        assert verdict(api, url, reserve="true")["allowed"]  # no lease: nothing held
        assert verdict(api, url, reserve="true", lease="true")["allowed"]
        held = verdict(api, url, reserve="true", lease="true")
        assert not held["allowed"] and 0 <= int(str(held["retryAfter"])) <= 60, held
        assert not verdict(api, url, reserve="true")["allowed"]  # held for every client
        ended = api.post("/politeness/feedback",
                         json=[{"url": url, "status": 200, "lease": True}])
        assert ended.json() == [{"url": url, "pausedFor": None}]
        assert verdict(api, url, reserve="true", lease="true")["allowed"]
        api.post("/politeness/feedback", json=[{"url": url, "lease": True}])  # no answer
        assert verdict(api, url, reserve="true", lease="true")["allowed"]
        refused = api.post("/politeness/verbose", json=[url],
                           params={"reserve": "true", "lease": "maybe"})
        assert refused.status_code == 400

"""httpx (sync and async) and requests through polite, against the loopback farm."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, cast

import httpx
import pytest
import requests

from polite.errors import (
    ConfigError,
    FetchError,
    RequestRefused,
    RobotsDisallowed,
    SlotNotReady,
)
from polite.integrations.httpx import AsyncPoliteTransport, PoliteTransport
from polite.integrations.requests import PoliteAdapter
from tests.integrations.farm import (
    AGENT,
    DELAY_S,
    PAGES,
    RATE_S,
    RETRY_AFTER_S,
    Site,
    gaps,
    paused,
    urls_of,
)
from tests.serving import polite_serve
from tests.sites import Reply, serve

OPTIONS = {"agent": AGENT, "allow_private": True, "default_delay_s": 0.0}


def crawl_site(get: Callable[[str], int], site: Site) -> list[tuple[str, object]]:
    """Fetch the site's URLs in order, asking again once after a 429, as scripts do."""
    outcomes: list[tuple[str, object]] = []
    for url in urls_of(site):
        try:
            status = get(url)
            if status == 429:
                status = get(url)
        except RobotsDisallowed as refusal:
            outcomes.append((url, refusal))
            continue
        outcomes.append((url, status))
    return outcomes


def judge(farm: dict[str, Site], outcomes: dict[str, list[tuple[str, object]]]) -> None:
    """What every client must show at the origins."""
    for site in farm.values():
        paths = [path for _, path in site.arrivals]
        assert not [p for p in paths if p.startswith("/private")], site.host
    assert min(gaps(farm["delay"])) >= DELAY_S
    assert min(gaps(farm["rate"])) >= RATE_S
    pause, others = paused(farm)
    assert pause >= RETRY_AFTER_S
    assert others, "the other hosts waited for the busy one"
    # The refusal names the rule and its line.
    refusals = [o for _, o in outcomes["delay"] if isinstance(o, RobotsDisallowed)]
    assert len(refusals) == 1
    assert "Disallow: /private/" in refusals[0].reason and "line 3" in refusals[0].reason
    assert [o for _, o in outcomes["busy"]].count(200) == len(urls_of(farm["busy"])) - 1


def test_httpx_client_threads_keep_to_each_site_s_spacing(farm: dict[str, Site]) -> None:
    with httpx.Client(transport=PoliteTransport(**OPTIONS)) as client, \
            ThreadPoolExecutor(len(farm)) as pool:
        def get(url: str) -> int:
            return client.get(url).status_code
        outcomes = dict(zip(farm, pool.map(lambda s: crawl_site(get, s), farm.values()),
                            strict=True))
    judge(farm, outcomes)


def test_httpx_async_client_keeps_to_each_site_s_spacing(farm: dict[str, Site]) -> None:
    async def run() -> dict[str, list[tuple[str, object]]]:
        async with httpx.AsyncClient(transport=AsyncPoliteTransport(**OPTIONS)) as client:
            async def one(site: Site) -> list[tuple[str, object]]:
                outcomes: list[tuple[str, object]] = []
                for url in urls_of(site):
                    try:
                        status = (await client.get(url)).status_code
                        if status == 429:
                            status = (await client.get(url)).status_code
                    except RobotsDisallowed as refusal:
                        outcomes.append((url, refusal))
                        continue
                    outcomes.append((url, status))
                return outcomes
            done = await asyncio.gather(*(one(site) for site in farm.values()))
        return dict(zip(farm, done, strict=True))

    judge(farm, asyncio.run(run()))


def test_requests_session_keeps_to_each_site_s_spacing(farm: dict[str, Site]) -> None:
    adapter = PoliteAdapter(**OPTIONS)
    with requests.Session() as session, ThreadPoolExecutor(len(farm)) as pool:
        session.mount("http://", adapter)

        def get(url: str) -> int:
            return session.get(url, timeout=10).status_code
        outcomes = dict(zip(farm, pool.map(lambda s: crawl_site(get, s), farm.values()),
                            strict=True))
    judge(farm, outcomes)


def test_requests_agent_comes_from_the_user_agent_header(farm: dict[str, Site]) -> None:
    """The rate site lets FarmBot in and keeps everyone else out."""
    site = farm["rate"]
    adapter = PoliteAdapter(allow_private=True, default_delay_s=0.0)
    with requests.Session() as session:
        session.mount("http://", adapter)
        session.headers["User-Agent"] = "FarmBot/2.0 (+https://example.com/bot)"
        assert session.get(site.origin + "/p1", timeout=10).status_code == 200
        session.headers["User-Agent"] = "OtherBot/1.0"
        with pytest.raises(RobotsDisallowed, match=r"Disallow: / \(line 5\)"):
            session.get(site.origin + "/p2", timeout=10)
    assert [p for _, p in site.arrivals] == ["/robots.txt", "/p1"]


def test_a_forbidden_url_can_be_answered_with_403(farm: dict[str, Site]) -> None:
    site = farm["delay"]
    with httpx.Client(transport=PoliteTransport(forbidden_response=True, **OPTIONS)) as client:
        answer = client.get(site.origin + "/private/3")
    assert answer.status_code == 403
    assert "Disallow: /private/ (line 3)" in answer.text
    adapter = PoliteAdapter(forbidden_response=True, **OPTIONS)
    with requests.Session() as session:
        session.mount("http://", adapter)
        answer2 = session.get(site.origin + "/private/3", timeout=10)
    assert answer2.status_code == 403 and "line 3" in answer2.text
    assert [p for _, p in site.arrivals] == ["/robots.txt", "/robots.txt"]


def test_reject_mode_raises_with_the_wait(farm: dict[str, Site]) -> None:
    site = farm["delay"]
    with httpx.Client(transport=PoliteTransport(wait=False, **OPTIONS)) as client:
        assert client.get(site.origin + "/p1").status_code == 200
        with pytest.raises(SlotNotReady) as late:
            client.get(site.origin + "/p2")
    # The spacing counts from /p1's answer: a little over the delay from its grant.
    assert 0 < late.value.wait_s <= DELAY_S + 0.2
    assert "robots.txt Crawl-delay" in late.value.reason
    assert [p for _, p in site.arrivals] == ["/robots.txt", "/p1"]


def test_private_addresses_are_refused_by_default(farm: dict[str, Site]) -> None:
    site = farm["delay"]
    with httpx.Client(transport=PoliteTransport(agent=AGENT)) as client, \
            pytest.raises(RequestRefused, match="private or loopback"):
        client.get(site.origin + "/p1")
    assert site.arrivals == []


def test_refusals_are_the_client_library_s_errors(farm: dict[str, Site]) -> None:
    """An ``except httpx.HTTPError`` / ``except requests.RequestException`` already in a
    script catches polite's refusals, which stay polite's errors too."""
    from polite.integrations import httpx as polite_httpx
    from polite.integrations import requests as polite_requests

    site = farm["delay"]
    with httpx.Client(transport=PoliteTransport(wait=False, **OPTIONS)) as client:
        with pytest.raises(httpx.HTTPError) as disallowed:
            client.get(site.origin + "/private/3")
        assert isinstance(disallowed.value, RobotsDisallowed | httpx.RequestError)
        assert isinstance(disallowed.value, polite_httpx.RobotsDisallowed)
        assert disallowed.value.request.url == site.origin + "/private/3"
        assert "Disallow: /private/ (line 3)" in str(disallowed.value)
        assert client.get(site.origin + "/p1").status_code == 200
        with pytest.raises(httpx.HTTPError) as late:
            client.get(site.origin + "/p2")
        assert isinstance(late.value, polite_httpx.SlotNotReady)
        assert isinstance(late.value, SlotNotReady) and late.value.wait_s > 0
    with httpx.Client(transport=PoliteTransport(agent=AGENT)) as client, \
            pytest.raises(httpx.HTTPError, match="private or loopback") as refused:
        client.get(site.origin + "/p3")
    assert isinstance(refused.value, RequestRefused)
    assert not isinstance(refused.value, RobotsDisallowed)
    adapter = PoliteAdapter(**OPTIONS)
    with requests.Session() as session:
        session.mount("http://", adapter)
        with pytest.raises(requests.RequestException) as forbidden:
            session.get(site.origin + "/private/4", timeout=10)
    assert isinstance(forbidden.value, polite_requests.RobotsDisallowed)
    assert isinstance(forbidden.value, RobotsDisallowed) and forbidden.value.request is not None
    assert str(forbidden.value).endswith("Disallow: /private/ (line 3)")
    assert [p for _, p in site.arrivals] == ["/robots.txt", "/p1", "/robots.txt"]


def test_httpx_through_a_polite_serve(farm: dict[str, Site]) -> None:
    """The service holds the slots and reads robots.txt; the transport only asks and tells."""
    site = farm["delay"]
    with polite_serve("--store", "memory://", "--allow-private",
                      "--default-delay-ms", "0") as api, \
            httpx.Client(transport=PoliteTransport(agent=AGENT,
                                                   service_url=str(api.base_url))) as client:
        for n in range(1, 4):
            assert client.get(f"{site.origin}/p{n}").status_code == 200
        with pytest.raises(RobotsDisallowed, match=r"Disallow: /private/ \(line 3\)"):
            client.get(f"{site.origin}/private/1")
    assert [p for _, p in site.arrivals] == ["/robots.txt", "/p1", "/p2", "/p3"]
    assert min(gaps(site)) >= DELAY_S


def test_a_store_and_a_service_together_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="not both"):
        PoliteTransport(store="memory:///x", service_url="http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="expected sqlite"):
        PoliteTransport(store="postgres://db")


def test_a_late_departure_moves_the_service_s_slot(farm: dict[str, Site]) -> None:
    """``{"url", "lateMs"}`` on the feedback endpoint: the request left that much after its
    grant, so the host's next slot counts from then; never from later than the moment it
    is told (a request has left by then). The host's delay is long (an operator's 5 s), and
    each wait is bounded by the time the test itself measured around the calls, so a
    loaded machine that stretches them does not change the answer."""
    site = farm["delay"]
    url = site.origin + "/p1"
    delay_ms = 5000.0
    late_ms = 300

    def ask() -> dict[str, Any]:
        (verdict,) = api.post("/politeness/verbose", params={"reserve": "true"},
                              json=[url]).json()
        return cast(dict[str, Any], verdict)

    with polite_serve("--store", "memory://", "--allow-private") as api:
        assert api.put(f"/delays/{site.host}", json={"delay": delay_ms}).status_code == 200
        granted = time.monotonic()  # no later than the grant
        assert ask()["allowed"]
        time.sleep(late_ms / 1000)  # it left this late: the service is told no sooner
        told = api.post("/politeness/feedback", json=[{"url": url, "lateMs": late_ms}])
        assert told.status_code == 200 and told.json() == [{"url": url, "pausedFor": None}]
        second = ask()
        since_ms = (time.monotonic() - granted) * 1000
        # moved: the delay from the grant and 300 ms; unmoved, it would be 300 ms less
        assert not second["allowed"]
        assert delay_ms + late_ms - since_ms <= second["retryAfter"] <= delay_ms
        telling = time.monotonic()
        api.post("/politeness/feedback", json=[{"url": url, "lateMs": 60_000}])
        third = ask()  # counted from the moment it was told, not a minute on
        since_ms = (time.monotonic() - telling) * 1000
        assert not third["allowed"]
        assert delay_ms - since_ms <= third["retryAfter"] <= delay_ms


def test_regp_path_delays_and_visit_time_hold_through_httpx() -> None:
    """REGP (Robot-version 3.0): a slower path inside a faster site, and a Visit-time window
    that is closed now (the request would wait hours: refused with the wait instead)."""
    hour = (datetime.now(UTC).hour + 2) % 24
    paths = Site("127.0.21.5", {
        "/robots.txt": Reply(200, b"Robot-version: 3.0\n\nUser-agent: *\nAllow: /\n"
                                  b"Request-rate: 20/1s\n{\nAllow: /slow/\nCrawl-delay: 0.5\n}\n"),
        **{p: Reply(200, b"ok") for p in ("/slow/a", "/slow/b", "/fast/a", "/fast/b")}})
    closed = Site("127.0.21.6", {
        "/robots.txt": Reply(200, f"Robot-version: 2.0\nUser-agent: *\nAllow: /\n"
                                  f"Visit-time: {hour:02d}00-{hour:02d}59\n".encode()),
        "/a": Reply(200, b"ok")})
    with serve(paths), serve(closed), \
            httpx.Client(transport=PoliteTransport(max_wait_s=30, **OPTIONS)) as client:
        for path in ("/fast/a", "/slow/a", "/slow/b", "/fast/b"):
            assert client.get(paths.origin + path).status_code == 200
        with pytest.raises(SlotNotReady, match="Visit-time") as late:
            client.get(closed.origin + "/a")
    arrivals = [(at, path) for at, path in paths.arrivals if path != "/robots.txt"]
    spacing = {b[1]: b[0] - a[0] for a, b in itertools.pairwise(arrivals)}
    assert spacing["/slow/b"] >= 0.5  # the path's own Crawl-delay
    assert spacing["/fast/b"] < 0.5  # the site's Request-rate, not the path's delay
    assert late.value.wait_s > 30 and [p for _, p in closed.arrivals] == ["/robots.txt"]


def test_two_clients_sharing_one_redis_store(farm: dict[str, Site], redis_url: str,
                                             redis_prefix: str) -> None:
    """An httpx client and a requests session, each with its own gate, one Redis store:
    together they keep one delay per host (Redis's own clock judges the slots)."""
    site = farm["delay"]
    store = f"{redis_url}?prefix={redis_prefix}"
    adapter = PoliteAdapter(store=store, **OPTIONS)
    with httpx.Client(transport=PoliteTransport(store=store, **OPTIONS)) as client, \
            requests.Session() as session, ThreadPoolExecutor(2) as pool:
        session.mount("http://", adapter)
        pages = [f"{site.origin}/p{n}" for n in range(PAGES)]
        by_httpx = pool.submit(lambda: [client.get(u).status_code for u in pages])
        by_requests = pool.submit(lambda: [session.get(u, timeout=10).status_code
                                           for u in pages])
        assert by_httpx.result() == by_requests.result() == [200] * PAGES
    paths = [p for _, p in site.arrivals if p != "/robots.txt"]
    assert sorted(paths) == sorted(p.removeprefix(site.origin) for p in pages * 2)
    assert min(gaps(site)) >= DELAY_S


def test_httpx_follows_no_robots_txt_redirect_to_a_private_address() -> None:
    """The drop-in refuses a loopback address asked for directly; a site it lets through
    (allow_private naming its address only) redirecting robots.txt there must not get it
    fetched either: robots.txt counts as unreachable and the request is not let go."""
    with serve(Site("127.0.6.32", {"/latest/meta-data/": Reply(200, b"AKIASECRETKEY\n")})
               ) as internal:
        target = f"{internal.origin}/latest/meta-data/"
        with serve(Site("127.0.6.31", {"/robots.txt": Reply(301, headers={"Location": target}),
                                       "/": Reply(200, b"home")})) as site, \
                httpx.Client(transport=PoliteTransport(agent=AGENT, allow_private=["127.0.6.31"],
                                                       wait=False)) as client:
            with pytest.raises(RequestRefused, match="private or loopback"):
                client.get(target)
            # unreachable: asked again later (a wait, refused here as the client will not wait)
            with pytest.raises(SlotNotReady, match=re.escape(f"redirected to {target}: ")):
                client.get(site.origin + "/")
    assert internal.requests == []
    assert site.requests == ["/robots.txt"]


def test_a_service_with_an_admin_token_is_given_it_in_its_url(farm: dict[str, Site]) -> None:
    site = farm["delay"]
    with polite_serve("--store", "memory://", "--allow-private", "--default-delay-ms", "0",
                      "--admin-token", "s3cret") as api:
        without = PoliteTransport(agent=AGENT, service_url=str(api.base_url))
        with httpx.Client(transport=without) as client, \
                pytest.raises(FetchError, match="401"):
            client.get(f"{site.origin}/p1")
        port = api.base_url.port
        with httpx.Client(transport=PoliteTransport(
                agent=AGENT, service_url=f"http://:s3cret@127.0.0.1:{port}")) as client:
            assert client.get(f"{site.origin}/p1").status_code == 200


class _PathOnly(dict[str, Reply]):
    """Routes found by a request's path whatever its query."""

    def get(self, path: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(path.split("?")[0], default)


def test_a_service_answering_json_nested_too_deep_is_a_fetch_error() -> None:
    # what answers at the service URL is read through the one bounded JSON reading
    routes = _PathOnly({"/politeness/verbose": Reply(200, b"[" * 60_000)})
    with serve(Site("127.0.95.9", routes)) as fake, \
            httpx.Client(transport=PoliteTransport(agent=AGENT,
                                                   service_url=fake.origin)) as client, \
            pytest.raises(FetchError, match="nested deeper than 64"):
        client.get("http://127.0.0.1:9/p1")

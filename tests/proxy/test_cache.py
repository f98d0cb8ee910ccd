"""The page cache of ``polite serve``'s proxy: a real process, real origins on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import serving
from tests.serving import polite_serve
from tests.sites import Reply, Site, serve

ROBOTS = Reply(200, b"User-agent: *\nDisallow:\n")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache") / "polite.sqlite"


@pytest.fixture(scope="module")
def proxy(store: Path) -> Iterator[httpx.Client]:
    # No adaptive delay: these tests ask twice in a row with the delay set to 0, and on a
    # loaded machine the origin's response time alone would make the second wait.
    with polite_serve("--store", f"sqlite:///{store}", "--allow-private",
                      "--adaptive-factor", "0") as api:
        yield api


def through(api: httpx.Client, **headers: str) -> httpx.Client:
    return serving.through(api, headers=headers)


def metric(api: httpx.Client, name: str) -> float:
    for line in api.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_a_fresh_response_is_served_without_touching_the_origin(proxy: httpx.Client) -> None:
    page = Reply(200, b"cached body", {"Cache-Control": "max-age=300", "ETag": '"a"'})
    with serve(Site("127.0.4.1", {"/robots.txt": ROBOTS, "/p": page})) as site:
        hits = metric(proxy, "polite_cache_hits_total")
        with through(proxy) as client:
            first = client.get(f"{site.origin}/p")
            second = client.get(f"{site.origin}/p")
            head = client.head(f"{site.origin}/p")
            conditional = client.get(f"{site.origin}/p", headers={"If-None-Match": '"a"'})
    assert first.content == second.content == b"cached body"
    assert "age" in second.headers and "polite" in second.headers["via"]
    assert head.status_code == 200 and head.content == b""
    assert conditional.status_code == 304
    assert site.requests.count("/p") == 1
    assert metric(proxy, "polite_cache_hits_total") == hits + 3


def test_a_cache_hit_does_not_count_against_politeness(proxy: httpx.Client) -> None:
    page = Reply(200, b"x", {"Cache-Control": "max-age=300"})
    with serve(Site("127.0.4.2", {"/robots.txt": ROBOTS, "/p": page, "/q": page})) as site:
        assert proxy.put("/delays/127.0.4.2", json={"delay": 60_000}).status_code == 200
        with through(proxy) as client:
            statuses = [client.get(f"{site.origin}/p").status_code for _ in range(5)]
            other = client.get(f"{site.origin}/q")  # not cached: the slot is taken
    assert statuses == [200] * 5 and other.status_code == 429
    assert site.requests.count("/p") == 1


def test_no_store_is_not_stored(proxy: httpx.Client) -> None:
    page = Reply(200, b"secret", {"Cache-Control": "no-store, max-age=300"})
    private = Reply(200, b"mine", {"Cache-Control": "private, max-age=300"})
    with serve(Site("127.0.4.3", {"/robots.txt": ROBOTS, "/p": page, "/m": private})) as site:
        assert proxy.put("/delays/127.0.4.3", json={"delay": 0}).status_code == 200
        with through(proxy) as client:
            for _ in range(2):
                assert client.get(f"{site.origin}/p").content == b"secret"
                assert client.get(f"{site.origin}/m").content == b"mine"
    assert site.requests.count("/p") == 2 and site.requests.count("/m") == 2


def test_a_stale_response_is_revalidated_and_a_304_saves_the_body(proxy: httpx.Client
                                                                   ) -> None:
    site = Site("127.0.4.4", {"/robots.txt": ROBOTS})

    def page() -> Reply:
        headers = {k.lower(): v for k, v in site.seen[-1][2].items()}
        if headers.get("if-none-match") == '"v1"':
            return Reply(304, b"", {"ETag": '"v1"', "Cache-Control": "max-age=0",
                                    "X-Fresh": "304"})
        return Reply(200, b"the body", {"ETag": '"v1"', "Cache-Control": "max-age=0"})

    site.routes["/p"] = page
    with serve(site):
        assert proxy.put("/delays/127.0.4.4", json={"delay": 0}).status_code == 200
        revalidations = metric(proxy, "polite_cache_revalidations_total")
        with through(proxy) as client:
            first = client.get(f"{site.origin}/p")
            second = client.get(f"{site.origin}/p")
    assert first.content == second.content == b"the body"
    assert second.status_code == 200 and second.headers["x-fresh"] == "304"
    sent = [{k.lower(): v for k, v in headers.items()}
            for _, path, headers, _ in site.seen if path == "/p"]
    assert "if-none-match" not in sent[0] and sent[1]["if-none-match"] == '"v1"'
    assert metric(proxy, "polite_cache_revalidations_total") == revalidations + 1


def test_request_cache_control(proxy: httpx.Client) -> None:
    page = Reply(200, b"v", {"Cache-Control": "max-age=300"})
    with serve(Site("127.0.4.5", {"/robots.txt": ROBOTS, "/p": page})) as site:
        assert proxy.put("/delays/127.0.4.5", json={"delay": 0}).status_code == 200
        with through(proxy) as client:
            cold = client.get(f"{site.origin}/p", headers={"Cache-Control": "only-if-cached"})
            client.get(f"{site.origin}/p")
            warm = client.get(f"{site.origin}/p", headers={"Cache-Control": "only-if-cached"})
            forced = client.get(f"{site.origin}/p", headers={"Cache-Control": "no-cache"})
            zero = client.get(f"{site.origin}/p", headers={"Cache-Control": "max-age=0"})
    assert cold.status_code == 504 and warm.status_code == 200
    assert forced.status_code == zero.status_code == 200
    assert site.requests.count("/p") == 3  # the first fill, no-cache and max-age=0


def test_vary_and_invalidation(proxy: httpx.Client) -> None:
    site = Site("127.0.4.6", {"/robots.txt": ROBOTS})

    def page() -> Reply:
        headers = {k.lower(): v for k, v in site.seen[-1][2].items()}
        language = headers.get("accept-language", "none")
        return Reply(200, language.encode(), {"Cache-Control": "max-age=300",
                                               "Vary": "Accept-Language"})

    site.routes["/p"] = page
    with serve(site):
        assert proxy.put("/delays/127.0.4.6", json={"delay": 0}).status_code == 200
        with through(proxy) as client:
            url = f"{site.origin}/p"
            assert client.get(url, headers={"Accept-Language": "de"}).content == b"de"
            assert client.get(url, headers={"Accept-Language": "fr"}).content == b"fr"
            assert client.get(url, headers={"Accept-Language": "de"}).content == b"de"
            assert site.requests.count("/p") == 2
            assert client.post(url, content=b"change").status_code == 200
            assert client.get(url, headers={"Accept-Language": "de"}).content == b"de"
    assert site.requests.count("/p") == 4  # two variants, the POST, and the refill


def test_the_cache_survives_a_restart(store: Path, tmp_path: Path) -> None:
    page = Reply(200, b"kept", {"Cache-Control": "max-age=300"})
    path = tmp_path / "restart.sqlite"
    with serve(Site("127.0.4.7", {"/robots.txt": ROBOTS, "/p": page})) as site:
        for _ in range(2):
            with polite_serve("--store", f"sqlite:///{path}", "--allow-private") as api, \
                    through(api) as client:
                assert client.get(f"{site.origin}/p").content == b"kept"
    assert site.requests.count("/p") == 1


def test_keep_no_store_is_an_explicit_option(tmp_path: Path) -> None:
    page = Reply(200, b"day", {"Cache-Control": "no-store"})
    with serve(Site("127.0.4.8", {"/robots.txt": ROBOTS, "/p": page})) as site, \
            polite_serve("--store", "memory://", "--allow-private",
                         "--cache-keep-no-store-s", "86400") as api, through(api) as client:
        assert client.get(f"{site.origin}/p").content == b"day"
        assert client.get(f"{site.origin}/p").content == b"day"
    assert site.requests.count("/p") == 1


def test_no_cache_turns_it_off() -> None:
    page = Reply(200, b"x", {"Cache-Control": "max-age=300"})
    with serve(Site("127.0.4.9", {"/robots.txt": ROBOTS, "/p": page})) as site, \
            polite_serve("--store", "memory://", "--allow-private", "--no-cache",
                         "--default-delay-ms", "0") as api, through(api) as client:
        client.get(f"{site.origin}/p")
        client.get(f"{site.origin}/p")
        assert "polite_cache_hits_total" not in api.get("/metrics").text
    assert site.requests.count("/p") == 2

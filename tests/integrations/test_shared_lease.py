"""Two processes sharing one store (SQLite, Redis, or a ``polite serve``) keep one request
of a host in flight between them, measured at the origin: a request never arrives while
another is unanswered, and a 429's pause holds the next request of either process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.crawl.test_crawl_faults import misbehaving, reset
from tests.serving import polite_serve
from tests.sites import Reply, Site, serve, tcp_origin

requests = pytest.importorskip("requests")

CLIENT = Path(__file__).with_name("lease_client.py")
PAGES = 8
SLOW_S = 0.03  # each page takes this long to answer: time for another to come meanwhile
RETRY_AFTER_S = 1.0


def lease_site() -> Site:
    site = Site("127.0.149.1", {"/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n")})
    for i in range(PAGES):
        site.routes[f"/p{i}"] = Reply(200, b"page", delay_s=SLOW_S)
    # The first /p3 is answered 429; the next, whichever process sends it, 200.
    answers = iter([Reply(429, b"slow down", {"Retry-After": f"{RETRY_AFTER_S:g}"},
                          delay_s=SLOW_S)])
    site.routes["/p3"] = lambda: next(answers, Reply(200, b"page", delay_s=SLOW_S))
    return site


@contextmanager
def store_for(kind: str, tmp_path: Path, request: pytest.FixtureRequest
              ) -> Iterator[dict[str, str]]:
    """What a client process is given to share: a store URL, or a service's."""
    if kind == "sqlite":
        yield {"store": f"sqlite:///{tmp_path / 'polite.sqlite'}"}
    elif kind == "redis":
        url, prefix = request.getfixturevalue("redis_url"), \
            request.getfixturevalue("redis_prefix")
        yield {"store": f"{url}?prefix={prefix}"}
    else:
        with polite_serve("--store", "memory://", "--allow-private",
                          "--default-delay-ms", "0") as api:
            yield {"service_url": str(api.base_url)}


def run_two(site: Site, shared: dict[str, str]) -> list[str]:
    """Two client processes fetching every page of ``site`` at once; their outputs."""
    urls = [f"{site.origin}/p{i}" for i in range(PAGES)]
    config = json.dumps({**shared, "urls": urls})
    processes = [subprocess.Popen([sys.executable, str(CLIENT), config],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for process in processes:  # both have robots.txt: the pages are all that is left
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line == "ready\n", line + (process.stderr.read() if process.stderr else "")
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outputs = []
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err[-3000:]
            outputs.append(out)
        return outputs
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def most_in_flight(exchanges: list[tuple[float, float, str]]) -> int:
    """The most requests the site had unanswered at once (arrival to reply)."""
    edges = sorted([(arrived, 1) for arrived, _, _ in exchanges]
                   + [(replied, -1) for _, replied, _ in exchanges])
    most = current = 0
    for _, step in edges:  # at a tie the reply comes first (-1 sorts before 1)
        current += step
        most = max(most, current)
    return most


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "redis", "serve"])
def test_two_processes_keep_one_request_of_a_host_in_flight(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    with serve(lease_site()) as site, store_for(kind, tmp_path, request) as shared:
        outputs = run_two(site, shared)
    pages = [e for e in site.exchanges if e[2].startswith("/p")]
    assert len(pages) == 2 * PAGES, outputs
    assert most_in_flight(pages) == 1, sorted(pages)
    # The 429's pause holds the next request of either process, from when it was answered.
    (refused,) = [replied for _, replied, path in pages if path == "/p3"
                  and replied == min(r for _, r, p in pages if p == "/p3")]
    after = min(arrived for arrived, _, _ in pages if arrived > refused)
    assert after - refused >= RETRY_AFTER_S, sorted(pages)
    assert sum(" 429" in out for out in outputs) == 1


def test_a_request_that_fails_gives_its_host_back_at_once(tmp_path: Path) -> None:
    """A request that got no response (the connection reset) ends its lease: the next
    request of the host is granted at once, not a minute later when the lease runs out."""
    from polite.integrations.requests import PoliteAdapter, SlotNotReady

    adapter = PoliteAdapter(agent="LeaseBot", allow_private=True, default_delay_s=0.0,
                            wait=False, store=f"sqlite:///{tmp_path / 'polite.sqlite'}")
    with tcp_origin("127.0.149.2", misbehaving(reset)) as port, requests.Session() as session:
        session.mount("http://", adapter)
        for _ in range(2):
            try:
                session.get(f"http://127.0.149.2:{port}/page", timeout=10)
            except SlotNotReady as held:
                pytest.fail(f"the host was still held: {held}")
            except requests.ConnectionError:
                pass  # reset, as the origin does
            else:
                pytest.fail("the origin answered")

"""``polite serve`` on a real redis-server that stops mid-run: proxied requests and tunnels
are answered 503 with the reason, and /health says the service is unavailable, rather than
connections dropped without a status and a 500."""

from __future__ import annotations

import socket
from contextlib import suppress
from pathlib import Path

import pytest

from tests.redis_server import redis_server
from tests.serving import polite_serve, through
from tests.sites import Reply, Site, serve

redis = pytest.importorskip("redis")


def test_a_store_that_stops_answering_is_a_503_that_says_so(tmp_path: Path) -> None:
    page = Reply(200, b"a page", {"Cache-Control": "no-store"})
    robots = Reply(200, b"User-agent: *\nDisallow:\n")
    with redis_server(tmp_path) as url, \
            polite_serve("--store", url, "--allow-private") as api, \
            serve(Site("127.0.61.20", {"/robots.txt": robots, "/a": page, "/b": page})) \
            as site, through(api) as client:
        assert api.put(f"/delays/{site.host}", json={"delay": 0}).status_code == 200
        assert client.get(f"{site.origin}/a").content == b"a page"
        # The server goes as it is told, perhaps before it could answer.
        with redis.Redis.from_url(url) as control, suppress(redis.ConnectionError):
            control.shutdown(nosave=True)
        answer = client.get(f"{site.origin}/b")
        assert answer.status_code == 503
        assert "the store does not answer" in answer.text
        with socket.create_connection(("127.0.0.1", int(api.base_url.port or 0)),
                                      timeout=10) as sock:
            sock.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: x\r\n\r\n"
                         % (site.host.encode(), site.port))
            assert sock.recv(4096).startswith(b"HTTP/1.1 503")
        health = api.get("/health")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable"
        assert "the store does not answer" in health.json()["error"]
        assert site.requests == ["/robots.txt", "/a"]

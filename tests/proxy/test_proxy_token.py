"""Beyond loopback the proxy is the token's holders' only: a proxied request or a tunnel
without it is answered 407 and nothing reaches the origin (open, the proxy fetched, and
signed with the operator's key, for anyone who could reach it)."""

from __future__ import annotations

import base64
import socket
from pathlib import Path

import httpx

from polite.proxy import ProxySettings
from polite.serve import Settings, proxy_settings
from tests.api.test_service import service
from tests.sites import Reply, Site, serve

ROBOTS = Reply(200, b"User-agent: *\nAllow: /\n")
PAGE = Reply(200, b"page", {"Content-Type": "text/plain"})
TOKEN = "T0ken-\u00e9"  # not ASCII: compared as bytes, never a fault


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def _basic(user: bytes, password: bytes) -> bytes:
    return b"Basic " + base64.b64encode(user + b":" + password)


def test_a_proxied_request_without_the_token_is_refused(tmp_path: Path) -> None:
    with serve(Site("127.34.3.1", {"/robots.txt": ROBOTS, "/page": PAGE})) as site, \
            service(tmp_path / "p.sqlite", default_delay_ms=0, admin_token=TOKEN,
                    private_reads=True, proxy=ProxySettings(token=TOKEN)) as api:
        port = int(api.base_url.port or 0)
        url = f"{site.origin}/page"
        with httpx.Client(proxy=f"http://127.0.0.1:{port}", trust_env=False,
                          timeout=10) as open_client:
            refused = open_client.get(url)
            assert refused.status_code == 407, refused.text
            assert refused.headers["proxy-authenticate"].startswith("Basic")
            assert "Proxy-Authorization" in refused.text
        wrong = [None, b"Basic " + base64.b64encode(b":wrong"), _basic(b"", b"T0ken"),
                 b"Bearer wrong", b"Basic %%%", b"Basic " + base64.b64encode(b"no-colon"),
                 b"Bearer \xc3\xa9", b"Digest " + TOKEN.encode()]
        for given in wrong:
            field = b"" if given is None else b"Proxy-Authorization: " + given + b"\r\n"
            answer = _raw(port, b"GET " + url.encode() + b" HTTP/1.1\r\nHost: 127.34.3.1\r\n"
                          + field + b"\r\n")
            assert answer.startswith(b"HTTP/1.1 407"), (given, answer[:200])
            tunnel = _raw(port, b"CONNECT 127.34.3.1:443 HTTP/1.1\r\nHost: 127.34.3.1:443\r\n"
                          + field + b"\r\n")
            assert tunnel.startswith(b"HTTP/1.1 407"), (given, tunnel[:200])
        assert site.requests == []  # nothing went on, not even robots.txt
        # The token as a proxy URL carries it (Basic, any user name), or as Bearer. The
        # requests wait for their slot (the adaptive delay follows the site's answers, and
        # a loaded machine answers slowly), so that each is forwarded, not refused with 429.
        secret = TOKEN.encode()
        for given in (_basic(b"", secret), _basic(b"crawler", secret), b"Bearer " + secret):
            answer = _raw(port, b"GET " + url.encode() + b" HTTP/1.1\r\nHost: 127.34.3.1\r\n"
                          b"X-Polite-Mode: wait\r\nProxy-Authorization: " + given
                          + b"\r\nConnection: close\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 200"), (given, answer[:300])
        with httpx.Client(proxy=f"http://crawler:T0ken-%C3%A9@127.0.0.1:{port}",
                          headers={"X-Polite-Mode": "wait"}, trust_env=False,
                          timeout=10) as client:
            assert client.get(url).status_code == 200
        assert site.requests.count("/page") == 4
        # The token is the proxy's: the origin never sees it.
        assert all("proxy-authorization" not in {k.lower() for k in sent}
                   for _, _, sent, _ in site.seen)


def test_beyond_loopback_polite_serve_gives_the_proxy_its_token() -> None:
    exposed = Settings(host="192.0.2.7", admin_token="s3cret")
    assert proxy_settings(exposed).token == "s3cret"
    assert "s3cret" not in repr(proxy_settings(exposed))
    assert proxy_settings(Settings(host="127.0.0.1", admin_token="s3cret")).token is None
    assert proxy_settings(Settings(host="localhost")).token is None

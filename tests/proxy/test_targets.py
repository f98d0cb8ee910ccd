"""How the proxy reads a request target in absolute form: the common one at once (its
origin read once for many requests), as the general way (split_origin and urlsplit) reads
it; any other left to the general way."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from polite.fetch.robots import split_origin
from polite.proxy.server import _plain_target


def _general(url: str) -> tuple[str, str, str, int, bytes, bytes]:
    """What the proxy's general way makes of a target (server.py, ``_request``)."""
    origin, host = split_origin(url)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return (origin, host, scheme, parts.port or (443 if scheme == "https" else 80),
            path.encode("latin-1"), parts.netloc.rsplit("@", 1)[-1].encode("latin-1"))


@pytest.mark.parametrize("url", [
    "http://example.com/", "http://example.com/a/b?c=d", "https://example.com/x",
    "http://127.0.4.1:43567/cached", "http://example.com:80/x", "https://example.com:443/",
    "http://example.com:8080/x", "http://example.com:080/x", "http://example.com:0/x",
    "http://example.com:65535/x", "http://a/", '/!"$%&\'()*+,-./:;<=>@[\\]^_`{|}~'.join(
        ("http://e.com", "")), f"http://{'a.' * 60}com/x", f"http://{'x' * 63}/",
])
def test_a_plain_target_is_read_as_the_general_way_reads_it(url: str) -> None:
    assert _plain_target(url) == _general(url)
    assert _plain_target(url) == _general(url)  # its origin read before, now kept


@pytest.mark.parametrize("url", [
    "http://example.com", "http://example.com?x", "http://example.com/x?", "http://e.com/x#f",
    "http://e.com/a b", "http://e.com/\x7f", "http://e.com/é", "http://Example.com/",
    "HTTP://e.com/", "http://e.com:65536/", "http://e.com:123456/", "http://e.com:/",
    "http:///x", "https:///x", "http://u@e.com/", "http://e_x.com/", f"http://{'x' * 64}/",
    "http://a..b/", "http://.a/", f"http://{'a.' * 160}com/x",
])
def test_any_other_target_is_left_to_the_general_way(url: str) -> None:
    assert _plain_target(url) is None

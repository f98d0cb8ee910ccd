"""``split_origin``'s fast path gives what the general path (urlsplit) gives."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polite.errors import InvalidURL
from polite.fetch.robots import origin_of, split_origin


def general(url: str) -> tuple[str, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != (80 if scheme == "http" else 443):
        netloc += f":{port}"
    return f"{scheme}://{netloc}", host


def fast_or_none(url: str) -> tuple[str, str] | None:
    try:
        return split_origin(url)
    except InvalidURL:
        return None


@pytest.mark.parametrize("url", [
    "http://e.com", "http://e.com/", "https://e.com:443/x", "http://e.com:80?q", "http://e.com:0080/",
    "http://e.com:8080#f", "http://E.com/", "HTTP://e.com/", "http://u@e.com/", "http://e.com:/x",
    "http://e.com:99999/", "http://[::1]:81/", "ftp://e.com/", "http:///x", "http://e.com\\x",
    "http://127.1.2.3:8000/page",
])
def test_examples(url: str) -> None:
    assert fast_or_none(url) == general(url)


@given(st.from_regex(r"\A(https?|HTTP|ftp)://[a-zA-Z0-9.@:\-\[\]]{0,20}([/?#\\].{0,10})?\Z"))
def test_any_url_like_string(url: str) -> None:
    assert fast_or_none(url) == general(url)
    if general(url) is not None:
        assert origin_of(url) == general(url)[0]  # type: ignore[index]

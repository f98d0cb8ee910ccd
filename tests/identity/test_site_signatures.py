"""The site middleware checks Web Bot Auth signatures: a real Starlette app under uvicorn
and a WSGI app under wsgiref on loopback, key directories served by real HTTP servers on
loopback, visits signed by polite's signer."""

from __future__ import annotations

import ipaddress
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from polite.core.identity import DIRECTORY_PATH, directory_document
from polite.core.site import SiteRules, parse_crawlers
from polite.errors import ConfigError
from polite.identity.directory import DirectoryFetcher
from polite.identity.keys import public_bytes
from polite.identity.signatures import RequestSigner
from polite.site import SiteGuard, SiteStore
from polite.site.page import create_site_app
from tests.site_servers import client_from, serve_asgi, serve_guarded
from tests.sites import Reply, Site, serve

ASGI_HOST = "127.0.24.1"
WSGI_HOST = "127.0.24.2"
OPERATOR_DIRECTORY = "127.0.24.5"  # ExampleSearch's key directory
OTHER_DIRECTORY = "127.0.24.6"  # someone else's
IN_RANGE = "127.0.24.50"
ELSEWHERE = "127.0.24.60"  # no published range, no PTR name

SEARCH_KEY = Ed25519PrivateKey.generate()
OTHER_KEY = Ed25519PrivateKey.generate()
CRAWLERS = parse_crawlers(json.dumps({"snapshot": "test", "crawlers": [
    {"name": "ExampleSearch", "operator": "Example Search Inc.", "category": "search",
     "tokens": ["ExampleSearchBot"], "ip_ranges": [f"{IN_RANGE}/32"],
     "host_suffixes": [".crawl.example-search.test"],
     "signature_agents": [OPERATOR_DIRECTORY]},
]}))
SEARCH_UA = "Mozilla/5.0 (compatible; ExampleSearchBot/2.1)"
OTHER_UA = "OtherBot/1.0"


class Resolver:
    def reverse(self, ip: str) -> list[str]:
        return []

    def forward(self, name: str) -> list[str]:
        return []


def _served(kind: str, guard: SiteGuard) -> AbstractContextManager[str]:
    return serve_guarded(kind, guard, ASGI_HOST, WSGI_HOST)


@pytest.fixture
def directories() -> Iterator[tuple[str, str]]:
    operator = Site(OPERATOR_DIRECTORY, {
        DIRECTORY_PATH: Reply(200, directory_document([public_bytes(SEARCH_KEY)])),
        "/moved": Reply(302, b"", {"location": DIRECTORY_PATH}),
        "/huge": Reply(200, b'{"keys": []' + b" " * 200_000 + b"}")})
    other = Site(OTHER_DIRECTORY, {
        DIRECTORY_PATH: Reply(200, directory_document([public_bytes(OTHER_KEY)]))})
    with serve(operator), serve(other):
        yield operator.origin, other.origin


def _guard(tmp_path: Path, **options: Any) -> SiteGuard:
    store = SiteStore(tmp_path / "site.sqlite")
    store.save(SiteRules(sections=()), now=0.0, author="webmaster")
    fetcher = DirectoryFetcher(allowed=(ipaddress.ip_network("127.0.24.0/24"),))
    return SiteGuard(store, crawlers=CRAWLERS, resolver=Resolver(), signatures=fetcher,
                     **options)


def _signed(key: Ed25519PrivateKey, agent: str, url: str, *, ago_s: float = 0.0
            ) -> dict[str, str]:
    signer = RequestSigner(key, agent, clock=lambda: time.time() - ago_s)
    return dict(signer.headers("GET", url))


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_each_outcome_is_logged(kind: str, tmp_path: Path,
                                directories: tuple[str, str]) -> None:
    operator, other = directories
    guard = _guard(tmp_path)
    agent = operator + DIRECTORY_PATH
    with _served(kind, guard) as url:
        with client_from(ELSEWHERE, url, SEARCH_UA) as search:
            # signed with the operator's key: verified by the signature, whatever the address
            assert search.get("/a", headers=_signed(SEARCH_KEY, agent, url)).status_code == 200
            # signed for another site: tampered
            wrong = _signed(SEARCH_KEY, agent, "http://127.0.24.99:1")
            assert search.get("/b", headers=wrong).status_code == 200
            # expired an hour ago
            assert search.get("/c", headers=_signed(SEARCH_KEY, agent, url,
                                                    ago_s=3600)).status_code == 200
            # a valid signature, but from a directory that does not speak for ExampleSearch:
            # the address decides, and it is not theirs
            assert search.get("/d", headers=_signed(OTHER_KEY, other + DIRECTORY_PATH,
                                                    url)).status_code == 200
            # a key the operator's directory does not list
            assert search.get("/e", headers=_signed(OTHER_KEY, agent, url)).status_code == 200
        with client_from(IN_RANGE, url, SEARCH_UA) as in_range:
            # the directory redirects: the signature cannot be checked, the ranges decide
            assert in_range.get("/f", headers=_signed(SEARCH_KEY, operator + "/moved",
                                                      url)).status_code == 200
            assert in_range.get("/g", headers=_signed(SEARCH_KEY, operator + "/huge",
                                                      url)).status_code == 200
        with client_from(ELSEWHERE, url, OTHER_UA) as stranger:
            # a robot no list knows, signed by its own directory: verified by the signature
            assert stranger.get("/h", headers=_signed(OTHER_KEY, other + DIRECTORY_PATH,
                                                      url)).status_code == 200
    rows = {r.target: r for r in guard.store.visits()}
    assert {t: (r.verification, r.verified_by) for t, r in rows.items()} == {
        "/a": ("verified", "signature"),
        "/b": ("invalid", ""),
        "/c": ("invalid", ""),
        "/d": ("forged", ""),
        "/e": ("invalid", ""),
        "/f": ("verified", "ranges"),
        "/g": ("verified", "ranges"),
        "/h": ("verified", "signature"),
    }
    assert "expired" in rows["/c"].how
    assert "not in the directory" in rows["/e"].how
    # the configuration page's visits say what verified each
    with serve_asgi(create_site_app(guard.store), "127.0.24.3") as page_url, \
            httpx.Client(base_url=page_url, trust_env=False) as client:
        visits = client.get("/access").text
    assert "verified by signature" in visits and "verified by ranges" in visits
    assert ">invalid<" in visits
    guard.store.close()


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_crawler_can_be_required_to_sign(kind: str, tmp_path: Path,
                                           directories: tuple[str, str]) -> None:
    operator, _ = directories
    guard = _guard(tmp_path, require_signature=["ExampleSearch"])
    with _served(kind, guard) as url, client_from(IN_RANGE, url, SEARCH_UA) as search:
        unsigned = search.get("/a")
        signed = search.get("/b", headers=_signed(SEARCH_KEY, operator + DIRECTORY_PATH, url))
    assert unsigned.status_code == 403
    assert 'tag="web-bot-auth"' in unsigned.headers["accept-signature"]
    assert signed.status_code == 200 and signed.text == "page /b"
    rows = {r.target: r for r in guard.store.visits()}
    assert (rows["/a"].action, rows["/a"].status) == ("refuse", 403)
    assert (rows["/b"].verification, rows["/b"].verified_by) == ("verified", "signature")
    guard.store.close()


def test_requiring_signatures_needs_a_way_to_check_them(tmp_path: Path) -> None:
    store = SiteStore(tmp_path / "site.sqlite")
    with pytest.raises(ConfigError, match="require_signature"):
        SiteGuard(store, require_signature=["ExampleSearch"])
    store.close()


def test_a_log_from_before_signatures_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    SiteStore(path).close()
    with sqlite3.connect(path) as db:  # the table as it was before verified_by
        db.execute("ALTER TABLE visits DROP COLUMN verified_by")
    store = SiteStore(path)
    guard = SiteGuard(store, crawlers=CRAWLERS, resolver=Resolver())
    with _served("asgi", guard) as url, client_from(IN_RANGE, url, SEARCH_UA) as search:
        assert search.get("/x").status_code == 200
    (row,) = store.visits()
    assert (row.verification, row.verified_by) == ("verified", "ranges")
    store.close()


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_replayed_signed_request_is_invalid(kind: str, tmp_path: Path,
                                              directories: tuple[str, str]) -> None:
    operator, _ = directories
    guard = _guard(tmp_path)
    with _served(kind, guard) as url, client_from(ELSEWHERE, url, SEARCH_UA) as search:
        signed = _signed(SEARCH_KEY, operator + DIRECTORY_PATH, url)
        assert search.get("/first", headers=signed).status_code == 200
        assert search.get("/again", headers=signed).status_code == 200  # the same nonce
        fresh = _signed(SEARCH_KEY, operator + DIRECTORY_PATH, url)
        assert search.get("/fresh", headers=fresh).status_code == 200
    rows = {r.target: r for r in guard.store.visits()}
    assert rows["/first"].verification == "verified"
    assert rows["/again"].verification == "invalid" and "replayed" in rows["/again"].how
    assert rows["/fresh"].verification == "verified"
    guard.store.close()

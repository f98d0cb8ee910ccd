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

import polite.site.guard as guard_module
from polite.core.identity import (
    DIRECTORY_PATH,
    SignatureCheck,
    SignatureOutcome,
    directory_document,
)
from polite.core.site import (
    Enforcement,
    Field,
    RuleRow,
    Section,
    SiteRules,
    judge_signature,
    parse_crawlers,
)
from polite.errors import ConfigError
from polite.identity.directory import DirectoryFetcher
from polite.identity.keys import public_bytes
from polite.identity.signatures import RequestSigner
from polite.site import SiteGuard, SiteStore, load_crawlers
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
def directory_sites() -> Iterator[tuple[Site, Site]]:
    operator = Site(OPERATOR_DIRECTORY, {
        DIRECTORY_PATH: Reply(200, directory_document([public_bytes(SEARCH_KEY)])),
        "/moved": Reply(302, b"", {"location": DIRECTORY_PATH}),
        "/huge": Reply(200, b'{"keys": []' + b" " * 200_000 + b"}")})
    other = Site(OTHER_DIRECTORY, {
        DIRECTORY_PATH: Reply(200, directory_document([public_bytes(OTHER_KEY)]))})
    with serve(operator), serve(other):
        yield operator, other


@pytest.fixture
def directories(directory_sites: tuple[Site, Site]) -> tuple[str, str]:
    operator, other = directory_sites
    return operator.origin, other.origin


def _guard(tmp_path: Path, **options: Any) -> SiteGuard:
    store = SiteStore(tmp_path / "site.sqlite")
    store.save(SiteRules(sections=()), now=0.0, author="webmaster")
    fetcher = DirectoryFetcher(allowed=(ipaddress.ip_network("127.0.24.0/24"),))
    options.setdefault("host_names", [ASGI_HOST, WSGI_HOST])
    return SiteGuard(store, crawlers=CRAWLERS, resolver=Resolver(), signatures=fetcher,
                     **options)


def _signed(key: Ed25519PrivateKey, agent: str, url: str, *, ago_s: float = 0.0,
            validity_s: int = 60, nonce: bool = True) -> dict[str, str]:
    signer = RequestSigner(key, agent, clock=lambda: time.time() - ago_s,
                           validity_s=validity_s)
    headers = signer.headers("GET", url)
    if not nonce:
        created = int(time.time() - ago_s)
        fields = [(n, v) for n, v in headers if n == "Signature-Agent"]
        headers = signer.sign("GET", url, fields, ["@authority", "signature-agent"],
                              created=created, expires=created + validity_s, nonce=None)
    return dict(headers)


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
            # a robot no list knows, signed by a directory bound to no name: the directory
            # is not even fetched, and the robot stays unknown
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
        "/h": ("unknown", ""),
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


def _visits(guard: SiteGuard) -> dict[str, Any]:
    return {r.target: r for r in guard.store.visits()}


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_signature_made_for_another_site_is_refused(
        kind: str, tmp_path: Path, directory_sites: tuple[Site, Site]) -> None:
    operator, _ = directory_sites
    guard = _guard(tmp_path)
    agent = operator.origin + DIRECTORY_PATH
    with _served(kind, guard) as url, client_from(ELSEWHERE, url, SEARCH_UA) as search:
        # made for another site, replayed here with that site's Host
        elsewhere = _signed(SEARCH_KEY, agent, "https://victim-other-site.example/")
        answer = search.get("/replayed", headers={
            **elsewhere, "host": "victim-other-site.example"})
        assert answer.status_code == 200
        assert search.get("/mine", headers=_signed(SEARCH_KEY, agent, url)).status_code == 200
    rows = _visits(guard)
    assert rows["/replayed"].verification == "invalid"
    assert "not one of this site's host names" in rows["/replayed"].how
    assert (rows["/mine"].verification, rows["/mine"].verified_by) == ("verified",
                                                                       "signature")
    assert operator.requests == [DIRECTORY_PATH]  # for /mine alone
    guard.store.close()


def test_signatures_are_checked_only_for_the_sites_own_host_names(tmp_path: Path) -> None:
    store = SiteStore(tmp_path / "site.sqlite")
    with pytest.raises(ConfigError, match="host_names"):
        SiteGuard(store, crawlers=CRAWLERS, signatures=DirectoryFetcher())
    with pytest.raises(ConfigError, match="host_names"):
        SiteGuard(store, crawlers=CRAWLERS, signatures=DirectoryFetcher(),
                  host_names=["not a host/"])
    store.close()


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_signature_that_could_be_replayed_for_long_or_at_will_is_not_taken(
        kind: str, tmp_path: Path, directory_sites: tuple[Site, Site]) -> None:
    operator, _ = directory_sites
    guard = _guard(tmp_path)
    agent = operator.origin + DIRECTORY_PATH
    with _served(kind, guard) as url, client_from(ELSEWHERE, url, SEARCH_UA) as search:
        bare = _signed(SEARCH_KEY, agent, url, nonce=False)
        for path in ("/bare1", "/bare2"):
            assert search.get(path, headers=bare).status_code == 200
        assert search.get("/day", headers=_signed(SEARCH_KEY, agent, url,
                                                  validity_s=86_400)).status_code == 200
        assert search.get("/future", headers=_signed(SEARCH_KEY, agent, url,
                                                     ago_s=-4)).status_code == 200
        assert search.get("/window", headers=_signed(SEARCH_KEY, agent, url,
                                                     validity_s=300)).status_code == 200
    rows = _visits(guard)
    # no nonce: not checked at all (the address decides, and it is not theirs)
    assert [rows[p].verification for p in ("/bare1", "/bare2")] == ["forged", "forged"]
    assert rows["/day"].verification == "invalid"
    assert "valid for 86400 s, more than 300 s" in rows["/day"].how
    assert rows["/future"].verification == "invalid" and "future" in rows["/future"].how
    assert rows["/window"].verified_by == "signature"  # five minutes is taken
    assert operator.requests == [DIRECTORY_PATH]  # for /window alone
    guard.store.close()


def test_an_unexpired_nonce_is_never_forgotten(tmp_path: Path, directories: tuple[str, str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    operator, _ = directories
    monkeypatch.setattr(guard_module, "MAX_NONCES", 3)
    guard = _guard(tmp_path)
    agent = operator + DIRECTORY_PATH
    with _served("asgi", guard) as url, client_from(ELSEWHERE, url, SEARCH_UA) as search:
        first = _signed(SEARCH_KEY, agent, url)
        for n in range(3):
            headers = first if n == 0 else _signed(SEARCH_KEY, agent, url)
            assert search.get(f"/fresh{n}", headers=headers).status_code == 200
        # the table is full: a new signature is not taken, and nothing is forgotten
        assert search.get("/full", headers=_signed(SEARCH_KEY, agent, url)).status_code == 200
        assert search.get("/replay", headers=first).status_code == 200
    rows = _visits(guard)
    assert [rows[f"/fresh{n}"].verified_by for n in range(3)] == ["signature"] * 3
    assert rows["/full"].verification == "forged"  # the address decides
    assert rows["/replay"].verification == "invalid" and "replayed" in rows["/replay"].how
    guard.store.close()


FOO_UA = "FooBot/1.0"
THROTTLED = SiteRules(sections=(Section("Whole site", "/", "webmaster", (
    RuleRow("FooBot", Field.CRAWL_DELAY, "60"),)),),
    enforcement=Enforcement(throttle=True))


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_signature_proves_a_name_only_through_a_directory_bound_to_it(
        kind: str, tmp_path: Path, directories: tuple[str, str]) -> None:
    operator, other = directories
    guard = _guard(tmp_path, signature_agents={"FooBot": [OTHER_DIRECTORY]})
    guard.store.save(THROTTLED, now=1.0, author="webmaster")
    with _served(kind, guard) as url:
        with client_from(ELSEWHERE, url, FOO_UA) as forger:
            # FooBot's name, signed with another robot's key (from a directory this site
            # fetches, bound to ExampleSearch): the key is proven, not the name
            assert forger.get("/forged", headers=_signed(
                SEARCH_KEY, operator + DIRECTORY_PATH, url)).status_code == 200
        with client_from(IN_RANGE, url, FOO_UA) as foobot:
            # the real FooBot, from its own bound directory, keeps its own slot
            real = foobot.get("/real", headers=_signed(OTHER_KEY, other + DIRECTORY_PATH,
                                                       url))
            assert real.status_code == 200
            again = foobot.get("/again", headers=_signed(OTHER_KEY, other + DIRECTORY_PATH,
                                                         url))
            assert again.status_code == 429  # and is throttled in it
    rows = _visits(guard)
    assert (rows["/forged"].verification, rows["/forged"].verified_by) == ("unknown", "key")
    assert "proves the key, not the name FooBot" in rows["/forged"].how
    assert (rows["/real"].verification, rows["/real"].verified_by) == ("verified",
                                                                       "signature")
    with serve_asgi(create_site_app(guard.store), "127.0.24.3") as page_url, \
            httpx.Client(base_url=page_url, trust_env=False) as client:
        assert "unknown, its key signed" in client.get("/access").text
    guard.store.close()


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_required_signature_must_come_from_a_directory_bound_to_the_name(
        kind: str, tmp_path: Path, directories: tuple[str, str]) -> None:
    operator, other = directories
    with pytest.raises(ConfigError, match="no key directory is bound to 'FooBot'"):
        _guard(tmp_path, require_signature=["FooBot"])
    guard = _guard(tmp_path, require_signature=["FooBot"],
                   signature_agents={"FooBot": [other + DIRECTORY_PATH]})
    with _served(kind, guard) as url, client_from(ELSEWHERE, url, FOO_UA) as client:
        forged = client.get("/forged", headers=_signed(SEARCH_KEY, operator + DIRECTORY_PATH,
                                                       url))
        real = client.get("/real", headers=_signed(OTHER_KEY, other + DIRECTORY_PATH, url))
    assert forged.status_code == 403 and "accept-signature" in forged.headers
    assert real.status_code == 200
    guard.store.close()


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_a_directory_bound_to_no_robot_is_never_fetched(kind: str, tmp_path: Path) -> None:
    lure = Site(OTHER_DIRECTORY, {f"/d{n}": Reply(200, b"{}") for n in range(5)})
    guard = _guard(tmp_path)
    with serve(lure), _served(kind, guard) as url, \
            client_from(ELSEWHERE, url, "x-bot") as client:
        for n in range(5):
            assert client.get(f"/p{n}", headers={
                "signature-agent": f'"{lure.origin}/d{n}"',
                "signature-input": f'sig1=("@authority" "signature-agent");created='
                                   f'{int(time.time())};expires={int(time.time()) + 60};'
                                   f'keyid="k";nonce="n{n}";tag="web-bot-auth"',
                "signature": "sig1=:AAAA:"}).status_code == 200
    assert lure.requests == []
    guard.store.close()


def test_googlebot_is_proven_only_by_the_exact_directory_host_google_publishes() -> None:
    crawlers = load_crawlers()
    googlebot, agent = crawlers.by_name("Googlebot"), crawlers.by_name("Google-Agent")
    assert googlebot is not None and agent is not None

    def signed_from(directory: str) -> SignatureCheck:
        return SignatureCheck(SignatureOutcome.VERIFIED, "signed by k", directory, "k")

    # a page anyone can publish under Google's DNS suffix proves nothing of Googlebot
    for host in ("sites.google.com", "x.googleusercontent.com", "crawl.googlebot.com"):
        assert judge_signature(googlebot, "Googlebot", signed_from(
            f"https://{host}/.well-known/http-message-signatures-directory"),
            googlebot.signature_agents) is None
    assert agent.signature_agents == ("agent.bot.goog",)
    proven = judge_signature(agent, "Google-Agent", signed_from("https://agent.bot.goog"),
                             agent.signature_agents)
    assert proven is not None and proven.by == "signature"
    assert judge_signature(agent, "Google-Agent", signed_from("https://evil.bot.goog"),
                           agent.signature_agents) is None

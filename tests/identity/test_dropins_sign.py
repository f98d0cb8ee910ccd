"""The drop-ins sign each request when given a key: httpx's transports and requests'
adapter (``sign_with=``) and Scrapy's middleware (``POLITE_SIGN_WITH``); what arrives at a
loopback site verifies, robots.txt included, and every request to the site carries one
User-Agent."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest
import requests

from polite.cli import main
from polite.cli.keys import directory_of
from polite.core.identity import SignatureOutcome, directory_keys
from polite.errors import ConfigError
from polite.identity.signatures import KeyDirectory, verify_signature
from polite.integrations import PoliteGate
from polite.integrations._gate import identity
from polite.integrations.httpx import AsyncPoliteTransport, PoliteTransport
from polite.integrations.requests import PoliteAdapter
from tests.sites import Reply, Site, serve

AGENT = "https://bot.example.test/.well-known/http-message-signatures-directory"


@pytest.fixture
def key(tmp_path: Path) -> tuple[str, KeyDirectory]:
    path = tmp_path / "robot.pem"
    assert main(["keys", "new", str(path)]) == 0
    return str(path), KeyDirectory(directory_keys(directory_of([str(path)], "--key")))


def _site(host: str) -> Site:
    return Site(host, {"/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"),
                       "/page": Reply(200, b"a page")})


def _verified(site: Site, directory: KeyDirectory) -> dict[str, SignatureOutcome]:
    """Each path's signature as polite's verifier finds it, robots.txt's too (the gate
    fetches it with a client of its own: it is a request to the site all the same)."""
    async def lookup(url: str) -> KeyDirectory:
        assert url == AGENT
        return directory

    found = {}
    for method, path, headers, _ in site.seen:
        check = asyncio.run(verify_signature(method, f"http://{headers['Host']}{path}",
                                             list(headers.items()), lookup))
        found[path] = check.outcome
    return found


def _agents(site: Site) -> dict[str, set[str]]:
    """The User-Agents each path arrived with."""
    found: dict[str, set[str]] = {}
    for _, path, headers, _ in site.seen:
        found.setdefault(path, set()).add(headers.get("User-Agent", ""))
    return found


SIGNED = {"/robots.txt": SignatureOutcome.VERIFIED, "/page": SignatureOutcome.VERIFIED}


def test_httpx_transport_signs(key: tuple[str, KeyDirectory]) -> None:
    """agent="ExampleBot" and httpx's own User-Agent: the site sees ExampleBot throughout,
    robots.txt signed as the page is."""
    path, directory = key
    site = _site("127.0.26.1")
    with serve(site), httpx.Client(transport=PoliteTransport(
            agent="ExampleBot", allow_private=True, default_delay_s=0.0, sign_with=path,
            signature_agent=AGENT)) as client:
        assert client.get(site.origin + "/page").status_code == 200
    assert [p for _, p, _, _ in site.seen] == ["/robots.txt", "/page"]
    assert _verified(site, directory) == SIGNED
    assert _agents(site) == {"/robots.txt": {"ExampleBot"}, "/page": {"ExampleBot"}}


def test_a_user_agent_that_names_the_agent_is_kept_for_every_request(
        key: tuple[str, KeyDirectory]) -> None:
    path, directory = key
    site = _site("127.0.26.5")
    given = "Mozilla/5.0 (compatible; ExampleBot/2.1; +https://bot.example.test/)"
    with serve(site), httpx.Client(
            headers={"User-Agent": given}, transport=PoliteTransport(
                agent="examplebot", allow_private=True, default_delay_s=0.0,
                sign_with=path, signature_agent=AGENT)) as client:
        assert client.get(site.origin + "/page").status_code == 200
    assert _verified(site, directory) == SIGNED
    assert _agents(site) == {"/robots.txt": {given}, "/page": {given}}


def test_async_httpx_transport_signs(key: tuple[str, KeyDirectory]) -> None:
    path, directory = key
    site = _site("127.0.26.2")

    async def run() -> int:
        async with httpx.AsyncClient(transport=AsyncPoliteTransport(
                agent="ExampleBot", allow_private=True, default_delay_s=0.0,
                sign_with=path, signature_agent=AGENT)) as client:
            return (await client.get(site.origin + "/page")).status_code

    with serve(site):
        assert asyncio.run(run()) == 200
    assert _verified(site, directory) == SIGNED
    assert _agents(site) == {"/robots.txt": {"ExampleBot"}, "/page": {"ExampleBot"}}


def test_requests_adapter_signs(key: tuple[str, KeyDirectory]) -> None:
    """No agent= and the session's User-Agent: robots.txt goes under it too, signed."""
    path, directory = key
    site = _site("127.0.26.3")
    adapter = PoliteAdapter(allow_private=True, default_delay_s=0.0, sign_with=path,
                            signature_agent=AGENT)
    with serve(site), requests.Session() as session:
        session.trust_env = False
        session.headers["User-Agent"] = "ExampleBot/1.0"
        session.mount("http://", adapter)
        assert session.get(site.origin + "/page").status_code == 200
    assert _verified(site, directory) == SIGNED
    assert _agents(site) == {"/robots.txt": {"ExampleBot/1.0"}, "/page": {"ExampleBot/1.0"}}


def test_requests_adapter_with_an_agent_sends_it_as_the_user_agent() -> None:
    site = _site("127.0.26.6")
    adapter = PoliteAdapter(agent="ExampleBot", allow_private=True, default_delay_s=0.0)
    with serve(site), requests.Session() as session:
        session.trust_env = False
        session.mount("http://", adapter)
        assert session.get(site.origin + "/page").status_code == 200
    assert _agents(site) == {"/robots.txt": {"ExampleBot"}, "/page": {"ExampleBot"}}


def test_a_shared_gate_signs_for_its_transports(key: tuple[str, KeyDirectory]) -> None:
    """The key is the gate's when transports share one: it fetches robots.txt for them."""
    path, directory = key
    site = _site("127.0.26.7")
    with PoliteGate(allow_private=True, default_delay_s=0.0, sign_with=path,
                    signature_agent=AGENT) as gate:
        with pytest.raises(ConfigError, match=r"sign_with= with gate=.*PoliteGate\(sign_with"):
            PoliteTransport(gate=gate, sign_with=path)
        with serve(site), httpx.Client(
                headers={"User-Agent": "ExampleBot/3"},
                transport=PoliteTransport(gate=gate)) as client:
            assert client.get(site.origin + "/page").status_code == 200
    assert _verified(site, directory) == SIGNED
    assert _agents(site) == {"/robots.txt": {"ExampleBot/3"}, "/page": {"ExampleBot/3"}}


def test_a_shared_key_or_a_lone_agent_is_refused_by_its_keyword(
        key: tuple[str, KeyDirectory]) -> None:
    path, _ = key
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match=r"sign_with .*readable by others"):
        PoliteTransport(sign_with=path)
    with pytest.raises(ConfigError, match="signature_agent needs sign_with"):
        PoliteAdapter(signature_agent=AGENT)
    os.chmod(path, 0o600)
    with pytest.raises(ConfigError, match="signature_agent 'ftp://x': not an absolute"):
        PoliteTransport(sign_with=path, signature_agent="ftp://x")


def test_scrapy_middleware_signs(key: tuple[str, KeyDirectory], tmp_path: Path) -> None:
    pytest.importorskip("scrapy")
    from tests.integrations.test_scrapy_crawl import crawl, settings

    path, directory = key
    site = _site("127.0.26.4")
    site.routes["/"] = Reply(200, b'<a href="/page">p</a>', {"content-type": "text/html"})
    with serve(site):
        stats, _ = crawl(tmp_path, {"a": site}, settings(  # type: ignore[dict-item]
            POLITE_SIGN_WITH=path, POLITE_SIGNATURE_AGENT=AGENT))
    assert stats.get("downloader/response_status_count/200", 0) >= 2
    assert _verified(site, directory) == {"/robots.txt": SignatureOutcome.VERIFIED,
                                          "/": SignatureOutcome.VERIFIED,
                                          "/page": SignatureOutcome.VERIFIED}
    farm_bot = "FarmBot/1.0 (+https://example.com/farmbot)"  # the settings' USER_AGENT
    assert _agents(site) == {"/robots.txt": {farm_bot}, "/": {farm_bot}, "/page": {farm_bot}}


@pytest.mark.parametrize(("user_agent", "agent", "expected"), [
    ("python-httpx/0.28.1", "ExampleBot", ("ExampleBot", "ExampleBot")),
    ("ExampleBot/1.0 (+https://e.example/bot)", "examplebot",
     ("examplebot", "ExampleBot/1.0 (+https://e.example/bot)")),
    ("Mozilla/5.0 (compatible; ExampleBot/2.1)", "ExampleBot",
     ("ExampleBot", "Mozilla/5.0 (compatible; ExampleBot/2.1)")),
    ("OtherExampleBot/1.0", "ExampleBot", ("ExampleBot", "ExampleBot")),  # another name
    ("", "ExampleBot", ("ExampleBot", "ExampleBot")),
    ("ExampleBot/1.0", "", ("ExampleBot", "ExampleBot/1.0")),
    ("", "", ("polite", "polite")),
])
def test_one_identity_for_every_request(user_agent: str, agent: str,
                                        expected: tuple[str, str]) -> None:
    assert identity(user_agent, agent) == expected

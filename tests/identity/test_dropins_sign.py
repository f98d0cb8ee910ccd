"""The drop-ins sign each request when given a key: httpx's transports and requests'
adapter (``sign_with=``) and Scrapy's middleware (``POLITE_SIGN_WITH``); what arrives at a
loopback site verifies."""

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
    async def lookup(url: str) -> KeyDirectory:
        assert url == AGENT
        return directory

    found = {}
    for method, path, headers, _ in site.seen:
        if path == "/robots.txt":
            continue  # fetched by polite's own client, not through the drop-in
        check = asyncio.run(verify_signature(method, f"http://{headers['Host']}{path}",
                                             list(headers.items()), lookup))
        found[path] = check.outcome
    return found


def test_httpx_transport_signs(key: tuple[str, KeyDirectory]) -> None:
    path, directory = key
    site = _site("127.0.26.1")
    with serve(site), httpx.Client(transport=PoliteTransport(
            agent="ExampleBot", allow_private=True, default_delay_s=0.0, sign_with=path,
            signature_agent=AGENT)) as client:
        assert client.get(site.origin + "/page").status_code == 200
    assert _verified(site, directory) == {"/page": SignatureOutcome.VERIFIED}


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
    assert _verified(site, directory) == {"/page": SignatureOutcome.VERIFIED}


def test_requests_adapter_signs(key: tuple[str, KeyDirectory]) -> None:
    path, directory = key
    site = _site("127.0.26.3")
    adapter = PoliteAdapter(agent="ExampleBot", allow_private=True, default_delay_s=0.0,
                            sign_with=path, signature_agent=AGENT)
    with serve(site), requests.Session() as session:
        session.trust_env = False
        session.mount("http://", adapter)
        assert session.get(site.origin + "/page").status_code == 200
    assert _verified(site, directory) == {"/page": SignatureOutcome.VERIFIED}


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
    assert _verified(site, directory) == {"/": SignatureOutcome.VERIFIED,
                                          "/page": SignatureOutcome.VERIFIED}

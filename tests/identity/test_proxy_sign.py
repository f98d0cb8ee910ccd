"""``polite serve --sign-with``: every request the proxy forwards arrives signed, plain
HTTP at a site whose middleware verifies each visit, and HTTPS read inside a CONNECT
tunnel (``--intercept-tls``) at a TLS origin; the key directory is fetched over HTTP."""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from polite.cli import main
from polite.cli.keys import directory_of
from polite.core.identity import DIRECTORY_PATH, SignatureOutcome
from polite.identity.directory import DirectoryFetcher
from polite.identity.signatures import verify_signature
from polite.site import SiteGuard, SiteMiddleware, SiteStore
from tests.commands import run
from tests.serving import polite_serve
from tests.site_servers import serve_asgi
from tests.sites import Reply, Site, serve
from tests.tls import make_authority

DIRECTORY_HOST = "127.0.27.1"
PLAIN_HOST = "127.0.27.2"
TLS_HOST = "127.0.27.3"
BOT = "ExampleBot/1.0 (+https://bot.example.test)"


async def _page(request: Request) -> PlainTextResponse:
    if request.url.path == "/robots.txt":
        return PlainTextResponse("User-agent: *\nAllow: /\n")
    return PlainTextResponse(f"page {request.url.path}")


def test_every_forwarded_request_is_signed(tmp_path: Path) -> None:
    key = tmp_path / "robot.pem"
    assert main(["keys", "new", str(key)]) == 0
    directory = Site(DIRECTORY_HOST, {DIRECTORY_PATH: Reply(
        200, directory_of([str(key)], "--key"),
        {"content-type": "application/http-message-signatures-directory+json"})})
    ca_dir = tmp_path / "ca"
    exported = run("ca", "export", "--ca-dir", str(ca_dir), timeout=30)
    assert exported.returncode == 0, exported.stderr
    polite_ca = tmp_path / "polite-ca.pem"
    polite_ca.write_text(exported.stdout)
    origins = make_authority(tmp_path, "origins-ca")
    tls_site = Site(TLS_HOST, {"/robots.txt": Reply(200, b"User-agent: *\nAllow: /\n"),
                               "/secure": Reply(200, b"secure page")},
                    tls=origins.server(TLS_HOST))
    store = SiteStore(tmp_path / "site.sqlite")
    fetcher = DirectoryFetcher(allowed=(ipaddress.ip_network("127.0.27.0/24"),))
    guard = SiteGuard(store, signatures=fetcher, host_names=[PLAIN_HOST],
                      signature_agents={"ExampleBot": [DIRECTORY_HOST]})
    app = SiteMiddleware(Starlette(routes=[Route("/{p:path}", _page)]), guard)
    with serve(directory), serve(tls_site), serve_asgi(app, PLAIN_HOST) as plain_url:
        agent = directory.origin + DIRECTORY_PATH
        with polite_serve("--store", "memory://", "--allow-private", "--default-delay-ms",
                          "0", "--intercept-tls", "--ca-dir", str(ca_dir), "--upstream-ca",
                          str(origins.path), "--sign-with", str(key), "--signature-agent",
                          agent) as api:
            proxy = str(api.base_url).rstrip("/")
            with httpx.Client(proxy=proxy, trust_env=False, timeout=30,
                              headers={"user-agent": BOT},
                              verify=ssl.create_default_context(cafile=polite_ca)) as client:
                assert client.get(plain_url + "/one").text == "page /one"
                assert client.get(plain_url + "/two").text == "page /two"
                secure = client.get(tls_site.origin + "/secure")
                assert secure.status_code == 200 and secure.text == "secure page"
        # checked while the key directory still answers
        # the plain site's middleware verified each visit by its signature
        visits = {r.target: (r.verification, r.verified_by) for r in store.visits()}
        assert visits["/one"] == ("verified", "signature")
        assert visits["/two"] == ("verified", "signature")
        store.close()
        # the TLS origin got signed requests too, for its own authority
        seen = {path: {k.lower(): v for k, v in headers.items()}
                for _, path, headers, _ in tls_site.seen}
        assert "/secure" in seen and "/robots.txt" in seen

        async def check(path: str) -> SignatureOutcome:
            found = await verify_signature("GET", f"https://{seen[path]['host']}{path}",
                                           list(seen[path].items()),
                                           DirectoryFetcher(allow_private=True))
            return found.outcome

        assert asyncio.run(check("/secure")) is SignatureOutcome.VERIFIED
        # polite's own robots.txt fetch is signed as well
        assert asyncio.run(check("/robots.txt")) is SignatureOutcome.VERIFIED


def test_serve_refuses_a_lone_signature_agent_and_reads_sign_with_from_its_config(
        tmp_path: Path) -> None:
    lone = run("serve", "--store", "memory://", "--signature-agent",
               "https://bot.example.test/d", timeout=60)
    assert lone.returncode == 2 and "--signature-agent needs --sign-with" in lone.stderr
    key = tmp_path / "robot.pem"
    assert main(["keys", "new", str(key)]) == 0
    key.chmod(0o640)
    config = tmp_path / "polite.toml"
    config.write_text(f'sign_with = "{key}"\n')
    shared = run("serve", "--store", "memory://", "--config", str(config), timeout=60)
    assert shared.returncode == 2 and "readable by others" in shared.stderr
    assert "Traceback" not in shared.stderr

"""``polite crawl --sign-with``: every request a crawl sends (robots.txt, sitemaps, pages,
each redirect hop) arrives signed at a loopback site, and verifies against the directory
``polite serve --key`` hosts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from polite.cli import main
from polite.core.identity import DIRECTORY_PATH, SignatureOutcome, directory_keys
from polite.identity.directory import DirectoryFetcher
from polite.identity.signatures import KeyDirectory, verify_signature
from polite.site import SiteGuard, SiteMiddleware, SiteStore
from tests.commands import run
from tests.serving import polite_serve
from tests.site_servers import serve_asgi
from tests.sites import Reply, Site, serve


def _pages() -> dict[str, Reply]:
    html = {"content-type": "text/html"}
    return {
        "/robots.txt": Reply(200, b"User-agent: *\nAllow: /\nSitemap: /sitemap.txt\n"),
        "/": Reply(200, b'<a href="/a">a</a> <a href="/r">r</a>', html),
        "/a": Reply(200, b"a", html),
        "/r": Reply(301, b"", {"location": "/b"}),
        "/b": Reply(200, b"b", html),
        "/c": Reply(200, b"c", html),
    }


def test_every_request_of_a_signed_crawl_verifies(tmp_path: Path) -> None:
    key = tmp_path / "robot.pem"
    assert main(["keys", "new", str(key)]) == 0
    site = Site("127.0.0.41", routes=dict(_pages()))
    with polite_serve("--store", "memory://", "--key", str(key)) as api, serve(site):
        agent = str(api.base_url.join(DIRECTORY_PATH))
        # the sitemap names the site's own URL, known once it listens
        site.routes["/sitemap.txt"] = Reply(200, f"{site.origin}/c\n".encode())
        done = run("crawl", site.origin + "/", "--out", str(tmp_path / "out"),
                   "--allow-network", "127.0.0.41", "--default-delay-ms", "0", "--max-pages",
                   "20", "--json", "--sign-with", str(key), "--signature-agent", agent,
                   timeout=120)
        assert done.returncode == 0, done.stderr

        async def lookup(url: str) -> KeyDirectory:
            # the directory as polite serve hosts it, over HTTP
            assert url == agent
            async with httpx.AsyncClient(trust_env=False) as client:
                answer = await client.get(url)
            assert answer.status_code == 200
            return KeyDirectory(directory_keys(answer.content))

        paths = [path for _, path, _, _ in site.seen]
        assert {"/robots.txt", "/sitemap.txt", "/", "/a", "/r", "/b", "/c"} <= set(paths)
        for method, path, headers, _ in site.seen:
            check = asyncio.run(verify_signature(
                method, f"http://{headers['Host']}{path}", list(headers.items()), lookup))
            assert check.outcome is SignatureOutcome.VERIFIED, (path, check.how)
            assert headers["Signature-Agent"] == f'sig1="{agent}"'


def test_signature_agent_without_key_is_refused(tmp_path: Path) -> None:
    done = run("crawl", "http://127.0.0.41/", "--out", str(tmp_path / "out"),
               "--signature-agent", "https://example.com/d", timeout=60)
    assert done.returncode == 2 and "--signature-agent needs --sign-with" in done.stderr


def test_a_bad_signature_agent_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "robot.pem"
    assert main(["keys", "new", str(key)]) == 0
    done = run("crawl", "http://127.0.0.41/", "--out", str(tmp_path / "out"), "--sign-with",
               str(key), "--signature-agent", "not a url", timeout=60)
    assert done.returncode == 2 and "--signature-agent" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_site_that_verifies_every_visit_sees_a_signed_crawl(tmp_path: Path) -> None:
    """The site's own middleware checks each request, the key directory fetched (and its
    own signature checked) from polite serve --key over HTTP."""
    key = tmp_path / "robot.pem"
    assert main(["keys", "new", str(key)]) == 0
    store = SiteStore(tmp_path / "site.sqlite")

    async def page(request: Request) -> Response:
        links = {"/": '<a href="/a">a</a> <a href="/r">r</a>', "/b": "b", "/a": "a"}
        if request.url.path == "/r":
            return Response(status_code=301, headers={"location": "/b"})
        return HTMLResponse(links.get(request.url.path, "x"))

    with polite_serve("--store", "memory://", "--key", str(key)) as api:
        agent = str(api.base_url.join(DIRECTORY_PATH))
        # the site binds ExampleBot's name to the directory its operator publishes
        guard = SiteGuard(store, signatures=DirectoryFetcher(allow_private=True),
                          host_names=["127.0.0.42"], signature_agents={"ExampleBot": [agent]})
        app = SiteMiddleware(Starlette(routes=[Route("/{p:path}", page)]), guard)
        with serve_asgi(app, "127.0.0.42") as url:
            done = run("crawl", url + "/", "--out", str(tmp_path / "out"), "--allow-network",
                       "127.0.0.42", "--default-delay-ms", "0", "--json", "--agent",
                       "ExampleBot", "--sign-with", str(key), "--signature-agent", agent,
                       timeout=120)
            assert done.returncode == 0, done.stderr
    visits = {r.target: (r.verification, r.verified_by, r.how) for r in store.visits()}
    store.close()
    assert {"/robots.txt", "/", "/a", "/r", "/b"} <= set(visits)
    for target, (verification, by, how) in visits.items():
        assert (verification, by) == ("verified", "signature"), (target, how)

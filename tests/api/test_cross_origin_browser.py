"""Pages of other origins against the local services, in a real headless Chromium: a page
on another loopback address posting feedback as text/plain, reserving through an ``<img>``
and submitting a form to the site page; and DNS rebinding (a name of the attacker's that
resolves to 127.0.0.1, by Chromium's --host-resolver-rules) against ``polite serve`` and
``polite site serve``, both real processes. None of it may change anything."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.browser import chromium
from tests.commands import command_line
from tests.serving import exchange, free_port, polite_serve
from tests.sites import Reply, Site, serve

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ROBOTS = Reply(200, b"User-agent: *\nAllow: /\n")
REBOUND = "attacker.test"
# The form the site page's editor posts, with one rule that shuts every robot out.
SHUT_OUT = {"sections": "1", "s0.name": "all", "s0.prefix": "/", "s0.r0.agent": "*",
            "s0.r0.field": "Disallow", "s0.r0.value": "/"}


@contextmanager
def site_serve(db: Path) -> Iterator[httpx.Client]:
    """``polite site serve`` on 127.0.0.1 (its default, no token); a client once it answers."""
    port = free_port()
    command = command_line("site", "serve", "--db", str(db), "--port", str(port))
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                              timeout=10) as client:
                deadline = time.monotonic() + 20
                while True:
                    try:
                        client.get("/robots.txt")
                        break
                    except httpx.TransportError:
                        assert time.monotonic() < deadline and process.poll() is None
                        time.sleep(0.1)
                yield client
        finally:
            process.terminate()
            process.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium taking attacker.test for 127.0.0.1: the state DNS rebinding leaves it in."""
    with chromium(f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1") as instance:
        yield instance


@pytest.fixture(scope="module")
def victims() -> Iterator[tuple[Site, Site]]:
    with serve(Site("127.0.32.11", {"/robots.txt": ROBOTS})) as a, \
            serve(Site("127.0.32.12", {"/robots.txt": ROBOTS})) as b:
        yield a, b


def attacker_page(api: str, site_page: str, paused: str, reserved: str) -> bytes:
    fields = "".join(f'<input name="{k}" value="{v}">' for k, v in SHUT_OUT.items())
    feedback = json.dumps([{"url": paused, "status": 503, "retryAfter": "86400"}])
    return f"""<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="f" method="post" action="{site_page}/save" target="sink">{fields}</form>
<script>
window.done = [];
const img = new Image();
img.onload = img.onerror = () => window.done.push("img");
img.src = "{api}/politeness?urls=" + encodeURIComponent("{reserved}") + "&reserve=true";
fetch("{api}/politeness/feedback", {{method: "POST", mode: "no-cors",
      headers: {{"Content-Type": "text/plain"}}, body: {json.dumps(feedback)}}})
  .then(() => window.done.push("feedback"), () => window.done.push("feedback"));
document.querySelector("iframe").onload = () => window.done.push("form");
document.getElementById("f").submit();
</script></body></html>""".encode()


def test_a_page_of_another_origin_changes_nothing(page: Page, victims: tuple[Site, Site],
                                                   tmp_path: Path) -> None:
    a, b = victims
    with polite_serve("--store", "memory://", "--allow-private",
                      "--default-delay-ms", "60000") as api, \
            site_serve(tmp_path / "site.sqlite") as site_page:
        robots_before = site_page.get("/robots.txt").text
        html = attacker_page(str(api.base_url).rstrip("/"), str(site_page.base_url).rstrip("/"),
                             f"{a.origin}/a", f"{b.origin}/a")
        with serve(Site("127.0.32.1", {"/": Reply(200, html,
                                                  {"Content-Type": "text/html"})})) as evil:
            page.goto(f"{evil.origin}/")
            page.wait_for_function("window.done && window.done.length === 3", timeout=15_000)
        # No pause from the feedback, no slot taken by the image, no rule saved by the form.
        verdicts = api.post("/politeness/verbose", json=[f"{a.origin}/a", f"{b.origin}/a"])
        assert [v["allowed"] for v in verdicts.json()] == [True, True], verdicts.text
        assert site_page.get("/robots.txt").text == robots_before
        assert "Disallow: /\n" not in robots_before
        # The same writes from no browser page (a crawler's own calls) still work.
        assert api.post("/politeness/verbose?reserve=true",
                        json=[f"{b.origin}/a"]).json()[0]["allowed"] is True
        assert api.post("/politeness/verbose", json=[f"{b.origin}/a"]).json()[0][
            "allowed"] is False


def test_dns_rebinding_reaches_neither_service(page: Page, tmp_path: Path) -> None:
    with polite_serve("--store", "memory://") as api, \
            site_serve(tmp_path / "site.sqlite") as site_page:
        robots_before = site_page.get("/robots.txt").text
        site_port = site_page.base_url.port
        answer = page.goto(f"http://{REBOUND}:{site_port}/")
        assert answer is not None and answer.status == 403
        status = page.evaluate("""async (fields) => (await fetch("/save", {method: "POST",
            body: new URLSearchParams(fields)})).status""", SHUT_OUT)
        assert status == 403
        assert site_page.get("/robots.txt").text == robots_before

        api_port = api.base_url.port
        answer = page.goto(f"http://{REBOUND}:{api_port}/dashboard")
        assert answer is not None and answer.status == 403
        status = page.evaluate("""async () => (await fetch("/delays/rebound.example", {
            method: "PUT", headers: {"Content-Type": "application/json"},
            body: JSON.stringify({delay: 5})})).status""")
        assert status == 403
        for path in ("/trace", "/env", "/dashboard/summary"):
            assert page.evaluate(f"async () => (await fetch('{path}')).status") == 403
        assert "rebound.example" not in api.get("/delays").text

        # Named as itself, the service is the operator's: localhost, its page's own writes.
        answer = page.goto(f"http://localhost:{api_port}/dashboard")
        assert answer is not None and answer.status == 200
        status = page.evaluate("""async () => (await fetch("/delays/kept.example", {
            method: "PUT", headers: {"Content-Type": "application/json"},
            body: JSON.stringify({delay: 5})})).status""")
        assert status == 200
        assert "kept.example" in api.get("/delays").text


def test_the_host_check_is_the_api_s_not_the_proxy_s(victims: tuple[Site, Site]) -> None:
    a, _ = victims
    with polite_serve("--store", "memory://", "--allow-private") as api:
        proxied = exchange(api, f"GET {a.origin}/robots.txt HTTP/1.1\r\nHost: {REBOUND}\r\n"
                           "Connection: close\r\n\r\n".encode())
        assert proxied.startswith(b"HTTP/1.1 200 "), proxied[:200]
        assert b"Allow: /" in proxied
        refused = exchange(api, f"GET /health HTTP/1.1\r\nHost: {REBOUND}\r\n"
                           "Connection: close\r\n\r\n".encode())
        assert refused.startswith(b"HTTP/1.1 403 "), refused[:200]
        assert b"--allowed-host" in refused
    with polite_serve("--store", "memory://", "--allowed-host", REBOUND) as api:
        named = exchange(api, f"GET /health HTTP/1.1\r\nHost: {REBOUND}:80\r\n"
                         "Connection: close\r\n\r\n".encode())
        assert named.startswith(b"HTTP/1.1 200 "), named[:200]

"""``polite mcp``'s fetch tool through the MCP SDK's own client, against real loopback
sites: robots.txt by status, redirects hop by hop, delays kept at the site by two servers
sharing one SQLite store, AI-usage preferences, private addresses, 402, pagination,
signatures, the wait that is too long, and the tools and resource beside fetch."""

from __future__ import annotations

import asyncio
import itertools
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from polite.cli import main
from polite.cli.keys import directory_of
from polite.core.identity import SignatureOutcome, directory_keys
from polite.identity.signatures import KeyDirectory, verify_signature
from tests.commands import command_line
from tests.mcp_server.mcp_client import (
    LOOPBACK,
    http_server,
    shared_session,
    stdio_session,
    text,
)
from tests.sites import Reply, Site, serve

if TYPE_CHECKING:
    from mcp import Client

HTML = {"content-type": "text/html; charset=utf-8"}
PAGE = Reply(200, b"<html><head><title>A page</title></head><body><article><h1>Hello</h1>"
             b"<p>" + b"Readable words of the page. " * 20 + b"</p></article></body></html>",
             HTML)


@pytest.fixture(scope="module")
def loopback() -> Iterator[Any]:
    """The module's ``polite mcp`` with :data:`LOOPBACK`'s options, started once for the
    tests that need no others (each start costs a second of CPU); ``loopback(work)`` runs
    ``work(client)``. Each test asks sites of its own, on addresses no other test uses."""
    with shared_session(*LOOPBACK) as run:
        yield run


@pytest.fixture(scope="module")
def http_loopback() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The module's ``polite mcp --http`` with :data:`LOOPBACK`'s options, started once for
    the tests of its HTTP transport that need no other option; its URL and process."""
    with http_server("--http", "127.0.0.1:0", *LOOPBACK) as served:
        yield served


def _closed_port(host: str) -> int:
    """A port on ``host`` that nothing listens on (connecting is refused at once)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def test_robots_txt_by_status_and_redirects(loopback: Any) -> None:
    """Each site answers its robots.txt differently: 200 with a rule, 404, 401, 403, 500,
    503, nobody listening, and a redirect to a file on another path; the page is fetched
    or refused as polite's status table says, and each answer says why."""
    robots = {
        "rule": Reply(200, b"User-agent: *\nAllow: /\nDisallow: /page\n"),
        "404": Reply(404, b"no"),
        "401": Reply(401, b"who are you"),
        "403": Reply(403, b"no robots"),
        "500": Reply(500, b"oops"),
        "503": Reply(503, b"busy"),
        "moved": Reply(301, b"", {"location": "/real-robots.txt"}),
    }
    sites = {name: Site(f"127.0.138.{i}", routes={"/robots.txt": reply, "/page": PAGE})
             for i, (name, reply) in enumerate(robots.items(), 1)}
    sites["moved"].routes["/real-robots.txt"] = Reply(200, b"User-agent: polite-mcp\n"
                                                           b"Disallow: /page\n")
    with serve(sites["rule"]), serve(sites["404"]), serve(sites["401"]), \
            serve(sites["403"]), serve(sites["500"]), serve(sites["503"]), \
            serve(sites["moved"]):
        # a page that redirects to a disallowed one: the hop is refused, not fetched
        sites["404"].routes["/hop"] = Reply(302, b"", {"location": sites["rule"].origin
                                                                   + "/page"})
        gone = f"http://127.0.138.9:{_closed_port('127.0.138.9')}"

        async def run(client: Client) -> dict[str, tuple[bool, str]]:
            found = {}
            for name, site in sites.items():
                result = await client.call_tool("fetch", {"url": site.origin + "/page"})
                found[name] = (bool(result.is_error), text(result))
            result = await client.call_tool("fetch", {"url": gone + "/page"})
            found["unreachable"] = (bool(result.is_error), text(result))
            result = await client.call_tool("fetch", {"url": sites["404"].origin + "/hop"})
            found["hop"] = (bool(result.is_error), text(result))
            return found

        found = loopback(run)
    error, said = found["rule"]
    assert error and "Disallow: /page (line 3)" in said
    error, said = found["404"]
    assert not error and "Readable words of the page." in said and "# Hello" in said
    assert "robots.txt: HTTP 404" in said and "everything allowed" in said
    for status in ("401", "403"):
        error, said = found[status]
        assert error and status in said and "nothing of the site may be fetched" in said
    for status in ("500", "503"):
        error, said = found[status]
        assert error and f"HTTP {status}" in said and "RFC 9309" in said
        assert "Retry after" in said  # asked again once robots.txt may answer
    error, said = found["unreachable"]
    assert error and "robots.txt cannot be read" in said and "Retry after" in said
    error, said = found["moved"]
    assert error and "Disallow: /page (line 2)" in said
    error, said = found["hop"]
    assert error and "Disallow: /page (line 3)" in said
    assert f"{sites['404'].origin}/hop redirects to {sites['rule'].origin}/page" in said
    # no page was asked of a site whose robots.txt refused it, nor the hop's target
    for name in ("rule", "401", "403", "500", "503", "moved"):
        assert "/page" not in sites[name].requests, name


def test_401_and_403_allow_everything_when_the_policy_says_so() -> None:
    """--on-401-403 allow reads a robots.txt answered 401 or 403 as RFC 9309 does."""
    site = Site("127.0.138.13", routes={"/robots.txt": Reply(403, b"no"), "/page": PAGE})
    with serve(site):
        async def run() -> tuple[bool, str]:
            async with stdio_session(*LOOPBACK, "--on-401-403", "allow") as client:
                result = await client.call_tool("fetch", {"url": site.origin + "/page"})
                return bool(result.is_error), text(result)

        error, said = asyncio.run(run())
    assert not error and "HTTP 403" in said and "Readable words" in said


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_crawl_delay_is_kept_at_the_site_by_two_servers_sharing_a_store(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Two server processes on one store (an SQLite file; a Redis, as a team of agents
    would), each asked for two pages of one site at once: the four arrive at the site at
    least the Crawl-delay apart."""
    delay_s = 1.0
    site = Site("127.0.138.11" if kind == "sqlite" else "127.0.138.12", routes={
        "/robots.txt": Reply(200, f"User-agent: *\nCrawl-delay: {delay_s:g}\n".encode()),
        **{f"/p{i}": PAGE for i in range(4)}})
    store = f"sqlite:///{tmp_path / 'mcp.sqlite'}" if kind == "sqlite" else \
        f"{request.getfixturevalue('redis_url')}?prefix=mcp{uuid.uuid4().hex[:10]}:"
    options = ("--store", store, "--allow-private")
    with serve(site):
        async def one(paths: list[str]) -> list[str]:
            async with stdio_session(*options) as client:
                results = await asyncio.gather(*(
                    client.call_tool("fetch", {"url": site.origin + p}) for p in paths))
            assert not any(r.is_error for r in results), [text(r) for r in results]
            return [text(r) for r in results]

        async def both() -> list[list[str]]:
            return await asyncio.gather(one(["/p0", "/p1"]), one(["/p2", "/p3"]))

        said = asyncio.run(both())
    pages = sorted(at for at, path in site.arrivals if path.startswith("/p"))
    assert len(pages) == 4
    gaps = [b - a for a, b in itertools.pairwise(pages)]
    assert min(gaps) >= delay_s, gaps
    assert any("robots.txt Crawl-delay" in s for answers in said for s in answers)


def test_ai_usage_preferences_refuse_with_their_source(loopback: Any) -> None:
    """A robots.txt Content-Signal ai-input=no refuses the default purpose; a response's
    Content-Usage header refuses train-ai, and so does a site's tdmrep.json; each refusal
    names its source."""
    signal = Site("127.0.138.21", routes={
        "/robots.txt": Reply(200, b"User-agent: *\nContent-Signal: ai-input=no\nAllow: /\n"),
        "/page": PAGE})
    usage = Site("127.0.138.22", routes={
        "/robots.txt": Reply(404),
        "/page": Reply(200, PAGE.body, {**HTML, "Content-Usage": "train-ai=n"}),
        "/free": PAGE})
    tdm = Site("127.0.138.23", routes={
        "/robots.txt": Reply(404), "/page": PAGE,
        "/.well-known/tdmrep.json": Reply(200, b'[{"location": "/*", "tdm-reservation": 1}]',
                                          {"content-type": "application/json"})})
    with serve(signal), serve(usage), serve(tdm):
        async def run(client: Client) -> list[tuple[bool, str]]:
            out = []
            result = await client.call_tool("fetch", {"url": signal.origin + "/page"})
            out.append((bool(result.is_error), text(result)))
            verdict = await client.call_tool("may_fetch", {"url": signal.origin + "/page"})
            out.append((False, str(verdict.structured_content)))
            async with stdio_session(*LOOPBACK, "--purpose", "train-ai") as trainer:
                for path in ("/page", "/free"):
                    result = await trainer.call_tool("fetch", {"url": usage.origin + path})
                    out.append((bool(result.is_error), text(result)))
                result = await trainer.call_tool("fetch", {"url": tdm.origin + "/page"})
                out.append((bool(result.is_error), text(result)))
            return out

        (error, said), (_, verdict), (usage_error, usage_said), (free_error, free_said), \
            (tdm_error, tdm_said) = loopback(run)
    assert error and "refuse ai-input" in said
    assert "robots.txt Content-Signal line 2: ai-input=no" in said
    assert "/page" not in signal.requests  # refused before the page was asked for
    assert "'verdict': 'refused'" in verdict and "Content-Signal line 2" in verdict
    assert usage_error and "refuse train-ai" in usage_said
    assert "Content-Usage header: train-ai=n" in usage_said
    assert not free_error and "AI-usage preferences for train-ai: train-ai: no preference" \
        in free_said
    assert tdm_error and "tdmrep.json /.well-known/tdmrep.json entry 1" in tdm_said
    assert tdm.requests == ["/robots.txt", "/.well-known/tdmrep.json"]  # not the page


def test_internal_addresses_are_refused() -> None:
    """With one loopback address let through (--allow-network), as a public site would
    be: another loopback address is refused, asked directly or reached by a redirect of
    the public one, and so is a URL that is not http(s)."""
    public = Site("127.0.138.31", routes={"/robots.txt": Reply(404), "/page": PAGE})
    internal = Site("127.0.138.32", routes={"/robots.txt": Reply(404), "/admin": PAGE})
    with serve(public), serve(internal):
        public.routes["/away"] = Reply(302, b"", {"location": internal.origin + "/admin"})

        async def run() -> list[tuple[bool, str]]:
            out = []
            async with stdio_session("--store", "memory://", "--default-delay-s", "0",
                                     "--allow-network", "127.0.138.31") as client:
                for url in (public.origin + "/page", internal.origin + "/admin",
                            public.origin + "/away", "file:///etc/passwd"):
                    result = await client.call_tool("fetch", {"url": url})
                    out.append((bool(result.is_error), text(result)))
            return out

        (ok, page), (direct, direct_said), (hop, hop_said), (scheme, scheme_said) = \
            asyncio.run(run())
    assert not ok and "Readable words" in page
    assert direct and "127.0.138.32 is a private or loopback address" in direct_said
    assert hop and "127.0.138.32 is a private or loopback address" in hop_said
    assert f"{public.origin}/away redirects to {internal.origin}/admin" in hop_said
    assert scheme and "only http and https URLs" in scheme_said
    assert internal.requests == []  # nothing at all reached the internal site


def test_payment_required_and_a_pause_asked_for(loopback: Any) -> None:
    """A 402 is answered with the price asked; a 429 with Retry-After pauses the host, and
    the next fetch of it is answered with the time left, not asked of the site."""
    site = Site("127.0.138.41", routes={
        "/robots.txt": Reply(404),
        "/paid": Reply(402, b"pay", {"crawler-price": "USD 0.05"}),
        "/busy": Reply(429, b"slow down", {"retry-after": "120"}), "/page": PAGE})
    with serve(site):
        async def run(client: Client) -> list[tuple[bool, str]]:
            out = []
            for path in ("/paid", "/busy", "/page"):
                result = await client.call_tool("fetch", {"url": site.origin + path})
                out.append((bool(result.is_error), text(result)))
            return out

        (error, said), (busy, busy_said), (paused, paused_said) = loopback(run)
    assert error and "HTTP 402" in said and "crawler-price USD 0.05" in said
    assert busy and "answered 429" in busy_said and "Retry-After: 120" in busy_said
    assert "Retry after 120" in busy_said or "Retry after 119" in busy_said
    assert paused and "back-off" in paused_said and "Retry after" in paused_said
    assert "/page" not in site.requests


def test_a_long_page_is_read_in_parts_from_one_request(loopback: Any) -> None:
    """The reference's pagination: max_length characters from start_index, the note saying
    where to go on; the parts make the whole and the site was asked for the page once."""
    words = " ".join(f"word{i}" for i in range(3000))
    site = Site("127.0.138.51", routes={
        "/robots.txt": Reply(404),
        "/long": Reply(200, f"<html><body><article><p>{words}</p></article></body></html>"
                       .encode(), HTML)})
    with serve(site):
        async def run(client: Client) -> list[str]:
            parts = []
            start = 0
            while True:
                result = await client.call_tool("fetch", {
                    "url": site.origin + "/long", "max_length": 5000,
                    "start_index": start})
                assert not result.is_error, text(result)
                said = text(result)
                parts.append(said)
                if "start_index of" not in said:
                    break
                start = int(said.split("start_index of ", 1)[1].split(" ", 1)[0])
                assert len(parts) < 20
            end = await client.call_tool("fetch", {
                "url": site.origin + "/long", "start_index": 10**6})
            parts.append(text(end))
            return parts

        parts = loopback(run)
    assert len(parts) >= 4
    content = "".join(p.split(":\n", 1)[1].split("\n\n<error>Content truncated", 1)[0]
                      .split("\n\n<polite", 1)[0] for p in parts[:-1])
    assert content.split() == words.split()
    assert "No more content available" in parts[-1]
    assert site.requests.count("/long") == 1


def test_every_request_is_signed_and_verifies(tmp_path: Path) -> None:
    key = tmp_path / "robot.pem"
    assert main(["keys", "new", str(key)]) == 0
    directory = KeyDirectory(directory_keys(directory_of([str(key)], "--key")))
    agent = "https://bot.example/.well-known/http-message-signatures-directory"
    site = Site("127.0.138.61", routes={"/robots.txt": Reply(200, b"User-agent: *\n"),
                                        "/page": PAGE})
    with serve(site):
        async def run() -> bool:
            async with stdio_session(*LOOPBACK, "--sign-with", str(key),
                                     "--signature-agent", agent) as client:
                result = await client.call_tool("fetch", {"url": site.origin + "/page"})
                return bool(result.is_error)

        assert not asyncio.run(run())

    async def lookup(url: str) -> KeyDirectory:
        assert url == agent
        return directory

    assert [path for _, path, _, _ in site.seen] == ["/robots.txt", "/page"]
    for method, path, headers, _ in site.seen:
        check = asyncio.run(verify_signature(method, f"http://{headers['Host']}{path}",
                                             list(headers.items()), lookup))
        assert check.outcome is SignatureOutcome.VERIFIED, (path, check.how)
        assert headers["User-Agent"].startswith("polite-mcp/")


def test_a_long_wait_is_answered_with_the_time_to_retry() -> None:
    site = Site("127.0.138.71", routes={
        "/robots.txt": Reply(200, b"User-agent: *\nCrawl-delay: 30\n"), "/a": PAGE,
        "/b": PAGE})
    with serve(site):
        async def run() -> list[tuple[bool, str]]:
            async with stdio_session(*LOOPBACK, "--max-wait-s", "2") as client:
                out = []
                for path in ("/a", "/b"):
                    result = await client.call_tool("fetch", {"url": site.origin + path})
                    out.append((bool(result.is_error), text(result)))
                return out

        (first, _), (second, said) = asyncio.run(run())
    assert not first
    assert second and "robots.txt Crawl-delay" in said and "Retry after" in said
    assert "/b" not in site.requests


def test_may_fetch_the_robots_resource_and_a_persons_own_request(loopback: Any) -> None:
    site = Site("127.0.138.81", routes={
        "/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private\nCrawl-delay: 0.2\n"
                             b"Sitemap: /sitemap.xml\n"),
        "/private": PAGE, "/open": PAGE})
    with serve(site):
        async def run(client: Client) -> tuple[object, object, str, str, list[str]]:
            tools = [t.name for t in (await client.list_tools()).tools]
            no = await client.call_tool("may_fetch", {"url": site.origin + "/private"})
            yes = await client.call_tool("may_fetch", {"url": site.origin + "/open"})
            authority = site.origin.split("//", 1)[1]
            robots = text(await client.read_resource(f"robots://http/{authority}"))
            person = text(await client.get_prompt("fetch", {"url": site.origin
                                                             + "/private"}))
            return no.structured_content, yes.structured_content, robots, person, tools

        no, yes, robots, person, tools = loopback(run)
    assert tools == ["fetch", "may_fetch"]
    assert isinstance(no, dict) and no["verdict"] == "disallowed"
    assert "Disallow: /private (line 2)" in no["why"]
    assert isinstance(yes, dict) and yes["verdict"] == "allowed"
    assert "Crawl-delay, Request-rate): 0.2 s" in robots and "Disallow: /private" in robots
    assert "Readable words" in person and "a person asked for this page themselves" in person
    assert site.requests.count("/private") == 1  # the person's request, not may_fetch's


def test_streamable_http_lists_and_fetches(
        http_loopback: tuple[str, subprocess.Popen[str]]) -> None:
    site = Site("127.0.138.91", routes={"/robots.txt": Reply(404), "/page": PAGE})
    url, _ = http_loopback
    with serve(site):
        from mcp import Client

        async def run() -> tuple[list[str], str]:
            async with Client(url, cache=None) as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                result = await client.call_tool("fetch", {"url": site.origin + "/page"})
                assert not result.is_error, text(result)
                return tools, text(result)

        tools, said = asyncio.run(run())
    assert tools == ["fetch", "may_fetch"] and "Readable words" in said


def test_an_http_message_past_its_size_is_refused_before_it_is_kept(
        http_loopback: tuple[str, subprocess.Popen[str]]) -> None:
    """The MCP SDK reads a request's whole body and parses it: past 1 MiB, by its
    Content-Length or as it arrives (chunked, no length), it is answered 413 before the SDK
    sees it, and the server answers the next message as before."""
    from polite.mcp._server import MAX_MESSAGE_BYTES

    headers = {"accept": "application/json, text/event-stream",
               "content-type": "application/json"}
    big = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' \
        + b"a" * MAX_MESSAGE_BYTES + b'"}}'

    def chunks() -> Iterator[bytes]:
        for at in range(0, len(big), 65536):
            yield big[at:at + 65536]

    url, process = http_loopback
    with httpx.Client(trust_env=False, timeout=30) as client:
        by_length = client.post(url, content=big, headers=headers)
        assert by_length.status_code == 413, by_length.text
        as_it_came = client.post(url, content=chunks(), headers=headers)
        assert as_it_came.status_code == 413, as_it_came.text
        assert "1048576 bytes at most" in as_it_came.text
        hello = client.post(url, headers=headers, json={
            "jsonrpc": "2.0", "id": 2, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "test", "version": "1"}}})
    assert hello.status_code == 200 and "polite" in hello.text, hello.text
    assert process.poll() is None


def test_a_refused_message_s_answer_reaches_a_client_still_sending_its_body(
        http_loopback: tuple[str, subprocess.Popen[str]]) -> None:
    """A message too large by its Content-Length is answered 413 before its body is read;
    the connection was then closed at once, and the kernel answered the client's next
    bytes with a reset, which a client still sending its body (as HTTP clients do) met
    before it read the answer. It is now closed for writing, and what the client still
    sends is read and dropped, so the client sends its body whole and reads the 413."""
    from polite.mcp._server import MAX_MESSAGE_BYTES

    url, process = http_loopback
    address = httpx.URL(url)
    size = MAX_MESSAGE_BYTES + 1
    with socket.create_connection((address.host, address.port), timeout=30) as sock:
        sock.sendall(f"POST {address.raw_path.decode()} HTTP/1.1\r\nHost: "
                     f"{address.host}:{address.port}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {size}\r\n\r\n".encode() + b"a" * 65536)
        # the answer has come (and, before, the connection was closed on the unread bytes)
        assert sock.recv(1, socket.MSG_PEEK) == b"H"
        sock.sendall(b"a" * (size - 65536))
        sock.shutdown(socket.SHUT_WR)
        answer = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"1048576 bytes at most" in answer
    assert process.poll() is None


def _until_closed(sock: socket.socket) -> bytes:
    """What ``sock`` is sent until the server closes it (within 30 s, however busy the
    machine: the server's bound in the test below is 1 s)."""
    sock.settimeout(30)
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def test_an_http_client_that_stalls_is_dropped_after_its_read_time() -> None:
    """uvicorn drops an idle connection only between requests: a client sending nothing,
    or a request's head a byte at a time, or a body that stops, held its connection and
    the message's buffer for ever. Past --client-read-s each is dropped (the body with a
    408), and the server answers the next message as before."""
    with http_server("--http", "127.0.0.1:0", "--client-read-s", "1", *LOOPBACK) \
            as (url, process):
        address = httpx.URL(url)
        where = (address.host, address.port)
        with socket.create_connection(where) as silent, \
                socket.create_connection(where) as half_head, \
                socket.create_connection(where) as half_body:
            half_head.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            half_body.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              b"Content-Type: application/json\r\n"
                              b"Accept: application/json, text/event-stream\r\n"
                              b"Content-Length: 100\r\n\r\n{\"jsonrpc\"")
            assert _until_closed(silent) == b""
            assert _until_closed(half_head) == b""
            answer = _until_closed(half_body)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"did not come in time" in answer
        hello = httpx.post(url, trust_env=False, timeout=30, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "test", "version": "1"}}},
            headers={"accept": "application/json, text/event-stream"})
        assert hello.status_code == 200 and "polite" in hello.text, hello.text
        assert process.poll() is None


def test_http_off_loopback_needs_a_token_and_the_token_is_asked() -> None:
    done = subprocess.run(command_line("mcp", "--http", "0.0.0.0:0",
                                       "--store", "memory://"), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "give --admin-token" in done.stderr
    done = subprocess.run(command_line("mcp", "--http", "localhost",
                                       "--store", "memory://"), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "expected HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr
    with http_server("--http", "127.0.0.1:0", "--admin-token", "s3cret", *LOOPBACK) \
            as (url, _):
        refused = httpx.post(url, json={}, trust_env=False)
        assert refused.status_code == 401
        let_in = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                            headers={"authorization": "Bearer s3cret",
                                     "accept": "application/json, text/event-stream"},
                            trust_env=False)
        assert let_in.status_code != 401

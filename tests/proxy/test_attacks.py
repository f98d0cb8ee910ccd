"""Attacks on the proxy of ``polite serve`` and inputs that once broke it, through a real
process: request smuggling by a ``Connection`` header that names the length, and the cache
poisoning it led to; the same trick on the response side; names and schemes the proxy
cannot serve."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.proxy.test_framing import raw_origin, zero_delay
from tests.serving import polite_serve, through


@pytest.fixture(scope="module")
def proxy() -> Iterator[httpx.Client]:
    """With the page cache on: a smuggled answer stored for another URL poisons it for all."""
    with polite_serve("--store", "memory://", "--allow-private", "--adaptive-factor", "0",
                      "--origin-timeout-s", "5") as api:
        yield api


@pytest.fixture(scope="module")
def guarded() -> Iterator[httpx.Client]:
    """As it runs by default: private and loopback addresses refused."""
    with polite_serve("--store", "memory://") as api:
        yield api


def _ask(api: httpx.Client, data: bytes, answers: int = 1) -> bytes:
    """Requests on a connection of their own; what comes back until ``answers`` answers
    framed by a length are whole, the connection closes, or 10 s pass."""
    with socket.create_connection(("127.0.0.1", int(api.base_url.port or 0)),
                                  timeout=10) as sock:
        sock.sendall(data)
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
                if _whole(got) >= answers:
                    break
        except TimeoutError:
            pass
        return got


def _whole(got: bytes) -> int:
    """How many answers with a Content-Length are whole at the start of ``got``."""
    count = 0
    while b"\r\n\r\n" in got:
        head, _, rest = got.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length: *(\d+)", head)
        if length is None or len(rest) < int(length.group(1)):
            break
        got = rest[int(length.group(1)):]
        count += 1
    return count


def _body(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


def test_a_connection_header_naming_the_length_smuggles_nothing(proxy: httpx.Client) -> None:
    """``Connection: content-length`` once made the proxy drop the length and still send
    the body, which the origin read as a second request (never checked against robots.txt
    nor the host's slot); its answer then went to the next client of that connection, and
    the cache kept it for that client's URL."""
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    replies = {
        "/a": b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nposted",
        "/smuggled": b"HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\n"
                     b"Content-Length: 8\r\n\r\nSMUGGLED",
        "/victim": b"HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\n"
                   b"Content-Length: 6\r\n\r\nvictim",
    }
    with raw_origin("127.0.61.1", replies) as site:
        zero_delay(proxy, site.host)
        posted = _ask(proxy, b"POST %s/a HTTP/1.1\r\nHost: %s\r\nConnection: content-length\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (site.origin.encode(), site.host.encode(),
                                                          len(smuggled), smuggled))
        assert posted.startswith(b"HTTP/1.1 200") and _body(posted) == b"posted"
        time.sleep(0.3)  # what the origin would answer to a second request has come back
        victims = [_ask(proxy, b"GET %s/victim HTTP/1.1\r\nHost: %s\r\nConnection: close"
                          b"\r\n\r\n" % (site.origin.encode(), site.host.encode()))
                   for _ in range(2)]  # the first from the origin, the second from the cache
        lines = [head.split(b"\r\n", 1)[0] for head, _ in site.seen]
    assert lines == [b"GET /robots.txt HTTP/1.1", b"POST /a HTTP/1.1", b"GET /victim HTTP/1.1"]
    assert site.seen[1][1] == smuggled  # the body went as the body it is
    assert b"content-length: %d" % len(smuggled) in site.seen[1][0].lower()
    assert [_body(answer) for answer in victims] == [b"victim", b"victim"]


def test_an_answer_whose_connection_header_names_its_length_still_has_it(
        proxy: httpx.Client) -> None:
    """The response side: an origin's ``Connection: keep-alive, content-length`` once left
    the client an answer with no framing on a kept-alive connection, read until the proxy's
    idle timeout (60 s)."""
    reply = (b"HTTP/1.1 200 OK\r\nConnection: keep-alive, content-length\r\n"
             b"Content-Length: 5\r\n\r\nhello")
    with raw_origin("127.0.61.2", {"/twin": reply}) as site, \
            httpx.Client(proxy=str(proxy.base_url).rstrip("/"), trust_env=False,
                         timeout=5) as client:
        zero_delay(proxy, site.host)
        for _ in range(2):  # and the connection goes on
            answer = client.get(f"{site.origin}/twin")
            assert answer.status_code == 200 and answer.content == b"hello"
            assert answer.headers["content-length"] == "5"


def test_a_connection_with_bytes_nobody_asked_for_is_not_used_again(
        proxy: httpx.Client) -> None:
    """An origin that follows its answer with the start of another (a head not yet whole)
    has lost the connection's framing: the next request goes on a new connection, not one
    whose first bytes would be read as its answer."""
    stray = b"HTTP/1.1 203 Stray\r\nX-Stray: "  # the next answer's status line its value
    replies = {"/first": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst" + stray,
               "/second": b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"}
    with raw_origin("127.0.61.3", replies) as site, through(proxy) as client:
        zero_delay(proxy, site.host)
        assert client.get(f"{site.origin}/first").content == b"first"
        time.sleep(0.3)  # the stray bytes are in
        answer = client.get(f"{site.origin}/second")
        assert answer.status_code == 200 and answer.content == b"second"


@pytest.mark.parametrize("private", ["refused", "allowed"])
def test_a_host_label_over_63_characters_is_a_400_that_says_so(
        guarded: httpx.Client, proxy: httpx.Client, private: str) -> None:
    """Such a name cannot be looked up (IDNA refuses it): the connection was dropped with
    no status, by an exception nobody caught (with private addresses allowed, robots.txt
    was said to be unreachable and the request refused for a minute)."""
    name = "a" * 64 + ".example"
    for wire in (b"GET http://%s/x HTTP/1.1\r\nHost: x\r\n\r\n" % name.encode(),
                 b"CONNECT %s:443 HTTP/1.1\r\nHost: x\r\n\r\n" % name.encode()):
        answer = _ask(guarded if private == "refused" else proxy, wire)
        assert answer.startswith(b"HTTP/1.1 400"), answer
        assert b"1 to 63 characters" in answer


def test_a_request_still_goes_on_after_a_bad_name(guarded: httpx.Client) -> None:
    """The refusal is an answer like the others: the connection is kept."""
    name = "b" * 70 + ".example"
    answer = _ask(guarded, b"GET http://%s/x HTTP/1.1\r\nHost: x\r\n\r\n"
                         b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                  % name.encode(), answers=2)
    assert answer.startswith(b"HTTP/1.1 400") and b"HTTP/1.1 200" in answer


def test_a_scheme_the_proxy_does_not_speak_is_named(proxy: httpx.Client) -> None:
    """``GET ftp://...`` went to the REST API as if it were a path, and got its 404."""
    answer = _ask(proxy, b"GET ftp://127.0.0.2/x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert b"http and https URLs only, not ftp" in answer


@pytest.mark.parametrize("shape", [
    b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",  # CL.TE
    b"Content-Length: 4\r\nContent-Length: 40\r\n\r\nbody",  # two lengths
    b"Transfer-Encoding: identity\r\n chunked\r\n\r\n0\r\n\r\n",  # obs-fold
    b"Content-Length:\r\n 4\r\n\r\nbody",  # obs-fold of a length
    b"Transfer-Encoding: chunked\r\nConnection: content-length, transfer-encoding\r\n"
    b"Content-Length: 4\r\n\r\n0\r\n\r\n",  # both, the length named in Connection
], ids=["cl-te", "two-lengths", "folded-coding", "folded-length", "both-named"])
def test_ambiguous_framing_is_a_400_and_reaches_no_origin(proxy: httpx.Client,
                                                          shape: bytes) -> None:
    with raw_origin("127.0.61.4", {"/x": b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}) \
            as site:
        zero_delay(proxy, site.host)
        answer = _ask(proxy, b"POST %s/x HTTP/1.1\r\nHost: %s\r\n%s"
                      % (site.origin.encode(), site.host.encode(), shape))
        assert answer.startswith(b"HTTP/1.1 400"), answer
        assert [head for head, _ in site.seen if not head.startswith(b"GET /robots.txt")] == []


def test_bare_line_feeds_are_a_400(proxy: httpx.Client) -> None:
    with raw_origin("127.0.61.5", {"/x": b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}) \
            as site:
        zero_delay(proxy, site.host)
        answer = _ask(proxy, b"POST %s/x HTTP/1.1\nHost: %s\nContent-Length: 4\n\nbody"
                      % (site.origin.encode(), site.host.encode()))
        assert answer.startswith(b"HTTP/1.1 400"), answer
        assert site.seen == []

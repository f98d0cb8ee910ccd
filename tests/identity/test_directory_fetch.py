"""The key directory a site fetches for a signed request: 200 only, no redirects, bounded
size and time, cached, failures cached five minutes at most, no private addresses unless
allowed. Real HTTP servers on loopback."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from polite.core.identity import DIRECTORY_PATH, SignatureOutcome, directory_document
from polite.identity.directory import FAILURE_TTL_S, DirectoryFetcher
from polite.identity.keys import public_bytes
from polite.identity.signatures import KeyDirectory, RequestSigner, verify_signature
from tests.sites import Reply, Site, serve

KEY = Ed25519PrivateKey.generate()
DOCUMENT = directory_document([public_bytes(KEY)])
HOST = "127.0.0.51"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _fetcher(clock: Clock | None = None, **options: object) -> DirectoryFetcher:
    allowed = (ipaddress.ip_network(f"{HOST}/32"),)
    return DirectoryFetcher(clock=clock or Clock(), allowed=allowed, **options)  # type: ignore[arg-type]


def _get(fetcher: DirectoryFetcher, *urls: str) -> list[KeyDirectory]:
    async def run() -> list[KeyDirectory]:
        try:
            return [await fetcher(url) for url in urls]
        finally:
            await fetcher.close()
    return asyncio.run(run())


def test_directory_is_fetched_and_kept() -> None:
    site = Site(HOST, {DIRECTORY_PATH: Reply(200, DOCUMENT, {
        "content-type": "application/http-message-signatures-directory+json",
        "cache-control": "max-age=600"})})
    with serve(site):
        url = site.origin + DIRECTORY_PATH
        first, second = _get(_fetcher(), url, url)
    assert first.error is None and list(first.keys) == [RequestSigner(KEY).keyid]
    assert second == first
    assert site.requests == [DIRECTORY_PATH]  # kept: fetched once


def test_a_redirect_is_not_followed() -> None:
    site = Site(HOST, {DIRECTORY_PATH: Reply(302, b"", {"location": "/elsewhere"}),
                       "/elsewhere": Reply(200, DOCUMENT)})
    with serve(site):
        (found,) = _get(_fetcher(), site.origin + DIRECTORY_PATH)
    assert found.error is not None and "302" in found.error and not found.keys
    assert site.requests == [DIRECTORY_PATH]


def test_an_oversized_directory_is_refused() -> None:
    padded = DOCUMENT[:-2] + b" " * 100_000 + b"}\n"
    site = Site(HOST, {DIRECTORY_PATH: Reply(200, padded)})
    with serve(site):
        (found,) = _get(_fetcher(), site.origin + DIRECTORY_PATH)
    assert found.error is not None and "over" in found.error and not found.keys


def test_a_slow_directory_is_given_up() -> None:
    site = Site(HOST, {DIRECTORY_PATH: Reply(200, DOCUMENT, delay_s=3.0)})
    with serve(site):
        (found,) = _get(_fetcher(timeout_s=0.5), site.origin + DIRECTORY_PATH)
    assert found.error is not None and "took over" in found.error


def test_not_json_and_404_are_failures() -> None:
    site = Site(HOST, {DIRECTORY_PATH: Reply(200, b"<html>")})
    with serve(site):
        bad, missing = _get(_fetcher(), site.origin + DIRECTORY_PATH, site.origin + "/none")
    assert bad.error is not None and "not JSON" in bad.error
    assert missing.error is not None and "404" in missing.error


def test_a_failure_is_kept_five_minutes_at_most() -> None:
    clock = Clock()
    routes = {DIRECTORY_PATH: Reply(503, b"")}
    site = Site(HOST, routes)  # type: ignore[arg-type]
    with serve(site):
        url = site.origin + DIRECTORY_PATH
        fetcher = _fetcher(clock)

        async def run() -> list[KeyDirectory]:
            found = [await fetcher(url)]
            clock.now += FAILURE_TTL_S - 1
            found.append(await fetcher(url))  # still the kept failure
            routes[DIRECTORY_PATH] = Reply(200, DOCUMENT)
            clock.now += 2
            found.append(await fetcher(url))  # asked again, now repaired
            await fetcher.close()
            return found

        failed, kept, repaired = asyncio.run(run())
    assert FAILURE_TTL_S <= 300
    assert failed.error is not None and kept.error == failed.error
    assert repaired.error is None and repaired.keys
    assert site.requests == [DIRECTORY_PATH, DIRECTORY_PATH]


def test_a_failed_refetch_keeps_the_directory_that_was_had() -> None:
    # draft-ietf-webbotauth-httpsig-protocol (commit 5a71ee1f), "Discovery Failure": a
    # directory that cannot be fetched is no evidence and evicts nothing; one that is
    # fetched and lacks a key is, and replaces what was kept.
    other = Ed25519PrivateKey.generate()
    routes = {DIRECTORY_PATH: Reply(200, DOCUMENT, {"cache-control": "max-age=60"})}
    site = Site(HOST, routes)
    with serve(site):
        url = site.origin + DIRECTORY_PATH
        clock = Clock()
        fetcher = _fetcher(clock)

        async def run() -> list[KeyDirectory]:
            found = [await fetcher(url)]
            routes[DIRECTORY_PATH] = Reply(503, b"down")
            clock.now += 61
            found.append(await fetcher(url))  # the outage: the old keys stay
            routes[DIRECTORY_PATH] = Reply(200, directory_document([public_bytes(other)]))
            clock.now += FAILURE_TTL_S + 1
            found.append(await fetcher(url))  # back, with the key rotated: replaced
            await fetcher.close()
            return found

        first, outage, rotated = asyncio.run(run())
    assert first.error is None and list(first.keys) == [RequestSigner(KEY).keyid]
    assert outage == first
    assert rotated.error is None and list(rotated.keys) == [RequestSigner(other).keyid]
    assert site.requests == [DIRECTORY_PATH] * 3


def test_private_addresses_are_refused_unless_allowed() -> None:
    site = Site(HOST, {DIRECTORY_PATH: Reply(200, DOCUMENT)})
    with serve(site):
        url = site.origin + DIRECTORY_PATH
        (refused,) = _get(DirectoryFetcher(), url)
        (allowed,) = _get(DirectoryFetcher(allow_private=True), url)
    assert refused.error is not None and not refused.keys
    assert allowed.error is None and allowed.keys
    assert site.requests == [DIRECTORY_PATH]  # the refused fetch never connected


def test_signed_request_outcomes_through_real_directories() -> None:
    good = Site(HOST, {DIRECTORY_PATH: Reply(200, DOCUMENT),
                       "/moved": Reply(301, b"", {"location": DIRECTORY_PATH}),
                       "/big": Reply(200, b"{" + b" " * 70_000 + b"}")})
    with serve(good):
        fetcher = _fetcher()

        async def outcome(agent_path: str, key: Ed25519PrivateKey = KEY) -> SignatureOutcome:
            signer = RequestSigner(key, good.origin + agent_path)
            headers = signer.headers("GET", "http://127.0.0.1:9/page")
            check = await verify_signature("GET", "http://127.0.0.1:9/page", headers, fetcher)
            return check.outcome

        async def run() -> list[SignatureOutcome]:
            try:
                return [await outcome(DIRECTORY_PATH), await outcome("/moved"),
                        await outcome("/big"),
                        await outcome(DIRECTORY_PATH, Ed25519PrivateKey.generate())]
            finally:
                await fetcher.close()

        found = asyncio.run(run())
    assert found == [SignatureOutcome.VERIFIED, SignatureOutcome.UNVERIFIABLE,
                     SignatureOutcome.UNVERIFIABLE, SignatureOutcome.INVALID]


def test_a_directory_signed_for_another_authority_is_refused() -> None:
    import time

    from polite.identity.signatures import sign_directory

    signer = RequestSigner(KEY)
    wrong = dict(sign_directory([signer], "http://127.0.0.99/x", DOCUMENT))  # served elsewhere
    other = RequestSigner(Ed25519PrivateKey.generate())
    site = Site(HOST, {DIRECTORY_PATH: Reply(200, DOCUMENT, wrong),
                       "/unlisted": Reply(200, DOCUMENT, {})})
    with serve(site):
        site.routes["/right"] = Reply(200, DOCUMENT, dict(sign_directory(
            [signer], site.origin + "/right", DOCUMENT)))
        site.routes["/stranger"] = Reply(200, DOCUMENT, dict(sign_directory(
            [other], site.origin + "/stranger", DOCUMENT)))
        # signed for the document, served with another key set in its place
        site.routes["/swapped"] = Reply(200, directory_document(
            [public_bytes(KEY), public_bytes(other.key)]),
            dict(sign_directory([signer, other], site.origin + "/swapped", DOCUMENT)))
        clock = Clock()
        clock.now = time.time()
        bad, right, stranger, unsigned, swapped = _get(
            _fetcher(clock), site.origin + DIRECTORY_PATH, site.origin + "/right",
            site.origin + "/stranger", site.origin + "/unlisted", site.origin + "/swapped")
    assert bad.error is not None and "does not verify" in bad.error and not bad.keys
    assert right.error is None and right.keys
    assert stranger.error is not None and "did not sign" in stranger.error
    assert unsigned.error is None and unsigned.keys  # earlier drafts did not sign it
    assert swapped.error is not None and "does not verify" in swapped.error
    assert not swapped.keys


STALLING_HOST = "127.0.117.1"


def test_a_declared_length_over_the_cap_ends_the_fetch_at_its_first_bytes() -> None:
    # The head declares a gigabyte, one byte of the body comes, and the server then holds
    # the connection open until the test ends: the fetch must not wait for the rest.
    release = threading.Event()
    with socket.socket() as listener:
        listener.bind((STALLING_HOST, 0))
        listener.listen(1)

        def answer() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n"
                                   b"Content-Type: application/json\r\n\r\n{")
                release.wait(60)

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        url = f"http://{STALLING_HOST}:{listener.getsockname()[1]}{DIRECTORY_PATH}"
        fetcher = DirectoryFetcher(clock=Clock(), timeout_s=60,
                                   allowed=(ipaddress.ip_network(f"{STALLING_HOST}/32"),))
        try:
            (found,) = _get(fetcher, url)
        finally:
            release.set()
            thread.join(10)
    assert found.error == "1000000000 bytes, over 65536" and not found.keys


def test_fetches_are_bounded_per_client_and_per_minute() -> None:
    site = Site(HOST, {f"/d{n}": Reply(200, DOCUMENT) for n in range(20)})
    clock = Clock()
    fetcher = _fetcher(clock, per_minute=8, per_client_minute=3)

    async def run() -> list[KeyDirectory]:
        found = [await fetcher(f"{site.origin}/d{n}", client="192.0.2.1") for n in range(4)]
        found.append(await fetcher(f"{site.origin}/d0", client="192.0.2.1"))  # kept
        found += [await fetcher(f"{site.origin}/d{n}", client=f"192.0.2.{n}")
                  for n in range(10, 16)]
        clock.now += 61  # a minute later, the first client may cause fetches again
        found.append(await fetcher(f"{site.origin}/d19", client="192.0.2.1"))
        return found

    with serve(site):
        found = asyncio.run(run())
    assert [f.error is None for f in found] == [
        True, True, True, False, True, True, True, True, True, True, False, True]
    assert "3 key directories fetched for 192.0.2.1's requests" in str(found[3].error)
    assert "8 key directories fetched in the last minute" in str(found[10].error)
    assert site.requests == [*(f"/d{n}" for n in range(3)),
                             *(f"/d{n}" for n in range(10, 15)), "/d19"]


def test_the_least_recently_used_directory_goes_first() -> None:
    site = Site(HOST, {f"/d{n}": Reply(200, DOCUMENT) for n in range(3)})
    fetcher = _fetcher(max_directories=2)
    with serve(site):
        urls = [f"{site.origin}/d{n}" for n in (0, 1, 0, 2, 0, 1)]
        assert all(found.error is None for found in _get(fetcher, *urls))
    # d0, used again before d2 came, stays; d1 went and is fetched again
    assert site.requests == ["/d0", "/d1", "/d2", "/d1"]


def test_a_deeply_nested_directory_is_a_failure_that_keeps_the_directory_that_was_had() -> None:
    # 60,000 "[" are under the size cap; the JSON decoder alone would recurse into them
    nested = b"[" * 60_000
    routes = {DIRECTORY_PATH: Reply(200, DOCUMENT, {"cache-control": "max-age=60"}),
              "/nested": Reply(200, nested)}
    site = Site(HOST, routes)
    with serve(site):
        clock = Clock()
        fetcher = _fetcher(clock)
        url = site.origin + DIRECTORY_PATH

        async def run() -> list[KeyDirectory]:
            found = [await fetcher(site.origin + "/nested"), await fetcher(url)]
            routes[DIRECTORY_PATH] = Reply(200, nested)
            clock.now += 61
            found.append(await fetcher(url))
            signer = RequestSigner(KEY, url)
            headers = signer.headers("GET", "http://127.0.0.1:9/page")
            check = await verify_signature("GET", "http://127.0.0.1:9/page", headers, fetcher)
            await fetcher.close()
            return [*found, check]  # type: ignore[list-item]

        never_had, first, refetched, check = asyncio.run(run())
    assert never_had.error is not None and "nested deeper than 64" in never_had.error
    assert not never_had.keys
    assert first.error is None and refetched == first
    assert check.outcome is SignatureOutcome.VERIFIED  # type: ignore[attr-defined]
    assert site.requests == ["/nested", DIRECTORY_PATH, DIRECTORY_PATH]

"""Fetching the key directory a signed request's ``Signature-Agent`` names, for a site that
verifies: 200 only, no redirect followed, bounded in size and time, kept as its
``Cache-Control`` says (within bounds), a failure kept five minutes at most (and never in
place of a directory that was had: the last good one stays), and never from a private
address unless the site allows its network."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from polite.clock import Clock, WallClock
from polite.core.identity import DirectoryError, directory_keys
from polite.fetch.http import HttpClient
from polite.fetch.robots import Network, PublicHosts, create_client
from polite.identity.signatures import KeyDirectory, directory_signature_problem

__all__ = ["DIRECTORY_MAX_BYTES", "DIRECTORY_TIMEOUT_S", "DirectoryFetcher"]

DIRECTORY_MAX_BYTES = 64 * 1024  # a JWK Set of a few keys is a few hundred bytes
DIRECTORY_TIMEOUT_S = 5.0  # the whole fetch: a signed request waits for it
# A directory is kept as long as its Cache-Control says, within these; a failure at most
# FAILURE_TTL_S (the drafts' advice: a broken directory must not be hammered, nor a
# repaired one ignored for long).
MIN_TTL_S = 60.0
DEFAULT_TTL_S = 3600.0
MAX_TTL_S = 24 * 3600.0
FAILURE_TTL_S = 300.0
MAX_DIRECTORIES = 1000


def _max_age(cache_control: str | None) -> float:
    if not cache_control:
        return DEFAULT_TTL_S
    if re.search(r"(?:^|,)\s*(?:no-store|no-cache)\b", cache_control, re.I):
        return MIN_TTL_S
    found = re.search(r"(?:^|,)\s*max-age\s*=\s*\"?(\d{1,10})", cache_control, re.I)
    if found is None:
        return DEFAULT_TTL_S
    return min(MAX_TTL_S, max(MIN_TTL_S, float(found.group(1))))


class DirectoryFetcher:
    """Key directories by URL, fetched once and kept. ``allow_private``: fetch from any
    address (a site's own test setup); ``allowed``: private networks let through all the
    same."""

    def __init__(self, *, clock: Clock | None = None, allow_private: bool = False,
                 allowed: Sequence[Network] = (), timeout_s: float = DIRECTORY_TIMEOUT_S,
                 max_bytes: int = DIRECTORY_MAX_BYTES) -> None:
        self._clock = clock or WallClock()
        self._guard = None if allow_private else PublicHosts(self._clock, allowed=allowed)
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._kept: dict[str, tuple[KeyDirectory, float]] = {}
        # per event loop: a WSGI site checks each request in a loop of its own
        self._pending: dict[tuple[int, str], asyncio.Future[KeyDirectory]] = {}

    async def __call__(self, url: str) -> KeyDirectory:
        """The directory at ``url``: from what is kept, or fetched (one fetch at a time per
        URL; requests arriving meanwhile wait for it)."""
        kept = self._kept.get(url)
        if kept is not None and kept[1] > self._clock():
            return kept[0]
        loop = asyncio.get_running_loop()
        key = (id(loop), url)
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[KeyDirectory] = loop.create_future()
        self._pending[key] = future
        try:
            directory, ttl = await self._fetch(url)
            if directory.error is not None and kept is not None and kept[0].error is None:
                # A directory that could not be had says nothing about its keys: the last
                # good one stays (else an operator's outage revokes its keys everywhere),
                # asked again after the failure's time. One that was had replaces it.
                directory = kept[0]
            if len(self._kept) >= MAX_DIRECTORIES:
                self._kept.clear()
            self._kept[url] = (directory, self._clock() + ttl)
            future.set_result(directory)
            return directory
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no warning when nobody else waited
            raise
        finally:
            del self._pending[key]

    async def _fetch(self, url: str) -> tuple[KeyDirectory, float]:
        # A client per fetch (they are rare, the answers being kept), so that no connection
        # outlives the event loop it was made in. No redirect is followed: the directory is
        # the named URL's, or none.
        async with create_client(guard=self._guard) as client:
            return await self._fetch_with(client, url)

    async def _fetch_with(self, client: HttpClient, url: str
                          ) -> tuple[KeyDirectory, float]:
        # One byte over the cap is enough to know the directory is too large.
        got = await client.get(
            url, {"Accept": "application/http-message-signatures-directory+json"},
            max_bytes=self.max_bytes + 1, deadline_s=self.timeout_s)
        if got.status is None:
            if got.failure == "timeout":
                return self._failed(f"took over {self.timeout_s:g} s")
            return self._failed(f"not fetched: {got.error}")
        if got.status != 200:
            return self._failed(f"answered {got.status}, not 200")
        declared = got.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            return self._failed(f"{declared} bytes, over {self.max_bytes}")
        if got.truncated:
            return self._failed(f"over {self.max_bytes} bytes")
        if got.error is not None:
            return self._failed(f"not fetched: {got.error}")
        body = got.body
        ttl = _max_age(got.headers.get("cache-control"))
        fields = got.raw_headers
        try:
            keys = directory_keys(body)
        except DirectoryError as exc:
            return self._failed(str(exc))
        problem = directory_signature_problem(url, fields, keys, body,
                                              now=self._clock())
        if problem is not None:
            return self._failed(f"its own signature: {problem}")
        return KeyDirectory(keys), ttl

    @staticmethod
    def _failed(why: str) -> tuple[KeyDirectory, float]:
        return KeyDirectory({}, why), FAILURE_TTL_S

    async def close(self) -> None:
        """Nothing is held between fetches; kept for symmetry with the other fetchers."""

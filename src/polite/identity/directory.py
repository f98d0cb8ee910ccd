"""Fetching the key directory a signed request's ``Signature-Agent`` names, for a site that
verifies: 200 only, no redirect followed, bounded in size and time (a declared
``Content-Length`` over the cap ends the fetch at its first bytes), kept as its
``Cache-Control`` says (within bounds, the least recently used going first when the
table is full), a failure kept five minutes at most (and never in place of a directory
that was had: the last good one stays), never from a private address unless the site
allows its network, and at most so many fetches a minute, from each client and in all."""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict, deque
from collections.abc import Sequence

from polite.clock import Clock, WallClock
from polite.core.identity import DirectoryError, directory_keys
from polite.fetch.http import FetchResult, HttpClient
from polite.fetch.robots import Network, PublicHosts, create_client
from polite.identity.signatures import KeyDirectory, directory_signature_problem

__all__ = ["DIRECTORY_MAX_BYTES", "DIRECTORY_TIMEOUT_S", "FETCHES_PER_CLIENT_MINUTE",
           "FETCHES_PER_MINUTE", "DirectoryFetcher"]

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
# Fetches a minute, at most: in all, and caused by one client's requests. A directory is
# fetched once and kept for an hour or so, so a real robot costs one fetch; a client
# naming a new directory with each request would otherwise make the site fetch at its
# bidding.
FETCHES_PER_MINUTE = 60
FETCHES_PER_CLIENT_MINUTE = 5
_MINUTE_S = 60.0


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
    same; ``per_minute`` and ``per_client_minute``: fetches a minute at most, in all and
    for one client's requests (the others are answered at once as not fetched, and not
    kept); ``max_directories``: how many are kept, the least recently used going first."""

    def __init__(self, *, clock: Clock | None = None, allow_private: bool = False,
                 allowed: Sequence[Network] = (), timeout_s: float = DIRECTORY_TIMEOUT_S,
                 max_bytes: int = DIRECTORY_MAX_BYTES,
                 per_minute: int = FETCHES_PER_MINUTE,
                 per_client_minute: int = FETCHES_PER_CLIENT_MINUTE,
                 max_directories: int = MAX_DIRECTORIES) -> None:
        self._clock = clock or WallClock()
        self._guard = None if allow_private else PublicHosts(self._clock, allowed=allowed)
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.per_minute = per_minute
        self.per_client_minute = per_client_minute
        self.max_directories = max_directories
        self._kept: OrderedDict[str, tuple[KeyDirectory, float]] = OrderedDict()
        self._fetched: deque[float] = deque()  # when each fetch of the last minute began
        self._by_client: dict[str, deque[float]] = {}
        # per event loop: a WSGI site checks each request in a loop of its own
        self._pending: dict[tuple[int, str], asyncio.Future[KeyDirectory]] = {}

    async def __call__(self, url: str, *, client: str | None = None) -> KeyDirectory:
        """The directory at ``url``: from what is kept, or fetched (one fetch at a time per
        URL; requests arriving meanwhile wait for it). ``client``: whose request asks
        (its address), for the fetches a minute each client may cause."""
        kept = self._kept.get(url)
        if kept is not None:
            self._kept.move_to_end(url)
            if kept[1] > self._clock():
                return kept[0]
        loop = asyncio.get_running_loop()
        key = (id(loop), url)
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        over = self._over_budget(client)
        if over is not None:
            return kept[0] if kept is not None and kept[0].error is None else \
                KeyDirectory({}, f"not fetched: {over}")
        future: asyncio.Future[KeyDirectory] = loop.create_future()
        self._pending[key] = future
        try:
            directory, ttl = await self._fetch(url)
            if directory.error is not None and kept is not None and kept[0].error is None:
                # A directory that could not be had says nothing about its keys: the last
                # good one stays (else an operator's outage revokes its keys everywhere),
                # asked again after the failure's time. One that was had replaces it.
                directory = kept[0]
            self._kept[url] = (directory, self._clock() + ttl)
            self._kept.move_to_end(url)
            while len(self._kept) > self.max_directories:
                self._kept.popitem(last=False)  # the least recently used
            future.set_result(directory)
            return directory
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no warning when nobody else waited
            raise
        finally:
            del self._pending[key]

    def _over_budget(self, client: str | None) -> str | None:
        """Why no fetch may start now (``None``: it may, and it is counted)."""
        now = self._clock()
        since = now - _MINUTE_S
        fetched = self._fetched
        while fetched and fetched[0] <= since:
            fetched.popleft()
        for name in [c for c, times in self._by_client.items() if times[-1] <= since]:
            del self._by_client[name]  # every entry is older than a minute
        if len(fetched) >= self.per_minute:
            return f"{self.per_minute} key directories fetched in the last minute already"
        mine = self._by_client.get(client) if client is not None else None
        if mine is not None:
            while mine and mine[0] <= since:
                mine.popleft()
            if len(mine) >= self.per_client_minute:
                return (f"{self.per_client_minute} key directories fetched for {client}'s "
                        "requests in the last minute already")
        fetched.append(now)
        if client is not None:
            self._by_client.setdefault(client, deque()).append(now)
        return None

    async def _fetch(self, url: str) -> tuple[KeyDirectory, float]:
        # A client per fetch (they are rare, the answers being kept), so that no connection
        # outlives the event loop it was made in. No redirect is followed: the directory is
        # the named URL's, or none.
        async with create_client(guard=self._guard) as client:
            return await self._fetch_with(client, url)

    async def _fetch_with(self, client: HttpClient, url: str
                          ) -> tuple[KeyDirectory, float]:
        # One byte over the cap is enough to know the directory is too large; so is a
        # Content-Length over it, read with the first bytes of the body.
        body = bytearray()
        cap = self.max_bytes

        def take(result: FetchResult, piece: bytes) -> bool:
            declared = result.headers.get("content-length") or ""
            if declared.isdigit() and int(declared) > cap:
                return False
            body.extend(piece)
            return True

        got = await client.get(
            url, {"Accept": "application/http-message-signatures-directory+json"},
            max_bytes=cap + 1, deadline_s=self.timeout_s, sink=take)
        if got.status is None:
            if got.failure == "timeout":
                return self._failed(f"took over {self.timeout_s:g} s")
            return self._failed(f"not fetched: {got.error}")
        if got.status != 200:
            return self._failed(f"answered {got.status}, not 200")
        declared = got.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            return self._failed(f"{declared} bytes, over {self.max_bytes}")
        if got.truncated or len(body) > self.max_bytes:
            return self._failed(f"over {self.max_bytes} bytes")
        if got.error is not None:
            return self._failed(f"not fetched: {got.error}")
        ttl = _max_age(got.headers.get("cache-control"))
        fields = got.raw_headers
        try:
            keys = directory_keys(bytes(body))
        except DirectoryError as exc:
            return self._failed(str(exc))
        problem = directory_signature_problem(url, fields, keys, bytes(body),
                                              now=self._clock())
        if problem is not None:
            return self._failed(f"its own signature: {problem}")
        return KeyDirectory(keys), ttl

    @staticmethod
    def _failed(why: str) -> tuple[KeyDirectory, float]:
        return KeyDirectory({}, why), FAILURE_TTL_S

    async def close(self) -> None:
        """Nothing is held between fetches; kept for symmetry with the other fetchers."""

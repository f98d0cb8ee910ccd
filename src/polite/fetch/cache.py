"""The page cache's driver: RFC 9111 decisions from :mod:`polite.core.cache.policy`, bytes
in the store (SQLite, Redis or memory), so what is cached survives a restart and is shared by
nodes on one Redis."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin

from polite.core.cache import codec
from polite.core.cache.policy import (
    Choice,
    Stored,
    cache_control,
    choose,
    header,
    invalidates,
    storable,
    storable_headers,
    updated,
    vary_key,
)
from polite.errors import InvalidURL
from polite.fetch.robots import normal_url, split_origin
from polite.storage.base import PageStore

__all__ = ["CacheStats", "PageCache"]

Headers = Sequence[tuple[bytes, bytes]]

DEFAULT_MAX_TOTAL_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_OBJECT_BYTES = 8 * 1024 * 1024
# Variants kept per URL (Vary): more than this and the oldest go.
MAX_VARIANTS = 8
# Stored blobs whose decoded variants are kept, in bytes (the variants hold as much again),
# the least recently used forgotten first; larger blobs are decoded each time. A hit then
# costs no decoding: an eighth of a hit's CPU on a 1 KB page.
DECODED_MAX_BYTES = 16 * 1024 * 1024
DECODED_MAX_BLOB_BYTES = 1024 * 1024


@dataclass(slots=True)
class CacheStats:
    hits: int = 0  # answered from the cache, the origin not asked
    misses: int = 0  # went to the origin (nothing usable stored)
    revalidated: int = 0  # the origin answered 304: the stored body served
    stored: int = 0
    invalidated: int = 0

    @property
    def ratio(self) -> float:
        """Hits (and 304 revalidations) over all cacheable lookups."""
        served = self.hits + self.revalidated
        total = served + self.misses
        return served / total if total else 0.0


class PageCache:
    """``clock`` is wall time: HTTP dates are wall-clock dates."""

    def __init__(self, store: PageStore, *, clock: Callable[[], float] = time.time,
                 max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
                 max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES,
                 keep_no_store_s: float = 0.0) -> None:
        self._store = store
        self.clock = clock
        self.max_total_bytes = max_total_bytes
        self.max_object_bytes = max_object_bytes
        self.keep_no_store_s = keep_no_store_s
        self.stats = CacheStats()
        # blob -> its variants: keyed by the bytes themselves, so that a blob another node
        # changed in a shared store is never answered with what was decoded before
        self._decoded: dict[bytes, tuple[Stored, ...]] = {}
        self._decoded_bytes = 0

    async def _variants(self, key: str) -> list[Stored]:
        return self._decoded_variants(await self._store.page_get(key))

    def _decoded_variants(self, blob: bytes | None) -> list[Stored]:
        """The variants a stored blob holds (none for None), decoded once while kept."""
        if not blob:
            return []
        decoded = self._decoded.pop(blob, None)
        if decoded is None:
            decoded = tuple(codec.decode(blob))
            if len(blob) > DECODED_MAX_BLOB_BYTES:
                return list(decoded)
            self._decoded_bytes += len(blob)
            while self._decoded_bytes > DECODED_MAX_BYTES:
                oldest = next(iter(self._decoded))
                del self._decoded[oldest]
                self._decoded_bytes -= len(oldest)
        self._decoded[blob] = decoded  # the most recently used last
        return list(decoded)

    async def lookup(self, method: bytes, url: str, headers: Headers, *,
                     key: str | None = None) -> Choice:
        """What to do with a GET or HEAD: serve, revalidate, fetch, or 504. ``key`` is
        ``normal_url(url)``, for a caller that has it already."""
        blob = await self._store.page_get(key or normal_url(url))
        choice = choose(method, headers, self._decoded_variants(blob) if blob else (),
                        self.clock())
        if choice.action == "serve":
            self.stats.hits += 1
        elif choice.action != "gateway_timeout":
            self.stats.misses += 1
        return choice

    def wants(self, method: bytes, request_headers: Headers, status: int,
              response_headers: Headers) -> bool:
        """Whether to keep the body of this response as it streams by."""
        if not storable(method, request_headers, status, response_headers,
                        keep_no_store_s=self.keep_no_store_s):
            return False
        length = header(response_headers, b"content-length")
        return not (length is not None and length.strip().isdigit()
                    and int(length) > self.max_object_bytes)

    async def store(self, url: str, request_headers: Headers, status: int, reason: bytes,
                    response_headers: Headers, body: bytes, request_time: float,
                    response_time: float) -> None:
        key = normal_url(url)
        no_store = "no-store" in cache_control(response_headers) \
            or "no-store" in cache_control(request_headers)
        entry = Stored(url, status, reason, storable_headers(response_headers), body,
                       request_time, response_time, vary_key(response_headers,
                                                             request_headers),
                       self.keep_no_store_s if no_store else None)
        variants = [v for v in await self._variants(key) if v.vary != entry.vary]
        variants = [*variants[-(MAX_VARIANTS - 1):], entry]
        await self._store.page_put(key, codec.encode(variants),
                                   max_total_bytes=self.max_total_bytes)
        self.stats.stored += 1

    async def freshen(self, stored: Stored, response_headers: Headers, request_time: float,
                      response_time: float) -> Stored:
        """A 304 arrived: the stored response, its fields updated, stored again."""
        self.stats.misses -= 1  # counted as a miss at lookup; it was a revalidation
        self.stats.revalidated += 1
        fresh = updated(stored, response_headers, request_time, response_time)
        key = normal_url(stored.url)
        variants = [fresh if v.vary == stored.vary else v for v in await self._variants(key)]
        if fresh not in variants:
            variants.append(fresh)
        await self._store.page_put(key, codec.encode(variants),
                                   max_total_bytes=self.max_total_bytes)
        return fresh

    async def invalidate_after(self, method: bytes, url: str, status: int,
                               response_headers: Headers) -> None:
        """An unsafe method's success makes what is stored for its URL, and for its
        Location and Content-Location on the same origin, invalid (4.4)."""
        if not invalidates(method, status):
            return
        targets = [url]
        for name in (b"location", b"content-location"):
            value = header(response_headers, name)
            if value:
                targets.append(urljoin(url, value.decode("latin-1").strip()))
        origin = split_origin(url)[0]
        for target in targets:
            try:
                if split_origin(target)[0] != origin:
                    continue
                await self._store.page_delete(normal_url(target))
            except InvalidURL:
                continue
            self.stats.invalidated += 1

    async def usage(self) -> tuple[int, int]:
        return await self._store.page_usage()

"""Fetching pages for the crawler, on aiohttp.

The rest of polite speaks httpx; pages go through aiohttp because a request costs it about
a fifth of the CPU (125 us against 650-900 us per request, 3,000 GETs of 8.5 KB pages on
loopback, measured with httpx's client and with its transport alone), and a crawler's CPU
is mostly its requests. Bodies are inflated here, not by aiohttp, so that a gzip bomb stops
at the cap however well it compresses: ``zlib``'s ``max_length`` bounds each step.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

__all__ = ["FetchResult", "PageFetcher"]

_READ = 1 << 16


@dataclass(slots=True)
class FetchResult:
    """What one GET gave: a response (``status``) or an ``error``, never an exception."""

    status: int | None = None
    reason: str = ""
    http_version: str = "HTTP/1.1"
    headers: Mapping[str, str] = field(default_factory=dict)
    raw_headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    truncated: bool = False
    answered_s: float | None = None  # until the response's head: the host's response time
    late_s: float = 0.0  # from the call to the request's head being written (a connection
    # to open or to wait for, a busy loop)
    elapsed_s: float = 0.0  # the whole exchange
    error: str | None = None
    charset: str | None = None

    def get_all(self, name: str) -> list[str]:
        """Every value of a response header (``X-Robots-Tag`` may come several times)."""
        lower = name.lower()
        return [value for key, value in self.raw_headers if key.lower() == lower]


class _Inflater:
    """gzip or deflate (zlib-wrapped or raw, as servers send either), bounded per step."""

    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._zlib = zlib.decompressobj(47 if encoding in ("gzip", "x-gzip") else 15)
        self._raw_tried = encoding == "gzip" or encoding == "x-gzip"

    def inflate(self, data: bytes, limit: int) -> bytes:
        try:
            return self._zlib.decompress(data, limit)
        except zlib.error:
            if self._raw_tried:
                raise
            self._raw_tried = True  # "deflate" sent without its zlib wrapper
            self._zlib = zlib.decompressobj(-15)
            return self._zlib.decompress(data, limit)

    def more(self, limit: int) -> bytes:
        """What is still held back by the last step's limit."""
        tail = self._zlib.unconsumed_tail
        return self._zlib.decompress(tail, limit) if tail else b""


async def _headers_sent(session: aiohttp.ClientSession, context: Any,
                        params: object) -> None:
    context.trace_request_ctx["sent"] = time.monotonic()


class PageFetcher:
    """GET with a body cap counted after decompression and a deadline for the whole
    exchange; ``per_host`` connections at most to one host."""

    def __init__(self, *, per_host: int = 2, connect_timeout_s: float = 10.0,
                 read_timeout_s: float = 30.0) -> None:
        self._per_host = per_host
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s,
                                              sock_read=read_timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=self._per_host,
                                             ttl_dns_cache=300)
            # No cookie jar (a site's REGP Cookie is sent as a header) and no proxy from the
            # environment; bodies come raw, to be inflated under the cap.
            # When the request's head went out later than its politeness slot (a connection
            # to open, a busy loop), the crawler moves the slot that much
            # (Politeness.note_late_start), so the spacing holds where the site sees it.
            ready = aiohttp.TraceConfig()
            ready.on_request_headers_sent.append(_headers_sent)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
                skip_auto_headers=("Accept-Encoding",), trace_configs=[ready])
        return self._session

    async def get(self, url: str, headers: Mapping[str, str], *, max_bytes: int,
                  deadline_s: float) -> FetchResult:
        session = self._open()
        result = FetchResult()
        started = time.monotonic()
        trace: dict[str, float] = {}
        try:
            async with asyncio.timeout(deadline_s):
                async with session.get(url, headers=dict(headers), allow_redirects=False,
                                       compress=None, trace_request_ctx=trace) as response:
                    result.answered_s = time.monotonic() - started
                    result.status = response.status
                    result.reason = response.reason or ""
                    result.http_version = f"HTTP/{response.version.major}." \
                                          f"{response.version.minor}" \
                        if response.version else "HTTP/1.1"
                    result.raw_headers = [(k.decode("latin-1"), v.decode("latin-1"))
                                          for k, v in response.raw_headers]
                    result.headers = response.headers
                    result.charset = response.charset
                    await self._read(response, result, max_bytes)
        except TimeoutError:
            result.error = f"took longer than {deadline_s:.0f} s"
        except aiohttp.ClientResponseError as exc:
            result.error = f"{type(exc).__name__}: {exc.message}"
        except aiohttp.ClientError as exc:
            text = str(exc)
            result.error = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        except (zlib.error, ValueError) as exc:
            result.error = f"the body cannot be decoded: {exc}"
        result.elapsed_s = time.monotonic() - started
        if "sent" in trace:
            result.late_s = trace["sent"] - started
        return result

    @staticmethod
    async def _read(response: aiohttp.ClientResponse, result: FetchResult,
                    max_bytes: int) -> None:
        encoding = response.headers.get("Content-Encoding", "").strip().lower()
        inflater = _Inflater(encoding) if encoding in ("gzip", "x-gzip", "deflate") else None
        body = bytearray()
        async for chunk in response.content.iter_chunked(_READ):
            if inflater is None:
                body += chunk
            else:
                piece = inflater.inflate(chunk, max_bytes + 1 - len(body))
                while piece:
                    body += piece
                    if len(body) > max_bytes:
                        break
                    piece = inflater.more(max_bytes + 1 - len(body))
            if len(body) > max_bytes:
                del body[max_bytes:]
                result.truncated = True
                break
        result.body = bytes(body)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

"""What a crawl writes to its folder: one JSON line per decided URL (``pages.jsonl``), the
fetched exchanges as WARC 1.1 request and response records (``warc/``), one line per site
with what its robots.txt said (``sites.jsonl``), and the items a user's page hook returned
(``items.jsonl``).

Each line is flushed as soon as it is written, before the frontier is told the URL is done:
a crawl killed at any moment has every acknowledged URL on disk, and at worst repeats a
line for a request that was in flight. Each run opens a WARC file of its own, so a record
cut by a kill stays at the end of the previous file.
"""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

__all__ = ["CrawlOutput", "Exchange"]

WARC_GZIP_LEVEL = 6  # zlib's default
# Headers that describe the bytes on the wire, not the decoded body kept in the record.
_WIRE_HEADERS = ("content-encoding", "transfer-encoding", "content-length")


class Exchange:
    """One fetch as the WARC records need it."""

    __slots__ = ("body", "http_version", "reason", "request_headers", "response_headers",
                 "status", "url")

    def __init__(self, url: str, request_headers: Sequence[tuple[str, str]], status: int,
                 reason: str, http_version: str,
                 response_headers: Sequence[tuple[str, str]], body: bytes) -> None:
        self.url = url
        self.request_headers = request_headers
        self.status = status
        self.reason = reason
        self.http_version = http_version
        self.response_headers = response_headers
        self.body = body


class CrawlOutput:
    """The files of one crawl folder, opened for appending."""

    def __init__(self, folder: Path, *, warc: bool = True, warc_prefix: str = "crawl") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._pages: IO[str] = (folder / "pages.jsonl").open("a", encoding="utf-8")
        self._items: IO[str] | None = None
        self._sites: IO[str] | None = None
        self._warc_file: IO[bytes] | None = None
        self._warc: WARCWriter | None = None
        if warc:
            warcs = folder / "warc"
            warcs.mkdir(exist_ok=True)
            number = len(list(warcs.glob(f"{warc_prefix}-*.warc.gz")))
            path = warcs / f"{warc_prefix}-{number:05d}.warc.gz"
            while path.exists():
                number += 1
                path = warcs / f"{warc_prefix}-{number:05d}.warc.gz"
            self._warc_file = path.open("wb")
            # Records are written plain into a buffer and gzipped here, each its own member
            # (as WARC readers expect): warcio's own gzip is level 9, several times the CPU
            # of zlib's default for a few per cent of size.
            self._warc = WARCWriter(io.BytesIO(), gzip=False, warc_version="WARC/1.1")
            self.warc_path: Path | None = path
        else:
            self.warc_path = None

    def page(self, record: dict[str, Any]) -> None:
        """One decided URL."""
        self._pages.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._pages.flush()

    def site(self, record: dict[str, Any]) -> None:
        """What one site's robots.txt said (``sites.jsonl``)."""
        if self._sites is None:
            self._sites = (self.folder / "sites.jsonl").open("a", encoding="utf-8")
        self._sites.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._sites.flush()

    def items(self, items: Sequence[object]) -> None:
        """What a user's page hook returned, a line each."""
        if not items:
            return
        if self._items is None:
            self._items = (self.folder / "items.jsonl").open("a", encoding="utf-8")
        for item in items:
            self._items.write(json.dumps(item, ensure_ascii=False, default=str) + "\n")
        self._items.flush()

    def exchange(self, exchange: Exchange, fetched_at: float) -> None:
        """The request and response records of one fetch (the body as decoded)."""
        writer = self._warc
        if writer is None:
            return
        date = datetime.fromtimestamp(fetched_at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        target = exchange.url
        request_line = f"GET {_request_target(target)} HTTP/1.1"
        request = writer.create_warc_record(
            target, "request", payload=io.BytesIO(b""), length=0,
            warc_headers_dict={"WARC-Date": date},
            http_headers=StatusAndHeaders(request_line, list(exchange.request_headers),
                                          is_http_request=True))
        headers = [(k, v) for k, v in exchange.response_headers
                   if k.lower() not in _WIRE_HEADERS]
        headers.extend((f"X-Crawler-{k}", v) for k, v in exchange.response_headers
                       if k.lower() in ("content-encoding", "transfer-encoding"))
        headers.append(("Content-Length", str(len(exchange.body))))
        response = writer.create_warc_record(
            target, "response", payload=io.BytesIO(exchange.body), length=len(exchange.body),
            warc_headers_dict={"WARC-Date": date},
            http_headers=StatusAndHeaders(f"{exchange.status} {exchange.reason}".strip(),
                                          headers, protocol=exchange.http_version))
        # What warcio's write_request_response_pair does, each record then gzipped alone.
        request.rec_headers.replace_header("WARC-Date", date)
        request.rec_headers.add_header("WARC-Concurrent-To",
                                       response.rec_headers.get_header("WARC-Record-ID"))
        assert self._warc_file is not None
        self._warc_file.write(self._member(response) + self._member(request))
        self._warc_file.flush()

    def _member(self, record: Any) -> bytes:
        assert self._warc is not None
        buffer = self._warc.out = io.BytesIO()
        self._warc.write_record(record)
        gzip = zlib.compressobj(WARC_GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS + 16)
        return gzip.compress(buffer.getvalue()) + gzip.flush()

    def close(self) -> None:
        self._pages.close()
        for stream in (self._items, self._sites):
            if stream is not None:
                stream.close()
        if self._warc_file is not None:
            self._warc_file.close()


def _request_target(url: str) -> str:
    rest = url.split("://", 1)[-1]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"

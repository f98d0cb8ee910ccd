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

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from fastwarc import GzipWriter
from fastwarc.warc import WarcRecord, WarcRecordType

__all__ = ["CrawlOutput", "Exchange"]

WARC_GZIP_LEVEL = 6  # zlib's default
# Headers that describe the bytes on the wire, not the decoded body kept in the record.
_WIRE_HEADERS = ("content-encoding", "transfer-encoding", "content-length")


class Exchange:
    """One fetch as the WARC records need it."""

    __slots__ = ("body", "http_version", "metadata", "reason", "request_headers",
                 "response_headers", "status", "url")

    def __init__(self, url: str, request_headers: Sequence[tuple[str, str]], status: int,
                 reason: str, http_version: str,
                 response_headers: Sequence[tuple[str, str]], body: bytes, *,
                 metadata: Mapping[str, Any] | None = None) -> None:
        self.url = url
        self.request_headers = request_headers
        self.status = status
        self.reason = reason
        self.http_version = http_version
        self.response_headers = response_headers
        self.body = body
        self.metadata = metadata  # written as a metadata record beside the response


def _line(record: object) -> str:
    """One JSON Lines record, the same compact form in every file of a crawl's folder (a
    value JSON has no form for, from a user's hook, written as its text)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"


class CrawlOutput:
    """The files of one crawl folder, opened for appending."""

    def __init__(self, folder: Path, *, warc: bool = True, warc_prefix: str = "crawl") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._pages: IO[str] = (folder / "pages.jsonl").open("a", encoding="utf-8")
        self._items: IO[str] | None = None
        self._sites: IO[str] | None = None
        self._warc_file: IO[bytes] | None = None
        self._warc: GzipWriter | None = None
        if warc:
            warcs = folder / "warc"
            warcs.mkdir(exist_ok=True)
            number = len(list(warcs.glob(f"{warc_prefix}-*.warc.gz")))
            path = warcs / f"{warc_prefix}-{number:05d}.warc.gz"
            while path.exists():
                number += 1
                path = warcs / f"{warc_prefix}-{number:05d}.warc.gz"
            self._warc_file = path.open("wb")
            # FastWARC builds the records (headers, record IDs, SHA-1 digests) and gzips each
            # as a member of its own, as WARC readers expect, at zlib's default level (level
            # 9 is several times the CPU for a few per cent of size). It takes half the CPU
            # of warcio for a page's two records (100 against 190 us for an 8.5 KB page).
            self._warc = GzipWriter(self._warc_file, compression_level=WARC_GZIP_LEVEL)
            self.warc_path: Path | None = path
        else:
            self.warc_path = None

    def page(self, record: dict[str, Any]) -> None:
        """One decided URL."""
        self._pages.write(_line(record))
        self._pages.flush()

    def site(self, record: dict[str, Any]) -> None:
        """What one site's robots.txt said (``sites.jsonl``)."""
        if self._sites is None:
            self._sites = (self.folder / "sites.jsonl").open("a", encoding="utf-8")
        self._sites.write(_line(record))
        self._sites.flush()

    def items(self, items: Sequence[object]) -> None:
        """What a user's page hook returned, a line each."""
        if not items:
            return
        if self._items is None:
            self._items = (self.folder / "items.jsonl").open("a", encoding="utf-8")
        for item in items:
            self._items.write(_line(item))
        self._items.flush()

    def exchange(self, exchange: Exchange, fetched_at: float) -> None:
        """The response and request records of one fetch (the body as decoded), each
        written to the file, whole, before this returns."""
        writer = self._warc
        if writer is None:
            return
        date = datetime.fromtimestamp(fetched_at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        target = exchange.url
        body = exchange.body
        head = [f"{exchange.http_version} {exchange.status} {exchange.reason}".rstrip()]
        head.extend(f"{k}: {v}" for k, v in exchange.response_headers
                    if k.lower() not in _WIRE_HEADERS)
        head.extend(f"X-Crawler-{k}: {v}" for k, v in exchange.response_headers
                    if k.lower() in ("content-encoding", "transfer-encoding"))
        head.append(f"Content-Length: {len(body)}")
        response = _record(WarcRecordType.response, target, date, _head(head) + body)
        request = _record(WarcRecordType.request, target, date, _head(
            [f"GET {_request_target(target)} HTTP/1.1",
             *(f"{k}: {v}" for k, v in exchange.request_headers)], "utf-8"))
        request_id = response.record_id
        assert request_id is not None
        request.headers["WARC-Concurrent-To"] = request_id
        response.write(writer, checksum_data=True, payload_digest=hashlib.sha1(body).digest())
        writer.finish()  # the end of a gzip member: each record is one
        request.write(writer, checksum_data=True, payload_digest=_EMPTY_SHA1)
        writer.finish()
        if exchange.metadata:
            meta = WarcRecord()
            meta.init_headers(WarcRecordType.metadata)
            meta.headers["WARC-Target-URI"] = target
            meta.headers["WARC-Date"] = date
            meta.headers["WARC-Concurrent-To"] = request_id
            meta.headers["Content-Type"] = "application/json"
            meta.set_bytes_content(json.dumps(exchange.metadata, ensure_ascii=False).encode())
            meta.write(writer, checksum_data=True)
            writer.finish()
        assert self._warc_file is not None
        self._warc_file.flush()

    def close(self) -> None:
        self._pages.close()
        for stream in (self._items, self._sites):
            if stream is not None:
                stream.close()
        if self._warc is not None:
            self._warc.flush()
        if self._warc_file is not None:
            self._warc_file.close()


_EMPTY_SHA1 = hashlib.sha1(b"").digest()


def _record(kind: WarcRecordType, target: str, date: str, block: bytes) -> WarcRecord:
    record = WarcRecord()
    record.init_headers(kind)
    record.headers["WARC-Target-URI"] = target
    record.headers["WARC-Date"] = date
    record.is_http = True  # Content-Type: application/http; msgtype=...
    record.set_bytes_content(block)
    return record


def _head(lines: list[str], encoding: str = "latin-1") -> bytes:
    """An HTTP message's head, in the bytes that were on the wire: a response's headers
    were read as Latin-1, a request's are sent as UTF-8 (as the page client encodes them)."""
    return ("\r\n".join(lines) + "\r\n\r\n").encode(encoding, "replace")


def _request_target(url: str) -> str:
    rest = url.split("://", 1)[-1]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"

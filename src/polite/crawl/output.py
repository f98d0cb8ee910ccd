"""What a crawl writes to its folder: one JSON line per decided URL (``pages.jsonl``), the
fetched exchanges as WARC 1.1 request and response records (``warc/``), one line per site
with what its robots.txt said (``sites.jsonl``), and the items a user's page hook returned
(``items.jsonl``).

Each line is flushed as soon as it is written, before the frontier is told the URL is done:
a crawl killed at any moment has every acknowledged URL on disk, and at worst repeats a
line for a request that was in flight. Each run opens a WARC file of its own, so a record
cut by a kill stays at the end of the previous file; a line cut short (a kill, a full disk)
is cut off the end of its file when the next run opens it.

A full disk: the folder keeps :data:`RESERVE_BYTES` of space in a file of its own
(``space.reserve``, removed when the crawl ends). The first write that finds no room gives
it up and is written whole, as are the pages in flight, and the crawl stops
(:class:`WriteFailed`): nothing fetched is lost or torn. A write that fails even so stops
the crawl all the same, its URL left queued.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from zlib_ng import zlib_ng

from polite.errors import PoliteError

__all__ = ["RESERVE_BYTES", "WARC_GZIP_LEVEL", "CrawlOutput", "Exchange", "WriteFailed"]

# zlib's fastest level: on the bench's farm (bench/crawl_vs_scrapy.py) it took a tenth less
# of a crawled page's CPU than level 6, zlib's default, for files a sixth larger (zlib-ng's
# level 1 is faster again, see _Warc).
WARC_GZIP_LEVEL = 1
# Room kept for the writes in flight when the disk fills: a page's records and line, and a
# commit of the store when it shares the disk, several times over.
RESERVE_BYTES = 512 * 1024
RESERVE_NAME = "space.reserve"
_LEAST_RESERVE_BYTES = 64 * 1024  # a disk with less free is full already
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


class WriteFailed(PoliteError):
    """A file of the crawl (its folder, its store) could not be written: the crawl stops,
    and what it could not record stays queued for the next run."""


class _Reserve:
    """Space held in the folder, given up once, when a write finds the disk full."""

    __slots__ = ("path", "why")

    def __init__(self, path: Path) -> None:
        self.path: Path | None = path
        self.why = ""  # the write that found the disk full
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                size = RESERVE_BYTES
                while True:  # on a disk nearly full already, what room there is
                    try:
                        os.posix_fallocate(fd, 0, size)
                        break
                    except OSError as exc:
                        if exc.errno not in _NO_ROOM or size <= _LEAST_RESERVE_BYTES:
                            raise
                        size //= 2
            finally:
                os.close(fd)
        except OSError:  # no room for it: a full disk then stops the crawl at once
            self.release()

    def release(self, why: str = "") -> bool:
        """Give the space back (``why``: the write that found no room); False when it was
        given back before (or never held)."""
        path, self.path = self.path, None
        if path is None:
            return False
        self.why = why
        try:
            path.unlink(missing_ok=True)
        except OSError:
            return False
        return True


class _Appender:
    """A file of the folder, appended to: what is written is held until :meth:`flush`
    writes it whole, giving up the folder's reserve if the disk is full; else
    :class:`WriteFailed`, the file then ending in a part of it."""

    __slots__ = ("_fd", "_held", "_reserve", "path")

    def __init__(self, path: Path, reserve: _Reserve) -> None:
        self.path = path
        self._reserve = reserve
        self._held = bytearray()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, data: bytes) -> int:
        self._held += data
        return len(data)

    def flush(self) -> None:
        held = self._held
        done = 0
        try:
            while done < len(held):
                try:
                    done += os.write(self._fd, held[done:] if done else held)
                except OSError as exc:
                    why = f"cannot write {self.path}: {exc.strerror or exc}"
                    if exc.errno not in _NO_ROOM or not self._reserve.release(why):
                        raise WriteFailed(why) from exc
        finally:
            del held[:done]

    def close(self) -> None:
        os.close(self._fd)


def _cut_torn(path: Path) -> None:
    """Cut a last line without its end off ``path`` (a write a kill or a full disk cut
    short): lines written after it would not parse either."""
    try:
        with path.open("rb+") as file:
            size = file.seek(0, os.SEEK_END)
            end = size
            while end > 0:
                start = max(0, end - 65_536)
                file.seek(start)
                chunk = file.read(end - start)
                if end == size and chunk.endswith(b"\n"):
                    return  # whole
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    file.truncate(start + newline + 1)
                    return
                end = start
            file.truncate(0)
    except FileNotFoundError:
        return
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


@lru_cache(maxsize=4)
def _second(whole: int) -> str:
    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def iso_utc(at: float, *, micro: bool = False, zone: str = "+00:00") -> str:
    """``at`` (seconds since the epoch) as an ISO 8601 UTC time, to the millisecond (the
    microsecond with ``micro``), as ``datetime.isoformat`` writes it. The date and time of
    the second are formatted once a second: 0.8 us a time, where a datetime built and
    formatted for each took 1.8 us (``isoformat``) and 2.4 us (``strftime``)."""
    whole = math.floor(at)
    micros = round((at - whole) * 1_000_000)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    if micro:
        return f"{_second(whole)}.{micros:06d}{zone}"
    return f"{_second(whole)}.{micros // 1000:03d}{zone}"


# One encoder for every line (it keeps no state between them): json.dumps with these
# options builds one a call, a fifth of a short line's time.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


def _line(record: object) -> str:
    """One JSON Lines record, the same compact form in every file of a crawl's folder (a
    value JSON has no form for, from a user's hook, written as its text)."""
    return _ENCODE(record) + "\n"


class CrawlOutput:
    """The files of one crawl folder, opened for appending."""

    def __init__(self, folder: Path, *, warc: bool = True, warc_prefix: str = "crawl",
                 warc_gzip_level: int = WARC_GZIP_LEVEL) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        for name in ("pages.jsonl", "items.jsonl", "sites.jsonl"):
            _cut_torn(folder / name)
        self._reserve = _Reserve(folder / RESERVE_NAME)
        self._pages = _Appender(folder / "pages.jsonl", self._reserve)
        self._items: _Appender | None = None
        self._sites: _Appender | None = None
        self._warc_file: _Appender | None = None
        self._warc: _Warc | None = None
        self._holding = False  # pages' lines and records written at flush(), not at once
        if warc:
            warcs = folder / "warc"
            warcs.mkdir(exist_ok=True)
            number = len(list(warcs.glob(f"{warc_prefix}-*.warc.gz")))
            path = warcs / f"{warc_prefix}-{number:05d}.warc.gz"
            while path.exists():
                number += 1
                path = warcs / f"{warc_prefix}-{number:05d}.warc.gz"
            self._warc_file = _Appender(path, self._reserve)
            self._warc = _Warc(self._warc_file, warc_gzip_level)
            self.warc_path: Path | None = path
        else:
            self.warc_path = None

    @property
    def full(self) -> str:
        """The write that found the disk full, the reserve given up for it ("" while it
        is kept): time to stop."""
        return self._reserve.why if self._reserve.path is None else ""

    def free_bytes(self) -> int:
        """The room left on the folder's disk, for this user (0 when it cannot be read)."""
        try:
            found = os.statvfs(self.folder)
        except OSError:
            return 0
        return found.f_bavail * found.f_frsize

    def release_reserve(self, why: str) -> bool:
        """Give up the folder's reserve (``why``: a write elsewhere, the store's, found
        the disk full); False when it was given up before."""
        return self._reserve.release(why)

    def hold(self, holding: bool) -> None:
        """While ``holding``, the lines of pages.jsonl and the WARC records are written to
        their files at :meth:`flush` (one write each for many pages), not each at once."""
        self._holding = holding
        if not holding:
            self.flush()

    def flush(self) -> None:
        """Write what is held of pages.jsonl and the WARC file."""
        self._pages.flush()
        if self._warc_file is not None:
            self._warc_file.flush()

    def page(self, record: dict[str, Any]) -> None:
        """One decided URL."""
        self._pages.write(_line(record).encode())
        if not self._holding:
            self._pages.flush()

    def site(self, record: dict[str, Any]) -> None:
        """What one site's robots.txt said (``sites.jsonl``)."""
        if self._sites is None:
            self._sites = _Appender(self.folder / "sites.jsonl", self._reserve)
        self._sites.write(_line(record).encode())
        self._sites.flush()

    def items(self, items: Sequence[object]) -> None:
        """What a user's page hook returned, a line each."""
        if not items:
            return
        if self._items is None:
            self._items = _Appender(self.folder / "items.jsonl", self._reserve)
        for item in items:
            self._items.write(_line(item).encode())
        self._items.flush()

    def exchange(self, exchange: Exchange, fetched_at: float) -> None:
        """The response and request records of one fetch (the body as decoded), and its
        metadata record if it has any, each a gzip member written to the file, whole,
        before this returns (at :meth:`flush` while holding)."""
        warc = self._warc
        if warc is None:
            return
        date = iso_utc(fetched_at, micro=True, zone="Z")
        target = exchange.url
        if "\r" in target or "\n" in target:  # a header line of its own: never
            target = target.replace("\r", "%0D").replace("\n", "%0A")
        body = exchange.body
        head = [f"{exchange.http_version} {exchange.status} {exchange.reason}".rstrip()]
        head.extend(f"{k}: {v}" for k, v in exchange.response_headers
                    if k.lower() not in _WIRE_HEADERS)
        head.extend(f"X-Crawler-{k}: {v}" for k, v in exchange.response_headers
                    if k.lower() in ("content-encoding", "transfer-encoding"))
        head.append(f"Content-Length: {len(body)}")
        response_id = warc.record(
            "response", target, date, "application/http; msgtype=response",
            _head(head) + body, payload_digest=_sha1_label(body))
        # a request has no payload: its digest is a constant, not worked out each time
        warc.record("request", target, date, "application/http; msgtype=request",
                    _head([f"GET {_request_target(target)} HTTP/1.1",
                           *(f"{k}: {v}" for k, v in exchange.request_headers)], "utf-8"),
                    payload_digest=_EMPTY_PAYLOAD_DIGEST, concurrent_to=response_id)
        if exchange.metadata:
            meta = json.dumps(exchange.metadata, ensure_ascii=False)
            warc.record("metadata", target, date, "application/json",
                        meta.encode("utf-8", "replace"), concurrent_to=response_id)
        assert self._warc_file is not None
        if not self._holding:
            self._warc_file.flush()

    def close(self) -> None:
        """Close the files (what a full disk left unwritten stays so) and give the reserve
        back."""
        with contextlib.suppress(WriteFailed):  # the crawl stopped for it already
            self.flush()
        for stream in (self._pages, self._items, self._sites, self._warc_file):
            if stream is not None:
                stream.close()
        self._reserve.release()


class _Warc:
    """WARC 1.1 records, each compressed as a gzip member of its own (as WARC readers
    expect) by zlib-ng at the level asked for, appended to ``file``.

    A record is a handful of header lines, its digests and its block, written here rather
    than by FastWARC: on the crawl bench's pages (5 KB), a page's two records took 70 us
    with FastWARC's writer at level 1 (its gzip members' deflate and end the largest part),
    40 to 46 us here, read back by warcio and FastWARC with their digests checked.
    zlib-ng's level 1 deflates such a page in 7.4 us where zlib takes 13.2; a crawl's WARC
    files come out the size FastWARC's were."""

    __slots__ = ("_file", "_ids", "_level")

    def __init__(self, file: _Appender, level: int) -> None:
        self._file = file
        self._level = level
        self._ids = _RecordIds()

    def record(self, kind: str, target: str, date: str, content_type: str, block: bytes, *,
               payload_digest: str = "", concurrent_to: str = "") -> str:
        """Write one record; returns its WARC-Record-ID."""
        record_id = self._ids.next()
        head = (f"WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Record-ID: {record_id}\r\n"
                f"WARC-Date: {date}\r\nWARC-Target-URI: {target}\r\n")
        if concurrent_to:
            head += f"WARC-Concurrent-To: {concurrent_to}\r\n"
        head += f"Content-Type: {content_type}\r\n"
        if payload_digest:
            head += f"WARC-Payload-Digest: {payload_digest}\r\n"
        head += (f"WARC-Block-Digest: {_sha1_label(block)}\r\n"
                 f"Content-Length: {len(block)}\r\n\r\n")
        # UTF-8, as WARC 1.1 writes its header values (a lone surrogate, which no URL the
        # crawl makes holds, replaced rather than the crawl stopped)
        self._file.write(zlib_ng.compress(head.encode("utf-8", "replace") + block
                                          + b"\r\n\r\n", self._level, wbits=31))
        return record_id


class _RecordIds:
    """WARC-Record-IDs: random (version 4) UUIDs, their bytes read from the system's
    source 256 at a time (``uuid.uuid4()`` took 2.6 us a record); a process forked with
    bytes left draws its own."""

    __slots__ = ("_at", "_pid", "_pool")

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0
        self._pid = 0

    def next(self) -> str:
        at = self._at
        if at >= len(self._pool) or self._pid != os.getpid():
            self._pool = os.urandom(4096)
            self._pid = os.getpid()
            at = 0
        self._at = at + 16
        number = int.from_bytes(self._pool[at:at + 16]) & _UUID_KEPT | _UUID_V4
        text = f"{number:032x}"
        return (f"<urn:uuid:{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-"
                f"{text[20:]}>")


# RFC 9562: version 4 in bits 48 to 51, the variant 10 in bits 64 and 65
_UUID_KEPT = ~((0xF << 76) | (0x3 << 62)) & ((1 << 128) - 1)
_UUID_V4 = (0x4 << 76) | (0x2 << 62)

# base 32 (RFC 4648), two letters at a time: a SHA-1 is 160 bits, sixteen 10-bit pairs
# (base64.b32encode works five bytes at a time in Python: three times as long)
_B32_PAIRS = tuple(a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
                   for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
_B32_SHIFTS = tuple(range(150, -1, -10))


def _sha1_label(data: bytes) -> str:
    """A WARC digest: ``sha1:`` and the SHA-1 of ``data`` in base 32."""
    number = int.from_bytes(hashlib.sha1(data).digest())
    return "sha1:" + "".join([_B32_PAIRS[number >> shift & 1023] for shift in _B32_SHIFTS])


_EMPTY_PAYLOAD_DIGEST = _sha1_label(b"")


def _head(lines: list[str], encoding: str = "latin-1") -> bytes:
    """An HTTP message's head, in the bytes that were on the wire: a response's headers
    were read as Latin-1, a request's are sent as UTF-8 (as the page client encodes them)."""
    return ("\r\n".join(lines) + "\r\n\r\n").encode(encoding, "replace")


def _request_target(url: str) -> str:
    rest = url.split("://", 1)[-1]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"

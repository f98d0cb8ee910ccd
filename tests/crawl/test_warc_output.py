"""The crawl's WARC records: read back by warcio and FastWARC, digests
checked, each record a gzip member of its own, on disk when ``exchange`` returns."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
import zlib
from datetime import UTC, datetime
from pathlib import Path

from fastwarc.warc import ArchiveIterator as FastIterator
from fastwarc.warc import WarcRecordType
from warcio.archiveiterator import ArchiveIterator

from polite.crawl.output import CrawlOutput, Exchange, iso_utc

BODY = "<html><body><p>caf\u00e9</p></body></html>".encode()


def _exchange(n: int) -> Exchange:
    return Exchange(f"http://127.0.12.1:8080/p{n}?q=a%20b",
                    [("Host", "127.0.12.1:8080"), ("User-Agent", "testbot"),
                     ("Cookie", "user=r\u00f6bot")],
                    200, "OK", "HTTP/1.1",
                    [("Content-Type", "text/html; charset=utf-8"),
                     ("Content-Encoding", "gzip"), ("Content-Length", "31"),
                     ("X-Robots-Tag", "noarchive")], BODY)


def test_each_record_is_a_member_on_disk_with_digests_warcio_checks(tmp_path: Path) -> None:
    output = CrawlOutput(tmp_path)
    assert output.warc_path is not None
    output.exchange(_exchange(0), 1_700_000_000.25)
    # Before close: both records are whole gzip members in the file already.
    data = output.warc_path.read_bytes()
    members = []
    while data:
        inflater = zlib.decompressobj(31)
        members.append(inflater.decompress(data))
        assert inflater.eof
        data = inflater.unused_data
    assert len(members) == 2 and all(m.startswith(b"WARC/1.1\r\n") for m in members)
    output.exchange(_exchange(1), 1_700_000_001.0)
    output.close()

    records = []
    with output.warc_path.open("rb") as stream:
        for record in ArchiveIterator(stream, check_digests=True):
            block = record.content_stream().read()
            assert record.digest_checker.passed is True, record.digest_checker.problems
            records.append((record.rec_type, record.rec_headers, record.http_headers, block))
    assert [kind for kind, *_ in records] == ["response", "request"] * 2
    _, warc, http, block = records[0]
    assert warc.get_header("WARC-Target-URI") == "http://127.0.12.1:8080/p0?q=a%20b"
    assert warc.get_header("WARC-Date") == "2023-11-14T22:13:20.250000Z"
    assert http.get_statuscode() == "200"
    # The body is kept decoded: the wire's encoding and length are renamed or replaced.
    assert block == BODY
    assert http.get_header("Content-Length") == str(len(BODY))
    assert http.get_header("X-Crawler-Content-Encoding") == "gzip"
    assert http.get_header("Content-Encoding") is None
    assert http.get_header("X-Robots-Tag") == "noarchive"
    _, request, request_http, _ = records[1]
    assert request.get_header("WARC-Concurrent-To") == warc.get_header("WARC-Record-ID")
    assert request_http.protocol == "GET" and request_http.get_header("Cookie") == \
        "user=r\u00f6bot"

    with output.warc_path.open("rb") as stream:
        verified = [record.verify_block_digest()
                    for record in FastIterator(stream, parse_http=False)]
    assert verified == [True] * 4


def test_no_warc_writes_no_file(tmp_path: Path) -> None:
    output = CrawlOutput(tmp_path, warc=False)
    output.exchange(_exchange(0), 0.0)
    output.close()
    assert output.warc_path is None and not (tmp_path / "warc").exists()


def test_the_gzip_level_is_the_one_asked_for_and_records_read_back(tmp_path: Path) -> None:
    page = Exchange("http://127.0.12.1:8080/long", [("Host", "127.0.12.1:8080")], 200, "OK",
                    "HTTP/1.1", [("Content-Type", "text/html")],
                    b"<p>" + b"".join(b"row %d of a table, " % i for i in range(3000)) + b"</p>")
    sizes = {}
    for level in (1, 9):
        output = CrawlOutput(tmp_path / str(level), warc_gzip_level=level)
        assert output.warc_path is not None
        output.exchange(page, 1_700_000_000.0)
        output.close()
        with output.warc_path.open("rb") as stream:
            blocks = [record.content_stream().read()
                      for record in ArchiveIterator(stream, check_digests=True)]
        assert blocks[0].endswith(b"row 2999 of a table, </p>")
        sizes[level] = output.warc_path.stat().st_size
        # the first member's gzip header names the level: 4 for the fastest, 2 the smallest
        assert output.warc_path.read_bytes()[8] == {1: 4, 9: 2}[level]
    assert sizes[9] < sizes[1]


def test_times_are_written_as_datetime_writes_them() -> None:
    # formatted once a second, the fraction each time: the same text as datetime's
    times = [0.0, 0.0005, 0.9995, 0.9999996, 59.9999999, 1_700_000_000.25, 1_700_000_000.1235,
             1_700_000_059.999_999_7, 1_764_273_599.000_4, 2_000_000_000.5]
    for at in times:
        moment = datetime.fromtimestamp(at, UTC)
        assert iso_utc(at) == moment.isoformat(timespec="milliseconds"), at
        assert iso_utc(at, micro=True, zone="Z") == moment.strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ"), at
    # a second formatted before gives its text to the next time in it, not its own
    assert iso_utc(1_700_000_000.0) == "2023-11-14T22:13:20.000+00:00"
    assert iso_utc(1_700_000_000.75) == "2023-11-14T22:13:20.750+00:00"
    assert iso_utc(1_700_000_001.0) == "2023-11-14T22:13:21.000+00:00"


def test_digests_are_base32_sha1_as_base64_writes_them() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from polite.crawl.output import _sha1_label

    @given(st.binary(max_size=300))
    def same(data: bytes) -> None:
        expected = base64.b32encode(hashlib.sha1(data).digest()).decode()
        assert _sha1_label(data) == "sha1:" + expected

    same()


def test_record_ids_are_distinct_version_4_uuids_past_a_pool_of_them() -> None:
    from polite.crawl.output import _RecordIds

    ids = _RecordIds()
    seen = [ids.next() for _ in range(1000)]  # four draws from the system's source
    assert len(set(seen)) == 1000
    for text in seen:
        assert text.startswith("<urn:uuid:") and text.endswith(">")
        found = uuid.UUID(text[len("<urn:uuid:"):-1])
        assert found.version == 4 and found.variant == uuid.RFC_4122
        assert str(found) == text[len("<urn:uuid:"):-1]  # lower case, grouped as written


def test_a_metadata_record_and_a_target_that_would_break_its_line(tmp_path: Path) -> None:
    output = CrawlOutput(tmp_path)
    assert output.warc_path is not None
    page = Exchange("http://127.0.12.1:8080/a\r\nWARC-Type:forged\nb", [("Host", "x")],
                    404, "", "HTTP/1.0", [], b"", metadata={"usage": {"train-ai": "n\u00e9"}})
    output.exchange(page, 1_700_000_000.0)
    output.close()
    with output.warc_path.open("rb") as stream:
        records = [(record.rec_type, record.rec_headers, record.content_stream().read(),
                    record.digest_checker.passed)
                   for record in ArchiveIterator(stream, check_digests=True)]
    assert [kind for kind, *_ in records] == ["response", "request", "metadata"]
    response_id = records[0][1].get_header("WARC-Record-ID")
    for kind, headers, _, passed in records:
        assert headers.get_header("WARC-Type") == kind and passed is not False
        assert headers.get_header("WARC-Target-URI") == \
            "http://127.0.12.1:8080/a%0D%0AWARC-Type:forged%0Ab"
    assert records[1][1].get_header("WARC-Concurrent-To") == response_id
    assert records[2][1].get_header("WARC-Concurrent-To") == response_id
    assert records[2][1].get_header("Content-Type") == "application/json"
    assert json.loads(records[2][2]) == {"usage": {"train-ai": "n\u00e9"}}
    assert records[0][2] == b""  # an empty body, its status line kept whole
    with output.warc_path.open("rb") as stream:
        fast = [(record.record_type, record.verify_block_digest())
                for record in FastIterator(stream, parse_http=False)]
    assert fast == [(WarcRecordType.response, True), (WarcRecordType.request, True),
                    (WarcRecordType.metadata, True)]


def test_a_forked_process_draws_record_ids_of_its_own() -> None:
    import os

    from polite.crawl.output import _RecordIds

    ids = _RecordIds()
    ids.next()  # the pool drawn, 255 IDs left in it
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's side
        os.write(write, ids.next().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    theirs = os.read(read, 100).decode()
    os.close(read)
    assert theirs.startswith("<urn:uuid:") and theirs != ids.next()


def test_a_target_no_utf_8_can_hold_is_written_and_read_back(tmp_path: Path) -> None:
    output = CrawlOutput(tmp_path)
    assert output.warc_path is not None
    output.exchange(Exchange("http://127.0.12.1:8080/caf\u00e9/\ud800", [("Host", "x")], 200,
                             "OK", "HTTP/1.1", [], b"<p>x</p>"), 1_700_000_000.0)
    output.close()
    with output.warc_path.open("rb") as stream:
        targets = [record.rec_headers.get_header("WARC-Target-URI")
                   for record in ArchiveIterator(stream, check_digests=True)]
    assert targets == ["http://127.0.12.1:8080/caf\u00e9/?"] * 2

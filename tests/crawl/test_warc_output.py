"""The crawl's WARC records: written by FastWARC, read back by warcio and FastWARC, digests
checked, each record a gzip member of its own, on disk when ``exchange`` returns."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime
from pathlib import Path

from fastwarc.warc import ArchiveIterator as FastIterator
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

"""The sitemap parser on made-up input: every form, every limit, every way a file goes wrong."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polite.sitemaps import Alternate, Entry, SitemapParser, parse, parse_w3c

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*bodies: str, head: str = "") -> bytes:
    urls = "".join(f"<url>{body}</url>\n" for body in bodies)
    prolog = '<?xml version="1.0" encoding="UTF-8"?>'
    return f"{head}{prolog}\n<urlset {NS}>\n{urls}</urlset>\n".encode()


def locs(data: bytes, url: str | None = None) -> list[str]:
    return [entry.loc for entry in parse(data, url)]


def test_urlset_fields_are_typed() -> None:
    data = urlset("<loc>https://a.example/x</loc><lastmod>2024-05-01T10:20:30+02:00</lastmod>"
                  "<changefreq>Weekly</changefreq><priority>0.8</priority>")
    (entry,) = parse(data)
    assert entry == Entry("https://a.example/x", "url",
                          datetime(2024, 5, 1, 10, 20, 30, tzinfo=timezone(timedelta(hours=2))),
                          "weekly", 0.8, 3)


def test_index_entries_are_sitemaps() -> None:
    data = (f"<sitemapindex {NS}><sitemap><loc>https://a.example/s1.xml</loc>"
            "<lastmod>2024-01-02</lastmod></sitemap></sitemapindex>").encode()
    sitemap = parse(data)
    (entry,) = sitemap
    assert (entry.kind, entry.loc, entry.lastmod) == (
        "sitemap", "https://a.example/s1.xml", datetime(2024, 1, 2, tzinfo=UTC))
    assert sitemap.format == "sitemapindex"


@pytest.mark.parametrize("text, expected", [
    ("2024", datetime(2024, 1, 1, tzinfo=UTC)),
    ("2024-07", datetime(2024, 7, 1, tzinfo=UTC)),
    ("2024-07-16", datetime(2024, 7, 16, tzinfo=UTC)),
    ("2024-07-16T19:20+01:00", datetime(2024, 7, 16, 18, 20, tzinfo=UTC)),
    ("2024-07-16T19:20:30Z", datetime(2024, 7, 16, 19, 20, 30, tzinfo=UTC)),
    ("2024-07-16T19:20:30.45+01:00", datetime(2024, 7, 16, 18, 20, 30, 450000, tzinfo=UTC)),
])
def test_every_w3c_datetime_form_is_read(text: str, expected: datetime) -> None:
    assert parse_w3c(text) == expected


@pytest.mark.parametrize("text", ["202-05-20", "2024-13-01", "2024-07-16T19:20:30",
                                  "2024-07-16 19:20:30Z", "yesterday", "2024-7-1", "20240716",
                                  "2024-00", "0000"])
def test_bad_lastmod_is_reported_not_invented(text: str) -> None:
    sitemap = parse(urlset(f"<loc>https://a.example/</loc><lastmod>{text}</lastmod>"))
    (entry,) = sitemap
    assert entry.lastmod is None
    (issue,) = sitemap.issues
    assert issue.code == "bad-lastmod" and issue.line == 3 and text in issue.message


def test_bad_priority_and_changefreq_are_left_out_and_reported() -> None:
    sitemap = parse(urlset("<loc>https://a.example/</loc><priority>1.5</priority>"
                           "<changefreq>sometimes</changefreq>",
                           "<loc>https://a.example/b</loc><priority>high</priority>"))
    entries = list(sitemap)
    assert [(e.priority, e.changefreq) for e in entries] == [(None, None), (None, None)]
    assert sorted(i.code for i in sitemap.issues) == ["bad-changefreq", "bad-priority",
                                                      "bad-priority"]


def test_namespace_prefix_bom_leading_whitespace_and_no_namespace() -> None:
    prefixed = ('<sit:urlset xmlns:sit="http://www.sitemaps.org/schemas/sitemap/0.9">'
                "<sit:url><sit:loc>https://a.example/</sit:loc></sit:url></sit:urlset>")
    assert locs(prefixed.encode()) == ["https://a.example/"]
    assert locs(b"\xef\xbb\xbf \n\t" + urlset("<loc>https://a.example/</loc>")) == [
        "https://a.example/"]
    bare = b"<urlset><url><loc> https://a.example/ </loc></url></urlset>"
    assert locs(bare) == ["https://a.example/"]


def test_unknown_root_namespace_is_read_with_a_warning() -> None:
    data = (b'<urlset xmlns="http://example.com/not-sitemaps">'
            b"<url><loc>https://a.example/</loc></url></urlset>")
    sitemap = parse(data)
    assert [e.loc for e in sitemap] == ["https://a.example/"]
    assert [i.code for i in sitemap.issues] == ["namespace"]


def test_relative_locations_need_the_sitemap_url() -> None:
    data = urlset("<loc>/page</loc>", "<loc>javascript:alert(1)</loc>")
    assert locs(data, "https://a.example/dir/sitemap.xml") == ["https://a.example/page"]
    sitemap = parse(data)
    assert list(sitemap) == []
    assert [i.code for i in sitemap.issues] == ["bad-loc", "bad-loc"]


def test_text_sitemap_reports_lines_that_are_not_urls() -> None:
    sitemap = parse(b"https://a.example/1\r\nnot a url\n\nhttps://a.example/2")
    assert [(e.loc, e.line) for e in sitemap] == [("https://a.example/1", 1),
                                                   ("https://a.example/2", 4)]
    assert [(i.line, i.code) for i in sitemap.issues] == [(2, "not-a-url")]
    assert sitemap.format == "text"


def test_repeated_issues_are_said_once_and_distinct_ones_keep_their_lines() -> None:
    bad = "<loc>https://a.example/{}</loc><lastmod>{}</lastmod>"
    data = urlset(*(bad.format(n, "yesterday") for n in range(1, 4)),
                  bad.format(4, "soon"), bad.format(5, "2024-01-01"),
                  *(bad.format(n, f"day {n}") for n in range(6, 20)))
    sitemap = parse(data)
    assert len(list(sitemap)) == 19
    assert [(i.line, i.count, i.lines[:3]) for i in sitemap.issues] == [(3, 18, (3, 4, 5))]
    assert sitemap.issues[0].message == (
        "<lastmod> 'yesterday' is not a W3C datetime; left out (18 lines of this kind: 3, 4, "
        "5, 6, 8, 9, 10, 11, 12, 13, ...)")
    few = parse(urlset(*(bad.format(n, "yesterday") for n in range(1, 4)), bad.format(4, "soon")))
    assert len(list(few)) == 4
    assert [(i.line, i.count, i.message) for i in few.issues] == [
        (3, 3, "<lastmod> 'yesterday' is not a W3C datetime; left out (3 times: lines 3, 4, 5)"),
        (6, 1, "<lastmod> 'soon' is not a W3C datetime; left out")]


def test_identical_issues_do_not_use_up_the_listed_ones() -> None:
    body = b"".join(b"not a url\n" if n % 2 else f"https://a.example/{n}\n".encode()
                    for n in range(5_000))
    sitemap = parse(body)
    assert len(list(sitemap)) == 2_500
    (issue,) = sitemap.issues
    assert (issue.code, issue.count) == ("not-a-url", 2_500)


def test_gzip_is_detected_by_its_bytes_and_members_concatenate() -> None:
    body = urlset("<loc>https://a.example/1</loc>", "<loc>https://a.example/2</loc>")
    half = len(body) // 2
    data = gzip.compress(body[:half]) + gzip.compress(body[half:])
    sitemap = parse(data)
    assert [e.loc for e in sitemap] == ["https://a.example/1", "https://a.example/2"]
    assert sitemap.parser.compressed and sitemap.issues == []


def test_truncated_gzip_keeps_the_entries_before_the_cut() -> None:
    body = urlset(*(f"<loc>https://a.example/{n}</loc>" for n in range(2000)))
    data = gzip.compress(body)[:-2000]
    sitemap = parse(data)
    got = [e.loc for e in sitemap]
    assert 0 < len(got) < 2000 and got[0] == "https://a.example/0"
    assert {i.code for i in sitemap.issues} >= {"gzip-truncated", "broken-xml"}


def test_byte_at_a_time_gives_the_same_entries() -> None:
    body = urlset("<loc>https://a.example/&amp;1</loc><lastmod>2024-01-01</lastmod>",
                  "<loc><![CDATA[https://a.example/2]]></loc>", head="\n ")
    data = gzip.compress(body)
    parser = SitemapParser()
    entries = []
    for index in range(len(data)):
        entries += parser.feed(data[index:index + 1])
    entries += parser.close()
    assert entries == list(parse(body))
    assert [e.loc for e in entries] == ["https://a.example/&1", "https://a.example/2"]


def test_broken_xml_keeps_what_parsed_and_says_where() -> None:
    data = (urlset("<loc>https://a.example/1</loc>").replace(b"</urlset>", b"")
            + b"<url><loc>https://a.example/half")
    sitemap = parse(data)
    assert [e.loc for e in sitemap] == ["https://a.example/1"]
    assert sitemap.stopped is not None and sitemap.stopped.code == "broken-xml"
    assert "line 5" in sitemap.stopped.message


def test_an_entry_whose_loc_closed_is_kept_when_the_file_breaks_inside_it() -> None:
    data = (f"<urlset {NS}><url><loc>https://a.example/1</loc></url>\n"
            "<url><loc>https://a.example/2</loc><lastmod>2024-01-01</lastm").encode()
    sitemap = parse(data)
    assert [e.loc for e in sitemap] == ["https://a.example/1", "https://a.example/2"]
    assert sitemap.stopped is not None and sitemap.stopped.code == "broken-xml"


def test_entity_declarations_are_refused() -> None:
    laughs = (b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa">'
              b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
              b"<urlset><url><loc>https://a.example/&b;</loc></url></urlset>")
    sitemap = parse(laughs)
    assert list(sitemap) == []
    assert sitemap.stopped is not None and sitemap.stopped.code == "entity-declared"
    # A DOCTYPE that declares nothing is harmless.
    plain = b'<!DOCTYPE urlset><urlset><url><loc>https://a.example/</loc></url></urlset>'
    assert locs(plain) == ["https://a.example/"]


def test_undefined_entity_breaks_the_file_without_expansion() -> None:
    sitemap = parse(urlset("<loc>https://a.example/1</loc>", "<loc>&nbsp;</loc>"))
    assert [e.loc for e in sitemap] == ["https://a.example/1"]
    assert sitemap.stopped is not None and "undefined entity" in sitemap.stopped.message


def test_the_50000_entry_limit_stops_the_file() -> None:
    body = "".join(f"<url><loc>https://a.example/{n}</loc></url>" for n in range(50_001))
    sitemap = parse(f"<urlset {NS}>{body}</urlset>".encode())
    assert sum(1 for _ in sitemap) == 50_000
    assert sitemap.stopped is not None and sitemap.stopped.code == "too-many-urls"


@pytest.mark.slow
def test_a_gzip_bomb_stops_at_the_byte_limit_quickly() -> None:
    # 60 MB of XML whitespace compresses to about 60 KB.
    filler = b" " * (60 * 1024 * 1024)
    data = gzip.compress(urlset("<loc>https://a.example/</loc>").replace(b"</urlset>", filler),
                         compresslevel=9)
    assert len(data) < 200_000
    sitemap = parse(data)
    assert locs(data) == ["https://a.example/"]
    list(sitemap)
    assert sitemap.stopped is not None and sitemap.stopped.code == "too-large"
    assert "52,428,800 bytes uncompressed" in sitemap.stopped.message
    assert sitemap.parser.bytes_out <= 52_428_800


@pytest.mark.parametrize("data, code", [
    (b"", "empty"),
    (b" \n\t", "empty"),
    (b"<html><body>Not here</body></html>", "not-a-sitemap"),
    (b"<?xml version='1.0'?><<<", "not-xml"),
    (b"\n".join([b"hello world"] * 150), "not-a-sitemap"),
])
def test_what_is_not_a_sitemap_is_said_so(data: bytes, code: str) -> None:
    sitemap = parse(data)
    assert list(sitemap) == []
    assert sitemap.stopped is not None and sitemap.stopped.code == code


def test_feeds_take_link_guid_or_about() -> None:
    rss1 = (b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
            b'xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">'
            b'<item rdf:about="https://a.example/1"><title>One</title>'
            b"<dc:date>2024-02-03T04:05:06Z</dc:date></item>"
            b"<item><link>https://a.example/2</link></item></rdf:RDF>")
    entries = list(parse(rss1))
    assert [(e.loc, e.title) for e in entries] == [("https://a.example/1", "One"),
                                                   ("https://a.example/2", None)]
    assert entries[0].lastmod == datetime(2024, 2, 3, 4, 5, 6, tzinfo=UTC)


def test_unused_field_text_never_leaks_into_a_location() -> None:
    data = urlset("<loc>https://a.example/1</loc><foo:bar xmlns:foo='urn:x'>junk</foo:bar>"
                  "<lastmod>2024-01-01</lastmod>")
    (entry,) = parse(data)
    assert entry.loc == "https://a.example/1" and entry.lastmod is not None


def _streamed(count: int) -> Iterator[bytes]:
    yield f"<urlset {NS}>".encode()
    row = "<url><loc>https://a.example/page/{}</loc><lastmod>2024-01-01</lastmod></url>\n"
    for start in range(0, count, 1000):
        yield "".join(row.format(n) for n in range(start, start + 1000)).encode()
    yield b"</urlset>"


def _peak(count: int) -> int:
    tracemalloc.start()
    try:
        seen = sum(1 for _ in parse(_streamed(count), max_urls=count))
        assert seen == count
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_memory_does_not_grow_with_the_number_of_urls() -> None:
    # ten times the URLs: a URL kept (a hundred bytes and more) would show 1.8 MB more, well
    # above the 0.5 MB allowed (the peak is about 0.8 MB at either size). Scaled down from
    # 5,000 and 50,000: what grows is per URL, so the ratio tells the same at a fifth of them.
    small, large = _peak(2_000), _peak(20_000)
    assert large < small * 1.5 + 100_000, (small, large)


def _filler(size: int, piece: bytes) -> Iterator[bytes]:
    block = piece * ((1 << 16) // len(piece))
    for _ in range(size // len(block)):
        yield block


def _shaped(head: bytes, filler: bytes, middle: bytes = b"", tail: bytes = b"") -> Callable[
        [int], Iterator[bytes]]:
    """A file of ``size`` bytes of ``filler`` after ``head`` (and again after ``middle``,
    when there is one), streamed in 64 KiB chunks."""
    def make(size: int) -> Iterator[bytes]:
        yield head
        yield from _filler(size, filler)
        if middle:
            yield middle
            yield from _filler(size, filler)
        yield tail
    return make


def _gzipped(make: Callable[[int], Iterator[bytes]]) -> Callable[[int], Iterator[bytes]]:
    def compressed(size: int) -> Iterator[bytes]:
        deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        for chunk in make(size):
            yield deflate.compress(chunk)
        yield deflate.flush()
    return compressed


URLSET = f"<urlset {NS}>\n".encode()
ONE = b"<url><loc>https://a.example/1</loc></url>"
# Files of any size whose shape once made the parser hold them whole: (make, the locations
# read, the issue codes).
SHAPES = {
    "whitespace between tags": (
        _shaped(URLSET + ONE, b" \n\t", tail=b"<url><loc>https://a.example/2</loc></url>"
                b"</urlset>"), ["https://a.example/1", "https://a.example/2"], []),
    "whitespace inside a loc": (
        _shaped(URLSET + b"<url><loc>", b"\n ", b"https://a.example/1", b"</loc></url>"
                b"</urlset>"), ["https://a.example/1"], []),
    "a huge loc": (
        _shaped(URLSET + b"<url><loc>https://a.example/", b"x", tail=b"</loc></url>" + ONE +
                b"</urlset>"), ["https://a.example/1"], ["huge-loc"]),
    "a huge text node": (
        _shaped(URLSET + b"<url><loc>https://a.example/1</loc><x>", b"text ",
                tail=b"</x></url></urlset>"), ["https://a.example/1"], []),
    "gzip, whitespace inside an index's loc": (
        _gzipped(_shaped(f"<sitemapindex {NS}><sitemap><loc>".encode(), b" \r\n",
                         b"https://a.example/s.xml", b"</loc></sitemap></sitemapindex>")),
        ["https://a.example/s.xml"], []),
    "a feed's whitespace and long description": (
        _shaped(b"<rss><channel>", b" \n", b"<item><link>https://a.example/1</link>"
                b"<description>", b"</description></item></channel></rss>"),
        ["https://a.example/1"], []),
    "long lines in a text sitemap": (
        _shaped(b"https://a.example/1\n", b" ", b"\n", b"\nhttps://a.example/2\n"),
        ["https://a.example/1", "https://a.example/2"], []),
    "a long text line": (
        _shaped(b"https://a.example/1\n", b"x", tail=b"\nhttps://a.example/2\n"),
        ["https://a.example/1", "https://a.example/2"], ["long-line"]),
    "a comment without end": (
        _shaped(URLSET + ONE + b"<!--", b"-x \n", tail=b"--></urlset>"),
        ["https://a.example/1"], ["huge-markup"]),
    "a tag without end": (
        _shaped(URLSET + ONE + b"<url a='", b"x", tail=b"'/></urlset>"),
        ["https://a.example/1"], ["huge-markup"]),
}


def _shape_peak(make: Callable[[int], Iterator[bytes]],
                size: int) -> tuple[int, list[str], list[str]]:
    tracemalloc.start()
    try:
        sitemap = parse(make(size))
        found = [entry.loc for entry in sitemap]
        return tracemalloc.get_traced_memory()[1], found, [i.code for i in sitemap.issues]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", SHAPES)
def test_memory_stays_flat_whatever_the_file_holds_between_entries(shape: str) -> None:
    make, expected, codes = SHAPES[shape]
    small, found, issues = _shape_peak(make, 1 << 20)
    assert (found, issues) == (expected, codes)
    large, found, issues = _shape_peak(make, 8 << 20)
    assert (found, issues) == (expected, codes)
    assert large < small * 1.5 + 100_000, (small, large)


def test_many_distinct_names_stop_the_file() -> None:
    names = b"".join(f"<n{n}/>".encode() for n in range(5_000))
    sitemap = parse(URLSET + ONE + names + b"</urlset>")
    assert [entry.loc for entry in sitemap] == ["https://a.example/1"]
    assert sitemap.stopped is not None and sitemap.stopped.code == "too-many-names"


@pytest.mark.parametrize("step", [1_000, 1 << 16, 1 << 20])
def test_a_value_reads_the_same_however_its_text_is_cut_into_chunks(step: int) -> None:
    space = " \n" * 50_000
    data = urlset(f"<loc>{space}https://a.example/1{space}</loc>",
                  f"<loc>https://a.example/2{space}x</loc>",
                  f"<loc>https://a.example/3</loc><image:image><image:loc>{space}"
                  f"https://a.example/i.png{space}</image:loc><image:caption>{'c' * 70_000}"
                  "</image:caption></image:image>",
                  head="").replace(
        f"<urlset {NS}>".encode(),
        f'<urlset {NS} xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'.encode())
    parser = SitemapParser()
    entries = []
    for start in range(0, len(data), step):
        entries += parser.feed(data[start:start + step])
    entries += parser.close()
    assert [entry.loc for entry in entries] == ["https://a.example/1", "https://a.example/3"]
    (image,) = entries[1].images
    assert image.loc == "https://a.example/i.png" and image.caption == "c" * 65_536
    def line_of(text: bytes) -> int:
        return data[:data.index(text)].count(b"\n") + 1

    assert [(i.line, i.code) for i in parser.issues] == [
        (line_of(b"x</loc>"), "huge-loc"), (line_of(b"</image:caption>"), "long-text")]


def test_a_long_text_line_is_reported_on_its_own_line_and_spares_the_one_before() -> None:
    parser = SitemapParser()
    entries = parser.feed(b"https://a.example/1\n" + b"x" * 70_000)
    entries += parser.feed(b"x\nhttps://a.example/2\n")
    entries += parser.close()
    assert [entry.loc for entry in entries] == ["https://a.example/1", "https://a.example/2"]
    assert [(i.line, i.code) for i in parser.issues] == [(2, "long-line")]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.integers(min_value=1, max_value=64))
def test_arbitrary_bytes_never_raise(data: bytes, step: int) -> None:
    parser = SitemapParser()
    for start in range(0, len(data), step):
        for entry in parser.feed(data[start:start + step]):
            assert entry.loc.lower().startswith(("http://", "https://"))
    parser.close()
    assert parser.stopped is None or parser.stopped in parser.issues


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([
    "<url>", "</url>", "<loc>", "</loc>", "https://a.example/", "<lastmod>", "</lastmod>",
    "2024-01-01", "<sitemap>", "</sitemap>", "&amp;", "<![CDATA[x]]>", "<!-- c -->", " ", "\n",
    "<image:image>", "</image:image>", "<image:loc>", "</image:loc>",
]), max_size=40))
def test_arbitrary_sitemap_shapes_never_raise(parts: list[str]) -> None:
    data = (f'<urlset {NS} xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
            + "".join(parts) + "</urlset>").encode()
    sitemap = parse(data)
    for entry in sitemap:
        assert entry.loc.startswith("https://a.example/")


def test_lines_stay_exact_across_a_multiline_root_tag_and_comments() -> None:
    data = (b'<?xml version="1.0"?>\n<!-- one\ntwo -->\n<urlset\n  ' + NS.encode() +
            b'\n  xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">\n'
            b"<url><loc>https://a.example/1</loc></url>\n<!-- a\nb\nc -->\n"
            b"<url>\n<loc>https://a.example/2</loc>\n<lastmod>bad</lastmod></url>\n"
            b"</urlset>\n")
    sitemap = parse(data)
    assert [(e.loc, e.line) for e in sitemap] == [("https://a.example/1", 7),
                                                   ("https://a.example/2", 12)]
    assert [(i.line, i.code) for i in sitemap.issues] == [(12, "bad-lastmod")]


def test_a_namespace_declared_midway_switches_on_attribute_reading() -> None:
    head = f"<urlset {NS}>\n" + "<url><loc>https://a.example/plain</loc></url>\n" * 3
    alt = ('<url xmlns:xhtml="http://www.w3.org/1999/xhtml"><loc>https://a.example/en</loc>'
           '<xhtml:link rel="alternate" hreflang="de" href="https://a.example/de"/></url>\n')
    entries = list(parse((head + alt + "</urlset>").encode()))
    assert [e.loc for e in entries] == ["https://a.example/plain"] * 3 + ["https://a.example/en"]
    assert entries[-1].alternates == (Alternate("de", "https://a.example/de"),)
    assert [e.line for e in entries] == [2, 3, 4, 5]

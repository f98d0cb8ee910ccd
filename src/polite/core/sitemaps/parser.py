"""Sitemap parsing, sans-IO: fed bytes as they arrive, answers with entries.

One parser reads every form a site serves: an XML ``urlset`` or ``sitemapindex`` (with or
without a namespace, a BOM or leading whitespace), a plain-text list of URLs, RSS 2.0,
RSS 1.0 and Atom feeds, and any of these gzip-compressed (recognised by the bytes, not by a
name or a content type).

Hostile input is bounded: an entity declaration stops the parse (no entity is ever expanded,
none is fetched), the protocol's 50,000 entries and 50 MB are counted on the decompressed
stream (a gzip bomb stops at the limit, after at most one more MiB of output), and broken XML
keeps every entry completed before the break and reports the line and column where it broke.
Memory stays flat whatever the file puts between or inside its entries: at most 64 KiB of one
value or text line is held (whitespace around it is dropped as it arrives), and a tag or
comment past 1 MiB, or a vocabulary of thousands of names, stops the parse.

XML goes through expat (the C parser in the standard library) with handlers that do as little
as they can: character data is collected by ``list.append`` itself, element names are
classified once per distinct name, and entries are named tuples built in one call.
"""

from __future__ import annotations

import codecs
import contextlib
import pyexpat
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any, BinaryIO, Final
from urllib.parse import urljoin

from polite.core.robots.model import MAX_LISTED_LINES, fold_issues
from polite.core.sitemaps.dates import parse_rfc822, parse_w3c
from polite.core.sitemaps.model import (
    CHANGEFREQS,
    MAX_SITEMAP_BYTES,
    MAX_SITEMAP_URLS,
    Alternate,
    Entry,
    Format,
    Image,
    News,
    ParseIssue,
    Price,
    Severity,
    Video,
)
from polite.core.text import control_at

__all__ = ["MAX_ISSUES", "Sitemap", "SitemapParser", "parse"]

# Issues kept per file; beyond it they are counted, so a hostile file cannot grow the list.
MAX_ISSUES = 1_000
# A text "sitemap" with no URL in its first lines is something else (an HTML page, a bomb's
# filler): stop reading it rather than report every line.
_TEXT_PROBE_LINES = 100
# A line of a text sitemap, or the text of one XML element, longer than this is no URL (the
# protocol caps them at 2,048 characters) and no field: only this much of it is held, however
# much whitespace or text the file puts there (see _bounded).
_MAX_TEXT = 65_536
# expat holds a tag, comment or processing instruction whole until it ends; one longer than
# this is no sitemap's (a urlset's start tag with every namespace is a few KiB).
_MAX_MARKUP = 1 << 20
# Distinct element and attribute names; expat keeps every one, and sitemaps and feeds use a
# few dozen.
_MAX_NAMES = 2_000
# sitemaps.org protocol, <loc>: "must be less than 2,048 characters".
_MAX_LOC = 2_048
# Output is inflated at most this much at a time, so the byte limit is checked as it grows.
_INFLATE_STEP = 1 << 20
# parse() hands the parser this much at a time: entries are yielded as they complete and
# memory stays flat whatever the file's size.
_FEED_STEP = 1 << 18
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"

# Namespaces read as the sitemap protocol's own: sitemaps.org and Google's two earlier ones.
_SITEMAP_NS: Final = frozenset({
    "http://www.sitemaps.org/schemas/sitemap/0.9",
    "http://www.google.com/schemas/sitemap/0.9",
    "http://www.google.com/schemas/sitemap/0.84",
    "",
})
_IMAGE_NS = "http://www.google.com/schemas/sitemap-image/1.1"
_VIDEO_NS = "http://www.google.com/schemas/sitemap-video/1.1"
_NEWS_NS = "http://www.google.com/schemas/sitemap-news/0.9"
_XHTML_NS = "http://www.w3.org/1999/xhtml"
_MOBILE_NS = "http://www.google.com/schemas/sitemap-mobile/1.0"
_ATOM_NS = frozenset({"http://www.w3.org/2005/Atom", "http://purl.org/atom/ns#"})
_RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
# Namespaces whose elements carry attributes the parser reads.
_ATTRIBUTE_NS: Final = frozenset({_XHTML_NS, _VIDEO_NS})
_EXTENSIONS: Final = {_IMAGE_NS: "image", _VIDEO_NS: "video", _NEWS_NS: "news",
                      _XHTML_NS: "xhtml", _MOBILE_NS: "mobile"}

# Element classes, from the name expat reports ("namespace local" or "local").
_OTHER, _URL, _SITEMAP, _LOC, _LASTMOD, _CHANGEFREQ, _PRIORITY, _TYPE, _SRCLOC = range(9)
_EXT = 16  # extension elements: _EXT and up, one code per name
_CORE_NAMES: Final = {"url": _URL, "sitemap": _SITEMAP, "loc": _LOC, "lastmod": _LASTMOD,
                      "changefreq": _CHANGEFREQ, "priority": _PRIORITY, "type": _TYPE,
                      "srcloc": _SRCLOC}
_REGP_TYPES = frozenset({"data", "list", "other"})
_YES_NO = {"yes": True, "no": False}
_VIDEO_TEXT = frozenset({"thumbnail_loc", "title", "description", "content_loc", "player_loc",
                         "category", "gallery_loc", "uploader"})
_VIDEO_LISTS = frozenset({"tag"})
# The fields the image and news extensions define (a video's others are kept in ``extra``).
_IMAGE_FIELDS = frozenset({"loc", "caption", "geo_location", "title", "license"})
_NEWS_FIELDS = frozenset({"name", "language", "publication_date", "title", "keywords",
                          "genres", "stock_tickers", "access"})


class _Stop(Exception):
    """Raised inside a handler to end the parse; the issue is already recorded."""


def _split(name: str) -> tuple[str, str]:
    namespace, _, local = name.rpartition(" ")
    return namespace, local


def _absolute(loc: str) -> bool:
    return loc[:8].lower().startswith(("http://", "https://"))


def _bounded(text: str) -> str:
    """``text`` (a value still being read) in at most ``_MAX_TEXT + 1`` characters that read
    the same once the value ends and is stripped: leading whitespace goes; a value whose text
    is longer than the limit keeps its first ``_MAX_TEXT`` characters and a NUL (which XML
    text cannot hold) so that it stays too long whatever follows; trailing whitespace is kept
    up to the limit, so that text after it still makes the value too long."""
    text = text.lstrip()
    if len(text) <= _MAX_TEXT:
        return text
    if len(text.rstrip()) > _MAX_TEXT:
        return text[:_MAX_TEXT] + "\0"
    return text[:_MAX_TEXT + 1]


class SitemapParser:
    """Feed it the bytes of one sitemap file as they arrive; each ``feed`` and ``close``
    returns the entries completed so far.

    ``url`` is where the file was fetched from: relative locations are resolved against it.
    After ``close``, ``format`` says what the file was, ``issues`` lists every value left out
    and every line skipped (repeats said once, with a count and their first lines), and
    ``stopped`` is the issue that ended the parse early, if one did (a limit, an entity
    declaration, broken XML, something that is not a sitemap).
    """

    def __init__(self, url: str | None = None, *, max_bytes: int = MAX_SITEMAP_BYTES,
                 max_urls: int = MAX_SITEMAP_URLS, max_issues: int = MAX_ISSUES) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self.max_urls = max_urls
        self.max_issues = max_issues
        self.format: Format | None = None
        self.compressed = False
        self.issues: list[ParseIssue] = []
        self.stopped: ParseIssue | None = None
        self.updated: datetime | None = None  # a feed's own date (RSS pubDate, Atom updated)
        self.count = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self._unlisted = 0
        self._alike: dict[tuple[str, str, Severity], int] = {}  # an issue -> where it is listed
        self._out: list[Entry] = []
        self._head = b""  # bytes held until the first ones tell gzip from plain
        self._inflater: Any = None
        self._sniffed = False
        self._pre = b""  # plain bytes held until the first one that is not whitespace
        self._reader: _XmlReader | _TextReader | None = None
        self._closed = False

    # -- input ---------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Entry]:
        if self._closed:
            raise ValueError("feed() after close()")
        if self.stopped is None and data:
            self.bytes_in += len(data)
            with contextlib.suppress(_Stop):
                self._take(data, final=False)
        return self._flush()

    def close(self) -> list[Entry]:
        if self._closed:
            return []
        self._closed = True
        if self.stopped is None:
            try:
                self._take(b"", final=True)
                if self._reader is not None:
                    self._reader.close()
                elif self.bytes_out == 0:
                    self._stop(0, "empty", "the file is empty")
                else:
                    self._stop(0, "empty", "the file holds only whitespace")
            except _Stop:
                pass
        self.issues[:] = fold_issues(self.issues)
        self._alike.clear()
        if self._unlisted:
            self.issues.append(ParseIssue(0, "more-issues",
                                          f"{self._unlisted:,} more issues not listed",
                                          Severity.INFO))
            self._unlisted = 0
        return self._flush()

    def _flush(self) -> list[Entry]:
        out = self._out[:]  # readers hold self._out itself
        self._out.clear()
        return out

    def _take(self, data: bytes, *, final: bool) -> None:
        if self._inflater is None:
            self._head += data
            if len(self._head) < 2 and not final:
                return
            data, self._head = self._head, b""
            if data.startswith(_GZIP_MAGIC):
                self.compressed = True
                self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            else:
                self._inflater = False
        if self._inflater is False:
            self._plain(data, final=final)
        else:
            self._inflate(data, final=final)

    def _inflate(self, data: bytes, *, final: bool) -> None:
        while data:
            inflater = self._inflater
            if isinstance(inflater, _Finished):
                if data.strip(b"\0") and not inflater.reported:
                    inflater.reported = True
                    self._issue(0, "after-gzip", "bytes after the end of the gzip stream "
                                "ignored", Severity.WARNING)
                break
            try:
                chunk = inflater.decompress(data, _INFLATE_STEP)
            except zlib.error as exc:
                self._stop(0, "bad-gzip", f"the gzip stream is broken ({exc}) after "
                           f"{self.bytes_out:,} bytes; entries before it are kept")
            data = inflater.unconsumed_tail
            if inflater.eof:
                data = inflater.unused_data
                if data.startswith(_GZIP_MAGIC):  # concatenated gzip members (RFC 1952)
                    self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                else:
                    self._inflater = _Finished()
            self._plain(chunk, final=False)
        if final:
            if not isinstance(self._inflater, _Finished):
                self._issue(0, "gzip-truncated", "the gzip stream ends early; entries "
                            "before the cut are kept", Severity.WARNING)
            self._plain(b"", final=True)

    def _plain(self, data: bytes, *, final: bool) -> None:
        if data:
            self.bytes_out += len(data)
            if self.bytes_out > self.max_bytes:
                keep = len(data) - (self.bytes_out - self.max_bytes)
                self.bytes_out = self.max_bytes
                self._plain_sniffed(data[:keep], final=False)
                self._stop(0, "too-large", f"the file is larger than {self.max_bytes:,} "
                           "bytes uncompressed (the sitemap protocol's limit); stopped there "
                           f"after {self.count:,} entries")
        self._plain_sniffed(data, final=final)

    def _plain_sniffed(self, data: bytes, *, final: bool) -> None:
        if not self._sniffed:
            data = self._pre + data
            start = len(_BOM) if data.startswith(_BOM) else 0
            body = data[start:].lstrip(_WHITESPACE)
            if not body:
                self._pre = data[:start]  # whitespace is dropped, a BOM kept
                return
            self._pre = b""
            self._sniffed = True
            if body.startswith(b"<") or data.startswith((b"\xff\xfe", b"\xfe\xff")):
                self._reader = _XmlReader(self)
                data = body if body.startswith(b"<") else data
            else:
                self._reader = _TextReader(self)
                self.format = "text"
                data = body
        if self._reader is not None and (data or final):
            self._reader.feed(data)

    # -- what readers report ---------------------------------------------------------------

    def _issue(self, line: int, code: str, message: str,
               severity: Severity = Severity.ERROR) -> None:
        at = self._alike.get((code, message, severity))
        if at is not None:  # said before: counted there (close() folds the rest)
            issue = self.issues[at]
            lines = issue.lines or (issue.line,)
            if len(lines) < MAX_LISTED_LINES:
                lines += (line,)
            self.issues[at] = replace(issue, count=issue.count + 1, lines=lines)
        elif len(self.issues) < self.max_issues:
            self._alike[code, message, severity] = len(self.issues)
            self.issues.append(ParseIssue(line, code, message, severity))
        else:
            self._unlisted += 1

    def _stop(self, line: int, code: str, message: str) -> None:
        issue = ParseIssue(line, code, message, Severity.ERROR)
        self.issues.append(issue)
        self.stopped = issue
        raise _Stop(message)

    def _too_many(self, line: int) -> None:
        self._stop(line, "too-many-urls", f"more than {self.max_urls:,} entries (the sitemap "
                   "protocol's limit); the rest of the file is ignored")

    def _location(self, line: int, what: str, value: str) -> str | None:
        """``value`` as an absolute http(s) URL, or None (reported)."""
        if not value:
            self._issue(line, "empty-loc", f"{what} is empty; entry skipped")
            return None
        if len(value) > _MAX_TEXT:
            self._issue(line, "huge-loc", f"{what} is longer than {_MAX_TEXT:,} characters; "
                        "entry skipped")
            return None
        if not _absolute(value):
            if self.url is None or ":" in value.split("/", 1)[0]:
                self._issue(line, "bad-loc", f"{what} {value[:200]!r} is not an absolute "
                            "http(s) URL; entry skipped")
                return None
            resolved = urljoin(self.url, value)
            self._issue(line, "relative-loc", f"relative {what} {value[:200]!r} read as "
                        f"{resolved[:200]!r}", Severity.WARNING)
            value = resolved
        if len(value) >= _MAX_LOC:
            self._issue(line, "long-loc", f"{what} is {len(value):,} characters long; the "
                        "protocol allows under 2,048", Severity.WARNING)
        return value

    def _text(self, line: int, what: str, value: str) -> str:
        """A field's stripped ``value`` cut to ``_MAX_TEXT`` characters (reported)."""
        if len(value) > _MAX_TEXT:
            self._issue(line, "long-text", f"{what} is longer than {_MAX_TEXT:,} characters; "
                        "cut there", Severity.WARNING)
            value = value[:_MAX_TEXT].rstrip()
        return value


class _Finished:
    """Stands in for the inflater once the gzip stream has ended."""

    def __init__(self) -> None:
        self.reported = False


class _TextReader:
    """A text sitemap: one URL per line, UTF-8."""

    def __init__(self, owner: SitemapParser) -> None:
        self.owner = owner
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.pending = ""
        self.line = 0
        self.seen_url = False

    def feed(self, data: bytes) -> None:
        if not self.seen_url:
            # Before its first URL a file is still being told apart: one with bytes no text
            # holds is a binary file, not a text sitemap of unreadable lines.
            at = control_at(data)
            if at is not None:
                self.owner._stop(self.line + 1 + data.count(b"\n", 0, at), "not-a-sitemap",
                                 f"not a sitemap: a binary file (the control byte "
                                 f"\\x{data[at]:02x})")
        lines = (self.pending + self.decoder.decode(data)).split("\n")
        pending = lines.pop()
        # A line that goes on past every chunk is held in a bounded form (see _bounded).
        self.pending = pending if len(pending) <= _MAX_TEXT else _bounded(pending)
        for line in lines:
            self._line(line)

    def close(self) -> None:
        tail = self.pending + self.decoder.decode(b"", final=True)
        self.pending = ""
        if tail:
            self._line(tail)
        if not self.seen_url:
            self.owner._stop(self.line, "not-a-sitemap", f"no URL in its {self.line:,} "
                             "lines: this is not a sitemap")

    def _line(self, text: str) -> None:
        self.line += 1
        owner = self.owner
        value = text.strip()
        if not value:
            return
        if len(value) > _MAX_TEXT:
            owner._issue(self.line, "long-line", f"a line longer than {_MAX_TEXT:,} "
                         "characters skipped")
            return
        if _absolute(value) and " " not in value and "\t" not in value:
            if "\ufffd" in value:
                owner._issue(self.line, "not-utf8", "line is not UTF-8; skipped")
                return
            self.seen_url = True
            if owner.count >= owner.max_urls:
                owner._too_many(self.line)
            loc = owner._location(self.line, "URL", value)
            if loc is not None:
                owner._out.append(Entry(loc, "url", line=self.line))
                owner.count += 1
            return
        owner._issue(self.line, "not-a-url", f"{value[:120]!r} is not an absolute http(s) "
                     "URL; line skipped")
        if not self.seen_url and self.line >= _TEXT_PROBE_LINES:
            owner._stop(self.line, "not-a-sitemap", f"no URL in the first {self.line} lines: "
                        "this is not a sitemap")


class _XmlReader:
    """XML sitemaps and feeds, through expat. The handlers for urlset and sitemapindex are
    the hot path; feeds and the extensions take slower, plainer ones."""

    def __init__(self, owner: SitemapParser) -> None:
        self.owner = owner
        self.intern: dict[str, Any] = {}  # name -> the name, or its code once classified
        self.seq: list[Any] = []  # text (str), end tags (_Name), newline counts (int)
        parser = self.parser = pyexpat.ParserCreate(namespace_separator=" ",
                                                     intern=self.intern)
        parser.buffer_text = True
        parser.buffer_size = 1 << 16
        parser.SetParamEntityParsing(pyexpat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.EntityDeclHandler = self._entity_declared
        parser.StartElementHandler = self._root
        self.text: list[str] = []
        parser.CharacterDataHandler = self.text.append
        self.core_ns = set(_SITEMAP_NS)
        self.codes: dict[str, int] = {}
        self.attribute_ns = False  # the file declares a namespace in _ATTRIBUTE_NS
        parser.StartNamespaceDeclHandler = self._declared
        self.finish_pending: Callable[[], None] | None = None
        self.after_parse: Callable[[], None] | None = None
        self.fed = 0  # bytes handed to expat

    # -- expat -----------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        self.fed += len(data)
        self._parse(data, False)
        parser = self.parser
        owner = self.owner
        # What expat holds past the last event it reported is one unfinished token.
        if self.fed - parser.CurrentByteIndex > _MAX_MARKUP:
            owner._stop(parser.CurrentLineNumber, "huge-markup", "a tag, comment or "
                        f"processing instruction runs on for more than {_MAX_MARKUP:,} bytes "
                        f"from line {parser.CurrentLineNumber}: this is not a sitemap; "
                        f"stopped there after {owner.count:,} entries")
        if len(self.intern) > _MAX_NAMES:
            owner._stop(parser.CurrentLineNumber, "too-many-names", "more than "
                        f"{_MAX_NAMES:,} distinct element and attribute names: this is not "
                        f"a sitemap; stopped there after {owner.count:,} entries")

    def close(self) -> None:
        self._parse(b"", True)

    def _parse(self, data: bytes, final: bool) -> None:
        try:
            self.parser.Parse(data, final)
        except pyexpat.ExpatError as exc:
            self._broken(exc)
        if self.after_parse is not None:
            self.after_parse()
        text = self.text  # a feed's text since the last tag, in pieces
        if text and sum(map(len, text)) > _MAX_TEXT:
            text[:] = (_bounded("".join(text)),)

    def _broken(self, exc: pyexpat.ExpatError) -> None:
        owner = self.owner
        if self.finish_pending is not None:
            try:
                self.finish_pending()
            except _Stop:
                return
        reason = pyexpat.errors.messages[exc.code] if exc.code else str(exc)
        where = f"line {exc.lineno}, column {exc.offset + 1}"
        if owner.format is None:
            owner._stop(exc.lineno, "not-xml", f"not a sitemap: the XML breaks at {where} "
                        f"({reason})")
        owner._stop(exc.lineno, "broken-xml", f"the XML breaks at {where} ({reason}); the "
                    f"{owner.count:,} entries before it are kept")

    def _entity_declared(self, name: str, *_: object) -> None:
        line = self.parser.CurrentLineNumber
        self.owner._stop(line, "entity-declared", f"the file declares the entity {name!r}; "
                         "sitemaps have no use for entities and polite never expands them "
                         "(billion laughs, external entities), so the file is refused")

    def _declared(self, prefix: str | None, uri: str) -> None:
        if uri in _ATTRIBUTE_NS:
            self.attribute_ns = True

    def _classify(self, name: str) -> int:
        namespace, local = _split(name)
        if namespace in self.core_ns:
            code = _CORE_NAMES.get(local, _OTHER)
        elif namespace in _EXTENSIONS:
            code = _EXT
        else:
            code = _OTHER
        self.codes[name] = code
        return code

    def _root(self, name: str, attrs: dict[str, str]) -> None:
        owner = self.owner
        namespace, local = _split(name)
        parser = self.parser
        if local in ("urlset", "sitemapindex"):
            if namespace not in self.core_ns and namespace not in _EXTENSIONS:
                owner._issue(parser.CurrentLineNumber, "namespace",
                             f"<{local}> in namespace {namespace!r}, not sitemaps.org's; "
                             "read as a sitemap", Severity.WARNING)
                self.core_ns.add(namespace)
            owner.format = "urlset" if local == "urlset" else "sitemapindex"
            self._sitemap_handlers()
        elif (local == "rss" and not namespace) or (local == "RDF" and namespace == _RDF_NS):
            owner.format = "rss"
            _FeedReader(self, atom=False)
        elif local == "feed" and namespace in _ATOM_NS:
            owner.format = "atom"
            _FeedReader(self, atom=True)
        else:
            shown = f"{{{namespace}}}{local}" if namespace else local
            owner._stop(parser.CurrentLineNumber, "not-a-sitemap",
                        f"not a sitemap: the root element is <{shown}>")

    # -- urlset and sitemapindex -------------------------------------------------------------

    def _sitemap_handlers(self) -> None:
        # The hot path. expat calls no Python for the body of a plain urlset: character
        # data and end tags are appended to one list by list.append itself, and drain()
        # reads that list once per parsed chunk. Element names come out of expat through
        # the intern dict, where each known name maps to a _Name (a str carrying its class),
        # so an end tag and a run of text tell apart by type alone. Names met for the first
        # time are classified after the chunk (refresh). Where the file declares a namespace
        # whose elements carry attributes we read (xhtml:link, video:price and the like),
        # a start handler runs too; it also keeps the line count exact at every start tag.
        owner = self.owner
        parser = self.parser
        seq = self.seq
        intern = self.intern
        text: list[str] = []
        append = owner._out.append
        new_entry = tuple.__new__
        location = owner._location
        issue = owner._issue
        max_urls = owner.max_urls
        extension = _Extensions(self, text)
        ext_end = extension.end
        fromisoformat = datetime.fromisoformat
        frequencies = {name: name for name in CHANGEFREQS}
        ranks: dict[str, float] = {}
        names: list[str] = []  # extension element names, by code - _EXT

        def code_of(name: str) -> int:
            code = self._classify(name)
            if code == _EXT:
                names.append(name)
                code = _EXT + len(names) - 1
            return code

        for namespace in self.core_ns:
            for local, code in _CORE_NAMES.items():
                intern[f"{namespace} {local}" if namespace else local] = code

        loc: str | None = None
        lastmod: str | None = None
        changefreq: str | None = None
        priority: str | None = None
        etype: str | None = None
        srcloc: str | None = None
        line = parser.CurrentLineNumber  # the line the parse has reached, in drain()
        entry_line = 0
        carried = ""  # text not yet ended when a drain finished
        known = 0  # how many names intern held at the last refresh

        def refresh() -> None:
            # Names expat met for the first time went into intern as plain str. Those that
            # stand in seq as end tags (found by identity: expat appended the very object it
            # interned) get their code, there and in intern.
            nonlocal known
            known = len(intern)
            new = {id(value): name for name, value in intern.items() if value.__class__ is str}
            if not new:
                return
            for index, item in enumerate(seq):
                if item.__class__ is str and id(item) in new:
                    seq[index] = intern[new[id(item)]] = code_of(new[id(item)])

        def drain() -> None:
            # Fast locals in the loop; the entry's fields go back to the closure at the end,
            # where a later drain (or a break in the XML) finds them.
            nonlocal loc, lastmod, changefreq, priority, etype, srcloc, line, entry_line
            nonlocal carried
            if len(intern) != known:
                refresh()
            e_loc, e_lastmod, e_changefreq, e_priority = loc, lastmod, changefreq, priority
            e_type, e_srcloc, e_line, at = etype, srcloc, entry_line, line
            count = owner.count
            url, sitemap, loc_code, ext_code = _URL, _SITEMAP, _LOC, _EXT
            value = carried  # the text since the last end tag (or start tag)
            for item in seq:
                if item.__class__ is str:
                    value = value + item if value else item
                    at += item.count("\n")
                    continue
                if item == loc_code:
                    e_loc = value.strip()
                    e_line = at
                elif item == _LASTMOD:
                    e_lastmod = value.strip()
                elif item == _CHANGEFREQ:
                    e_changefreq = value.strip()
                elif item == _PRIORITY:
                    e_priority = value.strip()
                elif item == url or item == sitemap:  # noqa: SIM109 - no tuple built per item
                    if e_loc is None:  # <sitemap>URL</sitemap>, as some index files have it
                        e_loc = value.strip()
                        e_line = at
                    if e_loc and e_loc.startswith(("https://", "http://")) and \
                            len(e_loc) < _MAX_LOC and count < max_urls and \
                            e_type is None and e_srcloc is None and not extension.used:
                        # The common entry, read inline.
                        when = None
                        if e_lastmod:
                            if len(e_lastmod) == 25 and e_lastmod[10] == "T" and \
                                    e_lastmod[13] == ":":
                                try:
                                    when = fromisoformat(e_lastmod)
                                except ValueError:
                                    when = None
                                if when is not None and when.tzinfo is None:
                                    when = None
                            else:
                                when = parse_w3c(e_lastmod)
                            if when is None:
                                bad_lastmod(e_lastmod, e_line)
                        rank = None
                        if e_priority:
                            rank = ranks.get(e_priority)  # a file uses a handful of values
                            if rank is None:
                                rank = read_priority(e_priority, e_line)
                        frequency = None
                        if e_changefreq:
                            frequency = frequencies.get(e_changefreq) or \
                                bad_changefreq(e_changefreq, e_line)
                        append(new_entry(Entry, (
                            e_loc, "url" if item == url else "sitemap", when, frequency, rank,
                            e_line, None, None, None, (), (), None, (), False)))
                        count += 1
                    else:
                        owner.count = count
                        finish(item, e_loc, e_lastmod, e_changefreq, e_priority, e_type,
                               e_srcloc, e_line)
                        count = owner.count
                    e_loc = e_lastmod = e_changefreq = e_priority = e_type = e_srcloc = None
                elif item < 0:  # newlines inside a comment or a processing instruction
                    at -= item
                    continue
                elif item >= ext_code:
                    text[:] = (value,)
                    ext_end(names[item - ext_code], at)
                elif item == _TYPE:
                    e_type = value.strip()
                elif item == _SRCLOC:
                    e_srcloc = value.strip()
                value = ""
            owner.count = count
            loc, lastmod, changefreq, priority = e_loc, e_lastmod, e_changefreq, e_priority
            etype, srcloc, entry_line, line = e_type, e_srcloc, e_line, at
            carried = value if len(value) <= _MAX_TEXT else _bounded(value)
            seq.clear()

        def read_priority(value: str, line: int) -> float | None:
            try:
                rank: float | None = float(value)
            except ValueError:
                rank = None
            if rank is None or not 0.0 <= rank <= 1.0:
                bad_priority(value, line)
                return None
            if len(ranks) < 256:
                ranks[value] = rank
            return rank

        def bad_lastmod(value: str, line: int) -> None:
            issue(line, "bad-lastmod", f"<lastmod> {value[:80]!r} is not a W3C datetime; "
                  "left out")

        def bad_priority(value: str, line: int) -> None:
            issue(line, "bad-priority", f"<priority> {value[:80]!r} is not a number from 0.0 "
                  "to 1.0; left out")

        def bad_changefreq(value: str, line: int) -> str | None:
            frequency = frequencies.get(value.lower())
            if frequency is None:
                issue(line, "bad-changefreq", f"<changefreq> {value[:80]!r} is not one of "
                      "always, hourly, daily, weekly, monthly, yearly, never; left out")
            return frequency

        def finish(code: int, loc: str | None, lastmod: str | None, changefreq: str | None,
                   priority: str | None, etype: str | None, srcloc: str | None,
                   line: int) -> None:
            kind = "url" if code == _URL else "sitemap"
            if owner.count >= max_urls:
                owner._too_many(line)
            checked = location(line, "<loc>", loc or "")
            if checked is None:
                if extension.used:
                    extension.reset()
                return
            when = None
            if lastmod:
                when = parse_w3c(lastmod)
                if when is None:
                    bad_lastmod(lastmod, line)
            rank = None
            if priority:
                try:
                    rank = float(priority)
                except ValueError:
                    rank = None
                if rank is None or not 0.0 <= rank <= 1.0:
                    rank = None
                    bad_priority(priority, line)
            frequency = None
            if changefreq:
                frequency = frequencies.get(changefreq) or bad_changefreq(changefreq, line)
            kind_of = None
            if etype:
                kind_of = etype.lower()
                if kind_of not in _REGP_TYPES:
                    issue(line, "bad-type", f"<type> {etype[:80]!r} is not data, list or "
                          "other; left out")
                    kind_of = None
            source = location(line, "<srcloc>", srcloc) if srcloc else None
            if extension.used:
                images, videos, news, alternates, mobile = extension.take()
            else:
                images, videos, news, alternates, mobile = (), (), None, (), False
            append(new_entry(Entry, (checked, kind, when, frequency, rank, line, kind_of,
                                     source, None, images, videos, news, alternates, mobile)))
            owner.count += 1

        def finish_pending() -> None:
            # The XML broke: read what came before the break; keep an open entry only if
            # its <loc> was closed.
            drain()
            if loc:
                finish(_URL, loc, lastmod, changefreq, priority, etype, srcloc, entry_line)

        def start(name: str | int, attrs: dict[str, str]) -> None:
            nonlocal line, carried
            drain()
            carried = ""
            line = parser.CurrentLineNumber
            if isinstance(name, str):  # met for the first time
                code = intern[name] = code_of(name)
            else:
                code = name
            if attrs and code >= _EXT:
                extension.start(names[code - _EXT], attrs, line)

        def first_start(name: str | int, attrs: dict[str, str]) -> None:
            # The first element inside the root: from here the line count is exact.
            start(name, attrs)
            if not self.attribute_ns:
                parser.StartElementHandler = None

        def namespace_declared(prefix: str | None, uri: str) -> None:
            if uri in _ATTRIBUTE_NS and not self.attribute_ns:
                self.attribute_ns = True
                drain()
                parser.StartElementHandler = start

        def newlines(*parts: str) -> None:
            count = sum(part.count("\n") for part in parts if part)
            if count:
                seq.append(-count)

        self.finish_pending = finish_pending
        self.after_parse = drain
        parser.StartElementHandler = start if self.attribute_ns else first_start
        parser.StartNamespaceDeclHandler = namespace_declared
        parser.CommentHandler = newlines
        parser.ProcessingInstructionHandler = newlines
        parser.EndElementHandler = seq.append
        parser.CharacterDataHandler = seq.append


class _Extensions:
    """Google's image, video, news, hreflang and mobile extensions inside one ``<url>``.
    Fields gather in a record until the element that holds them ends."""

    def __init__(self, reader: _XmlReader, text: list[str]) -> None:
        self.reader = reader
        self.issue = reader.owner._issue
        self.text = text
        self.names: dict[str, tuple[str, str, str]] = {}  # family, local name, _role
        self.reset()

    def reset(self) -> None:
        self.used = False
        self.images: list[Image] = []
        self.videos: list[Video] = []
        self.news: News | None = None
        self.alternates: list[Alternate] = []
        self.mobile = False
        # The fields of the image, video and news being read, each family apart: a field
        # only ever fills an element of its own family. Only end tags reach this class on
        # the fast path, so a field is known to be misplaced when its family's element does
        # not close after it (``loose``: the first such field's line and name).
        self.records: dict[str, dict[str, Any]] = {"image": {}, "video": {}, "news": {}}
        self.loose: dict[str, tuple[int, str]] = {}
        self.attrs: dict[str, dict[str, str]] = {}  # attributes by element, until its end

    def _name(self, name: str) -> tuple[str, str, str]:
        known = self.names.get(name)
        if known is None:
            namespace, local = _split(name)
            family = _EXTENSIONS[namespace]
            known = self.names[name] = (family, local, _role(family, local))
        return known

    def start(self, name: str, attrs: dict[str, str], line: int) -> None:
        self.used = True
        family, local, _ = self._name(name)
        if family == "xhtml":
            if local == "link" and attrs.get("rel", "").lower() == "alternate":
                href = attrs.get("href", "").strip()
                lang = attrs.get("hreflang", "").strip()
                if href and lang:
                    self.alternates.append(Alternate(lang, href))
                else:
                    self.issue(line, "bad-alternate",
                               "<xhtml:link rel=alternate> without hreflang or href; left out")
        else:
            self.attrs[local] = attrs

    def end(self, name: str, line: int) -> None:
        self.used = True
        family, local, role = self._name(name)
        if role is _FIELD:
            if family not in self.loose:
                self.loose[family] = (line, local)
            value = self._value(family, local, line)
            if family == "video":
                self._video_field(self.records["video"], local, value, line)
            else:
                self.records[family][local] = value
        elif role is _HOLDER:  # the element that holds the fields read so far
            record = self.records[family]
            self.records[family] = {}
            self.loose.pop(family, None)
            if family == "image":
                self._image(record, line)
            elif family == "video":
                self._video(record, line)
            else:
                self._news(record, line)
        elif role is _UNKNOWN:
            self.issue(line, "bad-extension", f"<{family}:{local}> is not an element of the "
                       f"{family} extension; left out")
        elif role is _MOBILE:
            self.mobile = True

    def _value(self, family: str, local: str, line: int) -> str:
        return self.reader.owner._text(line, f"<{family}:{local}>", "".join(self.text).strip())

    def take(self) -> tuple[tuple[Image, ...], tuple[Video, ...], News | None,
                            tuple[Alternate, ...], bool]:
        for family, (line, local) in self.loose.items():
            self.issue(line, "bad-extension", f"<{family}:{local}> outside any "
                       f"<{family}:{family}>; left out")
        values = (tuple(self.images), tuple(self.videos), self.news, tuple(self.alternates),
                  self.mobile)
        self.reset()
        return values

    def _image(self, record: dict[str, Any], line: int) -> None:
        loc = record.get("loc")
        if not loc:
            self.issue(line, "bad-image", "<image:image> without <image:loc>; left out")
            return
        self.images.append(Image(loc, record.get("caption") or None,
                                 record.get("geo_location") or None,
                                 record.get("title") or None, record.get("license") or None))

    def _news(self, record: dict[str, Any], line: int) -> None:
        name = record.get("name") or None
        if name is None:
            self.issue(line, "bad-news", "<news:news> without a publication name; Google "
                       "News would reject it", Severity.WARNING)
        when = None
        raw = record.get("publication_date")
        if raw:
            when = parse_w3c(raw)
            if when is None:
                self.issue(line, "bad-date", f"<news:publication_date> {raw[:80]!r} is not a "
                           "W3C datetime; left out")
        self.news = News(name, record.get("language") or None, when,
                         record.get("title") or None, _items(record.get("keywords")),
                         _items(record.get("genres")), _items(record.get("stock_tickers")),
                         record.get("access") or None)

    def _video_field(self, record: dict[str, Any], local: str, value: str, line: int) -> None:
        attrs = self.attrs.pop(local, {})
        if local in _VIDEO_TEXT:
            record[local] = value or None
            if local == "gallery_loc" and attrs.get("title"):
                record["gallery_title"] = attrs["title"]
            elif local == "uploader" and attrs.get("info"):
                record["uploader_info"] = attrs["info"]
        elif local in _VIDEO_LISTS:
            if value:
                record.setdefault("tags", []).append(value)
        elif local in ("duration", "view_count"):
            record[local] = self._number(int, local, value, line)
        elif local == "rating":
            rating = self._number(float, local, value, line)
            record[local] = rating if rating is None or 0.0 <= rating <= 5.0 else None
        elif local in ("expiration_date", "publication_date"):
            if value:
                when = parse_w3c(value)
                if when is None:
                    self.issue(line, "bad-date", f"<video:{local}> {value[:80]!r} is not a "
                               "W3C datetime; left out")
                record[local] = when
        elif local in ("family_friendly", "requires_subscription", "live"):
            flag = _YES_NO.get(value.lower())
            if flag is None and value:
                self.issue(line, "bad-flag", f"<video:{local}> {value[:40]!r} is not yes or "
                           "no; left out")
            record[local] = flag
        elif local in ("restriction", "platform"):
            relationship = attrs.get("relationship", "").lower() or "allow"
            record[local] = (relationship, tuple(value.split()))
        elif local == "price":
            amount = self._number(float, local, value, line) if value else None
            record.setdefault("prices", []).append(Price(
                amount, attrs.get("currency") or None, attrs.get("type") or None,
                attrs.get("resolution") or None))
        elif value:
            record.setdefault("extra", []).append((local, value))

    def _number(self, kind: Callable[[str], Any], local: str, value: str,
                line: int) -> Any:
        if not value:
            return None
        try:
            return kind(value)
        except ValueError:
            self.issue(line, "bad-number", f"<video:{local}> {value[:40]!r} is not a "
                       "number; left out")
            return None

    def _video(self, record: dict[str, Any], line: int) -> None:
        for name in ("tags", "prices", "extra"):
            if name in record:
                record[name] = tuple(record[name])
        if not record.get("content_loc") and not record.get("player_loc"):
            self.issue(line, "bad-video", "<video:video> has neither content_loc nor "
                       "player_loc", Severity.WARNING)
        self.videos.append(Video(**record))


# What an extension element is to _Extensions.end: a field of its family's element, that
# element itself, one its extension does not define, mobile:mobile, or nothing to read
# (news:publication, which only groups fields; xhtml:link, read at its start).
_FIELD, _HOLDER, _UNKNOWN, _MOBILE, _NOTHING = "field", "holder", "unknown", "mobile", "-"


def _role(family: str, local: str) -> str:
    if family in ("image", "video", "news"):
        if local == family:
            return _HOLDER
        if family == "news" and local == "publication":
            return _NOTHING
        known = _IMAGE_FIELDS if family == "image" else _NEWS_FIELDS
        return _FIELD if family == "video" or local in known else _UNKNOWN
    return _MOBILE if family == "mobile" and local == "mobile" else _NOTHING


def _items(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    return tuple(item for part in text.split(",") if (item := part.strip()))


class _FeedReader:
    """RSS 2.0, RSS 1.0 and Atom: one entry per item, its link (or an RSS guid that is a
    URL, or an RSS 1.0 ``rdf:about``), title and date."""

    def __init__(self, reader: _XmlReader, *, atom: bool) -> None:
        self.reader = reader
        self.owner = reader.owner
        self.atom = atom
        self.depth = 0
        self.item_depth = 0  # depth of the open item, 0 outside one
        self.reset(0)
        reader.parser.StartElementHandler = self.start
        reader.parser.EndElementHandler = self.end
        reader.finish_pending = self.finish_pending

    def reset(self, line: int) -> None:
        self.line = line
        self.link: str | None = None
        self.guid: str | None = None
        self.about: str | None = None
        self.title: str | None = None
        self.date: datetime | None = None

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self.reader.text.clear()
        self.depth += 1
        local = _split(name)[1]
        if local in ("item", "entry") and not self.item_depth:
            self.item_depth = self.depth
            self.reset(self.reader.parser.CurrentLineNumber)
            self.about = attrs.get(_RDF_NS + " about")
        elif (local == "link" and self.atom and self.item_depth and self.link is None
              and attrs.get("rel", "alternate") == "alternate" and attrs.get("href")):
            # Atom: a link with no rel is rel="alternate" (RFC 4287, 4.2.7.2).
            self.link = attrs["href"].strip()

    def end(self, name: str) -> None:
        local = _split(name)[1]
        depth = self.depth
        self.depth -= 1
        value = "".join(self.reader.text).strip()
        self.reader.text.clear()
        if not self.item_depth:
            if local in ("pubDate", "lastBuildDate", "updated", "modified", "date") \
                    and self.owner.updated is None and value:
                self.owner.updated = self._date(local, value)
            return
        if depth == self.item_depth:
            self.finish()
            self.item_depth = 0
        elif depth == self.item_depth + 1:
            if local == "link" and not self.atom and value and self.link is None:
                self.link = value
            elif local == "guid" and value:
                self.guid = value
            elif local == "title":
                self.title = self.owner._text(self.reader.parser.CurrentLineNumber, "<title>",
                                              value) or None
            elif local in ("pubDate", "updated", "modified", "date") and value:
                date = self._date(local, value)
                if date is not None or self.date is None:
                    self.date = date

    def _date(self, local: str, value: str) -> datetime | None:
        when = parse_rfc822(value) if local in ("pubDate", "lastBuildDate") else \
            parse_w3c(value)
        if when is None:
            self.owner._issue(self.reader.parser.CurrentLineNumber, "bad-date",
                              f"<{local}> {value[:80]!r} is not a date with a time zone; "
                              "left out")
        return when

    def finish(self) -> None:
        owner = self.owner
        loc = self.link
        if loc is None and self.guid and _absolute(self.guid):
            loc = self.guid
        if loc is None:
            loc = self.about
        if loc is None:
            owner._issue(self.line, "no-link", "feed item without a link; skipped")
            return
        if owner.count >= owner.max_urls:
            owner._too_many(self.line)
        checked = owner._location(self.line, "link", loc)
        if checked is not None:
            owner._out.append(Entry(checked, "url", self.date, line=self.line,
                                    title=self.title))
            owner.count += 1

    def finish_pending(self) -> None:
        if self.item_depth and self.link:
            self.finish()


# -- whole files -------------------------------------------------------------------------------


class Sitemap:
    """What ``parse`` returns: iterate it for the entries, in file order, as they are read;
    ``issues``, ``format`` and ``stopped`` describe the file once iteration has ended."""

    def __init__(self, source: bytes | BinaryIO | Iterable[bytes], url: str | None,
                 **limits: int) -> None:
        self._source = source
        self.parser = SitemapParser(url, **limits)
        self._started = False

    @property
    def issues(self) -> list[ParseIssue]:
        return self.parser.issues

    @property
    def format(self) -> Format | None:
        return self.parser.format

    @property
    def stopped(self) -> ParseIssue | None:
        return self.parser.stopped

    def __iter__(self) -> Iterator[Entry]:
        if self._started:
            raise RuntimeError("a Sitemap is read once; call parse() again")
        self._started = True
        parser = self.parser
        for chunk in _chunks(self._source):
            yield from parser.feed(chunk)
            if parser.stopped is not None:
                break
        yield from parser.close()


def _chunks(source: bytes | BinaryIO | Iterable[bytes]) -> Iterator[bytes]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source)
        for start in range(0, len(view), _FEED_STEP):
            yield bytes(view[start:start + _FEED_STEP])
    elif hasattr(source, "read"):
        while chunk := source.read(_FEED_STEP):
            yield chunk
    else:
        yield from source


def parse(data: bytes | BinaryIO | Iterable[bytes], url: str | None = None, *,
          max_bytes: int = MAX_SITEMAP_BYTES, max_urls: int = MAX_SITEMAP_URLS) -> Sitemap:
    """Read one sitemap file (bytes, a binary file, or an iterable of byte chunks).

    >>> sitemap = parse(b"https://example.com/a\\nhttps://example.com/b\\n")
    >>> [entry.loc for entry in sitemap]
    ['https://example.com/a', 'https://example.com/b']
    >>> sitemap.format
    'text'
    """
    return Sitemap(data, url, max_bytes=max_bytes, max_urls=max_urls)

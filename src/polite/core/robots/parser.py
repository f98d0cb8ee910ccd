"""Reading a robots.txt body into groups, rules and typed fields, in any dialect.

The reader is lenient the way Google's parser is (typos, missing colons, a BOM, any line
ending, NUL bytes, over-long lines) and reports every line it skipped or read leniently as a
:class:`ParseIssue` (repeats said once, with a count and their first lines). The body is
handled as octets (decoded as Latin-1) so that patterns and URLs compare byte for byte; text
fields are decoded as UTF-8 when stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, count, islice, repeat
from operator import contains, eq, gt
from typing import TypeVar, cast
from urllib.parse import urljoin

from polite.core._steps import STEP, Steps, finish
from polite.core.robots.model import (
    MAX_LISTED_LINES,
    PACKED_FROM,
    Block,
    Dialect,
    Directive,
    Directives,
    FlatRules,
    Group,
    IpRule,
    ParseIssue,
    RawRule,
    RawRules,
    Severity,
    fold_issues,
)
from polite.core.robots.values import (
    parse_clean_param,
    parse_delay,
    parse_http_date,
    parse_ip_pattern,
    parse_list,
    parse_rate,
    parse_time_window,
    parse_version,
)
from polite.core.urls import canonical_koster, canonical_rfc9309, from_octets
from polite.core.usage.statement import read_rule_value

__all__ = [
    "MAX_LINE_OCTETS",
    "MAX_ROBOTS_BYTES",
    "ParsedBody",
    "RawIssue",
    "classify_key",
    "detect_dialect",
    "escape_google_pattern",
    "issue_from_raw",
    "known_field",
    "looks_like_html",
    "parse_body",
    "pattern_path",
    "read_issues",
]

# RFC 9309, section 2.5: parsers must read at least the first 500 KiB.
MAX_ROBOTS_BYTES = 500 * 1024
# Google's parser keeps at most 2083 * 8 octets of a line (robots.cc, kMaxLineLen).
MAX_LINE_OCTETS = 2083 * 8 - 1

_Value = TypeVar("_Value")  # what a field reader makes of a value

_WS = " \t\n\v\f\r"
_UTF8_BOM = "\xef\xbb\xbf"

# Field kinds. Strings rather than an enum: they are compared in the hot loop.
UA, ALLOW, DISALLOW, SITEMAP, OTHER = "user-agent", "allow", "disallow", "sitemap", "other"
IP_ALLOW, IP_DISALLOW = "ip-allow", "ip-disallow"
VERSION, LAST_MODIFIED = "robot-version", "last-modified"

_DISALLOW_TYPOS = ("dissallow", "dissalow", "disalow", "diasllow", "disallaw")


_text = from_octets


def _site_names(value: str) -> object:
    names = tuple(n.strip() for n in value.split("|") if n.strip())
    return names or None


def _arrow_pair(value: str) -> object:
    left, arrow, right = value.partition("=>")
    if not arrow or not left.strip() or not right.strip():
        return None
    return (left.strip(), right.strip())


def _last_updated(value: str) -> object:
    path, arrow, stamp = value.partition("=>")
    if not arrow or not path.strip():
        return None
    try:
        return (path.strip(), int(stamp.strip()))
    except ValueError:
        return None


def _non_empty(value: str) -> object:
    return value or None


# Known fields other than the group structure: canonical name -> reader of the value.
# Seed 000 Table 3 (REGP), Yandex's Host and Clean-param, seed 003's extensions.
_READERS: dict[str, Callable[[str], object]] = {
    "crawl-delay": parse_delay,
    "ip-delay": parse_delay,
    "request-rate": parse_rate,
    "ip-rate": parse_rate,
    "visit-time": parse_time_window,
    "time-forbidden": parse_time_window,
    "language": lambda v: parse_list(v) or None,
    "encoding": lambda v: parse_list(v) or None,
    "charset": lambda v: parse_list(v) or None,
    "cookie": _non_empty,
    "mirror-site": _non_empty,
    "host": _non_empty,
    "index-page": _non_empty,
    "change-always": _non_empty,
    "change-hourly": _non_empty,
    "change-daily": _non_empty,
    "change-weekly": _non_empty,
    "change-monthly": _non_empty,
    "change-yearly": _non_empty,
    "change-never": _non_empty,
    "clean-param": parse_clean_param,
    "site-name": _site_names,
    "site-temp-name": _arrow_pair,
    "last-updated": _last_updated,
    "robots-ttl": parse_delay,
    "ttl": parse_delay,
    "noindex": _non_empty,
    # AI-usage preferences: draft-ietf-aipref-attach's rule, Cloudflare's Content Signals
    # (same shape: an optional path, then a dictionary) and RSL's licence link.
    "content-usage": read_rule_value,
    "content-signal": read_rule_value,
    "license": _non_empty,
}

_KEYS: dict[str, str] = {
    "user-agent": UA,
    "allow": ALLOW,
    "disallow": DISALLOW,
    "sitemap": SITEMAP,
    "ip-allow": IP_ALLOW,
    "ip-disallow": IP_DISALLOW,
    "robot-version": VERSION,
    "last-modified": LAST_MODIFIED,
}


def _classify(key: str) -> tuple[str, str, bool]:
    """(kind, canonical name, read-as-typo) for a lower-cased key."""
    kind = _KEYS.get(key)
    if kind is not None:
        return kind, key, False
    if key in _READERS:
        return OTHER, key, False
    normal = key.replace("_", "-").replace(" ", "-")
    kind = _KEYS.get(normal)
    if kind is not None:
        return kind, normal, True
    if normal in _READERS:
        return OTHER, normal, True
    # Google's prefix rules (robots.cc, ParsedRobotsKey): "user-agents", "disalow", ...
    if key.startswith(("user-agent", "useragent", "user agent")):
        return UA, UA, True
    if key.startswith("allow"):
        return ALLOW, ALLOW, True
    if key.startswith("disallow") or key.startswith(_DISALLOW_TYPOS):
        return DISALLOW, DISALLOW, True
    if key.startswith(("sitemap", "site-map")):
        return SITEMAP, SITEMAP, True
    return OTHER, key, False


def classify_key(key: str) -> tuple[str, str, bool]:
    """How the reader takes a field name: ``(kind, canonical name, read as a typo)``, kind one
    of ``user-agent``, ``allow``, ``disallow``, ``sitemap``, ``ip-allow``, ``ip-disallow``,
    ``robot-version``, ``last-modified`` or ``other``."""
    return _classify(key.strip(_WS).lower())


def known_field(name: str) -> bool:
    """Whether ``name`` (canonical, lower case) is a field whose value the reader types."""
    return name in _READERS


# A classified key: (kind, canonical name, read as a typo, is a plain rule, is Allow).
# A classified key: (kind, canonical name, read as a typo, is a plain rule, is Allow, and
# for a field no dialect reads that is kept as an extension: its name and the key as the
# issue shows it).
_Known = tuple[str, str, bool, bool, bool, tuple[str, str] | None]


def _known(classified: tuple[str, str, bool], key: str) -> _Known:
    """``classified`` for the key ``key`` (as written, white space stripped)."""
    kind, name, typo = classified
    unknown = None
    if kind is OTHER and name not in _READERS and _FIELD_NAME.fullmatch(key) is not None:
        lowered = _text(key).lower()
        if lowered not in ("http", "https"):  # maybe a bare sitemap URL: see directive()
            unknown = (lowered, key)
    return (kind, name, typo, (kind is ALLOW or kind is DISALLOW) and not typo, kind is ALLOW,
            unknown)


# Keys seen before (as written) skip the classification; bounded so hostile input cannot
# grow it.
_KEY_CACHE: dict[str, _Known] = {}
_KEY_CACHE_SIZE = 4096


def escape_google_pattern(octets: str) -> str:
    """Google's MaybeEscapePattern: encode octets above 0x7F, upper-case ``%xx`` escapes."""
    if octets.isascii() and "%" not in octets:
        return octets
    out: list[str] = []
    i, n = 0, len(octets)
    while i < n:
        ch = octets[i]
        if ch == "%" and i + 2 < n and _is_hex(octets[i + 1]) and _is_hex(octets[i + 2]):
            out.append("%" + octets[i + 1 : i + 3].upper())
            i += 3
            continue
        code = ord(ch)
        out.append(f"%{code:02X}" if code > 0x7F else ch)
        i += 1
    return "".join(out)


def _is_hex(ch: str) -> bool:
    return ch in "0123456789abcdefABCDEF"


def pattern_path(dialect: Dialect, octets: str) -> str:
    """The form of an Allow/Disallow value that the dialect matches paths against."""
    if dialect is Dialect.GOOGLE:
        return escape_google_pattern(octets)
    if dialect is Dialect.KOSTER1996:
        return canonical_koster(octets)
    if dialect is Dialect.REGP:
        return canonical_rfc9309(octets).lower()
    return canonical_rfc9309(octets)


@dataclass(slots=True)
class ParsedBody:
    """What :func:`parse_body` read; :class:`polite.core.robots.RobotsTxt` wraps it.

    The groups are kept as a table (their lines, agents, and where each one's rules and
    fields end in the file's), a :class:`Group` made only when asked for (:meth:`group`,
    :attr:`groups`): a crawler asks for the few its agent selects."""

    dialect: Dialect
    group_lines: tuple[int, ...] = ()
    group_agents: tuple[tuple[str, ...], ...] = ()
    # the rules of every group, in file order: flat (allow, line, value as three items) when
    # few, else packed; and after how many of them each group ends
    rule_items: tuple[bool | int | str, ...] | RawRules = ()
    rule_ends: tuple[int, ...] = ()
    field_items: Sequence[Directive] = ()
    field_ends: tuple[int, ...] = ()
    # REGP's: each group's IP rules and brace blocks (None elsewhere)
    group_extras: tuple[tuple[tuple[IpRule, ...], tuple[Block, ...]], ...] | None = None
    global_directives: tuple[Directive, ...] = ()
    global_blocks: tuple[Block, ...] = ()
    sitemaps: tuple[str, ...] = ()
    # the issues flat, five items an issue (see RawIssue): a tuple an issue was one more
    # object for the garbage collector, and an HTML page served as robots.txt has one a line
    issue_items: tuple[int | str | None, ...] = ()
    version: tuple[int, int] | None = None
    last_modified: float | None = None
    truncated: bool = False
    looks_like_html: bool = False
    size: int = 0
    line_count: int = 0
    # an HTML page's lines of markup, counted rather than read one by one (see
    # _Reader.read_page), and the first of their numbers: read_issues adds them to its html
    # issue's
    markup_count: int = 0
    markup_lines: tuple[int, ...] = ()

    @property
    def raw_issues(self) -> tuple[RawIssue, ...]:
        """The issues read, as :data:`RawIssue` tuples in the order they were found."""
        items = self.issue_items
        return tuple(cast(RawIssue, items[at:at + _ISSUE_ITEMS])
                     for at in range(0, len(items), _ISSUE_ITEMS))

    @property
    def groups(self) -> tuple[Group, ...]:
        """Every group, in file order, made from the table (see :meth:`group`)."""
        return tuple(map(self.group, range(len(self.group_lines))))

    def group(self, i: int) -> Group:
        """The ``i``-th group (from 0), made now: its rules a part of the file's flat table
        or of its packing, its fields a tuple or a part of theirs; nothing keeps it but its
        caller (a matcher keeps the rules it needs)."""
        ip_rules, blocks = self.group_extras[i] if self.group_extras else ((), ())
        return Group(self.group_lines[i], self.group_agents[i], self.rules_of(i),
                     self.fields_of(i), ip_rules, blocks)

    def rules_of(self, i: int) -> Sequence[RawRule]:
        """The rules of the ``i``-th group: a part of the file's flat table, or of its
        packing."""
        start, stop = _span(self.rule_ends, i)
        items = self.rule_items
        if start == stop:
            return ()
        if isinstance(items, RawRules):
            return items.part(start, stop)
        return FlatRules.of(items, start, stop)

    def fields_of(self, i: int) -> Sequence[Directive]:
        """The fields of the ``i``-th group: a tuple, or a part of the packing."""
        start, stop = _span(self.field_ends, i)
        items = self.field_items
        if start == stop:
            return ()
        if isinstance(items, Directives):
            return items.part(start, stop)
        return tuple(items[start:stop])


def _span(ends: tuple[int, ...], i: int) -> tuple[int, int]:
    """Where the ``i``-th group's items start and stop, from where each group's end: each
    starts where the one before it ends."""
    return ends[i - 1] if i else 0, ends[i]


_VERSION_LINE = re.compile(r"[ \t]*robot-version[ \t]*:[ \t]*(\d+)")
# What a markup page starts with, never a robots.txt file: sites that answer every path with
# their home page (seed 004's "html" class). One pattern for the parser's warning, the fetch
# status table (no rules) and the survey's outcome class.
_HTML_START = re.compile(
    r"\A\s*<(?:!doctype\s+html|html|head|body|title|meta|script|\?xml|!--)", re.IGNORECASE)
# How far into a body the pattern looks (leading white space only comes before it).
HTML_WINDOW = 1024


def looks_like_html(head: str | bytes) -> bool:
    """Whether a body (its first :data:`HTML_WINDOW` characters are enough) is a markup page
    rather than a robots.txt file."""
    if isinstance(head, bytes):
        head = head[:HTML_WINDOW].decode("latin-1")
    return _HTML_START.match(head, 0, HTML_WINDOW) is not None


def detect_dialect(octets: str) -> Dialect:
    """``regp`` when the file declares ``Robot-version: 3.0`` or higher, else ``rfc9309``."""
    if "-version" in octets or "-Version" in octets or "-VERSION" in octets:
        lower = octets.lower()
        at = lower.find("robot-version")
        while at >= 0:
            start = lower.rfind("\n", 0, at) + 1
            m = _VERSION_LINE.match(lower, start)
            if m is not None and int(m.group(1)) >= 3:
                return Dialect.REGP
            at = lower.find("robot-version", at + 1)
    return Dialect.RFC9309


def parse_body(
    body: bytes | str,
    dialect: Dialect | None,
    *,
    url: str | None = None,
    max_bytes: int = MAX_ROBOTS_BYTES,
) -> ParsedBody:
    """Read a robots.txt body; ``dialect`` ``None`` means detect it (see :func:`detect_dialect`)."""
    return finish(parse_body_steps(body, dialect, url=url, max_bytes=max_bytes))


def parse_body_steps(
    body: bytes | str,
    dialect: Dialect | None,
    *,
    url: str | None = None,
    max_bytes: int = MAX_ROBOTS_BYTES,
) -> Steps[ParsedBody]:
    """:func:`parse_body` in steps (see :mod:`polite.core._steps`)."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    size = len(body)
    truncated = size > max_bytes
    whole = octets = (body[:max_bytes] if truncated else body).decode("latin-1")
    # What comes before the lines: the same whichever dialect reads them.
    issues: list[int | str | None] = []  # flat: see ParsedBody.issue_items
    if truncated:
        issues += (0, "truncated", "error",
                   f"file is {size} bytes; only the first {max_bytes} were read", "")
    if octets.startswith(("\xef", "\xbb", "\xbf")):
        skip = 0
        while skip < 3 and skip < len(octets) and octets[skip] == _UTF8_BOM[skip]:
            skip += 1
        if skip:
            octets = octets[skip:]
            code = "bom" if skip == 3 else "partial-bom"
            issues += (1, code, "info", "byte order mark skipped", "")
    utf16 = octets.startswith(("\xff\xfe", "\xfe\xff"))
    if utf16:
        order = "FF FE" if octets[0] == "\xff" else "FE FF"
        issues += (
            1, "utf-16", "error", f"the file is UTF-16 (byte order mark {order}), not UTF-8 as "
            "RFC 9309 requires: no rule of it is read (every character holds a NUL byte), by "
            "polite or by other crawlers; save it as UTF-8", "")
    html = looks_like_html(octets)
    if html:
        issues += (1, "html", "error", "the body looks like an HTML page, not a robots.txt file",
                   "")
    reader = _Reader(dialect or Dialect.RFC9309, url, issues)
    yield from reader.read(octets, html)
    # Detected only when a Robot-version line was read (every line that makes a file REGP
    # is one): three searches of every file's text spared (a fiftieth of parsing the corpus).
    if dialect is None and reader.saw_version and detect_dialect(whole) is Dialect.REGP:
        dialect = Dialect.REGP
        reader = _Reader(dialect, url, issues)
        yield from reader.read(octets)
    else:
        dialect = reader.dialect
    if reader.line_count > STEP:
        yield
    table = yield from reader.close()
    if utf16:  # said once above, not as a NUL on every line and line 1's bytes as junk
        kept = reader.issues
        reader.issues = [item for at in range(0, len(kept), _ISSUE_ITEMS)
                         if kept[at + 1] in ("utf-16", "truncated")
                         for item in kept[at:at + _ISSUE_ITEMS]]
    # Positional: the same fields as ParsedBody declares them, in its order.
    return ParsedBody(dialect, *table, tuple(reader.global_directives),
                      tuple(reader.global_blocks), tuple(reader.sitemaps), tuple(reader.issues),
                      reader.version, reader.last_modified, truncated, html, size,
                      reader.line_count, reader.markup_count, reader.markup_lines)


# Google reads "key value" without a colon only when the line is exactly two words.
_TWO_WORDS = re.compile(r"([^ \t]+)[ \t]+([^ \t]+)")
_VALUE_WS = " \t\v\f"


# An issue as stored while parsing: (line, code, severity, message, detail), plain strings
# and an int, so the tuple is not tracked by the garbage collector. A message of None is
# made from the detail when the issues are read (see issue_from_raw).
RawIssue = tuple[int, str, str, str | None, str]
_ISSUE_ITEMS = 5  # a RawIssue's items, as ParsedBody.issue_items holds them


_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_LAZY_MESSAGES = {
    "not-a-field": "{!r} is not a field name; line skipped",
    "no-separator": "no ':' separator; line skipped: {!r}",
    "unknown-field": "unknown field {!r} kept as an extension",
}


def issue_from_raw(raw: RawIssue) -> ParseIssue:
    """The :class:`ParseIssue` for a stored issue, its message made now if it was deferred."""
    line, code, severity, message, detail = raw
    if message is None:
        message = _LAZY_MESSAGES[code].format(_text(detail)[:80])
    return ParseIssue(line, code, message, Severity(severity))


# Issues of lines that are no field at all: in an HTML page they are its markup.
_NOT_A_FIELD = frozenset({"no-separator", "not-a-field", "no-key"})


def read_issues(body: ParsedBody) -> list[ParseIssue]:
    """The issues of ``body`` in line order, repeats said once (see :func:`fold_issues`). In an
    HTML page the lines that are no field are counted by its ``html`` issue, not listed."""
    raw = sorted(body.raw_issues, key=lambda raw: raw[0])
    skipped: list[int] = []
    count = 0
    if body.looks_like_html:
        skipped = [issue[0] for issue in raw if issue[1] in _NOT_A_FIELD]
        raw = [issue for issue in raw if issue[1] not in _NOT_A_FIELD]
        count = len(skipped) + body.markup_count
        if body.markup_lines:  # the markup lines that were counted, not read
            skipped = sorted(skipped + list(body.markup_lines))
    issues = fold_issues(issue_from_raw(issue) for issue in raw)
    if skipped:
        html = ParseIssue(1, "html", "the body looks like an HTML page, not a robots.txt file; "
                          f"{count:,} {'line' if count == 1 else 'lines'} of it skipped as no "
                          "field", Severity.ERROR, count, tuple(skipped[:MAX_LISTED_LINES]))
        issues = [html if issue.code == "html" else issue for issue in issues]
    return issues


def _read_value(name: str, text: str) -> object:
    """The typed value of a field the reader kept (see :class:`Directives`)."""
    reader = _READERS.get(name)
    return None if reader is None else reader(text)


def _has_long_line(text: str) -> bool:
    """Whether a line of ``text`` is longer than :data:`MAX_LINE_OCTETS`: a search back from
    that far on for the last line break before it, each a step of that many characters at
    most, rather than the length of every line."""
    start, end, limit = 0, len(text), MAX_LINE_OCTETS
    while end - start > limit:
        cut = text.rfind("\n", start, start + limit + 1)
        if cut < 0:  # the line from start is longer
            return True
        start = cut + 1  # every line before this one ends within the limit
    return False


# Characters str.splitlines() ends a line at besides CR and LF; robots.txt lines end at
# CR, LF or CRLF alone.
_OTHER_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85")


def _needs_cut(octets: str) -> bool:
    """Whether a line of ``octets`` holds a NUL byte or is over-long (see
    :meth:`_Reader.cut`)."""
    return "\x00" in octets or (len(octets) > MAX_LINE_OCTETS and _has_long_line(octets))


# The characters that are letters (str.isalpha) in a body decoded as Latin-1: every field
# name starts with one.
_LETTERS = "".join(c for c in map(chr, range(256)) if c.isalpha())
# Each line of an HTML page's text, after its line break (see _Reader.read_page), past its
# leading white space (which the reader strips): a line to read whole, the first character of
# a line the reader would skip with an issue, or nothing (a blank or comment line).
_PAGE_LINE = re.compile(
    # a line to read: a letter, then one character or more (a letter alone is no field); in
    # a page read with its CR LF line ends (see _Reader.read_page), the CR that ends a line
    # is no character of it, so that a letter and that CR is a letter alone
    rf"\n[ \t\v\f]*+([{_LETTERS}](?!\r\n)[^\n]+"
    # markup: its first character (a line the reader would skip with an issue)
    r"|[^\r\n#]"
    # a blank or comment line
    r"|)")
# A CR that is a line break of its own (not the first of a CR LF)
_LONE_CR = re.compile(r"\r(?!\n)")


def split_lines(octets: str) -> list[str]:
    """The lines of ``octets`` (a body decoded as Latin-1), ended by CR, LF or CRLF; the
    text after the last break is a line, empty or not. A body with CR in it is split by one
    pass of :meth:`str.splitlines` where it holds none of the other breaks that splits at
    (most), rather than two copies with its breaks replaced and a split: a twentieth of
    parsing the corpus."""
    if "\r" not in octets:
        return octets.split("\n")
    for other in _OTHER_BREAKS:
        if other in octets:
            return octets.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = octets.splitlines()
    if octets[-1] in "\r\n":  # splitlines() leaves out the empty text after a last break
        lines.append("")
    return lines


class _OpenGroup:
    """A group while it is read: its rules and fields are the file's from ``rules`` and
    ``fields`` on (a group's lines are read before the next group's; the reader's rules are
    a flat list, three items a rule); :meth:`_Reader.close` makes the table that
    :class:`ParsedBody` keeps of every group."""

    __slots__ = ("agents", "blocks", "fields", "ip_rules", "line", "rules")

    def __init__(self, line: int, rules: int, fields: int) -> None:
        self.line = line
        self.agents: list[str] = []
        self.rules = rules
        self.fields = fields
        # REGP's, made when the first comes (most files have none, and every list is
        # one more object for the garbage collector)
        self.ip_rules: list[IpRule] | None = None
        self.blocks: list[Block] | None = None

    def shared_agents(self) -> tuple[str, ...]:
        agents = tuple(self.agents)
        # one tuple for the groups that name the same agents (thousands of "*" groups)
        return _AGENTS.get(agents) or (
            _AGENTS.setdefault(agents, agents) if len(_AGENTS) < _AGENTS_SIZE else agents)


# The groups of a file as ParsedBody keeps them (see _Reader.close): their lines and
# agents, the rules and where each group's end, the fields and where each group's end,
# and REGP's IP rules and blocks.
_Table = tuple[tuple[int, ...], tuple[tuple[str, ...], ...],
               "tuple[bool | int | str, ...] | RawRules", tuple[int, ...],
               Sequence[Directive], tuple[int, ...],
               "tuple[tuple[tuple[IpRule, ...], tuple[Block, ...]], ...] | None"]
_NO_TABLE: _Table = ((), (), (), (), (), (), None)


# Agent lists seen before, shared; bounded so hostile input cannot grow it.
_AGENTS: dict[tuple[str, ...], tuple[str, ...]] = {}
_AGENTS_SIZE = 4096


class _Reader:
    """One pass over the lines; keeps the state of the current group and brace blocks."""

    def __init__(self, dialect: Dialect, url: str | None, issues: list[int | str | None]
                 ) -> None:
        """``issues``: those of the body before its lines (copied)."""
        self.url = url
        self.dialect = dialect
        self.regp = dialect is Dialect.REGP
        self.group: _OpenGroup | None = None
        self.groups: list[_OpenGroup] = []
        # the rules and fields of every group, in file order (see _OpenGroup); the rules
        # flat, (allow, line, value) as three items: a tuple a rule is one more object the
        # garbage collector tracks (its passes were a tenth of parsing the corpus)
        self.rules: list[bool | int | str] = []
        self.fields: list[Directive] = []
        self.global_directives: list[Directive] = []
        self.global_blocks: list[Block] = []
        self.sitemaps: list[str] = []
        self.issues = issues.copy()
        self.version: tuple[int, int] | None = None
        self.saw_version = False  # a Robot-version line, read or not
        self.last_modified: float | None = None
        self.line_count = 0
        self.markup_count = 0  # see read_page
        self.markup_lines: tuple[int, ...] = ()
        self.blocks: list[Block] = []
        self.block_targeting = False

    def close(self) -> Steps[_Table]:
        """The groups read, as :class:`ParsedBody` keeps them (its fields from
        ``group_lines`` to ``group_extras``); their rules and fields packed when they are
        many (a step each)."""
        groups = self.groups
        if not groups:
            return _NO_TABLE
        flat = self.rules
        count = len(flat) // 3
        rules: tuple[bool | int | str, ...] | RawRules
        if count >= PACKED_FROM:
            rules = RawRules.from_columns(cast("list[bool]", flat[0::3]),
                                          cast("list[int]", flat[1::3]),
                                          cast("list[str]", flat[2::3]))
            yield
        else:  # flat: no tuple a rule (most files are matched, their groups never made)
            rules = tuple(flat)
        fields: Sequence[Directive] = self.fields
        stop = len(fields)
        if stop >= PACKED_FROM:
            fields = Directives(fields, _read_value)
            yield
        else:
            fields = tuple(fields)
        # each group ends where the next one starts, the last one at the end
        rest = groups[1:]
        extras = tuple([(tuple(g.ip_rules) if g.ip_rules else (),
                         tuple(g.blocks) if g.blocks else ()) for g in groups]
                       ) if self.regp else None
        return (tuple([group.line for group in groups]),
                tuple([group.shared_agents() for group in groups]),
                rules, (*[group.rules for group in rest], count), fields,
                (*[group.fields for group in rest], stop), extras)

    def issue(self, line: int, code: str, message: str,
              severity: Severity = Severity.WARNING) -> None:
        self.issues += (line, code, severity.value, message, "")

    def read(self, octets: str, html: bool = False) -> Steps[None]:
        """The lines of ``octets``; ``html``: the body looks like an HTML page (see
        :meth:`read_page`)."""
        if self.regp:
            yield from self.read_lines(split_lines(octets))
        elif html:
            yield from self.read_page(octets)
        else:
            lines = split_lines(octets)
            if _needs_cut(octets):
                self.cut(lines)
                yield
            self.line_count = len(lines)
            yield from self.read_split(lines)
        if self.blocks:
            self.issue(self.blocks[-1].line, "unclosed-brace", "'{' block is never closed",
                       Severity.ERROR)

    def cut(self, lines: list[str]) -> None:
        """Over-long lines cut to :data:`MAX_LINE_OCTETS`, and lines at a NUL byte, in
        place (each said), so that :meth:`read_split` reads the rest (one long line in an
        HTML page is enough to have them)."""
        # the lines to cut found by C loops (a page of minified script has thousands of lines)
        long = compress(count(), map(gt, map(len, lines), repeat(MAX_LINE_OCTETS)))
        nul = compress(count(), map(contains, lines, repeat("\x00")))
        for i in sorted({*long, *nul}):
            line = lines[i]
            if len(line) > MAX_LINE_OCTETS:
                self.issue(i + 1, "line-too-long", f"line is {len(line)} octets; only the "
                           f"first {MAX_LINE_OCTETS} were read")
                line = lines[i] = line[:MAX_LINE_OCTETS]
            if "\x00" in line:
                self.issue(i + 1, "nul", "NUL byte: the rest of the line is ignored")
                lines[i] = line[: line.index("\x00")]

    def read_page(self, octets: str) -> Steps[None]:
        """An HTML page served as robots.txt (every dialect but REGP): one search over its
        text tells each line's kind, and :meth:`read_split` reads only the lines that start
        with a letter (past white space) and hold more than it. Every other line is blank, a
        comment, or markup that no field could start (a ``no-separator``, ``not-a-field`` or
        ``no-key`` issue a line, which the page's ``html`` issue counts and lists the first
        of): those are counted (``markup_count``) and their first numbers kept
        (``markup_lines``). Read line by line, a page's markup took most of its time, as
        long as Protego took over the whole page."""
        crlf = False  # lines ended by CR LF (or LF), every CR the first of a CR LF
        if _needs_cut(octets):  # cut as every file's lines are, then joined again
            lines = split_lines(octets)
            self.cut(lines)
            yield
            octets = "\n".join(lines)
        elif "\r" in octets:
            # The lines split_lines() gives: those of a page of CR LF line ends read as
            # they are (each line to read ends in its CR, taken off below), where replacing
            # each CR LF took a twentieth of parsing the corpus; a page with a CR of its
            # own has its line ends made LF.
            crlf = _LONE_CR.search(octets) is None
            if not crlf:
                octets = octets.replace("\r\n", "\n").replace("\r", "\n")
        # an item a line: the line to read, a markup line's first character, or "" (blank)
        found = _PAGE_LINE.findall(f"\n{octets}")
        self.line_count = len(found)
        sizes = list(map(len, found))
        self.markup_count = sizes.count(1)
        self.markup_lines = tuple(islice(compress(count(1), map(eq, sizes, repeat(1))),
                                         MAX_LISTED_LINES))
        # the lines to read (two characters or more), numbered: C loops
        keep = list(map(gt, sizes, repeat(1)))
        read: Iterator[str] = compress(found, keep)
        if crlf:
            read = map(str.rstrip, read, repeat("\r"))
        numbered = list(zip(compress(count(1), keep), read, strict=True))
        if len(found) > STEP:
            yield
        yield from self.read_split(numbered, numbered=True)

    def read_split(self, lines: list[str] | list[tuple[int, str]], numbered: bool = False
                   ) -> Steps[None]:
        """Every dialect but REGP (NUL bytes and over-long lines cut first: see
        :meth:`cut`); ``numbered``: ``lines`` are (number, line) pairs, some of the file's
        lines (see :meth:`read_page`), rather than all of them. Each line is cut by string
        methods, a third less time than a regular expression matching every line: a comment
        ("#" on) off, then (key, ":", value) at the first colon, the key and value without
        leading white space and keeping their trailing one; without a colon the line's text
        is the key."""
        cache = _KEY_CACHE
        group = self.group
        rules = self.rules
        fields = self.fields
        global_fields = self.global_directives
        issues = self.issues
        ws = _VALUE_WS
        new_tuple = tuple.__new__
        for start in range(0, len(lines), STEP):  # a pause between two steps of lines
            if start:
                yield
            step = lines[start:start + STEP]
            for lineno, line in (cast("list[tuple[int, str]]", step) if numbered
                                 else enumerate(cast("list[str]", step), start + 1)):
                if "#" in line:
                    line = line[:line.index("#")]
                key, colon, value = line.partition(":")
                if not colon:
                    key = key.strip(ws)
                    if key:
                        if key[:1].isalpha():
                            self.missing_colon(lineno, key)
                            group = self.group
                        else:  # no field starts with anything but a letter: "<div>" lines
                            issues += (lineno, "no-separator", "error", None, key)
                    continue  # else a blank or comment line
                known = cache.get(key)  # the key as written, white space and all
                if known is None:
                    known = self.classify_new(lineno, key)
                    if known is None:
                        continue
                if known[3] and group is not None:  # the bulk of every file: a rule in a group
                    rules += known[4], lineno, value.strip(ws)
                    continue
                if known[0] is UA and not known[2]:  # the next most: a group's User-agent lines
                    # user_agent() written out: no brace blocks outside REGP
                    agent = value.strip(ws)
                    if group is None or len(rules) > 3 * group.rules:
                        self.new_group(lineno)  # a User-agent after rules starts a new group
                        group = self.group
                        assert group is not None
                    if not agent:
                        self.issue(lineno, "empty-user-agent", "User-agent with no value")
                    group.agents.append(agent if agent.isascii() else _text(agent))
                    continue
                unknown = known[5]
                if unknown is not None:  # a field no dialect reads: in HTML, CSS and markup
                    issues += (lineno, "unknown-field", "info", None, unknown[1])
                    text = value.strip(ws)
                    entry = new_tuple(Directive, (unknown[0], text if text.isascii()
                                                  else _text(text), lineno, None))
                    (global_fields if group is None else fields).append(entry)
                    continue
                name = known[1]
                if known[2]:
                    self.issue(lineno, "typo", f"{_text(key.strip(_WS))!r} read as {name!r}")
                self.field(lineno, known[0], name, key.strip(_WS), value.strip(ws))
                group = self.group

    def classify_new(self, lineno: int, key: str) -> _Known | None:
        """Classify a key not seen before and remember it; ``None`` (and an issue) for a key
        that cannot be a field name."""
        stripped = key.strip(_WS)
        if not stripped:
            self.issue(lineno, "no-key", "line starts with ':'; skipped", Severity.ERROR)
            return None
        if not stripped[0].isalpha():
            # "<p>Note: ..." in HTML served as robots.txt; every field name starts with a letter
            self.issues += (lineno, "not-a-field", "error", None, stripped)
            return None
        known = _known(_classify(stripped.lower()), stripped)
        if len(_KEY_CACHE) < _KEY_CACHE_SIZE:
            _KEY_CACHE[key] = known
        return known

    def read_lines(self, lines: list[str]) -> Steps[None]:
        """REGP's rules, line by line (braces, ``##`` comments, NUL bytes, over-long
        lines)."""
        self.line_count = len(lines)
        comment = "##" if self.regp else "#"
        for start in range(0, len(lines), STEP):  # a pause between two steps of lines
            if start:
                yield
            for lineno, line in enumerate(lines[start:start + STEP], start + 1):
                if len(line) > MAX_LINE_OCTETS:
                    self.issue(lineno, "line-too-long", f"line is {len(line)} octets; only the "
                               f"first {MAX_LINE_OCTETS} were read")
                    line = line[:MAX_LINE_OCTETS]
                if "\x00" in line:
                    self.issue(lineno, "nul", "NUL byte: the rest of the line is ignored")
                    line = line[: line.index("\x00")]
                cut = line.find(comment)
                if cut >= 0:
                    line = line[:cut]
                line = line.strip(_WS)
                if not line:
                    if self.regp and not self.blocks:
                        self.group = None  # a blank line ends a REGP command sequence
                    continue
                if self.regp and line[0] in "{}":
                    self.brace(lineno, line)
                    continue
                sep = line.find(":")
                if sep < 0:
                    self.missing_colon(lineno, line)
                    continue
                key = line[:sep].rstrip(_WS)
                if not key:
                    self.issue(lineno, "no-key", "line starts with ':'; skipped", Severity.ERROR)
                    continue
                known = _classify(key.lower())
                if known[2]:
                    self.issue(lineno, "typo", f"{_text(key)!r} read as {known[1]!r}")
                self.field(lineno, known[0], known[1], key, line[sep + 1 :].lstrip(_WS))

    def missing_colon(self, lineno: int, line: str) -> None:
        """Google accepts whitespace for a missing colon when the line has exactly two words."""
        words = _TWO_WORDS.fullmatch(line)
        if words is None:
            self.issues += (lineno, "no-separator", "error", None, line)
            return
        key, value = words.groups()
        if not key[0].isalpha():
            self.issues += (lineno, "no-separator", "error", None, line)
            return
        known = _classify(key.lower())
        self.issue(lineno, "missing-colon", f"no ':' after {_text(key)!r}; read as a field")
        if known[2]:
            self.issue(lineno, "typo", f"{_text(key)!r} read as {known[1]!r}")
        self.field(lineno, known[0], known[1], key, value)

    # -- fields -------------------------------------------------------------------------

    def field(self, lineno: int, kind: str, name: str, key: str, value: str) -> None:
        if kind is ALLOW or kind is DISALLOW:
            self.rule(lineno, kind is ALLOW, value)
        elif kind is UA:
            self.user_agent(lineno, value)
        elif kind is SITEMAP:
            self.sitemap(lineno, value)
        elif kind is IP_ALLOW or kind is IP_DISALLOW:
            self.ip_rule(lineno, kind is IP_ALLOW, value)
        elif kind is VERSION:
            self.saw_version = True
            self.read_version(lineno, value)
        elif kind is LAST_MODIFIED:
            self.read_last_modified(lineno, value)
        else:
            self.directive(lineno, name, key, value)

    def user_agent(self, lineno: int, value: str) -> None:
        agent = value if value.isascii() else _text(value)
        if self.blocks:
            block = self.blocks[-1]
            if self.block_targeting:
                block.agents.append(agent)
            else:
                self.issue(lineno, "misplaced-user-agent",
                           "User-agent after the commands of a '{' block; ignored", Severity.ERROR)
            return
        if self.group is None or len(self.rules) > 3 * self.group.rules or self.group.blocks:
            self.new_group(lineno)  # a User-agent after rules starts a new group
        assert self.group is not None
        if not value:
            self.issue(lineno, "empty-user-agent", "User-agent with no value")
        self.group.agents.append(agent)

    def new_group(self, lineno: int) -> None:
        self.group = _OpenGroup(lineno, len(self.rules) // 3, len(self.fields))
        self.groups.append(self.group)

    def rule(self, lineno: int, allow: bool, value: str) -> None:
        raw = (allow, lineno, value)
        if self.blocks:
            block = self.blocks[-1]
            (block.raw_scope if self.block_targeting else block.raw_rules).append(raw)
            return
        if self.group is None:
            what = f"{'Allow' if allow else 'Disallow'}: {_text(value)}"
            self.issue(lineno, "rule-outside-group",
                       f"{what} comes before any User-agent line; ignored", Severity.ERROR)
            return
        self.rules.extend(raw)

    def sitemap(self, lineno: int, value: str) -> None:
        location = _text(value).strip()
        if location.startswith("<") and location.endswith(">"):
            location = location[1:-1].strip()
        if not location:
            self.issue(lineno, "empty-sitemap", "Sitemap with no URL", Severity.ERROR)
            return
        if self.url is not None:
            location = urljoin(self.url, location)
        elif "://" not in location:
            self.issue(lineno, "relative-sitemap",
                       f"relative Sitemap {location!r} kept as written (no base URL)",
                       Severity.INFO)
        self.sitemaps.append(location)

    def ip_rule(self, lineno: int, allow: bool, value: str) -> None:
        octets = parse_ip_pattern(value)
        if octets is None:
            self.issue(lineno, "bad-ip", f"cannot read IP pattern {_text(value)!r}", Severity.ERROR)
            return
        rule = IpRule(allow, octets, lineno)
        if self.blocks:
            if self.block_targeting:
                self.blocks[-1].ip_rules.append(rule)
            else:
                self.issue(lineno, "misplaced-ip", "Ip rule after the commands of a '{' block; "
                           "ignored", Severity.ERROR)
            return
        if self.group is None or len(self.rules) > 3 * self.group.rules or self.group.blocks:
            self.new_group(lineno)  # a User-agent after rules starts a new group
        assert self.group is not None
        if self.group.ip_rules is None:
            self.group.ip_rules = []
        self.group.ip_rules.append(rule)

    def readable(self, lineno: int, field: str, value: str,
                 read: Callable[[str], _Value | None]) -> _Value | None:
        """``value`` as ``read`` makes it; ``None``, and an error naming ``field``, when it
        cannot."""
        result = read(value)
        if result is None:
            self.issue(lineno, "bad-value", f"cannot read {field} {_text(value)!r}",
                       Severity.ERROR)
        return result

    def read_version(self, lineno: int, value: str) -> None:
        version = self.readable(lineno, "Robot-version", value, parse_version)
        if version is not None and self.version is None:
            self.version = version

    def read_last_modified(self, lineno: int, value: str) -> None:
        when = self.readable(lineno, "Last-modified", value, parse_http_date)
        if when is not None and self.last_modified is None:
            self.last_modified = when

    def directive(self, lineno: int, name: str, key: str, value: str) -> None:
        reader = _READERS.get(name)
        typed: object = None
        if reader is not None:
            text = _text(value)
            typed = reader(text)
            if typed is None:
                self.issue(lineno, "bad-value", f"cannot read {name} value {text!r}; ignored",
                           Severity.ERROR)
                return
        elif _FIELD_NAME.fullmatch(key) is None:
            # "<p>Some text: more" in HTML served as robots.txt: no field could be named so.
            self.issues += (lineno, "not-a-field", "error", None, key)
            return
        else:
            text = _text(value)
            name = _text(key).lower()
            if name in ("http", "https") and text.startswith("//") and \
                    "sitemap" in text.lower():
                # A sitemap's URL on a line of its own, its "Sitemap:" forgotten.
                self.issue(lineno, "bare-sitemap", "a URL with no field name read as a "
                           "Sitemap line")
                self.sitemap(lineno, f"{name}:{text}")
                return
            self.issues += (lineno, "unknown-field", "info", None, key)
        entry = Directive(name, text, lineno, typed)
        if self.blocks:
            self.block_targeting = False
            self.blocks[-1].directives.append(entry)
        elif self.group is not None:
            self.fields.append(entry)
        else:
            self.global_directives.append(entry)

    def brace(self, lineno: int, line: str) -> None:
        if line[1:].strip(_WS):
            self.issue(lineno, "brace-text", "text after a brace is ignored")
        if line[0] == "{":
            block = Block(line=lineno)
            if self.blocks:
                self.blocks[-1].blocks.append(block)
            elif self.group is not None:
                if self.group.blocks is None:
                    self.group.blocks = []
                self.group.blocks.append(block)
            else:
                self.global_blocks.append(block)
            self.blocks.append(block)
            self.block_targeting = True
        elif self.blocks:
            self.blocks.pop().end_line = lineno
            self.block_targeting = False
        else:
            self.issue(lineno, "unmatched-brace", "'}' with no open '{'; ignored", Severity.ERROR)



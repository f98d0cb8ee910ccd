"""Linting a robots.txt the way a webmaster needs it: every line classified, and the mistakes
that change what crawlers do found and said with their lines.

Each line is read as the engine's reader reads it (:mod:`polite.core.robots.parser`, modelled
on Google's open-source parser: a typo such as ``Disalow`` and a missing colon are still read)
and given one :class:`LineKind`; typos, missing colons and over-long lines are flagged on top.
The findings add to the reader's issues the checks of what webmasters get wrong (seed 003, and
RFC 9309 and Google's documentation): ``Disallow: /`` for every crawler, one agent in two
groups, full User-Agent strings used as product tokens, names Google's parser cuts short,
relative or non-http Sitemap lines, files over the size cap, HTML served as robots.txt,
Crawl-delay that Googlebot ignores, and REGP's own rules (``##`` comments, braces, header).
Unknown fields are warnings, not errors: crawlers skip them.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from dataclasses import dataclass

from polite.core.robots.model import Dialect, Group, ParseIssue, Severity, fold_issues
from polite.core.robots.parser import (
    MAX_LINE_OCTETS,
    MAX_ROBOTS_BYTES,
    classify_key,
    known_field,
    parse_body,
    pattern_path,
)
from polite.core.robots.robotstxt import RobotsTxt, agent_matches, product_token
from polite.core.robots.usage_tools import lint_usage
from polite.core.robots.values import MAX_DELAY_S, RequestRate
from polite.core.urls import from_octets, to_octets

__all__ = ["LineClass", "LineKind", "LintReport", "lint", "lint_body"]


class LineKind(enum.StrEnum):
    """What one line of a robots.txt is, to the dialect it is read in."""

    DIRECTIVE = "directive"  # a field the dialect acts on (User-agent, Allow, Disallow, ...)
    UNUSED = "unused"  # a field polite knows that this dialect does not use (Google: Crawl-delay)
    UNKNOWN = "unknown"  # a field name nobody defines; crawlers skip it
    INVALID = "invalid"  # no field at all: no separator, or a name no field can have
    BRACE = "brace"  # REGP: a "{" or "}" line
    COMMENT = "comment"
    BLANK = "blank"


@dataclass(frozen=True, slots=True)
class LineClass:
    """One line, classified. ``field`` is the canonical field name the line is read as
    ("disallow" for ``Disalow: /x``), empty for lines that are no field. ``text`` is the line
    as written and ``value`` the field's value, each cut to 200 characters. :attr:`label`
    is the most telling single word."""

    line: int
    kind: LineKind
    field: str = ""
    text: str = ""
    typo: bool = False
    missing_colon: bool = False
    too_long: bool = False
    value: str = ""

    @property
    def label(self) -> str:
        """``typo``, ``missing-colon`` or ``too-long`` when flagged, else the kind."""
        if self.too_long:
            return "too-long"
        if self.missing_colon:
            return "missing-colon"
        if self.typo:
            return "typo"
        return self.kind.value

    def as_json(self) -> dict[str, object]:
        return {"line": self.line, "kind": self.kind.value, "label": self.label,
                "field": self.field, "text": self.text}


@dataclass(frozen=True, slots=True)
class LintReport:
    """Every line classified and every finding, in line order (repeats folded, see
    :func:`polite.core.robots.model.fold_issues`)."""

    dialect: Dialect
    lines: tuple[LineClass, ...]
    issues: tuple[ParseIssue, ...]
    groups: int

    @property
    def counts(self) -> dict[str, int]:
        """How many lines of each label."""
        return dict(Counter(c.label for c in self.lines))

    @property
    def errors(self) -> int:
        """Lines with errors (an issue said once for many lines counts them all)."""
        return sum(i.count for i in self.issues if i.severity is Severity.ERROR)

    @property
    def warnings(self) -> int:
        return sum(i.count for i in self.issues if i.severity is Severity.WARNING)

    @property
    def notes(self) -> int:
        return sum(i.count for i in self.issues if i.severity is Severity.INFO)


# Fields each dialect acts on besides User-agent, Allow, Disallow and Sitemap. Google's
# parser reads no other (developers.google.com/search/docs/crawling-indexing/robots/
# robots_txt: "Google ignores crawl-delay"); RFC 9309 2.2.4 lets crawlers read other
# records, and Crawl-delay and Request-rate are the ones widely honoured (polite honours
# them); REGP defines its own (seed 000, Table 3).
_REGP_FIELDS = frozenset({
    "crawl-delay", "ip-delay", "request-rate", "ip-rate", "visit-time", "time-forbidden",
    "language", "encoding", "charset", "cookie", "mirror-site", "host", "index-page",
    "change-always", "change-hourly", "change-daily", "change-weekly", "change-monthly",
    "change-yearly", "change-never", "ip-allow", "ip-disallow", "robot-version",
    "last-modified"})
_USED: dict[Dialect, frozenset[str]] = {
    Dialect.GOOGLE: frozenset(),
    Dialect.RFC9309: frozenset({"crawl-delay", "request-rate"}),
    Dialect.KOSTER1996: frozenset({"crawl-delay", "request-rate"}),
    Dialect.REGP: _REGP_FIELDS,
}
_CORE_FIELDS = frozenset({"user-agent", "allow", "disallow", "sitemap"})
_TWO_WORDS = re.compile(r"([^ \t]+)[ \t]+([^ \t]+)")
_WS = " \t\n\v\f\r"
_GOOGLE_TOKEN = re.compile(r"[A-Za-z_-]*")
# A User-agent value that is a whole User-Agent header rather than a product token.
_FULL_UA = re.compile(r"^[^\s/]+/\S|\(|\s\S")
# An agent name no group names: what a crawler unknown to the file sees.
_NOBODY = "polite-lint-probe"


def lint_body(body: bytes | str, dialect: Dialect | None = None, *, url: str | None = None,
              max_bytes: int = MAX_ROBOTS_BYTES, content_type: str | None = None
              ) -> LintReport:
    """Lint ``body`` in ``dialect`` (``None``: REGP when it says so, else RFC 9309).
    ``content_type`` is the header it was served with, when known; ``url`` its own URL."""
    robots = RobotsTxt(parse_body(body, dialect, url=url, max_bytes=max_bytes))
    return lint(robots, body, max_bytes=max_bytes, content_type=content_type)


def lint(robots: RobotsTxt, body: bytes | str, *, max_bytes: int = MAX_ROBOTS_BYTES,
         content_type: str | None = None) -> LintReport:
    """Lint a parsed file; ``body`` is the text it was parsed from, with the same
    ``max_bytes`` (its lines are classified as the reader numbered them)."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    lines = _classify_lines(body[:max_bytes].decode("latin-1"), robots.dialect)
    # The reader's issues come folded; the checks' are folded on their own, then merged.
    issues = [_retuned(i) for i in robots.issues if i.code != "relative-sitemap"]
    issues += fold_issues([*_checks(robots, lines, content_type), *lint_usage(robots)])
    issues.sort(key=lambda i: i.line)
    return LintReport(robots.dialect, tuple(lines), tuple(issues), len(robots.groups))


def _retuned(issue: ParseIssue) -> ParseIssue:
    """Unknown fields are warnings to a webmaster (the reader notes them as info)."""
    if issue.code == "unknown-field" and issue.severity is Severity.INFO:
        return ParseIssue(issue.line, issue.code, issue.message, Severity.WARNING,
                          issue.count, issue.lines)
    return issue


# -- line classes ---------------------------------------------------------------------


def _classify_lines(text: str, dialect: Dialect) -> list[LineClass]:
    if text.startswith("\xef\xbb\xbf"):
        text = text[3:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    rows = text.split("\n")
    if rows and rows[-1] == "":
        rows.pop()  # the newline that ends the last line starts no line
    comment = "##" if dialect is Dialect.REGP else "#"
    return [_classify_line(n, row, dialect, comment) for n, row in enumerate(rows, 1)]


def _classify_line(lineno: int, row: str, dialect: Dialect, comment: str) -> LineClass:
    shown = from_octets(row[:200])
    too_long = len(row) > MAX_LINE_OCTETS
    line = row[:MAX_LINE_OCTETS]
    if "\x00" in line:
        line = line[: line.index("\x00")]
    cut = line.find(comment)
    body = (line if cut < 0 else line[:cut]).strip(_WS)
    if not body:
        kind = LineKind.COMMENT if cut >= 0 else LineKind.BLANK
        return LineClass(lineno, kind, text=shown, too_long=too_long)
    if dialect is Dialect.REGP and body[0] in "{}":
        return LineClass(lineno, LineKind.BRACE, text=shown, too_long=too_long)
    sep = body.find(":")
    missing_colon = False
    if sep < 0:
        words = _TWO_WORDS.fullmatch(body)
        if words is None or not words.group(1)[0].isalpha():
            return LineClass(lineno, LineKind.INVALID, text=shown, too_long=too_long)
        key, missing_colon = words.group(1), True
        value = words.group(2)
    else:
        key, value = body[:sep].strip(_WS), body[sep + 1:].strip(_WS)
    value = from_octets(value[:200])
    if not key or not key[0].isalpha():
        return LineClass(lineno, LineKind.INVALID, text=shown, too_long=too_long)
    kind_name, name, typo = classify_key(key)
    if kind_name == "other" and not known_field(name):
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", key) is None:
            return LineClass(lineno, LineKind.INVALID, text=shown, too_long=too_long)
        if name in ("http", "https") and value.startswith("//") and "sitemap" in value.lower():
            # A sitemap's URL with its "Sitemap:" forgotten; the reader takes it as one.
            return LineClass(lineno, LineKind.DIRECTIVE, "sitemap", shown, True, False,
                             too_long, f"{key}:{value}")
        return LineClass(lineno, LineKind.UNKNOWN, name.lower(), shown, False, missing_colon,
                         too_long, value)
    used = kind_name in _CORE_FIELDS or name in _USED[dialect]
    kind = LineKind.DIRECTIVE if used else LineKind.UNUSED
    return LineClass(lineno, kind, name if kind_name == "other" else kind_name, shown, typo,
                     missing_colon, too_long, value)


# -- checks -----------------------------------------------------------------------------


def _issue(line: int, code: str, message: str, severity: Severity = Severity.WARNING
           ) -> ParseIssue:
    return ParseIssue(line, code, message, severity)


def _checks(robots: RobotsTxt, lines: list[LineClass], content_type: str | None
            ) -> list[ParseIssue]:
    dialect = robots.dialect
    found: list[ParseIssue] = []
    found += _check_disallow_all(robots)
    found += _check_agents(robots)
    found += _check_sitemaps(lines)
    found += _check_crawl_delay(robots, lines)
    found += _check_tied_rules(robots)
    found += _check_long_delays(robots)
    if robots.size > MAX_ROBOTS_BYTES and not robots.truncated:
        found.append(_issue(0, "over-cap", f"file is {robots.size:,} bytes; Google and RFC "
                            f"9309 crawlers may read only the first {MAX_ROBOTS_BYTES:,}"))
    if content_type is not None:
        mime = content_type.split(";")[0].strip().lower()
        if mime in ("text/html", "application/xhtml+xml"):
            found.append(_issue(0, "html-content-type", f"served as {mime}: robots.txt should "
                                "be text/plain", Severity.ERROR
                                if robots.looks_like_html else Severity.WARNING))
    if dialect is Dialect.REGP:
        found += _check_regp(robots, lines)
    return found


def _check_disallow_all(robots: RobotsTxt) -> list[ParseIssue]:
    """``Disallow: /`` for every crawler: a staging or development file left live."""
    decision = robots.decide("/", _NOBODY)
    groups = robots.groups_for(_NOBODY)
    if decision.allowed or decision.rule is None or not groups:
        return []
    if decision.rule.pattern.strip() not in ("/", "/*", "*", "/$") and \
            robots.decide("/index.html", _NOBODY).allowed:
        return []
    reopened = [r for g in groups for r in g.rules if r.allow and r.pattern not in ("", "/")]
    if reopened:  # closed by default and opened where meant: an allow-list, not a mistake
        return [_issue(decision.rule.line, "disallow-all",
                       f"{decision.rule} closes the site to every crawler not named elsewhere "
                       f"but where {len(reopened)} Allow lines reopen it", Severity.INFO)]
    return [_issue(decision.rule.line, "disallow-all",
                   f"{decision.rule} closes the whole site to every crawler not named "
                   "elsewhere (a staging file left live?)")]


def _agent_values(robots: RobotsTxt) -> list[tuple[Group, str]]:
    return [(g, v.strip()) for g in robots.groups for v in g.agents if v.strip()]


def _check_agents(robots: RobotsTxt) -> list[ParseIssue]:
    found: list[ParseIssue] = []
    dialect = robots.dialect
    first: dict[str, Group] = {}
    for group, value in _agent_values(robots):
        key = "*" if value == "*" else product_token(value).lower()
        seen = first.get(key)
        if seen is not None and seen is not group:
            if dialect in (Dialect.KOSTER1996, Dialect.REGP):
                what = ("the 1996 draft reads only the first" if dialect is Dialect.KOSTER1996
                        else "REGP reads only the first")
            else:
                what = "RFC 9309 and Google merge them; older crawlers read only the first"
            found.append(_issue(group.line, "agent-in-two-groups",
                                f"User-agent: {value} also heads the group at line "
                                f"{seen.line}; {what}"))
        else:
            first.setdefault(key, group)
        if value == "*":
            continue
        if _FULL_UA.search(value):
            found.append(_issue(group.line, "full-user-agent",
                                f"User-agent: {value} is a whole User-Agent string, not a "
                                f"product token; RFC 9309 crawlers match only "
                                f"{product_token(value)!r}, Google's parser only "
                                f"{_GOOGLE_TOKEN.match(value).group()!r}"))  # type: ignore[union-attr]
        elif _GOOGLE_TOKEN.match(value).group() != value:  # type: ignore[union-attr]
            cut = _GOOGLE_TOKEN.match(value).group()  # type: ignore[union-attr]
            found.append(_issue(group.line, "google-cuts-agent",
                                f"Google's parser keeps only the letters, '-' and '_' that "
                                f"start a User-agent value: {value!r} is read as {cut!r} and "
                                f"names no crawler called {value!r}"))
    return found


def _check_sitemaps(lines: list[LineClass]) -> list[ParseIssue]:
    found: list[ParseIssue] = []
    for c in lines:
        if c.field != "sitemap" or c.kind is not LineKind.DIRECTIVE or c.typo:
            continue
        location = c.value.strip("<>").strip()
        if not location:
            continue  # the reader says so (empty-sitemap)
        line = c.line
        scheme = location.split(":", 1)[0].lower() if "://" in location else ""
        if not scheme:
            found.append(_issue(line, "relative-sitemap",
                                f"Sitemap {location!r} is not an absolute URL; crawlers need "
                                "http(s)://host/path"))
        elif scheme not in ("http", "https"):
            found.append(_issue(line, "sitemap-scheme",
                                f"Sitemap {location!r} is not an http(s) URL"))
    return found


def _check_crawl_delay(robots: RobotsTxt, lines: list[LineClass]) -> list[ParseIssue]:
    """Crawl-delay in the groups Googlebot reads: Google ignores the field."""
    google = [g for g in robots.groups
              if any(agent_matches(Dialect.GOOGLE, v, "Googlebot")[1] for v in g.agents)]
    if not google:
        google = [g for g in robots.groups
                  if any(agent_matches(Dialect.GOOGLE, v, "Googlebot")[0] for v in g.agents)]
    severity = Severity.WARNING if robots.dialect is Dialect.GOOGLE else Severity.INFO
    found = []
    for group in google:
        for d in group.directives:
            if d.key == "crawl-delay":
                found.append(_issue(d.line, "crawl-delay-ignored-by-google",
                                    f"Crawl-delay: {d.text} applies to Googlebot here, which "
                                    "ignores it (Google sets its crawl rate itself)", severity))
    return found


def _check_tied_rules(robots: RobotsTxt) -> list[ParseIssue]:
    """An Allow and a Disallow of one path in one group: the dialects answer it differently
    (RFC 9309 and Google: Allow wins the tie; the 1996 draft: the first line; REGP: the
    last)."""
    found = []
    dialect = robots.dialect
    for group in robots.groups:
        first: dict[str, dict[bool, int]] = {}
        for rule in group.rules:
            if not rule.pattern:
                continue  # an empty value matches nothing (or, in 1996, allows all)
            seen = first.setdefault(pattern_path(dialect, to_octets(rule.pattern)), {})
            other = seen.get(not rule.allow)
            if other is not None and rule.allow not in seen:
                allow_first = not rule.allow
                found.append(_issue(
                    rule.line, "allow-disallow-tie",
                    f"{rule} and line {other}'s {'Allow' if not rule.allow else 'Disallow'} "
                    f"name the same path, and the dialects disagree: RFC 9309 and Google "
                    f"allow it (Allow wins a tie), the 1996 draft "
                    f"{'allows' if allow_first else 'disallows'} it (the first line), REGP "
                    f"{'allows' if rule.allow else 'disallows'} it (the last); keep one"))
            seen.setdefault(rule.allow, rule.line)
    return found


def _check_long_delays(robots: RobotsTxt) -> list[ParseIssue]:
    """A delay of more than a day: a typo, or a wish to be left alone that crawlers cap."""
    found = []
    for d in robots.extensions:
        if d.key in ("crawl-delay", "ip-delay") and isinstance(d.value, int | float):
            asked = float(d.value)
        elif d.key in ("request-rate", "ip-rate") and isinstance(d.value, RequestRate):
            asked = d.value.interval_s
        else:
            continue
        if asked > MAX_DELAY_S:
            found.append(_issue(d.line, "delay-too-long",
                                f"{d.key.capitalize()}: {d.text} asks for {asked:,.0f} s "
                                f"between requests, more than a day: crawlers cap it (polite "
                                f"reads it as {MAX_DELAY_S:,.0f} s at most, and as 60 s by "
                                "default); to keep crawlers out, disallow them"))
    return found


def _check_regp(robots: RobotsTxt, lines: list[LineClass]) -> list[ParseIssue]:
    found: list[ParseIssue] = []
    for c in lines:
        stripped = c.text.lstrip(" \t")
        if stripped.startswith("#") and not stripped.startswith("##"):
            found.append(_issue(c.line, "regp-single-hash", "REGP comments start with '##'; "
                                "a single '#' is part of the line (URLs may hold one)"))
    fields = [c for c in lines if c.kind not in (LineKind.BLANK, LineKind.COMMENT)]
    version_at = next((c for c in fields if c.field == "robot-version"), None)
    if version_at is None:
        found.append(_issue(0, "regp-no-version", "no Robot-version header: REGP files start "
                            "with 'Robot-version: 3.0'"))
    elif fields and fields[0] is not version_at and fields[0].field != "last-modified":
        found.append(_issue(version_at.line, "regp-header-late", "Robot-version should head "
                            "the file, before any group"))
    if robots.last_modified is None:
        found.append(_issue(0, "regp-no-last-modified", "no Last-modified header: crawlers "
                            "cannot tell a changed file", Severity.INFO))
    return found

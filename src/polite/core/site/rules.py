"""A site's robots.txt kept as data: sections, each for one part of the site and its owner
(seed 003, 4.5: several people keep the rules of their own area), merged into one file.

Rules are rows (agent, field, value) in order. A section may only rule on paths under its
own prefix, and only a section for the whole site (``/``) may set the per-agent spacing
(Crawl-delay, Request-rate) and Sitemap lines: a student's area cannot slow the whole site.
The file groups rules by agent, in the order agents first appear, each section's rules under
a comment naming it, so that every line of the file can be traced to its section and row.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from polite.core._documents import read_json
from polite.core.robots.model import Dialect
from polite.core.robots.parser import MAX_ROBOTS_BYTES, parse_body
from polite.core.robots.values import parse_delay, parse_rate
from polite.core.usage.statement import parse_statement
from polite.core.usage.vocab import AIPREF_REVISIONS, CONTENT_SIGNALS, CURRENT
from polite.errors import ConfigError, MalformedDocument, MalformedField

__all__ = [
    "MANAGED_BEGIN",
    "MANAGED_END",
    "MAX_TTL_S",
    "Enforcement",
    "Field",
    "Problem",
    "RenderedFile",
    "RuleRow",
    "Section",
    "SiteRules",
    "render",
    "rule_line",
    "rules_from_json",
    "rules_to_json",
]

MANAGED_BEGIN = "# BEGIN polite site (managed: edit the rules in the configuration page)"
MANAGED_END = "# END polite site"
# RFC 9309, 2.4: crawlers should not use a cached copy for more than 24 hours; a longer TTL
# would not be honoured.
MAX_TTL_S = 86_400
_MAX_VALUE_CHARS = 2048


class Field(enum.StrEnum):
    """What a rule row sets."""

    DISALLOW = "Disallow"
    ALLOW = "Allow"
    CRAWL_DELAY = "Crawl-delay"
    REQUEST_RATE = "Request-rate"
    SITEMAP = "Sitemap"
    # AI-usage preferences for the section's part (draft-ietf-aipref-attach; Cloudflare's
    # Content Signals): the value is the statement, the path is the section's prefix.
    CONTENT_USAGE = "Content-Usage"
    CONTENT_SIGNAL = "Content-Signal"


_SITE_WIDE = {Field.CRAWL_DELAY, Field.REQUEST_RATE, Field.SITEMAP}


@dataclass(frozen=True, slots=True)
class RuleRow:
    """One row: ``agent`` is a robots.txt product token or ``*`` (unused for Sitemap)."""

    agent: str
    field: Field
    value: str


@dataclass(frozen=True, slots=True)
class Section:
    """A part of the site (``prefix``), who keeps it, and its rules in order."""

    name: str
    prefix: str = "/"
    owner: str = ""
    rules: tuple[RuleRow, ...] = ()

    @property
    def is_site_wide(self) -> bool:
        return self.prefix == "/"


@dataclass(frozen=True, slots=True)
class Enforcement:
    """What the middleware does to robots that ignore the file (it logs them always)."""

    refuse_disallowed: bool = False  # 403 for a path the file disallows to this robot
    throttle: bool = False  # 429 with Retry-After when faster than Crawl-delay/Request-rate
    refuse_forged: bool = False  # 403 for a visit that claims a crawler's name falsely


@dataclass(frozen=True, slots=True)
class SiteRules:
    """Everything the configuration page edits; a saved copy is a version."""

    sections: tuple[Section, ...] = (Section("Whole site", "/", "webmaster"),)
    ttl_s: int = 3600
    enforcement: Enforcement = field(default_factory=Enforcement)
    manual_text: str = ""  # a hand-written file the managed block is put in front of


@dataclass(frozen=True, slots=True)
class Problem:
    """A row the file cannot hold as written (it is left out); ``section`` and ``row`` are
    0-based indexes, ``row`` -1 for the section itself."""

    section: int
    row: int
    message: str


@dataclass(frozen=True, slots=True)
class RenderedFile:
    """The robots.txt text, where each of its lines came from (line -> (section, row);
    row -1 for a section's comment), and the rows left out."""

    text: str
    origins: Mapping[int, tuple[int, int]]
    problems: tuple[Problem, ...]

    def origin(self, line: int, rules: SiteRules) -> str:
        """Which section a line of the file belongs to, for people: "" when none."""
        found = self.origins.get(line)
        if found is None:
            return "hand-written part" if rules.manual_text and line else ""
        section = rules.sections[found[0]]
        return f"{section.name} ({section.owner})" if section.owner else section.name


def _clean(text: str) -> str:
    return " ".join(text.split())


def _row_problem(section: Section, row: RuleRow) -> str | None:
    value = row.value.strip()
    if len(value) > _MAX_VALUE_CHARS:
        return f"the value is over {_MAX_VALUE_CHARS} characters"
    if row.field in _SITE_WIDE and not section.is_site_wide:
        return f"{row.field} applies to the whole site: only a section for / may set it"
    if row.field is not Field.SITEMAP:
        agent = row.agent.strip()
        if not agent:
            return "no User-agent (use * for every robot)"
        if any(c.isspace() for c in agent) or "/" in agent:
            return (f"User-agent {agent!r} is not a product token: write the robot's name "
                    f"(Googlebot), not its whole User-Agent string")
    if row.field in (Field.ALLOW, Field.DISALLOW):
        if value and not value.startswith(("/", "*")):
            return f"the path {value!r} must start with /"
        if not section.is_site_wide and not value.startswith(section.prefix):
            return f"{value or 'an empty path'} is outside this section's part, {section.prefix}"
    elif row.field is Field.CRAWL_DELAY:
        if parse_delay(value) is None:
            return f"Crawl-delay {value!r} is not a number of seconds"
    elif row.field is Field.REQUEST_RATE:
        if parse_rate(value) is None:
            return f"Request-rate {value!r} is not of the form 1/10s"
    elif row.field is Field.SITEMAP and not value.startswith(("http://", "https://")):
        return f"the Sitemap {value!r} must be a full http(s) URL"
    elif row.field in (Field.CONTENT_USAGE, Field.CONTENT_SIGNAL):
        if any(c.isspace() for c in section.prefix):
            return f"the part {section.prefix!r} holds a space: write it as %20"
        return _statement_problem(row.field, value)
    return None


def _statement_problem(kind: Field, value: str) -> str | None:
    vocab = AIPREF_REVISIONS[CURRENT] if kind is Field.CONTENT_USAGE else CONTENT_SIGNALS
    try:
        statement = parse_statement(value)
    except MalformedField as exc:
        return f"{kind} {value!r} is not a list like train-ai=n, search=y: {exc}"
    unknown = statement.unknown_keys(vocab)
    if unknown:
        return (f"{kind} {', '.join(unknown)}: not in {vocab.name} (it has "
                f"{', '.join(vocab.labels)})")
    odd = statement.odd_values(vocab)
    if odd:
        return f"{kind} {', '.join(odd)}: the value is {vocab.allow} or {vocab.disallow}"
    return None


def rule_line(section: Section, row: RuleRow) -> str:
    """The robots.txt line of a row: a preference line carries its section's path."""
    value = row.value.strip()
    if row.field in (Field.CONTENT_USAGE, Field.CONTENT_SIGNAL) and not section.is_site_wide:
        return f"{row.field}: {section.prefix} {value}"
    return f"{row.field}: {value}"


def _section_problem(section: Section, index: int, sections: tuple[Section, ...]) -> str | None:
    if not section.name.strip():
        return "a section needs a name"
    if not section.prefix.startswith("/"):
        return f"the part of the site {section.prefix!r} must start with /"
    if any(s.prefix == section.prefix and s.prefix != "/" for s in sections[:index]):
        return f"another section already keeps {section.prefix}"
    return None


def render(rules: SiteRules) -> RenderedFile:
    """The robots.txt the rules make, with each line's origin and the rows left out."""
    problems: list[Problem] = []
    by_agent: dict[str, list[tuple[int, int, RuleRow]]] = {}
    sitemaps: list[tuple[int, int, RuleRow]] = []
    for s, section in enumerate(rules.sections):
        message = _section_problem(section, s, rules.sections)
        if message is not None:
            problems.append(Problem(s, -1, message))
            continue
        for r, row in enumerate(section.rules):
            if not row.value.strip() and not (row.field is Field.DISALLOW
                                              and section.is_site_wide):
                # a row still being written (an empty Disallow for the whole site is
                # meaningful: "nothing is disallowed")
                continue
            message = _row_problem(section, row)
            if message is not None:
                problems.append(Problem(s, r, message))
            elif row.field is Field.SITEMAP:
                sitemaps.append((s, r, row))
            else:
                by_agent.setdefault(row.agent.strip(), []).append((s, r, row))
    # An agent the hand-written part already heads a group for gets its rows at the end of
    # that group, not a second group ahead of it: the 1996 draft and REGP read only the
    # first group naming an agent (the hand-written rules would be lost to them), and at the
    # group's end a row changes only the paths it matches, in every dialect (the last line
    # wins in REGP, the first in 1996, the longest in RFC 9309 and Google's).
    manual = rules.manual_text.replace("\r\n", "\n").rstrip("\n").split("\n") \
        if rules.manual_text else []
    ends = _group_ends(rules.manual_text) if rules.manual_text else {}
    joined = {agent: rows for agent, rows in by_agent.items() if _agent_key(agent) in ends}
    by_agent = {agent: rows for agent, rows in by_agent.items() if agent not in joined}
    after: dict[int, list[str]] = {}
    for agent in joined:
        after.setdefault(ends[_agent_key(agent)], []).append(agent)
    lines: list[str] = []
    origins: dict[int, tuple[int, int]] = {}

    def add(text: str, origin: tuple[int, int] | None = None) -> None:
        lines.append(text)
        if origin is not None:
            origins[len(lines)] = origin

    if rules.manual_text:
        add(MANAGED_BEGIN)
    kept = [f"{s.name} {s.prefix} ({s.owner})" if s.owner else f"{s.name} {s.prefix}"
            for s in rules.sections]
    add("# robots.txt kept in sections: " + "; ".join(_clean(k) for k in kept))
    if not by_agent and not rules.manual_text:
        # A file must say something; before a hand-written part it must not, since readers
        # that take the first group for * (the 1996 draft, urllib.robotparser) would read an
        # empty one here and never reach the hand-written rules.
        add("User-agent: *")
        add("Disallow:")
    for agent, rows in by_agent.items():
        if len(lines) > 1:
            add("")
        add(f"User-agent: {agent}")
        current = -1
        for s, r, row in rows:
            if s != current and len(rules.sections) > 1:
                section = rules.sections[s]
                add(f"# {_clean(section.name)}: {section.prefix}"
                    + (f", kept by {_clean(section.owner)}" if section.owner else ""), (s, -1))
                current = s
            add(rule_line(rules.sections[s], row), (s, r))
    if sitemaps:
        add("")
        for s, r, row in sitemaps:
            add(f"Sitemap: {row.value.strip()}", (s, r))
    if rules.manual_text:
        add(MANAGED_END)
        add("")
        for n, text in enumerate(manual, 1):
            add(text)
            for agent in after.get(n, ()):
                add(f"# managed: the configuration page's rules for {agent}",
                    (joined[agent][0][0], -1))
                for s, r, row in joined[agent]:
                    add(rule_line(rules.sections[s], row), (s, r))
    text = "\n".join(lines) + "\n"
    if len(text.encode()) > MAX_ROBOTS_BYTES:
        problems.append(Problem(0, -1, f"the file is {len(text.encode()):,} bytes; crawlers "
                                       f"read only the first {MAX_ROBOTS_BYTES:,}"))
    return RenderedFile(text, origins, tuple(problems))


def _agent_key(value: str) -> str:
    return value.strip().lower()


def _group_ends(text: str) -> dict[str, int]:
    """For each agent a group of the hand-written ``text`` names, the last line of the
    first such group (1-based): its last rule or field, else its last User-agent line."""
    body = parse_body(text, Dialect.RFC9309)
    rows = text.replace("\r\n", "\n").split("\n")
    ends: dict[str, int] = {}
    for group in body.groups:
        last = max([group.line, *(line for _, line, _ in group.raw_rules),
                    *(d.line for d in group.directives)])
        if last == group.line:  # no rule yet: after the User-agent lines that head it
            while last < len(rows) and rows[last].strip().lower().startswith("user-agent"):
                last += 1
        for agent in group.agents:
            ends.setdefault(_agent_key(agent), last)
    return ends


def rules_to_json(rules: SiteRules) -> str:
    """The rules as JSON, as versions keep them."""
    return json.dumps({
        "sections": [{"name": s.name, "prefix": s.prefix, "owner": s.owner,
                      "rules": [[r.agent, str(r.field), r.value] for r in s.rules]}
                     for s in rules.sections],
        "ttl_s": rules.ttl_s,
        "enforcement": {"refuse_disallowed": rules.enforcement.refuse_disallowed,
                        "throttle": rules.enforcement.throttle,
                        "refuse_forged": rules.enforcement.refuse_forged},
        "manual_text": rules.manual_text,
    }, ensure_ascii=False)


def _rows(values: Iterable[object], where: str) -> tuple[RuleRow, ...]:
    rows = []
    for value in values:
        if not (isinstance(value, list) and len(value) == 3):
            raise ConfigError(f"{where}: a rule is [agent, field, value], not {value!r}")
        try:
            kind = Field(str(value[1]))
        except ValueError:
            raise ConfigError(f"{where}: unknown field {value[1]!r}") from None
        rows.append(RuleRow(str(value[0]), kind, str(value[2])))
    return tuple(rows)


def rules_from_json(text: str) -> SiteRules:
    """The rules a version keeps; :class:`ConfigError` when it cannot be read."""
    try:
        data = read_json(text)
        sections = tuple(
            Section(str(s["name"]), str(s.get("prefix", "/")), str(s.get("owner", "")),
                    _rows(s.get("rules", []), f"section {s['name']!r}"))
            for s in data["sections"])
        enforce = data.get("enforcement", {})
        ttl_s = int(data.get("ttl_s", 3600))
    except (MalformedDocument, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"site rules cannot be read: {exc}") from exc
    return SiteRules(sections, max(0, min(ttl_s, MAX_TTL_S)),
                     Enforcement(bool(enforce.get("refuse_disallowed")),
                                 bool(enforce.get("throttle")),
                                 bool(enforce.get("refuse_forged"))),
                     str(data.get("manual_text", "")))

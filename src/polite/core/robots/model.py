"""The values a parsed robots.txt is made of, and the answers it gives."""

from __future__ import annotations

import enum
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import NamedTuple, overload

from polite.core.robots.values import CleanParam, RequestRate, TimeWindow
from polite.core.urls import from_octets

# An Allow/Disallow line as the parser stores it: (allow, line, value as octets). Rule
# objects are built from these only when asked for; most files are only ever matched.
RawRule = tuple[bool, int, str]


def _rules(raw: Iterable[RawRule]) -> list[Rule]:
    return [Rule(allow, from_octets(value), line) for allow, line, value in raw]


# Groups with fewer rules keep them as a tuple: packing costs a few microseconds a group,
# which most files (a few short groups) would pay for nothing.
PACKED_FROM = 16


def packed(rules: Sequence[RawRule]) -> Sequence[RawRule]:
    """``rules`` as a group keeps them: a tuple when they are few, else :class:`RawRules`."""
    if len(rules) < PACKED_FROM:
        return rules if isinstance(rules, tuple) else tuple(rules)
    return rules if isinstance(rules, RawRules) else RawRules(rules)


class RawRules(Sequence[RawRule]):
    """A group's Allow/Disallow lines packed into four objects, whatever their number: the
    values in one string, their ends and line numbers in arrays, the verdicts in bytes.

    A tuple per line, its value and its line number cost seven times the line (a hostile
    file of 30,000 short wildcard lines held 3.4 MB as tuples, 0.6 MB packed), and every
    object is one more for the allocator to free when the file is dropped. An item is
    rebuilt as a :data:`RawRule` when read.
    """

    __slots__ = ("_allow", "_ends", "_lines", "_text")

    def __init__(self, rules: Iterable[RawRule] = ()) -> None:
        rules = rules if isinstance(rules, list | tuple) else list(rules)
        allow, lines, values = zip(*rules, strict=True) if rules else ((), (), ())
        self._text = "".join(values)
        big = len(self._text) >= 1 << 32 or (lines and max(lines) >= 1 << 32)
        code = "Q" if big else "I"
        self._ends = array(code, accumulate(map(len, values)))
        self._lines = array(code, lines)
        self._allow = bytes(allow)

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, i: int) -> RawRule: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[RawRule, ...]: ...

    def __getitem__(self, i: int | slice) -> RawRule | tuple[RawRule, ...]:
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        if i < 0:
            i += len(self._lines)
        if not 0 <= i < len(self._lines):
            raise IndexError("rule index out of range")
        end = self._ends[i]
        return (self._allow[i] == 1, self._lines[i],
                self._text[self._ends[i - 1] if i else 0:end])

    def __iter__(self) -> Iterator[RawRule]:
        text, start = self._text, 0
        for allow, line, end in zip(self._allow, self._lines, self._ends, strict=True):
            yield allow == 1, line, text[start:end]
            start = end

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawRules | tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RawRules({tuple(self)!r})"

__all__ = [
    "MAX_ISSUES_PER_CODE",
    "MAX_LISTED_LINES",
    "AgentRules",
    "Block",
    "Decision",
    "Dialect",
    "Directive",
    "Group",
    "IpRule",
    "ParseIssue",
    "RawRule",
    "RawRules",
    "Rule",
    "Severity",
    "fold_issues",
    "packed",
]


class Dialect(enum.StrEnum):
    """The robots.txt dialects polite reads (DESIGN.md, "robots.txt dialects")."""

    RFC9309 = "rfc9309"
    GOOGLE = "google"
    KOSTER1996 = "koster1996"
    REGP = "regp"


class Severity(enum.StrEnum):
    """How much a parse issue matters: ``error`` lines were dropped, ``warning`` lines were
    read leniently, ``info`` notes something a webmaster may want to know."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class ParseIssue:
    """Something odd on one line; ``line`` is 1-based, 0 for the file as a whole.

    An issue said once for many lines (see :func:`fold_issues`) has a ``count`` above 1 and
    ``lines``, the first of them (``line`` is the first).
    """

    line: int
    code: str
    message: str
    severity: Severity = Severity.WARNING
    count: int = 1
    lines: tuple[int, ...] = ()

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "file"
        return f"{where}: {self.severity}: {self.message} [{self.code}]"


class DecidedBy(enum.Enum):
    """What decided a URL: a path rule, no rule matching (allowed), the path being
    ``/robots.txt`` (always allowed), an egress-IP rule (REGP), or the state of the file
    rather than its lines (none, unreachable)."""

    RULE = "rule"
    NO_RULE = "no rule"
    ROBOTS_TXT = "robots.txt"
    EGRESS_IP = "egress IP"
    FILE_STATE = "file state"


# Lines a folded issue lists; its count says how many there were.
MAX_LISTED_LINES = 10
# An issue code met more often than this in one file is said once, with a count: so many lines
# of one kind are an HTML page or a bomb's filler, not problems to fix one by one.
MAX_ISSUES_PER_CODE = 10


def fold_issues(issues: Iterable[ParseIssue]) -> list[ParseIssue]:
    """``issues`` with repeats said once, at the first line, with a count and the first lines:
    issues alike in code, severity and message, and all the issues of a code met more than
    :data:`MAX_ISSUES_PER_CODE` times. Other issues keep their own lines; order is kept."""
    issues = list(issues)
    per_code: dict[str, int] = {}
    for issue in issues:
        per_code[issue.code] = per_code.get(issue.code, 0) + issue.count
    groups: dict[tuple[str, Severity, str | None], list[ParseIssue]] = {}
    for issue in issues:
        alike = None if per_code[issue.code] > MAX_ISSUES_PER_CODE else issue.message
        groups.setdefault((issue.code, issue.severity, alike), []).append(issue)
    return [_folded(group) for group in groups.values()]


def _folded(group: list[ParseIssue]) -> ParseIssue:
    first = group[0]
    count = sum(issue.count for issue in group)
    if count == 1:
        return first
    lines: list[int] = []
    for issue in group:
        lines.extend(issue.lines or (issue.line,))
        if len(lines) >= MAX_LISTED_LINES:
            break
    listed = lines[:MAX_LISTED_LINES]
    shown = ", ".join(map(str, listed)) + (", ..." if count > len(listed) else "")
    if all(issue.message == first.message for issue in group):
        message = f"{first.message} ({count:,} times: lines {shown})"
    else:
        message = f"{first.message} ({count:,} lines of this kind: {shown})"
    return ParseIssue(first.line, first.code, message, first.severity, count, tuple(listed))


@dataclass(frozen=True, slots=True)
class Rule:
    """One Allow or Disallow line, ``pattern`` as written."""

    allow: bool
    pattern: str
    line: int

    def __str__(self) -> str:
        return f"{'Allow' if self.allow else 'Disallow'}: {self.pattern}"


class Directive(NamedTuple):
    """Any other ``key: value`` line, kept with its line number. ``value`` holds the typed
    value when the field is known and readable, else ``None``.

    A named tuple rather than a frozen dataclass: HTML served as robots.txt yields tens of
    thousands of these, and a tuple is built four times faster.
    """

    key: str
    text: str
    line: int
    value: object = None


@dataclass(frozen=True, slots=True)
class IpRule:
    """A REGP Ip-allow / Ip-disallow line; ``octets`` holds numbers or ``*``."""

    allow: bool
    octets: tuple[str, ...]
    line: int

    def matches(self, ip: str | None) -> bool:
        """Whether ``ip`` falls under the pattern; an unknown address matches only ``*``."""
        if ip is None:
            return all(o == "*" for o in self.octets)
        parts = ip.split(".")
        if len(parts) != 4:
            return False
        for octet, part in zip(self.octets, parts, strict=True):
            if octet != "*" and not (part.isdigit() and int(part) == int(octet)):
                return False
        return True


@dataclass(slots=True)
class Block:
    """A REGP brace block: a target (agents, IPs, paths) and the commands scoped to it."""

    line: int
    agents: list[str] = field(default_factory=list)
    ip_rules: list[IpRule] = field(default_factory=list)
    raw_scope: list[RawRule] = field(default_factory=list)
    raw_rules: list[RawRule] = field(default_factory=list)
    directives: list[Directive] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    end_line: int = 0

    @property
    def scope(self) -> list[Rule]:
        """Allow/Disallow lines of the block's target: the paths it applies to."""
        return _rules(self.raw_scope)

    @property
    def rules(self) -> list[Rule]:
        return _rules(self.raw_rules)


@dataclass(slots=True)
class Group:
    """A group (RFC 9309), record (1996 draft) or command sequence (REGP).

    ``agents`` are the User-agent values as written. REGP sequences may also carry IP rules
    and brace blocks. Tuples, not lists: a parsed file holds no container the garbage
    collector has to walk again and again (most hold only strings and numbers).
    """

    line: int
    agents: tuple[str, ...] = ()
    raw_rules: Sequence[RawRule] = ()
    directives: tuple[Directive, ...] = ()
    ip_rules: tuple[IpRule, ...] = ()
    blocks: tuple[Block, ...] = ()

    @property
    def rules(self) -> list[Rule]:
        """The group's Allow/Disallow lines in file order."""
        return _rules(self.raw_rules)


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer for one URL: allowed or not, and the rule (with its line) that decided.

    ``rule`` is ``None`` when no rule matched (allowed by default) or when something other
    than a path rule decided: ``by`` says what, ``reason`` says it in words.
    """

    allowed: bool
    rule: Rule | None
    reason: str
    line: int | None = None
    by: DecidedBy = DecidedBy.RULE

    def __bool__(self) -> bool:
        return self.allowed


@dataclass(frozen=True, slots=True)
class AgentRules:
    """Every non-path field that applies to one agent (and egress IP), typed.

    Values come from the agent's group, falling back to fields outside any group (a global
    section in REGP, lines before the first User-agent elsewhere).
    """

    crawl_delay_s: float | None = None
    request_rate: RequestRate | None = None
    request_rates: tuple[RequestRate, ...] = ()
    ip_delay_s: float | None = None
    ip_rate: RequestRate | None = None
    visit_time: tuple[TimeWindow, ...] = ()
    time_forbidden: tuple[TimeWindow, ...] = ()
    language: tuple[str, ...] = ()
    encoding: tuple[str, ...] = ()
    charset: tuple[str, ...] = ()
    cookies: tuple[str, ...] = ()
    mirror_sites: tuple[str, ...] = ()
    index_pages: tuple[str, ...] = ()
    change_frequency: tuple[tuple[str, str], ...] = ()
    clean_params: tuple[CleanParam, ...] = ()
    extensions: tuple[Directive, ...] = ()
    group_line: int | None = None
    # Where each delay field in force was read: (key, line, inside a brace block), so that
    # a wait can name the line that set it ("crawl-delay", "request-rate", "ip-delay",
    # "ip-rate").
    delay_lines: tuple[tuple[str, int, bool], ...] = ()

"""The values a parsed robots.txt is made of, and the answers it gives."""

from __future__ import annotations

import enum
from array import array
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress
from operator import itemgetter
from typing import NamedTuple, Self, TypeVar, cast, overload

from polite.core.robots.values import CleanParam, RequestRate, TimeWindow
from polite.core.urls import from_octets

# An Allow/Disallow line as the parser stores it: (allow, line, value as octets). Rule
# objects are built from these only when asked for; most files are only ever matched.
RawRule = tuple[bool, int, str]


def _rules(raw: Iterable[RawRule]) -> list[Rule]:
    return [Rule(allow, from_octets(value), line) for allow, line, value in raw]


# Files with fewer rules (or fields) keep them as tuples: packing costs some ten
# microseconds a file, which most files (a few short groups) would pay for little.
PACKED_FROM = 128

_Item = TypeVar("_Item")


class _Store:
    """What parts of one packing share (see :class:`Packed`)."""

    __slots__ = ("ends", "extra", "flags", "lines", "text")

    def __init__(self, flags: Sequence[int], lines: Sequence[int], values: Sequence[str],
                 extra: object = None) -> None:
        self.text = "".join(values)
        ends = list(accumulate(map(len, values)))
        # 32-bit items unless a value does not fit (a text of 4 GiB, a line past 2**32),
        # told by the array itself rather than by a pass over the values for their largest
        try:
            self.ends = array("I", ends)
            self.lines = array("I", lines)
        except OverflowError:
            self.ends = array("Q", ends)
            self.lines = array("Q", lines)
        self.flags: bytes | array[int]
        try:
            self.flags = bytes(flags)
        except ValueError:  # a flag of 256 or more
            self.flags = array("I", flags)
        self.extra = extra


class _Part(Sequence[_Item]):
    """Items ``_start`` to ``_stop`` of a store that the parts of one file share
    (:meth:`part`): a packing (:class:`Packed`) or a flat table (:class:`FlatRules`)."""

    __slots__ = ("_start", "_stop", "_store")

    _start: int
    _stop: int
    _store: object

    @property
    def store(self) -> object:
        """The store this sequence is a part of (shared with the other parts)."""
        return self._store

    def part(self, start: int, stop: int) -> Self:
        """Items ``start`` to ``stop`` (of this sequence), sharing its store."""
        view = object.__new__(type(self))
        view._store = self._store
        if self._start:
            start, stop = self._start + start, self._start + stop
        # else the numbers given, not copies: a group's end is the next one's start, one
        # number object for the two
        view._start, view._stop = start, stop
        return view

    def joined(self, parts: Sequence[Sequence[_Item]]) -> Self | None:
        """``self`` and ``parts`` as one part of their store, when they follow each other
        in it (the groups a crawler merges usually do); else ``None``."""
        stop = self._stop
        for part in parts:
            if not (isinstance(part, _Part) and part._store is self._store
                    and part._start == stop):
                return None
            stop = part._stop
        return self.part(0, stop - self._start)

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, i: int) -> _Item: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[_Item, ...]: ...

    def __getitem__(self, i: int | slice) -> _Item | tuple[_Item, ...]:
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("index out of range")
        return self._at(self._start + i)

    def _at(self, i: int) -> _Item:
        """The item at ``i`` in the store."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Part | tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({tuple(self)!r})"


class Packed(_Part[_Item]):
    """Lines of one kind packed into four objects, whatever their number: their values in
    one string, their ends and line numbers in arrays, a small number each (a verdict, a
    field's name) in a third. Parts of one packing share it: the groups of a file are
    slices of one packing, each a small object (:meth:`part`).

    A tuple per line, its value and its line number cost seven times the line (a hostile
    file of 30,000 short wildcard lines held 3.4 MB as tuples, 0.6 MB packed), and every
    object is one more for the allocator to free when the file is dropped. An item is
    rebuilt when read (:meth:`_item`).
    """

    __slots__ = ()

    _store: _Store

    def _pack(self, flags: Sequence[int], lines: Sequence[int], values: Sequence[str],
              extra: object = None) -> None:
        self._store = _Store(flags, lines, values, extra)
        self._start, self._stop = 0, len(lines)

    def _item(self, flag: int, line: int, text: str) -> _Item:
        raise NotImplementedError

    def _at(self, i: int) -> _Item:
        store = self._store
        return self._item(store.flags[i], store.lines[i],
                          store.text[store.ends[i - 1] if i else 0:store.ends[i]])

    def raw(self) -> Iterator[tuple[int, int, str]]:
        """Every item as stored: (flag, line, text)."""
        store, start, stop = self._store, self._start, self._stop
        text = store.text
        at = store.ends[start - 1] if start else 0
        for flag, line, end in zip(store.flags[start:stop], store.lines[start:stop],
                                   store.ends[start:stop], strict=True):
            yield flag, line, text[at:end]
            at = end

    def __iter__(self) -> Iterator[_Item]:
        item = self._item
        for flag, line, text in self.raw():
            yield item(flag, line, text)


class FlatRules(_Part[RawRule]):
    """The Allow/Disallow lines of a group of a file with few (under :data:`PACKED_FROM`),
    a part of the file's flat table (its rules as ``allow, line, value``, three items a
    rule): a rule's tuple made only when it is read, so that a matcher built from the
    group holds no tuple a rule, nor the collector one more object for each."""

    __slots__ = ()

    _store: tuple[bool | int | str, ...]

    @classmethod
    def of(cls, items: tuple[bool | int | str, ...], start: int, stop: int) -> FlatRules:
        """Rules ``start`` to ``stop`` of the flat table ``items``."""
        rules = object.__new__(cls)
        rules._store, rules._start, rules._stop = items, start, stop
        return rules

    def _at(self, i: int) -> RawRule:
        return cast(RawRule, self._store[3 * i:3 * i + 3])

    def __iter__(self) -> Iterator[RawRule]:
        items = iter(self._store[3 * self._start:3 * self._stop])
        return cast("Iterator[RawRule]", zip(items, items, items, strict=True))


class RawRules(Packed[RawRule]):
    """Allow/Disallow lines packed (see :class:`Packed`), each read as a :data:`RawRule`."""

    __slots__ = ()

    def __init__(self, rules: Iterable[RawRule] = ()) -> None:
        rules = rules if isinstance(rules, list | tuple) else list(rules)
        allow, lines, values = zip(*rules, strict=True) if rules else ((), (), ())
        self._pack(allow, lines, values)

    @classmethod
    def from_columns(cls, allow: Sequence[bool], lines: Sequence[int], values: Sequence[str]
                     ) -> RawRules:
        """The rules whose verdicts, line numbers and values are the items of the three."""
        rules = object.__new__(cls)
        rules._pack(allow, lines, values)
        return rules

    def _item(self, flag: int, line: int, text: str) -> RawRule:
        return flag == 1, line, text


def packed(rules: Sequence[RawRule]) -> Sequence[RawRule]:
    """``rules`` as a group keeps them: a tuple (or a part of a file's flat table) when they
    are few, else :class:`RawRules`."""
    if len(rules) < PACKED_FROM:
        return rules if isinstance(rules, tuple | FlatRules) else tuple(rules)
    return rules if isinstance(rules, RawRules) else RawRules(rules)


# How a Directives packing reads a field's value again: (name, text) -> value.
_Read = Callable[[str, str], object]


class Directives(Packed["Directive"]):
    """Fields (:class:`Directive`) packed (see :class:`Packed`): the name an index into
    the distinct names, the typed value read again from the text by ``read`` when an item
    is read (the reader made it so when the file was parsed, and reads it the same way)."""

    __slots__ = ()

    def __init__(self, directives: Sequence[Directive], read: _Read) -> None:
        names = list(map(itemgetter(0), directives))  # C loops: a file may hold thousands
        keys = tuple(dict.fromkeys(names))
        flags = list(map({key: i for i, key in enumerate(keys)}.__getitem__, names))
        self._pack(flags, list(map(itemgetter(2), directives)),
                   list(map(itemgetter(1), directives)), (keys, read))

    def _item(self, flag: int, line: int, text: str) -> Directive:
        keys, read = self._reading()
        key = keys[flag]
        return Directive(key, text, line, read(key, text))

    def _reading(self) -> tuple[tuple[str, ...], _Read]:
        extra = self._store.extra
        assert isinstance(extra, tuple)
        return extra

    def count_named(self, names: Container[str]) -> int:
        """How many of the fields are named one of ``names``."""
        flags = self._store.flags[self._start:self._stop]
        return sum(flags.count(i) for i, key in enumerate(self._reading()[0]) if key in names)

    def fields(self) -> Iterator[tuple[str, int, str]]:
        """Every field as (name, line, text), its value not read."""
        keys = self._reading()[0]
        for flag, line, text in self.raw():
            yield keys[flag], line, text

    def named(self, names: Container[str]) -> Iterator[tuple[str, int, str]]:
        """The fields named one of ``names`` as (name, line, text), their values not read,
        the others not visited (:meth:`positions`)."""
        keys = self._reading()[0]
        store, start = self._store, self._start
        for i in self.positions(names):
            i += start
            yield (keys[store.flags[i]], store.lines[i],
                   store.text[store.ends[i - 1] if i else 0:store.ends[i]])

    def positions(self, names: Container[str], *, named: bool = True) -> list[int]:
        """The positions (in this sequence) of the fields named one of ``names``, or with
        ``named=False`` of those named none of them. The names are looked at once each and
        the fields' flags searched by the interpreter's own loops: a file of thousands of
        one field asked for another is answered without a step per field."""
        wanted = {i for i, key in enumerate(self._reading()[0]) if (key in names) == named}
        flags = self._store.flags[self._start:self._stop]
        if not wanted:
            return []
        if not isinstance(flags, bytes):
            return list(compress(range(len(flags)), map(wanted.__contains__, flags)))
        table = bytearray(256)
        for i in wanted:
            table[i] = 1
        # each position kept where its mark is 1, by the interpreter's own loop (not a
        # turn of Python a field found: a file may hold thousands of those too)
        return list(compress(range(len(flags)), flags.translate(table)))


def fields_of(directives: Sequence[Directive]) -> Iterator[tuple[str, int, str]]:
    """(name, line, text) of each of ``directives``, packed or not, values not read."""
    if isinstance(directives, Directives):
        return directives.fields()
    return ((d.key, d.line, d.text) for d in directives)


def any_named(directives: Sequence[Directive], names: Container[str]) -> bool:
    """Whether any of ``directives`` is named one of ``names`` (of a packing, counted by
    the interpreter's own loops)."""
    if isinstance(directives, Directives):
        return directives.count_named(names) > 0
    return any(d.key in names for d in directives)


def fields_named(directives: Sequence[Directive], names: Container[str]
                 ) -> Iterator[tuple[str, int, str]]:
    """(name, line, text) of each of ``directives`` named one of ``names``, packed or not,
    values not read: of a packing, only those fields are visited (:meth:`Directives.positions`)."""
    if isinstance(directives, Directives):
        return directives.named(names)
    return ((d.key, d.line, d.text) for d in directives if d.key in names)


__all__ = [
    "MAX_ISSUES_PER_CODE",
    "MAX_LISTED_LINES",
    "AgentRules",
    "Block",
    "Decision",
    "Dialect",
    "Directive",
    "Directives",
    "FlatRules",
    "Group",
    "IpRule",
    "Packed",
    "ParseIssue",
    "RawRule",
    "RawRules",
    "Rule",
    "Severity",
    "any_named",
    "fields_named",
    "fields_of",
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
    directives: Sequence[Directive] = ()
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
    # Every other field, but the AI-usage rules (Content-Usage, Content-Signal): they apply
    # per path (polite.core.robots.usage).
    extensions: tuple[Directive, ...] = ()
    group_line: int | None = None
    # Where each delay field in force was read: (key, line, inside a brace block), so that
    # a wait can name the line that set it ("crawl-delay", "request-rate", "ip-delay",
    # "ip-rate").
    delay_lines: tuple[tuple[str, int, bool], ...] = ()

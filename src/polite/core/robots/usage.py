"""Every AI-usage preference that applies to a URL and an agent, each with its source.

Sources: ``Content-Usage`` and ``Content-Signal`` rules in the robots.txt group the agent
uses (path-matched like Allow/Disallow, and only for paths the group lets it fetch:
draft-ietf-aipref-attach-05, section 3.1); the same two as response headers; TDMRep
(``tdm-reservation`` / ``tdm-policy`` headers and META tags, ``/.well-known/tdmrep.json``);
``noai`` / ``noimageai`` in robots META tags and ``X-Robots-Tag``; Bing's ``noarchive`` /
``nocache`` for Bing's crawler; and RSL's ``License:`` link, which is kept, not judged.

Where sources disagree the most restrictive wins (draft-ietf-aipref-vocab-07, section 5.1):
any disallow, else any allow, else unknown. Every source stays in the answer, except that
TDMRep's own techniques are layered as its report orders them (META over header over
tdmrep.json) before they meet the others.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate, chain
from urllib.parse import urlsplit

from polite.core._documents import read_json
from polite.core._steps import STEP, Steps, finish
from polite.core.robots._held import held_bytes, rows_bytes
from polite.core.robots.matcher import PathIndex, matches
from polite.core.robots.meta import meta_contents, x_robots_values
from polite.core.robots.model import (
    Dialect,
    Directive,
    Group,
    any_named,
    fields_named,
    fields_of,
)
from polite.core.robots.parser import pattern_path
from polite.core.robots.robotstxt import RobotsTxt, product_token, request_path
from polite.core.usage.sf import MAX_FIELD_CHARS, serialize_string
from polite.core.usage.statement import Pref, RuleValue, Statement, parse_statement, rule_path
from polite.core.usage.vocab import (
    AIPREF_REVISIONS,
    CONTENT_SIGNALS,
    CURRENT,
    MAIN_PURPOSES,
    PURPOSES,
    Vocabulary,
)
from polite.errors import MalformedDocument, MalformedField

__all__ = [
    "MAX_TDMREP_BYTES",
    "TDMREP_PATH",
    "Answer",
    "Preferences",
    "Source",
    "TdmRep",
    "combine",
    "from_headers",
    "from_html",
    "from_robots",
    "from_tdmrep",
    "prepare_usage",
    "purpose_field",
    "purpose_json",
    "read_tdmrep",
    "read_tdmrep_steps",
    "robots_rules",
    "rsl_licenses",
]

# A file this large has a step of its own for what reads every field (its License lines).
_LARGE_BYTES = 16 * 1024
# A License line's URL split and judged weighs as eight of a step's units of work (as a
# wildcard pattern made ready does): some 70 lines of Python, against eight or so a field.
_SPLIT_UNITS = 8

# tdmrep.json files list a handful of locations; anything larger is refused unread.
MAX_TDMREP_BYTES = 512 * 1024
TDMREP_PATH = "/.well-known/tdmrep.json"
TDMREP = "tdmrep (W3C TDMRep CG report)"
NOAI = "noai convention"
BING = "Bing robots directives"

_BING_TOKENS = ("bingbot", "msnbot", "adidxbot", "bingpreview")


@dataclass(frozen=True, slots=True)
class Source:
    """One statement of preference: which mechanism, where (line, header, tag, entry), its
    text, the vocabulary revision it was read with, and what it states (stated purposes
    only)."""

    mechanism: str
    where: str
    text: str
    vocabulary: str
    prefs: tuple[tuple[str, Pref], ...] = ()
    line: int | None = None

    def pref(self, purpose: str) -> Pref:
        return dict(self.prefs).get(purpose, Pref.UNKNOWN)

    @property
    def named(self) -> str:
        """Mechanism and place, the place left out where the mechanism's name says it
        (``Content-Usage header``, not ``Content-Usage header header``)."""
        if self.mechanism.endswith(f" {self.where}"):
            return self.mechanism
        return f"{self.mechanism} {self.where}"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"mechanism": self.mechanism, "where": self.where,
                                  "text": self.text, "vocabulary": self.vocabulary,
                                  "prefs": {p: v.value for p, v in self.prefs}}
        if self.line is not None:
            out["line"] = self.line
        return out


@dataclass(frozen=True, slots=True)
class Answer:
    """The combined preference for one purpose: the sources that decided it and those that
    said otherwise and lost (a disagreement, shown, not hidden)."""

    purpose: str
    pref: Pref
    decided_by: tuple[Source, ...] = ()
    overruled: tuple[Source, ...] = ()
    # Why no preference applies, when some is stated but not for this URL (see Preferences)
    unapplied: str | None = None

    @property
    def reason(self) -> str:
        if not self.decided_by:
            return f"{self.purpose}: {self.unapplied or 'no preference stated'}"
        where = "; ".join(f"{s.named}: {s.text}" for s in self.decided_by)
        out = f"{self.purpose}={self.pref.value} by {where}"
        if self.overruled:
            lost = "; ".join(s.named for s in self.overruled)
            out += f" (most restrictive wins over {lost})"
        return out


@dataclass(frozen=True, slots=True)
class Preferences:
    """Every source found, the issues met reading them (skipped lines, bad headers) and the
    licence links (RSL ``License:``, TDMRep ``tdm-policy``)."""

    sources: tuple[Source, ...] = ()
    issues: tuple[str, ...] = ()
    licenses: tuple[str, ...] = field(default=())
    # Why the preferences stated do not apply to the URL (robots.txt disallows it: they
    # attach only to what it allows), so that "no preference stated" is not said of a group
    # that states one.
    unapplied: str | None = None

    def answer(self, purpose: str) -> Answer:
        stated = [(s, s.pref(purpose)) for s in self.sources]
        no = tuple(s for s, p in stated if p is Pref.DISALLOW)
        yes = tuple(s for s, p in stated if p is Pref.ALLOW)
        if no:
            return Answer(purpose, Pref.DISALLOW, no, yes)
        if yes:
            return Answer(purpose, Pref.ALLOW, yes)
        return Answer(purpose, Pref.UNKNOWN, unapplied=self.unapplied)

    def pref(self, purpose: str) -> Pref:
        return self.answer(purpose).pref

    def refuses(self, purpose: str) -> bool:
        return self.pref(purpose) is Pref.DISALLOW

    def stated(self) -> tuple[str, ...]:
        """The purposes some source states a preference for, in :data:`PURPOSES` order."""
        said = set()
        for source in self.sources:
            names = AIPREF_REVISIONS.get(source.vocabulary)
            for p, _ in source.prefs:
                # train-genai and ai-output are said only where a revision names them: under
                # the others they merely repeat the broader train-ai.
                if p in MAIN_PURPOSES or (names is not None and p in names.labels.values()):
                    said.add(p)
        return tuple(p for p in PURPOSES if p in said)

    def to_json(self) -> dict[str, object]:
        return {
            "prefs": {p: self.pref(p).value for p in self.stated()},
            "sources": [s.to_json() for s in self.sources],
            **({"licenses": list(self.licenses)} if self.licenses else {}),
            **({"issues": list(self.issues)} if self.issues else {}),
        }


def purpose_json(prefs: Preferences, purpose: str) -> dict[str, object]:
    """The answer for one purpose beside every source: the shape the service returns."""
    answer = prefs.answer(purpose)
    return {"purpose": purpose, "pref": answer.pref.value, "reason": answer.reason,
            **prefs.to_json()}


# Bounds of purpose_field: a site's line may be long and its licences many; the field is
# a summary with the sources named, not a copy of them.
_FIELD_TEXT_CHARS = 240
_FIELD_LICENSES = 4
_FIELD_LINK_CHARS = 1024


def purpose_field(prefs: Preferences, purpose: str) -> str:
    """:func:`purpose_json` as one RFC 9651 dictionary, for a response header: a member per
    purpose, the asked one first, then every other one stated, each an ``allow`` /
    ``disallow`` / ``unknown`` token with the sources that decided it (``source``, as the
    reason names them), their ``vocabulary`` revisions and the sources it ``overruled``
    (most restrictive wins); then ``license``, the licence links, an inner list."""
    def text(value: str) -> str:
        return serialize_string(value, _FIELD_TEXT_CHARS)

    members = []
    for p in dict.fromkeys((purpose, *prefs.stated())):
        answer = prefs.answer(p)
        member = f"{p}={answer.pref.value}"
        if answer.decided_by:
            member += ";source=" + text("; ".join(f"{s.named}: {s.text}"
                                                  for s in answer.decided_by))
            member += ";vocabulary=" + text(" ".join(dict.fromkeys(
                s.vocabulary for s in answer.decided_by)))
        if answer.overruled:
            member += ";overruled=" + text("; ".join(f"{s.named}: {s.text}"
                                                     for s in answer.overruled))
        members.append(member)
    if prefs.licenses:
        links = " ".join(serialize_string(link, _FIELD_LINK_CHARS)
                         for link in prefs.licenses[:_FIELD_LICENSES])
        members.append(f"license=({links})")
    return ", ".join(members)


# TDMRep's processing priority: a header's tdm-reservation supersedes tdmrep.json's, and a
# META tag's supersedes both; absence never resets (TDMRep CG report, "Processing priority").
_TDMREP_LAYERS = {"tdmrep.json": 0, "tdm-reservation header": 1, "tdm-reservation META": 2}


def _tdmrep_layer(part: Preferences) -> int:
    return max((_TDMREP_LAYERS.get(s.mechanism, -1) for s in part.sources), default=-1)


# The answer of a source, or of sources, that state nothing.
_STATING_NOTHING = Preferences((), (), ())


def combine(*parts: Preferences) -> Preferences:
    """``parts`` together. Most restrictive wins between mechanisms, but TDMRep's own
    techniques are layered: only the highest one that states a reservation counts, and a
    lower one's tdm-policy stands only while the reservation is 1 and the higher one names
    no policy of its own."""
    # a part that states nothing (most pages' headers and robots.txt) changes nothing
    parts = tuple(p for p in parts if p.sources or p.issues or p.licenses)
    if not parts:
        return _STATING_NOTHING
    if not any(s.mechanism in _TDMREP_LAYERS for p in parts for s in p.sources):
        # no TDMRep technique (most pages): nothing layered, every part stands as it is
        return Preferences(tuple(s for p in parts for s in p.sources),
                           tuple(i for p in parts for i in p.issues),
                           tuple(dict.fromkeys(x for p in parts for x in p.licenses)))
    top = max((_tdmrep_layer(p) for p in parts), default=-1)
    sources = tuple(s for p in parts for s in p.sources
                    if _TDMREP_LAYERS.get(s.mechanism, top) == top)
    winners = [p for p in parts if top >= 0 and _tdmrep_layer(p) == top]
    reserved = any(s.pref("train-ai") is Pref.DISALLOW for p in winners for s in p.sources
                   if s.mechanism in _TDMREP_LAYERS)
    own_policy = any(p.licenses for p in winners)
    # A part with TDMRep sources carries no licence links but its tdm-policy.
    kept = [p for p in parts if not 0 <= _tdmrep_layer(p) < top
            or (reserved and not own_policy)]
    return Preferences(sources, tuple(i for p in parts for i in p.issues),
                       tuple(dict.fromkeys(x for p in kept for x in p.licenses)))


def _stated(statement: Statement, vocab: Vocabulary) -> tuple[tuple[str, Pref], ...]:
    found = ((p, statement.pref(vocab, p)) for p in PURPOSES)
    return tuple((p, v) for p, v in found if v is not Pref.UNKNOWN)


def _revision(revision: str) -> Vocabulary:
    vocab = AIPREF_REVISIONS.get(revision)
    if vocab is None:
        raise ValueError(f"unknown vocabulary revision {revision!r}")
    return vocab


# -- robots.txt ---------------------------------------------------------------------------

_RULE_KEYS = {"content-usage": "Content-Usage", "content-signal": "Content-Signal"}


def robots_rules(directives: Iterable[Directive]) -> list[tuple[Directive, RuleValue]]:
    """The readable Content-Usage / Content-Signal lines among ``directives``."""
    return [(d, d.value) for d in directives
            if d.key in _RULE_KEYS and isinstance(d.value, RuleValue)]


class _Patterns:
    """Lines whose path patterns are matched as Allow and Disallow are, compiled once: the
    patterns that match a path longest, every one of them where several tie (the tie is
    rare; two indexes that break ties in opposite orders find whether there is one).

    ``ranks`` orders patterns of equal length: the index of the first answers the highest,
    ``reverse`` (kept only when some length repeats) the lowest; where they agree, only one
    pattern matches that long. The lines stay where the parsed file packs them: a pattern
    knows their places (numbers), and only the lines of the patterns that apply are read.
    """

    __slots__ = ("by_length", "ends", "index", "places", "reverse", "starts", "text",
                 "wildcards")

    by_length: dict[int, array[int]]
    ends: array[int]
    index: PathIndex
    places: array[int]
    reverse: PathIndex | None
    starts: array[int]
    text: str
    wildcards: bool

    @classmethod
    def built(cls, patterns: list[str], places: list[list[int]], *,
              wildcards: bool) -> Steps[_Patterns]:
        """The patterns compiled, in steps (see :mod:`polite.core._steps`)."""
        self = cls.__new__(cls)
        self.wildcards = wildcards
        n = len(patterns)
        large = n > STEP
        self.text = "".join(patterns)  # the patterns, in one string
        self.ends = array("I", accumulate(map(len, patterns)))
        # the places of pattern i's lines are places[starts[i]:starts[i + 1]]
        self.places = array("I", chain.from_iterable(places))
        self.starts = array("I", accumulate(map(len, places), initial=0))
        # what is done per pattern in Python, a step's patterns at a time
        by_length: dict[int, list[int]] = {}
        for start in range(0, n, STEP):
            if large:
                yield
            for i, pattern in enumerate(patterns[start:start + STEP], start):
                by_length.setdefault(len(pattern), []).append(i)
        self.by_length = {k: array("I", v) for k, v in by_length.items() if len(v) > 1}
        entries: list[tuple[str, int, int]] = []
        for start in range(0, n, STEP):
            if large:
                yield
            entries.extend([(p, len(p) * n + i, i)
                            for i, p in enumerate(patterns[start:start + STEP], start)])
        self.index = yield from PathIndex.built(entries, wildcards=wildcards)
        self.reverse = None
        if self.by_length:
            last = n - 1
            for start in range(0, n, STEP):
                if large:
                    yield
                entries[start:start + STEP] = [
                    (p, len(p) * n + last - i, i)
                    for i, p in enumerate(patterns[start:start + STEP], start)]
            self.reverse = yield from PathIndex.built(entries, wildcards=wildcards)
        return self

    def held_bytes(self) -> int:
        """The bytes the patterns hold with their indexes as built."""
        size = sys.getsizeof
        return (size(self) + sum(map(size, (self.text, self.ends, self.places, self.starts,
                                             self.by_length)))
                + sum(map(size, self.by_length.values())) + self.index.held_bytes()
                + (0 if self.reverse is None else self.reverse.held_bytes()))

    def pattern(self, i: int) -> str:
        return self.text[self.ends[i - 1] if i else 0:self.ends[i]]

    def longest(self, path: str) -> list[int]:
        """The places of the lines whose patterns match ``path`` longest."""
        first = self.index.lookup(path)
        if first < 0:
            return []
        chosen = [first]
        if self.reverse is not None:
            last = self.reverse.lookup(path)
            if last != first:
                length = self.ends[first] - (self.ends[first - 1] if first else 0)
                chosen = [i for i in self.by_length[length]
                          if i in (first, last) or matches(self.pattern(i), path,
                                                           wildcards=self.wildcards)]
        starts, places = self.starts, self.places
        return [p for i in chosen for p in places[starts[i]:starts[i + 1]]]


class _UsageView:
    """The Content-Usage and Content-Signal lines of a group selection, by field, compiled;
    a line is found again from its place (its number among the groups' fields). With them,
    the file's License links and the License lines skipped (:func:`rsl_licenses`), so that
    a page's preferences are one lookup of the file's views, not two."""

    __slots__ = ("directives", "issues", "licenses", "offsets", "patterns")

    def __init__(self, groups: list[Group], patterns: dict[str, _Patterns],
                 licensing: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
        self.directives = tuple(g.directives for g in groups)
        self.offsets = array("I", accumulate((len(d) for d in self.directives), initial=0))
        self.patterns = patterns
        self.licenses, self.issues = licensing

    def line(self, place: int) -> tuple[Directive, RuleValue]:
        g = bisect_right(self.offsets, place) - 1
        found = self.directives[g][place - self.offsets[g]]
        assert isinstance(found.value, RuleValue)
        return found, found.value


def _usage_view(robots: RobotsTxt, groups: list[Group]
                ) -> Steps[tuple[_UsageView, int, tuple[PathIndex, ...]]]:
    """The Content-Usage and Content-Signal lines of ``groups``, by field, compiled, and the
    file's License links; its bytes and its indexes (see :meth:`RobotsTxt.view`), in
    steps."""
    dialect = robots.dialect
    # field -> pattern (the path as the dialect reads it) -> places, in file order
    found: dict[str, dict[str, list[int]]] = {}
    place = 0
    for group in groups:
        for key, _, text in fields_of(group.directives):
            if place and not place % STEP:
                yield
            if key in _RULE_KEYS:
                pattern = pattern_path(dialect, rule_path(text).encode("utf-8")
                                       .decode("latin-1"))
                found.setdefault(key, {}).setdefault(pattern, []).append(place)
            place += 1
    wildcards = dialect is not Dialect.KOSTER1996
    patterns: dict[str, _Patterns] = {}
    for key in _RULE_KEYS:
        by_pattern = found.get(key)
        if by_pattern is not None:
            patterns[key] = yield from _Patterns.built(list(by_pattern),
                                                       list(by_pattern.values()),
                                                       wildcards=wildcards)
    if place > STEP:
        yield
    licensing, licensing_bytes, _ = yield from _licenses_view(robots, groups)
    view = _UsageView(groups, patterns, licensing)
    size = sys.getsizeof
    held = (size(view) + size(view.directives) + size(view.offsets) + size(patterns)
            + sum(p.held_bytes() for p in patterns.values()) + licensing_bytes)
    return view, held, tuple(index for p in patterns.values()
                             for index in (p.index, p.reverse) if index is not None)


def states_preferences(robots: RobotsTxt) -> bool:
    """Whether the file has any line that states a preference (Content-Usage,
    Content-Signal, License): most files have none, and then every answer is empty."""
    stating = (*_RULE_KEYS, "license")
    return any(any_named(directives, stating)
               for directives in (robots.global_directives, robots.group_fields()))


def prepare_usage(robots: RobotsTxt, agent: str) -> Steps[None]:
    """What :func:`from_robots` reads for ``agent`` (its access matcher, its AI-usage
    lines compiled) built, in steps (see :mod:`polite.core._steps`): for a caller that must
    not wait for a large file's."""
    yield from robots.prepare(agent)
    view = yield from robots.view_steps("usage", agent, partial(_usage_view, robots))
    assert isinstance(view, _UsageView)
    for patterns in view.patterns.values():  # what a first lookup would build
        yield from patterns.index.searched()
        if patterns.reverse is not None:
            yield from patterns.reverse.searched()


def from_robots(robots: RobotsTxt, url: str, agent: str, *, revision: str = CURRENT
                ) -> Preferences:
    """The preferences robots.txt attaches to ``url`` for ``agent``: per mechanism, the
    rules of the agent's group whose path matches longest (ties all apply). None for a URL
    the group disallows (attach-05, 3.1)."""
    vocab = _revision(revision)
    dialect = robots.dialect
    # Compiled once per file and group selection (and kept within the file's byte bound):
    # a check is then an index lookup, not a pass over every line.
    view = robots.view("usage", agent, partial(_usage_view, robots))
    assert isinstance(view, _UsageView)
    licenses, issues = view.licenses, view.issues
    if not view.patterns:  # most files: no such line
        return Preferences(issues=issues, licenses=licenses) if issues or licenses \
            else _STATING_NOTHING
    if not robots.allowed(url, agent):
        return Preferences(issues=issues, licenses=licenses, unapplied=(
            f"none applies: robots.txt disallows this URL for {agent}, and its usage "
            "preferences attach only to the URLs it allows (draft-ietf-aipref-attach, 3.1)"))
    path = request_path(dialect, url)
    sources: list[Source] = []
    for key, label in _RULE_KEYS.items():
        patterns = view.patterns.get(key)
        if patterns is None:
            continue
        chosen = sorted(map(view.line, patterns.longest(path)),
                        key=lambda found: found[0].line)
        used = vocab if key == "content-usage" else CONTENT_SIGNALS
        for d, rule in chosen:
            sources.append(Source(f"robots.txt {label}", f"line {d.line}", d.text, used.name,
                                  _stated(rule.statement, used), d.line))
    return Preferences(tuple(sources), issues, licenses)


def _licenses_view(robots: RobotsTxt, groups: list[Group]
                   ) -> Steps[tuple[tuple[tuple[str, ...], tuple[str, ...]], int,
                                    tuple[PathIndex, ...]]]:
    """:func:`rsl_licenses` as a view (the same for every agent: License is global), a
    step of its own (it reads every field of the file) in a large one."""
    if robots.size >= _LARGE_BYTES:
        yield
    found = yield from _rsl_licenses_steps(robots)
    if len(found[0]) + len(found[1]) > STEP:
        yield  # the bytes of thousands of links or issues counted in a step of their own
    return found, held_bytes(found), ()


def rsl_licenses(robots: RobotsTxt) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """RSL ``License:`` links and the lines skipped. RSL makes the directive global, tied to
    no user agent, wherever it stands in the file, and its value a fully qualified URL
    (scheme and host); anything else is reported, not kept."""
    return finish(_rsl_licenses_steps(robots))


def _rsl_licenses_steps(robots: RobotsTxt
                        ) -> Steps[tuple[tuple[str, ...], tuple[str, ...]]]:
    """:func:`rsl_licenses` in steps: :data:`STEP` fields gathered, or a step's share of
    lines checked, each line's URL split in Python (some 70 lines of it, counted as
    :data:`_SPLIT_UNITS` units of work; 15,000 License lines of a 500 KiB file were 90 ms
    in one step)."""
    lines: list[tuple[int, str]] = []
    for directives in (robots.global_directives, robots.group_fields()):
        for _, line, text in fields_named(directives, ("license",)):
            if text:
                lines.append((line, text))
                if not len(lines) % STEP:
                    yield
    lines.sort()
    kept: list[str] = []
    issues: list[str] = []
    for n, (line, text) in enumerate(lines):
        if n and not n % (STEP // _SPLIT_UNITS):
            yield
        try:
            parts = urlsplit(text)
            absolute = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:  # an unclosed "[" host, a bad port
            absolute = False
        if absolute:
            kept.append(text)
        else:
            issues.append(f"line {line}: License {text[:80]!r} is not an absolute URL; "
                          "ignored")
    if len(lines) > STEP:
        yield
    return tuple(dict.fromkeys(kept)), tuple(dict.fromkeys(issues))


# -- headers and META ---------------------------------------------------------------------


# The response fields that may state a preference.
_STATING_FIELDS = frozenset({"content-usage", "content-signal", "tdm-reservation",
                             "tdm-policy", "x-robots-tag"})


def _field(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    """All lines of a header field joined as RFC 9110 5.3 combines them."""
    lines = [v for k, v in headers if k.lower() == name]
    return ", ".join(v.strip() for v in lines) if lines else None


def _tokens(value: str) -> list[str]:
    return [t.strip().lower() for t in value.split(",") if t.strip()]


def _robots_tokens(mechanism: str, where: str, tokens: list[str], agent: str,
                   content_type: str) -> list[Source]:
    """``noai`` / ``noimageai`` (any agent) and Bing's ``noarchive`` / ``nocache`` (Bing's
    crawler only: Bing documents them as keeping content out of its AI answers and
    training; for other crawlers they only concern a cached copy)."""
    out: list[Source] = []
    is_image = content_type.lower().startswith("image/")
    prefs: tuple[tuple[str, Pref], ...]
    for token in tokens:
        if token == "noai":
            out.append(Source(mechanism, where, token, NOAI, (("train-ai", Pref.DISALLOW),)))
        elif token == "noimageai":
            # The page's images are refused for training, not the page: stated for an image.
            prefs = (("train-ai", Pref.DISALLOW),) if is_image else ()
            out.append(Source(mechanism, where, token, NOAI, prefs))
        elif token in ("noarchive", "nocache") and \
                product_token(agent).lower() in _BING_TOKENS:
            prefs = (("train-ai", Pref.DISALLOW),)
            if token == "noarchive":
                prefs += (("ai-input", Pref.DISALLOW),)
            out.append(Source(mechanism, where, token, BING, prefs))
    return out


def _tdm_reservation(mechanism: str, where: str, value: str, issues: list[str]
                     ) -> list[Source]:
    value = value.strip()
    if value == "1":
        return [Source(mechanism, where, value, TDMREP, (("train-ai", Pref.DISALLOW),))]
    if value == "0":
        return [Source(mechanism, where, value, TDMREP, (("train-ai", Pref.ALLOW),))]
    issues.append(f"{where}: tdm-reservation {value[:80]!r} is neither 0 nor 1; ignored")
    return []


def _dictionary(mechanism: str, where: str, value: str, vocab: Vocabulary,
                issues: list[str]) -> list[Source]:
    try:
        statement = parse_statement(value)
    except MalformedField as e:
        issues.append(f"{where}: malformed dictionary ({e}); ignored")
        return []
    shown = value if len(value) <= 200 else value[:200] + "..."
    return [Source(mechanism, where, shown, vocab.name, _stated(statement, vocab))]


def from_headers(headers: Iterable[tuple[str, str]], agent: str, *,
                 revision: str = CURRENT, content_type: str | None = None) -> Preferences:
    """The preferences a response's headers state for ``agent``."""
    headers = list(headers)
    vocab = _revision(revision)
    if not any(k.lower() in _STATING_FIELDS for k, _ in headers):
        return _STATING_NOTHING  # most responses: one pass over their fields
    if content_type is None:
        content_type = _field(headers, "content-type") or ""
    sources: list[Source] = []
    issues: list[str] = []
    licenses: list[str] = []
    usage = _field(headers, "content-usage")
    if usage is not None:
        sources += _dictionary("Content-Usage header", "header", usage, vocab, issues)
    signal = _field(headers, "content-signal")
    if signal is not None:
        sources += _dictionary("Content-Signal header", "header", signal, CONTENT_SIGNALS,
                               issues)
    reservation = _field(headers, "tdm-reservation")
    if reservation is not None:
        sources += _tdm_reservation("tdm-reservation header", "header", reservation, issues)
    policy = _field(headers, "tdm-policy")
    if policy and reservation is not None and reservation.strip() == "1":
        licenses.append(policy.strip())  # a policy beside 0 is not processed (TDMRep)
    tags = [v for k, v in headers if k.lower() == "x-robots-tag"]
    for value in x_robots_values(tags, agent):
        if len(value) <= MAX_FIELD_CHARS:
            sources += _robots_tokens("X-Robots-Tag", "header", _tokens(value), agent,
                                      content_type)
    return Preferences(tuple(sources), tuple(issues), tuple(licenses))


def from_html(html: str | bytes, agent: str) -> Preferences:
    """The preferences a page's head states: ``noai`` / ``noimageai`` in ``robots`` (or the
    agent's own) META tags, TDMRep's ``tdm-reservation`` / ``tdm-policy`` META tags."""
    token = product_token(agent).lower()
    names = ("robots", token, "tdm-reservation", "tdm-policy")
    sources: list[Source] = []
    issues: list[str] = []
    policies: list[str] = []
    reserved = False
    for name, content in meta_contents(html, names):
        where = f'<meta name="{name}">'
        if name == "tdm-reservation":
            sources += _tdm_reservation("tdm-reservation META", where, content, issues)
            reserved = reserved or content.strip() == "1"
        elif name == "tdm-policy":
            if content.strip():
                policies.append(content.strip())
        else:
            sources += _robots_tokens("robots META", where, _tokens(content), agent, "")
    # A policy beside tdm-reservation 0 is not processed (TDMRep, "tdm-policy").
    return Preferences(tuple(sources), tuple(issues), tuple(policies) if reserved else ())


# -- TDMRep's well-known file -------------------------------------------------------------


class TdmRep:
    """A ``/.well-known/tdmrep.json`` read once, its locations compiled: a URL is then one
    index lookup, however many entries the file lists (:func:`read_tdmrep`)."""

    __slots__ = ("_entries", "_held", "_index", "_problem", "_skipped")

    def __init__(self, entries: list[tuple[int, str, object, object]], skipped: list[int],
                 problem: str | None = None, *, index: PathIndex | None = None) -> None:
        self._entries = tuple(entries)  # (entry number, location, reservation, policy)
        self._skipped = tuple(skipped)  # entry numbers without a location
        self._problem = problem
        # ``index``: the locations' (_locations), when built in steps
        self._index = index if index is not None else finish(_locations(entries))
        self._held: int | None = None

    @property
    def footprint(self) -> int:
        """The bytes the file holds as read and compiled (:func:`sys.getsizeof` of its
        parts, measured once) and what its lookups have added since (estimated): what a
        cache of many sites' files charges it."""
        if self._held is None:
            entries = self._entries
            self._held = (sys.getsizeof(self) + sys.getsizeof(entries) + rows_bytes(entries)
                          + held_bytes(self._skipped, self._problem)
                          + self._index.held_bytes())
        return self._held + self._index.grown_bytes()

    def preferences(self, url: str) -> Preferences:
        """The preferences the file states for ``url`` (see :func:`from_tdmrep`)."""
        where = TDMREP_PATH
        if self._problem is not None:
            return Preferences(issues=(self._problem,))
        # A location writes a literal "$" or "*" percent-encoded (the report's
        # "/path/foo-%24" matches ".../path/foo-$"), so the URL's own are encoded to
        # compare with it.
        path = request_path(Dialect.RFC9309, url).replace("$", "%24").replace("*", "%2A")
        k = self._index.lookup(path)
        i, location, reservation, policy = self._entries[k] if k >= 0 else (0, "", None, None)
        issues = [f"{where} entry {j}: no location; skipped" for j in self._skipped
                  if k < 0 or j < i]
        if k < 0:
            return Preferences(issues=tuple(issues))
        text = f"location {location}: tdm-reservation={reservation}"
        if isinstance(reservation, bool):
            reservation = None  # true/false is not the 0 or 1 the report asks for
        if reservation == 1:
            prefs: tuple[tuple[str, Pref], ...] = (("train-ai", Pref.DISALLOW),)
            licenses = (policy,) if isinstance(policy, str) and policy else ()
        elif reservation == 0:
            prefs, licenses = (("train-ai", Pref.ALLOW),), ()  # its policy is not processed
        else:
            # The first match is the one that applies; a bad value there is a protocol
            # error, read as unset, not a reason to look further down the file.
            issues.append(f"{where} entry {i}: tdm-reservation is neither 0 nor 1; "
                          "read as unset")
            return Preferences(issues=tuple(issues))
        source = Source("tdmrep.json", f"{where} entry {i}", text, TDMREP, prefs)
        return Preferences((source,), tuple(issues), licenses)


def _locations(entries: list[tuple[int, str, object, object]]) -> Steps[PathIndex]:
    """The index of the entries' locations (robots.txt wildcards), in steps."""
    patterns = []
    for count, (_, location, _, _) in enumerate(entries, 1):
        if not count % STEP:
            yield
        if not location.startswith("/"):
            location = "/" + location
        patterns.append(pattern_path(Dialect.RFC9309,
                                     location.encode("utf-8").decode("latin-1")))
    # The first entry that matches decides: the earlier, the higher its rank.
    n = len(patterns)
    ranked: list[tuple[str, int, int]] = []
    for start in range(0, n, STEP):
        yield
        ranked.extend([(p, n - k, k) for k, p in enumerate(patterns[start:start + STEP], start)])
    return (yield from PathIndex.built(ranked))


def read_tdmrep(body: str | bytes) -> TdmRep:
    """``/.well-known/tdmrep.json`` read and compiled, for :func:`from_tdmrep` to answer
    many URLs. A file that is not a JSON array, and entries that are not readable, are
    reported (for every URL asked about), never raised."""
    return finish(read_tdmrep_steps(body))


def read_tdmrep_steps(body: str | bytes) -> Steps[TdmRep]:
    """:func:`read_tdmrep` in steps (see :mod:`polite.core._steps`): a file of thousands
    of wildcard locations takes a tenth of a second to compile."""
    where = TDMREP_PATH
    try:
        data = read_json(body, max_bytes=MAX_TDMREP_BYTES)
    except MalformedDocument as exc:
        return TdmRep([], [], f"{where}: {exc}; ignored")
    if not isinstance(data, list):
        return TdmRep([], [], f"{where}: not a JSON array; ignored")
    yield
    entries: list[tuple[int, str, object, object]] = []
    skipped: list[int] = []
    for i, entry in enumerate(data, 1):
        if not i % STEP:
            yield
        if not isinstance(entry, dict) or not isinstance(entry.get("location"), str):
            skipped.append(i)
        else:
            entries.append((i, entry["location"], entry.get("tdm-reservation"),
                            entry.get("tdm-policy")))
    index = yield from _locations(entries)
    yield
    tdmrep = TdmRep(entries, skipped, index=index)
    tdmrep.footprint  # noqa: B018 (measured once, in a step of its own)
    return tdmrep


def from_tdmrep(body: str | bytes | TdmRep, url: str) -> Preferences:
    """``/.well-known/tdmrep.json`` read for ``url``: the first entry whose ``location``
    pattern (robots.txt wildcards) matches the URL's path decides, even when its
    ``tdm-reservation`` is bad (then unset). A file that is not a JSON array, and entries
    that are not readable, are reported, never raised. Give the file as
    :func:`read_tdmrep` read it to ask about many URLs: it is compiled once."""
    tdmrep = body if isinstance(body, TdmRep) else read_tdmrep(body)
    return tdmrep.preferences(url)

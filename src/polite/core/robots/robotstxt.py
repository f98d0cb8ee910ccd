"""A parsed robots.txt and the questions it answers: may this agent fetch this URL, and how."""

from __future__ import annotations

import re
import string
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain

from polite.core._steps import STEP, Steps, finish
from polite.core.robots._held import distinct_bytes, held_bytes, rows_bytes
from polite.core.robots.matcher import KEPT_MEMBERS, PathIndex, wildcard_regex
from polite.core.robots.model import (
    AgentRules,
    Block,
    DecidedBy,
    Decision,
    Dialect,
    Directive,
    Directives,
    FlatRules,
    Group,
    IpRule,
    Packed,
    ParseIssue,
    RawRule,
    Rule,
    fields_of,
    packed,
)
from polite.core.robots.parser import ParsedBody, pattern_path, read_issues
from polite.core.robots.values import (
    MAX_DELAY_S,
    CleanParam,
    DailyWindow,
    RequestRate,
    TimeRange,
    TimeWindow,
)
from polite.core.urls import (
    canonical_escapes,
    canonical_koster,
    canonical_rfc9309,
    from_octets,
    path_params_query,
    to_octets,
)

__all__ = ["RobotsTxt", "agent_matches", "request_path", "view_bytes"]

_WS = " \t\n\v\f\r"
_GOOGLE_TOKEN = re.compile(r"[A-Za-z_-]*")
_PRODUCT_TOKEN = re.compile(r"[^\s/]*")
# Answers are cached per (agent, ip); a crawler uses a handful of agents, so this bound
# only matters against a caller that sends a new agent every time (an entry is small: the
# matcher it points to is shared by every agent that selects the same groups).
_MAX_CACHED_AGENTS = 64

# What the matchers built from a file (one per distinct group selection, per kind) may hold
# together, at most, estimated from its counts (tracemalloc measured these bounds on
# CPython 3.11): a rule in a compiled matcher, a character of a pattern, a wildcard rule it
# keeps ready to match (a few hundred at most, see PathIndex) and what a matcher holds
# whatever its rules. A file keeps this many times matchers over all of its rules (agents
# whose groups overlap, as merged groups do, each have their own), least recently built
# going first.
_VIEW_BYTES_PER_RULE = 192
_BYTES_PER_CHAR = 3
_BYTES_PER_KEPT_MEMBER = 256
_BASE_BYTES = 4096
_VIEWS_PER_FILE = 2
# What a RobotsTxt holds itself: the object, its caches by agent with an agent or two.
_OWN_BYTES = 2048
_USAGE_KEYS = ("content-usage", "content-signal")


def request_path(dialect: Dialect, url: str) -> str:
    """The path (with params and query) of ``url`` in the form ``dialect`` matches against."""
    path = path_params_query(url)
    if dialect is Dialect.REGP and "#" in url:
        # REGP keeps "#" as part of a URL (seed 000, 3.2: script-driven pages). The fragment
        # starts at the first "#", which no scheme or authority holds ("://" after it, as
        # in "/p#x://y", is the fragment's own text).
        path += url[url.index("#"):]
    if not path.isascii():
        path = to_octets(path)
        if dialect is Dialect.GOOGLE:
            # A path typed with non-ASCII characters leaves a user agent percent-encoded as
            # UTF-8 (RFC 3986), the form Google's library expects and encodes its rules to;
            # the other dialects' forms encode or decode the octets themselves.
            return _HIGH_OCTET.sub(_escaped_octet, path)
    if dialect is Dialect.GOOGLE:
        return path
    if dialect is Dialect.KOSTER1996:
        return canonical_koster(path)
    if dialect is Dialect.REGP:
        return canonical_rfc9309(path).lower()
    return canonical_rfc9309(path)


_HIGH_OCTET = re.compile("[\x80-\xff]")


def _escaped_octet(m: re.Match[str]) -> str:
    return f"%{ord(m[0]):02X}"


def _is_robots_txt(path: str) -> bool:
    return path == "/robots.txt" or path.startswith("/robots.txt?")


# URLs whose path needs no work, per dialect: "scheme://authority/path" with only the
# characters the dialect leaves alone, captured as group 1. Anything else takes the long
# way (see _slow_path_of); both give the same answer (the tests check that).
_SAFE_RFC = r"[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=]"
_SAFE_RFC_OR_ESCAPE = r"[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=%]"


def _is_unreserved(octet: str) -> bool:
    return octet.isascii() and (octet.isalnum() or octet in "-._~")


def _kept_escape() -> str:
    """A regex for one ``%xx`` that RFC 9309 leaves as it is: upper-case hex, and an octet
    that is not unreserved (``%2F``, ``%C3``; not ``%2f`` nor ``%41``)."""
    choices = []
    for high in range(16):
        lows = "".join(f"{low:X}" for low in range(16) if not _is_unreserved(chr(high * 16 + low)))
        if lows:
            choices.append(f"{high:X}[{lows}]")
    return "%(?:" + "|".join(choices) + ")"


_RFC_PATH = rf"(/{_SAFE_RFC}*+(?:{_kept_escape()}{_SAFE_RFC}*+)*+)"
_RFC_FAST_PATH = re.compile(rf"https?://[^/?#;]*+{_RFC_PATH}\Z").match
# The RFC 9309 path as it stands (group 1), or, when its first escape needs fixing (one URL
# in twelve of the corpus's workload), its parts around that escape (groups 2 to 4): one
# regular expression for both, rather than a second tried after the first failed.
_RFC_FAST_OR_ESCAPED = re.compile(
    rf"https?://[^/?#;]*+(?:{_RFC_PATH}\Z|{_RFC_PATH}%([0-9A-Fa-f]{{2}})"
    rf"({_SAFE_RFC_OR_ESCAPE}*+)\Z)").match
_FAST_PATHS = {
    Dialect.RFC9309: _RFC_FAST_OR_ESCAPED,
    # REGP lower-cases every path, so that none is ready as it stands: see _slow_path_of.
    Dialect.REGP: re.compile(r"(?!)").match,
    Dialect.GOOGLE: re.compile(r"https?://[^/?#;]*(/[\x00-\x22\x24-\x7f]*)\Z").match,
    Dialect.KOSTER1996: re.compile(r"https?://[^/?#;]*(/[\x00-\x22\x24\x26-\x7f]*)\Z").match,
}
# The RFC 9309 shape up to the first escape that needs fixing, that escape's two hex digits,
# and the rest; and the fix for each pair of hex digits.
_FIRST_ESCAPE = re.compile(
    rf"https?://[^/?#;]*+{_RFC_PATH}%([0-9A-Fa-f]{{2}})({_SAFE_RFC_OR_ESCAPE}*+)\Z").match
_ESCAPES = {high + low: canonical_escapes("%" + high + low)
            for high in string.hexdigits for low in string.hexdigits}
_KOSTER_PATH = re.compile(r"https?://[^/?#;]*(/[\x00-\x22\x24-\x7f]*)\Z").match


def _slow_path_of(dialect: Dialect) -> Callable[[str], str]:
    """``request_path`` for URLs the dialect's fast path refused, with a shortcut for the
    common ones that only hold escapes to fix (Google's parser takes the URL as it is, so
    its fast path leaves nothing of that kind)."""
    if dialect is Dialect.GOOGLE:
        return lambda url: request_path(dialect, url)
    if dialect is Dialect.KOSTER1996:
        def koster_path_of(url: str) -> str:
            m = _KOSTER_PATH(url)
            return request_path(dialect, url) if m is None else canonical_koster(m[1])

        return koster_path_of
    lower = dialect is Dialect.REGP

    def path_of(url: str) -> str:
        if lower:
            ready = _RFC_FAST_PATH(url)
            if ready is not None:
                return ready[1].lower()
        m = _FIRST_ESCAPE(url)
        if m is None:
            return request_path(dialect, url)
        rest = m[3]
        path = m[1] + _ESCAPES[m[2]] + (canonical_escapes(rest) if "%" in rest else rest)
        return path.lower() if lower else path

    return path_of


def _escaped_rfc(m: re.Match[str]) -> str:
    """The RFC 9309 path of a URL :data:`_RFC_FAST_OR_ESCAPED` matched with an escape to
    fix."""
    rest = m[4]
    return m[2] + _ESCAPES[m[3]] + (canonical_escapes(rest) if "%" in rest else rest)


_ESCAPED: dict[Dialect, Callable[[re.Match[str]], str]] = {Dialect.RFC9309: _escaped_rfc}

# Shared by every file of a dialect, so that a parsed file holds no function of its own.
_SLOW_PATHS = {dialect: _slow_path_of(dialect) for dialect in Dialect}
_REQUEST_PATHS: dict[Dialect, Callable[[str], str]] = {
    dialect: partial(request_path, dialect) for dialect in Dialect}


def view_bytes(rules: int, chars: int) -> int:
    """An upper bound of the bytes a matcher (a view, see :meth:`RobotsTxt.view`) over
    ``rules`` rules of ``chars`` characters in all may hold (what a file's views are
    bounded by; what they are charged is measured)."""
    return (_BASE_BYTES + rules * _VIEW_BYTES_PER_RULE + chars * _BYTES_PER_CHAR
            + min(rules, KEPT_MEMBERS) * _BYTES_PER_KEPT_MEMBER)


def _always_allowed(url: str) -> bool:
    return True


_NO_AGENT: tuple[str | None, Callable[[str], bool]] = (None, _always_allowed)


# -- agent matching ----------------------------------------------------------------------


def _google_matches(value: str, agent: str) -> tuple[bool, bool]:
    """(global, specific) for one User-agent value, as Google's HandleUserAgent decides."""
    if value[:1] == "*" and (len(value) == 1 or value[1] in _WS):
        return True, False
    token = _GOOGLE_TOKEN.match(value).group()  # type: ignore[union-attr]
    return False, token.lower() == agent.lower()


def product_token(agent: str) -> str:
    """The product token of a User-Agent string: the text before the first ``/`` or space."""
    return _PRODUCT_TOKEN.match(agent.strip()).group()  # type: ignore[union-attr]


def _rfc_matches(value: str, agent: str) -> tuple[bool, bool]:
    value = value.strip()
    if value[:1] == "*" and (len(value) == 1 or value[1] in _WS):
        return True, False
    token = product_token(value).lower()
    return False, bool(token) and token == product_token(agent).lower()


def _substring_matches(value: str, agent: str) -> tuple[bool, bool]:
    value = value.strip()
    if value == "*":
        return True, False
    return False, bool(value) and value.lower() in agent.lower()


_AGENT_MATCHERS: dict[Dialect, Callable[[str, str], tuple[bool, bool]]] = {
    Dialect.GOOGLE: _google_matches,
    Dialect.RFC9309: _rfc_matches,
    Dialect.KOSTER1996: _substring_matches,
    Dialect.REGP: _substring_matches,
}


def agent_matches(dialect: Dialect, value: str, agent: str) -> tuple[bool, bool]:
    """How one ``User-agent`` value (as written) matches ``agent`` in ``dialect``:
    ``(is *, names this agent)``; the rule groups are chosen from these answers."""
    return _AGENT_MATCHERS[dialect](value, agent)


def _ip_decision(rules: Sequence[IpRule], ip: str | None) -> IpRule | None:
    """The IP rule that denies ``ip``, or ``None`` when it may fetch (REGP, seed 000 3.2.4).

    The last matching line wins; a group that opens with a specific Ip-allow implies
    ``Ip-disallow: *`` before it, one that opens with a specific Ip-disallow ``Ip-allow: *``.
    """
    if not rules:
        return None
    first = rules[0]
    is_any = all(o == "*" for o in first.octets)
    verdict: IpRule | None = None
    if not is_any and first.allow:
        verdict = IpRule(False, ("*",) * 4, 0)
    for rule in rules:
        if rule.matches(ip):
            verdict = rule
    return verdict if verdict is not None and not verdict.allow else None


@dataclass(frozen=True, slots=True)
class _Compiled:
    """One agent's (and egress IP's) view of the file, ready to answer many URLs fast."""

    index: PathIndex
    rules: Sequence[RawRule]
    allow: bytes
    denied_by: IpRule | None
    path_of: Callable[[str], str]
    robots_always_allowed: bool
    check: Callable[[str], bool]


class RobotsTxt:
    """A parsed robots.txt: build it with :func:`polite.robots.parse`.

    The file is read once; each (agent, ip) pair it is asked about gets an index built on
    first use and kept, so repeated checks cost one lookup whatever the number of rules.
    """

    __slots__ = ("_allowance", "_body", "_cache", "_checks", "_fields", "_growing", "_last",
                 "_parsed_bytes", "_path_of", "_views", "_views_bytes", "size", "truncated")

    def __init__(self, body: ParsedBody) -> None:
        self._body = body
        # Read by every decision (whether its matcher is built in steps, whether it was cut):
        # attributes, not properties, whose reads Python 3.11 never specializes (about 500
        # instructions more each).
        self.size = body.size  # the bytes of the file as read
        self.truncated = body.truncated  # longer than the size cap, and cut there
        self._cache: dict[tuple[str, str | None], _Compiled] = {}
        # Matchers (and other views: AI-usage rules) by the groups an agent selects, so that
        # agents selecting the same groups share one; their bytes are bounded (see view()).
        self._views: dict[tuple[object, ...], tuple[object, int, tuple[PathIndex, ...]]] = {}
        self._views_bytes = 0  # what they held when built, measured
        # their indexes, which grow as they are used (replaced whole, never changed: read
        # from any thread)
        self._growing: tuple[PathIndex, ...] = ()
        self._parsed_bytes: int | None = None  # what the parsed file holds, measured
        self._allowance: int | None = None  # what its views may hold together
        # agent_rules for agents whose groups have no brace blocks (the same for every URL)
        self._fields: dict[tuple[str, str | None], AgentRules] = {}
        self._checks: dict[str, Callable[[str], bool]] = {}  # the same, for ip None
        self._last = _NO_AGENT
        dialect = body.dialect
        self._path_of = _REQUEST_PATHS[dialect]

    # -- what was read ---------------------------------------------------------------

    @property
    def dialect(self) -> Dialect:
        return self._body.dialect

    @property
    def sitemaps(self) -> tuple[str, ...]:
        """Sitemap URLs in file order, duplicates removed."""
        return tuple(dict.fromkeys(self._body.sitemaps))

    @property
    def issues(self) -> tuple[ParseIssue, ...]:
        """Every line that was skipped or read leniently, in line order; repeated issues are
        said once with a count (:attr:`ParseIssue.count`) and their first lines."""
        return tuple(read_issues(self._body))

    @property
    def groups(self) -> tuple[Group, ...]:
        return self._body.groups

    def group_fields(self) -> Sequence[Directive]:
        """The fields of every group (not of their brace blocks) in file order, as one
        sequence (a packing when they are many): what a walk over them all reads without
        making the groups (see :meth:`ParsedBody.group`)."""
        return self._body.field_items

    @property
    def global_directives(self) -> tuple[Directive, ...]:
        """Fields outside any group: REGP's global section, or lines before any User-agent."""
        return tuple(self._body.global_directives)

    @property
    def version(self) -> tuple[int, int] | None:
        """REGP ``Robot-version`` as ``(major, minor)``."""
        return self._body.version

    @property
    def last_modified(self) -> float | None:
        """REGP ``Last-modified`` in seconds since the epoch."""
        return self._body.last_modified

    @property
    def looks_like_html(self) -> bool:
        """Whether the body is an HTML page rather than a robots.txt file."""
        return self._body.looks_like_html

    @property
    def footprint(self) -> int:
        """The bytes this file holds in memory (besides its body): itself as parsed and the
        matchers built from it so far (at most :meth:`view`'s allowance for the file, or its
        newest one alone), as :func:`sys.getsizeof` measures them when built, and what
        their lookups have added since (estimated from counts). A cache charges a file
        this much, again as it grows; the first call measures the parsed file (a few
        milliseconds for a large one)."""
        if self._parsed_bytes is None:
            self._parsed_bytes = _parsed_held(self._body)
        grown = 0
        for index in self._growing:  # no generator: asked at every check of the file
            grown += index.grown_bytes()
        return _OWN_BYTES + self._parsed_bytes + self._views_bytes + grown

    def _views_allowance(self) -> int:
        """What the views of this file may hold together, estimated from its counts."""
        if self._allowance is None:
            body = self._body
            # every group's rules and fields, read from the table (no group made)
            rules = body.rule_ends[-1] if body.rule_ends else 0
            fields = body.field_items
            if isinstance(fields, Directives):
                usage = fields.count_named(_USAGE_KEYS)
            else:
                usage = sum(d.key in _USAGE_KEYS for d in fields)
            for _, blocks in body.group_extras or ():
                for block in _walk(blocks):
                    rules += len(block.raw_rules) + len(block.raw_scope)
            for block in _walk(body.global_blocks):
                rules += len(block.raw_rules) + len(block.raw_scope)
            # A matcher over every rule, and the AI-usage lines' (two indexes: see
            # polite.core.robots.usage); the characters of either are at most the file's.
            whole = view_bytes(rules, body.size) + 2 * view_bytes(usage, body.size)
            self._allowance = _VIEWS_PER_FILE * whole
        return self._allowance

    def view(self, kind: str, agent: str,
             build: Callable[[list[Group]], Steps[tuple[object, int, tuple[PathIndex, ...]]]],
             *, ip: str | None = None) -> object:
        """What ``build`` makes of the groups ``agent`` selects, built once and shared by
        every agent that selects the same groups. ``build`` gives the view, its bytes (what
        it holds besides the parsed file, measured) and the indexes in it that grow as they
        are used (see :attr:`footprint`), in steps; the views of a file are bounded
        together, the least recently built dropped first, the newest always kept."""
        return finish(self.view_steps(kind, agent, build, ip=ip))

    def view_steps(self, kind: str, agent: str,
                   build: Callable[[list[Group]],
                                   Steps[tuple[object, int, tuple[PathIndex, ...]]]],
                   *, ip: str | None = None) -> Steps[object]:
        """:meth:`view` in steps (see :mod:`polite.core._steps`)."""
        chosen, key = self._selection(agent, ip)
        key = (kind, *key)
        known = self._views.get(key)
        if known is not None:
            return known[0]
        value, cost, indexes = yield from build(list(map(self._body.group, chosen)))
        # built meanwhile (on another thread, or by other steps): one is kept
        known = self._views.get(key)
        if known is not None:
            return known[0]
        # the key's tuples (the numbers in them are the groups')
        cost += sum(map(sys.getsizeof, (key, *(part for part in key if type(part) is tuple))))
        allowance = self._views_allowance()
        held = self._views_bytes + sum(index.grown_bytes() for index in self._growing)
        while self._views and held + cost > allowance:
            _, dropped, dropped_indexes = self._views.pop(next(iter(self._views)))
            self._views_bytes -= dropped
            held -= dropped + sum(index.grown_bytes() for index in dropped_indexes)
            self._forget_agents()
        self._views[key] = (value, cost, indexes)
        self._views_bytes += cost
        self._growing = tuple(index for _, _, found in self._views.values() for index in found)
        return value

    def _forget_agents(self) -> None:
        """Drop what points at matchers by agent (cheap to find again), so that a dropped
        matcher is freed."""
        self._cache.clear()
        self._checks.clear()
        self._last = _NO_AGENT

    def _selection(self, agent: str, ip: str | None) -> tuple[list[int], tuple[object, ...]]:
        """The groups ``agent`` selects (their numbers: none made) and a key for what follows
        from them alone: their places in the file; REGP adds the egress IP (Ip-allow,
        Ip-disallow) and, when brace blocks apply, the agent (their targets name agents of
        their own)."""
        body = self._body
        chosen = self._select(agent)
        places = tuple(map(body.group_lines.__getitem__, chosen))
        if body.dialect is not Dialect.REGP:
            return chosen, places
        extras = body.group_extras or ()  # none in a file without groups
        blocks = bool(body.global_blocks) or any(extras[i][1] for i in chosen)
        return chosen, (places, ip, agent if blocks else None)

    @property
    def host(self) -> str | None:
        """The first ``Host`` field anywhere in the file (Yandex, REGP 3.2.13)."""
        for directives in self._all_directive_sequences():
            for key, _, text in fields_of(directives):
                if key == "host":
                    return text
        return None

    @property
    def extensions(self) -> tuple[Directive, ...]:
        """Every field that is not part of group structure, in line order, typed if known."""
        return tuple(sorted(self._all_directives(), key=lambda d: d.line))

    def _all_directives(self) -> Iterator[Directive]:
        for directives in self._all_directive_sequences():
            yield from directives

    def _all_directive_sequences(self) -> Iterator[Sequence[Directive]]:
        body = self._body
        yield body.global_directives
        if body.group_extras is None:
            yield body.field_items  # every group's, in file order (no group made)
        else:  # REGP: each group's, then its blocks'
            for i, (_, blocks) in enumerate(body.group_extras):
                yield body.fields_of(i)
                for block in _walk(blocks):
                    yield block.directives
        for block in _walk(body.global_blocks):
            yield block.directives

    # -- questions -------------------------------------------------------------------

    def allowed(self, url: str, agent: str, *, ip: str | None = None) -> bool:
        """Whether ``agent`` may fetch ``url``; ``ip`` is the egress address for REGP's
        Ip-allow / Ip-disallow."""
        # One tuple, read whole, so that threads never see an agent with another's check.
        last_agent, check = self._last
        if last_agent is agent and ip is None:  # the usual case: one crawler asking again
            return check(url)
        if ip is None:
            known = self._checks.get(agent)
            if known is not None:
                self._last = (agent, known)
                return known(url)
        compiled = self._cache.get((agent, ip)) or self._compile(agent, ip)
        return compiled.check(url)

    def checker(self, agent: str, *, ip: str | None = None) -> Callable[[str], bool]:
        """``allowed`` with the agent (and IP) bound: a ``url -> bool`` function for loops
        that check many URLs for one crawler."""
        compiled = self._cache.get((agent, ip)) or self._compile(agent, ip)
        return compiled.check

    def decide(self, url: str, agent: str, *, ip: str | None = None) -> Decision:
        """Like :meth:`allowed`, with the deciding rule, its line and a reason."""
        compiled = self._cache.get((agent, ip)) or self._compile(agent, ip)
        path = compiled.path_of(url)
        if compiled.robots_always_allowed and _is_robots_txt(path):
            return Decision(True, None, "/robots.txt is always allowed",
                            by=DecidedBy.ROBOTS_TXT)
        denied = compiled.denied_by
        if denied is not None:
            what = ("Ip-disallow: " + ".".join(denied.octets) if denied.line
                    else "implicit Ip-disallow: * before a leading Ip-allow")
            return Decision(False, None, f"egress IP {ip or 'unknown'} refused by {what}",
                            denied.line or None, DecidedBy.EGRESS_IP)
        i = compiled.index.lookup(path)
        if i < 0:
            return Decision(True, None, "no rule matches", by=DecidedBy.NO_RULE)
        allow, line, value = compiled.rules[i]
        rule = Rule(allow, from_octets(value), line)
        where = f"line {line}" if line else "implicit first rule"
        return Decision(compiled.allow[i] == 1, rule, f"{rule} ({where})", line or None)

    def names_agent(self, agent: str) -> bool:
        """Whether a group of the file names ``agent`` itself (not only through ``*``), as
        the dialect matches User-agent values."""
        dialect = self._body.dialect
        return any(agent_matches(dialect, value, agent)[1] for agents in self._body.group_agents
                   for value in agents)

    def rules_for(self, agent: str, *, ip: str | None = None, implicit: bool = False
                  ) -> tuple[Rule, ...]:
        """The Allow/Disallow rules that apply to ``agent``, in line order; with ``implicit``
        also REGP's implicit first rule (line 0, Ge & Ding 2016, 3.2.5)."""
        return tuple(Rule(allow, from_octets(value), line)
                     for allow, line, value in self._select_rules(agent, ip)
                     if line or implicit)

    def groups_for(self, agent: str) -> tuple[Group, ...]:
        """The groups whose rules apply to ``agent``, as the dialect chooses them: every
        group naming it (merged), else every ``*`` group (RFC 9309, Google); the first such
        record (1996 draft); the first target from the top (REGP). Empty when none applies."""
        return tuple(self._select_groups(agent))

    def agent_rules(self, agent: str, *, ip: str | None = None, url: str | None = None
                    ) -> AgentRules:
        """The typed fields (delays, rates, windows, ...) that apply to ``agent``.

        With ``url``, REGP brace blocks whose target covers the URL's path add or override
        fields: the path's own delay (Ge & Ding 2016, section 5).
        """
        known = self._fields.get((agent, ip))
        if known is not None:
            return known
        groups = self._select_groups(agent)
        directives: list[Directive] = []
        for group in groups:
            directives.extend(_agent_fields(group.directives))
        layers: list[Sequence[Directive]] = [_agent_fields(self._body.global_directives),
                                             directives]
        blocks = [b for g in groups for b in g.blocks] + list(self._body.global_blocks)
        if url is not None and blocks:
            path = self._path_of(url)
            layers.extend(self._scoped_directives(blocks, agent, ip, path))
        fields = _assemble(layers, groups[0].line if groups else None)
        if not blocks:
            if len(self._fields) >= _MAX_CACHED_AGENTS:
                self._fields.clear()
            self._fields[(agent, ip)] = fields
        return fields

    def delay_s(self, agent: str, *, ip: str | None = None, url: str | None = None
                ) -> float | None:
        """The longest spacing the file asks of ``agent``: Crawl-delay, Request-rate,
        Ip-delay, Ip-rate, for ``url``'s path when given, a day at most (``MAX_DELAY_S``:
        ``Crawl-delay: 1e9`` is a wish to be left alone, and the politeness layer's own cap
        is lower still); ``None`` when it sets none."""
        rules = self.agent_rules(agent, ip=ip, url=url)
        found = [d for d in (rules.crawl_delay_s, rules.ip_delay_s) if d is not None]
        found += [r.interval_s for r in (rules.request_rate, rules.ip_rate) if r is not None]
        return min(max(found), MAX_DELAY_S) if found else None

    # -- group selection --------------------------------------------------------------

    def _select_groups(self, agent: str) -> list[Group]:
        """The groups ``agent`` selects (see :meth:`groups_for`), made from the file's table
        (see :meth:`ParsedBody.group`): only those."""
        return list(map(self._body.group, self._select(agent)))

    def _select(self, agent: str) -> list[int]:
        """The numbers of the groups ``agent`` selects, read from the file's table of
        agents."""
        body = self._body
        dialect = body.dialect
        matches = _AGENT_MATCHERS[dialect]
        regp = dialect is Dialect.REGP
        extras = body.group_extras or ()  # REGP's, one a group
        specific: list[int] = []
        general: list[int] = []
        for i, agents in enumerate(body.group_agents):
            is_global = is_specific = False
            for value in agents:
                g, s = matches(value, agent)
                is_global |= g
                is_specific |= s
            if regp:
                if not agents and extras[i][0]:
                    is_global = True  # an IP-only target implies "User-agent: *"
                if is_specific or is_global:
                    return [i]  # top to bottom until a target matches (seed 000, 3.2)
            if is_specific:
                specific.append(i)
            elif is_global:
                general.append(i)
        chosen = specific or general
        return chosen[:1] if dialect is Dialect.KOSTER1996 else chosen

    def _select_rules(self, agent: str, ip: str | None, groups: list[Group] | None = None
                      ) -> Sequence[RawRule]:
        if groups is None:
            groups = self._select_groups(agent)
        if self._body.dialect is not Dialect.REGP:
            first = groups[0].raw_rules if groups else ()
            if len(groups) == 1:
                return first  # the usual case: one group, its packed rules shared
            if isinstance(first, Packed | FlatRules):
                # merged groups that follow each other in the file share its table too
                joined = first.joined([g.raw_rules for g in groups[1:]])
                if joined is not None:
                    return joined
        rules = [rule for group in groups for rule in group.raw_rules]
        if self._body.dialect is Dialect.REGP:
            blocks = [b for g in groups for b in g.blocks] + list(self._body.global_blocks)
            rules.extend(self._block_rules(blocks, agent, ip))
            rules.sort(key=lambda r: r[1])
            rules = [r for r in rules if r[2]]
            if rules and rules[0][2] not in ("*", "/"):
                # The implicit first rule (seed 000, 3.2.5).
                rules.insert(0, (not rules[0][0], 0, "/"))
        return rules

    def _block_applies(self, block: Block, agent: str, ip: str | None) -> bool:
        if block.agents and not any(_substring_matches(a, agent)[1] or a.strip() == "*"
                                    for a in block.agents):
            return False
        return _ip_decision(block.ip_rules, ip) is None

    def _block_rules(self, blocks: Iterable[Block], agent: str, ip: str | None
                     ) -> Iterator[RawRule]:
        for block in blocks:
            if self._block_applies(block, agent, ip):
                yield from block.raw_scope
                yield from block.raw_rules
                yield from self._block_rules(block.blocks, agent, ip)

    def _scoped_directives(self, blocks: Iterable[Block], agent: str, ip: str | None,
                           path: str) -> Iterator[list[Directive]]:
        for block in blocks:
            if not self._block_applies(block, agent, ip):
                continue
            dialect = self._body.dialect
            scope = [pattern_path(dialect, value) for _, _, value in block.raw_scope if value]
            if block.raw_scope and not any(re.match(wildcard_regex(p), path, re.DOTALL)
                                           for p in scope):
                continue
            yield block.directives
            yield from self._scoped_directives(block.blocks, agent, ip, path)

    def prepare(self, agent: str, *, ip: str | None = None) -> Steps[None]:
        """The matcher :meth:`allowed` uses for ``agent`` built, in steps (see
        :mod:`polite.core._steps`): for a caller that must not wait for a large file's."""
        if (agent, ip) not in self._cache:
            yield from self._compile_steps(agent, ip)

    def _compile(self, agent: str, ip: str | None) -> _Compiled:
        return finish(self._compile_steps(agent, ip))

    def _compile_steps(self, agent: str, ip: str | None) -> Steps[_Compiled]:
        compiled = yield from self.view_steps("access", agent, partial(self._build, agent, ip),
                                              ip=ip)
        assert isinstance(compiled, _Compiled)
        if len(self._cache) >= _MAX_CACHED_AGENTS:
            self._forget_agents()
        self._cache[(agent, ip)] = compiled
        if ip is None:
            self._checks[agent] = compiled.check
        return compiled

    def _build(self, agent: str, ip: str | None, groups: list[Group]
               ) -> Steps[tuple[_Compiled, int, tuple[PathIndex, ...]]]:
        """The matcher of ``groups`` (selected by ``agent``, asking from ``ip``), its bytes
        and its index, in steps."""
        dialect = self._body.dialect
        denied_by = None
        if dialect is Dialect.REGP and groups:
            denied_by = _ip_decision(groups[0].ip_rules, ip)
        rules = self._select_rules(agent, ip, groups)
        large = len(rules) > STEP  # a pause between the parts of a large matcher's work
        if large:
            yield
        entries: list[tuple[str, int, int]] = []
        allow: list[bool] = []
        for i, (rule_allow, line, value) in enumerate(rules):
            if i and not i % STEP:
                yield
            allow.append(rule_allow)
            path = pattern_path(dialect, value)
            if dialect is Dialect.KOSTER1996:
                if not path:
                    allow[-1] = True  # an empty value allows everything (1996 draft)
                entries.append((path, -line, i))
            elif dialect is Dialect.REGP:
                entries.append((path, line, i))
            elif path:
                entries.append((path, 2 * len(path) + rule_allow, i))
                if dialect is Dialect.GOOGLE and rule_allow:
                    # Google: "Allow: /x/index.htm(l)" also allows "/x/" (robots.cc).
                    slash = path.rfind("/")
                    if slash >= 0 and path.startswith("/index.htm", slash):
                        short = path[: slash + 1] + "$"
                        entries.append((short, 2 * len(short) + 1, i))
        index = yield from PathIndex.built(entries, wildcards=dialect is not Dialect.KOSTER1996)
        if large:
            yield
        always = dialect is not Dialect.GOOGLE
        check: Callable[[str], bool]
        if denied_by is None and not entries:
            check = _always_allowed  # no rule applies: no need to even read the URL
        elif denied_by is None:
            check = index.checker(allow, _SLOW_PATHS[dialect], _FAST_PATHS[dialect],
                                  robots_txt_allowed=always, escaped=_ESCAPED.get(dialect),
                                  as_written=dialect is Dialect.RFC9309)
        else:
            path_of = self._path_of

            def check(url: str) -> bool:
                return always and _is_robots_txt(path_of(url))

        if large:
            yield
        compiled = _Compiled(index, packed(rules), bytes(allow), denied_by, self._path_of, always,
                             check)
        if large:
            yield
        # its rules: a part of the file's flat table or packing, else (merged groups apart
        # in the file) a packing of their own or a tuple of their own, a tuple a rule (their
        # items the file's)
        rules_bytes = sys.getsizeof(compiled.rules)
        parts = (Packed, FlatRules)
        store = compiled.rules.store if isinstance(compiled.rules, parts) else None
        if store is None and compiled.rules:  # its rows: (allow, line, value), one size
            rules_bytes += len(compiled.rules) * sys.getsizeof(compiled.rules[0])
        elif all(not isinstance(g.raw_rules, parts) or g.raw_rules.store is not store
                 for g in groups):
            rules_bytes += held_bytes(store)
        held = (sys.getsizeof(compiled) + index.held_bytes() + rules_bytes
                + 2 * sys.getsizeof(compiled.allow))
        return compiled, held, (index,)


def _parsed_held(body: ParsedBody) -> int:
    """:func:`held_bytes` of ``body`` (its groups' table, rules, fields and issues:
    thousands of items in a file that packs none, or in an HTML page) counted a column at a
    time."""
    size = sys.getsizeof
    issues = body.issue_items  # flat: ints and strings, the codes shared
    total = size(body) + size(issues) + distinct_bytes(filter(None, issues))
    for numbers in (body.group_lines, body.rule_ends, body.field_ends):
        total += size(numbers) + distinct_bytes(numbers)
    # the agents' tuples (groups naming the same agents share one) and their strings
    agents = body.group_agents
    total += size(agents) + distinct_bytes(agents) + distinct_bytes(chain.from_iterable(agents))
    others: list[object] = [body.sitemaps, body.global_blocks, body.version, body.markup_lines,
                            body.group_extras]
    rules = body.rule_items
    total += size(rules)
    if isinstance(rules, Packed):
        others.append(rules.store)
    else:  # flat, three items a rule: the line numbers and the values (the verdicts shared)
        total += distinct_bytes(filter(None, rules[1::3])) + distinct_bytes(
            filter(None, rules[2::3]))
    rows: list[Sequence[Directive]] = [body.global_directives]
    fields = body.field_items
    total += size(body.global_directives) + size(fields)
    if isinstance(fields, Packed):
        others.append(fields.store)
    else:
        rows.append(fields)
    total += rows_bytes(tuple(chain.from_iterable(rows)))
    return total + held_bytes(*others)


def _walk(blocks: Iterable[Block]) -> Iterator[Block]:
    for block in blocks:
        yield block
        yield from _walk(block.blocks)


def _agent_fields(directives: Sequence[Directive]) -> list[Directive]:
    """``directives`` but the AI-usage rules, which apply per path, not per agent (see
    :mod:`polite.core.robots.usage`): a file may hold thousands, packed, read only there."""
    if isinstance(directives, Directives):
        return [directives[i] for i in directives.positions(_USAGE_KEYS, named=False)]
    return [d for d in directives if d.key not in _USAGE_KEYS]


def _assemble(layers: list[Sequence[Directive]], group_line: int | None) -> AgentRules:
    """Fold directive layers (outermost first) into typed fields; inner layers override."""
    scalars: dict[str, object] = {}
    lists: dict[str, list[object]] = {}
    extensions: list[Directive] = []
    delay_lines: dict[str, tuple[str, int, bool]] = {}
    for depth, layer in enumerate(layers):
        seen: set[str] = set()
        for d in layer:
            key = d.key
            if key in ("crawl-delay", "ip-delay", "request-rate", "ip-rate"):
                if key not in seen:  # within one layer the first wins; inner layers override
                    scalars[key] = d.value
                    seen.add(key)
                    # layers past the first two (the file's global fields, the group's)
                    # are brace blocks covering the path
                    delay_lines[key] = (key, d.line, depth > 1)
                if key == "request-rate":
                    lists.setdefault("request-rates", []).append(d.value)
            elif key in ("visit-time", "time-forbidden", "cookie", "mirror-site", "index-page",
                         "clean-param"):
                lists.setdefault(key, []).append(d.value)
            elif key in ("language", "encoding", "charset") and isinstance(d.value, tuple):
                lists.setdefault(key, []).extend(d.value)
            elif key.startswith("change-"):
                lists.setdefault("change", []).append(key.removeprefix("change-"))
                lists.setdefault("change-path", []).append(d.text)
            else:
                extensions.append(d)

    def many(key: str) -> tuple[object, ...]:
        return tuple(lists.get(key, ()))

    return AgentRules(
        crawl_delay_s=_float_or_none(scalars.get("crawl-delay")),
        request_rate=_rate_or_none(scalars.get("request-rate")),
        request_rates=tuple(r for r in many("request-rates") if isinstance(r, RequestRate)),
        ip_delay_s=_float_or_none(scalars.get("ip-delay")),
        ip_rate=_rate_or_none(scalars.get("ip-rate")),
        visit_time=_windows(many("visit-time")),
        time_forbidden=_windows(many("time-forbidden")),
        language=tuple(str(x) for x in many("language")),
        encoding=tuple(str(x) for x in many("encoding")),
        charset=tuple(str(x) for x in many("charset")),
        cookies=tuple(str(x) for x in many("cookie")),
        mirror_sites=tuple(str(x) for x in many("mirror-site")),
        index_pages=tuple(str(x) for x in many("index-page")),
        change_frequency=tuple(zip(map(str, many("change")), map(str, many("change-path")),
                                   strict=True)),
        clean_params=tuple(c for c in many("clean-param") if isinstance(c, CleanParam)),
        extensions=tuple(extensions),
        group_line=group_line,
        delay_lines=tuple(delay_lines.values()),
    )


def _float_or_none(value: object) -> float | None:
    return value if isinstance(value, float) else None


def _rate_or_none(value: object) -> RequestRate | None:
    return value if isinstance(value, RequestRate) else None


def _windows(values: Iterable[object]) -> tuple[TimeWindow, ...]:
    return tuple(v for v in values if isinstance(v, DailyWindow | TimeRange))

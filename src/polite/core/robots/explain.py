"""What one robots.txt means to each crawler: a matrix of URL x agent x dialect, each cell
with its verdict, the group chosen and why, the deciding rule and its line, the rule that lost
and the tie-break that settled it.

The verdict of every cell is the engine's own (:meth:`RobotsTxt.decide`); this module adds the
reasons around it: it re-matches each rule of the chosen groups on its own to find every rule
that matched, ranks them the dialect's way (longest match with Allow winning a tie in RFC 9309
and Google's parser, the first matching line in the 1996 draft, the last in REGP) and names
the best rule of the other verdict as the one that lost. Seed 003 section 3.1 (the bmj.org
matrix) is the worked example; seed 002 gives the 1996 draft's rules.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from polite.core.robots.matcher import wildcard_regex
from polite.core.robots.model import DecidedBy, Dialect, Group, Rule
from polite.core.robots.parser import MAX_ROBOTS_BYTES, detect_dialect, parse_body, pattern_path
from polite.core.robots.robotstxt import RobotsTxt, agent_matches, product_token, request_path
from polite.core.urls import to_octets

__all__ = [
    "AgentMatch",
    "Cell",
    "Explanation",
    "GroupChoice",
    "TieBreak",
    "default_dialects",
    "explain",
    "explain_body",
]

_GOOGLE_TOKEN = re.compile(r"[A-Za-z_-]*")


class AgentMatch(enum.StrEnum):
    """How the chosen group was found for an agent."""

    TOKEN = "token"  # a User-agent value equal to the agent's product token (RFC 9309, Google)
    NAME = "name"  # the value is the robot's name (1996 draft, REGP)
    SUBSTRING = "substring"  # the value is a case-insensitive substring of the name
    STAR = "*"  # no group names the agent: the User-agent: * group(s)
    IP = "ip"  # REGP: a target of Ip-allow / Ip-disallow lines only, read as "*"
    NONE = "none"  # no group applies: everything is allowed


class TieBreak(enum.StrEnum):
    """Why the deciding rule won (or why there was none)."""

    NO_GROUP = "no group applies"
    NO_MATCH = "no rule matches"
    ONLY = "the only matching rule"
    LONGEST = "longest match"
    ALLOW_WINS_TIE = "Allow wins a tie"
    FIRST = "first match"
    LAST = "last match"
    ROBOTS_TXT = "/robots.txt is always allowed"
    IP = "egress IP refused"


@dataclass(frozen=True, slots=True)
class GroupChoice:
    """The groups whose rules apply to one agent in one dialect, and why.

    ``lines`` are the chosen groups' first lines (several when groups were merged);
    ``values`` the User-agent values that matched, as written; ``ignored`` the lines of
    groups that also name the agent but that the dialect passes over (the 1996 draft and REGP
    take the first one only); ``text`` says it all in one phrase.
    """

    how: AgentMatch
    lines: tuple[int, ...] = ()
    values: tuple[str, ...] = ()
    merged: bool = False
    ignored: tuple[int, ...] = ()
    text: str = ""


@dataclass(frozen=True, slots=True)
class Cell:
    """One URL for one agent in one dialect.

    ``path`` is the URL's path as the dialect compares it (escapes decoded or not);
    ``rule`` decided (``None``: no rule matched, or ``/robots.txt``, or an IP rule: see
    ``reason``); ``loser`` is the best matching rule of the other verdict; ``matched`` every
    rule of the chosen groups that matched, in line order; ``disagrees`` is true when the
    dialects of the explanation answer this URL and agent differently.
    """

    url: str
    agent: str
    dialect: Dialect
    allowed: bool
    path: str
    group: GroupChoice
    rule: Rule | None
    loser: Rule | None
    tie_break: TieBreak
    matched: tuple[Rule, ...]
    reason: str
    disagrees: bool = False

    @property
    def line(self) -> int | None:
        """The deciding rule's line (``None`` when no rule decided; 0 is REGP's implicit
        first rule)."""
        return self.rule.line if self.rule is not None else None

    def as_json(self) -> dict[str, object]:
        def rule(r: Rule | None) -> dict[str, object] | None:
            return None if r is None else {"rule": str(r), "line": r.line}

        return {
            "url": self.url, "agent": self.agent, "dialect": self.dialect.value,
            "allowed": self.allowed, "path": self.path,
            "group": {"how": self.group.how.value, "lines": list(self.group.lines),
                      "values": list(self.group.values), "merged": self.group.merged,
                      "ignored": list(self.group.ignored), "text": self.group.text},
            "rule": rule(self.rule), "loser": rule(self.loser),
            "tie_break": self.tie_break.value,
            "matched": [rule(r) for r in self.matched], "reason": self.reason,
            "disagrees": self.disagrees,
        }


@dataclass(frozen=True, slots=True)
class Explanation:
    """The matrix: every (url, agent, dialect) cell, URL-major, then agent, then dialect."""

    urls: tuple[str, ...]
    agents: tuple[str, ...]
    dialects: tuple[Dialect, ...]
    cells: tuple[Cell, ...]

    def cell(self, url: str, agent: str, dialect: Dialect | str) -> Cell:
        """The cell for one URL, agent and dialect; ``KeyError`` when it is not in the matrix."""
        dialect = Dialect(dialect)
        for cell in self.cells:
            if cell.url == url and cell.agent == agent and cell.dialect is dialect:
                return cell
        raise KeyError((url, agent, dialect.value))

    def row(self, url: str, agent: str) -> tuple[Cell, ...]:
        """The cells of one URL and agent, one per dialect, in the matrix's dialect order."""
        return tuple(c for c in self.cells if c.url == url and c.agent == agent)

    @property
    def disagreements(self) -> tuple[tuple[str, str], ...]:
        """The (url, agent) pairs the dialects answer differently, in matrix order."""
        return tuple(dict.fromkeys((c.url, c.agent) for c in self.cells if c.disagrees))

    def as_json(self) -> dict[str, object]:
        return {"urls": list(self.urls), "agents": list(self.agents),
                "dialects": [d.value for d in self.dialects],
                "cells": [c.as_json() for c in self.cells],
                "disagreements": [{"url": u, "agent": a} for u, a in self.disagreements]}


def default_dialects(body: bytes | str) -> tuple[Dialect, ...]:
    """The dialects a file is explained in: RFC 9309, Google's and the 1996 draft's, and
    REGP when the file declares itself REGP (``Robot-version: 3.0`` or higher)."""
    if isinstance(body, bytes):
        body = body[:MAX_ROBOTS_BYTES].decode("latin-1")
    dialects = (Dialect.RFC9309, Dialect.GOOGLE, Dialect.KOSTER1996)
    return (*dialects, Dialect.REGP) if detect_dialect(body) is Dialect.REGP else dialects


def explain_body(body: bytes | str, agents: Sequence[str], urls: Sequence[str],
                 dialects: Iterable[Dialect | str] | None = None, *, url: str | None = None,
                 ip: str | None = None, max_bytes: int = MAX_ROBOTS_BYTES) -> Explanation:
    """Parse ``body`` once per dialect (by default :func:`default_dialects`) and explain it:
    see :func:`explain`. ``url`` is the file's own URL (for relative Sitemap lines)."""
    chosen = default_dialects(body) if dialects is None else tuple(map(Dialect, dialects))
    files = [RobotsTxt(parse_body(body, d, url=url, max_bytes=max_bytes)) for d in chosen]
    return explain(files, agents, urls, ip=ip)


def explain(files: Sequence[RobotsTxt], agents: Sequence[str], urls: Sequence[str], *,
            ip: str | None = None) -> Explanation:
    """The matrix of ``urls`` x ``agents`` x the dialects of ``files`` (one parsed file per
    dialect, as :func:`polite.robots.parse` reads it). ``urls`` may be full URLs or paths
    (``/a/b?q``); ``ip`` is the egress address for REGP's Ip-allow / Ip-disallow."""
    cells: list[Cell] = []
    for target in urls:
        for agent in agents:
            row = [_cell(robots, target, agent, ip) for robots in files]
            split = len({cell.allowed for cell in row}) > 1
            cells.extend(_with_disagreement(c) for c in row) if split else cells.extend(row)
    return Explanation(tuple(urls), tuple(agents), tuple(f.dialect for f in files), tuple(cells))


def _with_disagreement(cell: Cell) -> Cell:
    return Cell(cell.url, cell.agent, cell.dialect, cell.allowed, cell.path, cell.group,
                cell.rule, cell.loser, cell.tie_break, cell.matched, cell.reason, True)


# -- one cell ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Candidate:
    rule: Rule
    allowed: bool  # the verdict it gives (the 1996 draft's empty Disallow allows)
    rank: int  # higher wins, the dialect's way
    length: int  # the matched pattern's length, in the form the dialect compares


def _cell(robots: RobotsTxt, url: str, agent: str, ip: str | None) -> Cell:
    dialect = robots.dialect
    decision = robots.decide(url, agent, ip=ip)
    path = request_path(dialect, url)
    group = _group_choice(robots, agent)
    candidates = _candidates(dialect, robots.rules_for(agent, ip=ip, implicit=True), path)
    matched = tuple(sorted({c.rule: None for c in candidates}, key=lambda r: r.line))
    if decision.rule is None:
        if group.how is AgentMatch.NONE:
            tie = TieBreak.NO_GROUP
        elif decision.by is DecidedBy.EGRESS_IP:
            tie = TieBreak.IP
        elif decision.by is DecidedBy.ROBOTS_TXT:
            tie = TieBreak.ROBOTS_TXT
        else:
            tie = TieBreak.NO_MATCH
        if tie is TieBreak.ROBOTS_TXT or tie is TieBreak.IP:
            # Something above the path rules decided; the best of those lost to it.
            best = max(candidates, key=lambda c: c.rank, default=None)
            loser = best.rule if best is not None and best.allowed != decision.allowed else None
        else:
            loser = None
        return Cell(url, agent, dialect, decision.allowed, _shown_path(path), group, None,
                    loser, tie, matched, decision.reason)
    winner = _winner(candidates, decision.rule)
    others = [c for c in candidates if c is not winner and c.rule != decision.rule]
    opposed = [c for c in others if c.allowed != decision.allowed]
    loser_candidate = max(opposed, key=lambda c: c.rank, default=None)
    rival = loser_candidate or max(others, key=lambda c: c.rank, default=None)
    tie = _tie_break(dialect, winner, rival)
    return Cell(url, agent, dialect, decision.allowed, _shown_path(path), group,
                decision.rule, loser_candidate.rule if loser_candidate else None, tie, matched,
                decision.reason)


def _shown_path(octets: str) -> str:
    """A compared path as text: its octets read as UTF-8 (the 1996 draft decodes escapes
    to octets), percent-encoded where they are not UTF-8; never one character per byte."""
    if octets.isascii():
        return octets
    try:
        return octets.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        return "".join(f"%{ord(c):02X}" if ord(c) > 0x7F else c for c in octets)


def _winner(candidates: Sequence[_Candidate], rule: Rule) -> _Candidate | None:
    """The candidate entry that stands for the engine's deciding rule (its best-ranked one:
    Google's ``index.html`` rule may match twice)."""
    mine = [c for c in candidates if c.rule == rule]
    return max(mine, key=lambda c: c.rank, default=None)


def _tie_break(dialect: Dialect, winner: _Candidate | None, rival: _Candidate | None
               ) -> TieBreak:
    if rival is None:
        return TieBreak.ONLY
    if dialect is Dialect.KOSTER1996:
        return TieBreak.FIRST
    if dialect is Dialect.REGP:
        return TieBreak.LAST
    if winner is not None and winner.length == rival.length and winner.allowed:
        return TieBreak.ALLOW_WINS_TIE
    return TieBreak.LONGEST


def _candidates(dialect: Dialect, rules: Iterable[Rule], path: str) -> list[_Candidate]:
    """Every rule that matches ``path``, ranked as the dialect ranks them (see
    :mod:`polite.core.robots.matcher`)."""
    found: list[_Candidate] = []
    for rule in rules:
        pattern = pattern_path(dialect, to_octets(rule.pattern))
        if dialect is Dialect.KOSTER1996:
            # Prefix match, "*" and "$" plain text; an empty value matches every path and
            # allows, whatever its field (seed 002: "Disallow:" allows everything).
            if path.startswith(pattern):
                found.append(_Candidate(rule, rule.allow or not pattern, -rule.line,
                                        len(pattern)))
            continue
        if not pattern:
            continue  # an empty Allow/Disallow matches nothing (RFC 9309 2.2.2)
        if re.match(wildcard_regex(pattern), path, re.DOTALL):
            rank = rule.line if dialect is Dialect.REGP else 2 * len(pattern) + rule.allow
            found.append(_Candidate(rule, rule.allow, rank, len(pattern)))
        elif dialect is Dialect.GOOGLE and rule.allow:
            # Google's parser: "Allow: /x/index.html" also allows "/x/" (robots.cc).
            slash = pattern.rfind("/")
            if slash >= 0 and pattern.startswith("/index.htm", slash) \
                    and path == pattern[: slash + 1]:
                short = slash + 2  # the "/x/" with its "$"
                found.append(_Candidate(rule, True, 2 * short + 1, short))
    return found


# -- group choice -----------------------------------------------------------------------


def _group_choice(robots: RobotsTxt, agent: str) -> GroupChoice:
    dialect = robots.dialect
    chosen = robots.groups_for(agent)
    if not chosen:
        return GroupChoice(AgentMatch.NONE, text=f"no group names {agent!r} and there is no "
                           "User-agent: * group, so everything is allowed")
    values: list[str] = []
    specific = False
    for group in chosen:
        for value in group.agents:
            star, names = agent_matches(dialect, value, agent)
            if names:
                specific = True
            if star or names:
                values.append(value)
    if specific:
        values = [v for g in chosen for v in g.agents if agent_matches(dialect, v, agent)[1]]
        how = _how_named(dialect, values, agent)
    elif values:
        how = AgentMatch.STAR
    else:
        how = AgentMatch.IP
    lines = tuple(g.line for g in chosen)
    ignored = _ignored(robots, agent, chosen, specific)
    return GroupChoice(how, lines, tuple(values), len(chosen) > 1, ignored,
                       _choice_text(dialect, how, chosen, values, agent, ignored,
                                    robots.groups))


def _how_named(dialect: Dialect, values: Sequence[str], agent: str) -> AgentMatch:
    if dialect in (Dialect.RFC9309, Dialect.GOOGLE):
        return AgentMatch.TOKEN
    name = agent.strip().lower()
    if any(v.strip().lower() in (name, product_token(name)) for v in values):
        return AgentMatch.NAME
    return AgentMatch.SUBSTRING


def _ignored(robots: RobotsTxt, agent: str, chosen: Sequence[Group], specific: bool
             ) -> tuple[int, ...]:
    """Groups that name the agent (or are ``*`` when the choice was ``*``) but were passed
    over: only the 1996 draft and REGP pass any over."""
    if robots.dialect not in (Dialect.KOSTER1996, Dialect.REGP):
        return ()
    taken = {g.line for g in chosen}
    out = []
    for group in robots.groups:
        if group.line in taken:
            continue
        answers = [agent_matches(robots.dialect, v, agent) for v in group.agents]
        if any(names for _, names in answers) or (
                not specific and any(star for star, _ in answers)):
            out.append(group.line)
    return tuple(out)


def _choice_text(dialect: Dialect, how: AgentMatch, chosen: Sequence[Group],
                 values: Sequence[str], agent: str, ignored: Sequence[int],
                 groups: Sequence[Group]) -> str:
    where = ", ".join(str(g.line) for g in chosen)
    lines = f"line{'s' if len(chosen) > 1 else ''} {where}"
    shown = ", ".join(f"User-agent: {v.strip()}" for v in dict.fromkeys(values))
    if how is AgentMatch.STAR:
        text = f"{shown} ({lines}): no group names {agent!r}"
        if dialect is Dialect.GOOGLE:
            text += _google_cut_note(groups, agent)
    elif how is AgentMatch.IP:
        text = f"an Ip-allow / Ip-disallow target ({lines}), read as User-agent: *"
    elif how is AgentMatch.TOKEN:
        # Google's parser compares the agent as given; RFC 9309 its product token.
        token = agent if dialect is Dialect.GOOGLE else product_token(agent)
        read = [v for v in values if _token_of(dialect, v) != v.strip()]
        text = f"{shown} ({lines}) names the product token {token!r}"
        if read:
            text += "; " + ", ".join(f"{v.strip()!r} read as {_token_of(dialect, v)!r}"
                                     for v in dict.fromkeys(read))
    elif how is AgentMatch.NAME:
        text = f"{shown} ({lines}) names {agent!r}"
    else:
        text = f"{shown} ({lines}): a substring of {agent!r}"
    if len(chosen) > 1:
        text += f"; {len(chosen)} groups merged"
    if ignored:
        which = "target" if dialect is Dialect.REGP else "record"
        text += (f"; the first matching {which}, the one{'s' if len(ignored) > 1 else ''} at "
                 f"line{'s' if len(ignored) > 1 else ''} {', '.join(map(str, ignored))} "
                 "passed over")
    return text


def _google_cut_note(groups: Sequence[Group], agent: str) -> str:
    """Google's parser keeps a User-agent value only up to its first character outside
    ``[A-Za-z_-]`` (robots.cc): ``robot1`` is read as ``robot`` and names no ``robot1``.
    Say so when a value as written would have named the agent."""
    cut = [(g.line, v.strip()) for g in groups for v in g.agents
           if v.strip().lower() == agent.strip().lower()
           and _token_of(Dialect.GOOGLE, v) != v.strip()]
    return "".join(f"; User-agent: {v} (line {line}) is read as "
                   f"{_token_of(Dialect.GOOGLE, v)!r} by Google's parser" for line, v in cut)


def _token_of(dialect: Dialect, value: str) -> str:
    if dialect is Dialect.GOOGLE:
        return _GOOGLE_TOKEN.match(value.strip()).group()  # type: ignore[union-attr]
    return product_token(value)

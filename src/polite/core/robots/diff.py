"""What changes between two versions of a robots.txt: which URLs change verdict, for which
agents, and by which lines.

The URLs are the caller's, or else samples made from the paths the two files' rules name
(:func:`sample_paths`): each pattern's literal text, with every ``*`` read once as nothing and
once as ``x``, a child below each path ending in ``/``, and ``/``. The agents are the caller's,
or else every product token either file names plus one crawler neither names (the ``*``
groups' reader).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from polite.core.robots.model import Decision, Dialect, Rule
from polite.core.robots.parser import MAX_ROBOTS_BYTES, parse_body
from polite.core.robots.robotstxt import RobotsTxt, product_token
from polite.core.robots.usage_tools import UsageChange, diff_usage, usage_paths

__all__ = [
    "UNNAMED_AGENT",
    "Change",
    "RobotsDiff",
    "diff",
    "diff_bodies",
    "named_agents",
    "sample_paths",
]

# The crawler that neither file names: it reads the "*" groups.
UNNAMED_AGENT = "AnyOtherBot"


@dataclass(frozen=True, slots=True)
class Change:
    """One URL whose verdict changed for one agent: the rule (and line) that decided before
    and after (``None``: no rule matched, or see the reasons)."""

    url: str
    agent: str
    was_allowed: bool
    allowed: bool
    old_rule: Rule | None
    new_rule: Rule | None
    old_reason: str
    new_reason: str

    @property
    def opened(self) -> bool:
        """Whether the change lets the agent in (else it shuts it out)."""
        return self.allowed and not self.was_allowed

    def as_json(self) -> dict[str, object]:
        def rule(r: Rule | None) -> dict[str, object] | None:
            return None if r is None else {"rule": str(r), "line": r.line}

        return {"url": self.url, "agent": self.agent, "was_allowed": self.was_allowed,
                "allowed": self.allowed, "old": rule(self.old_rule), "new": rule(self.new_rule),
                "old_reason": self.old_reason, "new_reason": self.new_reason}


@dataclass(frozen=True, slots=True)
class RobotsDiff:
    """Every verdict change of ``urls`` x ``agents`` in one dialect; ``sampled`` says the
    URLs were made from the rules (see the module docstring); ``removed`` and ``added`` are
    the lines that differ, as ``(line, text)`` in the old and the new file."""

    dialect: Dialect
    urls: tuple[str, ...]
    agents: tuple[str, ...]
    changes: tuple[Change, ...]
    sampled: bool
    removed: tuple[tuple[int, str], ...] = ()
    added: tuple[tuple[int, str], ...] = ()
    # AI-usage preferences that change (Content-Usage, Content-Signal), per purpose.
    usage_changes: tuple[UsageChange, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {"dialect": self.dialect.value, "urls": list(self.urls),
                "agents": list(self.agents), "sampled": self.sampled,
                "removed": [{"line": n, "text": t} for n, t in self.removed],
                "added": [{"line": n, "text": t} for n, t in self.added],
                "changes": [c.as_json() for c in self.changes],
                "usage_changes": [c.as_json() for c in self.usage_changes]}


def diff_bodies(old: bytes | str, new: bytes | str, *, urls: Sequence[str] | None = None,
                agents: Sequence[str] | None = None, dialect: Dialect | None = None,
                max_bytes: int = MAX_ROBOTS_BYTES) -> RobotsDiff:
    """Parse both bodies in ``dialect`` (``None``: each file's own, REGP or RFC 9309, the new
    file's named) and :func:`diff` them, with the changed lines of the text."""
    if dialect is None:
        new_file = RobotsTxt(parse_body(new, None, max_bytes=max_bytes))
        dialect = new_file.dialect
    else:
        new_file = RobotsTxt(parse_body(new, dialect, max_bytes=max_bytes))
    old_file = RobotsTxt(parse_body(old, dialect, max_bytes=max_bytes))
    found = diff(old_file, new_file, urls=urls, agents=agents)
    removed, added = _changed_lines(_lines(old), _lines(new))
    return RobotsDiff(found.dialect, found.urls, found.agents, found.changes, found.sampled,
                      removed, added, found.usage_changes)


def diff(old: RobotsTxt, new: RobotsTxt, *, urls: Sequence[str] | None = None,
         agents: Sequence[str] | None = None) -> RobotsDiff:
    """The URLs whose verdict differs between ``old`` and ``new`` for each agent (both read
    in ``new``'s dialect's sense, as parsed). Without ``urls``, :func:`sample_paths` of both;
    without ``agents``, :func:`named_agents` of both."""
    sampled = urls is None
    chosen_urls = tuple(sample_paths(old, new)) if urls is None else tuple(urls)
    chosen_agents = tuple(named_agents(old, new)) if agents is None else tuple(agents)
    changes: list[Change] = []
    for agent in chosen_agents:
        for url in chosen_urls:
            before, after = old.decide(url, agent), new.decide(url, agent)
            if before.allowed != after.allowed:
                changes.append(_change(url, agent, before, after))
    usage = diff_usage(old, new, chosen_urls, chosen_agents)
    return RobotsDiff(new.dialect, chosen_urls, chosen_agents, tuple(changes), sampled,
                      usage_changes=tuple(usage))


def _change(url: str, agent: str, before: Decision, after: Decision) -> Change:
    return Change(url, agent, before.allowed, after.allowed, before.rule, after.rule,
                  before.reason, after.reason)


def named_agents(*files: RobotsTxt) -> list[str]:
    """Every product token the files' User-agent lines name, in order of first mention, and
    :data:`UNNAMED_AGENT` last (it reads the ``*`` groups)."""
    names: dict[str, None] = {}
    for robots in files:
        for group in robots.groups:
            for value in group.agents:
                token = product_token(value)
                if token and token != "*" and token.lower() not in (n.lower() for n in names):
                    names[token] = None
    return [*names, UNNAMED_AGENT]


def sample_paths(*files: RobotsTxt) -> list[str]:
    """Paths that probe every rule of the files (see the module docstring), sorted."""
    paths: set[str] = {"/"}
    for robots in files:
        for group in robots.groups:
            for rule in group.rules:
                paths.update(_samples(rule.pattern))
        paths |= usage_paths(robots)
    return sorted(paths)


def _samples(pattern: str) -> Iterable[str]:
    pattern = pattern.strip()
    if not pattern:
        return ()
    if pattern.endswith("$"):
        pattern = pattern[:-1]
    out = {pattern.replace("*", ""), pattern.replace("*", "x")}
    out |= {p + "sample" for p in out if p.endswith("/")}
    return (p if p.startswith("/") else "/" + p for p in out if p)


def _lines(body: bytes | str) -> list[str]:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _changed_lines(old: list[str], new: list[str]
                   ) -> tuple[tuple[tuple[int, str], ...], tuple[tuple[int, str], ...]]:
    removed: list[tuple[int, str]] = []
    added: list[tuple[int, str]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed.extend((n + 1, old[n]) for n in range(i1, i2))
        if tag in ("replace", "insert"):
            added.extend((n + 1, new[n]) for n in range(j1, j2))
    return tuple(removed), tuple(added)

"""What a robots.txt file says about AI use: which preference mechanisms it uses
(Content-Usage, Content-Signal, License), which purposes it allows or disallows through
them, and which AI crawlers it names and shuts out entirely."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from polite.core.robots.robotstxt import RobotsTxt
from polite.core.robots.usage import robots_rules, rsl_licenses
from polite.core.survey.access import Access, agent_access
from polite.core.usage.statement import Pref
from polite.core.usage.vocab import AIPREF_REVISIONS, CONTENT_SIGNALS, CURRENT, MAIN_PURPOSES

__all__ = ["MECHANISMS", "UsageCounts", "UsageStats", "count_usage", "usage_stats"]

MECHANISMS = ("content-usage", "content-signal", "license")


@dataclass(frozen=True, slots=True)
class UsageStats:
    """One file: the mechanisms it uses (in a group, or for License anywhere), each
    (mechanism, purpose, preference) some line of it states, and of ``crawlers`` (robots.txt
    tokens) those it names and those denied ``/``."""

    mechanisms: frozenset[str]
    stated: frozenset[tuple[str, str, str]]
    named: frozenset[str]
    blocked: frozenset[str]


def usage_stats(robots: RobotsTxt, crawlers: Sequence[str]) -> UsageStats:
    mechanisms: set[str] = set()
    stated: set[tuple[str, str, str]] = set()
    if rsl_licenses(robots)[0]:  # a link the engine keeps, not one it reports and ignores
        mechanisms.add("license")
    for group in robots.groups:
        for directive, rule in robots_rules(group.directives):
            mechanisms.add(directive.key)
            vocab = AIPREF_REVISIONS[CURRENT] if directive.key == "content-usage" \
                else CONTENT_SIGNALS
            for purpose in MAIN_PURPOSES:
                pref = rule.statement.pref(vocab, purpose)
                if pref is not Pref.UNKNOWN:
                    stated.add((directive.key, purpose, pref.value))
    # agent_access indexes the rules once for all the crawlers the file does not name
    access = agent_access(robots, tuple(crawlers))
    named = frozenset(t for t, a in access.items() if a.named)
    blocked = frozenset(t for t, a in access.items() if a.access is Access.ENTIRELY)
    return UsageStats(frozenset(mechanisms), frozenset(stated), named, blocked)


@dataclass(frozen=True, slots=True)
class UsageCounts:
    """Files counted: per mechanism (and ``any``), per stated (mechanism, purpose,
    preference), per crawler named and blocked, and files naming / blocking any."""

    files: int
    mechanisms: Counter[str]
    stated: Counter[tuple[str, str, str]]
    named: Counter[str]
    blocked: Counter[str]
    naming_any: int
    blocking_any: int


def count_usage(stats: Iterable[UsageStats]) -> UsageCounts:
    files = naming = blocking = 0
    mechanisms: Counter[str] = Counter()
    stated: Counter[tuple[str, str, str]] = Counter()
    named: Counter[str] = Counter()
    blocked: Counter[str] = Counter()
    for s in stats:
        files += 1
        mechanisms.update(s.mechanisms)
        if s.mechanisms:
            mechanisms["any"] += 1
        stated.update(s.stated)
        named.update(s.named)
        blocked.update(s.blocked)
        naming += bool(s.named)
        blocking += bool(s.blocked)
    return UsageCounts(files, mechanisms, stated, named, blocked, naming, blocking)

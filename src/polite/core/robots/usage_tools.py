"""The webmaster's view of AI-usage preferences in a robots.txt: per agent and path, the
preferences beside access (explain), what is wrong with the lines (lint), and what changed
between two versions (diff)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from polite.core.robots.model import Directive, Group, ParseIssue, Severity
from polite.core.robots.robotstxt import RobotsTxt, product_token
from polite.core.robots.usage import (
    Preferences,
    from_robots,
    robots_rules,
    states_preferences,
)
from polite.core.usage.statement import Pref, RuleValue
from polite.core.usage.vocab import (
    AIPREF_REVISIONS,
    CONTENT_SIGNALS,
    CURRENT,
    PURPOSES,
    Vocabulary,
)

__all__ = [
    "LINT_AGENT",
    "UsageChange",
    "UsageRow",
    "diff_usage",
    "explain_usage",
    "lint_usage",
    "usage_paths",
]

# The agent a "*" group is checked as: a crawler that no group names.
LINT_AGENT = "AnyOtherBot"


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One URL for one agent: may it be fetched, and the preferences that then apply."""

    url: str
    agent: str
    allowed: bool
    prefs: Preferences

    def as_json(self, purposes: Sequence[str]) -> dict[str, object]:
        return {"url": self.url, "agent": self.agent, "allowed": self.allowed,
                "purposes": {p: {"pref": self.prefs.pref(p).value,
                                 "reason": self.prefs.answer(p).reason} for p in purposes},
                **self.prefs.to_json()}


def explain_usage(robots: RobotsTxt, urls: Sequence[str], agents: Sequence[str], *,
                  revision: str = CURRENT) -> list[UsageRow]:
    return [UsageRow(url, agent, robots.allowed(url, agent),
                     from_robots(robots, url, agent, revision=revision))
            for url in urls for agent in agents]


@dataclass(frozen=True, slots=True)
class UsageChange:
    """One purpose whose preference changed for one URL and agent."""

    url: str
    agent: str
    purpose: str
    before: Pref
    after: Pref
    old_reason: str
    new_reason: str

    def as_json(self) -> dict[str, object]:
        return {"url": self.url, "agent": self.agent, "purpose": self.purpose,
                "before": self.before.value, "after": self.after.value,
                "old_reason": self.old_reason, "new_reason": self.new_reason}


def diff_usage(old: RobotsTxt, new: RobotsTxt, urls: Sequence[str], agents: Sequence[str],
               *, revision: str = CURRENT) -> list[UsageChange]:
    changes: list[UsageChange] = []
    if not (states_preferences(old) or states_preferences(new)):
        return changes  # nothing to compare: a file that states none answers none
    for agent in agents:
        for url in urls:
            before = from_robots(old, url, agent, revision=revision)
            after = from_robots(new, url, agent, revision=revision)
            for purpose in PURPOSES:
                a, b = before.answer(purpose), after.answer(purpose)
                if a.pref is not b.pref:
                    changes.append(UsageChange(url, agent, purpose, a.pref, b.pref,
                                               a.reason, b.reason))
    return changes


def usage_paths(robots: RobotsTxt) -> set[str]:
    """Paths that probe each Content-Usage / Content-Signal rule: its literal path and a
    child of it (``*`` read as ``x``, ``$`` dropped)."""
    paths: set[str] = set()
    for group in robots.groups:
        for _, rule in robots_rules(group.directives):
            if rule.path:
                path = rule.path.rstrip("$").replace("*", "x")
                paths.add(path)
                if path.endswith("/"):
                    paths.add(path + "sample")
    return paths


def _issue(line: int, code: str, message: str, severity: Severity = Severity.WARNING
           ) -> ParseIssue:
    return ParseIssue(line, code, message, severity)


def _older_revisions(key: str) -> list[str]:
    return [v.name.rsplit("-", 1)[-1] for v in AIPREF_REVISIONS.values() if key in v.labels]


def _group_agent(group: Group) -> str:
    for value in group.agents:
        token = product_token(value)
        if token and token != "*":
            return token
    return LINT_AGENT


def lint_usage(robots: RobotsTxt, *, revision: str = CURRENT) -> list[ParseIssue]:
    """The checks of the preference lines: unknown vocabulary keys (and the revisions that
    knew them), values that are not the vocabulary's tokens, a rule outside any group, a
    rule whose path the group disallows anyway, and Content-Usage and Content-Signal rules
    of one group and path that disagree."""
    vocab = AIPREF_REVISIONS[revision]
    issues: list[ParseIssue] = []
    for d in robots.global_directives:
        if d.key in ("content-usage", "content-signal"):
            issues.append(_issue(d.line, "usage-outside-group",
                                 f"{d.key} before any User-agent line applies to no crawler",
                                 Severity.ERROR))
    for group in robots.groups:
        rules = robots_rules(group.directives)
        agent = _group_agent(group)
        for d, rule in rules:
            used: Vocabulary = vocab if d.key == "content-usage" else CONTENT_SIGNALS
            for key in rule.statement.unknown_keys(used):
                older = _older_revisions(key) if used is vocab else []
                hint = (f" (it was a label in revision {', '.join(older)})" if older
                        else "; ignored")
                issues.append(_issue(d.line, "usage-unknown-key",
                                     f"{key!r} is not in {used.name}{hint}"))
            for key in rule.statement.odd_values(used):
                issues.append(_issue(d.line, "usage-bad-value",
                                     f"{key!r} is neither {used.allow} nor {used.disallow}: "
                                     "read as no preference"))
            if rule.path and not robots.allowed(rule.path.rstrip("$").replace("*", "x"),
                                                agent):
                issues.append(_issue(d.line, "usage-path-disallowed",
                                     f"{rule.path} is disallowed to this group's crawlers: "
                                     "the preference can never apply", Severity.INFO))
        issues += _conflicts(rules, vocab)
    return issues


def _conflicts(rules: list[tuple[Directive, RuleValue]], vocab: Vocabulary
               ) -> list[ParseIssue]:
    by_path: dict[str, list[tuple[int, str, dict[str, Pref]]]] = {}
    for d, rule in rules:
        used = vocab if d.key == "content-usage" else CONTENT_SIGNALS
        stated = {p: rule.statement.pref(used, p) for p in PURPOSES}
        by_path.setdefault(rule.path, []).append((d.line, d.key, stated))
    issues: list[ParseIssue] = []
    for entries in by_path.values():
        for i, (line_a, key_a, a) in enumerate(entries):
            for line_b, key_b, b in entries[i + 1:]:
                if key_a == key_b:
                    continue
                clash = [p for p in PURPOSES if {a[p], b[p]} == {Pref.ALLOW, Pref.DISALLOW}]
                if clash:
                    issues.append(_issue(
                        line_b, "usage-conflict",
                        f"{key_b} disagrees with {key_a} on line {line_a} about "
                        f"{', '.join(clash)}: the most restrictive (disallow) applies"))
    return issues

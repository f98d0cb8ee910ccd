"""The robots.txt engine: ``from polite.robots import parse``.

>>> robots = parse(b"User-agent: *\\nDisallow: /private\\n")
>>> robots.allowed("https://example.com/private/x", "ExampleBot")
False
"""

from __future__ import annotations

from polite.core.robots import (
    MAX_ROBOTS_BYTES,
    AgentMatch,
    AgentRules,
    Cell,
    Decision,
    Dialect,
    Directive,
    Explanation,
    Group,
    GroupChoice,
    ParseIssue,
    RobotsDirectives,
    RobotsTxt,
    Rule,
    Severity,
    TieBreak,
    default_dialects,
    explain,
    explain_body,
    parse,
    parse_dialect,
    parse_meta_content,
    parse_meta_tags,
    parse_x_robots_tag,
    product_token,
)

__all__ = [
    "MAX_ROBOTS_BYTES",
    "AgentMatch",
    "AgentRules",
    "Cell",
    "Decision",
    "Dialect",
    "Directive",
    "Explanation",
    "Group",
    "GroupChoice",
    "ParseIssue",
    "RobotsDirectives",
    "RobotsTxt",
    "Rule",
    "Severity",
    "TieBreak",
    "default_dialects",
    "explain",
    "explain_body",
    "parse",
    "parse_dialect",
    "parse_meta_content",
    "parse_meta_tags",
    "parse_x_robots_tag",
    "product_token",
]

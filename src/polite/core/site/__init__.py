"""The site's side of robots.txt, pure (seed 003): which robot is this, is it who it claims,
what the robots.txt in force says for this path, and log / refuse / throttle as values."""

from __future__ import annotations

from polite.core.site.crawlers import Category, Crawler, CrawlerList, Identity, parse_crawlers
from polite.core.site.policy import (
    ROBOTS_PATH,
    Action,
    InForce,
    LogEntry,
    SiteDecision,
    Visit,
    decide,
    throttle_key,
)
from polite.core.site.rules import (
    Enforcement,
    Field,
    Problem,
    RenderedFile,
    RuleRow,
    Section,
    SiteRules,
    render,
    rules_from_json,
    rules_to_json,
)
from polite.core.site.verify import (
    NEEDS_DNS,
    Check,
    NeedsDns,
    Verification,
    client_address,
    judge_dns,
    judge_signature,
    verify_by_ranges,
)

__all__ = [
    "NEEDS_DNS",
    "ROBOTS_PATH",
    "Action",
    "Category",
    "Check",
    "Crawler",
    "CrawlerList",
    "Enforcement",
    "Field",
    "Identity",
    "InForce",
    "LogEntry",
    "NeedsDns",
    "Problem",
    "RenderedFile",
    "RuleRow",
    "Section",
    "SiteDecision",
    "SiteRules",
    "Verification",
    "Visit",
    "client_address",
    "decide",
    "judge_dns",
    "judge_signature",
    "parse_crawlers",
    "render",
    "rules_from_json",
    "rules_to_json",
    "throttle_key",
    "verify_by_ranges",
]

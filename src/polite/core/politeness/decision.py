"""May this URL be fetched, and on what terms: one pure decision per URL.

The layer above gathers what it needs (the robots.txt state of the URL's origin, what the
store knows of the host, the clock's ``now``), calls :func:`decide`, and claims the slot of
an :class:`~polite.core.politeness.values.Allowed` from its store, whose answer
:func:`~polite.core.politeness.rules.claimed` turns into the final value. Whether the host
resolves to a private address is a lookup, so it is found out (and refused) above, before
robots.txt is fetched at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from polite.core.politeness.rules import (
    ADAPTIVE_FACTOR,
    DEFAULT_DELAY_S,
    MAX_CRAWL_DELAY_S,
    delays_for,
    earliest_in_windows,
)
from polite.core.politeness.values import (
    Allowed,
    Decision,
    Disallowed,
    RefusalReason,
    Refused,
    WaitSource,
    WaitUntil,
)
from polite.core.robots.lifecycle import DisallowAll, Parsed, RobotsState
from polite.core.robots.model import AgentRules

__all__ = ["NO_FACTS", "HostFacts", "Policy", "decide"]

NO_RULES = AgentRules()  # no robots.txt in force: no fields from the site


class HostFacts(NamedTuple):
    """What the store knows of a host besides its slot: the operator's delay and the running
    average of its response times (seconds; ``None`` when unknown)."""

    configured_delay_s: float | None
    response_time_s: float | None


NO_FACTS = HostFacts(None, None)


@dataclass(frozen=True, slots=True)
class Policy:
    """The operator's side of the spacing (DESIGN.md, "Politeness: when may a request go").

    ``robots_uses_slot``: fetching robots.txt takes the host's slot like any request (off by
    default: the file is the site's own instructions; the REGP crawler turns it on, for
    Ge & Ding 2016's Table 10 counts every request at the site)."""

    default_delay_s: float = DEFAULT_DELAY_S
    max_crawl_delay_s: float = MAX_CRAWL_DELAY_S
    adaptive_factor: float = ADAPTIVE_FACTOR  # x the host's response time; 0: off
    robots_uses_slot: bool = False


def decide(url: str, robots: RobotsState, facts: HostFacts, policy: Policy, now: float, *,
           agent: str, ip: str | None = None, obey_rules: bool = True) -> Decision:
    """The decision for ``url`` asked by ``agent`` (from egress ``ip``) at ``now``: refused
    while its robots.txt is unavailable, disallowed by its rules, held until a Visit-time
    window opens, else allowed to claim the host's slot at the spacing worked out.

    Example: ``User-agent: *`` / ``Disallow: /private/`` and ``http://e.com/private/a`` ->
    ``Disallowed(Rule(False, "/private/", 2), 2, Dialect.RFC9309, ...)``.

    ``obey_rules`` off: neither the file's rules nor its being unavailable refuse the URL
    (a person's own request, which robots.txt does not govern); its delays and Visit-time
    still space it.
    """
    rules = NO_RULES
    if isinstance(robots, Parsed):
        body = robots.robots
        if obey_rules and not body.allowed(url, agent, ip=ip):
            # The fast match says only yes or no; a refusal is matched again for its rule.
            found = body.decide(url, agent, ip=ip)
            return Disallowed(found.rule, found.line, body.dialect, found.reason)
        rules = body.agent_rules(agent, ip=ip, url=url)
    elif isinstance(robots, DisallowAll) and obey_rules:
        return Refused(RefusalReason.ROBOTS_UNAVAILABLE, robots.reason, robots.retry_at)
    delays = delays_for(rules, configured_s=facts[0], default_s=policy.default_delay_s,
                        max_crawl_delay_s=policy.max_crawl_delay_s,
                        response_time_s=facts[1], adaptive_factor=policy.adaptive_factor)
    if delays.windows or delays.forbidden:
        opens = earliest_in_windows(now, delays.windows, delays.forbidden)
        if opens is None:
            return Refused(RefusalReason.NO_VISIT_TIME)
        if opens > now:
            return WaitUntil(opens, WaitSource.VISIT_TIME, interval_s=delays.interval_s)
    return Allowed(delays.interval_s, delays)

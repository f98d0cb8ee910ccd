"""One URL's decision, a table of robots.txt states, host facts and ``now``: the values that
every surface renders, with the rule, line and source that made them."""

from __future__ import annotations

import pytest

from polite.core.politeness import (
    NO_FACTS,
    Allowed,
    Decision,
    Delays,
    Disallowed,
    HostClaim,
    HostFacts,
    Policy,
    RefusalReason,
    Refused,
    WaitSource,
    WaitUntil,
    claimed,
    decide,
)
from polite.core.robots.lifecycle import AllowAll, DisallowAll, Parsed, RobotsState
from polite.core.robots.model import Dialect, Rule
from polite.robots import parse

DAY = 86_400.0
MIDNIGHT = 1_700_006_400.0 - (1_700_006_400.0 % DAY)
NOON = MIDNIGHT + 12 * 3600
POLICY = Policy()


def robots(text: str, dialect: Dialect | None = None) -> RobotsState:
    body = parse(text) if dialect is None else parse(text, dialect)
    return Parsed(body, NOON - 10, NOON + DAY)


CASES: list[tuple[str, RobotsState, HostFacts, Policy, float, str | None, Decision]] = [
    ("a rule disallows the path: its rule, line and dialect",
     robots("User-agent: *\nAllow: /\nDisallow: /private/\n"), NO_FACTS, POLICY, NOON,
     None, Disallowed(Rule(False, "/private/", 3), 3, Dialect.RFC9309,
                      "Disallow: /private/ (line 3)")),
    ("the dialect the file was read in",
     robots("User-agent: *\nDisallow: /private/\n", Dialect.GOOGLE), NO_FACTS, POLICY,
     NOON, None, Disallowed(Rule(False, "/private/", 2), 2, Dialect.GOOGLE,
                            "Disallow: /private/ (line 2)")),
    ("REGP's implicit first rule has no line",
     robots("Robot-version: 3.0\nUser-agent: *\nAllow: /public/\n"), NO_FACTS, POLICY, NOON,
     None, Disallowed(Rule(False, "/", 0), None, Dialect.REGP,
                      "Disallow: / (implicit first rule)")),
    ("an egress IP refused by Ip-disallow: no path rule",
     robots("Robot-version: 3.0\nUser-agent: *\nIp-disallow: 10.1.*.*\nAllow: /\n"),
     NO_FACTS, POLICY, NOON, "10.1.2.3",
     Disallowed(None, 3, Dialect.REGP, "egress IP 10.1.2.3 refused by Ip-disallow: 10.1.*.*")),
    ("robots.txt unavailable: refused until it is retried",
     DisallowAll("HTTP 503 for robots.txt: everything disallowed until it answers", NOON - 5,
                 NOON + 60), NO_FACTS, POLICY, NOON, None,
     Refused(RefusalReason.ROBOTS_UNAVAILABLE,
             "HTTP 503 for robots.txt: everything disallowed until it answers", NOON + 60)),
    ("Time-forbidden for longer than a week: refused",
     robots("Robot-version: 3.0\nUser-agent: *\nAllow: /\n"
            "Time-forbidden: 1 Jan 2020 00:00:00 UT-1 Jan 2099 00:00:00 UT\n"),
     NO_FACTS, POLICY, NOON, None, Refused(RefusalReason.NO_VISIT_TIME)),
]


@pytest.mark.parametrize(("state", "facts", "policy", "now", "ip", "expected"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_decide(state: RobotsState, facts: HostFacts, policy: Policy, now: float,
                ip: str | None, expected: Decision) -> None:
    assert decide("http://e.com/private/a", state, facts, policy, now, agent="bot",
                  ip=ip) == expected


@pytest.mark.parametrize(
    ("state", "facts", "policy", "interval", "source"),
    [
        (AllowAll("HTTP 404: no robots.txt, everything allowed", NOON, NOON + DAY), NO_FACTS,
         POLICY, 1.0, (WaitSource.DEFAULT, None)),
        (AllowAll("HTTP 404", NOON, NOON + DAY), NO_FACTS, Policy(default_delay_s=2.5), 2.5,
         (WaitSource.DEFAULT, None)),
        (robots("User-agent: *\n\nCrawl-delay: 4\n"), NO_FACTS, POLICY, 4.0,
         (WaitSource.CRAWL_DELAY, 3)),
        (robots("User-agent: *\nCrawl-delay: 400\n"), NO_FACTS, POLICY, 60.0,
         (WaitSource.CRAWL_DELAY, 2)),  # capped
        (robots("User-agent: *\nRequest-rate: 1/6s\nCrawl-delay: 2\n"), NO_FACTS, POLICY,
         6.0, (WaitSource.REQUEST_RATE, 2)),
        (robots("User-agent: *\nCrawl-delay: 2\n"), HostFacts(8.0, None), POLICY, 8.0,
         (WaitSource.OPERATOR, None)),
        (robots("User-agent: *\nCrawl-delay: 2\n"), HostFacts(None, 3.0), POLICY, 3.0,
         (WaitSource.ADAPTIVE, None)),
        (robots("User-agent: *\nCrawl-delay: 2\n"), HostFacts(None, 3.0),
         Policy(adaptive_factor=0.0), 2.0, (WaitSource.CRAWL_DELAY, 2)),
        (robots("Robot-version: 3.0\nUser-agent: *\nRequest-rate: 120/m\n"
                "{\nAllow: /private/\nCrawl-delay: 5\n}\n"), NO_FACTS, POLICY, 5.0,
         (WaitSource.BRACE_BLOCK, 6)),
    ],
)
def test_allowed_claims_the_spacing_and_names_its_source(
        state: RobotsState, facts: HostFacts, policy: Policy, interval: float,
        source: tuple[WaitSource, int | None]) -> None:
    found = decide("http://e.com/private/a", state, facts, policy, NOON, agent="bot")
    assert isinstance(found, Allowed)
    assert found.interval_s == interval
    assert found.delays.source() == source


def test_a_visit_time_window_not_yet_open_waits_for_it() -> None:
    state = robots("Robot-version: 3.0\nUser-agent: *\nAllow: /\nVisit-time: 2200-0600\n")
    assert decide("http://e.com/a", state, NO_FACTS, POLICY, NOON, agent="bot") == WaitUntil(
        MIDNIGHT + 22 * 3600, WaitSource.VISIT_TIME, interval_s=1.0)
    inside = decide("http://e.com/a", state, NO_FACTS, POLICY, MIDNIGHT + 23 * 3600,
                    agent="bot")
    assert isinstance(inside, Allowed)


SPACING = Allowed(5.0, Delays(crawl_delay_s=5.0, lines=(("crawl-delay", 2, False),)))


@pytest.mark.parametrize(
    ("claim", "position", "expected"),
    [
        (HostClaim(0, (100.0,), 100.0), 0, SPACING),
        (HostClaim(-1, (105.0,), 103.0), 0,
         WaitUntil(105.0, WaitSource.CRAWL_DELAY, 2, 5.0)),
        # a second URL of the host in the same batch waits behind the one granted
        (HostClaim(0, (100.0, 105.0), 100.0), 1,
         WaitUntil(105.0, WaitSource.CRAWL_DELAY, 2, 5.0, behind=True)),
        # a back-off in force holds the host past its spacing
        (HostClaim(-1, (130.0,), 103.0, 130.0), 0,
         WaitUntil(130.0, WaitSource.BACKOFF, interval_s=5.0)),
        # a back-off ending before the spacing does: the spacing holds it
        (HostClaim(-1, (105.0,), 103.0, 104.0), 0,
         WaitUntil(105.0, WaitSource.CRAWL_DELAY, 2, 5.0)),
        # a request of the host in flight holds it: asked again soon
        (HostClaim(-1, (103.05,), 103.0, None, True), 0,
         WaitUntil(103.05, WaitSource.IN_FLIGHT, interval_s=5.0)),
        # ... unless the spacing holds it longer anyway
        (HostClaim(-1, (105.0,), 103.0, None, True), 0,
         WaitUntil(105.0, WaitSource.CRAWL_DELAY, 2, 5.0)),
    ],
)
def test_claimed(claim: HostClaim, position: int, expected: Decision) -> None:
    assert claimed(SPACING, claim, position) == expected


def test_a_brace_block_s_delay_is_named_with_its_field() -> None:
    in_block = Allowed(1.0, Delays(crawl_delay_s=1.0, request_rate_s=0.5,
                                   lines=(("request-rate", 3, False),
                                          ("crawl-delay", 6, True))))
    assert claimed(in_block, HostClaim(-1, (101.0,), 100.5)) == WaitUntil(
        101.0, WaitSource.BRACE_BLOCK, 6, 1.0, field=WaitSource.CRAWL_DELAY)


@pytest.mark.parametrize("state", [
    robots("User-agent: *\nDisallow: /private/\nCrawl-delay: 4\n"),
    DisallowAll("HTTP 503 for robots.txt: everything disallowed until it answers", NOON - 5,
                NOON + 60),
], ids=["a rule disallows the path", "robots.txt unavailable"])
def test_a_persons_own_request_is_not_refused_by_robots_txt_but_spaced(
        state: RobotsState) -> None:
    """``obey_rules=False`` (polite mcp's prompt): neither a rule nor an unavailable file
    refuses the URL; the file's delay still spaces it."""
    found = decide("http://e.com/private/a", state, NO_FACTS, POLICY, NOON, agent="bot",
                   obey_rules=False)
    assert isinstance(found, Allowed)
    assert found.interval_s == (4.0 if isinstance(state, Parsed) else 1.0)

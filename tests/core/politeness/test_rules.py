"""The spacing arithmetic, one table of plain numbers."""

from __future__ import annotations

import pytest

from polite.core.politeness import (
    Allowed,
    Delays,
    RefusalReason,
    Refused,
    WaitSource,
    WaitUntil,
    delays_for,
    earliest_in_windows,
    next_slot,
    shifted_start,
)
from polite.core.politeness.rules import BACKOFF_STATUSES, backoff_until
from polite.core.robots.values import DailyWindow, TimeRange
from polite.robots import parse

DAY = 86_400.0
MIDNIGHT = 1_700_006_400.0 - (1_700_006_400.0 % DAY)


@pytest.mark.parametrize(
    ("last", "delays", "now", "expected"),
    [
        (None, Delays(), 100.0, None),
        (100.0, Delays(configured_s=5.0), 103.0, WaitUntil(105.0, WaitSource.OPERATOR, None,
                                                           5.0)),
        (100.0, Delays(configured_s=5.0), 105.0, None),
        (100.0, Delays(), 100.5, WaitUntil(101.0, WaitSource.DEFAULT, None, 1.0)),
        (100.0, Delays(crawl_delay_s=10.0, configured_s=2.0), 101.0,
         WaitUntil(110.0, WaitSource.CRAWL_DELAY, None, 10.0)),
        (100.0, Delays(request_rate_s=0.5), 100.2,
         WaitUntil(100.5, WaitSource.REQUEST_RATE, None, 0.5)),
        (100.0, Delays(request_rate_s=0.5, adaptive_s=3.0), 101.0,
         WaitUntil(103.0, WaitSource.ADAPTIVE, None, 3.0)),
        # An operator's shorter delay beats the default, not the site's.
        (100.0, Delays(configured_s=0.2), 100.3, None),
    ],
)
def test_next_slot(last: float | None, delays: Delays, now: float,
                   expected: WaitUntil | None) -> None:
    found = next_slot(last, delays, now)
    if expected is None:  # allowed, claiming the spacing worked out
        assert found == Allowed(delays.interval_s, delays)
    else:
        assert found == expected


def test_backoff_wins_when_later() -> None:
    assert next_slot(100.0, Delays(), 100.5, backoff_until=130.0) == WaitUntil(
        130.0, WaitSource.BACKOFF, interval_s=1.0)
    assert next_slot(100.0, Delays(), 100.5, backoff_until=100.7) == WaitUntil(
        101.0, WaitSource.DEFAULT, interval_s=1.0)


def test_visit_time_moves_into_the_window() -> None:
    night = DailyWindow(22 * 3600, 6 * 3600)
    noon = MIDNIGHT + 12 * 3600
    result = next_slot(None, Delays(windows=(night,)), noon)
    assert result == WaitUntil(MIDNIGHT + 22 * 3600, WaitSource.VISIT_TIME, interval_s=1.0)
    assert isinstance(next_slot(None, Delays(windows=(night,)), MIDNIGHT + 23 * 3600), Allowed)


def test_time_forbidden_periods() -> None:
    period = TimeRange(MIDNIGHT, MIDNIGHT + 2 * DAY)
    assert earliest_in_windows(MIDNIGHT + 10, (), (period,)) == MIDNIGHT + 2 * DAY
    assert earliest_in_windows(MIDNIGHT - 10, (), (period,)) == MIDNIGHT - 10
    forever = TimeRange(MIDNIGHT, MIDNIGHT + 30 * DAY)
    assert next_slot(None, Delays(forbidden=(forever,)), MIDNIGHT + 5) == Refused(
        RefusalReason.NO_VISIT_TIME)
    daily = DailyWindow(0, 3600)  # forbidden 00:00-01:00 every day
    assert earliest_in_windows(MIDNIGHT + 60, (), (daily,)) == MIDNIGHT + 3600


def test_delays_from_robots_with_cap() -> None:
    robots = parse("User-agent: *\nCrawl-delay: 600\nRequest-rate: 120/m\n")
    delays = delays_for(robots.agent_rules("bot"), configured_s=2.0, max_crawl_delay_s=30.0)
    assert delays.crawl_delay_s == 30.0
    assert delays.request_rate_s == 0.5
    assert delays.interval_s == 30.0
    assert delays.robots_s == 30.0


def test_regp_section_5_delays_per_path() -> None:
    robots = parse("Robot-version: 3.0\n\nUser-agent: *\nRequest-rate: 120/m\n"
                   "{\nAllow: /html/\nCrawl-delay: 1\n}\n")
    home = delays_for(robots.agent_rules("bot", url="http://e.com/"), default_s=1.0)
    html = delays_for(robots.agent_rules("bot", url="http://e.com/html/a.html"))
    assert home.interval_s == 0.5 and home.source() == (WaitSource.REQUEST_RATE, 4)
    # the block's own Crawl-delay, named as a brace block's with its line
    assert html.interval_s == 1.0 and html.source() == (WaitSource.BRACE_BLOCK, 7)
    assert html.reason() is WaitSource.CRAWL_DELAY  # the block's field


@pytest.mark.parametrize(("last", "late", "now", "shifted"), [
    (100.0, 2.0, 103.0, 102.0),  # one request out: moved by its lateness
    (100.0, 2.0, 101.0, 101.0),  # not past the moment it is told
    (100.5, 1.0, 101.0, 101.0),  # an earlier grant's lateness, a later grant since
    (105.0, 1.0, 101.0, 105.0),  # never earlier than it was (a slot claimed ahead)
])
def test_a_late_start_moves_the_slot_but_never_past_now(last: float, late: float, now: float,
                                                        shifted: float) -> None:
    assert shifted_start(last, late, now) == shifted


def test_only_the_backoff_statuses_pause_a_host() -> None:
    # the proxy reads Retry-After of these answers only: no other may pause a host
    assert sorted(BACKOFF_STATUSES) == [429, 503]
    for status in range(100, 600):
        assert (backoff_until(status, 5.0, 100.0) is not None) == (status in BACKOFF_STATUSES)
    assert backoff_until(503, None, 100.0) == 160.0  # no Retry-After: a minute

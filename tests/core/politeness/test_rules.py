"""The spacing arithmetic, one table of plain numbers."""

from __future__ import annotations

import pytest

from polite.core.politeness import (
    Delays,
    Ready,
    Refused,
    WaitUntil,
    delays_for,
    earliest_in_windows,
    next_slot,
    shifted_start,
)
from polite.core.robots.values import DailyWindow, TimeRange
from polite.robots import parse

DAY = 86_400.0
MIDNIGHT = 1_700_006_400.0 - (1_700_006_400.0 % DAY)


@pytest.mark.parametrize(
    ("last", "delays", "now", "expected"),
    [
        (None, Delays(), 100.0, Ready()),
        (100.0, Delays(configured_s=5.0), 103.0, WaitUntil(105.0, "configured delay")),
        (100.0, Delays(configured_s=5.0), 105.0, Ready()),
        (100.0, Delays(), 100.5, WaitUntil(101.0, "default delay")),
        (100.0, Delays(crawl_delay_s=10.0, configured_s=2.0), 101.0,
         WaitUntil(110.0, "robots.txt Crawl-delay")),
        (100.0, Delays(request_rate_s=0.5), 100.2, WaitUntil(100.5, "robots.txt Request-rate")),
        (100.0, Delays(request_rate_s=0.5, adaptive_s=3.0), 101.0,
         WaitUntil(103.0, "adaptive delay")),
        # An operator's shorter delay beats the default, not the site's.
        (100.0, Delays(configured_s=0.2), 100.3, Ready()),
    ],
)
def test_next_slot(last: float | None, delays: Delays, now: float,
                   expected: Ready | WaitUntil) -> None:
    assert next_slot(last, delays, now) == expected


def test_backoff_wins_when_later() -> None:
    assert next_slot(100.0, Delays(), 100.5, backoff_until=130.0) == WaitUntil(
        130.0, "back-off after 429/503")
    assert next_slot(100.0, Delays(), 100.5, backoff_until=100.7) == WaitUntil(
        101.0, "default delay")


def test_visit_time_moves_into_the_window() -> None:
    night = DailyWindow(22 * 3600, 6 * 3600)
    noon = MIDNIGHT + 12 * 3600
    result = next_slot(None, Delays(windows=(night,)), noon)
    assert result == WaitUntil(MIDNIGHT + 22 * 3600, "robots.txt Visit-time / Time-forbidden")
    assert next_slot(None, Delays(windows=(night,)), MIDNIGHT + 23 * 3600) == Ready()


def test_time_forbidden_periods() -> None:
    period = TimeRange(MIDNIGHT, MIDNIGHT + 2 * DAY)
    assert earliest_in_windows(MIDNIGHT + 10, (), (period,)) == MIDNIGHT + 2 * DAY
    assert earliest_in_windows(MIDNIGHT - 10, (), (period,)) == MIDNIGHT - 10
    forever = TimeRange(MIDNIGHT, MIDNIGHT + 30 * DAY)
    assert isinstance(next_slot(None, Delays(forbidden=(forever,)), MIDNIGHT + 5), Refused)
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
    assert home.interval_s == 0.5 and home.reason() == "robots.txt Request-rate"
    assert html.interval_s == 1.0 and html.reason() == "robots.txt Crawl-delay"


@pytest.mark.parametrize(("last", "late", "now", "shifted"), [
    (100.0, 2.0, 103.0, 102.0),  # one request out: moved by its lateness
    (100.0, 2.0, 101.0, 101.0),  # not past the moment it is told
    (100.5, 1.0, 101.0, 101.0),  # an earlier grant's lateness, a later grant since
    (105.0, 1.0, 101.0, 105.0),  # never earlier than it was (a slot claimed ahead)
])
def test_a_late_start_moves_the_slot_but_never_past_now(last: float, late: float, now: float,
                                                        shifted: float) -> None:
    assert shifted_start(last, late, now) == shifted

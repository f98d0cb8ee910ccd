"""Typed values of the REGP and extension fields."""

from __future__ import annotations

import calendar

import pytest

from polite.core.robots.values import (
    DailyWindow,
    RequestRate,
    TimeRange,
    parse_delay,
    parse_http_date,
    parse_ip_pattern,
    parse_rate,
    parse_time_window,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("5", 5.0), ("0.5", 0.5), (" 10 ", 10.0), ("3s", 3.0), ("-1", None), ("soon", None),
     ("nan", None), ("inf", None), ("", None)],
)
def test_delay(text: str, expected: float | None) -> None:
    assert parse_delay(text) == expected


@pytest.mark.parametrize(
    ("text", "interval_s"),
    [("500/h", 7.2), ("120/m", 0.5), ("1/5s", 5.0), ("1/5", 5.0), ("2/1m", 30.0), ("0.5/s", 2.0)],
)
def test_rate(text: str, interval_s: float) -> None:
    rate = parse_rate(text)
    assert rate is not None
    assert rate.interval_s == pytest.approx(interval_s)


def test_rate_with_window_and_bad_rates() -> None:
    assert parse_rate("1/10m 1300-1659") == RequestRate(1, 600, DailyWindow(46800, 61140))
    for bad in ("fast", "0/m", "1/0s", "/m", "1/10m 2500-2600"):
        assert parse_rate(bad) is None, bad


def test_last_modified_forms_of_seed_000() -> None:
    # "These three examples insist the same time" (to the minute): 04:31 UTC.
    expected = calendar.timegm((2014, 10, 30, 4, 31, 0))
    assert parse_http_date("30 Oct 2014 04:31:17 UT") == expected + 17
    assert parse_http_date("Thu, 30 Oct 2014 04:31 UT") == expected
    assert parse_http_date("30 Oct 2014 12:31 +0800") == expected
    assert parse_http_date("30 Oct 14 12:31 +0800") == expected
    assert parse_http_date("yesterday") is None


def test_time_windows() -> None:
    assert parse_time_window("01:00 +0800-06:00 +0800") == DailyWindow(17 * 3600, 22 * 3600)
    assert parse_time_window("1:00-16:00 UT") == DailyWindow(3600, 16 * 3600)
    assert parse_time_window("0600-0845") == DailyWindow(21600, 31500)
    # A zone on one end applies to both (seed 000, 3.2.8).
    assert parse_time_window("01:00-06:00 +0800") == DailyWindow(17 * 3600, 22 * 3600)
    forbidden = parse_time_window("30 Oct 2014 00:00:00 UT-2 Nov 2014 23:59:59 UT")
    assert forbidden == TimeRange(calendar.timegm((2014, 10, 30, 0, 0, 0)),
                                  calendar.timegm((2014, 11, 2, 23, 59, 59)))
    for bad in ("noon", "25:00-26:00", "2 Nov 2014 00:00 UT-1 Nov 2014 00:00 UT", "10:00"):
        assert parse_time_window(bad) is None, bad


def test_daily_window_arithmetic() -> None:
    night = DailyWindow(22 * 3600, 6 * 3600)  # wraps past midnight
    day0 = 1_700_006_400 - (1_700_006_400 % 86400)
    assert night.contains(day0 + 23 * 3600)
    assert night.contains(day0 + 3600)
    assert not night.contains(day0 + 12 * 3600)
    assert night.next_start(day0 + 12 * 3600) == day0 + 22 * 3600
    assert night.next_start(day0 + 23 * 3600) == day0 + 23 * 3600
    assert night.next_end(day0 + 23 * 3600) == day0 + 86400 + 6 * 3600


@pytest.mark.parametrize(
    ("text", "octets"),
    [("222.69.212.*", ("222", "69", "212", "*")), ("*", ("*",) * 4),
     ("222.69..*", ("222", "69", "*", "*")), ("10.0.0.1", ("10", "0", "0", "1")),
     ("300.1.1.1", None), ("a.b.c.d", None), ("1.2.3.4.5", None), (".1.2.3", None)],
)
def test_ip_patterns(text: str, octets: tuple[str, ...] | None) -> None:
    assert parse_ip_pattern(text) == octets

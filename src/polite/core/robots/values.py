"""Typed values of the robots.txt fields beyond Allow and Disallow.

Every parser here takes the raw text of one field and returns a typed value, or ``None``
when the text cannot be read (the caller turns that into an issue with the line number).
Times follow RFC 822 as REGP (seed 000, sections 3.2.2 and 3.2.8) asks; rates follow the
REGP form ``<count>/<n><unit>`` with an optional ``HHMM-HHMM`` window as the older
extended standard wrote them.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from email.utils import parsedate_tz

__all__ = [
    "MAX_DELAY_S",
    "CleanParam",
    "DailyWindow",
    "RequestRate",
    "TimeRange",
    "TimeWindow",
    "parse_clean_param",
    "parse_delay",
    "parse_http_date",
    "parse_ip_pattern",
    "parse_list",
    "parse_rate",
    "parse_time_window",
    "parse_version",
]

SECONDS_PER_DAY = 86_400
# A delay beyond a day is a typo or a wish to be left alone; the value is kept as read (and
# linted), RobotsTxt.delay_s answers a day at most, and the politeness layer caps it lower
# still (DESIGN.md: "Crawl-delay (capped, configurable)").
MAX_DELAY_S = 86_400.0

_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


@dataclass(frozen=True, slots=True)
class DailyWindow:
    """A window of each day, in seconds after midnight UTC; ``end_s < start_s`` wraps."""

    start_s: int
    end_s: int

    def contains(self, now: float) -> bool:
        """Whether the instant ``now`` (seconds since the epoch) falls in the window."""
        t = int(now) % SECONDS_PER_DAY
        if self.start_s <= self.end_s:
            return self.start_s <= t < self.end_s
        return t >= self.start_s or t < self.end_s

    def next_start(self, now: float) -> float:
        """The first instant at or after ``now`` that falls in the window."""
        if self.contains(now):
            return now
        day = now - (now % SECONDS_PER_DAY)
        start = day + self.start_s
        return start if start >= now else start + SECONDS_PER_DAY

    def next_end(self, now: float) -> float:
        """The first instant after ``now`` at which the window closes."""
        day = now - (now % SECONDS_PER_DAY)
        end = day + self.end_s
        return end if end > now else end + SECONDS_PER_DAY


@dataclass(frozen=True, slots=True)
class TimeRange:
    """An absolute period, in seconds since the epoch (Time-forbidden with dates)."""

    start: float
    end: float

    def contains(self, now: float) -> bool:
        return self.start <= now < self.end


TimeWindow = DailyWindow | TimeRange


@dataclass(frozen=True, slots=True)
class RequestRate:
    """``requests`` per ``seconds``, optionally only inside a daily window."""

    requests: float
    seconds: float
    window: DailyWindow | None = None

    @property
    def interval_s(self) -> float:
        """The spacing between two requests that keeps to the rate."""
        return self.seconds / self.requests


@dataclass(frozen=True, slots=True)
class CleanParam:
    """Yandex's Clean-param: query parameters that do not change the page, for a path prefix."""

    params: tuple[str, ...]
    path_prefix: str


def parse_delay(value: str) -> float | None:
    """Seconds from a Crawl-delay or Ip-delay value (``5``, ``0.5``, ``10s``)."""
    text = value.strip().lower().removesuffix("s").strip()
    try:
        delay = float(text)
    except ValueError:
        return None
    if delay != delay or delay < 0 or delay == float("inf"):  # NaN, negative, infinite
        return None
    return delay


_RATE = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)?\s*([smhd]?)[a-z]*\s*"
    r"(?:(\d{2}):?(\d{2})\s*-\s*(\d{2}):?(\d{2}))?\s*$",
    re.IGNORECASE,
)


def parse_rate(value: str) -> RequestRate | None:
    """A Request-rate or Ip-rate value: ``500/h``, ``120/m``, ``1/5s``, ``1/10m 0600-0845``."""
    m = _RATE.match(value)
    if m is None:
        return None
    count = float(m.group(1))
    amount = float(m.group(2)) if m.group(2) else 1.0
    unit = _UNIT_S[(m.group(3) or "s").lower()]
    if count <= 0 or amount <= 0:
        return None
    window = None
    if m.group(4) is not None:
        start = _hhmm_s(m.group(4), m.group(5))
        end = _hhmm_s(m.group(6), m.group(7))
        if start is None or end is None:
            return None
        window = DailyWindow(start, end)
    return RequestRate(count, amount * unit, window)


def _hhmm_s(hours: str, minutes: str, seconds: str | None = None) -> int | None:
    h, m, s = int(hours), int(minutes), int(seconds or 0)
    if h > 24 or m > 59 or s > 59 or (h == 24 and (m or s)):
        return None
    return (h * 3600 + m * 60 + s) % SECONDS_PER_DAY


_ZONE = r"(?:[+-]\d{4}|UTC|UT|GMT|Z|[ECMP][SD]T)"
_DATE = r"(?:[A-Za-z]{3},?\s*)?\d{1,2}\s+[A-Za-z]{3}\s+\d{2,4}\s+"
_TIME = r"\d{1,2}:?\d{2}(?::\d{2})?"
_END = rf"(?P<@date>{_DATE})?(?P<@time>{_TIME})(?:\s*(?P<@zone>{_ZONE}))?"
_WINDOW = re.compile(
    r"^\s*" + _END.replace("@", "a") + r"\s*-\s*" + _END.replace("@", "b") + r"\s*$",
    re.IGNORECASE,
)
_TIME_PARTS = re.compile(r"^(\d{1,2}):?(\d{2})(?::(\d{2}))?$")


def _zone_offset_s(zone: str | None) -> int | None:
    if zone is None:
        return None
    zone = zone.upper()
    if zone[0] in "+-":
        sign = -1 if zone[0] == "-" else 1
        return sign * (int(zone[1:3]) * 3600 + int(zone[3:5]) * 60)
    named = {"UT": 0, "UTC": 0, "GMT": 0, "Z": 0, "EST": -5, "EDT": -4, "CST": -6, "CDT": -5,
             "MST": -7, "MDT": -6, "PST": -8, "PDT": -7}
    return named[zone] * 3600


def parse_time_window(value: str) -> TimeWindow | None:
    """A Visit-time or Time-forbidden value.

    Without dates (``01:00 +0800-06:00 +0800``, ``0600-0845``) the answer is a daily window in
    UTC; with dates on both ends (``30 Oct 2014 00:00:00 UT-2 Nov 2014 23:59:59 UT``) an
    absolute range. A zone given on one end only applies to both (seed 000, 3.2.8); none
    means UTC.
    """
    m = _WINDOW.match(value)
    if m is None:
        return None
    zone_a = _zone_offset_s(m.group("azone"))
    zone_b = _zone_offset_s(m.group("bzone"))
    zone_a = zone_b if zone_a is None else zone_a
    zone_b = zone_a if zone_b is None else zone_b
    offset_a, offset_b = zone_a or 0, zone_b or 0
    if m.group("adate") and m.group("bdate"):
        start = _epoch(m.group("adate"), m.group("atime"), offset_a)
        end = _epoch(m.group("bdate"), m.group("btime"), offset_b)
        if start is None or end is None or end < start:
            return None
        return TimeRange(start, end)
    if m.group("adate") or m.group("bdate"):
        return None
    start_s = _time_of_day_s(m.group("atime"))
    end_s = _time_of_day_s(m.group("btime"))
    if start_s is None or end_s is None:
        return None
    return DailyWindow((start_s - offset_a) % SECONDS_PER_DAY, (end_s - offset_b) % SECONDS_PER_DAY)


def _time_of_day_s(text: str) -> int | None:
    m = _TIME_PARTS.match(text)
    if m is None:
        return None
    return _hhmm_s(m.group(1), m.group(2), m.group(3))


def _epoch(date: str, time: str, offset_s: int) -> float | None:
    parts = _TIME_PARTS.match(time)
    if parts is None:
        return None
    clock = f"{int(parts.group(1)):02d}:{parts.group(2)}:{parts.group(3) or '00'}"
    parsed = parsedate_tz(f"{date.strip()} {clock} +0000")
    if parsed is None:
        return None
    return float(calendar.timegm(parsed[:6]) - offset_s)


def parse_http_date(value: str) -> float | None:
    """Seconds since the epoch from an RFC 822 / RFC 9110 date (REGP ``Last-modified``)."""
    parsed = parsedate_tz(value.strip())
    if parsed is None:
        return None
    try:
        return float(calendar.timegm(parsed[:6]) - (parsed[9] or 0))
    except (OverflowError, ValueError):
        return None


_VERSION = re.compile(r"^\s*(\d+)(?:\.(\d+))?\s*$")


def parse_version(value: str) -> tuple[int, int] | None:
    """``Robot-version: 3.0`` as ``(3, 0)``."""
    m = _VERSION.match(value)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2) or 0)


_IP_OCTET = re.compile(r"^(?:\*|25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$")


def parse_ip_pattern(value: str) -> tuple[str, ...] | None:
    """An Ip-allow / Ip-disallow value: four octets, each a number or ``*``; ``*`` alone is any.

    Missing octets (``222.69.*``, or the seed's ``222.69..*``) are read as wildcards.
    """
    text = value.strip()
    if text == "*":
        return ("*", "*", "*", "*")
    octets = [o.strip() for o in text.split(".")]
    if len(octets) > 4 or not all(_IP_OCTET.match(o) or o == "" for o in octets):
        return None
    if octets[0] == "":
        return None
    octets = [o or "*" for o in octets] + ["*"] * (4 - len(octets))
    return tuple(octets)


def parse_list(value: str) -> tuple[str, ...]:
    """A comma-separated list (Language, Encoding, Charset), items stripped, empties dropped."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


def parse_clean_param(value: str) -> CleanParam | None:
    """``Clean-param: ref&sid /forum/`` (Yandex); the path defaults to the whole site."""
    fields = value.split()
    if not fields or len(fields) > 2:
        return None
    params = tuple(p for p in fields[0].split("&") if p)
    if not params:
        return None
    return CleanParam(params, fields[1] if len(fields) == 2 else "/")

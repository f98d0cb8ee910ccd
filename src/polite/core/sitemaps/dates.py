"""The two date forms sitemaps use: W3C datetimes (sitemaps, Atom) and RFC 822 (RSS)."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["parse_rfc822", "parse_w3c"]

_fromisoformat = datetime.fromisoformat


def parse_w3c(text: str) -> datetime | None:
    """A W3C datetime (https://www.w3.org/TR/NOTE-datetime) as an aware ``datetime``, or
    ``None`` when ``text`` is not one. Its six forms: ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``
    (read as the start of that year, month or day in UTC), and a time to the minute, second
    or fraction of a second, which must carry a zone (``Z`` or ``+hh:mm``)."""
    n = len(text)
    if n > 10:
        # The common case first: 2024-05-01T12:00:00+00:00 and its shorter forms.
        if text[10] != "T" or n < 17 or text[13] != ":" or not text[:4].isdigit():
            return None
        try:
            value = _fromisoformat(text)
        except ValueError:
            return None
        return value if value.tzinfo is not None else None
    if n == 10 and text[4] == "-" and text[7] == "-":
        try:
            return _fromisoformat(text + "T00:00:00+00:00")
        except ValueError:
            return None
    if n == 7 and text[4] == "-" and text[:4].isdigit() and text[5:].isdigit():
        month = int(text[5:])
        return datetime(int(text[:4]), month, 1, tzinfo=UTC) if 1 <= month <= 12 else None
    if n == 4 and text.isdigit() and text.isascii():
        year = int(text)
        return datetime(year, 1, 1, tzinfo=UTC) if year >= 1 else None
    return None


def parse_rfc822(text: str) -> datetime | None:
    """An RSS date (RFC 822, as amended by RFC 1123: two-digit years and a missing weekday
    are read) as an aware ``datetime``; ``None`` when it has no time zone or is not a date."""
    try:
        value = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return value if value.tzinfo is not None else None

"""The status table of DESIGN.md, one row per case, no network."""

from __future__ import annotations

import pytest

from polite.core.robots.lifecycle import (
    AllowAll,
    DisallowAll,
    FetchPolicy,
    Parsed,
    Received,
    UnauthorizedMeans,
    Unreachable,
    freshness_s,
    parse_retry_after,
    robots_state,
)

NOW = 1_000_000.0
BODY = b"User-agent: *\nDisallow: /private\n"


def test_2xx_parses_with_http_freshness_clamped_to_a_day() -> None:
    state = robots_state(Received(200, BODY, (("Cache-Control", "max-age=600"),)), NOW)
    assert isinstance(state, Parsed)
    assert state.expires_at == NOW + 600
    assert not state.robots.allowed("http://e.com/private", "bot")
    week = robots_state(Received(200, BODY, (("cache-control", "max-age=604800"),)), NOW)
    assert isinstance(week, Parsed) and week.expires_at == NOW + 86_400
    plain = robots_state(Received(200, BODY), NOW)
    assert isinstance(plain, Parsed) and plain.expires_at == NOW + 86_400


def test_html_instead_of_robots_txt_is_no_file() -> None:
    state = robots_state(Received(200, b"<!DOCTYPE html><html><body>hi</body></html>"), NOW)
    assert isinstance(state, AllowAll)
    assert "HTML" in state.reason


@pytest.mark.parametrize("status", [401, 403])
def test_unauthorized_disallows_by_default_and_allows_by_rfc_policy(status: int) -> None:
    assert isinstance(robots_state(Received(status, b""), NOW), DisallowAll)
    rfc = FetchPolicy(unauthorized=UnauthorizedMeans.ALLOW)
    assert isinstance(robots_state(Received(status, b""), NOW, policy=rfc), AllowAll)


@pytest.mark.parametrize("status", [400, 404, 410, 451])
def test_other_4xx_allow_all(status: int) -> None:
    assert isinstance(robots_state(Received(status, b"nope"), NOW), AllowAll)


@pytest.mark.parametrize("outcome", [Received(500, b""), Received(503, b""), Received(429, b""),
                                     Unreachable("connection refused")])
def test_errors_disallow_all_with_growing_backoff(outcome: Received | Unreachable) -> None:
    first = robots_state(outcome, NOW)
    assert isinstance(first, DisallowAll)
    second = robots_state(outcome, NOW, previous=first)
    assert isinstance(second, DisallowAll)
    assert second.failures == 2
    assert second.retry_at - NOW > first.retry_at - NOW


def test_retry_after_is_honoured() -> None:
    state = robots_state(Received(503, b"", (("Retry-After", "900"),)), NOW)
    assert isinstance(state, DisallowAll) and state.retry_at == NOW + 900
    assert parse_retry_after("Thu, 01 Jan 1970 00:16:40 GMT", 0.0) == 1000.0
    assert parse_retry_after("soon", 0.0) is None


def test_last_good_copy_serves_for_thirty_days() -> None:
    good = robots_state(Received(200, BODY), NOW)
    down = robots_state(Unreachable("timeout"), NOW + 3600, previous=good)
    assert isinstance(down, Parsed) and down.stale
    assert not down.robots.allowed("http://e.com/private", "bot")
    later = robots_state(Received(502, b""), NOW + 31 * 86_400, previous=down)
    assert isinstance(later, DisallowAll)


def test_freshness_from_expires_and_no_cache() -> None:
    policy = FetchPolicy()
    expires = Received(200, b"", (("Expires", "Thu, 01 Jan 1970 01:00:00 GMT"),))
    assert freshness_s(expires, 0.0, policy) == 3600
    no_cache = Received(200, b"", (("Cache-Control", "no-cache"),))
    assert freshness_s(no_cache, 0.0, policy) == policy.min_ttl_s

"""Seed 004's outcome classes for an answer, by status and by body."""

from __future__ import annotations

import pytest

from polite.core.robots import parse
from polite.core.robots.lifecycle import (
    AllowAll,
    DisallowAll,
    Parsed,
    Received,
    StatusClass,
    robots_state,
    status_class,
)
from polite.core.survey.outcomes import (
    SURVEY_POLICY,
    Outcome,
    body_outcome,
    rules_state,
    status_outcome,
)


@pytest.mark.parametrize(("status", "outcome"), [
    (200, None), (204, None), (401, Outcome.FORBIDDEN), (403, Outcome.FORBIDDEN),
    (404, Outcome.NOT_FOUND), (410, Outcome.NOT_FOUND), (429, Outcome.SERVER_ERROR),
    (500, Outcome.SERVER_ERROR), (503, Outcome.SERVER_ERROR)])
def test_status(status: int, outcome: Outcome | None) -> None:
    assert status_outcome(status) == outcome


@pytest.mark.parametrize(("body", "content_type", "size", "outcome"), [
    (b"User-agent: *\nDisallow: /x\n", "text/plain", None, Outcome.OK),
    (b"Sitemap: https://e.com/s.xml\n", "", None, Outcome.OK),
    (b"", "text/plain", None, Outcome.EMPTY),
    (b"# nothing but a comment\n\n", "text/plain", None, Outcome.EMPTY),
    (b"<!DOCTYPE html><html><body>Home</body></html>", "", None, Outcome.HTML),
    # classed by content: a robots.txt file served as text/html is one (every fetch of
    # robots.txt reads it); a page, or no field at all, served so is a page
    (b"User-agent: *\nDisallow: /x\n", "text/html; charset=utf-8", None, Outcome.OK),
    (b"Welcome to our shop\n", "text/html", None, Outcome.HTML),
    (b"<html><body>User-agent: *</body></html>", "text/plain", None, Outcome.HTML),
    (b"User-agent: *\n", "text/plain; charset=utf8x", None, Outcome.CHARSET),
    (b"User-agent: caf\xe9\n", "text/plain; charset=utf-8", None, Outcome.CHARSET),
    (b"User-agent: caf\xe9\n", "text/plain; charset=iso-8859-1", None, Outcome.OK),
    (b"User-agent: *\n", "text/plain", 12_000_000, Outcome.TOO_BIG),
])
def test_body(body: bytes, content_type: str, size: int | None, outcome: Outcome) -> None:
    assert body_outcome(body, content_type=content_type, size=size,
                        max_bytes=500 * 1024) == outcome


@pytest.mark.parametrize("status", [100, 200, 204, 304, 399, 401, 403, 404, 410, 429, 451,
                                    500, 503, 599])
def test_the_classes_are_the_rows_of_the_fetch_status_table(status: int) -> None:
    """One status table: the survey's class of a status names the row the fetch of robots.txt
    reads it by, and the rules it puts in force are that row's (RFC 9309's policy)."""
    row = status_class(status)
    assert status_outcome(status) == {
        StatusClass.FILE: None, StatusClass.UNEXPECTED: None,
        StatusClass.UNAUTHORIZED: Outcome.FORBIDDEN, StatusClass.NO_FILE: Outcome.NOT_FOUND,
        StatusClass.UNAVAILABLE: Outcome.SERVER_ERROR}[row]
    decided = status_outcome(status)
    if decided is not None:
        url = "http://e.com/robots.txt"
        by_class = rules_state(decided, None, url, 0.0)
        by_table = robots_state(Received(status, b"", url=url), 0.0, policy=SURVEY_POLICY)
        assert type(by_class) is type(by_table)


@pytest.mark.parametrize(("outcome", "body", "state"), [
    (Outcome.OK, b"User-agent: *\nDisallow: /x\n", Parsed),
    (Outcome.TOO_BIG, b"User-agent: *\nDisallow: /x", Parsed),
    (Outcome.EMPTY, b"", Parsed),
    (Outcome.FORBIDDEN, None, AllowAll), (Outcome.NOT_FOUND, None, AllowAll),
    (Outcome.SERVER_ERROR, None, DisallowAll), (Outcome.TIMEOUT, None, DisallowAll),
    (Outcome.CONNECTION_ERROR, None, DisallowAll),
    # seed 004: an unknown name or a loop is no file; a charset the survey could not read and
    # an HTML page hold no rules
    (Outcome.DNS_ERROR, None, AllowAll), (Outcome.REDIRECT_LOOP, None, AllowAll),
    (Outcome.HTML, b"<html>", AllowAll), (Outcome.CHARSET, b"User-agent: *\nDisallow: /\n",
                                          AllowAll),
])
def test_rules_of_each_class(outcome: Outcome, body: bytes | None, state: type) -> None:
    found = rules_state(outcome, body, "http://e.com/robots.txt", 5.0)
    assert isinstance(found, state)
    if isinstance(found, Parsed):
        assert found.robots.allowed("http://e.com/y", "bot")
        assert found.robots.allowed("http://e.com/x", "bot") is (outcome is Outcome.EMPTY)


@pytest.mark.parametrize("body", [
    b"<!DOCTYPE html><html>", b"  <html lang=en>", b"<head>", b"<body>", b"<!-- home -->",
    b"<title>Home</title>", b"<meta charset=utf-8>", b"<script>x()</script>",
    b"<?xml version='1.0'?><html/>", b"User-agent: *\nDisallow: /\n", b"", b"Sitemap: /s\n",
    b"\n" * 600 + b"<html>"])
def test_one_html_pattern_for_the_parser_and_the_survey(body: bytes) -> None:
    """A page served as robots.txt is the survey's "html" class exactly when the parser (and
    so the fetch status table) sees an HTML page."""
    assert parse(body).looks_like_html is (
        body_outcome(body, max_bytes=500 * 1024) is Outcome.HTML)

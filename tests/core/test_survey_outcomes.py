"""Seed 004's outcome classes for an answer, by status and by body."""

from __future__ import annotations

import pytest

from polite.core.survey.outcomes import Outcome, body_outcome, status_outcome


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
    (b"User-agent: *\n", "text/html; charset=utf-8", None, Outcome.HTML),
    (b"User-agent: *\n", "text/plain; charset=utf8x", None, Outcome.CHARSET),
    (b"User-agent: caf\xe9\n", "text/plain; charset=utf-8", None, Outcome.CHARSET),
    (b"User-agent: caf\xe9\n", "text/plain; charset=iso-8859-1", None, Outcome.OK),
    (b"User-agent: *\n", "text/plain", 12_000_000, Outcome.TOO_BIG),
])
def test_body(body: bytes, content_type: str, size: int | None, outcome: Outcome) -> None:
    assert body_outcome(body, content_type=content_type, size=size,
                        max_bytes=500 * 1024) == outcome

"""Google's own robots.txt test cases (../shared/conformance), run against every dialect they
describe: all 545 verdicts in the ``google`` dialect, the RFC 9309 ones in the default."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

import pytest

from polite.core.robots.parser import escape_google_pattern
from polite.core.urls import path_params_query
from polite.robots import parse
from tests.conftest import shared_path

VERDICT_FILES = ("google_robotstxt_verdicts.json", "spec_test_verdicts.json")


def _load(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(shared_path("conformance", name).read_text("utf-8"))
    return cases


def _body(case: dict[str, Any]) -> bytes:
    if "robotstxt_b64" in case:
        return base64.b64decode(case["robotstxt_b64"])
    return str(case["robotstxt"]).encode("utf-8")


def _verdicts() -> list[dict[str, Any]]:
    try:
        return [case for name in VERDICT_FILES for case in _load(name)]
    except pytest.skip.Exception:
        return []


VERDICTS = _verdicts()


def test_conformance_data_is_present() -> None:
    for name in VERDICT_FILES:
        assert _load(name), name
    assert len(VERDICTS) == 545


# Google's library leaves percent-encoding a URL to its caller, and these cases hand it a raw
# non-ASCII one, which no user agent sends. polite is that caller: it encodes the URL as
# UTF-8 first (RFC 3986), so these answer as Google's parser answers the encoded URL.
RAW_NON_ASCII = frozenset({"ID_Encoding#3", "ID_Encoding#5", "correctness/non-ascii-paths#2.2",
                           "correctness/non-ascii-paths#3.2"})


@pytest.mark.parametrize("case", VERDICTS, ids=[c["id"] for c in VERDICTS])
def test_google_dialect_matches_googles_parser(case: dict[str, Any]) -> None:
    robots = parse(_body(case), "google")
    allowed = robots.allowed(case["url"], case["user_agent"])
    if case["id"] in RAW_NON_ASCII:
        encoded = "".join(c if c.isascii() else quote(c) for c in case["url"])
        assert allowed is robots.allowed(encoded, case["user_agent"]) is not case["allowed"]
        return
    assert allowed is case["allowed"], case["note"]


RFC_CASES = [c for c in VERDICTS if not c["google_specific"]]


@pytest.mark.parametrize("case", RFC_CASES, ids=[c["id"] for c in RFC_CASES])
def test_default_dialect_passes_the_rfc9309_cases(case: dict[str, Any]) -> None:
    robots = parse(_body(case))
    assert robots.dialect == "rfc9309"
    assert robots.allowed(case["url"], case["user_agent"]) is case["allowed"], case["note"]


def _helpers(kind: str) -> list[dict[str, Any]]:
    try:
        return [c for c in _load("google_robotstxt_helpers.json") if c["kind"] == kind]
    except pytest.skip.Exception:
        return []


@pytest.mark.parametrize("case", _helpers("path_params_query"), ids=lambda c: c["id"])
def test_path_params_query(case: dict[str, Any]) -> None:
    assert path_params_query(case["url"]) == case["expected"]


@pytest.mark.parametrize("case", _helpers("escape_pattern"), ids=lambda c: c["id"])
def test_escape_pattern(case: dict[str, Any]) -> None:
    octets = case["input"].encode("utf-8").decode("latin-1")
    assert escape_google_pattern(octets) == case["expected"]


@pytest.mark.parametrize("case", _helpers("sitemap_lines"), ids=lambda c: c["id"])
def test_sitemap_lines(case: dict[str, Any]) -> None:
    assert list(parse(_body(case), "google").sitemaps) == case["expected"]

"""Robots META tags and X-Robots-Tag headers (seeds 001-003, Google's documented directives)."""

from __future__ import annotations

import calendar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polite.core.robots.meta import (
    RobotsDirectives,
    combine,
    parse_meta_content,
    parse_meta_tags,
    parse_x_robots_tag,
)

WHEN = calendar.timegm((2010, 6, 25, 23, 0, 0))  # 15:00 PST


@pytest.mark.parametrize(
    ("content", "noindex", "nofollow"),
    [
        ("NOINDEX", True, False),
        ("NOFOLLOW", False, True),
        ("NOINDEX, NOFOLLOW", True, True),
        ("noindex,nofollow", True, True),
        ("NONE", True, True),
        ("ALL", False, False),
        ("INDEX, FOLLOW", False, False),
        # "INDEX,NOINDEX,NOFOLLOW,FOLLOW,FOLLOW" (seed 002): the restrictive ones win.
        ("INDEX,NOINDEX,NOFOLLOW,FOLLOW,FOLLOW", True, True),
    ],
)
def test_seed_002_directives(content: str, noindex: bool, nofollow: bool) -> None:
    found = parse_meta_content(content)
    assert (found.noindex, found.nofollow) == (noindex, nofollow)
    assert found.can_index is not noindex and found.can_follow is not nofollow
    assert found.issues == ()


def test_valued_directives() -> None:
    found = parse_meta_content(
        "noarchive, nosnippet, max-snippet:50, max-image-preview:large, max-video-preview:-1, "
        "unavailable_after: 25 Jun 2010 15:00:00 PST, notranslate, noimageindex")
    assert found.noarchive and found.nosnippet and found.notranslate and found.noimageindex
    assert found.max_snippet == 50
    assert found.max_image_preview == "large"
    assert found.max_video_preview == -1
    assert found.unavailable_after == WHEN
    assert found.can_index_at(WHEN - 1) and not found.can_index_at(WHEN)


@pytest.mark.parametrize(
    "date",
    ["25 Jun 2010 15:00:00 PST", "Friday, 25-Jun-10 15:00:00 PST", "2010-06-25T15:00:00-08:00"],
)
def test_unavailable_after_date_forms(date: str) -> None:
    assert parse_meta_content(f"unavailable_after: {date}").unavailable_after == WHEN


def test_bad_tokens_are_reported_not_raised() -> None:
    found = parse_meta_content("noindex, max-snippet:lots, max-image-preview:huge, fly, "
                               "unavailable_after: someday")
    assert found.noindex
    assert found.max_snippet is None and found.max_image_preview is None
    assert len(found.issues) == 4


def test_combine_takes_the_most_restrictive() -> None:
    a = parse_meta_content("max-snippet:-1, max-image-preview:large, unavailable_after: "
                           "2030-01-01")
    b = parse_meta_content("max-snippet:20, max-image-preview:standard, unavailable_after: "
                           "2020-01-01, nofollow")
    both = combine(a, b)
    assert both.max_snippet == 20
    assert both.max_image_preview == "standard"
    assert both.unavailable_after == calendar.timegm((2020, 1, 1, 0, 0, 0))
    assert both.nofollow and not both.noindex
    assert combine() == RobotsDirectives()


def test_x_robots_tag_with_and_without_agents() -> None:
    headers = ["googlebot: noindex", "otherbot: nofollow", "noarchive",
               "unavailable_after: 25 Jun 2010 15:00:00 PST"]
    for_google = parse_x_robots_tag(headers, "Googlebot/2.1")
    assert for_google.noindex and not for_google.nofollow and for_google.noarchive
    assert for_google.unavailable_after == WHEN
    for_other = parse_x_robots_tag(headers, "OtherBot")
    assert for_other.nofollow and not for_other.noindex
    assert parse_x_robots_tag([], "bot") == RobotsDirectives()


def test_meta_tags_for_robots_and_the_agent() -> None:
    page = b"""<html><head><title>x</title>
    <META NAME="ROBOTS" CONTENT="NOINDEX">
    <meta name="examplebot" content="nofollow, max-snippet:10">
    <meta name="otherbot" content="noarchive">
    <meta name="description" content="noindex, nofollow">
    </head><body><meta name="robots" content="nosnippet"></body></html>"""
    found = parse_meta_tags(page, "ExampleBot/1.0")
    assert found.noindex and found.nofollow and found.max_snippet == 10
    assert not found.noarchive
    assert not found.nosnippet  # after <body>
    assert not parse_meta_tags("<html><head></head></html>", "bot").noindex


def test_seed_003_example() -> None:
    page = '<html>\n<head>\n<title>...</title>\n<META NAME="ROBOTS" CONTENT="NOINDEX, NOFOLLOW">'
    found = parse_meta_tags(page, "anybot")
    assert found.noindex and found.nofollow


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.text(max_size=30))
def test_garbage_never_raises(text: str, agent: str) -> None:
    assert isinstance(parse_meta_content(text), RobotsDirectives)
    assert isinstance(parse_x_robots_tag([text, text[::-1]], agent), RobotsDirectives)
    assert isinstance(parse_meta_tags("<head><meta name=robots content='" + text, agent),
                      RobotsDirectives)
    assert isinstance(parse_meta_tags(text.encode("utf-8", "surrogatepass"), agent),
                      RobotsDirectives)

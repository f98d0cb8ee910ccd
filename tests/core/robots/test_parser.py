"""Lenient reading of messy robots.txt bodies, with every oddity reported by line."""

from __future__ import annotations

from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polite.core._steps import finish
from polite.core.robots.model import fold_issues
from polite.core.robots.parser import (
    _NOT_A_FIELD,
    ParsedBody,
    RawIssue,
    _has_long_line,
    _Reader,
    detect_dialect,
    issue_from_raw,
    parse_body,
    read_issues,
    split_lines,
)
from polite.core.robots.parser import MAX_LINE_OCTETS as LONG
from polite.robots import MAX_ROBOTS_BYTES, Dialect, ParseIssue, Severity, parse
from tests.conftest import shared_path
from tests.core.robots.test_compiled_once import counted_lines


def _codes(body: bytes | str, dialect: str = "auto") -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    for issue in parse(body, dialect).issues:
        found.setdefault(issue.line, set()).add(issue.code)
    return found


def test_line_endings_all_work_and_count_lines_alike() -> None:
    for newline in ("\n", "\r", "\r\n"):
        body = newline.join(["User-agent: *", "Disallow: /a", "junk line here", ""])
        robots = parse(body)
        assert not robots.allowed("http://e.com/a", "bot"), repr(newline)
        assert _codes(body)[3] == {"no-separator"}


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab \r\n\x0b\x0c\x1c\x1d\x1e\x85\xe9", max_size=40))
def test_lines_end_at_cr_lf_or_crlf_alone(text: str) -> None:
    # a body decoded as Latin-1: what str.splitlines() also breaks at there (vertical tab,
    # form feed, NEL, ...) is within a line
    assert split_lines(text) == text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def test_other_line_breaks_beside_cr_are_no_line_ends() -> None:
    body = b"User-agent: *\r\nDisallow: /a\x85b\r\nDisallow: /c\x0bd\r\njunk\r\n"
    robots = parse(body)
    rules = robots.groups[0].rules
    assert [r.line for r in rules] == [2, 3] and rules[1].pattern == "/c\x0bd"
    assert _codes(body)[4] == {"no-separator"}


def test_bom_and_typos_and_missing_colon_are_read_and_reported() -> None:
    body = "\ufeffUser-agent: *\nDisalow: /a\nDisallow /b\nuser_agent: other\n".encode()
    robots = parse(body)
    assert not robots.allowed("http://e.com/a", "bot")
    assert not robots.allowed("http://e.com/b", "bot")
    codes = _codes(body)
    assert "bom" in codes[1]
    assert codes[2] == {"typo"}
    assert codes[3] == {"missing-colon"}
    assert codes[4] == {"typo"}


def test_nul_bytes_cut_the_line_and_are_reported() -> None:
    robots = parse(b"User-agent: *\nDisallow: /a\x00bc\nDisallow: /z\n")
    assert not robots.allowed("http://e.com/a", "bot")
    assert not robots.allowed("http://e.com/z", "bot")
    assert "nul" in _codes(b"User-agent: *\nDisallow: /a\x00bc\n")[2]


def test_rules_before_any_user_agent_are_ignored_and_reported() -> None:
    body = "Disallow: /\nUser-agent: *\nDisallow: /private\n"
    assert parse(body).allowed("http://e.com/public", "bot")
    assert "rule-outside-group" in _codes(body)[1]


def test_over_long_lines_are_cut_and_reported() -> None:
    body = "User-agent: *\nDisallow: /" + "x" * 20_000 + "\nDisallow: /y\n"
    robots = parse(body)
    assert not robots.allowed("http://e.com/y", "bot")
    assert "line-too-long" in _codes(body)[2]


def test_body_over_the_cap_is_cut_and_says_so() -> None:
    body = b"User-agent: *\nDisallow: /early\n" + b"#" * MAX_ROBOTS_BYTES + b"\nDisallow: /late\n"
    robots = parse(body)
    assert robots.truncated
    assert robots.size == len(body)
    assert not robots.allowed("http://e.com/early", "bot")
    assert robots.allowed("http://e.com/late", "bot")
    assert any(i.code == "truncated" and i.line == 0 for i in robots.issues)
    assert not parse(body, max_bytes=len(body)).allowed("http://e.com/late", "bot")


def test_html_served_as_robots_txt_is_flagged() -> None:
    robots = parse(b"<!DOCTYPE html>\n<html><head><title>Not found</title></head></html>")
    assert robots.looks_like_html
    assert robots.allowed("http://e.com/anything", "bot")
    assert not parse(b"User-agent: *\nDisallow:\n").looks_like_html


def test_invalid_utf8_is_matched_as_bytes() -> None:
    body = b"User-agent: *\nDisallow: /caf\xe9\n"  # Latin-1, not UTF-8
    robots = parse(body)
    assert not robots.allowed("http://e.com/caf%E9", "bot")
    assert robots.allowed("http://e.com/cafe", "bot")


def test_non_ascii_rules_match_percent_encoded_urls() -> None:
    robots = parse("User-agent: *\nDisallow: /ツ\nDisallow: /%62%61%7A\n")
    assert not robots.allowed("http://e.com/%E3%83%84", "bot")
    assert not robots.allowed("http://e.com/ツ", "bot")
    assert not robots.allowed("http://e.com/baz", "bot")
    assert not robots.allowed("http://e.com/%62az", "bot")
    # %2F is a slash only when written as one (RFC 9309, 2.2.2).
    assert parse("User-agent: *\nDisallow: /a/b\n").allowed("http://e.com/a%2Fb", "bot")


def test_sitemaps_are_collected_resolved_and_deduplicated() -> None:
    body = ("Sitemap: /sitemap.xml\nUser-agent: *\nSitemap: <https://e.com/news.xml>\n"
            "Sitemap: https://e.com/news.xml # again\nDisallow:\n")
    robots = parse(body, url="https://e.com/robots.txt")
    assert robots.sitemaps == ("https://e.com/sitemap.xml", "https://e.com/news.xml")
    assert parse(body).sitemaps[0] == "/sitemap.xml"


def test_groups_merge_and_specific_beats_star() -> None:
    body = ("User-agent: *\nDisallow: /\n\nUser-agent: FooBot\nDisallow: /a\n\n"
            "User-agent: foobot\nDisallow: /b\n")
    robots = parse(body)
    assert not robots.allowed("http://e.com/a", "FooBot")
    assert not robots.allowed("http://e.com/b", "FooBot/2.1")
    assert robots.allowed("http://e.com/c", "FooBot")
    assert not robots.allowed("http://e.com/c", "OtherBot")
    assert robots.rules_for("foobot") == tuple(robots.groups[1].rules + robots.groups[2].rules)


def test_other_fields_do_not_end_a_group() -> None:
    body = "User-agent: a\nCrawl-delay: 3\nUser-agent: b\nDisallow: /x\n"
    robots = parse(body)
    assert not robots.allowed("http://e.com/x", "a")
    assert robots.agent_rules("b").crawl_delay_s == 3.0


def test_typed_fields_per_agent() -> None:
    body = ("Host: www.e.com\nClean-param: ref&sid /forum/\n"
            "User-agent: *\nCrawl-delay: 2.5\nRequest-rate: 1/10m 0600-0845\n"
            "Visit-time: 0100-0500\nSite-name: www.e.com | e.com\n"
            "Site-temp-name: www.temp.e.com=>127.0.0.1\n"
            "Last-updated: /info/aboutus.html=>1431507724\nX-Custom: hello\n")
    robots = parse(body)
    rules = robots.agent_rules("bot")
    assert rules.crawl_delay_s == 2.5
    assert rules.request_rate is not None
    assert rules.request_rate.interval_s == 600
    assert rules.request_rate.window is not None
    assert (rules.request_rate.window.start_s, rules.request_rate.window.end_s) == (21600, 31500)
    assert [(w.start_s, w.end_s) for w in rules.visit_time] == [(3600, 18000)]  # type: ignore[union-attr]
    assert rules.clean_params[0].params == ("ref", "sid")
    assert robots.host == "www.e.com"
    values = {d.key: d.value for d in robots.extensions}
    assert values["site-name"] == ("www.e.com", "e.com")
    assert values["site-temp-name"] == ("www.temp.e.com", "127.0.0.1")
    assert values["last-updated"] == ("/info/aboutus.html", 1431507724)
    assert values["x-custom"] is None
    assert robots.delay_s("bot") == 600


def test_unreadable_values_are_reported_not_invented() -> None:
    body = "User-agent: *\nCrawl-delay: soon\nRequest-rate: fast\nVisit-time: noon\n"
    robots = parse(body)
    rules = robots.agent_rules("bot")
    assert rules.crawl_delay_s is None and rules.request_rate is None and not rules.visit_time
    codes = _codes(body)
    assert codes[2] == codes[3] == codes[4] == {"bad-value"}


def test_regp_braces_are_checked() -> None:
    body = "Robot-version: 3.0\n\nUser-agent: *\n{\nAllow: /a\n}\n}\n{\nCrawl-delay: 1\n"
    codes = _codes(body)
    assert "unmatched-brace" in codes[7]
    assert "unclosed-brace" in codes[8]


def test_auto_dialect() -> None:
    assert parse("Robot-version: 3.0\nUser-agent: *\n").dialect is Dialect.REGP
    assert parse("robot-version: 2.0\nUser-agent: *\n").dialect is Dialect.RFC9309
    assert parse("User-agent: *\n").dialect is Dialect.RFC9309
    assert parse("Robot-version: 3.0\n", "koster1996").dialect is Dialect.KOSTER1996


@pytest.mark.parametrize(("body", "dialect"), [
    ("User-agent: a\nDisallow: /\nRobot-version: 3.0\nAllow: /b\n\nDisallow: /c\n", "regp"),
    ("  Robot-VERSION : 4\n{\n}\n", "regp"),
    ("User-agent: *\rrobot-version: 3\nDisallow: /a\n", "rfc9309"),  # not at a line's start
    ("robot_version: 3\nUser-agent: *\n", "rfc9309"),  # read as a typo, not detected
    ("# robot-version: 3\nUser-agent: *\n", "rfc9309"),
    ("\ufeffrobot-version: 3.0\nUser-agent: *\n", "rfc9309"),
    ("robot-version 3.0\nUser-agent: a\n", "rfc9309"),
    ("Robot-version: 2.0\nx-version: 3\n", "rfc9309"),
])
def test_auto_dialect_is_the_detected_one_after_the_lines_are_read(body: str, dialect: str
                                                                      ) -> None:
    """The file is read as RFC 9309 and again as REGP only when a Robot-version line says
    3.0 or more: the dialect is what :func:`detect_dialect` says of the whole text, and the
    groups are those of that dialect's reading."""
    robots = parse(body)
    assert robots.dialect is detect_dialect(body) is Dialect(dialect)
    assert robots.groups == parse(body, dialect).groups


@pytest.mark.parametrize("lengths", [
    [0], [LONG], [LONG + 1], [LONG, LONG], [LONG, LONG + 1], [3 * LONG, 0], [1, LONG - 1, 2],
    [LONG // 2, LONG // 2, LONG // 2, LONG + 2], [LONG - 1] * 5 + [LONG + 1], [LONG] * 7,
])
def test_over_long_lines_are_found_wherever_they_are(lengths: list[int]) -> None:
    text = "\n".join("x" * n for n in lengths)
    assert _has_long_line(text) is (max(lengths) > LONG)


HTML_PAGE = "<!DOCTYPE html>\n<html>\n<head><title>Not found</title></head>\n<body>\n" + "".join(
    f"<p>Line {n}: nothing here</p>\n<div class='x'>{n}</div>\n" for n in range(500)
) + "</body>\n</html>\n"


def test_an_html_page_is_said_to_be_one_once_with_the_lines_it_skipped() -> None:
    robots = parse(HTML_PAGE)
    (issue,) = robots.issues
    assert (issue.line, issue.code, issue.severity) == (1, "html", "error")
    assert issue.count == 1_006 and issue.lines == (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
    assert "1,006 lines of it skipped" in issue.message


# Lines of an HTML page's kinds: markup, text, fields, CSS and script, white space, comments,
# NUL bytes, Latin-1 letters and other line breaks of str.splitlines(), field names with typos.
_PAGE_PARTS = ["<p>", "</div>", " ", "\t", "\v", "\f", "#", ":", "a", "Z", "\xe9", "\xaa",
               "\xb2", "\x85", "\x1c", "\x00", "1", "-", "_", "x y", "color", "User-agent",
               "user agent", "Disallow", "disalow", "Allow", "Sitemap", "Crawl-delay", "/p*",
               "http", "//e.com/sitemap.xml", "{", "}", "Robot-version", "3.0", "\u30c4",
               "y" * (LONG // 2 + 1)]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PAGE_PARTS), max_size=6).map("".join), max_size=40),
       st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=1, max_size=3))
def test_an_html_page_reads_as_its_lines_read_one_by_one(lines: list[str],
                                                          newlines: list[str]) -> None:
    """A page's lines of markup are counted by one search over its text, not read one by one:
    its groups, rules, fields and issues are what reading every line gives, the skipped
    lines' count and first numbers in its html issue. Its line ends are one kind, or kinds
    in turn (a page of CR LF is read with its CRs, one with a CR of its own is not)."""
    rows = ["<html>", *lines, "</html>"]
    text = "".join(row + newlines[i % len(newlines)] for i, row in enumerate(rows))
    body = text[:-len(newlines[(len(rows) - 1) % len(newlines)])].encode("utf-8",
                                                                        "surrogatepass")
    for dialect in (Dialect.RFC9309, Dialect.GOOGLE):
        page = parse_body(body, dialect)
        assert page.looks_like_html
        octets = body.decode("latin-1")
        # the same lines read one by one, as a file that is no HTML page is
        whole = _Reader(dialect, None, [])
        finish(whole.read(octets, html=False))
        assert page.groups == ParsedBody(dialect, *finish(whole.close())).groups
        assert page.global_directives == tuple(whole.global_directives)
        assert page.sitemaps == tuple(whole.sitemaps)
        assert page.line_count == whole.line_count
        issues = [issue_from_raw(raw) for raw in sorted(page.raw_issues, key=lambda r: r[0])]
        read = [issue_from_raw(cast("RawIssue", tuple(whole.issues[at:at + 5])))
                for at in range(0, len(whole.issues), 5)]
        skipped = sorted(i.line for i in read if i.code in _NOT_A_FIELD)
        assert [i for i in issues if i.code not in _NOT_A_FIELD and i.code != "html"] == \
            [i for i in sorted(read, key=lambda i: i.line) if i.code not in _NOT_A_FIELD]
        html = next(i for i in read_issues(page) if i.code == "html")
        if skipped:
            assert (html.count, html.lines) == (len(skipped), tuple(skipped[:10])), skipped
        else:
            assert html.count == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PAGE_PARTS), max_size=6).map("".join), max_size=30))
def test_an_html_page_of_cr_lf_lines_is_read_as_the_same_page_of_lf(lines: list[str]) -> None:
    """A page of CR LF line ends is read with its CRs (no copy with them replaced): what it
    gives, field for field, is what the same page of LF line ends gives."""
    text = "\n".join(["<html>", *lines, "</html>"])
    for dialect in (Dialect.RFC9309, Dialect.GOOGLE):
        lf = parse_body(text.encode("utf-8", "surrogatepass"), dialect)
        crlf = parse_body(text.replace("\n", "\r\n").encode("utf-8", "surrogatepass"), dialect)
        assert lf.looks_like_html and crlf.looks_like_html
        assert (crlf.line_count, crlf.markup_count, crlf.markup_lines, crlf.groups,
                crlf.global_directives, crlf.sitemaps, crlf.raw_issues) == \
            (lf.line_count, lf.markup_count, lf.markup_lines, lf.groups,
             lf.global_directives, lf.sitemaps, lf.raw_issues)


def test_an_html_pages_markup_is_not_read_line_by_line() -> None:
    """Read line by line, a page's markup took most of its time (as long as Protego took
    over it): a line of markup is now counted by one search over the page's text."""
    def lines_run(rows: int) -> int:
        body = "<html>\n" + "".join(f"  <p>item {i}</p>\n\n" for i in range(rows)) + "</html>"
        with counted_lines() as count:
            robots = parse(body)
        html = robots.issues[0]
        assert html.code == "html" and html.count == rows + 2
        return count[0]
    assert lines_run(3000) - lines_run(30) < 100  # 47,676 more before


def test_identical_issues_are_said_once_with_their_lines() -> None:
    body = "User-agent:\nDisallow: /a\nUser-agent:\nDisallow: /b\nUser-agent:\nDisalow: /c\n"
    issues = parse(body).issues
    assert [(i.line, i.code, i.count, i.lines) for i in issues] == [
        (1, "empty-user-agent", 3, (1, 3, 5)), (6, "typo", 1, ())]
    assert issues[0].message == "User-agent with no value (3 times: lines 1, 3, 5)"


def test_distinct_problems_keep_their_own_lines() -> None:
    body = "User-agent: *\nDisalow: /a\nUseragent: b\nCrawl-delay: soon\nCrawl-delay: later\n"
    issues = parse(body).issues
    assert [(i.line, i.code, i.count) for i in issues] == [
        (2, "typo", 1), (3, "typo", 1), (4, "bad-value", 1), (5, "bad-value", 1)]


def test_many_issues_of_one_kind_are_said_once_with_a_count_and_the_first_lines() -> None:
    body = "User-agent: *\nDisallow: /a\n" + "".join(f"junk {n} here\n" for n in range(3, 40))
    (issue,) = parse(body).issues
    assert (issue.line, issue.code, issue.count) == (3, "no-separator", 37)
    assert issue.lines == tuple(range(3, 13))
    assert issue.message == ("no ':' separator; line skipped: 'junk 3 here' (37 lines of this "
                             "kind: 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, ...)")


@pytest.mark.parametrize("issues, expected", [
    ([], []),
    ([ParseIssue(4, "a", "m")], [ParseIssue(4, "a", "m")]),
    ([ParseIssue(1, "a", "m"), ParseIssue(2, "b", "m"), ParseIssue(3, "a", "n")],
     [ParseIssue(1, "a", "m"), ParseIssue(2, "b", "m"), ParseIssue(3, "a", "n")]),
    ([ParseIssue(1, "a", "m"), ParseIssue(2, "b", "m"), ParseIssue(3, "a", "m")],
     [ParseIssue(1, "a", "m (2 times: lines 1, 3)", count=2, lines=(1, 3)),
      ParseIssue(2, "b", "m")]),
    # already counted (a sitemap's issues are merged as they are read)
    ([ParseIssue(2, "a", "m", count=3, lines=(2, 5, 9)), ParseIssue(12, "a", "m")],
     [ParseIssue(2, "a", "m (4 times: lines 2, 5, 9, 12)", count=4, lines=(2, 5, 9, 12))]),
    ([ParseIssue(n, "a", f"m{n}") for n in range(1, 12)],
     [ParseIssue(1, "a", "m1 (11 lines of this kind: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...)",
                 count=11, lines=tuple(range(1, 11)))]),
    # a severity apart is another problem
    ([ParseIssue(1, "a", "m", Severity.ERROR), ParseIssue(2, "a", "m")],
     [ParseIssue(1, "a", "m", Severity.ERROR), ParseIssue(2, "a", "m")]),
])
def test_fold_issues(issues: list[ParseIssue], expected: list[ParseIssue]) -> None:
    assert fold_issues(issues) == expected


def test_the_corpus_html_page_lints_in_a_few_lines() -> None:
    robots = parse(shared_path("corpus", "robots", "www.hermes.com.txt").read_bytes())
    issues = robots.issues
    assert len(issues) < 12, issues
    html = next(i for i in issues if i.code == "html")
    assert html.count == 1_916
    assert not {"no-separator", "not-a-field"} & {i.code for i in issues}


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.text(max_size=60))
def test_arbitrary_bytes_never_raise(body: bytes, path: str) -> None:
    for dialect in ("auto", "google", "koster1996", "regp"):
        robots = parse(body, dialect)
        robots.allowed("http://e.com/" + path, "bot", ip="1.2.3.4")
        robots.decide(path, "*")
        robots.agent_rules("bot", url="http://e.com/" + path)
        assert all(issue.line >= 0 for issue in robots.issues)


LINES = st.sampled_from([
    "User-agent: *", "User-agent: bot", "Disallow: /a", "Allow: /a/b", "Disallow: /*.php$",
    "Crawl-delay: 4", "{", "}", "", "Ip-allow: 1.2.*", "Robot-version: 3.0", "Sitemap: /s.xml",
    "Disallow:", "Visit-time: 0100-0200", "# comment", "garbage", "Request-rate: 3/m",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=30), st.sampled_from(["\n", "\r\n", "\r"]))
def test_structured_garbage_never_raises(lines: list[str], newline: str) -> None:
    body = newline.join(lines)
    for dialect in ("auto", "google", "koster1996", "regp"):
        robots = parse(body, dialect)
        for path in ("/", "/a", "/a/b", "/x.php"):
            assert isinstance(robots.allowed("http://e.com" + path, "bot"), bool)
            robots.delay_s("bot", url="http://e.com" + path)


def test_checker_binds_the_agent() -> None:
    robots = parse("User-agent: a\nDisallow: /x\n\nUser-agent: *\nDisallow: /y\n")
    for_a, for_b = robots.checker("a"), robots.checker("b")
    assert not for_a("http://e.com/x") and for_a("http://e.com/y")
    assert for_b("http://e.com/x") and not for_b("http://e.com/y")

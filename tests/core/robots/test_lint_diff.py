"""lint over the whole corpus, checked against Google's reading of each line; diff on real
pairs of files."""

from __future__ import annotations

import re

import pytest

from polite.robots import UNNAMED_AGENT, Dialect, LineKind, diff_bodies, lint_body, parse
from tests.conftest import shared_path

# Google's robots.cc, GetKeyAndValueFrom and ParsedRobotsKey, written out here on their own as
# the oracle: which lines Google's parser takes as User-agent, Allow, Disallow or Sitemap.
_GOOGLE_KEYS = (("user-agent", ("user-agent", "useragent", "user agent")),
                ("allow", ("allow",)),
                ("disallow", ("disallow", "dissallow", "dissalow", "disalow", "diasllow",
                              "disallaw")),
                ("sitemap", ("sitemap", "site-map")))


def google_field(line: str) -> str | None:
    line = line.split("#", 1)[0].strip(" \t\v\f")
    if ":" in line:
        key = line.split(":", 1)[0].strip(" \t")
    else:
        words = line.split()
        if len(words) != 2:
            return None
        key = words[0]
    if not key:
        return None
    lower = key.lower()
    for field, prefixes in _GOOGLE_KEYS:
        if lower.startswith(prefixes):
            return field
    return None


@pytest.mark.slow
def test_lint_classifies_every_corpus_line_as_googles_parser_reads_it() -> None:
    folder = shared_path("corpus", "robots")
    files = sorted(folder.glob("*.txt"))
    assert len(files) > 3000
    lines = directives = 0
    # A line is classified by its text alone: each distinct line (389,000 of the 587,000)
    # is checked against Google's reading once, wherever it appears.
    seen: set[str] = set()
    for path in files:
        body = path.read_bytes()
        report = lint_body(body, Dialect.GOOGLE, max_bytes=len(body) + 1)
        text = body.decode("latin-1")
        if text.startswith("\xef\xbb\xbf"):
            text = text[3:]
        rows = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if rows[-1] == "":
            rows.pop()
        assert [c.line for c in report.lines] == list(range(1, len(rows) + 1)), path.name
        for c, row in zip(report.lines, rows, strict=True):
            if row in seen:
                continue
            seen.add(row)
            expected = google_field(row[:2083 * 8 - 1].split("\x00", 1)[0])
            if expected is not None:
                assert c.kind is LineKind.DIRECTIVE and c.field == expected, (path.name, c)
                directives += 1
            elif c.kind is LineKind.DIRECTIVE:
                # polite also reads "User_agent" and a bare sitemap URL; nothing else.
                assert c.typo, (path.name, c)
        lines += len(rows)
    assert lines > 500_000 and directives > 130_000  # distinct directive lines


def test_lint_checks_what_webmasters_get_wrong() -> None:
    body = ("Disallow: /early\nUser-agent: *\nDisallow: /\nCrawl-delay: 5\n\n"
            "User-agent: Mozilla/5.0 (compatible; Googlebot/2.1)\nDisallow: /x\n\n"
            "User-agent: bot1\nDisallow: /y\n\nUser-agent: BOT1\nDisallow: /z\nUnknownField: 1\n"
            "Sitemap: /sitemap.xml\nSitemap: ftp://e.com/s.xml\nDisalow /t\n")
    report = lint_body(body, content_type="text/html; charset=utf-8")
    codes = {(i.line, i.code) for i in report.issues}
    assert {(1, "rule-outside-group"), (3, "disallow-all"), (4, "crawl-delay-ignored-by-google"),
            (6, "full-user-agent"), (9, "google-cuts-agent"), (12, "agent-in-two-groups"),
            (14, "unknown-field"), (15, "relative-sitemap"), (16, "sitemap-scheme"),
            (17, "missing-colon"), (0, "html-content-type")} <= codes
    unknown = next(i for i in report.issues if i.code == "unknown-field")
    assert unknown.severity.value == "warning"
    labels = [c.label for c in report.lines]
    assert labels[:5] == ["directive", "directive", "directive", "directive", "blank"]
    assert labels[13] == "unknown" and labels[16] == "missing-colon"
    google = lint_body(body, Dialect.GOOGLE)
    assert google.lines[3].kind is LineKind.UNUSED  # Crawl-delay: Google reads no such field


def test_lint_regp_checks() -> None:
    body = "User-agent: *\n# not a REGP comment\nDisallow: /a\n{\nRobot-version: 3.0\n"
    report = lint_body(body, Dialect.REGP)
    codes = {i.code for i in report.issues}
    assert {"regp-single-hash", "regp-header-late", "unclosed-brace"} <= codes
    assert report.lines[3].kind is LineKind.BRACE


def test_lint_counts_an_over_long_line() -> None:
    report = lint_body("User-agent: *\nDisallow: /" + "a" * 20_000 + "\n")
    assert report.lines[1].label == "too-long" and report.lines[1].kind is LineKind.DIRECTIVE


def _corpus(name: str) -> bytes:
    return shared_path("corpus", "robots", f"{name}.txt").read_bytes()


def test_diff_of_two_related_hosts() -> None:
    found = diff_bodies(_corpus("news.abs-cbn.com"), _corpus("www.abs-cbn.com"))
    assert found.sampled and found.dialect is Dialect.RFC9309
    assert found.agents == ("Mediapartners-Google*", "grapeshot", "bingbot", UNNAMED_AGENT)
    assert [n for n, _ in found.removed] == [4, 5, 6, 7, 8] and found.added == ()
    changes = {(c.agent, c.url, c.old_rule.line if c.old_rule else None) for c in found.changes}
    assert changes == {(agent, url, line) for agent in ("Mediapartners-Google*", UNNAMED_AGENT)
                       for url, line in (("/print.aspx", 7), ("/printmail.aspx", 8),
                                         ("/special-pages/", 5),
                                         ("/special-pages/sample", 5))}
    assert all(c.opened and c.new_rule is None for c in found.changes)


def test_diff_of_a_file_and_an_edited_copy_with_given_urls_and_agents() -> None:
    old = _corpus("www.abs-cbn.com").decode()
    new = re.sub(r"Disallow: /admin/", "Disallow: /admin/\nAllow: /admin/help", old)
    new = re.sub(r"(User-agent: bingbot\r?\nDisallow:)", r"\1 /", new)  # CRLF file
    found = diff_bodies(old, new, urls=["https://www.abs-cbn.com/admin/help/a",
                                        "https://www.abs-cbn.com/news"],
                        agents=["bingbot", "OtherBot"])
    got = {(c.agent, c.url, c.allowed, c.new_rule.line if c.new_rule else None)
           for c in found.changes}
    assert got == {("bingbot", "https://www.abs-cbn.com/admin/help/a", False, 12),
                   ("bingbot", "https://www.abs-cbn.com/news", False, 12),
                   ("OtherBot", "https://www.abs-cbn.com/admin/help/a", True, 6)}
    assert not found.sampled


@pytest.mark.parametrize("name", ["httpd.apache.org", "www.cityu.edu.hk"])
def test_diff_of_a_file_with_itself_is_empty(name: str) -> None:
    body = _corpus(name)
    found = diff_bodies(body, body)
    assert found.changes == () and found.removed == found.added == ()


# -- what lint missed: a tie the dialects break apart, a delay of years, a UTF-16 file ----------


@pytest.mark.parametrize("dialect", [Dialect.RFC9309, Dialect.GOOGLE, Dialect.KOSTER1996])
@pytest.mark.parametrize("order", ["Disallow: /page\nAllow: /page\n",
                                   "Allow: /page\nDisallow: /page\n"])
def test_lint_warns_of_an_allow_and_a_disallow_of_one_path(dialect: Dialect,
                                                           order: str) -> None:
    report = lint_body("User-agent: *\n" + order, dialect)
    tied = [i for i in report.issues if i.code == "allow-disallow-tie"]
    assert [i.line for i in tied] == [3]
    assert tied[0].severity.value == "warning"
    first_allows = order.startswith("Allow")
    assert (f"the 1996 draft {'allows' if first_allows else 'disallows'} it"
            in tied[0].message)
    # what the warning says is what the dialects answer
    answers = {d: parse("User-agent: *\n" + order, dialect=d.value).allowed("/page", "X")
               for d in (Dialect.RFC9309, Dialect.GOOGLE, Dialect.KOSTER1996)}
    assert answers[Dialect.RFC9309] and answers[Dialect.GOOGLE]
    assert answers[Dialect.KOSTER1996] is first_allows
    assert not any(i.code == "allow-disallow-tie" for i in lint_body(
        "User-agent: *\nDisallow: /page\nAllow: /page/x\n", dialect).issues)


def test_lint_warns_of_a_delay_over_a_day_and_delay_s_caps_it() -> None:
    body = "User-agent: *\nDisallow: /x\nCrawl-delay: 1e9\nRequest-rate: 1/100000d\n\n" \
           "User-agent: b\nCrawl-delay: 10\n"
    report = lint_body(body)
    long = [i for i in report.issues if i.code == "delay-too-long"]
    assert [i.line for i in long] == [3, 4]
    assert "Crawl-delay: 1e9 asks for 1,000,000,000 s" in long[0].message
    robots = parse(body)
    assert robots.agent_rules("a").crawl_delay_s == 1e9  # kept as read
    assert robots.delay_s("a") == 86_400.0  # the file's delay, capped at a day
    assert robots.delay_s("b") == 10.0


@pytest.mark.parametrize("bom", [b"\xff\xfe", b"\xfe\xff"])
def test_lint_names_a_utf16_file_and_says_it_is_not_read(bom: bytes) -> None:
    text = "User-agent: *\nDisallow: /private/\n"
    body = bom + text.encode("utf-16-le" if bom == b"\xff\xfe" else "utf-16-be")
    report = lint_body(body)
    assert [i.code for i in report.issues] == ["utf-16"]  # not a NUL on every line
    said = next(i for i in report.issues if i.code == "utf-16")
    assert said.severity.value == "error" and said.line == 1
    assert "UTF-16" in said.message and "save it as UTF-8" in said.message
    assert parse(body).allowed("/private/x", "X")  # no rule read, as it says

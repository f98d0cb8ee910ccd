"""AI-usage preferences: the drafts' own examples, every mechanism, conflicts, bad input."""

from __future__ import annotations

import pytest

from polite.core.robots import parse
from polite.core.robots.usage import (
    combine,
    from_headers,
    from_html,
    from_robots,
    from_tdmrep,
)
from polite.core.usage.statement import Pref, parse_rule_value, parse_statement
from polite.core.usage.vocab import AIPREF_REVISIONS, CONTENT_SIGNALS, CURRENT

V07 = AIPREF_REVISIONS["draft-ietf-aipref-vocab-07"]
SITE = "https://example.com"

# draft-ietf-aipref-attach-05, section 3.4, "Example robots.txt file".
ATTACH_EXAMPLE = """\
User-Agent: *
Allow: /
Disallow: /never/
Content-Usage: train-ai=n
Content-Usage: /ai-ok/ train-ai=y

User-Agent: ExampleBot
Allow: /
Content-Usage: train-ai=y
"""


@pytest.mark.parametrize("dialect", ["rfc9309", "google", "regp"])
@pytest.mark.parametrize(("path", "crawl", "pref"), [
    # The draft's table "Sample of usage preferences for different paths".
    ("/test", True, Pref.DISALLOW),
    ("/never/test", False, Pref.UNKNOWN),
    ("/ai-ok/test", True, Pref.ALLOW),
])
def test_attach_example_table(dialect: str, path: str, crawl: bool, pref: Pref) -> None:
    robots = parse(ATTACH_EXAMPLE, dialect)
    url = SITE + path
    assert robots.allowed(url, "OtherBot/1.0") is crawl
    prefs = from_robots(robots, url, "OtherBot/1.0")
    assert prefs.pref("train-ai") is pref
    if pref is not Pref.UNKNOWN:
        (source,) = prefs.answer("train-ai").decided_by
        assert source.vocabulary == CURRENT
        assert source.line == (5 if path.startswith("/ai-ok/") else 4)


@pytest.mark.parametrize("dialect", ["koster1996"])
def test_attach_example_in_first_match_dialects(dialect: str) -> None:
    # In the 1996 draft the first matching Allow/Disallow decides, so "Allow: /"
    # lets /never/ be fetched; the Content-Usage lines still match by longest path.
    robots = parse(ATTACH_EXAMPLE, dialect)
    assert robots.allowed(SITE + "/never/test", "OtherBot") is True
    assert from_robots(robots, SITE + "/never/test", "OtherBot").pref("train-ai") is \
        Pref.DISALLOW
    assert from_robots(robots, SITE + "/ai-ok/test", "OtherBot").pref("train-ai") is \
        Pref.ALLOW
    disallowing = parse("User-agent: *\nDisallow: /never/\nContent-Usage: train-ai=y\n",
                        dialect)
    assert from_robots(disallowing, SITE + "/never/x", "OtherBot").sources == ()


def test_attach_example_named_agent_uses_its_group() -> None:
    robots = parse(ATTACH_EXAMPLE)
    for path in ("/test", "/never/test", "/ai-ok/test"):
        prefs = from_robots(robots, SITE + path, "ExampleBot")
        assert prefs.pref("train-ai") is Pref.ALLOW
        assert prefs.answer("train-ai").decided_by[0].line == 9


def test_attach_intro_example_and_header_example_agree() -> None:
    # draft-ietf-aipref-attach-05, section 1.2: the header and the robots.txt form.
    robots = parse("User-Agent: *\nAllow: /\nContent-Usage: train-ai=n\n")
    assert from_robots(robots, SITE + "/x", "bot").pref("train-ai") is Pref.DISALLOW
    header = from_headers([("Content-Type", "text/plain"), ("Content-Usage", "train-ai=n")],
                          "bot")
    assert header.pref("train-ai") is Pref.DISALLOW
    assert header.pref("search") is Pref.UNKNOWN


@pytest.mark.parametrize(("text", "train", "search"), [
    # draft-ietf-aipref-vocab-07, section 6: the format example.
    ("train-ai=y, search=n", Pref.ALLOW, Pref.DISALLOW),
    # 6.5.1: duplicates keep the last value; a boolean and a string are not tokens.
    ('train-ai=y, train-ai, search=n, search="n"', Pref.UNKNOWN, Pref.UNKNOWN),
    # 6.5.2: the parameters of the losing duplicate do not apply; the last value does.
    ("train-ai;allow=n, train-ai=y", Pref.ALLOW, Pref.UNKNOWN),
    # 6.5.2: parameters on an unknown preference (without the example's final ";").
    ('train-ai;has;parameters="?"', Pref.UNKNOWN, Pref.UNKNOWN),
    ("train-ai=maybe, search=y", Pref.UNKNOWN, Pref.ALLOW),
    ("future-use=n, train-ai=n", Pref.DISALLOW, Pref.UNKNOWN),
])
def test_vocab_examples(text: str, train: Pref, search: Pref) -> None:
    statement = parse_statement(text)
    assert statement.pref(V07, "train-ai") is train
    assert statement.pref(V07, "search") is search


def test_vocab_example_with_trailing_semicolon_is_malformed_so_unknown() -> None:
    # The draft's 6.5.2 example ends in ";" with no parameter after it, which RFC 9651
    # refuses: the header is then ignored and every preference is unknown.
    prefs = from_headers([("Content-Usage", 'train-ai;has;parameters="?";')], "bot")
    assert prefs.pref("train-ai") is Pref.UNKNOWN
    assert prefs.issues and "malformed" in prefs.issues[0]


def test_upper_case_key_fails_the_dictionary() -> None:
    prefs = from_headers([("Content-Usage", "Train-AI=n")], "bot")
    assert prefs.sources == ()
    assert prefs.pref("train-ai") is Pref.UNKNOWN
    assert "malformed" in prefs.issues[0]


@pytest.mark.parametrize(("revision", "text", "purpose", "pref"), [
    # -03 and -04 nest train-ai under bots: bots=n covers train-ai unless it is stated.
    ("draft-ietf-aipref-vocab-03", "bots=n", "train-ai", Pref.DISALLOW),
    ("draft-ietf-aipref-vocab-03", "bots=n, train-ai=y", "train-ai", Pref.ALLOW),
    ("draft-ietf-aipref-vocab-03", "train-ai=n", "train-genai", Pref.DISALLOW),
    ("draft-ietf-aipref-vocab-04", "ai-output=n", "search", Pref.DISALLOW),
    ("draft-ietf-aipref-vocab-02", "all=n", "search", Pref.DISALLOW),
    ("draft-ietf-aipref-vocab-01", "genai=n", "train-genai", Pref.DISALLOW),
    # -07 knows no bots: the key is read without failing and states nothing.
    ("draft-ietf-aipref-vocab-07", "bots=n", "train-ai", Pref.UNKNOWN),
    # -07 has no train-genai: its broader train-ai answers.
    ("draft-ietf-aipref-vocab-07", "train-ai=n", "train-genai", Pref.DISALLOW),
])
def test_versioned_vocabulary(revision: str, text: str, purpose: str, pref: Pref) -> None:
    assert parse_statement(text).pref(AIPREF_REVISIONS[revision], purpose) is pref


def test_revision_is_named_in_the_answer() -> None:
    robots = parse("User-agent: *\nContent-Usage: bots=n\n")
    old = from_robots(robots, SITE + "/", "bot", revision="draft-ietf-aipref-vocab-04")
    assert old.pref("train-ai") is Pref.DISALLOW
    assert old.sources[0].vocabulary == "draft-ietf-aipref-vocab-04"
    assert from_robots(robots, SITE + "/", "bot").pref("train-ai") is Pref.UNKNOWN
    assert parse_statement("bots=n").unknown_keys(V07) == ("bots",)


def test_content_signals_in_a_group() -> None:
    robots = parse("User-agent: *\nContent-Signal: search=yes, ai-input=no, ai-train=no\n"
                   "Allow: /\n")
    prefs = from_robots(robots, SITE + "/page", "bot")
    assert prefs.pref("search") is Pref.ALLOW
    assert prefs.pref("ai-input") is Pref.DISALLOW
    assert prefs.pref("train-ai") is Pref.DISALLOW
    assert prefs.sources[0].vocabulary == CONTENT_SIGNALS.name
    assert prefs.sources[0].mechanism == "robots.txt Content-Signal"


def test_rsl_license_is_kept() -> None:
    robots = parse("License: https://example.com/license.xml\nUser-agent: *\nAllow: /\n")
    assert from_robots(robots, SITE + "/", "bot").licenses == (
        "https://example.com/license.xml",)


def test_most_restrictive_wins_and_both_are_shown() -> None:
    robots = parse("User-agent: *\nContent-Usage: train-ai=y\n")
    prefs = combine(from_robots(robots, SITE + "/", "bot"),
                    from_headers([("tdm-reservation", "1")], "bot"))
    answer = prefs.answer("train-ai")
    assert answer.pref is Pref.DISALLOW
    assert [s.mechanism for s in answer.decided_by] == ["tdm-reservation header"]
    assert [s.mechanism for s in answer.overruled] == ["robots.txt Content-Usage"]
    assert "most restrictive" in answer.reason


def test_identical_paths_apply_together() -> None:
    # attach-05, 3.1: rules with identical paths and conflicting preferences both apply.
    robots = parse("User-agent: *\nContent-Usage: /a/ train-ai=y\n"
                   "Content-Usage: /a/ train-ai=n\n")
    prefs = from_robots(robots, SITE + "/a/b", "bot")
    assert prefs.pref("train-ai") is Pref.DISALLOW
    assert len(prefs.sources) == 2


def test_wildcard_paths_and_longest_match() -> None:
    robots = parse("User-agent: *\nContent-Usage: /*.pdf$ train-ai=n\n"
                   "Content-Usage: / train-ai=y\n")
    assert from_robots(robots, SITE + "/x/doc.pdf", "bot").pref("train-ai") is Pref.DISALLOW
    assert from_robots(robots, SITE + "/x/doc.html", "bot").pref("train-ai") is Pref.ALLOW


def test_malformed_line_skipped_and_reported_with_its_line() -> None:
    robots = parse("User-agent: *\nContent-Usage: train-ai=y,\nContent-Usage: /x\n"
                   "Content-Usage: search=n\n")
    bad = [i for i in robots.issues if i.code == "bad-value"]
    assert [i.line for i in bad] == [2, 3]
    prefs = from_robots(robots, SITE + "/x", "bot")
    assert prefs.pref("search") is Pref.DISALLOW
    assert prefs.pref("train-ai") is Pref.UNKNOWN


def test_over_long_line_is_no_crash() -> None:
    robots = parse("User-agent: *\nContent-Usage: train-ai=" + "n" * 20000 + "\n")
    assert from_robots(robots, SITE + "/", "bot").pref("train-ai") is Pref.UNKNOWN


def test_rule_value_path_split() -> None:
    assert parse_rule_value("/ai-ok/ train-ai=y").path == "/ai-ok/"
    assert parse_rule_value("/a\ttrain-ai=y").path == "/a"
    assert parse_rule_value("train-ai=y").path == ""


def test_x_robots_tag_and_meta_noai() -> None:
    prefs = from_headers([("X-Robots-Tag", "otherbot: noai"), ("X-Robots-Tag", "noindex")],
                         "mybot/1.0")
    assert prefs.pref("train-ai") is Pref.UNKNOWN
    prefs = from_headers([("X-Robots-Tag", "mybot: noai, nofollow")], "mybot/1.0")
    assert prefs.pref("train-ai") is Pref.DISALLOW
    html = '<html><head><meta name="robots" content="noimageai, noai"></head><body>'
    page = from_html(html, "mybot")
    assert page.pref("train-ai") is Pref.DISALLOW
    assert [s.text for s in page.sources] == ["noimageai", "noai"]
    image = from_headers([("X-Robots-Tag", "noimageai"), ("Content-Type", "image/png")], "b")
    assert image.pref("train-ai") is Pref.DISALLOW


def test_bing_noarchive_counts_for_bing_only() -> None:
    headers = [("X-Robots-Tag", "noarchive")]
    assert from_headers(headers, "bingbot/2.0").pref("ai-input") is Pref.DISALLOW
    assert from_headers(headers, "otherbot").sources == ()


def test_tdmrep_header_meta_and_file() -> None:
    assert from_headers([("tdm-reservation", "1"), ("tdm-policy", "https://e.com/p")],
                        "b").licenses == ("https://e.com/p",)
    assert from_headers([("tdm-reservation", "yes")], "b").issues
    meta = from_html('<meta name="tdm-reservation" content="1">', "b")
    assert meta.pref("train-ai") is Pref.DISALLOW
    body = ('[{"location": "/open/*", "tdm-reservation": 0},'
            ' {"location": "/*", "tdm-reservation": 1, "tdm-policy": "https://e.com/p.json"}]')
    assert from_tdmrep(body, SITE + "/open/a").pref("train-ai") is Pref.ALLOW
    closed = from_tdmrep(body, SITE + "/b")
    assert closed.pref("train-ai") is Pref.DISALLOW
    assert closed.licenses == ("https://e.com/p.json",)


@pytest.mark.parametrize("body", ["not json", "{}", "[1, {\"location\": 3}]", "[" * 5000,
                                  '[{"location": "/", "tdm-reservation": true}]'])
def test_tdmrep_bad_files_are_reported(body: str) -> None:
    prefs = from_tdmrep(body, SITE + "/")
    assert prefs.sources == ()
    assert prefs.issues


def test_headers_joined_over_lines_and_bad_headers_never_raise() -> None:
    prefs = from_headers([("Content-Usage", "train-ai=n"), ("Content-Usage", "search=y")], "b")
    assert (prefs.pref("train-ai"), prefs.pref("search")) == (Pref.DISALLOW, Pref.ALLOW)
    for value in ("", "=", "\x00", "a" * 100000, "train-ai=n,,", "(", '"'):
        prefs = from_headers([("Content-Usage", value), ("Content-Signal", value)], "b")
        assert prefs.pref("train-ai") is Pref.UNKNOWN


# TDM Reservation Protocol (TDMRep), W3C TDMRep Community Group final report (the
# CG-FINAL text following "TDMRep, Second Version" of 2024-02-02), section "TDM File on the
# Origin Server", its two tdmrep.json examples.
TDMREP_ALL = '[\n  {\n    "location": "/",\n    "tdm-reservation": 1\n  }\n]'
TDMREP_GROUPS = """[
  {
    "location": "/directory-a/",
    "tdm-reservation": 1
  },
  {
    "location": "/directory-b/html/",
    "tdm-reservation": 1,
    "tdm-policy":"https://provider.com/policies/policy.json"
  },
  {
    "location": "/directory-b/images/*.jpg",
    "tdm-reservation": 0
  }
]"""


def test_tdmrep_report_file_examples() -> None:
    everything = from_tdmrep(TDMREP_ALL, "https://provider.com/any/page.html")
    assert everything.pref("train-ai") is Pref.DISALLOW
    assert everything.licenses == ()
    pdf = from_tdmrep(TDMREP_GROUPS, "https://provider.com/directory-a/doc.pdf")
    assert (pdf.pref("train-ai"), pdf.licenses) == (Pref.DISALLOW, ())
    html = from_tdmrep(TDMREP_GROUPS, "https://provider.com/directory-b/html/p.html")
    assert html.pref("train-ai") is Pref.DISALLOW
    assert html.licenses == ("https://provider.com/policies/policy.json",)
    jpg = from_tdmrep(TDMREP_GROUPS, "https://provider.com/directory-b/images/a.jpg")
    assert jpg.pref("train-ai") is Pref.ALLOW
    # No rule matches: tdm-reservation is unset for the URL.
    png = from_tdmrep(TDMREP_GROUPS, "https://provider.com/directory-b/images/a.png")
    assert (png.sources, png.issues) == ((), ())


def test_tdmrep_report_header_and_meta_examples() -> None:
    # Same report, "TDM Header Field in HTTP Responses" and "TDM Metadata in HTML Content".
    plain = from_headers([("Date", "Wed, 14 Jul 2021 12:07:48 GMT"),
                          ("Content-type", "image/jpg"), ("tdm-reservation", "1")], "b")
    assert (plain.pref("train-ai"), plain.licenses) == (Pref.DISALLOW, ())
    licensed = from_headers([("Content-type", "text/html"), ("tdm-reservation", "1"),
                             ("tdm-policy", "https://provider.com/policies/policy.json")], "b")
    assert licensed.licenses == ("https://provider.com/policies/policy.json",)
    page = from_html('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
                     '<meta name="tdm-reservation" content="1">\n'
                     '<meta name="tdm-policy" '
                     'content="https://provider.com/policies/policy.json">\n'
                     '<title>Document title</title>\n</head>\n<body>\n</body>\n</html>', "b")
    assert page.pref("train-ai") is Pref.DISALLOW
    assert page.licenses == ("https://provider.com/policies/policy.json",)


def test_tdmrep_policy_beside_reservation_0_is_not_processed() -> None:
    policy = "https://provider.com/policies/policy.json"
    assert from_headers([("tdm-reservation", "0"), ("tdm-policy", policy)], "b").licenses == ()
    page = from_html(f'<meta name="tdm-reservation" content="0">'
                     f'<meta name="tdm-policy" content="{policy}">', "b")
    assert page.licenses == ()
    body = f'[{{"location": "/", "tdm-reservation": 0, "tdm-policy": "{policy}"}}]'
    assert from_tdmrep(body, SITE + "/a").licenses == ()


def test_tdmrep_first_match_with_a_bad_value_is_unset() -> None:
    # The first matching rule applies; its protocol error reads as unset, and a later,
    # broader rule does not stand in for it.
    body = ('[{"location": "/a/", "tdm-reservation": "yes"},'
            ' {"location": "/", "tdm-reservation": 1}]')
    prefs = from_tdmrep(body, SITE + "/a/b")
    assert prefs.sources == ()
    assert prefs.pref("train-ai") is Pref.UNKNOWN
    assert prefs.issues
    assert from_tdmrep(body, SITE + "/c").pref("train-ai") is Pref.DISALLOW


def test_tdmrep_header_supersedes_file_and_meta_supersedes_header() -> None:
    # TDMRep, "Processing priority": header over tdmrep.json, HTML metadata over both;
    # a technique that says nothing leaves the earlier value standing.
    file = from_tdmrep(TDMREP_ALL, "https://provider.com/a")
    header = from_headers([("tdm-reservation", "0")], "b")
    assert combine(file, header).pref("train-ai") is Pref.ALLOW
    assert combine(header, file).pref("train-ai") is Pref.ALLOW
    meta = from_html('<meta name="tdm-reservation" content="1">', "b")
    assert combine(file, header, meta).pref("train-ai") is Pref.DISALLOW
    assert combine(file, from_headers([("Content-Type", "text/html")], "b"),
                   from_html("<p>no tags</p>", "b")).pref("train-ai") is Pref.DISALLOW
    # Other mechanisms still combine most-restrictive-wins with TDMRep's answer.
    robots = parse("User-agent: *\nContent-Usage: train-ai=n\n")
    both = combine(from_robots(robots, "https://provider.com/a", "bot"), file, header)
    assert both.pref("train-ai") is Pref.DISALLOW


def test_tdmrep_report_location_patterns() -> None:
    # TDMRep CG final report, "Use of regular expressions": its "$", "*" and "%24" examples
    # (written there as tdm-policy lines; here as the location patterns they describe).
    body = ('[{"location": "/this/path/exactly$", "tdm-reservation": 1},'
            ' {"location": "/this/*/then", "tdm-reservation": 1},'
            ' {"location": "/path/foo-%24", "tdm-reservation": 1}]')
    for path, pref in [("/this/path/exactly", Pref.DISALLOW),
                       ("/this/path/exactly/more", Pref.UNKNOWN),
                       ("/this/a/b/then", Pref.DISALLOW), ("/this/then", Pref.UNKNOWN),
                       ("/This/path/exactly", Pref.UNKNOWN),  # case sensitive
                       ("/path/foo-$", Pref.DISALLOW), ("/path/foo-", Pref.UNKNOWN)]:
        assert from_tdmrep(body, "https://provider.com" + path).pref("train-ai") is pref, path


# RSL 1.0, "Adding RSL to robots.txt" (rslstandard.org/guide/robots-txt): its example file.
RSL_EXAMPLE = """\
License: https://example.com/license.xml

User-agent: Googlebot
Allow: /
"""


def test_rsl_example_license_is_global() -> None:
    robots = parse(RSL_EXAMPLE)
    for agent in ("Googlebot", "otherbot"):
        assert from_robots(robots, SITE + "/", agent).licenses == (
            "https://example.com/license.xml",)


def test_rsl_license_in_another_agents_group_still_applies() -> None:
    # RSL: the License directive is tied to no user agent, wherever the line stands; one
    # or more may be given, and the licence may live on another host.
    robots = parse("User-agent: Googlebot\nAllow: /\nLicense: https://example.com/license.xml\n"
                   "\nUser-agent: *\nDisallow: /private/\n"
                   "License: https://licenses.example.net/feed.xml\n")
    want = ("https://example.com/license.xml", "https://licenses.example.net/feed.xml")
    assert from_robots(robots, SITE + "/", "otherbot").licenses == want
    assert from_robots(robots, SITE + "/", "Googlebot").licenses == want


@pytest.mark.parametrize("value", ["/license.xml", "license.xml", "example.com/license.xml",
                                   "ftp://example.com/license.xml", "https://", "http://[::1"])
def test_rsl_license_that_is_not_an_absolute_url_is_reported(value: str) -> None:
    # RSL: the value must be a fully qualified URL, with protocol and host.
    robots = parse(f"License: {value}\nUser-agent: *\nContent-Usage: train-ai=n\n")
    prefs = from_robots(robots, SITE + "/", "bot")
    assert prefs.licenses == ()
    assert prefs.issues == (f"line 1: License {value!r} is not an absolute URL; ignored",)
    assert prefs.pref("train-ai") is Pref.DISALLOW


def test_content_signals_labels_are_the_drafts_table() -> None:
    # draft-romm-aipref-contentsignals-00 (1 October 2025), "Usage Category Labels": Search
    # is "search", AI Input "ai-input", AI Training "ai-train"; those three and no others.
    assert CONTENT_SIGNALS.labels == {"search": "search", "ai-input": "ai-input",
                                      "ai-train": "train-ai"}
    statement = parse_statement("search=yes, ai-input=no, ai-train=no, train-ai=no, "
                                "ai-training=no")
    assert statement.unknown_keys(CONTENT_SIGNALS) == ("train-ai", "ai-training")
    assert statement.pref(CONTENT_SIGNALS, "search") is Pref.ALLOW
    assert statement.pref(CONTENT_SIGNALS, "ai-input") is Pref.DISALLOW
    assert statement.pref(CONTENT_SIGNALS, "train-ai") is Pref.DISALLOW


def test_tdmrep_policy_follows_the_layer_that_decides() -> None:
    # TDMRep CG final report, "Processing priority": a header's tdm-policy supersedes the
    # file's; a header reading 0 leaves no policy to process; one that names no policy
    # does not reset the file's.
    file = from_tdmrep(TDMREP_GROUPS, "https://provider.com/directory-b/html/p.html")
    policy = "https://provider.com/policies/policy.json"
    assert combine(file, from_headers([("tdm-reservation", "0")], "b")).licenses == ()
    assert combine(file, from_headers([("tdm-reservation", "1")], "b")).licenses == (policy,)
    other = from_headers([("tdm-reservation", "1"), ("tdm-policy", "https://p.com/o")], "b")
    assert combine(file, other).licenses == ("https://p.com/o",)
    # RSL links are no TDMRep policy and stay whatever TDMRep says.
    robots = parse("License: https://provider.com/license.xml\nUser-agent: *\nAllow: /\n")
    mixed = combine(from_robots(robots, "https://provider.com/a", "b"), file,
                    from_headers([("tdm-reservation", "0")], "b"))
    assert mixed.licenses == ("https://provider.com/license.xml",)

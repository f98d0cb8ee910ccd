"""polite.core.site: who is asking, is it who it claims, what the file says, what to do."""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from polite.core.robots import lint_body, parse
from polite.core.site import (
    NEEDS_DNS,
    Action,
    Check,
    Enforcement,
    Field,
    InForce,
    RuleRow,
    Section,
    SiteRules,
    Verification,
    Visit,
    client_address,
    decide,
    judge_dns,
    parse_crawlers,
    render,
    rules_from_json,
    rules_to_json,
    verify_by_ranges,
)
from polite.errors import ConfigError
from polite.site import load_crawlers

LIST = parse_crawlers(json.dumps({"crawlers": [
    {"name": "Googlebot", "operator": "Google", "category": "search",
     "tokens": ["Googlebot", "Googlebot-Image"], "ip_ranges": ["66.249.64.0/19"],
     "host_suffixes": ["googlebot.com"]},
    {"name": "GPTBot", "operator": "OpenAI", "category": "ai", "tokens": ["GPTBot"],
     "ip_ranges": ["20.171.206.0/24", "2001:db8::/32"]},
    {"name": "CCBot", "operator": "Common Crawl", "category": "ai", "tokens": ["CCBot"]},
]}))


@pytest.mark.parametrize(("user_agent", "robot", "agent"), [
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
     True, "Googlebot"),
    ("Googlebot-Image/1.0", True, "Googlebot"),  # its own token, the operator's robots name
    ("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; "
     "+https://openai.com/gptbot)", True, "GPTBot"),
    ("gptbot", True, "GPTBot"),  # case does not matter
    ("NotGooglebotAtAll/1.0", True, "NotGooglebotAtAll"),  # not a whole word: unknown robot
    ("Googlebotx/1.0", True, "Googlebotx"),
    ("Mozilla/4.5 (compatible; HTTrack 3.0x; Windows 98)", False, ""),  # not in this list
    ("ExampleCrawler/0.1 (+https://example.org)", True, "ExampleCrawler"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/124.0 Safari/537.36", False, ""),
    ("", True, ""),  # no User-Agent: no browser does that
])
def test_robots_are_told_from_people_by_whole_words(user_agent: str, robot: bool,
                                                      agent: str) -> None:
    identity = LIST.identify(user_agent)
    assert identity.is_robot is robot
    assert identity.agent == agent


def test_the_bundled_list_knows_the_big_operators_and_cites_its_sources() -> None:
    crawlers = load_crawlers()
    assert crawlers.snapshot and crawlers.sources
    for name, category in [("Googlebot", "search"), ("Bingbot", "search"),
                           ("GPTBot", "ai"), ("Applebot", "search"),
                           ("DuckDuckBot", "search"), ("AhrefsBot", "seo"),
                           ("ia_archiver", "archiver"), ("facebookexternalhit", "social"),
                           ("UptimeRobot", "monitoring"), ("HTTrack", "tool")]:
        crawler = crawlers.by_name(name)
        assert crawler is not None and crawler.category == category, name
    google = crawlers.by_name("Googlebot")
    assert google is not None and ".googlebot.com" in google.host_suffixes
    seed_003 = "Mozilla/4.5 (compatible; HTTrack 3.0x; Windows 98)"  # seed 003, 4.9
    assert crawlers.identify(seed_003).name == "HTTrack"


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not JSON"),
    ('{"crawlers": [{"name": "X", "ip_ranges": ["300.1.1.1/8"]}]}', "not an IP range"),
    ('{"crawlers": [{"name": "X", "category": "weather"}]}', "unknown category"),
    ('{"crawlers": [{"operator": "X"}]}', "a name is required"),
])
def test_a_bad_crawler_list_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_crawlers(text, source="mine.json")


def test_verification_by_ranges_then_dns() -> None:
    google = LIST.by_name("Googlebot")
    gpt = LIST.by_name("GPTBot")
    cc = LIST.by_name("CCBot")
    assert google and gpt and cc
    assert verify_by_ranges(google, "66.249.66.1").verdict is Verification.VERIFIED  # type: ignore[union-attr]
    assert verify_by_ranges(google, "1.2.3.4") is NEEDS_DNS  # it publishes host names too
    assert verify_by_ranges(gpt, "1.2.3.4").verdict is Verification.FORGED  # type: ignore[union-attr]
    assert verify_by_ranges(gpt, "::ffff:20.171.206.9").verdict is Verification.VERIFIED  # type: ignore[union-attr]
    assert verify_by_ranges(gpt, "2001:db8::1").verdict is Verification.VERIFIED  # type: ignore[union-attr]
    assert verify_by_ranges(cc, "1.2.3.4").verdict is Verification.UNVERIFIABLE  # type: ignore[union-attr]
    assert verify_by_ranges(None, "1.2.3.4").verdict is Verification.UNKNOWN  # type: ignore[union-attr]
    assert verify_by_ranges(gpt, "not an ip").verdict is Verification.UNVERIFIABLE  # type: ignore[union-attr]
    ip = "1.2.3.4"
    name = "crawl-1-2-3-4.googlebot.com."
    assert judge_dns(google, ip, [name], {name: [ip]}).verdict is Verification.VERIFIED
    assert judge_dns(google, ip, [name], {name: ["5.6.7.8"]}).verdict is Verification.FORGED
    assert judge_dns(google, ip, ["evil.example.com"], {}).verdict is Verification.FORGED
    assert judge_dns(google, ip, ["x.notgooglebot.com"], {}).verdict is Verification.FORGED
    assert judge_dns(google, ip, [], {}).verdict is Verification.FORGED
    assert judge_dns(google, ip, None, {}).verdict is Verification.UNVERIFIABLE
    assert judge_dns(google, ip, [name], None).verdict is Verification.UNVERIFIABLE


SECTIONS = SiteRules(sections=(
    Section("Whole site", "/", "webmaster", (
        RuleRow("*", Field.DISALLOW, "/admin/"),
        RuleRow("*", Field.CRAWL_DELAY, "5"),
        RuleRow("GPTBot", Field.DISALLOW, "/"),
        RuleRow("", Field.SITEMAP, "https://example.org/sitemap.xml"),
    )),
    Section("Alice's pages", "/students/alice/", "alice", (
        RuleRow("*", Field.DISALLOW, "/students/alice/drafts/"),
        RuleRow("*", Field.DISALLOW, "/admin/secret"),  # outside her part: left out
        RuleRow("*", Field.CRAWL_DELAY, "1"),  # site-wide: left out
        RuleRow("Googlebot", Field.ALLOW, "/students/alice/drafts/public"),
    )),
))


def test_sections_merge_into_one_file_traced_to_their_rows() -> None:
    rendered = render(SECTIONS)
    lines = rendered.text.splitlines()
    assert "User-agent: *" in lines and "Disallow: /students/alice/drafts/" in lines
    assert "Disallow: /admin/secret" not in rendered.text
    assert [(p.section, p.row) for p in rendered.problems] == [(1, 1), (1, 2)]
    assert "outside this section's part" in rendered.problems[0].message
    line = lines.index("Disallow: /students/alice/drafts/") + 1
    assert rendered.origins[line] == (1, 0)
    assert rendered.origin(line, SECTIONS) == "Alice's pages (alice)"
    robots = parse(rendered.text, "google")
    assert not robots.allowed("https://example.org/students/alice/drafts/x", "Bingbot")
    assert robots.allowed("https://example.org/students/alice/drafts/public", "Googlebot")
    assert not robots.allowed("https://example.org/page", "GPTBot")
    assert robots.delay_s("Bingbot") == 5.0
    assert robots.sitemaps == ("https://example.org/sitemap.xml",)
    assert not [i for i in robots.issues if i.severity == "error"]


def test_a_managed_block_goes_before_the_hand_written_file() -> None:
    rules = SiteRules(SECTIONS.sections, manual_text="User-agent: Bingbot\nDisallow: /x\n")
    text = render(rules).text
    assert text.startswith("# BEGIN polite site")
    assert text.index("# END polite site") < text.index("User-agent: Bingbot")
    assert not parse(text, "google").allowed("https://example.org/x", "Bingbot")


def test_no_rules_make_a_file_that_allows_everything() -> None:
    text = render(SiteRules()).text
    assert parse(text).allowed("https://example.org/anything", "AnyBot")
    assert "User-agent: *" in text


def test_rules_survive_json() -> None:
    rules = SiteRules(SECTIONS.sections, 600, Enforcement(True, True, False), "# mine\n")
    assert rules_from_json(rules_to_json(rules)) == rules
    with pytest.raises(ConfigError):
        rules_from_json('{"sections": [{"rules": [["*", "Nope", "/"]]}]}')


def _in_force(text: str, enforcement: Enforcement) -> InForce:
    return InForce(parse(text, "google"), tuple(text.split("\n")), 7, 60, enforcement)


FILE = "User-agent: *\nDisallow: /private/\nCrawl-delay: 10\n\nUser-agent: FastBot\nDisallow:\n"
VERIFIED = Check(Verification.VERIFIED, "in range")
FORGED = Check(Verification.FORGED, "outside")


@pytest.mark.parametrize(
    ("enforcement", "target", "agent", "check", "last", "action", "status", "retry"), [
        # people pass, unlogged
        (Enforcement(True, True, True), "/private/x", None, VERIFIED, None, "pass", None, None),
        # logging only: everything passes
        (Enforcement(), "/private/x", "Googlebot", VERIFIED, 99.0, "pass", None, None),
        (Enforcement(refuse_disallowed=True), "/private/x", "Googlebot", VERIFIED, None,
         "refuse", 403, None),
        (Enforcement(refuse_disallowed=True), "/public", "Googlebot", VERIFIED, None,
         "pass", None, None),
        # throttled by Crawl-delay 10 after a visit at 95: wait until 105
        (Enforcement(throttle=True), "/public", "Googlebot", VERIFIED, 95.0,
         "throttle", 429, 5),
        (Enforcement(throttle=True), "/public", "Googlebot", VERIFIED, 80.0,
         "pass", None, None),
        # no Crawl-delay for FastBot: never throttled
        (Enforcement(throttle=True), "/public", "FastBot", VERIFIED, 99.9, "pass", None, None),
        (Enforcement(refuse_forged=True), "/public", "Googlebot", FORGED, None,
         "refuse", 403, None),
        # robots.txt is always served, whatever the enforcement
        (Enforcement(True, True, True), "/robots.txt", "Googlebot", FORGED, 99.9,
         "robots.txt", None, None),
    ])
def test_decide(enforcement: Enforcement, target: str, agent: str | None, check: Check,
                last: float | None, action: str, status: int | None,
                retry: int | None) -> None:
    ua = f"Mozilla/5.0 (compatible; {agent}/1.0)" if agent else "Mozilla/5.0 Firefox/120"
    identity = LIST.identify(ua)
    decision = decide(Visit("GET", target, ua, "66.249.66.1"), identity, check,
                      _in_force(FILE, enforcement), last_start=last, now=100.0)
    assert decision.action == action
    assert decision.status == status
    assert decision.retry_after_s == retry
    if agent is None:
        assert decision.log is None
    else:
        assert decision.log is not None and decision.log.version == 7
        assert decision.log.action == Action(action)


def test_robots_txt_is_logged_as_allowed_even_under_disallow_all() -> None:
    ua = "Googlebot/2.1"
    decision = decide(Visit("GET", "/robots.txt", ua, None), LIST.identify(ua), VERIFIED,
                      _in_force("User-agent: *\nDisallow: /\n", Enforcement(True)),
                      last_start=None, now=1.0)
    assert decision.action is Action.SERVE_ROBOTS
    assert decision.log is not None and decision.log.allowed and decision.log.line is None


def test_the_log_names_the_line_in_force() -> None:
    ua = "Googlebot/2.1"
    decision = decide(Visit("GET", "/private/a?b=1", ua, "66.249.66.1"), LIST.identify(ua),
                      VERIFIED, _in_force(FILE, Enforcement()), last_start=None, now=1.0)
    assert decision.log is not None
    assert (decision.log.allowed, decision.log.line, decision.log.rule) == (
        False, 2, "Disallow: /private/")
    assert decision.log.target == "/private/a?b=1"


PROXIES = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128")]


@pytest.mark.parametrize(("peer", "forwarded", "expected"), [
    ("10.0.0.2", "66.249.66.1", "66.249.66.1"),  # through our proxy
    ("10.0.0.2", "1.2.3.4, 66.249.66.1, 10.0.0.9", "66.249.66.1"),  # the first untrusted hop
    ("203.0.113.5", "66.249.66.1", "203.0.113.5"),  # not our proxy: the header is ignored
    ("10.0.0.2", "garbage", "10.0.0.2"),
    ("10.0.0.2", None, "10.0.0.2"),
    ("::1", "2001:db8::7", "2001:db8::7"),
])
def test_the_visitor_behind_the_sites_own_proxies(peer: str, forwarded: str | None,
                                                  expected: str) -> None:
    assert client_address(peer, forwarded, PROXIES) == expected


# -- an edit never changes a verdict it did not mean to, in any dialect ----------------------

HAND_WRITTEN = ("User-agent: *\nDisallow: /cgi-bin/\nDisallow: /private/\n\n"
                "User-agent: Googlebot\nAllow: /\n")


def test_a_rule_for_an_agent_the_hand_written_part_names_joins_its_group() -> None:
    rules = SiteRules((Section("Whole site", "/", "webmaster", (
        RuleRow("*", Field.DISALLOW, "/admin/"),)),), manual_text=HAND_WRITTEN)
    rendered = render(rules)
    lines = rendered.text.splitlines()
    assert lines.count("User-agent: *") == 1  # one group, not a second one ahead of it
    assert lines.index("Disallow: /admin/") < lines.index("User-agent: Googlebot")
    assert rendered.origins[lines.index("Disallow: /admin/") + 1] == (0, 0)
    assert not [i for i in lint_body(rendered.text).issues
                if i.code == "agent-in-two-groups"]
    for dialect in ("rfc9309", "google", "koster1996"):
        robots = parse(rendered.text, dialect)
        assert not robots.allowed("/cgi-bin/a", "SomeBot"), dialect  # the hand-written rule
        assert not robots.allowed("/admin/x", "SomeBot"), dialect  # the page's
        assert robots.allowed("/cgi-bin/a", "Googlebot"), dialect


_AGENTS = ("*", "Googlebot", "BadBot")
_PATHS = ("/", "/a", "/a/", "/a/b", "/cgi-bin/", "/cgi-bin/x", "/p", "/p/q")
_PROBES = ("Googlebot", "BadBot", "OtherBot")
_rule = st.tuples(st.booleans(), st.sampled_from(_PATHS))
_group = st.tuples(st.lists(st.sampled_from(_AGENTS), min_size=1, max_size=2, unique=True),
                   st.lists(_rule, min_size=1, max_size=4))


def _hand_written(groups: list[tuple[list[str], list[tuple[bool, str]]]]) -> str:
    return "\n".join("".join(f"User-agent: {a}\n" for a in agents)
                     + "".join(f"{'Allow' if allow else 'Disallow'}: {path}\n"
                               for allow, path in rules) for agents, rules in groups)


@settings(max_examples=150, deadline=None)
@given(groups=st.lists(_group, min_size=1, max_size=3),
       edits=st.lists(st.tuples(st.sampled_from(_AGENTS), _rule), min_size=1, max_size=3))
def test_an_edit_changes_no_verdict_but_those_of_the_paths_it_names(
        groups: list[tuple[list[str], list[tuple[bool, str]]]],
        edits: list[tuple[str, tuple[bool, str]]]) -> None:
    """Rows for agents the hand-written part names (a row for another agent makes it a group
    of its own, which robots.txt means to take it out of ``*``), added in the configuration
    page: in each dialect, every agent's verdict on a path none of the rows names is the one
    the hand-written part alone gives."""
    manual = _hand_written(groups)
    named = {a for agents, _ in groups for a in agents}
    rows = tuple(RuleRow(agent, Field.ALLOW if allow else Field.DISALLOW, path)
                 for agent, (allow, path) in edits if agent in named)
    assume(rows)
    text = render(SiteRules((Section("Whole site", "/", "", rows),), manual_text=manual)).text
    for dialect in ("rfc9309", "google", "koster1996", "regp"):
        before, after = parse(manual, dialect), parse(text, dialect)
        for path in _PATHS:
            if any(path.startswith(row.value) for row in rows):
                continue  # meant to change, perhaps
            for agent in _PROBES:
                assert after.allowed(path, agent) == before.allowed(path, agent), (
                    dialect, agent, path, text)

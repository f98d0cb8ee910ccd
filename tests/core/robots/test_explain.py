"""explain: seed 003's bmj.org matrix, and files the dialects read differently, every cell."""

from __future__ import annotations

import pytest

from polite.robots import AgentMatch, Dialect, TieBreak, explain_body, parse
from tests.conftest import shared_path
from tests.core.robots.test_seed_tables import BMJ  # seed 003's example, written once

R, G, K, P = Dialect.RFC9309, Dialect.GOOGLE, Dialect.KOSTER1996, Dialect.REGP

# Seed 003, section 3.1: the file, its URLs and the matrix of the robots allowed.
BMJ_URLS = ["http://www.bmj.org/", "/index.html", "/robots.txt", "/server.html",
            "/services/fast.html", "/services/slow.html", "/orgo.gif", "/org/about.html",
            "/org/plans.html", "/%7Ejim/jim.html", "/%7Emak/mak.html"]
# The seed's columns Robot1, Crawler1 and "other & infospider", row by row. "Info
# Spiders/3.0" names no group in any dialect (its token is "Info", and "infospider" is no
# substring of it), so it is the "other" column.
SEED = {
    "robot1": "No No Yes No No No No No No No No",
    "crawler1": "Yes Yes Yes Yes Yes Yes Yes Yes Yes Yes Yes",
    "Info Spiders/3.0": "No No Yes Yes Yes Yes No Yes No No Yes",
}
# Google's parser disagrees: it cuts "robot1" and "crawler1" at the digit (they fall to
# "*"), does not exempt /robots.txt, and does not decode %7E to match "Allow: /~mak".
GOOGLE = {
    "robot1": "No No No Yes Yes Yes No Yes No No No",
    "crawler1": "No No No Yes Yes Yes No Yes No No No",
    "Info Spiders/3.0": "No No No Yes Yes Yes No Yes No No No",
}


def _yes(text: str) -> list[bool]:
    return [word == "Yes" for word in text.split()]


def test_bmj_matrix_is_seed_003s_in_rfc9309_and_the_1996_draft_and_google_differs() -> None:
    e = explain_body(BMJ, list(SEED), BMJ_URLS)
    assert e.dialects == (R, G, K)
    for agent in SEED:
        for dialect, table in ((R, SEED), (K, SEED), (G, GOOGLE)):
            got = [e.cell(url, agent, dialect).allowed for url in BMJ_URLS]
            assert got == _yes(table[agent]), (agent, dialect)
    for url in BMJ_URLS:
        for agent in SEED:
            row = e.row(url, agent)
            split = len({c.allowed for c in row}) > 1
            assert all(c.disagrees == split for c in row)
    assert ("/robots.txt", "robot1") in e.disagreements
    assert ("/org/plans.html", "Info Spiders/3.0") not in e.disagreements


def test_bmj_cells_name_group_rule_loser_and_tie_break() -> None:
    e = explain_body(BMJ, list(SEED), BMJ_URLS)
    plans = e.cell("/org/plans.html", "Info Spiders/3.0", R)
    assert (plans.rule and plans.rule.line, plans.loser and plans.loser.line) == (12, 13)
    assert plans.tie_break is TieBreak.LONGEST
    assert plans.group.how is AgentMatch.STAR and plans.group.lines == (11,)
    first = e.cell("/org/plans.html", "Info Spiders/3.0", K)
    assert (first.rule and first.rule.line, first.loser and first.loser.line) == (12, 13)
    assert first.tie_break is TieBreak.FIRST
    mak = e.cell("/%7Emak/mak.html", "Info Spiders/3.0", R)
    assert mak.path == "/~mak/mak.html" and mak.rule is not None and mak.rule.line == 15
    assert mak.loser is not None and mak.loser.line == 16
    gmak = e.cell("/%7Emak/mak.html", "Info Spiders/3.0", G)
    assert gmak.path == "/%7Emak/mak.html" and gmak.rule is not None and gmak.rule.line == 16
    assert gmak.loser is None and gmak.tie_break is TieBreak.ONLY
    robots = e.cell("/robots.txt", "robot1", R)
    assert robots.allowed and robots.tie_break is TieBreak.ROBOTS_TXT
    assert robots.loser is not None and robots.loser.line == 5
    assert robots.group.how is AgentMatch.TOKEN and robots.group.lines == (4,)
    g = e.cell("/robots.txt", "robot1", G)
    assert not g.allowed and g.group.how is AgentMatch.STAR
    assert "read as 'robot'" in g.group.text
    crawler = e.cell("/orgo.gif", "crawler1", K)
    assert crawler.allowed and crawler.rule is not None and crawler.rule.line == 9
    assert crawler.group.how is AgentMatch.NAME and crawler.group.lines == (7,)
    none = e.cell("/orgo.gif", "crawler1", R)
    assert none.allowed and none.rule is None and none.tie_break is TieBreak.NO_MATCH


DISAGREE = """\
User-agent: examplebot
Disallow: /a

User-agent: *
Disallow: /

User-agent: ExampleBot
Allow: /a/open
Disallow: /b

User-agent: bot
Disallow: /c
"""


def test_group_merging_against_first_record_and_substring_agents() -> None:
    urls = ["/a/open/x", "/a/shut", "/b", "/c", "/d"]
    e = explain_body(DISAGREE, ["ExampleBot", "Robot"], urls)
    expect = {  # url: (rfc9309, google, koster1996) for ExampleBot
        "/a/open/x": (True, True, False),  # merged groups: Allow: /a/open is longer
        "/a/shut": (False, False, False),
        "/b": (False, False, True),  # the 1996 draft reads the first record only
        "/c": (True, True, True),
        "/d": (True, True, True),
    }
    for url, verdicts in expect.items():
        assert tuple(e.cell(url, "ExampleBot", d).allowed for d in (R, G, K)) == verdicts, url
    merged = e.cell("/a/open/x", "ExampleBot", R)
    assert merged.group.merged and merged.group.lines == (1, 7)
    assert (merged.rule and merged.rule.line, merged.loser and merged.loser.line) == (8, 2)
    assert merged.tie_break is TieBreak.LONGEST
    first = e.cell("/a/open/x", "ExampleBot", K)
    assert first.group.lines == (1,) and first.group.ignored == (7, 11)
    assert first.rule is not None and first.rule.line == 2 and first.tie_break is TieBreak.ONLY
    # "bot" is a substring of "Robot": the 1996 draft gives Robot the bot record (first
    # match from the top: line 11 is the only one naming it); RFC 9309 and Google give it *.
    for url in urls:
        assert not e.cell(url, "Robot", R).allowed and not e.cell(url, "Robot", G).allowed
    sub = e.cell("/c", "Robot", K)
    assert sub.group.how is AgentMatch.SUBSTRING and sub.group.lines == (11,)
    assert not sub.allowed and e.cell("/d", "Robot", K).allowed
    assert e.cell("/d", "Robot", K).disagrees


def test_first_match_against_longest_match_and_allow_wins_a_tie() -> None:
    body = "User-agent: *\nDisallow: /p\nAllow: /p/page\nAllow: /q\nDisallow: /q\n"
    e = explain_body(body, ["bot"], ["/p/page", "/q"])
    longest = e.cell("/p/page", "bot", R)
    assert longest.allowed and longest.tie_break is TieBreak.LONGEST
    draft = e.cell("/p/page", "bot", K)
    assert not draft.allowed and draft.tie_break is TieBreak.FIRST
    assert (draft.rule and draft.rule.line, draft.loser and draft.loser.line) == (2, 3)
    tie = e.cell("/q", "bot", G)
    assert tie.allowed and tie.tie_break is TieBreak.ALLOW_WINS_TIE
    assert (tie.rule and tie.rule.line, tie.loser and tie.loser.line) == (4, 5)
    assert e.cell("/q", "bot", K).allowed and e.cell("/q", "bot", K).tie_break is TieBreak.FIRST
    assert e.disagreements == (("/p/page", "bot"),)


def test_percent_escapes_and_regp_last_match() -> None:
    body = ("Robot-version: 3.0\n\nUser-agent: *\nDisallow: /%7Efred/\nAllow: /~fred/pub\n"
            "Disallow: /a%2fb\n")
    e = explain_body(body, ["bot"], ["/~fred/hi.html", "/%7Efred/pub/x", "/a/b"])
    assert e.dialects == (R, G, K, P)
    fred = "/~fred/hi.html"
    assert [e.cell(fred, "bot", d).allowed for d in (R, G, K, P)] == [False, True, False, False]
    pub = "/%7Efred/pub/x"
    assert [e.cell(pub, "bot", d).allowed for d in (R, G, K, P)] == [True, False, False, True]
    assert e.cell(pub, "bot", K).tie_break is TieBreak.FIRST
    assert e.cell(pub, "bot", P).tie_break is TieBreak.LAST
    # %2F is not a slash in any dialect (seed 002, Table 9-3).
    assert all(e.cell("/a/b", "bot", d).allowed for d in (R, G, K, P))


@pytest.mark.slow
def test_every_cell_agrees_with_the_engine_on_corpus_files() -> None:
    folder = shared_path("corpus", "robots")
    names = sorted(p.name for p in folder.glob("*.txt"))[::40]
    checked = 0
    for name in names:
        body = (folder / name).read_bytes()
        rules = parse(body)
        paths = ["/"] + [r.pattern.replace("*", "x").rstrip("$") or "/"
                         for g in rules.groups[:3] for r in g.rules[:5]]
        agents = ["Googlebot", "polite"]
        e = explain_body(body, agents, paths)
        engines = {}  # the file parsed once per dialect, as a fetcher keeps it
        for cell in e.cells:
            if cell.dialect not in engines:
                engines[cell.dialect] = parse(body, cell.dialect)
            decided = engines[cell.dialect].decide(cell.url, cell.agent)
            assert cell.allowed == decided.allowed, (name, cell)
            if cell.rule is not None:
                assert cell.rule in cell.matched, (name, cell)
                assert cell.loser is None or cell.loser.allow != cell.rule.allow or \
                    cell.dialect is K
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("dialect", ["rfc9309", "google"])
def test_json_shape(dialect: str) -> None:
    e = explain_body(BMJ, ["robot1"], ["/org/about.html"], [dialect])
    cell = e.as_json()["cells"][0]  # type: ignore[index]
    assert cell["dialect"] == dialect and cell["rule"]["line"] in (5, 13)


@pytest.mark.parametrize(("text", "dialect", "url", "ip", "by"), [
    ("User-agent: *\nDisallow: /x\n", "rfc9309", "http://e.com/x", None, "RULE"),
    ("User-agent: *\nDisallow: /x\n", "rfc9309", "http://e.com/y", None, "NO_RULE"),
    ("User-agent: *\nDisallow: /\n", "rfc9309", "http://e.com/robots.txt", None,
     "ROBOTS_TXT"),
    ("Robot-version: 3.0\nUser-agent: *\nIp-disallow: 10.0.0.1\nDisallow: /x\n", "regp",
     "http://e.com/y", "10.0.0.1", "EGRESS_IP"),
])
def test_a_decision_says_what_decided_it_as_a_value(text: str, dialect: str, url: str,
                                                     ip: str | None, by: str) -> None:
    """``Decision.by``: what decided, so that explain (and anyone) reads a value, not the
    words of ``reason``."""
    from polite.robots import DecidedBy, parse

    decision = parse(text, dialect).decide(url, "bot", ip=ip)
    assert decision.by is DecidedBy[by], decision

"""The seeds' own tables, each in the dialect that seed describes.

Seed 000 (REGP): Tables 4-8, the section 3.2 example and the section 5 example.
Seed 002 (the 1996 draft): Tables 9-3 and 9-4. Seed 003: its matching table and the bmj.org
worked example.
"""

from __future__ import annotations

import calendar

import pytest

from polite.core.robots.values import DailyWindow, RequestRate
from polite.robots import parse

SITE = "http://www.example.com"

# -- seed 000, REGP ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "matches"),
    [("Infoseeker", True), ("InfoSeeker", True), ("BobbyInfoSeeker", True),
     ("Info_seeker", False), ("InformationSeeker", False), ("Infoseek", False)],
)
def test_regp_table_4_user_agent_substring(name: str, matches: bool) -> None:
    robots = parse("Robot-version: 3.0\n\nUser-agent: infoseeker\nDisallow: /\n")
    assert robots.dialect == "regp"
    assert robots.allowed(SITE + "/page", name) is not matches


@pytest.mark.parametrize(
    ("name", "matches"), [("Infoseeker", True), ("Wiserobot", True), ("Inforobot", False)]
)
def test_regp_table_5_two_user_agents(name: str, matches: bool) -> None:
    robots = parse("Robot-version: 3.0\n\nUser-agent: infoseeker\nUser-agent: wiseRobot\n"
                   "Disallow: /\n")
    assert robots.allowed(SITE + "/page", name) is not matches


REGP_PATHS = [
    # Table 6: "Disallow: /tmp"
    ("Disallow: /tmp", "/tmp", False),
    ("Disallow: /tmp", "/temp", True),
    ("Disallow: /tmp", "/tmp1", False),
    ("Disallow: /tmp", "/tmp.html", False),
    ("Disallow: /tmp", "/tmp/tmp0001.html", False),
    # Table 7: "Allow: /tmp/" implies "Disallow: /" before it
    ("Allow: /tmp/", "/tmp", False),
    ("Allow: /tmp/", "/temp", False),
    ("Allow: /tmp/", "/tmp1", False),
    ("Allow: /tmp/", "/tmp.html", False),
    ("Allow: /tmp/", "/tmp/tmp0001.html", True),
]
TABLE_8 = "Disallow: /news/\nDisallow: /info\nAllow: /info/open"
REGP_PATHS += [
    (TABLE_8, "/news/news0001.html", False),
    (TABLE_8, "/info/infoShow.html", False),
    (TABLE_8, "/info/latest/info0001.html", False),
    (TABLE_8, "/info0001.html", False),
    (TABLE_8, "/info/open/info0001.html", True),
    (TABLE_8, "/tmp/tmp0001.html", True),
]


@pytest.mark.parametrize(("rules", "path", "allowed"), REGP_PATHS)
def test_regp_tables_6_to_8_paths(rules: str, path: str, allowed: bool) -> None:
    robots = parse(f"Robot-version: 3.0\n\nUser-agent: *\n{rules}\n")
    assert robots.allowed(SITE + path, "anybot") is allowed


def test_regp_paths_are_case_insensitive() -> None:
    robots = parse("Robot-version: 3.0\n\nUser-agent: *\nDisallow: /TMP\n")
    assert not robots.allowed(SITE + "/tmp/x", "bot")
    assert not robots.allowed(SITE + "/Tmp", "bot")


REGP_SECTION_3_EXAMPLE = """\
Robot-version: 3.0
Last-modified: 30 Oct 2014 04:31:17 UT

User-agent: WebCrawler
Disallow: /data
Allow: /data/open

User-agent: infoseeker
User-agent: wiseRobot
Allow: /info
Allow: /news
{
User-agent: infoseeker
Allow: /info/hot
Crawl-delay: 5
}

Sitemap: http://www.example.com/documents/example_sitemap.xml
Visit-time: 1:00-16:00 UT ##8:00-17:00 Beijing Time is not allowed
Language: zh-cn, zh
"""


def test_regp_section_3_example() -> None:
    robots = parse(REGP_SECTION_3_EXAMPLE)
    assert robots.dialect == "regp"
    assert robots.version == (3, 0)
    assert robots.last_modified == calendar.timegm((2014, 10, 30, 4, 31, 17))
    assert robots.sitemaps == ("http://www.example.com/documents/example_sitemap.xml",)
    assert not [i for i in robots.issues if i.severity != "info"]
    # WebCrawler: /data closed except /data/open; the rest open (implicit "Allow: /").
    assert not robots.allowed(SITE + "/data/x", "WebCrawler")
    assert robots.allowed(SITE + "/data/open/x", "WebCrawler")
    assert robots.allowed(SITE + "/other", "WebCrawler")
    # infoseeker and wiseRobot: only /info and /news (a leading Allow implies "Disallow: /").
    for agent in ("infoseeker", "wiseRobot"):
        assert robots.allowed(SITE + "/info/a", agent)
        assert robots.allowed(SITE + "/news/a", agent)
        assert not robots.allowed(SITE + "/data", agent)
    # The brace block gives infoseeker, and only it, five seconds under /info/hot.
    assert robots.delay_s("infoseeker", url=SITE + "/info/hot/1") == 5.0
    assert robots.delay_s("infoseeker", url=SITE + "/info/cold") is None
    assert robots.delay_s("wiseRobot", url=SITE + "/info/hot/1") is None
    # The global section applies to every crawler.
    rules = robots.agent_rules("WebCrawler")
    assert rules.visit_time == (DailyWindow(3600, 16 * 3600),)
    assert rules.language == ("zh-cn", "zh")


REGP_SECTION_5_EXAMPLE = """\
Robot-version: 3.0
Last-modified: 19 Mar 2015 12:00:00 +0800

User-agent: *
Disallow: /login.do
Disallow: /reg.do
Disallow: /newsRelease.do
Request-rate: 120/m
{
  Allow: /newsitem.do?
  Crawl-delay: 5
}
{
  Allow: /html/
  Crawl-delay: 1
}

Sitemap: http://10.60.149.65:8089/test1/sitemap.xml
Cookie: user=robot
Language: zh-CN
Encoding: gzip, deflate
Visit-time: 21:00:00 +0800-08:00:00 +0800
"""


def test_regp_section_5_example_delays() -> None:
    robots = parse(REGP_SECTION_5_EXAMPLE)
    site = "http://10.60.149.65:8089"
    for page in ("/login.do", "/reg.do", "/newsRelease.do"):
        assert not robots.allowed(site + page, "crawler")
    assert robots.allowed(site + "/", "crawler")
    assert robots.allowed(site + "/html/news1.html", "crawler")
    # "the home page has been crawled within 0.5 s ... all news pages within 1 s"
    assert robots.delay_s("crawler", url=site + "/") == 0.5
    assert robots.delay_s("crawler", url=site + "/html/news1.html") == 1.0
    assert robots.delay_s("crawler", url=site + "/newsItem.do?id=9") == 5.0
    rules = robots.agent_rules("crawler")
    assert rules.request_rate == RequestRate(120, 60)
    assert rules.cookies == ("user=robot",)
    assert rules.language == ("zh-CN",)
    assert rules.encoding == ("gzip", "deflate")
    # 21:00 to 08:00 Beijing time is 13:00 to 00:00 UTC.
    assert rules.visit_time == (DailyWindow(13 * 3600, 0),)
    assert robots.sitemaps == ("http://10.60.149.65:8089/test1/sitemap.xml",)


@pytest.mark.parametrize(
    ("rules", "ip", "allowed"),
    [
        ("Ip-disallow: 222.69.212.*", "222.69.212.7", False),
        ("Ip-disallow: 222.69.212.*", "10.0.0.1", True),
        # The seed writes "222.69..*"; the missing octet reads as a wildcard.
        ("Ip-disallow: 222.69..*\nIp-allow: 222.69.212.14\nIp-allow: 222.69.212.15",
         "222.69.212.14", True),
        ("Ip-disallow: 222.69..*\nIp-allow: 222.69.212.14\nIp-allow: 222.69.212.15",
         "222.69.212.16", False),
        ("Ip-disallow: 222.69..*\nIp-allow: 222.69.212.14\nIp-allow: 222.69.212.15",
         "8.8.8.8", True),
        ("Ip-allow: *", "1.2.3.4", True),
        # A leading specific Ip-allow implies "Ip-disallow: *" before it.
        ("Ip-allow: 1.2.3.4", "1.2.3.5", False),
        ("Ip-allow: 1.2.3.4", "1.2.3.4", True),
    ],
)
def test_regp_ip_rules(rules: str, ip: str, allowed: bool) -> None:
    robots = parse(f"Robot-version: 3.0\n\nUser-agent: *\n{rules}\nDisallow: /private\n")
    assert robots.allowed(SITE + "/page", "bot", ip=ip) is allowed
    decision = robots.decide(SITE + "/page", "bot", ip=ip)
    assert decision.allowed is allowed
    if not allowed:
        assert "Ip" in decision.reason


def test_regp_hash_is_part_of_a_url() -> None:
    robots = parse("Robot-version: 3.0\n\nUser-agent: *\nDisallow: /#/admin ## the admin app\n")
    assert not robots.allowed(SITE + "/#/admin/users", "bot")
    assert robots.allowed(SITE + "/#/home", "bot")
    assert robots.allowed(SITE + "/", "bot")


@pytest.mark.parametrize(("url", "allowed"), [
    ("/p#x://y", True), ("/a#x://y", False), ("/p#/a", True), ("p#x://y", True),
    (SITE + "/p#x://y", True), (SITE + "/a?q#b://c#d", False)])
def test_regp_a_fragment_holding_a_scheme_separator_is_a_fragment(url: str,
                                                                  allowed: bool) -> None:
    # "://" after the "#" once made the fragment's start be looked for past it: a
    # ValueError (substring not found) instead of an answer.
    robots = parse("Robot-version: 3.0\n\nUser-agent: *\nDisallow: /a\n")
    assert robots.allowed(url, "bot") is allowed


# -- seed 002, the 1996 draft ------------------------------------------------------------

TABLE_9_3 = [
    ("/tmp", "/tmp", True),
    ("/tmp", "/tmpfile.html", True),
    ("/tmp", "/tmp/a.html", True),
    ("/tmp/", "/tmp", False),
    ("", "/README.TXT", True),
    ("/~fred/hi.html", "/%7Efred/hi.html", True),
    ("/%7Efred/hi.html", "/~fred/hi.html", True),
    ("/%7efred/hi.html", "/%7Efred/hi.html", True),
    ("/~fred/hi.html", "/~fred%2Fhi.html", False),
]


@pytest.mark.parametrize(("rule", "path", "matches"), TABLE_9_3)
def test_koster_table_9_3_path_matching(rule: str, path: str, matches: bool) -> None:
    # First match wins: the rule under test comes first, "Disallow: /" catches the rest.
    robots = parse(f"User-agent: *\nAllow: {rule}\nDisallow: /\n", "koster1996")
    assert robots.allowed("http://www.joes-hardware.com" + path, "anybot") is matches


MARYS_ANTIQUES = """\
# This is the robots.txt file for Mary's Antiques web site

User-Agent: Suzy-Spider
Disallow: /dynamic
Allow: /private/suzy-stuff
Disallow: /private

User-Agent: Furniture-Finder
Allow: /dynamic/check-inventory
Disallow: /dynamic
Disallow: /private

User-Agent: *
Disallow: /dynamic
Disallow: /private
"""

# Table 9-4 names the robots SuzySpider and FurnitureFinder; the file names them with a
# hyphen, which a substring match needs, so the file's names are used.
TABLE_9_4 = [
    ("/", True, True, True),
    ("/index.html", True, True, True),
    ("/private/payroll.xls", False, False, False),
    ("/private/suzy-stuff/taxes.txt", True, False, False),
    ("/dynamic/buy-stuff?id=3546", False, False, False),
    ("/dynamic/check-inventory?kitchen", False, True, False),
]


@pytest.mark.parametrize("dialect", ["koster1996", "rfc9309"])
@pytest.mark.parametrize(("path", "suzy", "furniture", "nosy"), TABLE_9_4)
def test_koster_table_9_4_marys_antiques(
    dialect: str, path: str, suzy: bool, furniture: bool, nosy: bool
) -> None:
    robots = parse(MARYS_ANTIQUES, dialect)
    url = "http://www.marys-antiques.com" + path
    assert robots.allowed(url, "Suzy-Spider") is suzy
    assert robots.allowed(url, "Furniture-Finder") is furniture
    assert robots.allowed(url, "NosyBot") is nosy


def test_koster_first_match_and_substring_agent() -> None:
    robots = parse("User-agent: bot\nDisallow: /a\nAllow: /a/b\n", "koster1996")
    # "bot" matches Robot, Bottom-Feeder, Spambot ... (seed 002)
    for agent in ("Robot/1.0", "Bottom-Feeder", "Spambot"):
        assert not robots.allowed("http://x.org/a/b", agent)
    assert robots.allowed("http://x.org/a/b", "Crawler")


# -- seed 003 ----------------------------------------------------------------------------

SEED_003_TABLE = [
    ("/tmp", "/tmp", True),
    ("/tmp", "/tmp.html", True),
    ("/tmp", "/tmp/a.html", True),
    ("/tmp/", "/tmp", False),
    ("/tmp/", "/tmp/", True),
    ("/tmp/", "/tmp/a.html", True),
    ("/a%3cd.html", "/a%3cd.html", True),
    ("/a%3Cd.html", "/a%3cd.html", True),
    ("/a%3cd.html", "/a%3Cd.html", True),
    ("/a%2fb.html", "/a%2fb.html", True),
    ("/a%2fb.html", "/a/b.html", False),
    ("/a/b.html", "/a%2fb.html", False),
    ("/a/b.html", "/a/b.html", True),
    ("/%7ebmj/index.html", "/~bmj/index.html", True),
    ("/~bmj/index.html", "/%7Ebmj/index.html", True),
]


@pytest.mark.parametrize("dialect", ["koster1996", "rfc9309", "regp"])
@pytest.mark.parametrize(("rule", "path", "matches"), SEED_003_TABLE)
def test_seed_003_matching_table(dialect: str, rule: str, path: str, matches: bool) -> None:
    if dialect == "koster1996":
        robots = parse(f"User-agent: *\nAllow: {rule}\nDisallow: /\n", dialect)
    else:
        robots = parse(f"User-agent: *\nDisallow: /\nAllow: {rule}\n", dialect)
    assert robots.allowed("http://www.bmj.org" + path, "anybot") is matches


def test_seed_003_row_with_a_changed_letter() -> None:
    # The seed's row "/a%3Cd.html  /a%3CD.html  Yes" changes the letter after the escape
    # (the 1996 draft's row reads /a%3Cd.html twice). Only REGP's case-insensitive paths
    # make it a match; the case-sensitive dialects do not.
    body = "User-agent: *\nDisallow: /\nAllow: /a%3Cd.html\n"
    assert parse(body, "regp").allowed("http://www.bmj.org/a%3CD.html", "anybot")
    assert not parse(body, "rfc9309").allowed("http://www.bmj.org/a%3CD.html", "anybot")


BMJ = """\
# /robots.txt for http://www.bmj.org/
# comments to webmaster@bmj.org

User-agent: robot1
Disallow: /

User-agent: crawler1
User-agent: infospider
Disallow:

User-agent: *
Disallow: /org/plans.html
Allow: /org/
Allow: /serv
Allow: /~mak
Disallow: /
"""

# URL, robot1, crawler1 (and infospider, which shares its record), any other robot.
BMJ_MATRIX = [
    ("/", False, True, False),
    ("/index.html", False, True, False),
    ("/robots.txt", True, True, True),
    ("/server.html", False, True, True),
    ("/services/fast.html", False, True, True),
    ("/services/slow.html", False, True, True),
    ("/orgo.gif", False, True, False),
    ("/org/about.html", False, True, True),
    ("/org/plans.html", False, True, False),
    ("/%7Ejim/jim.html", False, True, False),
    ("/%7Emak/mak.html", False, True, True),
]


@pytest.mark.parametrize("dialect", ["koster1996", "rfc9309"])
@pytest.mark.parametrize(("path", "robot1", "crawler1", "other"), BMJ_MATRIX)
def test_seed_003_bmj_worked_example(
    dialect: str, path: str, robot1: bool, crawler1: bool, other: bool
) -> None:
    robots = parse(BMJ, dialect)
    url = "http://www.bmj.org" + path
    assert robots.allowed(url, "robot1") is robot1
    assert robots.allowed(url, "crawler1") is crawler1
    assert robots.allowed(url, "infospider") is crawler1
    assert robots.allowed(url, "otherbot") is other

"""The survey's AI-usage counts against a farm of sites on loopback: each site's robots.txt,
fetched over HTTP by ``polite survey``, holds a mix of Content-Usage, Content-Signal and
License lines (well-formed, malformed, outside any group, in an AI crawler's group, in old
vocabularies) and groups for AI crawlers that shut them out or not. The report's ``usage``,
``usage_purposes`` and ``ai_crawlers`` tables must equal the truth, which is counted here
from the choices that wrote each file, never by parsing the files."""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from polite.cli.survey import _ai_crawlers
from tests.commands import run
from tests.conftest import ON_PORT_80
from tests.survey_farm import Farm, Page
from tests.test_survey_usage import table

pytestmark = ON_PORT_80

TEXT = (("Content-Type", "text/plain"),)
SITES = 96
PURPOSES = ("search", "train-ai", "ai-input")


@dataclass(frozen=True)
class Option:
    """Lines to write, whether a survey is to count them as the mechanism (only a readable
    line inside a group counts), and the (purpose, preference) pairs they state."""

    lines: tuple[str, ...]
    counted: bool
    stated: frozenset[tuple[str, str]] = frozenset()


def _opt(*lines: str, counted: bool = True, **prefs: str) -> Option:
    return Option(lines, counted and bool(lines),
                  frozenset((p.replace("_", "-"), v) for p, v in prefs.items()))


# Content-Usage is read with draft-ietf-aipref-vocab-07 (train-ai, search; y / n).
USAGE = (
    _opt(),
    _opt("Content-Usage: train-ai=n", train_ai="disallow"),
    _opt("Content-Usage: train-ai=y, search=y", train_ai="allow", search="allow"),
    # A path rule beside a general one: the file states both.
    Option(("Content-Usage: train-ai=n", "Content-Usage: /ai-ok/ train-ai=y"), True,
           frozenset({("train-ai", "disallow"), ("train-ai", "allow")})),
    _opt("content-usage: bots=n"),  # -03's label: unknown under -07, no purpose
    _opt("Content-Usage: train-ai=maybe"),  # not a y / n token: no purpose
    _opt("Content-Usage: train-ai=?0"),  # a boolean, not the token n: no purpose
    _opt("Content-Usage: search=n;why=x, train-ai=y", search="disallow", train_ai="allow"),
    _opt("Content-Usage: train-ai=y, train-ai=n", train_ai="disallow"),  # the last one
    _opt("Content-Usage: train-ai=n,", counted=False),  # a trailing comma: malformed
    _opt("CONTENT-USAGE: /ai-ok/", counted=False),  # a path and no statement
)
# Content-Signal is read with Cloudflare's labels and yes / no.
SIGNAL = (
    _opt(),
    _opt("Content-Signal: search=yes, ai-train=no", search="allow", train_ai="disallow"),
    _opt("Content-Signal: ai-input=no", ai_input="disallow"),
    _opt("Content-Signal: search=yes, ai-input=yes, ai-train=yes", search="allow",
         ai_input="allow", train_ai="allow"),
    _opt("Content-Signal: ai-train=n"),  # AIPREF's token, not a Content Signal: none
    _opt("Content-Signal: search=yes ai-train=no", counted=False),  # no comma: malformed
)
# Where a site's Content-Usage / Content-Signal lines stand.
PLACES = ("star", "crawler", "before")  # "*"'s group, an AI crawler's group, before any
# AI crawlers a file may name (tokens of the crawler list), and how each group treats "/".
NAMED = ("GPTBot", "CCBot", "ClaudeBot", "Google-Extended", "PerplexityBot",
         "meta-externalagent")
RULES = ("Disallow: /", "Disallow: /private", "Allow: /")


@dataclass
class Truth:
    farm: Farm = field(default_factory=Farm)
    domains: list[str] = field(default_factory=list)
    files: int = 0  # robots.txt files the report counts (ok or empty)
    mechanisms: Counter[str] = field(default_factory=Counter)
    stated: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    named: Counter[str] = field(default_factory=Counter)
    blocked: Counter[str] = field(default_factory=Counter)
    used: Counter[str] = field(default_factory=Counter)  # which choices the farm made


def _robots(domain: str, rng: random.Random, truth: Truth, tokens: list[str]) -> bytes:
    """One site's robots.txt, its share of the truth added."""
    usage = rng.choice(USAGE)
    signal = rng.choice(SIGNAL)
    place = rng.choice(PLACES)
    license_at = rng.choice(("none", "top", "bottom", "relative"))
    star_blocks = rng.random() < 0.3
    crawlers = rng.sample(NAMED, rng.randrange(0, 4))
    truth.used.update([f"usage {usage.lines}", f"signal {signal.lines}", f"place {place}",
                       f"license {license_at}", f"star blocks {star_blocks}"])
    out = [f"# robots.txt of {domain}"]
    if license_at == "top":
        out.append(f"License: https://{domain}/license.xml")
    elif license_at == "relative":  # RSL's value is an absolute URL: this one is ignored
        out.append("License: /license.xml")
    ours = [*usage.lines, *signal.lines]
    if place == "before":
        out += ours
    out += ["User-agent: *", "Disallow: /" if star_blocks else "Disallow: /private"]
    if place == "star" or (place == "crawler" and not crawlers):
        out += ours
    rules: dict[str, str] = {}
    for n, token in enumerate(crawlers):
        rule = rng.choice(RULES)
        rules[token] = rule
        # Tokens as sites write them: some lower-case, some with a version.
        form = rng.choice(("as listed", "lower-case", "versioned"))
        truth.used[f"written {form}"] += 1
        written = {"as listed": token, "lower-case": token.lower(),
                   "versioned": f"{token}/1.0"}[form]
        out += ["", f"User-agent: {written}", rule]
        if place == "crawler" and n == 0:
            out += ours
    if license_at == "bottom":  # RSL: a License line is global wherever it stands
        out.append(f"License: https://{domain}/license.xml")
    in_group = place != "before"
    found: set[str] = set()
    for mechanism, option in (("content-usage", usage), ("content-signal", signal)):
        if option.counted and in_group:
            found.add(mechanism)
            truth.stated.update((mechanism, p, v) for p, v in option.stated)
    if license_at in ("top", "bottom"):
        found.add("license")
    truth.mechanisms.update(found)
    truth.mechanisms["any"] += bool(found)
    for token in tokens:
        own = next((rules[t] for t in rules if t.lower() == token.lower()), None)
        truth.named[token] += own is not None
        truth.blocked[token] += (own == "Disallow: /") if own is not None else star_blocks
    return ("\n".join(out) + "\n").encode()


def build(tokens: list[str]) -> Truth:
    truth = Truth()
    rng = random.Random(26)
    for i in range(SITES):
        domain = f"u{i}.usage.test"
        address = f"127.0.126.{i + 1}"
        truth.domains.append(domain)
        if i % 16 == 15:  # no robots.txt: not a file the report counts
            truth.farm.add(domain, address, {})
            continue
        if i % 16 == 14:  # a home page where robots.txt should be, lines in it or not
            body = (b"<!doctype html><html><body><pre>User-agent: *\nDisallow: /\n"
                    b"Content-Usage: train-ai=n\nLicense: https://x.test/l.xml\n</pre></body>"
                    b"</html>\n")
            truth.farm.add(domain, address, {"/robots.txt": Page(200, body, (
                ("Content-Type", "text/html"),))})
            continue
        truth.files += 1
        if i % 16 == 13:  # only comments: a file, stating nothing, naming no one
            truth.farm.add(domain, address, {"/robots.txt": Page(200, b"# none\n", TEXT)})
            continue
        body = _robots(domain, rng, truth, tokens)
        if i % 16 == 12:  # the file one redirect away
            routes = {"/robots.txt": Page(301, b"", (
                          ("Location", f"http://{domain}/files/robots.txt"),)),
                      "/files/robots.txt": Page(200, body, TEXT)}
        else:
            routes = {"/robots.txt": Page(200, body, TEXT)}
        truth.farm.add(domain, address, routes)
    return truth


def test_the_usage_tables_equal_the_farms_truth(tmp_path: Path) -> None:
    crawlers = _ai_crawlers()  # the crawler list is the input, as the report reads it
    tokens = [token for _, token in crawlers]
    assert set(NAMED) <= set(tokens)
    truth = build(tokens)
    # Every choice occurs, so that each one's reading is put to the test.
    assert all(truth.used[f"usage {o.lines}"] for o in USAGE)
    assert all(truth.used[f"signal {o.lines}"] for o in SIGNAL)
    assert all(truth.used[f"place {p}"] for p in PLACES)
    assert all(truth.used[f"license {w}"] for w in ("none", "top", "bottom", "relative"))
    assert all(truth.used[f"written {w}"] for w in ("as listed", "lower-case", "versioned"))
    hosts = tmp_path / "hosts"
    hosts.write_text(truth.farm.hosts())
    listing = tmp_path / "top.csv"
    listing.write_text("".join(f"{rank},{d}\n" for rank, d in enumerate(truth.domains, 1)))
    out = tmp_path / "survey"
    with truth.farm.running():  # no site is to time out: time-outs a busy machine keeps to
        result = run("survey", str(listing), "--out", str(out), "--hosts", str(hosts),
                     "--allow-private", "--no-sitemaps", "--delay", "0", "--concurrency",
                     "32", "--connect-timeout", "10", "--read-timeout", "20")
        assert result.returncode == 0, result.stderr
    assert {path for _, _, path in truth.farm.arrivals} == {"/robots.txt",
                                                             "/files/robots.txt"}
    report = run("report", str(out), "--no-figures")  # the tables are read
    assert report.returncode == 0, report.stderr

    rows = table(out, "usage")
    assert {r["mechanism"]: int(r["files"]) for r in rows} == {
        m: truth.mechanisms[m] for m in ("content-usage", "content-signal", "license", "any")}
    for r in rows:  # the CSV writes shares to six places
        assert abs(float(r["share"]) - truth.mechanisms[r["mechanism"]] / truth.files) < 1e-6
    assert 0 < truth.mechanisms["any"] < truth.files

    purposes = {(r["mechanism"], r["purpose"]): (int(r["allow"]), int(r["disallow"]))
                for r in table(out, "usage_purposes")}
    assert purposes == {(m, p): (truth.stated[(m, p, "allow")], truth.stated[(m, p, "disallow")])
                        for m in ("content-usage", "content-signal") for p in PURPOSES}
    assert sum(truth.stated.values()) > 0

    rows = table(out, "ai_crawlers")
    assert [(r["crawler"], r["token"]) for r in rows] == crawlers
    got = {r["token"]: (int(r["files"]), int(r["named"]), int(r["blocked"])) for r in rows}
    assert got == {t: (truth.files, truth.named[t], truth.blocked[t]) for t in tokens}
    assert any(truth.named[t] for t in NAMED) and any(truth.blocked[t] for t in NAMED)

    # The report's page shows the same counts.
    page = (out / "report" / "index.html").read_text(encoding="utf-8")
    section = page[page.index('id="t-usage"'):page.index('id="t-usage-purposes"')]
    for mechanism in ("content-usage", "content-signal", "license", "any"):
        shown = re.search(rf'<td class="">{mechanism}</td><td class="n">([\d,]+) ', section)
        assert shown is not None and int(shown[1]) == truth.mechanisms[mechanism]

"""AI-usage preferences in polite robots explain, lint and diff, through the installed entry
point, on files with each robots.txt mechanism (Content-Usage, Content-Signal, License)."""

from __future__ import annotations

import json
from pathlib import Path

from polite.core.robots import lint_body, parse
from polite.core.robots.usage_tools import lint_usage
from tests.core.usage.test_engine import ATTACH_EXAMPLE
from tests.test_cli_robots_tools import polite

EVERY_MECHANISM = """\
License: https://example.com/license.xml
User-Agent: *
Allow: /
Disallow: /never/
Content-Usage: train-ai=n
Content-Usage: /ai-ok/ train-ai=y
Content-Signal: search=yes, ai-train=yes, ai-input=no
Content-Usage: /never/ train-ai=y
Content-Usage: bots=n, future=y

User-Agent: ExampleBot
Allow: /
Content-Usage: train-ai=y
"""


def test_explain_shows_the_drafts_table_beside_access(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text(ATTACH_EXAMPLE)
    result = polite("robots", "explain", str(robots), "-a", "OtherBot", "-d", "rfc9309",
                    "--purpose", "train-ai", "/test", "/never/test", "/ai-ok/test")
    assert result.returncode == 0, result.stderr
    usage = result.stdout.split("AI-usage preferences")[1].splitlines()
    rows = [line.split() for line in usage if line.startswith("  /")]
    assert rows == [["/test", "OtherBot", "allowed", "train-ai=disallow"],
                    ["/never/test", "OtherBot", "disallowed", "train-ai=unknown"],
                    ["/ai-ok/test", "OtherBot", "allowed", "train-ai=allow"]]
    assert "train-ai=disallow by robots.txt Content-Usage line 4: train-ai=n" in result.stdout


def test_explain_json_every_mechanism_and_the_conflict(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text(EVERY_MECHANISM)
    result = polite("robots", "explain", str(robots), "-a", "OtherBot", "-a", "ExampleBot",
                    "-d", "rfc9309", "--json", "/page")
    found = json.loads(result.stdout)["usage"]
    other, example = found
    assert other["allowed"] is True
    assert other["prefs"] == {"search": "allow", "train-ai": "disallow", "ai-input": "disallow"}
    train = other["purposes"]["train-ai"]
    assert "Content-Usage line 5" in train["reason"]
    assert "most restrictive wins over robots.txt Content-Signal line 7" in train["reason"]
    assert {s["vocabulary"] for s in other["sources"]} == {
        "draft-ietf-aipref-vocab-07", "draft-romm-aipref-contentsignals-00"}
    assert other["licenses"] == ["https://example.com/license.xml"]
    assert example["prefs"] == {"train-ai": "allow"}


def test_lint_finds_each_kind_of_problem(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("Content-Usage: train-ai=n\n" + EVERY_MECHANISM
                      + "Content-Usage: train-ai=maybe\nContent-Signal: search=y,\n")
    result = polite("robots", "lint", str(robots))
    assert result.returncode == 1
    out = result.stdout
    assert ":1: error: content-usage before any User-agent line" in out
    assert ":8: warning: content-signal disagrees with content-usage on line 6 about " \
        "train-ai" in out
    assert ":9: info: /never/ is disallowed to this group's crawlers" in out
    assert ":10: warning: 'bots' is not in draft-ietf-aipref-vocab-07 (it was a label in " \
        "revision 03, 04)" in out
    assert ":10: warning: 'future' is not in draft-ietf-aipref-vocab-07; ignored" in out
    assert ":15: warning: 'train-ai' is neither y nor n" in out
    assert ":16: error: cannot read content-signal value 'search=y,'; ignored [bad-value]" in out


def test_lint_is_quiet_on_the_drafts_example() -> None:
    # The attach draft's example restates /never/ nowhere and mixes no mechanisms.
    assert lint_usage(parse(ATTACH_EXAMPLE)) == []
    assert not [i for i in lint_body(ATTACH_EXAMPLE).issues if i.code.startswith("usage")]


def test_diff_shows_preference_changes(tmp_path: Path) -> None:
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    old.write_text(ATTACH_EXAMPLE)
    new.write_text(ATTACH_EXAMPLE.replace("/ai-ok/ train-ai=y", "/ai-ok/ train-ai=n"))
    result = polite("robots", "diff", str(old), str(new), "-a", "OtherBot", "--json")
    assert result.returncode == 1  # no verdict changes, but a preference does
    found = json.loads(result.stdout)
    assert found["changes"] == []
    changed = {(c["url"], c["purpose"], c["before"], c["after"])
               for c in found["usage_changes"]}
    assert changed == {("/ai-ok/", "train-ai", "allow", "disallow"),
                       ("/ai-ok/sample", "train-ai", "allow", "disallow"),
                       ("/ai-ok/", "train-genai", "allow", "disallow"),
                       ("/ai-ok/sample", "train-genai", "allow", "disallow")}
    text = polite("robots", "diff", str(old), str(new), "-a", "OtherBot").stdout
    assert "OtherBot  /ai-ok/  train-ai: allow -> disallow" in text
    same = polite("robots", "diff", str(old), str(old), "-a", "OtherBot")
    assert same.returncode == 0

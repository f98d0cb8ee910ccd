"""polite robots explain, lint and diff, run through the installed ``polite`` entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import shared_path
from tests.core.robots.test_explain import BMJ, BMJ_URLS

POLITE = str(Path(sys.executable).parent / "polite")


def polite(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([POLITE, *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_explain_prints_seed_003s_matrix_and_marks_google(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text(BMJ)
    result = polite("robots", "explain", str(robots), "-a", "robot1", "-a", "crawler1",
                    "-a", "Info Spiders/3.0", *BMJ_URLS)
    assert result.returncode == 1, result.stderr  # the dialects disagree somewhere
    rows = result.stdout.split("\n\n")[1].splitlines()
    table = [row.split("  ")[0].strip() for row in rows]
    assert table == ["URL", *BMJ_URLS]
    assert rows[3].split() == ["/robots.txt", "Yes", "!", "google", "No", "Yes", "!", "google",
                               "No", "Yes", "!", "google", "No"]
    assert rows[9].split() == ["/org/plans.html", "No", "Yes", "!", "google", "No", "No"]
    assert " ! rfc9309: allowed, Allow: /~mak (line 15) over Disallow: / (line 16): longest " \
        "match (path /~mak/mak.html)" in result.stdout
    assert "koster1996: disallowed, Disallow: /org/plans.html (line 12) over Allow: /org/ " \
        "(line 13): first match" in result.stdout
    as_json = json.loads(polite("robots", "explain", str(robots), "-a", "robot1", "--json",
                                "-d", "google", "/robots.txt").stdout)
    assert as_json["cells"][0]["allowed"] is False
    assert as_json["cells"][0]["rule"] == {"rule": "Disallow: /", "line": 16}


def test_explain_exits_zero_when_dialects_agree(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /private\n")
    result = polite("robots", "explain", str(robots), "-a", "bot", "--brief", "/private/x", "/")
    assert result.returncode == 0
    assert result.stdout.splitlines()[2:] == ["URL         bot", "/private/x  No",
                                              "/           Yes"]


def test_lint_lines_and_checks_keep_the_format(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /\n# staging\nDisalow /x\nFoo: bar\n")
    result = polite("robots", "lint", str(robots), "--lines")
    assert result.returncode == 1
    out = result.stdout.splitlines()
    assert out[:5] == [f"{robots}:1: directive user-agent: User-agent: *",
                       f"{robots}:2: directive disallow: Disallow: /",
                       f"{robots}:3: comment: # staging",
                       f"{robots}:4: missing-colon disallow: Disalow /x",
                       f"{robots}:5: unknown foo: Foo: bar"]
    assert f"{robots}:2: warning: Disallow: / closes the whole site to every crawler not " \
        "named elsewhere (a staging file left live?) [disallow-all]" in out
    assert f"{robots}:5: warning: unknown field 'Foo' kept as an extension [unknown-field]" in out
    assert out[-1] == f"{robots}: 5 lines: 1 comment, 2 directive, 1 missing-colon, 1 unknown"
    data = json.loads(polite("robots", "lint", str(robots), "--lines", "--json").stdout)
    assert [c["label"] for c in data["lines"]] == ["directive", "directive", "comment",
                                                  "missing-colon", "unknown"]


def test_diff_of_corpus_files_and_urls_from_a_file(tmp_path: Path) -> None:
    old = str(shared_path("corpus", "robots", "httpd.apache.org.txt"))
    new = str(shared_path("corpus", "robots", "tomcat.apache.org.txt"))
    result = polite("robots", "diff", old, new)
    assert result.returncode == 1
    assert "  AnyOtherBot  /websrc  disallowed -> allowed  (was Disallow: /websrc (line 2); " \
        "now no rule matches)" in result.stdout
    urls = tmp_path / "urls.txt"
    urls.write_text("# pages\nhttps://httpd.apache.org/docs/\n")
    same = polite("robots", "diff", old, new, "--urls", str(urls), "-a", "bot", "--json")
    assert same.returncode == 0
    assert json.loads(same.stdout)["changes"] == []


def test_diff_of_regp_files_with_a_fragment_holding_a_scheme_separator(
        tmp_path: Path) -> None:
    # REGP keeps "#" in a URL: "/a#x://y" once raised "substring not found" (a traceback).
    old, new, urls = tmp_path / "old.txt", tmp_path / "new.txt", tmp_path / "urls.txt"
    old.write_text("Robot-version: 3.0\nUser-agent: *\nDisallow: /a\n")
    new.write_text("Robot-version: 3.0\nUser-agent: *\nDisallow: /b\n")
    urls.write_text("/p#x://y\n/a#x://y\n")
    result = polite("robots", "diff", str(old), str(new), "--urls", str(urls))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "/a#x://y  disallowed -> allowed" in result.stdout
    assert "/p#x://y" not in result.stdout.split("verdicts change:")[1]

"""The command line, run as a user runs it: a real process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests import commands
from tests.sites import Reply, Site, serve


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m polite ARGS`` in an interpreter started for it alone, as a user runs it
    (the other modules' commands are forked from one that imported polite already:
    :mod:`tests.commands`)."""
    return commands.run(*args, stdin=stdin, fresh=True)


def test_robots_check_prints_verdict_rule_and_line(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /private\nAllow: /private/ok\n")
    result = run("robots", "check", str(robots), "--agent", "bot",
                 "https://e.com/private/x", "https://e.com/private/ok")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("disallowed https://e.com/private/x")
    assert "Disallow: /private (line 2)" in lines[0]
    assert lines[1].startswith("allowed")
    assert "line 3" in lines[1]


def test_robots_check_json_and_stdin() -> None:
    result = run("robots", "check", "-", "--agent", "bot", "--json", "https://e.com/a",
                 stdin=b"User-agent: bot\nDisallow: /a\n")
    assert result.returncode == 1
    verdicts = json.loads(result.stdout)
    assert verdicts == [{"url": "https://e.com/a", "allowed": False, "rule": "Disallow: /a",
                         "line": 2, "reason": "Disallow: /a (line 2)"}]


def test_robots_check_all_allowed_exits_zero(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("Robot-version: 3.0\n\nUser-agent: *\nAllow: /\n")
    result = run("robots", "check", str(robots), "-a", "bot", "--dialect", "regp", "http://e/x")
    assert result.returncode == 0
    assert result.stdout.startswith("allowed")


def test_robots_lint_lists_issues_with_line_numbers(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("Disallow: /early\nUser-agent: *\nDisalow: /x\nCrawl-delay: soon\n")
    result = run("robots", "lint", str(robots))
    assert result.returncode == 1
    out = result.stdout
    assert f"{robots}:1: error:" in out
    assert f"{robots}:3: warning: 'Disalow' read as 'disallow'" in out
    assert f"{robots}:4: error: cannot read crawl-delay" in out
    assert "2 errors, 1 warning," in out
    as_json = json.loads(run("robots", "lint", str(robots), "--json").stdout)
    assert [i["line"] for i in as_json] == [1, 3, 4]


def test_robots_lint_says_an_html_page_once_in_text_and_json(tmp_path: Path) -> None:
    page = tmp_path / "robots.txt"
    page.write_text("<!DOCTYPE html>\n<html><body>\n" + "<p>Not: here</p>\n<div>x</div>\n" * 900
                    + "User-agent:\nUser-agent:\n</body></html>\n")
    result = run("robots", "lint", str(page))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{page}:1: error: the body looks like an HTML page, not a robots.txt file; 1,803 lines "
        "of it skipped as no field [html]",
        f"{page}:1803: warning: User-agent with no value (2 times: lines 1803, 1804) "
        "[empty-user-agent]",
        f"{page}: dialect rfc9309, 1 group, 1,803 errors, 2 warnings, 0 notes",
    ]
    as_json = json.loads(run("robots", "lint", str(page), "--json").stdout)
    assert [(i["line"], i["code"], i["count"], i["lines"][:3]) for i in as_json] == [
        (1, "html", 1_803, [1, 2, 3]), (1_803, "empty-user-agent", 2, [1_803, 1_804])]


def test_clean_file_lints_clean(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /x\n")
    assert run("robots", "lint", str(robots)).returncode == 0


def test_missing_file_is_a_clear_error() -> None:
    result = run("robots", "lint", "/nonexistent/robots.txt")
    assert result.returncode == 2
    assert "No such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_command_prints_help() -> None:
    result = run()
    assert result.returncode == 2
    assert "robots" in result.stdout


def test_robots_check_fetches_a_sites_robots_txt() -> None:
    robots = Reply(200, b"User-agent: *\nDisallow: /private\n")
    with serve(Site("127.0.0.31", {"/robots.txt": robots})) as site:
        result = run("robots", "check", site.origin, "--agent", "bot", "--allow-private",
                     "/private/x", f"{site.origin}/public")
        assert result.returncode == 1, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == f"{site.origin}/robots.txt: 200, dialect rfc9309"
        assert lines[1].startswith(f"disallowed {site.origin}/private/x")
        assert "Disallow: /private (line 2)" in lines[1]
        assert lines[2].startswith(f"allowed    {site.origin}/public")
        assert site.requests == ["/robots.txt"]


def test_robots_check_site_status_rows() -> None:
    with serve(Site("127.0.0.32", {"/robots.txt": Reply(403)})) as forbidden, \
            serve(Site("127.0.0.33", {})) as missing:
        result = run("robots", "check", forbidden.origin, "--agent", "bot", "--allow-private",
                     "--json", "/a")
        assert result.returncode == 1
        assert json.loads(result.stdout)[0]["allowed"] is False
        result = run("robots", "check", missing.origin, "--agent", "bot", "--allow-private",
                     "/a")
        assert result.returncode == 0, result.stdout
        assert "404" in result.stdout


def test_robots_check_site_refuses_private_addresses_by_default() -> None:
    with serve(Site("127.0.0.34", {"/robots.txt": Reply(200, b"")})) as site:
        result = run("robots", "check", site.origin, "--agent", "bot", "/a")
        # A refusal to fetch is an error that says what to add, not a verdict.
        assert result.returncode == 2
        assert "private or loopback" in result.stderr and "--allow-private" in result.stderr
        assert result.stdout == ""
        assert site.requests == []


def test_a_url_that_cannot_be_checked_is_an_error(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /a\n")
    for bad in ("notaurl", "ftp://x/y"):
        result = run("robots", "check", str(robots), "-a", "X", "https://e.com/", bad)
        assert result.returncode == 2, bad
        assert "allowed" not in result.stdout and bad in result.stderr


def test_a_file_cut_at_the_cap_is_said_and_max_bytes_reads_on() -> None:
    from tests.conftest import shared_path

    oracle = str(shared_path("corpus", "robots", "docs.oracle.com.txt"))
    url = "https://docs.oracle.com/cd/E80817_01/x"  # disallowed by a rule past 500 KiB
    cut = run("robots", "check", oracle, "-a", "ExampleBot", url)
    assert "longer than 512,000 bytes" in cut.stderr and "--max-robots-bytes" in cut.stderr
    whole = run("robots", "check", oracle, "-a", "ExampleBot", url, "--max-robots-bytes",
                "2000000")
    assert whole.returncode == 1 and whole.stdout.startswith("disallowed")
    assert "Disallow: /cd/E80817_01/" in whole.stdout and whole.stderr == ""
    linted = run("robots", "lint", oracle)
    assert "longer than 512,000 bytes" in linted.stderr


def test_lint_and_diff_take_a_site_or_a_url_as_check_and_explain_do(tmp_path: Path) -> None:
    old = b"User-agent: *\nDisallow: /private\nDisalow: /typo\n"
    new = b"User-agent: *\nDisallow: /private\nDisallow: /drafts\n"
    with serve(Site("127.0.60.1", {"/robots.txt": Reply(200, old)})) as before, \
            serve(Site("127.0.60.2", {"/robots.txt": Reply(200, new)})) as after:
        linted = run("robots", "lint", f"{before.origin}/robots.txt", "--allow-private")
        assert linted.returncode == 1, linted.stderr
        assert f"{before.origin}/robots.txt:3: warning: 'Disalow' read as 'disallow'" \
            in linted.stdout
        refused = run("robots", "lint", before.origin)
        assert refused.returncode == 2 and "--allow-private" in refused.stderr
        assert "No such file" not in refused.stderr
        local = tmp_path / "robots.txt"
        local.write_bytes(old)
        diffed = run("robots", "diff", str(local), f"{after.origin}/", "--allow-private")
        assert diffed.returncode == 1, diffed.stderr
        assert f"+ {after.origin}/robots.txt:3: Disallow: /drafts" in diffed.stdout
        assert "/drafts  allowed -> disallowed" in diffed.stdout
        same = run("robots", "diff", before.origin, str(local), "--allow-private")
        assert same.returncode == 0 and "no URL changes verdict" in same.stdout, same.stderr
        assert before.requests == ["/robots.txt", "/robots.txt"]
    with serve(Site("127.0.60.3", {})) as missing:
        nothing = run("robots", "lint", missing.origin, "--allow-private")
        assert nothing.returncode == 2 and "404" in nothing.stderr, nothing.stderr


def test_check_takes_paths_as_explain_does(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /w/\n")
    checked = run("robots", "check", str(robots), "-a", "bot", "/w/index.php", "/wiki/Main")
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.splitlines() == [
        "disallowed /w/index.php  (Disallow: /w/ (line 2))",
        "allowed    /wiki/Main  (no rule matches)"]
    explained = run("robots", "explain", str(robots), "-a", "bot", "/w/index.php", "--brief")
    assert explained.returncode == 0 and "/w/index.php  No" in explained.stdout


def test_a_command_group_without_its_command_prints_the_groups_help() -> None:
    for group, command in (("robots", "lint"), ("sitemap", "tree"), ("site", "import"),
                           ("ca", "export")):
        result = run(group)
        assert result.returncode == 2, group
        assert result.stdout.startswith(f"usage: polite {group} "), result.stdout
        assert command in result.stdout and "survey" not in result.stdout


def test_make_serve_passes_args_to_polite_serve() -> None:
    from tests.serving import polite_serve_process

    routes = {"/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private\n")}
    with serve(Site("127.0.60.5", routes)) as site, \
            polite_serve_process("--allow-private", "--store", "memory://",
                                 make=True) as (api, _):
        answer = api.post("/politeness/verbose", json=[f"{site.origin}/private/x"])
        assert answer.status_code == 200, answer.text
        verdict = answer.json()[0]
        # Without --allow-private the site's robots.txt would not be read at all.
        assert verdict["allowed"] is False, verdict
        assert "Disallow: /private (line 2)" in str(verdict["error"]), verdict
        assert site.requests == ["/robots.txt"]


def test_control_characters_of_a_file_are_shown_escaped_and_bad_lists_refused(
        tmp_path: Path) -> None:
    old = tmp_path / "robots.txt"
    old.write_bytes(b"User-agent: *\nDisallow: /a\n")
    new = tmp_path / "bin.txt"
    new.write_bytes(b"User-agent: *\nDisallow: /a\x01b\x1b[2J\n")
    outputs = [
        run("robots", "diff", str(old), str(new)),
        run("robots", "lint", str(new), "--lines"),
        run("robots", "check", str(new), "-a", "bot", "/a%01b%1B[2J"),
        run("robots", "explain", str(new), "-a", "bot", "/a%01b%1B[2J"),
    ]
    for result in outputs:
        assert result.returncode in (0, 1), result.stderr
        assert "Disallow: /a\\x01b\\x1b[2J" in result.stdout, result.stdout
        assert "\x01" not in result.stdout and "\x1b" not in result.stdout
    urls = tmp_path / "urls.txt"
    urls.write_bytes(b"/a\n/b\n\x00\xff\xfe")
    result = run("robots", "diff", str(old), str(new), "--urls", str(urls))
    assert result.returncode == 2 and result.stdout == ""
    assert f"{urls}:3: this line holds the control character \\x00" in result.stderr
    config = tmp_path / "polite.toml"
    config.write_bytes(b"port = 8080\nagent = \"b\xfcrbot\"\n")
    result = run("serve", "--config", str(config))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--config {config}:2: this line is not UTF-8 text" in result.stderr

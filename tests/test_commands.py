"""The commands the tests fork from a prepared interpreter (:mod:`tests.commands`) end as
those of an interpreter started for them: the same status, output and errors, in the
caller's working directory and environment, and killed past their time."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.commands import forked_cpu_s, run

ROBOTS = b"User-agent: bot\nDisallow: /a\n"


@pytest.mark.parametrize(("args", "stdin"), [
    (("robots", "check", "-", "--agent", "bot", "--json", "https://e.com/a", "/b"), ROBOTS),
    (("robots", "lint", "-"), ROBOTS + b"Crawl-delay: soon\nNonsense\n"),
    (("robots", "check", "--agent"), None),  # a usage error: status 2
    (("--version",), None),
    (("sitemap", "parse", "/nowhere/sitemap.xml"), None),
], ids=["check", "lint", "usage", "version", "missing file"])
def test_a_forked_command_ends_as_a_fresh_interpreters(args: tuple[str, ...],
                                                        stdin: bytes | None) -> None:
    before = forked_cpu_s()
    forked = run(*args, stdin=stdin)
    assert forked_cpu_s() > before  # forked, not run by a fresh interpreter after all
    fresh = run(*args, stdin=stdin, fresh=True)
    assert (forked.returncode, forked.stdout, forked.stderr) == \
        (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.stdout or forked.stderr


def test_the_callers_directory_and_environment(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "robots.txt").write_bytes(ROBOTS)
    monkeypatch.chdir(tmp_path)
    done = run("robots", "check", "robots.txt", "--agent", "bot", "/a")
    assert done.returncode == 1 and done.stdout.startswith("disallowed /a"), done.stderr
    # polite ca export makes its authority in $XDG_STATE_HOME/polite/ca when given none
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    done = run("ca", "export")
    assert done.returncode == 0, done.stderr
    assert "BEGIN CERTIFICATE" in done.stdout
    assert (tmp_path / "state" / "polite" / "ca").is_dir()


def test_a_command_past_its_time_is_killed_and_the_next_runs() -> None:
    with pytest.raises(subprocess.TimeoutExpired) as killed:
        run("serve", "--port", "0", "--store", "memory://", timeout=5)
    assert b"listening on http://127.0.0.1:" in (killed.value.stderr or b"") + \
        (killed.value.output or b"")
    assert run("--version").returncode == 0

"""The commands the tests fork from a prepared interpreter (:mod:`tests.commands`) end as
those of an interpreter started for them: the same status, output and errors, in the
caller's working directory and environment, and killed past their time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands import Forked, forked_commands, popen, run

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
    before = forked_commands()
    forked = run(*args, stdin=stdin)
    assert forked_commands() == before + 1  # forked, not run by a fresh interpreter
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


def test_a_started_server_is_forked_and_ends_as_a_fresh_ones_on_sigterm() -> None:
    """``polite serve`` started: it says where it listens, answers a signal as a fresh
    interpreter's does, and its status is waited for."""
    ended = []
    for forked in (True, False):
        before = forked_commands()
        process = popen("serve", "--port", "0", "--store", "memory://") if forked else \
            subprocess.Popen([sys.executable, "-m", "polite", "serve", "--port", "0",
                              "--store", "memory://"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        with process:
            assert isinstance(process, Forked) == forked
            assert process.stdout is not None
            said = process.stdout.readline()
            assert said.startswith("polite serve: listening on http://127.0.0.1:"), said
            assert process.poll() is None
            with pytest.raises(subprocess.TimeoutExpired):
                process.wait(0.1)
            process.terminate()
            ended.append(process.wait(30))
        assert forked_commands() == before + forked
    assert ended[0] == ended[1]

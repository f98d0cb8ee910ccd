"""The commands the tests fork from a prepared interpreter (:mod:`tests.commands`) end as
those of an interpreter started for them: the same status, output and errors, in the
caller's working directory and environment, and killed past their time; started through a
launcher by code that starts its processes itself (:func:`~tests.commands.command_line`),
signals reach them and their end is the launcher's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import commands
from tests.commands import Forked, command_line, forked_commands, popen, run

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


def _forked_children() -> set[int]:
    """The processes the worker's forking interpreter runs now."""
    assert commands._forker is not None
    pid = commands._forker.process.pid
    return {int(child) for child in
            Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_a_launched_command_is_forked_and_ends_as_a_fresh_one() -> None:
    args = ("robots", "check", "-", "--agent", "bot", "https://e.com/a")
    line = command_line(*args)
    assert line[:3] == [sys.executable, "-I", "-S"]  # a launcher, not polite's interpreter
    before = forked_commands()
    launched = subprocess.run(line, input=ROBOTS.decode(), capture_output=True, text=True,
                              timeout=60)
    fresh = run(*args, stdin=ROBOTS, fresh=True)
    assert (launched.returncode, launched.stdout, launched.stderr) == \
        (fresh.returncode, fresh.stdout, fresh.stderr) == (1, fresh.stdout, "")
    assert forked_commands() == before + 1
    # Given another value of what an interpreter reads as it starts, it runs fresh
    other = subprocess.run(line, input=ROBOTS.decode(), capture_output=True, text=True,
                           timeout=60, env={**os.environ, "PYTHONHASHSEED": "7"})
    assert (other.returncode, other.stdout) == (1, fresh.stdout)
    assert forked_commands() == before + 1


def test_a_launched_command_runs_the_module_it_names() -> None:
    before = forked_commands()
    done = subprocess.run(command_line("--sort-keys", module="json.tool"), input='{"b":1,"a":2}',
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, '{\n    "a": 2,\n    "b": 1\n}\n')
    assert forked_commands() == before + 1


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("ending", ["SIGTERM passed on", "the command killed",
                                    "the launcher killed"])
def test_signals_reach_a_launched_command_and_its_end_is_the_launchers(ending: str) -> None:
    line = command_line("serve", "--port", "0", "--store", "memory://")
    before = _forked_children()
    with subprocess.Popen(line, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as launcher:
        assert launcher.stdout is not None
        said = launcher.stdout.readline()
        assert said.startswith("polite serve: listening on http://127.0.0.1:"), said
        (command,) = _forked_children() - before
        if ending == "SIGTERM passed on":  # the server ends as it does on its own
            launcher.terminate()
            assert launcher.wait(30) == 0
        elif ending == "the command killed":  # the launcher ends as killed too
            os.kill(command, signal.SIGKILL)
            assert launcher.wait(30) == -signal.SIGKILL
        else:
            launcher.kill()
            assert launcher.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while command in _forked_children():
        assert time.monotonic() < deadline, "the command outlived its launcher"
        time.sleep(0.02)

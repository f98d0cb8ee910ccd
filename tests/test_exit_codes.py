"""Every command exits alike: 0 done, 1 a verdict of no, 2 a usage or input error (said on
standard error), 130 interrupted. The usage errors are tried on every command the parser
has, so a new command cannot escape."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polite.cli import build_parser, main
from polite.cli.common import command_tree

PARSERS = list(command_tree(build_parser()))
COMMANDS = [path for path, _ in PARSERS]
# groups that do nothing by themselves (polite demo runs its site; polite crawl its crawl)
GROUPS = [path for path, parser in PARSERS if path and parser.get_default("handler") is None
          and getattr(parser, "default_command", None) is None
          and any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)]


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "polite" for p in COMMANDS])
def test_an_unknown_option_is_a_usage_error(path: tuple[str, ...],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*path, "--no-such-option"])
    assert exited.value.code == 2
    assert "error: " in capsys.readouterr().err  # the option, or what is missing first


def test_the_groups_are_found() -> None:
    assert {("robots",), ("sitemap",), ("site",), ("site", "ranges"), ("keys",),
            ("ca",)} <= set(GROUPS)
    assert ("demo",) not in GROUPS and ("crawl",) not in GROUPS


@pytest.mark.parametrize("path", GROUPS, ids=[" ".join(p) for p in GROUPS])
def test_a_group_without_its_command_shows_its_own_help(
        path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(list(path)) == 2
    assert f"usage: polite {' '.join(path)} " in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["robots", "check", "MISSING", "-a", "X", "/"],
    ["robots", "lint", "MISSING"],
    ["robots", "explain", "MISSING", "-a", "X", "/"],
    ["robots", "diff", "MISSING", "MISSING"],
    ["sitemap", "parse", "MISSING"],
    ["ulinks", "MISSING"],
    ["survey", "--robots-dir", "MISSING", "--out", "OUT"],
    ["report", "MISSING"],
    ["crawl", "merge", "MISSING", "--out", "OUT"],
    ["keys", "directory", "MISSING"],
    ["site", "import", "MISSING", "--db", "DB"],
    ["crawl", "status", "--store", "memory://"],
    ["serve", "--config", "MISSING"],
], ids=lambda argv: " ".join(argv[:2]))
def test_input_that_cannot_be_read_is_exit_2_and_said(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("polite: ") and "Traceback" not in err


def test_check_answers_0_for_yes_and_1_for_no(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /private\n")
    assert main(["robots", "check", str(robots), "-a", "X", "/public"]) == 0
    assert main(["robots", "check", str(robots), "-a", "X", "/public", "/private/x"]) == 1


def _first_argument(pid: int) -> str | None:
    """The first argument of the system call the process waits in (a read's file
    descriptor), where the kernel says; "" when it is running, in none."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return None
    return fields[1] if len(fields) > 1 else ""


def _reading_a_pipe(pid: int, timeout_s: float = 60.0) -> None:
    """Returns once the process is blocked reading its standard input, a pipe, as the
    kernel says (however long a loaded machine takes to start Python): a signal sent before
    then would find no handler yet, or stop an import, or one that reads another program's
    output (Python then ends by the signal, not with 130). A running process's wchan is
    "0", as a kernel's that does not say: the system call's file tells them apart."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            waiting_in = Path(f"/proc/{pid}/wchan").read_text().strip()
        except OSError:
            waiting_in = ""
        first = _first_argument(pid)
        if waiting_in in ("", "0"):  # running (its imports), or a kernel that does not say
            if first is None:  # it says neither: the time it used to take
                time.sleep(1.5)
                return
        # its standard input (fd 0), not a pipe of a program an import ran; running
        # between the two reads ("") is not taken for the kernel saying nothing (None)
        elif "pipe_read" in waiting_in and first in ("0x0", None):
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} never came to read its standard input")


def test_an_interrupted_command_is_130() -> None:
    """A command waiting on its input, stopped by Ctrl-C: 130, as shells report it, and no
    traceback."""
    process = subprocess.Popen([sys.executable, "-m", "polite", "robots", "check", "-", "-a",
                                "X", "/"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        _reading_a_pipe(process.pid)  # started and reading standard input (none comes)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:  # killed, and its pipes closed, rather than left open
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "Traceback" not in err

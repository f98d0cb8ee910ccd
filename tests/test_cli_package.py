"""The command line as a package: one module per command group with no import circle, every
parser's help in the user's words, ``--version``, shell completion made from the parser, and
``crawl status`` / ``crawl merge`` as commands of their own."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import polite
from polite import __version__
from polite.cli import build_parser, main
from polite.cli.common import command_tree
from tests.test_layers import _imports

SRC = Path(polite.__file__).resolve().parent
CLI = SRC / "cli"


PARSERS = list(command_tree(build_parser()))
# The source documents' file numbers are the project's own shorthand, not the user's.
INTERNAL = re.compile(r"\bseeds? \d{3}\b|\bas the seeds?\b|\(the seed\)", re.IGNORECASE)




def test_the_walk_finds_every_command_group() -> None:
    commands = {path for path, _ in PARSERS}
    for group in [("robots", "check"), ("robots", "explain"), ("sitemap", "tree"),
                  ("crawl", "run"), ("crawl", "status"), ("crawl", "merge"), ("survey",),
                  ("report",), ("ulinks",), ("serve",), ("site", "serve"), ("keys", "new"),
                  ("ca", "export"), ("demo", "regp-site"), ("completion",)]:
        assert group in commands


@pytest.mark.parametrize(("path", "parser"), PARSERS,
                         ids=[" ".join(path) or "polite" for path, _ in PARSERS])
def test_help_speaks_of_the_papers_by_their_authors(
        path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    assert not INTERNAL.search(text), INTERNAL.search(text)


def test_the_regp_paper_is_named_where_its_site_is_served() -> None:
    demo = dict(PARSERS)[("demo",)]
    assert "the news website of the REGP paper (Ge & Ding 2016" in demo.format_help()
    check = dict(PARSERS)[("robots", "check")]
    assert "the REGP dialect (Ge & Ding 2016)" in " ".join(check.format_help().split())


def test_explain_offers_auto_as_check_does() -> None:
    for command in ("check", "lint", "explain", "diff"):
        parser = dict(PARSERS)[("robots", command)]
        dialect = next(a for a in parser._actions if "--dialect" in a.option_strings)
        assert dialect.choices is not None and "auto" in dialect.choices, command


def test_the_command_groups_import_no_circle() -> None:
    """The groups may use polite.cli.common; only polite.cli.main gathers them; common
    and the product packages import no command line module."""
    for path in sorted(CLI.glob("*.py")):
        ours = {name for name in _imports(path) if name.startswith("polite.cli")}
        if path.name == "main.py":
            assert "polite.cli" not in ours
        elif path.name == "__init__.py":
            assert ours == {"polite.cli.main"}
        elif path.name == "common.py":
            assert ours == set()
        else:
            assert ours <= {"polite.cli.common"}, (path.name, ours)
    for path in sorted(SRC.rglob("*.py")):
        if CLI not in path.parents and path.name != "__main__.py":
            assert not {n for n in _imports(path) if n.startswith("polite.cli")}, path


def test_a_command_named_is_built_alone_and_reads_as_in_the_whole_parser() -> None:
    """polite builds the parser of the command its line names, its module's alone: each
    command's help (options, usage, the words of its prog) is the whole parser's, and a
    first word that names no command gets the whole parser, with its list of commands."""
    whole = dict(PARSERS)
    for word in [path[0] for path in whole if len(path) == 1]:
        alone = dict(command_tree(build_parser(command=word)))
        assert word in {path[0] for path in alone if path}
        assert len(alone) < len(whole)
        for path, parser in alone.items():
            if path:
                assert parser.format_help() == whole[path].format_help(), path
    for first in (None, "--help", "robot", "-x"):
        assert build_parser(command=first).format_help() == whole[()].format_help()


def test_a_command_imports_its_own_module_of_the_command_line_alone(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /a\n")
    shown = ("import sys\nfrom polite.cli.main import main\nstatus = main(sys.argv[1:])\n"
             "print(sorted(m for m in sys.modules if m.startswith('polite.cli')))\n"
             "sys.exit(status)")
    done = subprocess.run([sys.executable, "-c", shown, "robots", "check", str(robots),
                           "--agent", "bot", "/a"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    verdict, modules = done.stdout.splitlines()
    assert verdict.startswith("disallowed /a")
    assert modules == str(["polite.cli", "polite.cli.common", "polite.cli.main",
                           "polite.cli.robots"])


def test_serve_leaves_the_prometheus_client_to_the_first_metrics() -> None:
    """``polite serve``'s modules import ``prometheus_client`` (and the ``http.server`` it
    brings) when ``/metrics`` is first asked (tests/api/test_service.py reads it), not at
    start."""
    shown = ("import sys\nimport polite.cli.serve, polite.serve\n"
             "print(sorted(m for m in ('prometheus_client', 'http.server', 'polite.api.metrics')"
             " if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", shown], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"polite {__version__}\n"
    done = subprocess.run([sys.executable, "-m", "polite", "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, f"polite {__version__}\n")


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts_know_every_command_and_option(
        shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    for word in ("robots", "explain", "crawl", "status", "merge", "--max-pages",
                 "--allow-private", "survey", "--nameserver", "completion"):
        assert word in script, word
    if shell == "bash":
        assert "complete " in script
    else:
        assert script.startswith("#compdef polite")


def test_the_bash_script_is_read_by_bash(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    assert main(["completion", "bash"]) == 0
    script = tmp_path / "polite.bash"
    script.write_text(capsys.readouterr().out)
    done = subprocess.run(["bash", "-c", f"source {script} && complete -p polite"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "polite" in done.stdout


def test_completion_refuses_another_shell(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["completion", "fish"])
    assert exited.value.code == 2
    assert "invalid choice: 'fish'" in capsys.readouterr().err


def test_crawl_status_and_merge_are_commands_and_a_bare_crawl_runs() -> None:
    parser = build_parser()
    status = parser.parse_args(["crawl", "status", "--store", "redis://127.0.0.1:1/0"])
    assert status.handler.__name__ == "_status" and status.store == "redis://127.0.0.1:1/0"
    merge = parser.parse_args(["crawl", "merge", "a", "b", "--out", "c"])
    assert (merge.handler.__name__, merge.folders, merge.out) == ("_merge", ["a", "b"], "c")
    for argv in (["crawl", "https://a.example/", "--out", "o"],
                 ["crawl", "--out", "o", "https://a.example/"],
                 ["crawl", "run", "https://a.example/", "--out", "o"]):
        run = parser.parse_args(argv)
        assert (run.handler.__name__, run.urls, run.out) == ("_crawl", ["https://a.example/"],
                                                             "o")


def test_crawl_merge_needs_its_out(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["crawl", "merge", "a"])
    assert exited.value.code == 2
    assert "--out" in capsys.readouterr().err


def _package_copy(folder: Path, init: str | None) -> dict[str, str]:
    """A copy of the package in ``folder``/polite with the other project's module beside it
    (``polite/polite.py``), its ``__init__.py`` replaced by ``init`` when given: what an
    environment holds once the project named polite on the package index was installed
    after (``init``) or before this one. The environment to run it in."""
    shutil.copytree(SRC, folder / "polite", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "polite" / "polite.py").write_text("please = None\nthanks = None\n")
    if init is not None:
        (folder / "polite" / "__init__.py").write_text(init)
    return {**os.environ, "PYTHONPATH": str(folder)}


_RUN = "from polite.cli import main; raise SystemExit(main(['robots', 'check', '--help']))"


def test_the_other_project_installed_over_this_one_is_named(tmp_path: Path) -> None:
    env = _package_copy(tmp_path, "from .polite import please, thanks\n")
    done = subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"polite: the package polite in {tmp_path / 'polite'} is not this "
                           "project's (polite-web)")
    assert line.endswith("pip uninstall polite, then pip install --force-reinstall polite-web")


def test_the_other_project_installed_before_this_one_is_warned_of(tmp_path: Path) -> None:
    env = _package_copy(tmp_path, None)
    done = subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: polite robots check")
    (line,) = done.stderr.splitlines()
    assert "another project named polite on the package index shares" in line
    assert line.endswith("pip uninstall polite, then pip install --force-reinstall polite-web")

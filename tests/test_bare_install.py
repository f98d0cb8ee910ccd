"""polite installed as most users install it, ``pip install polite-web`` with no extras, in a
fresh virtual environment, from the wheel ``python -m build`` makes of the tree (with the
sdist, both checked by ``twine check`` and both carrying the licence): every command answers
its --help, and a command or a public module that needs an extra says which (exit status 2,
as for any other setting to change), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import pytest

from tests.conftest import made_once
from tests.serving import ROOT

# One worker installs the bare package once for both tests (a module fixture is per worker).
pytestmark = pytest.mark.slow

# What the package index may answer when it cannot be reached (no network, no local index).
_UNREACHABLE = ("No matching distribution found", "Could not find a version",
                "Failed to establish a new connection", "Network is unreachable",
                "Temporary failure in name resolution",
                # and uv's words for it, where uv makes build's environments
                "Failed to fetch", "dns error", "Could not connect")
_EXTRA_MODULES = ("selectolax", "zlib_ng", "fastwarc", "aiohttp", "pandas", "pyarrow",
                  "matplotlib", "cryptography", "uvicorn", "jinja2", "scrapy", "requests",
                  "warcio", "mcp", "readability", "markdownify", "grpc", "grpc_tools")


DISTRIBUTION = "polite-web"  # "polite" on the package index is another project


def _unreachable(stderr: str) -> None:
    if any(sign in stderr for sign in _UNREACHABLE):
        pytest.skip("the package index is unreachable, so polite's build backend or core "
                    f"dependencies cannot be installed: {stderr.strip().splitlines()[-1]}")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel of the tree, as ``python -m build`` makes them (once a run);
    its isolated environments made by uv where make test installed it (half the CPU of pip
    and a third of the time, the same wheel)."""
    installer = ["--installer", "uv"] if find_spec("uv") is not None else []

    def build(out: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        built = subprocess.run([sys.executable, "-m", "build", *installer, "--outdir",
                                str(out), str(ROOT)], capture_output=True, text=True,
                               timeout=600, env=env, check=False)
        if built.returncode != 0:
            _unreachable(built.stderr + built.stdout)
            pytest.fail(f"python -m build failed: {built.stderr}{built.stdout[-2000:]}")

    return made_once(tmp_path_factory, "dist", build)


def _pip(python: Path) -> list[str]:
    """The pip of the tests' own environment, acting on the environment of ``python``."""
    return [sys.executable, "-m", "pip", "--python", str(python)]


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("*.whl")
    return wheel


def test_the_sdist_and_the_wheel_carry_the_licence_and_pass_twine(dist: Path) -> None:
    licence = (ROOT / "LICENSE").read_text("utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    wheel = _wheel(dist)
    assert wheel.name.startswith("polite_web-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        fields = archive.read(metadata).decode()
        (kept,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(kept).decode("utf-8") == licence
        # the package is imported as polite: every file of it under polite/
        assert "polite/__init__.py" in names and "polite/cli/main.py" in names
    assert f"Name: {DISTRIBUTION}\n" in fields
    assert "License-Expression: Apache-2.0\n" in fields
    assert "License-File: LICENSE\n" in fields
    # the all extra is the other extras, named by this distribution's name (a requirement
    # on polite[...] would install the other project)
    assert "Requires-Dist: scrapy>=2.11; extra == 'all'" in fields
    assert "Requires-Dist: polite" not in fields
    (sdist,) = dist.glob("*.tar.gz")
    assert sdist.name.startswith("polite_web-")
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"{sdist.name.removesuffix('.tar.gz')}/LICENSE")
        assert member is not None and member.read().decode("utf-8") == licence
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict",
                              str(wheel), str(sdist)],
                             capture_output=True, text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory, dist: Path) -> Iterator[Path]:
    """The bin folder of a fresh venv holding polite, installed from its wheel, and its
    core dependencies only (made once a run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def install(folder: Path) -> None:
        # pip is not put in the venv (seconds of work a run): this one installs into it, or
        # uv where make test installed it (2.2-2.6 s of CPU instead of 3.6-4.0 s with pip,
        # the same packages, their bytecode compiled as pip does)
        python = folder / "venv" / "bin" / "python"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")],
                       check=True, timeout=120)
        installer = [sys.executable, "-m", "uv", "pip", "install", "--compile-bytecode",
                     "--python", str(python)] if find_spec("uv") is not None else \
            [*_pip(python), "install", "--disable-pip-version-check"]
        installed = subprocess.run([*installer, "--quiet", str(_wheel(dist))],
                                   capture_output=True, text=True, timeout=600, env=env,
                                   check=False)
        if installed.returncode != 0:
            _unreachable(installed.stderr)
            pytest.fail(f"{installer[2]} install failed: {installed.stderr}")

    venv = made_once(tmp_path_factory, "bare", install) / "venv"
    python = venv / "bin" / "python"
    shown = subprocess.run([*_pip(python), "show", DISTRIBUTION],
                           capture_output=True, text=True, timeout=60, env=env, check=False)
    assert shown.returncode == 0 and f"Name: {DISTRIBUTION}" in shown.stdout, shown.stderr
    found = subprocess.run(
        [str(python), "-c", "import importlib.util as u, sys; print(' '.join(m for m in "
         "sys.argv[1:] if u.find_spec(m)))", *_EXTRA_MODULES],
        capture_output=True, text=True, timeout=60, env=env, check=True).stdout.split()
    assert found == [], f"not a bare install: {found}"  # or nothing below is tested
    yield venv / "bin"


def _polite(bare: Path, *args: str, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(bare / "polite"), *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd, check=False)


def _commands() -> list[list[str]]:
    """Every command of the command line, as its parser knows them (nested ones too)."""
    from polite.cli import build_parser
    from polite.cli.common import command_tree

    return [list(words) for words, _ in command_tree(build_parser()) if words]


# Each command's --help asked of the installed package's own command line, in one process of
# the bare venv (a process a command was 34 starts of polite.cli, 6 to 7 s of CPU): what each
# printed on each stream, and how it ended (its exit status, as the process would have had).
_HELPS = """
import contextlib, io, json, sys
from polite.cli import main
answers = []
for words in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([*words, "--help"])
        except SystemExit as stop:
            status = stop.code
    answers.append([status, out.getvalue(), err.getvalue()])
print(json.dumps(answers))
"""


def test_every_command_answers_its_help(bare: Path) -> None:
    commands = _commands()
    assert ["crawl"] in commands and ["robots", "lint"] in commands and len(commands) > 15
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(bare / "python"), "-c", _HELPS, json.dumps(commands)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    assert len(answers) == len(commands)
    for command, (status, out, err) in zip(commands, answers, strict=True):
        assert status in (0, None), (command, status, err)
        assert out.startswith(f"usage: polite {' '.join(command)}"), (command, out, err)
        assert "Traceback" not in err, (command, err)


def test_commands_that_need_an_extra_name_it(bare: Path, tmp_path: Path) -> None:
    domains = tmp_path / "domains.txt"
    domains.write_text("a.example\n")
    # None of these reaches the network: each stops at its missing library first.
    needs = {
        "crawl": ["crawl", "http://127.0.0.1:9/", "--out", str(tmp_path / "c"),
                  "--allow-private"],
        # a survey itself needs no extra (polite's own client, the system's resolver);
        # asking a nameserver does (aiodns)
        "survey": ["survey", str(domains), "--out", str(tmp_path / "s"), "--nameserver",
                   "127.0.0.1:9"],
        "tls": ["serve", "--intercept-tls", "--port", "0", "--store", "memory://"],
        "site": ["site", "serve", "--db", str(tmp_path / "site.sqlite"), "--port", "0"],
        "mcp": ["mcp", "--store", "memory://"],
        "frontier": ["frontier", "serve", "--store", f"sqlite:///{tmp_path / 'f.sqlite'}"],
    }
    needs_too = {"survey": ["report", str(tmp_path / "s")], "tls": ["ca", "export",
                 "--ca-dir", str(tmp_path / "ca")],
                 "crawl": ["crawl", "merge", str(tmp_path / "c"), "--out", str(tmp_path / "m")]}
    for extra, args in [*needs.items(), *needs_too.items()]:
        result = _polite(bare, *args, cwd=tmp_path)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        assert result.returncode == 2, (args, result.stderr)
        assert f"pip install 'polite-web[{extra}]'" in result.stderr, (args, result.stderr)


def test_commands_without_extras_work(bare: Path, tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /private\n")
    checked = _polite(bare, "robots", "check", str(robots), "-a", "bot", "/private/x")
    assert checked.returncode == 1 and checked.stdout.startswith("disallowed /private/x")
    kept = _polite(bare, "site", "import", str(robots), "--db", str(tmp_path / "s.sqlite"))
    assert kept.returncode == 0, kept.stderr


def test_public_modules_that_need_an_extra_name_it(bare: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for module, extra in (("polite.crawl", "crawl"), ("polite.integrations.scrapy", "scrapy"),
                          ("polite.integrations.requests", "scrapy")):
        result = subprocess.run([str(bare / "python"), "-c", f"import {module}"],
                                capture_output=True, text=True, timeout=60, env=env,
                                check=False)
        assert result.returncode == 1
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError: ") and f"pip install 'polite-web[{extra}]'" in last, \
            (module, result.stderr)
    for module in ("polite.robots", "polite.sitemaps", "polite.survey", "polite.site",
                   "polite.integrations.httpx", "polite.serve", "polite.demo"):
        result = subprocess.run([str(bare / "python"), "-c", f"import {module}"],
                                capture_output=True, text=True, timeout=60, env=env,
                                check=False)
        assert result.returncode == 0, (module, result.stderr)

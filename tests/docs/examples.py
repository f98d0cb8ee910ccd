"""The manual's examples, read from its Markdown and run as a reader would run them.

A page is read top to bottom, in a folder of its own:

- a code block with ``title="NAME"`` is a file the reader saves: it is written as NAME;
- a ``console`` block is commands (``$ ``, continued by a trailing ``\\``) and what each
  prints: each runs in a shell with ``polite`` on the PATH, and its standard output and error
  must be the lines shown, where a line ``...`` stands for any number of lines and a single
  line of JSON is compared as JSON;
- a ``python`` block without a title runs, the page's blocks in one namespace;
- a ``sh`` block is command lines for a long-running server, another machine or a Redis: not
  run, but every ``polite`` line in it must be accepted by the parser.

The sites the examples name are on loopback: ``127.0.0.1:8089`` is ``polite demo``'s news
site, ``127.0.0.1:8091`` the REGP variant of ``polite demo regp-site``, and
``localhost:8080`` a ``polite serve --allow-private``; each is started on a free port for
the page that names it, and the page's text is read with that port in place.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.commands import command_line

FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="([^"]+)"')
DEMO = "127.0.0.1:8089"
REGP = "127.0.0.1:8091"
SERVICE = "localhost:8080"


@dataclass(frozen=True)
class Block:
    language: str
    title: str | None
    text: str
    line: int


@dataclass(frozen=True)
class Command:
    command: str
    expected: tuple[str, ...]


def blocks(markdown: str) -> list[Block]:
    found = []
    for match in FENCE.finditer(markdown):
        title = TITLE.search(match.group(2))
        found.append(Block(match.group(1), title.group(1) if title else None, match.group(3),
                           markdown.count("\n", 0, match.start()) + 1))
    return found


def commands(block: Block) -> list[Command]:
    """A console block's commands and the lines each prints."""
    out: list[Command] = []
    lines = block.text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        assert line.startswith("$ "), f"line {block.line + index + 1}: {line!r} is no command"
        command = line[2:]
        while command.endswith("\\"):
            index += 1
            command = command[:-1] + " " + lines[index].strip()
        index += 1
        expected = []
        while index < len(lines) and not lines[index].startswith("$ "):
            expected.append(lines[index].rstrip())
            index += 1
        out.append(Command(command, tuple(expected)))
    return out


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """``expected`` against ``actual`` line by line, ``...`` taking any number of lines."""
    if len(expected) == 1 and expected[0][:1] in "[{":
        try:
            return bool(json.loads(expected[0]) == json.loads("\n".join(actual)))
        except json.JSONDecodeError:
            return False
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[skip:]) for skip in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and matches(expected[1:], actual[1:])


def polite_words(block: Block) -> list[list[str]]:
    """The ``polite`` command lines of a ``sh`` block, split as a shell splits them."""
    found = []
    text = re.sub(r"\\\n\s*", " ", block.text)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        line = re.sub(r"^\S*/(?=polite )", "", line)  # .venv/bin/polite
        if not line.startswith("polite "):
            continue
        words = shlex.split(line, comments=True)
        found.append(words[1:words.index("&")] if "&" in words else words[1:])
    return found


@contextlib.contextmanager
def sites(markdown: str) -> Iterator[dict[str, str]]:
    """The loopback sites the page names, started; what to read in place of each address."""
    from polite.demo import start_site
    from tests.serving import polite_serve

    with contextlib.ExitStack() as stack:
        moved: dict[str, str] = {}
        if DEMO in markdown:
            site = stack.enter_context(start_site("127.0.0.1", 0, robots="rep"))
            moved[DEMO] = site.origin.removeprefix("http://")
        if REGP in markdown:
            site = stack.enter_context(start_site("127.0.0.1", 0, robots="regp", news=3))
            moved[REGP] = site.origin.removeprefix("http://")
        if SERVICE in markdown or "127.0.0.1:8080" in markdown:
            api = stack.enter_context(polite_serve("--allow-private", "--store", "memory://"))
            port = api.base_url.port
            moved[SERVICE] = f"localhost:{port}"
            moved["127.0.0.1:8080"] = f"127.0.0.1:{port}"
        yield moved


def moved_text(text: str, moved: dict[str, str]) -> str:
    for old, new in moved.items():
        text = text.replace(old, new)
    return text


def shell_env(folder: Path) -> dict[str, str]:
    """The environment of a page's commands: ``polite`` is this interpreter's (forked by
    the worker's forking interpreter, :func:`tests.commands.command_line`; polite is
    installed there, so the page's Python path is not its)."""
    shims = folder / ".bin"
    shims.mkdir(exist_ok=True)
    shim = shims / "polite"
    line = " ".join(shlex.quote(word) for word in command_line())
    shim.write_text(f'#!/bin/sh\nunset PYTHONPATH\nexec {line} "$@"\n')
    shim.chmod(0o755)
    path = os.environ.get("PYTHONPATH", "")
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(p for p in (root, path) if p), "COLUMNS": "200",
            "NO_COLOR": "1", "TERM": "dumb"}


def run(command: str, folder: Path) -> tuple[int, list[str]]:
    done = subprocess.run(["bash", "-c", command], cwd=folder, env=shell_env(folder),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120, check=False)
    return done.returncode, [line.rstrip() for line in done.stdout.splitlines()]

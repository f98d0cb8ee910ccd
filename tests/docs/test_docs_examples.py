"""Every example in the manual runs: its console sessions against loopback sites, with the
output shown; its Python; and every ``polite`` command line it shows is one the parser
takes (see tests/docs/examples.py for how a page is read)."""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
from pathlib import Path

import pytest

from tests.docs import examples
from tests.docs.docsite import DOCS, ROOT, pages, reference_hook

PAGES = [path.relative_to(ROOT).as_posix() for path in pages()]
LANGUAGES = {"console", "python", "sh", "text", "toml", "json", "xml", "html", ""}


def _parses(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """None when the parser takes ``words``, else what it said."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(words)
    except SystemExit as exit:
        if exit.code not in (0, None):
            return said.getvalue()
    return None


@pytest.mark.parametrize("name", PAGES)
def test_the_pages_examples_run(name: str, tmp_path: Path) -> None:
    markdown = (ROOT / name).read_text(encoding="utf-8")
    found = examples.blocks(markdown)
    unknown = {block.language for block in found} - LANGUAGES
    assert not unknown, f"{name}: code blocks in {unknown}, which no test reads"
    if any(block.language == "console" for block in found) and shutil.which("curl") is None \
            and "curl " in markdown:
        pytest.skip("the page's examples ask the service with curl")
    parser = reference_hook().build_parser()
    namespace: dict[str, object] = {"__name__": "__docs__"}
    with examples.sites(markdown) as moved, contextlib.chdir(tmp_path):
        for block in examples.blocks(examples.moved_text(markdown, moved)):
            where = f"{name}:{block.line}"
            if block.title is not None:
                target = tmp_path / block.title
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text, encoding="utf-8")
                if block.language == "python":
                    compile(block.text, where, "exec")
            elif block.language == "console":
                for command in examples.commands(block):
                    status, lines = examples.run(command.command, tmp_path)
                    assert status in (0, 1), (where, command.command, status, lines)
                    assert not any("Traceback" in line for line in lines), (where, lines)
                    assert examples.matches(command.expected, lines), (
                        f"{where}: $ {command.command}\n" + "\n".join(lines))
            elif block.language == "python":
                exec(compile(block.text, where, "exec"), namespace)
            elif block.language == "sh":
                for words in examples.polite_words(block):
                    assert _parses(parser, words) is None, (where, words)


def test_the_readmes_examples_run(tmp_path: Path) -> None:
    """The README's one console session has a test of its own (tests/test_cli_demo.py); its
    Python runs here, and its command lines must be ones the parser takes."""
    markdown = (ROOT / "README.md").read_text(encoding="utf-8")
    found = examples.blocks(markdown)
    assert [block.language for block in found].count("console") == 1
    parser = reference_hook().build_parser()
    checked = 0
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in found:
        if block.language == "python":
            with contextlib.chdir(tmp_path):
                exec(compile(block.text, f"README.md:{block.line}", "exec"), namespace)
                checked += 1
        if block.language in ("sh", "console"):
            for words in examples.polite_words(block):
                assert _parses(parser, words) is None, words
                checked += 1
    assert checked >= 3  # the Python block and the two polite commands


def test_the_harness_tells_a_wrong_output_and_a_wrong_option(tmp_path: Path) -> None:
    """The checks above can fail: an output that differs, and an option that does not exist."""
    block = examples.Block("console", None, "$ echo one\ntwo\n", 1)
    command = examples.commands(block)[0]
    assert not examples.matches(command.expected, examples.run(command.command, tmp_path)[1])
    assert examples.matches(("...", "two"), ["one", "two"])
    assert not examples.matches(("one",), ["one", "two"])
    parser = reference_hook().build_parser()
    assert _parses(parser, ["robots", "check", "--no-such-option", "x"]) is not None
    assert _parses(parser, ["robots", "check", "robots.txt", "-a", "Bot", "/"]) is None


def test_every_page_has_examples_that_run() -> None:
    """The manual is not all prose: the tutorials and how-tos each run something."""
    for path in DOCS.glob("t*/*.md"):
        found = examples.blocks(path.read_text(encoding="utf-8"))
        assert any(b.language in ("console", "python") and b.title is None
                   for b in found), path

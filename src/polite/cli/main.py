"""The ``polite`` command line's top: the parser of every command group, and ``main``."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeAlias, cast

import polite
from polite.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    LazyParser,
    Parser,
    add_command,
)
from polite.config import COMPLETION
from polite.errors import PoliteError

__all__ = ["build_parser", "main"]


# The project named "polite" on the package index (this one is polite-web there) installs a
# package of the same name, polite/__init__.py and polite/polite.py: installed beside this
# one, the later install's __init__.py replaces the earlier's, and uninstalling either
# takes the other's __init__.py with it.
_MEND = "pip uninstall polite, then pip install --force-reinstall polite-web"


def _shared_package() -> tuple[bool, str] | None:
    """Whether the ``polite`` package imported is another project's, or holds its files
    beside this one's: (broken, what to say), else None."""
    folders = list(getattr(polite, "__path__", []))
    folder = Path(folders[0]) if folders else Path(".")
    if getattr(polite, "__version__", None) is None:
        return True, (f"the package polite in {folder} is not this project's (polite-web): "
                      "another project named polite on the package index was installed "
                      f"over it; mend it: {_MEND}")
    if (folder / "polite.py").is_file():
        return False, (f"another project named polite on the package index shares {folder} "
                       "with this one (polite-web); uninstalling either breaks the other; "
                       f"mend it: {_MEND}")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    shared = _shared_package()
    if shared is not None:
        broken, said = shared
        print(f"polite: {said}", file=sys.stderr)
        if broken:
            return EXIT_USAGE
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(lazy=True, command=words[0] if words else None)
    args = parser.parse_args(words)
    if not hasattr(args, "handler"):
        # A command group without its command (polite robots) shows the group's help.
        getattr(args, "group", parser).print_help()
        return EXIT_USAGE
    try:
        status = int(args.handler(args, sys.stdout))
        sys.stdout.flush()  # here, where a reader gone away is seen, not at the exit
        return status
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # a command without a clean stop of its own
        return EXIT_INTERRUPTED
    except PoliteError as exc:
        print(f"polite: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (FileExistsError, NotADirectoryError) as exc:
        # A folder made or read where a file is (--out naming a file): "File exists" alone
        # does not say what was wanted.
        print(f"polite: {exc.filename}: a file is there, where a folder is wanted (an --out "
              "names a folder)", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"polite: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_USAGE


def _drop_stdout() -> None:
    """Point standard output at /dev/null: what is still buffered for a reader that went
    away would fail again, loudly, when the interpreter flushes it at the exit."""
    import os

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


# The command words of each module of polite.cli, and the function that adds them, in the
# order the help lists them. A command line that names one builds its module's parser alone:
# the others' modules are not imported, nor their parsers made (a tenth of a short
# command's instructions: polite robots check, 596 million with them, 538 without).
_COMMANDS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("robots",), "robots", "add_robots_commands"),
    (("sitemap",), "sitemap", "add_sitemap_commands"),
    (("crawl",), "crawl", "add_crawl_command"),
    (("ulinks",), "ulinks", "add_ulinks_command"),
    (("survey", "report"), "survey", "add_survey_commands"),
    (("site",), "site", "add_site_commands"),
    (("keys",), "keys", "add_keys_command"),
    (("serve", "ca"), "serve", "add_serve_commands"),
    (("mcp",), "mcp", "add_mcp_command"),
    (("frontier",), "frontier", "add_frontier_commands"),
    (("demo",), "demo", "add_demo_commands"),
)

if TYPE_CHECKING:
    Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def build_parser(*, lazy: bool = False, command: str | None = None
                 ) -> argparse.ArgumentParser:
    """The top-level parser of ``polite``, with every command; ``lazy``: each command's
    options are added when it is used (parsed, or its help shown), as :func:`main` needs.
    ``command``: a command line's first word; when it names a command, the parser has that
    command (and the others of its module) alone, which parses that line as the whole one
    does."""
    kind = LazyParser if lazy else Parser
    parser = kind(prog="polite", description="The politeness layer for web crawling.",
                    epilog="Exit status: 0 done, 1 a verdict of no (robots check: some URL "
                           "disallowed; lint, diff, explain: something found), 2 a usage or "
                           "input error, 130 interrupted.")
    parser.add_argument("--version", action="version", version=f"polite {polite.__version__}")
    # Every command's parser is a Parser (a group may have a default command).
    commands = cast("Commands", parser.add_subparsers(title="commands", metavar="COMMAND",
                                                      parser_class=kind))
    named = [entry for entry in _COMMANDS if command in entry[0]]
    if not named and command != COMPLETION.command[-1]:
        named = list(_COMMANDS)
    for _, module, adder in named:
        add = cast("Callable[[Commands], None]",
                   getattr(importlib.import_module(f"polite.cli.{module}"), adder))
        add(commands)
    if len(named) == 1:  # one module's commands: neither the whole line nor completion
        return parser
    add_command(
        commands, COMPLETION, _completion,
        help="print a shell completion script (bash or zsh)",
        description="Print the completion script of every command and option for SHELL. "
                    "bash: polite completion bash > ~/.local/share/bash-completion/"
                    "completions/polite; zsh: polite completion zsh > ~/.zfunc/_polite (a "
                    "folder on $fpath).")
    return parser


def _completion(args: argparse.Namespace, out: TextIO) -> int:
    import shtab

    out.write(shtab.complete(build_parser(), shell=args.shell))
    return EXIT_OK



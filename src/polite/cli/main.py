"""The ``polite`` command line's top: the parser of every command group, and ``main``."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO, cast

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
from polite.cli.crawl import add_crawl_command
from polite.cli.demo import add_demo_commands
from polite.cli.frontier import add_frontier_commands
from polite.cli.keys import add_keys_command
from polite.cli.mcp import add_mcp_command
from polite.cli.robots import add_robots_commands
from polite.cli.serve import add_serve_commands
from polite.cli.site import add_site_commands
from polite.cli.sitemap import add_sitemap_commands
from polite.cli.survey import add_survey_commands
from polite.cli.ulinks import add_ulinks_command
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
    parser = build_parser(lazy=True)
    args = parser.parse_args(argv)
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


def build_parser(*, lazy: bool = False) -> argparse.ArgumentParser:
    """The top-level parser of ``polite``, with every command; ``lazy``: each command's
    options are added when it is used (parsed, or its help shown), as :func:`main` needs."""
    kind = LazyParser if lazy else Parser
    parser = kind(prog="polite", description="The politeness layer for web crawling.",
                    epilog="Exit status: 0 done, 1 a verdict of no (robots check: some URL "
                           "disallowed; lint, diff, explain: something found), 2 a usage or "
                           "input error, 130 interrupted.")
    parser.add_argument("--version", action="version", version=f"polite {polite.__version__}")
    # Every command's parser is a Parser (a group may have a default command).
    commands = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
                    parser.add_subparsers(title="commands", metavar="COMMAND",
                                          parser_class=kind))

    add_robots_commands(commands)
    add_sitemap_commands(commands)
    add_crawl_command(commands)
    add_ulinks_command(commands)
    add_survey_commands(commands)
    add_site_commands(commands)
    add_keys_command(commands)
    add_serve_commands(commands)
    add_mcp_command(commands)
    add_frontier_commands(commands)
    add_demo_commands(commands)
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



"""What the command groups share: the exit statuses, and the client, the private-address
check and the sitemap walker of the commands that fetch."""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from polite.config import (
    FLAGS,
    HeaderFlag,
    Product,
    Setting,
    default_shown,
    from_environment,
    read_config,
)
from polite.errors import ConfigError

if TYPE_CHECKING:
    from polite.fetch.http import PageFetcher
    from polite.fetch.resolve import Resolver
    from polite.fetch.robots import Network, PublicHosts

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_CRAWL_FAILED", "EXIT_FINDINGS", "EXIT_INTERRUPTED",
           "EXIT_OK", "EXIT_STORE", "EXIT_USAGE", "LazyParser", "Parser", "add_command",
           "add_group", "add_settings", "command_tree", "fetch_client", "local_file",
           "require_public", "resolve", "resolver", "sitemap_walker"]

EXIT_OK = 0
EXIT_FINDINGS = 1  # some URL is disallowed (check) or the file has problems (lint)
EXIT_USAGE = 2
# A run stopped by Ctrl-C or SIGTERM, after its clean stop: 128 + SIGINT, as shells report a
# program the signal ended, so a script tells it from a finished run.
EXIT_INTERRUPTED = 130
# The reader of the output went away (``| head``): 128 + SIGPIPE, what a shell reports for a
# Unix tool the broken pipe ended, and nothing said about it.
EXIT_BROKEN_PIPE = 141
# A shared crawl whose store did not come back within the time it waits for it.
EXIT_STORE = 1
# A crawl stopped by a write that failed (a full disk), or given seeds none of whose
# sites could be reached.
EXIT_CRAWL_FAILED = 1


# What a URL starts with, whatever its scheme.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def local_file(name: str) -> str:
    """A FILE|SITE argument that is no site (http:// or https://): the file's name, as
    given; :class:`ConfigError` when it is a URL of another scheme (``htp://x``, a typo, or
    ``ftp://``) that names no file, rather than a file "htp:/x" that is not there."""
    found = _SCHEME.match(name)
    if found is not None:
        import os

        if not os.path.exists(name):
            raise ConfigError(f"{name!r} is no file, nor a site: a site is an http:// or "
                              f"https:// URL, not {found.group(1)}://")
    return name


class Parser(argparse.ArgumentParser):
    """An argparse parser whose command group may run one of its commands when none is
    named: ``polite crawl URL...`` is ``polite crawl run URL...``, as it was before
    ``status`` and ``merge`` became commands of their own."""

    default_command: str | None = None
    # Commands' options added when the command is first used (parsed, or its help shown),
    # not when the command line is built: a run pays for its own command's alone.
    lazy = False
    _fill: Callable[[], None] | None = None

    def fill_later(self, fill: Callable[[], None]) -> None:
        self._fill = fill

    def fill(self) -> None:
        """Add the options :meth:`fill_later` was given, if not yet."""
        fill, self._fill = self._fill, None
        if fill is not None:
            fill()

    def format_usage(self) -> str:
        self.fill()
        return super().format_usage()

    def format_help(self) -> str:
        self.fill()
        return super().format_help()

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        self.fill()
        if self.default_command is not None and args is not None:
            given = list(args)
            if not given or given[0] not in (*self._commands(), "-h", "--help"):
                given.insert(0, self.default_command)
            args = given
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """One line on stderr, as every other usage error (not the whole usage first: 19
        lines for ``crawl run``), and where the options are; exit 2."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def add_subparsers(self, **kwargs: Any) -> Any:
        # A group named without its command (polite keys) shows its own help.
        self.set_defaults(group=self)
        return super().add_subparsers(**kwargs)

    def _commands(self) -> list[str]:
        return [name for action in self._actions
                if isinstance(action, argparse._SubParsersAction) for name in action.choices]


class LazyParser(Parser):
    """A :class:`Parser` whose commands' options come when the command is used (what
    ``polite`` itself runs on: building every command's options costs more than most
    commands' own work)."""

    lazy = True


def command_tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
                 ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``parser`` (its words ``path``) and every command below it, each with its words
    (``("robots", "check")``): the whole command line for the manual's reference and the
    tests that hold each command to its declaration."""
    if isinstance(parser, Parser):
        parser.fill()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from command_tree(child, (*path, name))


def resolver(args: argparse.Namespace) -> Resolver:
    """Names resolved as ``--hosts`` or ``--nameserver`` say (the system's resolver when
    neither is given). Call within a running loop."""
    from pathlib import Path

    from polite.errors import ConfigError
    from polite.fetch.resolve import build_resolver

    hosts, nameserver = getattr(args, "hosts", None), getattr(args, "nameserver", None)
    if hosts and nameserver:
        raise ConfigError("give --hosts or --nameserver, not both")
    if hosts:
        try:
            return build_resolver(hosts=Path(hosts))
        except OSError as exc:
            raise ConfigError(f"--hosts {hosts}: {exc.strerror or exc}") from None
    return build_resolver(nameserver=nameserver or None)


def require_public(url: str, args: argparse.Namespace, allowed: Sequence[Network] = ()
                   ) -> None:
    """Refusing to fetch from a private address is an error that says what to add, not a
    verdict about the site (``allowed``: private networks let through). Names are resolved
    as ``args`` say (``--hosts``, ``--nameserver``)."""
    import asyncio

    from polite.clock import WallClock
    from polite.core.urls import split_origin
    from polite.errors import ConfigError
    from polite.fetch.robots import PublicHosts

    if args.allow_private:
        return
    host = split_origin(url)[1]

    async def public() -> bool:
        names = resolver(args)
        try:
            return await PublicHosts(WallClock(), resolve=names.addresses,
                                     allowed=allowed).is_public(host)
        finally:
            await names.close()

    if not asyncio.run(public()):
        raise ConfigError(f"{host} is a private or loopback address; add --allow-private to "
                          "fetch from it")


def fetch_client(args: argparse.Namespace) -> tuple[PageFetcher, PublicHosts]:
    """The client robots.txt and sitemaps are fetched with, names resolved and timeouts
    kept as ``args`` say, and the private-address guard that resolves names the same way:
    with private addresses refused, every connection goes to the address the guard
    checked. Call within a running loop."""
    from polite.clock import WallClock
    from polite.fetch.resolve import first_address
    from polite.fetch.robots import PublicHosts, create_client

    names = resolver(args)
    guard = PublicHosts(WallClock(), resolve=names.addresses)
    return create_client(guard=None if args.allow_private else guard,
                         resolve=first_address(names.addresses),
                         connect_timeout_s=args.connect_timeout_s,
                         read_timeout_s=args.read_timeout_s), guard


def sitemap_walker(args: argparse.Namespace, client: Any, hosts: PublicHosts, **options: Any
                   ) -> Any:
    from polite.clock import WallClock
    from polite.fetch.politeness import Politeness
    from polite.fetch.robots import RobotsFetcher
    from polite.fetch.sitemaps import SitemapWalker
    from polite.storage import MemoryStore

    clock = WallClock()
    store = MemoryStore(clock)
    robots = RobotsFetcher(client, store, clock, agent=args.agent,
                           allow_private=args.allow_private, public_hosts=hosts)
    politeness = Politeness(robots, store, clock, agent=args.agent,
                            default_delay_s=args.default_delay_s, public_hosts=hosts,
                            allow_private=args.allow_private, private_hint=FLAGS.allow_private)
    return SitemapWalker(client, politeness, max_bytes=args.max_sitemap_bytes, **options)


# -- options made from the settings' declarations (polite.config) ------------------------------


class _Former(argparse.Action):
    """A former spelling of an option: read as before, with one line on standard error
    naming the new one."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str,
                 **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"polite: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def _help(setting: Setting) -> str:
    shown = default_shown(setting)
    if setting.kind is bool or not shown:
        return setting.help
    return f"{setting.help} (default {shown})"


_METAVARS = {"s": "SECONDS", "bytes": "BYTES", "MiB": "MIB", "USD": "USD"}


def add_settings(parser: argparse.ArgumentParser, product: Product) -> None:
    """``product``'s settings as ``parser``'s arguments, in their declared order. With a
    config file, an option not given is left None, to be filled by :func:`resolve`."""
    layered = product.config_file
    for setting in product.on("cli"):
        if setting.positional:
            parser.add_argument(setting.name, metavar=setting.metavar or None,
                                nargs=setting.nargs, help=setting.help,
                                choices=setting.choices or None)
            continue
        # The flag and its short one (BooleanOptionalAction adds --no-NAME itself).
        names = list(setting.options[:2 if setting.short else 1])
        options: dict[str, Any] = {"dest": setting.name, "help": _help(setting)}
        default = None if layered else setting.default
        if setting.kind is bool:
            if setting.default is None:
                options["action"] = argparse.BooleanOptionalAction
            else:
                options["action"] = "store_false" if setting.negate else "store_true"
        elif setting.kind is list:
            options["action"] = "append"
            if setting.choices:
                options["choices"] = setting.choices
        else:
            options["type"] = HeaderFlag() if setting.header else setting.flag_type()
            if setting.choices:
                options["choices"] = setting.choices
        metavar = setting.metavar or _METAVARS.get(setting.unit)
        if metavar and setting.kind is not bool:
            options["metavar"] = metavar
        if setting.required:
            options["required"] = True
        parser.add_argument(*names, default=default, **options)
        for old in setting.old:
            former: dict[str, Any] = {"dest": setting.name, "new": setting.flag,
                                      "help": argparse.SUPPRESS, "default": default}
            if setting.kind is bool:
                former.update(nargs=0, const=not setting.negate)
            else:
                former["type"] = setting.flag_type(setting.old_per)
            parser.add_argument(old, action=_Former, **former)


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                product: Product, handler: Callable[[argparse.Namespace, TextIO], int], *,
                help: str, description: str = "") -> argparse.ArgumentParser:
    """A command made from its declaration: its name (``product.command``'s last word), its
    options (:func:`add_settings`) and what runs it."""
    parser = commands.add_parser(product.command[-1], help=help,
                                 description=description or None)
    if isinstance(parser, Parser) and parser.lazy:
        parser.fill_later(functools.partial(add_settings, parser, product))
    else:
        add_settings(parser, product)
    parser.set_defaults(handler=handler)
    return parser


def add_group(commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, *,
              help: str, description: str | None = None
              ) -> tuple[Parser, argparse._SubParsersAction[argparse.ArgumentParser]]:
    """A command group (``polite robots``) and the place its commands go; named without a
    command, it shows its own help (:meth:`Parser.add_subparsers`)."""
    group = commands.add_parser(name, help=help, description=description)
    assert isinstance(group, Parser)
    return group, group.add_subparsers(title=f"{name} commands", metavar="COMMAND")


def resolve(product: Product, args: argparse.Namespace, *, tables: tuple[str, ...] = ()
            ) -> dict[str, object]:
    """Fill ``args`` with ``product``'s effective settings: the command line's, else the
    environment's, else the config file's (``--config``), else the defaults. Returns what the
    file gave for ``tables``."""
    import os

    config: dict[str, object] = {}
    path = getattr(args, "config", None)
    if path:
        from polite.core._documents import read_toml_config

        config, notes = read_config(path, product, tables=tables, read=read_toml_config)
        for note in notes:
            print(f"polite: {note}", file=sys.stderr)
    environment = from_environment(product, dict(os.environ))
    for setting in product.settings:
        if setting.positional or getattr(args, setting.name, None) is not None:
            continue
        for source in (environment, config):
            if setting.name in source:
                setattr(args, setting.name, source[setting.name])
                break
        else:
            default = setting.default
            if setting.kind is list:  # a list of its own, empty when none is declared
                default = list(default) if isinstance(default, list | tuple) else []
            setattr(args, setting.name, default)
    return {table: config[table] for table in tables if table in config}

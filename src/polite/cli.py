"""The ``polite`` command line: wiring only; the work is done by the library."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from polite import __version__
from polite.cli_crawl import add_crawl_command
from polite.cli_keys import add_keys_command
from polite.cli_robots import add_explain_commands, add_site_options, robots_lint
from polite.cli_site import add_site_commands
from polite.cli_survey import add_survey_commands
from polite.cli_ulinks import add_ulinks_command
from polite.config import AT_LEAST_ONE, FLAGS, NON_NEGATIVE, PORT, SERVE_NUMBERS, IntFlag
from polite.core.text import shown
from polite.core.usage.vocab import PURPOSES
from polite.errors import PoliteError
from polite.robots import MAX_ROBOTS_BYTES, Decision, Dialect, RobotsTxt, parse

if TYPE_CHECKING:
    from polite.fetch.http import PageFetcher
    from polite.fetch.robots import Network

__all__ = ["main"]

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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _build_parser()
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


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polite", description="The politeness layer for web crawling.")
    parser.add_argument("--version", action="version", version=f"polite {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    robots = commands.add_parser("robots", help="read, check and lint robots.txt files")
    robots.set_defaults(group=robots)
    robots_commands = robots.add_subparsers(title="robots commands", metavar="COMMAND")
    dialects = ["auto", *(d.value for d in Dialect)]

    check = robots_commands.add_parser(
        "check", help="may an agent fetch these URLs?",
        description="Print the verdict, the deciding rule and its line for each URL. "
                    "Exit status: 0 all allowed, 1 some disallowed, 2 bad input.")
    check.add_argument("file", metavar="FILE|SITE",
                       help="a robots.txt file, - for standard input, or a site's URL "
                            "(http:// or https://) to fetch its robots.txt")
    check.add_argument("urls", metavar="URL", nargs="+",
                       help="URLs or paths (/a/b?q) to check")
    check.add_argument("--allow-private", action="store_true",
                       help="with a SITE: also fetch from private and loopback addresses")
    check.add_argument("--agent", "-a", required=True, help="the crawler's product token")
    check.add_argument("--dialect", "-d", default="auto", choices=dialects)
    check.add_argument("--ip", help="the egress IP address (REGP Ip-allow / Ip-disallow)")
    check.add_argument("--json", action="store_true", help="one JSON array of verdicts")
    _max_bytes_option(check)
    check.set_defaults(handler=_robots_check)

    lint = robots_commands.add_parser(
        "lint", help="classify every line and find what crawlers will read otherwise",
        description="Lists every line a parser skipped or read leniently and the mistakes "
                    "webmasters make (Disallow: / for everyone, one agent in two groups, full "
                    "User-Agent strings, relative Sitemap lines, Crawl-delay Googlebot "
                    "ignores, REGP's rules, ...). Exit status: 0 no errors or warnings, 1 "
                    "some found, 2 bad input.")
    lint.add_argument("file", metavar="FILE|SITE",
                      help="a robots.txt file, - for standard input, or a site's URL (http:// "
                           "or https://) to fetch its robots.txt")
    lint.add_argument("--dialect", "-d", default="auto", choices=dialects)
    lint.add_argument("--json", action="store_true", help="one JSON array of issues (with "
                      "--lines, an object with the issues and the lines)")
    lint.add_argument("--lines", action="store_true", help="also print every line's class: "
                      "directive, unused, unknown, typo, missing-colon, too-long, invalid, "
                      "brace, comment, blank")
    lint.add_argument("--content-type", help="the Content-Type the file was served with "
                      "(text/html is an error)")
    _max_bytes_option(lint)
    add_site_options(lint)
    lint.set_defaults(handler=robots_lint)
    add_explain_commands(robots_commands)

    sitemap = commands.add_parser("sitemap", help="read sitemaps: one file, or a whole site's")
    sitemap.set_defaults(group=sitemap)
    sitemap_commands = sitemap.add_subparsers(title="sitemap commands", metavar="COMMAND")
    read = sitemap_commands.add_parser(
        "parse", help="print the entries of one sitemap file (XML, text, RSS, Atom, gzip)")
    read.add_argument("source", metavar="FILE|URL",
                      help="a local file, - for standard input, or an http(s) URL (fetched "
                      "politely: robots.txt is read first)")
    read.add_argument("--json", action="store_true", help="one JSON object per entry")
    read.add_argument("--url", help="the URL a local file was served from (resolves "
                      "relative locations)")
    _fetch_options(read)
    tree = sitemap_commands.add_parser(
        "tree", help="walk a site's sitemaps from its robots.txt, with a summary")
    tree.add_argument("site", metavar="SITE", help="https://example.com")
    tree.add_argument("--json", action="store_true", help="the summary and every file as JSON")
    tree.add_argument("--max-depth", type=IntFlag(NON_NEGATIVE), default=5,
                      help="index levels to follow (default 5; 0: robots.txt's sitemaps only)")
    tree.add_argument("--max-files", type=IntFlag(AT_LEAST_ONE), default=1000,
                      help="files to read at most (default 1000)")
    tree.add_argument("--cross-host", choices=["host", "site", "any"], default="host",
                      help="which hosts sitemaps and their URLs may be on: the site's own "
                      "(default, as the protocol says), also with or without www., or any")
    tree.add_argument("--well-known", action="store_true",
                      help="try /sitemap.xml and the like when robots.txt names no sitemap")
    tree.add_argument("--urls", action="store_true", help="also print every page URL")
    _fetch_options(tree)
    tree.set_defaults(handler=_sitemap_tree)
    read.set_defaults(handler=_sitemap_parse)

    add_crawl_command(commands)
    add_ulinks_command(commands)
    add_survey_commands(commands)
    add_site_commands(commands)
    add_keys_command(commands)

    serve = commands.add_parser(
        "serve", help="run the politeness service: the polite HTTP proxy and the REST API "
                      "on one port",
        description="Listens on loopback by default. Robots.txt of private and loopback "
                    "addresses is not fetched unless --allow-private is given.")
    # Defaults live in polite.serve.Settings: an option not given falls back to --config,
    # then to those defaults.
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=SERVE_NUMBERS["port"], help="default 8080")
    serve.add_argument("--store", help="sqlite:///PATH (default sqlite:///polite.sqlite), "
                       "redis://HOST:PORT/DB (shared by several nodes) or memory://")
    serve.add_argument("--default-delay-ms", type=SERVE_NUMBERS["default_delay_ms"],
                       help="delay where neither the operator nor the site sets one "
                            "(default 1000)")
    serve.add_argument("--max-crawl-delay-s", type=SERVE_NUMBERS["max_crawl_delay_s"],
                       help="robots.txt delays above this are read as this (default 60)")
    serve.add_argument("--agent", help="the product token robots.txt is read for "
                       "(default polite)")
    serve.add_argument("--allow-private", action="store_true", default=None,
                       help="also fetch from private and loopback addresses")
    serve.add_argument("--allow-network", dest="allow_networks", action="append",
                       metavar="NETWORK", help="also fetch from the private addresses in "
                       "NETWORK (10.1.0.0/16, or one address; repeatable): the others stay "
                       "refused")
    serve.add_argument("--on-401-403", choices=["disallow", "allow"],
                       help="what a robots.txt answered with 401 or 403 means: disallow all "
                            "(the default, as the seeds do) or allow all (RFC 9309)")
    serve.add_argument("--mode", choices=["reject", "wait", "ordered"],
                       help="proxy: a request whose host's slot is taken gets 429 with "
                            "Retry-After (reject, the default), is held until its slot (wait), "
                            "or is held and answered in its client's order (ordered; the "
                            "client is X-Polite-Client or its address)")
    serve.add_argument("--max-wait-s", type=SERVE_NUMBERS["max_wait_s"],
                       help="wait mode: the longest a request is held (default 60)")
    serve.add_argument("--origin-timeout-s", type=SERVE_NUMBERS["origin_timeout_s"],
                       help="proxy: an origin silent this long gets the client a 504 "
                            "(default 30)")
    serve.add_argument("--purpose", choices=PURPOSES,
                       help="proxy: what requests are for, unless their X-Polite-Purpose says")
    serve.add_argument("--refuse-by-purpose", action="store_true", default=None,
                       help="proxy: answer 403 with the reason when the URL's robots.txt "
                            "AI-usage preferences disallow the request's purpose")
    serve.add_argument("--no-backoff", dest="backoff", action="store_false", default=None,
                       help="do not pause a host after a 429 or 503 (for origins of your own)")
    serve.add_argument("--no-cache", dest="cache", action="store_false", default=None,
                       help="turn the proxy's page cache off")
    serve.add_argument("--cache-max-mb", type=SERVE_NUMBERS["cache_max_mb"],
                       help="the page cache's size in the store; least recently used pages "
                       "go first (default 256)")
    serve.add_argument("--loop", choices=["auto", "asyncio", "uvloop"],
                       help="the event loop: uvloop when installed (auto, the default), or "
                            "the standard library's asyncio")
    serve.add_argument("--cache-keep-no-store-s", type=SERVE_NUMBERS["cache_keep_no_store_s"],
                       help="keep responses marked no-store this many seconds (default 0: "
                       "no-store is honoured; Riemer 2017 kept them a day, 86400)")
    serve.add_argument("--adaptive-factor", type=SERVE_NUMBERS["adaptive_factor"],
                       help="the adaptive delay is this many times a host's running response "
                            "time (default 1; 0 turns it off)")
    serve.add_argument("--admin-token", help="required (Bearer) for writes: PUT and DELETE "
                       "/delays, /politeness/feedback, reserve=true; mandatory when --host "
                       "is not a loopback address, and then /trace, /env, /delays and the "
                       "dashboard need it too (open /dashboard?token=TOKEN once)")
    serve.add_argument("--allowed-host", metavar="NAME", action="append", default=None,
                       help="a host name the REST API and dashboard answer to, besides IP "
                            "addresses, localhost and --host (a request naming another "
                            "Host is refused: DNS rebinding); repeatable")
    serve.add_argument("--max-bytes", type=SERVE_NUMBERS["max_bytes"],
                       help="read each robots.txt up to this many bytes; answers from a file "
                            f"cut there say so (default {MAX_ROBOTS_BYTES})")
    serve.add_argument("--intercept-tls", action="store_true", default=None,
                       help="read inside CONNECT tunnels, so https requests get per-URL "
                            "robots.txt, delays and the cache: clients must trust the local "
                            "CA (polite ca export); needs polite[tls]")
    serve.add_argument("--ca-dir", metavar="DIR", help="the local CA's folder, made once "
                       "(default $XDG_STATE_HOME/polite/ca or ~/.local/state/polite/ca)")
    serve.add_argument("--upstream-ca", metavar="FILE",
                       help="also trust origins whose certificates this CA file signed")
    serve.add_argument("--no-intercept", metavar="HOST", action="append", default=None,
                       help="leave tunnels to HOST plain (clients that pin certificates); "
                            "repeatable")
    serve.add_argument("--trace-size", type=SERVE_NUMBERS["trace_size"],
                       help="exchanges GET /trace keeps, newest first (default 1000; 0: none)")
    serve.add_argument("--node", help="this node's name on the dashboard (default "
                       "HOSTNAME:PORT)")
    serve.add_argument("--key", metavar="FILE", help="serve the key directory of this "
                       "Ed25519 key (polite keys new) at /.well-known/http-message-signatures-"
                       "directory, for the Signature-Agent of a signing crawler")
    serve.add_argument("--sign-with", metavar="KEY", help="sign every forwarded request, "
                       "https ones read under --intercept-tls too, with this Ed25519 key "
                       "(Web Bot Auth); needs polite[identity]")
    serve.add_argument("--signature-agent", metavar="URL", help="with --sign-with: the URL "
                       "of the key's directory, sent as Signature-Agent")
    serve.add_argument("--config", metavar="FILE",
                       help="a TOML file with any of the options above (with _ for -) and a "
                            "[delays] table of domain = milliseconds")
    serve.set_defaults(handler=_serve)
    ca = commands.add_parser("ca", help="the local CA of polite serve --intercept-tls")
    ca.set_defaults(group=ca)
    ca_commands = ca.add_subparsers(title="ca commands", metavar="COMMAND")
    export = ca_commands.add_parser(
        "export", help="print the CA's certificate (PEM) for clients to trust; the CA is "
                       "made if there is none")
    export.add_argument("--ca-dir", metavar="DIR", help="as for polite serve")
    export.set_defaults(handler=_ca_export)
    _add_demo(commands)
    return parser


def _max_bytes_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--max-bytes", type=IntFlag(AT_LEAST_ONE), default=MAX_ROBOTS_BYTES,
                         help="read robots.txt up to this many bytes; what lies beyond is "
                              f"ignored, and said so (default {MAX_ROBOTS_BYTES}, as RFC 9309 "
                              "allows)")


def _warn_if_cut(name: str, robots: RobotsTxt, max_bytes: int) -> None:
    """A file cut at the cap answers as if its later rules were not there: say so."""
    if robots.truncated:
        print(f"polite: warning: {name} is longer than {max_bytes:,} bytes and was read only "
              "that far; rules after that point are not applied (--max-bytes to read more)",
              file=sys.stderr)


def _fetch_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--agent", "-a", default="polite",
                         help="the User-Agent and robots.txt product token (default polite)")
    command.add_argument("--delay-ms", type=IntFlag(NON_NEGATIVE), default=1000,
                         help="spacing between requests to one host when robots.txt sets "
                         "none (default 1000)")
    command.add_argument("--allow-private", action="store_true",
                         help="allow fetching from private and loopback addresses")


def _read(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    return Path(name).read_bytes()


def _decision_json(url: str, decision: Decision) -> dict[str, object]:
    return {
        "url": url,
        "allowed": decision.allowed,
        "rule": str(decision.rule) if decision.rule else None,
        "line": decision.line,
        "reason": decision.reason,
    }


def _robots_check(args: argparse.Namespace, out: TextIO) -> int:
    if args.file.startswith(("http://", "https://")):
        return _robots_check_site(args, out)
    _check_urls(args.urls)
    robots: RobotsTxt = parse(_read(args.file), args.dialect, max_bytes=args.max_bytes)
    _warn_if_cut(args.file, robots, args.max_bytes)
    return _print_decisions(args, out, [(url, robots.decide(url, args.agent, ip=args.ip))
                                        for url in args.urls])


def _require_public(url: str, allow_private: bool, allowed: Sequence[Network] = ()) -> None:
    """Refusing to fetch from a private address is an error that says what to add, not a
    verdict about the site (``allowed``: private networks let through)."""
    import asyncio

    from polite.core.urls import split_origin
    from polite.errors import ConfigError
    from polite.fetch.robots import is_public_host

    host = split_origin(url)[1]
    if not allow_private and not asyncio.run(is_public_host(host, allowed)):
        raise ConfigError(f"{host} is a private or loopback address; add --allow-private to "
                          "fetch from it")


def _client(allow_private: bool) -> PageFetcher:
    """The client robots.txt and sitemaps are fetched with: with private addresses refused,
    every connection goes to the address the guard checked."""
    from polite.clock import WallClock
    from polite.fetch.robots import PublicHosts, create_client

    return create_client(guard=None if allow_private else PublicHosts(WallClock()))


def _check_urls(urls: list[str]) -> None:
    """A URL that cannot be checked is an error, not a verdict; a path (/a/b?q) is checked
    as it stands, as explain does."""
    from polite.core.urls import split_origin

    for url in urls:
        if not url.startswith("/") or url.startswith("//"):
            split_origin(url)  # InvalidURL (a PoliteError): not an http(s) URL


def _robots_check_site(args: argparse.Namespace, out: TextIO) -> int:
    # Imported here: the fetch layer's dependencies are not needed for local files.
    import asyncio
    from urllib.parse import urljoin

    from polite.clock import WallClock
    from polite.core.robots.lifecycle import AllowAll, FetchPolicy, Parsed
    from polite.fetch.robots import RobotsFetcher, origin_of
    from polite.storage import MemoryStore

    site = origin_of(args.file)
    urls = [urljoin(site + "/", url) for url in args.urls]
    _check_urls(urls)
    _require_public(site, args.allow_private)

    async def fetch() -> object:
        clock = WallClock()
        async with _client(args.allow_private) as client:
            fetcher = RobotsFetcher(client, MemoryStore(clock), clock, agent=args.agent,
                                    policy=FetchPolicy(), allow_private=args.allow_private,
                                    dialect=args.dialect, max_bytes=args.max_bytes)
            return await fetcher.state(site)

    state = asyncio.run(fetch())
    if isinstance(state, Parsed):
        _warn_if_cut(f"{site}/robots.txt", state.robots, args.max_bytes)
        if not args.json:
            out.write(f"{site}/robots.txt: {state.status}, dialect {state.robots.dialect}"
                      f"{' (last good copy)' if state.stale else ''}\n")
        return _print_decisions(args, out, [(url, state.robots.decide(url, args.agent,
                                                                      ip=args.ip))
                                            for url in urls])
    allowed = isinstance(state, AllowAll)
    reason = getattr(state, "reason", "")
    decisions = [(url, Decision(allowed, None, f"{site}/robots.txt: {reason}"))
                 for url in urls]
    return _print_decisions(args, out, decisions)


def _print_decisions(args: argparse.Namespace, out: TextIO,
                     decisions: list[tuple[str, Decision]]) -> int:
    if args.json:
        json.dump([_decision_json(u, d) for u, d in decisions], out, indent=2)
        out.write("\n")
    else:
        for url, decision in decisions:
            verdict = "allowed   " if decision.allowed else "disallowed"
            out.write(shown(f"{verdict} {url}  ({decision.reason})\n"))
    return EXIT_OK if all(d.allowed for _, d in decisions) else EXIT_FINDINGS


def _walker(args: argparse.Namespace, client: Any, **options: Any) -> Any:
    from polite.clock import WallClock
    from polite.fetch.politeness import Politeness
    from polite.fetch.robots import RobotsFetcher
    from polite.fetch.sitemaps import SitemapWalker
    from polite.storage import MemoryStore

    clock = WallClock()
    store = MemoryStore(clock)
    robots = RobotsFetcher(client, store, clock, agent=args.agent,
                           allow_private=args.allow_private)
    politeness = Politeness(robots, store, clock, agent=args.agent,
                            default_delay_s=args.delay_ms / 1000,
                            allow_private=args.allow_private, private_hint=FLAGS.allow_private)
    return SitemapWalker(client, politeness, **options)


def _sitemap_parse(args: argparse.Namespace, out: TextIO) -> int:
    from polite.sitemaps import Entry, SitemapParser

    def show(entries: list[Entry]) -> None:
        for entry in entries:
            if args.json:
                out.write(json.dumps(entry.as_json(), ensure_ascii=False) + "\n")
            else:
                out.write(f"{entry.kind}\t{entry.loc}\n")

    if args.source.startswith(("http://", "https://")):
        import asyncio

        _require_public(args.source, args.allow_private)

        async def fetch() -> Any:
            async with _client(args.allow_private) as client:
                return await _walker(args, client).read(args.source, show)

        file = asyncio.run(fetch())
        issues, stopped, error = file.issues, None, file.error
        name = args.source
    else:
        parser = SitemapParser(args.url)
        source = sys.stdin.buffer if args.source == "-" else open(args.source, "rb")  # noqa: SIM115
        with source:
            while chunk := source.read(1 << 18):
                show(parser.feed(chunk))
                if parser.stopped is not None:
                    break
        show(parser.close())
        issues, stopped, error = parser.issues, parser.stopped, None
        name = args.source
    for issue in issues:
        print(f"{name}:{issue.line}: {issue.severity}: {issue.message} [{issue.code}]",
              file=sys.stderr)
    if error is not None:
        print(f"polite: {name}: {error}", file=sys.stderr)
        return EXIT_FINDINGS
    return EXIT_FINDINGS if stopped is not None else EXIT_OK


def _sitemap_tree(args: argparse.Namespace, out: TextIO) -> int:
    import asyncio

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from polite.fetch.robots import origin_of
    from polite.fetch.sitemaps import SitemapFile, WalkSummary

    site = origin_of(args.site)
    _require_public(site, args.allow_private)
    summary = WalkSummary(site)
    files: list[SitemapFile] = []
    console = Console(stderr=True)

    async def walk() -> None:
        async with _client(args.allow_private) as client:
            walker = _walker(args, client, max_depth=args.max_depth, max_files=args.max_files,
                             cross_host=args.cross_host, well_known=args.well_known)
            progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                TextColumn("{task.completed} files, {task.fields[urls]:,} URLs, "
                                           "{task.fields[errors]} errors"),
                                TimeElapsedColumn(), console=console,
                                disable=args.json or not console.is_terminal)
            with progress:
                task = progress.add_task(site, total=None, urls=0, errors=0)
                async for file, entries in walker.walk(site, summary):
                    files.append(file)
                    if args.urls and not args.json:
                        for entry in entries:
                            out.write(entry.loc + "\n")
                    progress.update(task, advance=1, urls=summary.urls,
                                    errors=summary.errors)

    asyncio.run(walk())
    if args.json:
        json.dump({"summary": summary.as_json(), "files": [f.as_json() for f in files]}, out,
                  indent=2)
        out.write("\n")
        return EXIT_FINDINGS if summary.errors else EXIT_OK
    # With --urls, standard output is the URL list alone; the tables go to standard error.
    tables = sys.stderr if args.urls else out
    report = Console(file=tables, width=max(100, Console(file=tables).width))
    listing = Table(title=f"Sitemaps of {site}", title_justify="left")
    for column in ("level", "file", "format", "URLs", "sitemaps", "note"):
        listing.add_column(column, justify="right" if column in ("level", "URLs", "sitemaps")
                           else "left", overflow="fold")
    for file in files:
        note = file.error or (f"same as {file.duplicate_of}" if file.duplicate_of else "")
        if not note and file.issues:
            note = f"{len(file.issues)} issues, first: line {file.issues[0].line}: " \
                f"{file.issues[0].message}"
        listing.add_row(str(file.level), file.url, file.format or "-", f"{file.urls:,}",
                        f"{file.sitemaps:,}", note)
    report.print(listing)
    totals = Table(title="Summary", title_justify="left")
    for column in ("robots.txt sitemaps", "files", "indexes", "URLs", "duplicates", "errors",
                   "skipped"):
        totals.add_column(column, justify="right")
    totals.add_row(*(f"{value:,}" for value in (
        summary.robots_sitemaps, summary.files, summary.indexes, summary.urls,
        summary.duplicates, summary.errors, summary.skipped)))
    report.print(totals)
    report.print(f"{site}/{summary.robots}")
    report.print("Files with page URLs by indirection level (index files passed through; "
                 "Roy 2008, Table 4):")
    levels = Table()
    levels.add_column("level")
    for level in sorted(summary.levels):
        levels.add_column(str(level), justify="right")
    levels.add_row("# files", *(f"{summary.levels[level]:,}" for level in sorted(summary.levels)))
    report.print(levels)
    return EXIT_FINDINGS if summary.errors else EXIT_OK


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    # Imported here: the service's dependencies are not needed for the robots commands.
    from polite.serve import run_server

    return run_server(args, out)


def _ca_export(args: argparse.Namespace, out: TextIO) -> int:
    from polite.serve import open_authority

    out.write(open_authority(args.ca_dir).certificate_pem().decode("ascii"))
    return EXIT_OK


def _add_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo", help="a small site on loopback to try polite on, no internet needed",
        description="Without a command: the news site of the REGP paper (Ge & Ding 2016) "
                    "with a plain robots.txt on loopback, and the commands to try against "
                    "it, until interrupted.")
    demo.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    demo.add_argument("--port", type=IntFlag(PORT), default=8089, help="default 8089; 0 for any")
    demo.set_defaults(handler=_demo)
    demo_commands = demo.add_subparsers(title="demo commands", metavar="[COMMAND]")
    site = demo_commands.add_parser(
        "regp-site", help="serve the news website of the REGP paper (Ge & Ding 2016, "
                          "section 4.1) with one of the robots.txt files of its section 5",
        description="Serves until interrupted, printing each request as it arrives: its "
                    "time, the gap since the one before, its status and path.")
    site.add_argument("--robots", choices=["none", "rep", "regp"], default="regp",
                      help="no robots.txt (Table 9), the REGP file (Table 10, the default) "
                           "or the old REP file (Table 11)")
    site.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    site.add_argument("--port", type=IntFlag(PORT), default=8089,
                      help="default 8089; 0 for any")
    site.add_argument("--news", type=IntFlag(AT_LEAST_ONE), default=10,
                      help="news items (default 10)")
    site.add_argument("--visit-time", metavar="VALUE",
                      help="add a Visit-time line to the REGP file, e.g. "
                           "'21:00:00 +0800-08:00:00 +0800'")
    site.add_argument("--language", help="the REGP file's Language in place of zh-CN "
                      "(e.g. fr)")
    site.set_defaults(handler=_demo_regp_site)


def demo_commands(origin: str, service: str = "localhost:8080") -> list[str]:
    """What ``polite demo`` tells a newcomer to try against the site at ``origin`` (and the
    README's first success): a check of the site's robots.txt, and a question to the
    service (make serve ARGS=--allow-private) about two of its pages."""
    return [f"polite robots check {origin} --allow-private -a MyBot /login.do /news.do",
            f"curl -s {service}/politeness/verbose -d "
            f"'[\"{origin}/news.do\", \"{origin}/newsItem.do?id=1\"]'"]


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    import contextlib
    import threading

    from polite.demo import start_site

    with start_site(args.host, args.port, robots="rep") as site:
        robots = site.robots_txt() or ""
        out.write(f"polite demo: a small news site on {site.origin}/ until Ctrl-C; its "
                  "robots.txt:\n\n" + "".join(f"  {line}\n" for line in robots.splitlines())
                  + "\nTry, in another terminal (the service: make serve "
                    "ARGS=--allow-private):\n\n"
                  + "".join(f"  {command}\n" for command in demo_commands(site.origin)))
        out.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return EXIT_OK


def _demo_regp_site(args: argparse.Namespace, out: TextIO) -> int:
    import threading

    from polite.demo import Request, start_site

    last: list[float] = []
    lock = threading.Lock()

    def show(request: Request, status: int) -> None:
        with lock:
            gap = f"+{request.at - last[-1]:.3f}" if last else ""
            last.append(request.at)
            out.write(f"{request.at - last[0]:9.3f} s {gap:>9} {status} {request.path}\n")
            out.flush()

    with start_site(args.host, args.port, robots=args.robots, news=args.news,
                    visit_time=args.visit_time, language=args.language,
                    on_request=show) as site:
        robots = site.robots_txt()
        out.write(f"the REGP paper's news site (Ge & Ding 2016) on {site.origin}/ "
                  f"({args.news} news items), "
                  f"robots.txt: {args.robots}\n")
        out.write("".join(f"  {line}\n" if line else "\n" for line in robots.splitlines())
                  if robots
                  else "  (none: /robots.txt answers 404)\n")
        out.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return EXIT_OK

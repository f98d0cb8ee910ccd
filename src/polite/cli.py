"""The ``polite`` command line: wiring only; the work is done by the library."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from polite import __version__
from polite.errors import PoliteError
from polite.robots import Decision, Dialect, RobotsTxt, Severity, parse

__all__ = ["main"]

EXIT_OK = 0
EXIT_FINDINGS = 1  # some URL is disallowed (check) or the file has problems (lint)
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.handler(args, sys.stdout))
    except PoliteError as exc:
        print(f"polite: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"polite: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_USAGE


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polite", description="The politeness layer for web crawling.")
    parser.add_argument("--version", action="version", version=f"polite {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    robots = commands.add_parser("robots", help="read, check and lint robots.txt files")
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
                       help="URLs to check (with a SITE, paths such as /a/b will do)")
    check.add_argument("--allow-private", action="store_true",
                       help="with a SITE: also fetch from private and loopback addresses")
    check.add_argument("--agent", "-a", required=True, help="the crawler's product token")
    check.add_argument("--dialect", "-d", default="auto", choices=dialects)
    check.add_argument("--ip", help="the egress IP address (REGP Ip-allow / Ip-disallow)")
    check.add_argument("--json", action="store_true", help="one JSON array of verdicts")
    check.set_defaults(handler=_robots_check)

    lint = robots_commands.add_parser(
        "lint", help="list every line a parser skipped or read leniently",
        description="Exit status: 0 no errors or warnings, 1 some found, 2 bad input.")
    lint.add_argument("file", metavar="FILE", help="a robots.txt file, or - for standard input")
    lint.add_argument("--dialect", "-d", default="auto", choices=dialects)
    lint.add_argument("--json", action="store_true", help="one JSON array of issues")
    lint.set_defaults(handler=_robots_lint)

    serve = commands.add_parser(
        "serve", help="run the politeness service (REST API) on one port",
        description="Listens on loopback by default. Robots.txt of private and loopback "
                    "addresses is not fetched unless --allow-private is given.")
    # Defaults live in polite.serve.Settings: an option not given falls back to --config,
    # then to those defaults.
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="default 8080")
    serve.add_argument("--store", help="sqlite:///PATH (default sqlite:///polite.sqlite), "
                       "redis://HOST:PORT/DB (shared by several nodes) or memory://")
    serve.add_argument("--default-delay-ms", type=int,
                       help="delay where neither the operator nor the site sets one "
                            "(default 1000)")
    serve.add_argument("--max-crawl-delay-s", type=float,
                       help="robots.txt delays above this are read as this (default 60)")
    serve.add_argument("--agent", help="the product token robots.txt is read for "
                       "(default polite)")
    serve.add_argument("--allow-private", action="store_true", default=None,
                       help="also fetch from private and loopback addresses")
    serve.add_argument("--on-401-403", choices=["disallow", "allow"],
                       help="what a robots.txt answered with 401 or 403 means: disallow all "
                            "(the default, as the seeds do) or allow all (RFC 9309)")
    serve.add_argument("--mode", choices=["reject", "wait"],
                       help="proxy: a request whose host's slot is taken gets 429 with "
                            "Retry-After (reject, the default) or is held until its slot (wait)")
    serve.add_argument("--max-wait-s", type=float,
                       help="wait mode: the longest a request is held (default 60)")
    serve.add_argument("--origin-timeout-s", type=float,
                       help="proxy: an origin silent this long gets the client a 504 "
                            "(default 30)")
    serve.add_argument("--adaptive-factor", type=float,
                       help="the adaptive delay is this many times a host's running response "
                            "time (default 1; 0 turns it off)")
    serve.add_argument("--admin-token", help="required (Bearer) for writes such as PUT /delays;"
                       " mandatory when --host is not a loopback address")
    serve.add_argument("--config", metavar="FILE",
                       help="a TOML file with any of the options above (with _ for -) and a "
                            "[delays] table of domain = milliseconds")
    serve.set_defaults(handler=_serve)
    return parser


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
    robots: RobotsTxt = parse(_read(args.file), args.dialect)
    return _print_decisions(args, out, [(url, robots.decide(url, args.agent, ip=args.ip))
                                        for url in args.urls])


def _robots_check_site(args: argparse.Namespace, out: TextIO) -> int:
    # Imported here: the fetch layer's dependencies are not needed for local files.
    import asyncio
    from urllib.parse import urljoin

    from polite.clock import WallClock
    from polite.core.robots.lifecycle import AllowAll, FetchPolicy, Parsed
    from polite.fetch.robots import RobotsFetcher, create_client, origin_of
    from polite.storage import MemoryStore

    site = origin_of(args.file)
    urls = [urljoin(site + "/", url) for url in args.urls]

    async def fetch() -> object:
        clock = WallClock()
        async with create_client() as client:
            fetcher = RobotsFetcher(client, MemoryStore(clock), clock, agent=args.agent,
                                    policy=FetchPolicy(), allow_private=args.allow_private,
                                    dialect=args.dialect)
            return await fetcher.state(site)

    state = asyncio.run(fetch())
    if isinstance(state, Parsed):
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
            out.write(f"{verdict} {url}  ({decision.reason})\n")
    return EXIT_OK if all(d.allowed for _, d in decisions) else EXIT_FINDINGS


def _robots_lint(args: argparse.Namespace, out: TextIO) -> int:
    robots = parse(_read(args.file), args.dialect)
    issues = robots.issues
    if args.json:
        json.dump([{"line": i.line, "severity": i.severity.value, "code": i.code,
                    "message": i.message} for i in issues], out, indent=2)
        out.write("\n")
    else:
        for issue in issues:
            out.write(f"{args.file}:{issue.line}: {issue.severity}: {issue.message} "
                      f"[{issue.code}]\n")
        errors = sum(i.severity is Severity.ERROR for i in issues)
        warnings = sum(i.severity is Severity.WARNING for i in issues)
        notes = len(issues) - errors - warnings
        out.write(f"{args.file}: dialect {robots.dialect}, {len(robots.groups)} groups, "
                  f"{errors} errors, {warnings} warnings, {notes} notes\n")
    serious = any(i.severity in (Severity.ERROR, Severity.WARNING) for i in issues)
    return EXIT_FINDINGS if serious else EXIT_OK


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    # Imported here: the service's dependencies are not needed for the robots commands.
    from polite.serve import run_server

    return run_server(args, out)

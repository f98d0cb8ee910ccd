"""``polite robots``: check, lint, explain and diff; the work is done by
:mod:`polite.core.robots`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, TextIO

from polite.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    add_command,
    add_group,
    fetch_client,
    local_file,
    require_public,
)
from polite.config import ROBOTS_CHECK, ROBOTS_DIFF, ROBOTS_EXPLAIN, ROBOTS_LINT
from polite.core.text import counted, decode_text, shown
from polite.errors import ConfigError

# The robots.txt engine is imported by the commands that run it, not by every run of polite.
if TYPE_CHECKING:
    from polite.core.robots.usage_tools import UsageRow
    from polite.robots import Cell, Decision, Dialect, Explanation, RobotsDiff, RobotsTxt

__all__ = ["add_robots_commands", "fetch_body", "is_site", "robots_source"]


def add_robots_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _, robots_commands = add_group(commands, "robots",
                                   help="read, check and lint robots.txt files")

    add_command(
        robots_commands, ROBOTS_CHECK, _robots_check,
        help="may an agent fetch these URLs?",
        description="Print the verdict, the deciding rule and its line for each URL. "
                    "Exit status: 0 all allowed, 1 some disallowed, 2 bad input.")

    add_command(
        robots_commands, ROBOTS_LINT, _robots_lint,
        help="classify every line and find what crawlers will read otherwise",
        description="Lists every line a parser skipped or read leniently and the mistakes "
                    "webmasters make (Disallow: / for everyone, one agent in two groups, full "
                    "User-Agent strings, relative Sitemap lines, Crawl-delay Googlebot "
                    "ignores, REGP's rules, ...). Exit status: 0 no errors or warnings, 1 "
                    "some found, 2 bad input.")
    _add_explain_commands(robots_commands)


def _add_explain_commands(robots_commands: argparse._SubParsersAction[argparse.ArgumentParser]
                          ) -> None:
    """Add ``explain`` and ``diff`` under ``polite robots``."""
    add_command(
        robots_commands, ROBOTS_EXPLAIN, _robots_explain,
        help="what one robots.txt means to each crawler, dialect by dialect",
        description="A matrix of URL x agent x dialect: the verdict, the group chosen and why, "
                    "the deciding rule and its line, the rule that lost and the tie-break. "
                    "Exit status: 0 the dialects agree on every cell, 1 they disagree "
                    "somewhere (marked !), 2 bad input.")

    add_command(
        robots_commands, ROBOTS_DIFF, _robots_diff,
        help="which URLs change verdict between two robots.txt files",
        description="Without --urls the URLs are sampled from the paths both files' rules "
                    "name: each pattern with * read as nothing and as x, a child below each "
                    "path ending in /, and /. Without --agent the agents are every product "
                    "token either file names and one that neither names. Exit status: 0 no "
                    "verdict changes, 1 some, 2 bad input.")


def _read(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    with open(local_file(name), "rb") as stream:
        return stream.read()


def is_site(name: str) -> bool:
    """Whether a FILE|SITE argument names a site (its robots.txt is fetched) or a file."""
    return name.startswith(("http://", "https://"))


def robots_source(name: str, args: argparse.Namespace, agent: str = "polite"
                  ) -> tuple[bytes, str, str | None]:
    """A FILE|SITE argument's robots.txt: the body, the name to show and the site's origin
    (``None`` for a file or standard input)."""
    if is_site(name):
        body, site = fetch_body(name, agent, args, max_bytes=args.max_robots_bytes)
        return body, f"{site}/robots.txt", site
    return _read(name), name, None


# -- explain ----------------------------------------------------------------------------


def _robots_explain(args: argparse.Namespace, out: TextIO) -> int:
    from polite.core.robots.usage_tools import explain_usage
    from polite.core.usage.vocab import PURPOSES
    from polite.robots import Dialect, explain_body, parse

    body, name, site = robots_source(args.file, args, args.agent[0])
    urls = list(args.urls)
    if site is not None:
        from urllib.parse import urljoin

        urls = [urljoin(site + "/", url) for url in urls]
    chosen = [d for d in args.dialect or () if d != "auto"]
    dialects = [Dialect(d) for d in chosen] if chosen else None
    explanation = explain_body(body, args.agent, urls, dialects, max_bytes=args.max_robots_bytes)
    dialect = dialects[0] if dialects else explanation.dialects[0]
    usage = explain_usage(parse(body, dialect, max_bytes=args.max_robots_bytes), explanation.urls,
                          explanation.agents)
    purposes = args.purpose or sorted({p for row in usage for p in row.prefs.stated()},
                                      key=PURPOSES.index)
    if args.json:
        found = explanation.as_json()
        found["usage"] = [row.as_json(purposes) for row in usage]
        json.dump(found, out, indent=2)
        out.write("\n")
    else:
        _print_explanation(out, name, explanation, brief=args.brief)
        _print_usage(out, usage, purposes, dialect)
    return EXIT_FINDINGS if explanation.disagreements else EXIT_OK


def fetch_body(source: str, agent: str, args: argparse.Namespace, *, max_bytes: int
               ) -> tuple[bytes, str]:
    """A site's robots.txt as fetched, by the service's status table, and the site's origin;
    a site with no file to read (a 404, a 5xx) is an error that says what its status means.
    ``source`` is any URL of the site (its robots.txt's own will do); ``args``: how to
    reach it (--allow-private, --hosts, --nameserver, the timeouts)."""
    import asyncio

    from polite.clock import WallClock
    from polite.core.robots.lifecycle import FetchPolicy, Parsed
    from polite.fetch.robots import RobotsFetcher, origin_of
    from polite.storage import MemoryStore

    site = origin_of(source)
    require_public(site, args)

    async def fetch() -> tuple[object, bytes]:
        clock = WallClock()
        store = MemoryStore(clock)
        client, hosts = fetch_client(args)
        async with client:
            fetcher = RobotsFetcher(client, store, clock, agent=agent,
                                    policy=FetchPolicy(), allow_private=args.allow_private,
                                    max_bytes=max_bytes, public_hosts=hosts)
            state = await fetcher.state(site)
        record = await store.load_robots(site)
        return state, record.body if record is not None else b""

    state, body = asyncio.run(fetch())
    if not isinstance(state, Parsed):
        raise ConfigError(f"{site}/robots.txt has no file to read: "
                          f"{getattr(state, 'reason', state)}")
    return body, site


def _yes(allowed: bool) -> str:
    return "Yes" if allowed else "No"


def _matrix_cell(cells: tuple[Cell, ...]) -> str:
    first = cells[0].allowed
    if all(c.allowed == first for c in cells):
        return _yes(first)
    others = ", ".join(f"{c.dialect} {_yes(c.allowed)}" for c in cells if c.allowed != first)
    return f"{_yes(first)} ! {others}"


def _print_explanation(out: TextIO, name: str, e: Explanation, *, brief: bool) -> None:
    out.write(shown(f"{name}: dialects {', '.join(d.value for d in e.dialects)}; a cell reads "
                    f"as {e.dialects[0].value} reads it, ! marks the dialects that answer "
                    "otherwise\n\n"))
    header = ["URL", *map(shown, e.agents)]
    rows = [[shown(url), *(_matrix_cell(e.row(url, agent)) for agent in e.agents)]
            for url in e.urls]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
                  + "\n")
    if brief:
        return
    for url in e.urls:
        for agent in e.agents:
            out.write(shown(f"\n{url}  {agent}\n"))
            for dialects, cell in _alike(e.row(url, agent)):
                mark = "!" if cell.disagrees else " "
                out.write(shown(f" {mark} {', '.join(dialects)}: "
                                f"{'allowed' if cell.allowed else 'disallowed'}, "
                                f"{_why(cell)}\n"))
                out.write(shown(f"     group: {cell.group.text}\n"))


def _print_usage(out: TextIO, rows: list[UsageRow], purposes: list[str],
                 dialect: Dialect) -> None:
    """Preferences beside access, one line per URL and agent, then each purpose's reason."""
    if not purposes and not any(row.prefs.licenses for row in rows):
        return
    out.write(f"\nAI-usage preferences ({dialect.value}; no preference applies to what may "
              "not be fetched)\n")
    for row in rows:
        access = "allowed" if row.allowed else "disallowed"
        prefs = ", ".join(f"{p}={row.prefs.pref(p).value}" for p in purposes)
        out.write(f"  {row.url}  {row.agent}  {access}  {prefs or 'no preference'}\n")
        for p in purposes:
            if row.prefs.answer(p).decided_by:
                out.write(f"      {row.prefs.answer(p).reason}\n")
        for link in row.prefs.licenses:
            out.write(f"      License: {link}\n")


def _alike(cells: tuple[Cell, ...]) -> list[tuple[list[str], Cell]]:
    """Dialects whose reasons read the same, said once."""
    seen: dict[tuple[object, ...], tuple[list[str], Cell]] = {}
    for cell in cells:
        key = (cell.allowed, _why(cell), cell.group.text)
        seen.setdefault(key, ([], cell))[0].append(cell.dialect.value)
    return list(seen.values())


def _rule(cell_rule: object) -> str:
    rule = cell_rule
    line = getattr(rule, "line", 0)
    where = f"line {line}" if line else "implicit first rule"
    return f"{str(rule).rstrip()} ({where})"


def _why(cell: Cell) -> str:
    path = f" (path {cell.path})" if cell.path != cell.url else ""
    if cell.rule is None:
        text = cell.reason
        if cell.loser is not None:
            text += f", over {_rule(cell.loser)}"
        return text + path
    text = _rule(cell.rule)
    if cell.loser is not None:
        text += f" over {_rule(cell.loser)}: {cell.tie_break}"
    elif len(cell.matched) > 1:
        text += f": {cell.tie_break} of {len(cell.matched)} matching rules"
    else:
        text += f": {cell.tie_break}"
    return text + path


# -- lint -------------------------------------------------------------------------------


def _robots_lint(args: argparse.Namespace, out: TextIO) -> int:
    """``polite robots lint``: the reader's issues and the checks, one a line; with
    ``--lines`` every line's class too."""
    from polite.robots import Severity, lint_body, parse_dialect

    body, name, _ = robots_source(args.file, args)
    report = lint_body(body, parse_dialect(args.dialect), max_bytes=args.max_robots_bytes,
                       content_type=args.content_type)
    if len(body) > args.max_robots_bytes:
        print(f"polite: warning: {name} is longer than {args.max_robots_bytes:,} bytes and was "
              "read only that far; rules after that point are not applied (--max-robots-bytes to "
              "read more)", file=sys.stderr)
    issues = report.issues
    if args.json:
        found = [{"line": i.line, "severity": i.severity.value, "code": i.code,
                  "message": i.message, "count": i.count, "lines": list(i.lines or (i.line,))}
                 for i in issues]
        if args.lines:
            json.dump({"dialect": report.dialect.value, "issues": found,
                       "lines": [c.as_json() for c in report.lines],
                       "counts": report.counts}, out, indent=2)
        else:
            json.dump(found, out, indent=2)
        out.write("\n")
    else:
        if args.lines:
            for c in report.lines:
                out.write(shown(f"{name}:{c.line}: {c.label}"
                                f"{' ' + c.field if c.field else ''}: {c.text}\n"))
        for issue in issues:
            out.write(shown(f"{name}:{issue.line}: {issue.severity}: {issue.message} "
                            f"[{issue.code}]\n"))
        out.write(shown(f"{name}: dialect {report.dialect}, {counted(report.groups, 'group')}, "
                        f"{counted(report.errors, 'error')}, "
                        f"{counted(report.warnings, 'warning')}, "
                        f"{counted(report.notes, 'note')}\n"))
        if args.lines:
            counts = ", ".join(f"{n} {label}" for label, n in sorted(report.counts.items()))
            out.write(shown(f"{name}: {counted(len(report.lines), 'line')}: {counts}\n"))
    serious = any(i.severity in (Severity.ERROR, Severity.WARNING) for i in issues)
    return EXIT_FINDINGS if serious else EXIT_OK


# -- diff -------------------------------------------------------------------------------


def _url_list(name: str) -> list[str]:
    urls = []
    for raw in decode_text(_read(name), name).splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            urls.append(line)
    if not urls:
        raise ConfigError(f"{name} lists no URLs")
    return urls


def _robots_diff(args: argparse.Namespace, out: TextIO) -> int:
    from polite.robots import diff_bodies, parse_dialect

    urls = _url_list(args.urls) if args.urls else None
    agent = args.agent[0] if args.agent else "polite"
    old, old_name, _ = robots_source(args.old, args, agent)
    new, new_name, _ = robots_source(args.new, args, agent)
    found = diff_bodies(old, new, urls=urls, agents=args.agent,
                        dialect=parse_dialect(args.dialect), max_bytes=args.max_robots_bytes)
    if args.json:
        json.dump(found.as_json(), out, indent=2)
        out.write("\n")
    else:
        _print_diff(out, old_name, new_name, found)
    return EXIT_FINDINGS if found.changes or found.usage_changes else EXIT_OK


def _print_diff(out: TextIO, old: str, new: str, d: RobotsDiff) -> None:
    how = ("sampled from the paths of both files' rules" if d.sampled else "given")
    out.write(shown(f"{old} -> {new}: dialect {d.dialect}, {counted(len(d.urls), 'URL')} "
                    f"({how}), {counted(len(d.agents), 'agent')}\n"))
    for n, text in d.removed:
        out.write(shown(f"- {old}:{n}: {text}\n"))
    for n, text in d.added:
        out.write(shown(f"+ {new}:{n}: {text}\n"))
    if d.usage_changes:
        out.write(f"{len(d.usage_changes)} AI-usage preferences change:\n")
    for u in d.usage_changes:
        out.write(shown(f"  {u.agent}  {u.url}  {u.purpose}: {u.before.value} -> "
                        f"{u.after.value}  (was {u.old_reason}; now {u.new_reason})\n"))
    if not d.changes:
        out.write("no URL changes verdict\n")
        return
    out.write(f"{len(d.changes)} verdicts change:\n")
    for c in d.changes:
        before = "allowed" if c.was_allowed else "disallowed"
        after = "allowed" if c.allowed else "disallowed"
        was = _rule(c.old_rule) if c.old_rule else c.old_reason
        now = _rule(c.new_rule) if c.new_rule else c.new_reason
        out.write(shown(f"  {c.agent}  {c.url}  {before} -> {after}  (was {was}; "
                        f"now {now})\n"))


# -- check ------------------------------------------------------------------------------


def _warn_if_cut(name: str, robots: RobotsTxt, max_bytes: int) -> None:
    """A file cut at the cap answers as if its later rules were not there: say so."""
    if robots.truncated:
        print(f"polite: warning: {name} is longer than {max_bytes:,} bytes and was read only "
              "that far; rules after that point are not applied (--max-robots-bytes to read more)",
              file=sys.stderr)


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
    from polite.robots import parse

    _check_urls(args.urls)
    robots: RobotsTxt = parse(_read(args.file), args.dialect, max_bytes=args.max_robots_bytes)
    _warn_if_cut(args.file, robots, args.max_robots_bytes)
    return _print_decisions(args, out, [(url, robots.decide(url, args.agent, ip=args.ip))
                                        for url in args.urls])


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
    from polite.robots import DecidedBy, Decision
    from polite.storage import MemoryStore

    site = origin_of(args.file)
    urls = [urljoin(site + "/", url) for url in args.urls]
    _check_urls(urls)
    require_public(site, args)

    async def fetch() -> object:
        clock = WallClock()
        client, hosts = fetch_client(args)
        async with client:
            fetcher = RobotsFetcher(client, MemoryStore(clock), clock, agent=args.agent,
                                    policy=FetchPolicy(), allow_private=args.allow_private,
                                    dialect=args.dialect, max_bytes=args.max_robots_bytes,
                                    public_hosts=hosts)
            return await fetcher.state(site)

    state = asyncio.run(fetch())
    if isinstance(state, Parsed):
        _warn_if_cut(f"{site}/robots.txt", state.robots, args.max_robots_bytes)
        if not args.json:
            out.write(f"{site}/robots.txt: {state.status}, dialect {state.robots.dialect}"
                      f"{' (last good copy)' if state.stale else ''}\n")
        return _print_decisions(args, out, [(url, state.robots.decide(url, args.agent,
                                                                      ip=args.ip))
                                            for url in urls])
    allowed = isinstance(state, AllowAll)
    reason = getattr(state, "reason", "")
    decisions = [(url, Decision(allowed, None, f"{site}/robots.txt: {reason}",
                                       by=DecidedBy.FILE_STATE))
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

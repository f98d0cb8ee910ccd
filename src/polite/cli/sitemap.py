"""``polite sitemap``: one sitemap file's entries, or a site's whole tree; the work is
:mod:`polite.fetch.sitemaps` and :mod:`polite.sitemaps`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from polite.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    add_command,
    add_group,
    fetch_client,
    local_file,
    require_public,
    sitemap_walker,
)
from polite.config import SITEMAP_PARSE, SITEMAP_TREE
from polite.core.text import counted

__all__ = ["add_sitemap_commands"]


def add_sitemap_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _, sitemap_commands = add_group(commands, "sitemap",
                                    help="read sitemaps: one file, or a whole site's")
    add_command(
        sitemap_commands, SITEMAP_PARSE, _sitemap_parse,
        help="print the entries of one sitemap file (XML, text, RSS, Atom, gzip)")
    add_command(
        sitemap_commands, SITEMAP_TREE, _sitemap_tree,
        help="walk a site's sitemaps from its robots.txt, with a summary")


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

        require_public(args.source, args)

        async def fetch() -> Any:
            client, hosts = fetch_client(args)
            async with client:
                return await sitemap_walker(args, client, hosts).read(args.source, show)

        file = asyncio.run(fetch())
        issues, stopped, error = file.issues, None, file.error
        name = args.source
    else:
        parser = SitemapParser(args.url, max_bytes=args.max_sitemap_bytes)
        source = sys.stdin.buffer if args.source == "-" else open(local_file(args.source), "rb")  # noqa: SIM115
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
    require_public(site, args)
    summary = WalkSummary(site)
    files: list[SitemapFile] = []
    console = Console(stderr=True)

    async def walk() -> None:
        client, hosts = fetch_client(args)
        async with client:
            walker = sitemap_walker(args, client, hosts, max_depth=args.max_depth,
                                    max_files=args.max_files, cross_host=args.cross_host,
                                    well_known=args.well_known)
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
            note = f"{counted(len(file.issues), 'issue')}, first: line {file.issues[0].line}: " \
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

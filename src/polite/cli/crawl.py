"""``polite crawl``: the options, the progress display and the summary; the crawl itself is
:mod:`polite.crawl`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from polite.cli.common import (
    EXIT_CRAWL_FAILED,
    EXIT_INTERRUPTED,
    EXIT_STORE,
    add_command,
    add_group,
    require_public,
    resolve,
)
from polite.config import CRAWL, CRAWL_MERGE, CRAWL_STATUS, FLAGS
from polite.core.text import counted
from polite.errors import ConfigError

if TYPE_CHECKING:
    from polite.fetch.resolve import Resolver

__all__ = ["add_crawl_command"]



def add_crawl_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group, crawl_commands = add_group(
        commands, "crawl",
        help="crawl sites politely (REGP guidance, sitemaps first, WARC output)",
        description="A crawl, and the status and merge of one that workers share. "
                    "polite crawl URL... is short for polite crawl run URL....")
    group.default_command = "run"  # polite crawl URL... as before status and merge
    add_command(
        crawl_commands, CRAWL, _crawl,
        help="crawl from the given URLs (the default command)",
        description="Crawl from the given URLs, obeying robots.txt in every dialect, its "
                    "delays and time windows, and REGP guidance. Writes OUT/pages.jsonl (one "
                    "line per URL decided on) and OUT/warc/*.warc.gz. Started again with the "
                    "same --out, a crawl goes on where it stopped (seeds may be omitted). "
                    "With --store redis://... several processes on several machines share "
                    "one crawl (each its own --out); 'polite crawl status --store "
                    "redis://...' shows its progress, 'polite crawl merge DIR... --out DIR' "
                    "merges the workers' folders.")
    add_command(
        crawl_commands, CRAWL_STATUS, _status,
        help="a shared crawl's progress: the frontier and each worker",
        description="Read the frontier's totals and every worker's last heartbeat from the "
                    "store workers share; a worker silent for 5 s is shown as gone.")
    add_command(
        crawl_commands, CRAWL_MERGE, _merge,
        help="merge the folders of a shared crawl's workers into one",
        description="Write one pages.jsonl and the WARC files of every worker's folder "
                    "into --out.")


def _require_extra() -> None:
    """The crawl extra's libraries, or an error saying how to install them."""
    try:
        import polite.crawl  # noqa: F401
    except ImportError as exc:
        if exc.name not in ("selectolax", "zlib_ng"):
            raise
        raise ConfigError(f"polite crawl needs {exc.name}: pip install 'polite-web[crawl]'"
                          ) from exc


def _require_crawl(folder: str, store: str) -> None:
    """Without URLs a run goes on with a crawl begun before: one must be there (a typo in
    --out would otherwise make an empty crawl that ends at once, saying nothing). Workers
    joining a shared crawl (Redis) find out from the store itself."""
    from polite.storage.url import parse_store_url

    if not store:
        path: Path | None = Path(folder) / "crawl.sqlite"
        where = folder
    else:
        try:
            parsed = parse_store_url(store)
        except ConfigError:
            return  # refused with its own message when the store is opened
        if parsed.shared:
            return
        path, where = parsed.path, store
    if path is None or not path.exists():
        raise ConfigError(f"no URL given and no crawl in {where} to go on with")


def _crawl(args: argparse.Namespace, out: TextIO) -> int:
    # Imported by the commands that run a loop, not by every run of polite.
    import asyncio

    _require_extra()
    from polite.crawl import CrawlSettings

    resolve(CRAWL, args)
    if not args.out:
        raise ConfigError("--out DIR is required: the crawl's folder")
    args.store = args.store or ""
    if not args.urls:
        _require_crawl(args.out, args.store)
    # the declared keywords that are CrawlSettings' fields, as given (languages split first)
    fields = {f.name for f in dataclasses.fields(CrawlSettings)} - {"languages"}
    settings = CrawlSettings(
        **{s.name: getattr(args, s.name) for s in CRAWL.on("keyword") if s.name in fields},
        languages=tuple(x.strip() for x in args.languages.split(",") if x.strip()))
    from polite._loop import new_event_loop
    from polite.fetch.robots import networks
    from polite.identity.options import signer_from

    args.allow_networks = networks(args.allow_network)
    args.signer = signer_from(args.sign_with, args.signature_agent, knobs=FLAGS)
    if args.max_price is not None and args.signer is None:
        raise ConfigError("--max-price needs --sign-with: a site charges only a crawler it "
                          "can tell by its signature")
    for url in args.urls:  # before anything is fetched, as polite robots check does
        require_public(url, args, args.allow_networks)
    from polite.crawl.workers import is_shared

    unreachable: tuple[type[BaseException], ...] = ()
    if is_shared(args.store, knob=FLAGS.store):
        from polite.storage.redis import UNREACHABLE as unreachable
    loop = new_event_loop("auto")  # uvloop when installed: less CPU per page
    try:
        return loop.run_until_complete(_run(args, settings, out))
    except asyncio.CancelledError:  # a second Ctrl-C: the fetches in flight were left
        return EXIT_INTERRUPTED
    except unreachable as exc:  # before the crawl began: nothing to wait for yet
        raise ConfigError(f"--store {args.store}: cannot reach it: {exc}") from exc
    finally:
        loop.close()


async def _run(args: argparse.Namespace, settings: object, out: TextIO) -> int:
    """The crawl, names resolved as --hosts or --nameserver say."""
    from polite.cli.common import resolver

    names = resolver(args)
    try:
        return await _crawl_with(args, settings, out, names)
    finally:
        await names.close()


async def _crawl_with(args: argparse.Namespace, settings: object, out: TextIO,
                      names: Resolver) -> int:
    import asyncio

    from rich.console import Console, Group
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    from polite._loop import freeze_start_up
    from polite.crawl import (
        CrawlSettings,
        CrawlStats,
        StoreUnreachable,
        WriteFailed,
        open_crawler,
    )
    from polite.crawl.workers import heartbeat, shares_frontier

    assert isinstance(settings, CrawlSettings)
    folder = Path(args.out)
    # Redis, or an SQLite file named with --store: other processes may crawl it at once
    shared = shares_frontier(args.store, knob=FLAGS.store)
    worker = args.worker or f"{socket.gethostname()}-{os.getpid()}"

    def on_store(up: bool, detail: str) -> None:
        # one line when the store goes away, one when it is back: no traceback, no flood
        said = (f"polite crawl: the store {args.store} is back; going on" if up else
                f"polite crawl: the store {args.store} is unreachable ({detail}); waiting "
                f"for it up to {settings.store_patience_s:.0f} s (Ctrl-C stops)")
        print(said, file=sys.stderr, flush=True)

    async with open_crawler(folder, settings, store=args.store,
                            resolve=names.addresses,
                            connect_timeout_s=args.connect_timeout_s,
                            read_timeout_s=args.read_timeout_s,
                            default_delay_s=args.default_delay_s,
                            max_crawl_delay_s=args.max_crawl_delay_s,
                            allow_private=args.allow_private,
                            allow_networks=args.allow_networks,
                            worker=worker if shared else "", knobs=FLAGS,
                            on_store=on_store, signer=args.signer) as crawler, \
            heartbeat(args.store if shared else "", worker, crawler, folder):
        bad = await crawler.add_seeds(args.urls)
        if bad:
            raise ConfigError(f"not an http(s) URL: {', '.join(map(repr, bad))}")
        loop = asyncio.get_running_loop()
        interrupted = 0
        unwritten: WriteFailed | None = None
        main = asyncio.current_task()
        assert main is not None

        def interrupt() -> None:
            nonlocal interrupted
            interrupted += 1
            crawler.stop()
            if interrupted > 1:
                main.cancel()  # a second Ctrl-C: leave the fetches in flight too

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, interrupt)
        console = Console(file=sys.stderr)
        # start-up's objects (modules, classes, the store and client) out of the collector's
        # reach before the first page: each full collection walked them all again
        freeze_start_up()

        def view(stats: CrawlStats) -> Table | Group:
            table = Table.grid(padding=(0, 2))
            skipped = sum(stats.skipped.values())
            table.add_row("fetched", f"{stats.fetched:,}", "skipped", f"{skipped:,}",
                          "failed", f"{stats.failed:,}")
            table.add_row("pages/s", f"{stats.pages_per_s():,.1f}", "hosts waiting",
                          f"{stats.waiting_hosts:,}", "in flight", f"{stats.in_flight:,}")
            table.add_row("added", f"{stats.added:,}", "bytes", f"{stats.bytes:,}", "kept",
                          f"{stats.kept:,}")
            if not stats.waits:
                return table
            # what a crawl that fetches nothing waits for: the next three to be asked again
            now = time.monotonic()
            soonest = sorted(stats.waits.items(), key=lambda wait: wait[1][1])
            lines = [Text(f"waiting  {host}, {max(0.0, until - now):,.0f} s: {what}",
                          no_wrap=True, overflow="ellipsis")
                     for host, (what, until) in soonest[:3]]
            if len(soonest) > 3:
                lines.append(Text(f"         and {len(soonest) - 3:,} hosts more"))
            return Group(table, *lines)

        try:
            if args.json or not console.is_terminal:
                stats = await crawler.run(owns_store=not shared)
            else:
                with Live(view(crawler.stats), console=console, refresh_per_second=4,
                          transient=True) as live:
                    async def refresh() -> None:
                        while True:
                            await asyncio.sleep(0.25)
                            live.update(view(crawler.stats))

                    ticker = asyncio.create_task(refresh())
                    try:
                        stats = await crawler.run(owns_store=not shared)
                    finally:
                        ticker.cancel()
        except StoreUnreachable as exc:
            print(f"polite crawl: {exc}", file=sys.stderr)
            return EXIT_STORE
        except WriteFailed as exc:  # a full disk: what was not recorded stays queued
            stats, unwritten = crawler.stats, exc
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        try:
            frontier: dict[str, int] | None = (await crawler.counts())._asdict()
        except Exception as exc:  # stopped while the store was away: its totals unknown
            if not crawler.is_unreachable(exc):
                raise
            frontier = None
    summary = {**stats.as_json(), "frontier": frontier, "out": str(folder),
               "stopped": interrupted > 0, **({"worker": worker} if shared else {})}
    # stopped by Ctrl-C or SIGTERM: a script tells it from a crawl that finished
    status = EXIT_INTERRUPTED if interrupted else 0
    if unwritten is not None:
        summary["error"] = str(unwritten)
        print(f"polite crawl: {unwritten}", file=sys.stderr)
        status = EXIT_CRAWL_FAILED
    elif not interrupted and not stats.fetched:
        why = _why_nothing(args, stats, frontier, shared=shared)
        if why:
            print(f"polite crawl: {why}", file=sys.stderr)
            if why.startswith("no seed"):
                status = EXIT_CRAWL_FAILED
    if args.json:
        out.write(json.dumps(summary) + "\n")
        return status
    skipped = ", ".join(f"{kind} {n:,}" for kind, n in sorted(stats.skipped.items())) or "none"
    kept = ""
    if stats.kept != stats.fetched:  # noindex, or a purpose the sites' preferences refuse
        refused = (f": {stats.refused_by_purpose:,} refused for {args.purpose} by the sites' "
                   "AI-usage preferences" if stats.refused_by_purpose else "")
        kept = f" ({stats.kept:,} kept{refused})"
    out.write(f"polite crawl: {counted(stats.fetched, 'page')} fetched{kept} from "
              f"{counted(len(stats.hosts), 'host')}, "
              f"{stats.failed:,} failed, skipped: {skipped}; {stats.bytes:,} bytes in "
              f"{summary['seconds']} s ({stats.pages_per_s():,.1f} pages/s)\n")
    totals = ("the store's totals unknown (it did not answer)" if frontier is None else
              f"{frontier['queued']:,} queued, {frontier['fetched']:,} fetched, "
              f"{frontier['skipped']:,} skipped in all runs")
    out.write(f"frontier: {totals}; output in {folder}"
              + (" (stopped: run the same command to go on)" if interrupted else "") + "\n")
    return status


def _why_nothing(args: argparse.Namespace, stats: object,
                 frontier: dict[str, int] | None, *, shared: bool = False) -> str:
    """Why a run fetched no page, when the summary alone does not say: every seed's site
    could not be reached, or the crawl had nothing left to fetch. A worker of a ``shared``
    crawl whose every request failed (a page answered too late on each site) while the
    others fetched pages did not find the sites unreachable: they answered the others."""
    from polite.core.crawl import link_key
    from polite.core.urls import split_origin
    from polite.crawl import CrawlStats

    assert isinstance(stats, CrawlStats)
    seeds = {split_origin(link_key(url))[1] for url in args.urls}
    others_fetched = shared and frontier is not None and frontier["fetched"] > 0
    if seeds and seeds <= stats.unreachable.keys() and not others_fetched:
        return "no seed could be crawled: " + "; ".join(
            f"{host}: {stats.unreachable[host]}" for host in sorted(seeds))
    if frontier is not None and not frontier["queued"] and not stats.failed \
            and not stats.skipped:
        return (f"nothing left to fetch: every URL of the crawl in {args.out} was decided "
                f"by an earlier run ({frontier['fetched']:,} fetched); give new URLs, or "
                "--revisit to fetch pages again when they are due")
    return ""


def _status(args: argparse.Namespace, out: TextIO) -> int:
    import asyncio

    _require_extra()  # the workers' liveness is polite.crawl's, which needs its extra
    from polite.crawl.workers import crawl_status, is_shared

    if not is_shared(args.store, knob=FLAGS.store):
        raise ConfigError("crawl status reads a shared crawl: --store redis://HOST:PORT/DB"
                          "[?prefix=CRAWL]")
    try:
        status = asyncio.run(crawl_status(args.store, knob=FLAGS.store))
    except (OSError, ConnectionError) as exc:
        raise ConfigError(f"crawl status: cannot reach {args.store}: {exc}") from exc
    if args.json:
        out.write(json.dumps(status) + "\n")
        return 0
    counts = status["frontier"]
    assert isinstance(counts, dict)
    out.write(f"frontier: {counts['queued']:,} queued, {counts['leased']:,} leased, "
              f"{counts['fetched']:,} fetched, {counts['skipped']:,} skipped or failed; "
              f"hosts: {status['hosts_waiting']:,} with URLs waiting, "
              f"{status['hosts_fetched']:,} fetched from"
              + ("; finished" if status["finished"] else "") + "\n")
    workers = status["workers"]
    assert isinstance(workers, list)
    out.write(f"workers: {status['workers_alive']} alive of {len(workers)}\n")
    for w in workers:
        state = "alive" if w["alive"] else ("ended" if w.get("ended") else "gone")
        out.write(f"  {w['worker']:<28} {state:<5} beat {w['seconds_since_beat']:>7} s ago  "
                  f"fetched {w.get('fetched', 0):>9,}  failed {w.get('failed', 0):>6,}  "
                  f"{w.get('pages_per_s', 0):>8} pages/s  {w.get('out', '')}\n")
    return 0


def _merge(args: argparse.Namespace, out: TextIO) -> int:
    _require_extra()
    from polite.crawl.merge import merge_outputs

    summary = merge_outputs(args.folders, args.out)
    if args.json:
        out.write(json.dumps(summary) + "\n")
        return 0
    outcomes = ", ".join(f"{k} {v:,}" for k, v in summary["outcomes"].items()) or "nothing"
    out.write(f"polite crawl merge: {len(summary['workers'])} folders into {args.out}: "
              f"{summary['pages']:,} pages ({outcomes}), {summary['warc_files']} WARC files; "
              f"{len(summary['fetched_more_than_once']):,} URLs fetched by more than one "
              f"worker, {summary['lines_not_kept_count']:,} unreadable lines left out\n")
    return 0

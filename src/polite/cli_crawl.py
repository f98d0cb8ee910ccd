"""``polite crawl``: the options, the progress display and the summary; the crawl itself is
:mod:`polite.crawl`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from polite.config import AT_LEAST_ONE, FLAGS, NON_NEGATIVE, POSITIVE, FloatFlag, IntFlag
from polite.core.usage.vocab import PURPOSES
from polite.errors import ConfigError

if TYPE_CHECKING:
    from polite.crawl import Crawler

__all__ = ["add_crawl_command"]

HEARTBEAT_S = 1.0  # a worker says it is alive this often
ALIVE_S = 5.0  # and is shown as gone when it has not for this long


def add_crawl_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    crawl = commands.add_parser(
        "crawl", help="crawl sites politely (REGP guidance, sitemaps first, WARC output)",
        description="Crawl from the given URLs, obeying robots.txt in every dialect, its "
                    "delays and time windows, and REGP guidance. Writes OUT/pages.jsonl (one "
                    "line per URL decided on) and OUT/warc/*.warc.gz. Started again with the "
                    "same --out, a crawl goes on where it stopped (seeds may be omitted). "
                    "With --store redis://... several processes on several machines share "
                    "one crawl (each its own --out); 'polite crawl status --store "
                    "redis://...' shows its progress, 'polite crawl merge DIR... --out DIR' "
                    "merges the workers' folders.")
    crawl.add_argument("urls", metavar="URL", nargs="*",
                       help="where to start (or: status; merge DIR...)")
    crawl.add_argument("--out", metavar="DIR", help="the crawl's folder")
    crawl.add_argument("--agent", default="polite-crawler",
                       help="the product token robots.txt is read for (default polite-crawler)")
    crawl.add_argument("--user-agent", help="the User-Agent header (default: the agent)")
    crawl.add_argument("--store", default="",
                       help="politeness state and frontier: sqlite:///PATH (default "
                            "OUT/crawl.sqlite), memory://, or redis://HOST:PORT/DB"
                            "[?prefix=CRAWL] for workers sharing one crawl; share it with "
                            "polite serve to be polite together")
    crawl.add_argument("--worker", default="",
                       help="this worker's name in a shared crawl (default HOSTNAME-PID)")
    crawl.add_argument("--lease-s", type=FloatFlag(POSITIVE), default=600.0,
                       help="how long a worker holds a URL before, if it has not answered "
                            "(it died), the URL goes back to the queue (default 600)")
    crawl.add_argument("--scope", choices=["host", "site", "any"], default="host",
                       help="which hosts links may lead to: the seeds' own (default), also "
                            "with or without www., or any")
    crawl.add_argument("--max-pages", type=IntFlag(AT_LEAST_ONE),
                       help="stop after this many pages fetched (default: no limit)")
    crawl.add_argument("--max-depth", type=IntFlag(NON_NEGATIVE),
                       help="links followed from a seed at most (0: the seeds alone)")
    crawl.add_argument("--max-pages-per-host", type=IntFlag(AT_LEAST_ONE), default=100_000,
                       help="a budget per host against traps (default 100000)")
    crawl.add_argument("--concurrency", type=IntFlag(AT_LEAST_ONE), default=64,
                       help="fetches in flight at most (default 64)")
    crawl.add_argument("--per-host", type=IntFlag(AT_LEAST_ONE), default=1,
                       help="fetches in flight to one host at most (default 1)")
    crawl.add_argument("--default-delay-ms", type=IntFlag(NON_NEGATIVE), default=1000,
                       help="spacing where neither robots.txt nor the store sets one "
                            "(default 1000)")
    crawl.add_argument("--max-crawl-delay-s", type=FloatFlag(NON_NEGATIVE), default=60.0,
                       help="robots.txt delays above this are read as this (default 60)")
    crawl.add_argument("--languages", default="",
                       help="comma-separated languages the crawler reads (zh,en); a site "
                            "whose REGP Language shares none is not crawled")
    crawl.add_argument("--no-sitemaps", dest="sitemaps", action="store_false",
                       help="do not read the sitemaps robots.txt names before a site's pages")
    crawl.add_argument("--well-known-sitemaps", action="store_true",
                       help="also try /sitemap.xml and the like when robots.txt names none")
    crawl.add_argument("--purpose", choices=PURPOSES, default=None,
                       help="what the pages are for: a page whose AI-usage preferences "
                            "(robots.txt Content-Usage / Content-Signal, headers, META, "
                            "TDMRep) refuse it is fetched but not kept, like noindex "
                            "(default none: preferences recorded, nothing refused)")
    crawl.add_argument("--revisit", action="store_true",
                       help="keep going: revisit pages when Change-*, Index-page, "
                            "changefreq or lastmod say they are due")
    crawl.add_argument("--max-bytes", type=IntFlag(AT_LEAST_ONE), default=10 * 1024 * 1024,
                       help="a body's cap, counted decoded (default 10 MiB)")
    crawl.add_argument("--no-warc", dest="warc", action="store_false",
                       help="write pages.jsonl only")
    crawl.add_argument("--allow-private", action="store_true",
                       help="also crawl private and loopback addresses")
    crawl.add_argument("--allow-network", dest="allow_networks", action="append", default=[],
                       metavar="NETWORK", help="also crawl the private addresses in NETWORK "
                       "(10.1.0.0/16, or one address; repeatable): the others stay refused")
    crawl.add_argument("--sign-with", metavar="KEY", help="sign every request with this "
                       "Ed25519 key (Web Bot Auth; polite keys new); needs polite[identity]")
    crawl.add_argument("--signature-agent", metavar="URL", help="with --sign-with: the URL "
                       "of the key's directory, sent as Signature-Agent (e.g. where polite "
                       "serve --key runs)")
    crawl.add_argument("--max-price", type=FloatFlag(POSITIVE), metavar="USD",
                       help="pay-per-crawl: a page answered 402 with a crawler-price up to "
                            "this is asked again with a signed crawler-max-price, and what it "
                            "was charged recorded (needs --sign-with); without it priced "
                            "pages are skipped, their price recorded")
    crawl.add_argument("--json", action="store_true", help="the summary as JSON, no display")
    crawl.set_defaults(handler=_crawl)


def _crawl(args: argparse.Namespace, out: TextIO) -> int:
    if args.urls[:1] == ["status"]:  # reads the shared store only: no extra needed
        return _status(args, out)
    try:
        from polite.crawl import CrawlSettings
    except ImportError as exc:
        if exc.name not in ("selectolax", "fastwarc"):
            raise
        raise ConfigError(f"polite crawl needs {exc.name}: pip install 'polite[crawl]'"
                          ) from exc
    if args.urls[:1] == ["merge"]:
        return _merge(args, out)
    if not args.out:
        raise ConfigError("--out DIR is required: the crawl's folder")
    settings = CrawlSettings(
        agent=args.agent, user_agent=args.user_agent, scope=args.scope,
        max_pages=args.max_pages, max_depth=args.max_depth,
        max_pages_per_host=args.max_pages_per_host, concurrency=args.concurrency,
        per_host=args.per_host,
        languages=tuple(x.strip() for x in args.languages.split(",") if x.strip()),
        sitemaps=args.sitemaps, well_known_sitemaps=args.well_known_sitemaps,
        revisit=args.revisit, max_bytes=args.max_bytes, warc=args.warc, purpose=args.purpose,
        lease_s=args.lease_s, max_price=args.max_price)
    from polite.cli import _require_public
    from polite.cli_keys import signer_from
    from polite.fetch.robots import networks
    from polite.serve import new_event_loop

    args.allow_networks = networks(args.allow_networks)
    args.signer = signer_from(args.sign_with, args.signature_agent)
    if args.max_price is not None and args.signer is None:
        raise ConfigError("--max-price needs --sign-with: a site charges only a crawler it "
                          "can tell by its signature")
    for url in args.urls:  # before anything is fetched, as polite robots check does
        _require_public(url, args.allow_private, args.allow_networks)
    from polite.cli import EXIT_INTERRUPTED

    unreachable: tuple[type[BaseException], ...] = ()
    if _shared(args.store):
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
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    from polite.cli import EXIT_STORE
    from polite.crawl import CrawlSettings, CrawlStats, StoreUnreachable, open_crawler

    assert isinstance(settings, CrawlSettings)
    folder = Path(args.out)
    shared = _shared(args.store)
    worker = args.worker or f"{socket.gethostname()}-{os.getpid()}"

    def on_store(up: bool, detail: str) -> None:
        # one line when the store goes away, one when it is back: no traceback, no flood
        said = (f"polite crawl: the store {args.store} is back; going on" if up else
                f"polite crawl: the store {args.store} is unreachable ({detail}); waiting "
                f"for it up to {settings.store_patience_s:.0f} s (Ctrl-C stops)")
        print(said, file=sys.stderr, flush=True)

    async with open_crawler(folder, settings, store=args.store,
                            default_delay_s=args.default_delay_ms / 1000,
                            max_crawl_delay_s=args.max_crawl_delay_s,
                            allow_private=args.allow_private,
                            allow_networks=args.allow_networks,
                            worker=worker if shared else "", knobs=FLAGS,
                            on_store=on_store, signer=args.signer) as crawler, \
            _heartbeat(args.store if shared else "", worker, crawler, folder):
        bad = await crawler.add_seeds(args.urls)
        if bad:
            raise ConfigError(f"not an http(s) URL: {', '.join(map(repr, bad))}")
        loop = asyncio.get_running_loop()
        interrupted = 0
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

        def view(stats: CrawlStats) -> Table:
            table = Table.grid(padding=(0, 2))
            skipped = sum(stats.skipped.values())
            table.add_row("fetched", f"{stats.fetched:,}", "skipped", f"{skipped:,}",
                          "failed", f"{stats.failed:,}")
            table.add_row("pages/s", f"{stats.pages_per_s():,.1f}", "hosts waiting",
                          f"{stats.waiting_hosts:,}", "in flight", f"{stats.in_flight:,}")
            table.add_row("queued", f"{stats.queued:,}", "bytes", f"{stats.bytes:,}", "", "")
            return table

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
    from polite.cli import EXIT_INTERRUPTED

    # stopped by Ctrl-C or SIGTERM: a script tells it from a crawl that finished
    status = EXIT_INTERRUPTED if interrupted else 0
    if args.json:
        out.write(json.dumps(summary) + "\n")
        return status
    skipped = ", ".join(f"{kind} {n:,}" for kind, n in sorted(stats.skipped.items())) or "none"
    out.write(f"polite crawl: {stats.fetched:,} pages fetched from {len(stats.hosts):,} hosts, "
              f"{stats.failed:,} failed, skipped: {skipped}; {stats.bytes:,} bytes in "
              f"{summary['seconds']} s ({stats.pages_per_s():,.1f} pages/s)\n")
    totals = ("the store's totals unknown (it did not answer)" if frontier is None else
              f"{frontier['queued']:,} queued, {frontier['fetched']:,} fetched, "
              f"{frontier['skipped']:,} skipped in all runs")
    out.write(f"frontier: {totals}; output in {folder}"
              + (" (stopped: run the same command to go on)" if interrupted else "") + "\n")
    return status


def _shared(store: str) -> bool:
    from polite.storage.url import read_store_url

    return bool(store) and read_store_url(store, FLAGS.store).shared


@contextlib.asynccontextmanager
async def _heartbeat(store: str, worker: str, crawler: Crawler,
                     folder: Path) -> AsyncIterator[None]:
    """While the crawl runs, say every second in the shared store that this worker is alive
    and what it has done (``polite crawl status`` shows it); nothing without a store."""
    if not store:
        yield
        return
    from polite.storage.redis_frontier import RedisFrontier

    frontier = crawler.frontier
    assert isinstance(frontier, RedisFrontier)
    started = time.time()
    lease_s = crawler.settings.lease_s

    def about(ended: bool) -> dict[str, object]:
        stats = crawler.stats
        return {"host": socket.gethostname(), "pid": os.getpid(), "out": str(folder),
                "started": round(started, 3), "fetched": stats.fetched,
                "failed": stats.failed, "skipped": sum(stats.skipped.values()),
                "in_flight": stats.in_flight, "pages_per_s": round(stats.pages_per_s(), 2),
                "ended": ended}

    async with frontier.holding(lease_s, about, beat_s=HEARTBEAT_S):
        yield


def _status(args: argparse.Namespace, out: TextIO) -> int:
    if len(args.urls) > 1:
        raise ConfigError("crawl status takes no URL; name the crawl with --store "
                          "redis://HOST:PORT/DB[?prefix=CRAWL]")
    if not _shared(args.store):
        raise ConfigError("crawl status reads a shared crawl: --store redis://HOST:PORT/DB"
                          "[?prefix=CRAWL]")
    from polite.storage.redis_frontier import RedisFrontier

    async def read() -> dict[str, object]:
        frontier = RedisFrontier.from_url(args.store, knob=FLAGS.store)
        try:
            counts = await frontier.counts()
            waiting, fetched_hosts = await frontier.host_count()
            now, beats = await frontier.workers()
        finally:
            await frontier.close()
        workers = [{"worker": beat.worker, "seconds_since_beat": round(now - beat.at, 1),
                    "alive": not beat.about.get("ended") and now - beat.at < ALIVE_S,
                    **beat.about} for beat in beats]
        return {"frontier": counts._asdict(), "hosts_waiting": waiting,
                "hosts_fetched": fetched_hosts,
                "workers_alive": sum(1 for w in workers if w["alive"]),
                "finished": counts.queued + counts.leased == 0, "workers": workers}

    try:
        status = asyncio.run(read())
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
    from polite.crawl.merge import merge_outputs

    if not args.out:
        raise ConfigError("crawl merge DIR... --out DIR: name the merged folder")
    summary = merge_outputs(args.urls[1:], args.out)
    if args.json:
        out.write(json.dumps(summary) + "\n")
        return 0
    outcomes = ", ".join(f"{k} {v:,}" for k, v in summary["outcomes"].items()) or "nothing"
    out.write(f"polite crawl merge: {len(summary['workers'])} folders into {args.out}: "
              f"{summary['pages']:,} pages ({outcomes}), {summary['warc_files']} WARC files; "
              f"{len(summary['fetched_more_than_once']):,} URLs fetched by more than one "
              f"worker, {summary['lines_not_kept_count']:,} unreadable lines left out\n")
    return 0

"""``polite survey`` and ``polite report``: options and output; the work is
:mod:`polite.survey`."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from polite.cli.common import add_command, resolve
from polite.config import FLAGS, REPORT, SURVEY
from polite.core.text import counted
from polite.errors import ConfigError

if TYPE_CHECKING:
    from polite.survey import SurveyStore
    from polite.survey.harvest import Harvester

__all__ = ["add_survey_commands"]


def add_survey_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]
                        ) -> None:
    add_command(
        commands, SURVEY, _survey,
        help="survey sites' robots.txt and sitemaps (as Roy 2008 did)",
        description="Record each site's robots.txt and its outcome in OUT/survey.sqlite: "
                    "http://DOMAIN/robots.txt, then www.DOMAIN when that answers HTML "
                    "(Roy 2008's two steps). A survey started again with the same --out "
                    "goes on: a site recorded is not fetched again.")
    add_command(
        commands, REPORT, _report,
        help="a survey's report: Roy 2008's tables and figures beside its values",
        description="Write DIR/report/: index.html (every table and figure of Roy 2008 "
                    "beside the values it reported in 2008), tables/*.csv, data/*.parquet "
                    "and figures/*.svg, from DIR/survey.sqlite. Given the folders of a "
                    "shared survey's workers, their union goes to --out (OUT/survey.sqlite "
                    "and OUT/report/). Needs the survey extra.")


def _survey(args: argparse.Namespace, out: TextIO) -> int:
    from polite.survey import import_robots_dir

    resolve(SURVEY, args)
    if not args.out:
        raise ConfigError("--out DIR is required: the survey's folder")
    sources = [args.domains, args.robots_dir, args.warc]
    if sum(source is not None for source in sources) != 1:
        raise ConfigError("give a domain list, --robots-dir FOLDER or --warc FILE (one of "
                          "them)")
    if args.store is not None and args.domains is None:
        raise ConfigError("--store shares a domain list: give DOMAINS")
    target = Path(args.out)
    if args.warc is not None:
        return _warc(Path(args.warc), target, out)
    if args.robots_dir is not None:
        folder = Path(args.robots_dir)
        if not folder.is_dir():
            raise ConfigError(f"--robots-dir {folder}: not a folder")
        store = _open_store(target, {"source": f"--robots-dir {folder.resolve()}"})
        try:
            added, skipped = import_robots_dir(folder, store, time.time())
        finally:
            store.close()
        if skipped:
            print(f"polite: {counted(len(skipped), 'file')} skipped, not named HOST.txt: "
                  f"{', '.join(repr(name) for name in skipped[:5])}"
                  f"{', ...' if len(skipped) > 5 else ''}", file=sys.stderr)
        out.write(f"polite survey: {counted(added, 'site')} recorded from {folder} in "
                  f"{target}\n")
        return 0
    return _harvest(args, target, out)


def _open_store(target: Path, settings: dict[str, str]) -> SurveyStore:
    """The survey's state in ``target``, refused when the survey there was made with other
    ``settings`` (its source, agent, sampling): the two would be counted as one."""
    from polite.survey import SurveyStore

    target.mkdir(parents=True, exist_ok=True)
    store = SurveyStore(target / "survey.sqlite")
    try:
        differ = store.settle(settings)
    except BaseException:
        store.close()
        raise
    if differ:
        store.close()
        what = "; ".join(f"{name} {there!r} there, {here!r} here"
                         for name, there, here in differ)
        raise ConfigError(f"--out {target} holds a survey made otherwise ({what}): give "
                          "another --out, or the same settings to go on with it")
    return store


def _warc(path: Path, target: Path, out: TextIO) -> int:
    from polite.survey.warc import import_robots_warc

    if not path.is_file():
        raise ConfigError(f"--warc {path}: no such file")
    # Common Crawl's robots.txt captures come in many files: each adds to one survey.
    store = _open_store(target, {"source": "--warc captures"})
    try:
        added, skipped = import_robots_warc(path, store, time.time())
    finally:
        store.close()
    out.write(f"polite survey: {counted(added, 'site')} recorded from {path} in {target} "
              f"({counted(skipped, 'record')} not a robots.txt response)\n")
    return 0


def _harvest(args: argparse.Namespace, target: Path, out: TextIO) -> int:
    import asyncio  # by the command that runs a loop, not by every run of polite

    try:
        from polite.fetch.resolve import build_resolver
        from polite.survey.harvest import Harvester, read_domains
        from polite.survey.progress import SurveyProgress
    except ImportError as exc:
        raise ConfigError(f"polite survey needs {exc.name}: pip install 'polite-web[survey]'"
                          ) from exc

    from polite.fetch.robots import networks

    allow_networks = networks(args.allow_network)
    listing = Path(args.domains)
    if not listing.is_file():
        raise ConfigError(f"{listing}: no such file")
    domains = read_domains(listing)
    if args.hosts and args.nameserver:
        raise ConfigError("give --hosts or --nameserver, not both")
    from polite.storage.url import read_store_url

    if args.store is not None and not read_store_url(args.store, FLAGS.store).shared:
        raise ConfigError(f"--store {args.store}: a shared survey needs redis://, rediss:// "
                          "or unix://")
    # What changes what is recorded (not the pace, the timeouts or --allow-private, which
    # a survey goes on with; nor --no-sitemaps, whose survey a later run can add them to).
    store = _open_store(target, {
        "source": f"domain list {listing.resolve()}", "agent": args.agent,
        "scheme": "https" if args.https else "http", "n0": str(args.n0),
        "alpha": str(args.alpha), "max-uris": str(args.max_uris)})
    show = sys.stderr.isatty() if args.progress is None else args.progress
    progress = SurveyProgress(sys.stderr) if show else None

    made: list[Harvester] = []
    interrupted = False

    async def run() -> Harvester:
        resolver = build_resolver(hosts=Path(args.hosts) if args.hosts else None,
                                  nameserver=args.nameserver)
        harvester = Harvester(store, time.time, resolver=resolver,
                              concurrency=args.concurrency, https=args.https,
                              agent=args.agent, connect_timeout_s=args.connect_timeout_s,
                              read_timeout_s=args.read_timeout_s,
                              allow_private=args.allow_private,
                              allow_networks=allow_networks,
                              sitemaps=args.sitemaps, delay_s=args.default_delay_s,
                              n0=args.n0, alpha=args.alpha, max_kept_uris=args.max_uris)
        made.append(harvester)
        if progress is not None:
            harvester.on_site = progress.advance
            harvester.on_start = lambda total: progress.start(total, harvester)
        try:
            if args.store is None:
                await harvester.run(domains)
            else:
                await _shared(args, harvester, domains, target)
        finally:
            if progress is not None:
                progress.stop()
            await resolver.close()
        return harvester

    async def stoppable() -> None:
        """The survey, which Ctrl-C or SIGTERM stops: what is recorded stays recorded and
        the same command goes on from it."""
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        assert main is not None

        def interrupt() -> None:
            nonlocal interrupted
            interrupted = True
            main.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, interrupt)
        try:
            await run()
        except asyncio.CancelledError:
            if not interrupted:
                raise
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    from polite._loop import new_event_loop
    from polite.cli.common import EXIT_INTERRUPTED

    started = time.monotonic()
    loop = new_event_loop("auto")  # uvloop when installed: less CPU per request
    try:
        loop.run_until_complete(stoppable())
    finally:
        loop.close()
        store.close()
    if not made:  # stopped before it began
        return EXIT_INTERRUPTED
    harvester = made[0]
    seconds = time.monotonic() - started
    summary = ", ".join(f"{name} {n:,}" for name, n in sorted(harvester.done.items()))
    files = ", ".join(f"{name} {n:,}" for name, n in sorted(harvester.sitemap_files.items()))
    out.write(f"polite survey: {harvester.surveyed:,} of {len(domains):,} domains surveyed in "
              f"{seconds:.1f} s (robots.txt: {summary or 'none'}; sitemap files: "
              f"{files or 'none'}); state in {target / 'survey.sqlite'}"
              + (" (stopped: run the same command to go on)" if interrupted else "") + "\n")
    if harvester.refused or harvester.refused_files:
        # The survey's settings, not the sites: nothing of them was recorded, and the same
        # command with --allow-private does them.
        what = []
        if harvester.refused:
            some = sorted(harvester.refused)
            what.append(f"{len(some):,} domains ({', '.join(some[:5])}"
                        f"{', ...' if len(some) > 5 else ''})")
        if harvester.refused_files:
            what.append(f"{harvester.refused_files:,} sitemap files")
        print(f"polite: {' and '.join(what)} not surveyed: their addresses are private or "
              "loopback; the same command with --allow-private surveys them (nothing of them "
              "was recorded)", file=sys.stderr)
        if not interrupted:
            return 2
    return EXIT_INTERRUPTED if interrupted else 0


async def _shared(args: argparse.Namespace, harvester: Harvester,
                  domains: list[tuple[int | None, str]], target: Path) -> None:
    """This worker's part of the survey of ``domains`` shared through ``--store``."""
    import os
    import socket

    from polite.storage.redis_frontier import RedisFrontier
    from polite.survey.shared import SharedDomains

    worker = args.worker or f"{socket.gethostname()}-{os.getpid()}"
    frontier = RedisFrontier.from_url(args.store, worker=worker, knob=FLAGS.store)
    shared = SharedDomains(frontier, lease_s=args.lease_s)
    started = time.time()

    def about(ended: bool) -> dict[str, object]:
        return {"host": socket.gethostname(), "pid": os.getpid(), "out": str(target),
                "started": round(started, 3), "fetched": harvester.surveyed,
                "ended": ended}

    try:
        await shared.load(domains)
        if harvester.on_start is not None:
            harvester.on_start(await shared.left())
        async with frontier.holding(args.lease_s, about):
            await harvester.run_shared(shared)
    finally:
        await frontier.close()


def _report(args: argparse.Namespace, out: TextIO) -> int:
    from polite.survey import DEFAULT_AGENTS, Survey, require_extra, write_report

    require_extra()
    if len(args.folders) > 1 or args.out is not None:
        if args.out is None:
            raise ConfigError("several folders: say where their union goes with --out FOLDER")
        from polite.survey.merge import merge_surveys

        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        domains = merge_surveys([Path(f) / "survey.sqlite" for f in args.folders],
                                folder / "survey.sqlite")
        out.write(f"polite report: {domains:,} domains of {len(args.folders)} folders in "
                  f"{folder / 'survey.sqlite'}\n")
    else:
        folder = Path(args.folders[0])
    database = folder / "survey.sqlite"
    if not database.exists():
        raise ConfigError(f"{folder}: no survey here ({database} is missing)")
    agents = tuple(dict.fromkeys(args.agent)) if args.agent else DEFAULT_AGENTS
    started = time.monotonic()
    with Survey(folder, agents=agents, k=args.k, ai_crawlers=_ai_crawlers()) as survey:
        paths = write_report(survey, folder / "report", figures=args.figures)
    out.write(f"polite report: {counted(len(paths), 'file')} in {folder / 'report'} "
              f"({time.monotonic() - started:.1f} s); open {folder / 'report' / 'index.html'}\n")
    return 0


def _ai_crawlers() -> list[tuple[str, str]]:
    """The AI crawlers of the bundled crawler list: (name, robots.txt token)."""
    from polite.core.site.crawlers import Category
    from polite.site.guard import load_crawlers

    return [(c.name, c.robots_token) for c in load_crawlers().crawlers
            if c.category is Category.AI]

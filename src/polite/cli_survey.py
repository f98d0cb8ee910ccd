"""``polite survey`` and ``polite report``: options and output; the work is
:mod:`polite.survey`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TextIO

from polite.errors import ConfigError

__all__ = ["add_survey_commands"]


def add_survey_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]
                        ) -> None:
    survey = commands.add_parser(
        "survey", help="survey sites' robots.txt (seed 004)",
        description="Record each site's robots.txt and its outcome in OUT/survey.sqlite: "
                    "http://DOMAIN/robots.txt, then www.DOMAIN when that answers HTML "
                    "(seed 004's two steps). A survey started again with the same --out "
                    "goes on: a site recorded is not fetched again.")
    survey.add_argument("domains", metavar="DOMAINS", nargs="?",
                        help="a ranked list: 'rank,domain' lines (Tranco, Alexa) or one "
                             "domain a line")
    survey.add_argument("--robots-dir", metavar="FOLDER",
                        help="instead of fetching: robots.txt files named HOST.txt")
    survey.add_argument("--out", required=True, metavar="DIR", help="the survey's folder")
    survey.add_argument("--concurrency", type=int, default=100,
                        help="domains at once (default 100)")
    survey.add_argument("--https", action="store_true", help="start with https://")
    survey.add_argument("--hosts", metavar="FILE",
                        help="resolve names from this hosts-format file only")
    survey.add_argument("--connect-timeout", type=float, default=10.0,
                        help="seconds (default 10, as the seed)")
    survey.add_argument("--read-timeout", type=float, default=30.0,
                        help="seconds (default 30, as the seed)")
    survey.add_argument("--agent", default="polite", help="the User-Agent (default polite)")
    survey.add_argument("--allow-private", action="store_true",
                        help="also fetch from private and loopback addresses")
    survey.set_defaults(handler=_survey)
    report = commands.add_parser(
        "report", help="a survey's report: seed 004's tables and figures beside its values",
        description="Write DIR/report/: index.html (every table and figure of seed 004 "
                    "beside the values it reported in 2008), tables/*.csv, data/*.parquet "
                    "and figures/*.svg, from DIR/survey.sqlite. Needs the survey extra.")
    report.add_argument("folder", metavar="DIR", help="a survey's folder")
    report.add_argument("--agent", action="append", metavar="NAME", dest="agents",
                        help="an agent of the access table (repeat; default: search "
                             "engines and AI crawlers, Googlebot to meta-externalagent)")
    report.add_argument("-k", "--k", type=int, default=5, dest="k",
                        help="ulinks per domain (default 5)")
    report.set_defaults(handler=_report)


def _survey(args: argparse.Namespace, out: TextIO) -> int:
    from polite.survey import SurveyStore, import_robots_dir

    if (args.domains is None) == (args.robots_dir is None):
        raise ConfigError("give a domain list or --robots-dir FOLDER (one of them)")
    target = Path(args.out)
    if args.robots_dir is not None:
        folder = Path(args.robots_dir)
        if not folder.is_dir():
            raise ConfigError(f"--robots-dir {folder}: not a folder")
        target.mkdir(parents=True, exist_ok=True)
        store = SurveyStore(target / "survey.sqlite")
        try:
            added = import_robots_dir(folder, store, time.time())
        finally:
            store.close()
        out.write(f"polite survey: {added:,} sites recorded from {folder} in {target}\n")
        return 0
    return _harvest(args, target, out)


def _harvest(args: argparse.Namespace, target: Path, out: TextIO) -> int:
    import asyncio

    from polite.survey import SurveyStore
    from polite.survey.harvest import Harvester, HostsFile, read_domains

    listing = Path(args.domains)
    if not listing.is_file():
        raise ConfigError(f"{listing}: no such file")
    domains = read_domains(listing)
    if args.concurrency < 1:
        raise ConfigError("--concurrency must be 1 or more")
    target.mkdir(parents=True, exist_ok=True)
    store = SurveyStore(target / "survey.sqlite")

    async def run() -> tuple[int, dict[str, int]]:
        resolver = HostsFile(Path(args.hosts)) if args.hosts else None
        harvester = Harvester(store, time.time, resolver=resolver,
                              concurrency=args.concurrency, https=args.https,
                              agent=args.agent, connect_timeout_s=args.connect_timeout,
                              read_timeout_s=args.read_timeout,
                              allow_private=args.allow_private)
        return await harvester.run(domains), harvester.done

    started = time.monotonic()
    try:
        surveyed, outcomes = asyncio.run(run())
    finally:
        store.close()
    seconds = time.monotonic() - started
    summary = ", ".join(f"{name} {n:,}" for name, n in sorted(outcomes.items())) or "none"
    out.write(f"polite survey: {surveyed:,} of {len(domains):,} domains surveyed in "
              f"{seconds:.1f} s ({summary}); state in {target / 'survey.sqlite'}\n")
    return 0


def _report(args: argparse.Namespace, out: TextIO) -> int:
    from polite.survey import DEFAULT_AGENTS, Survey, require_extra, write_report

    require_extra()
    folder = Path(args.folder)
    agents = tuple(dict.fromkeys(args.agents)) if args.agents else DEFAULT_AGENTS
    started = time.monotonic()
    with Survey(folder, agents=agents, k=args.k) as survey:
        paths = write_report(survey, folder / "report")
    out.write(f"polite report: {len(paths)} files in {folder / 'report'} "
              f"({time.monotonic() - started:.1f} s); open {folder / 'report' / 'index.html'}\n")
    return 0

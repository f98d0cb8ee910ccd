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
        description="Record each site's robots.txt and its outcome in OUT/survey.sqlite. "
                    "Fetching from a domain list is not built yet; --robots-dir reads files "
                    "named HOST.txt instead. A survey started again with the same --out goes "
                    "on: a site recorded is not read again.")
    survey.add_argument("--robots-dir", metavar="FOLDER", required=True,
                        help="robots.txt files named HOST.txt")
    survey.add_argument("--out", required=True, metavar="DIR", help="the survey's folder")
    survey.set_defaults(handler=_survey)
    report = commands.add_parser(
        "report", help="a survey's tables (seed 004, Tables 2 and 3, outcomes, domains)",
        description="Write DIR/report/tables/*.csv from DIR/survey.sqlite.")
    report.add_argument("folder", metavar="DIR", help="a survey's folder")
    report.set_defaults(handler=_report)


def _survey(args: argparse.Namespace, out: TextIO) -> int:
    from polite.survey import SurveyStore, import_robots_dir

    folder = Path(args.robots_dir)
    if not folder.is_dir():
        raise ConfigError(f"--robots-dir {folder}: not a folder")
    target = Path(args.out)
    target.mkdir(parents=True, exist_ok=True)
    store = SurveyStore(target / "survey.sqlite")
    try:
        added = import_robots_dir(folder, store, time.time())
    finally:
        store.close()
    out.write(f"polite survey: {added:,} sites recorded from {folder} in {target}\n")
    return 0


def _report(args: argparse.Namespace, out: TextIO) -> int:
    from polite.survey import SurveyStore, write_tables

    folder = Path(args.folder)
    database = folder / "survey.sqlite"
    if not database.exists():
        raise ConfigError(f"{folder}: no survey here ({database} is missing)")
    store = SurveyStore(database)
    try:
        paths = write_tables(store, folder / "report" / "tables")
    finally:
        store.close()
    for path in paths:
        out.write(f"{path}\n")
    return 0

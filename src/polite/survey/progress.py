"""The survey's progress on stderr (rich): domains done of all, outcomes so far, rate and
time left."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

if TYPE_CHECKING:
    from polite.survey.harvest import Harvester

__all__ = ["SurveyProgress"]


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-- domains/s" if speed is None else f"{speed:,.1f} domains/s")


class _Outcomes(ProgressColumn):
    def __init__(self, owner: SurveyProgress) -> None:
        super().__init__()
        self._owner = owner

    def render(self, task: Task) -> Text:
        harvester = self._owner.harvester
        if harvester is None:
            return Text("")
        robots = " ".join(f"{name} {n:,}" for name, n in sorted(harvester.done.items()))
        files = sum(harvester.sitemap_files.values())
        return Text(f"{robots}  sitemap files {files:,}" if files else robots)


class SurveyProgress:
    """Start it with the number of domains to do and the harvester whose counters it shows;
    the harvester calls :meth:`advance` as each domain ends."""

    def __init__(self, stream: TextIO) -> None:
        self.harvester: Harvester | None = None
        self._progress = Progress(
            TextColumn("survey"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
            _Rate(), TimeRemainingColumn(), _Outcomes(self),
            console=Console(file=stream), refresh_per_second=4, speed_estimate_period=30.0)
        self._task = self._progress.add_task("survey", total=0, start=False)

    def start(self, total: int, harvester: Harvester) -> None:
        self.harvester = harvester
        self._progress.update(self._task, total=total)
        self._progress.start_task(self._task)
        self._progress.start()

    def advance(self, domain: str) -> None:
        self._progress.advance(self._task)

    def stop(self) -> None:
        self._progress.refresh()
        self._progress.stop()

"""``polite.crawl``'s keyword arguments refuse what cannot work, naming the keyword: a
negative page budget had crawled nothing and said nothing; a NaN delay turned politeness
off. The politeness driver refuses such numbers too, the last check behind every surface."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path

import pytest

from polite.clock import WallClock
from polite.crawl import CrawlSettings, open_crawler
from polite.errors import SettingError
from polite.fetch.politeness import Politeness
from polite.fetch.robots import RobotsFetcher, create_client
from polite.storage import MemoryStore

NUMERIC = [f.name for f in dataclasses.fields(CrawlSettings)
           if f.type in ("int", "float", "int | None", "float | None")]
# Where 0 means something: no links followed from the seeds, no redirect followed.
ZERO_MEANS_SOMETHING = {"max_depth", "max_redirects"}


def _bad(name: str) -> list[object]:
    return [math.nan, math.inf, -math.inf, -1, *([] if name in ZERO_MEANS_SOMETHING else [0])]


CASES = [pytest.param(name, value, id=f"{name}={value}")
         for name in NUMERIC for value in _bad(name)]


def test_the_settings_have_numeric_fields() -> None:
    assert {"max_pages", "max_depth", "concurrency", "lease_s", "fetch_deadline_s"} \
        <= set(NUMERIC)


@pytest.mark.parametrize(("name", "value"), CASES)
def test_a_bad_number_is_refused_by_its_keyword(name: str, value: object) -> None:
    with pytest.raises(SettingError) as refused:
        CrawlSettings(**{name: value})  # type: ignore[arg-type]
    assert str(refused.value).startswith(f"{name}={value!r}: must be a ")


def test_zero_is_taken_where_it_means_something() -> None:
    settings = CrawlSettings(max_depth=0, max_redirects=0, max_pages=1)
    assert (settings.max_depth, settings.max_redirects, settings.max_pages) == (0, 0, 1)


@pytest.mark.parametrize("keyword", ["default_delay_s", "max_crawl_delay_s"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
def test_open_crawler_refuses_a_bad_delay_before_making_its_folder(
        tmp_path: Path, keyword: str, value: float) -> None:
    async def run() -> None:
        async with open_crawler(tmp_path / "out", **{keyword: value}):  # type: ignore[arg-type]
            pass

    with pytest.raises(SettingError, match=rf"^{keyword}="):
        asyncio.run(run())
    assert not (tmp_path / "out").exists()


def test_open_crawler_names_the_store_keyword(tmp_path: Path) -> None:
    async def run() -> None:
        async with open_crawler(tmp_path / "out", store="foo://x"):
            pass

    with pytest.raises(SettingError, match=r"^store='foo://x': expected sqlite"):
        asyncio.run(run())


@pytest.mark.parametrize("keyword", ["default_delay_s", "max_crawl_delay_s",
                                     "adaptive_factor", "send_slack_s"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0])
def test_the_politeness_driver_refuses_what_no_surface_should_pass(keyword: str,
                                                                   value: float) -> None:
    clock = WallClock()
    store = MemoryStore(clock)
    client = create_client()
    try:
        robots = RobotsFetcher(client, store, clock, agent="bot")
        with pytest.raises(SettingError, match=rf"^{keyword}="):
            Politeness(robots, store, clock, agent="bot", **{keyword: value})  # type: ignore[arg-type]
    finally:
        asyncio.run(client.aclose())

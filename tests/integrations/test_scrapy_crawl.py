"""Real Scrapy crawls (a CrawlSpider in ``scrapy runspider`` processes) of the loopback
farm with polite's downloader middleware, measured at the origins."""

from __future__ import annotations

import json
import os
import subprocess
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from tests.commands import command_line
from tests.integrations.farm import (
    DELAY_S,
    RATE_S,
    RETRY_AFTER_S,
    Site,
    gaps,
    paused,
)
from tests.serving import polite_serve

# Scrapy runs in the crawls' own processes: the suite's are spared its import
pytestmark = pytest.mark.skipif(find_spec("scrapy") is None, reason="scrapy is not installed")

SPIDER = Path(__file__).with_name("farm_spider.py")
REACTORS = {
    "asyncio": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
    "twisted": "twisted.internet.epollreactor.EPollReactor",
}


def settings(reactor: str = "asyncio", **polite: object) -> dict[str, object]:
    return {
        "DOWNLOADER_MIDDLEWARES": {
            "polite.integrations.scrapy.PoliteDownloaderMiddleware": 543},
        # not a spider setting: start() gives it on the command line
        "TWISTED_REACTOR": REACTORS[reactor],
        "USER_AGENT": "FarmBot/1.0 (+https://example.com/farmbot)",
        "ROBOTSTXT_OBEY": False,  # the middleware reads robots.txt itself
        "POLITE_ALLOW_PRIVATE": True,
        "POLITE_DEFAULT_DELAY": 0.0,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "DEBUG",
        **polite,
    }


def start(tmp: Path, name: str, sites: dict[str, Site], options: dict[str, object]
          ) -> tuple[subprocess.Popen[str], Path]:
    stats = tmp / f"{name}.json"
    options = dict(options)
    reactor = options.pop("TWISTED_REACTOR")
    config = {"start_urls": [site.origin + "/" for site in sites.values()],
              "settings": options, "stats": str(stats)}
    env = {**os.environ, "POLITE_TEST_SPIDER": json.dumps(config)}
    process = subprocess.Popen(command_line("runspider", str(SPIDER), "-s",
                                            f"TWISTED_REACTOR={reactor}", module="scrapy"),
                               env=env, cwd=tmp, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    return process, stats


def finish(process: subprocess.Popen[str], stats: Path) -> tuple[dict[str, Any], str]:
    _, log = process.communicate(timeout=120)
    assert process.returncode == 0, log[-3000:]
    return json.loads(stats.read_text()), log


def crawl(tmp: Path, sites: dict[str, Site], options: dict[str, object]
          ) -> tuple[dict[str, Any], str]:
    return finish(*start(tmp, "crawl", sites, options))


@pytest.mark.parametrize("reactor", ["asyncio", "twisted"])
def test_a_crawl_spider_keeps_each_site_s_delays(farm: dict[str, Site], tmp_path: Path,
                                                  reactor: str) -> None:
    stats, log = crawl(tmp_path, farm, settings(reactor))
    assert REACTORS[reactor].rsplit(".", 1)[1] in log
    for site in farm.values():
        paths = [path for _, path in site.arrivals]
        assert not [p for p in paths if p.startswith("/private")], site.host
        assert {"/", "/p0", "/p1"} <= set(paths), site.host
    assert min(gaps(farm["delay"])) >= DELAY_S
    assert min(gaps(farm["rate"])) >= RATE_S
    # The busy host paused for its Retry-After; the others went on meanwhile.
    pause, others = paused(farm)
    assert pause >= RETRY_AFTER_S
    assert others
    assert [p for _, p in farm["busy"].arrivals].count("/p0") == 2  # retried once, later
    # Refusals reported as Scrapy reports its own.
    assert stats["robotstxt/forbidden"] >= 3
    assert "Forbidden by robots.txt" in log and "Disallow: /private/ (line 3)" in log
    assert stats["polite/backoff/429"] == 1
    assert stats["polite/waited"] >= 3


def test_private_addresses_are_refused_unless_allowed(farm: dict[str, Site],
                                                      tmp_path: Path) -> None:
    stats, log = crawl(tmp_path, {"delay": farm["delay"]},
                       settings(POLITE_ALLOW_PRIVATE=False))
    assert farm["delay"].arrivals == []
    assert stats["polite/refused"] == 1 and "private or loopback" in log
    # The setting to change, as Scrapy spells it; not polite's command-line flag.
    assert "(POLITE_ALLOW_PRIVATE)" in log and "--allow-private" not in log


def test_scrapy_s_own_robots_middleware_with_polite_s_parser(farm: dict[str, Site],
                                                            tmp_path: Path) -> None:
    """ROBOTSTXT_OBEY with ROBOTSTXT_PARSER set to polite's, no polite middleware: Scrapy
    fetches robots.txt itself and asks the parser; the rate site keeps out all but FarmBot."""
    options = settings(ROBOTSTXT_OBEY=True,
                       ROBOTSTXT_PARSER="polite.integrations.scrapy.RobotParser",
                       DOWNLOADER_MIDDLEWARES={})
    stats, _ = crawl(tmp_path, {"delay": farm["delay"], "rate": farm["rate"]},
                     {**options, "USER_AGENT": "OtherBot/1.0"})
    assert [p for _, p in farm["rate"].arrivals] == ["/robots.txt"]
    delay = [p for _, p in farm["delay"].arrivals]
    assert "/p1" in delay and not [p for p in delay if p.startswith("/private")]
    assert stats["robotstxt/forbidden"] >= 2  # the rate site's home, a private link


def both_within_one_delay(farm: dict[str, Site]) -> None:
    """Two processes crawled the same sites: together, still one delay per host."""
    for site in farm.values():
        paths = [path for _, path in site.arrivals if path != "/robots.txt"]
        assert paths.count("/p1") == 2, site.host  # both processes fetched it
        assert not [p for p in paths if p.startswith("/private")], site.host
    assert min(gaps(farm["delay"])) >= DELAY_S
    assert min(gaps(farm["rate"])) >= RATE_S


def two_processes(tmp_path: Path, shared: dict[str, Site], options: dict[str, object]
                  ) -> list[dict[str, Any]]:
    """Two ``scrapy runspider`` processes crawling the same sites at once; their stats."""
    runs = [start(tmp_path, name, shared, options) for name in ("a", "b")]
    return [finish(process, stats)[0] for process, stats in runs]


@pytest.mark.slow
@pytest.mark.parametrize("reactor", ["asyncio", "twisted"])
def test_two_processes_sharing_one_sqlite_store(farm: dict[str, Site], tmp_path: Path,
                                                reactor: str) -> None:
    shared = {"delay": farm["delay"], "rate": farm["rate"]}
    two_processes(tmp_path, shared, settings(
        reactor, POLITE_STORE=f"sqlite:///{tmp_path / 'polite.sqlite'}"))
    both_within_one_delay(shared)


@pytest.mark.slow
@pytest.mark.parametrize("reactor", ["asyncio", "twisted"])
def test_two_processes_sharing_one_redis_store(farm: dict[str, Site], tmp_path: Path,
                                               redis_url: str, redis_prefix: str,
                                               reactor: str) -> None:
    """POLITE_STORE = "redis://…": the slots are claimed in a real redis-server, judged by
    its clock, so the two processes (as on two machines) keep one delay per host; the
    busy site's 429 pauses both."""
    stats = two_processes(tmp_path, farm, settings(
        reactor, POLITE_STORE=f"{redis_url}?prefix={redis_prefix}"))
    both_within_one_delay(farm)
    pause, _ = paused(farm)
    assert pause >= RETRY_AFTER_S
    assert sum(run.get("polite/backoff/429", 0) for run in stats) == 1
    assert all(run["robotstxt/forbidden"] >= 2 for run in stats)


@pytest.mark.slow
@pytest.mark.parametrize("reactor", ["asyncio", "twisted"])
def test_two_processes_sharing_one_polite_serve(farm: dict[str, Site], tmp_path: Path,
                                                reactor: str) -> None:
    shared = {"delay": farm["delay"], "rate": farm["rate"]}
    with polite_serve("--store", "memory://", "--allow-private",
                      "--default-delay-ms", "0") as api:
        two_processes(tmp_path, shared, settings(reactor,
                                                 POLITE_SERVICE_URL=str(api.base_url)))
    both_within_one_delay(shared)

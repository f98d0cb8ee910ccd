"""A CrawlSpider for ``scrapy runspider``: its start URLs, settings and where to write its
stats come from the environment (POLITE_TEST_SPIDER, JSON), so that one file serves every
run (each in its own process: a Twisted reactor cannot be started twice)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.settings.default_settings import EXTENSIONS_BASE
from scrapy.spiders import CrawlSpider, Rule

CONFIG: dict[str, Any] = json.loads(os.environ.get("POLITE_TEST_SPIDER", "{}"))

# Scrapy's remote control (an aiohttp server taking an operator's commands) has no part in
# these crawls. Set to None in EXTENSIONS it would still be imported (Scrapy imports each
# extension the base names, enabled or not: aiohttp and its server, 0.3 s of each crawl
# process's 1.3 s of CPU); left out of the base, it is not.
SETTINGS: dict[str, Any] = {"EXTENSIONS_BASE": {
    path: order for path, order in EXTENSIONS_BASE.items()
    if path != "scrapy.extensions.remote_control.RemoteControl"},
    **CONFIG.get("settings", {})}


class FarmSpider(CrawlSpider):
    name = "farm"
    start_urls = CONFIG.get("start_urls", [])
    custom_settings = SETTINGS
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def parse_page(self, response: Response) -> Iterator[dict[str, object]]:
        yield {"url": response.url, "status": response.status}

    def closed(self, reason: str) -> None:
        stats = self.crawler.stats.get_stats() if self.crawler.stats else {}
        with open(CONFIG["stats"], "w") as out:
            json.dump({k: v for k, v in stats.items() if isinstance(v, int | float | str)},
                      out)

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
from scrapy.spiders import CrawlSpider, Rule

CONFIG: dict[str, Any] = json.loads(os.environ.get("POLITE_TEST_SPIDER", "{}"))


class FarmSpider(CrawlSpider):
    name = "farm"
    start_urls = CONFIG.get("start_urls", [])
    custom_settings = CONFIG.get("settings", {})
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def parse_page(self, response: Response) -> Iterator[dict[str, object]]:
        yield {"url": response.url, "status": response.status}

    def closed(self, reason: str) -> None:
        stats = self.crawler.stats.get_stats() if self.crawler.stats else {}
        with open(CONFIG["stats"], "w") as out:
            json.dump({k: v for k, v in stats.items() if isinstance(v, int | float | str)},
                      out)

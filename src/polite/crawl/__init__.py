"""The polite crawler (``polite crawl``): the REGP crawler of Ge & Ding 2016 on polite's
politeness.

::

    from polite.crawl import CrawlSettings, open_crawler

    async with open_crawler("out", CrawlSettings(agent="MyBot"), on_page=hook) as crawler:
        await crawler.add_seeds(["https://example.com/"])
        stats = await crawler.run()

``hook(page)`` may return (or yield) items, written to ``items.jsonl``, and URLs (``str``)
to crawl as links of the page.
"""

from __future__ import annotations

try:
    from polite.crawl.crawler import (
        Crawler,
        CrawlSettings,
        CrawlStats,
        Page,
        PageHook,
        StoreUnreachable,
    )
    from polite.crawl.output import WriteFailed
    from polite.crawl.setup import open_crawler
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the installed extras
    # the crawl extra's libraries (HTML links, WARC files): said, not a bare traceback
    if exc.name not in ("selectolax", "zlib_ng"):
        raise
    raise ImportError(f"polite.crawl needs {exc.name}: pip install 'polite-web[crawl]'",
                      name=exc.name) from exc

__all__ = ["CrawlSettings", "CrawlStats", "Crawler", "Page", "PageHook", "StoreUnreachable",
           "WriteFailed", "open_crawler"]

"""httpx is imported by the drop-ins only where it is used: by a gate on a running ``polite
serve`` (and by the httpx drop-in itself). Its import, its command line's (click, rich,
pygments) included, cost each Scrapy process a quarter of a second of CPU."""

from __future__ import annotations

from tests.imports import loaded


def test_the_scrapy_and_requests_drop_ins_start_without_httpx() -> None:
    assert loaded("polite.integrations, polite.integrations.scrapy, "
                  "polite.integrations.requests", "httpx") == []

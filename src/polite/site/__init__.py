"""The site's side of robots.txt (Jasani & Kumbharana): middleware for a site's own
application that
serves ``/robots.txt`` from rules kept in SQLite, tells robots from people, verifies the
robots that claim a known name, logs every robot request with the line in force and, as
configured, refuses or throttles the robots that ignore the file; and the configuration page.

>>> from polite.site import SiteGuard, SiteMiddleware, SiteStore
>>> app = SiteMiddleware(app, SiteGuard(SiteStore("site.sqlite")))  # doctest: +SKIP
"""

from __future__ import annotations

from polite.site.guard import DNS_TIMEOUT_S, Resolver, SiteGuard, SystemResolver, load_crawlers
from polite.site.middleware import SiteMiddleware, SiteWSGIMiddleware
from polite.site.store import SiteStore, Version

__all__ = [
    "DNS_TIMEOUT_S",
    "Resolver",
    "SiteGuard",
    "SiteMiddleware",
    "SiteStore",
    "SiteWSGIMiddleware",
    "SystemResolver",
    "Version",
    "load_crawlers",
]

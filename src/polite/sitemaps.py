"""Sitemaps: ``from polite.sitemaps import parse``.

>>> sitemap = parse(b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
...                 b'<url><loc>https://example.com/</loc><priority>0.8</priority></url>'
...                 b'</urlset>')
>>> [(entry.loc, entry.kind, entry.priority) for entry in sitemap]
[('https://example.com/', 'url', 0.8)]
"""

from __future__ import annotations

from polite.core.sitemaps import (
    CHANGEFREQS,
    MAX_ISSUES,
    MAX_SITEMAP_BYTES,
    MAX_SITEMAP_URLS,
    Alternate,
    Entry,
    Format,
    Image,
    Kind,
    News,
    ParseIssue,
    Price,
    Severity,
    Sitemap,
    SitemapParser,
    Video,
    parse,
    parse_rfc822,
    parse_w3c,
)

__all__ = [
    "CHANGEFREQS",
    "MAX_ISSUES",
    "MAX_SITEMAP_BYTES",
    "MAX_SITEMAP_URLS",
    "Alternate",
    "Entry",
    "Format",
    "Image",
    "Kind",
    "News",
    "ParseIssue",
    "Price",
    "Severity",
    "Sitemap",
    "SitemapParser",
    "Video",
    "parse",
    "parse_rfc822",
    "parse_w3c",
]

"""Sitemaps, sans-IO: XML urlsets and indexes, text lists, RSS and Atom feeds, gzip."""

from __future__ import annotations

from polite.core.sitemaps.dates import parse_rfc822, parse_w3c
from polite.core.sitemaps.model import (
    CHANGEFREQS,
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
    Video,
)
from polite.core.sitemaps.parser import MAX_ISSUES, Sitemap, SitemapParser, parse

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

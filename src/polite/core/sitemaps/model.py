"""What a sitemap says, as plain immutable values.

Entries are named tuples: a parser may yield fifty thousand of them per file, and a tuple is
the cheapest record Python builds. Every field but ``loc``, ``kind`` and ``line`` is optional;
a value the file got wrong is left out (``None`` or empty) and reported as an issue, never
guessed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, NamedTuple

from polite.core.robots.model import ParseIssue, Severity

__all__ = [
    "CHANGEFREQS",
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
    "Video",
]

# sitemaps.org protocol, "Sitemap file location" and "Using Sitemap index files": a file holds
# at most 50,000 URLs and 50 MB (52,428,800 bytes) uncompressed.
MAX_SITEMAP_URLS = 50_000
MAX_SITEMAP_BYTES = 52_428_800

# sitemaps.org protocol, <changefreq>.
CHANGEFREQS = frozenset({"always", "hourly", "daily", "weekly", "monthly", "yearly", "never"})

Kind = Literal["url", "sitemap"]
Format = Literal["urlset", "sitemapindex", "text", "rss", "atom"]


class Image(NamedTuple):
    """Google's image extension: one ``<image:image>``."""

    loc: str
    caption: str | None = None
    geo_location: str | None = None
    title: str | None = None
    license: str | None = None


class News(NamedTuple):
    """Google's news extension: the ``<news:news>`` of one URL. ``name`` is ``None`` when the
    file left the publication's name empty (such a record is invalid for Google News)."""

    name: str | None
    language: str | None = None
    publication_date: datetime | None = None
    title: str | None = None
    keywords: tuple[str, ...] = ()
    genres: tuple[str, ...] = ()
    stock_tickers: tuple[str, ...] = ()
    access: str | None = None


class Price(NamedTuple):
    """``<video:price>``: ``value`` is ``None`` when the text is not a plain decimal number."""

    value: float | None
    currency: str | None = None
    type: str | None = None
    resolution: str | None = None


class Video(NamedTuple):
    """Google's video extension: one ``<video:video>``. Fields not named here (TV-show
    details, ``id`` and the like) are kept in ``extra`` as (name, value) pairs."""

    thumbnail_loc: str | None = None
    title: str | None = None
    description: str | None = None
    content_loc: str | None = None
    player_loc: str | None = None
    duration: int | None = None
    expiration_date: datetime | None = None
    rating: float | None = None
    view_count: int | None = None
    publication_date: datetime | None = None
    family_friendly: bool | None = None
    tags: tuple[str, ...] = ()
    category: str | None = None
    restriction: tuple[str, tuple[str, ...]] | None = None
    platform: tuple[str, tuple[str, ...]] | None = None
    prices: tuple[Price, ...] = ()
    requires_subscription: bool | None = None
    uploader: str | None = None
    uploader_info: str | None = None
    live: bool | None = None
    gallery_loc: str | None = None
    gallery_title: str | None = None
    extra: tuple[tuple[str, str], ...] = ()


class Alternate(NamedTuple):
    """An ``<xhtml:link rel="alternate" hreflang=... href=...>`` of a URL."""

    hreflang: str
    href: str


class Entry(NamedTuple):
    """One ``<url>`` (``kind="url"``) or ``<sitemap>`` (``kind="sitemap"``), one line of a
    text sitemap, or one item of a feed. ``line`` is the line of its ``<loc>`` in the
    (decompressed) file (of the item's start in a feed). ``type`` and ``srcloc`` are seed
    000's REGP additions: ``data``, ``list`` or ``other``, and the original page a
    crawler-friendly snapshot stands for."""

    loc: str
    kind: Kind = "url"
    lastmod: datetime | None = None
    changefreq: str | None = None
    priority: float | None = None
    line: int = 0
    type: str | None = None
    srcloc: str | None = None
    title: str | None = None
    images: tuple[Image, ...] = ()
    videos: tuple[Video, ...] = ()
    news: News | None = None
    alternates: tuple[Alternate, ...] = ()
    mobile: bool = False

    def as_json(self) -> dict[str, object]:
        """The entry as JSON values: ``loc``, ``kind`` and ``line`` always, the other fields
        when the file gave them; datetimes in ISO 8601."""
        out: dict[str, object] = {"loc": self.loc, "kind": self.kind, "line": self.line}
        for name, value in zip(self._fields[2:], self[2:], strict=True):
            if name != "line" and value not in (None, (), False):
                out[name] = _json_value(value)
        return out


def _json_value(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a nested record
        return {name: _json_value(item) for name, item in zip(value._fields, value, strict=True)
                if item is not None and item != ()}
    if isinstance(value, tuple):
        return [_json_value(item) for item in value]
    return value

"""Sitemaps: ``from polite.sitemaps import parse``.

>>> sitemap = parse(b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
...                 b'<url><loc>https://example.com/</loc><priority>0.8</priority></url>'
...                 b'</urlset>')
>>> [(entry.loc, entry.kind, entry.priority) for entry in sitemap]
[('https://example.com/', 'url', 0.8)]
"""

from __future__ import annotations

# The same names as the core package, name for name: one list, kept there.
from polite.core.sitemaps import *  # noqa: F403
from polite.core.sitemaps import __all__ as __all__

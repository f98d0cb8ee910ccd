"""The crawler's decisions, pure: which links to follow, what a site's REGP fields ask of
the requests, when a page is due again. The crawler (``polite.crawl``) carries them out."""

from __future__ import annotations

# Everything lives in one module so far; the package is its public face.
from polite.core.crawl.guidance import *  # noqa: F403
from polite.core.crawl.guidance import __all__ as __all__

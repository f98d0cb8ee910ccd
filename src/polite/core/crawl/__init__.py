"""The crawler's decisions, pure: which links to follow, what a site's REGP fields ask of
the requests, when a page is due again. The crawler (``polite.crawl``) carries them out."""

from __future__ import annotations

from polite.core.crawl.guidance import (
    CHANGE_INTERVALS_S,
    PagePlan,
    Scope,
    accept_headers,
    in_scope,
    language_refusal,
    link_key,
    next_visit_s,
    page_plan,
    resolve_link,
)

__all__ = [
    "CHANGE_INTERVALS_S",
    "PagePlan",
    "Scope",
    "accept_headers",
    "in_scope",
    "language_refusal",
    "link_key",
    "next_visit_s",
    "page_plan",
    "resolve_link",
]

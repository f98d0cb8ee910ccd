"""Redirects, followed by polite itself rather than inside an HTTP client: each hop's target
is checked before it is asked for (the private-address guard, and whatever else the caller
holds a hop to: robots.txt, a slot, the walk's hosts), and a chain stops after
:data:`MAX_REDIRECTS` hops. robots.txt and sitemaps go through :func:`follow`; the crawler
puts a redirect's target back in its frontier, where it is checked like any other URL.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urljoin

__all__ = ["MAX_REDIRECTS", "REDIRECTS", "follow", "redirect_target"]

MAX_REDIRECTS = 5  # DESIGN.md: follow up to five hops (RFC 9309 asks for at least five)
REDIRECTS = frozenset({301, 302, 303, 307, 308})

# One request: the redirect's target when the answer is one, else None (the answer is kept).
Hop = Callable[[str], Awaitable[str | None]]
# A hop's target before it is asked for: why it may not be, or None.
Check = Callable[[str], Awaitable[str | None]]


def redirect_target(url: str, status: int, location: str | None) -> str | None:
    """Where an answer to ``url`` sends the client, if it is a redirect with a Location."""
    if status in REDIRECTS and location:
        return urljoin(url, location)
    return None


async def follow(url: str, hop: Hop, check: Check, *,
                 max_redirects: int = MAX_REDIRECTS) -> str | None:
    """Ask for ``url`` with ``hop``, then for each redirect's target once ``check`` lets it,
    ``max_redirects`` hops at most. None when an answer was kept, else why the chain stopped
    (a refused hop, or one hop too many). ``url`` itself is the caller's to check."""
    for number in range(max_redirects + 1):
        if number:
            refusal = await check(url)
            if refusal is not None:
                return f"redirected to {url}: {refusal}"
        target = await hop(url)
        if target is None:
            return None
        url = target
    return f"more than {max_redirects} redirects"

"""Links and robots META tags out of an HTML page, by a real HTML parser (lexbor, through
selectolax): broken markup is read the way browsers read it, never by regular expressions.

``bench/html_links.py`` measures it against lxml on the same pages.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser

from polite.core.robots.meta import RobotsDirectives, combine, parse_meta_content
from polite.core.robots.robotstxt import product_token

__all__ = ["Link", "PageLinks", "extract_links"]

# One walk of the tree finds them all, in document order.
_WANTED = "a[href], area[href], frame[src], iframe[src], base[href], meta[name]"


class Link(NamedTuple):
    href: str
    nofollow: bool  # rel="nofollow" on the link itself


class PageLinks(NamedTuple):
    base: str  # what relative links resolve against: <base href> over the page's URL
    links: list[Link]
    directives: RobotsDirectives  # the page's robots META tags for the agent


def extract_links(html: str, url: str, agent: str) -> PageLinks:
    """Every link of the page in document order (``<a>``, ``<area>``, frames), the
    ``<base href>`` in force (the first, as browsers take it) and the robots META tags
    (``name="robots"`` and the agent's product token) that apply to ``agent``."""
    base: str | None = None
    names = _meta_names(agent)
    contents = []
    links = []
    for node in LexborHTMLParser(html).css(_WANTED):
        tag = node.tag
        attributes = node.attributes
        if tag == "a" or tag == "area":
            href = attributes.get("href")
        elif tag == "meta":
            name = (attributes.get("name") or "").strip().lower()
            content = attributes.get("content")
            if name in names and content is not None:
                contents.append(parse_meta_content(content))
            continue
        elif tag == "base":
            if base is None:
                base = attributes.get("href") or ""
            continue
        else:
            href = attributes.get("src")
        if not href:
            continue
        rel = attributes.get("rel")
        links.append(Link(href, rel is not None and "nofollow" in rel.lower().split()))
    resolved = url
    if base and base.strip():
        resolved = urljoin(url, base.strip())
    return PageLinks(resolved, links, combine(*contents))


@lru_cache(maxsize=64)
def _meta_names(agent: str) -> tuple[str, str]:
    return "robots", product_token(agent).lower()

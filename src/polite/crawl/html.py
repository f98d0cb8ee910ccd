"""Links and robots META tags out of an HTML page, by a real HTML parser (lexbor, through
selectolax): broken markup is read the way browsers read it, never by regular expressions.

``bench/html_links.py`` measures it against lxml on the same pages.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser

from polite.core.robots.meta import RobotsDirectives, combine, parse_meta_content
from polite.core.robots.robotstxt import product_token

__all__ = ["Link", "PageLinks", "extract_links"]

_LINKS = "a[href], area[href], frame[src], iframe[src]"


class Link(NamedTuple):
    href: str
    nofollow: bool  # rel="nofollow" on the link itself


class PageLinks(NamedTuple):
    base: str  # what relative links resolve against: <base href> over the page's URL
    links: list[Link]
    directives: RobotsDirectives  # the page's robots META tags for the agent


def extract_links(html: str, url: str, agent: str) -> PageLinks:
    """Every link of the page in document order (``<a>``, ``<area>``, frames), the
    ``<base href>`` in force and the robots META tags (``name="robots"`` and the agent's
    product token) that apply to ``agent``."""
    tree = LexborHTMLParser(html)
    base = url
    node = tree.css_first("base[href]")
    if node is not None:
        href = node.attributes.get("href")
        if href and href.strip():
            base = urljoin(url, href.strip())
    names = ("robots", product_token(agent).lower())
    contents = []
    for meta in tree.css("meta[name]"):
        attributes = meta.attributes
        name = (attributes.get("name") or "").strip().lower()
        content = attributes.get("content")
        if name in names and content is not None:
            contents.append(parse_meta_content(content))
    links = []
    for node in tree.css(_LINKS):
        attributes = node.attributes
        href = attributes.get("href") if node.tag in ("a", "area") else attributes.get("src")
        if not href:
            continue
        rel = (attributes.get("rel") or "").lower().split()
        links.append(Link(href, "nofollow" in rel))
    return PageLinks(base, links, combine(*contents))

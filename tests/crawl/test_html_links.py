"""Links and robots META tags read from a page: in document order, whether the page takes
the fast path (links from one kind of element, gathered by tag name) or the query across
kinds, and the same as the CSS query over the whole page finds them."""

from __future__ import annotations

import pytest
from selectolax.lexbor import LexborHTMLParser

from polite.crawl.html import extract_links

PAGES = {
    "anchors alone": '<a href="/1">1</a><p><a href="/2" rel="NoFollow">2</a><a>none</a>'
                     '<A HREF="/3">3</A><svg><a href="/4">4</a></svg>',
    "anchors, an area and a frame": '<a href="/1">1</a><iframe src="/f"></iframe>'
                                    '<map><area href="/m"></map><a href="/2">2</a>',
    "base without href first": '<head><base target="_top"><base href="/sub/">'
                               '<base href="/other/"></head><a href="x">x</a>',
    "meta tags": '<meta name="robots" content="noindex"><meta content="x">'
                 '<meta name="Bot" content="nofollow"><a href="/1">1</a>',
    "frames alone": '<frameset><frame src="/a"><frame src="/b"></frameset>',
}


def by_query(html: str) -> list[tuple[str, str]]:
    """Every element the page's links come from, in document order (the reference)."""
    found = []
    for node in LexborHTMLParser(html).css("a[href], area[href], frame[src], iframe[src]"):
        href = node.attributes.get("href" if node.tag in ("a", "area") else "src")
        if href:
            found.append((node.tag, href))
    return found


@pytest.mark.parametrize("name", PAGES)
def test_links_are_those_of_the_query_in_document_order(name: str) -> None:
    html = PAGES[name]
    found = extract_links(html, "http://a.test/dir/page", "Bot/1.0")
    assert [link.href for link in found.links] == [href for _, href in by_query(html)]


def test_rel_nofollow_base_and_meta_are_read_on_either_path() -> None:
    found = extract_links(PAGES["anchors alone"], "http://a.test/", "Bot")
    assert [link.nofollow for link in found.links] == [False, True, False, False]
    base = extract_links(PAGES["base without href first"], "http://a.test/dir/page", "Bot")
    assert base.base == "http://a.test/sub/"
    meta = extract_links(PAGES["meta tags"], "http://a.test/", "Bot/1.0")
    assert meta.directives.noindex and meta.directives.nofollow
    mixed = extract_links('<meta name="robots" content="noindex">' + PAGES[
        "anchors, an area and a frame"], "http://a.test/", "Bot")
    assert mixed.directives.noindex and [link.href for link in mixed.links] == \
        ["/1", "/f", "/m", "/2"]

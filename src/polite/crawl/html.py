"""Links and robots META tags out of an HTML page, by a real HTML parser (lexbor, through
selectolax): broken markup is read the way browsers read it, never by regular expressions.

``bench/html_links.py`` measures it against lxml on the same pages.

The parser's work is bounded. An HTML tree builder walks its stack of open elements for
most start tags (is a ``<p>`` open, in scope?), so its time grows with the square of the
nesting: 80,000 nested ``<div>`` took lexbor 7 to 13 s, a 10 MiB page of them far longer.
Browsers cap the depth (Chromium at 512); here a page with more tags than could cost
anything is first read by a linear scan that keeps the depth the tree builder would reach,
and past :data:`MAX_DEPTH` the start tags that are no link (``<div>``, ``<span>``...) are
turned into text, so links nested deeper are still found; past :data:`MAX_ELEMENTS` start
tags the page is cut. :attr:`PageLinks.cut` says what was done.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser, LexborNode

from polite.core.robots.meta import RobotsDirectives, combine, parse_meta_content
from polite.core.robots.robotstxt import product_token

__all__ = ["MAX_DEPTH", "MAX_ELEMENTS", "Link", "PageLinks", "extract_links", "is_small"]

# Elements nested deeper than this are read flat (Chromium's tree builder caps the depth at
# 512 too: kMaximumHTMLParserDOMTreeDepth); no real page comes near it.
MAX_DEPTH = 512
# Start tags read from one page at most: the tree builder's work is bounded by this times
# the depth (about 0.3 s at the cap on a loaded machine); large real pages have 10,000-50,000.
MAX_ELEMENTS = 200_000
# A page with fewer tags than this is parsed as it is: even nested all the way down, the
# work is bounded (4,096 nested <div> are 30 ms), and the scan would cost more than it saves.
_SCAN_FROM_TAGS = 4_096
# A page with fewer tags than this is parsed where it is asked for (on the event loop): even
# nested all the way down it takes a couple of milliseconds, less than a thread's round trip
# costs the crawl on a page of ordinary size; larger pages go to a thread. Below
# _SCAN_FROM_TAGS: a page parsed on the loop is never scanned.
_INLINE_TAGS = 1_024

# One walk of the tree finds them all, in document order.
_WANTED = "a[href], area[href], frame[src], iframe[src], base[href], meta[name]"
_LINK_TAGS = ("a", "area", "frame", "iframe")


class Link(NamedTuple):
    href: str
    nofollow: bool  # rel="nofollow" on the link itself


class PageLinks(NamedTuple):
    base: str  # what relative links resolve against: <base href> over the page's URL
    links: list[Link]
    directives: RobotsDirectives  # the page's robots META tags for the agent
    cut: str | None = None  # how the page was bounded (flattened, cut), None when it was not


def is_small(html: str) -> bool:
    """Is the page small enough to be parsed on the event loop, its work bounded?"""
    return html.count("<") < _INLINE_TAGS


def extract_links(html: str, url: str, agent: str, *, small: bool = False) -> PageLinks:
    """Every link of the page in document order (``<a>``, ``<area>``, frames), the
    ``<base href>`` in force (the first, as browsers take it) and the robots META tags
    (``name="robots"`` and the agent's product token) that apply to ``agent``. ``small``:
    :func:`is_small` said so, and the page's tags need not be counted again (a page that
    small is parsed as it is)."""
    base: str | None = None
    names = _meta_names(agent)
    contents = []
    links = []
    cut = None
    if not small and html.count("<") >= _SCAN_FROM_TAGS:
        html, cut = _bounded(html)
    for node in _wanted(LexborHTMLParser(html)):
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
            if base is None and "href" in attributes:
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
    return PageLinks(resolved, links, combine(*contents), cut)


def _wanted(tree: LexborHTMLParser) -> list[LexborNode]:
    """The elements links and META tags are read from, in document order. Gathered by tag
    name (a tenth of the time of the CSS query that finds them) when links come from one
    kind of element alone, as on most pages; by the query, in document order across kinds,
    when ``<a>`` and ``<area>`` or frames are mixed."""
    found = {tag: tree.tags(tag) for tag in _LINK_TAGS}
    if sum(1 for nodes in found.values() if nodes) > 1:
        return tree.css(_WANTED)
    heads = [*tree.tags("base"), *tree.tags("meta")]  # apart from the links: order kept
    return heads + [node for nodes in found.values() for node in nodes]


@lru_cache(maxsize=64)
def _meta_names(agent: str) -> tuple[str, str]:
    return "robots", product_token(agent).lower()


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# What the scan needs of the tree builder's rules (WHATWG HTML, 13.2.4.3 and 13.2.6.4.7),
# enough to follow the depth of real pages, sloppy ones included. Where it parts from them
# it keeps elements open that the tree builder closes (deeper, never shallower: an end tag
# that would be ignored must not be taken as closing what follows an attacker's nesting).
_VOID = _names("area base basefont bgsound br col embed frame hr img input keygen link meta "
                  "param source track wbr")
# text up to their end tag, whatever it holds; <plaintext> to the end of the page
_RAW = _names("script style textarea title xmp iframe noembed noframes plaintext")
# never turned into text: what the links are read from
_LINKS = _names("a area frame iframe base meta")
# the document's own elements: a second <body>, or </body> and </html> amid the page, open
# and close nothing
_ROOTS = _names("html head body")
# an end tag reaches through these to its element only when none of them lies between
_SCOPE = _names("applet caption table td th marquee object template")
# "special" elements: the end tag of an ordinary element (</span>) stops at them
_SPECIAL = _names(
    "address applet area article aside base basefont bgsound blockquote br button caption "
    "center col colgroup dd details dir div dl dt embed fieldset figcaption figure footer form "
    "frame frameset h1 h2 h3 h4 h5 h6 header hgroup hr iframe img input keygen li "
    "link listing main marquee menu meta nav noembed noframes noscript object ol p param "
    "plaintext pre script search section select source style summary table tbody td template "
    "textarea tfoot th thead title tr track ul wbr xmp")
# a new <li> (<dd>, <dt>) closes the open one unless one of these other special elements lies
# between
_LIST_FENCE = _SPECIAL - {"address", "div", "p"}
# block start tags close an open <p> (13.2.6.4.7, "close a p element")
_CLOSE_P = _names(
    "address article aside blockquote center details dialog dir div dl fieldset figcaption "
    "figure footer header hgroup main menu nav ol p search section summary ul h1 h2 h3 h4 h5 "
    "h6 pre listing form plaintext table hr xmp li dd dt")
_FORMATTING = _names("a b big code em font i nobr s small strike strong tt u")
_IN_TABLE = _names("caption col colgroup tbody td tfoot th thead tr")
_TABLE_PARTS = _names("table tbody thead tfoot tr")
_TAG = re.compile(r"<(?:(/?)([A-Za-z][^\s/>]*)|!--)")


@lru_cache(maxsize=len(_RAW))
def _raw_end(name: str) -> re.Pattern[str]:
    return re.compile(f"</{name}", re.IGNORECASE)


class _Stack:
    """The stack of open elements, as names, with where each name and each kind of fence
    is in it: every question the scan asks is answered without walking it."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.where: dict[str, list[int]] = {}  # name -> its places, lowest first
        self.scopes: list[int] = []  # places of _SCOPE elements
        self.specials: list[int] = []
        self.list_fences: list[int] = []
        self.foreign = 0  # open <svg> and <math>: "/>" closes an element there

    def push(self, name: str) -> None:
        depth = len(self.names)
        self.names.append(name)
        self.where.setdefault(name, []).append(depth)
        for kind, places in ((_SCOPE, self.scopes), (_SPECIAL, self.specials),
                             (_LIST_FENCE, self.list_fences)):
            if name in kind:
                places.append(depth)
        if name == "svg" or name == "math":
            self.foreign += 1

    def pop_to(self, depth: int) -> list[str]:
        """Pop down to ``depth``; the names popped, the top first."""
        names = self.names
        popped = []
        while len(names) > depth:
            name = names.pop()
            popped.append(name)
            self.where[name].pop()
            for places in (self.scopes, self.specials, self.list_fences):
                if places and places[-1] == len(names):
                    places.pop()
            if name == "svg" or name == "math":
                self.foreign -= 1
        return popped

    def top(self, name: str) -> int:
        places = self.where.get(name)
        return places[-1] if places else -1

    def close(self, name: str, *fences: list[int] | str) -> None:
        """Pop ``name``'s topmost element and all above it, unless an element of a fence
        (a list of places, or a name) lies above it."""
        place = self.top(name)
        if place < 0:
            return
        for fence in fences:
            above = self.top(fence) if isinstance(fence, str) else fence[-1] if fence else -1
            if above > place:
                return
        # The formatting elements closed on the way are opened again before what comes
        # next ("reconstruct the active formatting elements"): they stay counted (all of
        # them: the tree builder keeps three alike, but alike is by their attributes too).
        popped = self.pop_to(place)
        for again in reversed(popped[:-1]):
            if again in _FORMATTING:
                self.push(again)


def _flat(stack: _Stack, name: str, start: int, flat: list[int]) -> bool:
    """Whether the start tag of ``name`` at ``start`` is to be read as text (its offset is
    then in ``flat``): it is nested too deep, and no link."""
    if len(stack.names) < MAX_DEPTH or name in _LINKS:
        return False
    flat.append(start)
    return True


def _bounded(html: str) -> tuple[str, str | None]:
    """``html`` as the tree builder may read it in bounded work: the start tags nested
    deeper than :data:`MAX_DEPTH` that are no link turned into text, the page cut before
    its start tag :data:`MAX_ELEMENTS` + 1; and what was done (``None``: nothing).

    One pass over the tags, each element pushed and popped once: linear."""
    stack = _Stack()
    flat: list[int] = []  # offsets of the "<" turned into "&lt;"
    elements = 0
    cut = None
    pos = 0
    search = _TAG.search
    while (found := search(html, pos)) is not None:
        start = found.start()
        name = found.group(2)
        if name is None:  # a comment, to its end
            end = html.find("-->", found.end())
            if end < 0:
                break
            pos = end + 3
            continue
        close = html.find(">", found.end())
        if close < 0:
            break
        pos = close + 1
        name = name.lower()
        if name in _ROOTS:
            continue
        if found.group(1):  # an end tag
            if stack.foreign:  # in MathML and SVG, the current element's alone
                if stack.names[-1] == name:
                    stack.pop_to(len(stack.names) - 1)
            elif name == "p":
                stack.close(name, stack.scopes, "button")
            elif name == "li":
                stack.close(name, stack.scopes, "ol", "ul")
            elif name in _TABLE_PARTS:  # they close the cells open in them
                stack.close(name, "template")
            elif name != "form":  # </form> takes the form alone out, not what is in it
                stack.close(name, stack.scopes if name in _SPECIAL else stack.specials)
            continue
        elements += 1
        if elements > MAX_ELEMENTS:
            cut = f"cut after {MAX_ELEMENTS:,} elements"
            html = html[:start]
            break
        if name in _RAW:
            if name == "plaintext":
                break
            end_tag = _raw_end(name).search(html, pos)
            if end_tag is None:
                break
            pos = end_tag.start()
            continue
        if stack.foreign:  # MathML and SVG: every tag is an element, "/>" closes it
            if html[close - 1] != "/" and not _flat(stack, name, start, flat):
                stack.push(name)
            continue
        if name in _VOID:
            continue
        if name == "form" and stack.top("form") >= 0:
            continue  # a form in a form is left out
        if name in _IN_TABLE and stack.top("table") < 0:
            continue  # a cell or a row out of any table is left out
        if name == "li":
            stack.close("li", stack.list_fences)
        elif name == "dd" or name == "dt":
            stack.close("dd", stack.list_fences)
            stack.close("dt", stack.list_fences)
        elif (name == "option" or name == "optgroup") and stack.names[-1:] == ["option"]:
            stack.pop_to(len(stack.names) - 1)
        if name in _CLOSE_P:
            stack.close("p", stack.scopes, "button")
        if not _flat(stack, name, start, flat):
            stack.push(name)
    if flat:
        pieces: list[str] = []
        last = 0
        for at in flat:
            pieces += (html[last:at], "&lt;")
            last = at + 1
        pieces.append(html[last:])
        html = "".join(pieces)
        flattened = f"{len(flat):,} start tags past a nesting of {MAX_DEPTH} read as text"
        cut = flattened if cut is None else f"{flattened}; {cut}"
    return html, cut

"""ulinks: a site's most useful pages from its sitemap URLs alone (Roy 2008, section 2.4).

Every URI is split into components, the host first (``www.bookseller.com``, ``books``,
``book17.html``); the components form a prefix tree whose nodes weigh the number of URIs
through them. Then, greedily: among the nodes whose children are all leaves, the one of
least weight has its children folded into it (it becomes a leaf), as long as at least ``k``
leaves remain; when no node can be folded so, the ``k`` heaviest leaves are the ulinks,
heaviest first. The lightest node goes first so that the ulinks cover diverse parts of the
site: a portal's two ulinks are ``/books`` and ``/music``, not ``/books/fiction`` and
``/books/biography``.

Roy 2008 states the stopping rule once with "nodes" ("the number of nodes remaining ... is
at least m") and otherwise speaks of leaves ("fold the leaves ... till the number of leaves
is as small as possible without being lower than m"). Leaves are what is output, so this
module counts leaves: folding stops when it would leave fewer than ``k``. It reproduces the
paper's mp3va.com case, where ``release`` is not folded because that would leave too few.

The paper's future work is here too: a URI may weigh more than one (its ``priority``, or
how recent its ``lastmod`` is) by passing ``weights``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["Ulink", "UriTree", "ulinks"]


@dataclass(eq=False, slots=True)
class _Node:
    name: str
    parent: _Node | None
    depth: int
    weight: float = 0.0
    children: dict[str, _Node] = field(default_factory=dict)
    folded: bool = False  # its children were folded into it
    slash: bool = False  # a URI ended here with a "/"

    def uri(self, scheme: str) -> str:
        names = []
        node: _Node | None = self
        while node is not None:
            names.append(node.name)
            node = node.parent
        names.reverse()
        text = f"{scheme}://" + "/".join(names)
        if self.children or self.folded or self.slash or len(names) == 1:
            text += "/"  # a part of the site (as the seed prints it), or as the URI had it
        return text


@dataclass(frozen=True, slots=True)
class Ulink:
    uri: str
    weight: float


class UriTree:
    """The prefix tree of a site's URIs (one root per host)."""

    def __init__(self) -> None:
        self.roots: dict[str, _Node] = {}
        self.schemes: dict[str, str] = {}
        self.uris = 0

    def add(self, uri: str, weight: float = 1.0) -> bool:
        """Add one URI (``False`` for what is not an http(s) URL with a host)."""
        try:
            parts = urlsplit(uri)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        host = parts.netloc.lower()
        names = [name for name in parts.path.split("/") if name]
        if parts.query:
            names.append(f"{names.pop() if names else ''}?{parts.query}")
        node = self.roots.get(host)
        if node is None:
            node = self.roots[host] = _Node(host, None, 0)
            self.schemes[host] = parts.scheme
        node.weight += weight
        for name in names:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = _Node(name, node, node.depth + 1)
            child.weight += weight
            node = child
        if parts.path.endswith("/") and not parts.query:
            node.slash = True
        self.uris += 1
        return True

    def nodes(self) -> Iterable[_Node]:
        stack = list(self.roots.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def levels(self) -> dict[int, tuple[int, int]]:
        """Nodes and leaves per depth (Roy 2008, Figures 18 and 19)."""
        counts: dict[int, list[int]] = {}
        for node in self.nodes():
            level = counts.setdefault(node.depth, [0, 0])
            level[0] += 1
            level[1] += not node.children
        return {depth: (n, leaves) for depth, (n, leaves) in sorted(counts.items())}


def _scheme_of(tree: UriTree, node: _Node) -> str:
    root = node
    while root.parent is not None:
        root = root.parent
    return tree.schemes[root.name]


def ulinks(uris: Iterable[str] | UriTree, k: int = 5, *,
           weights: Mapping[str, float] | None = None) -> list[Ulink]:
    """The ``k`` ulinks of a site's URIs, heaviest first (fewer when the site has fewer
    leaves). ``weights`` gives a URI a weight other than one."""
    if k < 1:
        raise ValueError("k must be 1 or more")
    if isinstance(uris, UriTree):
        tree = uris
    else:
        tree = UriTree()
        for uri in uris:
            tree.add(uri, 1.0 if weights is None else weights.get(uri, 1.0))
    leaves = sum(1 for node in tree.nodes() if not node.children)

    def key(node: _Node) -> tuple[float, str]:
        return (node.weight, node.uri(_scheme_of(tree, node)))

    candidates: list[tuple[float, str, int, _Node]] = []
    order = 0

    def offer(node: _Node) -> None:
        nonlocal order
        if node.children and all(not child.children for child in node.children.values()):
            order += 1
            heapq.heappush(candidates, (*key(node), order, node))

    for node in list(tree.nodes()):
        offer(node)
    while candidates:
        _, _, _, node = heapq.heappop(candidates)
        remaining = leaves - (len(node.children) - 1)
        if remaining < k:
            continue  # leaves only grow fewer: this node can never be folded
        node.children.clear()
        node.folded = True
        leaves = remaining
        if node.parent is not None:
            offer(node.parent)
    found = [Ulink(node.uri(_scheme_of(tree, node)), node.weight)
             for node in tree.nodes() if not node.children]
    found.sort(key=lambda link: (-link.weight, link.uri))
    return found[:k]

"""ulinks (seed 004, section 2.4): the seed's own examples and properties of the folding."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polite.core.ulinks import Ulink, UriTree, ulinks


def portal() -> list[str]:
    """A portal whose books and music each split into two parts, many pages in each."""
    uris = []
    for part, sections in (("books", ("fiction", "biography")), ("music", ("rock", "jazz"))):
        for section in sections:
            uris += [f"http://www.big-portal.com/{part}/{section}/item{n}.html"
                     for n in range(30 if section == "fiction" else 20)]
    uris += ["http://www.big-portal.com/about.html", "http://www.big-portal.com/help.html"]
    return uris


def test_the_portals_two_ulinks_are_books_and_music() -> None:
    found = ulinks(portal(), k=2)
    assert [link.uri for link in found] == ["http://www.big-portal.com/books/",
                                            "http://www.big-portal.com/music/"]
    assert [link.weight for link in found] == [50, 40]


def test_mp3va_release_is_not_folded_when_that_would_leave_too_few() -> None:
    """Seed 004, 4.2: a few upcoming albums, and release pages one per album ID. Folding
    ``release`` would leave fewer than five leaves, so its IDs stay ulinks."""
    uris = [f"http://www.mp3va.com/upcoming_albums/{name}.html" for name in ("a", "b", "c")]
    uris += [f"http://www.mp3va.com/release/{album}/" for album in range(1010895, 1010901)]
    found = ulinks(uris, k=5)
    assert [link.uri for link in found] == [
        "http://www.mp3va.com/upcoming_albums/",
        "http://www.mp3va.com/release/1010895/", "http://www.mp3va.com/release/1010896/",
        "http://www.mp3va.com/release/1010897/", "http://www.mp3va.com/release/1010898/"]


def test_weights_count_uris_through_a_node_and_other_weights_can_be_given() -> None:
    uris = ["http://e.com/a/1", "http://e.com/a/2", "http://e.com/b/1"]
    # b has one child: folding it leaves as many leaves, so it is folded too
    assert ulinks(uris, k=2) == [Ulink("http://e.com/a/", 2), Ulink("http://e.com/b/", 1)]
    heavy = {"http://e.com/b/1": 5.0}
    assert ulinks(uris, k=2, weights=heavy) == [Ulink("http://e.com/b/", 5.0),
                                                 Ulink("http://e.com/a/", 2.0)]


def test_fewer_leaves_than_k_are_all_given_and_bad_uris_skipped() -> None:
    tree = UriTree()
    assert not tree.add("mailto:x@y") and not tree.add("/relative")
    assert tree.add("https://e.com/") and tree.add("https://e.com/x?y=1")
    assert [link.uri for link in ulinks(tree, k=5)] == ["https://e.com/x?y=1"]
    with pytest.raises(ValueError):
        ulinks([], k=0)


def _components(uri: str) -> list[str]:
    _, _, rest = uri.partition("://")
    return [part for part in rest.split("/") if part]


PATHS = st.lists(st.sampled_from(["a", "b", "c", "d", "x.html", "y.html"]), min_size=0,
                 max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["e.com", "www.e.com"]), PATHS), min_size=1,
                max_size=60), st.integers(min_value=1, max_value=8))
def test_properties(pages: list[tuple[str, list[str]]], k: int) -> None:
    uris = ["http://" + host + "/" + "/".join(path) for host, path in pages]
    tree = UriTree()
    for uri in uris:
        tree.add(uri)
    leaves = sum(1 for node in tree.nodes() if not node.children)
    found = ulinks(uris, k=k)
    assert len(found) == min(k, leaves)  # never folded below k leaves
    weights = [link.weight for link in found]
    assert weights == sorted(weights, reverse=True)  # heaviest first
    for link in found:
        prefix = _components(link.uri)
        through = [uri for uri in uris if _components(uri)[:len(prefix)] == prefix]
        assert through  # every ulink is a prefix of some input URI
        assert link.weight == len(through)  # its weight: the URIs through it


def test_nodes_and_leaves_per_level() -> None:
    tree = UriTree()
    for uri in ("http://e.com/a/1", "http://e.com/a/2", "http://e.com/b", "http://o.org/"):
        tree.add(uri)
    # level 0: the two hosts (o.org a leaf); level 1: a and b (b a leaf); level 2: 1 and 2
    assert tree.levels() == {0: (2, 1), 1: (2, 1), 2: (2, 2)}

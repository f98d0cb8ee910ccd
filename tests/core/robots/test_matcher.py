"""The rank index gives the same answer as trying every rule, and in linear time."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from polite.core.robots.matcher import PathIndex, wildcard_regex
from polite.robots import parse


def _naive_matches(pattern: str, path: str) -> bool:
    """Google's position-set algorithm, written out plainly as the reference."""
    positions = {0}
    for i, ch in enumerate(pattern):
        if ch == "$" and i == len(pattern) - 1:
            return len(path) in positions
        if ch == "*":
            positions = set(range(min(positions), len(path) + 1))
        else:
            positions = {p + 1 for p in positions if p < len(path) and path[p] == ch}
            if not positions:
                return False
    return True


def _naive_best(entries: list[tuple[str, int, int]], path: str) -> int:
    best, best_rank = -1, None
    for pattern, rank, payload in entries:
        if _naive_matches(pattern, path) and (best_rank is None or rank > best_rank):
            best, best_rank = payload, rank
    return best


ALPHABET = "/ab*$"
patterns = st.text(alphabet=ALPHABET, min_size=0, max_size=8)
paths = st.text(alphabet="/ab$", min_size=0, max_size=12)


@settings(max_examples=400, deadline=None)
@given(st.lists(patterns, min_size=1, max_size=12, unique=True), st.lists(paths, max_size=10),
       st.randoms(use_true_random=False))
def test_index_agrees_with_trying_every_rule(
    pats: list[str], queries: list[str], rnd: object
) -> None:
    # Distinct ranks, as the dialects guarantee (length*2+allow, or line numbers).
    entries = [(p, i * 3 + 1, i) for i, p in enumerate(pats)]
    rnd.shuffle(entries)  # type: ignore[attr-defined]
    index = PathIndex(entries)
    for path in queries:
        assert index.lookup(path) == _naive_best(entries, path), (entries, path)


@settings(max_examples=300, deadline=None)
@given(patterns, paths)
def test_wildcard_regex_matches_like_googles_algorithm(pattern: str, path: str) -> None:
    matched = re.match(wildcard_regex(pattern), path, re.DOTALL) is not None
    assert matched is _naive_matches(pattern, path)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="/ab*$", max_size=6), min_size=1, max_size=8, unique=True),
       st.lists(paths, max_size=8))
def test_plain_prefix_mode_treats_operators_as_text(pats: list[str], queries: list[str]) -> None:
    entries = [(p, -i, i) for i, p in enumerate(pats)]
    index = PathIndex(entries, wildcards=False)
    for path in queries:
        expected = next((i for p, _, i in entries if path.startswith(p)), -1)
        assert index.lookup(path) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="/a\xff\x00*$", max_size=5), min_size=1, max_size=10,
                unique=True),
       st.lists(st.text(alphabet="/a\xff\x00", max_size=7), max_size=10))
def test_index_agrees_at_the_edges_of_the_octet_range(pats: list[str], queries: list[str]
                                                      ) -> None:
    # Each key's paths end where its last octet is incremented: "\xff" and "\x00" probe that.
    entries = [(p, i * 3 + 1, i) for i, p in enumerate(pats)]
    index = PathIndex(entries)
    for path in queries:
        assert index.lookup(path) == _naive_best(entries, path), (entries, path)


def test_exact_prefix_and_wildcard_rules_on_one_key() -> None:
    entries = [("/a", 5, 0), ("/a$", 9, 1), ("/a*b", 20, 2), ("/ab", 3, 3), ("/", 1, 4)]
    index = PathIndex(entries)
    assert [index.lookup(p) for p in ("/a", "/ab", "/axb", "/ac", "/b", "", "/a/")] == [
        1, 2, 2, 0, 4, -1, 0]


def test_pathological_pattern_is_answered_right() -> None:
    # A backtracking matcher never finishes these; bench/robots_bench.py times them.
    robots = parse("User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*a*a*a*a*b\n")
    assert robots.allowed("https://example.com/" + "a" * 5000, "bot")
    assert not robots.allowed("https://example.com/" + "a" * 5000 + "b", "bot")
    anchored = parse("User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*a*a*a*a*b$\n")
    assert anchored.allowed("https://example.com/" + "ab" * 2500 + "a", "bot")
    assert not anchored.allowed("https://example.com/" + "ab" * 2500, "bot")


def test_many_rules_do_not_slow_a_check_down() -> None:
    lines = [f"Disallow: /section{i}/page" for i in range(30_000)]
    robots = parse("User-agent: *\n" + "\n".join(lines) + "\nAllow: /section777/page/ok\n",
                   max_bytes=10_000_000)
    assert not robots.allowed("https://e.com/section29999/page/x", "bot")
    assert robots.allowed("https://e.com/section777/page/ok", "bot")
    assert robots.allowed("https://e.com/section30000/page", "bot")
    decision = robots.decide("https://e.com/section12345/page", "bot")
    assert decision.line == 12_347


RULE_LINES = st.lists(
    st.tuples(st.sampled_from(["Allow", "Disallow"]),
              st.text(alphabet="/ab*$%2F?=.", min_size=0, max_size=8)),
    min_size=0, max_size=10,
)
URL_PATHS = st.text(alphabet="/ab%2F4?=.#é ", max_size=14)


@settings(max_examples=300, deadline=None)
@given(RULE_LINES, st.lists(URL_PATHS, max_size=8),
       st.sampled_from(["rfc9309", "google", "koster1996", "regp"]))
def test_fast_check_agrees_with_the_explained_decision(
    rules: list[tuple[str, str]], paths: list[str], dialect: str
) -> None:
    # allowed() takes the inlined fast path; decide() the plain lookup. They must agree.
    body = "User-agent: *\n" + "".join(f"{k}: {v}\n" for k, v in rules)
    robots = parse(body, dialect)
    for path in paths:
        for url in ("https://e.com/" + path, "http://e.com" + path, "e.com/" + path):
            assert robots.allowed(url, "bot") is robots.decide(url, "bot").allowed, (body, url)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="/ab*$", max_size=9), paths)
def test_wildcard_member_matches_like_googles_algorithm(pattern: str, path: str) -> None:
    from polite.core.robots.matcher import _Member
    assert _Member(0, 0, pattern).matches(path) is _naive_matches(pattern, path), pattern


WRITTEN_RULES = st.lists(
    st.tuples(st.sampled_from(["Allow", "Disallow"]),
              st.text(alphabet="/ab*$?=.~robots.txt", min_size=0, max_size=10)),
    min_size=1, max_size=10,
)
# characters RFC 9309 escapes (space, '"', '<', '^', '|', '{', non-ASCII) and "?", "#", "%"
WRITTEN_PATHS = st.text(alphabet="/ab?=.~\"<^|{ é\x7f#%", max_size=14)


@settings(max_examples=300, deadline=None)
@given(WRITTEN_RULES, st.lists(WRITTEN_PATHS, max_size=12))
def test_a_path_matched_as_written_is_answered_as_normalised(
    rules: list[tuple[str, str]], paths: list[str]
) -> None:
    # Rules without "%" let a check match a URL's path as written after the origin of the
    # URL before it: the answers stay those of the normalised path (decide() normalises).
    body = "User-agent: *\n" + "".join(f"{k}: {v}\n" for k, v in rules)
    robots = parse(body)
    check = robots.checker("bot")
    for path in paths:
        for url in ("https://e.com/" + path, "https://e.com/robots.txt" + path,
                    "https://e.com" + path, "https://e.com.x/" + path):
            assert check(url) is robots.decide(url, "bot").allowed, (body, url)


def test_a_path_with_escaped_characters_is_answered_as_written_and_as_normalised() -> None:
    robots = parse('User-agent: *\nDisallow: /a\nAllow: /a"b\nDisallow: /c$\nAllow: /*x\n')
    check = robots.checker("bot")
    assert not check("https://e.com/a")  # the origin is read here
    assert check('https://e.com/a"b')
    assert check("https://e.com/a%22b")
    assert check("https://e.com/a\"b#frag")
    assert not check("https://e.com/a b")
    assert not check("https://e.com/c")
    assert not check("https://e.com/c#x")  # the fragment is not part of the path
    assert check("https://e.com/cx")
    assert check("https://e.com/c ")  # "/c%20": not the exact "/c"
    assert check("https://e.com/robots.txt")

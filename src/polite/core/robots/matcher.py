"""Finding the deciding rule for a path in time that does not grow with the rule count.

Every dialect picks, among the rules that match a path, the one with the highest *rank*:
the longest pattern (RFC 9309, Google; Allow wins a tie), the first line (1996 draft) or the
last line (REGP).

The paths a plain prefix ``K`` matches are one interval of the string order: from ``K`` up
to ``K`` with its last character incremented. An exact pattern (``K$``) matches the interval
holding ``K`` alone, and the wildcard patterns whose literal head is ``K`` can only match in
``K``'s interval. Any two such intervals are nested or apart, so one sweep over their ends
cuts the string order into segments, each with a fixed answer: the best plain or exact rule
and the wildcard rules that may still beat it, best first. A lookup is one bisection, then
those wildcard rules, tried by string search: committing to the leftmost occurrence of each
literal piece is exact for patterns whose only operator is ``*``, and it never backtracks,
so matching is linear in the path length whatever the pattern (``/*a*a*a*a*b`` included).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence

__all__ = ["PathIndex", "is_plain", "matches", "wildcard_regex"]

NO_MATCH = -(1 << 62)


def is_plain(pattern: str) -> bool:
    """Whether ``pattern`` is a plain prefix (no ``*``, no ``$``)."""
    return "*" not in pattern and "$" not in pattern


def wildcard_regex(pattern: str) -> str:
    """A regex source that matches a path (anchored at its start) as ``pattern`` does.

    ``*`` matches any run of characters and a final ``$`` anchors the end; a ``$`` elsewhere
    is literal, as in Google's parser.
    """
    anchored = pattern.endswith("$")
    if anchored:
        pattern = pattern[:-1]
    pieces = pattern.split("*")
    out = [re.escape(pieces[0])]
    if len(pieces) == 1:
        return out[0] + (r"\Z" if anchored else "")
    for piece in pieces[1:-1]:
        if piece:
            out.append("(?>.*?" + re.escape(piece) + ")")
    last = pieces[-1]
    if anchored:
        out.append("(?>.*" + re.escape(last) + r"\Z)")
    elif last:
        out.append("(?>.*?" + re.escape(last) + ")")
    return "".join(out)


_STARS = re.compile(r"\*{2,}")


def _simplify(pattern: str) -> str:
    """The same set of paths with fewer operators: ``**`` is ``*``, and a trailing ``*`` or
    ``*$`` adds nothing to a prefix match (``/a/*`` matches what ``/a/`` matches). Ranks are
    computed by the caller from the pattern as written, so they are unaffected."""
    pattern = _STARS.sub("*", pattern)
    shorter = pattern[:-2] if pattern.endswith("*$") else pattern.rstrip("*")
    # A "$" left at the end was a literal one ("/a$*"); it would now read as an anchor.
    return pattern if shorter.endswith("$") else shorter


class _Member:
    """A wildcard rule in its group, matched with string searches: the leftmost occurrence
    of each literal piece, as the module docstring explains, so nothing is compiled."""

    __slots__ = ("anchored", "head", "last", "middle", "needed", "payload", "rank", "starred")

    def __init__(self, rank: int, payload: int, pattern: str, needed: str = "",
                 head: str = "") -> None:
        self.rank, self.payload = rank, payload
        self.anchored = pattern.endswith("$")
        pieces = (pattern[:-1] if self.anchored else pattern).split("*")
        # the group's head, when it is this one: one string held, not two
        self.head = head if head == pieces[0] else pieces[0]
        self.starred = len(pieces) > 1
        self.middle = tuple(p for p in pieces[1:-1] if p)
        self.last = pieces[-1] if self.starred else ""
        # a literal every matching path contains (a cheap first test), held once
        self.needed = next((p for p in (self.last, *self.middle) if p == needed), needed)

    def matches(self, path: str) -> bool:
        if not path.startswith(self.head):
            return False
        at = len(self.head)
        if not self.starred:  # a literal "$" inside, no "*"
            return len(path) == at if self.anchored else True
        for piece in self.middle:
            at = path.find(piece, at)
            if at < 0:
                return False
            at += len(piece)
        if self.anchored:
            return path.endswith(self.last) and len(path) - len(self.last) >= at
        return not self.last or path.find(self.last, at) >= 0


def matches(pattern: str, path: str, *, wildcards: bool = True) -> bool:
    """Whether one pattern matches ``path``, as :class:`PathIndex` matches it (without
    ``wildcards``, a plain prefix): for the few patterns an index leaves to compare."""
    if not wildcards or is_plain(pattern):
        return path.startswith(pattern)
    return _Member(0, 0, pattern).matches(path)


def _needed_literal(rest: str) -> str:
    """The longest literal piece a path must contain for a pattern (after its prefix) to
    match; "" when there is none to look for."""
    return max(rest.removesuffix("$").split("*"), key=len)


# Sorts after every octet string (paths and patterns are octets, see polite.core.urls).
_BEYOND = "\U0010ffff"


def _end(prefix: str) -> str:
    """The least string above every string that starts with ``prefix``."""
    if not prefix:
        return _BEYOND
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


# What a segment of the string order answers: the best plain or exact entry's payload and
# rank (-1 and NO_MATCH for none), and the wildcard members that may beat it, best first,
# each as (rank, needed literal, whether finding it is the whole test, member) so that
# trying one costs no attribute lookups. ``/*x`` (or ``*x``) with no other piece, x not
# starting with "/", matches any path that holds x: no need to call the member.
Chain = tuple[tuple[int, str, bool, _Member], ...]
Segment = tuple[int, int, Chain]
_NOTHING: Segment = (-1, NO_MATCH, ())
# Where intervals start together, the outer ones come first: a prefix or a wildcard head
# encloses the exact pattern on the same key (which holds that key alone).
_PLAIN, _WILD, _EXACT = 0, 1, 2


def _merge(chain: Chain, members: list[_Member]) -> Chain:
    """Wildcard members best first: by rank, then the longer head (the deeper group), then
    the later rule."""
    # The enclosing chain's entries are reused, not built again: nested heads would
    # otherwise cost a new entry per member per level.
    merged = [*chain, *((m.rank, m.needed, _found_by_needed(m), m) for m in members)]
    merged.sort(key=lambda e: (e[0], len(e[3].head), e[3].payload), reverse=True)
    return tuple(merged)


def _found_by_needed(member: _Member) -> bool:
    """Whether a path holding ``member.needed`` matches (see Chain)."""
    return (member.starred and not member.anchored and not member.middle
            and member.last == member.needed != ""
            and (member.head == "" or (member.head == "/" and member.needed[0] != "/")))


class PathIndex:
    """The highest-ranked matching entry for a path; entries are ``(pattern, rank, payload)``.

    With ``wildcards`` false every pattern is a plain prefix (the 1996 draft gives ``*`` and
    ``$`` no meaning).
    """

    __slots__ = ("_bounds", "_segments", "links")

    def __init__(self, entries: Sequence[tuple[str, int, int]], *, wildcards: bool = True) -> None:
        plain: dict[str, tuple[int, int]] = {}
        exact: dict[str, tuple[int, int]] = {}
        wild: dict[str, tuple[int, int]] = {}
        for pattern, rank, payload in entries:
            if wildcards and "*" in pattern:
                pattern = _simplify(pattern)
            if not wildcards or is_plain(pattern):
                table, key = plain, pattern
            elif "*" not in pattern and pattern.find("$") == len(pattern) - 1:
                table, key = exact, pattern[:-1]
            else:
                table, key = wild, pattern
            known = table.get(key)
            if known is None or rank > known[0]:
                table[key] = (rank, payload)

        # Wildcard patterns grouped by their literal head (the text before the first "*" or
        # "$"): a group is tried only for paths that start with its head.
        groups: dict[str, list[_Member]] = {}
        for pattern, (rank, payload) in wild.items():
            cut = min((i for i in (pattern.find("*"), pattern.find("$")) if i >= 0),
                      default=len(pattern))
            head = pattern[:cut]
            groups.setdefault(head, []).append(
                _Member(rank, payload, pattern, _needed_literal(pattern[cut:]), head))

        # Every interval as (start, kind, end, rank, payload), listed kind by kind and sorted
        # by start alone: the sort is stable, so that kinds stay in order where starts tie.
        opens = [(key, _PLAIN, _end(key), rank, payload) for key, (rank, payload) in plain.items()]
        opens += [(head, _WILD, _end(head), 0, 0) for head in groups]
        opens += [(key, _EXACT, key + "\0", rank, payload)  # key + "\0": the next string
                  for key, (rank, payload) in exact.items()]
        opens.sort(key=lambda o: o[0])

        # Where each segment starts, and its answer; of several changes at one place (dicts
        # keep the order of first insertion, and places only grow), the last holds.
        marks: dict[str, Segment] = {}
        inside: list[tuple[str, Segment]] = []  # open intervals: (end, segment inside)
        current = _NOTHING
        links = 0  # wildcard entries in all chains: what nested heads cost
        for start, kind, end, rank, payload in opens:
            while inside and inside[-1][0] <= start:
                closed_at = inside.pop()[0]
                current = inside[-1][1] if inside else _NOTHING
                marks[closed_at] = current
            best, best_rank, chain = current
            if kind == _PLAIN:
                if not best_rank > rank:  # a longer key wins a tie with its prefix
                    best, best_rank = payload, rank
            elif kind == _EXACT:
                if rank > best_rank:
                    best, best_rank = payload, rank
            else:
                chain = _merge(chain, groups[start])
                links += len(chain)
            current = (best, best_rank, chain)
            inside.append((end, current))
            marks[start] = current
        while inside:
            closed_at = inside.pop()[0]
            if closed_at != _BEYOND:
                marks[closed_at] = inside[-1][1] if inside else _NOTHING
        self._bounds = list(marks)
        self._segments = [_NOTHING, *marks.values()]
        self.links = links

    def lookup(self, path: str) -> int:
        """The payload of the best matching entry, or -1 when none matches."""
        best, best_rank, chain = self._segments[bisect_right(self._bounds, path)]
        for rank, needed, whole, member in chain:
            if rank <= best_rank:
                break
            if needed in path and (whole or member.matches(path)):
                return member.payload
        return best

    def checker(
        self,
        allow: Sequence[bool],
        path_of: Callable[[str], str],
        fast_path: Callable[[str], re.Match[str] | None],
        *,
        robots_txt_allowed: bool = True,
    ) -> Callable[[str], bool]:
        """A ``url -> allowed`` function with everything bound locally: the hot path.

        ``fast_path`` matches the common URL whose path needs no normalising and captures
        that path as group 1; other URLs go through ``path_of``. The lookup is
        :meth:`lookup` written out inline.
        """
        bounds, segments = self._bounds, self._segments
        verdicts = bytes(allow) + b"\1"  # payload -1 (no rule) allows
        search = bisect_right

        def allowed(url: str) -> bool:
            m = fast_path(url)
            path = path_of(url) if m is None else m[1]
            best, best_rank, chain = segments[search(bounds, path)]
            if chain:  # most segments have no wildcard rule to try
                for rank, needed, whole, member in chain:
                    if rank <= best_rank:
                        break
                    if needed in path and (whole or member.matches(path)):
                        best = member.payload
                        break
            if verdicts[best]:
                return True
            return robots_txt_allowed and (path == "/robots.txt"
                                           or path.startswith("/robots.txt?"))

        return allowed
